//! Start-up configuration, CONFIG REWRITE across a restart, shutdown paths,
//! and protected mode seen from a non-loopback peer.

use std::fs;
use std::time::Duration;

use ringkv_e2e::netns::{NETNS, Netns};
use ringkv_e2e::server::TempDir;
use ringkv_e2e::v::{arr, bulk, ok};
use ringkv_e2e::{Opts, Reply, e2e, q};

e2e!(
    fn config_file_and_rewrite_survive_restart(b) {
        let tmp = TempDir::new("conf");
        let conf = tmp.path().join("ringkv.conf");
        fs::write(&conf, "# operator comment kept by rewrite\nmaxclients 100\ntimeout 7\n").unwrap();
        let opts = Opts::new().conf(&conf).dir(tmp.path());
        let mut srv = b.start(opts.clone());
        let c = &mut srv.client();
        assert_eq!(q(c, "CONFIG GET maxclients"), arr(vec![bulk("maxclients"), bulk("100")]));
        assert_eq!(q(c, "CONFIG GET timeout"), arr(vec![bulk("timeout"), bulk("7")]));
        assert_eq!(q(c, "CONFIG SET maxclients 77"), ok());
        assert_eq!(q(c, "CONFIG SET tcp-keepalive 42"), ok());
        assert_eq!(q(c, "CONFIG REWRITE"), ok());
        let text = fs::read_to_string(&conf).unwrap();
        assert!(text.contains("# operator comment kept by rewrite"), "comment lost:\n{text}");
        assert!(text.lines().any(|l| l == "maxclients 77"), "no `maxclients 77` line:\n{text}");
        assert!(text.lines().any(|l| l == "tcp-keepalive 42"), "{text}");
        assert!(text.lines().any(|l| l == "timeout 7"), "{text}");
        assert!(!text.lines().any(|l| l == "maxclients 100"), "old value kept:\n{text}");
        assert!(srv.stop().unwrap().success());
        let srv = b.start(opts);
        let c = &mut srv.client();
        assert_eq!(q(c, "CONFIG GET maxclients"), arr(vec![bulk("maxclients"), bulk("77")]));
        assert_eq!(q(c, "CONFIG GET tcp-keepalive"), arr(vec![bulk("tcp-keepalive"), bulk("42")]));
    }
);

e2e!(
    fn bad_config_stops_startup(b) {
        let tmp = TempDir::new("badconf");
        let conf = tmp.path().join("bad.conf");
        fs::write(&conf, "maxclients 100\nno-such-directive 1\n").unwrap();
        let (st, log) = b.start_expect_exit(Opts::new().conf(&conf));
        assert!(!st.success(), "exit status {st}");
        assert!(log.contains("no-such-directive"), "log does not name the directive:\n{log}");
        assert!(log.contains("line 2"), "log does not give the line:\n{log}");
        fs::write(&conf, "\nmaxclients lots\n").unwrap();
        let (st, log) = b.start_expect_exit(Opts::new().conf(&conf));
        assert!(!st.success());
        assert!(log.contains("maxclients") && log.contains("line 2"), "{log}");
        let (st, log) = b.start_expect_exit(Opts::new().arg("port", "99999"));
        assert!(!st.success());
        assert!(log.contains("port"), "{log}");
    }
);

e2e!(
    fn shutdown_nosave_exits_zero(b) {
        let mut srv = b.server();
        let mut raw = srv.raw();
        assert_eq!(raw.cmd(&["SET", "k", "v"]), Reply::status("OK"));
        raw.send(b"SHUTDOWN NOSAVE\r\n");
        raw.expect_closed();
        let st = srv.wait_exit(Duration::from_secs(10)).expect("server still running after SHUTDOWN");
        assert_eq!(st.code(), Some(0), "{st}");
        let log = srv.log();
        assert_eq!(log.matches("ready to exit, bye bye").count(), 1, "{log}");
    }
);

