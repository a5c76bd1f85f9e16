//! Exact LRU and exact LFU caches, replayed over the eviction test's trace.
//!
//! They answer "what hit rate would a perfect policy of the same capacity
//! get on exactly these requests?", the yardstick for a server's sampled
//! approximation. The replay follows the wire protocol the server saw, not
//! an idealised one: requests go in pipelined batches, every GET of a batch
//! is answered before any of the batch's SETs (the SETs for its misses)
//! arrive, so two misses of one key in one batch are two misses here too.
//!
//! An access is a GET that hits or a SET (new or overwrite). LFU counts
//! accesses since the key entered the cache (a key that is evicted starts
//! again at 1), never decays them, and evicts the lowest count, the least
//! recently used among equals.

use std::collections::{BTreeSet, HashMap};

/// What the replay needs from a cache.
pub trait Cache {
    /// A GET: whether `k` is present; a hit is an access.
    fn get(&mut self, k: u64) -> bool;
    /// A SET: an access if present, else an insert (evicting when full).
    fn set(&mut self, k: u64);
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Node {
    key: u64,
    prev: u32,
    next: u32,
}

/// Exact LRU: a doubly linked recency list in a slab, O(1) per access.
#[derive(Debug)]
pub struct ExactLru {
    cap: usize,
    slot_of: HashMap<u64, u32>,
    nodes: Vec<Node>,
    /// Most recently used.
    head: u32,
    /// Least recently used: the next victim.
    tail: u32,
}

impl ExactLru {
    pub fn new(capacity: usize) -> Self {
        let cap = capacity.clamp(1, NIL as usize - 1);
        ExactLru {
            cap,
            slot_of: HashMap::with_capacity(cap),
            nodes: Vec::with_capacity(cap),
            head: NIL,
            tail: NIL,
        }
    }

    fn unlink(&mut self, i: u32) {
        let Node { prev, next, .. } = self.nodes[i as usize];
        match prev {
            NIL => self.head = next,
            p => self.nodes[p as usize].next = next,
        }
        match next {
            NIL => self.tail = prev,
            n => self.nodes[n as usize].prev = prev,
        }
    }

    fn push_front(&mut self, i: u32) {
        self.nodes[i as usize].prev = NIL;
        self.nodes[i as usize].next = self.head;
        match self.head {
            NIL => self.tail = i,
            h => self.nodes[h as usize].prev = i,
        }
        self.head = i;
    }

    fn touch(&mut self, i: u32) {
        if self.head != i {
            self.unlink(i);
            self.push_front(i);
        }
    }
}

impl Cache for ExactLru {
    fn get(&mut self, k: u64) -> bool {
        match self.slot_of.get(&k) {
            Some(&i) => {
                self.touch(i);
                true
            }
            None => false,
        }
    }

    fn set(&mut self, k: u64) {
        if self.get(k) {
            return;
        }
        let i = if self.nodes.len() < self.cap {
            self.nodes.push(Node {
                key: k,
                prev: NIL,
                next: NIL,
            });
            (self.nodes.len() - 1) as u32
        } else {
            // Full: the least recently used slot takes the new key.
            let victim = self.tail;
            self.unlink(victim);
            let old = self.nodes[victim as usize].key;
            self.slot_of.remove(&old);
            self.nodes[victim as usize].key = k;
            victim
        };
        self.slot_of.insert(k, i);
        self.push_front(i);
    }

    fn len(&self) -> usize {
        self.slot_of.len()
    }
}

/// Exact LFU, ties broken by LRU: an ordered set of (count, last access,
/// key), so the victim is its first element. O(log n) per access.
#[derive(Debug)]
pub struct ExactLfu {
    cap: usize,
    clock: u64,
    meta: HashMap<u64, (u64, u64)>,
    order: BTreeSet<(u64, u64, u64)>,
}

impl ExactLfu {
    pub fn new(capacity: usize) -> Self {
        let cap = capacity.max(1);
        ExactLfu {
            cap,
            clock: 0,
            meta: HashMap::with_capacity(cap),
            order: BTreeSet::new(),
        }
    }
}

impl Cache for ExactLfu {
    fn get(&mut self, k: u64) -> bool {
        self.clock += 1;
        let Some(m) = self.meta.get_mut(&k) else {
            return false;
        };
        let (count, last) = *m;
        self.order.remove(&(count, last, k));
        *m = (count + 1, self.clock);
        self.order.insert((count + 1, self.clock, k));
        true
    }

