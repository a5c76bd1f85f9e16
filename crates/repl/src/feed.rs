//! The primary side: a `repl-feed` thread per replica owns its socket
//! once PSYNC has taken it out of the event loop, for as long as its full
//! sync lasts; the stream is then served by an IO thread (threaded mode)
//! or goes on on that thread (inline mode).
//!
//! ```text
//!  engine: Senders::feed(client, FeedStart) ──► thread started, waits
//!  net: detach hook ──► adopt(client, socket, unsent, unparsed) ──┘
//!  thread: unsent replies, preamble (+FULLRESYNC / +CONTINUE),
//!          [RDB: $EOF:<mark> + encoded chunks + <mark>, or (repl-diskless-
//!           sync no, or a replica without capa eof) a "\n" a second until
//!           the engine names the saved file, then $len + the file by
//!           sendfile(2)],
//!          then (unless `REPLCONF rdb-only 1`: the connection ends with
//!          the RDB) the stream (crate::pump): slices of the effects
//!          blocks as they are published (zero-copy from the size set, see
//!          crate::zerocopy), REPLCONF ACKs read in between — handed to
//!          the IO thread hosting the fewest (net::hosted), or served here
//! ```
//!
//! The engine rings a doorbell after each batch that added to the stream
//! (the hosting IO thread's, else the feed's own), which costs a syscall
//! only when its thread is asleep.

use crate::pump::{DRAIN_LIMIT, Pump};
use crate::traffic::{Counters, Meter};
use crate::zerocopy::ZeroCopy;
use engine::ClientId;
use engine::log;
use engine::persist::{ChannelSink, SinkMsg, SinkWriter, SnapshotSink};
use engine::replication::primary::{
    FeedStart, RdbFormat, RdbFraming, ReplicaFeed, Senders, Traffic, ZeroCopyStats,
};
use ringkv_rings::doorbell::Doorbell;
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// How long a feed waits for the event loop to hand its socket over.
const ADOPT_WAIT: Duration = Duration::from_secs(10);
/// Chunks of a full sync queued between the capture and the thread.
const QUEUE: usize = 16;
/// Encoded RDB bytes gathered before each write.
const WRITE_BUF: usize = 1 << 20;
/// ... unless the capture is slow: what is gathered goes at least this
/// often, so that the replica sees its transfer move (as Valkey's parent
/// relays what its child writes as it comes).
const WRITE_AFTER: Duration = Duration::from_millis(100);
/// The longest the thread sleeps between looks at its stop flag.
pub(crate) const TICK: Duration = Duration::from_millis(100);
/// While a replica waits for the save to disk, a newline this often
/// keeps its link alive (Valkey's replicationCron does the same).
const KEEPALIVE: Duration = Duration::from_secs(1);
/// The most one sendfile(2) call is asked to move.
const SENDFILE_MAX: usize = 1 << 30;
/// How long an rdb-only replica is given to close its end once its RDB
/// is sent.
const RDB_ONLY_LINGER: Duration = Duration::from_secs(2);
/// A blocked write gives up after this long (the replica stopped reading).
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(60);

/// A socket on its way from the event loop to its feed.
struct Adopted {
    fd: OwnedFd,
    unsent: Vec<u8>,
    unparsed: Vec<u8>,
}

fn registry() -> &'static Mutex<HashMap<u64, mpsc::Sender<Adopted>>> {
    static R: OnceLock<Mutex<HashMap<u64, mpsc::Sender<Adopted>>>> = OnceLock::new();
    R.get_or_init(Default::default)
}

/// The IO layer let go of `client`'s socket: give it to its feed (or close
/// it, if no feed waits for it any more).
pub fn adopt(client: ClientId, fd: OwnedFd, unsent: Vec<u8>, unparsed: Vec<u8>) {
    let tx = lock(registry()).remove(&client.0);
    if let Some(tx) = tx {
        let _ = tx.send(Adopted {
            fd,
            unsent,
            unparsed,
        });
    }
}

/// Starts a feed thread per replica.
#[derive(Debug, Default)]
pub struct FeedThreads {
    /// What all of them moved.
    total: Arc<Counters>,
}

