//! The append-only file as the engine sees it: when it is on, what a
//! rewrite is doing, what INFO reports, and the interfaces through which
//! `ringkv-persist` writes and reads the files (the engine opens none).
//!
//! ```text
//!  commands ─► effects stream (crate::effects) ─► AppendLog (AOF thread:
//!                 │ publish after each batch        write, fsync, files)
//!                 └─ appendfsync always: AppendLog::sync(offset) before
//!                    the batch's replies go out (one fdatasync per batch)
//!  BGREWRITEAOF ─► AppendLog::begin_rewrite(offset): new incr file from
//!                  `offset`; base = a point-in-time snapshot (crate::snapshot)
//!               ─► snapshot done ─► AppendLog::end_rewrite: manifest swapped
//!  start-up ─► Storage::load_aof ─► AofSource: base (RDB) + commands,
//!              replayed by a client of our own (crate::aof_replay)
//! ```

use crate::persist::{LoadSource, SnapshotSink};
use crate::server::Server;
use crate::snapshot::Snapshot;
use crate::{log, snapshot};
use std::time::Instant;

/// `appendfsync`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FsyncPolicy {
    Always,
    #[default]
    Everysec,
    No,
}

/// How the AOF files are named and written (from the config).
#[derive(Clone, Debug)]
pub struct AofOptions {
    /// `appenddirname`, relative to `dir`.
    pub dirname: String,
    /// `appendfilename`: the prefix of every file in the directory.
    pub filename: String,
    pub fsync: FsyncPolicy,
    /// `aof-use-rdb-preamble`: the base is an RDB file (else commands).
    pub rdb_preamble: bool,
    /// `aof-timestamp-enabled`: `#TS:<unix s>` lines between commands.
    pub timestamps: bool,
    /// `aof-load-truncated`: a partial command at the end of the last
    /// file is cut off (logged) instead of failing the load.
    pub load_truncated: bool,
    /// `no-appendfsync-on-rewrite`: no fsync while a rewrite runs.
    pub no_fsync_on_rewrite: bool,
    /// `rdbcompression`, `rdbchecksum` for the RDB base.
    pub compress: bool,
    pub checksum: bool,
    /// `aof-rewrite-incremental-fsync`: a rewrite's base is fdatasynced
    /// every 4 MiB written.
    pub rewrite_incremental_fsync: bool,
}

/// The AOF thread's figures, for INFO and MISCONF.
#[derive(Clone, Debug, Default)]
pub struct AofStatus {
    /// Bytes of the base plus every incr file (`aof_current_size`).
    pub current_size: u64,
    /// Size of the base when it was written or loaded (`aof_base_size`).
    pub base_size: u64,
    /// The last write (or fsync) failed: writes are refused (MISCONF)
    /// until one succeeds. The text is the OS error.
    pub write_error: Option<String>,
    /// Stream offset written to the file (not necessarily fsynced).
    pub written: u64,
    /// A background fsync is running (`aof_pending_bio_fsync`).
    pub fsync_in_progress: bool,
}

