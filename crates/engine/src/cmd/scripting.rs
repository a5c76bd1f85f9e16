//! Scripting: EVAL EVALSHA EVAL_RO EVALSHA_RO and SCRIPT (LOAD EXISTS
//! FLUSH SHOW KILL HELP), with Valkey 8's semantics (`eval.c`,
//! `script.c`). The Lua side lives in the `ringkv-script` crate; this
//! module is its [`script::Host`]: the commands a script runs go through
//! the same table, checks and effects as a client's.
//!
//! ```text
//!   EVAL body numkeys k.. a..
//!     └─ Scripts::load (cached per SHA1) ─ Scripts::run
//!           redis.call ──► ScriptHost::call: lookup, arity, noscript,
//!                          read-only, MISCONF, OOM checks, then the
//!                          command's function through effects::call
//!                          (inside EVAL's call: the unit's effects are
//!                          the script's commands, wrapped in MULTI/EXEC
//!                          when there are several)
//! ```
//!
//! The script runs as the caller's session with the script's own database
//! (SELECT inside it does not change the caller's) and protocol
//! (`redis.setresp`), restored afterwards; commands cannot block
//! (`in_exec`), as in MULTI. A script past `busy-reply-threshold` makes
//! the server busy: SCRIPT KILL and FUNCTION KILL are answered from the
//! busy state while it runs (`crate::busy`); executed here, when no script
//! runs, they answer NOTBUSY.

use super::{NOT_INT, reply_help};
use crate::batch::ArgvRef;
use crate::command::flags::*;
use crate::command::{ArgSpec, CommandSpec, Ctx, KeySpec, key_flags as kf};
use crate::server::{KeyHint, Server};
use crate::session::Session;
use crate::table::table;
use resp::{Protocol, ReplyWriter, Span};
use script::Scripts;

pub(crate) const EVAL_FLAGS: u32 = NOSCRIPT | SKIP_MONITOR | NO_MANDATORY_KEYS | STALE;
pub(crate) const EVAL_RO_FLAGS: u32 =
    NOSCRIPT | SKIP_MONITOR | NO_MANDATORY_KEYS | STALE | READONLY;
const ACL: &[&str] = &["slow", "scripting"];

const EVAL_ARGS: &[ArgSpec] = &[
    ArgSpec::string("script"),
    ArgSpec::integer("numkeys"),
    ArgSpec::key("key", 0).optional().multiple(),
    ArgSpec::string("arg").optional().multiple(),
];
const EVALSHA_ARGS: &[ArgSpec] = &[
    ArgSpec::string("sha1"),
    ArgSpec::integer("numkeys"),
    ArgSpec::key("key", 0).optional().multiple(),
    ArgSpec::string("arg").optional().multiple(),
];

/// The keys of EVAL and FCALL (after numkeys), with Valkey's notes: how a
/// script uses them cannot be told.
pub(crate) const SCRIPT_KEYS_RW: &[KeySpec] =
    &[KeySpec::index(2, kf::RW | kf::ACCESS | kf::UPDATE)
        .keynum(0, 1, 1)
        .notes("We cannot tell how the keys will be used so we assume the worst, RW and UPDATE")];
/// As [`SCRIPT_KEYS_RW`], for the read-only variants.
pub(crate) const SCRIPT_KEYS_RO: &[KeySpec] = &[KeySpec::index(2, kf::RO | kf::ACCESS)
    .keynum(0, 1, 1)
    .notes("We cannot tell how the keys will be used so we assume the worst, RO and ACCESS")];

const fn eval_spec(
    name: &'static str,
    flags: u32,
    since: &'static str,
    summary: &'static str,
    func: crate::command::CommandFn,
    args: &'static [ArgSpec],
) -> CommandSpec {
    crate::command::spec(
        "scripting",
        name,
        -3,
        flags,
        (0, 0, 0),
        ACL,
        since,
        summary,
        "Depends on the script that is executed.",
        func,
        args,
    )
}

