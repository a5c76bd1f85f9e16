//! Transactions: MULTI EXEC DISCARD WATCH UNWATCH, with Valkey 8's
//! semantics (`multi.c`).
//!
//! ```text
//!   MULTI ──► Session.multi = Some(empty)
//!   SET k v ─ engine (lib.rs execute_one): in MULTI and not one of
//!             EXEC DISCARD MULTI WATCH QUIT RESET → copied into Multi, +QUEUED
//!             (rejected at queue time: unknown, arity, ... → Multi.dirty)
//!   EXEC ──► dirty → -EXECABORT; watched key touched/expired → null array;
//!            else unwatch, run each queued command (in_exec: no blocking),
//!            one array of their replies. Blocked clients are served after
//!            EXEC as a whole (the engine serves them after each top-level
//!            command), so they see the transaction's final state.
//! ```

use crate::batch::ArgvRef;
use crate::command::flags::*;
use crate::command::{ArgSpec, CommandSpec, Ctx, KeySpec, key_flags as kf};
use crate::server::KeyHint;
use crate::table::table;
use crate::watch;
use resp::Span;
use std::time::Instant;

/// The queued commands of one MULTI, all arguments in one buffer.
#[derive(Default, Debug)]
pub struct Multi {
    data: Vec<u8>,
    spans: Vec<Span>,
    /// Per command: its table index (subcommand resolved) and where its
    /// spans end.
    cmds: Vec<(u32, u32)>,
    /// A command was rejected while queueing: EXEC must abort.
    pub dirty: bool,
}

impl Multi {
    /// Copy `argv` into the queue; `idx` is the resolved table index.
    pub fn queue(&mut self, idx: usize, argv: ArgvRef<'_>) {
        crate::batch::pack_args(argv.iter(), &mut self.data, &mut self.spans);
        self.cmds.push((idx as u32, self.spans.len() as u32));
    }
    /// Does a queued command carry one of `flags` (EXEC's OOM check)?
    pub fn any_flag(&self, flags: u32) -> bool {
        let entries = &table().entries;
        self.cmds
            .iter()
            .any(|&(idx, _)| entries[idx as usize].spec.flags & flags != 0)
    }
    /// Does every queued command carry all of `flags` (EXEC on a stale
    /// replica)?
    pub fn all_flag(&self, flags: u32) -> bool {
        let entries = &table().entries;
        self.cmds
            .iter()
            .all(|&(idx, _)| entries[idx as usize].spec.flags & flags == flags)
    }
    /// Queued commands (CLIENT LIST `multi=`).
    pub fn len(&self) -> usize {
        self.cmds.len()
    }
    pub fn is_empty(&self) -> bool {
        self.cmds.is_empty()
    }
    /// Bytes held for the queue (CLIENT LIST `multi-mem=`).
    pub fn mem(&self) -> usize {
        self.data.capacity()
            + self.spans.capacity() * std::mem::size_of::<Span>()
            + self.cmds.capacity() * 8
    }
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, ArgvRef<'_>)> {
        let mut at = 0usize;
        self.cmds.iter().map(move |&(idx, end)| {
            let spans = &self.spans[at..end as usize];
            at = end as usize;
            (
                idx as usize,
                ArgvRef {
                    data: &self.data,
                    spans,
                },
            )
        })
    }
}

/// Commands that run at once inside MULTI instead of being queued
/// (Valkey's `processCommand`: EXEC DISCARD QUIT RESET; MULTI and WATCH
/// are `no_multi`, refused before this).
pub fn runs_in_multi(idx: usize) -> bool {
    matches!(
        table().entries[idx].fullname.as_str(),
        "exec" | "discard" | "quit" | "reset"
    )
}

const TX: &[&str] = &["fast", "transaction"];
const TX_FLAGS: u32 = NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY;

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "multi",
        arity: 1,
        flags: TX_FLAGS | NO_MULTI,
        acl_categories: TX,
        group: "transactions",
        since: "1.2.0",
        summary: "Starts a transaction.",
        func: Some(multi),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "exec",
        arity: 1,
        flags: NOSCRIPT | LOADING | STALE | SKIP_COMMANDLOG,
        acl_categories: &["slow", "transaction"],
        group: "transactions",
        since: "1.2.0",
        summary: "Executes all commands in a transaction.",
        complexity: "Depends on commands in the transaction",
        func: Some(exec),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "discard",
        arity: 1,
        flags: TX_FLAGS,
        acl_categories: TX,
        group: "transactions",
        since: "2.0.0",
        summary: "Discards a transaction.",
        complexity: "O(N), when N is the number of queued commands",
        func: Some(discard),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO).range(-1, 1, 0)],
        name: "watch",
        arity: -2,
        flags: TX_FLAGS | NO_MULTI,
        first_key: 1,
        last_key: -1,
        key_step: 1,
        acl_categories: TX,
        group: "transactions",
        since: "2.2.0",
        summary: "Monitors changes to keys to determine the execution of a transaction.",
        complexity: "O(1) for every key.",
        func: Some(watch_cmd),
        args: &[ArgSpec::key("key", 0).multiple()],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "unwatch",
        arity: 1,
        flags: TX_FLAGS,
        acl_categories: TX,
        group: "transactions",
        since: "2.2.0",
        summary: "Forgets about watched keys of a transaction.",
        func: Some(unwatch),
        ..CommandSpec::DEFAULT
    },
];

