//! Generic key commands: DEL UNLINK EXISTS TOUCH TYPE, the EXPIRE and TTL
//! families, PERSIST, RENAME(NX), COPY, MOVE, KEYS, SCAN, RANDOMKEY, OBJECT.
//!
//! Lookups follow Valkey's `lookupKey*` rules, because they are visible:
//! read lookups count keyspace hits/misses, write lookups don't, and the
//! access clock (OBJECT IDLETIME) moves on every lookup except the
//! NOTOUCH ones (EXISTS, TTL, TYPE, OBJECT) and except for a
//! CLIENT NO-TOUCH client, unless the command is TOUCH itself.

use super::{NOT_INT, SYNTAX_ERR, parse_cursor, reply_help};
use crate::batch::ArgvRef;
use crate::command::flags::*;
use crate::command::{ArgSpec, CommandSpec, Ctx, KeySpec, key_flags as kf, notify};
use crate::glob;
use crate::num::parse_i64;
use std::sync::atomic::{AtomicU64, Ordering};
use store::Entry;

const WRITE_SLOW: &[&str] = &["keyspace", "write", "slow"];
const WRITE_FAST: &[&str] = &["keyspace", "write", "fast"];
const READ_SLOW: &[&str] = &["keyspace", "read", "slow"];
const READ_FAST: &[&str] = &["keyspace", "read", "fast"];

// One spec per row reads like Valkey's command table; a builder would
// only spread each row over more lines.
#[allow(clippy::too_many_arguments)]
const fn key_cmd(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: (i32, i32, i32),
    acl: &'static [&'static str],
    since: &'static str,
    summary: &'static str,
    complexity: &'static str,
    func: crate::command::CommandFn,
    args: &'static [ArgSpec],
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        first_key: keys.0,
        last_key: keys.1,
        key_step: keys.2,
        acl_categories: acl,
        group: "generic",
        since,
        summary,
        complexity,
        func: Some(func),
        args,
        ..CommandSpec::DEFAULT
    }
}

const ONE_KEY: (i32, i32, i32) = (1, 1, 1);
const ALL_KEYS: (i32, i32, i32) = (1, -1, 1);
const TWO_KEYS: (i32, i32, i32) = (1, 2, 1);
const NO_KEYS: (i32, i32, i32) = (0, 0, 0);
const OBJECT_KEY: (i32, i32, i32) = (2, 2, 1);