const fn sub(
    name: &'static str,
    arity: i32,
    flags: u32,
    summary: &'static str,
    complexity: &'static str,
    func: crate::command::CommandFn,
    args: &'static [ArgSpec],
) -> CommandSpec {
    crate::command::spec(
        "scripting",
        name,
        arity,
        flags,
        (0, 0, 0),
        ACL,
        "2.6.0",
        summary,
        complexity,
        func,
        args,
    )
}

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        key_specs: SCRIPT_KEYS_RW,
        ..eval_spec(
            "eval",
            EVAL_FLAGS,
            "2.6.0",
            "Executes a server-side Lua script.",
            eval,
            EVAL_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(2, kf::RW | kf::ACCESS | kf::UPDATE).keynum(0, 1, 1)],
        ..eval_spec(
            "evalsha",
            EVAL_FLAGS,
            "2.6.0",
            "Executes a server-side Lua script by SHA1 digest.",
            evalsha,
            EVALSHA_ARGS,
        )
    },
    CommandSpec {
        key_specs: SCRIPT_KEYS_RO,
        ..eval_spec(
            "eval_ro",
            EVAL_RO_FLAGS,
            "7.0.0",
            "Executes a read-only server-side Lua script.",
            eval_ro,
            EVAL_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(2, kf::RO | kf::ACCESS).keynum(0, 1, 1)],
        ..eval_spec(
            "evalsha_ro",
            EVAL_RO_FLAGS,
            "7.0.0",
            "Executes a read-only server-side Lua script by SHA1 digest.",
            evalsha_ro,
            EVALSHA_ARGS,
        )
    },
    CommandSpec {
        name: "script",
        arity: -2,
        acl_categories: &["slow"],
        group: "scripting",
        since: "2.6.0",
        summary: "A container for Lua scripts management commands.",
        complexity: "Depends on subcommand.",
        subcommands: &[
            CommandSpec {
                tips: &[
                    "request_policy:all_shards",
                    "response_policy:agg_logical_and",
                ],
                ..sub(
                    "exists",
                    -3,
                    NOSCRIPT,
                    "Determines whether server-side Lua scripts exist in the script cache.",
                    "O(N) with N being the number of scripts to check (so checking a single script is an O(1) operation).",
                    script_exists,
                    &[ArgSpec::string("sha1").multiple()],
                )
            },
            CommandSpec {
                tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
                history: &[(
                    "6.2.0",
                    "Added the `ASYNC` and `SYNC` flushing mode modifiers.",
                )],
                ..sub(
                    "flush",
                    -2,
                    NOSCRIPT,
                    "Removes all server-side Lua scripts from the script cache.",
                    "O(N) with N being the number of scripts in cache",
                    script_flush,
                    &[ArgSpec::oneof(
                        "flush-type",
                        &[
                            ArgSpec::pure_token("async", "ASYNC"),
                            ArgSpec::pure_token("sync", "SYNC"),
                        ],
                    )
                    .since("6.2.0")
                    .optional()],
                )
            },
            CommandSpec {
                since: "5.0.0",
                ..sub(
                    "help",
                    2,
                    LOADING | STALE,
                    "Returns helpful text about the different subcommands.",
                    "O(1)",
                    script_help,
                    &[],
                )
            },
            CommandSpec {
                tips: &["request_policy:all_shards", "response_policy:one_succeeded"],
                ..sub(
                    "kill",
                    2,
                    NOSCRIPT | ALLOW_BUSY,
                    "Terminates a server-side Lua script during execution.",
                    "O(1)",
                    script_kill,
                    &[],
                )
            },
            CommandSpec {
                tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
                ..sub(
                    "load",
                    3,
                    NOSCRIPT | STALE,
                    "Loads a server-side Lua script to the script cache.",
                    "O(N) with N being the length in bytes of the script body.",
                    script_load,
                    &[ArgSpec::string("script")],
                )
            },
            CommandSpec {
                since: "8.0.0",
                ..sub(
                    "show",
                    3,
                    NOSCRIPT,
                    "Show server-side Lua script in the script cache.",
                    "O(1).",
                    script_show,
                    &[ArgSpec::string("sha1")],
                )
            },
        ],
        ..CommandSpec::DEFAULT
    },
];

