//! SHUTDOWN and the stop signals: Valkey's shutdown sequence.
//!
//! ```text
//!   SHUTDOWN / SIGTERM ── no replicas, all caught up, NOW, or
//!          │              shutdown-timeout 0 ─────────────► finish
//!          ▼
//!   waiting: writes pause (paused_reason:shutdown_in_progress), the
//!   replicas get a GETACK, a SHUTDOWN client blocks
//!          │
//!          ├─ every replica has ACKed the whole stream, or the timeout ─► finish
//!          └─ SHUTDOWN ABORT ─► cancelled: the pause ends, blocked
//!                               SHUTDOWNs get an error
//!
//!   finish: lagging replicas logged, then the final steps
//!   (snapshot::prepare_shutdown: AOF fsync, the last save); if they fail
//!   the shutdown is cancelled as above and the server runs on.
//! ```
//!
//! Waiting is what keeps a planned restart from losing writes a replica
//! has not received yet: the replica that takes over has them all.

use crate::blocking::Unblock;
use crate::replication::primary::Replica;
use crate::server::Server;
use crate::{ClientId, Event, log};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// A shutdown waiting for its replicas.
pub struct Pending {
    deadline_ms: i64,
    /// The stream's range holding the GETACK sent to the replicas.
    getack: Range<u64>,
    how: How,
    /// SHUTDOWN clients blocked until it ends.
    clients: Vec<ClientId>,
}

/// What SHUTDOWN's arguments (or a signal) ask for.
#[derive(Clone, Copy, Debug, Default)]
pub struct How {
    /// SAVE (`Some(true)`) or NOSAVE; `None`: save if save points are set.
    pub save: Option<bool>,
    /// Exit even if the final save fails.
    pub force: bool,
    /// Do not wait for lagging replicas.
    pub now: bool,
}

pub enum Outcome {
    /// The server is stopping (`Event::Shutdown` is out).
    Stopping,
    /// Waiting for replicas; a SHUTDOWN client stays blocked.
    Waiting,
    /// The final steps failed: the server runs on.
    Failed,
}

/// The last stop signal, for `shutdown-on-sigint` / `shutdown-on-sigterm`
/// (Valkey's `last_sig_received`).
static LAST_SIGNAL: AtomicI32 = AtomicI32::new(0);

/// A stop signal's shutdown is asked for or under way (Valkey's
/// `shutdown_asap`): set by the signal, cleared when that shutdown is
/// cancelled or fails and the server runs on.
static SIGNALLED: AtomicBool = AtomicBool::new(false);

/// Called from the binary's SIGINT/SIGTERM handler (atomics only, which
/// are async-signal-safe). True for a SIGINT that comes while an earlier
/// signal's shutdown is still under way: the caller exits at once, as
/// Valkey does.
pub fn note_signal(sig: i32) -> bool {
    let again = SIGNALLED.swap(true, Ordering::Relaxed);
    LAST_SIGNAL.store(sig, Ordering::Relaxed);
    again && sig == libc::SIGINT
}

/// What the last signal's `shutdown-on-*` directive asks for (`default`:
/// SHUTDOWN without arguments).
pub fn how_for_signal(srv: &Server) -> How {
    let directive = match LAST_SIGNAL.swap(0, Ordering::Relaxed) {
        libc::SIGINT => "shutdown-on-sigint",
        libc::SIGTERM => "shutdown-on-sigterm",
        _ => return How::default(),
    };
    let flags = srv.config.get(directive).unwrap_or_default();
    let mut how = How::default();
    for f in flags.split(' ') {
        match f {
            "save" => how.save = Some(true),
            "nosave" => how.save = Some(false),
            "now" => how.now = true,
            "force" => how.force = true,
            _ => {}
        }
    }
    how
}

/// What a SHUTDOWN gets when the server does not stop after all.
pub const FAILED_REPLY: &str = "ERR Errors trying to SHUTDOWN. Check logs.";

