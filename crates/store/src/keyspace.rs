//! Databases, entries and expiry.
//!
//! PLACEHOLDER implementation with the intended API: lazy expiry works;
//! the store helper adds the volatile-key index and the adaptive active
//! expire cycle.

use crate::{Table, Value};

pub struct Entry {
    pub value: Value,
    /// Absolute Unix time in ms at which the key expires; `None` = persistent.
    pub expire_at_ms: Option<i64>,
    /// Last access, in seconds of the server's clock (OBJECT IDLETIME).
    pub access_s: u32,
}

impl Entry {
    pub fn new(value: Value) -> Entry {
        Entry {
            value,
            expire_at_ms: None,
            access_s: 0,
        }
    }
}

/// Counters the engine reports in INFO.
#[derive(Default, Clone, Copy, Debug)]
pub struct ExpireStats {
    pub expired_keys: u64,
    pub expired_stale_perc: f64,
    pub expired_time_cap_reached_count: u64,
}

/// One database: a table of entries plus what expiry needs.
#[derive(Default)]
pub struct Db {
    table: Table<Entry>,
    expires: usize,
    pub stats: ExpireStats,
}

impl Db {
    pub fn len(&self) -> usize {
        self.table.len()
    }
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
    /// Keys with a TTL (INFO keyspace `expires=`).
    pub fn expires_len(&self) -> usize {
        self.expires
    }
    /// Look a key up, deleting it first if its time has passed (lazy expiry).
    pub fn get(&mut self, hash: u64, key: &[u8], now_ms: i64) -> Option<&mut Entry> {
        let expired = match self.table.get(hash, key) {
            Some(e) => e.expire_at_ms.is_some_and(|t| t <= now_ms),
            None => return None,
        };
        if expired {
            self.remove(hash, key);
            self.stats.expired_keys += 1;
            return None;
        }
        self.table.get_mut(hash, key)
    }
    /// Read without expiring or touching (for SCAN/KEYS filtering, DEBUG).
    pub fn peek(&self, hash: u64, key: &[u8]) -> Option<&Entry> {
        self.table.get(hash, key)
    }
    /// Insert or overwrite. Returns the old entry.
    pub fn insert(&mut self, hash: u64, key: &[u8], entry: Entry) -> Option<Entry> {
        let has_ttl = entry.expire_at_ms.is_some();
        let old = self.table.insert(hash, key, entry);
        if old.as_ref().is_some_and(|o| o.expire_at_ms.is_some()) {
            self.expires -= 1;
        }
        if has_ttl {
            self.expires += 1;
        }
        old
    }
    pub fn remove(&mut self, hash: u64, key: &[u8]) -> Option<Entry> {
        let old = self.table.remove(hash, key);
        if old.as_ref().is_some_and(|o| o.expire_at_ms.is_some()) {
            self.expires -= 1;
        }
        old
    }
    /// Set or clear a live key's expiry. Returns false if the key is absent.
    pub fn set_expire(&mut self, hash: u64, key: &[u8], at_ms: Option<i64>) -> bool {
        let Some(e) = self.table.get_mut(hash, key) else {
            return false;
        };
        let before = e.expire_at_ms.is_some();
        e.expire_at_ms = at_ms;
        match (before, at_ms.is_some()) {
            (false, true) => self.expires += 1,
            (true, false) => self.expires -= 1,
            _ => {}
        }
        true
    }
    pub fn prefetch_batch(&self, hashes: &[u64]) {
        self.table.prefetch_batch(hashes)
    }
    /// One SCAN step over live keys; see [`Table::scan`].
    pub fn scan(&self, cursor: u64, now_ms: i64, mut f: impl FnMut(&[u8], &Entry)) -> u64 {
        self.table.scan(cursor, |k, e| {
            if !e.expire_at_ms.is_some_and(|t| t <= now_ms) {
                f(k, e)
            }
        })
    }
    /// A random live key.
    pub fn random_key(&mut self, seed: u64, now_ms: i64) -> Option<Vec<u8>> {
        let _ = now_ms;
        self.table.random(seed).map(|(k, _)| k.to_vec())
    }
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.table.iter()
    }
    pub fn clear(&mut self) {
        self.table.clear();
        self.expires = 0;
    }
    /// The adaptive active-expire cycle (Valkey's `activeExpireCycle`):
    /// sample volatile keys, delete the expired, repeat while more than
    /// ~10% of a sample was stale, stop at `budget_us`. Returns keys removed.
    pub fn active_expire(&mut self, now_ms: i64, budget_us: u64) -> usize {
        let _ = (now_ms, budget_us);
        0
    }
    pub fn memory_usage(&self) -> usize {
        self.table.memory_usage()
    }
}

/// All databases (`databases` directive, 16 by default).
pub struct Keyspace {
    pub dbs: Vec<Db>,
}

impl Keyspace {
    pub fn new(databases: usize) -> Self {
        Keyspace {
            dbs: (0..databases).map(|_| Db::default()).collect(),
        }
    }
    pub fn swap(&mut self, a: usize, b: usize) {
        self.dbs.swap(a, b)
    }
}
