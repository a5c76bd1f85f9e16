//! Sorted-set commands: replies (RESP2 and RESP3), options, errors and
//! encodings, byte for byte.

#[path = "core_util.rs"]
mod util;

use ringkv_engine as engine;
use util::*;

const NIL: &str = "$-1\r\n";
const NULL3: &str = "_\r\n";
const EMPTY: &str = "*0\r\n";
const SYNTAX: &str = "-ERR syntax error\r\n";
const NOT_INT: &str = "-ERR value is not an integer or out of range\r\n";
const NOT_FLOAT: &str = "-ERR value is not a valid float\r\n";
const RANGE_FLOAT: &str = "-ERR min or max is not a float\r\n";
const RANGE_LEX: &str = "-ERR min or max not valid string range item\r\n";
const WRONGTYPE: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

fn int(n: i64) -> String {
    format!(":{n}\r\n")
}

/// An array of bulk strings.
fn arr(items: &[&str]) -> String {
    let mut s = format!("*{}\r\n", items.len());
    for i in items {
        s += &bulk(i);
    }
    s
}

/// RESP3 `[[member, score], ...]` with double scores.
fn pairs3(items: &[(&str, &str)]) -> String {
    let mut s = format!("*{}\r\n", items.len());
    for (m, sc) in items {
        s += &format!("*2\r\n{},{sc}\r\n", bulk(m));
    }
    s
}

fn err(msg: &str) -> String {
    format!("-{msg}\r\n")
}

fn setup() -> (engine::Engine, engine::ClientId) {
    let mut e = engine();
    e.pin_clock(Some(1_800_000_000_000));
    let c = connect(&mut e);
    (e, c)
}

/// Run a command written as space-separated words.
fn w(e: &mut engine::Engine, c: engine::ClientId, line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    cmd(e, c, &words)
}

fn encoding(e: &mut engine::Engine, c: engine::ClientId, key: &str) -> String {
    bulk_text(&w(e, c, &format!("object encoding {key}")))
}

#[test]
fn zadd_basics_and_scores() {
    let (mut e, c) = setup();
    assert_eq!(w(&mut e, c, "zadd z 1 a 2 b 3 c"), int(3));
    assert_eq!(w(&mut e, c, "zadd z 1 a 5 b 4 d"), int(1));
    assert_eq!(w(&mut e, c, "zcard z"), int(4));
    assert_eq!(w(&mut e, c, "zscore z b"), bulk("5"));
    assert_eq!(w(&mut e, c, "zscore z nope"), NIL);
    assert_eq!(w(&mut e, c, "zscore nokey a"), NIL);
    assert_eq!(w(&mut e, c, "zcard nokey"), int(0));
    // Valkey's double formatting: shortest round-trip, %g-like exponents.
    for (score, text) in [
        ("0.1", "0.1"),
        ("1e100", "1e+100"),
        ("-1e-100", "-1e-100"),
        ("+inf", "inf"),
        ("-inf", "-inf"),
        ("1.5e3", "1500"),
        ("3.0", "3"),
        // A listpack stores -0 as 0, as Valkey's does.
        ("-0", "0"),
        ("0x10", "16"),
        ("123456789.125", "123456789.125"),
    ] {
        assert!(cmd(&mut e, c, &["zadd", "f", score, "m"]).starts_with(':'));
        assert_eq!(cmd(&mut e, c, &["zscore", "f", "m"]), bulk(text), "{score}");
    }
    assert_eq!(w(&mut e, c, "zadd z nan a"), NOT_FLOAT);
    assert_eq!(w(&mut e, c, "zadd z abc a"), NOT_FLOAT);
    assert_eq!(w(&mut e, c, "zadd z 1e400 a"), NOT_FLOAT);
    assert_eq!(cmd(&mut e, c, &["zadd", "z", " 1", "a"]), NOT_FLOAT);
    // Scores are checked before anything is written.
    assert_eq!(w(&mut e, c, "zadd z 9 a x b"), NOT_FLOAT);
    assert_eq!(w(&mut e, c, "zscore z a"), bulk("1"));
    assert_eq!(
        w(&mut e, c, "zadd z 1"),
        err("ERR wrong number of arguments for 'zadd' command")
    );
    assert_eq!(w(&mut e, c, "zadd z 1 a 2"), SYNTAX);
    assert_eq!(w(&mut e, c, "zadd z nx ch"), SYNTAX);
    assert_eq!(w(&mut e, c, "set s v"), "+OK\r\n");
    assert_eq!(w(&mut e, c, "zadd s 1 a"), WRONGTYPE);
    assert_eq!(w(&mut e, c, "zscore s a"), WRONGTYPE);
    assert_eq!(w(&mut e, c, "zcard s"), WRONGTYPE);
    // RESP3 doubles.
    w(&mut e, c, "hello 3");
    assert_eq!(w(&mut e, c, "zscore z a"), ",1\r\n");
    assert_eq!(w(&mut e, c, "zscore f m"), ",123456789.125\r\n");
    assert_eq!(w(&mut e, c, "zscore z nope"), NULL3);
}

#[test]
fn zadd_options() {
    let (mut e, c) = setup();
    assert_eq!(
        w(&mut e, c, "zadd z nx xx 1 a"),
        err("ERR XX and NX options at the same time are not compatible")
    );
    for bad in ["gt lt", "nx gt", "lt nx"] {
        assert_eq!(
            w(&mut e, c, &format!("zadd z {bad} 1 a")),
            err("ERR GT, LT, and/or NX options at the same time are not compatible")
        );
    }
    assert_eq!(
        w(&mut e, c, "zadd z incr 1 a 2 b"),
        err("ERR INCR option supports a single increment-element pair")
    );
    // XX on a missing key creates nothing.
    assert_eq!(w(&mut e, c, "zadd z xx 1 a"), int(0));
    assert_eq!(w(&mut e, c, "exists z"), int(0));
    assert_eq!(w(&mut e, c, "zadd z 1 a 2 b 3 c"), int(3));
    assert_eq!(w(&mut e, c, "zadd z xx 10 a 1 new"), int(0));
    assert_eq!(w(&mut e, c, "zscore z a"), bulk("10"));
    assert_eq!(w(&mut e, c, "zscore z new"), NIL);
    assert_eq!(w(&mut e, c, "zadd z xx ch 11 a 2 b 7 zz"), int(1));
    assert_eq!(w(&mut e, c, "zadd z nx 100 a 4 d"), int(1));
    assert_eq!(w(&mut e, c, "zscore z a"), bulk("11"));
    // GT/LT update only in their direction but still add new members.
    assert_eq!(w(&mut e, c, "zadd z gt ch 5 a 50 b 6 e"), int(2));
    assert_eq!(
        w(&mut e, c, "zrange z 0 -1 withscores"),
        arr(&["c", "3", "d", "4", "e", "6", "a", "11", "b", "50"])
    );
    assert_eq!(w(&mut e, c, "zadd z lt ch 1 a 60 b"), int(1));
    assert_eq!(w(&mut e, c, "zscore z a"), bulk("1"));
    assert_eq!(w(&mut e, c, "zscore z b"), bulk("50"));
    // CH counts changed scores, not re-adds of the same score.
    assert_eq!(w(&mut e, c, "zadd z ch 1 a 50 b"), int(0));
    // Options are case-insensitive.
    assert_eq!(w(&mut e, c, "zadd z NX Ch 0 zero"), int(1));
}

