//! String commands: replies, options, errors and expiry, byte for byte.

#[path = "core_util.rs"]
mod util;

use ringkv_engine as engine;
use util::*;

const OK: &str = "+OK\r\n";
const NIL: &str = "$-1\r\n";
const NOT_INT: &str = "-ERR value is not an integer or out of range\r\n";
const SYNTAX: &str = "-ERR syntax error\r\n";
const NOT_FLOAT: &str = "-ERR value is not a valid float\r\n";
const TOO_BIG: &str = "-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n";

fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

fn int(n: i64) -> String {
    format!(":{n}\r\n")
}

fn expire_err(cmd: &str) -> String {
    format!("-ERR invalid expire time in '{cmd}' command\r\n")
}

fn arity_err(cmd: &str) -> String {
    format!("-ERR wrong number of arguments for '{cmd}' command\r\n")
}

const T0: i64 = 1_800_000_000_000;

fn setup() -> (engine::Engine, engine::ClientId) {
    let mut e = engine();
    e.pin_clock(Some(T0));
    let c = connect(&mut e);
    (e, c)
}

fn entry_ttl(e: &engine::Engine, key: &str) -> Option<Option<i64>> {
    let h = store::hash_key(key.as_bytes());
    e.server().keyspace.dbs[0]
        .peek(h, key.as_bytes())
        .map(|x| x.expire_at_ms())
}

fn value(e: &engine::Engine, key: &str) -> Option<store::Str> {
    let h = store::hash_key(key.as_bytes());
    e.server().keyspace.dbs[0]
        .peek(h, key.as_bytes())
        .and_then(|x| x.str().map(store::StrRef::to_owned))
}

#[test]
fn get_set_basics() {
    let (mut e, c) = setup();
    assert_eq!(cmd(&mut e, c, &["get", "k"]), NIL);
    assert_eq!(cmd(&mut e, c, &["set", "k", "v"]), OK);
    assert_eq!(cmd(&mut e, c, &["GET", "k"]), bulk("v"));
    assert_eq!(cmd(&mut e, c, &["set", "bin", "a\0b\r\nc"]), OK);
    assert_eq!(cmd(&mut e, c, &["get", "bin"]), bulk("a\0b\r\nc"));
    assert_eq!(cmd(&mut e, c, &["set", "", ""]), OK);
    assert_eq!(cmd(&mut e, c, &["get", ""]), bulk(""));
    assert_eq!(cmd(&mut e, c, &["set", "k"]), arity_err("set"));
    assert_eq!(cmd(&mut e, c, &["get", "a", "b"]), arity_err("get"));
    assert_eq!(cmd(&mut e, c, &["set", "k", "v", "bogus"]), SYNTAX);
    // RESP3 null.
    assert!(cmd(&mut e, c, &["hello", "3"]).starts_with('%'));
    assert_eq!(cmd(&mut e, c, &["get", "nope"]), "_\r\n");
    assert_eq!(cmd(&mut e, c, &["set", "nope", "v", "xx"]), "_\r\n");
}

#[test]
fn integers_are_stored_as_integers() {
    let (mut e, c) = setup();
    for (v, is_int) in [
        ("123", true),
        ("-9223372036854775808", true),
        ("9223372036854775807", true),
        ("9223372036854775808", false),
        ("0", true),
        ("-0", false),
        ("01", false),
        ("+1", false),
        (" 1", false),
        ("1.0", false),
    ] {
        assert_eq!(cmd(&mut e, c, &["set", "k", v]), OK);
        let got = value(&e, "k").unwrap();
        assert_eq!(matches!(got, store::Str::Int(_)), is_int, "{v}");
        assert_eq!(cmd(&mut e, c, &["get", "k"]), bulk(v));
    }
    assert_eq!(cmd(&mut e, c, &["mset", "a", "42", "b", "x"]), OK);
    assert_eq!(value(&e, "a"), Some(store::Str::Int(42)));
    assert_eq!(value(&e, "b"), Some(store::Str::Bytes(b"x".to_vec())));
}

/// Replies as valkey-server 8.1 gave them for the same commands.
#[test]
fn set_ifeq_replaces_only_an_equal_string() {
    let (mut e, c) = setup();
    assert_eq!(cmd(&mut e, c, &["set", "k", "v1"]), OK);
    assert_eq!(cmd(&mut e, c, &["set", "k", "v2", "ifeq", "v0"]), NIL);
    assert_eq!(cmd(&mut e, c, &["get", "k"]), bulk("v1"));
    assert_eq!(cmd(&mut e, c, &["set", "k", "v2", "IFEQ", "v1"]), OK);
    assert_eq!(cmd(&mut e, c, &["get", "k"]), bulk("v2"));
    // A missing key is not created.
    assert_eq!(cmd(&mut e, c, &["set", "nok", "v", "ifeq", "x"]), NIL);
    assert_eq!(
        cmd(&mut e, c, &["set", "nok", "v", "ifeq", "x", "get"]),
        NIL
    );
    assert_eq!(cmd(&mut e, c, &["exists", "nok"]), int(0));
    // GET answers with the old value whether or not it was replaced.
    assert_eq!(
        cmd(&mut e, c, &["set", "k", "v3", "ifeq", "v2", "get"]),
        bulk("v2")
    );
    assert_eq!(
        cmd(&mut e, c, &["set", "k", "v4", "ifeq", "no", "get"]),
        bulk("v3")
    );
    assert_eq!(cmd(&mut e, c, &["get", "k"]), bulk("v3"));
    // Other types are an error, with or without GET.
    cmd(&mut e, c, &["lpush", "l", "a"]);
    let wrongtype = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    assert_eq!(cmd(&mut e, c, &["set", "l", "v", "ifeq", "a"]), wrongtype);
    assert_eq!(
        cmd(&mut e, c, &["set", "l", "v", "ifeq", "a", "get"]),
        wrongtype
    );
    // An integer compares as its text.
    assert_eq!(cmd(&mut e, c, &["set", "n", "10"]), OK);
    assert_eq!(cmd(&mut e, c, &["set", "n", "12", "ifeq", "010"]), NIL);
    assert_eq!(cmd(&mut e, c, &["set", "n", "-11", "ifeq", "10"]), OK);
    assert_eq!(cmd(&mut e, c, &["set", "n", "12", "ifeq", "-11"]), OK);
    // Expiry options go with it; without KEEPTTL the TTL is cleared.
    assert_eq!(
        cmd(&mut e, c, &["set", "k", "v5", "ifeq", "v3", "px", "100000"]),
        OK
    );
    assert_eq!(
        cmd(&mut e, c, &["set", "k", "v6", "ifeq", "v5", "keepttl"]),
        OK
    );
    assert_ne!(cmd(&mut e, c, &["pttl", "k"]), int(-1));
    assert_eq!(cmd(&mut e, c, &["set", "k", "v7", "ifeq", "v6"]), OK);
    assert_eq!(cmd(&mut e, c, &["pttl", "k"]), int(-1));
    // Never with NX or XX, only once, and it needs its value.
    for bad in [
        &["set", "k", "v", "ifeq", "v7", "nx"][..],
        &["set", "k", "v", "nx", "ifeq", "v7"],
        &["set", "k", "v", "ifeq", "v7", "xx"],
        &["set", "k", "v", "xx", "ifeq", "v7"],
        &["set", "k", "v", "ifeq", "v7", "ifeq", "v7"],
        &["set", "k", "v", "ifeq"],
        &["getex", "k", "ifeq", "v7"],
    ] {
        assert_eq!(cmd(&mut e, c, bad), SYNTAX, "{bad:?}");
    }
    assert_eq!(cmd(&mut e, c, &["get", "k"]), bulk("v7"));
}

