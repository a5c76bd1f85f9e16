//! REPLICAOF / SLAVEOF, REPLCONF and ROLE (crate::replication holds the
//! state they change).

use crate::batch::ArgvRef;
use crate::command::doc_flags;
use crate::command::flags::*;
use crate::command::{ArgSpec, CommandSpec, Ctx};
use crate::replication::{self, PRIMARY_CLIENT};
use crate::snapshot::RdbContent;

const ADMIN_ACL: &[&str] = &["admin", "slow", "dangerous"];

const REPLICAOF_ARGS: &[ArgSpec] = &[ArgSpec::oneof(
    "args",
    &[
        ArgSpec::block(
            "host-port",
            &[ArgSpec::string("host"), ArgSpec::integer("port")],
        ),
        ArgSpec::block(
            "no-one",
            &[
                ArgSpec::pure_token("no", "NO"),
                ArgSpec::pure_token("one", "ONE"),
            ],
        ),
    ],
)];

const FAILOVER_ARGS: &[ArgSpec] = &[
    ArgSpec::block(
        "target",
        &[
            ArgSpec::string("host"),
            ArgSpec::integer("port"),
            ArgSpec::pure_token("force", "FORCE").optional(),
        ],
    )
    .token("TO")
    .optional(),
    ArgSpec::pure_token("abort", "ABORT").optional(),
    ArgSpec::integer("milliseconds").token("TIMEOUT").optional(),
];

const fn replicaof_spec(name: &'static str, since: &'static str) -> CommandSpec {
    CommandSpec {
        name,
        arity: 3,
        flags: ADMIN | NOSCRIPT | STALE | NO_ASYNC_LOADING,
        acl_categories: ADMIN_ACL,
        group: "server",
        since,
        summary: "Configures a server as replica of another, or promotes it to a primary.",
        complexity: "O(1)",
        func: Some(replicaof),
        args: REPLICAOF_ARGS,
        ..CommandSpec::DEFAULT
    }
}

pub const COMMANDS: &[CommandSpec] = &[
    replicaof_spec("replicaof", "5.0.0"),
    CommandSpec {
        summary: "Sets a server as a replica of another, or promotes it to being a primary.",
        doc_flags: doc_flags::DEPRECATED,
        deprecated_since: Some("5.0.0"),
        replaced_by: Some("`REPLICAOF`"),
        ..replicaof_spec("slaveof", "1.0.0")
    },
    CommandSpec {
        doc_flags: doc_flags::SYSCMD,
        name: "replconf",
        arity: -1,
        flags: ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY,
        acl_categories: ADMIN_ACL,
        group: "server",
        since: "3.0.0",
        summary: "An internal command for configuring the replication stream.",
        complexity: "O(1)",
        func: Some(replconf),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "psync",
        arity: -3,
        flags: ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI,
        acl_categories: ADMIN_ACL,
        group: "server",
        since: "2.8.0",
        summary: "An internal command used in replication.",
        complexity: "",
        func: Some(psync),
        args: &[ArgSpec::string("replicationid"), ArgSpec::integer("offset")],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "failover",
        arity: -1,
        flags: ADMIN | NOSCRIPT | STALE,
        acl_categories: ADMIN_ACL,
        group: "server",
        since: "6.2.0",
        summary: "Starts a coordinated failover from a server to one of its replicas.",
        complexity: "O(1)",
        func: Some(failover),
        args: FAILOVER_ARGS,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "sync",
        arity: 1,
        flags: ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI,
        acl_categories: ADMIN_ACL,
        group: "server",
        since: "1.0.0",
        summary: "An internal command used in replication.",
        complexity: "",
        func: Some(psync),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        tips: &["request_policy:all_shards", "response_policy:agg_min"],
        name: "wait",
        arity: 3,
        flags: BLOCKING,
        acl_categories: &["slow", "blocking", "connection"],
        group: "generic",
        since: "3.0.0",
        summary: "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.",
        complexity: "O(1)",
        func: Some(wait),
        args: &[ArgSpec::integer("numreplicas"), ArgSpec::integer("timeout")],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        tips: &["request_policy:all_shards", "response_policy:agg_min"],
        name: "waitaof",
        arity: 4,
        flags: BLOCKING,
        acl_categories: &["slow", "blocking", "connection"],
        group: "generic",
        since: "7.2.0",
        summary: "Blocks until all of the preceding write commands sent by the connection are written to the append-only file of the primary and/or replicas.",
        complexity: "O(1)",
        func: Some(waitaof),
        args: &[
            ArgSpec::integer("numlocal"),
            ArgSpec::integer("numreplicas"),
            ArgSpec::integer("timeout"),
        ],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "role",
        arity: 1,
        flags: NOSCRIPT | LOADING | STALE | FAST | SENTINEL,
        acl_categories: &["admin", "fast", "dangerous"],
        group: "server",
        since: "2.8.12",
        summary: "Returns the replication role.",
        func: Some(role),
        ..CommandSpec::DEFAULT
    },
];

