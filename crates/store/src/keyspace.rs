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
        let e = self.table.at_mut(loc);
        e.access_s = secs(now_ms);
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
            entry.access_s = self.clock_s;
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

// ---- memory API (temporary implementation on the old layout) ----
//
// The engine reads memory through these two names only (MEMORY USAGE,
// MEMORY STATS, INFO memory): `Entry::memory_usage` and
// `Db::table_overhead` (with the existing `Db::memory_usage`). The new
// keyspace layout replaces this block; until then the figures are
// estimates from the old types' shapes, rounded up to jemalloc's size
// classes because that is what the allocator really holds.

/// jemalloc's size class for a request of `n` bytes: 8, 16, then steps of
/// 16 up to 128, then four classes per doubling (160, 192, 224, 256, 320,
/// ...). Large allocations are page-rounded by jemalloc, which the class
/// spacing at that size already covers within a few percent.
fn alloc_size(n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    if n <= 8 {
        return 8;
    }
    if n <= 128 {
        return n.div_ceil(16) * 16;
    }
    // Four classes between 2^k and 2^(k+1): a step of 2^(k-2).
    let k = usize::BITS - 1 - (n - 1).leading_zeros();
    let step = 1usize << (k - 2);
    n.div_ceil(step) * step
}

/// Bytes of the table node holding a key: its hash, the key (inline up to
/// 22 bytes) and the entry.
const NODE_BYTES: usize = 8 + 24 + std::mem::size_of::<Entry>();
/// A bucket is one cache line of six slots.
const BUCKET_BYTES: usize = 64;
const BUCKET_SLOTS: usize = 6;

/// Heap bytes of a compact (listpack-like) encoding of `items`: a header
/// and per element its bytes plus about two bytes of length prefixes.
fn packed_bytes<'a>(items: impl Iterator<Item = &'a [u8]>) -> usize {
    alloc_size(7 + items.map(|b| b.len() + 2).sum::<usize>())
}

/// Heap bytes of a hashed collection's member: its node in a table (hash
/// and inline key), its share of a bucket, and the member itself when it
/// is too long to sit inline.
fn hashed_member(len: usize) -> usize {
    alloc_size(32) + BUCKET_BYTES / BUCKET_SLOTS + if len > 22 { alloc_size(len) } else { 0 }
}

fn member_len(m: &crate::types::set::Member<'_>) -> usize {
    match m {
        crate::types::set::Member::Bytes(b) => b.len(),
        crate::types::set::Member::Int(_) => 8,
    }
}

fn value_bytes(v: &Value) -> usize {
    use crate::Str;
    match v {
        Value::Str(Str::Int(_)) => 0,
        Value::Str(Str::Bytes(b) | Str::Raw(b)) => alloc_size(b.capacity()),
        // The Arc's two counters sit in front of the bytes.
        Value::Str(Str::Shared(b)) => alloc_size(16 + b.len()),
        Value::Hash(h) => h.memory_usage(),
        Value::List(l) => match l.encoding() {
            "listpack" => packed_bytes(l.iter()),
            // A ring buffer of boxed elements (16-byte slots).
            _ => 64 + l.len() * 16 + l.iter().map(|b| alloc_size(b.len())).sum::<usize>(),
        },
        Value::Set(s) => match s.encoding() {
            "intset" => alloc_size(8 + s.len() * 8),
            "listpack" => alloc_size(7 + s.iter().map(|m| member_len(&m) + 2).sum::<usize>()),
            _ => s.iter().map(|m| hashed_member(member_len(&m))).sum(),
        },
        Value::ZSet(z) => match z.encoding() {
            // Member and score (up to 9 bytes), each with its prefixes.
            "listpack" => alloc_size(7 + z.iter().map(|(m, _)| m.len() + 13).sum::<usize>()),
            // A tree node with the member, plus its entry in the member
            // index.
            _ => z
                .iter()
                .map(|(m, _)| alloc_size(m.len() + 48) + hashed_member(0))
                .sum(),
        },
    }
}

impl Entry {
    /// Bytes the allocator holds for this key: its table node and its
    /// value, collections included. (A key longer than 22 bytes also has
    /// a heap copy, which this layout's entry cannot see.)
    pub fn memory_usage(&self) -> usize {
        alloc_size(NODE_BYTES) + value_bytes(&self.value)
    }
}

impl Db {
    /// Bytes of the database's own table structure, not of its entries:
    /// the main table's buckets, and the whole index of volatile keys
    /// (which holds nothing but copies of keys and their times).
    pub fn table_overhead(&self) -> usize {
        let (a, b) = self.table.buckets();
        (a + b) * BUCKET_BYTES + self.volatile.memory_usage()
    }
}

#[cfg(test)]
mod memory_tests {
    use super::*;

    #[test]
    fn size_classes_are_jemallocs() {
        let classes: Vec<usize> = [1, 8, 9, 17, 80, 81, 129, 160, 161, 257, 1025, 4097]
            .iter()
            .map(|&n| alloc_size(n))
            .collect();
        assert_eq!(
            classes,
            [8, 8, 16, 32, 80, 96, 160, 160, 192, 320, 1280, 5120]
        );
    }

    #[test]
    fn usage_grows_with_the_value() {
        let small = Entry::new(Value::Str(crate::Str::from_bytes(b"x"))).memory_usage();
        let big = Entry::new(Value::Str(crate::Str::from_bytes(&[7; 100_000]))).memory_usage();
        assert!((NODE_BYTES..200).contains(&small), "{small}");
        // 100,000 bytes take the 112 KiB class.
        assert!((114_689..115_000).contains(&big), "{big}");
        let mut db = Db::default();
        assert_eq!(db.table_overhead(), 0);
        db.insert(
            crate::hash_key(b"k"),
            b"k",
            Entry::new(Value::Str(crate::Str::Int(1))),
        );
        assert!(db.table_overhead() >= BUCKET_BYTES);
    }
}
