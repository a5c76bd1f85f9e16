//! Active defragmentation's side in the keyspace: walking a database with
//! a SCAN cursor and offering each key's blocks (its node, and a boxed
//! value's box) to the allocator, which may move them to fuller slabs.
//!
//! Moving a block is a copy to a new address and a free of the old one,
//! so it is only sound where nothing else holds the old address: a node
//! is reached only through its table slot, a box only through its node,
//! and an overflow bucket of the table only through the bucket before it
//! (the walk moves those too: a few of them can pin many sparse slabs).
//! A small collection's one buffer of packed elements (and an edited
//! string's buffer) is reached only through its value, and moves too; so
//! do a large collection's insides, walked with its key or, past
//! `active-defrag-max-scan-fields` items, apart a step at a time
//! ([`Db::defrag_later_step`]): a hash's or set's table struct, each
//! table node (reached only through its slot), long field or member and
//! value; a list's quicklist nodes' buffers; a sorted set's tree struct
//! and members' buffers (its nodes link by arena index); a stream's
//! struct and blocks' buffers. Shared strings (`Arc`s a reply may hold),
//! the nodes of std's maps (a stream's block index, its consumer groups)
//! stay. A frozen database (a BGSAVE's view) is not walked: its walk
//! reads nodes between steps.

use std::alloc::Layout;
use std::ptr::NonNull;

use crate::Db;

/// Moves one heap block when the allocator says it pays: returns the new
/// address, the old block freed, or `None` with the block untouched.
///
/// # Safety
/// Called with a live block of the global allocator made with `layout`
/// that nothing else uses meanwhile. A `Some` is a block of the same
/// layout holding the same bytes, and the old address is freed.
pub type Relocate = unsafe fn(NonNull<u8>, Layout) -> Option<NonNull<u8>>;

/// Where a walk over one large collection's insides is
/// ([`Db::defrag_later_step`]): 0 starts and ends it. Wide enough for a
/// stream's, which is an entry ID.
pub type LaterCursor = u128;

/// Valkey's INFO counters of active defragmentation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DefragCounts {
    /// Blocks moved (`active_defrag_hits`).
    pub hits: u64,
    /// Blocks offered and left (`active_defrag_misses`).
    pub misses: u64,
    /// Keys with a block moved (`active_defrag_key_hits`).
    pub key_hits: u64,
    /// Keys visited with nothing moved (`active_defrag_key_misses`).
    pub key_misses: u64,
}

/// What a walk step moves blocks with: the allocator's [`Relocate`] and
/// the counters every offer lands in.
pub(crate) struct Mover<'a> {
    relocate: Relocate,
    pub(crate) counts: &'a mut DefragCounts,
}

