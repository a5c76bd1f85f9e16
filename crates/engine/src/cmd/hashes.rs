//! Hash commands: HSET HSETNX HGET HMGET HMSET HDEL HLEN HSTRLEN HEXISTS
//! HKEYS HVALS HGETALL HINCRBY HINCRBYFLOAT HRANDFIELD HSCAN, with Valkey
//! 8's replies and errors (`t_hash.c`). The encodings (listpack, then
//! hashtable) live in `store::types::hash`; commands only read and write
//! through its API.

use super::{
    NOT_INT, WrongType, after_removal, distinct_indexes, lookup_typed, parse_cursor,
    parse_rand_args, parse_scan_opts, rand_below,
};
use crate::batch::ArgvRef;
use crate::cmd::strings::WRONGTYPE;
use crate::command::flags::*;
use crate::command::{
    ArgSpec, CommandSpec, Ctx, KeySpec, doc_flags, key_flags as kf, notify, spec,
};
use crate::glob;
use crate::num::{LongDouble, parse_i64};
use store::types::Hash;
use store::{Entry, Value};

const GROUP: &str = "hash";

const READ_FAST: &[&str] = &["read", "hash", "fast"];
const READ_SLOW: &[&str] = &["read", "hash", "slow"];
const WRITE_FAST: &[&str] = &["write", "hash", "fast"];