// Argument specs, as Valkey 8's command JSON gives them (COMMAND DOCS).
const KEY_ARG: &[ArgSpec] = &[ArgSpec::key("key", 0)];
const KEYS_ARG: &[ArgSpec] = &[ArgSpec::key("key", 0).multiple()];
const KEYS_PATTERN_ARG: &[ArgSpec] = &[ArgSpec::pattern("pattern")];
const COPY_ARGS: &[ArgSpec] = &[
    ArgSpec::key("source", 0),
    ArgSpec::key("destination", 1),
    ArgSpec::integer("destination-db").token("DB").optional(),
    ArgSpec::pure_token("replace", "REPLACE").optional(),
];
/// EXPIRE's `NX | XX | GT | LT`.
const EXPIRE_CONDITION: ArgSpec = ArgSpec::oneof(
    "condition",
    &[
        ArgSpec::pure_token("nx", "NX"),
        ArgSpec::pure_token("xx", "XX"),
        ArgSpec::pure_token("gt", "GT"),
        ArgSpec::pure_token("lt", "LT"),
    ],
)
.since("7.0.0")
.optional();
const EXPIRE_ARGS: &[ArgSpec] = &[
    ArgSpec::key("key", 0),
    ArgSpec::integer("seconds"),
    EXPIRE_CONDITION,
];
const EXPIREAT_ARGS: &[ArgSpec] = &[
    ArgSpec::key("key", 0),
    ArgSpec::unix_time("unix-time-seconds"),
    EXPIRE_CONDITION,
];
const PEXPIRE_ARGS: &[ArgSpec] = &[
    ArgSpec::key("key", 0),
    ArgSpec::integer("milliseconds"),
    EXPIRE_CONDITION,
];
const PEXPIREAT_ARGS: &[ArgSpec] = &[
    ArgSpec::key("key", 0),
    ArgSpec::unix_time("unix-time-milliseconds"),
    EXPIRE_CONDITION,
];
const MOVE_ARGS: &[ArgSpec] = &[ArgSpec::key("key", 0), ArgSpec::integer("db")];
const RENAME_ARGS: &[ArgSpec] = &[ArgSpec::key("key", 0), ArgSpec::key("newkey", 1)];
const SCAN_ARGS: &[ArgSpec] = &[
    ArgSpec::integer("cursor"),
    ArgSpec::pattern("pattern").token("MATCH").optional(),
    ArgSpec::integer("count").token("COUNT").optional(),
    ArgSpec::string("type")
        .token("TYPE")
        .since("6.0.0")
        .optional(),
];

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        key_specs: &[
            KeySpec::index(1, kf::RO | kf::ACCESS),
            KeySpec::index(2, kf::OW | kf::UPDATE),
        ],
        ..key_cmd(
            "copy",
            -3,
            WRITE | DENYOOM,
            TWO_KEYS,
            WRITE_SLOW,
            "6.2.0",
            "Copies the value of a key to a new key.",
            "O(N) worst case for collections, where N is the number of nested items. O(1) for string values.",
            copy,
            COPY_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RM | kf::DELETE).range(-1, 1, 0)],
        tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
        ..key_cmd(
            "del",
            -2,
            WRITE,
            ALL_KEYS,
            WRITE_SLOW,
            "1.0.0",
            "Deletes one or more keys.",
            "O(N) where N is the number of keys that will be removed. When a key to remove holds a value other than a string, the individual complexity for this key is O(M) where M is the number of elements in the list, set, sorted set or hash. Removing a single key that holds a string value is O(1).",
            del,
            KEYS_ARG,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO).range(-1, 1, 0)],
        tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
        history: &[("3.0.3", "Accepts multiple `key` arguments.")],
        ..key_cmd(
            "exists",
            -2,
            READONLY | FAST,
            ALL_KEYS,
            READ_FAST,
            "1.0.0",
            "Determines whether one or more keys exist.",
            "O(N) where N is the number of keys to check.",
            exists,
            KEYS_ARG,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::UPDATE)],
        history: &[("7.0.0", "Added options: `NX`, `XX`, `GT` and `LT`.")],
        ..key_cmd(
            "expire",
            -3,
            WRITE | FAST,
            ONE_KEY,
            WRITE_FAST,
            "1.0.0",
            "Sets the expiration time of a key in seconds.",
            "O(1)",
            expire,
            EXPIRE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::UPDATE)],
        history: &[("7.0.0", "Added options: `NX`, `XX`, `GT` and `LT`.")],
        ..key_cmd(
            "expireat",
            -3,
            WRITE | FAST,
            ONE_KEY,
            WRITE_FAST,
            "1.2.0",
            "Sets the expiration time of a key to a Unix timestamp.",
            "O(1)",
            expireat,
            EXPIREAT_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        ..key_cmd(
            "expiretime",
            2,
            READONLY | FAST,
            ONE_KEY,
            READ_FAST,
            "7.0.0",
            "Returns the expiration time of a key as a Unix timestamp.",
            "O(1)",
            expiretime,
            KEY_ARG,
        )
    },
    CommandSpec {
        tips: &["request_policy:all_shards", "nondeterministic_output_order"],
        ..key_cmd(
            "keys",
            2,
            READONLY,
            NO_KEYS,
            &["keyspace", "read", "slow", "dangerous"],
            "1.0.0",
            "Returns all key names that match a pattern.",
            "O(N) with N being the number of keys in the database, under the assumption that the key names in the database and the given pattern have limited length.",
            keys,
            KEYS_PATTERN_ARG,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS | kf::UPDATE)],
        ..key_cmd(
            "move",
            3,
            WRITE | FAST,
            ONE_KEY,
            WRITE_FAST,
            "1.0.0",
            "Moves a key to another database.",
            "O(1)",
            move_key,
            MOVE_ARGS,
        )
    },
    CommandSpec {
        name: "object",
        arity: -2,
        flags: 0,
        acl_categories: &["slow"],
        group: "generic",
        since: "2.2.3",
        summary: "A container for object introspection commands.",
        complexity: "Depends on subcommand.",
        func: None,
        subcommands: &[
            CommandSpec {
                key_specs: &[KeySpec::index(2, kf::RO)],
                tips: &["nondeterministic_output"],
                ..key_cmd(
                    "encoding",
                    3,
                    READONLY,
                    OBJECT_KEY,
                    READ_SLOW,
                    "2.2.3",
                    "Returns the internal encoding of an object.",
                    "O(1)",
                    object_encoding,
                    KEY_ARG,
                )
            },
            CommandSpec {
                key_specs: &[KeySpec::index(2, kf::RO)],
                tips: &["nondeterministic_output"],
                ..key_cmd(
                    "freq",
                    3,
                    READONLY,
                    OBJECT_KEY,
                    READ_SLOW,
                    "4.0.0",
                    "Returns the logarithmic access frequency counter of an object.",
                    "O(1)",
                    object_freq,
                    KEY_ARG,
                )
            },
            key_cmd(
                "help",
                2,
                LOADING | STALE,
                NO_KEYS,
                &["keyspace", "slow"],
                "6.2.0",
                "Returns helpful text about the different subcommands.",
                "O(1)",
                object_help,
                &[],
            ),
            CommandSpec {
                key_specs: &[KeySpec::index(2, kf::RO)],
                tips: &["nondeterministic_output"],
                ..key_cmd(
                    "idletime",
                    3,
                    READONLY,
                    OBJECT_KEY,
                    READ_SLOW,
                    "2.2.3",
                    "Returns the time since the last access to an object.",
                    "O(1)",
                    object_idletime,
                    KEY_ARG,
                )
            },
            CommandSpec {
                key_specs: &[KeySpec::index(2, kf::RO)],
                tips: &["nondeterministic_output"],
                ..key_cmd(
                    "refcount",
                    3,
                    READONLY,
                    OBJECT_KEY,
                    READ_SLOW,
                    "2.2.3",
                    "Returns the reference count of a value of a key.",
                    "O(1)",
                    object_refcount,
                    KEY_ARG,
                )
            },
        ],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::UPDATE)],
        ..key_cmd(
            "persist",
            2,
            WRITE | FAST,
            ONE_KEY,
            WRITE_FAST,
            "2.2.0",
            "Removes the expiration time of a key.",
            "O(1)",
            persist,
            KEY_ARG,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::UPDATE)],
        history: &[("7.0.0", "Added options: `NX`, `XX`, `GT` and `LT`.")],
        ..key_cmd(
            "pexpire",
            -3,
            WRITE | FAST,
            ONE_KEY,
            WRITE_FAST,
            "2.6.0",
            "Sets the expiration time of a key in milliseconds.",
            "O(1)",
            pexpire,
            PEXPIRE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::UPDATE)],
        history: &[("7.0.0", "Added options: `NX`, `XX`, `GT` and `LT`.")],
        ..key_cmd(
            "pexpireat",
            -3,
            WRITE | FAST,
            ONE_KEY,
            WRITE_FAST,
            "2.6.0",
            "Sets the expiration time of a key to a Unix milliseconds timestamp.",
            "O(1)",
            pexpireat,
            PEXPIREAT_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        ..key_cmd(
            "pexpiretime",
            2,
            READONLY | FAST,
            ONE_KEY,
            READ_FAST,
            "7.0.0",
            "Returns the expiration time of a key as a Unix milliseconds timestamp.",
            "O(1)",
            pexpiretime,
            KEY_ARG,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        tips: &["nondeterministic_output"],
        history: &[("2.8.0", "Added the -2 reply.")],
        ..key_cmd(
            "pttl",
            2,
            READONLY | FAST,
            ONE_KEY,
            READ_FAST,
            "2.6.0",
            "Returns the expiration time in milliseconds of a key.",
            "O(1)",
            pttl,
            KEY_ARG,
        )
    },
    CommandSpec {
        tips: &[
            "request_policy:all_shards",
            "response_policy:special",
            "nondeterministic_output",
        ],
        ..key_cmd(
            "randomkey",
            1,
            READONLY,
            NO_KEYS,
            READ_SLOW,
            "1.0.0",
            "Returns a random key name from the database.",
            "O(1)",
            randomkey,
            &[],
        )
    },
    CommandSpec {
        key_specs: &[
            KeySpec::index(1, kf::RW | kf::ACCESS | kf::DELETE),
            KeySpec::index(2, kf::OW | kf::UPDATE),
        ],
        ..key_cmd(
            "rename",
            3,
            WRITE,
            TWO_KEYS,
            WRITE_SLOW,
            "1.0.0",
            "Renames a key and overwrites the destination.",
            "O(1)",
            rename,
            RENAME_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[
            KeySpec::index(1, kf::RW | kf::ACCESS | kf::DELETE),
            KeySpec::index(2, kf::OW | kf::INSERT),
        ],
        history: &[(
            "3.2.0",
            "The command no longer returns an error when source and destination names are the same.",
        )],
        ..key_cmd(
            "renamenx",
            3,
            WRITE | FAST,
            TWO_KEYS,
            WRITE_FAST,
            "1.0.0",
            "Renames a key only when the target key name doesn't exist.",
            "O(1)",
            renamenx,
            RENAME_ARGS,
        )
    },
    CommandSpec {
        tips: &[
            "nondeterministic_output",
            "request_policy:special",
            "response_policy:special",
        ],
        history: &[("6.0.0", "Added the `TYPE` subcommand.")],
        ..key_cmd(
            "scan",
            -2,
            READONLY,
            NO_KEYS,
            READ_SLOW,
            "2.8.0",
            "Iterates over the key names in the database.",
            "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.",
            scan,
            SCAN_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO).range(-1, 1, 0)],
        tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
        ..key_cmd(
            "touch",
            -2,
            READONLY | FAST,
            ALL_KEYS,
            READ_FAST,
            "3.2.1",
            "Returns the number of existing keys out of those specified after updating the time they were last accessed.",
            "O(N) where N is the number of keys that will be touched.",
            touch,
            KEYS_ARG,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        tips: &["nondeterministic_output"],
        history: &[("2.8.0", "Added the -2 reply.")],
        ..key_cmd(
            "ttl",
            2,
            READONLY | FAST,
            ONE_KEY,
            READ_FAST,
            "1.0.0",
            "Returns the expiration time in seconds of a key.",
            "O(1)",
            ttl,
            KEY_ARG,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO)],
        ..key_cmd(
            "type",
            2,
            READONLY | FAST,
            ONE_KEY,
            READ_FAST,
            "1.0.0",
            "Determines the type of value stored at a key.",
            "O(1)",
            type_cmd,
            KEY_ARG,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RM | kf::DELETE).range(-1, 1, 0)],
        tips: &["request_policy:multi_shard", "response_policy:agg_sum"],
        ..key_cmd(
            "unlink",
            -2,
            WRITE | FAST,
            ALL_KEYS,
            WRITE_FAST,
            "4.0.0",
            "Asynchronously deletes one or more keys.",
            "O(1) for each key removed regardless of its size. Then the command does O(N) work in a different thread in order to reclaim memory, where N is the number of allocations the deleted objects where composed of.",
            del,
            KEYS_ARG,
        )
    },
];

