//! The IO-thread pool, as the execution thread manages it: how many IO
//! threads exist (`io-threads`, changed live by CONFIG SET), how many take
//! connections (`io-threads-adaptive`: as many as the load needs), and
//! moving connections between them.
//!
//! ```text
//!  peers:  [0 .. active)        take new connections, least-loaded first
//!          [active .. target)   parked: no clients, asleep (adaptive)
//!          [target .. len)      retiring: clients moving away, then Retire
//! ```
//!
//! Every `ADAPT_PERIOD` the pool reads each IO thread's busy time (the
//! wall time it spent outside its wait). If an active thread was busier
//! than `io-threads-adaptive-busy-pct`, one more thread is activated and
//! takes a fair share of the clients; if the active threads' work would
//! have fitted in one thread fewer at a third of that each, for
//! `LOW_PERIODS` periods in a row, the last active thread hands its
//! clients to the others and parks. So a few
//! clients keep one IO thread busy (running the execution step itself while
//! the execution thread sleeps, with `io-threads-idle-exec`) and the rest
//! asleep, and load spreads as it grows.
//!
//! CONFIG SET io-threads 1 ends threaded mode the same way: every IO
//! thread retires, its connections "move" to this thread (`HOME`), which
//! keeps them, applying the output and events the engine produces for
//! them, until every IO thread has exited and io-thread-1 has given the
//! listeners back; then inline mode takes over.
//!
//! A move never loses a byte: the old thread lets go of the socket only
//! when no request of the connection is with the execution thread and no
//! send is in the kernel, and hands over the whole `Connection` (unread
//! input, unsent output, blocked state). Output the engine produces for
//! the client meanwhile is held here and follows the `Adopt`.

use super::{ExecLoop, Peer};
use crate::connection::{Closing, Connection};
use crate::handoff::{Arrival, Outlet, ToIo};
use crate::io_thread::IoLink;
use crate::listener::Listener;
use engine::{
    ClientId, IO_THREAD_ACTIVE, IO_THREAD_PARKED, IO_THREAD_RETIRING, IoThreadStats, log,
};
use ringkv_rings::doorbell::Doorbell;
use ringkv_rings::spsc;
use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const ADAPT_PERIOD: Duration = Duration::from_millis(250);
/// The active threads' work fits in one fewer at a third of the busy
/// threshold each for this many periods in a row: park one.
const LOW_PERIODS: u32 = 4;
/// The owner of a connection brought to the execution thread for inline
/// mode (not an IO thread's index).
const HOME: usize = usize::MAX;

#[derive(Default)]
pub(super) struct Pool {
    /// IO threads `io-threads` asks for (`io-threads` - 1).
    target: usize,
    /// Of those, how many take connections.
    active: usize,
    /// Clients on their way between IO threads.
    moving: HashMap<u64, Move>,
    checked_at: Option<Instant>,
    low_periods: u32,
    /// A CONFIG SET io-threads (its value) that waits for retired threads
    /// to exit.
    deferred: Option<usize>,
    /// Retired threads, to join.
    ended: Vec<JoinHandle<super::IoThreadEnd>>,
    /// Going back to inline mode (CONFIG SET io-threads 1): every IO
    /// thread retires and every connection comes `home`.
    homing: bool,
    home: HashMap<u64, Box<Connection>>,
}

struct Move {
    from: usize,
    to: usize,
    /// Output and events for the client, sent after its `Adopt`.
    held: Vec<ToIo>,
}

impl Pool {
    /// Send `msg` to the thread that owns `client`, or hold it while the
    /// client moves.
    pub(super) fn deliver(
        &mut self,
        peers: &mut [Peer],
        owner: &HashMap<u64, usize>,
        client: ClientId,
        msg: ToIo,
    ) {
        if let Some(m) = self.moving.get_mut(&client.0) {
            m.held.push(msg);
        } else if let Some(&t) = owner.get(&client.0) {
            match peers.get_mut(t) {
                Some(p) => p.send(msg),
                None => {
                    if let Some(c) = self.home.get_mut(&client.0) {
                        apply(c, msg);
                    }
                }
            }
        }
    }

    /// Threads that have retired, for the execution thread to join.
    pub(super) fn take_ended(&mut self) -> Vec<JoinHandle<super::IoThreadEnd>> {
        std::mem::take(&mut self.ended)
    }