#[test]
fn zadd_incr_and_zincrby() {
    let (mut e, c) = setup();
    assert_eq!(w(&mut e, c, "zadd z incr 5 a"), bulk("5"));
    assert_eq!(w(&mut e, c, "zadd z incr 2.5 a"), bulk("7.5"));
    assert_eq!(w(&mut e, c, "zincrby z -0.5 a"), bulk("7"));
    assert_eq!(w(&mut e, c, "zincrby z 1 b"), bulk("1"));
    assert_eq!(w(&mut e, c, "zadd z incr nx 5 a"), NIL);
    assert_eq!(w(&mut e, c, "zadd z incr xx 5 nope"), NIL);
    assert_eq!(w(&mut e, c, "zadd z incr gt -1 a"), NIL);
    assert_eq!(w(&mut e, c, "zadd z incr lt -1 a"), bulk("6"));
    assert_eq!(w(&mut e, c, "zincrby z x a"), NOT_FLOAT);
    assert_eq!(
        w(&mut e, c, "zincrby z 1 nx a"),
        err("ERR wrong number of arguments for 'zincrby' command")
    );
    assert_eq!(
        w(&mut e, c, "zincrby z 1"),
        err("ERR wrong number of arguments for 'zincrby' command")
    );
    assert_eq!(w(&mut e, c, "zadd inf 1 a"), int(1));
    assert_eq!(w(&mut e, c, "zadd inf incr +inf a"), bulk("inf"));
    assert_eq!(
        w(&mut e, c, "zadd inf incr -inf a"),
        err("ERR resulting score is not a number (NaN)")
    );
    assert_eq!(
        w(&mut e, c, "zincrby inf -inf a"),
        err("ERR resulting score is not a number (NaN)")
    );
    assert_eq!(w(&mut e, c, "zscore inf a"), bulk("inf"));
    assert_eq!(w(&mut e, c, "zincrby z 0.1 c"), bulk("0.1"));
    assert_eq!(w(&mut e, c, "zincrby z 0.2 c"), bulk("0.30000000000000004"));
    w(&mut e, c, "hello 3");
    assert_eq!(w(&mut e, c, "zincrby z 1 c"), ",1.3\r\n");
    assert_eq!(w(&mut e, c, "zadd z incr nx 1 c"), NULL3);
}

#[test]
fn zrem_deletes_empty_keys() {
    let (mut e, c) = setup();
    assert_eq!(w(&mut e, c, "zrem nokey a"), int(0));
    w(&mut e, c, "zadd z 1 a 2 b 3 c");
    assert_eq!(w(&mut e, c, "zrem z a nope a"), int(1));
    assert_eq!(w(&mut e, c, "zrem z b c d"), int(2));
    assert_eq!(w(&mut e, c, "exists z"), int(0));
    assert_eq!(w(&mut e, c, "type z"), "+none\r\n");
    w(&mut e, c, "set s v");
    assert_eq!(w(&mut e, c, "zrem s a"), WRONGTYPE);
    assert_eq!(
        w(&mut e, c, "zrem z"),
        err("ERR wrong number of arguments for 'zrem' command")
    );
}

#[test]
fn zmscore_and_ranks() {
    let (mut e, c) = setup();
    w(&mut e, c, "zadd z 1 a 2 b 3 c");
    assert_eq!(
        w(&mut e, c, "zmscore z a nope c"),
        format!("*3\r\n{}{NIL}{}", bulk("1"), bulk("3"))
    );
    assert_eq!(
        w(&mut e, c, "zmscore nokey a b"),
        format!("*2\r\n{NIL}{NIL}")
    );
    assert_eq!(w(&mut e, c, "zrank z a"), int(0));
    assert_eq!(w(&mut e, c, "zrank z c"), int(2));
    assert_eq!(w(&mut e, c, "zrevrank z c"), int(0));
    assert_eq!(w(&mut e, c, "zrank z nope"), NIL);
    assert_eq!(w(&mut e, c, "zrank nokey a"), NIL);
    assert_eq!(
        w(&mut e, c, "zrank z b withscore"),
        format!("*2\r\n:1\r\n{}", bulk("2"))
    );
    assert_eq!(
        w(&mut e, c, "zrevrank z b WITHSCORE"),
        format!("*2\r\n:1\r\n{}", bulk("2"))
    );
    assert_eq!(w(&mut e, c, "zrank z nope withscore"), "*-1\r\n");
    assert_eq!(w(&mut e, c, "zrank z b foo"), SYNTAX);
    assert_eq!(
        w(&mut e, c, "zrank z b withscore x"),
        err("ERR wrong number of arguments for 'zrank' command")
    );
    w(&mut e, c, "hello 3");
    assert_eq!(w(&mut e, c, "zrank z b withscore"), "*2\r\n:1\r\n,2\r\n");
    assert_eq!(w(&mut e, c, "zrank z nope withscore"), NULL3);
    assert_eq!(w(&mut e, c, "zmscore z a nope"), "*2\r\n,1\r\n_\r\n");
}

#[test]
fn zrange_by_rank() {
    let (mut e, c) = setup();
    w(&mut e, c, "zadd z 1 a 2 b 3 c 4 d 5 e");
    assert_eq!(
        w(&mut e, c, "zrange z 0 -1"),
        arr(&["a", "b", "c", "d", "e"])
    );
    assert_eq!(w(&mut e, c, "zrange z -2 -1"), arr(&["d", "e"]));
    assert_eq!(w(&mut e, c, "zrange z -100 1"), arr(&["a", "b"]));
    assert_eq!(w(&mut e, c, "zrange z 3 100"), arr(&["d", "e"]));
    assert_eq!(w(&mut e, c, "zrange z 3 1"), EMPTY);
    assert_eq!(w(&mut e, c, "zrange z 5 10"), EMPTY);
    assert_eq!(
        w(&mut e, c, "zrange z 0 1 withscores"),
        arr(&["a", "1", "b", "2"])
    );
    assert_eq!(w(&mut e, c, "zrange z 0 1 rev"), arr(&["e", "d"]));
    assert_eq!(
        w(&mut e, c, "zrevrange z 0 1 withscores"),
        arr(&["e", "5", "d", "4"])
    );
    assert_eq!(w(&mut e, c, "zrevrange z -1 -1"), arr(&["a"]));
    assert_eq!(w(&mut e, c, "zrange nokey 0 -1"), EMPTY);
    assert_eq!(w(&mut e, c, "zrange z x 1"), NOT_INT);
    assert_eq!(w(&mut e, c, "zrange z 0 1 rev rev"), SYNTAX);
    assert_eq!(w(&mut e, c, "zrange z 0 1 limit 1"), SYNTAX);
    assert_eq!(w(&mut e, c, "zrange z 0 1 byscore bylex"), SYNTAX);
    assert_eq!(
        w(&mut e, c, "zrange z 0 -1 limit 0 1"),
        err(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
        )
    );
    // LIMIT with a count of -1 is "no limit" and allowed even by rank.
    assert_eq!(w(&mut e, c, "zrange z 0 0 limit 5 -1"), arr(&["a"]));
    assert_eq!(
        w(&mut e, c, "zrevrange z 0 -1 limit 0 1"),
        err(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
        )
    );
    assert_eq!(w(&mut e, c, "zrevrange z 0 1 byscore"), SYNTAX);
    w(&mut e, c, "hello 3");
    assert_eq!(
        w(&mut e, c, "zrange z 0 1 withscores"),
        pairs3(&[("a", "1"), ("b", "2")])
    );
    assert_eq!(w(&mut e, c, "zrange z 0 1"), arr(&["a", "b"]));
}

