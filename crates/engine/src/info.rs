//! INFO: Valkey's sections, field names and layout (`# Section` headers,
//! `field:value` lines, CRLF, a blank line between sections), so
//! redis_exporter and dashboards read ringkv unchanged.

use crate::server::{Server, Stats};
use crate::table::table;
use std::fmt::Write as _;

const DEFAULT: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
];
/// Output order of every section we know.
const ORDER: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "commandstats",
    "errorstats",
    "latencystats",
    "cluster",
    "keyspace",
    "debug",
    "threads",
];

/// Shown only when asked for by name, as Valkey's.
const BY_NAME_ONLY: &[&str] = &["debug"];

/// Which sections `args` ask for (none = default).
fn wanted(args: &[&[u8]]) -> Vec<&'static str> {
    if args.is_empty() {
        return DEFAULT.to_vec();
    }
    let mut want: Vec<&'static str> = Vec::new();
    for a in args {
        let a = String::from_utf8_lossy(a).to_ascii_lowercase();
        match a.as_str() {
            "default" => want.extend_from_slice(DEFAULT),
            "all" | "everything" => want.extend(ORDER.iter().filter(|s| !BY_NAME_ONLY.contains(s))),
            _ => {
                if let Some(s) = ORDER.iter().find(|s| **s == a) {
                    want.push(s);
                }
            }
        }
    }
    want
}

/// The INFO text for `sections` (the command's arguments).
pub fn render(srv: &mut Server, sections: &[&[u8]], now_ms: i64) -> String {
    let want = wanted(sections);
    let mut out = String::with_capacity(4096);
    let mut n = 0;
    for s in ORDER {
        if !want.contains(s) {
            continue;
        }
        if n > 0 {
            out.push_str("\r\n");
        }
        n += 1;
        match *s {
            "server" => server(srv, &mut out, now_ms),
            "clients" => clients(srv, &mut out),
            "memory" => memory(srv, &mut out),
            "persistence" => persistence(srv, &mut out),
            "stats" => stats(srv, &mut out),
            "replication" => replication(srv, &mut out, now_ms),
            "cpu" => cpu(&mut out),
            "modules" => out.push_str("# Modules\r\n"),
            "commandstats" => commandstats(srv, &mut out),
            "errorstats" => errorstats(&srv.stats, &mut out),
            "latencystats" => latencystats(srv, &mut out),
            "cluster" => out.push_str("# Cluster\r\ncluster_enabled:0\r\n"),
            "keyspace" => keyspace(srv, &mut out, now_ms),
            "debug" => debug(&srv.stats, &mut out),
            "threads" => threads(srv, &mut out),
            _ => {}
        }
    }
    out
}

macro_rules! field {
    ($out:expr, $($arg:tt)*) => {{
        let _ = write!($out, $($arg)*);
        $out.push_str("\r\n");
    }};
}

/// Valkey's `bytesToHuman`: `123B`, `1.50K`, `2.00M`, ...
pub fn human(n: u64) -> String {
    let f = n as f64;
    const K: f64 = 1024.0;
    if f < K {
        format!("{n}B")
    } else if f < K * K {
        format!("{:.2}K", f / K)
    } else if f < K * K * K {
        format!("{:.2}M", f / (K * K))
    } else if f < K * K * K * K {
        format!("{:.2}G", f / (K * K * K))
    } else if f < K * K * K * K * K {
        format!("{:.2}T", f / (K * K * K * K))
    } else {
        format!("{:.2}P", f / (K * K * K * K * K))
    }
}

fn uname() -> String {
    // SAFETY: uname fills a zeroed struct we own; the fields are
    // NUL-terminated C strings on success.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return "Linux".into();
        }
        let f = |s: &[libc::c_char]| {
            std::ffi::CStr::from_ptr(s.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        format!("{} {} {}", f(&u.sysname), f(&u.release), f(&u.machine))
    }
}

