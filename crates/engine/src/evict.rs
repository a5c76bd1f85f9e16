//! `maxmemory`: evicting keys as Valkey's `performEvictions` does.
//!
//! ```text
//!  before a command (maxmemory > 0) ─► perform_evictions
//!     used ≤ maxmemory ─► Ok
//!     noeviction ─► Fail (denyoom commands get -OOM)
//!     else loop until the bytes to free are freed:
//!        pool of 16 candidates ◄─ maxmemory-samples keys per database
//!           (all keys, or keys with a TTL), scored: LRU idle ms,
//!           LFU 255 - counter, TTL MAX - expire time; best = highest
//!        evict the best live one (lazyfree if lazyfree-lazy-eviction):
//!           evicted_keys, WATCH touched, `evicted` event
//!        every 16 keys: past the tenacity time limit ─► Running, the
//!           rest continues from the IO loop (Engine::expire_blocked)
//! ```
//!
//! **Batches.** An eviction waits on misses in a row (a random bucket,
//! then the nodes it points to), each a TLB miss too on a large keyspace,
//! and a write load evicts about one key per command. So the pool
//! policies evict in small batches: a run that has to evict goes on, while
//! memory stays within a small headroom under the limit
//! ([`HEADROOM_SHIFT`]), up to [`BATCH`] keys, and samples for all of them
//! at once: one run of `maxmemory-samples` × keys consecutive slots from
//! a random bucket (so one random bucket per batch, not per key), whose
//! nodes are all requested before any is read. Each victim still comes
//! from a pool that saw `maxmemory-samples` new keys per victim, as in
//! Valkey; the next commands of the load find memory under the limit and
//! evict nothing until the headroom is used up. As a batch ends, the
//! bucket the next one starts from is requested, to land meanwhile.
//!
//! The freed amount of a key is what used memory dropped across its
//! removal, as Valkey measures it. Memory not counted toward maxmemory
//! (Valkey's `freeMemoryGetNotCountedMemory`) is the replication buffers'
//! and the AOF buffer's; ringkv has neither yet, so it is 0. Client output
//! buffers count, as in Valkey (`maxmemory-clients` is the tool for those).

use crate::config::MaxmemoryPolicy;
use crate::pubsub::{self, Me};
use crate::server::Server;
use std::time::{Duration, Instant};
use store::AccessPolicy;

/// Candidates kept between runs (Valkey's `EVPOOL_SIZE`).
pub const POOL_SIZE: usize = 16;

/// The most keys one eviction batch takes (see the module doc), and fewer
/// when `maxmemory-samples` × keys would pass what one sample takes
/// ([`store::keyspace::MAX_SAMPLE`]).
pub const BATCH: usize = 8;

/// A batch may leave memory this far under the limit: `maxmemory >> 12`
/// (1/4096, 51 KB of 200 MB, 4 KB of 16 MB). A limit smaller than
/// 4096 keys' size gets no headroom and evicts one key at a time.
pub const HEADROOM_SHIFT: u32 = 12;

/// Valkey's OOM reply to a denyoom command.
pub const OOM_ERR: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// Valkey's reply to an EXEC refused for OOM (`execCommandAbort`).
pub const EXECABORT_OOM_ERR: &str = "EXECABORT Transaction discarded because of: OOM command not allowed when used memory > 'maxmemory'.";

/// What [`perform_evictions`] achieved (Valkey's `EVICT_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Under maxmemory (or nothing to do).
    Ok,
    /// Over it, and more eviction is scheduled: commands still run.
    Running,
    /// Over it with nothing (more) to evict: denyoom commands are refused.
    Fail,
}

struct Candidate {
    /// Higher is a better pick.
    score: u64,
    db: usize,
    hash: u64,
    /// A buffer kept across candidates (see [`Evictor::spare`]).
    key: Vec<u8>,
}

