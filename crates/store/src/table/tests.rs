//! The table's structural invariants under random operations, resizes
//! and SCAN, through [`Table`].

use super::*;
use crate::hash_key;
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};

impl<I: Item> RawTable<I> {
    /// Every structural invariant the code relies on.
    pub(crate) fn check(&self) {
        let mut len = 0;
        let mut children = 0;
        for (t, tab) in self.tabs.iter().enumerate() {
            assert!(tab.is_empty() || tab.len().is_power_of_two());
            if t == 1 {
                assert_eq!(tab.is_empty(), self.rehash.is_none());
            }
            for (i, head) in tab.iter().enumerate() {
                if t == 0 && self.rehash.is_some_and(|r| i < r) {
                    assert!(head.is_empty(), "moved bucket");
                }
                for (depth, b) in head.chain().enumerate() {
                    children += (depth > 0) as usize;
                    assert!(b.occupied() != 0 || (depth == 0 && b.is_empty()));
                    for s in bits(b.occupied()) {
                        // SAFETY: `occupied` reports slots holding items.
                        let it: &I = unsafe { b.item(s) };
                        assert_eq!(b.words[s] >> TAG_SHIFT, tag_of(it.hash()));
                        assert_eq!(index(it.hash(), tab.len()), i);
                        len += 1;
                    }
                }
            }
        }
        assert_eq!(len, self.len);
        assert_eq!(children, self.children);
    }
}

impl<V> Table<V> {
    fn check(&self) {
        self.raw().check();
        let heap: usize = self
            .iter()
            .map(|(k, _)| if k.len() > 22 { k.len() } else { 0 })
            .sum();
        assert_eq!(heap, self.heap_keys());
    }
}

fn key(i: u32) -> Vec<u8> {
    if i.is_multiple_of(7) {
        // Past the inline limit.
        format!("a-rather-long-key-that-lives-on-the-heap:{i}").into_bytes()
    } else {
        format!("k{i}").into_bytes()
    }
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u32, u32),
    Remove(u32),
    Get(u32),
    Bump(u32),
    Step,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..400u32, any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
        3 => (0..400u32).prop_map(Op::Remove),
        2 => (0..400u32).prop_map(Op::Get),
        1 => (0..400u32).prop_map(Op::Bump),
        1 => Just(Op::Step),
    ]
}

fn run_model(ops: &[Op], hash: impl Fn(&[u8]) -> u64) {
    let mut t: Table<u32> = Table::new();
    let mut m: HashMap<Vec<u8>, u32> = HashMap::new();
    for op in ops {
        match *op {
            Op::Insert(k, v) => {
                let k = key(k);
                assert_eq!(t.insert(hash(&k), &k, v), m.insert(k, v));
            }
            Op::Remove(k) => {
                let k = key(k);
                assert_eq!(t.remove(hash(&k), &k), m.remove(&k));
            }
            Op::Get(k) => {
                let k = key(k);
                assert_eq!(t.get(hash(&k), &k), m.get(&k));
            }
            Op::Bump(k) => {
                let k = key(k);
                let a = t.get_mut(hash(&k), &k).map(|v| {
                    *v = v.wrapping_add(1);
                    *v
                });
                let b = m.get_mut(&k).map(|v| {
                    *v = v.wrapping_add(1);
                    *v
                });
                assert_eq!(a, b);
            }
            Op::Step => {
                t.rehash_step(1);
            }
        }
        t.check();
        assert_eq!(t.len(), m.len());
    }
    let mut seen: Vec<(Vec<u8>, u32)> = t.iter().map(|(k, v)| (k.to_vec(), *v)).collect();
    let mut want: Vec<(Vec<u8>, u32)> = m.into_iter().collect();
    seen.sort();
    want.sort();
    assert_eq!(seen, want);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn matches_model(ops in proptest::collection::vec(op(), 1..2000)) {
        run_model(&ops, hash_key);
    }

    /// Only 16 distinct hashes: long overflow chains and tag collisions
    /// (equal tags with different keys) on every operation.
    #[test]
    fn matches_model_with_colliding_hashes(ops in proptest::collection::vec(op(), 1..1000)) {
        run_model(&ops, |k| hash_key(k) & 0xF);
    }
}

