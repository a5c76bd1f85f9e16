//! The sending half of a feed: what comes before the stream (the
//! preamble and a full sync's RDB, queued by the feed's thread:
//! [`crate::prelude`]), then slices of the effects blocks as they are
//! published; `REPLCONF ACK`s in. It never blocks, so the same pump runs
//! on an IO thread beside its clients (threaded mode: [`net::hosted`]) or
//! on a thread of its own (inline mode, or no IO thread would take it).
//!
//! ```text
//!  step(woke):  ending? ── reap zero-copy completions, done when none
//!               rdb-only? ─ read until the replica closes (2 s at most)
//!               woke? ──── read ACKs, reap completions
//!               holding? ─ nothing sent before the first ACK
//!               send ───── the slice (or file) under way, then the next
//!                          ones, the prelude's before the stream's,
//!                          until the socket is full (EPOLLOUT watched)
//! ```
//!
//! Its own epoll set (the socket, and SEND_ZC's ring) is the one
//! descriptor a host watches.

use crate::feed::{Shared, TICK, WRITE_TIMEOUT};
use crate::prelude::{FileOut, Out, Prelude, RdbEnd, Then};
use crate::zerocopy::{Sent, ZeroCopy};
use effects::Slice;
use engine::ClientId;
use engine::log;
use net::hosted::EpollSet;
use ringkv_rings::doorbell::Doorbell;
use std::io::ErrorKind;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// After a round that sent something, the feed's own thread looks again
/// this much later without being woken: under load, one write a
/// millisecond instead of a wake-up (an eventfd write and a context
/// switch) per batch.
const LINGER: Duration = Duration::from_millis(1);
/// How long a feed that ends waits for its zero-copy sends' completions
/// before its socket closes (seed 003: closing earlier makes the kernel
/// drop them).
pub(crate) const DRAIN_LIMIT: Duration = Duration::from_secs(2);
/// The most a replica may send without its commands being parsed.
const INPUT_MAX: usize = 1 << 20;
/// How long an rdb-only replica is given to close its end once its RDB
/// is sent.
const RDB_ONLY_LINGER: Duration = Duration::from_secs(2);
/// Why an rdb-only replica's feed ends.
const RDB_ONLY_SENT: &str = "rdb only: its RDB is sent";

pub(crate) struct Pump {
    client: ClientId,
    /// Closed by the pump's drop, before the engine hears the feed ended.
    sock: Option<TcpStream>,
    fd: RawFd,
    reader: effects::Reader,
    /// Why the feed ended, once it has.
    why: Option<String>,
    /// What the replica sent that is not parsed yet (its ACKs).
    input: Vec<u8>,
    zc: Option<ZeroCopy>,
    /// What goes before the stream, until its `End`.
    prelude: Option<Prelude>,
    /// The slice being sent, and how much of it went.
    current: Option<(Slice, usize)>,
    /// The saved RDB being sent.
    file: Option<FileOut>,
    shared: Arc<Shared>,
    /// The socket (and SEND_ZC's ring): what the host watches.
    epoll: EpollSet,
    /// The socket was full: EPOLLOUT is watched, and since when.
    blocked_since: Option<Instant>,
    watching_out: bool,
    /// After an EOF-marked RDB nothing is sent until the replica's first
    /// ACK ([`Then::AwaitAck`]), for up to this long.
    hold_until: Option<Instant>,
    /// An rdb-only replica got its RDB: its write side is shut, and what
    /// it sends is read away until it closes, or until this instant (so
    /// that the close does not reset the connection under the RDB's last
    /// bytes).
    linger_until: Option<Instant>,
    /// The feed ended and waits until this instant at most for its
    /// zero-copy completions.
    ending: Option<Instant>,
    /// Sent something in the last step.
    sent: bool,
}

