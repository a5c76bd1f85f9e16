//! Threaded mode (`io-threads N`, N > 1): N - 1 IO threads own every
//! socket, and the calling (main) thread becomes the execution thread,
//! the only one that touches the engine. It makes no socket syscalls:
//! it drains every IO thread's ring, runs all their requests as one
//! `execute_batch` (one prefetch pass over every key), sends each reply
//! back to the thread that owns the connection, and sleeps on its
//! doorbell when there is nothing to do.
//!
//! ```text
//!   io-thread-1 (accepts too) ─┐ ToExec ring ┌─► execution thread (main)
//!   io-thread-2 ───────────────┤             │     Engine, every Session
//!   ...                        │◄── ToIo ────┘     cron, timeouts, events
//! ```

use crate::driver::{Driver, EngineTimers};
use crate::handoff::{Accepted, Adoption, Arrival, Exchange, Outlet, Registration, ToExec, ToIo};
use crate::io_thread::IoLink;
use crate::listener::Listener;
use crate::{epoll, uring};
use engine::{ClientId, ClientInfo, CommandsView, Engine, Event, IoThreadStats, Job, log};
use ringkv_rings::doorbell::Doorbell;
use ringkv_rings::spsc::Consumer;
use std::collections::HashMap;
use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod pool;

/// Polls of the rings before the execution thread goes to sleep, when the
/// threads can run in parallel (on one allowed CPU, spinning only delays
/// the IO thread it waits for).
const SPIN_ROUNDS: u32 = 200;
/// The longest the execution thread sleeps (the stop flag is checked).
const MAX_SLEEP: Duration = Duration::from_millis(100);

/// The execution thread's end of one IO thread's rings.
struct Peer {
    rx: Consumer<ToExec>,
    tx: Outlet<ToIo>,
    bell: Arc<Doorbell>,
    /// Clients it owns, counting those moving to it and not those moving
    /// away (so placement sees where clients will be).
    clients: usize,
    exited: bool,
    stats: Arc<IoThreadStats>,
    /// `stats.busy_ns` when the pool last looked.
    busy_seen: u64,
    /// Removed by CONFIG SET io-threads: its clients move away, then it is
    /// told to `Retire` (`retire_sent`).
    retiring: bool,
    retire_sent: bool,
    handle: Option<JoinHandle<IoThreadEnd>>,
}

/// What an IO thread's body returns: the listeners it held, still open,
/// when it ended by retiring (io-thread-1, CONFIG SET io-threads 1).
type IoThreadEnd = io::Result<Vec<Listener>>;

impl Peer {
    fn send(&mut self, msg: ToIo) {
        self.tx.send(msg);
    }

    fn flush(&mut self) {
        if self.tx.flush() > 0 {
            self.bell.ring();
        }
    }
}

/// What the execution thread does from inside a script that has turned
/// busy: the requests IO threads shipped before they saw it busy go back
/// to them unrun, to be answered from the busy state (-BUSY) rather than
/// wait for the script; every other message waits for its end.
struct ExecPump<'a> {
    peers: &'a mut [Peer],
    held: &'a mut Vec<(usize, ToExec)>,
}

impl engine::busy::BusyPump for ExecPump<'_> {
    fn pump(&mut self) {
        for (t, p) in self.peers.iter_mut().enumerate() {
            while let Some(msg) = p.rx.pop() {
                match msg {
                    ToExec::Commands(ex) => p.send(ToIo::Unrun(ex)),
                    other => self.held.push((t, other)),
                }
            }
            p.flush();
        }
    }
}

/// A request taken off a ring, waiting for the batch to run.
struct Pending {
    thread: usize,
    ex: Box<Exchange>,
}

/// Which backend the IO threads run.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    Uring { batch_wait_us: u32 },
    Epoll,
}

