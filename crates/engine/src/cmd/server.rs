//! Server commands: DBSIZE FLUSHDB FLUSHALL TIME INFO CONFIG
//! SHUTDOWN DEBUG, and ROLE/SLOWLOG/LATENCY with nothing to report yet (so
//! monitoring tools such as redis_exporter get answers, not errors).

use super::SYNTAX_ERR;
use crate::batch::ArgvRef;
use crate::command::doc_flags;
use crate::command::flags::*;
use crate::command::{ArgSpec, CommandSpec, Ctx};
use crate::log;

/// A subcommand of the server group (CONFIG, MEMORY).
pub(crate) const fn cfg_sub(
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
        group: "server",
        since,
        summary,
        func: Some(func),
        ..CommandSpec::DEFAULT
    }
}

pub(crate) const ADMIN_ACL: &[&str] = &["admin", "slow", "dangerous"];

// Argument specs, as Valkey 8's command JSON gives them (COMMAND DOCS).
const FLUSH_ARGS: &[ArgSpec] = &[ArgSpec::oneof(
    "flush-type",
    &[
        ArgSpec::pure_token("async", "ASYNC").since("4.0.0"),
        ArgSpec::pure_token("sync", "SYNC").since("6.2.0"),
    ],
)
.optional()];
const SHUTDOWN_ARGS: &[ArgSpec] = &[ArgSpec::oneof(
    "abort-selector",
    &[
        ArgSpec::block(
            "save-selector-block",
            &[
                ArgSpec::oneof(
                    "save-selector",
                    &[
                        ArgSpec::pure_token("nosave", "NOSAVE"),
                        ArgSpec::pure_token("save", "SAVE"),
                    ],
                )
                .optional(),
                ArgSpec::pure_token("now", "NOW").since("7.0.0").optional(),
                ArgSpec::pure_token("force", "FORCE")
                    .since("7.0.0")
                    .optional(),
            ],
        ),
        ArgSpec::pure_token("abort", "ABORT").since("7.0.0"),
    ],
)
.optional()];
const CONFIG_SET_ARGS: &[ArgSpec] = &[ArgSpec::block(
    "data",
    &[ArgSpec::string("parameter"), ArgSpec::string("value")],
)
.multiple()];

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        tips: &["request_policy:all_shards", "response_policy:agg_sum"],
        name: "dbsize",
        arity: 1,
        flags: READONLY | FAST,
        acl_categories: &["keyspace", "read", "fast"],
        group: "server",
        since: "1.0.0",
        summary: "Returns the number of keys in the database.",
        func: Some(dbsize),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        history: &[
            ("4.0.0", "Added the `ASYNC` flushing mode modifier."),
            ("6.2.0", "Added the `SYNC` flushing mode modifier."),
        ],
        name: "flushdb",
        arity: -1,
        flags: WRITE,
        acl_categories: &["keyspace", "write", "slow", "dangerous"],
        group: "server",
        since: "1.0.0",
        summary: "Remove all keys from the current database.",
        complexity: "O(N) where N is the number of keys in the selected database",
        func: Some(flushdb),
        args: FLUSH_ARGS,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
        history: &[
            ("4.0.0", "Added the `ASYNC` flushing mode modifier."),
            ("6.2.0", "Added the `SYNC` flushing mode modifier."),
        ],
        name: "flushall",
        arity: -1,
        flags: WRITE,
        acl_categories: &["keyspace", "write", "slow", "dangerous"],
        group: "server",
        since: "1.0.0",
        summary: "Removes all keys from all databases.",
        complexity: "O(N) where N is the total number of keys in all databases",
        func: Some(flushall),
        args: FLUSH_ARGS,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "lolwut",
        arity: -1,
        flags: READONLY | FAST,
        acl_categories: &["read", "fast"],
        group: "server",
        since: "5.0.0",
        summary: "Displays computer art and the server version",
        complexity: "",
        func: Some(lolwut),
        args: &[ArgSpec::integer("version").token("VERSION").optional()],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        name: "time",
        arity: 1,
        flags: LOADING | STALE | FAST,
        acl_categories: &["fast"],
        group: "server",
        since: "2.6.0",
        summary: "Returns the server time.",
        func: Some(time),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        tips: &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
        history: &[(
            "7.0.0",
            "Added support for taking multiple section arguments.",
        )],
        name: "info",
        arity: -1,
        flags: LOADING | STALE | SENTINEL,
        acl_categories: &["slow", "dangerous"],
        group: "server",
        since: "1.0.0",
        summary: "Returns information and statistics about the server.",
        func: Some(info),
        args: &[ArgSpec::string("section").optional().multiple()],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        history: &[("7.0.0", "Added the `NOW`, `FORCE` and `ABORT` modifiers.")],
        name: "shutdown",
        arity: -1,
        flags: ADMIN | NOSCRIPT | LOADING | STALE | NO_MULTI | SENTINEL | ALLOW_BUSY,
        acl_categories: ADMIN_ACL,
        group: "server",
        since: "1.0.0",
        summary: "Synchronously saves the database(s) to disk and shuts down the server.",
        complexity: "O(N) when saving, where N is the total number of keys in all databases when saving data, otherwise O(1)",
        func: Some(shutdown),
        args: SHUTDOWN_ARGS,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        complexity: "",
        name: "monitor",
        arity: 1,
        flags: ADMIN | NOSCRIPT | LOADING | STALE,
        acl_categories: ADMIN_ACL,
        group: "server",
        since: "1.0.0",
        summary: "Listens for all requests received by the server in real-time.",
        func: Some(monitor),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        doc_flags: doc_flags::SYSCMD,
        name: "debug",
        arity: -2,
        flags: ADMIN | NOSCRIPT | LOADING | STALE | PROTECTED,
        acl_categories: ADMIN_ACL,
        group: "server",
        since: "1.0.0",
        summary: "A container for debugging commands.",
        complexity: "Depends on subcommand.",
        func: Some(super::debug::debug),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "latency",
        arity: -2,
        flags: 0,
        acl_categories: &["slow"],
        group: "server",
        since: "2.8.13",
        summary: "A container for latency diagnostics commands.",
        complexity: "Depends on subcommand.",
        func: None,
        subcommands: &[
            CommandSpec {
                tips: &[
                    "nondeterministic_output",
                    "request_policy:all_nodes",
                    "response_policy:special",
                ],
                ..cfg_sub(
                    "latest",
                    2,
                    ADMIN | NOSCRIPT | LOADING | STALE,
                    ADMIN_ACL,
                    "2.8.13",
                    "Returns the latest latency samples for all events.",
                    latency_latest,
                )
            },
            CommandSpec {
                tips: &[
                    "nondeterministic_output",
                    "request_policy:all_nodes",
                    "response_policy:special",
                ],
                ..cfg_sub(
                    "doctor",
                    2,
                    ADMIN | NOSCRIPT | LOADING | STALE,
                    ADMIN_ACL,
                    "2.8.13",
                    "Returns a human-readable latency analysis report.",
                    latency_doctor,
                )
            },
            CommandSpec {
                tips: &[
                    "nondeterministic_output",
                    "request_policy:all_nodes",
                    "response_policy:special",
                ],
                args: &[ArgSpec::string("event")],
                ..cfg_sub(
                    "graph",
                    3,
                    ADMIN | NOSCRIPT | LOADING | STALE,
                    ADMIN_ACL,
                    "2.8.13",
                    "Returns a latency graph for an event.",
                    latency_graph,
                )
            },
            CommandSpec {
                tips: &[
                    "nondeterministic_output",
                    "request_policy:all_nodes",
                    "response_policy:special",
                ],
                args: &[ArgSpec::string("event")],
                ..cfg_sub(
                    "history",
                    3,
                    ADMIN | NOSCRIPT | LOADING | STALE,
                    ADMIN_ACL,
                    "2.8.13",
                    "Returns timestamp-latency samples for an event.",
                    latency_history,
                )
            },
            CommandSpec {
                tips: &["request_policy:all_nodes", "response_policy:agg_sum"],
                args: &[ArgSpec::string("event").optional().multiple()],
                ..cfg_sub(
                    "reset",
                    -2,
                    ADMIN | NOSCRIPT | LOADING | STALE,
                    ADMIN_ACL,
                    "2.8.13",
                    "Resets the latency data for one or more events.",
                    latency_reset,
                )
            },
            CommandSpec {
                tips: &[
                    "nondeterministic_output",
                    "request_policy:all_nodes",
                    "response_policy:special",
                ],
                complexity: "O(N) where N is the number of commands with latency information being retrieved.",
                args: &[ArgSpec::string("command").optional().multiple()],
                ..cfg_sub(
                    "histogram",
                    -2,
                    ADMIN | NOSCRIPT | LOADING | STALE,
                    ADMIN_ACL,
                    "7.0.0",
                    "Returns the cumulative distribution of latencies of a subset or all commands.",
                    latency_histogram,
                )
            },
            cfg_sub(
                "help",
                2,
                LOADING | STALE,
                &["slow"],
                "2.8.13",
                "Returns helpful text about the different subcommands.",
                latency_help,
            ),
        ],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "config",
        arity: -2,
        flags: 0,
        acl_categories: &["slow"],
        group: "server",
        since: "2.0.0",
        summary: "A container for server configuration commands.",
        complexity: "Depends on subcommand.",
        func: None,
        subcommands: &[
            CommandSpec {
                complexity: "O(N) when N is the number of configuration parameters provided",
                history: &[(
                    "7.0.0",
                    "Added the ability to pass multiple pattern parameters in one call",
                )],
                args: &[ArgSpec::string("parameter").multiple()],
                ..cfg_sub(
                    "get",
                    -3,
                    ADMIN | NOSCRIPT | LOADING | STALE,
                    ADMIN_ACL,
                    "2.0.0",
                    "Returns the effective values of configuration parameters.",
                    config_get,
                )
            },
            CommandSpec {
                complexity: "O(N) when N is the number of configuration parameters provided",
                tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
                history: &[(
                    "7.0.0",
                    "Added the ability to set multiple parameters in one call.",
                )],
                args: CONFIG_SET_ARGS,
                ..cfg_sub(
                    "set",
                    -4,
                    ADMIN | NOSCRIPT | LOADING | STALE,
                    ADMIN_ACL,
                    "2.0.0",
                    "Sets configuration parameters in-flight.",
                    config_set,
                )
            },
            CommandSpec {
                tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
                ..cfg_sub(
                    "resetstat",
                    2,
                    ADMIN | NOSCRIPT | LOADING | STALE,
                    ADMIN_ACL,
                    "2.0.0",
                    "Resets the server's statistics.",
                    config_resetstat,
                )
            },
            CommandSpec {
                tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
                ..cfg_sub(
                    "rewrite",
                    2,
                    ADMIN | NOSCRIPT | LOADING | STALE,
                    ADMIN_ACL,
                    "2.8.0",
                    "Persists the effective configuration to file.",
                    config_rewrite,
                )
            },
            cfg_sub(
                "help",
                2,
                LOADING | STALE,
                &["slow"],
                "5.0.0",
                "Returns helpful text about the different subcommands.",
                config_help,
            ),
        ],
        ..CommandSpec::DEFAULT
    },
];