impl Mover<'_> {
    /// Offer one block; counts the offer.
    ///
    /// # Safety
    /// As [`Relocate`]: `ptr` is a live block made with `layout` that
    /// nothing else uses meanwhile, and on `Some` the caller replaces
    /// every use of the old address with the new one.
    pub(crate) unsafe fn block(&mut self, ptr: NonNull<u8>, layout: Layout) -> Option<NonNull<u8>> {
        // SAFETY: the caller's guarantees are `Relocate`'s.
        let moved = unsafe { (self.relocate)(ptr, layout) };
        match moved {
            Some(_) => self.counts.hits += 1,
            None => self.counts.misses += 1,
        }
        moved
    }

    /// Offer a byte buffer (a small collection's packed elements, a long
    /// name); the box follows a move.
    pub(crate) fn bytes(&mut self, b: &mut Box<[u8]>) {
        let len = b.len();
        let Some(ptr) = NonNull::new(b.as_mut_ptr()).filter(|_| len > 0) else {
            return;
        };
        // SAFETY: a non-empty boxed slice is a live block of `len` bytes
        // at alignment 1, reached only through `b`, which `&mut` holds; on
        // a move the old block is freed, so the old box is forgotten, not
        // dropped.
        unsafe {
            if let Some(n) = self.block(ptr, Layout::for_value::<[u8]>(b)) {
                let moved = Box::from_raw(std::ptr::slice_from_raw_parts_mut(n.as_ptr(), len));
                std::mem::forget(std::mem::replace(b, moved));
            }
        }
    }

    /// [`Mover::bytes`] for a vector's buffer (its capacity is the block).
    pub(crate) fn vec(&mut self, v: &mut Vec<u8>) {
        let (len, cap) = (v.len(), v.capacity());
        let Some(ptr) = NonNull::new(v.as_mut_ptr()).filter(|_| cap > 0) else {
            return;
        };
        let layout = Layout::array::<u8>(cap).expect("a vector's own capacity");
        // SAFETY: a vector with capacity holds one live block of `cap`
        // bytes at alignment 1, reached only through `v`; on a move the
        // old block is freed, so the old vector is forgotten, not dropped.
        unsafe {
            if let Some(n) = self.block(ptr, layout) {
                let moved = Vec::from_raw_parts(n.as_ptr(), len, cap);
                std::mem::forget(std::mem::replace(v, moved));
            }
        }
    }

    /// Offer a box's block; the box follows a move. For boxes of values
    /// that nothing points into (Rust values move by copying).
    pub(crate) fn boxed<T>(&mut self, b: &mut Box<T>) {
        if size_of::<T>() == 0 {
            return;
        }
        let ptr = NonNull::from(&mut **b).cast::<u8>();
        // SAFETY: a box of a sized, non-zero-sized T is a live block with
        // T's layout, reached only through `b`, which `&mut` holds; on a
        // move the old block is freed, so the old box is forgotten.
        unsafe {
            if let Some(n) = self.block(ptr, Layout::new::<T>()) {
                let moved = Box::from_raw(n.as_ptr().cast::<T>());
                std::mem::forget(std::mem::replace(b, moved));
            }
        }
    }

    /// One step over a large collection held in `b`: the box itself when
    /// the walk starts (`cursor` 0), then `inner`'s step; returns the next
    /// cursor (0 when done).
    pub(crate) fn boxed_then<T>(
        &mut self,
        b: &mut Box<T>,
        cursor: u64,
        inner: impl FnOnce(&mut T, &mut Self) -> u64,
    ) -> u64 {
        if cursor == 0 {
            self.boxed(b);
        }
        inner(b, self)
    }

    /// One step over a sequence by index: `f` on items `cursor` to
    /// `cursor + n`; the next cursor, 0 past the end. Items added or
    /// removed in front of the cursor between steps make the walk see
    /// some twice or not at all, which only changes what is offered.
    pub(crate) fn chunk<'t, T: 't>(
        &mut self,
        items: impl ExactSizeIterator<Item = &'t mut T>,
        cursor: u64,
        n: usize,
        mut f: impl FnMut(&mut T, &mut Self),
    ) -> u64 {
        let (from, len) = (cursor as usize, items.len());
        items.skip(from).take(n).for_each(|t| f(t, self));
        if from + n >= len {
            0
        } else {
            (from + n) as u64
        }
    }
}

impl Db {
    /// One step of a defragmentation walk over this database's keys from
    /// `cursor` (0 starts it); returns the next cursor, 0 when the walk is
    /// done. The insides of a large collection (a stream's blocks, a
    /// large hash's, set's, sorted set's or list's) are walked with its
    /// key when they are at most `max_scan_fields` items, and otherwise
    /// the key is pushed on `later`, for [`Db::defrag_later_step`] to
    /// walk them a step at a time (Valkey's `active-defrag-max-scan-fields`).
    /// A frozen database is skipped (0 at once).
    pub fn defrag_step(
        &mut self,
        cursor: u64,
        relocate: Relocate,
        counts: &mut DefragCounts,
        max_scan_fields: usize,
        later: &mut Vec<Box<[u8]>>,
    ) -> u64 {
        if self.frozen_index().is_some() {
            return 0;
        }
        let mut m = Mover { relocate, counts };
        self.table.defrag_scan(cursor, &mut m, |e, m| {
            if e.relocate(m) {
                m.counts.key_hits += 1;
            } else {
                m.counts.key_misses += 1;
            }
            let Some(v) = e.boxed_mut() else {
                return;
            };
            match v.steps_over() {
                Some(n) if n > max_scan_fields => later.push(e.key().into()),
                Some(_) => {
                    let mut inner = v.relocate_step(0, m);
                    while inner != 0 {
                        inner = v.relocate_step(inner, m);
                    }
                }
                None => {}
            }
        })
    }

