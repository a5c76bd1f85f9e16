//! List commands: LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP LLEN LRANGE LINDEX
//! LSET LINSERT LREM LTRIM LPOS LMOVE RPOPLPUSH LMPOP and the blocking
//! BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP, with Valkey 8's replies and errors
//! (`t_list.c`).
//!
//! A blocking command is its non-blocking form plus "block if there was
//! nothing" ([`Ctx::block`]): the engine runs it again when a waited key
//! is written, first blocked first served (see `crate::blocking`).

use super::{NOT_INT, SYNTAX_ERR, WrongType, after_removal, lookup_typed, parse_mpop};
use crate::batch::ArgvRef;
use crate::blocking::{OnTimeout, parse_timeout};
use crate::cmd::strings::WRONGTYPE;
use crate::command::flags::*;
use crate::command::{
    ArgSpec, CommandSpec, Ctx, KeySpec, doc_flags, key_flags as kf, notify, spec,
};
use crate::num::parse_i64;
use store::types::List;
use store::types::list::End;
use store::{Entry, Value};

const GROUP: &str = "list";

const ONE: (i32, i32, i32) = (1, 1, 1);
const TWO: (i32, i32, i32) = (1, 2, 1);
const BLOCK_KEYS: (i32, i32, i32) = (1, -2, 1);
const MOVABLE: (i32, i32, i32) = (0, 0, 0);
const READ_FAST: &[&str] = &["read", "list", "fast"];
const READ_SLOW: &[&str] = &["read", "list", "slow"];
const WRITE_FAST: &[&str] = &["write", "list", "fast"];
const WRITE_SLOW: &[&str] = &["write", "list", "slow"];
const BLOCK_SLOW: &[&str] = &["write", "list", "slow", "blocking"];

