//! The replica side: this server follows a primary (REPLICAOF host port).
//! The link to the primary — the socket, the handshake, the RDB transfer
//! into a file, splitting the stream into commands — belongs to someone
//! else's thread behind [`PrimaryLink`] (`ringkv-repl`); this side only
//! decides when to connect, loads the transferred file, and runs the
//! primary's commands as the primary's client.
//!
//! ```text
//!  REPLICAOF h p ─► Links::connect ─► PrimaryLink (link thread: PING, AUTH,
//!        ▲                               REPLCONF, PSYNC, RDB → file, stream)
//!  cron: reconnect after a lost link          │ poll(): LinkEvent
//!        │                                    ▼
//!  background_step ◄── FullSync: empty the dbs, load the file (-LOADING)
//!                  ◄── Continue: keep the dataset, go on at our offset
//!                  ◄── Commands: run them as the primary client, offset += bytes
//!  REPLCONF GETACK (from the primary) ─► PrimaryLink::ack(offset)
//! ```
//!
//! The offset is Valkey's: bytes of the primary's stream applied here. The
//! link thread hands over only whole commands, and a `REPLCONF` always in
//! a chunk of its own, so a GETACK answers with exactly what was applied
//! before it.
//!
//! As in Valkey, a replica expires nothing itself: keys past their time
//! stay until the primary's DEL arrives, hidden from every client but the
//! primary's (`Db::expiry_hidden`).

use crate::ClientId;
use crate::config::DisklessLoad;
use crate::log;
use crate::server::Server;
use crate::session::Session;

/// The client id the primary's commands run as (not a connection).
pub const PRIMARY_CLIENT: ClientId = ClientId(u64::MAX - 1);

/// Seconds between connection attempts to an unreachable primary
/// (Valkey's replicationCron runs once a second).
const RECONNECT_MS: i64 = 1000;

/// What the link thread needs to connect.
#[derive(Clone, Debug)]
pub struct LinkOptions {
    pub host: String,
    pub port: u16,
    /// Our own port (`REPLCONF listening-port`): `replica-announce-port`
    /// if set, else `port`.
    pub listening_port: u16,
    /// `replica-announce-ip` (`REPLCONF ip-address`).
    pub announce_ip: Option<String>,
    /// `masteruser` / `masterauth`.
    pub user: Option<String>,
    pub auth: Option<String>,
    /// `PSYNC replid offset`: what we hold, to continue from it.
    pub replid: String,
    pub offset: u64,
    /// Where the transferred RDB file goes (relative to `dir`).
    pub dbfilename: String,
    /// `repl-diskless-load` says the RDB goes from the socket to memory,
    /// not through `dbfilename`.
    pub diskless_load: bool,
    /// `repl-timeout`, seconds.
    pub timeout_s: u64,
    /// `bind-source-addr`: the local address to connect from, if it can
    /// be bound (Valkey's best effort).
    pub source_addr: Option<String>,
    /// `PSYNC replid offset FAILOVER`: we hand over to this primary (see
    /// `failover`), which promotes itself before it answers.
    pub failover: bool,
    /// Rung after each event handed over.
    pub wake: std::sync::Arc<crate::wake::Wake>,
}

/// Where the link is (ROLE's state word).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    Connecting,
    Handshake,
    /// Receiving the RDB file.
    Transfer,
    Connected,
}

/// One thing the link thread has for the engine, in stream order.
pub enum LinkEvent {
    State(LinkState),
    /// The primary sends a full dataset, in `rdb`; the stream continues
    /// from `offset`.
    FullSync {
        replid: String,
        offset: u64,
        rdb: SyncRdb,
    },
    /// Partial resynchronization accepted: the stream continues where we
    /// are; the primary's replication id may have changed.
    Continue {
        replid: Option<String>,
    },
    /// Whole commands of the stream, `data.len()` bytes of it.
    Commands {
        data: Vec<u8>,
        args: Vec<resp::Span>,
        argc: Vec<u32>,
    },
    /// The primary answered PSYNC with something else than a full or
    /// partial sync (this reply); `Lost` follows.
    PsyncRefused(String),
    /// The link is gone (the thread has ended).
    Lost(String),
}

