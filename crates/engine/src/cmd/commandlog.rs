//! COMMANDLOG (Valkey 8.1: GET/LEN/RESET of the `slow`, `large-request`
//! and `large-reply` logs) and SLOWLOG, the older name of its `slow`
//! part. The logs themselves: crate::commandlog.

use super::server::{ADMIN_ACL, cfg_sub};
use crate::batch::ArgvRef;
use crate::command::doc_flags;
use crate::command::flags::*;
use crate::command::{ArgSpec, CommandSpec, Ctx};
use crate::commandlog::Kind;

const TYPE_ERR: &str = "ERR type should be one of the following: slow, large-request, large-reply";

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "commandlog",
        arity: -2,
        flags: 0,
        acl_categories: &["slow"],
        group: "server",
        since: "8.1.0",
        summary: "A container for command log commands.",
        complexity: "Depends on subcommand.",
        func: None,
        subcommands: &[
            CommandSpec {
                complexity: "O(N) where N is the number of entries returned",
                tips: &["request_policy:all_nodes", "nondeterministic_output"],
                args: &[
                    ArgSpec::integer("count"),
                    ArgSpec::oneof(
                        "type",
                        &[
                            ArgSpec::string("slow"),
                            ArgSpec::string("large-request"),
                            ArgSpec::string("large-reply"),
                        ],
                    ),
                ],
                ..cfg_sub(
                    "get",
                    4,
                    ADMIN | LOADING | STALE,
                    ADMIN_ACL,
                    "8.1.0",
                    "Returns the specified command log's entries.",
                    commandlog_get,
                )
            },
            CommandSpec {
                tips: &[
                    "request_policy:all_nodes",
                    "response_policy:agg_sum",
                    "nondeterministic_output",
                ],
                args: &[ArgSpec::oneof(
                    "type",
                    &[
                        ArgSpec::string("slow"),
                        ArgSpec::string("large-request"),
                        ArgSpec::string("large-reply"),
                    ],
                )],
                ..cfg_sub(
                    "len",
                    3,
                    ADMIN | LOADING | STALE,
                    ADMIN_ACL,
                    "8.1.0",
                    "Returns the number of entries in the specified type of command log.",
                    commandlog_len,
                )
            },
            CommandSpec {
                complexity: "O(N) where N is the number of entries in the commandlog",
                tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
                args: &[ArgSpec::oneof(
                    "type",
                    &[
                        ArgSpec::string("slow"),
                        ArgSpec::string("large-request"),
                        ArgSpec::string("large-reply"),
                    ],
                )],
                ..cfg_sub(
                    "reset",
                    3,
                    ADMIN | LOADING | STALE,
                    ADMIN_ACL,
                    "8.1.0",
                    "Clears all entries from the specified type of command log.",
                    commandlog_reset,
                )
            },
            cfg_sub(
                "help",
                2,
                LOADING | STALE,
                &["slow"],
                "8.1.0",
                "Show helpful text about the different subcommands",
                commandlog_help,
            ),
        ],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        doc_flags: doc_flags::DEPRECATED,
        deprecated_since: Some("8.1.0"),
        replaced_by: Some("`COMMANDLOG`"),
        name: "slowlog",
        arity: -2,
        flags: 0,
        acl_categories: &["slow"],
        group: "server",
        since: "2.2.12",
        summary: "A container for slow log commands.",
        complexity: "Depends on subcommand.",
        func: None,
        subcommands: &[
            CommandSpec {
                complexity: "O(N) where N is the number of entries returned",
                tips: &["request_policy:all_nodes", "nondeterministic_output"],
                history: &[(
                    "4.0.0",
                    "Added client IP address, port and name to the reply.",
                )],
                doc_flags: doc_flags::DEPRECATED,
                deprecated_since: Some("8.1.0"),
                replaced_by: Some("`COMMANDLOG GET <count> SLOW`"),
                args: &[ArgSpec::integer("count").optional()],
                ..cfg_sub(
                    "get",
                    -2,
                    ADMIN | LOADING | STALE,
                    ADMIN_ACL,
                    "2.2.12",
                    "Returns the slow log's entries.",
                    slowlog_get,
                )
            },
            CommandSpec {
                tips: &[
                    "request_policy:all_nodes",
                    "response_policy:agg_sum",
                    "nondeterministic_output",
                ],
                doc_flags: doc_flags::DEPRECATED,
                deprecated_since: Some("8.1.0"),
                replaced_by: Some("`COMMANDLOG LEN SLOW`"),
                ..cfg_sub(
                    "len",
                    2,
                    ADMIN | LOADING | STALE,
                    ADMIN_ACL,
                    "2.2.12",
                    "Returns the number of entries in the slow log.",
                    slowlog_len,
                )
            },
            CommandSpec {
                complexity: "O(N) where N is the number of entries in the slowlog",
                tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
                doc_flags: doc_flags::DEPRECATED,
                deprecated_since: Some("8.1.0"),
                replaced_by: Some("`COMMANDLOG RESET SLOW`"),
                ..cfg_sub(
                    "reset",
                    2,
                    ADMIN | LOADING | STALE,
                    ADMIN_ACL,
                    "2.2.12",
                    "Clears all entries from the slow log.",
                    slowlog_reset,
                )
            },
            CommandSpec {
                doc_flags: doc_flags::DEPRECATED,
                deprecated_since: Some("8.1.0"),
                replaced_by: Some("`COMMANDLOG HELP`"),
                ..cfg_sub(
                    "help",
                    2,
                    LOADING | STALE,
                    &["slow"],
                    "6.2.0",
                    "Show helpful text about the different subcommands",
                    slowlog_help,
                )
            },
        ],
        ..CommandSpec::DEFAULT
    },
];