fn server(srv: &Server, out: &mut String, now_ms: i64) {
    let c = &srv.config;
    let uptime = srv.uptime_s();
    let backend = if srv.net.backend.is_empty() {
        "none"
    } else {
        srv.net.backend
    };
    let port = if srv.net.tcp_port != 0 {
        srv.net.tcp_port
    } else {
        c.port
    };
    out.push_str("# Server\r\n");
    field!(out, "redis_version:{}", crate::config::REDIS_COMPAT_VERSION);
    field!(out, "server_name:ringkv");
    field!(
        out,
        "valkey_version:{}",
        crate::config::VALKEY_COMPAT_VERSION
    );
    field!(out, "valkey_release_stage:ga");
    field!(out, "ringkv_version:{}", env!("CARGO_PKG_VERSION"));
    field!(out, "redis_git_sha1:00000000");
    field!(out, "redis_git_dirty:0");
    field!(out, "redis_build_id:0");
    let mode = if crate::compat::redis() {
        "redis"
    } else {
        "server"
    };
    field!(out, "{mode}_mode:standalone");
    field!(out, "os:{}", uname());
    field!(out, "arch_bits:{}", usize::BITS);
    field!(out, "monotonic_clock:POSIX clock_gettime");
    field!(out, "multiplexing_api:{backend}");
    field!(out, "io_backend:{backend}");
    field!(out, "atomicvar_api:c11-builtin");
    field!(out, "gcc_version:0.0.0");
    field!(out, "process_id:{}", std::process::id());
    field!(out, "process_supervised:{}", crate::supervisor::mode());
    field!(out, "run_id:{}", srv.run_id);
    field!(out, "tcp_port:{port}");
    field!(out, "server_time_usec:{}", now_ms * 1000);
    field!(out, "uptime_in_seconds:{uptime}");
    field!(out, "uptime_in_days:{}", uptime / 86400);
    field!(out, "hz:{}", c.hz);
    field!(out, "configured_hz:{}", c.hz);
    // Valkey 8's client cron rate; ringkv checks clients every cron.
    field!(out, "clients_hz:{}", c.hz);
    field!(out, "lru_clock:{}", (now_ms / 1000) & 0xFF_FFFF);
    field!(out, "executable:{}", srv.executable);
    field!(
        out,
        "config_file:{}",
        srv.config_file
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    );
    let io = srv.net.io_threads.len();
    field!(out, "io_threads_active:{}", u8::from(io > 0));
    // IO threads taking connections (adaptive), and the main thread.
    let active = if io > 0 { srv.net.io_threads_active } else { 0 };
    field!(out, "io_threads_active_num:{}", active + 1);
    field!(out, "io_threads_maximum_num:{}", c.io_threads);
    let zone = c.get("availability-zone").unwrap_or_default();
    field!(out, "availability_zone:{zone}");
    // One line per kind of listener, numbered from 0 (Valkey's table has
    // no TCP entry under `port 0`).
    let mut n = 0;
    if port != 0 {
        let mut listener = format!("listener{n}:name=tcp");
        for b in &c.bind {
            let _ = write!(listener, ",bind={b}");
        }
        let _ = write!(listener, ",port={port}");
        field!(out, "{listener}");
        n += 1;
    }
    let unix = c.get("unixsocket").unwrap_or_default();
    if !unix.is_empty() {
        field!(out, "listener{n}:name=unix,bind={unix}");
    }
}

fn clients(srv: &Server, out: &mut String) {
    out.push_str("# Clients\r\n");
    field!(out, "connected_clients:{}", srv.clients.len());
    field!(out, "cluster_connections:0");
    field!(out, "maxclients:{}", srv.config.maxclients);
    // Valkey samples these over the last few seconds in its client cron;
    // here they are the largest input not parsed yet and the largest
    // output waiting, right now.
    let sessions = || srv.clients.map.values().flatten();
    let max_in = sessions().map(|s| s.meter.input()).max();
    field!(
        out,
        "client_recent_max_input_buffer:{}",
        max_in.unwrap_or(0)
    );
    let max_out = sessions().map(|s| s.output_shape().list).max();
    field!(
        out,
        "client_recent_max_output_buffer:{}",
        max_out.unwrap_or(0)
    );
    let held = srv
        .pause
        .as_deref()
        .map_or(0, crate::pause::Pause::held_clients);
    field!(out, "blocked_clients:{}", srv.blocking.clients + held);
    field!(out, "tracking_clients:{}", srv.tracking.clients);
    field!(out, "pubsub_clients:{}", srv.pubsub.clients);
    field!(out, "watching_clients:{}", srv.watches.clients());
    field!(out, "clients_in_timeout_table:0");
    field!(out, "total_watched_keys:{}", srv.watches.keys());
    field!(out, "total_blocking_keys:{}", srv.blocking.keys());
    field!(
        out,
        "total_blocking_keys_on_nokey:{}",
        srv.blocking.keys_on_nokey(&srv.clients)
    );
    let (reason, actions, left_ms) = match srv.pause.as_deref() {
        None => ("none", "none", 0),
        Some(p) => (
            p.reason(),
            if p.all() { "all" } else { "write" },
            (p.info_end_ms() - srv.now_ms()).max(0),
        ),
    };
    field!(out, "paused_reason:{reason}");
    field!(out, "paused_actions:{actions}");
    field!(out, "paused_timeout_milliseconds:{left_ms}");
}

/// Resident set size from /proc/self/statm (pages × page size).
pub fn rss_bytes() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no memory-safety preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * page.max(4096) as u64
}

fn total_system_memory() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/meminfo") else {
        return 0;
    };
    s.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Valkey 8's memory section, field for field in its order. Scripts,
