//! The write-effects stream: what each command emits for the AOF and
//! replicas, checked against what Valkey 8.1 writes to its AOF for the
//! same commands.
//!
//! Checked against valkey-server 8.1 (`--appendonly yes`, its
//! `*.incr.aof` read back), default config unless said:
//! * expiries: SET EX/PX/EXAT (also with NX, XX, GET), SETEX, PSETEX →
//!   `SET k v PXAT ms` (NX/XX/GET dropped; PXAT and KEEPTTL as sent);
//!   SET IFEQ → `SET k v [KEEPTTL|PXAT ms]` (Valkey 8.1 writes IFEQ as
//!   sent unless it rewrites an expiry; ringkv always drops it, decided
//!   on the primary, so that replicas and loaders before 8.1 accept it);
//!   EXPIRE, PEXPIRE, EXPIREAT → `PEXPIREAT k ms` + options as sent
//!   (PEXPIREAT as sent); GETEX EX/PX/EXAT/PXAT → `PEXPIREAT`, GETEX
//!   PERSIST → `PERSIST`; a time already past → `UNLINK k` (`DEL` with
//!   lazyfree-lazy-expire no), nothing when the key was missing; RESTORE
//!   with a relative TTL → absolute + `ABSTTL`, past → UNLINK/DEL
//!   (lazyfree-lazy-server-del);
//! * GETDEL → `DEL`, GETSET → `SET`, INCRBYFLOAT → `SET k r KEEPTTL`,
//!   HINCRBYFLOAT → `HSET k f r`;
//! * SPOP → `SREM k m...` (1024 members per SREM, several wrapped in
//!   MULTI), the whole set → `UNLINK`/`DEL`;
//! * BLPOP/BRPOP → `LPOP/RPOP k`, BLMOVE → `LMOVE` (sides as sent),
//!   BRPOPLPUSH → `RPOPLPUSH`, LMPOP/BLMPOP → `LPOP/RPOP k n` (n popped),
//!   BZPOPMIN/MAX → `ZPOPMIN/MAX k`, ZMPOP/BZMPOP → `ZPOPMIN/MAX k n`;
//!   a client served later goes after the push that served it;
//! * nothing for: SETBIT to the same bit, BITFIELD writing the same
//!   value, LTRIM keeping everything, EXPIRE on a missing key or refused
//!   by NX/XX/GT/LT, PERSIST without TTL, SET NX on an existing key,
//!   PFCOUNT with a valid cache, OBJECT FREQ, failing commands;
//! * as sent: DEL/UNLINK of several keys, COPY (DB), MOVE, RENAME(NX),
//!   SWAPDB (even of a database with itself), FLUSHDB/FLUSHALL ASYNC,
//!   SETRANGE, APPEND, MSETNX, SETNX, HSETNX, ZADD INCR, ZINCRBY, LMOVE,
//!   SMOVE, *STORE, PFADD, PFMERGE, PFCOUNT that updates its cache,
//!   BITFIELD, BITOP, LPOP/ZPOPMIN with a count.

mod core_util;
use core_util::*;
use ringkv_engine::Engine;

#[test]
fn writes_are_emitted_as_sent_after_a_select_and_reads_emit_nothing() {
    let mut e = engine();
    let c = connect(&mut e);
    let mut r = e.attach_effects();
    cmd(&mut e, c, &["set", "a", "1"]);
    cmd(&mut e, c, &["get", "a"]);
    cmd(&mut e, c, &["del", "nokey"]);
    cmd(&mut e, c, &["select", "3"]);
    cmd(&mut e, c, &["sadd", "s", "x"]);
    cmd(&mut e, c, &["sadd", "s", "x"]);
    assert_eq!(
        effects(&mut e, &mut r),
        vec![
            v(&["SELECT", "0"]),
            v(&["set", "a", "1"]),
            v(&["SELECT", "3"]),
            v(&["sadd", "s", "x"]),
        ]
    );
}