/// GET's count: -1 (all) or more.
fn parse_count(arg: &[u8]) -> Option<i64> {
    crate::num::parse_i64(arg).filter(|&n| n >= -1)
}

fn reply_entries(ctx: &mut Ctx<'_>, kind: Kind, count: i64) {
    let log = &ctx.srv.commandlog.log(kind).entries;
    let n = if count == -1 {
        log.len()
    } else {
        log.len().min(count as usize)
    };
    ctx.reply.array_len(n);
    for e in log.iter().take(n) {
        ctx.reply.array_len(6);
        ctx.reply.int(e.id as i64);
        ctx.reply.int(e.time_s);
        ctx.reply.int(e.value as i64);
        ctx.reply.array_len(e.args.len());
        for a in &e.args {
            ctx.reply.bulk(a);
        }
        ctx.reply.bulk(e.peer.as_bytes());
        ctx.reply.bulk(&e.name);
    }
}

fn commandlog_get(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    // Valkey's order: the count, then the type.
    let Some(count) = parse_count(argv.get(2)) else {
        return ctx.error("ERR count should be greater than or equal to -1");
    };
    let Some(kind) = Kind::parse(argv.get(3)) else {
        return ctx.error(TYPE_ERR);
    };
    reply_entries(ctx, kind, count);
}

fn commandlog_len(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let Some(kind) = Kind::parse(argv.get(2)) else {
        return ctx.error(TYPE_ERR);
    };
    let n = ctx.srv.commandlog.log(kind).entries.len();
    ctx.reply.int(n as i64);
}

fn commandlog_reset(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let Some(kind) = Kind::parse(argv.get(2)) else {
        return ctx.error(TYPE_ERR);
    };
    ctx.srv.commandlog.reset(kind);
    ctx.reply.ok();
}

fn commandlog_help(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    super::reply_help(
        ctx,
        "COMMANDLOG",
        &[
            "GET <count> <type>",
            "    Return top <count> entries of the specified <type> from the commandlog (-1 mean all).",
            "    Entries are made of:",
            "    id, timestamp,",
            "        time in microseconds for type of slow,",
            "        or size in bytes for type of large-request,",
            "        or size in bytes for type of large-reply",
            "    arguments array, client IP and port,",
            "    client name",
            "LEN <type>",
            "    Return the length of the specified type of commandlog.",
            "RESET <type>",
            "    Reset the specified type of commandlog.",
        ],
    );
}

fn slowlog_get(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    if argv.len() > 3 {
        return super::subcommand_syntax_error(&mut ctx.reply, argv);
    }
    let count = if argv.len() == 3 {
        match parse_count(argv.get(2)) {
            Some(n) => n,
            None => return ctx.error("ERR count should be greater than or equal to -1"),
        }
    } else {
        10
    };
    reply_entries(ctx, Kind::Slow, count);
}

fn slowlog_len(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let n = ctx.srv.commandlog.log(Kind::Slow).entries.len();
    ctx.reply.int(n as i64);
}

fn slowlog_reset(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    ctx.srv.commandlog.reset(Kind::Slow);
    ctx.reply.ok();
}

fn slowlog_help(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    super::reply_help(
        ctx,
        "SLOWLOG",
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    );
}
