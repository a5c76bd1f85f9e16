//! CLIENT and its subcommands.

use super::SYNTAX_ERR;
use crate::batch::ArgvRef;
use crate::command::flags::*;
use crate::command::{ArgSpec, CommandSpec, Ctx};
use crate::replication::primary::FeedState;
use crate::session::{ReplyMode, Session};
use crate::table::table;
use crate::{ClientId, Event};
use resp::Protocol;
use std::fmt::Write as _;

const fn sub(
    name: &'static str,
    arity: i32,
    flags: u32,
    acl: &'static [&'static str],
    since: &'static str,
    summary: &'static str,
    func: crate::command::CommandFn,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        acl_categories: acl,
        group: "connection",
        since,
        summary,
        func: Some(func),
        ..CommandSpec::DEFAULT
    }
}

const CONN: &[&str] = &["slow", "connection"];
const ADMIN_CONN: &[&str] = &["admin", "slow", "dangerous", "connection"];

// Argument specs, as Valkey 8's command JSON gives them (COMMAND DOCS).
const ON_OFF: &[ArgSpec] = &[ArgSpec::oneof(
    "enabled",
    &[
        ArgSpec::pure_token("on", "ON"),
        ArgSpec::pure_token("off", "OFF"),
    ],
)];
const CLIENT_REPLY_ARGS: &[ArgSpec] = &[ArgSpec::oneof(
    "action",
    &[
        ArgSpec::pure_token("on", "ON"),
        ArgSpec::pure_token("off", "OFF"),
        ArgSpec::pure_token("skip", "SKIP"),
    ],
)];
const CLIENT_SETINFO_ARGS: &[ArgSpec] = &[ArgSpec::oneof(
    "attr",
    &[
        ArgSpec::string("libname").token("LIB-NAME"),
        ArgSpec::string("libver").token("LIB-VER"),
    ],
)];
const CLIENT_LIST_ARGS: &[ArgSpec] = &[
    ArgSpec::oneof(
        "client-type",
        &[
            ArgSpec::pure_token("normal", "NORMAL"),
            ArgSpec::pure_token("master", "MASTER"),
            ArgSpec::pure_token("replica", "REPLICA"),
            ArgSpec::pure_token("pubsub", "PUBSUB"),
        ],
    )
    .token("TYPE")
    .since("5.0.0")
    .optional(),
    ArgSpec::integer("client-id")
        .token("ID")
        .since("6.2.0")
        .optional()
        .multiple(),
    ArgSpec::string("username")
        .token("USER")
        .since("8.1.0")
        .optional(),
    ArgSpec::string("addr")
        .token("ADDR")
        .display("ip:port")
        .since("8.1.0")
        .optional(),
    ArgSpec::string("laddr")
        .token("LADDR")
        .display("ip:port")
        .since("8.1.0")
        .optional(),
    ArgSpec::oneof(
        "skipme",
        &[
            ArgSpec::pure_token("yes", "YES"),
            ArgSpec::pure_token("no", "NO"),
        ],
    )
    .token("SKIPME")
    .since("8.1.0")
    .optional(),
    ArgSpec::integer("maxage")
        .token("MAXAGE")
        .since("8.1.0")
        .optional(),
];
const CLIENT_KILL_ARGS: &[ArgSpec] = &[ArgSpec::oneof(
    "filter",
    &[
        ArgSpec::string("old-format")
            .display("ip:port")
            .deprecated_since("2.8.12"),
        ArgSpec::oneof(
            "new-format",
            &[
                ArgSpec::integer("client-id")
                    .token("ID")
                    .since("2.8.12")
                    .optional()
                    .multiple(),
                ArgSpec::oneof(
                    "client-type",
                    &[
                        ArgSpec::pure_token("normal", "NORMAL"),
                        ArgSpec::pure_token("master", "MASTER").since("3.2.0"),
                        ArgSpec::pure_token("primary", "PRIMARY").since("8.0.0"),
                        ArgSpec::pure_token("slave", "SLAVE"),
                        ArgSpec::pure_token("replica", "REPLICA").since("5.0.0"),
                        ArgSpec::pure_token("pubsub", "PUBSUB"),
                    ],
                )
                .token("TYPE")
                .since("2.8.12")
                .optional(),
                ArgSpec::string("username").token("USER").optional(),
                ArgSpec::string("addr")
                    .token("ADDR")
                    .display("ip:port")
                    .optional(),
                ArgSpec::string("laddr")
                    .token("LADDR")
                    .display("ip:port")
                    .since("6.2.0")
                    .optional(),
                ArgSpec::oneof(
                    "skipme",
                    &[
                        ArgSpec::pure_token("yes", "YES"),
                        ArgSpec::pure_token("no", "NO"),
                    ],
                )
                .token("SKIPME")
                .optional(),
                ArgSpec::integer("maxage")
                    .token("MAXAGE")
                    .since("8.0.0")
                    .optional(),
            ],
        )
        .multiple(),
    ],
)];

const CLIENT_UNBLOCK_ARGS: &[ArgSpec] = &[
    ArgSpec::integer("client-id"),
    ArgSpec::oneof(
        "unblock-type",
        &[
            ArgSpec::pure_token("timeout", "TIMEOUT"),
            ArgSpec::pure_token("error", "ERROR"),
        ],
    )
    .optional(),
];

pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "client",
    arity: -2,
    flags: 0,
    acl_categories: &["slow"],
    group: "connection",
    since: "2.4.0",
    summary: "A container for client connection commands.",
    complexity: "Depends on subcommand.",
    func: None,
    subcommands: &[
        sub(
            "id",
            2,
            NOSCRIPT | LOADING | STALE,
            CONN,
            "5.0.0",
            "Returns the unique client ID of the connection.",
            id,
        ),
        CommandSpec {
            tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
            args: &[ArgSpec::string("connection-name")],
            ..sub(
                "setname",
                3,
                NOSCRIPT | LOADING | STALE,
                CONN,
                "2.6.9",
                "Sets the connection name.",
                setname,
            )
        },
        sub(
            "getname",
            2,
            NOSCRIPT | LOADING | STALE,
            CONN,
            "2.6.9",
            "Returns the name of the connection.",
            getname,
        ),
        CommandSpec {
            complexity: "O(N) where N is the number of client connections",
            tips: &["nondeterministic_output"],
            history: &[
                ("2.8.12", "Added unique client `id` field."),
                ("5.0.0", "Added optional `TYPE` filter."),
                ("6.0.0", "Added `user` field."),
                (
                    "6.2.0",
                    "Added `argv-mem`, `tot-mem`, `laddr` and `redir` fields and the optional `ID` filter.",
                ),
                (
                    "7.0.0",
                    "Added `resp`, `multi-mem`, `rbs` and `rbp` fields.",
                ),
                ("7.0.3", "Added `ssub` field."),
                (
                    "8.0.0",
                    "Replaced `master` `TYPE` with `primary`. `master` still supported for backward compatibility.",
                ),
                (
                    "8.1.0",
                    "Added filters USER, ADDR, LADDR, SKIPME, and MAXAGE",
                ),
            ],
            args: CLIENT_LIST_ARGS,
            ..sub(
                "list",
                -2,
                ADMIN | NOSCRIPT | LOADING | STALE,
                ADMIN_CONN,
                "2.4.0",
                "Lists open connections.",
                list,
            )
        },
        CommandSpec {
            tips: &["nondeterministic_output"],
            ..sub(
                "info",
                2,
                NOSCRIPT | LOADING | STALE,
                CONN,
                "6.2.0",
                "Returns information about the connection.",
                info,
            )
        },
        CommandSpec {
            complexity: "O(N) where N is the number of client connections",
            history: &[
                ("2.8.12", "Added new filter format."),
                ("2.8.12", "`ID` option."),
                ("3.2.0", "Added `master` type in for `TYPE` option."),
                (
                    "5.0.0",
                    "Replaced `slave` `TYPE` with `replica`. `slave` still supported for backward compatibility.",
                ),
                ("6.2.0", "`LADDR` option."),
                ("8.0.0", "`MAXAGE` option."),
                (
                    "8.0.0",
                    "Replaced `master` `TYPE` with `primary`. `master` still supported for backward compatibility.",
                ),
                ("8.1.0", "`ID` option accepts multiple IDs."),
            ],
            args: CLIENT_KILL_ARGS,
            ..sub(
                "kill",
                -3,
                ADMIN | NOSCRIPT | LOADING | STALE,
                ADMIN_CONN,
                "2.4.0",
                "Terminates open connections.",
                kill,
            )
        },
        CommandSpec {
            tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
            args: CLIENT_SETINFO_ARGS,
            ..sub(
                "setinfo",
                4,
                NOSCRIPT | LOADING | STALE,
                CONN,
                "7.2.0",
                "Sets information specific to the client or connection.",
                setinfo,
            )
        },
        CommandSpec {
            args: ON_OFF,
            ..sub(
                "no-evict",
                3,
                ADMIN | NOSCRIPT | LOADING | STALE,
                ADMIN_CONN,
                "7.0.0",
                "Sets the client eviction mode of the connection.",
                no_evict,
            )
        },
        CommandSpec {
            args: ON_OFF,
            ..sub(
                "no-touch",
                3,
                NOSCRIPT | LOADING | STALE,
                CONN,
                "7.2.0",
                "Controls whether commands sent by the client affect the LRU/LFU of accessed keys.",
                no_touch,
            )
        },
        CommandSpec {
            args: CLIENT_REPLY_ARGS,
            ..sub(
                "reply",
                3,
                NOSCRIPT | LOADING | STALE,
                CONN,
                "3.2.0",
                "Instructs the server whether to reply to commands.",
                reply,
            )
        },
        CommandSpec {
            args: &[ArgSpec::string("capability").multiple()],
            ..sub(
                "capa",
                -3,
                NOSCRIPT | LOADING | STALE,
                CONN,
                "8.0.0",
                "A client claims its capability.",
                capa,
            )
        },
        CommandSpec {
            args: ON_OFF,
            ..sub(
                "import-source",
                3,
                NOSCRIPT | LOADING | STALE,
                CONN,
                "8.1.0",
                "Mark this client as an import source when server is in import mode.",
                import_source,
            )
        },
        CommandSpec {
            complexity: "O(1). Some options may introduce additional complexity.",
            args: CLIENT_TRACKING_ARGS,
            ..sub(
                "tracking",
                -3,
                NOSCRIPT | LOADING | STALE,
                CONN,
                "6.0.0",
                "Controls server-assisted client-side caching for the connection.",
                tracking,
            )
        },
        CommandSpec {
            args: CLIENT_CACHING_ARGS,
            ..sub(
                "caching",
                3,
                NOSCRIPT | LOADING | STALE,
                CONN,
                "6.0.0",
                "Instructs the server whether to track the keys in the next request.",
                caching,
            )
        },
        sub(
            "getredir",
            2,
            NOSCRIPT | LOADING | STALE,
            CONN,
            "6.0.0",
            "Returns the client ID to which the connection's tracking notifications are redirected.",
            getredir,
        ),
        sub(
            "trackinginfo",
            2,
            NOSCRIPT | LOADING | STALE,
            CONN,
            "6.2.0",
            "Returns information about server-assisted client-side caching for the connection.",
            trackinginfo,
        ),
        CommandSpec {
            history: &[(
                "6.2.0",
                "`CLIENT PAUSE WRITE` mode added along with the `mode` option.",
            )],
            args: CLIENT_PAUSE_ARGS,
            ..sub(
                "pause",
                -3,
                ADMIN | NOSCRIPT | LOADING | STALE | SENTINEL,
                ADMIN_CONN,
                "3.0.0",
                "Suspends commands processing.",
                pause,
            )
        },
        CommandSpec {
            complexity: "O(N) Where N is the number of paused clients",
            ..sub(
                "unpause",
                2,
                ADMIN | NOSCRIPT | LOADING | STALE | SENTINEL,
                ADMIN_CONN,
                "6.2.0",
                "Resumes processing commands from paused clients.",
                unpause,
            )
        },
        CommandSpec {
            complexity: "O(log N) where N is the number of client connections",
            args: CLIENT_UNBLOCK_ARGS,
            ..sub(
                "unblock",
                -3,
                ADMIN | NOSCRIPT | LOADING | STALE,
                ADMIN_CONN,
                "5.0.0",
                "Unblocks a client blocked by a blocking command from a different connection.",
                unblock,
            )
        },
        sub(
            "help",
            2,
            LOADING | STALE,
            CONN,
            "5.0.0",
            "Returns helpful text about the different subcommands.",
            help,
        ),
    ],
    ..CommandSpec::DEFAULT
}];

