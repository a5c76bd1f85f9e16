//! The execution half of ringkv: Sessions, the command table, the keyspace
//! and everything a command can see. Deterministic and socket-free: a test
//! feeds parsed commands in and reads reply bytes out.
//!
//! ```text
//!   IO layer (net)                        Engine (this crate)
//!   ─────────────                         ───────────────────
//!   Connection ── connect(ClientInfo) ──► Session created, ClientId returned
//!   parsed batch ─ execute_batch(jobs) ─► prefetch all keys, run in order,
//!                                         append replies to each job's `out`
//!              ◄─ drain_events() ──────── kill client N, shut down, …
//!   close ─────── disconnect(id) ───────► Session dropped
//!   timer ─────── cron() ───────────────► active expiry, idle timeouts
//! ```
//!
//! The engine must not touch sockets, file descriptors or threads. It may
//! read the clock (tests pin it with [`Engine::pin_clock`]), read procfs and
//! getrusage for INFO, sleep for DEBUG SLEEP, change the process directory
//! for CONFIG SET dir, and, for CONFIG REWRITE only, write the config file.
//!
//! # Contract with the IO layer
//!
//! * [`Engine::connect`] on accept; on `Err(bytes)` write the bytes
//!   (best effort) and close without calling `disconnect`.
//! * Parse with the limits of [`Engine::client_limits`] (tighter while the
//!   client still has to AUTH) and cap the read buffer at its query-buffer
//!   cap (1 MB while the client has to AUTH); over it, call [`Engine::note_query_buffer_limit`] and close. On a
//!   protocol error, send [`resp::ProtocolError::to_resp`], call
//!   [`Engine::note_protocol_error`], close.
//! * Each loop iteration: one [`Job`] per client with complete commands,
//!   all in one [`Engine::execute_batch`] call. Send each job's `out`; if
//!   `close_after_reply` is set, close once it is sent, and do not feed that
//!   client's remaining input.
//! * Whenever a connection's output grows, check its unsent bytes against
//!   [`Engine::output_limits`] for its class (from each job's
//!   [`Job::outcome`]; normal until then); over it, call
//!   [`Engine::note_output_buffer_limit`] and close at once. Keep
//!   [`Engine::client_meter`] at the unsent byte count (CLIENT LIST `omem`)
//!   and at the unparsed input after each read and batch (`qbuf`).
//! * Then [`Engine::drain_events`]: `Close` (flush or drop pending output,
//!   then close and `disconnect`), `Shutdown` (flush, stop).
//! * [`Engine::cron`] `hz` times a second ([`Engine::hz`], live).
//! * [`Engine::disconnect`] for every connection that goes away.
//! * Keep [`NetStats`] current through [`Engine::net_stats_mut`].
//! * Limits are read live: `maxclients` (enforced by `connect`), `timeout`
//!   (enforced by `cron`), `client-query-buffer-limit`,
//!   `proto-max-bulk-len`, `tcp-keepalive` ([`Engine::tcp_keepalive_s`]).

pub mod acl;
pub mod affinity;
pub mod aof;
pub mod aof_replay;
pub mod batch;
pub mod blocking;
pub mod busy;
pub mod client_evict;
pub mod cmd;
pub mod command;
pub mod commandlog;
pub mod compat;
pub mod config;
pub mod defrag;
pub mod digest;
pub mod effects;
pub mod evict;
pub mod expiry_mode;
pub mod geohash;
pub mod getkeys;
pub mod glob;
pub mod info;
pub mod latency_monitor;
pub mod latency_stats;
pub mod lazyfree;
pub mod loading;
pub mod log;
pub mod memory;
pub mod migrate;
pub mod monitor;
pub mod num;
mod observe;
pub mod output;
pub mod pause;
pub mod persist;
pub mod proc_title;
pub mod propagation_error;
pub mod pubsub;
pub mod query_sample;
pub mod redact;
pub mod replication;
pub mod server;
pub mod session;
pub mod shutdown;
pub mod snapshot;
pub mod supervisor;
pub mod table;
pub mod tracking;
pub mod wake;
pub mod watch;

pub use batch::{ArgvRef, CommandHint, CommandsView, Job, NameCache, Outcome};
pub use config::{Config, ConfigError, IoUringMode, MaxmemoryPolicy, OutputLimit};
pub use output::{ClientMeter, OutputClass, OutputLimits};
pub use query_sample::QuerySample;
pub use server::{
    AllocatorOps, FileLimit, MemoryProbe, MemoryStats, OomScore, Server, SetOomScore,
    UsedMemoryModel, UsedMemoryProbe,
};
pub use session::Session;

use resp::{Mark, ReplyBuf, ReplyWriter};
use server::CmdStat;
use session::ReplyMode;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use table::table;

/// Identifies a client for its whole life; never reused (CLIENT ID).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientId(pub u64);

/// What the IO layer knows about a new connection.
#[derive(Clone, Debug)]
pub struct ClientInfo {
    pub addr: ClientAddr,
    pub fd: i32,
}

impl ClientInfo {
    pub fn tcp(peer: SocketAddr, local: SocketAddr, fd: i32) -> ClientInfo {
        ClientInfo {
            addr: ClientAddr::Tcp { peer, local },
            fd,
        }
    }
}

/// Where a connection came in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientAddr {
    Tcp {
        peer: SocketAddr,
        local: SocketAddr,
    },
    /// Through the unix socket bound at this path (`unixsocket`): Valkey
    /// shows the path as both ends' address, and counts the client as
    /// local (protected mode lets it in).
    Unix(std::sync::Arc<str>),
}

impl ClientAddr {
    /// Loopback or the unix socket: what protected mode lets in.
    pub fn is_local(&self) -> bool {
        match self {
            ClientAddr::Tcp { peer, .. } => is_local(peer.ip()),
            ClientAddr::Unix(_) => true,
        }
    }
}

impl std::fmt::Display for ClientAddr {
    /// As Valkey's "Accepted ..." log line names the client.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientAddr::Tcp { peer, .. } => write!(f, "{peer}"),
            ClientAddr::Unix(path) => write!(f, "connection to {path}"),
        }
    }
}

/// Something the engine asks the IO layer to do, outside any one reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Close this client (CLIENT KILL, idle timeout). Pending replies are
    /// flushed first when `flush` is true.
    Close { client: ClientId, flush: bool },
    /// Stop the server (SHUTDOWN, or a signal relayed through
    /// [`Engine::shutdown_requested`]). Replies are flushed first.
    Shutdown,
    /// A client that blocked ([`Job::blocked`]) may run commands again; its
    /// unblocking reply comes through [`Engine::drain_output`] first.
    Unblocked { client: ClientId },
    /// This client became a replica (PSYNC): stop reading and writing its
    /// socket and hand it, with its unsent output and unparsed input, to
    /// the replication IO (the feed registered for it).
    Detach { client: ClientId },
    /// CONFIG SET io-threads changed the number of threads doing network
    /// IO (the main thread counts as one): the IO layer starts or retires
    /// IO threads, or switches between inline and threaded mode, after the
    /// batch's replies.
    IoThreads { n: usize },
}

/// Everything the IO layer reports for INFO (stats the engine cannot see).
#[derive(Clone, Debug, Default)]
pub struct NetStats {
    pub total_net_input_bytes: u64,
    pub total_net_output_bytes: u64,
    pub rejected_connections: u64,
    /// "io_uring" or "epoll".
    pub backend: &'static str,
    pub tcp_port: u16,
    /// One entry per IO thread (empty in inline mode): counters the IO
    /// threads keep themselves, summed into INFO when it is asked for.
    pub io_threads: Vec<std::sync::Arc<IoThreadStats>>,
    /// Threaded mode: nanoseconds the execution thread spent working and
    /// in all, for its busy fraction in INFO.
    pub exec_busy_ns: u64,
    pub exec_total_ns: u64,
    /// Threaded mode: batches the execution thread ran, and times it slept.
    pub exec_batches: u64,
    /// Of those, the batches an IO thread ran while the execution thread slept.
    pub exec_batches_on_io: u64,
    pub exec_sleeps: u64,
    /// Threaded mode: CPU time of the execution thread while awake, i.e.
    /// its own CPU time less what going to sleep and waking up cost it
    /// (estimated from one awake interval in 8). A busy execution thread
    /// never sleeps, so per request this is what it costs when it is the
    /// bottleneck (docs/BENCHMARKS.md §7.2).
    pub exec_awake_cpu_ns: u64,
    /// Threaded mode: IO threads currently taking connections (the others
    /// are parked by `io-threads-adaptive`, or retiring).
    pub io_threads_active: usize,
    /// Threaded mode: connections moved from one IO thread to another.
    pub io_thread_moves: u64,
    /// The sums of the IO threads' counters at the last CONFIG RESETSTAT
    /// ([`NetStats::io_sum`] counts from there).
    pub io_at_reset: std::sync::Arc<IoThreadStats>,
}

