//! Configuration in valkey.conf syntax: the directive table (every Valkey 8
//! name, so a real valkey.conf loads), file and command-line parsing, and the
//! validation CONFIG GET/SET/REWRITE share.
//!
//! Every directive has a canonical string value (what CONFIG GET prints);
//! the ones ringkv acts on are mirrored into typed fields that the rest of
//! the server reads without parsing. Directives ringkv does not implement
//! are validated like Valkey does, stored, and reported once in
//! [`Config::warnings`] when set to something other than their default.

use crate::log::Level;
use std::fmt;
use std::path::Path;

/// The version string Valkey reports for Redis compatibility.
pub const REDIS_COMPAT_VERSION: &str = "7.2.4";

/// The Valkey release whose behaviour ringkv follows (its differential
/// tests run against it), reported where Valkey reports its own version
/// (INFO `valkey_version`, HELLO's `version`): clients gate features on it.
pub const VALKEY_COMPAT_VERSION: &str = "8.1.8";

/// `io-uring auto|yes|no`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoUringMode {
    Auto,
    Yes,
    No,
}

/// `repl-diskless-load`: where a replica puts its primary's RDB on the way
/// to memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DisklessLoad {
    /// Into `dbfilename`, then loaded from it.
    Disabled,
    /// From the socket when the dataset is empty, else through the disk.
    OnEmptyDb,
    /// From the socket, the old dataset kept aside until the new one is
    /// in (and back if the transfer fails).
    Swapdb,
    /// The dataset is flushed, then loaded from the socket.
    FlushBeforeLoad,
}

/// `enable-debug-command` / `enable-protected-configs`: no, yes or local.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allowed {
    No,
    Yes,
    Local,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Bool,
    Int {
        min: i64,
        max: i64,
    },
    /// Integer with k/kb/m/mb/g/gb units; CONFIG GET shows bytes.
    Mem {
        min: i64,
        max: i64,
        percent: bool,
    },
    Enum(&'static [&'static str]),
    /// Several enum flags in one value (shutdown-on-sigint).
    Flags(&'static [&'static str]),
    Str,
    Octal,
    Special,
}

/// Directives Valkey 8.1 reads from a file with one argument and ignores.
const DEPRECATED: [&str; 5] = [
    "list-max-ziplist-entries",
    "list-max-ziplist-value",
    "lua-replicate-commands",
    "io-threads-do-reads",
    "dynamic-hz",
];

const IMM: u8 = 1;
const SENS: u8 = 2;
const MULTI: u8 = 4;
const HIDDEN: u8 = 8;
/// ringkv acts on it (no "not supported" warning).
const SUP: u8 = 16;
/// Refused by CONFIG SET unless enable-protected-configs allows it.
const PROT: u8 = 32;
/// With IMM: set at start-up only, where Valkey has no such setting
/// (ringkv's own). CONFIG SET
/// takes the value it already has, as a no-op, so that a tool writing
/// back what CONFIG GET * said works; another value is refused.
const START_ONLY: u8 = 64;
/// Refused by CONFIG SET while a load fills the databases (Valkey's
/// `DENY_LOADING_CONFIG`): acting on a half-loaded dataset (an AOF
/// rewritten from it) or moving the files under the load.
const DENY_LOADING: u8 = 128;

#[derive(Clone, Copy, Debug)]
struct Def {
    name: &'static str,
    alias: Option<&'static str>,
    kind: Kind,
    flags: u8,
    default: &'static str,
}

const fn def(name: &'static str, kind: Kind, flags: u8, default: &'static str) -> Def {
    Def {
        name,
        alias: None,
        kind,
        flags,
        default,
    }
}
const fn al(mut d: Def, alias: &'static str) -> Def {
    d.alias = Some(alias);
    d
}
const fn b(name: &'static str, default: bool, flags: u8) -> Def {
    def(name, Kind::Bool, flags, if default { "yes" } else { "no" })
}
const fn i(name: &'static str, min: i64, max: i64, default: &'static str, flags: u8) -> Def {
    def(name, Kind::Int { min, max }, flags, default)
}
const fn m(name: &'static str, min: i64, max: i64, default: &'static str, flags: u8) -> Def {
    def(
        name,
        Kind::Mem {
            min,
            max,
            percent: false,
        },
        flags,
        default,
    )
}
const fn e(
    name: &'static str,
    opts: &'static [&'static str],
    default: &'static str,
    flags: u8,
) -> Def {
    def(name, Kind::Enum(opts), flags, default)
}
const fn s(name: &'static str, default: &'static str, flags: u8) -> Def {
    def(name, Kind::Str, flags, default)
}
const fn sp(name: &'static str, default: &'static str, flags: u8) -> Def {
    def(name, Kind::Special, flags | MULTI, default)
}

const INT_MAX: i64 = i32::MAX as i64;
const INT_MIN: i64 = i32::MIN as i64;
const UINT_MAX: i64 = u32::MAX as i64;
const LMAX: i64 = i64::MAX;

const LOGLEVELS: &[&str] = &["debug", "verbose", "notice", "warning", "nothing"];
const PROTECTED: &[&str] = &["no", "yes", "local"];
const SHUTDOWN_FLAGS: &[&str] = &["default", "save", "nosave", "now", "force"];

