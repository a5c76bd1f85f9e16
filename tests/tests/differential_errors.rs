//! Differential test of refusals against Valkey 8.1: every command and
//! subcommand Valkey lists (COMMAND LIST), sent with zero to four
//! arguments drawn from a small pool of keys, numbers and option words, to
//! ringkv and to Valkey; where either answers with an error, both answers
//! must be the same bytes. This is what a client sees when it gets a
//! command wrong: the arity check, unknown subcommands, which argument is
//! judged first, and the error texts.
//!
//! Left out: commands that block, change the connection or the server
//! (SUBSCRIBE, MULTI, CLIENT KILL, CONFIG SET, SHUTDOWN, ...), and
//! HyperLogLog writes (a value APPEND corrupted is refused by ringkv's
//! PFADD and updated by Valkey's; README says so). SCRIPT DEBUG and SCRIPT
//! HELP's mention of it are not in ringkv (README).

use ringkv_e2e::raw::Raw;
use ringkv_e2e::{Backend, Reply, Rng, e2e};

const COMMANDS: usize = 6000;

const SKIP: &[&str] = &[
    "shutdown",
    "debug",
    "monitor",
    "subscribe",
    "psubscribe",
    "ssubscribe",
    "unsubscribe",
    "punsubscribe",
    "sunsubscribe",
    "sync",
    "psync",
    "replicaof",
    "slaveof",
    "failover",
    "save",
    "bgsave",
    "bgrewriteaof",
    "migrate",
    "wait",
    "waitaof",
    "blpop",
    "brpop",
    "blmove",
    "brpoplpush",
    "blmpop",
    "bzpopmin",
    "bzpopmax",
    "bzmpop",
    "xread",
    "xreadgroup",
    "quit",
    "reset",
    "hello",
    "auth",
    "multi",
    "exec",
    "discard",
    "watch",
    "flushall",
    "flushdb",
    "swapdb",
    "select",
    "readonly",
    "readwrite",
    "replconf",
    "lolwut",
    "pfadd",
    "pfmerge",
    "pfcount",
    "pfdebug",
    "pfselftest",
    "client|pause",
    "client|kill",
    "client|reply",
    "client|tracking",
    "config|set",
    "config|rewrite",
    "config|resetstat",
    "acl|setuser",
    "acl|deluser",
    "acl|load",
    "acl|save",
    "script|kill",
    "script|flush",
    "script|debug",
    "script|help",
    "function|kill",
    "function|flush",
    "function|restore",
    "module|load",
    "module|loadex",
];

/// Arguments: the keys the set-up writes (one per type), and words and
/// numbers commands parse.
const POOL: &[&str] = &[
    "k",
    "l",
    "h",
    "s",
    "z",
    "x",
    "0",
    "1",
    "-1",
    "abc",
    "",
    "10",
    "1.5",
    "NX",
    "XX",
    "COUNT",
    "LIMIT",
    "WITHSCORES",
    "GET",
    "EX",
    "3",
    "*",
    "$",
    "BYLEX",
    "-inf",
    "+inf",
    "[a",
    "MATCH",
    "TYPE",
    "string",
    "2",
];

const SETUP: &[&[&str]] = &[
    &["SET", "k", "v"],
    &["RPUSH", "l", "a", "b"],
    &["HSET", "h", "f", "v"],
    &["SADD", "s", "a"],
    &["ZADD", "z", "1", "a"],
    &["XADD", "x", "1-1", "f", "v"],
];

/// Put the keys back as they were, in one write.
fn set_up(c: &mut Raw) {
    let mut req = Vec::new();
    for w in SETUP {
        req.extend(ringkv_e2e::raw::encode_str(&["DEL", w[1]]));
        req.extend(ringkv_e2e::raw::encode_str(w));
    }
    c.send(&req);
    for _ in 0..SETUP.len() * 2 {
        c.read_reply();
    }
}

fn is_error(r: &Reply) -> bool {
    matches!(r, Reply::Error(_))
}

e2e!(
    ringkv_only fn refusals_answer_as_valkey(b) {
        let ours = b.server();
        let theirs = Backend::Valkey.server();
        let (mut a, mut v) = (ours.raw(), theirs.raw());
        let Reply::Array(names) = v.cmd(&["COMMAND", "LIST"]) else {
            panic!("COMMAND LIST")
        };
        let mut names: Vec<String> = names.iter().map(Reply::text).collect();
        names.sort();
        names.retain(|n| !SKIP.contains(&n.as_str()) && !SKIP.contains(&n.split('|').next().unwrap()));
        assert!(names.len() > 250, "{} commands", names.len());
        for c in [&mut a, &mut v] {
            set_up(c);
        }
        let mut rng = Rng::new(2026);
        let (mut refused, mut differ) = (0, Vec::new());
        for _ in 0..COMMANDS {
            let name = rng.pick(&names).clone();
            let mut args: Vec<String> = name.split('|').map(str::to_string).collect();
            for _ in 0..rng.below(5) {
                args.push(rng.pick(POOL).to_string());
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let (x, y) = (a.cmd(&args), v.cmd(&args));
            if is_error(&x) || is_error(&y) {
                refused += 1;
                if x != y {
                    differ.push(format!("{args:?}\n  ringkv: {x:?}\n  valkey: {y:?}"));
                }
            }
            for c in [&mut a, &mut v] {
                set_up(c);
            }
        }
        assert!(differ.is_empty(), "{} of {refused} refusals differ:\n{}", differ.len(), differ.join("\n"));
        assert!(refused > COMMANDS / 3, "{refused} refusals");
    }
);
