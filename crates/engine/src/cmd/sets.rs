//! Set commands: SADD SREM SMEMBERS SISMEMBER SMISMEMBER SCARD SPOP
//! SRANDMEMBER SMOVE SINTER SINTERCARD SINTERSTORE SUNION SUNIONSTORE SDIFF
//! SDIFFSTORE SSCAN, with Valkey 8's replies and errors (`t_set.c`). The
//! encodings (intset, listpack, hashtable) live in `store::types::set`.

use super::{
    NOT_INT, SYNTAX_ERR, WrongType, after_removal, distinct_indexes, lookup_typed, parse_cursor,
    parse_scan_opts, rand_u64,
};
use crate::batch::ArgvRef;
use crate::cmd::strings::WRONGTYPE;
use crate::command::flags::*;
use crate::command::{ArgSpec, CommandSpec, Ctx, KeySpec, key_flags as kf, notify, spec};
use crate::glob;
use crate::num::parse_i64;
use resp::ReplyWriter;
use store::types::Set;
use store::types::set::Member;
use store::{Entry, Value};

const GROUP: &str = "set";

const ONE: (i32, i32, i32) = (1, 1, 1);
const ALL: (i32, i32, i32) = (1, -1, 1);
const TWO: (i32, i32, i32) = (1, 2, 1);
const MOVABLE: (i32, i32, i32) = (0, 0, 0);
const READ_FAST: &[&str] = &["read", "set", "fast"];
const READ_SLOW: &[&str] = &["read", "set", "slow"];
const WRITE_FAST: &[&str] = &["write", "set", "fast"];
const WRITE_SLOW: &[&str] = &["write", "set", "slow"];

