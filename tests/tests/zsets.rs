//! Sorted-set commands against the real binary: replies through the `redis`
//! crate, the RESP3 wire shapes through a raw socket, encodings, generic
//! key commands on sorted sets, and Valkey's exact errors.

use ringkv_e2e::v::{bulk, err, int, nil, ok, strings};
use ringkv_e2e::{Reply, e2e, q, query};

const SYNTAX: &str = "ERR syntax error";
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn sv(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

e2e!(
    fn zadd_zrange_basics(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "ZADD z 1 a 2 b 3 c"), int(3));
        assert_eq!(q(c, "ZADD z 1 a 5 b 4 d"), int(1));
        assert_eq!(q(c, "ZCARD z"), int(4));
        assert_eq!(q(c, "ZSCORE z b"), bulk("5"));
        assert_eq!(q(c, "ZSCORE z nope"), nil());
        assert_eq!(strings(&q(c, "ZRANGE z 0 -1 WITHSCORES")), sv(&["a", "1", "c", "3", "d", "4", "b", "5"]));
        assert_eq!(strings(&q(c, "ZREVRANGE z 0 1")), sv(&["b", "d"]));
        assert_eq!(strings(&q(c, "ZRANGE z (1 4 BYSCORE LIMIT 1 5")), sv(&["d"]));
        assert_eq!(strings(&q(c, "ZRANGE z +inf -inf BYSCORE REV LIMIT 0 2")), sv(&["b", "d"]));
        assert_eq!(strings(&q(c, "ZRANGEBYSCORE z -inf (4 WITHSCORES")), sv(&["a", "1", "c", "3"]));
        assert_eq!(q(c, "ZRANK z c"), int(1));
        assert_eq!(q(c, "ZREVRANK z c"), int(2));
        assert_eq!(q(c, "ZCOUNT z 2 4"), int(2));
        assert_eq!(q(c, "ZINCRBY z 1.5 a"), bulk("2.5"));
        assert_eq!(q(c, "ZADD z INCR 1 a"), bulk("3.5"));
        assert_eq!(q(c, "ZADD z XX INCR 1 nope"), nil());
        assert_eq!(strings(&q(c, "ZMSCORE z a nope")), sv(&["3.5", "(nil)"]));
        assert_eq!(q(c, "ZREM z a nope"), int(1));
        assert_eq!(strings(&q(c, "ZPOPMIN z")), sv(&["c", "3"]));
        assert_eq!(strings(&q(c, "ZPOPMAX z 5")), sv(&["b", "5", "d", "4"]));
        assert_eq!(q(c, "EXISTS z"), int(0));
        assert_eq!(q(c, "ZADD z 0 a 0 b 0 c 0 d"), int(4));
        assert_eq!(strings(&q(c, "ZRANGEBYLEX z [b (d")), sv(&["b", "c"]));
        assert_eq!(strings(&q(c, "ZREVRANGEBYLEX z + - LIMIT 1 2")), sv(&["c", "b"]));
        assert_eq!(q(c, "ZLEXCOUNT z - +"), int(4));
        assert_eq!(q(c, "ZREMRANGEBYLEX z - (b"), int(1));
        assert_eq!(q(c, "ZREMRANGEBYRANK z -1 -1"), int(1));
        assert_eq!(q(c, "ZREMRANGEBYSCORE z -inf +inf"), int(2));
        assert_eq!(q(c, "EXISTS z"), int(0));
    }
);