fn dbsize(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let n = ctx.db().len();
    ctx.reply.int(n as i64);
}

/// `[ASYNC|SYNC]` of FLUSHDB/FLUSHALL (see [`flush_lazy`]).
fn flush_mode_ok(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) -> bool {
    match argv.len() {
        1 => true,
        2 if argv.get(1).eq_ignore_ascii_case(b"async")
            || argv.get(1).eq_ignore_ascii_case(b"sync") =>
        {
            true
        }
        _ => {
            ctx.error(SYNTAX_ERR);
            false
        }
    }
}

/// Empty database `db`: ASYNC (or no flag with `lazyfree-lazy-user-flush`,
/// on by default as in Valkey 8) hands the old contents to the lazyfree
/// thread.
fn flush_one(ctx: &mut Ctx<'_>, db: usize, lazy: bool) {
    // WATCHers of keys that existed see the flush (before it, to know).
    crate::watch::touch_db(ctx.srv, db, None, ctx.now_ms);
    let srv = &mut *ctx.srv;
    srv.persist.dirty += srv.keyspace.dbs[db].len() as u64;
    if lazy {
        let old = srv.keyspace.dbs[db].take_contents();
        srv.lazyfree.free_db(old);
    } else {
        srv.keyspace.dbs[db].clear();
    }
    // Clients blocked on its keys look again: XREADGROUP's group is gone
    // (Valkey's scanDatabaseForDeletedKeys), a BLPOP keeps waiting.
    srv.blocking.signal_db(db);
}

