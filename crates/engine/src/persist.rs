//! Persistence as the engine sees it: the bookkeeping Valkey keeps for RDB
//! (the dirty counter, save points, last save and its status, loading),
//! and the two interfaces through which files are written and read by
//! someone else's threads ([`Storage`], implemented by `ringkv-persist`).
//!
//! ```text
//!  BGSAVE / save point ─► Storage::save ─► SnapshotSink (writer thread)
//!        │                                     ▲ rdb::Capture chunks
//!        └─► crate::snapshot: freeze dbs, capture in slices ─┘
//!  start-up / DEBUG RELOAD ─► Storage::load ─► LoadSource (loader threads)
//!        └─► crate::loading: insert decoded keys in slices, -LOADING meanwhile
//! ```
//!
//! The engine never opens a file: with no `Storage` (the command tests)
//! SAVE and BGSAVE answer with an error and nothing is loaded.

use crate::loading::Loading;
use crate::server::Server;
use crate::snapshot::Snapshot;
use rdb::Capture;
use store::{AccessPolicy, EncodingLimits, Entry};

/// How a save writes its file.
#[derive(Clone, Debug)]
pub struct SaveOptions {
    /// `dbfilename`, relative to the working directory (`dir`).
    pub filename: String,
    pub compress: bool,
    pub checksum: bool,
    /// `rdb-key-save-delay`: microseconds a save takes per key at least
    /// (tests use it to keep a BGSAVE running while they write).
    pub key_save_delay_us: i64,
    /// The RDB version the header names; the captures fed to the sink are
    /// made for it (a disk sync for a replica that reads only 10).
    pub version: u16,
    /// `rdb-save-incremental-fsync` (`aof-rewrite-incremental-fsync` for an
    /// AOF base): fdatasync every 4 MiB written, so that the kernel never
    /// holds a whole snapshot's dirty pages to flush at once.
    pub incremental_fsync: bool,
}

/// The writer of one snapshot file: it takes part of the RDB stream at a
/// time, as captured on the execution thread.
pub trait SnapshotSink: Send {
    /// Queue a chunk; given back when the writer is behind (try later).
    fn push(&mut self, chunk: Capture) -> Result<(), Capture>;
    /// Queue a chunk, waiting for room (SAVE).
    fn push_wait(&mut self, chunk: Capture);
    /// No more chunks: the writer adds the trailer, fsyncs and renames.
    fn finish(&mut self);
    /// The outcome once the writer is done: bytes written, or why not.
    fn poll(&mut self) -> Option<Result<u64, String>>;
    /// Wait for the outcome.
    fn wait(&mut self) -> Result<u64, String>;
    /// Stop writing; the temporary file is removed, the old dump kept.
    fn abort(&mut self);
}

/// What the execution thread sends a sink's writer thread.
pub enum SinkMsg {
    Chunk(Capture),
    /// No more chunks: write the trailer and report.
    Finish,
}

/// The execution thread's end of a [`SnapshotSink`] whose writer is a
/// thread of someone else's (a file's, a replica's socket's): chunks go
/// over a bounded channel, so capture runs at most `queue` chunks ahead,
/// and the outcome comes back on another. The writer stops when the
/// chunk channel closes without [`SinkMsg::Finish`] (an abort).
pub struct ChannelSink {
    tx: Option<std::sync::mpsc::SyncSender<SinkMsg>>,
    done: std::sync::mpsc::Receiver<Result<u64, String>>,
    outcome: Option<Result<u64, String>>,
    /// Joined once the outcome is in, or on drop.
    thread: Option<std::thread::JoinHandle<()>>,
    /// Who writes, for the error when it died without a word.
    writer: &'static str,
}

/// The writer's ends of a [`ChannelSink`].
pub struct SinkWriter {
    pub chunks: std::sync::mpsc::Receiver<SinkMsg>,
    pub outcome: std::sync::mpsc::Sender<Result<u64, String>>,
}

impl ChannelSink {
    pub fn new(queue: usize, writer: &'static str) -> (ChannelSink, SinkWriter) {
        let (tx, chunks) = std::sync::mpsc::sync_channel(queue);
        let (outcome, done) = std::sync::mpsc::channel();
        let sink = ChannelSink {
            tx: Some(tx),
            done,
            outcome: None,
            thread: None,
            writer,
        };
        (sink, SinkWriter { chunks, outcome })
    }