impl Senders for FeedThreads {
    fn feed(&mut self, client: ClientId, start: FeedStart) -> Box<dyn ReplicaFeed> {
        Box::new(Feed::start(client, start, self.total.clone()))
    }

    fn traffic(&self) -> Traffic {
        Traffic {
            bytes_in: self.total.read(),
            bytes_out: self.total.written(),
            commands: 0,
        }
    }
}

/// What the feed (its thread, or the IO thread serving its stream) and
/// the engine share.
pub(crate) struct Shared {
    /// The feed's own doorbell, while it serves from its own thread.
    pub(crate) bell: Option<Doorbell>,
    /// The doorbell of the IO thread serving the stream, if one does.
    host_bell: Mutex<Option<Arc<Doorbell>>>,
    /// The engine's wake-up: an ACK may complete a WAIT.
    pub(crate) wake: Arc<engine::wake::Wake>,
    pub(crate) stop: AtomicBool,
    pub(crate) online: AtomicBool,
    /// The full sync's RDB is still being sent (its framing).
    sending_rdb: Mutex<Option<RdbFraming>>,
    /// The engine named the saved file and the thread has not opened it
    /// yet (no new save may replace it meanwhile).
    file_pending: AtomicBool,
    pub(crate) sent: AtomicU64,
    pub(crate) ack_offset: AtomicU64,
    /// The last `FACK`: how far the replica's AOF is fsynced.
    pub(crate) aof_ack: AtomicU64,
    pub(crate) ack_ms: AtomicI64,
    gone: Mutex<Option<String>>,
    /// The socket while the thread holds it open (-1 before and after),
    /// for a shutdown that wakes a blocked write. Under a lock: the
    /// number must not be shut down once the thread has closed it and
    /// another connection may have been given the same number.
    fd: Mutex<i32>,
    pub(crate) zc: SharedCounters,
    /// Bytes moved on the socket since it was adopted.
    pub(crate) meter: Meter,
    /// Commands the replica sent (its ACKs).
    pub(crate) commands: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    /// A feed whose full sync sends `rdb` (online at once without one),
    /// and whose stream starts at `offset`.
    fn new(
        bell: Option<Doorbell>,
        wake: Arc<engine::wake::Wake>,
        rdb: Option<RdbFraming>,
        offset: u64,
        total: Arc<Counters>,
    ) -> Shared {
        Shared {
            bell,
            host_bell: Mutex::new(None),
            wake,
            stop: AtomicBool::new(false),
            online: AtomicBool::new(rdb.is_none()),
            sending_rdb: Mutex::new(rdb),
            file_pending: AtomicBool::new(false),
            sent: AtomicU64::new(offset),
            ack_offset: AtomicU64::new(0),
            aof_ack: AtomicU64::new(0),
            ack_ms: AtomicI64::new(0),
            gone: Mutex::new(None),
            fd: Mutex::new(-1),
            zc: SharedCounters::default(),
            meter: Meter::new(total),
            commands: AtomicU64::new(0),
        }
    }

    /// A feed's shared state with no engine behind it.
    #[cfg(test)]
    pub(crate) fn for_tests(rdb: Option<RdbFraming>, offset: u64) -> Arc<Shared> {
        Arc::new(Shared::new(
            None,
            Default::default(),
            rdb,
            offset,
            Default::default(),
        ))
    }

    /// Why the feed ended, once it has.
    pub(crate) fn gone(&self) -> Option<String> {
        lock(&self.gone).clone()
    }

    /// Wake whoever serves the feed.
    fn ring(&self) {
        if let Some(b) = lock(&self.host_bell).as_ref() {
            b.ring();
        } else if let Some(b) = &self.bell {
            b.ring();
        }
    }

    pub(crate) fn set_host_bell(&self, bell: Option<Arc<Doorbell>>) {
        *lock(&self.host_bell) = bell;
    }

    /// Why the feed ended (the first reason given stays).
    pub(crate) fn set_gone(&self, why: String) {
        lock(&self.gone).get_or_insert(why);
    }

    /// The feed's end, before its socket closes: nothing may shut the
    /// socket down by number any more, and no socket or file is awaited.
    pub(crate) fn finish(&self, client: ClientId) {
        *lock(&self.fd) = -1;
        lock(registry()).remove(&client.0);
        self.file_pending.store(false, Ordering::Relaxed);
    }

