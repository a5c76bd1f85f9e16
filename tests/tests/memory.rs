//! MEMORY and INFO memory through a real client. Every test also passes
//! against redis-server 7.0, whose figures differ but keep the same shape.

use redis::Value;
use ringkv_e2e::v::{int, int_of, ok, text};
use ringkv_e2e::{e2e, info_field, q, query};

fn usage(c: &mut redis::Connection, key: &str) -> i64 {
    int_of(&q(c, &format!("MEMORY USAGE {key}")))
}

e2e!(
    fn usage_grows_with_the_value(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "MEMORY USAGE nosuchkey"), Ok(Value::Nil));
        assert_eq!(q(c, "SET small v"), ok());
        let big = "x".repeat(200_000);
        assert_eq!(query(c, &["SET", "big", &big]), ok());
        let small = usage(c, "small");
        let large = usage(c, "big");
        assert!(small > 0 && small < 1024, "small string: {small}");
        assert!(
            (200_000..260_000).contains(&large),
            "200,000-byte string: {large}"
        );
        assert_eq!(q(c, "HSET h f v"), ok_int(1));
        let h1 = usage(c, "h");
        let mut args = vec!["HSET".to_string(), "h".to_string()];
        for i in 0..1000 {
            args.push(format!("field-{i}"));
            args.push(format!("value number {i}"));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(query(c, &args), ok_int(1000));
        let h1000 = usage(c, "h");
        assert!(h1000 > h1 + 1000 * 20, "hash of 1 then 1001 fields: {h1} -> {h1000}");
        assert_eq!(
            q(c, "MEMORY USAGE h SAMPLES x"),
            Err("ERR value is not an integer or out of range".into())
        );
        assert_eq!(q(c, "MEMORY USAGE h SAMPLES -1"), Err("ERR syntax error".into()));
        assert!(matches!(q(c, "MEMORY USAGE h SAMPLES 0"), Ok(Value::Int(_))));
    }
);

fn ok_int(n: i64) -> Result<Value, String> {
    Ok(Value::Int(n))
}

e2e!(
    fn stats_counts_the_keys_and_allocator_commands_answer(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "MSET a 1 b 2 c 3"), ok());
        assert_eq!(q(c, "SELECT 2"), ok());
        assert_eq!(q(c, "SET d 4"), ok());
        let dbsize = int_of(&q(c, "DBSIZE")) + 3;
        let Ok(Value::Array(stats)) = q(c, "MEMORY STATS") else {
            panic!("MEMORY STATS is not an array");
        };
        let field = |name: &str| {
            stats
                .chunks(2)
                .find(|p| p[0] == Value::BulkString(name.as_bytes().to_vec()))
                .map(|p| p[1].clone())
                .unwrap_or_else(|| panic!("MEMORY STATS lacks {name}: {stats:?}"))
        };
        assert_eq!(field("keys.count"), Value::Int(dbsize));
        for name in ["peak.allocated", "total.allocated", "startup.allocated", "dataset.bytes"] {
            assert!(matches!(field(name), Value::Int(n) if n >= 0), "{name}");
        }
        assert!(matches!(field("db.2"), Value::Array(_)));
        let malloc = text(&q(c, "MEMORY MALLOC-STATS"));
        assert!(
            malloc.starts_with("___ Begin jemalloc statistics ___"),
            "{}",
            &malloc[..malloc.len().min(200)]
        );
        assert!(malloc.contains("--- End jemalloc statistics ---"));
        assert_eq!(q(c, "MEMORY PURGE"), ok());
        let doctor = text(&q(c, "MEMORY DOCTOR"));
        assert!(doctor.contains("Sam"), "{doctor}");
        let help = ringkv_e2e::v::strings(&q(c, "MEMORY HELP"));
        assert!(help[0].starts_with("MEMORY <subcommand>"), "{help:?}");
        assert_eq!(
            q(c, "MEMORY NOPE"),
            Err("ERR unknown subcommand 'NOPE'. Try MEMORY HELP.".into())
        );
    }
);