#[rustfmt::skip]
static DEFS: &[Def] = &[
    // Directives ringkv implements.
    sp("bind", "* -::*", SUP),
    i("port", 0, 65535, "6379", SUP),
    b("protected-mode", true, SUP),
    s("requirepass", "", SUP | SENS),
    i("databases", 1, INT_MAX, "16", SUP | IMM),
    def("maxclients", Kind::Int { min: 1, max: UINT_MAX }, SUP, "10000"),
    i("timeout", 0, INT_MAX, "0", SUP),
    i("tcp-keepalive", 0, INT_MAX, "300", SUP),
    i("tcp-backlog", 0, INT_MAX, "511", SUP | IMM),
    e("io-uring", &["auto", "yes", "no"], "auto", SUP | IMM | START_ONLY),
    // ringkv's own: how long (µs) a loaded io_uring loop may wait to batch
    // completions (see net's `Uring::wait`); 0 = wake on the first one.
    i("io-uring-batch-wait-us", 0, 10_000, "0", SUP | IMM | START_ONLY),
    // ringkv's own: after the event loop last read input, it polls
    // without sleeping for this long (µs) before it sleeps; 0 = sleep at once.
    i("io-busy-poll-us", 0, 10_000, "0", SUP),
    i("io-threads-ring-size", 2, 1 << 20, "4096", SUP | IMM | START_ONLY),
    b("io-threads-idle-exec", true, SUP | IMM | START_ONLY),
    // ringkv's own: the number of IO threads taking connections follows
    // their load (the others sleep, holding no clients).
    b("io-threads-adaptive", true, SUP),
    // ...: an active IO thread busier than this (percent of wall time)
    // brings in another one.
    i("io-threads-adaptive-busy-pct", 1, 100, "70", SUP),
    // Mutable between values above 1 only (cmd/server.rs config_set).
    i("io-threads", 1, 128, "1", SUP),
    s("logfile", "", SUP | IMM),
    e("loglevel", LOGLEVELS, "notice", SUP),
    e("log-format", &["legacy", "logfmt"], "legacy", SUP),
    e("log-timestamp-format", &["legacy", "iso8601", "milliseconds"], "legacy", SUP),
    sp("dir", "", SUP | PROT | DENY_LOADING),
    s("pidfile", "", SUP | IMM),
    b("daemonize", false, SUP | IMM),
    m("client-query-buffer-limit", 1024 * 1024, LMAX, "1073741824", SUP),
    m("proto-max-bulk-len", 1024 * 1024, LMAX, "536870912", SUP),
    i("hz", 0, INT_MAX, "10", SUP),
    m("maxmemory", 0, LMAX, "0", SUP),
    e("enable-debug-command", PROTECTED, "no", SUP | IMM),
    e("enable-protected-configs", PROTECTED, "no", SUP | IMM),
    i("active-expire-effort", 1, 10, "1", SUP),
    // Accepted, validated and stored; not acted on yet.
    b("rdbchecksum", true, IMM | SUP),
    // Valkey 8 reads it from a file and ignores it; CONFIG GET * omits it.
    b("always-show-logo", false, IMM | SUP),
    b("rdbcompression", true, SUP),
    b("rdb-del-sync-files", false, SUP),
    b("activerehashing", true, SUP),
    b("stop-writes-on-bgsave-error", true, SUP),
    b("set-proc-title", true, IMM | SUP),
    // Valkey 8 turned every lazyfree default to yes.
    b("lazyfree-lazy-eviction", true, SUP),
    b("lazyfree-lazy-expire", true, SUP),
    b("lazyfree-lazy-server-del", true, SUP),
    b("lazyfree-lazy-user-del", true, SUP),
    b("lazyfree-lazy-user-flush", true, SUP),
    b("repl-disable-tcp-nodelay", false, SUP),
    b("repl-diskless-sync", true, SUP),
    b("aof-rewrite-incremental-fsync", true, SUP),
    b("no-appendfsync-on-rewrite", false, SUP),
    b("cluster-require-full-coverage", true, 0),
    b("rdb-save-incremental-fsync", true, SUP),
    b("aof-load-truncated", true, SUP),
    b("aof-use-rdb-preamble", true, SUP),
    b("aof-timestamp-enabled", false, SUP),
    al(b("cluster-replica-no-failover", false, 0), "cluster-slave-no-failover"),
    al(b("replica-lazy-flush", true, SUP), "slave-lazy-flush"),
    al(b("replica-serve-stale-data", true, SUP), "slave-serve-stale-data"),
    al(b("replica-read-only", true, SUP), "slave-read-only"),
    al(b("replica-ignore-maxmemory", true, SUP), "slave-ignore-maxmemory"),
    b("jemalloc-bg-thread", true, SUP),
    b("activedefrag", false, SUP),
    b("syslog-enabled", false, IMM | SUP),
    b("cluster-enabled", false, IMM),
    b("appendonly", false, SUP | DENY_LOADING),
    b("cluster-allow-reads-when-down", false, 0),
    b("cluster-allow-pubsubshard-when-down", true, 0),
    b("crash-log-enabled", true, SUP),
    b("crash-memcheck-enabled", true, 0),
    b("use-exit-on-panic", false, HIDDEN),
    b("disable-thp", true, SUP | IMM),
    b("cluster-allow-replica-migration", true, 0),
    b("replica-announced", true, SUP),
    b("latency-tracking", true, SUP),
    b("aof-disable-auto-gc", false, HIDDEN),
    b("replica-ignore-disk-write-errors", false, SUP),
    b("extended-redis-compatibility", false, SUP),
    b("debug-assert-enabled", false, IMM | HIDDEN),
    b("dual-channel-replication-enabled", false, 0),
    b("hide-user-data-from-log", true, SUP),
    b("import-mode", false, SUP),
    b("cluster-slot-stats-enabled", false, 0),
    s("aclfile", "", IMM | SUP),
    s("unixsocket", "", IMM | SUP),
    s("unixsocketgroup", "", IMM | SUP),
    al(s("replica-announce-ip", "", SUP), "slave-announce-ip"),
    al(s("primaryuser", "", SENS | SUP), "masteruser"),
    al(s("primaryauth", "", SENS | SUP), "masterauth"),
    s("cluster-announce-ip", "", 0),
    s("cluster-config-file", "nodes.conf", IMM),
    s("cluster-announce-hostname", "", 0),
    s("cluster-announce-human-nodename", "", 0),
    s("cluster-announce-client-ipv4", "", 0),
    s("cluster-announce-client-ipv6", "", 0),
    s("availability-zone", "", SUP),
    s("syslog-ident", "ringkv", IMM | SUP),
    s("dbfilename", "dump.rdb", PROT | SUP),
    s("appendfilename", "appendonly.aof", IMM | SUP),
    s("appenddirname", "appendonlydir", IMM | SUP),
    al(s("server-cpulist", "", IMM | SUP), "server_cpulist"),
    al(s("bio-cpulist", "", IMM | SUP), "bio_cpulist"),
    al(s("aof-rewrite-cpulist", "", IMM | SUP), "aof_rewrite_cpulist"),
    al(s("bgsave-cpulist", "", IMM | SUP), "bgsave_cpulist"),
    s("ignore-warnings", "", SUP),
    s("proc-title-template", "{title} {listen-addr} {server-mode}", SUP),
    s("bind-source-addr", "", SUP),
    s("locale-collate", "", SUP),
    e("supervised", &["upstart", "systemd", "auto", "no"], "no", IMM | SUP),
    e("syslog-facility", &["user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"], "local0", IMM | SUP),
    e(
        "repl-diskless-load",
        &["disabled", "on-empty-db", "swapdb", "flush-before-load"],
        "disabled",
        SUP | DENY_LOADING,
    ),
    e("rdb-version-check", &["strict", "relaxed"], "strict", SUP),
    e("maxmemory-policy", &["volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru", "allkeys-lfu", "allkeys-random", "noeviction"], "noeviction", SUP),
    e("appendfsync", &["everysec", "always", "no"], "everysec", SUP),
    e("oom-score-adj", &["no", "yes", "relative", "absolute"], "no", SUP),
    e("acl-pubsub-default", &["allchannels", "resetchannels"], "resetchannels", SUP),
    e("sanitize-dump-payload", &["no", "yes", "clients"], "no", SUP),
    e("enable-module-command", PROTECTED, "no", IMM),
    e("cluster-preferred-endpoint-type", &["ip", "hostname", "unknown-endpoint"], "ip", 0),
    e("propagation-error-behavior", &["ignore", "panic", "panic-on-replicas"], "ignore", SUP),
    def("shutdown-on-sigint", Kind::Flags(SHUTDOWN_FLAGS), MULTI | SUP, "default"),
    def("shutdown-on-sigterm", Kind::Flags(SHUTDOWN_FLAGS), MULTI | SUP, "default"),
    e("tls-auth-clients", &["no", "yes", "optional"], "yes", 0),
    i("auto-aof-rewrite-percentage", 0, INT_MAX, "100", SUP),
    al(i("cluster-replica-validity-factor", 0, INT_MAX, "10", 0), "cluster-slave-validity-factor"),
    al(i("list-max-listpack-size", INT_MIN, INT_MAX, "-2", SUP), "list-max-ziplist-size"),
    i("cluster-migration-barrier", 0, INT_MAX, "1", 0),
    i("active-defrag-cycle-min", 1, 99, "1", SUP),
    i("active-defrag-cycle-max", 1, 99, "25", SUP),
    i("active-defrag-cycle-us", 0, 100000, "500", SUP),
    i("active-defrag-threshold-lower", 0, 1000, "10", SUP),
    i("active-defrag-threshold-upper", 0, 1000, "100", SUP),
    i("lfu-log-factor", 0, INT_MAX, "10", SUP),
    i("lfu-decay-time", 0, INT_MAX, "1", SUP),
    al(i("replica-priority", 0, INT_MAX, "100", SUP), "slave-priority"),
    i("repl-diskless-sync-delay", 0, INT_MAX, "5", SUP),
    i("maxmemory-samples", 1, 64, "5", SUP),
    i("maxmemory-eviction-tenacity", 0, 100, "10", SUP),
    al(i("replica-announce-port", 0, 65535, "0", SUP), "slave-announce-port"),
    i("cluster-port", 0, 65535, "0", IMM),
    i("cluster-announce-bus-port", 0, 65535, "0", 0),
    i("cluster-announce-port", 0, 65535, "0", 0),
    i("cluster-announce-tls-port", 0, 65535, "0", 0),
    i("repl-timeout", 1, INT_MAX, "60", SUP),
    // ringkv's own (seed 003): replication writes from this size on go
    // out with MSG_ZEROCOPY to replicas that are not on loopback.
    b("tcp-tx-zerocopy", true, SUP),
    m("tcp-zerocopy-min-write-size", 0, LMAX, "10240", SUP),
    al(i("repl-ping-replica-period", 1, INT_MAX, "10", SUP), "repl-ping-slave-period"),
    i("list-compress-depth", 0, INT_MAX, "0", SUP),
    i("rdb-key-save-delay", INT_MIN, INT_MAX, "0", HIDDEN | SUP),
    i("key-load-delay", INT_MIN, INT_MAX, "0", HIDDEN | SUP),
    al(i("min-replicas-to-write", 0, INT_MAX, "0", SUP), "min-slaves-to-write"),
    al(i("min-replicas-max-lag", 0, INT_MAX, "10", SUP), "min-slaves-max-lag"),
    i("watchdog-period", 0, INT_MAX, "0", HIDDEN),
    i("shutdown-timeout", 0, INT_MAX, "10", SUP),
    i("repl-diskless-sync-max-replicas", 0, INT_MAX, "0", SUP),
    def("unixsocketperm", Kind::Octal, IMM | SUP, "0"),
    i("socket-mark-id", 0, UINT_MAX, "0", IMM | SUP),
    i("max-new-connections-per-cycle", 1, 1000, "10", SUP),
    i("max-new-tls-connections-per-cycle", 1, 1000, "1", 0),
    i("prefetch-batch-max-size", 0, 128, "16", SUP),
    i("active-defrag-max-scan-fields", 1, LMAX, "1000", SUP),
    al(i("commandlog-slow-execution-max-len", 0, LMAX, "128", SUP), "slowlog-max-len"),
    i("commandlog-request-larger-than", -1, LMAX, "1048576", SUP),
    i("commandlog-large-request-max-len", 0, LMAX, "128", SUP),
    i("commandlog-reply-larger-than", -1, LMAX, "1048576", SUP),
    i("commandlog-large-reply-max-len", 0, LMAX, "128", SUP),
    i("acllog-max-len", 0, LMAX, "128", SUP),
    al(i("busy-reply-threshold", 0, LMAX, "5000", SUP), "lua-time-limit"),
    i("cluster-node-timeout", 0, LMAX, "15000", 0),
    i("cluster-blacklist-ttl", 0, LMAX, "60", 0),
    i("cluster-manual-failover-timeout", 1, LMAX, "5000", 0),
    i("cluster-ping-interval", 0, LMAX, "0", HIDDEN),
    al(
        i("commandlog-execution-slower-than", -1, LMAX, "10000", SUP),
        "slowlog-log-slower-than",
    ),
    i("latency-monitor-threshold", 0, LMAX, "0", SUP),
    i("stream-node-max-entries", 0, LMAX, "100", SUP),
    m("repl-backlog-size", 1, LMAX, "10485760", SUP),
    m("cluster-link-sendbuf-limit", 0, LMAX, "0", 0),
    al(i("hash-max-listpack-entries", 0, LMAX, "512", SUP), "hash-max-ziplist-entries"),
    i("set-max-intset-entries", 0, LMAX, "512", SUP),
    i("set-max-listpack-entries", 0, LMAX, "128", SUP),
    i("set-max-listpack-value", 0, LMAX, "64", SUP),
    al(i("zset-max-listpack-entries", 0, LMAX, "128", SUP), "zset-max-ziplist-entries"),
    m("active-defrag-ignore-bytes", 1, LMAX, "104857600", SUP),
    al(m("hash-max-listpack-value", 0, LMAX, "64", SUP), "hash-max-ziplist-value"),
    m("stream-node-max-bytes", 0, LMAX, "4096", SUP),
    al(m("zset-max-listpack-value", 0, LMAX, "64", SUP), "zset-max-ziplist-value"),
    m("hll-sparse-max-bytes", 0, LMAX, "3000", SUP),
    i("tracking-table-max-keys", 0, LMAX, "1000000", SUP),
    def("maxmemory-clients", Kind::Mem { min: -100, max: LMAX, percent: true }, SUP, "0"),
    i("repl-backlog-ttl", 0, LMAX, "3600", SUP),
    m("auto-aof-rewrite-min-size", 0, LMAX, "67108864", SUP),
    i("loading-process-events-interval-bytes", 1024, INT_MAX, "2097152", HIDDEN),
    i("tls-port", 0, 65535, "0", 0),
    i("tls-session-cache-size", 0, INT_MAX, "20480", 0),
    i("tls-session-cache-timeout", 0, INT_MAX, "300", 0),
    b("tls-cluster", false, 0),
    b("tls-replication", false, 0),
    b("tls-prefer-server-ciphers", false, 0),
    b("tls-session-caching", true, 0),
    s("tls-cert-file", "", 0),
    s("tls-key-file", "", 0),
    s("tls-key-file-pass", "", SENS),
    s("tls-client-cert-file", "", 0),
    s("tls-client-key-file", "", 0),
    s("tls-client-key-file-pass", "", SENS),
    s("tls-dh-params-file", "", 0),
    s("tls-ca-cert-file", "", 0),
    s("tls-ca-cert-dir", "", 0),
    s("tls-protocols", "", 0),
    s("tls-ciphers", "", 0),
    s("tls-ciphersuites", "", 0),
    sp("save", "3600 1 300 100 60 10000", SUP),
    sp("client-output-buffer-limit", "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60", SUP),
    sp("oom-score-adj-values", "0 200 800", SUP),
    def("notify-keyspace-events", Kind::Special, SUP, ""),
    al(sp("replicaof", "", IMM | SUP), "slaveof"),
    sp("latency-tracking-info-percentiles", "50 99 99.9", SUP),
];

/// Valkey's `CONFIG_MIN_RESERVED_FDS`.
const RESERVED_FDS: u64 = 32;

/// Valkey's `SENSITIVE_CONFIG`: the value CONFIG SET gives it is never
/// shown (MONITOR, COMMANDLOG).
pub fn is_sensitive(name: &[u8]) -> bool {
    std::str::from_utf8(name)
        .ok()
        .and_then(find_def)
        .is_some_and(|i| DEFS[i].flags & SENS != 0)
}

fn find_def(name: &str) -> Option<usize> {
    DEFS.iter().position(|d| {
        d.name.eq_ignore_ascii_case(name) || d.alias.is_some_and(|a| a.eq_ignore_ascii_case(name))
    })
}

/// One class of `client-output-buffer-limit`: a client whose pending
/// output exceeds `hard` bytes, or stays above `soft` bytes for
/// `soft_seconds`, is disconnected (0 = no limit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutputLimit {
    pub hard: u64,
    pub soft: u64,
    pub soft_seconds: u64,
}

