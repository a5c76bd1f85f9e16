//! Active defragmentation's side in the keyspace: walking a database with
//! a SCAN cursor and offering each key's blocks (its node, and a boxed
//! value's box) to the allocator, which may move them to fuller slabs.
//!
//! Moving a block is a copy to a new address and a free of the old one,
//! so it is only sound where nothing else holds the old address: a node
//! is reached only through its table slot, a box only through its node,
//! and an overflow bucket of the table only through the bucket before it
//! (the walk moves those too: a few of them can pin many sparse slabs). What a collection holds inside (elements, listpacks, its own
//! tables) stays where it is. A frozen database (a BGSAVE's view) is not
//! walked: its walk reads nodes between steps.

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

impl DefragCounts {
    pub(crate) fn count<T>(&mut self, moved: Option<T>) -> Option<T> {
        match moved {
            Some(_) => self.hits += 1,
            None => self.misses += 1,
        }
        moved
    }
}

impl Db {
    /// One step of a defragmentation walk over this database's keys from
    /// `cursor` (0 starts it); returns the next cursor, 0 when the walk is
    /// done. A frozen database is skipped (0 at once).
    pub fn defrag_step(
        &mut self,
        cursor: u64,
        relocate: Relocate,
        counts: &mut DefragCounts,
    ) -> u64 {
        if self.frozen_index().is_some() {
            return 0;
        }
        self.table
            .defrag_scan(cursor, relocate, counts, |e, counts| {
                if e.relocate(relocate, counts) {
                    counts.key_hits += 1;
                } else {
                    counts.key_misses += 1;
                }
            })
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

    fn filled() -> Db {
        let mut db = Db::default();
        let limits = EncodingLimits::default();
        for i in 0..20_000u32 {
            let key = format!("key:{i}");
            let value = match i % 3 {
                0 => Value::Str(Str::Bytes(format!("v{i}").into_bytes())),
                1 => Value::Str(Str::Int(i64::from(i))),
                _ => {
                    let mut s = crate::types::Set::new();
                    s.add(format!("m{i}").as_bytes(), &limits);
                    s.add(b"other", &limits);
                    Value::Set(s)
                }
            };
            let mut e = Entry::keyed(key.as_bytes(), value);
            if i % 5 == 0 {
                e.set_expire_at_ms(Some(1_000_000 + i64::from(i)));
            }
            db.insert(hash_key(key.as_bytes()), key.as_bytes(), e, 0);
        }
        db
    }

    fn walk(db: &mut Db, relocate: Relocate) -> DefragCounts {
        let mut counts = DefragCounts::default();
        let mut cursor = db.defrag_step(0, relocate, &mut counts);
        while cursor != 0 {
            cursor = db.defrag_step(cursor, relocate, &mut counts);
        }
        counts
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
        // Every node, every boxed set and every overflow bucket moved.
        let boxed = 20_000 / 3;
        assert_eq!(counts.key_hits, 20_000);
        assert_eq!(counts.key_misses, 0);
        assert_eq!(
            counts.hits,
            20_000 + boxed as u64 + db.table.overflow_buckets() as u64
        );
        assert_eq!(counts.misses, 0);
        assert_eq!(contents(&db), before);
        // Lookups still find every key where its bucket says.
        for i in 0..20_000u32 {
            let key = format!("key:{i}");
            assert!(
                db.peek(hash_key(key.as_bytes()), key.as_bytes()).is_some(),
                "{key}"
            );
        }
    }

    #[test]
    fn a_walk_that_moves_nothing_counts_misses() {
        let mut db = filled();
        let counts = walk(&mut db, never_move);
        assert_eq!(counts.key_misses, 20_000);
        assert_eq!(counts.hits, 0);
        assert!(counts.misses >= 20_000);
    }

    #[test]
    fn a_frozen_database_is_not_walked() {
        let mut db = filled();
        db.freeze(0);
        let mut counts = DefragCounts::default();
        assert_eq!(db.defrag_step(0, always_move, &mut counts), 0);
        assert_eq!(counts, DefragCounts::default());
    }
}
