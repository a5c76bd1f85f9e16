//! The sorted-set value type: unique members ordered by (score, member).
//!
//! ```text
//!   ZSet ─┬─ Pack       listpack: one exact-size byte buffer of
//!         │             [len][member][score] pairs in order (pack.rs)
//!         └─ Box<Tree>  skiplist: arena of treap nodes ordered by
//!                       (score, member) with subtree sizes, plus a chained
//!                       member → node hash index (tree.rs)
//! ```
//!
//! A set starts as a pack and converts once, for good, when it would hold
//! more than `zset-max-listpack-entries` pairs or a member longer than
//! `zset-max-listpack-value` bytes (Valkey never converts back, except
//! that a result built by a *STORE command is encoded for its final size,
//! as Valkey's `zsetConvertToListpackIfNeeded` does).
//!
//! Every query is phrased in ascending ranks: a score or lex range becomes
//! a half-open rank span ([`ZSet::score_span`], [`ZSet::lex_span`]) and
//! reverse orders, offsets and limits are arithmetic on ranks, which is
//! what the engine's ZRANGE family does. Scores are never NaN; -0 and 0
//! compare equal (C's `<`); the large encoding keeps the sign of a stored
//! -0 and the compact one stores it as 0, as Valkey's skiplist and listpack do.

mod pack;
mod tree;

use crate::EncodingLimits;
use crate::defrag::Mover;
use pack::{Pack, PackIter};
use tree::{Tree, Walk};

/// A score interval; the `*_ex` flags make an end exclusive (`(1.5`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreRange {
    pub min: f64,
    pub min_ex: bool,
    pub max: f64,
    pub max_ex: bool,
}

