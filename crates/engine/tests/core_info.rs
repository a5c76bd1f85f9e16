//! INFO sections and COMMAND introspection.

#[path = "core_util.rs"]
mod util;

use ringkv_engine as engine;
use util::*;

fn section_names(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("# "))
        .map(|l| l[2..].to_string())
        .collect()
}

#[test]
fn default_all_and_named_sections() {
    let mut e = engine();
    e.net_stats_mut().backend = "io_uring";
    e.net_stats_mut().tcp_port = 7777;
    e.net_stats_mut().total_net_input_bytes = 1234;
    let c = connect(&mut e);
    let r = cmd(&mut e, c, &["info"]);
    assert!(r.starts_with('$'));
    let text = bulk_text(&r);
    assert!(
        text.starts_with("# Server\r\nredis_version:7.2.4\r\n"),
        "{text}"
    );
    assert!(
        !text.contains("\n\n") && !text.replace("\r\n", "").contains('\n'),
        "CRLF only"
    );
    assert!(text.ends_with("\r\n"));
    assert_eq!(
        section_names(&text),
        [
            "Server",
            "Clients",
            "Memory",
            "Persistence",
            "Stats",
            "Replication",
            "CPU",
            "Modules",
            "Errorstats",
            "Cluster",
            "Keyspace"
        ]
    );
    // Sections are separated by one blank line.
    assert!(text.contains("\r\n\r\n# Clients\r\n"), "{text}");
    for field in [
        "server_name:ringkv",
        "ringkv_version:",
        "io_backend:io_uring",
        "multiplexing_api:io_uring",
        "tcp_port:7777",
        "process_id:",
        "arch_bits:64",
        "uptime_in_seconds:",
        "hz:10",
        "executable:",
        "config_file:",
        "io_threads_active:0",
        "connected_clients:1",
        "maxclients:10000",
        "blocked_clients:0",
        "used_memory:",
        "used_memory_human:",
        "used_memory_rss:",
        "maxmemory:0",
        "mem_allocator:",
        "total_connections_received:1",
        "total_commands_processed:",
        "instantaneous_ops_per_sec:",
        "total_net_input_bytes:1234",
        "total_net_output_bytes:",
        "rejected_connections:0",
        "expired_keys:0",
        "keyspace_hits:0",
        "keyspace_misses:0",
        "total_error_replies:0",
        "role:master",
        "used_cpu_sys:",
        "used_cpu_user:",
        "used_cpu_sys_children:",
        "used_cpu_user_children:",
        "used_cpu_sys_main_thread:",
        "used_cpu_user_main_thread:",
        "cluster_enabled:0",
    ] {
        assert!(text.contains(&format!("\r\n{field}")), "missing {field}");
    }
    // Named sections, any case, several at once.
    let t = bulk_text(&cmd(&mut e, c, &["info", "CPU", "clients"]));
    assert_eq!(section_names(&t), ["Clients", "CPU"]);
    let t = bulk_text(&cmd(&mut e, c, &["info", "nosuch"]));
    assert_eq!(t, "");
    // all/everything add commandstats.
    let t = bulk_text(&cmd(&mut e, c, &["info", "all"]));
    assert!(section_names(&t).contains(&"Commandstats".to_string()));
    assert!(t.contains("cmdstat_info:calls="), "{t}");
    let t = bulk_text(&cmd(&mut e, c, &["info", "everything"]));
    assert!(section_names(&t).contains(&"Commandstats".to_string()));
    let t = bulk_text(&cmd(&mut e, c, &["info", "default"]));
    assert!(!section_names(&t).contains(&"Commandstats".to_string()));
    // RESP3: verbatim string.
    cmd(&mut e, c, &["hello", "3"]);
    let r = cmd(&mut e, c, &["info", "server"]);
    assert!(
        r.starts_with('=') && r.contains("\r\ntxt:# Server\r\n"),
        "{r}"
    );
}

#[test]
fn commandstats_and_errorstats_lines() {
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["ping"]);
    cmd(&mut e, c, &["ping"]);
    cmd(&mut e, c, &["select", "99"]);
    cmd(&mut e, c, &["config", "get", "hz"]);
    let t = bulk_text(&cmd(&mut e, c, &["info", "commandstats", "errorstats"]));
    let ping = t
        .lines()
        .find(|l| l.starts_with("cmdstat_ping:"))
        .expect("ping line");
    let (_, rest) = ping.split_once(':').unwrap();
    let fields: Vec<&str> = rest
        .split(',')
        .map(|f| f.split('=').next().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "calls",
            "usec",
            "usec_per_call",
            "rejected_calls",
            "failed_calls"
        ]
    );
    assert!(ping.starts_with("cmdstat_ping:calls=2,usec="), "{ping}");
    assert!(t.contains("cmdstat_select:calls=1,"), "{t}");
    assert!(t.contains("rejected_calls=0,failed_calls=1\r\n"), "{t}");
    assert!(t.contains("cmdstat_config|get:calls=1,"), "{t}");
    assert!(
        t.contains("# Errorstats\r\nerrorstat_ERR:count=1\r\n"),
        "{t}"
    );
}