/// Start the IO threads, deal them the connections handed over by inline
/// mode (if any), then run the execution loop on this thread until
/// shutdown (`None`) or until CONFIG SET io-threads 1 has brought every
/// connection and the listeners back here (`Some`, for inline mode);
/// returns once every IO thread has exited.
pub(crate) fn serve(
    h: crate::Handover,
    stop: &'static AtomicBool,
    backend: Backend,
    first: bool,
) -> io::Result<Option<crate::Handover>> {
    let crate::Handover {
        engine,
        mut listeners,
        conns,
    } = h;
    let n = engine.config().io_threads.saturating_sub(1).max(1);
    let ready = crate::listener::ready_lines(&listeners);
    // The execution thread waits on its doorbell alone: a futex, so a
    // wake-up costs it no read of an eventfd.
    let exec_bell = Arc::new(Doorbell::new_futex());
    let shared: SharedExec = Arc::new_cyclic(|me| {
        Mutex::new(ExecLoop::new(engine, exec_bell, stop, backend, me.clone()))
    });
    // Held until "Ready" is logged: with idle-exec an IO thread could
    // otherwise run a client's command before the server says it is up.
    let mut held = lock(&shared);
    // The first IO thread takes the listeners: it accepts for everyone.
    let mut started = Vec::with_capacity(n);
    let mut failed = None;
    for _ in 0..n {
        match held.spawn_io_thread(&mut listeners) {
            Ok(ready) => started.push(ready),
            Err(e) => {
                failed = Some(e.to_string());
                break;
            }
        }
    }
    for ready in started {
        let reason = match ready.recv() {
            Ok(Ok(())) => continue,
            Ok(Err(reason)) => reason,
            Err(_) => "it exited at start-up".to_string(),
        };
        failed.get_or_insert(reason);
    }
    if let Some(reason) = failed {
        if first {
            return Err(io::Error::other(format!(
                "an IO thread could not start: {reason}"
            )));
        }
        // CONFIG SET io-threads from 1: back to inline mode the way
        // CONFIG SET io-threads 1 goes, every connection kept. The threads
        // that did start retire, io-thread-1 returning the listeners if it
        // took them.
        stay_inline(&mut held.engine, &reason);
        held.listeners_back.append(&mut listeners);
        for c in conns {
            held.keep_home(c);
        }
        held.set_io_threads(1);
    } else {
        held.start_pool(n);
        for c in conns {
            held.take_over(c);
        }
        log::notice(&format!(
            "{n} IO thread(s) started; this thread executes commands"
        ));
        if first {
            // Startup memory includes the IO threads' buffers and rings,
            // as Valkey's includes its IO threads'.
            held.engine.server_ready();
            ready.iter().for_each(|line| log::notice(line));
        }
    }
    run(&shared, held);
    let mut ex = lock(&shared);
    let mut handles = ex.pool.take_ended();
    handles.extend(ex.peers.iter_mut().filter_map(|p| p.handle.take()));
    let homed = ex.pool.homed(ex.peers.len()) && !ex.shutting_down;
    drop(ex);
    let mut listeners = Vec::new();
    for h in handles {
        listeners.extend(join_io_thread(h));
    }
    // Every IO thread has ended, and with it its handle on the loop.
    let Ok(ex) = Arc::try_unwrap(shared) else {
        return Err(io::Error::other(
            "the execution loop outlived its IO threads",
        ));
    };
    let mut ex = ex.into_inner().unwrap_or_else(PoisonError::into_inner);
    let conns = ex.pool.take_home();
    if !homed {
        for c in conns {
            crate::listener::close_fd(c.fd);
        }
        return Ok(None);
    }
    listeners.append(&mut ex.listeners_back);
    Ok(Some(crate::Handover {
        engine: ex.engine,
        listeners,
        conns,
    }))
}

/// CONFIG SET io-threads from 1 could not bring threaded mode up: say why,
/// and set io-threads back to 1 (CONFIG GET shows the mode that runs).
fn stay_inline(engine: &mut Engine, reason: &str) {
    log::warning(&format!(
        "Could not start the IO threads ({reason}): io-threads stays 1"
    ));
    let back: &[(&[u8], &[u8])] = &[(b"io-threads", b"1")];
    let _ = engine.server_mut().config.set_many(back);
}