/// Where a full sync's RDB is.
pub enum SyncRdb {
    /// In this file (relative to `dir`), complete and synced.
    File(String),
    /// Arriving: read it as it comes (`repl-diskless-load`). It ends
    /// early if the transfer fails.
    Stream(Box<dyn std::io::Read + Send>),
}

impl SyncRdb {
    /// Where the load reads from, as Valkey's log says it.
    fn source(&self) -> &'static str {
        match self {
            SyncRdb::File(_) => "disk",
            SyncRdb::Stream(_) => "socket",
        }
    }
}

/// The link to one primary, owned by another thread. Dropping it closes
/// the connection and ends the thread.
pub trait PrimaryLink: Send {
    /// The next event, if any.
    fn poll(&mut self) -> Option<LinkEvent>;
    /// Events are waiting (cheap: the loop asks before every sleep).
    fn ready(&self) -> bool;
    /// Answer a GETACK: `REPLCONF ACK offset` now.
    fn ack(&mut self, offset: u64);
    /// Bytes applied so far (sent with the periodic ACK).
    fn applied(&mut self, offset: u64);
    /// How far our AOF has fsynced the primary's stream: sent as `FACK`
    /// with every ACK (`None`, no AOF: no FACK, as Valkey's replica).
    fn aof_fsynced(&mut self, offset: Option<u64>) {
        let _ = offset;
    }
    /// Stream bytes received (INFO `slave_read_repl_offset`).
    fn received(&self) -> u64;
    /// Unix ms of the last byte from the primary.
    fn last_io_ms(&self) -> i64;
    /// The RDB transfer: (total bytes, -1 when unknown (EOF-marked);
    /// bytes read so far).
    fn transfer(&self) -> (i64, u64);
}

/// Opens links (the server's `ringkv-repl`).
pub trait Links: Send {
    fn connect(&mut self, opts: LinkOptions) -> Box<dyn PrimaryLink>;
    /// Bytes every link opened so far read from its primary (INFO
    /// `total_net_repl_input_bytes`).
    fn bytes_read(&self) -> u64 {
        0
    }
}

/// The primary this server follows.
pub struct Primary {
    pub host: String,
    pub port: u16,
    pub link: Option<Box<dyn PrimaryLink>>,
    pub state: LinkState,
    /// A FULLRESYNC's file is loading: commands wait in the link.
    pub loading: bool,
    /// Where that load reads from ("disk" or "socket", for the log).
    pub loading_from: &'static str,
    /// Unix ms the link went down (or the primary was set).
    pub down_since_ms: i64,
    pub last_attempt_ms: i64,
    /// The link reached `Connected` at least once for this primary.
    pub synced: bool,
}

/// `-READONLY` for a write from anyone but the primary.
pub const READONLY_ERR: &str = "READONLY You can't write against a read only replica.";
/// `-MASTERDOWN` with `replica-serve-stale-data no`.
pub const MASTERDOWN_ERR: &str =
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";

/// REPLICAOF host port: follow a new primary (the dataset is kept until
/// its full sync replaces it). Returns false when it is the one we follow.
pub fn set_primary(srv: &mut Server, host: &str, port: u16, now_ms: i64) -> bool {
    if let Some(p) = &srv.repl.primary
        && p.host.eq_ignore_ascii_case(host)
        && p.port == port
    {
        return false;
    }
    let was_replica = srv.repl.primary.take().is_some();
    if !was_replica {
        // What we had as a primary continues as history a partial sync
        // could use (Valkey's replicationCachePrimaryUsingMyself): our
        // offset is where our stream is. Our replicas stay connected, as
        // in Valkey: if the new primary continues our history, so do they
        // (a full sync or a new replication id drops them).
        srv.repl.offset = super::master_offset(srv);
        crate::blocking::unblock_all_for_role_change(srv);
        crate::aof::set_relaying(srv, true);
    }
    srv.repl.primary = Some(Primary {
        host: host.to_string(),
        port,
        link: None,
        state: LinkState::Connecting,
        loading: false,
        loading_from: "disk",
        down_since_ms: now_ms,
        last_attempt_ms: 0,
        synced: false,
    });
    let mut sess = Session::new(PRIMARY_CLIENT);
    sess.user = crate::acl::SUPERUSER;
    sess.authenticated = true;
    srv.clients
        .map
        .insert(PRIMARY_CLIENT.0, Some(Box::new(sess)));
    // A replica leaves expiry to its primary's DELs, and hides what is
    // past its time meanwhile.
    crate::expiry_mode::apply(srv);
    log::set_role(b'S');
    srv.apply_oom_score();
    log::notice(&format!("Connecting to MASTER {host}:{port}"));
    // While the local file loads, cron connects once it is in: its
    // replication id and offset may let the PSYNC continue.
    if !srv.persist.is_loading() {
        connect(srv, now_ms);
    }
    true
}

