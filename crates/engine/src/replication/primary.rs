//! The primary side: replicas follow this server.
//!
//! ```text
//!  replica: PING, REPLCONF listening-port/capa, PSYNC replid offset
//!        │
//!  psync ─┬─ replid and offset inside the backlog ─► +CONTINUE, stream from there
//!         └─ otherwise (or `?`) ─► wait for the one frozen view and
//!              repl-diskless-sync-delay (or -max-replicas waiting), then
//!              +FULLRESYNC replid offset to every replica waiting, the
//!              RDB of one fork-less snapshot (the BGSAVE capture, into
//!              their feeds' sinks), stream from the snapshot's instant
//!            (repl-diskless-sync no: a BGSAVE of dbfilename shared by
//!             the replicas that can attach, +FULLRESYNC at once, the
//!             file's name to each feed once it is written)
//!  Event::Detach ─► the IO layer lets go of the socket; the replica's
//!                   feed (`ringkv-repl`) owns it from then on
//!  after each batch: feeds woken with the published offset
//!  cron: backlog trimmed to repl-backlog-size, PING every
//!        repl-ping-replica-period, silent replicas dropped after
//!        repl-timeout, the next waiting full sync started
//! ```
//!
//! The backlog is an [`effects::Reader`] kept `repl-backlog-size` bytes
//! behind the stream's end: it holds the stream's refcounted blocks, so
//! the history costs nothing beyond the blocks themselves, and a replica
//! that continues gets a copy of it moved to its offset. Every feed reads
//! the same blocks; nothing is copied per replica.

use super::master_offset;
use crate::ClientId;
use crate::log;
use crate::persist::SnapshotSink;
use crate::server::Server;
use crate::session::Session;
use crate::snapshot::{Progress, RdbContent, Snapshot};

/// What a replica said before PSYNC.
#[derive(Clone, Debug, Default)]
pub struct ReplicaHello {
    pub listening_port: u16,
    /// `capa eof`: it takes an RDB of unknown length, ended by a mark.
    pub capa_eof: bool,
    /// `capa psync2`: it understands `+CONTINUE <replid>`.
    pub capa_psync2: bool,
    /// `REPLCONF version` (Valkey 8 sends it; redis-server 7 does not).
    pub version: Option<String>,
    /// `REPLCONF ip-address` (the replica's `replica-announce-ip`): the
    /// address INFO, ROLE and FAILOVER know it by instead of its peer's.
    pub ip_address: Option<String>,
    /// `REPLCONF rdb-only 1` (`valkey-cli --rdb`): it wants the RDB and
    /// nothing after it; the connection closes once the RDB is sent.
    pub rdb_only: bool,
    /// `REPLCONF rdb-filter-only`: what its RDB holds.
    pub content: RdbContent,
}

impl ReplicaHello {
    /// The RDB version the replica reads: 11 if it says it is a server
    /// of 7.2 or later, else 10 (redis-server 7.0 refuses 11).
    pub fn rdb_version(&self) -> u16 {
        let major_minor = self.version.as_deref().and_then(|v| {
            let mut it = v.split('.').map(|n| n.parse::<u32>().ok());
            Some((it.next()??, it.next().flatten().unwrap_or(0)))
        });
        match major_minor {
            Some(v) if v >= (7, 2) => rdb::RDB_VERSION,
            _ => 10,
        }
    }

    /// Replicas that may share one diskless capture: the same RDB version
    /// and content (Valkey groups by the `rdb-filter-only` request).
    fn sync_group(&self) -> (u16, RdbContent) {
        (self.rdb_version(), self.content)
    }
}

/// How the RDB of a full sync is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RdbFraming {
    /// `$EOF:<40 random chars>\r\n` ... the same 40 chars (diskless).
    EofMark,
    /// `$<len>\r\n` and the bytes of the file a BGSAVE for replicas
    /// wrote (`repl-diskless-sync no`, or a replica without `capa eof`),
    /// named by [`ReplicaFeed::rdb_file`] once the save is done.
    File,
}

/// How a diskless RDB is encoded: the version the replica reads (the
/// sink's captures are made for it; the header must say it), and
/// `rdbcompression` / `rdbchecksum` as set when the sync began (Valkey's
/// diskless sync follows them as its saves do).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RdbFormat {
    pub version: u16,
    pub compress: bool,
    pub checksum: bool,
}

impl RdbFormat {
    fn of(srv: &Server, version: u16) -> RdbFormat {
        RdbFormat {
            version,
            compress: srv.config.rdbcompression,
            checksum: srv.config.rdbchecksum,
        }
    }
}

/// What a feed sends, in order.
pub struct FeedStart {
    /// `+FULLRESYNC id offset\r\n` or `+CONTINUE [id]\r\n`.
    pub preamble: Vec<u8>,
    /// A full sync's RDB comes through [`ReplicaFeed::rdb_sink`].
    pub rdb: Option<RdbFraming>,
    /// How the diskless RDB is encoded.
    pub rdb_format: RdbFormat,
    /// The stream from the point the replica continues at.
    pub stream: effects::Reader,
    /// `REPLCONF rdb-only 1`: the connection ends once the RDB is sent.
    pub rdb_only: bool,
    /// `tcp-tx-zerocopy` and the size from which sends go zero-copy.
    pub zerocopy_min: Option<usize>,
    /// The event loops run io_uring: zero-copy sends use
    /// `IORING_OP_SEND_ZC` (else `MSG_ZEROCOPY`).
    pub io_uring: bool,
    /// Rung on every ACK (a WAIT may be waiting for it).
    pub wake: std::sync::Arc<crate::wake::Wake>,
    /// TCP_NODELAY on the replica's socket: off for a full sync under
    /// `repl-disable-tcp-nodelay` (Valkey's syncCommand), else on.
    pub nodelay: bool,
}