impl Pump {
    pub(crate) fn new(
        client: ClientId,
        sock: TcpStream,
        reader: effects::Reader,
        input: Vec<u8>,
        zc: Option<ZeroCopy>,
        shared: Arc<Shared>,
        prelude: Option<Prelude>,
    ) -> Result<Pump, String> {
        let epoll = EpollSet::new().map_err(|e| format!("epoll_create1: {e}"))?;
        // sendfile(2) has no MSG_DONTWAIT.
        sock.set_nonblocking(true)
            .map_err(|e| format!("O_NONBLOCK: {e}"))?;
        let mut pump = Pump {
            client,
            fd: sock.as_raw_fd(),
            sock: Some(sock),
            reader,
            why: None,
            input,
            zc,
            prelude,
            current: None,
            file: None,
            shared,
            epoll,
            blocked_since: None,
            watching_out: false,
            hold_until: None,
            linger_until: None,
            ending: None,
            sent: false,
        };
        let ring = pump.zc.as_ref().and_then(ZeroCopy::poll_fd);
        for fd in std::iter::once(pump.fd).chain(ring) {
            if let Err(e) = pump.epoll.add(fd, libc::EPOLLIN) {
                let why = format!("epoll_ctl: {e}");
                // Said when the pump's drop ends the feed.
                pump.why = Some(why.clone());
                return Err(why);
            }
        }
        Ok(pump)
    }

    fn watch_out(&mut self, on: bool) {
        if self.watching_out != on {
            self.watching_out = on;
            let events = libc::EPOLLIN | if on { libc::EPOLLOUT } else { 0 };
            let _ = self.epoll.modify(self.fd, events);
        }
    }

    /// Do what can be done now; `woke`: the socket or the ring may have
    /// something. `false`: the feed is over (dropping the pump closes it).
    pub(crate) fn step(&mut self, woke: bool) -> bool {
        if self.ending.is_some() {
            return self.drain_step(woke);
        }
        match self.advance(woke) {
            Ok(()) if !self.shared.stop.load(Ordering::Relaxed) => true,
            Ok(()) => self.end("stopped".into()),
            Err(why) => self.end(why),
        }
    }

    /// Without `woke`, only what needs no system call: the socket and
    /// the error queue are read, and a full socket tried again, when the
    /// descriptor said so (a host steps every loop iteration).
    fn advance(&mut self, woke: bool) -> Result<(), String> {
        self.sent = false;
        if let Some(until) = self.linger_until {
            let closed = woke && self.read_acks().is_err();
            if closed || Instant::now() > until {
                return Err(RDB_ONLY_SENT.into());
            }
            return Ok(());
        }
        if woke {
            self.read_acks()?;
            self.reap();
        }
        if let Some(until) = self.hold_until {
            if self.shared.ack_ms.load(Ordering::Relaxed) == 0 {
                if Instant::now() > until {
                    return Err("no ACK after the RDB".into());
                }
                return Ok(());
            }
            self.hold_until = None;
            self.shared.online.store(true, Ordering::Relaxed);
        }
        self.send_more(woke)
    }

    /// Send until the stream has nothing more or the socket is full.
    fn send_more(&mut self, woke: bool) -> Result<(), String> {
        if self.blocked_since.is_some() && !woke {
            return self.stalled();
        }
        loop {
            if let Some(f) = self.file.as_mut() {
                let Sent::Bytes(n) = f.send(self.fd)? else {
                    return self.blocked();
                };
                self.took(n);
                if self.file.as_ref().is_some_and(FileOut::done) {
                    self.file = None;
                }
                continue;
            }
            if self.current.is_none() {
                match self.next_slice()? {
                    Next::Slice(s) => self.current = Some((s, 0)),
                    Next::Again => continue,
                    Next::Pause => break,
                }
            }
            let Some((slice, at)) = &self.current else {
                break;
            };
            let rest = slice.split_from(*at);
            let sent = match self.zc.as_mut() {
                Some(z) if z.busy() || rest.len() >= z.min_size() => {
                    let r = z.try_send(&rest);
                    z.publish(&self.shared.zc);
                    r?
                }
                _ => crate::zerocopy::copy_send(self.fd, &rest, libc::MSG_DONTWAIT)
                    .map(Sent::or_blocked)?,
            };
            let Sent::Bytes(n) = sent else {
                return self.blocked();
            };
            self.took(n);
            if n < rest.len() {
                if let Some((_, at)) = &mut self.current {
                    *at += n;
                }
                continue;
            }
            self.current = None;
            self.shared
                .sent
                .store(self.reader.offset(), Ordering::Relaxed);
        }
        self.watch_out(false);
        Ok(())
    }