/// REPLICAOF host port | NO ONE.
fn replicaof(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let (host, port) = (argv.get(1), argv.get(2));
    if host.eq_ignore_ascii_case(b"no") && port.eq_ignore_ascii_case(b"one") {
        replication::unset_primary(ctx.srv);
        ctx.srv.config.set_replicaof("");
        ctx.reply.ok();
        return;
    }
    if ctx.session.id == PRIMARY_CLIENT {
        return ctx.error("ERR Command is not valid when client is a replica.");
    }
    let port = match crate::num::parse_i64(port) {
        Some(p) if (0..=65535).contains(&p) => p as u16,
        Some(_) => return ctx.error("ERR Invalid master port"),
        None => return ctx.error(crate::cmd::NOT_INT),
    };
    let host = String::from_utf8_lossy(host).into_owned();
    if !replication::set_primary(ctx.srv, &host, port, ctx.now_ms) {
        crate::log::notice(
            "REPLICAOF would result into synchronization with the master we are already connected with. No operation performed.",
        );
        ctx.reply.simple("OK Already connected to specified master");
        return;
    }
    ctx.srv.config.set_replicaof(&format!("{host} {port}"));
    crate::log::notice(&format!(
        "REPLICAOF {host}:{port} enabled (user request from 'id={}')",
        ctx.session.id.0
    ));
    ctx.reply.ok();
}

/// REPLCONF option value ...: what a replica tells its primary during the
/// handshake, and GETACK from our own primary.
fn replconf(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    if argv.len().is_multiple_of(2) {
        return ctx.error(crate::cmd::SYNTAX_ERR);
    }
    let mut j = 1;
    while j < argv.len() {
        let opt = argv.get(j);
        if opt.eq_ignore_ascii_case(b"getack") {
            if ctx.session.id == PRIMARY_CLIENT {
                replication::send_ack(ctx.srv);
            }
            return;
        }
        if opt.eq_ignore_ascii_case(b"ack") || opt.eq_ignore_ascii_case(b"fack") {
            // From a replica: never answered.
            return;
        }
        let value = argv.get(j + 1);
        let hello = ctx
            .session
            .replica_hello
            .get_or_insert_with(Default::default);
        if opt.eq_ignore_ascii_case(b"listening-port") {
            match crate::num::parse_i64(value) {
                Some(p) if (0..=65535).contains(&p) => hello.listening_port = p as u16,
                _ => return ctx.error(crate::cmd::NOT_INT),
            }
        } else if opt.eq_ignore_ascii_case(b"capa") {
            if value.eq_ignore_ascii_case(b"eof") {
                hello.capa_eof = true;
            } else if value.eq_ignore_ascii_case(b"psync2") {
                hello.capa_psync2 = true;
            }
        } else if opt.eq_ignore_ascii_case(b"version") {
            hello.version = Some(String::from_utf8_lossy(value).into_owned());
        } else if opt.eq_ignore_ascii_case(b"ip-address") {
            // Valkey's NET_HOST_STR_LEN, less its NUL.
            if value.len() >= 256 {
                return ctx.error(&format!(
                    "ERR REPLCONF ip-address provided by replica instance is too long: {} bytes",
                    value.len()
                ));
            }
            hello.ip_address = Some(String::from_utf8_lossy(value).into_owned());
        } else if opt.eq_ignore_ascii_case(b"rdb-only") {
            match crate::cmd::parse_range(value, 0, 1) {
                Ok(v) => hello.rdb_only = v == 1,
                Err(e) => return ctx.error(&e),
            }
        } else if opt.eq_ignore_ascii_case(b"rdb-filter-only") {
            // Include filters: what is not named is left out ("" is an
            // RDB of AUX fields alone).
            let Some(filters) = crate::config::split_args(&String::from_utf8_lossy(value)) else {
                return ctx.error("ERR Missing rdb-filter-only values");
            };
            let mut content = RdbContent {
                data: false,
                functions: false,
            };
            for f in filters {
                if !f.eq_ignore_ascii_case("functions") {
                    return ctx.error(&format!("ERR Unsupported rdb-filter-only option: {f}"));
                }
                content.functions = true;
            }
            hello.content = content;
        } else {
            let known = [&b"rdb-channel"[..], b"main-ch-client-id"];
            if !known.iter().any(|k| opt.eq_ignore_ascii_case(k)) {
                return ctx.error(&format!(
                    "ERR Unrecognized REPLCONF option: {}",
                    String::from_utf8_lossy(opt)
                ));
            }
        }
        j += 2;
    }
    ctx.reply.ok();
}

