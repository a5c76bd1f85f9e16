//! The hash table. PLACEHOLDER implementation over std's HashMap with the
//! final API, so the engine can be written against it; replaced by our own
//! table (cache-line buckets, tags, incremental resize, prefetch).

use std::collections::HashMap;

pub struct Table<V> {
    map: HashMap<Box<[u8]>, V>,
}

impl<V> Default for Table<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V> Table<V> {
    pub fn new() -> Self {
        Table {
            map: HashMap::new(),
        }
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    pub fn get(&self, _hash: u64, key: &[u8]) -> Option<&V> {
        self.map.get(key)
    }
    pub fn get_mut(&mut self, _hash: u64, key: &[u8]) -> Option<&mut V> {
        self.map.get_mut(key)
    }
    /// Insert or replace; returns the previous value.
    pub fn insert(&mut self, _hash: u64, key: &[u8], value: V) -> Option<V> {
        self.map.insert(key.into(), value)
    }
    pub fn remove(&mut self, _hash: u64, key: &[u8]) -> Option<V> {
        self.map.remove(key)
    }
    /// Hint that `hash` will be looked up soon: pull its bucket into cache.
    pub fn prefetch(&self, _hash: u64) {}
    /// Prefetch the buckets of every hash, then the entries whose tags match.
    pub fn prefetch_batch(&self, _hashes: &[u64]) {}
    /// One SCAN step: calls `f` for some entries and returns the next cursor
    /// (0 when done). Every key present for the whole scan is visited at
    /// least once, across resizes.
    pub fn scan(&self, cursor: u64, mut f: impl FnMut(&[u8], &V)) -> u64 {
        let _ = cursor;
        for (k, v) in &self.map {
            f(k, v);
        }
        0
    }
    /// A pseudo-random entry, `seed` choosing it.
    pub fn random(&self, seed: u64) -> Option<(&[u8], &V)> {
        if self.map.is_empty() {
            return None;
        }
        let i = (seed % self.map.len() as u64) as usize;
        self.map.iter().nth(i).map(|(k, v)| (&**k, v))
    }
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &V)> {
        self.map.iter().map(|(k, v)| (&**k, v))
    }
    pub fn clear(&mut self) {
        self.map.clear()
    }
    /// Bytes the table itself holds (buckets + keys), for INFO memory.
    pub fn memory_usage(&self) -> usize {
        self.map.capacity() * 32
    }
}
