//! The replica side: the link from this server to its primary. One
//! `repl-link` thread per link owns the socket and does, with blocking
//! reads and writes, everything Valkey's replica does in its event loop
//! before and around the stream:
//!
//! ```text
//!  connect ─► PING ─► [AUTH] ─► REPLCONF listening-port, capa eof psync2,
//!                                version
//!          ─► PSYNC replid offset+1 [FAILOVER]
//!               ├─ +FULLRESYNC id off ─► RDB ($len or $EOF:<mark>) into a
//!               │                         temp file, fsync, rename to
//!               │                         dbfilename ─► FullSync event
//!               │    (repl-diskless-load: FullSync event first, then the
//!               │     RDB in chunks to the loader as it arrives)
//!               └─ +CONTINUE [id] ─────► Continue event
//!          ─► stream: split into whole commands ─► Commands events
//!             every second: REPLCONF ACK <applied offset>
//! ```
//!
//! A `REPLCONF` from the primary is always handed over in a chunk of its
//! own, so that the engine answers a GETACK with exactly the bytes applied
//! before it, and a `MULTI ... EXEC` is handed over whole, so that the
//! engine's offset (what it relays to its own replicas) never ends inside
//! a transaction. The engine's answer ([`PrimaryLink::ack`]) is written from
//! the engine's thread on a clone of the socket, under a lock shared with
//! the periodic ACK.

use crate::preamble::{
    EOF_MARK_LEN, PsyncReply, TransferSize, parse_psync_reply, parse_transfer_header,
};
use crate::traffic::{Counters, Meter};
use engine::log;
use engine::replication::{LinkEvent, LinkOptions, LinkState, Links, PrimaryLink, SyncRdb};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// How long a blocking read waits before the thread looks at its stop
/// flag and its ACK timer.
const READ_TICK: Duration = Duration::from_millis(100);
/// Valkey's replica acknowledges once a second.
const ACK_PERIOD: Duration = Duration::from_secs(1);
/// Bytes read from the socket at a time.
const READ_SIZE: usize = 64 * 1024;
/// Stream bytes handed over but not applied yet past which the thread
/// stops reading (the primary's output buffer holds the rest).
const MAX_QUEUED: u64 = 64 * 1024 * 1024;

/// Opens a [`TcpLink`] per REPLICAOF.
#[derive(Debug, Default)]
pub struct TcpLinks {
    /// What all of them moved.
    total: Arc<Counters>,
}

impl Links for TcpLinks {
    fn connect(&mut self, opts: LinkOptions) -> Box<dyn PrimaryLink> {
        Box::new(TcpLink::start(opts, self.total.clone()))
    }

    fn bytes_read(&self) -> u64 {
        self.total.read()
    }
}

/// What the link thread and the engine share.
struct Shared {
    wake: Arc<engine::wake::Wake>,
    events: Mutex<VecDeque<LinkEvent>>,
    ready: AtomicBool,
    stop: AtomicBool,
    applied: AtomicU64,
    /// Our AOF's fsynced offset, sent as `FACK` (-1: no AOF, no FACK).
    fack: AtomicI64,
    /// Stream bytes handed over as commands.
    received: AtomicU64,
    /// Bytes handed over and not applied yet.
    queued: AtomicU64,
    last_io_ms: AtomicI64,
    transfer_total: AtomicI64,
    transfer_read: AtomicU64,
    /// The socket's write half, for ACKs from either thread.
    writer: Mutex<Option<TcpStream>>,
    meter: Meter,
}

impl Shared {
    fn push(&self, ev: LinkEvent) {
        let mut q = self.events.lock().unwrap_or_else(|e| e.into_inner());
        q.push_back(ev);
        self.ready.store(true, Ordering::Release);
        drop(q);
        self.wake.wake();
    }

    fn touch(&self) {
        self.last_io_ms
            .store(engine::server::wall_ms(), Ordering::Relaxed);
    }