e2e!(
    fn zset_errors(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "ZADD z NX XX 1 a"), err("ERR XX and NX options at the same time are not compatible"));
        assert_eq!(q(c, "ZADD z GT LT 1 a"), err("ERR GT, LT, and/or NX options at the same time are not compatible"));
        assert_eq!(q(c, "ZADD z INCR 1 a 2 b"), err("ERR INCR option supports a single increment-element pair"));
        assert_eq!(q(c, "ZADD z x a"), err("ERR value is not a valid float"));
        assert_eq!(q(c, "ZADD z 1 a 2"), err(SYNTAX));
        assert_eq!(q(c, "ZADD inf 1 a"), int(1));
        assert_eq!(q(c, "ZADD inf INCR +inf a"), bulk("inf"));
        assert_eq!(q(c, "ZINCRBY inf -inf a"), err("ERR resulting score is not a number (NaN)"));
        assert_eq!(q(c, "ZRANGEBYSCORE inf a 1"), err("ERR min or max is not a float"));
        assert_eq!(q(c, "ZRANGEBYLEX inf a +"), err("ERR min or max not valid string range item"));
        assert_eq!(
            q(c, "ZRANGE inf 0 1 LIMIT 0 1"),
            err("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
        );
        assert_eq!(
            q(c, "ZRANGE inf - + BYLEX WITHSCORES"),
            err("ERR syntax error, WITHSCORES not supported in combination with BYLEX")
        );
        assert_eq!(q(c, "ZUNION 1 inf WEIGHTS x"), err("ERR weight value is not a float"));
        assert_eq!(q(c, "ZUNION 0 inf"), err("ERR at least 1 input key is needed for 'zunion' command"));
        assert_eq!(q(c, "ZMPOP 0 inf MIN"), err("ERR numkeys should be greater than 0"));
        assert_eq!(q(c, "ZPOPMIN inf -1"), err("ERR value is out of range, must be positive"));
        assert_eq!(q(c, "ZINTERCARD 1 inf LIMIT -1"), err("ERR LIMIT can't be negative"));
        assert_eq!(q(c, "ZSCAN inf x"), err("ERR invalid cursor"));
        assert_eq!(q(c, "SET s v"), ok());
        for cmd in [
            "ZADD s 1 a",
            "ZSCORE s a",
            "ZRANGE s 0 -1",
            "ZPOPMIN s",
            "ZUNION 1 s",
            "ZRANGESTORE d s 0 -1",
            "ZSCAN s 0",
            "ZRANDMEMBER s",
        ] {
            assert_eq!(q(c, cmd), err(WRONGTYPE), "{cmd}");
        }
        assert_eq!(q(c, "ZADD"), err("ERR wrong number of arguments for 'zadd' command"));
    }
);

e2e!(
    fn set_algebra_and_store(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "ZADD a 1 x 2 y 3 z"), int(3));
        assert_eq!(q(c, "ZADD b 10 y 20 z 30 w"), int(3));
        assert_eq!(strings(&q(c, "ZUNION 2 a b WITHSCORES")), sv(&["x", "1", "y", "12", "z", "23", "w", "30"]));
        assert_eq!(strings(&q(c, "ZINTER 2 a b WEIGHTS 2 1 AGGREGATE MAX WITHSCORES")), sv(&["y", "10", "z", "20"]));
        assert_eq!(strings(&q(c, "ZDIFF 2 a b")), sv(&["x"]));
        assert_eq!(q(c, "ZUNIONSTORE u 2 a b AGGREGATE MIN"), int(4));
        assert_eq!(strings(&q(c, "ZRANGE u 0 -1 WITHSCORES")), sv(&["x", "1", "y", "2", "z", "3", "w", "30"]));
        assert_eq!(q(c, "ZINTERSTORE i 2 a b"), int(2));
        assert_eq!(q(c, "ZDIFFSTORE d 2 b a"), int(1));
        assert_eq!(strings(&q(c, "ZRANGE d 0 -1 WITHSCORES")), sv(&["w", "30"]));
        assert_eq!(q(c, "ZINTERSTORE d 2 a nokey"), int(0));
        assert_eq!(q(c, "EXISTS d"), int(0));
        assert_eq!(q(c, "ZINTERCARD 2 a b"), int(2));
        assert_eq!(q(c, "ZINTERCARD 2 a b LIMIT 1"), int(1));
        assert_eq!(q(c, "ZRANGESTORE r a 1 -1"), int(2));
        assert_eq!(strings(&q(c, "ZRANGE r 0 -1")), sv(&["y", "z"]));
        assert_eq!(q(c, "ZRANGESTORE r a 10 20"), int(0));
        assert_eq!(q(c, "EXISTS r"), int(0));
        let m = strings(&q(c, "ZMPOP 2 nokey a MAX COUNT 2"));
        assert_eq!(m[0], "a");
        assert_eq!(q(c, "ZCARD a"), int(1));
        assert_eq!(q(c, "ZMPOP 1 nokey MIN"), nil());
    }
);