    /// The writer's thread, joined when it has reported.
    pub fn set_thread(&mut self, t: std::thread::JoinHandle<()>) {
        self.thread = Some(t);
    }

    fn collect(&mut self, block: bool) -> Option<Result<u64, String>> {
        use std::sync::mpsc::TryRecvError;
        if self.outcome.is_none() {
            let died = || Err(format!("the {} died", self.writer));
            let got = if block {
                Some(self.done.recv().unwrap_or_else(|_| died()))
            } else {
                match self.done.try_recv() {
                    Ok(r) => Some(r),
                    Err(TryRecvError::Empty) => None,
                    Err(TryRecvError::Disconnected) => Some(died()),
                }
            };
            if got.is_some()
                && let Some(t) = self.thread.take()
            {
                let _ = t.join();
            }
            self.outcome = got;
        }
        self.outcome.clone()
    }
}

impl SnapshotSink for ChannelSink {
    fn push(&mut self, chunk: Capture) -> Result<(), Capture> {
        use std::sync::mpsc::TrySendError;
        let Some(tx) = &self.tx else {
            return Ok(());
        };
        match tx.try_send(SinkMsg::Chunk(chunk)) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(SinkMsg::Chunk(c))) => Err(c),
            // The writer stopped on an error: the outcome tells.
            Err(_) => Ok(()),
        }
    }

    fn push_wait(&mut self, chunk: Capture) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(SinkMsg::Chunk(chunk));
        }
    }

    fn finish(&mut self) {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(SinkMsg::Finish);
        }
    }

    fn poll(&mut self) -> Option<Result<u64, String>> {
        self.collect(false)
    }

    fn wait(&mut self) -> Result<u64, String> {
        self.finish();
        self.collect(true)
            .unwrap_or_else(|| Err(format!("the {} died", self.writer)))
    }

    fn abort(&mut self) {
        // Dropping the sender ends the writer (which cleans up after
        // itself); wait for it.
        self.tx = None;
        let _ = self.collect(true);
    }
}

impl Drop for ChannelSink {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A key decoded by the loader, ready to insert.
pub struct LoadedKey {
    pub db: usize,
    pub hash: u64,
    pub entry: Entry,
}

pub enum LoadStep {
    Keys(Vec<LoadedKey>),
    /// A FUNCTION library's source (RDB's FUNCTION2).
    Function(Vec<u8>),
    /// Commands to replay (an AOF's), run before the load reads on.
    Commands(crate::aof::Commands),
    /// Nothing decoded yet; ask again.
    Pending,
    /// The whole file was read and its checksum verified; keys that had
    /// expired were skipped (counted here).
    Done {
        expired: u64,
        /// The replication stream the file was cut from, if it says.
        repl: Option<SavedReplication>,
    },
    Failed(String),
}

/// What an RDB file says about the replication stream it was cut from
/// (its AUX fields `repl-id`, `repl-offset`, `repl-stream-db`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedReplication {
    pub replid: String,
    pub offset: u64,
    /// The database the stream had selected (-1: none).
    pub stream_db: i64,
}

impl SavedReplication {
    /// Gather it from a file's AUX fields: `Some` once all three are seen
    /// and valid.
    pub fn from_aux(fields: &[(Vec<u8>, Vec<u8>)]) -> Option<SavedReplication> {
        let get = |k: &[u8]| {
            fields
                .iter()
                .rev()
                .find(|(key, _)| key == k)
                .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
        };
        let replid = get(b"repl-id").filter(|id| id.len() == 40)?;
        let offset = get(b"repl-offset")?.parse().ok()?;
        let stream_db = get(b"repl-stream-db")
            .and_then(|d| d.parse().ok())
            .unwrap_or(-1);
        Some(SavedReplication {
            replid,
            offset,
            stream_db,
        })
    }
}

/// The reader of one snapshot file.
pub trait LoadSource: Send {
    /// The next decoded keys; with `wait`, blocks until some are ready.
    fn next(&mut self, wait: bool) -> LoadStep;
    /// (bytes read, file size) for INFO's loading progress.
    fn progress(&self) -> (u64, u64);
}

