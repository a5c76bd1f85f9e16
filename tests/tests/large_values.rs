//! Large string values (issue 5, item 4): from 16 KiB on, ringkv keeps a
//! string written whole as a shared buffer and replies with a reference to
//! it, sent with sendmsg / IORING_OP_SENDMSG instead of being copied into
//! the reply. What a client can see of that: exact bytes in any pipeline,
//! a reply that survives the value being overwritten, deleted or flushed
//! while it is still being sent, and Valkey's answers from every string
//! command.

use ringkv_e2e::raw::{Raw, Reply, encode};
use ringkv_e2e::v::{bulk, err, int, ok};
use ringkv_e2e::{Opts, e2e, info_field, q, query};
use std::time::Duration;

/// `n` bytes no two neighbouring windows of which look alike, so a
/// misplaced or repeated segment shows.
/// A numeric field of this client's CLIENT INFO line.
fn client_info_u64(r: &mut Raw, field: &str) -> u64 {
    let line = r.cmd(&["CLIENT", "INFO"]).text();
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(field)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {field} in {line}"))
        .parse()
        .unwrap()
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3] ^ seed)
        .collect()
}

fn set(r: &mut Raw, key: &str, value: &[u8]) {
    assert_eq!(
        r.cmd_bytes(&[b"SET", key.as_bytes(), value]),
        Reply::status("OK")
    );
}

fn bulk_bytes(r: Reply) -> Vec<u8> {
    match r {
        Reply::Bulk(b) => b,
        other => panic!("expected a bulk string, got {other:?}"),
    }
}

/// Pipelined GETs of small and large values, one write, replies read
/// after: each must be its value exactly, in order.
fn pipelined_gets(r: &mut Raw, big: &[(&str, Vec<u8>)]) {
    let mut req = Vec::new();
    let mut want = Vec::new();
    for (i, (k, v)) in big.iter().enumerate() {
        req.extend(encode(&[b"GET", b"small"]));
        want.push(b"tiny".to_vec());
        req.extend(encode(&[b"GET", k.as_bytes()]));
        want.push(v.clone());
        req.extend(encode(&[b"GET", format!("{k}-missing-{i}").as_bytes()]));
    }
    req.extend(encode(&[b"PING"]));
    r.send(&req);
    for (i, w) in want.iter().enumerate() {
        let got = bulk_bytes(r.read_reply());
        assert!(
            got == *w,
            "reply {i}: {} bytes, want {}",
            got.len(),
            w.len()
        );
        if i % 2 == 1 {
            let nil = r.read_reply();
            assert!(matches!(nil, Reply::Nil | Reply::Null), "{nil:?}");
        }
    }
    assert_eq!(r.read_reply(), Reply::status("PONG"));
}

