//! The io_uring event loop, hand-rolled on the `io-uring` crate.
//!
//! * Ring set up with `SINGLE_ISSUER | DEFER_TASKRUN` (completions are
//!   produced only when this thread enters the kernel, so no interrupting
//!   task work), falling back to a plain ring on kernels that refuse them.
//! * One multishot accept per listener; one multishot recv per connection
//!   drawing from a provided-buffer ring: bytes are copied into the
//!   connection's read buffer and the buffer goes straight back, to be put
//!   in the ring again first (the ring holds a window of the buffers, see
//!   [`BufRing`]).
//!   A recv that ends (ENOBUFS when the ring ran dry, or any final
//!   completion) is re-armed.
//! * Sends: at most one in flight per connection, from the connection's
//!   sending buffer, which is not touched until its completion. All sends
//!   queued during an iteration go to the kernel with the next wait, in
//!   one `io_uring_enter`; partial sends continue from where they stopped.
//!   A send's bytes leave the client's output meter (CLIENT LIST) when it
//!   is queued, since the client may read them before the completion is
//!   reaped; one still waiting for socket room after that wait is counted
//!   again.
//!   A buffer holding large values by reference goes as one
//!   `IORING_OP_SENDMSG` whose msghdr and iovec array live in this loop's
//!   per-slot [`SendMsg`], untouched until the completion.
//! * Completions carry kind + slot + generation, so one that outlives its
//!   connection is recognized and ignored.
//! * Closing: `shutdown(2)` wakes any recv or send still pending; the fd is
//!   closed and the slot freed only after their last completions, so the
//!   kernel never writes into or reads from memory that was given back.
//! * The wait carries a timeout (`submit_with_args`) so cron runs and the
//!   stop flag is checked. No SQPOLL, no forced IOSQE_ASYNC.

use crate::accept_budget::AcceptBudget;
use crate::connection::{Closing, fill_iovecs};
use crate::driver::{BusyIo, Driver, GEN_MASK};
use crate::listener::{self, Listener};
use crate::probe;
use engine::log;
use io_uring::{IoUring, cqueue, opcode, register, squeue, types};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

const SQ_ENTRIES: u32 = 1024;
/// io_uring_enter's flag to reap completions (include/uapi/linux/io_uring.h);
/// the io-uring crate keeps its copy private.
const IORING_ENTER_GETEVENTS: u32 = 1;
const CQ_ENTRIES: u32 = 16384;
/// Provided-buffer group for all recvs.
const BGID: u16 = 0;
const BUF_COUNT: u16 = 512;
const BUF_SIZE: usize = 16 * 1024;

const KIND_ACCEPT: u64 = 1;
const KIND_RECV: u64 = 2;
const KIND_SEND: u64 = 3;
/// Completions of cancel requests: nothing to do.
const KIND_CANCEL: u64 = 4;
/// The polls of the descriptors that end an IO thread's wait besides its
/// sockets: slot [`BELL`] its doorbell, [`HOSTED`] its hosted set.
const KIND_WATCH: u64 = 5;
const BELL: usize = 0;
const HOSTED: usize = 1;

/// How long letting go of the sockets may wait for cancelled operations.
const DETACH_LIMIT: Duration = Duration::from_secs(5);

fn tag(kind: u64, slot: u32, generation: u32) -> u64 {
    kind << 56 | u64::from(generation & GEN_MASK) << 32 | u64::from(slot)
}

fn untag(data: u64) -> (u64, u32, u32) {
    (data >> 56, data as u32, (data >> 32) as u32 & GEN_MASK)
}

/// One entry of the provided-buffer ring, as the kernel lays it out
/// (`struct io_uring_buf`); the ring's tail lives in entry 0's `resv`.
#[repr(C)]
struct RawBuf {
    addr: u64,
    len: u32,
    bid: u16,
    resv: u16,
}

/// Anonymous, page-aligned memory shared with the kernel.
struct Mapping {
    ptr: *mut u8,
    len: usize,
    /// An operation the kernel never completed may still use it: never
    /// unmap.
    leak: bool,
}

impl Mapping {
    fn new(len: usize) -> io::Result<Mapping> {
        // SAFETY: a fresh private anonymous mapping; no existing memory is
        // affected.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
            leak: false,
        })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if !self.leak {
            // SAFETY: `ptr`/`len` are exactly what mmap returned, and no
            // kernel operation refers to the memory any more (see `leak`).
            unsafe {
                libc::munmap(self.ptr.cast(), self.len);
            }
        }
    }
}

/// The provided-buffer ring and its buffers.
///
/// Only a window of the buffers is in the kernel's ring at a time, refilled
/// from a stack of returned ones, most recently used first. The kernel takes
/// ring entries in order, so with all 512 published every buffer would be
/// written in turn and all 8 MiB would stay resident after one busy burst;
/// with the window the pages that get written are those of the few buffers
/// in circulation (measured: RSS per key at 16-byte values, docs/BENCHMARKS.md
/// §4). The window doubles when the ring runs dry (ENOBUFS) and halves after
/// a long run without that.
struct BufRing {
    ring: Mapping,
    data: Mapping,
    /// Our copy of the tail: entries up to it are owned by the kernel once
    /// published.
    tail: u16,
    published: u16,
    /// Buffers the kernel has filled (completions that carried one); the
    /// ring holds `tail - taken` of them.
    taken: u16,
    /// Buffers out of the ring and out of use; the last one pushed is the
    /// first put back.
    free: Vec<u16>,
    /// How many buffers the ring is refilled to.
    window: u16,
    /// Buffers taken since the ring last ran dry or the window last shrank.
    taken_since_dry: u32,
}