#[test]
fn zrange_by_score() {
    let (mut e, c) = setup();
    w(&mut e, c, "zadd z -inf m 0 zero 1 a 2 b 3 c 4.5 d +inf p");
    assert_eq!(w(&mut e, c, "zrangebyscore z 1 3"), arr(&["a", "b", "c"]));
    assert_eq!(w(&mut e, c, "zrangebyscore z (1 3"), arr(&["b", "c"]));
    assert_eq!(w(&mut e, c, "zrangebyscore z (1 (3"), arr(&["b"]));
    assert_eq!(w(&mut e, c, "zrangebyscore z -inf -inf"), arr(&["m"]));
    assert_eq!(
        w(&mut e, c, "zrangebyscore z (-inf (+inf"),
        arr(&["zero", "a", "b", "c", "d"])
    );
    assert_eq!(w(&mut e, c, "zrangebyscore z 3 1"), EMPTY);
    assert_eq!(
        w(&mut e, c, "zrangebyscore z 4 +inf withscores"),
        arr(&["d", "4.5", "p", "inf"])
    );
    assert_eq!(w(&mut e, c, "zrangebyscore z 1 3 limit 1 1"), arr(&["b"]));
    assert_eq!(
        w(&mut e, c, "zrangebyscore z 1 3 limit 1 -5"),
        arr(&["b", "c"])
    );
    assert_eq!(w(&mut e, c, "zrangebyscore z 1 3 limit -1 1"), EMPTY);
    assert_eq!(w(&mut e, c, "zrangebyscore z 1 3 limit 3 1"), EMPTY);
    assert_eq!(w(&mut e, c, "zrangebyscore z 1 3 limit 0 0"), EMPTY);
    assert_eq!(w(&mut e, c, "zrangebyscore z 1 3 limit x 0"), NOT_INT);
    assert_eq!(w(&mut e, c, "zrangebyscore z 0 1 bylex"), SYNTAX);
    assert_eq!(w(&mut e, c, "zrangebyscore z 0 1 rev"), SYNTAX);
    assert_eq!(
        w(&mut e, c, "zrevrangebyscore z 3 1 withscores limit 0 2"),
        arr(&["c", "3", "b", "2"])
    );
    assert_eq!(w(&mut e, c, "zrevrangebyscore z 1 3"), EMPTY);
    assert_eq!(
        w(&mut e, c, "zrange z 3 1 byscore rev"),
        arr(&["c", "b", "a"])
    );
    assert_eq!(
        w(&mut e, c, "zrange z (5 1 byscore rev limit 1 2 withscores"),
        arr(&["c", "3", "b", "2"])
    );
    assert_eq!(
        w(&mut e, c, "zrange z 1 3 byscore limit 1 10"),
        arr(&["b", "c"])
    );
    // zslParseRange reads with strtod: leading space and overflow pass,
    // trailing junk does not; an empty bound is 0.
    assert_eq!(
        cmd(&mut e, c, &["zrangebyscore", "z", " 1", "2"]),
        arr(&["a", "b"])
    );
    assert_eq!(
        cmd(&mut e, c, &["zrangebyscore", "z", "", ""]),
        arr(&["zero"])
    );
    assert_eq!(
        cmd(&mut e, c, &["zrangebyscore", "z", "(", "1"]),
        arr(&["a"])
    );
    assert_eq!(w(&mut e, c, "zrangebyscore z 1e400 inf"), arr(&["p"]));
    assert_eq!(
        cmd(&mut e, c, &["zrangebyscore", "z", "1 ", "2"]),
        RANGE_FLOAT
    );
    assert_eq!(w(&mut e, c, "zrangebyscore z a 3"), RANGE_FLOAT);
    assert_eq!(w(&mut e, c, "zrangebyscore z nan 3"), RANGE_FLOAT);
    assert_eq!(w(&mut e, c, "zrange z 1 [3 byscore"), RANGE_FLOAT);
    assert_eq!(w(&mut e, c, "zcount z -inf +inf"), int(7));
    assert_eq!(w(&mut e, c, "zcount z (1 3"), int(2));
    assert_eq!(w(&mut e, c, "zcount z 3 1"), int(0));
    assert_eq!(w(&mut e, c, "zcount nokey 1 3"), int(0));
    assert_eq!(w(&mut e, c, "zcount z a 3"), RANGE_FLOAT);
    w(&mut e, c, "hello 3");
    assert_eq!(
        w(&mut e, c, "zrangebyscore z 4 +inf withscores"),
        pairs3(&[("d", "4.5"), ("p", "inf")])
    );
}