    /// The socket took `n` bytes.
    fn took(&mut self, n: usize) {
        self.shared.meter.add_written(n);
        self.blocked_since = None;
        self.sent |= n > 0;
    }

    /// The socket is full (or SEND_ZC's ring has not answered, which its
    /// own descriptor will say): wait for room.
    fn blocked(&mut self) -> Result<(), String> {
        let waiting_on_ring = self.zc.as_ref().is_some_and(ZeroCopy::busy);
        self.watch_out(!waiting_on_ring);
        self.blocked_since.get_or_insert_with(Instant::now);
        self.stalled()
    }

    /// The next slice to send: the prelude's until its end (what else it
    /// holds takes effect here), then the stream's.
    fn next_slice(&mut self) -> Result<Next, String> {
        let Some(p) = self.prelude.as_ref() else {
            return Ok(self.reader.next_slice().map_or(Next::Pause, Next::Slice));
        };
        Ok(match p.take()? {
            None => Next::Pause,
            Some(Out::Bytes(s)) => Next::Slice(s),
            Some(Out::File(f)) => {
                self.file = Some(f);
                Next::Again
            }
            Some(Out::RdbEnd(end)) => self.rdb_sent(end),
            Some(Out::Fail(why)) => return Err(why),
            Some(Out::End) => {
                self.prelude = None;
                Next::Again
            }
        })
    }

    /// The last byte of the RDB went; whether sending goes on.
    fn rdb_sent(&mut self, end: RdbEnd) -> Next {
        self.shared.rdb_sent();
        if let Some(note) = &end.note {
            log::notice(note);
        }
        if let Some(tx) = end.outcome {
            let _ = tx.send(Ok(end.bytes));
        }
        match end.then {
            Then::Online => {
                self.shared.online.store(true, Ordering::Relaxed);
                return Next::Again;
            }
            Then::AwaitAck => self.hold_until = Some(Instant::now() + WRITE_TIMEOUT),
            Then::Close => {
                log::notice(&format!(
                    "RDB transfer completed, rdb only replica (client {}) should be disconnected asap",
                    self.client.0
                ));
                // SAFETY: shutdown(2) of the pump's own socket; no memory.
                unsafe {
                    libc::shutdown(self.fd, libc::SHUT_WR);
                }
                self.linger_until = Some(Instant::now() + RDB_ONLY_LINGER);
            }
        }
        Next::Pause
    }

    /// A full socket for too long: the replica stopped reading.
    fn stalled(&self) -> Result<(), String> {
        match self.blocked_since {
            Some(since) if since.elapsed() > WRITE_TIMEOUT => {
                Err("write error: timed out (the replica stopped reading)".into())
            }
            _ => Ok(()),
        }
    }

    fn reap(&mut self) {
        if let Some(z) = self.zc.as_mut() {
            z.reap();
            z.publish(&self.shared.zc);
        }
    }

    /// The feed is over: with zero-copy sends in flight the socket stays
    /// open (out of the set: a closed peer's socket would stay readable)
    /// until their completions come, else it ends at once.
    fn end(&mut self, why: String) -> bool {
        if let Some(p) = self.prelude.take() {
            p.abandon(&why);
        }
        self.why = Some(why);
        if self.zc.as_ref().is_none_or(|z| z.in_flight() == 0) {
            return false;
        }
        let _ = self.epoll.remove(self.fd);
        self.ending = Some(Instant::now() + DRAIN_LIMIT);
        true
    }

    fn drain_step(&mut self, woke: bool) -> bool {
        if woke {
            self.reap();
        }
        let Some(until) = self.ending else {
            return false;
        };
        self.zc.as_ref().is_some_and(|z| z.in_flight() > 0) && Instant::now() < until
    }

