//! RDB snapshots end to end: SAVE/BGSAVE/restart round trips of every type
//! and encoding, a BGSAVE that is exactly the dataset of its instant while
//! writes go on, -LOADING during a load, refusing bad files, a full disk
//! (MISCONF, the old dump kept), kill -9 in the middle of a BGSAVE,
//! shutdown saves, the dirty counter and save points.

use std::fs;
use std::path::Path;
use std::time::Duration;

use ringkv_e2e::dataset::{fill, view};
use ringkv_e2e::server::{SmallDisk, TempDir};
use ringkv_e2e::v::{err, int, ok, strings, text};
use ringkv_e2e::{Backend, Opts, e2e, info_field, q, query, within};

fn wait_bgsave_done(c: &mut redis::Connection) -> String {
    let mut status = String::new();
    within(30, "BGSAVE to finish", || {
        let info = text(&q(c, "INFO persistence"));
        status = info_field(&info, "rdb_last_bgsave_status");
        info_field(&info, "rdb_bgsave_in_progress") == "0"
    });
    status
}

e2e!(
    fn save_and_restart_keep_every_type_and_encoding(b) {
        let tmp = TempDir::new("rdb-roundtrip");
        let opts = Opts::new().dir(tmp.path());
        let before = {
            let mut srv = b.start(opts.clone());
            let c = &mut srv.client();
            fill(c);
            let before = view(c);
            assert_eq!(q(c, "SAVE"), ok());
            // NOSAVE: what comes back is what SAVE wrote.
            let _ = q(c, "SHUTDOWN NOSAVE");
            assert!(srv.wait_exit(Duration::from_secs(10)).is_some());
            before
        };
        assert!(tmp.path().join("dump.rdb").exists());
        let srv = b.start(opts);
        srv.wait_loaded();
        let c = &mut srv.client();
        assert_eq!(view(c), before);
        assert_eq!(q(c, "DBSIZE"), int(before.keys().filter(|k| k.starts_with("0:")).count() as i64));
    }
);

e2e!(
    fn bgsave_holds_the_dataset_of_its_instant(b) {
        let tmp = TempDir::new("rdb-pit");
        let srv = b.start(Opts::new().dir(tmp.path()));
        let c = &mut srv.client();
        for i in 0..2000 {
            query(c, &["SET", &format!("k:{i}"), "v0"]).unwrap();
        }
        q(c, "HSET h f0 v0").unwrap();
        q(c, "RPUSH l a b c").unwrap();
        // 500 µs a key: the save takes about a second, the writes below
        // land while it runs.
        assert_eq!(q(c, "CONFIG SET rdb-key-save-delay 500"), ok());
        assert_eq!(text(&q(c, "BGSAVE")), "Background saving started");
        for i in 0..1000 {
            query(c, &["SET", &format!("k:{i}"), "v1"]).unwrap();
        }
        for i in 1000..1500 {
            query(c, &["DEL", &format!("k:{i}")]).unwrap();
        }
        for i in 0..500 {
            query(c, &["SET", &format!("new:{i}"), "x"]).unwrap();
        }
        q(c, "HSET h f1 v1").unwrap();
        q(c, "RPUSH l d").unwrap();
        q(c, "EXPIRE k:1999 1000").unwrap();
        let info = text(&q(c, "INFO persistence"));
        assert_eq!(info_field(&info, "rdb_bgsave_in_progress"), "1", "{info}");
        assert_eq!(wait_bgsave_done(c), "ok");
        assert_eq!(q(c, "CONFIG SET rdb-key-save-delay 0"), ok());

        // Load the file in a second server and compare with the instant.
        let copy = TempDir::new("rdb-pit-copy");
        fs::copy(tmp.path().join("dump.rdb"), copy.path().join("dump.rdb")).unwrap();
        let other = b.start(Opts::new().dir(copy.path()));
        other.wait_loaded();
        let o = &mut other.client();
        assert_eq!(q(o, "DBSIZE"), int(2002));
        for i in 0..2000 {
            assert_eq!(text(&query(o, &["GET", &format!("k:{i}")])), "v0", "k:{i}");
        }
        assert_eq!(q(o, "EXISTS new:0 new:499"), int(0));
        assert_eq!(strings(&q(o, "HKEYS h")), vec!["f0"]);
        assert_eq!(strings(&q(o, "LRANGE l 0 -1")), vec!["a", "b", "c"]);
        assert_eq!(q(o, "TTL k:1999"), int(-1));
    }
);