const KEY: ArgSpec = ArgSpec::key("key", 0);
const KEYS: ArgSpec = ArgSpec::key("key", 0).multiple();
const ELEMENTS: ArgSpec = ArgSpec::string("element").multiple();
const PUSH_ARGS: &[ArgSpec] = &[KEY, ELEMENTS];
const POP_ARGS: &[ArgSpec] = &[KEY, ArgSpec::integer("count").optional()];
const KEY_ONLY: &[ArgSpec] = &[KEY];
const RANGE_ARGS: &[ArgSpec] = &[KEY, ArgSpec::integer("start"), ArgSpec::integer("stop")];
const LINDEX_ARGS: &[ArgSpec] = &[KEY, ArgSpec::integer("index")];
const LSET_ARGS: &[ArgSpec] = &[KEY, ArgSpec::integer("index"), ArgSpec::string("element")];
const WHERE_BA: ArgSpec = ArgSpec::oneof(
    "where",
    &[
        ArgSpec::pure_token("before", "BEFORE"),
        ArgSpec::pure_token("after", "AFTER"),
    ],
);
const LINSERT_ARGS: &[ArgSpec] = &[
    KEY,
    WHERE_BA,
    ArgSpec::string("pivot"),
    ArgSpec::string("element"),
];
const LREM_ARGS: &[ArgSpec] = &[KEY, ArgSpec::integer("count"), ArgSpec::string("element")];
const LPOS_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::string("element"),
    ArgSpec::integer("rank").token("RANK").optional(),
    ArgSpec::integer("num-matches").token("COUNT").optional(),
    ArgSpec::integer("len").token("MAXLEN").optional(),
];
const LR: &[ArgSpec] = &[
    ArgSpec::pure_token("left", "LEFT"),
    ArgSpec::pure_token("right", "RIGHT"),
];
const LMOVE_ARGS: &[ArgSpec] = &[
    ArgSpec::key("source", 0),
    ArgSpec::key("destination", 1),
    ArgSpec::oneof("wherefrom", LR),
    ArgSpec::oneof("whereto", LR),
];
const BLMOVE_ARGS: &[ArgSpec] = &[
    ArgSpec::key("source", 0),
    ArgSpec::key("destination", 1),
    ArgSpec::oneof("wherefrom", LR),
    ArgSpec::oneof("whereto", LR),
    ArgSpec::double("timeout"),
];
const RPOPLPUSH_ARGS: &[ArgSpec] = &[ArgSpec::key("source", 0), ArgSpec::key("destination", 1)];
const BRPOPLPUSH_ARGS: &[ArgSpec] = &[
    ArgSpec::key("source", 0),
    ArgSpec::key("destination", 1),
    ArgSpec::double("timeout"),
];
const BPOP_ARGS: &[ArgSpec] = &[KEYS, ArgSpec::double("timeout")];
const LMPOP_ARGS: &[ArgSpec] = &[
    ArgSpec::integer("numkeys"),
    KEYS,
    ArgSpec::oneof("where", LR),
    ArgSpec::integer("count").token("COUNT").optional(),
];
const BLMPOP_ARGS: &[ArgSpec] = &[
    ArgSpec::double("timeout"),
    ArgSpec::integer("numkeys"),
    KEYS,
    ArgSpec::oneof("where", LR),
    ArgSpec::integer("count").token("COUNT").optional(),
];

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::INSERT)],
        history: &[("2.4.0", "Accepts multiple `element` arguments.")],
        ..spec(
            GROUP,
            "lpush",
            -3,
            WRITE | DENYOOM | FAST,
            ONE,
            WRITE_FAST,
            "1.0.0",
            "Prepends one or more elements to a list. Creates the key if it doesn't exist.",
            "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
            lpush,
            PUSH_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::INSERT)],
        history: &[("2.4.0", "Accepts multiple `element` arguments.")],
        ..spec(
            GROUP,
            "rpush",
            -3,
            WRITE | DENYOOM | FAST,
            ONE,
            WRITE_FAST,
            "1.0.0",
            "Appends one or more elements to a list. Creates the key if it doesn't exist.",
            "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
            rpush,
            PUSH_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::INSERT)],
        history: &[("4.0.0", "Accepts multiple `element` arguments.")],
        ..spec(
            GROUP,
            "lpushx",
            -3,
            WRITE | DENYOOM | FAST,
            ONE,
            WRITE_FAST,
            "2.2.0",
            "Prepends one or more elements to a list only when the list exists.",
            "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
            lpushx,
            PUSH_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::INSERT)],
        history: &[("4.0.0", "Accepts multiple `element` arguments.")],
        ..spec(
            GROUP,
            "rpushx",
            -3,
            WRITE | DENYOOM | FAST,
            ONE,
            WRITE_FAST,
            "2.2.0",
            "Appends an element to a list only when the list exists.",
            "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.",
            rpushx,
            PUSH_ARGS,
        )
    },
    CommandSpec {
        args: &[
            ArgSpec::key("key", 0),
            ArgSpec::integer("count").since("6.2.0").optional(),
        ],
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS | kf::DELETE)],
        history: &[("6.2.0", "Added the `count` argument.")],
        ..spec(
            GROUP,
            "lpop",
            -2,
            WRITE | FAST,
            ONE,
            WRITE_FAST,
            "1.0.0",
            "Returns the first elements in a list after removing it. Deletes the list if the last element was popped.",
            "O(N) where N is the number of elements returned",
            lpop,
            POP_ARGS,
        )
    },
    CommandSpec {
        args: &[
            ArgSpec::key("key", 0),
            ArgSpec::integer("count").since("6.2.0").optional(),
        ],
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS | kf::DELETE)],
        history: &[("6.2.0", "Added the `count` argument.")],
        ..spec(
            GROUP,
            "rpop",
            -2,
            WRITE | FAST,
            ONE,
            WRITE_FAST,
            "1.0.0",
            "Returns and removes the last elements of a list. Deletes the list if the last element was popped.",
            "O(N) where N is the number of elements returned",
            rpop,
            POP_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO)],
        ..spec(
            GROUP,
            "llen",
            2,
            READONLY | FAST,
            ONE,
            READ_FAST,
            "1.0.0",
            "Returns the length of a list.",
            "O(1)",
            llen,
            KEY_ONLY,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        ..spec(
            GROUP,
            "lrange",
            4,
            READONLY,
            ONE,
            READ_SLOW,
            "1.0.0",
            "Returns a range of elements from a list.",
            "O(S+N) where S is the distance of start offset from HEAD for small lists, from nearest end (HEAD or TAIL) for large lists; and N is the number of elements in the specified range.",
            lrange,
            RANGE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        ..spec(
            GROUP,
            "lindex",
            3,
            READONLY,
            ONE,
            READ_SLOW,
            "1.0.0",
            "Returns an element from a list by its index.",
            "O(N) where N is the number of elements to traverse to get to the element at index. This makes asking for the first or the last element of the list O(1).",
            lindex,
            LINDEX_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::UPDATE)],
        ..spec(
            GROUP,
            "lset",
            4,
            WRITE | DENYOOM,
            ONE,
            WRITE_SLOW,
            "1.0.0",
            "Sets the value of an element in a list by its index.",
            "O(N) where N is the length of the list. Setting either the first or the last element of the list is O(1).",
            lset,
            LSET_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::INSERT)],
        ..spec(
            GROUP,
            "linsert",
            5,
            WRITE | DENYOOM,
            ONE,
            WRITE_SLOW,
            "2.2.0",
            "Inserts an element before or after another element in a list.",
            "O(N) where N is the number of elements to traverse before seeing the value pivot. This means that inserting somewhere on the left end on the list (head) can be considered O(1) and inserting somewhere on the right end (tail) is O(N).",
            linsert,
            LINSERT_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::DELETE)],
        ..spec(
            GROUP,
            "lrem",
            4,
            WRITE,
            ONE,
            WRITE_SLOW,
            "1.0.0",
            "Removes elements from a list. Deletes the list if the last element was removed.",
            "O(N+M) where N is the length of the list and M is the number of elements removed.",
            lrem,
            LREM_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::DELETE)],
        ..spec(
            GROUP,
            "ltrim",
            4,
            WRITE,
            ONE,
            WRITE_SLOW,
            "1.0.0",
            "Removes elements from both ends a list. Deletes the list if all elements were trimmed.",
            "O(N) where N is the number of elements to be removed by the operation.",
            ltrim,
            RANGE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        ..spec(
            GROUP,
            "lpos",
            -3,
            READONLY,
            ONE,
            READ_SLOW,
            "6.0.6",
            "Returns the index of matching elements in a list.",
            "O(N) where N is the number of elements in the list, for the average case. When searching for elements near the head or the tail of the list, or when the MAXLEN option is provided, the command may run in constant time.",
            lpos,
            LPOS_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[
            KeySpec::index(1, kf::RW | kf::ACCESS | kf::DELETE),
            KeySpec::index(2, kf::RW | kf::INSERT),
        ],
        ..spec(
            GROUP,
            "lmove",
            5,
            WRITE | DENYOOM,
            TWO,
            WRITE_SLOW,
            "6.2.0",
            "Returns an element after popping it from one list and pushing it to another. Deletes the list if the last element was moved.",
            "O(1)",
            lmove,
            LMOVE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[
            KeySpec::index(1, kf::RW | kf::ACCESS | kf::DELETE),
            KeySpec::index(2, kf::RW | kf::INSERT),
        ],
        doc_flags: doc_flags::DEPRECATED,
        deprecated_since: Some("6.2.0"),
        replaced_by: Some("`LMOVE` with the `RIGHT` and `LEFT` arguments"),
        ..spec(
            GROUP,
            "rpoplpush",
            3,
            WRITE | DENYOOM,
            TWO,
            WRITE_SLOW,
            "1.2.0",
            "Returns the last element of a list after removing and pushing it to another list. Deletes the list if the last element was popped.",
            "O(1)",
            rpoplpush,
            RPOPLPUSH_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS | kf::DELETE).keynum(0, 1, 1)],
        ..spec(
            GROUP,
            "lmpop",
            -4,
            WRITE,
            MOVABLE,
            WRITE_SLOW,
            "7.0.0",
            "Returns multiple elements from a list after removing them. Deletes the list if the last element was popped.",
            "O(N+M) where N is the number of provided keys and M is the number of elements returned.",
            lmpop,
            LMPOP_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS | kf::DELETE).range(-2, 1, 0)],
        history: &[(
            "6.0.0",
            "`timeout` is interpreted as a double instead of an integer.",
        )],
        ..spec(
            GROUP,
            "blpop",
            -3,
            WRITE | BLOCKING,
            BLOCK_KEYS,
            BLOCK_SLOW,
            "2.0.0",
            "Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.",
            "O(N) where N is the number of provided keys.",
            blpop,
            BPOP_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS | kf::DELETE).range(-2, 1, 0)],
        history: &[(
            "6.0.0",
            "`timeout` is interpreted as a double instead of an integer.",
        )],
        ..spec(
            GROUP,
            "brpop",
            -3,
            WRITE | BLOCKING,
            BLOCK_KEYS,
            BLOCK_SLOW,
            "2.0.0",
            "Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.",
            "O(N) where N is the number of provided keys.",
            brpop,
            BPOP_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[
            KeySpec::index(1, kf::RW | kf::ACCESS | kf::DELETE),
            KeySpec::index(2, kf::RW | kf::INSERT),
        ],
        ..spec(
            GROUP,
            "blmove",
            6,
            WRITE | DENYOOM | BLOCKING,
            TWO,
            BLOCK_SLOW,
            "6.2.0",
            "Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise. Deletes the list if the last element was moved.",
            "O(1)",
            blmove,
            BLMOVE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[
            KeySpec::index(1, kf::RW | kf::ACCESS | kf::DELETE),
            KeySpec::index(2, kf::RW | kf::INSERT),
        ],
        history: &[(
            "6.0.0",
            "`timeout` is interpreted as a double instead of an integer.",
        )],
        doc_flags: doc_flags::DEPRECATED,
        deprecated_since: Some("6.2.0"),
        replaced_by: Some("`BLMOVE` with the `RIGHT` and `LEFT` arguments"),
        ..spec(
            GROUP,
            "brpoplpush",
            4,
            WRITE | DENYOOM | BLOCKING,
            TWO,
            BLOCK_SLOW,
            "2.2.0",
            "Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise. Deletes the list if the last element was popped.",
            "O(1)",
            brpoplpush,
            BRPOPLPUSH_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(2, kf::RW | kf::ACCESS | kf::DELETE).keynum(0, 1, 1)],
        ..spec(
            GROUP,
            "blmpop",
            -5,
            WRITE | BLOCKING,
            MOVABLE,
            BLOCK_SLOW,
            "7.0.0",
            "Pops the first element from one of multiple lists. Blocks until an element is available otherwise. Deletes the list if the last element was popped.",
            "O(N+M) where N is the number of provided keys and M is the number of elements returned.",
            blmpop,
            BLMPOP_ARGS,
        )
    },
];