#[test]
fn set_nx_xx_get() {
    let (mut e, c) = setup();
    assert_eq!(cmd(&mut e, c, &["set", "k", "v1", "XX"]), NIL);
    assert_eq!(cmd(&mut e, c, &["get", "k"]), NIL);
    assert_eq!(cmd(&mut e, c, &["set", "k", "v1", "nx"]), OK);
    assert_eq!(cmd(&mut e, c, &["set", "k", "v2", "NX"]), NIL);
    assert_eq!(cmd(&mut e, c, &["set", "k", "v2", "xx"]), OK);
    assert_eq!(cmd(&mut e, c, &["get", "k"]), bulk("v2"));
    assert_eq!(cmd(&mut e, c, &["set", "k", "v", "nx", "xx"]), SYNTAX);
    assert_eq!(cmd(&mut e, c, &["set", "k", "v", "xx", "nx"]), SYNTAX);
    // Repeats are fine.
    assert_eq!(cmd(&mut e, c, &["set", "k", "v2", "xx", "xx"]), OK);
    assert_eq!(cmd(&mut e, c, &["set", "k", "v3", "get"]), bulk("v2"));
    assert_eq!(
        cmd(&mut e, c, &["set", "k", "v4", "GET", "get"]),
        bulk("v3")
    );
    assert_eq!(cmd(&mut e, c, &["set", "new", "v", "get"]), NIL);
    assert_eq!(cmd(&mut e, c, &["get", "new"]), bulk("v"));
    // NX GET: sets when absent (replies nil), untouched when present.
    assert_eq!(cmd(&mut e, c, &["set", "ng", "a", "nx", "get"]), NIL);
    assert_eq!(cmd(&mut e, c, &["set", "ng", "b", "nx", "get"]), bulk("a"));
    assert_eq!(cmd(&mut e, c, &["get", "ng"]), bulk("a"));
    assert_eq!(cmd(&mut e, c, &["set", "absent", "b", "xx", "get"]), NIL);
    assert_eq!(cmd(&mut e, c, &["exists", "absent"]), int(0));
    // An int-encoded old value comes back as a bulk string.
    assert_eq!(cmd(&mut e, c, &["set", "n", "12"]), OK);
    assert_eq!(cmd(&mut e, c, &["set", "n", "x", "get"]), bulk("12"));
}

#[test]
fn set_expiry_options() {
    let (mut e, c) = setup();
    assert_eq!(cmd(&mut e, c, &["set", "k", "v", "ex", "100"]), OK);
    assert_eq!(entry_ttl(&e, "k"), Some(Some(T0 + 100_000)));
    assert_eq!(cmd(&mut e, c, &["set", "k", "v", "px", "1500"]), OK);
    assert_eq!(entry_ttl(&e, "k"), Some(Some(T0 + 1500)));
    assert_eq!(cmd(&mut e, c, &["set", "k", "v2", "keepttl"]), OK);
    assert_eq!(entry_ttl(&e, "k"), Some(Some(T0 + 1500)));
    assert_eq!(cmd(&mut e, c, &["set", "k", "v3"]), OK);
    assert_eq!(entry_ttl(&e, "k"), Some(None));
    let at = (T0 / 1000 + 200).to_string();
    assert_eq!(cmd(&mut e, c, &["set", "k", "v", "exat", &at]), OK);
    assert_eq!(entry_ttl(&e, "k"), Some(Some(T0 + 200_000)));
    let at = (T0 + 300).to_string();
    assert_eq!(cmd(&mut e, c, &["set", "k", "v", "PXAT", &at]), OK);
    assert_eq!(entry_ttl(&e, "k"), Some(Some(T0 + 300)));
    assert_eq!(e.server().keyspace.dbs[0].expires_len(), 1);
    // The last repeated option wins.
    assert_eq!(
        cmd(&mut e, c, &["set", "k", "v", "ex", "10", "ex", "500"]),
        OK
    );
    assert_eq!(entry_ttl(&e, "k"), Some(Some(T0 + 500_000)));

    // Time passes: the key is gone.
    e.pin_clock(Some(T0 + 500_000));
    assert_eq!(cmd(&mut e, c, &["get", "k"]), NIL);
    e.pin_clock(Some(T0));

    // A time in the past deletes the key (and sets nothing).
    assert_eq!(cmd(&mut e, c, &["set", "k", "v"]), OK);
    assert_eq!(cmd(&mut e, c, &["set", "k", "v", "pxat", "1"]), OK);
    assert_eq!(entry_ttl(&e, "k"), None);
    let now = T0.to_string();
    assert_eq!(cmd(&mut e, c, &["set", "k", "v", "pxat", &now]), OK);
    assert_eq!(entry_ttl(&e, "k"), None);
    assert_eq!(cmd(&mut e, c, &["set", "k", "old"]), OK);
    assert_eq!(
        cmd(&mut e, c, &["set", "k", "v", "exat", "1", "get"]),
        bulk("old")
    );
    assert_eq!(entry_ttl(&e, "k"), None);
    assert_eq!(e.server().keyspace.dbs[0].expires_len(), 0);

    let inv = expire_err("set");
    for bad in [
        &["ex", "0"][..],
        &["ex", "-5"],
        &["px", "0"],
        &["exat", "0"],
        &["pxat", "-1"],
        &["ex", "9223372036854775807"],
        &["ex", "9223372036854775"],
        &["px", "9223372036854775807"],
    ] {
        let mut args = vec!["set", "k", "v"];
        args.extend_from_slice(bad);
        assert_eq!(cmd(&mut e, c, &args), inv, "{bad:?}");
    }
    // Not overflowing: EXAT is absolute.
    assert_eq!(
        cmd(&mut e, c, &["set", "big", "v", "exat", "9223372036854775"]),
        OK
    );
    assert_eq!(entry_ttl(&e, "big"), Some(Some(9223372036854775000)));
    assert_eq!(cmd(&mut e, c, &["set", "k", "v", "ex", "abc"]), NOT_INT);
    assert_eq!(cmd(&mut e, c, &["set", "k", "v", "ex", "1.5"]), NOT_INT);
    assert_eq!(cmd(&mut e, c, &["set", "k", "v", "ex", "01"]), NOT_INT);
    for bad in [
        &["ex"][..],
        &["ex", "10", "px", "100"],
        &["px", "10", "ex", "100"],
        &["ex", "10", "exat", "100"],
        &["pxat", "10", "px", "100"],
        &["ex", "10", "keepttl"],
        &["keepttl", "px", "10"],
        &["persist"],
        &["ex", "10", "nx", "bogus"],
    ] {
        let mut args = vec!["set", "k2", "v"];
        args.extend_from_slice(bad);
        assert_eq!(cmd(&mut e, c, &args), SYNTAX, "{bad:?}");
    }
    assert_eq!(cmd(&mut e, c, &["exists", "k2"]), int(0));
    // Syntax is checked before the expire value, and both before GET.
    assert_eq!(
        cmd(&mut e, c, &["set", "k", "v", "ex", "0", "bogus"]),
        SYNTAX
    );
    assert_eq!(cmd(&mut e, c, &["set", "k", "v", "get", "ex", "0"]), inv);
}

