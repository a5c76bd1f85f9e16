//! Databases, access stamps and expiry.
//!
//! A [`Db`] is one table of [`Entry`] nodes (key, value, expiry and access
//! bits in one allocation) plus an index of expiry times. The index is a
//! min-heap of `(time, key hash)`, 16 bytes per volatile key and no second
//! hash-table entry: the active cycle pops what is due instead of sampling
//! (so it finds every expired key Valkey's sampling would, and more), and
//! eviction's `volatile-*` policies sample it. An index item goes stale
//! when its key's TTL changes or the key goes away; it is dropped when it
//! comes up without a key of that hash and time, and the heap is rebuilt
//! without stale items once they outnumber the live ones. Change a key's
//! TTL only through [`Db::insert`] and [`Db::set_expire`], never through
//! [`Entry::set_expire_at_ms`] on a `&mut Entry`.
//!
//! Every method that can change or delete an entry ([`Db::get`], which
//! hands out `&mut Entry`, [`Db::insert`], [`Db::remove`],
//! [`Db::set_expire`], and expiry through them) first tells a
//! point-in-time view in progress ([`crate::freeze`]), which may copy the
//! entry; look up to read with [`Db::get_read`], which does not.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::table::{Item, RawTable};
use crate::{Entry, hash_key};

/// How a database stamps an entry's 24 access bits on each access (as
/// Valkey, chosen by `maxmemory-policy`). Switching does not convert the
/// bits already stamped: they read as the other kind until next touched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessPolicy {
    /// Valkey's LRU clock: Unix seconds modulo 2^24.
    Lru,
    /// Valkey's LFU: minutes modulo 2^16 (8 bits up) and a logarithmic
    /// counter (low 8 bits), decaying by one per `decay_time` minutes.
    Lfu { log_factor: u32, decay_time: u32 },
}

/// Valkey's `LFU_INIT_VAL`: a new key's counter, so that it is not
/// evicted before it had a chance to be read.
pub const LFU_INIT_VAL: u8 = 5;
const LRU_CLOCK_MAX: u32 = (1 << 24) - 1;

/// Valkey's `LRU_CLOCK()` at `now_ms` (second resolution).
#[inline]
pub fn lru_clock(now_ms: i64) -> u32 {
    ((now_ms / 1000) as u64 & LRU_CLOCK_MAX as u64) as u32
}

#[inline]
fn lfu_minutes(now_ms: i64) -> u32 {
    ((now_ms / 60_000) as u64 & 0xFFFF) as u32
}

/// Access bits for a key that arrives with Valkey's idle time or LFU
/// counter (RESTORE IDLETIME / FREQ, the RDB IDLE / FREQ opcodes), as
/// `objectSetLRUOrLFU`: only the one the policy uses counts; `None` when
/// the key should be stamped as new.
pub fn restored_access(
    policy: AccessPolicy,
    now_ms: i64,
    idle_s: Option<u64>,
    freq: Option<u8>,
) -> Option<u32> {
    match policy {
        AccessPolicy::Lru => {
            let idle_ms = idle_s?.saturating_mul(1000).min(now_ms.max(0) as u64);
            // At least 1: 0 means "not stamped" to `Db::insert`.
            Some(lru_clock(now_ms - idle_ms as i64).max(1))
        }
        AccessPolicy::Lfu { .. } => Some((lfu_minutes(now_ms) << 8) | freq? as u32),
    }
}

impl Entry {
    /// Valkey's `estimateObjectIdleTime`, in ms: how long since the last
    /// access, from LRU access bits.
    pub fn idle_ms(&self, now_ms: i64) -> u64 {
        let clock = lru_clock(now_ms);
        let at = self.access();
        let secs = if clock >= at {
            clock - at
        } else {
            clock + (LRU_CLOCK_MAX - at)
        };
        secs as u64 * 1000
    }

