//! CONFIG SET `port` and `bind` at runtime, as Valkey applies them: the
//! server listens on the new addresses at once, stops listening on the old
//! ones, keeps every connection it has, and answers Valkey's error (still
//! listening where it was) when the new address cannot be had.

use std::net::TcpStream;

use ringkv_e2e::server::free_port;
use ringkv_e2e::{Raw, Reply, e2e, info_field, within};

fn ok() -> Reply {
    Reply::status("OK")
}

fn pong(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_ok()
        && Raw::connect(port).cmd(&["PING"]) == Reply::status("PONG")
}

fn refused(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port)).is_err()
}

e2e!(
    fn config_set_port_moves_the_listener_and_keeps_the_connections(b) {
        let srv = b.server();
        let old = srv.port;
        let mut c = srv.raw();
        let new = free_port();
        assert_eq!(c.cmd(&["CONFIG", "SET", "port", &new.to_string()]), ok());
        assert!(pong(new), "no answer on the new port {new}");
        // The accepting IO thread lets the old socket go within its wait.
        within(5, "the old port to close", || refused(old));
        assert_eq!(c.cmd(&["PING"]), Reply::status("PONG"));
        let info = c.cmd(&["INFO", "server"]).text();
        assert_eq!(info_field(&info, "tcp_port"), new.to_string());
        assert_eq!(
            c.cmd(&["CONFIG", "GET", "port"]),
            Reply::Array(vec![Reply::bulk("port"), Reply::bulk(&new.to_string())])
        );

        // A port another socket holds: Valkey's error, and the server
        // still listens where it did.
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let taken_port = taken.local_addr().unwrap().port();
        let r = c.cmd(&["CONFIG", "SET", "port", &taken_port.to_string()]);
        assert_eq!(
            r,
            Reply::err(
                "ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs."
            )
        );
        assert!(pong(new));
        let got = c.cmd(&["CONFIG", "GET", "port"]);
        assert_eq!(got, Reply::Array(vec![Reply::bulk("port"), Reply::bulk(&new.to_string())]));
        // With other settings in the same command: all of them roll back
        // (Valkey's "CONFIG SET rollback on apply error").
        let maxmemory = c.cmd(&["CONFIG", "GET", "maxmemory"]);
        let r = c.cmd(&[
            "CONFIG",
            "SET",
            "maxmemory",
            "10000001",
            "port",
            &taken_port.to_string(),
            "client-query-buffer-limit",
            "10m",
        ]);
        assert!(r.text().contains("argument 'port') - Unable to listen on this port"), "{r:?}");
        assert_eq!(c.cmd(&["CONFIG", "GET", "maxmemory"]), maxmemory);
        assert!(pong(new));
        drop(taken);

        // And back: a second move works the same way.
        assert_eq!(c.cmd(&["CONFIG", "SET", "port", &old.to_string()]), ok());
        assert!(pong(old));
        within(5, "the second port to close", || refused(new));
    }
);

e2e!(
    fn config_set_bind_keeps_an_address_it_already_listens_on(b) {
        let srv = b.server();
        let port = srv.port;
        let mut c = srv.raw();
        // 127.0.0.1 stays (its socket is kept, not bound twice); the IPv6
        // loopback is added where the host has it (optional).
        assert_eq!(c.cmd(&["CONFIG", "SET", "bind", "127.0.0.1 -::1"]), ok());
        assert!(pong(port));
        let bind = c.cmd(&["CONFIG", "GET", "bind"]);
        assert_eq!(bind, Reply::Array(vec![Reply::bulk("bind"), Reply::bulk("127.0.0.1 -::1")]));
        // An address this host does not have, not optional: Valkey's error,
        // nothing changed.
        let r = c.cmd(&["CONFIG", "SET", "bind", "127.0.0.1 192.0.2.1"]);
        assert_eq!(
            r,
            Reply::err(
                "ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses."
            )
        );
        assert!(pong(port));
        assert_eq!(c.cmd(&["CONFIG", "GET", "bind"]), bind);
        // Port and bind at once: the new pair listens.
        let new = free_port();
        let set = ["CONFIG", "SET", "bind", "127.0.0.1", "port", &new.to_string()];
        assert_eq!(c.cmd(&set), ok());
        assert!(pong(new));
        within(5, "the old port to close", || refused(port));
        assert_eq!(c.cmd(&["PING"]), Reply::status("PONG"));
    }
);

/// The `fwmark` `ss` reports for the TCP listener on `port` (None: no
/// mark), read as the kernel has it.
fn listener_mark(port: u16) -> Option<String> {
    let out = std::process::Command::new("ss")
        .args(["-ltne", &format!("sport = :{port}")])
        .output()
        .expect("ss");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains(&format!(":{port}")),
        "no listener on {port}: {text}"
    );
    text.split_whitespace()
        .find_map(|w| w.strip_prefix("fwmark:"))
        .map(str::to_string)
}

e2e!(
    fn socket_mark_id_marks_the_listeners_as_valkey_does(b) {
        let srv = b.start(ringkv_e2e::Opts::new().arg("socket-mark-id", "5"));
        assert_eq!(listener_mark(srv.port).as_deref(), Some("0x5"));
        // A listener CONFIG SET opens is marked too.
        let new = free_port();
        let mut c = srv.raw();
        assert_eq!(c.cmd(&["CONFIG", "SET", "port", &new.to_string()]), ok());
        within(5, "the new listener", || refused(srv.port));
        assert_eq!(listener_mark(new).as_deref(), Some("0x5"));
        assert!(c.cmd(&["CONFIG", "SET", "socket-mark-id", "6"]).text().contains("immutable"));
        let plain = b.server();
        assert_eq!(listener_mark(plain.port), None);
        let valkey = ringkv_e2e::Backend::Valkey.start(ringkv_e2e::Opts::new().arg("socket-mark-id", "5"));
        assert_eq!(listener_mark(valkey.port).as_deref(), Some("0x5"));
    }
);

e2e!(
    fn a_server_left_without_listeners_listens_again_on_a_new_port(b) {
        let srv = b.server();
        let mut c = srv.raw();
        assert_eq!(c.cmd(&["CONFIG", "SET", "port", "0"]), ok());
        within(5, "no TCP listener", || refused(srv.port));
        // Still served: the connection stays.
        assert_eq!(c.cmd(&["PING"]), Reply::status("PONG"));
        let new = free_port();
        assert_eq!(c.cmd(&["CONFIG", "SET", "port", &new.to_string()]), ok());
        within(5, "the new port", || pong(new));
        assert_eq!(info_field(&c.cmd(&["INFO", "server"]).text(), "tcp_port"), new.to_string());
    }
);