const KEY: ArgSpec = ArgSpec::key("key", 0);
const KEYS: ArgSpec = ArgSpec::key("key", 0).multiple();
const MEMBER: ArgSpec = ArgSpec::string("member");
const MEMBERS: ArgSpec = ArgSpec::string("member").multiple();
const KEY_MEMBERS: &[ArgSpec] = &[KEY, MEMBERS];
const KEY_MEMBER: &[ArgSpec] = &[KEY, MEMBER];
const KEY_ONLY: &[ArgSpec] = &[KEY];
const KEYS_ONLY: &[ArgSpec] = &[KEYS];
const STORE_ARGS: &[ArgSpec] = &[
    ArgSpec::key("destination", 0),
    ArgSpec::key("key", 1).multiple(),
];
const COUNT_OPT: &[ArgSpec] = &[KEY, ArgSpec::integer("count").optional()];
const SMOVE_ARGS: &[ArgSpec] = &[
    ArgSpec::key("source", 0),
    ArgSpec::key("destination", 1),
    MEMBER,
];
const SINTERCARD_ARGS: &[ArgSpec] = &[
    ArgSpec::integer("numkeys"),
    KEYS,
    ArgSpec::integer("limit").token("LIMIT").optional(),
];
const SSCAN_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::integer("cursor"),
    ArgSpec::pattern("pattern").token("MATCH").optional(),
    ArgSpec::integer("count").token("COUNT").optional(),
];

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::INSERT)],
        history: &[("2.4.0", "Accepts multiple `member` arguments.")],
        ..spec(
            GROUP,
            "sadd",
            -3,
            WRITE | DENYOOM | FAST,
            ONE,
            WRITE_FAST,
            "1.0.0",
            "Adds one or more members to a set. Creates the key if it doesn't exist.",
            "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
            sadd,
            KEY_MEMBERS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::DELETE)],
        history: &[("2.4.0", "Accepts multiple `member` arguments.")],
        ..spec(
            GROUP,
            "srem",
            -3,
            WRITE | FAST,
            ONE,
            WRITE_FAST,
            "1.0.0",
            "Removes one or more members from a set. Deletes the set if the last member was removed.",
            "O(N) where N is the number of members to be removed.",
            srem,
            KEY_MEMBERS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        tips: &["nondeterministic_output_order"],
        ..spec(
            GROUP,
            "smembers",
            2,
            READONLY,
            ONE,
            READ_SLOW,
            "1.0.0",
            "Returns all members of a set.",
            "O(N) where N is the set cardinality.",
            smembers,
            KEY_ONLY,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO)],
        ..spec(
            GROUP,
            "sismember",
            3,
            READONLY | FAST,
            ONE,
            READ_FAST,
            "1.0.0",
            "Determines whether a member belongs to a set.",
            "O(1)",
            sismember,
            KEY_MEMBER,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        ..spec(
            GROUP,
            "smismember",
            -3,
            READONLY | FAST,
            ONE,
            READ_FAST,
            "6.2.0",
            "Determines whether multiple members belong to a set.",
            "O(N) where N is the number of elements being checked for membership",
            smismember,
            KEY_MEMBERS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO)],
        ..spec(
            GROUP,
            "scard",
            2,
            READONLY | FAST,
            ONE,
            READ_FAST,
            "1.0.0",
            "Returns the number of members in a set.",
            "O(1)",
            scard,
            KEY_ONLY,
        )
    },
    CommandSpec {
        args: &[
            ArgSpec::key("key", 0),
            ArgSpec::integer("count").since("3.2.0").optional(),
        ],
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS | kf::DELETE)],
        tips: &["nondeterministic_output"],
        history: &[("3.2.0", "Added the `count` argument.")],
        ..spec(
            GROUP,
            "spop",
            -2,
            WRITE | FAST,
            ONE,
            WRITE_FAST,
            "1.0.0",
            "Returns one or more random members from a set after removing them. Deletes the set if the last member was popped.",
            "Without the count argument O(1), otherwise O(N) where N is the value of the passed count.",
            spop,
            COUNT_OPT,
        )
    },
    CommandSpec {
        args: &[
            ArgSpec::key("key", 0),
            ArgSpec::integer("count").since("2.6.0").optional(),
        ],
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        tips: &["nondeterministic_output"],
        history: &[("2.6.0", "Added the optional `count` argument.")],
        ..spec(
            GROUP,
            "srandmember",
            -2,
            READONLY,
            ONE,
            READ_SLOW,
            "1.0.0",
            "Get one or multiple random members from a set",
            "Without the count argument O(1), otherwise O(N) where N is the absolute value of the passed count.",
            srandmember,
            COUNT_OPT,
        )
    },
    CommandSpec {
        key_specs: &[
            KeySpec::index(1, kf::RW | kf::ACCESS | kf::DELETE),
            KeySpec::index(2, kf::RW | kf::INSERT),
        ],
        ..spec(
            GROUP,
            "smove",
            4,
            WRITE | FAST,
            TWO,
            WRITE_FAST,
            "1.0.0",
            "Moves a member from one set to another.",
            "O(1)",
            smove,
            SMOVE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS).range(-1, 1, 0)],
        tips: &["nondeterministic_output_order"],
        ..spec(
            GROUP,
            "sinter",
            -2,
            READONLY,
            ALL,
            READ_SLOW,
            "1.0.0",
            "Returns the intersect of multiple sets.",
            "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.",
            sinter,
            KEYS_ONLY,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS).keynum(0, 1, 1)],
        ..spec(
            GROUP,
            "sintercard",
            -3,
            READONLY,
            MOVABLE,
            READ_SLOW,
            "7.0.0",
            "Returns the number of members of the intersect of multiple sets.",
            "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.",
            sintercard,
            SINTERCARD_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[
            KeySpec::index(1, kf::OW | kf::UPDATE),
            KeySpec::index(2, kf::RO | kf::ACCESS).range(-1, 1, 0),
        ],
        ..spec(
            GROUP,
            "sinterstore",
            -3,
            WRITE | DENYOOM,
            ALL,
            WRITE_SLOW,
            "1.0.0",
            "Stores the intersect of multiple sets in a key.",
            "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.",
            sinterstore,
            STORE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS).range(-1, 1, 0)],
        tips: &["nondeterministic_output_order"],
        ..spec(
            GROUP,
            "sunion",
            -2,
            READONLY,
            ALL,
            READ_SLOW,
            "1.0.0",
            "Returns the union of multiple sets.",
            "O(N) where N is the total number of elements in all given sets.",
            sunion,
            KEYS_ONLY,
        )
    },
    CommandSpec {
        key_specs: &[
            KeySpec::index(1, kf::OW | kf::UPDATE),
            KeySpec::index(2, kf::RO | kf::ACCESS).range(-1, 1, 0),
        ],
        ..spec(
            GROUP,
            "sunionstore",
            -3,
            WRITE | DENYOOM,
            ALL,
            WRITE_SLOW,
            "1.0.0",
            "Stores the union of multiple sets in a key.",
            "O(N) where N is the total number of elements in all given sets.",
            sunionstore,
            STORE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS).range(-1, 1, 0)],
        tips: &["nondeterministic_output_order"],
        ..spec(
            GROUP,
            "sdiff",
            -2,
            READONLY,
            ALL,
            READ_SLOW,
            "1.0.0",
            "Returns the difference of multiple sets.",
            "O(N) where N is the total number of elements in all given sets.",
            sdiff,
            KEYS_ONLY,
        )
    },
    CommandSpec {
        key_specs: &[
            KeySpec::index(1, kf::OW | kf::UPDATE),
            KeySpec::index(2, kf::RO | kf::ACCESS).range(-1, 1, 0),
        ],
        ..spec(
            GROUP,
            "sdiffstore",
            -3,
            WRITE | DENYOOM,
            ALL,
            WRITE_SLOW,
            "1.0.0",
            "Stores the difference of multiple sets in a key.",
            "O(N) where N is the total number of elements in all given sets.",
            sdiffstore,
            STORE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        tips: &["nondeterministic_output"],
        ..spec(
            GROUP,
            "sscan",
            -3,
            READONLY,
            ONE,
            READ_SLOW,
            "2.8.0",
            "Iterates over members of a set.",
            "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.",
            sscan,
            SSCAN_ARGS,
        )
    },
];

