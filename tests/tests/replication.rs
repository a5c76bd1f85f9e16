//! ringkv as a replica of the real peers: Valkey 8.1 and redis-server 7.0
//! as primaries, full sync in both transfer forms (`$len` from disk,
//! `$EOF:` diskless), the stream of random writes applied to the same
//! dataset, partial resync after a dropped link, WAIT (GETACK), REPLICAOF
//! NO ONE, masterauth, read-only and stale-data refusals, a replica
//! stopped and continued.

use std::time::{Duration, Instant};

use ringkv_e2e::dataset::{fill, plain_view, random_write};
use ringkv_e2e::replication::{
    assert_same, follow, settled_view, stat, wait_caught_up, writes_acknowledged_by_wait,
};
use ringkv_e2e::v::{int_of, ok, strings, text};
use ringkv_e2e::{Backend, Opts, Rng, Server, e2e, info_field, q, query, within};

/// A primary that sends its RDB at once (no diskless delay), from disk or
/// diskless.
fn primary(b: Backend, diskless: bool) -> Server {
    b.start(
        Opts::new()
            .arg("repl-diskless-sync", if diskless { "yes" } else { "no" })
            .arg("repl-diskless-sync-delay", "0"),
    )
}

fn sync_and_stream(b: Backend, peer: Backend, diskless: bool, seed: u64) {
    let p = primary(peer, diskless);
    let pc = &mut p.client();
    fill(pc);
    let r = b.server();
    let rc = &mut r.client();
    follow(rc, &p);
    wait_caught_up(pc, rc);
    let want = plain_view(pc);
    assert_same(
        &plain_view(rc),
        &want,
        &format!("after the full sync from {peer:?}"),
    );
    // The stream: random writes of every kind, in several databases.
    let mut rng = Rng::new(seed);
    for _ in 0..1500 {
        random_write(pc, &mut rng);
    }
    let _ = q(pc, "SELECT 0");
    let want = settled_view(pc);
    wait_caught_up(pc, rc);
    assert_same(
        &plain_view(rc),
        &want,
        &format!("after the stream from {peer:?}"),
    );
    // What a replica tells its clients.
    let role = strings(&q(rc, "ROLE"));
    assert_eq!(
        role[..4],
        ["slave", "127.0.0.1", &p.port.to_string(), "connected"]
    );
    let info = text(&q(pc, "INFO replication"));
    assert_eq!(role[4], info_field(&info, "master_repl_offset"));
    let rinfo = text(&q(rc, "INFO replication"));
    assert_eq!(info_field(&rinfo, "role"), "slave");
    assert_eq!(
        info_field(&rinfo, "master_replid"),
        info_field(&info, "master_replid")
    );
    assert_eq!(
        q(rc, "SET x 1").unwrap_err(),
        "READONLY You can't write against a read only replica."
    );
    // A script's write is refused the same way; its read is served.
    let err = query(rc, &["EVAL", "return redis.call('SET', 'x', '1')", "0"]).unwrap_err();
    assert!(
        err.starts_with("READONLY You can't write against a read only replica."),
        "{err}"
    );
    assert_eq!(
        text(&query(
            rc,
            &["EVAL", "return redis.call('GET', 's:short')", "0"]
        )),
        text(&q(pc, "GET s:short"))
    );
    // The primary sees us as an online replica.
    let slave0 = info_field(&info, "slave0");
    assert!(slave0.contains("state=online"), "{slave0}");
}

e2e!(
    ringkv_only fn follows_valkey_full_sync_diskless_then_the_stream(b) {
        sync_and_stream(b, Backend::Valkey, true, 1);
    }
);

e2e!(
    ringkv_only fn follows_valkey_full_sync_from_disk_then_the_stream(b) {
        sync_and_stream(b, Backend::Valkey, false, 2);
    }
);

e2e!(
    ringkv_only fn follows_redis_7_then_the_stream(b) {
        sync_and_stream(b, Backend::Redis, false, 3);
    }
);