/// A dump.rdb of 3,000 keys `k:<i>` set to `value`, written by a server
/// started with `opts`, which is gone again: a start-up load to watch.
fn saved_dump(b: Backend, opts: &Opts, value: &str) {
    let mut srv = b.start(opts.clone());
    let c = &mut srv.client();
    for i in 0..3000 {
        query(c, &["SET", &format!("k:{i}"), value]).unwrap();
    }
    assert_eq!(q(c, "SAVE"), ok());
    let _ = q(c, "SHUTDOWN NOSAVE");
    srv.wait_exit(Duration::from_secs(10));
}

e2e!(
    ringkv_only fn clients_get_loading_while_the_dump_loads(b) {
        let tmp = TempDir::new("rdb-loading");
        let opts = Opts::new().dir(tmp.path());
        saved_dump(b, &opts, "v");
        // 1 ms a key: three seconds of loading.
        let srv = b.start(
            opts.watch_load().arg("key-load-delay", "1000")
                .arg("enable-debug-command", "yes"),
        );
        let c = &mut srv.client();
        assert_eq!(q(c, "GET k:1"), err("LOADING Valkey is loading the dataset in memory"));
        // One load at a time: DEBUG (allowed while loading) does not
        // start a second one over it.
        assert_eq!(q(c, "DEBUG RELOAD"), err("LOADING Valkey is loading the dataset in memory"));
        let info = text(&q(c, "INFO persistence"));
        assert_eq!(info_field(&info, "loading"), "1", "{info}");
        assert!(info.contains("loading_loaded_perc:"), "{info}");
        within(30, "the load to finish", || {
            info_field(&text(&q(c, "INFO persistence")), "loading") == "0"
        });
        assert_eq!(text(&q(c, "GET k:2999")), "v");
        let info = text(&q(c, "INFO persistence"));
        assert_eq!(info_field(&info, "rdb_last_load_keys_loaded"), "3000");
        assert!(srv.log().contains("Done loading RDB, keys loaded: 3000"), "{}", srv.log());
    }
);

e2e!(
    ringkv_only fn a_shutdown_during_the_load_leaves_the_dump_whole(b) {
        // Valkey forces NOSAVE while it loads (shutdownCommand, and its
        // cron for a signal): Valkey 8.1, stopped by SHUTDOWN at 13% of a
        // load with a save point set, left its dump.rdb as it was.
        let tmp = TempDir::new("rdb-shutdown-loading");
        let opts = Opts::new().dir(tmp.path()).arg("save", "3600 1");
        saved_dump(b, &opts, "v");
        let path = tmp.path().join("dump.rdb");
        let whole = fs::read(&path).unwrap();
        for how in ["SHUTDOWN", "SHUTDOWN SAVE", "SIGTERM"] {
            // 1 ms a key: three seconds of loading.
            let mut srv = b.start(opts.clone().watch_load().arg("key-load-delay", "1000"));
            {
                let c = &mut srv.client();
                let info = text(&q(c, "INFO persistence"));
                assert_eq!(info_field(&info, "loading"), "1", "{how}: {info}");
                if how == "SIGTERM" {
                    srv.signal(libc::SIGTERM);
                } else {
                    let _ = q(c, how);
                }
            }
            assert!(srv.wait_exit(Duration::from_secs(10)).is_some(), "{how}");
            let log = srv.log();
            assert!(!log.contains("Saving the final RDB snapshot"), "{how}: {log}");
            assert!(fs::read(&path).unwrap() == whole, "{how} rewrote dump.rdb; log:\n{log}");
        }
    }
);

