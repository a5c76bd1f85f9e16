//! A primary's shutdown waits for its replicas (`shutdown-timeout`), as
//! Valkey's does: a planned restart loses no write a replica has not
//! received. Writes wait meanwhile (`paused_reason:shutdown_in_progress`),
//! SHUTDOWN ABORT cancels the wait, and past the timeout the server stops
//! anyway, naming the replicas that lag.

use std::time::{Duration, Instant};

use ringkv_e2e::replication::{follow, wait_caught_up};
use ringkv_e2e::v::{ok, text};
use ringkv_e2e::{Backend, Opts, Reply, Server, e2e, info_field, q, query, within};

/// A primary (`shutdown-timeout` as given) and a replica of it that was
/// in sync and has stopped reading (SIGSTOP), with a write since: the
/// replica lags. Connect to the replica again only after SIGCONT.
fn primary_with_stopped_replica(b: Backend, timeout_s: &str) -> (Server, Server) {
    let p = b.start(
        Opts::new()
            .arg("shutdown-timeout", timeout_s)
            .arg("save", ""),
    );
    let r = b.server();
    let (pc, rc) = (&mut p.client(), &mut r.client());
    follow(rc, &p);
    wait_caught_up(pc, rc);
    r.signal(libc::SIGSTOP);
    assert_eq!(q(pc, "SET before shutdown"), ok());
    (p, r)
}

fn paused_reason(c: &mut ringkv_e2e::Raw) -> String {
    info_field(&c.cmd(&["INFO", "clients"]).text(), "paused_reason")
}

e2e!(
    fn shutdown_waits_for_a_lagging_replica_until_abort_or_catch_up(b) {
        let (mut p, r) = primary_with_stopped_replica(b, "60");
        // (No new connection to the stopped replica: it would hang.)
        let pc = &mut p.client();
        let mut sd = p.raw();
        sd.send(b"SHUTDOWN\r\n".as_ref());
        let mut admin = p.raw();
        ringkv_e2e::within(10, "the shutdown to wait", || {
            p.log().contains("Waiting for replicas before shutting down.")
        });
        // Valkey 8's field (redis-server 7.0 has none).
        if !b.is_redis() {
            assert_eq!(paused_reason(&mut admin), "shutdown_in_progress");
        }
        // Writes wait; reads are served.
        let mut writer = p.raw();
        writer.send(&ringkv_e2e::raw::encode_str(&["SET", "during", "wait"]));
        assert_eq!(admin.cmd(&["GET", "before"]), Reply::bulk("shutdown"));
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(admin.cmd(&["GET", "during"]), Reply::Nil);

        assert_eq!(admin.cmd(&["SHUTDOWN", "ABORT"]), Reply::status("OK"));
        assert_eq!(
            sd.read_reply(),
            Reply::err("ERR Errors trying to SHUTDOWN. Check logs.")
        );
        assert_eq!(writer.read_reply(), Reply::status("OK"));
        if !b.is_redis() {
            assert_eq!(paused_reason(&mut admin), "none");
        }
        assert_eq!(
            admin.cmd(&["SHUTDOWN", "ABORT"]),
            Reply::err("ERR No shutdown in progress.")
        );

        // Back: once the replica has everything, the shutdown goes through
        // well before its timeout, and the replica holds the last write.
        r.signal(libc::SIGCONT);
        assert_eq!(q(pc, "SET last write"), ok());
        let started = Instant::now();
        sd.send(b"SHUTDOWN\r\n".as_ref());
        sd.expect_closed();
        assert!(p.wait_exit(Duration::from_secs(30)).is_some(), "the primary did not exit");
        assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
        // The replica was stopped and continued: its link's read (a socket
        // with a receive timeout) failed with EINTR after SIGCONT, and the
        // replica dropped the link and missed the last write (3 runs in 8
        // of the threaded pass, until crates/repl's link retried it).
        let last = q(&mut r.client(), "GET last");
        assert!(
            matches!(last, Ok(redis::Value::BulkString(ref v)) if v == b"write"),
            "the replica answered {last:?}; primary's log:\n{}\nreplica's log:\n{}",
            p.log(),
            r.log()
        );
        let log = p.log();
        assert!(log.contains("Waiting for replicas before shutting down."), "{log}");
        assert!(log.contains("1 of 1 replicas are in sync when shutting down."), "{log}");
    }
);

e2e!(
    fn past_the_timeout_the_shutdown_goes_on_and_names_the_lagging_replica(b) {
        let (mut p, r) = primary_with_stopped_replica(b, "1");
        // SIGTERM takes the same path as SHUTDOWN.
        p.sigterm();
        assert!(p.wait_exit(Duration::from_secs(30)).is_some(), "the primary did not exit");
        r.signal(libc::SIGCONT);
        let log = p.log();
        assert!(log.contains("Waiting for replicas before shutting down."), "{log}");
        assert!(log.contains("Lagging replica 127.0.0.1:"), "{log}");
        assert!(log.contains("0 of 1 replicas are in sync when shutting down."), "{log}");
    }
);

