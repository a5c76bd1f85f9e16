//! A ringkv primary killed with `kill -9` in the middle of a full sync,
//! both ways it syncs: to disk (`repl-diskless-sync no`, killed while the
//! BGSAVE for the sync writes its temp file) and diskless (killed while
//! the RDB streams to the replica). Nothing half written may count: the
//! primary's earlier dump.rdb stays as it was and is what a restart
//! loads; the replica loads nothing of the partial transfer, keeps
//! serving what it had, and syncs in full once the primary is back on
//! the same port.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use ringkv_e2e::dataset::{fill, plain_view};
use ringkv_e2e::replication::{assert_same, follow, replica_states, stat, wait_caught_up};
use ringkv_e2e::server::TempDir;
use ringkv_e2e::v::{int_of, ok, text};
use ringkv_e2e::{Backend, Opts, Server, e2e, q, within};

/// Keys DEBUG POPULATE adds after the dump was saved, in a database of
/// their own (`BIG_DB`, outside what `plain_view` compares), and their
/// value size: an RDB of about 25 MB.
const BIG_KEYS: u32 = 200_000;
const BIG_VALUE: u32 = 100;
const BIG_DB: u32 = 9;

/// The sync's snapshot captures one key per this many microseconds, so
/// it lasts seconds (200k keys: 10 s) whatever the machine's load: the
/// kill lands in the middle, never after the end.
const KEY_SAVE_DELAY_US: u32 = 50;

/// The names in `dir` that start with `temp-` (temp RDB files).
fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("read dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("temp-"))
        .collect()
}

/// Keys in database `db`.
fn keys_in(c: &mut redis::Connection, db: u32) -> i64 {
    q(c, &format!("SELECT {db}")).unwrap();
    let n = int_of(&q(c, "DBSIZE"));
    q(c, "SELECT 0").unwrap();
    n
}

/// INFO keyspace's `dbN:keys=K` pairs: how many keys each database holds.
fn key_counts(c: &mut redis::Connection) -> Vec<String> {
    text(&q(c, "INFO keyspace"))
        .lines()
        .filter(|l| l.starts_with("db"))
        .map(|l| l.split(',').next().unwrap().to_string())
        .collect()
}

/// The replica's link is down and no transfer is in progress.
fn link_down(c: &mut redis::Connection) -> bool {
    stat(c, "replication", "master_link_status") == "down"
        && stat(c, "replication", "master_sync_in_progress") == "0"
}

/// The replica still has exactly its own data: nothing of the partial
/// transfer, no temp file of it, no dump.rdb written from it; and it
/// answers reads (`replica-serve-stale-data yes`, the default).
fn replica_kept_its_data(r: &Server, own: &BTreeMap<String, String>, when: &str) {
    let rc = &mut r.client();
    assert!(link_down(rc), "{when}: the link is down");
    assert_eq!(
        stat(rc, "persistence", "loading"),
        "0",
        "{when}: the replica loads the partial transfer; log:\n{}",
        r.log()
    );
    assert_same(
        &plain_view(rc),
        own,
        &format!("{when}: the replica's own data"),
    );
    assert_eq!(
        keys_in(rc, BIG_DB),
        0,
        "{when}: a prefix of the transfer loaded"
    );
    assert_eq!(text(&q(rc, "GET own:string")), "mine");
    assert!(
        temp_files(r.dir()).is_empty(),
        "{when}: the replica left {:?}",
        temp_files(r.dir())
    );
    assert!(
        !r.dir().join("dump.rdb").exists(),
        "{when}: a dump.rdb from a partial transfer"
    );
}

