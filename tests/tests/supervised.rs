//! `supervised systemd` / `auto`: the sd_notify messages a service manager
//! gets on `$NOTIFY_SOCKET` (a datagram socket the test binds), in
//! order — loading, ready (a replica: read-only until its sync, then done),
//! stopping, the final save — and INFO's `process_supervised`. What a
//! systemd unit with `Type=notify` waits for, as Debian's valkey-server
//! and redis-server units have.

use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use ringkv_e2e::server::TempDir;
use ringkv_e2e::{Opts, e2e, info_field};

struct Notifications {
    sock: UnixDatagram,
    path: String,
    _dir: TempDir,
}

impl Notifications {
    fn new() -> Notifications {
        let dir = TempDir::new("notify");
        let path = dir.path().join("notify.sock");
        let sock = UnixDatagram::bind(&path).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(15)))
            .unwrap();
        Notifications {
            sock,
            path: path.display().to_string(),
            _dir: dir,
        }
    }

    fn next(&self) -> String {
        let mut buf = [0u8; 4096];
        let n = self
            .sock
            .recv(&mut buf)
            .expect("a notification within 15 s");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }
}

e2e!(
    fn systemd_hears_loading_ready_stopping_and_the_final_save(b) {
        let notes = Notifications::new();
        let srv = b.start(
            Opts::new()
                .arg("supervised", "systemd")
                .arg("save", "3600 1")
                .env("NOTIFY_SOCKET", &notes.path),
        );
        // The server names itself ("ringkv is loading...", "Redis is ...").
        let loading = notes.next();
        assert!(
            loading.starts_with("STATUS=") && loading.ends_with(" is loading...\n"),
            "{loading:?}"
        );
        assert_eq!(notes.next(), "STATUS=Ready to accept connections\n");
        assert_eq!(notes.next(), "READY=1\n");
        let mut raw = srv.raw();
        let info = raw.cmd(&["INFO", "server"]).text();
        assert_eq!(info_field(&info, "process_supervised"), "systemd");
        raw.send(b"SHUTDOWN\r\n");
        assert_eq!(notes.next(), "STOPPING=1\n");
        assert_eq!(notes.next(), "STATUS=Saving the final RDB snapshot\n");
    }
);

e2e!(
    fn a_replica_found_by_auto_reports_its_sync(b) {
        let primary = b.server();
        let notes = Notifications::new();
        // `auto` finds systemd by its socket; a supervised server stays in
        // the foreground even with `daemonize yes` (the harness would see
        // its process exit otherwise).
        let replica = b.start(
            Opts::new()
                .arg("supervised", "auto")
                .arg("daemonize", "yes")
                .arg("replicaof", &format!("127.0.0.1 {}", primary.port))
                .env("NOTIFY_SOCKET", &notes.path),
        );
        assert!(notes.next().ends_with(" is loading...\n"));
        assert_eq!(
            notes.next(),
            "STATUS=Ready to accept connections in read-only mode. Waiting for MASTER <-> REPLICA sync\n"
        );
        assert_eq!(notes.next(), "READY=1\n");
        // Valkey 8 says PRIMARY here, redis-server 7.0 MASTER.
        let synced = notes.next();
        assert!(
            synced.starts_with("STATUS=")
                && synced.ends_with(
                    " <-> REPLICA sync: Finished with success. Ready to accept connections in read-write mode.\n"
                ),
            "{synced:?}"
        );
        let info = replica.raw().cmd(&["INFO", "server"]).text();
        assert_eq!(info_field(&info, "process_supervised"), "systemd");
        if !b.is_redis() {
            assert!(synced.starts_with("STATUS=PRIMARY"), "{synced:?}");
        }
    }
);

e2e!(
    fn unsupervised_without_the_socket(b) {
        // `systemd` asked for but no NOTIFY_SOCKET: a warning, and the
        // server runs as usual.
        let srv = b.start(Opts::new().arg("supervised", "systemd"));
        let info = srv.raw().cmd(&["INFO", "server"]).text();
        assert_eq!(info_field(&info, "process_supervised"), "no");
        // Debian's redis-server 7.0 warns in the same words.
        assert!(
            srv.log().contains("systemd supervision error: NOTIFY_SOCKET not found!"),
            "log:\n{}",
            srv.log()
        );
    }
);
