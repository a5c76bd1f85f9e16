//! An IO thread's end of the hand-off (threaded mode): the rings to and
//! from the execution thread, the doorbells, buffer pools, and the driver
//! steps that replace inline execution — ship parsed commands out, take
//! replies and engine events in.
//!
//! An IO thread runs the same backend loop (io_uring or epoll) and the
//! same [`Driver`] as inline mode; only where the inline driver calls the
//! engine does this module send a message instead.

use crate::busy_poll::Poll;
use crate::connection::{Connection, READ_CHUNK};
use crate::driver::Driver;
use crate::exec_thread::{SharedExec, try_step};
use crate::handoff::{Adoption, Arrival, Exchange, Outlet, ToExec, ToIo};
use crate::hosted::HostedSet;
use crate::listener;
use engine::{ClientId, IoThreadStats};
use resp::{Limits, SharedBytes};
use ringkv_rings::doorbell::Doorbell;
use ringkv_rings::spsc::Consumer;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// Buffers bigger than this are freed on return rather than pooled.
const POOL_MAX_CAPACITY: usize = 256 * 1024;
/// Exchanges kept for reuse.
const POOL_MAX_LEN: usize = 1024;

pub(crate) struct IoLink {
    tx: Outlet<ToExec>,
    rx: Consumer<ToIo>,
    /// Rung after publishing to the execution thread.
    exec_bell: Arc<Doorbell>,
    /// This thread's: the execution thread rings it.
    pub(crate) bell: Arc<Doorbell>,
    stats: Arc<IoThreadStats>,
    /// Limits for a client the execution thread has not described yet.
    pub(crate) default_limits: (Limits, usize),
    /// `client-output-buffer-limit` in force (the engine updates it).
    pub(crate) out_limits: Arc<engine::OutputLimits>,
    /// The engine's busy state: while a script is busy, this thread
    /// answers its clients from it.
    pub(crate) busy: Arc<engine::busy::BusyState>,
    /// The engine's client ids (see `Driver::accept_guest`).
    pub(crate) ids: Arc<std::sync::atomic::AtomicU64>,
    /// Exchanges back from the execution thread, buffers kept, for reuse.
    exchanges: Vec<Box<Exchange>>,
    sleeping: bool,
    /// Published since the execution thread's doorbell was last rung.
    unrung: bool,
    /// The execution step, to run here when the execution thread sleeps
    /// (`io-threads-idle-exec yes`).
    exec: Option<SharedExec>,
    /// When the last wait returned, and the work time counted since
    /// (published to `stats.busy_ns`, which the execution thread reads to
    /// decide how many IO threads take connections).
    woke: Instant,
    busy_ns: u64,
    /// A wait that is counted as idle time is under way.
    waiting: bool,
    /// Zero-timeout polls so far (the clock is read every
    /// `BUSY_POLLS_PER_CLOCK`-th).
    busy_polls: u64,
    /// Sockets this thread serves for other subsystems (a replica's
    /// stream); `None` if its epoll set could not be made.
    hosted: Option<HostedSet>,
}

/// Adds to a counter of this thread's stats. Other threads only read
/// them, so a plain load and store does, without a locked add each loop
/// iteration.
fn add(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Relaxed) + n, Relaxed);
}

/// While an IO thread stays busy, its busy time is published every this
/// many loop iterations (an iteration is 1–100 µs of work).
const BUSY_POLLS_PER_CLOCK: u64 = 64;

/// What an IO thread takes from the engine when it starts: limits for
/// clients not described yet, and handles the engine keeps current.
pub(crate) struct FromEngine {
    pub(crate) default_limits: (Limits, usize),
    pub(crate) out_limits: Arc<engine::OutputLimits>,
    pub(crate) busy: Arc<engine::busy::BusyState>,
    pub(crate) ids: Arc<std::sync::atomic::AtomicU64>,
}

impl FromEngine {
    pub(crate) fn of(engine: &engine::Engine) -> FromEngine {
        FromEngine {
            default_limits: (engine.parser_limits(), engine.query_buffer_limit()),
            out_limits: engine.output_limits().clone(),
            busy: engine.busy_state(),
            ids: engine.client_ids(),
        }
    }
}