/// Whether a FLUSHDB/FLUSHALL frees lazily (its flag was checked).
fn flush_lazy(ctx: &Ctx<'_>, argv: ArgvRef<'_>) -> bool {
    if argv.len() == 2 {
        argv.get(1).eq_ignore_ascii_case(b"async")
    } else {
        ctx.srv.config.lazyfree_lazy_user_flush
    }
}

fn flushdb(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    if !flush_mode_ok(ctx, argv) {
        return;
    }
    let lazy = flush_lazy(ctx, argv);
    flush_one(ctx, ctx.session.db, lazy);
    crate::tracking::invalidate_all(ctx.srv);
    ctx.force_propagation();
    ctx.reply.ok();
}

fn flushall(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    if !flush_mode_ok(ctx, argv) {
        return;
    }
    let lazy = flush_lazy(ctx, argv);
    // As Valkey's flushAllDataAndResetRDB: a running BGSAVE is abandoned,
    // and with save points the empty dataset is saved at once.
    crate::snapshot::abort_bgsave(ctx.srv);
    for db in 0..ctx.srv.keyspace.dbs.len() {
        flush_one(ctx, db, lazy);
    }
    crate::tracking::invalidate_all(ctx.srv);
    if !ctx.srv.config.save_points.is_empty() && ctx.srv.persist.storage.is_some() {
        let _ = crate::snapshot::save_now(ctx.srv, ctx.now_ms);
    }
    ctx.srv.persist.dirty += 1;
    ctx.force_propagation();
    ctx.reply.ok();
}