/// One replica's feed (a thread for its full sync; its stream on that
/// thread or an IO thread), as the engine sees it. Dropping it closes
/// the connection (after zero-copy sends in flight have completed).
pub trait ReplicaFeed: Send {
    /// The sink of the full sync's RDB (once).
    fn rdb_sink(&mut self) -> Option<Box<dyn SnapshotSink>>;
    /// [`RdbFraming::File`]: the save is done, send this file (a path
    /// relative to the working directory); or it failed.
    fn rdb_file(&mut self, file: Result<String, String>) {
        let _ = file;
    }
    /// More of the stream is published, up to `offset`.
    fn wake(&mut self, published: u64);
    /// The last `REPLCONF ACK`: the offset the replica reported (Valkey's
    /// count) and when (unix ms; 0 before the first).
    fn ack(&self) -> (u64, i64);
    /// The last `FACK`: the offset up to which the replica's own AOF is
    /// fsynced (0 if it never said: no AOF there).
    fn aof_ack(&self) -> u64 {
        0
    }
    /// The RDB is sent: the replica is online.
    fn online(&self) -> bool;
    /// The full sync's RDB, while it is still being sent.
    fn sending_rdb(&self) -> Option<RdbFraming>;
    /// Named a file by [`ReplicaFeed::rdb_file`], it has not opened it
    /// yet: a new save must not replace it.
    fn opening_file(&self) -> bool {
        false
    }
    /// The stream offset written to the socket so far.
    fn sent(&self) -> u64;
    /// The feed ended (connection lost, write error): why.
    fn gone(&self) -> Option<String>;
    /// Zero-copy counters for INFO.
    fn zerocopy(&self) -> ZeroCopyStats {
        ZeroCopyStats::default()
    }
    /// What its connection moved since the feed took it over.
    fn traffic(&self) -> Traffic {
        Traffic::default()
    }
}

/// Bytes a replication connection moved and the commands read on it: a
/// replica's CLIENT LIST counters, or every feed's (INFO).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub commands: u64,
}

impl Traffic {
    /// What moved after `base` was taken.
    pub fn since(self, base: Traffic) -> Traffic {
        Traffic {
            bytes_in: self.bytes_in.saturating_sub(base.bytes_in),
            bytes_out: self.bytes_out.saturating_sub(base.bytes_out),
            commands: self.commands.saturating_sub(base.commands),
        }
    }
}

/// Zero-copy sends of one feed (summed in INFO stats).
#[derive(Clone, Copy, Debug, Default)]
pub struct ZeroCopyStats {
    pub writes: u64,
    pub bytes: u64,
    pub in_flight: u64,
    /// Completions the kernel flagged as copied after all.
    pub copied: u64,
    pub tracker_bytes: u64,
}

/// Starts feeds (the server's `ringkv-repl`).
pub trait Senders: Send {
    fn feed(&mut self, client: ClientId, start: FeedStart) -> Box<dyn ReplicaFeed>;
    /// What every feed started so far moved, ended ones included.
    fn traffic(&self) -> Traffic {
        Traffic::default()
    }
}

/// One replica.
pub struct Replica {
    pub id: ClientId,
    pub ip: String,
    pub port: u16,
    /// Waiting for the frozen view (INFO `wait_bgsave`); no feed yet.
    pub waiting: Option<ReplicaHello>,
    pub feed: Option<Box<dyn ReplicaFeed>>,
    /// Its feed waits for the disk save it is attached to
    /// ([`Feeds::disk`]): still `wait_bgsave`.
    pub awaiting_file: bool,
    /// Unix ms it became a replica (timeouts before its first ACK).
    pub since_ms: i64,
    /// It came by PSYNC. One that came by SYNC (`valkey-cli --rdb`, old
    /// servers) is sent no `+FULLRESYNC`, sends no ACKs and is never timed
    /// out for their want (Valkey's pre-PSYNC replicas).
    pub psync: bool,
    /// Since when its feed has been behind by more than the soft limit.
    pub soft_since: Option<i64>,
    /// Its CLIENT LIST line.
    pub card: crate::cmd::client::ReplicaCard,
}

impl Replica {
    /// Known by this address (the one it announced, or its peer's).
    pub fn is_at(&self, host: &str, port: u16) -> bool {
        self.ip.eq_ignore_ascii_case(host) && self.port == port
    }

    /// INFO's `state=`, as Valkey names its replica states: a diskless
    /// RDB is `wait_bgsave` until it is all sent (Valkey's child is still
    /// writing it) and then `online` (streaming from the first ACK); a
    /// file is `send_bulk` while it goes.
    pub fn state(&self) -> &'static str {
        match &self.feed {
            None => "wait_bgsave",
            Some(_) if self.awaiting_file => "wait_bgsave",
            Some(f) => match f.sending_rdb() {
                Some(RdbFraming::EofMark) => "wait_bgsave",
                Some(RdbFraming::File) => "send_bulk",
                None => "online",
            },
        }
    }
}

