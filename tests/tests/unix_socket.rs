//! The `unixsocket` listener: clients on the socket file beside TCP, what
//! the server shows of them, and the file's life (permissions, a stale file
//! replaced at start, removed at shutdown, a path that cannot be bound).

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::PathBuf;
use std::time::Duration;

use ringkv_e2e::server::TempDir;
use ringkv_e2e::{Opts, e2e, info_field, within};

fn unix_client(path: &std::path::Path) -> redis::Connection {
    let url = format!("unix://{}", path.display());
    let c = redis::Client::open(url).expect("client");
    c.get_connection_with_timeout(Duration::from_secs(10))
        .expect("connect on the unix socket")
}

fn cmd(c: &mut redis::Connection, args: &[&str]) -> String {
    let v: redis::Value = redis::cmd(args[0])
        .arg(&args[1..])
        .query(c)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
        redis::Value::SimpleString(s) | redis::Value::VerbatimString { text: s, .. } => s,
        redis::Value::Okay => "OK".into(),
        redis::Value::Int(i) => i.to_string(),
        other => format!("{other:?}"),
    }
}

e2e!(
    fn clients_on_the_unix_socket(b) {
        let dir = TempDir::new("unix-socket");
        let path: PathBuf = dir.path().join("server.sock");
        // A file left at the path (a server killed before it could remove
        // its socket) is replaced.
        std::fs::write(&path, b"stale").unwrap();
        let shown = path.display().to_string();
        let srv = b.start(
            Opts::new()
                .arg("unixsocket", &shown)
                .arg("unixsocketperm", "700"),
        );
        let meta = std::fs::metadata(&path).unwrap();
        assert!(meta.file_type().is_socket(), "{shown} is not a socket");
        assert_eq!(meta.permissions().mode() & 0o777, 0o700);

        let mut u = unix_client(&path);
        assert_eq!(cmd(&mut u, &["SET", "k", "over unix"]), "OK");
        let mut tcp = srv.raw();
        assert_eq!(tcp.cmd(&["GET", "k"]).text(), "over unix");
        assert_eq!(cmd(&mut u, &["CLIENT", "SETNAME", "ux"]), "OK");
        let me = cmd(&mut u, &["CLIENT", "INFO"]);
        assert!(me.contains(&format!(" addr={shown}:0 laddr={shown}:0 ")), "{me}");
        assert!(me.contains(" flags=U "), "{me}");
        let list = tcp.cmd(&["CLIENT", "LIST"]).text();
        let line = list
            .lines()
            .find(|l| l.contains(" name=ux "))
            .unwrap_or_else(|| panic!("no unix client in:\n{list}"));
        assert!(line.contains(&format!(" addr={shown}:0 ")), "{line}");
        // The TCP client's own line has neither.
        let own = tcp.cmd(&["CLIENT", "INFO"]).text();
        assert!(own.contains(" flags=N ") && own.contains(" addr=127.0.0.1:"), "{own}");

        // MONITOR names a unix client by the socket's path.
        let mut mon = srv.raw();
        mon.send(b"MONITOR\r\n");
        assert_eq!(mon.read_line(), "+OK");
        cmd(&mut u, &["SET", "seen", "1"]);
        let seen = mon.read_line();
        assert!(seen.ends_with(&format!("[0 unix:{shown}] \"SET\" \"seen\" \"1\"")), "{seen}");
        drop(mon);

        // A real client, and a replication-style transfer on the socket.
        let (st, out) = srv.cli(&["-s", &shown, "PING"]);
        assert!(st.success() && out == "PONG\n", "{out}");
        let rdb = dir.path().join("copy.rdb");
        let (st, out) = srv.cli(&["-s", &shown, "--rdb", &rdb.display().to_string()]);
        assert!(st.success(), "redis-cli --rdb on the unix socket: {out}");
        assert!(std::fs::read(&rdb).unwrap().starts_with(b"REDIS"));

        if !b.is_redis() {
            // Valkey 8's listener lines (redis-server 7.0 has none).
            let info = tcp.cmd(&["INFO", "server"]).text();
            assert_eq!(info_field(&info, "listener1"), format!("name=unix,bind={shown}"));
        }

        // CLIENT KILL ADDR with the path takes the unix clients (once the
        // redis-cli ones are gone, only `u`).
        let unix_clients = |tcp: &mut ringkv_e2e::Raw| {
            let list = tcp.cmd(&["CLIENT", "LIST"]).text();
            let addr = format!(" addr={shown}:0 ");
            list.lines().filter(|l| l.contains(&addr)).count()
        };
        within(10, "redis-cli's connections to go", || unix_clients(&mut tcp) == 1);
        let killed = tcp.cmd(&["CLIENT", "KILL", "ADDR", &format!("{shown}:0")]);
        assert_eq!(killed, ringkv_e2e::Reply::Int(1));
        within(10, "the killed unix client to go", || unix_clients(&mut tcp) == 0);
        assert!(redis::cmd("PING").query::<String>(&mut u).is_err());

        drop(srv);
        assert!(!path.exists(), "the socket file outlived the server");
    }
);

e2e!(
    fn a_unix_socket_that_cannot_be_bound_stops_the_start(b) {
        let dir = TempDir::new("unix-socket-missing");
        let path = dir.path().join("no-such-dir").join("server.sock");
        let (status, log) = b.start_expect_exit(
            Opts::new().arg("unixsocket", &path.display().to_string()),
        );
        assert!(!status.success());
        assert!(
            log.contains("Failed opening Unix socket: bind: No such file or directory"),
            "log:\n{log}"
        );
        // `unixsocketgroup` is Valkey's (redis-server 7.0 has none).
        if !b.is_redis() {
            let (status, log) = b.start_expect_exit(
                Opts::new()
                    .arg("unixsocket", &dir.path().join("g.sock").display().to_string())
                    .arg("unixsocketgroup", "no-such-group-here"),
            );
            assert!(!status.success());
            assert!(
                log.contains("Failed opening Unix socket: getgrnam error for group 'no-such-group-here'"),
                "log:\n{log}"
            );
        }
        let long = format!("/tmp/{}", "x".repeat(120));
        let (status, log) = b.start_expect_exit(Opts::new().arg("unixsocket", &long));
        assert!(!status.success());
        assert!(
            log.contains("Failed opening Unix socket: unix socket path too long (125), must be under 108"),
            "log:\n{log}"
        );
    }
);