/// What a key holds, for the pops that choose among keys.
enum KeyState {
    Missing,
    WrongType,
    List,
}

fn key_state(ctx: &mut Ctx<'_>, key: &[u8]) -> KeyState {
    let db = ctx.session.db;
    let h = ctx.key_hash(key);
    match lookup_typed(ctx.srv, db, key, h, ctx.now_ms, false, Value::as_list_mut) {
        Ok(Some(_)) => KeyState::List,
        Ok(None) => KeyState::Missing,
        Err(WrongType) => KeyState::WrongType,
    }
}

/// The pop a blocking or multi-key pop is propagated as.
fn pop_verb(end: End) -> &'static [u8] {
    match end {
        End::Left => b"LPOP",
        End::Right => b"RPOP",
    }
}

fn end_event(end: End, push: bool) -> &'static str {
    match (end, push) {
        (End::Left, true) => "lpush",
        (End::Right, true) => "rpush",
        (End::Left, false) => "lpop",
        (End::Right, false) => "rpop",
    }
}

/// Push `items` at `end` of the list at `key`, creating it unless
/// `only_existing`; returns the new length (0 when it did nothing).
/// The caller has checked the type.
fn push_to(ctx: &mut Ctx<'_>, key: &[u8], end: End, items: &[&[u8]], only_existing: bool) -> usize {
    let db = ctx.session.db;
    let h = ctx.key_hash(key);
    let limits = ctx.srv.config.encoding;
    let exists = matches!(key_state(ctx, key), KeyState::List);
    if !exists {
        if only_existing {
            return 0;
        }
        super::add_key(ctx, db, h, key, Entry::new(Value::List(List::new())));
    }
    let len = match ctx.srv.keyspace.dbs[db]
        .get(h, key, ctx.now_ms)
        .and_then(|e| e.boxed_mut())
    {
        Some(Value::List(l)) => {
            l.push(end, items, &limits);
            l.len()
        }
        _ => unreachable!("checked or created above"),
    };
    ctx.notify(notify::LIST, end_event(end, true), key);
    ctx.touched(db, key);
    len
}