#[test]
fn memory_probe_feeds_used_memory() {
    let mut e = engine();
    e.set_memory_probe(|| engine::MemoryStats {
        used: 3 * 1024 * 1024,
        allocated: 3 * 1024 * 1024,
        active: 4 * 1024 * 1024,
        resident: 5 * 1024 * 1024,
        allocator: "jemalloc-5.3.0",
        ..Default::default()
    });
    let c = connect(&mut e);
    let t = bulk_text(&cmd(&mut e, c, &["info", "memory"]));
    assert!(
        t.contains("\r\nused_memory:3145728\r\nused_memory_human:3.00M\r\n"),
        "{t}"
    );
    assert!(t.contains("\r\nmem_allocator:jemalloc-5.3.0\r\n"), "{t}");
    assert!(t.contains("\r\nallocator_active:4194304\r\n"), "{t}");
}

#[test]
fn instantaneous_ops_comes_from_cron_samples() {
    let mut e = engine();
    let c = connect(&mut e);
    let t0 = 1_800_000_000_000;
    e.pin_clock(Some(t0));
    e.cron();
    for _ in 0..50 {
        cmd(&mut e, c, &["ping"]);
    }
    e.pin_clock(Some(t0 + 100));
    e.cron();
    let t = bulk_text(&cmd(&mut e, c, &["info", "stats"]));
    // 50 commands in 100 ms = 500/s in one of 16 samples.
    assert!(t.contains("\r\ninstantaneous_ops_per_sec:31\r\n"), "{t}");
}

#[test]
fn command_count_info_docs_list_getkeys() {
    let mut e = engine();
    let c = connect(&mut e);
    let count = cmd(&mut e, c, &["command", "count"]);
    let n: usize = count[1..count.len() - 2].parse().unwrap();
    assert!(n >= 15, "{count}");
    let all = cmd(&mut e, c, &["command"]);
    assert!(all.starts_with(&format!("*{n}\r\n")));
    let r = cmd(&mut e, c, &["command", "info", "ping", "nosuch"]);
    assert_eq!(
        r,
        // Valkey 8.1's: `sentinel` is hidden, the tips are shown.
        "*2\r\n*10\r\n$4\r\nping\r\n:-1\r\n*1\r\n+fast\r\n:0\r\n:0\r\n:0\r\n*2\r\n+@fast\r\n+@connection\r\n\
         *2\r\n$25\r\nrequest_policy:all_shards\r\n$29\r\nresponse_policy:all_succeeded\r\n*0\r\n*0\r\n$-1\r\n"
    );
    let r = cmd(&mut e, c, &["command", "info", "config|get"]);
    assert!(
        r.starts_with("*1\r\n*10\r\n$10\r\nconfig|get\r\n:-3\r\n"),
        "{r}"
    );
    let r = cmd(&mut e, c, &["command", "info", "config"]);
    assert!(r.contains("$10\r\nconfig|set\r\n"), "{r}");
    let r = cmd(&mut e, c, &["command", "docs", "echo"]);
    assert_eq!(
        r,
        "*2\r\n$4\r\necho\r\n*10\r\n$7\r\nsummary\r\n$25\r\nReturns the given string.\r\n$5\r\nsince\r\n$5\r\n1.0.0\r\n$5\r\ngroup\r\n$10\r\nconnection\r\n$10\r\ncomplexity\r\n$4\r\nO(1)\r\n\
         $9\r\narguments\r\n*1\r\n*6\r\n$4\r\nname\r\n$7\r\nmessage\r\n$4\r\ntype\r\n$6\r\nstring\r\n$12\r\ndisplay_text\r\n$7\r\nmessage\r\n"
    );
    let r = cmd(&mut e, c, &["command", "list"]);
    assert!(
        r.contains("$4\r\nping\r\n") && r.contains("$11\r\nclient|list\r\n"),
        "{r}"
    );
    let r = cmd(
        &mut e,
        c,
        &["command", "list", "filterby", "aclcat", "dangerous"],
    );
    assert!(
        r.contains("$7\r\nflushdb\r\n") && !r.contains("$4\r\nping\r\n"),
        "{r}"
    );
    assert_eq!(
        cmd(&mut e, c, &["command", "list", "filterby", "module", "x"]),
        "*0\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["command", "getkeys", "ping"]),
        "-ERR The command has no key arguments\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["command", "getkeys", "nosuch", "x"]),
        "-ERR Invalid command specified\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["command", "getkeys", "get", "a", "b"]),
        "-ERR Invalid number of arguments specified for command\r\n"
    );
    // As in Valkey, a command without keys says so before its arity.
    assert_eq!(
        cmd(&mut e, c, &["command", "getkeys", "echo", "a", "b"]),
        "-ERR The command has no key arguments\r\n"
    );
}

