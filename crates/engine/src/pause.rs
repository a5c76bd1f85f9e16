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
//! two deadlines, and a FAILOVER pauses writes for its own purpose, which
//! CLIENT UNPAUSE does not end; while paused, keys are neither expired (a key past its
//! time reads as missing but stays, so nothing is propagated) nor
//! evicted. The primary's stream on a replica and AOF replay never wait.

use crate::batch::ArgvRef;
use crate::command::flags::{MAY_REPLICATE, WRITE};
use crate::server::Server;
use crate::session::Session;
use crate::{ClientId, Event};

/// Why writes (or every command) wait: CLIENT PAUSE, FAILOVER, or both
/// (Valkey's pause purposes; what waits is the union of what each asks).
pub struct Pause {
    /// CLIENT PAUSE: Unix ms when it ends by itself, and ALL (every
    /// command) rather than WRITE.
    client: Option<(i64, bool)>,
    /// A FAILOVER is under way: writes wait until it ends.
    failover: bool,
    /// A shutdown waits for its replicas: writes wait.
    shutdown: bool,
    /// Clients holding a command, in the order they were held.
    waiting: Vec<ClientId>,
}

impl Pause {
    /// Every command waits, not only writes.
    pub fn all(&self) -> bool {
        self.client.is_some_and(|(_, all)| all)
    }

    /// When the CLIENT PAUSE ends by itself (a failover's pause has no
    /// deadline).
    pub fn end_ms(&self) -> Option<i64> {
        self.client.map(|(end, _)| end)
    }

    /// When every purpose has ended, for INFO's
    /// `paused_timeout_milliseconds` (a failover's, as Valkey's, is the
    /// end of time).
    pub fn info_end_ms(&self) -> i64 {
        if self.failover || self.shutdown {
            i64::MAX
        } else {
            self.end_ms().unwrap_or(0)
        }
    }

    /// Clients holding a command: counted in INFO `blocked_clients`, as
    /// Valkey's postponed clients are.
    pub fn held_clients(&self) -> usize {
        self.waiting.len()
    }

    /// INFO's `paused_reason`.
    pub fn reason(&self) -> &'static str {
        if self.failover {
            "failover_in_progress"
        } else if self.shutdown {
            "shutdown_in_progress"
        } else {
            "client_pause"
        }
    }
}

/// Does the pause hold this command (table entry `i`) of `sess`?
pub fn holds(srv: &Server, sess: &Session, i: usize, argv: ArgvRef<'_>) -> bool {
    let Some(p) = srv.pause.as_deref() else {
        return false;
    };
    if sess.id == crate::replication::PRIMARY_CLIENT || srv.aof.replaying {
        return false;
    }
    if p.all() {
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
    let p = pause_for(srv);
    p.client = Some(match p.client {
        Some((end, _)) => (end.max(end_ms), all),
        None => (end_ms, all),
    });
}

/// FAILOVER: writes wait until [`end_failover`].
pub fn start_failover(srv: &mut Server) {
    pause_for(srv).failover = true;
}

/// A shutdown waits for its replicas: writes wait until [`end_shutdown`].
pub fn start_shutdown(srv: &mut Server) {
    pause_for(srv).shutdown = true;
}

/// The pause, started if there was none.
fn pause_for(srv: &mut Server) -> &mut Pause {
    if srv.pause.is_none() {
        srv.pause = Some(Box::new(Pause {
            client: None,
            failover: false,
            shutdown: false,
            waiting: Vec::new(),
        }));
        crate::expiry_mode::apply(srv);
    }
    srv.pause.as_deref_mut().expect("just made")
}

/// CLIENT UNPAUSE, or the deadline passed.
pub fn end(srv: &mut Server) {
    if let Some(p) = srv.pause.as_deref_mut() {
        p.client = None;
    }
    release(srv);
}

/// The failover ended (or was aborted).
pub fn end_failover(srv: &mut Server) {
    if let Some(p) = srv.pause.as_deref_mut() {
        p.failover = false;
    }
    release(srv);
}

/// The shutdown was cancelled.
pub fn end_shutdown(srv: &mut Server) {
    if let Some(p) = srv.pause.as_deref_mut() {
        p.shutdown = false;
    }
    release(srv);
}

/// Every held client runs again (one held by what still pauses is held
/// again); with no purpose left, the pause is over.
fn release(srv: &mut Server) {
    let Some(p) = srv.pause.as_deref_mut() else {
        return;
    };
    let waiting = std::mem::take(&mut p.waiting);
    if p.client.is_none() && !p.failover && !p.shutdown {
        srv.pause = None;
        crate::expiry_mode::apply(srv);
    }
    for id in waiting {
        if let Some(s) = srv.clients.get_mut(id) {
            s.paused = false;
            srv.events.push(Event::Unblocked { client: id });
        }
    }
}

/// Cron and every loop iteration: end CLIENT PAUSE at its deadline.
pub fn check_deadline(srv: &mut Server, now_ms: i64) {
    if srv
        .pause
        .as_deref()
        .and_then(Pause::end_ms)
        .is_some_and(|end| now_ms >= end)
    {
        end(srv);
    }
}

/// A held client disconnected.
pub fn forget(srv: &mut Server, id: ClientId) {
    if let Some(p) = srv.pause.as_deref_mut() {
        p.waiting.retain(|&c| c != id);
    }
}
