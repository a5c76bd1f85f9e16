//! The open AOF: the `aof-writer` thread that appends the effects stream
//! to the current incr file, the `aof-bio` thread that fdatasyncs it in
//! the background (`appendfsync everysec`) and deletes replaced files (as
//! Valkey's bio threads), and the file switches of a rewrite (new incr
//! file, manifest swap).
//!
//! ```text
//!  engine: write(published) (everysec, no) ─► same Mutex, on the caller: write
//!          (after an error: as wake; never waits for a background fsync)
//!          wake(published) ─► target, unpark ─► aof-writer: write [written, target)
//!          sync(offset) (always) ─► same Mutex, on the caller: write + fdatasync
//!  aof-writer, everysec: ≤ 1/s ─► aof-bio: fdatasync(clone of the fd)
//!  begin_rewrite(offset): flush to offset, new incr file, manifest ─► base sink
//!  end_rewrite(ok): manifest = new base + new incr ─► aof-bio: unlink old
//!  skip(ranges): stream bytes for replicas only (PUBLISH, PING, GETACK),
//!          cut out of what is pulled before anything is written
//!  follow(reader) (role change): old stream written + fsynced, then the
//!          new reader's offsets are the log's (a fsync epoch for aof-bio)
//! ```
//!
//! Everything about the files lives in one `State` behind a Mutex taken
//! by the writer thread and by the engine's calls; the figures INFO reads
//! (and the write-error flag read before every write command) are atomics
//! beside it, so reading them never waits for a disk. Writes only ever
//! end at offsets the engine passed to `write`, `wake` or `sync` (ends of execution
//! units), and a failed write is cut back off the file, so the file never
//! ends inside a command unless the process dies in the middle of a write.