e2e!(
    ringkv_only fn a_dropped_link_resumes_with_a_partial_resync(b) {
        let p = primary(Backend::Valkey, true);
        let pc = &mut p.client();
        fill(pc);
        let r = b.server();
        let rc = &mut r.client();
        follow(rc, &p);
        wait_caught_up(pc, rc);
        let full = info_field(&text(&q(pc, "INFO stats")), "sync_full");
        let mut rng = Rng::new(7);
        for round in 0..3 {
            assert!(int_of(&q(pc, "CLIENT KILL TYPE replica")) >= 1, "round {round}");
            for _ in 0..200 {
                random_write(pc, &mut rng);
            }
            let _ = q(pc, "SELECT 0");
            let want = settled_view(pc);
            wait_caught_up(pc, rc);
            assert_same(&plain_view(rc), &want, &format!("round {round}"));
        }
        let stats = text(&q(pc, "INFO stats"));
        assert_eq!(info_field(&stats, "sync_full"), full, "no second full sync");
        assert!(
            info_field(&stats, "sync_partial_ok").parse::<u64>().unwrap() >= 3,
            "{stats}"
        );
    }
);

e2e!(
    ringkv_only fn wait_on_the_primary_is_answered_by_our_ack(b) {
        let p = primary(Backend::Valkey, true);
        let pc = &mut p.client();
        let r = b.server();
        let rc = &mut r.client();
        follow(rc, &p);
        wait_caught_up(pc, rc);
        // GETACK goes out, our ACK comes back with the write applied.
        writes_acknowledged_by_wait(pc, rc, Duration::from_secs(2));
    }
);

e2e!(
    ringkv_only fn replicaof_no_one_keeps_the_data_and_takes_writes(b) {
        let p = primary(Backend::Valkey, true);
        let pc = &mut p.client();
        assert_eq!(q(pc, "SET a 1"), ok());
        let r = b.server();
        let rc = &mut r.client();
        follow(rc, &p);
        wait_caught_up(pc, rc);
        let before = text(&q(rc, "INFO replication"));
        let id = info_field(&before, "master_replid");
        let offset: i64 = info_field(&before, "master_repl_offset").parse().unwrap();
        // Asked again for the same primary: nothing to do.
        let again = query(rc, &["REPLICAOF", "127.0.0.1", &p.port.to_string()]);
        assert_eq!(text(&again), "OK Already connected to specified master");
        assert_eq!(q(rc, "REPLICAOF NO ONE"), ok());
        let role = q(rc, "ROLE").unwrap();
        assert_eq!(strings(&Ok(role.clone()))[0], "master", "{role:?}");
        assert_eq!(q(rc, "SET b 2"), ok());
        assert_eq!(text(&q(rc, "GET a")), "1");
        let after = text(&q(rc, "INFO replication"));
        assert_eq!(info_field(&after, "role"), "master");
        assert_eq!(info_field(&after, "master_replid2"), id);
        assert_ne!(info_field(&after, "master_replid"), id);
        assert_eq!(
            info_field(&after, "second_repl_offset"),
            (offset + 1).to_string()
        );
        // The primary no longer has us.
        within(10, "the primary to drop the replica", || {
            info_field(&text(&q(pc, "INFO replication")), "connected_slaves") == "0"
        });
    }
);

e2e!(
    ringkv_only fn masterauth_at_start_up_and_stale_data_refused_when_the_link_is_down(b) {
        let mut p = Backend::Valkey.start(
            Opts::new()
                .arg("requirepass", "s3cret")
                .arg("repl-diskless-sync-delay", "0"),
        );
        let pc = &mut redis::Client::open(format!("redis://:s3cret@127.0.0.1:{}/", p.port))
            .unwrap()
            .get_connection()
            .unwrap();
        assert_eq!(q(pc, "SET a 1"), ok());
        let r = b.start(
            Opts::new()
                .arg_multi("replicaof", &["127.0.0.1", &p.port.to_string()])
                .arg("masterauth", "s3cret")
                .arg("replica-serve-stale-data", "no"),
        );
        let rc = &mut r.client();
        wait_caught_up(pc, rc);
        assert_eq!(text(&q(rc, "GET a")), "1");
        assert_eq!(
            strings(&q(rc, "CONFIG GET replicaof")),
            ["replicaof".to_string(), format!("127.0.0.1 {}", p.port)]
        );
        p.stop();
        within(10, "the link to go down", || {
            info_field(&text(&q(rc, "INFO replication")), "master_link_status") == "down"
        });
        assert_eq!(
            q(rc, "GET a").unwrap_err(),
            "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."
        );
        let role = strings(&q(rc, "ROLE"));
        assert!(
            role[3] == "connect" || role[3] == "connecting",
            "{role:?}"
        );
        assert_eq!(role[4], "-1");
    }
);

