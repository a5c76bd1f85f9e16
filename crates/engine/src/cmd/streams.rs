//! Stream commands: XADD XLEN XRANGE XREVRANGE XDEL XTRIM XSETID XREAD
//! XREADGROUP XGROUP XACK XPENDING XCLAIM XAUTOCLAIM XINFO, with Valkey
//! 8.1's replies, errors, keyspace events and propagation (`t_stream.c`).
//! The value (blocks, groups, PELs) lives in `store::types::stream`.
//!
//! Propagation follows Valkey: XADD goes out with the ID it chose (and an
//! approximate trim as the exact one it did), XREADGROUP, XCLAIM and
//! XAUTOCLAIM as one `XCLAIM ... FORCE JUSTID LASTID` per entry they
//! handed out (plus `XGROUP SETID` / `XGROUP CREATECONSUMER` where an
//! XCLAIM cannot carry the change).

use super::{NOT_INT, SYNTAX_ERR, WrongType, lookup_typed};
use crate::batch::ArgvRef;
use crate::blocking::OnTimeout;
use crate::cmd::strings::WRONGTYPE;
use crate::command::flags::*;
use crate::command::key_flags as kf;
use crate::command::{ArgSpec, CommandSpec, Ctx, KeySpec, notify, spec};
use crate::num::parse_i64;
use resp::ReplyWriter;
use std::sync::Arc;
use store::types::stream::{
    Consumer, ENTRIES_READ_INVALID, Elem, LISTPACK_MAX_SIZE, RawEntry, Stream, Trim,
};
use store::{Entry, StreamId, Value};

const GROUP: &str = "stream";

const READ_FAST: &[&str] = &["read", "stream", "fast"];
const READ_SLOW: &[&str] = &["read", "stream", "slow"];
const WRITE_FAST: &[&str] = &["write", "stream", "fast"];
const WRITE_SLOW: &[&str] = &["write", "stream", "slow"];
const BLOCK_READ: &[&str] = &["read", "stream", "slow", "blocking"];
const BLOCK_WRITE: &[&str] = &["write", "stream", "slow", "blocking"];

const KEY: ArgSpec = ArgSpec::key("key", 0);
const ONE: (i32, i32, i32) = (1, 1, 1);
const MOVABLE: (i32, i32, i32) = (0, 0, 0);

const TRIM_ARGS: ArgSpec = ArgSpec::block(
    "trim",
    &[
        ArgSpec::oneof(
            "strategy",
            &[
                ArgSpec::pure_token("maxlen", "MAXLEN"),
                ArgSpec::pure_token("minid", "MINID").since("6.2.0"),
            ],
        ),
        ArgSpec::oneof(
            "operator",
            &[
                ArgSpec::pure_token("equal", "="),
                ArgSpec::pure_token("approximately", "~"),
            ],
        )
        .optional(),
        ArgSpec::string("threshold"),
        ArgSpec::integer("count")
            .token("LIMIT")
            .optional()
            .since("6.2.0"),
    ],
);
const XADD_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::pure_token("nomkstream", "NOMKSTREAM")
        .optional()
        .since("6.2.0"),
    TRIM_ARGS.optional(),
    ArgSpec::oneof(
        "id-selector",
        &[ArgSpec::pure_token("auto-id", "*"), ArgSpec::string("id")],
    ),
    ArgSpec::block(
        "data",
        &[ArgSpec::string("field"), ArgSpec::string("value")],
    )
    .multiple(),
];
const XTRIM_ARGS: &[ArgSpec] = &[KEY, TRIM_ARGS];
const KEY_ONLY: &[ArgSpec] = &[KEY];
const XRANGE_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::string("start"),
    ArgSpec::string("end"),
    ArgSpec::integer("count").token("COUNT").optional(),
];
const XREVRANGE_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::string("end"),
    ArgSpec::string("start"),
    ArgSpec::integer("count").token("COUNT").optional(),
];
const XDEL_ARGS: &[ArgSpec] = &[KEY, ArgSpec::string("id").multiple()];
const XSETID_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::string("last-id"),
    ArgSpec::integer("entries-added")
        .token("ENTRIESADDED")
        .optional()
        .since("7.0.0"),
    ArgSpec::string("max-deleted-id")
        .token("MAXDELETEDID")
        .optional()
        .since("7.0.0"),
];
const STREAMS_BLOCK: ArgSpec = ArgSpec::block(
    "streams",
    &[
        ArgSpec::key("key", 0).multiple(),
        ArgSpec::string("id").multiple(),
    ],
)
.token("STREAMS");
const XREAD_ARGS: &[ArgSpec] = &[
    ArgSpec::integer("count").token("COUNT").optional(),
    ArgSpec::integer("milliseconds").token("BLOCK").optional(),
    STREAMS_BLOCK,
];
const XREADGROUP_ARGS: &[ArgSpec] = &[
    ArgSpec::block(
        "group-block",
        &[ArgSpec::string("group"), ArgSpec::string("consumer")],
    )
    .token("GROUP"),
    ArgSpec::integer("count").token("COUNT").optional(),
    ArgSpec::integer("milliseconds").token("BLOCK").optional(),
    ArgSpec::pure_token("noack", "NOACK").optional(),
    STREAMS_BLOCK,
];
const XACK_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::string("group"),
    ArgSpec::string("id").multiple(),
];
const XPENDING_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::string("group"),
    ArgSpec::block(
        "filters",
        &[
            ArgSpec::integer("min-idle-time")
                .token("IDLE")
                .optional()
                .since("6.2.0"),
            ArgSpec::string("start"),
            ArgSpec::string("end"),
            ArgSpec::integer("count"),
            ArgSpec::string("consumer").optional(),
        ],
    )
    .optional(),
];
const XCLAIM_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::string("group"),
    ArgSpec::string("consumer"),
    ArgSpec::string("min-idle-time"),
    ArgSpec::string("id").multiple(),
    ArgSpec::integer("ms").token("IDLE").optional(),
    ArgSpec::unix_time("unix-time-milliseconds")
        .token("TIME")
        .optional(),
    ArgSpec::integer("count").token("RETRYCOUNT").optional(),
    ArgSpec::pure_token("force", "FORCE").optional(),
    ArgSpec::pure_token("justid", "JUSTID").optional(),
    ArgSpec::string("lastid").token("LASTID").optional(),
];
const XAUTOCLAIM_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::string("group"),
    ArgSpec::string("consumer"),
    ArgSpec::string("min-idle-time"),
    ArgSpec::string("start"),
    ArgSpec::integer("count").token("COUNT").optional(),
    ArgSpec::pure_token("justid", "JUSTID").optional(),
];

#[allow(clippy::too_many_arguments)]
const fn sub(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: (i32, i32, i32),
    acl: &'static [&'static str],
    since: &'static str,
    summary: &'static str,
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
        group: GROUP,
        since,
        summary,
        func: Some(func),
        args,
        ..CommandSpec::DEFAULT
    }
}

const GROUP_NAME: ArgSpec = ArgSpec::string("group");
const ID_OR_LAST: ArgSpec = ArgSpec::oneof(
    "id-selector",
    &[ArgSpec::string("id"), ArgSpec::pure_token("new-id", "$")],
);
const ENTRIESREAD: ArgSpec = ArgSpec::integer("entriesread")
    .token("ENTRIESREAD")
    .optional()
    .display("entries-read");
const XGROUP_CREATE_ARGS: &[ArgSpec] = &[
    KEY,
    GROUP_NAME,
    ID_OR_LAST,
    ArgSpec::pure_token("mkstream", "MKSTREAM").optional(),
    ENTRIESREAD,
];
const XGROUP_SETID_ARGS: &[ArgSpec] = &[KEY, GROUP_NAME, ID_OR_LAST, ENTRIESREAD];
const XGROUP_CONSUMER_ARGS: &[ArgSpec] = &[KEY, GROUP_NAME, ArgSpec::string("consumer")];
const XGROUP_DESTROY_ARGS: &[ArgSpec] = &[KEY, GROUP_NAME];
const XINFO_CONSUMERS_ARGS: &[ArgSpec] = &[KEY, GROUP_NAME];
const XINFO_STREAM_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::block(
        "full-block",
        &[
            ArgSpec::pure_token("full", "FULL"),
            ArgSpec::integer("count").token("COUNT").optional(),
        ],
    )
    .optional(),
];

const SUB_KEY: (i32, i32, i32) = (2, 2, 1);