e2e!(
    fn info_memory_has_every_field(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "SET k v"), ok());
        let t = text(&q(c, "INFO memory"));
        let mut fields = vec![
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
            "total_system_memory",
            "used_memory_lua",
            "used_memory_vm_eval",
            "used_memory_scripts_eval",
            "number_of_cached_scripts",
            "used_memory_scripts",
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
            "active_defrag_running",
            "lazyfree_pending_objects",
            "lazyfreed_objects",
        ];
        // Redis 7.4 / Valkey 8 added these; Debian's 7.0 lacks them.
        if !b.is_redis() {
            fields.extend(["allocator_muzzy", "mem_overhead_db_hashtable_rehashing"]);
        }
        for f in fields {
            info_field(&t, f);
        }
        let num = |f: &str| info_field(&t, f).parse::<u64>().unwrap();
        assert!(num("used_memory") > 0);
        assert!(num("used_memory_peak") >= num("used_memory"));
        assert!(num("used_memory_startup") > 0);
        assert!(num("used_memory_startup") <= num("used_memory_peak"));
        assert_eq!(
            num("used_memory_overhead") + num("used_memory_dataset"),
            num("used_memory")
        );
        // Redis 7.0 shows 0 for an idle client without buffers; ringkv
        // counts each session's base cost, as CLIENT LIST tot-mem does.
        if !b.is_redis() {
            assert!(num("mem_clients_normal") > 0);
        }
        assert!(info_field(&t, "mem_allocator").starts_with("jemalloc-"));
    }
);

/// A subscriber that stops reading while 24 MB are published to it, with
/// `maxmemory-clients 2mb`: it is evicted (INFO `evicted_clients`), and
/// its connection ends; the publisher, small, stays.
fn slow_subscriber_is_evicted(srv: &ringkv_e2e::Server) {
    use std::io::Read;
    let c = &mut srv.client();
    assert_eq!(q(c, "CONFIG SET maxmemory-clients 2mb"), ok());
    let mut sub = srv.raw();
    sub.cmd(&["SUBSCRIBE", "news"]);
    // Small messages, so that the publisher's own query buffer never
    // makes it the bigger client.
    let payload = "x".repeat(64 << 10);
    for _ in 0..384 {
        assert!(int_of(&query(c, &["PUBLISH", "news", &payload])) <= 1);
    }
    ringkv_e2e::within(10, "the subscriber to be evicted", || {
        info_field(&text(&q(c, "INFO stats")), "evicted_clients") == "1"
    });
    assert_eq!(q(c, "PING").map(|_| ()), Ok(()));
    // What the kernel already held arrives, then the end.
    sub.stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut sink = vec![0u8; 1 << 20];
    let mut got = 0usize;
    loop {
        match sub.stream.read(&mut sink) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("the evicted subscriber's socket: {e} after {got} bytes"),
        }
    }
    assert!(got < 24 << 20, "not everything was delivered: {got} bytes");
}

e2e!(
    ringkv_only fn maxmemory_clients_evicts_a_slow_subscriber_as_valkey_does(b) {
        slow_subscriber_is_evicted(&b.server());
        slow_subscriber_is_evicted(&ringkv_e2e::Backend::Valkey.server());
    }
);

/// `lazyfreed_objects` once FLUSHALL ASYNC of 1,000 keys is done: Valkey
/// counts the keys a flushed database held, not the database.
fn lazyfreed_by_a_flush(s: &ringkv_e2e::Server) -> String {
    let c = &mut s.client();
    let mset: Vec<String> = (0..1000).map(|i| format!("lf:{i} v")).collect();
    assert_eq!(q(c, &format!("MSET {}", mset.join(" "))), ok());
    assert_eq!(q(c, "FLUSHALL ASYNC"), ok());
    ringkv_e2e::within(10, "the flush to be freed", || {
        info_field(&text(&q(c, "INFO memory")), "lazyfree_pending_objects") == "0"
    });
    info_field(&text(&q(c, "INFO memory")), "lazyfreed_objects")
}

