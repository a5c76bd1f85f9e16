//! Chained replication: a ringkv replica feeding replicas of its own
//! (top -> middle -> bottom). The middle relays its primary's stream byte
//! for byte, so the three report the same replication id and offset; its
//! own link to the top can drop and continue without touching the
//! bottom; the bottom's link can drop and continue from the middle's
//! backlog; promoted, the middle lets the bottom continue; synced in full
//! from a new primary, it makes the bottom sync again. Valkey 8.1 and
//! redis-server 7.0 at either end of a ringkv middle; the middle's INFO,
//! ROLE and WAIT against a Valkey middle's; a replica's AOF (its own
//! effects, as Valkey's) loaded back by ringkv and Valkey.

use ringkv_e2e::dataset::{fill, plain_view, random_write};
use ringkv_e2e::replication::{
    assert_same, follow, incr_files_text, settled_view, stat, wait_caught_up,
};
use ringkv_e2e::v::{int, int_of, ok, strings, text};
use ringkv_e2e::{Backend, Opts, Rng, Server, e2e, info_field, q, query, within};

/// A server of `backend`; a peer (Valkey, redis-server) sends its RDB at
/// once when it is a primary.
fn start(backend: Backend) -> Server {
    if backend.is_peer() {
        backend.start(Opts::new().arg("repl-diskless-sync-delay", "0"))
    } else {
        backend.server()
    }
}

/// top -> middle -> bottom, synced: the top holds `fill`'s dataset.
/// The bottom joins while the stream is in database 2, and the stream
/// goes on there without a SELECT: the bottom must take the database
/// from the middle's RDB (`repl-stream-db`).
fn chain(top: Backend, middle: Backend, bottom: Backend) -> (Server, Server, Server) {
    let (t, m, b) = (start(top), start(middle), start(bottom));
    let (tc, mc, bc) = (&mut t.client(), &mut m.client(), &mut b.client());
    fill(tc);
    follow(mc, &t);
    wait_caught_up(tc, mc);
    assert_eq!(q(tc, "SELECT 2"), ok());
    assert_eq!(q(tc, "SET chain:before 1"), ok());
    wait_caught_up(tc, mc);
    follow(bc, &m);
    wait_caught_up(mc, bc);
    assert_eq!(q(tc, "SET chain:after 1"), ok());
    assert_eq!(q(tc, "SELECT 0"), ok());
    wait_caught_up(tc, mc);
    wait_caught_up(mc, bc);
    (t, m, b)
}

/// `n` random writes of every kind on `c` (several databases, MULTI,
/// rewritten effects), then the dataset once its short TTLs ran out.
fn write_and_settle(
    c: &mut redis::Connection,
    seed: u64,
    n: usize,
) -> std::collections::BTreeMap<String, String> {
    let mut rng = Rng::new(seed);
    for _ in 0..n {
        random_write(c, &mut rng);
    }
    let _ = q(c, "SELECT 0");
    settled_view(c)
}

/// Every server of the chain reports the top's replication id and the
/// same offset.
fn assert_same_offsets(servers: &mut [&mut redis::Connection]) {
    let infos: Vec<String> = servers
        .iter_mut()
        .map(|c| text(&q(c, "INFO replication")))
        .collect();
    for info in &infos[1..] {
        for field in ["master_replid", "master_repl_offset"] {
            assert_eq!(
                info_field(info, field),
                info_field(&infos[0], field),
                "{field}"
            );
        }
    }
}