/// Counters of one IO thread. Each has a single writer (its IO thread,
/// Relaxed stores); INFO reads them from the execution thread.
#[derive(Debug, Default)]
pub struct IoThreadStats {
    pub clients: std::sync::atomic::AtomicU64,
    pub reads: std::sync::atomic::AtomicU64,
    pub writes: std::sync::atomic::AtomicU64,
    pub commands: std::sync::atomic::AtomicU64,
    pub bytes_in: std::sync::atomic::AtomicU64,
    pub bytes_out: std::sync::atomic::AtomicU64,
    /// Connections this thread accepted, and waits for IO it made.
    pub accepts: std::sync::atomic::AtomicU64,
    pub polls: std::sync::atomic::AtomicU64,
    /// Nanoseconds spent working (not waiting for IO or the doorbell).
    pub busy_ns: std::sync::atomic::AtomicU64,
    /// Written by the execution thread: [`IO_THREAD_ACTIVE`],
    /// [`IO_THREAD_PARKED`] or [`IO_THREAD_RETIRING`].
    pub state: std::sync::atomic::AtomicU8,
}

/// [`IoThreadStats::state`]: takes new connections.
pub const IO_THREAD_ACTIVE: u8 = 0;
/// [`IoThreadStats::state`]: kept idle by `io-threads-adaptive` (no clients).
pub const IO_THREAD_PARKED: u8 = 1;
/// [`IoThreadStats::state`]: removed by CONFIG SET io-threads, its
/// connections moving away.
pub const IO_THREAD_RETIRING: u8 = 2;

impl NetStats {
    /// Sum one counter over the IO threads.
    pub fn io_sum(&self, f: impl Fn(&IoThreadStats) -> &AtomicU64) -> u64 {
        self.io_sum_since_start(&f)
            .saturating_sub(f(&self.io_at_reset).load(Ordering::Relaxed))
    }

    fn io_sum_since_start(&self, f: &impl Fn(&IoThreadStats) -> &AtomicU64) -> u64 {
        self.io_threads
            .iter()
            .map(|t| f(t).load(Ordering::Relaxed))
            .sum()
    }

    /// CONFIG RESETSTAT: [`NetStats::io_sum`] counts from now.
    pub fn reset_io_sums(&mut self) {
        let base = IoThreadStats::default();
        let counters: [fn(&IoThreadStats) -> &AtomicU64; 6] = [
            |t| &t.reads,
            |t| &t.writes,
            |t| &t.bytes_in,
            |t| &t.bytes_out,
            |t| &t.accepts,
            |t| &t.polls,
        ];
        for f in counters {
            f(&base).store(self.io_sum_since_start(&f), Ordering::Relaxed);
        }
        self.io_at_reset = std::sync::Arc::new(base);
    }
}

/// Valkey's reply to a connection over `maxclients`.
pub const MAXCLIENTS_ERR: &[u8] = b"-ERR max number of clients reached\r\n";

/// Valkey 8's reply to a non-loopback client in protected mode.
pub const PROTECTED_MODE_DENIED: &[u8] = b"-DENIED Running in protected mode because protected \
mode is enabled and no password is set for the default user. In this mode connections are only \
accepted from the loopback interface. If you want to connect from external computers, you may \
adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG \
SET protected-mode no' from the loopback interface by connecting from the same host the server \
is running, however MAKE SURE it's not publicly accessible from internet if you do so. Use CONFIG \
REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode \
by editing the configuration file, and setting the protected mode option to 'no', and then \
restarting the server. 3) If you started the server manually just for testing, restart it with \
the '--protected-mode no' option. 4) Set up an authentication password for the default user. \
NOTE: You only need to do one of the above things in order for the server to start accepting \
connections from the outside.\r\n";

/// The execution state of the whole server: keyspace, sessions, config, stats.
pub struct Engine {
    srv: Server,
    /// Per batch and command, what pass 1 found. Kept to reuse its
    /// allocation.
    found: Vec<Found>,
    /// Per batch and database, the hashes of the commands' first keys.
    hashes: Vec<Vec<u64>>,
}

const UNKNOWN: u32 = CommandHint::UNKNOWN;

/// Prefetch the keys of `window` (grouped per database): buckets, then
/// entries (`store::Db::prefetch_batch`), then the values' bytes
/// (`store::Db::prefetch_values`).
fn prefetch_window(srv: &mut Server, hashes: &mut [Vec<u64>], window: &[Found]) {
    let mut keys = 0;
    for f in window {
        if f.hint.key_hash != 0
            && let Some(h) = hashes.get_mut(f.db as usize)
        {
            h.push(f.hint.key_hash);
            keys += 1;
        }
    }
    if keys == 0 {
        return;
    }
    srv.stats.prefetch_batches += 1;
    srv.stats.prefetch_entries += keys;
    for (db, h) in hashes.iter().enumerate() {
        if !h.is_empty() {
            srv.keyspace.dbs[db].prefetch_batch(h);
        }
    }
    for (db, h) in hashes.iter_mut().enumerate() {
        if !h.is_empty() {
            srv.keyspace.dbs[db].prefetch_values(h);
            h.clear();
        }
    }
}

/// Command durations for INFO commandstats, one clock read per run of the
/// same command rather than per command: the time since the run began is
/// charged to its command when a different one starts (or the batch ends).
/// A pipeline of GETs reads the clock once; the sum per command is the
/// same as timing each call, gaps between commands included as before.
struct CmdTimer {
    prev: Instant,
    /// Command-table index the time since `prev` belongs to; `None`:
    /// nobody's (rejected or queued commands, as Valkey does not time them).
    run: Option<usize>,
    /// Nanoseconds charged below the microsecond, carried so that many
    /// short calls add up.
    rem_ns: u64,
    /// Calls of the run's command since the time was last charged: the
    /// charge is recorded as that many calls of equal length (INFO
    /// latencystats).
    calls: u64,
    /// `prev` was read when the previous command of this client finished,
    /// and only that command's bookkeeping ran since: a command timed on
    /// its own (SLOWLOG) may start from it instead of reading the clock
    /// again. A pipeline of SETs (not `fast`, so timed one by one) then
    /// reads the clock once per SET, not twice. Cleared by anything
    /// that does more between two commands (a new job, a prefetch
    /// window, serving blocked clients, feeding monitors, logging).
    chained: bool,
}

impl CmdTimer {
    fn new() -> CmdTimer {
        CmdTimer {
            prev: Instant::now(),
            run: None,
            rem_ns: 0,
            calls: 0,
            chained: false,
        }
    }

    /// One more call of the run's command has finished.
    #[inline]
    fn call_done(&mut self) {
        self.calls += 1;
    }

    /// `ns` since the last read belong to the run's command: its
    /// commandstats time, and its calls since the last charge in its
    /// latency histogram.
    #[inline]
    fn charge(&mut self, srv: &mut Server, ns: u64) {
        let Some(i) = self.run else {
            return;
        };
        let total = ns + self.rem_ns;
        srv.stats.eventloop_cmd_ns += ns;
        srv.stats.commands[i].usec += total / 1000;
        self.rem_ns = total % 1000;
        let calls = std::mem::take(&mut self.calls);
        if let Some(each) = ns.checked_div(calls) {
            srv.record_latency(i, each, calls);
        }
    }

    /// Charge the time since the last read to the current command and
    /// start again from now; the nanoseconds since the last read. Around
    /// one command, it times that command alone (SLOWLOG).
    fn split(&mut self, srv: &mut Server) -> u64 {
        let t = Instant::now();
        let ns = t.duration_since(self.prev).as_nanos() as u64;
        self.charge(srv, ns);
        self.prev = t;
        ns
    }

    /// The time from now on belongs to `next`. True if that read the
    /// clock (a different command than the run's): `prev` is now.
    #[inline]
    fn switch(&mut self, srv: &mut Server, next: Option<usize>) -> bool {
        if next.is_some() && next == self.run {
            return false;
        }
        let t = Instant::now();
        self.charge(srv, t.duration_since(self.prev).as_nanos() as u64);
        if next != self.run {
            self.rem_ns = 0;
        }
        self.prev = t;
        self.run = next;
        true
    }
}

/// A command as pass 1 saw it.
#[derive(Clone, Copy)]
struct Found {
    /// Its table entry, and its first key's hash so commands need not hash
    /// it again ([`command::Ctx::key_hash`]).
    hint: CommandHint,
    /// The database the key is prefetched in (the session's at batch start).
    db: u32,
}

