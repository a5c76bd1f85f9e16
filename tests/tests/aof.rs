//! The append-only file end to end: restarts replay every type, the AOF
//! wins over the RDB file, BGREWRITEAOF compacts while writes go on,
//! CONFIG SET appendonly at runtime, truncated and corrupt files, and
//! kill -9 under a write load with `appendfsync always` losing nothing
//! that was acknowledged.

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ringkv_e2e::dataset::{fill, plain_view, random_write, view};
use ringkv_e2e::replication::{follow, wait_caught_up};
use ringkv_e2e::server::{SmallDisk, TempDir};
use ringkv_e2e::v::{err, int, ok, text};
use ringkv_e2e::{Backend, Opts, Rng, e2e, info_field, q, query, within};

fn aof_opts(dir: &Path) -> Opts {
    Opts::new()
        .dir(dir)
        .arg("save", "")
        .arg("appendonly", "yes")
}

fn manifest(dir: &Path) -> String {
    fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest")).unwrap_or_default()
}

fn wait_rewrite_done(c: &mut redis::Connection) -> String {
    let mut status = String::new();
    within(30, "the AOF rewrite to finish", || {
        let info = text(&q(c, "INFO persistence"));
        status = info_field(&info, "aof_last_bgrewrite_status");
        info_field(&info, "aof_rewrite_in_progress") == "0"
            && info_field(&info, "aof_rewrite_scheduled") == "0"
    });
    status
}

/// With `appendfsync everysec` the AOF thread writes a little after the
/// reply: wait until it has everything, so a kill -9 loses nothing.
fn wait_written(c: &mut redis::Connection) {
    within(10, "the AOF to be written", || {
        info_field(&text(&q(c, "INFO persistence")), "aof_buffer_length") == "0"
    });
}

/// kill -9 once the AOF has every write so far.
fn crash(srv: &mut ringkv_e2e::Server) {
    wait_written(&mut srv.client());
    srv.kill_9().expect("killed");
}

/// The AOF directory's files and their sizes.
fn aof_files(dir: &Path) -> Vec<(String, u64)> {
    let mut files: Vec<(String, u64)> = fs::read_dir(dir.join("appendonlydir"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().len(),
            )
        })
        .collect();
    files.sort();
    files
}

/// What clients see while a server loads its AOF, and what the load
/// leaves behind.
fn aof_loads_while_clients_wait(b: Backend) {
    let tmp = TempDir::new("aof-loading");
    let dir = tmp.path();
    {
        let mut srv = b.start(aof_opts(dir));
        let c = &mut srv.client();
        // Valkey serves clients every 1,024 commands of its load.
        for i in 0..10_000 {
            query(c, &["SET", &format!("k:{i}"), "v"]).unwrap();
        }
        wait_written(c);
        let _ = q(c, "SHUTDOWN");
        assert!(srv.wait_exit(Duration::from_secs(10)).is_some());
    }
    let files = aof_files(dir);
    let loading = err("LOADING Valkey is loading the dataset in memory");
    // 300 µs a command: three seconds of loading.
    let slow = aof_opts(dir).watch_load().arg("key-load-delay", "300");
    {
        // A shutdown during the load leaves the files as they were.
        let mut srv = b.start(slow.clone());
        let c = &mut srv.client();
        assert_eq!(q(c, "GET k:1"), loading);
        let _ = q(c, "SHUTDOWN");
        assert!(srv.wait_exit(Duration::from_secs(10)).is_some());
        assert_eq!(aof_files(dir), files, "log:\n{}", srv.log());
    }
    let mut srv = b.start(slow);
    {
        let c = &mut srv.client();
        assert_eq!(q(c, "GET k:1"), loading);
        let info = text(&q(c, "INFO persistence"));
        assert_eq!(info_field(&info, "loading"), "1", "{info}");
        let perc: f64 = info_field(&info, "loading_loaded_perc").parse().unwrap();
        assert!(perc < 100.0, "{info}");
        // Valkey opens its AOF once loaded, and says so only then.
        assert_eq!(info_field(&info, "aof_enabled"), "0", "{info}");
        // The AOF's own client is nobody's to see.
        let clients = text(&q(c, "INFO clients"));
        assert_eq!(info_field(&clients, "connected_clients"), "1", "{clients}");
        within(30, "the load to finish", || {
            info_field(&text(&q(c, "INFO persistence")), "loading") == "0"
        });
        assert_eq!(q(c, "DBSIZE"), int(10_000));
        assert_eq!(
            info_field(&text(&q(c, "INFO persistence")), "aof_enabled"),
            "1"
        );
        assert_eq!(text(&q(c, "GET k:9999")), "v");
        // The AOF is open for appending once loaded.
        assert_eq!(q(c, "SET after load"), ok());
    }
    assert!(
        srv.log().contains("DB loaded from append only file"),
        "{}",
        srv.log()
    );
    crash(&mut srv);
    let srv = b.start(aof_opts(dir));
    let c = &mut srv.client();
    assert_eq!(text(&q(c, "GET after")), "load");
    assert_eq!(q(c, "DBSIZE"), int(10_001));
}

