//! Connection commands: PING ECHO HELLO AUTH SELECT SWAPDB QUIT RESET.

use super::NOT_INT;
use crate::batch::ArgvRef;
use crate::command::doc_flags;
use crate::command::flags::*;
use crate::command::{ArgSpec, CommandSpec, Ctx};
use resp::Protocol;

// Argument specs, as Valkey 8's command JSON gives them (COMMAND DOCS).
const HELLO_ARGS: &[ArgSpec] = &[ArgSpec::block(
    "arguments",
    &[
        ArgSpec::integer("protover"),
        ArgSpec::block(
            "auth",
            &[ArgSpec::string("username"), ArgSpec::string("password")],
        )
        .token("AUTH")
        .optional(),
        ArgSpec::string("clientname").token("SETNAME").optional(),
    ],
)
.optional()];
const AUTH_ARGS: &[ArgSpec] = &[
    ArgSpec::string("username").since("6.0.0").optional(),
    ArgSpec::string("password"),
];

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "readonly",
        arity: 1,
        flags: LOADING | STALE | FAST,
        acl_categories: &["fast", "connection"],
        group: "cluster",
        since: "3.0.0",
        summary: "Enables read-only queries for a connection to a Valkey replica node.",
        func: Some(readonly),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "readwrite",
        arity: 1,
        flags: LOADING | STALE | FAST,
        acl_categories: &["fast", "connection"],
        group: "cluster",
        since: "3.0.0",
        summary: "Enables read-write queries for a connection to a Valkey replica node.",
        func: Some(readwrite),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        name: "ping",
        arity: -1,
        flags: FAST | SENTINEL,
        acl_categories: &["fast", "connection"],
        group: "connection",
        since: "1.0.0",
        summary: "Returns the server's liveliness response.",
        func: Some(ping),
        args: &[ArgSpec::string("message").optional()],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "echo",
        arity: 2,
        flags: LOADING | STALE | FAST,
        acl_categories: &["fast", "connection"],
        group: "connection",
        since: "1.0.0",
        summary: "Returns the given string.",
        func: Some(echo),
        args: &[ArgSpec::string("message")],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        history: &[
            (
                "8.1.0",
                "A new `availability_zone` field is added to the response if the `availability-zone` config is set.",
            ),
            (
                "6.2.0",
                "`protover` made optional; when called without arguments the command reports the current connection's context.",
            ),
        ],
        name: "hello",
        arity: -1,
        flags: NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | SENTINEL | ALLOW_BUSY,
        acl_categories: &["fast", "connection"],
        group: "connection",
        since: "6.0.0",
        summary: "Handshakes with the server.",
        func: Some(hello),
        args: HELLO_ARGS,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        history: &[("6.0.0", "Added ACL style (username and password).")],
        name: "auth",
        arity: -2,
        flags: NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | SENTINEL | ALLOW_BUSY,
        acl_categories: &["fast", "connection"],
        group: "connection",
        since: "1.0.0",
        summary: "Authenticates the connection.",
        complexity: "O(N) where N is the number of passwords defined for the user",
        func: Some(auth),
        args: AUTH_ARGS,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "select",
        arity: 2,
        flags: LOADING | STALE | FAST,
        acl_categories: &["fast", "connection"],
        group: "connection",
        since: "1.0.0",
        summary: "Changes the selected database.",
        func: Some(select),
        args: &[ArgSpec::integer("index")],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "swapdb",
        arity: 3,
        flags: WRITE | FAST,
        acl_categories: &["keyspace", "write", "fast", "dangerous"],
        group: "server",
        since: "4.0.0",
        summary: "Swaps two databases.",
        complexity: "O(N) where N is the count of clients watching or blocking on keys from both databases.",
        func: Some(swapdb),
        args: &[ArgSpec::integer("index1"), ArgSpec::integer("index2")],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        doc_flags: doc_flags::DEPRECATED,
        deprecated_since: Some("7.2.0"),
        replaced_by: Some("just closing the connection"),
        name: "quit",
        arity: -1,
        flags: ALLOW_BUSY | NOSCRIPT | LOADING | STALE | FAST | NO_AUTH,
        acl_categories: &["fast", "connection"],
        group: "connection",
        since: "1.0.0",
        summary: "Closes the connection.",
        func: Some(quit),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "reset",
        arity: 1,
        flags: NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY,
        acl_categories: &["fast", "connection"],
        group: "connection",
        since: "6.2.0",
        summary: "Resets the connection.",
        func: Some(reset),
        ..CommandSpec::DEFAULT
    },
];

