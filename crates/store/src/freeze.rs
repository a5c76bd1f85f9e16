//! A point-in-time view of a database while it keeps changing (fork-less
//! BGSAVE).

use crate::{Db, Entry};

impl Db {
    /// Start a point-in-time view; `index` is the database's number at this
    /// instant (it moves with the `Db` through SWAPDB).
    pub fn freeze(&mut self, index: usize) {
        let _ = index;
        todo!("helper F")
    }
    /// The number given to [`Db::freeze`], while frozen.
    pub fn frozen_index(&self) -> Option<usize> {
        todo!("helper F")
    }
    /// Visit up to `buckets` more buckets of the view, calling `f` for each
    /// key as it was at the freeze and not changed since (changed keys'
    /// old versions come from [`Db::take_preimages`]). True while more
    /// remains.
    pub fn freeze_step(&mut self, buckets: usize, f: impl FnMut(&Entry)) -> bool {
        let _ = (buckets, f);
        todo!("helper F")
    }
    /// Owned copies of keys as they were at the freeze, taken because a
    /// change reached them before the visit did; in the order taken.
    pub fn take_preimages(&mut self) -> Vec<Entry> {
        todo!("helper F")
    }
    /// End the view (finished or aborted).
    pub fn thaw(&mut self) {
        todo!("helper F")
    }
    /// [`Db::get`] for a read: the same lazy expiry and access stamp, but
    /// no copy is kept for a view (the caller must not change the value).
    pub fn get_read(&mut self, hash: u64, key: &[u8], now_ms: i64) -> Option<&mut Entry> {
        let _ = (hash, key, now_ms);
        todo!("helper F")
    }
}