/// What scripts' count hook consults (the busy state).
pub(crate) fn watchdog(srv: &Server) -> std::sync::Arc<dyn script::Watchdog> {
    std::sync::Arc::new(crate::busy::Watch(srv.busy.clone()))
}

/// The script cache, created on first use.
fn scripts(srv: &mut Server) -> &mut Scripts {
    srv.scripts.get_or_insert_with(|| Box::new(Scripts::new()))
}

fn eval(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    eval_generic(ctx, argv, false, false);
}
fn evalsha(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    eval_generic(ctx, argv, true, false);
}
fn eval_ro(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    eval_generic(ctx, argv, false, true);
}
fn evalsha_ro(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    eval_generic(ctx, argv, true, true);
}

const NOSCRIPT_ERR: &str = "NOSCRIPT No matching script.";

/// Valkey's `evalGenericCommand`.
fn eval_generic(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, by_sha: bool, ro: bool) {
    ctx.monitor_script_command(argv);
    if by_sha && argv.get(1).len() != 40 {
        // No script can match: Valkey answers so before it reads numkeys.
        return ctx.error(NOSCRIPT_ERR);
    }
    let Some(numkeys) = numkeys(ctx, argv, NOT_INT) else {
        return;
    };
    let mut sc = ctx
        .srv
        .scripts
        .take()
        .unwrap_or_else(|| Box::new(Scripts::new()));
    let sha: [u8; 40] = if by_sha {
        match <[u8; 40]>::try_from(argv.get(1)) {
            Ok(s) if sc.exists(&s) => {
                let mut s = s;
                s.make_ascii_lowercase();
                sc.touch(&s);
                s
            }
            _ => {
                ctx.srv.scripts = Some(sc);
                return ctx.error(NOSCRIPT_ERR);
            }
        }
    } else {
        match sc.load_for_eval(argv.get(1)) {
            Ok(s) => s,
            Err(e) => {
                ctx.srv.scripts = Some(sc);
                return ctx.error(&e);
            }
        }
    };
    let flags = sc.get(&sha).map_or(0, |s| s.flags);
    let compat = flags & script::flags::EVAL_COMPAT_MODE != 0;
    let no_writes = flags & script::flags::NO_WRITES != 0;
    let allow_oom = flags & script::flags::ALLOW_OOM != 0;
    if !compat && let Some(msg) = refused_up_front(ctx.srv, no_writes, allow_oom) {
        ctx.srv.scripts = Some(sc);
        return ctx.error(msg);
    }
    let keys: Vec<&[u8]> = (3..3 + numkeys).map(|i| argv.get(i)).collect();
    let args: Vec<&[u8]> = (3 + numkeys..argv.len()).map(|i| argv.get(i)).collect();
    if !sc.has_watchdog() {
        sc.set_watchdog(watchdog(ctx.srv));
    }
    run_script(ctx, true, ro || no_writes, allow_oom, |host, reply| {
        sc.run(&sha, &keys, &args, host, reply)
    });
    ctx.srv.scripts = Some(sc);
}

