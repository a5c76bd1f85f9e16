//! Fork-less BGSAVE: the execution thread's half of a point-in-time
//! snapshot.
//!
//! ```text
//!  start: freeze every non-empty db (store::freeze)   aux fields ─► chunk
//!  each loop iteration, ≤ STEP_BUDGET:
//!     for the current db: its pre-images, then freeze_step(STEP_BUCKETS)
//!       each entry ─► rdb::Capture::key (a copy; collections packed)
//!     chunk ≥ CHUNK_BYTES ─► SnapshotSink::push ─► writer thread
//!                            (LZF, CRC64, write, fsync, rename)
//!  all dbs visited ─► last chunk, finish ─► poll for the outcome in cron
//! ```
//!
//! Why it is point-in-time: a frozen database keeps a copy of any key a
//! command changes before the visit reaches it (see `store::freeze`), so
//! the file holds every key as of the instant BGSAVE started, and the
//! extra memory is what was written meanwhile, not a copy of the dataset.
//! Only the cheap part (copying values into tokens) runs here; encoding,
//! compression, the checksum and the syscalls run on the writer thread.
//! When the writer is behind, a chunk is held and capture pauses, so the
//! held memory is bounded by the writer's queue.
//!
//! SAVE, DEBUG RELOAD and SHUTDOWN use the same path to completion
//! ([`save_now`]), with the writer thread still doing the encoding.

use crate::log;
use crate::persist::SnapshotSink;
use crate::server::Server;
use rdb::{AccessWrite, Capture};
use std::time::{Duration, Instant};
use store::Keyspace;

/// Tokens per chunk handed to the writer.
const CHUNK_BYTES: usize = 256 * 1024;
/// Buckets visited between clock reads.
const STEP_BUCKETS: usize = 32;
/// Execution-thread time one background step may take: the most a save
/// adds to a command's wait.
pub const STEP_BUDGET: Duration = Duration::from_micros(250);

/// What a snapshot holds: everything, or less for a replica that asked
/// with `REPLCONF rdb-filter-only` (the AUX fields are always there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RdbContent {
    /// The databases' keys.
    pub data: bool,
    /// FUNCTION libraries.
    pub functions: bool,
}

impl RdbContent {
    pub const ALL: RdbContent = RdbContent {
        data: true,
        functions: true,
    };

    pub fn is_filtered(self) -> bool {
        self != RdbContent::ALL
    }
}

impl Default for RdbContent {
    fn default() -> Self {
        RdbContent::ALL
    }
}

pub struct Snapshot {
    sink: Box<dyn SnapshotSink>,
    /// Databases frozen at the start: (number then, keys, keys with a TTL).
    order: Vec<(usize, u64, u64)>,
    next: usize,
    db_open: bool,
    chunk: Capture,
    /// A chunk the writer had no room for.
    held: Option<Capture>,
    access: AccessWrite,
    /// `rdb-key-save-delay` in µs: capture no faster than one key per.
    key_delay_us: u64,
    /// The last step stopped for the writer or the delay.
    waiting: bool,
    /// Contents a FLUSHDB during the save left to the view, visited and
    /// now to be freed (off this thread).
    detached: Vec<store::Db>,
    finished: bool,
    pub started: Instant,
    pub keys_total: u64,
    pub keys_done: u64,
}

/// What a step left to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// More to capture now.
    Capturing,
    /// The writer is behind: capture resumes once it has room.
    WriterBehind,
    /// Everything captured; the writer finishes on its own.
    Captured,
}

impl Snapshot {
    /// Freeze the dataset as it is now and queue the header's AUX fields.
    pub fn begin(srv: &mut Server, sink: Box<dyn SnapshotSink>, now_ms: i64) -> Snapshot {
        Snapshot::begin_with(srv, sink, now_ms, false, rdb::RDB_VERSION, RdbContent::ALL)
    }

    /// [`Snapshot::begin`] for a reader of RDB `version` (a replica that
    /// reads 10, not 11), holding `content`.
    pub fn begin_for(
        srv: &mut Server,
        sink: Box<dyn SnapshotSink>,
        now_ms: i64,
        version: u16,
        content: RdbContent,
    ) -> Snapshot {
        Snapshot::begin_with(srv, sink, now_ms, false, version, content)
    }

    /// [`Snapshot::begin`] for an AOF base (its `aof-base` AUX field is 1).
    pub fn begin_aof_base(srv: &mut Server, sink: Box<dyn SnapshotSink>, now_ms: i64) -> Snapshot {
        Snapshot::begin_with(srv, sink, now_ms, true, rdb::RDB_VERSION, RdbContent::ALL)
    }