/// The test, for a primary of backend `b` syncing to disk or diskless and
/// a replica of backend `replica`.
fn primary_killed_mid_full_sync(b: Backend, diskless: bool, replica: Backend) {
    let dir = TempDir::new("primary-killed");
    let opts = Opts::new()
        .dir(dir.path())
        .arg("save", "")
        .arg("appendonly", "no")
        .arg("enable-debug-command", "yes")
        .arg("repl-diskless-sync", if diskless { "yes" } else { "no" })
        .arg("repl-diskless-sync-delay", "0");
    let mut p = b.start(opts.clone());
    let port = p.port;
    let dump = dir.path().join("dump.rdb");
    // The dump: every type, saved; then far more data, not saved.
    let (saved, good) = {
        let pc = &mut p.client();
        fill(pc);
        let saved = plain_view(pc);
        assert_eq!(q(pc, "SAVE"), ok());
        let good = std::fs::read(&dump).expect("dump.rdb saved");
        q(pc, &format!("SELECT {BIG_DB}")).unwrap();
        let populate = format!("DEBUG POPULATE {BIG_KEYS} big {BIG_VALUE}");
        assert_eq!(q(pc, &populate), ok());
        q(pc, "SELECT 0").unwrap();
        assert_eq!(
            q(
                pc,
                &format!("CONFIG SET rdb-key-save-delay {KEY_SAVE_DELAY_US}")
            ),
            ok()
        );
        (saved, good)
    };
    // A replica with data of its own, which it must keep until a sync
    // completes.
    let r = replica.start(Opts::new().arg("save", ""));
    let rc = &mut r.client();
    for cmd in [
        "SET own:string mine",
        "RPUSH own:list a b c",
        "SELECT 2",
        "SET own:db2 x",
    ] {
        q(rc, cmd).unwrap();
    }
    q(rc, "SELECT 0").unwrap();
    let own = plain_view(rc);
    follow(rc, &p);
    {
        let pc = &mut p.client();
        if diskless {
            within(20, "the RDB to be streaming to the replica", || {
                stat(rc, "replication", "master_sync_in_progress") == "1"
                    && stat(rc, "replication", "master_sync_read_bytes")
                        .parse::<u64>()
                        .is_ok_and(|n| n > 64 * 1024)
            });
        } else {
            // The save for the sync is writing its temp file; the replica
            // waits for it.
            within(20, "the save for the sync to be writing", || {
                stat(pc, "persistence", "rdb_bgsave_in_progress") == "1"
                    && replica_states(pc) == ["wait_bgsave"]
                    && temp_files(dir.path())
                        .iter()
                        .any(|t| std::fs::metadata(dir.path().join(t)).is_ok_and(|m| m.len() > 0))
            });
            assert_eq!(stat(rc, "replication", "master_sync_in_progress"), "1");
        }
    }
    let log = p.log();
    p.kill_9().expect("the primary killed");
    drop(p);
    // The primary's dump is the one saved before, byte for byte.
    assert_eq!(
        std::fs::read(&dump).expect("dump.rdb"),
        good,
        "the dump changed; log:\n{log}"
    );
    if !diskless {
        // What the killed save left: its partial temp file, nothing more.
        assert_eq!(
            temp_files(dir.path()).len(),
            1,
            "{:?}",
            temp_files(dir.path())
        );
    }
    within(10, "the replica to see its link down", || link_down(rc));
    replica_kept_its_data(&r, &own, "right after the kill");
    // Still so a while later: nothing is loaded late either.
    std::thread::sleep(Duration::from_millis(1500));
    replica_kept_its_data(&r, &own, "1.5 s after the kill");
    // Back on the same dir and port: the earlier dump, exactly, and not
    // the temp file.
    let p = b.start(opts.port(port));
    p.wait_loaded();
    let pc = &mut p.client();
    assert_same(&plain_view(pc), &saved, "the restarted primary");
    assert_eq!(
        keys_in(pc, BIG_DB),
        0,
        "the restarted primary loaded the killed save"
    );
    // The replica comes back by itself and syncs in full.
    wait_caught_up(pc, rc);
    assert_eq!(stat(pc, "stats", "sync_full"), "1");
    assert_same(
        &plain_view(rc),
        &plain_view(pc),
        "the replica after the resync",
    );
    assert_eq!(key_counts(rc), key_counts(pc));
    assert_eq!(int_of(&q(rc, "EXISTS own:string")), 0);
    // And the stream follows.
    assert_eq!(q(pc, "SET after restart"), ok());
    wait_caught_up(pc, rc);
    assert_eq!(text(&q(rc, "GET after")), "restart");
}

e2e!(
    ringkv_only fn a_primary_killed_during_the_save_for_a_disk_sync_keeps_its_dump_and_resyncs(b) {
        primary_killed_mid_full_sync(b, false, b);
    }
);

e2e!(
    ringkv_only fn a_primary_killed_mid_diskless_transfer_leaves_the_replica_its_data(b) {
        primary_killed_mid_full_sync(b, true, b);
    }
);

e2e!(
    ringkv_only fn a_valkey_replica_of_a_primary_killed_mid_sync_keeps_its_data(b) {
        primary_killed_mid_full_sync(b, false, Backend::Valkey);
        primary_killed_mid_full_sync(b, true, Backend::Valkey);
    }
);
