//! MULTI/EXEC/DISCARD/WATCH/UNWATCH: queueing, aborts, WATCH invalidation
//! by writes, expiry, FLUSHDB/FLUSHALL/SWAPDB, byte for byte.

#[path = "core_util.rs"]
mod util;

use ringkv_engine as engine;
use util::*;

const OK: &str = "+OK\r\n";
const QUEUED: &str = "+QUEUED\r\n";
const NULL_ARRAY: &str = "*-1\r\n";
const EXECABORT: &str = "-EXECABORT Transaction discarded because of previous errors.\r\n";
const T0: i64 = 1_800_000_000_000;

fn setup() -> (engine::Engine, engine::ClientId, engine::ClientId) {
    let mut e = engine();
    e.pin_clock(Some(T0));
    let a = connect(&mut e);
    let b = connect(&mut e);
    (e, a, b)
}

fn field<'a>(line: &'a str, name: &str) -> &'a str {
    let key = format!(" {name}=");
    let at = line
        .find(&key)
        .unwrap_or_else(|| panic!("{name} in {line}"))
        + key.len();
    line[at..].split(' ').next().unwrap()
}

/// CLIENT LIST line of client `id`, as another client sees it.
fn client_line(e: &mut engine::Engine, viewer: engine::ClientId, id: engine::ClientId) -> String {
    let out = cmd(e, viewer, &["CLIENT", "LIST", "ID", &id.0.to_string()]);
    bulk_text(&out)
}

#[test]
fn queue_and_exec() {
    let (mut e, a, _) = setup();
    assert_eq!(cmd(&mut e, a, &["MULTI"]), OK);
    assert_eq!(cmd(&mut e, a, &["SET", "k", "v"]), QUEUED);
    assert_eq!(cmd(&mut e, a, &["GET", "k"]), QUEUED);
    assert_eq!(cmd(&mut e, a, &["INCR", "n"]), QUEUED);
    assert_eq!(cmd(&mut e, a, &["CONFIG", "GET", "maxclients"]), QUEUED);
    assert_eq!(
        cmd(&mut e, a, &["EXEC"]),
        "*4\r\n+OK\r\n$1\r\nv\r\n:1\r\n*2\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n"
    );
    // Out of MULTI again.
    assert_eq!(cmd(&mut e, a, &["GET", "k"]), "$1\r\nv\r\n");
    // An empty transaction.
    cmd(&mut e, a, &["MULTI"]);
    assert_eq!(cmd(&mut e, a, &["EXEC"]), "*0\r\n");
}

#[test]
fn pipelined_transaction_in_one_batch() {
    let (mut e, a, _) = setup();
    let input = encode(&[&["MULTI"], &["SET", "x", "1"], &["INCR", "x"], &["EXEC"]]);
    let (out, _) = run_raw(&mut e, a, &input);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n:2\r\n"
    );
}

