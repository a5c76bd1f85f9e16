//! Databases, entries and expiry.
//!
//! A [`Db`] is the main table plus a second, smaller table of its volatile
//! keys (key → expire time), as Valkey keeps its `expires` dict. The second
//! table makes `expires_len` exact and gives the active expire cycle
//! something to sample that contains only keys with a TTL, however few of
//! them there are among persistent keys. It must be kept in sync, so change
//! a key's TTL only through [`Db::insert`] and [`Db::set_expire`], never by
//! writing `Entry::expire_at_ms` through a `&mut Entry`.

use std::time::{Duration, Instant};

use crate::{Table, Value};

pub struct Entry {
    pub value: Value,
    /// Absolute Unix time in ms at which the key expires; `None` =
    /// persistent. Non-zero so the option costs no tag: 16 bytes less per
    /// key (a node fits jemalloc's 80-byte class, not 96). A time of 0 is
    /// stored as -1: both are long past, and an expired key is never seen.
    expire: Option<std::num::NonZeroI64>,
    /// Last access, in seconds of the server's clock (OBJECT IDLETIME).
    pub access_s: u32,
}

/// Node = hash (8) + inline key (24) + entry: 80 bytes, a jemalloc class.
const _: () = assert!(std::mem::size_of::<Entry>() <= 48);

impl Entry {
    pub fn new(value: Value) -> Entry {
        Entry {
            value,
            expire: None,
            access_s: 0,
        }
    }
    /// Absolute Unix time in ms at which the key expires.
    #[inline]
    pub fn expire_at_ms(&self) -> Option<i64> {
        self.expire.map(std::num::NonZeroI64::get)
    }
    #[inline]
    pub fn set_expire_at_ms(&mut self, at: Option<i64>) {
        self.expire =
            at.and_then(|t| std::num::NonZeroI64::new(t).or(std::num::NonZeroI64::new(-1)));
    }
    #[inline]
    pub fn is_expired(&self, now_ms: i64) -> bool {
        self.expire_at_ms().is_some_and(|t| t <= now_ms)
    }
}

/// Counters the engine reports in INFO.
#[derive(Default, Clone, Copy, Debug)]
pub struct ExpireStats {
    pub expired_keys: u64,
    pub expired_stale_perc: f64,
    pub expired_time_cap_reached_count: u64,
}

/// Keys the active cycle looks at per loop (Valkey's
/// `ACTIVE_EXPIRE_CYCLE_KEYS_PER_LOOP`).
const KEYS_PER_LOOP: usize = 20;
/// Keep looping while more than this percentage of a sample was expired.
const ACCEPTABLE_STALE: usize = 10;
/// `random_key` gives up after this many expired picks.
const RANDOM_TRIES: usize = 32;

#[inline]
fn secs(now_ms: i64) -> u32 {
    (now_ms / 1000).clamp(0, u32::MAX as i64) as u32
}

/// Bytes of a string value prefetched ahead of a read: a GET copies all of
/// it into the reply, and past this the hardware's stream prefetcher keeps
/// up with the copy.
const VALUE_PREFETCH_BYTES: usize = 1024;

fn prefetch_str(e: &Entry) {
    if let Value::Str(crate::Str::Bytes(b) | crate::Str::Raw(b)) = &e.value {
        let p = b.as_ptr();
        let n = b.len().min(VALUE_PREFETCH_BYTES);
        let mut off = 0;
        while off < n {
            crate::table::prefetch_ptr(p.wrapping_add(off));
            off += 64;
        }
        // The value's last line when its start is not line-aligned.
        if n > 0 {
            crate::table::prefetch_ptr(p.wrapping_add(n - 1));
        }
    }
}

