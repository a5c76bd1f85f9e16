//! Disk-based full sync (`repl-diskless-sync no`): the primary saves
//! `dbfilename` in `dir` with a BGSAVE and sends each waiting replica
//! `$<len>` and the file, then the stream from the save's instant. Valkey
//! 8.1 is the reference (and, for sharing a save, the oracle run beside).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ringkv_e2e::dataset::{fill, plain_view, random_write};
use ringkv_e2e::replication::{
    assert_same, both_follow_a_write, follow, handshake_line, replica_states, settled_view, stat,
    wait_caught_up,
};
use ringkv_e2e::server::TempDir;
use ringkv_e2e::v::{int_of, ok, text};
use ringkv_e2e::{Backend, Opts, Rng, Server, e2e, q, query, within};

e2e!(
    ringkv_only fn valkey_and_ringkv_replicas_full_sync_from_the_saved_file(b) {
        let p = b.start(Opts::new().arg("save", ""));
        let pc = &mut p.client();
        // Settable at run time, as in Valkey.
        assert_eq!(q(pc, "CONFIG SET repl-diskless-sync no"), ok());
        fill(pc);
        let synced = plain_view(pc);
        let valkey = b_peer(Backend::Valkey);
        let ringkv = b.start(Opts::new());
        let (vc, rc) = (&mut valkey.client(), &mut ringkv.client());
        follow(vc, &p);
        wait_caught_up(pc, vc);
        follow(rc, &p);
        wait_caught_up(pc, rc);
        assert_same(&plain_view(vc), &synced, "Valkey after the full sync");
        assert_same(&plain_view(rc), &synced, "ringkv after the full sync");
        // The file both got is the primary's dbfilename in its dir, saved
        // as a BGSAVE (INFO persistence counts it).
        let file = p.dir().join("dump.rdb");
        let copy = TempDir::new("disksync-copy");
        std::fs::copy(&file, copy.path().join("dump.rdb")).expect("dump.rdb in dir");
        assert!(int_of(&q(pc, "DBSIZE")) > 0);
        assert_ne!(stat(pc, "persistence", "rdb_saves"), "0");
        assert_eq!(stat(pc, "persistence", "rdb_last_bgsave_status"), "ok");
        let log = p.log();
        assert!(log.contains("Starting BGSAVE for SYNC with target: disk"), "{log}");
        assert!(log.contains("bytes of RDB from dump.rdb"), "{log}");
        // Then the stream.
        let mut rng = Rng::new(33);
        for _ in 0..1500 {
            random_write(pc, &mut rng);
        }
        let _ = q(pc, "SELECT 0");
        let want = settled_view(pc);
        wait_caught_up(pc, vc);
        wait_caught_up(pc, rc);
        assert_same(&plain_view(vc), &want, "Valkey after the stream");
        assert_same(&plain_view(rc), &want, "ringkv after the stream");
        assert_eq!(replica_states(pc), ["online", "online"]);
        for c in [&mut *vc, &mut *rc] {
            assert_eq!(stat(c, "replication", "master_sync_in_progress"), "0");
            assert_eq!(stat(c, "replication", "master_link_status"), "up");
        }
        assert_eq!(stat(pc, "stats", "sync_full"), "2");
        // The file loads back: a server started on it has the dataset as
        // of the sync.
        let again = b.start(Opts::new().dir(copy.path()));
        again.wait_loaded();
        assert_same(&plain_view(&mut again.client()), &synced, "restarted from the file");
    }
);

e2e!(
    ringkv_only fn a_redis_7_replica_gets_a_saved_file_it_can_read(b) {
        // redis-server 7.0 reads RDB 10, not 11: the save made for it
        // says 10 in its header, as its captures are.
        let p = b.start(Opts::new().arg("save", "").arg("repl-diskless-sync", "no"));
        let pc = &mut p.client();
        fill(pc);
        let synced = plain_view(pc);
        let redis = b_peer(Backend::Redis);
        let rc = &mut redis.client();
        follow(rc, &p);
        wait_caught_up(pc, rc);
        assert_same(&plain_view(rc), &synced, "redis-server 7.0 after the full sync");
        let file = std::fs::read(p.dir().join("dump.rdb")).expect("dump.rdb in dir");
        assert_eq!(&file[..9], b"REDIS0010");
        assert!(p.log().contains("bytes of RDB from dump.rdb"));
    }
);