#[test]
fn state_errors() {
    let (mut e, a, _) = setup();
    assert_eq!(cmd(&mut e, a, &["EXEC"]), "-ERR EXEC without MULTI\r\n");
    assert_eq!(
        cmd(&mut e, a, &["DISCARD"]),
        "-ERR DISCARD without MULTI\r\n"
    );
    cmd(&mut e, a, &["MULTI"]);
    // MULTI and WATCH are `no_multi` (Valkey 8): refused, and the
    // transaction is doomed.
    assert_eq!(
        cmd(&mut e, a, &["MULTI"]),
        "-ERR Command not allowed inside a transaction\r\n"
    );
    assert_eq!(
        cmd(&mut e, a, &["WATCH", "k"]),
        "-ERR Command not allowed inside a transaction\r\n"
    );
    assert_eq!(cmd(&mut e, a, &["SET", "k", "1"]), QUEUED);
    assert_eq!(
        cmd(&mut e, a, &["EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
}

#[test]
fn discard_drops_the_queue() {
    let (mut e, a, _) = setup();
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["SET", "k", "v"]);
    assert_eq!(cmd(&mut e, a, &["DISCARD"]), OK);
    assert_eq!(cmd(&mut e, a, &["GET", "k"]), "$-1\r\n");
    assert_eq!(cmd(&mut e, a, &["EXEC"]), "-ERR EXEC without MULTI\r\n");
}

#[test]
fn queue_time_errors_abort_exec() {
    let (mut e, a, _) = setup();
    cmd(&mut e, a, &["MULTI"]);
    assert_eq!(cmd(&mut e, a, &["SET", "k", "v"]), QUEUED);
    assert_eq!(
        cmd(&mut e, a, &["NOSUCH", "x"]),
        "-ERR unknown command 'NOSUCH', with args beginning with: 'x' \r\n"
    );
    assert_eq!(
        cmd(&mut e, a, &["GET"]),
        "-ERR wrong number of arguments for 'get' command\r\n"
    );
    assert_eq!(cmd(&mut e, a, &["EXEC"]), EXECABORT);
    assert_eq!(cmd(&mut e, a, &["GET", "k"]), "$-1\r\n");
    // Unknown subcommand and wrong EXEC arity count too.
    cmd(&mut e, a, &["MULTI"]);
    assert!(cmd(&mut e, a, &["CONFIG", "NOPE"]).starts_with("-ERR unknown subcommand"));
    assert_eq!(cmd(&mut e, a, &["EXEC"]), EXECABORT);
    // A refused EXEC ends the transaction, as Valkey's.
    cmd(&mut e, a, &["MULTI"]);
    assert_eq!(
        cmd(&mut e, a, &["EXEC", "x"]),
        "-EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command\r\n"
    );
    assert_eq!(cmd(&mut e, a, &["EXEC"]), "-ERR EXEC without MULTI\r\n");
    let info = cmd(&mut e, a, &["INFO", "errorstats"]);
    assert!(info.contains("errorstat_EXECABORT:count=3"), "{info}");
}

#[test]
fn runtime_errors_are_per_command() {
    let (mut e, a, _) = setup();
    cmd(&mut e, a, &["SET", "s", "abc"]);
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["INCR", "s"]);
    cmd(&mut e, a, &["SET", "t", "1"]);
    cmd(&mut e, a, &["ZADD", "s", "1", "m"]);
    assert_eq!(
        cmd(&mut e, a, &["EXEC"]),
        "*3\r\n-ERR value is not an integer or out of range\r\n+OK\r\n\
         -WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    let info = cmd(&mut e, a, &["INFO", "commandstats"]);
    assert!(info.contains("cmdstat_incr:calls=1,"), "{info}");
    assert!(info.contains("failed_calls=1"), "{info}");
    assert!(info.contains("cmdstat_exec:calls=1,"), "{info}");
    let errs = cmd(&mut e, a, &["INFO", "errorstats"]);
    assert!(errs.contains("errorstat_WRONGTYPE:count=1"), "{errs}");
}

#[test]
fn resp3_exec_and_null() {
    let (mut e, a, b) = setup();
    cmd(&mut e, a, &["HELLO", "3"]);
    cmd(&mut e, a, &["WATCH", "k"]);
    cmd(&mut e, b, &["SET", "k", "x"]);
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["GET", "k"]);
    assert_eq!(cmd(&mut e, a, &["EXEC"]), "_\r\n");
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["GET", "nokey"]);
    assert_eq!(cmd(&mut e, a, &["EXEC"]), "*1\r\n_\r\n");
}

#[test]
fn watch_conflict_from_another_client() {
    let (mut e, a, b) = setup();
    cmd(&mut e, a, &["SET", "k", "1"]);
    assert_eq!(cmd(&mut e, a, &["WATCH", "k", "other"]), OK);
    assert_eq!(cmd(&mut e, b, &["SET", "k", "2"]), OK);
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["SET", "k", "3"]);
    assert_eq!(cmd(&mut e, a, &["EXEC"]), NULL_ARRAY);
    assert_eq!(cmd(&mut e, a, &["GET", "k"]), "$1\r\n2\r\n");
    // EXEC unwatched everything: the next transaction runs.
    cmd(&mut e, b, &["SET", "k", "4"]);
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["SET", "k", "5"]);
    assert_eq!(cmd(&mut e, a, &["EXEC"]), "*1\r\n+OK\r\n");
}