e2e!(
    ringkv_only fn expired_keys_stay_hidden_until_the_primary_deletes_them(b) {
        let p = Backend::Valkey.start(
            Opts::new()
                .arg("repl-diskless-sync-delay", "0")
                .arg("enable-debug-command", "yes"),
        );
        let pc = &mut p.client();
        // The primary's active expiry off: only its lazy expiry sends DELs.
        assert_eq!(q(pc, "DEBUG SET-ACTIVE-EXPIRE 0"), ok());
        let r = b.server();
        let rc = &mut r.client();
        follow(rc, &p);
        wait_caught_up(pc, rc);
        assert_eq!(q(pc, "SET k v PX 2000"), ok());
        assert_eq!(q(pc, "SET keep v"), ok());
        wait_caught_up(pc, rc);
        assert_eq!(text(&q(rc, "GET k")), "v");
        std::thread::sleep(Duration::from_millis(2200));
        // Past its time: not served, not deleted by the replica itself.
        assert_eq!(q(rc, "GET k"), Ok(redis::Value::Nil));
        assert_eq!(int_of(&q(rc, "EXISTS k")), 0);
        assert_eq!(int_of(&q(rc, "TTL k")), -2);
        assert_eq!(strings(&q(rc, "KEYS *")), ["keep"]);
        assert_eq!(int_of(&q(rc, "DBSIZE")), 2);
        // The primary's lazy expiry deletes it, and the DEL reaches us.
        assert_eq!(q(pc, "GET k"), Ok(redis::Value::Nil));
        wait_caught_up(pc, rc);
        assert_eq!(int_of(&q(rc, "DBSIZE")), 1);
    }
);

/// A primary that answers the handshake and then sends `after_psync`:
/// returns its port and a counter of the connections it took.
fn fake_primary(after_psync: Vec<u8>) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let conns = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = conns.clone();
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        for s in l.incoming() {
            if Instant::now() > deadline {
                return;
            }
            let Ok(mut s) = s else { continue };
            counter.fetch_add(1, Ordering::Relaxed);
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            // One reply per command; PSYNC gets the scripted answer.
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&seen).to_ascii_uppercase();
                let commands = text.matches('*').count();
                if text.contains("$5\r\nPSYNC\r\n") {
                    let _ = s.write_all(&b"+OK\r\n".repeat(commands - 1));
                    let _ = s.write_all(&after_psync);
                    std::thread::sleep(Duration::from_millis(200));
                    break;
                }
                let _ = s.write_all(&b"+OK\r\n".repeat(commands));
                seen.clear();
            }
        }
    });
    (port, conns)
}

fn garbage_from_the_primary(b: Backend, after_psync: Vec<u8>, expect_in_log: &str) -> Server {
    let (port, conns) = fake_primary(after_psync);
    let r = b.server();
    let rc = &mut r.client();
    assert_eq!(q(rc, "SET before 1"), ok());
    assert_eq!(
        query(rc, &["REPLICAOF", "127.0.0.1", &port.to_string()]),
        ok()
    );
    within(20, "the replica to try again after the bad primary", || {
        conns.load(std::sync::atomic::Ordering::Relaxed) >= 2
    });
    // The server is up, answering (INFO: it may be loading the bad
    // primary's next file), its link down, the reason in its log. (Each
    // retry of a primary whose RDB loads before its garbage stream is
    // "up" for the moment between the two: look again then.)
    within(10, "the link to be down", || {
        let info = text(&q(rc, "INFO replication"));
        info_field(&info, "master_link_status") == "down"
    });
    let log = r.log();
    assert!(
        log.contains(expect_in_log),
        "log lacks {expect_in_log:?}:\n{log}"
    );
    r
}