impl Engine {
    /// `config` is final (file + command line applied); `config_file` is what
    /// CONFIG REWRITE writes back to.
    pub fn new(config: Config, config_file: Option<std::path::PathBuf>) -> Engine {
        let dbs = config.databases;
        if !config.renames.is_empty() && !table::install_renames(config.renames.clone()) {
            log::warning("rename-command: this process serves other names already; ignored");
        }
        let mut srv = Server::new(config);
        srv.config_file = config_file;
        Engine {
            srv,
            found: Vec::new(),
            hashes: vec![Vec::new(); dbs],
        }
    }
    pub fn config(&self) -> &Config {
        &self.srv.config
    }
    /// The whole server state (tests, INFO from the server crate).
    pub fn server(&self) -> &Server {
        &self.srv
    }
    pub fn server_mut(&mut self) -> &mut Server {
        &mut self.srv
    }
    /// INFO memory's allocator figures come from here (the server crate
    /// plugs in jemalloc's stats).
    pub fn set_memory_probe(&mut self, probe: MemoryProbe) {
        self.srv.memory_probe = Some(probe);
    }
    /// Where used memory is read before each command while `maxmemory`
    /// is set, and for INFO `used_memory` (the server crate plugs in its
    /// counting allocator).
    pub fn set_used_memory_probe(&mut self, probe: UsedMemoryProbe) {
        self.srv.used_memory_probe = Some(probe);
    }
    /// Tests: used memory computed from the keyspace instead of measured,
    /// so that eviction is deterministic. A probe, if set, wins.
    pub fn set_used_memory_model(&mut self, model: UsedMemoryModel) {
        self.srv.used_memory_model = Some(model);
    }
    /// MEMORY MALLOC-STATS, MEMORY PURGE and `jemalloc-bg-thread` (now,
    /// and on CONFIG SET) go to the allocator through these (the server
    /// crate plugs in jemalloc's); without them MEMORY
    /// MALLOC-STATS answers Valkey's "not supported" text.
    pub fn set_allocator_ops(&mut self, ops: AllocatorOps) {
        self.srv.allocator_ops = Some(ops);
        self.srv.apply_allocator_background_thread();
    }
    /// The IO layer calls this once, when the server is ready to accept
    /// connections: the used memory then is INFO `used_memory_startup`
    /// (Valkey's `initial_memory_usage`), the base that MEMORY STATS and
    /// `used_memory_dataset_perc` leave out.
    pub fn server_ready(&mut self) {
        let used = self.srv.memory().used;
        self.srv.startup_memory = used;
        self.srv.note_used_memory(used);
        supervisor::ready(self.srv.repl.is_replica());
    }
    /// CONFIG SET maxclients (and io-threads) raise the open-file limit
    /// through `raise`, and a `maxclients` it cannot cover is refused.
    pub fn set_file_limit(&mut self, raise: FileLimit) {
        self.srv.file_limit = Some(raise);
    }
    /// CONFIG SET `port` / `bind` bind new listeners through `listen` (the
    /// network layer's), answering its error if it fails.
    pub fn set_listen(&mut self, listen: crate::server::Listen) {
        self.srv.listen = Some(listen);
    }
    /// The process title is written through `set`, `{title}` being
    /// `argv0`: now if `set-proc-title` says so, and as
    /// [`crate::proc_title`] tells when.
    pub fn set_proc_title(&mut self, set: crate::proc_title::SetProcTitle, argv0: String) {
        self.srv.proc_title = Some((set, argv0));
        self.srv.refresh_proc_title();
    }
    /// SORT ... ALPHA collates, and CONFIG SET `locale-collate` sets the
    /// locale, through `collation` (the binary sets the start-up locale
    /// itself, before any thread).
    pub fn set_collation(&mut self, collation: crate::server::Collation) {
        self.srv.collation = Some(collation);
    }
    /// `oom-score-adj` is applied through `set` (now, and whenever the
    /// directives or the role change).
    pub fn set_oom_score(&mut self, set: SetOomScore) {
        self.srv.oom_score = Some(set);
        self.srv.apply_oom_score();
    }
    /// Pin the clock at `now_ms` (Unix ms) for tests; `None` = real time.
    pub fn pin_clock(&mut self, now_ms: Option<i64>) {
        self.srv.clock_override = now_ms;
    }

    /// Register a new connection. `Err(bytes)` means: send these bytes and
    /// close (maxclients reached, protected mode DENIED).
    pub fn connect(&mut self, info: ClientInfo) -> Result<ClientId, Vec<u8>> {
        self.connect_as(info, None)
    }

    /// [`Engine::connect`] with an id the IO layer took from
    /// [`Engine::client_ids`] (a connection it accepted and served while a
    /// script was busy); `None`: a new one.
    pub fn connect_as(
        &mut self,
        info: ClientInfo,
        id: Option<ClientId>,
    ) -> Result<ClientId, Vec<u8>> {
        let srv = &mut self.srv;
        if srv.clients.len() as u64 >= srv.config.maxclients {
            srv.stats.rejected_connections += 1;
            return Err(MAXCLIENTS_ERR.to_vec());
        }
        if srv.config.protected_mode && srv.acl.default_nopass() && !info.addr.is_local() {
            srv.stats.rejected_connections += 1;
            return Err(PROTECTED_MODE_DENIED.to_vec());
        }
        let id = id.unwrap_or_else(|| {
            ClientId(
                srv.next_client_id
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            )
        });
        let now = srv.now_ms();
        let mut s = Session::new(id);
        match srv.busy.take_authed_early(id) {
            Some(user) => acl::login(srv, &mut s, user),
            None => s.authenticated = !srv.auth_required(),
        }
        match info.addr {
            ClientAddr::Tcp { peer, local } => (s.peer, s.local) = (Some(peer), Some(local)),
            ClientAddr::Unix(path) => s.unix_socket = Some(path),
        }
        s.fd = info.fd;
        s.created_ms = now;
        s.last_interaction_ms = now;
        srv.clients.map.insert(id.0, Some(Box::new(s)));
        srv.stats.total_connections_received += 1;
        Ok(id)
    }

    /// The connection is gone; drop its Session.
    pub fn disconnect(&mut self, id: ClientId) {
        if let Some(Some(mut sess)) = self.srv.clients.map.remove(&id.0) {
            blocking::forget(&mut self.srv, &mut sess);
            watch::unwatch_all(&mut self.srv, &mut sess);
            pubsub::forget(&mut self.srv, &mut sess);
            monitor::stop(&mut self.srv, sess.id);
            pause::forget(&mut self.srv, sess.id);
            tracking::disable(&mut self.srv, &mut sess);
        }
    }

    /// Hand over output produced for clients outside their own batches
    /// (pub/sub messages, unblocked replies): `f(client, bytes)` appends
    /// the bytes to that client's output. Call after every
    /// [`Engine::execute_batch`] and [`Engine::cron`], before sending.
    pub fn drain_output(&mut self, mut f: impl FnMut(ClientId, &[u8])) {
        let srv = &mut self.srv;
        for id in srv.outbox.drain(..) {
            let Some(sess) = srv.clients.get_mut(id) else {
                continue;
            };
            sess.pending_queued = false;
            if !sess.pending.is_empty() {
                sess.net_output_bytes += sess.pending.len() as u64;
                f(id, &sess.pending);
                sess.pending.clear();
            }
        }
    }