/// One database: a table of entries plus what expiry needs.
#[derive(Default)]
pub struct Db {
    table: Table<Entry>,
    /// Volatile keys and their expire time (see the module doc).
    volatile: Table<i64>,
    /// Where the active cycle resumes its SCAN of `volatile`.
    expire_cursor: u64,
    /// The last clock the engine showed us, in seconds: stamps `access_s`
    /// of inserted entries that did not set it.
    clock_s: u32,
    /// Reused buffer of expired keys found by one sample.
    doomed: Vec<(u64, Box<[u8]>)>,
    pub stats: ExpireStats,
    /// Record the keys expiry deletes (lazily or actively) for the engine,
    /// which turns them into `expired` keyspace events and WATCH
    /// invalidations. Off unless someone listens: it costs a copy per key.
    pub log_expired: bool,
    expired_log: Vec<Box<[u8]>>,
    /// How `get` and `insert` stamp `access_s` (eviction API below).
    access: AccessPolicy,
    /// State of the LFU counter's random increments.
    lfu_rand: u64,
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
        self.volatile.len()
    }
    /// Look a key up, deleting it first if its time has passed (lazy
    /// expiry), and mark it accessed now.
    pub fn get(&mut self, hash: u64, key: &[u8], now_ms: i64) -> Option<&mut Entry> {
        self.clock_s = secs(now_ms);
        // Writes (and lookups for writing) move a resize along.
        self.table.rehash_step(1);
        // Located once, then borrowed: a borrow returned from one branch
        // of a match cannot be given up in the other.
        let loc = self.table.locate(hash, key)?;
        if self.table.at(loc).is_expired(now_ms) {
            self.expire_key(hash, key);
            return None;
        }
        let access = self.access;
        let r = self.next_lfu_rand();
        let e = self.table.at_mut(loc);
        e.stamp_access(access, now_ms, r);
        Some(e)
    }
    /// Read without expiring or touching (for SCAN/KEYS filtering, DEBUG).
    pub fn peek(&self, hash: u64, key: &[u8]) -> Option<&Entry> {
        self.table.get(hash, key)
    }
    /// Insert or overwrite. Returns the old entry (even if it had expired).
    /// An entry with `access_s == 0` is stamped with the last clock seen by
    /// `get`/`scan`/`random_key`/`active_expire`.
    pub fn insert(&mut self, hash: u64, key: &[u8], mut entry: Entry) -> Option<Entry> {
        if entry.access_s == 0 {
            entry.access_s = match self.access {
                AccessPolicy::Lru => self.clock_s,
                AccessPolicy::Lfu { .. } => lfu_fresh(self.clock_s as i64 * 1000),
            };
        }
        let at = entry.expire_at_ms();
        let old = self.table.insert(hash, key, entry);
        match at {
            Some(t) => {
                self.volatile.insert(hash, key, t);
            }
            None => {
                if old.as_ref().is_some_and(|o| o.expire_at_ms().is_some()) {
                    self.volatile.remove(hash, key);
                }
            }
        }
        old
    }
    pub fn remove(&mut self, hash: u64, key: &[u8]) -> Option<Entry> {
        let old = self.table.remove(hash, key);
        if old.as_ref().is_some_and(|o| o.expire_at_ms().is_some()) {
            self.volatile.remove(hash, key);
        }
        old
    }
    /// Remove an expired key and count it.
    fn expire_key(&mut self, hash: u64, key: &[u8]) -> bool {
        let gone = self.remove(hash, key).is_some();
        self.stats.expired_keys += gone as u64;
        if gone && self.log_expired {
            self.expired_log.push(key.into());
        }
        gone
    }
    /// Keys deleted by expiry since the last call, oldest first (only
    /// while [`Db::log_expired`] is set).
    pub fn take_expired(&mut self) -> Vec<Box<[u8]>> {
        std::mem::take(&mut self.expired_log)
    }
    pub fn has_expired_log(&self) -> bool {
        !self.expired_log.is_empty()
    }
    /// Set or clear a live key's expiry. Returns false if the key is absent.
    pub fn set_expire(&mut self, hash: u64, key: &[u8], at_ms: Option<i64>) -> bool {
        let Some(e) = self.table.get_mut(hash, key) else {
            return false;
        };
        let before = e.expire_at_ms().is_some();
        e.set_expire_at_ms(at_ms);
        match at_ms {
            Some(t) => {
                self.volatile.insert(hash, key, t);
            }
            None if before => {
                self.volatile.remove(hash, key);
            }
            None => {}
        }
        true
    }
    pub fn prefetch_batch(&self, hashes: &[u64]) {
        self.table.prefetch_batch(hashes)
    }
    /// After [`Db::prefetch_batch`]: prefetch the first cache lines of the
    /// string values of those keys (a GET copies them into the reply).
    pub fn prefetch_values(&self, hashes: &[u64]) {
        self.table.prefetch_values(hashes, prefetch_str)
    }
    /// One SCAN step over live keys; see [`Table::scan`].
    pub fn scan(&self, cursor: u64, now_ms: i64, mut f: impl FnMut(&[u8], &Entry)) -> u64 {
        self.table.scan(cursor, |k, e| {
            if !e.is_expired(now_ms) {
                f(k, e)
            }
        })
    }
    /// A random live key. Expired keys it lands on are deleted (as a lookup
    /// would); after 32 such picks it gives up and returns `None`.
    pub fn random_key(&mut self, seed: u64, now_ms: i64) -> Option<Vec<u8>> {
        self.clock_s = secs(now_ms);
        let mut s = seed;
        for _ in 0..RANDOM_TRIES {
            // Each try needs a different pick; the table changes only when
            // a key is deleted.
            s = s.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(1);
            let (h, k, e) = self.table.random_hashed(s)?;
            if !e.is_expired(now_ms) {
                return Some(k.to_vec());
            }
            let k = k.to_vec();
            self.expire_key(h, &k);
        }
        None
    }
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.table.iter()
    }
    /// Move every key out into a new database (to be freed elsewhere:
    /// FLUSHDB ASYNC), leaving this one empty.
    pub fn take_contents(&mut self) -> Db {
        let mut out = Db::default();
        std::mem::swap(&mut out.table, &mut self.table);
        std::mem::swap(&mut out.volatile, &mut self.volatile);
        self.expire_cursor = 0;
        out
    }
    pub fn clear(&mut self) {
        self.table.clear();
        self.volatile.clear();
        self.expire_cursor = 0;
    }
    /// Move up to `steps` buckets of any resize in progress (for the cron to
    /// finish resizes of databases that see no writes). True while work is
    /// left.
    pub fn rehash_step(&mut self, steps: usize) -> bool {
        let a = self.table.rehash_step(steps);
        let b = self.volatile.rehash_step(steps);
        a || b
    }
    /// The adaptive active-expire cycle (Valkey's `activeExpireCycle`):
    /// sample volatile keys, delete the expired, repeat while more than
    /// ~10% of a sample was stale, stop at `budget_us`. Returns keys removed.
    pub fn active_expire(&mut self, now_ms: i64, budget_us: u64) -> usize {
        self.clock_s = secs(now_ms);
        if self.volatile.is_empty() {
            return 0;
        }
        let start = Instant::now();
        let budget = Duration::from_micros(budget_us);
        let (mut total_sampled, mut total_expired) = (0usize, 0usize);
        loop {
            let want = KEYS_PER_LOOP.min(self.volatile.len());
            // Bounds the empty buckets one loop may walk in a sparse table.
            let max_buckets = want * 20;
            let mut sampled = 0;
            let mut buckets = 0;
            let mut doomed = std::mem::take(&mut self.doomed);
            while sampled < want && buckets < max_buckets {
                self.expire_cursor = self.volatile.scan_hashed(self.expire_cursor, |h, k, &at| {
                    sampled += 1;
                    if at <= now_ms {
                        doomed.push((h, k.into()));
                    }
                });
                buckets += 1;
                if self.expire_cursor == 0 {
                    break;
                }
            }
            // A scan step may return a key twice during a resize; count
            // what was really deleted.
            let mut expired = 0;
            for (h, k) in doomed.drain(..) {
                expired += self.expire_key(h, &k) as usize;
            }
            self.doomed = doomed;
            total_sampled += sampled;
            total_expired += expired;
            if self.volatile.is_empty()
                || (sampled > 0 && expired * 100 <= sampled * ACCEPTABLE_STALE)
            {
                break;
            }
            if start.elapsed() > budget {
                self.stats.expired_time_cap_reached_count += 1;
                break;
            }
        }
        if total_sampled > 0 {
            let perc = total_expired as f64 / total_sampled as f64;
            self.stats.expired_stale_perc = perc * 0.05 + self.stats.expired_stale_perc * 0.95;
        }
        total_expired
    }
    pub fn memory_usage(&self) -> usize {
        self.table.memory_usage() + self.volatile.memory_usage()
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

// ---- eviction API (temporary implementation on the old layout) ----
//
// The contract the engine's eviction codes against; the compact-node
// keyspace replaces this block. Here `Entry::access_s` holds the 24-bit
// field: under `Lru` whole seconds of the clock (as before), under `Lfu`
// 16 bits of minutes and an 8-bit logarithmic counter, as Valkey's
// `robj.lru`. Switching policy reinterprets the field, as Valkey does.

/// What the 24-bit access field of every entry holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AccessPolicy {
    /// The 24-bit field holds Valkey's LRU clock (seconds, wraps at 2^24).
    #[default]
    Lru,
    /// The 24-bit field holds Valkey's LFU data: 16 bits of minutes + 8-bit log counter.
    Lfu { log_factor: u32, decay_time: u32 },
}