/// The primary side's state.
#[derive(Default)]
pub struct Feeds {
    pub senders: Option<Box<dyn Senders>>,
    /// The backlog: a reader `repl-backlog-size` behind the stream's end.
    pub backlog: Option<effects::Reader>,
    pub replicas: Vec<Replica>,
    /// The diskless full sync being captured, and for which replicas.
    pub snapshot: Option<(Vec<ClientId>, Snapshot)>,
    /// The BGSAVE to disk running for replicas (`repl-diskless-sync
    /// no`): the save itself is `Persist::snapshot`.
    pub disk: Option<DiskSync>,
    /// A file was saved for replicas since the last `rdb-del-sync-files`
    /// removal (Valkey's RDBGeneratedByReplication).
    pub rdb_made_for_sync: bool,
    pub last_ping_ms: i64,
    /// When waiting replicas were last sent a newline.
    pub last_newline_ms: i64,
    pub sync_full: u64,
    pub sync_partial_ok: u64,
    pub sync_partial_err: u64,
    /// Zero-copy counters of feeds that ended.
    pub zerocopy_done: ZeroCopyStats,
    /// Clients blocked in WAIT or WAITAOF.
    pub waits: Vec<super::wait::Waiter>,
    /// A GETACK went into the stream since the last batch ended.
    pub getack_sent: bool,
    /// Online replicas whose last ACK is within `min-replicas-max-lag`
    /// (counted by cron, as Valkey's refreshGoodReplicasCount).
    pub good_replicas: usize,
    /// The stream end the feeds were last woken for ([`published`]).
    pub woken_for: Option<u64>,
    /// Since when no replica is connected (cron's view), for
    /// `repl-backlog-ttl`.
    pub no_replicas_since_ms: Option<i64>,
}

impl Feeds {
    /// What the replicas waiting for their full sync said, in arrival
    /// order.
    fn waiting(&self) -> impl Iterator<Item = &ReplicaHello> {
        self.replicas.iter().filter_map(|r| r.waiting.as_ref())
    }
}

/// `-NOREPLICAS`: `min-replicas-to-write` is not met.
pub const NOREPLICAS_ERR: &str = "NOREPLICAS Not enough good replicas to write.";

/// Writes are refused for want of good replicas.
pub fn too_few_replicas(srv: &Server) -> bool {
    let c = &srv.config;
    c.min_replicas_to_write > 0
        && c.min_replicas_max_lag > 0
        && !srv.repl.is_replica()
        && srv.repl.feeds.good_replicas < c.min_replicas_to_write as usize
}

/// `PSYNC replid offset FAILOVER`: our primary hands over to us. With
/// its replication id (ours, as its replica) we become a primary, and
/// the PSYNC that follows continues it from our history.
pub fn take_over(srv: &mut Server, sess: &Session, replid: &[u8]) -> Result<(), String> {
    let replid = String::from_utf8_lossy(replid);
    log::notice(&format!("Failover request received for replid {replid}."));
    if !srv.repl.is_replica() {
        return Err("ERR PSYNC FAILOVER can't be sent to a master.".into());
    }
    if replid != srv.repl.replid {
        return Err("ERR PSYNC FAILOVER replid must match my replid.".into());
    }
    super::replica::unset_primary(srv);
    let addr = sess.peer.map(|a| a.to_string()).unwrap_or_default();
    log::notice(&format!(
        "PRIMARY MODE enabled (failover request from 'id={} addr={addr}')",
        sess.id.0
    ));
    Ok(())
}

/// Why PSYNC was refused (the reply).
pub const NOMASTERLINK_ERR: &str = "NOMASTERLINK Can't SYNC while not connected with my master";