    fn begin_with(
        srv: &mut Server,
        sink: Box<dyn SnapshotSink>,
        now_ms: i64,
        aof_base: bool,
        version: u16,
        content: RdbContent,
    ) -> Snapshot {
        let mut chunk = Capture::for_version(version);
        let t = &mut chunk;
        t.aux(b"redis-ver", crate::config::REDIS_COMPAT_VERSION.as_bytes());
        t.aux(b"redis-bits", b"64");
        t.aux(b"ctime", (now_ms / 1000).to_string().as_bytes());
        t.aux(b"used-mem", srv.used_memory().to_string().as_bytes());
        if let Some((db, id, offset)) = crate::replication::aux_fields(srv) {
            t.aux(b"repl-stream-db", db.to_string().as_bytes());
            t.aux(b"repl-id", id.as_bytes());
            t.aux(b"repl-offset", offset.to_string().as_bytes());
        }
        t.aux(b"aof-base", if aof_base { b"1" } else { b"0" });
        // FUNCTION libraries, before the databases (as Valkey's
        // rdbSaveFunctions).
        if let Some(f) = srv.functions.as_ref().filter(|_| content.functions) {
            for lib in f.libraries() {
                t.raw(&[rdb::consts::OPCODE_FUNCTION2]);
                t.string(&lib.code);
            }
        }
        let mut order = Vec::new();
        let mut keys_total = 0;
        for (i, db) in srv.keyspace.dbs.iter_mut().enumerate() {
            if db.is_empty() || !content.data {
                continue;
            }
            order.push((i, db.len() as u64, db.expires_len() as u64));
            keys_total += db.len() as u64;
            db.freeze(i);
        }
        Snapshot {
            sink,
            order,
            next: 0,
            db_open: false,
            chunk,
            held: None,
            access: access_write(srv),
            key_delay_us: srv.config.rdb_key_save_delay.max(0) as u64,
            waiting: false,
            detached: Vec::new(),
            finished: false,
            started: Instant::now(),
            keys_total,
            keys_done: 0,
        }
    }

    /// Capture until `deadline` (or, with `None`, to the end, waiting for
    /// the writer as needed).
    pub fn step(&mut self, ks: &mut Keyspace, now_ms: i64, deadline: Option<Instant>) -> Progress {
        let p = self.capture(ks, now_ms, deadline);
        self.waiting = p == Progress::WriterBehind;
        p
    }

    fn capture(&mut self, ks: &mut Keyspace, now_ms: i64, deadline: Option<Instant>) -> Progress {
        let wait = deadline.is_none();
        if let Some(c) = self.held.take()
            && !self.hand_over(c, wait)
        {
            return Progress::WriterBehind;
        }
        while self.next < self.order.len() {
            if self.key_delay_us > 0 && !self.throttle(wait) {
                return Progress::WriterBehind;
            }
            let (index, size, expires) = self.order[self.next];
            let db = ks
                .dbs
                .iter_mut()
                .find(|d| d.frozen_index() == Some(index))
                .expect("a frozen database stays in the keyspace");
            let tokens = &mut self.chunk;
            if !self.db_open {
                tokens.select_db(index as u64);
                tokens.resize_db(size, expires);
                self.db_open = true;
            }
            let access = self.access;
            let mut n = 0;
            for e in db.take_preimages() {
                tokens.key(&e, now_ms, access);
                n += 1;
            }
            let buckets = if self.key_delay_us > 0 {
                1
            } else {
                STEP_BUCKETS
            };
            let more = db.freeze_step(buckets, |e| {
                tokens.key(e, now_ms, access);
                n += 1;
            });
            if !more {
                for e in db.take_preimages() {
                    tokens.key(&e, now_ms, access);
                    n += 1;
                }
                self.detached.extend(db.thaw_detached());
                self.next += 1;
                self.db_open = false;
            }
            self.keys_done += n;
            if self.chunk.len() >= CHUNK_BYTES {
                let c = self.chunk.take();
                if !self.hand_over(c, wait) {
                    return Progress::WriterBehind;
                }
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Progress::Capturing;
            }
        }
        if !self.finished {
            // A held chunk went first (above): once this one is handed
            // over, the writer has everything.
            if !self.chunk.is_empty() {
                let c = self.chunk.take();
                if !self.hand_over(c, wait) {
                    return Progress::WriterBehind;
                }
            }
            self.sink.finish();
            self.finished = true;
        }
        Progress::Captured
    }