impl OutputLimit {
    /// One class (`normal`, `slave`, `pubsub`) of the directive's stored value
    /// (`normal H S T slave H S T pubsub H S T`, sizes in bytes).
    fn parse_class(v: &str, class: &str) -> OutputLimit {
        let parts: Vec<&str> = v.split(' ').collect();
        parts
            .chunks(4)
            .find(|c| c[0].eq_ignore_ascii_case(class) && c.len() == 4)
            .map(|c| {
                let n = |s: &str| s.parse::<u64>().unwrap_or(0);
                OutputLimit {
                    hard: n(c[1]),
                    soft: n(c[2]),
                    soft_seconds: n(c[3]),
                }
            })
            .unwrap_or_default()
    }

    pub fn is_set(&self) -> bool {
        self.hard > 0 || self.soft > 0
    }
}

/// The start-up warning for a value ringkv accepts but does not act on:
/// an unsupported directive set away from its default, or, of
/// `client-output-buffer-limit` (whose other classes are enforced), a
/// changed replica class.
fn ignored_warning(d: &Def, value: &str) -> Option<String> {
    (d.flags & SUP == 0 && value != d.default && d.flags & HIDDEN == 0)
        .then(|| format!("'{}' is not supported yet, ignored", d.name))
}

/// `activedefrag` and the settings that steer it, as Valkey 8.1 names
/// them (see `crate::defrag`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActiveDefragConfig {
    pub enabled: bool,
    /// Below this many bytes of fragmentation no run starts.
    pub ignore_bytes: u64,
    /// Fragmentation, percent, from which a run starts …
    pub threshold_lower: u32,
    /// … and at which it takes `cycle_max` of the CPU.
    pub threshold_upper: u32,
    /// Share of the CPU, percent, at the lower and upper thresholds.
    pub cycle_min: u32,
    pub cycle_max: u32,
    /// One slice of work, µs.
    pub cycle_us: u32,
    /// Collections of more items are walked apart from their keys.
    pub max_scan_fields: u64,
}

impl Default for ActiveDefragConfig {
    fn default() -> Self {
        ActiveDefragConfig {
            enabled: false,
            ignore_bytes: 100 << 20,
            threshold_lower: 10,
            threshold_upper: 100,
            cycle_min: 1,
            cycle_max: 25,
            cycle_us: 500,
            max_scan_fields: 1000,
        }
    }
}

/// A directive that could not be applied: where, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub file: Option<String>,
    pub line: usize,
    pub reason: String,
    /// The offending line as written (shown after `>>>`).
    pub text: String,
}

impl fmt::Display for ConfigError {
    /// Valkey's start-up report, so scripts that grep for it keep working.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "\n*** FATAL CONFIG FILE ERROR (Redis {REDIS_COMPAT_VERSION}) ***"
        )?;
        match &self.file {
            Some(file) => writeln!(
                f,
                "Reading the configuration file {file}, at line {}",
                self.line
            )?,
            None => writeln!(f, "Reading the configuration file, at line {}", self.line)?,
        }
        writeln!(f, ">>> '{}'", self.text)?;
        write!(f, "{}", self.reason)
    }
}

impl std::error::Error for ConfigError {}

#[derive(Clone, Debug)]
pub struct Config {
    pub bind: Vec<String>,
    pub port: u16,
    pub databases: usize,
    pub protected_mode: bool,
    /// `requirepass`; `None` when empty (no password).
    pub requirepass: Option<Vec<u8>>,
    pub maxclients: u64,
    /// Idle seconds before a client is closed; 0 = never.
    pub timeout: u64,
    pub tcp_keepalive: u64,
    pub tcp_backlog: u32,
    pub io_uring: IoUringMode,
    /// `io-uring-batch-wait-us`.
    pub io_uring_batch_wait_us: u32,
    /// `io-busy-poll-us` (ringkv's own): how long an event loop polls
    /// without sleeping after it last read input.
    pub io_busy_poll_us: u32,
    /// `max-new-connections-per-cycle`: connections an event loop takes in
    /// per iteration.
    pub max_new_connections_per_cycle: u32,
    /// `io-threads-ring-size` (ringkv's own): messages each hand-off ring
    /// holds, per IO thread and direction.
    pub io_threads_ring_size: usize,
    /// `io-threads-idle-exec` (ringkv's own): an IO thread runs the
    /// execution step itself when the execution thread is asleep.
    pub io_threads_idle_exec: bool,
    /// `io-threads-adaptive` (ringkv's own).
    pub io_threads_adaptive: bool,
    /// `io-threads-adaptive-busy-pct` (ringkv's own).
    pub io_threads_adaptive_busy_pct: u32,
    pub io_threads: usize,
    /// `prefetch-batch-max-size`: keys prefetched ahead of execution, per
    /// window of a batch; 0 turns prefetching off.
    pub prefetch_batch_max_size: usize,
    pub lazyfree_lazy_user_del: bool,
    /// `activerehashing`: cron finishes the keyspace's resizes.
    pub activerehashing: bool,
    /// `replica-ignore-maxmemory`: a replica leaves its memory to its
    /// primary (no eviction, no OOM refusals).
    pub replica_ignore_maxmemory: bool,
    /// `hll-sparse-max-bytes`: a sparse HyperLogLog past this becomes dense.
    pub hll_sparse_max_bytes: u64,
    pub lazyfree_lazy_user_flush: bool,
    /// `rdb-version-check relaxed`: RESTORE and FUNCTION RESTORE take a
    /// later Valkey's payload versions too.
    pub rdb_version_check_relaxed: bool,
    /// A replica's full sync hands its old databases to the lazyfree
    /// thread rather than freeing them in place (Valkey 8: on).
    pub replica_lazy_flush: bool,
    /// Empty = stdout.
    pub logfile: String,
    pub loglevel: Level,
    pub log_format: crate::log::Format,
    pub log_timestamp: crate::log::Timestamp,
    /// `dir` as configured; the server chdir()s there at start-up (CONFIG
    /// SET dir changes the process directory itself).
    pub dir: String,
    pub pidfile: String,
    pub daemonize: bool,
    /// `disable-thp`: yes (Valkey's default) keeps the process off
    /// transparent huge pages; no lets the heap use them (ringkv-server).
    pub disable_thp: bool,
    pub client_query_buffer_limit: usize,
    /// `client-output-buffer-limit normal <hard> <soft> <soft-seconds>`
    /// in bytes and seconds (0 = no limit).
    pub client_output_buffer_limit_normal: OutputLimit,
    /// `client-output-buffer-limit pubsub ...`: clients with a subscription.
    pub client_output_buffer_limit_pubsub: OutputLimit,
    /// The `replica` class: how far a replica's feed may fall behind the
    /// stream.
    pub client_output_buffer_limit_replica: OutputLimit,
    pub proto_max_bulk_len: usize,
    /// `busy-reply-threshold` (`lua-time-limit`), ms: a script running
    /// longer makes the server busy (see `crate::busy`).
    pub busy_reply_threshold_ms: u64,
    pub hz: u32,
    pub maxmemory: u64,
    pub maxmemory_policy: MaxmemoryPolicy,
    /// Keys sampled per database to fill the eviction pool.
    pub maxmemory_samples: usize,
    /// 0..=100: how long one eviction run may take (see `crate::evict`).
    pub maxmemory_eviction_tenacity: u32,
    pub lfu_log_factor: u32,
    /// Minutes per halving step of an idle key's LFU counter.
    pub lfu_decay_time: u32,
    pub lazyfree_lazy_eviction: bool,
    /// `activedefrag` and its settings (see `crate::defrag`).
    pub active_defrag: ActiveDefragConfig,
    /// Valkey 8.1's `import-mode`: keys are expired only by an import
    /// source's DELs (see `expiry_mode`), nothing is evicted.
    pub import_mode: bool,
    /// `extended-redis-compatibility` (see `compat`).
    pub extended_redis_compat: bool,
    /// `latency-tracking`: per-command latency histograms.
    pub latency_tracking: bool,
    /// `maxmemory-clients`: bytes, or minus a percentage of maxmemory.
    pub maxmemory_clients: i64,
    /// `latency-monitor-threshold` (ms; 0: the monitor is off).
    pub latency_monitor_threshold_ms: u64,
    /// `latency-tracking-info-percentiles`.
    pub latency_percentiles: Vec<f64>,
    pub active_expire_effort: u32,
    /// When small collections leave their compact encodings.
    pub encoding: store::EncodingLimits,
    /// `stream-node-max-bytes` / `stream-node-max-entries`: where a
    /// stream's blocks end.
    pub stream_node: store::types::stream::NodeLimits,
    pub enable_debug_command: Allowed,
    pub enable_protected_configs: Allowed,
    /// `notify-keyspace-events` as `crate::command::notify` flags.
    pub notify_keyspace_events: u32,
    /// `save`: (seconds, changes) pairs; empty = no automatic saves.
    pub save_points: Vec<(u64, u64)>,
    pub dbfilename: String,
    pub rdbcompression: bool,
    pub rdbchecksum: bool,
    pub stop_writes_on_bgsave_error: bool,
    /// `replica-read-only`: a replica refuses clients' writes.
    pub replica_read_only: bool,
    /// `replica-ignore-disk-write-errors`: a replica that cannot write its
    /// files applies its primary's writes anyway (else it stops).
    pub replica_ignore_disk_write_errors: bool,
    pub repl_diskless_load: DisklessLoad,
    /// `replica-serve-stale-data`: a replica with its link down still
    /// answers (no: `-MASTERDOWN`).
    pub replica_serve_stale_data: bool,
    /// `min-replicas-to-write` / `min-replicas-max-lag` (seconds): a
    /// primary with fewer replicas that ACKed within the lag refuses
    /// writes (`-NOREPLICAS`).
    pub min_replicas_to_write: u32,
    pub min_replicas_max_lag: u32,
    /// `repl-timeout` and `repl-ping-replica-period`, seconds.
    pub repl_timeout_s: u64,
    /// `shutdown-timeout`: how long a shutdown waits for lagging replicas.
    pub shutdown_timeout_s: u64,
    pub repl_ping_replica_period_s: u64,
    /// `repl-backlog-size`: stream bytes kept for partial resyncs.
    pub repl_backlog_size: u64,
    /// `repl-backlog-ttl`: seconds without replicas before a primary frees
    /// its backlog (0: never).
    pub repl_backlog_ttl_s: u64,
    /// `repl-diskless-sync`: a full sync streams its RDB to the replica
    /// (yes) or saves `dbfilename` and sends the file (no).
    pub repl_diskless_sync: bool,
    /// `repl-diskless-sync-delay` (seconds) and
    /// `repl-diskless-sync-max-replicas`: a diskless full sync waits this
    /// long after its first replica asked, or until this many replicas
    /// wait (0: no such count), so that they share one capture.
    pub repl_diskless_sync_delay_s: u64,
    pub repl_diskless_sync_max_replicas: usize,
    /// `rdb-del-sync-files`: with no persistence configured, the file
    /// saved for replicas is removed once they have it.
    pub rdb_del_sync_files: bool,
    /// `tcp-tx-zerocopy` / `tcp-zerocopy-min-write-size` (ringkv's own).
    pub tcp_tx_zerocopy: bool,
    pub tcp_zerocopy_min_write_size: usize,
    /// `commandlog-execution-slower-than` (alias `slowlog-log-slower-than`,
    /// µs; negative: off) and `commandlog-slow-execution-max-len` (alias
    /// `slowlog-max-len`).
    pub slowlog_log_slower_than: i64,
    pub slowlog_max_len: usize,
    /// `commandlog-request-larger-than` / `-reply-larger-than` (bytes;
    /// negative: off) and their logs' lengths.
    pub commandlog_request_larger_than: i64,
    pub commandlog_large_request_max_len: usize,
    pub commandlog_reply_larger_than: i64,
    pub commandlog_large_reply_max_len: usize,
    /// `tracking-table-max-keys`: keys the tracking table holds (0: no limit).
    pub tracking_table_max_keys: usize,
    /// `rdb-key-save-delay` (hidden, for tests): µs per key saved.
    pub rdb_key_save_delay: i64,
    /// `key-load-delay` (hidden, for tests): µs per key loaded.
    pub key_load_delay: i64,
    pub lazyfree_lazy_expire: bool,
    /// `lazyfree-lazy-server-del`: what SPOP of a whole set and RESTORE
    /// with a past TTL propagate (UNLINK or DEL).
    pub lazyfree_lazy_server_del: bool,
    pub appendonly: bool,
    pub appendfilename: String,
    pub appenddirname: String,
    pub appendfsync: crate::aof::FsyncPolicy,
    pub aof_use_rdb_preamble: bool,
    pub aof_timestamp_enabled: bool,
    pub aof_load_truncated: bool,
    pub no_appendfsync_on_rewrite: bool,
    pub auto_aof_rewrite_percentage: u64,
    pub auto_aof_rewrite_min_size: u64,
    /// One line per directive given a non-default value that ringkv does
    /// not act on yet; the server logs them once logging is set up.
    pub warnings: Vec<String>,
    /// `user <name> <rules...>` lines, in order (checked as they are read).
    pub users: Vec<Vec<String>>,
    /// `rename-command` lines, applied in order (file and command line
    /// only, as in Valkey; CONFIG does not know them).
    pub renames: crate::table::Renames,
    /// Canonical value of every directive, indexed like `DEFS`.
    values: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        let mut c = Config {
            bind: vec!["*".into(), "-::*".into()],
            port: 6379,
            databases: 16,
            protected_mode: true,
            requirepass: None,
            maxclients: 10000,
            timeout: 0,
            tcp_keepalive: 300,
            tcp_backlog: 511,
            io_uring: IoUringMode::Auto,
            io_uring_batch_wait_us: 0,
            io_busy_poll_us: 0,
            max_new_connections_per_cycle: 10,
            io_threads_ring_size: 4096,
            io_threads_idle_exec: true,
            io_threads_adaptive: true,
            io_threads_adaptive_busy_pct: 70,
            io_threads: 1,
            prefetch_batch_max_size: 16,
            lazyfree_lazy_user_del: true,
            activerehashing: true,
            replica_ignore_maxmemory: true,
            hll_sparse_max_bytes: 3000,
            lazyfree_lazy_user_flush: true,
            replica_lazy_flush: true,
            rdb_version_check_relaxed: false,
            logfile: String::new(),
            loglevel: Level::Notice,
            log_format: crate::log::Format::Legacy,
            log_timestamp: crate::log::Timestamp::Legacy,
            dir: String::new(),
            pidfile: String::new(),
            daemonize: false,
            disable_thp: true,
            client_query_buffer_limit: 1 << 30,
            client_output_buffer_limit_normal: OutputLimit::default(),
            client_output_buffer_limit_pubsub: OutputLimit::default(),
            client_output_buffer_limit_replica: OutputLimit::default(),
            proto_max_bulk_len: 512 << 20,
            busy_reply_threshold_ms: 5000,
            hz: 10,
            maxmemory: 0,
            maxmemory_policy: MaxmemoryPolicy::NoEviction,
            maxmemory_samples: 5,
            maxmemory_eviction_tenacity: 10,
            lfu_log_factor: 10,
            lfu_decay_time: 1,
            lazyfree_lazy_eviction: true,
            active_defrag: ActiveDefragConfig::default(),
            import_mode: false,
            extended_redis_compat: false,
            latency_tracking: true,
            latency_monitor_threshold_ms: 0,
            maxmemory_clients: 0,
            latency_percentiles: vec![50.0, 99.0, 99.9],
            active_expire_effort: 1,
            encoding: store::EncodingLimits::default(),
            stream_node: store::types::stream::NodeLimits::default(),
            enable_debug_command: Allowed::No,
            enable_protected_configs: Allowed::No,
            notify_keyspace_events: 0,
            save_points: Vec::new(),
            dbfilename: String::new(),
            rdbcompression: true,
            rdbchecksum: true,
            stop_writes_on_bgsave_error: true,
            replica_read_only: true,
            replica_ignore_disk_write_errors: false,
            repl_diskless_load: DisklessLoad::Disabled,
            replica_serve_stale_data: true,
            min_replicas_to_write: 0,
            min_replicas_max_lag: 10,
            repl_timeout_s: 60,
            shutdown_timeout_s: 10,
            repl_ping_replica_period_s: 10,
            repl_backlog_size: 10 << 20,
            repl_backlog_ttl_s: 3600,
            repl_diskless_sync: true,
            repl_diskless_sync_delay_s: 5,
            repl_diskless_sync_max_replicas: 0,
            rdb_del_sync_files: false,
            tcp_tx_zerocopy: true,
            tcp_zerocopy_min_write_size: 10 << 10,
            slowlog_log_slower_than: 10_000,
            slowlog_max_len: 128,
            commandlog_request_larger_than: 1 << 20,
            commandlog_large_request_max_len: 128,
            commandlog_reply_larger_than: 1 << 20,
            commandlog_large_reply_max_len: 128,
            tracking_table_max_keys: 1_000_000,
            rdb_key_save_delay: 0,
            key_load_delay: 0,
            lazyfree_lazy_expire: true,
            lazyfree_lazy_server_del: true,
            appendonly: false,
            appendfilename: String::new(),
            appenddirname: String::new(),
            appendfsync: crate::aof::FsyncPolicy::Everysec,
            aof_use_rdb_preamble: true,
            aof_timestamp_enabled: false,
            aof_load_truncated: true,
            no_appendfsync_on_rewrite: false,
            auto_aof_rewrite_percentage: 100,
            auto_aof_rewrite_min_size: 64 << 20,
            warnings: Vec::new(),
            renames: Default::default(),
            users: Vec::new(),
            values: DEFS.iter().map(|d| d.default.to_string()).collect(),
        };
        for idx in 0..DEFS.len() {
            c.apply_typed(idx);
        }
        c
    }
}