/// The open append-only file, written by a thread of its own.
pub trait AppendLog: Send {
    /// The stream is published up to `published` (always the end of an
    /// execution unit, unlike block boundaries a reader may also see):
    /// write it soon (this wakes the AOF thread if it sleeps). Only at
    /// such offsets may the writer put an `#TS:` annotation.
    fn wake(&mut self, published: u64);
    /// `appendfsync always`: return once every byte before `offset` is
    /// written and fdatasync'ed. An error means it is not on disk.
    fn sync(&mut self, offset: u64) -> Result<(), String>;
    /// `everysec` and `no`: write(2) every byte before `offset` now, on
    /// the caller's thread, so that a process crash after the replies
    /// loses none of them (Valkey writes its AOF buffer in beforeSleep,
    /// before replying); the fsync stays the AOF thread's, and the write
    /// does not wait for a running one. A write that fails is left to
    /// the AOF thread's retry, as [`AppendLog::wake`] would.
    fn write(&mut self, offset: u64) {
        self.wake(offset);
    }
    /// Stream ranges (start, end) that must not go into the file: what a
    /// primary sends only its replicas (PUBLISH, PING, GETACK), which
    /// Valkey keeps out of its AOF. Given before the offsets that cover
    /// them are passed to `write`, `wake` or `sync`.
    fn skip(&mut self, ranges: &[(u64, u64)]);
    /// CONFIG SET appendfsync and the like, at runtime.
    fn set_options(&mut self, opts: &AofOptions);
    fn status(&self) -> AofStatus;
    /// The last write or fsync failed (cheap: read before every write
    /// command).
    fn write_failed(&self) -> bool;
    /// Stream offset written to the file ([`AofStatus::written`]); read
    /// before every command while `maxmemory` is set, so implementations
    /// should make it an atomic load.
    fn written(&self) -> u64 {
        self.status().written
    }
    /// Stream offset up to which the file is fsynced (WAITAOF's local
    /// count). Under `appendfsync no` it stays where the log opened, as
    /// Valkey's `fsynced_reploff` does.
    fn fsynced(&self) -> u64 {
        0
    }
    /// BGREWRITEAOF: stream bytes from `offset` on go to a new incr file
    /// (listed in the manifest at once, so a crash loses nothing); the
    /// returned sink writes the new base (an RDB file).
    fn begin_rewrite(&mut self, offset: u64) -> Result<Box<dyn SnapshotSink>, String>;
    /// The server became a replica, or was promoted: its own effects are
    /// in another stream now. Everything published on the current reader
    /// is written (and fsynced, unless `appendfsync no`) first; then
    /// `reader` is read, and the offsets the log reports are its. An
    /// error is the write's or fsync's: the bytes are kept and written
    /// ahead of the new stream once the disk takes them.
    fn follow(&mut self, reader: effects::Reader) -> Result<(), String>;
    /// The base is written (`ok`) or failed: swap the manifest to the new
    /// base and the incr files after it, delete what it replaced; or
    /// remove the failed base and keep the old one.
    fn end_rewrite(&mut self, ok: bool) -> Result<(), String>;
    /// Write and fsync everything published, then close (appendonly no,
    /// shutdown).
    fn close(&mut self) -> Result<(), String>;
}

/// How the AOF is opened.
pub enum OpenMode {
    /// Go on appending to the last incr file of the manifest.
    Existing,
    /// Start a new incr file after whatever exists; the manifest is
    /// written when the rewrite that makes its base ends.
    Fresh,
}

/// One piece of an AOF, in load order.
pub enum AofChunk {
    /// The base's RDB preamble.
    Rdb(Box<dyn LoadSource>),
    Commands(Commands),
}

/// Commands read from an AOF, as its parser left them: argument spans
/// over `data`, grouped by `argc`.
pub struct Commands {
    pub data: Vec<u8>,
    pub args: Vec<resp::Span>,
    pub argc: Vec<u32>,
}

/// The reader of an AOF directory (manifest, base, incr files).
pub trait AofSource: Send {
    /// The next chunk, `Ok(None)` at the end. Errors name the file and
    /// offset.
    fn next(&mut self) -> Result<Option<AofChunk>, String>;
    /// (bytes read, bytes of every file listed) for INFO's loading
    /// progress; an RDB part handed out counts its own.
    fn progress(&self) -> (u64, u64);
}

/// The AOF's state and INFO persistence's `aof_*` figures.
pub struct Aof {
    pub log: Option<Box<dyn AppendLog>>,
    /// A rewrite's base being captured.
    pub rewrite: Option<Snapshot>,
    pub rewrite_started: Option<Instant>,
    /// BGREWRITEAOF while a BGSAVE ran: start once it is done.
    pub rewrite_scheduled: bool,
    pub last_rewrite_time_s: i64,
    pub last_rewrite_ok: bool,
    pub rewrites: u64,
    pub consecutive_failures: u64,
    /// `aof_current_size` when the last rewrite ended (auto rewrite).
    pub size_at_rewrite: u64,
    /// Commands replayed by the last load.
    pub loaded_commands: u64,
    /// The AOF is being replayed: no eviction, no MISCONF.
    pub replaying: bool,
    /// Opened only for a BGREWRITEAOF with `appendonly no`: closed when
    /// the rewrite ends.
    pub temporary: bool,
}

impl Default for Aof {
    fn default() -> Aof {
        Aof {
            log: None,
            rewrite: None,
            rewrite_started: None,
            rewrite_scheduled: false,
            last_rewrite_time_s: -1,
            last_rewrite_ok: true,
            rewrites: 0,
            consecutive_failures: 0,
            size_at_rewrite: 0,
            loaded_commands: 0,
            replaying: false,
            temporary: false,
        }
    }
}

impl Aof {
    pub fn is_on(&self) -> bool {
        self.log.is_some()
    }
    pub fn status(&self) -> AofStatus {
        self.log.as_ref().map(|l| l.status()).unwrap_or_default()
    }
}