e2e!(
    ringkv_only fn lazyfreed_objects_counts_a_flushed_databases_keys_as_valkey(b) {
        let want = lazyfreed_by_a_flush(&ringkv_e2e::Backend::Valkey.server());
        assert_eq!(want, "1000", "Valkey 8.1, the oracle");
        assert_eq!(lazyfreed_by_a_flush(&b.server()), want, "ringkv");
    }
);

/// `lazyfreed_objects` after a SET over a 1,000-member set and the active
/// expiry of a 1,000-member sorted set, then the same with both lazyfree
/// settings off (freed in place: the count stays).
fn lazyfreed_by_overwrite_and_expiry(s: &ringkv_e2e::Server) -> Vec<String> {
    let c = &mut s.client();
    let mut counts = Vec::new();
    for setting in ["yes", "no"] {
        for name in ["lazyfree-lazy-server-del", "lazyfree-lazy-expire"] {
            assert_eq!(q(c, &format!("CONFIG SET {name} {setting}")), ok());
        }
        let members: Vec<String> = (0..1000).map(|i| format!("m{i}")).collect();
        assert_eq!(q(c, &format!("SADD big {}", members.join(" "))), int(1000));
        assert_eq!(q(c, "SET big x"), ok());
        let scored: Vec<String> = (0..1000).map(|i| format!("{i} m{i}")).collect();
        assert_eq!(q(c, &format!("ZADD exp {}", scored.join(" "))), int(1000));
        assert_eq!(q(c, "PEXPIRE exp 50"), int(1));
        // Gone by active expiry (nothing reads it), then freed.
        ringkv_e2e::within(10, "the sorted set to expire", || q(c, "DBSIZE") == int(1));
        ringkv_e2e::within(10, "the values to be freed", || {
            info_field(&text(&q(c, "INFO memory")), "lazyfree_pending_objects") == "0"
        });
        counts.push(info_field(&text(&q(c, "INFO memory")), "lazyfreed_objects"));
        assert_eq!(q(c, "DEL big"), int(1));
    }
    counts
}

e2e!(
    ringkv_only fn overwritten_and_expired_values_are_lazyfreed_as_valkey(b) {
        let want = lazyfreed_by_overwrite_and_expiry(&ringkv_e2e::Backend::Valkey.server());
        assert_eq!(want, ["2", "2"], "Valkey 8.1, the oracle");
        assert_eq!(lazyfreed_by_overwrite_and_expiry(&b.server()), want, "ringkv");
    }
);

e2e!(
    /// Valkey's "UNLINK can reclaim memory in background": a connection
    /// that once sent one command of 100,000 arguments does not keep what
    /// parsing it took (1.6 MB of argument spans), inline or threaded.
    ringkv_only fn a_command_of_many_arguments_leaves_no_memory_behind(b) {
        for threads in ["1", "2"] {
            let srv = b.start(ringkv_e2e::Opts::new().arg("io-threads", threads));
            let c = &mut srv.client();
            let used = |c: &mut redis::Connection| -> i64 {
                info_field(&text(&q(c, "INFO memory")), "used_memory").parse().unwrap()
            };
            // First uses (a command's statistics) are not what is measured.
            assert_eq!(q(c, "SADD warm 1 2 3"), int(3));
            assert_eq!(q(c, "UNLINK warm"), int(1));
            let before = used(c);
            let members: Vec<u32> = (0..100_000).collect();
            let added: i64 = redis::cmd("SADD").arg("myset").arg(&members).query(c).unwrap();
            assert_eq!(added, 100_000);
            let peak = used(c);
            assert!(peak > before + 1_000_000, "io-threads {threads}: {before} → {peak}");
            assert_eq!(q(c, "UNLINK myset"), int(1));
            ringkv_e2e::within(10, "the set to be freed", || {
                info_field(&text(&q(c, "INFO memory")), "lazyfree_pending_objects") == "0"
            });
            let after = used(c);
            assert!(
                after < before + 256 * 1024,
                "io-threads {threads}: used_memory {before} before, {peak} with the set, {after} after"
            );
        }
    }
);

