//! A point-in-time view of a database while it keeps changing (fork-less
//! BGSAVE).
//!
//! ```text
//!  freeze():  table stops resizing; the walk's positions are its home
//!             buckets: [old array's unmoved buckets | new array's buckets]
//!             (just [buckets] when no resize was in progress)
//!
//!   positions   0 ........ cursor ............................ home_count
//!               └ visited ┘└ unvisited: what freeze_step reads next ┘
//!
//!  write to key k (get, insert, remove, set_expire, expiry):
//!    k's home position < cursor      → nothing (already captured)
//!    k recorded already              → nothing
//!    k present                       → preimages += deep copy; record k
//!    k absent, an insert             → record k (born later: skip it)
//!  freeze_step: each item of the next buckets, unless recorded
//! ```
//!
//! * **What is visited.** While frozen the table moves no item between
//!   buckets: growing, shrinking and the incremental rehash are paused (a
//!   full bucket overflows into child buckets, as it always may), and a
//!   resize in progress at the freeze stays half done. So every key lives
//!   in one home bucket for the whole view, and a cursor over the home
//!   buckets (with their chains) says exactly which keys were captured.
//! * **The hook.** Every [`Db`] method that can change or remove an entry
//!   first asks whether the key's bucket is still ahead of the cursor; if
//!   so, the entry as it was at the freeze is copied out once (the copy
//!   goes to [`Db::take_preimages`]) and the key recorded, so that the walk
//!   skips whatever is there when it arrives. The no-view path of the hook
//!   is one test of `Db::view`, which is `None`.
//! * **Memory.** Copy-on-write per key: one deep copy per key written
//!   before its bucket was visited, plus one record of its name (a key born
//!   in the unvisited part costs the record only). A view that sees no
//!   writes costs nothing but the paused resize; records are dropped as
//!   the walk passes them.
//! * **Clear during a view.** [`Db::clear`] and [`Db::take_contents`] move
//!   the frozen table into the view instead of freeing or copying it: the
//!   walk goes on over it, and the database starts a new empty table whose
//!   keys are all newer than the view, so the hook is off from then on.
//!   The view moves with its `Db` (SWAPDB swaps `Db`s), and
//!   [`Db::frozen_index`] stays the number it had at the freeze.
//!
//! Reads through [`Db::get_read`] keep no copy, but still stamp the access
//! bits: a key read (not written) before its bucket is visited is saved
//! with its newer access bits. Its value and expiry are as at the freeze.

use crate::table::Item;
use crate::{Db, Entry, Table};

/// The state of a view, kept by its [`Db`] while frozen.
pub(crate) struct View {
    index: usize,
    /// Home buckets of the frozen table, fixed at the freeze.
    total: usize,
    /// Positions below this were visited.
    cursor: usize,
    /// Keys whose entry in the unvisited part changed (or was born) since
    /// the freeze: the walk skips them.
    recorded: Table<()>,
    preimages: Vec<Entry>,
    /// The frozen contents, once a clear moved them out of the database.
    detached: Option<Db>,
}