/// Run a script or function (`run`) as the caller's session: its
/// commands are its effects (one unit, wrapped in MULTI/EXEC when there
/// are several), not the command as sent; its database and protocol are
/// its own and the caller's come back afterwards.
pub(crate) fn run_script(
    ctx: &mut Ctx<'_>,
    eval: bool,
    read_only: bool,
    allow_oom: bool,
    run: impl FnOnce(&mut dyn script::Host, &mut ReplyWriter<'_>) -> bool,
) {
    ctx.prevent_propagation();
    ctx.srv.busy.begin(
        eval,
        ctx.srv.config.busy_reply_threshold_ms,
        ctx.srv.auth_required(),
        ctx.session.id == crate::replication::PRIMARY_CLIENT,
    );
    let caller_db = ctx.session.db;
    let caller_proto = ctx.session.proto;
    let caller_in_exec = ctx.session.in_exec;
    let time_before = ctx.srv.freeze_time();
    ctx.srv.in_script = true;
    let Ctx {
        srv,
        session,
        reply,
        now_ms,
    } = ctx;
    let mut host = ScriptHost {
        srv,
        session,
        now_ms: *now_ms,
        read_only,
        allow_oom,
        wrote: false,
        write_noted: false,
        repl: script::repl::ALL,
        data: Vec::new(),
        spans: Vec::new(),
    };
    let counted = run(&mut host, reply);
    if ctx.srv.busy.stopped_by_shutdown() {
        // The server stops next: none of the script's writes go out.
        ctx.srv.effects.discard_unit();
    }
    ctx.srv.thaw_time(time_before);
    ctx.srv.in_script = false;
    ctx.srv.busy.end();
    if ctx.srv.busy.has_refused() {
        let busy = ctx.srv.busy.clone();
        busy.settle(ctx.srv);
    }
    // The error reply repeats one counted where it happened.
    ctx.srv.stats.error_counted = counted;
    ctx.session.db = caller_db;
    ctx.session.proto = caller_proto;
    ctx.session.in_exec = caller_in_exec;
    ctx.srv.key_hint = KeyHint::default();
}

/// A script with a shebang, or a function, declares whether it may write:
/// one that may is refused before it runs when memory is over the limit
/// (unless it allows OOM) or writes are refused (a failing disk, too
/// few good replicas: Valkey's `scriptPrepareForRun`).
pub(crate) fn refused_up_front(
    srv: &Server,
    no_writes: bool,
    allow_oom: bool,
) -> Option<&'static str> {
    if no_writes {
        return None;
    }
    if crate::persist::writes_denied(srv) {
        return Some(crate::compat::MISCONF.get());
    }
    if crate::replication::primary::too_few_replicas(srv) {
        return Some(crate::replication::primary::NOREPLICAS_ERR);
    }
    if !allow_oom && srv.config.maxmemory > 0 && !srv.aof.replaying && srv.pre_command_oom {
        return Some(crate::evict::OOM_ERR);
    }
    None
}

/// EVAL's and FCALL's `numkeys`, checked against the arguments;
/// `not_int` is the command's error for one that is not a number (EVAL
/// and FCALL word it differently in Valkey).
pub(crate) fn numkeys(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, not_int: &str) -> Option<usize> {
    let Some(n) = crate::num::parse_i64(argv.get(2)) else {
        ctx.error(not_int);
        return None;
    };
    if n > argv.len() as i64 - 3 {
        ctx.error("ERR Number of keys can't be greater than number of args");
        return None;
    }
    if n < 0 {
        ctx.error("ERR Number of keys can't be negative");
        return None;
    }
    Some(n as usize)
}

/// What `redis.call` reaches: the engine, as the script's client.
struct ScriptHost<'a, 'b> {
    srv: &'a mut &'b mut Server,
    session: &'a mut &'b mut Session,
    now_ms: i64,
    /// EVAL_RO, or a `no-writes` shebang.
    read_only: bool,
    allow_oom: bool,
    /// A command of this run changed the dataset (later denyoom commands
    /// are let through, as Valkey's SCRIPT_WRITE_DIRTY).
    wrote: bool,
    /// The busy state knows this run has called a write command (it can
    /// no longer be killed).
    write_noted: bool,
    repl: u8,
    /// Argument buffers reused from one `redis.call` to the next.
    data: Vec<u8>,
    spans: Vec<Span>,
}

const UNKNOWN: &str = "ERR Unknown command called from script";