#[test]
fn a_transaction_with_several_writes_is_wrapped_and_one_write_is_not() {
    let mut e = engine();
    let c = connect(&mut e);
    let mut r = e.attach_effects();
    for w in [
        &["multi"][..],
        &["set", "m", "1"],
        &["incr", "m"],
        &["get", "m"],
        &["exec"],
    ] {
        cmd(&mut e, c, w);
    }
    for w in [&["multi"][..], &["set", "m1", "1"], &["exec"]] {
        cmd(&mut e, c, w);
    }
    assert_eq!(
        effects(&mut e, &mut r),
        vec![
            v(&["MULTI"]),
            v(&["SELECT", "0"]),
            v(&["set", "m", "1"]),
            v(&["incr", "m"]),
            v(&["EXEC"]),
            v(&["set", "m1", "1"]),
        ]
    );
}

#[test]
fn flushall_of_an_empty_server_is_still_emitted() {
    let mut e = engine();
    let c = connect(&mut e);
    let mut r = e.attach_effects();
    cmd(&mut e, c, &["flushall"]);
    cmd(&mut e, c, &["flushdb"]);
    assert_eq!(
        effects(&mut e, &mut r),
        vec![v(&["SELECT", "0"]), v(&["flushall"]), v(&["flushdb"])]
    );
}

#[test]
fn a_key_found_expired_is_unlinked_before_the_command_that_found_it() {
    let mut e = engine();
    e.pin_clock(Some(1_000_000));
    let c = connect(&mut e);
    cmd(&mut e, c, &["set", "k", "v", "px", "10"]);
    let mut r = e.attach_effects();
    e.pin_clock(Some(1_000_100));
    cmd(&mut e, c, &["get", "k"]);
    cmd(&mut e, c, &["set", "k2", "v", "px", "10"]);
    e.pin_clock(Some(1_000_200));
    cmd(&mut e, c, &["append", "k2", "x"]);
    cmd(&mut e, c, &["set", "k3", "v", "px", "10"]);
    e.pin_clock(Some(1_000_300));
    for w in [
        &["multi"][..],
        &["set", "k4", "1"],
        &["append", "k3", "y"],
        &["exec"],
    ] {
        cmd(&mut e, c, w);
    }
    let got = effects(&mut e, &mut r);
    let n = got.len();
    assert_eq!(got[..2], [v(&["SELECT", "0"]), v(&["UNLINK", "k"])]);
    assert_eq!(
        got[n - 8..n - 6],
        [v(&["UNLINK", "k2"]), v(&["append", "k2", "x"])]
    );
    // Inside a transaction too, as Valkey 8.1 writes it: the deletion
    // goes out on its own, ahead of the MULTI.
    assert_eq!(
        got[n - 5..],
        [
            v(&["UNLINK", "k3"]),
            v(&["MULTI"]),
            v(&["set", "k4", "1"]),
            v(&["append", "k3", "y"]),
            v(&["EXEC"])
        ]
    );
}

/// Run each command (as words) on client `c`.
fn run(e: &mut Engine, c: ringkv_engine::ClientId, cmds: &[&[&str]]) {
    for w in cmds {
        cmd(e, c, w);
    }
}

/// What `cmds`, sent by one client of a fresh engine whose clock reads
/// 1,000 s, emit.
fn effects_of(cmds: &[&[&str]]) -> Vec<Vec<String>> {
    let mut e = engine();
    e.pin_clock(Some(1_000_000));
    let c = connect(&mut e);
    let mut r = e.attach_effects();
    run(&mut e, c, cmds);
    effects(&mut e, &mut r)
}

#[test]
fn set_ifeq_is_emitted_without_its_condition() {
    assert_eq!(
        effects_of(&[
            &["set", "k", "v1"],
            &["set", "k", "v2", "ifeq", "v1"],
            &["set", "k", "v3", "ifeq", "nope"],
            &["set", "k", "v3", "ifeq", "v2", "get"],
            &["set", "k", "v4", "ifeq", "v3", "ex", "100"],
            &["set", "k", "v5", "ifeq", "v4", "keepttl"],
            &["set", "k", "v6", "IFEQ", "v5", "pxat", "9000000"],
        ]),
        vec![
            v(&["SELECT", "0"]),
            v(&["set", "k", "v1"]),
            v(&["SET", "k", "v2"]),
            v(&["SET", "k", "v3"]),
            v(&["SET", "k", "v4", "PXAT", "1100000"]),
            v(&["SET", "k", "v5", "KEEPTTL"]),
            v(&["SET", "k", "v6", "PXAT", "9000000"]),
        ]
    );
}