const SAME_OBJECT: &str = "ERR source and destination objects are the same";
const DB_RANGE: &str = "ERR DB index is out of range";
const NO_SUCH_KEY: &str = "ERR no such key";

/// Every name SCAN TYPE accepts (Valkey's `obj_type_name`), whether or not
/// we store that type yet: an unsupported one just matches nothing.
const TYPE_NAMES: &[&str] = &["string", "list", "set", "zset", "hash", "stream"];

#[derive(Clone, Copy, PartialEq)]
enum Lookup {
    /// `lookupKeyRead`: counts hits/misses, updates the access clock.
    Read,
    /// `lookupKeyReadWithFlags(LOOKUP_NOTOUCH)`: counts, leaves the clock.
    ReadNoTouch,
    /// OBJECT's `LOOKUP_NOTOUCH | LOOKUP_NONOTIFY`: as ReadNoTouch, without
    /// a `keymiss` event.
    Inspect,
    /// `lookupKeyWrite`: no stats, updates the access clock.
    Write,
    /// TOUCH: like Read, and it touches even a NO-TOUCH client's keys.
    Touch,
}

/// Find a live key in the selected database (expiring it lazily), with
/// the side effects Valkey's lookup of that kind has.
fn lookup<'c>(ctx: &'c mut Ctx<'_>, key: &[u8], kind: Lookup) -> Option<&'c Entry> {
    let hash = ctx.key_hash(key);
    let db = ctx.session.db;
    lookup_in(ctx, db, hash, key, kind)
}

