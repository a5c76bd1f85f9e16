//! WAIT and WAITAOF: a client blocks until enough replicas (and, for
//! WAITAOF, the local AOF) have its writes.
//!
//! A client's writes end at its `woff` (an offset of the effects stream).
//! A replica has them once its `REPLCONF ACK` reaches `woff` plus the
//! replication shift (WAIT), or its `FACK` — the offset its own AOF has
//! fsynced — does (WAITAOF); the local AOF once its fsynced offset
//! reaches `woff`. Blocked clients are looked at again whenever an ACK
//! wakes the engine and, while one waits for the local fsync, every few
//! milliseconds ([`poll_interval`]).

use super::replication_offset;
use crate::ClientId;
use crate::blocking::{OnTimeout, Unblock};
use crate::command::Ctx;
use crate::server::Server;

/// One blocked WAIT or WAITAOF.
pub struct Waiter {
    client: ClientId,
    /// What it waits for.
    target: AckTarget,
    /// Replicas wanted.
    replicas: usize,
    /// WAITAOF: the local AOF is wanted too.
    local: bool,
}

/// What a WAIT or WAITAOF counts, fixed when it is called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckTarget {
    /// WAIT: replicas whose ACK reached this replication offset.
    Replicas { offset: u64 },
    /// WAITAOF: the local AOF fsynced up to `woff` (a stream offset),
    /// and replicas whose FACK reached `offset` (the same point as a
    /// replication offset).
    Aof { woff: u64, offset: u64 },
}

impl AckTarget {
    /// The reply: WAIT's count, or WAITAOF's `[local, replicas]`.
    pub fn counts(self, srv: &Server) -> (usize, usize) {
        match self {
            AckTarget::Replicas { offset } => (0, acked(srv, offset)),
            AckTarget::Aof { woff, offset } => (local_fsynced(srv, woff), aof_acked(srv, offset)),
        }
    }
}

/// WAIT's error on a replica (Valkey's words).
const WAIT_ON_REPLICA: &str = "ERR WAIT cannot be used with replica instances. Please also note that if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.";
const WAITAOF_ON_REPLICA: &str = "ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated.";
const WAITAOF_NO_AOF: &str =
    "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.";

/// WAIT numreplicas timeout: `Ok(Some(n))` to reply now, `Ok(None)` when
/// the client blocked (its reply comes from [`serve_waits`] or its
/// timeout).
pub fn wait(
    ctx: &mut Ctx<'_>,
    numreplicas: usize,
    deadline_ms: Option<i64>,
) -> Result<Option<usize>, String> {
    if ctx.srv.repl.is_replica() {
        return Err(WAIT_ON_REPLICA.into());
    }
    let offset = replication_offset(ctx.srv, ctx.session.woff);
    let n = acked(ctx.srv, offset);
    if n >= numreplicas || ctx.session.in_exec {
        return Ok(Some(n));
    }
    block(
        ctx,
        AckTarget::Replicas { offset },
        numreplicas,
        false,
        deadline_ms,
    );
    Ok(None)
}

/// WAITAOF numlocal numreplicas timeout: `Ok(Some([local, replicas]))` to
/// reply now, `Ok(None)` when the client blocked.
pub fn wait_aof(
    ctx: &mut Ctx<'_>,
    numlocal: bool,
    numreplicas: usize,
    deadline_ms: Option<i64>,
) -> Result<Option<(usize, usize)>, String> {
    if ctx.srv.repl.is_replica() {
        return Err(WAITAOF_ON_REPLICA.into());
    }
    if numlocal && !ctx.srv.config.appendonly {
        return Err(WAITAOF_NO_AOF.into());
    }
    let woff = ctx.session.woff;
    let target = AckTarget::Aof {
        woff,
        offset: replication_offset(ctx.srv, woff),
    };
    let (local, replicas) = target.counts(ctx.srv);
    if (replicas >= numreplicas && local >= usize::from(numlocal)) || ctx.session.in_exec {
        return Ok(Some((local, replicas)));
    }
    block(ctx, target, numreplicas, numlocal, deadline_ms);
    Ok(None)
}

fn block(
    ctx: &mut Ctx<'_>,
    target: AckTarget,
    replicas: usize,
    local: bool,
    deadline_ms: Option<i64>,
) {
    let feeds = &mut ctx.srv.repl.feeds;
    feeds.waits.push(Waiter {
        client: ctx.session.id,
        target,
        replicas,
        local,
    });
    if !feeds.getack_sent {
        // Every replica answers a GETACK at once instead of within a second.
        feeds.getack_sent = true;
        ctx.srv
            .effects
            .emit_anywhere(&[b"REPLCONF", b"GETACK", b"*"]);
    }
    ctx.block(&[], deadline_ms, OnTimeout::Acks(target));
}

/// Reply to the WAITs and WAITAOFs that have what they wait for.
pub fn serve_waits(srv: &mut Server) {
    srv.repl.feeds.getack_sent = false;
    if srv.repl.feeds.waits.is_empty() {
        return;
    }
    let waits = std::mem::take(&mut srv.repl.feeds.waits);
    for w in waits {
        let blocked = srv
            .clients
            .get(w.client)
            .is_some_and(|s| s.blocked.is_some());
        if !blocked {
            // Timed out, unblocked or gone meanwhile.
            continue;
        }
        let (local, replicas) = w.target.counts(srv);
        if replicas >= w.replicas && local >= usize::from(w.local) {
            crate::blocking::unblock_with(srv, w.client, Unblock::Counts);
        } else {
            srv.repl.feeds.waits.push(w);
        }
    }
}

/// How soon blocked clients should be looked at again without an ACK: a
/// WAITAOF waiting for the local fsync, which wakes nobody.
pub fn poll_interval(srv: &Server) -> Option<std::time::Duration> {
    srv.repl
        .feeds
        .waits
        .iter()
        .any(|w| w.local)
        .then(|| std::time::Duration::from_millis(10))
}

/// WAIT's count: replicas whose ACK reached `offset` (Valkey's count).
pub fn acked(srv: &Server, offset: u64) -> usize {
    online_feeds(srv).filter(|f| f.ack().0 >= offset).count()
}

/// WAITAOF's count: replicas whose FACK reached `offset`.
fn aof_acked(srv: &Server, offset: u64) -> usize {
    online_feeds(srv).filter(|f| f.aof_ack() >= offset).count()
}

fn online_feeds(srv: &Server) -> impl Iterator<Item = &dyn super::primary::ReplicaFeed> {
    srv.repl
        .feeds
        .replicas
        .iter()
        .filter_map(|r| r.feed.as_deref())
        .filter(|f| f.online())
}

/// 1 if the local AOF has fsynced the stream up to `woff`.
fn local_fsynced(srv: &Server, woff: u64) -> usize {
    let fsynced = srv.config.appendonly
        && srv
            .aof
            .log
            .as_ref()
            .is_some_and(|log| log.fsynced() >= woff);
    usize::from(fsynced)
}
