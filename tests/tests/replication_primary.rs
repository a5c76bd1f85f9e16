//! ringkv as a primary: Valkey 8.1 and redis-server 7.0 replicate from it
//! (full sync from the fork-less snapshot, the stream, partial resync from
//! the backlog, a backlog too small for the gap), WAIT, a replica that
//! stops reading cut off by its output-buffer limit, a replica killed in
//! the middle of its transfer, and zero-copy sends to a replica in another
//! network namespace.

use std::time::{Duration, Instant};

use ringkv_e2e::dataset::{fill, plain_view, random_write};
use ringkv_e2e::netns::{NETNS, Netns};
use ringkv_e2e::replication::{
    assert_same, both_follow_a_write, follow, handshake_line, incr_files_text, replica_states,
    settled_view, stat, sync_read_bytes, wait_caught_up, writes_acknowledged_by_wait,
};
use ringkv_e2e::server::TempDir;
use ringkv_e2e::v::{bulk, int_of, ok, text};
use ringkv_e2e::{Backend, Opts, Rng, Server, e2e, info_field, q, query, within};

/// A "remote" host: a network namespace over a veth pair (one at a time),
/// or `None` (the test is skipped, saying why) where this machine cannot
/// make one or lacks one of `tools`.
fn remote_host(tools: &[&str]) -> Option<(std::sync::MutexGuard<'static, ()>, Netns)> {
    let missing = tools
        .iter()
        .find(|t| ringkv_e2e::netns::run(&[t, "-V"]).is_err());
    if !Netns::available() || missing.is_some() {
        eprintln!("skipped: needs root, iproute2 {tools:?} for a network namespace");
        return None;
    }
    let guard = NETNS.lock().unwrap_or_else(|e| e.into_inner());
    match Netns::create("rkvrepl", "10.78.0") {
        Ok(ns) => Some((guard, ns)),
        Err(e) => {
            eprintln!("skipped: cannot create a network namespace: {e}");
            None
        }
    }
}

/// A ringkv primary that the namespace can reach.
fn primary_for(b: Backend, ns: &Netns) -> Server {
    b.start(
        Opts::new()
            .bind(&["127.0.0.1", &ns.host_addr()])
            .arg("protected-mode", "no"),
    )
}

/// A process that is killed when the test ends, passing or not.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A Valkey 8.1 replica of `p` inside the namespace, on `port`.
fn valkey_in(ns: &Netns, port: u16, p: &Server, dir: &TempDir) -> Reaped {
    let log = std::fs::File::create(dir.path().join("valkey.log")).unwrap();
    let valkey = ringkv_e2e::server::valkey_binary();
    let (port, primary_port) = (port.to_string(), p.port.to_string());
    ns.spawn(
        &[
            valkey.to_str().unwrap(),
            "--port",
            &port,
            "--bind",
            &ns.inner_addr(),
            "--save",
            "",
            "--appendonly",
            "no",
            "--protected-mode",
            "no",
            "--dir",
            dir.path().to_str().unwrap(),
            "--replicaof",
            &ns.host_addr(),
            &primary_port,
        ],
        log,
    )
    .map(Reaped)
    .expect("start Valkey in the namespace")
}

/// A peer that will replicate from us.
fn peer(b: Backend) -> Server {
    b.start(Opts::new())
}

fn replicate_from_ringkv(b: Backend, peer_backend: Backend, seed: u64) {
    let p = b.server();
    let pc = &mut p.client();
    fill(pc);
    let r = peer(peer_backend);
    let rc = &mut r.client();
    follow(rc, &p);
    wait_caught_up(pc, rc);
    assert_same(&plain_view(rc), &plain_view(pc), "after the full sync");
    let mut rng = Rng::new(seed);
    for _ in 0..1500 {
        random_write(pc, &mut rng);
    }
    let _ = q(pc, "SELECT 0");
    // A script's writes travel as their effects (MULTI/EXEC).
    let script = "redis.call('SET', 'lua:a', ARGV[1]); redis.call('INCR', 'lua:n'); return 1";
    for i in 0..3 {
        assert_eq!(
            int_of(&query(pc, &["EVAL", script, "0", &i.to_string()])),
            1
        );
    }
    let want = settled_view(pc);
    wait_caught_up(pc, rc);
    assert_same(&plain_view(rc), &want, "after the stream");
    assert_eq!(text(&q(rc, "GET lua:n")), "3");
    // What the primary reports.
    let info = text(&q(pc, "INFO replication"));
    assert_eq!(info_field(&info, "role"), "master");
    assert_eq!(info_field(&info, "connected_slaves"), "1");
    let slave0 = info_field(&info, "slave0");
    assert!(
        slave0.starts_with(&format!("ip=127.0.0.1,port={},state=online,", r.port)),
        "{slave0}"
    );
    assert_eq!(info_field(&info, "repl_backlog_active"), "1");
    let rinfo = text(&q(rc, "INFO replication"));
    assert_eq!(
        info_field(&rinfo, "master_replid"),
        info_field(&info, "master_replid")
    );
    let role = q(pc, "ROLE").unwrap();
    let redis::Value::Array(role) = role else {
        panic!("ROLE: {role:?}")
    };
    assert_eq!(role.len(), 3);
    assert_eq!(stat(pc, "stats", "sync_full"), "1");
}

e2e!(
    ringkv_only fn valkey_replicates_from_ringkv(b) {
        replicate_from_ringkv(b, Backend::Valkey, 21);
    }
);

e2e!(
    ringkv_only fn redis_7_replicates_from_ringkv(b) {
        replicate_from_ringkv(b, Backend::Redis, 22);
    }
);

e2e!(
    ringkv_only fn a_replica_that_reconnects_continues_from_the_backlog(b) {
        let p = b.server();
        let pc = &mut p.client();
        fill(pc);
        let r = peer(Backend::Valkey);
        let rc = &mut r.client();
        follow(rc, &p);
        wait_caught_up(pc, rc);
        let mut rng = Rng::new(5);
        for round in 0..3 {
            assert_eq!(int_of(&q(rc, "CLIENT KILL TYPE master")), 1, "round {round}");
            for _ in 0..200 {
                random_write(pc, &mut rng);
            }
            let _ = q(pc, "SELECT 0");
            let want = settled_view(pc);
            wait_caught_up(pc, rc);
            assert_same(&plain_view(rc), &want, &format!("round {round}"));
        }
        assert_eq!(stat(pc, "stats", "sync_full"), "1", "no second full sync");
        let ok_count: u64 = stat(pc, "stats", "sync_partial_ok").parse().unwrap();
        assert!(ok_count >= 3, "sync_partial_ok {ok_count}");
    }
);