e2e!(
    fn large_gets_return_exact_bytes_in_pipelines(b) {
        let srv = b.server();
        let mut r = srv.raw();
        set(&mut r, "small", b"tiny");
        let big: Vec<(&str, Vec<u8>)> = vec![
            ("k16k", pattern(16 * 1024, 1)),
            ("k100k", pattern(100_000, 2)),
            ("k5m", pattern(5_000_000, 3)),
            ("k100m", pattern(100_000_000, 4)),
        ];
        for (k, v) in &big {
            set(&mut r, k, v);
        }
        pipelined_gets(&mut r, &big);
        // RESP3: the same bulk strings.
        let mut r3 = srv.raw();
        assert!(matches!(r3.cmd(&["HELLO", "3"]), Reply::Map(_)));
        pipelined_gets(&mut r3, &big);
        // Two clients reading the same large value at once.
        let mut r2 = srv.raw();
        r.send(&encode(&[b"GET", b"k5m"]));
        r2.send(&encode(&[b"GET", b"k5m"]));
        assert!(bulk_bytes(r2.read_reply()) == big[2].1);
        assert!(bulk_bytes(r.read_reply()) == big[2].1);
        // GETEX, GETDEL, GETSET, SET .. GET and MGET reply by reference too.
        let v = &big[1].1;
        assert!(bulk_bytes(r.cmd_bytes(&[b"GETEX", b"k100k", b"EX", b"100"])) == *v);
        assert!(bulk_bytes(r.cmd_bytes(&[b"GETSET", b"k100k", v])) == *v);
        assert!(bulk_bytes(r.cmd_bytes(&[b"SET", b"k100k", v, b"GET"])) == *v);
        match r.cmd_bytes(&[b"MGET", b"k100k", b"small", b"k16k"]) {
            Reply::Array(a) => {
                assert_eq!(a.len(), 3);
                assert!(a[0] == Reply::Bulk(v.clone()));
                assert_eq!(a[1], Reply::bulk("tiny"));
                assert!(a[2] == Reply::Bulk(big[0].1.clone()));
            }
            other => panic!("{other:?}"),
        }
        assert!(bulk_bytes(r.cmd_bytes(&[b"GETDEL", b"k100k"])) == *v);
        assert_eq!(r.cmd(&["EXISTS", "k100k"]), Reply::Int(0));
        // Inside MULTI/EXEC.
        assert_eq!(r.cmd(&["MULTI"]), Reply::status("OK"));
        assert_eq!(r.cmd(&["GET", "k5m"]), Reply::status("QUEUED"));
        assert_eq!(r.cmd(&["STRLEN", "k5m"]), Reply::status("QUEUED"));
        match r.cmd(&["EXEC"]) {
            Reply::Array(a) => {
                assert!(a[0] == Reply::Bulk(big[2].1.clone()));
                assert_eq!(a[1], Reply::Int(5_000_000));
            }
            other => panic!("{other:?}"),
        }
    }
);

/// A client that asked for a large value and does not read: the reply is
/// (partly) queued when another client overwrites the value, deletes it
/// and flushes every database. The first client then reads the original
/// bytes, intact.
fn reference_outlives(srv: &ringkv_e2e::Server, flush: &[&str]) {
    let size = 48 << 20;
    let original = pattern(size, 7);
    let mut writer = srv.raw();
    set(&mut writer, "big", &original);
    // Enough other keys that the flush is handed to the lazyfree thread.
    for i in 0..200 {
        assert_eq!(
            writer.cmd(&["SET", &format!("filler:{i}"), "x"]),
            Reply::status("OK")
        );
    }
    let mut reader = srv.raw();
    reader.send(&encode(&[b"GET", b"big"]));
    // Let the server take the GET and start sending (more than the
    // socket buffers hold, so the send stays part-way).
    std::thread::sleep(Duration::from_millis(200));
    set(&mut writer, "big", &pattern(size, 9));
    assert_eq!(writer.cmd(&["DEL", "big"]), Reply::Int(1));
    set(&mut writer, "big", &pattern(size, 11));
    assert_eq!(writer.cmd(flush), Reply::status("OK"));
    assert_eq!(writer.cmd(&["DBSIZE"]), Reply::Int(0));
    let got = bulk_bytes(reader.read_reply());
    assert_eq!(got.len(), original.len());
    assert!(got == original, "the reply changed under the reader");
    assert_eq!(reader.cmd(&["PING"]), Reply::status("PONG"));
}

e2e!(
    fn reply_survives_overwrite_del_and_flushall(b) {
        let srv = b.server();
        reference_outlives(&srv, &["FLUSHALL"]);
    }
);

e2e!(
    fn reply_survives_flushall_async(b) {
        let srv = b.server();
        reference_outlives(&srv, &["FLUSHALL", "ASYNC"]);
        reference_outlives(&srv, &["FLUSHDB", "SYNC"]);
    }
);