    fn set(&mut self, k: u64) {
        if self.get(k) {
            return;
        }
        if self.meta.len() >= self.cap
            && let Some((_, _, victim)) = self.order.pop_first()
        {
            self.meta.remove(&victim);
        }
        self.meta.insert(k, (1, self.clock));
        self.order.insert((1, self.clock, k));
    }

    fn len(&self) -> usize {
        self.meta.len()
    }
}

/// GET hits and misses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub hits: u64,
    pub misses: u64,
}

impl Counts {
    pub fn add(&mut self, o: Counts) {
        self.hits += o.hits;
        self.misses += o.misses;
    }

    pub fn rate(&self) -> f64 {
        let n = self.hits + self.misses;
        if n == 0 {
            f64::NAN
        } else {
            self.hits as f64 / n as f64
        }
    }
}

/// Pipelined batches of one cycle of `requests` GETs: full batches of
/// `pipeline`, the last one shorter. The server side cuts cycles the same way.
pub fn batch_sizes(requests: usize, pipeline: usize) -> impl Iterator<Item = usize> {
    let p = pipeline.max(1);
    (0..requests.div_ceil(p)).map(move |b| p.min(requests - b * p))
}

/// Replay the test on `cache`: SET keys `0..fill` in order (the fill
/// phase), then each cycle of `trace` (`cycles[i]` GETs in cycle `i`) in
/// batches of `pipeline`: the batch's GETs, then a SET for each miss, in
/// order. Returns hits and misses per cycle.
pub fn replay<C: Cache>(
    cache: &mut C,
    fill: u64,
    trace: &[u64],
    cycles: &[usize],
    pipeline: usize,
) -> Vec<Counts> {
    for k in 0..fill {
        cache.set(k);
    }
    let mut at = 0;
    let mut missed = Vec::with_capacity(pipeline);
    let mut out = Vec::with_capacity(cycles.len());
    for &n in cycles {
        let mut c = Counts::default();
        for b in batch_sizes(n, pipeline) {
            missed.clear();
            for &k in &trace[at..at + b] {
                if cache.get(k) {
                    c.hits += 1;
                } else {
                    c.misses += 1;
                    missed.push(k);
                }
            }
            for &k in &missed {
                cache.set(k);
            }
            at += b;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keygen::Rng;

    fn run<C: Cache>(mut c: C, trace: &[u64], pipeline: usize) -> (Counts, C) {
        let per = replay(&mut c, 0, trace, &[trace.len()], pipeline);
        (per[0], c)
    }

    fn counts(hits: u64, misses: u64) -> Counts {
        Counts { hits, misses }
    }

    #[test]
    fn lru_evicts_least_recent() {
        // a b a c b a, capacity 2: c evicts b (a was just used), b evicts
        // a, a evicts c.
        let (c, _) = run(ExactLru::new(2), &[0, 1, 0, 2, 1, 0], 1);
        assert_eq!(c, counts(1, 5));
    }

    #[test]
    fn lfu_keeps_the_frequent_key() {
        // Same trace: a has count 2 when c and b arrive, so they evict each
        // other and a survives to hit again.
        let (c, lfu) = run(ExactLfu::new(2), &[0, 1, 0, 2, 1, 0], 1);
        assert_eq!(c, counts(2, 4));
        assert_eq!(lfu.len(), 2);
    }

    #[test]
    fn lfu_breaks_ties_by_recency() {
        // a b c: all count 1, so c evicts a (older); then b hits, a misses.
        let (c, _) = run(ExactLfu::new(2), &[0, 1, 2, 1, 0], 1);
        assert_eq!(c, counts(1, 4));
    }

    #[test]
    fn cyclic_scan_one_larger_than_the_cache_never_hits() {
        let trace: Vec<u64> = (0..30).map(|i| i % 3).collect();
        assert_eq!(run(ExactLru::new(2), &trace, 1).0, counts(0, 30));
        assert_eq!(run(ExactLru::new(3), &trace, 1).0, counts(27, 3));
        assert_eq!(run(ExactLfu::new(2), &trace, 1).0, counts(0, 30));
    }

    #[test]
    fn a_batch_sees_the_cache_before_its_sets() {
        // Both GETs of key 0 go out before the SET for the first miss.
        assert_eq!(run(ExactLru::new(1), &[0, 0], 2).0, counts(0, 2));
        assert_eq!(run(ExactLru::new(1), &[0, 0], 1).0, counts(1, 1));
        // The second SET of a key missed twice is an overwrite, not a
        // second insert: nothing else is evicted.
        let (c, lru) = run(ExactLru::new(2), &[5, 5, 7, 5], 2);
        assert_eq!(c, counts(1, 3));
        assert_eq!(lru.len(), 2);
    }

    #[test]
    fn fill_then_cycles() {
        // Fill 0,1,2 into 2 slots leaves 1,2 (2 newest). GET 2 hits, GET 0
        // misses and evicts 1, GET 2 hits; next cycle GET 1 misses.
        let mut lru = ExactLru::new(2);
        let per = replay(&mut lru, 3, &[2, 0, 2, 1], &[3, 1], 1);
        assert_eq!(per, [counts(2, 1), counts(0, 1)]);
    }

    #[test]
    fn batches_cover_a_cycle_exactly() {
        assert_eq!(batch_sizes(10, 4).collect::<Vec<_>>(), [4, 4, 2]);
        assert_eq!(batch_sizes(8, 4).collect::<Vec<_>>(), [4, 4]);
        assert_eq!(batch_sizes(0, 4).count(), 0);
        assert_eq!(batch_sizes(3, 0).collect::<Vec<_>>(), [1, 1, 1]);
    }

    /// The obvious O(n) versions: a recency list, and a scan for the
    /// smallest (count, last access).
    fn naive(trace: &[u64], cap: usize, lfu: bool) -> Counts {
        let mut keys: Vec<(u64, u64, u64)> = Vec::new(); // key, count, last
        let mut c = Counts::default();
        for (t, &k) in trace.iter().enumerate() {
            let t = t as u64;
            if let Some(e) = keys.iter_mut().find(|e| e.0 == k) {
                e.1 += 1;
                e.2 = t;
                c.hits += 1;
                continue;
            }
            c.misses += 1;
            if keys.len() == cap {
                let victim = (0..keys.len())
                    .min_by_key(|&i| {
                        let (_, count, last) = keys[i];
                        if lfu { (count, last) } else { (0, last) }
                    })
                    .unwrap();
                keys.swap_remove(victim);
            }
            keys.push((k, 1, t));
        }
        c
    }

    #[test]
    fn agree_with_naive_versions_on_random_traces() {
        let mut rng = Rng::new(11);
        for cap in [1, 2, 5, 17, 64] {
            let trace: Vec<u64> = (0..5000)
                .map(|_| {
                    // Skewed: small keys far more often, so both hits and
                    // evictions happen.
                    let r = rng.next_f64();
                    (r * r * r * 200.0) as u64
                })
                .collect();
            assert_eq!(
                run(ExactLru::new(cap), &trace, 1).0,
                naive(&trace, cap, false),
                "lru cap {cap}"
            );
            assert_eq!(
                run(ExactLfu::new(cap), &trace, 1).0,
                naive(&trace, cap, true),
                "lfu cap {cap}"
            );
        }
    }

    #[test]
    fn rates() {
        assert_eq!(counts(3, 1).rate(), 0.75);
        assert!(Counts::default().rate().is_nan());
    }
}
