//! Generic key commands on every value type: TYPE, SCAN TYPE, COPY,
//! RENAME, MOVE, DEL/UNLINK and OBJECT ENCODING, through a real client.

use ringkv_e2e::v::{bulk, int, ok, status, strings};
use ringkv_e2e::{e2e, q};

e2e!(
    fn key_commands_work_for_every_type(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "SET s v"), ok());
        assert_eq!(q(c, "RPUSH l a b"), int(2));
        assert_eq!(q(c, "HSET h f v"), int(1));
        assert_eq!(q(c, "SADD st 1 2"), int(2));
        assert_eq!(q(c, "ZADD z 1 m"), int(1));
        for (key, ty, enc) in [
            ("s", "string", "embstr"),
            ("l", "list", "listpack"),
            ("h", "hash", "listpack"),
            ("st", "set", "intset"),
            ("z", "zset", "listpack"),
        ] {
            assert_eq!(q(c, &format!("TYPE {key}")), status(ty));
            assert_eq!(q(c, &format!("OBJECT ENCODING {key}")), bulk(enc));
            let (_, found): (u64, Vec<String>) =
                redis::cmd("SCAN").arg(0).arg("COUNT").arg(100).arg("TYPE").arg(ty).query(c).unwrap();
            assert_eq!(found, vec![key.to_string()], "SCAN TYPE {ty}");
            // COPY is deep: changing the copy leaves the original alone.
            assert_eq!(q(c, &format!("COPY {key} {key}:copy")), int(1));
            assert_eq!(q(c, &format!("TYPE {key}:copy")), status(ty));
            assert_eq!(q(c, &format!("RENAME {key}:copy {key}:renamed")), ok());
            assert_eq!(q(c, &format!("MOVE {key}:renamed 1")), int(1));
            assert_eq!(q(c, &format!("EXISTS {key}:renamed")), int(0));
        }
        assert_eq!(q(c, "SELECT 1"), ok());
        assert_eq!(q(c, "RPUSH l:renamed c"), int(3));
        assert_eq!(q(c, "HSET h:renamed f2 v2"), int(1));
        assert_eq!(q(c, "SADD st:renamed 3"), int(1));
        assert_eq!(q(c, "DBSIZE"), int(5));
        assert_eq!(q(c, "SELECT 0"), ok());
        assert_eq!(strings(&q(c, "LRANGE l 0 -1")), vec!["a", "b"]);
        assert_eq!(q(c, "HLEN h"), int(1));
        assert_eq!(q(c, "SCARD st"), int(2));
        assert_eq!(q(c, "DEL s l h"), int(3));
        assert_eq!(q(c, "UNLINK st z"), int(2));
        assert_eq!(q(c, "DBSIZE"), int(0));
    }
);