/// One end of a lex interval: `-`, `+`, `[x` or `(x`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LexBound<'a> {
    /// `-`: before every member.
    Min,
    /// `+`: after every member.
    Max,
    Incl(&'a [u8]),
    Excl(&'a [u8]),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LexRange<'a> {
    pub min: LexBound<'a>,
    pub max: LexBound<'a>,
}

#[derive(Clone)]
enum Repr {
    Pack(Pack),
    Tree(Box<Tree>),
}

/// A zset value.
#[derive(Clone)]
pub struct ZSet {
    repr: Repr,
}

impl Default for ZSet {
    fn default() -> Self {
        ZSet {
            repr: Repr::Pack(Pack::default()),
        }
    }
}

impl PartialEq for ZSet {
    /// Same pairs in the same order, whatever the encodings.
    fn eq(&self, other: &ZSet) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl std::fmt::Debug for ZSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZSet")
            .field("encoding", &self.encoding())
            .field(
                "pairs",
                &self
                    .iter()
                    .map(|(m, s)| (String::from_utf8_lossy(m), s))
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Pairs in rank order (see [`ZSet::range`]).
pub struct Range<'a>(RangeIter<'a>);

enum RangeIter<'a> {
    Pack(std::iter::Take<std::iter::Skip<PackIter<'a>>>),
    PackRev(std::iter::Rev<std::vec::IntoIter<(&'a [u8], f64)>>),
    Tree(std::iter::Take<Walk<'a>>),
}

impl<'a> Iterator for Range<'a> {
    type Item = (&'a [u8], f64);
    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            RangeIter::Pack(it) => it.next().map(|i| (i.member, i.score)),
            RangeIter::PackRev(it) => it.next(),
            RangeIter::Tree(it) => it.next(),
        }
    }
}

impl ZSet {
    /// Offer the packed buffer of a small sorted set to active
    /// defragmentation (a large one's insides go by
    /// [`ZSet::relocate_step`]).
    pub(crate) fn relocate(&mut self, m: &mut Mover<'_>) {
        if let Repr::Pack(p) = &mut self.repr {
            p.relocate(m);
        }
    }

    /// A large sorted set's insides, one step of active defragmentation
    /// from `cursor` (0 starts; 0 when done): its tree's struct, then its
    /// members' buffers.
    pub(crate) fn relocate_step(&mut self, cursor: u64, m: &mut Mover<'_>) -> u64 {
        match &mut self.repr {
            Repr::Tree(t) => m.boxed_then(t, cursor, |t, m| t.relocate_step(cursor, m)),
            Repr::Pack(_) => 0,
        }
    }

    /// Whether [`ZSet::relocate_step`] has work (a tree).
    pub(crate) fn is_tree(&self) -> bool {
        matches!(self.repr, Repr::Tree(_))
    }

    pub fn new() -> ZSet {
        ZSet::default()
    }

    /// An empty set encoded for about `size_hint` members of up to
    /// `max_member_len` bytes (Valkey's `zsetTypeCreate`, as ZADD uses it).
    pub fn with_hint(size_hint: usize, max_member_len: usize, limits: &EncodingLimits) -> ZSet {
        if size_hint <= limits.zset_max_listpack_entries
            && max_member_len <= limits.zset_max_listpack_value
        {
            ZSet::new()
        } else {
            ZSet {
                repr: Repr::Tree(Box::new(Tree::with_capacity(size_hint.min(1 << 16)))),
            }
        }
    }

    /// A set holding `pairs` (unique members, any order), encoded for its
    /// final size: what a *STORE command writes.
    pub fn from_pairs(mut pairs: Vec<(Vec<u8>, f64)>, limits: &EncodingLimits) -> ZSet {
        let max_len = pairs.iter().map(|p| p.0.len()).max().unwrap_or(0);
        if pairs.len() <= limits.zset_max_listpack_entries
            && max_len <= limits.zset_max_listpack_value
        {
            pairs.sort_by(|a, b| {
                a.1.partial_cmp(&b.1)
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then_with(|| a.0.cmp(&b.0))
            });
            let n = pairs.len();
            return ZSet {
                repr: Repr::Pack(Pack::from_sorted(
                    pairs.iter().map(|(m, s)| (m.as_slice(), *s)),
                    n,
                )),
            };
        }
        let mut t = Tree::with_capacity(pairs.len());
        for (m, s) in &pairs {
            t.insert(m, *s);
        }
        ZSet {
            repr: Repr::Tree(Box::new(t)),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Pack(p) => p.len(),
            Repr::Tree(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// OBJECT ENCODING, with Valkey's names.
    pub fn encoding(&self) -> &'static str {
        match &self.repr {
            Repr::Pack(_) => "listpack",
            Repr::Tree(_) => "skiplist",
        }
    }

    /// Whether the set is in the large encoding (`skiplist`).
    pub fn is_large(&self) -> bool {
        matches!(self.repr, Repr::Tree(_))
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match &self.repr {
            Repr::Pack(p) => p.find(member).map(|(_, it)| it.score),
            Repr::Tree(t) => t.score(member),
        }
    }

    /// Move to the large encoding if a command bringing `size_hint`
    /// members of up to `max_member_len` bytes could pass the limits,
    /// before it knows which it adds (Valkey's `zsetTypeMaybeConvert`:
    /// `ZADD XX` with a long member converts a set it does not grow).
    pub fn maybe_convert(
        &mut self,
        size_hint: usize,
        max_member_len: usize,
        limits: &EncodingLimits,
    ) {
        if size_hint > limits.zset_max_listpack_entries
            || max_member_len > limits.zset_max_listpack_value
        {
            self.convert();
        }
    }

    /// Move to the large encoding now (SORT does, as Valkey's
    /// `zsetConvert` to a skiplist); a no-op when already there.
    pub fn convert_to_tree(&mut self) {
        self.convert();
    }

    fn convert(&mut self) {
        if let Repr::Pack(p) = &self.repr {
            let mut t = Tree::with_capacity(p.len() + 1);
            for it in p.iter() {
                t.insert(it.member, it.score);
            }
            self.repr = Repr::Tree(Box::new(t));
        }
    }

    /// Set `member`'s score (adding it if absent); the old score if it was
    /// present. `score` must not be NaN. Converts to the large encoding
    /// when a new member would pass the limits. May leave spare capacity:
    /// see [`ZSet::shrink`].
    pub fn insert(&mut self, member: &[u8], score: f64, limits: &EncodingLimits) -> Option<f64> {
        debug_assert!(!score.is_nan());
        if let Repr::Pack(p) = &mut self.repr {
            match p.find(member) {
                Some((_, it)) => {
                    let old = it.score;
                    if old != score {
                        p.remove(member);
                        p.insert_new(member, score);
                    }
                    return Some(old);
                }
                None => {
                    if p.len() < limits.zset_max_listpack_entries
                        && member.len() <= limits.zset_max_listpack_value
                    {
                        p.insert_new(member, score);
                        return None;
                    }
                    self.convert();
                }
            }
        }
        match &mut self.repr {
            Repr::Tree(t) => t.insert(member, score),
            Repr::Pack(_) => unreachable!("converted above"),
        }
    }

    /// Bytes the allocator holds for this set's heap data, each allocation
    /// rounded up to jemalloc's size class (see [`crate::alloc_size`]):
    /// the pack's buffer, or the boxed tree with its node arena, bucket
    /// array and members. The `Value` holding the set is not counted.
    pub fn memory_usage(&self) -> usize {
        match &self.repr {
            Repr::Pack(p) => p.memory_usage(),
            Repr::Tree(t) => crate::alloc_size(std::mem::size_of::<Tree>()) + t.memory_usage(),
        }
    }

    /// Release spare capacity left by [`ZSet::insert`] (which grows the
    /// compact encoding amortised): call once a command is done inserting.
    pub fn shrink(&mut self) {
        if let Repr::Pack(p) = &mut self.repr {
            p.shrink();
        }
    }

    /// Remove `member`; its score if it was present.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        match &mut self.repr {
            Repr::Pack(p) => p.remove(member),
            Repr::Tree(t) => t.remove(member),
        }
    }

    /// Ascending rank (0-based) and score of `member`.
    pub fn rank(&self, member: &[u8]) -> Option<(usize, f64)> {
        match &self.repr {
            Repr::Pack(p) => p.find(member).map(|(r, it)| (r, it.score)),
            Repr::Tree(t) => t.rank(member),
        }
    }

    /// The pair at an ascending rank.
    pub fn get(&self, rank: usize) -> Option<(&[u8], f64)> {
        match &self.repr {
            Repr::Pack(p) => p.item_at(rank).map(|it| (it.member, it.score)),
            Repr::Tree(t) => t.get(rank),
        }
    }

    /// Elements for which `pred` holds; `pred` must hold on a prefix.
    fn partition(&self, pred: impl Fn(f64, &[u8]) -> bool) -> usize {
        match &self.repr {
            Repr::Pack(p) => p.iter().take_while(|it| pred(it.score, it.member)).count(),
            Repr::Tree(t) => t.partition(pred),
        }
    }

    /// The ascending ranks `lo..hi` of the elements whose score is in `r`
    /// (`lo >= hi` when none are).
    pub fn score_span(&self, r: &ScoreRange) -> (usize, usize) {
        let lo = self.partition(|s, _| if r.min_ex { s <= r.min } else { s < r.min });
        let hi = self.partition(|s, _| if r.max_ex { s < r.max } else { s <= r.max });
        (lo, hi.max(lo))
    }

    /// The ascending ranks `lo..hi` of the members in `r`, assuming (as
    /// Valkey documents) that all scores are equal.
    pub fn lex_span(&self, r: &LexRange<'_>) -> (usize, usize) {
        let lo = self.partition(|_, m| match r.min {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::Incl(x) => m < x,
            LexBound::Excl(x) => m <= x,
        });
        let hi = self.partition(|_, m| match r.max {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::Incl(x) => m <= x,
            LexBound::Excl(x) => m < x,
        });
        (lo, hi.max(lo))
    }

    /// The pairs at ascending ranks `lo..hi` (clamped to the set), in
    /// ascending order, or descending from `hi - 1` when `rev`.
    pub fn range(&self, lo: usize, hi: usize, rev: bool) -> Range<'_> {
        let n = self.len();
        let hi = hi.min(n);
        let lo = lo.min(hi);
        Range(match (&self.repr, rev) {
            (Repr::Pack(p), false) => RangeIter::Pack(p.iter().skip(lo).take(hi - lo)),
            (Repr::Pack(p), true) => {
                let v: Vec<_> = p
                    .iter()
                    .skip(lo)
                    .take(hi - lo)
                    .map(|it| (it.member, it.score))
                    .collect();
                RangeIter::PackRev(v.into_iter().rev())
            }
            (Repr::Tree(t), false) => RangeIter::Tree(t.walk(lo, false).take(hi - lo)),
            (Repr::Tree(t), true) => RangeIter::Tree(t.walk(n - hi, true).take(hi - lo)),
        })
    }

    /// Every pair in ascending order.
    pub fn iter(&self) -> Range<'_> {
        self.range(0, usize::MAX, false)
    }

    /// Remove ascending ranks `lo..hi` (clamped); how many went.
    pub fn remove_ranks(&mut self, lo: usize, hi: usize) -> usize {
        let hi = hi.min(self.len());
        if lo >= hi {
            return 0;
        }
        match &mut self.repr {
            Repr::Pack(p) => p.remove_ranks(lo, hi),
            Repr::Tree(t) => t.remove_ranks(lo, hi),
        }
        hi - lo
    }

    /// Remove and return up to `count` lowest (or, with `max`, highest)
    /// pairs, in the order they were popped.
    pub fn pop(&mut self, max: bool, count: usize) -> Vec<(Vec<u8>, f64)> {
        let n = self.len();
        let k = count.min(n);
        let (lo, hi) = if max { (n - k, n) } else { (0, k) };
        let out: Vec<(Vec<u8>, f64)> = self
            .range(lo, hi, max)
            .map(|(m, s)| (m.to_vec(), s))
            .collect();
        self.remove_ranks(lo, hi);
        out
    }

    /// One step of ZSCAN from `cursor`: visits some pairs and returns the
    /// next cursor (0 when done). The compact encoding is visited whole
    /// in one step, as Valkey does.
    pub fn scan_step(&self, cursor: u64, mut f: impl FnMut(&[u8], f64)) -> u64 {
        match &self.repr {
            Repr::Pack(p) => {
                for it in p.iter() {
                    f(it.member, it.score);
                }
                0
            }
            Repr::Tree(t) => t.scan_step(cursor, f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn limits(entries: usize, value: usize) -> EncodingLimits {
        EncodingLimits {
            zset_max_listpack_entries: entries,
            zset_max_listpack_value: value,
            ..EncodingLimits::default()
        }
    }

    fn pairs(z: &ZSet) -> Vec<(Vec<u8>, f64)> {
        z.iter().map(|(m, s)| (m.to_vec(), s)).collect()
    }

    #[test]
    fn converts_past_limits_and_keeps_order() {
        let lim = limits(4, 8);
        let mut z = ZSet::new();
        for (i, m) in ["d", "c", "b", "a"].iter().enumerate() {
            assert_eq!(z.insert(m.as_bytes(), i as f64 % 2.0, &lim), None);
        }
        assert_eq!(z.encoding(), "listpack");
        let order: Vec<_> = z.iter().map(|(m, _)| m.to_vec()).collect();
        assert_eq!(
            order,
            vec![b"b".to_vec(), b"d".to_vec(), b"a".to_vec(), b"c".to_vec()]
        );
        assert_eq!(z.insert(b"b", 5.0, &lim), Some(0.0));
        assert_eq!(z.encoding(), "listpack");
        z.insert(b"e", 1.0, &lim);
        assert_eq!(z.encoding(), "skiplist");
        assert_eq!(z.len(), 5);
        let mut y = ZSet::new();
        y.insert(b"123456789", 1.0, &lim);
        assert_eq!(y.encoding(), "skiplist");
        // Removing never converts back.
        z.remove(b"e");
        z.remove(b"a");
        assert_eq!(z.encoding(), "skiplist");
        assert_eq!(z.rank(b"b"), Some((2, 5.0)));
    }

    #[test]
    fn memory_usage_grows_and_rounds_to_size_classes() {
        let lim = limits(4, 8);
        let mut z = ZSet::new();
        assert_eq!(z.memory_usage(), 0);
        // One tiny pair: a count byte plus a header byte and "a" = 3 bytes,
        // the 8-byte class once the buffer is exact.
        z.insert(b"a", 1.0, &lim);
        z.shrink();
        assert_eq!(z.memory_usage(), 8);
        let small = z.memory_usage();
        let mut last = small;
        for i in 0..200 {
            z.insert(format!("member{i}").as_bytes(), i as f64, &lim);
            z.shrink();
            let now = z.memory_usage();
            assert!(now >= last, "{now} < {last} after {i}");
            last = now;
        }
        assert_eq!(z.encoding(), "skiplist");
        // Every one of the 201 members owns a heap buffer of at least the
        // 8-byte class, on top of its node in the arena.
        assert!(last > small + 201 * 8);
        // A tree is far bigger than the pack it replaced, even when empty.
        let empty_tree = ZSet::with_hint(16, 0, &lim);
        assert!(empty_tree.memory_usage() > small);
        assert!(empty_tree.memory_usage() < last);
    }

    #[test]
    fn equality_ignores_encoding() {
        let mut a = ZSet::new();
        let mut b = ZSet::with_hint(1000, 0, &EncodingLimits::default());
        assert_eq!(b.encoding(), "skiplist");
        for i in 0..10 {
            a.insert(
                format!("m{i}").as_bytes(),
                i as f64,
                &EncodingLimits::default(),
            );
            b.insert(
                format!("m{i}").as_bytes(),
                i as f64,
                &EncodingLimits::default(),
            );
        }
        assert_eq!(a, b);
        let c = ZSet::from_pairs(pairs(&b), &EncodingLimits::default());
        assert_eq!(c.encoding(), "listpack");
        assert_eq!(c, a);
    }

    #[test]
    fn spans() {
        let lim = EncodingLimits::default();
        for big in [false, true] {
            let mut z = if big {
                ZSet::with_hint(1000, 0, &lim)
            } else {
                ZSet::new()
            };
            for (m, s) in [("a", 1.0), ("b", 2.0), ("c", 2.0), ("d", 3.0)] {
                z.insert(m.as_bytes(), s, &lim);
            }
            let r = |min, min_ex, max, max_ex| ScoreRange {
                min,
                min_ex,
                max,
                max_ex,
            };
            assert_eq!(z.score_span(&r(2.0, false, 2.0, false)), (1, 3));
            assert_eq!(z.score_span(&r(2.0, true, 3.0, false)), (3, 4));
            assert_eq!(
                z.score_span(&r(f64::NEG_INFINITY, false, 1.0, true)),
                (0, 0)
            );
            assert_eq!(z.score_span(&r(5.0, false, 1.0, false)), (4, 4));
            let lx = |min, max| LexRange { min, max };
            assert_eq!(z.lex_span(&lx(LexBound::Min, LexBound::Max)), (0, 4));
            assert_eq!(
                z.lex_span(&lx(LexBound::Excl(b"a"), LexBound::Incl(b"c"))),
                (1, 3)
            );
            assert_eq!(z.lex_span(&lx(LexBound::Max, LexBound::Min)), (4, 4));
            let rev: Vec<_> = z.range(1, 3, true).map(|(m, _)| m.to_vec()).collect();
            assert_eq!(rev, vec![b"c".to_vec(), b"b".to_vec()]);
            assert_eq!(z.pop(true, 1), vec![(b"d".to_vec(), 3.0)]);
            assert_eq!(z.pop(false, 10).len(), 3);
            assert!(z.is_empty());
        }
    }

    #[test]
    fn tree_scan_visits_everything_across_resizes() {
        let lim = limits(0, 0);
        let mut z = ZSet::new();
        for i in 0..200 {
            z.insert(format!("m{i}").as_bytes(), i as f64, &lim);
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        let mut steps = 0;
        loop {
            cursor = z.scan_step(cursor, |m, _| {
                seen.insert(m.to_vec());
            });
            steps += 1;
            if steps == 10 {
                // Grow the index mid-scan; the survivors must still show up.
                for i in 200..1000 {
                    z.insert(format!("m{i}").as_bytes(), i as f64, &lim);
                }
            }
            if cursor == 0 {
                break;
            }
        }
        for i in 0..200 {
            assert!(seen.contains(format!("m{i}").as_bytes()), "m{i}");
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8, i8),
        Remove(u8),
        RemoveRanks(u8, u8),
        Pop(bool, u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (any::<u8>(), -4i8..40).prop_map(|(m, s)| Op::Insert(m, s)),
            2 => any::<u8>().prop_map(Op::Remove),
            1 => (any::<u8>(), 0u8..8).prop_map(|(a, b)| Op::RemoveRanks(a, b)),
            1 => (any::<bool>(), 0u8..4).prop_map(|(a, b)| Op::Pop(a, b)),
        ]
    }

    proptest! {
        // The large encoding against a sorted Vec, through the public API.
        #[test]
        fn tree_matches_sorted_vec(ops in proptest::collection::vec(op(), 1..400), big in any::<bool>()) {
            let lim = if big { limits(0, 0) } else { limits(usize::MAX, usize::MAX) };
            let mut z = ZSet::new();
            let mut model: Vec<(Vec<u8>, f64)> = Vec::new();
            let sort = |m: &mut Vec<(Vec<u8>, f64)>| m.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap().then(a.0.cmp(&b.0)));
            for op in ops {
                match op {
                    Op::Insert(m, s) => {
                        // Short and long members, small and large, whole
                        // and fractional scores: every pack pair form.
                        let key = vec![b'a' + m % 40; 1 + usize::from(m >= 240) * 8];
                        let old = model.iter().position(|p| p.0 == key).map(|i| model.remove(i).1);
                        model.push((key.clone(), f64::from(s) / 2.0));
                        sort(&mut model);
                        prop_assert_eq!(z.insert(&key, f64::from(s) / 2.0, &lim), old);
                    }
                    Op::Remove(m) => {
                        let key = vec![b'a' + m % 40; 1 + usize::from(m >= 240) * 8];
                        let old = model.iter().position(|p| p.0 == key).map(|i| model.remove(i).1);
                        prop_assert_eq!(z.remove(&key), old);
                    }
                    Op::RemoveRanks(a, k) => {
                        let lo = a as usize % (model.len() + 1);
                        let hi = (lo + k as usize).min(model.len());
                        model.drain(lo..hi);
                        prop_assert_eq!(z.remove_ranks(lo, lo + k as usize), hi - lo);
                    }
                    Op::Pop(max, k) => {
                        let k = (k as usize).min(model.len());
                        let want: Vec<_> = if max {
                            model.drain(model.len() - k..).rev().collect()
                        } else {
                            model.drain(..k).collect()
                        };
                        prop_assert_eq!(z.pop(max, k), want);
                    }
                }
                if let Repr::Tree(t) = &z.repr { t.check(); }
                prop_assert_eq!(z.len(), model.len());
            }
            if !big {
                prop_assert_eq!(z.encoding(), "listpack");
            }
            prop_assert_eq!(pairs(&z), model.clone());
            for (i, (m, s)) in model.iter().enumerate() {
                prop_assert_eq!(z.rank(m), Some((i, *s)));
                prop_assert_eq!(z.get(i), Some((m.as_slice(), *s)));
            }
            let n = model.len();
            for lo in 0..=n {
                for hi in [lo, lo + 1, lo + 3, n] {
                    let want: Vec<_> = model[lo.min(n)..hi.min(n).max(lo)].to_vec();
                    let got: Vec<_> = z.range(lo, hi, false).map(|(m, s)| (m.to_vec(), s)).collect();
                    prop_assert_eq!(&got, &want);
                    let got: Vec<_> = z.range(lo, hi, true).map(|(m, s)| (m.to_vec(), s)).collect();
                    let rev: Vec<_> = want.into_iter().rev().collect();
                    prop_assert_eq!(got, rev);
                }
            }
            for min in -5..5 {
                for max in -5..5 {
                    for (min_ex, max_ex) in [(false, false), (true, false), (false, true), (true, true)] {
                        let r = ScoreRange { min: f64::from(min) / 2.0, min_ex, max: f64::from(max) / 2.0, max_ex };
                        let inside = |s: f64| (if min_ex { s > r.min } else { s >= r.min }) && (if max_ex { s < r.max } else { s <= r.max });
                        let want = model.iter().filter(|p| inside(p.1)).count();
                        let (lo, hi) = z.score_span(&r);
                        prop_assert_eq!(hi - lo, want);
                        if want > 0 {
                            prop_assert!(inside(model[lo].1) && inside(model[hi - 1].1));
                        }
                    }
                }
            }
        }
    }
}