fn push_generic(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, end: End, only_existing: bool) {
    let key = argv.get(1);
    if let KeyState::WrongType = key_state(ctx, key) {
        return ctx.error(WRONGTYPE);
    }
    let items: Vec<&[u8]> = (2..argv.len()).map(|i| argv.get(i)).collect();
    let n = push_to(ctx, key, end, &items, only_existing);
    if n > 0 {
        ctx.changed_elements(items.len());
    }
    ctx.reply.int(n as i64);
}

fn lpush(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    push_generic(ctx, argv, End::Left, false);
}
fn rpush(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    push_generic(ctx, argv, End::Right, false);
}
fn lpushx(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    push_generic(ctx, argv, End::Left, true);
}
fn rpushx(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    push_generic(ctx, argv, End::Right, true);
}

/// Pop up to `n` from the (existing, typed) list at `key`: fires the pop
/// event, deletes the key when emptied.
fn pop_from(ctx: &mut Ctx<'_>, key: &[u8], end: End, n: usize) -> Vec<Vec<u8>> {
    let limits = ctx.srv.config.encoding;
    let popped = match list_for(ctx, key) {
        Some(l) => l.pop(end, n, &limits),
        None => Vec::new(),
    };
    if !popped.is_empty() {
        after_removal(ctx, key, notify::LIST, end_event(end, false));
    }
    popped
}

