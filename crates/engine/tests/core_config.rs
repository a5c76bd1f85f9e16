//! CONFIG GET/SET/RESETSTAT/REWRITE and config-file loading.

#[path = "core_util.rs"]
mod util;

use engine::{Config, Engine, OutputClass, OutputLimit};
use ringkv_engine as engine;
use std::path::PathBuf;
use util::*;

fn temp_conf(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ringkv-core-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("ringkv.conf");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn get_patterns_and_multiple_args() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(
        cmd(&mut e, c, &["config", "get", "port"]),
        "*2\r\n$4\r\nport\r\n$4\r\n6379\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["config", "get", "nosuch"]), "*0\r\n");
    let r = cmd(
        &mut e,
        c,
        &["config", "get", "maxclients", "TIMEOUT", "maxclients"],
    );
    assert_eq!(
        r,
        "*4\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n$7\r\ntimeout\r\n$1\r\n0\r\n"
    );
    // Aliases answer under the name asked for.
    assert_eq!(
        cmd(&mut e, c, &["config", "get", "slave-read-only"]),
        "*2\r\n$15\r\nslave-read-only\r\n$3\r\nyes\r\n"
    );
    // Glob over all names (needs the data helper's real `glob::matches`;
    // skipped while it is the exact-match placeholder).
    if engine::glob::matches(b"a*", b"ab", true) {
        let r = cmd(&mut e, c, &["config", "get", "*max-*-len"]);
        assert!(r.contains("proto-max-bulk-len"), "{r}");
        assert!(r.contains("$9\r\n536870912\r\n"), "{r}");
    }
    let all = cmd(&mut e, c, &["config", "get", "*"]);
    let n: usize = all[1..all.find('\r').unwrap()].parse().unwrap();
    assert!(n / 2 > 190, "{n}");
    assert!(
        !all.contains("watchdog-period"),
        "hidden configs stay out of globs"
    );
    assert!(cmd(&mut e, c, &["config", "get", "watchdog-period"]).contains("watchdog-period"));
    // RESP3: a map.
    cmd(&mut e, c, &["hello", "3"]);
    assert_eq!(
        cmd(&mut e, c, &["config", "get", "hz"]),
        "%1\r\n$2\r\nhz\r\n$2\r\n10\r\n"
    );
}

#[test]
fn set_validates_like_valkey_and_is_atomic() {
    let mut e = engine();
    let c = connect(&mut e);
    let cases: &[(&[&str], &str)] = &[
        (
            &["maxmemory", "1x"],
            "-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value\r\n",
        ),
        (
            &["hz", "abc"],
            "-ERR CONFIG SET failed (possibly related to argument 'hz') - argument couldn't be parsed into an integer\r\n",
        ),
        (
            &["foo", "1"],
            "-ERR Unknown option or number of arguments for CONFIG SET - 'foo'\r\n",
        ),
        (
            &["databases", "1"],
            "-ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config\r\n",
        ),
        (
            &["port", "1", "port", "2"],
            "-ERR CONFIG SET failed (possibly related to argument 'port') - duplicate parameter\r\n",
        ),
        (
            &["io-uring", "no"],
            "-ERR CONFIG SET failed (possibly related to argument 'io-uring') - ringkv sets it at start-up only\r\n",
        ),
        (
            &["daemonize", "no", "daemonize", "yes"],
            "-ERR CONFIG SET failed (possibly related to argument 'daemonize') - can't set immutable config\r\n",
        ),
        (
            &["timeout", "1", "timeout", "2"],
            "-ERR CONFIG SET failed (possibly related to argument 'timeout') - duplicate parameter\r\n",
        ),
        (
            &["protected-mode", "maybe"],
            "-ERR CONFIG SET failed (possibly related to argument 'protected-mode') - argument must be 'yes' or 'no'\r\n",
        ),
        (
            &["loglevel", "loud"],
            "-ERR CONFIG SET failed (possibly related to argument 'loglevel') - argument(s) must be one of the following: debug, verbose, notice, warning, nothing\r\n",
        ),
        (
            &["maxclients", "0"],
            "-ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument must be between 1 and 4294967295 inclusive\r\n",
        ),
        (
            &["dir", "/tmp"],
            "-ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config\r\n",
        ),
    ];
    for (args, want) in cases {
        let mut words = vec!["config", "set"];
        words.extend_from_slice(args);
        assert_eq!(cmd(&mut e, c, &words), *want, "{args:?}");
    }
    // ringkv's own start-up settings take the value they have (a tool
    // writing back CONFIG GET * works).
    for name in ["io-uring", "io-threads-ring-size"] {
        let now = cmd(&mut e, c, &["config", "get", name]);
        let value = now.split("\r\n").nth(4).unwrap().to_string();
        assert_eq!(
            cmd(&mut e, c, &["config", "set", name, &value]),
            "+OK\r\n",
            "{name}"
        );
    }
    // Odd number of arguments.
    assert_eq!(
        cmd(&mut e, c, &["config", "set", "timeout", "1", "hz"]),
        "-ERR syntax error\r\n"
    );
    // All or nothing: the valid first pair is not applied.
    assert_eq!(
        cmd(&mut e, c, &["config", "set", "timeout", "5", "hz", "x"]),
        "-ERR CONFIG SET failed (possibly related to argument 'hz') - argument couldn't be parsed into an integer\r\n"
    );
    assert_eq!(e.client_timeout_s(), 0);
    assert_eq!(
        cmd(
            &mut e,
            c,
            &[
                "config",
                "set",
                "timeout",
                "5",
                "hz",
                "20",
                "client-query-buffer-limit",
                "2mb",
                "proto-max-bulk-len",
                "4MB"
            ]
        ),
        "+OK\r\n"
    );
    assert_eq!(e.client_timeout_s(), 5);
    assert_eq!(e.hz(), 20);
    assert_eq!(e.query_buffer_limit(), 2 << 20);
    assert_eq!(e.parser_limits().max_bulk_len, 4 << 20);
    assert_eq!(
        cmd(&mut e, c, &["config", "get", "client-query-buffer-limit"]),
        "*2\r\n$25\r\nclient-query-buffer-limit\r\n$7\r\n2097152\r\n"
    );
    // Multi-argument values come as one string.
    assert_eq!(
        cmd(&mut e, c, &["config", "set", "save", "100 10 20 5"]),
        "+OK\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["config", "get", "save"]),
        "*2\r\n$4\r\nsave\r\n$11\r\n100 10 20 5\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["config", "set", "save", ""]), "+OK\r\n");
    // Classes not named keep their limits; memory units are shown in bytes.
    assert_eq!(
        cmd(
            &mut e,
            c,
            &[
                "config",
                "set",
                "client-output-buffer-limit",
                "pubsub 1mb 2mb 3"
            ]
        ),
        "+OK\r\n"
    );
    assert_eq!(
        cmd(
            &mut e,
            c,
            &[
                "config",
                "set",
                "client-output-buffer-limit",
                "normal 1 2 3"
            ]
        ),
        "+OK\r\n"
    );
    assert!(
        cmd(&mut e, c, &["config", "get", "client-output-buffer-limit"])
            .contains("normal 1 2 3 slave 268435456 67108864 60 pubsub 1048576 2097152 3"),
    );
    assert_eq!(
        cmd(
            &mut e,
            c,
            &["config", "set", "notify-keyspace-events", "KEA"]
        ),
        "+OK\r\n"
    );
    assert!(
        cmd(&mut e, c, &["config", "get", "notify-keyspace-events"]).ends_with("$3\r\nAKE\r\n")
    );
    assert_eq!(
        cmd(&mut e, c, &["config", "get", "save"]),
        "*2\r\n$4\r\nsave\r\n$0\r\n\r\n"
    );
    // maxclients changes take effect for the next connect.
    assert_eq!(
        cmd(&mut e, c, &["config", "set", "maxclients", "1"]),
        "+OK\r\n"
    );
    assert!(e.connect(info("127.0.0.1:9")).is_err());
}

#[test]
fn requirepass_set_live_applies_to_new_connections() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(
        cmd(&mut e, c, &["config", "set", "requirepass", "pw"]),
        "+OK\r\n"
    );
    // The client that set it stays authenticated, as in Valkey.
    assert_eq!(cmd(&mut e, c, &["ping"]), "+PONG\r\n");
    let d = connect(&mut e);
    assert_eq!(
        cmd(&mut e, d, &["ping"]),
        "-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(cmd(&mut e, d, &["auth", "pw"]), "+OK\r\n");
}

#[test]
fn resetstat_clears_counters() {
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["nosuch"]);
    cmd(&mut e, c, &["ping"]);
    assert_eq!(cmd(&mut e, c, &["config", "resetstat"]), "+OK\r\n");
    let info = bulk_text(&cmd(
        &mut e,
        c,
        &["info", "stats", "errorstats", "commandstats"],
    ));
    assert!(info.contains("total_error_replies:0\r\n"), "{info}");
    assert!(!info.contains("errorstat_ERR"), "{info}");
    assert!(!info.contains("cmdstat_ping"), "{info}");
    // The INFO call itself counts after the reset.
    assert!(
        info.contains("cmdstat_config|resetstat") || !info.contains("cmdstat_"),
        "{info}"
    );
}

#[test]
fn rewrite_without_a_file_is_an_error() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(
        cmd(&mut e, c, &["config", "rewrite"]),
        "-ERR The server is running without a config file\r\n"
    );
}