#[test]
fn watch_without_conflict_and_unwatch() {
    let (mut e, a, b) = setup();
    cmd(&mut e, a, &["WATCH", "k"]);
    // Reads and writes to other keys do not count.
    cmd(&mut e, b, &["GET", "k"]);
    cmd(&mut e, b, &["SET", "j", "1"]);
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["SET", "k", "1"]);
    assert_eq!(cmd(&mut e, a, &["EXEC"]), "*1\r\n+OK\r\n");
    // UNWATCH forgets a dirty watch.
    cmd(&mut e, a, &["WATCH", "k"]);
    cmd(&mut e, b, &["DEL", "k"]);
    assert_eq!(cmd(&mut e, a, &["UNWATCH"]), OK);
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["PING"]);
    assert_eq!(cmd(&mut e, a, &["EXEC"]), "*1\r\n+PONG\r\n");
    // A write to the same key name in another database is no conflict.
    cmd(&mut e, a, &["WATCH", "k"]);
    cmd(&mut e, b, &["SELECT", "1"]);
    cmd(&mut e, b, &["SET", "k", "x"]);
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["PING"]);
    assert_eq!(cmd(&mut e, a, &["EXEC"]), "*1\r\n+PONG\r\n");
}

#[test]
fn own_write_and_discard_after_watch() {
    let (mut e, a, _) = setup();
    cmd(&mut e, a, &["WATCH", "k"]);
    cmd(&mut e, a, &["SET", "k", "mine"]);
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["PING"]);
    assert_eq!(cmd(&mut e, a, &["EXEC"]), NULL_ARRAY);
    // DISCARD unwatches too.
    cmd(&mut e, a, &["WATCH", "k"]);
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["DISCARD"]);
    cmd(&mut e, a, &["SET", "k", "again"]);
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["PING"]);
    assert_eq!(cmd(&mut e, a, &["EXEC"]), "*1\r\n+PONG\r\n");
}

#[test]
fn every_kind_of_write_invalidates() {
    let writes: &[&[&str]] = &[
        &["DEL", "k"],
        &["EXPIRE", "k", "100"],
        &["PERSIST", "k"],
        &["RENAME", "k", "k2"],
        &["RENAME", "src", "k"],
        &["APPEND", "k", "x"],
        &["INCRBY", "n", "1"],
        &["MSET", "a", "1", "k", "2"],
        &["ZADD", "z", "1", "m"],
        &["MOVE", "k", "3"],
        &["COPY", "src", "k", "REPLACE"],
    ];
    for w in writes {
        let (mut e, a, b) = setup();
        cmd(&mut e, a, &["SET", "k", "1"]);
        cmd(&mut e, a, &["SET", "n", "1"]);
        cmd(&mut e, a, &["SET", "src", "s"]);
        cmd(&mut e, a, &["EXPIRE", "k", "1000"]);
        let watched = if w[0] == "INCRBY" {
            "n"
        } else if w[0] == "ZADD" {
            "z"
        } else {
            "k"
        };
        cmd(&mut e, a, &["WATCH", watched]);
        let r = cmd(&mut e, b, w);
        assert!(!r.starts_with('-'), "{w:?}: {r}");
        cmd(&mut e, a, &["MULTI"]);
        cmd(&mut e, a, &["PING"]);
        assert_eq!(cmd(&mut e, a, &["EXEC"]), NULL_ARRAY, "{w:?}");
    }
}

#[test]
fn watched_key_expiring_aborts() {
    let (mut e, a, _) = setup();
    cmd(&mut e, a, &["SET", "k", "v", "PX", "100"]);
    cmd(&mut e, a, &["WATCH", "k"]);
    e.pin_clock(Some(T0 + 200));
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["PING"]);
    // Not deleted yet, but expired since WATCH.
    assert_eq!(cmd(&mut e, a, &["EXEC"]), NULL_ARRAY);

    // Deleted by lazy expiry (another client's read) before EXEC.
    let (mut e, a, b) = setup();
    cmd(&mut e, a, &["SET", "k", "v", "PX", "100"]);
    cmd(&mut e, a, &["WATCH", "k"]);
    e.pin_clock(Some(T0 + 200));
    assert_eq!(cmd(&mut e, b, &["GET", "k"]), "$-1\r\n");
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["PING"]);
    assert_eq!(cmd(&mut e, a, &["EXEC"]), NULL_ARRAY);

    // Deleted by active expiry.
    let (mut e, a, _) = setup();
    cmd(&mut e, a, &["SET", "k", "v", "PX", "100"]);
    cmd(&mut e, a, &["WATCH", "k"]);
    e.pin_clock(Some(T0 + 200));
    e.cron();
    assert_eq!(e.server().keyspace.dbs[0].len(), 0);
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["PING"]);
    assert_eq!(cmd(&mut e, a, &["EXEC"]), NULL_ARRAY);
}