/// The list at `key` without type errors (callers checked).
fn list_for<'c>(ctx: &'c mut Ctx<'_>, key: &[u8]) -> Option<&'c mut List> {
    let db = ctx.session.db;
    let h = ctx.key_hash(key);
    let now = ctx.now_ms;
    lookup_typed(ctx.srv, db, key, h, now, false, Value::as_list_mut)
        .ok()
        .flatten()
}

fn pop_generic(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, end: End) {
    if argv.len() > 3 {
        let name = String::from_utf8_lossy(argv.get(0)).to_lowercase();
        return ctx.error(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
    }
    let count = if argv.len() == 3 {
        match super::parse_positive(argv.get(2)) {
            Some(n) => Some(n as usize),
            None => return ctx.error(super::NOT_POSITIVE),
        }
    } else {
        None
    };
    let key = argv.get(1);
    match key_state(ctx, key) {
        KeyState::WrongType => return ctx.error(WRONGTYPE),
        KeyState::Missing => {
            return match count {
                Some(_) => ctx.reply.null_array(),
                None => ctx.reply.null(),
            };
        }
        KeyState::List => {}
    }
    match count {
        Some(0) => ctx.reply.array_len(0),
        Some(n) => {
            let popped = pop_from(ctx, key, end, n);
            ctx.reply.array_len(popped.len());
            for e in &popped {
                ctx.reply.bulk(e);
            }
        }
        None => {
            let popped = pop_from(ctx, key, end, 1);
            ctx.reply.bulk(&popped[0]);
        }
    }
}

fn lpop(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    pop_generic(ctx, argv, End::Left);
}
fn rpop(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    pop_generic(ctx, argv, End::Right);
}

fn llen(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let n = typed_or_reply!(ctx, argv.get(1), true, Value::as_list_mut).map_or(0, |l| l.len());
    ctx.reply.int(n as i64);
}

/// Valkey's index normalisation: negative counts from the end.
fn norm(i: i64, len: usize) -> i64 {
    if i < 0 { len as i64 + i } else { i }
}

fn lrange(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let (Some(start), Some(stop)) = (parse_i64(argv.get(2)), parse_i64(argv.get(3))) else {
        return ctx.error(NOT_INT);
    };
    let Some(l) = typed_or_reply!(ctx, argv.get(1), true, Value::as_list_mut) else {
        return ctx.reply.array_len(0);
    };
    let len = l.len();
    let start = norm(start, len).max(0);
    let stop = norm(stop, len).min(len as i64 - 1);
    if start > stop || start >= len as i64 {
        return ctx.reply.array_len(0);
    }
    let r = &mut ctx.reply;
    r.array_len((stop - start + 1) as usize);
    l.for_each_in_range(start as usize, stop as usize, |e| r.bulk(e));
}

fn lindex(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    // Valkey looks the key up before parsing the index.
    let Some(l) = typed_or_reply!(ctx, argv.get(1), true, Value::as_list_mut) else {
        return ctx.reply.null();
    };
    let Some(i) = parse_i64(argv.get(2)) else {
        return ctx.error(NOT_INT);
    };
    let i = norm(i, l.len());
    match (i >= 0).then(|| l.get(i as usize)).flatten() {
        Some(e) => ctx.reply.bulk(&e),
        None => ctx.reply.null(),
    }
}

fn lset(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    let limits = ctx.srv.config.encoding;
    // Valkey looks the key up before parsing the index.
    let Some(l) = typed_or_reply!(ctx, key, false, Value::as_list_mut) else {
        return ctx.error("ERR no such key");
    };
    let Some(i) = parse_i64(argv.get(2)) else {
        return ctx.error(NOT_INT);
    };
    let i = norm(i, l.len());
    if i < 0 || i as usize >= l.len() {
        return ctx.error("ERR index out of range");
    }
    l.set(i as usize, argv.get(3), &limits);
    ctx.reply.ok();
    let db = ctx.session.db;
    ctx.notify(notify::LIST, "lset", key);
    ctx.touched(db, key);
}

fn linsert(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    let after = if argv.get(2).eq_ignore_ascii_case(b"after") {
        true
    } else if argv.get(2).eq_ignore_ascii_case(b"before") {
        false
    } else {
        return ctx.error(SYNTAX_ERR);
    };
    let limits = ctx.srv.config.encoding;
    let Some(l) = typed_or_reply!(ctx, key, false, Value::as_list_mut) else {
        return ctx.reply.int(0);
    };
    let (pivot, elem) = (argv.get(3), argv.get(4));
    let Some(at) = l.iter().position(|e| e == pivot) else {
        return ctx.reply.int(-1);
    };
    l.insert(at, after, elem, &limits);
    ctx.reply.int(l.len() as i64);
    let db = ctx.session.db;
    ctx.notify(notify::LIST, "linsert", key);
    ctx.touched(db, key);
}

fn lrem(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    let Some(count) = parse_i64(argv.get(2)) else {
        return ctx.error(NOT_INT);
    };
    let limits = ctx.srv.config.encoding;
    let Some(l) = typed_or_reply!(ctx, key, false, Value::as_list_mut) else {
        return ctx.reply.int(0);
    };
    let removed = l.remove(argv.get(3), count, &limits);
    ctx.reply.int(removed as i64);
    if removed > 0 {
        after_removal(ctx, key, notify::LIST, "lrem");
    }
}

fn ltrim(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    let (Some(start), Some(stop)) = (parse_i64(argv.get(2)), parse_i64(argv.get(3))) else {
        return ctx.error(NOT_INT);
    };
    let limits = ctx.srv.config.encoding;
    let Some(l) = typed_or_reply!(ctx, key, false, Value::as_list_mut) else {
        return ctx.reply.ok();
    };
    let len = l.len();
    let start = norm(start, len).max(0);
    let stop = norm(stop, len).min(len as i64 - 1);
    if start > stop || start >= len as i64 {
        // An empty range: the list empties and the key goes.
        l.trim(1, 0, &limits);
    } else if start > 0 || stop < len as i64 - 1 {
        l.trim(start as usize, stop as usize, &limits);
    } else {
        // Nothing removed: Valkey still fires `ltrim` and signals the key,
        // but counts no change (so nothing is propagated).
        ctx.reply.ok();
        ctx.notify(notify::LIST, "ltrim", key);
        let db = ctx.session.db;
        return super::signal_unchanged(ctx, db, key);
    }
    ctx.reply.ok();
    after_removal(ctx, key, notify::LIST, "ltrim");
}

fn lpos(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let mut rank: i64 = 1;
    let mut count: Option<usize> = None;
    let mut maxlen: usize = 0;
    let mut j = 3;
    while j < argv.len() {
        let o = argv.get(j);
        let more = j + 1 < argv.len();
        if o.eq_ignore_ascii_case(b"rank") && more {
            rank = match parse_i64(argv.get(j + 1)) {
                None => return ctx.error(NOT_INT),
                Some(i64::MIN) => {
                    return ctx.error(&format!(
                        "ERR value is out of range, value must between {} and {}",
                        -i64::MAX,
                        i64::MAX
                    ));
                }
                Some(0) => {
                    return ctx.error(
                        "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                    );
                }
                Some(n) => n,
            };
        } else if o.eq_ignore_ascii_case(b"count") && more {
            match parse_i64(argv.get(j + 1)) {
                Some(n) if n >= 0 => count = Some(n as usize),
                _ => return ctx.error("ERR COUNT can't be negative"),
            }
        } else if o.eq_ignore_ascii_case(b"maxlen") && more {
            match parse_i64(argv.get(j + 1)) {
                Some(n) if n >= 0 => maxlen = n as usize,
                _ => return ctx.error("ERR MAXLEN can't be negative"),
            }
        } else {
            return ctx.error(SYNTAX_ERR);
        }
        j += 2;
    }
    let Some(l) = typed_or_reply!(ctx, argv.get(1), true, Value::as_list_mut) else {
        return match count {
            Some(_) => ctx.reply.array_len(0),
            None => ctx.reply.null(),
        };
    };
    let elem = argv.get(2);
    let want = match count {
        Some(0) => usize::MAX,
        Some(n) => n,
        None => 1,
    };
    let found = l.positions(elem, rank, want, maxlen);
    let r = &mut ctx.reply;
    match count {
        Some(_) => {
            r.array_len(found.len());
            for i in found {
                r.int(i as i64);
            }
        }
        None => match found.first() {
            Some(&i) => r.int(i as i64),
            None => r.null(),
        },
    }
}

fn parse_end(b: &[u8]) -> Option<End> {
    if b.eq_ignore_ascii_case(b"left") {
        Some(End::Left)
    } else if b.eq_ignore_ascii_case(b"right") {
        Some(End::Right)
    } else {
        None
    }
}

/// LMOVE's body once `src` is known to hold a list and `dst` to hold a
/// list or nothing: pop, push, reply with the element. Valkey's order of
/// events: the push on the destination, then the pop on the source.
fn do_move(ctx: &mut Ctx<'_>, src: &[u8], dst: &[u8], from: End, to: End) -> bool {
    let limits = ctx.srv.config.encoding;
    let Some(elem) = list_for(ctx, src).and_then(|l| l.pop(from, 1, &limits).pop()) else {
        ctx.reply.null();
        return false;
    };
    push_to(ctx, dst, to, &[&elem], false);
    ctx.reply.bulk(&elem);
    after_removal(ctx, src, notify::LIST, end_event(from, false));
    // Both keys were touched, but Valkey counts a move as one change
    // (INFO rdb_changes_since_last_save, save points).
    ctx.srv.persist.dirty -= 1;
    true
}

/// Type checks of LMOVE: `Ok(false)` when the source is missing.
fn move_check(ctx: &mut Ctx<'_>, src: &[u8], dst: &[u8]) -> Result<bool, ()> {
    match key_state(ctx, src) {
        KeyState::Missing => Ok(false),
        KeyState::WrongType => Err(()),
        KeyState::List => match key_state(ctx, dst) {
            KeyState::WrongType => Err(()),
            _ => Ok(true),
        },
    }
}

/// True if an element moved.
fn lmove_generic(ctx: &mut Ctx<'_>, src: &[u8], dst: &[u8], from: End, to: End) -> bool {
    match move_check(ctx, src, dst) {
        Err(()) => ctx.error(WRONGTYPE),
        Ok(false) => ctx.reply.null(),
        Ok(true) => return do_move(ctx, src, dst, from, to),
    }
    false
}

fn lmove(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let (Some(from), Some(to)) = (parse_end(argv.get(3)), parse_end(argv.get(4))) else {
        return ctx.error(SYNTAX_ERR);
    };
    lmove_generic(ctx, argv.get(1), argv.get(2), from, to);
}

fn rpoplpush(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    lmove_generic(ctx, argv.get(1), argv.get(2), End::Right, End::Left);
}

/// The first key, in order, holding a list; `Err` at a key of another
/// type before it.
fn first_list<'a>(
    ctx: &mut Ctx<'_>,
    keys: impl Iterator<Item = &'a [u8]>,
) -> Result<Option<&'a [u8]>, ()> {
    for k in keys {
        match key_state(ctx, k) {
            KeyState::Missing => {}
            KeyState::WrongType => return Err(()),
            KeyState::List => return Ok(Some(k)),
        }
    }
    Ok(None)
}