const CLIENT_TRACKING_ARGS: &[ArgSpec] = &[
    ArgSpec::oneof(
        "status",
        &[
            ArgSpec::pure_token("on", "ON"),
            ArgSpec::pure_token("off", "OFF"),
        ],
    ),
    ArgSpec::integer("client-id").token("REDIRECT").optional(),
    ArgSpec::string("prefix")
        .token("PREFIX")
        .optional()
        .multiple()
        .multiple_token(),
    ArgSpec::pure_token("bcast", "BCAST").optional(),
    ArgSpec::pure_token("optin", "OPTIN").optional(),
    ArgSpec::pure_token("optout", "OPTOUT").optional(),
    ArgSpec::pure_token("noloop", "NOLOOP").optional(),
];
const CLIENT_CACHING_ARGS: &[ArgSpec] = &[ArgSpec::oneof(
    "mode",
    &[
        ArgSpec::pure_token("yes", "YES"),
        ArgSpec::pure_token("no", "NO"),
    ],
)];

/// CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN]
/// [OPTOUT] [NOLOOP], with Valkey's checks in its order.
fn tracking(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let mut opts = crate::tracking::ClientTracking::default();
    // PREFIX arguments in the order given (the collision check names them so).
    let mut given: Vec<&[u8]> = Vec::new();
    let mut redirect_given = false;
    let mut j = 3;
    while j < argv.len() {
        let a = argv.get(j);
        let more = j + 1 < argv.len();
        if a.eq_ignore_ascii_case(b"redirect") && more {
            j += 1;
            if redirect_given {
                return ctx.error("ERR A client can only redirect to a single other client");
            }
            let Some(id) = crate::num::parse_i64(argv.get(j)) else {
                return ctx.error("ERR value is not an integer or out of range");
            };
            let exists = id > 0
                && (id as u64 == ctx.session.id.0
                    || ctx.srv.clients.get(ClientId(id as u64)).is_some());
            if !exists {
                return ctx.error("ERR The client ID you want redirect to does not exist");
            }
            opts.redirect = id as u64;
            redirect_given = true;
        } else if a.eq_ignore_ascii_case(b"bcast") {
            opts.bcast = true;
        } else if a.eq_ignore_ascii_case(b"optin") {
            opts.optin = true;
        } else if a.eq_ignore_ascii_case(b"optout") {
            opts.optout = true;
        } else if a.eq_ignore_ascii_case(b"noloop") {
            opts.noloop = true;
        } else if a.eq_ignore_ascii_case(b"prefix") && more {
            j += 1;
            given.push(argv.get(j));
            opts.prefixes.insert(argv.get(j).into());
        } else {
            return ctx.error(SYNTAX_ERR);
        }
        j += 1;
    }
    let on = argv.get(2);
    if on.eq_ignore_ascii_case(b"off") {
        crate::tracking::disable(ctx.srv, ctx.session);
        return ctx.reply.ok();
    }
    if !on.eq_ignore_ascii_case(b"on") {
        return ctx.error(SYNTAX_ERR);
    }
    let current = ctx.session.tracking.as_deref();
    if opts.bcast {
        if let Some(msg) = prefix_collision(current, &given) {
            return ctx.error(&msg);
        }
    } else if !opts.prefixes.is_empty() {
        return ctx.error("ERR PREFIX option requires BCAST mode to be enabled");
    }
    if current.is_some_and(|t| t.bcast != opts.bcast) {
        return ctx.error(
            "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.",
        );
    }
    if opts.bcast && (opts.optin || opts.optout) {
        return ctx.error("ERR OPTIN and OPTOUT are not compatible with BCAST");
    }
    if opts.optin && opts.optout {
        return ctx.error("ERR You can't specify both OPTIN mode and OPTOUT mode");
    }
    if current.is_some_and(|t| (opts.optin && t.optout) || (opts.optout && t.optin)) {
        return ctx.error(
            "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.",
        );
    }
    // The CLIENT CACHING flag survives re-enabling, as Valkey's does.
    opts.caching = current.is_some_and(|t| t.caching);
    crate::tracking::enable(ctx.srv, ctx.session, opts);
    ctx.reply.ok();
}