/// A Valkey or ringkv server to replicate from a primary.
fn b_peer(b: Backend) -> Server {
    b.start(Opts::new())
}

/// Two replicas (of `first`'s kind, then `second`'s) REPLICAOF `primary`
/// (a disk-sync primary whose saves take about two seconds), the second
/// while the first one's save runs: how many saves it took, and whether
/// the primary logged that the second attached.
fn two_replicas_during_one_save(
    primary: &Server,
    first: Backend,
    second: Backend,
) -> (String, bool) {
    let pc = &mut primary.client();
    assert_eq!(q(pc, "CONFIG SET repl-diskless-sync no"), ok());
    assert_eq!(q(pc, "DEBUG POPULATE 20000"), ok());
    let saves =
        |c: &mut redis::Connection| -> i64 { stat(c, "persistence", "rdb_saves").parse().unwrap() };
    let saves_before = saves(pc);
    assert_eq!(q(pc, "CONFIG SET rdb-key-save-delay 100"), ok());
    let (a, b) = (b_peer(first), b_peer(second));
    let (ac, bc) = (&mut a.client(), &mut b.client());
    follow(ac, primary);
    within(10, "the save for the first replica to start", || {
        stat(pc, "persistence", "rdb_bgsave_in_progress") == "1"
    });
    follow(bc, primary);
    within(10, "both replicas to be listed", || {
        replica_states(pc).len() == 2
    });
    assert_eq!(replica_states(pc), ["wait_bgsave", "wait_bgsave"]);
    assert_eq!(stat(pc, "persistence", "rdb_bgsave_in_progress"), "1");
    wait_caught_up(pc, ac);
    wait_caught_up(pc, bc);
    assert_eq!(q(pc, "CONFIG SET rdb-key-save-delay 0"), ok());
    both_follow_a_write(pc, ac, bc);
    assert_eq!(replica_states(pc), ["online", "online"]);
    let saves = saves(pc) - saves_before;
    let attached = primary.log().contains("Waiting for end of BGSAVE for SYNC");
    (saves.to_string(), attached)
}

e2e!(
    ringkv_only fn a_second_replica_shares_the_save_in_progress_as_valkey_does(b) {
        let opts = || {
            Opts::new()
                .arg("save", "")
                .arg("enable-debug-command", "yes")
        };
        // Two Valkey replicas, and a ringkv replica (which announces
        // `REPLCONF version` 7.2.4, so it reads the same RDB) before and
        // after a Valkey one.
        let pairs = [
            (Backend::Valkey, Backend::Valkey),
            (b, Backend::Valkey),
            (Backend::Valkey, b),
        ];
        for (first, second) in pairs {
            let valkey = Backend::Valkey.start(opts());
            let want = two_replicas_during_one_save(&valkey, first, second);
            assert_eq!(want, ("1".to_string(), true), "Valkey 8.1, the oracle");
            let p = b.start(opts());
            assert_eq!(two_replicas_during_one_save(&p, first, second), want, "ringkv");
        }
    }
);