e2e!(
    fn generic_commands_on_zsets(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "ZADD z 1 a 2 b"), int(2));
        assert_eq!(q(c, "TYPE z"), ringkv_e2e::v::status("zset"));
        assert_eq!(q(c, "OBJECT ENCODING z"), bulk("listpack"));
        assert_eq!(q(c, "COPY z z2"), int(1));
        assert_eq!(q(c, "ZADD z2 3 c"), int(1));
        assert_eq!(q(c, "ZCARD z"), int(2));
        assert_eq!(q(c, "RENAME z2 z3"), ok());
        assert_eq!(strings(&q(c, "ZRANGE z3 0 -1")), sv(&["a", "b", "c"]));
        assert_eq!(q(c, "MOVE z3 1"), int(1));
        assert_eq!(q(c, "EXISTS z3"), int(0));
        assert_eq!(q(c, "SELECT 1"), ok());
        assert_eq!(q(c, "ZCARD z3"), int(3));
        assert_eq!(q(c, "SELECT 0"), ok());
        assert_eq!(q(c, "DEL z"), int(1));
        assert_eq!(q(c, "ZCARD z"), int(0));
        // Past 128 members (or a 65-byte member) the encoding converts.
        let mut args = vec!["ZADD".to_string(), "big".to_string()];
        for i in 0..200 {
            args.push(i.to_string());
            args.push(format!("m{i:03}"));
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(query(c, &refs), int(200));
        assert_eq!(q(c, "OBJECT ENCODING big"), bulk("skiplist"));
        let long = "x".repeat(65);
        assert_eq!(query(c, &["ZADD", "long", "1", &long]), int(1));
        assert_eq!(q(c, "OBJECT ENCODING long"), bulk("skiplist"));
        assert_eq!(q(c, "ZRANK big m150"), int(150));
        assert_eq!(strings(&q(c, "ZRANGE big 100 102")), sv(&["m100", "m101", "m102"]));
        assert_eq!(strings(&q(c, "ZRANGE big (197 +inf BYSCORE")), sv(&["m198", "m199"]));
        assert_eq!(q(c, "ZREMRANGEBYRANK big 0 99"), int(100));
        assert_eq!(q(c, "ZCARD big"), int(100));
        assert_eq!(q(c, "COPY big big2"), int(1));
        assert_eq!(q(c, "OBJECT ENCODING big2"), bulk("skiplist"));
        assert_eq!(q(c, "ZCOUNT big2 -inf +inf"), int(100));
        // A full ZSCAN of the large encoding returns every member.
        let mut cursor = "0".to_string();
        let mut seen = std::collections::HashSet::new();
        loop {
            let r = query(c, &["ZSCAN", "big", &cursor, "COUNT", "10"]).unwrap();
            let redis::Value::Array(parts) = r else { panic!() };
            cursor = strings(&Ok(redis::Value::Array(vec![parts[0].clone()])))[0].clone();
            let items = strings(&Ok(parts[1].clone()));
            for pair in items.chunks(2) {
                seen.insert(pair[0].clone());
            }
            if cursor == "0" {
                break;
            }
        }
        assert_eq!(seen.len(), 100);
        assert_eq!(q(c, "EXPIRE big 100"), int(1));
        assert_eq!(q(c, "ZADD big 1000 extra"), int(1));
        assert!(matches!(q(c, "TTL big"), Ok(redis::Value::Int(t)) if t > 0));
    }
);

e2e!(
    fn resp3_wire_shapes(b) {
        let srv = b.server();
        let mut raw = srv.raw();
        assert!(matches!(raw.cmd(&["HELLO", "3"]), Reply::Map(_)));
        assert_eq!(raw.cmd(&["ZADD", "z", "1.5", "a", "2", "b", "-inf", "c"]), Reply::Int(3));
        assert_eq!(raw.cmd(&["ZSCORE", "z", "a"]), Reply::Double("1.5".into()));
        assert_eq!(raw.cmd(&["ZSCORE", "z", "c"]), Reply::Double("-inf".into()));
        assert_eq!(raw.cmd(&["ZSCORE", "z", "nope"]), Reply::Null);
        let pair = |m: &str, s: &str| Reply::Array(vec![Reply::bulk(m), Reply::Double(s.into())]);
        assert_eq!(
            raw.cmd(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
            Reply::Array(vec![pair("c", "-inf"), pair("a", "1.5"), pair("b", "2")])
        );
        assert_eq!(
            raw.cmd(&["ZRANGE", "z", "0", "0"]),
            Reply::Array(vec![Reply::bulk("c")])
        );
        // ZPOPMIN: flat without COUNT, nested with it.
        assert_eq!(
            raw.cmd(&["ZPOPMIN", "z"]),
            Reply::Array(vec![Reply::bulk("c"), Reply::Double("-inf".into())])
        );
        assert_eq!(raw.cmd(&["ZPOPMAX", "z", "1"]), Reply::Array(vec![pair("b", "2")]));
        assert_eq!(
            raw.cmd(&["ZMPOP", "1", "z", "MIN"]),
            Reply::Array(vec![Reply::bulk("z"), Reply::Array(vec![pair("a", "1.5")])])
        );
        assert_eq!(raw.cmd(&["ZMPOP", "1", "z", "MIN"]), Reply::Null);
        assert_eq!(raw.cmd(&["ZADD", "z", "1", "a"]), Reply::Int(1));
        assert_eq!(raw.cmd(&["ZINCRBY", "z", "0.5", "a"]), Reply::Double("1.5".into()));
        assert_eq!(
            raw.cmd(&["ZUNION", "1", "z", "WITHSCORES"]),
            Reply::Array(vec![pair("a", "1.5")])
        );
        assert_eq!(
            raw.cmd(&["ZRANDMEMBER", "z", "5", "WITHSCORES"]),
            Reply::Array(vec![pair("a", "1.5")])
        );
        assert_eq!(raw.cmd(&["ZRANDMEMBER", "nokey"]), Reply::Null);
    }
);

e2e!(
    fn resp2_wire_shapes(b) {
        let srv = b.server();
        let mut raw = srv.raw();
        assert_eq!(raw.cmd(&["ZADD", "z", "1.5", "a", "+inf", "b"]), Reply::Int(2));
        assert_eq!(
            raw.cmd(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]),
            Reply::Array(vec![Reply::bulk("a"), Reply::bulk("1.5"), Reply::bulk("b"), Reply::bulk("inf")])
        );
        assert_eq!(
            raw.cmd(&["ZPOPMIN", "z", "1"]),
            Reply::Array(vec![Reply::bulk("a"), Reply::bulk("1.5")])
        );
        assert_eq!(raw.cmd(&["ZMPOP", "1", "nokey", "MIN"]), Reply::Nil);
        assert_eq!(raw.cmd(&["ZRANGE", "nokey", "0", "-1"]), Reply::Array(vec![]));
    }
);