    fn rdb_sent(&self) {
        *self.sending_rdb.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// A blocking write of all of `bytes`, counted.
    fn write_all(&self, sock: &TcpStream, bytes: &[u8]) -> std::io::Result<()> {
        let mut w = sock;
        w.write_all(bytes)?;
        self.meter.add_written(bytes.len());
        Ok(())
    }
}

/// A feed's zero-copy counters, as its tracker last published them.
#[derive(Default)]
pub(crate) struct SharedCounters {
    pub(crate) writes: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) in_flight: AtomicU64,
    pub(crate) copied: AtomicU64,
    pub(crate) tracker_bytes: AtomicU64,
}

/// The engine's handle on one feed thread.
pub struct Feed {
    shared: Arc<Shared>,
    rdb: Option<ChannelSink>,
    /// [`RdbFraming::File`]: where the engine names the saved file.
    file: Option<mpsc::Sender<Result<String, String>>>,
}

impl Feed {
    fn start(client: ClientId, start: FeedStart, total: Arc<Counters>) -> Feed {
        let bell = match Doorbell::new() {
            Ok(b) => Some(b),
            Err(e) => {
                log::warning(&format!("replica feed: no eventfd ({e}); polling"));
                None
            }
        };
        let shared = Arc::new(Shared::new(
            bell,
            start.wake.clone(),
            start.rdb,
            start.stream.offset(),
            total,
        ));
        let (adopt_tx, adopt_rx) = mpsc::channel();
        lock(registry()).insert(client.0, adopt_tx);
        let (rdb, chunks) = match start.rdb {
            Some(RdbFraming::EofMark) => {
                let (sink, writer) = ChannelSink::new(QUEUE, "replica feed");
                (Some(sink), Some(writer))
            }
            Some(RdbFraming::File) | None => (None, None),
        };
        let (file, file_rx) = match start.rdb {
            Some(RdbFraming::File) => {
                let (tx, rx) = mpsc::channel();
                (Some(tx), Some(rx))
            }
            _ => (None, None),
        };
        let rdb_in = RdbIn {
            chunks,
            file: file_rx,
        };
        let s = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("repl-feed".into())
            .spawn(move || run(client, start, rdb_in, adopt_rx, s));
        if let Err(e) = spawned {
            *shared.gone.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(format!("cannot start a feed thread: {e}"));
        }
        Feed { shared, rdb, file }
    }
}

/// Where a feed's full sync RDB comes from.
struct RdbIn {
    /// Diskless: the capture's chunks.
    chunks: Option<SinkWriter>,
    /// From disk: the saved file's name, once the save is done.
    file: Option<Receiver<Result<String, String>>>,
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.ring();
        let fd = self.shared.fd.lock().unwrap_or_else(|e| e.into_inner());
        if *fd >= 0 {
            // Wakes a write blocked on a replica that stopped reading. The
            // thread still drains zero-copy completions before it closes.
            // SAFETY: shutdown(2) on a descriptor the thread keeps open
            // while `fd` holds it (it clears `fd` under this lock before
            // closing); it changes no memory.
            unsafe {
                libc::shutdown(*fd, libc::SHUT_RDWR);
            }
        }
    }
}

impl ReplicaFeed for Feed {
    fn rdb_sink(&mut self) -> Option<Box<dyn SnapshotSink>> {
        self.rdb
            .take()
            .map(|s| Box::new(s) as Box<dyn SnapshotSink>)
    }

    fn rdb_file(&mut self, file: Result<String, String>) {
        if let Some(tx) = self.file.take() {
            // Set before the thread can see the name (it clears it once
            // it has opened the file, or when it ends).
            let named = file.is_ok();
            self.shared.file_pending.store(named, Ordering::Relaxed);
            if tx.send(file).is_err() {
                self.shared.file_pending.store(false, Ordering::Relaxed);
            }
        }
    }

    fn wake(&mut self, _published: u64) {
        self.shared.ring();
    }

