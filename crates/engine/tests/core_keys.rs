//! Generic key commands: DEL UNLINK EXISTS TOUCH TYPE, EXPIRE/TTL families,
//! PERSIST, RENAME(NX), COPY, MOVE, KEYS, SCAN, RANDOMKEY, OBJECT.

#[path = "core_util.rs"]
mod util;

use engine::{ClientId, Engine};
use ringkv_engine as engine;
use store::{Entry, Str, Value};
use util::*;

const T0: i64 = 1_700_000_000_000;

/// Seed a string key straight into a database (independent of SET).
/// Last accessed 100 s before T0.
fn put(e: &mut Engine, db: usize, key: &str, val: Str) {
    let mut entry = Entry::new(Value::Str(val));
    entry.set_access(store::lru_clock(T0 - 100_000));
    e.server_mut().keyspace.dbs[db].insert(
        store::hash_key(key.as_bytes()),
        key.as_bytes(),
        entry,
        T0,
    );
}

fn put_s(e: &mut Engine, key: &str, val: &str) {
    put(e, 0, key, Str::from_bytes(val.as_bytes()));
}

fn entry<'e>(e: &'e Engine, db: usize, key: &str) -> Option<&'e Entry> {
    e.server().keyspace.dbs[db].peek(store::hash_key(key.as_bytes()), key.as_bytes())
}

/// An engine with a pinned clock and one client.
fn setup() -> (Engine, ClientId) {
    let mut e = engine();
    e.pin_clock(Some(T0));
    let c = connect(&mut e);
    (e, c)
}

