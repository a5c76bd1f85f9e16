//! MIGRATE from ringkv and from Valkey 8.1, the same steps, compared reply
//! for reply and by what the targets hold afterwards: every value type
//! with its TTL, KEYS / COPY / REPLACE, a database other than 0, targets
//! that want a password (AUTH and AUTH2, right and wrong), the target's
//! own errors (BUSYKEY), nothing to move, bad arguments, a port nobody
//! listens on; then the socket's failures against a stub target (one that
//! never answers, one that hangs up on every request) and a cached
//! connection the target closed.

use ringkv_e2e::{Backend, Opts, Reply, Server, e2e};
use std::io::Read;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The targets every source migrates to, emptied before each source runs.
struct Targets {
    open: Server,
    locked: Server,
    ringkv: Server,
}

/// Run the steps from `src`; the replies, then what the targets hold.
fn steps(src: &Server, t: &Targets, dead_port: u16) -> Vec<(String, Reply)> {
    for (s, pass) in [(&t.open, None), (&t.locked, Some("pw")), (&t.ringkv, None)] {
        let mut c = s.raw();
        if let Some(p) = pass {
            c.cmd(&["AUTH", p]);
        }
        assert_eq!(c.cmd(&["FLUSHALL"]), Reply::status("OK"));
    }
    let (open, locked, rk) = (
        t.open.port.to_string(),
        t.locked.port.to_string(),
        t.ringkv.port.to_string(),
    );
    let dead = dead_port.to_string();
    let mut c = src.raw();
    let mut out = Vec::new();
    // One command per line, split on spaces; `''` is an empty argument.
    const SCRIPT: &[&str] = &[
        "SET a 1",
        "PEXPIRE a 100000",
        "RPUSH l x y",
        "HSET h f v",
        "SADD s m1 m2",
        "ZADD z 1 m 2.5 n",
        "XADD x 1-1 f v",
        "PFADD hll a b",
        "MSET b 2 c 3 d 4 e 5",
        "MIGRATE 127.0.0.1 {open} a 0 1000",
        "EXISTS a",
        "MIGRATE 127.0.0.1 {open} nokey 0 1000",
        "MIGRATE 127.0.0.1 {open} '' 0 1000 KEYS l h s z x hll missing",
        "DBSIZE",
        "SET l again",
        "MIGRATE 127.0.0.1 {open} l 0 1000",
        "EXISTS l",
        "MIGRATE 127.0.0.1 {open} l 0 1000 REPLACE",
        "MIGRATE 127.0.0.1 {open} b 3 1000 COPY",
        "EXISTS b",
        "MIGRATE 127.0.0.1 {open} k 0 1000 KEYS b",
        "MIGRATE 127.0.0.1 {open} b 0 1000 BOGUS",
        "MIGRATE 127.0.0.1 {open} b 0 1000 AUTH",
        "MIGRATE 127.0.0.1 {open} b 0 1000 AUTH2 u",
        "MIGRATE 127.0.0.1 {open} b x 1000",
        "MIGRATE 127.0.0.1 {open} b 0 x",
        "MIGRATE 127.0.0.1 {dead} b 0 100",
        "MIGRATE 127.0.0.1 {locked} b 0 1000",
        "MIGRATE 127.0.0.1 {locked} b 0 1000 AUTH bad",
        "MIGRATE 127.0.0.1 {locked} b 0 1000 AUTH2 default bad",
        "MIGRATE 127.0.0.1 {locked} b 0 1000 AUTH pw",
        "MIGRATE 127.0.0.1 {open} c 99 1000",
        "MIGRATE 127.0.0.1 {open} c 5 1000",
        "MIGRATE 127.0.0.1 {open} d 5 0",
        "MIGRATE 127.0.0.1 {ringkv} e 2 1000",
        "SADD s2 only",
        "MIGRATE 127.0.0.1 {ringkv} s2 0 1000",
        "EXISTS c b d e",
        "COMMAND GETKEYS MIGRATE h 1 '' 0 5 AUTH2 keys x KEYS k1 k2",
        "COMMAND GETKEYS MIGRATE h 1 k 0 5 COPY",
    ];
    for line in SCRIPT {
        let line = line
            .replace("{open}", &open)
            .replace("{locked}", &locked)
            .replace("{ringkv}", &rk)
            .replace("{dead}", &dead);
        let argv: Vec<&str> = line
            .split(' ')
            .map(|a| if a == "''" { "" } else { a })
            .collect();
        out.push((line.clone(), c.cmd(&argv)));
    }
    let info = c.cmd(&["INFO", "stats"]).text();
    let cached = ringkv_e2e::info_field(&info, "migrate_cached_sockets");
    out.push((
        "migrate_cached_sockets".into(),
        Reply::Bulk(cached.into_bytes()),
    ));
    // What the targets hold: keys per database, their types and values.
    for (name, s, pass) in [
        ("open", &t.open, None),
        ("locked", &t.locked, Some("pw")),
        ("ringkv", &t.ringkv, None),
    ] {
        let mut r = s.raw();
        if let Some(p) = pass {
            r.cmd(&["AUTH", p]);
        }
        for db in ["0", "2", "3", "5"] {
            r.cmd(&["SELECT", db]);
            let Reply::Array(found) = r.cmd(&["KEYS", "*"]) else {
                panic!("KEYS");
            };
            let mut keys: Vec<String> = found.iter().map(Reply::text).collect();
            keys.sort();
            for k in &keys {
                let ttl = match r.cmd(&["PTTL", k]) {
                    Reply::Int(ms) => (ms > 90_000 || ms == -1).to_string(),
                    other => format!("{other:?}"),
                };
                let what = format!("{name} db{db} {k} ttl-kept:{ttl}");
                out.push((what, contents(&mut r, k)));
            }
        }
    }
    out
}

