//! MONITOR and SLOWLOG against the real binary, compared line by line
//! with Valkey 8.1 running the same commands (times, ports and durations
//! masked): the line format, what is shown and in which order, redacted
//! secrets, and slow-log entries.

use ringkv_e2e::{Backend, Reply, e2e};

/// Commands a second client sends while the first one monitors; the last
/// one marks the end of the stream.
const SCRIPT: &[&[&str]] = &[
    &["SET", "a", "x\n\"y\\\u{1}"],
    &["MULTI"],
    &["SET", "c", "1"],
    &["INCR", "c"],
    &["EXEC"],
    &["SELECT", "3"],
    &["PING"],
    &["NOSUCH"],
    &["GET"],
    &["CONFIG", "GET", "port"],
    &["AUTH", "secret"],
    &["HELLO", "2", "AUTH", "u", "p"],
    &[
        "EVAL",
        "redis.call('set', KEYS[1], 'v'); return redis.call('get', KEYS[1])",
        "1",
        "k",
    ],
    &["EVAL", "return 1", "x"],
    &["FCALL", "nosuch", "0"],
    &["LPUSH", "l", "a"],
    &["BLPOP", "none", "0.01"],
    &["ECHO", "done"],
];

/// `+1795669265.079544 [0 127.0.0.1:48028] "set"` → `[0 C] "set"`.
fn mask(line: &str) -> String {
    let rest = line.split_once(" [").map_or(line, |(_, r)| r);
    let (db_addr, args) = rest.split_once("] ").unwrap_or((rest, ""));
    let (db, addr) = db_addr.split_once(' ').unwrap_or((db_addr, ""));
    let who = if addr == "lua" { "lua" } else { "C" };
    format!("[{db} {who}] {args}")
}

fn monitored(srv: &ringkv_e2e::Server) -> Vec<String> {
    let mut mon = srv.raw();
    assert_eq!(mon.cmd(&["MONITOR"]), Reply::status("OK"));
    let mut c = srv.raw();
    for args in SCRIPT {
        c.cmd(args);
    }
    let mut lines = Vec::new();
    loop {
        let Reply::Status(line) = mon.read_reply() else {
            panic!("a monitor gets status lines")
        };
        let m = mask(&line);
        let done = m.ends_with("\"ECHO\" \"done\"");
        lines.push(m);
        if done {
            return lines;
        }
        assert!(lines.len() < 100, "{lines:#?}");
    }
}

e2e!(
    ringkv_only fn monitor_lines_match_valkeys(b) {
        let ours = monitored(&b.server());
        let theirs = monitored(&Backend::Valkey.server());
        assert_eq!(ours, theirs);
        assert!(ours.iter().any(|l| l.contains("(redacted)")), "{ours:#?}");
    }
);

e2e!(
    fn monitor_sees_every_client_in_execution_order(b) {
        let srv = b.server();
        let mut mon = srv.raw();
        assert_eq!(mon.cmd(&["MONITOR"]), Reply::status("OK"));
        // Several connections (spread over IO threads in threaded mode),
        // each waiting for its reply before the next client sends: the
        // lines come in exactly that order.
        let mut clients: Vec<_> = (0..4).map(|_| srv.raw()).collect();
        for round in 0..25 {
            for (i, c) in clients.iter_mut().enumerate() {
                let v = format!("{round}-{i}");
                assert_eq!(c.cmd(&["SET", "k", &v]), Reply::status("OK"));
            }
        }
        for round in 0..25 {
            for i in 0..4 {
                let Reply::Status(line) = mon.read_reply() else { panic!() };
                assert!(
                    line.ends_with(&format!("\"SET\" \"k\" \"{round}-{i}\"")),
                    "{line}"
                );
            }
        }
    }
);

/// SLOWLOG GET -1 with ids, times, durations and ports masked.
fn slow_entries(srv: &ringkv_e2e::Server) -> Vec<String> {
    let mut c = srv.raw();
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
        Reply::status("OK")
    );
    c.cmd(&["SLOWLOG", "RESET"]);
    c.cmd(&["CLIENT", "SETNAME", "me"]);
    let big = "a".repeat(200);
    let many: Vec<String> = (0..40).map(|i| i.to_string()).collect();
    let mut rpush = vec!["RPUSH", "l"];
    rpush.extend(many.iter().map(String::as_str));
    for args in [
        &["SET", "k", &big][..],
        &rpush,
        &["MULTI"],
        &["SET", "c", "1"],
        &["EXEC"],
        &["AUTH", "a", "b"],
        &["EVAL", "return redis.call('incr','z')", "0"],
        &["BLPOP", "none", "0.01"],
    ] {
        c.cmd(args);
    }
    let Reply::Array(entries) = c.cmd(&["SLOWLOG", "GET", "-1"]) else {
        panic!()
    };
    entries
        .into_iter()
        .map(|e| {
            let Reply::Array(f) = e else { panic!() };
            assert!(matches!(f[0], Reply::Int(_)) && matches!(f[2], Reply::Int(_)));
            let Reply::Array(args) = &f[3] else { panic!() };
            let words: Vec<String> = args.iter().map(Reply::text).collect();
            let peer = f[4].text();
            assert!(peer.starts_with("127.0.0.1:"), "{peer}");
            format!("{} | {}", words.join(" "), f[5].text())
        })
        .collect()
}

e2e!(
    ringkv_only fn slowlog_entries_match_valkeys(b) {
        let ours = slow_entries(&b.server());
        let theirs = slow_entries(&Backend::Valkey.server());
        assert_eq!(ours, theirs);
        assert!(ours.len() >= 9, "{ours:#?}");
    }
);

/// COMMANDLOG's size logs with low thresholds, ids, times and ports
/// masked: what is logged, and the sizes (the request's RESP bytes, the
/// reply's bytes).
fn size_entries(srv: &ringkv_e2e::Server) -> Vec<String> {
    let mut c = srv.raw();
    for (name, value) in [
        ("commandlog-request-larger-than", "40"),
        ("commandlog-reply-larger-than", "20"),
    ] {
        assert_eq!(c.cmd(&["CONFIG", "SET", name, value]), Reply::status("OK"));
    }
    c.cmd(&["COMMANDLOG", "RESET", "large-request"]);
    c.cmd(&["COMMANDLOG", "RESET", "large-reply"]);
    c.cmd(&["SET", "k", "0123456789abcdef"]);
    c.cmd(&["GET", "k"]);
    c.cmd(&["GET", "nokey"]);
    let mut out = Vec::new();
    for kind in ["large-request", "large-reply"] {
        let Reply::Array(entries) = c.cmd(&["COMMANDLOG", "GET", "-1", kind]) else {
            panic!()
        };
        for e in entries {
            let Reply::Array(f) = e else { panic!() };
            let Reply::Array(args) = &f[3] else { panic!() };
            let words: Vec<String> = args.iter().map(Reply::text).collect();
            out.push(format!("{kind}: {} = {:?}", words.join(" "), f[2]));
        }
    }
    out
}

e2e!(
    ringkv_only fn commandlog_size_entries_match_valkeys(b) {
        let ours = size_entries(&b.server());
        let theirs = size_entries(&Backend::Valkey.server());
        assert_eq!(ours, theirs);
        assert!(ours.iter().any(|l| l.contains("SET k")), "{ours:#?}");
    }
);