    /// On the way back to inline mode.
    pub(super) fn homing(&self) -> bool {
        self.homing
    }

    /// Back to inline mode: every IO thread has exited (`io_threads` is
    /// how many are left), so every connection is home and the listeners
    /// are back.
    pub(super) fn homed(&self, io_threads: usize) -> bool {
        self.homing && io_threads == 0 && self.moving.is_empty()
    }

    /// The connections brought home, for inline mode.
    pub(super) fn take_home(&mut self) -> Vec<Box<Connection>> {
        self.home.drain().map(|(_, c)| c).collect()
    }

    /// A client is gone: if it was moving, the thread it was counted on.
    pub(super) fn forget_move(&mut self, client: ClientId) -> Option<usize> {
        self.moving.remove(&client.0).map(|m| m.to)
    }
}

/// What an IO thread would do with a message for a connection it owns,
/// done to a connection the execution thread holds for inline mode.
fn apply(c: &mut Connection, msg: ToIo) {
    match msg {
        ToIo::Output { bytes, .. } => c.push_output(&bytes),
        ToIo::Unblocked { .. } => c.blocked = false,
        ToIo::Close { flush, .. } => {
            c.close_input();
            c.close(Closing::for_event(flush));
        }
        // Between modes the socket cannot change hands: the replica
        // reconnects (its feed gives up waiting for it).
        ToIo::Detach { .. } => {
            c.close_input();
            c.close(Closing::Now);
        }
        ToIo::Registered(r) => {
            c.limits = Some((r.limits, r.qbuf_limit));
            c.meter = r.meter;
        }
        // Only ever sent for sockets an IO thread owns.
        ToIo::Adopt { .. }
        | ToIo::Refuse { .. }
        | ToIo::Replies { .. }
        | ToIo::Unrun { .. }
        | ToIo::Release { .. }
        | ToIo::Retire
        | ToIo::Shutdown => {}
    }
}

impl ExecLoop {
    /// Start one more IO thread (its rings, doorbell and counters) at the
    /// end of the pool. The receiver says whether its event loop came up.
    /// `listeners` are handed over only once the thread exists: when it
    /// cannot be started they stay with the caller, open.
    pub(super) fn spawn_io_thread(
        &mut self,
        listeners: &mut Vec<Listener>,
    ) -> io::Result<mpsc::Receiver<Result<(), String>>> {
        let index = self.peers.len();
        let ring_size = self.engine.config().io_threads_ring_size;
        let (to_exec, from_io) = spsc::channel(ring_size);
        let (to_io, from_exec) = spsc::channel(ring_size);
        let bell = Arc::new(Doorbell::new()?);
        let stats = Arc::new(IoThreadStats::default());
        let mut link = IoLink::new(
            Outlet::new(to_exec),
            from_exec,
            self.bell.clone(),
            bell.clone(),
            stats.clone(),
            crate::io_thread::FromEngine::of(&self.engine),
        );
        if self.engine.config().io_threads_idle_exec
            && let Some(me) = self.me.upgrade()
        {
            link.set_exec(me);
        }
        let (ready_tx, ready_rx) = mpsc::channel();
        let (give, take) = mpsc::channel::<Vec<Listener>>();
        let (backend, stop) = (self.backend, self.stop);
        let handle = std::thread::Builder::new()
            .name(format!("io-thread-{}", index + 1))
            .spawn(move || {
                engine::affinity::pin(engine::affinity::Role::Server);
                let listeners = take.recv().unwrap_or_default();
                super::io_thread_main(link, listeners, backend, stop, ready_tx)
            })?;
        // The thread waits for them before anything else, so this cannot
        // find it gone.
        let _ = give.send(std::mem::take(listeners));
        self.engine.net_stats_mut().io_threads.push(stats.clone());
        self.peers.push(Peer {
            rx: from_io,
            tx: Outlet::new(to_io),
            bell,
            clients: 0,
            exited: false,
            stats,
            busy_seen: 0,
            retiring: false,
            retire_sent: false,
            handle: Some(handle),
        });
        Ok(ready_rx)
    }