const READ_KEY: KeySpec = KeySpec::index(1, kf::RO | kf::ACCESS);
const SUB_READ_KEY: KeySpec = KeySpec::index(2, kf::RO | kf::ACCESS);
const EXCLUSIVE_RANGES: &[(&str, &str)] = &[("6.2.0", "Added exclusive ranges.")];

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::UPDATE)
            .notes("UPDATE instead of INSERT because of the optional trimming feature")],
        tips: &["nondeterministic_output"],
        history: &[
            (
                "6.2.0",
                "Added the `NOMKSTREAM` option, `MINID` trimming strategy and the `LIMIT` option.",
            ),
            ("7.0.0", "Added support for the `<ms>-*` explicit ID form."),
        ],
        ..spec(
            GROUP,
            "xadd",
            -5,
            WRITE | DENYOOM | FAST,
            ONE,
            WRITE_FAST,
            "5.0.0",
            "Appends a new message to a stream. Creates the key if it doesn't exist.",
            "O(1) when adding a new entry, O(N) when trimming where N being the number of entries evicted.",
            xadd,
            XADD_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO)],
        ..spec(
            GROUP,
            "xlen",
            2,
            READONLY | FAST,
            ONE,
            READ_FAST,
            "5.0.0",
            "Return the number of messages in a stream.",
            "O(1)",
            xlen,
            KEY_ONLY,
        )
    },
    CommandSpec {
        key_specs: &[READ_KEY],
        history: EXCLUSIVE_RANGES,
        ..spec(
            GROUP,
            "xrange",
            -4,
            READONLY,
            ONE,
            READ_SLOW,
            "5.0.0",
            "Returns the messages from a stream within a range of IDs.",
            "O(N) with N being the number of elements being returned. If N is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1).",
            xrange,
            XRANGE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[READ_KEY],
        history: EXCLUSIVE_RANGES,
        ..spec(
            GROUP,
            "xrevrange",
            -4,
            READONLY,
            ONE,
            READ_SLOW,
            "5.0.0",
            "Returns the messages from a stream within a range of IDs in reverse order.",
            "O(N) with N being the number of elements returned. If N is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1).",
            xrevrange,
            XREVRANGE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::DELETE)],
        ..spec(
            GROUP,
            "xdel",
            -3,
            WRITE | FAST,
            ONE,
            WRITE_FAST,
            "5.0.0",
            "Returns the number of messages after removing them from a stream.",
            "O(1) for each single item to delete in the stream, regardless of the stream size.",
            xdel,
            XDEL_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::DELETE)],
        tips: &["nondeterministic_output"],
        history: &[(
            "6.2.0",
            "Added the `MINID` trimming strategy and the `LIMIT` option.",
        )],
        ..spec(
            GROUP,
            "xtrim",
            -4,
            WRITE,
            ONE,
            WRITE_SLOW,
            "5.0.0",
            "Deletes messages from the beginning of a stream.",
            "O(N), with N being the number of evicted entries. Constant times are very small however, since entries are organized in macro nodes containing multiple entries that can be released with a single deallocation.",
            xtrim,
            XTRIM_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::UPDATE)],
        history: &[(
            "7.0.0",
            "Added the `entries_added` and `max_deleted_entry_id` arguments.",
        )],
        ..spec(
            GROUP,
            "xsetid",
            -3,
            WRITE | DENYOOM | FAST,
            ONE,
            WRITE_FAST,
            "5.0.0",
            "An internal command for replicating stream values.",
            "O(1)",
            xsetid,
            XSETID_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::keyword("STREAMS", 1, kf::RO | kf::ACCESS).range(-1, 1, 2)],
        ..spec(
            GROUP,
            "xread",
            -4,
            READONLY | BLOCKING,
            MOVABLE,
            BLOCK_READ,
            "5.0.0",
            "Returns messages from multiple streams with IDs greater than the ones requested. Blocks until a message is available otherwise.",
            "",
            xread,
            XREAD_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::keyword("STREAMS", 4, kf::RO | kf::ACCESS).range(-1, 1, 2)],
        ..spec(
            GROUP,
            "xreadgroup",
            -7,
            WRITE | BLOCKING,
            MOVABLE,
            BLOCK_WRITE,
            "5.0.0",
            "Returns new or historical messages from a stream for a consumer in a group. Blocks until a message is available otherwise.",
            "For each stream mentioned: O(M) with M being the number of elements returned. If M is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1). On the other side when XREADGROUP blocks, XADD will pay the O(N) time in order to serve the N clients blocked on the stream getting new data.",
            xreadgroup,
            XREADGROUP_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::UPDATE)],
        ..spec(
            GROUP,
            "xack",
            -4,
            WRITE | FAST,
            ONE,
            WRITE_FAST,
            "5.0.0",
            "Returns the number of messages that were successfully acknowledged by the consumer group member of a stream.",
            "O(1) for each message ID processed.",
            xack,
            XACK_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[READ_KEY],
        tips: &["nondeterministic_output"],
        history: &[(
            "6.2.0",
            "Added the `IDLE` option and exclusive range intervals.",
        )],
        ..spec(
            GROUP,
            "xpending",
            -3,
            READONLY,
            ONE,
            READ_SLOW,
            "5.0.0",
            "Returns the information and entries from a stream consumer group's pending entries list.",
            "O(N) with N being the number of elements returned, so asking for a small fixed number of entries per call is O(1). O(M), where M is the total number of entries scanned when used with the IDLE filter. When the command returns just the summary and the list of consumers is small, it runs in O(1) time; otherwise, an additional O(N) time for iterating every consumer.",
            xpending,
            XPENDING_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::UPDATE)],
        tips: &["nondeterministic_output"],
        ..spec(
            GROUP,
            "xclaim",
            -6,
            WRITE | FAST,
            ONE,
            WRITE_FAST,
            "5.0.0",
            "Changes, or acquires, ownership of a message in a consumer group, as if the message was delivered a consumer group member.",
            "O(log N) with N being the number of messages in the PEL of the consumer group.",
            xclaim,
            XCLAIM_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::DELETE)],
        tips: &["nondeterministic_output"],
        history: &[(
            "7.0.0",
            "Added an element to the reply array, containing deleted entries the command cleared from the PEL",
        )],
        ..spec(
            GROUP,
            "xautoclaim",
            -6,
            WRITE | FAST,
            ONE,
            WRITE_FAST,
            "6.2.0",
            "Changes, or acquires, ownership of messages in a consumer group, as if the messages were delivered to as consumer group member.",
            "O(1) if COUNT is small.",
            xautoclaim,
            XAUTOCLAIM_ARGS,
        )
    },
    CommandSpec {
        name: "xgroup",
        arity: -2,
        acl_categories: &["slow"],
        group: GROUP,
        since: "5.0.0",
        summary: "A container for consumer groups commands.",
        complexity: "Depends on subcommand.",
        subcommands: &[
            CommandSpec {
                key_specs: &[KeySpec::index(2, kf::RW | kf::INSERT)],
                history: &[("7.0.0", "Added the `entries_read` named argument.")],
                ..sub(
                    "create",
                    -5,
                    WRITE | DENYOOM,
                    SUB_KEY,
                    &["write", "stream", "slow"],
                    "5.0.0",
                    "Creates a consumer group.",
                    xgroup,
                    XGROUP_CREATE_ARGS,
                )
            },
            CommandSpec {
                key_specs: &[KeySpec::index(2, kf::RW | kf::INSERT)],
                ..sub(
                    "createconsumer",
                    5,
                    WRITE | DENYOOM,
                    SUB_KEY,
                    &["write", "stream", "slow"],
                    "6.2.0",
                    "Creates a consumer in a consumer group.",
                    xgroup,
                    XGROUP_CONSUMER_ARGS,
                )
            },
            CommandSpec {
                key_specs: &[KeySpec::index(2, kf::RW | kf::DELETE)],
                ..sub(
                    "delconsumer",
                    5,
                    WRITE,
                    SUB_KEY,
                    &["write", "stream", "slow"],
                    "5.0.0",
                    "Deletes a consumer from a consumer group.",
                    xgroup,
                    XGROUP_CONSUMER_ARGS,
                )
            },
            CommandSpec {
                key_specs: &[KeySpec::index(2, kf::RW | kf::DELETE)],
                complexity: "O(N) where N is the number of entries in the group's pending entries list (PEL).",
                ..sub(
                    "destroy",
                    4,
                    WRITE,
                    SUB_KEY,
                    &["write", "stream", "slow"],
                    "5.0.0",
                    "Destroys a consumer group.",
                    xgroup,
                    XGROUP_DESTROY_ARGS,
                )
            },
            CommandSpec {
                key_specs: &[KeySpec::index(2, kf::RW | kf::UPDATE)],
                history: &[("7.0.0", "Added the optional `entries_read` argument.")],
                ..sub(
                    "setid",
                    -5,
                    WRITE,
                    SUB_KEY,
                    &["write", "stream", "slow"],
                    "5.0.0",
                    "Sets the last-delivered ID of a consumer group.",
                    xgroup,
                    XGROUP_SETID_ARGS,
                )
            },
            sub(
                "help",
                2,
                LOADING | STALE,
                (0, 0, 0),
                &["stream", "slow"],
                "5.0.0",
                "Returns helpful text about the different subcommands.",
                xgroup_help,
                &[],
            ),
        ],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "xinfo",
        arity: -2,
        acl_categories: &["slow"],
        group: GROUP,
        since: "5.0.0",
        summary: "A container for stream introspection commands.",
        complexity: "Depends on subcommand.",
        subcommands: &[
            CommandSpec {
                key_specs: &[SUB_READ_KEY],
                tips: &["nondeterministic_output"],
                history: &[(
                    "7.2.0",
                    "Added the `inactive` field, and changed the meaning of `idle`.",
                )],
                ..sub(
                    "consumers",
                    4,
                    READONLY,
                    SUB_KEY,
                    &["read", "stream", "slow"],
                    "5.0.0",
                    "Returns a list of the consumers in a consumer group.",
                    xinfo,
                    XINFO_CONSUMERS_ARGS,
                )
            },
            CommandSpec {
                key_specs: &[SUB_READ_KEY],
                history: &[("7.0.0", "Added the `entries-read` and `lag` fields")],
                ..sub(
                    "groups",
                    3,
                    READONLY,
                    SUB_KEY,
                    &["read", "stream", "slow"],
                    "5.0.0",
                    "Returns a list of the consumer groups of a stream.",
                    xinfo,
                    KEY_ONLY,
                )
            },
            CommandSpec {
                key_specs: &[SUB_READ_KEY],
                history: &[
                    ("6.0.0", "Added the `FULL` modifier."),
                    (
                        "7.0.0",
                        "Added the `max-deleted-entry-id`, `entries-added`, `recorded-first-entry-id`, `entries-read` and `lag` fields",
                    ),
                    (
                        "7.2.0",
                        "Added the `active-time` field, and changed the meaning of `seen-time`.",
                    ),
                ],
                ..sub(
                    "stream",
                    -3,
                    READONLY,
                    SUB_KEY,
                    &["read", "stream", "slow"],
                    "5.0.0",
                    "Returns information about a stream.",
                    xinfo,
                    XINFO_STREAM_ARGS,
                )
            },
            sub(
                "help",
                2,
                LOADING | STALE,
                (0, 0, 0),
                &["stream", "slow"],
                "5.0.0",
                "Returns helpful text about the different subcommands.",
                xinfo_help,
                &[],
            ),
        ],
        ..CommandSpec::DEFAULT
    },
];

// ---- IDs -------------------------------------------------------------------

const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

/// Valkey's `streamGenericParseIDOrReply`: `<ms>[-<seq>]`, `-`, `+`
/// (refused when `strict`), and with `seq_star` the `<ms>-*` form.
/// Returns the ID and whether the sequence was given.
fn parse_id_full(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    seq_star: bool,
) -> Option<(StreamId, bool)> {
    if arg.len() > 127 {
        return None;
    }
    // Read as a C string, as Valkey does.
    let s = arg.split(|&b| b == 0).next().unwrap_or(&[]);
    if strict && (s == b"-" || s == b"+") {
        return None;
    }
    if s == b"-" {
        return Some((StreamId::MIN, true));
    }
    if s == b"+" {
        return Some((StreamId::MAX, true));
    }
    match s.iter().position(|&b| b == b'-') {
        Some(p) => {
            let ms = super::parse_cursor(&s[..p])?;
            let rest = &s[p + 1..];
            if seq_star && rest == b"*" {
                return Some((StreamId::new(ms, 0), false));
            }
            let seq = super::parse_cursor(rest)?;
            Some((StreamId::new(ms, seq), true))
        }
        None => Some((StreamId::new(super::parse_cursor(s)?, missing_seq), true)),
    }
}

/// A strict ID (no `-` / `+`).
fn parse_strict(arg: &[u8], missing_seq: u64) -> Result<StreamId, &'static str> {
    parse_id_full(arg, missing_seq, true, false)
        .map(|(id, _)| id)
        .ok_or(INVALID_ID)
}