/// The options as configured now.
pub fn options(srv: &Server) -> AofOptions {
    let c = &srv.config;
    AofOptions {
        dirname: c.appenddirname.clone(),
        filename: c.appendfilename.clone(),
        fsync: c.appendfsync,
        rdb_preamble: c.aof_use_rdb_preamble,
        timestamps: c.aof_timestamp_enabled,
        load_truncated: c.aof_load_truncated,
        no_fsync_on_rewrite: c.no_appendfsync_on_rewrite,
        compress: c.rdbcompression,
        checksum: c.rdbchecksum,
        rewrite_incremental_fsync: c.get("aof-rewrite-incremental-fsync").as_deref() != Some("no"),
    }
}

/// Valkey's MISCONF for a failed AOF write (one atomic load when the
/// last write went well).
#[inline]
pub fn misconf_error(srv: &Server) -> Option<String> {
    let log = srv.aof.log.as_ref()?;
    if !log.write_failed() {
        return None;
    }
    let e = log.status().write_error?;
    Some(format!("MISCONF Errors writing to the AOF file: {e}"))
}

/// Open the AOF and attach it to the effects stream.
fn open(srv: &mut Server, mode: OpenMode) -> Result<(), String> {
    let opts = options(srv);
    let reader = srv.effects.attach_aof();
    let Some(storage) = srv.persist.storage.as_mut() else {
        srv.effects.detach_aof();
        return Err("no storage configured".into());
    };
    match storage.open_aof(&opts, reader, mode) {
        Ok(log) => {
            srv.aof.log = Some(log);
            srv.sync_expiry_logging();
            Ok(())
        }
        Err(e) => {
            srv.effects.detach_aof();
            srv.sync_expiry_logging();
            Err(e)
        }
    }
}

/// Start-up with `appendonly yes`: load the AOF if its manifest exists
/// (the RDB file is then ignored, as in Valkey), otherwise create a base
/// from the (empty) dataset and the first incr file. Returns whether an
/// AOF load began (it goes on in the background: `crate::aof_replay`).
pub fn start(srv: &mut Server, now_ms: i64) -> Result<bool, String> {
    let opts = options(srv);
    let lopts = crate::persist::load_options(srv, now_ms);
    let Some(storage) = srv.persist.storage.as_mut() else {
        return Ok(false);
    };
    if let Some(source) = storage.load_aof(&opts, lopts)? {
        // Loaded in the background, as an RDB file is; the AOF opens for
        // appending once it is whole (`open_loaded`).
        crate::aof_replay::begin(srv, source, true, now_ms);
        return Ok(true);
    }
    open(srv, OpenMode::Fresh)?;
    log::notice(&format!(
        "Creating AOF base file {}.1.base.rdb on server start",
        opts.filename
    ));
    rewrite_now(srv, now_ms)?;
    srv.aof.size_at_rewrite = srv.aof.status().current_size;
    Ok(false)
}

/// The start-up AOF is loaded: go on appending to it.
pub(crate) fn open_loaded(srv: &mut Server) -> Result<(), String> {
    open(srv, OpenMode::Existing)?;
    srv.aof.size_at_rewrite = srv.aof.status().current_size;
    Ok(())
}

/// The client that replays an AOF's commands.
pub const LOADING_CLIENT: crate::ClientId = crate::ClientId(u64::MAX);

/// Make the stream's published bytes durable as `appendfsync` asks:
/// called by the IO layer after each batch, before its replies are sent.
/// With `always` this returns once they are on disk, otherwise once they
/// are in the file (the fsync follows within a second, or never).
pub fn after_batch(srv: &mut Server) {
    let published = publish(srv);
    if srv.aof.log.is_none() {
        crate::replication::primary::published(srv, published);
        return;
    }
    let started = Instant::now();
    let end = srv.effects.aof_offset();
    let always = srv.config.appendfsync == FsyncPolicy::Always;
    let log = srv.aof.log.as_mut().expect("checked above");
    if always && log.status().written < end {
        if let Err(e) = log.sync(end) {
            // Valkey exits here too: the replies to these writes must not
            // go out, and the dataset is ahead of the file.
            log::warning(&format!(
                "Can't persist the AOF for fsync policy 'always': {e}. Exiting..."
            ));
            std::process::exit(1);
        }
    } else {
        log.write(end);
    }
    srv.stats.eventloop_aof_ns += started.elapsed().as_nanos() as u64;
    crate::replication::primary::published(srv, published);
}

