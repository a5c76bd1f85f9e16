//! The inline driver: everything an event loop does that is not a syscall.
//! Both backends feed it completions (accepted fd, bytes received, bytes
//! sent, EOF) and then call [`Driver::process`] and [`Driver::tick`] once
//! per iteration; it answers with three lists of connection slots: parsed
//! input to look at again, output to send, connections to tear down.
//!
//! One iteration, as seen from here:
//!
//! ```text
//!  on_input/on_eof ──► dirty ──► parse ──► one execute_batch for all ──► flush list
//!                                  │                                    close list
//!                                  └─ protocol error / query limit ───►
//!  drain_events (Close, Shutdown) ──► close list     tick: stop flag, cron, stats
//! ```

use crate::connection::{Closing, Connection};
use crate::handoff::{Accepted, ToExec};
use crate::io_thread::IoLink;
use crate::listener;
use engine::log;
use engine::{ClientId, ClientInfo, Engine, Event, Job, OutputLimits};
use ringkv_rings::doorbell::Doorbell;
use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Generations are kept to 24 bits so they fit the backends' completion
/// tags next to the slot number.
pub(crate) const GEN_MASK: u32 = 0xFF_FFFF;

/// The longest the loop sleeps: `stop` is checked at least this often.
const MAX_WAIT: Duration = Duration::from_millis(100);
/// How often idle connections are made to give back their emptied
/// buffers ([`Connection::release_if_idle`]): one idle this long or up to
/// twice as long holds none.
const BUFFER_SWEEP: Duration = Duration::from_secs(1);
/// How long SHUTDOWN waits for queued replies to drain.
const SHUTDOWN_FLUSH: Duration = Duration::from_secs(3);

/// What the loop that owns the engine does besides commands (the inline
/// driver, or the execution step in threaded mode): relay the stop flag,
/// run cron `hz` times a second, time blocked clients out, and give
/// background work (loading, a BGSAVE's capture) its slice.
pub(crate) struct EngineTimers {
    stop: &'static AtomicBool,
    next_cron: Instant,
}

impl EngineTimers {
    pub(crate) fn new(stop: &'static AtomicBool) -> EngineTimers {
        EngineTimers {
            stop,
            next_cron: Instant::now(),
        }
    }

    /// Returns whether cron ran (its time is then past `now`).
    pub(crate) fn run(&mut self, engine: &mut Engine, now: Instant) -> bool {
        // Taken, not just read: a signal whose shutdown failed (the final
        // save did not work) leaves the server running, and the next
        // signal tries again.
        if self.stop.swap(false, Ordering::Relaxed) {
            engine.shutdown_requested();
        }
        engine.background_step();
        let cron = now >= self.next_cron;
        if cron {
            engine.cron();
            crate::busy_poll::set_window_us(engine.config().io_busy_poll_us);
            crate::accept_budget::set_per_cycle(engine.config().max_new_connections_per_cycle);
            let period = Duration::from_micros(1_000_000 / u64::from(engine.hz().clamp(1, 500)));
            self.next_cron += period;
            if self.next_cron < now {
                self.next_cron = now + period;
            }
        }
        engine.expire_blocked();
        // Deletions by active expiry and eviction, a rewrite's cut-over.
        engine.commit_effects();
        cron
    }

    /// How long the loop may sleep (at most `max`) before cron or a blocked
    /// client's timeout is due.
    pub(crate) fn wait(&self, engine: &Engine, max: Duration) -> Duration {
        let cron = self.next_cron.saturating_duration_since(Instant::now());
        let mut wait = cron.min(max);
        if let Some(bg) = engine.background_wait() {
            wait = wait.min(bg);
        }
        if let Some(t) = engine.next_timeout_ms() {
            let now = engine::server::wall_ms();
            // A timeout fires once the clock is past it (see
            // engine::blocking::expire_timeouts): wake at t + 1.
            let ms = t.saturating_add(1).saturating_sub(now).max(0);
            wait = wait.min(Duration::from_millis(ms as u64));
        }
        wait
    }
}

/// Who runs the commands: the engine itself on this thread (inline mode,
/// `io-threads 1`), or the execution thread at the other end of `IoLink`.
pub(crate) enum Side {
    Inline(Box<Engine>),
    Io(Box<IoLink>),
    /// Inline mode while a batch runs: the engine is lent to it, and what
    /// the loop does meanwhile (only when a script is busy, from
    /// [`BusyIo`]) leaves the engine alone or keeps it for later.
    Lent,
}

/// The backend's part in serving other clients while a script is busy
/// (inline mode; see `engine::busy`): called from the script's hook
/// through the engine, with the batch's connections lent to it.
pub(crate) trait BusyIo {
    /// Take in what the kernel has, without waiting: accepts (served at
    /// once, registered with the engine after the batch), input of the
    /// connections here, sends done. Input for the connections lent to
    /// the batch waits for it (io_uring: their completions are held;
    /// epoll: the bytes stay in the socket).
    fn poll(&mut self, d: &mut Driver);
    /// Send the output of `slots`.
    fn flush(&mut self, d: &mut Driver, slots: &[u32]);
    /// Tear down the closing connections of `slots` that can go (QUIT).
    fn close(&mut self, d: &mut Driver, slots: &[u32]);
}

/// The engine's pump during one inline batch: the backend and the driver
/// (without the engine and the batch, which are lent out).
struct InlinePump<'a> {
    d: &'a mut Driver,
    io: &'a mut dyn BusyIo,
}

impl engine::busy::BusyPump for InlinePump<'_> {
    fn pump(&mut self) {
        let Some(busy) = self.d.busy.clone() else {
            return;
        };
        self.io.poll(self.d);
        self.d.serve_busy(&busy);
        let mut list = std::mem::take(&mut self.d.scratch);
        self.d.take_flush_present(&mut list);
        self.io.flush(self.d, &list);
        self.d.take_closing_present(&mut list);
        self.io.close(self.d, &list);
        list.clear();
        self.d.scratch = list;
    }
}