fn lookup_in<'c>(
    ctx: &'c mut Ctx<'_>,
    db: usize,
    hash: u64,
    key: &[u8],
    kind: Lookup,
) -> Option<&'c Entry> {
    let now = ctx.now_ms;
    let touch = match kind {
        Lookup::Touch => true,
        Lookup::Read | Lookup::Write => !ctx.session.no_touch,
        Lookup::ReadNoTouch | Lookup::Inspect => false,
    };
    let srv = &mut *ctx.srv;
    let d = &mut srv.keyspace.dbs[db];
    let found = if touch {
        // `Db::get_read` stamps the access (LRU clock or LFU counter). A
        // shared borrow is returned: changes go through `Db` methods.
        d.get_read(hash, key, now).map(|e| &*e)
    } else if d.peek(hash, key).is_some_and(|e| !d.shows(e, now)) {
        // `Db::get` stamps the access clock, so a NOTOUCH lookup only uses
        // it to drop an expired key.
        d.get_read(hash, key, now);
        None
    } else {
        d.peek(hash, key)
    };
    if kind != Lookup::Write {
        let misses = (kind != Lookup::Inspect).then_some(&mut srv.keymisses);
        super::count_read(&mut srv.stats, misses, found.is_some(), db, key);
    }
    found
}

/// DEL and UNLINK: UNLINK (and DEL with `lazyfree-lazy-user-del`, on by
/// default as in Valkey 8) frees large values on the lazyfree thread.
fn del(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let db = ctx.session.db;
    let now = ctx.now_ms;
    let lazy = ctx.srv.config.lazyfree_lazy_user_del || argv.get(0).eq_ignore_ascii_case(b"unlink");
    let mut n = 0;
    for i in 1..argv.len() {
        let key = argv.get(i);
        let hash = ctx.key_hash(key);
        let d = ctx.db();
        // `get` first so an expired key is dropped as expired, not counted.
        if d.get(hash, key, now).is_some() {
            if let Some(old) = d.remove(hash, key)
                && lazy
            {
                ctx.srv.lazyfree.free(old);
            }
            ctx.touched(db, key);
            ctx.notify(notify::GENERIC, "del", key);
            n += 1;
        }
    }
    ctx.reply.int(n);
}