/// An ID that may be `-` or `+`.
fn parse_loose(arg: &[u8], missing_seq: u64) -> Result<StreamId, &'static str> {
    parse_id_full(arg, missing_seq, false, false)
        .map(|(id, _)| id)
        .ok_or(INVALID_ID)
}

/// A range bound: `(` makes it exclusive (then the ID is strict and
/// moved one step inward).
fn parse_bound(arg: &[u8], missing_seq: u64, start: bool) -> Result<StreamId, &'static str> {
    if arg.len() > 1 && arg[0] == b'(' {
        let id = parse_strict(&arg[1..], missing_seq)?;
        if start {
            id.next().ok_or("ERR invalid start ID for the interval")
        } else {
            id.prev().ok_or("ERR invalid end ID for the interval")
        }
    } else {
        parse_loose(arg, missing_seq)
    }
}

/// An ID as a bulk string.
fn reply_id(r: &mut ReplyWriter<'_>, id: StreamId) {
    let mut buf = [0u8; 48];
    let n = format_id(id, &mut buf);
    r.bulk(&buf[..n]);
}

fn format_id(id: StreamId, buf: &mut [u8; 48]) -> usize {
    let mut t = [0u8; resp::num::I64_MAX_LEN];
    let ms = resp::num::fmt_u64(id.ms, &mut t);
    let n = ms.len();
    buf[..n].copy_from_slice(ms);
    buf[n] = b'-';
    let seq = resp::num::fmt_u64(id.seq, &mut t);
    buf[n + 1..n + 1 + seq.len()].copy_from_slice(seq);
    n + 1 + seq.len()
}

/// `[id, [field, value, ...]]`.
fn reply_entry(r: &mut ReplyWriter<'_>, e: &RawEntry<'_>) {
    r.array_len(2);
    reply_id(r, e.id);
    r.array_len(e.nfields * 2);
    for (f, v) in e.pairs() {
        reply_elem(r, f);
        reply_elem(r, v);
    }
}

fn reply_elem(r: &mut ReplyWriter<'_>, e: Elem<'_>) {
    match e {
        Elem::Bytes(b) => r.bulk(b),
        Elem::Int(v) => r.bulk_from_int(v),
    }
}

// ---- lookups ---------------------------------------------------------------

/// The stream at `key` for a write, created empty if missing and
/// `create`.
fn stream_for_write<'c>(
    ctx: &'c mut Ctx<'_>,
    key: &[u8],
    create: bool,
) -> Result<Option<&'c mut Stream>, WrongType> {
    let db = ctx.session.db;
    let h = ctx.key_hash(key);
    let now = ctx.now_ms;
    let exists = lookup_typed(ctx.srv, db, key, h, now, false, Value::as_stream_mut)?.is_some();
    if !exists {
        if !create {
            return Ok(None);
        }
        super::add_key(ctx, db, h, key, Entry::new(Value::Stream(Box::default())));
    }
    lookup_typed(ctx.srv, db, key, h, now, false, Value::as_stream_mut)
}

/// A write (or group read) that must be obeyed whatever it asks: the AOF
/// being loaded, or our primary (Valkey's `mustObeyClient`).
fn must_obey(ctx: &Ctx<'_>) -> bool {
    ctx.srv.aof.replaying || ctx.session.id == crate::replication::PRIMARY_CLIENT
}

// ---- XADD / XTRIM ----------------------------------------------------------

/// Parsed XADD / XTRIM options (Valkey's `streamAddTrimArgs`).
struct AddTrim {
    id: StreamId,
    id_given: bool,
    seq_given: bool,
    no_mkstream: bool,
    trim: Option<Trim>,
    /// Index of the MAXLEN/MINID threshold argument.
    trim_arg: usize,
    approx: bool,
    limit: u64,
    /// Where the ID is (XADD), or the end of the options.
    idpos: usize,
}