#[test]
fn grows_and_shrinks_incrementally() {
    let mut t: Table<u64> = Table::new();
    let n = 50_000u64;
    let mut saw_rehash = 0;
    let mut max_pending = 0;
    for i in 0..n {
        let k = i.to_le_bytes();
        t.insert(hash_key(&k), &k, i);
        if t.is_rehashing() {
            saw_rehash += 1;
            // Lookups of old and new keys work mid-resize.
            let j = i / 2;
            let kj = j.to_le_bytes();
            assert_eq!(t.get(hash_key(&kj), &kj), Some(&j));
            max_pending = max_pending.max(t.buckets().0);
        }
        if i % 4096 == 0 {
            t.check();
        }
    }
    assert!(saw_rehash > 1000, "resizes are spread over inserts");
    let (b0, _) = t.buckets();
    assert!(n as usize <= b0 * SLOTS, "grow limit respected");
    // Filled up to one item per slot, a bucket overflows past eight items
    // (Poisson: about 14% of buckets at 50,000 items in 8,192 buckets).
    assert!(
        t.overflow_buckets() < b0 / 5,
        "{} chains",
        t.overflow_buckets()
    );
    // Shrink: delete 99%, interleaving lookups of survivors.
    for i in 0..n {
        if i % 100 != 0 {
            let k = i.to_le_bytes();
            assert_eq!(t.remove(hash_key(&k), &k), Some(i));
        }
        if i % 1000 == 0 {
            let s = (i / 100 * 100).to_le_bytes();
            assert!(t.get(hash_key(&s), &s).is_some());
        }
    }
    while t.rehash_step(1) {}
    t.check();
    assert_eq!(t.len(), n as usize / 100);
    assert!(
        t.buckets().0 < b0 / 16,
        "shrunk to {} from {b0}",
        t.buckets().0
    );
    for i in (0..n).step_by(100) {
        let k = i.to_le_bytes();
        assert_eq!(t.get(hash_key(&k), &k), Some(&i));
    }
    // Shrinking all the way keeps the table usable.
    for i in (0..n).step_by(100) {
        let k = i.to_le_bytes();
        t.remove(hash_key(&k), &k);
    }
    t.check();
    assert!(t.is_empty());
    t.insert(1, b"x", 1);
    assert_eq!(t.get(1, b"x"), Some(&1));
}

#[test]
fn inserts_outrunning_a_shrink() {
    let mut t: Table<u32> = Table::new();
    for i in 0..4096u32 {
        let k = i.to_le_bytes();
        t.insert(hash_key(&k), &k, i);
    }
    for i in 0..4000u32 {
        let k = i.to_le_bytes();
        t.remove(hash_key(&k), &k);
    }
    assert!(t.is_rehashing() || t.buckets().0 < 256);
    for i in 10_000..20_000u32 {
        let k = i.to_le_bytes();
        t.insert(hash_key(&k), &k, i);
    }
    t.check();
    assert_eq!(t.len(), 96 + 10_000);
}

/// Runs a full SCAN while `between` mutates the table after each call,
/// and checks every key in `stable` was returned.
fn scan_all(
    t: &mut Table<u32>,
    stable: &HashSet<Vec<u8>>,
    mut between: impl FnMut(&mut Table<u32>, usize),
) -> usize {
    let mut seen = HashSet::new();
    let mut cursor = 0;
    let mut calls = 0;
    loop {
        cursor = t.scan(cursor, |k, _| {
            seen.insert(k.to_vec());
        });
        calls += 1;
        if cursor == 0 {
            break;
        }
        between(t, calls);
        assert!(calls < 1_000_000);
    }
    for k in stable {
        assert!(
            seen.contains(k),
            "scan missed {:?}",
            String::from_utf8_lossy(k)
        );
    }
    calls
}

fn filled(n: u32) -> (Table<u32>, HashSet<Vec<u8>>) {
    let mut t = Table::new();
    let mut s = HashSet::new();
    for i in 0..n {
        let k = key(i);
        t.insert(hash_key(&k), &k, i);
        s.insert(k);
    }
    (t, s)
}

#[test]
fn scan_plain() {
    let (mut t, s) = filled(10_000);
    while t.rehash_step(1) {}
    scan_all(&mut t, &s, |_, _| {});
    let mut empty: Table<u32> = Table::new();
    assert_eq!(empty.scan(0, |_, _| panic!()), 0);
    scan_all(&mut empty, &HashSet::new(), |_, _| {});
}

#[test]
fn scan_survives_growth() {
    let (mut t, s) = filled(3000);
    let mut next = 1_000_000;
    let mut resizes = 0;
    scan_all(&mut t, &s, |t, _| {
        // Grow through several doublings during one scan.
        for _ in 0..40 {
            if next >= 1_030_000 {
                break;
            }
            let k = key(next);
            next += 1;
            let was = t.buckets().0;
            t.insert(hash_key(&k), &k, 0);
            resizes += (t.buckets().0 != was) as usize;
        }
    });
    assert!(resizes >= 2, "{resizes} resizes");
}