fn exists(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let mut n = 0;
    for i in 1..argv.len() {
        if lookup(ctx, argv.get(i), Lookup::ReadNoTouch).is_some() {
            n += 1;
        }
    }
    ctx.reply.int(n);
}

fn touch(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let mut n = 0;
    for i in 1..argv.len() {
        if lookup(ctx, argv.get(i), Lookup::Touch).is_some() {
            n += 1;
        }
    }
    ctx.reply.int(n);
}

fn type_cmd(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let name = lookup(ctx, argv.get(1), Lookup::ReadNoTouch).map_or("none", Entry::type_name);
    ctx.reply.simple(name);
}

// ---- EXPIRE family ----

const EXPIRE_NX: u8 = 1;
const EXPIRE_XX: u8 = 2;
const EXPIRE_GT: u8 = 4;
const EXPIRE_LT: u8 = 8;

/// Valkey's `parseExtendedExpireArgumentsOrReply`: options come after the
/// time and are checked before it.
fn expire_flags(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) -> Option<u8> {
    let mut flags = 0;
    for i in 3..argv.len() {
        let opt = argv.get(i);
        flags |= if opt.eq_ignore_ascii_case(b"nx") {
            EXPIRE_NX
        } else if opt.eq_ignore_ascii_case(b"xx") {
            EXPIRE_XX
        } else if opt.eq_ignore_ascii_case(b"gt") {
            EXPIRE_GT
        } else if opt.eq_ignore_ascii_case(b"lt") {
            EXPIRE_LT
        } else {
            ctx.error(&format!(
                "ERR Unsupported option {}",
                String::from_utf8_lossy(opt)
            ));
            return None;
        };
    }
    if flags & EXPIRE_NX != 0 && flags & (EXPIRE_XX | EXPIRE_GT | EXPIRE_LT) != 0 {
        ctx.error("ERR NX and XX, GT or LT options at the same time are not compatible");
        return None;
    }
    if flags & EXPIRE_GT != 0 && flags & EXPIRE_LT != 0 {
        ctx.error("ERR GT and LT options at the same time are not compatible");
        return None;
    }
    Some(flags)
}

/// `base_ms` is now for the relative forms and 0 for the absolute ones.
fn expire_generic(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, name: &str, base_ms: i64, secs: bool) {
    let Some(flags) = expire_flags(ctx, argv) else {
        return;
    };
    let Some(mut when) = parse_i64(argv.get(2)) else {
        return ctx.error(NOT_INT);
    };
    let bad_time = format!("ERR invalid expire time in '{name}' command");
    // Negative times are allowed (they delete the key); only overflow is not.
    if secs {
        match when.checked_mul(1000) {
            Some(ms) => when = ms,
            None => return ctx.error(&bad_time),
        }
    }
    match when.checked_add(base_ms) {
        Some(t) => when = t,
        None => return ctx.error(&bad_time),
    }
    let key = argv.get(1);
    let db = ctx.session.db;
    let Some(e) = lookup(ctx, key, Lookup::Write) else {
        return ctx.reply.int(0);
    };
    if flags != 0 {
        let current = e.expire_at_ms();
        let refused = (flags & EXPIRE_NX != 0 && current.is_some())
            || (flags & EXPIRE_XX != 0 && current.is_none())
            // No TTL counts as infinite: GT never beats it, LT always does.
            || (flags & EXPIRE_GT != 0 && current.is_none_or(|c| when <= c))
            || (flags & EXPIRE_LT != 0 && current.is_some_and(|c| when >= c));
        if refused {
            return ctx.reply.int(0);
        }
    }
    let hash = ctx.key_hash(key);
    if ctx.already_expired(when) {
        super::delete_already_expired(ctx, hash, key);
        return ctx.reply.int(1);
    }
    ctx.db().set_expire(hash, key, Some(when));
    ctx.touched(db, key);
    ctx.notify(notify::GENERIC, "expire", key);
    // Propagated as an absolute time in ms (PEXPIREAT as sent stays as sent).
    if base_ms != 0 || secs {
        super::propagate_pexpireat(ctx, key, when, argv, 3);
    }
    ctx.reply.int(1);
}

