//! MEMORY (USAGE STATS DOCTOR MALLOC-STATS PURGE HELP) and INFO memory:
//! reply shapes, Valkey's errors, field names and order.

#[path = "core_util.rs"]
mod util;

use ringkv_engine as engine;
use std::sync::atomic::{AtomicU64, Ordering};
use util::*;

const NOT_INT: &str = "-ERR value is not an integer or out of range\r\n";
const SYNTAX: &str = "-ERR syntax error\r\n";
const MB: u64 = 1024 * 1024;

/// A RESP2 reply, parsed: enough for MEMORY STATS and HELP.
#[derive(Clone, Debug, PartialEq)]
enum R {
    Int(i64),
    Bulk(String),
    Simple(String),
    Arr(Vec<R>),
}

fn parse(s: &str) -> (R, &str) {
    let (head, rest) = s.split_once("\r\n").expect("line");
    let (t, v) = head.split_at(1);
    match t {
        ":" => (R::Int(v.parse().unwrap()), rest),
        "+" => (R::Simple(v.to_string()), rest),
        "$" => {
            let n: usize = v.parse().unwrap();
            (R::Bulk(rest[..n].to_string()), &rest[n + 2..])
        }
        "*" => {
            let n: usize = v.parse().unwrap();
            let mut items = Vec::new();
            let mut rest = rest;
            for _ in 0..n {
                let (item, r) = parse(rest);
                items.push(item);
                rest = r;
            }
            (R::Arr(items), rest)
        }
        _ => panic!("unexpected reply {s:?}"),
    }
}

fn parse_all(s: &str) -> R {
    let (r, rest) = parse(s);
    assert!(rest.is_empty(), "trailing bytes: {rest:?}");
    r
}

/// MEMORY STATS as (name, value) pairs.
fn stats_pairs(e: &mut engine::Engine, c: engine::ClientId) -> Vec<(String, R)> {
    let R::Arr(items) = parse_all(&cmd(e, c, &["memory", "stats"])) else {
        panic!("not an array");
    };
    assert_eq!(items.len() % 2, 0);
    let mut out = Vec::new();
    let mut it = items.into_iter();
    while let (Some(R::Bulk(k)), Some(v)) = (it.next(), it.next()) {
        out.push((k, v));
    }
    out
}

fn usage(e: &mut engine::Engine, c: engine::ClientId, key: &str) -> i64 {
    match parse_all(&cmd(e, c, &["memory", "usage", key])) {
        R::Int(n) => n,
        other => panic!("MEMORY USAGE {key}: {other:?}"),
    }
}

#[test]
fn usage_of_strings_and_hashes_grows_with_the_value() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(cmd(&mut e, c, &["memory", "usage", "missing"]), "$-1\r\n");
    cmd(&mut e, c, &["set", "small", "v"]);
    let big = "x".repeat(100_000);
    cmd(&mut e, c, &["set", "big", &big]);
    let small = usage(&mut e, c, "small");
    let large = usage(&mut e, c, "big");
    assert!(small > 0 && small < 1024, "{small}");
    assert!((100_000..130_000).contains(&large), "{large}");
    cmd(&mut e, c, &["hset", "h", "f0", "v0"]);
    let h1 = usage(&mut e, c, "h");
    for i in 1..1000 {
        let f = format!("field-{i}");
        cmd(&mut e, c, &["hset", "h", &f, "some value of a field"]);
    }
    let h1000 = usage(&mut e, c, "h");
    assert!(h1000 > h1 + 1000 * 20, "{h1} -> {h1000}");
    // SAMPLES is parsed as Valkey parses it.
    assert!(cmd(&mut e, c, &["memory", "usage", "h", "samples", "0"]).starts_with(':'));
    assert!(cmd(&mut e, c, &["memory", "usage", "h", "SAMPLES", "5"]).starts_with(':'));
    assert_eq!(
        cmd(&mut e, c, &["memory", "usage", "h", "samples", "x"]),
        NOT_INT
    );
    assert_eq!(
        cmd(&mut e, c, &["memory", "usage", "h", "samples", "-1"]),
        SYNTAX
    );
    assert_eq!(cmd(&mut e, c, &["memory", "usage", "h", "samples"]), SYNTAX);
    assert_eq!(cmd(&mut e, c, &["memory", "usage", "h", "bogus"]), SYNTAX);
    // Options are checked before the key is looked up.
    assert_eq!(cmd(&mut e, c, &["memory", "usage", "nokey", "x"]), SYNTAX);
    // Another database, another answer.
    cmd(&mut e, c, &["select", "1"]);
    assert_eq!(cmd(&mut e, c, &["memory", "usage", "small"]), "$-1\r\n");
}