fn ping(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    // RESP2 subscribed mode: a pub/sub-shaped reply (["pong", msg]).
    if ctx.session.in_resp2_pubsub() && argv.len() <= 2 {
        ctx.reply.array_len(2);
        ctx.reply.bulk(b"pong");
        ctx.reply
            .bulk(if argv.len() == 2 { argv.get(1) } else { b"" });
        return;
    }
    match argv.len() {
        1 => ctx.reply.simple("PONG"),
        2 => ctx.reply.bulk(argv.get(1)),
        _ => ctx.error("ERR wrong number of arguments for 'ping' command"),
    }
}

fn echo(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    ctx.reply.bulk(argv.get(1));
}

/// AUTH's and HELLO AUTH's check: on success the session is that user;
/// on failure the refusal is counted and logged, as Valkey's
/// `ACLAuthenticateUser`.
/// `command` is the name the client sent (ACL LOG's object).
fn authenticate(ctx: &mut Ctx<'_>, command: &[u8], user: &[u8], pass: &[u8]) -> bool {
    match ctx.srv.acl.credentials().authenticate(user, pass) {
        Some(id) => {
            crate::acl::login(ctx.srv, ctx.session, id);
            true
        }
        None => {
            ctx.srv.acl.denied_auth += 1;
            let context = crate::acl::log::Context::of(ctx.session);
            crate::acl::log_refusal(
                ctx.srv,
                ctx.session,
                "auth",
                context,
                command,
                user,
                ctx.now_ms,
            );
            false
        }
    }
}

pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

fn auth(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    if argv.len() > 3 {
        ctx.error(super::SYNTAX_ERR);
        return;
    }
    let (user, pass): (&[u8], &[u8]) = if argv.len() == 2 {
        if ctx.srv.acl.default_nopass() {
            ctx.error(
                "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
            );
            return;
        }
        (b"default", argv.get(1))
    } else {
        (argv.get(1), argv.get(2))
    };
    if authenticate(ctx, argv.get(0), user, pass) {
        ctx.reply.ok();
    } else {
        ctx.error(WRONGPASS);
    }
}

fn hello(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let mut ver: Option<Protocol> = None;
    let mut j = 1;
    if argv.len() >= 2 {
        let v = match crate::num::parse_i64(argv.get(1)) {
            Some(v) => v,
            None => {
                ctx.error("ERR Protocol version is not an integer or out of range");
                return;
            }
        };
        ver = match v {
            2 => Some(Protocol::Resp2),
            3 => Some(Protocol::Resp3),
            _ => {
                ctx.error("NOPROTO unsupported protocol version");
                return;
            }
        };
        j = 2;
    }
    let mut creds: Option<(&[u8], &[u8])> = None;
    let mut name: Option<&[u8]> = None;
    while j < argv.len() {
        let more = argv.len() - 1 - j;
        let opt = argv.get(j);
        if opt.eq_ignore_ascii_case(b"AUTH") && more >= 2 {
            creds = Some((argv.get(j + 1), argv.get(j + 2)));
            j += 3;
        } else if opt.eq_ignore_ascii_case(b"SETNAME") && more >= 1 {
            name = Some(argv.get(j + 1));
            j += 2;
        } else {
            ctx.error(&format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(opt)
            ));
            return;
        }
    }
    if let Some((u, p)) = creds
        && !authenticate(ctx, argv.get(0), u, p)
    {
        ctx.error(WRONGPASS);
        return;
    }
    if !ctx.session.authenticated && ctx.srv.auth_required() {
        ctx.error(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
        );
        return;
    }
    if let Some(n) = name
        && let Err(e) = super::client::set_name(ctx.session, n)
    {
        ctx.error(e);
        return;
    }
    if let Some(v) = ver {
        ctx.session.proto = v;
        ctx.reply.proto = v;
    }
    // Valkey 8.1's `availability-zone`, when set.
    let zone = ctx
        .srv
        .config
        .get("availability-zone")
        .filter(|z| !z.is_empty());
    let replica = ctx.srv.repl.is_replica();
    let r = &mut ctx.reply;
    r.map_len(7 + usize::from(zone.is_some()));
    r.bulk(b"server");
    r.bulk(crate::compat::server_name().as_bytes());
    r.bulk(b"version");
    r.bulk(crate::compat::version().as_bytes());
    r.bulk(b"proto");
    r.int(if ctx.session.proto == Protocol::Resp3 {
        3
    } else {
        2
    });
    r.bulk(b"id");
    r.int(ctx.session.id.0 as i64);
    r.bulk(b"mode");
    r.bulk(b"standalone");
    r.bulk(b"role");
    r.bulk(if replica { b"replica" } else { b"master" });
    r.bulk(b"modules");
    r.array_len(0);
    if let Some(z) = zone {
        r.bulk(b"availability_zone");
        r.bulk(z.as_bytes());
    }
}