e2e!(
    ringkv_only fn a_primary_refusing_psync_is_retried(b) {
        let _ = garbage_from_the_primary(
            b,
            b"-ERR go away\r\n".to_vec(),
            "Unexpected reply to PSYNC from master: -ERR go away",
        );
    }
);

e2e!(
    ringkv_only fn a_primary_sending_a_corrupt_rdb_is_retried_and_nothing_is_loaded(b) {
        // An RDB header, then bytes that are no RDB opcode.
        let body = b"REDIS0011\xfa\x09garbage!!\x42\x42\x42\xff\x00";
        let mut msg = format!(
            "+FULLRESYNC 0123456789012345678901234567890123456789 0\r\n${}\r\n",
            body.len()
        )
        .into_bytes();
        msg.extend_from_slice(body);
        let r = garbage_from_the_primary(
            b,
            msg,
            "Failed trying to load the MASTER synchronization DB from disk",
        );
        // The old data was flushed for the sync; nothing half-loaded stays.
        // (The replica keeps retrying: between two attempts it answers.)
        let c = &mut r.client();
        within(30, "DBSIZE between two sync attempts", || {
            matches!(q(c, "DBSIZE"), Ok(redis::Value::Int(0)))
        });
    }
);

e2e!(
    ringkv_only fn a_primary_sending_a_malformed_stream_is_dropped(b) {
        // A valid empty RDB (version 11, no keys, checksum 0 = unchecked),
        // then a stream that is not RESP.
        let mut rdb = b"REDIS0011".to_vec();
        rdb.push(0xff);
        rdb.extend_from_slice(&[0u8; 8]);
        let mut msg = format!(
            "+FULLRESYNC 0123456789012345678901234567890123456789 0\r\n${}\r\n",
            rdb.len()
        )
        .into_bytes();
        msg.extend_from_slice(&rdb);
        msg.extend_from_slice(b"*1\r\n$-7\r\n");
        let _ = garbage_from_the_primary(b, msg, "protocol error in the stream");
    }
);

e2e!(
    ringkv_only fn a_restarted_replica_continues_from_its_rdb(b) {
        let p = Backend::Valkey.start(Opts::new().arg("repl-diskless-sync-delay", "0"));
        let pc = &mut p.client();
        fill(pc);
        let dir = ringkv_e2e::server::TempDir::new("replica-restart");
        let opts = || {
            Opts::new()
                .dir(dir.path())
                .arg_multi("replicaof", &["127.0.0.1", &p.port.to_string()])
        };
        let mut r = b.start(opts());
        {
            let rc = &mut r.client();
            wait_caught_up(pc, rc);
            // SHUTDOWN saves (save points are set by default).
            let _ = q(rc, "SHUTDOWN");
        }
        r.wait_exit(Duration::from_secs(10));
        assert_eq!(q(pc, "SET while-down yes"), ok());
        let r = b.start(opts());
        let rc = &mut r.client();
        wait_caught_up(pc, rc);
        assert_eq!(text(&q(rc, "GET while-down")), "yes");
        assert_same(&plain_view(rc), &plain_view(pc), "after the restart");
        let stats = text(&q(pc, "INFO stats"));
        assert_eq!(info_field(&stats, "sync_full"), "1", "{stats}");
        assert!(info_field(&stats, "sync_partial_ok").parse::<u64>().unwrap() >= 1, "{stats}");
    }
);

