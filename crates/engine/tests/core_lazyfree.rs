//! Large values are freed on the lazyfree thread: UNLINK, DEL (with
//! `lazyfree-lazy-user-del`, Valkey 8's default), FLUSHDB/FLUSHALL ASYNC
//! (and plain, with `lazyfree-lazy-user-flush`); small ones inline.

#[path = "core_util.rs"]
mod util;

use util::*;

fn info_field(e: &mut ringkv_engine::Engine, c: ringkv_engine::ClientId, name: &str) -> u64 {
    let text = cmd(e, c, &["INFO", "all"]);
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in INFO"));
    line[name.len() + 1..].trim().parse().unwrap()
}

/// Wait (bounded) until the lazyfree thread has freed `n` objects.
fn wait_freed(e: &mut ringkv_engine::Engine, c: ringkv_engine::ClientId, n: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let freed = info_field(e, c, "lazyfreed_objects");
        if freed == n {
            assert_eq!(info_field(e, c, "lazyfree_pending_objects"), 0);
            return;
        }
        assert!(freed < n, "freed {freed} > {n}");
        assert!(
            std::time::Instant::now() < deadline,
            "only {freed} of {n} freed"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// A sorted set of `n` members (past 128 it is a skiplist).
fn zset(e: &mut ringkv_engine::Engine, c: ringkv_engine::ClientId, key: &str, n: usize) {
    let mut words = vec!["ZADD".to_string(), key.to_string()];
    for i in 0..n {
        words.push(i.to_string());
        words.push(format!("m{i}"));
    }
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    assert_eq!(cmd(e, c, &w), format!(":{n}\r\n"));
}

#[test]
fn unlink_and_del_free_large_values_on_the_lazyfree_thread() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(
        cmd(&mut e, c, &["CONFIG", "GET", "lazyfree-lazy-user-del"]),
        "*2\r\n$22\r\nlazyfree-lazy-user-del\r\n$3\r\nyes\r\n"
    );
    zset(&mut e, c, "big1", 1000);
    zset(&mut e, c, "big2", 1000);
    zset(&mut e, c, "small", 10);
    cmd(&mut e, c, &["SET", "s", "x"]);
    assert_eq!(
        cmd(&mut e, c, &["UNLINK", "big1", "small", "s", "nokey"]),
        ":3\r\n"
    );
    wait_freed(&mut e, c, 1);
    assert_eq!(cmd(&mut e, c, &["DEL", "big2"]), ":1\r\n");
    wait_freed(&mut e, c, 2);
    // With lazy user-del off, DEL frees here; UNLINK still does not.
    cmd(
        &mut e,
        c,
        &["CONFIG", "SET", "lazyfree-lazy-user-del", "no"],
    );
    zset(&mut e, c, "big3", 1000);
    zset(&mut e, c, "big4", 1000);
    assert_eq!(cmd(&mut e, c, &["DEL", "big3"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["UNLINK", "big4"]), ":1\r\n");
    wait_freed(&mut e, c, 3);
    assert_eq!(cmd(&mut e, c, &["DBSIZE"]), ":0\r\n");
}

#[test]
fn flush_async_hands_databases_to_the_lazyfree_thread() {
    let mut e = engine();
    let c = connect(&mut e);
    for i in 0..500 {
        cmd(&mut e, c, &["SET", &format!("k{i}"), "v"]);
    }
    cmd(&mut e, c, &["SELECT", "1"]);
    for i in 0..10 {
        cmd(&mut e, c, &["SET", &format!("k{i}"), "v"]);
    }
    // db 0 is large enough to go to the thread, db 1 is freed inline;
    // both count their keys (Valkey's count).
    assert_eq!(cmd(&mut e, c, &["FLUSHALL", "ASYNC"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["DBSIZE"]), ":0\r\n");
    cmd(&mut e, c, &["SELECT", "0"]);
    assert_eq!(cmd(&mut e, c, &["DBSIZE"]), ":0\r\n");
    wait_freed(&mut e, c, 510);
    // The emptied database works as before.
    cmd(&mut e, c, &["SET", "k", "v", "PX", "100000"]);
    assert_eq!(cmd(&mut e, c, &["GET", "k"]), "$1\r\nv\r\n");
    for i in 0..100 {
        cmd(&mut e, c, &["SET", &format!("k{i}"), "v"]);
    }
    // SYNC frees here.
    assert_eq!(cmd(&mut e, c, &["FLUSHDB", "SYNC"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["DBSIZE"]), ":0\r\n");
    for i in 0..100 {
        cmd(&mut e, c, &["SET", &format!("k{i}"), "v"]);
    }
    // No flag: lazyfree-lazy-user-flush (yes by default) decides.
    assert_eq!(cmd(&mut e, c, &["FLUSHDB"]), "+OK\r\n");
    wait_freed(&mut e, c, 510 + 100);
}

#[test]
fn overwritten_and_expired_large_values_go_to_the_lazyfree_thread() {
    let mut e = engine();
    let c = connect(&mut e);
    e.pin_clock(Some(1_000_000));
    // Valkey 8's defaults: both on. Overwrites (SET over it, RENAME onto
    // it) and expiry (on access, or by cron).
    zset(&mut e, c, "big", 1000);
    cmd(&mut e, c, &["SET", "big", "now a string"]);
    zset(&mut e, c, "src", 1000);
    zset(&mut e, c, "dst", 1000);
    cmd(&mut e, c, &["RENAME", "src", "dst"]);
    zset(&mut e, c, "gone", 1000);
    zset(&mut e, c, "swept", 1000);
    cmd(&mut e, c, &["PEXPIRE", "gone", "10"]);
    cmd(&mut e, c, &["PEXPIRE", "swept", "10"]);
    // Server-side deletions: a *STORE with nothing to store, a time
    // already past.
    zset(&mut e, c, "stored", 1000);
    assert_eq!(
        cmd(&mut e, c, &["SUNIONSTORE", "stored", "nothing"]),
        ":0\r\n"
    );
    zset(&mut e, c, "past", 1000);
    assert_eq!(cmd(&mut e, c, &["PEXPIREAT", "past", "1"]), ":1\r\n");
    // Small ones are freed in place, as before.
    zset(&mut e, c, "small", 10);
    cmd(&mut e, c, &["SET", "small", "x"]);
    e.pin_clock(Some(1_000_100));
    assert_eq!(cmd(&mut e, c, &["EXISTS", "gone"]), ":0\r\n");
    e.cron();
    e.commit_effects();
    assert_eq!(cmd(&mut e, c, &["DBSIZE"]), ":3\r\n");
    wait_freed(&mut e, c, 6);
    assert_eq!(cmd(&mut e, c, &["ZCARD", "dst"]), ":1000\r\n");

    // Off: freed in place.
    cmd(
        &mut e,
        c,
        &["CONFIG", "SET", "lazyfree-lazy-server-del", "no"],
    );
    cmd(&mut e, c, &["CONFIG", "SET", "lazyfree-lazy-expire", "no"]);
    cmd(&mut e, c, &["SET", "dst", "x"]);
    zset(&mut e, c, "gone", 1000);
    cmd(&mut e, c, &["PEXPIRE", "gone", "10"]);
    e.pin_clock(Some(1_000_200));
    assert_eq!(cmd(&mut e, c, &["EXISTS", "gone"]), ":0\r\n");
    e.commit_effects();
    assert_eq!(info_field(&mut e, c, "lazyfreed_objects"), 6);
    assert_eq!(info_field(&mut e, c, "lazyfree_pending_objects"), 0);
}

#[test]
fn config_resetstat_restarts_the_counters_as_valkeys() {
    let mut e = engine();
    let c = connect(&mut e);
    zset(&mut e, c, "big", 1000);
    cmd(&mut e, c, &["UNLINK", "big"]);
    wait_freed(&mut e, c, 1);
    cmd(&mut e, c, &["SET", "k", "v"]);
    let peak = info_field(&mut e, c, "used_memory_peak");
    assert_eq!(cmd(&mut e, c, &["CONFIG", "RESETSTAT"]), "+OK\r\n");
    assert_eq!(info_field(&mut e, c, "lazyfreed_objects"), 0);
    for counter in [
        "sync_full",
        "rdb_saves",
        "aof_rewrites",
        "total_net_repl_output_bytes",
    ] {
        assert_eq!(info_field(&mut e, c, counter), 0, "{counter}");
    }
    // The memory peak is not a counter: it stays.
    assert!(info_field(&mut e, c, "used_memory_peak") >= peak);
    zset(&mut e, c, "big", 1000);
    cmd(&mut e, c, &["UNLINK", "big"]);
    wait_freed(&mut e, c, 1);
}