fn three_ringkv_servers(b: Backend, seed: u64) {
    let (t, m, bo) = chain(b, b, b);
    let (tc, mc, bc) = (&mut t.client(), &mut m.client(), &mut bo.client());
    assert_same(&plain_view(bc), &plain_view(tc), "after the full syncs");
    // A script's writes travel as one MULTI/EXEC.
    let script = "redis.call('SET', 'lua:a', ARGV[1]); redis.call('INCR', 'lua:n'); return 1";
    for i in 0..3 {
        assert_eq!(
            int_of(&query(tc, &["EVAL", script, "0", &i.to_string()])),
            1
        );
    }
    let want = write_and_settle(tc, seed, 1500);
    wait_caught_up(tc, mc);
    wait_caught_up(mc, bc);
    assert_same(&plain_view(mc), &want, "the middle after the stream");
    assert_same(&plain_view(bc), &want, "the bottom after the stream");
    assert_eq!(text(&q(bc, "GET lua:n")), "3");
    assert_same_offsets(&mut [tc, mc, bc]);
    // The middle shows both sides, as Valkey's INFO does.
    let info = text(&q(mc, "INFO replication"));
    assert_eq!(info_field(&info, "role"), "slave");
    assert_eq!(info_field(&info, "master_link_status"), "up");
    assert_eq!(info_field(&info, "connected_slaves"), "1");
    let slave0 = info_field(&info, "slave0");
    assert!(
        slave0.starts_with(&format!("ip=127.0.0.1,port={},state=online,", bo.port)),
        "{slave0}"
    );
    assert_eq!(info_field(&info, "repl_backlog_active"), "1");
    let role = strings(&q(mc, "ROLE"));
    assert_eq!(
        role[..4],
        ["slave", "127.0.0.1", &t.port.to_string(), "connected"]
    );
    // WAIT on a replica is Valkey's error, sub-replicas or not.
    let err = q(mc, "WAIT 1 100").unwrap_err();
    assert!(
        err.starts_with("ERR WAIT cannot be used with replica instances."),
        "{err}"
    );
    assert_eq!(stat(mc, "stats", "sync_full"), "1");
    assert_eq!(stat(tc, "stats", "sync_full"), "1");
}

e2e!(
    ringkv_only fn three_ringkv_servers_in_a_chain_hold_the_same_data_and_offsets(b) {
        three_ringkv_servers(b, 41);
    }
);

/// A ringkv middle between peers: `top` -> ringkv -> `bottom`.
fn ringkv_between(b: Backend, top: Backend, bottom: Backend, seed: u64) {
    let (t, m, bo) = chain(top, b, bottom);
    let (tc, mc, bc) = (&mut t.client(), &mut m.client(), &mut bo.client());
    assert_same(
        &plain_view(bc),
        &plain_view(tc),
        &format!("{bottom:?} after its full sync from the middle"),
    );
    let want = write_and_settle(tc, seed, 1500);
    wait_caught_up(tc, mc);
    wait_caught_up(mc, bc);
    assert_same(&plain_view(mc), &want, "the middle after the stream");
    assert_same(
        &plain_view(bc),
        &want,
        &format!("{bottom:?} after the stream from {top:?} through ringkv"),
    );
    assert_same_offsets(&mut [tc, mc, bc]);
    assert_eq!(stat(mc, "stats", "sync_full"), "1");
}

e2e!(
    ringkv_only fn valkey_then_ringkv_then_valkey(b) {
        ringkv_between(b, Backend::Valkey, Backend::Valkey, 42);
    }
);

/// The names of INFO replication's fields, in order.
fn info_names(c: &mut redis::Connection) -> Vec<String> {
    text(&q(c, "INFO replication"))
        .lines()
        .filter_map(|l| l.split_once(':').map(|(k, _)| k.to_string()))
        .collect()
}

e2e!(
    ringkv_only fn a_middle_reports_as_a_valkey_middle_does(b) {
        let (t, m, _bo) = chain(Backend::Valkey, b, Backend::Valkey);
        let (vm, vb) = (start(Backend::Valkey), start(Backend::Valkey));
        let (tc, vmc, vbc) = (&mut t.client(), &mut vm.client(), &mut vb.client());
        follow(vmc, &t);
        wait_caught_up(tc, vmc);
        follow(vbc, &vm);
        wait_caught_up(vmc, vbc);
        let mc = &mut m.client();
        wait_caught_up(tc, mc);
        let names = info_names(mc);
        assert!(names.iter().any(|n| n == "slave0"), "{names:?}");
        assert_eq!(names, info_names(vmc));
        let (role, vrole) = (strings(&q(mc, "ROLE")), strings(&q(vmc, "ROLE")));
        assert_eq!(role.len(), vrole.len());
        assert_eq!(role[..4], vrole[..4]);
        assert_eq!(q(mc, "WAIT 1 100"), q(vmc, "WAIT 1 100"));
    }
);