    fn send_ack(&self, offset: u64) -> std::io::Result<()> {
        let mut msg = Vec::with_capacity(64);
        let offset = offset.to_string();
        let fack = self.fack.load(Ordering::Relaxed);
        let fack = (fack >= 0).then(|| fack.to_string());
        let mut argv = vec![&b"REPLCONF"[..], b"ACK", offset.as_bytes()];
        if let Some(f) = &fack {
            argv.extend([&b"FACK"[..], f.as_bytes()]);
        }
        resp::encode_command(&argv, &mut msg);
        let mut w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        match w.as_mut() {
            Some(s) => s.write_all(&msg),
            None => Ok(()),
        }
    }
}

/// The engine's handle on one link thread.
pub struct TcpLink {
    shared: Arc<Shared>,
}

impl TcpLink {
    fn start(opts: LinkOptions, total: Arc<Counters>) -> TcpLink {
        let shared = Arc::new(Shared {
            wake: opts.wake.clone(),
            events: Mutex::default(),
            ready: AtomicBool::default(),
            stop: AtomicBool::default(),
            applied: AtomicU64::default(),
            fack: AtomicI64::new(-1),
            received: AtomicU64::default(),
            queued: AtomicU64::default(),
            last_io_ms: AtomicI64::default(),
            transfer_total: AtomicI64::default(),
            transfer_read: AtomicU64::default(),
            writer: Mutex::default(),
            meter: Meter::new(total),
        });
        shared.applied.store(opts.offset, Ordering::Relaxed);
        let s = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("repl-link".into())
            .spawn(move || {
                let why = match run(&opts, &s) {
                    Ok(()) => "link closed".to_string(),
                    Err(e) => e,
                };
                if !s.stop.load(Ordering::Relaxed) {
                    s.push(LinkEvent::Lost(why));
                }
            });
        if let Err(e) = spawned {
            shared.push(LinkEvent::Lost(format!(
                "cannot start the link thread: {e}"
            )));
        }
        TcpLink { shared }
    }
}

impl Drop for TcpLink {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        let w = self.shared.writer.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = w.as_ref() {
            // Wakes the thread's read; it sees `stop` and ends.
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

impl PrimaryLink for TcpLink {
    fn poll(&mut self) -> Option<LinkEvent> {
        if !self.shared.ready.load(Ordering::Acquire) {
            return None;
        }
        let mut q = self.shared.events.lock().unwrap_or_else(|e| e.into_inner());
        let ev = q.pop_front();
        if q.is_empty() {
            self.shared.ready.store(false, Ordering::Release);
        }
        if let Some(LinkEvent::Commands { data, .. }) = &ev {
            self.shared
                .queued
                .fetch_sub(data.len() as u64, Ordering::Relaxed);
        }
        ev
    }

    fn ready(&self) -> bool {
        self.shared.ready.load(Ordering::Acquire)
    }

    fn ack(&mut self, offset: u64) {
        self.shared.applied.store(offset, Ordering::Relaxed);
        // A failed write shows up as a lost link on the thread's next read.
        let _ = self.shared.send_ack(offset);
    }

    fn applied(&mut self, offset: u64) {
        self.shared.applied.store(offset, Ordering::Relaxed);
    }

    fn aof_fsynced(&mut self, offset: Option<u64>) {
        let v = offset.map_or(-1, |o| o.min(i64::MAX as u64) as i64);
        self.shared.fack.store(v, Ordering::Relaxed);
    }

    fn received(&self) -> u64 {
        self.shared.received.load(Ordering::Relaxed)
    }

    fn last_io_ms(&self) -> i64 {
        self.shared.last_io_ms.load(Ordering::Relaxed)
    }