/// How a load builds its values.
#[derive(Clone, Copy, Debug)]
pub struct LoadOptions {
    pub limits: EncodingLimits,
    pub policy: AccessPolicy,
    pub now_ms: i64,
    pub databases: usize,
    /// `key-load-delay`: microseconds the decoder waits per key (tests use
    /// it to watch a load in progress).
    pub key_load_delay_us: i64,
}

/// Files, provided by the server.
pub trait Storage: Send {
    fn save(&mut self, opts: &SaveOptions) -> Result<Box<dyn SnapshotSink>, String>;
    /// `Ok(None)` when there is no such file. A file that is not an RDB
    /// file, or of a version we cannot read, fails here.
    fn load(
        &mut self,
        filename: &str,
        opts: LoadOptions,
    ) -> Result<Option<Box<dyn LoadSource>>, String>;
    /// An RDB read from `input` as it arrives (`name` for messages): a
    /// replica's diskless load.
    fn load_stream(
        &mut self,
        name: &str,
        input: Box<dyn std::io::Read + Send>,
        opts: LoadOptions,
    ) -> Result<Box<dyn LoadSource>, String> {
        let _ = (name, input, opts);
        Err("this storage cannot load from a stream".into())
    }
    /// Remove a snapshot file (`rdb-del-sync-files`): `Ok(false)` when
    /// there was none.
    fn remove(&mut self, filename: &str) -> Result<bool, String> {
        let _ = filename;
        Ok(false)
    }
    /// Open the AOF directory for appending what `stream` publishes.
    fn open_aof(
        &mut self,
        opts: &crate::aof::AofOptions,
        stream: effects::Reader,
        mode: crate::aof::OpenMode,
    ) -> Result<Box<dyn crate::aof::AppendLog>, String> {
        let _ = (opts, stream, mode);
        Err("this storage keeps no append-only file".into())
    }
    /// `Ok(None)` when the AOF directory has no manifest. A manifest or
    /// file that cannot be read fails here or in the source.
    fn load_aof(
        &mut self,
        opts: &crate::aof::AofOptions,
        load: LoadOptions,
    ) -> Result<Option<Box<dyn crate::aof::AofSource>>, String> {
        let _ = (opts, load);
        Ok(None)
    }
}

/// Seconds between BGSAVE retries after a failed one (Valkey's
/// `CONFIG_BGSAVE_RETRY_DELAY`).
const BGSAVE_RETRY_DELAY_S: i64 = 5;

/// What INFO persistence and LASTSAVE report, and what save points read.
pub struct Persist {
    pub storage: Option<Box<dyn Storage>>,
    /// Changes since the last successful save (`rdb_changes_since_last_save`).
    pub dirty: u64,
    /// `dirty` when the running BGSAVE started: what a success subtracts.
    pub dirty_at_bgsave: u64,
    /// Unix seconds of the last successful save (LASTSAVE).
    pub last_save_s: i64,
    pub last_bgsave_ok: bool,
    pub last_bgsave_try_s: i64,
    pub last_bgsave_time_s: i64,
    pub saves: u64,
    /// The BGSAVE in progress.
    pub snapshot: Option<Snapshot>,
    /// BGSAVE SCHEDULE: start one as soon as nothing else runs.
    pub bgsave_scheduled: bool,
    /// The load in progress (start-up).
    pub loading: Option<Loading>,
    pub last_load_loaded: u64,
    pub last_load_expired: u64,
}

impl Persist {
    pub fn new(now_s: i64) -> Persist {
        Persist {
            storage: None,
            dirty: 0,
            dirty_at_bgsave: 0,
            last_save_s: now_s,
            last_bgsave_ok: true,
            last_bgsave_try_s: 0,
            last_bgsave_time_s: -1,
            saves: 0,
            snapshot: None,
            bgsave_scheduled: false,
            loading: None,
            last_load_loaded: 0,
            last_load_expired: 0,
        }
    }
    pub fn bgsave_in_progress(&self) -> bool {
        self.snapshot.is_some()
    }
    pub fn is_loading(&self) -> bool {
        self.loading.is_some()
    }
    /// A load is filling the live databases (Valkey's `server.loading`),
    /// not one that serves the old dataset until it is whole
    /// (`async_loading`).
    pub fn loading_in_place(&self) -> bool {
        self.loading.as_ref().is_some_and(|l| !l.serving())
    }
}