fn member(r: &mut ReplyWriter<'_>, m: Member<'_>) {
    match m {
        Member::Bytes(b) => r.bulk(b),
        Member::Int(i) => r.bulk_from_int(i),
    }
}

fn sadd(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    let db = ctx.session.db;
    let h = ctx.key_hash(key);
    let limits = ctx.srv.config.encoding;
    if typed_or_reply!(ctx, key, false, Value::as_set_mut).is_none() {
        let s = Set::new_for(argv.get(2), argv.len() - 2, &limits);
        super::add_key(ctx, db, h, key, Entry::new(Value::Set(s)));
    }
    let s = typed_or_reply!(ctx, key, false, Value::as_set_mut).expect("just created");
    let mut added = 0;
    for i in 2..argv.len() {
        if s.add(argv.get(i), &limits) {
            added += 1;
        }
    }
    ctx.reply.int(added);
    if added > 0 {
        ctx.notify(notify::SET, "sadd", key);
        ctx.touched(db, key);
        ctx.changed_elements(added as usize);
    } else if typed_or_reply!(ctx, key, false, Value::as_set_mut).is_some_and(|s| s.is_empty()) {
        // A new set that got nothing cannot happen (SADD has members), but
        // never leave an empty one behind.
        ctx.srv.keyspace.dbs[db].remove(h, key);
    }
}

fn srem(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    let Some(s) = typed_or_reply!(ctx, key, false, Value::as_set_mut) else {
        return ctx.reply.int(0);
    };
    let mut n = 0;
    for i in 2..argv.len() {
        if s.remove(argv.get(i)) {
            n += 1;
            if s.is_empty() {
                break;
            }
        }
    }
    ctx.reply.int(n);
    if n > 0 {
        after_removal(ctx, key, notify::SET, "srem");
        ctx.changed_elements(n as usize);
    }
}

fn smembers(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let Some(s) = typed_or_reply!(ctx, argv.get(1), true, Value::as_set_mut) else {
        return ctx.reply.set_len(0);
    };
    let r = &mut ctx.reply;
    r.set_len(s.len());
    for m in s.iter() {
        member(r, m);
    }
}

fn sismember(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let found = typed_or_reply!(ctx, argv.get(1), true, Value::as_set_mut)
        .is_some_and(|s| s.contains(argv.get(2)));
    ctx.reply.int(i64::from(found));
}

fn smismember(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let s = typed_or_reply!(ctx, argv.get(1), true, Value::as_set_mut);
    let r = &mut ctx.reply;
    r.array_len(argv.len() - 2);
    for i in 2..argv.len() {
        r.int(i64::from(
            s.as_ref().is_some_and(|s| s.contains(argv.get(i))),
        ));
    }
}