/// Start shutting down, for `client` (SHUTDOWN) or a signal (`None`). A
/// shutdown already waiting takes the new client along.
pub fn begin(srv: &mut Server, now_ms: i64, how: How, client: Option<ClientId>) -> Outcome {
    if let Some(p) = srv.shutdown.as_deref_mut() {
        p.clients.extend(client);
        return Outcome::Waiting;
    }
    crate::supervisor::stopping();
    if !how.now && srv.config.shutdown_timeout_s > 0 && !replicas_caught_up(srv, None) {
        let before = crate::replication::master_offset(srv);
        if !srv.repl.failover.active() {
            srv.effects.emit_anywhere(&[b"REPLCONF", b"GETACK", b"*"]);
        }
        let getack = before..crate::replication::master_offset(srv);
        crate::pause::start_shutdown(srv);
        srv.shutdown = Some(Box::new(Pending {
            deadline_ms: now_ms.saturating_add(srv.config.shutdown_timeout_s as i64 * 1000),
            getack,
            how,
            clients: client.into_iter().collect(),
        }));
        log::notice("Waiting for replicas before shutting down.");
        return Outcome::Waiting;
    }
    if finish(srv, now_ms, how, None) {
        Outcome::Stopping
    } else {
        SIGNALLED.store(false, Ordering::Relaxed);
        Outcome::Failed
    }
}

/// Every loop iteration (an ACK wakes it): finish a waiting shutdown once
/// its replicas have caught up or its time is out.
pub fn step(srv: &mut Server, now_ms: i64) {
    let Some(p) = srv.shutdown.as_deref() else {
        return;
    };
    let getack = Some(p.getack.clone());
    if now_ms < p.deadline_ms && !replicas_caught_up(srv, getack.clone()) {
        return;
    }
    let how = p.how;
    if !finish(srv, now_ms, how, getack) {
        log::warning("Errors trying to shut down the server. Check the logs for more information.");
        cancel(srv);
    }
}

/// SHUTDOWN ABORT: false if no shutdown is waiting.
pub fn abort(srv: &mut Server) -> bool {
    if srv.shutdown.is_none() {
        return false;
    }
    cancel(srv);
    log::notice("Shutdown manually aborted.");
    true
}

fn cancel(srv: &mut Server) {
    SIGNALLED.store(false, Ordering::Relaxed);
    let Some(p) = srv.shutdown.take() else {
        return;
    };
    crate::pause::end_shutdown(srv);
    for id in p.clients {
        crate::blocking::unblock_with(srv, id, Unblock::Error(FAILED_REPLY));
    }
}

/// The final steps; true if the server is now stopping.
fn finish(srv: &mut Server, now_ms: i64, how: How, getack: Option<Range<u64>>) -> bool {
    log_lagging_replicas(srv, now_ms, caught_up_at(srv, getack));
    // A half-loaded dataset is never saved: the save would replace the
    // file being loaded (or the last good one) with part of it. Valkey
    // forces NOSAVE while loading too, even over SHUTDOWN SAVE.
    let save = if srv.persist.loading_in_place() {
        Some(false)
    } else {
        how.save
    };
    if !crate::snapshot::prepare_shutdown(srv, now_ms, save, how.force) {
        return false;
    }
    // Blocked SHUTDOWN clients are closed with everyone else.
    srv.shutdown = None;
    srv.shutting_down = true;
    srv.events.push(Event::Shutdown);
    true
}

/// Valkey's `isReadyToShutdown`: every replica has ACKed everything the
/// stream holds (one still syncing has not).
fn replicas_caught_up(srv: &Server, getack: Option<Range<u64>>) -> bool {
    let enough = caught_up_at(srv, getack);
    srv.repl.feeds.replicas.iter().all(|r| acked(r) >= enough)
}

/// The ACK that says a replica has the whole stream. A replica answers a
/// GETACK with the offset before it, so when the stream ends with the
/// `getack` we sent, an ACK of its start is enough (Valkey waits for the
/// next periodic ACK instead, up to a second later).
fn caught_up_at(srv: &Server, getack: Option<Range<u64>>) -> u64 {
    let ours = crate::replication::master_offset(srv);
    match getack {
        Some(g) if g.end == ours => g.start,
        _ => ours,
    }
}

fn acked(r: &Replica) -> u64 {
    r.feed.as_ref().map_or(0, |f| f.ack().0)
}

fn log_lagging_replicas(srv: &Server, now_ms: i64, enough: u64) {
    let replicas = &srv.repl.feeds.replicas;
    if replicas.is_empty() {
        return;
    }
    let mut lagging = 0;
    for r in replicas.iter().filter(|r| acked(r) < enough) {
        lagging += 1;
        let lag = match &r.feed {
            Some(f) if f.online() => (now_ms - f.ack().1) / 1000,
            _ => 0,
        };
        log::notice(&format!(
            "Lagging replica {}:{} reported offset {} behind master, lag={lag}, state={}.",
            r.ip,
            r.port,
            enough - acked(r),
            r.state()
        ));
    }
    log::notice(&format!(
        "{} of {} replicas are in sync when shutting down.",
        replicas.len() - lagging,
        replicas.len()
    ));
}