impl Db {
    /// Start a point-in-time view; `index` is the database's number at this
    /// instant (it moves with the `Db` through SWAPDB).
    ///
    /// A view already in progress is ended first (as by [`Db::thaw`]).
    pub fn freeze(&mut self, index: usize) {
        self.thaw();
        self.table.pause_resize();
        self.view = Some(Box::new(View {
            index,
            total: self.table.home_count(),
            cursor: 0,
            recorded: Table::new(),
            preimages: Vec::new(),
            detached: None,
        }));
    }
    /// The number given to [`Db::freeze`], while frozen.
    pub fn frozen_index(&self) -> Option<usize> {
        self.view.as_ref().map(|v| v.index)
    }
    /// Visit up to `buckets` more buckets of the view, calling `f` for each
    /// key as it was at the freeze and not changed since (changed keys'
    /// old versions come from [`Db::take_preimages`]). True while more
    /// remains.
    pub fn freeze_step(&mut self, buckets: usize, mut f: impl FnMut(&Entry)) -> bool {
        let Some(v) = self.view.as_deref_mut() else {
            return false;
        };
        let View {
            total,
            cursor,
            recorded,
            detached,
            ..
        } = v;
        let table = detached.as_ref().map_or(&self.table, |d| &d.table);
        let end = cursor.saturating_add(buckets).min(*total);
        for pos in *cursor..end {
            // Three buckets ahead the nodes, two ahead their boxed values,
            // one ahead those values' buffers: the dependent misses of a
            // walk over cold keys overlap.
            if pos + 3 < *total {
                table.items_at(pos + 3).for_each(|e| e.prefetch());
            }
            if pos + 2 < *total {
                table.items_at(pos + 2).for_each(|e| e.prefetch_boxed());
            }
            if pos + 1 < *total {
                table.items_at(pos + 1).for_each(|e| e.prefetch_heap());
            }
            for e in table.items_at(pos) {
                // The record is not needed past this bucket: the hook only
                // looks at keys ahead of the cursor.
                if !recorded.is_empty() && recorded.remove(e.hash(), e.key()).is_some() {
                    continue;
                }
                f(e);
            }
        }
        *cursor = end;
        end < *total
    }
    /// Owned copies of keys as they were at the freeze, taken because a
    /// change reached them before the visit did; in the order taken.
    pub fn take_preimages(&mut self) -> Vec<Entry> {
        self.view
            .as_deref_mut()
            .map(|v| std::mem::take(&mut v.preimages))
            .unwrap_or_default()
    }
    /// End the view (finished or aborted).
    pub fn thaw(&mut self) {
        drop(self.thaw_detached());
    }
    /// [`Db::thaw`], handing back the contents a [`Db::clear`] or
    /// [`Db::take_contents`] during the view kept for it (as a database to
    /// free elsewhere, like `take_contents`'s), if any.
    pub fn thaw_detached(&mut self) -> Option<Db> {
        let v = self.view.take()?;
        if v.detached.is_none() {
            self.table.resume_resize();
        }
        v.detached
    }
    /// [`Db::get`] for a read: the same lazy expiry and access stamp, but
    /// no copy is kept for a view (the caller must not change the value).
    pub fn get_read(&mut self, hash: u64, key: &[u8], now_ms: i64) -> Option<&mut Entry> {
        self.lookup(hash, key, now_ms)
    }

    /// Bytes a view holds besides the database: its copies and records.
    pub fn view_memory_usage(&self) -> usize {
        self.view.as_ref().map_or(0, |v| {
            v.recorded.memory_usage()
                + v.preimages.iter().map(Entry::memory_usage).sum::<usize>()
                + v.preimages.capacity() * std::mem::size_of::<Entry>()
        })
    }

    /// Before a change to `key` (`insert`: one that may create it). The
    /// caller tests `self.view.is_some()` first, so the common case stays
    /// one branch and this stays out of line.
    #[cold]
    #[inline(never)]
    pub(crate) fn freeze_hook(&mut self, hash: u64, key: &[u8], insert: bool) {
        let Some(v) = self.view.as_deref_mut() else {
            return;
        };
        if v.detached.is_some() || v.cursor >= v.total {
            return;
        }
        let Some((pos, present)) = self.table.key_position(hash, key) else {
            return;
        };
        if pos < v.cursor || !(present || insert) || v.recorded.get(hash, key).is_some() {
            return;
        }
        if present {
            let e = self.table.get(hash, key).expect("located above");
            v.preimages.push(e.clone());
        }
        v.recorded.insert(hash, key, ());
    }

    /// During a view still walking the database's own table, move its
    /// contents into the view, leaving the database empty (for
    /// [`Db::clear`] and [`Db::take_contents`]); false when there is no
    /// such view to keep them for.
    pub(crate) fn detach_for_view(&mut self) -> bool {
        match self.view.as_deref() {
            Some(v) if v.detached.is_none() && v.cursor < v.total => {
                let old = self.move_contents();
                self.view.as_deref_mut().expect("checked").detached = Some(old);
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests;