use super::manifest::{self, Entry, Kind, Manifest};
use super::{AofDir, lock, strerror};
use crate::writer::start_save;
use engine::aof::{AofOptions, AofStatus, AppendLog, FsyncPolicy, OpenMode};
use engine::log;
use engine::persist::{SaveOptions, SnapshotSink};
use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{IoSlice, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A failed write is retried this often.
const RETRY: Duration = Duration::from_secs(1);
/// `everysec`.
const FSYNC_EVERY: Duration = Duration::from_secs(1);
/// `AOF_WRITE_LOG_ERROR_RATE`.
const ERROR_LOG_EVERY: Duration = Duration::from_secs(30);
/// Slices per writev(2).
const MAX_IOV: usize = 256;
/// After a round that wrote, the writer waits this long for more before
/// it writes again, and stays marked as notified meanwhile, so the
/// execution thread does not wake it batch after batch: under load one
/// write(2) per LINGER instead of one wake-up and write per batch. It is
/// also about what a kill -9 can take under `everysec` or `no` (the
/// writes acknowledged in the last LINGER).
const LINGER: Duration = Duration::from_millis(1);

pub(crate) struct FileLog {
    sh: Arc<Shared>,
    writer: Option<JoinHandle<()>>,
    bio: Option<JoinHandle<()>>,
    /// The last offset passed to `wake`.
    woken: u64,
    closed: bool,
}

struct Shared {
    st: Mutex<State>,
    /// The latest offset passed to `wake`.
    target: AtomicU64,
    /// A wake-up is pending (the writer clears it before it looks).
    notified: AtomicBool,
    stop: AtomicBool,
    /// `errors` holds something (read before every write command).
    failed: AtomicBool,
    errors: Mutex<Errors>,
    written: AtomicU64,
    /// Stream offset up to which the file is known fsynced (WAITAOF).
    fsynced: AtomicU64,
    /// Bumped when the log follows another stream: a background fsync
    /// started before counts offsets of the old one.
    epoch: AtomicU64,
    current_size: AtomicU64,
    base_size: AtomicU64,
    bio: Bio,
}

#[derive(Default)]
struct Errors {
    write: Option<String>,
    fsync: Option<String>,
}

/// Work for the `aof-bio` thread, done in order.
enum Job {
    /// fdatasync a clone of the current fd, or a replaced incr file
    /// before it is closed; it holds the stream up to this offset (of the
    /// stream the log followed in this epoch).
    Fsync(File, u64, u64),
    /// A file the manifest no longer lists.
    Unlink(PathBuf),
}

struct Bio {
    q: Mutex<BioJobs>,
    cv: Condvar,
    /// Fsync jobs queued or running (`aof_pending_bio_fsync`).
    fsyncs: AtomicUsize,
}

#[derive(Default)]
struct BioJobs {
    jobs: VecDeque<Job>,
    stop: bool,
}

/// A rewrite between begin_rewrite and end_rewrite.
struct Rewrite {
    base: Entry,
    /// The first incr file written after the rewrite's offset.
    first_incr: i64,
}

struct State {
    dir: AofDir,
    opts: AofOptions,
    reader: effects::Reader,
    /// Taken from the reader, not yet written (with the skipped ranges
    /// cut out: offsets may jump between slices).
    pending: VecDeque<effects::Slice>,
    /// Stream ranges not to write (commands for replicas only), in order.
    skips: VecDeque<(u64, u64)>,
    /// A `#TS:` annotation not yet (wholly) written.
    prefix: Vec<u8>,
    /// The file ends at a unit boundary (a short write that could not be
    /// cut back leaves it inside one: no annotation may go there).
    at_boundary: bool,
    last_ts: i64,
    file: File,
    incr: Entry,
    file_len: u64,
    /// `file_len` when the last fsync (any) started.
    fsync_started: u64,
    /// `file_len` covered by the last fdatasync that returned (on a
    /// caller's thread; background ones are not waited for).
    fsynced: u64,
    last_fsync: Instant,
    /// The manifest on disk (Existing, or after a Fresh log's first
    /// rewrite), or the old one a Fresh log will replace.
    disk: Option<Manifest>,
    /// The current incr file is in `disk`.
    listed: bool,
    /// Bytes of the listed incr files before the current one.
    others: u64,
    base_size: u64,
    rewrite: Option<Rewrite>,
    failed_at: Option<Instant>,
    error_logged: Option<Instant>,
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn file_len(path: &Path) -> u64 {
    fs::metadata(path).map_or(0, |m| m.len())
}

fn open_append(path: &Path, truncate: bool) -> std::io::Result<File> {
    let f = OpenOptions::new().append(true).create(true).open(path)?;
    if truncate {
        f.set_len(0)?;
    }
    Ok(f)
}

/// write(2) all of `bufs`, retrying on EINTR and short writes: the bytes
/// written, and the error that stopped it.
fn write_all(file: &mut File, mut bufs: &mut [IoSlice<'_>]) -> (u64, Option<std::io::Error>) {
    let mut total = 0u64;
    while !bufs.is_empty() {
        let n = bufs.len().min(MAX_IOV);
        match file.write_vectored(&bufs[..n]) {
            Ok(0) => return (total, Some(std::io::ErrorKind::WriteZero.into())),
            Ok(k) => {
                total += k as u64;
                IoSlice::advance_slices(&mut bufs, k);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return (total, Some(e)),
        }
    }
    (total, None)
}

impl State {
    /// Stream offset of the first byte not yet written.
    fn written(&self) -> u64 {
        self.pending
            .front()
            .map_or(self.reader.offset(), |s| s.offset())
    }

    fn rewriting_quiet(&self) -> bool {
        self.opts.no_fsync_on_rewrite && self.rewrite.is_some()
    }

    fn publish(&self, sh: &Shared) {
        sh.written.store(self.written(), Ordering::Release);
        sh.current_size.store(
            self.base_size + self.others + self.file_len,
            Ordering::Relaxed,
        );
        sh.base_size.store(self.base_size, Ordering::Relaxed);
    }

    /// Take what the reader has, up to `upto`.
    fn pull(&mut self, upto: u64) {
        while self.reader.offset() < upto {
            match self.reader.next_slice() {
                Some(s) => self.pending.push_back(s),
                None => break,
            }
        }
    }

    /// Cut the registered skips out of what is pulled (one pass, however
    /// many there are).
    fn cut_skips(&mut self) {
        if self.skips.is_empty() {
            return;
        }
        let mut out = VecDeque::with_capacity(self.pending.len() + self.skips.len());
        for mut s in std::mem::take(&mut self.pending) {
            loop {
                let (s0, s1) = (s.offset(), s.offset() + s.len() as u64);
                while self.skips.front().is_some_and(|&(_, b)| b <= s0) {
                    self.skips.pop_front();
                }
                match self.skips.front().copied() {
                    Some((a, b)) if a < s1 => {
                        if a > s0 {
                            out.push_back(s.truncate((a - s0) as usize));
                        }
                        if b >= s1 {
                            break;
                        }
                        s = s.split_from((b - s0) as usize);
                    }
                    _ => {
                        out.push_back(s);
                        break;
                    }
                }
            }
        }
        self.pending = out;
        let pulled = self.reader.offset();
        while self.skips.front().is_some_and(|&(_, b)| b <= pulled) {
            self.skips.pop_front();
        }
        if let Some(f) = self.skips.front_mut() {
            f.0 = f.0.max(pulled);
        }
    }

    /// Forget what is pulled before stream offset `offset`.
    fn drop_before(&mut self, offset: u64) {
        while let Some(front) = self.pending.pop_front() {
            let end = front.offset() + front.len() as u64;
            if end > offset {
                let keep = offset.saturating_sub(front.offset()) as usize;
                self.pending.push_front(front.split_from(keep));
                break;
            }
        }
        while self.skips.front().is_some_and(|&(_, b)| b <= offset) {
            self.skips.pop_front();
        }
    }

    /// Drop `n` written (or skipped) bytes: the prefix first, then stream.
    fn consume(&mut self, mut n: u64) {
        let p = (n as usize).min(self.prefix.len());
        self.prefix.drain(..p);
        n -= p as u64;
        while n > 0 {
            let Some(front) = self.pending.pop_front() else {
                break;
            };
            let len = front.len() as u64;
            if n < len {
                self.pending.push_front(front.split_from(n as usize));
                break;
            }
            n -= len;
        }
    }

    /// Write the stream up to `upto` (or as far as it is published).
    fn flush(&mut self, sh: &Shared, upto: u64) -> Result<(), String> {
        self.pull(upto);
        self.cut_skips();
        let start = self.written();
        let end = upto.min(self.reader.offset());
        if end <= start && self.prefix.is_empty() {
            // Skips cut at the end move `written` on with nothing to write.
            if sh.written.load(Ordering::Acquire) != start {
                self.publish(sh);
            }
            return Ok(());
        }
        if end > start && self.opts.timestamps && self.prefix.is_empty() && self.at_boundary {
            let now = unix_now();
            if now > self.last_ts {
                self.last_ts = now;
                self.prefix = format!("#TS:{now}\r\n").into_bytes();
            }
        }
        let mut iov = Vec::with_capacity(self.pending.len() + 1);
        if !self.prefix.is_empty() {
            iov.push(IoSlice::new(&self.prefix));
        }
        let mut expected = self.prefix.len() as u64;
        for s in &self.pending {
            if s.offset() >= end {
                break;
            }
            let n = (s.len() as u64).min(end - s.offset()) as usize;
            iov.push(IoSlice::new(&s[..n]));
            expected += n as u64;
        }
        let (n, err) = write_all(&mut self.file, &mut iov);
        drop(iov);
        let Some(e) = err else {
            self.consume(n);
            self.file_len += n;
            self.at_boundary = true;
            self.failed_at = None;
            self.publish(sh);
            if sh.clear_write_error() {
                log::notice("AOF write error looks solved. The server can write again.");
            }
            return Ok(());
        };
        let can_log = self
            .error_logged
            .is_none_or(|t| t.elapsed() > ERROR_LOG_EVERY);
        if can_log {
            self.error_logged = Some(Instant::now());
        }
        let text = strerror(&e);
        let mut kept = 0;
        if n == 0 {
            if can_log {
                log::warning(&format!("Error writing to the AOF file: {text}"));
            }
        } else {
            if can_log {
                log::warning(&format!(
                    "Short write while writing to the AOF file: (nwritten={n}, expected={expected})"
                ));
            }
            if let Err(te) = self.file.set_len(self.file_len) {
                if can_log {
                    log::warning(&format!(
                        "Could not remove short write from the append-only file. The server may refuse to load the AOF the next time it starts.  ftruncate: {}",
                        strerror(&te)
                    ));
                }
                // Those bytes stay: go on after them next time.
                kept = n;
                self.at_boundary = false;
            }
        }
        self.consume(kept);
        self.file_len += kept;
        self.failed_at = Some(Instant::now());
        self.publish(sh);
        sh.set_error(|e| e.write = Some(text.clone()));
        Err(text)
    }

    /// fdatasync on this thread.
    fn fsync_now(&mut self, sh: &Shared) -> Result<(), String> {
        if self.fsynced >= self.file_len {
            return Ok(());
        }
        let len = self.file_len;
        let covers = self.written();
        self.fsync_started = len;
        self.last_fsync = Instant::now();
        match self.file.sync_data() {
            Ok(()) => {
                self.fsynced = len;
                sh.fsynced.fetch_max(covers, Ordering::AcqRel);
                sh.set_error(|e| e.fsync = None);
                Ok(())
            }
            Err(e) => {
                let text = strerror(&e);
                sh.fsync_failed(&text);
                Err(text)
            }
        }
    }

    /// `everysec`: hand a clone of the fd to the fsync thread.
    fn fsync_background(&mut self, sh: &Shared) {
        match self.file.try_clone() {
            Ok(f) => {
                self.fsync_started = self.file_len;
                self.last_fsync = Instant::now();
                sh.bio.push(Job::Fsync(f, self.written(), sh.epoch()));
            }
            Err(e) => log::warning(&format!("Can't fsync the AOF file: {}", strerror(&e))),
        }
    }
}

impl Shared {
    fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    fn set_error(&self, f: impl FnOnce(&mut Errors)) {
        let mut e = lock(&self.errors);
        f(&mut e);
        self.failed
            .store(e.write.is_some() || e.fsync.is_some(), Ordering::Release);
    }

    /// An fsync failed (logged when it starts failing, as Valkey's bio).
    fn fsync_failed(&self, text: &str) {
        self.set_error(|e| {
            if e.fsync.is_none() {
                log::warning(&format!("Fail to fsync the AOF file: {text}"));
            }
            e.fsync = Some(text.to_string());
        });
    }

    /// Clear the write error; whether there was one.
    fn clear_write_error(&self) -> bool {
        if !self.failed.load(Ordering::Acquire) {
            return false;
        }
        let mut was = false;
        self.set_error(|e| was = e.write.take().is_some());
        was
    }
}

impl Bio {
    fn push(&self, job: Job) {
        let mut q = lock(&self.q);
        if matches!(job, Job::Fsync(..)) {
            self.fsyncs.fetch_add(1, Ordering::AcqRel);
        }
        q.jobs.push_back(job);
        self.cv.notify_all();
    }

    fn fsync_in_progress(&self) -> bool {
        self.fsyncs.load(Ordering::Acquire) > 0
    }
}

/// The `aof-bio` thread: each job in turn; at `stop`, the queue drained.
fn bio_thread(sh: Arc<Shared>) {
    loop {
        let job = {
            let mut q = lock(&sh.bio.q);
            loop {
                if let Some(j) = q.jobs.pop_front() {
                    break j;
                }
                if q.stop {
                    return;
                }
                q = sh.bio.cv.wait(q).unwrap_or_else(|e| e.into_inner());
            }
        };
        match job {
            Job::Fsync(file, covers, epoch) => {
                let r = file.sync_data();
                drop(file);
                match r {
                    Ok(()) => {
                        {
                            // Under the queue's lock: `follow` sets the
                            // offset of its new stream under it too.
                            let _q = lock(&sh.bio.q);
                            if epoch == sh.epoch() {
                                sh.fsynced.fetch_max(covers, Ordering::AcqRel);
                            }
                        }
                        sh.set_error(|e| e.fsync = None)
                    }
                    Err(e) => sh.fsync_failed(&strerror(&e)),
                }
                sh.bio.fsyncs.fetch_sub(1, Ordering::AcqRel);
            }
            Job::Unlink(path) => {
                let _ = fs::remove_file(path);
            }
        }
    }
}

/// The `aof-writer` thread.
fn writer_thread(sh: Arc<Shared>) {
    loop {
        if sh.stop.load(Ordering::SeqCst) {
            return;
        }
        let before = sh.written.load(Ordering::Acquire);
        let sleep = step(&sh);
        if sleep.is_zero() {
            continue;
        }
        if sh.written.load(Ordering::Acquire) != before {
            std::thread::park_timeout(LINGER.min(sleep));
            continue;
        }
        // Idle: announce the sleep, then look once more, so a wake()
        // between the round and the announcement is not missed.
        sh.notified.store(false, Ordering::SeqCst);
        if sh.target.load(Ordering::SeqCst) > sh.written.load(Ordering::Acquire)
            || sh.stop.load(Ordering::SeqCst)
        {
            continue;
        }
        std::thread::park_timeout(sleep);
    }
}

/// One round of the writer: write what is published, fsync as the policy
/// says. Returns how long it may sleep.
fn step(sh: &Shared) -> Duration {
    let target = sh.target.load(Ordering::SeqCst);
    let mut st = lock(&sh.st);
    let policy = st.opts.fsync;
    if let Some(t) = st.failed_at {
        let left = RETRY.saturating_sub(t.elapsed());
        if !left.is_zero() {
            return left;
        }
    }
    if (target > st.written() || !st.prefix.is_empty()) && st.flush(sh, target).is_err() {
        return RETRY;
    }
    if st.rewriting_quiet() {
        return FSYNC_EVERY;
    }
    // A failed fsync is tried again (writes are refused meanwhile, so
    // nothing new would call for one).
    if sh.failed.load(Ordering::Acquire) && lock(&sh.errors).fsync.is_some() {
        st.fsync_started = 0;
        st.fsynced = 0;
    }
    match policy {
        FsyncPolicy::Always => match st.fsync_now(sh) {
            Ok(()) => FSYNC_EVERY,
            Err(_) => RETRY,
        },
        FsyncPolicy::Everysec if st.file_len > st.fsync_started => {
            let since = st.last_fsync.elapsed();
            if since < FSYNC_EVERY {
                return FSYNC_EVERY - since;
            }
            if sh.bio.fsync_in_progress() {
                return Duration::from_millis(10);
            }
            st.fsync_background(sh);
            FSYNC_EVERY
        }
        _ => FSYNC_EVERY,
    }
}

impl FileLog {
    /// Open the AOF in `root` (the server's `dir`) and start its threads.
    pub(crate) fn open(
        root: &Path,
        opts: &AofOptions,
        reader: effects::Reader,
        mode: OpenMode,
    ) -> Result<FileLog, String> {
        let dir = AofDir::new(root, opts);
        let st = match mode {
            OpenMode::Existing => open_existing(dir, opts, reader)?,
            OpenMode::Fresh => open_fresh(dir, opts, reader)?,
        };
        let written = st.written();
        let sh = Arc::new(Shared {
            target: AtomicU64::new(written),
            notified: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            errors: Mutex::new(Errors::default()),
            written: AtomicU64::new(written),
            fsynced: AtomicU64::new(written),
            epoch: AtomicU64::new(0),
            current_size: AtomicU64::new(0),
            base_size: AtomicU64::new(0),
            bio: Bio {
                q: Mutex::new(BioJobs::default()),
                cv: Condvar::new(),
                fsyncs: AtomicUsize::new(0),
            },
            st: Mutex::new(st),
        });
        lock(&sh.st).publish(&sh);
        let s = sh.clone();
        let bio = std::thread::Builder::new()
            .name("aof-bio".into())
            .spawn(move || {
                engine::affinity::pin(engine::affinity::Role::Bio);
                bio_thread(s)
            })
            .map_err(|e| format!("can't start the AOF background thread: {e}"))?;
        let mut log = FileLog {
            sh: sh.clone(),
            writer: None,
            bio: Some(bio),
            woken: written,
            closed: false,
        };
        let s = sh.clone();
        log.writer = Some(
            std::thread::Builder::new()
                .name("aof-writer".into())
                .spawn(move || {
                    engine::affinity::pin(engine::affinity::Role::Bio);
                    writer_thread(s)
                })
                .map_err(|e| format!("can't start the AOF writer thread: {e}"))?,
        );
        Ok(log)
    }

    fn unpark(&self) {
        if let Some(t) = &self.writer {
            t.thread().unpark();
        }
    }
}

fn new_state(
    dir: AofDir,
    opts: &AofOptions,
    reader: effects::Reader,
    file: File,
    incr: Entry,
) -> State {
    let file_len = file.metadata().map_or(0, |m| m.len());
    State {
        dir,
        opts: opts.clone(),
        reader,
        pending: VecDeque::new(),
        skips: VecDeque::new(),
        prefix: Vec::new(),
        at_boundary: true,
        last_ts: 0,
        file,
        incr,
        file_len,
        fsync_started: file_len,
        fsynced: file_len,
        last_fsync: Instant::now(),
        disk: None,
        listed: false,
        others: 0,
        base_size: 0,
        rewrite: None,
        failed_at: None,
        error_logged: None,
    }
}

/// Drop the history files from `m` and pass each (unless also listed as
/// base or incr) to `unlink`: whether there were any.
fn delete_history(dir: &AofDir, m: &mut Manifest, mut unlink: impl FnMut(PathBuf)) -> bool {
    let history = std::mem::take(&mut m.history);
    for h in &history {
        if m.lists(&h.name) {
            continue;
        }
        log::notice(&format!(
            "Removing the history file {} in the background",
            h.name
        ));
        unlink(dir.path(&h.name));
    }
    !history.is_empty()
}

fn open_existing(dir: AofDir, opts: &AofOptions, reader: effects::Reader) -> Result<State, String> {
    let mut m = manifest::read(&dir.path(&dir.manifest_name()))?.ok_or_else(|| {
        format!(
            "The AOF manifest file {} doesn't exist",
            dir.manifest_name()
        )
    })?;
    let mut dirty = delete_history(&dir, &mut m, |p| {
        let _ = fs::remove_file(p);
    });
    let created = m.incr.is_empty();
    if created {
        let seq = m.incr_seq() + 1;
        m.incr.push(Entry {
            name: dir.incr_name(seq),
            seq,
            kind: Kind::Incr,
        });
        dirty = true;
    }
    let incr = m.incr.last().cloned().expect("one incr file at least");
    let path = dir.path(&incr.name);
    let file = open_append(&path, false).map_err(|e| {
        format!(
            "Can't open the append-only file {}: {}",
            incr.name,
            strerror(&e)
        )
    })?;
    if dirty {
        manifest::write(&dir.dir, &dir.manifest_name(), &m)?;
    }
    log::notice(&format!(
        "{} AOF incr file {} on server start",
        if created { "Creating" } else { "Opening" },
        incr.name
    ));
    let mut st = new_state(dir, opts, reader, file, incr);
    st.base_size = m
        .base
        .as_ref()
        .map_or(0, |b| file_len(&st.dir.path(&b.name)));
    st.others = m.incr[..m.incr.len() - 1]
        .iter()
        .map(|e| file_len(&st.dir.path(&e.name)))
        .sum();
    st.disk = Some(m);
    st.listed = true;
    Ok(st)
}

fn open_fresh(dir: AofDir, opts: &AofOptions, reader: effects::Reader) -> Result<State, String> {
    if let Err(e) = fs::create_dir(&dir.dir)
        && e.kind() != std::io::ErrorKind::AlreadyExists
    {
        return Err(format!(
            "Can't open or create append-only dir {}: {}",
            dir.dirname,
            strerror(&e)
        ));
    }
    let old = manifest::read(&dir.path(&dir.manifest_name()))?;
    let seq = old.as_ref().map_or(0, |m| m.incr_seq()) + 1;
    let incr = Entry {
        name: dir.incr_name(seq),
        seq,
        kind: Kind::Incr,
    };
    let file = open_append(&dir.path(&incr.name), true).map_err(|e| {
        format!(
            "Can't open the append-only file {}: {}",
            incr.name,
            strerror(&e)
        )
    })?;
    let mut st = new_state(dir, opts, reader, file, incr);
    st.disk = old;
    Ok(st)
}

impl AppendLog for FileLog {
    fn wake(&mut self, published: u64) {
        // Called after every batch: one compare when nothing was written,
        // else a store and a load (a swap only if the writer sleeps).
        if published == self.woken {
            return;
        }
        self.woken = published;
        self.sh.target.store(published, Ordering::SeqCst);
        if !self.sh.notified.load(Ordering::SeqCst)
            && !self.sh.notified.swap(true, Ordering::SeqCst)
        {
            self.unpark();
        }
    }

    fn write(&mut self, offset: u64) {
        if offset <= self.woken {
            return;
        }
        let sh = &self.sh;
        let mut st = lock(&sh.st);
        // Unlike Valkey's flushAppendOnlyFile, the write does not wait
        // out a background fsync (up to 2 s, while the replies go out):
        // a kill -9 then would lose what was acknowledged. On ext4 a
        // write(2) does not wait for a concurrent fdatasync of the file
        // (docs/BENCHMARKS.md §32: a few ms at worst under back-to-back
        // fsyncs that took up to 244 ms).
        let written = st.failed_at.is_none() && st.flush(sh, offset).is_ok();
        drop(st);
        if !written {
            // The writer retries after an error.
            return self.wake(offset);
        }
        // The writer need not wake for this: it fsyncs on its own timer.
        self.woken = offset;
        sh.target.store(offset, Ordering::SeqCst);
    }

    fn sync(&mut self, offset: u64) -> Result<(), String> {
        let mut st = lock(&self.sh.st);
        st.flush(&self.sh, offset)?;
        if st.rewriting_quiet() {
            return Ok(());
        }
        st.fsync_now(&self.sh)
    }

    fn set_options(&mut self, opts: &AofOptions) {
        let mut st = lock(&self.sh.st);
        // The names are fixed while the AOF is open (Valkey: immutable).
        let (dirname, filename) = (st.opts.dirname.clone(), st.opts.filename.clone());
        st.opts = AofOptions {
            dirname,
            filename,
            ..opts.clone()
        };
        drop(st);
        self.unpark();
    }

    fn status(&self) -> AofStatus {
        let sh = &self.sh;
        let write_error = if sh.failed.load(Ordering::Acquire) {
            let e = lock(&sh.errors);
            e.write.clone().or_else(|| e.fsync.clone())
        } else {
            None
        };
        AofStatus {
            current_size: sh.current_size.load(Ordering::Relaxed),
            base_size: sh.base_size.load(Ordering::Relaxed),
            write_error,
            written: sh.written.load(Ordering::Acquire),
            fsync_in_progress: sh.bio.fsync_in_progress(),
        }
    }

    fn write_failed(&self) -> bool {
        self.sh.failed.load(Ordering::Relaxed)
    }

    fn fsynced(&self) -> u64 {
        self.sh.fsynced.load(Ordering::Acquire)
    }

    fn skip(&mut self, ranges: &[(u64, u64)]) {
        lock(&self.sh.st).skips.extend(ranges.iter().copied());
    }

    fn follow(&mut self, reader: effects::Reader) -> Result<(), String> {
        let sh = &self.sh;
        let mut st = lock(&sh.st);
        // What the old stream has left goes out first, as bytes of no
        // stream (like an annotation), so the offsets from here on are
        // only the new reader's.
        st.pull(u64::MAX);
        st.cut_skips();
        st.skips.clear();
        let left: Vec<effects::Slice> = st.pending.drain(..).collect();
        for s in &left {
            st.prefix.extend_from_slice(s);
        }
        let start = reader.offset();
        st.reader = reader;
        // Background fsyncs still running count offsets of the old stream.
        sh.epoch.fetch_add(1, Ordering::AcqRel);
        self.woken = start;
        sh.target.store(start, Ordering::SeqCst);
        let done = st.flush(sh, start).and_then(|()| match st.opts.fsync {
            FsyncPolicy::No => Ok(()),
            _ => st.fsync_now(sh),
        });
        // Nothing after the switch is claimed before it is fsynced.
        let fsynced = if done.is_ok() { start } else { 0 };
        let _q = lock(&sh.bio.q);
        sh.fsynced.store(fsynced, Ordering::Release);
        drop(_q);
        st.publish(sh);
        done
    }

    fn begin_rewrite(&mut self, offset: u64) -> Result<Box<dyn SnapshotSink>, String> {
        let sh = &self.sh;
        let mut st = lock(&sh.st);
        if st.rewrite.is_some() {
            return Err("Background append only file rewriting already in progress".into());
        }
        if st.listed {
            // Bytes before `offset` belong to the current incr file.
            st.flush(sh, offset)?;
            let seq = st.incr.seq + 1;
            let incr = Entry {
                name: st.dir.incr_name(seq),
                seq,
                kind: Kind::Incr,
            };
            let path = st.dir.path(&incr.name);
            let file = open_append(&path, true).map_err(|e| {
                format!(
                    "Can't open the append-only file {}: {}",
                    incr.name,
                    strerror(&e)
                )
            })?;
            let mut m = st.disk.clone().unwrap_or_default();
            m.incr.push(incr.clone());
            if let Err(e) = manifest::write(&st.dir.dir, &st.dir.manifest_name(), &m) {
                drop(file);
                let _ = fs::remove_file(&path);
                return Err(e);
            }
            log::notice(&format!(
                "Creating AOF incr file {} on background rewrite",
                incr.name
            ));
            let old = std::mem::replace(&mut st.file, file);
            if st.opts.fsync != FsyncPolicy::No && st.fsynced < st.file_len {
                sh.bio.push(Job::Fsync(old, st.written(), sh.epoch()));
            }
            st.others += st.file_len;
            st.file_len = 0;
            st.fsync_started = 0;
            st.fsynced = 0;
            st.incr = incr;
            st.disk = Some(m);
        } else {
            // Nothing lists this file yet: what it holds before `offset`
            // is in the new base, so it starts over.
            st.pull(offset);
            st.prefix.clear();
            st.drop_before(offset);
            st.file.set_len(0).map_err(|e| {
                format!(
                    "Can't truncate the append-only file {}: {}",
                    st.incr.name,
                    strerror(&e)
                )
            })?;
            st.file_len = 0;
            st.fsync_started = 0;
            st.fsynced = 0;
            st.at_boundary = true;
            st.failed_at = None;
        }
        st.publish(sh);
        let seq = st.disk.as_ref().map_or(0, |m| m.base_seq()) + 1;
        let base = Entry {
            name: st.dir.base_name(seq),
            seq,
            kind: Kind::Base,
        };
        let save = SaveOptions {
            filename: st.dir.path(&base.name).to_string_lossy().into_owned(),
            compress: st.opts.compress,
            checksum: st.opts.checksum,
            key_save_delay_us: 0,
            version: rdb::RDB_VERSION,
            incremental_fsync: st.opts.rewrite_incremental_fsync,
        };
        let sink = start_save(save, &st.dir.root, engine::affinity::Role::AofRewrite)?;
        st.rewrite = Some(Rewrite {
            base,
            first_incr: st.incr.seq,
        });
        Ok(Box::new(sink))
    }

    fn end_rewrite(&mut self, ok: bool) -> Result<(), String> {
        let sh = &self.sh;
        let mut st = lock(&sh.st);
        let Some(rw) = st.rewrite.take() else {
            return Err("no AOF rewrite in progress".into());
        };
        let base_path = st.dir.path(&rw.base.name);
        if !ok {
            // Not in the background: the next rewrite's base has this name.
            let _ = fs::remove_file(&base_path);
            return Ok(());
        }
        // Valkey's order: the replaced incr files, then the old base.
        let mut m = Manifest {
            base: Some(rw.base.clone()),
            ..Manifest::default()
        };
        let old = st.disk.clone().unwrap_or_default();
        let history = |e: &Entry| Entry {
            kind: Kind::History,
            ..e.clone()
        };
        if st.listed {
            for e in &old.incr {
                if e.seq < rw.first_incr {
                    m.history.push(history(e));
                } else {
                    m.incr.push(e.clone());
                }
            }
        } else {
            m.history.extend(old.history.iter().cloned());
            m.history.extend(old.incr.iter().map(history));
            m.incr.push(st.incr.clone());
        }
        m.history.extend(old.base.iter().map(history));
        if let Err(e) = manifest::write(&st.dir.dir, &st.dir.manifest_name(), &m) {
            let _ = fs::remove_file(&base_path);
            return Err(e);
        }
        st.disk = Some(m.clone());
        st.listed = true;
        if delete_history(&st.dir, &mut m, |p| sh.bio.push(Job::Unlink(p)))
            && manifest::write(&st.dir.dir, &st.dir.manifest_name(), &m).is_ok()
        {
            st.disk = Some(m.clone());
        }
        st.base_size = file_len(&base_path);
        st.others = m
            .incr
            .iter()
            .filter(|e| e.seq != st.incr.seq)
            .map(|e| file_len(&st.dir.path(&e.name)))
            .sum();
        st.publish(sh);
        Ok(())
    }

    fn close(&mut self) -> Result<(), String> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        self.sh.stop.store(true, Ordering::SeqCst);
        self.unpark();
        if let Some(t) = self.writer.take() {
            let _ = t.join();
        }
        let result = {
            let mut st = lock(&self.sh.st);
            if let Some(rw) = st.rewrite.take() {
                let _ = fs::remove_file(st.dir.path(&rw.base.name));
            }
            let r = st.flush(&self.sh, u64::MAX);
            // Valkey's stopAppendOnly fsyncs whatever the policy.
            r.and_then(|()| st.fsync_now(&self.sh))
        };
        {
            let mut q = lock(&self.sh.bio.q);
            q.stop = true;
            self.sh.bio.cv.notify_all();
        }
        if let Some(t) = self.bio.take() {
            let _ = t.join();
        }
        result
    }
}

impl Drop for FileLog {
    fn drop(&mut self) {
        let _ = self.close();
    }
}
