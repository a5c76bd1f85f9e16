//! CONFIG SET against Valkey 8.1: every directive both servers know gets
//! the same values, valid and not (words, empty, negative, huge, units,
//! template variables), and the reply and what CONFIG GET shows after must
//! be the same: Valkey's error text for a refusal, the value as Valkey
//! normalises it (`1gb` in bytes, `hz` clamped, `AKE` order) otherwise.
//!
//! Not probed: directives that would take the server down or away from
//! the test (bind, port, dir, files, replication, threads, client limits),
//! and two whose answer depends on how Valkey was built or where it runs
//! rather than on Valkey: `activedefrag` (refused by a Valkey without its
//! own jemalloc, as the PyPI build is) and `locale-collate` (which locales
//! the machine has; README).

use ringkv_e2e::raw::Raw;
use ringkv_e2e::{Backend, Opts, Reply, e2e};

const NOT_PROBED: &[&str] = &[
    "bind",
    "port",
    "dir",
    "requirepass",
    "masterauth",
    "primaryauth",
    "masteruser",
    "primaryuser",
    "logfile",
    "unixsocket",
    "unixsocketperm",
    "unixsocketgroup",
    "replicaof",
    "slaveof",
    "io-threads",
    "daemonize",
    "pidfile",
    "appendonly",
    "appenddirname",
    "appendfilename",
    "dbfilename",
    "syslog-enabled",
    "syslog-ident",
    "syslog-facility",
    "aclfile",
    "save",
    "shutdown-timeout",
    "shutdown-on-sigint",
    "shutdown-on-sigterm",
    "bind-source-addr",
    "enable-debug-command",
    "enable-module-command",
    "enable-protected-configs",
    "rdb-del-sync-files",
    "always-show-logo",
    "maxclients",
    "maxmemory-clients",
    "timeout",
    "repl-timeout",
    "busy-reply-threshold",
    "lua-time-limit",
    "activedefrag",
    "locale-collate",
];

const VALUES: &[&str] = &[
    "mb",
    "16383",
    "600",
    "{x}",
    "{port}",
    "C",
    "-2",
    "50 x",
    "yes",
    "no",
    "0",
    "-1",
    "1",
    "100",
    "1gb",
    "10mb",
    "abc",
    "",
    "1 2",
    "0.5",
    "-5",
    "2147483648",
    "allkeys-lru",
    "everysec",
    "warning",
    "none",
];

fn get(raw: &mut Raw, name: &str) -> Reply {
    raw.cmd(&["CONFIG", "GET", name])
}

/// The directive names CONFIG GET * lists.
fn names(raw: &mut Raw) -> Vec<String> {
    let Reply::Array(items) = raw.cmd(&["CONFIG", "GET", "*"]) else {
        panic!("CONFIG GET *")
    };
    items.iter().step_by(2).map(Reply::text).collect()
}

e2e!(
    ringkv_only fn config_set_answers_as_valkey(b) {
        let ours = b.server();
        let theirs = Backend::Valkey.start(Opts::new());
        let mut o = ours.raw();
        let mut t = theirs.raw();
        let theirs_names = names(&mut t);
        let mut probed = 0;
        for name in names(&mut o) {
            if !theirs_names.contains(&name)
                || NOT_PROBED.contains(&name.as_str())
                || name.starts_with("tls-")
                || name.starts_with("cluster-")
            {
                continue;
            }
            let (o_start, t_start) = (get(&mut o, &name), get(&mut t, &name));
            for v in VALUES {
                let (a, w) = (
                    o.cmd(&["CONFIG", "SET", &name, v]),
                    t.cmd(&["CONFIG", "SET", &name, v]),
                );
                assert_eq!(a, w, "CONFIG SET {name} {v:?}");
                if a == Reply::status("OK") {
                    assert_eq!(get(&mut o, &name), get(&mut t, &name), "{name} after {v:?}");
                }
                probed += 1;
            }
            // Back to where each started (the harness sets some directives).
            for (raw, start) in [(&mut o, &o_start), (&mut t, &t_start)] {
                let Reply::Array(kv) = start else { panic!("CONFIG GET {name}") };
                raw.cmd(&["CONFIG", "SET", &name, &kv[1].text()]);
            }
        }
        assert!(probed > 120 * VALUES.len(), "only {probed} probes");
    }
);