#[test]
fn key_already_expired_at_watch_is_no_change() {
    let (mut e, a, b) = setup();
    cmd(&mut e, a, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    cmd(&mut e, a, &["SET", "k", "v", "PX", "100"]);
    e.pin_clock(Some(T0 + 200));
    cmd(&mut e, a, &["WATCH", "k"]);
    // Its deletion by expiry is not a modification.
    assert_eq!(cmd(&mut e, b, &["GET", "k"]), "$-1\r\n");
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["PING"]);
    assert_eq!(cmd(&mut e, a, &["EXEC"]), "*1\r\n+PONG\r\n");
    // Without anyone deleting it either.
    cmd(&mut e, a, &["SET", "j", "v", "PX", "100"]);
    e.pin_clock(Some(T0 + 400));
    cmd(&mut e, a, &["WATCH", "j"]);
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["PING"]);
    assert_eq!(cmd(&mut e, a, &["EXEC"]), "*1\r\n+PONG\r\n");
    // But recreating it is.
    cmd(&mut e, a, &["SET", "i", "v", "PX", "100"]);
    e.pin_clock(Some(T0 + 600));
    cmd(&mut e, a, &["WATCH", "i"]);
    cmd(&mut e, b, &["SET", "i", "new"]);
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["PING"]);
    assert_eq!(cmd(&mut e, a, &["EXEC"]), NULL_ARRAY);
}

#[test]
fn flush_touches_existing_watched_keys() {
    for flush in [&["FLUSHDB"][..], &["FLUSHALL"], &["FLUSHDB", "ASYNC"]] {
        let (mut e, a, b) = setup();
        cmd(&mut e, a, &["SET", "k", "1"]);
        cmd(&mut e, a, &["WATCH", "k"]);
        cmd(&mut e, b, flush);
        cmd(&mut e, a, &["MULTI"]);
        cmd(&mut e, a, &["PING"]);
        assert_eq!(cmd(&mut e, a, &["EXEC"]), NULL_ARRAY, "{flush:?}");
    }
    // A watched key that did not exist is not touched (Valkey checks).
    let (mut e, a, b) = setup();
    cmd(&mut e, a, &["SET", "other", "1"]);
    cmd(&mut e, a, &["WATCH", "missing"]);
    cmd(&mut e, b, &["FLUSHALL"]);
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["PING"]);
    assert_eq!(cmd(&mut e, a, &["EXEC"]), "*1\r\n+PONG\r\n");
    // FLUSHDB of another database leaves the watch alone.
    cmd(&mut e, a, &["SET", "k", "1"]);
    cmd(&mut e, a, &["WATCH", "k"]);
    cmd(&mut e, b, &["SELECT", "2"]);
    cmd(&mut e, b, &["FLUSHDB"]);
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["PING"]);
    assert_eq!(cmd(&mut e, a, &["EXEC"]), "*1\r\n+PONG\r\n");
}

#[test]
fn swapdb_touches_watched_keys_of_both() {
    // The key exists in the watched database.
    let (mut e, a, b) = setup();
    cmd(&mut e, a, &["SET", "k", "1"]);
    cmd(&mut e, a, &["WATCH", "k"]);
    cmd(&mut e, b, &["SWAPDB", "0", "1"]);
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["PING"]);
    assert_eq!(cmd(&mut e, a, &["EXEC"]), NULL_ARRAY);
    // The key appears from the other database.
    let (mut e, a, b) = setup();
    cmd(&mut e, b, &["SELECT", "1"]);
    cmd(&mut e, b, &["SET", "k", "1"]);
    cmd(&mut e, a, &["WATCH", "k"]);
    cmd(&mut e, b, &["SWAPDB", "1", "0"]);
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["GET", "k"]);
    assert_eq!(cmd(&mut e, a, &["EXEC"]), NULL_ARRAY);
    // Neither has it: no change.
    let (mut e, a, b) = setup();
    cmd(&mut e, a, &["WATCH", "k"]);
    cmd(&mut e, b, &["SWAPDB", "0", "1"]);
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["PING"]);
    assert_eq!(cmd(&mut e, a, &["EXEC"]), "*1\r\n+PONG\r\n");
}