e2e!(
    ringkv_only fn a_gap_larger_than_the_backlog_means_a_full_resync(b) {
        let p = b.start(Opts::new().arg("repl-backlog-size", "16384"));
        let pc = &mut p.client();
        let r = peer(Backend::Valkey);
        let rc = &mut r.client();
        follow(rc, &p);
        wait_caught_up(pc, rc);
        // The replica is frozen and its link cut from our side; 200 KB
        // of writes happen meanwhile, far more than the backlog keeps.
        let pid = r.pid().expect("running") as i32;
        // SAFETY: signals to the Valkey process this test started.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        assert_eq!(int_of(&q(pc, "CLIENT KILL TYPE replica")), 1);
        let v = "v".repeat(1000);
        for i in 0..200 {
            assert_eq!(query(pc, &["SET", &format!("k{i}"), &v]), ok());
        }
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGCONT) };
        wait_caught_up(pc, rc);
        assert_same(&plain_view(rc), &plain_view(pc), "after the full resync");
        assert_eq!(stat(pc, "stats", "sync_full"), "2");
        let histlen: u64 = stat(pc, "replication", "repl_backlog_histlen").parse().unwrap();
        assert!(histlen <= 16384, "histlen {histlen}");
    }
);

e2e!(
    ringkv_only fn wait_counts_the_replicas_that_acknowledged(b) {
        let p = b.server();
        let pc = &mut p.client();
        // No replica: WAIT 0 answers at once, WAIT 1 after its timeout.
        assert_eq!(int_of(&q(pc, "WAIT 0 0")), 0);
        let t = Instant::now();
        assert_eq!(int_of(&q(pc, "WAIT 1 200")), 0);
        assert!(t.elapsed() >= Duration::from_millis(190), "{:?}", t.elapsed());
        let r = peer(Backend::Valkey);
        let rc = &mut r.client();
        follow(rc, &p);
        wait_caught_up(pc, rc);
        // The GETACK is answered at once (not at the next 1 s ACK).
        writes_acknowledged_by_wait(pc, rc, Duration::from_millis(500));
        // More replicas than there are: the count, after the timeout.
        assert_eq!(int_of(&q(pc, "WAIT 2 100")), 1);
        assert_eq!(
            q(pc, "WAIT 1 -1").unwrap_err(),
            "ERR timeout is negative"
        );
    }
);

e2e!(
    ringkv_only fn a_replica_that_stops_reading_is_cut_off_at_its_output_limit(b) {
        // A backlog smaller than the writes it misses: it syncs in full.
        let p = b.start(
            Opts::new()
                .arg_multi("client-output-buffer-limit", &["replica", "1mb", "0", "0"])
                .arg("repl-backlog-size", "1mb"),
        );
        let pc = &mut p.client();
        let mut r = peer(Backend::Valkey);
        let rc = &mut r.client();
        follow(rc, &p);
        wait_caught_up(pc, rc);
        let pid = r.pid().expect("running") as i32;
        // SAFETY: signals to the Valkey process this test started.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        let v = "x".repeat(64 * 1024);
        for i in 0..200 {
            assert_eq!(query(pc, &["SET", &format!("big{i}"), &v]), ok());
        }
        within(10, "the stalled replica to be dropped", || {
            stat(pc, "replication", "connected_slaves") == "0"
        });
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGCONT) };
        // It comes back and syncs again in full.
        wait_caught_up(pc, rc);
        assert_eq!(int_of(&q(rc, "DBSIZE")), 200);
        assert_eq!(stat(pc, "stats", "sync_full"), "2");
        r.stop();
        let log = p.log();
        assert!(log.contains("overcoming of output buffer limits"), "{log}");
    }
);

/// A primary on `b` with 5,000 keys, each taking 200 µs to save: a
/// diskless transfer from it lasts about a second.
fn slow_capture_primary(b: Backend) -> Server {
    let p = b.start(
        Opts::new()
            .arg("rdb-key-save-delay", "200")
            .arg("enable-debug-command", "yes"),
    );
    assert_eq!(q(&mut p.client(), "DEBUG POPULATE 5000"), ok());
    p
}

e2e!(
    ringkv_only fn a_replica_killed_during_its_transfer_frees_the_snapshot(b) {
        let p = slow_capture_primary(b);
        let pc = &mut p.client();
        let mut r = peer(Backend::Valkey);
        let rc = &mut r.client();
        follow(rc, &p);
        within(10, "the transfer to start", || {
            sync_read_bytes(rc) > 0
        });
        // SAFETY: SIGKILL to the Valkey process this test started.
        unsafe { libc::kill(r.pid().expect("running") as i32, libc::SIGKILL) };
        let _ = r.wait_exit(Duration::from_secs(5));
        within(15, "the dead replica to be dropped", || {
            stat(pc, "replication", "connected_slaves") == "0"
        });
        // The frozen view is free again: a BGSAVE runs, and writes go on.
        assert_eq!(q(pc, "CONFIG SET rdb-key-save-delay 0"), ok());
        assert_eq!(q(pc, "SET after kill"), ok());
        within(10, "a BGSAVE to be accepted", || {
            q(pc, "BGSAVE").is_ok()
        });
        within(10, "the BGSAVE to end", || {
            stat(pc, "persistence", "rdb_bgsave_in_progress") == "0"
        });
        assert_eq!(stat(pc, "persistence", "rdb_last_bgsave_status"), "ok");
    }
);

/// The zero-copy mechanism a ringkv primary on `b` uses for its feeds:
/// `IORING_OP_SEND_ZC` under io_uring (this machine's kernel has it),
/// `MSG_ZEROCOPY` under epoll.
fn zero_copy_mechanism(b: Backend) -> &'static str {
    match b {
        Backend::IoUring => "IORING_OP_SEND_ZC",
        _ => "MSG_ZEROCOPY",
    }
}

/// A remote replica's link is up (10 s at most).
fn remote_synced(ns: &Netns, port: u16) {
    let synced = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        ns.cli(&ns.inner_addr(), port, &["INFO", "replication"])
            .contains("master_link_status:up")
    });
    let info = ns.cli(&ns.inner_addr(), port, &["INFO", "replication"]);
    assert!(synced, "the remote replica did not sync: {info}");
}

/// 256 KiB of letters, different for each `i` (a block sent twice, or
/// out of place, shows).
fn big_value(i: usize) -> String {
    (0..256 * 1024)
        .map(|j| (b'a' + ((i * 7 + j) % 26) as u8) as char)
        .collect()
}