    fn transfer(&self) -> (i64, u64) {
        (
            self.shared.transfer_total.load(Ordering::Relaxed),
            self.shared.transfer_read.load(Ordering::Relaxed),
        )
    }
}

/// The socket's read side with what was read and not consumed yet.
struct Conn {
    sock: TcpStream,
    buf: Vec<u8>,
    pos: usize,
    timeout: Duration,
}

impl Conn {
    /// Read more bytes; false on a read tick with nothing (or a stop).
    fn fill(&mut self, shared: &Shared) -> Result<bool, String> {
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > READ_SIZE {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        let len = self.buf.len();
        self.buf.resize(len + READ_SIZE, 0);
        let r = self.sock.read(&mut self.buf[len..]);
        match r {
            Ok(0) => {
                self.buf.truncate(len);
                Err("connection closed by the primary".into())
            }
            Ok(n) => {
                self.buf.truncate(len + n);
                shared.meter.add_read(n);
                shared.touch();
                Ok(true)
            }
            // Interrupted: the socket has a receive timeout, so a stop and
            // continue (SIGSTOP, SIGCONT) of the process fails the read
            // with EINTR (signal(7)) even though no handler ran.
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                self.buf.truncate(len);
                if shared.stop.load(Ordering::Relaxed) {
                    return Err("stopped".into());
                }
                let idle = engine::server::wall_ms() - shared.last_io_ms.load(Ordering::Relaxed);
                if idle > self.timeout.as_millis() as i64 {
                    return Err("timeout: no data nor PING received".into());
                }
                Ok(false)
            }
            Err(e) => {
                self.buf.truncate(len);
                Err(format!("read error: {e}"))
            }
        }
    }

    /// One reply line (without CRLF), skipping the bare newlines a
    /// primary sends to keep the link alive while it prepares the RDB.
    fn line(&mut self, shared: &Shared) -> Result<String, String> {
        loop {
            while self.pos < self.buf.len() && self.buf[self.pos] == b'\n' {
                self.pos += 1;
            }
            if let Some(i) = self.buf[self.pos..].iter().position(|&b| b == b'\n') {
                let mut line = &self.buf[self.pos..self.pos + i];
                if line.last() == Some(&b'\r') {
                    line = &line[..line.len() - 1];
                }
                let s = String::from_utf8_lossy(line).into_owned();
                self.pos += i + 1;
                return Ok(s);
            }
            if self.buf.len() - self.pos > 64 * 1024 {
                return Err("protocol error: reply line too long".into());
            }
            self.fill(shared)?;
        }
    }

    fn send(&mut self, args: &[&[u8]]) -> Result<(), String> {
        let mut msg = Vec::new();
        resp::encode_command(args, &mut msg);
        self.sock
            .write_all(&msg)
            .map_err(|e| format!("write error: {e}"))
    }