/// REPLICAOF NO ONE: become a primary. The history we have stays valid
/// under the old id up to our offset (PSYNC2's replid2).
pub fn unset_primary(srv: &mut Server) {
    let Some(p) = srv.repl.primary.take() else {
        return;
    };
    drop(p.link);
    srv.clients.map.remove(&PRIMARY_CLIENT.0);
    crate::expiry_mode::apply(srv);
    log::set_role(b'M');
    srv.apply_oom_score();
    // From here on the stream is our own effects, after a SELECT.
    crate::aof::set_relaying(srv, false);
    // Our replicas must learn the new id: they reconnect and continue
    // with the old one (replid2), as Valkey's replicationUnsetPrimary.
    super::primary::disconnect_replicas(srv, "this server was promoted");
    let stream = srv.effects.offset() as i64;
    let r = &mut srv.repl;
    r.replid2 = std::mem::replace(&mut r.replid, crate::server::new_replid());
    r.second_offset = r.offset as i64 + 1;
    // Our stream goes on from the offset we reached.
    r.shift = r.offset as i64 - stream;
    log::notice("MASTER MODE enabled");
}

fn connect(srv: &mut Server, now_ms: i64) {
    let timeout_s = srv.config.repl_timeout_s;
    let nonempty = |name: &str| srv.config.get(name).filter(|v| !v.is_empty());
    let (user, auth) = (nonempty("primaryuser"), nonempty("primaryauth"));
    let announce_ip = nonempty("replica-announce-ip");
    let listening_port = nonempty("replica-announce-port")
        .and_then(|p| p.parse::<u16>().ok())
        .filter(|&p| p != 0)
        .unwrap_or(srv.config.port);
    let diskless_load = loads_from_socket(srv);
    let Some(p) = srv.repl.primary.as_mut() else {
        return;
    };
    p.last_attempt_ms = now_ms;
    let Some(links) = srv.repl.links.as_mut() else {
        return;
    };
    let opts = LinkOptions {
        host: p.host.clone(),
        port: p.port,
        listening_port,
        announce_ip,
        user,
        auth,
        replid: srv.repl.replid.clone(),
        offset: srv.repl.offset,
        dbfilename: srv.config.dbfilename.clone(),
        diskless_load,
        timeout_s,
        source_addr: srv.config.get("bind-source-addr").filter(|a| !a.is_empty()),
        failover: srv.repl.failover.in_progress(),
        wake: srv.repl.wake.clone(),
    };
    p.state = LinkState::Connecting;
    p.link = Some(links.connect(opts));
}

/// Whether the next full sync's RDB goes from the socket to memory
/// (Valkey's useDisklessLoad).
fn loads_from_socket(srv: &Server) -> bool {
    match srv.config.repl_diskless_load {
        DisklessLoad::FlushBeforeLoad => true,
        DisklessLoad::OnEmptyDb => srv.keyspace.dbs.iter().all(|db| db.is_empty()),
        DisklessLoad::Swapdb => true,
        DisklessLoad::Disabled => false,
    }
}

/// Reconnect a lost link; keep the link's FACK current.
pub fn cron(srv: &mut Server, now_ms: i64) {
    let Some(p) = srv.repl.primary.as_ref() else {
        return;
    };
    if p.link.is_none() && now_ms - p.last_attempt_ms >= RECONNECT_MS && !srv.persist.is_loading() {
        connect(srv, now_ms);
    }
    update_fack(srv);
}