fn select(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let Some(id) = parse_int32(argv.get(1)) else {
        ctx.error(NOT_INT);
        return;
    };
    if id < 0 || id as usize >= ctx.srv.keyspace.dbs.len() {
        ctx.error("ERR DB index is out of range");
        return;
    }
    ctx.session.db = id as usize;
    ctx.reply.ok();
}

/// Valkey's `getIntFromObject`: a strict i64 that fits in an `int`.
pub fn parse_int32(b: &[u8]) -> Option<i64> {
    crate::num::parse_i64(b).filter(|v| *v >= i32::MIN as i64 && *v <= i32::MAX as i64)
}

fn swapdb(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let Some(a) = parse_int32(argv.get(1)) else {
        ctx.error("ERR invalid first DB index");
        return;
    };
    let Some(b) = parse_int32(argv.get(2)) else {
        ctx.error("ERR invalid second DB index");
        return;
    };
    let n = ctx.srv.keyspace.dbs.len() as i64;
    if a < 0 || a >= n || b < 0 || b >= n {
        ctx.error("ERR DB index is out of range");
        return;
    }
    if a != b {
        // WATCHers of either database see the swap (checked before it).
        let now = ctx.now_ms;
        crate::watch::touch_db(ctx.srv, a as usize, Some(b as usize), now);
        crate::watch::touch_db(ctx.srv, b as usize, Some(a as usize), now);
    }
    ctx.srv.keyspace.swap(a as usize, b as usize);
    // Clients blocked in either database may find their keys now.
    ctx.srv.blocking.signal_db(a as usize);
    ctx.srv.blocking.signal_db(b as usize);
    // A change even when a == b, as Valkey counts it (and propagates it).
    ctx.srv.persist.dirty += 1;
    ctx.reply.ok();
}

/// READONLY: reads on a replica are served here even by a client that
/// claimed CLIENT CAPA REDIRECT (Valkey 8.1 accepts it without cluster).
fn readonly(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    ctx.session.readonly = true;
    ctx.reply.ok();
}

fn readwrite(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    ctx.session.readonly = false;
    ctx.reply.ok();
}

fn quit(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    ctx.reply.ok();
    ctx.session.close_after_reply = true;
}

fn reset(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let auth_required = ctx.srv.auth_required();
    // Transaction, watches and subscriptions live partly in the server.
    crate::cmd::transactions::discard_transaction(ctx);
    crate::pubsub::forget(ctx.srv, ctx.session);
    crate::monitor::stop(ctx.srv, ctx.session.id);
    crate::tracking::disable(ctx.srv, ctx.session);
    ctx.session.reset(auth_required);
    ctx.reply.proto = ctx.session.proto;
    ctx.reply.simple("RESET");
}