fn time(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let us = ctx.srv.time_frozen_us.unwrap_or_else(|| ctx.srv.now_us());
    ctx.reply.array_len(2);
    ctx.reply.bulk_from_int(us / 1_000_000);
    ctx.reply.bulk_from_int(us % 1_000_000);
}

fn info(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let sections: Vec<&[u8]> = (1..argv.len()).map(|i| argv.get(i)).collect();
    let text = crate::info::render(ctx.srv, &sections, ctx.now_ms);
    ctx.reply.verbatim("txt", text.as_bytes());
}

fn shutdown(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let (mut save, mut nosave, mut abort) = (false, false, false);
    let mut how = crate::shutdown::How::default();
    for j in 1..argv.len() {
        let a = argv.get(j);
        if a.eq_ignore_ascii_case(b"nosave") {
            nosave = true;
        } else if a.eq_ignore_ascii_case(b"save") {
            save = true;
        } else if a.eq_ignore_ascii_case(b"force") {
            how.force = true;
        } else if a.eq_ignore_ascii_case(b"now") {
            how.now = true;
        } else if a.eq_ignore_ascii_case(b"abort") {
            abort = true;
        } else {
            ctx.error(SYNTAX_ERR);
            return;
        }
    }
    if (abort && argv.len() != 2) || (save && nosave) {
        ctx.error(SYNTAX_ERR);
        return;
    }
    if abort {
        if crate::shutdown::abort(ctx.srv) {
            ctx.reply.ok();
        } else {
            ctx.error("ERR No shutdown in progress.");
        }
        return;
    }
    log::warning("User requested shutdown...");
    how.save = if save {
        Some(true)
    } else if nosave {
        Some(false)
    } else {
        None
    };
    match crate::shutdown::begin(ctx.srv, ctx.now_ms, how, Some(ctx.session.id)) {
        crate::shutdown::Outcome::Stopping => {
            // Valkey sends no reply: the client sees the connection close
            // ("ready to exit" is logged by the process once it is).
            ctx.session.close_after_reply = true;
        }
        // Its reply (none, or an error if the shutdown is cancelled) comes
        // when the wait ends.
        crate::shutdown::Outcome::Waiting => {
            ctx.block(&[], None, crate::blocking::OnTimeout::Shutdown)
        }
        crate::shutdown::Outcome::Failed => ctx.error(crate::shutdown::FAILED_REPLY),
    }
}