#[test]
fn zrange_by_lex() {
    let (mut e, c) = setup();
    w(&mut e, c, "zadd z 0 a 0 b 0 c 0 d 0 e");
    assert_eq!(
        w(&mut e, c, "zrangebylex z - +"),
        arr(&["a", "b", "c", "d", "e"])
    );
    assert_eq!(w(&mut e, c, "zrangebylex z [b (d"), arr(&["b", "c"]));
    assert_eq!(w(&mut e, c, "zrangebylex z (b [d"), arr(&["c", "d"]));
    assert_eq!(w(&mut e, c, "zrangebylex z + -"), EMPTY);
    assert_eq!(w(&mut e, c, "zrangebylex z [d [b"), EMPTY);
    assert_eq!(
        w(&mut e, c, "zrangebylex z - + limit 1 2"),
        arr(&["b", "c"])
    );
    assert_eq!(
        w(&mut e, c, "zrevrangebylex z + - limit 0 2"),
        arr(&["e", "d"])
    );
    assert_eq!(
        w(&mut e, c, "zrevrangebylex z [d (a"),
        arr(&["d", "c", "b"])
    );
    assert_eq!(
        w(&mut e, c, "zrange z [c [a bylex rev"),
        arr(&["c", "b", "a"])
    );
    assert_eq!(
        w(&mut e, c, "zrange z + - bylex rev limit 1 2"),
        arr(&["d", "c"])
    );
    assert_eq!(w(&mut e, c, "zrange z [a [c bylex"), arr(&["a", "b", "c"]));
    assert_eq!(
        cmd(&mut e, c, &["zrangebylex", "z", "[", "(c"]),
        arr(&["a", "b"])
    );
    assert_eq!(w(&mut e, c, "zrangebylex z a c"), RANGE_LEX);
    assert_eq!(w(&mut e, c, "zrangebylex z -a +"), RANGE_LEX);
    assert_eq!(cmd(&mut e, c, &["zrangebylex", "z", "", "+"]), RANGE_LEX);
    assert_eq!(w(&mut e, c, "zrange z 0 1 bylex"), RANGE_LEX);
    assert_eq!(
        w(&mut e, c, "zrangebylex z - + withscores"),
        err("ERR syntax error, WITHSCORES not supported in combination with BYLEX")
    );
    assert_eq!(
        w(&mut e, c, "zrange z - + bylex withscores"),
        err("ERR syntax error, WITHSCORES not supported in combination with BYLEX")
    );
    assert_eq!(w(&mut e, c, "zlexcount z - +"), int(5));
    assert_eq!(w(&mut e, c, "zlexcount z [b (d"), int(2));
    assert_eq!(w(&mut e, c, "zlexcount nokey - +"), int(0));
    assert_eq!(w(&mut e, c, "zlexcount z a c"), RANGE_LEX);
}

#[test]
fn zrangestore() {
    let (mut e, c) = setup();
    w(&mut e, c, "zadd z 1 a 2 b 3 c");
    assert_eq!(w(&mut e, c, "zrangestore dst z 0 1"), int(2));
    assert_eq!(
        w(&mut e, c, "zrange dst 0 -1 withscores"),
        arr(&["a", "1", "b", "2"])
    );
    assert_eq!(w(&mut e, c, "zrangestore dst z 2 1 byscore rev"), int(2));
    assert_eq!(w(&mut e, c, "zrange dst 0 -1"), arr(&["a", "b"]));
    assert_eq!(
        w(&mut e, c, "zrangestore dst z [b + bylex limit 0 1"),
        int(1)
    );
    assert_eq!(w(&mut e, c, "zrange dst 0 -1"), arr(&["b"]));
    assert_eq!(w(&mut e, c, "zrangestore dst z 0 1 withscores"), SYNTAX);
    // An empty result deletes the destination, whatever it held.
    w(&mut e, c, "set str v");
    w(&mut e, c, "expire dst 100");
    assert_eq!(w(&mut e, c, "zrangestore str z 5 10"), int(0));
    assert_eq!(w(&mut e, c, "exists str"), int(0));
    assert_eq!(w(&mut e, c, "zrangestore dst nokey 0 -1"), int(0));
    assert_eq!(w(&mut e, c, "exists dst"), int(0));
    // The destination is replaced, TTL included; the source must be a zset.
    w(&mut e, c, "set dst v");
    w(&mut e, c, "expire dst 100");
    assert_eq!(w(&mut e, c, "zrangestore dst z 0 0"), int(1));
    assert_eq!(w(&mut e, c, "ttl dst"), int(-1));
    assert_eq!(w(&mut e, c, "type dst"), "+zset\r\n");
    w(&mut e, c, "set s v");
    assert_eq!(w(&mut e, c, "zrangestore dst s 0 -1"), WRONGTYPE);
    // Source and destination may be the same key.
    assert_eq!(w(&mut e, c, "zrangestore z z 1 -1"), int(2));
    assert_eq!(w(&mut e, c, "zrange z 0 -1"), arr(&["b", "c"]));
}

#[test]
fn zremrange() {
    let (mut e, c) = setup();
    w(&mut e, c, "zadd z 1 a 2 b 3 c 4 d 5 e");
    assert_eq!(w(&mut e, c, "zremrangebyrank z 0 0"), int(1));
    assert_eq!(w(&mut e, c, "zremrangebyrank z 10 20"), int(0));
    assert_eq!(w(&mut e, c, "zremrangebyrank z -1 -1"), int(1));
    assert_eq!(w(&mut e, c, "zremrangebyrank z x 1"), NOT_INT);
    assert_eq!(w(&mut e, c, "zrange z 0 -1"), arr(&["b", "c", "d"]));
    assert_eq!(w(&mut e, c, "zremrangebyscore z (2 3"), int(1));
    assert_eq!(w(&mut e, c, "zremrangebyscore z a 3"), RANGE_FLOAT);
    assert_eq!(w(&mut e, c, "zremrangebylex z [zz +"), int(0));
    assert_eq!(w(&mut e, c, "zremrangebylex z a +"), RANGE_LEX);
    assert_eq!(w(&mut e, c, "zremrangebyscore nokey 1 2"), int(0));
    assert_eq!(w(&mut e, c, "zremrangebyscore z -inf +inf"), int(2));
    assert_eq!(w(&mut e, c, "exists z"), int(0));
    w(&mut e, c, "zadd l 0 a 0 b 0 c");
    assert_eq!(w(&mut e, c, "zremrangebylex l (a +"), int(2));
    assert_eq!(w(&mut e, c, "zrange l 0 -1"), arr(&["a"]));
    w(&mut e, c, "set s v");
    assert_eq!(w(&mut e, c, "zremrangebyrank s 0 1"), WRONGTYPE);
}

#[test]
fn pops() {
    let (mut e, c) = setup();
    w(&mut e, c, "zadd z 1 a 2 b 3 c 4 d");
    assert_eq!(w(&mut e, c, "zpopmin z"), arr(&["a", "1"]));
    assert_eq!(w(&mut e, c, "zpopmax z 2"), arr(&["d", "4", "c", "3"]));
    assert_eq!(w(&mut e, c, "zpopmin z 0"), EMPTY);
    assert_eq!(
        w(&mut e, c, "zpopmin z -1"),
        err("ERR value is out of range, must be positive")
    );
    assert_eq!(
        w(&mut e, c, "zpopmin z x"),
        err("ERR value is out of range, must be positive")
    );
    assert_eq!(w(&mut e, c, "zpopmin z 1 2"), SYNTAX);
    assert_eq!(w(&mut e, c, "zpopmin z 10"), arr(&["b", "2"]));
    assert_eq!(w(&mut e, c, "exists z"), int(0));
    assert_eq!(w(&mut e, c, "zpopmin z"), EMPTY);
    assert_eq!(w(&mut e, c, "zpopmax nokey 3"), EMPTY);
    w(&mut e, c, "set s v");
    assert_eq!(w(&mut e, c, "zpopmin s"), WRONGTYPE);
    assert_eq!(w(&mut e, c, "zpopmin s 0"), WRONGTYPE);
    w(&mut e, c, "zadd z 1 a 2 b 3 c");
    w(&mut e, c, "hello 3");
    // RESP3: flat without COUNT, nested pairs with it (even COUNT 1).
    assert_eq!(w(&mut e, c, "zpopmin z"), "*2\r\n$1\r\na\r\n,1\r\n");
    assert_eq!(w(&mut e, c, "zpopmin z 1"), pairs3(&[("b", "2")]));
    assert_eq!(w(&mut e, c, "zpopmax z 5"), pairs3(&[("c", "3")]));
    assert_eq!(w(&mut e, c, "zpopmax z 5"), EMPTY);
}