/// How many of `pid`'s threads jemalloc's purging thread names its own.
fn jemalloc_threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .filter(|comm| comm.trim() == "jemalloc_bg_thd")
        .count()
}

e2e!(
    ringkv_only fn jemalloc_bg_thread_starts_and_stops_the_purging_thread(b) {
        let srv = b.server();
        let pid = srv.pid().unwrap();
        let mut c = srv.client();
        ringkv_e2e::within(5, "jemalloc's thread", || jemalloc_threads(pid) > 0);
        assert_eq!(q(&mut c, "CONFIG SET jemalloc-bg-thread no"), ok());
        ringkv_e2e::within(5, "no jemalloc thread", || jemalloc_threads(pid) == 0);
        assert_eq!(q(&mut c, "CONFIG SET jemalloc-bg-thread yes"), ok());
        ringkv_e2e::within(5, "jemalloc's thread again", || jemalloc_threads(pid) > 0);
        drop(c);
        drop(srv);
        // Off from the start.
        let srv = b.start(ringkv_e2e::Opts::new().arg("jemalloc-bg-thread", "no"));
        let mut c = srv.client();
        assert_eq!(q(&mut c, "SET k v"), ok());
        assert_eq!(jemalloc_threads(srv.pid().unwrap()), 0);
    }
);

const DEFRAG_KEYS: usize = 100_000;

fn defrag_value(i: usize) -> String {
    format!("{i:0>40}")
}

/// SETs `DEFRAG_KEYS` strings (one in eight with a TTL) and as many small
/// hashes, then deletes three in four of each: every slab of their size
/// classes is left a quarter full.
fn leave_sparse_slabs(c: &mut redis::Connection) {
    let mut p = redis::pipe();
    for i in 0..DEFRAG_KEYS {
        p.cmd("SET")
            .arg(format!("key:{i}"))
            .arg(defrag_value(i))
            .ignore();
        if i % 8 == 0 {
            p.cmd("EXPIRE").arg(format!("key:{i}")).arg(3600).ignore();
        }
        p.cmd("HSET")
            .arg(format!("h:{i}"))
            .arg("f")
            .arg(i)
            .arg("g")
            .arg("v")
            .ignore();
    }
    p.query::<()>(c).unwrap();
    let mut p = redis::pipe();
    for i in (0..DEFRAG_KEYS).filter(|i| i % 4 != 0) {
        p.cmd("DEL")
            .arg(format!("key:{i}"))
            .arg(format!("h:{i}"))
            .ignore();
    }
    p.query::<()>(c).unwrap();
}

fn defrag_opts() -> ringkv_e2e::Opts {
    ringkv_e2e::Opts::new()
        .arg("active-defrag-ignore-bytes", "1mb")
        .arg("active-defrag-threshold-lower", "5")
}

fn info_number(c: &mut redis::Connection, name: &str) -> f64 {
    info_field(&text(&q(c, "INFO all")), name).parse().unwrap()
}