e2e!(
    ringkv_only fn config_set_of_the_files_waits_for_the_load(b) {
        // Valkey's DENY_LOADING_CONFIG settings: appendonly yes during a
        // load would rewrite the AOF from half the dataset (checked on
        // Valkey 8.1: -LOADING, and no appendonlydir).
        let tmp = TempDir::new("rdb-config-loading");
        let opts = Opts::new().dir(tmp.path());
        saved_dump(b, &opts, "v");
        let srv = b.start(opts.watch_load().arg("key-load-delay", "1000"));
        let c = &mut srv.client();
        let loading = err("LOADING Valkey is loading the dataset in memory");
        let dir = tmp.path().to_str().unwrap();
        for set in [
            vec!["CONFIG", "SET", "appendonly", "yes"],
            vec!["CONFIG", "SET", "dir", dir],
            vec!["CONFIG", "SET", "repl-diskless-load", "swapdb"],
            // Before any other error, as Valkey's.
            vec!["CONFIG", "SET", "maxmemory-samples", "6", "appendonly", "maybe"],
        ] {
            assert_eq!(query(c, &set), loading, "{set:?}");
        }
        assert_eq!(q(c, "CONFIG SET maxmemory-samples 6"), ok());
        assert_eq!(info_field(&text(&q(c, "INFO persistence")), "loading"), "1");
        assert!(!tmp.path().join("appendonlydir").exists());
        within(30, "the load to finish", || {
            info_field(&text(&q(c, "INFO persistence")), "loading") == "0"
        });
        assert_eq!(q(c, "CONFIG SET appendonly yes"), ok());
        assert_eq!(strings(&q(c, "CONFIG GET appendonly")), vec!["appendonly", "yes"]);
    }
);

e2e!(
    ringkv_only fn nothing_is_evicted_before_the_load_ends(b) {
        // Valkey's isSafeToPerformEvictions: no eviction while loading,
        // also when a command allowed then (INFO) finds memory over the
        // limit; the first command after the load evicts.
        let tmp = TempDir::new("rdb-evict-loading");
        let opts = Opts::new().dir(tmp.path());
        saved_dump(b, &opts, &"v".repeat(1000));
        // 1 ms a key: three seconds of loading, the limit passed midway.
        let srv = b.start(
            opts.watch_load().arg("key-load-delay", "1000")
                .arg("maxmemory", "2mb")
                .arg("maxmemory-policy", "allkeys-lru"),
        );
        let c = &mut srv.client();
        let mut over_while_loading = false;
        within(30, "the load to finish", || {
            let info = text(&q(c, "INFO"));
            let used: u64 = info_field(&info, "used_memory").parse().unwrap();
            if info_field(&info, "loading") == "0" {
                return true;
            }
            over_while_loading |= used > 2 << 20;
            assert_eq!(info_field(&info, "evicted_keys"), "0", "evicted while loading");
            std::thread::sleep(Duration::from_millis(20));
            false
        });
        assert!(over_while_loading, "the load never passed maxmemory");
        assert_eq!(q(c, "SET after load"), ok());
        let info = text(&q(c, "INFO"));
        assert_ne!(info_field(&info, "evicted_keys"), "0", "{info}");
        // Down to the limit once the evicted values are freed (lazily by
        // default) and an eviction cut short by its time limit has gone
        // on; the SET and INFO's own reply may take it a little over.
        within(10, "used memory back at maxmemory", || {
            let info = text(&q(c, "INFO memory"));
            info_field(&info, "used_memory").parse::<u64>().unwrap() <= (2 << 20) + (64 << 10)
        });
    }
);