#[test]
fn stats_fields_in_valkeys_order() {
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["mset", "a", "1", "b", "2"]);
    cmd(&mut e, c, &["select", "3"]);
    cmd(&mut e, c, &["set", "c", "3"]);
    cmd(&mut e, c, &["expire", "c", "100"]);
    let pairs = stats_pairs(&mut e, c);
    let names: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "peak.allocated",
            "total.allocated",
            "startup.allocated",
            "replication.backlog",
            "clients.slaves",
            "clients.normal",
            "cluster.links",
            "aof.buffer",
            "lua.caches",
            "functions.caches",
            "db.0",
            "db.3",
            "overhead.db.hashtable.lut",
            "overhead.db.hashtable.rehashing",
            "overhead.total",
            "db.dict.rehashing.count",
            "keys.count",
            "keys.bytes-per-key",
            "dataset.bytes",
            "dataset.percentage",
            "peak.percentage",
            "allocator.allocated",
            "allocator.active",
            "allocator.resident",
            "allocator.muzzy",
            "allocator-fragmentation.ratio",
            "allocator-fragmentation.bytes",
            "allocator-rss.ratio",
            "allocator-rss.bytes",
            "rss-overhead.ratio",
            "rss-overhead.bytes",
            "fragmentation",
            "fragmentation.bytes",
        ]
    );
    let get = |name: &str| &pairs.iter().find(|(k, _)| k == name).unwrap().1;
    assert_eq!(get("keys.count"), &R::Int(3));
    let R::Arr(db0) = get("db.0") else {
        panic!("db.0 is a map")
    };
    assert_eq!(db0[0], R::Bulk("overhead.hashtable.main".into()));
    assert!(matches!(db0[1], R::Int(n) if n > 0));
    assert_eq!(db0[2], R::Bulk("overhead.hashtable.expires".into()));
    // Ratios are doubles (bulk strings in RESP2).
    assert!(matches!(get("fragmentation"), R::Bulk(_)));
    assert!(matches!(get("peak.percentage"), R::Bulk(_)));
    // RESP3: a map with doubles.
    cmd(&mut e, c, &["hello", "3"]);
    let r3 = cmd(&mut e, c, &["memory", "stats"]);
    assert!(r3.starts_with("%33\r\n"), "{r3}");
    assert!(r3.contains("$13\r\nfragmentation\r\n,"), "{r3}");
}

static USED: AtomicU64 = AtomicU64::new(0);

/// A probe whose used memory the test sets; the other figures keep every
/// ratio below the doctor's thresholds.
fn probe() -> engine::MemoryStats {
    let used = USED.load(Ordering::Relaxed);
    engine::MemoryStats {
        used,
        allocated: 1000 * MB,
        active: 1000 * MB,
        resident: 1000 * MB,
        allocator: "jemalloc-5.3.0",
        ..Default::default()
    }
}

#[test]
fn doctor_startup_peak_and_dataset_follow_the_probe() {
    let mut e = engine();
    e.set_memory_probe(probe);
    USED.store(3 * MB, Ordering::Relaxed);
    e.server_ready();
    let c = connect(&mut e);
    let doc = bulk_text(&cmd(&mut e, c, &["memory", "doctor"]));
    assert!(
        doc.starts_with("Hi Sam, this instance is empty or is using very little memory"),
        "{doc}"
    );
    USED.store(100 * MB, Ordering::Relaxed);
    let doc = bulk_text(&cmd(&mut e, c, &["memory", "doctor"]));
    assert_eq!(
        doc,
        "Hi Sam, I can't find any memory issue in your instance. I can only account for what \
         occurs on this base.\n"
    );
    let t = bulk_text(&cmd(&mut e, c, &["info", "memory"]));
    assert!(t.contains("\r\nused_memory_startup:3145728\r\n"), "{t}");
    assert!(t.contains("\r\nused_memory_peak:104857600\r\n"), "{t}");
    assert!(t.contains("\r\nused_memory_peak_perc:100.00%\r\n"), "{t}");
    let field = |name: &str| -> u64 { info_value(&t, name).parse().unwrap() };
    assert_eq!(
        field("used_memory_dataset") + field("used_memory_overhead"),
        100 * MB
    );
    assert!(field("used_memory_overhead") >= 3 * MB + field("mem_clients_normal"));
    // The peak stays when usage falls (the cron keeps it too).
    e.cron();
    USED.store(50 * MB, Ordering::Relaxed);
    let doc = bulk_text(&cmd(&mut e, c, &["memory", "doctor"]));
    assert!(
        doc.starts_with("Sam, I detected a few issues in this Valkey instance memory implants:\n\n * Peak memory:"),
        "{doc}"
    );
    assert!(doc.ends_with("I'm here to keep you safe, Sam. I want to help you.\n"));
    let t = bulk_text(&cmd(&mut e, c, &["info", "memory"]));
    assert!(t.contains("\r\nused_memory_peak_perc:50.00%\r\n"), "{t}");
}