/// `[key, [elements]]`.
fn reply_key_elems(ctx: &mut Ctx<'_>, key: &[u8], elems: &[Vec<u8>]) {
    let r = &mut ctx.reply;
    r.array_len(2);
    r.bulk(key);
    r.array_len(elems.len());
    for e in elems {
        r.bulk(e);
    }
}

fn lmpop(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let a = match parse_mpop(argv, 1, parse_end) {
        Ok(a) => a,
        Err(e) => return ctx.error(e),
    };
    let keys = (a.first_key..a.first_key + a.numkeys).map(|i| argv.get(i));
    match first_list(ctx, keys) {
        Err(()) => ctx.error(WRONGTYPE),
        Ok(None) => ctx.reply.null_array(),
        Ok(Some(key)) => {
            let popped = pop_from(ctx, key, a.side, a.count);
            reply_key_elems(ctx, key, &popped);
            super::propagate_pop_count(ctx, pop_verb(a.side), key, popped.len());
        }
    }
}

// ---- blocking forms ----------------------------------------------------------

/// BLPOP/BRPOP: `[key, element]` from the first non-empty key, or block.
fn bpop(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, end: End) {
    let last = argv.len() - 1;
    let deadline = match parse_timeout(argv.get(last), ctx.now_ms) {
        Ok(d) => d,
        Err(e) => return ctx.error(e),
    };
    let keys = (1..last).map(|i| argv.get(i));
    match first_list(ctx, keys.clone()) {
        Err(()) => ctx.error(WRONGTYPE),
        Ok(Some(key)) => {
            let popped = pop_from(ctx, key, end, 1);
            let r = &mut ctx.reply;
            r.array_len(2);
            r.bulk(key);
            r.bulk(&popped[0]);
            ctx.propagate(&[pop_verb(end), key]);
        }
        Ok(None) => {
            let keys: Vec<&[u8]> = keys.collect();
            ctx.block(&keys, deadline, OnTimeout::NullArray);
        }
    }
}