#[test]
fn relative_expiries_are_emitted_as_absolute_times() {
    let mut e = engine();
    e.pin_clock(Some(1_000_000));
    let c = connect(&mut e);
    let mut r = e.attach_effects();
    run(
        &mut e,
        c,
        &[
            &["set", "k", "v", "NX", "EX", "10"],
            &["set", "k", "v", "ex", "10", "get"],
            &["set", "k", "v", "XX", "px", "500"],
            &["set", "k", "v", "exat", "2000"],
            &["set", "k", "v", "pxat", "3000000"],
            &["set", "k", "v", "keepttl"],
            &["setex", "k", "100", "v"],
            &["psetex", "k", "100", "v"],
            &["set", "k", "v", "NX", "EX", "10"],
        ],
    );
    assert_eq!(
        effects(&mut e, &mut r),
        vec![
            v(&["SELECT", "0"]),
            v(&["SET", "k", "v", "PXAT", "1010000"]),
            v(&["SET", "k", "v", "PXAT", "1010000"]),
            v(&["SET", "k", "v", "PXAT", "1000500"]),
            v(&["SET", "k", "v", "PXAT", "2000000"]),
            v(&["set", "k", "v", "pxat", "3000000"]),
            v(&["set", "k", "v", "keepttl"]),
            v(&["SET", "k", "v", "PXAT", "1100000"]),
            v(&["SET", "k", "v", "PXAT", "1000100"]),
        ]
    );
    run(
        &mut e,
        c,
        &[
            &["set", "g", "1"],
            &["expire", "g", "100"],
            &["pexpire", "g", "100000"],
            &["expireat", "g", "5000"],
            &["pexpireat", "g", "6000000"],
            &["expire", "g", "100", "NX"],
            &["expire", "g", "200", "xx"],
            &["expire", "g", "300", "GT"],
            &["pexpire", "g", "100", "lt"],
            &["expire", "nokey", "10"],
            &["persist", "g"],
            &["persist", "g"],
        ],
    );
    assert_eq!(
        effects(&mut e, &mut r),
        vec![
            v(&["set", "g", "1"]),
            v(&["PEXPIREAT", "g", "1100000"]),
            v(&["PEXPIREAT", "g", "1100000"]),
            v(&["PEXPIREAT", "g", "5000000"]),
            v(&["pexpireat", "g", "6000000"]),
            v(&["PEXPIREAT", "g", "1200000", "xx"]),
            v(&["PEXPIREAT", "g", "1300000", "GT"]),
            v(&["PEXPIREAT", "g", "1000100", "lt"]),
            v(&["persist", "g"]),
        ]
    );
    run(
        &mut e,
        c,
        &[
            &["getex", "g", "EX", "100"],
            &["getex", "g", "px", "100"],
            &["getex", "g", "EXAT", "5000"],
            &["getex", "g", "PXAT", "6000000"],
            &["getex", "g", "persist"],
            &["getex", "g", "persist"],
            &["getex", "g"],
            &["getex", "nokey", "EX", "10"],
        ],
    );
    assert_eq!(
        effects(&mut e, &mut r),
        vec![
            v(&["PEXPIREAT", "g", "1100000"]),
            v(&["PEXPIREAT", "g", "1000100"]),
            v(&["PEXPIREAT", "g", "5000000"]),
            v(&["PEXPIREAT", "g", "6000000"]),
            v(&["PERSIST", "g"]),
        ]
    );
}