e2e!(
    fn an_aof_loads_while_clients_get_loading(b) {
        aof_loads_while_clients_wait(b);
    }
);

/// The oracle: Valkey 8.1 serves clients the same way during its AOF load.
#[test]
fn valkey_serves_loading_during_its_aof_load() {
    aof_loads_while_clients_wait(Backend::Valkey);
}

e2e!(
    fn restart_replays_every_type_from_the_aof(b) {
        let tmp = TempDir::new("aof-roundtrip");
        let opts = aof_opts(tmp.path());
        let before = {
            let mut srv = b.start(opts.clone());
            let c = &mut srv.client();
            fill(c);
            let before = view(c);
            crash(&mut srv);
            before
        };
        let m = manifest(tmp.path());
        assert!(m.contains("appendonly.aof.1.base.rdb seq 1 type b"), "{m}");
        assert!(m.contains("appendonly.aof.1.incr.aof seq 1 type i"), "{m}");
        let srv = b.start(opts);
        let c = &mut srv.client();
        assert_eq!(view(c), before);
        let info = text(&q(c, "INFO persistence"));
        assert_eq!(info_field(&info, "aof_enabled"), "1");
        assert_eq!(info_field(&info, "aof_last_write_status"), "ok");
    }
);

e2e!(
    fn the_aof_wins_over_the_rdb_file(b) {
        let tmp = TempDir::new("aof-wins");
        {
            let mut srv = b.start(Opts::new().dir(tmp.path()).arg("save", ""));
            let c = &mut srv.client();
            q(c, "SET from-rdb 1").unwrap();
            assert_eq!(q(c, "SAVE"), ok());
            let _ = q(c, "SHUTDOWN NOSAVE");
            srv.wait_exit(Duration::from_secs(10));
        }
        // No AOF yet: Valkey starts empty with a new base, ignoring the dump.
        {
            let mut srv = b.start(aof_opts(tmp.path()));
            let c = &mut srv.client();
            assert_eq!(q(c, "EXISTS from-rdb"), int(0));
            q(c, "SET from-aof 1").unwrap();
            let _ = q(c, "SHUTDOWN NOSAVE");
            srv.wait_exit(Duration::from_secs(10));
        }
        let srv = b.start(aof_opts(tmp.path()));
        let c = &mut srv.client();
        assert_eq!(q(c, "EXISTS from-rdb"), int(0));
        assert_eq!(text(&q(c, "GET from-aof")), "1");
    }
);

e2e!(
    fn bgrewriteaof_compacts_while_writes_go_on(b) {
        let tmp = TempDir::new("aof-rewrite");
        let opts = aof_opts(tmp.path());
        let mut srv = b.start(opts.clone());
        let c = &mut srv.client();
        for i in 0..2000 {
            query(c, &["SET", &format!("k:{i}"), "v0"]).unwrap();
            query(c, &["INCR", "counter"]).unwrap();
        }
        // A base that takes about a second to capture, written meanwhile.
        if !b.is_peer() {
            assert_eq!(q(c, "CONFIG SET rdb-key-save-delay 300"), ok());
        }
        assert_eq!(
            text(&q(c, "BGREWRITEAOF")),
            "Background append only file rewriting started"
        );
        for i in 0..500 {
            query(c, &["SET", &format!("k:{i}"), "v1"]).unwrap();
            query(c, &["DEL", &format!("k:{}", 1000 + i)]).unwrap();
            query(c, &["INCR", "counter"]).unwrap();
        }
        assert_eq!(wait_rewrite_done(c), "ok");
        if !b.is_peer() {
            assert_eq!(q(c, "CONFIG SET rdb-key-save-delay 0"), ok());
        }
        let m = manifest(tmp.path());
        assert!(m.contains("appendonly.aof.2.base.rdb seq 2 type b"), "{m}");
        assert!(m.contains("appendonly.aof.2.incr.aof seq 2 type i"), "{m}");
        assert!(!m.contains("seq 1"), "{m}");
        let names: Vec<String> = fs::read_dir(tmp.path().join("appendonlydir"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| n.contains(".1.")), "{names:?}");
        let info = text(&q(c, "INFO persistence"));
        assert_eq!(info_field(&info, "aof_rewrites"), "1");
        let base: u64 = info_field(&info, "aof_base_size").parse().unwrap();
        let size: u64 = info_field(&info, "aof_current_size").parse().unwrap();
        assert!(base > 0 && size >= base, "{info}");
        crash(&mut srv);
        let srv = b.start(opts);
        let c = &mut srv.client();
        assert_eq!(q(c, "DBSIZE"), int(1501));
        assert_eq!(text(&q(c, "GET k:0")), "v1");
        assert_eq!(text(&q(c, "GET k:999")), "v0");
        assert_eq!(q(c, "EXISTS k:1000"), int(0));
        assert_eq!(text(&q(c, "GET counter")), "2500");
    }
);