#[test]
fn zmpop() {
    let (mut e, c) = setup();
    w(&mut e, c, "zadd z 1 a 2 b 3 c");
    assert_eq!(
        w(&mut e, c, "zmpop 0 z min"),
        err("ERR numkeys should be greater than 0")
    );
    assert_eq!(
        w(&mut e, c, "zmpop x z min"),
        err("ERR numkeys should be greater than 0")
    );
    assert_eq!(w(&mut e, c, "zmpop 2 z min"), SYNTAX);
    assert_eq!(w(&mut e, c, "zmpop 1 z foo"), SYNTAX);
    assert_eq!(
        w(&mut e, c, "zmpop 1 z min count 0"),
        err("ERR count should be greater than 0")
    );
    assert_eq!(w(&mut e, c, "zmpop 1 z min count 1 count 1"), SYNTAX);
    assert_eq!(w(&mut e, c, "zmpop 1 z min count"), SYNTAX);
    assert_eq!(w(&mut e, c, "zmpop 1 nokey min"), "*-1\r\n");
    let want = format!(
        "*2\r\n{}*2\r\n*2\r\n{}{}*2\r\n{}{}",
        bulk("z"),
        bulk("c"),
        bulk("3"),
        bulk("b"),
        bulk("2")
    );
    assert_eq!(w(&mut e, c, "zmpop 2 nokey z max count 2"), want);
    assert_eq!(
        w(&mut e, c, "zmpop 1 z MIN COUNT 10"),
        format!("*2\r\n{}*1\r\n*2\r\n{}{}", bulk("z"), bulk("a"), bulk("1"))
    );
    assert_eq!(w(&mut e, c, "exists z"), int(0));
    w(&mut e, c, "set s v");
    assert_eq!(w(&mut e, c, "zmpop 2 nokey s min"), WRONGTYPE);
    w(&mut e, c, "zadd z 1 a");
    w(&mut e, c, "hello 3");
    assert_eq!(
        w(&mut e, c, "zmpop 1 z min"),
        format!("*2\r\n{}*1\r\n*2\r\n{},1\r\n", bulk("z"), bulk("a"))
    );
    assert_eq!(w(&mut e, c, "zmpop 1 z min"), NULL3);
}

#[test]
fn set_algebra() {
    let (mut e, c) = setup();
    w(&mut e, c, "zadd a 1 x 2 y 3 z");
    w(&mut e, c, "zadd b 10 y 20 z 30 w");
    assert_eq!(
        w(&mut e, c, "zunion 2 a b withscores"),
        arr(&["x", "1", "y", "12", "z", "23", "w", "30"])
    );
    assert_eq!(
        w(&mut e, c, "zunion 2 a b weights 2 3 withscores"),
        arr(&["x", "2", "y", "34", "z", "66", "w", "90"])
    );
    assert_eq!(
        w(&mut e, c, "zunion 2 a b aggregate min withscores"),
        arr(&["x", "1", "y", "2", "z", "3", "w", "30"])
    );
    assert_eq!(
        w(&mut e, c, "zunion 2 a b aggregate max"),
        arr(&["x", "y", "z", "w"])
    );
    assert_eq!(
        w(&mut e, c, "zinter 2 a b withscores"),
        arr(&["y", "12", "z", "23"])
    );
    assert_eq!(w(&mut e, c, "zinter 2 a nokey withscores"), EMPTY);
    assert_eq!(w(&mut e, c, "zdiff 2 a b withscores"), arr(&["x", "1"]));
    assert_eq!(w(&mut e, c, "zdiff 1 a"), arr(&["x", "y", "z"]));
    assert_eq!(w(&mut e, c, "zdiff 2 a b weights 1 1"), SYNTAX);
    assert_eq!(w(&mut e, c, "zdiff 2 b nokey aggregate sum"), SYNTAX);
    assert_eq!(
        w(&mut e, c, "zunion 0 a"),
        err("ERR at least 1 input key is needed for 'zunion' command")
    );
    assert_eq!(
        w(&mut e, c, "zinterstore o -1 a"),
        err("ERR at least 1 input key is needed for 'zinterstore' command")
    );
    assert_eq!(w(&mut e, c, "zunion x a"), NOT_INT);
    assert_eq!(w(&mut e, c, "zunion 3 a b"), SYNTAX);
    assert_eq!(
        w(&mut e, c, "zunion 1 a weights x"),
        err("ERR weight value is not a float")
    );
    assert_eq!(w(&mut e, c, "zunion 2 a b weights 1"), SYNTAX);
    assert_eq!(w(&mut e, c, "zunion 1 a aggregate foo"), SYNTAX);
    assert_eq!(w(&mut e, c, "zunion 1 a aggregate"), SYNTAX);
    assert_eq!(w(&mut e, c, "zunionstore o 1 a withscores"), SYNTAX);
    // inf - inf sums to 0, and inf * 0 weighs 0.
    w(&mut e, c, "zadd i 1 p");
    w(&mut e, c, "zadd n -1 p");
    assert_eq!(
        w(&mut e, c, "zunion 2 i n weights inf inf withscores"),
        arr(&["p", "0"])
    );
    assert_eq!(
        w(&mut e, c, "zinter 2 i i weights 0 inf withscores"),
        arr(&["p", "inf"])
    );
    assert_eq!(
        w(&mut e, c, "zunion 1 i weights 0 withscores"),
        arr(&["p", "0"])
    );
    // Store forms.
    assert_eq!(w(&mut e, c, "zunionstore out 2 a b"), int(4));
    assert_eq!(
        w(&mut e, c, "zrange out 0 -1 withscores"),
        arr(&["x", "1", "y", "12", "z", "23", "w", "30"])
    );
    assert_eq!(w(&mut e, c, "zinterstore out 2 a b weights 1 -1"), int(2));
    assert_eq!(
        w(&mut e, c, "zrange out 0 -1 withscores"),
        arr(&["z", "-17", "y", "-8"])
    );
    assert_eq!(w(&mut e, c, "zdiffstore out 2 b a"), int(1));
    assert_eq!(
        w(&mut e, c, "zrange out 0 -1 withscores"),
        arr(&["w", "30"])
    );
    assert_eq!(w(&mut e, c, "zinterstore out 2 a nokey"), int(0));
    assert_eq!(w(&mut e, c, "exists out"), int(0));
    // The destination may be one of the inputs.
    assert_eq!(w(&mut e, c, "zunionstore a 2 a a"), int(3));
    assert_eq!(
        w(&mut e, c, "zrange a 0 -1 withscores"),
        arr(&["x", "2", "y", "4", "z", "6"])
    );
    assert_eq!(w(&mut e, c, "zintercard 2 a b"), int(2));
    assert_eq!(w(&mut e, c, "zintercard 2 a b limit 1"), int(1));
    assert_eq!(w(&mut e, c, "zintercard 2 a b limit 0"), int(2));
    assert_eq!(
        w(&mut e, c, "zintercard 2 a b limit -1"),
        err("ERR LIMIT can't be negative")
    );
    assert_eq!(
        w(&mut e, c, "zintercard 2 a b limit x"),
        err("ERR LIMIT can't be negative")
    );
    assert_eq!(w(&mut e, c, "zintercard 2 a b withscores"), SYNTAX);
    assert_eq!(
        w(&mut e, c, "zintercard 0 a"),
        err("ERR at least 1 input key is needed for 'zintercard' command")
    );
    w(&mut e, c, "set s v");
    assert_eq!(w(&mut e, c, "zunion 2 a s"), WRONGTYPE);
    // The type check comes before option parsing.
    assert_eq!(w(&mut e, c, "zunion 2 a s bogus"), WRONGTYPE);
    assert_eq!(w(&mut e, c, "zunionstore out 1 s"), WRONGTYPE);
    w(&mut e, c, "hello 3");
    assert_eq!(
        w(&mut e, c, "zinter 2 a b withscores"),
        pairs3(&[("y", "14"), ("z", "26")])
    );
}