#[test]
fn quit_and_reset_inside_multi() {
    let (mut e, a, _) = setup();
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["SET", "k", "v"]);
    let (out, close) = run_raw(&mut e, a, &encode(&[&["QUIT"]]));
    assert_eq!(out, b"+OK\r\n");
    assert!(close);

    let (mut e, a, b) = setup();
    cmd(&mut e, a, &["WATCH", "w"]);
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["SET", "k", "v"]);
    assert_eq!(cmd(&mut e, a, &["RESET"]), "+RESET\r\n");
    assert_eq!(cmd(&mut e, a, &["EXEC"]), "-ERR EXEC without MULTI\r\n");
    assert_eq!(cmd(&mut e, a, &["GET", "k"]), "$-1\r\n");
    let line = client_line(&mut e, b, a);
    assert_eq!(field(&line, "watch"), "0");
    // Valkey 8.1 keeps the transaction state it made for WATCH: 0, not -1.
    assert_eq!(field(&line, "multi"), "0");
}

#[test]
fn client_list_and_info_show_multi_state() {
    let (mut e, a, b) = setup();
    cmd(&mut e, a, &["WATCH", "k1", "k2", "k1"]);
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["SET", "k", "v"]);
    cmd(&mut e, a, &["GET", "k"]);
    let line = client_line(&mut e, b, a);
    assert_eq!(field(&line, "flags"), "x");
    assert_eq!(field(&line, "multi"), "2");
    assert_eq!(field(&line, "watch"), "2");
    assert_ne!(field(&line, "multi-mem"), "0");
    let info = cmd(&mut e, b, &["INFO", "clients"]);
    assert!(info.contains("watching_clients:1\r\n"), "{info}");
    assert!(info.contains("total_watched_keys:2\r\n"), "{info}");
    cmd(&mut e, a, &["EXEC"]);
    let line = client_line(&mut e, b, a);
    assert_eq!(field(&line, "flags"), "N");
    // -1 only for a client that never used MULTI or WATCH (Valkey 8.1).
    assert_eq!(field(&line, "multi"), "0");
    assert_eq!(field(&line, "watch"), "0");
    assert_eq!(field(&client_line(&mut e, a, b), "multi"), "-1");
    let info = cmd(&mut e, b, &["INFO", "clients"]);
    assert!(info.contains("watching_clients:0\r\n"), "{info}");
    assert!(info.contains("total_watched_keys:0\r\n"), "{info}");
}

#[test]
fn a_doomed_transaction_stops_watching() {
    let (mut e, a, b) = setup();
    cmd(&mut e, a, &["WATCH", "k1", "k2"]);
    cmd(&mut e, b, &["SET", "k1", "v"]);
    // As Valkey's touchWatchedKey: flag `d`, every key unwatched.
    let line = client_line(&mut e, b, a);
    assert_eq!(field(&line, "flags"), "d");
    assert_eq!(field(&line, "watch"), "0");
    let info = cmd(&mut e, b, &["INFO", "clients"]);
    assert!(info.contains("watching_clients:0\r\n"), "{info}");
    assert!(info.contains("total_watched_keys:0\r\n"), "{info}");
    // A later WATCH adds nothing; EXEC still fails.
    cmd(&mut e, a, &["WATCH", "k3"]);
    let info = cmd(&mut e, b, &["INFO", "clients"]);
    assert!(info.contains("total_watched_keys:0\r\n"), "{info}");
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["SET", "k3", "v"]);
    assert_eq!(cmd(&mut e, a, &["EXEC"]), "*-1\r\n");
    assert_eq!(field(&client_line(&mut e, b, a), "flags"), "N");
}

#[test]
fn disconnect_forgets_watches() {
    let (mut e, a, b) = setup();
    cmd(&mut e, a, &["WATCH", "k"]);
    e.disconnect(a);
    let info = cmd(&mut e, b, &["INFO", "clients"]);
    assert!(info.contains("total_watched_keys:0\r\n"), "{info}");
    assert!(!e.server().expiry_logging);
}

#[test]
fn commands_in_exec_are_counted_once_each() {
    let (mut e, a, _) = setup();
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["SET", "k", "v"]);
    cmd(&mut e, a, &["SET", "k", "w"]);
    cmd(&mut e, a, &["EXEC"]);
    let info = cmd(&mut e, a, &["INFO", "commandstats"]);
    assert!(info.contains("cmdstat_set:calls=2,"), "{info}");
    assert!(info.contains("cmdstat_multi:calls=1,"), "{info}");
}
