//! Set commands against the real binary through the `redis` crate:
//! membership, algebra, encodings, SSCAN of a large set, keyspace events.

use ringkv_e2e::v::{bulk, int, ok, strings};
use ringkv_e2e::{e2e, q};
use std::time::Duration;

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

e2e!(
    fn set_commands_through_a_client(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "SADD tags red green blue"), int(3));
        assert_eq!(q(c, "SADD other green 1 2"), int(3));
        assert_eq!(q(c, "SISMEMBER tags red"), int(1));
        assert_eq!(q(c, "SCARD tags"), int(3));
        assert_eq!(sorted(strings(&q(c, "SMEMBERS tags"))), vec!["blue", "green", "red"]);
        assert_eq!(strings(&q(c, "SINTER tags other")), vec!["green"]);
        assert_eq!(sorted(strings(&q(c, "SUNION tags other"))).len(), 5);
        assert_eq!(sorted(strings(&q(c, "SDIFF tags other"))), vec!["blue", "red"]);
        assert_eq!(q(c, "SUNIONSTORE dst tags other"), int(5));
        assert_eq!(q(c, "SINTERCARD 2 tags other"), int(1));
        assert_eq!(q(c, "SMOVE tags other red"), int(1));
        assert_eq!(q(c, "SREM tags blue green"), int(2));
        assert_eq!(q(c, "EXISTS tags"), int(0));
        assert_eq!(q(c, "OBJECT ENCODING other"), bulk("listpack"));
        assert_eq!(q(c, "SADD nums 5 3 9"), int(3));
        assert_eq!(q(c, "OBJECT ENCODING nums"), bulk("intset"));
        assert_eq!(strings(&q(c, "SMEMBERS nums")), vec!["3", "5", "9"]);
        assert_eq!(q(c, "TYPE nums"), ringkv_e2e::v::status("set"));
    }
);

e2e!(
    fn large_set_scans_completely(b) {
        let srv = b.server();
        let c = &mut srv.client();
        let mut cmd = redis::cmd("SADD");
        cmd.arg("big");
        for i in 0..3000 {
            cmd.arg(format!("member:{i}"));
        }
        assert_eq!(cmd.query::<i64>(c).unwrap(), 3000);
        assert_eq!(q(c, "OBJECT ENCODING big"), bulk("hashtable"));
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0u64;
        loop {
            let (next, items): (u64, Vec<String>) =
                redis::cmd("SSCAN").arg("big").arg(cursor).arg("COUNT").arg(200).query(c).unwrap();
            seen.extend(items);
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(seen.len(), 3000);
        let popped: Vec<String> = redis::cmd("SPOP").arg("big").arg(1000).query(c).unwrap();
        assert_eq!(popped.len(), 1000);
        assert_eq!(q(c, "SCARD big"), int(2000));
    }
);

e2e!(
    fn set_writes_fire_keyspace_events(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "CONFIG SET notify-keyspace-events Es$g"), ok());
        let mut sub_con = srv.client();
        let mut ps = sub_con.as_pubsub();
        ps.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        ps.psubscribe("__keyevent@0__:*").unwrap();
        assert_eq!(q(c, "SADD s a"), int(1));
        assert_eq!(q(c, "SINTERSTORE d s s"), int(1));
        assert_eq!(q(c, "SREM s a"), int(1));
        for (event, key) in [("sadd", "s"), ("sinterstore", "d"), ("srem", "s"), ("del", "s")] {
            let m = ps.get_message().unwrap();
            assert_eq!(m.get_channel_name(), format!("__keyevent@0__:{event}"));
            assert_eq!(m.get_payload::<String>().unwrap(), key);
        }
    }
);