/// Valkey's `LFU_INIT_VAL`: new keys start here, not at 0, so they can
/// collect a few hits before they are the first to go.
const LFU_INIT_VAL: u32 = 5;

fn lfu_minutes(now_ms: i64) -> u32 {
    ((now_ms.max(0) / 60_000) & 0xFFFF) as u32
}

/// The LFU field of a key created now.
fn lfu_fresh(now_ms: i64) -> u32 {
    (lfu_minutes(now_ms) << 8) | LFU_INIT_VAL
}

impl Entry {
    /// Valkey's estimateObjectIdleTime, in ms (under Lru).
    pub fn idle_ms(&self, now_ms: i64) -> u64 {
        u64::from(secs(now_ms).saturating_sub(self.access_s)) * 1000
    }

    /// Valkey's LFUDecrAndReturn: the counter after decay, not stored (under Lfu).
    pub fn lfu_counter(&self, now_ms: i64, decay_time: u32) -> u8 {
        let ldt = (self.access_s >> 8) & 0xFFFF;
        let counter = self.access_s & 0xFF;
        let now = lfu_minutes(now_ms);
        // The minutes wrap at 16 bits; assume at most one wrap.
        let elapsed = if now >= ldt {
            now - ldt
        } else {
            0xFFFF - ldt + now
        };
        // lfu-decay-time 0: never decays.
        let periods = elapsed.checked_div(decay_time).unwrap_or(0);
        counter.saturating_sub(periods) as u8
    }