/// Make what was emitted visible to the stream's readers, and tell the
/// AOF which of it is for replicas only before it may write it. Returns
/// the shared stream's end (what replicas can now be sent).
fn publish(srv: &mut Server) -> u64 {
    let end = srv.effects.publish();
    hand_skips(srv);
    end
}

/// Tell the AOF which stream ranges are for replicas only.
fn hand_skips(srv: &mut Server) {
    let skips = srv.effects.take_aof_skips();
    if let Some(log) = srv.aof.log.as_mut()
        && !skips.is_empty()
    {
        log.skip(&skips);
    }
}

/// BGREWRITEAOF. The error is Valkey's reply text; `Ok(true)`: started,
/// `Ok(false)`: scheduled after the running BGSAVE.
pub fn start_rewrite(srv: &mut Server, now_ms: i64) -> Result<bool, String> {
    if srv.aof.rewrite.is_some() {
        return Err("ERR Background append only file rewriting already in progress".into());
    }
    if srv.persist.snapshot.is_some() || srv.repl.feeds.snapshot.is_some() {
        srv.aof.rewrite_scheduled = true;
        return Ok(false);
    }
    if srv.aof.log.is_none() {
        // appendonly no: Valkey still writes a new AOF; we need a stream
        // to cut at, so open one for the duration.
        open(srv, OpenMode::Fresh).map_err(|e| format!("ERR {e}"))?;
        srv.aof.temporary = true;
    }
    begin_rewrite(srv, now_ms)?;
    Ok(true)
}

fn begin_rewrite(srv: &mut Server, now_ms: i64) -> Result<(), String> {
    publish(srv);
    let offset = srv.effects.aof_offset();
    srv.effects.force_select();
    let log = srv.aof.log.as_mut().expect("AOF open");
    let sink = match log.begin_rewrite(offset) {
        Ok(s) => s,
        Err(e) => {
            log::warning(&format!(
                "Can't rewrite append only file in background: {e}"
            ));
            srv.aof.last_rewrite_ok = false;
            srv.aof.consecutive_failures += 1;
            return Err(format!("ERR {e}"));
        }
    };
    srv.aof.rewrite = Some(Snapshot::begin_aof_base(srv, sink, now_ms));
    srv.aof.rewrite_started = Some(Instant::now());
    srv.aof.rewrite_scheduled = false;
    log::notice("Background append only file rewriting started");
    Ok(())
}

/// The rewrite to completion before the next command (start-up, CONFIG
/// SET appendonly yes on an empty server would not need it, but start-up
/// does: Valkey writes the first base synchronously).
fn rewrite_now(srv: &mut Server, now_ms: i64) -> Result<(), String> {
    begin_rewrite(srv, now_ms)?;
    let r = complete_rewrite(srv, now_ms);
    // The first base is not a rewrite in INFO (Valkey counts from 0).
    if r.is_ok() {
        srv.aof.rewrites -= 1;
    }
    r
}

/// Capture and write the running rewrite (if any) to its end, now.
fn complete_rewrite(srv: &mut Server, now_ms: i64) -> Result<(), String> {
    let Some(mut snap) = srv.aof.rewrite.take() else {
        return Ok(());
    };
    snap.step(&mut srv.keyspace, now_ms, None);
    let written = snap.wait();
    finish_rewrite(srv, written.map(|_| ()))
}

/// One slice of the running rewrite's capture; ends it when the base is
/// written. Returns whether it wants to run again now.
pub fn background_step(srv: &mut Server, now_ms: i64) -> snapshot::Progress {
    let Some(snap) = srv.aof.rewrite.as_mut() else {
        return snapshot::Progress::Captured;
    };
    let p = snap.step(
        &mut srv.keyspace,
        now_ms,
        Some(Instant::now() + snapshot::STEP_BUDGET),
    );
    for db in snap.take_detached() {
        srv.lazyfree.free_db(db);
    }
    if p != snapshot::Progress::Captured {
        return p;
    }
    let Some(outcome) = snap.poll() else {
        return snapshot::Progress::WriterBehind;
    };
    srv.aof.rewrite = None;
    let _ = finish_rewrite(srv, outcome.map(|_| ()));
    snapshot::Progress::Captured
}