    /// Work waits that no readiness will announce: the stream grew, or
    /// the engine stopped the feed.
    pub(crate) fn ready(&self) -> bool {
        if self.ending.is_some() {
            return false;
        }
        if self.shared.stop.load(Ordering::Relaxed) {
            return true;
        }
        let idle = self.hold_until.is_none()
            && self.linger_until.is_none()
            && self.current.is_none()
            && self.file.is_none();
        idle && match &self.prelude {
            Some(p) => p.pending(),
            None => self.reader.has_pending(),
        }
    }

    /// Serve on this thread until the feed is over, or until IO threads
    /// run again (CONFIG SET io-threads) and one takes it: sleep on the
    /// pump's descriptor and the feed's doorbell (rung by the engine after
    /// each batch that grew the stream).
    pub(crate) fn run_here(mut self: Box<Self>) {
        let shared = self.shared.clone();
        let bell = shared.bell.as_ref();
        let mut woke = true;
        loop {
            if !self.step(woke) {
                return;
            }
            if self.ending.is_none() && net::hosted::hosts_running() {
                match net::hosted::host(self) {
                    Ok(()) => return,
                    Err(back) => self = back,
                }
            }
            if self.sent {
                // Not announced asleep: the engine's rings cost it nothing.
                woke = self.wait(None, LINGER);
                continue;
            }
            if let Some(b) = bell {
                b.prepare_sleep();
            }
            if self.ready() {
                if let Some(b) = bell {
                    b.awake_after(false);
                }
                woke = false;
                continue;
            }
            let (readable, rung) = self.wait_rung(bell, TICK);
            if let Some(b) = bell {
                b.awake_after(rung);
            }
            woke = readable;
        }
    }

    fn wait(&self, bell: Option<&Doorbell>, timeout: Duration) -> bool {
        self.wait_rung(bell, timeout).0
    }

    /// Poll the pump's descriptor and `bell` for up to `timeout`:
    /// (descriptor readable, bell rung).
    fn wait_rung(&self, bell: Option<&Doorbell>, timeout: Duration) -> (bool, bool) {
        let mut fds = [
            libc::pollfd {
                fd: self.epoll.fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: bell.map_or(-1, Doorbell::fd),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is a valid array of two pollfd for the call
        // (a negative descriptor is skipped).
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout.as_millis() as i32) };
        if n <= 0 {
            // A timeout, or EINTR: look at everything anyway.
            return (n == 0 && timeout >= TICK, false);
        }
        (
            fds[0].revents & libc::POLLIN != 0,
            fds[1].revents & libc::POLLIN != 0,
        )
    }