const KEY: ArgSpec = ArgSpec::key("key", 0);
const FIELD: ArgSpec = ArgSpec::string("field");
const FIELDS: ArgSpec = ArgSpec::string("field").multiple();
const KEY_FIELD: &[ArgSpec] = &[KEY, FIELD];
const KEY_ONLY: &[ArgSpec] = &[KEY];
const PAIRS: &[ArgSpec] = &[
    KEY,
    ArgSpec::block("data", &[FIELD, ArgSpec::string("value")]).multiple(),
];
const HSETNX_ARGS: &[ArgSpec] = &[KEY, FIELD, ArgSpec::string("value")];
const KEY_FIELDS: &[ArgSpec] = &[KEY, FIELDS];
const HINCRBY_ARGS: &[ArgSpec] = &[KEY, FIELD, ArgSpec::integer("increment")];
const HINCRBYFLOAT_ARGS: &[ArgSpec] = &[KEY, FIELD, ArgSpec::double("increment")];
const HRANDFIELD_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::block(
        "options",
        &[
            ArgSpec::integer("count"),
            ArgSpec::pure_token("withvalues", "WITHVALUES").optional(),
        ],
    )
    .optional(),
];
const HSCAN_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::integer("cursor"),
    ArgSpec::pattern("pattern").token("MATCH").optional(),
    ArgSpec::integer("count").token("COUNT").optional(),
    ArgSpec::pure_token("novalues", "NOVALUES").optional(),
];

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::UPDATE)],
        history: &[("4.0.0", "Accepts multiple `field` and `value` arguments.")],
        ..spec(
            GROUP,
            "hset",
            -4,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            WRITE_FAST,
            "2.0.0",
            "Creates or modifies the value of a field in a hash.",
            "O(1) for each field/value pair added, so O(N) to add N field/value pairs when the command is called with multiple field/value pairs.",
            hset,
            PAIRS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::INSERT)],
        ..spec(
            GROUP,
            "hsetnx",
            4,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            WRITE_FAST,
            "2.0.0",
            "Sets the value of a field in a hash only when the field doesn't exist.",
            "O(1)",
            hsetnx,
            HSETNX_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::UPDATE)],
        doc_flags: doc_flags::DEPRECATED,
        deprecated_since: Some("4.0.0"),
        replaced_by: Some("`HSET` with multiple field-value pairs"),
        ..spec(
            GROUP,
            "hmset",
            -4,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            WRITE_FAST,
            "2.0.0",
            "Sets the values of multiple fields.",
            "O(N) where N is the number of fields being set.",
            hset,
            PAIRS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        ..spec(
            GROUP,
            "hget",
            3,
            READONLY | FAST,
            (1, 1, 1),
            READ_FAST,
            "2.0.0",
            "Returns the value of a field in a hash.",
            "O(1)",
            hget,
            KEY_FIELD,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        ..spec(
            GROUP,
            "hmget",
            -3,
            READONLY | FAST,
            (1, 1, 1),
            READ_FAST,
            "2.0.0",
            "Returns the values of all fields in a hash.",
            "O(N) where N is the number of fields being requested.",
            hmget,
            KEY_FIELDS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::DELETE)],
        history: &[("2.4.0", "Accepts multiple `field` arguments.")],
        ..spec(
            GROUP,
            "hdel",
            -3,
            WRITE | FAST,
            (1, 1, 1),
            WRITE_FAST,
            "2.0.0",
            "Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain.",
            "O(N) where N is the number of fields to be removed.",
            hdel,
            KEY_FIELDS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO)],
        ..spec(
            GROUP,
            "hlen",
            2,
            READONLY | FAST,
            (1, 1, 1),
            READ_FAST,
            "2.0.0",
            "Returns the number of fields in a hash.",
            "O(1)",
            hlen,
            KEY_ONLY,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO)],
        ..spec(
            GROUP,
            "hstrlen",
            3,
            READONLY | FAST,
            (1, 1, 1),
            READ_FAST,
            "3.2.0",
            "Returns the length of the value of a field.",
            "O(1)",
            hstrlen,
            KEY_FIELD,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO)],
        ..spec(
            GROUP,
            "hexists",
            3,
            READONLY | FAST,
            (1, 1, 1),
            READ_FAST,
            "2.0.0",
            "Determines whether a field exists in a hash.",
            "O(1)",
            hexists,
            KEY_FIELD,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        tips: &["nondeterministic_output_order"],
        ..spec(
            GROUP,
            "hkeys",
            2,
            READONLY,
            (1, 1, 1),
            READ_SLOW,
            "2.0.0",
            "Returns all fields in a hash.",
            "O(N) where N is the size of the hash.",
            hkeys,
            KEY_ONLY,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        tips: &["nondeterministic_output_order"],
        ..spec(
            GROUP,
            "hvals",
            2,
            READONLY,
            (1, 1, 1),
            READ_SLOW,
            "2.0.0",
            "Returns all values in a hash.",
            "O(N) where N is the size of the hash.",
            hvals,
            KEY_ONLY,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        tips: &["nondeterministic_output_order"],
        ..spec(
            GROUP,
            "hgetall",
            2,
            READONLY,
            (1, 1, 1),
            READ_SLOW,
            "2.0.0",
            "Returns all fields and values in a hash.",
            "O(N) where N is the size of the hash.",
            hgetall,
            KEY_ONLY,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS | kf::UPDATE)],
        ..spec(
            GROUP,
            "hincrby",
            4,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            WRITE_FAST,
            "2.0.0",
            "Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist.",
            "O(1)",
            hincrby,
            HINCRBY_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS | kf::UPDATE)],
        ..spec(
            GROUP,
            "hincrbyfloat",
            4,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            WRITE_FAST,
            "2.6.0",
            "Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist.",
            "O(1)",
            hincrbyfloat,
            HINCRBYFLOAT_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        tips: &["nondeterministic_output"],
        ..spec(
            GROUP,
            "hrandfield",
            -2,
            READONLY,
            (1, 1, 1),
            READ_SLOW,
            "6.2.0",
            "Returns one or more random fields from a hash.",
            "O(N) where N is the number of fields returned",
            hrandfield,
            HRANDFIELD_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        tips: &["nondeterministic_output"],
        ..spec(
            GROUP,
            "hscan",
            -3,
            READONLY,
            (1, 1, 1),
            READ_SLOW,
            "2.8.0",
            "Iterates over fields and values of a hash.",
            "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.",
            hscan,
            HSCAN_ARGS,
        )
    },
];

/// The hash at `key` for writing, created empty if missing; `None` after
/// replying WRONGTYPE.
fn hash_for_write<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Option<&'c mut Hash> {
    let db = ctx.session.db;
    let h = ctx.key_hash(key);
    let now = ctx.now_ms;
    match lookup_typed(ctx.srv, db, key, h, now, false, Value::as_hash_mut) {
        Err(WrongType) => {
            ctx.reply.error(WRONGTYPE);
            return None;
        }
        Ok(Some(_)) => {}
        Ok(None) => super::add_key(ctx, db, h, key, Entry::new(Value::Hash(Hash::new()))),
    }
    match ctx.srv.keyspace.dbs[db]
        .get(h, key, now)
        .and_then(|e| e.boxed_mut())
    {
        Some(Value::Hash(hash)) => Some(hash),
        _ => unreachable!("just looked up or inserted"),
    }
}

/// After a write to `key`: the event and the WATCH/blocking hook.
fn written(ctx: &mut Ctx<'_>, key: &[u8], event: &str) {
    let db = ctx.session.db;
    ctx.notify(notify::HASH, event, key);
    ctx.touched(db, key);
}