#[test]
fn an_expire_time_already_past_deletes_and_emits_the_deletion() {
    assert_eq!(
        effects_of(&[
            // Missing keys: nothing to delete, nothing emitted.
            &["set", "a", "v", "EXAT", "1"],
            &["set", "a", "v", "PXAT", "1", "GET"],
            &["set", "a", "1"],
            &["set", "a", "v", "EXAT", "1"],
            &["set", "a", "1"],
            &["expire", "a", "-1"],
            &["set", "a", "1"],
            &["pexpireat", "a", "1"],
            &["set", "a", "1"],
            &["getex", "a", "PXAT", "1"],
            &["config", "set", "lazyfree-lazy-expire", "no"],
            &["set", "a", "1"],
            &["expire", "a", "0"],
        ]),
        vec![
            v(&["SELECT", "0"]),
            v(&["set", "a", "1"]),
            v(&["UNLINK", "a"]),
            v(&["set", "a", "1"]),
            v(&["UNLINK", "a"]),
            v(&["set", "a", "1"]),
            v(&["UNLINK", "a"]),
            v(&["set", "a", "1"]),
            v(&["UNLINK", "a"]),
            v(&["set", "a", "1"]),
            v(&["DEL", "a"]),
        ]
    );
}

#[test]
fn string_and_hash_commands_emit_their_result() {
    assert_eq!(
        effects_of(&[
            &["set", "g", "1"],
            &["getset", "g", "2"],
            &["getdel", "g"],
            &["getdel", "g"],
            &["incrbyfloat", "f", "1.5"],
            &["incrbyfloat", "f", "1e3"],
            &["hincrbyfloat", "h", "x", "2.5"],
            &["hincrbyfloat", "h", "x", "0"],
            &["hincrby", "h", "y", "3"],
        ]),
        vec![
            v(&["SELECT", "0"]),
            v(&["set", "g", "1"]),
            v(&["SET", "g", "2"]),
            v(&["DEL", "g"]),
            v(&["SET", "f", "1.5", "KEEPTTL"]),
            v(&["SET", "f", "1001.5", "KEEPTTL"]),
            v(&["HSET", "h", "x", "2.5"]),
            v(&["HSET", "h", "x", "2.5"]),
            v(&["hincrby", "h", "y", "3"]),
        ]
    );
}

#[test]
fn restore_with_a_relative_ttl_is_emitted_with_absttl() {
    let mut e = engine();
    e.pin_clock(Some(1_000_000));
    let c = connect(&mut e);
    cmd(&mut e, c, &["rpush", "l", "a", "b"]);
    let (dump, _) = run_raw(&mut e, c, &encode(&[&["dump", "l"]]));
    let at = dump.iter().position(|&b| b == b'\n').unwrap() + 1;
    let payload = &dump[at..dump.len() - 2];
    let mut r = e.attach_effects();
    let restore = |e: &mut Engine, args: &[&[u8]]| {
        let mut req = Vec::new();
        let mut words: Vec<&[u8]> = vec![b"restore"];
        words.extend_from_slice(args);
        req.extend_from_slice(format!("*{}\r\n", words.len()).as_bytes());
        for w in words {
            req.extend_from_slice(format!("${}\r\n", w.len()).as_bytes());
            req.extend_from_slice(w);
            req.extend_from_slice(b"\r\n");
        }
        let (out, _) = run_raw(e, c, &req);
        assert_eq!(out, b"+OK\r\n");
    };
    restore(&mut e, &[b"r1", b"0", payload]);
    restore(&mut e, &[b"r2", b"5000", payload]);
    restore(&mut e, &[b"r2", b"6000", payload, b"replace"]);
    restore(&mut e, &[b"r3", b"9000000", payload, b"absttl"]);
    // Already expired: the key it replaces is deleted, a missing one is
    // not created (and nothing is emitted).
    restore(&mut e, &[b"r3", b"100", payload, b"replace", b"absttl"]);
    restore(&mut e, &[b"r4", b"100", payload, b"absttl"]);
    // Which of the two follows lazyfree-lazy-server-del (not -expire).
    cmd(
        &mut e,
        c,
        &["config", "set", "lazyfree-lazy-server-del", "no"],
    );
    restore(&mut e, &[b"r1", b"100", payload, b"replace", b"absttl"]);
    let p = String::from_utf8_lossy(payload).into_owned();
    assert_eq!(
        effects(&mut e, &mut r),
        vec![
            v(&["SELECT", "0"]),
            v(&["restore", "r1", "0", &p]),
            v(&["restore", "r2", "1005000", &p, "ABSTTL"]),
            v(&["restore", "r2", "1006000", &p, "replace", "ABSTTL"]),
            v(&["restore", "r3", "9000000", &p, "absttl"]),
            v(&["UNLINK", "r3"]),
            v(&["DEL", "r1"]),
        ]
    );
}

