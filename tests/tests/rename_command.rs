//! `rename-command` in a config file: clients, MULTI, scripts and COMMAND
//! see the new names, a command renamed to `""` is gone, replies and ACL
//! rules keep the commands' own names — each compared with Valkey 8.1
//! started from the same file.

use ringkv_e2e::server::TempDir;
use ringkv_e2e::{Backend, Opts, Raw, Reply, e2e};

const RENAMES: &str = "\
rename-command config myconfig
rename-command flushall \"\"
rename-command GET set2
rename-command set get
rename-command ping a-name-longer-than-any-command-has-of-its-own-0123456789
";

/// The replies a client sees from a server started with [`RENAMES`],
/// with the port (which differs) taken out.
fn session(c: &mut Raw, port: u16) -> Vec<Reply> {
    let port = port.to_string();
    let mut out = Vec::new();
    let lines: &[&[&str]] = &[
        &["get", "k", "v"],
        &["set2", "k"],
        &["get", "k"],
        &["set", "k", "v"],
        &["A-NAME-LONGER-THAN-ANY-COMMAND-HAS-OF-ITS-OWN-0123456789"],
        &["ping"],
        &["config", "get", "port"],
        &["flushall"],
        &["FLUSHALL", "x"],
        &["myconfig", "get", "maxmemory"],
        &["MyConfig", "GET", "maxmemory"],
        &["COMMAND", "GETKEYS", "set2", "k"],
        &["COMMAND", "GETKEYS", "get", "k", "v"],
        &["COMMAND", "INFO", "config", "flushall", "set", "get"],
        &["ACL", "SETUSER", "u", "+config", "+get"],
        &["ACL", "SETUSER", "u", "+myconfig"],
        &["ACL", "SETUSER", "u", "+set2"],
        &["ACL", "GETUSER", "u"],
        &["EVAL", "return redis.call('set2', 'k')", "0"],
        &["EVAL", "return redis.call('get', 'k2', 'w')", "0"],
        &["EVAL", "return redis.pcall('config', 'get', 'port')", "0"],
        &["EVAL", "return redis.pcall('myconfig', 'get', 'port')", "0"],
        &["MULTI"],
        &["get", "k3", "v3"],
        &["set2", "k3"],
        &["config", "get", "maxmemory"],
        &["EXEC"],
        &["MULTI"],
        &["set2", "k3"],
        &["myconfig", "get", "maxmemory"],
        &["EXEC"],
    ];
    for line in lines {
        out.push(c.cmd(line));
    }
    // COMMAND INFO of a renamed command answers with its own name.
    let info = c.cmd(&["COMMAND", "INFO", "myconfig", "set2"]);
    let Reply::Array(items) = info else {
        panic!("{info:?}")
    };
    for item in items {
        let Reply::Array(fields) = item else {
            panic!("{item:?}")
        };
        out.push(fields[0].clone());
    }
    let docs = c.cmd(&["COMMAND", "DOCS", "myconfig"]);
    let Reply::Array(docs) = docs else {
        panic!("{docs:?}")
    };
    out.push(docs[0].clone());
    // COMMAND LIST: the commands' own names, less the removed one.
    let list = c.cmd(&["COMMAND", "LIST"]);
    let Reply::Array(list) = list else {
        panic!("{list:?}")
    };
    let listed = |name: &str| list.contains(&Reply::bulk(name));
    out.push(Reply::bulk(&format!(
        "config:{} flushall:{} get:{} set:{}",
        listed("config"),
        listed("flushall"),
        listed("get"),
        listed("set"),
    )));
    out.into_iter()
        .map(|r| match r {
            Reply::Bulk(b) if b == port.as_bytes() => Reply::bulk("<port>"),
            r => r,
        })
        .collect()
}

fn command_count(c: &mut Raw) -> i64 {
    match c.cmd(&["COMMAND", "COUNT"]) {
        Reply::Int(n) => n,
        r => panic!("{r:?}"),
    }
}

e2e!(
    ringkv_only fn renamed_commands_answer_as_valkeys_do(b) {
        let dir = TempDir::new("rename");
        let conf = dir.path().join("renames.conf");
        std::fs::write(&conf, RENAMES).unwrap();
        let srv = b.start(Opts::new().conf(&conf));
        let valkey = Backend::Valkey.start(Opts::new().conf(&conf));
        let mine = session(&mut srv.raw(), srv.port);
        let theirs = session(&mut valkey.raw(), valkey.port);
        for (i, (m, t)) in mine.iter().zip(&theirs).enumerate() {
            assert_eq!(m, t, "reply {i}");
        }
        assert_eq!(mine.len(), theirs.len());

        // One command fewer in COMMAND COUNT: the removed one.
        let plain = b.server();
        let valkey_plain = Backend::Valkey.server();
        assert_eq!(command_count(&mut plain.raw()) - command_count(&mut srv.raw()), 1);
        assert_eq!(
            command_count(&mut valkey_plain.raw()) - command_count(&mut valkey.raw()),
            1
        );
    }
);

e2e!(
    ringkv_only fn a_rename_valkey_refuses_stops_the_start(b) {
        let dir = TempDir::new("rename-bad");
        let conf = dir.path().join("bad.conf");
        for (text, why) in [
            ("rename-command nosuch x\n", "No such command in rename-command"),
            ("rename-command get set\n", "Target command name already exists"),
            (
                "rename-command flushall \"\"\nrename-command flushall x\n",
                "No such command in rename-command",
            ),
        ] {
            std::fs::write(&conf, text).unwrap();
            let (status, log) = b.start_expect_exit(Opts::new().conf(&conf));
            assert!(!status.success());
            assert!(log.contains(why), "{text}: {log}");
            let (status, log) = Backend::Valkey.start_expect_exit(Opts::new().conf(&conf));
            assert!(!status.success());
            assert!(log.contains(why), "Valkey, {text}: {log}");
        }
    }
);

e2e!(
    ringkv_only fn writes_by_a_renamed_command_survive_a_restart_from_the_aof(b) {
        let dir = TempDir::new("rename-aof");
        let conf = dir.path().join("renames.conf");
        std::fs::write(&conf, RENAMES).unwrap();
        let data = TempDir::new("rename-aof-data");
        let opts = || {
            Opts::new()
                .conf(&conf)
                .dir(data.path())
                .arg("appendonly", "yes")
                .arg("appendfsync", "always")
        };
        let srv = b.start(opts());
        let mut c = srv.raw();
        assert_eq!(c.cmd(&["get", "k", "v"]), Reply::status("OK"));
        assert_eq!(c.cmd(&["RPUSH", "l", "a", "b"]), Reply::Int(2));
        drop(srv);
        let srv = b.start(opts());
        let mut c = srv.raw();
        assert_eq!(c.cmd(&["set2", "k"]), Reply::bulk("v"));
        assert_eq!(c.cmd(&["LLEN", "l"]), Reply::Int(2));
    }
);
