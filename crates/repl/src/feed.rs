//! The primary side: a `repl-feed` thread per replica takes its socket
//! once PSYNC has taken it out of the event loop, hands it to a pump
//! (crate::pump: the IO thread hosting the fewest in threaded mode, else
//! a thread of its own) and, for as long as a full sync lasts, makes what
//! the pump sends before the stream (crate::prelude). It never writes to
//! the socket itself.
//!
//! ```text
//!  engine: Senders::feed(client, FeedStart) ──► thread started, waits
//!  net: detach hook ──► adopt(client, socket, unsent, unparsed) ──┘
//!  thread: pump made and handed over (net::hosted, or a new thread);
//!          queued for it: unsent replies, preamble (+FULLRESYNC /
//!          +CONTINUE), [RDB: $EOF:<mark> + the capture's chunks encoded
//!          a MB at a time + <mark>, or (repl-diskless-sync no, or a
//!          replica without capa eof) a "\n" a second until the engine
//!          names the saved file, then $len + the file, which the pump
//!          sends by sendfile(2)]; then the thread ends
//!  pump:   the queue, then (unless `REPLCONF rdb-only 1`: the connection
//!          ends with the RDB) the stream: slices of the effects blocks as
//!          they are published (zero-copy from the size set, see
//!          crate::zerocopy), REPLCONF ACKs read in between
//! ```
//!
//! The engine rings a doorbell after each batch that added to the stream
//! (the hosting IO thread's, else the feed's own), which costs a syscall
//! only when its thread is asleep; the feed's thread rings the same one
//! after each thing it queues.