e2e!(
    fn config_set_appendonly_at_runtime(b) {
        let tmp = TempDir::new("aof-runtime");
        let mut srv = b.start(Opts::new().dir(tmp.path()).arg("save", ""));
        let c = &mut srv.client();
        for i in 0..1000 {
            query(c, &["SET", &format!("k:{i}"), "before"]).unwrap();
        }
        assert_eq!(q(c, "CONFIG SET appendonly yes"), ok());
        wait_rewrite_done(c);
        q(c, "SET after 1").unwrap();
        q(c, "EXPIRE k:0 100000").unwrap();
        let info = text(&q(c, "INFO persistence"));
        assert_eq!(info_field(&info, "aof_enabled"), "1");
        crash(&mut srv);
        let mut srv = b.start(aof_opts(tmp.path()));
        let c = &mut srv.client();
        assert_eq!(q(c, "DBSIZE"), int(1001));
        let ttl = ringkv_e2e::v::int_of(&q(c, "TTL k:0"));
        assert!((99_000..=100_000).contains(&ttl), "{ttl}");
        // Off again: later writes are not in the file.
        assert_eq!(q(c, "CONFIG SET appendonly no"), ok());
        q(c, "SET lost 1").unwrap();
        srv.kill_9().expect("killed");
        let srv = b.start(aof_opts(tmp.path()));
        let c = &mut srv.client();
        assert_eq!(q(c, "EXISTS lost"), int(0));
        assert_eq!(q(c, "EXISTS after"), int(1));
    }
);

/// The last incr file of the AOF in `dir`.
fn last_incr(dir: &Path) -> std::path::PathBuf {
    let m = manifest(dir);
    let name = m
        .lines()
        .rfind(|l| l.ends_with("type i"))
        .and_then(|l| l.split(' ').nth(1))
        .expect("an incr file")
        .to_string();
    dir.join("appendonlydir").join(name)
}

e2e!(
    fn a_truncated_aof_loads_only_with_aof_load_truncated(b) {
        let tmp = TempDir::new("aof-truncated");
        let opts = aof_opts(tmp.path());
        {
            let mut srv = b.start(opts.clone());
            let c = &mut srv.client();
            q(c, "SET a 1").unwrap();
            q(c, "SET b 2").unwrap();
            crash(&mut srv);
        }
        let incr = last_incr(tmp.path());
        let good = fs::read(&incr).unwrap();
        // A command cut off in the middle, as a crash mid-write leaves it.
        let mut cut = good.clone();
        cut.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$1\r\nc\r\n$1");
        fs::write(&incr, &cut).unwrap();
        let (st, log) = b.start_expect_exit(
            opts.clone().arg("aof-load-truncated", "no"),
        );
        assert!(!st.success(), "{log}");
        assert!(log.contains("appendonly.aof.1.incr.aof"), "{log}");
        let mut srv = b.start(opts.clone());
        let c = &mut srv.client();
        assert_eq!(text(&q(c, "GET b")), "2");
        assert_eq!(q(c, "EXISTS c"), int(0));
        assert!(srv.log().contains("aof-load-truncated"), "{}", srv.log());
        // The partial command was cut from the file: appending goes on.
        q(c, "SET d 4").unwrap();
        crash(&mut srv);
        let srv = b.start(opts.clone().arg("aof-load-truncated", "no"));
        assert_eq!(text(&q(&mut srv.client(), "GET d")), "4");
    }
);

