//! The command table as clients read it, against Valkey 8.1: COMMAND INFO
//! and COMMAND DOCS (RESP2 and RESP3) of every command and subcommand
//! ringkv lists, and COMMAND GETKEYS / GETKEYSANDFLAGS of representative
//! invocations of every key-taking command (movable keys, variable flags
//! and the errors included). Every difference is reported at once, naming
//! the command. Commands and subcommands Valkey has and ringkv does not
//! are left out (COMMAND COUNT differs); a key-taking command of ringkv
//! without an invocation below is itself reported.

use ringkv_e2e::{Backend, Raw, Reply, Server, e2e};
use std::collections::BTreeSet;

/// Invocations for COMMAND GETKEYS / GETKEYSANDFLAGS, space-separated.
const INVOCATIONS: &[&str] = &[
    // strings
    "get k",
    "set k v",
    "set k v GET",
    "set k v nx get ex 10",
    "set k v EX 10",
    "setnx k v",
    "setex k 10 v",
    "psetex k 10 v",
    "getex k PERSIST",
    "getdel k",
    "getset k v",
    "mget a b c",
    "mset a 1 b 2",
    "mset a 1 b",
    "msetnx a 1 b 2",
    "incr k",
    "decr k",
    "incrby k 2",
    "decrby k 2",
    "incrbyfloat k 1.5",
    "append k v",
    "strlen k",
    "getrange k 0 1",
    "substr k 0 1",
    "setrange k 0 v",
    // bitmaps
    "setbit k 1 1",
    "getbit k 1",
    "bitcount k",
    "bitpos k 1",
    "bitop AND d a b",
    "bitfield k GET u8 0",
    "bitfield k GET u8 0 OVERFLOW SAT GET u8 1",
    "bitfield k GET u8 0 SET u8 0 1",
    "bitfield k INCRBY u8 0 1",
    "bitfield k",
    "bitfield k GET u8",
    "bitfield_ro k GET u8 0",
    // hyperloglog
    "pfadd k a b",
    "pfcount a b",
    "pfmerge d a b",
    "pfdebug getreg k",
    "restore-asking k 0 payload",
    // keys
    "del a b",
    "unlink a b",
    "exists a b",
    "touch a b",
    "type k",
    "copy a b",
    "copy a b DB 1 REPLACE",
    "move k 1",
    "rename a b",
    "renamenx a b",
    "dump k",
    "restore k 0 payload",
    "migrate h 1 k 0 5",
    "migrate h 1 k 0 5 COPY AUTH2 u p",
    "migrate h 1 k 0 5 KEYS a b",
    "migrate h 1 k 0 5 AUTH keys REPLACE",
    "migrate h 1 k 0 5 AUTH2 keys keys KEYS a",
    "expire k 10",
    "expireat k 10",
    "pexpire k 10",
    "pexpireat k 10",
    "expiretime k",
    "pexpiretime k",
    "ttl k",
    "pttl k",
    "persist k",
    "object encoding k",
    "object freq k",
    "object idletime k",
    "object refcount k",
    "object nosuch k",
    "memory usage k",
    "memory usage k SAMPLES 5",
    "watch a b",
    // lists
    "lpush k a b",
    "rpush k a",
    "lpushx k a",
    "rpushx k a",
    "lpop k",
    "rpop k 2",
    "llen k",
    "lrange k 0 -1",
    "lindex k 0",
    "lset k 0 v",
    "linsert k BEFORE p v",
    "lrem k 0 v",
    "ltrim k 0 1",
    "lpos k v",
    "lmove a b LEFT RIGHT",
    "rpoplpush a b",
    "blmove a b LEFT RIGHT 0",
    "brpoplpush a b 0",
    "blpop a b 0",
    "brpop a 0",
    "lmpop 2 a b LEFT",
    "lmpop 2 a b LEFT COUNT 3",
    "lmpop 0 a LEFT",
    "lmpop 3 a b LEFT",
    "lmpop -1 a LEFT",
    "lmpop x a LEFT",
    "lmpop 2abc a b LEFT",
    "blmpop 0 2 a b LEFT",
    "blmpop 0 5 a b LEFT",
    // hashes
    "hset k f v",
    "hset k f v g w",
    "hsetnx k f v",
    "hmset k f v",
    "hget k f",
    "hmget k f g",
    "hdel k f",
    "hlen k",
    "hstrlen k f",
    "hexists k f",
    "hkeys k",
    "hvals k",
    "hgetall k",
    "hincrby k f 1",
    "hincrbyfloat k f 1.5",
    "hrandfield k 2",
    "hscan k 0",
    // sets
    "sadd k a",
    "srem k a",
    "smembers k",
    "sismember k a",
    "smismember k a b",
    "scard k",
    "spop k",
    "srandmember k 2",
    "smove a b m",
    "sinter a b",
    "sunion a b",
    "sdiff a b",
    "sinterstore d a b",
    "sunionstore d a b",
    "sdiffstore d a b",
    "sintercard 2 a b",
    "sintercard 2 a b LIMIT 1",
    "sintercard 1 a b",
    "sintercard 3 a b",
    "sintercard 0 a",
    "sscan k 0",
    // sorted sets
    "zadd k 1 m",
    "zincrby k 1 m",
    "zrem k m",
    "zcard k",
    "zscore k m",
    "zmscore k m n",
    "zrank k m",
    "zrevrank k m",
    "zcount k 0 1",
    "zlexcount k - +",
    "zrange k 0 -1",
    "zrangestore d k 0 -1",
    "zrevrange k 0 -1",
    "zrangebyscore k 0 1",
    "zrevrangebyscore k 1 0",
    "zrangebylex k - +",
    "zrevrangebylex k + -",
    "zpopmin k",
    "zpopmax k 2",
    "bzpopmin a b 0",
    "bzpopmax a 0",
    "zmpop 2 a b MIN",
    "zmpop 1 a MAX COUNT 2",
    "zmpop 0 a MIN",
    "bzmpop 0 2 a b MIN",
    "zremrangebyrank k 0 1",
    "zremrangebyscore k 0 1",
    "zremrangebylex k - +",
    "zunion 2 a b",
    "zunion 2 a b WEIGHTS 1 2 WITHSCORES",
    "zinter 1 a",
    "zdiff 2 a b",
    "zunion 3 a b",
    "zunion 0 a",
    "zunion x a",
    "zunionstore d 2 a b",
    "zunionstore d 2 a b AGGREGATE MAX",
    "zinterstore d 1 a",
    "zdiffstore d 2 a b",
    "zunionstore d 3 a b",
    "zunionstore d 2abc a b",
    "zintercard 2 a b",
    "zintercard 2 a b LIMIT 3",
    "zrandmember k 2",
    "zscan k 0",
    // geo
    "geoadd k 1 2 m",
    "geodist k a b km",
    "geohash k a b",
    "geopos k a",
    "georadius k 0 0 1 m",
    "georadius k 0 0 1 m WITHDIST COUNT 2 ANY store d",
    "georadius k 0 0 1 m STOREDIST d",
    "georadius k 0 0 1 m STORE d STOREDIST e",
    "georadius k 0 0 1 m STOREDIST e STORE d STORE f",
    "georadius k 0 0 1 m STORE",
    "georadius k 0 0 1 STORE d",
    "georadius store 0 0 1 m",
    "georadius k 0 0 1",
    "georadius_ro k 0 0 1 m",
    "georadius_ro k 0 0 1 m STORE d",
    "georadiusbymember k m 1 km",
    "georadiusbymember k m 1 km STORE d",
    "georadiusbymember k m 1 km ASC STOREDIST d",
    "georadiusbymember k m 1 STORE d",
    "georadiusbymember k m 1",
    "georadiusbymember_ro k m 1 km WITHCOORD",
    "geosearch k FROMMEMBER m BYRADIUS 1 km",
    "geosearch k FROMLONLAT 0 0 BYBOX 1 2 m STORE d",
    "geosearchstore d k FROMMEMBER m BYRADIUS 1 km",
    "geosearchstore d k FROMMEMBER m BYRADIUS 1 km STOREDIST",
    "geosearchstore d k FROMMEMBER m BYRADIUS",
    // sort and lcs
    "sort k",
    "sort k STORE d",
    "sort k LIMIT 0 1 store d",
    "sort k BY w_* GET # GET h_*->f DESC ALPHA STORE d",
    "sort k STORE a STORE b",
    "sort k STORE",
    "sort k LIMIT store x STORE d",
    "sort k GET store d",
    "sort k BY store d",
    "sort k store limit 1 2",
    "sort k store by d",
    "sort store",
    "sort",
    "sort_ro k",
    "sort_ro k BY w_* GET # LIMIT 0 1",
    "sort_ro k STORE d",
    "lcs a b",
    "lcs a b IDX MINMATCHLEN 2 WITHMATCHLEN",
    "lcs a",
    // streams
    "xadd k * f v",
    "xadd k NOMKSTREAM MAXLEN ~ 10 LIMIT 5 1-* f v g w",
    "xadd k",
    "xrange k - +",
    "xrevrange k + - COUNT 1",
    "xlen k",
    "xdel k 1-1 2-2",
    "xtrim k MINID = 0-1",
    "xsetid k 1-1 ENTRIESADDED 1 MAXDELETEDID 0-1",
    "xread STREAMS a 0",
    "xread COUNT 1 BLOCK 0 STREAMS a b 0 0",
    "xread STREAMS a b c 0 0 0",
    "xread STREAMS a b 0",
    "xread streams streams a 0",
    "xread COUNT 1 STREAMS a",
    "xread COUNT 1 STREAMS",
    "xread COUNT 2 a b",
    "xreadgroup GROUP g c STREAMS a 0",
    "xreadgroup GROUP g c COUNT 1 BLOCK 10 NOACK STREAMS a b > >",
    "xreadgroup GROUP streams c STREAMS a >",
    "xreadgroup GROUP g c STREAMS a",
    "xreadgroup GROUP g c COUNT 1 a >",
    "xack k g 1-1 2-2",
    "xpending k g",
    "xpending k g IDLE 10 - + 10 c",
    "xclaim k g c 10 1-1 2-2 JUSTID",
    "xautoclaim k g c 10 0-0 COUNT 1",
    "xinfo stream k FULL COUNT 1",
    "xinfo groups k",
    "xinfo consumers k g",
    "xinfo help",
    "xinfo nosuch k",
    "xgroup create k g $ MKSTREAM ENTRIESREAD 1",
    "xgroup createconsumer k g c",
    "xgroup delconsumer k g c",
    "xgroup destroy k g",
    "xgroup setid k g 0",
    "xgroup help",
    "xgroup",
    // scripting and functions
    "eval s 0",
    "eval s 2 a b c",
    "eval s 3 a b",
    "eval s x a",
    "eval_ro s 1 a",
    "evalsha 0123456789012345678901234567890123456789 1 a",
    "evalsha_ro 0123456789012345678901234567890123456789 0",
    "fcall f 2 a b",
    "fcall f 0",
    "fcall_ro f 1 a x",
    // pub/sub: channels are not keys
    "spublish ch m",
    "ssubscribe a b",
    "sunsubscribe a",
    // no keys, unknown, arity
    "ping",
    "config get maxmemory",
    "config nosuch",
    "config",
    "nosuchcommand k",
    "get",
    "get a b",
    "set k",
];