/// The `noscript` commands a script may not call even after DEBUG
/// SET-DISABLE-DENY-SCRIPTS 1: a script's commands run on its caller's
/// session, so these would change that client's connection state (a
/// transaction, subscriptions, a replication handshake) or enter the
/// script engine that is running this very script.
fn acts_on_caller_or_scripts(name: &[u8]) -> bool {
    const NAMES: &[&str] = &[
        "eval",
        "evalsha",
        "eval_ro",
        "evalsha_ro",
        "fcall",
        "fcall_ro",
        "script",
        "function",
        "multi",
        "exec",
        "discard",
        "watch",
        "unwatch",
        "subscribe",
        "unsubscribe",
        "psubscribe",
        "punsubscribe",
        "ssubscribe",
        "sunsubscribe",
        "monitor",
        "sync",
        "psync",
        "replconf",
        "reset",
        "hello",
        "auth",
        "quit",
    ];
    NAMES
        .iter()
        .any(|n| n.as_bytes().eq_ignore_ascii_case(name))
}

impl ScriptHost<'_, '_> {
    /// One command for `redis.call`: Valkey's `scriptCall` checks, then
    /// the command through the table's function.
    fn run_command(
        &mut self,
        argv: &[&[u8]],
        resp3: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        let t = table();
        let Some(i) = t.lookup_command(argv) else {
            return Err(UNKNOWN.into());
        };
        let spec = t.entries[i].spec;
        if !t.entries[i].accepts_argc(argv.len()) {
            return Err("ERR Wrong number of args calling command from script".into());
        }
        let srv: &mut Server = self.srv;
        if spec.flags & NOSCRIPT != 0
            && (!srv.script_deny_disabled || acts_on_caller_or_scripts(argv[0]))
        {
            return Err("ERR This Redis command is not allowed from script".into());
        }
        if let Err(d) = srv.acl.check(self.session.user, i, argv) {
            let context = crate::acl::log::Context::Lua;
            let msg = crate::acl::refuse_in(srv, self.session, d, i, argv, context, self.now_ms);
            return Err(format!("ERR ACL failure in script: {msg}"));
        }
        // A read-only script counts commands that may replicate (PUBLISH)
        // as writes too, as Valkey: so it can run while writes are paused.
        if self.read_only && spec.flags & (WRITE | MAY_REPLICATE) != 0 {
            return Err("ERR Write commands are not allowed from read-only scripts.".into());
        }
        if spec.flags & WRITE != 0 {
            // A read-only replica refuses a script's writes as a client's,
            // unless its primary sent the script.
            if srv.repl.is_replica()
                && srv.config.replica_read_only
                && self.session.id != crate::replication::PRIMARY_CLIENT
            {
                return Err(crate::replication::READONLY_ERR.into());
            }
            if crate::replication::primary::too_few_replicas(srv) {
                return Err(crate::replication::primary::NOREPLICAS_ERR.into());
            }
            if crate::persist::writes_denied(srv) {
                return Err(crate::compat::MISCONF.get().into());
            }
            if let Some(msg) = crate::aof::misconf_error(srv) {
                return Err(msg);
            }
            if !self.write_noted {
                srv.busy.note_write().map_err(|t| format!("ERR {t}"))?;
                self.write_noted = true;
            }
        }
        if spec.flags & DENYOOM != 0
            && !self.allow_oom
            && !self.wrote
            && srv.config.maxmemory > 0
            && !srv.aof.replaying
            && srv.pre_command_oom
        {
            return Err(crate::evict::OOM_ERR.into());
        }
        let Some(f) = spec.func else {
            return Err(UNKNOWN.into());
        };
        // The arguments in one buffer, as a parsed request is.
        let mut data = std::mem::take(&mut self.data);
        let mut spans = std::mem::take(&mut self.spans);
        data.clear();
        spans.clear();
        for a in argv {
            spans.push(Span {
                start: data.len(),
                len: a.len(),
            });
            data.extend_from_slice(a);
        }
        let args = ArgvRef {
            data: &data,
            spans: &spans,
        };
        let proto = if resp3 {
            Protocol::Resp3
        } else {
            Protocol::Resp2
        };
        let session: &mut Session = self.session;
        // A subscribed caller (RESP3: a RESP2 one cannot run scripts) may
        // get pushes from its own command (keyspace events): the command
        // then writes RESP3, so they can be told from its reply.
        let subscribed = session.subs.is_some();
        let write_proto = if subscribed { Protocol::Resp3 } else { proto };
        session.proto = write_proto;
        session.in_exec = true;
        srv.key_hint = KeyHint::default();
        let dirty = srv.persist.dirty;
        let exact = crate::commandlog::CommandLog::wants_exact(
            srv.config.slowlog_log_slower_than,
            spec.flags,
        );
        let started = exact.then(std::time::Instant::now);
        {
            let mut ctx = Ctx {
                srv: &mut *srv,
                session: &mut *session,
                reply: ReplyWriter::new(out, write_proto),
                now_ms: self.now_ms,
            };
            // EVAL set the keyspace's no-touch state; only a TOUCH lifts it.
            let touch = crate::touches_despite_no_touch(ctx.session, spec.name);
            if touch {
                ctx.srv.keyspace.set_no_touch(false);
            }
            if self.repl == script::repl::NONE {
                // Not propagated: EVAL's own call emits nothing for it.
                f(&mut ctx, args);
            } else {
                crate::effects::call(&mut ctx, f, args, false);
            }
            if touch {
                ctx.srv.keyspace.set_no_touch(true);
            }
        }
        if srv.persist.dirty > dirty {
            self.wrote = true;
        }
        let slow_ns = started.map(|t0| t0.elapsed().as_nanos() as u64);
        if let Some(ns) = slow_ns {
            srv.record_latency(i, ns, 1);
        }
        let slow_us = slow_ns.map(|ns| ns / 1000);
        crate::observe::after_call(srv, session, i, args, true, slow_us, None, self.now_ms);
        if subscribed {
            split_pushes(srv, session, out, proto);
        }
        let st = &mut srv.stats.commands[i];
        st.calls += 1;
        if out.first() == Some(&b'-') {
            st.failed_calls += 1;
            let end = out.iter().position(|&b| b == b'\r').unwrap_or(out.len());
            let text = String::from_utf8_lossy(&out[1..end]);
            srv.stats.record_error(&text);
        }
        srv.stats.total_commands_processed += 1;
        // Counted for the caller too (CLIENT LIST `tot-cmds`), as Valkey
        // counts the commands of its script client for the current client.
        session.commands_processed += 1;
        self.data = data;
        self.spans = spans;
        Ok(())
    }
}