    fn ack(&self) -> (u64, i64) {
        (
            self.shared.ack_offset.load(Ordering::Relaxed),
            self.shared.ack_ms.load(Ordering::Relaxed),
        )
    }

    fn aof_ack(&self) -> u64 {
        self.shared.aof_ack.load(Ordering::Relaxed)
    }

    fn online(&self) -> bool {
        self.shared.online.load(Ordering::Relaxed)
    }

    fn sending_rdb(&self) -> Option<RdbFraming> {
        *self
            .shared
            .sending_rdb
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn opening_file(&self) -> bool {
        self.shared.file_pending.load(Ordering::Relaxed)
    }

    fn sent(&self) -> u64 {
        self.shared.sent.load(Ordering::Relaxed)
    }

    fn gone(&self) -> Option<String> {
        self.shared.gone()
    }

    fn traffic(&self) -> Traffic {
        Traffic {
            bytes_in: self.shared.meter.own.read(),
            bytes_out: self.shared.meter.own.written(),
            commands: self.shared.commands.load(Ordering::Relaxed),
        }
    }

    fn zerocopy(&self) -> ZeroCopyStats {
        let z = &self.shared.zc;
        ZeroCopyStats {
            writes: z.writes.load(Ordering::Relaxed),
            bytes: z.bytes.load(Ordering::Relaxed),
            in_flight: z.in_flight.load(Ordering::Relaxed),
            copied: z.copied.load(Ordering::Relaxed),
            tracker_bytes: z.tracker_bytes.load(Ordering::Relaxed),
        }
    }
}

/// The feed thread: the socket, the full sync, then the stream handed to
/// an IO thread or served here.
fn run(
    client: ClientId,
    start: FeedStart,
    rdb_in: RdbIn,
    adopt: Receiver<Adopted>,
    shared: Arc<Shared>,
) {
    let Ok(got) = adopt.recv_timeout(ADOPT_WAIT) else {
        shared.finish(client);
        return shared.set_gone(format!("the socket of client {} never came", client.0));
    };
    let sock = TcpStream::from(got.fd);
    *lock(&shared.fd) = sock.as_raw_fd();
    let mut zc = None;
    match serve(client, start, rdb_in, got.unsent, &sock, &shared, &mut zc) {
        Ok((reader, hold_for_ack)) => {
            let pump = Pump::new(
                client,
                sock,
                reader,
                got.unparsed,
                zc,
                shared.clone(),
                hold_for_ack,
            );
            match pump {
                Ok(p) => crate::pump::serve(Box::new(p), true),
                Err(why) => {
                    // The socket went into the pump's making, and closed.
                    shared.finish(client);
                    shared.set_gone(why);
                }
            }
        }
        Err(why) => {
            // Seed 003's rule: a socket with zero-copy sends in flight
            // closes only once the kernel has let go of their buffers.
            if let Some(z) = zc.as_mut() {
                z.drain(DRAIN_LIMIT);
                z.publish(&shared.zc);
            }
            shared.finish(client);
            drop(sock);
            shared.set_gone(why);
        }
    }
}

/// Everything before the stream: replies left unsent, the preamble, the
/// full sync's RDB. Returns the stream's reader, and whether the stream
/// waits for the replica's first ACK. `zc`: the zero-copy sender, once
/// made (drained however this ends).
fn serve(
    client: ClientId,
    start: FeedStart,
    rdb_in: RdbIn,
    unsent: Vec<u8>,
    sock: &TcpStream,
    shared: &Shared,
    zc: &mut Option<ZeroCopy>,
) -> Result<(effects::Reader, bool), String> {
    if shared.stop.load(Ordering::Relaxed) {
        return Err("stopped".into());
    }
    let _ = sock.set_nodelay(start.nodelay);
    // The epoll loop's sockets are non-blocking; this thread blocks.
    sock.set_nonblocking(false).map_err(|e| e.to_string())?;
    sock.set_write_timeout(Some(WRITE_TIMEOUT))
        .map_err(|e| e.to_string())?;
    *zc = start
        .zerocopy_min
        .filter(|_| !is_local(sock))
        .and_then(|min| ZeroCopy::start(sock.as_raw_fd(), min, start.io_uring));
    if let Some(z) = zc.as_ref() {
        let peer = sock.peer_addr().map(|a| a.to_string()).unwrap_or_default();
        log::notice(&format!(
            "Replica connection {peer}: RDB and stream writes of at least {} bytes go zero-copy with {}",
            z.min_size(),
            z.mechanism()
        ));
    }
    let werr = |e: std::io::Error| format!("write error: {e}");
    shared.write_all(sock, &unsent).map_err(werr)?;
    shared.write_all(sock, &start.preamble).map_err(werr)?;
    // A replica that reads an EOF-marked RDB finds its end only if the
    // mark ends one of its reads: nothing more is sent until it has
    // loaded the file and ACKs (Valkey's repl_put_online_on_ack).
    let mut hold_until_ack = false;
    if let Some(file) = rdb_in.file {
        let name = await_file(sock, &file, shared)?;
        let n = send_file(sock, &name, shared)?;
        log::notice(&format!(
            "Synchronization with replica {} succeeded ({n} bytes of RDB from {name})",
            client.0
        ));
        shared.rdb_sent();
        shared.online.store(!start.rdb_only, Ordering::Relaxed);
    }
    if let Some(writer) = rdb_in.chunks {
        let out = RdbOut {
            sock,
            zc: zc.as_mut(),
            shared,
        };
        let outcome = send_rdb(out, start.rdb_format, &writer.chunks);
        let failed = outcome.as_ref().err().cloned();
        let _ = writer.outcome.send(outcome);
        if let Some(e) = failed {
            return Err(e);
        }
        shared.rdb_sent();
        hold_until_ack = true;
    }
    if start.rdb_only && start.rdb.is_some() {
        return Err(end_rdb_only(client, sock, shared));
    }
    Ok((start.stream, hold_until_ack))
}

/// `REPLCONF rdb-only 1`: the RDB was all it wanted. The write side
/// closes first and what the replica still sends is read away, so that
/// the close does not reset the connection under the RDB's last bytes.
fn end_rdb_only(client: ClientId, sock: &TcpStream, shared: &Shared) -> String {
    log::notice(&format!(
        "RDB transfer completed, rdb only replica (client {}) should be disconnected asap",
        client.0
    ));
    let _ = sock.shutdown(std::net::Shutdown::Write);
    let _ = sock.set_read_timeout(Some(TICK));
    let until = std::time::Instant::now() + RDB_ONLY_LINGER;
    let mut buf = [0u8; 512];
    let mut r = sock;
    while std::time::Instant::now() < until {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => shared.meter.add_read(n),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    "rdb only: its RDB is sent".into()
}

/// Loopback, or no IP peer at all (a client such as `valkey-cli --rdb` on
/// the unix socket, or one already gone): zero-copy sends would only be
/// copied.
fn is_local(sock: &TcpStream) -> bool {
    sock.peer_addr().map_or(true, |a| a.ip().is_loopback())
}

/// Where a diskless RDB goes: the socket, zero-copy for the buffers
/// large enough.
struct RdbOut<'a> {
    sock: &'a TcpStream,
    zc: Option<&'a mut ZeroCopy>,
    shared: &'a Shared,
}

impl RdbOut<'_> {
    /// Send `buf` and leave it empty. Zero-copy, the buffer itself goes
    /// (the tracker holds it until the kernel is done with it) and a new
    /// one takes its place: jemalloc hands back the pages of one already
    /// let go, so that costs no page faults.
    fn send(&mut self, buf: &mut Vec<u8>) -> Result<(), String> {
        let werr = |e: std::io::Error| format!("write error sending the RDB: {e}");
        match self.zc.as_deref_mut() {
            Some(z) if buf.len() >= z.min_size() => {
                let bytes = std::mem::replace(buf, Vec::with_capacity(buf.capacity()));
                let slice = effects::Slice::from_vec(bytes);
                z.send(&slice, WRITE_TIMEOUT)?;
                z.reap();
                z.publish(&self.shared.zc);
                self.shared.meter.add_written(slice.len());
            }
            _ => {
                self.shared.write_all(self.sock, buf).map_err(werr)?;
                buf.clear();
            }
        }
        Ok(())
    }
}