#[test]
fn scan_survives_shrink() {
    let (mut t, s0) = filled(20_000);
    while t.rehash_step(1) {}
    // Keep 1 key in 50 for the whole scan; delete the rest during it.
    let stable: HashSet<Vec<u8>> = (0..20_000).step_by(50).map(key).collect();
    let mut doomed: Vec<Vec<u8>> = s0.difference(&stable).cloned().collect();
    let before = t.buckets().0;
    scan_all(&mut t, &stable, |t, _| {
        for _ in 0..200 {
            if let Some(k) = doomed.pop() {
                t.remove(hash_key(&k), &k);
            }
        }
    });
    assert!(t.buckets().0 < before);
    t.check();
}

#[test]
fn scan_mixed_churn_mid_rehash() {
    // Start the scan mid-resize and alternate growth and deletion.
    let (mut t, _) = filled(767);
    let mut next = 5000;
    for _ in 0..10 {
        let k = key(next);
        next += 1;
        t.insert(hash_key(&k), &k, 0);
    }
    let stable: HashSet<Vec<u8>> = (0..767).step_by(3).map(key).collect();
    let mut victims: Vec<Vec<u8>> = (0..767).filter(|i| i % 3 != 0).map(key).collect();
    scan_all(&mut t, &stable, |t, call| {
        if call % 20 < 10 {
            for _ in 0..30 {
                let k = key(next);
                next += 1;
                t.insert(hash_key(&k), &k, 0);
            }
        } else {
            for _ in 0..60 {
                if let Some(k) = victims.pop() {
                    t.remove(hash_key(&k), &k);
                }
            }
        }
        t.rehash_step(1);
    });
}

#[test]
fn random_is_fair_on_small_tables() {
    let mut t: Table<u32> = Table::new();
    assert!(t.random(1).is_none());
    t.insert(hash_key(b"only"), b"only", 1);
    for s in 0..100 {
        assert_eq!(t.random(s).unwrap().0, b"only");
    }
    // Three keys, one sharing its bucket with two, so a bucket-first
    // choice would be unfair.
    let mut t: Table<u32> = Table::new();
    for (i, h) in [0u64, 4, 1].into_iter().enumerate() {
        t.insert(h, &[i as u8], i as u32);
    }
    let mut counts = [0u32; 3];
    let n = 30_000;
    for s in 0..n {
        counts[*t.random(s * 7919).unwrap().1 as usize] += 1;
    }
    for c in counts {
        assert!(c > n as u32 / 3 * 85 / 100, "{counts:?}");
    }
    // Entries deep in an overflow chain are reachable.
    let mut t: Table<u32> = Table::new();
    for i in 0..20u32 {
        t.insert(0, &i.to_le_bytes(), i);
    }
    let seen: HashSet<u32> = (0..20_000).map(|s| *t.random(s).unwrap().1).collect();
    assert_eq!(seen.len(), 20);
}

#[test]
fn memory_usage_tracks_contents() {
    let mut t: Table<u64> = Table::new();
    assert_eq!(t.memory_usage(), 0);
    let long = [b'x'; 100];
    t.insert(hash_key(&long), &long, 1);
    let one = t.memory_usage();
    assert!(one >= MIN_BUCKETS * 64 + 100);
    for i in 0..10_000u64 {
        let k = i.to_le_bytes();
        t.insert(hash_key(&k), &k, i);
    }
    assert!(t.memory_usage() > 10_000 * boxed::node_size::<u64>());
    t.clear();
    assert_eq!(t.memory_usage(), 0);
    assert!(t.is_empty());
    t.check();
}

#[test]
fn prefetch_is_harmless() {
    let (t, _) = filled(1000);
    let hs: Vec<u64> = (0..2000).map(|i| hash_key(&key(i))).collect();
    t.prefetch_batch(&hs);
    t.prefetch(0);
    Table::<u8>::new().prefetch_batch(&hs);
}

#[test]
fn cursor_step_matches_reverse_binary_order() {
    // With 8 buckets: 0,4,2,6,1,5,3,7 then 0.
    let mut v = 0;
    let mut order = vec![];
    loop {
        order.push(v);
        v = next_cursor(v, 7);
        if v == 0 {
            break;
        }
    }
    assert_eq!(order, [0, 4, 2, 6, 1, 5, 3, 7]);
}
