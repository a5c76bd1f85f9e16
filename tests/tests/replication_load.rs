//! How a replica takes in its primary's RDB (`repl-diskless-load`): into
//! `dbfilename` and loaded from it (`disabled`, the default), or from the
//! socket straight to memory (`flush-before-load`; `on-empty-db` when the
//! replica holds nothing; `swapdb`, which keeps the old dataset aside
//! until the new one is in); whichever way, the replica's own FUNCTION
//! libraries give way to the primary's. Valkey 8.1 replicas run beside as
//! the oracle.

use std::path::Path;

use ringkv_e2e::dataset::{fill, plain_view, random_write};
use ringkv_e2e::replication::{
    assert_same, follow, settled_view, stat, sync_read_bytes, wait_caught_up,
};
use ringkv_e2e::v::{int_of, ok};
use ringkv_e2e::{Backend, Opts, Rng, Server, e2e, q, query, within};

/// RDB files in a replica's directory (its dump, or a transfer's temp).
fn rdb_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".rdb"))
        .collect();
    names.sort();
    names
}

/// A replica of `replica`'s kind with `repl-diskless-load mode` syncs
/// from `p` (holding one key of its own first when `nonempty`), then
/// follows a stream of writes: the RDB files it left in its directory.
fn sync_with(p: &Server, replica: Backend, mode: &str, nonempty: bool) -> Vec<String> {
    let pc = &mut p.client();
    let r = replica.start(Opts::new().arg("save", "").arg("repl-diskless-load", mode));
    let rc = &mut r.client();
    if nonempty {
        assert_eq!(q(rc, "SET mine 1"), ok());
    }
    follow(rc, p);
    wait_caught_up(pc, rc);
    assert_same(&plain_view(rc), &plain_view(pc), "after the full sync");
    let mut rng = Rng::new(71);
    for _ in 0..500 {
        random_write(pc, &mut rng);
    }
    let _ = q(pc, "SELECT 0");
    let want = settled_view(pc);
    wait_caught_up(pc, rc);
    assert_same(&plain_view(rc), &want, "after the stream");
    rdb_files(r.dir())
}

e2e!(
    ringkv_only fn a_diskless_load_writes_no_rdb_file_as_valkeys_does(b) {
        let p = b.start(Opts::new().arg("save", ""));
        fill(&mut p.client());
        let cases = [
            ("disabled", false),
            ("flush-before-load", false),
            ("flush-before-load", true),
            ("on-empty-db", false),
            ("on-empty-db", true),
            ("swapdb", false),
            ("swapdb", true),
        ];
        for (mode, nonempty) in cases {
            let want = sync_with(&p, Backend::Valkey, mode, nonempty);
            let got = sync_with(&p, b, mode, nonempty);
            assert_eq!(got, want, "{mode}, replica holding a key: {nonempty}");
        }
        // The oracle's own answers: through the disk unless diskless.
        assert_eq!(sync_with(&p, Backend::Valkey, "disabled", false), ["dump.rdb"]);
        assert!(sync_with(&p, Backend::Valkey, "flush-before-load", true).is_empty());
        assert_eq!(sync_with(&p, Backend::Valkey, "on-empty-db", true), ["dump.rdb"]);
    }
);

/// A replica of `replica`'s kind (with `repl-diskless-load mode`,
/// holding keys of its own) loses its primary halfway through a slow
/// transfer: how many keys it holds once the failed load is over, and
/// whether it said so.
fn cut_mid_load(p: &mut Server, replica: Backend, mode: &str) -> (i64, bool) {
    let r = replica.start(Opts::new().arg("save", "").arg("repl-diskless-load", mode));
    let rc = &mut r.client();
    for i in 0..10 {
        assert_eq!(q(rc, &format!("SET mine:{i} 1")), ok());
    }
    follow(rc, p);
    within(20, "the replica to be receiving the RDB", || {
        r.log().contains("receiving streamed RDB")
    });
    // About a third of the way through.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    p.kill_9();
    within(20, "the failed load to end", || {
        q(rc, "DBSIZE").is_ok() && stat(rc, "persistence", "loading") == "0"
    });
    let log = r.log();
    (
        int_of(&q(rc, "DBSIZE")),
        log.contains("Failed trying to load the MASTER synchronization DB from socket")
            || log.contains("Failed trying to load the PRIMARY synchronization DB from socket"),
    )
}

/// A primary whose full syncs take seconds (a key save delay) and send
/// their 5 MB of RDB a piece at a time.
fn slow_primary(b: Backend) -> Server {
    let p = b.start(
        Opts::new()
            .arg("save", "")
            .arg("rdbcompression", "no")
            .arg("enable-debug-command", "yes"),
    );
    let pc = &mut p.client();
    assert_eq!(q(pc, "DEBUG POPULATE 5000 key 1000"), ok());
    assert_eq!(q(pc, "CONFIG SET rdb-key-save-delay 1000"), ok());
    p
}