// After the deletions, active defragmentation gives most of the sparse
// slabs' space back while every key keeps its value and TTL.
e2e!(
    ringkv_only fn active_defrag_empties_the_slabs_deletions_left_sparse(b) {
        let srv = b.start(defrag_opts());
        let c = &mut srv.client();
        leave_sparse_slabs(c);
        let before = info_number(c, "allocator_frag_ratio");
        assert!(before > 1.5, "the deletions must leave slabs sparse: {before}");
        assert_eq!(info_number(c, "active_defrag_running"), 0.0);
        assert_eq!(q(c, "CONFIG SET activedefrag yes"), ok());
        ringkv_e2e::within(30, "the fragmentation to fall", || {
            info_number(c, "allocator_frag_ratio") < 1.2
        });
        let after = info_number(c, "allocator_frag_ratio");
        assert!(info_number(c, "active_defrag_hits") > 10_000.0);
        assert!(info_number(c, "active_defrag_key_hits") > 10_000.0);
        assert_eq!(q(c, "CONFIG SET activedefrag no"), ok());
        ringkv_e2e::within(5, "the run to stop", || {
            info_number(c, "active_defrag_running") == 0.0
        });
        let kept: Vec<usize> = (0..DEFRAG_KEYS).step_by(4).collect();
        assert_eq!(int_of(&q(c, "DBSIZE")), 2 * kept.len() as i64, "{before} → {after}");
        for &i in kept.iter().step_by(7) {
            let h: Vec<String> = redis::cmd("HGETALL").arg(format!("h:{i}")).query(c).unwrap();
            assert_eq!(h, [String::from("f"), i.to_string(), "g".into(), "v".into()]);
        }
        for chunk in kept.chunks(1000) {
            let names: Vec<String> = chunk.iter().map(|i| format!("key:{i}")).collect();
            let got: Vec<String> = redis::cmd("MGET").arg(&names).query(c).unwrap();
            let want: Vec<String> = chunk.iter().map(|&i| defrag_value(i)).collect();
            assert_eq!(got, want);
            for &i in chunk.iter().filter(|i| *i % 8 == 0).take(5) {
                let ttl = int_of(&q(c, &format!("TTL key:{i}")));
                assert!((3500..=3600).contains(&ttl), "key:{i} TTL {ttl}");
            }
        }
    }
);

// Keys do not move while a BGSAVE walks the database (its view reads
// them between steps); the run goes on once the save is done.
e2e!(
    ringkv_only fn active_defrag_waits_for_a_bgsave(b) {
        let srv = b.start(defrag_opts().arg("rdb-key-save-delay", "100"));
        let c = &mut srv.client();
        leave_sparse_slabs(c);
        assert_eq!(text(&q(c, "BGSAVE")), "Background saving started");
        assert_eq!(q(c, "CONFIG SET activedefrag yes"), ok());
        // 25,000 keys at 100 µs each: the save takes ~2.5 s.
        for _ in 0..10 {
            std::thread::sleep(std::time::Duration::from_millis(100));
            assert_eq!(info_number(c, "rdb_bgsave_in_progress"), 1.0);
            assert_eq!(info_number(c, "active_defrag_hits"), 0.0);
        }
        ringkv_e2e::within(30, "the save to end", || {
            info_number(c, "rdb_bgsave_in_progress") == 0.0
        });
        ringkv_e2e::within(30, "keys to move", || info_number(c, "active_defrag_hits") > 10_000.0);
    }
);

// Large hashes (tables of fields) lose three fields in four: the walk goes
// through each one's nodes, long field names and values, and every field
// left reads back.
e2e!(
    ringkv_only fn active_defrag_moves_the_insides_of_large_hashes(b) {
        let srv = b.start(defrag_opts());
        let c = &mut srv.client();
        let (hashes, fields) = (20, 5000);
        let field = |f: usize| format!("field number {f} with a name past the inline size");
        for h in 0..hashes {
            let mut cmd = redis::cmd("HSET");
            cmd.arg(format!("big:{h}"));
            for f in 0..fields {
                cmd.arg(field(f)).arg(format!("{h}:{f}"));
            }
            let _: i64 = cmd.query(c).unwrap();
        }
        // Deleted once all are written, so that no hash reuses the space
        // another one freed.
        for h in 0..hashes {
            let mut cmd = redis::cmd("HDEL");
            cmd.arg(format!("big:{h}"));
            for f in (0..fields).filter(|f| f % 4 != 0) {
                cmd.arg(field(f));
            }
            let _: i64 = cmd.query(c).unwrap();
        }
        assert_eq!(text(&q(c, "OBJECT ENCODING big:0")), "hashtable");
        let before = info_number(c, "allocator_frag_ratio");
        assert!(before > 1.5, "the deletions must leave slabs sparse: {before}");
        assert_eq!(q(c, "CONFIG SET activedefrag yes"), ok());
        ringkv_e2e::within(30, "the fragmentation to fall", || {
            info_number(c, "allocator_frag_ratio") < 1.2
        });
        for h in 0..hashes {
            assert_eq!(int_of(&q(c, &format!("HLEN big:{h}"))), (fields / 4) as i64);
            for f in (0..fields).step_by(4 * 97) {
                let got: String =
                    redis::cmd("HGET").arg(format!("big:{h}")).arg(field(f)).query(c).unwrap();
                assert_eq!(got, format!("{h}:{f}"));
            }
        }
    }
);