    /// Take what the replica sent: `REPLCONF ACK <offset> [FACK <offset>]`.
    fn read_acks(&mut self) -> Result<(), String> {
        let shared = &*self.shared;
        let mut tmp = [0u8; 4096];
        loop {
            // SAFETY: recv into our own buffer, without blocking.
            let n = unsafe {
                libc::recv(
                    self.fd,
                    tmp.as_mut_ptr().cast(),
                    tmp.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n == 0 {
                return Err("connection closed by the replica".into());
            }
            if n < 0 {
                let e = std::io::Error::last_os_error();
                match e.kind() {
                    ErrorKind::WouldBlock => break,
                    ErrorKind::Interrupted => continue,
                    _ => return Err(format!("read error: {e}")),
                }
            }
            self.input.extend_from_slice(&tmp[..n as usize]);
            shared.meter.add_read(n as usize);
            if self.input.len() > INPUT_MAX {
                return Err("the replica sent too much".into());
            }
        }
        let limits = resp::Limits::default();
        let mut pos = 0;
        loop {
            let mut args = Vec::new();
            let parsed = resp::parse_command(&self.input[pos..], &limits, &mut args)
                .map_err(|e| format!("protocol error from the replica: {}", e.message()))?;
            let resp::Parsed::Command { consumed, argc } = parsed else {
                break;
            };
            shared.commands.fetch_add(1, Ordering::Relaxed);
            let buf = &self.input[pos..];
            let arg = |i: usize| args[i].slice(buf);
            let offset_at = |i: usize| {
                std::str::from_utf8(arg(i))
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok())
            };
            if argc >= 3
                && arg(0).eq_ignore_ascii_case(b"replconf")
                && arg(1).eq_ignore_ascii_case(b"ack")
                && let Some(off) = offset_at(2)
            {
                if argc >= 5
                    && arg(3).eq_ignore_ascii_case(b"fack")
                    && let Some(fack) = offset_at(4)
                {
                    shared.aof_ack.fetch_max(fack, Ordering::Relaxed);
                }
                shared.ack_offset.fetch_max(off, Ordering::Relaxed);
                shared
                    .ack_ms
                    .store(engine::server::wall_ms(), Ordering::Relaxed);
                shared.wake.wake();
            }
            pos += consumed;
        }
        self.input.drain(..pos);
        Ok(())
    }
}

/// What [`Pump::next_slice`] found.
enum Next {
    Slice(Slice),
    /// Look again (a marker took effect).
    Again,
    /// Nothing to send now.
    Pause,
}

impl Drop for Pump {
    /// The socket closes once the engine can no longer shut it down by
    /// number (another connection may be given the number next).
    fn drop(&mut self) {
        if let Some(z) = self.zc.as_mut() {
            // Only what the drain limit left: leaked, never freed while
            // the kernel may read it.
            z.drain(Duration::ZERO);
            z.publish(&self.shared.zc);
        }
        self.shared.finish(self.client);
        drop(self.sock.take());
        let why = self.why.take().unwrap_or_else(|| "stopped".into());
        self.shared.set_gone(why);
    }
}

impl net::hosted::Hosted for Pump {
    fn fd(&self) -> RawFd {
        self.epoll.fd()
    }

    fn joined(&mut self, bell: &Arc<Doorbell>) {
        self.shared.set_host_bell(Some(bell.clone()));
    }

    fn step(&mut self, woke: bool) -> bool {
        Pump::step(self, woke)
    }

    fn ready(&self) -> bool {
        Pump::ready(self)
    }