/// The pushes a subscribed caller's command wrote to itself go out as
/// its pending output (after this batch's replies); what is left is the
/// command's reply, rewritten in `proto` (it was written in RESP3).
fn split_pushes(srv: &mut Server, session: &mut Session, out: &mut Vec<u8>, proto: Protocol) {
    let mut at = 0;
    let mut reply: Option<resp::Value> = None;
    let mut pushes = Vec::new();
    while at < out.len() {
        let Ok(Some(n)) = resp::value_len(&out[at..]) else {
            break;
        };
        if out[at] == b'>' {
            pushes.extend_from_slice(&out[at..at + n]);
        } else if reply.is_none() {
            reply = resp::parse_value(&out[at..at + n])
                .ok()
                .flatten()
                .map(|(v, _)| v);
        }
        at += n;
    }
    if pushes.is_empty() && proto == Protocol::Resp3 {
        return;
    }
    out.clear();
    if let Some(v) = reply {
        write_value(&mut ReplyWriter::new(out, proto), &v);
    }
    if !pushes.is_empty() {
        session.pending.extend_from_slice(&pushes);
        if !session.pending_queued {
            session.pending_queued = true;
            srv.outbox.push(session.id);
        }
    }
}

/// Write a parsed reply again (the writer downgrades RESP3 types for RESP2).
fn write_value(w: &mut ReplyWriter<'_>, v: &resp::Value) {
    use resp::Value as V;
    match v {
        V::Simple(s) => w.simple(&String::from_utf8_lossy(s)),
        V::Error(e) => w.error(&String::from_utf8_lossy(e)),
        V::Int(i) => w.int(*i),
        V::Bulk(b) => w.bulk(b),
        V::Null => w.null(),
        V::Array(items) | V::Push(items) => {
            w.array_len(items.len());
            for it in items {
                write_value(w, it);
            }
        }
        V::Set(items) => {
            w.set_len(items.len());
            for it in items {
                write_value(w, it);
            }
        }
        V::Map(pairs) => {
            w.map_len(pairs.len());
            for (k, x) in pairs {
                write_value(w, k);
                write_value(w, x);
            }
        }
        V::Double(d) => w.double(*d),
        V::Bool(b) => w.boolean(*b),
        V::Verbatim { format, text } => w.verbatim(&String::from_utf8_lossy(format), text),
        V::BigNumber(d) => w.big_number(&String::from_utf8_lossy(d)),
        V::Attribute { value, .. } => write_value(w, value),
    }
}