#[test]
fn setnx_setex_psetex() {
    let (mut e, c) = setup();
    assert_eq!(cmd(&mut e, c, &["setnx", "k", "a"]), int(1));
    assert_eq!(cmd(&mut e, c, &["setnx", "k", "b"]), int(0));
    assert_eq!(cmd(&mut e, c, &["get", "k"]), bulk("a"));
    assert_eq!(cmd(&mut e, c, &["setex", "k", "100", "b"]), OK);
    assert_eq!(cmd(&mut e, c, &["get", "k"]), bulk("b"));
    assert_eq!(entry_ttl(&e, "k"), Some(Some(T0 + 100_000)));
    assert_eq!(
        cmd(&mut e, c, &["setex", "k", "0", "b"]),
        expire_err("setex")
    );
    assert_eq!(cmd(&mut e, c, &["setex", "k", "x", "b"]), NOT_INT);
    assert_eq!(cmd(&mut e, c, &["psetex", "k", "5000", "c"]), OK);
    assert_eq!(entry_ttl(&e, "k"), Some(Some(T0 + 5000)));
    assert_eq!(
        cmd(&mut e, c, &["psetex", "k", "-1", "c"]),
        expire_err("psetex")
    );
    assert_eq!(cmd(&mut e, c, &["setex", "k", "10"]), arity_err("setex"));
    assert_eq!(cmd(&mut e, c, &["setnx", "k"]), arity_err("setnx"));
    // SETNX on a key with a TTL sees it as present until it expires.
    e.pin_clock(Some(T0 + 5000));
    assert_eq!(cmd(&mut e, c, &["setnx", "k", "d"]), int(1));
    assert_eq!(entry_ttl(&e, "k"), Some(None));
}

#[test]
fn getex() {
    let (mut e, c) = setup();
    assert_eq!(cmd(&mut e, c, &["getex", "nope"]), NIL);
    assert_eq!(cmd(&mut e, c, &["getex", "nope", "ex", "10"]), NIL);
    assert_eq!(cmd(&mut e, c, &["exists", "nope"]), int(0));
    assert_eq!(cmd(&mut e, c, &["set", "k", "v"]), OK);
    assert_eq!(cmd(&mut e, c, &["getex", "k"]), bulk("v"));
    assert_eq!(entry_ttl(&e, "k"), Some(None));
    assert_eq!(cmd(&mut e, c, &["getex", "k", "ex", "100"]), bulk("v"));
    assert_eq!(entry_ttl(&e, "k"), Some(Some(T0 + 100_000)));
    assert_eq!(cmd(&mut e, c, &["getex", "k", "PX", "50"]), bulk("v"));
    assert_eq!(entry_ttl(&e, "k"), Some(Some(T0 + 50)));
    assert_eq!(cmd(&mut e, c, &["getex", "k", "persist"]), bulk("v"));
    assert_eq!(entry_ttl(&e, "k"), Some(None));
    assert_eq!(e.server().keyspace.dbs[0].expires_len(), 0);
    assert_eq!(
        cmd(&mut e, c, &["getex", "k", "exat", "4102444800"]),
        bulk("v")
    );
    assert_eq!(entry_ttl(&e, "k"), Some(Some(4102444800000)));
    assert_eq!(
        cmd(&mut e, c, &["getex", "k", "pxat", "4102444800001"]),
        bulk("v")
    );
    assert_eq!(entry_ttl(&e, "k"), Some(Some(4102444800001)));
    // An absolute time already past deletes the key, after replying.
    assert_eq!(cmd(&mut e, c, &["getex", "k", "pxat", "5"]), bulk("v"));
    assert_eq!(entry_ttl(&e, "k"), None);
    assert_eq!(cmd(&mut e, c, &["set", "k", "12"]), OK);
    let now = (T0 / 1000).to_string();
    assert_eq!(cmd(&mut e, c, &["getex", "k", "exat", &now]), bulk("12"));
    assert_eq!(entry_ttl(&e, "k"), None);

    assert_eq!(cmd(&mut e, c, &["set", "k", "v"]), OK);
    for bad in [
        &["ex", "10", "px", "10"][..],
        &["persist", "ex", "10"],
        &["ex", "10", "persist"],
        &["keepttl"],
        &["nx"],
        &["get"],
        &["ex"],
        &["bogus"],
    ] {
        let mut args = vec!["getex", "k"];
        args.extend_from_slice(bad);
        assert_eq!(cmd(&mut e, c, &args), SYNTAX, "{bad:?}");
    }
    assert_eq!(
        cmd(&mut e, c, &["getex", "k", "persist", "persist"]),
        bulk("v")
    );
    assert_eq!(
        cmd(&mut e, c, &["getex", "k", "ex", "0"]),
        expire_err("getex")
    );
    // Valkey 8 looks the key up first: a missing key is nil even here.
    assert_eq!(cmd(&mut e, c, &["getex", "nope", "ex", "0"]), NIL);
    assert_eq!(cmd(&mut e, c, &["getex", "nope", "ex", "abc"]), NIL);
    assert_eq!(cmd(&mut e, c, &["getex", "k", "ex", "abc"]), NOT_INT);
    assert_eq!(cmd(&mut e, c, &["getex"]), arity_err("getex"));
}