#[test]
fn blocking_and_multi_key_pops_served_at_once_emit_plain_pops() {
    let mut e = engine();
    let c = connect(&mut e);
    let mut r = e.attach_effects();
    run(
        &mut e,
        c,
        &[
            &["rpush", "l", "a", "b", "c", "d", "e", "f", "g"],
            &["blpop", "nokey", "l", "0"],
            &["brpop", "l", "0"],
            &["blmove", "l", "l2", "left", "RIGHT", "0"],
            &["brpoplpush", "l", "l2", "0"],
            &["blmpop", "0", "1", "l", "left", "count", "2"],
            &["lmpop", "2", "nokey", "l", "right"],
            &["lmpop", "1", "l2", "right", "count", "20"],
            &["lmpop", "1", "nokey", "left"],
            &["lpop", "l2", "2"],
            &[
                "zadd", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
            ],
            &["bzpopmin", "z", "0"],
            &["bzpopmax", "nokey", "z", "0"],
            &["zmpop", "1", "z", "min"],
            &["bzmpop", "0", "1", "z", "max", "count", "5"],
            &["zmpop", "1", "z", "min"],
        ],
    );
    assert_eq!(
        effects(&mut e, &mut r),
        vec![
            v(&["SELECT", "0"]),
            v(&["rpush", "l", "a", "b", "c", "d", "e", "f", "g"]),
            v(&["LPOP", "l"]),
            v(&["RPOP", "l"]),
            v(&["LMOVE", "l", "l2", "left", "RIGHT"]),
            v(&["RPOPLPUSH", "l", "l2"]),
            v(&["LPOP", "l", "2"]),
            v(&["RPOP", "l", "1"]),
            v(&["RPOP", "l2", "2"]),
            v(&[
                "zadd", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"
            ]),
            v(&["ZPOPMIN", "z"]),
            v(&["ZPOPMAX", "z"]),
            v(&["ZPOPMIN", "z", "1"]),
            v(&["ZPOPMAX", "z", "2"]),
        ]
    );
}

#[test]
fn a_client_served_later_emits_its_pop_after_the_push() {
    let mut e = engine();
    let w = connect(&mut e);
    let waiters: Vec<_> = (0..7).map(|_| connect(&mut e)).collect();
    let blocking: [&[&str]; 7] = [
        &["blpop", "w1", "0"],
        &["blmove", "w2", "dst", "right", "left", "0"],
        &["brpoplpush", "w3", "dst", "0"],
        &["blmpop", "0", "1", "w4", "left", "count", "5"],
        &["brpop", "w5", "0"],
        &["bzpopmin", "z1", "0"],
        &["bzmpop", "0", "1", "z2", "max", "count", "3"],
    ];
    for (c, words) in waiters.iter().zip(blocking) {
        assert_eq!(cmd(&mut e, *c, words), "", "{words:?} blocks");
    }
    let mut r = e.attach_effects();
    run(
        &mut e,
        w,
        &[
            &["rpush", "w1", "x", "y"],
            &["lpush", "w2", "x", "y"],
            &["rpush", "w3", "x", "y"],
            &["rpush", "w4", "x", "y", "z"],
            &["multi"],
            &["rpush", "w5", "1"],
            &["rpush", "w5", "2"],
            &["exec"],
            &["zadd", "z1", "1", "x", "2", "y"],
            &["zadd", "z2", "1", "x", "2", "y"],
        ],
    );
    assert_eq!(
        effects(&mut e, &mut r),
        vec![
            v(&["SELECT", "0"]),
            v(&["rpush", "w1", "x", "y"]),
            v(&["LPOP", "w1"]),
            v(&["lpush", "w2", "x", "y"]),
            v(&["LMOVE", "w2", "dst", "right", "left"]),
            v(&["rpush", "w3", "x", "y"]),
            v(&["RPOPLPUSH", "w3", "dst"]),
            v(&["rpush", "w4", "x", "y", "z"]),
            v(&["LPOP", "w4", "3"]),
            v(&["MULTI"]),
            v(&["rpush", "w5", "1"]),
            v(&["rpush", "w5", "2"]),
            v(&["EXEC"]),
            v(&["RPOP", "w5"]),
            v(&["zadd", "z1", "1", "x", "2", "y"]),
            v(&["ZPOPMIN", "z1"]),
            v(&["zadd", "z2", "1", "x", "2", "y"]),
            v(&["ZPOPMAX", "z2", "2"]),
        ]
    );
}

