//! A dataset holding every type in every encoding, and a client's view of
//! a server's data to compare two servers (or one before and after a
//! restart) key by key.

use crate::v::{strings, text};
use crate::{Rng, q, query};
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

/// One random write (or a few, in MULTI) over a small set of keys of
/// every type, with the commands whose effects are rewritten (relative
/// expiries, SPOP, INCRBYFLOAT, served blocking pops, ...) well
/// represented. Errors (WRONGTYPE) are part of the mix.
pub fn random_write(c: &mut redis::Connection, rng: &mut Rng) {
    let k = |rng: &mut Rng, p: &str| format!("{p}{}", rng.below(6));
    let n = |rng: &mut Rng| rng.below(20).to_string();
    let line: Vec<String> = match rng.below(34) {
        0 => vec!["SET".into(), k(rng, "s"), n(rng)],
        1 => vec![
            "SET".into(),
            k(rng, "s"),
            n(rng),
            "EX".into(),
            "1000".into(),
        ],
        2 => vec![
            "SET".into(),
            k(rng, "s"),
            n(rng),
            "PX".into(),
            (1 + rng.below(30)).to_string(),
        ],
        3 => vec![
            "SET".into(),
            k(rng, "s"),
            n(rng),
            "KEEPTTL".into(),
            "GET".into(),
        ],
        4 => vec!["SETEX".into(), k(rng, "s"), "500".into(), n(rng)],
        5 => vec!["INCRBYFLOAT".into(), k(rng, "s"), "1.5".into()],
        6 => vec!["APPEND".into(), k(rng, "s"), "x".into()],
        7 => vec!["GETEX".into(), k(rng, "s"), "EX".into(), "700".into()],
        8 => vec!["GETEX".into(), k(rng, "s"), "PERSIST".into()],
        9 => vec!["EXPIRE".into(), k(rng, "s"), "900".into()],
        10 => vec![
            "PEXPIRE".into(),
            k(rng, "l"),
            (1 + rng.below(30)).to_string(),
        ],
        11 => vec!["EXPIREAT".into(), k(rng, "h"), "1".into()],
        12 => vec!["GETDEL".into(), k(rng, "s")],
        13 => vec!["RPUSH".into(), k(rng, "l"), n(rng), n(rng)],
        14 => vec!["LPOP".into(), k(rng, "l")],
        15 => vec!["BLPOP".into(), k(rng, "l"), "0.01".into()],
        16 => vec![
            "LMPOP".into(),
            "2".into(),
            k(rng, "l"),
            k(rng, "l"),
            "RIGHT".into(),
            "COUNT".into(),
            "2".into(),
        ],
        17 => vec![
            "LMOVE".into(),
            k(rng, "l"),
            k(rng, "l"),
            "LEFT".into(),
            "RIGHT".into(),
        ],
        18 => vec!["SADD".into(), k(rng, "t"), n(rng), n(rng), n(rng)],
        19 => vec!["SPOP".into(), k(rng, "t")],
        20 => vec!["SPOP".into(), k(rng, "t"), "2".into()],
        21 => vec!["SMOVE".into(), k(rng, "t"), k(rng, "t"), n(rng)],
        22 => vec!["ZADD".into(), k(rng, "z"), n(rng), n(rng)],
        23 => vec!["ZINCRBY".into(), k(rng, "z"), "2.5".into(), n(rng)],
        24 => vec!["BZPOPMIN".into(), k(rng, "z"), "0.01".into()],
        25 => vec!["ZPOPMAX".into(), k(rng, "z"), "2".into()],
        26 => vec!["HSET".into(), k(rng, "h"), n(rng), n(rng)],
        27 => vec!["HINCRBYFLOAT".into(), k(rng, "h"), n(rng), "0.25".into()],
        28 => vec!["HDEL".into(), k(rng, "h"), n(rng)],
        29 => vec!["DEL".into(), k(rng, "s"), k(rng, "l")],
        30 => vec!["RENAME".into(), k(rng, "t"), k(rng, "t")],
        31 => vec!["MOVE".into(), k(rng, "s"), "1".into()],
        32 => vec!["SELECT".into(), rng.below(2).to_string()],
        _ => {
            let _ = q(c, "MULTI");
            for _ in 0..1 + rng.below(3) {
                random_write(c, rng);
            }
            vec!["EXEC".into()]
        }
    };
    let refs: Vec<&str> = line.iter().map(String::as_str).collect();
    let _ = query(c, &refs);
}

/// `view` without OBJECT ENCODING: servers may load the same data into
/// other encodings (Valkey turns int-only listpack sets into intsets).
pub fn plain_view(c: &mut redis::Connection) -> BTreeMap<String, String> {
    view(c)
        .into_iter()
        .map(|(k, v)| {
            let mut f: Vec<&str> = v.splitn(4, '/').collect();
            f.remove(1);
            (k, f.join("/"))
        })
        .collect()
}