/// Are writes refused with Valkey's MISCONF (`compat::MISCONF`)? While
/// the last background save failed, save points are set and
/// `stop-writes-on-bgsave-error` is yes.
pub fn writes_denied(srv: &Server) -> bool {
    srv.config.stop_writes_on_bgsave_error
        && !srv.config.save_points.is_empty()
        && !srv.persist.last_bgsave_ok
}

/// The save options as configured now.
pub fn save_options(srv: &Server) -> SaveOptions {
    SaveOptions {
        filename: srv.config.dbfilename.clone(),
        compress: srv.config.rdbcompression,
        checksum: srv.config.rdbchecksum,
        key_save_delay_us: srv.config.rdb_key_save_delay,
        version: rdb::RDB_VERSION,
        incremental_fsync: srv.config.get("rdb-save-incremental-fsync").as_deref() != Some("no"),
    }
}

/// The load options as configured now.
pub fn load_options(srv: &Server, now_ms: i64) -> LoadOptions {
    LoadOptions {
        limits: srv.config.encoding,
        policy: crate::evict::access_policy(srv),
        now_ms,
        databases: srv.keyspace.dbs.len(),
        key_load_delay_us: srv.config.key_load_delay,
    }
}

/// Cron: a save point reached (or a scheduled BGSAVE) starts a BGSAVE, as
/// Valkey's `serverCron`; a failed one is retried after 5 s.
pub fn cron(srv: &mut Server, now_ms: i64) {
    if srv.persist.storage.is_none() || srv.persist.is_loading() {
        return;
    }
    if srv.persist.snapshot.is_some()
        || srv.aof.rewrite.is_some()
        || srv.repl.feeds.snapshot.is_some()
    {
        return;
    }
    let now_s = now_ms / 1000;
    if srv.persist.bgsave_scheduled {
        srv.persist.bgsave_scheduled = false;
        let _ = crate::snapshot::start_bgsave(srv, now_ms);
        return;
    }
    let p = &srv.persist;
    let retry_ok = p.last_bgsave_ok || now_s - p.last_bgsave_try_s > BGSAVE_RETRY_DELAY_S;
    let hit = srv
        .config
        .save_points
        .iter()
        .find(|&&(secs, changes)| {
            p.dirty >= changes && now_s - p.last_save_s > secs as i64 && retry_ok
        })
        .copied();
    if let Some((secs, changes)) = hit {
        crate::log::notice(&format!("{changes} changes in {secs} seconds. Saving..."));
        let _ = crate::snapshot::start_bgsave(srv, now_ms);
    }
}

/// DEBUG RELOAD's options (Valkey's names).
#[derive(Clone, Copy, Debug)]
pub struct ReloadOptions {
    /// Save the dataset first (not NOSAVE: load the file already there).
    pub save: bool,
    /// Empty the databases first (not NOFLUSH: load beside what is held).
    pub flush: bool,
    /// A key both held and in the file takes the file's value (MERGE);
    /// without it such a key fails the load.
    pub merge: bool,
}

/// Empty every database and drop the function libraries before a reload
/// (Valkey's emptyData: the functions go with the keys).
pub fn empty_data(srv: &mut Server) {
    for db in &mut srv.keyspace.dbs {
        db.clear();
    }
    srv.functions = None;
}

/// DEBUG RELOAD: save, empty every database, load the file back (all
/// before any other command runs), each step as `opts` say.
pub fn debug_reload(srv: &mut Server, now_ms: i64, opts: ReloadOptions) -> Result<(), String> {
    // One load at a time (DEBUG runs during a load, as Valkey's).
    if srv.persist.is_loading() {
        return Err(crate::compat::LOADING.get().into());
    }
    if opts.save {
        crate::snapshot::save_now(srv, now_ms)?;
    }
    if opts.flush {
        empty_data(srv);
    }
    let failed = |e: String| {
        crate::log::warning(&format!("Error loading the RDB dump: {e}"));
        "ERR Error trying to load the RDB dump, check server logs.".to_string()
    };
    if !crate::loading::start(srv, now_ms).map_err(failed)? {
        return Err(failed("the file is gone".into()));
    }
    if let Some(l) = srv.persist.loading.as_mut() {
        l.merge = opts.merge;
    }
    if let Err(e) = crate::loading::step(srv, None) {
        // What was loaded stays; the load itself is over.
        crate::loading::abandon(srv);
        return Err(failed(e));
    }
    Ok(())
}