#[test]
fn malloc_stats_and_purge_go_to_the_allocator() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(
        cmd(&mut e, c, &["memory", "malloc-stats"]),
        bulk("Stats not supported for the current allocator")
    );
    assert_eq!(cmd(&mut e, c, &["memory", "purge"]), "+OK\r\n");
    e.set_allocator_ops(engine::AllocatorOps {
        stats_text: || "___ Begin jemalloc statistics ___\n".into(),
        purge: || false,
        background_thread: |_| true,
        relocate: None,
    });
    assert_eq!(
        cmd(&mut e, c, &["memory", "malloc-stats"]),
        bulk("___ Begin jemalloc statistics ___\n")
    );
    assert_eq!(
        cmd(&mut e, c, &["memory", "purge"]),
        "-ERR Error purging dirty pages\r\n"
    );
    e.set_allocator_ops(engine::AllocatorOps {
        stats_text: String::new,
        purge: || true,
        background_thread: |_| true,
        relocate: None,
    });
    assert_eq!(cmd(&mut e, c, &["memory", "purge"]), "+OK\r\n");
    // RESP3: verbatim text.
    cmd(&mut e, c, &["hello", "3"]);
    assert_eq!(
        cmd(&mut e, c, &["memory", "malloc-stats"]),
        "=4\r\ntxt:\r\n"
    );
}

#[test]
fn help_and_errors() {
    let mut e = engine();
    let c = connect(&mut e);
    let R::Arr(lines) = parse_all(&cmd(&mut e, c, &["memory", "help"])) else {
        panic!("help is an array")
    };
    assert_eq!(lines.len(), 14);
    assert_eq!(
        lines[0],
        R::Simple("MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:".into())
    );
    assert_eq!(lines[9], R::Simple("USAGE <key> [SAMPLES <count>]".into()));
    assert_eq!(lines[13], R::Simple("    Print this help.".into()));
    assert_eq!(
        cmd(&mut e, c, &["memory", "bogus"]),
        "-ERR unknown subcommand 'bogus'. Try MEMORY HELP.\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["memory"]),
        "-ERR wrong number of arguments for 'memory' command\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["memory", "usage"]),
        "-ERR wrong number of arguments for 'memory|usage' command\r\n"
    );
    for sub in ["stats", "doctor", "malloc-stats", "purge", "help"] {
        assert_eq!(
            cmd(&mut e, c, &["memory", sub, "extra"]),
            format!("-ERR wrong number of arguments for 'memory|{sub}' command\r\n")
        );
    }
}

