//! A dataset holding every type in every encoding, and a client's view of
//! a server's data to compare two servers (or one before and after a
//! restart) key by key.

use crate::v::{strings, text};
use crate::{q, query};
use std::collections::BTreeMap;

/// Every type in every encoding a server picks at default limits, with
/// TTLs and several databases.
pub fn fill(c: &mut redis::Connection) {
    let ok_or = |r: Result<redis::Value, String>| r.expect("fill command");
    ok_or(q(c, "SELECT 0"));
    ok_or(q(c, "SET s:int 12345"));
    ok_or(q(c, "SET s:neg -9223372036854775808"));
    ok_or(q(c, "SET s:short hello"));
    ok_or(query(c, &["SET", "s:long", &"abcdefghij".repeat(10)]));
    ok_or(query(c, &["SET", "s:big", &"z".repeat(20_000)]));
    ok_or(query(c, &["SET", "s:bin", "\u{0}\u{1}\u{ff}x"]));
    ok_or(q(c, "SET s:ttl v PX 5000000"));
    ok_or(q(c, "RPUSH l:small a b 1 2 -3 99999999999"));
    let many: Vec<String> = (0..300).map(|i| format!("element-{i}")).collect();
    let mut args = vec!["RPUSH", "l:big"];
    args.extend(many.iter().map(String::as_str));
    ok_or(query(c, &args));
    ok_or(q(c, "SADD set:int 1 2 3 -100 70000 5000000000"));
    ok_or(q(c, "SADD set:lp a b c 1"));
    let mut args = vec!["SADD", "set:ht"];
    args.extend(many.iter().map(String::as_str));
    ok_or(query(c, &args));
    ok_or(q(c, "ZADD z:lp 1 a 2.5 b -3 c 0 d"));
    ok_or(q(c, "ZADD z:inf +inf top -inf bottom 1e-5 tiny"));
    let mut args = vec!["ZADD".to_string(), "z:sl".to_string()];
    for (i, m) in many.iter().enumerate() {
        args.push(format!("{}", i as f64 * 0.25 - 10.0));
        args.push(m.clone());
    }
    ok_or(query(
        c,
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    ));
    ok_or(q(c, "HSET h:lp f1 v1 f2 2 f3 -3"));
    let mut args = vec!["HSET".to_string(), "h:ht".to_string()];
    for m in &many {
        args.push(m.clone());
        args.push(format!("value of {m}"));
    }
    ok_or(query(
        c,
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    ));
    ok_or(q(c, "EXPIRE h:ht 100000"));
    ok_or(q(c, "SELECT 3"));
    ok_or(q(c, "SET db3:key in-db-3"));
    ok_or(q(c, "RPUSH db3:list x y z"));
    ok_or(q(c, "SELECT 0"));
}

/// What a client sees of the first databases: per key its type, encoding,
/// value (collections sorted) and whether it has a TTL.
pub fn view(c: &mut redis::Connection) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for db in 0..4 {
        q(c, &format!("SELECT {db}")).unwrap();
        let keys = strings(&q(c, "KEYS *"));
        for k in keys {
            let t = text(&query(c, &["TYPE", &k]));
            let enc = text(&query(c, &["OBJECT", "ENCODING", &k]));
            let value = match t.as_str() {
                "string" => text(&query(c, &["GET", &k])),
                "list" => strings(&query(c, &["LRANGE", &k, "0", "-1"])).join(","),
                "set" => {
                    let mut m = strings(&query(c, &["SMEMBERS", &k]));
                    m.sort();
                    m.join(",")
                }
                "zset" => strings(&query(c, &["ZRANGE", &k, "0", "-1", "WITHSCORES"])).join(","),
                "hash" => {
                    let mut m: Vec<String> = strings(&query(c, &["HGETALL", &k]))
                        .chunks(2)
                        .map(|p| format!("{}={}", p[0], p[1]))
                        .collect();
                    m.sort();
                    m.join(",")
                }
                other => panic!("unexpected type {other}"),
            };
            let ttl = match query(c, &["PTTL", &k]) {
                Ok(redis::Value::Int(t)) if t > 0 => "ttl",
                _ => "persist",
            };
            out.insert(format!("{db}:{k}"), format!("{t}/{enc}/{ttl}/{value}"));
        }
    }
    q(c, "SELECT 0").unwrap();
    out
}