fn expire(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let now = ctx.now_ms;
    expire_generic(ctx, argv, "expire", now, true)
}

fn pexpire(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let now = ctx.now_ms;
    expire_generic(ctx, argv, "pexpire", now, false)
}

fn expireat(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    expire_generic(ctx, argv, "expireat", 0, true)
}

fn pexpireat(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    expire_generic(ctx, argv, "pexpireat", 0, false)
}

/// TTL/PTTL/EXPIRETIME/PEXPIRETIME: -2 no key, -1 no expiry.
fn ttl_generic(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, ms: bool, absolute: bool) {
    let now = ctx.now_ms;
    let Some(e) = lookup(ctx, argv.get(1), Lookup::ReadNoTouch) else {
        return ctx.reply.int(-2);
    };
    let Some(at) = e.expire_at_ms() else {
        return ctx.reply.int(-1);
    };
    let t = if absolute { at } else { at - now }.max(0);
    // Seconds are rounded to nearest, as Valkey does, without overflowing
    // near i64::MAX (PEXPIREAT accepts any positive time).
    ctx.reply.int(if ms {
        t
    } else {
        t / 1000 + i64::from(t % 1000 >= 500)
    });
}

fn ttl(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    ttl_generic(ctx, argv, false, false)
}

fn pttl(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    ttl_generic(ctx, argv, true, false)
}

fn expiretime(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    ttl_generic(ctx, argv, false, true)
}

fn pexpiretime(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    ttl_generic(ctx, argv, true, true)
}

fn persist(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    let had_ttl = lookup(ctx, key, Lookup::Write).is_some_and(|e| e.expire_at_ms().is_some());
    if had_ttl {
        let hash = ctx.key_hash(key);
        ctx.db().set_expire(hash, key, None);
        let db = ctx.session.db;
        ctx.touched(db, key);
        ctx.notify(notify::GENERIC, "persist", key);
    }
    ctx.reply.int(had_ttl as i64);
}

// ---- RENAME, COPY, MOVE ----

fn rename_generic(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, nx: bool) {
    let (src, dst) = (argv.get(1), argv.get(2));
    if lookup(ctx, src, Lookup::Write).is_none() {
        return ctx.error(NO_SUCH_KEY);
    }
    if src == dst {
        return if nx { ctx.reply.int(0) } else { ctx.reply.ok() };
    }
    let db = ctx.session.db;
    let (hs, hd) = (ctx.key_hash(src), ctx.key_hash(dst));
    if lookup_in(ctx, db, hd, dst, Lookup::Write).is_some() && nx {
        return ctx.reply.int(0);
    }
    // The entry carries its TTL and access clock to the new name. Any old
    // `dst` goes first: the new one is added (`new`), as in Valkey.
    if let Some(entry) = ctx.db().remove(hs, src) {
        ctx.db().delete(hd, dst);
        super::add_key(ctx, db, hd, dst, entry);
    }
    ctx.touched(db, src);
    ctx.touched(db, dst);
    ctx.notify(notify::GENERIC, "rename_from", src);
    ctx.notify(notify::GENERIC, "rename_to", dst);
    if nx { ctx.reply.int(1) } else { ctx.reply.ok() }
}

fn rename(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    rename_generic(ctx, argv, false)
}

fn renamenx(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    rename_generic(ctx, argv, true)
}

/// A database index argument (`getIntFromObjectOrReply` + `selectDb`).
fn db_index(ctx: &mut Ctx<'_>, arg: &[u8]) -> Option<usize> {
    let Some(id) = parse_i64(arg).filter(|&n| i32::try_from(n).is_ok()) else {
        ctx.error(NOT_INT);
        return None;
    };
    if id < 0 || id as usize >= ctx.srv.keyspace.dbs.len() {
        ctx.error(DB_RANGE);
        return None;
    }
    Some(id as usize)
}

fn copy(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let src_db = ctx.session.db;
    let mut dst_db = src_db;
    let mut replace = false;
    let mut j = 3;
    while j < argv.len() {
        let opt = argv.get(j);
        if opt.eq_ignore_ascii_case(b"replace") {
            replace = true;
        } else if opt.eq_ignore_ascii_case(b"db") && j + 1 < argv.len() {
            let Some(id) = db_index(ctx, argv.get(j + 1)) else {
                return;
            };
            dst_db = id;
            j += 1;
        } else {
            return ctx.error(SYNTAX_ERR);
        }
        j += 1;
    }
    let (src, dst) = (argv.get(1), argv.get(2));
    if src_db == dst_db && src == dst {
        return ctx.error(SAME_OBJECT);
    }
    let Some(e) = lookup(ctx, src, Lookup::Read) else {
        return ctx.reply.int(0);
    };
    let mut copied = Entry::keyed(dst, e.to_value());
    copied.set_expire_at_ms(e.expire_at_ms());
    let hd = ctx.key_hash(dst);
    if lookup_in(ctx, dst_db, hd, dst, Lookup::Write).is_some() && !replace {
        return ctx.reply.int(0);
    }
    ctx.srv.keyspace.dbs[dst_db].delete(hd, dst);
    super::add_key(ctx, dst_db, hd, dst, copied);
    ctx.touched(dst_db, dst);
    ctx.notify_db(notify::GENERIC, "copy_to", dst_db, dst);
    ctx.reply.int(1);
}