#[test]
fn command_info_and_docs_know_memory() {
    let mut e = engine();
    let c = connect(&mut e);
    let info = cmd(&mut e, c, &["command", "info", "memory|usage"]);
    assert!(
        info.starts_with("*1\r\n*10\r\n$12\r\nmemory|usage\r\n:-3\r\n*1\r\n+readonly\r\n:2\r\n:2\r\n:1\r\n*2\r\n+@read\r\n+@slow\r\n"),
        "{info}"
    );
    // Valkey 8.1's key spec: RO without access (the value is not read).
    assert!(
        info.contains("$5\r\nflags\r\n*1\r\n+RO\r\n$12\r\nbegin_search"),
        "{info}"
    );
    let info = cmd(&mut e, c, &["command", "info", "memory"]);
    for sub in [
        "memory|doctor",
        "memory|help",
        "memory|malloc-stats",
        "memory|purge",
        "memory|stats",
        "memory|usage",
    ] {
        assert!(info.contains(&format!("\r\n{sub}\r\n")), "{sub}: {info}");
    }
    let docs = cmd(&mut e, c, &["command", "docs", "memory|usage"]);
    for part in [
        "Estimates the memory usage of a key.",
        "O(N) where N is the number of samples.",
        "$5\r\ngroup\r\n$6\r\nserver\r\n",
        "$7\r\nSAMPLES\r\n",
        "$5\r\ncount\r\n",
    ] {
        assert!(docs.contains(part), "{part}: {docs}");
    }
    let count = cmd(&mut e, c, &["command", "getkeys", "memory", "usage", "k1"]);
    assert_eq!(count, arr(&["k1"]));
}

#[test]
fn info_memory_has_valkey_8s_fields_in_order() {
    let mut e = engine();
    let c = connect(&mut e);
    let t = bulk_text(&cmd(&mut e, c, &["info", "memory"]));
    let names: Vec<&str> = t
        .lines()
        .skip(1)
        .map(|l| l.split(':').next().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "used_memory",
            "used_memory_human",
            "used_memory_rss",
            "used_memory_rss_human",
            "used_memory_peak",
            "used_memory_peak_human",
            "used_memory_peak_perc",
            "used_memory_overhead",
            "used_memory_startup",
            "used_memory_dataset",
            "used_memory_dataset_perc",
            "allocator_allocated",
            "allocator_active",
            "allocator_resident",
            "allocator_muzzy",
            "total_system_memory",
            "total_system_memory_human",
            "used_memory_lua",
            "used_memory_vm_eval",
            "used_memory_lua_human",
            "used_memory_scripts_eval",
            "number_of_cached_scripts",
            "number_of_functions",
            "number_of_libraries",
            "used_memory_vm_functions",
            "used_memory_vm_total",
            "used_memory_vm_total_human",
            "used_memory_functions",
            "used_memory_scripts",
            "used_memory_scripts_human",
            "maxmemory",
            "maxmemory_human",
            "maxmemory_policy",
            "allocator_frag_ratio",
            "allocator_frag_bytes",
            "allocator_rss_ratio",
            "allocator_rss_bytes",
            "rss_overhead_ratio",
            "rss_overhead_bytes",
            "mem_fragmentation_ratio",
            "mem_fragmentation_bytes",
            "mem_not_counted_for_evict",
            "mem_replication_backlog",
            "mem_total_replication_buffers",
            "mem_clients_slaves",
            "mem_clients_normal",
            "mem_cluster_links",
            "mem_aof_buffer",
            "mem_allocator",
            "mem_overhead_db_hashtable_rehashing",
            "active_defrag_running",
            "lazyfree_pending_objects",
            "lazyfreed_objects",
        ]
    );
    assert!(t.starts_with("# Memory\r\n"), "{t}");
    // Without a probe every figure is the process's RSS (libc fallback).
    assert!(t.contains("\r\nmem_allocator:libc\r\n"), "{t}");
    assert!(t.contains("\r\nmaxmemory_policy:noeviction\r\n"), "{t}");
}

/// MEMORY STATS counts the databases whose table is resizing and the
/// bucket arrays they leave; `activerehashing` lets cron finish such a
/// resize, and off, the resize waits for writes to move the buckets.
#[test]
fn activerehashing_lets_cron_finish_a_resize_memory_stats_shows() {
    fn rehashing(e: &mut engine::Engine, c: engine::ClientId) -> (R, R) {
        let pairs = stats_pairs(e, c);
        let get = |name: &str| pairs.iter().find(|(k, _)| k == name).unwrap().1.clone();
        (
            get("db.dict.rehashing.count"),
            get("overhead.db.hashtable.rehashing"),
        )
    }
    for (on, left) in [("yes", 0), ("no", 1)] {
        let mut e = engine();
        let c = connect(&mut e);
        assert_eq!(
            cmd(&mut e, c, &["config", "set", "activerehashing", on]),
            "+OK\r\n"
        );
        assert_eq!(rehashing(&mut e, c), (R::Int(0), R::Int(0)));
        // A write starts a resize when the table fills; writes after it
        // move buckets, so stop at the first.
        let mut n = 0;
        while rehashing(&mut e, c).0 == R::Int(0) {
            cmd(&mut e, c, &["set", &format!("key:{n}"), "v"]);
            n += 1;
            assert!(n < 100_000, "no resize began");
        }
        let (_, R::Int(bytes)) = rehashing(&mut e, c) else {
            panic!("not an integer")
        };
        assert!(bytes > 0);
        let info = cmd(&mut e, c, &["info", "memory"]);
        assert!(
            info.contains(&format!("mem_overhead_db_hashtable_rehashing:{bytes}\r\n")),
            "{info}"
        );
        for _ in 0..100 {
            e.cron();
        }
        assert_eq!(rehashing(&mut e, c).0, R::Int(left), "activerehashing {on}");
    }
}