/// functions, replication and AOF do not exist in ringkv: their fields
/// read 0.
fn memory(srv: &mut Server, out: &mut String) {
    let mh = crate::memory::Overhead::read(srv);
    let m = &mh.alloc;
    let maxmem = srv.config.maxmemory;
    let sysmem = total_system_memory();
    let policy = srv.config.get("maxmemory-policy").unwrap_or_default();
    out.push_str("# Memory\r\n");
    field!(out, "used_memory:{}", mh.used);
    field!(out, "used_memory_human:{}", human(mh.used));
    field!(out, "used_memory_rss:{}", mh.rss);
    field!(out, "used_memory_rss_human:{}", human(mh.rss));
    field!(out, "used_memory_peak:{}", mh.peak);
    field!(out, "used_memory_peak_human:{}", human(mh.peak));
    field!(out, "used_memory_peak_perc:{:.2}%", mh.peak_perc);
    field!(out, "used_memory_overhead:{}", mh.total);
    field!(out, "used_memory_startup:{}", mh.startup);
    field!(out, "used_memory_dataset:{}", mh.dataset);
    field!(out, "used_memory_dataset_perc:{:.2}%", mh.dataset_perc);
    field!(out, "allocator_allocated:{}", m.allocated);
    field!(out, "allocator_active:{}", m.active);
    field!(out, "allocator_resident:{}", m.resident);
    field!(out, "allocator_muzzy:{}", m.muzzy);
    field!(out, "total_system_memory:{sysmem}");
    field!(out, "total_system_memory_human:{}", human(sysmem));
    // Scripting: the Lua state's own bytes (vm) and the cache's (scripts).
    let (vm_eval, scripts_eval, cached) = srv.scripts.as_ref().map_or((0, 0, 0), |s| {
        (
            s.lua_memory() as u64,
            s.cache_memory() as u64,
            s.len() as u64,
        )
    });
    field!(out, "used_memory_lua:{vm_eval}");
    field!(out, "used_memory_vm_eval:{vm_eval}");
    field!(out, "used_memory_lua_human:{}", human(vm_eval));
    field!(out, "used_memory_scripts_eval:{scripts_eval}");
    field!(out, "number_of_cached_scripts:{cached}");
    let (nfuncs, nlibs, vm_funcs, funcs_mem) = srv.functions.as_ref().map_or((0, 0, 0, 0), |f| {
        (
            f.function_count() as u64,
            f.library_count() as u64,
            f.lua_memory() as u64,
            f.memory() as u64,
        )
    });
    field!(out, "number_of_functions:{nfuncs}");
    field!(out, "number_of_libraries:{nlibs}");
    field!(out, "used_memory_vm_functions:{vm_funcs}");
    field!(out, "used_memory_vm_total:{}", vm_eval + vm_funcs);
    field!(
        out,
        "used_memory_vm_total_human:{}",
        human(vm_eval + vm_funcs)
    );
    field!(out, "used_memory_functions:{funcs_mem}");
    field!(out, "used_memory_scripts:{}", scripts_eval + funcs_mem);
    field!(
        out,
        "used_memory_scripts_human:{}",
        human(scripts_eval + funcs_mem)
    );
    field!(out, "maxmemory:{maxmem}");
    field!(out, "maxmemory_human:{}", human(maxmem));
    field!(out, "maxmemory_policy:{policy}");
    field!(out, "allocator_frag_ratio:{:.2}", mh.allocator_frag());
    field!(out, "allocator_frag_bytes:{}", mh.allocator_frag_bytes());
    field!(out, "allocator_rss_ratio:{:.2}", mh.allocator_rss());
    field!(out, "allocator_rss_bytes:{}", mh.allocator_rss_bytes());
    field!(out, "rss_overhead_ratio:{:.2}", mh.rss_extra());
    field!(out, "rss_overhead_bytes:{}", mh.rss_extra_bytes());
    field!(out, "mem_fragmentation_ratio:{:.2}", mh.total_frag());
    field!(out, "mem_fragmentation_bytes:{}", mh.total_frag_bytes());
    let aof_buffer = crate::aof::buffered(srv);
    field!(out, "mem_not_counted_for_evict:{aof_buffer}");
    field!(out, "mem_replication_backlog:0");
    field!(out, "mem_total_replication_buffers:0");
    field!(out, "mem_clients_slaves:0");
    field!(out, "mem_clients_normal:{}", mh.clients_normal);
    field!(out, "mem_cluster_links:0");
    field!(out, "mem_aof_buffer:{aof_buffer}");
    field!(out, "mem_allocator:{}", m.allocator);
    field!(
        out,
        "mem_overhead_db_hashtable_rehashing:{}",
        mh.rehashing_bytes
    );
    field!(out, "active_defrag_running:{}", srv.defrag.running);
    field!(out, "lazyfree_pending_objects:{}", srv.lazyfree.pending());
    field!(out, "lazyfreed_objects:{}", srv.lazyfree.freed());
}

