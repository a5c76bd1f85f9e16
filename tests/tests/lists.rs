//! List commands against the real binary: a queue through the `redis`
//! crate, blocking pops woken by another connection, fairness, timeouts,
//! a blocked client that vanishes, and a pipeline behind a blocked command.

use ringkv_e2e::v::{bulk, int, nil, ok, strings};
use ringkv_e2e::{e2e, q};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

fn wait_blocked(c: &mut redis::Connection, n: usize) {
    let until = Instant::now() + Duration::from_secs(5);
    while !ringkv_e2e::v::text(&q(c, "INFO clients")).contains(&format!("blocked_clients:{n}\r")) {
        assert!(Instant::now() < until, "never saw {n} blocked clients");
        std::thread::sleep(Duration::from_millis(10));
    }
}

e2e!(
    fn list_commands_through_a_client(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "RPUSH jobs a b c"), int(3));
        assert_eq!(q(c, "LPUSH jobs z"), int(4));
        assert_eq!(strings(&q(c, "LRANGE jobs 0 -1")), vec!["z", "a", "b", "c"]);
        assert_eq!(q(c, "LINDEX jobs -1"), bulk("c"));
        assert_eq!(q(c, "LPOS jobs b"), int(2));
        assert_eq!(q(c, "LSET jobs 0 y"), ok());
        assert_eq!(q(c, "LINSERT jobs AFTER y x"), int(5));
        assert_eq!(q(c, "LREM jobs 0 x"), int(1));
        assert_eq!(q(c, "LMOVE jobs done LEFT RIGHT"), bulk("y"));
        assert_eq!(q(c, "LTRIM jobs 0 0"), ok());
        let (key, items): (String, Vec<String>) =
            redis::cmd("LMPOP").arg(2).arg("jobs").arg("done").arg("LEFT").arg("COUNT").arg(5).query(c).unwrap();
        assert_eq!((key.as_str(), items), ("jobs", vec!["a".to_string()]));
        assert_eq!(q(c, "EXISTS jobs"), int(0));
        assert_eq!(q(c, "OBJECT ENCODING done"), bulk("listpack"));
        assert_eq!(q(c, "RPOP done"), bulk("y"));
        assert_eq!(q(c, "RPOP done"), nil());
    }
);

e2e!(
    fn blpop_is_served_first_blocked_first_across_connections(b) {
        let srv = b.server();
        let c = &mut srv.client();
        let mut waiters = Vec::new();
        for i in 0..3 {
            let mut w = srv.client();
            waiters.push(std::thread::spawn(move || {
                let r: (String, String) = redis::cmd("BLPOP").arg("q").arg(10).query(&mut w).unwrap();
                (i, r.1)
            }));
            // Block in a known order.
            wait_blocked(c, i + 1);
        }
        assert_eq!(q(c, "RPUSH q first second third"), int(3));
        let mut got: Vec<(usize, String)> = waiters.into_iter().map(|t| t.join().unwrap()).collect();
        got.sort();
        assert_eq!(
            got,
            vec![(0, "first".into()), (1, "second".into()), (2, "third".into())]
        );
        assert_eq!(q(c, "LLEN q"), int(0));
        wait_blocked(c, 0);
    }
);

e2e!(
    fn blocking_timeouts_and_vanished_clients(b) {
        let srv = b.server();
        let c = &mut srv.client();
        let started = Instant::now();
        assert_eq!(q(c, "BRPOP nothing 0.2"), nil());
        assert!(started.elapsed() >= Duration::from_millis(200));
        assert_eq!(q(c, "BLMOVE nothing dst LEFT LEFT 0.1"), nil());
        // A client that blocks and disconnects is forgotten: the element
        // stays in the list.
        let mut raw = std::net::TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        raw.write_all(b"*3\r\n$5\r\nBLPOP\r\n$4\r\ngone\r\n$1\r\n0\r\n").unwrap();
        wait_blocked(c, 1);
        drop(raw);
        wait_blocked(c, 0);
        assert_eq!(q(c, "RPUSH gone v"), int(1));
        assert_eq!(q(c, "LLEN gone"), int(1));
    }
);

e2e!(
    fn commands_pipelined_behind_a_blocked_one_wait_for_it(b) {
        let srv = b.server();
        let c = &mut srv.client();
        let mut raw = std::net::TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // BLPOP then PING in one write: PING must answer after BLPOP.
        raw.write_all(b"*3\r\n$5\r\nBLPOP\r\n$1\r\nk\r\n$1\r\n0\r\n*1\r\n$4\r\nPING\r\n").unwrap();
        wait_blocked(c, 1);
        assert_eq!(q(c, "LPUSH k v"), int(1));
        let want = b"*2\r\n$1\r\nk\r\n$1\r\nv\r\n+PONG\r\n";
        let mut got = vec![0u8; want.len()];
        raw.read_exact(&mut got).unwrap();
        assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(want));
    }
);

e2e!(
    fn a_large_list_is_a_quicklist_of_packed_nodes(b) {
        let srv = b.server();
        let c = &mut srv.client();
        let items: Vec<String> = (0..2000).map(|i| format!("item-{i}")).collect();
        let mut cmd = redis::cmd("RPUSH");
        cmd.arg("big").arg(&items);
        let n: i64 = cmd.query(c).unwrap();
        assert_eq!(n, 2000);
        assert_eq!(q(c, "OBJECT ENCODING big"), bulk("quicklist"));
        // Edits in the middle split and merge nodes; reads see one list.
        assert_eq!(q(c, "LINSERT big BEFORE item-1000 new"), int(2001));
        assert_eq!(q(c, "LINDEX big 1000"), bulk("new"));
        assert_eq!(q(c, "LINDEX big -1"), bulk("item-1999"));
        assert_eq!(q(c, "LSET big 1500 changed"), ok());
        assert_eq!(
            strings(&q(c, "LRANGE big 1499 1501")),
            ["item-1498", "changed", "item-1500"]
        );
        assert_eq!(q(c, "LREM big 0 new"), int(1));
        assert_eq!(q(c, "LPOS big item-1999"), int(1999));
        assert_eq!(q(c, "LTRIM big 10 -11"), ok());
        assert_eq!(q(c, "LLEN big"), int(1980));
        assert_eq!(q(c, "LINDEX big 0"), bulk("item-10"));
    }
);