e2e!(
    // A Valkey replica in its own network namespace: the link is not
    // loopback, so the full sync's RDB and the stream's large writes go
    // out zero-copy — with IORING_OP_SEND_ZC under io_uring, MSG_ZEROCOPY
    // under epoll.
    ringkv_only fn large_writes_reach_a_remote_replica_zero_copy(b) {
        let Some((_guard, ns)) = remote_host(&[]) else {
            return;
        };
        let p = primary_for(b, &ns);
        let pc = &mut p.client();
        // About 2 MB of RDB, sent from buffers of 1 MB or more: zero-copy.
        assert_eq!(q(pc, "CONFIG SET rdbcompression no"), ok());
        for i in 0..8 {
            assert_eq!(query(pc, &["SET", &format!("pre{i}"), &big_value(100 + i)]), ok());
        }
        let dir = TempDir::new("zc-replica");
        let replica = valkey_in(&ns, 7399, &p, &dir);
        let cli = |args: &[&str]| ns.cli(&ns.inner_addr(), 7399, args);
        remote_synced(&ns, 7399);
        let stats = text(&q(pc, "INFO stats"));
        let rdb_writes: u64 = info_field(&stats, "zerocopy_writes").parse().unwrap();
        let rdb_bytes: u64 = info_field(&stats, "zerocopy_bytes").parse().unwrap();
        assert!(rdb_writes >= 1 && rdb_bytes >= 2 << 20, "the RDB: {stats}");
        for i in 0..8 {
            let got = cli(&["GET", &format!("pre{i}")]);
            assert!(got.trim_end() == big_value(100 + i), "pre{i} differs on the replica");
        }
        for i in 0..20 {
            assert_eq!(query(pc, &["SET", &format!("big{i}"), &big_value(i)]), ok());
        }
        assert_eq!(query(pc, &["SET", "last", "1"]), ok());
        let arrived = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(100));
            cli(&["GET", "last"]).trim() == "1"
        });
        assert!(arrived, "the writes did not reach the remote replica");
        for i in 0..20 {
            let got = cli(&["GET", &format!("big{i}")]);
            assert!(got.trim_end() == big_value(i), "big{i} differs on the replica");
        }
        let mechanism = zero_copy_mechanism(b);
        let used = format!("go zero-copy with {mechanism}");
        assert!(p.log().contains(&used), "no '{used}' in the log:\n{}", p.log());
        let stats = text(&q(pc, "INFO stats"));
        let writes: u64 = info_field(&stats, "zerocopy_writes").parse().unwrap();
        let bytes: u64 = info_field(&stats, "zerocopy_bytes").parse().unwrap();
        assert!(writes > rdb_writes && bytes >= rdb_bytes + (10 << 10), "the stream: {stats}");
        within(10, "every zero-copy send to complete", || {
            info_field(&text(&q(pc, "INFO stats")), "zerocopy_in_flight") == "0"
        });
        // A veth delivers locally: the kernel copies every one of them (and
        // says so, through either mechanism), and the feed goes back to
        // ordinary sends once it has seen that.
        let stats = text(&q(pc, "INFO stats"));
        assert_eq!(
            info_field(&stats, "zerocopy_copied"),
            info_field(&stats, "zerocopy_writes"),
            "{stats}"
        );
        if writes >= 32 {
            assert!(p.log().contains("all copied by the kernel"), "{}", p.log());
        }
        drop(replica);
        drop(ns);
    }
);

e2e!(
    // The replica dies while zero-copy sends to it are still queued on a
    // slow link: the feed ends, waits for the kernel to let go of every
    // send's buffer before it closes the socket, and leaks none.
    ringkv_only fn a_remote_replica_killed_mid_stream_drains_its_zero_copy_sends(b) {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        let Some((_guard, ns)) = remote_host(&["tc"]) else {
            return;
        };
        let p = primary_for(b, &ns);
        let pc = &mut p.client();
        let dir = TempDir::new("zc-killed");
        let replica = valkey_in(&ns, 7397, &p, &dir);
        remote_synced(&ns, 7397);
        // 8 Mbit/s on our end: sent segments wait in the qdisc, and their
        // zero-copy sends stay in flight.
        let veth = ns.host_veth();
        let shaped = ringkv_e2e::netns::run(&[
            "tc", "qdisc", "add", "dev", &veth, "root", "tbf", "rate", "8mbit", "burst",
            "32kbit", "latency", "400ms",
        ]);
        assert!(shaped.is_ok(), "no tbf qdisc: {shaped:?}");
        let stop = Arc::new(AtomicBool::new(false));
        let port = p.port;
        let writer = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                    .unwrap()
                    .get_connection()
                    .unwrap();
                let deadline = Instant::now() + Duration::from_secs(20);
                let mut n = 0;
                while n < 60 && !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    query(&mut c, &["SET", &format!("k{n}"), &big_value(n)]).unwrap();
                    n += 1;
                }
                n
            })
        };
        let in_flight =
            |c: &mut redis::Connection| info_field(&text(&q(c, "INFO stats")), "zerocopy_in_flight");
        let mut seen = String::new();
        within(10, "zero-copy sends in flight", || {
            seen = in_flight(pc);
            seen != "0"
        });
        drop(replica);
        stop.store(true, Ordering::Relaxed);
        let writes = writer.join().unwrap();
        assert!(writes > 0);
        within(10, "the primary to drop the dead replica", || {
            stat(pc, "replication", "connected_slaves") == "0"
        });
        within(5, "the killed feed's sends to complete", || in_flight(pc) == "0");
        let log = p.log();
        let used = format!("go zero-copy with {}", zero_copy_mechanism(b));
        assert!(log.contains(&used), "no '{used}' in the log:\n{log}");
        assert!(!log.contains("leaked"), "{seen} in flight at the kill; the log:\n{log}");
        let stats = text(&q(pc, "INFO stats"));
        let zc: u64 = info_field(&stats, "zerocopy_writes").parse().unwrap();
        assert!(zc > 0, "{stats}");
        assert_eq!(q(pc, "SET after kill"), ok());
        drop(ns);
    }
);

/// A writer of random commands on its own connection until `stop`.
fn writer(
    port: u16,
    seed: u64,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .unwrap()
            .get_connection()
            .unwrap();
        let mut rng = Rng::new(seed);
        let mut n = 0;
        let deadline = Instant::now() + Duration::from_secs(30);
        while !stop.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < deadline {
            random_write(&mut c, &mut rng);
            n += 1;
        }
        n
    })
}

e2e!(
    ringkv_only fn links_cut_at_random_points_under_writes_still_converge(b) {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        // A slow full sync (20 µs a key), so that some cuts land in it.
        let p = b.start(Opts::new().arg("rdb-key-save-delay", "20"));
        let pc = &mut p.client();
        fill(pc);
        for i in 0..20 {
            let v = format!("bulk-{i}");
            let args: Vec<String> = (0..500).map(|j| format!("f{j}")).collect();
            let mut cmd = vec!["SADD".to_string(), format!("pad{i}")];
            cmd.extend(args);
            cmd.push(v);
            let refs: Vec<&str> = cmd.iter().map(String::as_str).collect();
            query(pc, &refs).unwrap();
        }
        let r = peer(Backend::Valkey);
        let rc = &mut r.client();
        follow(rc, &p);
        let stop = Arc::new(AtomicBool::new(false));
        let w = writer(p.port, 77, stop.clone());
        let mut rng = Rng::new(78);
        let mut cuts = 0;
        for _ in 0..8 {
            std::thread::sleep(Duration::from_millis(50 + rng.below(250)));
            // Either side cuts: the replica drops its primary, or we drop
            // the replica.
            let n = if rng.below(2) == 0 {
                int_of(&q(rc, "CLIENT KILL TYPE master"))
            } else {
                int_of(&q(pc, "CLIENT KILL TYPE replica"))
            };
            cuts += n;
        }
        stop.store(true, Ordering::Relaxed);
        let writes = w.join().unwrap();
        assert!(writes > 100, "only {writes} writes");
        assert!(cuts >= 3, "only {cuts} cuts found a link");
        let _ = q(pc, "SELECT 0");
        let want = settled_view(pc);
        wait_caught_up(pc, rc);
        assert_same(&plain_view(rc), &want, "after the cuts");
    }
);