fn persistence(srv: &Server, out: &mut String) {
    let p = &srv.persist;
    out.push_str("# Persistence\r\n");
    field!(out, "loading:{}", p.loading_in_place() as u8);
    field!(
        out,
        "async_loading:{}",
        (p.is_loading() && !p.loading_in_place()) as u8
    );
    // No fork, so no copy-on-write: a save's extra memory is the copies
    // of keys changed while it runs, counted in used_memory.
    field!(out, "current_cow_peak:0");
    field!(out, "current_cow_size:0");
    field!(out, "current_cow_size_age:0");
    field!(out, "current_fork_perc:0.00");
    let (done, total) = p
        .snapshot
        .as_ref()
        .map_or((0, 0), |s| (s.keys_done, s.keys_total));
    field!(out, "current_save_keys_processed:{done}");
    field!(out, "current_save_keys_total:{total}");
    if let (Some(l), Some((read, size))) = (&p.loading, crate::loading::progress(srv)) {
        let elapsed = l.started.elapsed().as_secs_f64();
        let perc = if size > 0 {
            read as f64 * 100.0 / size as f64
        } else {
            0.0
        };
        let eta = if read > 0 && size > read {
            (elapsed * (size - read) as f64 / read as f64) as u64
        } else {
            1
        };
        field!(out, "loading_start_time:{}", l.start_unix_s);
        field!(out, "loading_total_bytes:{size}");
        field!(out, "loading_rdb_used_mem:0");
        field!(out, "loading_loaded_bytes:{read}");
        field!(out, "loading_loaded_perc:{perc:.2}");
        field!(out, "loading_eta_seconds:{eta}");
    }
    field!(out, "rdb_changes_since_last_save:{}", p.dirty);
    field!(
        out,
        "rdb_bgsave_in_progress:{}",
        p.bgsave_in_progress() as u8
    );
    field!(out, "rdb_last_save_time:{}", p.last_save_s);
    field!(
        out,
        "rdb_last_bgsave_status:{}",
        if p.last_bgsave_ok { "ok" } else { "err" }
    );
    field!(out, "rdb_last_bgsave_time_sec:{}", p.last_bgsave_time_s);
    let current = p
        .snapshot
        .as_ref()
        .map_or(-1, |s| s.started.elapsed().as_secs() as i64);
    field!(out, "rdb_current_bgsave_time_sec:{current}");
    field!(out, "rdb_saves:{}", p.saves);
    field!(out, "rdb_last_cow_size:0");
    field!(out, "rdb_last_load_keys_expired:{}", p.last_load_expired);
    field!(out, "rdb_last_load_keys_loaded:{}", p.last_load_loaded);
    aof_fields(srv, out);
}

fn aof_fields(srv: &Server, out: &mut String) {
    let a = &srv.aof;
    let st = a.status();
    let ok = |b: bool| if b { "ok" } else { "err" };
    field!(out, "aof_enabled:{}", (a.is_on() && !a.temporary) as u8);
    field!(out, "aof_rewrite_in_progress:{}", a.rewrite.is_some() as u8);
    field!(out, "aof_rewrite_scheduled:{}", a.rewrite_scheduled as u8);
    field!(out, "aof_last_rewrite_time_sec:{}", a.last_rewrite_time_s);
    let current = a
        .rewrite_started
        .map_or(-1, |t| t.elapsed().as_secs() as i64);
    field!(out, "aof_current_rewrite_time_sec:{current}");
    field!(out, "aof_last_bgrewrite_status:{}", ok(a.last_rewrite_ok));
    field!(out, "aof_rewrites:{}", a.rewrites);
    field!(
        out,
        "aof_rewrites_consecutive_failures:{}",
        a.consecutive_failures
    );
    field!(
        out,
        "aof_last_write_status:{}",
        ok(st.write_error.is_none())
    );
    field!(out, "aof_last_cow_size:0");
    field!(out, "module_fork_in_progress:0");
    field!(out, "module_fork_last_cow_size:0");
    if a.is_on() && !a.temporary {
        field!(out, "aof_current_size:{}", st.current_size);
        field!(out, "aof_base_size:{}", st.base_size);
        field!(out, "aof_pending_rewrite:{}", a.rewrite_scheduled as u8);
        field!(out, "aof_buffer_length:{}", crate::aof::buffered(srv));
        field!(out, "aof_pending_bio_fsync:{}", st.fsync_in_progress as u8);
        // Writes never wait for a background fsync (crates/persist
        // aof/log.rs `write`), so none is ever delayed.
        field!(out, "aof_delayed_fsync:0");
    }
}