    /// Unix ms of the next blocked-client timeout, so the IO layer can
    /// wake for it (cron also checks); a time already past while eviction
    /// is under way (the IO loop must not sleep: see
    /// [`Engine::expire_blocked`]).
    pub fn next_timeout_ms(&self) -> Option<i64> {
        if self.srv.evict.running {
            return Some(0);
        }
        let pause_end = self.srv.pause.as_deref().and_then(|p| p.end_ms());
        match (self.srv.blocking.next_deadline(), pause_end) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Unblock the clients whose timeouts have passed (cheap when none
    /// has: one peek), and go on with a `maxmemory` eviction that stopped
    /// at its time limit (Valkey's eviction time event: one more short
    /// run per loop iteration until memory is under the limit). The IO
    /// layer calls it every iteration.
    pub fn expire_blocked(&mut self) {
        if self.srv.blocking.next_deadline().is_some() {
            let now = self.srv.now_ms();
            blocking::expire_timeouts(&mut self.srv, now);
        }
        if self.srv.pause.is_some() {
            let now = self.srv.now_ms();
            pause::check_deadline(&mut self.srv, now);
        }
        if self.srv.evict.running {
            let now = self.srv.now_ms();
            evict::perform_evictions(&mut self.srv, now, None);
        }
    }

    /// Run a batch: prefetch every key of every command, then execute each
    /// job's commands in order, appending replies to its `out`.
    ///
    /// Jobs of unknown clients (already disconnected) are skipped. A job
    /// whose client is closing (QUIT, CLIENT KILL, SHUTDOWN) stops at that
    /// command and gets `close_after_reply` set.
    pub fn execute_batch(&mut self, jobs: &mut [Job<'_>]) {
        if self.srv.busy.has_refused() {
            // Answered while a script was busy, just after it ended (an
            // AUTH must count before the client's next command).
            let busy = self.srv.busy.clone();
            busy.settle(&mut self.srv);
        }
        let Engine { srv, found, hashes } = self;
        execute_jobs(srv, found, hashes, jobs);
    }

    /// [`Engine::execute_batch`], with `pump` called from a script that
    /// has become busy (inline mode: the event loop serves the other
    /// clients from there; see [`busy`]).
    pub fn execute_batch_pumped(&mut self, jobs: &mut [Job<'_>], pump: &mut dyn busy::BusyPump) {
        busy::with_pump(pump, || self.execute_batch(jobs));
    }

    /// Where client ids come from (see [`Engine::connect_as`]).
    pub fn client_ids(&self) -> std::sync::Arc<std::sync::atomic::AtomicU64> {
        self.srv.next_client_id.clone()
    }

    /// A busy script has ended since the last call.
    pub fn busy_ended(&self) -> bool {
        self.srv.busy.take_ended()
    }

    /// The busy state of a running script, for the IO layer to answer
    /// other clients from (see [`busy::BusyState::answer`]).
    pub fn busy_state(&self) -> std::sync::Arc<busy::BusyState> {
        self.srv.busy.clone()
    }

    /// After [`Engine::execute_batch`] (and before its replies are sent):
    /// hand the batch's effects to the AOF. With `appendfsync always`
    /// this returns once they are on disk, so no reply to a write leaves
    /// before its write is durable; all writes of the batch share the one
    /// fdatasync.
    pub fn commit_effects(&mut self) {
        aof::after_batch(&mut self.srv);
        // What active expiry removed (batches collect their own).
        let srv = &mut self.srv;
        srv.lazyfree.collect(&mut srv.keyspace);
    }

    /// Move pending events into `out`.
    pub fn drain_events(&mut self, out: &mut Vec<Event>) {
        out.append(&mut self.srv.events);
    }

    /// Periodic work, called `hz` times a second: active expiry, idle
    /// client timeouts (as `Event::Close`), stats sampling.
    pub fn cron(&mut self) {
        let started = Instant::now();
        self.cron_steps();
        self.srv.stats.eventloop_cron_ns += started.elapsed().as_nanos() as u64;
    }

    /// [`Engine::cron`]'s work, timed by it.
    fn cron_steps(&mut self) {
        let srv = &mut self.srv;
        if srv.cron_paused {
            return;
        }
        let now = srv.now_ms();
        blocking::expire_timeouts(srv, now);
        pause::check_deadline(srv, now);
        if srv.evict.running {
            evict::perform_evictions(srv, now, None);
        }
        // A replica leaves expiry to its primary's DELs, import mode to
        // the import source's; a pause stops it.
        if srv.active_expire_enabled && !expiry_mode::stopped(srv) {
            // Valkey's slow cycle: 25% of a cron period, more with effort.
            let hz = srv.config.hz.max(1) as u64;
            let effort = srv.config.active_expire_effort.max(1) as u64 - 1;
            let budget_us = 1_000_000 * (25 + 2 * effort) / hz / 100;
            let ndb = srv.keyspace.dbs.len().max(1) as u64;
            let watch = srv.latency_watch();
            for db in srv.keyspace.dbs.iter_mut() {
                if db.expires_len() > 0 {
                    let n = db.active_expire(now, (budget_us / ndb).max(1));
                    srv.stats.expired_keys_active += n as u64;
                }
            }
            srv.latency_event_since(watch, "expire-cycle", now);
            // WATCH invalidation and `expired` events for what it removed.
            pubsub::drain_expired(srv, None);
            tracking::broadcast(srv);
        }
        // Valkey's `activerehashing`: up to 1 ms per cron finishes resizes
        // of databases that see no writes (writes move buckets themselves).
        if srv.config.activerehashing {
            let until = Instant::now() + Duration::from_millis(1);
            for db in srv.keyspace.dbs.iter_mut() {
                while db.rehash_step(100) && Instant::now() < until {}
            }
        }
        let timeout_ms = srv.config.timeout.saturating_mul(1000) as i64;
        if timeout_ms > 0 {
            for slot in srv.clients.map.values_mut() {
                let Some(s) = slot.as_deref_mut() else {
                    continue;
                };
                if !s.close_asap && now - s.last_interaction_ms > timeout_ms {
                    s.close_asap = true;
                    log::verbose("Closing idle client");
                    srv.events.push(Event::Close {
                        client: s.id,
                        flush: false,
                    });
                }
            }
        }
        client_evict::evict_clients(srv);
        defrag::cron(srv);
        if srv.tracking.clients > 0 {
            tracking::limit_table(srv);
        }
        if let Some(m) = srv.migrator.as_mut() {
            m.close_idle(migrate::CACHE_TTL);
        }
        persist::cron(srv, now);
        aof::cron(srv, now);
        replication::cron(srv, now);
        replication::primary::cron(srv, now);
        sample_stats(srv, now);
    }

    /// Follow the write-effects stream from now on (replication, tests):
    /// what each batch changed is readable after [`Engine::commit_effects`].
    pub fn attach_effects(&mut self) -> ::effects::Reader {
        let offset = self.srv.effects.offset();
        let r = self.srv.effects.attach(offset);
        self.srv.sync_expiry_logging();
        r
    }

    /// Replicas are fed by threads `senders` starts (the server's
    /// `ringkv-repl`); without it PSYNC is refused.
    pub fn set_senders(&mut self, senders: Box<dyn replication::primary::Senders>) {
        self.srv.repl.feeds.senders = Some(senders);
    }

    /// Replication links to a primary are opened through `links` (the
    /// server's `ringkv-repl`); without it REPLICAOF sets the primary and
    /// never connects.
    pub fn set_links(&mut self, links: Box<dyn replication::Links>) {
        self.srv.repl.links = Some(links);
    }

    /// The slot the IO layer fills with how to wake the thread that runs
    /// the engine (see [`wake`]).
    pub fn wake_handle(&self) -> std::sync::Arc<wake::Wake> {
        self.srv.repl.wake.clone()
    }

    /// Follow the primary `replicaof` names (at start-up, after loading).
    pub fn start_replication(&mut self) {
        let v = self.srv.config.get("replicaof").unwrap_or_default();
        let mut parts = v.split(' ');
        if let (Some(host), Some(port)) = (parts.next(), parts.next())
            && let Ok(port) = port.parse()
        {
            let now = self.srv.now_ms();
            replication::set_primary(&mut self.srv, host, port, now);
        }
    }

    /// Files are written and read through `storage` (the server's
    /// `ringkv-persist`); without it SAVE and BGSAVE fail.
    pub fn set_storage(&mut self, storage: Box<dyn persist::Storage>) {
        self.srv.persist.storage = Some(storage);
    }

    /// MIGRATE connects through `migrator` (the server's sockets);
    /// without it MIGRATE fails to connect.
    pub fn set_migrator(&mut self, migrator: Box<dyn migrate::Migrator>) {
        self.srv.migrator = Some(migrator);
    }

    /// Start loading the AOF (`appendonly yes`) or else `dbfilename`, if
    /// there is one; commands get `-LOADING` until
    /// [`Engine::background_step`] has loaded all of it. An error (not an
    /// RDB file, a newer version, an AOF file missing) means the server
    /// must not start.
    pub fn load_at_startup(&mut self) -> Result<(), String> {
        let now = self.srv.now_ms();
        if self.srv.config.appendonly {
            // The AOF wins over the RDB file, as in Valkey.
            aof::start(&mut self.srv, now)?;
            return Ok(());
        }
        if loading::start(&mut self.srv, now)? {
            log::notice("Loading RDB produced by ringkv or Valkey...");
            if let Some(l) = self.srv.persist.loading.as_mut() {
                l.at_startup = true;
            }
        }
        Ok(())
    }

    /// One slice of background work on this thread: inserting loaded keys,
    /// capturing the running BGSAVE. A failed start-up load ends the
    /// process, as Valkey's does: a half-loaded keyspace is never served.
    pub fn background_step(&mut self) {
        let srv = &mut self.srv;
        if srv.persist.is_loading() {
            if let Err(e) = loading::background_step(srv) {
                if srv.repl.primary.as_ref().is_some_and(|p| p.loading) {
                    // The primary's file: sync again rather than exit.
                    replication::load_failed(srv, &e);
                    return;
                }
                log::warning(&format!("Fatal error loading the DB: {e}. Exiting."));
                std::process::exit(1);
            }
            if !srv.repl.is_replica() {
                return;
            }
        }
        if srv.repl.is_replica() {
            replication::background_step(srv);
            if srv.persist.is_loading() {
                return;
            }
        }
        if srv.persist.snapshot.is_some() {
            let now = srv.now_ms();
            snapshot::background_step(srv, now);
        }
        if srv.aof.rewrite.is_some() {
            let now = srv.now_ms();
            aof::background_step(srv, now);
        }
        if srv.repl.feeds.snapshot.is_some() {
            let now = srv.now_ms();
            replication::primary::background_step(srv, now);
        }
        if srv.repl.failover.active() {
            let now = srv.now_ms();
            replication::failover::step(srv, now);
        }
        defrag::step(srv);
        replication::wait::serve_waits(srv);
        if srv.shutdown.is_some() {
            let now = srv.now_ms();
            shutdown::step(srv, now);
        }
    }

    /// How soon [`Engine::background_step`] wants to run again: now when
    /// it has work at hand, shortly when it waits on another thread.
    pub fn background_wait(&self) -> Option<Duration> {
        if self.srv.repl.ready() {
            return Some(Duration::ZERO);
        }
        if let Some(ready) = replication::primary::capture_ready(&self.srv) {
            let ms = if ready { 0 } else { 1 };
            return Some(Duration::from_millis(ms));
        }
        if let Some(r) = &self.srv.aof.rewrite {
            let ms = if r.ready() { 0 } else { 1 };
            return Some(Duration::from_millis(ms));
        }
        let p = &self.srv.persist;
        if p.is_loading() || p.snapshot.is_some() {
            let ready = match (&p.loading, &p.snapshot) {
                (Some(l), _) => !l.waiting,
                (None, Some(s)) => s.ready(),
                (None, None) => false,
            };
            let ms = if ready { 0 } else { 1 };
            return Some(Duration::from_millis(ms));
        }
        let waits = replication::wait::poll_interval(&self.srv);
        match (waits, defrag::wait(&self.srv)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Ask the engine to shut down (SIGTERM/SIGINT): it emits Event::Shutdown.
    pub fn shutdown_requested(&mut self) {
        if self.srv.shutting_down || self.srv.shutdown.is_some() {
            return;
        }
        // The binary's handler logged the signal, as Valkey's does.
        let now = self.srv.now_ms();
        let how = shutdown::how_for_signal(&self.srv);
        if let shutdown::Outcome::Failed = shutdown::begin(&mut self.srv, now, how, None) {
            log::warning(
                "SIGTERM received but errors trying to shut down the server, check the logs for more information",
            );
        }
    }

    /// Counters only the IO layer sees, for INFO.
    pub fn net_stats_mut(&mut self) -> &mut NetStats {
        &mut self.srv.net
    }

    /// Parser limits from `proto-max-bulk-len`, for an authenticated client.
    pub fn parser_limits(&self) -> resp::Limits {
        resp::Limits {
            max_bulk_len: self.srv.config.proto_max_bulk_len,
            ..resp::Limits::default()
        }
    }

    /// Does this client still have to AUTH (Valkey caps its query buffer at
    /// 1 MB and its requests at 10 arguments of 16 KB)?
    pub fn auth_required(&self, client: ClientId) -> bool {
        self.srv
            .clients
            .get(client)
            .is_some_and(|s| !s.authenticated)
    }

    /// This client's parser limits (as [`Engine::parser_limits`], plus
    /// Valkey's caps while it still has to AUTH) and its query-buffer cap
    /// (`client-query-buffer-limit`, or 1 MB while it has to AUTH), with
    /// one session lookup.
    pub fn client_limits(&self, client: ClientId) -> (resp::Limits, usize) {
        self.limits_for(self.auth_required(client))
    }

    /// [`Engine::client_limits`] for a client whose AUTH state is known
    /// (a job's [`Outcome::auth_required`]): no session lookup.
    pub fn limits_for(&self, unauthenticated: bool) -> (resp::Limits, usize) {
        let limit = self.query_buffer_limit();
        let limits = resp::Limits {
            unauthenticated,
            ..self.parser_limits()
        };
        (
            limits,
            if unauthenticated {
                limit.min(1 << 20)
            } else {
                limit
            },
        )
    }

    /// `client-query-buffer-limit` in bytes.
    pub fn query_buffer_limit(&self) -> usize {
        self.srv.config.client_query_buffer_limit
    }

    /// Record a protocol error for `client` (INFO errorstats, log line:
    /// Valkey's, with the client as CLIENT LIST shows it and what its
    /// query buffer held, both without user data under
    /// `hide-user-data-from-log`).
    pub fn note_protocol_error(
        &mut self,
        client: ClientId,
        err: &resp::ProtocolError,
        sample: &QuerySample,
    ) {
        self.srv.stats.protocol_errors += 1;
        self.srv.stats.record_error("ERR");
        if log::enabled(log::Level::Verbose) {
            let now = self.srv.now_ms();
            let watch = self.srv.watches.state(client);
            let hide = self.srv.hides_user_data();
            let who = match self.srv.clients.get(client) {
                Some(s) => cmd::client::client_line_logged(s, watch, now, hide),
                None => format!("id={}", client.0),
            };
            let sample = if hide {
                "*redacted*".to_string()
            } else {
                sample.shown()
            };
            log::verbose(&format!(
                "Protocol error ({}) from client: {who}. Query buffer: {sample}",
                err.message()
            ));
        }
    }

    /// `client`'s address for a log line ("" once it is gone).
    fn client_addr(&self, client: ClientId) -> String {
        self.srv
            .clients
            .get(client)
            .map(|s| s.addr_string())
            .unwrap_or_default()
    }

    /// The IO layer closed `client` for going over `client-query-buffer-limit`.
    pub fn note_query_buffer_limit(&mut self, client: ClientId, qbuf_len: usize) {
        self.srv.stats.client_query_buffer_limit_disconnections += 1;
        let who = self.client_addr(client);
        log::warning(&format!(
            "Closing client that reached max query buffer length: id={} addr={who} qbuf={qbuf_len} (qbuf initial bytes omitted)",
            client.0
        ));
    }

    /// The `client-output-buffer-limit` classes in force, shared with the
    /// IO layer: it checks a client's pending output against
    /// `get(class)` at each write, the class coming from the client's
    /// last [`Job::outcome`] ([`OutputClass::Normal`] before any).
    pub fn output_limits(&self) -> &std::sync::Arc<OutputLimits> {
        &self.srv.output_limits
    }

    /// Where the IO layer keeps `client`'s buffered bytes current: pending
    /// output (CLIENT LIST `omem`) and unparsed input (`qbuf`); `None` once
    /// the client is gone.
    pub fn client_meter(&self, client: ClientId) -> Option<ClientMeter> {
        self.srv.clients.get(client).map(|s| s.meter.clone())
    }

    /// The IO layer closed `client` for going over its output buffer limit
    /// with `len` bytes pending (INFO, log line as Valkey's, which shows
    /// the client as CLIENT LIST does).
    pub fn note_output_buffer_limit(&mut self, client: ClientId, len: usize) {
        self.srv.stats.client_output_buffer_limit_disconnections += 1;
        let now = self.srv.now_ms();
        let watch = self.srv.watches.state(client);
        let hide = self.srv.hides_user_data();
        let who = match self.srv.clients.get(client) {
            Some(s) => {
                s.meter.set_output(len);
                cmd::client::client_line_logged(s, watch, now, hide)
            }
            None => format!("id={} omem={len}", client.0),
        };
        log::warning(&format!(
            "Client {who} scheduled to be closed ASAP for overcoming of output buffer limits."
        ));
    }

    /// Bytes read from `client` (CLIENT LIST `tot-net-in`); the IO layer
    /// may report them per read. The server-wide total is
    /// [`NetStats::total_net_input_bytes`].
    pub fn note_client_input(&mut self, client: ClientId, bytes: u64) {
        if let Some(s) = self.srv.clients.get_mut(client) {
            s.net_input_bytes += bytes;
        }
    }

    /// One cycle of the loop that runs the engine took `busy`, its wait
    /// for IO left out: INFO's `eventloop_cycles` and
    /// `eventloop_duration_sum` (which cycles count: docs/ARCHITECTURE.md).
    pub fn count_cycle(&mut self, busy: Duration) {
        let st = &mut self.srv.stats;
        let ns = busy.as_nanos() as u64;
        st.eventloop_cycles += 1;
        st.eventloop_ns += ns;
        st.eventloop_max_ns = st.eventloop_max_ns.max(ns);
        // After CONFIG RESETSTAT the total restarts below the mark.
        let cmds = st
            .total_commands_processed
            .saturating_sub(st.cycle_cmds_mark);
        st.cycle_cmds_mark = st.total_commands_processed;
        st.eventloop_cmds_max = st.eventloop_cmds_max.max(cmds);
    }

    /// Count read and write syscalls (or completions) for INFO
    /// `total_reads_processed` / `total_writes_processed`.
    pub fn count_io(&mut self, reads: u64, writes: u64) {
        self.srv.stats.total_reads_processed += reads;
        self.srv.stats.total_writes_processed += writes;
    }

    /// Hz at which [`Engine::cron`] wants to run (`hz` directive).
    pub fn hz(&self) -> u32 {
        self.srv.config.hz
    }
    /// `timeout` in seconds (0 = never), `tcp-keepalive` in seconds.
    pub fn client_timeout_s(&self) -> u64 {
        self.srv.config.timeout
    }
    pub fn tcp_keepalive_s(&self) -> u64 {
        self.srv.config.tcp_keepalive
    }
    pub fn maxclients(&self) -> u64 {
        self.srv.config.maxclients
    }
    pub fn connected_clients(&self) -> usize {
        self.srv.clients.len()
    }
}

/// Loopback, as Valkey's `connIsLocal` sees it (an IPv4-mapped loopback
/// address counts too).
pub fn is_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// CLIENT NO-TOUCH: a command's lookups leave keys' access bits (the
/// keyspace's `no_touch` is set while it runs), except TOUCH's, also when
/// a script or a transaction runs it (Valkey's lookupKey looks at the
/// command being executed).
pub(crate) fn touches_despite_no_touch(sess: &Session, cmd_name: &str) -> bool {
    sess.no_touch && cmd_name == "touch"
}

/// Run one command: resolve (sub)command, check arity and auth, call it,
/// account for it.
#[inline]
fn execute_one(
    srv: &mut Server,
    sess: &mut Session,
    argv: ArgvRef<'_>,
    found: Found,
    out: &mut ReplyBuf,
    now_ms: i64,
    timer: &mut CmdTimer,
) {
    let table = table();
    // Whether the clock was last read as the previous command finished
    // (CmdTimer::chained); anything but the plain path below clears it.
    let chained = std::mem::replace(&mut timer.chained, false);
    sess.last_interaction_ms = now_ms;
    if sess.reply_mode == ReplyMode::Skip {
        sess.reply_mode = ReplyMode::SkipThis;
    }
    let reply_start = out.mark();
    let reply_len0 = out.len();
    let proto = sess.proto;

    let idx = found.hint.idx;
    let outcome = resolve(table, argv, idx, sess, srv);
    let i = match outcome {
        Ok(i) => i,
        Err(rejected) => {
            // A command refused while queueing dooms the transaction
            // (Valkey's flagTransaction): EXEC will reply EXECABORT.
            if let Some(m) = sess.multi.as_deref_mut() {
                m.dirty = true;
            }
            let msg = match rejected.acl {
                Some(d) => {
                    let args: Vec<&[u8]> = argv.iter().collect();
                    let i = rejected.cmd.unwrap_or_default();
                    format!("NOPERM {}", acl::refuse(srv, sess, d, i, &args, now_ms))
                }
                None => rejected.msg,
            };
            // A refused EXEC ends the transaction (Valkey's rejectCommand
            // then execCommandAbort, whose text keeps an error's own code
            // but not a plain ERR).
            let exec = rejected
                .cmd
                .is_some_and(|i| table.entries[i].fullname == "exec");
            let msg = if exec && sess.multi.is_some() {
                sess.multi = None;
                watch::unwatch_all(srv, sess);
                let why = msg.strip_prefix("ERR ").unwrap_or(&msg);
                format!("EXECABORT Transaction discarded because of: {why}")
            } else {
                msg
            };
            let mut w = ReplyWriter::for_buf(out, proto);
            w.error(&msg);
            if let Some(i) = rejected.cmd {
                srv.stats.commands[i].rejected_calls += 1;
            }
            timer.switch(srv, None);
            finish_reply(srv, sess, out, reply_start, rejected.cmd);
            return;
        }
    };
    if srv.config.maxmemory > 0
        && !srv.aof.replaying
        && !evict::ignores_maxmemory(srv)
        && let Some(msg) = check_oom(srv, sess, i, out, now_ms)
    {
        if let Some(m) = sess.multi.as_deref_mut() {
            m.dirty = true;
        }
        srv.stats.commands[i].rejected_calls += 1;
        ReplyWriter::for_buf(out, proto).error(msg);
        timer.switch(srv, None);
        finish_reply(srv, sess, out, reply_start, Some(i));
        return;
    }
    if srv.tracking.clients > 0 && tracking::over_limit(srv) {
        tracking_limit_before(srv, sess, out);
    }
    if srv.pause.is_some() && pause::holds(srv, sess, i, argv) {
        // Not run now: it runs again, from the start, once the pause ends.
        // CLIENT LIST shows the held command, as Valkey's.
        sess.last_cmd = Some(i);
        pause::postpone(srv, sess);
        timer.switch(srv, None);
        return;
    }
    // Inside MULTI, everything but EXEC DISCARD MULTI WATCH QUIT RESET is
    // queued rather than run (the tail of Valkey's processCommand).
    if let Some(m) = sess.multi.as_deref_mut()
        && !cmd::transactions::runs_in_multi(i)
    {
        m.queue(i, argv);
        ReplyWriter::for_buf(out, proto).simple("QUEUED");
        sess.last_cmd = Some(i);
        timer.switch(srv, None);
        finish_reply(srv, sess, out, reply_start, Some(i));
        return;
    }
    let spec = table.entries[i].spec;
    let fk = table.entries[idx as usize].spec.first_key;
    // Always overwritten: a hint left from an earlier command could match
    // a different key that now sits at the same address.
    srv.key_hint = if fk > 0 && (fk as usize) < argv.len() {
        let k = argv.get(fk as usize);
        server::KeyHint {
            ptr: k.as_ptr() as usize,
            len: k.len(),
            hash: found.hint.key_hash,
        }
    } else {
        server::KeyHint::default()
    };
    // Set before running so CLIENT LIST shows itself as `cmd=client|list`.
    sess.last_cmd = Some(i);
    // Charge what ran before to its command (INFO commandstats sees it).
    let switched = timer.switch(srv, Some(i));
    let slow_threshold = srv.config.slowlog_log_slower_than;
    let exact = commandlog::CommandLog::wants_exact(slow_threshold, spec.flags);
    // Timed on its own: from a clock read made just now (a switch of
    // command) or as the previous command finished, else read it here.
    if exact && !switched && !chained {
        timer.split(srv);
    }
    tracking::begin_own(srv, sess);
    if let Some(f) = spec.func {
        let mut ctx = command::Ctx {
            srv: &mut *srv,
            session: &mut *sess,
            reply: ReplyWriter::for_buf(&mut *out, proto),
            now_ms,
        };
        ctx.srv.pending_pushes = Some((ctx.session.id, Vec::new()));
        let no_touch = ctx.session.no_touch && spec.name != "touch";
        if no_touch {
            ctx.srv.keyspace.set_no_touch(true);
        }
        if expiry_mode::sees_expired(ctx.srv, ctx.session) {
            expiry_mode::reveal(ctx.srv);
            effects::call(&mut ctx, f, argv, true);
            expiry_mode::apply(ctx.srv);
        } else {
            effects::call(&mut ctx, f, argv, true);
        }
        if no_touch {
            ctx.srv.keyspace.set_no_touch(false);
        }
        if spec.flags & command::flags::WRITE != 0 && srv.effects.on() {
            sess.woff = srv.effects.offset();
        }
    }
    let blocked = sess.block_request.is_some() && blocking::after_command(srv, sess, i, argv);
    // A blocked command is recorded when it is served.
    if !blocked {
        timer.call_done();
    }
    let mut slow_us = None;
    // Stays true while only this command's bookkeeping runs after the
    // split below (CmdTimer::chained).
    let mut plain = exact;
    if exact {
        let us = timer.split(srv) / 1000;
        match sess.blocked.as_deref_mut() {
            Some(b) if blocked => b.call_us = us,
            // The log takes `us >= threshold` (CommandLog::record), as
            // configured after the command (CONFIG SET may change it).
            _ if srv.config.slowlog_log_slower_than >= 0
                && us >= srv.config.slowlog_log_slower_than as u64 =>
            {
                slow_us = Some(us);
                plain = false;
            }
            _ => {}
        }
    }
    if !srv.monitors.is_empty() {
        plain = false;
    }
    // Keys the command expired: WATCH invalidation, `expired` events; then
    // `keymiss` events. As in Valkey, where they happen inside the command:
    // before its keys are tracked (an expired key the client had not read
    // before is not invalidated to it) and before the tracking flush below
    // (its own invalidations follow its reply).
    if (srv.expiry_logging && srv.keyspace.expired_logged()) || srv.keymisses.pending() {
        let mut w = ReplyWriter::for_buf(&mut *out, sess.proto);
        let me = pubsub::Me {
            id: sess.id,
            reply: &mut w,
        };
        pubsub::drain_expired(srv, Some(me));
        plain = false;
    }
    {
        let mut w = ReplyWriter::for_buf(&mut *out, sess.proto);
        let me = pubsub::Me {
            id: sess.id,
            reply: &mut w,
        };
        observe::after_call(srv, sess, i, argv, false, slow_us, Some(me), now_ms);
    }
    if tracking::end_own(srv, sess, |p| ReplyWriter::for_buf(&mut *out, p)) {
        plain = false;
    }
    if let Some(t) = sess.tracking.as_deref_mut()
        && t.caching
        && sess.multi.is_none()
        && !table.entries[i].fullname.starts_with("client|")
    {
        // CLIENT CACHING covers the next command (a whole transaction).
        t.caching = false;
    }
    if srv.blocking.has_ready() {
        blocking::serve_ready(srv, now_ms);
        plain = false;
    }
    if let Some((_, pushes)) = srv.pending_pushes.take()
        && !pushes.is_empty()
    {
        ReplyWriter::for_buf(&mut *out, sess.proto).raw(&pushes);
    }
    let st: &mut CmdStat = &mut srv.stats.commands[i];
    // A blocked command is counted when it is served (blocking::count_call).
    st.calls += u64::from(!blocked);
    if out.bytes.get(reply_start.bytes) == Some(&b'-') && !srv.stats.error_is_data {
        st.failed_calls += 1;
    }
    // Counted once run, as Valkey's call(): a command refused or queued
    // is not, and CLIENT INFO does not count itself.
    srv.stats.total_commands_processed += u64::from(!blocked);
    sess.commands_processed += u64::from(!blocked);
    finish_reply(srv, sess, out, reply_start, Some(i));
    let (request_t, reply_t) = (
        srv.config.commandlog_request_larger_than,
        srv.config.commandlog_reply_larger_than,
    );
    if let Some(n) = commandlog::request_size(argv, request_t) {
        plain = false;
        log_command(
            srv,
            commandlog::Kind::LargeRequest,
            sess,
            i,
            argv,
            n,
            now_ms,
        );
    }
    let reply_len = (out.len() - reply_len0) as u64;
    if reply_t >= 0 && reply_len >= reply_t as u64 {
        plain = false;
        log_command(
            srv,
            commandlog::Kind::LargeReply,
            sess,
            i,
            argv,
            reply_len,
            now_ms,
        );
    }
    timer.chained = plain;
}

/// COMMANDLOG `slow`: `us` is what command `i` took.
pub(crate) fn log_if_slow(
    srv: &mut Server,
    sess: &Session,
    i: usize,
    argv: ArgvRef<'_>,
    us: u64,
    now_ms: i64,
) {
    log_command(srv, commandlog::Kind::Slow, sess, i, argv, us, now_ms);
}

/// Add command `i` to one of the command logs if `value` reaches its
/// threshold (commands flagged `skip_commandlog`, EXEC, never: a
/// transaction's commands are logged one by one).
fn log_command(
    srv: &mut Server,
    kind: commandlog::Kind,
    sess: &Session,
    i: usize,
    argv: ArgvRef<'_>,
    value: u64,
    now_ms: i64,
) {
    let e = &table().entries[i];
    if e.spec.flags & command::flags::SKIP_COMMANDLOG != 0 {
        return;
    }
    let limits = kind.limits(&srv.config);
    srv.commandlog
        .record(kind, limits, e.fullname.as_str(), argv, sess, value, now_ms);
}

/// Valkey's `maxmemory` step of `processCommand`: evict as needed before
/// every command; if memory is still over the limit with nothing left to
/// evict, refuse a denyoom command, an EXEC whose queue holds one (the
/// transaction is discarded), and, inside MULTI, anything to be queued.
/// The tracking table is over `tracking-table-max-keys` (lowered since
/// the last read): keys are dropped before the command, as Valkey's
/// processCommand does, and the client's own invalidations come before
/// its reply.
#[cold]
fn tracking_limit_before(srv: &mut Server, sess: &mut Session, out: &mut ReplyBuf) {
    tracking::begin_own(srv, sess);
    tracking::limit_table(srv);
    tracking::end_own(srv, sess, |p| ReplyWriter::for_buf(out, p));
}

/// Returns the error to reply.
#[cold]
fn check_oom(
    srv: &mut Server,
    sess: &mut Session,
    i: usize,
    out: &mut ReplyBuf,
    now_ms: i64,
) -> Option<&'static str> {
    // The client's own invalidations of the keys evicted now come before
    // its command's reply, as Valkey's (eviction runs before the command).
    tracking::begin_own(srv, sess);
    let oom = {
        let mut w = ReplyWriter::for_buf(&mut *out, sess.proto);
        let me = pubsub::Me {
            id: sess.id,
            reply: &mut w,
        };
        evict::perform_evictions(srv, now_ms, Some(me)) == evict::Outcome::Fail
    };
    tracking::end_own(srv, sess, |p| ReplyWriter::for_buf(&mut *out, p));
    srv.pre_command_oom = oom;
    if !oom {
        return None;
    }
    let e = &table().entries[i];
    let name = e.fullname.as_str();
    let is_exec = name == "exec";
    let denyoom = e.spec.flags & command::flags::DENYOOM != 0
        || (is_exec
            && sess
                .multi
                .as_deref()
                .is_some_and(|m| m.any_flag(command::flags::DENYOOM)));
    let queueing = sess.multi.is_some() && !matches!(name, "exec" | "discard" | "quit" | "reset");
    if !(denyoom || queueing) {
        return None;
    }
    if is_exec {
        // Valkey's execCommandAbort: the transaction is gone.
        sess.multi = None;
        watch::unwatch_all(srv, sess);
        return Some(evict::EXECABORT_OOM_ERR);
    }
    Some(evict::OOM_ERR)
}

/// Count an error reply (errorstats) and drop the reply if CLIENT REPLY
/// says so. `cmd`: the command the reply answers, if it is known.
#[inline]
fn finish_reply(
    srv: &mut Server,
    sess: &mut Session,
    out: &mut ReplyBuf,
    reply_start: Mark,
    cmd: Option<usize>,
) {
    let error_is_data = std::mem::take(&mut srv.stats.error_is_data);
    // An error reply is all bytes (only bulk strings hold references).
    if !error_is_data
        && srv
            .stats
            .record_error_reply(&out.bytes[reply_start.bytes..])
        && (sess.id == replication::PRIMARY_CLIENT || sess.id == aof::LOADING_CLIENT)
    {
        propagation_error::unexpected_reply(srv, sess.id, &out.bytes[reply_start.bytes..], cmd);
    }
    let keep = std::mem::take(&mut sess.reply_is_push);
    match sess.reply_mode {
        ReplyMode::On | ReplyMode::Skip => {}
        ReplyMode::Off if keep => {}
        ReplyMode::Off => out.truncate(reply_start),
        ReplyMode::SkipThis => {
            if !keep {
                out.truncate(reply_start);
            }
            sess.reply_mode = ReplyMode::On;
        }
    }
}

pub(crate) struct Rejected {
    pub(crate) msg: String,
    pub(crate) cmd: Option<usize>,
    /// Refused by the client's ACL: `msg` is made (and the refusal
    /// logged) by the caller, which can change the server.
    pub(crate) acl: Option<acl::Denied>,
}

/// [`resolve`]'s checks that depend on the command alone (unknown
/// command or subcommand, arity): also `busy`'s, which answers without
/// the engine.
#[inline]
pub(crate) fn resolve_static(
    table: &table::Table,
    argv: ArgvRef<'_>,
    idx: u32,
) -> Result<usize, Rejected> {
    if idx == UNKNOWN {
        return Err(Rejected {
            msg: unknown_command_msg(argv),
            cmd: None,
            acl: None,
        });
    }
    let mut i = idx as usize;
    if !table.entries[i].subs.is_empty() && argv.len() >= 2 {
        match table.lookup_sub(i, argv.get(1)) {
            Some(s) => i = s,
            None => {
                let name = String::from_utf8_lossy(argv.get(0)).to_ascii_uppercase();
                return Err(Rejected {
                    msg: format!(
                        "ERR unknown subcommand '{}'. Try {name} HELP.",
                        trunc(argv.get(1), 128)
                    ),
                    cmd: None,
                    acl: None,
                });
            }
        }
    }
    let e = &table.entries[i];
    if !e.accepts_argc(argv.len()) {
        return Err(Rejected {
            msg: format!("ERR wrong number of arguments for '{}' command", e.fullname),
            cmd: Some(i),
            acl: None,
        });
    }
    Ok(i)
}

/// The table entry to run, or the error Valkey's `processCommand` gives.
#[inline]
fn resolve(
    table: &table::Table,
    argv: ArgvRef<'_>,
    idx: u32,
    sess: &Session,
    srv: &Server,
) -> Result<usize, Rejected> {
    let i = resolve_static(table, argv, idx)?;
    let e = &table.entries[i];
    if !sess.authenticated && srv.auth_required() && e.spec.flags & command::flags::NO_AUTH == 0 {
        return Err(Rejected {
            msg: "NOAUTH Authentication required.".into(),
            cmd: Some(i),
            acl: None,
        });
    }
    if srv.acl.restricted(sess.user) {
        let args: Vec<&[u8]> = argv.iter().collect();
        if let Err(d) = srv.acl.check(sess.user, i, &args) {
            return Err(Rejected {
                msg: String::new(),
                cmd: Some(i),
                acl: Some(d),
            });
        }
    }
    if srv.persist.is_loading()
        && sess.id != aof::LOADING_CLIENT
        && loading::refuses(srv, e.spec.flags)
    {
        return Err(Rejected {
            msg: compat::LOADING.get().into(),
            cmd: Some(i),
            acl: None,
        });
    }
    if sess.capa_redirect
        && let Some(p) = srv.repl.primary.as_ref()
        && sess.id != replication::PRIMARY_CLIENT
        && (e.spec.flags & command::flags::WRITE != 0
            || (e.spec.flags & command::flags::READONLY != 0 && !sess.readonly))
    {
        // Valkey 8's redirect for clients that can follow it.
        return Err(Rejected {
            msg: format!("REDIRECT {}:{}", p.host, p.port),
            cmd: Some(i),
            acl: None,
        });
    }
    // EXEC is a write when its queue holds one (Valkey's is_write_command):
    // a read-only replica, a failing disk and too few replicas refuse it;
    // a stale replica refuses it when one queued command is not `stale`.
    let mut flags = e.spec.flags;
    if e.fullname == "exec"
        && let Some(m) = sess.multi.as_deref()
    {
        if m.any_flag(command::flags::WRITE) {
            flags |= command::flags::WRITE;
        }
        if !m.all_flag(command::flags::STALE) {
            flags &= !command::flags::STALE;
        }
    }
    if srv.repl.is_replica()
        && sess.id != replication::PRIMARY_CLIENT
        && let Some(msg) = replica_refusal(srv, flags)
    {
        return Err(Rejected {
            msg: msg.into(),
            cmd: Some(i),
            acl: None,
        });
    }
    let write = flags & command::flags::WRITE != 0;
    // Valkey refuses PING too while the disk fails (writeCommandsDeniedByDiskError).
    if (write || e.spec.name == "ping")
        && let Some(msg) = disk_refusal(srv)
    {
        if sess.id != replication::PRIMARY_CLIENT {
            return Err(Rejected {
                msg,
                cmd: Some(i),
                acl: None,
            });
        }
        replication::applying_despite_disk_error(srv, write);
    }
    if write && replication::primary::too_few_replicas(srv) {
        return Err(Rejected {
            msg: replication::primary::NOREPLICAS_ERR.into(),
            cmd: Some(i),
            acl: None,
        });
    }
    if sess.multi.is_some() && e.spec.flags & command::flags::NO_MULTI != 0 {
        return Err(Rejected {
            msg: "ERR Command not allowed inside a transaction".into(),
            cmd: Some(i),
            acl: None,
        });
    }
    if sess.in_resp2_pubsub() && !cmd::pubsub::allowed_in_subscribed_mode(&e.fullname) {
        return Err(Rejected {
            msg: format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                e.fullname
            ),
            cmd: Some(i),
            acl: None,
        });
    }
    Ok(i)
}

/// Why writes are refused for want of a disk, if they are: a failed
/// BGSAVE with save points (`stop-writes-on-bgsave-error`), or a failed
/// AOF write.
#[inline]
fn disk_refusal(srv: &Server) -> Option<String> {
    if persist::writes_denied(srv) {
        return Some(compat::MISCONF.get().into());
    }
    aof::misconf_error(srv)
}

/// What a replica says to a client's command that it cannot serve: a
/// write (`replica-read-only`), anything not flagged `stale` while the
/// link is down (`replica-serve-stale-data no`).
#[cold]
fn replica_refusal(srv: &Server, flags: u32) -> Option<&'static str> {
    if flags & command::flags::WRITE != 0 && srv.config.replica_read_only {
        return Some(replication::READONLY_ERR);
    }
    if flags & command::flags::STALE == 0
        && !srv.config.replica_serve_stale_data
        && !srv.repl.link_up()
    {
        return Some(replication::MASTERDOWN_ERR);
    }
    None
}

fn trunc(b: &[u8], n: usize) -> String {
    String::from_utf8_lossy(&b[..b.len().min(n)]).into_owned()
}

/// `ERR unknown command 'foo', with args beginning with: 'a' 'b' `.
fn unknown_command_msg(argv: ArgvRef<'_>) -> String {
    let mut args = String::new();
    let mut i = 1;
    while i < argv.len() && args.len() < 128 {
        let room = 128 - args.len();
        args.push('\'');
        args.push_str(&trunc(argv.get(i), room));
        args.push_str("' ");
        i += 1;
    }
    let name = if argv.is_empty() {
        String::new()
    } else {
        trunc(argv.get(0), 128)
    };
    format!("ERR unknown command '{name}', with args beginning with: {args}")
}

/// Instantaneous ops/sec and network kbps, sampled every 100 ms.
fn sample_stats(srv: &mut Server, now: i64) {
    let last = srv.stats.last_sample_ms;
    if last != 0 && now - last < 100 {
        return;
    }
    let dt = if last == 0 { 0 } else { now - last };
    let repl = srv.repl.traffic();
    // As Valkey's, the network rates include replication's bytes.
    let net_in = srv.net.total_net_input_bytes + repl.from_primary + repl.replicas.bytes_in;
    let net_out = srv.net.total_net_output_bytes + repl.replicas.bytes_out;
    let st = &mut srv.stats;
    let i = st.sample_idx;
    st.ops_rate.sample(i, st.total_commands_processed, dt);
    st.in_rate.sample(i, net_in, dt);
    st.out_rate.sample(i, net_out, dt);
    st.repl_in_rate.sample(i, repl.from_primary, dt);
    st.repl_out_rate.sample(i, repl.replicas.bytes_out, dt);
    st.cycles_rate.sample(i, st.eventloop_cycles, dt);
    st.cycle_length
        .sample_per(i, st.eventloop_ns / 1000, st.eventloop_cycles);
    if dt > 0 {
        st.sample_idx += 1;
    }
    st.last_sample_ms = now;
    // Valkey's cron keeps the peak current between INFO calls.
    let used = srv.memory().used;
    srv.note_used_memory(used);
}

/// Run one job of the AOF's own client (a replay at start-up).
pub(crate) fn execute_replayed(srv: &mut Server, job: &mut Job<'_>) {
    let mut hashes = vec![Vec::new(); srv.keyspace.dbs.len()];
    execute_jobs(srv, &mut Vec::new(), &mut hashes, std::slice::from_mut(job));
}

/// [`Engine::execute_batch`], with the engine's scratch vectors.
fn execute_jobs(
    srv: &mut Server,
    found: &mut Vec<Found>,
    hashes: &mut [Vec<u64>],
    jobs: &mut [Job<'_>],
) {
    let now_ms = srv.now_ms();

    // Pass 1: every command's table entry and first-key hash, from the
    // parser's hints when it left them.
    found.clear();
    for job in jobs.iter() {
        let db = srv.clients.get(job.client).map_or(0, |s| s.db) as u32;
        let cmds = &job.commands;
        if cmds.hints.len() == cmds.argc.len() {
            found.extend(cmds.hints.iter().map(|&hint| Found { hint, db }));
        } else {
            found.extend(cmds.iter().map(|argv| Found {
                hint: CommandHint::of(argv),
                db,
            }));
        }
    }

    // Pass 2: execute in order. Every `window` commands, prefetch the
    // keys of the next `window` (buckets first, then the entries their
    // tags point at, then the values' bytes): close enough ahead that
    // the lines are in flight together, near enough that they are still
    // in cache when used. (Finer pipelines measured slower at 10M keys:
    // each stage a few commands ahead of the next, and each stage a
    // window ahead of the next; docs/BENCHMARKS.md §6.1, §6.6.)
    let window = srv.config.prefetch_batch_max_size;
    let mut next_prefetch = 0;
    let mut at = 0;
    let mut timer = CmdTimer::new();
    for job in jobs.iter_mut() {
        let n = job.commands.argc.len();
        let job_found = &found[at..at + n];
        at += n;
        let Some(mut sess) = srv
            .clients
            .map
            .get_mut(&job.client.0)
            .and_then(Option::take)
        else {
            continue;
        };
        sess.net_input_bytes += job.bytes_in;
        // Output queued for it before this batch goes ahead of its
        // replies, in the order it was produced.
        if !sess.pending.is_empty() {
            job.out.extend_from_slice(&sess.pending);
            sess.net_output_bytes += sess.pending.len() as u64;
            sess.pending.clear();
        }
        let start_len = job.out.len();
        job.executed = 0;
        // Another client's command is not this one's predecessor.
        timer.chained = false;
        for (k, argv) in job.commands.iter().enumerate() {
            let g = at - n + k;
            if window > 0 && g >= next_prefetch {
                next_prefetch = (g + window).min(found.len());
                prefetch_window(srv, hashes, &found[g..next_prefetch]);
                timer.chained = false;
            }
            if job.close_after_reply
                || sess.close_after_reply
                || sess.close_asap
                || srv.shutting_down
            {
                break;
            }
            job.executed = k + 1;
            if argv.is_empty() {
                continue;
            }
            execute_one(
                srv,
                &mut sess,
                argv,
                job_found[k],
                job.out,
                now_ms,
                &mut timer,
            );
            if sess.paused {
                // Held by CLIENT PAUSE: this command and the rest stay
                // with the IO layer until Event::Unblocked.
                job.executed = k;
                job.blocked = true;
                break;
            }
            if sess.close_after_reply {
                job.close_after_reply = true;
            }
            if sess.blocked.is_some() {
                job.blocked = true;
                break;
            }
        }
        if sess.close_after_reply || sess.close_asap || srv.shutting_down {
            job.close_after_reply = true;
        }
        sess.net_output_bytes += (job.out.len() - start_len) as u64;
        job.output_class = sess.output_class();
        job.auth_required = !sess.authenticated;
        job.resp3 = sess.proto == resp::Protocol::Resp3;
        job.in_multi = sess.multi.is_some();
        if let Some(slot) = srv.clients.map.get_mut(&job.client.0) {
            *slot = Some(sess);
        }
    }
    timer.switch(srv, None);
    srv.lazyfree.collect(&mut srv.keyspace);
    // The hint points into this batch's buffers.
    srv.key_hint = server::KeyHint::default();
    tracking::broadcast(srv);
}