fn parse_add_trim(ctx: &Ctx<'_>, argv: ArgvRef<'_>, xadd: bool) -> Result<AddTrim, String> {
    let mut a = AddTrim {
        id: StreamId::MIN,
        id_given: false,
        seq_given: true,
        no_mkstream: false,
        trim: None,
        trim_arg: 0,
        approx: false,
        limit: 0,
        idpos: 0,
    };
    let argc = argv.len();
    let mut limit_given = false;
    let mut i = 2;
    while i < argc {
        let more = argc - 1 - i;
        let opt = argv.get(i);
        if xadd && opt == b"*" {
            break;
        } else if (opt.eq_ignore_ascii_case(b"maxlen") || opt.eq_ignore_ascii_case(b"minid"))
            && more > 0
        {
            if a.trim.is_some() {
                return Err("ERR syntax error, MAXLEN and MINID options at the same time are not compatible".into());
            }
            let maxlen = opt.eq_ignore_ascii_case(b"maxlen");
            a.approx = false;
            let next = argv.get(i + 1);
            if more >= 2 && next == b"~" {
                a.approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            let arg = argv.get(i + 1);
            if maxlen {
                let n = parse_i64(arg).ok_or(NOT_INT)?;
                if n < 0 {
                    return Err("ERR The MAXLEN argument must be >= 0.".into());
                }
                a.trim = Some(Trim::MaxLen(n as u64));
            } else {
                a.trim = Some(Trim::MinId(parse_strict(arg, 0)?));
            }
            i += 1;
            a.trim_arg = i;
        } else if opt.eq_ignore_ascii_case(b"limit") && more > 0 {
            let n = parse_i64(argv.get(i + 1)).ok_or(NOT_INT)?;
            if n < 0 {
                return Err("ERR The LIMIT argument must be >= 0.".into());
            }
            a.limit = n as u64;
            limit_given = true;
            i += 1;
        } else if xadd && opt.eq_ignore_ascii_case(b"nomkstream") {
            a.no_mkstream = true;
        } else if xadd {
            let (id, seq_given) = parse_id_full(opt, 0, true, true).ok_or(INVALID_ID)?;
            a.id = id;
            a.seq_given = seq_given;
            a.id_given = true;
            break;
        } else {
            return Err(SYNTAX_ERR.into());
        }
        i += 1;
    }
    a.idpos = i;
    if a.limit != 0 && a.trim.is_none() {
        return Err(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy".into(),
        );
    }
    if !xadd && a.trim.is_none() {
        return Err("ERR syntax error, XTRIM must be called with a trimming strategy".into());
    }
    if must_obey(ctx) {
        a.limit = 0;
    } else if limit_given {
        if !a.approx {
            return Err(
                "ERR syntax error, LIMIT cannot be used without the special ~ option".into(),
            );
        }
    } else if a.approx {
        let per_node = ctx.srv.config.stream_node.max_entries as i64;
        let mut l = per_node.saturating_mul(100);
        if l <= 0 {
            l = 10_000;
        }
        a.limit = l.min(1_000_000) as u64;
    } else {
        a.limit = 0;
    }
    Ok(a)
}

/// After an approximate trim: the command as a replica must run it, with
/// `=` and the length (or first ID) the trim left, and `id` (when not
/// `None`) in place of the ID argument.
fn propagate_rewritten(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, rewrites: &[(usize, &[u8])]) {
    if !ctx.srv.effects.on() {
        return;
    }
    let out: Vec<&[u8]> = (0..argv.len())
        .map(|i| {
            rewrites
                .iter()
                .find(|(at, _)| *at == i)
                .map_or(argv.get(i), |(_, b)| *b)
        })
        .collect();
    ctx.propagate(&out);
}

/// The threshold an exact trim would take to leave `s` as it is now.
fn trim_threshold(s: &Stream, how: Trim) -> Vec<u8> {
    match how {
        Trim::MaxLen(_) => s.length.to_string().into_bytes(),
        Trim::MinId(_) => {
            // The first entry, tombstones included (Valkey's
            // `streamGetEdgeID(s, 1, 0)`): the first block's first entry.
            let first = s
                .blocks()
                .next()
                .and_then(|(k, b)| b.entries(k).next().map(|e| e.id))
                .unwrap_or(StreamId::MAX);
            first.to_vec()
        }
    }
}

fn xadd(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let a = match parse_add_trim(ctx, argv, true) {
        Ok(a) => a,
        Err(e) => return ctx.error(&e),
    };
    let field_pos = a.idpos + 1;
    let argc = argv.len();
    if field_pos > argc || argc - field_pos < 2 || !(argc - field_pos).is_multiple_of(2) {
        return ctx.error("ERR wrong number of arguments for 'xadd' command");
    }
    if a.id_given && a.seq_given && a.id.is_zero() {
        return ctx.error("ERR The ID specified in XADD must be greater than 0-0");
    }
    let key = argv.get(1);
    let fv: Vec<&[u8]> = (field_pos..argc).map(|i| argv.get(i)).collect();
    let lim = ctx.srv.config.stream_node;
    let now = ctx.now_ms.max(0) as u64;
    let s = match stream_for_write(ctx, key, !a.no_mkstream) {
        Err(WrongType) => return ctx.error(WRONGTYPE),
        Ok(None) => return ctx.reply.null(),
        Ok(Some(s)) => s,
    };
    if s.last_id == StreamId::MAX {
        return ctx
            .error("ERR The stream has exhausted the last possible ID, unable to add more items");
    }
    const EDOM: &str =
        "ERR The ID specified in XADD is equal or smaller than the target stream top item";
    let id = if a.id_given {
        if a.seq_given {
            a.id
        } else if s.last_id.ms == a.id.ms {
            if s.last_id.seq == u64::MAX {
                return ctx.error(EDOM);
            }
            StreamId::new(a.id.ms, s.last_id.seq + 1)
        } else {
            a.id
        }
    } else if now > s.last_id.ms {
        StreamId::new(now, 0)
    } else {
        s.last_id.next().unwrap_or(StreamId::MIN)
    };
    if id <= s.last_id {
        return ctx.error(EDOM);
    }
    if fv.iter().map(|f| f.len()).sum::<usize>() > LISTPACK_MAX_SIZE {
        return ctx.error("ERR Elements are too large to be stored");
    }
    s.append(id, &fv, lim);
    let mut trimmed = 0;
    let mut threshold = Vec::new();
    if let Some(how) = a.trim {
        trimmed = s.trim(how, a.approx, a.limit);
        if a.approx {
            threshold = trim_threshold(s, how);
        }
    }
    reply_id(&mut ctx.reply, id);
    let db = ctx.session.db;
    ctx.touched(db, key);
    ctx.notify(notify::STREAM, "xadd", key);
    if trimmed > 0 {
        ctx.notify(notify::STREAM, "xtrim", key);
    }
    if ctx.srv.effects.on() && (a.approx || !a.id_given || !a.seq_given) {
        let mut buf = [0u8; 48];
        let n = format_id(id, &mut buf);
        let mut rw: Vec<(usize, &[u8])> = Vec::new();
        if a.approx {
            rw.push((a.trim_arg - 1, b"="));
            rw.push((a.trim_arg, &threshold));
        }
        if !a.id_given || !a.seq_given {
            rw.push((a.idpos, &buf[..n]));
        }
        propagate_rewritten(ctx, argv, &rw);
    }
}

fn xtrim(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let a = match parse_add_trim(ctx, argv, false) {
        Ok(a) => a,
        Err(e) => return ctx.error(&e),
    };
    let key = argv.get(1);
    let s = match stream_for_write(ctx, key, false) {
        Err(WrongType) => return ctx.error(WRONGTYPE),
        Ok(None) => return ctx.reply.int(0),
        Ok(Some(s)) => s,
    };
    let how = a.trim.expect("XTRIM has a strategy");
    let deleted = s.trim(how, a.approx, a.limit);
    let threshold = if deleted > 0 && a.approx {
        trim_threshold(s, how)
    } else {
        Vec::new()
    };
    ctx.reply.int(deleted as i64);
    if deleted > 0 {
        ctx.notify(notify::STREAM, "xtrim", key);
        let db = ctx.session.db;
        ctx.touched(db, key);
        ctx.changed_elements(deleted as usize);
        if a.approx {
            propagate_rewritten(
                ctx,
                argv,
                &[(a.trim_arg - 1, b"="), (a.trim_arg, &threshold)],
            );
        }
    }
}

// ---- XLEN / XRANGE / XDEL / XSETID ------------------------------------------

fn xlen(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let n = typed_or_reply!(ctx, argv.get(1), true, Value::as_stream_mut).map_or(0, |s| s.len());
    ctx.reply.int(n as i64);
}

fn xrange(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    range_generic(ctx, argv, false);
}

fn xrevrange(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    range_generic(ctx, argv, true);
}

fn range_generic(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, rev: bool) {
    let (start_arg, end_arg) = if rev {
        (argv.get(3), argv.get(2))
    } else {
        (argv.get(2), argv.get(3))
    };
    let start = match parse_bound(start_arg, 0, true) {
        Ok(id) => id,
        Err(e) => return ctx.error(e),
    };
    let end = match parse_bound(end_arg, u64::MAX, false) {
        Ok(id) => id,
        Err(e) => return ctx.error(e),
    };
    let mut count: i64 = -1;
    let mut j = 4;
    while j < argv.len() {
        if argv.get(j).eq_ignore_ascii_case(b"count") && j + 1 < argv.len() {
            match parse_i64(argv.get(j + 1)) {
                Some(n) => count = n.max(0),
                None => return ctx.error(NOT_INT),
            }
            j += 2;
        } else {
            return ctx.error(SYNTAX_ERR);
        }
    }
    let Some(s) = typed_or_reply!(ctx, argv.get(1), true, Value::as_stream_mut) else {
        return ctx.reply.array_len(0);
    };
    if count == 0 {
        return ctx.reply.null_array();
    }
    let limit = if count < 0 {
        usize::MAX
    } else {
        count as usize
    };
    let mut body = Vec::new();
    let mut w = ReplyWriter::new(&mut body, ctx.reply.proto);
    let mut n = 0;
    s.range(start, end, rev, |e| {
        reply_entry(&mut w, &e);
        n += 1;
        n < limit
    });
    ctx.reply.array_len(n);
    ctx.reply.raw(&body);
}

fn xdel(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    let Some(s) = typed_or_reply!(ctx, key, false, Value::as_stream_mut) else {
        return ctx.reply.int(0);
    };
    let mut ids = Vec::with_capacity(argv.len() - 2);
    for j in 2..argv.len() {
        match parse_strict(argv.get(j), 0) {
            Ok(id) => ids.push(id),
            Err(e) => return ctx.reply.error(e),
        }
    }
    let mut deleted = 0;
    let mut first_entry = false;
    for id in ids {
        if s.delete(id) {
            if id == s.first_id {
                first_entry = true;
            }
            if id > s.max_deleted_id {
                s.max_deleted_id = id;
            }
            deleted += 1;
        }
    }
    if deleted > 0 {
        if s.length == 0 {
            s.first_id = StreamId::MIN;
        } else if first_entry {
            s.first_id = s.edge_id(false).unwrap_or(StreamId::MAX);
        }
    }
    ctx.reply.int(deleted);
    if deleted > 0 {
        let db = ctx.session.db;
        ctx.touched(db, key);
        ctx.notify(notify::STREAM, "xdel", key);
        ctx.changed_elements(deleted as usize);
    }
}

fn xsetid(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let id = match parse_strict(argv.get(2), 0) {
        Ok(id) => id,
        Err(e) => return ctx.error(e),
    };
    let mut entries_added: i64 = -1;
    let mut max_xdel = StreamId::MIN;
    let mut i = 3;
    while i < argv.len() {
        let more = argv.len() - 1 - i;
        let opt = argv.get(i);
        if opt.eq_ignore_ascii_case(b"entriesadded") && more > 0 {
            match parse_i64(argv.get(i + 1)) {
                None => return ctx.error(NOT_INT),
                Some(n) if n < 0 => return ctx.error("ERR entries_added must be positive"),
                Some(n) => entries_added = n,
            }
            i += 2;
        } else if opt.eq_ignore_ascii_case(b"maxdeletedid") && more > 0 {
            match parse_strict(argv.get(i + 1), 0) {
                Err(e) => return ctx.error(e),
                Ok(m) if id < m => {
                    return ctx.error(
                        "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                    );
                }
                Ok(m) => max_xdel = m,
            }
            i += 2;
        } else {
            return ctx.error(SYNTAX_ERR);
        }
    }
    let key = argv.get(1);
    let Some(s) = typed_or_reply!(ctx, key, false, Value::as_stream_mut) else {
        return ctx.error("ERR no such key");
    };
    if id < s.max_deleted_id {
        return ctx
            .reply
            .error("ERR The ID specified in XSETID is smaller than current max_deleted_entry_id");
    }
    if s.length > 0 {
        let maxid = s.edge_id(true).unwrap_or(StreamId::MIN);
        if id < maxid {
            return ctx.reply.error(
                "ERR The ID specified in XSETID is smaller than the target stream top item",
            );
        }
        if entries_added != -1 && s.length > entries_added as u64 {
            return ctx.reply.error(
                "ERR The entries_added specified in XSETID is smaller than the target stream length",
            );
        }
    }
    s.last_id = id;
    if entries_added != -1 {
        s.entries_added = entries_added as u64;
    }
    if !max_xdel.is_zero() {
        s.max_deleted_id = max_xdel;
    }
    ctx.reply.ok();
    ctx.srv.persist.dirty += 1;
    ctx.notify(notify::STREAM, "xsetid", key);
}

// ---- consumer groups: propagation --------------------------------------------

/// Commands to propagate, built while the stream is borrowed (nothing is
/// built while no AOF or replica consumes effects).
struct Effects {
    on: bool,
    cmds: Vec<Vec<Vec<u8>>>,
}

impl Effects {
    fn new(ctx: &Ctx<'_>) -> Effects {
        Effects {
            on: ctx.srv.effects.on(),
            cmds: Vec::new(),
        }
    }
    /// `XCLAIM key group consumer 0 id TIME t RETRYCOUNT n FORCE JUSTID
    /// LASTID last`: re-creates a PEL entry as it is now, idempotently.
    #[allow(clippy::too_many_arguments)]
    fn xclaim(
        &mut self,
        key: &[u8],
        group: &[u8],
        id: StreamId,
        consumer: &[u8],
        time: i64,
        count: u64,
        last: StreamId,
    ) {
        if !self.on {
            return;
        }
        self.cmds.push(vec![
            b"XCLAIM".to_vec(),
            key.to_vec(),
            group.to_vec(),
            consumer.to_vec(),
            b"0".to_vec(),
            id.to_vec(),
            b"TIME".to_vec(),
            time.to_string().into_bytes(),
            b"RETRYCOUNT".to_vec(),
            count.to_string().into_bytes(),
            b"FORCE".to_vec(),
            b"JUSTID".to_vec(),
            b"LASTID".to_vec(),
            last.to_vec(),
        ]);
    }
    /// `XGROUP SETID key group last ENTRIESREAD n`.
    fn setid(&mut self, key: &[u8], group: &[u8], last: StreamId, entries_read: i64) {
        if !self.on {
            return;
        }
        self.cmds.push(vec![
            b"XGROUP".to_vec(),
            b"SETID".to_vec(),
            key.to_vec(),
            group.to_vec(),
            last.to_vec(),
            b"ENTRIESREAD".to_vec(),
            entries_read.to_string().into_bytes(),
        ]);
    }
    /// `XGROUP CREATECONSUMER key group consumer`.
    fn create_consumer(&mut self, key: &[u8], group: &[u8], consumer: &[u8]) {
        if !self.on {
            return;
        }
        self.cmds.push(vec![
            b"XGROUP".to_vec(),
            b"CREATECONSUMER".to_vec(),
            key.to_vec(),
            group.to_vec(),
            consumer.to_vec(),
        ]);
    }
    fn emit(self, ctx: &mut Ctx<'_>) {
        for c in &self.cmds {
            let argv: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
            ctx.propagate(&argv);
        }
    }
}

/// The consumer `name` of `group`, created (seen now) if missing; true
/// when it was created.
fn consumer_or_create(s: &mut Stream, group: &[u8], name: &[u8], now: i64) -> (Arc<[u8]>, bool) {
    let g = s.group_mut(group).expect("group exists");
    if let Some((k, _)) = g.consumers.get_key_value(name) {
        return (k.clone(), false);
    }
    let c = Consumer::new(name, now);
    let k = c.name.clone();
    g.consumers.insert(k.clone(), c);
    (k, true)
}

fn nogroup_key(key: &[u8], group: &[u8]) -> String {
    format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group)
    )
}

// ---- XREAD / XREADGROUP -------------------------------------------------------

fn xread(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    read_generic(ctx, argv, false);
}

fn xreadgroup(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    read_generic(ctx, argv, true);
}

