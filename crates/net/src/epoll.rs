//! The epoll event loop: level-triggered, non-blocking sockets, `read`
//! straight into the connection's buffer until EAGAIN (bounded per
//! iteration), replies written right after the batch, EPOLLOUT registered
//! only while output is pending.

use crate::connection::{Closing, READ_CHUNK, fill_iovecs};
use crate::driver::{BusyIo, Driver, GEN_MASK};
use crate::listener::{self, Listener};
use engine::log;
use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// Marks a listener's epoll key (connection keys are slot | gen << 32,
/// with the generation kept to 24 bits).
const LISTENER: u64 = 1 << 63;
/// The doorbell's key (IO threads).
const BELL: u64 = 1 << 62;
/// The hosted set's key (IO threads).
const HOSTED: u64 = 1 << 61;
const MAX_EVENTS: usize = 1024;
/// Reads per connection per iteration, so one fast sender cannot starve
/// the others (level-triggered epoll reports the rest next time).
const READS_PER_WAKE: usize = 16;
/// Largest single read when a big argument is arriving.
const BIG_READ: usize = 4 << 20;

pub(crate) struct Epoll {
    epfd: RawFd,
    /// Scratch iovecs for a reply that holds large values by reference.
    iov: Vec<libc::iovec>,
    /// Listeners taken out of the set after EMFILE, until this instant.
    accept_paused_until: Option<Instant>,
    listeners_removed: bool,
    last_accept_error_log: Option<Instant>,
    /// The listeners' fds by index (their epoll keys), for accepting while
    /// a script is busy.
    listener_fds: Vec<RawFd>,
    /// What a connection with no input waiting reads into: only the bytes
    /// that came are then copied to its own buffer, so an idle connection
    /// holds no read buffer of [`READ_CHUNK`] bytes.
    scratch: Box<[u8]>,
}

impl Drop for Epoll {
    fn drop(&mut self) {
        listener::close_fd(self.epfd);
    }
}

/// Events taken per look while a script is busy.
const BUSY_EVENTS: usize = 256;

/// Inline mode while a script is busy (see [`BusyIo`]): the same accepts,
/// reads and writes, without waiting. The doorbell and the connections
/// lent to the batch are left alone: level-triggered, they are reported
/// again after it.
impl BusyIo for Epoll {
    fn poll(&mut self, d: &mut Driver) {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; BUSY_EVENTS];
        // SAFETY: `events` has room for BUSY_EVENTS entries.
        let n = unsafe {
            libc::epoll_wait(
                self.epfd,
                events.as_mut_ptr(),
                BUSY_EVENTS as libc::c_int,
                0,
            )
        };
        for ev in &events[..n.max(0) as usize] {
            let (flags, data) = (ev.events, ev.u64);
            if data == BELL || data == HOSTED {
                continue;
            }
            if data & LISTENER != 0 {
                if let Some(&lfd) = self.listener_fds.get((data & !LISTENER) as usize) {
                    self.accept(d, lfd);
                }
                continue;
            }
            let (slot, generation) = (data as u32, (data >> 32) as u32);
            if d.conn_gen(slot, generation).is_none() {
                continue;
            }
            let readable = (libc::EPOLLIN | libc::EPOLLHUP | libc::EPOLLERR) as u32;
            if flags & readable != 0 {
                self.read(d, slot);
            }
            if flags & libc::EPOLLOUT as u32 != 0 {
                self.write(d, slot);
            }
        }
    }

    fn flush(&mut self, d: &mut Driver, slots: &[u32]) {
        for &slot in slots {
            self.write(d, slot);
        }
    }

    fn close(&mut self, d: &mut Driver, slots: &[u32]) {
        for &slot in slots {
            self.try_close(d, slot);
        }
    }
}

