//! Threaded mode (`io-threads N`): what a user can see of the threads, and
//! the cross-thread behaviour the rest of the suite cannot reach with one
//! client at a time (clients of different IO threads talking through the
//! execution thread: blocking, pub/sub, CLIENT KILL, ordering).
//!
//! The whole suite also runs with `RINGKV_E2E_IO_THREADS=4` (scripts/test.sh).

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use ringkv_e2e::{Opts, Reply, Server, e2e, info_field};

/// The server's IO threads by name, once `want` of them are listed (a new
/// thread is in /proc a moment before it has named itself, and a retired
/// one stays there until it has exited, a moment after its clients moved).
fn io_thread_names(srv: &Server, want: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let io = io_threads_now(srv);
        if io.len() == want || Instant::now() > deadline {
            return io;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The server's IO threads by name, as /proc lists them now.
fn io_threads_now(srv: &Server) -> Vec<String> {
    thread_names(srv)
        .into_iter()
        .filter(|n| n.starts_with("io-thread-"))
        .collect()
}

/// The names of the server's threads (from /proc/PID/task/*/comm).
fn thread_names(srv: &Server) -> Vec<String> {
    let pid = srv.pid().expect("server pid");
    let mut names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("read /proc/PID/task")
        .filter_map(|e| {
            let p = e.ok()?.path().join("comm");
            Some(std::fs::read_to_string(p).ok()?.trim().to_string())
        })
        .collect();
    names.sort();
    names
}

/// `io-threads n` with every IO thread taking connections from the start
/// (`io-threads-adaptive no`), so clients spread over the threads.
fn spread(n: &str) -> Opts {
    Opts::new()
        .arg("io-threads", n)
        .arg("io-threads-adaptive", "no")
}

e2e!(
    ringkv_only fn io_threads_start_named_threads_and_spread_clients(b) {
        let srv = b.start(spread("3"));
        let io = io_thread_names(&srv, 2);
        assert_eq!(io, ["io-thread-1", "io-thread-2"], "threads: {:?}", thread_names(&srv));
        let mut raws: Vec<_> = (0..4).map(|_| srv.raw()).collect();
        for (i, r) in raws.iter_mut().enumerate() {
            assert_eq!(r.cmd(&["SET", &format!("k{i}"), "v"]), Reply::status("OK"));
        }
        let info = raws[0].cmd(&["INFO", "server"]).text();
        assert_eq!(info_field(&info, "io_threads_active"), "1");
        assert_eq!(info_field(&info, "io_threads_active_num"), "3");
        let threads = raws[0].cmd(&["INFO", "threads"]).text();
        assert_eq!(info_field(&threads, "io_threads"), "2");
        // Four clients over two threads, the least-loaded first: two each.
        for t in ["io_thread_1", "io_thread_2"] {
            let line = info_field(&threads, t);
            assert!(line.starts_with("clients=2,"), "{t}:{line}");
        }
        let stats = raws[0].cmd(&["INFO", "stats"]).text();
        let reads: u64 = info_field(&stats, "io_threaded_reads_processed").parse().unwrap();
        assert!(reads >= 4, "io_threaded_reads_processed:{reads}");
        // The IO threads accept connections and wait for IO themselves.
        let accepts: u64 = info_field(&stats, "io_threaded_accept_processed").parse().unwrap();
        assert!(accepts >= 4, "io_threaded_accept_processed:{accepts}");
        let polls: u64 = info_field(&stats, "io_threaded_poll_processed").parse().unwrap();
        assert!(polls >= 4, "io_threaded_poll_processed:{polls}");
    }
);

e2e!(
    ringkv_only fn io_threads_one_is_inline(b) {
        let srv = b.start(Opts::new().arg("io-threads", "1"));
        let names = thread_names(&srv);
        assert!(
            !names.iter().any(|n| n.starts_with("io-thread-")),
            "threads: {names:?}"
        );
        let mut r = srv.raw();
        let info = r.cmd(&["INFO", "server"]).text();
        assert_eq!(info_field(&info, "io_threads_active"), "0");
        assert_eq!(r.cmd(&["PING"]), Reply::status("PONG"));
    }
);

e2e!(
    ringkv_only fn blocked_client_is_served_by_a_push_from_another_thread(b) {
        let srv = b.start(spread("3"));
        // The first two clients land on different IO threads.
        let mut waiter = srv.raw();
        let mut pusher = srv.raw();
        assert_eq!(waiter.cmd(&["PING"]), Reply::status("PONG"));
        waiter.send(&ringkv_e2e::raw::encode_str(&["BLPOP", "q", "5"]));
        waiter.send(&ringkv_e2e::raw::encode_str(&["GET", "after"]));
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(pusher.cmd(&["SET", "after", "yes"]), Reply::status("OK"));
        assert_eq!(pusher.cmd(&["RPUSH", "q", "x"]), Reply::Int(1));
        assert_eq!(
            waiter.read_reply(),
            Reply::Array(vec![Reply::bulk("q"), Reply::bulk("x")])
        );
        // The command pipelined behind the blocking one ran after it.
        assert_eq!(waiter.read_reply(), Reply::bulk("yes"));
    }
);

e2e!(
    ringkv_only fn pubsub_and_client_kill_cross_threads(b) {
        let srv = b.start(spread("3"));
        let mut sub = srv.raw();
        let mut other = srv.raw();
        let sub_id = match sub.cmd(&["CLIENT", "ID"]) {
            Reply::Int(id) => id,
            r => panic!("CLIENT ID: {r:?}"),
        };
        sub.send(&ringkv_e2e::raw::encode_str(&["SUBSCRIBE", "ch"]));
        assert_eq!(
            sub.read_reply(),
            Reply::Array(vec![Reply::bulk("subscribe"), Reply::bulk("ch"), Reply::Int(1)])
        );
        assert_eq!(other.cmd(&["PUBLISH", "ch", "hello"]), Reply::Int(1));
        assert_eq!(
            sub.read_reply(),
            Reply::Array(vec![Reply::bulk("message"), Reply::bulk("ch"), Reply::bulk("hello")])
        );
        let list = other.cmd(&["CLIENT", "LIST"]).text();
        assert!(list.contains(&format!("id={sub_id} ")), "{list}");
        assert_eq!(
            other.cmd(&["CLIENT", "KILL", "ID", &sub_id.to_string()]),
            Reply::Int(1)
        );
        sub.closed_within(Duration::from_secs(5)).unwrap();
        assert_eq!(other.cmd(&["PUBSUB", "NUMSUB", "ch"]), Reply::Array(vec![Reply::bulk("ch"), Reply::Int(0)]));
    }
);

e2e!(
    ringkv_only fn pipelines_from_many_threads_keep_their_order(b) {
        let srv = b.start(spread("4"));
        let port = srv.port;
        const CLIENTS: usize = 12;
        const ROUNDS: usize = 50;
        const DEPTH: usize = 20;
        let hs: Vec<_> = (0..CLIENTS)
            .map(|c| {
                std::thread::spawn(move || {
                    let mut s = ringkv_e2e::tcp(port);
                    let key = format!("counter:{c}");
                    let mut expect = Vec::new();
                    let mut n = 0;
                    for _ in 0..ROUNDS {
                        let mut req = Vec::new();
                        for _ in 0..DEPTH {
                            n += 1;
                            req.extend(ringkv_e2e::raw::encode_str(&["INCR", &key]));
                            req.extend(ringkv_e2e::raw::encode_str(&["INCR", "shared"]));
                            expect.extend(format!(":{n}\r\n").into_bytes());
                        }
                        s.write_all(&req).unwrap();
                        // Read this round's replies: each client's own
                        // counter must come back 1, 2, 3, ... in order.
                        let mut got = Vec::new();
                        let mut lines = 0;
                        let mut b = [0u8; 4096];
                        while lines < 2 * DEPTH {
                            let k = s.read(&mut b).unwrap();
                            assert!(k > 0, "closed");
                            lines += b[..k].iter().filter(|&&x| x == b'\n').count();
                            got.extend_from_slice(&b[..k]);
                        }
                        let own: Vec<&[u8]> = got
                            .split_inclusive(|&x| x == b'\n')
                            .step_by(2)
                            .collect();
                        let want_from = expect.len() - own.iter().map(|l| l.len()).sum::<usize>();
                        assert_eq!(own.concat(), expect[want_from..].to_vec());
                    }
                    n
                })
            })
            .collect();
        let total: usize = hs.into_iter().map(|h| h.join().unwrap()).sum();
        let mut r = srv.raw();
        assert_eq!(r.cmd(&["GET", "shared"]), Reply::bulk(&total.to_string()));
    }
);

e2e!(
    ringkv_only fn shutdown_with_io_threads_flushes_and_exits(b) {
        let mut srv = b.start(Opts::new().arg("io-threads", "3"));
        let mut a = srv.raw();
        let mut c = srv.raw();
        assert_eq!(a.cmd(&["SET", "k", "v"]), Reply::status("OK"));
        assert_eq!(c.cmd(&["GET", "k"]), Reply::bulk("v"));
        let t = Instant::now();
        srv.sigterm();
        let status = srv.wait_exit(Duration::from_secs(10)).expect("exited");
        assert!(status.success(), "{status:?}");
        assert!(t.elapsed() < Duration::from_secs(5));
        a.closed_within(Duration::from_secs(2)).unwrap();
    }
);

e2e!(
    ringkv_only fn shutdown_on_the_way_back_to_inline_still_flushes_replies(b) {
        // SHUTDOWN in the same batch as CONFIG SET io-threads 1: the
        // connections are on their way back to the main thread when the
        // server starts shutting down. Their unsent replies are still
        // flushed, as at any shutdown.
        let mut srv = b.start(
            Opts::new()
                .arg("io-threads", "3")
                .arg("io-threads-adaptive", "no"),
        );
        let mut admin = srv.raw();
        let big = vec![b'x'; 8_000_000];
        assert_eq!(admin.cmd_bytes(&[b"SET", b"big", &big]), Reply::status("OK"));
        let mut slow = srv.raw();
        assert_eq!(slow.cmd(&["CLIENT", "SETNAME", "slow"]), Reply::status("OK"));
        let mut req = Vec::new();
        for _ in 0..4 {
            req.extend(ringkv_e2e::raw::encode(&[b"GET", b"big"]));
        }
        slow.send(&req);
        // Not read yet: most of the 32 MB waits in the server.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let list = admin.cmd(&["CLIENT", "LIST"]).text();
            let omem: u64 = list
                .lines()
                .find(|l| l.contains(" name=slow "))
                .and_then(|l| l.split(' ').find_map(|kv| kv.strip_prefix("omem=")))
                .map_or(0, |v| v.parse().unwrap());
            if omem > 8_000_000 {
                break;
            }
            assert!(Instant::now() < deadline, "the replies never piled up");
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut req = ringkv_e2e::raw::encode(&[b"CONFIG", b"SET", b"io-threads", b"1"]);
        req.extend(ringkv_e2e::raw::encode(&[b"SHUTDOWN", b"NOSAVE"]));
        admin.send(&req);
        for i in 0..4 {
            assert!(slow.read_reply() == Reply::Bulk(big.clone()), "reply {i}");
        }
        let status = srv.wait_exit(Duration::from_secs(10)).expect("exited");
        assert!(status.success(), "{status:?}");
    }
);

e2e!(
    ringkv_only fn tiny_rings_hold_back_and_lose_nothing(b) {
        // Two messages per ring: with 64 clients the rings are full nearly
        // all the time, so both sides keep messages back in order.
        let srv = b.start(
            Opts::new()
                .arg("io-threads", "3")
                .arg("io-threads-ring-size", "2"),
        );
        let port = srv.port;
        const CLIENTS: usize = 64;
        const DEPTH: usize = 50;
        let hs: Vec<_> = (0..CLIENTS)
            .map(|c| {
                std::thread::spawn(move || {
                    let mut s = ringkv_e2e::tcp(port);
                    let mut req = Vec::new();
                    let mut want = Vec::new();
                    for i in 1..=DEPTH {
                        req.extend(ringkv_e2e::raw::encode_str(&["INCR", &format!("c{c}")]));
                        want.extend(format!(":{i}\r\n").into_bytes());
                    }
                    s.write_all(&req).unwrap();
                    let mut got = vec![0u8; want.len()];
                    s.read_exact(&mut got).unwrap();
                    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&want));
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let mut r = srv.raw();
        assert_eq!(r.cmd(&["GET", "c63"]), Reply::bulk(&DEPTH.to_string()));
    }
);

/// INFO `threads` counters after a few commands spaced out far enough for
/// the execution thread to fall asleep in between.
fn batches_after_idle_commands(srv: &Server) -> (u64, u64) {
    let mut r = srv.raw();
    for i in 0..6 {
        std::thread::sleep(Duration::from_millis(150));
        assert_eq!(r.cmd(&["SET", &format!("k{i}"), "v"]), Reply::status("OK"));
    }
    let threads = r.cmd(&["INFO", "threads"]).text();
    let n = |f: &str| info_field(&threads, f).parse::<u64>().unwrap();
    (n("exec_thread_batches"), n("exec_batches_on_io_threads"))
}

e2e!(
    ringkv_only fn idle_exec_lets_an_io_thread_run_the_batches_of_a_sleeping_execution_thread(b) {
        let srv = b.start(Opts::new().arg("io-threads", "2").arg("io-threads-idle-exec", "yes"));
        let (all, on_io) = batches_after_idle_commands(&srv);
        assert!(on_io >= 1 && on_io <= all, "batches {all}, on IO threads {on_io}");
    }
);

e2e!(
    ringkv_only fn idle_exec_no_keeps_every_batch_on_the_execution_thread(b) {
        let srv = b.start(Opts::new().arg("io-threads", "2").arg("io-threads-idle-exec", "no"));
        let (all, on_io) = batches_after_idle_commands(&srv);
        assert!(all >= 1, "batches {all}");
        assert_eq!(on_io, 0);

        // The execution thread slept between those commands; its CPU while
        // awake is counted, and is part of (at most) all of its CPU.
        let threads = srv.raw().cmd(&["INFO", "threads"]).text();
        let n = |f: &str| info_field(&threads, f).parse::<u64>().unwrap();
        assert!(n("exec_thread_sleeps") >= 5, "{threads}");
        let awake_us = n("exec_thread_awake_cpu_us");
        let pid = srv.pid().expect("server pid");
        let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/stat")).unwrap();
        let f: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
        // utime + stime, in clock ticks of 10 ms (fields 14 and 15).
        let cpu_us = (f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()) * 10_000;
        assert!(awake_us > 0 && awake_us <= cpu_us + 20_000, "awake {awake_us} µs, CPU {cpu_us} µs");
    }
);

/// Per IO thread, its `clients=` count and `state=`, from INFO threads.
fn io_thread_lines(r: &mut ringkv_e2e::Raw) -> Vec<(u64, String)> {
    let text = r.cmd(&["INFO", "threads"]).text();
    text.lines()
        .filter(|l| {
            l.strip_prefix("io_thread_")
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
        })
        .map(|l| {
            let field = |name: &str| {
                l.split([':', ','])
                    .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
                    .unwrap_or_else(|| panic!("{name} in {l}"))
                    .to_string()
            };
            (field("clients").parse().unwrap(), field("state"))
        })
        .collect()
}

/// Poll INFO threads until `ok` holds (5 s at most).
fn wait_threads(r: &mut ringkv_e2e::Raw, what: &str, ok: impl Fn(&[(u64, String)]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let lines = io_thread_lines(r);
        if ok(&lines) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {lines:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

e2e!(
    ringkv_only fn adaptive_pool_grows_under_load_and_parks_when_idle(b) {
        // A low threshold, so this 2-core machine's load is enough.
        let srv = b.start(
            Opts::new()
                .arg("io-threads", "4")
                .arg("io-threads-adaptive", "yes")
                .arg("io-threads-adaptive-busy-pct", "5"),
        );
        let mut admin = srv.raw();
        let mut idle: Vec<_> = (0..6).map(|_| srv.raw()).collect();
        for r in &mut idle {
            assert_eq!(r.cmd(&["PING"]), Reply::status("PONG"));
        }
        // Few idle clients: one IO thread takes them all, the others park.
        let lines = io_thread_lines(&mut admin);
        assert_eq!(lines[0], (7, "active".to_string()), "{lines:?}");
        assert!(lines[1..].iter().all(|l| *l == (0, "parked".to_string())), "{lines:?}");

        let port = srv.port;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let workers: Vec<_> = (0..6)
            .map(|c| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut r = ringkv_e2e::Raw::connect(port);
                    let key = format!("load:{c}");
                    let mut n = 0i64;
                    let deadline = Instant::now() + Duration::from_secs(20);
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < deadline {
                        let mut req = Vec::new();
                        for _ in 0..50 {
                            req.extend(ringkv_e2e::raw::encode_str(&["INCR", &key]));
                        }
                        r.send(&req);
                        for _ in 0..50 {
                            n += 1;
                            assert_eq!(r.read_reply(), Reply::Int(n), "client {c}");
                        }
                    }
                    (r, n)
                })
            })
            .collect();
        // Under load the pool grows and clients move onto the new threads.
        wait_threads(&mut admin, "pool never grew", |l| {
            l.iter().filter(|t| t.1 == "active" && t.0 > 0).count() >= 2
        });
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut loaded: Vec<_> = workers.into_iter().map(|h| h.join().expect("worker")).collect();
        // Idle again: back to one active thread holding every client.
        wait_threads(&mut admin, "pool never shrank", |l| {
            l[0] == (13, "active".to_string()) && l[1..].iter().all(|t| t.0 == 0 && t.1 == "parked")
        });
        // Every client still works, where it is now.
        for (c, (r, n)) in loaded.iter_mut().enumerate() {
            assert_eq!(r.cmd(&["INCR", &format!("load:{c}")]), Reply::Int(*n + 1));
        }
        for r in &mut idle {
            assert_eq!(r.cmd(&["PING"]), Reply::status("PONG"));
        }
        // Turned off live: every IO thread takes clients, a share each.
        assert_eq!(
            admin.cmd(&["CONFIG", "SET", "io-threads-adaptive", "no"]),
            Reply::status("OK")
        );
        wait_threads(&mut admin, "threads not all activated", |l| {
            l.iter().all(|t| t.0 >= 4 && t.1 == "active")
        });
        for r in &mut idle {
            assert_eq!(r.cmd(&["PING"]), Reply::status("PONG"));
        }
    }
);

e2e!(
    ringkv_only fn config_set_io_threads_moves_clients_and_loses_nothing(b) {
        let srv = b.start(spread("4"));
        let mut admin = srv.raw();
        let mut sub = srv.raw();
        let mut waiter = srv.raw();
        let mut half = srv.raw();
        let mut plain: Vec<_> = (0..4).map(|_| srv.raw()).collect();
        sub.send(&ringkv_e2e::raw::encode_str(&["SUBSCRIBE", "ch"]));
        assert_eq!(
            sub.read_reply(),
            Reply::Array(vec![Reply::bulk("subscribe"), Reply::bulk("ch"), Reply::Int(1)])
        );
        // A blocked client with a command pipelined behind it, and one
        // that has sent half a command.
        assert_eq!(waiter.cmd(&["PING"]), Reply::status("PONG"));
        waiter.send(&ringkv_e2e::raw::encode_str(&["BLPOP", "q", "0"]));
        waiter.send(&ringkv_e2e::raw::encode_str(&["GET", "after"]));
        let set = ringkv_e2e::raw::encode_str(&["SET", "half", "carried"]);
        let (first, rest) = set.split_at(set.len() / 2);
        assert_eq!(half.cmd(&["PING"]), Reply::status("PONG"));
        half.send(first);
        for r in &mut plain {
            assert_eq!(r.cmd(&["PING"]), Reply::status("PONG"));
        }
        std::thread::sleep(Duration::from_millis(100));

        // Down to one IO thread: the other two retire once their clients
        // have moved.
        assert_eq!(admin.cmd(&["CONFIG", "SET", "io-threads", "2"]), Reply::status("OK"));
        wait_threads(&mut admin, "threads never retired", |l| l.len() == 1 && l[0].0 == 8);
        assert_eq!(io_thread_names(&srv, 1), ["io-thread-1"]);
        assert_eq!(admin.cmd(&["CONFIG", "GET", "io-threads"]), Reply::Array(vec![Reply::bulk("io-threads"), Reply::bulk("2")]));

        // Nothing was lost on the way.
        half.send(rest);
        assert_eq!(half.read_reply(), Reply::status("OK"));
        assert_eq!(admin.cmd(&["SET", "after", "yes"]), Reply::status("OK"));
        assert_eq!(admin.cmd(&["RPUSH", "q", "x"]), Reply::Int(1));
        assert_eq!(waiter.read_reply(), Reply::Array(vec![Reply::bulk("q"), Reply::bulk("x")]));
        assert_eq!(waiter.read_reply(), Reply::bulk("yes"));
        assert_eq!(admin.cmd(&["PUBLISH", "ch", "hi"]), Reply::Int(1));
        assert_eq!(
            sub.read_reply(),
            Reply::Array(vec![Reply::bulk("message"), Reply::bulk("ch"), Reply::bulk("hi")])
        );

        // Up to four IO threads: new ones start and take a share.
        assert_eq!(admin.cmd(&["CONFIG", "SET", "io-threads", "5"]), Reply::status("OK"));
        wait_threads(&mut admin, "new threads took no clients", |l| {
            l.len() == 4 && l.iter().all(|t| t.0 >= 1 && t.1 == "active")
        });
        assert_eq!(
            io_thread_names(&srv, 4),
            ["io-thread-1", "io-thread-2", "io-thread-3", "io-thread-4"]
        );
        assert_eq!(half.cmd(&["GET", "half"]), Reply::bulk("carried"));
        assert_eq!(admin.cmd(&["PUBLISH", "ch", "again"]), Reply::Int(1));
        assert_eq!(
            sub.read_reply(),
            Reply::Array(vec![Reply::bulk("message"), Reply::bulk("ch"), Reply::bulk("again")])
        );
        for r in &mut plain {
            assert_eq!(r.cmd(&["PING"]), Reply::status("PONG"));
        }
        let info = admin.cmd(&["INFO", "server"]).text();
        assert_eq!(info_field(&info, "io_threads_active_num"), "5");
    }
);

/// CONFIG SET io-threads `n`, answered OK.
fn set_io_threads(r: &mut ringkv_e2e::Raw, n: &str) {
    assert_eq!(
        r.cmd(&["CONFIG", "SET", "io-threads", n]),
        Reply::status("OK"),
        "io-threads {n}"
    );
    assert_eq!(
        r.cmd(&["CONFIG", "GET", "io-threads"]),
        Reply::Array(vec![Reply::bulk("io-threads"), Reply::bulk(n)])
    );
}

/// Wait (10 s at most) until the server runs exactly `want` IO threads,
/// by /proc and by INFO; then check a new connection is served.
fn expect_io_threads(srv: &Server, r: &mut ringkv_e2e::Raw, want: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let io = io_threads_now(srv);
        let threads = r.cmd(&["INFO", "threads"]).text();
        if io.len() == want && info_field(&threads, "io_threads") == want.to_string() {
            let names: Vec<String> = (1..=want).map(|i| format!("io-thread-{i}")).collect();
            assert_eq!(io, names);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "want {want} IO threads: {io:?}\n{threads}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let info = r.cmd(&["INFO", "server"]).text();
    let threaded = if want > 0 { "1" } else { "0" };
    assert_eq!(info_field(&info, "io_threads_active"), threaded, "{info}");
    let mut fresh = srv.raw();
    assert_eq!(fresh.cmd(&["PING"]), Reply::status("PONG"));
}

/// Poll GET `key` (10 s at most) until its value passes `above`.
fn wait_counter_above(r: &mut ringkv_e2e::Raw, key: &str, above: i64) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = match r.cmd(&["GET", key]) {
            Reply::Bulk(b) => String::from_utf8(b).unwrap().parse().unwrap(),
            _ => 0,
        };
        if v > above {
            return v;
        }
        assert!(Instant::now() < deadline, "{key} stuck at {v}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

e2e!(
    ringkv_only fn config_set_io_threads_switches_between_inline_and_threaded_under_load(b) {
        let srv = b.start(Opts::new().arg("io-threads", "1"));
        let mut admin = srv.raw();
        expect_io_threads(&srv, &mut admin, 0);
        let port = srv.port;
        const WORKERS: usize = 4;
        const DEPTH: i64 = 16;
        const MAX_ROUNDS: i64 = 20_000;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        // Pipelining clients: every reply must be the next number, so a lost
        // or repeated reply (or one out of order) fails here.
        let workers: Vec<_> = (0..WORKERS)
            .map(|c| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut r = ringkv_e2e::Raw::connect(port);
                    let key = format!("switch:{c}");
                    let deadline = Instant::now() + Duration::from_secs(60);
                    let mut n = 0i64;
                    for _ in 0..MAX_ROUNDS {
                        if stop.load(std::sync::atomic::Ordering::Relaxed) || Instant::now() > deadline {
                            break;
                        }
                        let mut req = Vec::new();
                        for _ in 0..DEPTH {
                            req.extend(ringkv_e2e::raw::encode_str(&["INCR", &key]));
                        }
                        r.send(&req);
                        for _ in 0..DEPTH {
                            n += 1;
                            assert_eq!(r.read_reply(), Reply::Int(n), "client {c}");
                        }
                    }
                    (r, n)
                })
            })
            .collect();
        let keys: Vec<String> = (0..WORKERS).map(|c| format!("switch:{c}")).collect();
        let mut seen: Vec<i64> = keys.iter().map(|k| wait_counter_above(&mut admin, k, 0)).collect();
        for round in 0..3 {
            set_io_threads(&mut admin, "4");
            expect_io_threads(&srv, &mut admin, 3);
            // Every client keeps being served in threaded mode.
            for (k, s) in keys.iter().zip(&mut seen) {
                *s = wait_counter_above(&mut admin, k, *s);
            }
            // The IO threads, not this thread, read the clients now.
            let stats = admin.cmd(&["INFO", "stats"]).text();
            let reads: u64 = info_field(&stats, "io_threaded_reads_processed").parse().unwrap();
            assert!(reads > 0, "round {round}: {stats}");
            set_io_threads(&mut admin, "1");
            expect_io_threads(&srv, &mut admin, 0);
            for (k, s) in keys.iter().zip(&mut seen) {
                *s = wait_counter_above(&mut admin, k, *s);
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut done: Vec<_> = workers.into_iter().map(|h| h.join().expect("worker")).collect();
        for (c, (r, n)) in done.iter_mut().enumerate() {
            assert!(*n > 0, "client {c} never ran");
            // The same connection, still served, and nothing ran twice.
            assert_eq!(r.cmd(&["INCR", &keys[c]]), Reply::Int(*n + 1), "client {c}");
        }
        let log = srv.log();
        assert!(!log.contains("not cancelled in time"), "{log}");
    }
);

e2e!(
    ringkv_only fn blocked_subscribed_and_multi_clients_survive_io_threads_switches(b) {
        let srv = b.start(Opts::new().arg("io-threads", "1"));
        let mut admin = srv.raw();
        let mut waiter = srv.raw();
        let mut sub = srv.raw();
        let mut multi = srv.raw();
        let mut half = srv.raw();
        let id = |r: &mut ringkv_e2e::Raw| match r.cmd(&["CLIENT", "ID"]) {
            Reply::Int(id) => id,
            other => panic!("CLIENT ID: {other:?}"),
        };
        let ids = [id(&mut waiter), id(&mut sub), id(&mut multi), id(&mut half)];
        sub.send(&ringkv_e2e::raw::encode_str(&["SUBSCRIBE", "ch"]));
        assert_eq!(
            sub.read_reply(),
            Reply::Array(vec![Reply::bulk("subscribe"), Reply::bulk("ch"), Reply::Int(1)])
        );
        // Blocked, with a command pipelined behind it.
        waiter.send(&ringkv_e2e::raw::encode_str(&["BLPOP", "q", "0"]));
        waiter.send(&ringkv_e2e::raw::encode_str(&["GET", "after"]));
        assert_eq!(multi.cmd(&["MULTI"]), Reply::status("OK"));
        assert_eq!(multi.cmd(&["INCR", "m"]), Reply::status("QUEUED"));
        // Half a command, the rest sent after the switches.
        let set = ringkv_e2e::raw::encode_str(&["SET", "half", "carried"]);
        let (first, rest) = set.split_at(set.len() / 2);
        half.send(first);
        let deadline = Instant::now() + Duration::from_secs(10);
        while info_field(&admin.cmd(&["INFO", "clients"]).text(), "blocked_clients") != "1" {
            assert!(Instant::now() < deadline, "BLPOP never blocked");
            std::thread::sleep(Duration::from_millis(10));
        }

        let check_ids = |admin: &mut ringkv_e2e::Raw| {
            let list = admin.cmd(&["CLIENT", "LIST"]).text();
            for id in ids {
                assert!(list.contains(&format!("id={id} ")), "{id} missing: {list}");
            }
        };
        set_io_threads(&mut admin, "3");
        expect_io_threads(&srv, &mut admin, 2);
        check_ids(&mut admin);
        assert_eq!(admin.cmd(&["PUBLISH", "ch", "one"]), Reply::Int(1));
        assert_eq!(
            sub.read_reply(),
            Reply::Array(vec![Reply::bulk("message"), Reply::bulk("ch"), Reply::bulk("one")])
        );
        assert_eq!(multi.cmd(&["INCR", "m"]), Reply::status("QUEUED"));

        set_io_threads(&mut admin, "1");
        expect_io_threads(&srv, &mut admin, 0);
        check_ids(&mut admin);
        // The transaction begun inline, continued threaded, runs inline.
        assert_eq!(multi.cmd(&["EXEC"]), Reply::Array(vec![Reply::Int(1), Reply::Int(2)]));
        half.send(rest);
        assert_eq!(half.read_reply(), Reply::status("OK"));
        assert_eq!(admin.cmd(&["PUBLISH", "ch", "two"]), Reply::Int(1));
        assert_eq!(
            sub.read_reply(),
            Reply::Array(vec![Reply::bulk("message"), Reply::bulk("ch"), Reply::bulk("two")])
        );
        assert_eq!(multi.cmd(&["MULTI"]), Reply::status("OK"));
        assert_eq!(multi.cmd(&["INCR", "m"]), Reply::status("QUEUED"));

        set_io_threads(&mut admin, "4");
        expect_io_threads(&srv, &mut admin, 3);
        check_ids(&mut admin);
        assert_eq!(multi.cmd(&["EXEC"]), Reply::Array(vec![Reply::Int(3)]));
        // Blocked through three switches: served now, then the command
        // behind it.
        assert_eq!(admin.cmd(&["SET", "after", "yes"]), Reply::status("OK"));
        assert_eq!(admin.cmd(&["RPUSH", "q", "x"]), Reply::Int(1));
        assert_eq!(waiter.read_reply(), Reply::Array(vec![Reply::bulk("q"), Reply::bulk("x")]));
        assert_eq!(waiter.read_reply(), Reply::bulk("yes"));
        // Blocked again, threaded, and served inline.
        waiter.send(&ringkv_e2e::raw::encode_str(&["BLPOP", "q", "0"]));
        let deadline = Instant::now() + Duration::from_secs(10);
        while info_field(&admin.cmd(&["INFO", "clients"]).text(), "blocked_clients") != "1" {
            assert!(Instant::now() < deadline, "BLPOP never blocked");
            std::thread::sleep(Duration::from_millis(10));
        }
        set_io_threads(&mut admin, "1");
        expect_io_threads(&srv, &mut admin, 0);
        assert_eq!(admin.cmd(&["RPUSH", "q", "y"]), Reply::Int(1));
        assert_eq!(waiter.read_reply(), Reply::Array(vec![Reply::bulk("q"), Reply::bulk("y")]));
        assert_eq!(admin.cmd(&["PUBLISH", "ch", "three"]), Reply::Int(1));
        assert_eq!(
            sub.read_reply(),
            Reply::Array(vec![Reply::bulk("message"), Reply::bulk("ch"), Reply::bulk("three")])
        );
        check_ids(&mut admin);
        assert_eq!(half.cmd(&["GET", "half"]), Reply::bulk("carried"));
    }
);

e2e!(
    ringkv_only fn threaded_start_goes_inline_and_back_keeping_its_clients(b) {
        let srv = b.start(spread("3"));
        let mut admin = srv.raw();
        let mut clients: Vec<_> = (0..6).map(|_| srv.raw()).collect();
        for (i, r) in clients.iter_mut().enumerate() {
            assert_eq!(r.cmd(&["SET", &format!("k{i}"), "0"]), Reply::status("OK"));
        }
        expect_io_threads(&srv, &mut admin, 2);
        for round in 1..=3i64 {
            set_io_threads(&mut admin, "1");
            expect_io_threads(&srv, &mut admin, 0);
            let threads = admin.cmd(&["INFO", "threads"]).text();
            assert_eq!(info_field(&threads, "io_threads_active"), "0", "{threads}");
            for (i, r) in clients.iter_mut().enumerate() {
                assert_eq!(r.cmd(&["INCR", &format!("k{i}")]), Reply::Int(2 * round - 1));
            }
            // With the default pool, and then every thread taking clients.
            set_io_threads(&mut admin, "3");
            expect_io_threads(&srv, &mut admin, 2);
            for (i, r) in clients.iter_mut().enumerate() {
                assert_eq!(r.cmd(&["INCR", &format!("k{i}")]), Reply::Int(2 * round));
            }
        }
        // Out of range is still refused, and changes nothing.
        match admin.cmd(&["CONFIG", "SET", "io-threads", "0"]) {
            Reply::Error(e) => assert!(e.starts_with("ERR CONFIG SET failed"), "{e}"),
            other => panic!("io-threads 0: {other:?}"),
        }
        assert_eq!(
            admin.cmd(&["CONFIG", "GET", "io-threads"]),
            Reply::Array(vec![Reply::bulk("io-threads"), Reply::bulk("3")])
        );
        let threads = admin.cmd(&["INFO", "threads"]).text();
        assert_eq!(info_field(&threads, "io_threads_active"), "2", "{threads}");
    }
);

e2e!(
    /// CONFIG SET io-threads from 1 when the IO threads cannot all get
    /// their descriptors: the server stays in inline mode with every
    /// connection, its data and its listener, rather than stopping, and
    /// says so in its log.
    ringkv_only fn io_threads_that_cannot_start_leave_the_server_inline(b) {
        // maxclients comes down to 32. 31 clients, the listener and the
        // standard streams leave at most 29 descriptors: 23 IO threads
        // need 46 (two each).
        let srv = b.start(Opts::new().open_files(64, 64).arg("io-threads", "1"));
        std::thread::sleep(Duration::from_millis(200));
        let mut held: Vec<_> = (0..31).map(|_| srv.raw()).collect();
        for (i, r) in held.iter_mut().enumerate() {
            assert_eq!(r.cmd(&["SET", &format!("k{i}"), &format!("v{i}")]), Reply::status("OK"));
        }
        assert_eq!(held[0].cmd(&["CONFIG", "SET", "io-threads", "24"]), Reply::status("OK"));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !srv.log().contains("io-threads stays 1") {
            assert!(Instant::now() < deadline, "no word of the failed switch:\n{}", srv.log());
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(srv.pid().is_some_and(|p| std::path::Path::new(&format!("/proc/{p}")).exists()));
        for (i, r) in held.iter_mut().enumerate() {
            assert_eq!(r.cmd(&["GET", &format!("k{i}")]), Reply::bulk(&format!("v{i}")), "client {i}");
        }
        assert_eq!(
            held[0].cmd(&["CONFIG", "GET", "io-threads"]),
            Reply::Array(vec![Reply::bulk("io-threads"), Reply::bulk("1")])
        );
        assert!(io_thread_names(&srv, 0).is_empty());
        let mut late = srv.raw();
        assert_eq!(late.cmd(&["GET", "k30"]), Reply::bulk("v30"));
        // Fewer threads fit: threaded mode comes up with everyone still on.
        drop(late);
        assert_eq!(held[0].cmd(&["CONFIG", "SET", "io-threads", "3"]), Reply::status("OK"));
        assert_eq!(io_thread_names(&srv, 2).len(), 2);
        for (i, r) in held.iter_mut().enumerate() {
            assert_eq!(r.cmd(&["GET", &format!("k{i}")]), Reply::bulk(&format!("v{i}")), "client {i}");
        }
    }
);