e2e!(
    fn sigterm_exits_zero_and_removes_pidfile(b) {
        let tmp = TempDir::new("pid");
        let pidfile = tmp.path().join("ringkv.pid");
        let mut srv = b.start(Opts::new().arg("pidfile", pidfile.to_str().unwrap()));
        let written = fs::read_to_string(&pidfile).expect("pidfile written at start-up");
        assert_eq!(written.trim(), srv.pid().unwrap().to_string());
        let mut raw = srv.raw();
        assert_eq!(raw.cmd(&["PING"]), Reply::status("PONG"));
        srv.sigterm();
        let st = srv.wait_exit(Duration::from_secs(10)).expect("server still running after SIGTERM");
        assert_eq!(st.code(), Some(0), "{st}");
        assert!(!pidfile.exists(), "pidfile left behind");
        raw.expect_closed();
    }
);

e2e!(
    fn sigint_exits_zero(b) {
        let mut srv = b.server();
        let mut raw = srv.raw();
        assert_eq!(raw.cmd(&["PING"]), Reply::status("PONG"));
        // SAFETY: kill(2) on the PID of our own still-running child.
        unsafe {
            libc::kill(srv.pid().unwrap() as i32, libc::SIGINT);
        }
        let st = srv.wait_exit(Duration::from_secs(10)).expect("server still running after SIGINT");
        assert_eq!(st.code(), Some(0), "{st}");
    }
);

e2e!(
    fn logfile_directive(b) {
        let tmp = TempDir::new("log");
        let logfile = tmp.path().join("server.log");
        let srv = b.start(Opts::new().arg("logfile", logfile.to_str().unwrap()));
        let mut raw = srv.raw();
        assert_eq!(raw.cmd(&["PING"]), Reply::status("PONG"));
        let text = fs::read_to_string(&logfile).expect("logfile created");
        assert!(text.contains("Ready to accept connections"), "logfile:\n{text}");
    }
);

e2e!(
    fn idle_timeout_closes_clients(b) {
        let srv = b.start(Opts::new().arg("timeout", "1"));
        let mut idle = srv.raw();
        assert_eq!(idle.cmd(&["PING"]), Reply::status("PONG"));
        if let Err(e) = idle.closed_within(Duration::from_secs(5)) {
            panic!("idle client not closed after `timeout 1`: {e}");
        }
        let mut fresh = srv.raw();
        assert_eq!(fresh.cmd(&["PING"]), Reply::status("PONG"));
    }
);

e2e!(
    ringkv_only fn io_uring_auto_starts_and_reports_backend(b) {
        let srv = b.start(Opts::new().arg("io-uring", "auto").no_backend_args());
        let out = srv.cli(&["INFO", "server"]).1;
        assert!(
            out.lines().any(|l| l.contains("io_uring") || l.contains("epoll")),
            "INFO server names no event loop:\n{out}"
        );
        let c = &mut srv.client();
        assert_eq!(
            q(c, "CONFIG GET io-uring"),
            arr(vec![bulk("io-uring"), bulk("auto")])
        );
    }
);

e2e!(
    fn protected_mode_denies_non_loopback(b) {
        if !Netns::available() {
            eprintln!("skipped: protected-mode test needs root and iproute2 for a network namespace");
            return;
        }
        let _guard = NETNS.lock().unwrap_or_else(|e| e.into_inner());
        let ns = match Netns::create("rkve2e", "10.77.0") {
            Ok(ns) => ns,
            Err(e) => {
                eprintln!("skipped: cannot create a network namespace: {e}");
                return;
            }
        };
        let srv = b.start(Opts::new().bind(&["127.0.0.1", "10.77.0.1"]));
        let out = ns.cli("10.77.0.1", srv.port, &["PING"]);
        assert!(out.contains("DENIED") && out.contains("protected mode"), "remote PING got: {out}");
        // Loopback is never refused.
        assert_eq!(srv.cli(&["PING"]).1, "PONG\n");
        // With a password set, remote clients may authenticate.
        let c = &mut srv.client();
        assert_eq!(q(c, "CONFIG SET requirepass pw"), ok());
        let out = ns.cli("10.77.0.1", srv.port, &["PING"]);
        assert!(out.contains("NOAUTH"), "remote PING with a password set got: {out}");
        let out = ns.cli("10.77.0.1", srv.port, &["-a", "pw", "--no-auth-warning", "PING"]);
        assert_eq!(out, "PONG\n");
        drop(srv);
        drop(ns);
    }
);