fn key(slot: u32, generation: u32) -> u64 {
    u64::from(generation & GEN_MASK) << 32 | u64::from(slot)
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

impl Epoll {
    pub(crate) fn new(listeners: &[Listener]) -> io::Result<Epoll> {
        // SAFETY: epoll_create1 has no memory preconditions.
        let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epfd < 0 {
            return Err(io::Error::last_os_error());
        }
        let ep = Epoll {
            epfd,
            iov: Vec::new(),
            accept_paused_until: None,
            listeners_removed: false,
            last_accept_error_log: None,
            listener_fds: listeners.iter().map(|l| l.fd).collect(),
            scratch: vec![0; READ_CHUNK].into_boxed_slice(),
        };
        for (i, l) in listeners.iter().enumerate() {
            listener::set_nonblocking(l.fd)?;
            ep.ctl(
                libc::EPOLL_CTL_ADD,
                l.fd,
                libc::EPOLLIN as u32,
                LISTENER | i as u64,
            )?;
        }
        Ok(ep)
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, data: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: data };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call.
        let r = unsafe { libc::epoll_ctl(self.epfd, op, fd, &mut ev) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Serve until shutdown (every connection closed; returns no
    /// listeners) or until the driver hands its sockets over (a retiring
    /// IO thread, or inline mode switching to threaded): then the
    /// connections stay in the driver and the listeners are returned, all
    /// still open; dropping the epoll set takes them out of it.
    pub(crate) fn run(
        mut self,
        d: &mut Driver,
        mut listeners: Vec<Listener>,
    ) -> io::Result<Vec<Listener>> {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS];
        let mut list = Vec::new();
        let mut listening = true;
        // Started with the listeners: CONFIG SET `port` / `bind` swaps them
        // here, also once `port 0` left this loop none.
        let holds_listeners = !listeners.is_empty();
        if let Some(fd) = d.doorbell_fd() {
            self.ctl(libc::EPOLL_CTL_ADD, fd, libc::EPOLLIN as u32, BELL)?;
        }
        if let Some(fd) = d.hosted_fd() {
            self.ctl(libc::EPOLL_CTL_ADD, fd, libc::EPOLLIN as u32, HOSTED)?;
        }
        loop {
            let wait = d.before_wait();
            // Round up so a 0.4 ms cron remainder does not spin.
            let timeout_ms = wait.as_micros().div_ceil(1000) as libc::c_int;
            // SAFETY: `events` has room for MAX_EVENTS entries.
            let n = unsafe {
                libc::epoll_wait(
                    self.epfd,
                    events.as_mut_ptr(),
                    MAX_EVENTS as libc::c_int,
                    timeout_ms,
                )
            };
            if n < 0 && errno() != libc::EINTR {
                return Err(io::Error::last_os_error());
            }
            let ready = &events[..n.max(0) as usize];
            d.after_wait(ready.iter().any(|ev| ev.u64 == BELL));
            for ev in ready {
                let (flags, data) = (ev.events, ev.u64);
                if data == BELL {
                    // Drained by after_wait.
                    continue;
                }
                if data == HOSTED {
                    d.hosted_woke();
                    continue;
                }
                if data & LISTENER != 0 {
                    let l = &listeners[(data & !LISTENER) as usize];
                    self.accept(d, l.fd);
                    continue;
                }
                let slot = data as u32;
                let generation = (data >> 32) as u32;
                if d.conn_gen(slot, generation).is_none() {
                    continue;
                }
                let readable = (libc::EPOLLIN | libc::EPOLLHUP | libc::EPOLLERR) as u32;
                if flags & readable != 0 {
                    self.read(d, slot);
                }
                if flags & libc::EPOLLOUT as u32 != 0 {
                    self.write(d, slot);
                }
            }
            d.process_with(&mut self);
            d.take_adopted(&mut list);
            for &slot in &list {
                self.register(d, slot);
            }
            let done = d.tick();
            d.take_flush(&mut list);
            for &slot in &list {
                self.write(d, slot);
            }
            d.take_closing(&mut list);
            for &slot in &list {
                self.try_close(d, slot);
            }
            if done {
                break;
            }
            if listening {
                if holds_listeners && crate::rebind::pending() {
                    self.swap_listeners(&mut listeners)?;
                }
                self.manage_listeners(d, &listeners, &mut listening);
            }
        }
        if d.handing_over() {
            // Reads and writes are synchronous: nothing is in flight.
            return Ok(listeners);
        }
        for slot in d.slots() {
            if let Some(c) = d.conn(slot) {
                listener::close_fd(c.fd);
            }
            d.release(slot);
        }
        drop(listeners);
        Ok(Vec::new())
    }

    /// CONFIG SET `port` / `bind`: the new listeners in, the old out. They
    /// leave the set before they close: a descriptor shared with a new
    /// listener (an address kept) would otherwise stay in it.
    fn swap_listeners(&mut self, listeners: &mut Vec<Listener>) -> io::Result<()> {
        let registered = !self.listeners_removed;
        if registered {
            for l in listeners.iter() {
                let _ = self.ctl(libc::EPOLL_CTL_DEL, l.fd, 0, 0);
            }
        }
        crate::rebind::swap(listeners);
        self.listener_fds = listeners.iter().map(|l| l.fd).collect();
        for (i, l) in listeners.iter().enumerate() {
            listener::set_nonblocking(l.fd)?;
            if registered {
                self.ctl(
                    libc::EPOLL_CTL_ADD,
                    l.fd,
                    libc::EPOLLIN as u32,
                    LISTENER | i as u64,
                )?;
            }
        }
        Ok(())
    }

    /// Stop listening for good at shutdown; pause and resume after an
    /// accept failure such as EMFILE.
    fn manage_listeners(&mut self, d: &Driver, listeners: &[Listener], listening: &mut bool) {
        let set = |ep: &Epoll, add: bool| {
            for (i, l) in listeners.iter().enumerate() {
                let _ = if add {
                    ep.ctl(
                        libc::EPOLL_CTL_ADD,
                        l.fd,
                        libc::EPOLLIN as u32,
                        LISTENER | i as u64,
                    )
                } else {
                    ep.ctl(libc::EPOLL_CTL_DEL, l.fd, 0, 0)
                };
            }
        };
        if d.shutting_down() {
            *listening = false;
            if !self.listeners_removed {
                set(self, false);
            }
            return;
        }
        let Some(until) = self.accept_paused_until else {
            return;
        };
        if !self.listeners_removed {
            set(self, false);
            self.listeners_removed = true;
        } else if Instant::now() >= until {
            set(self, true);
            self.listeners_removed = false;
            self.accept_paused_until = None;
        }
    }

    /// Take in up to `max-new-connections-per-cycle` connections; the
    /// rest stay queued on the listener, which is reported again.
    fn accept(&mut self, d: &mut Driver, lfd: RawFd) {
        for _ in 0..crate::accept_budget::per_cycle() {
            // SAFETY: no address is requested, so null pointers are allowed.
            let fd = unsafe {
                libc::accept4(
                    lfd,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                )
            };
            if fd < 0 {
                match errno() {
                    libc::EAGAIN => return,
                    libc::EINTR | libc::ECONNABORTED => continue,
                    e => {
                        self.accept_error(e);
                        return;
                    }
                }
            }
            if let Some(slot) = d.accept(fd) {
                self.register(d, slot);
            }
        }
    }

    /// Add a new connection's socket to the set.
    fn register(&mut self, d: &mut Driver, slot: u32) {
        let Some(c) = d.conn(slot) else { return };
        let interest = libc::EPOLLIN as u32;
        if self
            .ctl(libc::EPOLL_CTL_ADD, c.fd, interest, key(slot, c.generation))
            .is_err()
        {
            d.close(slot, Closing::Now);
        } else {
            c.interest = interest;
        }
    }

    /// Out of descriptors (or another accept failure): log at most once a
    /// second and stop listening briefly instead of spinning on a listener
    /// that stays readable.
    fn accept_error(&mut self, e: i32) {
        let now = Instant::now();
        if self
            .last_accept_error_log
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1))
        {
            self.last_accept_error_log = Some(now);
            log::warning(&format!(
                "Accepting client connection: {}",
                io::Error::from_raw_os_error(e)
            ));
        }
        if matches!(
            e,
            libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM
        ) && self.accept_paused_until.is_none()
        {
            // The loop takes the listeners out of the set and puts them
            // back when the pause is over.
            self.accept_paused_until = Some(now + Duration::from_millis(100));
        }
    }

    fn read(&mut self, d: &mut Driver, slot: u32) {
        for _ in 0..READS_PER_WAKE {
            let Some(c) = d.conn(slot) else { return };
            if c.peer_eof {
                break;
            }
            let fd = c.fd;
            let client = c.client;
            if c.input_closed() {
                // Keep draining what the peer sends so that closing the
                // socket later sends FIN, not RST (an RST could destroy the
                // error reply before the client reads it).
                let mut sink = [0u8; 4096];
                // SAFETY: `sink` is valid for its length.
                let n = unsafe { libc::read(fd, sink.as_mut_ptr().cast(), sink.len()) };
                if n > 0 {
                    continue;
                }
                if n < 0 && matches!(errno(), libc::EAGAIN | libc::EINTR) {
                    break;
                }
                d.on_eof(slot);
                break;
            }
            let (n, room) = if c.has_pending_input() {
                let room = c.reserve_read(BIG_READ);
                let buf = c.read_buf();
                let len = buf.len();
                // SAFETY: `reserve_read` made `room` bytes of spare capacity
                // after `len`; read(2) writes at most that many.
                let n = unsafe { libc::read(fd, buf.as_mut_ptr().add(len).cast(), room) };
                if n > 0 {
                    // SAFETY: the kernel initialized `n` bytes past `len`,
                    // all within the capacity.
                    unsafe { buf.set_len(len + n as usize) };
                }
                (n, room)
            } else {
                let room = self.scratch.len();
                // SAFETY: `scratch` is valid for writes of its length.
                let n = unsafe { libc::read(fd, self.scratch.as_mut_ptr().cast(), room) };
                if n > 0 {
                    c.push_input(&self.scratch[..n as usize]);
                }
                (n, room)
            };
            if n > 0 {
                let n = n as usize;
                d.note_read(slot, client, n);
                if n < room {
                    // The socket is most likely drained.
                    break;
                }
            } else if n == 0 {
                d.on_eof(slot);
                break;
            } else {
                match errno() {
                    libc::EAGAIN => break,
                    libc::EINTR => continue,
                    _ => {
                        d.on_eof(slot);
                        break;
                    }
                }
            }
        }
        self.update_interest(d, slot);
    }

    fn write(&mut self, d: &mut Driver, slot: u32) {
        loop {
            let Some(c) = d.conn(slot) else { return };
            if c.closing == Closing::Now {
                return;
            }
            let fd = c.fd;
            let Some((buf, from)) = c.begin_send() else {
                break;
            };
            let (n, want) = if buf.has_refs() {
                // Large values by reference: one sendmsg over the bytes
                // and the values, nothing copied.
                let want = fill_iovecs(buf, from, &mut self.iov);
                // SAFETY: a zeroed msghdr is valid (no address, no control
                // data); its iovecs point into `buf`, which is borrowed, and
                // so unchanged, for the duration of the call.
                let n = unsafe {
                    let mut msg: libc::msghdr = std::mem::zeroed();
                    msg.msg_iov = self.iov.as_mut_ptr();
                    msg.msg_iovlen = self.iov.len() as _;
                    libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL)
                };
                (n, want)
            } else {
                let chunk = &buf.bytes[from..];
                // SAFETY: `chunk` is valid for its length during the call.
                let n = unsafe {
                    libc::send(fd, chunk.as_ptr().cast(), chunk.len(), libc::MSG_NOSIGNAL)
                };
                (n, chunk.len())
            };
            if n >= 0 {
                let partial = (n as usize) < want;
                d.on_sent(slot, n as usize);
                if partial {
                    // The socket buffer is full; EPOLLOUT will say when to go on.
                    break;
                }
            } else {
                let e = errno();
                // Nothing went out: count it all again.
                if let Some(c) = d.conn(slot) {
                    c.publish_output_len();
                }
                match e {
                    libc::EAGAIN => break,
                    libc::EINTR => continue,
                    _ => {
                        d.on_send_error(slot);
                        return;
                    }
                }
            }
        }
        self.update_interest(d, slot);
    }

    /// Read interest while the peer may still send, write interest while
    /// output is pending.
    fn update_interest(&mut self, d: &mut Driver, slot: u32) {
        let Some(c) = d.conn(slot) else { return };
        if c.closing == Closing::Now {
            return;
        }
        let mut want = 0u32;
        if !c.peer_eof {
            want |= libc::EPOLLIN as u32;
        }
        if c.has_output() {
            want |= libc::EPOLLOUT as u32;
        }
        if want != c.interest {
            let (fd, k) = (c.fd, key(slot, c.generation));
            c.interest = want;
            if self.ctl(libc::EPOLL_CTL_MOD, fd, want, k).is_err() {
                d.close(slot, Closing::Now);
            }
        }
    }

    fn try_close(&mut self, d: &mut Driver, slot: u32) {
        let Some(c) = d.conn(slot) else { return };
        match c.closing {
            Closing::Open if c.moving => {
                // Reads and writes are synchronous here: once its request
                // is back (reattach re-queues this), nothing is in flight.
                if !c.in_flight() {
                    let _ = self.ctl(libc::EPOLL_CTL_DEL, c.fd, 0, 0);
                    d.hand_over(slot);
                }
                return;
            }
            Closing::Open => return,
            Closing::AfterFlush if c.must_wait() => {
                // Still draining: the write path re-queues the close.
                self.update_interest(d, slot);
                return;
            }
            _ => {}
        }
        let fd = c.fd;
        let _ = self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0);
        listener::close_fd(fd);
        d.release(slot);
    }
}