#[test]
fn zrandmember() {
    let (mut e, c) = setup();
    assert_eq!(w(&mut e, c, "zrandmember nokey"), NIL);
    assert_eq!(w(&mut e, c, "zrandmember nokey 5"), EMPTY);
    w(&mut e, c, "zadd z 1 a 2 b 3 c");
    let one = w(&mut e, c, "zrandmember z");
    assert!([bulk("a"), bulk("b"), bulk("c")].contains(&one), "{one}");
    assert_eq!(w(&mut e, c, "zrandmember z 0"), EMPTY);
    // At least the whole set: all of it, highest first (Valkey's iterator).
    assert_eq!(
        w(&mut e, c, "zrandmember z 10 withscores"),
        arr(&["c", "3", "b", "2", "a", "1"])
    );
    assert_eq!(w(&mut e, c, "zrandmember z 3"), arr(&["c", "b", "a"]));
    let r = w(&mut e, c, "zrandmember z -5");
    assert!(r.starts_with("*5\r\n"), "{r}");
    let r = w(&mut e, c, "zrandmember z 2");
    assert!(r.starts_with("*2\r\n"), "{r}");
    let r = w(&mut e, c, "zrandmember z -2 withscores");
    assert!(r.starts_with("*4\r\n"), "{r}");
    assert_eq!(w(&mut e, c, "zrandmember z 1 foo"), SYNTAX);
    assert_eq!(w(&mut e, c, "zrandmember z 1 withscores x"), SYNTAX);
    assert_eq!(w(&mut e, c, "zrandmember z x"), NOT_INT);
    assert_eq!(
        w(&mut e, c, "zrandmember z -9223372036854775808"),
        err(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
        )
    );
    assert_eq!(
        w(&mut e, c, "zrandmember z 9223372036854775807 withscores"),
        err("ERR value is out of range")
    );
    w(&mut e, c, "set s v");
    assert_eq!(w(&mut e, c, "zrandmember s"), WRONGTYPE);
    w(&mut e, c, "hello 3");
    assert_eq!(
        w(&mut e, c, "zrandmember z 3 withscores"),
        pairs3(&[("c", "3"), ("b", "2"), ("a", "1")])
    );
    let r = w(&mut e, c, "zrandmember z -1 withscores");
    assert!(r.starts_with("*1\r\n*2\r\n"), "{r}");
}

#[test]
fn zscan() {
    let (mut e, c) = setup();
    assert_eq!(
        w(&mut e, c, "zscan nokey 0"),
        format!("*2\r\n{}*0\r\n", bulk("0"))
    );
    w(&mut e, c, "zadd z 1 a 2.5 b 0.1 c");
    assert_eq!(
        w(&mut e, c, "zscan z 0"),
        format!(
            "*2\r\n{}{}",
            bulk("0"),
            arr(&["c", "0.1", "a", "1", "b", "2.5"])
        )
    );
    assert_eq!(
        w(&mut e, c, "zscan z 0 match [ab] count 1"),
        format!("*2\r\n{}{}", bulk("0"), arr(&["a", "1", "b", "2.5"]))
    );
    assert_eq!(
        w(&mut e, c, "zscan z 0 noscores"),
        format!("*2\r\n{}{}", bulk("0"), arr(&["c", "a", "b"]))
    );
    assert_eq!(w(&mut e, c, "zscan z x"), err("ERR invalid cursor"));
    assert_eq!(w(&mut e, c, "zscan z 0 count 0"), SYNTAX);
    assert_eq!(w(&mut e, c, "zscan z 0 count x"), NOT_INT);
    assert_eq!(w(&mut e, c, "zscan z 0 foo"), SYNTAX);
    assert_eq!(
        w(&mut e, c, "zscan z 0 novalues"),
        err("ERR NOVALUES option can only be used in HSCAN")
    );
    w(&mut e, c, "set s v");
    assert_eq!(w(&mut e, c, "zscan s 0"), WRONGTYPE);
    // The large encoding: a full cursor walk sees every member once, and
    // prints scores with %.17g as Valkey's hashtable scan does.
    w(&mut e, c, "config set zset-max-listpack-entries 4");
    for i in 0..100 {
        cmd(
            &mut e,
            c,
            &["zadd", "big", &format!("{i}.1"), &format!("m{i}")],
        );
    }
    assert_eq!(encoding(&mut e, c, "big"), "skiplist");
    let mut cursor = "0".to_string();
    let mut seen = std::collections::BTreeMap::new();
    loop {
        let r = cmd(&mut e, c, &["zscan", "big", &cursor, "count", "7"]);
        let lines: Vec<&str> = r.split("\r\n").collect();
        cursor = lines[2].to_string();
        let n: usize = lines[3][1..].parse().unwrap();
        for k in 0..n / 2 {
            let m = lines[5 + 4 * k].to_string();
            let s = lines[7 + 4 * k].to_string();
            assert!(seen.insert(m, s).is_none());
        }
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 100);
    assert_eq!(seen["m0"], "0.10000000000000001");
    assert_eq!(seen["m2"], "2.1000000000000001");
}