/// A tmpfs mounted for one test, unmounted (and its mount point removed)
/// however the test ends.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).ok()?;
        let st = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status()
            .ok()?;
        st.success().then(|| Tmpfs(at.to_path_buf()))
    }

    fn resize(&self, size: &str) {
        let st = std::process::Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .status()
            .expect("run mount");
        assert!(st.success(), "remount {}", self.0.display());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

e2e!(
    ringkv_only fn a_failed_save_fails_the_sync_until_its_cause_is_gone(b) {
        let tmp = TempDir::new("disksync-full");
        let Some(small) = Tmpfs::mount(&tmp.path().join("small"), "256k") else {
            eprintln!("skipped: cannot mount a tmpfs (needs root)");
            return;
        };
        let p = b.start(
            Opts::new()
                .arg("save", "")
                .arg("enable-debug-command", "yes")
                .arg("enable-protected-configs", "yes")
                .arg("repl-diskless-sync", "no")
                .arg("rdbcompression", "no"),
        );
        let pc = &mut p.client();
        // About 2 MB of RDB: more than the tmpfs holds.
        assert_eq!(q(pc, "DEBUG POPULATE 20000 key 100"), ok());
        let home = p.dir().to_str().unwrap().to_string();
        assert_eq!(
            query(pc, &["CONFIG", "SET", "dir", small.0.to_str().unwrap()]),
            ok()
        );
        let r = b_peer(Backend::Valkey);
        let rc = &mut r.client();
        follow(rc, &p);
        within(20, "two failed syncs", || {
            p.log().matches("SYNC failed. BGSAVE child returned an error").count() >= 2
        });
        assert_eq!(stat(pc, "persistence", "rdb_last_bgsave_status"), "err");
        assert_eq!(text(&q(pc, "PING")), "PONG");
        assert_eq!(stat(rc, "replication", "master_link_status"), "down");
        // Failed saves leave no temp file behind: at most the one of the
        // replica's attempt in progress is there.
        let left: Vec<_> = std::fs::read_dir(&small.0).unwrap().collect();
        assert!(left.len() <= 1, "{left:?}");
        // Room again: the replica's next attempt goes through.
        small.resize("64m");
        wait_caught_up(pc, rc);
        assert_same(&plain_view(rc), &plain_view(pc), "after the retry");
        assert_eq!(stat(pc, "persistence", "rdb_last_bgsave_status"), "ok");
        assert!(small.0.join("dump.rdb").exists());
        assert_eq!(query(pc, &["CONFIG", "SET", "dir", &home]), ok());
    }
);

/// How many descriptors of `pid` are open on a file called `name`.
fn open_on(pid: u32, name: &str) -> usize {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    fds.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|t| t.file_name().is_some_and(|n| n == name))
        .count()
}

e2e!(
    ringkv_only fn a_replica_killed_mid_transfer_leaks_nothing(b) {
        let p = b.start(
            Opts::new()
                .arg("save", "")
                .arg("enable-debug-command", "yes")
                .arg("repl-diskless-sync", "no"),
        );
        let pc = &mut p.client();
        // About 20 MB of RDB (uncompressed: the values are padding): far
        // more than the two socket buffers hold.
        assert_eq!(q(pc, "CONFIG SET rdbcompression no"), ok());
        assert_eq!(q(pc, "DEBUG POPULATE 100000 key 200"), ok());
        // A replica that reads the preamble and a little of the file, then
        // stops reading, with a small receive buffer.
        let mut s = ringkv_e2e::tcp(p.port);
        let small: libc::c_int = 4096;
        // SAFETY: setsockopt(2) on our own socket with a c_int option
        // value that outlives the call.
        unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&s),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&small as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        assert_eq!(handshake_line(&mut s, "REPLCONF capa eof capa psync2"), "+OK");
        let mut got = b"+OK\r\n".to_vec();
        let mut buf = [0u8; 1024];
        s.write_all(b"PSYNC ? -1\r\n").unwrap();
        // (Newlines may come between: the keepalive while the save runs.)
        while !String::from_utf8_lossy(&got).contains("\n$") {
            let n = s.read(&mut buf).expect("the preamble and the bulk header");
            assert!(n > 0, "closed early: {:?}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
        }
        let seen = String::from_utf8_lossy(&got).into_owned();
        assert!(seen.starts_with("+OK\r\n+FULLRESYNC "), "{seen}");
        within(30, "the transfer to stall on the full socket", || {
            replica_states(pc) == ["send_bulk"]
        });
        let pid = p.pid().expect("running");
        assert_eq!(open_on(pid, "dump.rdb"), 1, "the feed sends from the file");
        assert_eq!(int_of(&q(pc, "CLIENT KILL TYPE replica")), 1);
        within(10, "the feed to let go of the file", || {
            open_on(pid, "dump.rdb") == 0
        });
        within(10, "the killed replica to be gone", || replica_states(pc).is_empty());
        drop(s);
        // The primary is fine, and a new sync works.
        assert_eq!(q(pc, "SET after kill"), ok());
        let r = b_peer(Backend::Valkey);
        let rc = &mut r.client();
        follow(rc, &p);
        wait_caught_up(pc, rc);
        assert_eq!(text(&q(rc, "GET after")), "kill");
        assert_eq!(int_of(&q(rc, "DBSIZE")), int_of(&q(pc, "DBSIZE")));
    }
);

