//! Many clients at once, maxclients, and clients that vanish mid-request.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use ringkv_e2e::{Opts, Reply, e2e, info_field, raise_nofile};

fn read_line(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut b = [0u8; 1];
    while !out.ends_with(b"\r\n") {
        match s.read(&mut b) {
            Ok(1) => out.push(b[0]),
            Ok(_) => break,
            Err(e) => panic!("read: {e}"),
        }
    }
    String::from_utf8_lossy(&out).trim_end().to_string()
}

e2e!(
    fn two_thousand_concurrent_connections(b) {
        raise_nofile();
        let srv = b.server();
        const CONNS: usize = 2000;
        let mut socks: Vec<TcpStream> = (0..CONNS)
            .map(|i| {
                let s = TcpStream::connect(("127.0.0.1", srv.port))
                    .unwrap_or_else(|e| panic!("connection #{i}: {e}"));
                s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                s
            })
            .collect();
        // Every connection is open at once; each sends its own PING.
        for (i, s) in socks.iter_mut().enumerate() {
            s.write_all(format!("*2\r\n$4\r\nPING\r\n${}\r\n{i}\r\n", i.to_string().len()).as_bytes())
                .unwrap();
        }
        for (i, s) in socks.iter_mut().enumerate() {
            assert_eq!(read_line(s), format!("${}", i.to_string().len()), "conn {i}");
            assert_eq!(read_line(s), i.to_string(), "conn {i}");
        }
        let mut raw = srv.raw();
        let info = raw.cmd(&["INFO", "clients"]).text();
        let connected: usize = info_field(&info, "connected_clients").parse().unwrap();
        assert!(connected > CONNS, "connected_clients:{connected} with {CONNS}+1 open");
        drop(socks);
        // Short-lived sockets: connect, PING, close, from two threads.
        let port = srv.port;
        let hs: Vec<_> = (0..2)
            .map(|_| {
                std::thread::spawn(move || {
                    for _ in 0..500 {
                        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
                        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                        s.write_all(b"PING\r\n").unwrap();
                        assert_eq!(read_line(&mut s), "+PONG");
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(raw.cmd(&["PING"]), Reply::status("PONG"));
    }
);

e2e!(
    fn maxclients_enforced(b) {
        let srv = b.start(Opts::new().arg("maxclients", "5"));
        // Let the start-up probe connection's close be processed.
        std::thread::sleep(Duration::from_millis(200));
        let mut held: Vec<_> = (0..5).map(|_| srv.raw()).collect();
        for r in held.iter_mut() {
            assert_eq!(r.cmd(&["PING"]), Reply::status("PONG"));
        }
        let mut sixth = srv.raw();
        assert_eq!(sixth.read_line(), "-ERR max number of clients reached");
        sixth.expect_closed();
        // Freeing a slot lets a new client in.
        drop(held.pop());
        let mut ok = false;
        for _ in 0..50 {
            std::thread::sleep(Duration::from_millis(20));
            let mut r = srv.raw();
            r.send(b"PING\r\n");
            if r.read_line() == "+PONG" {
                ok = true;
                break;
            }
        }
        assert!(ok, "a slot freed by a closed client was not reusable");
        assert_eq!(
            held[0].cmd(&["CONFIG", "GET", "maxclients"]),
            Reply::Array(vec![Reply::bulk("maxclients"), Reply::bulk("5")])
        );
    }
);

e2e!(
    fn config_set_maxclients_live(b) {
        let srv = b.server();
        let mut a = srv.raw();
        assert_eq!(a.cmd(&["CONFIG", "SET", "maxclients", "2"]), Reply::status("OK"));
        std::thread::sleep(Duration::from_millis(100));
        let mut second = srv.raw();
        assert_eq!(second.cmd(&["PING"]), Reply::status("PONG"));
        let mut third = srv.raw();
        assert_eq!(third.read_line(), "-ERR max number of clients reached");
        third.expect_closed();
        assert_eq!(a.cmd(&["CONFIG", "SET", "maxclients", "100"]), Reply::status("OK"));
        let mut fourth = srv.raw();
        assert_eq!(fourth.cmd(&["PING"]), Reply::status("PONG"));
    }
);

e2e!(
    ringkv_only fn batch_wait_serves_many_pipelined_clients_exactly(b) {
        // With io-uring-batch-wait-us the loop waits for more completions
        // under load; every client must still get every reply, in order.
        let srv = b.start(Opts::new().arg("io-uring-batch-wait-us", "200"));
        let port = srv.port;
        let workers: Vec<_> = (0..20)
            .map(|t| {
                std::thread::spawn(move || {
                    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    for i in 0..200 {
                        let (k, v) = (format!("k{t}"), format!("{t}-{i}"));
                        let req = format!(
                            "*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${}\r\n{v}\r\n*2\r\n$3\r\nGET\r\n${}\r\n{k}\r\n",
                            k.len(),
                            v.len(),
                            k.len()
                        );
                        s.write_all(req.as_bytes()).unwrap();
                        assert_eq!(read_line(&mut s), "+OK");
                        assert_eq!(read_line(&mut s), format!("${}", v.len()));
                        assert_eq!(read_line(&mut s), v);
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        let c = &mut srv.client();
        assert_eq!(
            ringkv_e2e::query(c, &["CONFIG", "GET", "io-uring-batch-wait-us"]),
            ringkv_e2e::v::arr(vec![ringkv_e2e::v::bulk("io-uring-batch-wait-us"), ringkv_e2e::v::bulk("200")])
        );
    }
);