e2e!(
    ringkv_only fn a_full_disk_during_the_transfer_keeps_the_replica_up_and_retrying(b) {
        let Some(disk) = ringkv_e2e::server::SmallDisk::mount(512) else {
            assert!(std::env::var("CI").is_err(), "cannot mount a tmpfs in CI");
            eprintln!("skipped: cannot mount a tmpfs here (not root?)");
            return;
        };
        // A primary whose RDB (about 1 MB) does not fit the replica's disk.
        let p = primary(Backend::Valkey, true);
        let pc = &mut p.client();
        // Values LZF cannot shrink.
        let mut rng = Rng::new(5);
        for i in 0..100 {
            let v: String = (0..10_000)
                .map(|_| char::from(b'!' + rng.below(90) as u8))
                .collect();
            assert_eq!(query(pc, &["SET", &format!("big{i}"), &v]), ok());
        }
        let r = b.start(Opts::new().dir(disk.dir.path()).arg("save", ""));
        let rc = &mut r.client();
        follow(rc, &p);
        within(20, "the failed transfer to be logged", || {
            r.log().contains("Write error writing to the DB file")
        });
        // Up, answering, the link down, no temp file left behind, nothing
        // half loaded.
        let info = text(&q(rc, "INFO replication"));
        assert_eq!(info_field(&info, "master_link_status"), "down", "{info}");
        assert_eq!(int_of(&q(rc, "DBSIZE")), 0);
        let temps: Vec<_> = std::fs::read_dir(disk.dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("temp-"))
            .collect();
        assert!(temps.len() <= 1, "temp files pile up: {temps:?}");
        // Room again: the next attempt syncs.
        assert_eq!(q(pc, "FLUSHALL"), ok());
        assert_eq!(q(pc, "SET small 1"), ok());
        wait_caught_up(pc, rc);
        assert_eq!(text(&q(rc, "GET small")), "1");
    }
);

/// What a replica answers a client that claimed CLIENT CAPA REDIRECT
/// (Valkey 8): reads and writes go to the primary, unless READONLY.
fn redirect_answers(replica: &Server, primary: &Server) -> Vec<String> {
    let mut c = replica.raw();
    let mut out = Vec::new();
    for args in [
        &["CLIENT", "CAPA", "REDIRECT", "other"][..],
        &["GET", "a"],
        &["SET", "a", "1"],
        &["PING"],
        &["DBSIZE"],
        &["EVAL_RO", "return 1", "0"],
        &["READONLY"],
        &["GET", "a"],
        &["SET", "a", "1"],
        &["READWRITE"],
        &["GET", "a"],
    ] {
        let r = format!("{:?}", c.cmd(args));
        out.push(r.replace(&primary.port.to_string(), "PORT"));
    }
    let info = c.cmd(&["CLIENT", "INFO"]).text();
    out.push(
        info.split(' ')
            .find(|f| f.starts_with("capa="))
            .unwrap_or("")
            .into(),
    );
    out
}

e2e!(
    ringkv_only fn a_replica_redirects_clients_that_claim_the_capability(b) {
        let p = primary(Backend::Valkey, true);
        let ours = b.server();
        follow(&mut ours.client(), &p);
        let theirs = Backend::Valkey.server();
        follow(&mut theirs.client(), &p);
        wait_caught_up(&mut p.client(), &mut ours.client());
        wait_caught_up(&mut p.client(), &mut theirs.client());
        let want = redirect_answers(&theirs, &p);
        assert_eq!(redirect_answers(&ours, &p), want);
        assert!(want[1].contains("REDIRECT 127.0.0.1:PORT"), "{want:?}");
    }
);