/// Valkey's `checkPrefixCollisionsOrReply`: a prefix may not be a prefix
/// of another one of the same client, nor equal to one (Valkey 8.1 refuses
/// a prefix given twice, or one the client already has). `new` in the
/// order given: the error names the earlier of a colliding pair first.
fn prefix_collision(
    current: Option<&crate::tracking::ClientTracking>,
    new: &[&[u8]],
) -> Option<String> {
    let overlaps = |a: &[u8], b: &[u8]| a.starts_with(b) || b.starts_with(a);
    let show = |p: &[u8]| String::from_utf8_lossy(p).into_owned();
    for (i, &p) in new.iter().enumerate() {
        if let Some(t) = current
            && let Some(old) = t.prefixes.iter().find(|o| overlaps(p, o))
        {
            return Some(format!(
                "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                show(p),
                show(old)
            ));
        }
        if let Some(other) = new[i + 1..].iter().find(|o| overlaps(p, o)) {
            return Some(format!(
                "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                show(p),
                show(other)
            ));
        }
    }
    None
}

fn caching(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let Some(t) = ctx.session.tracking.as_deref_mut() else {
        return ctx.error(
            "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled",
        );
    };
    let v = argv.get(2);
    if v.eq_ignore_ascii_case(b"yes") {
        if !t.optin {
            return ctx.error(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            );
        }
    } else if v.eq_ignore_ascii_case(b"no") {
        if !t.optout {
            return ctx.error(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            );
        }
    } else {
        return ctx.error(SYNTAX_ERR);
    }
    t.caching = true;
    ctx.reply.ok();
}

/// CLIENT IMPORT-SOURCE: ringkv has no import mode (Valkey 8.1's
/// `import-mode`, off by default, answers the same).
/// CLIENT IMPORT-SOURCE ON|OFF: in import mode, this client sees keys
/// past their time as live (see `expiry_mode`). OFF is always accepted.
fn import_source(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let v = argv.get(2);
    if !ctx.srv.config.import_mode && !v.eq_ignore_ascii_case(b"off") {
        return ctx.error("ERR Server is not in import mode");
    }
    if v.eq_ignore_ascii_case(b"on") {
        ctx.session.import_source = true;
    } else if v.eq_ignore_ascii_case(b"off") {
        ctx.session.import_source = false;
    } else {
        return ctx.error(SYNTAX_ERR);
    }
    ctx.reply.ok();
}

/// CLIENT CAPA cap ...: unknown capabilities are ignored, as in Valkey.
fn capa(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    for j in 2..argv.len() {
        if argv.get(j).eq_ignore_ascii_case(b"redirect") {
            ctx.session.capa_redirect = true;
        }
    }
    ctx.reply.ok();
}

fn getredir(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let r = ctx
        .session
        .tracking
        .as_deref()
        .map_or(-1, |t| t.redirect as i64);
    ctx.reply.int(r);
}

fn trackinginfo(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let t = ctx.session.tracking.as_deref();
    let flags = t.map_or_else(|| vec!["off"], |t| t.flag_names());
    ctx.reply.map_len(3);
    ctx.reply.bulk(b"flags");
    ctx.reply.set_len(flags.len());
    for f in flags {
        ctx.reply.bulk(f.as_bytes());
    }
    ctx.reply.bulk(b"redirect");
    ctx.reply.int(t.map_or(-1, |t| t.redirect as i64));
    ctx.reply.bulk(b"prefixes");
    let prefixes: Vec<&[u8]> =
        t.map_or_else(Vec::new, |t| t.prefixes.iter().map(|p| &**p).collect());
    ctx.reply.array_len(prefixes.len());
    for p in prefixes {
        ctx.reply.bulk(p);
    }
}

const CLIENT_PAUSE_ARGS: &[ArgSpec] = &[
    ArgSpec::integer("timeout"),
    ArgSpec::oneof(
        "mode",
        &[
            ArgSpec::pure_token("write", "WRITE"),
            ArgSpec::pure_token("all", "ALL"),
        ],
    )
    .since("6.2.0")
    .optional(),
];

/// CLIENT PAUSE timeout-ms [WRITE|ALL] (see crate::pause).
fn pause(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let ms = match crate::num::parse_i64(argv.get(2)) {
        Some(ms) if ms < 0 => return ctx.error("ERR timeout is negative"),
        Some(ms) => ms,
        None => return ctx.error("ERR timeout is not an integer or out of range"),
    };
    let all = match argv.len() {
        3 => true,
        4 if argv.get(3).eq_ignore_ascii_case(b"all") => true,
        4 if argv.get(3).eq_ignore_ascii_case(b"write") => false,
        4 => return ctx.error("ERR CLIENT PAUSE mode must be WRITE or ALL"),
        _ => return ctx.error(SYNTAX_ERR),
    };
    let end = ctx.now_ms.saturating_add(ms);
    crate::pause::start(ctx.srv, end, all);
    ctx.reply.ok();
}

fn unpause(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    crate::pause::end(ctx.srv);
    ctx.reply.ok();
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]: 1 if the client was blocked.
fn unblock(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    // As Valkey 8.1: the reason is read only when it is the last
    // argument (more arguments are ignored), and before the id.
    let error = match argv.len() {
        4 if argv.get(3).eq_ignore_ascii_case(b"timeout") => false,
        4 if argv.get(3).eq_ignore_ascii_case(b"error") => true,
        4 => return ctx.error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
        _ => false,
    };
    let Some(id) = crate::num::parse_i64(argv.get(2)) else {
        return ctx.error("ERR value is not an integer or out of range");
    };
    let done = id >= 0 && crate::blocking::unblock(ctx.srv, ClientId(id as u64), error);
    ctx.reply.int(i64::from(done));
}

fn id(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    ctx.reply.int(ctx.session.id.0 as i64);
}

