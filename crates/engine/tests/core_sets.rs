//! Set commands: replies (RESP2 and RESP3), errors, encodings and
//! conversions, byte for byte.

#[path = "core_util.rs"]
mod util;

use util::*;

const WRONGTYPE: &str = WRONGTYPE_ERR;

fn enc(e: &mut ringkv_engine::Engine, c: ringkv_engine::ClientId, k: &str) -> String {
    cmd(e, c, &["OBJECT", "ENCODING", k])
}

#[test]
fn sadd_srem_members_and_encodings() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(cmd(&mut e, c, &["SADD", "s", "3", "1", "2", "1"]), ":3\r\n");
    assert_eq!(enc(&mut e, c, "s"), bulk("intset"));
    // An intset replies in ascending order.
    assert_eq!(cmd(&mut e, c, &["SMEMBERS", "s"]), arr(&["1", "2", "3"]));
    assert_eq!(cmd(&mut e, c, &["SADD", "s", "x"]), ":1\r\n");
    assert_eq!(enc(&mut e, c, "s"), bulk("listpack"));
    assert_eq!(
        cmd(&mut e, c, &["SMEMBERS", "s"]),
        arr(&["1", "2", "3", "x"])
    );
    assert_eq!(cmd(&mut e, c, &["SADD", "s", &"y".repeat(65)]), ":1\r\n");
    assert_eq!(enc(&mut e, c, "s"), bulk("hashtable"));
    assert_eq!(cmd(&mut e, c, &["SCARD", "s"]), ":5\r\n");
    assert_eq!(cmd(&mut e, c, &["SISMEMBER", "s", "x"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["SISMEMBER", "s", "zz"]), ":0\r\n");
    assert_eq!(
        cmd(&mut e, c, &["SMISMEMBER", "s", "1", "zz", "x"]),
        "*3\r\n:1\r\n:0\r\n:1\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["SREM", "s", "1", "2", "zz"]), ":2\r\n");
    assert_eq!(enc(&mut e, c, "s"), bulk("hashtable"));
    assert_eq!(
        cmd(&mut e, c, &["SREM", "s", "3", "x", &"y".repeat(65)]),
        ":3\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["EXISTS", "s"]), ":0\r\n");
    // "007" is not an integer in canonical form: a listpack from the start.
    cmd(&mut e, c, &["SADD", "t", "007"]);
    assert_eq!(enc(&mut e, c, "t"), bulk("listpack"));
    // More members than set-max-listpack-entries at once: a table.
    let many: Vec<String> = (0..200).map(|i| format!("m{i}")).collect();
    let mut words = vec!["SADD", "big"];
    words.extend(many.iter().map(String::as_str));
    assert_eq!(cmd(&mut e, c, &words), ":200\r\n");
    assert_eq!(enc(&mut e, c, "big"), bulk("hashtable"));
    // An intset past set-max-intset-entries: a table.
    cmd(&mut e, c, &["CONFIG", "SET", "set-max-intset-entries", "3"]);
    cmd(&mut e, c, &["SADD", "i", "1", "2", "3"]);
    assert_eq!(enc(&mut e, c, "i"), bulk("intset"));
    cmd(&mut e, c, &["SADD", "i", "4"]);
    assert_eq!(enc(&mut e, c, "i"), bulk("hashtable"));
}

#[test]
fn resp3_sets_and_empty_replies() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(cmd(&mut e, c, &["SMEMBERS", "nokey"]), "*0\r\n");
    cmd(&mut e, c, &["HELLO", "3"]);
    cmd(&mut e, c, &["SADD", "s", "1"]);
    assert_eq!(cmd(&mut e, c, &["SMEMBERS", "s"]), "~1\r\n$1\r\n1\r\n");
    assert_eq!(cmd(&mut e, c, &["SMEMBERS", "nokey"]), "~0\r\n");
    assert_eq!(cmd(&mut e, c, &["SINTER", "s", "nokey"]), "~0\r\n");
    assert_eq!(cmd(&mut e, c, &["SPOP", "nokey"]), "_\r\n");
    assert_eq!(cmd(&mut e, c, &["SPOP", "nokey", "2"]), "~0\r\n");
    assert_eq!(cmd(&mut e, c, &["SPOP", "s", "5"]), "~1\r\n$1\r\n1\r\n");
    assert_eq!(cmd(&mut e, c, &["EXISTS", "s"]), ":0\r\n");
}

#[test]
fn spop_and_srandmember() {
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["SADD", "s", "a", "b", "c"]);
    assert_eq!(
        cmd(&mut e, c, &["SPOP", "s", "-1"]),
        "-ERR value is out of range, must be positive\r\n"
    );
    // Valkey's getPositiveLong: one message for both failures.
    assert_eq!(
        cmd(&mut e, c, &["SPOP", "s", "x"]),
        "-ERR value is out of range, must be positive\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["SPOP", "s", "0"]), "*0\r\n");
    let one = cmd(&mut e, c, &["SPOP", "s"]);
    assert!([bulk("a"), bulk("b"), bulk("c")].contains(&one));
    assert_eq!(cmd(&mut e, c, &["SCARD", "s"]), ":2\r\n");
    assert!(cmd(&mut e, c, &["SRANDMEMBER", "s", "-5"]).starts_with("*5\r\n"));
    assert!(cmd(&mut e, c, &["SRANDMEMBER", "s", "5"]).starts_with("*2\r\n"));
    assert_eq!(cmd(&mut e, c, &["SRANDMEMBER", "nokey"]), "$-1\r\n");
    assert_eq!(cmd(&mut e, c, &["SRANDMEMBER", "nokey", "3"]), "*0\r\n");
    assert_eq!(
        cmd(&mut e, c, &["SRANDMEMBER", "s", "-9223372036854775808"]),
        "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n"
    );
    let popped = cmd(&mut e, c, &["SPOP", "s", "2"]);
    assert!(popped.starts_with("*2\r\n"), "{popped}");
    assert_eq!(cmd(&mut e, c, &["EXISTS", "s"]), ":0\r\n");
}

#[test]
fn algebra_store_and_smove() {
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["SADD", "a", "1", "2", "3", "x"]);
    cmd(&mut e, c, &["SADD", "b", "2", "3", "4"]);
    cmd(&mut e, c, &["SET", "str", "v"]);
    assert_eq!(cmd(&mut e, c, &["SINTERSTORE", "d", "a", "b"]), ":2\r\n");
    assert_eq!(cmd(&mut e, c, &["SMEMBERS", "d"]), arr(&["2", "3"]));
    assert_eq!(enc(&mut e, c, "d"), bulk("intset"));
    assert_eq!(cmd(&mut e, c, &["SUNIONSTORE", "d", "a", "b"]), ":5\r\n");
    assert_eq!(enc(&mut e, c, "d"), bulk("listpack"));
    assert_eq!(cmd(&mut e, c, &["SDIFFSTORE", "d", "a", "b"]), ":2\r\n");
    assert_eq!(cmd(&mut e, c, &["SCARD", "d"]), ":2\r\n");
    assert_eq!(cmd(&mut e, c, &["SDIFF", "nokey", "a"]), "*0\r\n");
    // An empty result deletes the destination.
    cmd(&mut e, c, &["SET", "d2", "v", "EX", "100"]);
    assert_eq!(
        cmd(&mut e, c, &["SINTERSTORE", "d2", "a", "nokey"]),
        ":0\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["EXISTS", "d2"]), ":0\r\n");
    // WRONGTYPE anywhere in the list, even after a missing key.
    assert_eq!(cmd(&mut e, c, &["SINTER", "nokey", "str"]), WRONGTYPE);
    assert_eq!(cmd(&mut e, c, &["SUNION", "a", "str"]), WRONGTYPE);
    assert_eq!(cmd(&mut e, c, &["SINTERCARD", "2", "a", "b"]), ":2\r\n");
    assert_eq!(
        cmd(&mut e, c, &["SINTERCARD", "2", "a", "b", "LIMIT", "1"]),
        ":1\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["SINTERCARD", "0", "a"]),
        "-ERR numkeys should be greater than 0\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["SINTERCARD", "3", "a"]),
        "-ERR Number of keys can't be greater than number of args\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["SINTERCARD", "1", "a", "LIMIT", "-1"]),
        "-ERR LIMIT can't be negative\r\n"
    );
    // SMOVE: missing source is 0 before the destination type is checked.
    assert_eq!(cmd(&mut e, c, &["SMOVE", "nokey", "str", "1"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["SMOVE", "a", "str", "1"]), WRONGTYPE);
    assert_eq!(cmd(&mut e, c, &["SMOVE", "a", "new", "x"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["SMEMBERS", "new"]), arr(&["x"]));
    assert_eq!(cmd(&mut e, c, &["SMOVE", "a", "new", "zz"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["SMOVE", "a", "a", "1"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["SMOVE", "new", "a", "x"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["EXISTS", "new"]), ":0\r\n");
}

#[test]
fn sscan_and_wrong_type() {
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["SADD", "s", "a", "b", "c"]);
    assert_eq!(
        cmd(&mut e, c, &["SSCAN", "s", "0", "MATCH", "[ab]"]),
        "*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["SSCAN", "s", "0", "NOVALUES"]),
        "-ERR NOVALUES option can only be used in HSCAN\r\n"
    );
    cmd(&mut e, c, &["SET", "str", "v"]);
    for words in [
        &["SADD", "str", "a"][..],
        &["SREM", "str", "a"],
        &["SMEMBERS", "str"],
        &["SISMEMBER", "str", "a"],
        &["SMISMEMBER", "str", "a"],
        &["SCARD", "str"],
        &["SPOP", "str"],
        &["SRANDMEMBER", "str"],
        &["SSCAN", "str", "0"],
    ] {
        assert_eq!(cmd(&mut e, c, words), WRONGTYPE, "{words:?}");
    }
    // Sets are inputs of the sorted-set algebra, scoring 1.
    cmd(&mut e, c, &["ZADD", "z", "5", "a"]);
    assert_eq!(
        cmd(&mut e, c, &["ZUNION", "2", "s", "z", "WITHSCORES"]),
        arr(&["b", "1", "c", "1", "a", "6"])
    );
}