fn move_key(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let Some(dst_db) = db_index(ctx, argv.get(2)) else {
        return;
    };
    let src_db = ctx.session.db;
    if dst_db == src_db {
        return ctx.error(SAME_OBJECT);
    }
    let key = argv.get(1);
    let hash = ctx.key_hash(key);
    if lookup_in(ctx, src_db, hash, key, Lookup::Write).is_none()
        || lookup_in(ctx, dst_db, hash, key, Lookup::Write).is_some()
    {
        return ctx.reply.int(0);
    }
    if let Some(entry) = ctx.srv.keyspace.dbs[src_db].remove(hash, key) {
        super::add_key(ctx, dst_db, hash, key, entry);
    }
    ctx.touched(src_db, key);
    ctx.touched(dst_db, key);
    ctx.notify_db(notify::GENERIC, "move_from", src_db, key);
    ctx.notify_db(notify::GENERIC, "move_to", dst_db, key);
    ctx.reply.int(1);
}

// ---- KEYS, SCAN, RANDOMKEY ----

fn keys(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let pattern = argv.get(1);
    let all = pattern == b"*";
    let now = ctx.now_ms;
    let db = &ctx.srv.keyspace.dbs[ctx.session.db];
    let found: Vec<&[u8]> = db
        .iter()
        .filter(|(k, e)| (all || glob::matches(pattern, k, false)) && db.shows(e, now))
        .map(|(k, _)| k)
        .collect();
    ctx.reply.array_len(found.len());
    for k in found {
        ctx.reply.bulk(k);
    }
}

fn scan(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let Some(mut cursor) = parse_cursor(argv.get(1)) else {
        return ctx.error("ERR invalid cursor");
    };
    let mut count: i64 = 10;
    let mut pattern: Option<&[u8]> = None;
    let mut want_type: Option<&str> = None;
    let mut i = 2;
    while i < argv.len() {
        let opt = argv.get(i);
        let has_value = i + 1 < argv.len();
        if opt.eq_ignore_ascii_case(b"count") && has_value {
            match parse_i64(argv.get(i + 1)) {
                None => return ctx.error(NOT_INT),
                Some(n) if n < 1 => return ctx.error(SYNTAX_ERR),
                Some(n) => count = n,
            }
        } else if opt.eq_ignore_ascii_case(b"match") && has_value {
            let p = argv.get(i + 1);
            pattern = (p != b"*").then_some(p);
        } else if opt.eq_ignore_ascii_case(b"type") && has_value {
            let t = argv.get(i + 1);
            match TYPE_NAMES
                .iter()
                .find(|n| t.eq_ignore_ascii_case(n.as_bytes()))
            {
                Some(n) => want_type = Some(n),
                None => {
                    return ctx.error(&format!(
                        "ERR unknown type name '{}'",
                        String::from_utf8_lossy(t)
                    ));
                }
            }
        } else if opt.eq_ignore_ascii_case(b"novalues") {
            return ctx.error("ERR NOVALUES option can only be used in HSCAN");
        } else if opt.eq_ignore_ascii_case(b"noscores") {
            return ctx.error("ERR NOSCORES option can only be used in ZSCAN");
        } else {
            return ctx.error(SYNTAX_ERR);
        }
        i += 2;
    }

    let now = ctx.now_ms;
    let db = &ctx.srv.keyspace.dbs[ctx.session.db];
    let mut found: Vec<Vec<u8>> = Vec::new();
    // Keys past their time that the scan met: as Valkey's scan callback,
    // each that matches is expired as a lookup would (UNLINK propagated).
    let mut expired: Vec<Vec<u8>> = Vec::new();
    let mut sampled: i64 = 0;
    // Valkey's bound: at most 10*COUNT steps, so a sparse table cannot
    // make one call walk it all.
    let mut steps_left = count.saturating_mul(10);
    loop {
        cursor = db.scan(cursor, |k, e| {
            let shown = db.shows(e, now);
            sampled += shown as i64;
            if want_type.is_some_and(|t| e.type_name() != t) {
                return;
            }
            if pattern.is_some_and(|p| !glob::matches(p, k, false)) {
                return;
            }
            if shown { &mut found } else { &mut expired }.push(k.to_vec());
        });
        if cursor == 0 || steps_left == 0 || sampled >= count {
            break;
        }
        steps_left -= 1;
    }
    let db = ctx.db();
    for k in &expired {
        db.get(store::hash_key(k), k, now);
    }
    let mut buf = [0u8; resp::num::I64_MAX_LEN];
    ctx.reply.array_len(2);
    ctx.reply.bulk(resp::num::fmt_u64(cursor, &mut buf));
    ctx.reply.array_len(found.len());
    for k in &found {
        ctx.reply.bulk(k);
    }
}