/// Parse a RESP2 array of bulk strings (one level) into its items.
fn bulks(reply: &str) -> Vec<String> {
    let mut lines = reply.split("\r\n");
    let head = lines.next().unwrap();
    let n: usize = head.strip_prefix('*').expect(reply).parse().unwrap();
    let mut out = Vec::new();
    for _ in 0..n {
        let len = lines.next().unwrap();
        assert!(len.starts_with('$'), "{reply}");
        out.push(lines.next().unwrap().to_string());
    }
    out
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// Run a SCAN (`extra` = options) from cursor 0 to the end; all keys seen.
fn scan_all(e: &mut Engine, c: ClientId, extra: &[&str]) -> Vec<String> {
    let mut got = Vec::new();
    let mut cursor = 0u64;
    for _ in 0..100_000 {
        let cur = cursor.to_string();
        let mut words = vec!["scan", cur.as_str()];
        words.extend_from_slice(extra);
        let (next, keys) = scan_reply(&cmd(e, c, &words));
        got.extend(keys);
        cursor = next;
        if cursor == 0 {
            return got;
        }
    }
    panic!("scan did not finish");
}

/// SCAN's reply: the cursor and the keys.
fn scan_reply(reply: &str) -> (u64, Vec<String>) {
    let rest = reply.strip_prefix("*2\r\n").expect(reply);
    let (len, rest) = rest.split_once("\r\n").unwrap();
    let n: usize = len[1..].parse().unwrap();
    let cursor = rest[..n].parse().unwrap();
    (cursor, bulks(&rest[n + 2..]))
}

#[test]
fn del_unlink_exists() {
    let (mut e, c) = setup();
    for k in ["a", "b", "c", "d"] {
        put_s(&mut e, k, "v");
    }
    assert_eq!(
        cmd(&mut e, c, &["exists", "a", "a", "nokey", "b"]),
        ":3\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["exists", "nokey"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["del", "a", "nokey", "a"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["exists", "a"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["unlink", "b", "c"]), ":2\r\n");
    assert_eq!(cmd(&mut e, c, &["del", "nokey"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["dbsize"]), ":1\r\n");
    assert_eq!(
        cmd(&mut e, c, &["del"]),
        "-ERR wrong number of arguments for 'del' command\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["exists"]),
        "-ERR wrong number of arguments for 'exists' command\r\n"
    );
    // Another database is untouched.
    put(&mut e, 1, "d", Str::Int(1));
    assert_eq!(cmd(&mut e, c, &["del", "d"]), ":1\r\n");
    assert!(entry(&e, 1, "d").is_some());
}

#[test]
fn exists_counts_keyspace_hits_and_misses_del_does_not() {
    let (mut e, c) = setup();
    put_s(&mut e, "a", "v");
    let before = (
        e.server().stats.keyspace_hits,
        e.server().stats.keyspace_misses,
    );
    cmd(&mut e, c, &["exists", "a", "x", "y"]);
    cmd(&mut e, c, &["del", "x"]);
    cmd(&mut e, c, &["expire", "a", "100"]);
    let after = (
        e.server().stats.keyspace_hits,
        e.server().stats.keyspace_misses,
    );
    assert_eq!((after.0 - before.0, after.1 - before.1), (1, 2));
}

#[test]
fn expired_keys_are_gone_for_every_command() {
    let (mut e, c) = setup();
    put_s(&mut e, "k", "v");
    assert_eq!(cmd(&mut e, c, &["pexpire", "k", "1500"]), ":1\r\n");
    e.pin_clock(Some(T0 + 1499));
    assert_eq!(cmd(&mut e, c, &["exists", "k"]), ":1\r\n");
    e.pin_clock(Some(T0 + 1500));
    assert_eq!(cmd(&mut e, c, &["exists", "k"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["ttl", "k"]), ":-2\r\n");
    assert_eq!(cmd(&mut e, c, &["type", "k"]), "+none\r\n");
    assert_eq!(cmd(&mut e, c, &["del", "k"]), ":0\r\n");
    assert!(entry(&e, 0, "k").is_none());

    for k in ["x", "y"] {
        put_s(&mut e, k, "v");
        cmd(&mut e, c, &["pexpire", k, "10"]);
    }
    put_s(&mut e, "live", "v");
    e.pin_clock(Some(T0 + 2000));
    assert_eq!(cmd(&mut e, c, &["keys", "*"]), "*1\r\n$4\r\nlive\r\n");
    let (cur, keys) = scan_reply(&cmd(&mut e, c, &["scan", "0", "count", "100"]));
    assert_eq!((cur, keys), (0, vec!["live".to_string()]));
    assert_eq!(
        cmd(&mut e, c, &["rename", "x", "z"]),
        "-ERR no such key\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["copy", "y", "z"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["move", "y", "1"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["persist", "y"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["expire", "y", "100"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["touch", "y", "live"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["object", "encoding", "y"]), "$-1\r\n");
}

#[test]
fn expire_ttl_and_their_variants() {
    let (mut e, c) = setup();
    put_s(&mut e, "k", "v");
    assert_eq!(cmd(&mut e, c, &["ttl", "k"]), ":-1\r\n");
    assert_eq!(cmd(&mut e, c, &["pttl", "k"]), ":-1\r\n");
    assert_eq!(cmd(&mut e, c, &["expiretime", "k"]), ":-1\r\n");
    assert_eq!(cmd(&mut e, c, &["pexpiretime", "k"]), ":-1\r\n");
    for w in ["ttl", "pttl", "expiretime", "pexpiretime"] {
        assert_eq!(cmd(&mut e, c, &[w, "nokey"]), ":-2\r\n", "{w}");
    }

    assert_eq!(cmd(&mut e, c, &["expire", "k", "100"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["ttl", "k"]), ":100\r\n");
    assert_eq!(cmd(&mut e, c, &["pttl", "k"]), ":100000\r\n");
    assert_eq!(cmd(&mut e, c, &["expiretime", "k"]), ":1700000100\r\n");
    assert_eq!(cmd(&mut e, c, &["pexpiretime", "k"]), ":1700000100000\r\n");
    // TTL rounds to the nearest second.
    e.pin_clock(Some(T0 + 400));
    assert_eq!(cmd(&mut e, c, &["ttl", "k"]), ":100\r\n");
    e.pin_clock(Some(T0 + 600));
    assert_eq!(cmd(&mut e, c, &["ttl", "k"]), ":99\r\n");
    assert_eq!(cmd(&mut e, c, &["pttl", "k"]), ":99400\r\n");
    e.pin_clock(Some(T0));

    assert_eq!(cmd(&mut e, c, &["pexpire", "k", "2500"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["pttl", "k"]), ":2500\r\n");
    assert_eq!(cmd(&mut e, c, &["ttl", "k"]), ":3\r\n");
    assert_eq!(cmd(&mut e, c, &["expireat", "k", "1700000050"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["pttl", "k"]), ":50000\r\n");
    assert_eq!(
        cmd(&mut e, c, &["pexpireat", "k", "1700000000123"]),
        ":1\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["pexpiretime", "k"]), ":1700000000123\r\n");
    assert_eq!(cmd(&mut e, c, &["expiretime", "k"]), ":1700000000\r\n");
    assert_eq!(e.server().keyspace.dbs[0].expires_len(), 1);
    // The latest time there is, in seconds rounded as Valkey's (no wrap).
    cmd(&mut e, c, &["pexpireat", "k", &i64::MAX.to_string()]);
    assert_eq!(
        cmd(&mut e, c, &["expiretime", "k"]),
        ":9223372036854776\r\n"
    );

    assert_eq!(cmd(&mut e, c, &["expire", "nokey", "10"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["pexpireat", "nokey", "1"]), ":0\r\n");
}

#[test]
fn expire_in_the_past_deletes_and_replies_one() {
    let (mut e, c) = setup();
    for (k, args) in [
        ("a", ["expire", "a", "0"]),
        ("b", ["expire", "b", "-5"]),
        ("c", ["pexpire", "c", "0"]),
        ("d", ["expireat", "d", "1"]),
        ("e", ["pexpireat", "e", "1700000000000"]),
        ("f", ["expireat", "f", "-100"]),
    ] {
        put_s(&mut e, k, "v");
        assert_eq!(cmd(&mut e, c, &args), ":1\r\n", "{args:?}");
        assert!(entry(&e, 0, k).is_none(), "{k}");
    }
    assert_eq!(e.server().keyspace.dbs[0].expires_len(), 0);
    // One ms in the future is kept.
    put_s(&mut e, "g", "v");
    assert_eq!(
        cmd(&mut e, c, &["pexpireat", "g", "1700000000001"]),
        ":1\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["pttl", "g"]), ":1\r\n");
}

#[test]
fn expire_errors() {
    let (mut e, c) = setup();
    put_s(&mut e, "k", "v");
    assert_eq!(
        cmd(&mut e, c, &["expire", "k", "abc"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["expire", "k", "1.5"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["expire", "k", " 10"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    // Options are checked before the number.
    assert_eq!(
        cmd(&mut e, c, &["expire", "k", "abc", "foo"]),
        "-ERR Unsupported option foo\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["pexpire", "k", "10", "nx", "Bar"]),
        "-ERR Unsupported option Bar\r\n"
    );
    for opts in [
        &["nx", "xx"][..],
        &["NX", "gt"],
        &["lt", "nx"],
        &["nx", "xx", "gt"],
    ] {
        let mut words = vec!["expire", "k", "10"];
        words.extend_from_slice(opts);
        assert_eq!(
            cmd(&mut e, c, &words),
            "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n",
            "{opts:?}"
        );
    }
    assert_eq!(
        cmd(&mut e, c, &["expire", "k", "10", "gt", "LT"]),
        "-ERR GT and LT options at the same time are not compatible\r\n"
    );
    // Overflow of the unit conversion or of adding the base time.
    assert_eq!(
        cmd(&mut e, c, &["expire", "k", "9223372036854776"]),
        "-ERR invalid expire time in 'expire' command\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["expire", "k", "-9223372036854776"]),
        "-ERR invalid expire time in 'expire' command\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["pexpire", "k", "9223372036854775807"]),
        "-ERR invalid expire time in 'pexpire' command\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["expireat", "k", "9223372036854776"]),
        "-ERR invalid expire time in 'expireat' command\r\n"
    );
    // The absolute forms add nothing, so the largest ms value is fine.
    assert_eq!(
        cmd(&mut e, c, &["pexpireat", "k", "9223372036854775807"]),
        ":1\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["expireat", "k", "9223372036854775"]),
        ":1\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["expire", "k"]),
        "-ERR wrong number of arguments for 'expire' command\r\n"
    );
    // Errors change nothing.
    assert_eq!(
        cmd(&mut e, c, &["pexpiretime", "k"]),
        ":9223372036854775000\r\n"
    );
}

#[test]
fn expire_nx_xx_gt_lt() {
    let (mut e, c) = setup();
    put_s(&mut e, "k", "v");
    // No TTL yet: XX and GT refuse, NX and LT set.
    assert_eq!(cmd(&mut e, c, &["expire", "k", "100", "xx"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["expire", "k", "100", "gt"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["ttl", "k"]), ":-1\r\n");
    assert_eq!(cmd(&mut e, c, &["expire", "k", "100", "lt"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["persist", "k"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["expire", "k", "100", "NX"]), ":1\r\n");
    // Now it has one.
    assert_eq!(cmd(&mut e, c, &["expire", "k", "50", "nx"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["expire", "k", "50", "gt"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["expire", "k", "100", "gt"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["expire", "k", "200", "gt"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["ttl", "k"]), ":200\r\n");
    assert_eq!(cmd(&mut e, c, &["expire", "k", "200", "lt"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["expire", "k", "300", "lt"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["expire", "k", "150", "lt"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["expire", "k", "120", "xx"]), ":1\r\n");
    assert_eq!(
        cmd(&mut e, c, &["expire", "k", "500", "xx", "gt"]),
        ":1\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["expire", "k", "400", "XX", "Gt"]),
        ":0\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["ttl", "k"]), ":500\r\n");
    // LT to a past time still deletes.
    assert_eq!(cmd(&mut e, c, &["expire", "k", "-1", "lt"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["exists", "k"]), ":0\r\n");
    // Options on a missing key: still 0.
    assert_eq!(cmd(&mut e, c, &["expire", "k", "10", "nx"]), ":0\r\n");
}

#[test]
fn persist() {
    let (mut e, c) = setup();
    put_s(&mut e, "k", "v");
    assert_eq!(cmd(&mut e, c, &["persist", "k"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["persist", "nokey"]), ":0\r\n");
    cmd(&mut e, c, &["expire", "k", "10"]);
    assert_eq!(e.server().keyspace.dbs[0].expires_len(), 1);
    assert_eq!(cmd(&mut e, c, &["persist", "k"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["ttl", "k"]), ":-1\r\n");
    assert_eq!(e.server().keyspace.dbs[0].expires_len(), 0);
    assert_eq!(cmd(&mut e, c, &["persist", "k"]), ":0\r\n");
}

#[test]
fn type_command() {
    let (mut e, c) = setup();
    put_s(&mut e, "s", "v");
    put(&mut e, 0, "i", Str::Int(5));
    assert_eq!(cmd(&mut e, c, &["type", "s"]), "+string\r\n");
    assert_eq!(cmd(&mut e, c, &["type", "i"]), "+string\r\n");
    assert_eq!(cmd(&mut e, c, &["type", "nokey"]), "+none\r\n");
}

#[test]
fn rename_and_renamenx() {
    let (mut e, c) = setup();
    assert_eq!(
        cmd(&mut e, c, &["rename", "a", "b"]),
        "-ERR no such key\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["renamenx", "a", "b"]),
        "-ERR no such key\r\n"
    );
    // Same name: checked only after the source exists.
    assert_eq!(
        cmd(&mut e, c, &["rename", "a", "a"]),
        "-ERR no such key\r\n"
    );
    put_s(&mut e, "a", "1");
    assert_eq!(cmd(&mut e, c, &["rename", "a", "a"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["renamenx", "a", "a"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["exists", "a"]), ":1\r\n");

    cmd(&mut e, c, &["expire", "a", "100"]);
    assert_eq!(cmd(&mut e, c, &["rename", "a", "b"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["exists", "a", "b"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["ttl", "b"]), ":100\r\n");
    assert_eq!(e.server().keyspace.dbs[0].expires_len(), 1);

    // Overwrite: the destination's own TTL goes with it.
    put_s(&mut e, "c", "3");
    cmd(&mut e, c, &["expire", "c", "50"]);
    cmd(&mut e, c, &["persist", "b"]);
    assert_eq!(cmd(&mut e, c, &["rename", "b", "c"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["ttl", "c"]), ":-1\r\n");
    assert_eq!(e.server().keyspace.dbs[0].expires_len(), 0);
    assert_eq!(
        entry(&e, 0, "c").map(|x| x.to_value()),
        Some(Value::Str(Str::from_bytes(b"1")))
    );

    put_s(&mut e, "d", "4");
    assert_eq!(cmd(&mut e, c, &["renamenx", "c", "d"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["exists", "c", "d"]), ":2\r\n");
    assert_eq!(cmd(&mut e, c, &["renamenx", "c", "e"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["exists", "c", "e"]), ":1\r\n");
    // An expired destination does not block RENAMENX.
    put_s(&mut e, "old", "x");
    cmd(&mut e, c, &["pexpire", "old", "5"]);
    e.pin_clock(Some(T0 + 10));
    assert_eq!(cmd(&mut e, c, &["renamenx", "e", "old"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["ttl", "old"]), ":-1\r\n");
}

#[test]
fn copy_command() {
    let (mut e, c) = setup();
    assert_eq!(cmd(&mut e, c, &["copy", "a", "b"]), ":0\r\n");
    put(&mut e, 0, "a", Str::Int(42));
    cmd(&mut e, c, &["expire", "a", "100"]);
    assert_eq!(cmd(&mut e, c, &["copy", "a", "b"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["ttl", "b"]), ":100\r\n");
    assert_eq!(
        entry(&e, 0, "b").map(|x| x.to_value()),
        Some(Value::Str(Str::Int(42)))
    );
    assert_eq!(e.server().keyspace.dbs[0].expires_len(), 2);
    // The copy is independent of the source.
    cmd(&mut e, c, &["del", "a"]);
    assert_eq!(cmd(&mut e, c, &["exists", "b"]), ":1\r\n");

    put_s(&mut e, "x", "new");
    assert_eq!(cmd(&mut e, c, &["copy", "x", "b"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["copy", "x", "b", "REPLACE"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["ttl", "b"]), ":-1\r\n");
    assert_eq!(
        entry(&e, 0, "b").map(|x| x.to_value()),
        Some(Value::Str(Str::from_bytes(b"new")))
    );

    assert_eq!(cmd(&mut e, c, &["copy", "x", "x", "db", "3"]), ":1\r\n");
    assert!(entry(&e, 3, "x").is_some());
    assert_eq!(cmd(&mut e, c, &["copy", "x", "x", "db", "3"]), ":0\r\n");
    assert_eq!(
        cmd(&mut e, c, &["copy", "x", "x", "db", "3", "replace"]),
        ":1\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["copy", "x", "x"]),
        "-ERR source and destination objects are the same\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["copy", "x", "x", "db", "0"]),
        "-ERR source and destination objects are the same\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["copy", "x", "y", "db", "16"]),
        "-ERR DB index is out of range\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["copy", "x", "y", "db", "-1"]),
        "-ERR DB index is out of range\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["copy", "x", "y", "db", "abc"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["copy", "x", "y", "db", "4294967296"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["copy", "x", "y", "db"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["copy", "x", "y", "foo"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["copy", "x"]),
        "-ERR wrong number of arguments for 'copy' command\r\n"
    );
    // From a selected database to db 0.
    assert_eq!(cmd(&mut e, c, &["select", "3"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["copy", "x", "z", "db", "0"]), ":1\r\n");
    assert!(entry(&e, 0, "z").is_some());
}

#[test]
fn move_command() {
    let (mut e, c) = setup();
    assert_eq!(cmd(&mut e, c, &["move", "k", "1"]), ":0\r\n");
    put_s(&mut e, "k", "v");
    cmd(&mut e, c, &["expire", "k", "100"]);
    assert_eq!(cmd(&mut e, c, &["move", "k", "1"]), ":1\r\n");
    assert!(entry(&e, 0, "k").is_none());
    assert_eq!(
        entry(&e, 1, "k").and_then(|x| x.expire_at_ms()),
        Some(T0 + 100_000)
    );
    assert_eq!(e.server().keyspace.dbs[0].expires_len(), 0);
    assert_eq!(e.server().keyspace.dbs[1].expires_len(), 1);

    put_s(&mut e, "k", "again");
    assert_eq!(cmd(&mut e, c, &["move", "k", "1"]), ":0\r\n");
    assert!(entry(&e, 0, "k").is_some());
    assert_eq!(
        cmd(&mut e, c, &["move", "k", "0"]),
        "-ERR source and destination objects are the same\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["move", "k", "16"]),
        "-ERR DB index is out of range\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["move", "nokey", "-1"]),
        "-ERR DB index is out of range\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["move", "k", "one"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["move", "k", "1", "2"]),
        "-ERR wrong number of arguments for 'move' command\r\n"
    );
    // An expired key in the target does not block the move.
    put_s(&mut e, "t", "src");
    put(&mut e, 2, "t", Str::from_bytes(b"stale"));
    e.server_mut().keyspace.dbs[2].set_expire(store::hash_key(b"t"), b"t", Some(T0 - 1));
    assert_eq!(cmd(&mut e, c, &["move", "t", "2"]), ":1\r\n");
    assert_eq!(
        entry(&e, 2, "t").map(|x| x.to_value()),
        Some(Value::Str(Str::from_bytes(b"src")))
    );
}

#[test]
fn keys_command() {
    let (mut e, c) = setup();
    assert_eq!(cmd(&mut e, c, &["keys", "*"]), "*0\r\n");
    for k in [
        "hello", "hallo", "hxllo", "hllo", "heeeello", "other", "h*llo", "",
    ] {
        put_s(&mut e, k, "v");
    }
    let all = sorted(bulks(&cmd(&mut e, c, &["keys", "*"])));
    assert_eq!(
        all,
        [
            "", "h*llo", "hallo", "heeeello", "hello", "hllo", "hxllo", "other"
        ]
    );
    assert_eq!(
        sorted(bulks(&cmd(&mut e, c, &["keys", "h?llo"]))),
        ["h*llo", "hallo", "hello", "hxllo"]
    );
    assert_eq!(
        sorted(bulks(&cmd(&mut e, c, &["keys", "h*llo"]))),
        ["h*llo", "hallo", "heeeello", "hello", "hllo", "hxllo"]
    );
    assert_eq!(
        sorted(bulks(&cmd(&mut e, c, &["keys", "h[ae]llo"]))),
        ["hallo", "hello"]
    );
    assert_eq!(
        sorted(bulks(&cmd(&mut e, c, &["keys", "h[^e]llo"]))),
        ["h*llo", "hallo", "hxllo"]
    );
    assert_eq!(
        sorted(bulks(&cmd(&mut e, c, &["keys", "h[a-b]llo"]))),
        ["hallo"]
    );
    assert_eq!(
        cmd(&mut e, c, &["keys", "h\\*llo"]),
        "*1\r\n$5\r\nh*llo\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["keys", "HELLO"]), "*0\r\n");
    // Only a lone `*` matches the empty key.
    assert_eq!(bulks(&cmd(&mut e, c, &["keys", "**"])).len(), 7);
    assert_eq!(
        cmd(&mut e, c, &["keys"]),
        "-ERR wrong number of arguments for 'keys' command\r\n"
    );
}

#[test]
fn scan_iterates_everything() {
    let (mut e, c) = setup();
    assert_eq!(cmd(&mut e, c, &["scan", "0"]), "*2\r\n$1\r\n0\r\n*0\r\n");
    let mut want = Vec::new();
    for i in 0..250 {
        let k = format!("key:{i}");
        put_s(&mut e, &k, "v");
        want.push(k);
    }
    put(&mut e, 1, "elsewhere", Str::Int(1));
    for count in ["1", "10", "1000"] {
        let mut got = scan_all(&mut e, c, &["COUNT", count]);
        got.sort();
        got.dedup();
        assert_eq!(got, sorted(want.clone()), "count {count}");
    }
    let got = scan_all(&mut e, c, &["match", "key:1?", "type", "STRING"]);
    assert_eq!(
        sorted(got),
        sorted((10..20).map(|i| format!("key:{i}")).collect())
    );
    // A type we hold none of.
    assert!(scan_all(&mut e, c, &["type", "zset"]).is_empty());
    assert!(scan_all(&mut e, c, &["match", "nomatch*"]).is_empty());
}

#[test]
fn scan_errors() {
    let (mut e, c) = setup();
    put_s(&mut e, "k", "v");
    for bad in ["-1", "abc", "", "1.5", "18446744073709551616", "5 "] {
        assert_eq!(
            cmd(&mut e, c, &["scan", bad]),
            "-ERR invalid cursor\r\n",
            "{bad:?}"
        );
    }
    // strtoull's leniency is Valkey's too.
    assert!(cmd(&mut e, c, &["scan", "00"]).starts_with("*2\r\n"));
    assert!(cmd(&mut e, c, &["scan", "+0"]).starts_with("*2\r\n"));
    assert_eq!(
        cmd(&mut e, c, &["scan", "0", "count", "0"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["scan", "0", "count", "-3"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["scan", "0", "count", "ten"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["scan", "0", "count"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["scan", "0", "match"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["scan", "0", "foo", "bar"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["scan", "0", "type", "blob"]),
        "-ERR unknown type name 'blob'\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["scan", "0", "novalues"]),
        "-ERR NOVALUES option can only be used in HSCAN\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["scan", "0", "noscores"]),
        "-ERR NOSCORES option can only be used in ZSCAN\r\n"
    );
    // The cursor is checked before the options.
    assert_eq!(
        cmd(&mut e, c, &["scan", "x", "count", "0"]),
        "-ERR invalid cursor\r\n"
    );
    // Options may repeat; the last one wins.
    put_s(&mut e, "j", "v");
    assert_eq!(
        scan_all(&mut e, c, &["match", "nope", "MATCH", "k", "count", "5"]),
        ["k"]
    );
}

#[test]
fn randomkey() {
    let (mut e, c) = setup();
    assert_eq!(cmd(&mut e, c, &["randomkey"]), "$-1\r\n");
    put_s(&mut e, "only", "v");
    assert_eq!(cmd(&mut e, c, &["randomkey"]), "$4\r\nonly\r\n");
    for i in 0..20 {
        put_s(&mut e, &format!("k{i}"), "v");
    }
    let mut seen = std::collections::HashSet::new();
    for _ in 0..200 {
        let r = cmd(&mut e, c, &["randomkey"]);
        seen.insert(bulk_text(&r));
    }
    assert!(seen.len() > 5, "{seen:?}");
    assert!(seen.iter().all(|k| k == "only" || k.starts_with('k')));

    // Only expired keys: they are reclaimed and the answer is nil.
    let (mut e, c) = setup();
    for k in ["x", "y", "z"] {
        put_s(&mut e, k, "v");
        cmd(&mut e, c, &["pexpire", k, "10"]);
    }
    e.pin_clock(Some(T0 + 20));
    assert_eq!(cmd(&mut e, c, &["randomkey"]), "$-1\r\n");
    assert_eq!(e.server().keyspace.dbs[0].len(), 0);
}

#[test]
fn touch_and_idletime() {
    let (mut e, c) = setup();
    put_s(&mut e, "k", "v");
    put_s(&mut e, "j", "v");
    assert_eq!(cmd(&mut e, c, &["object", "idletime", "k"]), ":100\r\n");
    assert_eq!(cmd(&mut e, c, &["touch", "k", "nokey", "k"]), ":2\r\n");
    assert_eq!(cmd(&mut e, c, &["object", "idletime", "k"]), ":0\r\n");
    e.pin_clock(Some(T0 + 42_900));
    assert_eq!(cmd(&mut e, c, &["object", "idletime", "k"]), ":42\r\n");
    // Reads that don't touch.
    for w in [
        &["exists", "k"][..],
        &["ttl", "k"],
        &["type", "k"],
        &["object", "encoding", "k"],
    ] {
        cmd(&mut e, c, w);
    }
    assert_eq!(cmd(&mut e, c, &["object", "idletime", "k"]), ":42\r\n");
    // Writes touch: EXPIRE, and RENAME carries the fresh clock along.
    cmd(&mut e, c, &["expire", "k", "1000"]);
    assert_eq!(cmd(&mut e, c, &["object", "idletime", "k"]), ":0\r\n");
    e.pin_clock(Some(T0 + 50_000));
    cmd(&mut e, c, &["rename", "k", "k2"]);
    assert_eq!(cmd(&mut e, c, &["object", "idletime", "k2"]), ":0\r\n");

    // CLIENT NO-TOUCH: writes and reads leave the clock, TOUCH still moves it.
    e.pin_clock(Some(T0 + 60_000));
    assert_eq!(cmd(&mut e, c, &["client", "no-touch", "on"]), "+OK\r\n");
    cmd(&mut e, c, &["expire", "k2", "1000"]);
    assert_eq!(cmd(&mut e, c, &["object", "idletime", "k2"]), ":10\r\n");
    assert_eq!(cmd(&mut e, c, &["touch", "k2"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["object", "idletime", "k2"]), ":0\r\n");
}

#[test]
fn keys_made_without_a_lookup_are_stamped_with_the_time_of_their_command() {
    // MSET, SUNIONSTORE, RESTORE and COPY create keys without looking
    // them up first: their clock is the command's, not the last lookup's.
    let (mut e, c) = setup();
    cmd(&mut e, c, &["set", "src", "v"]);
    cmd(&mut e, c, &["sadd", "s", "m"]);
    e.pin_clock(Some(T0 + 30_000));
    cmd(&mut e, c, &["mset", "a", "1", "b", "2"]);
    cmd(&mut e, c, &["msetnx", "n", "1"]);
    cmd(&mut e, c, &["sunionstore", "u", "s"]);
    cmd(&mut e, c, &["copy", "src", "dst", "db", "3"]);
    for key in ["a", "b", "n", "u"] {
        assert_eq!(
            cmd(&mut e, c, &["object", "idletime", key]),
            ":0\r\n",
            "{key}"
        );
    }
    cmd(&mut e, c, &["select", "3"]);
    assert_eq!(cmd(&mut e, c, &["object", "idletime", "dst"]), ":0\r\n");
}

#[test]
fn object_encoding_and_refcount() {
    let (mut e, c) = setup();
    put(&mut e, 0, "small", Str::Int(123));
    put(&mut e, 0, "big", Str::Int(1_234_567_890_123));
    put(&mut e, 0, "neg", Str::Int(-1));
    // Key and value share the object's 64 bytes: 3 + 38 is the most.
    put_s(&mut e, "e38", &"x".repeat(38));
    put_s(&mut e, "r39", &"x".repeat(39));
    put_s(&mut e, "r45", &"x".repeat(45));
    put_s(&mut e, "empty", "");
    assert_eq!(
        cmd(&mut e, c, &["object", "encoding", "small"]),
        "$3\r\nint\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["object", "encoding", "big"]),
        "$3\r\nint\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["object", "ENCODING", "e38"]),
        "$6\r\nembstr\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["object", "encoding", "r39"]),
        "$3\r\nraw\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["object", "encoding", "r45"]),
        "$3\r\nraw\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["object", "encoding", "empty"]),
        "$6\r\nembstr\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["object", "encoding", "nokey"]), "$-1\r\n");
    // Valkey 8 shares no key's value, small integers included.
    assert_eq!(cmd(&mut e, c, &["object", "refcount", "small"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["object", "refcount", "big"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["object", "refcount", "neg"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["object", "refcount", "e38"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["object", "refcount", "nokey"]), "$-1\r\n");
}

#[test]
fn object_freq_and_lfu_policy() {
    let (mut e, c) = setup();
    put_s(&mut e, "k", "v");
    assert_eq!(
        cmd(&mut e, c, &["object", "freq", "k"]),
        "-ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["object", "freq", "nokey"]), "$-1\r\n");
    assert_eq!(
        cmd(
            &mut e,
            c,
            &["config", "set", "maxmemory-policy", "allkeys-lfu"]
        ),
        "+OK\r\n"
    );
    // As in Valkey, switching policy reinterprets the access field of
    // existing keys; a key made under LFU starts at LFU_INIT_VAL (5).
    assert_eq!(cmd(&mut e, c, &["set", "f", "v"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["object", "freq", "f"]), ":5\r\n");
    // From 5 the first hit always counts.
    assert_eq!(cmd(&mut e, c, &["touch", "f"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["object", "freq", "f"]), ":6\r\n");
    // lfu-decay-time 1: one less per idle minute.
    e.pin_clock(Some(T0 + 3 * 60_000));
    assert_eq!(cmd(&mut e, c, &["object", "freq", "f"]), ":3\r\n");
    e.pin_clock(Some(T0 + 60 * 60_000));
    assert_eq!(cmd(&mut e, c, &["object", "freq", "k"]), ":0\r\n");
    assert_eq!(
        cmd(&mut e, c, &["object", "idletime", "k"]),
        "-ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["object", "idletime", "nokey"]), "$-1\r\n");
}

#[test]
fn object_help_and_errors() {
    let (mut e, c) = setup();
    let help = cmd(&mut e, c, &["object", "help"]);
    assert_eq!(
        help,
        "*15\r\n\
         +OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n\
         +ENCODING <key>\r\n\
         +    Return the kind of internal representation used in order to store the value\r\n\
         +    associated with a <key>.\r\n\
         +FREQ <key>\r\n\
         +    Return the access frequency index of the <key>. The returned integer is\r\n\
         +    proportional to the logarithm of the recent access frequency of the key.\r\n\
         +IDLETIME <key>\r\n\
         +    Return the idle time of the <key>, that is the approximated number of\r\n\
         +    seconds elapsed since the last access to the key.\r\n\
         +REFCOUNT <key>\r\n\
         +    Return the number of references of the value associated with the specified\r\n\
         +    <key>.\r\n\
         +HELP\r\n\
         +    Print this help.\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["object", "foo", "k"]),
        "-ERR unknown subcommand 'foo'. Try OBJECT HELP.\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["object", "encoding"]),
        "-ERR wrong number of arguments for 'object|encoding' command\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["object", "help", "x"]),
        "-ERR wrong number of arguments for 'object|help' command\r\n"
    );
}

#[test]
fn command_info_of_key_commands() {
    let (mut e, c) = setup();
    let r = cmd(&mut e, c, &["command", "info", "del"]);
    assert!(
        r.starts_with(
            "*1\r\n*10\r\n$3\r\ndel\r\n:-2\r\n~1\r\n+write\r\n:1\r\n:-1\r\n:1\r\n~3\r\n+@keyspace\r\n+@write\r\n+@slow\r\n"
        ) || r.starts_with(
            "*1\r\n*10\r\n$3\r\ndel\r\n:-2\r\n*1\r\n+write\r\n:1\r\n:-1\r\n:1\r\n*3\r\n+@keyspace\r\n+@write\r\n+@slow\r\n"
        ),
        "{r}"
    );
    let r = cmd(&mut e, c, &["command", "info", "object|encoding"]);
    assert!(
        r.contains("$15\r\nobject|encoding\r\n:3\r\n") && r.contains(":2\r\n:2\r\n:1\r\n"),
        "{r}"
    );
    let r = cmd(&mut e, c, &["command", "docs", "copy"]);
    assert!(r.contains("Copies the value of a key to a new key."), "{r}");
    assert!(r.contains("6.2.0"), "{r}");
}

#[test]
fn with_keys_written_by_set() {
    let (mut e, c) = setup();
    assert_eq!(cmd(&mut e, c, &["set", "n", "123"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["set", "s", "hello"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["set", "r", &"x".repeat(45)]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["set", "t", "v", "EX", "10"]), "+OK\r\n");
    assert_eq!(
        cmd(&mut e, c, &["object", "encoding", "n"]),
        "$3\r\nint\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["object", "encoding", "s"]),
        "$6\r\nembstr\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["object", "encoding", "r"]),
        "$3\r\nraw\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["type", "n"]), "+string\r\n");
    assert_eq!(cmd(&mut e, c, &["ttl", "t"]), ":10\r\n");
    assert_eq!(cmd(&mut e, c, &["object", "idletime", "s"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["exists", "n", "s", "r", "t"]), ":4\r\n");
    assert_eq!(cmd(&mut e, c, &["copy", "s", "s2"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["rename", "s2", "s3"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["get", "s3"]), "$5\r\nhello\r\n");
    // SET without KEEPTTL clears a TTL EXPIRE gave.
    cmd(&mut e, c, &["expire", "s3", "100"]);
    cmd(&mut e, c, &["set", "s3", "again"]);
    assert_eq!(cmd(&mut e, c, &["ttl", "s3"]), ":-1\r\n");
    assert_eq!(
        sorted(bulks(&cmd(&mut e, c, &["keys", "?"]))),
        ["n", "r", "s", "t"]
    );
    assert_eq!(cmd(&mut e, c, &["del", "n", "s", "r", "t", "s3"]), ":5\r\n");
    assert_eq!(cmd(&mut e, c, &["dbsize"]), ":0\r\n");
}