#[test]
fn a_blocking_pop_inside_a_transaction_is_emitted_inside_it() {
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["rpush", "l", "a"]);
    let mut r = e.attach_effects();
    run(
        &mut e,
        c,
        &[
            &["multi"],
            &["set", "k", "v", "EX", "100"],
            &["blpop", "l", "0"],
            // Nothing to pop: replies as a timeout, emits nothing.
            &["blpop", "l", "0"],
            &["exec"],
        ],
    );
    let got = effects(&mut e, &mut r);
    assert_eq!(got.len(), 5, "{got:?}");
    assert_eq!(got[0], v(&["MULTI"]));
    assert_eq!(got[2][..4], v(&["SET", "k", "v", "PXAT"])[..]);
    assert_eq!(got[3..], [v(&["LPOP", "l"]), v(&["EXEC"])]);
}

/// The members of a RESP2 array reply of bulk strings.
fn members(reply: &str) -> Vec<String> {
    let mut lines = reply.split("\r\n");
    let head = lines.next().unwrap();
    let n: usize = head[1..].parse().unwrap();
    (0..n)
        .map(|_| {
            lines.next().unwrap();
            lines.next().unwrap().to_string()
        })
        .collect()
}

#[test]
fn spop_emits_the_members_it_removed() {
    let mut e = engine();
    let c = connect(&mut e);
    let mut r = e.attach_effects();
    cmd(&mut e, c, &["sadd", "s", "a", "b", "c", "d", "e"]);
    let one = bulk_text(&cmd(&mut e, c, &["spop", "s"]));
    let two = members(&cmd(&mut e, c, &["spop", "s", "2"]));
    cmd(&mut e, c, &["spop", "s", "0"]);
    cmd(&mut e, c, &["spop", "nokey"]);
    cmd(&mut e, c, &["spop", "nokey", "3"]);
    // All that is left (or more): the key goes.
    cmd(&mut e, c, &["spop", "s", "2"]);
    cmd(&mut e, c, &["sadd", "s", "a"]);
    cmd(
        &mut e,
        c,
        &["config", "set", "lazyfree-lazy-server-del", "no"],
    );
    cmd(&mut e, c, &["spop", "s", "10"]);
    cmd(&mut e, c, &["sadd", "s", "a"]);
    cmd(&mut e, c, &["spop", "s"]);
    let mut srem2 = vec!["SREM", "s"];
    srem2.extend(two.iter().map(String::as_str));
    assert_eq!(
        effects(&mut e, &mut r),
        vec![
            v(&["SELECT", "0"]),
            v(&["sadd", "s", "a", "b", "c", "d", "e"]),
            v(&["SREM", "s", &one]),
            v(&srem2),
            v(&["UNLINK", "s"]),
            v(&["sadd", "s", "a"]),
            v(&["DEL", "s"]),
            v(&["sadd", "s", "a"]),
            v(&["SREM", "s", "a"]),
        ]
    );
}

