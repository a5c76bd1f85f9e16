//! `maxmemory` as a client sees it: eviction holds used memory at the
//! limit under a write load three times its size, and `noeviction` refuses
//! writes with Valkey's OOM error while reads and deletes go on.

use ringkv_e2e::v::{bulk, err, int, int_of, ok, text};
use ringkv_e2e::{Opts, e2e, info_field, q};

/// Bytes of each value written.
const VALUE: usize = 1000;

fn used_memory(c: &mut redis::Connection) -> u64 {
    info_field(&text(&q(c, "INFO memory")), "used_memory")
        .parse()
        .unwrap()
}

/// SET `n` keys `prefix:i` of VALUE bytes, pipelined 500 at a time; every
/// reply must be OK.
fn write_keys(c: &mut redis::Connection, prefix: &str, n: usize) {
    let value = vec![b'x'; VALUE];
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let mut p = redis::pipe();
        for i in chunk {
            p.cmd("SET").arg(format!("{prefix}:{i}")).arg(&value[..]);
        }
        let replies: Vec<redis::Value> = p.query(c).unwrap();
        assert!(
            replies.iter().all(|r| *r == redis::Value::Okay),
            "a SET failed: {:?}",
            replies.iter().find(|r| **r != redis::Value::Okay)
        );
    }
}

e2e!(
    fn allkeys_lru_holds_used_memory_at_maxmemory(b) {
        let max: u64 = 20 << 20;
        let srv = b.start(
            Opts::new()
                .arg("maxmemory", "20mb")
                .arg("maxmemory-policy", "allkeys-lru"),
        );
        let c = &mut srv.client();
        // Three times maxmemory in values alone.
        let n = (3 * max as usize) / VALUE;
        write_keys(c, "k", n);
        let used = used_memory(c);
        assert!(used <= max + max / 20, "used_memory {used} over maxmemory {max} by > 5%");
        assert!(used >= max - max / 10, "used_memory {used}: far below maxmemory {max}");
        let stats = text(&q(c, "INFO stats"));
        let evicted: u64 = info_field(&stats, "evicted_keys").parse().unwrap();
        assert!(evicted > 0);
        let kept = int_of(&q(c, "DBSIZE")) as u64;
        assert_eq!(kept + evicted, n as u64);
        // The most recent writes are the ones kept.
        assert_eq!(q(c, &format!("STRLEN k:{}", n - 1)), int(VALUE as i64));
        let mem = text(&q(c, "INFO memory"));
        assert_eq!(info_field(&mem, "maxmemory_policy"), "allkeys-lru");
    }
);

e2e!(
    fn noeviction_refuses_writes_and_serves_reads_and_deletes(b) {
        let srv = b.server();
        let c = &mut srv.client();
        // A limit 2 MB above what the idle server uses.
        let max = used_memory(c) + (2 << 20);
        assert_eq!(q(c, &format!("CONFIG SET maxmemory {max}")), ok());
        assert_eq!(q(c, "CONFIG GET maxmemory-policy"), Ok(redis::Value::Array(vec![
            redis::Value::BulkString(b"maxmemory-policy".to_vec()),
            redis::Value::BulkString(b"noeviction".to_vec()),
        ])));
        let value = "x".repeat(VALUE);
        let mut refused_at = None;
        for i in 0..10_000 {
            match q(c, &format!("SET k:{i} {value}")) {
                Ok(_) => {}
                Err(e) => {
                    assert_eq!(
                        e,
                        "OOM command not allowed when used memory > 'maxmemory'."
                    );
                    refused_at = Some(i);
                    break;
                }
            }
        }
        let n = refused_at.expect("no OOM after 10 MB of writes");
        assert!(n > 1000, "refused after only {n} keys");
        assert_eq!(q(c, "GET k:0"), bulk(&value));
        assert_eq!(
            q(c, "LPUSH l x"),
            err("OOM command not allowed when used memory > 'maxmemory'.")
        );
        let stats = text(&q(c, "INFO stats"));
        assert_eq!(info_field(&stats, "evicted_keys"), "0");
        // Deleting makes room again.
        let mut del = vec!["DEL".to_string()];
        del.extend((0..n / 2).map(|i| format!("k:{i}")));
        let del: Vec<&str> = del.iter().map(String::as_str).collect();
        assert_eq!(ringkv_e2e::query(c, &del), int((n / 2) as i64));
        assert_eq!(q(c, "SET again v"), ok());
        assert_eq!(q(c, "PING"), Ok(redis::Value::SimpleString("PONG".into())));
    }
);