    /// The first `n` IO threads are up.
    pub(super) fn start_pool(&mut self, n: usize) {
        self.pool.target = n;
        self.pool.active = if self.engine.config().io_threads_adaptive {
            1
        } else {
            n
        };
        self.publish_pool();
    }

    fn takes_clients(&self, t: usize) -> bool {
        let p = &self.peers[t];
        t < self.pool.active && !p.retiring && !p.exited
    }

    /// Where a new or moving connection goes: the active IO thread with the
    /// fewest clients (the lowest-numbered on a tie).
    pub(super) fn place(&self) -> usize {
        let mut best: Option<usize> = None;
        for t in 0..self.peers.len() {
            if self.takes_clients(t)
                && best.is_none_or(|b| self.peers[t].clients < self.peers[b].clients)
            {
                best = Some(t);
            }
        }
        best.unwrap_or(0)
    }

    /// Ask the thread that owns `client` to let go of it, for `to` (an IO
    /// thread, or `HOME`).
    fn move_client(&mut self, client: u64, to: usize) {
        let Some(&from) = self.owner.get(&client) else {
            return;
        };
        if from == to || from == HOME || self.pool.moving.contains_key(&client) {
            return;
        }
        self.peers[from].clients = self.peers[from].clients.saturating_sub(1);
        if let Some(p) = self.peers.get_mut(to) {
            p.clients += 1;
        }
        self.pool.moving.insert(
            client,
            Move {
                from,
                to,
                held: Vec::new(),
            },
        );
        self.peers[from].send(ToIo::Release {
            client: ClientId(client),
        });
    }

    /// A thread let go of a moving connection: deal it to its new thread,
    /// with whatever was held for it.
    pub(super) fn released(&mut self, thread: usize, conn: Box<Connection>) {
        let client = conn.client;
        let Some(m) = self.pool.moving.remove(&client.0) else {
            // The client was killed on the way: close the socket where it
            // came from.
            let fd = conn.fd;
            drop(conn);
            self.refuse(thread, fd, Vec::new());
            return;
        };
        if self.pool.homing {
            // Maybe a move between IO threads begun before: it comes home
            // all the same.
            if let Some(p) = self.peers.get_mut(m.to) {
                p.clients = p.clients.saturating_sub(1);
            }
            self.bring_home(conn, m.held);
            return;
        }
        let mut to = m.to;
        if !self.takes_clients(to) {
            // Parked or retiring since the move began.
            self.peers[to].clients = self.peers[to].clients.saturating_sub(1);
            to = self.place();
            self.peers[to].clients += 1;
        }
        self.engine.net_stats_mut().io_thread_moves += 1;
        self.adopt(to, client, Arrival::Moved(conn));
        for msg in m.held {
            self.peers[to].send(msg);
        }
    }

    /// Close a socket an IO thread handed over, with `reply` sent first
    /// (best effort): by that thread, unless it has been told to end (it
    /// may be gone before the message arrives), then here.
    pub(super) fn refuse(&mut self, thread: usize, fd: std::os::fd::RawFd, reply: Vec<u8>) {
        let p = &mut self.peers[thread];
        if p.retire_sent || p.exited {
            crate::listener::send_best_effort(fd, &reply);
            crate::listener::close_fd(fd);
        } else {
            p.send(ToIo::Refuse { fd, reply });
        }
    }

    /// Keep a connection here for inline mode, with the output and events
    /// held for it on the way.
    fn bring_home(&mut self, mut conn: Box<Connection>, held: Vec<ToIo>) {
        let client = conn.client;
        let unreported = std::mem::take(&mut conn.unreported_in);
        self.engine.note_client_input(client, unreported);
        for msg in held {
            apply(&mut conn, msg);
        }
        self.owner.insert(client.0, HOME);
        self.pool.home.insert(client.0, conn);
    }

    /// A connection inline mode handed over when threaded mode could not
    /// come up: it stays here, for inline mode again.
    pub(super) fn keep_home(&mut self, conn: Box<Connection>) {
        self.bring_home(conn, Vec::new());
    }

    /// A socket accepted while going back to inline mode stays here.
    pub(super) fn home_new(&mut self, fd: std::os::fd::RawFd, client: ClientId) {
        crate::listener::tune_client_socket(fd, self.engine.tcp_keepalive_s());
        let meter = self.engine.client_meter(client);
        let conn = Connection::new(fd, client, 0, meter);
        self.bring_home(Box::new(conn), Vec::new());
    }