/// Valkey's `validateClientAttr`: printable ASCII without spaces.
fn valid_attr(v: &[u8]) -> bool {
    v.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

/// CLIENT SETNAME / HELLO SETNAME: an empty name clears it.
pub fn set_name(s: &mut Session, name: &[u8]) -> Result<(), &'static str> {
    if !valid_attr(name) {
        return Err("ERR Client names cannot contain spaces, newlines or special characters.");
    }
    s.name = if name.is_empty() {
        None
    } else {
        Some(name.to_vec())
    };
    Ok(())
}

fn setname(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    match set_name(ctx.session, argv.get(2)) {
        Ok(()) => ctx.reply.ok(),
        Err(e) => ctx.error(e),
    }
}

fn getname(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    match &ctx.session.name {
        Some(n) => ctx.reply.bulk(n),
        None => ctx.reply.null(),
    }
}

/// One CLIENT LIST line (without the newline), Valkey 8's field order.
/// `watch`: the client's WATCH (flag `d`, `watch=`), kept by the server.
pub fn client_line(s: &Session, watch: crate::watch::WatchState, now_ms: i64) -> String {
    client_line_logged(s, watch, now_ms, false)
}

/// [`client_line`] for the log: with `hide` (`hide-user-data-from-log`)
/// the client's name and user read `*redacted*`, as in Valkey's log.
pub fn client_line_logged(
    s: &Session,
    watch: crate::watch::WatchState,
    now_ms: i64,
    hide: bool,
) -> String {
    let mut flags = String::new();
    // Valkey's order: O (monitor), P (pub/sub), x (MULTI), b, t R B
    // (tracking), d, c, A, U (unix socket), r, e, T, I.
    for (on, flag) in [
        (s.monitor, 'O'),
        (s.subs.is_some(), 'P'),
        (s.multi.is_some(), 'x'),
        (s.blocked.is_some() || s.paused, 'b'),
        (s.tracking.is_some(), 't'),
        (
            s.tracking.as_deref().is_some_and(|t| t.broken_redirect),
            'R',
        ),
        (s.tracking.as_deref().is_some_and(|t| t.bcast), 'B'),
        (watch.dirty, 'd'),
        (s.close_after_reply, 'c'),
        (s.close_asap, 'A'),
        (s.unix_socket.is_some(), 'U'),
        (s.readonly, 'r'),
        (s.no_evict, 'e'),
        (s.no_touch, 'T'),
        (s.import_source, 'I'),
    ] {
        if on {
            flags.push(flag);
        }
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let cmd = s
        .last_cmd
        .map_or("NULL", |i| table().entries[i].fullname.as_str());
    const REDACTED: &str = "*redacted*";
    let name = match &s.name {
        _ if hide => REDACTED.into(),
        Some(n) => String::from_utf8_lossy(n),
        None => "".into(),
    };
    let user = if hide { REDACTED } else { &*s.user_name };
    let lib_name = s
        .lib_name
        .as_deref()
        .map(String::from_utf8_lossy)
        .unwrap_or_default();
    let lib_ver = s
        .lib_ver
        .as_deref()
        .map(String::from_utf8_lossy)
        .unwrap_or_default();
    let (sub, psub, ssub) = crate::pubsub::counts(s);
    // Read once: the IO thread moves the meter meanwhile, and the line's
    // `obl`/`oll`/`omem`, `tot-mem` and `events` must agree.
    let pending = s.output_bytes();
    let out = crate::output::OutputShape::of(pending);
    let tot_mem = s.memory_with_output(pending);
    let mut o = String::with_capacity(400);
    let _ = write!(
        o,
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} capa={} db={} sub={} psub={} ssub={} \
         multi={} watch={} qbuf={} qbuf-free={} argv-mem=0 multi-mem={} rbs={} rbp=0 obl={} oll={} omem={} \
         tot-mem={} events={} cmd={} user={} redir={} resp={} lib-name={} lib-ver={} \
         tot-net-in={} tot-net-out={} tot-cmds={}",
        s.id.0,
        s.addr_string(),
        s.laddr_string(),
        s.fd,
        name,
        (now_ms / 1000 - s.created_ms / 1000).max(0),
        (now_ms / 1000 - s.last_interaction_ms / 1000).max(0),
        flags,
        if s.capa_redirect { "r" } else { "" },
        s.db,
        sub,
        psub,
        ssub,
        s.multi
            .as_ref()
            .map_or(if s.multi_state { 0 } else { -1 }, |m| m.len() as i64),
        watch.keys,
        s.meter.input(),
        s.meter.input_free(),
        s.multi.as_ref().map_or(0, |m| m.mem()),
        crate::output::REPLY_BUFFER,
        out.buffer,
        out.blocks,
        out.list,
        tot_mem,
        // Valkey watches for writability only while output waits.
        if pending > 0 { "rw" } else { "r" },
        cmd,
        user,
        s.tracking.as_deref().map_or(-1, |t| t.redirect as i64),
        if s.proto == Protocol::Resp3 { 3 } else { 2 },
        lib_name,
        lib_ver,
        s.net_input_bytes,
        s.net_output_bytes,
        s.commands_processed,
    );
    o
}

/// What CLIENT LIST shows of a replica: its session left the client table
/// for its feed thread at PSYNC. As in Valkey the line is the session's,
/// with flags `S`, and `cmd=psync` until the first `REPLCONF ACK`
/// (`cmd=replconf` and idle time from the last ACK after it). Unlike
/// Valkey's, its byte and command counters stay those of the handshake
/// (its feed reads the ACKs).
pub struct ReplicaCard {
    addr: String,
    laddr: String,
    created_ms: i64,
    psync_ms: i64,
    /// The line up to `name=...`; from the flags to `events=...`; from
    /// `user=` on.
    head: String,
    middle: String,
    tail: String,
}