e2e!(
    fn a_second_sigint_while_the_shutdown_waits_exits_at_once(b) {
        let (mut p, r) = primary_with_stopped_replica(b, "60");
        let waits = |p: &Server| p.log().matches("Waiting for replicas before shutting down.").count();
        // A SIGINT's shutdown that was aborted is over: the next SIGINT
        // starts a new wait, and a SIGTERM during it does not insist.
        p.signal(libc::SIGINT);
        within(10, "the first wait", || waits(&p) == 1);
        assert_eq!(q(&mut p.client(), "SHUTDOWN ABORT"), ok());
        p.signal(libc::SIGINT);
        within(10, "the second wait", || waits(&p) == 2);
        p.signal(libc::SIGTERM);
        assert!(p.wait_exit(Duration::from_millis(500)).is_none(), "{}", p.log());
        // Ctrl+C again: out at once, with an error status.
        let asked = Instant::now();
        p.signal(libc::SIGINT);
        let status = p.wait_exit(Duration::from_secs(10)).expect("the primary did not exit");
        assert!(asked.elapsed() < Duration::from_secs(5), "{:?}", asked.elapsed());
        assert_eq!(status.code(), Some(1));
        r.signal(libc::SIGCONT);
        let log = p.log();
        assert!(log.contains(":signal-handler ("), "{log}");
        assert!(log.contains("You insist... exiting now."), "{log}");
        // Each signal named, from the handler, as Valkey logs it.
        for sig in ["SIGINT", "SIGTERM"] {
            let line = format!(") Received {sig} scheduling shutdown...");
            assert!(log.contains(&line), "{log}");
        }
    }
);

e2e!(
    fn shutdown_now_does_not_wait(b) {
        let (mut p, r) = primary_with_stopped_replica(b, "60");
        let mut sd = p.raw();
        sd.send(b"SHUTDOWN NOW\r\n".as_ref());
        sd.expect_closed();
        assert!(p.wait_exit(Duration::from_secs(10)).is_some(), "the primary did not exit");
        r.signal(libc::SIGCONT);
        assert!(!p.log().contains("Waiting for replicas"), "{}", p.log());
    }
);

e2e!(
    fn shutdown_on_sigterm_chooses_what_sigterm_does(b) {
        // `nosave`: no final save despite the save points.
        let mut p = b.start(
            Opts::new()
                .arg("save", "3600 1")
                .arg("shutdown-on-sigterm", "nosave"),
        );
        assert_eq!(q(&mut p.client(), "SET k v"), ok());
        p.sigterm();
        assert!(p.wait_exit(Duration::from_secs(10)).is_some());
        assert!(!p.dir().join("dump.rdb").exists(), "{}", p.log());
        // `default`: SIGTERM saves as SHUTDOWN would.
        let mut p = b.start(Opts::new().arg("save", "3600 1"));
        assert_eq!(q(&mut p.client(), "SET k v"), ok());
        p.sigterm();
        assert!(p.wait_exit(Duration::from_secs(10)).is_some());
        assert!(p.dir().join("dump.rdb").exists(), "{}", p.log());
    }
);

e2e!(
    ringkv_only fn a_valkey_replica_in_sync_lets_the_shutdown_through_at_once(b) {
        // Valkey answers the GETACK with the offset before it: that counts
        // as caught up, and the wait ends without its periodic ACK.
        let mut p = b.start(Opts::new().arg("shutdown-timeout", "60").arg("save", ""));
        let r = Backend::Valkey.server();
        let (pc, rc) = (&mut p.client(), &mut r.client());
        follow(rc, &p);
        wait_caught_up(pc, rc);
        assert_eq!(q(pc, "SET last write"), ok());
        let mut sd = p.raw();
        sd.send(b"SHUTDOWN\r\n".as_ref());
        sd.expect_closed();
        assert!(p.wait_exit(Duration::from_secs(30)).is_some(), "the primary did not exit");
        assert_eq!(text(&q(rc, "GET last")), "write");
        assert!(
            p.log().contains("1 of 1 replicas are in sync when shutting down."),
            "{}",
            p.log()
        );
    }
);

e2e!(
    fn a_final_save_that_fails_after_the_wait_keeps_the_server_up(b) {
        let Some(disk) = ringkv_e2e::server::SmallDisk::mount(512) else {
            // Mounting needs root; CI runs as root.
            assert!(std::env::var("CI").is_err(), "cannot mount a tmpfs in CI");
            eprintln!("skipped: cannot mount a tmpfs here (not root?)");
            return;
        };
        let dir = disk.dir.path();
        let p = b.start(
            Opts::new()
                .dir(dir)
                .arg("save", "3600 1")
                .arg("shutdown-timeout", "60"),
        );
        let r = b.server();
        let (pc, rc) = (&mut p.client(), &mut r.client());
        follow(rc, &p);
        wait_caught_up(pc, rc);
        // Random bytes do not compress: the final dump needs ~400 KiB, and
        // only ~200 KiB are left.
        let mut rng = ringkv_e2e::Rng::new(11);
        for i in 0..100 {
            let v: String = (0..4000).map(|_| (b'!' + rng.below(90) as u8) as char).collect();
            assert_eq!(query(pc, &["SET", &format!("big:{i}"), &v]), ok());
        }
        std::fs::write(dir.join("filler"), vec![0u8; 200 * 1024]).unwrap();
        r.signal(libc::SIGSTOP);
        assert_eq!(q(pc, "SET last write"), ok());
        let mut sd = p.raw();
        sd.send(b"SHUTDOWN\r\n".as_ref());
        ringkv_e2e::within(10, "the shutdown to wait", || {
            p.log().contains("Waiting for replicas before shutting down.")
        });
        // The replica catches up, the final save then fails: the waiting
        // SHUTDOWN gets the error and the server serves on, data intact.
        r.signal(libc::SIGCONT);
        assert_eq!(
            sd.read_reply(),
            Reply::err("ERR Errors trying to SHUTDOWN. Check logs.")
        );
        let mut c = p.raw();
        assert_eq!(c.cmd(&["GET", "last"]), Reply::bulk("write"));
        assert_eq!(c.cmd(&["DBSIZE"]), Reply::Int(101));
        assert!(p.log().contains("Error trying to save the DB, can't exit."), "{}", p.log());
        // Room again: the harness's own stop can save and exit.
        std::fs::remove_file(dir.join("filler")).unwrap();
    }
);