e2e!(
    fn client_gone_mid_send_of_a_large_value(b) {
        let srv = b.server();
        let mut w = srv.raw();
        let v = pattern(32 << 20, 5);
        set(&mut w, "big", &v);
        for _ in 0..3 {
            let mut gone = srv.raw();
            let mut req = Vec::new();
            for _ in 0..4 {
                req.extend(encode(&[b"GET", b"big"]));
            }
            gone.send(&req);
            std::thread::sleep(Duration::from_millis(50));
            drop(gone);
        }
        // The server goes on; the value is still there and whole.
        assert!(bulk_bytes(w.cmd(&["GET", "big"])) == v);
        assert_eq!(w.cmd(&["DEL", "big"]), Reply::Int(1));
    }
);

e2e!(
    fn string_commands_on_large_values(b) {
        let srv = b.server();
        let c = &mut srv.client();
        let n = 20_000;
        let big = "a".repeat(n);
        assert_eq!(query(c, &["SET", "big", &big]), ok());
        assert_eq!(q(c, "OBJECT ENCODING big"), bulk("raw"));
        assert_eq!(q(c, "STRLEN big"), int(n as i64));
        assert_eq!(q(c, "GETRANGE big -3 -1"), bulk("aaa"));
        assert_eq!(q(c, "GETRANGE big 0 1"), bulk("aa"));
        assert_eq!(q(c, "INCR big"), err("ERR value is not an integer or out of range"));
        assert_eq!(q(c, "INCRBYFLOAT big 1"), err("ERR value is not a valid float"));
        assert_eq!(q(c, "DECRBY big 1"), err("ERR value is not an integer or out of range"));
        assert_eq!(q(c, "APPEND big xyz"), int(n as i64 + 3));
        assert_eq!(q(c, "GETRANGE big -4 -1"), bulk("axyz"));
        assert_eq!(q(c, "OBJECT ENCODING big"), bulk("raw"));
        assert_eq!(query(c, &["SET", "big2", &big]), ok());
        assert_eq!(q(c, "SETRANGE big2 19998 XYZ"), int(n as i64 + 1));
        assert_eq!(q(c, "GETRANGE big2 -4 -1"), bulk("aXYZ"));
        assert_eq!(q(c, "SETBIT big2 0 1"), int(0));
        assert_eq!(q(c, "GETBIT big2 0"), int(1));
        assert_eq!(q(c, "BITCOUNT big2 0 0"), int(4));
        assert_eq!(query(c, &["SET", "big3", &big]), ok());
        assert_eq!(q(c, "COPY big3 big4"), int(1));
        assert_eq!(q(c, "RENAME big4 big5"), ok());
        assert_eq!(q(c, "APPEND big5 !"), int(n as i64 + 1));
        assert_eq!(query(c, &["GET", "big3"]), bulk(&big));
        assert_eq!(q(c, "STRLEN big5"), int(n as i64 + 1));
        assert_eq!(q(c, "TYPE big3"), ringkv_e2e::v::status("string"));
        // A number written as a long string is still a string.
        let digits = "1".repeat(n);
        assert_eq!(query(c, &["SET", "num", &digits]), ok());
        assert_eq!(q(c, "INCR num"), err("ERR value is not an integer or out of range"));
        assert_eq!(q(c, "OBJECT ENCODING num"), bulk("raw"));
    }
);

// The referenced bytes count as output: INFO total_net_output_bytes and
// CLIENT LIST tot-net-out grow by the value's size.
e2e!(
    ringkv_only fn referenced_bytes_are_counted_as_output(b) {
        let srv = b.server();
        let mut r = srv.raw();
        let v = pattern(3_000_000, 1);
        set(&mut r, "big", &v);
        let out_total = |r: &mut Raw| -> u64 {
            let info = r.cmd(&["INFO", "stats"]).text();
            info_field(&info, "total_net_output_bytes").parse().unwrap()
        };
        let tot_net_out = |r: &mut Raw| client_info_u64(r, "tot-net-out");
        let (before, before_client) = (out_total(&mut r), tot_net_out(&mut r));
        for _ in 0..3 {
            assert!(bulk_bytes(r.cmd(&["GET", "big"])) == v);
        }
        // INFO's counters may trail the last send by a loop iteration.
        std::thread::sleep(Duration::from_millis(100));
        let after = out_total(&mut r);
        let after_client = tot_net_out(&mut r);
        assert!(after - before >= 9_000_000, "{before} -> {after}");
        assert!(after_client - before_client >= 9_000_000, "{before_client} -> {after_client}");
    }
);