/// An AOF in `dir` holding `SET a 1` (written by a server killed with
/// kill -9) whose last incr file then gets `tail`: (that file, its bytes).
fn aof_ending_with(b: Backend, dir: &Path, tail: &[u8]) -> (std::path::PathBuf, Vec<u8>) {
    {
        let mut srv = b.start(aof_opts(dir));
        q(&mut srv.client(), "SET a 1").unwrap();
        crash(&mut srv);
    }
    let incr = last_incr(dir);
    let mut bytes = fs::read(&incr).unwrap();
    bytes.extend_from_slice(tail);
    fs::write(&incr, &bytes).unwrap();
    (incr, bytes)
}

e2e!(
    fn a_corrupt_aof_stops_the_start_with_file_and_offset(b) {
        let tmp = TempDir::new("aof-corrupt");
        let opts = aof_opts(tmp.path());
        let (incr, _) = aof_ending_with(b, tmp.path(), b"*2\r\n$3\r\nGET\r\nxx\r\n*1\r\n$4\r\nPING\r\n");
        let (st, log) = b.start_expect_exit(opts.clone());
        assert!(!st.success(), "{log}");
        assert!(log.contains("appendonly.aof.1.incr.aof"), "{log}");
        // A manifest naming a file that is not there.
        fs::write(&incr, b"").unwrap();
        let m = manifest(tmp.path()).replace("1.incr.aof", "7.incr.aof");
        fs::write(tmp.path().join("appendonlydir/appendonly.aof.manifest"), m).unwrap();
        let (st, log) = b.start_expect_exit(opts);
        assert!(!st.success(), "{log}");
        assert!(log.contains("appendonly.aof.7.incr.aof"), "{log}");
    }
);

e2e!(
    fn an_unknown_command_in_the_aof_stops_the_start(b) {
        // Found while the server already listens (the load runs in the
        // background): the process still exits, naming the command, and
        // the files stay as they were.
        let tmp = TempDir::new("aof-unknown");
        let (incr, bytes) = aof_ending_with(b, tmp.path(), b"*2\r\n$7\r\nNOTACMD\r\n$1\r\nx\r\n");
        let (st, log) = b.start_expect_exit(aof_opts(tmp.path()));
        assert!(!st.success(), "{log}");
        assert!(
            log.contains("Unknown command 'NOTACMD' reading the append only file"),
            "{log}"
        );
        assert_eq!(fs::read(&incr).unwrap(), bytes);
    }
);

/// Each writer `t` sends `SET w:<t>:<n>` for n = from[t], from[t]+1, ...
/// on its connection until the server dies; returns, per writer, the
/// first n not acknowledged. The connections are made before the caller
/// starts the clock to the kill: a writer connecting after it could reach
/// another test's server that took the freed port, and count its replies.
fn write_until_killed(
    conns: Vec<redis::Connection>,
    from: Vec<u64>,
    stop: Arc<AtomicBool>,
    publish: bool,
) -> std::thread::JoinHandle<Vec<u64>> {
    let handles: Vec<_> = conns
        .into_iter()
        .zip(from)
        .enumerate()
        .map(|(t, (mut c, start))| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut next = start;
                while !stop.load(Ordering::Relaxed) && next < start + 1_000_000 {
                    // For replicas only: kept out of the file.
                    if publish && query(&mut c, &["PUBLISH", "news", "x"]).is_err() {
                        break;
                    }
                    match query(&mut c, &["SET", &format!("w:{t}:{next}"), "1"]) {
                        Ok(_) => next += 1,
                        Err(_) => break,
                    }
                }
                next
            })
        })
        .collect();
    std::thread::spawn(move || handles.into_iter().map(|h| h.join().unwrap()).collect())
}

/// How many of `w:<t>:<from..to>` exist.
fn count_written(c: &mut redis::Connection, t: usize, from: u64, to: u64) -> i64 {
    let mut args = vec!["EXISTS".to_string()];
    args.extend((from..to).map(|n| format!("w:{t}:{n}")));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    ringkv_e2e::v::int_of(&query(c, &refs))
}