/// Join an IO thread; the listeners it gives back, if any.
fn join_io_thread(h: JoinHandle<IoThreadEnd>) -> Vec<Listener> {
    match h.join() {
        Ok(Ok(listeners)) => listeners,
        Ok(Err(e)) => {
            log::warning(&format!("IO thread: {e}"));
            Vec::new()
        }
        Err(_) => {
            log::warning("an IO thread panicked");
            Vec::new()
        }
    }
}

/// The execution step and everything it owns, behind one lock. The
/// execution thread holds it while it works and lets go only to sleep;
/// an IO thread that has just published work and finds it free (the
/// execution thread is asleep) runs the step itself instead of waking it:
/// at low load that saves two context switches per batch, under load the
/// execution thread keeps the lock and IO threads only ring.
pub(crate) type SharedExec = Arc<Mutex<ExecLoop>>;

fn lock(shared: &Mutex<ExecLoop>) -> MutexGuard<'_, ExecLoop> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Run the step under the lock if nobody holds it (an IO thread's call).
pub(crate) fn try_step(shared: &Mutex<ExecLoop>) -> bool {
    let mut ex = match shared.try_lock() {
        Ok(ex) => ex,
        Err(TryLockError::Poisoned(p)) => p.into_inner(),
        Err(TryLockError::WouldBlock) => return false,
    };
    let batches = ex.batches;
    ex.on_io = true;
    ex.timed_step();
    ex.on_io = false;
    ex.batches_on_io += ex.batches - batches;
    if !ex.script_wait.is_empty() {
        // Scripts run on the execution thread (see `script_wait`).
        ex.bell.ring();
    }
    true
}

/// The execution thread's loop: step while there is work, then sleep with
/// the lock released.
fn run<'a>(shared: &'a Mutex<ExecLoop>, mut ex: MutexGuard<'a, ExecLoop>) {
    let parallel = allowed_cpus() > 1;
    let spin_rounds = if parallel { SPIN_ROUNDS } else { 0 };
    let mut idle_rounds = 0u32;
    // The awake interval after every AWAKE_SAMPLE_EVERY-th sleep is timed
    // (`NetStats::exec_awake_cpu_ns`): the thread's CPU clock is a system
    // call here, too dear to read around every sleep at `-P 1`.
    let mut awake_since: Option<u64> = None;
    let mut sample_in = 0u32;
    loop {
        let worked = ex.timed_step();
        for h in ex.pool.take_ended() {
            let back = join_io_thread(h);
            ex.listeners_back.extend(back);
        }
        if ex.shutting_down && ex.peers.iter().all(|p| p.exited) {
            return;
        }
        if ex.pool.homed(ex.peers.len()) {
            // Back to inline mode: every connection is here.
            return;
        }
        if worked {
            idle_rounds = 0;
            continue;
        }
        idle_rounds += 1;
        if idle_rounds < spin_rounds {
            std::hint::spin_loop();
            continue;
        }
        idle_rounds = 0;
        let wait = ex.sleep_time();
        let bell = ex.bell.clone();
        drop(ex);
        bell.prepare_sleep();
        // The re-check takes the lock: an IO thread running the step may
        // hold it, and a message published after its drain must be seen
        // here or ring us (its own try_step failed on the lock).
        ex = lock(shared);
        if ex.has_input() || ex.background_ready() {
            bell.awake();
            if ex.peers.iter().any(|p| p.tx.held_back()) {
                // An IO thread's ring is full: give it a moment to drain.
                drop(ex);
                std::thread::sleep(Duration::from_micros(50));
                ex = lock(shared);
            }
            continue;
        }
        ex.sleeps += 1;
        if let Some(since) = awake_since.take() {
            // A second read right after the first prices one read, which
            // the sampled interval also holds (half of each end's).
            let now = thread_cpu_ns();
            let read = thread_cpu_ns().saturating_sub(now);
            let awake = now.saturating_sub(since).saturating_sub(read);
            ex.awake_cpu_ns += awake * AWAKE_SAMPLE_EVERY;
        }
        drop(ex);
        bell.wait(Some(wait));
        if awake_sampled(&mut sample_in) {
            awake_since = Some(thread_cpu_ns());
        }
        bell.awake();
        ex = lock(shared);
    }
}

