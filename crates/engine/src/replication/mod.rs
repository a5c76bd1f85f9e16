//! Replication as the engine sees it. Both sides keep their sockets on
//! other threads (`ringkv-repl`) and meet the engine through traits:
//!
//! * [`replica`]: this server follows a primary — a link thread hands
//!   over the primary's RDB file and its stream as whole commands, which
//!   run here as the primary's client.
//! * [`failover`]: FAILOVER, this primary handing over to a replica.
//! * [`primary`]: replicas follow this server — PSYNC hands the replica's
//!   connection to a feed that sends the RDB of a fork-less snapshot,
//!   then the write-effects stream, which the backlog (a reader
//!   of the same refcounted blocks the AOF reads) keeps for partial
//!   resyncs.
//!
//! Offsets are Valkey's replication offsets. On a replica, bytes of the
//! primary's stream applied; on a primary, bytes of the effects stream
//! plus a fixed shift, so that a replica promoted by REPLICAOF NO ONE goes
//! on counting from where its primary's stream left it.
//!
//! A replica feeds replicas of its own (chained replication) with the
//! same machinery: its effects stream is in relay mode, holding exactly
//! the bytes of its primary's stream it applied, so the shift is fixed
//! there too and its replicas see its primary's id, offsets and bytes.

pub mod failover;
mod fanout;
pub mod primary;
pub mod replica;
pub mod wait;

pub use primary::{NOMASTERLINK_ERR, ReplicaHello};
pub use replica::*;

/// Bytes replication moved: read from our primaries, and to and from our
/// replicas.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReplTraffic {
    pub from_primary: u64,
    pub replicas: primary::Traffic,
}

/// Replication state and INFO replication's figures.
pub struct Replication {
    pub links: Option<Box<dyn Links>>,
    /// The primary side: the replicas we feed, the backlog.
    pub feeds: primary::Feeds,
    /// How a link wakes the engine's thread.
    pub wake: std::sync::Arc<crate::wake::Wake>,
    pub primary: Option<Primary>,
    /// Our replication id: the primary's once synced from it.
    pub replid: String,
    pub replid2: String,
    /// A replica's offset: bytes of its primary's stream applied
    /// (master_repl_offset); as a primary, see [`master_offset`].
    pub offset: u64,
    /// As a primary: master_repl_offset minus the effects stream's offset.
    pub shift: i64,
    /// Where `replid2` stops being valid (-1: none).
    pub second_offset: i64,
    /// A FAILOVER under way (as the primary handing over).
    pub failover: failover::Failover,
    /// What a `swapdb` diskless load keeps aside while it runs.
    pub kept: Option<replica::KeptHistory>,
    /// [`Replication::traffic`]'s totals at the last CONFIG RESETSTAT.
    traffic_at_reset: ReplTraffic,
}

impl Replication {
    pub fn new(run_id: &str) -> Replication {
        Replication {
            links: None,
            feeds: primary::Feeds::default(),
            wake: Default::default(),
            primary: None,
            replid: run_id.to_string(),
            replid2: "0".repeat(40),
            offset: 0,
            shift: 0,
            second_offset: -1,
            failover: failover::Failover::default(),
            kept: None,
            traffic_at_reset: ReplTraffic::default(),
        }
    }

    pub fn is_replica(&self) -> bool {
        self.primary.is_some()
    }

    /// A new replication id and no previous one (DEBUG CHANGE-REPL-ID,
    /// Valkey's changeReplicationId and clearReplicationId2): no replica
    /// can continue this history by PSYNC any more.
    pub fn change_id(&mut self) {
        self.replid = crate::server::new_replid();
        self.replid2 = "0".repeat(40);
        self.second_offset = -1;
    }

    /// What replication moved since start-up or CONFIG RESETSTAT (INFO
    /// stats and its rates).
    pub fn traffic(&self) -> ReplTraffic {
        let (now, base) = (self.traffic_since_start(), self.traffic_at_reset);
        ReplTraffic {
            from_primary: now.from_primary.saturating_sub(base.from_primary),
            replicas: now.replicas.since(base.replicas),
        }
    }