/// kill -9 at random points under a write load, `cycles` times (at most
/// `limit`): after each restart, every write acknowledged before the kill
/// is there. `replica`: a replica follows each run, PINGed every second,
/// and the writers PUBLISH between their SETs, so the stream holds
/// what the AOF must skip.
fn kill_9_under_load_loses_no_acknowledged_write(
    b: Backend,
    appendfsync: &str,
    cycles: usize,
    limit: Duration,
    replica: bool,
) {
    let tmp = TempDir::new("aof-kill");
    let opts = aof_opts(tmp.path())
        .arg("appendfsync", appendfsync)
        .arg("repl-ping-replica-period", "1");
    let mut rng = Rng::new(0x05ee_da0f);
    // Per writer: every key below `acked` was acknowledged.
    let mut acked: Vec<u64> = vec![0; 4];
    let mut checked_from: Vec<u64> = vec![0; 4];
    let started = Instant::now();
    let mut done = 0;
    let mut total = 0u64;
    loop {
        let mut srv = b.start(opts.clone());
        {
            let c = &mut srv.client();
            // Everything acknowledged before the last kill is there.
            for t in 0..acked.len() {
                let (from, to) = (checked_from[t], acked[t]);
                if to > from {
                    assert_eq!(
                        count_written(c, t, from, to),
                        (to - from) as i64,
                        "{appendfsync}, cycle {done}: writer {t} lost acknowledged writes in {from}..{to}"
                    );
                    total += to - from;
                }
                checked_from[t] = to;
            }
        }
        // Bounded in count and in time.
        if done == cycles || started.elapsed() > limit {
            break;
        }
        let _follower = replica.then(|| {
            let r = b.server();
            follow(&mut r.client(), &srv);
            wait_caught_up(&mut srv.client(), &mut r.client());
            r
        });
        let stop = Arc::new(AtomicBool::new(false));
        let conns = acked.iter().map(|_| srv.client()).collect();
        let writers = write_until_killed(conns, acked.clone(), stop.clone(), replica);
        std::thread::sleep(Duration::from_millis(20 + rng.below(150)));
        srv.kill_9().expect("killed");
        stop.store(true, Ordering::Relaxed);
        acked = writers.join().unwrap();
        done += 1;
    }
    eprintln!("{appendfsync}: kill -9 cycles: {done}, acknowledged writes checked: {total}");
    assert!(done >= cycles.min(20), "only {done} cycles ran");
    assert!(total > 0);
}