fn scard(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let n = typed_or_reply!(ctx, argv.get(1), true, Value::as_set_mut).map_or(0, |s| s.len());
    ctx.reply.int(n as i64);
}

fn spop(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    let count = match argv.len() {
        2 => None,
        3 => match super::parse_positive(argv.get(2)) {
            None => return ctx.error(super::NOT_POSITIVE),
            Some(n) => Some(n as usize),
        },
        _ => return ctx.error(SYNTAX_ERR),
    };
    let Some(s) = typed_or_reply!(ctx, key, false, Value::as_set_mut) else {
        return match count {
            None => ctx.reply.null(),
            Some(_) => ctx.reply.set_len(0),
        };
    };
    if count == Some(0) {
        return ctx.reply.set_len(0);
    }
    // SPOP with a count of the whole set (or more) empties it: Valkey
    // propagates that as the key's deletion.
    let whole = count.is_some_and(|c| c >= s.len());
    let n = count.unwrap_or(1).min(s.len());
    let mut popped: Vec<Vec<u8>> = Vec::with_capacity(n);
    for _ in 0..n {
        let m = s.random(rand_u64()).expect("non-empty").to_vec();
        s.remove(&m);
        popped.push(m);
    }
    let r = &mut ctx.reply;
    if count.is_some() {
        r.set_len(popped.len());
    }
    for m in &popped {
        r.bulk(m);
    }
    after_removal(ctx, key, notify::SET, "spop");
    propagate_spop(ctx, key, &popped, whole);
}

/// Members per SREM when SPOP propagates what it removed (as Valkey
/// batches them).
const SPOP_SREM_BATCH: usize = 1024;

/// SPOP's effect: `SREM key member...` in batches of [`SPOP_SREM_BATCH`]
/// (a random choice cannot be replayed); SPOP with a count that took the
/// whole set deletes the key instead (DEL or UNLINK, as Valkey 8).
fn propagate_spop(ctx: &mut Ctx<'_>, key: &[u8], popped: &[Vec<u8>], whole: bool) {
    if !ctx.srv.effects.on() {
        return;
    }
    if whole {
        return super::propagate_server_del(ctx, key);
    }
    let mut argv: Vec<&[u8]> = Vec::with_capacity(2 + popped.len().min(SPOP_SREM_BATCH));
    for batch in popped.chunks(SPOP_SREM_BATCH) {
        argv.clear();
        argv.extend_from_slice(&[b"SREM", key]);
        argv.extend(batch.iter().map(Vec::as_slice));
        ctx.propagate(&argv);
    }
}

fn srandmember(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    if argv.len() == 2 {
        let Some(s) = typed_or_reply!(ctx, key, true, Value::as_set_mut) else {
            return ctx.reply.null();
        };
        let m = s.random(rand_u64()).expect("non-empty");
        return member(&mut ctx.reply, m);
    }
    if argv.len() > 3 {
        return ctx.error(SYNTAX_ERR);
    }
    let count = match parse_i64(argv.get(2)) {
        None => return ctx.error(NOT_INT),
        Some(i64::MIN) => {
            return ctx.error(&format!(
                "ERR value is out of range, value must between {} and {}",
                -i64::MAX,
                i64::MAX
            ));
        }
        Some(n) => n,
    };
    let Some(s) = typed_or_reply!(ctx, key, true, Value::as_set_mut) else {
        return ctx.reply.array_len(0);
    };
    if count == 0 {
        return ctx.reply.array_len(0);
    }
    let r = &mut ctx.reply;
    if count < 0 {
        let n = count.unsigned_abs() as usize;
        r.array_len(n);
        for _ in 0..n {
            member(r, s.random(rand_u64()).expect("non-empty"));
        }
        return;
    }
    let size = s.len();
    let count = count as usize;
    if count >= size {
        r.array_len(size);
        for m in s.iter() {
            member(r, m);
        }
        return;
    }
    let all: Vec<Member<'_>> = s.iter().collect();
    let picks = distinct_indexes(count, size);
    r.array_len(count);
    for i in picks {
        member(r, all[i]);
    }
}

