//! How a replica takes in its primary's RDB (`repl-diskless-load`): into
//! `dbfilename` and loaded from it (`disabled`, the default), or from the
//! socket straight to memory (`flush-before-load`; `on-empty-db` when the
//! replica holds nothing; `swapdb`, which keeps the old dataset aside
//! until the new one is in); whichever way, the replica's own FUNCTION
//! libraries give way to the primary's. Valkey 8.1 replicas run beside as
//! the oracle.

use std::path::Path;

use ringkv_e2e::dataset::{fill, plain_view, random_write};
use ringkv_e2e::replication::{assert_same, follow, settled_view, stat, wait_caught_up};
use ringkv_e2e::v::{int_of, ok};
use ringkv_e2e::{Backend, Opts, Rng, Server, e2e, q, within};

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
