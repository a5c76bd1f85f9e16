//! Server-wide state the commands share: keyspace, config, sessions of the
//! other clients, stats, pending events.

use crate::session::Session;
use crate::table::{FnvBuild, table};
use crate::{ClientId, Config, Event, NetStats};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use store::Keyspace;

/// What the allocator reports (the server crate plugs jemalloc in through
/// [`crate::Engine::set_memory_probe`]; the engine itself has no allocator
/// dependency).
#[derive(Clone, Copy, Debug, Default)]
pub struct MemoryStats {
    /// INFO `used_memory`: what the program holds. The one figure every
    /// used-memory report (INFO, MEMORY STATS, peak, startup) reads, so its
    /// source can change in the probe alone: jemalloc's `stats.allocated`
    /// today, a counting allocator's total later.
    pub used: u64,
    /// Bytes handed out to the program (jemalloc `stats.allocated`).
    pub allocated: u64,
    /// Bytes in active pages (`stats.active`).
    pub active: u64,
    /// Bytes mapped resident by the allocator (`stats.resident`).
    pub resident: u64,
    /// Bytes mapped but given back to the OS (`stats.retained`).
    pub retained: u64,
    /// Bytes of the allocator's own metadata (`stats.metadata`).
    pub metadata: u64,
    /// Bytes in pages purged lazily, still mapped (`pmuzzy` × page size).
    pub muzzy: u64,
    /// Bytes of free regions inside the small size classes' slabs
    /// (Valkey 8's `allocator_frag_bytes`: what active defragmentation
    /// can win back), when the allocator tells.
    pub frag_smallbins: Option<u64>,
    /// Name for INFO `mem_allocator`, e.g. "jemalloc-5.3.0".
    pub allocator: &'static str,
}

/// What the allocator does on request (MEMORY MALLOC-STATS, MEMORY PURGE),
/// plugged in by the server crate with [`crate::Engine::set_allocator_ops`].
#[derive(Clone, Copy, Debug)]
pub struct AllocatorOps {
    /// The allocator's own statistics report (jemalloc's
    /// `malloc_stats_print`).
    pub stats_text: fn() -> String,
    /// Give unused dirty pages back to the OS; false if the allocator
    /// refused.
    pub purge: fn() -> bool,
    /// Run the allocator's background purging thread or stop it
    /// (`jemalloc-bg-thread`); false if the allocator refused.
    pub background_thread: fn(bool) -> bool,
    /// Moves a block to a fuller slab when that pays (active
    /// defragmentation); `None` where the allocator cannot tell.
    pub relocate: Option<store::Relocate>,
}

pub type MemoryProbe = fn() -> MemoryStats;

/// Bytes the process has allocated now, cheap enough to read before every
/// command (the server crate plugs in its counting allocator through
/// [`crate::Engine::set_used_memory_probe`]): INFO `used_memory` and the
/// `maxmemory` check.
pub type UsedMemoryProbe = fn() -> u64;

/// For tests: used memory as a function of the keyspace, so that eviction
/// is deterministic ([`crate::Engine::set_used_memory_model`]).
pub type UsedMemoryModel = fn(&Keyspace) -> u64;

/// Raises the process's open-file limit towards the number asked for and
/// returns the limit now in force (the server crate plugs in
/// `setrlimit`; the engine makes no such system call itself).
pub type FileLimit = fn(u64) -> u64;
/// Binds the TCP listeners for a configuration's `bind` and `port` (CONFIG
/// SET); the event loop swaps them in. An error leaves the old ones.
pub type Listen = fn(&crate::Config) -> Result<(), String>;

/// `locale-collate` through the C library: make a locale the collation
/// one (false: no such locale), and compare two strings by it (each up
/// to its first NUL, as a C string).
#[derive(Clone, Copy)]
pub struct Collation {
    pub set_locale: fn(&str) -> bool,
    pub collate: fn(&[u8], &[u8]) -> std::cmp::Ordering,
}