e2e!(
    fn lowering_maxmemory_evicts_down_without_stalling_clients(b) {
        let srv = b.start(Opts::new().arg("maxmemory-policy", "allkeys-random"));
        let c = &mut srv.client();
        write_keys(c, "k", 30_000);
        let before = int_of(&q(c, "DBSIZE"));
        let max: u64 = 8 << 20;
        let t = std::time::Instant::now();
        assert_eq!(q(c, &format!("CONFIG SET maxmemory {max}")), ok());
        // The reply does not wait for the eviction of ~20 MB of keys.
        assert!(t.elapsed() < std::time::Duration::from_millis(200), "{:?}", t.elapsed());
        // Meanwhile other commands are served between short eviction runs
        // (500 µs each at the default tenacity): the client sees the memory
        // go down over many round trips, not in one step. (A bound on each
        // PING's time would measure this machine's scheduler as well: only
        // a gross stall is caught that way.)
        let mut slowest = std::time::Duration::ZERO;
        let mut seen_over = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let used = used_memory(c);
            if used <= max + max / 20 {
                break;
            }
            seen_over.push(used);
            assert!(std::time::Instant::now() < deadline, "still over maxmemory after 5 s");
            let t = std::time::Instant::now();
            assert_eq!(q(c, "PING"), Ok(redis::Value::SimpleString("PONG".into())));
            slowest = slowest.max(t.elapsed());
        }
        let steps = seen_over.windows(2).filter(|w| w[1] < w[0]).count();
        assert!(steps >= 3, "memory went down in {steps} steps: {seen_over:?}");
        assert!(slowest < std::time::Duration::from_secs(1), "a PING took {slowest:?}");
        // Eviction may still be running: read the count and the stats at
        // one instant (nothing runs between the commands of an EXEC).
        assert_eq!(q(c, "MULTI"), ok());
        let _ = q(c, "DBSIZE");
        let _ = q(c, "INFO stats");
        let replies = match q(c, "EXEC") {
            Ok(redis::Value::Array(r)) => r,
            other => panic!("EXEC: {other:?}"),
        };
        let after = int_of(&Ok(replies[0].clone()));
        assert!(after < before / 2, "{before} -> {after}");
        let stats = text(&Ok(replies[1].clone()));
        let evicted: i64 = info_field(&stats, "evicted_keys").parse().unwrap();
        assert_eq!(evicted, before - after);
    }
);

e2e!(
    fn object_freq_and_idletime_follow_the_policy(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "SET lru v"), ok());
        // Under an LRU policy (the default noeviction counts as one) the
        // key was just written: idle 0; FREQ is refused.
        assert_eq!(q(c, "OBJECT IDLETIME lru"), int(0));
        assert!(q(c, "OBJECT FREQ lru").unwrap_err().starts_with("ERR An LFU maxmemory policy is not selected"));
        assert_eq!(q(c, "CONFIG SET maxmemory-policy allkeys-lfu"), ok());
        assert_eq!(q(c, "SET lfu v"), ok());
        // A new key starts at LFU_INIT_VAL (5); the first read adds one
        // (logarithmic, but certain from 5).
        assert_eq!(q(c, "OBJECT FREQ lfu"), int(5));
        assert_eq!(q(c, "GET lfu"), bulk("v"));
        assert_eq!(q(c, "OBJECT FREQ lfu"), int(6));
        assert!(q(c, "OBJECT IDLETIME lfu").unwrap_err().starts_with("ERR An LFU maxmemory policy is selected"));
        assert_eq!(q(c, "CONFIG SET maxmemory-policy noeviction"), ok());
    }
);

/// A replica with a small `maxmemory` under its primary's writes of 10 MB:
/// (keys it holds, keys it evicted).
fn replica_under_load(
    b: ringkv_e2e::Backend,
    primary: &ringkv_e2e::Server,
    ignore: &str,
) -> (i64, i64) {
    use ringkv_e2e::replication::{follow, stat, wait_caught_up};
    let replica = b.start(
        Opts::new()
            .arg("maxmemory", "4mb")
            .arg("maxmemory-policy", "allkeys-random")
            .arg("replica-ignore-maxmemory", ignore),
    );
    let mut r = replica.client();
    follow(&mut r, primary);
    let mut p = primary.client();
    wait_caught_up(&mut p, &mut r);
    let value = "v".repeat(500);
    for batch in 0..20 {
        let mut pipe = redis::pipe();
        for i in 0..1000 {
            pipe.cmd("SET")
                .arg(format!("key:{batch}:{i}"))
                .arg(&value)
                .ignore();
        }
        let () = pipe.query(&mut p).unwrap();
    }
    wait_caught_up(&mut p, &mut r);
    // Lowering the limit on the replica evicts nothing more when ignored.
    assert_eq!(q(&mut r, "CONFIG SET maxmemory 2mb"), ok());
    std::thread::sleep(std::time::Duration::from_millis(300));
    let keys = int_of(&q(&mut r, "DBSIZE"));
    let evicted = stat(&mut r, "stats", "evicted_keys").parse().unwrap();
    (keys, evicted)
}

e2e!(
    ringkv_only fn a_replica_ignores_maxmemory_unless_told_not_to(b) {
        for (ignore, evicts) in [("yes", false), ("no", true)] {
            for backend in [b, ringkv_e2e::Backend::Valkey] {
                let primary = b.server();
                let (keys, evicted) = replica_under_load(backend, &primary, ignore);
                let what = format!("{backend:?}, replica-ignore-maxmemory {ignore}");
                if evicts {
                    assert!(evicted > 0 && keys < 20_000, "{what}: {keys} keys, {evicted} evicted");
                } else {
                    assert_eq!((keys, evicted), (20_000, 0), "{what}");
                }
            }
        }
    }
);