// Threaded mode whatever the suite's settings: the IO threads send the
// references and hand them back to the execution thread.
e2e!(
    ringkv_only fn large_values_with_io_threads(b) {
        let srv = b.start(
            Opts::new()
                .arg("io-threads", "3")
                .arg("io-threads-adaptive", "no"),
        );
        let mut r = srv.raw();
        set(&mut r, "small", b"tiny");
        let big: Vec<(&str, Vec<u8>)> = vec![
            ("k100k", pattern(100_000, 2)),
            ("k5m", pattern(5_000_000, 3)),
        ];
        for (k, v) in &big {
            set(&mut r, k, v);
        }
        let mut others: Vec<Raw> = (0..4).map(|_| srv.raw()).collect();
        for o in &mut others {
            pipelined_gets(o, &big);
        }
        pipelined_gets(&mut r, &big);
        reference_outlives(&srv, &["FLUSHALL", "ASYNC"]);
    }
);

// client-output-buffer-limit normal: a client that asks for many large
// values and does not read is disconnected once its pending output (the
// referenced values counted as if copied) passes the hard limit.
e2e!(
    fn output_buffer_limit_disconnects_a_client_that_does_not_read(b) {
        let srv = b.server();
        let mut admin = srv.raw();
        set(&mut admin, "big", &pattern(1_000_000, 3));
        assert_eq!(
            admin.cmd(&["CONFIG", "SET", "client-output-buffer-limit", "normal 4mb 0 0"]),
            Reply::status("OK")
        );
        let mut slow = srv.raw();
        let mut req = Vec::new();
        for _ in 0..40 {
            req.extend(encode(&[b"GET", b"big"]));
        }
        slow.send(&req);
        std::thread::sleep(Duration::from_millis(500));
        // It reads now: at most the part sent before the limit hit, then
        // the connection is closed.
        use std::io::Read;
        slow.stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut total = 0usize;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            match slow.stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
        assert!(total < 40_000_000, "got all {total} bytes: not disconnected");
        // (redis-server 7.0 has no such INFO field; Valkey 8 does.)
        if !b.is_redis() {
            let stats = admin.cmd(&["INFO", "stats"]).text();
            assert_eq!(
                info_field(&stats, "client_output_buffer_limit_disconnections"),
                "1"
            );
        }
        // A client that reads as it goes is not affected.
        assert!(bulk_bytes(admin.cmd(&["GET", "big"])).len() == 1_000_000);
    }
);

e2e!(
    ringkv_only fn bytes_read_are_counted_per_client(b) {
        // CLIENT INFO `tot-net-in`: every byte the client sent, the CLIENT
        // INFO command included (Valkey counts on read, before running
        // it). In threaded mode the count travels with the request.
        let srv = b.server();
        let mut r = srv.raw();
        let tot_net_in = |r: &mut Raw| client_info_u64(r, "tot-net-in");
        let info_cmd = encode(&[b"CLIENT", b"INFO"]).len() as u64;
        let first = tot_net_in(&mut r);
        assert_eq!(first, info_cmd);
        let v = pattern(100_000, 3);
        set(&mut r, "k", &v);
        let set_cmd = encode(&[b"SET", b"k", &v]).len() as u64;
        assert_eq!(tot_net_in(&mut r), first + set_cmd + info_cmd);
    }
);