/// What the process's OOM score (`/proc/self/oom_score_adj`) should be,
/// from `oom-score-adj` and `oom-score-adj-values` for the server's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OomScore {
    /// `no`: as it was before the server changed it.
    Leave,
    /// `yes` / `relative`: this much above what it was.
    Relative(i32),
    /// `absolute`: this.
    Absolute(i32),
}

/// Sets the OOM score (the server crate writes the file; the engine only
/// decides the value). False: it could not (logged).
pub type SetOomScore = fn(OomScore) -> bool;

/// The first key of the running command and its hash, computed once in
/// the batch's prefetch pass (see [`crate::command::Ctx::key_hash`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct KeyHint {
    pub ptr: usize,
    pub len: usize,
    pub hash: u64,
}

/// Per-command counters (INFO commandstats).
#[derive(Clone, Copy, Debug, Default)]
pub struct CmdStat {
    pub calls: u64,
    pub usec: u64,
    pub rejected_calls: u64,
    pub failed_calls: u64,
}

#[derive(Default)]
pub struct Stats {
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub total_commands_processed: u64,
    pub total_connections_received: u64,
    pub rejected_connections: u64,
    /// The next error reply recorded was already counted (set by a
    /// script whose error came from a command it ran).
    pub error_counted: bool,
    /// The command's error reply is data it was asked for (DEBUG ERROR):
    /// neither errorstats nor failed_calls count it, as Valkey's
    /// addReplySds bypasses them.
    pub error_is_data: bool,
    pub total_error_replies: u64,
    /// Errors by first word (`ERR`, `WRONGTYPE`, ...).
    pub errors: BTreeMap<String, u64>,
    /// Indexed like [`crate::table::Table::entries`].
    pub commands: Vec<CmdStat>,
    /// Call durations per command (`latency-tracking`).
    pub latency: crate::latency_stats::LatencyStats,
    pub expired_keys_active: u64,
    pub unexpected_error_replies: u64,
    pub total_reads_processed: u64,
    pub total_writes_processed: u64,
    pub evicted_clients: u64,
    /// Keys removed by `maxmemory` eviction.
    pub evicted_keys: u64,
    pub client_query_buffer_limit_disconnections: u64,
    pub client_output_buffer_limit_disconnections: u64,
    pub protocol_errors: u64,
    pub peak_memory: u64,
    /// The instantaneous metrics: commands, network bytes in and out,
    /// replication bytes in and out.
    pub ops_rate: Rate,
    pub in_rate: Rate,
    pub out_rate: Rate,
    pub repl_in_rate: Rate,
    pub repl_out_rate: Rate,
    /// Loop cycles per second, and the mean length of one (µs).
    pub cycles_rate: Rate,
    pub cycle_length: Rate,
    pub sample_idx: usize,
    /// The loop that runs the engine (the inline loop, or the execution
    /// thread): cycles that did something, the nanoseconds they took,
    /// and of those the nanoseconds commands took (INFO's `eventloop_*`).
    pub eventloop_cycles: u64,
    pub eventloop_ns: u64,
    pub eventloop_cmd_ns: u64,
    /// INFO debug: the longest cycle, the most commands one cycle ran
    /// (counted from `cycle_cmds_mark`, the command total at the end of
    /// the cycle before), and the time cron and the AOF hand-off took.
    pub eventloop_max_ns: u64,
    pub eventloop_cmds_max: u64,
    pub cycle_cmds_mark: u64,
    pub eventloop_cron_ns: u64,
    pub eventloop_aof_ns: u64,
    /// Prefetch passes over a batch's keys, and the keys they covered.
    pub prefetch_batches: u64,
    pub prefetch_entries: u64,
    pub last_sample_ms: i64,
}

/// One instantaneous metric: how fast a running total grows against a
/// base (time, or another total), over the last 16 samples (Valkey takes
/// one every 100 ms).
#[derive(Clone, Debug, Default)]
pub struct Rate {
    samples: [u64; 16],
    last_total: u64,
    last_base: u64,
}

