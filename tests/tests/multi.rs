//! MULTI/EXEC/DISCARD/WATCH against the real binary: the `redis` crate's
//! atomic pipelines and transaction helper, WATCH conflicts from a second
//! connection, EXECABORT and per-command errors on the wire, RESP3 nulls.

use ringkv_e2e::v::{arr, bulk, err, int, nil, ok, status};
use ringkv_e2e::{Reply, e2e, q};
use std::time::Duration;

e2e!(
    fn atomic_pipeline(b) {
        let srv = b.server();
        let c = &mut srv.client();
        let (v, n): (String, i64) = redis::pipe()
            .atomic()
            .set("k", "v")
            .ignore()
            .get("k")
            .incr("n", 5)
            .query(c)
            .unwrap();
        assert_eq!((v.as_str(), n), ("v", 5));
    }
);

e2e!(
    fn watch_conflict_from_a_second_connection(b) {
        let srv = b.server();
        let c = &mut srv.client();
        let other = &mut srv.client();
        assert_eq!(q(c, "SET k 1"), ok());
        assert_eq!(q(c, "WATCH k"), ok());
        assert_eq!(q(other, "INCR k"), int(2));
        assert_eq!(q(c, "MULTI"), ok());
        assert_eq!(q(c, "SET k 100"), status("QUEUED"));
        assert_eq!(q(c, "EXEC"), nil());
        assert_eq!(q(c, "GET k"), bulk("2"));
        // Without interference the same transaction commits.
        assert_eq!(q(c, "WATCH k"), ok());
        assert_eq!(q(c, "MULTI"), ok());
        assert_eq!(q(c, "SET k 100"), status("QUEUED"));
        assert_eq!(q(c, "EXEC"), arr(vec![ok()]));
        assert_eq!(q(other, "GET k"), bulk("100"));
    }
);

e2e!(
    fn redis_crate_transaction_helper_retries(b) {
        let srv = b.server();
        let c = &mut srv.client();
        let other = &mut srv.client();
        assert_eq!(q(c, "SET counter 10"), ok());
        let mut attempts = 0;
        let v: (i64,) = redis::transaction(c, &["counter"], |con, pipe| {
            attempts += 1;
            let cur: i64 = redis::cmd("GET").arg("counter").query(con)?;
            if attempts == 1 {
                // Someone else writes between WATCH and EXEC: retried.
                let _: () = redis::cmd("SET").arg("counter").arg(50).query(other)?;
            }
            pipe.set("counter", cur * 2).ignore().get("counter").query(con)
        })
        .unwrap();
        assert_eq!(attempts, 2);
        assert_eq!(v.0, 100);
    }
);

e2e!(
    fn watched_key_expiring_aborts(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "SET k v PX 100"), ok());
        assert_eq!(q(c, "WATCH k"), ok());
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(q(c, "MULTI"), ok());
        assert_eq!(q(c, "PING"), status("QUEUED"));
        assert_eq!(q(c, "EXEC"), nil());
    }
);

e2e!(
    fn flushall_and_swapdb_invalidate_watches(b) {
        let srv = b.server();
        let c = &mut srv.client();
        let other = &mut srv.client();
        assert_eq!(q(c, "SET k v"), ok());
        assert_eq!(q(c, "WATCH k"), ok());
        assert_eq!(q(other, "FLUSHALL"), ok());
        assert_eq!(q(c, "MULTI"), ok());
        assert_eq!(q(c, "PING"), status("QUEUED"));
        assert_eq!(q(c, "EXEC"), nil());

        assert_eq!(q(other, "SELECT 1"), ok());
        assert_eq!(q(other, "SET k v"), ok());
        assert_eq!(q(c, "WATCH k"), ok());
        assert_eq!(q(other, "SWAPDB 0 1"), ok());
        assert_eq!(q(c, "MULTI"), ok());
        assert_eq!(q(c, "GET k"), status("QUEUED"));
        assert_eq!(q(c, "EXEC"), nil());
    }
);