/// AnonHugePages of a process, in kB.
fn anon_huge_kb(pid: u32) -> u64 {
    let rollup = fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap();
    rollup
        .lines()
        .find_map(|l| l.strip_prefix("AnonHugePages:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("AnonHugePages in smaps_rollup")
}

e2e!(
    /// `disable-thp yes` (the default, as in Valkey) keeps the whole
    /// process off transparent huge pages although jemalloc asks for them;
    /// `no` lets the heap have them, unless the kernel's THP mode is `never`.
    ringkv_only fn disable_thp_decides_whether_the_heap_gets_huge_pages(b) {
        let mode = fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        let kernel_allows = !mode.is_empty() && !mode.contains("[never]");
        let value = vec![b'x'; 4 << 20];
        for (setting, allowed) in [("yes", false), ("no", true)] {
            let srv = b.start(Opts::new().arg("disable-thp", setting));
            let pid = srv.pid().unwrap();
            let c = &mut srv.client();
            for i in 0..16 {
                let () = redis::cmd("SET").arg(format!("big{i}")).arg(&value).query(c).unwrap();
            }
            let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
            if let Some(line) = status.lines().find(|l| l.starts_with("THP_enabled:")) {
                let want = if allowed { "1" } else { "0" };
                assert_eq!(line.split_whitespace().nth(1), Some(want), "disable-thp {setting}: {line}");
            }
            let huge = anon_huge_kb(pid);
            if !allowed {
                assert_eq!(huge, 0, "disable-thp yes, yet {huge} kB of huge pages");
            } else if kernel_allows {
                assert!(huge > 0, "disable-thp no with THP mode {mode:?}: 64 MB stored, no huge page");
            }
            assert_eq!(q(c, "CONFIG GET disable-thp"), arr(vec![bulk("disable-thp"), bulk(setting)]));
            let log = srv.log();
            assert!(!log.contains("'disable-thp' is not supported"), "{log}");
            assert_eq!(log.contains("the heap asks for them"), allowed, "{log}");
            // Fixed at start-up, as in Valkey: refused live, data kept.
            let err = redis::cmd("CONFIG").arg(&["SET", "disable-thp", "no"]).query::<()>(c).unwrap_err();
            assert!(err.to_string().contains("can't set immutable config"), "{err}");
            let len: usize = redis::cmd("STRLEN").arg("big15").query(c).unwrap();
            assert_eq!(len, value.len());
        }
        let (st, log) = b.start_expect_exit(Opts::new().arg("disable-thp", "maybe"));
        assert!(!st.success());
        assert!(log.contains("disable-thp") && log.contains("argument must be 'yes' or 'no'"), "{log}");
    }
);

/// The shape of every line a server on `b` logs with `log-format logfmt`
/// and `log-timestamp-format iso8601`, after it became a replica (of a
/// port where nothing listens) and then switched to unix-millisecond
/// legacy lines: (logfmt lines, roles seen, whether the last line is a
/// legacy one with a millisecond time).
fn log_shapes(b: ringkv_e2e::Backend) -> (bool, Vec<String>, bool) {
    let srv = b.start(
        Opts::new()
            .arg("log-format", "logfmt")
            .arg("log-timestamp-format", "iso8601"),
    );
    let c = &mut srv.client();
    let nowhere = ringkv_e2e::server::free_port();
    assert_eq!(q(c, &format!("REPLICAOF 127.0.0.1 {nowhere}")), ok());
    assert_eq!(q(c, "REPLICAOF NO ONE"), ok());
    assert_eq!(
        q(
            c,
            "CONFIG SET log-format legacy log-timestamp-format milliseconds"
        ),
        ok()
    );
    assert_eq!(q(c, "CONFIG SET loglevel verbose"), ok());
    assert_eq!(q(c, "CONFIG SET loglevel notice"), ok());
    assert_eq!(q(c, "REPLICAOF 127.0.0.1 1"), ok());
    let log = srv.log();
    let (logfmt, legacy): (Vec<&str>, Vec<&str>) = log
        .lines()
        .filter(|l| !l.is_empty())
        .partition(|l| l.starts_with("pid="));
    let well_formed = |l: &&str| {
        let Some((_, rest)) = l.split_once(" role=") else {
            return false;
        };
        let (role, rest) = rest.split_once(' ').unwrap_or_default();
        let Some(ts) = rest
            .strip_prefix("timestamp=\"")
            .and_then(|r| r.split('"').next())
        else {
            return false;
        };
        let iso = ts.len() == 29 && &ts[10..11] == "T" && ts.ends_with("+00:00");
        iso && ["primary", "replica"].contains(&role)
            && l.ends_with('"')
            && l.contains(" message=\"")
    };
    let mut roles: Vec<String> = logfmt
        .iter()
        .filter_map(|l| Some(l.split_once(" role=")?.1.split(' ').next()?.to_string()))
        .collect();
    roles.dedup();
    roles.sort();
    roles.dedup();
    let last = legacy.last().copied().unwrap_or_default();
    let millis = last
        .split(' ')
        .nth(1)
        .is_some_and(|t| t.len() == 13 && t.bytes().all(|b| b.is_ascii_digit()));
    (
        !logfmt.is_empty() && logfmt.iter().all(well_formed),
        roles,
        last.contains(":S ") && millis,
    )
}

e2e!(
    ringkv_only fn log_format_and_timestamp_format_as_valkey_writes_them(b) {
        let want = log_shapes(ringkv_e2e::Backend::Valkey);
        assert_eq!(
            want,
            (true, vec!["primary".to_string(), "replica".to_string()], true),
            "Valkey 8.1, the oracle"
        );
        assert_eq!(log_shapes(b), want, "ringkv");
    }
);

/// One test at a time owns /dev/log (both backends' variants run in
/// parallel threads of this binary).
static DEV_LOG: std::sync::Mutex<()> = std::sync::Mutex::new(());

e2e!(
    fn syslog_enabled_sends_the_log_to_the_system_logger(b) {
        use std::os::unix::net::UnixDatagram;
        let _one = DEV_LOG.lock().unwrap_or_else(|e| e.into_inner());
        let path = std::path::Path::new("/dev/log");
        if path.exists() {
            // A real system logger has it: its messages are not ours to read.
            eprintln!("/dev/log exists here; not tested");
            return;
        }
        let sock = UnixDatagram::bind(path).unwrap();
        // Removed however the test ends.
        struct Remove(&'static std::path::Path);
        impl Drop for Remove {
            fn drop(&mut self) {
                let _ = fs::remove_file(self.0);
            }
        }
        let _remove = Remove(path);
        sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let srv = b.start(
            Opts::new()
                .arg("syslog-enabled", "yes")
                .arg("syslog-ident", "kvtest")
                .arg("syslog-facility", "local3"),
        );
        // local3 (19 << 3) at notice (5): "<157>", then the ident and pid.
        let pid = srv.pid().unwrap();
        // (redis-server 7.0 says it without Valkey's " tcp".)
        let want = format!("kvtest[{pid}]: Ready to accept connections");
        let mut seen = Vec::new();
        let mut buf = [0u8; 2048];
        let found = loop {
            let Ok(n) = sock.recv(&mut buf) else { break false };
            let line = String::from_utf8_lossy(&buf[..n]).into_owned();
            let hit = line.starts_with("<157>") && line.contains(&want);
            seen.push(line);
            if hit {
                break true;
            }
        };
        assert!(found, "{seen:#?}");
    }
);

e2e!(
    ringkv_only fn the_start_up_log_says_where_the_server_runs_or_shows_the_logo(b) {
        // A log that is no terminal gets Valkey's one line.
        for backend in [b, ringkv_e2e::Backend::Valkey] {
            let srv = backend.server();
            let line = format!("Running mode=standalone, port={}.", srv.port);
            assert!(srv.log().contains(&line), "{backend:?}:\n{}", srv.log());
        }
        // `always-show-logo yes`: the logo instead, with the port and pid.
        for backend in [b, ringkv_e2e::Backend::Valkey] {
            let srv = backend.start(ringkv_e2e::Opts::new().arg("always-show-logo", "yes"));
            let log = srv.log();
            assert!(!log.contains("Running mode="), "{backend:?}:\n{log}");
            assert!(log.contains("Running in standalone mode"), "{backend:?}:\n{log}");
            let shown = |what: &str| {
                log.lines()
                    .find_map(|l| Some(l[l.find(what)? + what.len()..].trim().to_string()))
                    .unwrap_or_default()
            };
            assert_eq!(shown("Port: "), srv.port.to_string(), "{backend:?}:\n{log}");
            assert_eq!(shown("PID: "), srv.pid().unwrap().to_string(), "{backend:?}:\n{log}");
        }
    }
);
