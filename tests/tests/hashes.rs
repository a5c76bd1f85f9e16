//! Hash commands against the real binary: replies through the `redis`
//! crate and redis-cli, RESP3 maps, encodings, keyspace events, and
//! Valkey's exact errors.

use ringkv_e2e::v::{bulk, err, int, nil, ok, strings};
use ringkv_e2e::{e2e, q};
use std::time::Duration;

e2e!(
    fn hash_commands_through_a_client(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "HSET user:1 name ann age 41"), int(2));
        assert_eq!(q(c, "HSETNX user:1 name bob"), int(0));
        assert_eq!(q(c, "HGET user:1 name"), bulk("ann"));
        assert_eq!(strings(&q(c, "HMGET user:1 age nope")), vec!["41", "(nil)"]);
        assert_eq!(q(c, "HINCRBY user:1 age 1"), int(42));
        assert_eq!(q(c, "HINCRBYFLOAT user:1 score 1.5"), bulk("1.5"));
        assert_eq!(q(c, "HLEN user:1"), int(3));
        assert_eq!(q(c, "HSTRLEN user:1 name"), int(3));
        assert_eq!(q(c, "HEXISTS user:1 age"), int(1));
        assert_eq!(strings(&q(c, "HKEYS user:1")), vec!["name", "age", "score"]);
        assert_eq!(strings(&q(c, "HGETALL user:1")), vec!["name", "ann", "age", "42", "score", "1.5"]);
        assert_eq!(q(c, "OBJECT ENCODING user:1"), bulk("listpack"));
        assert_eq!(q(c, "TYPE user:1"), ringkv_e2e::v::status("hash"));
        assert_eq!(q(c, "HDEL user:1 name age score"), int(3));
        assert_eq!(q(c, "EXISTS user:1"), int(0));
        assert_eq!(q(c, "HGET user:1 name"), nil());
        assert_eq!(q(c, "SET s x"), ok());
        assert_eq!(q(c, "HSET s a 1"), err("WRONGTYPE Operation against a key holding the wrong kind of value"));
        assert_eq!(q(c, "HINCRBY h f x"), err("ERR value is not an integer or out of range"));
    }
);

e2e!(
    fn large_hash_converts_and_scans_completely(b) {
        let srv = b.server();
        let c = &mut srv.client();
        let mut pipe = redis::pipe();
        for i in 0..2000 {
            pipe.cmd("HSET").arg("big").arg(format!("field:{i}")).arg(i).ignore();
        }
        let () = pipe.query(c).unwrap();
        assert_eq!(q(c, "HLEN big"), int(2000));
        assert_eq!(q(c, "OBJECT ENCODING big"), bulk("hashtable"));
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0u64;
        loop {
            let (next, items): (u64, Vec<String>) =
                redis::cmd("HSCAN").arg("big").arg(cursor).arg("COUNT").arg(100).query(c).unwrap();
            for pair in items.chunks(2) {
                let i: usize = pair[0]["field:".len()..].parse().unwrap();
                assert_eq!(pair[1], i.to_string());
                seen.insert(i);
            }
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(seen.len(), 2000);
        assert_eq!(q(c, "UNLINK big"), int(1));
    }
);

e2e!(
    fn resp3_hgetall_is_a_map(b) {
        let srv = b.server();
        let mut raw = srv.raw();
        raw.cmd(&["HELLO", "3"]);
        raw.cmd(&["HSET", "h", "f", "v"]);
        assert_eq!(
            raw.cmd(&["HGETALL", "h"]),
            ringkv_e2e::Reply::Map(vec![(ringkv_e2e::Reply::bulk("f"), ringkv_e2e::Reply::bulk("v"))])
        );
    }
);

e2e!(
    fn hash_writes_fire_keyspace_events(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "CONFIG SET notify-keyspace-events Eh"), ok());
        let mut sub_con = srv.client();
        let mut ps = sub_con.as_pubsub();
        ps.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        ps.psubscribe("__keyevent@0__:*").unwrap();
        assert_eq!(q(c, "HSET h a 1"), int(1));
        assert_eq!(q(c, "HINCRBY h a 1"), int(2));
        assert_eq!(q(c, "HDEL h a"), int(1));
        for event in ["hset", "hincrby", "hdel"] {
            let m = ps.get_message().unwrap();
            assert_eq!(m.get_channel_name(), format!("__keyevent@0__:{event}"));
            assert_eq!(m.get_payload::<String>().unwrap(), "h");
        }
    }
);