/// Start a server on `dir` that must refuse to; returns its log.
fn refused(b: Backend, dir: &Path) -> String {
    let (st, log) = b.start_expect_exit(Opts::new().arg("dir", dir.to_str().unwrap()));
    assert!(!st.success(), "started on a bad dump; log:\n{log}");
    log
}

e2e!(
    ringkv_only fn a_bad_dump_stops_startup(b) {
        let tmp = TempDir::new("rdb-bad");
        let opts = Opts::new().dir(tmp.path());
        {
            let mut srv = b.start(opts.clone());
            let c = &mut srv.client();
            fill(c);
            assert_eq!(q(c, "SAVE"), ok());
            let _ = q(c, "SHUTDOWN NOSAVE");
            srv.wait_exit(Duration::from_secs(10));
        }
        let path = tmp.path().join("dump.rdb");
        let good = fs::read(&path).unwrap();

        fs::write(&path, &good[..good.len() / 2]).unwrap();
        let log = refused(b, tmp.path());
        assert!(log.contains("dump.rdb") && log.contains("offset"), "{log}");

        let mut flipped = good.clone();
        let at = good.len() / 3;
        flipped[at] ^= 0x20;
        fs::write(&path, &flipped).unwrap();
        let log = refused(b, tmp.path());
        assert!(log.contains("dump.rdb"), "{log}");

        let mut newer = good.clone();
        newer[5..9].copy_from_slice(b"0012");
        fs::write(&path, &newer).unwrap();
        let log = refused(b, tmp.path());
        assert!(log.contains("12"), "{log}");

        fs::write(&path, b"not an rdb file at all").unwrap();
        refused(b, tmp.path());

        // The good file still loads.
        fs::write(&path, &good).unwrap();
        let srv = b.start(opts);
        srv.wait_loaded();
        assert_eq!(text(&q(&mut srv.client(), "GET s:short")), "hello");
    }
);

e2e!(
    fn a_full_disk_fails_bgsave_keeps_the_old_dump_and_denies_writes(b) {
        let Some(disk) = SmallDisk::mount(512) else {
            // Mounting needs root; CI runs as root.
            assert!(std::env::var("CI").is_err(), "cannot mount a tmpfs in CI");
            eprintln!("skipped: cannot mount a tmpfs here (not root?)");
            return;
        };
        let dir = disk.dir.path();
        let srv = b.start(Opts::new().dir(dir).arg_multi("save", &["3600", "1"]));
        let c = &mut srv.client();
        q(c, "SET small v").unwrap();
        assert_eq!(q(c, "SAVE"), ok());
        let old = fs::read(dir.join("dump.rdb")).unwrap();
        // Random bytes do not compress: the next dump needs ~400 KiB.
        let mut rng = ringkv_e2e::Rng::new(7);
        for i in 0..100 {
            let v: String = (0..4000).map(|_| (b'!' + rng.below(90) as u8) as char).collect();
            query(c, &["SET", &format!("big:{i}"), &v]).unwrap();
        }
        // Leave about 200 KiB free (the server log is in this dir too).
        let filler = dir.join("filler");
        fs::write(&filler, vec![0u8; 200 * 1024]).unwrap();
        assert_eq!(text(&q(c, "BGSAVE")), "Background saving started");
        assert_eq!(wait_bgsave_done(c), "err");
        assert_eq!(fs::read(dir.join("dump.rdb")).unwrap(), old, "the old dump changed");
        let temp: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("temp-"))
            .collect();
        assert!(temp.is_empty(), "temp files left: {temp:?}");
        let e = q(c, "SET x y").unwrap_err();
        assert!(e.starts_with("MISCONF "), "{e}");
        // Reads still work.
        assert_eq!(text(&q(c, "GET small")), "v");
        fs::remove_file(&filler).unwrap();
        assert_eq!(text(&q(c, "BGSAVE")), "Background saving started");
        assert_eq!(wait_bgsave_done(c), "ok");
        assert_eq!(q(c, "SET x y"), ok());
    }
);