impl Rate {
    /// Sample `total` into slot `idx`, `dt_ms` after the last sample
    /// (0: the first, which only sets the base): growth per second.
    pub fn sample(&mut self, idx: usize, total: u64, dt_ms: i64) {
        if dt_ms > 0 {
            self.samples[idx % 16] = total.saturating_sub(self.last_total) * 1000 / dt_ms as u64;
        }
        self.last_total = total;
    }

    /// Sample `total`'s growth per unit of `base`'s since the last sample
    /// (0 when `base` did not move).
    pub fn sample_per(&mut self, idx: usize, total: u64, base: u64) {
        let d = base.saturating_sub(self.last_base);
        self.samples[idx % 16] = total
            .saturating_sub(self.last_total)
            .checked_div(d)
            .unwrap_or(0);
        (self.last_total, self.last_base) = (total, base);
    }

    /// The mean of the samples (per second for [`Rate::sample`]).
    pub fn mean(&self) -> u64 {
        self.samples.iter().sum::<u64>() / self.samples.len() as u64
    }
}

/// Valkey tracks at most this many distinct error prefixes.
const MAX_ERROR_KINDS: usize = 128;

impl Stats {
    /// Count `reply` in errorstats if it is an error reply; whether it was.
    pub fn record_error_reply(&mut self, reply: &[u8]) -> bool {
        let Some(line) = reply.strip_prefix(b"-") else {
            return false;
        };
        let end = line.iter().position(|&b| b == b'\r').unwrap_or(line.len());
        self.record_error(&String::from_utf8_lossy(&line[..end]));
        true
    }

    /// Count one error reply; `msg` is the text after `-`.
    pub fn record_error(&mut self, msg: &str) {
        // A script's error reply that repeats an error already counted
        // where it happened (Valkey's ERR_REPLY_FLAG_NO_STATS_UPDATE).
        if std::mem::take(&mut self.error_counted) {
            return;
        }
        // `msg` is the reply line after its `-`. Valkey's afterErrorReply:
        // the code is what precedes the first space within the line's
        // first 32 bytes (its `-` counted), else ERR; a message that
        // starts with `-` itself (`--X y`) counts as `-X`.
        let kind = match msg.bytes().take(31).position(|b| b == b' ') {
            Some(i) => &msg[..i],
            None => "ERR",
        };
        self.total_error_replies += 1;
        if let Some(n) = self.errors.get_mut(kind) {
            *n += 1;
        } else if self.errors.len() < MAX_ERROR_KINDS {
            self.errors.insert(kind.to_string(), 1);
        }
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&mut self) {
        let n = self.commands.len();
        // Kept, as Valkey keeps its cycle's starting count: the cycle
        // that reset counts no commands.
        let (mark, peak) = (self.cycle_cmds_mark, self.peak_memory);
        *self = Stats::default();
        self.commands = vec![CmdStat::default(); n];
        self.cycle_cmds_mark = mark;
        // As Valkey's: used_memory_peak survives CONFIG RESETSTAT.
        self.peak_memory = peak;
    }
}

/// The sessions of all connected clients. A session is taken out while its
/// job runs (so a command holds `&mut Session` and `&mut Server` at once);
/// its slot stays, holding `None`, meanwhile.
#[derive(Default)]
pub struct Clients {
    pub map: HashMap<u64, Option<Box<Session>>, FnvBuild>,
}

impl Clients {
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    pub fn get(&self, id: ClientId) -> Option<&Session> {
        self.map.get(&id.0).and_then(|s| s.as_deref())
    }
    pub fn get_mut(&mut self, id: ClientId) -> Option<&mut Session> {
        self.map.get_mut(&id.0).and_then(|s| s.as_deref_mut())
    }
    /// Ids of all clients (including one whose session is taken out), sorted
    /// by id, which is connection order (CLIENT LIST order).
    pub fn ids(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.map.keys().copied().collect();
        v.sort_unstable();
        v
    }
}