    /// Send a command and read its one-line reply.
    fn call(&mut self, shared: &Shared, args: &[&[u8]]) -> Result<String, String> {
        self.send(args)?;
        self.line(shared)
    }
}

fn run(opts: &LinkOptions, shared: &Shared) -> Result<(), String> {
    shared.push(LinkEvent::State(LinkState::Connecting));
    let timeout = Duration::from_secs(opts.timeout_s.max(1));
    let addr = (opts.host.as_str(), opts.port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {}: {e}", opts.host))?
        .next()
        .ok_or_else(|| format!("cannot resolve {}", opts.host))?;
    let source = opts.source_addr.as_deref().and_then(|a| a.parse().ok());
    let sock = net::connect_from(addr, source, timeout)
        .map_err(|e| format!("Error condition on socket for SYNC: {e}"))?;
    let _ = sock.set_nodelay(true);
    sock.set_read_timeout(Some(READ_TICK))
        .and_then(|()| sock.set_write_timeout(Some(timeout)))
        .map_err(|e| e.to_string())?;
    let writer = sock.try_clone().map_err(|e| e.to_string())?;
    *shared.writer.lock().unwrap_or_else(|e| e.into_inner()) = Some(writer);
    if shared.stop.load(Ordering::Relaxed) {
        return Err("stopped".into());
    }
    log::notice("MASTER <-> REPLICA sync started");
    shared.touch();
    shared.push(LinkEvent::State(LinkState::Handshake));
    let mut c = Conn {
        sock,
        buf: Vec::with_capacity(READ_SIZE),
        pos: 0,
        timeout,
    };
    handshake(opts, shared, &mut c)?;
    stream(shared, &mut c)
}

/// `REPLCONF option args...`, whose refusal only costs a log line (as
/// Valkey's replica: an older primary may not know the option).
fn replconf(c: &mut Conn, shared: &Shared, option: &[u8], args: &[&[u8]]) -> Result<(), String> {
    let mut argv: Vec<&[u8]> = vec![b"REPLCONF", option];
    argv.extend_from_slice(args);
    let reply = c.call(shared, &argv)?;
    if reply.starts_with('-') {
        log::notice(&format!(
            "(Non critical) Master does not understand REPLCONF {}: {reply}",
            String::from_utf8_lossy(option)
        ));
    }
    Ok(())
}

/// PING, AUTH, REPLCONF, PSYNC, and the RDB of a full sync.
fn handshake(opts: &LinkOptions, shared: &Shared, c: &mut Conn) -> Result<(), String> {
    let pong = c.call(shared, &[b"PING"])?;
    // As Valkey: an authentication error here is for AUTH to settle.
    if pong.starts_with('-')
        && !pong.starts_with("-NOAUTH")
        && !pong.starts_with("-NOPERM")
        && !pong.starts_with("-ERR operation not permitted")
    {
        return Err(format!("Error reply to PING from master: '{pong}'"));
    }
    log::notice("Master replied to PING, replication can continue...");
    if let Some(pass) = &opts.auth {
        let reply = match &opts.user {
            Some(user) => c.call(shared, &[b"AUTH", user.as_bytes(), pass.as_bytes()])?,
            None => c.call(shared, &[b"AUTH", pass.as_bytes()])?,
        };
        if reply.starts_with('-') {
            return Err(format!("Unable to AUTH to MASTER: {reply}"));
        }
    }
    let port = opts.listening_port.to_string();
    replconf(c, shared, b"listening-port", &[port.as_bytes()])?;
    if let Some(ip) = &opts.announce_ip {
        replconf(c, shared, b"ip-address", &[ip.as_bytes()])?;
    }
    replconf(c, shared, b"capa", &[b"eof", b"capa", b"psync2"])?;
    // As Valkey 8's replicas: the primary may then send what a 7.2+
    // server reads (RDB 11), and this replica may share a disk save made
    // for one. redis-server 7.0 answers with an error, which is fine.
    let version = engine::config::REDIS_COMPAT_VERSION.as_bytes();
    replconf(c, shared, b"version", &[version])?;
    let offset = (opts.offset + 1).to_string();
    log::notice(&format!(
        "Trying a partial resynchronization (request {}:{offset}).",
        opts.replid
    ));
    let mut psync: Vec<&[u8]> = vec![b"PSYNC", opts.replid.as_bytes(), offset.as_bytes()];
    if opts.failover {
        // The primary we hand over to promotes itself, then answers.
        psync.push(b"FAILOVER");
    }
    let reply = c.call(shared, &psync)?;
    let accepted = parse_psync_reply(&reply).inspect_err(|_| {
        // Answered, and not with a sync: the engine needs to know this
        // from a lost connection (a FAILOVER is aborted by it).
        shared.push(LinkEvent::PsyncRefused(reply.clone()));
    })?;
    match accepted {
        PsyncReply::FullResync { replid, offset } => {
            log::notice(&format!("Full resync from master: {replid}:{offset}"));
            shared.push(LinkEvent::State(LinkState::Transfer));
            // The stream continues from the primary's offset, past the RDB.
            let full_sync = |rdb| {
                shared.received.store(offset, Ordering::Relaxed);
                shared.applied.store(offset, Ordering::Relaxed);
                shared.push(LinkEvent::FullSync {
                    replid: replid.to_string(),
                    offset,
                    rdb,
                });
            };
            if opts.diskless_load {
                // The engine loads while the bytes arrive.
                let (tx, rx) = mpsc::sync_channel(STREAM_QUEUE);
                full_sync(SyncRdb::Stream(Box::new(ChunkReader::new(rx))));
                transfer(shared, c, "memory", &mut ChunkSender(tx))?;
            } else {
                let file = transfer_to_file(opts, shared, c)?;
                full_sync(SyncRdb::File(file));
            }
        }
        PsyncReply::Continue { replid } => {
            log::notice("Successful partial resynchronization with master.");
            shared.received.store(opts.offset, Ordering::Relaxed);
            shared.push(LinkEvent::Continue {
                replid: replid.map(str::to_string),
            });
        }
    }
    shared.push(LinkEvent::State(LinkState::Connected));
    Ok(())
}

/// Receive the RDB payload into a temp file in `dir`, sync it and rename
/// it over `dbfilename` (as Valkey's disk-load replica does). Returns the
/// file's name.
fn transfer_to_file(opts: &LinkOptions, shared: &Shared, c: &mut Conn) -> Result<String, String> {
    let tmp = format!(
        "temp-{}.{}.rdb",
        engine::server::wall_ms() / 1000,
        std::process::id()
    );
    let mut file = FileDrain::create(&tmp)?;
    if let Err(e) = transfer(shared, c, "disk", &mut file) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, &opts.dbfilename).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!(
            "Failed trying to rename the temp DB into {} in MASTER <-> REPLICA synchronization: {e}",
            opts.dbfilename
        )
    })?;
    Ok(opts.dbfilename.clone())
}