e2e!(
    ringkv_only fn rdb_del_sync_files_removes_the_file_without_persistence(b) {
        let p = b.start(
            Opts::new()
                .arg("save", "")
                .arg("repl-diskless-sync", "no")
                .arg("rdb-del-sync-files", "yes"),
        );
        let pc = &mut p.client();
        fill(pc);
        let r = b_peer(Backend::Valkey);
        let rc = &mut r.client();
        follow(rc, &p);
        wait_caught_up(pc, rc);
        // The line is logged just after the file goes.
        within(10, "the sync file to be removed, and said so", || {
            !p.dir().join("dump.rdb").exists()
                && p.log().contains(
                    "Removing the RDB file used to feed replicas in a persistence-less instance",
                )
        });
        // With save points the file of the next full sync stays.
        assert_eq!(query(pc, &["CONFIG", "SET", "save", "3600 1"]), ok());
        let r2 = b_peer(Backend::Valkey);
        let rc2 = &mut r2.client();
        follow(rc2, &p);
        wait_caught_up(pc, rc2);
        std::thread::sleep(Duration::from_millis(1500));
        assert!(p.dir().join("dump.rdb").exists());
    }
);

/// A replica that does not say `capa eof`, on a diskless primary with 200
/// keys: how its RDB is framed, how many saves the primary made for it,
/// and whether the RDB holds the keys (their names appear in it).
fn sync_without_capa_eof(p: &Server) -> (String, i64, bool) {
    let pc = &mut p.client();
    let mset: Vec<String> = (0..200).map(|i| format!("noeof:{i} v{i}")).collect();
    assert_eq!(q(pc, &format!("MSET {}", mset.join(" "))), ok());
    let saves =
        |c: &mut redis::Connection| -> i64 { stat(c, "persistence", "rdb_saves").parse().unwrap() };
    let before = saves(pc);
    let mut s = ringkv_e2e::tcp(p.port);
    assert_eq!(handshake_line(&mut s, "REPLCONF capa psync2"), "+OK");
    let mut got = b"+OK\r\n".to_vec();
    let mut buf = [0u8; 4096];
    s.write_all(b"PSYNC ? -1\r\n").unwrap();
    // The RDB ends with EOF and an 8-byte checksum; the keys' names are
    // stored as they are (no compression of short strings).
    let complete = |got: &[u8]| {
        let text = String::from_utf8_lossy(got);
        let Some(at) = text.find("\n$") else {
            return false;
        };
        let header = &text[at + 2..];
        let Some(end) = header.find("\r\n") else {
            return false;
        };
        let len: usize = header[..end].parse().expect("a length");
        got.len() >= at + 2 + end + 2 + len
    };
    while !complete(&got) {
        let n = s
            .read(&mut buf)
            .unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(&got)));
        assert!(n > 0, "closed early: {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(text.starts_with("+OK\r\n+FULLRESYNC "), "{text}");
    let framing = if text.contains("$EOF:") {
        "EOF-marked"
    } else {
        "sized"
    };
    let has_keys = text.contains("noeof:0") && text.contains("noeof:199");
    (framing.to_string(), saves(pc) - before, has_keys)
}

e2e!(
    ringkv_only fn a_replica_without_capa_eof_gets_the_file_of_a_save_to_disk(b) {
        let diskless = || Opts::new().arg("save", "").arg("repl-diskless-sync", "yes");
        let want = sync_without_capa_eof(&Backend::Valkey.start(diskless()));
        assert_eq!(want, ("sized".to_string(), 1, true), "Valkey 8.1, the oracle");
        let p = b.start(diskless());
        assert_eq!(sync_without_capa_eof(&p), want, "ringkv");
        assert!(p.dir().join("dump.rdb").exists());
        assert!(p.log().contains("Starting BGSAVE for SYNC with target: disk"));
    }
);
