//! Hash commands: replies (RESP2 and RESP3), errors, encodings and
//! conversions, byte for byte.

#[path = "core_util.rs"]
mod util;

use util::*;

const WRONGTYPE: &str = WRONGTYPE_ERR;

#[test]
fn hset_hget_hmget_hdel_and_the_key_goes_away_when_empty() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(cmd(&mut e, c, &["HSET", "h", "a", "1", "b", "2"]), ":2\r\n");
    assert_eq!(
        cmd(&mut e, c, &["HSET", "h", "a", "one", "c", "3"]),
        ":1\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["HMSET", "h", "d", "4"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["HGET", "h", "a"]), bulk("one"));
    assert_eq!(cmd(&mut e, c, &["HGET", "h", "zz"]), "$-1\r\n");
    assert_eq!(cmd(&mut e, c, &["HGET", "nokey", "a"]), "$-1\r\n");
    assert_eq!(
        cmd(&mut e, c, &["HMGET", "h", "a", "zz", "d"]),
        "*3\r\n$3\r\none\r\n$-1\r\n$1\r\n4\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["HMGET", "nokey", "a"]), "*1\r\n$-1\r\n");
    assert_eq!(cmd(&mut e, c, &["HLEN", "h"]), ":4\r\n");
    assert_eq!(cmd(&mut e, c, &["HSTRLEN", "h", "a"]), ":3\r\n");
    assert_eq!(cmd(&mut e, c, &["HSTRLEN", "h", "zz"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["HEXISTS", "h", "b"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["HEXISTS", "h", "zz"]), ":0\r\n");
    // Insertion order while listpack-encoded, as Valkey.
    assert_eq!(cmd(&mut e, c, &["HKEYS", "h"]), arr(&["a", "b", "c", "d"]));
    assert_eq!(
        cmd(&mut e, c, &["HVALS", "h"]),
        arr(&["one", "2", "3", "4"])
    );
    assert_eq!(
        cmd(&mut e, c, &["HGETALL", "h"]),
        arr(&["a", "one", "b", "2", "c", "3", "d", "4"])
    );
    assert_eq!(
        cmd(&mut e, c, &["HDEL", "h", "a", "a", "zz", "b"]),
        ":2\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["HDEL", "h", "c", "d"]), ":2\r\n");
    assert_eq!(cmd(&mut e, c, &["EXISTS", "h"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["HDEL", "h", "c"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["HGETALL", "h"]), "*0\r\n");
}

#[test]
fn hsetnx_and_arity_errors() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(cmd(&mut e, c, &["HSETNX", "h", "f", "1"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["HSETNX", "h", "f", "2"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["HGET", "h", "f"]), bulk("1"));
    assert_eq!(
        cmd(&mut e, c, &["HSET", "h", "a", "1", "b"]),
        "-ERR wrong number of arguments for 'hset' command\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["HMSET", "h", "a", "1", "b"]),
        "-ERR wrong number of arguments for 'hmset' command\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["HSET", "h", "a"]),
        "-ERR wrong number of arguments for 'hset' command\r\n"
    );
}

#[test]
fn wrong_type_everywhere() {
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["SET", "s", "x"]);
    for words in [
        &["HSET", "s", "a", "1"][..],
        &["HSETNX", "s", "a", "1"],
        &["HGET", "s", "a"],
        &["HMGET", "s", "a"],
        &["HDEL", "s", "a"],
        &["HLEN", "s"],
        &["HSTRLEN", "s", "a"],
        &["HEXISTS", "s", "a"],
        &["HKEYS", "s"],
        &["HVALS", "s"],
        &["HGETALL", "s"],
        &["HINCRBY", "s", "a", "1"],
        &["HINCRBYFLOAT", "s", "a", "1"],
        &["HRANDFIELD", "s"],
        &["HSCAN", "s", "0"],
    ] {
        assert_eq!(cmd(&mut e, c, words), WRONGTYPE, "{words:?}");
    }
    cmd(&mut e, c, &["HSET", "h", "a", "1"]);
    assert_eq!(cmd(&mut e, c, &["GET", "h"]), WRONGTYPE);
    assert_eq!(cmd(&mut e, c, &["TYPE", "h"]), "+hash\r\n");
}

#[test]
fn hincrby_and_hincrbyfloat() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(cmd(&mut e, c, &["HINCRBY", "h", "n", "5"]), ":5\r\n");
    assert_eq!(cmd(&mut e, c, &["HINCRBY", "h", "n", "-7"]), ":-2\r\n");
    assert_eq!(
        cmd(&mut e, c, &["HINCRBY", "h", "n", "x"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    cmd(
        &mut e,
        c,
        &["HSET", "h", "s", "abc", "big", "9223372036854775807"],
    );
    assert_eq!(
        cmd(&mut e, c, &["HINCRBY", "h", "s", "1"]),
        "-ERR hash value is not an integer\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["HINCRBY", "h", "big", "1"]),
        "-ERR increment or decrement would overflow\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["HINCRBYFLOAT", "h", "f", "10.5"]),
        bulk("10.5")
    );
    assert_eq!(
        cmd(&mut e, c, &["HINCRBYFLOAT", "h", "f", "0.1"]),
        bulk("10.6")
    );
    assert_eq!(
        cmd(&mut e, c, &["HINCRBYFLOAT", "h", "n", "2.0e2"]),
        bulk("198")
    );
    assert_eq!(
        cmd(&mut e, c, &["HINCRBYFLOAT", "h", "s", "1"]),
        "-ERR hash value is not a float\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["HINCRBYFLOAT", "h", "f", "x"]),
        "-ERR value is not a valid float\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["HINCRBYFLOAT", "h", "f", "inf"]),
        "-ERR value is NaN or Infinity\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["HGET", "h", "f"]), bulk("10.6"));
}

#[test]
fn encodings_convert_past_the_limits() {
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["HSET", "h", "a", "1"]);
    assert_eq!(
        cmd(&mut e, c, &["OBJECT", "ENCODING", "h"]),
        bulk("listpack")
    );
    let long = "v".repeat(65);
    cmd(&mut e, c, &["HSET", "h", "b", &long]);
    assert_eq!(
        cmd(&mut e, c, &["OBJECT", "ENCODING", "h"]),
        bulk("hashtable")
    );
    assert_eq!(cmd(&mut e, c, &["HGET", "h", "b"]), bulk(&long));
    cmd(
        &mut e,
        c,
        &["CONFIG", "SET", "hash-max-listpack-entries", "3"],
    );
    cmd(&mut e, c, &["HSET", "g", "a", "1", "b", "2", "c", "3"]);
    assert_eq!(
        cmd(&mut e, c, &["OBJECT", "ENCODING", "g"]),
        bulk("listpack")
    );
    cmd(&mut e, c, &["HSET", "g", "d", "4"]);
    assert_eq!(
        cmd(&mut e, c, &["OBJECT", "ENCODING", "g"]),
        bulk("hashtable")
    );
    assert_eq!(cmd(&mut e, c, &["HLEN", "g"]), ":4\r\n");
    // COPY and RENAME keep the value and its encoding.
    assert_eq!(cmd(&mut e, c, &["COPY", "g", "g2"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["HGET", "g2", "d"]), bulk("4"));
    assert_eq!(cmd(&mut e, c, &["RENAME", "g2", "g3"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["HLEN", "g3"]), ":4\r\n");
}

#[test]
fn resp3_shapes() {
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["HELLO", "3"]);
    cmd(&mut e, c, &["HSET", "h", "a", "1"]);
    assert_eq!(
        cmd(&mut e, c, &["HGETALL", "h"]),
        "%1\r\n$1\r\na\r\n$1\r\n1\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["HGETALL", "nokey"]), "%0\r\n");
    assert_eq!(cmd(&mut e, c, &["HGET", "h", "zz"]), "_\r\n");
    assert_eq!(
        cmd(&mut e, c, &["HRANDFIELD", "h", "-2", "WITHVALUES"]),
        "*2\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n"
    );
}

#[test]
fn hrandfield_counts() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(cmd(&mut e, c, &["HRANDFIELD", "nokey"]), "$-1\r\n");
    assert_eq!(cmd(&mut e, c, &["HRANDFIELD", "nokey", "3"]), "*0\r\n");
    cmd(&mut e, c, &["HSET", "h", "a", "1", "b", "2", "c", "3"]);
    let one = cmd(&mut e, c, &["HRANDFIELD", "h"]);
    assert!([bulk("a"), bulk("b"), bulk("c")].contains(&one), "{one}");
    assert_eq!(cmd(&mut e, c, &["HRANDFIELD", "h", "0"]), "*0\r\n");
    // Count ≥ size: every field once.
    let all = cmd(&mut e, c, &["HRANDFIELD", "h", "10", "WITHVALUES"]);
    assert_eq!(all, arr(&["a", "1", "b", "2", "c", "3"]));
    // Distinct picks.
    let two = cmd(&mut e, c, &["HRANDFIELD", "h", "2"]);
    let lines: Vec<&str> = two.lines().filter(|l| !l.starts_with(['*', '$'])).collect();
    assert_eq!(lines.len(), 2);
    assert_ne!(lines[0], lines[1]);
    // Negative: repeats allowed, exactly |count| of them.
    assert!(cmd(&mut e, c, &["HRANDFIELD", "h", "-5"]).starts_with("*5\r\n"));
    assert_eq!(
        cmd(&mut e, c, &["HRANDFIELD", "h", "1", "WITHSCORES"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["HRANDFIELD", "h", "x"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["HRANDFIELD", "h", "-9223372036854775808"]),
        "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n"
    );
    assert_eq!(
        cmd(
            &mut e,
            c,
            &["HRANDFIELD", "h", "-9223372036854775807", "WITHVALUES"]
        ),
        "-ERR value is out of range\r\n"
    );
}

#[test]
fn hscan_listpack_whole_and_hashtable_by_cursor() {
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["HSET", "h", "a", "1", "b", "2", "x", "3"]);
    assert_eq!(
        cmd(&mut e, c, &["HSCAN", "h", "0"]),
        "*2\r\n$1\r\n0\r\n*6\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nx\r\n$1\r\n3\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["HSCAN", "h", "0", "MATCH", "[ab]", "NOVALUES"]),
        "*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["HSCAN", "h", "0", "COUNT", "0"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["HSCAN", "h", "0", "NOSCORES"]),
        "-ERR NOSCORES option can only be used in ZSCAN\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["HSCAN", "h", "abc"]),
        "-ERR invalid cursor\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["HSCAN", "nokey", "0"]),
        "*2\r\n$1\r\n0\r\n*0\r\n"
    );
    // A large hash, walked by cursor: every field exactly once.
    for i in 0..1000 {
        cmd(&mut e, c, &["HSET", "big", &format!("f{i}"), "v"]);
    }
    let mut seen = std::collections::HashSet::new();
    let mut cursor = "0".to_string();
    loop {
        let reply = cmd(
            &mut e,
            c,
            &["HSCAN", "big", &cursor, "COUNT", "50", "NOVALUES"],
        );
        let lines: Vec<&str> = reply.split("\r\n").collect();
        cursor = lines[2].to_string();
        for l in lines[4..].iter().filter(|l| l.starts_with('f')) {
            assert!(seen.insert(l.to_string()), "{l} twice");
        }
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 1000);
}