/// PSYNC replid offset (SYNC: `None`s): a full or partial resync. The
/// reply is written by the replica's feed; the client leaves the event
/// loop.
pub fn psync(
    srv: &mut Server,
    sess: &mut Session,
    replid: Option<&[u8]>,
    offset: Option<i64>,
    replies_unsent: bool,
    now_ms: i64,
) -> Result<(), String> {
    if srv.repl.failover.active() {
        return Err("NOMASTERLINK Can't SYNC while failing over".into());
    }
    // A replica feeds its own replicas its primary's stream (chained
    // replication), once it is in sync with that primary.
    if srv.repl.is_replica() && !srv.repl.link_up() {
        return Err(NOMASTERLINK_ERR.into());
    }
    // The feed's first bytes must be the preamble: a SYNC pipelined behind
    // commands whose replies are still here is refused, as Valkey's.
    if replies_unsent {
        return Err("ERR SYNC and PSYNC are invalid with pending output".into());
    }
    if srv.repl.feeds.senders.is_none() {
        return Err("ERR this server cannot feed replicas (no replication IO)".into());
    }
    if srv.repl.feeds.replicas.iter().any(|r| r.id == sess.id) {
        return Err("ERR Replica already connected".into());
    }
    // A filtered RDB is never a file (it would replace the snapshot), so
    // its replica must take an EOF-marked one.
    if let Some(h) = &sess.replica_hello
        && h.content.is_filtered()
        && !h.capa_eof
    {
        return Err("ERR Filtered replica requires EOF capability".into());
    }
    ensure_backlog(srv);
    let hello = sess.replica_hello.take().map(|b| *b).unwrap_or_default();
    let ip = match &hello.ip_address {
        Some(announced) => announced.clone(),
        None => sess.peer.map(|a| a.ip().to_string()).unwrap_or_default(),
    };
    let port = hello.listening_port;
    let psync = replid.is_some();
    if let (Some(id), Some(off)) = (replid, offset)
        && let Some(stream) = continue_point(srv, id, off)
    {
        srv.repl.feeds.sync_partial_ok += 1;
        let preamble = if hello.capa_psync2 {
            format!("+CONTINUE {}\r\n", srv.repl.replid)
        } else {
            "+CONTINUE\r\n".to_string()
        };
        log::notice(&format!(
            "Partial resynchronization request from {ip}:{port} accepted. Sending {} bytes of backlog starting from offset {off}.",
            master_offset(srv) as i64 + 1 - off
        ));
        let start = FeedStart {
            preamble: preamble.into_bytes(),
            rdb: None,
            rdb_format: RdbFormat::of(srv, rdb::RDB_VERSION),
            stream,
            rdb_only: false,
            zerocopy_min: zerocopy_min(srv),
            io_uring: srv.net.backend == "io_uring",
            wake: srv.repl.wake.clone(),
            nodelay: true,
        };
        let feed = srv
            .repl
            .feeds
            .senders
            .as_mut()
            .expect("checked")
            .feed(sess.id, start);
        srv.repl.feeds.replicas.push(Replica {
            id: sess.id,
            ip,
            port,
            waiting: None,
            feed: Some(feed),
            awaiting_file: false,
            since_ms: now_ms,
            psync,
            soft_since: None,
            card: crate::cmd::client::ReplicaCard::of(sess, now_ms),
        });
        srv.events.push(crate::Event::Detach { client: sess.id });
        return Ok(());
    }
    if replid.is_some_and(|id| id != b"?") {
        srv.repl.feeds.sync_partial_err += 1;
    }
    srv.repl.feeds.sync_full += 1;
    log::notice(&format!(
        "Replica {ip}:{port} asks for synchronization; full resync"
    ));
    let takes_eof = hello.capa_eof;
    srv.repl.feeds.replicas.push(Replica {
        id: sess.id,
        ip,
        port,
        waiting: Some(hello),
        feed: None,
        awaiting_file: false,
        since_ms: now_ms,
        psync,
        soft_since: None,
        card: crate::cmd::client::ReplicaCard::of(sess, now_ms),
    });
    if (!srv.config.repl_diskless_sync || !takes_eof) && srv.persist.snapshot.is_some() {
        // Valkey's syncCommand with a BGSAVE to disk in progress.
        let i = srv.repl.feeds.replicas.len() - 1;
        if can_attach(srv, i) {
            attach_to_disk_save(srv, i);
            log::notice("Waiting for end of BGSAVE for SYNC");
        } else {
            log::notice(
                "Can't attach the replica to the current BGSAVE. Waiting for next BGSAVE for SYNC",
            );
        }
        return Ok(());
    }
    let c = &srv.config;
    if c.repl_diskless_sync && c.repl_diskless_sync_delay_s > 0 && takes_eof {
        log::notice("Delay next BGSAVE for diskless SYNC");
    }
    start_waiting_sync(srv, now_ms);
    Ok(())
}

/// A BGSAVE to disk for replicas: the instant it was cut at, which the
/// stream of every replica attached to it starts from.
pub struct DiskSync {
    /// `dbfilename` when it started (relative to `dir`).
    filename: String,
    /// The stream from the snapshot's instant (it holds those blocks
    /// while the save runs: the attached replicas' output buffer).
    stream: effects::Reader,
    /// `+FULLRESYNC <replid> <offset>`.
    replid: String,
    offset: u64,
    rdb_version: u16,
    /// The capabilities of the replica that started it.
    capa: (bool, bool),
}

/// May replica `i` share the disk save in progress? As Valkey: a replica
/// attached to it is still waiting (its buffer would be copied), the new
/// one has at least its capabilities, and here also reads the file's RDB
/// version (a replica that does not say it is 7.2+ reads only 10: it waits
/// for a save of its own after one made in 11).
fn can_attach(srv: &Server, i: usize) -> bool {
    let feeds = &srv.repl.feeds;
    let (Some(d), Some(hello)) = (feeds.disk.as_ref(), feeds.replicas[i].waiting.as_ref()) else {
        return false;
    };
    feeds.replicas.iter().any(|r| r.awaiting_file)
        && !hello.content.is_filtered()
        && (hello.capa_eof || !d.capa.0)
        && (hello.capa_psync2 || !d.capa.1)
        && hello.rdb_version() >= d.rdb_version
}

/// Replica `i` joins the disk save in progress: `+FULLRESYNC` now, the
/// file once it is written, then the stream from the save's instant.
fn attach_to_disk_save(srv: &mut Server, i: usize) {
    let Some(d) = srv.repl.feeds.disk.as_ref() else {
        return;
    };
    let r = &srv.repl.feeds.replicas[i];
    let waiting = r.waiting.as_ref();
    let start = FeedStart {
        preamble: full_resync_preamble(r, &d.replid, d.offset),
        rdb: Some(RdbFraming::File),
        rdb_format: RdbFormat::of(srv, d.rdb_version),
        stream: d.stream.clone(),
        rdb_only: waiting.is_some_and(|h| h.rdb_only),
        zerocopy_min: zerocopy_min(srv),
        io_uring: srv.net.backend == "io_uring",
        wake: srv.repl.wake.clone(),
        nodelay: full_sync_nodelay(srv),
    };
    let id = srv.repl.feeds.replicas[i].id;
    let Some(senders) = srv.repl.feeds.senders.as_mut() else {
        return;
    };
    let feed = senders.feed(id, start);
    let r = &mut srv.repl.feeds.replicas[i];
    r.waiting = None;
    r.feed = Some(feed);
    r.awaiting_file = true;
    srv.events.push(crate::Event::Detach { client: id });
}

