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
    /// The seed (and database) of a next sample whose first bucket was
    /// prefetched.
    prefetched: Option<(usize, u64)>,
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

    /// The next eviction will most likely remove the pool's best candidate
    /// and sample `db` again: start the misses of both now, so that they
    /// land while the command that needed this eviction runs.
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

/// Valkey's `performEvictions`. `me` is the client whose command is
/// about to run (its own `evicted` notifications go to its reply).
pub fn perform_evictions(srv: &mut Server, now_ms: i64, mut me: Option<Me<'_, '_>>) -> Outcome {
    if srv.pause.is_some() {
        // CLIENT PAUSE stops eviction too (Valkey's PAUSE_ACTION_EVICT).
        srv.evict.running = false;
        return Outcome::Ok;
    }
    let mut to_free = bytes_to_free(srv);
    let outcome = if to_free == 0 {
        srv.evict.running = false;
        Outcome::Ok
    } else if srv.config.maxmemory_policy == MaxmemoryPolicy::NoEviction {
        srv.evict.running = false;
        Outcome::Fail
    } else {
        evict_until(srv, now_ms, &mut to_free, &mut me)
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
    let start = Instant::now();
    let lazy = srv.config.lazyfree_lazy_eviction;
    let mut freed: u64 = 0;
    let mut keys_freed = 0u64;
    srv.evict.running = false;
    while freed < *to_free {
        let before = srv.used_memory();
        let Some((db, key, entry)) = pick(srv, now_ms) else {
            return cant_free(srv, start, limit);
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
            if start.elapsed() > limit {
                srv.evict.running = true;
                break;
            }
        }
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
/// `None` when no key can go.
fn pick(srv: &mut Server, now_ms: i64) -> Option<(usize, Vec<u8>, store::Entry)> {
    let policy = srv.config.maxmemory_policy;
    let volatile = policy.volatile_only();
    let ndb = srv.keyspace.dbs.len();
    let len = |db: &store::Db| if volatile { db.expires_len() } else { db.len() };
    if matches!(
        policy,
        MaxmemoryPolicy::AllkeysRandom | MaxmemoryPolicy::VolatileRandom
    ) {
        // One random key, visiting the databases in turn.
        for _ in 0..ndb {
            srv.evict.next_db = (srv.evict.next_db + 1) % ndb;
            let i = srv.evict.next_db;
            if len(&srv.keyspace.dbs[i]) == 0 {
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
        return None;
    }
    let samples = srv.config.maxmemory_samples.max(1);
    let decay = srv.config.lfu_decay_time;
    loop {
        // Fill the pool from every database, so the choice is not local
        // to one of them.
        let mut total = 0;
        let Server {
            keyspace, evict, ..
        } = srv;
        for (i, db) in keyspace.dbs.iter_mut().enumerate() {
            let n = len(db);
            if n == 0 {
                continue;
            }
            total += n;
            let seed = evict.seed_for(i);
            db.sample(samples, volatile, seed, |e| {
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
        if total == 0 {
            return None;
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
                db.insert(c.hash, &c.key, entry);
                continue;
            }
            srv.evict.prefetch_next(&srv.keyspace, c.db, volatile);
            return Some((c.db, c.key, entry));
        }
    }
}