/// PSYNC replid offset, SYNC: this client becomes a replica. The reply
/// (+FULLRESYNC / +CONTINUE and what follows) comes from its feed.
fn psync(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let (replid, offset) = if argv.len() >= 3 {
        let Some(off) = crate::num::parse_i64(argv.get(2)) else {
            return ctx.error(crate::cmd::NOT_INT);
        };
        (Some(argv.get(1)), Some(off))
    } else {
        (None, None)
    };
    let now = ctx.now_ms;
    if argv.len() > 3
        && argv.get(3).eq_ignore_ascii_case(b"failover")
        && let Err(e) = replication::primary::take_over(ctx.srv, ctx.session, argv.get(1))
    {
        return ctx.error(&e);
    }
    // Replies of this client's earlier commands in the batch, or messages
    // queued for it (output the IO layer holds is not seen: it may be
    // sent already, its count not yet settled).
    let unsent = !ctx.reply.out.is_empty() || !ctx.session.pending.is_empty();
    if let Err(e) = replication::primary::psync(ctx.srv, ctx.session, replid, offset, unsent, now) {
        ctx.error(&e);
    }
}

/// FAILOVER [TO host port [FORCE]] [TIMEOUT ms] | FAILOVER ABORT.
fn failover(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    use replication::failover;
    if argv.len() == 2 && argv.get(1).eq_ignore_ascii_case(b"abort") {
        return match failover::abort_command(ctx.srv) {
            Ok(()) => ctx.reply.ok(),
            Err(e) => ctx.error(&e),
        };
    }
    let mut req = failover::Request::default();
    let mut j = 1;
    while j < argv.len() {
        let a = argv.get(j);
        if a.eq_ignore_ascii_case(b"timeout") && j + 1 < argv.len() && req.timeout_ms.is_none() {
            let Some(ms) = crate::num::parse_i64(argv.get(j + 1)) else {
                return ctx.error(crate::cmd::NOT_INT);
            };
            if ms <= 0 {
                return ctx.error("ERR FAILOVER timeout must be greater than 0");
            }
            req.timeout_ms = Some(ms);
            j += 2;
        } else if a.eq_ignore_ascii_case(b"to") && j + 2 < argv.len() && req.to.is_none() {
            let Some(port) = crate::num::parse_i64(argv.get(j + 2)) else {
                return ctx.error(crate::cmd::NOT_INT);
            };
            let host = String::from_utf8_lossy(argv.get(j + 1)).into_owned();
            req.to = Some((host, port.clamp(0, i64::from(u16::MAX)) as u16));
            j += 3;
        } else if a.eq_ignore_ascii_case(b"force") && !req.force {
            req.force = true;
            j += 1;
        } else {
            return ctx.error(crate::cmd::SYNTAX_ERR);
        }
    }
    let now = ctx.now_ms;
    match failover::start(ctx.srv, req, now) {
        Ok(()) => ctx.reply.ok(),
        Err(e) => ctx.error(&e),
    }
}