#[test]
fn spop_of_many_members_emits_srem_batches_in_a_transaction() {
    let mut e = engine();
    let c = connect(&mut e);
    let all: Vec<String> = (0..3000).map(|i| format!("m{i}")).collect();
    let mut sadd = vec!["sadd", "big"];
    sadd.extend(all.iter().map(String::as_str));
    cmd(&mut e, c, &sadd);
    let mut r = e.attach_effects();
    let popped = members(&cmd(&mut e, c, &["spop", "big", "2500"]));
    let got = effects(&mut e, &mut r);
    let sizes: Vec<usize> = got.iter().map(Vec::len).collect();
    // As Valkey 8.1: 1024 members per SREM.
    assert_eq!(sizes, [1, 2, 1026, 1026, 454, 1]);
    assert_eq!((&got[0][0][..], &got[5][0][..]), ("MULTI", "EXEC"));
    let removed: Vec<String> = got[2..5]
        .iter()
        .flat_map(|c| {
            assert_eq!(c[..2], v(&["SREM", "big"]));
            c[2..].to_vec()
        })
        .collect();
    assert_eq!(removed, popped);
}

#[test]
fn writes_that_change_nothing_emit_nothing() {
    let mut e = engine();
    let c = connect(&mut e);
    let mut r = e.attach_effects();
    run(
        &mut e,
        c,
        &[
            &["setbit", "b", "7", "0"],
            &["setbit", "b", "7", "0"],
            &["setbit", "b", "7", "1"],
            &["setbit", "b", "7", "1"],
            &["setbit", "b", "15", "0"],
            &["bitfield", "bf", "set", "u8", "0", "255"],
            &["bitfield", "bf", "set", "u8", "0", "255", "get", "u8", "0"],
            &["bitfield", "bf", "incrby", "u8", "0", "0"],
            &[
                "bitfield", "bf", "overflow", "fail", "incrby", "u8", "0", "1",
            ],
            &["bitfield", "bf", "incrby", "u8", "0", "1"],
            &["bitfield", "bf", "get", "u8", "0"],
            &["rpush", "t", "a", "b", "c"],
            &["ltrim", "t", "0", "-1"],
            &["ltrim", "t", "-100", "100"],
            &["ltrim", "t", "1", "-1"],
            &["ltrim", "nokey", "0", "1"],
            &["set", "k", "v"],
            &["set", "k", "w", "NX"],
            &["expire", "k", "10", "XX"],
            &["expire", "nokey", "10"],
            &["persist", "k"],
            &["getex", "k", "persist"],
            &["rename", "k", "k"],
            &["sadd", "s", "a"],
            &["sadd", "s", "a"],
            &["srem", "s", "b"],
            &["smove", "s", "s2", "b"],
            &["zadd", "z", "1", "a"],
            &["zadd", "z", "1", "a"],
            &["zincrby", "z", "0", "a"],
            &["zremrangebyscore", "z", "5", "6"],
            &["hset", "h", "f", "v"],
            &["hsetnx", "h", "f", "w"],
            &["hdel", "h", "g"],
            &["pfadd", "p", "a"],
            &["pfadd", "p", "a"],
            &["setrange", "k", "0", ""],
            &["lpushx", "nokey", "a"],
            &["lpop", "t", "0"],
            &["spop", "s", "0"],
            &["msetnx", "k", "1", "k2", "2"],
        ],
    );
    assert_eq!(
        effects(&mut e, &mut r),
        vec![
            v(&["SELECT", "0"]),
            // Creating the string or growing it is a change.
            v(&["setbit", "b", "7", "0"]),
            v(&["setbit", "b", "7", "1"]),
            v(&["setbit", "b", "15", "0"]),
            v(&["bitfield", "bf", "set", "u8", "0", "255"]),
            v(&["bitfield", "bf", "incrby", "u8", "0", "1"]),
            v(&["rpush", "t", "a", "b", "c"]),
            v(&["ltrim", "t", "1", "-1"]),
            v(&["set", "k", "v"]),
            v(&["sadd", "s", "a"]),
            v(&["zadd", "z", "1", "a"]),
            v(&["hset", "h", "f", "v"]),
            v(&["pfadd", "p", "a"]),
        ]
    );
}