fn io_thread_main(
    link: IoLink,
    listeners: Vec<Listener>,
    backend: Backend,
    stop: &'static AtomicBool,
    ready: std::sync::mpsc::Sender<Result<(), String>>,
) -> IoThreadEnd {
    let mut d = Driver::new_io(link, stop);
    let r = match backend {
        Backend::Uring { batch_wait_us } => match uring::Uring::new(&listeners, batch_wait_us) {
            Ok(ring) => {
                let _ = ready.send(Ok(()));
                ring.run(&mut d, listeners)
            }
            Err(reason) => {
                let _ = ready.send(Err(reason));
                Ok(listeners)
            }
        },
        Backend::Epoll => match epoll::Epoll::new(&listeners) {
            Ok(ep) => {
                let _ = ready.send(Ok(()));
                ep.run(&mut d, listeners)
            }
            Err(e) => {
                let _ = ready.send(Err(e.to_string()));
                Ok(listeners)
            }
        },
    };
    d.finish_io();
    r
}

pub(crate) struct ExecLoop {
    engine: Engine,
    peers: Vec<Peer>,
    bell: Arc<Doorbell>,
    timers: EngineTimers,
    stop: &'static AtomicBool,
    backend: Backend,
    /// Itself, for the IO threads it starts (idle hand-off).
    me: Weak<Mutex<ExecLoop>>,
    /// Which IO thread owns each client (while it moves: the one it is
    /// leaving).
    owner: HashMap<u64, usize>,
    /// How many IO threads there are, and take connections.
    pool: pool::Pool,
    batch: Vec<Pending>,
    /// Per job of the running batch: what the engine said to do after it
    /// (kept to reuse its allocation).
    flags: Vec<engine::Outcome>,
    /// Messages that must wait until the batch before them has run.
    deferred: Vec<ToExec>,
    /// The step is running on an IO thread (`io-threads-idle-exec`).
    on_io: bool,
    /// Requests that may run a script: they run after the rest of their
    /// batch (whose replies leave first), and only on the execution thread,
    /// so that a script that turns busy never holds up an IO thread, which
    /// answers its clients -BUSY meanwhile (see `engine::busy`).
    script_wait: Vec<Pending>,
    /// Messages taken off the rings while a script was busy, other than
    /// requests (those go back to their IO thread unrun): taken in, in
    /// order, once it has ended.
    held: Vec<(usize, ToExec)>,
    events: Vec<Event>,
    shutting_down: bool,
    busy_since_report: Duration,
    last_report: Instant,
    batches: u64,
    /// Of `batches`, those an IO thread ran (the execution thread slept).
    batches_on_io: u64,
    sleeps: u64,
    /// See `NetStats::exec_awake_cpu_ns`.
    awake_cpu_ns: u64,
    /// When the last step read the clock (for its timers).
    clock: Instant,
    /// Listeners given back by io-thread-1 when it retired (CONFIG SET
    /// io-threads 1), for inline mode.
    listeners_back: Vec<Listener>,
}

impl ExecLoop {
    fn new(
        mut engine: Engine,
        bell: Arc<Doorbell>,
        stop: &'static AtomicBool,
        backend: Backend,
        me: Weak<Mutex<ExecLoop>>,
    ) -> ExecLoop {
        let ringer = bell.clone();
        engine.wake_handle().set(Arc::new(move || {
            ringer.ring();
        }));
        // Counters go on from where an earlier threaded period left them.
        let net = engine.net_stats_mut();
        let (batches, batches_on_io, sleeps, awake_cpu_ns) = (
            net.exec_batches,
            net.exec_batches_on_io,
            net.exec_sleeps,
            net.exec_awake_cpu_ns,
        );
        ExecLoop {
            engine,
            peers: Vec::new(),
            bell,
            timers: EngineTimers::new(stop),
            stop,
            backend,
            me,
            owner: HashMap::new(),
            pool: pool::Pool::default(),
            batch: Vec::new(),
            flags: Vec::new(),
            deferred: Vec::new(),
            on_io: false,
            script_wait: Vec::new(),
            held: Vec::new(),
            events: Vec::new(),
            shutting_down: false,
            busy_since_report: Duration::ZERO,
            last_report: Instant::now(),
            batches,
            batches_on_io,
            sleeps,
            awake_cpu_ns,
            clock: Instant::now(),
            listeners_back: Vec::new(),
        }
    }