/// The `latencystats` lines of INFO, as (command, percentile names).
fn latency_lines(e: &mut engine::Engine, c: engine::ClientId) -> Vec<(String, Vec<String>)> {
    let t = bulk_text(&cmd(e, c, &["info", "latencystats"]));
    assert!(t.starts_with("# Latencystats\r\n"), "{t}");
    t.lines()
        .filter_map(|l| l.strip_prefix("latency_percentiles_usec_"))
        .map(|l| {
            let (name, rest) = l.split_once(':').unwrap();
            let names = rest
                .split(',')
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap();
                    // Microseconds with three decimals, as Valkey prints them.
                    let (whole, frac) = v.split_once('.').unwrap();
                    assert!(whole.parse::<u64>().is_ok() && frac.len() == 3, "{l}");
                    k.to_string()
                })
                .collect();
            (name.to_string(), names)
        })
        .collect()
}

#[test]
fn latencystats_and_latency_histogram() {
    let mut e = engine();
    let c = connect(&mut e);
    for _ in 0..3 {
        cmd(&mut e, c, &["set", "k", "v"]);
    }
    cmd(&mut e, c, &["get", "k"]);
    cmd(&mut e, c, &["config", "get", "hz"]);
    let lines = latency_lines(&mut e, c);
    let names: Vec<&str> = lines.iter().map(|(n, _)| n.as_str()).collect();
    for want in ["set", "get", "config|get"] {
        assert!(names.contains(&want), "{want} in {names:?}");
    }
    assert!(lines.iter().all(|(_, p)| p == &["p50", "p99", "p99.9"]));
    // All and everything include the section; the default does not.
    let all = bulk_text(&cmd(&mut e, c, &["info", "all"]));
    assert!(all.contains("# Latencystats\r\nlatency_percentiles_usec_"));
    let default = bulk_text(&cmd(&mut e, c, &["info"]));
    assert!(!default.contains("Latencystats"));

    // LATENCY HISTOGRAM: calls and cumulative buckets per command.
    let r = cmd(&mut e, c, &["latency", "histogram", "SET", "nosuch"]);
    assert!(
        r.starts_with("*2\r\n$3\r\nset\r\n*4\r\n$5\r\ncalls\r\n:3\r\n$14\r\nhistogram_usec\r\n*"),
        "{r}"
    );
    assert!(
        r.ends_with(":3\r\n"),
        "the last bucket holds every call: {r}"
    );
    // A container brings its subcommands that ran.
    let r = cmd(&mut e, c, &["latency", "histogram", "config"]);
    assert!(r.starts_with("*2\r\n$10\r\nconfig|get\r\n"), "{r}");
    let r = cmd(&mut e, c, &["latency", "histogram", "config|set", "lpush"]);
    assert_eq!(r, "*0\r\n");
    cmd(&mut e, c, &["hello", "3"]);
    let r = cmd(&mut e, c, &["latency", "histogram", "get"]);
    assert!(
        r.starts_with(
            "%1\r\n$3\r\nget\r\n%2\r\n$5\r\ncalls\r\n:1\r\n$14\r\nhistogram_usec\r\n%1\r\n:"
        ),
        "{r}"
    );
    cmd(&mut e, c, &["hello", "2"]);

    // Percentiles as configured.
    cmd(
        &mut e,
        c,
        &[
            "config",
            "set",
            "latency-tracking-info-percentiles",
            "0 99.99 100",
        ],
    );
    let lines = latency_lines(&mut e, c);
    assert!(
        lines.iter().all(|(_, p)| p == &["p0", "p99.99", "p100"]),
        "{lines:?}"
    );

    // Tracking off: nothing recorded, and INFO shows an empty section
    // (LATENCY HISTOGRAM still answers with what was recorded).
    cmd(&mut e, c, &["config", "set", "latency-tracking", "no"]);
    cmd(&mut e, c, &["lpush", "l", "a"]);
    assert_eq!(latency_lines(&mut e, c), []);
    assert_eq!(cmd(&mut e, c, &["latency", "histogram", "lpush"]), "*0\r\n");
    cmd(&mut e, c, &["config", "set", "latency-tracking", "yes"]);

    // CONFIG RESETSTAT forgets them.
    cmd(&mut e, c, &["config", "resetstat"]);
    let names: Vec<String> = latency_lines(&mut e, c)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, ["config|resetstat"]);
}