    /// Valkey's `LFUDecrAndReturn`: the counter of LFU access bits after
    /// the decay due by `now_ms` (not stored).
    pub fn lfu_counter(&self, now_ms: i64, decay_time: u32) -> u8 {
        let a = self.access();
        let (last, counter) = (a >> 8, (a & 0xFF) as u8);
        if decay_time == 0 {
            return counter;
        }
        let now = lfu_minutes(now_ms);
        let elapsed = if now >= last {
            now - last
        } else {
            65535 - last + now
        };
        let periods = elapsed / decay_time;
        counter.saturating_sub(periods.min(255) as u8)
    }
}

/// Counters the engine reports in INFO.
#[derive(Default, Clone, Copy, Debug)]
pub struct ExpireStats {
    pub expired_keys: u64,
    pub expired_stale_perc: f64,
    pub expired_time_cap_reached_count: u64,
}

/// Values with a larger free effort ([`crate::ValueRef::free_effort`])
/// than this are freed off the engine's thread (Valkey's lazyfree).
pub const LAZYFREE_THRESHOLD: usize = 64;

/// Which removals leave large values for the engine to free elsewhere
/// (`lazyfree-lazy-expire`, `lazyfree-lazy-server-del`).
#[derive(Default, Clone, Copy, Debug)]
pub struct LazyRemovals {
    /// Keys deleted by expiry.
    pub expired: bool,
    /// Values an insert replaced.
    pub overwritten: bool,
}

/// `random_key` gives up after this many expired picks.
const RANDOM_TRIES: usize = 32;
/// The most keys one [`Db::sample`] call takes (Valkey caps
/// `maxmemory-samples` at 64).
pub const MAX_SAMPLE: usize = 64;
/// Expiry index items popped between two looks at the clock.
const POPS_PER_CLOCK_READ: usize = 16;

/// The expiry index; see the module doc.
#[derive(Default)]
struct ExpireIndex {
    heap: BinaryHeap<Reverse<(i64, u64)>>,
}

/// What [`Db::insert`] replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replaced {
    /// Its time had passed (not yet expired: a write treats the key as new).
    pub expired: bool,
}

/// One database: a table of entries plus what expiry and eviction need.
pub struct Db {
    pub(crate) table: RawTable<Entry>,
    expires: ExpireIndex,
    /// Keys with a TTL (exact; the index also holds stale items).
    volatile: usize,
    policy: AccessPolicy,
    /// State of the LFU counter's coin flips.
    rng: u64,
    /// The last clock the engine showed us, in ms: stamps entries inserted
    /// without one.
    clock_ms: i64,
    pub stats: ExpireStats,
    /// Record the keys expiry deletes (lazily or actively) for the engine,
    /// which turns them into `expired` keyspace events and WATCH
    /// invalidations. Off unless someone listens: it costs a copy per key.
    pub log_expired: bool,
    expired_log: Vec<Box<[u8]>>,
    /// How much of `expired_log` the effects stream has seen.
    expired_emitted: usize,
    /// Keys past their time are not expired on access (while an AOF is
    /// replayed: its later commands may still need them, as Valkey treats
    /// keys while loading).
    pub expiry_paused: bool,
    /// With `expiry_paused`: keys past their time are not seen either
    /// (a replica's clients; its primary's commands run with this off).
    pub expiry_hidden: bool,
    /// Lookups leave the access bits (LRU clock, LFU counter) as they are:
    /// set while a client in CLIENT NO-TOUCH mode runs a command.
    pub no_touch: bool,
    /// A point-in-time view in progress (see [`crate::freeze`]).
    pub(crate) view: Option<Box<crate::freeze::View>>,
    lazy: LazyRemovals,
    /// Large entries removed under `lazy`, for [`Db::take_retired`].
    retired: Vec<Entry>,
    /// Shared by a keyspace's databases, so that the engine's per-command
    /// and per-batch looks across them are one load each.
    signals: Arc<Signals>,
}

/// What a keyspace's databases raise for the engine to look at (one load
/// instead of a walk over every database after every command).
#[derive(Default, Debug)]
struct Signals {
    /// Set when a database's `retired` gains an entry
    /// ([`Keyspace::any_retired`]).
    retired: AtomicBool,
    /// Set when a database's expired-key log gains a key; cleared by
    /// [`Keyspace::expired_log_drained`].
    expired: AtomicBool,
}