    /// `rdb-key-save-delay`: true once the save may take the next key
    /// (SAVE sleeps until then; BGSAVE comes back later).
    fn throttle(&self, wait: bool) -> bool {
        // Valkey sleeps after each key it writes: the n-th key is due
        // after n delays, and a save of one key lasts one delay.
        let due = Duration::from_micros(self.key_delay_us.saturating_mul(self.keys_done + 1));
        let elapsed = self.started.elapsed();
        if elapsed >= due {
            return true;
        }
        if wait {
            std::thread::sleep(due - elapsed);
            return true;
        }
        false
    }

    /// False when the writer had no room (the chunk is held).
    fn hand_over(&mut self, c: Capture, wait: bool) -> bool {
        if wait {
            self.sink.push_wait(c);
            return true;
        }
        match self.sink.push(c) {
            Ok(()) => true,
            Err(c) => {
                self.held = Some(c);
                false
            }
        }
    }

    /// Can capture go on right now (the writer is not behind)?
    pub fn ready(&self) -> bool {
        !self.waiting && !self.finished
    }

    /// The writer's outcome, once everything is captured and written.
    pub fn poll(&mut self) -> Option<Result<u64, String>> {
        if !self.finished {
            return None;
        }
        self.sink.poll()
    }

    pub fn wait(&mut self) -> Result<u64, String> {
        self.sink.wait()
    }

    /// Contents left by a FLUSHDB during the save, once visited.
    pub fn take_detached(&mut self) -> Vec<store::Db> {
        std::mem::take(&mut self.detached)
    }

    /// Stop: thaw what is still frozen (returning what is left to free);
    /// the writer drops its temp file.
    pub fn abort(mut self, ks: &mut Keyspace) -> Vec<store::Db> {
        for db in &mut ks.dbs {
            if db.frozen_index().is_some() {
                self.detached.extend(db.thaw_detached());
            }
        }
        self.sink.abort();
        self.detached
    }
}

/// Valkey writes IDLE under an LRU policy and FREQ under LFU.
fn access_write(srv: &Server) -> AccessWrite {
    use crate::config::MaxmemoryPolicy as P;
    match srv.config.maxmemory_policy {
        P::AllkeysLru | P::VolatileLru => AccessWrite::Lru,
        P::AllkeysLfu | P::VolatileLfu => AccessWrite::Lfu {
            decay_time: srv.config.lfu_decay_time,
        },
        _ => AccessWrite::None,
    }
}

/// BGSAVE while an AOF rewrite captures (Valkey's text for a busy child).
pub const AOF_REWRITE_ACTIVE: &str = "ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible";

/// BGSAVE: start a background save. The error is Valkey's reply text.
pub fn start_bgsave(srv: &mut Server, now_ms: i64) -> Result<(), String> {
    // A replica's full sync holds the one frozen view (Valkey's child for
    // a replication BGSAVE answers the same).
    if srv.persist.snapshot.is_some() || srv.repl.feeds.snapshot.is_some() {
        return Err("ERR Background save already in progress".into());
    }
    if srv.aof.rewrite.is_some() {
        return Err(AOF_REWRITE_ACTIVE.into());
    }
    let version = rdb::RDB_VERSION;
    let (sink, _) = open_background_save(srv, now_ms, version).map_err(|e| format!("ERR {e}"))?;
    run_background_save(srv, sink, now_ms, version);
    Ok(())
}

/// A background save's first half (BGSAVE's, or a disk-based full
/// sync's): counted when it starts, as Valkey's rdbSaveBackground, and
/// its file opened, in RDB `version`. Returns the sink and the file's name.
pub(crate) fn open_background_save(
    srv: &mut Server,
    now_ms: i64,
    version: u16,
) -> Result<(Box<dyn SnapshotSink>, String), String> {
    let opts = crate::persist::SaveOptions {
        version,
        ..crate::persist::save_options(srv)
    };
    let Some(storage) = srv.persist.storage.as_mut() else {
        return Err("no storage configured".into());
    };
    srv.persist.saves += 1;
    srv.persist.last_bgsave_try_s = now_ms / 1000;
    match storage.save(&opts) {
        Ok(sink) => Ok((sink, opts.filename)),
        Err(e) => {
            log::warning(&format!("Can't save in background: {e}"));
            srv.persist.last_bgsave_ok = false;
            Err(e)
        }
    }
}

/// Its second half: the capture for a reader of RDB `version` begins.
pub(crate) fn run_background_save(
    srv: &mut Server,
    sink: Box<dyn SnapshotSink>,
    now_ms: i64,
    version: u16,
) {
    let snap = Snapshot::begin_for(srv, sink, now_ms, version, RdbContent::ALL);
    srv.persist.dirty_at_bgsave = srv.persist.dirty;
    srv.persist.snapshot = Some(snap);
    log::notice("Background saving started");
}