e2e!(
    fn shutdown_and_sigterm_save_as_configured(b) {
        let tmp = TempDir::new("rdb-shutdown");
        let with_points = Opts::new().dir(tmp.path()).arg_multi("save", &["3600", "1"]);
        {
            let mut srv = b.start(with_points.clone());
            q(&mut srv.client(), "SET a 1").unwrap();
            srv.sigterm();
            let st = srv.wait_exit(Duration::from_secs(10)).expect("exit on SIGTERM");
            assert!(st.success(), "{st}");
        }
        {
            let mut srv = b.start(with_points.clone());
            srv.wait_loaded();
            let c = &mut srv.client();
            assert_eq!(text(&q(c, "GET a")), "1");
            q(c, "SET b 2").unwrap();
            let _ = q(c, "SHUTDOWN NOSAVE");
            srv.wait_exit(Duration::from_secs(10));
        }
        let no_points = Opts::new().dir(tmp.path()).arg("save", "");
        {
            let mut srv = b.start(no_points.clone());
            srv.wait_loaded();
            let c = &mut srv.client();
            assert_eq!(q(c, "EXISTS b"), int(0));
            q(c, "SET c 3").unwrap();
            let _ = q(c, "SHUTDOWN SAVE");
            srv.wait_exit(Duration::from_secs(10));
        }
        let srv = b.start(no_points);
        srv.wait_loaded();
        assert_eq!(text(&q(&mut srv.client(), "GET c")), "3");
    }
);

e2e!(
    fn dirty_counter_lastsave_and_save_points(b) {
        let tmp = TempDir::new("rdb-dirty");
        let srv = b.start(Opts::new().dir(tmp.path()).arg("save", ""));
        let c = &mut srv.client();
        let dirty = |c: &mut redis::Connection| {
            info_field(&text(&q(c, "INFO persistence")), "rdb_changes_since_last_save")
        };
        assert_eq!(dirty(c), "0");
        q(c, "SET a 1").unwrap();
        q(c, "INCR a").unwrap();
        q(c, "GET a").unwrap();
        q(c, "DEL nosuchkey").unwrap();
        assert_eq!(dirty(c), "2");
        let before = ringkv_e2e::v::int_of(&q(c, "LASTSAVE"));
        std::thread::sleep(Duration::from_millis(1100));
        assert_eq!(q(c, "SAVE"), ok());
        assert_eq!(dirty(c), "0");
        assert!(ringkv_e2e::v::int_of(&q(c, "LASTSAVE")) > before);
        let saves = |c: &mut redis::Connection| info_field(&text(&q(c, "INFO persistence")), "rdb_saves");
        let n = saves(c);
        // A save point of one change in one second fires from cron.
        assert_eq!(query(c, &["CONFIG", "SET", "save", "1 1"]), ok());
        q(c, "SET b 2").unwrap();
        within(10, "the save point to fire", || saves(c) != n && dirty(c) == "0");
        assert_eq!(text(&q(c, "BGSAVE SCHEDULE")), "Background saving started");
        wait_bgsave_done(c);
    }
);

e2e!(
    fn debug_reload_keeps_the_dataset(b) {
        let tmp = TempDir::new("rdb-reload");
        let srv = b.start(Opts::new().dir(tmp.path()).arg("enable-debug-command", "yes"));
        let c = &mut srv.client();
        fill(c);
        let before = view(c);
        assert_eq!(q(c, "DEBUG RELOAD"), ok());
        assert_eq!(view(c), before);
    }
);