fn stats(srv: &Server, out: &mut String) {
    let st = &srv.stats;
    let net = &srv.net;
    let expired: u64 = srv.keyspace.dbs.iter().map(|d| d.stats.expired_keys).sum();
    let stale = srv
        .keyspace
        .dbs
        .iter()
        .map(|d| d.stats.expired_stale_perc)
        .fold(0.0f64, f64::max);
    let cap: u64 = srv
        .keyspace
        .dbs
        .iter()
        .map(|d| d.stats.expired_time_cap_reached_count)
        .sum();
    out.push_str("# Stats\r\n");
    field!(
        out,
        "total_connections_received:{}",
        st.total_connections_received
    );
    field!(
        out,
        "total_commands_processed:{}",
        st.total_commands_processed
    );
    let repl = srv.repl.traffic();
    field!(out, "instantaneous_ops_per_sec:{}", st.ops_rate.mean());
    // As Valkey's, the totals include replication's bytes; the ACKs a
    // primary reads from its replicas are client input, not replication.
    field!(
        out,
        "total_net_input_bytes:{}",
        net.total_net_input_bytes
            + net.io_sum(|t| &t.bytes_in)
            + repl.replicas.bytes_in
            + repl.from_primary
    );
    field!(
        out,
        "total_net_output_bytes:{}",
        net.total_net_output_bytes + net.io_sum(|t| &t.bytes_out) + repl.replicas.bytes_out
    );
    field!(out, "total_net_repl_input_bytes:{}", repl.from_primary);
    field!(
        out,
        "total_net_repl_output_bytes:{}",
        repl.replicas.bytes_out
    );
    let kbps = |r: &crate::server::Rate| r.mean() as f64 / 1024.0;
    field!(out, "instantaneous_input_kbps:{:.2}", kbps(&st.in_rate));
    field!(out, "instantaneous_output_kbps:{:.2}", kbps(&st.out_rate));
    field!(
        out,
        "instantaneous_input_repl_kbps:{:.2}",
        kbps(&st.repl_in_rate)
    );
    field!(
        out,
        "instantaneous_output_repl_kbps:{:.2}",
        kbps(&st.repl_out_rate)
    );
    field!(
        out,
        "rejected_connections:{}",
        st.rejected_connections + net.rejected_connections
    );
    let feeds = &srv.repl.feeds;
    field!(out, "sync_full:{}", feeds.sync_full);
    field!(out, "sync_partial_ok:{}", feeds.sync_partial_ok);
    field!(out, "sync_partial_err:{}", feeds.sync_partial_err);
    // ringkv's own: MSG_ZEROCOPY sends to replicas (seed 003).
    let zc = crate::replication::primary::zerocopy_stats(srv);
    field!(out, "zerocopy_writes:{}", zc.writes);
    field!(out, "zerocopy_bytes:{}", zc.bytes);
    field!(out, "zerocopy_in_flight:{}", zc.in_flight);
    field!(out, "zerocopy_copied:{}", zc.copied);
    field!(out, "zerocopy_tracker_memory:{}", zc.tracker_bytes);
    field!(out, "expired_keys:{expired}");
    field!(out, "expired_stale_perc:{stale:.2}");
    field!(out, "expired_time_cap_reached_count:{cap}");
    field!(out, "expire_cycle_cpu_milliseconds:0");
    field!(out, "evicted_keys:{}", st.evicted_keys);
    field!(out, "evicted_clients:{}", st.evicted_clients);
    field!(
        out,
        "evicted_scripts:{}",
        srv.scripts.as_ref().map_or(0, |s| s.evicted())
    );
    field!(
        out,
        "total_eviction_exceeded_time:{}",
        srv.evict.total_exceeded_ms()
    );
    field!(
        out,
        "current_eviction_exceeded_time:{}",
        srv.evict.current_exceeded_ms()
    );
    field!(out, "keyspace_hits:{}", st.keyspace_hits);
    field!(out, "keyspace_misses:{}", st.keyspace_misses);
    field!(
        out,
        "pubsub_channels:{}",
        srv.pubsub.len(crate::pubsub::Kind::Channel)
    );
    field!(
        out,
        "pubsub_patterns:{}",
        srv.pubsub.len(crate::pubsub::Kind::Pattern)
    );
    field!(
        out,
        "pubsubshard_channels:{}",
        srv.pubsub.len(crate::pubsub::Kind::Shard)
    );
    field!(out, "latest_fork_usec:0");
    field!(out, "total_forks:0");
    field!(
        out,
        "migrate_cached_sockets:{}",
        srv.migrator.as_ref().map_or(0, |m| m.cached())
    );
    field!(out, "slave_expires_tracked_keys:0");
    let defrag = &srv.defrag;
    field!(out, "active_defrag_hits:{}", defrag.counts.hits);
    field!(out, "active_defrag_misses:{}", defrag.counts.misses);
    field!(out, "active_defrag_key_hits:{}", defrag.counts.key_hits);
    field!(out, "active_defrag_key_misses:{}", defrag.counts.key_misses);
    field!(out, "total_active_defrag_time:{}", defrag.total_ms());
    field!(out, "current_active_defrag_time:{}", defrag.current_ms());
    field!(out, "tracking_total_keys:{}", srv.tracking.total_keys());
    field!(out, "tracking_total_items:{}", srv.tracking.total_items());
    field!(
        out,
        "tracking_total_prefixes:{}",
        srv.tracking.total_prefixes()
    );
    field!(
        out,
        "unexpected_error_replies:{}",
        st.unexpected_error_replies
    );
    field!(out, "total_error_replies:{}", st.total_error_replies);
    field!(out, "dump_payload_sanitizations:0");
    let (io_reads, io_writes) = (net.io_sum(|t| &t.reads), net.io_sum(|t| &t.writes));
    field!(
        out,
        "total_reads_processed:{}",
        st.total_reads_processed + io_reads
    );
    field!(
        out,
        "total_writes_processed:{}",
        st.total_writes_processed + io_writes
    );
    field!(out, "io_threaded_reads_processed:{io_reads}");
    field!(out, "io_threaded_writes_processed:{io_writes}");
    // IO threads free nothing of the engine's: values whose sends are
    // done go back to the execution thread (`ToExec::Spent`).
    field!(out, "io_threaded_freed_objects:0");
    field!(
        out,
        "io_threaded_accept_processed:{}",
        net.io_sum(|t| &t.accepts)
    );
    field!(
        out,
        "io_threaded_poll_processed:{}",
        net.io_sum(|t| &t.polls)
    );
    // Unlike Valkey's, the prefetch pass also runs without IO threads.
    field!(
        out,
        "io_threaded_total_prefetch_batches:{}",
        st.prefetch_batches
    );
    field!(
        out,
        "io_threaded_total_prefetch_entries:{}",
        st.prefetch_entries
    );
    field!(
        out,
        "client_query_buffer_limit_disconnections:{}",
        st.client_query_buffer_limit_disconnections
    );
    field!(
        out,
        "client_output_buffer_limit_disconnections:{}",
        st.client_output_buffer_limit_disconnections
    );
    field!(out, "reply_buffer_shrinks:0");
    field!(out, "reply_buffer_expands:0");
    field!(out, "eventloop_cycles:{}", st.eventloop_cycles);
    field!(out, "eventloop_duration_sum:{}", st.eventloop_ns / 1000);
    field!(
        out,
        "eventloop_duration_cmd_sum:{}",
        st.eventloop_cmd_ns / 1000
    );
    field!(
        out,
        "instantaneous_eventloop_cycles_per_sec:{}",
        st.cycles_rate.mean()
    );
    field!(
        out,
        "instantaneous_eventloop_duration_usec:{}",
        st.cycle_length.mean()
    );
    let acl = &srv.acl;
    field!(out, "acl_access_denied_auth:{}", acl.denied_auth);
    field!(out, "acl_access_denied_cmd:{}", acl.denied_cmd);
    field!(out, "acl_access_denied_key:{}", acl.denied_key);
    field!(out, "acl_access_denied_channel:{}", acl.denied_channel);
}