/// Parse Valkey's memory notation: `123`, `1k` (1000), `1kb` (1024), `m`,
/// `mb`, `g`, `gb`, any case, optional leading `-`.
/// `maxmemory-policy`: what to evict over `maxmemory`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MaxmemoryPolicy {
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
    AllkeysLru,
    AllkeysLfu,
    AllkeysRandom,
    #[default]
    NoEviction,
}

impl MaxmemoryPolicy {
    pub fn from_name(name: &str) -> Option<MaxmemoryPolicy> {
        use MaxmemoryPolicy::*;
        Some(match name {
            "volatile-lru" => VolatileLru,
            "volatile-lfu" => VolatileLfu,
            "volatile-random" => VolatileRandom,
            "volatile-ttl" => VolatileTtl,
            "allkeys-lru" => AllkeysLru,
            "allkeys-lfu" => AllkeysLfu,
            "allkeys-random" => AllkeysRandom,
            "noeviction" => NoEviction,
            _ => return None,
        })
    }
    /// Samples only keys with a TTL.
    pub fn volatile_only(self) -> bool {
        use MaxmemoryPolicy::*;
        matches!(
            self,
            VolatileLru | VolatileLfu | VolatileRandom | VolatileTtl
        )
    }
    /// Chooses its victims through the candidate pool (not at random).
    pub fn pooled(self) -> bool {
        use MaxmemoryPolicy::*;
        !matches!(self, AllkeysRandom | VolatileRandom | NoEviction)
    }
    pub fn is_lfu(self) -> bool {
        matches!(
            self,
            MaxmemoryPolicy::VolatileLfu | MaxmemoryPolicy::AllkeysLfu
        )
    }
}

pub fn parse_memory(s: &str) -> Option<i64> {
    let lower = s.to_ascii_lowercase();
    let (num, mul): (&str, i64) = if let Some(n) = lower.strip_suffix("gb") {
        (n, 1 << 30)
    } else if let Some(n) = lower.strip_suffix("mb") {
        (n, 1 << 20)
    } else if let Some(n) = lower.strip_suffix("kb") {
        (n, 1 << 10)
    } else if let Some(n) = lower.strip_suffix('g') {
        (n, 1_000_000_000)
    } else if let Some(n) = lower.strip_suffix('m') {
        (n, 1_000_000)
    } else if let Some(n) = lower.strip_suffix('k') {
        (n, 1000)
    } else if let Some(n) = lower.strip_suffix('b') {
        (n, 1)
    } else {
        (lower.as_str(), 1)
    };
    // Valkey's memtoull reads no digits at all ("", "mb") as 0.
    if num.is_empty() {
        return Some(0);
    }
    if !num
        .bytes()
        .enumerate()
        .all(|(i, c)| c.is_ascii_digit() || (i == 0 && c == b'-' && num.len() > 1))
    {
        return None;
    }
    num.parse::<i64>().ok()?.checked_mul(mul)
}

/// `bytes` as CONFIG REWRITE writes memory: the largest exact unit.
fn format_memory(bytes: i64) -> String {
    const GB: i64 = 1 << 30;
    const MB: i64 = 1 << 20;
    const KB: i64 = 1 << 10;
    if bytes != 0 && bytes % GB == 0 {
        format!("{}gb", bytes / GB)
    } else if bytes != 0 && bytes % MB == 0 {
        format!("{}mb", bytes / MB)
    } else if bytes != 0 && bytes % KB == 0 {
        format!("{}kb", bytes / KB)
    } else {
        bytes.to_string()
    }
}