/// A command's name in a COMMAND INFO entry.
fn info_name(entry: &Reply) -> String {
    match entry {
        Reply::Array(e) => e[0].text(),
        other => panic!("not an INFO entry: {other:?}"),
    }
}

/// A COMMAND INFO entry with its subcommands keyed by name, sorted (their
/// order is Valkey's hash order) and cut to the ones ringkv has.
fn normalize_info(entry: &Reply, ours: &BTreeSet<String>) -> Reply {
    let Reply::Array(e) = entry else {
        return entry.clone();
    };
    let mut e = e.clone();
    if e.len() == 10 {
        let subs = match &e[9] {
            Reply::Array(s) | Reply::Set(s) => s.clone(),
            other => panic!("subcommands: {other:?}"),
        };
        let mut subs: Vec<Reply> = subs
            .iter()
            .filter(|s| ours.contains(&info_name(s)))
            .map(|s| normalize_info(s, ours))
            .collect();
        subs.sort_by_key(info_name);
        // Valkey answers an empty set without subcommands, an array with;
        // when all of Valkey's are unknown to ringkv, the two compare equal.
        e[9] = if subs.is_empty() {
            Reply::Set(vec![])
        } else {
            Reply::Array(subs)
        };
    }
    Reply::Array(e)
}

/// A map as pairs, from a RESP3 map or a RESP2 flat array.
fn pairs(r: &Reply) -> Vec<(Reply, Reply)> {
    match r {
        Reply::Map(m) => m.clone(),
        Reply::Array(a) => a.chunks(2).map(|c| (c[0].clone(), c[1].clone())).collect(),
        other => panic!("not a map: {other:?}"),
    }
}