/// Where the RDB payload goes as it arrives.
trait Drain {
    fn put(&mut self, piece: &[u8]) -> Result<(), String>;
    /// All `len` bytes of the RDB are in (an EOF mark after them was put
    /// too and is not part of it).
    fn end(&mut self, len: u64) -> Result<(), String>;
}

/// The temp file of a disk load.
struct FileDrain {
    f: File,
    path: String,
}

impl FileDrain {
    fn create(path: &str) -> Result<FileDrain, String> {
        let f = File::create(path).map_err(|e| {
            format!("Opening the temp file needed for MASTER <-> REPLICA synchronization: {e}")
        })?;
        Ok(FileDrain {
            f,
            path: path.to_string(),
        })
    }

    fn err(&self, e: std::io::Error) -> String {
        format!("Write error writing to the DB file {}: {e}", self.path)
    }
}

impl Drain for FileDrain {
    fn put(&mut self, piece: &[u8]) -> Result<(), String> {
        self.f.write_all(piece).map_err(|e| self.err(e))
    }

    fn end(&mut self, len: u64) -> Result<(), String> {
        self.f.set_len(len).map_err(|e| self.err(e))?;
        self.f.sync_all().map_err(|e| self.err(e))
    }
}

/// Chunks queued between the link and the loader of a diskless load.
const STREAM_QUEUE: usize = 64;

/// The link's end of a diskless load: chunks to the loader's reader. A
/// loader that stopped reading (it has the whole RDB, or failed) is not
/// the transfer's failure: the load says how it went.
struct ChunkSender(mpsc::SyncSender<Vec<u8>>);

impl Drain for ChunkSender {
    fn put(&mut self, piece: &[u8]) -> Result<(), String> {
        let _ = self.0.send(piece.to_vec());
        Ok(())
    }

    fn end(&mut self, _len: u64) -> Result<(), String> {
        Ok(())
    }
}

/// The loader's end: the chunks as one byte stream, ended when the link
/// drops its end (after the RDB, or when the transfer fails: then the
/// loader finds the RDB cut short).
struct ChunkReader {
    rx: mpsc::Receiver<Vec<u8>>,
    chunk: Vec<u8>,
    pos: usize,
}

impl ChunkReader {
    fn new(rx: mpsc::Receiver<Vec<u8>>) -> ChunkReader {
        ChunkReader {
            rx,
            chunk: Vec::new(),
            pos: 0,
        }
    }
}