impl IoLink {
    pub(crate) fn new(
        tx: Outlet<ToExec>,
        rx: Consumer<ToIo>,
        exec_bell: Arc<Doorbell>,
        bell: Arc<Doorbell>,
        stats: Arc<IoThreadStats>,
        from_engine: FromEngine,
    ) -> IoLink {
        let FromEngine {
            default_limits,
            out_limits,
            busy,
            ids,
        } = from_engine;
        let hosted = match HostedSet::open(&crate::hosted::HOSTS, bell.clone()) {
            Ok(set) => Some(set),
            Err(e) => {
                engine::log::warning(&format!(
                    "IO thread: no epoll set for hosted sockets ({e}): replicas keep feed threads"
                ));
                None
            }
        };
        IoLink {
            tx,
            rx,
            exec_bell,
            bell,
            stats,
            default_limits,
            out_limits,
            busy,
            ids,
            exchanges: Vec::new(),
            sleeping: false,
            unrung: false,
            exec: None,
            woke: Instant::now(),
            busy_ns: 0,
            waiting: false,
            busy_polls: 0,
            hosted,
        }
    }

    pub(crate) fn set_exec(&mut self, exec: SharedExec) {
        self.exec = Some(exec);
    }

    /// Run the execution step on this thread if the execution thread is
    /// asleep (nobody holds the step's lock). Everything published so far,
    /// from every IO thread, is then taken in and answered.
    pub(crate) fn try_execute(&mut self) -> bool {
        let ran = self.exec.as_deref().is_some_and(try_step);
        if ran && !self.tx.held_back() {
            self.unrung = false;
        }
        ran
    }

    /// A connection accepted (and installed here) while a script is busy:
    /// the execution thread registers it after the script.
    pub(crate) fn guest_connected(&mut self, accepted: crate::handoff::Accepted) {
        self.send(ToExec::Connect(Box::new(accepted)));
        self.stats.clients.fetch_add(1, Relaxed);
    }

    /// Queue a message for the execution thread (sent by [`IoLink::flush`]).
    pub(crate) fn send(&mut self, msg: ToExec) {
        self.tx.send(msg);
    }

    /// Publish queued messages. The execution thread's doorbell is rung
    /// later, in [`IoLink::before_wait`]: ringing wakes it, and on a shared
    /// core the scheduler may switch to it at once, before this thread has
    /// handed its sends to the kernel and taken in the rest of its
    /// completions.
    pub(crate) fn flush(&mut self) {
        if self.tx.flush() > 0 {
            self.unrung = true;
        }
    }

    fn ring_exec(&mut self) {
        if self.unrung && !self.try_execute() {
            self.unrung = false;
            self.exec_bell.ring();
        }
    }

    /// The ring to the execution thread is full.
    pub(crate) fn backpressured(&self) -> bool {
        self.tx.held_back()
    }

    /// A connection this thread owned is gone.
    pub(crate) fn disconnect(&mut self, client: ClientId) {
        self.send(ToExec::Disconnect { client });
        self.stats.clients.fetch_sub(1, Relaxed);
    }

    /// A connection this thread let go of, on its way to another IO thread.
    pub(crate) fn hand_over(&mut self, conn: Box<Connection>) {
        self.send(ToExec::Released { conn });
        self.stats.clients.fetch_sub(1, Relaxed);
    }

    pub(crate) fn count_io(&mut self, reads: u64, writes: u64, bytes_in: u64, bytes_out: u64) {
        let s = &self.stats;
        add(&s.reads, reads);
        add(&s.writes, writes);
        add(&s.bytes_in, bytes_in);
        add(&s.bytes_out, bytes_out);
    }

    pub(crate) fn count_accept(&self) {
        add(&self.stats.accepts, 1);
    }

    /// How long to wait: zero if there is work, else announce the sleep
    /// (then anything the execution thread publishes rings the doorbell,
    /// whose fd the backend waits on).
    /// `poll`: `io-busy-poll-us` keeps the loop from sleeping just after
    /// input. Time spent polling is idle, not busy, for the pool's measure
    /// of load (`io-threads-adaptive`), as a sleep would be.
    pub(crate) fn before_wait(&mut self, busy: bool, poll: Poll, max: Duration) -> Duration {
        self.ring_exec();
        if !busy && poll != Poll::Sleep && !self.backpressured() {
            let now = Instant::now();
            if poll == Poll::AfterInput {
                self.count_busy(now);
            }
            self.woke = now;
            return Duration::ZERO;
        }
        if busy && !self.backpressured() {
            // Busy time runs on through a zero-timeout poll: the clock is
            // read when the thread may really wait, and now and then
            // while it never does (the pool needs `busy_ns` to grow).
            self.busy_polls += 1;
            if self.busy_polls.is_multiple_of(BUSY_POLLS_PER_CLOCK) {
                let now = Instant::now();
                self.count_busy(now);
                self.woke = now;
            }
            return Duration::ZERO;
        }
        self.count_busy(Instant::now());
        self.waiting = true;
        if self.backpressured() {
            // Nothing more is parsed until the ring has room (even with
            // dirty connections): retry soon, the execution thread is
            // draining it.
            return Duration::from_micros(200);
        }
        self.bell.prepare_sleep();
        self.sleeping = true;
        if !self.rx.is_empty() || self.hosted.as_ref().is_some_and(HostedSet::ready) {
            self.after_wait(false);
            return Duration::ZERO;
        }
        max
    }

