//! [`Table<V>`]: the raw table over boxed `(hash, key, value)` nodes, for
//! the large encodings of collections (hash fields, set members) whose
//! values are ordinary Rust values.

use std::alloc::Layout;
use std::marker::PhantomData;
use std::mem;
use std::num::NonZeroUsize;
use std::ptr::NonNull;

use crate::defrag::Mover;

use super::{Item, Loc, RawTable, addr_word, prefetch_ptr, word_addr};

/// Keys up to this long are stored inside the node.
const INLINE_KEY: usize = 22;

enum Key {
    Inline { len: u8, buf: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

impl Key {
    fn new(k: &[u8]) -> Key {
        if k.len() <= INLINE_KEY {
            let mut buf = [0; INLINE_KEY];
            buf[..k.len()].copy_from_slice(k);
            Key::Inline {
                len: k.len() as u8,
                buf,
            }
        } else {
            Key::Heap(k.into())
        }
    }
    #[inline(always)]
    fn as_slice(&self) -> &[u8] {
        match self {
            Key::Inline { len, buf } => &buf[..*len as usize],
            Key::Heap(b) => b,
        }
    }
    fn heap_bytes(&self) -> usize {
        match self {
            Key::Inline { .. } => 0,
            Key::Heap(b) => b.len(),
        }
    }
}

struct Node<V> {
    hash: u64,
    key: Key,
    value: V,
}

/// A `Box<Node<V>>` as a table slot word.
#[repr(transparent)]
pub(super) struct Boxed<V> {
    word: NonZeroUsize,
    _owns: PhantomData<Box<Node<V>>>,
}

impl<V> Boxed<V> {
    fn new(node: Node<V>) -> Self {
        let addr = addr_word(Box::into_raw(Box::new(node)) as usize);
        Boxed {
            word: NonZeroUsize::new(addr).expect("non-null box"),
            _owns: PhantomData,
        }
    }
    #[inline(always)]
    fn node(&self) -> &Node<V> {
        // SAFETY: the address bits are a live `Box<Node<V>>` this value owns.
        unsafe { &*(word_addr(self.word.get()) as *const Node<V>) }
    }
    #[inline(always)]
    fn node_mut(&mut self) -> &mut Node<V> {
        // SAFETY: as in `node`; `&mut self` makes the access unique.
        unsafe { &mut *(word_addr(self.word.get()) as *mut Node<V>) }
    }
    fn into_node(self) -> Node<V> {
        let p = word_addr(self.word.get()) as *mut Node<V>;
        mem::forget(self);
        // SAFETY: the box this value owned; `self` is forgotten, so it is
        // freed once, here.
        *unsafe { Box::from_raw(p) }
    }
}

impl<V> Boxed<V> {
    /// Offer the node and a long key's bytes to active defragmentation,
    /// and the value to `value`; the slot word follows a moved node.
    fn relocate(&mut self, m: &mut Mover<'_>, value: &mut impl FnMut(&mut V, &mut Mover<'_>)) {
        let node = NonNull::new(word_addr(self.word.get()) as *mut u8).expect("a node");
        // SAFETY: the node is a live `Box<Node<V>>` reached only through
        // this word, which `&mut self` holds; on a move the word points at
        // the copy at once, keeping the table's tag bits.
        if let Some(n) = unsafe { m.block(node, Layout::new::<Node<V>>()) } {
            let tag = self.word.get() & !word_addr(usize::MAX);
            self.word = NonZeroUsize::new(addr_word(n.as_ptr() as usize) | tag).expect("non-null");
        }
        let node = self.node_mut();
        if let Key::Heap(b) = &mut node.key {
            m.bytes(b);
        }
        value(&mut node.value, m);
    }
}

impl<V> Drop for Boxed<V> {
    fn drop(&mut self) {
        // SAFETY: the box this value owns, freed once.
        drop(unsafe { Box::from_raw(word_addr(self.word.get()) as *mut Node<V>) });
    }
}

// SAFETY: `Boxed` is `repr(transparent)` over a non-zero usize owning a
// box; box addresses are 8-aligned (bit 0 clear), and every access masks
// the address with `word_addr`, ignoring the tag bits.
unsafe impl<V> Item for Boxed<V> {
    #[inline(always)]
    fn key(&self) -> &[u8] {
        self.node().key.as_slice()
    }
    #[inline(always)]
    fn hash(&self) -> u64 {
        self.node().hash
    }
    /// Both cache lines a node may straddle (an 80-byte node in jemalloc's
    /// 80-byte class is only 16-byte aligned).
    #[inline(always)]
    fn prefetch(&self) {
        let p = word_addr(self.word.get()) as *const u8;
        prefetch_ptr(p);
        prefetch_ptr(p.wrapping_add(mem::size_of::<Node<V>>() - 1));
    }
}

/// A hash table of owned values keyed by byte strings.
pub struct Table<V> {
    raw: RawTable<Boxed<V>>,
    /// Bytes of keys too long to be inline.
    heap_keys: usize,
}

impl<V> Default for Table<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V> Table<V> {
    pub fn new() -> Self {
        Table {
            raw: RawTable::new(),
            heap_keys: 0,
        }
    }
    pub fn len(&self) -> usize {
        self.raw.len()
    }
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }
    pub fn buckets(&self) -> (usize, usize) {
        self.raw.buckets()
    }
    pub fn is_rehashing(&self) -> bool {
        self.raw.is_rehashing()
    }
    pub fn get(&self, hash: u64, key: &[u8]) -> Option<&V> {
        self.raw.get(hash, key).map(|b| &b.node().value)
    }
    /// Also gets the key as stored (for callers that need an owned copy).
    pub fn get_key_value(&self, hash: u64, key: &[u8]) -> Option<(&[u8], &V)> {
        self.raw.get(hash, key).map(|b| {
            let n = b.node();
            (n.key.as_slice(), &n.value)
        })
    }
    pub fn get_mut(&mut self, hash: u64, key: &[u8]) -> Option<&mut V> {
        self.raw.rehash_step(1);
        self.raw.get_mut(hash, key).map(|b| &mut b.node_mut().value)
    }
    pub fn locate(&self, hash: u64, key: &[u8]) -> Option<Loc> {
        self.raw.locate(hash, key)
    }
    pub fn at(&self, loc: Loc) -> &V {
        &self.raw.at(loc).node().value
    }
    pub fn at_mut(&mut self, loc: Loc) -> &mut V {
        &mut self.raw.at_mut(loc).node_mut().value
    }
    /// Insert or replace; returns the previous value.
    pub fn insert(&mut self, hash: u64, key: &[u8], value: V) -> Option<V> {
        if let Some(b) = self.raw.get_mut(hash, key) {
            return Some(mem::replace(&mut b.node_mut().value, value));
        }
        let key = Key::new(key);
        self.heap_keys += key.heap_bytes();
        self.raw
            .insert_new(hash, Boxed::new(Node { hash, key, value }));
        None
    }
    pub fn remove(&mut self, hash: u64, key: &[u8]) -> Option<V> {
        let node = self.raw.remove(hash, key)?.into_node();
        self.heap_keys -= node.key.heap_bytes();
        Some(node.value)
    }
    pub fn rehash_step(&mut self, n: usize) -> bool {
        self.raw.rehash_step(n)
    }
    /// One step of an active-defragmentation walk (a SCAN step from
    /// `cursor`; 0 when done): each node and long key is offered to
    /// the mover, each value to `value`.
    pub(crate) fn defrag_step(
        &mut self,
        cursor: u64,
        m: &mut Mover<'_>,
        mut value: impl FnMut(&mut V, &mut Mover<'_>),
    ) -> u64 {
        self.raw
            .defrag_scan(cursor, m, |b, m| b.relocate(m, &mut value))
    }
    pub fn prefetch(&self, hash: u64) {
        self.raw.prefetch(hash)
    }
    pub fn prefetch_batch(&self, hashes: &[u64]) {
        self.raw.prefetch_batch(hashes)
    }
    /// After [`Table::prefetch_batch`]: `f` on the value of each hash's
    /// node (matched by the stored hash), to prefetch what it points at.
    pub fn prefetch_values(&self, hashes: &[u64], mut f: impl FnMut(&V)) {
        self.raw
            .prefetch_values(hashes, |h, b| b.node().hash == h, |b| f(&b.node().value))
    }
    /// One SCAN step; see [`RawTable::scan`].
    pub fn scan<'a>(&'a self, cursor: u64, mut f: impl FnMut(&'a [u8], &'a V)) -> u64 {
        self.raw.scan(cursor, |b| {
            let n = b.node();
            f(n.key.as_slice(), &n.value)
        })
    }
    /// [`Table::scan`], also passing each entry's hash.
    pub fn scan_hashed<'a>(&'a self, cursor: u64, mut f: impl FnMut(u64, &'a [u8], &'a V)) -> u64 {
        self.raw.scan(cursor, |b| {
            let n = b.node();
            f(n.hash, n.key.as_slice(), &n.value)
        })
    }
    pub fn random(&self, seed: u64) -> Option<(&[u8], &V)> {
        self.random_hashed(seed).map(|(_, k, v)| (k, v))
    }
    pub fn random_hashed(&self, seed: u64) -> Option<(u64, &[u8], &V)> {
        self.raw.random(seed).map(|b| {
            let n = b.node();
            (n.hash, n.key.as_slice(), &n.value)
        })
    }
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &V)> {
        self.raw.iter().map(|b| {
            let n = b.node();
            (n.key.as_slice(), &n.value)
        })
    }
    pub fn iter_hashed(&self) -> impl Iterator<Item = (u64, &[u8], &V)> {
        self.raw.iter().map(|b| {
            let n = b.node();
            (n.hash, n.key.as_slice(), &n.value)
        })
    }
    pub fn clear(&mut self) {
        *self = Table::new();
    }
    /// Bytes the table holds (buckets + nodes + long keys), for INFO
    /// memory. Allocator rounding and whatever `V` owns are not counted.
    pub fn memory_usage(&self) -> usize {
        self.raw.memory_usage() + self.len() * mem::size_of::<Node<V>>() + self.heap_keys
    }
    pub fn overflow_buckets(&self) -> usize {
        self.raw.overflow_buckets()
    }
    #[cfg(test)]
    pub(super) fn raw(&self) -> &RawTable<Boxed<V>> {
        &self.raw
    }
    #[cfg(test)]
    pub(super) fn heap_keys(&self) -> usize {
        self.heap_keys
    }
}

#[cfg(test)]
pub(super) fn node_size<V>() -> usize {
    mem::size_of::<Node<V>>()
}