pub(crate) struct Driver {
    pub(crate) side: Side,
    timers: EngineTimers,
    /// Connections by slot; a slot is reused with a new generation.
    /// Boxed: a connection (~490 bytes) moves in and out of its slot
    /// several times per request, and a box moves as a pointer.
    conns: Vec<Option<Box<Connection>>>,
    generations: Vec<u32>,
    free: Vec<u32>,
    live: usize,
    by_client: HashMap<u64, u32>,
    /// Slots with input (or EOF) not yet looked at.
    dirty: Vec<u32>,
    /// Slots with output to send.
    flush: Vec<u32>,
    /// Slots whose `closing` is set, until the backend releases them.
    closing: Vec<u32>,
    /// Connections taken out of `conns` for the duration of a batch.
    batch: Vec<(u32, Box<Connection>, bool)>,
    scratch: Vec<u32>,
    /// Per job of the running batch: what the engine said to do after it.
    flags: Vec<engine::Outcome>,
    /// `client-output-buffer-limit` in force (the engine updates it).
    out_limits: Arc<OutputLimits>,
    events: Vec<Event>,
    shutting_down: bool,
    shutdown_deadline: Option<Instant>,
    /// An IO thread told to end once its connections have moved away.
    retiring: bool,
    /// Inline mode: CONFIG SET io-threads changed; looked at in `tick`.
    io_threads_changed: bool,
    /// Inline mode: the loop ends to hand the engine, its connections and
    /// the listeners over to threaded mode (CONFIG SET io-threads N > 1).
    switching: bool,
    /// Slots adopted since the backend last asked (it registers them).
    adopted: Vec<u32>,
    /// References to large values whose sends are done (or whose
    /// connections went away): dropped here in inline mode, handed back to
    /// the execution thread once per iteration on an IO thread.
    pub(crate) spent: Vec<resp::SharedBytes>,
    // Counters not yet reported to the engine.
    reads: u64,
    writes: u64,
    bytes_in: u64,
    bytes_out: u64,
    /// Inline mode: the engine's wake-up eventfd (see [`Driver::new`]),
    /// and whether the loop announced a sleep on it.
    pub(crate) wake_bell: Option<Arc<Doorbell>>,
    bell_sleeping: bool,
    /// A running script's busy state (the engine's, shared): while it is
    /// busy, commands are answered from it ([`Driver::serve_busy`]).
    busy: Option<Arc<engine::busy::BusyState>>,
    /// Slots with input that waits for the busy script's end.
    busy_waiting: Vec<u32>,
    /// Where client ids come from (the engine's counter, shared): a
    /// connection accepted while a script is busy takes one at once.
    ids: Arc<std::sync::atomic::AtomicU64>,
    /// Inline mode: connections accepted while the engine was lent to a
    /// batch, registered after it.
    guests: Vec<(ClientId, ClientInfo)>,
    /// What a new client gets (as of the last accept; AUTH as of the
    /// script's start): for connections accepted while busy.
    guest_limits: (resp::Limits, usize),
    guest_keepalive: u64,
    /// Inline mode: clients gone while the engine was lent to a batch.
    disconnect_later: Vec<ClientId>,
    /// `io-busy-poll-us`: poll instead of sleeping just after input.
    busy_poll: crate::busy_poll::BusyPoll,
    /// Inline mode: when the backend's wait last returned (the cycle's
    /// start, for the engine's `eventloop_*` counters).
    woke: Option<Instant>,
    /// When [`BUFFER_SWEEP`] next walks the connections.
    next_buffer_sweep: Instant,
}

impl Driver {
    pub(crate) fn new(engine: Engine, stop: &'static AtomicBool) -> Driver {
        let out_limits = engine.output_limits().clone();
        // Other threads with work for the engine (a replication link) ring
        // this eventfd, which the loop waits on beside its sockets.
        let bell = match Doorbell::new() {
            Ok(b) => Some(Arc::new(b)),
            Err(e) => {
                log::warning(&format!(
                    "no eventfd for the engine's wake-ups ({e}): background work is polled"
                ));
                None
            }
        };
        if let Some(b) = &bell {
            let b = b.clone();
            engine.wake_handle().set(Arc::new(move || {
                b.ring();
            }));
        }
        let busy = engine.busy_state();
        let ids = engine.client_ids();
        let guest = (engine.limits_for(false), engine.tcp_keepalive_s());
        let mut d = Driver::with_side(Side::Inline(Box::new(engine)), out_limits, stop);
        d.wake_bell = bell;
        d.busy = Some(busy);
        d.ids = ids;
        (d.guest_limits, d.guest_keepalive) = guest;
        d
    }

    /// An IO thread's driver (threaded mode).
    pub(crate) fn new_io(link: IoLink, stop: &'static AtomicBool) -> Driver {
        let out_limits = link.out_limits.clone();
        let busy = link.busy.clone();
        let ids = link.ids.clone();
        let mut d = Driver::with_side(Side::Io(Box::new(link)), out_limits, stop);
        d.busy = Some(busy);
        d.ids = ids;
        d
    }

    fn with_side(side: Side, out_limits: Arc<OutputLimits>, stop: &'static AtomicBool) -> Driver {
        Driver {
            side,
            out_limits,
            timers: EngineTimers::new(stop),
            conns: Vec::new(),
            generations: Vec::new(),
            free: Vec::new(),
            live: 0,
            by_client: HashMap::new(),
            dirty: Vec::new(),
            flush: Vec::new(),
            closing: Vec::new(),
            batch: Vec::new(),
            scratch: Vec::new(),
            flags: Vec::new(),
            events: Vec::new(),
            shutting_down: false,
            shutdown_deadline: None,
            retiring: false,
            io_threads_changed: false,
            switching: false,
            adopted: Vec::new(),
            spent: Vec::new(),
            reads: 0,
            writes: 0,
            bytes_in: 0,
            bytes_out: 0,
            wake_bell: None,
            bell_sleeping: false,
            busy: None,
            busy_waiting: Vec::new(),
            ids: Default::default(),
            guests: Vec::new(),
            guest_limits: (resp::Limits::default(), usize::MAX),
            guest_keepalive: 300,
            disconnect_later: Vec::new(),
            busy_poll: Default::default(),
            woke: None,
            next_buffer_sweep: Instant::now() + BUFFER_SWEEP,
        }
    }

    /// The engine, in inline mode; `None` on an IO thread.
    #[cfg(test)]
    pub(crate) fn engine(&mut self) -> Option<&mut Engine> {
        match &mut self.side {
            Side::Inline(e) => Some(e),
            Side::Io(_) | Side::Lent => None,
        }
    }

    /// The slot of `client`'s connection here.
    pub(crate) fn by_client_slot(&self, client: ClientId) -> Option<&u32> {
        self.by_client.get(&client.0)
    }

    pub(crate) fn conn(&mut self, slot: u32) -> Option<&mut Connection> {
        self.conns.get_mut(slot as usize)?.as_deref_mut()
    }

    /// The connection in `slot` if it is still the one of `generation`.
    pub(crate) fn conn_gen(&mut self, slot: u32, generation: u32) -> Option<&mut Connection> {
        self.conn(slot).filter(|c| c.generation == generation)
    }

    /// Open connections.
    pub(crate) fn live(&self) -> usize {
        self.live
    }

    pub(crate) fn shutting_down(&self) -> bool {
        self.shutting_down
    }

    /// Slots in use (for the final teardown).
    pub(crate) fn slots(&self) -> Vec<u32> {
        (0..self.conns.len() as u32)
            .filter(|&s| self.conns[s as usize].is_some())
            .collect()
    }

    /// A new socket from accept: register it with the engine, or send the
    /// engine's refusal and close it. Returns the slot on success.
    pub(crate) fn accept(&mut self, fd: RawFd) -> Option<u32> {
        if self.shutting_down {
            listener::close_fd(fd);
            return None;
        }
        let Some(addr) = listener::client_addr(fd) else {
            // Reset before we got to it.
            listener::close_fd(fd);
            return None;
        };
        let info = ClientInfo { addr, fd };
        if self.busy_now() {
            return Some(self.accept_guest(info));
        }
        let engine = match &mut self.side {
            Side::Inline(engine) => engine,
            Side::Lent => unreachable!("a batch lends the engine only while busy"),
            Side::Io(link) => {
                link.count_accept();
                // The execution thread registers the client and deals the
                // socket to an IO thread (maybe this one) with Adopt.
                link.send(ToExec::Connect(Box::new(Accepted {
                    info,
                    installed: None,
                })));
                return None;
            }
        };
        if log::enabled(log::Level::Verbose) {
            log::verbose(&format!("Accepted {}", info.addr));
        }
        let id = match engine.connect(info) {
            Ok(id) => id,
            Err(reply) => {
                listener::send_best_effort(fd, &reply);
                listener::close_fd(fd);
                return None;
            }
        };
        let keepalive = engine.tcp_keepalive_s();
        let meter = engine.client_meter(id);
        let limits = engine.client_limits(id);
        let slot = self.install(fd, id, keepalive, meter);
        if let Some(c) = self.conn(slot) {
            // Known before its first command, for a script that turns busy.
            c.limits = Some(limits);
        }
        (self.guest_limits, self.guest_keepalive) = (limits, keepalive);
        Some(slot)
    }