    fn traffic_since_start(&self) -> ReplTraffic {
        ReplTraffic {
            from_primary: self.links.as_ref().map_or(0, |l| l.bytes_read()),
            replicas: self
                .feeds
                .senders
                .as_ref()
                .map(|s| s.traffic())
                .unwrap_or_default(),
        }
    }

    /// CONFIG RESETSTAT: the sync counters and traffic totals restart.
    pub fn reset_stats(&mut self) {
        self.traffic_at_reset = self.traffic_since_start();
        let f = &mut self.feeds;
        (f.sync_full, f.sync_partial_ok, f.sync_partial_err) = (0, 0, 0);
    }

    /// Up: connected and streaming (INFO `master_link_status:up`).
    pub fn link_up(&self) -> bool {
        self.primary
            .as_ref()
            .is_some_and(|p| p.state == LinkState::Connected && !p.loading)
    }

    /// Events from the link are waiting for [`background_step`].
    pub fn ready(&self) -> bool {
        self.primary
            .as_ref()
            .is_some_and(|p| !p.loading && p.link.as_ref().is_some_and(|l| l.ready()))
    }
}

/// INFO's `master_repl_offset`: a replica's applied offset, or a
/// primary's stream position.
pub fn master_offset(srv: &crate::server::Server) -> u64 {
    if srv.repl.is_replica() {
        srv.repl.offset
    } else {
        replication_offset(srv, srv.effects.offset())
    }
}

/// An offset of the effects stream as a replication offset (the fixed
/// shift; see the module docs).
pub fn replication_offset(srv: &crate::server::Server, stream_offset: u64) -> u64 {
    (stream_offset as i64 + srv.repl.shift).max(0) as u64
}

/// What an RDB file loaded at start-up says about the stream it was cut
/// from (Valkey 7's rule). A replica goes on from there: its next PSYNC
/// asks for the bytes after the file. A primary keeps it as history under
/// the old id (`replid2`), with a backlog that starts at the file's
/// offset, so replicas that were in sync with it continue.
pub fn restore_saved(srv: &mut crate::server::Server, saved: crate::persist::SavedReplication) {
    if srv.repl.is_replica() {
        srv.repl.replid = saved.replid;
        srv.repl.offset = saved.offset;
        if let Some(s) = srv.clients.get_mut(PRIMARY_CLIENT) {
            s.db = saved.stream_db.max(0) as usize;
        }
        replica::sync_shift(srv);
        return;
    }
    let stream = srv.effects.offset() as i64;
    let r = &mut srv.repl;
    r.replid2 = saved.replid;
    r.second_offset = saved.offset as i64 + 1;
    r.replid = crate::server::new_replid();
    r.shift = saved.offset as i64 - stream;
    primary::ensure_backlog(srv);
}

/// The database the primary's stream is in (`repl-stream-db` of the full
/// sync's file; -1: unknown, the stream will say).
pub fn set_stream_db(srv: &mut crate::server::Server, db: i64) {
    if let Some(s) = srv.clients.get_mut(PRIMARY_CLIENT)
        && db >= 0
        && (db as usize) < srv.keyspace.dbs.len()
    {
        s.db = db as usize;
    }
}

/// The AUX fields a snapshot carries about the stream, at its instant:
/// (repl-stream-db, repl-id, repl-offset), when there is a stream to
/// continue (a replica, or a primary with a backlog).
pub fn aux_fields(srv: &crate::server::Server) -> Option<(i64, String, u64)> {
    let db = if srv.repl.is_replica() {
        srv.clients.get(PRIMARY_CLIENT).map_or(-1, |s| s.db as i64)
    } else if srv.repl.feeds.backlog.is_some() {
        srv.effects.stream_db().map_or(-1, |d| d as i64)
    } else {
        return None;
    };
    Some((db, srv.repl.replid.clone(), master_offset(srv)))
}