fn replication(srv: &Server, out: &mut String, now_ms: i64) {
    out.push_str("# Replication\r\n");
    let r = &srv.repl;
    match &r.primary {
        None => field!(out, "role:master"),
        Some(p) => {
            let up = r.link_up();
            let link = p.link.as_deref();
            field!(out, "role:slave");
            field!(out, "master_host:{}", p.host);
            field!(out, "master_port:{}", p.port);
            field!(out, "master_link_status:{}", if up { "up" } else { "down" });
            // The full sync lasts until its RDB is loaded (Valkey's
            // REPL_STATE_TRANSFER covers its load too).
            let transfer = p.state == crate::replication::LinkState::Transfer || p.loading;
            let last_io = match link {
                Some(l) if p.state == crate::replication::LinkState::Connected && !transfer => {
                    (now_ms - l.last_io_ms()).max(0) / 1000
                }
                _ => -1,
            };
            field!(out, "master_last_io_seconds_ago:{last_io}");
            field!(out, "master_sync_in_progress:{}", u8::from(transfer));
            let read = link.map_or(r.offset, |l| l.received().max(r.offset));
            field!(out, "slave_read_repl_offset:{read}");
            field!(out, "slave_repl_offset:{}", r.offset);
            // Valkey 8's buffer of the stream during a dual-channel sync,
            // which ringkv does not do.
            field!(out, "replicas_repl_buffer_size:0");
            field!(out, "replicas_repl_buffer_peak:0");
            if let (true, Some(l)) = (transfer, link) {
                let (total, got) = l.transfer();
                // An EOF-marked RDB has no size: Valkey shows 0 and a
                // negative number left.
                let total = total.max(0);
                let left = total - got as i64;
                let perc = if total > 0 {
                    got as f64 * 100.0 / total as f64
                } else {
                    0.0
                };
                field!(out, "master_sync_total_bytes:{total}");
                field!(out, "master_sync_read_bytes:{got}");
                field!(out, "master_sync_left_bytes:{left}");
                field!(out, "master_sync_perc:{perc:.2}");
                field!(
                    out,
                    "master_sync_last_io_seconds_ago:{}",
                    (now_ms - l.last_io_ms()).max(0) / 1000
                );
            }
            if !up {
                let since = if p.synced {
                    (now_ms - p.down_since_ms).max(0) / 1000
                } else {
                    -1
                };
                field!(out, "master_link_down_since_seconds:{since}");
            }
            field!(
                out,
                "slave_priority:{}",
                srv.config.get("replica-priority").unwrap_or_default()
            );
            field!(
                out,
                "slave_read_only:{}",
                u8::from(srv.config.replica_read_only)
            );
            field!(
                out,
                "replica_announced:{}",
                u8::from(srv.config.get("replica-announced").as_deref() == Some("yes"))
            );
        }
    }
    field!(out, "connected_slaves:{}", r.feeds.replicas.len());
    for (i, rep) in r.feeds.replicas.iter().enumerate() {
        let (acked, at) = rep.feed.as_ref().map_or((0, 0), |f| f.ack());
        let lag = if at > 0 {
            (now_ms - at).max(0) / 1000
        } else {
            0
        };
        field!(
            out,
            "slave{i}:ip={},port={},state={},offset={acked},lag={lag},type=replica",
            rep.ip,
            rep.port,
            rep.state()
        );
    }
    field!(out, "replicas_waiting_psync:0");
    field!(
        out,
        "master_failover_state:{}",
        srv.repl.failover.state_word()
    );
    field!(out, "master_replid:{}", r.replid);
    field!(out, "master_replid2:{}", r.replid2);
    let offset = crate::replication::master_offset(srv);
    field!(out, "master_repl_offset:{offset}");
    field!(out, "second_repl_offset:{}", r.second_offset);
    let backlog = r.feeds.backlog.as_ref();
    field!(out, "repl_backlog_active:{}", u8::from(backlog.is_some()));
    field!(out, "repl_backlog_size:{}", srv.config.repl_backlog_size);
    let (first, histlen) = match backlog {
        Some(b) => (
            b.offset() as i64 + r.shift + 1,
            srv.effects.offset().saturating_sub(b.offset()),
        ),
        None => (0, 0),
    };
    field!(out, "repl_backlog_first_byte_offset:{first}");
    field!(out, "repl_backlog_histlen:{histlen}");
}