e2e!(
    ringkv_only fn valkey_then_ringkv_then_redis_7(b) {
        ringkv_between(b, Backend::Valkey, Backend::Redis, 43);
    }
);

e2e!(
    ringkv_only fn redis_7_then_ringkv_then_valkey(b) {
        ringkv_between(b, Backend::Redis, Backend::Valkey, 44);
    }
);

fn middle_link_cut(b: Backend, bottom: Backend) {
    let (t, m, bo) = chain(b, b, bottom);
    let (tc, mc, bc) = (&mut t.client(), &mut m.client(), &mut bo.client());
    let mut rng = Rng::new(45);
    for round in 0..3 {
        assert_eq!(
            int_of(&q(mc, "CLIENT KILL TYPE master")),
            1,
            "round {round}"
        );
        for _ in 0..200 {
            random_write(tc, &mut rng);
        }
        let _ = q(tc, "SELECT 0");
        let want = settled_view(tc);
        wait_caught_up(tc, mc);
        wait_caught_up(mc, bc);
        assert_same(&plain_view(bc), &want, &format!("round {round}"));
        assert_same_offsets(&mut [tc, mc, bc]);
    }
    // The middle continued every time, and its replica never noticed.
    assert_eq!(stat(tc, "stats", "sync_full"), "1");
    let continued: u64 = stat(tc, "stats", "sync_partial_ok").parse().unwrap();
    assert!(continued >= 3, "the top's sync_partial_ok {continued}");
    assert_eq!(stat(mc, "stats", "sync_full"), "1");
    assert_eq!(stat(mc, "stats", "sync_partial_ok"), "0");
    assert_eq!(stat(mc, "replication", "connected_slaves"), "1");
}

e2e!(
    ringkv_only fn the_middle_continues_after_its_link_drops_and_its_replica_stays(b) {
        middle_link_cut(b, b);
    }
);

e2e!(
    ringkv_only fn a_valkey_bottom_stays_while_the_middle_reconnects(b) {
        middle_link_cut(b, Backend::Valkey);
    }
);

fn bottom_link_cut(b: Backend, bottom: Backend) {
    let (t, m, bo) = chain(b, b, bottom);
    let (tc, mc, bc) = (&mut t.client(), &mut m.client(), &mut bo.client());
    let mut rng = Rng::new(52);
    for round in 0..3 {
        // From either end of the link.
        let killed = if round % 2 == 0 {
            q(bc, "CLIENT KILL TYPE master")
        } else {
            q(mc, "CLIENT KILL TYPE replica")
        };
        assert_eq!(int_of(&killed), 1, "round {round}");
        for _ in 0..200 {
            random_write(tc, &mut rng);
        }
        let _ = q(tc, "SELECT 0");
        let want = settled_view(tc);
        wait_caught_up(tc, mc);
        wait_caught_up(mc, bc);
        assert_same(&plain_view(bc), &want, &format!("round {round}"));
        assert_same_offsets(&mut [tc, mc, bc]);
    }
    // The bottom continued from the middle's backlog every time.
    assert_eq!(stat(mc, "stats", "sync_full"), "1");
    assert_eq!(stat(mc, "stats", "sync_partial_ok"), "3");
    assert_eq!(stat(tc, "stats", "sync_full"), "1");
}

e2e!(
    ringkv_only fn the_bottom_continues_from_the_middles_backlog(b) {
        bottom_link_cut(b, b);
    }
);

e2e!(
    ringkv_only fn a_valkey_bottom_continues_from_the_middles_backlog(b) {
        bottom_link_cut(b, Backend::Valkey);
    }
);

fn middle_promoted(b: Backend, bottom: Backend) {
    let (t, m, bo) = chain(b, b, bottom);
    let (tc, mc, bc) = (&mut t.client(), &mut m.client(), &mut bo.client());
    let _ = write_and_settle(tc, 46, 300);
    wait_caught_up(tc, mc);
    wait_caught_up(mc, bc);
    let old_id = stat(mc, "replication", "master_replid");
    assert_eq!(q(mc, "REPLICAOF NO ONE"), ok());
    // The bottom reconnects and continues with the old id (replid2).
    within(
        20,
        "the bottom to continue from the promoted middle",
        || {
            stat(mc, "stats", "sync_partial_ok") == "1"
                && stat(bc, "replication", "master_link_status") == "up"
        },
    );
    let info = text(&q(mc, "INFO replication"));
    assert_eq!(info_field(&info, "role"), "master");
    assert_eq!(info_field(&info, "master_replid2"), old_id);
    assert_eq!(stat(mc, "stats", "sync_full"), "1", "no full sync");
    // Writes on the new primary reach the bottom.
    let want = write_and_settle(mc, 47, 500);
    wait_caught_up(mc, bc);
    assert_same(
        &plain_view(bc),
        &want,
        "after writes on the promoted middle",
    );
    assert_same_offsets(&mut [mc, bc]);
    assert_ne!(stat(bc, "replication", "master_replid"), old_id);
}

