//! Driving the server with redis-cli, as an operator would.

use ringkv_e2e::raw::encode_str;
use ringkv_e2e::{Backend, Reply, e2e};

e2e!(
    fn cli_set_get_incr(b) {
        let srv = b.server();
        let (st, out) = srv.cli(&["SET", "foo", "bar baz"]);
        assert!(st.success());
        assert_eq!(out, "OK\n");
        assert_eq!(srv.cli(&["GET", "foo"]).1, "bar baz\n");
        assert_eq!(srv.cli(&["GET", "missing"]).1, "\n");
        assert_eq!(srv.cli(&["INCR", "n"]).1, "1\n");
        assert_eq!(srv.cli(&["MGET", "foo", "n", "missing"]).1, "bar baz\n1\n\n");
        let out = srv.cli(&["SET", "foo"]).1;
        assert_eq!(out.trim_end(), "ERR wrong number of arguments for 'set' command");
        assert_eq!(srv.cli(&["DBSIZE"]).1, "2\n");
        // -n selects a database.
        assert_eq!(srv.cli(&["-n", "3", "SET", "in3", "x"]).1, "OK\n");
        assert_eq!(srv.cli(&["-n", "3", "DBSIZE"]).1, "1\n");
        assert_eq!(srv.cli(&["--no-raw", "GET", "foo"]).1, "\"bar baz\"\n");
    }
);

e2e!(
    fn cli_pipe_mode(b) {
        let srv = b.server();
        let mut input = Vec::new();
        for i in 0..1000 {
            input.extend(encode_str(&["SET", &format!("p{i}"), &i.to_string()]));
        }
        for _ in 0..500 {
            input.extend_from_slice(b"INCR counter\r\n");
        }
        input.extend_from_slice(b"SET quoted \"a b\"\r\n");
        let (st, out) = srv.cli_stdin(&["--pipe"], Some(&input));
        assert!(st.success(), "redis-cli --pipe failed: {out}");
        assert!(out.contains("errors: 0, replies: 1501"), "{out}");
        let mut raw = srv.raw();
        assert_eq!(raw.cmd(&["GET", "p999"]), Reply::bulk("999"));
        assert_eq!(raw.cmd(&["GET", "counter"]), Reply::bulk("500"));
        assert_eq!(raw.cmd(&["GET", "quoted"]), Reply::bulk("a b"));
        assert_eq!(raw.cmd(&["DBSIZE"]), Reply::Int(1002));
        // Errors are counted, not fatal.
        let (_, out) = srv.cli_stdin(&["--pipe"], Some(b"INCR quoted\r\nPING\r\n"));
        assert!(out.contains("errors: 1, replies: 2"), "{out}");
    }
);

e2e!(
    fn cli_info(b) {
        let srv = b.server();
        let (st, out) = srv.cli(&["INFO"]);
        assert!(st.success());
        for section in ["# Server", "# Clients", "# Memory", "# Stats", "# CPU", "# Keyspace"] {
            assert!(out.contains(section), "INFO lacks {section}:\n{out}");
        }
        for field in ["tcp_port:", "process_id:", "connected_clients:", "used_memory:", "total_commands_processed:", "uptime_in_seconds:"] {
            assert!(out.contains(field), "INFO lacks {field}");
        }
        assert!(out.contains(&format!("tcp_port:{}", srv.port)));
        srv.cli(&["SET", "a", "1"]);
        let ks = srv.cli(&["INFO", "keyspace"]).1;
        assert!(ks.contains("db0:keys=1,expires=0"), "{ks}");
        let server = srv.cli(&["INFO", "server"]).1;
        assert!(!server.contains("# Clients"), "INFO server printed other sections");
    }
);

e2e!(
    ringkv_only fn cli_info_shows_event_loop(b) {
        let srv = b.server();
        let out = srv.cli(&["INFO", "server"]).1;
        let (want, other) = match b {
            Backend::IoUring => ("io_uring", "epoll"),
            _ => ("epoll", "io_uring"),
        };
        let lines: Vec<&str> = out.lines().filter(|l| l.contains(want)).collect();
        assert!(!lines.is_empty(), "INFO server has no line naming {want}:\n{out}");
        assert!(
            !out.lines().any(|l| l.contains(other) && !l.contains(want)),
            "INFO server names {other} while running {want}:\n{out}"
        );
    }
);