fn config_get(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let patterns: Vec<&[u8]> = (2..argv.len()).map(|i| argv.get(i)).collect();
    let found = ctx.srv.config.get_matching(&patterns);
    ctx.reply.map_len(found.len());
    for (name, value) in found {
        ctx.reply.bulk(name.as_bytes());
        ctx.reply.bulk(value.as_bytes());
    }
}

fn config_set(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    if !argv.len().is_multiple_of(2) {
        ctx.error(SYNTAX_ERR);
        return;
    }
    let pairs: Vec<(&[u8], &[u8])> = (2..argv.len())
        .step_by(2)
        .map(|i| (argv.get(i), argv.get(i + 1)))
        .collect();
    if ctx.srv.persist.loading_in_place() && crate::config::Config::denied_while_loading(&pairs) {
        ctx.error(crate::compat::LOADING.get());
        return;
    }
    let before = ctx.srv.config.clone();
    if let Err(e) = ctx.srv.config.set_many(&pairs) {
        ctx.error(&e);
        return;
    }
    if let Err(e) = check_file_limit(ctx.srv, &before) {
        ctx.srv.config = before;
        ctx.error(&e);
        return;
    }
    // The steps that can fail: a failure puts every setting back and
    // undoes what the steps before it applied (Valkey re-runs their apply
    // functions with the old values). Listening first: it is the one
    // likely to fail (a port in use), and it fails without a trace.
    if let Err(e) = apply_listeners(ctx.srv, &before, &pairs) {
        ctx.srv.config = before;
        ctx.error(&e);
        return;
    }
    let applied = apply_oom_score(ctx.srv, &before, &pairs)
        .and_then(|()| apply_locale(ctx.srv, &before))
        .and_then(|()| apply_proc_title(ctx.srv, &before))
        .and_then(|()| crate::aof::apply_config(ctx.srv, &before, ctx.now_ms));
    if let Err(e) = applied {
        let tried = std::mem::replace(&mut ctx.srv.config, before);
        undo_listeners(ctx.srv, &tried);
        ctx.srv.apply_oom_score();
        if ctx.srv.config.get("proc-title-template") != tried.get("proc-title-template") {
            ctx.srv.apply_proc_title();
        }
        let _ = apply_locale(ctx.srv, &tried);
        ctx.error(&e);
        return;
    }
    let n = ctx.srv.config.io_threads;
    if n != before.io_threads {
        ctx.srv.events.push(crate::Event::IoThreads { n });
    }
    if ctx.srv.config.get("jemalloc-bg-thread") != before.get("jemalloc-bg-thread") {
        ctx.srv.apply_allocator_background_thread();
    }
    ctx.srv.sync_expiry_logging();
    ctx.srv.sync_output_limits();
    ctx.srv.sync_store_settings();
    ctx.srv.acl.pubsub_default_all = ctx.srv.config.acl_pubsub_all();
    if ctx.srv.config.requirepass != before.requirepass {
        let p = ctx.srv.config.requirepass.clone();
        ctx.srv.acl.set_default_password(p.as_deref());
        ctx.srv.sync_busy_auth();
    }
    let max = ctx.srv.config.maxmemory;
    if max != before.maxmemory && max > 0 {
        let used = ctx.srv.used_memory();
        if used > max {
            // As Valkey: evict from the event loop, a short run at a time,
            // rather than stall this reply.
            log::warning(&format!(
                "WARNING: the new maxmemory value set via CONFIG SET ({max}) is smaller than \
                 the current memory usage ({used}). This will result in key eviction and/or the \
                 inability to accept new write commands depending on the maxmemory-policy."
            ));
            ctx.srv.evict.running = true;
        }
    }
    log::set_level(ctx.srv.config.loglevel);
    log::set_crash_log(&ctx.srv.config);
    log::set_format(ctx.srv.config.log_format, ctx.srv.config.log_timestamp);
    ctx.reply.ok();
}