/// The smallest window: one read each for a few dozen connections between
/// two refills.
const MIN_WINDOW: u16 = 32;
/// Buffers taken without the ring running dry, per buffer of the window,
/// before the window halves. Large, so a window that is needed now and then
/// is not given up between two bursts.
const SHRINK_AFTER: u32 = 1024;

impl BufRing {
    fn new() -> io::Result<BufRing> {
        let ring = Mapping::new(usize::from(BUF_COUNT) * size_of::<RawBuf>())?;
        let data = Mapping::new(usize::from(BUF_COUNT) * BUF_SIZE)?;
        let mut br = BufRing {
            ring,
            data,
            tail: 0,
            published: 0,
            taken: 0,
            // Popped from the end: buffer 0 goes into the ring first.
            free: (0..BUF_COUNT).rev().collect(),
            window: MIN_WINDOW,
            taken_since_dry: 0,
        };
        br.publish();
        Ok(br)
    }

    /// Buffer `bid` is back from use (put in the ring again by `publish`
    /// while the window has room).
    fn recycle(&mut self, bid: u16) {
        self.free.push(bid);
    }

    /// A completion carried a buffer: the kernel took it off the ring.
    fn took(&mut self) {
        self.taken = self.taken.wrapping_add(1);
        self.taken_since_dry += 1;
        if self.taken_since_dry >= SHRINK_AFTER * u32::from(self.window) && self.window > MIN_WINDOW
        {
            self.window /= 2;
            self.taken_since_dry = 0;
        }
    }

    /// The ring ran dry: a recv ended with ENOBUFS.
    fn ran_dry(&mut self) {
        self.window = (self.window * 2).min(BUF_COUNT);
        self.taken_since_dry = 0;
    }

    /// Put buffer `bid` at our (unpublished) tail.
    fn push_entry(&mut self, bid: u16) {
        let idx = usize::from(self.tail & (BUF_COUNT - 1));
        let entry = self.ring.ptr.cast::<RawBuf>();
        // SAFETY: `idx` < BUF_COUNT, so the entry is inside the mapping. The
        // slot at our unpublished tail is not read by the kernel until the
        // tail moves past it. Fields are written through the raw pointer so
        // entry 0's `resv` (the tail, which the kernel reads) is not touched.
        unsafe {
            let e = entry.add(idx);
            (*e).addr = self.data.ptr.add(usize::from(bid) * BUF_SIZE) as u64;
            (*e).len = BUF_SIZE as u32;
            (*e).bid = bid;
        }
        self.tail = self.tail.wrapping_add(1);
    }

    /// Refill the ring up to the window and publish it to the kernel.
    fn publish(&mut self) {
        while self.tail.wrapping_sub(self.taken) < self.window {
            let Some(bid) = self.free.pop() else { break };
            self.push_entry(bid);
        }
        if self.published == self.tail {
            return;
        }
        // SAFETY: the tail is the `resv` field of entry 0, a naturally
        // aligned u16 inside the mapping; the kernel only reads it, and
        // AtomicU16 has the same layout as u16.
        let tail = unsafe {
            let p = std::ptr::addr_of_mut!((*self.ring.ptr.cast::<RawBuf>()).resv);
            AtomicU16::from_ptr(p)
        };
        // Release: the entries written above are visible before the tail.
        tail.store(self.tail, Ordering::Release);
        self.published = self.tail;
    }

    /// The `len` bytes the kernel put in buffer `bid`.
    fn get(&self, bid: u16, len: usize) -> &[u8] {
        assert!(bid < BUF_COUNT && len <= BUF_SIZE);
        // SAFETY: bounds checked above; the kernel finished writing this
        // buffer before posting the completion we are handling, and it will
        // not reuse it until we recycle it.
        unsafe { std::slice::from_raw_parts(self.data.ptr.add(usize::from(bid) * BUF_SIZE), len) }
    }
}

/// The msghdr and iovec array of one connection's sendmsg. Boxed and kept
/// per slot, so their addresses stay fixed while the kernel may read them:
/// from the submission until the completion (one send in flight per
/// connection; the slot is not reused before that completion).
struct SendMsg {
    hdr: libc::msghdr,
    iov: Vec<libc::iovec>,
}

impl SendMsg {
    fn new() -> SendMsg {
        SendMsg {
            // SAFETY: msghdr is plain data; all zeroes is a valid empty
            // header (no address, no iovecs, no control data).
            hdr: unsafe { std::mem::zeroed() },
            iov: Vec::new(),
        }
    }

    /// Point the header at `buf`'s content from `from` on (at most
    /// MAX_IOV segments). `buf` must stay unchanged until the completion.
    fn fill(&mut self, buf: &resp::ReplyBuf, from: usize) {
        fill_iovecs(buf, from, &mut self.iov);
        self.hdr.msg_iov = self.iov.as_mut_ptr();
        self.hdr.msg_iovlen = self.iov.len() as _;
    }
}