// Streams' blocks move too: those of streams of up to
// `active-defrag-max-scan-fields` blocks with their keys, the others
// walked apart; every entry and group reads back the same.
e2e!(
    ringkv_only fn active_defrag_moves_stream_blocks(b) {
        let srv = b.start(
            defrag_opts()
                .arg("stream-node-max-entries", "4")
                .arg("active-defrag-max-scan-fields", "100")
                .arg("lazyfree-lazy-user-del", "no"),
        );
        let c = &mut srv.client();
        // 400 streams of 240 or 480 entries (60 or 120 blocks), written
        // round-robin so that their blocks share slabs.
        let (streams, rounds) = (400, 480);
        let entries = |s: usize| if s.is_multiple_of(2) { rounds / 2 } else { rounds };
        // 200 bytes: the blocks, not the maps that index them (which stay
        // where they are), hold most of the memory.
        let reading = |s: usize, r: usize| format!("{s}/{r:-<196}");
        for r in 0..rounds {
            let mut p = redis::pipe();
            for s in (0..streams).filter(|&s| r < entries(s)) {
                p.cmd("XADD")
                    .arg(format!("x:{s}"))
                    .arg(format!("{}-1", r + 1))
                    .arg("reading")
                    .arg(reading(s, r))
                    .ignore();
            }
            let () = p.query(c).unwrap();
        }
        for s in (0..streams).step_by(4) {
            let _: String = redis::cmd("XGROUP")
                .arg("CREATE")
                .arg(format!("x:{s}"))
                .arg("g")
                .arg("0")
                .query(c)
                .unwrap();
        }
        let gone: Vec<String> = (0..streams)
            .filter(|s| s % 4 >= 2)
            .map(|s| format!("x:{s}"))
            .collect();
        assert_eq!(int_of(&q(c, &format!("DEL {}", gone.join(" ")))), gone.len() as i64);
        let before = info_number(c, "allocator_frag_bytes");
        assert!(
            info_number(c, "allocator_frag_ratio") > 1.3,
            "the deletions must leave slabs sparse"
        );
        assert_eq!(q(c, "CONFIG SET activedefrag yes"), ok());
        // Measured: 18.0 MB → 5.3 MB, what is left being mostly the
        // sparse slabs of the deleted streams' map nodes.
        ringkv_e2e::within(30, "the fragmentation to fall", || {
            info_number(c, "allocator_frag_bytes") < before * 0.5
        });
        assert!(info_number(c, "active_defrag_hits") > 8_000.0);
        assert_eq!(q(c, "CONFIG SET activedefrag no"), ok());
        for s in (0..streams).filter(|s| s % 4 < 2) {
            let key = format!("x:{s}");
            assert_eq!(int_of(&q(c, &format!("XLEN {key}"))), entries(s) as i64);
            let all: Vec<(String, Vec<(String, String)>)> =
                redis::cmd("XRANGE").arg(&key).arg("-").arg("+").query(c).unwrap();
            for (r, (id, fields)) in all.iter().enumerate() {
                assert_eq!(id, &format!("{}-1", r + 1));
                assert_eq!(fields, &[("reading".to_string(), reading(s, r))]);
            }
            let groups: Vec<Value> =
                redis::cmd("XINFO").arg("GROUPS").arg(&key).query(c).unwrap();
            assert_eq!(groups.len(), usize::from(s % 4 == 0), "{key}");
        }
    }
);