/// How `primary` lists a replica of `replica_backend` that announces
/// another address: INFO's `slave0` up to the state, ROLE's entry.
fn announced(primary_backend: Backend, replica_backend: Backend) -> (String, Vec<String>) {
    let p = primary_backend.start(Opts::new().arg("repl-diskless-sync-delay", "0"));
    let r = replica_backend.start(
        Opts::new()
            .arg("replica-announce-ip", "10.1.2.3")
            .arg("replica-announce-port", "7777"),
    );
    let (pc, rc) = (&mut p.client(), &mut r.client());
    follow(rc, &p);
    wait_caught_up(pc, rc);
    within(10, "the replica to be listed online", || {
        info_field(&text(&q(pc, "INFO replication")), "slave0").contains("state=online")
    });
    let slave0 = info_field(&text(&q(pc, "INFO replication")), "slave0");
    let listed: String = slave0.split(",offset=").next().unwrap().to_string();
    let role = match q(pc, "ROLE").unwrap() {
        redis::Value::Array(v) => match &v[2] {
            redis::Value::Array(rs) => strings(&Ok(rs[0].clone()))[..2].to_vec(),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    };
    (listed, role)
}

e2e!(
    ringkv_only fn a_replica_is_known_by_the_address_it_announces(b) {
        // replica-announce-ip/-port go out as REPLCONF ip-address and
        // listening-port; the primary lists the replica by them.
        let want = (
            "ip=10.1.2.3,port=7777,state=online".to_string(),
            vec!["10.1.2.3".to_string(), "7777".to_string()],
        );
        assert_eq!(announced(Backend::Valkey, Backend::Valkey), want, "the oracle");
        assert_eq!(announced(b, b), want, "ringkv on both sides");
        assert_eq!(announced(b, Backend::Valkey), want, "a Valkey replica");
        assert_eq!(announced(Backend::Valkey, b), want, "a ringkv replica");
        // An address too long is refused, as Valkey refuses it.
        let long = "a".repeat(256);
        let refused = |backend: Backend| {
            let s = backend.server();
            format!("{:?}", s.raw().cmd(&["REPLCONF", "ip-address", &long]))
        };
        assert_eq!(refused(b), refused(Backend::Valkey));
    }
);

/// A Valkey primary and a replica of `replica`'s kind in sync with it.
fn synced_to_valkey(replica: Backend) -> (Server, Server) {
    let p = Backend::Valkey.start(Opts::new().arg("save", ""));
    let r = replica.start(Opts::new().arg("save", ""));
    let rc = &mut r.client();
    follow(rc, &p);
    wait_caught_up(&mut p.client(), rc);
    (p, r)
}

/// A replica of `replica`'s kind whose link to a Valkey primary is killed
/// (CLIENT KILL TYPE master) while writes go on: whether it said it
/// reconnects at once, and the primary's full and partial syncs after.
fn reconnects_after_a_kill(replica: Backend) -> (bool, String, String) {
    let (p, r) = synced_to_valkey(replica);
    let (pc, rc) = (&mut p.client(), &mut r.client());
    assert_eq!(int_of(&q(rc, "CLIENT KILL TYPE master")), 1);
    assert_eq!(q(pc, "SET after kill"), ok());
    wait_caught_up(pc, rc);
    (
        r.log().contains("Reconnecting to"),
        stat(pc, "stats", "sync_full"),
        stat(pc, "stats", "sync_partial_ok"),
    )
}

e2e!(
    /// Valkey's replica does not wait for its cron's next second to
    /// reconnect: the backlog may be gone by then.
    ringkv_only fn a_killed_link_reconnects_at_once_as_valkeys(b) {
        let want = reconnects_after_a_kill(Backend::Valkey);
        assert_eq!(want, (true, "1".to_string(), "1".to_string()), "Valkey 8.1, the oracle");
        assert_eq!(reconnects_after_a_kill(b), want, "ringkv");
    }
);

/// A replica of `replica`'s kind of a Valkey primary, synced and then fed
/// a few writes: its own backlog (active, and how much of the stream it
/// holds), which lets its siblings continue should it be promoted.
fn replica_backlog(replica: Backend) -> (String, String) {
    let (p, r) = synced_to_valkey(replica);
    let (pc, rc) = (&mut p.client(), &mut r.client());
    for i in 0..10 {
        assert_eq!(q(pc, &format!("SET k{i} {i}")), ok());
    }
    wait_caught_up(pc, rc);
    (
        stat(rc, "replication", "repl_backlog_active"),
        stat(rc, "replication", "repl_backlog_histlen"),
    )
}

e2e!(
    ringkv_only fn a_replica_keeps_a_backlog_of_its_primarys_stream_as_valkeys(b) {
        let want = replica_backlog(Backend::Valkey);
        assert_eq!(want.0, "1", "Valkey 8.1, the oracle: {want:?}");
        assert_eq!(replica_backlog(b), want, "ringkv");
    }
);

/// A Valkey primary with two replicas: `promoted` (of its kind) and a
/// Valkey one pointed where nothing listens while 100 writes go by (it
/// keeps its place in the primary's history). The primary dies;
/// `promoted` takes over (REPLICAOF NO ONE); the lagging one follows it.
/// The new primary's full and partial syncs, and whether the follower
/// ends with every key.
fn lagging_sibling_follows(promoted: Backend) -> (String, String, bool) {
    let mut p = Backend::Valkey.start(Opts::new().arg("save", ""));
    let pc = &mut p.client();
    let a = promoted.start(Opts::new().arg("save", ""));
    let ac = &mut a.client();
    let lagging = Backend::Valkey.start(Opts::new().arg("save", ""));
    let lc = &mut lagging.client();
    follow(ac, &p);
    follow(lc, &p);
    wait_caught_up(pc, ac);
    wait_caught_up(pc, lc);
    let nowhere = ringkv_e2e::server::free_port();
    assert_eq!(q(lc, &format!("REPLICAOF 127.0.0.1 {nowhere}")), ok());
    for i in 0..100 {
        assert_eq!(q(pc, &format!("SET late{i} {i}")), ok());
    }
    wait_caught_up(pc, ac);
    p.kill_9();
    assert_eq!(q(ac, "REPLICAOF NO ONE"), ok());
    follow(lc, &a);
    wait_caught_up(ac, lc);
    (
        stat(ac, "stats", "sync_full"),
        stat(ac, "stats", "sync_partial_ok"),
        int_of(&q(lc, "DBSIZE")) == int_of(&q(ac, "DBSIZE")),
    )
}

e2e!(
    /// PSYNC2 with a sibling behind the promoted replica: it continues
    /// from the backlog the replica kept of its primary's stream.
    ringkv_only fn a_promoted_replica_lets_a_sibling_behind_it_continue(b) {
        let want = lagging_sibling_follows(Backend::Valkey);
        assert_eq!(want, ("0".to_string(), "1".to_string(), true), "Valkey 8.1, the oracle");
        assert_eq!(lagging_sibling_follows(b), want, "ringkv");
    }
);

e2e!(
    ringkv_only fn bind_source_addr_is_where_the_link_comes_from(b) {
        // A Valkey 8.1 primary says where the link comes from.
        let p = Backend::Valkey.server();
        let pc = &mut p.client();
        let r = b.start(Opts::new().arg("bind-source-addr", "127.0.0.2"));
        let rc = &mut r.client();
        follow(rc, &p);
        wait_caught_up(pc, rc);
        // The replica's address as the primary lists it ("" while it is
        // reconnecting).
        let from = |pc: &mut redis::Connection| {
            let info: String = redis::cmd("INFO").arg("replication").query(pc).unwrap();
            info.lines()
                .find_map(|l| l.strip_prefix("slave0:"))
                .unwrap_or_default()
                .to_string()
        };
        assert!(from(pc).starts_with("ip=127.0.0.2,"), "{}", from(pc));
        // Set at runtime: the next connection comes from the new address.
        assert_eq!(q(rc, "CONFIG SET bind-source-addr 127.0.0.3"), ok());
        q(rc, "CLIENT KILL TYPE master").unwrap();
        within(10, "the link from 127.0.0.3", || from(pc).starts_with("ip=127.0.0.3,"));
        // An address this host cannot bind: the link comes anyway (Valkey's
        // best effort), from wherever the kernel picks.
        assert_eq!(q(rc, "CONFIG SET bind-source-addr 192.0.2.1"), ok());
        q(rc, "CLIENT KILL TYPE master").unwrap();
        within(10, "the link from the loopback", || from(pc).starts_with("ip=127.0.0.1,"));
    }
);

e2e!(
    /// A replica stopped and continued (SIGSTOP/SIGCONT: a debugger, a
    /// frozen container) keeps its link: no reconnection, no resync.
    /// ringkv's link read used to fail with EINTR after the continue and
    /// drop the link.
    fn a_replica_stopped_and_continued_keeps_its_link(b) {
        let p = primary(Backend::Valkey, false);
        let pc = &mut p.client();
        let r = b.server();
        let rc = &mut r.client();
        follow(rc, &p);
        wait_caught_up(pc, rc);
        for i in 0..5 {
            r.signal(libc::SIGSTOP);
            std::thread::sleep(Duration::from_millis(150));
            assert_eq!(query(pc, &["SET", &format!("k{i}"), "v"]), ok());
            r.signal(libc::SIGCONT);
            wait_caught_up(pc, rc);
        }
        assert_eq!(int_of(&q(rc, "EXISTS k0 k1 k2 k3 k4")), 5);
        assert_eq!(stat(pc, "stats", "sync_full"), "1");
        assert_eq!(stat(pc, "stats", "sync_partial_ok"), "0");
        let log = r.log();
        assert!(!log.contains("Connection with master lost"), "{log}");
    }
);