    fn leave(self: Box<Self>) {
        self.shared.set_host_bell(None);
        serve(self, false);
    }
}

/// Serve the stream from an IO thread if one takes it, else from a
/// thread of its own: this one (the feed's, after its full sync) when
/// `here`, else a new `repl-feed` thread.
pub(crate) fn serve(pump: Box<Pump>, here: bool) {
    let Err(pump) = net::hosted::host(pump) else {
        return;
    };
    if here {
        return pump.run_here();
    }
    let client = pump.client;
    let spawned = std::thread::Builder::new()
        .name("repl-feed".into())
        .spawn(move || pump.run_here());
    if let Err(e) = spawned {
        log::warning(&format!(
            "replica feed of client {}: no thread to carry on ({e})",
            client.0
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::Producer;
    use engine::replication::primary::RdbFraming;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A pump on one end of a loopback connection (the replica's end
    /// returned), its stream written through the returned writer; with a
    /// full sync to send first (`rdb`), what sends it.
    fn pump(rdb: Option<RdbFraming>) -> (Pump, TcpStream, effects::Writer, Option<Producer>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let replica = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (sock, _) = listener.accept().unwrap();
        // As the feed sets it: small writes are not held for an ACK.
        sock.set_nodelay(true).unwrap();
        let writer = effects::Writer::new(100);
        let shared = Shared::for_tests(rdb, 100);
        let (producer, prelude) = match rdb {
            Some(_) => {
                let (tx, rx) = crate::prelude::queue(shared.clone());
                (Some(tx), Some(rx))
            }
            None => (None, None),
        };
        let reader = writer.reader();
        let p = Pump::new(ClientId(7), sock, reader, Vec::new(), None, shared, prelude);
        (p.unwrap(), replica, writer, producer)
    }

    fn rdb_end(outcome: Option<std::sync::mpsc::Sender<Result<u64, String>>>, then: Then) -> Out {
        Out::RdbEnd(RdbEnd {
            outcome,
            bytes: 3,
            then,
            note: None,
        })
    }

    /// What the replica can read now.
    fn read_now(replica: &mut TcpStream) -> Vec<u8> {
        replica.set_nonblocking(true).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 65536];
        loop {
            match replica.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("read: {e}"),
            }
        }
        got
    }

    /// The pump's descriptor is readable.
    fn readable(p: &Pump) -> bool {
        p.wait(None, Duration::ZERO)
    }

    fn ack(offset: u64) -> Vec<u8> {
        let o = offset.to_string();
        format!(
            "*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n${}\r\n{o}\r\n",
            o.len()
        )
        .into_bytes()
    }

    #[test]
    fn after_an_eof_marked_rdb_the_stream_waits_for_the_first_ack() {
        let (mut p, mut replica, mut w, rdb) = pump(Some(RdbFraming::EofMark));
        let rdb = rdb.unwrap();
        w.append(b"*1\r\n$4\r\nPING\r\n");
        w.publish();
        assert!(!p.ready(), "nothing is sent before the RDB");
        assert!(p.step(false));
        assert!(read_now(&mut replica).is_empty());
        let (outcome, told) = std::sync::mpsc::channel();
        rdb.push(Out::bytes(Vec::new())).unwrap();
        assert!(
            p.step(false),
            "nothing to send is not queued: no full socket"
        );
        assert!(p.blocked_since.is_none());
        rdb.push(Out::bytes(&b"RDB"[..])).unwrap();
        rdb.push(rdb_end(Some(outcome), Then::AwaitAck)).unwrap();
        assert!(p.ready(), "the RDB's bytes are work");
        assert!(p.step(false));
        assert_eq!(told.try_recv(), Ok(Ok(3)), "the RDB is out");
        rdb.push(Out::End).unwrap();
        assert!(!p.ready(), "held: only the replica's ACK moves it");
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(read_now(&mut replica), b"RDB");
        assert!(p.shared.sending_rdb().is_none());
        assert!(!p.shared.online.load(Ordering::Relaxed));
        replica.write_all(&ack(100)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert!(readable(&p));
        assert!(p.step(true));
        assert!(p.shared.online.load(Ordering::Relaxed));
        assert_eq!(p.shared.ack_offset.load(Ordering::Relaxed), 100);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(read_now(&mut replica), b"*1\r\n$4\r\nPING\r\n");
        assert_eq!(p.shared.sent.load(Ordering::Relaxed), 114);
        // More of the stream: ready at once, sent by a step with nothing
        // readable.
        w.append(b"+more");
        w.publish();
        assert!(p.ready());
        assert!(p.step(false));
        assert!(!p.ready());
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(read_now(&mut replica), b"+more");
    }

    #[test]
    fn a_full_socket_is_watched_and_the_rest_follows_in_order() {
        let (mut p, mut replica, mut w, _) = pump(None);
        crate::zerocopy::set_socket_buffer(p.fd, libc::SO_SNDBUF, 32 << 10);
        crate::zerocopy::set_socket_buffer(replica.as_raw_fd(), libc::SO_RCVBUF, 32 << 10);
        let want: Vec<u8> = (0..(2 << 20)).map(|i: u32| (i % 251) as u8).collect();
        for chunk in want.chunks(100_000) {
            w.append(chunk);
        }
        w.publish();
        assert!(p.step(false));
        assert!(p.blocked_since.is_some(), "2 MB do not fit the socket");
        assert!(!p.ready(), "a full socket waits for its readiness");
        assert!(!readable(&p));
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while got.len() < want.len() && Instant::now() < deadline {
            got.extend(read_now(&mut replica));
            // Room again: the descriptor says so, and a woken step sends.
            let woke = p.wait(None, Duration::from_millis(1));
            assert!(p.step(woke));
        }
        assert!(
            got == want,
            "{} of {} bytes, in order",
            got.len(),
            want.len()
        );
        assert_eq!(
            p.shared.sent.load(Ordering::Relaxed),
            100 + want.len() as u64
        );
        assert!(p.blocked_since.is_none() && !p.watching_out);
    }

    #[test]
    fn a_stopped_or_closed_feed_ends_and_says_why_after_its_socket_closed() {
        let (mut p, mut replica, _w, _) = pump(None);
        p.shared.stop.store(true, Ordering::Relaxed);
        assert!(p.ready(), "a stop is work");
        assert!(!p.step(false));
        let shared = p.shared.clone();
        assert_eq!(shared.gone(), None, "said once the socket is closed");
        drop(p);
        assert_eq!(shared.gone().as_deref(), Some("stopped"));
        replica.set_nonblocking(false).unwrap();
        assert_eq!(replica.read(&mut [0u8; 8]).unwrap(), 0, "closed");

        let (mut p, replica, _w, _) = pump(None);
        drop(replica);
        std::thread::sleep(Duration::from_millis(20));
        assert!(readable(&p));
        assert!(!p.step(true));
        let shared = p.shared.clone();
        drop(p);
        assert_eq!(
            shared.gone().as_deref(),
            Some("connection closed by the replica")
        );
    }

    /// A saved RDB goes by sendfile(2) as the socket takes it; an
    /// rdb-only replica then gets the end of the stream and, once it
    /// closes its own end, the feed ends.
    #[test]
    fn a_saved_rdb_is_sent_whole_through_a_full_socket_and_rdb_only_ends_after_it() {
        let (mut p, mut replica, mut w, rdb) = pump(Some(RdbFraming::File));
        let rdb = rdb.unwrap();
        crate::zerocopy::set_socket_buffer(p.fd, libc::SO_SNDBUF, 32 << 10);
        crate::zerocopy::set_socket_buffer(replica.as_raw_fd(), libc::SO_RCVBUF, 32 << 10);
        let want: Vec<u8> = (0..(3 << 20)).map(|i: u32| (i % 241) as u8).collect();
        let dir = std::env::temp_dir().join(format!("ringkv-pump-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("dump.rdb");
        std::fs::write(&path, &want).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        w.append(b"+not sent to an rdb-only replica");
        w.publish();
        let sender = std::thread::spawn(move || {
            rdb.push(Out::bytes(format!("${}\r\n", 3 << 20))).unwrap();
            rdb.push(Out::File(FileOut::new(file, 3 << 20))).unwrap();
            rdb.push(rdb_end(None, Then::Close)).unwrap();
            rdb.push(Out::End).unwrap();
        });
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while p.linger_until.is_none() && Instant::now() < deadline {
            got.extend(read_now(&mut replica));
            let woke = p.wait(None, Duration::from_millis(1));
            assert!(p.step(woke));
        }
        sender.join().unwrap();
        assert!(p.file.is_none() && p.shared.sending_rdb().is_none());
        assert!(!p.shared.online.load(Ordering::Relaxed), "rdb-only");
        replica.set_nonblocking(false).unwrap();
        replica.read_to_end(&mut got).unwrap();
        let head = format!("${}\r\n", 3 << 20);
        assert!(got.len() == head.len() + want.len(), "{} bytes", got.len());
        assert!(got.starts_with(head.as_bytes()) && got[head.len()..] == want[..]);
        assert!(p.step(false), "the replica has not closed yet");
        drop(replica);
        std::thread::sleep(Duration::from_millis(20));
        assert!(!p.step(true));
        let shared = p.shared.clone();
        drop(p);
        assert_eq!(shared.gone().as_deref(), Some(RDB_ONLY_SENT));
    }

    #[test]
    fn a_sync_that_fails_before_its_rdb_is_out_ends_the_feed_with_its_reason() {
        let (mut p, _replica, _w, rdb) = pump(Some(RdbFraming::EofMark));
        let rdb = rdb.unwrap();
        rdb.push(Out::bytes(&b"$EOF:"[..])).unwrap();
        rdb.push(Out::Fail("the sync was aborted".into())).unwrap();
        assert!(!p.step(false));
        let shared = p.shared.clone();
        drop(p);
        assert_eq!(shared.gone().as_deref(), Some("the sync was aborted"));
        assert!(rdb.push(Out::End).is_err(), "the feed's thread stops");
    }
}