// ringkv only: redis-server's forked child would outlive the kill and
// finish (and rename) the file itself.
e2e!(
    ringkv_only fn kill_9_during_bgsave_leaves_the_last_good_dump(b) {
        let tmp = TempDir::new("rdb-kill");
        let opts = Opts::new().dir(tmp.path()).arg("save", "");
        let mut srv = b.start(opts.clone());
        let c = &mut srv.client();
        for i in 0..3000 {
            query(c, &["SET", &format!("old:{i}"), "v"]).unwrap();
        }
        assert_eq!(q(c, "SAVE"), ok());
        let good = fs::read(tmp.path().join("dump.rdb")).unwrap();
        for i in 0..3000 {
            query(c, &["SET", &format!("new:{i}"), "v"]).unwrap();
        }
        // A save that takes seconds, killed in the middle.
        assert_eq!(q(c, "CONFIG SET rdb-key-save-delay 1000"), ok());
        assert_eq!(text(&q(c, "BGSAVE")), "Background saving started");
        std::thread::sleep(Duration::from_millis(500));
        let pid = srv.pid().expect("running") as i32;
        // SAFETY: kill(2) on the PID of our own still-unreaped child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        srv.wait_exit(Duration::from_secs(10)).expect("killed");
        assert_eq!(fs::read(tmp.path().join("dump.rdb")).unwrap(), good, "the dump changed");
        let srv = b.start(opts);
        srv.wait_loaded();
        let c = &mut srv.client();
        assert_eq!(q(c, "DBSIZE"), int(3000));
        assert_eq!(q(c, "EXISTS new:0"), int(0));
    }
);

e2e!(
    fn flushdb_during_bgsave_keeps_the_snapshot_and_flushall_saves_empty(b) {
        let tmp = TempDir::new("rdb-flush");
        let srv = b.start(Opts::new().dir(tmp.path()).arg_multi("save", &["3600", "1"]));
        let c = &mut srv.client();
        for i in 0..1000 {
            query(c, &["SET", &format!("k:{i}"), "v"]).unwrap();
        }
        assert_eq!(q(c, "CONFIG SET rdb-key-save-delay 1000"), ok());
        assert_eq!(text(&q(c, "BGSAVE")), "Background saving started");
        assert_eq!(q(c, "FLUSHDB"), ok());
        q(c, "SET after flush").unwrap();
        assert_eq!(wait_bgsave_done(c), "ok");
        assert_eq!(q(c, "CONFIG SET rdb-key-save-delay 0"), ok());
        let copy = TempDir::new("rdb-flush-copy");
        fs::copy(tmp.path().join("dump.rdb"), copy.path().join("dump.rdb")).unwrap();
        {
            let other = b.start(Opts::new().dir(copy.path()));
            other.wait_loaded();
            let o = &mut other.client();
            assert_eq!(q(o, "DBSIZE"), int(1000));
            assert_eq!(q(o, "EXISTS after"), int(0));
        }
        // FLUSHALL with save points writes the empty dataset at once.
        assert_eq!(q(c, "FLUSHALL"), ok());
        fs::copy(tmp.path().join("dump.rdb"), copy.path().join("dump.rdb")).unwrap();
        let other = b.start(Opts::new().dir(copy.path()));
        other.wait_loaded();
        assert_eq!(q(&mut other.client(), "DBSIZE"), int(0));
    }
);

e2e!(
    fn debug_populate_makes_padded_keys_and_skips_existing_ones(b) {
        let srv = b.start(Opts::new().arg("enable-debug-command", "yes"));
        let c = &mut srv.client();
        q(c, "SET key:1 mine").unwrap();
        assert_eq!(q(c, "DEBUG POPULATE 3"), ok());
        assert_eq!(q(c, "DBSIZE"), int(3));
        assert_eq!(text(&q(c, "GET key:0")), "value:0");
        assert_eq!(text(&q(c, "GET key:1")), "mine");
        assert_eq!(q(c, "DEBUG POPULATE 2 p 10"), ok());
        assert_eq!(text(&q(c, "GET p:1")), "value:1\0\0\0");
        assert_eq!(q(c, "DEBUG POPULATE 1 p 3"), ok());
        assert_eq!(text(&q(c, "GET p:0")), "value:0\0\0\0");
        assert_eq!(q(c, "DEBUG POPULATE 2 q 3"), ok());
        assert_eq!(text(&q(c, "GET q:1")), "val");
    }
);