    /// A connection inline mode handed over (CONFIG SET io-threads from 1
    /// to more): deal it to an IO thread, as a moved one.
    pub(super) fn take_over(&mut self, conn: Box<Connection>) {
        let t = self.place();
        self.peers[t].clients += 1;
        let client = conn.client;
        self.adopt(t, client, Arrival::Moved(conn));
    }

    pub(super) fn exited(&mut self, thread: usize) {
        let p = &mut self.peers[thread];
        p.exited = true;
        if !self.shutting_down && !p.retiring {
            // Only a thread started by CONFIG SET can fail this way (its
            // event loop did not come up); the others are checked at start.
            log::warning(&format!("IO thread {} exited", thread + 1));
            p.retiring = true;
            p.retire_sent = true;
            if thread + 1 == self.peers.len() {
                // Out of the count, so it is dropped from the pool.
                self.pool.target = self.pool.target.min(thread).max(1);
                self.pool.active = self.pool.active.min(self.pool.target);
            }
        }
    }

    /// Move clients onto thread `t` until it holds its fair share of the
    /// active threads' clients.
    fn spread_to(&mut self, t: usize) {
        let active: Vec<usize> = (0..self.peers.len())
            .filter(|&i| self.takes_clients(i))
            .collect();
        if active.is_empty() {
            return;
        }
        let total: usize = active.iter().map(|&i| self.peers[i].clients).sum();
        let share = total / active.len();
        let mut counts: Vec<usize> = self.peers.iter().map(|p| p.clients).collect();
        let mut picked = Vec::new();
        for (&client, &from) in &self.owner {
            if counts[t] >= share {
                break;
            }
            if from != t && counts[from] > share && !self.pool.moving.contains_key(&client) {
                counts[from] -= 1;
                counts[t] += 1;
                picked.push(client);
            }
        }
        for client in picked {
            self.move_client(client, t);
        }
    }

    /// Every IO thread takes clients (`io-threads-adaptive no`); the ones
    /// that did not take a fair share each.
    fn activate_all(&mut self) {
        let before = self.pool.active;
        self.pool.active = self.pool.target;
        for t in before..self.pool.target {
            self.spread_to(t);
        }
    }

    /// Move every client of thread `t` to the threads taking clients.
    fn drain_thread(&mut self, t: usize) {
        let mine: Vec<u64> = self
            .owner
            .iter()
            .filter(|&(c, &o)| o == t && !self.pool.moving.contains_key(c))
            .map(|(&c, _)| c)
            .collect();
        for client in mine {
            let to = self.place();
            self.move_client(client, to);
        }
    }

    /// CONFIG SET io-threads `n` (the main thread counts as one).
    pub(super) fn set_io_threads(&mut self, n: usize) {
        if self.shutting_down || self.pool.homing {
            // Once home, the mode loop reads io-threads again.
            return;
        }
        if self.peers.iter().any(|p| p.retire_sent) {
            // Wait until the threads told to end have ended.
            self.pool.deferred = Some(n);
            return;
        }
        if n <= 1 {
            self.go_inline();
            return;
        }
        let want = n - 1;
        let adaptive = self.engine.config().io_threads_adaptive;
        if want > self.pool.target {
            for p in self.peers.iter_mut().take(want) {
                p.retiring = false;
            }
            while self.peers.len() < want {
                if let Err(e) = self.spawn_io_thread(&mut Vec::new()) {
                    log::warning(&format!("Could not start an IO thread: {e}"));
                    break;
                }
            }
            self.pool.target = want.min(self.peers.len());
            if !adaptive {
                self.activate_all();
            }
        } else if want < self.pool.target {
            self.pool.target = want;
            self.pool.active = self.pool.active.min(want);
            for t in want..self.peers.len() {
                self.peers[t].retiring = true;
            }
            for t in want..self.peers.len() {
                self.drain_thread(t);
            }
        }
        log::notice(&format!("io-threads set to {n}"));
        self.publish_pool();
    }