pub struct Server {
    pub keyspace: Keyspace,
    /// Users and their permissions (ACL, AUTH).
    pub acl: crate::acl::Acl,
    pub config: Config,
    pub stats: Stats,
    /// LATENCY LATEST / HISTORY: spikes by event class.
    pub latency_monitor: crate::latency_monitor::LatencyMonitor,
    pub net: NetStats,
    pub events: Vec<Event>,
    pub clients: Clients,
    /// The file CONFIG REWRITE writes back to.
    pub config_file: Option<PathBuf>,
    /// Shared with the IO layer, which takes ids for connections it
    /// accepts while a script is busy (registered after it).
    pub next_client_id: std::sync::Arc<std::sync::atomic::AtomicU64>,
    pub started: Instant,
    pub start_ms: i64,
    /// Tests pin the clock here (ms since the epoch).
    pub clock_override: Option<i64>,
    /// Inside a script or a transaction: when it started (µs), what TIME
    /// answers there (Valkey caches the time once per outermost call).
    pub time_frozen_us: Option<i64>,
    /// A script or function is running (its commands are a script's:
    /// SORT orders a set it would leave in hash order, as Valkey's).
    pub in_script: bool,
    pub memory_probe: Option<MemoryProbe>,
    pub used_memory_probe: Option<UsedMemoryProbe>,
    pub used_memory_model: Option<UsedMemoryModel>,
    /// `maxmemory` eviction between runs.
    pub evict: crate::evict::Evictor,
    /// `activedefrag`'s run and counters.
    pub defrag: crate::defrag::ActiveDefrag,
    /// MEMORY MALLOC-STATS and PURGE; `None`: not supported.
    pub allocator_ops: Option<AllocatorOps>,
    /// Used memory when the server became ready (INFO
    /// `used_memory_startup`), see [`crate::Engine::server_ready`].
    pub startup_memory: u64,
    /// CONFIG SET maxclients / io-threads raise the open-file limit
    /// through this; `None` (tests): no limit to mind.
    pub file_limit: Option<FileLimit>,
    /// `oom-score-adj` is applied through this; `None` (tests): not at all.
    pub oom_score: Option<SetOomScore>,
    /// CONFIG SET `port` / `bind` listen through this; `None` (tests, no
    /// network): the values are taken as they are.
    pub listen: Option<Listen>,
    /// `locale-collate`; `None` (tests): the C locale's, byte order up to
    /// a NUL.
    pub collation: Option<Collation>,
    /// Writes the process title, and the program's `argv[0]` for its
    /// `{title}`; `None` (tests): no title.
    pub proc_title: Option<(crate::proc_title::SetProcTitle, String)>,
    /// DEBUG SET-ACTIVE-EXPIRE.
    pub active_expire_enabled: bool,
    /// DEBUG SET-DISABLE-DENY-SCRIPTS: scripts may call commands flagged
    /// `noscript` (test suites use it to call DEBUG and CLIENT from Lua).
    pub script_deny_disabled: bool,
    /// DEBUG PAUSE-CRON: cron does nothing (test suites use it to keep
    /// background work from doing what a command should).
    pub cron_paused: bool,
    /// SHUTDOWN was accepted: no more commands run.
    pub shutting_down: bool,
    /// 40 hex chars, fixed per process (INFO run_id).
    pub run_id: String,
    pub executable: String,
    pub key_hint: KeyHint,
    /// Clients blocked on keys.
    pub blocking: crate::blocking::Blocking,
    /// Clients with [`Session::pending`] output for the IO layer.
    pub outbox: Vec<ClientId>,
    /// Clients in MONITOR mode, in the order they asked.
    pub monitors: Vec<ClientId>,
    pub commandlog: crate::commandlog::CommandLog,
    /// CLIENT PAUSE in force.
    pub pause: Option<Box<crate::pause::Pause>>,
    /// A shutdown waiting for its replicas (`shutdown-timeout`).
    pub shutdown: Option<Box<crate::shutdown::Pending>>,
    pub tracking: crate::tracking::Tracking,
    /// While a client's command runs: pushes for that very client (the
    /// messages it publishes to itself, its keyspace events, including
    /// those of a transaction's or a script's commands), written after
    /// the command's reply, as Valkey's `pending_push_messages`. Tagged
    /// with the client: others run meanwhile (waiters served) write theirs
    /// at once.
    pub pending_pushes: Option<(ClientId, Vec<u8>)>,
    /// Pub/Sub subscribers.
    pub pubsub: crate::pubsub::PubSub,
    /// WATCHed keys.
    pub watches: crate::watch::Watches,
    /// The store logs keys deleted by expiry (someone WATCHes, or
    /// `expired` keyspace events are on); see [`Server::sync_expiry_logging`].
    pub expiry_logging: bool,
    /// Read lookups that missed, while `keymiss` events are on.
    pub keymisses: crate::pubsub::KeyMisses,
    /// Large values freed off this thread.
    pub lazyfree: crate::lazyfree::LazyFree,
    /// `client-output-buffer-limit` as the IO threads read it; see
    /// [`Server::sync_output_limits`].
    pub output_limits: std::sync::Arc<crate::output::OutputLimits>,
    /// RDB: dirty counter, save points, the BGSAVE or load in progress.
    pub persist: crate::persist::Persist,
    /// MIGRATE's connections (none: MIGRATE cannot connect).
    pub migrator: Option<Box<dyn crate::migrate::Migrator>>,
    /// The write-effects stream (on while the AOF or a replica reads it).
    pub effects: crate::effects::Effects,
    /// The append-only file: its state and INFO figures.
    pub aof: crate::aof::Aof,
    /// Replication: the primary this server follows, the offsets.
    pub repl: crate::replication::Replication,
    /// The Lua state and EVAL's script cache (created on first use; taken
    /// out while a script runs).
    pub scripts: Option<Box<script::Scripts>>,
    /// FUNCTION's libraries and their Lua state (created on first use;
    /// taken out while a function runs).
    pub functions: Option<Box<script::functions::Functions>>,
    /// A running script's busy state, shared with the IO layer (which
    /// answers other clients from it while the script is busy).
    pub busy: std::sync::Arc<crate::busy::BusyState>,
    /// `maxmemory` was exceeded (and eviction could not help) when the
    /// running top-level command began: Valkey's `pre_command_oom_state`,
    /// which scripts' denyoom commands are judged by.
    pub pre_command_oom: bool,
}