    fn count_busy(&mut self, now: Instant) {
        self.busy_ns += now.saturating_duration_since(self.woke).as_nanos() as u64;
        self.stats.busy_ns.store(self.busy_ns, Relaxed);
    }

    /// The wait is over; `rung`: it reported the doorbell's fd readable.
    pub(crate) fn after_wait(&mut self, rung: bool) {
        add(&self.stats.polls, 1);
        if self.waiting {
            self.waiting = false;
            self.woke = Instant::now();
        }
        // Rung while not announced asleep: a count left behind, read too.
        if self.sleeping || rung {
            self.sleeping = false;
            self.bell.awake_after(rung);
        }
    }

    fn spare_exchange(&mut self) -> Box<Exchange> {
        self.exchanges.pop().unwrap_or_else(|| {
            let mut ex = Box::<Exchange>::default();
            ex.req.data.reserve(READ_CHUNK);
            ex
        })
    }

    /// Hand references whose sends are done back to the execution thread
    /// (one message per loop iteration, only when there are any).
    pub(crate) fn give_back(&mut self, spent: &mut Vec<SharedBytes>) {
        if !spent.is_empty() {
            self.send(ToExec::Spent {
                refs: std::mem::take(spent),
            });
        }
    }

    /// `ex.out` must hold no references any more (see
    /// [`resp::ReplyBuf::take_refs`]). A reply buffer grown past
    /// `POOL_MAX_CAPACITY` is freed rather than kept, and so are the
    /// request's grown buffers ([`crate::handoff::Request::clear`]).
    fn recycle(&mut self, mut ex: Box<Exchange>) {
        debug_assert!(!ex.out.has_refs());
        if self.exchanges.len() >= POOL_MAX_LEN {
            return;
        }
        ex.req.clear();
        if ex.out.capacity() > POOL_MAX_CAPACITY {
            ex.out = Default::default();
        } else {
            ex.out.clear();
        }
        self.exchanges.push(ex);
    }
}

impl Driver {
    fn link(&mut self) -> &mut IoLink {
        match &mut self.side {
            crate::driver::Side::Io(link) => link,
            crate::driver::Side::Inline(_) | crate::driver::Side::Lent => {
                unreachable!("an IO thread's driver")
            }
        }
    }

    /// An IO thread's hosted set, to wait on besides the sockets.
    pub(crate) fn hosted_fd(&self) -> Option<std::os::fd::RawFd> {
        match &self.side {
            crate::driver::Side::Io(link) => link.hosted.as_ref().map(HostedSet::fd),
            crate::driver::Side::Inline(_) | crate::driver::Side::Lent => None,
        }
    }

    /// The loop found the hosted set's descriptor ready.
    pub(crate) fn hosted_woke(&mut self) {
        if let crate::driver::Side::Io(link) = &mut self.side
            && let Some(h) = link.hosted.as_mut()
        {
            h.mark_woke();
        }
    }

    /// Step what this IO thread hosts.
    pub(crate) fn step_hosted(&mut self, now: Instant) {
        if let crate::driver::Side::Io(link) = &mut self.side
            && let Some(h) = link.hosted.as_mut()
        {
            h.step(now);
        }
    }

    /// The doorbell to wait on besides the sockets: an IO thread's, or
    /// the inline loop's wake-up for the engine.
    pub(crate) fn doorbell_fd(&self) -> Option<std::os::fd::RawFd> {
        match &self.side {
            crate::driver::Side::Io(link) => Some(link.bell.fd()),
            crate::driver::Side::Inline(_) | crate::driver::Side::Lent => {
                self.wake_bell.as_ref().map(|b| b.fd())
            }
        }
    }

    pub(crate) fn backpressured(&mut self) -> bool {
        self.link().backpressured()
    }