#[test]
fn encodings_and_conversion() {
    let (mut e, c) = setup();
    w(&mut e, c, "zadd z 1 a 2 b");
    assert_eq!(encoding(&mut e, c, "z"), "listpack");
    assert_eq!(w(&mut e, c, "type z"), "+zset\r\n");
    let long = "x".repeat(65);
    cmd(&mut e, c, &["zadd", "z", "3", &long]);
    assert_eq!(encoding(&mut e, c, "z"), "skiplist");
    // Never back, even when small again.
    cmd(&mut e, c, &["zrem", "z", &long]);
    assert_eq!(encoding(&mut e, c, "z"), "skiplist");
    assert_eq!(
        w(&mut e, c, "zrange z 0 -1 withscores"),
        arr(&["a", "1", "b", "2"])
    );
    // 129 members converts; ZADD of more pairs than the limit creates a
    // skiplist up front, as Valkey's zsetTypeCreate does.
    for i in 0..128 {
        cmd(&mut e, c, &["zadd", "n", &i.to_string(), &format!("m{i}")]);
    }
    assert_eq!(encoding(&mut e, c, "n"), "listpack");
    w(&mut e, c, "zadd n 1000 m128");
    assert_eq!(encoding(&mut e, c, "n"), "skiplist");
    assert_eq!(w(&mut e, c, "zcard n"), int(129));
    assert_eq!(w(&mut e, c, "zrank n m64"), int(64));
    assert_eq!(w(&mut e, c, "zrevrange n 0 1"), arr(&["m128", "m127"]));
    // A *STORE result is encoded for its size.
    assert_eq!(w(&mut e, c, "zrangestore small n 0 9"), int(10));
    assert_eq!(encoding(&mut e, c, "small"), "listpack");
    assert_eq!(w(&mut e, c, "zunionstore u 1 n"), int(129));
    assert_eq!(encoding(&mut e, c, "u"), "skiplist");
    w(&mut e, c, "config set zset-max-listpack-entries 0");
    w(&mut e, c, "zadd zero 1 a");
    assert_eq!(encoding(&mut e, c, "zero"), "skiplist");
    w(&mut e, c, "config set zset-max-listpack-entries 128");
    w(&mut e, c, "config set zset-max-listpack-value 3");
    w(&mut e, c, "zadd v 1 abc");
    assert_eq!(encoding(&mut e, c, "v"), "listpack");
    w(&mut e, c, "zadd v 1 abcd");
    assert_eq!(encoding(&mut e, c, "v"), "skiplist");
}

/// The same script on both encodings gives the same replies.
#[test]
fn skiplist_matches_listpack() {
    let script = [
        "zadd z 5 e 1 a 3 c 2 b 4 d 3 cc -inf m +inf p 0 zero",
        "zrange z 0 -1 withscores",
        "zrange z 2 5 rev withscores",
        "zrangebyscore z (1 4 withscores limit 1 3",
        "zrevrangebyscore z +inf 3 limit 1 2",
        "zrangebylex z - +",
        "zrank z cc",
        "zrevrank z cc withscore",
        "zcount z 2 3",
        "zremrangebyrank z 0 1",
        "zremrangebyscore z 4 4",
        "zpopmax z 2",
        "zpopmin z",
        "zincrby z 10 b",
        "zadd z gt ch 100 cc 0 c",
        "zrange z 0 -1 withscores",
        "zunion 2 z z withscores",
        "zinter 2 z z aggregate max withscores",
        "zdiff 2 z nokey",
        "zrandmember z 100 withscores",
        "zmscore z b cc nope",
        "zcard z",
    ];
    let mut outs = Vec::new();
    for entries in ["128", "0"] {
        let (mut e, c) = setup();
        w(
            &mut e,
            c,
            &format!("config set zset-max-listpack-entries {entries}"),
        );
        let out: Vec<String> = script.iter().map(|l| w(&mut e, c, l)).collect();
        assert_eq!(
            encoding(&mut e, c, "z"),
            if entries == "0" {
                "skiplist"
            } else {
                "listpack"
            }
        );
        outs.push(out);
    }
    for (i, l) in script.iter().enumerate() {
        assert_eq!(outs[0][i], outs[1][i], "{l}");
    }
}

#[test]
fn generic_commands_on_zsets() {
    let (mut e, c) = setup();
    w(&mut e, c, "zadd z 1 a 2 b");
    assert_eq!(w(&mut e, c, "copy z z2"), int(1));
    assert_eq!(w(&mut e, c, "zadd z2 3 c"), int(1));
    assert_eq!(w(&mut e, c, "zcard z"), int(2));
    assert_eq!(w(&mut e, c, "rename z2 z3"), "+OK\r\n");
    assert_eq!(w(&mut e, c, "zrange z3 0 -1"), arr(&["a", "b", "c"]));
    assert_eq!(w(&mut e, c, "move z3 1"), int(1));
    assert_eq!(w(&mut e, c, "del z"), int(1));
    assert_eq!(w(&mut e, c, "zcard z"), int(0));
}

#[test]
fn command_docs_know_zsets() {
    let (mut e, c) = setup();
    let r = w(&mut e, c, "command info zadd zunion zrangestore");
    assert!(r.starts_with("*3\r\n*10\r\n$4\r\nzadd\r\n:-4\r\n"), "{r}");
    assert!(r.contains("@sortedset"), "{r}");
    let r = w(&mut e, c, "command docs zrange");
    assert!(r.contains("sorted-set"), "{r}");
    assert!(r.contains("BYSCORE"), "{r}");
}

// ---- blocking pops ----------------------------------------------------------

/// Output delivered out of band (unblocked replies), per client.
fn delivered(e: &mut engine::Engine) -> Vec<(engine::ClientId, String)> {
    let mut v = Vec::new();
    e.drain_output(|id, b| v.push((id, String::from_utf8_lossy(b).into_owned())));
    v
}

#[test]
fn bzpop_serves_at_once_when_a_key_has_members() {
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["ZADD", "z2", "1", "a", "2", "b"]);
    // The first non-empty key in argument order is served.
    assert_eq!(
        cmd(&mut e, c, &["BZPOPMIN", "z1", "z2", "0"]),
        arr(&["z2", "a", "1"])
    );
    assert_eq!(
        cmd(&mut e, c, &["BZPOPMAX", "z2", "0"]),
        arr(&["z2", "b", "2"])
    );
    assert_eq!(cmd(&mut e, c, &["EXISTS", "z2"]), int(0));
    cmd(&mut e, c, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    assert_eq!(
        cmd(
            &mut e,
            c,
            &["BZMPOP", "0", "2", "none", "z", "MAX", "COUNT", "2"]
        ),
        "*2\r\n$1\r\nz\r\n*2\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n"
    );
}