/// `repl-diskless-sync no`: a BGSAVE of `dbfilename` (a real one: INFO
/// persistence and LASTSAVE count it) that every waiting replica reading
/// the same RDB version shares (Valkey's startBgsaveForReplication). A
/// replica that asked for a filtered RDB is not among them.
fn start_disk_sync(srv: &mut Server, now_ms: i64) {
    let feeds = &srv.repl.feeds.replicas;
    if feeds
        .iter()
        .filter_map(|r| r.feed.as_ref())
        .any(|f| f.opening_file())
    {
        // The last save's file is still to be opened: cron comes back.
        return;
    }
    let joins = |h: &ReplicaHello| !h.content.is_filtered();
    let Some(first) = srv.repl.feeds.waiting().find(|h| joins(h)) else {
        return;
    };
    let version = first.rdb_version();
    let capa = (first.capa_eof, first.capa_psync2);
    let joining: Vec<ClientId> = srv
        .repl
        .feeds
        .replicas
        .iter()
        .filter(|r| {
            r.waiting
                .as_ref()
                .is_some_and(|h| joins(h) && h.rdb_version() == version)
        })
        .map(|r| r.id)
        .collect();
    log::notice("Starting BGSAVE for SYNC with target: disk");
    let Ok((sink, filename)) = crate::snapshot::open_background_save(srv, now_ms, version) else {
        log::warning("BGSAVE for replication failed");
        for id in joining {
            drop_replica(srv, id, "BGSAVE failed, replication can't continue");
        }
        return;
    };
    // The instant of the snapshot: everything before it is in the file,
    // everything after in the stream, which starts with a SELECT.
    let at = srv.effects.publish();
    srv.effects.force_select();
    let Some(mut stream) = srv.repl.feeds.backlog.clone() else {
        return;
    };
    stream.skip_to(at);
    crate::snapshot::run_background_save(srv, sink, now_ms, version);
    srv.repl.feeds.rdb_made_for_sync = true;
    srv.repl.feeds.disk = Some(DiskSync {
        filename,
        stream,
        replid: srv.repl.replid.clone(),
        offset: master_offset(srv),
        rdb_version: version,
        capa,
    });
    for id in joining {
        if let Some(i) = srv.repl.feeds.replicas.iter().position(|r| r.id == id) {
            attach_to_disk_save(srv, i);
        }
    }
}

/// The BGSAVE ended (`ok`: its file is in place): the replicas attached
/// to it send the file, or fail their sync and will ask again (Valkey's
/// updateReplicasWaitingBgsave). Then, given the time (not when the save
/// was aborted), the replicas that could not attach get a save of their
/// own.
pub fn disk_save_done(srv: &mut Server, ok: bool, now_ms: Option<i64>) {
    let Some(d) = srv.repl.feeds.disk.take() else {
        return;
    };
    let mut failed = Vec::new();
    for r in &mut srv.repl.feeds.replicas {
        if !r.awaiting_file {
            continue;
        }
        r.awaiting_file = false;
        match r.feed.as_mut() {
            Some(f) if ok => f.rdb_file(Ok(d.filename.clone())),
            Some(f) => {
                f.rdb_file(Err("the BGSAVE failed".into()));
                failed.push(r.id);
            }
            None => {}
        }
    }
    for id in failed {
        log::warning("SYNC failed. BGSAVE child returned an error");
        drop_replica(srv, id, "its BGSAVE failed");
    }
    if let Some(now_ms) = now_ms {
        start_waiting_sync(srv, now_ms);
    }
}

/// `rdb-del-sync-files`: with neither save points nor AOF, the file saved
/// for replicas goes once no replica is still syncing (Valkey's
/// removeRDBUsedToSyncReplicas).
fn remove_sync_file(srv: &mut Server) {
    if !srv.config.rdb_del_sync_files {
        srv.repl.feeds.rdb_made_for_sync = false;
        return;
    }
    let persistence = !srv.config.save_points.is_empty() || srv.config.appendonly;
    if !srv.repl.feeds.rdb_made_for_sync || persistence {
        return;
    }
    let syncing = srv.repl.feeds.replicas.iter().any(|r| {
        r.waiting.is_some() || r.awaiting_file || r.feed.as_ref().is_some_and(|f| !f.online())
    });
    if syncing || srv.persist.snapshot.is_some() {
        return;
    }
    let filename = srv.config.dbfilename.clone();
    let Some(storage) = srv.persist.storage.as_mut() else {
        return;
    };
    if let Ok(true) = storage.remove(&filename) {
        srv.repl.feeds.rdb_made_for_sync = false;
        log::notice("Removing the RDB file used to feed replicas in a persistence-less instance");
    }
}

/// A reader at the replica's `offset` (the first byte it lacks), if the
/// backlog still holds it under the id the replica knows.
fn continue_point(srv: &Server, replid: &[u8], offset: i64) -> Option<effects::Reader> {
    let r = &srv.repl;
    let ours = replid == r.replid.as_bytes();
    let previous = replid == r.replid2.as_bytes() && offset <= r.second_offset;
    if !(ours || previous) {
        return None;
    }
    let pos = offset - 1 - r.shift;
    let backlog = r.feeds.backlog.as_ref()?;
    if pos < backlog.offset() as i64 || pos > srv.effects.offset() as i64 {
        return None;
    }
    let mut reader = backlog.clone();
    reader.skip_to(pos as u64).then_some(reader)
}

/// The backlog starts with the first replica: from then on the stream
/// runs (it may already, for the AOF).
pub(crate) fn ensure_backlog(srv: &mut Server) {
    if srv.repl.feeds.backlog.is_none() {
        let at = srv.effects.offset();
        let reader = srv.effects.attach(at);
        srv.sync_expiry_logging();
        srv.repl.feeds.backlog = Some(reader);
    }
}