impl Default for Db {
    fn default() -> Self {
        Db {
            table: RawTable::new(),
            expires: ExpireIndex::default(),
            volatile: 0,
            policy: AccessPolicy::Lru,
            rng: 0x853c_49e6_748f_ea9b,
            clock_ms: 0,
            stats: ExpireStats::default(),
            log_expired: false,
            expired_log: Vec::new(),
            expired_emitted: 0,
            expiry_paused: false,
            expiry_hidden: false,
            no_touch: false,
            view: None,
            lazy: LazyRemovals::default(),
            retired: Vec::new(),
            signals: Arc::default(),
        }
    }
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
        self.volatile
    }
    pub fn access_policy(&self) -> AccessPolicy {
        self.policy
    }

    /// Access bits for an entry touched now: Valkey's `updateLFU` (the
    /// decayed counter, then its logarithmic increment) or `LRU_CLOCK`.
    /// A free function of the fields it needs, so that it can run while
    /// the entry is borrowed from the table.
    fn touched(policy: AccessPolicy, rng: &mut u64, e: &Entry, now_ms: i64) -> u32 {
        match policy {
            AccessPolicy::Lru => lru_clock(now_ms),
            AccessPolicy::Lfu {
                log_factor,
                decay_time,
            } => {
                let c = e.lfu_counter(now_ms, decay_time);
                let c = if c == 255 {
                    255
                } else {
                    let base = c.saturating_sub(LFU_INIT_VAL) as f64;
                    let p = 1.0 / (base * log_factor as f64 + 1.0);
                    *rng ^= *rng << 13;
                    *rng ^= *rng >> 7;
                    *rng ^= *rng << 17;
                    let r = (*rng >> 11) as f64 / (1u64 << 53) as f64;
                    c + (r < p) as u8
                };
                (lfu_minutes(now_ms) << 8) | c as u32
            }
        }
    }

    /// Access bits of a new key (Valkey's `createObject`).
    fn fresh_access(&self, now_ms: i64) -> u32 {
        match self.policy {
            AccessPolicy::Lru => lru_clock(now_ms),
            AccessPolicy::Lfu { .. } => (lfu_minutes(now_ms) << 8) | LFU_INIT_VAL as u32,
        }
    }

    /// Before a change to `key`: a view in progress may need its old
    /// version. One predictable branch when there is none.
    #[inline(always)]
    fn before_write(&mut self, hash: u64, key: &[u8], insert: bool) {
        if self.view.is_some() {
            self.freeze_hook(hash, key, insert);
        }
    }

    /// Look a key up, deleting it first if its time has passed (lazy
    /// expiry), and stamp the access. The caller may change the entry
    /// (a read should use [`Db::get_read`], which a view in progress does
    /// not have to copy for).
    pub fn get(&mut self, hash: u64, key: &[u8], now_ms: i64) -> Option<&mut Entry> {
        self.before_write(hash, key, false);
        self.lookup(hash, key, now_ms)
    }

    /// [`Db::get`] without telling a view.
    #[inline(always)]
    pub(crate) fn lookup(&mut self, hash: u64, key: &[u8], now_ms: i64) -> Option<&mut Entry> {
        self.clock_ms = now_ms;
        // Writes (and lookups for writing) move a resize along.
        self.table.rehash_step(1);
        let e = if self.volatile == 0 {
            // No key can have expired: one lookup.
            self.table.get_mut(hash, key)?
        } else {
            // Located once, then borrowed: a borrow returned from one
            // branch of a match cannot be given up in the other.
            let loc = self.table.locate(hash, key)?;
            if self.table.at(loc).is_expired(now_ms) {
                if self.expiry_hidden {
                    return None;
                }
                if !self.expiry_paused {
                    self.expire_key(hash, key);
                    return None;
                }
            }
            self.table.at_mut(loc)
        };
        if !self.no_touch {
            let stamp = Db::touched(self.policy, &mut self.rng, e, now_ms);
            e.set_access(stamp);
        }
        Some(e)
    }
    /// Read without expiring or touching (for SCAN/KEYS filtering, DEBUG,
    /// OBJECT).
    pub fn peek(&self, hash: u64, key: &[u8]) -> Option<&Entry> {
        self.table.get(hash, key)
    }
    /// Insert or overwrite. Returns what it replaced (even if that had
    /// expired), which is dropped here or, large and under
    /// [`LazyRemovals::overwritten`], kept for [`Db::take_retired`].
    /// A new key's access bits are stamped fresh unless `entry` carries
    /// some (a moved key keeps its own); an overwrite under LFU keeps the
    /// old key's counter, as Valkey's `dbSetValue`.
    pub fn insert(
        &mut self,
        hash: u64,
        key: &[u8],
        mut entry: Entry,
        now_ms: i64,
    ) -> Option<Replaced> {
        self.clock_ms = now_ms;
        self.before_write(hash, key, true);
        if entry.key() != key {
            entry = entry.rekey(key);
        }
        let at = entry.expire_at_ms();
        let unstamped = entry.access() == 0;
        if unstamped {
            entry.set_access(self.fresh_access(self.clock_ms));
        }
        let old = self.table.insert(hash, entry);
        // Only an LFU overwrite looks the key up again, to keep the
        // counter of the value it replaced.
        if unstamped
            && matches!(self.policy, AccessPolicy::Lfu { .. })
            && let Some(o) = &old
        {
            let e = self.table.get_mut(hash, key).expect("just inserted");
            e.set_access(o.access());
        }
        self.count_expiry(hash, at, old.as_ref());
        old.map(|o| {
            let replaced = Replaced {
                expired: o.is_expired(now_ms),
            };
            self.retire(o, self.lazy.overwritten);
            replaced
        })
    }
    /// Insert an entry under its own key, as a load does: no copy of the
    /// key, no view to keep (loading never overlaps a save). Returns what
    /// it replaced, which for a load means a duplicate key.
    pub fn insert_loaded(&mut self, hash: u64, mut entry: Entry) -> Option<Entry> {
        debug_assert!(self.frozen_index().is_none());
        let at = entry.expire_at_ms();
        if entry.access() == 0 {
            entry.set_access(self.fresh_access(self.clock_ms));
        }
        let old = self.table.insert(hash, entry);
        self.count_expiry(hash, at, old.as_ref());
        old
    }
    /// The expiry bookkeeping of an insert: `at` is the new entry's time.
    fn count_expiry(&mut self, hash: u64, at: Option<i64>, old: Option<&Entry>) {
        self.volatile += at.is_some() as usize;
        if let Some(t) = at {
            self.index_expiry(t, hash);
        }
        if old.is_some_and(|o| o.expire_at_ms().is_some()) {
            self.volatile -= 1;
        }
    }
    pub fn remove(&mut self, hash: u64, key: &[u8]) -> Option<Entry> {
        self.before_write(hash, key, false);
        let old = self.table.remove(hash, key);
        if old.as_ref().is_some_and(|o| o.expire_at_ms().is_some()) {
            self.volatile -= 1;
            self.maybe_compact_expiry_index();
        }
        old
    }
    /// A deletion by the server rather than the user (Valkey's `dbDelete`:
    /// a `*STORE` with an empty result, RESTORE or MIGRATE): the entry is
    /// dropped, or kept for [`Db::take_retired`] when large under
    /// [`LazyRemovals::overwritten`]. False if there was no such key.
    pub fn delete(&mut self, hash: u64, key: &[u8]) -> bool {
        let lazy = self.lazy.overwritten;
        self.remove_retiring(hash, key, lazy)
    }
    /// A key deleted because a write gave it a time already past: as
    /// [`Db::delete`], under [`LazyRemovals::expired`] (Valkey's
    /// `deleteExpiredKeyFromOverwriteAndPropagate`).
    pub fn delete_expired(&mut self, hash: u64, key: &[u8]) -> bool {
        let lazy = self.lazy.expired;
        self.remove_retiring(hash, key, lazy)
    }
    fn remove_retiring(&mut self, hash: u64, key: &[u8], lazy: bool) -> bool {
        match self.remove(hash, key) {
            Some(e) => {
                self.retire(e, lazy);
                true
            }
            None => false,
        }
    }
    /// Drop a removed entry, or keep it for [`Db::take_retired`] when
    /// `lazy` and it is large.
    fn retire(&mut self, e: Entry, lazy: bool) {
        if lazy && e.value().free_effort() > LAZYFREE_THRESHOLD {
            self.retired.push(e);
            self.signals.retired.store(true, Ordering::Relaxed);
        }
    }
    /// Large entries expiry and overwrites removed since the last call
    /// (see [`LazyRemovals`]), for the engine to free elsewhere.
    pub fn take_retired(&mut self) -> Option<Vec<Entry>> {
        if self.retired.is_empty() {
            return None;
        }
        Some(std::mem::take(&mut self.retired))
    }
    /// Remove an expired key and count it.
    fn expire_key(&mut self, hash: u64, key: &[u8]) -> bool {
        let gone = self.delete_expired(hash, key);
        self.stats.expired_keys += gone as u64;
        if gone && self.log_expired {
            self.expired_log.push(key.into());
            self.signals.expired.store(true, Ordering::Relaxed);
        }
        gone
    }
    /// Keys deleted by expiry since the last call, oldest first (only
    /// while [`Db::log_expired`] is set).
    pub fn take_expired(&mut self) -> Vec<Box<[u8]>> {
        self.expired_emitted = 0;
        std::mem::take(&mut self.expired_log)
    }
    /// Keys logged since the last call (the log itself stays for
    /// [`Db::take_expired`]): the effects stream emits their deletions as
    /// they happen, before WATCH and keyspace events look at them.
    pub fn expired_not_emitted(&mut self) -> &[Box<[u8]>] {
        let from = self.expired_emitted.min(self.expired_log.len());
        self.expired_emitted = self.expired_log.len();
        &self.expired_log[from..]
    }
    pub fn has_expired_log(&self) -> bool {
        !self.expired_log.is_empty()
    }
    /// Set or clear a live key's expiry. Returns false if the key is absent.
    pub fn set_expire(&mut self, hash: u64, key: &[u8], at_ms: Option<i64>) -> bool {
        self.before_write(hash, key, false);
        let Some(e) = self.table.get_mut(hash, key) else {
            return false;
        };
        let before = e.expire_at_ms().is_some();
        e.set_expire_at_ms(at_ms);
        self.volatile = self.volatile + at_ms.is_some() as usize - before as usize;
        if let Some(t) = at_ms {
            self.index_expiry(t, hash);
        }
        true
    }

    fn index_expiry(&mut self, at: i64, hash: u64) {
        self.expires.heap.push(Reverse((at, hash)));
        self.maybe_compact_expiry_index();
    }

    /// Once stale items outnumber the live ones, rebuild the index without
    /// them. Amortised: since the last rebuild, at least half as many TTL
    /// changes or deletions as the rebuild visits have happened.
    fn maybe_compact_expiry_index(&mut self) {
        let heap = &mut self.expires.heap;
        if heap.len() > 2 * self.volatile + 64 {
            let items = std::mem::take(heap).into_vec();
            let table = &self.table;
            let live: Vec<_> = items
                .into_iter()
                .filter(|&Reverse((at, h))| find_volatile(table, h, at).is_some())
                .collect();
            self.expires.heap = BinaryHeap::from(live);
        }
    }

    pub fn prefetch_batch(&self, hashes: &[u64]) {
        self.table.prefetch_batch(hashes)
    }
    /// After [`Db::prefetch_batch`]: prefetch the rest of the inline string
    /// values of those keys (a GET copies them into the reply).
    pub fn prefetch_values(&self, hashes: &[u64]) {
        self.table
            .prefetch_values(hashes, |_, _| true, Entry::prefetch_value)
    }
    /// One SCAN step over live keys; see [`RawTable::scan`].
    pub fn scan(&self, cursor: u64, mut f: impl FnMut(&[u8], &Entry)) -> u64 {
        self.table.scan(cursor, |e| f(e.key(), e))
    }
    /// Is `e` there for the command running now: live, or past its time
    /// while expiry is paused and not hidden (see the two fields).
    pub fn shows(&self, e: &Entry, now_ms: i64) -> bool {
        !e.is_expired(now_ms) || (self.expiry_paused && !self.expiry_hidden)
    }
    /// A random key [`Db::shows`]. Expired keys it lands on are deleted
    /// (as a lookup would); after 32 such picks it gives up and returns
    /// `None`. While expiry is paused every key may be past its time and
    /// none can be deleted: then, when all keys have a TTL, the last
    /// pick is returned anyway (Valkey's `dbRandomKey`).
    pub fn random_key(&mut self, seed: u64, now_ms: i64) -> Option<Vec<u8>> {
        self.clock_ms = now_ms;
        let all_volatile = self.volatile == self.len();
        let mut s = seed;
        for tries_left in (0..RANDOM_TRIES).rev() {
            // Each try needs a different pick; the table changes only when
            // a key is deleted.
            s = s.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(1);
            let e = self.table.random(s)?;
            if self.shows(e, now_ms) || (self.expiry_paused && all_volatile && tries_left == 0) {
                return Some(e.key().to_vec());
            }
            if self.expiry_paused {
                continue;
            }
            let k = e.key().to_vec();
            self.expire_key(hash_key(&k), &k);
        }
        None
    }
    /// Up to `count` live keys for eviction's sample: from all keys, a run
    /// of consecutive buckets from a random one (as Valkey's
    /// `dictGetSomeKeys`); from keys with a TTL, random expiry index items.
    /// `seed` varies the pick. Calls `f(entry)` for each (the key is
    /// `entry.key()`; its hash is left to the caller, which needs it only
    /// for the few it keeps); a key may come twice.
    pub fn sample(
        &mut self,
        count: usize,
        volatile_only: bool,
        seed: u64,
        mut f: impl FnMut(&Entry),
    ) {
        let now = self.clock_ms;
        let mut s = seed;
        let mut next = || {
            s = next_sample_seed(s);
            s ^ (s >> 29)
        };
        let mut found = 0;
        if volatile_only {
            let items = self.expires.heap.as_slice();
            if self.volatile == 0 || items.is_empty() {
                return;
            }
            // Random picks (at least half the items are live, see
            // `maybe_compact_expiry_index`); stale ones are skipped. Then,
            // if few were found, a walk from a random item, so that a live
            // key is found whenever there is one.
            let n = items.len();
            let mut visit = |i: usize, found: &mut usize| {
                let Reverse((at, h)) = items[i];
                if let Some(e) = find_volatile(&self.table, h, at) {
                    f(e);
                    *found += 1;
                }
            };
            for _ in 0..count * 2 {
                visit((next() % n as u64) as usize, &mut found);
                if found == count {
                    return;
                }
            }
            if found == 0 {
                let start = (next() % n as u64) as usize;
                for k in 0..n {
                    visit((start + k) % n, &mut found);
                    if found == count {
                        return;
                    }
                }
            }
        } else {
            // A run of consecutive buckets; the nodes' first lines (key and
            // access bits) are all requested before any is read.
            let mut picked = [None; MAX_SAMPLE];
            let mut n = 0;
            self.table.sample_run(next(), count.min(MAX_SAMPLE), |e| {
                e.prefetch_header();
                picked[n] = Some(e);
                n += 1;
            });
            for e in picked[..n].iter().flatten() {
                if !e.is_expired(now) || now == 0 {
                    f(e);
                }
            }
        }
    }
    /// Start the first miss of a later [`Db::sample`] over all keys with
    /// this seed (eviction prefetches its next sample as it finishes one).
    pub fn prefetch_sample(&self, seed: u64) {
        let s = next_sample_seed(seed);
        self.table.prefetch_sample(s ^ (s >> 29));
    }
    /// The second step of a later [`Db::sample`]'s prefetch, once its
    /// first bucket is expected in cache ([`Db::prefetch_sample`] with the
    /// same seed, some time before): read the bucket run and start the
    /// misses of the `count` nodes the sample will score. Nothing is read
    /// from the nodes; a table changed since costs useless prefetches,
    /// never a wrong sample.
    pub fn prefetch_sample_nodes(&self, seed: u64, count: usize) {
        let s = next_sample_seed(seed);
        self.table
            .sample_run(s ^ (s >> 29), count.min(MAX_SAMPLE), Entry::prefetch_header);
    }
    /// Start the misses of removing these keys (eviction's next victims):
    /// their buckets, then the first line of each node whose tag matches
    /// (all a removal reads of a node: its key and flags).
    pub fn prefetch_removals(&self, hashes: &[u64]) {
        self.table
            .prefetch_batch_with(hashes, Entry::prefetch_header);
    }
    /// Start the miss of `hash`'s home bucket (eviction's next victim).
    pub fn prefetch_key(&self, hash: u64) {
        self.table.prefetch(hash);
    }
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Entry)> {
        self.table.iter().map(|e| (e.key(), e))
    }
    /// Move every key out into a new database (to be freed elsewhere:
    /// FLUSHDB ASYNC), leaving this one empty. During a view the keys go
    /// to the view instead, which is still reading them, and the database
    /// returned is empty ([`Db::thaw_detached`] hands them over later).
    pub fn take_contents(&mut self) -> Db {
        if self.detach_for_view() {
            return Db::default();
        }
        self.move_contents()
    }
    pub(crate) fn move_contents(&mut self) -> Db {
        let mut out = Db::default();
        std::mem::swap(&mut out.table, &mut self.table);
        std::mem::swap(&mut out.expires, &mut self.expires);
        out.volatile = std::mem::take(&mut self.volatile);
        out
    }
    /// An empty database with this one's settings (access policy, clock),
    /// for a load that must not disturb this one while it is served (a
    /// replica's `repl-diskless-load swapdb`).
    pub fn staging(&self) -> Db {
        Db {
            policy: self.policy,
            rng: self.rng,
            clock_ms: self.clock_ms,
            lazy: self.lazy,
            signals: self.signals.clone(),
            ..Db::default()
        }
    }

    /// The keys of `new` (a [`Db::staging`] database, loaded) become this
    /// database's; returns the ones it held, to be freed. Not while a
    /// frozen view exists.
    pub fn replace_keys(&mut self, mut new: Db) -> Db {
        self.swap_keys(&mut new);
        new
    }

    fn swap_keys(&mut self, other: &mut Db) {
        debug_assert!(self.view.is_none() && other.view.is_none());
        std::mem::swap(&mut self.table, &mut other.table);
        std::mem::swap(&mut self.expires, &mut other.expires);
        std::mem::swap(&mut self.volatile, &mut other.volatile);
    }

    /// Empty the database. During a view the keys go to the view, which is
    /// still reading them (freed at [`Db::thaw`]).
    pub fn clear(&mut self) {
        if self.detach_for_view() {
            return;
        }
        self.table.clear();
        self.expires = ExpireIndex::default();
        self.volatile = 0;
    }
    /// Move up to `steps` buckets of any resize in progress (for the cron to
    /// finish resizes of databases that see no writes). True while work is
    /// left.
    pub fn rehash_step(&mut self, steps: usize) -> bool {
        self.table.rehash_step(steps)
    }
    /// The active expire cycle: delete every key whose time has come, in
    /// time order, until none is due or `budget_us` is spent. Returns keys
    /// removed.
    pub fn active_expire(&mut self, now_ms: i64, budget_us: u64) -> usize {
        self.clock_ms = now_ms;
        if self.volatile == 0 {
            self.expires = ExpireIndex::default();
            return 0;
        }
        let start = Instant::now();
        let budget = Duration::from_micros(budget_us);
        let volatile_before = self.volatile;
        let mut removed = 0;
        let mut popped = 0;
        while let Some(&Reverse((at, h))) = self.expires.heap.peek() {
            if at > now_ms {
                break;
            }
            self.expires.heap.pop();
            popped += 1;
            if let Some(e) = find_volatile(&self.table, h, at) {
                let k = e.key().to_vec();
                removed += self.expire_key(h, &k) as usize;
            }
            if popped % POPS_PER_CLOCK_READ == 0 && start.elapsed() > budget {
                self.stats.expired_time_cap_reached_count += 1;
                break;
            }
        }
        let sample = removed as f64 / volatile_before as f64;
        self.stats.expired_stale_perc = sample * 0.05 + self.stats.expired_stale_perc * 0.95;
        removed
    }
    /// Bytes of the table's own buckets.
    pub fn table_overhead(&self) -> usize {
        self.table.memory_usage()
    }
    /// While the table is resizing, the bytes of the buckets it leaves.
    pub fn table_rehashing(&self) -> Option<usize> {
        self.table.rehashing_memory()
    }
    /// Bytes of the database's own structures (buckets and expiry index);
    /// keys and values are in the entries ([`Entry::memory_usage`]).
    pub fn memory_usage(&self) -> usize {
        self.table_overhead() + self.expires.heap.capacity() * 16
    }
}