fn hset(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    if !argv.len().is_multiple_of(2) {
        let name = String::from_utf8_lossy(argv.get(0)).to_lowercase();
        return ctx.error(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
    }
    let key = argv.get(1);
    let limits = ctx.srv.config.encoding;
    let Some(h) = hash_for_write(ctx, key) else {
        return;
    };
    let mut created = 0;
    for i in (2..argv.len()).step_by(2) {
        if h.set(argv.get(i), argv.get(i + 1), &limits) {
            created += 1;
        }
    }
    if argv.get(0).eq_ignore_ascii_case(b"hmset") {
        ctx.reply.ok();
    } else {
        ctx.reply.int(created);
    }
    written(ctx, key, "hset");
    ctx.changed_elements((argv.len() - 2) / 2);
}

fn hsetnx(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let (key, field) = (argv.get(1), argv.get(2));
    if let Some(h) = typed_or_reply!(ctx, key, false, Value::as_hash_mut)
        && h.contains(field)
    {
        return ctx.reply.int(0);
    }
    let limits = ctx.srv.config.encoding;
    let Some(h) = hash_for_write(ctx, key) else {
        return;
    };
    h.set(field, argv.get(3), &limits);
    ctx.reply.int(1);
    written(ctx, key, "hset");
}

fn hget(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    match typed_or_reply!(ctx, argv.get(1), true, Value::as_hash_mut)
        .and_then(|h| h.get(argv.get(2)))
    {
        Some(v) => ctx.reply.bulk(v),
        None => ctx.reply.null(),
    }
}

fn hmget(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let h = typed_or_reply!(ctx, argv.get(1), true, Value::as_hash_mut);
    let r = &mut ctx.reply;
    r.array_len(argv.len() - 2);
    for i in 2..argv.len() {
        match h.as_ref().and_then(|h| h.get(argv.get(i))) {
            Some(v) => r.bulk(v),
            None => r.null(),
        }
    }
}

fn hdel(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    let Some(h) = typed_or_reply!(ctx, key, false, Value::as_hash_mut) else {
        return ctx.reply.int(0);
    };
    let mut n = 0;
    for i in 2..argv.len() {
        if h.remove(argv.get(i)) {
            n += 1;
            if h.is_empty() {
                break;
            }
        }
    }
    ctx.reply.int(n);
    if n > 0 {
        after_removal(ctx, key, notify::HASH, "hdel");
        ctx.changed_elements(n as usize);
    }
}

fn hlen(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let n = typed_or_reply!(ctx, argv.get(1), true, Value::as_hash_mut).map_or(0, |h| h.len());
    ctx.reply.int(n as i64);
}

fn hstrlen(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let n = typed_or_reply!(ctx, argv.get(1), true, Value::as_hash_mut)
        .and_then(|h| h.get(argv.get(2)))
        .map_or(0, <[u8]>::len);
    ctx.reply.int(n as i64);
}

fn hexists(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let found = typed_or_reply!(ctx, argv.get(1), true, Value::as_hash_mut)
        .is_some_and(|h| h.contains(argv.get(2)));
    ctx.reply.int(i64::from(found));
}

/// HKEYS / HVALS / HGETALL.
fn getall(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, fields: bool, values: bool) {
    let Some(h) = typed_or_reply!(ctx, argv.get(1), true, Value::as_hash_mut) else {
        if fields && values {
            return ctx.reply.map_len(0);
        }
        return ctx.reply.array_len(0);
    };
    let r = &mut ctx.reply;
    if fields && values {
        r.map_len(h.len());
    } else {
        r.array_len(h.len());
    }
    for (f, v) in h.iter() {
        if fields {
            r.bulk(f);
        }
        if values {
            r.bulk(v);
        }
    }
}

fn hkeys(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    getall(ctx, argv, true, false);
}

fn hvals(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    getall(ctx, argv, false, true);
}

fn hgetall(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    getall(ctx, argv, true, true);
}

fn hincrby(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let (key, field) = (argv.get(1), argv.get(2));
    let Some(incr) = parse_i64(argv.get(3)) else {
        return ctx.error(NOT_INT);
    };
    let old = match typed_or_reply!(ctx, key, false, Value::as_hash_mut).and_then(|h| h.get(field))
    {
        None => 0,
        Some(v) => match parse_i64(v) {
            Some(n) => n,
            None => return ctx.error("ERR hash value is not an integer"),
        },
    };
    let Some(new) = old.checked_add(incr) else {
        return ctx.error("ERR increment or decrement would overflow");
    };
    let limits = ctx.srv.config.encoding;
    let Some(h) = hash_for_write(ctx, key) else {
        return;
    };
    let mut buf = [0u8; resp::num::I64_MAX_LEN];
    h.set(field, resp::num::fmt_i64(new, &mut buf), &limits);
    ctx.reply.int(new);
    written(ctx, key, "hincrby");
}

fn hincrbyfloat(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let (key, field) = (argv.get(1), argv.get(2));
    let Some(incr) = LongDouble::parse(argv.get(3)) else {
        return ctx.error("ERR value is not a valid float");
    };
    if !incr.is_finite() {
        return ctx.error("ERR value is NaN or Infinity");
    }
    let old = match typed_or_reply!(ctx, key, false, Value::as_hash_mut).and_then(|h| h.get(field))
    {
        None => LongDouble::ZERO,
        Some(v) => match LongDouble::parse(v) {
            Some(n) => n,
            None => return ctx.error("ERR hash value is not a float"),
        },
    };
    let sum = match old.checked_add(incr) {
        Some(v) if v.is_finite() => v,
        _ => return ctx.error("ERR increment would produce NaN or Infinity"),
    };
    let text = sum.to_human();
    let limits = ctx.srv.config.encoding;
    let Some(h) = hash_for_write(ctx, key) else {
        return;
    };
    h.set(field, &text, &limits);
    ctx.reply.bulk(&text);
    written(ctx, key, "hincrbyfloat");
    // The result, not the increment (float arithmetic may differ where
    // it is replayed).
    ctx.propagate(&[b"HSET", key, field, &text]);
}

fn hrandfield(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    if argv.len() == 2 {
        let Some(h) = typed_or_reply!(ctx, key, true, Value::as_hash_mut) else {
            return ctx.reply.null();
        };
        let (f, _) = h.nth(rand_below(h.len())).expect("non-empty hash");
        return ctx.reply.bulk(f);
    }
    let (count, withvalues) = match parse_rand_args(argv, b"withvalues") {
        Ok(x) => x,
        Err(e) => return ctx.error(&e),
    };
    let Some(h) = typed_or_reply!(ctx, key, true, Value::as_hash_mut) else {
        return ctx.reply.array_len(0);
    };
    if count == 0 {
        return ctx.reply.array_len(0);
    }
    let all: Vec<(&[u8], &[u8])> = h.iter().collect();
    let size = all.len();
    let picks: Vec<usize> = if count < 0 {
        (0..count.unsigned_abs())
            .map(|_| rand_below(size))
            .collect()
    } else if count as usize >= size {
        (0..size).collect()
    } else {
        distinct_indexes(count as usize, size)
    };
    let r = &mut ctx.reply;
    let nested = withvalues && r.proto == resp::Protocol::Resp3;
    r.array_len(if withvalues && !nested {
        picks.len() * 2
    } else {
        picks.len()
    });
    for i in picks {
        let (f, v) = all[i];
        if nested {
            r.array_len(2);
        }
        r.bulk(f);
        if withvalues {
            r.bulk(v);
        }
    }
}

fn hscan(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let Some(mut cursor) = parse_cursor(argv.get(2)) else {
        return ctx.error("ERR invalid cursor");
    };
    // Valkey reads the options only once the key is found and typed: a
    // missing key answers an empty scan whatever follows.
    let opts = parse_scan_opts(argv, 3, true);
    let Some(h) = typed_or_reply!(ctx, argv.get(1), true, Value::as_hash_mut) else {
        ctx.reply.array_len(2);
        ctx.reply.bulk(b"0");
        return ctx.reply.array_len(0);
    };
    let opts = match opts {
        Ok(o) => o,
        Err(e) => return ctx.error(e),
    };
    let mut found: Vec<(&[u8], &[u8])> = Vec::new();
    let mut sampled = 0;
    let mut steps_left = opts.count.saturating_mul(10);
    let h: &Hash = h;
    loop {
        cursor = h.scan(cursor, |f, v| {
            sampled += 1;
            if opts.pattern.is_none_or(|p| glob::matches(p, f, false)) {
                found.push((f, v));
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
    r.array_len(if opts.novalues {
        found.len()
    } else {
        found.len() * 2
    });
    for (f, v) in found {
        r.bulk(f);
        if !opts.novalues {
            r.bulk(v);
        }
    }
}
