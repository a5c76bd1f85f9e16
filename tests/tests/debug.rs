//! DEBUG against Valkey 8.1: the same data gives the same DEBUG DIGEST
//! and DIGEST-VALUE on both servers — so a digest checks a ringkv replica
//! against a Valkey primary and the other way round (tested here) — the
//! same DEBUG OBJECT fields, and the replies client test suites rely on
//! (PROTOCOL, ERROR) byte for byte.

use ringkv_e2e::dataset;
use ringkv_e2e::replication::{follow, wait_caught_up};
use ringkv_e2e::{Backend, Opts, Reply, Server, e2e};

fn with_debug(b: Backend) -> Server {
    b.start(Opts::new().arg("enable-debug-command", "yes"))
}

/// Run `steps` against a fresh server of `b` and one of Valkey 8.1 (DEBUG
/// enabled on both): the replies it returns must be the same.
fn same_replies_as_valkeys(
    b: Backend,
    steps: impl Fn(Backend, &mut ringkv_e2e::Raw) -> Vec<Reply>,
) {
    let run = |backend: Backend| steps(backend, &mut with_debug(backend).raw());
    let (ours, valkeys) = (run(b), run(Backend::Valkey));
    assert!(
        ours == valkeys,
        "{b:?}:\n{ours:?}\nValkey 8.1:\n{valkeys:?}"
    );
}

/// Writes beside `dataset::fill`'s: streams (with a group, and deleted
/// entries), scores that print in several ways, integers in every
/// container, and a list long enough for quicklist nodes.
const EXTRA: &[&[&str]] = &[
    &["XADD", "x", "1-1", "f", "v", "n", "12"],
    &["XADD", "x", "1-2", "f", "w"],
    &["XADD", "x", "18446744073709551615-0", "a", "b"],
    &["XDEL", "x", "1-2"],
    &["XGROUP", "CREATE", "x", "g", "0"],
    &[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "COUNT",
        "1",
        "STREAMS",
        "x",
        ">",
    ],
    &["XGROUP", "CREATE", "empty", "g", "$", "MKSTREAM"],
    &[
        "ZADD",
        "zs",
        "0.1",
        "a",
        "-0",
        "b",
        "1e21",
        "c",
        "123456789012345678",
        "d",
    ],
    &[
        "ZADD",
        "zs",
        "2.5e-300",
        "e",
        "3.14159265358979",
        "f",
        "7",
        "12",
    ],
    &["SADD", "mixed", "1", "-1", "x", "007"],
    &["HSET", "hi", "1", "2", "-3", "x"],
    &["SET", "neg", "-0"],
    &["SET", "spaced", " 1"],
    &["PEXPIRE", "zs", "100000000"],
];

fn load(srv: &Server) {
    let mut c = srv.client();
    dataset::fill(&mut c);
    let mut raw = srv.raw();
    for args in EXTRA {
        let r = raw.cmd(args);
        assert!(!matches!(r, Reply::Error(_)), "{args:?}: {r:?}");
    }
    let items: Vec<String> = (0..5000).map(|i| i.to_string()).collect();
    let mut args = vec!["RPUSH", "bigl"];
    args.extend(items.iter().map(String::as_str));
    raw.cmd(&args);
}

fn keys(c: &mut ringkv_e2e::Raw) -> Vec<String> {
    let Reply::Array(keys) = c.cmd(&["KEYS", "*"]) else {
        panic!("KEYS");
    };
    let mut keys: Vec<String> = keys.iter().map(Reply::text).collect();
    keys.sort();
    keys
}