impl ReplicaCard {
    /// The card of `s`, which is turning into a replica by PSYNC now.
    pub fn of(s: &Session, now_ms: i64) -> ReplicaCard {
        let line = client_line(s, Default::default(), now_ms);
        // No field before `flags=` holds a space (names cannot), so the
        // line splits cleanly into its fields.
        let (head, rest) = line.split_once(" age=").unwrap_or((&line, ""));
        let fields = rest.split(' ').skip(2).map(|f| {
            match f.split_once('=') {
                Some(("flags", _)) => "flags=S".to_string(),
                // The PSYNC in the buffer is being run.
                Some(("qbuf", _)) => "qbuf=0".to_string(),
                Some(("tot-cmds", n)) => {
                    // PSYNC itself, counted once it ran.
                    format!("tot-cmds={}", n.parse::<u64>().unwrap_or(0) + 1)
                }
                _ => f.to_string(),
            }
        });
        let fields: Vec<String> = fields.collect();
        let cmd = fields.iter().position(|f| f.starts_with("cmd="));
        let (middle, tail) = match cmd {
            Some(i) => (fields[..i].join(" "), fields[i + 1..].join(" ")),
            None => (fields.join(" "), String::new()),
        };
        ReplicaCard {
            addr: s.addr_string(),
            laddr: s.laddr_string(),
            created_ms: s.created_ms,
            psync_ms: now_ms,
            head: head.to_string(),
            middle,
            tail,
        }
    }

    /// The line at `now_ms`, given its feed's state: the counters are the
    /// handshake's plus what the feed moved since.
    fn line(&self, now_ms: i64, fed: FeedState) -> String {
        let (cmd, last) = if fed.ack_ms > 0 {
            ("replconf", fed.ack_ms)
        } else {
            ("psync", self.psync_ms)
        };
        let t = fed.traffic;
        let tail: Vec<String> = self
            .tail
            .split(' ')
            .map(|f| {
                let plus = |n: &str, more: u64| n.parse::<u64>().unwrap_or(0) + more;
                match f.split_once('=') {
                    Some(("tot-net-in", n)) => format!("tot-net-in={}", plus(n, t.bytes_in)),
                    Some(("tot-net-out", n)) => format!("tot-net-out={}", plus(n, t.bytes_out)),
                    Some(("tot-cmds", n)) => format!("tot-cmds={}", plus(n, t.commands)),
                    _ => f.to_string(),
                }
            })
            .collect();
        format!(
            "{} age={} idle={} {} cmd={cmd} {}",
            self.head,
            (now_ms / 1000 - self.created_ms / 1000).max(0),
            (now_ms / 1000 - last / 1000).max(0),
            self.middle,
            tail.join(" ")
        )
    }
}

/// Calls `f` for every session in connection order, including the one
/// running this command (which is taken out of the map meanwhile).
fn for_each_client(ctx: &mut Ctx<'_>, mut f: impl FnMut(&Session, bool)) {
    let me = ctx.session.id;
    for id in ctx.srv.clients.ids() {
        if id == me.0 {
            f(ctx.session, true);
        } else if let Some(s) = ctx.srv.clients.get(ClientId(id)) {
            f(s, false);
        }
    }
}

/// A `TYPE` filter: ringkv has no replication links, so a client is
/// `pubsub` while it holds a subscription (Valkey's getClientType) and
/// `normal` otherwise.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ClientType {
    Normal,
    PubSub,
    /// replica/slave: the replicas we feed (not sessions any more).
    Replica,
    /// master/primary: the client our primary's stream runs as.
    Primary,
}

fn client_type(name: &[u8]) -> Option<ClientType> {
    let n = name.to_ascii_lowercase();
    match n.as_slice() {
        b"normal" => Some(ClientType::Normal),
        b"pubsub" => Some(ClientType::PubSub),
        b"slave" | b"replica" => Some(ClientType::Replica),
        b"master" | b"primary" => Some(ClientType::Primary),
        _ => None,
    }
}

fn type_matches(t: Option<ClientType>, s: &Session) -> bool {
    let primary = s.id == crate::replication::PRIMARY_CLIENT;
    match t {
        None => true,
        Some(ClientType::Normal) => s.subs.is_none() && !primary,
        Some(ClientType::PubSub) => s.subs.is_some(),
        Some(ClientType::Replica) => false,
        Some(ClientType::Primary) => primary,
    }
}

/// CLIENT LIST [TYPE t] [USER u] [ADDR a] [LADDR a] [ID id ...]
/// [SKIPME yes|no] [MAXAGE s]: Valkey 8.1's filters, as CLIENT KILL's.
fn list(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let mut f = ClientFilter::default();
    if let Err(e) = parse_filter(argv, 2, &mut f, &ctx.srv.acl) {
        return ctx.error(&e);
    }
    let now = ctx.now_ms;
    // By id, as Valkey lists clients in the order they connected.
    let mut lines: Vec<(u64, String)> = Vec::new();
    let watches = ctx.srv.watches.states();
    for_each_client(ctx, |s, is_me| {
        if f.matches(s, is_me, now) {
            let watch = watches.get(&s.id.0).copied().unwrap_or_default();
            lines.push((s.id.0, client_line(s, watch, now)));
        }
    });
    for (id, card, fed) in crate::replication::primary::replica_cards(ctx.srv) {
        if f.matches_replica(id, card, now) {
            lines.push((id.0, card.line(now, fed)));
        }
    }
    lines.sort_by_key(|(id, _)| *id);
    let mut text = String::new();
    for (_, line) in lines {
        text.push_str(&line);
        text.push('\n');
    }
    ctx.reply.verbatim("txt", text.as_bytes());
}

fn info(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let watch = ctx.srv.watches.state(ctx.session.id);
    let mut line = client_line(ctx.session, watch, ctx.now_ms);
    line.push('\n');
    ctx.reply.verbatim("txt", line.as_bytes());
}