/// An allocator that reports 50 MB of free space in slabs over 100 MB
/// allocated and never moves a block.
fn fragmented() -> engine::MemoryStats {
    engine::MemoryStats {
        used: 100 * MB,
        allocated: 100 * MB,
        active: 150 * MB,
        resident: 150 * MB,
        frag_smallbins: Some(50 * MB),
        allocator: "jemalloc-5.3.0",
        ..Default::default()
    }
}

unsafe fn never_move(
    _: std::ptr::NonNull<u8>,
    _: std::alloc::Layout,
) -> Option<std::ptr::NonNull<u8>> {
    None
}

#[test]
fn active_defrag_starts_past_its_thresholds_walks_every_key_and_stops_when_turned_off() {
    let mut e = engine();
    e.set_memory_probe(fragmented);
    e.set_allocator_ops(engine::AllocatorOps {
        stats_text: String::new,
        purge: || true,
        background_thread: |_| true,
        relocate: Some(never_move),
    });
    let c = connect(&mut e);
    for i in 0..1000 {
        cmd(&mut e, c, &["set", &format!("k{i}"), "v"]);
    }
    let field = |e: &mut engine::Engine, name: &str| {
        let text = bulk_text(&cmd(e, c, &["info", "all"]));
        info_value(&text, name)
    };
    // Valkey 8's figure: allocated plus the free space in slabs.
    assert_eq!(field(&mut e, "allocator_frag_ratio"), "1.50");
    assert_eq!(field(&mut e, "allocator_frag_bytes"), (50 * MB).to_string());
    // 50 MB is under the default active-defrag-ignore-bytes (100 MB).
    cmd(&mut e, c, &["config", "set", "activedefrag", "yes"]);
    e.cron();
    assert_eq!(field(&mut e, "active_defrag_running"), "0");
    // Past it: 50% fragmentation between the thresholds 10% and 100%
    // runs at 1 + (50 - 10) × (25 - 1) ÷ 90 = 11% of the CPU.
    let slice = ["config", "set", "active-defrag-cycle-us", "100000"];
    cmd(&mut e, c, &slice);
    cmd(
        &mut e,
        c,
        &["config", "set", "active-defrag-ignore-bytes", "10mb"],
    );
    e.cron();
    assert_eq!(field(&mut e, "active_defrag_running"), "11");
    // One slice of up to 100 ms walks all 1,000 keys (a SCAN walk may
    // meet a key twice while the table resizes); none moved.
    e.background_step();
    let walked: u64 = field(&mut e, "active_defrag_key_misses").parse().unwrap();
    assert!((1000..1100).contains(&walked), "{walked}");
    let offered: u64 = field(&mut e, "active_defrag_misses").parse().unwrap();
    assert!(offered >= walked, "{offered}");
    assert_eq!(field(&mut e, "active_defrag_hits"), "0");
    assert_eq!(field(&mut e, "active_defrag_key_hits"), "0");
    // The walk is over, and as the fragmentation stays it starts again.
    assert_eq!(field(&mut e, "active_defrag_running"), "11");
    cmd(&mut e, c, &["config", "resetstat"]);
    assert_eq!(field(&mut e, "active_defrag_key_misses"), "0");
    cmd(&mut e, c, &["config", "set", "activedefrag", "no"]);
    e.cron();
    assert_eq!(field(&mut e, "active_defrag_running"), "0");
    e.background_step();
    assert_eq!(field(&mut e, "active_defrag_key_misses"), "0");
}