pub(crate) struct Uring {
    // Field order matters: the ring is dropped (closed) before the
    // buffers it may have referenced.
    ring: IoUring,
    bufs: BufRing,
    /// Per connection slot: the msghdr and iovecs of its sendmsg (made on
    /// the first reply with references, then reused).
    msgs: Vec<Option<Box<SendMsg>>>,
    optimized_setup: bool,
    /// Per listener: its multishot accept is armed.
    accept_armed: Vec<bool>,
    /// CONFIG SET `port` / `bind`: the accepts are being cancelled so that
    /// the listeners can be swapped.
    rebinding: bool,
    /// This loop was started with the listeners: CONFIG SET `port` /
    /// `bind` swaps them here, also once `port 0` left it none.
    holds_listeners: bool,
    /// The multishot polls of the doorbell and the hosted set are armed.
    watch_armed: [bool; 2],
    accept_paused_until: Option<Instant>,
    last_accept_error_log: Option<Instant>,
    /// `max-new-connections-per-cycle`: sockets accepted past it wait here.
    accepts: AcceptBudget,
    /// Connections whose multishot recv ended and must be re-armed.
    rearm: Vec<u32>,
    /// Sends queued since the last wait, by slot and generation: their
    /// bytes left the output meter when queued (`begin_send`).
    issued: Vec<(u32, u32)>,
    cqes: Vec<(u64, i32, u32)>,
    /// `io-uring-batch-wait-us`, 0 when off or the kernel lacks
    /// IORING_FEAT_MIN_TIMEOUT.
    batch_wait_us: u32,
    /// Completions the last wait returned: how many the next one waits for.
    last_cqes: usize,
    /// The loop is letting go of its sockets ([`Uring::detach`]): nothing
    /// new is armed.
    detaching: bool,
    /// Serving from inside a busy script ([`BusyIo`]): completions of the
    /// connections lent to the batch are held.
    lending: bool,
    /// Held completions, handled first after the batch, in order.
    held: Vec<(u64, i32, u32)>,
    /// The doorbell's poll completed while lending (after_wait reads it).
    bell_seen: bool,
}

/// Inline mode while a script is busy (see [`BusyIo`]): one
/// non-waiting round of the loop without the batch.
impl BusyIo for Uring {
    fn poll(&mut self, d: &mut Driver) {
        self.lending = true;
        // A look is a cycle of its own for new connections too.
        self.accepts.refill();
        // Hands the kernel what was queued and runs its deferred work,
        // without waiting (a timeout of zero).
        let r = self
            .wait(Duration::ZERO, 0)
            .and_then(|()| self.take_waiting_accepts(d))
            .and_then(|()| {
                self.collect();
                self.handle(d)
            })
            .and_then(|()| {
                self.bufs.publish();
                let rearm = std::mem::take(&mut self.rearm);
                for slot in rearm {
                    if d.conn(slot).is_some() {
                        self.arm_recv(d, slot)?;
                    } else {
                        self.rearm.push(slot);
                    }
                }
                Ok(())
            });
        if let Err(e) = r {
            log::warning(&format!("io_uring while a script is busy: {e}"));
        }
        self.lending = false;
    }

    fn flush(&mut self, d: &mut Driver, slots: &[u32]) {
        for &slot in slots {
            if let Err(e) = self.send(d, slot) {
                log::warning(&format!("io_uring while a script is busy: {e}"));
            }
        }
        // Out now, not at the next look.
        if let Err(e) = self.ring.submit() {
            log::warning(&format!("io_uring while a script is busy: {e}"));
        }
    }

    fn close(&mut self, d: &mut Driver, slots: &[u32]) {
        for &slot in slots {
            if let Err(e) = self.try_close(d, slot) {
                log::warning(&format!("io_uring while a script is busy: {e}"));
            }
        }
    }
}

fn build_ring() -> Result<(IoUring, bool), String> {
    let optimized = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_submit_all()
        .setup_cqsize(CQ_ENTRIES)
        .build(SQ_ENTRIES);
    match optimized {
        Ok(r) => return Ok((r, true)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
        Err(e) => return Err(probe::explain_setup_error(&e)),
    }
    // Kernels before 6.1 refuse DEFER_TASKRUN: a plain ring works too.
    IoUring::builder()
        .setup_cqsize(CQ_ENTRIES)
        .build(SQ_ENTRIES)
        .map(|r| (r, false))
        .map_err(|e| probe::explain_setup_error(&e))
}

fn explain_enter_error(what: &str, e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EPERM) => {
            format!("{what} refused with EPERM, by a seccomp filter or container policy")
        }
        Some(libc::EACCES) => {
            format!("{what} refused with EACCES, by a seccomp filter or LSM policy")
        }
        Some(libc::ENOSYS) => format!("the kernel lacks {what} (ENOSYS)"),
        Some(libc::EINVAL) => format!("the kernel does not support {what} (EINVAL)"),
        _ => format!("{what}: {e}"),
    }
}