e2e!(
    /// Valkey 8 (Redis 7.2+) behaviour that Redis 7.0 lacks: shortest
    /// round-trip score text, ZRANK WITHSCORE, ZSCAN NOSCORES.
    ringkv_only fn valkey8_specifics(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "ZADD z 0.1 a 1e100 b 3 c"), int(3));
        assert_eq!(q(c, "ZSCORE z a"), bulk("0.1"));
        assert_eq!(q(c, "ZSCORE z b"), bulk("1e+100"));
        assert_eq!(strings(&q(c, "ZRANK z b WITHSCORE")), sv(&["2", "1e+100"]));
        assert_eq!(strings(&q(c, "ZREVRANK z a WITHSCORE")), sv(&["2", "0.1"]));
        assert_eq!(q(c, "ZRANK z nope WITHSCORE"), nil());
        let r = q(c, "ZSCAN z 0 NOSCORES").unwrap();
        let redis::Value::Array(parts) = r else { panic!() };
        assert_eq!(strings(&Ok(parts[1].clone())), sv(&["a", "c", "b"]));
        assert_eq!(q(c, "ZINCRBY z 0.2 a"), bulk("0.30000000000000004"));
        let mut raw = srv.raw();
        raw.cmd(&["HELLO", "3"]);
        assert_eq!(
            raw.cmd(&["ZRANK", "z", "c", "WITHSCORE"]),
            Reply::Array(vec![Reply::Int(1), Reply::Double("3".into())])
        );
    }
);

e2e!(
    fn bzpopmin_is_woken_by_a_zadd_from_another_client(b) {
        let srv = b.server();
        let mut waiter = srv.client();
        let c = &mut srv.client();
        let t = std::thread::spawn(move || {
            let started = std::time::Instant::now();
            let r = q(&mut waiter, "BZPOPMIN z 10");
            // The same connection goes on working after it was served.
            let after = q(&mut waiter, "PING");
            (r, after, started.elapsed())
        });
        // Wait until the server has it blocked, then write.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !ringkv_e2e::v::text(&q(c, "INFO clients")).contains("blocked_clients:1") {
            assert!(std::time::Instant::now() < deadline, "client never blocked");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(q(c, "ZADD z 2 b 1 a"), int(2));
        let (r, after, took) = t.join().unwrap();
        assert_eq!(strings(&r), sv(&["z", "a", "1"]));
        assert_eq!(after, ringkv_e2e::v::status("PONG"));
        assert!(took < std::time::Duration::from_secs(5), "{took:?}");
        assert_eq!(strings(&q(c, "ZRANGE z 0 -1")), sv(&["b"]));
    }
);

e2e!(
    fn bzmpop_times_out_with_nil(b) {
        let srv = b.server();
        let c = &mut srv.client();
        let started = std::time::Instant::now();
        assert_eq!(q(c, "BZMPOP 0.2 2 z1 z2 MIN"), nil());
        let took = started.elapsed();
        assert!(took >= std::time::Duration::from_millis(200), "{took:?}");
        assert!(took < std::time::Duration::from_secs(3), "{took:?}");
        assert_eq!(q(c, "BZPOPMAX z -1"), err("ERR timeout is negative"));
    }
);