/// A key's value, read the way its type is read.
fn contents(r: &mut ringkv_e2e::Raw, k: &str) -> Reply {
    let t = r.cmd(&["TYPE", k]).text();
    match t.as_str() {
        "string" => r.cmd(&["GET", k]),
        "list" => r.cmd(&["LRANGE", k, "0", "-1"]),
        "hash" => r.cmd(&["HGETALL", k]),
        "set" => r.cmd(&["SORT", k, "ALPHA"]),
        "zset" => r.cmd(&["ZRANGE", k, "0", "-1", "WITHSCORES"]),
        "stream" => r.cmd(&["XRANGE", k, "-", "+"]),
        other => Reply::Bulk(other.as_bytes().to_vec()),
    }
}

e2e!(
    ringkv_only fn migrate_answers_and_moves_as_valkeys(b) {
        // The third target is a ringkv: both sources' payloads into it.
        let t = Targets {
            open: Backend::Valkey.server(),
            locked: Backend::Valkey.start(Opts::new().arg("requirepass", "pw")),
            ringkv: b.server(),
        };
        // Refused for the whole test: a port only picked as free could be
        // bound meanwhile by another test's stub target, which would then
        // count this test's connections.
        let dead = ringkv_e2e::server::RefusedPort::new();
        let ours = steps(&b.server(), &t, dead.port);
        let theirs = steps(&Backend::Valkey.server(), &t, dead.port);
        assert_eq!(ours.len(), theirs.len());
        for (o, v) in ours.iter().zip(&theirs) {
            assert_eq!(o, v);
        }
        // The steps did move something: the hash went.
        assert!(ours.iter().any(|(w, r)| w == "open db0 h ttl-kept:true"
            && *r == Reply::Array(vec![Reply::bulk("f"), Reply::bulk("v")])));
    }
);

/// A target that accepts connections and counts them; `hang_up`: read a
/// request and hang up on it, else never answer.
fn stub_target(hang_up: bool) -> (u16, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let n = accepted.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming().take(8) {
            let Ok(mut s) = s else { break };
            n.fetch_add(1, Ordering::SeqCst);
            if hang_up {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                drop(s);
            } else {
                held.push(s);
            }
        }
    });
    (port, accepted)
}

/// The stub scenarios: (what, reply, connections the stub saw).
fn socket_failures(src: &Server) -> Vec<(String, Reply, usize)> {
    let mut c = src.raw();
    c.cmd(&["SET", "k", "v"]);
    let mut out = Vec::new();
    for hang_up in [false, true] {
        let (port, accepted) = stub_target(hang_up);
        let port = port.to_string();
        let r = c.cmd(&["MIGRATE", "127.0.0.1", &port, "k", "0", "300"]);
        // The count settles once the reply is in: the retry connected first.
        out.push((
            format!("hang_up:{hang_up}"),
            r,
            accepted.load(Ordering::SeqCst),
        ));
        out.push(("still here".into(), c.cmd(&["EXISTS", "k"]), 0));
    }
    out
}

e2e!(
    ringkv_only fn migrate_socket_failures_as_valkeys(b) {
        let ours = socket_failures(&b.server());
        let theirs = socket_failures(&Backend::Valkey.server());
        assert_eq!(ours, theirs);
        // Silence times out without a retry; a hang-up is retried once.
        assert_eq!(ours[0].2, 1, "{ours:?}");
        assert_eq!(ours[2].2, 2, "{ours:?}");
    }
);

e2e!(
    ringkv_only fn a_cached_connection_the_target_closed_is_replaced(b) {
        let src = b.server();
        let target = Backend::Valkey.server();
        let port = target.port.to_string();
        let mut c = src.raw();
        c.cmd(&["MSET", "a", "1", "b", "2"]);
        assert_eq!(c.cmd(&["MIGRATE", "127.0.0.1", &port, "a", "0", "1000"]), Reply::status("OK"));
        let mut t = target.raw();
        // The target drops every client but this one: the cached socket.
        assert!(matches!(t.cmd(&["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"]), Reply::Int(1)));
        assert_eq!(c.cmd(&["MIGRATE", "127.0.0.1", &port, "b", "0", "1000"]), Reply::status("OK"));
        assert_eq!(t.cmd(&["MGET", "a", "b"]), Reply::Array(vec![Reply::bulk("1"), Reply::bulk("2")]));
        let info = c.cmd(&["INFO", "stats"]).text();
        assert_eq!(ringkv_e2e::info_field(&info, "migrate_cached_sockets"), "1");
        // Unused for 10 s, it is closed (cron checks every 100 ms).
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            let info = c.cmd(&["INFO", "stats"]).text();
            if ringkv_e2e::info_field(&info, "migrate_cached_sockets") == "0" {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "still cached");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
);