fn zerocopy_min(srv: &Server) -> Option<usize> {
    let c = &srv.config;
    c.tcp_tx_zerocopy.then_some(c.tcp_zerocopy_min_write_size)
}

/// [`FeedStart::nodelay`] for a full sync.
fn full_sync_nodelay(srv: &Server) -> bool {
    srv.config.get("repl-disable-tcp-nodelay").as_deref() != Some("yes")
}

/// The one frozen view is free: start the next waiting replicas' sync.
fn start_waiting_sync(srv: &mut Server, now_ms: i64) {
    if srv.repl.feeds.snapshot.is_some()
        || srv.persist.snapshot.is_some()
        || srv.aof.rewrite.is_some()
        || srv.persist.is_loading()
    {
        return;
    }
    let first_filtered = srv
        .repl
        .feeds
        .waiting()
        .next()
        .is_some_and(|h| h.content.is_filtered());
    // Valkey's startBgsaveForReplication: the RDB goes to sockets only if
    // every waiting replica reads an EOF-marked one (its `mincapa`); a
    // filtered one always does.
    let all_take_eof = srv.repl.feeds.waiting().all(|h| h.capa_eof);
    if (!srv.config.repl_diskless_sync || !all_take_eof) && !first_filtered {
        start_disk_sync(srv, now_ms);
        return;
    }
    let Some(((version, content), joining)) = diskless_group(srv, now_ms) else {
        return;
    };
    if srv.repl.feeds.senders.is_none() {
        return;
    }
    // The instant of the snapshot: everything before it is in the RDB,
    // everything after in the stream, which starts with a SELECT.
    let at = srv.effects.publish();
    srv.effects.force_select();
    let Some(mut stream) = srv.repl.feeds.backlog.clone() else {
        return;
    };
    stream.skip_to(at);
    let offset = master_offset(srv);
    let mut sinks = Vec::new();
    let mut ids = Vec::new();
    for i in joining {
        let r = &mut srv.repl.feeds.replicas[i];
        let hello = r.waiting.take().expect("waiting");
        let id = r.id;
        let start = FeedStart {
            preamble: full_resync_preamble(r, &srv.repl.replid, offset),
            rdb: Some(RdbFraming::EofMark),
            rdb_format: RdbFormat::of(srv, version),
            stream: stream.clone(),
            rdb_only: hello.rdb_only,
            zerocopy_min: zerocopy_min(srv),
            io_uring: srv.net.backend == "io_uring",
            wake: srv.repl.wake.clone(),
            nodelay: full_sync_nodelay(srv),
        };
        let senders = srv.repl.feeds.senders.as_mut().expect("checked above");
        let mut feed = senders.feed(id, start);
        let Some(sink) = feed.rdb_sink() else {
            continue;
        };
        srv.repl.feeds.replicas[i].feed = Some(feed);
        sinks.push(sink);
        ids.push(id);
        srv.events.push(crate::Event::Detach { client: id });
    }
    if sinks.is_empty() {
        return;
    }
    let sink = if sinks.len() == 1 {
        sinks.pop().expect("one")
    } else {
        Box::new(super::fanout::FanOutSink::new(sinks))
    };
    let snap = Snapshot::begin_for(srv, sink, now_ms, version, content);
    log::notice(&format!(
        "Starting BGSAVE for SYNC with target: replicas sockets (replica {})",
        ids_text(&ids)
    ));
    srv.repl.feeds.snapshot = Some((ids, snap));
}

/// The RDB version and content and the waiting replicas (indexes) that
/// start a diskless sync together now: those reading the first one's,
/// once the first has waited `repl-diskless-sync-delay` or
/// `repl-diskless-sync-max-replicas` of them wait (Valkey's
/// shouldStartChildReplication). A filtered replica does not wait when
/// syncs go through disk (Valkey's syncCommand starts its capture at
/// once).
fn diskless_group(srv: &Server, now_ms: i64) -> Option<((u16, RdbContent), Vec<usize>)> {
    let first = srv.repl.feeds.waiting().next()?;
    let replicas = &srv.repl.feeds.replicas;
    let key = first.sync_group();
    let group: Vec<usize> = replicas
        .iter()
        .enumerate()
        .filter(|(_, r)| r.waiting.as_ref().is_some_and(|h| h.sync_group() == key))
        .map(|(i, _)| i)
        .collect();
    let c = &srv.config;
    let delay_ms = c.repl_diskless_sync_delay_s.saturating_mul(1000) as i64;
    let longest_wait = group
        .iter()
        .map(|&i| now_ms - replicas[i].since_ms)
        .max()
        .unwrap_or(0);
    let enough =
        c.repl_diskless_sync_max_replicas > 0 && group.len() >= c.repl_diskless_sync_max_replicas;
    let waits = c.repl_diskless_sync && !enough && longest_wait < delay_ms;
    (!waits).then_some((key, group))
}

/// `+FULLRESYNC <replid> <offset>`, which a replica that came by SYNC
/// does not expect (its RDB follows at once).
fn full_resync_preamble(r: &Replica, replid: &str, offset: u64) -> Vec<u8> {
    if r.psync {
        format!("+FULLRESYNC {replid} {offset}\r\n").into_bytes()
    } else {
        Vec::new()
    }
}