impl Server {
    /// Compare `a` and `b` as SORT ... ALPHA does (strcoll(3) in
    /// `locale-collate`).
    pub fn collate(&self, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
        match self.collation {
            Some(c) => (c.collate)(a, b),
            None => c_str(a).cmp(c_str(b)),
        }
    }

    /// `hide-user-data-from-log`: log lines leave out what users put in
    /// (client names and users, query buffers).
    pub fn hides_user_data(&self) -> bool {
        self.config.get("hide-user-data-from-log").as_deref() != Some("no")
    }

    /// `jemalloc-bg-thread` as configured, through the allocator (Valkey's
    /// set_jemalloc_bg_thread: a refusal is not an error).
    pub fn apply_allocator_background_thread(&self) {
        if let Some(ops) = self.allocator_ops {
            let on = self.config.get("jemalloc-bg-thread").as_deref() == Some("yes");
            (ops.background_thread)(on);
        }
    }

    /// Write the process title from `proc-title-template` (Valkey's
    /// serverSetProcTitle); false if it could not be written.
    pub fn apply_proc_title(&self) -> bool {
        let Some((set, title)) = &self.proc_title else {
            return true;
        };
        let file = self.config_file.as_ref().map(|f| f.display().to_string());
        let vars = crate::proc_title::Vars {
            title,
            config: &self.config,
            config_file: file.as_deref(),
        };
        let template = self.config.get("proc-title-template").unwrap_or_default();
        crate::proc_title::expand(&template, &vars).is_some_and(|t| set(&t))
    }

    /// The process title again where `set-proc-title` asks for one (after
    /// the listeners moved: `{listen-addr}` and `{port}` follow them).
    pub fn refresh_proc_title(&self) {
        if self.config.get("set-proc-title").as_deref() == Some("yes") {
            self.apply_proc_title();
        }
    }