/// After CONFIG SET of `port` or `bind`: listen there (the old listeners
/// close once the new ones are bound), or Valkey's error for the first of
/// them in the command, the server listening where it did.
fn apply_listeners(
    srv: &mut crate::Server,
    before: &crate::Config,
    pairs: &[(&[u8], &[u8])],
) -> Result<(), String> {
    relisten(srv, before).map_err(|_| {
        let first = pairs
            .iter()
            .map(|(n, _)| String::from_utf8_lossy(n).to_ascii_lowercase())
            .find(|n| n == "port" || n == "bind");
        match first.as_deref() {
            Some("bind") => "ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses.".to_string(),
            _ => "ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs.".to_string(),
        }
    })
}

/// Listen where `srv.config` says if its `port` or `bind` differs from
/// `other`'s (through the network layer's hook; none in tests).
fn relisten(srv: &mut crate::Server, other: &crate::Config) -> Result<(), String> {
    if srv.config.port == other.port && srv.config.bind == other.bind {
        return Ok(());
    }
    if let Some(listen) = srv.listen {
        listen(&srv.config)?;
    }
    srv.net.tcp_port = srv.config.port;
    srv.refresh_proc_title();
    Ok(())
}

/// A CONFIG SET that failed after [`apply_listeners`] moved the
/// listeners for `tried`: back to the restored configuration's addresses
/// (still held, so binding them again cannot fail on their port).
fn undo_listeners(srv: &mut crate::Server, tried: &crate::Config) {
    let _ = relisten(srv, tried);
}

/// After CONFIG SET of `oom-score-adj` or its values: the score follows
/// (Valkey's error names the first of them in the command).
fn apply_oom_score(
    srv: &crate::Server,
    before: &crate::Config,
    pairs: &[(&[u8], &[u8])],
) -> Result<(), String> {
    const NAMES: [&str; 2] = ["oom-score-adj", "oom-score-adj-values"];
    if NAMES.iter().all(|n| srv.config.get(n) == before.get(n)) || srv.apply_oom_score() {
        return Ok(());
    }
    let name = pairs
        .iter()
        .map(|(n, _)| String::from_utf8_lossy(n).to_ascii_lowercase())
        .find(|n| NAMES.contains(&n.as_str()))
        .unwrap_or_else(|| NAMES[0].to_string());
    Err(format!(
        "ERR CONFIG SET failed (possibly related to argument '{name}') - Failed to set current oom_score_adj. Check server logs."
    ))
}

/// After CONFIG SET of `locale-collate`: SORT ... ALPHA collates in that
/// locale from now on (Valkey's error for one the C library lacks).
fn apply_locale(srv: &crate::Server, before: &crate::Config) -> Result<(), String> {
    const NAME: &str = "locale-collate";
    let locale = srv.config.get(NAME).unwrap_or_default();
    match srv.collation {
        Some(c) if before.get(NAME).as_deref() != Some(&locale) && !(c.set_locale)(&locale) => {
            Err(format!(
                "ERR CONFIG SET failed (possibly related to argument '{NAME}') - Invalid locale name"
            ))
        }
        _ => Ok(()),
    }
}

/// After CONFIG SET of `proc-title-template`: the title follows, whatever
/// `set-proc-title` says (Valkey's apply function does not look at it).
fn apply_proc_title(srv: &crate::Server, before: &crate::Config) -> Result<(), String> {
    const NAME: &str = "proc-title-template";
    if srv.config.get(NAME) == before.get(NAME) || srv.apply_proc_title() {
        return Ok(());
    }
    Err(format!(
        "ERR CONFIG SET failed (possibly related to argument '{NAME}') - failed to set process title"
    ))
}

