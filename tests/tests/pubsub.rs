//! Pub/Sub and keyspace notifications against the real binary: a `redis`
//! crate PubSub connection receiving what another connection publishes,
//! RESP3 push frames on a raw socket, subscribed-mode rules, shard
//! channels, cleanup on disconnect, and keyspace events.

use ringkv_e2e::v::{bulk, int, ok};
use ringkv_e2e::{Reply, e2e, q};
use std::time::{Duration, Instant};

fn push(parts: &[&str], n: Option<i64>) -> Reply {
    let mut v: Vec<Reply> = parts.iter().map(|p| Reply::bulk(p)).collect();
    if let Some(n) = n {
        v.push(Reply::Int(n));
    }
    Reply::Push(v)
}

fn arr(parts: &[&str], n: Option<i64>) -> Reply {
    match push(parts, n) {
        Reply::Push(v) => Reply::Array(v),
        _ => unreachable!(),
    }
}

/// Poll `f` until it is true (a disconnect is seen by the server
/// asynchronously).
fn eventually(mut f: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(Instant::now() < until, "condition not reached in 5 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

e2e!(
    fn redis_crate_pubsub_receives_messages(b) {
        let srv = b.server();
        let mut sub_con = srv.client();
        let publisher = &mut srv.client();
        let mut ps = sub_con.as_pubsub();
        ps.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        ps.subscribe("news").unwrap();
        ps.psubscribe("spo*").unwrap();
        assert_eq!(q(publisher, "PUBLISH news hello"), int(1));
        assert_eq!(q(publisher, "PUBLISH sport goal"), int(1));
        assert_eq!(q(publisher, "PUBLISH nobody x"), int(0));
        let m = ps.get_message().unwrap();
        assert_eq!(m.get_channel_name(), "news");
        assert_eq!(m.get_payload::<String>().unwrap(), "hello");
        assert!(!m.from_pattern());
        let m = ps.get_message().unwrap();
        assert_eq!(m.get_channel_name(), "sport");
        assert_eq!(m.get_payload::<String>().unwrap(), "goal");
        assert_eq!(m.get_pattern::<String>().unwrap(), "spo*");
        assert_eq!(q(publisher, "PUBSUB NUMSUB news"), ringkv_e2e::v::arr(vec![bulk("news"), int(1)]));
        assert_eq!(q(publisher, "PUBSUB NUMPAT"), int(1));
        ps.unsubscribe("news").unwrap();
        ps.punsubscribe("spo*").unwrap();
        drop(ps);
        assert_eq!(q(publisher, "PUBSUB NUMPAT"), int(0));
    }
);

e2e!(
    fn resp3_push_frames_on_a_raw_socket(b) {
        let srv = b.server();
        let mut sub = srv.raw();
        let publisher = &mut srv.client();
        assert!(matches!(sub.cmd(&["HELLO", "3"]), Reply::Map(_)));
        assert_eq!(
            sub.cmd(&["SUBSCRIBE", "c1", "c2"]),
            push(&["subscribe", "c1"], Some(1))
        );
        assert_eq!(sub.read_reply(), push(&["subscribe", "c2"], Some(2)));
        // RESP3 clients may run anything while subscribed.
        assert_eq!(sub.cmd(&["SET", "k", "v"]), Reply::status("OK"));
        assert_eq!(q(publisher, "PUBLISH c2 payload"), int(1));
        assert_eq!(sub.read_reply(), push(&["message", "c2", "payload"], None));
        // A pending message arrives ahead of the next reply.
        assert_eq!(q(publisher, "PUBLISH c1 first"), int(1));
        std::thread::sleep(Duration::from_millis(50));
        sub.send(&ringkv_e2e::raw::encode_str(&["GET", "k"]));
        assert_eq!(sub.read_reply(), push(&["message", "c1", "first"], None));
        assert_eq!(sub.read_reply(), Reply::bulk("v"));
        assert_eq!(
            sub.cmd(&["UNSUBSCRIBE"]),
            push(&["unsubscribe", "c1"], Some(1))
        );
        assert_eq!(sub.read_reply(), push(&["unsubscribe", "c2"], Some(0)));
        assert_eq!(
            sub.cmd(&["UNSUBSCRIBE"]),
            Reply::Push(vec![Reply::bulk("unsubscribe"), Reply::Null, Reply::Int(0)])
        );
    }
);

e2e!(
    fn resp2_subscribed_mode(b) {
        let srv = b.server();
        let mut sub = srv.raw();
        assert_eq!(
            sub.cmd(&["PSUBSCRIBE", "a*"]),
            arr(&["psubscribe", "a*"], Some(1))
        );
        assert_eq!(
            sub.cmd(&["GET", "k"]),
            Reply::err(
                "ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
            )
        );
        assert_eq!(sub.cmd(&["PING"]), arr(&["pong", ""], None));
        assert_eq!(sub.cmd(&["PING", "x"]), arr(&["pong", "x"], None));
        assert_eq!(sub.cmd(&["RESET"]), Reply::status("RESET"));
        assert_eq!(sub.cmd(&["GET", "k"]), Reply::Nil);
    }
);

e2e!(
    fn shard_channels(b) {
        let srv = b.server();
        let mut sub = srv.raw();
        let publisher = &mut srv.client();
        assert_eq!(
            sub.cmd(&["SSUBSCRIBE", "s"]),
            arr(&["ssubscribe", "s"], Some(1))
        );
        assert_eq!(q(publisher, "PUBLISH s nope"), int(0));
        assert_eq!(q(publisher, "SPUBLISH s yes"), int(1));
        assert_eq!(sub.read_reply(), arr(&["smessage", "s", "yes"], None));
        assert_eq!(
            q(publisher, "PUBSUB SHARDNUMSUB s"),
            ringkv_e2e::v::arr(vec![bulk("s"), int(1)])
        );
        assert_eq!(
            sub.cmd(&["SUNSUBSCRIBE", "s"]),
            arr(&["sunsubscribe", "s"], Some(0))
        );
    }
);

e2e!(
    fn disconnect_drops_subscriptions(b) {
        let srv = b.server();
        let c = &mut srv.client();
        {
            let mut sub = srv.raw();
            sub.cmd(&["SUBSCRIBE", "gone"]);
            sub.cmd(&["PSUBSCRIBE", "g*"]);
            assert_eq!(q(c, "PUBLISH gone x"), int(2));
        }
        eventually(|| q(c, "PUBLISH gone x") == int(0));
        assert_eq!(q(c, "PUBSUB NUMPAT"), int(0));
        assert_eq!(q(c, "PUBSUB CHANNELS"), ringkv_e2e::v::arr(vec![]));
    }
);

e2e!(
    fn keyspace_notifications_reach_a_subscriber(b) {
        let srv = b.server();
        let c = &mut srv.client();
        assert_eq!(q(c, "CONFIG SET notify-keyspace-events KEA"), ok());
        assert_eq!(
            q(c, "CONFIG GET notify-keyspace-events"),
            ringkv_e2e::v::arr(vec![bulk("notify-keyspace-events"), bulk("AKE")])
        );
        let mut sub_con = srv.client();
        let mut ps = sub_con.as_pubsub();
        ps.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        ps.psubscribe("__keyevent@0__:*").unwrap();
        ps.subscribe("__keyspace@0__:k").unwrap();
        assert_eq!(q(c, "SET k v"), ok());
        let mut got = Vec::new();
        for _ in 0..2 {
            let m = ps.get_message().unwrap();
            got.push((m.get_channel_name().to_string(), m.get_payload::<String>().unwrap()));
        }
        got.sort();
        assert_eq!(
            got,
            vec![
                ("__keyevent@0__:set".to_string(), "k".to_string()),
                ("__keyspace@0__:k".to_string(), "set".to_string()),
            ]
        );
        ps.unsubscribe("__keyspace@0__:k").unwrap();
        assert_eq!(q(c, "DEL k"), int(1));
        let m = ps.get_message().unwrap();
        assert_eq!(m.get_channel_name(), "__keyevent@0__:del");
        assert_eq!(m.get_payload::<String>().unwrap(), "k");
        // Active expiry fires `expired` without anyone touching the key.
        assert_eq!(q(c, "SET t v PX 50"), ok());
        let m = ps.get_message().unwrap();
        assert_eq!(m.get_channel_name(), "__keyevent@0__:set");
        let m = ps.get_message().unwrap();
        assert_eq!(m.get_channel_name(), "__keyevent@0__:expire");
        let m = ps.get_message().unwrap();
        assert_eq!(m.get_channel_name(), "__keyevent@0__:expired");
        assert_eq!(m.get_payload::<String>().unwrap(), "t");
    }
);

e2e!(
    fn info_and_client_list_show_subscriptions(b) {
        let srv = b.server();
        let c = &mut srv.client();
        let mut sub = srv.raw();
        sub.cmd(&["SUBSCRIBE", "a", "b"]);
        sub.read_reply();
        sub.cmd(&["PSUBSCRIBE", "p*"]);
        let list = ringkv_e2e::v::text(&q(c, "CLIENT LIST TYPE pubsub"));
        assert!(list.contains(" flags=P "), "{list}");
        assert!(list.contains(" sub=2 psub=1 ssub=0 "), "{list}");
        let info = ringkv_e2e::v::text(&q(c, "INFO stats"));
        assert!(info.contains("pubsub_channels:2\r\n"), "{info}");
        assert!(info.contains("pubsub_patterns:1\r\n"), "{info}");
    }
);