#[test]
fn failing_commands_emit_nothing() {
    let mut e = engine();
    let c = connect(&mut e);
    run(
        &mut e,
        c,
        &[
            &["lpush", "l", "a"],
            &["set", "s", "v"],
            &["sadd", "st", "m"],
        ],
    );
    let mut r = e.attach_effects();
    run(
        &mut e,
        c,
        &[
            &["set", "l", "v", "GET"],
            &["set", "k", "v", "EX", "0"],
            &["set", "k", "v", "EX", "x"],
            &["set", "k", "v", "NX", "XX"],
            &["getex", "l", "EX", "10"],
            &["getdel", "l"],
            &["getset", "l", "x"],
            &["incrbyfloat", "l", "1"],
            &["incrbyfloat", "s", "1"],
            &["hincrbyfloat", "l", "f", "1"],
            &["expire", "l", "10", "NX", "XX"],
            &["expire", "l", "x"],
            &["spop", "l"],
            &["spop", "l", "2"],
            &["setbit", "l", "1", "1"],
            &["bitfield", "l", "set", "u8", "0", "1"],
            &["blpop", "s", "0"],
            &["blmove", "s", "l", "left", "left", "0"],
            &["blmove", "l", "s", "left", "left", "0"],
            &["lmove", "l", "s", "left", "left"],
            &["blmpop", "0", "1", "s", "left"],
            &["lmpop", "1", "s", "left"],
            &["bzpopmin", "s", "0"],
            &["bzmpop", "0", "1", "s", "min"],
            &["zmpop", "1", "s", "min"],
            &["smove", "st", "l", "m"],
            &["restore", "k", "0", "bad"],
            &["rename", "nokey", "k"],
            &["swapdb", "0", "99"],
        ],
    );
    assert_eq!(effects(&mut e, &mut r), Vec::<Vec<String>>::new());
    assert_eq!(cmd(&mut e, c, &["lrange", "l", "0", "-1"]), arr(&["a"]));
}

#[test]
fn other_writes_are_emitted_as_sent() {
    let mut e = engine();
    let c = connect(&mut e);
    let mut r = e.attach_effects();
    let writes: &[&[&str]] = &[
        &["mset", "a", "1", "b", "2", "c", "3"],
        &["del", "a", "b", "nokey"],
        &["unlink", "c", "nokey"],
        &["set", "x", "1"],
        &["rename", "x", "y"],
        &["renamenx", "y", "x"],
        &["copy", "x", "y"],
        &["copy", "x", "y", "replace"],
        &["copy", "x", "y", "db", "2"],
        &["move", "y", "3"],
        &["setrange", "x", "3", "ab"],
        &["append", "x", "c"],
        &["msetnx", "m1", "1", "m2", "2"],
        &["setnx", "n", "1"],
        &["hsetnx", "h", "f", "1"],
        &["zadd", "z", "incr", "2", "a"],
        &["zincrby", "z", "1.5", "a"],
        &["rpush", "l", "a", "b", "c"],
        &["lmove", "l", "l2", "right", "left"],
        &["rpoplpush", "l", "l2"],
        &["lpop", "l2", "5"],
        &["sadd", "s", "a", "b"],
        &["smove", "s", "s2", "a"],
        &["sunionstore", "u", "s", "s2"],
        &["zpopmin", "z", "2"],
        &["pfadd", "p", "a", "b"],
        &["pfmerge", "p2", "p"],
        &["bitop", "or", "bo", "x", "n"],
        &["swapdb", "0", "1"],
        &["swapdb", "1", "1"],
        &["flushdb", "async"],
        &["flushall", "sync"],
    ];
    run(&mut e, c, writes);
    let mut want = vec![v(&["SELECT", "0"])];
    want.extend(writes.iter().map(|w| v(w)));
    assert_eq!(effects(&mut e, &mut r), want);
    // PFCOUNT writes its cached cardinality back: emitted when it did.
    run(
        &mut e,
        c,
        &[
            &["pfadd", "p", "a", "b", "c"],
            &["pfcount", "p"],
            &["pfcount", "p"],
            &["pfcount", "p", "nokey"],
        ],
    );
    assert_eq!(
        effects(&mut e, &mut r),
        vec![v(&["pfadd", "p", "a", "b", "c"]), v(&["pfcount", "p"])]
    );
}