fn kill_cycles(default: usize) -> usize {
    std::env::var("RINGKV_AOF_KILL_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

// redis-server 7.0 behaves the same, but the suite runs these on ringkv
// only: they are long, and it is ringkv's durability being proven.
e2e!(
    ringkv_only fn kill_9_under_load_with_appendfsync_always_loses_no_acknowledged_write(b) {
        kill_9_under_load_loses_no_acknowledged_write(
            b,
            "always",
            kill_cycles(100),
            Duration::from_secs(240),
            false,
        );
    }
);

e2e!(
    /// A process crash (not the machine's) loses nothing acknowledged
    /// under `everysec` either: the batch's writes are in the file (the
    /// page cache) before its replies go out, also while the last
    /// second's fsync runs (Valkey postpones the write then, and its
    /// replies go out first); only the fsync comes later.
    ringkv_only fn kill_9_under_load_with_appendfsync_everysec_loses_no_acknowledged_write(b) {
        kill_9_under_load_loses_no_acknowledged_write(
            b,
            "everysec",
            kill_cycles(30),
            Duration::from_secs(90),
            false,
        );
    }
);

e2e!(
    /// The same with a replica attached: the PUBLISHes, PINGs and the
    /// ranges the AOF cuts out of the stream leave a file that loads.
    ringkv_only fn kill_9_with_a_replica_and_publishes_loses_no_acknowledged_write(b) {
        kill_9_under_load_loses_no_acknowledged_write(
            b,
            "everysec",
            kill_cycles(10),
            Duration::from_secs(60),
            true,
        );
    }
);

/// Random writes against `b` with the AOF on; returns the dataset as the
/// server saw it once every short TTL had run out, with the AOF written.
fn random_history(b: Backend, dir: &Path, seed: u64) -> std::collections::BTreeMap<String, String> {
    let mut srv = b.start(aof_opts(dir));
    let c = &mut srv.client();
    let mut rng = Rng::new(seed);
    for _ in 0..3000 {
        random_write(c, &mut rng);
    }
    std::thread::sleep(Duration::from_millis(100));
    let want = plain_view(c);
    wait_written(c);
    let _ = q(c, "SHUTDOWN NOSAVE");
    srv.wait_exit(Duration::from_secs(10));
    want
}

/// The directory `from` copied into a new temp dir.
fn copy_dir(from: &Path) -> TempDir {
    let to = TempDir::new("aof-copy");
    fs::create_dir_all(to.path().join("appendonlydir")).unwrap();
    for e in fs::read_dir(from.join("appendonlydir")).unwrap() {
        let e = e.unwrap();
        fs::copy(
            e.path(),
            to.path().join("appendonlydir").join(e.file_name()),
        )
        .unwrap();
    }
    to
}

e2e!(
    ringkv_only fn random_writes_replay_to_the_same_dataset_here_and_in_valkey(b) {
        for seed in [1u64, 2, 3] {
            let tmp = TempDir::new("aof-diff");
            let want = random_history(b, tmp.path(), seed);
            assert!(want.len() > 5, "{want:?}");
            // ringkv replays its own file.
            let copy = copy_dir(tmp.path());
            let srv = b.start(aof_opts(copy.path()));
            assert_eq!(plain_view(&mut srv.client()), want, "seed {seed}: ringkv replay");
            drop(srv);
            // Valkey 8.1 replays ringkv's file.
            let copy = copy_dir(tmp.path());
            let srv = Backend::Valkey.start(aof_opts(copy.path()));
            assert_eq!(plain_view(&mut srv.client()), want, "seed {seed}: Valkey replay");
        }
    }
);

e2e!(
    ringkv_only fn valkey_aof_directories_load_in_ringkv(b) {
        for seed in [11u64, 12] {
            let tmp = TempDir::new("aof-valkey");
            let want = random_history(Backend::Valkey, tmp.path(), seed);
            // A rewrite on the Valkey side too: an RDB base with data in it.
            {
                let srv = Backend::Valkey.start(aof_opts(tmp.path()));
                let c = &mut srv.client();
                within(30, "Valkey to load", || q(c, "DBSIZE").is_ok());
                let _ = q(c, "BGREWRITEAOF");
                wait_rewrite_done(c);
                q(c, "SET after-rewrite 1").unwrap();
            }
            let mut want = want;
            want.insert("0:after-rewrite".into(), "string/persist/1".into());
            let srv = b.start(aof_opts(tmp.path()));
            assert_eq!(plain_view(&mut srv.client()), want, "seed {seed}");
        }
    }
);

e2e!(
    fn a_full_disk_refuses_writes_with_misconf_and_loses_nothing_acknowledged(b) {
        let Some(disk) = SmallDisk::mount(512) else {
            assert!(std::env::var("CI").is_err(), "cannot mount a tmpfs in CI");
            eprintln!("skipped: cannot mount a tmpfs here (not root?)");
            return;
        };
        let dir = disk.dir.path();
        let opts = aof_opts(dir);
        let mut srv = b.start(opts.clone());
        let c = &mut srv.client();
        // Leave about 100 KiB free (the server log is in this dir too).
        let filler = dir.join("filler");
        let free: usize = 100 * 1024;
        let used: u64 = fs::read_dir(dir).unwrap().map(|e| e.unwrap().metadata().map_or(0, |m| m.len())).sum();
        fs::write(&filler, vec![0u8; (512 * 1024 - free).saturating_sub(used as usize)]).unwrap();
        let mut rng = Rng::new(9);
        let mut acked = 0;
        let mut refused = None;
        for i in 0..2000 {
            let v: String = (0..4000).map(|_| (b'!' + rng.below(90) as u8) as char).collect();
            match query(c, &["SET", &format!("big:{i}"), &v]) {
                Ok(_) => acked = i + 1,
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
            // A failed write left to the AOF thread's retry is reported a
            // moment later.
            if i > 30 {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        let e = refused.expect("writes refused once the disk is full");
        assert!(e.starts_with("MISCONF Errors writing to the AOF file:"), "{e}");
        let info = text(&q(c, "INFO persistence"));
        assert_eq!(info_field(&info, "aof_last_write_status"), "err", "{info}");
        // Reads still work; PING is refused like a write, as in Valkey.
        assert_eq!(q(c, "EXISTS big:0"), int(1));
        let ping = q(c, "PING").expect_err("PING while the AOF cannot be written");
        assert!(ping.starts_with("MISCONF Errors writing to the AOF file:"), "{ping}");
        fs::remove_file(&filler).unwrap();
        within(10, "writes to be accepted again", || q(c, "SET after 1").is_ok());
        assert_eq!(info_field(&text(&q(c, "INFO persistence")), "aof_last_write_status"), "ok");
        crash(&mut srv);
        let srv = b.start(opts);
        let c = &mut srv.client();
        for i in 0..acked {
            assert_eq!(q(c, &format!("EXISTS big:{i}")), int(1), "big:{i} lost of {acked}");
        }
        assert_eq!(text(&q(c, "GET after")), "1");
    }
);

/// A 512 KiB tmpfs for a server's directory, and a directory elsewhere
/// for its log (which must not fail with the disk), or `None` where no
/// tmpfs can be mounted. (The AOF directory must be on the server
/// directory's file system: Valkey and ringkv both rename a rewrite's
/// temp file from one into the other.)
fn aof_on_small_disk() -> Option<(SmallDisk, TempDir)> {
    let Some(disk) = SmallDisk::mount(512) else {
        assert!(std::env::var("CI").is_err(), "cannot mount a tmpfs in CI");
        eprintln!("skipped: cannot mount a tmpfs here (not root?)");
        return None;
    };
    Some((disk, TempDir::new("aof-small-disk-log")))
}

/// Leave about 100 KiB of `disk` free.
fn fill_but_100k(disk: &SmallDisk) -> std::path::PathBuf {
    let dir = disk.dir.path();
    let used: u64 = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().map_or(0, |m| m.len()))
        .sum();
    let filler = dir.join("filler");
    fs::write(
        &filler,
        vec![0u8; (512 * 1024 - 100 * 1024usize).saturating_sub(used as usize)],
    )
    .unwrap();
    filler
}

/// A replica of `replica`'s kind, in `dir` with an AOF and its log in
/// `log`, follows a primary of `b`'s kind.
fn replica_with_aof_on(
    dir: &Path,
    log: &Path,
    b: Backend,
    replica: Backend,
    extra: &[(&str, &str)],
) -> (ringkv_e2e::Server, ringkv_e2e::Server) {
    let p = b.start(Opts::new().arg("save", ""));
    let opts = extra.iter().fold(aof_opts(dir), |o, (k, v)| o.arg(k, v));
    let r = replica.start(opts.arg("logfile", log.to_str().unwrap()));
    let (pc, rc) = (&mut p.client(), &mut r.client());
    follow(rc, &p);
    wait_caught_up(pc, rc);
    // The AOF rewritten after the full sync.
    wait_rewrite_done(rc);
    (p, r)
}

e2e!(
    ringkv_only fn a_replica_promoted_while_its_disk_is_full_loses_nothing(b) {
        let Some((disk, logs)) = aof_on_small_disk() else { return };
        let log = logs.path().join("replica.log");
        let ignore = [("replica-ignore-disk-write-errors", "yes")];
        let (p, mut r) = replica_with_aof_on(disk.dir.path(), &log, b, b, &ignore);
        let (pc, rc) = (&mut p.client(), &mut r.client());
        let filler = fill_but_100k(&disk);
        // The primary's writes go on; the replica applies them (told to
        // ignore its disk) and its AOF falls behind.
        let value = "v".repeat(4000);
        let mut i = 0;
        within(30, "the replica's AOF write to fail", || {
            assert_eq!(query(pc, &["SET", &format!("big:{i}"), &value]), ok());
            i += 1;
            stat_of(rc, "aof_last_write_status") == "err"
        });
        for _ in 0..20 {
            assert_eq!(query(pc, &["SET", &format!("big:{i}"), &value]), ok());
            i += 1;
        }
        wait_caught_up(pc, rc);
        assert_eq!(q(rc, "DBSIZE"), q(pc, "DBSIZE"), "the replica applied the whole stream");
        let said = fs::read_to_string(&log).unwrap();
        assert!(said.contains("Replica is applying a command even though it is unable to write to disk."));
        // Promoted with the disk still full: its AOF turns to its own
        // stream with the old one's tail unwritten, and writes to it are
        // refused until the tail is on disk.
        assert_eq!(q(rc, "REPLICAOF NO ONE"), ok());
        let e = q(rc, "SET after 1").expect_err("a write while the AOF cannot be written");
        assert!(e.starts_with("MISCONF Errors writing to the AOF file:"), "{e}");
        fs::remove_file(&filler).unwrap();
        within(10, "writes to be accepted again", || q(rc, "SET after 1").is_ok());
        assert_eq!(stat_of(rc, "aof_last_write_status"), "ok");
        let want = plain_view(rc);
        assert_eq!(want.len(), i + 1);
        crash(&mut r);
        let r = b.start(aof_opts(disk.dir.path()).arg("logfile", log.to_str().unwrap()));
        assert_eq!(plain_view(&mut r.client()), want, "restarted from its AOF");
    }
);

/// Whether a replica of `replica`'s kind whose AOF's disk fills under its
/// primary's writes stops, and says why.
fn replica_stops_on_a_full_disk(b: Backend, replica: Backend) -> (bool, bool) {
    let Some((disk, logs)) = aof_on_small_disk() else {
        return (true, true);
    };
    let log = logs.path().join("replica.log");
    let (p, mut r) = replica_with_aof_on(disk.dir.path(), &log, b, replica, &[]);
    let pc = &mut p.client();
    fill_but_100k(&disk);
    let value = "v".repeat(4000);
    let mut exited = false;
    for i in 0..200 {
        assert_eq!(query(pc, &["SET", &format!("big:{i}"), &value]), ok());
        if r.wait_exit(Duration::ZERO).is_some() {
            exited = true;
            break;
        }
    }
    exited = exited || r.wait_exit(Duration::from_secs(10)).is_some();
    let said = fs::read_to_string(&log).unwrap_or_default();
    (
        exited,
        said.contains("Replica was unable to write command to disk."),
    )
}

e2e!(
    ringkv_only fn a_replica_that_cannot_write_its_aof_stops_as_valkeys_does(b) {
        let want = replica_stops_on_a_full_disk(b, Backend::Valkey);
        assert_eq!(want, (true, true), "Valkey 8.1, the oracle");
        assert_eq!(replica_stops_on_a_full_disk(b, b), want, "ringkv");
    }
);

/// One field of INFO persistence.
fn stat_of(c: &mut redis::Connection, field: &str) -> String {
    info_field(&text(&q(c, "INFO persistence")), field)
}

/// WAITAOF on one connection, with no replica: its errors, then the
/// local count under each `appendfsync` (its replies, and how long the
/// `everysec` and `no` ones took).
fn waitaof_alone(srv: &ringkv_e2e::Server) -> (Vec<String>, Duration, Duration) {
    let c = &mut srv.client();
    let mut replies = Vec::new();
    let mut ask = |c: &mut redis::Connection, line: &str| {
        let args: Vec<&str> = line.split(' ').collect();
        replies.push(format!("{line} -> {:?}", query(c, &args)));
    };
    for line in [
        "WAITAOF 2 0 0",
        "WAITAOF x 0 0",
        "WAITAOF 1 -1 0",
        "WAITAOF 1 0 -1",
        "WAITAOF 1 0 x",
        "WAITAOF 1 0 0",
        "WAITAOF 0 0 0",
        "WAITAOF 0 1 100",
    ] {
        ask(c, line);
    }
    assert_eq!(q(c, "CONFIG SET appendonly yes"), ok());
    wait_rewrite_done(c);
    assert_eq!(q(c, "CONFIG SET appendfsync always"), ok());
    ask(c, "SET k 1");
    ask(c, "WAITAOF 1 0 0");
    assert_eq!(q(c, "CONFIG SET appendfsync everysec"), ok());
    ask(c, "SET k 2");
    let t = Instant::now();
    ask(c, "WAITAOF 1 0 5000");
    let everysec = t.elapsed();
    assert_eq!(q(c, "CONFIG SET appendfsync no"), ok());
    ask(c, "SET k 3");
    let t = Instant::now();
    ask(c, "WAITAOF 1 0 300");
    let no = t.elapsed();
    // Inside a transaction it cannot block: the counts of the moment.
    ask(c, "MULTI");
    ask(c, "SET k 4");
    ask(c, "WAITAOF 1 0 0");
    ask(c, "EXEC");
    (replies, everysec, no)
}

e2e!(
    /// WAITAOF's local count is the AOF's fsync: at once under `always`,
    /// within about a second under `everysec`, never under `no` (the
    /// timeout answers) — replies compared with Valkey 8.1's.
    ringkv_only fn waitaof_counts_the_local_fsync_as_valkey_does(b) {
        let (want, valkey_everysec, valkey_no) = waitaof_alone(&Backend::Valkey.start(Opts::new()));
        assert!(valkey_everysec < Duration::from_secs(3), "{valkey_everysec:?}");
        assert!(valkey_no >= Duration::from_millis(290), "{valkey_no:?}");
        let (got, everysec, no) = waitaof_alone(&b.start(Opts::new().arg("save", "")));
        assert_eq!(got, want);
        assert!(everysec < Duration::from_secs(3), "{everysec:?}");
        assert!(no >= Duration::from_millis(290), "{no:?}");
    }
);