/// Split a line as Valkey's `sdssplitargs` does; `None` on unbalanced quotes.
pub fn split_args(line: &str) -> Option<Vec<String>> {
    let args = resp::split_line(line.as_bytes())?;
    Some(
        args.iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

/// Quote a value the way CONFIG REWRITE writes strings (`sdscatrepr`).
pub fn repr(s: &str) -> String {
    let mut o = String::new();
    repr_into(s.as_bytes(), &mut o);
    o
}

/// `sdscatrepr`: `bytes` in double quotes, `\\`, `\"` and the C escapes
/// for control characters, `\xHH` for other unprintable bytes. The output
/// is ASCII (CONFIG REWRITE, MONITOR lines).
pub fn repr_into(bytes: &[u8], o: &mut String) {
    o.push('"');
    for &c in bytes {
        match c {
            b'\\' => o.push_str("\\\\"),
            b'"' => o.push_str("\\\""),
            b'\n' => o.push_str("\\n"),
            b'\r' => o.push_str("\\r"),
            b'\t' => o.push_str("\\t"),
            7 => o.push_str("\\a"),
            8 => o.push_str("\\b"),
            c if c.is_ascii_graphic() || c == b' ' => o.push(c as char),
            c => {
                use std::fmt::Write as _;
                let _ = write!(o, "\\x{c:02x}");
            }
        }
    }
    o.push('"');
}

/// A word of a multi-word value as written back: as it is when it reads
/// back the same (what Valkey writes for sane values), else quoted.
fn plain_or_repr(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|c| c.is_ascii_graphic() && !matches!(c, b'"' | b'\'' | b'\\'));
    if plain { word.to_string() } else { repr(word) }
}

/// Turn `--port 7000 --save "" --bind a b` into config-file lines, as
/// Valkey's main() does before loading.
pub fn args_to_text(args: &[String]) -> String {
    let mut text = String::new();
    for a in args {
        if let Some(name) = a.strip_prefix("--") {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(name);
        } else {
            if text.is_empty() {
                // A bare value with no directive: Valkey treats it as a
                // directive name, which then fails as unknown.
                text.push_str(a);
                continue;
            }
            text.push(' ');
            text.push_str(&repr(a));
        }
    }
    text.push('\n');
    text
}

/// Outcome of validating one directive's arguments.
type SetResult = Result<String, String>;

impl Config {
    /// Load `text` (a config file's contents, `filename` for messages),
    /// starting from the defaults.
    pub fn parse_file_text(text: &str, filename: &str) -> Result<Config, ConfigError> {
        let mut c = Config::default();
        c.load_text(text, Some(filename))?;
        Ok(c)
    }

    /// Start-up: the optional file, then `--directive value` arguments
    /// (as Valkey, they are appended to the file's text and override it).
    pub fn load(file: Option<&Path>, cli_args: &[String]) -> Result<Config, ConfigError> {
        let mut c = Config::default();
        if let Some(path) = file {
            let name = path.display().to_string();
            let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
                file: Some(name.clone()),
                line: 0,
                reason: format!("Fatal error, can't open config file '{name}': {e}"),
                text: String::new(),
            })?;
            c.load_text(&text, Some(&name))?;
        }
        if !cli_args.is_empty() {
            c.load_text(&args_to_text(cli_args), None)?;
        }
        c.load_acl_file()?;
        Ok(c)
    }

    /// `acl-pubsub-default allchannels`.
    pub fn acl_pubsub_all(&self) -> bool {
        self.get("acl-pubsub-default").as_deref() == Some("allchannels")
    }

    /// `aclfile`: its users, instead of `user` lines (both at once is
    /// refused, as Valkey refuses it).
    fn load_acl_file(&mut self) -> Result<(), ConfigError> {
        let Some(path) = self.get("aclfile").filter(|f| !f.is_empty()) else {
            return Ok(());
        };
        let fail = |reason: String| ConfigError {
            file: None,
            line: 0,
            reason,
            text: String::new(),
        };
        if !self.users.is_empty() {
            return Err(fail("Configuring the server with users defined in the configuration file and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your configuration file, but not both.".into()));
        }
        self.users = crate::acl::file::read(Path::new(&path), self.acl_pubsub_all())
            .map_err(|e| fail(format!("Aborting start-up because of ACL errors: {e}")))?;
        Ok(())
    }

    fn load_text(&mut self, text: &str, filename: Option<&str>) -> Result<(), ConfigError> {
        let mut seen_multi: Vec<usize> = Vec::new();
        for (n, raw) in text.split('\n').enumerate() {
            let line = raw.trim_matches(|c: char| c == ' ' || c == '\t' || c == '\r' || c == '\n');
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |reason: String| ConfigError {
                file: filename.map(str::to_string),
                line: n + 1,
                reason,
                text: line.to_string(),
            };
            let Some(argv) = split_args(line) else {
                return Err(err("Unbalanced quotes in configuration line".into()));
            };
            if argv.is_empty() {
                continue;
            }
            let name = argv[0].to_ascii_lowercase();
            match name.as_str() {
                "include" if argv.len() == 2 => {
                    // As Valkey: a relative path is relative to the
                    // working directory, not to the including file.
                    let inc = Path::new(&argv[1]).to_path_buf();
                    let t = std::fs::read_to_string(&inc).map_err(|e| {
                        err(format!(
                            "Fatal error, can't open config file '{}': {e}",
                            inc.display()
                        ))
                    })?;
                    self.load_text(&t, Some(&inc.display().to_string()))?;
                    continue;
                }
                "rename-command" if argv.len() == 3 => {
                    self.renames
                        .rename(&argv[1], &argv[2])
                        .map_err(|e| err(e.into()))?;
                    continue;
                }
                "user" if argv.len() >= 2 => {
                    self.add_user(&argv[1..]).map_err(err)?;
                    continue;
                }
                // Valkey 8.1's deprecated directives: a file may still hold
                // them; they do nothing, and CONFIG knows them no more.
                n if DEPRECATED.contains(&n) && argv.len() == 2 => continue,
                "loadmodule" if argv.len() >= 2 => {
                    self.warnings
                        .push(format!("'{name}' is not supported yet, ignored"));
                    continue;
                }
                _ => {}
            }
            let Some(idx) = find_def(&name) else {
                return Err(err("Bad directive or wrong number of arguments".into()));
            };
            let d = &DEFS[idx];
            if d.flags & MULTI == 0 && argv.len() != 2 {
                return Err(err("wrong number of arguments".into()));
            }
            let args = &argv[1..];
            // `save` accumulates over several lines; the first one replaces
            // the default.
            let value = if d.name == "save"
                && seen_multi.contains(&idx)
                && !args.iter().all(|a| a.is_empty())
            {
                let mut all: Vec<String> = self.values[idx]
                    .split(' ')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect();
                all.extend(args.iter().cloned());
                validate(d, &all, &self.values[idx], self)
            } else {
                validate(d, args, &self.values[idx], self)
            };
            let value = value.map_err(err)?;
            seen_multi.push(idx);
            self.store(idx, value);
        }
        Ok(())
    }

    /// A `user` line: its rules must apply (as Valkey checks them while
    /// it reads the file), and a user is declared once.
    fn add_user(&mut self, args: &[String]) -> Result<(), String> {
        let name = &args[0];
        if name.is_empty() || name.contains(' ') || name.contains('\0') {
            return Err(format!(
                "Error in user declaration '{name}': invalid user name"
            ));
        }
        if self.users.iter().any(|u| &u[0] == name) {
            return Err(
                "Duplicate user found. A user can only be defined once in config files".into(),
            );
        }
        crate::acl::Acl::validate(name, &args[1..], self.acl_pubsub_all())
            .map_err(|(_, why)| format!("Error in user declaration '{name}': {why}"))?;
        self.users.push(args.to_vec());
        Ok(())
    }

    fn store(&mut self, idx: usize, value: String) {
        if let Some(w) = ignored_warning(&DEFS[idx], &value)
            && !self.warnings.contains(&w)
        {
            self.warnings.push(w);
        }
        self.values[idx] = value;
        self.apply_typed(idx);
    }

    /// Mirror a canonical value into its typed field.
    fn apply_typed(&mut self, idx: usize) {
        let v = self.values[idx].as_str();
        let num = || v.parse::<i64>().unwrap_or(0);
        match DEFS[idx].name {
            "bind" => {
                self.bind = v
                    .split(' ')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            }
            "port" => self.port = num() as u16,
            "databases" => self.databases = num() as usize,
            "protected-mode" => self.protected_mode = v == "yes",
            "requirepass" => self.requirepass = (!v.is_empty()).then(|| v.as_bytes().to_vec()),
            "maxclients" => self.maxclients = num() as u64,
            "timeout" => self.timeout = num() as u64,
            "tcp-keepalive" => self.tcp_keepalive = num() as u64,
            "tcp-backlog" => self.tcp_backlog = num() as u32,
            "io-uring" => {
                self.io_uring = match v {
                    "yes" => IoUringMode::Yes,
                    "no" => IoUringMode::No,
                    _ => IoUringMode::Auto,
                }
            }
            "io-uring-batch-wait-us" => self.io_uring_batch_wait_us = num() as u32,
            "io-busy-poll-us" => self.io_busy_poll_us = num() as u32,
            "max-new-connections-per-cycle" => self.max_new_connections_per_cycle = num() as u32,
            "io-threads-ring-size" => self.io_threads_ring_size = num() as usize,
            "io-threads-idle-exec" => self.io_threads_idle_exec = v == "yes",
            "io-threads-adaptive" => self.io_threads_adaptive = v == "yes",
            "io-threads-adaptive-busy-pct" => self.io_threads_adaptive_busy_pct = num() as u32,
            "io-threads" => self.io_threads = num() as usize,
            "lazyfree-lazy-user-del" => self.lazyfree_lazy_user_del = v == "yes",
            "activerehashing" => self.activerehashing = v == "yes",
            "replica-ignore-maxmemory" => self.replica_ignore_maxmemory = v == "yes",
            "prefetch-batch-max-size" => self.prefetch_batch_max_size = num() as usize,
            "hll-sparse-max-bytes" => self.hll_sparse_max_bytes = num() as u64,
            "lazyfree-lazy-user-flush" => self.lazyfree_lazy_user_flush = v == "yes",
            "replica-lazy-flush" => self.replica_lazy_flush = v == "yes",
            "rdb-version-check" => self.rdb_version_check_relaxed = v == "relaxed",
            "logfile" => self.logfile = v.to_string(),
            "loglevel" => self.loglevel = Level::from_name(v).unwrap_or(Level::Notice),
            "log-format" => {
                self.log_format = match v {
                    "logfmt" => crate::log::Format::Logfmt,
                    _ => crate::log::Format::Legacy,
                }
            }
            "log-timestamp-format" => {
                self.log_timestamp = match v {
                    "iso8601" => crate::log::Timestamp::Iso8601,
                    "milliseconds" => crate::log::Timestamp::Milliseconds,
                    _ => crate::log::Timestamp::Legacy,
                }
            }
            "pidfile" => self.pidfile = v.to_string(),
            "dir" => self.dir = v.to_string(),
            "daemonize" => self.daemonize = v == "yes",
            "disable-thp" => self.disable_thp = v == "yes",
            "client-query-buffer-limit" => self.client_query_buffer_limit = num() as usize,
            "client-output-buffer-limit" => {
                self.client_output_buffer_limit_normal = OutputLimit::parse_class(v, "normal");
                self.client_output_buffer_limit_pubsub = OutputLimit::parse_class(v, "pubsub");
                self.client_output_buffer_limit_replica = OutputLimit::parse_class(v, "slave");
            }
            "proto-max-bulk-len" => self.proto_max_bulk_len = num() as usize,
            "hz" => self.hz = num().clamp(1, 500) as u32,
            "busy-reply-threshold" => self.busy_reply_threshold_ms = num().max(0) as u64,
            "maxmemory" => self.maxmemory = num() as u64,
            "maxmemory-policy" => {
                self.maxmemory_policy = MaxmemoryPolicy::from_name(v).unwrap_or_default()
            }
            "maxmemory-samples" => self.maxmemory_samples = num() as usize,
            "maxmemory-eviction-tenacity" => self.maxmemory_eviction_tenacity = num() as u32,
            "lfu-log-factor" => self.lfu_log_factor = num() as u32,
            "lfu-decay-time" => self.lfu_decay_time = num() as u32,
            "lazyfree-lazy-eviction" => self.lazyfree_lazy_eviction = v == "yes",
            "activedefrag" => self.active_defrag.enabled = v == "yes",
            "active-defrag-ignore-bytes" => self.active_defrag.ignore_bytes = num() as u64,
            "active-defrag-threshold-lower" => self.active_defrag.threshold_lower = num() as u32,
            "active-defrag-threshold-upper" => self.active_defrag.threshold_upper = num() as u32,
            "active-defrag-cycle-min" => self.active_defrag.cycle_min = num() as u32,
            "active-defrag-cycle-max" => self.active_defrag.cycle_max = num() as u32,
            "active-defrag-cycle-us" => self.active_defrag.cycle_us = num() as u32,
            "active-defrag-max-scan-fields" => self.active_defrag.max_scan_fields = num() as u64,
            "import-mode" => self.import_mode = v == "yes",
            "extended-redis-compatibility" => self.extended_redis_compat = v == "yes",
            "latency-tracking" => self.latency_tracking = v == "yes",
            "maxmemory-clients" => {
                self.maxmemory_clients = match v.strip_suffix('%') {
                    Some(p) => -p.parse::<i64>().unwrap_or(0),
                    None => num(),
                }
            }
            "latency-monitor-threshold" => self.latency_monitor_threshold_ms = num().max(0) as u64,
            "latency-tracking-info-percentiles" => {
                self.latency_percentiles = v
                    .split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect()
            }
            "active-expire-effort" => self.active_expire_effort = num() as u32,
            "list-max-listpack-size" => self.encoding.list_max_listpack_size = num(),
            // Valkey's quicklist keeps the depth in 16 bits and clamps it.
            "list-compress-depth" => {
                self.encoding.list_compress_depth = num().clamp(0, u16::MAX.into()) as u16
            }
            "hash-max-listpack-entries" => self.encoding.hash_max_listpack_entries = num() as usize,
            "hash-max-listpack-value" => self.encoding.hash_max_listpack_value = num() as usize,
            "set-max-intset-entries" => self.encoding.set_max_intset_entries = num() as usize,
            "set-max-listpack-entries" => self.encoding.set_max_listpack_entries = num() as usize,
            "set-max-listpack-value" => self.encoding.set_max_listpack_value = num() as usize,
            "zset-max-listpack-entries" => self.encoding.zset_max_listpack_entries = num() as usize,
            "zset-max-listpack-value" => self.encoding.zset_max_listpack_value = num() as usize,
            "stream-node-max-bytes" => self.stream_node.max_bytes = num() as usize,
            "stream-node-max-entries" => self.stream_node.max_entries = num() as usize,
            "enable-debug-command" => self.enable_debug_command = allowed(v),
            "enable-protected-configs" => self.enable_protected_configs = allowed(v),
            "save" => {
                let n: Vec<u64> = v.split(' ').filter_map(|x| x.parse().ok()).collect();
                self.save_points = n.chunks_exact(2).map(|p| (p[0], p[1])).collect();
            }
            "dbfilename" => self.dbfilename = v.to_string(),
            "rdbcompression" => self.rdbcompression = v == "yes",
            "rdbchecksum" => self.rdbchecksum = v == "yes",
            "stop-writes-on-bgsave-error" => self.stop_writes_on_bgsave_error = v == "yes",
            "replica-read-only" => self.replica_read_only = v == "yes",
            "replica-ignore-disk-write-errors" => {
                self.replica_ignore_disk_write_errors = v == "yes"
            }
            "replica-serve-stale-data" => self.replica_serve_stale_data = v == "yes",
            "min-replicas-to-write" => self.min_replicas_to_write = num() as u32,
            "min-replicas-max-lag" => self.min_replicas_max_lag = num() as u32,
            "repl-timeout" => self.repl_timeout_s = num() as u64,
            "shutdown-timeout" => self.shutdown_timeout_s = num() as u64,
            "repl-ping-replica-period" => self.repl_ping_replica_period_s = num() as u64,
            "repl-backlog-size" => self.repl_backlog_size = num() as u64,
            "repl-backlog-ttl" => self.repl_backlog_ttl_s = num().max(0) as u64,
            "repl-diskless-sync" => self.repl_diskless_sync = v == "yes",
            "repl-diskless-sync-delay" => self.repl_diskless_sync_delay_s = num() as u64,
            "repl-diskless-sync-max-replicas" => {
                self.repl_diskless_sync_max_replicas = num() as usize
            }
            "rdb-del-sync-files" => self.rdb_del_sync_files = v == "yes",
            "tcp-tx-zerocopy" => self.tcp_tx_zerocopy = v == "yes",
            "tcp-zerocopy-min-write-size" => self.tcp_zerocopy_min_write_size = num() as usize,
            "commandlog-execution-slower-than" => self.slowlog_log_slower_than = num(),
            "commandlog-slow-execution-max-len" => self.slowlog_max_len = num() as usize,
            "commandlog-request-larger-than" => self.commandlog_request_larger_than = num(),
            "commandlog-large-request-max-len" => {
                self.commandlog_large_request_max_len = num() as usize
            }
            "commandlog-reply-larger-than" => self.commandlog_reply_larger_than = num(),
            "commandlog-large-reply-max-len" => {
                self.commandlog_large_reply_max_len = num() as usize
            }
            "tracking-table-max-keys" => self.tracking_table_max_keys = num() as usize,
            "rdb-key-save-delay" => self.rdb_key_save_delay = num(),
            "key-load-delay" => self.key_load_delay = num(),
            "lazyfree-lazy-expire" => self.lazyfree_lazy_expire = v == "yes",
            "lazyfree-lazy-server-del" => self.lazyfree_lazy_server_del = v == "yes",
            "appendonly" => self.appendonly = v == "yes",
            "appendfilename" => self.appendfilename = v.to_string(),
            "appenddirname" => self.appenddirname = v.to_string(),
            "repl-diskless-load" => {
                self.repl_diskless_load = match v {
                    "on-empty-db" => DisklessLoad::OnEmptyDb,
                    "swapdb" => DisklessLoad::Swapdb,
                    "flush-before-load" => DisklessLoad::FlushBeforeLoad,
                    _ => DisklessLoad::Disabled,
                }
            }
            "appendfsync" => {
                use crate::aof::FsyncPolicy as F;
                self.appendfsync = match v {
                    "always" => F::Always,
                    "no" => F::No,
                    _ => F::Everysec,
                }
            }
            "aof-use-rdb-preamble" => self.aof_use_rdb_preamble = v == "yes",
            "aof-timestamp-enabled" => self.aof_timestamp_enabled = v == "yes",
            "aof-load-truncated" => self.aof_load_truncated = v == "yes",
            "no-appendfsync-on-rewrite" => self.no_appendfsync_on_rewrite = v == "yes",
            "auto-aof-rewrite-percentage" => self.auto_aof_rewrite_percentage = num() as u64,
            "auto-aof-rewrite-min-size" => self.auto_aof_rewrite_min_size = num() as u64,
            "notify-keyspace-events" => {
                self.notify_keyspace_events =
                    crate::command::notify::parse(v.as_bytes()).unwrap_or(0)
            }
            _ => {}
        }
    }

    /// CONFIG GET: `(name, value)` of every directive matching one of
    /// `patterns` (glob, case-insensitive), each once.
    pub fn get_matching(&self, patterns: &[&[u8]]) -> Vec<(&'static str, String)> {
        let mut out: Vec<(&'static str, String)> = Vec::new();
        for (idx, d) in DEFS.iter().enumerate() {
            for name in std::iter::once(d.name).chain(d.alias) {
                let hit = patterns.iter().any(|p| {
                    let is_glob = p.iter().any(|c| matches!(c, b'*' | b'?' | b'['));
                    if is_glob {
                        d.flags & HIDDEN == 0 && crate::glob::matches(p, name.as_bytes(), true)
                    } else {
                        p.eq_ignore_ascii_case(name.as_bytes())
                    }
                });
                if hit && !out.iter().any(|(n, _)| *n == name) {
                    out.push((name, self.get_value(idx)));
                }
            }
        }
        out
    }

    /// The CONFIG GET value of a directive by name or alias.
    /// REPLICAOF changed whom we follow: CONFIG GET and REWRITE show it
    /// (`""`: none).
    pub fn set_replicaof(&mut self, value: &str) {
        if let Some(i) = find_def("replicaof") {
            self.values[i] = value.to_string();
        }
    }

    pub fn get(&self, name: &str) -> Option<String> {
        find_def(name).map(|i| self.get_value(i))
    }

    fn get_value(&self, idx: usize) -> String {
        match DEFS[idx].name {
            "dir" => std::env::current_dir()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            "notify-keyspace-events" => {
                let v = &self.values[idx];
                crate::command::notify::parse(v.as_bytes())
                    .map_or_else(|| v.clone(), crate::command::notify::to_string)
            }
            _ => self.values[idx].clone(),
        }
    }

    /// Descriptors kept back from `maxclients` for the server's own use:
    /// Valkey's 32 (listeners, log, standard streams and the like), plus
    /// two per IO thread (its doorbell and its event loop). The open-file
    /// limit must cover `maxclients` plus these.
    pub fn reserved_fds(&self) -> u64 {
        RESERVED_FDS + 2 * self.io_threads.saturating_sub(1) as u64
    }

    /// The open-file limit a server with this configuration needs.
    pub fn files_needed(&self) -> u64 {
        self.maxclients.saturating_add(self.reserved_fds())
    }

    /// Bring `maxclients` down to `n` (at least 1) because the open-file
    /// limit allows no more; CONFIG GET and CONFIG REWRITE show it.
    pub fn lower_maxclients(&mut self, n: u64) {
        if let Some(idx) = find_def("maxclients") {
            self.values[idx] = n.max(1).to_string();
            self.apply_typed(idx);
        }
    }

    /// Whether CONFIG SET of these names must wait for the load under
    /// way to end (Valkey answers `-LOADING` before any other error).
    pub fn denied_while_loading(pairs: &[(&[u8], &[u8])]) -> bool {
        pairs.iter().any(|(name, _)| {
            find_def(&String::from_utf8_lossy(name))
                .is_some_and(|i| DEFS[i].flags & DENY_LOADING != 0)
        })
    }

    /// CONFIG SET of several `(name, value)` pairs, all or nothing.
    /// `Err` is the full error reply text (without `-`).
    pub fn set_many(&mut self, pairs: &[(&[u8], &[u8])]) -> Result<(), String> {
        let mut staged: Vec<(usize, String)> = Vec::with_capacity(pairs.len());
        for (name, value) in pairs {
            let name_s = String::from_utf8_lossy(name);
            let Some(idx) = find_def(&name_s) else {
                return Err(format!(
                    "ERR Unknown option or number of arguments for CONFIG SET - '{name_s}'"
                ));
            };
            let d = &DEFS[idx];
            let fail = |why: &str| {
                format!("ERR CONFIG SET failed (possibly related to argument '{name_s}') - {why}")
            };
            if staged.iter().any(|(i, _)| *i == idx) {
                return Err(fail("duplicate parameter"));
            }
            if d.flags & IMM != 0 && d.flags & START_ONLY == 0 {
                return Err(fail("can't set immutable config"));
            }
            if d.flags & PROT != 0 && self.enable_protected_configs != Allowed::Yes {
                return Err(fail("can't set protected config"));
            }
            let value_s = String::from_utf8_lossy(value).into_owned();
            let args: Vec<String> = if d.flags & MULTI != 0 {
                match split_args(&value_s) {
                    Some(a) if !a.is_empty() => a,
                    Some(_) => vec![String::new()],
                    None => return Err(fail("Unbalanced quotes")),
                }
            } else {
                vec![value_s]
            };
            let canonical = validate(d, &args, &self.values[idx], self).map_err(|w| fail(&w))?;
            staged.push((idx, canonical));
        }
        // Applied as Valkey applies (after every check), where Valkey could
        // fail to listen on a new port.
        if let Some((idx, _)) = staged
            .iter()
            .find(|(idx, v)| DEFS[*idx].flags & START_ONLY != 0 && *v != self.values[*idx])
        {
            return Err(format!(
                "ERR CONFIG SET failed (possibly related to argument '{}') - ringkv sets it at start-up only",
                DEFS[*idx].name
            ));
        }
        let backup = self.clone();
        for (idx, value) in staged {
            if DEFS[idx].name == "dir"
                && let Err(e) = std::env::set_current_dir(&value)
            {
                *self = backup;
                return Err(format!(
                    "ERR CONFIG SET failed (possibly related to argument 'dir') - {e}"
                ));
            }
            self.values[idx] = value;
            self.apply_typed(idx);
        }
        Ok(())
    }

    /// CONFIG REWRITE: update `path` in place, keeping comments and lines
    /// we do not own, rewriting known directives where they are, blanking
    /// their extra occurrences, and appending changed ones at the end under
    /// Valkey's marker line. `users` are the `user ...` lines (every user,
    /// as ACL LIST gives them; none when an `aclfile` holds them).
    pub fn rewrite(&self, path: &Path, users: &[String]) -> std::io::Result<()> {
        const MARKER: &str = "# Generated by CONFIG REWRITE";
        let old = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e),
        };
        let mut lines: Vec<Option<String>> = Vec::new();
        let mut has_marker = false;
        let mut positions: Vec<Vec<usize>> = vec![Vec::new(); DEFS.len()];
        let mut user_positions: Vec<usize> = Vec::new();
        let mut old_lines: Vec<&str> = old.split('\n').collect();
        if old_lines.last() == Some(&"") {
            old_lines.pop();
        }
        for raw in old_lines {
            let line = raw.trim_matches(|c: char| c == ' ' || c == '\t' || c == '\r');
            if line == MARKER {
                has_marker = true;
            }
            if line.is_empty() || line.starts_with('#') {
                lines.push(Some(raw.to_string()));
                continue;
            }
            let name = split_args(line).and_then(|a| a.first().cloned());
            if name
                .as_deref()
                .is_some_and(|n| n.eq_ignore_ascii_case("user"))
            {
                user_positions.push(lines.len());
                lines.push(None);
                continue;
            }
            let idx = name.and_then(|n| find_def(&n));
            match idx {
                Some(i) => {
                    positions[i].push(lines.len());
                    lines.push(None);
                }
                None => lines.push(Some(raw.to_string())),
            }
        }
        let mut appended: Vec<String> = Vec::new();
        for (idx, d) in DEFS.iter().enumerate() {
            let value = &self.values[idx];
            // Valkey always writes `dir` (the current directory).
            let changed = *value != d.default || d.name == "dir";
            let new_lines = rewrite_lines(d, &self.get_value(idx));
            if positions[idx].is_empty() {
                if changed {
                    appended.extend(new_lines);
                }
                continue;
            }
            let first = positions[idx][0];
            lines[first] = Some(new_lines.join("\n"));
            // Extra occurrences stay removed (their slot remains `None`).
        }
        // Users where the file had them, the rest at the end.
        let mut users = users.iter();
        for &pos in &user_positions {
            lines[pos] = users.next().cloned();
        }
        appended.extend(users.cloned());
        let mut out = String::new();
        for l in lines.into_iter().flatten() {
            out.push_str(&l);
            out.push('\n');
        }
        if !appended.is_empty() {
            if !has_marker {
                out.push_str(MARKER);
                out.push('\n');
            }
            for l in appended {
                out.push_str(&l);
                out.push('\n');
            }
        }
        let tmp = path.with_extension(format!("rewrite-{}.tmp", std::process::id()));
        std::fs::write(&tmp, out.as_bytes())?;
        std::fs::rename(&tmp, path)
    }

    /// Every directive name (COMMAND DOCS, tests).
    pub fn names() -> impl Iterator<Item = &'static str> {
        DEFS.iter().map(|d| d.name)
    }
}