/// Inside MULTI, MULTI and WATCH are refused before they run (`no_multi`).
fn multi(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    ctx.session.multi = Some(Box::default());
    ctx.session.multi_state = true;
    ctx.reply.ok();
}

/// Leave MULTI (if in it) and forget the watched keys: DISCARD, the end
/// of EXEC, RESET.
pub fn discard_transaction(ctx: &mut Ctx<'_>) {
    ctx.session.multi = None;
    watch::unwatch_all(ctx.srv, ctx.session);
}

fn discard(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    if ctx.session.multi.is_none() {
        return ctx.error("ERR DISCARD without MULTI");
    }
    discard_transaction(ctx);
    ctx.reply.ok();
}

fn watch_cmd(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let db = ctx.session.db;
    for i in 1..argv.len() {
        watch::watch(ctx.srv, ctx.session, db, argv.get(i), ctx.now_ms);
    }
    ctx.reply.ok();
}

fn unwatch(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    watch::unwatch_all(ctx.srv, ctx.session);
    ctx.reply.ok();
}

/// A queued command the client's ACL no longer allows (Valkey checks
/// again at EXEC): logged, and the reason EXEC gives for it.
fn acl_changed_since_queued(
    ctx: &mut Ctx<'_>,
    idx: usize,
    argv: ArgvRef<'_>,
) -> Option<&'static str> {
    let user = ctx.session.user;
    if !ctx.srv.acl.restricted(user) {
        return None;
    }
    let args: Vec<&[u8]> = argv.iter().collect();
    let denied = ctx.srv.acl.check(user, idx, &args).err()?;
    let context = crate::acl::log::Context::Multi;
    crate::acl::refuse_in(
        ctx.srv,
        ctx.session,
        denied,
        idx,
        &args,
        context,
        ctx.now_ms,
    );
    Some(match denied {
        crate::acl::Denied::Command => "no permission to execute the command or subcommand",
        crate::acl::Denied::Key(_) => "no permission to touch the specified keys",
        crate::acl::Denied::Channel(_) => {
            "no permission to access one of the channels used as arguments"
        }
    })
}

fn exec(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let Some(m) = ctx.session.multi.take() else {
        return ctx.error("ERR EXEC without MULTI");
    };
    // Expiry deletions logged so far may dirty the watch.
    crate::pubsub::drain_expired(ctx.srv, None);
    let id = ctx.session.id;
    let aborted_by_watch =
        ctx.srv.watches.is_dirty(id) || watch::any_expired_since_watch(ctx.srv, id, ctx.now_ms);
    if m.dirty || aborted_by_watch {
        watch::unwatch_all(ctx.srv, ctx.session);
        if m.dirty {
            ctx.error("EXECABORT Transaction discarded because of previous errors.");
        } else {
            ctx.reply.null_array();
        }
        return;
    }
    // Its commands' effects stand for it (wrapped in MULTI/EXEC when
    // there are several).
    ctx.prevent_propagation();
    // Nothing the transaction does can dirty its own watch.
    watch::unwatch_all(ctx.srv, ctx.session);
    ctx.session.in_exec = true;
    let time_before = ctx.srv.freeze_time();
    ctx.reply.array_len(m.len());
    let entries = &table().entries;
    let mut t_prev = Instant::now();
    for (idx, argv) in m.iter() {
        // The engine's first-key hint belongs to EXEC's own arguments.
        ctx.srv.key_hint = KeyHint::default();
        let start = ctx.reply.out.len();
        if let Some(reason) = acl_changed_since_queued(ctx, idx, argv) {
            let msg = format!(
                "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}"
            );
            ctx.reply.error(&msg);
            ctx.srv.stats.record_error(&msg);
            continue;
        }
        if let Some(f) = entries[idx].spec.func {
            // EXEC set the keyspace's no-touch state; only a TOUCH lifts it.
            let touch = crate::touches_despite_no_touch(ctx.session, entries[idx].spec.name);
            if touch {
                ctx.srv.keyspace.set_no_touch(false);
            }
            crate::effects::call(ctx, f, argv, false);
            if touch {
                ctx.srv.keyspace.set_no_touch(true);
            }
        }
        // Each command counts on its own, as Valkey's call() does.
        let t = Instant::now();
        let ns = t.duration_since(t_prev).as_nanos() as u64;
        let us = ns / 1000;
        ctx.srv.record_latency(idx, ns, 1);
        let st = &mut ctx.srv.stats.commands[idx];
        st.calls += 1;
        st.usec += us;
        t_prev = t;
        let (srv, sess) = (&mut *ctx.srv, &*ctx.session);
        crate::observe::after_call(srv, sess, idx, argv, false, Some(us), None, ctx.now_ms);
        ctx.srv.stats.total_commands_processed += 1;
        ctx.session.commands_processed += 1;
        let out = &ctx.reply.out[start..];
        if out.first() == Some(&b'-') {
            ctx.srv.stats.commands[idx].failed_calls += 1;
            let end = out.iter().position(|&b| b == b'\r').unwrap_or(out.len());
            let text = String::from_utf8_lossy(&out[1..end]).into_owned();
            ctx.srv.stats.record_error(&text);
        }
    }
    ctx.srv.thaw_time(time_before);
    ctx.session.in_exec = false;
}