/// After CONFIG SET: a configuration that needs more descriptors (a higher
/// `maxclients`, more IO threads) raises the open-file limit first. As in
/// Valkey, a `maxclients` the system cannot cover is refused, naming the
/// most it can; more IO threads than it covers are not (one that cannot
/// get its descriptors does not start, and the server says so in its log).
fn check_file_limit(srv: &mut crate::Server, before: &crate::Config) -> Result<(), String> {
    let Some(raise) = srv.file_limit else {
        return Ok(());
    };
    let c = &srv.config;
    let want = c.files_needed();
    if want <= before.files_needed() {
        return Ok(());
    }
    let now = raise(want);
    if now >= want || c.maxclients <= before.maxclients {
        return Ok(());
    }
    Err(format!(
        "ERR CONFIG SET failed (possibly related to argument 'maxclients') - The operating \
         system is not able to handle the specified number of clients, try with {}",
        now.saturating_sub(c.reserved_fds())
    ))
}

/// Valkey's `resetServerStats`: counters restart from zero; gauges and
/// the memory peak stay.
fn config_resetstat(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let srv = &mut *ctx.srv;
    srv.stats.reset();
    srv.evict.reset_stats();
    srv.defrag.reset_stats();
    srv.lazyfree.reset_stats();
    srv.persist.saves = 0;
    srv.aof.rewrites = 0;
    srv.repl.reset_stats();
    for db in srv.keyspace.dbs.iter_mut() {
        db.stats = Default::default();
    }
    let net = &mut srv.net;
    net.total_net_input_bytes = 0;
    net.total_net_output_bytes = 0;
    net.rejected_connections = 0;
    net.reset_io_sums();
    ctx.reply.ok();
}

fn config_rewrite(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let Some(path) = ctx.srv.config_file.clone() else {
        ctx.error("ERR The server is running without a config file");
        return;
    };
    let users: Vec<String> = if ctx.srv.config.get("aclfile").is_some_and(|f| !f.is_empty()) {
        Vec::new()
    } else {
        ctx.srv
            .acl
            .users_sorted()
            .iter()
            .map(|u| u.describe())
            .collect()
    };
    match ctx.srv.config.rewrite(&path, &users) {
        Ok(()) => {
            log::notice("CONFIG REWRITE executed with success.");
            ctx.reply.ok();
        }
        Err(e) => {
            log::warning(&format!("CONFIG REWRITE failed: {e}"));
            ctx.error(&format!("ERR Rewriting config file: {e}"));
        }
    }
}

fn config_help(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    super::reply_help(
        ctx,
        "CONFIG",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    );
}

/// LOLWUT [VERSION v]: Valkey 8.1's version line, which it prints alone
/// for every version but 5 and 6 (those draw art first; ringkv draws none).
fn lolwut(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    if argv.len() == 3
        && argv.get(1).eq_ignore_ascii_case(b"version")
        && crate::num::parse_i64(argv.get(2)).is_none()
    {
        return ctx.error("ERR value is not an integer or out of range");
    }
    let text = format!("Redis ver. {}\n", crate::config::VALKEY_COMPAT_VERSION);
    ctx.reply.verbatim("txt", text.as_bytes());
}

/// MONITOR: from now on the client gets every command the server runs.
/// Inside EXEC it is refused (a client in a transaction expects one reply
/// per command), and a client already monitoring gets no reply at all.
fn monitor(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    if ctx.session.in_exec {
        return ctx.error("ERR MONITOR isn't allowed for DENY BLOCKING client");
    }
    if crate::monitor::start(ctx.srv, ctx.session.id) {
        ctx.session.monitor = true;
        ctx.reply.ok();
    }
}

fn latency_help(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    super::reply_help(
        ctx,
        "LATENCY",
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    );
}