fn finish_rewrite(srv: &mut Server, outcome: Result<(), String>) -> Result<(), String> {
    let secs = srv
        .aof
        .rewrite_started
        .take()
        .map_or(0, |t| t.elapsed().as_secs() as i64);
    srv.aof.last_rewrite_time_s = secs;
    let ok = outcome.is_ok();
    let log = srv.aof.log.as_mut().expect("AOF open");
    let swapped = log.end_rewrite(ok);
    let result = match (outcome, swapped) {
        (Ok(()), Ok(())) => {
            srv.aof.last_rewrite_ok = true;
            srv.aof.consecutive_failures = 0;
            srv.aof.rewrites += 1;
            srv.aof.size_at_rewrite = log.status().current_size;
            log::notice("Background AOF rewrite terminated with success");
            log::notice("Background AOF rewrite finished successfully");
            Ok(())
        }
        (Err(e), _) | (Ok(()), Err(e)) => {
            srv.aof.last_rewrite_ok = false;
            srv.aof.consecutive_failures += 1;
            log::warning(&format!("Background AOF rewrite failed: {e}"));
            Err(e)
        }
    };
    if srv.aof.temporary {
        srv.aof.temporary = false;
        stop(srv);
    }
    result
}

/// Abort a running rewrite (FLUSHALL, SHUTDOWN, appendonly no).
pub fn abort_rewrite(srv: &mut Server) {
    if let Some(snap) = srv.aof.rewrite.take() {
        for db in snap.abort(&mut srv.keyspace) {
            srv.lazyfree.free_db(db);
        }
        srv.aof.rewrite_started = None;
        if let Some(log) = srv.aof.log.as_mut() {
            let _ = log.end_rewrite(false);
        }
        log::notice("Background AOF rewrite aborted");
    }
}

/// CONFIG SET appendonly yes: open a fresh AOF and rewrite its base in
/// the background (Valkey's `startAppendOnly`).
pub fn turn_on(srv: &mut Server, now_ms: i64) -> Result<(), String> {
    if srv.aof.log.is_some() && !srv.aof.temporary {
        return Ok(());
    }
    if srv.aof.log.is_none() {
        open(srv, OpenMode::Fresh)?;
    }
    srv.aof.temporary = false;
    if srv.aof.rewrite.is_none() {
        if srv.persist.snapshot.is_some() || srv.repl.feeds.snapshot.is_some() {
            srv.aof.rewrite_scheduled = true;
        } else {
            begin_rewrite(srv, now_ms)?;
        }
    }
    Ok(())
}

/// The server starts or stops relaying a primary's stream (REPLICAOF):
/// the AOF goes on with the stream of this server's own effects.
pub fn set_relaying(srv: &mut Server, on: bool) {
    // Before the AOF leaves the shared stream: the ranges of it that are
    // not the AOF's.
    hand_skips(srv);
    let reader = srv.effects.set_relaying(on);
    srv.sync_expiry_logging();
    let (Some(reader), Some(log)) = (reader, srv.aof.log.as_mut()) else {
        return;
    };
    if let Err(e) = log.follow(reader) {
        log::warning(&format!(
            "Error writing the AOF before the role change: {e}"
        ));
    }
}

/// CONFIG SET appendonly no, SHUTDOWN: flush, fsync and close.
pub fn stop(srv: &mut Server) {
    abort_rewrite(srv);
    publish(srv);
    if let Some(mut log) = srv.aof.log.take() {
        if let Err(e) = log.close() {
            log::warning(&format!("Error closing the AOF: {e}"));
        }
        srv.effects.detach_aof();
    }
    srv.sync_expiry_logging();
}

/// Cron: a scheduled rewrite starts once nothing else is saving; the
/// AOF grew past `auto-aof-rewrite-percentage` of its size after the last
/// rewrite (and past `auto-aof-rewrite-min-size`): rewrite.
pub fn cron(srv: &mut Server, now_ms: i64) {
    if srv.aof.rewrite.is_some()
        || srv.persist.snapshot.is_some()
        || srv.repl.feeds.snapshot.is_some()
    {
        return;
    }
    if srv.aof.rewrite_scheduled {
        let _ = start_rewrite(srv, now_ms);
        return;
    }
    let Some(log) = srv.aof.log.as_ref() else {
        return;
    };
    let pct = srv.config.auto_aof_rewrite_percentage;
    let size = log.status().current_size;
    if pct == 0 || size < srv.config.auto_aof_rewrite_min_size {
        return;
    }
    let base = srv.aof.size_at_rewrite.max(1);
    let growth = (size.saturating_sub(base)) * 100 / base;
    if growth >= pct {
        log::notice(&format!(
            "Starting automatic rewriting of AOF on {growth}% growth"
        ));
        let _ = start_rewrite(srv, now_ms);
    }
}