/// The RDB of a diskless full sync, framed by EOF marks.
fn send_rdb(mut out: RdbOut<'_>, f: RdbFormat, rx: &Receiver<SinkMsg>) -> Result<u64, String> {
    let mut enc = rdb::Encoder::with_version(f.compress, f.checksum, f.version);
    let mut buf = Vec::with_capacity(WRITE_BUF + WRITE_BUF / 4);
    let mut written = 0u64;
    let mark = eof_mark();
    let mut head = format!("$EOF:{mark}\r\n").into_bytes();
    out.send(&mut head)?;
    enc.header(&mut buf);
    let mut last_write = std::time::Instant::now();
    loop {
        let msg = match rx.recv_timeout(WRITE_AFTER) {
            Ok(m) => Some(m),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err("the sync was aborted".to_string());
            }
        };
        match msg {
            Some(SinkMsg::Chunk(c)) => enc.feed(&c, &mut buf),
            Some(SinkMsg::Finish) => break,
            None => {}
        }
        if buf.len() >= WRITE_BUF || (!buf.is_empty() && last_write.elapsed() >= WRITE_AFTER) {
            written += buf.len() as u64;
            out.send(&mut buf)?;
            last_write = std::time::Instant::now();
        }
    }
    enc.finish(&mut buf);
    written += buf.len() as u64;
    buf.extend_from_slice(mark.as_bytes());
    out.send(&mut buf)?;
    Ok(written)
}