/// RANDOMKEY's generator state (splitmix64); the store only needs a seed.
static RANDOM_STATE: AtomicU64 = AtomicU64::new(0);

fn next_seed(now_ms: i64) -> u64 {
    let mut s = RANDOM_STATE.load(Ordering::Relaxed);
    if s == 0 {
        s = now_ms as u64 ^ (u64::from(std::process::id()) << 32);
    }
    s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    RANDOM_STATE.store(s, Ordering::Relaxed);
    let mut z = s;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn randomkey(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let now = ctx.now_ms;
    // Valkey's dbRandomKey keeps drawing until it finds a live key; every
    // expired draw deletes a key (or, while expiry is paused, the store
    // gives up on them), so this ends. No access-clock update.
    loop {
        let seed = next_seed(now);
        let d = ctx.db();
        match d.random_key(seed, now) {
            Some(key) => return ctx.reply.bulk(&key),
            None if d.is_empty() => return ctx.reply.null(),
            None => {}
        }
    }
}

// ---- OBJECT ----

const LFU_ERR: &str = "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";
const LRU_ERR: &str = "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.";

fn policy(ctx: &Ctx<'_>) -> String {
    ctx.srv.config.get("maxmemory-policy").unwrap_or_default()
}

fn object_encoding(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    match lookup(ctx, argv.get(2), Lookup::Inspect) {
        Some(e) => {
            let enc = e.encoding();
            ctx.reply.bulk(enc.as_bytes())
        }
        None => ctx.reply.null(),
    }
}

/// Always 1: Valkey 8 keeps the key inside its value's object, so no
/// key's value is a shared object (Redis 7 reported small integers as
/// shared, `i32::MAX`).
fn object_refcount(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    match lookup(ctx, argv.get(2), Lookup::Inspect) {
        Some(_) => ctx.reply.int(1),
        None => ctx.reply.null(),
    }
}

fn object_idletime(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let lfu = policy(ctx).contains("lfu");
    let now = ctx.now_ms;
    let Some(e) = lookup(ctx, argv.get(2), Lookup::Inspect) else {
        return ctx.reply.null();
    };
    if lfu {
        return ctx.error(LRU_ERR);
    }
    let idle = e.idle_ms(now) / 1000;
    ctx.reply.int(idle as i64);
}

fn object_freq(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let lfu = policy(ctx).contains("lfu");
    let decay_min: u32 = ctx
        .srv
        .config
        .get("lfu-decay-time")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let now = ctx.now_ms;
    let Some(e) = lookup(ctx, argv.get(2), Lookup::Inspect) else {
        return ctx.reply.null();
    };
    if !lfu {
        return ctx.error(LFU_ERR);
    }
    let freq = e.lfu_counter(now, decay_min);
    ctx.reply.int(i64::from(freq));
}

fn object_help(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    reply_help(
        ctx,
        "OBJECT",
        &[
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
        ],
    );
}

#[cfg(test)]
mod tests {
    use super::parse_cursor;

    #[test]
    fn cursor_follows_string2ull() {
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b"17"), Some(17));
        assert_eq!(parse_cursor(b"-1"), None);
        assert_eq!(parse_cursor(b""), None);
        assert_eq!(parse_cursor(b"abc"), None);
        assert_eq!(parse_cursor(b"1x"), None);
        // strtoull's leniency.
        assert_eq!(parse_cursor(b"007"), Some(7));
        assert_eq!(parse_cursor(b"+7"), Some(7));
        assert_eq!(parse_cursor(b" 7"), Some(7));
        assert_eq!(parse_cursor(b"\x0b\t7"), Some(7));
        assert_eq!(parse_cursor(b"-0"), Some(0));
        assert_eq!(parse_cursor(b" -1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"7 "), None);
        assert_eq!(parse_cursor(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551616"), None);
        // Read as a C string.
        assert_eq!(parse_cursor(b"5\0junk"), Some(5));
    }
}