fn allowed(v: &str) -> Allowed {
    match v {
        "yes" => Allowed::Yes,
        "local" => Allowed::Local,
        _ => Allowed::No,
    }
}

/// The lines CONFIG REWRITE writes for a directive holding `value`.
fn rewrite_lines(d: &Def, value: &str) -> Vec<String> {
    let name = d.name;
    match d.kind {
        Kind::Str => vec![format!("{name} {}", repr(value))],
        Kind::Mem { .. } => match value.parse::<i64>() {
            Ok(n) => vec![format!("{name} {}", format_memory(n))],
            Err(_) => vec![format!("{name} {value}")],
        },
        Kind::Special => match name {
            "dir" => vec![format!("dir {}", repr(value))],
            "save" if value.is_empty() => vec!["save \"\"".to_string()],
            "replicaof" if value.is_empty() => Vec::new(),
            "client-output-buffer-limit" => {
                let parts: Vec<&str> = value.split(' ').collect();
                parts
                    .chunks(4)
                    .map(|c| {
                        let mem = |s: &str| format_memory(s.parse().unwrap_or(0));
                        format!(
                            "{name} {} {} {} {}",
                            c[0],
                            mem(c.get(1).unwrap_or(&"0")),
                            mem(c.get(2).unwrap_or(&"0")),
                            c.get(3).unwrap_or(&"0")
                        )
                    })
                    .collect()
            }
            "notify-keyspace-events" => vec![format!("{name} {}", repr(value))],
            _ => {
                let words: Vec<String> = value.split(' ').map(plain_or_repr).collect();
                vec![format!("{name} {}", words.join(" "))]
            }
        },
        _ => vec![format!("{name} {value}")],
    }
}