impl Read for ChunkReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.pos == self.chunk.len() {
            match self.rx.recv() {
                Ok(c) => {
                    self.chunk = c;
                    self.pos = 0;
                }
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.chunk.len() - self.pos);
        buf[..n].copy_from_slice(&self.chunk[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Read the payload's header (`$<len>` or `$EOF:<mark>`) and the payload
/// into `drain`; `to` says where in the log.
fn transfer(shared: &Shared, c: &mut Conn, to: &str, drain: &mut dyn Drain) -> Result<(), String> {
    let header = c.line(shared)?;
    let (total, eof_mark) = match parse_transfer_header(&header)? {
        TransferSize::Bytes(n) => (n as i64, None),
        TransferSize::UntilMark(mark) => (-1, Some(mark)),
    };
    shared.transfer_total.store(total, Ordering::Relaxed);
    shared.transfer_read.store(0, Ordering::Relaxed);
    log::notice(&format!(
        "MASTER <-> REPLICA sync: receiving {}",
        if total < 0 {
            format!("streamed RDB from master with EOF to {to}")
        } else {
            format!("{total} bytes from master to {to}")
        }
    ));
    let mut got: u64 = 0;
    // The last bytes received, to find the EOF marker across reads.
    let mut tail: Vec<u8> = Vec::with_capacity(EOF_MARK_LEN * 2);
    loop {
        if c.pos == c.buf.len() {
            c.fill(shared)?;
            continue;
        }
        let avail = &c.buf[c.pos..];
        let take = match (total, eof_mark.as_deref()) {
            (n, None) => avail.len().min((n as u64 - got) as usize),
            (_, Some(_)) => avail.len(),
        };
        let piece = &avail[..take];
        drain.put(piece)?;
        got += take as u64;
        c.pos += take;
        shared.transfer_read.store(got, Ordering::Relaxed);
        match eof_mark.as_deref() {
            None => {
                if got == total as u64 {
                    return drain.end(got);
                }
            }
            Some(mark) => {
                tail.extend_from_slice(&piece[piece.len().saturating_sub(EOF_MARK_LEN)..]);
                if tail.len() > EOF_MARK_LEN {
                    tail.drain(..tail.len() - EOF_MARK_LEN);
                }
                if tail == mark {
                    // Nothing follows the marker until we ack the load.
                    return drain.end(got - EOF_MARK_LEN as u64);
                }
            }
        }
    }
}

/// The stream: whole commands handed over as they come; an ACK a second.
fn stream(shared: &Shared, c: &mut Conn) -> Result<(), String> {
    let limits = resp::Limits {
        max_bulk_len: usize::MAX / 2,
        ..resp::Limits::default()
    };
    let mut next_ack = Instant::now();
    let mut args = Vec::new();
    let mut argc = Vec::new();
    // One command's spans, reused from one command to the next.
    let mut one = Vec::new();
    loop {
        if Instant::now() >= next_ack {
            shared
                .send_ack(shared.applied.load(Ordering::Relaxed))
                .map_err(|e| format!("write error: {e}"))?;
            next_ack = Instant::now() + ACK_PERIOD;
        }
        if shared.queued.load(Ordering::Relaxed) > MAX_QUEUED {
            if shared.stop.load(Ordering::Relaxed) {
                return Err("stopped".into());
            }
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        let start = c.pos;
        let at = start + next_chunk(&c.buf[start..], &limits, &mut one, &mut args, &mut argc)?;
        if at > start {
            let data = c.buf[start..at].to_vec();
            c.pos = at;
            let n = data.len() as u64;
            shared.queued.fetch_add(n, Ordering::Relaxed);
            shared.received.fetch_add(n, Ordering::Relaxed);
            shared.push(LinkEvent::Commands {
                data,
                args: std::mem::take(&mut args),
                argc: std::mem::take(&mut argc),
            });
        } else {
            c.fill(shared)?;
        }
    }
}

/// The next chunk to hand over from `buf` (stream bytes not handed over
/// yet): its length, its commands' spans appended to `args` and `argc`
/// (0: wait for more bytes). Whole commands only; a `REPLCONF` travels
/// alone; a `MULTI ... EXEC` only whole, so the offset the engine reaches
/// is never inside one (as Valkey's reploff): our own replicas' full
/// syncs are cut at such offsets, and a lost link continues from the
/// MULTI.
fn next_chunk(
    buf: &[u8],
    limits: &resp::Limits,
    one: &mut Vec<resp::Span>,
    args: &mut Vec<resp::Span>,
    argc: &mut Vec<u32>,
) -> Result<usize, String> {
    let mut at = 0;
    // Where an unfinished MULTI starts: (byte, args, commands).
    let mut multi: Option<(usize, usize, usize)> = None;
    loop {
        one.clear();
        let parsed = resp::parse_command(&buf[at..], limits, one)
            .map_err(|e| format!("protocol error in the stream: {}", e.message()))?;
        let resp::Parsed::Command { consumed, argc: n } = parsed else {
            break;
        };
        let is = |word: &[u8]| n > 0 && one[0].slice(&buf[at..]).eq_ignore_ascii_case(word);
        let replconf = is(b"replconf");
        if replconf && at > 0 {
            break;
        }
        if multi.is_none() && is(b"multi") {
            multi = Some((at, args.len(), argc.len()));
        } else if is(b"exec") {
            multi = None;
        }
        if n > 0 {
            args.extend(one.iter().map(|s| resp::Span {
                start: s.start + at,
                len: s.len,
            }));
            argc.push(n as u32);
        }
        at += consumed;
        if replconf {
            break;
        }
    }
    if let Some((byte, nargs, ncmds)) = multi {
        // The transaction goes over once its EXEC is here.
        at = byte;
        args.truncate(nargs);
        argc.truncate(ncmds);
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::next_chunk;

    fn cmd(argv: &[&str]) -> String {
        let mut s = format!("*{}\r\n", argv.len());
        for a in argv {
            s += &format!("${}\r\n{a}\r\n", a.len());
        }
        s
    }

    /// The chunks `stream` would hand over, as command names, while
    /// `buf` is all that arrived.
    fn chunks(buf: &str) -> Vec<Vec<String>> {
        let limits = resp::Limits::default();
        let (mut one, mut out, mut pos) = (Vec::new(), Vec::new(), 0);
        loop {
            let (mut args, mut argc) = (Vec::new(), Vec::new());
            let n = next_chunk(
                &buf.as_bytes()[pos..],
                &limits,
                &mut one,
                &mut args,
                &mut argc,
            )
            .unwrap();
            if n == 0 {
                return out;
            }
            let data = &buf.as_bytes()[pos..pos + n];
            let mut names = Vec::new();
            let mut i = 0;
            for c in argc {
                names.push(String::from_utf8_lossy(args[i].slice(data)).into_owned());
                i += c as usize;
            }
            out.push(names);
            pos += n;
        }
    }

    #[test]
    fn a_replconf_travels_alone() {
        let s = cmd(&["SET", "a", "1"]) + &cmd(&["REPLCONF", "GETACK", "*"]) + &cmd(&["PING"]);
        assert_eq!(chunks(&s), [vec!["SET"], vec!["REPLCONF"], vec!["PING"]]);
    }

    #[test]
    fn a_transaction_goes_over_only_with_its_exec() {
        let head = cmd(&["SET", "a", "1"]) + &cmd(&["MULTI"]) + &cmd(&["INCR", "n"]);
        // Its EXEC has not arrived: only what comes before the MULTI.
        assert_eq!(chunks(&head), [vec!["SET"]]);
        // Half of the EXEC: still not.
        let exec = cmd(&["EXEC"]);
        assert_eq!(chunks(&(head.clone() + &exec[..5])), [vec!["SET"]]);
        let whole = head + &exec + &cmd(&["DEL", "a"]);
        assert_eq!(
            chunks(&whole),
            [vec!["SET", "MULTI", "INCR", "EXEC", "DEL"]]
        );
        // Lower case too.
        let lower = cmd(&["multi"]) + &cmd(&["set", "b", "2"]);
        assert!(chunks(&lower).is_empty());
        assert_eq!(chunks(&(lower + &cmd(&["exec"]))).len(), 1);
    }
}