/// The eviction state that lives between runs.
#[derive(Default)]
pub struct Evictor {
    /// Sorted by score, ascending: the best candidate is last.
    pool: Vec<Candidate>,
    /// Key buffers of candidates gone, reused for new ones (Valkey keeps
    /// one buffer per pool slot): no allocation per sampled key kept.
    spare: Vec<Vec<u8>>,
    /// The random policies visit the databases in turn.
    next_db: usize,
    /// The seed (and database) of the next sample, whose first bucket was
    /// prefetched as the last batch ended.
    prefetched: Option<(usize, u64)>,
    /// Victims still to take from the pool before it is sampled again:
    /// a batch samples for all of its victims at once.
    pops_left: usize,
    /// Memory one evicted key freed, on average over the last run (0:
    /// none yet): sizes the next batch.
    key_bytes: u64,
    seed: u64,
    /// A run stopped at its time limit: continue soon from the IO loop.
    pub running: bool,
    /// Since when memory has been over the limit (INFO
    /// `current_eviction_exceeded_time`).
    exceeded_since: Option<Instant>,
    /// Time spent over the limit before now, in µs.
    total_exceeded_us: u64,
}

impl Evictor {
    /// INFO `total_eviction_exceeded_time`, ms (the current stretch included).
    pub fn total_exceeded_ms(&self) -> u64 {
        (self.total_exceeded_us + self.current_exceeded_us()) / 1000
    }
    /// INFO `current_eviction_exceeded_time`, ms.
    pub fn current_exceeded_ms(&self) -> u64 {
        self.current_exceeded_us() / 1000
    }
    fn current_exceeded_us(&self) -> u64 {
        self.exceeded_since
            .map_or(0, |t| t.elapsed().as_micros() as u64)
    }
    /// CONFIG RESETSTAT.
    pub fn reset_stats(&mut self) {
        self.total_exceeded_us = 0;
        if self.exceeded_since.is_some() {
            self.exceeded_since = Some(Instant::now());
        }
    }

    fn next_seed(&mut self) -> u64 {
        self.seed = self
            .seed
            .wrapping_add(0x9e37_79b9_7f4a_7c15)
            .rotate_left(17)
            ^ 0x2545_f491_4f6c_dd1d;
        self.seed
    }