fn read_generic(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, xreadgroup: bool) {
    // Whatever happens, effects are the XCLAIMs etc. emitted below.
    ctx.prevent_propagation();
    let argc = argv.len();
    let mut timeout: Option<Option<i64>> = None;
    let mut count: usize = 0;
    let mut streams_arg = 0;
    let mut nstreams = 0;
    let mut noack = false;
    let mut group: Option<(&[u8], &[u8])> = None;
    let mut i = 1;
    while i < argc {
        let more = argc - i - 1;
        let o = argv.get(i);
        if o.eq_ignore_ascii_case(b"block") && more > 0 {
            i += 1;
            let ms = match parse_i64(argv.get(i)) {
                Some(v) => v,
                None => return ctx.error("ERR timeout is not an integer or out of range"),
            };
            if ms < 0 {
                return ctx.error("ERR timeout is negative");
            }
            if ms > 0 && ms.checked_add(ctx.now_ms).is_none() {
                return ctx.error("ERR timeout is out of range");
            }
            timeout = Some((ms > 0).then(|| ctx.now_ms + ms));
        } else if o.eq_ignore_ascii_case(b"count") && more > 0 {
            i += 1;
            match parse_i64(argv.get(i)) {
                Some(n) => count = n.max(0) as usize,
                None => return ctx.error(NOT_INT),
            }
        } else if o.eq_ignore_ascii_case(b"streams") && more > 0 {
            streams_arg = i + 1;
            let n = argc - streams_arg;
            if !n.is_multiple_of(2) {
                let (name, sym) = if xreadgroup {
                    ("xreadgroup", '>')
                } else {
                    ("xread", '$')
                };
                return ctx.error(&format!(
                    "ERR Unbalanced '{name}' list of streams: for each stream key an ID or '{sym}' must be specified."
                ));
            }
            nstreams = n / 2;
            break;
        } else if o.eq_ignore_ascii_case(b"group") && more >= 2 {
            if !xreadgroup {
                return ctx.error(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                );
            }
            group = Some((argv.get(i + 1), argv.get(i + 2)));
            i += 2;
        } else if o.eq_ignore_ascii_case(b"noack") {
            if !xreadgroup {
                return ctx.error(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                );
            }
            noack = true;
        } else {
            return ctx.error(SYNTAX_ERR);
        }
        i += 1;
    }
    if streams_arg == 0 {
        return ctx.error(SYNTAX_ERR);
    }
    if xreadgroup && group.is_none() {
        return ctx.error("ERR Missing GROUP option for XREADGROUP");
    }
    // IDs: what each stream's entries must be greater than; `>` is MAX.
    let db = ctx.session.db;
    let mut ids = Vec::with_capacity(nstreams);
    let mut rewrites = Vec::new();
    for k in 0..nstreams {
        let key = argv.get(streams_arg + k);
        let arg = argv.get(streams_arg + nstreams + k);
        let s = typed_or_reply!(ctx, key, true, Value::as_stream_mut);
        if let Some((gname, _)) = group
            && s.as_ref().and_then(|s| s.group(gname)).is_none()
        {
            return ctx.error(&format!(
                "{} in XREADGROUP with GROUP option",
                nogroup_key(key, gname)
            ));
        }
        if arg == b"$" {
            if xreadgroup {
                return ctx.error("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.");
            }
            let id = s.map_or(StreamId::MIN, |s| s.last_id);
            rewrites.push((streams_arg + nstreams + k, id.to_vec()));
            ids.push(id);
        } else if arg == b"+" {
            if xreadgroup {
                return ctx.error("ERR The + ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The + ID would just return an empty result set.");
            }
            let id = match s {
                Some(s) => match s.last_id.prev() {
                    Some(id) => id,
                    None => return ctx.error("ERR the stream last element ID is 0-0"),
                },
                None => StreamId::MIN,
            };
            ids.push(id);
        } else if arg == b">" {
            if !xreadgroup {
                return ctx.error("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.");
            }
            ids.push(StreamId::MAX);
        } else {
            match parse_strict(arg, 0) {
                Ok(id) => ids.push(id),
                Err(e) => return ctx.error(e),
            }
        }
    }
    let now = ctx.now_ms;
    let proto = ctx.reply.proto;
    let mut body = Vec::new();
    let mut served = 0;
    let mut fx = Effects::new(ctx);
    let mut dirty = 0;
    // Keys whose consumer this command created (a keyspace event each).
    let mut created_in: Vec<&[u8]> = Vec::new();
    for (k, gt) in ids.iter().copied().enumerate() {
        let key = argv.get(streams_arg + k);
        let h = ctx.key_hash(key);
        // XREADGROUP changes the value (groups, PELs): a write lookup, so a
        // snapshot in progress keeps the value as it was.
        let d = &mut ctx.srv.keyspace.dbs[db];
        let found = if xreadgroup {
            d.get(h, key, now)
        } else {
            d.get_read(h, key, now)
        };
        // Valkey looks each key up for reading twice (the IDs, then the
        // serving): the second lookup counts as a hit or miss too.
        super::count_read(
            &mut ctx.srv.stats,
            Some(&mut ctx.srv.keymisses),
            found.is_some(),
            db,
            key,
        );
        let Some(s) = found
            .and_then(|e| e.boxed_mut())
            .and_then(Value::as_stream_mut)
        else {
            continue;
        };
        let mut w = ReplyWriter::new(&mut body, proto);
        if let Some((gname, cname)) = group {
            let (serve, history, gt) = if gt != StreamId::MAX {
                (true, true, gt)
            } else {
                let last = s.group(gname).expect("checked").last_id;
                match s.edge_id(true) {
                    Some(maxid) if maxid > last => (true, false, last),
                    _ => (false, false, gt),
                }
            };
            let (consumer, created) = consumer_or_create(s, gname, cname, now);
            if created {
                dirty += 1;
                created_in.push(key);
                if noack {
                    fx.create_consumer(key, gname, cname);
                }
            }
            if let Some(c) = s
                .group_mut(gname)
                .and_then(|g| g.consumers.get_mut(&consumer))
            {
                c.seen_time = now;
            }
            if !serve {
                continue;
            }
            served += 1;
            if proto == resp::Protocol::Resp2 {
                w.array_len(2);
            }
            w.bulk(key);
            let start = gt.next().unwrap_or(StreamId::MIN);
            if history {
                serve_history(&mut w, s, gname, &consumer, start, count, now);
            } else {
                serve_group(
                    &mut w, s, key, gname, &consumer, start, count, noack, now, &mut fx,
                );
            }
            dirty += 1;
        } else {
            let serve = s.length > 0 && s.edge_id(true).is_some_and(|maxid| maxid > gt);
            if !serve {
                continue;
            }
            served += 1;
            if proto == resp::Protocol::Resp2 {
                w.array_len(2);
            }
            w.bulk(key);
            let start = gt.next().unwrap_or(StreamId::MIN);
            let limit = if count == 0 { usize::MAX } else { count };
            let mut body2 = Vec::new();
            let mut w2 = ReplyWriter::new(&mut body2, proto);
            let mut n = 0;
            s.range(start, StreamId::MAX, false, |e| {
                reply_entry(&mut w2, &e);
                n += 1;
                n < limit
            });
            w.array_len(n);
            w.raw(&body2);
        }
    }
    ctx.srv.persist.dirty += dirty;
    for key in created_in {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
    }
    if served > 0 {
        if proto == resp::Protocol::Resp2 {
            ctx.reply.array_len(served);
        } else {
            ctx.reply.map_len(served);
        }
        ctx.reply.raw(&body);
        fx.emit(ctx);
        return;
    }
    fx.emit(ctx);
    if let Some(deadline) = timeout {
        let keys: Vec<&[u8]> = (0..nstreams).map(|k| argv.get(streams_arg + k)).collect();
        // XREADGROUP answers a deleted key, a destroyed group or a key of
        // another type at once (NOGROUP, WRONGTYPE), as Valkey does.
        return ctx.block_rewritten(&keys, deadline, OnTimeout::NullArray, rewrites, xreadgroup);
    }
    ctx.reply.null_array();
}

/// XREADGROUP with `>`: entries after `start`, which move the group's last
/// ID and (unless NOACK) become pending for `consumer`.
#[allow(clippy::too_many_arguments)]
fn serve_group(
    w: &mut ReplyWriter<'_>,
    s: &mut Stream,
    key: &[u8],
    gname: &[u8],
    consumer: &Arc<[u8]>,
    start: StreamId,
    count: usize,
    noack: bool,
    now: i64,
    fx: &mut Effects,
) {
    let limit = if count == 0 { usize::MAX } else { count };
    let mut body = Vec::new();
    let mut ew = ReplyWriter::new(&mut body, w.proto);
    let mut served = Vec::new();
    s.range(start, StreamId::MAX, false, |e| {
        reply_entry(&mut ew, &e);
        served.push(e.id);
        served.len() < limit
    });
    w.array_len(served.len());
    w.raw(&body);
    let mut propagate_last = false;
    for id in served {
        let last = s.group(gname).expect("group").last_id;
        if id > last {
            s.advance_group(gname, id);
            // Valkey 8.1 follows the XCLAIMs with `XGROUP SETID ...
            // ENTRIESREAD` whenever the group's last ID moved (the
            // XCLAIM's LASTID does not carry the read counter).
            propagate_last = true;
        }
        if !noack {
            let g = s.group_mut(gname).expect("group");
            let n = g.assign(id, consumer, now);
            n.delivery_time = now;
            n.delivery_count = 1;
            let (t, c) = (n.delivery_time, n.delivery_count);
            let last = g.last_id;
            if let Some(cons) = g.consumers.get_mut(consumer) {
                cons.active_time = now;
            }
            fx.xclaim(key, gname, id, consumer, t, c, last);
        }
    }
    if propagate_last {
        let g = s.group(gname).expect("group");
        fx.setid(key, gname, g.last_id, g.entries_read);
    }
}

/// XREADGROUP with an ID: the consumer's own pending entries from `start`
/// (a deleted entry as `[id, nil]`), each counted as delivered again.
fn serve_history(
    w: &mut ReplyWriter<'_>,
    s: &mut Stream,
    gname: &[u8],
    consumer: &Arc<[u8]>,
    start: StreamId,
    count: usize,
    now: i64,
) {
    let ids: Vec<StreamId> = {
        let g = s.group(gname).expect("group");
        let c = &g.consumers[consumer];
        let it = c.pel.range(start..).copied();
        if count == 0 {
            it.collect()
        } else {
            it.take(count).collect()
        }
    };
    w.array_len(ids.len());
    let mut found = Vec::with_capacity(ids.len());
    for &id in &ids {
        match s.get(id) {
            Some(e) => {
                reply_entry(w, &e);
                found.push(id);
            }
            None => {
                w.array_len(2);
                reply_id(w, id);
                w.null_array();
            }
        }
    }
    let g = s.group_mut(gname).expect("group");
    for id in found {
        if let Some(n) = g.pel.get_mut(&id) {
            n.delivery_time = now;
            n.delivery_count += 1;
        }
    }
}