fn rusage(who: libc::c_int) -> (f64, f64) {
    // SAFETY: getrusage writes into a zeroed struct we own.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        if libc::getrusage(who, &mut ru) != 0 {
            return (0.0, 0.0);
        }
        ru
    };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_stime), t(ru.ru_utime))
}

/// Valkey 8's `debug` section: the engine loop's longest cycle and
/// busiest one, and what cron and the AOF took on its thread (µs). The
/// AOF's is the hand-off to the AOF thread, and under `appendfsync
/// always` the wait for its fdatasync; without an AOF it stays 0.
fn debug(st: &Stats, out: &mut String) {
    out.push_str("# Debug\r\n");
    field!(
        out,
        "eventloop_duration_aof_sum:{}",
        st.eventloop_aof_ns / 1000
    );
    field!(
        out,
        "eventloop_duration_cron_sum:{}",
        st.eventloop_cron_ns / 1000
    );
    field!(out, "eventloop_duration_max:{}", st.eventloop_max_ns / 1000);
    field!(out, "eventloop_cmd_per_cycle_max:{}", st.eventloop_cmds_max);
}

fn cpu(out: &mut String) {
    let (s, u) = rusage(libc::RUSAGE_SELF);
    let (cs, cu) = rusage(libc::RUSAGE_CHILDREN);
    let (ts, tu) = rusage(libc::RUSAGE_THREAD);
    out.push_str("# CPU\r\n");
    field!(out, "used_cpu_sys:{s:.6}");
    field!(out, "used_cpu_user:{u:.6}");
    field!(out, "used_cpu_sys_children:{cs:.6}");
    field!(out, "used_cpu_user_children:{cu:.6}");
    field!(out, "used_cpu_sys_main_thread:{ts:.6}");
    field!(out, "used_cpu_user_main_thread:{tu:.6}");
}