#[test]
fn commands_in_a_transaction_are_recorded_one_by_one() {
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["multi"]);
    cmd(&mut e, c, &["incr", "n"]);
    cmd(&mut e, c, &["incr", "n"]);
    cmd(&mut e, c, &["exec"]);
    let r = cmd(&mut e, c, &["latency", "histogram", "incr", "exec"]);
    assert!(
        r.starts_with("*4\r\n$4\r\nincr\r\n*4\r\n$5\r\ncalls\r\n:2\r\n"),
        "{r}"
    );
    assert!(
        r.contains("$4\r\nexec\r\n*4\r\n$5\r\ncalls\r\n:1\r\n"),
        "{r}"
    );
}

#[test]
fn eventloop_rates_come_from_cron_samples() {
    let mut e = engine();
    let c = connect(&mut e);
    let t0 = 1_800_000_000_000;
    e.pin_clock(Some(t0));
    e.cron();
    // 40 cycles of 250 µs in 100 ms: 400/s and 250 µs each, in one of
    // 16 samples.
    for _ in 0..40 {
        e.count_cycle(std::time::Duration::from_micros(250));
    }
    e.pin_clock(Some(t0 + 100));
    e.cron();
    let t = bulk_text(&cmd(&mut e, c, &["info", "stats"]));
    assert!(t.contains("\r\neventloop_cycles:40\r\n"), "{t}");
    assert!(t.contains("\r\neventloop_duration_sum:10000\r\n"), "{t}");
    assert!(
        t.contains("\r\ninstantaneous_eventloop_cycles_per_sec:25\r\n"),
        "{t}"
    );
    assert!(
        t.contains("\r\ninstantaneous_eventloop_duration_usec:15\r\n"),
        "{t}"
    );
    // No cycle in the next 100 ms: that sample's length is 0, not a
    // division by zero.
    e.pin_clock(Some(t0 + 200));
    e.cron();
    let t = bulk_text(&cmd(&mut e, c, &["info", "stats"]));
    assert!(
        t.contains("\r\ninstantaneous_eventloop_duration_usec:15\r\n"),
        "{t}"
    );
    assert_eq!(cmd(&mut e, c, &["config", "resetstat"]), "+OK\r\n");
    let t = bulk_text(&cmd(&mut e, c, &["info", "stats"]));
    assert!(t.contains("\r\neventloop_cycles:0\r\n"), "{t}");
    assert!(
        t.contains("\r\ninstantaneous_eventloop_duration_usec:0\r\n"),
        "{t}"
    );
}

#[test]
fn debug_section_keeps_the_longest_and_busiest_cycle() {
    let mut e = engine();
    let c = connect(&mut e);
    let debug = |e: &mut engine::Engine| bulk_text(&cmd(e, c, &["info", "debug"]));
    e.count_cycle(std::time::Duration::from_micros(700));
    for _ in 0..5 {
        cmd(&mut e, c, &["ping"]);
    }
    // The INFO the closure sends runs in this cycle too.
    e.count_cycle(std::time::Duration::from_micros(300));
    let t = debug(&mut e);
    assert!(t.starts_with("# Debug\r\n"), "{t}");
    assert!(t.contains("\r\neventloop_duration_max:700\r\n"), "{t}");
    assert!(t.contains("\r\neventloop_cmd_per_cycle_max:5\r\n"), "{t}");
    e.count_cycle(std::time::Duration::from_micros(10));
    let t = debug(&mut e);
    assert!(t.contains("\r\neventloop_cmd_per_cycle_max:5\r\n"), "{t}");
    assert!(t.contains("\r\neventloop_duration_aof_sum:0\r\n"), "{t}");
    assert_eq!(cmd(&mut e, c, &["config", "resetstat"]), "+OK\r\n");
    // The command total restarts below the last cycle's mark.
    e.count_cycle(std::time::Duration::from_micros(10));
    let t = debug(&mut e);
    assert!(t.contains("\r\neventloop_duration_max:10\r\n"), "{t}");
    assert!(t.contains("\r\neventloop_cmd_per_cycle_max:0\r\n"), "{t}");
    assert!(!bulk_text(&cmd(&mut e, c, &["info", "everything"])).contains("# Debug"));
}