use crate::prelude::{self, FileOut, Out, Producer, RdbEnd, Then};
use crate::pump::Pump;
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
    pub(crate) fn ring(&self) {
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

    /// The full sync's RDB still being sent (its framing).
    pub(crate) fn sending_rdb(&self) -> Option<RdbFraming> {
        *lock(&self.sending_rdb)
    }

    pub(crate) fn rdb_sent(&self) {
        *lock(&self.sending_rdb) = None;
    }

    /// The file the engine named is open: a new save may replace it.
    pub(crate) fn file_opened(&self) {
        self.file_pending.store(false, Ordering::Relaxed);
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
            shared.set_gone(format!("cannot start a feed thread: {e}"));
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
        let fd = lock(&self.shared.fd);
        if *fd >= 0 {
            // The replica sees the end at once, whoever serves the feed
            // (the pump still drains zero-copy completions before it
            // closes the socket).
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
        self.shared.sending_rdb()
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

/// The feed thread: takes the socket, hands it to a pump (an IO thread's,
/// or a thread of its own), then makes what the pump sends before the
/// stream.
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
    let _ = sock.set_nodelay(start.nodelay);
    let zc = zero_copy(&sock, &start);
    let (out, prelude) = prelude::queue(shared.clone());
    let FeedStart {
        preamble,
        rdb_format,
        stream,
        rdb_only,
        ..
    } = start;
    match Pump::new(
        client,
        sock,
        stream,
        got.unparsed,
        zc,
        shared.clone(),
        Some(prelude),
    ) {
        Ok(p) => crate::pump::serve(Box::new(p), false),
        Err(why) => {
            // The socket went into the pump's making, and closed.
            shared.finish(client);
            return shared.set_gone(why);
        }
    }
    let made = produce(
        client, &out, got.unsent, preamble, rdb_in, rdb_format, rdb_only,
    );
    if let Err(why) = made {
        let _ = out.push(Out::Fail(why));
    }
}

/// MSG_ZEROCOPY or SEND_ZC for this replica, if it is not local and
/// `tcp-tx-zerocopy` is on.
fn zero_copy(sock: &TcpStream, start: &FeedStart) -> Option<ZeroCopy> {
    let min = start.zerocopy_min.filter(|_| !is_local(sock))?;
    let z = ZeroCopy::start(sock.as_raw_fd(), min, start.io_uring)?;
    let peer = sock.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    log::notice(&format!(
        "Replica connection {peer}: RDB and stream writes of at least {} bytes go zero-copy with {}",
        z.min_size(),
        z.mechanism()
    ));
    Some(z)
}

/// Everything before the stream, queued for the pump: replies left
/// unsent, the preamble, the full sync's RDB.
fn produce(
    client: ClientId,
    out: &Producer,
    unsent: Vec<u8>,
    preamble: Vec<u8>,
    rdb_in: RdbIn,
    format: RdbFormat,
    rdb_only: bool,
) -> Result<(), String> {
    if out.stopped() {
        return Err("stopped".into());
    }
    out.push(Out::bytes(unsent))?;
    out.push(Out::bytes(preamble))?;
    if let Some(file) = rdb_in.file {
        let name = await_file(out, &file)?;
        let (len, f) = open_file(out, &name)?;
        out.push(Out::bytes(format!("${len}\r\n")))?;
        out.push(Out::File(FileOut::new(f, len)))?;
        out.push(Out::RdbEnd(RdbEnd {
            outcome: None,
            bytes: len,
            then: if rdb_only { Then::Close } else { Then::Online },
            note: Some(format!(
                "Synchronization with replica {} succeeded ({len} bytes of RDB from {name})",
                client.0
            )),
        }))?;
    }
    if let Some(writer) = rdb_in.chunks {
        match encode_rdb(out, format, &writer.chunks) {
            Ok(bytes) => out.push(Out::RdbEnd(RdbEnd {
                outcome: Some(writer.outcome),
                bytes,
                then: if rdb_only {
                    Then::Close
                } else {
                    Then::AwaitAck
                },
                note: None,
            }))?,
            Err(why) => {
                let _ = writer.outcome.send(Err(why.clone()));
                return Err(why);
            }
        }
    }
    out.push(Out::End)
}

/// Loopback, or no IP peer at all (a client such as `valkey-cli --rdb` on
/// the unix socket, or one already gone): zero-copy sends would only be
/// copied.
fn is_local(sock: &TcpStream) -> bool {
    sock.peer_addr().map_or(true, |a| a.ip().is_loopback())
}

/// The RDB of a diskless full sync, framed by EOF marks, encoded from the
/// capture's chunks and queued a buffer at a time; its size.
fn encode_rdb(out: &Producer, f: RdbFormat, rx: &Receiver<SinkMsg>) -> Result<u64, String> {
    let mut enc = rdb::Encoder::with_version(f.compress, f.checksum, f.version);
    let mut buf = Vec::with_capacity(WRITE_BUF + WRITE_BUF / 4);
    let send = |buf: &mut Vec<u8>| {
        let full = std::mem::replace(buf, Vec::with_capacity(buf.capacity()));
        out.push(Out::bytes(full))
    };
    let mut written = 0u64;
    let mark = eof_mark();
    out.push(Out::bytes(format!("$EOF:{mark}\r\n")))?;
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
            send(&mut buf)?;
            last_write = std::time::Instant::now();
        }
    }
    enc.finish(&mut buf);
    written += buf.len() as u64;
    buf.extend_from_slice(mark.as_bytes());
    send(&mut buf)?;
    Ok(written)
}

/// Wait for the engine to name the file saved for this sync, sending the
/// replica a newline every second meanwhile.
fn await_file(out: &Producer, rx: &Receiver<Result<String, String>>) -> Result<String, String> {
    let mut last = std::time::Instant::now();
    loop {
        if out.stopped() {
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
            out.push(Out::bytes(&b"\n"[..]))?;
        }
    }
}

/// The saved file and its length; from now on a new save may replace
/// it (the open file stays what it was).
fn open_file(out: &Producer, name: &str) -> Result<(u64, std::fs::File), String> {
    let opened = std::fs::File::open(name).and_then(|f| Ok((f.metadata()?.len(), f)));
    out.file_opened();
    opened.map_err(|e| {
        let why = format!("SYNC failed. Can't open/stat DB after BGSAVE: {e}");
        log::warning(&why);
        why
    })
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