impl Uring {
    /// Set up the ring and everything the loop needs, or say why io_uring
    /// cannot be used here.
    pub(crate) fn new(listeners: &[Listener], batch_wait_us: u32) -> Result<Uring, String> {
        probe::precheck()?;
        let (ring, optimized_setup) = build_ring()?;
        if !ring.params().is_feature_ext_arg() {
            return Err("the kernel lacks IORING_FEAT_EXT_ARG (wait timeouts)".into());
        }
        let mut p = register::Probe::new();
        ring.submitter()
            .register_probe(&mut p)
            .map_err(|e| explain_enter_error("io_uring_register", &e))?;
        for (code, name) in [
            (opcode::AcceptMulti::CODE, "accept"),
            (opcode::RecvMulti::CODE, "recv"),
            (opcode::Send::CODE, "send"),
            (opcode::SendMsg::CODE, "sendmsg"),
            (opcode::AsyncCancel::CODE, "async cancel"),
        ] {
            if !p.is_supported(code) {
                return Err(format!("the kernel's io_uring lacks the {name} opcode"));
            }
        }
        let bufs = BufRing::new().map_err(|e| format!("provided buffers: {e}"))?;
        // SAFETY: the ring memory is a live mapping of BUF_COUNT entries,
        // owned by `bufs`, which outlives the ring (field order, and leaked
        // if an operation could still use it).
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(bufs.ring.ptr as u64, BUF_COUNT, BGID, 0)
        }
        .map_err(|e| explain_enter_error("provided buffer rings", &e))?;
        let batch_wait_us = if ring.params().is_feature_min_timeout() {
            batch_wait_us
        } else {
            0
        };
        let u = Uring {
            ring,
            bufs,
            msgs: Vec::new(),
            optimized_setup,
            accept_armed: vec![false; listeners.len()],
            rebinding: false,
            holds_listeners: false,
            watch_armed: [false; 2],
            accept_paused_until: None,
            last_accept_error_log: None,
            accepts: AcceptBudget::default(),
            rearm: Vec::new(),
            issued: Vec::new(),
            cqes: Vec::new(),
            batch_wait_us,
            last_cqes: 0,
            detaching: false,
            lending: false,
            held: Vec::new(),
            bell_seen: false,
        };
        // One round trip proves io_uring_enter itself is allowed (seccomp
        // can refuse it while allowing setup).
        u.ring
            .submitter()
            .submit_with_args(0, &types::SubmitArgs::new())
            .map_err(|e| explain_enter_error("io_uring_enter", &e))?;
        Ok(u)
    }

    pub(crate) fn describe(&self) -> String {
        let setup = if self.optimized_setup {
            "single issuer, deferred task run"
        } else {
            "plain setup (the kernel refused SINGLE_ISSUER|DEFER_TASKRUN)"
        };
        let batch = if self.batch_wait_us > 0 {
            format!(", batch wait {} us", self.batch_wait_us)
        } else {
            String::new()
        };
        format!(
            "{setup}, multishot accept and recv, {BUF_COUNT} x {} KiB provided buffers{batch}",
            BUF_SIZE / 1024
        )
    }

    /// Queue an SQE, handing the queue to the kernel first if it is full.
    fn push(&mut self, entry: squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: every entry built in this module refers only to fds
            // and to memory that stays valid and unchanged until its
            // completion is reaped: a connection's sending buffer and the
            // values it references (kept while `send_busy`, the connection
            // not released until the send completes), its slot's SendMsg
            // (the same), or the provided-buffer ring (kept for the ring's
            // life).
            if unsafe { self.ring.submission().push(&entry) }.is_ok() {
                return Ok(());
            }
            self.ring.submit()?;
        }
    }

    fn arm_accept(&mut self, i: usize, fd: i32) -> io::Result<()> {
        let e = opcode::AcceptMulti::new(types::Fd(fd))
            .flags(libc::SOCK_CLOEXEC)
            .build()
            .user_data(tag(KIND_ACCEPT, i as u32, 0));
        self.push(e)?;
        self.accept_armed[i] = true;
        Ok(())
    }

    /// Watch the doorbell's eventfd or the hosted set (IO threads): a
    /// multishot poll, so the execution thread's ring, or a hosted
    /// socket's readiness, ends this thread's wait.
    fn arm_watch(&mut self, i: usize, fd: i32) -> io::Result<()> {
        let e = opcode::PollAdd::new(types::Fd(fd), libc::POLLIN as u32)
            .multi(true)
            .build()
            .user_data(tag(KIND_WATCH, i as u32, 0));
        self.push(e)?;
        self.watch_armed[i] = true;
        Ok(())
    }

    fn rearm_watches(&mut self, watched: [Option<RawFd>; 2]) -> io::Result<()> {
        for (i, fd) in watched.into_iter().enumerate() {
            if let Some(fd) = fd
                && !self.watch_armed[i]
            {
                self.arm_watch(i, fd)?;
            }
        }
        Ok(())
    }

    fn arm_recv(&mut self, d: &mut Driver, slot: u32) -> io::Result<()> {
        let Some(c) = d.conn(slot) else { return Ok(()) };
        if c.recv_armed || c.shut || c.peer_eof || c.closing == Closing::Now || self.detaching {
            return Ok(());
        }
        c.recv_armed = true;
        let e = opcode::RecvMulti::new(types::Fd(c.fd), BGID)
            .build()
            .user_data(tag(KIND_RECV, slot, c.generation));
        self.push(e)
    }

    fn send(&mut self, d: &mut Driver, slot: u32) -> io::Result<()> {
        let Some(c) = d.conn(slot) else { return Ok(()) };
        if c.send_busy || c.shut || c.closing == Closing::Now {
            return Ok(());
        }
        let (fd, generation) = (c.fd, c.generation);
        let Some((buf, from)) = c.begin_send() else {
            return Ok(());
        };
        let e = if buf.has_refs() {
            let i = slot as usize;
            if self.msgs.len() <= i {
                self.msgs.resize_with(i + 1, || None);
            }
            let m = self.msgs[i].get_or_insert_with(|| Box::new(SendMsg::new()));
            m.fill(buf, from);
            opcode::SendMsg::new(types::Fd(fd), &m.hdr)
                .flags(libc::MSG_NOSIGNAL as u32)
                .build()
        } else {
            let chunk = &buf.bytes[from..];
            let len = chunk.len().min(u32::MAX as usize) as u32;
            opcode::Send::new(types::Fd(fd), chunk.as_ptr(), len)
                .flags(libc::MSG_NOSIGNAL)
                .build()
        };
        if let Some(c) = d.conn(slot) {
            c.send_busy = true;
        }
        self.issued.push((slot, generation));
        self.push(e.user_data(tag(KIND_SEND, slot, generation)))
    }

    /// After the wait that submitted them: a send still not complete is
    /// waiting for room in the socket, and has sent nothing (no
    /// MSG_WAITALL, so a partial send completes), so its bytes count as
    /// the client's waiting output again. One that went out has been
    /// handled and republished by then ([`Driver::on_sent`]).
    fn recount_stalled_sends(&mut self, d: &mut Driver) {
        for (slot, generation) in self.issued.drain(..) {
            if let Some(c) = d.conn_gen(slot, generation)
                && c.send_busy
            {
                c.publish_output_len();
            }
        }
    }

    /// Serve until shutdown (every connection closed; returns no
    /// listeners) or until the driver hands its sockets over (a retiring
    /// IO thread, or inline mode switching to threaded): then every
    /// operation is cancelled and completed, the connections stay in the
    /// driver, and the listeners are returned, all still open.
    pub(crate) fn run(
        mut self,
        d: &mut Driver,
        mut listeners: Vec<Listener>,
    ) -> io::Result<Vec<Listener>> {
        self.holds_listeners = !listeners.is_empty();
        for (i, l) in listeners.iter().enumerate() {
            self.arm_accept(i, l.fd)?;
        }
        let watched = [d.doorbell_fd(), d.hosted_fd()];
        self.rearm_watches(watched)?;
        let mut list = Vec::new();
        loop {
            let mut timeout = d.before_wait();
            if self.accepts.has_waiting() {
                timeout = Duration::ZERO;
            }
            self.wait(timeout, d.live())?;
            let rung = self.collect();
            d.after_wait(rung);
            self.accepts.refill();
            self.take_waiting_accepts(d)?;
            self.handle(d)?;
            self.recount_stalled_sends(d);
            self.rearm_watches(watched)?;
            self.bufs.publish();
            let rearm = std::mem::take(&mut self.rearm);
            for &slot in &rearm {
                self.arm_recv(d, slot)?;
            }
            self.rearm = rearm;
            self.rearm.clear();

            d.process_with(&mut self);
            d.take_adopted(&mut list);
            for &slot in &list {
                self.arm_recv(d, slot)?;
            }
            let done = d.tick();
            d.take_flush(&mut list);
            for &slot in &list {
                self.send(d, slot)?;
            }
            d.take_closing(&mut list);
            for &slot in &list {
                self.try_close(d, slot)?;
            }
            if done {
                break;
            }
            self.manage_accepts(d, &mut listeners)?;
        }
        if d.handing_over() {
            self.detach(d)?;
            return Ok(listeners);
        }
        self.teardown(d, listeners)?;
        Ok(Vec::new())
    }

    /// Let go of every socket without closing it: cancel the accepts, the
    /// doorbell's poll and every connection's recv and send, and wait for
    /// their last completions, so that once this returns the kernel holds
    /// no buffer of this loop (provided buffers, a connection's sending
    /// buffer, its msghdr). Bytes received meanwhile stay in the
    /// connections; a cancelled send sent nothing (no MSG_WAITALL, so no
    /// partial retry), its output stays queued. Sends queued this iteration
    /// go to the kernel ahead of the cancels, in the same submission.
    fn detach(&mut self, d: &mut Driver) -> io::Result<()> {
        self.detaching = true;
        // Sockets accepted past the budget become connections that move
        // with the others (nothing armed: their next loop arms the recv).
        for fd in self.accepts.drain_all() {
            d.accept(fd);
        }
        for i in 0..self.accept_armed.len() {
            if self.accept_armed[i] {
                self.cancel(tag(KIND_ACCEPT, i as u32, 0))?;
            }
        }
        for i in [BELL, HOSTED] {
            if self.watch_armed[i] {
                self.cancel(tag(KIND_WATCH, i as u32, 0))?;
            }
        }
        // Once: nothing is armed again while detaching, so these (and the
        // cancels a closing connection already has) are all there will be.
        for slot in d.slots() {
            let Some(c) = d.conn(slot) else { continue };
            // A cancelled recv then ends as no EOF, and is not re-armed.
            c.moving = true;
            if !c.shut {
                let ops = (c.generation, c.recv_armed, c.send_busy);
                self.cancel_ops(slot, ops)?;
            }
        }
        let deadline = Instant::now() + DETACH_LIMIT;
        loop {
            let busy = self.accept_armed.iter().any(|&a| a)
                || self.watch_armed.iter().any(|&a| a)
                || d.slots()
                    .into_iter()
                    .any(|s| d.conn(s).is_some_and(|c| c.recv_armed || c.send_busy));
            if !busy {
                break;
            }
            if Instant::now() >= deadline {
                // Never seen: cancels complete at once. Whatever the kernel
                // may still touch is leaked, and those clients closed.
                log::warning("io_uring: operations not cancelled in time; closing their clients");
                self.leak_in_flight(d);
                break;
            }
            self.wait(Duration::from_millis(10), 0)?;
            self.reap(d)?;
            self.bufs.publish();
        }
        self.rearm.clear();
        if !self.bufs.ring.leak {
            // Nothing can draw from it any more.
            let _ = self.ring.submitter().unregister_buf_ring(BGID);
        }
        Ok(())
    }

    /// Close the connections with an operation still in the kernel, leaking
    /// the memory it may use (see [`Uring::teardown`]).
    fn leak_in_flight(&mut self, d: &mut Driver) {
        for slot in d.slots() {
            let Some(c) = d.conn(slot) else { continue };
            if !(c.recv_armed || c.send_busy) {
                continue;
            }
            if c.send_busy {
                c.leak_sending();
            }
            listener::close_fd(c.fd);
            d.release(slot);
        }
        self.bufs.ring.leak = true;
        self.bufs.data.leak = true;
        std::mem::forget(std::mem::take(&mut self.msgs));
    }

    /// Submit everything queued and wait for completions or the timeout,
    /// in one `io_uring_enter`.
    ///
    /// Under load, waiting for the first completion wakes the loop for
    /// every request: at `-P 1` with many clients each iteration then
    /// serves one or two connections, and the per-iteration costs (one
    /// `io_uring_enter`, a clock read, the batch set-up) are paid per
    /// request. With `io-uring-batch-wait-us` set, the loop asks for as
    /// many completions as the last iteration got (clamped to the open
    /// connections), but returns once that much time has passed with at
    /// least one (the kernel's min-wait). When load is light the last
    /// iteration had one or two completions, so nothing waits; under load
    /// a request waits at most the knob's value, while the loop serves
    /// more connections per wake-up.
    fn wait(&mut self, timeout: Duration, live: usize) -> io::Result<()> {
        if timeout.is_zero() {
            return self.poll_completions();
        }
        let ts = types::Timespec::new()
            .sec(timeout.as_secs())
            .nsec(timeout.subsec_nanos());
        let mut args = types::SubmitArgs::new().timespec(&ts);
        let mut want = 1;
        if self.batch_wait_us > 0 && !timeout.is_zero() && self.last_cqes > 2 {
            // Each served connection brings a recv and a send completion.
            want = self.last_cqes.min(2 * live + 2);
            args = args.min_wait_usec(self.batch_wait_us);
        }
        match self.ring.submitter().submit_with_args(want, &args) {
            Ok(_) => Ok(()),
            Err(e) => match e.raw_os_error() {
                // Timed out, interrupted by a signal, or the completion
                // queue must be drained first.
                Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY) | Some(libc::EAGAIN) => {
                    Ok(())
                }
                _ => Err(e),
            },
        }
    }

    /// Submit what is queued and run the kernel's deferred work without
    /// waiting: an enter that asks for no completion returns as soon as the
    /// new ones are posted. (A zero timeout with one completion wanted would
    /// arm a timer and may sleep on it, which a busy poll must not.)
    fn poll_completions(&mut self) -> io::Result<()> {
        let pending = self.ring.submission().len() as u32;
        // SAFETY: no argument is passed; the SQEs being submitted point at
        // memory this loop keeps alive until their completions (as for
        // every submission here).
        let r = unsafe {
            self.ring
                .submitter()
                .enter::<libc::sigset_t>(pending, 0, IORING_ENTER_GETEVENTS, None)
        };
        match r {
            Ok(_) => Ok(()),
            Err(e) => match e.raw_os_error() {
                Some(libc::EINTR) | Some(libc::EBUSY) | Some(libc::EAGAIN) => Ok(()),
                _ => Err(e),
            },
        }
    }

    /// Take the completions off the ring (for [`Uring::handle`]); whether
    /// the doorbell's poll is among them.
    fn collect(&mut self) -> bool {
        self.cqes.clear();
        if !self.lending {
            // Held while a batch had their connections: before anything newer.
            self.cqes.append(&mut self.held);
        }
        self.cqes.extend(
            self.ring
                .completion()
                .map(|c| (c.user_data(), c.result(), c.flags())),
        );
        let bell = self
            .cqes
            .iter()
            .any(|&(data, _, _)| untag(data) == (KIND_WATCH, BELL as u32, 0));
        if self.lending {
            self.bell_seen |= bell;
            return false;
        }
        bell || std::mem::take(&mut self.bell_seen)
    }

    /// Take the completions off the ring and handle them.
    fn reap(&mut self, d: &mut Driver) -> io::Result<()> {
        self.collect();
        self.handle(d)
    }

    /// Handle the completions [`Uring::collect`] took.
    fn handle(&mut self, d: &mut Driver) -> io::Result<()> {
        let cqes = std::mem::take(&mut self.cqes);
        for &(data, res, flags) in &cqes {
            let (kind, slot, generation) = untag(data);
            if self.lending && matches!(kind, KIND_RECV | KIND_SEND) && d.conn(slot).is_none() {
                // Its connection is lent to the running batch (or gone:
                // then it is ignored after the batch as it would be now).
                self.held.push((data, res, flags));
                continue;
            }
            match kind {
                KIND_ACCEPT => self.on_accept(d, slot as usize, res, flags)?,
                KIND_RECV => self.on_recv(d, slot, generation, res, flags),
                KIND_SEND => self.on_send(d, slot, generation, res),
                // Drained by the driver's after_wait; only re-armed.
                KIND_WATCH => {
                    if slot as usize == HOSTED {
                        d.hosted_woke();
                    }
                    // The bell is drained by the driver's after_wait.
                    if !cqueue::more(flags) {
                        self.watch_armed[slot as usize] = false;
                    }
                }
                _ => {}
            }
        }
        self.last_cqes = cqes.len();
        self.cqes = cqes;
        Ok(())
    }

    fn on_accept(&mut self, d: &mut Driver, i: usize, res: i32, flags: u32) -> io::Result<()> {
        if !cqueue::more(flags) {
            self.accept_armed[i] = false;
        }
        if res >= 0 {
            if let Some(fd) = self.accepts.admit(res) {
                self.register(d, fd)?;
            }
            return Ok(());
        }
        let e = -res;
        if matches!(e, libc::ECONNABORTED | libc::EINTR | libc::ECANCELED) {
            return Ok(());
        }
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
        // Out of descriptors: retry a little later rather than spin.
        self.accept_paused_until = Some(now + Duration::from_millis(100));
        Ok(())
    }

    /// A new connection's socket: registered with the driver, its recv
    /// armed.
    fn register(&mut self, d: &mut Driver, fd: RawFd) -> io::Result<()> {
        if let Some(slot) = d.accept(fd) {
            self.arm_recv(d, slot)?;
        }
        Ok(())
    }

    /// Register the sockets accepted past an earlier iteration's budget,
    /// as many as this one's allows.
    fn take_waiting_accepts(&mut self, d: &mut Driver) -> io::Result<()> {
        while let Some(fd) = self.accepts.next_waiting() {
            self.register(d, fd)?;
        }
        Ok(())
    }

    fn manage_accepts(&mut self, d: &Driver, listeners: &mut Vec<Listener>) -> io::Result<()> {
        if d.shutting_down() {
            return Ok(());
        }
        if self.holds_listeners && crate::rebind::pending() {
            // CONFIG SET `port` / `bind`: the old listeners are let go only
            // once no accept holds them (their last completions, a
            // connection among them maybe, are handled as usual).
            if !self.rebinding {
                self.rebinding = true;
                for i in 0..self.accept_armed.len() {
                    if self.accept_armed[i] {
                        self.cancel(tag(KIND_ACCEPT, i as u32, 0))?;
                    }
                }
            }
            if self.accept_armed.iter().any(|&a| a) {
                return Ok(());
            }
            crate::rebind::swap(listeners);
            self.accept_armed = vec![false; listeners.len()];
            self.rebinding = false;
        }
        if let Some(t) = self.accept_paused_until {
            if Instant::now() < t {
                return Ok(());
            }
            self.accept_paused_until = None;
        }
        for (i, l) in listeners.iter().enumerate() {
            if !self.accept_armed[i] {
                self.arm_accept(i, l.fd)?;
            }
        }
        Ok(())
    }

    fn on_recv(&mut self, d: &mut Driver, slot: u32, generation: u32, res: i32, flags: u32) {
        let bid = cqueue::buffer_select(flags);
        if bid.is_some() {
            self.bufs.took();
        }
        let Some(c) = d.conn_gen(slot, generation) else {
            if let Some(bid) = bid {
                self.bufs.recycle(bid);
            }
            return;
        };
        let more = cqueue::more(flags);
        if !more {
            c.recv_armed = false;
        }
        // A moving connection is torn out of this loop much as a closing
        // one is (its recv ends with ECANCELED, which is no EOF).
        let closing = c.closing != Closing::Open || c.moving;
        if res > 0 {
            if let Some(bid) = bid {
                d.on_input(slot, self.bufs.get(bid, res as usize));
                self.bufs.recycle(bid);
            }
            if !more && !closing {
                self.rearm.push(slot);
            }
        } else if res == 0 {
            d.on_eof(slot);
        } else if -res == libc::ENOBUFS {
            // The ring ran dry; the data waits in the socket.
            self.bufs.ran_dry();
            if !closing {
                self.rearm.push(slot);
            }
        } else if !closing {
            // ECONNRESET and the like: the read side is gone.
            d.on_eof(slot);
        }
        if closing && !more {
            d.retry_close(slot);
        }
    }

    fn on_send(&mut self, d: &mut Driver, slot: u32, generation: u32, res: i32) {
        let Some(c) = d.conn_gen(slot, generation) else {
            return;
        };
        c.send_busy = false;
        let moving = c.moving;
        let closing = c.closing != Closing::Open || moving;
        if res >= 0 {
            if d.on_sent(slot, res as usize) {
                d.queue_flush(slot);
            }
        } else if res == -libc::ECANCELED && moving {
            // Cancelled to let go of the socket: nothing went out (see
            // `detach`), the output travels with the connection.
            c.publish_output_len();
        } else {
            d.on_send_error(slot);
        }
        if closing {
            d.retry_close(slot);
        }
    }

    fn try_close(&mut self, d: &mut Driver, slot: u32) -> io::Result<()> {
        let Some(c) = d.conn(slot) else { return Ok(()) };
        match c.closing {
            Closing::Open if c.moving => return self.try_hand_over(d, slot),
            Closing::Open => return Ok(()),
            Closing::AfterFlush if c.must_wait() => {
                // The send completion (or the replies' arrival) re-queues
                // the close.
                return self.send(d, slot);
            }
            _ => {}
        }
        if c.recv_armed || c.send_busy {
            if !c.shut {
                c.shut = true;
                // Ends both directions: a pending recv completes with 0, a
                // send waiting for buffer space with EPIPE. The cancels cover
                // a kernel that would not wake them.
                listener::shutdown_fd(c.fd);
                let ops = (c.generation, c.recv_armed, c.send_busy);
                self.cancel_ops(slot, ops)?;
            }
            // The last completion calls retry_close.
            return Ok(());
        }
        listener::close_fd(c.fd);
        d.release(slot);
        Ok(())
    }

    /// Let go of a moving connection once the kernel holds nothing of it:
    /// wait for its request to come back, then cancel its recv and its send
    /// (bytes already received stay in the connection and travel with it,
    /// later ones wait in the socket for the new owner; a cancelled send
    /// sent nothing, its output travels too, so a client that does not read
    /// cannot hold the move up).
    fn try_hand_over(&mut self, d: &mut Driver, slot: u32) -> io::Result<()> {
        let Some(c) = d.conn(slot) else { return Ok(()) };
        if c.in_flight() {
            // The replies' arrival re-queues this.
            return Ok(());
        }
        if c.recv_armed || c.send_busy {
            if !c.shut {
                // `shut` also keeps sends and re-arms off from now on.
                c.shut = true;
                let ops = (c.generation, c.recv_armed, c.send_busy);
                self.cancel_ops(slot, ops)?;
            }
            // The last completion re-queues this.
            return Ok(());
        }
        d.hand_over(slot);
        Ok(())
    }

    /// Cancel a connection's recv and/or send: `(generation, recv, send)`.
    fn cancel_ops(&mut self, slot: u32, (g, recv, send): (u32, bool, bool)) -> io::Result<()> {
        if recv {
            self.cancel(tag(KIND_RECV, slot, g))?;
        }
        if send {
            self.cancel(tag(KIND_SEND, slot, g))?;
        }
        Ok(())
    }

    fn cancel(&mut self, target: u64) -> io::Result<()> {
        let e = opcode::AsyncCancel::new(target)
            .build()
            .user_data(tag(KIND_CANCEL, 0, 0));
        self.push(e)
    }

    /// Close whatever is left. Connections whose operations were answered
    /// are freed normally; if any was not, the memory it may still touch is
    /// leaked rather than freed (the process is about to exit anyway).
    fn teardown(mut self, d: &mut Driver, listeners: Vec<Listener>) -> io::Result<()> {
        for fd in self.accepts.drain_all() {
            listener::close_fd(fd);
        }
        let slots = d.slots();
        for &slot in &slots {
            if let Some(c) = d.conn(slot)
                && !c.shut
            {
                c.shut = true;
                listener::shutdown_fd(c.fd);
            }
        }
        // Give the kernel a moment to answer the pending operations.
        let deadline = Instant::now() + Duration::from_millis(200);
        while Instant::now() < deadline
            && d.slots()
                .iter()
                .any(|&s| d.conn(s).is_some_and(|c| c.recv_armed || c.send_busy))
        {
            self.wait(Duration::from_millis(20), 0)?;
            self.reap(d)?;
            self.bufs.publish();
        }
        let mut leaked = false;
        for slot in d.slots() {
            if let Some(c) = d.conn(slot) {
                if c.send_busy {
                    c.leak_sending();
                    leaked = true;
                }
                leaked |= c.recv_armed;
                listener::close_fd(c.fd);
            }
            d.release(slot);
        }
        if leaked {
            self.bufs.ring.leak = true;
            self.bufs.data.leak = true;
            // A sendmsg the kernel never answered may still read these.
            std::mem::forget(std::mem::take(&mut self.msgs));
        }
        drop(self);
        drop(listeners);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip() {
        for (k, s, g) in [
            (KIND_RECV, 0, 0),
            (KIND_SEND, u32::MAX, GEN_MASK),
            (KIND_ACCEPT, 7, 12345),
        ] {
            assert_eq!(untag(tag(k, s, g)), (k, s, g));
        }
    }

    /// The bids the kernel would take next, in order.
    fn ring_bids(br: &BufRing) -> Vec<u16> {
        let entry = br.ring.ptr.cast::<RawBuf>();
        (0..br.tail.wrapping_sub(br.taken))
            .map(|k| br.taken.wrapping_add(k))
            .map(|i| {
                // SAFETY: the index is masked into the mapping; no kernel is
                // attached to this ring.
                unsafe { (*entry.add(usize::from(i & (BUF_COUNT - 1)))).bid }
            })
            .collect()
    }

    /// The kernel fills the buffer at the ring's head, which comes back.
    fn fill_and_return(br: &mut BufRing) {
        let entry = br.ring.ptr.cast::<RawBuf>();
        // SAFETY: as in `ring_bids`.
        let bid = unsafe { (*entry.add(usize::from(br.taken & (BUF_COUNT - 1)))).bid };
        br.took();
        br.recycle(bid);
        br.publish();
    }

    #[test]
    fn the_ring_holds_a_window_refilled_with_the_buffers_used_last() {
        let mut br = BufRing::new().unwrap();
        assert_eq!(ring_bids(&br), (0..MIN_WINDOW).collect::<Vec<_>>());
        // The kernel fills buffers 0 and 1; they come back in that order
        // and are the next ones put in, behind the rest of the window.
        for bid in [0, 1] {
            br.took();
            br.recycle(bid);
        }
        br.publish();
        let bids = ring_bids(&br);
        assert_eq!(bids.len(), usize::from(MIN_WINDOW));
        assert_eq!(&bids[bids.len() - 2..], &[1, 0]);
        // Running dry doubles the window with buffers never used before.
        br.ran_dry();
        br.publish();
        assert_eq!(ring_bids(&br).len(), usize::from(MIN_WINDOW) * 2);
        assert!(ring_bids(&br).contains(&(MIN_WINDOW * 2 - 1)));
    }

    #[test]
    fn the_window_grows_to_every_buffer_and_shrinks_after_a_long_quiet_run() {
        let mut br = BufRing::new().unwrap();
        for _ in 0..10 {
            br.ran_dry();
        }
        br.publish();
        assert_eq!(ring_bids(&br).len(), usize::from(BUF_COUNT));
        // Every buffer is in the ring: none is left to add.
        assert!(br.free.is_empty());
        // Taking and returning buffers without running dry halves the
        // window after SHRINK_AFTER per buffer of it; the ring then drains
        // to the smaller window before it is refilled.
        for _ in 0..SHRINK_AFTER * u32::from(BUF_COUNT) {
            fill_and_return(&mut br);
        }
        assert_eq!(br.window, BUF_COUNT / 2);
        assert!(ring_bids(&br).len() <= usize::from(BUF_COUNT));
        for _ in 0..BUF_COUNT {
            fill_and_return(&mut br);
        }
        assert_eq!(ring_bids(&br).len(), usize::from(BUF_COUNT / 2));
    }
}