fn smove(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let (src, dst, m) = (argv.get(1), argv.get(2), argv.get(3));
    let db = ctx.session.db;
    // A missing source replies 0 before the destination's type is looked
    // at (Valkey's order).
    let Some(has) = typed_or_reply!(ctx, src, false, Value::as_set_mut).map(|s| s.contains(m))
    else {
        return ctx.reply.int(0);
    };
    let dst_exists = typed_or_reply!(ctx, dst, false, Value::as_set_mut).is_some();
    if src == dst || !has {
        return ctx.reply.int(i64::from(has));
    }
    typed_or_reply!(ctx, src, false, Value::as_set_mut)
        .expect("exists")
        .remove(m);
    after_removal(ctx, src, notify::SET, "srem");
    let limits = ctx.srv.config.encoding;
    if !dst_exists {
        let h = ctx.key_hash(dst);
        let s = Set::new_for(m, 1, &limits);
        super::add_key(ctx, db, h, dst, Entry::new(Value::Set(s)));
    }
    // `dst` changed only if it did not hold the member already.
    let added = typed_or_reply!(ctx, dst, false, Value::as_set_mut)
        .expect("exists")
        .add(m, &limits);
    if added {
        ctx.notify(notify::SET, "sadd", dst);
        ctx.touched(db, dst);
    }
    ctx.reply.int(1);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Inter,
    Union,
    Diff,
}

/// The sets at `keys` (None for missing ones); `Err` after replying
/// WRONGTYPE. Every key is checked, as Valkey does, before any result.
fn load_sets(ctx: &mut Ctx<'_>, keys: &[&[u8]]) -> Result<Vec<Option<Set>>, ()> {
    let mut out = Vec::with_capacity(keys.len());
    for k in keys {
        let db = ctx.session.db;
        let h = ctx.key_hash(k);
        match lookup_typed(ctx.srv, db, k, h, ctx.now_ms, true, Value::as_set_mut) {
            Ok(s) => out.push(s.map(|s| s.clone())),
            Err(WrongType) => {
                ctx.reply.error(WRONGTYPE);
                return Err(());
            }
        }
    }
    Ok(out)
}

/// Members of the result of `op` over `sets`, stopping at `limit` for
/// intersections (SINTERCARD).
fn compute(op: Op, sets: &[Option<Set>], limit: usize) -> Vec<Vec<u8>> {
    match op {
        Op::Inter => {
            if sets.iter().any(Option::is_none) {
                return Vec::new();
            }
            let mut order: Vec<&Set> = sets.iter().flatten().collect();
            order.sort_by_key(|s| s.len());
            let mut out = Vec::new();
            for m in order[0].iter() {
                let bytes = m.to_vec();
                if order[1..].iter().all(|s| s.contains(&bytes)) {
                    out.push(bytes);
                    if out.len() == limit {
                        break;
                    }
                }
            }
            out
        }
        Op::Union => {
            let mut seen = std::collections::HashSet::new();
            let mut out = Vec::new();
            for s in sets.iter().flatten() {
                for m in s.iter() {
                    let b = m.to_vec();
                    if seen.insert(b.clone()) {
                        out.push(b);
                    }
                }
            }
            out
        }
        Op::Diff => {
            let Some(Some(first)) = sets.first() else {
                return Vec::new();
            };
            first
                .iter()
                .map(Member::to_vec)
                .filter(|b| !sets[1..].iter().flatten().any(|s| s.contains(b)))
                .collect()
        }
    }
}

fn keys_from(argv: ArgvRef<'_>, from: usize) -> Vec<&[u8]> {
    (from..argv.len()).map(|i| argv.get(i)).collect()
}

fn setop(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, op: Op) {
    let keys = keys_from(argv, 1);
    let Ok(sets) = load_sets(ctx, &keys) else {
        return;
    };
    let out = compute(op, &sets, usize::MAX);
    let r = &mut ctx.reply;
    r.set_len(out.len());
    for m in &out {
        r.bulk(m);
    }
}