#[test]
fn rewrite_round_trip_keeps_comments_and_updates_in_place() {
    let original = "# my server\nport 7000\n\n# memory\nmaxmemory 100mb\nsave 900 1\nsave 300 10\nrename-command FLUSHALL \"\"\nslave-read-only yes\n";
    let path = temp_conf("rewrite", original);
    let cfg = Config::load(Some(&path), &[]).unwrap();
    assert_eq!(cfg.port, 7000);
    assert_eq!(cfg.maxmemory, 100 << 20);
    let mut e = Engine::new(cfg, Some(path.clone()));
    let c = connect(&mut e);
    assert_eq!(
        cmd(
            &mut e,
            c,
            &[
                "config",
                "set",
                "maxmemory",
                "2gb",
                "timeout",
                "30",
                "save",
                "60 1",
                "replica-read-only",
                "no"
            ]
        ),
        "+OK\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["config", "rewrite"]), "+OK\r\n");
    let text = std::fs::read_to_string(&path).unwrap();
    let cwd = std::env::current_dir().unwrap().display().to_string();
    let want = format!(
        "# my server\nport 7000\n\n# memory\nmaxmemory 2gb\nsave 60 1\nrename-command FLUSHALL \"\"\nreplica-read-only no\n\
         # Generated by CONFIG REWRITE\ntimeout 30\ndir \"{cwd}\"\n\
         user default on nopass sanitize-payload ~* &* +@all\n"
    );
    assert_eq!(text, want);
    // The rewritten file loads back to the same values.
    let back = Config::load(Some(&path), &[]).unwrap();
    assert_eq!(back.maxmemory, 2 << 30);
    assert_eq!(back.timeout, 30);
    assert_eq!(back.get("save").unwrap(), "60 1");
    assert_eq!(back.get("replica-read-only").unwrap(), "no");
    // A second rewrite with nothing changed is stable.
    let mut e = Engine::new(back, Some(path.clone()));
    let c = connect(&mut e);
    assert_eq!(cmd(&mut e, c, &["config", "rewrite"]), "+OK\r\n");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), want);
}

