//! Server behaviours Redis 7.0's own Tcl suite found apart from Valkey's
//! (scripts/redis_tcl_suite.sh), checked through real connections
//! against Valkey 8.1 beside: what a client reads must be the same.

use ringkv_e2e::raw::encode_str;
use ringkv_e2e::{Backend, Raw, Reply, e2e, info_field};

/// Run `steps` against a fresh server of `b` and one of Valkey 8.1; the
/// replies it returns must be the same.
fn same_as_valkeys(b: Backend, steps: impl Fn(&ringkv_e2e::Server) -> Vec<Reply>) {
    let (ours, valkeys) = (steps(&b.server()), steps(&Backend::Valkey.server()));
    assert!(
        ours == valkeys,
        "{b:?}:\n{ours:?}\nValkey 8.1:\n{valkeys:?}"
    );
}

e2e!(
    ringkv_only fn counters_and_replies_as_valkeys(b) {
        same_as_valkeys(b, |srv| {
            let mut c = srv.raw();
            let mut seen = Vec::new();
            // Both ends from the end and crossed: nothing.
            c.cmd(&["SET", "s", "xxxx"]);
            seen.push(c.cmd(&["BITCOUNT", "s", "-6", "-7"]));
            seen.push(c.cmd(&["BITCOUNT", "s", "-6", "-15", "BIT"]));
            // RESETSTAT: counters restart, the memory peak stays.
            c.cmd(&["SAVE"]);
            let peak = |c: &mut Raw| {
                let info = c.cmd(&["INFO", "memory"]).text();
                info_field(&info, "used_memory_peak").parse::<u64>().unwrap()
            };
            let before = peak(&mut c);
            seen.push(c.cmd(&["CONFIG", "RESETSTAT"]));
            let info = c.cmd(&["INFO", "all"]).text();
            for field in ["rdb_saves", "lazyfreed_objects", "sync_full", "aof_rewrites"] {
                seen.push(Reply::Status(format!("{field}:{}", info_field(&info, field))));
            }
            assert!(peak(&mut c) >= before);
            // ACL SETUSER's arguments are all redacted in the slow log.
            c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
            c.cmd(&["SLOWLOG", "RESET"]);
            c.cmd(&["ACL", "SETUSER", "u", "on", ">secret"]);
            c.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "10000"]);
            if let Reply::Array(entries) = c.cmd(&["SLOWLOG", "GET"]) {
                seen.extend(entries.into_iter().map(|e| match e {
                    Reply::Array(fields) => fields[3].clone(),
                    other => other,
                }));
            }
            seen
        });
    }
);

e2e!(
    ringkv_only fn reply_off_pause_and_flush_as_valkeys(b) {
        same_as_valkeys(b, |srv| {
            let mut seen = Vec::new();
            // Subscribe confirmations come under CLIENT REPLY OFF.
            let mut s = srv.raw();
            s.send(&encode_str(&["CLIENT", "REPLY", "OFF"]));
            s.send(&encode_str(&["SUBSCRIBE", "ch"]));
            seen.push(s.read_reply());
            // A client held by CLIENT PAUSE is a blocked client.
            let mut admin = srv.raw();
            admin.cmd(&["CLIENT", "PAUSE", "100000", "WRITE"]);
            let mut w = srv.raw();
            w.send(&encode_str(&["SET", "k", "v"]));
            ringkv_e2e::within(10, "the SET to be held", || {
                let info = admin.cmd(&["INFO", "clients"]).text();
                info_field(&info, "blocked_clients") == "1"
            });
            let list = admin.cmd(&["CLIENT", "LIST"]).text();
            seen.push(Reply::Int(
                list.lines().filter(|l| l.contains("flags=b ") && l.contains("cmd=set ")).count() as i64,
            ));
            admin.cmd(&["CLIENT", "UNPAUSE"]);
            seen.push(w.read_reply());
            // FLUSHALL wakes a blocked XREADGROUP with NOGROUP.
            admin.cmd(&["XADD", "x", "1-1", "f", "v"]);
            admin.cmd(&["XGROUP", "CREATE", "x", "g", "$"]);
            let mut r = srv.raw();
            r.send(&encode_str(&["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "x", ">"]));
            ringkv_e2e::within(10, "XREADGROUP to block", || {
                let info = admin.cmd(&["INFO", "clients"]).text();
                info_field(&info, "blocked_clients") == "1"
            });
            seen.push(admin.cmd(&["FLUSHALL"]));
            seen.push(r.read_reply());
            seen
        });
    }
);