/// DEBUG OBJECT without what differs by nature: the address, the clock,
/// and (for lists cut into nodes) the RDB size, which follows where each
/// server cut its nodes.
fn object_fields(c: &mut ringkv_e2e::Raw, key: &str) -> String {
    let line = c.cmd(&["DEBUG", "OBJECT", key]).text();
    let quicklist = line.contains("encoding:quicklist");
    line.split(' ')
        .filter(|f| {
            !f.starts_with("at:")
                && !f.starts_with("lru")
                && !f.starts_with("lfu_access_time")
                && !(quicklist && (f.starts_with("serializedlength") || f.starts_with("ql_")))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

e2e!(
    ringkv_only fn digests_and_object_fields_are_valkeys(b) {
        let ours = with_debug(b);
        let theirs = with_debug(Backend::Valkey);
        let (mut a, mut v) = (ours.raw(), theirs.raw());
        let empty = Reply::Status("0".repeat(40));
        assert_eq!(a.cmd(&["DEBUG", "DIGEST"]), empty);
        load(&ours);
        load(&theirs);
        for db in ["0", "3"] {
            a.cmd(&["SELECT", db]);
            v.cmd(&["SELECT", db]);
            let names = keys(&mut a);
            assert_eq!(names, keys(&mut v));
            assert!(!names.is_empty(), "db {db}");
            for k in &names {
                let ask = ["DEBUG", "DIGEST-VALUE", k.as_str(), "nokey"];
                assert_eq!(a.cmd(&ask), v.cmd(&ask), "DIGEST-VALUE {k}");
                assert_eq!(object_fields(&mut a, k), object_fields(&mut v, k), "{k}");
            }
        }
        let digest = a.cmd(&["DEBUG", "DIGEST"]);
        assert_ne!(digest, empty);
        assert_eq!(digest, v.cmd(&["DEBUG", "DIGEST"]));
    }
);

/// Sends `args` and then PING, and returns every byte before `+PONG`:
/// the reply as it is on the wire, whatever frames it has.
fn wire(c: &mut ringkv_e2e::Raw, args: &[&str]) -> Vec<u8> {
    use std::io::Read;
    let mut out = ringkv_e2e::raw::encode_str(args);
    out.extend_from_slice(&ringkv_e2e::raw::encode_str(&["PING"]));
    c.send(&out);
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(b"+PONG\r\n") {
        let n = c.stream.read(&mut buf).expect("read");
        assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    got.truncate(got.len() - 7);
    got
}

e2e!(
    ringkv_only fn protocol_and_error_replies_are_valkeys(b) {
        let ours = with_debug(b);
        let theirs = with_debug(Backend::Valkey);
        let types = [
            "string", "integer", "double", "bignum", "null", "array", "set", "map", "attrib",
            "push", "verbatim", "true", "false", "nope",
        ];
        for proto in ["2", "3"] {
            let (mut a, mut v) = (ours.raw(), theirs.raw());
            a.cmd(&["HELLO", proto]);
            v.cmd(&["HELLO", proto]);
            for t in types {
                let ask = ["DEBUG", "PROTOCOL", t];
                assert_eq!(
                    String::from_utf8_lossy(&wire(&mut a, &ask)),
                    String::from_utf8_lossy(&wire(&mut v, &ask)),
                    "RESP{proto} {t}"
                );
            }
            for ask in [
                &["DEBUG", "ERROR", "LOADING fake\r\nmessage"][..],
                &["DEBUG", "ERROR"],
                &["DEBUG", "LOG", "from the test"],
                &["DEBUG", "OBJECT", "nokey", "fast"],
                &["DEBUG", "RELOAD", "bogus"],
                &["DEBUG", "CHANGE-REPL-ID", "x"],
                &["DEBUG", "DIGEST-VALUE"],
            ] {
                assert_eq!(wire(&mut a, ask), wire(&mut v, ask), "{ask:?}");
            }
        }
        // Neither counts DEBUG ERROR's reply as an error.
        for srv in [&ours, &theirs] {
            let mut c = srv.raw();
            c.cmd(&["CONFIG", "RESETSTAT"]);
            c.cmd(&["DEBUG", "ERROR", "FOO bar"]);
            let stats = c.cmd(&["INFO", "stats"]).text();
            assert!(stats.contains("total_error_replies:0"), "{stats}");
            let cmdstats = c.cmd(&["INFO", "commandstats"]).text();
            assert!(cmdstats.contains("failed_calls=0"), "{cmdstats}");
        }
        assert!(ours.log().contains("DEBUG LOG: from the test"));
    }
);

e2e!(
    ringkv_only fn a_replica_has_its_primarys_digest_both_ways(b) {
        for (primary, replica) in [(Backend::Valkey, b), (b, Backend::Valkey)] {
            let p = with_debug(primary);
            let r = with_debug(replica);
            let (mut pc, mut rc) = (p.client(), r.client());
            load(&p);
            follow(&mut rc, &p);
            // Streamed after the full sync, and a key that expires.
            p.raw().cmd(&["HSET", "late", "f", "v"]);
            p.raw().cmd(&["SET", "ttl", "v", "EX", "1000"]);
            wait_caught_up(&mut pc, &mut rc);
            let digest = p.raw().cmd(&["DEBUG", "DIGEST"]);
            assert_ne!(digest, Reply::Status("0".repeat(40)));
            assert_eq!(
                r.raw().cmd(&["DEBUG", "DIGEST"]),
                digest,
                "{primary:?} -> {replica:?}"
            );
        }
    }
);

e2e!(
    ringkv_only fn reload_options_and_change_repl_id_as_valkeys(b) {
        same_replies_as_valkeys(b, |backend, c| {
            let mut seen = Vec::new();
            let mut step = |c: &mut ringkv_e2e::Raw, args: &[&str]| seen.push(c.cmd(args));
            step(c, &["MSET", "a", "1", "b", "1"]);
            step(c, &["SAVE"]);
            step(c, &["MSET", "b", "2", "c", "2"]);
            // The saved file replaces what is held.
            step(c, &["DEBUG", "RELOAD", "NOSAVE"]);
            step(c, &["MGET", "a", "b", "c"]);
            // The file's keys join what is held; its values win.
            step(c, &["MSET", "b", "3", "c", "3"]);
            step(c, &["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE"]);
            step(c, &["MGET", "a", "b", "c"]);
            step(c, &["DEBUG", "RELOAD"]);
            step(c, &["MGET", "a", "b", "c"]);
            let id = |c: &mut ringkv_e2e::Raw| {
                let info = c.cmd(&["INFO", "replication"]).text();
                ringkv_e2e::info_field(&info, "master_replid")
            };
            let before = id(c);
            step(c, &["DEBUG", "CHANGE-REPL-ID"]);
            assert_ne!(id(c), before, "{backend:?}");
            let info = c.cmd(&["INFO", "replication"]).text();
            assert_eq!(ringkv_e2e::info_field(&info, "second_repl_offset"), "-1");
            seen
        });
    }
);

e2e!(
    ringkv_only fn loadaof_and_function_reloads_as_valkeys(b) {
        let lib = "#!lua name=lib\nserver.register_function('f', function() return 1 end)";
        same_replies_as_valkeys(b, |backend, c| {
            let mut seen = Vec::new();
            let mut step = |c: &mut ringkv_e2e::Raw, args: &[&str]| seen.push(c.cmd(args));
            let rewritten = |c: &mut ringkv_e2e::Raw| {
                ringkv_e2e::within(30, "the AOF rewrite", || {
                    let info = c.cmd(&["INFO", "persistence"]).text();
                    ringkv_e2e::info_field(&info, "aof_rewrite_in_progress") == "0"
                        && ringkv_e2e::info_field(&info, "aof_rewrite_scheduled") == "0"
                })
            };
            step(c, &["CONFIG", "SET", "appendonly", "yes"]);
            rewritten(c);
            step(c, &["RPUSH", "l", "a", "b"]);
            step(c, &["FUNCTION", "LOAD", lib]);
            step(c, &["SET", "k", "v", "EX", "1000"]);
            step(c, &["DEBUG", "LOADAOF"]);
            step(c, &["LRANGE", "l", "0", "-1"]);
            step(c, &["FCALL", "f", "0"]);
            step(c, &["DBSIZE"]);
            let ttl = c.cmd(&["TTL", "k"]);
            assert!(matches!(ttl, Reply::Int(t) if t > 900), "{backend:?} {ttl:?}");
            // A library already held fails a reload that keeps what is
            // held, unless MERGE replaces it.
            step(c, &["CONFIG", "SET", "appendonly", "no"]);
            step(c, &["DEL", "l", "k"]);
            // With appendonly no it loads what BGREWRITEAOF wrote.
            step(c, &["SET", "z", "1"]);
            step(c, &["BGREWRITEAOF"]);
            rewritten(c);
            step(c, &["SET", "after", "1"]);
            step(c, &["DEBUG", "LOADAOF"]);
            step(c, &["MGET", "z", "after"]);
            step(c, &["SAVE"]);
            let refused = c.cmd(&["DEBUG", "RELOAD", "NOFLUSH"]);
            assert!(
                matches!(&refused, Reply::Error(e) if e.contains("Error trying to load the RDB")),
                "{backend:?} {refused:?}"
            );
            step(c, &["DEBUG", "RELOAD", "NOFLUSH", "MERGE"]);
            step(c, &["FUNCTION", "LIST"]);
            step(c, &["DEBUG", "RELOAD"]);
            step(c, &["FCALL", "f", "0"]);
            seen
        });
    }
);

e2e!(
    ringkv_only fn a_lowered_packed_threshold_makes_valkeys_plain_nodes(b) {
        // Pushed at either end, each element past the threshold is a
        // plain node of its own, so the list's DUMP payload is Valkey's
        // byte for byte. (Inserts inside nodes split them differently:
        // see README.)
        same_replies_as_valkeys(b, |_, c| {
            let mut seen = Vec::new();
            let mut step = |c: &mut ringkv_e2e::Raw, args: &[&str]| seen.push(c.cmd(args));
            step(c, &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "100b"]);
            step(c, &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "5gb"]);
            // Nodes of up to 4 entries: a quicklist from the fifth on.
            step(c, &["CONFIG", "SET", "list-max-listpack-size", "4"]);
            step(c, &["RPUSH", "l", "a", "b", "c", "d", "e"]);
            let big = "x".repeat(500);
            for (push, v) in [
                ("RPUSH", big.as_str()),
                ("RPUSH", "f"),
                ("LPUSH", &big),
                ("LPUSH", "g"),
                ("RPUSH", &big),
            ] {
                step(c, &[push, "l", v]);
            }
            step(c, &["RPOP", "l"]);
            step(c, &["RPUSH", "l", "h"]);
            step(c, &["OBJECT", "ENCODING", "l"]);
            step(c, &["DUMP", "l"]);
            step(c, &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "0"]);
            seen
        });
    }
);

e2e!(
    ringkv_only fn loadaof_without_aof_files_keeps_the_dataset(b) {
        // Valkey exits here; ringkv answers an error and loses nothing.
        let srv = with_debug(b);
        let mut c = srv.raw();
        c.cmd(&["SET", "k", "v"]);
        assert_eq!(
            c.cmd(&["DEBUG", "LOADAOF"]),
            Reply::err("ERR Error trying to load the AOF files, check server logs.")
        );
        assert_eq!(c.cmd(&["GET", "k"]), Reply::bulk("v"));
    }
);