e2e!(
    ringkv_only fn a_promoted_middle_keeps_its_replica_by_partial_resync(b) {
        middle_promoted(b, b);
    }
);

e2e!(
    ringkv_only fn a_promoted_middle_keeps_its_valkey_replica(b) {
        middle_promoted(b, Backend::Valkey);
    }
);

e2e!(
    ringkv_only fn a_middle_synced_in_full_by_a_new_primary_makes_its_replica_sync_again(b) {
        let (t, m, bo) = chain(b, b, b);
        let (tc, mc, bc) = (&mut t.client(), &mut m.client(), &mut bo.client());
        let _ = write_and_settle(tc, 48, 200);
        wait_caught_up(tc, mc);
        wait_caught_up(mc, bc);
        // Another primary, another history and dataset.
        let other = b.server();
        let oc = &mut other.client();
        assert_eq!(q(oc, "SET other:key 1"), ok());
        let want = write_and_settle(oc, 49, 300);
        follow(mc, &other);
        wait_caught_up(oc, mc);
        wait_caught_up(mc, bc);
        assert_same(&plain_view(bc), &want, "the bottom after the middle's full resync");
        assert_same_offsets(&mut [oc, mc, bc]);
        // The bottom was dropped and synced in full from the new dataset.
        assert_eq!(stat(mc, "stats", "sync_full"), "2");
        assert_eq!(int_of(&q(bc, "EXISTS other:key")), 1);
        // And it follows the stream that comes after.
        let want = write_and_settle(oc, 50, 200);
        wait_caught_up(oc, mc);
        wait_caught_up(mc, bc);
        assert_same(&plain_view(bc), &want, "the bottom after the new stream");
    }
);

/// What a replica's AOF holds: the primary's writes and its own (it is
/// writable), none of the primary's PINGs or GETACKs; it loads back.
fn writable_replica_aof(primary: &Server, replica: Backend) {
    let pc = &mut primary.client();
    let tmp = ringkv_e2e::server::TempDir::new("replica-aof");
    let aof = || Opts::new().aof_in(tmp.path());
    let mut r = replica.start(aof().arg("replica-read-only", "no"));
    let rc = &mut r.client();
    assert_eq!(q(pc, "FLUSHALL"), ok());
    assert_eq!(q(pc, "SET from:primary 1"), ok());
    follow(rc, primary);
    wait_caught_up(pc, rc);
    wait_rewrite_done(rc);
    assert_eq!(q(pc, "SELECT 3"), ok());
    assert_eq!(q(pc, "RPUSH stream:list a b c"), int(3));
    // The primary PINGs every second; a WAIT sends a GETACK.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    assert_eq!(int_of(&q(pc, "WAIT 1 5000")), 1);
    assert_eq!(q(pc, "SET stream:last 1"), ok());
    let _ = q(pc, "SELECT 0");
    wait_caught_up(pc, rc);
    assert_eq!(q(rc, "SET replica:own 2"), ok());
    assert_eq!(q(rc, "SELECT 2"), ok());
    assert_eq!(q(rc, "INCR replica:counter"), int(1));
    let _ = q(rc, "SELECT 0");
    let want = plain_view(rc);
    assert_eq!(
        want.get("2:replica:counter").map(String::as_str),
        Some("string/persist/1"),
        "{want:?}"
    );
    let _ = q(rc, "SHUTDOWN NOSAVE");
    r.wait_exit(std::time::Duration::from_secs(10));
    let files = incr_files_text(tmp.path());
    for absent in ["PING", "REPLCONF"] {
        assert!(!files.contains(absent), "{replica:?}'s AOF has {absent}");
    }
    for present in [
        "stream:list",
        "stream:last",
        "replica:own",
        "replica:counter",
    ] {
        assert!(files.contains(present), "{replica:?}'s AOF lacks {present}");
    }
    let back = replica.start(aof());
    assert_same(
        &plain_view(&mut back.client()),
        &want,
        &format!("{replica:?}'s AOF loaded back"),
    );
}