fn ids_text(ids: &[ClientId]) -> String {
    ids.iter()
        .map(|id| id.0.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A slice of the running full sync's capture; once the RDB is out, the
/// next waiting replica's.
pub fn background_step(srv: &mut Server, now_ms: i64) -> Progress {
    let Some((_, snap)) = srv.repl.feeds.snapshot.as_mut() else {
        return Progress::Captured;
    };
    let p = snap.step(
        &mut srv.keyspace,
        now_ms,
        Some(std::time::Instant::now() + crate::snapshot::STEP_BUDGET),
    );
    for db in snap.take_detached() {
        srv.lazyfree.free_db(db);
    }
    if p != Progress::Captured {
        return p;
    }
    let Some(outcome) = snap.poll() else {
        return Progress::WriterBehind;
    };
    let (ids, _) = srv.repl.feeds.snapshot.take().expect("running");
    let ids = ids_text(&ids);
    match outcome {
        Ok(n) => log::notice(&format!(
            "Synchronization with replica {ids} succeeded ({n} bytes of RDB)"
        )),
        Err(e) => log::warning(&format!("Synchronization with replica {ids} failed: {e}")),
    }
    start_waiting_sync(srv, now_ms);
    Progress::Captured
}

/// The sync capture is ready for another slice now.
pub fn capture_ready(srv: &Server) -> Option<bool> {
    srv.repl.feeds.snapshot.as_ref().map(|(_, s)| s.ready())
}

/// The full sync in progress ends (`why`): a save needs the frozen view
/// now (SAVE, DEBUG RELOAD), or the databases it views are about to be
/// replaced. Its replica will ask again.
pub fn abort_sync(srv: &mut Server, why: &str) {
    if let Some((ids, snap)) = srv.repl.feeds.snapshot.take() {
        for db in snap.abort(&mut srv.keyspace) {
            srv.lazyfree.free_db(db);
        }
        for id in ids {
            drop_replica(srv, id, why);
        }
    }
}

/// After each batch: the backlog keeps only its size, and the feeds are
/// woken if the stream grew (a batch of reads wakes none: a sleeping feed
/// thread would find nothing to send).
pub fn published(srv: &mut Server, offset: u64) {
    let size = srv.config.repl_backlog_size.max(1);
    if let Some(b) = srv.repl.feeds.backlog.as_mut()
        && offset.saturating_sub(b.offset()) > size
    {
        b.skip_to(offset - size);
    }
    if srv.repl.feeds.woken_for == Some(offset) {
        return;
    }
    srv.repl.feeds.woken_for = Some(offset);
    for r in &mut srv.repl.feeds.replicas {
        if let Some(f) = r.feed.as_mut() {
            f.wake(offset);
        }
    }
}

fn drop_replica(srv: &mut Server, id: ClientId, why: &str) {
    let feeds = &mut srv.repl.feeds;
    if let Some(i) = feeds.replicas.iter().position(|r| r.id == id) {
        let r = feeds.replicas.remove(i);
        if let Some(f) = &r.feed {
            add_zerocopy(&mut feeds.zerocopy_done, f.zerocopy());
        }
        log::notice(&format!(
            "Connection with replica {}:{} lost ({why}).",
            r.ip, r.port
        ));
        if r.feed.is_none() {
            // Still ours in the event loop: close it there.
            srv.events.push(crate::Event::Close {
                client: id,
                flush: false,
            });
        }
    }
}

fn add_zerocopy(sum: &mut ZeroCopyStats, s: ZeroCopyStats) {
    sum.writes += s.writes;
    sum.bytes += s.bytes;
    sum.copied += s.copied;
    sum.in_flight += s.in_flight;
    sum.tracker_bytes += s.tracker_bytes;
}

/// What CLIENT LIST shows of a replica we feed beside its card: the time
/// of its last ACK (unix ms; 0 before the first) and what its connection
/// moved since PSYNC.
#[derive(Clone, Copy, Debug, Default)]
pub struct FeedState {
    pub ack_ms: i64,
    pub traffic: Traffic,
}

/// The CLIENT LIST cards of the replicas we feed: each replica's id, its
/// card and its feed's state.
pub fn replica_cards(
    srv: &Server,
) -> impl Iterator<Item = (ClientId, &crate::cmd::client::ReplicaCard, FeedState)> {
    srv.repl.feeds.replicas.iter().map(|r| {
        let state = r
            .feed
            .as_ref()
            .map_or_else(FeedState::default, |f| FeedState {
                ack_ms: f.ack().1,
                traffic: f.traffic(),
            });
        (r.id, &r.card, state)
    })
}

/// CLIENT KILL of these replicas (ids from [`replica_cards`]).
pub fn kill_replicas(srv: &mut Server, ids: &[ClientId]) {
    for &id in ids {
        drop_replica(srv, id, "killed by a client");
    }
}

/// Zero-copy counters of every feed, live and ended.
pub fn zerocopy_stats(srv: &Server) -> ZeroCopyStats {
    let mut sum = srv.repl.feeds.zerocopy_done;
    sum.in_flight = 0;
    sum.tracker_bytes = 0;
    for f in srv
        .repl
        .feeds
        .replicas
        .iter()
        .filter_map(|r| r.feed.as_ref())
    {
        add_zerocopy(&mut sum, f.zerocopy());
    }
    sum
}

/// Cron: drop dead or silent replicas, keep the backlog at its size, PING.
pub fn cron(srv: &mut Server, now_ms: i64) {
    let timeout_ms = srv.config.repl_timeout_s as i64 * 1000;
    let limit = srv.config.client_output_buffer_limit_replica;
    let end = srv.effects.offset();
    let mut dead = Vec::new();
    for r in &mut srv.repl.feeds.replicas {
        let Some(f) = r.feed.as_ref() else { continue };
        if let Some(why) = f.gone() {
            dead.push((r.id, why));
            continue;
        }
        if f.online() && r.psync {
            let (_, at) = f.ack();
            if now_ms - at.max(r.since_ms) > timeout_ms {
                dead.push((r.id, "timeout".to_string()));
                continue;
            }
        }
        // What the feed has not written yet is held in the stream's
        // blocks for it alone: Valkey's replica output buffer.
        let behind = end.saturating_sub(f.sent());
        let soft = limit.soft > 0 && behind > limit.soft;
        if !soft {
            r.soft_since = None;
        }
        let soft_for = soft.then(|| now_ms - *r.soft_since.get_or_insert(now_ms));
        if (limit.hard > 0 && behind > limit.hard)
            || soft_for.is_some_and(|ms| ms >= limit.soft_seconds as i64 * 1000)
        {
            log::warning(&format!(
                "Client id={} addr={}:{} (replica) scheduled to be closed ASAP for overcoming of output buffer limits.",
                r.id.0, r.ip, r.port
            ));
            dead.push((r.id, "output buffer limit".to_string()));
        }
    }
    for (id, why) in dead {
        drop_replica(srv, id, &why);
    }
    free_backlog_after_ttl(srv, now_ms);
    let period_ms = srv.config.repl_ping_replica_period_s as i64 * 1000;
    // Nothing more goes into the stream once the final save has cut it,
    // nor while a FAILOVER or a shutdown waits for replicas to have all
    // of it.
    // A replica's replicas get its primary's PINGs (in the stream it
    // relays), never its own.
    // The period counts from the first replica's arrival: a PING at once
    // would move the offset under a replica that has just caught up.
    if srv.repl.feeds.replicas.is_empty() {
        srv.repl.feeds.last_ping_ms = now_ms;
    } else if !srv.repl.is_replica()
        && !srv.shutting_down
        && srv.shutdown.is_none()
        && !srv.repl.failover.active()
        && now_ms - srv.repl.feeds.last_ping_ms >= period_ms
    {
        srv.repl.feeds.last_ping_ms = now_ms;
        srv.effects.emit_anywhere(&[b"PING"]);
    }
    keep_waiting_replicas(srv, now_ms);
    let max_lag_ms = i64::from(srv.config.min_replicas_max_lag) * 1000;
    srv.repl.feeds.good_replicas = srv
        .repl
        .feeds
        .replicas
        .iter()
        .filter_map(|r| r.feed.as_ref())
        .filter(|f| f.online() && now_ms - f.ack().1 <= max_lag_ms)
        .count();
    start_waiting_sync(srv, now_ms);
    remove_sync_file(srv);
}

/// A newline a second to the replicas whose sync has not started (the
/// diskless delay, a save ahead of theirs), as Valkey's replicationCron
/// sends: they skip it, and it keeps them from timing out on a silent
/// primary. (A feed waiting for a disk save sends its own.)
fn keep_waiting_replicas(srv: &mut Server, now_ms: i64) {
    if now_ms - srv.repl.feeds.last_newline_ms < 1000 {
        return;
    }
    srv.repl.feeds.last_newline_ms = now_ms;
    let waiting: Vec<ClientId> = srv
        .repl
        .feeds
        .replicas
        .iter()
        .filter(|r| r.waiting.is_some())
        .map(|r| r.id)
        .collect();
    for id in waiting {
        srv.write_to(id, |w| w.raw(b"\n"));
    }
}

/// Every replica is disconnected (they reconnect and PSYNC: a new
/// replication id, or a promotion, is learnt that way).
pub fn disconnect_replicas(srv: &mut Server, why: &str) {
    abort_sync(srv, why);
    // A save to disk for them goes on as a plain BGSAVE; its instant is
    // no one's to share any more.
    srv.repl.feeds.disk = None;
    let ids: Vec<ClientId> = srv.repl.feeds.replicas.iter().map(|r| r.id).collect();
    for id in ids {
        drop_replica(srv, id, why);
    }
}

/// `repl-backlog-ttl`: a primary that has had no replica for that long
/// frees its backlog, and takes a new replication id (no replica could
/// continue the old history from it any more), as Valkey's cron does. A
/// replica keeps its backlog: its own replicas and a promotion need it.
fn free_backlog_after_ttl(srv: &mut Server, now_ms: i64) {
    let feeds = &mut srv.repl.feeds;
    if !feeds.replicas.is_empty() {
        feeds.no_replicas_since_ms = None;
        return;
    }
    let since = *feeds.no_replicas_since_ms.get_or_insert(now_ms);
    let idle_ms = (now_ms - since).max(0) as u64;
    let ttl_s = srv.config.repl_backlog_ttl_s;
    if ttl_s == 0
        || feeds.backlog.is_none()
        || srv.repl.is_replica()
        || idle_ms <= ttl_s.saturating_mul(1000)
    {
        return;
    }
    srv.repl.change_id();
    srv.repl.feeds.backlog = None;
    srv.effects.detach();
    srv.sync_expiry_logging();
    log::notice(&format!(
        "Replication backlog freed after {ttl_s} seconds without connected replicas."
    ));
}

/// Our history ends (a replica's full sync): the replicas and the
/// backlog go; a replica that comes back syncs in full.
pub fn stop_feeding(srv: &mut Server, why: &str) {
    disconnect_replicas(srv, why);
    if srv.repl.feeds.backlog.take().is_some() {
        srv.effects.detach();
        srv.sync_expiry_logging();
    }
}