#[test]
fn getdel_getset() {
    let (mut e, c) = setup();
    assert_eq!(cmd(&mut e, c, &["set", "k", "v"]), OK);
    assert_eq!(cmd(&mut e, c, &["getdel", "k"]), bulk("v"));
    assert_eq!(cmd(&mut e, c, &["getdel", "k"]), NIL);
    assert_eq!(cmd(&mut e, c, &["exists", "k"]), int(0));
    assert_eq!(cmd(&mut e, c, &["getset", "k", "a"]), NIL);
    assert_eq!(cmd(&mut e, c, &["set", "k", "a", "ex", "100"]), OK);
    assert_eq!(cmd(&mut e, c, &["getset", "k", "7"]), bulk("a"));
    // GETSET drops the TTL like SET.
    assert_eq!(entry_ttl(&e, "k"), Some(None));
    assert_eq!(value(&e, "k"), Some(store::Str::Int(7)));
    assert_eq!(cmd(&mut e, c, &["getset", "k", "b"]), bulk("7"));
    assert_eq!(cmd(&mut e, c, &["getset", "k"]), arity_err("getset"));
}

#[test]
fn mget_mset_msetnx() {
    let (mut e, c) = setup();
    assert_eq!(cmd(&mut e, c, &["mset", "a", "1", "b", "2", "c", "3"]), OK);
    assert_eq!(
        cmd(&mut e, c, &["mget", "a", "b", "nope", "c"]),
        "*4\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n$1\r\n3\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["mset", "a", "1", "b"]), arity_err("mset"));
    assert_eq!(cmd(&mut e, c, &["mset", "a"]), arity_err("mset"));
    assert_eq!(cmd(&mut e, c, &["mset"]), arity_err("mset"));
    assert_eq!(
        cmd(&mut e, c, &["msetnx", "a", "1", "b"]),
        arity_err("msetnx")
    );
    assert_eq!(cmd(&mut e, c, &["msetnx", "a", "9", "d", "4"]), int(0));
    assert_eq!(cmd(&mut e, c, &["exists", "d"]), int(0));
    assert_eq!(cmd(&mut e, c, &["msetnx", "d", "4", "e", "5"]), int(1));
    assert_eq!(
        cmd(&mut e, c, &["mget", "d", "e", "a"]),
        "*3\r\n$1\r\n4\r\n$1\r\n5\r\n$1\r\n1\r\n"
    );
    // Later duplicates win, in MSETNX too.
    assert_eq!(cmd(&mut e, c, &["mset", "x", "1", "x", "2"]), OK);
    assert_eq!(cmd(&mut e, c, &["get", "x"]), bulk("2"));
    assert_eq!(cmd(&mut e, c, &["msetnx", "y", "1", "y", "2"]), int(1));
    assert_eq!(cmd(&mut e, c, &["get", "y"]), bulk("2"));
    // MSET clears TTLs.
    assert_eq!(cmd(&mut e, c, &["set", "t", "v", "ex", "10"]), OK);
    assert_eq!(cmd(&mut e, c, &["mset", "t", "w"]), OK);
    assert_eq!(entry_ttl(&e, "t"), Some(None));
    assert_eq!(cmd(&mut e, c, &["mget"]), arity_err("mget"));
    assert!(cmd(&mut e, c, &["hello", "3"]).starts_with('%'));
    assert_eq!(
        cmd(&mut e, c, &["mget", "nope", "a"]),
        "*2\r\n_\r\n$1\r\n1\r\n"
    );
}

#[test]
fn incr_decr_family() {
    let (mut e, c) = setup();
    assert_eq!(cmd(&mut e, c, &["incr", "n"]), int(1));
    assert_eq!(cmd(&mut e, c, &["incrby", "n", "10"]), int(11));
    assert_eq!(cmd(&mut e, c, &["decr", "n"]), int(10));
    assert_eq!(cmd(&mut e, c, &["decrby", "n", "15"]), int(-5));
    assert_eq!(cmd(&mut e, c, &["incrby", "n", "-5"]), int(-10));
    assert_eq!(cmd(&mut e, c, &["get", "n"]), bulk("-10"));
    assert_eq!(cmd(&mut e, c, &["decr", "fresh"]), int(-1));
    assert_eq!(cmd(&mut e, c, &["set", "n", "9223372036854775807"]), OK);
    let overflow = "-ERR increment or decrement would overflow\r\n";
    assert_eq!(cmd(&mut e, c, &["incr", "n"]), overflow);
    assert_eq!(cmd(&mut e, c, &["incrby", "n", "1"]), overflow);
    assert_eq!(cmd(&mut e, c, &["set", "n", "-9223372036854775808"]), OK);
    assert_eq!(cmd(&mut e, c, &["decr", "n"]), overflow);
    assert_eq!(cmd(&mut e, c, &["decrby", "n", "1"]), overflow);
    assert_eq!(
        cmd(&mut e, c, &["incrby", "n", "9223372036854775807"]),
        int(-1)
    );
    assert_eq!(
        cmd(&mut e, c, &["decrby", "n", "-9223372036854775808"]),
        "-ERR decrement would overflow\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["get", "n"]), bulk("-1"));
    for bad in [
        "abc",
        "1.5",
        " 1",
        "1 ",
        "01",
        "+1",
        "",
        "-0",
        "9223372036854775808",
    ] {
        assert_eq!(cmd(&mut e, c, &["set", "s", bad]), OK);
        assert_eq!(cmd(&mut e, c, &["incr", "s"]), NOT_INT, "{bad:?}");
        assert_eq!(cmd(&mut e, c, &["incrby", "n", bad]), NOT_INT, "{bad:?}");
        assert_eq!(cmd(&mut e, c, &["decrby", "n", bad]), NOT_INT, "{bad:?}");
    }
    // A text value that is an integer counts (APPEND leaves raw text, as Valkey).
    assert_eq!(cmd(&mut e, c, &["set", "t", "4"]), OK);
    assert_eq!(cmd(&mut e, c, &["append", "t", "2"]), int(2));
    assert_eq!(value(&e, "t"), Some(store::Str::Raw(b"42".to_vec())));
    assert_eq!(cmd(&mut e, c, &["incr", "t"]), int(43));
    assert_eq!(value(&e, "t"), Some(store::Str::Int(43)));
    // The TTL survives.
    assert_eq!(cmd(&mut e, c, &["set", "x", "5", "px", "900"]), OK);
    assert_eq!(cmd(&mut e, c, &["incrby", "x", "5"]), int(10));
    assert_eq!(entry_ttl(&e, "x"), Some(Some(T0 + 900)));
    assert_eq!(cmd(&mut e, c, &["incr"]), arity_err("incr"));
    assert_eq!(cmd(&mut e, c, &["incrby", "x"]), arity_err("incrby"));
}

#[test]
fn incrbyfloat() {
    let (mut e, c) = setup();
    assert_eq!(cmd(&mut e, c, &["incrbyfloat", "f", "10.5"]), bulk("10.5"));
    assert_eq!(cmd(&mut e, c, &["incrbyfloat", "f", "0.1"]), bulk("10.6"));
    assert_eq!(cmd(&mut e, c, &["incrbyfloat", "f", "-5"]), bulk("5.6"));
    assert_eq!(cmd(&mut e, c, &["set", "f", "10"]), OK);
    assert_eq!(cmd(&mut e, c, &["incrbyfloat", "f", "10.5"]), bulk("20.5"));
    assert_eq!(cmd(&mut e, c, &["set", "f", "5.0e3"]), OK);
    assert_eq!(cmd(&mut e, c, &["incrbyfloat", "f", "2.0e2"]), bulk("5200"));
    // Stored as text, not as an integer.
    assert_eq!(value(&e, "f"), Some(store::Str::Bytes(b"5200".to_vec())));
    assert_eq!(cmd(&mut e, c, &["set", "f", "3.0e3"]), OK);
    assert_eq!(cmd(&mut e, c, &["incrbyfloat", "f", "2.0e3"]), bulk("5000"));
    // Long double precision: these differ from f64 arithmetic.
    assert_eq!(cmd(&mut e, c, &["incrbyfloat", "p", "0.1"]), bulk("0.1"));
    assert_eq!(cmd(&mut e, c, &["incrbyfloat", "p", "0.2"]), bulk("0.3"));
    assert_eq!(cmd(&mut e, c, &["set", "f", "4"]), OK);
    assert_eq!(
        cmd(&mut e, c, &["incrbyfloat", "f", "0.3333333333333333"]),
        bulk("4.3333333333333333")
    );
    let r = cmd(&mut e, c, &["incrbyfloat", "big", "1e308"]);
    assert!(r.starts_with("$308\r\n99999999999999999996685879"), "{r}");
    let r = cmd(&mut e, c, &["incrbyfloat", "big", "1e308"]);
    assert!(r.starts_with("$309\r\n19999999999999999999337175"), "{r}");
    assert_eq!(
        cmd(&mut e, c, &["incrbyfloat", "g", "1e-5"]),
        bulk("0.00001")
    );
    assert_eq!(
        cmd(&mut e, c, &["incrbyfloat", "h", "1e20"]),
        bulk("100000000000000000000")
    );
    assert_eq!(cmd(&mut e, c, &["incrbyfloat", "i", "-0.0"]), bulk("0"));
    assert_eq!(cmd(&mut e, c, &["incrbyfloat", "j", "-1e-30"]), bulk("0"));
    assert_eq!(cmd(&mut e, c, &["incrbyfloat", "hex", "0x10"]), bulk("16"));
    // Errors.
    assert_eq!(cmd(&mut e, c, &["set", "s", "abc"]), OK);
    assert_eq!(cmd(&mut e, c, &["incrbyfloat", "s", "1"]), NOT_FLOAT);
    for bad in ["abc", "nan", "", " 1", "1 ", "1e", "1e5000", "1e-5000"] {
        assert_eq!(
            cmd(&mut e, c, &["incrbyfloat", "f", bad]),
            NOT_FLOAT,
            "{bad:?}"
        );
    }
    let nan_inf = "-ERR increment would produce NaN or Infinity\r\n";
    assert_eq!(cmd(&mut e, c, &["incrbyfloat", "f", "inf"]), nan_inf);
    assert_eq!(cmd(&mut e, c, &["incrbyfloat", "f", "-Infinity"]), nan_inf);
    // Past f64's range but within long double's.
    let r = cmd(&mut e, c, &["incrbyfloat", "huge", "1e4932"]);
    assert!(
        r.starts_with("$4933\r\n1000000000000000000006018949387963891323837774254533"),
        "{r}"
    );
    assert_eq!(cmd(&mut e, c, &["set", "max", "1.18e4932"]), OK);
    assert_eq!(
        cmd(&mut e, c, &["incrbyfloat", "max", "1.18e4932"]),
        nan_inf
    );
    assert_eq!(cmd(&mut e, c, &["incrbyfloat", "f", "1.2e4932"]), NOT_FLOAT);
    assert_eq!(cmd(&mut e, c, &["set", "inf", "inf"]), OK);
    assert_eq!(cmd(&mut e, c, &["incrbyfloat", "inf", "1"]), nan_inf);
    assert_eq!(cmd(&mut e, c, &["get", "f"]), bulk("4.3333333333333333"));
    // A NUL inside the stored value is not the end of the number.
    assert_eq!(cmd(&mut e, c, &["set", "z", "1"]), OK);
    assert_eq!(cmd(&mut e, c, &["setrange", "z", "2", "2"]), int(3));
    assert_eq!(cmd(&mut e, c, &["incrbyfloat", "z", "1"]), NOT_FLOAT);
    // The TTL survives; RESP3 still gets a bulk string.
    assert_eq!(cmd(&mut e, c, &["set", "t", "1.5", "ex", "9"]), OK);
    assert!(cmd(&mut e, c, &["hello", "3"]).starts_with('%'));
    assert_eq!(cmd(&mut e, c, &["incrbyfloat", "t", "1"]), bulk("2.5"));
    assert_eq!(entry_ttl(&e, "t"), Some(Some(T0 + 9000)));
}

#[test]
fn append_strlen() {
    let (mut e, c) = setup();
    assert_eq!(cmd(&mut e, c, &["append", "k", "hello"]), int(5));
    assert_eq!(cmd(&mut e, c, &["append", "k", " world"]), int(11));
    assert_eq!(cmd(&mut e, c, &["get", "k"]), bulk("hello world"));
    assert_eq!(cmd(&mut e, c, &["strlen", "k"]), int(11));
    assert_eq!(cmd(&mut e, c, &["strlen", "nope"]), int(0));
    assert_eq!(cmd(&mut e, c, &["set", "n", "-42"]), OK);
    assert_eq!(cmd(&mut e, c, &["strlen", "n"]), int(3));
    assert_eq!(cmd(&mut e, c, &["append", "n", "1"]), int(4));
    assert_eq!(cmd(&mut e, c, &["incr", "n"]), int(-420));
    // A new key is encoded like SET would.
    assert_eq!(cmd(&mut e, c, &["append", "m", "77"]), int(2));
    assert_eq!(value(&e, "m"), Some(store::Str::Int(77)));
    assert_eq!(cmd(&mut e, c, &["append", "m", ""]), int(2));
    assert_eq!(cmd(&mut e, c, &["set", "t", "v", "ex", "10"]), OK);
    assert_eq!(cmd(&mut e, c, &["append", "t", "w"]), int(2));
    assert_eq!(entry_ttl(&e, "t"), Some(Some(T0 + 10_000)));
    // The size limit follows proto-max-bulk-len.
    assert_eq!(
        cmd(
            &mut e,
            c,
            &["config", "set", "proto-max-bulk-len", "1048576"]
        ),
        OK
    );
    let big = "x".repeat(1_048_570);
    assert_eq!(cmd(&mut e, c, &["set", "b", &big]), OK);
    assert_eq!(cmd(&mut e, c, &["append", "b", "123456"]), int(1_048_576));
    assert_eq!(cmd(&mut e, c, &["append", "b", "1"]), TOO_BIG);
    assert_eq!(cmd(&mut e, c, &["strlen", "b"]), int(1_048_576));
}

#[test]
fn getrange_substr() {
    let (mut e, c) = setup();
    assert_eq!(cmd(&mut e, c, &["set", "s", "This is a string"]), OK);
    for (start, end, want) in [
        ("0", "3", "This"),
        ("-3", "-1", "ing"),
        ("0", "-1", "This is a string"),
        ("10", "100", "string"),
        ("5", "3", ""),
        ("-1", "-5", ""),
        ("-100", "3", "This"),
        ("-100", "-100", "T"),
        ("100", "200", ""),
        ("15", "15", "g"),
        ("16", "16", ""),
        ("3", "-100", ""),
        ("0", "9223372036854775807", "This is a string"),
        ("-9223372036854775808", "0", "T"),
    ] {
        assert_eq!(
            cmd(&mut e, c, &["getrange", "s", start, end]),
            bulk(want),
            "{start} {end}"
        );
        assert_eq!(
            cmd(&mut e, c, &["substr", "s", start, end]),
            bulk(want),
            "{start} {end}"
        );
    }
    assert_eq!(cmd(&mut e, c, &["getrange", "nope", "0", "-1"]), bulk(""));
    assert_eq!(cmd(&mut e, c, &["set", "empty", ""]), OK);
    assert_eq!(cmd(&mut e, c, &["getrange", "empty", "0", "-1"]), bulk(""));
    assert_eq!(cmd(&mut e, c, &["getrange", "s", "a", "1"]), NOT_INT);
    assert_eq!(cmd(&mut e, c, &["getrange", "nope", "0", "1.5"]), NOT_INT);
    assert_eq!(cmd(&mut e, c, &["set", "n", "12345"]), OK);
    assert_eq!(cmd(&mut e, c, &["getrange", "n", "1", "-2"]), bulk("234"));
    assert_eq!(
        cmd(&mut e, c, &["getrange", "s", "0"]),
        arity_err("getrange")
    );
}

#[test]
fn setrange() {
    let (mut e, c) = setup();
    assert_eq!(cmd(&mut e, c, &["set", "s", "This is a string"]), OK);
    assert_eq!(cmd(&mut e, c, &["setrange", "s", "10", "STRING"]), int(16));
    assert_eq!(cmd(&mut e, c, &["get", "s"]), bulk("This is a STRING"));
    assert_eq!(cmd(&mut e, c, &["setrange", "s", "14", "NG!!"]), int(18));
    assert_eq!(cmd(&mut e, c, &["get", "s"]), bulk("This is a STRING!!"));
    assert_eq!(cmd(&mut e, c, &["setrange", "pad", "3", "ab"]), int(5));
    assert_eq!(cmd(&mut e, c, &["get", "pad"]), bulk("\0\0\0ab"));
    assert_eq!(cmd(&mut e, c, &["setrange", "pad", "7", "c"]), int(8));
    assert_eq!(cmd(&mut e, c, &["get", "pad"]), bulk("\0\0\0ab\0\0c"));
    assert_eq!(cmd(&mut e, c, &["setrange", "empty", "5", ""]), int(0));
    assert_eq!(cmd(&mut e, c, &["exists", "empty"]), int(0));
    assert_eq!(cmd(&mut e, c, &["setrange", "s", "100", ""]), int(18));
    assert_eq!(
        cmd(&mut e, c, &["setrange", "s", "-1", "x"]),
        "-ERR offset is out of range\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["setrange", "s", "x", "x"]), NOT_INT);
    assert_eq!(
        cmd(&mut e, c, &["setrange", "s", "536870912", "x"]),
        TOO_BIG
    );
    assert_eq!(
        cmd(&mut e, c, &["setrange", "new", "536870912", "x"]),
        TOO_BIG
    );
    assert_eq!(
        cmd(&mut e, c, &["setrange", "s", "9223372036854775807", "x"]),
        TOO_BIG
    );
    assert_eq!(cmd(&mut e, c, &["exists", "new"]), int(0));
    // Empty values never hit the size check.
    assert_eq!(cmd(&mut e, c, &["setrange", "s", "536870912", ""]), int(18));
    assert_eq!(cmd(&mut e, c, &["set", "n", "12345"]), OK);
    assert_eq!(cmd(&mut e, c, &["setrange", "n", "0", "9"]), int(5));
    assert_eq!(cmd(&mut e, c, &["get", "n"]), bulk("92345"));
    assert_eq!(cmd(&mut e, c, &["set", "t", "v", "px", "77"]), OK);
    assert_eq!(cmd(&mut e, c, &["setrange", "t", "1", "w"]), int(2));
    assert_eq!(entry_ttl(&e, "t"), Some(Some(T0 + 77)));
}

#[test]
fn expired_keys_read_as_missing() {
    let (mut e, c) = setup();
    assert_eq!(cmd(&mut e, c, &["set", "k", "5", "px", "10"]), OK);
    e.pin_clock(Some(T0 + 10));
    assert_eq!(cmd(&mut e, c, &["strlen", "k"]), int(0));
    assert_eq!(cmd(&mut e, c, &["set", "k", "5", "px", "10"]), OK);
    e.pin_clock(Some(T0 + 20));
    assert_eq!(cmd(&mut e, c, &["incr", "k"]), int(1));
    assert_eq!(entry_ttl(&e, "k"), Some(None));
    assert_eq!(cmd(&mut e, c, &["set", "k", "v", "px", "10"]), OK);
    e.pin_clock(Some(T0 + 30));
    assert_eq!(cmd(&mut e, c, &["set", "k", "w", "xx"]), NIL);
    assert_eq!(
        cmd(&mut e, c, &["set", "k", "v", "px", "10", "keepttl"]),
        SYNTAX
    );
    assert_eq!(cmd(&mut e, c, &["set", "k", "v", "px", "10"]), OK);
    e.pin_clock(Some(T0 + 40));
    assert_eq!(cmd(&mut e, c, &["msetnx", "k", "1"]), int(1));
    assert_eq!(cmd(&mut e, c, &["append", "k", "2"]), int(2));
}

#[test]
fn keyspace_hits_and_misses() {
    let (mut e, c) = setup();
    assert_eq!(cmd(&mut e, c, &["set", "k", "v"]), OK);
    let before = e.server().stats.keyspace_hits;
    cmd(&mut e, c, &["get", "k"]);
    cmd(&mut e, c, &["mget", "k", "k", "nope"]);
    assert_eq!(e.server().stats.keyspace_hits, before + 3);
    assert_eq!(e.server().stats.keyspace_misses, 1);
    // Write lookups do not count.
    cmd(&mut e, c, &["incr", "n"]);
    cmd(&mut e, c, &["append", "k", "x"]);
    assert_eq!(e.server().stats.keyspace_hits, before + 3);
    assert_eq!(e.server().stats.keyspace_misses, 1);
}

#[test]
fn wrong_type_goes_through_the_helper() {
    use engine::cmd::strings::{WRONGTYPE, as_str, encode};
    let v = store::Entry::keyed_str(b"k", encode(b"12"), None);
    assert_eq!(as_str(&v), Some(store::StrRef::Int(12)));
    let h = store::Entry::keyed(b"h", store::Value::Hash(store::types::Hash::new()));
    assert_eq!(as_str(&h), None);
    assert!(WRONGTYPE.starts_with("WRONGTYPE Operation against a key holding"));
}

#[test]
fn command_info_for_string_commands() {
    let (mut e, c) = setup();
    assert_eq!(
        cmd(&mut e, c, &["command", "info", "get"]),
        "*1\r\n*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n\
         *3\r\n+@read\r\n+@string\r\n+@fast\r\n*0\r\n\
         *1\r\n*6\r\n$5\r\nflags\r\n*2\r\n+RO\r\n+access\r\n\
         $12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:1\r\n\
         $9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n*0\r\n"
    );
    let r = cmd(&mut e, c, &["command", "info", "mset"]);
    assert!(
        r.starts_with("*1\r\n*10\r\n$4\r\nmset\r\n:-3\r\n*2\r\n+write\r\n+denyoom\r\n:1\r\n:-1\r\n:2\r\n*3\r\n+@write\r\n+@string\r\n+@slow\r\n"),
        "{r}"
    );
    let r = cmd(&mut e, c, &["command", "docs", "getex"]);
    assert!(r.contains("Returns the string value of a key after setting its expiration time."));
    assert!(r.contains("$6\r\nstring\r\n"), "{r}");
    assert!(r.contains("$5\r\n6.2.0\r\n"), "{r}");
    for name in [
        "get",
        "set",
        "setnx",
        "setex",
        "psetex",
        "getex",
        "getdel",
        "getset",
        "mget",
        "mset",
        "msetnx",
        "incr",
        "decr",
        "incrby",
        "decrby",
        "incrbyfloat",
        "append",
        "strlen",
        "getrange",
        "substr",
        "setrange",
    ] {
        let r = cmd(&mut e, c, &["command", "info", name]);
        assert!(r.starts_with("*1\r\n*10\r\n"), "{name}: {r}");
    }
}

/// Strings written whole from `store::SHARED_STR_MIN` bytes on are shared:
/// replies refer to them instead of copying, and every command that reads
/// or edits strings still gives Valkey's answers.
#[test]
fn large_values_are_shared_and_replied_by_reference() {
    let (mut e, c) = setup();
    let n = store::SHARED_STR_MIN;
    let big = "a".repeat(n);
    assert_eq!(cmd(&mut e, c, &["set", "big", &big]), OK);
    let Some(store::Str::Shared(v)) = value(&e, "big") else {
        panic!("not shared")
    };
    // One below the threshold stays an owned buffer.
    let small = "s".repeat(n - 1);
    cmd(&mut e, c, &["set", "small", &small]);
    assert!(matches!(value(&e, "small"), Some(store::Str::Bytes(_))));
    let (out, _) = run_buf(&mut e, c, &encode(&[&["get", "small"]]));
    assert!(!out.has_refs());

    // GET: header, reference, CRLF; small replies around it stay bytes.
    let (out, _) = run_buf(
        &mut e,
        c,
        &encode(&[&["ping"], &["get", "big"], &["strlen", "big"]]),
    );
    assert!(out.has_refs());
    assert_eq!(
        out.bytes,
        format!("+PONG\r\n${n}\r\n\r\n:{n}\r\n").as_bytes()
    );
    assert_eq!(
        out.to_vec(),
        format!("+PONG\r\n{}:{n}\r\n", bulk(&big)).as_bytes()
    );
    assert_eq!(
        std::sync::Arc::strong_count(&v),
        3,
        "keyspace, reply, this test"
    );

    // Overwritten and deleted while the reply is unsent: it keeps the
    // original bytes.
    cmd(&mut e, c, &["set", "big", &"b".repeat(n + 5)]);
    cmd(&mut e, c, &["del", "big"]);
    assert_eq!(
        out.to_vec(),
        format!("+PONG\r\n{}:{n}\r\n", bulk(&big)).as_bytes()
    );
    drop(out);
    assert_eq!(std::sync::Arc::strong_count(&v), 1);

    cmd(&mut e, c, &["set", "big", &big]);
    assert_eq!(cmd(&mut e, c, &["object", "encoding", "big"]), bulk("raw"));
    assert_eq!(cmd(&mut e, c, &["strlen", "big"]), int(n as i64));
    assert_eq!(
        cmd(&mut e, c, &["getrange", "big", "-3", "-1"]),
        bulk("aaa")
    );
    assert_eq!(cmd(&mut e, c, &["incr", "big"]), NOT_INT);
    assert_eq!(cmd(&mut e, c, &["incrbyfloat", "big", "1"]), NOT_FLOAT);
    assert_eq!(cmd(&mut e, c, &["type", "big"]), "+string\r\n");
    for (words, want) in [
        (
            vec!["mget", "big", "nope"],
            format!("*2\r\n{}{NIL}", bulk(&big)),
        ),
        (vec!["getex", "big", "ex", "100"], bulk(&big)),
        (vec!["getset", "big", &big], bulk(&big)),
        (vec!["set", "big", &big, "get"], bulk(&big)),
    ] {
        let (out, _) = run_buf(&mut e, c, &encode(&[&words]));
        assert!(out.has_refs(), "{}", words[0]);
        assert_eq!(
            String::from_utf8(out.to_vec()).unwrap(),
            want,
            "{}",
            words[0]
        );
    }

    // COPY and RENAME share or move the value; still readable.
    assert_eq!(cmd(&mut e, c, &["copy", "big", "big2"]), int(1));
    assert!(matches!(value(&e, "big2"), Some(store::Str::Shared(_))));
    assert_eq!(cmd(&mut e, c, &["rename", "big2", "big3"]), OK);
    assert_eq!(cmd(&mut e, c, &["get", "big3"]), bulk(&big));

    // APPEND and SETRANGE copy it into an owned `raw` buffer first; a
    // reply taken before keeps the old bytes.
    let (before, _) = run_buf(&mut e, c, &encode(&[&["get", "big"]]));
    assert_eq!(cmd(&mut e, c, &["append", "big", "xyz"]), int(n as i64 + 3));
    assert!(matches!(value(&e, "big"), Some(store::Str::Raw(_))));
    assert_eq!(cmd(&mut e, c, &["object", "encoding", "big"]), bulk("raw"));
    assert_eq!(
        cmd(&mut e, c, &["getrange", "big", "-4", "-1"]),
        bulk("axyz")
    );
    assert_eq!(
        cmd(&mut e, c, &["setrange", "big3", "0", "ZZ"]),
        int(n as i64)
    );
    assert_eq!(cmd(&mut e, c, &["getrange", "big3", "0", "2"]), bulk("ZZa"));
    assert_eq!(cmd(&mut e, c, &["setbit", "big", "0", "1"]), int(0));
    assert_eq!(before.to_vec(), bulk(&big).as_bytes());
    assert_eq!(cmd(&mut e, c, &["getdel", "big3"]).len(), bulk(&big).len());

    // MULTI/EXEC: the queued GET replies by reference too.
    cmd(&mut e, c, &["set", "big", &big]);
    cmd(&mut e, c, &["multi"]);
    cmd(&mut e, c, &["get", "big"]);
    let (out, _) = run_buf(&mut e, c, &encode(&[&["exec"]]));
    assert!(out.has_refs());
    assert_eq!(out.to_vec(), format!("*1\r\n{}", bulk(&big)).as_bytes());

    // CLIENT REPLY SKIP drops the reference with the reply.
    let (out, _) = run_buf(
        &mut e,
        c,
        &encode(&[&["client", "reply", "skip"], &["get", "big"], &["ping"]]),
    );
    assert!(!out.has_refs());
    assert_eq!(out.to_vec(), b"+PONG\r\n");

    // RESP3: the same bulk string.
    cmd(&mut e, c, &["hello", "3"]);
    let (out, _) = run_buf(&mut e, c, &encode(&[&["get", "big"]]));
    assert!(out.has_refs());
    assert_eq!(out.to_vec(), bulk(&big).as_bytes());
}

/// CLIENT INFO's tot-net-out counts a value sent by reference as if it
/// had been copied.
#[test]
fn referenced_bytes_count_as_output() {
    let (mut e, c) = setup();
    let big = "q".repeat(100_000);
    cmd(&mut e, c, &["set", "big", &big]);
    let out_bytes = |e: &mut engine::Engine| -> u64 {
        let info = bulk_text(&cmd(e, c, &["client", "info"]));
        let f = info
            .split_whitespace()
            .find_map(|f| f.strip_prefix("tot-net-out="))
            .unwrap()
            .to_string();
        f.parse().unwrap()
    };
    let before = out_bytes(&mut e);
    let (out, _) = run_buf(&mut e, c, &encode(&[&["get", "big"]]));
    assert_eq!(out.len(), 100_000 + "$100000\r\n\r\n".len());
    let after = out_bytes(&mut e);
    // The CLIENT INFO reply itself is counted after it is written.
    let info_reply = cmd(&mut e, c, &["client", "info"]).len() as u64;
    assert!(
        after - before >= out.len() as u64 && after - before < out.len() as u64 + info_reply + 64,
        "{before} -> {after}"
    );
}