    /// The value, to hand to lazyfree when evicting: consumes the entry.
    pub fn into_value(self) -> Value {
        self.value
    }

    /// Record an access under `policy`; `rand` is a uniform random u64
    /// (the LFU counter's logarithmic increment).
    fn stamp_access(&mut self, policy: AccessPolicy, now_ms: i64, rand: u64) {
        match policy {
            AccessPolicy::Lru => self.access_s = secs(now_ms),
            AccessPolicy::Lfu {
                log_factor,
                decay_time,
            } => {
                let mut counter = u32::from(self.lfu_counter(now_ms, decay_time));
                if counter < 255 {
                    let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
                    let p = 1.0 / (base * f64::from(log_factor) + 1.0);
                    let r = (rand >> 11) as f64 / (1u64 << 53) as f64;
                    if r < p {
                        counter += 1;
                    }
                }
                self.access_s = (lfu_minutes(now_ms) << 8) | counter;
            }
        }
    }
}

impl Keyspace {
    /// Sets how every database stamps accesses from now on (as Valkey, existing
    /// entries' fields are reinterpreted, not converted).
    pub fn set_access_policy(&mut self, p: AccessPolicy) {
        for db in &mut self.dbs {
            db.access = p;
        }
    }
}

impl Db {
    fn next_lfu_rand(&mut self) -> u64 {
        if !matches!(self.access, AccessPolicy::Lfu { .. }) {
            return 0;
        }
        // splitmix64: cheap and good enough for a coin flip per access.
        self.lfu_rand = self.lfu_rand.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.lfu_rand;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Up to `count` random live keys, from all keys or only those with a TTL;
    /// `seed` varies the pick. Calls f(hash, key, entry) for each.
    pub fn sample(
        &mut self,
        count: usize,
        volatile_only: bool,
        seed: u64,
        mut f: impl FnMut(u64, &[u8], &Entry),
    ) {
        let mut s = seed;
        for _ in 0..count {
            s = s
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .wrapping_add(0x632b_e59b_d9b4_e019);
            let s = s ^ (s >> 29);
            if volatile_only {
                let Some((h, k, _)) = self.volatile.random_hashed(s) else {
                    return;
                };
                if let Some(e) = self.table.get(h, k) {
                    f(h, k, e);
                }
            } else {
                let Some((h, k, e)) = self.table.random_hashed(s) else {
                    return;
                };
                f(h, k, e);
            }
        }
    }
}