/// Which clients CLIENT LIST and CLIENT KILL mean (all given filters
/// must match).
#[derive(Default)]
struct ClientFilter {
    ids: Vec<u64>,
    addr: Option<Vec<u8>>,
    laddr: Option<Vec<u8>>,
    user: Option<Vec<u8>>,
    ctype: Option<ClientType>,
    skipme: bool,
    maxage: Option<i64>,
}

/// Parse `option value` pairs from `argv[from..]` into `f`, with
/// Valkey's errors.
fn parse_filter(
    argv: ArgvRef<'_>,
    from: usize,
    f: &mut ClientFilter,
    acl: &crate::acl::Acl,
) -> Result<(), String> {
    let mut j = from;
    while j < argv.len() {
        let opt = argv.get(j).to_ascii_lowercase();
        if j + 1 >= argv.len() {
            return Err(SYNTAX_ERR.into());
        }
        let val = argv.get(j + 1);
        match opt.as_slice() {
            b"id" => {
                // One or more ids, up to the next non-number.
                let mut k = j + 1;
                while k < argv.len() {
                    let Some(n) = crate::num::parse_i64(argv.get(k)) else {
                        break;
                    };
                    if n < 1 {
                        return Err("ERR client-id should be greater than 0".into());
                    }
                    f.ids.push(n as u64);
                    k += 1;
                }
                if k == j + 1 {
                    return Err(SYNTAX_ERR.into());
                }
                j = k;
                continue;
            }
            b"type" => match client_type(val) {
                Some(t) => f.ctype = Some(t),
                None => {
                    return Err(format!(
                        "ERR Unknown client type '{}'",
                        String::from_utf8_lossy(val)
                    ));
                }
            },
            b"addr" => f.addr = Some(val.to_vec()),
            b"laddr" => f.laddr = Some(val.to_vec()),
            b"user" => {
                if acl.id(val).is_none() {
                    return Err(format!(
                        "ERR No such user '{}'",
                        String::from_utf8_lossy(val)
                    ));
                }
                f.user = Some(val.to_vec());
            }
            b"skipme" => {
                if val.eq_ignore_ascii_case(b"yes") {
                    f.skipme = true;
                } else if val.eq_ignore_ascii_case(b"no") {
                    f.skipme = false;
                } else {
                    return Err(SYNTAX_ERR.into());
                }
            }
            b"maxage" => match crate::num::parse_i64(val) {
                Some(n) if n > 0 => f.maxage = Some(n),
                Some(_) => return Err("ERR maxage should be greater than 0".into()),
                None => return Err("ERR maxage is not an integer or out of range".into()),
            },
            _ => return Err(SYNTAX_ERR.into()),
        }
        j += 2;
    }
    Ok(())
}

impl ClientFilter {
    fn matches(&self, s: &Session, is_me: bool, now_ms: i64) -> bool {
        if self.skipme && is_me {
            return false;
        }
        if !self.ids.is_empty() && !self.ids.contains(&s.id.0) {
            return false;
        }
        if !type_matches(self.ctype, s) {
            return false;
        }
        if let Some(u) = &self.user
            && s.user_name.as_bytes() != u.as_slice()
        {
            return false;
        }
        if let Some(a) = &self.addr
            && s.addr_string().as_bytes() != a.as_slice()
        {
            return false;
        }
        if let Some(a) = &self.laddr
            && s.laddr_string().as_bytes() != a.as_slice()
        {
            return false;
        }
        // MAXAGE: connections at least this many seconds old.
        self.maxage
            .is_none_or(|age| now_ms / 1000 - s.created_ms / 1000 >= age)
    }

    /// The same filters for a replica (never the caller, user `default`).
    fn matches_replica(&self, id: ClientId, r: &ReplicaCard, now_ms: i64) -> bool {
        (self.ids.is_empty() || self.ids.contains(&id.0))
            && self.user.as_ref().is_none_or(|u| u == b"default")
            && matches!(self.ctype, None | Some(ClientType::Replica))
            && self
                .addr
                .as_ref()
                .is_none_or(|a| r.addr.as_bytes() == a.as_slice())
            && self
                .laddr
                .as_ref()
                .is_none_or(|a| r.laddr.as_bytes() == a.as_slice())
            && self
                .maxage
                .is_none_or(|age| now_ms / 1000 - r.created_ms / 1000 >= age)
    }
}

fn kill(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    // Old form: CLIENT KILL addr:port -> +OK or an error.
    if argv.len() == 3 {
        let f = ClientFilter {
            addr: Some(argv.get(2).to_vec()),
            ..ClientFilter::default()
        };
        if kill_matching(ctx, &f) == 0 {
            ctx.error("ERR No such client");
        } else {
            ctx.reply.ok();
        }
        return;
    }
    let mut f = ClientFilter {
        skipme: true,
        ..ClientFilter::default()
    };
    if let Err(e) = parse_filter(argv, 2, &mut f, &ctx.srv.acl) {
        return ctx.error(&e);
    }
    let n = kill_matching(ctx, &f);
    ctx.reply.int(n as i64);
}

/// A client CLIENT KILL may still close (not already closing).
fn killable(f: &ClientFilter, s: &Session, is_me: bool, now_ms: i64) -> bool {
    f.matches(s, is_me, now_ms) && !s.close_asap
}