#[test]
fn config_file_errors_and_command_line() {
    let path = temp_conf("bad", "port 7000\nbogus-directive 1\n");
    let err = Config::load(Some(&path), &[]).unwrap_err();
    assert_eq!(err.line, 2);
    assert_eq!(err.reason, "Bad directive or wrong number of arguments");
    let shown = err.to_string();
    assert!(shown.contains("Reading the configuration file"), "{shown}");
    assert!(
        shown.contains(
            ", at line 2\n>>> 'bogus-directive 1'\nBad directive or wrong number of arguments"
        ),
        "{shown}"
    );

    let path = temp_conf("args", "port 7000\nloglevel warning\n");
    let args: Vec<String> = ["--port", "7001", "--io-uring", "no", "--requirepass", "a b"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let cfg = Config::load(Some(&path), &args).unwrap();
    assert_eq!(cfg.port, 7001);
    assert_eq!(cfg.io_uring, engine::IoUringMode::No);
    assert_eq!(cfg.requirepass.as_deref(), Some(&b"a b"[..]));
    assert_eq!(cfg.loglevel, engine::log::Level::Warning);
    let bad: Vec<String> = ["--io-uring", "maybe"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let err = Config::load(None, &bad).unwrap_err();
    assert_eq!(
        err.reason,
        "argument(s) must be one of the following: auto, yes, no"
    );
}

/// A real valkey.conf (every directive of Valkey 8's default file, as
/// shipped, uncommented where it is set) loads with warnings only.
#[test]
fn a_stock_valkey_conf_loads() {
    let text = "\
bind 127.0.0.1 -::1
protected-mode yes
port 6379
tcp-backlog 511
timeout 0
tcp-keepalive 300
daemonize no
pidfile /var/run/valkey_6379.pid
loglevel notice
logfile \"\"
databases 16
always-show-logo no
set-proc-title yes
proc-title-template \"{title} {listen-addr} {server-mode}\"
locale-collate \"\"
stop-writes-on-bgsave-error yes
rdbcompression yes
rdbchecksum yes
dbfilename dump.rdb
rdb-del-sync-files no
dir ./
replica-serve-stale-data yes
replica-read-only yes
repl-diskless-sync yes
repl-diskless-sync-delay 5
repl-diskless-sync-max-replicas 0
repl-diskless-load disabled
repl-disable-tcp-nodelay no
replica-priority 100
acllog-max-len 128
lazyfree-lazy-eviction yes
lazyfree-lazy-expire yes
lazyfree-lazy-server-del yes
replica-lazy-flush no
lazyfree-lazy-user-del yes
lazyfree-lazy-user-flush yes
oom-score-adj no
oom-score-adj-values 0 200 800
disable-thp yes
appendonly no
appendfilename \"appendonly.aof\"
appenddirname \"appendonlydir\"
appendfsync everysec
no-appendfsync-on-rewrite no
auto-aof-rewrite-percentage 100
auto-aof-rewrite-min-size 64mb
aof-load-truncated yes
aof-use-rdb-preamble yes
aof-timestamp-enabled no
slowlog-log-slower-than 10000
slowlog-max-len 128
latency-monitor-threshold 0
notify-keyspace-events \"\"
hash-max-listpack-entries 512
hash-max-listpack-value 64
list-max-listpack-size -2
list-compress-depth 0
set-max-intset-entries 512
set-max-listpack-entries 128
set-max-listpack-value 64
zset-max-listpack-entries 128
zset-max-listpack-value 64
hll-sparse-max-bytes 3000
stream-node-max-bytes 4096
stream-node-max-entries 100
activerehashing yes
client-output-buffer-limit normal 0 0 0
client-output-buffer-limit replica 256mb 64mb 60
client-output-buffer-limit pubsub 32mb 8mb 60
hz 10
dynamic-hz yes
aof-rewrite-incremental-fsync yes
rdb-save-incremental-fsync yes
ignore-warnings ARM64-COW-BUG
jemalloc-bg-thread yes
save 3600 1 300 100 60 10000
maxmemory-policy noeviction
";
    let cfg = Config::parse_file_text(text, "valkey.conf").unwrap();
    assert_eq!(cfg.bind, vec!["127.0.0.1", "-::1"]);
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    assert_eq!(
        cfg.get("client-output-buffer-limit").unwrap(),
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
    );
    let cfg = Config::parse_file_text(
        "appendonly yes\ndual-channel-replication-enabled yes\n",
        "x",
    )
    .unwrap();
    assert_eq!(
        cfg.warnings,
        ["'dual-channel-replication-enabled' is not supported yet, ignored"]
    );
    // Acted on now: no warning.
    let cfg = Config::parse_file_text(
        "maxmemory-policy allkeys-lru\nactivedefrag yes\nactive-defrag-max-scan-fields 50\n",
        "x",
    )
    .unwrap();
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    assert!(cfg.active_defrag.enabled);
    assert_eq!(cfg.active_defrag.max_scan_fields, 50);
    let cfg = Config::parse_file_text("maxmemory-policy allkeys-lru\n", "x").unwrap();
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    let cfg = Config::parse_file_text(
        "aclfile /nonexistent.acl\nacl-pubsub-default allchannels\nacllog-max-len 5\n",
        "x",
    )
    .unwrap();
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
}

/// Directives Valkey 8.1 dropped load from an old file without a word,
/// and CONFIG no longer knows them, as in Valkey.
#[test]
fn deprecated_directives_load_and_are_gone_from_config() {
    let text = "dynamic-hz no\nio-threads-do-reads yes\nlist-max-ziplist-entries 512\n\
                list-max-ziplist-value 64\nlua-replicate-commands yes\n";
    let cfg = Config::parse_file_text(text, "redis.conf").unwrap();
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    assert_eq!(cfg.get("dynamic-hz"), None);
    assert_eq!(cfg.get("io-threads-do-reads"), None);
    let e = Config::parse_file_text("dynamic-hz yes no\n", "x").unwrap_err();
    assert_eq!(e.reason, "Bad directive or wrong number of arguments");
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(
        cmd(&mut e, c, &["config", "set", "dynamic-hz", "yes"]),
        "-ERR Unknown option or number of arguments for CONFIG SET - 'dynamic-hz'\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["config", "get", "dynamic-hz"]), "*0\r\n");
}

/// Every class of client-output-buffer-limit is enforced (`replica` on
/// the feeds of replicas): none is reported as ignored.
#[test]
fn output_buffer_limit_classes_are_all_enforced() {
    let cfg = Config::parse_file_text(
        "client-output-buffer-limit normal 1mb 512kb 10\nclient-output-buffer-limit pubsub 1mb 0 0\n",
        "x",
    )
    .unwrap();
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    assert_eq!(
        cfg.get("client-output-buffer-limit").unwrap(),
        "normal 1048576 524288 10 slave 268435456 67108864 60 pubsub 1048576 0 0"
    );
    let cfg = Config::parse_file_text("client-output-buffer-limit replica 1mb 0 0\n", "x").unwrap();
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    assert_eq!(cfg.client_output_buffer_limit_replica.hard, 1 << 20);
    let cfg = Config::parse_file_text("client-output-buffer-limit slave 2mb 1mb 5\n", "x").unwrap();
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    assert_eq!(cfg.client_output_buffer_limit_replica.soft, 1 << 20);
    assert_eq!(cfg.client_output_buffer_limit_replica.soft_seconds, 5);
}

/// The typed limits follow the stored value: Valkey's defaults, one class
/// set at a time (the others kept), units, and CONFIG SET's all-or-nothing.
#[test]
fn output_buffer_limit_classes_parse_and_format() {
    let mut cfg = Config::default();
    let limit = |hard, soft, soft_seconds| OutputLimit {
        hard,
        soft,
        soft_seconds,
    };
    assert_eq!(cfg.client_output_buffer_limit_normal, limit(0, 0, 0));
    assert_eq!(
        cfg.client_output_buffer_limit_pubsub,
        limit(32 << 20, 8 << 20, 60)
    );
    cfg.set_many(&[(
        b"client-output-buffer-limit",
        b"normal 0 0 0 pubsub 1mb 512kb 10",
    )])
    .unwrap();
    assert_eq!(
        cfg.client_output_buffer_limit_pubsub,
        limit(1 << 20, 512 << 10, 10)
    );
    assert_eq!(
        cfg.get("client-output-buffer-limit").unwrap(),
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 1048576 524288 10"
    );
    // Class names are case-insensitive; a class not named keeps its limit.
    cfg.set_many(&[(b"client-output-buffer-limit", b"NORMAL 2mb 1mb 5")])
        .unwrap();
    assert_eq!(
        cfg.client_output_buffer_limit_normal,
        limit(2 << 20, 1 << 20, 5)
    );
    assert_eq!(
        cfg.client_output_buffer_limit_pubsub,
        limit(1 << 20, 512 << 10, 10)
    );
    for bad in [
        &b"pubsub 1mb 0"[..],
        b"pubsub 1mb 0 0 normal",
        b"master 1mb 0 0",
        b"pubsub -1 0 0",
        b"pubsub 1xb 0 0",
    ] {
        assert!(
            cfg.set_many(&[(b"client-output-buffer-limit", bad)])
                .is_err(),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    assert_eq!(
        cfg.client_output_buffer_limit_pubsub,
        limit(1 << 20, 512 << 10, 10)
    );
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
}

/// CONFIG SET publishes the limits to the IO layer's shared copy, and a
/// job reports the class its client is in after it: pubsub from the first
/// subscription (RESP3 too) to the last unsubscription.
#[test]
fn output_limits_follow_config_set_and_jobs_report_the_class() {
    let mut e = util::engine();
    let limits = e.output_limits().clone();
    assert_eq!(limits.get(OutputClass::Pubsub).hard, 32 << 20);
    let c = util::connect(&mut e);
    let set = [
        "config",
        "set",
        "client-output-buffer-limit",
        "normal 1mb 0 0 pubsub 2mb 1mb 3",
    ];
    assert_eq!(util::cmd(&mut e, c, &set), "+OK\r\n");
    let limit = |hard, soft, soft_seconds| OutputLimit {
        hard,
        soft,
        soft_seconds,
    };
    assert_eq!(limits.get(OutputClass::Normal), limit(1 << 20, 0, 0));
    assert_eq!(limits.get(OutputClass::Pubsub), limit(2 << 20, 1 << 20, 3));
    // A rejected CONFIG SET changes nothing.
    let bad = ["config", "set", "client-output-buffer-limit", "pubsub 1 1"];
    assert!(util::cmd(&mut e, c, &bad).starts_with("-ERR"));
    assert_eq!(limits.get(OutputClass::Pubsub), limit(2 << 20, 1 << 20, 3));

    let class_after = |e: &mut Engine, words: &[&[&str]]| {
        util::run_job(e, c, &util::encode(words)).1.output_class
    };
    assert_eq!(class_after(&mut e, &[&["ping"]]), OutputClass::Normal);
    assert_eq!(
        class_after(&mut e, &[&["subscribe", "a"], &["psubscribe", "b*"]]),
        OutputClass::Pubsub
    );
    assert_eq!(
        class_after(&mut e, &[&["unsubscribe"]]),
        OutputClass::Pubsub
    );
    assert_eq!(
        class_after(&mut e, &[&["punsubscribe"]]),
        OutputClass::Normal
    );
    assert_eq!(
        class_after(&mut e, &[&["hello", "3"], &["ssubscribe", "s"]]),
        OutputClass::Pubsub
    );
    assert_eq!(class_after(&mut e, &[&["reset"]]), OutputClass::Normal);
}

/// The open-file limit the hook below grants, whatever is asked.
fn limit_of_100(_want: u64) -> u64 {
    100
}

#[test]
fn maxclients_past_the_open_file_limit_is_refused() {
    let mut e = engine();
    e.set_file_limit(limit_of_100);
    let c = connect(&mut e);
    assert_eq!(
        cmd(&mut e, c, &["config", "set", "maxclients", "50"]),
        "+OK\r\n"
    );
    // 100 descriptors less the 32 kept back.
    assert_eq!(
        cmd(
            &mut e,
            c,
            &["config", "set", "maxclients", "1000", "timeout", "5"]
        ),
        "-ERR CONFIG SET failed (possibly related to argument 'maxclients') - The operating \
         system is not able to handle the specified number of clients, try with 68\r\n"
    );
    // All or nothing: neither value changed.
    assert_eq!(
        cmd(&mut e, c, &["config", "get", "maxclients"]),
        "*2\r\n$10\r\nmaxclients\r\n$2\r\n50\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["config", "get", "timeout"]),
        "*2\r\n$7\r\ntimeout\r\n$1\r\n0\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["config", "set", "maxclients", "68"]),
        "+OK\r\n"
    );
    // More IO threads than the limit covers are not refused (one that
    // cannot get its descriptors does not start).
    assert_eq!(
        cmd(&mut e, c, &["config", "set", "io-threads", "8"]),
        "+OK\r\n"
    );
    // With 7 IO threads, 14 more descriptors are kept back.
    assert_eq!(
        cmd(&mut e, c, &["config", "set", "maxclients", "69"]),
        "-ERR CONFIG SET failed (possibly related to argument 'maxclients') - The operating \
         system is not able to handle the specified number of clients, try with 54\r\n"
    );
}

/// CONFIG SET values Valkey 8.1 reads or keeps in its own way (each
/// checked against it).
#[test]
fn config_set_reads_and_keeps_values_as_valkey() {
    let mut e = engine();
    let c = connect(&mut e);
    let set = |e: &mut engine::Engine, name: &str, v: &str| cmd(e, c, &["CONFIG", "SET", name, v]);
    let get = |e: &mut engine::Engine, name: &str| cmd(e, c, &["CONFIG", "GET", name]);
    let shows =
        |name: &str, v: &str| format!("*2\r\n${}\r\n{name}\r\n${}\r\n{v}\r\n", name.len(), v.len());
    let refused = |name: &str, why: &str| {
        format!("-ERR CONFIG SET failed (possibly related to argument '{name}') - {why}\r\n")
    };
    // hz is kept within 1..=500, the backlog at 16 KiB or more.
    for (name, v, kept) in [
        ("hz", "0", "1"),
        ("hz", "600", "500"),
        ("repl-backlog-size", "1", "16384"),
        // A memory value without digits is 0.
        ("maxmemory", "", "0"),
        ("hll-sparse-max-bytes", "mb", "0"),
        ("commandlog-request-larger-than", "-1", "-1"),
        ("proc-title-template", "{title} {port}", "{title} {port}"),
    ] {
        assert_eq!(set(&mut e, name, v), "+OK\r\n", "{name} {v}");
        assert_eq!(get(&mut e, name), shows(name, kept), "{name} {v}");
    }
    // An empty buffer-limit list changes nothing.
    let before = get(&mut e, "client-output-buffer-limit");
    assert_eq!(set(&mut e, "client-output-buffer-limit", ""), "+OK\r\n");
    assert_eq!(get(&mut e, "client-output-buffer-limit"), before);
    for (name, v, why) in [
        (
            "client-query-buffer-limit",
            "",
            "argument must be between 1048576 and 9223372036854775807 inclusive",
        ),
        (
            "commandlog-reply-larger-than",
            "1mb",
            "argument couldn't be parsed into an integer",
        ),
        (
            "latency-tracking-info-percentiles",
            "50 x",
            "Invalid latency-tracking-info-percentiles parameters",
        ),
        (
            "latency-tracking-info-percentiles",
            "101",
            "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]",
        ),
        (
            "proc-title-template",
            "{title}",
            "template format is invalid or contains unknown variables",
        ),
    ] {
        assert_eq!(set(&mut e, name, v), refused(name, why), "{name} {v}");
    }
}