/// WAIT numreplicas timeout-ms.
fn wait(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let Some(n) = crate::num::parse_i64(argv.get(1)) else {
        return ctx.error(crate::cmd::NOT_INT);
    };
    let deadline = match wait_deadline(ctx, argv.get(2)) {
        Ok(d) => d,
        Err(e) => return ctx.error(e),
    };
    match replication::wait::wait(ctx, n.max(0) as usize, deadline) {
        Ok(Some(acked)) => ctx.reply.int(acked as i64),
        Ok(None) => {}
        Err(e) => ctx.error(&e),
    }
}

/// WAIT's and WAITAOF's timeout (milliseconds, 0 for none) as a deadline.
fn wait_deadline(ctx: &Ctx<'_>, arg: &[u8]) -> Result<Option<i64>, &'static str> {
    match crate::num::parse_i64(arg) {
        None => Err("ERR timeout is not an integer or out of range"),
        Some(t) if t < 0 => Err("ERR timeout is negative"),
        Some(t) => Ok((t > 0).then(|| ctx.now_ms.saturating_add(t))),
    }
}

/// WAITAOF numlocal numreplicas timeout-ms: `[local, replicas]`.
fn waitaof(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let numlocal = match crate::cmd::parse_range(argv.get(1), 0, 1) {
        Ok(n) => n == 1,
        Err(e) => return ctx.error(&e),
    };
    let Some(numreplicas) = crate::cmd::parse_positive(argv.get(2)) else {
        return ctx.error(crate::cmd::NOT_POSITIVE);
    };
    let numreplicas = numreplicas as usize;
    let deadline = match wait_deadline(ctx, argv.get(3)) {
        Ok(d) => d,
        Err(e) => return ctx.error(e),
    };
    match replication::wait::wait_aof(ctx, numlocal, numreplicas, deadline) {
        Ok(Some((local, replicas))) => {
            ctx.reply.array_len(2);
            ctx.reply.int(local as i64);
            ctx.reply.int(replicas as i64);
        }
        Ok(None) => {}
        Err(e) => ctx.error(&e),
    }
}

/// ROLE: `master offset replicas` or `slave host port state offset`.
fn role(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let up = ctx.srv.repl.link_up();
    let offset = replication::master_offset(ctx.srv) as i64;
    match &ctx.srv.repl.primary {
        None => {
            ctx.reply.array_len(3);
            ctx.reply.bulk(b"master");
            ctx.reply.int(offset);
            // Online as INFO's `state=` says (the RDB is sent), as
            // Valkey's ROLE lists them, not only once the first ACK has
            // started the stream.
            let online: Vec<_> = ctx
                .srv
                .repl
                .feeds
                .replicas
                .iter()
                .filter(|r| r.state() == "online")
                .filter_map(|r| Some((r, r.feed.as_ref()?.ack().0)))
                .collect();
            ctx.reply.array_len(online.len());
            for (r, acked) in online {
                ctx.reply.array_len(3);
                ctx.reply.bulk(r.ip.as_bytes());
                ctx.reply.bulk(r.port.to_string().as_bytes());
                ctx.reply.bulk(acked.to_string().as_bytes());
            }
        }
        Some(p) => {
            ctx.reply.array_len(5);
            ctx.reply.bulk(b"slave");
            ctx.reply.bulk(p.host.as_bytes());
            ctx.reply.int(i64::from(p.port));
            ctx.reply.bulk(replication::state_word(p).as_bytes());
            // Valkey: -1 while there is no primary client.
            ctx.reply.int(if up { offset } else { -1 });
        }
    }
}