/// Close every matching client; returns how many.
fn kill_matching(ctx: &mut Ctx<'_>, f: &ClientFilter) -> usize {
    let now = ctx.now_ms;
    let me = ctx.session.id;
    let mut count = 0;
    // Replicas have left the client table for their feeds: their cards
    // name them.
    let replicas: Vec<ClientId> = crate::replication::primary::replica_cards(ctx.srv)
        .filter(|&(id, card, _)| f.matches_replica(id, card, now))
        .map(|(id, _, _)| id)
        .collect();
    crate::replication::primary::kill_replicas(ctx.srv, &replicas);
    count += replicas.len();
    if killable(f, ctx.session, true, now) {
        // Killing ourselves: the reply still goes out, then we close.
        ctx.session.close_after_reply = true;
        count += 1;
    }
    for id in ctx.srv.clients.ids() {
        if id == me.0 {
            continue;
        }
        let Some(s) = ctx.srv.clients.get_mut(ClientId(id)) else {
            continue;
        };
        if id == crate::replication::PRIMARY_CLIENT.0 {
            // Not a connection: killing it drops the link to our primary,
            // which reconnects (as Valkey's CLIENT KILL TYPE master).
            if killable(f, s, false, now) && crate::replication::drop_link(ctx.srv) {
                count += 1;
            }
            continue;
        }
        if killable(f, s, false, now) {
            s.close_asap = true;
            ctx.srv.events.push(Event::Close {
                client: ClientId(id),
                flush: false,
            });
            count += 1;
        }
    }
    count
}

fn setinfo(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let attr = argv.get(2);
    let val = argv.get(3);
    let is_name = attr.eq_ignore_ascii_case(b"lib-name");
    if !is_name && !attr.eq_ignore_ascii_case(b"lib-ver") {
        ctx.error(&format!(
            "ERR Unrecognized option '{}'",
            String::from_utf8_lossy(attr)
        ));
        return;
    }
    if !valid_attr(val) {
        ctx.error(&format!(
            "ERR {} cannot contain spaces, newlines or special characters.",
            String::from_utf8_lossy(attr)
        ));
        return;
    }
    let v = if val.is_empty() {
        None
    } else {
        Some(val.to_vec())
    };
    if is_name {
        ctx.session.lib_name = v;
    } else {
        ctx.session.lib_ver = v;
    }
    ctx.reply.ok();
}

fn on_off(v: &[u8]) -> Option<bool> {
    if v.eq_ignore_ascii_case(b"on") {
        Some(true)
    } else if v.eq_ignore_ascii_case(b"off") {
        Some(false)
    } else {
        None
    }
}

fn no_evict(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    match on_off(argv.get(2)) {
        Some(b) => {
            ctx.session.no_evict = b;
            ctx.reply.ok();
        }
        None => ctx.error(SYNTAX_ERR),
    }
}

fn no_touch(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    match on_off(argv.get(2)) {
        Some(b) => {
            ctx.session.no_touch = b;
            ctx.reply.ok();
        }
        None => ctx.error(SYNTAX_ERR),
    }
}

/// CLIENT REPLY ON replies +OK; OFF and SKIP reply nothing (the engine
/// drops replies while the mode says so).
fn reply(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let v = argv.get(2);
    if v.eq_ignore_ascii_case(b"on") {
        ctx.session.reply_mode = ReplyMode::On;
        ctx.reply.ok();
    } else if v.eq_ignore_ascii_case(b"off") {
        ctx.session.reply_mode = ReplyMode::Off;
    } else if v.eq_ignore_ascii_case(b"skip") {
        if ctx.session.reply_mode != ReplyMode::Off {
            ctx.session.reply_mode = ReplyMode::Skip;
        }
    } else {
        ctx.error(SYNTAX_ERR);
    }
}

fn help(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    super::reply_help(
        ctx,
        "CLIENT",
        &[
            "CACHING (YES|NO)",
            "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
            "CAPA <option> [options...]",
            "    The client claims its some capability options. Options are:",
            "    * REDIRECT",
            "      The client can handle redirection during primary and replica failover in standalone mode.",
            "GETREDIR",
            "    Return the client ID we are redirecting to when tracking is enabled.",
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are:",
            "    * ADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made from the specified address",
            "    * LADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made to specified local address",
            "    * TYPE (NORMAL|PRIMARY|REPLICA|PUBSUB)",
            "      Kill connections by type.",
            "    * USER <username>",
            "      Kill connections authenticated by <username>.",
            "    * SKIPME (YES|NO)",
            "      Skip killing current connection (default: yes).",
            "    * ID <client-id> [<client-id>...]",
            "      Kill connections by client ids.",
            "    * MAXAGE <maxage>",
            "      Kill connections older than the specified age.",
            "LIST [options ...]",
            "    Return information about client connections. Options:",
            "    * TYPE (NORMAL|PRIMARY|REPLICA|PUBSUB)",
            "      Return clients of specified type.",
            "    * USER <username>",
            "      Return clients authenticated by <username>.",
            "    * ADDR <ip:port>",
            "      Return clients connected from the specified address.",
            "    * LADDR <ip:port>",
            "      Return clients connected to the specified local address.",
            "    * ID <client-id> [<client-id>...]",
            "      Return clients with the specified IDs.",
            "    * SKIPME (YES|NO)",
            "      Exclude the current client from the list (default: no).",
            "    * MAXAGE <maxage>",
            "      List connections older than the specified age.",
            "UNPAUSE",
            "    Stop the current client pause, resuming traffic.",
            "PAUSE <timeout> [WRITE|ALL]",
            "    Suspend all, or just write, clients for <timeout> milliseconds.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "SETINFO <option> <value>",
            "    Set client meta attr. Options are:",
            "    * LIB-NAME: the client lib name.",
            "    * LIB-VER: the client lib version.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Control server assisted client side caching.",
            "TRACKINGINFO",
            "    Report tracking status for the current connection.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
            "NO-TOUCH (ON|OFF)",
            "    Will not touch LRU/LFU stats when this mode is on.",
            "IMPORT-SOURCE (ON|OFF)",
            "    Mark this connection as an import source if import-mode is enabled.",
            "    Sync tools can set their connections into 'import-source' state to visit",
            "    expired keys.",
        ],
    );
}
