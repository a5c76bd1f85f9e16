//! Valkey 8's `extended-redis-compatibility`: with it on, the server calls
//! itself Redis where clients and tools look for a name — HELLO's
//! `server` ("redis") and `version` (7.2.4), INFO's `redis_mode` (for
//! `server_mode`) and the LOADING, BUSY and MISCONF error texts — so that
//! software written for Redis that checks those keeps working. Valkey
//! keeps the setting until 9.0; so does ringkv.
//!
//! The setting is process-wide rather than read from `Config`, because IO
//! threads answer BUSY while a script runs on the execution thread.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

static REDIS: AtomicBool = AtomicBool::new(false);

/// CONFIG SET / the configuration file changed `extended-redis-compatibility`.
pub fn set(on: bool) {
    REDIS.store(on, Relaxed);
}

/// Is `extended-redis-compatibility` on?
pub fn redis() -> bool {
    REDIS.load(Relaxed)
}

/// `valkey` or `redis`: HELLO's `server`.
pub fn server_name() -> &'static str {
    if redis() { "redis" } else { "valkey" }
}

/// HELLO's `version`.
pub fn version() -> &'static str {
    if redis() {
        crate::config::REDIS_COMPAT_VERSION
    } else {
        crate::config::VALKEY_COMPAT_VERSION
    }
}

/// One error text in its two spellings.
pub struct Text {
    valkey: &'static str,
    redis: &'static str,
}

impl Text {
    pub fn get(&self) -> &'static str {
        if redis() { self.redis } else { self.valkey }
    }
}

pub const LOADING: Text = Text {
    valkey: "LOADING Valkey is loading the dataset in memory",
    redis: "LOADING Redis is loading the dataset in memory",
};

pub const BUSY_EVAL: Text = Text {
    valkey: "BUSY Valkey is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
    redis: "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
};

pub const BUSY_FUNCTION: Text = Text {
    valkey: "BUSY Valkey is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.",
    redis: "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.",
};

pub const MISCONF: Text = Text {
    valkey: "MISCONF Valkey is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Valkey logs for details about the RDB error.",
    redis: "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.",
};