/// Wait for the engine to name the file saved for this sync, sending the
/// replica a newline every second meanwhile.
fn await_file(
    sock: &TcpStream,
    rx: &Receiver<Result<String, String>>,
    shared: &Shared,
) -> Result<String, String> {
    let mut last = std::time::Instant::now();
    loop {
        if shared.stop.load(Ordering::Relaxed) {
            return Err("stopped".into());
        }
        match rx.recv_timeout(TICK) {
            Ok(r) => return r,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err("the sync was abandoned".into());
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if last.elapsed() >= KEEPALIVE {
            last = std::time::Instant::now();
            shared
                .write_all(sock, b"\n")
                .map_err(|e| format!("write error: {e}"))?;
        }
    }
}

/// `$<len>\r\n` and the file, page cache to socket with sendfile(2): no
/// copy through this process, and the file is closed however it ends.
fn send_file(sock: &TcpStream, name: &str, shared: &Shared) -> Result<u64, String> {
    let opened = std::fs::File::open(name).and_then(|f| Ok((f.metadata()?.len(), f)));
    shared.file_pending.store(false, Ordering::Relaxed);
    let (len, file) = opened.map_err(|e| {
        let why = format!("SYNC failed. Can't open/stat DB after BGSAVE: {e}");
        log::warning(&why);
        why
    })?;
    let werr = |e: std::io::Error| format!("write error sending the RDB: {e}");
    shared
        .write_all(sock, format!("${len}\r\n").as_bytes())
        .map_err(werr)?;
    let mut off: libc::off_t = 0;
    while (off as u64) < len {
        let want = ((len - off as u64) as usize).min(SENDFILE_MAX);
        // SAFETY: sendfile(2) between two descriptors held open for the
        // call; the kernel writes only `off`, a local.
        let n = unsafe { libc::sendfile(sock.as_raw_fd(), file.as_raw_fd(), &mut off, want) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            match e.kind() {
                ErrorKind::Interrupted => continue,
                // SO_SNDTIMEO ran out: the replica stopped reading.
                ErrorKind::WouldBlock => return Err("write timeout sending the RDB".into()),
                _ => return Err(werr(e)),
            }
        }
        if n == 0 {
            return Err(format!("{name} ended at {off} of {len} bytes"));
        }
        shared.meter.add_written(n as usize);
    }
    Ok(len)
}

/// 40 characters that end a diskless transfer: random enough that an RDB
/// does not end with them by chance.
fn eof_mark() -> String {
    let mut x = engine::server::wall_us() as u64 ^ (u64::from(std::process::id()) << 40);
    let addr = &x as *const u64 as u64;
    x ^= addr.rotate_left(17);
    (0..40)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from_digit((x % 36) as u32, 36).unwrap_or('x')
        })
        .collect()
}