    /// [`ExecLoop::step`], with its time counted as busy.
    fn timed_step(&mut self) -> bool {
        let started = Instant::now();
        let (worked, cron) = self.step();
        // The step read the clock for its timers just before its last
        // flushes: close enough, and one clock read less per step.
        let now = self.clock;
        if worked {
            self.busy_since_report += now.saturating_duration_since(started);
        }
        if worked || cron {
            self.engine
                .count_cycle(now.saturating_duration_since(started));
        }
        self.report_busy(now);
        worked
    }

    /// One round: take in every ring, run the batch, answer, timers.
    /// Returns whether anything came in, and whether cron ran.
    fn step(&mut self) -> (bool, bool) {
        let mut worked = false;
        for t in 0..self.peers.len() {
            while let Some(msg) = self.peers[t].rx.pop() {
                worked = true;
                self.take(t, msg);
            }
        }
        if !self.batch.is_empty() {
            self.batches += 1;
            self.execute();
        }
        if !self.on_io && !self.script_wait.is_empty() {
            worked = true;
            // The others' replies leave before a script can turn busy.
            for p in &mut self.peers {
                p.flush();
            }
            std::mem::swap(&mut self.batch, &mut self.script_wait);
            self.batches += 1;
            self.execute();
        }
        for (t, msg) in std::mem::take(&mut self.held) {
            self.take(t, msg);
        }
        for msg in std::mem::take(&mut self.deferred) {
            self.after_batch(msg);
        }
        let mut now = Instant::now();
        let cron = self.timers.run(&mut self.engine, now);
        if cron {
            now = Instant::now();
        }
        self.clock = now;
        self.route_output();
        self.tend_pool(now);
        for p in &mut self.peers {
            p.flush();
        }
        (worked, cron)
    }

    fn take(&mut self, thread: usize, msg: ToExec) {
        match msg {
            ToExec::Connect(accepted) => {
                let Accepted { info, installed } = *accepted;
                if let Some(client) = installed {
                    return self.register_guest(thread, client, info);
                }
                let fd = info.fd;
                if log::enabled(log::Level::Verbose) {
                    log::verbose(&format!("Accepted {}", info.addr));
                }
                match self.engine.connect(info) {
                    Ok(client) => {
                        if self.pool.homing() {
                            self.home_new(fd, client);
                            return;
                        }
                        let t = self.place();
                        self.peers[t].clients += 1;
                        let keepalive_s = self.engine.tcp_keepalive_s();
                        let meter = self.engine.client_meter(client);
                        let socket = Arrival::New {
                            fd,
                            keepalive_s,
                            meter,
                        };
                        self.adopt(t, client, socket);
                    }
                    Err(reply) => self.refuse(thread, fd, reply),
                }
            }
            ToExec::Commands(ex) => {
                if ex.req.hints.iter().any(|h| h.may_run_script()) {
                    self.script_wait.push(Pending { thread, ex });
                } else {
                    self.batch.push(Pending { thread, ex });
                }
            }
            ToExec::Released { conn } => self.released(thread, conn),
            // The last reference may be this one: the value is freed on
            // the thread that allocated it.
            ToExec::Spent { refs } => drop(refs),
            ToExec::Exited => self.exited(thread),
            other => self.deferred.push(other),
        }
    }

