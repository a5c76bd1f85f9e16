//! An error reply nobody reads — to the primary's link on a replica, or
//! to the AOF's loading client — is logged as CRITICAL and counted
//! (`unexpected_error_replies`); `propagation-error-behavior panic` stops
//! the server with a bug report instead. Each case beside Valkey 8.1 in
//! the same situation.

use std::time::Duration;

use ringkv_e2e::replication::{follow, stat, wait_caught_up};
use ringkv_e2e::server::TempDir;
use ringkv_e2e::{Backend, Opts, Server, e2e, q, within};

/// A replica's own config that renames SET away: the primary's SETs are
/// unknown commands to it.
fn renaming_conf(dir: &TempDir) -> std::path::PathBuf {
    let conf = dir.path().join("replica.conf");
    std::fs::write(&conf, "rename-command set myset\n").unwrap();
    conf
}

/// The log line a server wrote about its error to `to`.
fn critical_line(log: &str, to: &str) -> String {
    log.lines()
        .find_map(|l| {
            let i = l.find("== CRITICAL == ")?;
            l[i..]
                .contains(&format!("to its {to}:"))
                .then(|| l[i..].to_string())
        })
        .unwrap_or_else(|| panic!("no CRITICAL line about the {to}:\n{log}"))
}

fn replica_of(b: Backend, primary: &Server, conf: &std::path::Path, behavior: &str) -> Server {
    let replica = b.start(
        Opts::new()
            .conf(conf)
            .arg("propagation-error-behavior", behavior),
    );
    follow(&mut replica.client(), primary);
    replica
}

e2e!(
    ringkv_only fn a_replica_logs_and_counts_the_errors_its_primary_caused(b) {
        let dir = TempDir::new("prop-err");
        let conf = renaming_conf(&dir);
        let primary = b.server();
        let mut p = primary.client();
        let replica = replica_of(b, &primary, &conf, "ignore");
        let valkey = replica_of(Backend::Valkey, &primary, &conf, "ignore");
        let (mut r, mut v) = (replica.client(), valkey.client());
        // Synced first: a SET the full sync carried would be no error.
        wait_caught_up(&mut p, &mut r);
        wait_caught_up(&mut p, &mut v);
        assert_eq!(q(&mut p, "SET k v"), ringkv_e2e::v::ok());
        assert_eq!(q(&mut p, "RPUSH l a"), ringkv_e2e::v::int(1));
        wait_caught_up(&mut p, &mut r);
        wait_caught_up(&mut p, &mut v);
        // The write after the refused one still arrived.
        assert_eq!(q(&mut r, "LLEN l"), ringkv_e2e::v::int(1));
        assert_eq!(stat(&mut r, "stats", "unexpected_error_replies"), "1");
        assert_eq!(stat(&mut v, "stats", "unexpected_error_replies"), "1");
        assert_eq!(
            critical_line(&replica.log(), "primary"),
            critical_line(&valkey.log(), "primary")
        );
    }
);

/// The server's exit and its log once it is gone.
fn stopped(mut srv: Server) -> (std::process::ExitStatus, String) {
    let status = srv
        .wait_exit(Duration::from_secs(20))
        .expect("the server did not stop");
    (status, srv.log())
}

e2e!(
    ringkv_only fn propagation_error_behavior_panic_stops_the_replica(b) {
        use std::os::unix::process::ExitStatusExt;
        let dir = TempDir::new("prop-panic");
        let conf = renaming_conf(&dir);
        let primary = b.server();
        let mut p = primary.client();
        let replica = replica_of(b, &primary, &conf, "panic-on-replicas");
        let valkey = replica_of(Backend::Valkey, &primary, &conf, "panic");
        within(30, "both links up", || {
            [&replica, &valkey].iter().all(|s| {
                stat(&mut s.client(), "replication", "master_link_status") == "up"
            })
        });
        assert_eq!(q(&mut p, "SET k v"), ringkv_e2e::v::ok());
        for (srv, who) in [(replica, "ringkv"), (valkey, "Valkey")] {
            let (status, log) = stopped(srv);
            // ringkv aborts; Valkey's crash report sometimes ends in SIGSEGV.
            let signals = if who == "ringkv" { &[libc::SIGABRT][..] } else { &[libc::SIGABRT, libc::SIGSEGV] };
            assert!(status.signal().is_some_and(|s| signals.contains(&s)), "{who}: {status:?}\n{log}");
            assert!(
                log.contains(
                    "Guru Meditation: This replica panicked sending an error to its primary after processing the command '<unknown>'"
                ),
                "{who}:\n{log}"
            );
        }
    }
);

/// A Valkey 8 AOF of `commands` (one incremental file, no base) in `dir`.
fn write_aof(dir: &std::path::Path, commands: &[&[&str]]) {
    let aof = dir.join("appendonlydir");
    std::fs::create_dir_all(&aof).unwrap();
    std::fs::write(
        aof.join("appendonly.aof.manifest"),
        "file appendonly.aof.1.incr.aof seq 1 type i\n",
    )
    .unwrap();
    let mut bytes = Vec::new();
    for c in commands {
        bytes.extend(ringkv_e2e::raw::encode_str(c));
    }
    std::fs::write(aof.join("appendonly.aof.1.incr.aof"), bytes).unwrap();
}

e2e!(
    ringkv_only fn an_aof_command_that_fails_is_logged_and_loading_goes_on(b) {
        let commands: &[&[&str]] = &[&["SET", "k", "x"], &["INCR", "k"], &["SET", "after", "1"]];
        let mut lines = Vec::new();
        for backend in [b, Backend::Valkey] {
            let dir = TempDir::new("prop-aof");
            write_aof(dir.path(), commands);
            let srv = backend.start(Opts::new().dir(dir.path()).arg("appendonly", "yes"));
            let mut c = srv.client();
            assert_eq!(q(&mut c, "GET after"), ringkv_e2e::v::bulk("1"));
            assert_eq!(stat(&mut c, "stats", "unexpected_error_replies"), "1");
            lines.push(critical_line(&srv.log(), "AOF-loading-client"));
        }
        assert_eq!(lines[0], lines[1]);
        assert!(lines[0].ends_with("after processing the command 'incr'"), "{}", lines[0]);

        // Under `panic` the load stops the server instead.
        for backend in [b, Backend::Valkey] {
            let dir = TempDir::new("prop-aof-panic");
            write_aof(dir.path(), commands);
            let (status, log) = backend.start_expect_exit(
                Opts::new()
                    .dir(dir.path())
                    .arg("appendonly", "yes")
                    .arg("propagation-error-behavior", "panic"),
            );
            assert!(!status.success());
            assert!(
                log.contains("Guru Meditation: This server panicked sending an error to its AOF-loading-client after processing the command 'incr'"),
                "{backend:?}:\n{log}"
            );
        }
    }
);