/// Finish capturing the running rewrite's base now (SAVE needs the
/// dataset unfrozen); the writer thread completes the file on its own.
pub fn complete_capture(srv: &mut Server, now_ms: i64) {
    if let Some(snap) = srv.aof.rewrite.as_mut() {
        snap.step(&mut srv.keyspace, now_ms, None);
        for db in snap.take_detached() {
            srv.lazyfree.free_db(db);
        }
    }
}

/// After CONFIG SET: appendonly turned on or off, the AOF thread told of
/// new options. The error is the reply (the config is then restored).
pub fn apply_config(
    srv: &mut Server,
    before: &crate::config::Config,
    now_ms: i64,
) -> Result<(), String> {
    let on = srv.config.appendonly;
    if on != before.appendonly {
        if on {
            if let Err(e) = turn_on(srv, now_ms) {
                log::warning(&format!("Unable to turn on AOF: {e}"));
                return Err("ERR CONFIG SET failed (possibly related to argument 'appendonly') - Unable to turn on AOF. Check server logs.".into());
            }
        } else {
            stop(srv);
        }
    }
    let opts = options(srv);
    if let Some(log) = srv.aof.log.as_mut() {
        log.set_options(&opts);
    }
    Ok(())
}

/// DEBUG LOADAOF: write and fsync what was published, empty every
/// database and replay the AOF files on disk into them (with `appendonly
/// no` too: those a BGREWRITEAOF wrote). The replayed commands are
/// neither appended to the AOF again nor sent to replicas (Valkey's
/// loading flag), and the dataset counts as saved.
pub fn reload(srv: &mut Server, now_ms: i64) -> Result<(), String> {
    if srv.persist.is_loading() {
        return Err(crate::compat::LOADING.get().into());
    }
    // A rewrite under way (the one `appendonly yes` starts) is finished
    // here, so that the files hold the whole dataset.
    complete_rewrite(srv, now_ms).map_err(|e| format!("ERR Error rewriting the AOF: {e}"))?;
    if srv.aof.is_on() {
        publish(srv);
        let end = srv.effects.aof_offset();
        if let Some(log) = srv.aof.log.as_mut() {
            log.sync(end)
                .map_err(|e| format!("ERR Error flushing the AOF: {e}"))?;
        }
    }
    let opts = options(srv);
    let lopts = crate::persist::load_options(srv, now_ms);
    let failed = |e: String| {
        log::warning(&format!("Error loading the AOF by DEBUG LOADAOF: {e}"));
        "ERR Error trying to load the AOF files, check server logs.".to_string()
    };
    // Opened before anything is emptied: without AOF files the dataset
    // stays (Valkey exits there).
    let source = match srv.persist.storage.as_mut() {
        Some(storage) => storage.load_aof(&opts, lopts).map_err(failed)?,
        None => None,
    };
    let Some(source) = source else {
        return Err(failed("no manifest".into()));
    };
    crate::persist::empty_data(srv);
    srv.effects.set_muted(true);
    crate::aof_replay::begin(srv, source, false, now_ms);
    let replayed = crate::loading::step(srv, None);
    srv.effects.set_muted(false);
    if let Err(e) = replayed {
        crate::loading::abandon(srv);
        return Err(failed(e));
    }
    srv.persist.dirty = 0;
    log::notice("Append Only File loaded by DEBUG LOADAOF");
    Ok(())
}

/// SHUTDOWN: a running rewrite is abandoned (as Valkey kills its child)
/// and everything published is written and fsynced; the AOF stays open
/// in case the shutdown does not go ahead.
pub fn flush_for_shutdown(srv: &mut Server) {
    abort_rewrite(srv);
    publish(srv);
    let end = srv.effects.aof_offset();
    if let Some(log) = srv.aof.log.as_mut()
        && let Err(e) = log.sync(end)
    {
        log::warning(&format!("Error flushing the AOF at shutdown: {e}"));
    }
}

/// Effects not yet written to the AOF (INFO `aof_buffer_length`,
/// `mem_aof_buffer`); left out of `maxmemory` as Valkey leaves out its
/// AOF buffer.
pub fn buffered(srv: &Server) -> u64 {
    match srv.aof.log.as_ref() {
        Some(log) => srv.effects.aof_offset().saturating_sub(log.written()),
        None => 0,
    }
}