// ---- XGROUP --------------------------------------------------------------------

/// Valkey's `addReplyHelp` for `command`.
fn help(ctx: &mut Ctx<'_>, command: &str, lines: &[&str]) {
    let r = &mut ctx.reply;
    r.array_len(lines.len() + 3);
    r.simple(&format!(
        "{command} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    for l in lines {
        r.simple(l);
    }
    r.simple("HELP");
    r.simple("    Print this help.");
}

fn xgroup_help(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    help(
        ctx,
        "XGROUP",
        &[
            "CREATE <key> <groupname> <id|$> [option]",
            "    Create a new consumer group. Options are:",
            "    * MKSTREAM",
            "      Create the empty stream if it does not exist.",
            "    * ENTRIESREAD entries_read",
            "      Set the group's entries_read counter (internal use).",
            "CREATECONSUMER <key> <groupname> <consumer>",
            "    Create a new consumer in the specified group.",
            "DELCONSUMER <key> <groupname> <consumer>",
            "    Remove the specified consumer.",
            "DESTROY <key> <groupname>",
            "    Remove the specified group.",
            "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
            "    Set the current group ID and entries_read counter.",
        ],
    );
}

fn xinfo_help(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    help(
        ctx,
        "XINFO",
        &[
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
        ],
    );
}

fn xgroup(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let opt = argv.get(1);
    let argc = argv.len();
    let create = opt.eq_ignore_ascii_case(b"create");
    let setid = opt.eq_ignore_ascii_case(b"setid");
    let mut mkstream = false;
    let mut entries_read = ENTRIES_READ_INVALID;
    let mut i = 5;
    while i < argc {
        let a = argv.get(i);
        if create && a.eq_ignore_ascii_case(b"mkstream") {
            mkstream = true;
            i += 1;
        } else if (create || setid) && a.eq_ignore_ascii_case(b"entriesread") && i + 1 < argc {
            match parse_i64(argv.get(i + 1)) {
                None => return ctx.error(NOT_INT),
                Some(n) if n < 0 && n != ENTRIES_READ_INVALID => {
                    return ctx.error("ERR value for ENTRIESREAD must be positive or -1");
                }
                Some(n) => entries_read = n,
            }
            i += 2;
        } else {
            return super::subcommand_syntax_error(&mut ctx.reply, argv);
        }
    }
    let key = argv.get(2);
    let gname = argv.get(3);
    let exists =
        typed_or_reply!(ctx, key, false, Value::as_stream_mut).map(|s| s.group(gname).is_some());
    if !mkstream {
        let Some(has_group) = exists else {
            return ctx.error("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.");
        };
        if !has_group
            && (setid
                || opt.eq_ignore_ascii_case(b"createconsumer")
                || opt.eq_ignore_ascii_case(b"delconsumer"))
        {
            return ctx.error(&format!(
                "NOGROUP No such consumer group '{}' for key name '{}'",
                String::from_utf8_lossy(gname),
                String::from_utf8_lossy(key)
            ));
        }
    }
    let db = ctx.session.db;
    let now = ctx.now_ms;
    if create && (5..=8).contains(&argc) {
        let id_arg = argv.get(4);
        let id = if id_arg == b"$" {
            None
        } else {
            match parse_strict(id_arg, 0) {
                Ok(id) => Some(id),
                Err(e) => return ctx.error(e),
            }
        };
        let created_key = exists.is_none();
        let Ok(Some(s)) = stream_for_write(ctx, key, true) else {
            unreachable!("checked above");
        };
        let id = id.unwrap_or(s.last_id);
        let ok = s.create_group(gname, id, entries_read);
        if created_key {
            ctx.touched(db, key);
            // Valkey counts the key's creation with the group's.
            ctx.srv.persist.dirty -= 1;
        }
        if ok {
            ctx.reply.ok();
            ctx.srv.persist.dirty += 1;
            ctx.notify(notify::STREAM, "xgroup-create", key);
        } else {
            ctx.error("BUSYGROUP Consumer Group name already exists");
        }
    } else if setid && (argc == 5 || argc == 7) {
        let Ok(Some(s)) = stream_for_write(ctx, key, false) else {
            unreachable!("checked above");
        };
        let id_arg = argv.get(4);
        let id = if id_arg == b"$" {
            s.last_id
        } else {
            match parse_loose(id_arg, 0) {
                Ok(id) => id,
                Err(e) => return ctx.reply.error(e),
            }
        };
        let g = s.group_mut(gname).expect("checked");
        g.last_id = id;
        g.entries_read = entries_read;
        ctx.reply.ok();
        ctx.srv.persist.dirty += 1;
        ctx.notify(notify::STREAM, "xgroup-setid", key);
    } else if opt.eq_ignore_ascii_case(b"destroy") && argc == 4 {
        let Ok(Some(s)) = stream_for_write(ctx, key, false) else {
            unreachable!("checked above");
        };
        if s.destroy_group(gname) {
            ctx.reply.int(1);
            ctx.srv.persist.dirty += 1;
            ctx.notify(notify::STREAM, "xgroup-destroy", key);
            // Blocked XREADGROUPs on it get NOGROUP.
            ctx.srv.blocking.signal(db, key);
        } else {
            ctx.reply.int(0);
        }
    } else if opt.eq_ignore_ascii_case(b"createconsumer") && argc == 5 {
        let Ok(Some(s)) = stream_for_write(ctx, key, false) else {
            unreachable!("checked above");
        };
        let (_, created) = consumer_or_create(s, gname, argv.get(4), now);
        ctx.reply.int(i64::from(created));
        if created {
            ctx.srv.persist.dirty += 1;
            ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
        }
    } else if opt.eq_ignore_ascii_case(b"delconsumer") && argc == 5 {
        let Ok(Some(s)) = stream_for_write(ctx, key, false) else {
            unreachable!("checked above");
        };
        let g = s.group_mut(gname).expect("checked");
        match g.delete_consumer(argv.get(4)) {
            Some(pending) => {
                ctx.reply.int(pending as i64);
                ctx.srv.persist.dirty += 1;
                ctx.notify(notify::STREAM, "xgroup-delconsumer", key);
            }
            None => ctx.reply.int(0),
        }
    } else {
        super::subcommand_syntax_error(&mut ctx.reply, argv);
    }
}

// ---- XACK / XPENDING -------------------------------------------------------------

fn xack(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    let gname = argv.get(2);
    // Looked up for reading (a keyspace hit or miss, as in Valkey), then
    // for writing: the PEL changes (see `store::freeze`).
    let has_group = typed_or_reply!(ctx, key, true, Value::as_stream_mut)
        .is_some_and(|s| s.group(gname).is_some());
    if !has_group {
        return ctx.reply.int(0);
    }
    let Ok(Some(s)) = stream_for_write(ctx, key, false) else {
        unreachable!("just looked up");
    };
    let g = s.group_mut(gname).expect("just looked up");
    let mut ids = Vec::with_capacity(argv.len() - 3);
    for j in 3..argv.len() {
        match parse_strict(argv.get(j), 0) {
            Ok(id) => ids.push(id),
            Err(e) => return ctx.reply.error(e),
        }
    }
    let mut acked = 0;
    for id in ids {
        if g.ack(id) {
            acked += 1;
        }
    }
    ctx.reply.int(acked);
    ctx.srv.persist.dirty += acked as u64;
}

fn xpending(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let argc = argv.len();
    let justinfo = argc == 3;
    let key = argv.get(1);
    let gname = argv.get(2);
    if argc != 3 && !(6..=9).contains(&argc) {
        return ctx.error(SYNTAX_ERR);
    }
    let mut start = StreamId::MIN;
    let mut end = StreamId::MAX;
    let mut count: i64 = 0;
    let mut minidle: i64 = 0;
    let mut consumer: Option<&[u8]> = None;
    if argc >= 6 {
        let mut startidx = 3;
        if argv.get(3).eq_ignore_ascii_case(b"idle") {
            match parse_i64(argv.get(4)) {
                Some(n) => minidle = n,
                None => return ctx.error(NOT_INT),
            }
            if argc < 8 {
                return ctx.error(SYNTAX_ERR);
            }
            startidx += 2;
        }
        match parse_i64(argv.get(startidx + 2)) {
            Some(n) => count = n.max(0),
            None => return ctx.error(NOT_INT),
        }
        start = match parse_bound(argv.get(startidx), 0, true) {
            Ok(id) => id,
            Err(e) => return ctx.error(e),
        };
        end = match parse_bound(argv.get(startidx + 1), u64::MAX, false) {
            Ok(id) => id,
            Err(e) => return ctx.error(e),
        };
        if startidx + 3 < argc {
            consumer = Some(argv.get(startidx + 3));
        }
    }
    let s = typed_or_reply!(ctx, key, true, Value::as_stream_mut);
    let Some(g) = s.and_then(|s| s.group(gname)) else {
        return ctx.error(&nogroup_key(key, gname));
    };
    let r = &mut ctx.reply;
    if justinfo {
        r.array_len(4);
        r.int(g.pel.len() as i64);
        match (g.pel.first_key_value(), g.pel.last_key_value()) {
            (Some((first, _)), Some((last, _))) => {
                reply_id(r, *first);
                reply_id(r, *last);
                let with: Vec<&Consumer> =
                    g.consumers.values().filter(|c| !c.pel.is_empty()).collect();
                r.array_len(with.len());
                for c in with {
                    r.array_len(2);
                    r.bulk(&c.name);
                    r.bulk_from_int(c.pel.len() as i64);
                }
            }
            _ => {
                r.null();
                r.null();
                r.null_array();
            }
        }
        return;
    }
    let now = ctx.now_ms;
    let ids: Box<dyn Iterator<Item = StreamId> + '_> = match consumer {
        Some(name) => match g.consumers.get(name) {
            Some(c) => Box::new(c.pel.range(start..).copied()),
            None => return r.array_len(0),
        },
        None => Box::new(g.pel.range(start..).map(|(k, _)| *k)),
    };
    let mut body = Vec::new();
    let mut w = ReplyWriter::new(&mut body, r.proto);
    let mut n = 0;
    for id in ids {
        if count == 0 || id > end {
            break;
        }
        let Some(nack) = g.pel.get(&id) else {
            continue;
        };
        if minidle != 0 && now - nack.delivery_time < minidle {
            continue;
        }
        n += 1;
        count -= 1;
        w.array_len(4);
        reply_id(&mut w, id);
        w.bulk(&nack.consumer);
        w.int((now - nack.delivery_time).max(0));
        w.int(nack.delivery_count as i64);
    }
    r.array_len(n);
    r.raw(&body);
}

// ---- XCLAIM / XAUTOCLAIM ----------------------------------------------------------