/// How far our AOF's fsync covers the primary's stream: every command of
/// it applied before the last effects the fsync took in.
fn update_fack(srv: &mut Server) {
    let fsynced = match &srv.aof.log {
        Some(log) if srv.config.appendonly => {
            let aof = log.fsynced();
            let stream = srv.effects.relayed_through(aof).unwrap_or(aof);
            Some(super::replication_offset(srv, stream).min(srv.repl.offset))
        }
        _ => None,
    };
    if let Some(link) = srv.repl.primary.as_mut().and_then(|p| p.link.as_mut()) {
        link.aof_fsynced(fsynced);
    }
}

/// Apply what the link has: a full sync's file, a continuation, commands.
/// Stops at a full sync (its load runs in the loading steps) and after a
/// few milliseconds of commands.
pub fn background_step(srv: &mut Server) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(2);
    loop {
        // A full sync's file (or the start-up load) goes in first.
        if srv.persist.is_loading() {
            return;
        }
        let Some(p) = srv.repl.primary.as_mut() else {
            return;
        };
        if p.loading {
            p.loading = false;
            log::notice("MASTER <-> REPLICA sync: Finished with success");
            crate::supervisor::sync_finished();
            if srv.repl.kept.take().is_some() {
                stop_feeding_for_new_history(srv);
            }
            // A backlog of the stream from here on, as Valkey's replicas
            // keep: promoted, this server lets its former siblings
            // continue even if they were behind it.
            super::primary::ensure_backlog(srv);
            restart_aof(srv);
            continue;
        }
        let Some(link) = p.link.as_mut() else {
            return;
        };
        let Some(ev) = link.poll() else {
            return;
        };
        match ev {
            LinkEvent::State(s) => {
                p.state = s;
                if s == LinkState::Connected {
                    p.synced = true;
                }
            }
            LinkEvent::FullSync {
                replid,
                offset,
                rdb,
            } => {
                super::failover::handed_over(srv);
                full_sync(srv, replid, offset, rdb);
                return;
            }
            LinkEvent::Continue { replid } => {
                p.state = LinkState::Connected;
                super::failover::handed_over(srv);
                super::primary::ensure_backlog(srv);
                log::notice(
                    "MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization.",
                );
                crate::supervisor::partial_sync_accepted();
                if let Some(id) = replid
                    && id != srv.repl.replid
                {
                    let r = &mut srv.repl;
                    r.replid2 = std::mem::replace(&mut r.replid, id);
                    r.second_offset = r.offset as i64 + 1;
                    // Our replicas learn the new id by reconnecting (and
                    // continue with the old one as replid2).
                    super::primary::disconnect_replicas(srv, "the replication id changed");
                }
            }
            LinkEvent::PsyncRefused(_) => super::failover::refused(srv),
            LinkEvent::Commands { data, args, argc } => {
                apply(srv, &data, &args, &argc);
            }
            LinkEvent::Lost(why) => {
                let established = p.state == LinkState::Connected;
                p.link = None;
                p.state = LinkState::Connecting;
                p.down_since_ms = crate::server::wall_ms();
                log::warning(&format!("Connection with master lost: {why}"));
                if established {
                    reconnect_at_once(srv);
                }
                return;
            }
        }
        if std::time::Instant::now() >= deadline {
            return;
        }
    }
}

/// CLIENT KILL TYPE master: close the link; cron connects again (with a
/// PSYNC that continues where we are). False when there was no link.
pub fn drop_link(srv: &mut Server) -> bool {
    let Some(p) = srv.repl.primary.as_mut() else {
        return false;
    };
    if p.link.take().is_none() {
        return false;
    }
    p.state = LinkState::Connecting;
    p.down_since_ms = crate::server::wall_ms();
    log::notice("Connection with master lost (killed by a client).");
    reconnect_at_once(srv);
    true
}

/// An established link was lost: connect again now rather than at the
/// next second, so that the backlog still holds where we were (Valkey's
/// replicationHandlePrimaryDisconnection). Failed attempts are retried by
/// cron, once a second.
fn reconnect_at_once(srv: &mut Server) {
    if srv.persist.is_loading() {
        return;
    }
    if let Some(p) = srv.repl.primary.as_ref() {
        log::notice(&format!("Reconnecting to MASTER {}:{}", p.host, p.port));
    }
    let now = srv.now_ms();
    connect(srv, now);
}