fn commandstats(srv: &Server, out: &mut String) {
    out.push_str("# Commandstats\r\n");
    let t = table();
    for (i, st) in srv.stats.commands.iter().enumerate() {
        if st.calls == 0 && st.rejected_calls == 0 && st.failed_calls == 0 {
            continue;
        }
        let per = if st.calls > 0 {
            st.usec as f64 / st.calls as f64
        } else {
            0.0
        };
        field!(
            out,
            "cmdstat_{}:calls={},usec={},usec_per_call={per:.2},rejected_calls={},failed_calls={}",
            t.entries[i].fullname,
            st.calls,
            st.usec,
            st.rejected_calls,
            st.failed_calls
        );
    }
}

/// One line per command that has run: the configured percentiles of its
/// call durations in µs (nothing while `latency-tracking` is off).
fn latencystats(srv: &Server, out: &mut String) {
    use crate::latency_stats::{percentile_name, value_at_percentile};
    out.push_str("# Latencystats\r\n");
    if !srv.config.latency_tracking {
        return;
    }
    let t = table();
    for (i, e) in t.entries.iter().enumerate() {
        let Some(h) = srv.stats.latency.get(i) else {
            continue;
        };
        let _ = write!(out, "latency_percentiles_usec_{}:", e.fullname);
        for (n, &p) in srv.config.latency_percentiles.iter().enumerate() {
            let us = value_at_percentile(h, p) as f64 / 1000.0;
            let sep = if n > 0 { "," } else { "" };
            let _ = write!(out, "{sep}{}={us:.3}", percentile_name(p));
        }
        out.push_str("\r\n");
    }
}

fn errorstats(st: &Stats, out: &mut String) {
    out.push_str("# Errorstats\r\n");
    for (kind, n) in &st.errors {
        field!(out, "errorstat_{kind}:count={n}");
    }
}

fn keyspace(srv: &Server, out: &mut String, now_ms: i64) {
    out.push_str("# Keyspace\r\n");
    for (i, db) in srv.keyspace.dbs.iter().enumerate() {
        let keys = db.len();
        if keys == 0 {
            continue;
        }
        let expires = db.expires_len();
        let avg_ttl = avg_ttl(db, now_ms);
        field!(out, "db{i}:keys={keys},expires={expires},avg_ttl={avg_ttl}");
    }
}

/// Average remaining TTL (ms) over a bounded sample of volatile keys, as
/// Valkey estimates it (it samples during active expiry).
fn avg_ttl(db: &store::Db, now_ms: i64) -> i64 {
    if db.expires_len() == 0 {
        return 0;
    }
    let (mut sum, mut n) = (0i64, 0i64);
    for (_, e) in db.iter().take(4096) {
        if let Some(t) = e.expire_at_ms()
            && t > now_ms
        {
            sum += t - now_ms;
            n += 1;
        }
    }
    if n == 0 { 0 } else { sum / n }
}

/// ringkv's own section (in `all`, or asked for by name): per IO thread
/// counters and the execution thread's busy fraction.
fn threads(srv: &Server, out: &mut String) {
    use std::sync::atomic::Ordering::Relaxed;
    let net = &srv.net;
    out.push_str("# Threads\r\n");
    field!(out, "io_threads:{}", net.io_threads.len());
    field!(out, "io_threads_active:{}", net.io_threads_active);
    field!(out, "io_thread_client_moves:{}", net.io_thread_moves);
    for (i, t) in net.io_threads.iter().enumerate() {
        field!(
            out,
            "io_thread_{}:clients={},reads={},writes={},commands={},net_input_bytes={},net_output_bytes={},busy_us={},state={}",
            i + 1,
            t.clients.load(Relaxed),
            t.reads.load(Relaxed),
            t.writes.load(Relaxed),
            t.commands.load(Relaxed),
            t.bytes_in.load(Relaxed),
            t.bytes_out.load(Relaxed),
            t.busy_ns.load(Relaxed) / 1000,
            match t.state.load(Relaxed) {
                crate::IO_THREAD_ACTIVE => "active",
                crate::IO_THREAD_PARKED => "parked",
                _ => "retiring",
            }
        );
    }
    let busy = if net.exec_total_ns > 0 {
        net.exec_busy_ns as f64 / net.exec_total_ns as f64
    } else {
        0.0
    };
    field!(out, "exec_thread_busy:{busy:.4}");
    field!(out, "exec_thread_batches:{}", net.exec_batches);
    field!(out, "exec_batches_on_io_threads:{}", net.exec_batches_on_io);
    field!(out, "exec_thread_sleeps:{}", net.exec_sleeps);
    field!(
        out,
        "exec_thread_awake_cpu_us:{}",
        net.exec_awake_cpu_ns / 1000
    );
    field!(
        out,
        "prefetch_batch_max_size:{}",
        srv.config.prefetch_batch_max_size
    );
}