e2e!(
    ringkv_only fn a_writable_replicas_aof_holds_its_own_effects_as_valkeys(b) {
        // Valkey's replica beside ours, on the same primary.
        let primary = b.start(Opts::new().arg("repl-ping-replica-period", "1"));
        for replica in [b, Backend::Valkey] {
            writable_replica_aof(&primary, replica);
        }
    }
);

e2e!(
    ringkv_only fn an_aof_goes_on_through_a_failover_and_back(b) {
        // `t` has an AOF. Its replica `n` is promoted, `t` follows `n`
        // and continues its history (no full sync, so no rewrite: the
        // AOF goes on from the primary's effects to its own as a
        // replica), then `t` is promoted again and written to. The file
        // must hold all of it, and none of `n`'s PINGs.
        let tmp = ringkv_e2e::server::TempDir::new("failover-aof");
        let aof = || {
            Opts::new()
                .aof_in(tmp.path())
                .arg("repl-ping-replica-period", "1")
        };
        let mut t = b.start(aof());
        let n = b.start(Opts::new().arg("repl-ping-replica-period", "1"));
        let (tc, nc) = (&mut t.client(), &mut n.client());
        let _ = write_and_settle(tc, 61, 200);
        follow(nc, &t);
        wait_caught_up(tc, nc);
        assert_eq!(q(nc, "REPLICAOF NO ONE"), ok());
        follow(tc, &n);
        wait_caught_up(nc, tc);
        assert_eq!(stat(nc, "stats", "sync_partial_ok"), "1", "t continued");
        let rewrites = stat(tc, "persistence", "aof_rewrites");
        let _ = write_and_settle(nc, 62, 300);
        std::thread::sleep(std::time::Duration::from_millis(1500));
        wait_caught_up(nc, tc);
        assert_eq!(q(tc, "REPLICAOF NO ONE"), ok());
        let want = write_and_settle(tc, 63, 200);
        assert_eq!(stat(tc, "persistence", "aof_rewrites"), rewrites, "no rewrite");
        let _ = q(tc, "SHUTDOWN NOSAVE");
        t.wait_exit(std::time::Duration::from_secs(10));
        let files = incr_files_text(tmp.path());
        assert!(!files.contains("PING"), "the AOF has the primary's PINGs");
        for backend in [b, Backend::Valkey] {
            let r = backend.start(aof());
            assert_same(
                &plain_view(&mut r.client()),
                &want,
                &format!("the AOF loaded by {backend:?}"),
            );
        }
    }
);

fn wait_rewrite_done(c: &mut redis::Connection) {
    within(30, "the AOF rewrite to finish", || {
        let info = text(&q(c, "INFO persistence"));
        info_field(&info, "aof_rewrite_in_progress") == "0"
            && info_field(&info, "aof_rewrite_scheduled") == "0"
    });
}

e2e!(
    ringkv_only fn a_replicas_aof_loads_back_after_a_rewrite_in_another_database(b) {
        // The primary's stream selects database 2 once, before the
        // replica's rewrite, and never again: the replica's new incr file
        // must still put what follows in database 2.
        let t = b.server();
        let tc = &mut t.client();
        let tmp = ringkv_e2e::server::TempDir::new("chain-aof");
        let mut m = b.start(
            Opts::new()
                .aof_in(tmp.path()),
        );
        let mc = &mut m.client();
        follow(mc, &t);
        wait_caught_up(tc, mc);
        // The rewrite that follows the full sync.
        wait_rewrite_done(mc);
        // The stream selects database 2 once, before the rewrite.
        assert_eq!(q(tc, "SELECT 2"), ok());
        assert_eq!(q(tc, "SET before 1"), ok());
        wait_caught_up(tc, mc);
        assert!(q(mc, "BGREWRITEAOF").is_ok());
        wait_rewrite_done(mc);
        // Still in database 2 on the top: no SELECT in the stream.
        assert_eq!(q(tc, "SET after 2"), ok());
        assert_eq!(int_of(&q(tc, "INCR counter")), 1);
        let _ = q(tc, "SELECT 0");
        let want = plain_view(tc);
        wait_caught_up(tc, mc);
        let _ = q(mc, "SHUTDOWN NOSAVE");
        m.wait_exit(std::time::Duration::from_secs(10));
        // Loaded back by ringkv and by Valkey 8.1, not as a replica.
        for backend in [b, Backend::Valkey] {
            let r = backend.start(
                Opts::new()
                    .aof_in(tmp.path()),
            );
            let rc = &mut r.client();
            assert_same(&plain_view(rc), &want, &format!("the AOF loaded by {backend:?}"));
        }
    }
);