e2e!(
    ringkv_only fn a_slow_link_that_goes_down_and_up_still_converges(b) {
        let Some((_guard, ns)) = remote_host(&["tc"]) else {
            return;
        };
        let p = primary_for(b, &ns);
        let pc = &mut p.client();
        fill(pc);
        // Delay and loss on our end of the pair where the kernel has netem;
        // where it has not (this machine's), a slow link (8 Mbit/s, tbf).
        let veth = ns.host_veth();
        let tc = |q: &[&str]| {
            let mut args = vec!["tc", "qdisc", "add", "dev", &veth, "root"];
            args.extend_from_slice(q);
            ringkv_e2e::netns::run(&args)
        };
        let shaped = tc(&["netem", "delay", "10ms", "2ms", "loss", "1%"])
            .or_else(|_| tc(&["tbf", "rate", "8mbit", "burst", "32kbit", "latency", "400ms"]));
        assert!(shaped.is_ok(), "no qdisc to shape the link: {shaped:?}");
        let dir = TempDir::new("netem-replica");
        let replica = valkey_in(&ns, 7398, &p, &dir);
        let mut rc = None;
        for _ in 0..100 {
            std::thread::sleep(Duration::from_millis(100));
            if let Ok(c) = redis::Client::open(format!("redis://{}:7398/", ns.inner_addr()))
                .and_then(|c| c.get_connection())
            {
                rc = Some(c);
                break;
            }
        }
        let rc = &mut rc.expect("connect to the replica over the veth");
        wait_caught_up(pc, rc);
        let mut rng = Rng::new(99);
        for round in 0..2 {
            for _ in 0..300 {
                random_write(pc, &mut rng);
            }
            // The link goes down for a moment in the middle of the stream.
            ringkv_e2e::netns::run(&["ip", "link", "set", &veth, "down"]).unwrap();
            for _ in 0..100 {
                random_write(pc, &mut rng);
            }
            std::thread::sleep(Duration::from_millis(300));
            ringkv_e2e::netns::run(&["ip", "link", "set", &veth, "up"]).unwrap();
            let _ = q(pc, "SELECT 0");
            let want = settled_view(pc);
            wait_caught_up(pc, rc);
            assert_same(&plain_view(rc), &want, &format!("round {round}"));
        }
        drop(replica);
        drop(ns);
    }
);