    /// Apply `oom-score-adj` for the current role (Valkey's
    /// `setOOMScoreAdj(-1)`); false if the score could not be set.
    pub fn apply_oom_score(&self) -> bool {
        let Some(set) = self.oom_score else {
            return true;
        };
        let values: Vec<i32> = self
            .config
            .get("oom-score-adj-values")
            .unwrap_or_default()
            .split(' ')
            .filter_map(|v| v.parse().ok())
            .collect();
        let class = usize::from(self.repl.is_replica());
        let value = values.get(class).copied().unwrap_or(0);
        let want = match self.config.get("oom-score-adj").as_deref() {
            Some("yes" | "relative") => OomScore::Relative(value),
            Some("absolute") => OomScore::Absolute(value),
            _ => OomScore::Leave,
        };
        set(want)
    }

    /// A server with an empty keyspace of `config.databases` databases.
    /// Stable API: the command tests build their fixture with it.
    pub fn new(config: Config) -> Server {
        let start_ms = wall_ms();
        let exe = std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let mut srv = Server {
            keyspace: Keyspace::new(config.databases),
            config,
            stats: Stats {
                commands: vec![CmdStat::default(); table().len()],
                ..Stats::default()
            },
            latency_monitor: Default::default(),
            net: NetStats::default(),
            events: Vec::new(),
            clients: Clients::default(),
            config_file: None,
            next_client_id: std::sync::Arc::new(std::sync::atomic::AtomicU64::new(1)),
            started: Instant::now(),
            start_ms,
            clock_override: None,
            time_frozen_us: None,
            in_script: false,
            memory_probe: None,
            used_memory_probe: None,
            used_memory_model: None,
            evict: Default::default(),
            defrag: Default::default(),
            allocator_ops: None,
            startup_memory: 0,
            file_limit: None,
            listen: None,
            proc_title: None,
            collation: None,
            oom_score: None,
            active_expire_enabled: true,
            script_deny_disabled: false,
            cron_paused: false,
            shutting_down: false,
            run_id: make_run_id(start_ms),
            executable: exe,
            key_hint: KeyHint::default(),
            blocking: Default::default(),
            outbox: Vec::new(),
            monitors: Vec::new(),
            commandlog: Default::default(),
            pause: None,
            shutdown: None,
            tracking: Default::default(),
            pending_pushes: None,
            pubsub: Default::default(),
            watches: Default::default(),
            keymisses: Default::default(),
            expiry_logging: false,
            lazyfree: Default::default(),
            output_limits: Default::default(),
            persist: crate::persist::Persist::new(start_ms / 1000),
            migrator: None,
            effects: crate::effects::Effects::default(),
            aof: crate::aof::Aof::default(),
            repl: crate::replication::Replication::new(""),
            scripts: None,
            functions: None,
            busy: Default::default(),
            pre_command_oom: false,
            acl: crate::acl::Acl::new(),
        };
        srv.acl.pubsub_default_all = srv.config.acl_pubsub_all();
        srv.acl
            .set_default_password(srv.config.requirepass.as_deref());
        // Checked as the config (or the ACL file) was read.
        for u in srv.config.users.clone() {
            srv.acl.declare(&u);
        }
        srv.repl.replid = srv.run_id.clone();
        srv.sync_expiry_logging();
        srv.sync_output_limits();
        srv.sync_store_settings();
        srv.sync_busy_auth();
        srv
    }

    /// The busy state answers AUTH while a script runs: it keeps a copy of
    /// the users' credentials (start-up, CONFIG SET requirepass, ACL
    /// SETUSER / DELUSER).
    pub fn sync_busy_auth(&self) {
        self.busy.set_credentials(self.acl.credentials());
    }