    /// A connection IO thread `t` accepted and served while a script was
    /// busy: register it there, or refuse it (maxclients, protected mode)
    /// with the reply and a close.
    fn register_guest(&mut self, t: usize, client: ClientId, info: ClientInfo) {
        match self.engine.connect_as(info, Some(client)) {
            Ok(_) => {
                self.owner.insert(client.0, t);
                self.peers[t].clients += 1;
                let (limits, qbuf_limit) = self.engine.client_limits(client);
                let meter = self.engine.client_meter(client);
                self.peers[t].send(ToIo::Registered(Box::new(Registration {
                    client,
                    limits,
                    qbuf_limit,
                    meter,
                })));
            }
            Err(bytes) => {
                self.peers[t].send(ToIo::Output { client, bytes });
                self.peers[t].send(ToIo::Close {
                    client,
                    flush: true,
                });
            }
        }
    }

    /// Hand `client`'s socket to IO thread `t`, with the client's current
    /// limits, and record `t` as its owner.
    fn adopt(&mut self, t: usize, client: ClientId, socket: Arrival) {
        self.owner.insert(client.0, t);
        let (limits, qbuf_limit) = self.engine.client_limits(client);
        self.peers[t].send(ToIo::Adopt(Box::new(Adoption {
            client,
            limits,
            qbuf_limit,
            socket,
        })));
    }

    fn execute(&mut self) {
        let mut batch = std::mem::take(&mut self.batch);
        let mut jobs: Vec<Job<'_>> = batch
            .iter_mut()
            .map(|p| {
                let ex = &mut *p.ex;
                let mut job = Job::new(
                    ex.client,
                    CommandsView {
                        data: &ex.req.data,
                        args: &ex.req.args,
                        argc: &ex.req.argc,
                        hints: &ex.req.hints,
                    },
                    &mut ex.out,
                );
                job.bytes_in = ex.bytes_in;
                job
            })
            .collect();
        let mut pump = ExecPump {
            peers: &mut self.peers,
            held: &mut self.held,
        };
        self.engine.execute_batch_pumped(&mut jobs, &mut pump);
        // Before any reply leaves: with appendfsync always, the batch's
        // writes are on disk when this returns.
        self.engine.commit_effects();
        if self.engine.busy_ended() {
            // Input the IO threads kept waiting for the script runs now.
            for p in &self.peers {
                p.bell.ring();
            }
        }
        let mut flags = std::mem::take(&mut self.flags);
        flags.clear();
        flags.extend(jobs.iter().map(Job::outcome));
        drop(jobs);
        for (mut p, done) in batch.drain(..).zip(&flags) {
            let ex = &mut *p.ex;
            // From the job, not the session: one lookup less per request.
            (ex.limits, ex.qbuf_limit) = self.engine.limits_for(done.auth_required);
            ex.out_class = done.output_class;
            ex.resp3 = done.resp3;
            ex.in_multi = done.in_multi;
            ex.close_after_reply = done.close_after_reply;
            ex.blocked_after = done.blocked_after;
            self.peers[p.thread].send(ToIo::Replies(p.ex));
        }
        self.batch = batch;
        self.flags = flags;
    }

    fn after_batch(&mut self, msg: ToExec) {
        match msg {
            ToExec::Disconnect { client } => self.forget(client),
            ToExec::ProtocolError { client, err } => {
                self.engine.note_protocol_error(client, &err.0, &err.1)
            }
            ToExec::QueryBufferLimit { client, len } => {
                self.engine.note_query_buffer_limit(client, len)
            }
            ToExec::OutputBufferLimit { client, len } => {
                self.engine.note_output_buffer_limit(client, len)
            }
            ToExec::Connect(_)
            | ToExec::Commands(_)
            | ToExec::Released { .. }
            | ToExec::Spent { .. }
            | ToExec::Exited => {}
        }
    }

    /// Drop a client's Session (idempotent).
    fn forget(&mut self, client: ClientId) {
        if let Some(t) = self.owner.remove(&client.0) {
            self.engine.disconnect(client);
            // A moving client was already counted at its destination
            // (none when that is this thread, on the way to inline mode).
            let t = self.pool.forget_move(client).unwrap_or(t);
            if let Some(p) = self.peers.get_mut(t) {
                p.clients = p.clients.saturating_sub(1);
            }
        }
    }

