//! CLIENT PAUSE / UNPAUSE: clients' commands wait, they do not fail.
//!
//! ```text
//!   CLIENT PAUSE ms WRITE ── writes (and may-replicate commands, scripts
//!                            that may write, EXEC of such) wait
//!   CLIENT PAUSE ms ALL   ── every command of every client waits
//!   a held command        ── not run, not consumed: the client is reported
//!                            blocked before it (Job::blocked), so the IO
//!                            layer keeps it and what follows
//!   UNPAUSE / deadline    ── each waiting client gets Event::Unblocked and
//!                            its commands run again from the held one
//! ```
//!
//! As in Valkey a new pause replaces the mode and keeps the later of the
//! two deadlines; while paused, keys are neither expired (a key past its
//! time reads as missing but stays, so nothing is propagated) nor
//! evicted. The primary's stream on a replica and AOF replay never wait.

use crate::batch::ArgvRef;
use crate::command::flags::{MAY_REPLICATE, WRITE};
use crate::server::Server;
use crate::session::Session;
use crate::{ClientId, Event};

pub struct Pause {
    /// Unix ms when the pause ends by itself.
    pub end_ms: i64,
    /// ALL (every command) rather than WRITE.
    pub all: bool,
    /// Clients holding a command, in the order they were held.
    waiting: Vec<ClientId>,
}

/// Does the pause hold this command (table entry `i`) of `sess`?
pub fn holds(srv: &Server, sess: &Session, i: usize, argv: ArgvRef<'_>) -> bool {
    let Some(p) = srv.pause.as_deref() else {
        return false;
    };
    if sess.id == crate::replication::PRIMARY_CLIENT || srv.aof.replaying {
        return false;
    }
    if p.all {
        return true;
    }
    let e = &crate::table::table().entries[i];
    if e.spec.flags & (WRITE | MAY_REPLICATE) != 0 {
        return true;
    }
    match e.fullname.as_str() {
        "exec" => sess.multi.as_deref().is_some_and(|m| {
            m.any_flag(WRITE | MAY_REPLICATE)
                || m.iter().any(|(q, qargv)| {
                    let name = crate::table::table().entries[q].fullname.as_str();
                    script_may_write(srv, name, qargv)
                })
        }),
        name => script_may_write(srv, name, argv),
    }
}

/// Scripts count as writes unless their flags say `no-writes`; without
/// flags (no shebang, an unknown script or function) EVAL and FCALL count
/// as writes and their `_RO` forms do not — what Valkey's command flags
/// for scripts come to.
fn script_may_write(srv: &Server, name: &str, argv: ArgvRef<'_>) -> bool {
    let (ro, declared) = match name {
        "eval" | "eval_ro" => (
            name == "eval_ro",
            script::parse_shebang(argv.get(1)).ok().map(|(f, _)| f),
        ),
        "evalsha" | "evalsha_ro" => (
            name == "evalsha_ro",
            srv.scripts
                .as_deref()
                .and_then(|s| s.get(argv.get(1)))
                .map(|s| s.flags),
        ),
        "fcall" | "fcall_ro" => (
            name == "fcall_ro",
            srv.functions
                .as_deref()
                .and_then(|f| f.get(&String::from_utf8_lossy(argv.get(1))))
                .map(|f| f.flags),
        ),
        _ => return false,
    };
    match declared {
        Some(f) if f & script::flags::EVAL_COMPAT_MODE == 0 => f & script::flags::NO_WRITES == 0,
        _ => !ro,
    }
}

/// Hold `sess` until the pause ends.
pub fn postpone(srv: &mut Server, sess: &mut Session) {
    sess.paused = true;
    if let Some(p) = srv.pause.as_deref_mut() {
        p.waiting.push(sess.id);
    }
}

/// CLIENT PAUSE.
pub fn start(srv: &mut Server, end_ms: i64, all: bool) {
    match srv.pause.as_deref_mut() {
        Some(p) => {
            p.all = all;
            p.end_ms = p.end_ms.max(end_ms);
        }
        None => {
            srv.pause = Some(Box::new(Pause {
                end_ms,
                all,
                waiting: Vec::new(),
            }));
            set_expiry_paused(srv, true);
        }
    }
}

/// CLIENT UNPAUSE, or the deadline passed: release every held client.
pub fn end(srv: &mut Server) {
    let Some(p) = srv.pause.take() else {
        return;
    };
    set_expiry_paused(srv, false);
    for id in p.waiting {
        if let Some(s) = srv.clients.get_mut(id) {
            s.paused = false;
            srv.events.push(Event::Unblocked { client: id });
        }
    }
}

/// Cron and every loop iteration: end the pause at its deadline.
pub fn check_deadline(srv: &mut Server, now_ms: i64) {
    if srv.pause.as_deref().is_some_and(|p| now_ms >= p.end_ms) {
        end(srv);
    }
}

/// A held client disconnected.
pub fn forget(srv: &mut Server, id: ClientId) {
    if let Some(p) = srv.pause.as_deref_mut() {
        p.waiting.retain(|&c| c != id);
    }
}

/// While paused nothing is expired; a replica keeps its own rule (keys
/// past their time hidden, removed only by its primary's DELs).
fn set_expiry_paused(srv: &mut Server, paused: bool) {
    let replica = srv.repl.is_replica();
    for db in &mut srv.keyspace.dbs {
        db.expiry_paused = paused || replica;
        db.expiry_hidden = paused || replica;
    }
}