/// LATENCY LATEST: per event with spikes, its newest sample's time and
/// latency, its maximum, and the sum and count of all its spikes.
fn latency_latest(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let mon = &ctx.srv.latency_monitor;
    let events: Vec<_> = mon.events().collect();
    ctx.reply.array_len(events.len());
    for (name, e) in events {
        let latest = e.latest();
        ctx.reply.array_len(6);
        ctx.reply.bulk(name.as_bytes());
        ctx.reply.int(latest.time);
        for n in [latest.latency, e.max, e.sum, e.count] {
            ctx.reply.int(n as i64);
        }
    }
}

/// LATENCY DOCTOR: a report on every event's spikes, with advice.
fn latency_doctor(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let cfg = &ctx.srv.config;
    let settings = crate::latency_monitor::DoctorSettings {
        threshold_ms: cfg.latency_monitor_threshold_ms,
        slowlog_slower_than_us: cfg.slowlog_log_slower_than,
        slowlog_max_len: cfg.slowlog_max_len,
        hz: cfg.hz,
    };
    let now_s = ctx.srv.now_ms().div_euclid(1000);
    let report = ctx.srv.latency_monitor.doctor(&settings, now_s);
    ctx.reply.verbatim("txt", report.as_bytes());
}

/// LATENCY GRAPH event: an ASCII graph of its samples.
fn latency_graph(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let now_s = ctx.srv.now_ms().div_euclid(1000);
    let Some((name, e)) = ctx.srv.latency_monitor.event(argv.get(2)) else {
        // Valkey formats the name with `%s`: up to a NUL.
        let name = argv.get(2).split(|&b| b == 0).next().unwrap_or(&[]);
        return ctx.error(&format!(
            "ERR No samples available for event '{}'",
            String::from_utf8_lossy(name)
        ));
    };
    let text = crate::latency_monitor::graph(name, e, now_s);
    ctx.reply.verbatim("txt", text.as_bytes());
}

/// LATENCY HISTORY event: its samples, oldest first, as (time, ms).
fn latency_history(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let Some((_, e)) = ctx.srv.latency_monitor.event(argv.get(2)) else {
        return ctx.reply.array_len(0);
    };
    let samples: Vec<_> = e.samples().collect();
    ctx.reply.array_len(samples.len());
    for s in samples {
        ctx.reply.array_len(2);
        ctx.reply.int(s.time);
        ctx.reply.int(s.latency as i64);
    }
}

/// LATENCY RESET [event ...]: how many event classes were forgotten.
fn latency_reset(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let names: Vec<&[u8]> = (2..argv.len()).map(|j| argv.get(j)).collect();
    let n = ctx.srv.latency_monitor.reset(&names);
    ctx.reply.int(n as i64);
}

/// LATENCY HISTOGRAM [command ...]: for each command named (a container
/// brings those of its subcommands that have run; unknown names bring
/// nothing), or every command when none is, its calls and the cumulative
/// distribution of their durations by power-of-two µs buckets.
fn latency_histogram(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let t = crate::table::table();
    let mut picked = Vec::new();
    if argv.len() == 2 {
        picked.extend(0..t.len());
    }
    for j in 2..argv.len() {
        let Some(i) = t.lookup_fullname(argv.get(j)) else {
            continue;
        };
        picked.push(i);
        picked.extend_from_slice(&t.entries[i].subs);
    }
    let stats = &ctx.srv.stats.latency;
    picked.retain(|&i| stats.get(i).is_some());
    ctx.reply.map_len(picked.len());
    for i in picked {
        let h = stats.get(i).expect("kept above");
        ctx.reply.bulk(t.entries[i].fullname.as_bytes());
        ctx.reply.map_len(2);
        ctx.reply.bulk(b"calls");
        ctx.reply.int(h.len() as i64);
        ctx.reply.bulk(b"histogram_usec");
        let buckets = crate::latency_stats::cumulative_buckets(h);
        ctx.reply.map_len(buckets.len());
        for (us, calls) in buckets {
            ctx.reply.int(us as i64);
            ctx.reply.int(calls as i64);
        }
    }
}