fn blpop(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    bpop(ctx, argv, End::Left);
}
fn brpop(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    bpop(ctx, argv, End::Right);
}

/// BLMOVE and BRPOPLPUSH; a move is propagated as `verb` (LMOVE or
/// RPOPLPUSH) with the arguments before the timeout, as sent.
fn blmove_generic(
    ctx: &mut Ctx<'_>,
    argv: ArgvRef<'_>,
    from: End,
    to: End,
    timeout_at: usize,
    verb: &[u8],
) {
    let deadline = match parse_timeout(argv.get(timeout_at), ctx.now_ms) {
        Ok(d) => d,
        Err(e) => return ctx.error(e),
    };
    let (src, dst) = (argv.get(1), argv.get(2));
    match key_state(ctx, src) {
        KeyState::WrongType => ctx.error(WRONGTYPE),
        KeyState::Missing => ctx.block(&[src], deadline, OnTimeout::NullBulk),
        KeyState::List => {
            if lmove_generic(ctx, src, dst, from, to) && ctx.srv.effects.on() {
                let mut out: Vec<&[u8]> = vec![verb];
                out.extend((1..timeout_at).map(|i| argv.get(i)));
                ctx.propagate(&out);
            }
        }
    }
}

fn blmove(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let (Some(from), Some(to)) = (parse_end(argv.get(3)), parse_end(argv.get(4))) else {
        return ctx.error(SYNTAX_ERR);
    };
    blmove_generic(ctx, argv, from, to, 5, b"LMOVE");
}

fn brpoplpush(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    blmove_generic(ctx, argv, End::Right, End::Left, 3, b"RPOPLPUSH");
}

fn blmpop(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    // Valkey checks numkeys, LEFT|RIGHT and COUNT before the timeout.
    let a = match parse_mpop(argv, 2, parse_end) {
        Ok(a) => a,
        Err(e) => return ctx.error(e),
    };
    let deadline = match parse_timeout(argv.get(1), ctx.now_ms) {
        Ok(d) => d,
        Err(e) => return ctx.error(e),
    };
    let keys = (a.first_key..a.first_key + a.numkeys).map(|i| argv.get(i));
    match first_list(ctx, keys.clone()) {
        Err(()) => ctx.error(WRONGTYPE),
        Ok(Some(key)) => {
            let popped = pop_from(ctx, key, a.side, a.count);
            reply_key_elems(ctx, key, &popped);
            super::propagate_pop_count(ctx, pop_verb(a.side), key, popped.len());
        }
        Ok(None) => {
            let keys: Vec<&[u8]> = keys.collect();
            ctx.block(&keys, deadline, OnTimeout::NullArray);
        }
    }
}