e2e!(
    /// `flush-before-load` leaves the replica empty; `swapdb` gives it its
    /// old dataset back.
    ringkv_only fn a_diskless_load_cut_short_ends_as_valkeys(b) {
        for (mode, keys) in [("flush-before-load", 0), ("swapdb", 10)] {
            let want = cut_mid_load(&mut slow_primary(b), Backend::Valkey, mode);
            assert_eq!(want, (keys, true), "Valkey 8.1, the oracle, {mode}");
            assert_eq!(cut_mid_load(&mut slow_primary(b), b, mode), want, "ringkv, {mode}");
        }
    }
);

/// A replica of `replica`'s kind holding a library of its own syncs in
/// full from `p` (which holds another), by each way of loading: which of
/// the two functions it can call afterwards.
fn libraries_after_sync(p: &Server, replica: Backend) -> Vec<(String, bool, bool)> {
    let mut out = Vec::new();
    for mode in ["disabled", "flush-before-load", "swapdb"] {
        let r = replica.start(Opts::new().arg("save", "").arg("repl-diskless-load", mode));
        let rc = &mut r.client();
        let mine = "#!lua name=mine\nredis.register_function{function_name='mine_f', callback=function() return 1 end, flags={'no-writes'}}";
        assert!(ringkv_e2e::query(rc, &["FUNCTION", "LOAD", mine]).is_ok());
        follow(rc, p);
        wait_caught_up(&mut p.client(), rc);
        let callable = |rc: &mut redis::Connection, f: &str| q(rc, &format!("FCALL {f} 0")).is_ok();
        out.push((
            mode.to_string(),
            callable(rc, "mine_f"),
            callable(rc, "theirs_f"),
        ));
    }
    out
}

e2e!(
    ringkv_only fn a_full_sync_replaces_the_replicas_libraries_as_valkeys(b) {
        let p = b.start(Opts::new().arg("save", ""));
        // Read-only functions: a replica calls them.
        let theirs = "#!lua name=theirs\nredis.register_function{function_name='theirs_f', callback=function() return 2 end, flags={'no-writes'}}";
        assert!(ringkv_e2e::query(&mut p.client(), &["FUNCTION", "LOAD", theirs]).is_ok());
        let want = libraries_after_sync(&p, Backend::Valkey);
        assert!(want.iter().all(|(_, mine, theirs)| !mine && *theirs), "Valkey 8.1, the oracle: {want:?}");
        assert_eq!(libraries_after_sync(&p, b), want, "ringkv");
    }
);

/// A replica of `replica`'s kind with `repl-diskless-load swapdb`, and a
/// Valkey replica of its own, syncs with `p` (5,000 keys of 1 KB and
/// `marker`); it is pointed where nothing listens while `p` changes
/// `marker` and writes past its 16 KB backlog, then back: the full sync
/// that follows continues the replica's own history, and its load is
/// slowed to a millisecond a key. What the replica answers during that
/// load (INFO's `loading` and `async_loading`, GET marker, whether its own
/// replica's link is still up, and that the sync is still in progress);
/// then, once the load is in, GET
/// marker, DBSIZE, and how many full syncs it has served its replica
/// (it syncs again from the new dataset).
fn answers_during_a_swapdb_load(p: &Server, replica: Backend) -> [String; 9] {
    let pc = &mut p.client();
    assert_eq!(q(pc, "CONFIG SET repl-backlog-size 16kb"), ok());
    assert_eq!(q(pc, "SET marker old"), ok());
    let r = replica.start(
        Opts::new()
            .arg("save", "")
            .arg("repl-diskless-load", "swapdb")
            // Valkey answers between keys, not every 2 MB of them.
            .arg("loading-process-events-interval-bytes", "1024"),
    );
    let rc = &mut r.client();
    follow(rc, p);
    wait_caught_up(pc, rc);
    let below = Backend::Valkey.start(Opts::new().arg("save", ""));
    let bc = &mut below.client();
    follow(bc, &r);
    wait_caught_up(rc, bc);
    let nowhere = ringkv_e2e::server::free_port();
    assert_eq!(
        query(rc, &["REPLICAOF", "127.0.0.1", &nowhere.to_string()]),
        ok()
    );
    assert_eq!(q(pc, "SET marker new"), ok());
    assert_eq!(query(pc, &["SET", "filler", &"x".repeat(64 * 1024)]), ok());
    assert_eq!(q(rc, "CONFIG SET key-load-delay 1000"), ok());
    follow(rc, p);
    within(20, "the replica's load to start", || {
        let info = ringkv_e2e::v::text(&q(rc, "INFO persistence"));
        info.contains("loading:1") || info.contains("async_loading:1")
    });
    let during = [
        stat(rc, "persistence", "loading"),
        stat(rc, "persistence", "async_loading"),
        format!("{:?}", q(rc, "GET marker")),
        stat(bc, "replication", "master_link_status"),
        stat(rc, "replication", "master_sync_in_progress"),
        stat(rc, "replication", "master_last_io_seconds_ago"),
    ];
    assert_eq!(q(rc, "CONFIG SET key-load-delay 0"), ok());
    wait_caught_up(pc, rc);
    within(20, "the replica's replica to sync again", || {
        stat(rc, "stats", "sync_full") == "2"
    });
    wait_caught_up(rc, bc);
    let [
        loading,
        async_loading,
        marker,
        below_link,
        in_progress,
        last_io,
    ] = during;
    [
        loading,
        async_loading,
        marker,
        below_link,
        in_progress,
        last_io,
        format!("{:?}", q(rc, "GET marker")),
        int_of(&q(rc, "DBSIZE")).to_string(),
        format!("{:?}", q(bc, "GET marker")),
    ]
}