/// One slice of the running BGSAVE; finishes it when the writer is done.
/// Returns what is left.
pub fn background_step(srv: &mut Server, now_ms: i64) -> Progress {
    let Some(snap) = srv.persist.snapshot.as_mut() else {
        return Progress::Captured;
    };
    let p = snap.step(
        &mut srv.keyspace,
        now_ms,
        Some(Instant::now() + STEP_BUDGET),
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
    let snap = srv.persist.snapshot.take().expect("checked above");
    let secs = snap.started.elapsed().as_secs() as i64;
    let p = &mut srv.persist;
    p.last_bgsave_time_s = secs;
    match outcome {
        Ok(_) => {
            p.dirty = p.dirty.saturating_sub(p.dirty_at_bgsave);
            p.last_save_s = now_ms / 1000;
            p.last_bgsave_ok = true;
            log::notice("Background saving terminated with success");
        }
        Err(e) => {
            p.last_bgsave_ok = false;
            log::warning(&format!("Background saving error: {e}"));
        }
    }
    // Replicas waiting for this save (`repl-diskless-sync no`).
    let ok = p.last_bgsave_ok;
    crate::replication::primary::disk_save_done(srv, ok, Some(now_ms));
    Progress::Captured
}

/// Abort a running BGSAVE (FLUSHALL, SHUTDOWN, DEBUG RELOAD); replicas
/// waiting for it fail their sync.
pub fn abort_bgsave(srv: &mut Server) {
    if let Some(snap) = srv.persist.snapshot.take() {
        for db in snap.abort(&mut srv.keyspace) {
            srv.lazyfree.free_db(db);
        }
        log::notice("Background saving aborted");
        crate::replication::primary::disk_save_done(srv, false, None);
    }
}

/// SAVE: write the dataset now, blocking every client until it is on disk.
pub fn save_now(srv: &mut Server, now_ms: i64) -> Result<(), String> {
    if srv.persist.snapshot.is_some() {
        return Err("ERR Background save already in progress".into());
    }
    // One frozen view at a time: a rewrite's capture finishes first, a
    // replica's full sync is abandoned (it will ask again).
    crate::aof::complete_capture(srv, now_ms);
    crate::replication::primary::abort_sync(srv, "its full sync was aborted by a save");
    let opts = crate::persist::save_options(srv);
    let Some(storage) = srv.persist.storage.as_mut() else {
        return Err("ERR no storage configured".into());
    };
    let sink = storage.save(&opts).map_err(|e| {
        log::warning(&format!("Failed opening the temp RDB file for saving: {e}"));
        "ERR".to_string()
    })?;
    let mut snap = Snapshot::begin(srv, sink, now_ms);
    snap.step(&mut srv.keyspace, now_ms, None);
    match snap.wait() {
        Ok(_) => {
            let p = &mut srv.persist;
            p.dirty = 0;
            p.last_save_s = now_ms / 1000;
            p.last_bgsave_ok = true;
            p.saves += 1;
            log::notice("DB saved on disk");
            Ok(())
        }
        Err(e) => {
            log::warning(&format!("Error saving DB on disk: {e}"));
            Err("ERR".into())
        }
    }
}

/// Valkey's `prepareForShutdown`, the saving part: a running BGSAVE is
/// abandoned, then the dataset is saved if save points are set (unless
/// NOSAVE) or SAVE was given. `save`: `Some(true)` SAVE, `Some(false)`
/// NOSAVE. A failed save stops the shutdown unless `force`: false means
/// the server must keep running.
pub fn prepare_shutdown(srv: &mut Server, now_ms: i64, save: Option<bool>, force: bool) -> bool {
    if srv.persist.snapshot.is_some() {
        log::warning("There is a child saving an .rdb. Killing it!");
        abort_bgsave(srv);
    }
    if srv.aof.is_on() {
        log::notice("Calling fsync() on the AOF file.");
        crate::aof::flush_for_shutdown(srv);
    }
    let wanted = save.unwrap_or(!srv.config.save_points.is_empty());
    if !wanted || srv.persist.storage.is_none() {
        return true;
    }
    log::notice("Saving the final RDB snapshot before exiting.");
    crate::supervisor::saving_final_snapshot();
    match save_now(srv, now_ms) {
        Ok(()) => true,
        Err(_) if force => {
            log::warning("Error trying to save the DB. Exit anyway.");
            true
        }
        Err(_) => {
            log::warning("Error trying to save the DB, can't exit.");
            crate::supervisor::save_failed_staying_up();
            false
        }
    }
}