/// FULLRESYNC: the dataset becomes the primary's RDB.
fn full_sync(srv: &mut Server, replid: String, offset: u64, rdb: SyncRdb) {
    let from = rdb.source();
    let what = match &rdb {
        SyncRdb::File(file) => file.as_str(),
        SyncRdb::Stream(_) => "the DB from the socket",
    };
    log::notice(&format!(
        "MASTER <-> REPLICA sync: Flushing old data, loading {what}"
    ));
    crate::snapshot::abort_bgsave(srv);
    crate::aof::abort_rewrite(srv);
    // Our own history, continued by the primary: a staged load serves
    // the dataset we hold until the new one is in (Valkey's async loading).
    let same_history = replid == srv.repl.replid;
    let staging = if matches!(rdb, SyncRdb::Stream(_))
        && srv.config.repl_diskless_load == DisklessLoad::Swapdb
    {
        // The history comes back if the load fails, so that the next
        // PSYNC may continue it; the dataset never left.
        let r = &srv.repl;
        srv.repl.kept = Some(KeptHistory {
            replid: r.replid.clone(),
            replid2: r.replid2.clone(),
            offset: r.offset,
            second_offset: r.second_offset,
        });
        // Our replicas stay until the new dataset is in (they keep our
        // history if it fails), but not a full sync of one of them: its
        // frozen view of the live databases would outlive their keys.
        super::primary::abort_sync(srv, "our primary's dataset is loading");
        Some(crate::loading::Staging::new(srv, same_history))
    } else {
        stop_feeding_for_new_history(srv);
        // The libraries go with the keys: the primary's RDB brings its
        // own (Valkey's emptyData flushes functions too).
        srv.functions = None;
        empty_databases(srv);
        None
    };
    if let Some(s) = srv.clients.get_mut(PRIMARY_CLIENT) {
        s.db = 0;
    }
    srv.repl.replid = replid;
    srv.repl.offset = offset;
    srv.repl.replid2 = "0".repeat(40);
    srv.repl.second_offset = -1;
    sync_shift(srv);
    let now = srv.now_ms();
    let started = match rdb {
        SyncRdb::File(file) => crate::loading::start_file(srv, &file, now),
        SyncRdb::Stream(input) => {
            crate::loading::start_stream(srv, input, staging, now).map(|()| true)
        }
    };
    let Some(p) = srv.repl.primary.as_mut() else {
        return;
    };
    p.loading_from = from;
    p.state = LinkState::Connected;
    p.synced = true;
    match started {
        Ok(true) => p.loading = true,
        Ok(false) | Err(_) => {
            let why = started.err().unwrap_or_else(|| "the file is gone".into());
            load_failed(srv, &why);
        }
    }
}

/// Empty every database for a full sync, through the lazyfree thread
/// with `replica-lazy-flush` (Valkey's emptyData with EMPTYDB_ASYNC).
fn empty_databases(srv: &mut Server) {
    for i in 0..srv.keyspace.dbs.len() {
        if srv.config.replica_lazy_flush {
            let old = srv.keyspace.dbs[i].take_contents();
            srv.lazyfree.free_db(old);
        } else {
            srv.keyspace.dbs[i].clear();
        }
    }
}

/// Our history ends with a full sync: our replicas sync again, from the
/// new dataset (Valkey's replicationAttachToNewPrimary).
fn stop_feeding_for_new_history(srv: &mut Server) {
    super::primary::stop_feeding(srv, "its primary did a full resync");
}

/// The replication state a `swapdb` diskless load keeps aside while the
/// primary's dataset arrives.
pub struct KeptHistory {
    replid: String,
    replid2: String,
    offset: u64,
    second_offset: i64,
}

/// The dataset is the primary's file now: what the AOF holds no longer
/// leads to it, so it is rewritten from the dataset (Valkey's
/// restartAOFAfterSYNC); the stream follows in the new incr file.
fn restart_aof(srv: &mut Server) {
    if srv.aof.log.is_none() || srv.aof.temporary {
        return;
    }
    let now = srv.now_ms();
    if let Err(e) = crate::aof::start_rewrite(srv, now) {
        log::warning(&format!(
            "Failed to rewrite the AOF after the sync with the primary: {e}"
        ));
    }
}