    /// CONFIG SET io-threads 1: every IO thread retires once its clients
    /// have come home; io-thread-1 gives the listeners back as it ends
    /// (accepting until then: what it accepts meanwhile stays here too).
    fn go_inline(&mut self) {
        self.pool.homing = true;
        self.pool.target = 0;
        self.pool.active = 0;
        self.pool.deferred = None;
        for p in &mut self.peers {
            p.retiring = true;
        }
        let clients: Vec<u64> = self.owner.keys().copied().collect();
        for client in clients {
            // One already moving between IO threads comes home on arrival.
            self.move_client(client, HOME);
        }
        log::notice("io-threads set to 1: IO threads retiring, their connections coming back");
        self.publish_pool();
    }

    /// Each step: retire what has emptied, and every `ADAPT_PERIOD` match
    /// the active threads to the load.
    pub(super) fn tend_pool(&mut self, now: Instant) {
        if self.peers.len() > self.pool.target {
            self.reap_retired();
        }
        let Some(at) = self.pool.checked_at else {
            self.pool.checked_at = Some(now);
            return;
        };
        let dt = now.saturating_duration_since(at);
        if dt < ADAPT_PERIOD || self.shutting_down {
            return;
        }
        self.pool.checked_at = Some(now);
        let mut loads = Vec::with_capacity(self.peers.len());
        for p in &mut self.peers {
            let busy = p.stats.busy_ns.load(Relaxed);
            loads.push(busy.saturating_sub(p.busy_seen) as f64 / dt.as_nanos() as f64);
            p.busy_seen = busy;
        }
        let active = self.pool.active;
        if !self.engine.config().io_threads_adaptive {
            if active < self.pool.target {
                self.activate_all();
                self.publish_pool();
            }
            return;
        }
        let high = f64::from(self.engine.config().io_threads_adaptive_busy_pct) / 100.0;
        let busiest = loads[..active].iter().copied().fold(0.0, f64::max);
        let total: f64 = loads[..active].iter().sum();
        if busiest > high && active < self.pool.target {
            self.pool.low_periods = 0;
            self.pool.active += 1;
            self.spread_to(active);
            self.publish_pool();
        } else if active > 1 && total < (active - 1) as f64 * high / 3.0 {
            self.pool.low_periods += 1;
            if self.pool.low_periods >= LOW_PERIODS {
                self.pool.low_periods = 0;
                self.pool.active -= 1;
                self.drain_thread(active - 1);
                self.publish_pool();
            }
        } else {
            self.pool.low_periods = 0;
        }
    }

    /// Tell emptied retiring threads to end; drop the ended ones from the
    /// end of the pool.
    fn reap_retired(&mut self) {
        for t in self.pool.target..self.peers.len() {
            let busy = self.pool.moving.values().any(|m| m.from == t || m.to == t);
            let p = &mut self.peers[t];
            if p.retiring && !p.retire_sent && p.clients == 0 && !busy {
                p.retire_sent = true;
                p.send(ToIo::Retire);
            }
        }
        let mut popped = false;
        while self.peers.len() > self.pool.target && self.peers.last().is_some_and(|p| p.exited) {
            if let Some(mut p) = self.peers.pop() {
                // Joined by the execution thread: this may run on an IO
                // thread (idle hand-off), even on the one that ended.
                self.pool.ended.extend(p.handle.take());
                self.engine.net_stats_mut().io_threads.pop();
                popped = true;
            }
        }
        if popped && self.peers.iter().all(|p| !p.retire_sent) {
            if let Some(n) = self.pool.deferred.take() {
                self.set_io_threads(n);
            }
            self.publish_pool();
        }
        if self.pool.homed(self.peers.len()) {
            // An IO thread running the step may have got here while the
            // execution thread sleeps: it has the switch to finish.
            self.bell.ring();
        }
    }

    /// What INFO shows of the pool.
    fn publish_pool(&mut self) {
        for t in 0..self.peers.len() {
            let state = if self.peers[t].retiring {
                IO_THREAD_RETIRING
            } else if self.takes_clients(t) {
                IO_THREAD_ACTIVE
            } else {
                IO_THREAD_PARKED
            };
            self.peers[t].stats.state.store(state, Relaxed);
        }
        let active = (0..self.peers.len())
            .filter(|&t| self.takes_clients(t))
            .count();
        self.engine.net_stats_mut().io_threads_active = active;
    }
}