fn xclaim(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    ctx.prevent_propagation();
    let key = argv.get(1);
    let gname = argv.get(2);
    let cname = argv.get(3);
    let has_group = typed_or_reply!(ctx, key, true, Value::as_stream_mut)
        .is_some_and(|s| s.group(gname).is_some());
    if !has_group {
        return ctx.error(&nogroup_key(key, gname));
    }
    let minidle = match parse_i64(argv.get(4)) {
        Some(n) => n.max(0),
        None => return ctx.error("ERR Invalid min-idle-time argument for XCLAIM"),
    };
    let argc = argv.len();
    let mut ids = Vec::new();
    let mut j = 5;
    while j < argc {
        match parse_strict(argv.get(j), 0) {
            Ok(id) => ids.push((id, j)),
            Err(_) => break,
        }
        j += 1;
    }
    let now = ctx.now_ms;
    let mut last_id = StreamId::MIN;
    let mut force = false;
    let mut justid = false;
    let mut retrycount: i64 = -1;
    let mut deliverytime: i64 = -1;
    while j < argc {
        let more = argc - 1 - j;
        let opt = argv.get(j);
        if opt.eq_ignore_ascii_case(b"force") {
            force = true;
        } else if opt.eq_ignore_ascii_case(b"justid") {
            justid = true;
        } else if opt.eq_ignore_ascii_case(b"idle") && more > 0 {
            j += 1;
            match parse_i64(argv.get(j)) {
                Some(n) => deliverytime = now.wrapping_sub(n),
                None => return ctx.error("ERR Invalid IDLE option argument for XCLAIM"),
            }
        } else if opt.eq_ignore_ascii_case(b"time") && more > 0 {
            j += 1;
            match parse_i64(argv.get(j)) {
                Some(n) => deliverytime = n,
                None => return ctx.error("ERR Invalid TIME option argument for XCLAIM"),
            }
        } else if opt.eq_ignore_ascii_case(b"retrycount") && more > 0 {
            j += 1;
            match parse_i64(argv.get(j)) {
                Some(n) => retrycount = n,
                None => return ctx.error("ERR Invalid RETRYCOUNT option argument for XCLAIM"),
            }
        } else if opt.eq_ignore_ascii_case(b"lastid") && more > 0 {
            j += 1;
            match parse_strict(argv.get(j), 0) {
                Ok(id) => last_id = id,
                Err(e) => return ctx.error(e),
            }
        } else {
            return ctx.error(&format!(
                "ERR Unrecognized XCLAIM option '{}'",
                String::from_utf8_lossy(opt)
            ));
        }
        j += 1;
    }
    let proto = ctx.reply.proto;
    let mut fx = Effects::new(ctx);
    let Ok(Some(s)) = stream_for_write(ctx, key, false) else {
        unreachable!("checked above");
    };
    let mut propagate_last = false;
    {
        let g = s.group_mut(gname).expect("checked");
        if last_id > g.last_id {
            g.last_id = last_id;
            propagate_last = true;
        }
    }
    if deliverytime != -1 {
        if deliverytime < 0 || deliverytime > now {
            deliverytime = now;
        }
    } else {
        deliverytime = now;
    }
    let (consumer, created) = consumer_or_create(s, gname, cname, now);
    s.group_mut(gname)
        .expect("checked")
        .consumers
        .get_mut(&consumer)
        .expect("exists")
        .seen_time = now;
    let mut dirty = u64::from(created);
    let mut body = Vec::new();
    let mut w = ReplyWriter::new(&mut body, proto);
    let mut n = 0;
    for (id, _) in ids {
        let exists = s.contains(id);
        let g = s.group_mut(gname).expect("checked");
        let pending = g
            .pel
            .get(&id)
            .map(|n| (n.consumer.clone(), n.delivery_time, n.delivery_count));
        if !exists {
            if let Some((owner, t, c)) = pending {
                fx.xclaim(key, gname, id, &owner, t, c, g.last_id);
                propagate_last = false;
                dirty += 1;
                g.ack(id);
            }
            continue;
        }
        let was_pending = pending.is_some();
        if !was_pending && !force {
            continue;
        }
        if was_pending && minidle != 0 {
            let (_, t, _) = pending.expect("pending");
            if now - t < minidle {
                continue;
            }
        }
        let nack = g.assign(id, &consumer, now);
        if !was_pending {
            // FORCE created it: a fresh entry, whose count the options
            // below set (Valkey starts it at 1 and then increments it).
            nack.delivery_count = 1;
        }
        nack.delivery_time = deliverytime;
        if retrycount >= 0 {
            nack.delivery_count = retrycount as u64;
        } else if !justid {
            nack.delivery_count += 1;
        }
        let (t, c) = (nack.delivery_time, nack.delivery_count);
        let last = g.last_id;
        if let Some(cons) = g.consumers.get_mut(&consumer) {
            cons.active_time = now;
        }
        if justid {
            reply_id(&mut w, id);
        } else if let Some(e) = s.get(id) {
            reply_entry(&mut w, &e);
        }
        n += 1;
        fx.xclaim(key, gname, id, &consumer, t, c, last);
        propagate_last = false;
        dirty += 1;
    }
    if propagate_last {
        let g = s.group(gname).expect("checked");
        fx.setid(key, gname, g.last_id, g.entries_read);
        dirty += 1;
    }
    ctx.reply.array_len(n);
    ctx.reply.raw(&body);
    ctx.srv.persist.dirty += dirty;
    if created {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
    }
    fx.emit(ctx);
}

fn xautoclaim(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    ctx.prevent_propagation();
    let key = argv.get(1);
    let gname = argv.get(2);
    let cname = argv.get(3);
    // Valkey reads the key (a hit or miss, `keymiss`) before it parses the
    // arguments, and checks its type after.
    let (db, h, now) = (ctx.session.db, ctx.key_hash(key), ctx.now_ms);
    let _ = lookup_typed(ctx.srv, db, key, h, now, true, Value::as_stream_mut);
    let minidle = match parse_i64(argv.get(4)) {
        Some(n) => n.max(0),
        None => return ctx.error("ERR Invalid min-idle-time argument for XAUTOCLAIM"),
    };
    let start = match parse_bound(argv.get(5), 0, true) {
        Ok(id) => id,
        Err(e) => return ctx.error(e),
    };
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < argv.len() {
        let more = argv.len() - 1 - j;
        let opt = argv.get(j);
        if opt.eq_ignore_ascii_case(b"count") && more > 0 {
            let max = i64::MAX / 16;
            match parse_i64(argv.get(j + 1)) {
                Some(n) if (1..=max).contains(&n) => count = n,
                _ => return ctx.error("ERR COUNT must be > 0"),
            }
            j += 1;
        } else if opt.eq_ignore_ascii_case(b"justid") {
            justid = true;
        } else {
            return ctx.error(SYNTAX_ERR);
        }
        j += 1;
    }
    let has_group = typed_or_reply!(ctx, key, false, Value::as_stream_mut)
        .is_some_and(|s| s.group(gname).is_some());
    if !has_group {
        return ctx.error(&nogroup_key(key, gname));
    }
    let proto = ctx.reply.proto;
    let mut fx = Effects::new(ctx);
    let Ok(Some(s)) = stream_for_write(ctx, key, false) else {
        unreachable!("checked above");
    };
    let (consumer, created) = consumer_or_create(s, gname, cname, now);
    s.group_mut(gname)
        .expect("checked")
        .consumers
        .get_mut(&consumer)
        .expect("exists")
        .seen_time = now;
    let mut dirty = u64::from(created);
    let mut attempts = count.saturating_mul(10);
    let mut deleted = Vec::new();
    let mut body = Vec::new();
    let mut w = ReplyWriter::new(&mut body, proto);
    let mut n = 0;
    let mut cursor = start;
    let mut next: Option<StreamId> = None;
    loop {
        let pel_next = s
            .group(gname)
            .expect("checked")
            .pel
            .range(cursor..)
            .next()
            .map(|(id, n)| (*id, n.delivery_time));
        if attempts == 0 || count == 0 {
            next = pel_next.map(|(id, _)| id);
            break;
        }
        attempts -= 1;
        let Some((id, t)) = pel_next else {
            break;
        };
        cursor = match id.next() {
            Some(c) => c,
            None => {
                // The last possible ID: nothing can follow it.
                next = None;
                // Still handle this one below.
                StreamId::MAX
            }
        };
        let at_end = id == StreamId::MAX;
        if !s.contains(id) {
            let g = s.group_mut(gname).expect("checked");
            let nack = &g.pel[&id];
            fx.xclaim(
                key,
                gname,
                id,
                &nack.consumer.clone(),
                nack.delivery_time,
                nack.delivery_count,
                g.last_id,
            );
            dirty += 1;
            g.ack(id);
            deleted.push(id);
            count -= 1;
            if at_end {
                break;
            }
            continue;
        }
        if minidle != 0 && now - t < minidle {
            if at_end {
                break;
            }
            continue;
        }
        let g = s.group_mut(gname).expect("checked");
        let nack = g.assign(id, &consumer, now);
        nack.delivery_time = now;
        if !justid {
            nack.delivery_count += 1;
        }
        let (t2, c2) = (nack.delivery_time, nack.delivery_count);
        let last = g.last_id;
        if let Some(cons) = g.consumers.get_mut(&consumer) {
            cons.active_time = now;
        }
        if justid {
            reply_id(&mut w, id);
        } else if let Some(e) = s.get(id) {
            reply_entry(&mut w, &e);
        }
        n += 1;
        count -= 1;
        fx.xclaim(key, gname, id, &consumer, t2, c2, last);
        dirty += 1;
        if at_end {
            break;
        }
    }
    let r = &mut ctx.reply;
    r.array_len(3);
    reply_id(r, next.unwrap_or(StreamId::MIN));
    r.array_len(n);
    r.raw(&body);
    r.array_len(deleted.len());
    for id in deleted {
        reply_id(r, id);
    }
    ctx.srv.persist.dirty += dirty;
    if created {
        ctx.notify(notify::STREAM, "xgroup-createconsumer", key);
    }
    fx.emit(ctx);
}

// ---- XINFO -------------------------------------------------------------------------