/// Pairs back in the shape they came in.
fn same_shape(like: &Reply, p: Vec<(Reply, Reply)>) -> Reply {
    match like {
        Reply::Map(_) => Reply::Map(p),
        _ => Reply::Array(p.into_iter().flat_map(|(k, v)| [k, v]).collect()),
    }
}

/// A COMMAND DOCS reply (name -> doc) with each doc's subcommands sorted
/// by name and cut to ringkv's, and an empty subcommands entry dropped.
fn normalize_docs(reply: &Reply, ours: &BTreeSet<String>) -> Reply {
    let mut cmds: Vec<(Reply, Reply)> = pairs(reply)
        .into_iter()
        .filter(|(name, _)| ours.contains(&name.text()))
        .map(|(name, doc)| {
            let fields = pairs(&doc)
                .into_iter()
                .filter_map(|(k, v)| {
                    if k.text() != "subcommands" {
                        return Some((k, v));
                    }
                    let subs = normalize_docs(&v, ours);
                    (!pairs(&subs).is_empty()).then_some((k, subs))
                })
                .collect();
            (name, same_shape(&doc, fields))
        })
        .collect();
    cmds.sort_by_key(|(name, _)| name.text());
    same_shape(reply, cmds)
}

fn hello(srv: &Server, proto: u8) -> Raw {
    let mut c = srv.raw();
    if proto == 3 {
        c.cmd(&["HELLO", "3"]);
    }
    c
}