    /// Tell the store how to stamp accesses for `maxmemory-policy` (LRU
    /// clock, or LFU counter with `lfu-log-factor`/`lfu-decay-time`), and
    /// which removals leave large values to the lazyfree thread
    /// (`lazyfree-lazy-expire`, `lazyfree-lazy-server-del`); whether keys
    /// expire (`import-mode`, see `expiry_mode`); the process-wide
    /// `extended-redis-compatibility` (`compat`). Call after CONFIG SET.
    pub fn sync_store_settings(&mut self) {
        let p = crate::evict::access_policy(self);
        self.keyspace.set_access_policy(p);
        self.keyspace.set_lazy_removals(store::LazyRemovals {
            expired: self.config.lazyfree_lazy_expire,
            overwritten: self.config.lazyfree_lazy_server_del,
        });
        crate::expiry_mode::apply(self);
        crate::compat::set(self.config.extended_redis_compat);
    }

    /// Bytes in use as `maxmemory` sees them: the counting allocator's
    /// figure, or the test's model; 0 when the engine has neither (no
    /// limit can apply).
    pub fn used_memory(&self) -> u64 {
        if let Some(p) = self.used_memory_probe {
            p()
        } else if let Some(m) = self.used_memory_model {
            m(&self.keyspace)
        } else {
            0
        }
    }

    /// Is there a used-memory figure (probe or model) at all?
    pub fn has_used_memory(&self) -> bool {
        self.used_memory_probe.is_some() || self.used_memory_model.is_some()
    }

    /// Publish the configured output buffer limits to the IO layer, which
    /// applies them to connected clients from their next write on. Call
    /// after CONFIG SET.
    pub fn sync_output_limits(&self) {
        use crate::output::OutputClass;
        let (c, l) = (&self.config, &self.output_limits);
        l.set(OutputClass::Normal, c.client_output_buffer_limit_normal);
        l.set(OutputClass::Pubsub, c.client_output_buffer_limit_pubsub);
    }

    /// Turn the store's expired-key log on while WATCH or `expired`
    /// notifications need it, off otherwise (it costs a copy per key), and
    /// the log of read misses while `keymiss` notifications are on.
    /// Call after WATCH/UNWATCH and CONFIG SET.
    pub fn sync_expiry_logging(&mut self) {
        use crate::command::notify::{EXPIRED, KEY_MISS, KEYEVENT, KEYSPACE};
        let n = self.config.notify_keyspace_events;
        self.keymisses
            .set_on(n & KEY_MISS != 0 && n & (KEYSPACE | KEYEVENT) != 0);
        let want = !self.watches.is_empty()
            || self.effects.on()
            || self.tracking.clients > 0
            || (n & EXPIRED != 0 && n & (KEYSPACE | KEYEVENT) != 0);
        if want != self.expiry_logging {
            self.expiry_logging = want;
            for db in self.keyspace.dbs.iter_mut() {
                db.log_expired = want;
                if !want {
                    db.take_expired();
                }
            }
        }
    }

    /// `calls` calls of command `cmd` took `ns_each` each: INFO
    /// latencystats and LATENCY HISTOGRAM while `latency-tracking` is on,
    /// and a `command` or `fast-command` spike for the latency monitor.
    #[inline]
    pub fn record_latency(&mut self, cmd: usize, ns_each: u64, calls: u64) {
        if self.config.latency_tracking {
            self.stats.latency.record(cmd, ns_each, calls);
        }
        let threshold = self.config.latency_monitor_threshold_ms;
        if threshold > 0 && ns_each >= threshold * 1_000_000 {
            let fast = crate::table::table().entries[cmd].spec.flags & crate::command::flags::FAST;
            let event = if fast != 0 { "fast-command" } else { "command" };
            let now = self.now_ms();
            self.latency_monitor
                .add_if_needed(threshold, event, ns_each / 1_000_000, now);
        }
    }

    /// A start time for [`Server::latency_event_since`], read only while
    /// the latency monitor is on.
    #[inline]
    pub fn latency_watch(&self) -> Option<Instant> {
        (self.config.latency_monitor_threshold_ms > 0).then(Instant::now)
    }

    /// The work since `watch` was the latency event `event`.
    pub fn latency_event_since(
        &mut self,
        watch: Option<Instant>,
        event: &'static str,
        now_ms: i64,
    ) {
        if let Some(t) = watch {
            let ms = t.elapsed().as_millis() as u64;
            let threshold = self.config.latency_monitor_threshold_ms;
            self.latency_monitor
                .add_if_needed(threshold, event, ms, now_ms);
        }
    }