/// A number as Valkey keeps it once applied: `hz` within 1..=500
/// (updateHZ), `repl-backlog-size` at least 16 KiB
/// (resizeReplicationBacklog); CONFIG GET shows that.
fn stored_number(name: &str, n: i64) -> i64 {
    match name {
        "hz" => n.clamp(1, 500),
        "repl-backlog-size" => n.max(16 * 1024),
        _ => n,
    }
}

/// Validate arguments for a directive; the canonical value or Valkey's
/// reason text.
fn validate(d: &Def, args: &[String], cur: &str, cfg: &Config) -> SetResult {
    let one = || -> &str { args.first().map(String::as_str).unwrap_or("") };
    match d.kind {
        Kind::Bool => match one().to_ascii_lowercase().as_str() {
            "yes" => Ok("yes".into()),
            "no" => Ok("no".into()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Int { min, max } => {
            let n = crate::num::parse_i64(one().as_bytes())
                .ok_or_else(|| "argument couldn't be parsed into an integer".to_string())?;
            if n < min || n > max {
                return Err(format!(
                    "argument must be between {min} and {max} inclusive"
                ));
            }
            Ok(stored_number(d.name, n).to_string())
        }
        Kind::Mem { min, max, percent } => {
            let v = one();
            if percent && let Some(p) = v.strip_suffix('%') {
                let n: i64 = p
                    .parse()
                    .map_err(|_| "argument must be a memory or percent value".to_string())?;
                if n < 0 {
                    return Err("argument must be a memory or percent value".into());
                }
                if -n < min {
                    return Err(format!(
                        "percentage argument must be less or equal to {}",
                        -min
                    ));
                }
                return Ok(format!("{n}%"));
            }
            let n = parse_memory(v)
                .filter(|n| *n >= 0 || min < 0)
                .ok_or_else(|| {
                    if percent {
                        "argument must be a memory or percent value".to_string()
                    } else {
                        "argument must be a memory value".to_string()
                    }
                })?;
            if n < min.max(0) && !(percent && n >= min) || n > max {
                return Err(format!(
                    "argument must be between {} and {max} inclusive",
                    min.max(0)
                ));
            }
            Ok(stored_number(d.name, n).to_string())
        }
        Kind::Enum(opts) => {
            let v = one().to_ascii_lowercase();
            if opts.contains(&v.as_str()) {
                Ok(v)
            } else {
                Err(format!(
                    "argument(s) must be one of the following: {}",
                    opts.join(", ")
                ))
            }
        }
        Kind::Flags(opts) => {
            let mut out: Vec<String> = Vec::new();
            for a in args
                .iter()
                .flat_map(|a| a.split(' '))
                .filter(|s| !s.is_empty())
            {
                let v = a.to_ascii_lowercase();
                if !opts.contains(&v.as_str()) {
                    return Err(format!(
                        "argument(s) must be one of the following: {}",
                        opts.join(", ")
                    ));
                }
                out.push(v);
            }
            if out.is_empty() {
                return Err(format!(
                    "argument(s) must be one of the following: {}",
                    opts.join(", ")
                ));
            }
            Ok(out.join(" "))
        }
        Kind::Str if d.name == "proc-title-template" && !crate::proc_title::valid(one(), cfg) => {
            Err("template format is invalid or contains unknown variables".into())
        }
        Kind::Str => Ok(one().to_string()),
        Kind::Octal => {
            let v = one();
            match u32::from_str_radix(v, 8) {
                Ok(n) if n <= 0o777 => Ok(format!("{n:o}")),
                _ => Err("argument must be between 0 and 777 inclusive".into()),
            }
        }
        Kind::Special => validate_special(d.name, args, cur),
    }
}

fn validate_special(name: &str, args: &[String], cur: &str) -> SetResult {
    let parts: Vec<&str> = args
        .iter()
        .flat_map(|a| a.split(' '))
        .filter(|s| !s.is_empty())
        .collect();
    match name {
        "bind" => {
            if parts.is_empty() || parts.len() > 16 {
                return Err("Too many bind addresses specified.".into());
            }
            Ok(parts.join(" "))
        }
        "save" => {
            if parts.is_empty() {
                return Ok(String::new());
            }
            if !parts.len().is_multiple_of(2) {
                return Err("Invalid save parameters".into());
            }
            for p in &parts {
                match crate::num::parse_i64(p.as_bytes()) {
                    Some(n) if n >= 0 => {}
                    _ => return Err("Invalid save parameters".into()),
                }
            }
            Ok(parts.join(" "))
        }
        "dir" => {
            if parts.len() != 1 && args.len() != 1 {
                return Err("wrong number of arguments".into());
            }
            let d = args[0].clone();
            if d.is_empty() {
                return Err("No such file or directory".into());
            }
            Ok(d)
        }
        "client-output-buffer-limit" => {
            if !parts.len().is_multiple_of(4)
                || parts.is_empty() && !args.iter().all(|a| a.is_empty())
            {
                return Err("Wrong number of arguments in buffer limit configuration.".into());
            }
            // Classes not named keep their current limits.
            let cur: Vec<&str> = cur.split(' ').collect();
            let keep = |i: usize, dflt: &str| {
                cur.get(i * 4 + 1..i * 4 + 4)
                    .map_or(dflt.to_string(), |v| v.join(" "))
            };
            let mut classes = [
                ("normal", keep(0, "0 0 0")),
                ("slave", keep(1, "268435456 67108864 60")),
                ("pubsub", keep(2, "33554432 8388608 60")),
            ];
            for c in parts.chunks(4) {
                let class = match c[0].to_ascii_lowercase().as_str() {
                    "normal" => 0,
                    "slave" | "replica" => 1,
                    "pubsub" => 2,
                    _ => {
                        return Err(
                            "Invalid client class specified in buffer limit configuration.".into(),
                        );
                    }
                };
                let hard = parse_memory(c[1]);
                let soft = parse_memory(c[2]);
                let secs = crate::num::parse_i64(c[3].as_bytes());
                match (hard, soft, secs) {
                    (Some(h), Some(s), Some(t)) if h >= 0 && s >= 0 && t >= 0 => {
                        classes[class].1 = format!("{h} {s} {t}");
                    }
                    _ => {
                        return Err(
                            "Error in hard, soft or soft_seconds setting in buffer limit configuration."
                                .into(),
                        );
                    }
                }
            }
            Ok(classes
                .iter()
                .map(|(n, v)| format!("{n} {v}"))
                .collect::<Vec<_>>()
                .join(" "))
        }
        "oom-score-adj-values" => {
            if parts.len() != 3 {
                return Err("wrong number of arguments".into());
            }
            for p in &parts {
                match crate::num::parse_i64(p.as_bytes()) {
                    Some(n) if (-2000..=2000).contains(&n) => {}
                    _ => return Err(
                        "Invalid oom-score-adj-values, elements must be between -2000 and 2000."
                            .into(),
                    ),
                }
            }
            Ok(parts.join(" "))
        }
        "notify-keyspace-events" => {
            let v = args.first().cloned().unwrap_or_default();
            keyspace_events_canonical(&v)
                .ok_or_else(|| "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into())
        }
        "replicaof" => {
            if parts.len() != 2 {
                return Err("wrong number of arguments".into());
            }
            if parts[0].eq_ignore_ascii_case("no") && parts[1].eq_ignore_ascii_case("one") {
                return Ok(String::new());
            }
            match crate::num::parse_i64(parts[1].as_bytes()) {
                Some(p) if (0..=65535).contains(&p) => Ok(format!("{} {p}", parts[0])),
                _ => Err("Invalid master port".into()),
            }
        }
        "latency-tracking-info-percentiles" => {
            for p in &parts {
                match p.parse::<f64>() {
                    Ok(f) if (0.0..=100.0).contains(&f) => {}
                    Ok(_) => {
                        return Err(
                            "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
                                .into(),
                        );
                    }
                    Err(_) => {
                        return Err("Invalid latency-tracking-info-percentiles parameters".into());
                    }
                }
            }
            Ok(parts.join(" "))
        }
        _ => Ok(parts.join(" ")),
    }
}

/// Valkey's notify-keyspace-events flags in canonical order (`AKE`, not
/// `KEA`); `None` on an unknown class character. `n` stays beside `A`
/// (`AnKE`): CONFIG GET hides it there, as Valkey's does, but the class
/// stays on ([`Config::get`] shows the stored value through
/// `notify::to_string`).
fn keyspace_events_canonical(v: &str) -> Option<String> {
    use crate::command::notify;
    notify::parse(v.as_bytes()).map(|f| {
        let mut s = notify::to_string(f);
        if f & notify::ALL == notify::ALL && f & notify::NEW != 0 {
            s.insert(1, 'n');
        }
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `config_file` fuzz target: a bind address with a
    /// carriage return in it was written back unquoted and read back as
    /// something else.
    #[test]
    fn odd_words_of_a_multi_word_value_are_quoted_when_written_back() {
        let c = Config::parse_file_text("bind 127.0.0.1 \"a\\r\\x01'b\"\n", "t.conf").unwrap();
        let bind = c.get("bind").unwrap();
        assert_eq!(bind, "127.0.0.1 a\r\x01'b");
        let def = &DEFS[find_def("bind").unwrap()];
        let lines = rewrite_lines(def, &bind);
        assert_eq!(lines, ["bind 127.0.0.1 \"a\\r\\x01'b\""]);
        let again = Config::parse_file_text(&lines.join("\n"), "t.conf").unwrap();
        assert_eq!(again.get("bind").unwrap(), bind);
        // Plain words are written as they are, as Valkey writes them.
        assert_eq!(
            rewrite_lines(def, "127.0.0.1 -::1"),
            ["bind 127.0.0.1 -::1"]
        );
    }

    #[test]
    fn memory_units() {
        assert_eq!(parse_memory("1k"), Some(1000));
        assert_eq!(parse_memory("1KB"), Some(1024));
        assert_eq!(parse_memory("512mb"), Some(512 << 20));
        assert_eq!(parse_memory("1gb"), Some(1 << 30));
        assert_eq!(parse_memory("12"), Some(12));
        assert_eq!(parse_memory("x"), None);
        assert_eq!(parse_memory("1xb"), None);
        // No digits at all reads as 0, as Valkey's memtoull.
        assert_eq!(parse_memory(""), Some(0));
        assert_eq!(parse_memory("mb"), Some(0));
        assert_eq!(parse_memory("-1"), Some(-1));
        assert_eq!(format_memory(1 << 30), "1gb");
        assert_eq!(format_memory(1000), "1000");
    }

    #[test]
    fn split_like_sdssplitargs() {
        assert_eq!(split_args("a  b\tc").unwrap(), vec!["a", "b", "c"]);
        assert_eq!(split_args(r#"save """#).unwrap(), vec!["save", ""]);
        assert_eq!(
            split_args(r#"x "a\nb" 'c\'d'"#).unwrap(),
            vec!["x", "a\nb", "c'd"]
        );
        assert!(split_args(r#"x "abc"#).is_none());
        assert!(split_args(r#"x "abc"d"#).is_none());
    }

    #[test]
    fn defaults_match_typed_fields() {
        let c = Config::default();
        assert_eq!(c.port, 6379);
        assert_eq!(c.get("client-query-buffer-limit").unwrap(), "1073741824");
        assert_eq!(c.get("slave-read-only").unwrap(), "yes");
        assert_eq!(c.bind, vec!["*", "-::*"]);
        assert!(c.requirepass.is_none());
        // No duplicate names.
        let mut names: Vec<&str> = DEFS
            .iter()
            .flat_map(|d| std::iter::once(d.name).chain(d.alias))
            .collect();
        names.sort();
        let n = names.len();
        names.dedup();
        assert_eq!(n, names.len());
    }

    /// A value other than `d`'s default that it accepts, where one is
    /// simple to name.
    fn another_value(d: &Def) -> Option<String> {
        match d.kind {
            Kind::Bool => Some(if d.default == "yes" { "no" } else { "yes" }.into()),
            Kind::Int { min, max } | Kind::Mem { min, max, .. } => {
                let v = parse_memory(d.default)?;
                Some(if v < max { v + 1 } else { min }.to_string())
            }
            Kind::Enum(opts) => opts
                .iter()
                .find(|o| **o != d.default)
                .map(|o| o.to_string()),
            Kind::Str => Some("x".into()),
            Kind::Flags(_) | Kind::Octal | Kind::Special => None,
        }
    }

    /// A directive whose value moves a typed field acts on something: the
    /// start-up log must not call it ignored.
    #[test]
    fn a_directive_that_changes_the_config_is_not_reported_as_ignored() {
        let base = Config::default();
        let typed = |c: &Config| {
            let mut c = c.clone();
            c.values.clear();
            c.warnings.clear();
            format!("{c:?}")
        };
        let before = typed(&base);
        for (idx, d) in DEFS.iter().enumerate() {
            if d.flags & (SUP | HIDDEN) != 0 {
                continue;
            }
            let Some(v) = another_value(d) else {
                continue;
            };
            let mut c = base.clone();
            c.values[idx] = v;
            c.apply_typed(idx);
            assert!(
                typed(&c) == before,
                "{} acts, yet is reported as ignored",
                d.name
            );
        }
    }

    #[test]
    fn file_errors_carry_line_and_reason() {
        let e = Config::parse_file_text("port 7000\n\nfoo bar\n", "x.conf").unwrap_err();
        assert_eq!(e.line, 3);
        assert_eq!(e.reason, "Bad directive or wrong number of arguments");
        let shown = e.to_string();
        assert!(
            shown.contains("*** FATAL CONFIG FILE ERROR (Redis 7.2.4) ***"),
            "{shown}"
        );
        assert!(shown.contains(">>> 'foo bar'"), "{shown}");
        let e = Config::parse_file_text("port abc\n", "x.conf").unwrap_err();
        assert_eq!(e.reason, "argument couldn't be parsed into an integer");
        let e = Config::parse_file_text("port 70000\n", "x.conf").unwrap_err();
        assert_eq!(e.reason, "argument must be between 0 and 65535 inclusive");
        let e = Config::parse_file_text("protected-mode maybe\n", "x.conf").unwrap_err();
        assert_eq!(e.reason, "argument must be 'yes' or 'no'");
        let e = Config::parse_file_text("io-threads 0\n", "x.conf").unwrap_err();
        assert_eq!(e.reason, "argument must be between 1 and 128 inclusive");
        let c = Config::parse_file_text("io-threads 4\n", "x.conf").unwrap();
        assert_eq!(c.io_threads, 4);
    }

    #[test]
    fn file_and_args() {
        let c = Config::parse_file_text(
            "# comment\nport 7000\nsave 900 1\nsave 300 10\nclient-query-buffer-limit 2mb\nappendonly no\nslaveof 10.0.0.1 6380\nrequirepass \"p w\"\n",
            "x.conf",
        )
        .unwrap();
        assert_eq!(c.port, 7000);
        assert_eq!(c.get("save").unwrap(), "900 1 300 10");
        assert_eq!(c.client_query_buffer_limit, 2 << 20);
        assert_eq!(c.get("replicaof").unwrap(), "10.0.0.1 6380");
        assert_eq!(c.requirepass.as_deref(), Some(&b"p w"[..]));
        // Save points are acted on now: no "not supported" warning.
        assert!(!c.warnings.iter().any(|w| w.contains("'save'")));
        assert_eq!(c.save_points, vec![(900, 1), (300, 10)]);
        assert!(!c.warnings.iter().any(|w| w.contains("appendonly")));
        let args: Vec<String> = ["--port", "7001", "--save", "", "--bind", "127.0.0.1", "::1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let c = Config::load(None, &args).unwrap();
        assert_eq!(c.port, 7001);
        assert_eq!(c.get("save").unwrap(), "");
        assert_eq!(c.bind, vec!["127.0.0.1", "::1"]);
    }
}