    /// Valkey's `evictionPoolPopulate` insertion: keep the best
    /// [`POOL_SIZE`], ascending. The key's hash is worked out only for a
    /// candidate that gets in.
    fn offer(&mut self, score: u64, db: usize, key: &[u8]) {
        let pool = &mut self.pool;
        let mut at = pool.partition_point(|c| c.score < score);
        if pool.len() == POOL_SIZE && at == 0 {
            // Worse than every candidate held.
            return;
        }
        let hash = store::hash_key(key);
        if pool
            .iter()
            .any(|c| c.db == db && c.hash == hash && *c.key == *key)
        {
            return;
        }
        if pool.len() == POOL_SIZE {
            // Drop the worst to make room.
            self.spare.push(pool.remove(0).key);
            at -= 1;
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(key);
        pool.insert(
            at,
            Candidate {
                score,
                db,
                hash,
                key: buf,
            },
        );
    }

    /// The seed of database `db`'s next sample: the one
    /// [`Evictor::prefetch_next`] chose, if it was for `db`.
    fn seed_for(&mut self, db: usize) -> u64 {
        match self.prefetched.take() {
            Some((d, seed)) if d == db => seed,
            _ => self.next_seed(),
        }
    }

    /// A batch ended with a victim from `db`: the next one will most
    /// likely remove the pool's best candidate and sample `db` again.
    /// Start the misses of both now, so that they land while the commands
    /// in between run.
    fn prefetch_next(&mut self, keyspace: &store::Keyspace, db: usize, volatile: bool) {
        if let Some(c) = self.pool.last() {
            keyspace.dbs[c.db].prefetch_key(c.hash);
        }
        if !volatile {
            let seed = self.next_seed();
            keyspace.dbs[db].prefetch_sample(seed);
            self.prefetched = Some((db, seed));
        }
    }

    /// Start the misses of removing the `k` best candidates (their buckets,
    /// then their nodes), which the batch is about to evict.
    fn prefetch_victims(&self, keyspace: &store::Keyspace, k: usize) {
        let top = &self.pool[self.pool.len().saturating_sub(k)..];
        let mut hashes = [0u64; POOL_SIZE];
        for (i, c) in top.iter().enumerate() {
            if top[..i].iter().any(|o| o.db == c.db) {
                continue;
            }
            let mut n = 0;
            for o in top[i..].iter().filter(|o| o.db == c.db) {
                hashes[n] = o.hash;
                n += 1;
            }
            keyspace.dbs[c.db].prefetch_removals(&hashes[..n]);
        }
    }

    /// A key buffer [`pick`] handed out, back for reuse.
    fn give_back(&mut self, key: Vec<u8>) {
        if self.spare.len() <= POOL_SIZE {
            self.spare.push(key);
        }
    }
}

/// Valkey's `evictionTimeLimitUs`: 50 µs per tenacity step up to 10, then
/// 15% more per step, no limit at 100.
pub fn time_limit_us(tenacity: u32) -> u64 {
    match tenacity {
        0..=10 => 50 * u64::from(tenacity),
        11..=99 => (500.0 * 1.15f64.powi(tenacity as i32 - 10)) as u64,
        _ => u64::MAX,
    }
}

/// The access stamp the store should keep for `policy`.
pub fn access_policy(srv: &Server) -> AccessPolicy {
    let c = &srv.config;
    if c.maxmemory_policy.is_lfu() {
        AccessPolicy::Lfu {
            log_factor: c.lfu_log_factor,
            decay_time: c.lfu_decay_time,
        }
    } else {
        AccessPolicy::Lru
    }
}

/// Bytes over `maxmemory` (0: within it, or no limit).
pub fn bytes_to_free(srv: &Server) -> u64 {
    let max = srv.config.maxmemory;
    if max == 0 {
        return 0;
    }
    let not_counted = crate::aof::buffered(srv);
    srv.used_memory()
        .saturating_sub(not_counted)
        .saturating_sub(max)
}

/// A replica that leaves its memory to its primary (Valkey's
/// isSafeToPerformEvictions).
pub fn ignores_maxmemory(srv: &Server) -> bool {
    srv.repl.is_replica() && srv.config.replica_ignore_maxmemory
}

/// Valkey's `performEvictions`. `me` is the client whose command is
/// about to run (its own `evicted` notifications go to its reply).
pub fn perform_evictions(srv: &mut Server, now_ms: i64, mut me: Option<Me<'_, '_>>) -> Outcome {
    // CLIENT PAUSE stops eviction too (Valkey's PAUSE_ACTION_EVICT), a
    // replica under `replica-ignore-maxmemory` is its primary's copy, and
    // a dataset being loaded in place is not evicted from until it is
    // whole (Valkey's isSafeToPerformEvictions): a command allowed during
    // the load (INFO) must not evict keys an AOF's later commands use.
    if srv.pause.is_some() || ignores_maxmemory(srv) || srv.persist.loading_in_place() {
        srv.evict.running = false;
        return Outcome::Ok;
    }
    let mut to_free = bytes_to_free(srv);
    let outcome = if to_free == 0 {
        srv.evict.running = false;
        Outcome::Ok
    } else if srv.config.maxmemory_policy == MaxmemoryPolicy::NoEviction
        // An importing primary keeps what it is given (Valkey 8.1).
        || (srv.config.import_mode && !srv.repl.is_replica())
    {
        srv.evict.running = false;
        Outcome::Fail
    } else {
        let watch = srv.latency_watch();
        let outcome = evict_until(srv, now_ms, &mut to_free, &mut me);
        srv.latency_event_since(watch, "eviction-cycle", now_ms);
        outcome
    };
    let ev = &mut srv.evict;
    match outcome {
        Outcome::Running | Outcome::Fail => {
            ev.exceeded_since.get_or_insert_with(Instant::now);
        }
        Outcome::Ok => {
            if let Some(t) = ev.exceeded_since.take() {
                ev.total_exceeded_us += t.elapsed().as_micros() as u64;
            }
        }
    }
    outcome
}

fn evict_until(
    srv: &mut Server,
    now_ms: i64,
    to_free: &mut u64,
    me: &mut Option<Me<'_, '_>>,
) -> Outcome {
    let limit = Duration::from_micros(time_limit_us(srv.config.maxmemory_eviction_tenacity));
    // The clock starts once a second batch is needed: under a write load
    // most runs are one batch, and a clock read is a good part of its
    // cost (the limit, 50 µs and up, then leaves out one batch's time).
    let mut start = None;
    let lazy = srv.config.lazyfree_lazy_eviction;
    // Keys this run may evict beyond what brings memory under the limit:
    // a batch, sized by what a key freed last time (see the module doc).
    let headroom = srv.config.maxmemory >> HEADROOM_SHIFT;
    let most = BATCH.min(store::keyspace::MAX_SAMPLE / srv.config.maxmemory_samples.max(1));
    let rounds = match srv.evict.key_bytes {
        _ if !srv.config.maxmemory_policy.pooled() => 1,
        0 => 1,
        per_key => ((*to_free + headroom) / per_key).clamp(1, most.max(1) as u64) as usize,
    };
    let mut freed: u64 = 0;
    let mut keys_freed = 0u64;
    srv.evict.running = false;
    loop {
        if freed >= *to_free {
            // Under the limit: one more key only if the batch has room for
            // it and it fits in the headroom.
            let per_key = freed / keys_freed.max(1);
            if keys_freed >= rounds as u64 || freed + per_key > *to_free + headroom {
                break;
            }
        }
        if keys_freed == BATCH as u64 {
            start = Some(Instant::now());
        }
        let before = srv.used_memory();
        let Some((db, key, entry)) = pick(srv, now_ms, rounds) else {
            return cant_free(srv, start.unwrap_or_else(Instant::now), limit);
        };
        if lazy {
            srv.lazyfree.free(entry);
        } else {
            drop(entry);
        }
        // Memory can grow across a removal (a resize, the lazyfree
        // thread's queue): count that as nothing freed.
        freed += before.saturating_sub(srv.used_memory());
        srv.stats.evicted_keys += 1;
        crate::effects::emit_evicted(srv, db, &key);
        srv.watches.touch(db, &key);
        crate::tracking::invalidate_key(srv, &key, None);
        pubsub::keyspace_event(
            srv,
            me.as_mut().map(pubsub::reborrow),
            crate::command::notify::EVICTED,
            "evicted",
            db,
            &key,
        );
        srv.evict.give_back(key);
        keys_freed += 1;
        if keys_freed.is_multiple_of(16) {
            // Values freed on the lazyfree thread leave memory later than
            // the removal measured: look at the real figure from time to time.
            if lazy && bytes_to_free(srv) == 0 {
                break;
            }
            if start.is_some_and(|t| t.elapsed() > limit) {
                srv.evict.running = true;
                break;
            }
        }
    }
    if freed > 0 {
        srv.evict.key_bytes = freed / keys_freed;
    }
    if srv.evict.running {
        Outcome::Running
    } else {
        Outcome::Ok
    }
}

/// Out of candidates while over the limit: wait a little for the lazyfree
/// thread if it is still freeing (within the time limit), as Valkey does.
fn cant_free(srv: &mut Server, start: Instant, limit: Duration) -> Outcome {
    while srv.lazyfree.pending() > 0 && start.elapsed() < limit {
        if bytes_to_free(srv) == 0 {
            return Outcome::Ok;
        }
        std::thread::sleep(limit.min(Duration::from_millis(1)));
    }
    Outcome::Fail
}

/// Take the next key to evict out of its database: `(db, key, entry)`, or
/// `None` when no key can go. `rounds`: the victims of this batch, which a
/// pool policy samples for together.
fn pick(srv: &mut Server, now_ms: i64, rounds: usize) -> Option<(usize, Vec<u8>, store::Entry)> {
    let policy = srv.config.maxmemory_policy;
    let volatile = policy.volatile_only();
    if !policy.pooled() {
        return pick_random(srv, volatile);
    }
    loop {
        if srv.evict.pops_left == 0 || srv.evict.pool.is_empty() {
            if !populate(srv, now_ms, rounds) {
                return None;
            }
            srv.evict.pops_left = rounds;
            if rounds > 1 {
                srv.evict.prefetch_victims(&srv.keyspace, rounds);
            }
        }
        // Best first; a candidate deleted since it was pooled is a ghost,
        // skipped (and under a volatile policy, one made persistent since
        // goes back untouched).
        while let Some(c) = srv.evict.pool.pop() {
            let db = &mut srv.keyspace.dbs[c.db];
            let Some(entry) = db.remove(c.hash, &c.key) else {
                continue;
            };
            if volatile && entry.expire_at_ms().is_none() {
                db.insert(c.hash, &c.key, entry, now_ms);
                continue;
            }
            let ev = &mut srv.evict;
            ev.pops_left -= 1;
            if ev.pops_left == 0 {
                ev.prefetch_next(&srv.keyspace, c.db, volatile);
            }
            return Some((c.db, c.key, entry));
        }
        srv.evict.pops_left = 0;
    }
}

/// Fill the pool with a sample of `maxmemory-samples` × `rounds` keys
/// from every database, so the choice is not local to one of them. For
/// more than one round, the sample's nodes are all requested before any
/// is read (one key's sample does that itself). Returns false when no
/// database has a key the policy may evict.
fn populate(srv: &mut Server, now_ms: i64, rounds: usize) -> bool {
    let policy = srv.config.maxmemory_policy;
    let volatile = policy.volatile_only();
    let samples = srv.config.maxmemory_samples.max(1);
    let count = samples * rounds;
    let decay = srv.config.lfu_decay_time;
    let mut any = false;
    let Server {
        keyspace, evict, ..
    } = srv;
    for (i, db) in keyspace.dbs.iter_mut().enumerate() {
        if (if volatile { db.expires_len() } else { db.len() }) == 0 {
            continue;
        }
        any = true;
        let seed = evict.seed_for(i);
        if !volatile && rounds > 1 {
            db.prefetch_sample_nodes(seed, count);
        }
        db.sample(count, volatile, seed, |e| {
            let score = match policy {
                MaxmemoryPolicy::AllkeysLru | MaxmemoryPolicy::VolatileLru => e.idle_ms(now_ms),
                MaxmemoryPolicy::AllkeysLfu | MaxmemoryPolicy::VolatileLfu => {
                    255 - u64::from(e.lfu_counter(now_ms, decay))
                }
                // Sooner expiry is a better pick.
                _ => u64::MAX - e.expire_at_ms().unwrap_or(i64::MAX).max(0) as u64,
            };
            evict.offer(score, i, e.key());
        });
    }
    any
}

/// The random policies: one random key, visiting the databases in turn.
fn pick_random(srv: &mut Server, volatile: bool) -> Option<(usize, Vec<u8>, store::Entry)> {
    let ndb = srv.keyspace.dbs.len();
    for _ in 0..ndb {
        srv.evict.next_db = (srv.evict.next_db + 1) % ndb;
        let i = srv.evict.next_db;
        let db = &srv.keyspace.dbs[i];
        if (if volatile { db.expires_len() } else { db.len() }) == 0 {
            continue;
        }
        let seed = srv.evict.next_seed();
        let mut found = None;
        let db = &mut srv.keyspace.dbs[i];
        db.sample(1, volatile, seed, |e| found = Some(e.key().to_vec()));
        if let Some(k) = found
            && let Some(entry) = db.remove(store::hash_key(&k), &k)
        {
            return Some((i, k, entry));
        }
    }
    None
}