e2e!(
    ringkv_only fn a_replicas_aof_after_a_full_sync_holds_the_primarys_dataset(b) {
        // A full sync replaces the dataset: the AOF is rewritten from it
        // (as Valkey restarts its AOF after a sync), so the file does not
        // replay the stream onto what the replica had before.
        let t = b.server();
        let tc = &mut t.client();
        fill(tc);
        let tmp = ringkv_e2e::server::TempDir::new("chain-aof-sync");
        let mut m = b.start(
            Opts::new()
                .aof_in(tmp.path()),
        );
        let mc = &mut m.client();
        assert_eq!(q(mc, "SET replica:own 1"), ok());
        let rewrites = stat(mc, "persistence", "aof_rewrites");
        follow(mc, &t);
        wait_caught_up(tc, mc);
        within(30, "the AOF rewrite after the sync to finish", || {
            let info = text(&q(mc, "INFO persistence"));
            info_field(&info, "aof_rewrite_in_progress") == "0"
                && info_field(&info, "aof_rewrite_scheduled") == "0"
                && info_field(&info, "aof_rewrites") != rewrites
        });
        let want = write_and_settle(tc, 51, 300);
        wait_caught_up(tc, mc);
        let _ = q(mc, "SHUTDOWN NOSAVE");
        m.wait_exit(std::time::Duration::from_secs(10));
        let r = b.start(
            Opts::new()
                .aof_in(tmp.path()),
        );
        let rc = &mut r.client();
        assert_same(&plain_view(rc), &want, "the replica's AOF loaded back");
    }
);

e2e!(
    ringkv_only fn a_primary_turned_replica_keeps_its_replicas_when_its_history_continues(b) {
        // A failover: the replica `n` is promoted, the old primary `t`
        // follows it and continues (+CONTINUE with `n`'s new id); `t`'s
        // other replica `s` stays with `t` — reconnected to learn the new
        // id, it continues from `t`'s backlog — and gets `n`'s stream
        // through it. `t` must not PING between `n`'s catching up and its
        // promotion: `t` would then be ahead of `n` and need a full sync.
        let quiet = Opts::new().arg("repl-ping-replica-period", "3600");
        let (t, n, s) = (b.start(quiet), b.server(), b.server());
        let (tc, nc, sc) = (&mut t.client(), &mut n.client(), &mut s.client());
        fill(tc);
        follow(nc, &t);
        follow(sc, &t);
        wait_caught_up(tc, nc);
        wait_caught_up(tc, sc);
        assert_eq!(q(nc, "REPLICAOF NO ONE"), ok());
        follow(tc, &n);
        wait_caught_up(nc, tc);
        assert_eq!(stat(nc, "stats", "sync_partial_ok"), "1");
        assert_eq!(stat(nc, "stats", "sync_full"), "0");
        let want = write_and_settle(nc, 53, 500);
        wait_caught_up(nc, tc);
        wait_caught_up(tc, sc);
        assert_same(&plain_view(sc), &want, "the old primary's replica");
        assert_same_offsets(&mut [nc, tc, sc]);
        assert_eq!(stat(tc, "stats", "sync_full"), "2", "n and s at the start only");
        assert_eq!(stat(tc, "stats", "sync_partial_ok"), "1");
        assert_eq!(stat(tc, "replication", "connected_slaves"), "1");
    }
);