    /// Out-of-band output and engine events, to the threads that own the
    /// clients concerned.
    fn route_output(&mut self) {
        let ExecLoop {
            engine,
            peers,
            owner,
            pool,
            ..
        } = self;
        engine.drain_output(|client, bytes| {
            let msg = ToIo::Output {
                client,
                bytes: bytes.to_vec(),
            };
            pool.deliver(peers, owner, client, msg);
        });
        self.engine.drain_events(&mut self.events);
        for ev in std::mem::take(&mut self.events) {
            match ev {
                Event::Close { client, flush } => {
                    if let Some(&t) = self.owner.get(&client.0) {
                        let msg = ToIo::Close { client, flush };
                        match self.peers.get_mut(t) {
                            Some(p) => p.send(msg),
                            // Brought home for inline mode: it closes there.
                            None => self.pool.deliver(&mut self.peers, &self.owner, client, msg),
                        }
                    }
                    // Gone for everyone at once, as in inline mode (CLIENT
                    // KILL then PUBSUB NUMSUB sees it gone); the IO thread's
                    // Disconnect that follows finds nothing left to do.
                    self.forget(client);
                }
                Event::Detach { client } => {
                    let msg = ToIo::Detach { client };
                    self.pool.deliver(&mut self.peers, &self.owner, client, msg);
                }
                Event::Unblocked { client } => {
                    let msg = ToIo::Unblocked { client };
                    self.pool.deliver(&mut self.peers, &self.owner, client, msg);
                }
                Event::IoThreads { n } => self.set_io_threads(n),
                Event::Shutdown => {
                    if !self.shutting_down {
                        self.shutting_down = true;
                        for p in &mut self.peers {
                            p.send(ToIo::Shutdown);
                        }
                    }
                }
            }
        }
    }

    /// Something to take in, or to hand out once a ring has room.
    fn has_input(&mut self) -> bool {
        !self.script_wait.is_empty()
            || self
                .peers
                .iter_mut()
                .any(|p| !p.rx.is_empty() || p.tx.held_back())
    }

    /// Background work (a replication link's commands) is waiting now.
    fn background_ready(&self) -> bool {
        self.engine.background_wait().is_some_and(|d| d.is_zero())
    }

    /// How long the execution thread may sleep: until cron or a blocked
    /// client's timeout is due.
    fn sleep_time(&self) -> Duration {
        self.timers.wait(&self.engine, MAX_SLEEP)
    }

    fn report_busy(&mut self, now: Instant) {
        let total = now.saturating_duration_since(self.last_report);
        if total < Duration::from_millis(100) {
            return;
        }
        let net = self.engine.net_stats_mut();
        net.exec_busy_ns += self.busy_since_report.as_nanos() as u64;
        net.exec_total_ns += total.as_nanos() as u64;
        net.exec_batches = self.batches;
        net.exec_batches_on_io = self.batches_on_io;
        net.exec_sleeps = self.sleeps;
        net.exec_awake_cpu_ns = self.awake_cpu_ns;
        self.busy_since_report = Duration::ZERO;
        self.last_report = now;
    }
}

/// One awake interval of the execution thread in this many is timed.
const AWAKE_SAMPLE_EVERY: u64 = 8;

/// Counts wake-ups down: true on every `AWAKE_SAMPLE_EVERY`-th.
fn awake_sampled(countdown: &mut u32) -> bool {
    if *countdown == 0 {
        *countdown = AWAKE_SAMPLE_EVERY as u32 - 1;
        true
    } else {
        *countdown -= 1;
        false
    }
}

/// CPU time this thread has used, in ns: a system call (0.1–0.3 µs on
/// this VM), so only sampled.
fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into `t`, which is valid
    // for writes; this clock always exists for the calling thread.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// CPUs this thread may run on (its affinity mask: `taskset -c 0` gives 1).
fn allowed_cpus() -> usize {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity
    // writes at most size_of::<cpu_set_t>() bytes into it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return 1;
        }
        libc::CPU_COUNT(&set) as usize
    }
}