    /// Unix time in ms (the pinned time in tests).
    pub fn now_ms(&self) -> i64 {
        self.clock_override.unwrap_or_else(wall_ms)
    }

    /// Freeze TIME's answer at now for a script or transaction unless an
    /// outer one froze it; the earlier state, for [`Server::thaw_time`].
    pub fn freeze_time(&mut self) -> Option<i64> {
        let before = self.time_frozen_us;
        if before.is_none() {
            self.time_frozen_us = Some(self.now_us());
        }
        before
    }

    pub fn thaw_time(&mut self, before: Option<i64>) {
        self.time_frozen_us = before;
    }

    /// Unix time in µs (MONITOR's timestamps).
    pub fn now_us(&self) -> i64 {
        match self.clock_override {
            Some(t) => t * 1000,
            None => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_micros() as i64)
                .unwrap_or(0),
        }
    }

    pub fn uptime_s(&self) -> i64 {
        match self.clock_override {
            Some(t) => (t - self.start_ms).max(0) / 1000,
            None => self.started.elapsed().as_secs() as i64,
        }
    }

    /// Does a client still need AUTH before running commands?
    pub fn auth_required(&self) -> bool {
        self.acl.auth_required()
    }

    /// Write to another client outside its own replies (pub/sub messages):
    /// `f` gets a writer in that client's protocol; the bytes reach it
    /// through [`crate::Engine::drain_output`], or ahead of its next batch's
    /// replies. False if there is no such client, or it is the one whose
    /// command is running now (write to `ctx.reply` instead).
    pub fn write_to(
        &mut self,
        client: ClientId,
        f: impl FnOnce(&mut resp::ReplyWriter<'_>),
    ) -> bool {
        let Some(sess) = self.clients.get_mut(client) else {
            return false;
        };
        let mut w = resp::ReplyWriter::new(&mut sess.pending, sess.proto);
        f(&mut w);
        if !sess.pending_queued && !sess.pending.is_empty() {
            sess.pending_queued = true;
            self.outbox.push(client);
        }
        true
    }

    /// The allocator's figures. Without a probe (tests, a build without
    /// jemalloc) every figure is the process's RSS, as Valkey falls back
    /// for allocators that report nothing.
    pub fn memory(&self) -> MemoryStats {
        let mut m = match self.memory_probe {
            Some(p) => p(),
            None => {
                let rss = crate::info::rss_bytes();
                MemoryStats {
                    used: rss,
                    allocated: rss,
                    active: rss,
                    resident: rss,
                    allocator: "libc",
                    ..MemoryStats::default()
                }
            }
        };
        // The counter eviction reads is what INFO shows as used_memory.
        if self.has_used_memory() {
            m.used = self.used_memory();
        }
        m
    }

    pub fn note_used_memory(&mut self, used: u64) {
        if used > self.stats.peak_memory {
            self.stats.peak_memory = used;
        }
    }
}

pub fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

pub fn wall_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// A new replication id (REPLICAOF NO ONE, a failed sync): 40 hex chars
/// that differ per call.
pub fn new_replid() -> String {
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    make_run_id(wall_us() ^ (n as i64).wrapping_mul(0x9E37_79B9_7F4A_7C15_u64 as i64))
}

/// A run id that differs per process: mixes time, pid and an address.
fn make_run_id(start_ms: i64) -> String {
    let mut x = (start_ms as u64) ^ ((std::process::id() as u64) << 32);
    let local = 0u8;
    x ^= &local as *const u8 as u64;
    let mut s = String::with_capacity(40);
    for _ in 0..40 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push(char::from_digit((x & 15) as u32, 16).unwrap());
    }
    s
}

/// The bytes C's string functions see: up to the first NUL.
pub(crate) fn c_str(b: &[u8]) -> &[u8] {
    b.split(|&c| c == 0).next().unwrap_or(b)
}