#[test]
fn bzpop_blocks_until_a_write_and_serves_first_blocked_first() {
    let mut e = engine();
    let a = connect(&mut e);
    let b = connect(&mut e);
    let w = connect(&mut e);
    // Nothing to pop: no reply now, the clients are blocked.
    assert_eq!(cmd(&mut e, a, &["BZPOPMIN", "z", "other", "0"]), "");
    assert_eq!(cmd(&mut e, b, &["BZPOPMIN", "z", "0"]), "");
    assert!(cmd(&mut e, w, &["INFO", "clients"]).contains("blocked_clients:2"));
    // A write that is not an add to the key wakes nobody.
    cmd(&mut e, w, &["SET", "unrelated", "1"]);
    assert!(delivered(&mut e).is_empty());
    // One member: the first blocked client gets it, the second waits on.
    assert_eq!(cmd(&mut e, w, &["ZADD", "z", "5", "x"]), int(1));
    assert_eq!(delivered(&mut e), vec![(a, arr(&["z", "x", "5"]))]);
    let ev = events(&mut e);
    assert!(
        ev.contains(&engine::Event::Unblocked { client: a }),
        "{ev:?}"
    );
    assert_eq!(cmd(&mut e, w, &["EXISTS", "z"]), int(0));
    assert_eq!(cmd(&mut e, w, &["ZADD", "z", "7", "y"]), int(1));
    assert_eq!(delivered(&mut e), vec![(b, arr(&["z", "y", "7"]))]);
    assert!(cmd(&mut e, w, &["INFO", "clients"]).contains("blocked_clients:0"));
}

#[test]
fn bzmpop_wakes_with_count_and_bzpopmax_on_the_written_key() {
    let mut e = engine();
    let a = connect(&mut e);
    let b = connect(&mut e);
    let w = connect(&mut e);
    assert_eq!(
        cmd(
            &mut e,
            a,
            &["BZMPOP", "0", "2", "z1", "z2", "MIN", "COUNT", "5"]
        ),
        ""
    );
    assert_eq!(cmd(&mut e, b, &["BZPOPMAX", "z2", "0"]), "");
    cmd(&mut e, w, &["ZADD", "z2", "1", "a", "2", "b"]);
    // a blocked first and takes both members; b finds nothing and waits.
    assert_eq!(
        delivered(&mut e),
        vec![(
            a,
            "*2\r\n$2\r\nz2\r\n*2\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n"
                .to_string()
        )]
    );
    assert!(cmd(&mut e, w, &["INFO", "clients"]).contains("blocked_clients:1"));
    cmd(&mut e, w, &["ZADD", "z2", "1e100", "big"]);
    assert_eq!(delivered(&mut e), vec![(b, arr(&["z2", "big", "1e+100"]))]);
}

#[test]
fn bzpop_times_out_with_a_null_array() {
    let mut e = engine();
    let a = connect(&mut e);
    assert_eq!(cmd(&mut e, a, &["BZPOPMIN", "z", "0.01"]), "");
    std::thread::sleep(std::time::Duration::from_millis(30));
    e.expire_blocked();
    assert_eq!(delivered(&mut e), vec![(a, "*-1\r\n".to_string())]);
    // RESP3: the null type.
    cmd(&mut e, a, &["HELLO", "3"]);
    assert_eq!(cmd(&mut e, a, &["BZMPOP", "0.01", "1", "z", "MIN"]), "");
    std::thread::sleep(std::time::Duration::from_millis(30));
    e.expire_blocked();
    assert_eq!(delivered(&mut e), vec![(a, NULL3.to_string())]);
}

#[test]
fn bzpop_client_unblock_and_disconnect() {
    let mut e = engine();
    let a = connect(&mut e);
    let b = connect(&mut e);
    let w = connect(&mut e);
    assert_eq!(cmd(&mut e, a, &["BZPOPMIN", "z", "0"]), "");
    assert_eq!(cmd(&mut e, b, &["BZPOPMIN", "z", "0"]), "");
    e.disconnect(a);
    // The vanished client is forgotten: b, the next in line, is served.
    cmd(&mut e, w, &["ZADD", "z", "1", "m"]);
    assert_eq!(delivered(&mut e), vec![(b, arr(&["z", "m", "1"]))]);
    assert_eq!(cmd(&mut e, b, &["BZPOPMIN", "z", "0"]), "");
    let id_b = cmd(&mut e, b, &["CLIENT", "ID"]);
    let id_b = id_b.trim_start_matches(':').trim_end();
    assert_eq!(
        cmd(&mut e, w, &["CLIENT", "UNBLOCK", id_b, "ERROR"]),
        int(1)
    );
    assert_eq!(
        delivered(&mut e),
        vec![(
            b,
            "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n".to_string()
        )]
    );
}

#[test]
fn bzpop_errors() {
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["SET", "s", "x"]);
    assert_eq!(
        cmd(&mut e, c, &["BZPOPMIN", "z", "-1"]),
        "-ERR timeout is negative\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["BZPOPMIN", "z", "abc"]),
        "-ERR timeout is not a float or out of range\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["BZPOPMAX", "nokey", "s", "0"]), WRONGTYPE);
    // BZMPOP checks numkeys, MIN|MAX and COUNT before the timeout.
    assert_eq!(
        cmd(&mut e, c, &["BZMPOP", "abc", "0", "z", "MIN"]),
        "-ERR numkeys should be greater than 0\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["BZMPOP", "abc", "1", "z", "SIDEWAYS"]),
        SYNTAX
    );
    assert_eq!(
        cmd(&mut e, c, &["BZMPOP", "0", "1", "z", "MIN", "COUNT", "0"]),
        "-ERR count should be greater than 0\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["BZMPOP", "abc", "1", "z", "MIN"]),
        "-ERR timeout is not a float or out of range\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["BZMPOP", "0", "1", "s", "MIN"]), WRONGTYPE);
}

#[test]
fn bzpop_in_multi_replies_at_once_and_exec_wakes_after_it_ends() {
    let mut e = engine();
    let a = connect(&mut e);
    let w = connect(&mut e);
    // Inside EXEC a blocking pop cannot block: it replies as a timeout.
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["BZPOPMIN", "z", "0"]);
    assert_eq!(cmd(&mut e, a, &["EXEC"]), "*1\r\n*-1\r\n");
    // A waiter woken by a transaction sees its final state: the ZADD and
    // the ZREM of the same EXEC leave only "b".
    assert_eq!(cmd(&mut e, a, &["BZPOPMIN", "z", "0"]), "");
    cmd(&mut e, w, &["MULTI"]);
    cmd(&mut e, w, &["ZADD", "z", "1", "a", "2", "b"]);
    cmd(&mut e, w, &["ZREM", "z", "a"]);
    assert!(delivered(&mut e).is_empty());
    assert_eq!(cmd(&mut e, w, &["EXEC"]), "*2\r\n:2\r\n:1\r\n");
    assert_eq!(delivered(&mut e), vec![(a, arr(&["z", "b", "2"]))]);
}