fn setop_store(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, op: Op, event: &str) {
    let dst = argv.get(1);
    let keys = keys_from(argv, 2);
    let Ok(sets) = load_sets(ctx, &keys) else {
        return;
    };
    let out = compute(op, &sets, usize::MAX);
    let db = ctx.session.db;
    let h = ctx.key_hash(dst);
    if out.is_empty() {
        let d = &mut ctx.srv.keyspace.dbs[db];
        if d.get(h, dst, ctx.now_ms).is_some() {
            d.delete(h, dst);
            ctx.notify(notify::GENERIC, "del", dst);
            ctx.touched(db, dst);
        }
        return ctx.reply.int(0);
    }
    let limits = ctx.srv.config.encoding;
    let mut s = Set::new();
    for m in &out {
        s.add(m, &limits);
    }
    super::set_key(ctx, h, dst, Entry::new(Value::Set(s)));
    ctx.reply.int(out.len() as i64);
    ctx.notify(notify::SET, event, dst);
    ctx.touched(db, dst);
}

fn sinter(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    setop(ctx, argv, Op::Inter);
}
fn sunion(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    setop(ctx, argv, Op::Union);
}
fn sdiff(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    setop(ctx, argv, Op::Diff);
}
fn sinterstore(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    setop_store(ctx, argv, Op::Inter, "sinterstore");
}
fn sunionstore(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    setop_store(ctx, argv, Op::Union, "sunionstore");
}
fn sdiffstore(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    setop_store(ctx, argv, Op::Diff, "sdiffstore");
}

fn sintercard(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let numkeys = match parse_i64(argv.get(1)) {
        Some(n) if n > 0 => n as usize,
        Some(_) => return ctx.error("ERR numkeys should be greater than 0"),
        None => return ctx.error("ERR numkeys should be greater than 0"),
    };
    if numkeys > argv.len() - 2 {
        return ctx.error("ERR Number of keys can't be greater than number of args");
    }
    let mut limit = usize::MAX;
    let mut i = 2 + numkeys;
    while i < argv.len() {
        if argv.get(i).eq_ignore_ascii_case(b"limit") && i + 1 < argv.len() {
            // Valkey's getPositiveLongFromObjectOrReply: one message for
            // both a negative and a non-number.
            match parse_i64(argv.get(i + 1)) {
                None => return ctx.error("ERR LIMIT can't be negative"),
                Some(n) if n < 0 => return ctx.error("ERR LIMIT can't be negative"),
                Some(0) => limit = usize::MAX,
                Some(n) => limit = n as usize,
            }
            i += 2;
        } else {
            return ctx.error(SYNTAX_ERR);
        }
    }
    let keys: Vec<&[u8]> = (2..2 + numkeys).map(|k| argv.get(k)).collect();
    let Ok(sets) = load_sets(ctx, &keys) else {
        return;
    };
    let n = compute(Op::Inter, &sets, limit).len();
    ctx.reply.int(n as i64);
}

fn sscan(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let Some(mut cursor) = parse_cursor(argv.get(2)) else {
        return ctx.error("ERR invalid cursor");
    };
    // Valkey reads the options only once the key is found and typed: a
    // missing key answers an empty scan whatever follows.
    let opts = parse_scan_opts(argv, 3, false);
    let Some(s) = typed_or_reply!(ctx, argv.get(1), true, Value::as_set_mut) else {
        ctx.reply.array_len(2);
        ctx.reply.bulk(b"0");
        return ctx.reply.array_len(0);
    };
    let opts = match opts {
        Ok(o) => o,
        Err(e) => return ctx.error(e),
    };
    let s: &Set = s;
    let mut found: Vec<Vec<u8>> = Vec::new();
    let mut sampled = 0;
    let mut steps_left = opts.count.saturating_mul(10);
    loop {
        cursor = s.scan(cursor, |m| {
            sampled += 1;
            let b = m.to_vec();
            if opts.pattern.is_none_or(|p| glob::matches(p, &b, false)) {
                found.push(b);
            }
        });
        if cursor == 0 || steps_left == 0 || sampled >= opts.count {
            break;
        }
        steps_left -= 1;
    }
    let r = &mut ctx.reply;
    let mut buf = [0u8; resp::num::I64_MAX_LEN];
    r.array_len(2);
    r.bulk(resp::num::fmt_u64(cursor, &mut buf));
    r.array_len(found.len());
    for m in &found {
        r.bulk(m);
    }
}

/// For ZUNION/ZINTER/ZDIFF, which take plain sets as inputs (score 1).
pub(crate) fn members(s: &Set) -> impl Iterator<Item = Vec<u8>> + '_ {
    s.iter().map(Member::to_vec)
}