fn command_list(c: &mut Raw) -> Vec<String> {
    match c.cmd(&["COMMAND", "LIST"]) {
        Reply::Array(a) | Reply::Set(a) => a.iter().map(Reply::text).collect(),
        other => panic!("COMMAND LIST: {other:?}"),
    }
}

/// Does ringkv's COMMAND INFO entry have a key spec (a key-taking command,
/// or a channel-taking one)?
fn has_key_specs(entry: &Reply) -> bool {
    matches!(entry, Reply::Array(e) if matches!(&e[8], Reply::Array(k) | Reply::Set(k) if !k.is_empty()))
}

e2e!(
    ringkv_only fn command_info_and_docs_answer_as_valkey(b) {
        let ours_srv = b.server();
        let theirs_srv = Backend::Valkey.server();
        let names = command_list(&mut ours_srv.raw());
        let ours_set: BTreeSet<String> = names.iter().cloned().collect();
        let mut diffs = Vec::new();
        for proto in [2, 3] {
            let (mut o, mut t) = (hello(&ours_srv, proto), hello(&theirs_srv, proto));
            for name in &names {
                let info = |c: &mut Raw| match c.cmd(&["COMMAND", "INFO", name]) {
                    Reply::Array(a) => normalize_info(&a[0], &ours_set),
                    other => other,
                };
                let (oi, ti) = (info(&mut o), info(&mut t));
                if oi != ti {
                    diffs.push(format!(
                        "COMMAND INFO {name} (RESP{proto}):\n  ringkv: {oi:?}\n  valkey: {ti:?}"
                    ));
                }
                let docs = |c: &mut Raw| normalize_docs(&c.cmd(&["COMMAND", "DOCS", name]), &ours_set);
                let (od, td) = (docs(&mut o), docs(&mut t));
                if od != td {
                    diffs.push(format!(
                        "COMMAND DOCS {name} (RESP{proto}):\n  ringkv: {od:?}\n  valkey: {td:?}"
                    ));
                }
            }
        }
        assert!(
            diffs.is_empty(),
            "{} differences from Valkey 8.1:\n{}",
            diffs.len(),
            diffs.join("\n")
        );
    }
);

e2e!(
    ringkv_only fn command_getkeys_answers_as_valkey(b) {
        let ours_srv = b.server();
        let theirs_srv = Backend::Valkey.server();
        let mut diffs = Vec::new();
        // Every key-taking command of ringkv has an invocation here.
        let mut o = ours_srv.raw();
        let covered: BTreeSet<&str> = INVOCATIONS
            .iter()
            .map(|line| line.split(' ').next().unwrap())
            .collect();
        for name in command_list(&mut o) {
            let top = name.split('|').next().unwrap().to_string();
            let entry = match o.cmd(&["COMMAND", "INFO", &name]) {
                Reply::Array(a) => a[0].clone(),
                other => panic!("COMMAND INFO {name}: {other:?}"),
            };
            if has_key_specs(&entry) && !covered.contains(top.as_str()) {
                diffs.push(format!("no GETKEYS invocation for {name}"));
            }
        }
        for proto in [2, 3] {
            let (mut o, mut t) = (hello(&ours_srv, proto), hello(&theirs_srv, proto));
            for line in INVOCATIONS {
                for sub in ["GETKEYS", "GETKEYSANDFLAGS"] {
                    let mut args = vec!["COMMAND", sub];
                    args.extend(line.split(' '));
                    let (or, tr) = (o.cmd(&args), t.cmd(&args));
                    if or != tr {
                        diffs.push(format!(
                            "COMMAND {sub} {line} (RESP{proto}):\n  ringkv: {or:?}\n  valkey: {tr:?}"
                        ));
                    }
                }
            }
        }
        assert!(
            diffs.is_empty(),
            "{} differences from Valkey 8.1:\n{}",
            diffs.len(),
            diffs.join("\n")
        );
    }
);