impl script::Host for ScriptHost<'_, '_> {
    fn call(&mut self, argv: &[&[u8]], resp3: bool, out: &mut Vec<u8>) -> Result<(), String> {
        let r = self.run_command(argv, resp3, out);
        // A refusal is counted in INFO errorstats here, once (the
        // script's error reply that may repeat it is not), and as the
        // command's rejected call (Valkey's scriptCall).
        if let Err(msg) = &r {
            self.srv.stats.record_error(msg);
            if let Some(st) = table()
                .lookup_command(argv)
                .and_then(|i| self.srv.stats.commands.get_mut(i))
            {
                st.rejected_calls += 1;
            }
        }
        r
    }

    fn log(&mut self, level: u8, msg: &str) {
        use crate::log::Level;
        let level = match level {
            0 => Level::Debug,
            1 => Level::Verbose,
            2 => Level::Notice,
            _ => Level::Warning,
        };
        crate::log::log(level, msg);
    }

    fn set_repl(&mut self, flags: u8) {
        // One stream feeds both the AOF and replicas: any destination
        // means it is emitted.
        self.repl = flags;
    }

    fn acl_check(&mut self, argv: &[&[u8]]) -> Option<bool> {
        let i = table().lookup_command(argv)?;
        Some(self.srv.acl.check(self.session.user, i, argv).is_ok())
    }
}

fn script_exists(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    ctx.reply.array_len(argv.len() - 2);
    for i in 2..argv.len() {
        let found = ctx
            .srv
            .scripts
            .as_ref()
            .is_some_and(|s| s.exists(argv.get(i)));
        ctx.reply.int(i64::from(found));
    }
}

fn script_flush(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    if argv.len() > 3 {
        return ctx.error("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
    }
    if argv.len() == 3 {
        let m = argv.get(2);
        if !m.eq_ignore_ascii_case(b"sync") && !m.eq_ignore_ascii_case(b"async") {
            return ctx.error("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
        }
    }
    // ASYNC and SYNC free the same way: the Lua state goes at once.
    if let Some(s) = ctx.srv.scripts.as_mut() {
        s.flush();
    }
    ctx.reply.ok();
}

fn script_load(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    match scripts(ctx.srv).load(argv.get(2)) {
        Ok(sha) => ctx.reply.bulk(&sha),
        Err(e) => ctx.error(&e),
    }
}

fn script_show(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let body = ctx
        .srv
        .scripts
        .as_ref()
        .and_then(|s| s.get(argv.get(2)))
        .map(|s| s.body.clone());
    match body {
        Some(b) => ctx.reply.bulk(&b),
        None => ctx.error(NOSCRIPT_ERR),
    }
}

/// Run by the engine, so no script is running (while one is busy, the
/// IO layer answers SCRIPT KILL from `crate::busy`).
fn script_kill(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    ctx.error(crate::busy::NOTBUSY_ERR);
}

fn script_help(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    reply_help(
        ctx,
        "SCRIPT",
        &[
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined",
            "     by the lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
            "SHOW <sha1>",
            "    Show a script from the scripts cache.",
        ],
    );
}