/// Nodes of Valkey's radix tree holding these (sorted, distinct) 16-byte
/// keys: one per branching point, per leaf, and per run of single-child
/// steps (compressed into one node), the root included.
fn rax_nodes(keys: &[[u8; 16]]) -> usize {
    fn walk(keys: &[[u8; 16]], depth: usize, starts_chain: bool) -> usize {
        if depth == 16 {
            return 1;
        }
        let mut groups = 0;
        let mut i = 0;
        let mut total = 0;
        let single = keys.first().map(|k| k[depth]) == keys.last().map(|k| k[depth]);
        if single {
            return usize::from(starts_chain) + walk(keys, depth + 1, false);
        }
        while i < keys.len() {
            let c = keys[i][depth];
            let j = i + keys[i..].iter().take_while(|k| k[depth] == c).count();
            total += walk(&keys[i..j], depth + 1, true);
            groups += 1;
            i = j;
        }
        debug_assert!(groups > 1);
        1 + total
    }
    if keys.is_empty() {
        return 1;
    }
    walk(keys, 0, true)
}

fn xinfo(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let opt = argv.get(1);
    let key = argv.get(2);
    if opt.eq_ignore_ascii_case(b"stream") {
        return xinfo_stream(ctx, argv);
    }
    let Some(s) = typed_or_reply!(ctx, key, true, Value::as_stream_mut) else {
        return ctx.error("ERR no such key");
    };
    let now = ctx.now_ms;
    let argc = argv.len();
    let r = &mut ctx.reply;
    if opt.eq_ignore_ascii_case(b"consumers") && argc == 4 {
        let gname = argv.get(3);
        let Some(g) = s.group(gname) else {
            return r.error(&format!(
                "NOGROUP No such consumer group '{}' for key name '{}'",
                String::from_utf8_lossy(gname),
                String::from_utf8_lossy(key)
            ));
        };
        r.array_len(g.consumers.len());
        for c in g.consumers.values() {
            let inactive = if c.active_time != -1 {
                now - c.active_time
            } else {
                -1
            };
            r.map_len(4);
            r.bulk(b"name");
            r.bulk(&c.name);
            r.bulk(b"pending");
            r.int(c.pel.len() as i64);
            r.bulk(b"idle");
            r.int((now - c.seen_time).max(0));
            r.bulk(b"inactive");
            r.int(inactive);
        }
    } else if opt.eq_ignore_ascii_case(b"groups") && argc == 3 {
        let Some(groups) = s.groups.as_ref() else {
            return r.array_len(0);
        };
        r.array_len(groups.len());
        for (name, g) in groups.iter() {
            r.map_len(6);
            r.bulk(b"name");
            r.bulk(name);
            r.bulk(b"consumers");
            r.int(g.consumers.len() as i64);
            r.bulk(b"pending");
            r.int(g.pel.len() as i64);
            r.bulk(b"last-delivered-id");
            reply_id(r, g.last_id);
            r.bulk(b"entries-read");
            reply_entries_read(r, g.entries_read);
            r.bulk(b"lag");
            reply_lag(r, s.lag(g));
        }
    } else {
        super::subcommand_syntax_error(r, argv);
    }
}

fn reply_entries_read(r: &mut ReplyWriter<'_>, n: i64) {
    if n != ENTRIES_READ_INVALID {
        r.int(n);
    } else {
        r.null();
    }
}

fn reply_lag(r: &mut ReplyWriter<'_>, lag: Option<i64>) {
    match lag {
        Some(n) => r.int(n),
        None => r.null(),
    }
}

fn xinfo_stream(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(2);
    let Some(s) = typed_or_reply!(ctx, key, true, Value::as_stream_mut) else {
        return ctx.error("ERR no such key");
    };
    let r = &mut ctx.reply;
    let optc = argv.len() - 3;
    let mut full = true;
    let mut count: i64 = 10;
    if optc == 0 {
        full = false;
    } else {
        if optc != 1 && optc != 3 {
            return super::subcommand_syntax_error(r, argv);
        }
        if !argv.get(3).eq_ignore_ascii_case(b"full") {
            return super::subcommand_syntax_error(r, argv);
        }
        if optc == 3 {
            if !argv.get(4).eq_ignore_ascii_case(b"count") {
                return super::subcommand_syntax_error(r, argv);
            }
            match parse_i64(argv.get(5)) {
                Some(n) => count = if n < 0 { 10 } else { n },
                None => return r.error(NOT_INT),
            }
        }
    }
    let keys: Vec<[u8; 16]> = s.blocks().map(|(k, _)| k.to_be_bytes()).collect();
    r.map_len(if full { 9 } else { 10 });
    r.bulk(b"length");
    r.int(s.length as i64);
    r.bulk(b"radix-tree-keys");
    r.int(keys.len() as i64);
    r.bulk(b"radix-tree-nodes");
    r.int(rax_nodes(&keys) as i64);
    r.bulk(b"last-generated-id");
    reply_id(r, s.last_id);
    r.bulk(b"max-deleted-entry-id");
    reply_id(r, s.max_deleted_id);
    r.bulk(b"entries-added");
    r.int(s.entries_added as i64);
    r.bulk(b"recorded-first-entry-id");
    reply_id(r, s.first_id);
    if !full {
        r.bulk(b"groups");
        r.int(s.group_count() as i64);
        for (name, last) in [(&b"first-entry"[..], false), (b"last-entry", true)] {
            r.bulk(name);
            let mut done = false;
            s.range(StreamId::MIN, StreamId::MAX, last, |e| {
                reply_entry(r, &e);
                done = true;
                false
            });
            if !done {
                r.null();
            }
        }
        return;
    }
    let limit = if count == 0 {
        usize::MAX
    } else {
        count as usize
    };
    r.bulk(b"entries");
    let mut body = Vec::new();
    let mut w = ReplyWriter::new(&mut body, r.proto);
    let mut n = 0;
    s.range(StreamId::MIN, StreamId::MAX, false, |e| {
        reply_entry(&mut w, &e);
        n += 1;
        n < limit
    });
    r.array_len(n);
    r.raw(&body);
    r.bulk(b"groups");
    let Some(groups) = s.groups.as_ref() else {
        return r.array_len(0);
    };
    r.array_len(groups.len());
    for (name, g) in groups.iter() {
        r.map_len(7);
        r.bulk(b"name");
        r.bulk(name);
        r.bulk(b"last-delivered-id");
        reply_id(r, g.last_id);
        r.bulk(b"entries-read");
        reply_entries_read(r, g.entries_read);
        r.bulk(b"lag");
        reply_lag(r, s.lag(g));
        r.bulk(b"pel-count");
        r.int(g.pel.len() as i64);
        r.bulk(b"pending");
        let shown = g.pel.len().min(limit);
        r.array_len(shown);
        for (id, nack) in g.pel.iter().take(shown) {
            r.array_len(4);
            reply_id(r, *id);
            r.bulk(&nack.consumer);
            r.int(nack.delivery_time);
            r.int(nack.delivery_count as i64);
        }
        r.bulk(b"consumers");
        r.array_len(g.consumers.len());
        for c in g.consumers.values() {
            r.map_len(5);
            r.bulk(b"name");
            r.bulk(&c.name);
            r.bulk(b"seen-time");
            r.int(c.seen_time);
            r.bulk(b"active-time");
            r.int(c.active_time);
            r.bulk(b"pel-count");
            r.int(c.pel.len() as i64);
            r.bulk(b"pending");
            let shown = c.pel.len().min(limit);
            r.array_len(shown);
            for id in c.pel.iter().take(shown) {
                let nack = &g.pel[id];
                r.array_len(3);
                reply_id(r, *id);
                r.int(nack.delivery_time);
                r.int(nack.delivery_count as i64);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId::new(ms, seq)
    }

    #[test]
    fn ids_parse_as_valkey_parses_them() {
        assert_eq!(
            parse_id_full(b"5-3", 0, true, false),
            Some((id(5, 3), true))
        );
        assert_eq!(parse_id_full(b"5", 7, true, false), Some((id(5, 7), true)));
        assert_eq!(
            parse_id_full(b"5-*", 0, true, true),
            Some((id(5, 0), false))
        );
        assert_eq!(parse_id_full(b"5-*", 0, true, false), None);
        assert_eq!(
            parse_id_full(b"-", 0, false, false),
            Some((StreamId::MIN, true))
        );
        assert_eq!(
            parse_id_full(b"+", 0, false, false),
            Some((StreamId::MAX, true))
        );
        assert_eq!(parse_id_full(b"-", 0, true, false), None);
        assert_eq!(parse_id_full(b"+", 0, true, false), None);
        // strtoull's leniency (spaces, a sign) and its limits.
        assert_eq!(
            parse_id_full(b" 5-+3", 0, true, false),
            Some((id(5, 3), true))
        );
        assert_eq!(
            parse_id_full(b"18446744073709551615-18446744073709551615", 0, true, false),
            Some((StreamId::MAX, true))
        );
        assert_eq!(
            parse_id_full(b"18446744073709551616-0", 0, true, false),
            None
        );
        for bad in [&b"-5"[..], b"5-", b"a-1", b"1-2-3", b"", b"5-x"] {
            assert_eq!(parse_id_full(bad, 0, true, false), None, "{bad:?}");
        }
        assert_eq!(parse_id_full(&[b'1'; 128], 0, true, false), None);
    }

    #[test]
    fn exclusive_bounds_step_inward_and_fail_at_the_ends() {
        assert_eq!(parse_bound(b"(5-3", 0, true), Ok(id(5, 4)));
        assert_eq!(parse_bound(b"(5", 0, true), Ok(id(5, 1)));
        assert_eq!(parse_bound(b"(5", u64::MAX, false), Ok(id(5, u64::MAX - 1)));
        assert_eq!(parse_bound(b"(5-0", 0, false), Ok(id(4, u64::MAX)));
        assert_eq!(parse_bound(b"5", u64::MAX, false), Ok(id(5, u64::MAX)));
        assert_eq!(parse_bound(b"(", 0, true), Err(INVALID_ID));
        assert_eq!(parse_bound(b"(-", 0, true), Err(INVALID_ID));
        assert_eq!(
            parse_bound(b"(0-0", 0, false),
            Err("ERR invalid end ID for the interval")
        );
        assert_eq!(
            parse_bound(b"(18446744073709551615-18446744073709551615", 0, true),
            Err("ERR invalid start ID for the interval")
        );
    }

    #[test]
    fn radix_tree_node_counts() {
        // One key: the root, compressed over 16 bytes, and the leaf.
        let k = |ms: u64, seq: u64| id(ms, seq).to_be_bytes();
        assert_eq!(rax_nodes(&[]), 1);
        assert_eq!(rax_nodes(&[k(1, 1)]), 2);
        // Two keys differing in the last byte: a compressed prefix, the
        // branch, two leaves.
        assert_eq!(rax_nodes(&[k(1, 1), k(1, 2)]), 4);
        // Differing in the first byte: the root branches at once, each
        // child compresses the rest to its leaf.
        assert_eq!(rax_nodes(&[k(1, 0), k(1 << 56, 0)]), 5);
    }
}