e2e!(
    ringkv_only fn malformed_replication_commands_get_errors(b) {
        let p = b.server();
        let pc = &mut p.client();
        assert_eq!(
            q(pc, "PSYNC x notanumber").unwrap_err(),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(
            q(pc, "PSYNC").unwrap_err(),
            "ERR wrong number of arguments for 'psync' command"
        );
        assert_eq!(
            q(pc, "REPLCONF listening-port abc").unwrap_err(),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(
            q(pc, "REPLCONF nonsense 1").unwrap_err(),
            "ERR Unrecognized REPLCONF option: nonsense"
        );
        assert_eq!(q(pc, "REPLCONF capa eof capa psync2"), ok());
        // The server is fine.
        assert_eq!(q(pc, "SET k v"), ok());
        assert_eq!(stat(pc, "replication", "connected_slaves"), "0");
    }
);

e2e!(
    ringkv_only fn a_full_sync_under_writes_converges(b) {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        // Big enough that the stream has data waiting when the RDB ends.
        let p = b.start(Opts::new().arg("enable-debug-command", "yes"));
        let pc = &mut p.client();
        assert_eq!(q(pc, "DEBUG POPULATE 10000"), ok());
        let stop = Arc::new(AtomicBool::new(false));
        let w = writer(p.port, 31, stop.clone());
        let r = peer(Backend::Valkey);
        let rc = &mut r.client();
        follow(rc, &p);
        within(30, "the replica's link to come up", || {
            info_field(&text(&q(rc, "INFO replication")), "master_link_status") == "up"
        });
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Relaxed);
        assert!(w.join().unwrap() > 0);
        let _ = q(pc, "SELECT 0");
        let want = settled_view(pc);
        wait_caught_up(pc, rc);
        assert_eq!(int_of(&q(rc, "DBSIZE")), int_of(&q(pc, "DBSIZE")));
        assert_same(&plain_view(rc), &want, "after a full sync under writes");
    }
);

e2e!(
    ringkv_only fn a_restarted_primary_lets_its_replica_continue(b) {
        let dir = TempDir::new("primary-restart");
        let mut p = b.start(Opts::new().dir(dir.path()));
        let r = peer(Backend::Valkey);
        let rc = &mut r.client();
        {
            let pc = &mut p.client();
            fill(pc);
            follow(rc, &p);
            wait_caught_up(pc, rc);
            let _ = q(pc, "SHUTDOWN");
        }
        p.wait_exit(Duration::from_secs(10));
        // Back on another port: the replica follows it there and asks to
        // continue under the id it knew, which the file carried over.
        let p = b.start(Opts::new().dir(dir.path()));
        p.wait_loaded();
        let pc = &mut p.client();
        assert_eq!(q(pc, "SET after restart"), ok());
        follow(rc, &p);
        wait_caught_up(pc, rc);
        assert_same(&plain_view(rc), &plain_view(pc), "after the restart");
        assert_eq!(
            stat(pc, "stats", "sync_full"),
            "0",
            "primary:\n{}\nreplica:\n{}",
            p.log(),
            r.log()
        );
        assert_eq!(stat(pc, "stats", "sync_partial_ok"), "1");
    }
);

e2e!(
    ringkv_only fn min_replicas_to_write_refuses_writes_until_a_replica_acks(b) {
        let p = b.start(Opts::new().arg("min-replicas-to-write", "1"));
        let pc = &mut p.client();
        assert_eq!(
            q(pc, "SET k v").unwrap_err(),
            "NOREPLICAS Not enough good replicas to write."
        );
        // Reads are served.
        assert_eq!(q(pc, "GET k"), Ok(redis::Value::Nil));
        let r = peer(Backend::Valkey);
        let rc = &mut r.client();
        follow(rc, &p);
        wait_caught_up(pc, rc);
        // Cron counts the replica once it has ACKed.
        within(10, "a good replica to be counted", || q(pc, "SET k v").is_ok());
        wait_caught_up(pc, rc);
        assert_eq!(text(&q(rc, "GET k")), "v");
    }
);

/// The primary's CLIENT LIST line for its one replica, with the fields
/// whose values depend on the run (ids, ports, times, byte counts) blanked.
fn replica_line_shape(pc: &mut redis::Connection) -> (String, String) {
    let list = text(&q(pc, "CLIENT LIST TYPE replica"));
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 1, "{list}");
    let varying = [
        "id",
        "addr",
        "fd",
        "age",
        "idle",
        "rbs",
        "tot-mem",
        "tot-net-in",
        "tot-net-out",
        "tot-cmds",
        "qbuf-free",
        "rbp",
        "argv-mem",
    ];
    let shape = lines[0]
        .split(' ')
        .map(|f| match f.split_once('=') {
            Some((k, _)) if varying.contains(&k) => format!("{k}=*"),
            Some((k, v)) if k == "laddr" => format!("{k}={}", v.split(':').next().unwrap()),
            _ => f.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ");
    let id = lines[0]
        .split(' ')
        .next()
        .unwrap()
        .trim_start_matches("id=")
        .to_string();
    (shape, id)
}

e2e!(
    ringkv_only fn a_replica_is_listed_and_killed_by_its_client_id_as_in_valkey(b) {
        // The same replica (Valkey 8.1) of a Valkey 8.1 primary and of ours.
        let vp = Backend::Valkey.start(Opts::new());
        let vr = peer(Backend::Valkey);
        follow(&mut vr.client(), &vp);
        wait_caught_up(&mut vp.client(), &mut vr.client());
        // Once the replica has ACKed (every second) its last command is
        // REPLCONF.
        let acked = |c: &mut redis::Connection| {
            within(10, "the replica's first ACK", || {
                replica_line_shape(c).0.contains(" cmd=replconf ")
            })
        };
        acked(&mut vp.client());
        let (want, _) = replica_line_shape(&mut vp.client());

        let p = b.server();
        let pc = &mut p.client();
        let r = peer(Backend::Valkey);
        let rc = &mut r.client();
        follow(rc, &p);
        wait_caught_up(pc, rc);
        acked(pc);
        let (got, id) = replica_line_shape(pc);
        assert_eq!(got, want);
        assert!(got.contains(" flags=S "), "{got}");
        // Listed among the others, by id; not a normal client.
        let all = text(&q(pc, "CLIENT LIST"));
        assert!(all.contains(&format!("id={id} ")), "{all}");
        let normal = text(&q(pc, "CLIENT LIST TYPE normal"));
        assert!(!normal.contains(" flags=S "), "{normal}");
        // CLIENT KILL by its id drops the link; the replica comes back by
        // a partial resync.
        assert_eq!(int_of(&query(pc, &["CLIENT", "KILL", "ID", &id])), 1);
        within(30, "the replica to reconnect", || {
            stat(pc, "stats", "sync_partial_ok") == "1" && stat(pc, "replication", "connected_slaves") == "1"
        });
        wait_caught_up(pc, rc);
        let (_, new_id) = replica_line_shape(pc);
        assert_ne!(new_id, id);
    }
);

/// What a diskless primary did for two replicas (of `first`'s kind,
/// then `second`'s) that REPLICAOF it one second apart, with
/// `repl-diskless-sync-delay` and `-max-replicas` as given: the replicas'
/// states while the second was listed, how many syncs it started (its
/// log's lines for them), and how long the first replica waited to be in
/// sync. Both replicas must end equal to the primary.
fn two_replicas_a_second_apart(
    primary: &Server,
    first: Backend,
    second: Backend,
    delay_s: u64,
    max_replicas: usize,
) -> (Vec<String>, usize, Duration) {
    let pc = &mut primary.client();
    for (name, v) in [
        ("repl-diskless-sync-delay", delay_s.to_string()),
        ("repl-diskless-sync-max-replicas", max_replicas.to_string()),
    ] {
        assert_eq!(query(pc, &["CONFIG", "SET", name, &v]), ok(), "{name}");
    }
    fill(pc);
    let (a, b) = (peer(first), peer(second));
    let (ac, bc) = (&mut a.client(), &mut b.client());
    let t = Instant::now();
    follow(ac, primary);
    within(10, "the first replica to be listed", || {
        replica_states(pc).len() == 1
    });
    std::thread::sleep(Duration::from_secs(1).saturating_sub(t.elapsed()));
    follow(bc, primary);
    within(10, "both replicas to be listed", || {
        replica_states(pc).len() == 2
    });
    let states = replica_states(pc);
    wait_caught_up(pc, ac);
    let waited = t.elapsed();
    wait_caught_up(pc, bc);
    both_follow_a_write(pc, ac, bc);
    let syncs = primary
        .log()
        .matches("Starting BGSAVE for SYNC with target: replicas sockets")
        .count();
    (states, syncs, waited)
}

e2e!(
    /// `repl-diskless-sync-delay`: a replica arriving within the delay
    /// shares the first one's sync (one snapshot streamed to both), as
    /// Valkey 8.1 (the oracle, run beside) does.
    ringkv_only fn replicas_arriving_within_the_diskless_delay_share_one_sync(b) {
        let valkey = Backend::Valkey.start(Opts::new());
        let (states, syncs, waited) =
            two_replicas_a_second_apart(&valkey, Backend::Valkey, Backend::Valkey, 3, 0);
        assert_eq!(states, ["wait_bgsave", "wait_bgsave"], "Valkey 8.1");
        assert_eq!(syncs, 1, "Valkey 8.1");
        // Valkey counts the wait in whole seconds of its clock: 2 to 4 s.
        assert!(waited >= Duration::from_millis(1900), "Valkey waited {waited:?}");
        for (first, second) in [(Backend::Valkey, b), (b, Backend::Valkey)] {
            let p = b.server();
            let (states, syncs, waited) = two_replicas_a_second_apart(&p, first, second, 3, 0);
            assert_eq!(states, ["wait_bgsave", "wait_bgsave"], "ringkv, {first:?} then {second:?}");
            assert_eq!(syncs, 1, "ringkv: {}", p.log());
            assert!(waited >= Duration::from_millis(2900), "ringkv waited {waited:?}");
        }
    }
);

e2e!(
    /// `repl-diskless-sync-max-replicas`: the sync starts once that many
    /// replicas wait, long before the delay is over.
    ringkv_only fn a_diskless_sync_starts_once_max_replicas_wait(b) {
        let valkey = Backend::Valkey.start(Opts::new());
        let (_, syncs, waited) =
            two_replicas_a_second_apart(&valkey, Backend::Valkey, Backend::Valkey, 60, 2);
        assert_eq!(syncs, 1, "Valkey 8.1");
        assert!(waited < Duration::from_secs(30), "Valkey waited {waited:?}");
        let p = b.server();
        let (_, syncs, waited) = two_replicas_a_second_apart(&p, Backend::Valkey, b, 60, 2);
        assert_eq!(syncs, 1, "ringkv: {}", p.log());
        assert!(waited < Duration::from_secs(30), "ringkv waited {waited:?}");
        // The first replica waited for the second one.
        assert!(waited >= Duration::from_millis(900), "ringkv waited {waited:?}");
    }
);

e2e!(
    /// WAITAOF counts the replicas whose own AOF has fsynced the writes
    /// (the `FACK` of their ACKs): a ringkv replica of a Valkey 8.1
    /// primary, Valkey and ringkv replicas of a ringkv primary; a replica
    /// without an AOF is never counted.
    ringkv_only fn waitaof_counts_replicas_whose_aof_has_the_writes(b) {
        for (primary, replica) in [(Backend::Valkey, b), (b, Backend::Valkey), (b, b)] {
            let what = format!("{replica:?} replica of {primary:?}");
            let p = primary.start(Opts::new());
            let pc = &mut p.client();
            let with_aof = replica.start(Opts::new().arg("appendonly", "yes"));
            let without = replica.start(Opts::new());
            let (ac, nc) = (&mut with_aof.client(), &mut without.client());
            follow(ac, &p);
            follow(nc, &p);
            wait_caught_up(pc, ac);
            wait_caught_up(pc, nc);
            assert_eq!(q(pc, "SET k 1"), ok());
            let counts = |c: &mut redis::Connection, line: &str| {
                let args: Vec<&str> = line.split(' ').collect();
                query(c, &args)
            };
            let pair = |l: i64, r: i64| Ok(redis::Value::Array(vec![redis::Value::Int(l), redis::Value::Int(r)]));
            let t = Instant::now();
            assert_eq!(counts(pc, "WAITAOF 0 1 5000"), pair(0, 1), "{what}");
            assert!(t.elapsed() < Duration::from_secs(4), "{what}: {:?}", t.elapsed());
            assert_eq!(counts(pc, "WAITAOF 0 2 500"), pair(0, 1), "{what}: only one has an AOF");
            // Both have the write itself (WAIT counts them).
            assert_eq!(int_of(&q(pc, "WAIT 2 5000")), 2, "{what}");
        }
    }
);

e2e!(
    /// A replica whose sync has not started (here the diskless delay,
    /// longer than its `repl-timeout`) is sent a newline a second, as
    /// Valkey's primary does: it does not time out and start over, and
    /// one full sync brings it in.
    ringkv_only fn a_replica_waiting_for_its_sync_is_kept_alive(b) {
        for (primary, replica) in [(Backend::Valkey, Backend::Valkey), (b, Backend::Valkey), (b, b)] {
            let what = format!("{replica:?} replica of {primary:?}");
            let p = primary.start(Opts::new().arg("repl-diskless-sync-delay", "4"));
            let pc = &mut p.client();
            fill(pc);
            let r = replica.start(Opts::new().arg("repl-timeout", "2"));
            let rc = &mut r.client();
            follow(rc, &p);
            wait_caught_up(pc, rc);
            assert_eq!(stat(pc, "stats", "sync_full"), "1", "{what}");
            assert_same(&plain_view(rc), &plain_view(pc), &what);
        }
    }
);

/// What subscribers on replicas of `replicas` backends get when a
/// message is published on a primary of `primary`'s.
fn published_on_replicas(primary: Backend, replicas: &[Backend]) -> Vec<String> {
    let p = primary.start(Opts::new().arg("repl-diskless-sync-delay", "0"));
    let pc = &mut p.client();
    let servers: Vec<Server> = replicas.iter().map(|b| b.server()).collect();
    let mut subscribers = Vec::new();
    for r in &servers {
        let rc = &mut r.client();
        follow(rc, &p);
        wait_caught_up(pc, rc);
        let mut sub = r.raw();
        sub.send(&ringkv_e2e::raw::encode_str(&["SUBSCRIBE", "news"]));
        let _ = sub.read_reply();
        subscribers.push(sub);
    }
    // Nobody listens on the primary itself.
    assert_eq!(int_of(&q(pc, "PUBLISH news hello")), 0);
    subscribers
        .iter_mut()
        .map(|s| match s.read_reply() {
            ringkv_e2e::Reply::Array(parts) => {
                parts.iter().map(|p| p.text()).collect::<Vec<_>>().join(" ")
            }
            other => format!("{other:?}"),
        })
        .collect()
}

e2e!(
    ringkv_only fn a_message_published_on_the_primary_reaches_subscribers_on_its_replicas(b) {
        // Valkey replicates PUBLISH to replicas (not to its AOF).
        let want = published_on_replicas(Backend::Valkey, &[Backend::Valkey]).remove(0);
        assert_eq!(want, "message news hello");
        assert_eq!(published_on_replicas(b, &[b, Backend::Valkey]), [want.clone(), want.clone()]);
        assert_eq!(published_on_replicas(Backend::Valkey, &[b]), [want]);
    }
);

/// A primary's AOF while it feeds a replica: its PINGs (every second
/// here), a WAIT's GETACK and a PUBLISH went to the replica; what of them
/// is in the file.
fn primary_aof_keeps(b: Backend) -> Vec<String> {
    let tmp = TempDir::new("primary-aof-repl-only");
    let aof = || {
        Opts::new()
            .aof_in(tmp.path())
            .arg("repl-ping-replica-period", "1")
            .arg("repl-diskless-sync-delay", "0")
    };
    let mut p = b.start(aof());
    let r = b.server();
    let (pc, rc) = (&mut p.client(), &mut r.client());
    follow(rc, &p);
    wait_caught_up(pc, rc);
    assert_eq!(q(pc, "SET before 1"), ok());
    let _ = q(pc, "PUBLISH news hello");
    assert_eq!(q(pc, "MULTI"), ok());
    let _ = q(pc, "PUBLISH news inside");
    let _ = q(pc, "SET inside 1");
    assert!(q(pc, "EXEC").is_ok());
    assert_eq!(int_of(&q(pc, "WAIT 1 5000")), 1);
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(q(pc, "SET after 1"), ok());
    wait_caught_up(pc, rc);
    assert_eq!(text(&q(rc, "GET inside")), "1");
    let want = plain_view(pc);
    let _ = q(pc, "SHUTDOWN NOSAVE");
    p.wait_exit(Duration::from_secs(10));
    let files = incr_files_text(tmp.path());
    let mut seen: Vec<String> = ["PING", "REPLCONF", "PUBLISH", "before", "inside", "after"]
        .iter()
        .map(|w| format!("{w}: {}", files.contains(w)))
        .collect();
    let back = b.start(aof());
    seen.push(format!(
        "loads back: {}",
        plain_view(&mut back.client()) == want
    ));
    seen
}

e2e!(
    ringkv_only fn a_primarys_aof_keeps_none_of_what_only_its_replicas_get(b) {
        let got = primary_aof_keeps(b);
        assert_eq!(got, primary_aof_keeps(Backend::Valkey));
        assert!(got.contains(&"PING: false".to_string()), "{got:?}");
    }
);

/// What both sides count for 2 MB of writes streamed to one replica: each
/// check as a line, so that a failure names it.
fn replication_traffic(primary: Backend, replica: Backend) -> Vec<String> {
    let p = primary.server();
    let r = replica.server();
    let (pc, rc) = (&mut p.client(), &mut r.client());
    follow(rc, &p);
    wait_caught_up(pc, rc);
    let value = "x".repeat(10_000);
    for i in 0..200 {
        assert_eq!(query(pc, &["SET", &format!("big{i}"), &value]), ok());
    }
    wait_caught_up(pc, rc);
    let mut checks = Vec::new();
    let mut check = |what: &str, holds: bool| checks.push(format!("{what}: {holds}"));
    let num = |c: &mut redis::Connection, f: &str| stat(c, "stats", f).parse::<u64>().unwrap();
    let kbps = |c: &mut redis::Connection, f: &str| stat(c, "stats", f).parse::<f64>().unwrap();
    let rate_seen = {
        let until = Instant::now() + Duration::from_secs(1);
        let mut seen = false;
        while !seen && Instant::now() < until {
            seen = kbps(pc, "instantaneous_output_repl_kbps") > 0.0
                && kbps(rc, "instantaneous_input_repl_kbps") > 0.0;
        }
        seen
    };
    check("repl kbps moved on both sides", rate_seen);
    for (c, side, way) in [
        (&mut *pc, "primary", "output"),
        (&mut *rc, "replica", "input"),
    ] {
        let n = num(c, &format!("total_net_repl_{way}_bytes"));
        let total = num(c, &format!("total_net_{way}_bytes"));
        check(
            &format!("{side} repl {way} ~ 2 MB"),
            (2_000_000..2_200_000).contains(&n),
        );
        check(&format!("{side} net {way} holds it"), total >= n);
    }
    let field = |c: &mut redis::Connection, name: &str| -> u64 {
        let list = text(&q(c, "CLIENT LIST TYPE replica"));
        let v = list
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='));
        v.expect("a replica line").parse().unwrap()
    };
    check(
        "its CLIENT LIST out ~ 2 MB",
        field(pc, "tot-net-out") >= 2_000_000,
    );
    let (cmds, net_in) = (field(pc, "tot-cmds"), field(pc, "tot-net-in"));
    // Its ACKs, once a second.
    within(5, "ACKs to be counted", || field(pc, "tot-cmds") > cmds);
    check(
        "its CLIENT LIST in grows with its ACKs",
        field(pc, "tot-net-in") > net_in,
    );
    checks
}

e2e!(
    ringkv_only fn replication_bytes_are_counted_as_valkey_counts_them(b) {
        let want = replication_traffic(Backend::Valkey, Backend::Valkey);
        assert!(want.iter().all(|c| c.ends_with("true")), "Valkey 8.1, the oracle: {want:?}");
        assert_eq!(replication_traffic(b, b), want, "ringkv to ringkv");
        assert_eq!(replication_traffic(b, Backend::Valkey), want, "ringkv to Valkey");
    }
);

/// Voluntary context switches (each a wake-up after a sleep) of `srv`'s
/// threads named `name`, summed.
fn wakeups_of(srv: &Server, name: &str) -> u64 {
    let pid = srv.pid().expect("server pid");
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("read /proc/PID/task")
        .filter_map(|e| {
            let dir = e.ok()?.path();
            let comm = std::fs::read_to_string(dir.join("comm")).ok()?;
            (comm.trim() == name).then_some(())?;
            let status = std::fs::read_to_string(dir.join("status")).ok()?;
            status
                .lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?
                .trim()
                .parse::<u64>()
                .ok()
        })
        .sum()
}

e2e!(
    ringkv_only fn reads_do_not_wake_the_thread_feeding_a_replica(b) {
        let p = b.server();
        let r = b.server();
        let (pc, rc) = (&mut p.client(), &mut r.client());
        follow(rc, &p);
        assert_eq!(query(pc, &["SET", "k", "v"]), ok());
        wait_caught_up(pc, rc);
        let before = wakeups_of(&p, "repl-feed");
        let started = Instant::now();
        // One GET per batch: each batch used to ring the feed's doorbell.
        for _ in 0..3_000 {
            assert_eq!(query(pc, &["GET", "k"]), bulk("v"));
        }
        let woke = wakeups_of(&p, "repl-feed") - before;
        // What still wakes it: its 100 ms tick and the replica's ACK each
        // second.
        let allowed = 30 + 20 * started.elapsed().as_secs();
        assert!(woke <= allowed, "3,000 GETs woke the feed {woke} times (allowed {allowed})");
        // A write after them still reaches the replica at once.
        assert_eq!(query(pc, &["SET", "k", "w"]), ok());
        within(2, "the write on the replica", || query(rc, &["GET", "k"]) == bulk("w"));
    }
);

/// The names of `srv`'s threads.
fn thread_names(srv: &Server) -> Vec<String> {
    threads(srv).into_iter().map(|(name, _)| name).collect()
}

/// The server's threads: each one's name and /proc/PID/task/TID.
fn threads(srv: &Server) -> Vec<(String, std::path::PathBuf)> {
    let pid = srv.pid().expect("server pid");
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("read /proc/PID/task")
        .filter_map(|e| {
            let dir = e.ok()?.path();
            let name = std::fs::read_to_string(dir.join("comm")).ok()?;
            Some((name.trim().to_string(), dir))
        })
        .collect()
}

e2e!(
    ringkv_only fn io_threads_send_the_stream_and_pass_it_on_when_their_number_changes(b) {
        let p = b.start(
            Opts::new()
                .arg("io-threads", "3")
                .arg("io-threads-adaptive", "no")
                .arg("repl-diskless-sync-delay", "0"),
        );
        let r = peer(Backend::Valkey);
        let (pc, rc) = (&mut p.client(), &mut r.client());
        follow(rc, &p);
        let feed_threads = || thread_names(&p).iter().filter(|n| *n == "repl-feed").count();
        let mut n = 0;
        let mut write_and_check = |pc: &mut redis::Connection, rc: &mut redis::Connection| {
            for _ in 0..200 {
                n += 1;
                assert_eq!(query(pc, &["SET", &format!("k{n}"), &n.to_string()]), ok());
            }
            // WAIT is answered by the replica's ACK, read by whichever
            // thread serves the stream.
            assert_eq!(int_of(&query(pc, &["WAIT", "1", "5000"])), 1);
            wait_caught_up(pc, rc);
            assert_eq!(query(rc, &["GET", &format!("k{n}")]), bulk(&n.to_string()));
            assert_eq!(int_of(&query(rc, &["DBSIZE"])), n as i64);
        };
        write_and_check(pc, rc);
        // Once the full sync is sent, the stream goes out from an IO
        // thread: the sync's own thread ends.
        within(5, "the feed thread to end", || feed_threads() == 0);
        write_and_check(pc, rc);
        // Inline mode has no IO threads: the stream gets a thread again...
        assert_eq!(query(pc, &["CONFIG", "SET", "io-threads", "1"]), ok());
        within(5, "a feed thread", || feed_threads() == 1);
        write_and_check(pc, rc);
        // ... and goes back to an IO thread when they return.
        assert_eq!(query(pc, &["CONFIG", "SET", "io-threads", "3"]), ok());
        within(5, "the feed thread to end again", || feed_threads() == 0);
        write_and_check(pc, rc);
        // One connection throughout: no second sync.
        assert_eq!(stat(pc, "stats", "sync_full"), "1");
        let info = text(&q(pc, "INFO replication"));
        assert_eq!(info_field(&info, "connected_slaves"), "1");
        // A replica that goes away is seen gone by the IO thread.
        drop(r);
        within(10, "the replica gone", || {
            info_field(&text(&q(pc, "INFO replication")), "connected_slaves") == "0"
        });
    }
);

/// Bytes the server's threads whose names start with `prefix` passed to
/// write-like system calls (sendfile(2) among them: `wchar` in
/// /proc/PID/task/TID/io; sends on sockets do not count).
fn threads_wchar(srv: &Server, prefix: &str) -> u64 {
    threads(srv)
        .into_iter()
        .filter(|(name, _)| name.starts_with(prefix))
        .filter_map(|(_, dir)| {
            let io = std::fs::read_to_string(dir.join("io")).ok()?;
            io.lines()
                .find_map(|l| l.strip_prefix("wchar: "))
                .and_then(|v| v.trim().parse::<u64>().ok())
        })
        .sum()
}

e2e!(
    ringkv_only fn with_io_threads_a_saved_rdb_is_sent_by_an_io_thread(b) {
        let p = b.start(
            Opts::new()
                .arg("io-threads", "3")
                .arg("io-threads-adaptive", "no")
                .arg("repl-diskless-sync", "no")
                .arg("rdbcompression", "no")
                .arg("enable-debug-command", "yes"),
        );
        let pc = &mut p.client();
        assert_eq!(q(pc, "DEBUG POPULATE 100000 key 100"), ok());
        let before = threads_wchar(&p, "io-thread");
        let r = peer(Backend::Valkey);
        let rc = &mut r.client();
        follow(rc, &p);
        wait_caught_up(pc, rc);
        assert_eq!(int_of(&query(rc, &["DBSIZE"])), 100_000);
        assert_eq!(query(rc, &["GET", "key:99999"]), query(pc, &["GET", "key:99999"]));
        assert_eq!(stat(pc, "stats", "sync_full"), "1");
        // The file the sync sent went out by sendfile(2) from an IO thread.
        let rdb = std::fs::metadata(p.dir().join("dump.rdb")).expect("the saved RDB").len();
        assert!(rdb > 10_000_000, "{rdb} bytes");
        let sent = threads_wchar(&p, "io-thread") - before;
        assert!(sent >= rdb, "IO threads wrote {sent} bytes of a {rdb}-byte RDB");
    }
);

/// A Valkey replica syncs from a primary on `b` whose diskless capture
/// takes a second or more (200 µs a key): the replica's state in the
/// primary's INFO while its RDB is on the way, and once it is in sync.
fn diskless_replica_states(b: Backend) -> (Vec<String>, Vec<String>) {
    let p = slow_capture_primary(b);
    let pc = &mut p.client();
    let r = peer(Backend::Valkey);
    let rc = &mut r.client();
    follow(rc, &p);
    within(10, "the RDB to be on its way", || sync_read_bytes(rc) > 0);
    let during = replica_states(pc);
    assert_eq!(q(pc, "CONFIG SET rdb-key-save-delay 0"), ok());
    wait_caught_up(pc, rc);
    // A primary marks the replica online at its first ACK after the RDB,
    // which can come a moment after the replica has caught up (Valkey's
    // too): the state once it has moved on, or after 10 s if it does not.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut after = replica_states(pc);
    while after.iter().any(|s| s == "wait_bgsave") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        after = replica_states(pc);
    }
    (during, after)
}

e2e!(
    ringkv_only fn a_diskless_replica_waits_for_the_capture_then_is_online_as_in_valkey(b) {
        let want = diskless_replica_states(Backend::Valkey);
        assert_eq!(
            want,
            (vec!["wait_bgsave".to_string()], vec!["online".to_string()]),
            "Valkey 8.1, the oracle"
        );
        assert_eq!(diskless_replica_states(b), want, "ringkv");
    }
);

e2e!(
    fn the_backlog_is_freed_after_repl_backlog_ttl_without_replicas(b) {
        let p = b.start(Opts::new().arg("repl-backlog-ttl", "1"));
        let pc = &mut p.client();
        let r = b.server();
        let rc = &mut r.client();
        follow(rc, &p);
        wait_caught_up(pc, rc);
        let repl = |pc: &mut redis::Connection, f: &str| stat(pc, "replication", f).to_string();
        assert_eq!(repl(pc, "repl_backlog_active"), "1");
        let replid = repl(pc, "master_replid");
        // With the replica there, the backlog stays past the TTL.
        std::thread::sleep(Duration::from_millis(2500));
        assert_eq!(repl(pc, "repl_backlog_active"), "1");
        assert_eq!(q(rc, "REPLICAOF NO ONE"), ok());
        within(10, "the backlog to be freed", || repl(pc, "repl_backlog_active") == "0");
        assert_ne!(repl(pc, "master_replid"), replid);
        assert_eq!(repl(pc, "master_replid2"), "0".repeat(40));
        assert!(
            p.log().contains("Replication backlog freed after 1 seconds without connected replicas."),
            "{}",
            p.log()
        );
        // A replica that comes back syncs in full, and the backlog is back.
        let full = stat(pc, "stats", "sync_full").to_string();
        follow(rc, &p);
        wait_caught_up(pc, rc);
        assert_eq!(repl(pc, "repl_backlog_active"), "1");
        assert_ne!(stat(pc, "stats", "sync_full"), full);
    }
);

/// TCP_NODELAY on the server's end of the connection `peer` is the other
/// end of, read from the server's own descriptor (pidfd_getfd: the test
/// runs as root); `None` if no descriptor of `pid` is that connection.
fn server_nodelay(pid: u32, peer: &std::net::TcpStream) -> Option<bool> {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mine = peer.local_addr().unwrap();
    // SAFETY: pidfd_open(2) takes a pid and flags, no memory.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    assert!(
        pidfd >= 0,
        "pidfd_open: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: a descriptor pidfd_open just returned, owned from here on.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as i32) };
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
    {
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        if !target.to_string_lossy().starts_with("socket:") {
            continue;
        }
        let Ok(n) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        use std::os::fd::AsRawFd;
        // SAFETY: pidfd_getfd(2) on a pidfd we own; no memory is passed.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), n, 0) };
        if fd < 0 {
            continue; // closed meanwhile
        }
        // SAFETY: a new descriptor of ours, owned by the TcpStream.
        let sock = unsafe { std::net::TcpStream::from_raw_fd(fd as i32) };
        if sock.peer_addr().is_ok_and(|a| a == mine) {
            return Some(sock.nodelay().unwrap());
        }
    }
    None
}

/// A replica's connection after `+FULLRESYNC`: (nodelay under
/// `repl-disable-tcp-nodelay no`, under `yes`).
fn nodelay_after_full_sync(b: Backend) -> (bool, bool) {
    let mut seen = Vec::new();
    for disable in ["no", "yes"] {
        let srv = b.start(Opts::new().arg("repl-disable-tcp-nodelay", disable));
        let mut s = std::net::TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
        assert_eq!(
            handshake_line(&mut s, "REPLCONF capa eof capa psync2"),
            "+OK"
        );
        let reply = handshake_line(&mut s, "PSYNC ? -1");
        assert!(reply.starts_with("+FULLRESYNC"), "{reply}");
        let pid = srv.pid().unwrap();
        let mut nodelay = None;
        within(10, "the replica's socket", || {
            nodelay = server_nodelay(pid, &s);
            nodelay.is_some()
        });
        seen.push(nodelay.unwrap());
    }
    (seen[0], seen[1])
}

e2e!(
    fn repl_disable_tcp_nodelay_turns_nagle_on_for_a_full_sync(b) {
        assert_eq!(nodelay_after_full_sync(b), (true, false));
        assert_eq!(nodelay_after_full_sync(Backend::Valkey), (true, false));
    }
);