fn next_sample_seed(s: u64) -> u64 {
    s.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(1)
}

/// The live entry an expiry index item `(at, hash)` stands for: one with
/// that hash (recomputed from its key) and that expire time.
fn find_volatile(table: &RawTable<Entry>, hash: u64, at: i64) -> Option<&Entry> {
    table.get_by(hash, |e| e.expire_at_ms() == Some(at) && e.hash() == hash)
}

/// All databases (`databases` directive, 16 by default).
pub struct Keyspace {
    pub dbs: Vec<Db>,
    /// Shared with every database (see `Db::signals`).
    signals: Arc<Signals>,
}

impl Keyspace {
    pub fn new(databases: usize) -> Self {
        let signals = Arc::<Signals>::default();
        let dbs = (0..databases)
            .map(|_| Db {
                signals: signals.clone(),
                ..Db::default()
            })
            .collect();
        Keyspace { dbs, signals }
    }
    /// Whether any database kept an entry aside since the last call
    /// (then see [`Db::take_retired`]).
    pub fn any_retired(&mut self) -> bool {
        // A load, not a swap: this runs after every batch, and only this
        // thread sets it.
        let any = self.signals.retired.load(Ordering::Relaxed);
        if any {
            self.signals.retired.store(false, Ordering::Relaxed);
        }
        any
    }
    /// Whether a database's expired-key log may hold keys (then see
    /// [`Db::take_expired`]): false once every log was taken after
    /// [`Keyspace::expired_log_drained`] and none gained a key since.
    #[inline]
    pub fn expired_logged(&self) -> bool {
        self.signals.expired.load(Ordering::Relaxed)
    }
    /// The caller is about to take every database's expired-key log.
    pub fn expired_log_drained(&self) {
        self.signals.expired.store(false, Ordering::Relaxed);
    }
    pub fn swap(&mut self, a: usize, b: usize) {
        self.dbs.swap(a, b)
    }
    /// Whether lookups in every database leave the access bits alone
    /// ([`Db::no_touch`]).
    pub fn set_no_touch(&mut self, on: bool) {
        for db in &mut self.dbs {
            db.no_touch = on;
        }
    }
    /// How every database stamps accesses from now on.
    pub fn set_access_policy(&mut self, p: AccessPolicy) {
        for db in &mut self.dbs {
            db.policy = p;
        }
    }
    /// Which removals every database leaves large values of for the
    /// engine to free elsewhere.
    pub fn set_lazy_removals(&mut self, lazy: LazyRemovals) {
        for db in &mut self.dbs {
            db.lazy = lazy;
        }
    }
}