    /// A script is busy, and this loop answers for the engine: inline mode
    /// with the engine lent to the batch (the pump only runs while busy),
    /// or an IO thread.
    fn busy_now(&self) -> bool {
        match self.side {
            Side::Lent => true,
            Side::Io(_) => self.busy.as_ref().is_some_and(|b| b.is_busy()),
            Side::Inline(_) => false,
        }
    }

    /// A connection accepted while a script is busy: served at once from
    /// the busy state (so SCRIPT KILL or SHUTDOWN NOSAVE can come from a
    /// new connection, as in Valkey) under an id taken now; the engine
    /// registers it after the script (inline: after the batch; threaded:
    /// the execution thread, told by `Connect` with `installed`).
    fn accept_guest(&mut self, info: ClientInfo) -> u32 {
        let id = ClientId(self.ids.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        let (mut limits, qbuf_limit) = match &self.side {
            Side::Io(link) => link.default_limits,
            _ => self.guest_limits,
        };
        limits.unauthenticated = self
            .busy
            .as_ref()
            .is_some_and(|b| b.new_clients_must_auth());
        let slot = self.install(info.fd, id, self.guest_keepalive, None);
        if let Some(c) = self.conn(slot) {
            c.limits = Some((limits, qbuf_limit));
        }
        match &mut self.side {
            Side::Io(link) => link.guest_connected(Accepted {
                info,
                installed: Some(id),
            }),
            _ => self.guests.push((id, info)),
        }
        slot
    }

    /// Give a registered client's socket a slot.
    pub(crate) fn install(
        &mut self,
        fd: RawFd,
        id: ClientId,
        keepalive_s: u64,
        meter: Option<engine::ClientMeter>,
    ) -> u32 {
        listener::tune_client_socket(fd, keepalive_s);
        let slot = self.free_slot();
        let generation = self.generations[slot as usize];
        self.occupy(slot, Box::new(Connection::new(fd, id, generation, meter)))
    }

    /// Give a connection that another IO thread let go of a slot here; its
    /// unread input is parsed and its unsent output sent next.
    pub(crate) fn install_moved(&mut self, mut c: Box<Connection>) -> u32 {
        let slot = self.free_slot();
        c.arrive(self.generations[slot as usize]);
        let closing = c.closing != Closing::Open;
        let slot = self.occupy(slot, c);
        self.mark_dirty(slot);
        self.queue_flush(slot);
        if closing {
            // Carried while closing (after its output, or killed on the
            // way): the closing pass finishes it here.
            self.queue_close(slot);
        }
        slot
    }

    /// Take over connections another mode's loop let go of (a CONFIG SET
    /// io-threads switch), for the backend to register.
    pub(crate) fn take_in(&mut self, conns: Vec<Box<Connection>>) {
        for c in conns {
            let slot = self.install_moved(c);
            self.adopted.push(slot);
        }
    }

    /// A moved connection was installed: the backend registers it next.
    pub(crate) fn note_adopted(&mut self, slot: u32) {
        self.adopted.push(slot);
    }

    /// The loop is ending to give its listeners (and, inline, its
    /// connections) to another loop: the backend takes its sockets out
    /// instead of closing them.
    pub(crate) fn handing_over(&self) -> bool {
        self.switching || self.retiring
    }

    /// Inline mode is ending for threaded mode.
    pub(crate) fn switching(&self) -> bool {
        self.switching
    }

    /// After the backend has let go of every socket (nothing in flight):
    /// the engine and the connections worth carrying on. Connections
    /// already closing with nothing left to send are closed here.
    pub(crate) fn hand_off(mut self) -> (Engine, Vec<Box<Connection>>) {
        let mut conns = Vec::with_capacity(self.live);
        for slot in self.slots() {
            let Some(c) = self.conn(slot) else { continue };
            if c.closing == Closing::Now || (c.closing != Closing::Open && !c.has_output()) {
                listener::close_fd(c.fd);
                self.release(slot);
            } else if let Some(c) = self.vacate(slot) {
                conns.push(c);
            }
        }
        match self.side {
            Side::Inline(engine) => (*engine, conns),
            Side::Io(_) | Side::Lent => unreachable!("only inline mode hands its engine off"),
        }
    }

    fn free_slot(&mut self) -> u32 {
        self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.generations.push(0);
            (self.conns.len() - 1) as u32
        })
    }

    fn occupy(&mut self, slot: u32, c: Box<Connection>) -> u32 {
        self.by_client.insert(c.client.0, slot);
        self.conns[slot as usize] = Some(c);
        self.live += 1;
        slot
    }

    /// Bytes received on `slot`.
    pub(crate) fn on_input(&mut self, slot: u32, data: &[u8]) {
        let Some(c) = self.conns.get_mut(slot as usize).and_then(Option::as_mut) else {
            return;
        };
        c.push_input(data);
        let client = c.client;
        self.note_read(slot, client, data.len());
    }

    /// `n` bytes were read straight into the connection's buffer.
    pub(crate) fn note_read(&mut self, slot: u32, client: ClientId, n: usize) {
        self.reads += 1;
        self.busy_poll.input();
        self.bytes_in += n as u64;
        let conn = self.conns[slot as usize].as_deref_mut();
        if let Some(c) = &conn {
            c.publish_input_len();
        }
        match &mut self.side {
            Side::Inline(engine) => engine.note_client_input(client, n as u64),
            // Reported to the engine with the client's next request
            // (inline mode while busy: counted in the totals only).
            Side::Io(_) | Side::Lent => {
                if let Some(c) = conn {
                    c.unreported_in += n as u64;
                }
            }
        }
        self.mark_dirty(slot);
    }

    /// The peer closed its side (or the read side failed).
    pub(crate) fn on_eof(&mut self, slot: u32) {
        if let Some(c) = self.conn(slot) {
            c.peer_eof = true;
            self.mark_dirty(slot);
        }
    }

    /// `n` bytes of the connection's pending output went out. Returns
    /// whether output remains (the backend decides when to go on: epoll
    /// waits for EPOLLOUT, io_uring queues the next send).
    pub(crate) fn on_sent(&mut self, slot: u32, n: usize) -> bool {
        self.writes += 1;
        self.bytes_out += n as u64;
        let Some(c) = self.conns.get_mut(slot as usize).and_then(Option::as_mut) else {
            return false;
        };
        c.advance(n);
        c.take_spent(&mut self.spent);
        let more = c.has_output();
        if !more && c.closing != Closing::Open {
            self.queue_close(slot);
        }
        more
    }

    /// Sending failed: the peer is gone.
    pub(crate) fn on_send_error(&mut self, slot: u32) {
        self.writes += 1;
        self.close(slot, Closing::Now);
    }

    /// Close `slot` (idempotent, escalates only).
    pub(crate) fn close(&mut self, slot: u32, how: Closing) {
        if let Some(c) = self.conn(slot) {
            c.close_input();
            c.close(how);
            self.queue_close(slot);
        }
    }

    pub(crate) fn mark_dirty(&mut self, slot: u32) {
        if let Some(c) = self.conn(slot)
            && !c.dirty
        {
            c.dirty = true;
            self.dirty.push(slot);
        }
    }

    pub(crate) fn queue_flush(&mut self, slot: u32) {
        if let Some(c) = self.conn(slot)
            && !c.flush_queued
        {
            c.flush_queued = true;
            self.flush.push(slot);
        }
    }

    pub(crate) fn queue_close(&mut self, slot: u32) {
        if let Some(c) = self.conn(slot)
            && !c.close_queued
        {
            c.close_queued = true;
            self.closing.push(slot);
        }
    }

    /// Work is waiting that needs no new IO: the loop must not sleep.
    #[cfg(test)]
    pub(crate) fn busy(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// Right before the backend waits for IO: how long it may wait. On an
    /// IO thread this also hands queued messages to the execution thread
    /// and announces the sleep to its doorbell; call
    /// [`Driver::after_wait`] once the wait returns.
    pub(crate) fn before_wait(&mut self) -> Duration {
        let engine = match &mut self.side {
            Side::Inline(engine) => {
                // The engine's own thread: the values are freed here.
                self.spent.clear();
                engine
            }
            Side::Io(link) => {
                link.give_back(&mut self.spent);
                link.flush();
                let poll = self.busy_poll.next();
                return link.before_wait(!self.dirty.is_empty(), poll, MAX_WAIT);
            }
            Side::Lent => return Duration::ZERO,
        };
        if !self.dirty.is_empty() || self.busy_poll.next() != crate::busy_poll::Poll::Sleep {
            return Duration::ZERO;
        }
        if let Some(b) = &self.wake_bell {
            // Announced before the engine is asked, so a ring after its
            // answer is not lost.
            b.prepare_sleep();
            self.bell_sleeping = true;
        }
        let wait = self.timers.wait(engine, MAX_WAIT);
        if wait.is_zero() {
            self.after_wait(false);
        }
        wait
    }

    /// The backend's wait returned; `rung`: it reported the doorbell's fd.
    pub(crate) fn after_wait(&mut self, rung: bool) {
        match &mut self.side {
            Side::Io(link) => link.after_wait(rung),
            Side::Lent => {}
            Side::Inline(_) => {
                self.woke = Some(Instant::now());
                if let Some(b) = &self.wake_bell
                    && (self.bell_sleeping || rung)
                {
                    self.bell_sleeping = false;
                    b.awake_after(rung);
                }
            }
        }
    }

    /// [`Driver::process_with`] with no backend behind it (tests).
    #[cfg(test)]
    pub(crate) fn process(&mut self) {
        struct NoIo;
        impl BusyIo for NoIo {
            fn poll(&mut self, _: &mut Driver) {}
            fn flush(&mut self, _: &mut Driver, _: &[u32]) {}
            fn close(&mut self, _: &mut Driver, _: &[u32]) {}
        }
        self.process_with(&mut NoIo);
    }

    /// Parse everything new, run one batch for all connections with
    /// complete commands, settle errors and closes, then the engine's events.
    /// `io`: the backend, for serving other clients from inside a script
    /// that turns busy (inline mode).
    pub(crate) fn process_with(&mut self, io: &mut dyn BusyIo) {
        if matches!(self.side, Side::Io(_)) {
            self.receive();
            if self.backpressured() {
                // The ring to the execution thread is full: leave the
                // input where it is until it drains.
                return;
            }
            if self.busy.as_ref().is_some_and(|b| b.is_busy()) {
                // The execution thread is inside a long script: answer
                // from its busy state, ship nothing.
                if let Some(busy) = self.busy.clone() {
                    self.serve_busy(&busy);
                }
                return;
            }
            self.end_busy_wait();
        }
        let mut dirty = std::mem::take(&mut self.scratch);
        std::mem::swap(&mut dirty, &mut self.dirty);
        for &slot in &dirty {
            let Some(mut c) = self.conns[slot as usize].take() else {
                continue;
            };
            c.dirty = false;
            if c.closing == Closing::Now {
                self.conns[slot as usize] = Some(c);
                continue;
            }
            let (limits, qbuf_limit) = match &self.side {
                // Both with one session lookup; kept for parsing while a
                // script is busy.
                Side::Inline(engine) => {
                    let l = engine.client_limits(c.client);
                    c.limits = Some(l);
                    l
                }
                Side::Io(link) => c.limits.unwrap_or(link.default_limits),
                Side::Lent => unreachable!("parsed only between batches"),
            };
            if c.in_flight() || c.moving {
                // Its replies are not back yet, or it is leaving for another
                // IO thread (which parses what it carries); new input waits
                // (and is held to the same limit).
                if c.unparsed_len() > qbuf_limit {
                    self.over_query_limit(slot, c);
                } else {
                    self.conns[slot as usize] = Some(c);
                }
                continue;
            }
            // Before AUTH the limits are tighter, and AUTH changes them: take
            // one command at a time, as Valkey does.
            let max = if limits.unauthenticated {
                1
            } else {
                usize::MAX
            };
            let r = c.parse(&limits, max, qbuf_limit);
            // CLIENT LIST's `qbuf` is what waits behind the commands about
            // to run, as Valkey's, not the commands themselves.
            c.publish_input_len();
            if !c.has_error() && c.unparsed_len() > qbuf_limit {
                self.over_query_limit(slot, c);
                continue;
            }
            if c.has_commands() || c.has_error() || c.peer_eof {
                self.batch.push((slot, c, r.more));
            } else {
                self.conns[slot as usize] = Some(c);
            }
        }
        dirty.clear();
        self.scratch = dirty;

        if !self.batch.is_empty() {
            match self.side {
                Side::Inline(_) => self.run_batch(io),
                Side::Io(_) => self.ship_batch(),
                Side::Lent => unreachable!("one batch at a time"),
            }
        }
        if matches!(self.side, Side::Inline(_)) {
            self.drain_output();
            self.drain_events();
        }
    }

    fn over_query_limit(&mut self, slot: u32, mut c: Box<Connection>) {
        let (client, len) = (c.client, c.unparsed_len());
        match &mut self.side {
            Side::Inline(engine) => engine.note_query_buffer_limit(client, len),
            Side::Io(link) => link.send(ToExec::QueryBufferLimit { client, len }),
            Side::Lent => {}
        }
        c.close_input();
        c.close(Closing::Now);
        self.conns[slot as usize] = Some(c);
        self.queue_close(slot);
    }

    pub(crate) fn note_protocol_error(
        &mut self,
        client: ClientId,
        err: resp::ProtocolError,
        sample: engine::QuerySample,
    ) {
        match &mut self.side {
            Side::Inline(engine) => engine.note_protocol_error(client, &err, &sample),
            Side::Lent => {}
            Side::Io(link) => link.send(ToExec::ProtocolError {
                client,
                err: Box::new((err, sample)),
            }),
        }
    }

    pub(crate) fn take_batch(&mut self) -> Vec<(u32, Box<Connection>, bool)> {
        std::mem::take(&mut self.batch)
    }

    pub(crate) fn return_batch(&mut self, batch: Vec<(u32, Box<Connection>, bool)>) {
        self.batch = batch;
    }

    pub(crate) fn put_back(&mut self, slot: u32, c: Box<Connection>) {
        self.conns[slot as usize] = Some(c);
    }

    /// Take the connection of `slot` out if it is still the one of
    /// `generation` (put it back with [`Driver::settle`] or `put_back`).
    pub(crate) fn take_conn(&mut self, slot: u32, generation: u32) -> Option<Box<Connection>> {
        let cell = self.conns.get_mut(slot as usize)?;
        if cell.as_ref()?.generation != generation {
            return None;
        }
        cell.take()
    }

    /// Output the engine produced for clients outside their batches.
    fn drain_output(&mut self) {
        let Driver {
            side: Side::Inline(engine),
            conns,
            by_client,
            flush,
            scratch,
            ..
        } = self
        else {
            return;
        };
        let mut grown = std::mem::take(scratch);
        engine.drain_output(|client, bytes| {
            let Some(&slot) = by_client.get(&client.0) else {
                return;
            };
            if let Some(c) = conns[slot as usize].as_mut() {
                c.push_output(bytes);
                if !c.flush_queued {
                    c.flush_queued = true;
                    flush.push(slot);
                }
                grown.push(slot);
            }
        });
        // A subscriber that does not read grows here (pub/sub messages).
        for &slot in &grown {
            self.enforce_output_limit(slot);
        }
        grown.clear();
        self.scratch = grown;
    }

    fn run_batch(&mut self, io: &mut dyn BusyIo) {
        self.hold_back_after_script();
        // The engine and the batch are lent out, so that a script that
        // turns busy can have this loop serve other clients meanwhile
        // (`InlinePump`), through the driver without them.
        let Side::Inline(mut engine) = std::mem::replace(&mut self.side, Side::Lent) else {
            unreachable!("inline mode runs batches")
        };
        let mut batch_vec = std::mem::take(&mut self.batch);
        let mut jobs: Vec<Job<'_>> = batch_vec
            .iter_mut()
            .filter(|(_, c, _)| c.has_commands())
            .map(|(_, c, _)| c.job())
            .collect();
        if !jobs.is_empty() {
            let mut pump = InlinePump { d: self, io };
            engine.execute_batch_pumped(&mut jobs, &mut pump);
            // Before any reply is queued: with appendfsync always, the
            // batch's writes are on disk when this returns.
            engine.commit_effects();
        }
        let mut flags_vec = std::mem::take(&mut self.flags);
        flags_vec.clear();
        flags_vec.extend(jobs.iter().map(Job::outcome));
        drop(jobs);
        self.side = Side::Inline(engine);
        self.after_lending();

        let mut flags = flags_vec.iter();
        for (slot, mut c, more) in batch_vec.drain(..) {
            let done = if c.has_commands() {
                flags.next().copied()
            } else {
                None
            };
            let done = done.unwrap_or(engine::Outcome {
                output_class: c.out_class,
                resp3: c.resp3,
                in_multi: c.in_multi,
                auth_required: c.limits.is_some_and(|(l, _)| l.unauthenticated),
                ..Default::default()
            });
            c.out_class = done.output_class;
            c.resp3 = done.resp3;
            c.in_multi = done.in_multi;
            if c.limits
                .is_some_and(|(l, _)| l.unauthenticated != done.auth_required)
                && let Side::Inline(engine) = &self.side
            {
                // AUTH changed them: current for a script that turns busy
                // before this client's next parse.
                c.limits = Some(engine.limits_for(done.auth_required));
            }
            let err = c.after_batch(done.close_after_reply, done.blocked_after);
            self.settle(slot, c, more, err);
        }
        self.batch = batch_vec;
        self.flags = flags_vec;
    }

    /// The connections after the first one that may run a script wait
    /// for the next batch, parsed: should the script turn busy, they are
    /// answered from its busy state meanwhile (-BUSY, as Valkey answers a
    /// command that arrives during a script), not after it.
    fn hold_back_after_script(&mut self) {
        let Some(first) = self.batch.iter().position(|(_, c, _)| c.may_run_script()) else {
            return;
        };
        while self.batch.len() > first + 1
            && let Some((slot, c, _)) = self.batch.pop()
        {
            self.conns[slot as usize] = Some(c);
            self.mark_dirty(slot);
        }
    }

    /// The engine is back from a batch: what the loop kept for it while
    /// a script was busy (accepts, disconnects, waiting input).
    fn after_lending(&mut self) {
        // Registered before the disconnects: one accepted and gone while
        // busy is registered, then forgotten.
        for (id, info) in std::mem::take(&mut self.guests) {
            let Side::Inline(engine) = &mut self.side else {
                break;
            };
            let registered = engine.connect_as(info, Some(id));
            let (meter, limits) = (engine.client_meter(id), engine.client_limits(id));
            let Some(&slot) = self.by_client.get(&id.0) else {
                continue;
            };
            match registered {
                Ok(_) => {
                    if let Some(c) = self.conn(slot) {
                        c.meter = meter;
                        c.limits = Some(limits);
                    }
                }
                Err(reply) => {
                    // maxclients, protected mode: said after what it got.
                    if let Some(c) = self.conn(slot) {
                        c.push_output(&reply);
                    }
                    self.queue_flush(slot);
                    self.close(slot, Closing::AfterFlush);
                }
            }
        }
        if !self.disconnect_later.is_empty()
            && let Side::Inline(engine) = &mut self.side
        {
            for client in self.disconnect_later.drain(..) {
                engine.disconnect(client);
            }
        }
        self.end_busy_wait();
    }

    /// The busy script has ended: input kept waiting is parsed again.
    fn end_busy_wait(&mut self) {
        if self.busy_waiting.is_empty() {
            return;
        }
        for slot in std::mem::take(&mut self.busy_waiting) {
            self.mark_dirty(slot);
        }
    }

    /// While a script is busy: parse the connections with new input and
    /// answer their commands from the busy state (`engine::busy`), in
    /// order; a connection whose next command needs the engine (or that
    /// is closing, blocked, unauthenticated, or over a limit) keeps its
    /// input for after the script.
    pub(crate) fn serve_busy(&mut self, busy: &engine::busy::BusyState) {
        let mut dirty = std::mem::take(&mut self.scratch);
        std::mem::swap(&mut dirty, &mut self.dirty);
        for &slot in &dirty {
            let Some(c) = self
                .conns
                .get_mut(slot as usize)
                .and_then(Option::as_deref_mut)
            else {
                continue;
            };
            c.dirty = false;
            if c.blocked || c.in_flight() {
                // Parsed again once unblocked, or once its replies are back.
                continue;
            }
            // A peer that sent commands and left still has them answered
            // (refused) here, as Valkey does: they must not run after the
            // script. Its EOF is settled after it.
            let simple = c.closing == Closing::Open && !c.moving && !c.input_closed();
            if !simple || c.limits.is_none() {
                self.busy_waiting.push(slot);
                continue;
            }
            let mut waits = false;
            let mut over = false;
            while let Some((limits, qbuf_limit)) = c.limits {
                // Before AUTH one command at a time, as in `process`: AUTH
                // changes the limits the next one is parsed with.
                let max = if limits.unauthenticated {
                    1
                } else {
                    usize::MAX
                };
                let r = c.parse(&limits, max, qbuf_limit);
                over = c.unparsed_len() > qbuf_limit;
                if !c.has_commands() && !c.has_error() {
                    break;
                }
                waits = c.answer_busy(busy);
                if waits || over || !r.more {
                    break;
                }
            }
            let has_output = c.has_output();
            let closing = c.closing != Closing::Open;
            if closing {
                // QUIT: closed once its +OK is out (the engine forgets
                // the session when the connection is released).
                self.queue_close(slot);
            } else if waits || over || c.peer_eof {
                self.busy_waiting.push(slot);
            }
            if has_output {
                self.enforce_output_limit(slot);
                self.queue_flush(slot);
            }
        }
        dirty.clear();
        self.scratch = dirty;
    }

    /// [`Driver::take_closing`] for the connections here (those lent to a
    /// batch stay queued).
    pub(crate) fn take_closing_present(&mut self, out: &mut Vec<u32>) {
        out.clear();
        let conns = &mut self.conns;
        self.closing.retain(|&slot| {
            match conns.get_mut(slot as usize).and_then(Option::as_deref_mut) {
                Some(c) => {
                    c.close_queued = false;
                    out.push(slot);
                    false
                }
                None => true,
            }
        });
    }

    /// [`Driver::take_flush`] for the connections here (those lent to a
    /// batch stay queued).
    pub(crate) fn take_flush_present(&mut self, out: &mut Vec<u32>) {
        out.clear();
        let conns = &mut self.conns;
        self.flush.retain(|&slot| {
            match conns.get_mut(slot as usize).and_then(Option::as_deref_mut) {
                Some(c) => {
                    c.flush_queued = false;
                    out.push(slot);
                    false
                }
                None => true,
            }
        });
    }

    /// After a connection's commands ran (or it had none, only an error or
    /// an EOF): report its protocol error, close it if the peer is gone,
    /// and queue what it needs next.
    pub(crate) fn settle(
        &mut self,
        slot: u32,
        mut c: Box<Connection>,
        more: bool,
        err: Option<resp::ProtocolError>,
    ) {
        if let Some(err) = err {
            let sample = c.take_error_sample();
            self.note_protocol_error(c.client, err, sample);
        }
        c.publish_input_len();
        let more = more && !c.input_closed();
        if c.peer_eof && !more && !c.in_flight() {
            // Disconnected, possibly mid-command: reply to what ran
            // (best effort), then go.
            c.close_input();
            c.close(Closing::AfterFlush);
        }
        let has_output = c.has_output() && !c.moving;
        // A moving connection's hand-over waited for this request.
        let closing = c.closing != Closing::Open || c.moving;
        self.conns[slot as usize] = Some(c);
        if has_output {
            self.enforce_output_limit(slot);
            self.queue_flush(slot);
        }
        if closing {
            self.queue_close(slot);
        }
        if more {
            self.mark_dirty(slot);
        }
    }

    fn drain_events(&mut self) {
        let Side::Inline(engine) = &mut self.side else {
            return;
        };
        engine.drain_events(&mut self.events);
        let mut events = std::mem::take(&mut self.events);
        for ev in events.drain(..) {
            match ev {
                Event::Close { client, flush } => self.close_client(client, flush),
                Event::Detach { client } => self.begin_detach(client),
                Event::Shutdown => self.begin_shutdown(),
                Event::Unblocked { client } => self.unblock(client),
                // Looked at in `tick`, once this iteration's replies are
                // queued.
                Event::IoThreads { .. } => self.io_threads_changed = true,
            }
        }
        self.events = events;
    }

    pub(crate) fn close_client(&mut self, client: ClientId, flush: bool) {
        if let Some(&slot) = self.by_client.get(&client.0) {
            self.close(slot, Closing::for_event(flush));
        }
    }

    pub(crate) fn unblock(&mut self, client: ClientId) {
        if let Some(&slot) = self.by_client.get(&client.0) {
            if let Some(c) = self.conn(slot) {
                c.blocked = false;
            }
            // Its queued commands run next iteration.
            self.mark_dirty(slot);
        }
    }

    /// Output the execution thread produced for `client` outside its
    /// batch (taken over without a copy when nothing else is queued).
    pub(crate) fn append_output(&mut self, client: ClientId, bytes: &mut Vec<u8>) {
        if let Some(&slot) = self.by_client.get(&client.0)
            && let Some(c) = self.conn(slot)
        {
            c.append_bytes(bytes);
            self.queue_flush(slot);
            self.enforce_output_limit(slot);
        }
    }

    /// Close `slot` now if its pending output is over its
    /// `client-output-buffer-limit`, and tell the engine.
    fn enforce_output_limit(&mut self, slot: u32) {
        let Some(c) = self.conns.get_mut(slot as usize).and_then(Option::as_mut) else {
            return;
        };
        if c.closing == Closing::Now || !c.over_output_limit(&self.out_limits) {
            return;
        }
        let (client, len) = (c.client, c.output_len());
        match &mut self.side {
            Side::Inline(engine) => engine.note_output_buffer_limit(client, len),
            Side::Io(link) => link.send(ToExec::OutputBufferLimit { client, len }),
            Side::Lent => {}
        }
        self.close(slot, Closing::Now);
    }

    /// The execution thread wants this client's connection moved to
    /// another IO thread. One that is already closing just closes (its
    /// Disconnect tells the execution thread).
    pub(crate) fn begin_move(&mut self, client: ClientId) {
        if let Some(&slot) = self.by_client.get(&client.0)
            && let Some(c) = self.conn(slot)
            && c.closing == Closing::Open
        {
            c.moving = true;
            // The backend's closing pass does the hand-over.
            self.queue_close(slot);
        }
    }

    /// PSYNC made this client a replica: let go of its socket (the
    /// backend's closing pass waits for operations in flight) and hand it
    /// to the replication IO.
    pub(crate) fn begin_detach(&mut self, client: ClientId) {
        if let Some(&slot) = self.by_client.get(&client.0)
            && let Some(c) = self.conn(slot)
            && c.closing == Closing::Open
        {
            c.moving = true;
            c.detaching = true;
            self.queue_close(slot);
        }
    }

    /// End the loop once no connection is left (the execution thread
    /// moved them all elsewhere first).
    pub(crate) fn begin_retire(&mut self) {
        self.retiring = true;
    }

    pub(crate) fn begin_shutdown(&mut self) {
        if self.shutting_down {
            return;
        }
        self.shutting_down = true;
        self.shutdown_deadline = Some(Instant::now() + SHUTDOWN_FLUSH);
        for slot in self.slots() {
            self.close(slot, Closing::AfterFlush);
        }
    }

    /// Once per iteration, after [`Driver::process`]: the stop flag, cron,
    /// stats. Returns true when the loop should end (shutdown finished or
    /// out of time; the backend then tears down what is left).
    pub(crate) fn tick(&mut self) -> bool {
        let now = Instant::now();
        self.step_hosted(now);
        if now >= self.next_buffer_sweep {
            self.next_buffer_sweep = now + BUFFER_SWEEP;
            for c in self.conns.iter_mut().flatten() {
                c.release_if_idle();
            }
        }
        if let Side::Inline(engine) = &mut self.side {
            let end = if self.timers.run(engine, now) {
                Instant::now()
            } else {
                now
            };
            if let Some(woke) = self.woke.take() {
                engine.count_cycle(end.saturating_duration_since(woke));
            }
            self.drain_output();
            self.drain_events();
        }
        self.report_stats();
        if self.retiring && self.live == 0 {
            return true;
        }
        if std::mem::take(&mut self.io_threads_changed)
            && !self.shutting_down
            && let Side::Inline(engine) = &self.side
            && engine.config().io_threads > 1
        {
            // The replies queued this iteration are still sent (or carried)
            // by the backend before the loop lets go of the sockets.
            self.switching = true;
        }
        if self.switching {
            return true;
        }
        if self.shutting_down {
            let late = self.shutdown_deadline.is_some_and(|d| Instant::now() >= d);
            if late && self.live > 0 {
                log::warning(&format!(
                    "{} client(s) did not take their replies in time; closing them",
                    self.live
                ));
            }
            return self.live == 0 || late;
        }
        false
    }

    fn report_stats(&mut self) {
        if self.reads | self.writes | self.bytes_in | self.bytes_out == 0 {
            return;
        }
        match &mut self.side {
            Side::Inline(engine) => {
                engine.count_io(self.reads, self.writes);
                let net = engine.net_stats_mut();
                net.total_net_input_bytes += self.bytes_in;
                net.total_net_output_bytes += self.bytes_out;
            }
            Side::Io(link) => link.count_io(self.reads, self.writes, self.bytes_in, self.bytes_out),
            // Counted after the batch.
            Side::Lent => return,
        }
        self.reads = 0;
        self.writes = 0;
        self.bytes_in = 0;
        self.bytes_out = 0;
    }

    /// Slots adopted since the last call, for the backend to register.
    pub(crate) fn take_adopted(&mut self, out: &mut Vec<u32>) {
        out.clear();
        std::mem::swap(out, &mut self.adopted);
    }

    /// The slots with output queued since the last call.
    pub(crate) fn take_flush(&mut self, out: &mut Vec<u32>) {
        out.clear();
        std::mem::swap(out, &mut self.flush);
        for &slot in out.iter() {
            if let Some(c) = self.conn(slot) {
                c.flush_queued = false;
            }
        }
    }

    /// The slots that are closing, for the backend to try tearing down.
    pub(crate) fn take_closing(&mut self, out: &mut Vec<u32>) {
        out.clear();
        std::mem::swap(out, &mut self.closing);
        for &slot in out.iter() {
            if let Some(c) = self.conn(slot) {
                c.close_queued = false;
            }
        }
    }

    /// Put a slot back on the closing list (its teardown must wait for an
    /// operation to finish).
    pub(crate) fn retry_close(&mut self, slot: u32) {
        self.queue_close(slot);
    }

    /// The backend has finished with `slot` (fd closed, no operation in
    /// flight): forget the connection and its Session.
    pub(crate) fn release(&mut self, slot: u32) -> Option<Box<Connection>> {
        let mut c = self.vacate(slot)?;
        c.take_all_refs(&mut self.spent);
        match &mut self.side {
            Side::Inline(engine) => engine.disconnect(c.client),
            Side::Io(link) => link.disconnect(c.client),
            Side::Lent => self.disconnect_later.push(c.client),
        }
        Some(c)
    }

    /// The backend has let go of a moving connection's socket (no
    /// operation in flight, out of its poll set): send the connection on
    /// to the execution thread, which deals it to its new IO thread.
    pub(crate) fn hand_over(&mut self, slot: u32) {
        let Some(mut c) = self.vacate(slot) else {
            return;
        };
        if c.detaching {
            let (unsent, unparsed) = c.take_leftovers();
            c.take_all_refs(&mut self.spent);
            // SAFETY: the connection owned this descriptor and is dropped
            // here without closing it; the backend has no operation on it
            // and no longer polls it, so the OwnedFd is its only owner.
            let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(c.fd) };
            match &mut self.side {
                Side::Inline(engine) => engine.disconnect(c.client),
                Side::Io(link) => link.disconnect(c.client),
                Side::Lent => self.disconnect_later.push(c.client),
            }
            let d = crate::detach::Detached {
                fd,
                unsent,
                unparsed,
            };
            crate::detach::hand_out(c.client, d);
            return;
        }
        if let Side::Io(link) = &mut self.side {
            link.hand_over(c);
        }
    }

    fn vacate(&mut self, slot: u32) -> Option<Box<Connection>> {
        let c = self.conns.get_mut(slot as usize)?.take()?;
        self.by_client.remove(&c.client.0);
        self.generations[slot as usize] = (self.generations[slot as usize] + 1) & GEN_MASK;
        self.free.push(slot);
        self.live -= 1;
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static NEVER: AtomicBool = AtomicBool::new(false);

    /// A driver with socket-free connections: it never does IO itself
    /// except in `accept`, so tests register clients with the engine
    /// directly and play the backend's part by hand.
    fn driver(cfg: engine::Config) -> Driver {
        Driver::new(engine::Engine::new(cfg, None), &NEVER)
    }

    fn config(args: &[&str]) -> engine::Config {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        engine::Config::load(None, &args).unwrap()
    }

    fn add(d: &mut Driver) -> u32 {
        let info = ClientInfo::tcp(
            "127.0.0.1:40000".parse().unwrap(),
            "127.0.0.1:6379".parse().unwrap(),
            -1,
        );
        let id = d.engine().unwrap().connect(info).unwrap();
        let slot = d.conns.len() as u32;
        let meter = d.engine().unwrap().client_meter(id);
        d.conns
            .push(Some(Box::new(Connection::new(-1, id, 0, meter))));
        d.generations.push(0);
        d.by_client.insert(id.0, slot);
        d.live += 1;
        slot
    }

    /// Everything queued for `slot`, as if the socket took it all.
    fn output(d: &mut Driver, slot: u32) -> Vec<u8> {
        let mut list = Vec::new();
        d.take_flush(&mut list);
        let c = d.conn(slot).unwrap();
        let mut out = Vec::new();
        while c.has_output() {
            let (buf, from) = c.pending();
            let chunk = buf.to_vec()[from..].to_vec();
            c.advance(chunk.len());
            out.extend(chunk);
        }
        out
    }

    #[test]
    fn pipeline_split_anywhere_gives_the_same_replies() {
        let input = b"SET k v\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n*1\r\n$4\r\nPING\r\n";
        let want = b"+OK\r\n$1\r\nv\r\n+PONG\r\n+PONG\r\n".to_vec();
        for cut in 0..=input.len() {
            let mut d = driver(engine::Config::default());
            let s = add(&mut d);
            d.on_input(s, &input[..cut]);
            d.process();
            d.on_input(s, &input[cut..]);
            d.process();
            assert_eq!(output(&mut d, s), want, "cut at {cut}");
        }
    }

    #[test]
    fn one_batch_serves_many_connections() {
        let mut d = driver(engine::Config::default());
        let a = add(&mut d);
        let b = add(&mut d);
        d.on_input(a, b"SET x 1\r\nINCR x\r\n");
        d.on_input(b, b"PING\r\n");
        d.process();
        let mut list = Vec::new();
        d.take_flush(&mut list);
        assert_eq!(list, vec![a, b]);
        d.flush = list;
        assert_eq!(output(&mut d, a), b"+OK\r\n:2\r\n");
        assert_eq!(output(&mut d, b), b"+PONG\r\n");
    }

    #[test]
    fn protocol_error_replies_then_closes() {
        let mut d = driver(engine::Config::default());
        let s = add(&mut d);
        d.on_input(s, b"PING\r\n*1\r\n$x\r\nPING\r\n");
        d.process();
        assert_eq!(
            output(&mut d, s),
            b"+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"
        );
        let mut closing = Vec::new();
        d.take_closing(&mut closing);
        assert_eq!(closing, vec![s]);
        assert_eq!(d.conn(s).unwrap().closing, Closing::AfterFlush);
        d.release(s).unwrap();
        assert_eq!(d.engine().unwrap().connected_clients(), 0);
    }

    #[test]
    fn quit_closes_after_reply_and_ignores_the_rest() {
        let mut d = driver(engine::Config::default());
        let s = add(&mut d);
        d.on_input(s, b"PING\r\nQUIT\r\nSET never 1\r\n");
        d.process();
        assert_eq!(output(&mut d, s), b"+PONG\r\n+OK\r\n");
        assert_eq!(d.conn(s).unwrap().closing, Closing::AfterFlush);
        let t = add(&mut d);
        d.on_input(t, b"EXISTS never\r\n");
        d.process();
        assert_eq!(output(&mut d, t), b":0\r\n");
    }

    #[test]
    fn query_buffer_limit_closes_now() {
        let mut d = driver(config(&["--client-query-buffer-limit", "1mb"]));
        let s = add(&mut d);
        d.on_input(s, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3000000\r\n");
        d.on_input(s, &vec![b'x'; (1 << 20) - 100]);
        d.process();
        assert_eq!(d.conn(s).unwrap().closing, Closing::Open);
        d.on_input(s, &[b'x'; 200]);
        d.process();
        assert_eq!(d.conn(s).unwrap().closing, Closing::Now);
    }

    #[test]
    fn eof_mid_command_closes_without_running_it() {
        let mut d = driver(engine::Config::default());
        let s = add(&mut d);
        d.on_input(s, b"PING\r\n*3\r\n$3\r\nSET\r\n$4\r\nhalf\r\n$10\r\nabc");
        d.on_eof(s);
        d.process();
        assert_eq!(output(&mut d, s), b"+PONG\r\n");
        assert_eq!(d.conn(s).unwrap().closing, Closing::AfterFlush);
        let t = add(&mut d);
        d.on_input(t, b"EXISTS half\r\n");
        d.process();
        assert_eq!(output(&mut d, t), b":0\r\n");
    }

    #[test]
    fn unauthenticated_clients_go_one_command_at_a_time() {
        let mut d = driver(config(&["--requirepass", "pw"]));
        let s = add(&mut d);
        // After AUTH the second command may be larger than the pre-AUTH cap.
        let mut input = b"AUTH pw\r\n".to_vec();
        let big = "x".repeat(20_000);
        resp::encode_command(&[b"SET".as_slice(), b"k", big.as_bytes()], &mut input);
        d.on_input(s, &input);
        d.process();
        assert!(d.busy(), "the rest waits for the next round");
        d.process();
        assert_eq!(output(&mut d, s), b"+OK\r\n+OK\r\n");
    }

    #[test]
    fn shutdown_event_closes_everyone_after_flush() {
        let mut d = driver(engine::Config::default());
        let a = add(&mut d);
        let b = add(&mut d);
        d.on_input(b, b"PING\r\n");
        d.engine().unwrap().shutdown_requested();
        d.process();
        assert!(d.shutting_down());
        for s in [a, b] {
            assert_eq!(d.conn(s).unwrap().closing, Closing::AfterFlush);
        }
        d.release(a);
        d.release(b);
        assert!(d.tick());
    }

    #[test]
    fn output_buffer_limit_closes_now() {
        let mut d = driver(config(&[
            "--client-output-buffer-limit",
            "normal",
            "100kb",
            "50kb",
            "0",
        ]));
        let s = add(&mut d);
        let mut input = Vec::new();
        resp::encode_command(&[b"SET".as_slice(), b"big", &[b'x'; 60_000]], &mut input);
        resp::encode_command(&[b"GET".as_slice(), b"big"], &mut input);
        d.on_input(s, &input);
        d.process();
        // 60 KB pending: over the soft limit only just now, so still open.
        let c = d.conn(s).unwrap();
        assert_eq!(c.closing, Closing::Open);
        assert!(c.output_len() > 60_000);
        // Two more GETs unread: over the hard limit (referenced bytes
        // count as copied).
        d.on_input(s, b"GET big\r\nGET big\r\n");
        d.process();
        assert_eq!(d.conn(s).unwrap().closing, Closing::Now);
        let info = {
            let t = add(&mut d);
            d.on_input(t, b"INFO stats\r\n");
            d.process();
            String::from_utf8(output(&mut d, t)).unwrap()
        };
        assert!(
            info.contains("client_output_buffer_limit_disconnections:1"),
            "{info}"
        );
        // Its references go back with the connection.
        d.release(s);
        assert_eq!(d.spent.len(), 3);
    }

    /// `n` PUBLISHes of a 10 KB message to `ch`, as one client's input.
    fn publishes(ch: &[u8], n: usize) -> Vec<u8> {
        let mut input = Vec::new();
        for _ in 0..n {
            resp::encode_command(&[b"PUBLISH".as_slice(), ch, &[b'm'; 10_000]], &mut input);
        }
        input
    }

    fn run(d: &mut Driver, slot: u32, input: &[u8]) -> Vec<u8> {
        d.on_input(slot, input);
        d.process();
        output(d, slot)
    }

    #[test]
    fn pubsub_limit_follows_the_class_and_config_set() {
        let mut d = driver(config(&[
            "--client-output-buffer-limit",
            "normal",
            "0",
            "0",
            "0",
            "pubsub",
            "50kb",
            "0",
            "0",
        ]));
        let (sub, publisher) = (add(&mut d), add(&mut d));
        run(&mut d, sub, b"SUBSCRIBE ch\r\n");
        // Within the limit: 40 KB of messages wait, unread.
        run(&mut d, publisher, &publishes(b"ch", 4));
        assert_eq!(d.conn(sub).unwrap().closing, Closing::Open);
        assert!(d.conn(sub).unwrap().output_len() > 40_000);
        // Out of pub/sub mode the normal class (no limit) applies.
        d.on_input(sub, b"UNSUBSCRIBE ch\r\n");
        d.process();
        run(&mut d, publisher, b"SET k v\r\n");
        assert_eq!(d.conn(sub).unwrap().out_class, engine::OutputClass::Normal);
        run(&mut d, sub, b"SUBSCRIBE ch\r\n");
        // A limit set now holds the connected subscriber to it.
        let set = b"CONFIG SET client-output-buffer-limit \"pubsub 30kb 0 0\"\r\n";
        assert_eq!(run(&mut d, publisher, set), b"+OK\r\n");
        run(&mut d, publisher, &publishes(b"ch", 1));
        assert_eq!(d.conn(sub).unwrap().closing, Closing::Open);
        run(&mut d, publisher, &publishes(b"ch", 3));
        assert_eq!(d.conn(sub).unwrap().closing, Closing::Now);
        let info = run(&mut d, publisher, b"INFO stats\r\n");
        let info = String::from_utf8(info).unwrap();
        assert!(
            info.contains("client_output_buffer_limit_disconnections:1"),
            "{info}"
        );
    }

    /// A subscriber (`slow`) with three publishes waiting, an admin
    /// client, and how many bytes wait.
    fn subscriber_behind() -> (Driver, u32, u32, usize) {
        let mut d = driver(engine::Config::default());
        let (slow, admin) = (add(&mut d), add(&mut d));
        d.on_input(slow, b"SUBSCRIBE ch\r\n");
        d.process();
        run(&mut d, admin, &publishes(b"ch", 3));
        let pending = d.conn(slow).unwrap().output_len();
        (d, slow, admin, pending)
    }

    /// The subscriber's CLIENT LIST line, asked by `admin`.
    fn subscriber_line(d: &mut Driver, admin: u32) -> String {
        let list = String::from_utf8(run(d, admin, b"CLIENT LIST\r\n")).unwrap();
        list.lines()
            .find(|l| l.contains("sub=1"))
            .unwrap()
            .to_owned()
    }

    #[test]
    fn client_list_shows_pending_output() {
        let (mut d, slow, admin, pending) = subscriber_behind();
        assert!(pending > 30_000);
        let line = subscriber_line(&mut d, admin);
        // A backlog past the 1 KiB reply buffer is all reply list, in
        // 16 KiB blocks, as in Valkey.
        let blocks = pending.div_ceil(16 * 1024);
        assert!(
            line.contains(&format!(" obl=0 oll={blocks} omem={pending} ")),
            "{line}"
        );
        // Sent: nothing pending any more.
        output(&mut d, slow);
        let line = subscriber_line(&mut d, admin);
        assert!(line.contains(" obl=0 oll=0 omem=0 "), "{line}");
    }

    /// Once a send is issued the client may read its bytes at once, so
    /// CLIENT LIST stops counting them before the send returns; a short
    /// send counts its remainder again.
    #[test]
    fn output_handed_to_a_send_is_no_longer_counted() {
        let (mut d, slow, admin, pending) = subscriber_behind();
        let omem = |d: &mut Driver| {
            let line = subscriber_line(d, admin);
            let v = line.split(' ').find_map(|f| f.strip_prefix("omem="));
            v.unwrap().parse::<usize>().unwrap()
        };
        let c = d.conn(slow).unwrap();
        let (buf, from) = c.begin_send().unwrap();
        assert_eq!(buf.len() - from, pending);
        assert_eq!(omem(&mut d), 0);
        // The kernel took 1,000 bytes of it.
        d.on_sent(slow, 1_000);
        assert_eq!(omem(&mut d), pending - 1_000);
        // Nothing left to send: nothing to begin.
        output(&mut d, slow);
        assert!(d.conn(slow).unwrap().begin_send().is_none());
        assert_eq!(omem(&mut d), 0);
    }
}