    /// One step of walking the insides of the large collection at `key`
    /// (0 starts; returns 0 when done, also when the key is gone or no
    /// longer such a collection, or the database is frozen).
    pub fn defrag_later_step(
        &mut self,
        key: &[u8],
        cursor: LaterCursor,
        relocate: Relocate,
        counts: &mut DefragCounts,
    ) -> LaterCursor {
        if self.frozen_index().is_some() {
            return 0;
        }
        match self
            .table
            .get_mut(crate::hash_key(key), key)
            .and_then(|e| e.boxed_mut())
        {
            Some(v) => v.relocate_step(cursor, &mut Mover { relocate, counts }),
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{EncodingLimits, Str, Value};
    use crate::{Entry, hash_key};

    /// Moves every block it is offered: a fresh allocation, the bytes
    /// copied, the old block freed.
    unsafe fn always_move(p: NonNull<u8>, layout: Layout) -> Option<NonNull<u8>> {
        // SAFETY: the `Relocate` contract: `p` is live with `layout`,
        // used by nothing else meanwhile; the copy has the same layout.
        unsafe {
            let n = NonNull::new(std::alloc::alloc(layout))?;
            std::ptr::copy_nonoverlapping(p.as_ptr(), n.as_ptr(), layout.size());
            std::alloc::dealloc(p.as_ptr(), layout);
            Some(n)
        }
    }

    unsafe fn never_move(_: NonNull<u8>, _: Layout) -> Option<NonNull<u8>> {
        None
    }

    /// Keys of every kind a walk moves: inline and integer strings (a
    /// node only), an edited string and small collections of each type
    /// (node, box and buffer).
    const KINDS: u32 = 7;

    fn value_of(i: u32, limits: &EncodingLimits) -> Value {
        let m = format!("m{i}");
        let m = m.as_bytes();
        match i % KINDS {
            0 => Value::Str(Str::Bytes(format!("v{i}").into_bytes())),
            1 => Value::Str(Str::Int(i64::from(i))),
            2 => Value::Str(Str::Raw(format!("edited {i}").into_bytes())),
            3 => {
                let mut s = crate::types::Set::new();
                s.add(m, limits);
                s.add(b"other", limits);
                Value::Set(s)
            }
            4 => {
                let mut h = crate::types::Hash::new();
                h.set(m, b"value", limits);
                Value::Hash(h)
            }
            5 => {
                let mut z = crate::types::ZSet::new();
                z.insert(m, 1.5, limits);
                Value::ZSet(z)
            }
            _ => {
                let mut l = crate::types::List::new();
                l.push(crate::types::list::End::Right, &[m, b"x"], limits);
                Value::List(l)
            }
        }
    }

    fn filled() -> Db {
        let mut db = Db::default();
        let limits = EncodingLimits::default();
        for i in 0..KEYS {
            let key = format!("key:{i}");
            let mut e = Entry::keyed(key.as_bytes(), value_of(i, &limits));
            if i % 5 == 0 {
                e.set_expire_at_ms(Some(1_000_000 + i64::from(i)));
            }
            db.insert(hash_key(key.as_bytes()), key.as_bytes(), e, 0);
        }
        db
    }

    const KEYS: u32 = 21_000;

    /// A whole walk, the insides of each large collection of more than
    /// `max_scan_fields` items walked apart as its key is met; returns
    /// the counts and the keys walked apart.
    fn walk_with(
        db: &mut Db,
        relocate: Relocate,
        max_scan_fields: usize,
    ) -> (DefragCounts, Vec<Box<[u8]>>) {
        let mut counts = DefragCounts::default();
        let (mut later, mut walked_apart) = (Vec::new(), Vec::new());
        let mut cursor = 0;
        loop {
            cursor = db.defrag_step(cursor, relocate, &mut counts, max_scan_fields, &mut later);
            for key in later.drain(..) {
                let mut inner = db.defrag_later_step(&key, 0, relocate, &mut counts);
                while inner != 0 {
                    inner = db.defrag_later_step(&key, inner, relocate, &mut counts);
                }
                walked_apart.push(key);
            }
            if cursor == 0 {
                walked_apart.sort();
                return (counts, walked_apart);
            }
        }
    }

    /// [`walk_with`] at Valkey's default `active-defrag-max-scan-fields`.
    fn walk(db: &mut Db, relocate: Relocate) -> DefragCounts {
        walk_with(db, relocate, 1000).0
    }

    fn contents(db: &Db) -> Vec<(Vec<u8>, Value, Option<i64>)> {
        let mut all: Vec<_> = db
            .iter()
            .map(|(k, e)| (k.to_vec(), e.to_value(), e.expire_at_ms()))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    #[test]
    fn a_walk_that_moves_everything_keeps_every_key_as_it_was() {
        let mut db = filled();
        assert!(
            db.table.overflow_buckets() > 0,
            "the walk must meet overflow buckets"
        );
        let before = contents(&db);
        let counts = walk(&mut db, always_move);
        // Every node, every overflow bucket, and for the five kinds in
        // seven that are boxed, the box and the buffer.
        let boxed = u64::from(KEYS / KINDS * 5);
        let keys = u64::from(KEYS);
        assert_eq!(counts.key_hits, keys);
        assert_eq!(counts.key_misses, 0);
        let overflow = db.table.overflow_buckets() as u64;
        assert_eq!(counts.hits, keys + 2 * boxed + overflow);
        assert_eq!(counts.misses, 0);
        assert_eq!(contents(&db), before);
        // Lookups still find every key where its bucket says.
        for i in 0..KEYS {
            let key = format!("key:{i}");
            assert!(
                db.peek(hash_key(key.as_bytes()), key.as_bytes()).is_some(),
                "{key}"
            );
        }
    }

    /// A large hash, set, sorted set and list of 2,000 elements each
    /// (250 quicklist nodes) and a stream of 3,000 entries (30 blocks).
    fn large_collections() -> Db {
        let limits = EncodingLimits {
            list_max_listpack_size: 8,
            list_compress_depth: 1,
            ..EncodingLimits::default()
        };
        let long = |i: u32| format!("a field name longer than inline keys {i}");
        let mut h = crate::types::Hash::new();
        let mut set = crate::types::Set::new();
        let mut z = crate::types::ZSet::new();
        let mut l = crate::types::List::new();
        for i in 0..2000u32 {
            let short = format!("f{i}");
            let name = if i % 3 == 0 { long(i) } else { short };
            h.set(name.as_bytes(), format!("value {i}").as_bytes(), &limits);
            set.add(name.as_bytes(), &limits);
            z.insert(name.as_bytes(), f64::from(i), &limits);
            l.push(crate::types::list::End::Right, &[name.as_bytes()], &limits);
        }
        let mut st = crate::types::Stream::new();
        for i in 0..3000u64 {
            let v = format!("reading {i}");
            let id = crate::StreamId::new(1_700_000_000_000 + i / 7, i % 7);
            st.append(id, &[b"sensor", v.as_bytes()], Default::default());
        }
        st.create_group(b"workers", crate::StreamId::MIN, 0);
        let mut db = Db::default();
        for (key, v) in [
            ("h", Value::Hash(h)),
            ("s", Value::Set(set)),
            ("z", Value::ZSet(z)),
            ("l", Value::List(l)),
            ("x", Value::Stream(Box::new(st))),
        ] {
            db.insert(
                hash_key(key.as_bytes()),
                key.as_bytes(),
                Entry::keyed(key.as_bytes(), v),
                0,
            );
        }
        assert!(db.peek(hash_key(b"h"), b"h").unwrap().value().encoding() == "hashtable");
        assert!(db.peek(hash_key(b"l"), b"l").unwrap().value().encoding() == "quicklist");
        db
    }

    #[test]
    fn large_collections_move_their_insides_and_keep_every_element() {
        let mut db = large_collections();
        let before = contents(&db);
        let (counts, apart) = walk_with(&mut db, always_move, 1000);
        // Five nodes and boxes; the set's and the hash's table structs,
        // 2,000 nodes and 667 long names each, the hash's 2,000 values;
        // the quicklist's struct and its 250 nodes' buffers; the sorted
        // set's tree struct and its 2,000 members; the stream's struct,
        // its groups' map and its 30 blocks: 9,630, and the tables'
        // overflow buckets on top.
        assert!(counts.hits >= 9_630, "{counts:?}");
        assert_eq!(counts.misses, 0);
        assert_eq!(contents(&db), before);
        // Past 1,000 items: the hash, set and sorted set (2,000 each);
        // the list's 250 nodes and the stream's 30 blocks go with their keys.
        let apart: Vec<&[u8]> = apart.iter().map(|k| &k[..]).collect();
        assert_eq!(apart, [&b"h"[..], b"s", b"z"]);
    }

    #[test]
    fn max_scan_fields_decides_which_collections_are_walked_apart() {
        for (max, want) in [
            (0, &[&b"h"[..], b"l", b"s", b"x", b"z"][..]),
            (29, &[b"h", b"l", b"s", b"x", b"z"]),
            (30, &[b"h", b"l", b"s", b"z"]),
            (250, &[b"h", b"s", b"z"]),
            (2000, &[]),
        ] {
            let mut db = large_collections();
            let before = contents(&db);
            let (inline, apart) = walk_with(&mut db, always_move, max);
            let apart: Vec<&[u8]> = apart.iter().map(|k| &k[..]).collect();
            assert_eq!(apart, want, "max-scan-fields {max}");
            assert_eq!(contents(&db), before);
            // Walked with the key or apart, the same blocks are offered.
            let mut db = large_collections();
            let (reference, _) = walk_with(&mut db, always_move, usize::MAX);
            assert_eq!(inline.hits, reference.hits, "max-scan-fields {max}");
        }
    }

    #[test]
    fn a_stream_walked_in_steps_sees_blocks_added_and_trimmed_between_them() {
        let mut st = crate::types::Stream::new();
        let lim = crate::types::stream::NodeLimits {
            max_bytes: 4096,
            max_entries: 4,
        };
        let mut next = 1u64;
        let mut add = |st: &mut crate::types::Stream, n: u64| {
            for _ in 0..n {
                st.append(crate::StreamId::new(next, 0), &[b"f", b"v"], lim);
                next += 1;
            }
        };
        add(&mut st, 400);
        assert_eq!(st.block_count(), 100);
        let mut counts = DefragCounts::default();
        let mut m = Mover {
            relocate: always_move,
            counts: &mut counts,
        };
        let mut cursor = st.relocate_step(0, &mut m);
        assert_eq!(cursor, 65 << 64, "16 blocks of 4 entries, then 65-0");
        let mut steps = 1;
        while cursor != 0 {
            // Trim the oldest block and append one between steps: the walk
            // goes on from where it was and ends with the new blocks.
            let first = st.blocks().next().unwrap().0;
            for e in 0..4 {
                st.delete(crate::StreamId::new(first.ms + e, 0));
            }
            add(&mut st, 4);
            cursor = st.relocate_step(cursor, &mut m);
            steps += 1;
            assert!(steps < 20, "the walk must end");
        }
        // 100 blocks at the start, 16 a step while one more is added per step.
        assert_eq!(steps, 7);
        assert_eq!(m.counts.hits, 100 + 6);
        assert_eq!(st.len(), 400);
    }

    #[test]
    fn a_walk_that_moves_nothing_counts_misses() {
        let mut db = filled();
        let counts = walk(&mut db, never_move);
        assert_eq!(counts.key_misses, u64::from(KEYS));
        assert_eq!(counts.hits, 0);
        assert!(counts.misses >= u64::from(KEYS));
    }

    #[test]
    fn a_frozen_database_is_not_walked() {
        let mut db = filled();
        db.freeze(0);
        let mut counts = DefragCounts::default();
        let mut later = Vec::new();
        assert_eq!(
            db.defrag_step(0, always_move, &mut counts, 1000, &mut later),
            0
        );
        assert_eq!(
            db.defrag_later_step(b"key:3", 0, always_move, &mut counts),
            0
        );
        assert_eq!(counts, DefragCounts::default());
        assert!(later.is_empty());
    }
}