    /// Send every batched connection's parsed commands to the execution
    /// thread; settle the ones that only had an error or an EOF.
    pub(crate) fn ship_batch(&mut self) {
        let mut batch = self.take_batch();
        let mut shipped = 0;
        for (slot, mut c, more) in batch.drain(..) {
            if !c.has_commands() {
                let err = c.after_batch(false, None);
                self.settle(slot, c, more, err);
                continue;
            }
            let link = self.link();
            let mut ex = link.spare_exchange();
            c.detach(&mut ex.req);
            shipped += ex.req.argc.len();
            ex.slot = slot;
            ex.generation = c.generation;
            ex.client = c.client;
            ex.bytes_in = std::mem::take(&mut c.unreported_in);
            link.send(ToExec::Commands(ex));
            self.put_back(slot, c);
        }
        self.return_batch(batch);
        let link = self.link();
        add(&link.stats.commands, shipped as u64);
        link.flush();
        if link.try_execute() {
            // Executed here: the replies are already in our ring.
            self.receive();
        }
    }

    /// Take in everything the execution thread has published.
    pub(crate) fn receive(&mut self) {
        while let Some(msg) = self.link().rx.pop() {
            match msg {
                ToIo::Replies(mut ex) => {
                    let slot = ex.slot;
                    let Some(mut c) = self.take_conn(slot, ex.generation) else {
                        ex.out.take_refs(&mut self.spent);
                        self.link().recycle(ex);
                        continue;
                    };
                    c.limits = Some((ex.limits, ex.qbuf_limit));
                    c.out_class = ex.out_class;
                    c.resp3 = ex.resp3;
                    c.in_multi = ex.in_multi;
                    let err =
                        c.reattach(&ex.req, &mut ex.out, ex.close_after_reply, ex.blocked_after);
                    // Left over when the connection is closing now.
                    ex.out.take_refs(&mut self.spent);
                    self.link().recycle(ex);
                    // Parse what arrived meanwhile (or settle an EOF).
                    self.settle(slot, c, true, err);
                }
                ToIo::Unrun(mut ex) => {
                    let slot = ex.slot;
                    if let Some(mut c) = self.take_conn(slot, ex.generation) {
                        c.unrun(&ex.req, ex.bytes_in);
                        self.put_back(slot, c);
                        self.mark_dirty(slot);
                    }
                    ex.out.take_refs(&mut self.spent);
                    self.link().recycle(ex);
                }
                ToIo::Adopt(adoption) => {
                    let Adoption {
                        client,
                        limits,
                        qbuf_limit,
                        socket,
                    } = *adoption;
                    if self.shutting_down() {
                        // Never installed here, so not counted either.
                        listener::close_fd(socket.fd());
                        self.link().send(ToExec::Disconnect { client });
                        continue;
                    }
                    let slot = match socket {
                        Arrival::New {
                            fd,
                            keepalive_s,
                            meter,
                        } => self.install(fd, client, keepalive_s, meter),
                        Arrival::Moved(c) => self.install_moved(c),
                    };
                    if let Some(c) = self.conn(slot) {
                        c.limits = Some((limits, qbuf_limit));
                    }
                    self.link().stats.clients.fetch_add(1, Relaxed);
                    self.note_adopted(slot);
                }
                ToIo::Registered(r) => {
                    if let Some(&slot) = self.by_client_slot(r.client)
                        && let Some(c) = self.conn(slot)
                    {
                        c.limits = Some((r.limits, r.qbuf_limit));
                        c.meter = r.meter;
                    }
                }
                ToIo::Refuse { fd, reply } => {
                    listener::send_best_effort(fd, &reply);
                    listener::close_fd(fd);
                }
                ToIo::Output { client, mut bytes } => self.append_output(client, &mut bytes),
                ToIo::Close { client, flush } => self.close_client(client, flush),
                ToIo::Unblocked { client } => self.unblock(client),
                ToIo::Release { client } => self.begin_move(client),
                ToIo::Detach { client } => self.begin_detach(client),
                ToIo::Retire => self.begin_retire(),
                ToIo::Shutdown => self.begin_shutdown(),
            }
        }
    }

    /// The thread is done: tell the execution thread, waiting for room in
    /// the ring if need be (it keeps draining until every thread is out).
    pub(crate) fn finish_io(&mut self) {
        let mut spent = std::mem::take(&mut self.spent);
        let link = self.link();
        link.give_back(&mut spent);
        link.send(ToExec::Exited);
        for _ in 0..100_000 {
            link.flush();
            link.ring_exec();
            if !link.tx.held_back() || link.tx.is_abandoned() {
                return;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}