e2e!(
    fn errors_on_the_wire(b) {
        let srv = b.server();
        let mut r = srv.raw();
        assert_eq!(r.cmd(&["EXEC"]), Reply::err("ERR EXEC without MULTI"));
        assert_eq!(r.cmd(&["DISCARD"]), Reply::err("ERR DISCARD without MULTI"));
        // Nested MULTI and WATCH: redis-server 7.0 refuses them alone,
        // Valkey 8 (and ringkv) as `no_multi` commands, dooming the
        // transaction.
        let mut n = srv.raw();
        assert_eq!(n.cmd(&["MULTI"]), Reply::status("OK"));
        let (nested, watch, exec) = if b.is_redis() {
            (
                Reply::err("ERR MULTI calls can not be nested"),
                Reply::err("ERR WATCH inside MULTI is not allowed"),
                Reply::Array(vec![]),
            )
        } else {
            let refused = Reply::err("ERR Command not allowed inside a transaction");
            let abort = Reply::err("EXECABORT Transaction discarded because of previous errors.");
            (refused.clone(), refused, abort)
        };
        assert_eq!(n.cmd(&["MULTI"]), nested);
        assert_eq!(n.cmd(&["WATCH", "x"]), watch);
        assert_eq!(n.cmd(&["EXEC"]), exec);
        assert_eq!(r.cmd(&["MULTI"]), Reply::status("OK"));
        assert_eq!(r.cmd(&["SET", "s", "abc"]), Reply::status("QUEUED"));
        assert_eq!(r.cmd(&["INCR", "s"]), Reply::status("QUEUED"));
        assert_eq!(r.cmd(&["GET", "s"]), Reply::status("QUEUED"));
        assert_eq!(
            r.cmd(&["EXEC"]),
            Reply::Array(vec![
                Reply::status("OK"),
                Reply::err("ERR value is not an integer or out of range"),
                Reply::bulk("abc"),
            ])
        );
        // A queue-time error discards the whole transaction.
        assert_eq!(r.cmd(&["MULTI"]), Reply::status("OK"));
        assert_eq!(r.cmd(&["SET", "s", "new"]), Reply::status("QUEUED"));
        assert_eq!(
            r.cmd(&["SET", "s"]),
            Reply::err("ERR wrong number of arguments for 'set' command")
        );
        assert_eq!(
            r.cmd(&["EXEC"]),
            Reply::err("EXECABORT Transaction discarded because of previous errors.")
        );
        assert_eq!(r.cmd(&["GET", "s"]), Reply::bulk("abc"));
        // DISCARD.
        assert_eq!(r.cmd(&["MULTI"]), Reply::status("OK"));
        assert_eq!(r.cmd(&["DEL", "s"]), Reply::status("QUEUED"));
        assert_eq!(r.cmd(&["DISCARD"]), Reply::status("OK"));
        assert_eq!(r.cmd(&["GET", "s"]), Reply::bulk("abc"));
    }
);

e2e!(
    fn pipelined_transaction_and_resp3_null(b) {
        let srv = b.server();
        let mut r = srv.raw();
        let mut batch = Vec::new();
        for cmd in [
            &["MULTI"][..],
            &["SET", "a", "1"],
            &["INCRBY", "a", "9"],
            &["EXEC"],
        ] {
            batch.extend(ringkv_e2e::raw::encode_str(cmd));
        }
        r.send(&batch);
        assert_eq!(r.read_reply(), Reply::status("OK"));
        assert_eq!(r.read_reply(), Reply::status("QUEUED"));
        assert_eq!(r.read_reply(), Reply::status("QUEUED"));
        assert_eq!(
            r.read_reply(),
            Reply::Array(vec![Reply::status("OK"), Reply::Int(10)])
        );
        // RESP3: an aborted EXEC is `_`.
        let other = &mut srv.client();
        assert!(matches!(r.cmd(&["HELLO", "3"]), Reply::Map(_)));
        assert_eq!(r.cmd(&["WATCH", "a"]), Reply::status("OK"));
        assert_eq!(q(other, "DEL a"), int(1));
        assert_eq!(r.cmd(&["MULTI"]), Reply::status("OK"));
        assert_eq!(r.cmd(&["GET", "a"]), Reply::status("QUEUED"));
        assert_eq!(r.cmd(&["EXEC"]), Reply::Null);
        // RESP2 spells it *-1.
        assert!(matches!(r.cmd(&["HELLO", "2"]), Reply::Array(_)));
        assert_eq!(r.cmd(&["WATCH", "a"]), Reply::status("OK"));
        assert_eq!(q(other, "SET a 1"), ok());
        assert_eq!(r.cmd(&["MULTI"]), Reply::status("OK"));
        assert_eq!(r.cmd(&["GET", "a"]), Reply::status("QUEUED"));
        assert_eq!(r.cmd(&["EXEC"]), Reply::Nil);
    }
);

e2e!(
    fn client_list_shows_multi_state(b) {
        let srv = b.server();
        let c = &mut srv.client();
        let mut r = srv.raw();
        r.cmd(&["CLIENT", "SETNAME", "txn"]);
        r.cmd(&["WATCH", "a", "b"]);
        r.cmd(&["MULTI"]);
        r.cmd(&["SET", "a", "1"]);
        let list = ringkv_e2e::v::text(&q(c, "CLIENT LIST"));
        let line = list
            .lines()
            .find(|l| l.contains(" name=txn "))
            .expect("txn client");
        assert!(line.contains(" flags=x "), "{line}");
        assert!(line.contains(" multi=1 "), "{line}");
        // `watch=` is new in Valkey 8 (redis 7.0 has no such field).
        if !b.is_redis() {
            assert!(line.contains(" multi=1 watch=2 "), "{line}");
        }
        assert_eq!(
            q(c, "EXEC"),
            err("ERR EXEC without MULTI"),
            "MULTI state is per connection"
        );
    }
);