e2e!(
    /// Valkey's async loading: the old dataset is served, and the
    /// replica's own replicas stay, until the new one is in.
    ringkv_only fn a_swapdb_load_of_the_replicas_own_history_serves_the_old_keys(b) {
        let p = slow_primary(b);
        assert_eq!(q(&mut p.client(), "CONFIG SET rdb-key-save-delay 0"), ok());
        let want = answers_during_a_swapdb_load(&p, Backend::Valkey);
        let (old, new) = ("Ok(bulk-string('\"old\"'))", "Ok(bulk-string('\"new\"'))");
        assert_eq!(
            want,
            ["0", "1", old, "up", "1", "-1", new, "5002", new].map(String::from),
            "Valkey 8.1, the oracle"
        );
        assert_eq!(answers_during_a_swapdb_load(&p, b), want, "ringkv");
    }
);

/// A replica of `replica`'s kind receiving an EOF-marked RDB into its
/// file (a slow diskless primary): INFO's size of the transfer, and
/// whether what is left reads as negative once bytes came in (the size
/// is unknown: Valkey counts it as 0).
fn streamed_transfer_fields(p: &Server, replica: Backend) -> (String, bool, String) {
    let r = replica.start(Opts::new().arg("save", ""));
    let rc = &mut r.client();
    follow(rc, p);
    within(20, "bytes of the RDB to arrive", || sync_read_bytes(rc) > 0);
    let left: i64 = stat(rc, "replication", "master_sync_left_bytes")
        .parse()
        .unwrap();
    (
        stat(rc, "replication", "master_sync_total_bytes"),
        left < 0,
        stat(rc, "replication", "master_sync_perc"),
    )
}

e2e!(
    ringkv_only fn a_streamed_transfer_reports_its_size_as_valkey_does(b) {
        let want = streamed_transfer_fields(&slow_primary(b), Backend::Valkey);
        assert_eq!(want, ("0".to_string(), true, "0.00".to_string()), "Valkey 8.1, the oracle");
        assert_eq!(streamed_transfer_fields(&slow_primary(b), b), want, "ringkv");
    }
);

/// A replica of `replica`'s kind holding 1,000 keys of its own syncs in
/// full from `p` (`repl-diskless-load disabled`, the default): what INFO
/// counts as freed lazily once it is in sync (Valkey 8's
/// `replica-lazy-flush yes` empties the old keys on its lazyfree thread).
fn lazily_flushed_by_a_sync(p: &Server, replica: Backend) -> String {
    let r = replica.start(Opts::new().arg("save", ""));
    let rc = &mut r.client();
    assert_eq!(stat(rc, "memory", "lazyfreed_objects"), "0");
    let mset: Vec<String> = (0..1000).map(|i| format!("mine:{i} v")).collect();
    assert_eq!(q(rc, &format!("MSET {}", mset.join(" "))), ok());
    follow(rc, p);
    wait_caught_up(&mut p.client(), rc);
    within(10, "the old keys to be freed", || {
        stat(rc, "memory", "lazyfree_pending_objects") == "0"
    });
    stat(rc, "memory", "lazyfreed_objects")
}

e2e!(
    ringkv_only fn a_full_sync_frees_the_replicas_old_keys_lazily_as_valkeys(b) {
        let p = b.start(Opts::new().arg("save", ""));
        assert_eq!(q(&mut p.client(), "SET theirs 1"), ok());
        let want = lazily_flushed_by_a_sync(&p, Backend::Valkey);
        assert_eq!(want, "1000", "Valkey 8.1, the oracle");
        assert_eq!(lazily_flushed_by_a_sync(&p, b), want, "ringkv");
    }
);