/// A full sync's file could not be loaded: empty what was half loaded and
/// sync again (a replica does not exit over its primary's file).
pub fn load_failed(srv: &mut Server, why: &str) {
    let from = srv.repl.primary.as_ref().map_or("disk", |p| p.loading_from);
    log::warning(&format!(
        "Failed trying to load the MASTER synchronization DB from {from}: {why}"
    ));
    crate::loading::abandon(srv);
    if let Some(p) = srv.repl.primary.as_mut() {
        p.loading = false;
        p.link = None;
        p.state = LinkState::Connecting;
    }
    if let Some(kept) = srv.repl.kept.take() {
        // swapdb: the old dataset stayed; its history comes back, so the
        // next PSYNC may continue it.
        log::notice(
            "MASTER <-> REPLICA sync: Discarding the half-loaded data, the old dataset stays",
        );
        let r = &mut srv.repl;
        (r.replid, r.replid2) = (kept.replid, kept.replid2);
        (r.offset, r.second_offset) = (kept.offset, kept.second_offset);
        sync_shift(srv);
        return;
    }
    empty_databases(srv);
    // Nothing of the old history is valid any more.
    super::primary::stop_feeding(srv, "the primary's dataset failed to load");
    srv.repl.replid = crate::server::new_replid();
    srv.repl.offset = 0;
    sync_shift(srv);
}

/// A replica's offset moved by other means than the stream (a full sync,
/// a file loaded): the stream's offsets count from it again.
pub(crate) fn sync_shift(srv: &mut Server) {
    srv.repl.shift = srv.repl.offset as i64 - srv.effects.offset() as i64;
}

/// Run whole commands of the stream as the primary's client.
fn apply(srv: &mut Server, data: &[u8], args: &[resp::Span], argc: &[u32]) {
    let view = crate::CommandsView {
        data,
        args,
        argc,
        hints: &[],
    };
    let mut out = resp::ReplyBuf::default();
    let mut job = crate::Job::new(PRIMARY_CLIENT, view, &mut out);
    // The primary's commands see every key, expired or not.
    crate::expiry_mode::reveal(srv);
    crate::execute_replayed(srv, &mut job);
    crate::expiry_mode::apply(srv);
    // Our replicas get exactly these bytes (the link never splits a
    // MULTI ... EXEC across chunks, so a snapshot's instant is never
    // inside one).
    srv.effects.relay(data);
    srv.repl.offset += data.len() as u64;
    let offset = srv.repl.offset;
    if let Some(link) = srv.repl.primary.as_mut().and_then(|p| p.link.as_mut()) {
        link.applied(offset);
    }
}

/// Our primary's command meets a disk this replica cannot write (a failed
/// AOF write, or BGSAVE with save points). As Valkey: unless
/// `replica-ignore-disk-write-errors`, a write stops the replica rather
/// than leave it holding data its files will not have; otherwise it is
/// applied, with a warning every 10 s.
pub fn applying_despite_disk_error(srv: &Server, write: bool) {
    use std::sync::atomic::{AtomicI64, Ordering};
    static LAST_WARNING_MS: AtomicI64 = AtomicI64::new(0);
    if write && !srv.config.replica_ignore_disk_write_errors {
        crate::log::warning("Replica was unable to write command to disk.");
        std::process::exit(1);
    }
    let now = crate::server::wall_ms();
    if now - LAST_WARNING_MS.load(Ordering::Relaxed) > 10_000 {
        LAST_WARNING_MS.store(now, Ordering::Relaxed);
        crate::log::warning(
            "Replica is applying a command even though it is unable to write to disk.",
        );
    }
}

/// REPLCONF GETACK from the primary.
pub fn send_ack(srv: &mut Server) {
    update_fack(srv);
    let offset = srv.repl.offset;
    if let Some(link) = srv.repl.primary.as_mut().and_then(|p| p.link.as_mut()) {
        link.ack(offset);
    }
}

/// ROLE's state word for the link (Valkey's replicationGetReplicaStateString).
pub fn state_word(p: &Primary) -> &'static str {
    if p.loading {
        return "sync";
    }
    match p.state {
        LinkState::Connecting if p.link.is_none() => "connect",
        LinkState::Connecting => "connecting",
        LinkState::Handshake => "handshake",
        LinkState::Transfer => "sync",
        LinkState::Connected => "connected",
    }
}
