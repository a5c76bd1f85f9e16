//! Edge behaviours where ringkv once differed from Valkey 8.1, each run
//! against ringkv and Valkey and compared reply for reply: nested MULTI
//! and WATCH inside MULTI, UNSUBSCRIBE without subscriptions, BITCOUNT /
//! BITPOS ranges, SINTERCARD LIMIT, COPY / MOVE, OBJECT ENCODING names,
//! CONFIG SET of several parameters (all or nothing), timeouts of the
//! blocking list commands, CLUSTER / MODULE / COMMANDLOG answers; and
//! the multi-client ones: SWAPDB waking a blocked client, PUBLISH to
//! one's own channel inside MULTI, BLMOVE to a destination of the wrong
//! type, commandstats of a blocking command that timed out.

use ringkv_e2e::{Backend, Reply, Server, e2e, info_field};
use std::time::Duration;

const SCRIPT: &[&[&str]] = &[
    &["MULTI"],
    &["MULTI"],
    &["WATCH", "x"],
    &["EXEC"],
    &["UNSUBSCRIBE"],
    &["PUNSUBSCRIBE"],
    &["SUNSUBSCRIBE"],
    &["SET", "s", "foobar"],
    &["BITCOUNT", "s", "0"],
    &["BITCOUNT", "s", "1"],
    &["BITCOUNT", "s", "-1"],
    &["BITCOUNT", "s", "a"],
    &["BITCOUNT", "s", "0", "BIT"],
    &["BITCOUNT", "s", "0", "-1", "BIT"],
    &["BITCOUNT", "s", "0", "-1", "bit", "extra"],
    &["BITCOUNT", "s", "0", "-1", "FOO"],
    &["BITCOUNT", "nokey", "0"],
    &["BITCOUNT", "nokey", "a"],
    &["BITPOS", "s", "1", "0", "-1", "BIT"],
    &["BITPOS", "s", "1", "0", "-1", "foo"],
    &["BITPOS", "s", "2"],
    &["BITPOS", "s", "0", "-1"],
    &["BITPOS", "s", "0", "-100", "-50", "BIT"],
    &["SADD", "a", "1", "2", "3"],
    &["SADD", "b", "2", "3", "4"],
    &["SINTERCARD", "2", "a", "b", "LIMIT", "-1"],
    &["SINTERCARD", "2", "a", "b", "LIMIT", "x"],
    &["SINTERCARD", "0", "a", "b"],
    &["SINTERCARD", "2", "a", "b", "LIMIT", "1"],
    &["SINTERCARD", "2", "a", "b", "FOO", "1"],
    &["COPY", "a", "a"],
    &["COPY", "a", "c", "DB", "16"],
    &["COPY", "a", "c", "DB", "x"],
    &["COPY", "a", "c"],
    &["COPY", "a", "c"],
    &["COPY", "a", "c", "REPLACE"],
    &["MOVE", "a", "0"],
    &["MOVE", "a", "16"],
    &["MOVE", "a", "x"],
    &["OBJECT", "ENCODING", "a"],
    &["OBJECT", "ENCODING", "s"],
    &["SET", "n", "123"],
    &["OBJECT", "ENCODING", "n"],
    &["RPUSH", "l", "a", "b"],
    &["OBJECT", "ENCODING", "l"],
    &["HSET", "h", "f", "v"],
    &["OBJECT", "ENCODING", "h"],
    &["ZADD", "z", "1", "m"],
    &["OBJECT", "ENCODING", "z"],
    &["PFADD", "hll", "a"],
    &["OBJECT", "ENCODING", "hll"],
    &["CONFIG", "SET", "maxmemory", "10mb", "hz", "20"],
    &["CONFIG", "GET", "hz"],
    &["CONFIG", "SET", "hz", "30", "maxmemory", "notanumber"],
    &["CONFIG", "GET", "hz"],
    &["CONFIG", "SET", "hz", "5", "hz", "6"],
    &["CONFIG", "SET", "nosuch", "1", "hz", "7"],
    &["CONFIG", "GET", "hz"],
    &["CONFIG", "SET", "maxmemory", "0", "hz", "10"],
    &["MULTI"],
    &["BLMOVE", "nokey", "d", "LEFT", "LEFT", "0"],
    &["BRPOPLPUSH", "nokey", "d", "0"],
    &["BLPOP", "nokey", "0"],
    &["EXEC"],
    &["BLMOVE", "nokey", "d", "LEFT", "LEFT", "0.01"],
    &["BRPOPLPUSH", "nokey", "d", "0.01"],
    &["BLPOP", "nokey", "0.0001"],
    &["CLUSTER", "INFO"],
    &["ASKING"],
    &["MODULE", "LIST"],
    &["MODULE", "LOAD", "/nonexistent.so"],
    &["MODULE", "HELP"],
    &["COMMANDLOG", "LEN", "slow"],
    &["COMMANDLOG", "GET", "1", "nosuch"],
    &["COMMANDLOG", "GET", "x", "slow"],
    &["COMMANDLOG", "HELP"],
    &["SLOWLOG", "HELP"],
    &["OBJECT", "HELP"],
    &["CONFIG", "HELP"],
    &["MEMORY", "HELP"],
    &["PUBSUB", "HELP"],
    &["FUNCTION", "HELP"],
    &["MODULE", "HELP"],
    &["CLIENT", "HELP"],
    &["CLIENT", "IMPORT-SOURCE", "ON"],
    &["PFADD", "h1", "a", "b", "c", "d", "e", "f", "g"],
    &["PFDEBUG", "DECODE", "h1"],
    &["PFDEBUG", "ENCODING", "h1"],
    &["PFDEBUG", "TODENSE", "h1"],
    &["PFDEBUG", "TODENSE", "h1"],
    &["PFDEBUG", "DECODE", "h1"],
    &["PFCOUNT", "h1"],
    &["PFDEBUG", "GETREG", "nokey"],
    &["PFDEBUG", "FOO", "h1"],
    &["PFDEBUG", "ENCODING", "s"],
    &["PFDEBUG", "ENCODING", "l"],
    &["PFSELFTEST"],
    &["RESTORE-ASKING", "x", "0", "bad"],
    &["LOLWUT", "VERSION", "x"],
    // The order of a scan's checks: a missing key answers an empty scan
    // before its options are read; a key of another type, WRONGTYPE.
    &["HSCAN", "nokey", "0", "COUNT", "0"],
    &["SSCAN", "nokey", "0", "bogus", "1"],
    &["SSCAN", "nokey", "0", "NOVALUES"],
    &["ZSCAN", "nokey", "0", "MATCH"],
    &["HSCAN", "s", "0", "bogus", "1"],
    &["SSCAN", "a", "0", "bogus", "1"],
    &["HSCAN", "h", "0", "COUNT", "0"],
    &["SSCAN", "a", "x"],
    // EVALSHA of a name that cannot be a SHA1 is NOSCRIPT before numkeys
    // is read; FCALL looks up the function first, and words numkeys'
    // error its own way.
    &["EVALSHA", "fff", "abc"],
    &["EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "abc"],
    &["FCALL", "nofn", "abc"],
    &[
        "FUNCTION",
        "LOAD",
        "#!lua name=edges\nredis.register_function('f', function() return 1 end)",
    ],
    &["FCALL", "f", "abc"],
    &["FCALL_RO", "f", "abc"],
    &["FCALL", "f", "2", "k"],
    &["FCALL", "f", "0"],
];

fn replies(srv: &Server) -> Vec<String> {
    let mut c = srv.raw();
    SCRIPT
        .iter()
        .map(|args| format!("{args:?} -> {:?}", c.cmd(args)))
        .collect()
}

e2e!(
    ringkv_only fn lolwut_and_hello_give_valkeys_version(b) {
        let ours = b.server();
        let theirs = Backend::Valkey.server();
        for args in [&["LOLWUT", "VERSION", "1"][..], &["LOLWUT", "VERSION", "9"]] {
            let text = ours.raw().cmd(args).text();
            assert!(text.starts_with("Redis ver. 8.1."), "{text}");
            assert_eq!(text, theirs.raw().cmd(args).text(), "{args:?}");
        }
        // Clients gate features on HELLO's `version` and INFO's
        // `valkey_version` (valkey-py's own test suite reads the latter).
        let hello_version = |s: &Server| match s.raw().cmd(&["HELLO", "2"]) {
            Reply::Array(items) => items
                .iter()
                .position(|r| r.text() == "version")
                .map(|i| items[i + 1].text()),
            other => panic!("HELLO: {other:?}"),
        };
        assert_eq!(hello_version(&ours), hello_version(&theirs));
        let info_version =
            |s: &Server| info_field(&s.raw().cmd(&["INFO", "server"]).text(), "valkey_version");
        assert_eq!(info_version(&ours), info_version(&theirs));
    }
);

e2e!(
    ringkv_only fn single_client_edges_answer_as_valkey(b) {
        let ours = replies(&b.server());
        let theirs = replies(&Backend::Valkey.server());
        for (o, t) in ours.iter().zip(&theirs) {
            assert_eq!(o, t);
        }
    }
);

/// The multi-client scenarios, as (what, reply) pairs.
fn scenarios(srv: &Server) -> Vec<(String, Reply)> {
    let mut out = Vec::new();
    let (mut a, mut b) = (srv.raw(), srv.raw());
    // SWAPDB brings a list to a client blocked in the other database.
    a.cmd(&["SELECT", "1"]);
    a.send(&ringkv_e2e::raw::encode_str(&["BLPOP", "l", "5"]));
    std::thread::sleep(Duration::from_millis(100));
    b.cmd(&["RPUSH", "l", "x", "y"]);
    out.push(("swapdb".into(), b.cmd(&["SWAPDB", "0", "1"])));
    out.push(("blpop after swapdb".into(), a.read_reply()));
    // PUBLISH to its own channel inside MULTI (RESP3): the EXEC array,
    // then the message.
    let mut s = srv.raw();
    s.cmd(&["HELLO", "3"]);
    s.cmd(&["SUBSCRIBE", "ch"]);
    s.cmd(&["MULTI"]);
    s.cmd(&["PUBLISH", "ch", "m"]);
    out.push(("exec".into(), s.cmd(&["EXEC"])));
    out.push(("then".into(), s.read_reply()));
    // BLMOVE whose destination has the wrong type when data arrives.
    b.cmd(&["SET", "dst", "str"]);
    let mut c = srv.raw();
    c.send(&ringkv_e2e::raw::encode_str(&[
        "BLMOVE", "src", "dst", "LEFT", "RIGHT", "5",
    ]));
    std::thread::sleep(Duration::from_millis(100));
    b.cmd(&["RPUSH", "src", "v"]);
    out.push(("blmove".into(), c.read_reply()));
    out.push(("src kept".into(), b.cmd(&["LRANGE", "src", "0", "-1"])));
    // A blocking command that timed out counts as a call.
    b.cmd(&["CONFIG", "RESETSTAT"]);
    b.cmd(&["BLPOP", "none", "0.01"]);
    let stats = b.cmd(&["INFO", "commandstats"]).text();
    let calls = stats
        .lines()
        .find(|l| l.starts_with("cmdstat_blpop:"))
        .and_then(|l| l.split(',').next())
        .unwrap_or("")
        .to_string();
    out.push(("blpop calls".into(), Reply::Status(calls)));
    out
}

e2e!(
    ringkv_only fn multi_client_edges_answer_as_valkey(b) {
        let ours = scenarios(&b.server());
        let theirs = scenarios(&Backend::Valkey.server());
        assert_eq!(ours, theirs);
    }
);
