//! The hash table behind every database.
//!
//! ```text
//!  tabs[0] (and tabs[1] while resizing): [Bucket; 2^k], each 64 bytes
//!  ┌─────────┬──────────┬───────────────────────────┬───────┐
//!  │present:8│ tags 6×8 │ 6 × Option<Box<Node>>     │ child │ ─► overflow Bucket ─► ...
//!  └─────────┴──────────┴───────────────────────────┴───────┘
//!                              │
//!                              ▼
//!                  Node { hash: u64, key: ≤22 bytes inline | Box<[u8]>, value: V }
//! ```
//!
//! * The caller supplies the 64-bit hash ([`crate::hash_key`]); the low bits
//!   pick the bucket, the top byte is the slot's tag. A lookup compares six
//!   tags inside the bucket's cache line and only dereferences nodes whose tag
//!   matches (1/256 false positives per occupied slot), so a hit touches the
//!   bucket line and the node line: two cache misses. Keys up to 22 bytes live
//!   inside the node; longer ones cost a third line.
//! * Collisions past six slots chain a child bucket. The table grows (×2)
//!   above 4.5 entries per bucket on average, so chains are rare and short.
//!   Chaining (rather than probing into neighbour buckets) keeps every key
//!   inside its home bucket index, which is what makes the SCAN cursor
//!   simple and exact across resizes.
//! * Resizing is incremental, as in Valkey's dict: a second bucket array is
//!   allocated (zeroed lazily by the OS) and every mutating call moves one
//!   non-empty bucket chain (up to 16 empty ones are skipped), so no single
//!   operation pays for a full rehash. Nodes are boxed, so moving one is a
//!   pointer move and the stored hash picks its new bucket. The table shrinks
//!   when it falls below 0.75 entries per bucket.
//! * SCAN uses Valkey's reverse-binary cursor: incrementing the *reversed*
//!   bucket index means that after a resize the positions already visited map
//!   to the same set of bucket indices in the new size, so keys present for
//!   the whole scan are returned at least once (possibly twice).
//!
//! Measured on this 2-core VM (shared with parallel builds, so ±20%), 16-byte
//! keys, u64 values, `crates/store/benches/table.rs`:
//!
//! ```text
//! RINGKV_BENCH_SIZES=1000000  cargo bench -p ringkv-store --bench table -- --warm-up-time 1 --measurement-time 3
//! RINGKV_BENCH_SIZES=10000000 cargo bench -p ringkv-store --bench table -- --warm-up-time 1 --measurement-time 3
//!
//!                       ns per lookup (median of 16-lookup batches / 16)
//!                        1M keys    10M keys
//! ringkv (hash given)      75         145
//! ringkv + hash_key        104        202
//! ringkv prefetch_batch16  31         147
//! hashbrown (foldhash)     47         189
//!
//! churn (insert new + remove oldest), ns per pair
//! ringkv                   488        1030
//! hashbrown                463        1624
//!
//! fill from empty          1M: ringkv 387 ns/insert, worst single insert 1.1 ms;
//!                              hashbrown 448 ns/insert, worst 106 ms (its rehash)
//!                          10M: ringkv 528 ns/insert, hashbrown 1293 ns/insert,
//!                              worst 3.2 s (its rehash) on this VM
//! memory_usage             1M: 55 MB, 10M: 782 MB
//! ```
//!
//! The 10M run was made once, before the bucket arrays were switched to
//! `calloc` (see `Buckets`); the layout was the same, so the lookup and
//! churn numbers stand, but its ringkv "worst single insert" (727 ms) was
//! the eager zeroing that the switch removed: a diagnostic 10M fill after it
//! showed no insert slower than ~9 ms besides VM scheduling spikes.
//! Unbatched lookups at 1M lose to hashbrown, likely because its 1 MB of control
//! bytes stay in cache while our 16 MB of buckets do not; at 10M neither
//! fits, and our two dependent misses beat its three. Prefetching a batch
//! overlaps the misses: 2.4x at 1M. At 10M it did not help in this run;
//! the likely cause is TLB misses on 4 KB pages over a 256 MB bucket array
//! (not investigated further).

use std::alloc::{self, Layout};
use std::iter;
use std::marker::PhantomData;
use std::mem;
use std::ptr::NonNull;

/// Slots per bucket: 1 presence byte + 6 tags + 6 pointers + child = 64 bytes.
const SLOTS: usize = 6;
const FULL: u8 = (1 << SLOTS) - 1;
/// Smallest non-empty table.
const MIN_BUCKETS: usize = 4;
/// Empty buckets one rehash step may skip besides the one it moves.
const EMPTY_VISITS: usize = 16;
/// Keys up to this long are stored inside the node.
const INLINE_KEY: usize = 22;

#[inline(always)]
fn tag_of(hash: u64) -> u8 {
    (hash >> 56) as u8
}

#[inline(always)]
fn index(hash: u64, buckets: usize) -> usize {
    hash as usize & (buckets - 1)
}

/// Grow when the average bucket holds more than 4.5 entries (75% of slots).
#[inline]
fn over_grow_limit(len: usize, buckets: usize) -> bool {
    len * 4 > buckets * SLOTS * 3
}

/// Buckets for `len` entries at about 2.25 per bucket after a shrink, so the
/// table sits well between the shrink and grow thresholds.
fn buckets_for(len: usize) -> usize {
    let want = (len * 8).div_ceil(SLOTS * 3);
    want.next_power_of_two().max(MIN_BUCKETS)
}

/// Prefetch the cache line at `p` (a hint: any address is fine).
#[inline(always)]
pub fn prefetch_ptr<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: a prefetch is only a hint to the cache: it never faults and
        // does not access memory in the language's sense, so any address
        // (even a dangling one) is allowed. SSE is baseline on x86_64.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Key equality without a call into libc's `memcmp` for the common short
/// keys (most lookups compare exactly one key, the right one): 8..=16 bytes
/// are two overlapping word compares.
#[inline(always)]
fn key_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if (8..=16).contains(&n) {
        let w = |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().unwrap());
        w(a, 0) == w(b, 0) && w(a, n - 8) == w(b, n - 8)
    } else {
        a == b
    }
}

/// Prefetch both cache lines a node may straddle (an 80-byte node in
/// jemalloc's 80-byte class is only 16-byte aligned).
#[inline(always)]
fn prefetch_node<V>(n: &Node<V>) {
    let p = (n as *const Node<V>).cast::<u8>();
    prefetch_ptr(p);
    prefetch_ptr(p.wrapping_add(mem::size_of::<Node<V>>() - 1));
}

/// Where an entry sits: valid until the table is next changed (any `&mut
/// self` call), see [`Table::locate`].
#[derive(Clone, Copy, Debug)]
pub struct Loc {
    tab: usize,
    bucket: usize,
    depth: usize,
    slot: usize,
}

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

#[repr(C, align(64))]
struct Bucket<V> {
    /// Bit i set = slot i holds a node.
    present: u8,
    tags: [u8; SLOTS],
    slots: [Option<Box<Node<V>>>; SLOTS],
    /// Overflow chain. Invariant: an empty bucket has no child (removal pulls
    /// the child up), so "primary bucket empty" means "index empty".
    child: Option<Box<Bucket<V>>>,
}

const _: () = assert!(mem::size_of::<Bucket<u64>>() == 64);
const _: () = assert!(mem::size_of::<Bucket<[u8; 200]>>() == 64);

impl<V> Bucket<V> {
    fn new() -> Self {
        Bucket {
            present: 0,
            tags: [0; SLOTS],
            slots: [const { None }; SLOTS],
            child: None,
        }
    }

    /// Slots whose tag equals `tag`, as a bit mask.
    #[inline(always)]
    fn matches(&self, tag: u8) -> u32 {
        let mut m = 0u32;
        for (i, &t) in self.tags.iter().enumerate() {
            m |= ((t == tag) as u32) << i;
        }
        m & self.present as u32
    }

    #[inline(always)]
    fn find(&self, tag: u8, hash: u64, key: &[u8]) -> Option<usize> {
        let mut m = self.matches(tag);
        while m != 0 {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            if let Some(n) = &self.slots[i]
                && n.hash == hash
                && key_eq(n.key.as_slice(), key)
            {
                return Some(i);
            }
        }
        None
    }

    fn chain(&self) -> impl Iterator<Item = &Bucket<V>> {
        iter::successors(Some(self), |b| b.child.as_deref())
    }

    fn nodes(&self) -> impl Iterator<Item = &Node<V>> {
        self.chain()
            .flat_map(|b| b.slots.iter().flatten().map(|n| &**n))
    }
}

fn chain_get<'a, V>(mut b: &'a Bucket<V>, hash: u64, key: &[u8]) -> Option<&'a Node<V>> {
    let tag = tag_of(hash);
    loop {
        if let Some(i) = b.find(tag, hash, key) {
            return b.slots[i].as_deref();
        }
        b = b.child.as_deref()?;
    }
}

fn chain_get_mut<'a, V>(
    mut b: &'a mut Bucket<V>,
    hash: u64,
    key: &[u8],
) -> Option<&'a mut Node<V>> {
    let tag = tag_of(hash);
    loop {
        if let Some(i) = b.find(tag, hash, key) {
            return b.slots[i].as_deref_mut();
        }
        b = b.child.as_deref_mut()?;
    }
}

/// Put `node` in the first free slot of the chain. Returns true if an
/// overflow bucket had to be allocated.
fn chain_push<V>(mut b: &mut Bucket<V>, node: Box<Node<V>>) -> bool {
    let mut grew = false;
    loop {
        if b.present != FULL {
            let i = (!b.present).trailing_zeros() as usize;
            b.tags[i] = tag_of(node.hash);
            b.slots[i] = Some(node);
            b.present |= 1 << i;
            return grew;
        }
        b = b.child.get_or_insert_with(|| {
            grew = true;
            Box::new(Bucket::new())
        });
    }
}

/// Remove the node for `key` from the chain starting at `b`, keeping the
/// no-empty-bucket-with-child invariant. `freed` counts overflow buckets
/// released.
fn chain_remove<V>(
    b: &mut Bucket<V>,
    tag: u8,
    hash: u64,
    key: &[u8],
    freed: &mut usize,
) -> Option<Box<Node<V>>> {
    let node = if let Some(i) = b.find(tag, hash, key) {
        b.present &= !(1 << i);
        b.slots[i].take()
    } else {
        let c = b.child.as_deref_mut()?;
        let n = chain_remove(c, tag, hash, key, freed)?;
        if c.present == 0 {
            // `c` pulled up its own child if it had one, so an empty `c` is a
            // chain end.
            b.child = None;
            *freed += 1;
        }
        Some(n)
    };
    if b.present == 0
        && let Some(c) = b.child.take()
    {
        *b = *c;
        *freed += 1;
    }
    node
}

/// Move every node of `b` (not its chain) into `to`. Returns overflow
/// buckets allocated there.
fn spill<V>(b: &mut Bucket<V>, to: &mut [Bucket<V>]) -> usize {
    // Each node's hash is read to place it: let the misses overlap.
    for n in b.slots.iter().flatten() {
        prefetch_ptr(&**n);
    }
    let mut grown = 0;
    for slot in &mut b.slots {
        if let Some(node) = slot.take() {
            let i = index(node.hash, to.len());
            grown += chain_push(&mut to[i], node) as usize;
        }
    }
    b.present = 0;
    grown
}

/// A zeroed, 64-byte aligned bucket array.
///
/// Not a `Box<[Bucket]>`: asking the allocator for 64-byte alignment makes
/// the system allocator use `posix_memalign` plus a memset of the whole
/// block (measured: 333 ms inside one insert when a 10M-key table doubles).
/// With the allocator's natural alignment `alloc_zeroed` is `calloc`, which
/// gets fresh zero pages from the OS lazily, so the cost is paid page by
/// page as the incremental rehash walks in. We over-allocate one bucket and
/// align inside the block.
struct Buckets<V> {
    /// First bucket, 64-byte aligned; dangling when `len == 0`.
    ptr: NonNull<Bucket<V>>,
    len: usize,
    /// What the allocator returned (null when `len == 0`).
    base: *mut u8,
    _owns: PhantomData<Bucket<V>>,
}

// SAFETY: `Buckets` owns its buckets exactly like a `Box<[Bucket<V>]>`
// would; the raw pointers are never shared outside it.
unsafe impl<V: Send> Send for Buckets<V> {}
// SAFETY: as above; `&Buckets` only hands out `&[Bucket<V>]`.
unsafe impl<V: Sync> Sync for Buckets<V> {}

impl<V> Buckets<V> {
    fn empty() -> Self {
        Buckets {
            ptr: NonNull::dangling(),
            len: 0,
            base: std::ptr::null_mut(),
            _owns: PhantomData,
        }
    }

    fn layout(n: usize) -> Layout {
        let size = n
            .checked_add(1)
            .and_then(|b| b.checked_mul(mem::size_of::<Bucket<V>>()))
            .expect("hash table size overflows");
        Layout::from_size_align(size, 16).expect("hash table size overflows")
    }

    fn zeroed(n: usize) -> Self {
        if n == 0 {
            return Self::empty();
        }
        let layout = Self::layout(n);
        // SAFETY: `layout` has a non-zero size.
        let base = unsafe { alloc::alloc_zeroed(layout) };
        if base.is_null() {
            alloc::handle_alloc_error(layout);
        }
        let off = base.align_offset(mem::align_of::<Bucket<V>>());
        assert!(off < mem::size_of::<Bucket<V>>());
        // SAFETY: `off` is less than the one spare bucket we allocated, so
        // `base + off` and the `n` buckets after it lie inside the block.
        let first = unsafe { base.add(off) }.cast::<Bucket<V>>();
        Buckets {
            ptr: NonNull::new(first).expect("non-null allocation"),
            len: n,
            base,
            _owns: PhantomData,
        }
    }
}

impl<V> std::ops::Deref for Buckets<V> {
    type Target = [Bucket<V>];
    fn deref(&self) -> &[Bucket<V>] {
        // SAFETY: `ptr` is 64-byte aligned and points at `len` initialised
        // buckets inside our block (all-zero bytes are a valid Bucket: the
        // u8 fields are 0 = empty and `Option<Box<_>>` is guaranteed to
        // represent `None` as a null pointer); for `len == 0` it is dangling
        // but aligned, which an empty slice allows.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<V> std::ops::DerefMut for Buckets<V> {
    fn deref_mut(&mut self) -> &mut [Bucket<V>] {
        // SAFETY: as in `deref`, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<V> Drop for Buckets<V> {
    fn drop(&mut self) {
        if self.len == 0 {
            return;
        }
        // SAFETY: the buckets are initialised (see `deref`) and never used
        // again; then the block is freed with the layout it was allocated
        // with.
        unsafe {
            std::ptr::drop_in_place(std::ptr::slice_from_raw_parts_mut(
                self.ptr.as_ptr(),
                self.len,
            ));
            alloc::dealloc(self.base, Self::layout(self.len));
        }
    }
}

#[inline]
fn splitmix(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// SCAN's cursor step: increment the bits of `v` inside `mask`, counting
/// from the top bit down.
#[inline]
fn next_cursor(v: u64, mask: u64) -> u64 {
    (v | !mask).reverse_bits().wrapping_add(1).reverse_bits()
}

pub struct Table<V> {
    /// `tabs[0]` is the table; `tabs[1]` is the resize target (empty when
    /// not resizing).
    tabs: [Buckets<V>; 2],
    /// While resizing: buckets of `tabs[0]` below this index are moved.
    rehash: Option<usize>,
    len: usize,
    /// Overflow buckets allocated (for memory_usage).
    children: usize,
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
            tabs: [Buckets::empty(), Buckets::empty()],
            rehash: None,
            len: 0,
            children: 0,
            heap_keys: 0,
        }
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Bucket count of the main table (and of the resize target), for tests
    /// and DEBUG HTSTATS-like introspection.
    pub fn buckets(&self) -> (usize, usize) {
        (self.tabs[0].len(), self.tabs[1].len())
    }
    pub fn is_rehashing(&self) -> bool {
        self.rehash.is_some()
    }

    /// The index of `hash`'s home bucket in table `tab`, if that table may
    /// hold it: not while it is empty, nor in the old table once its bucket
    /// was moved (moved buckets are empty; skipping them saves a cache miss).
    #[inline(always)]
    fn home(&self, tab: usize, hash: u64) -> Option<usize> {
        let n = self.tabs[tab].len();
        if n == 0 {
            return None;
        }
        let i = index(hash, n);
        match self.rehash {
            Some(r) if tab == 0 && i < r => None,
            _ => Some(i),
        }
    }

    /// The home bucket of `hash` in each table that may hold it.
    #[inline(always)]
    fn homes(&self, hash: u64) -> impl Iterator<Item = &Bucket<V>> {
        let first = self.home(0, hash).map(|i| &self.tabs[0][i]);
        let second = self.home(1, hash).map(|i| &self.tabs[1][i]);
        first.into_iter().chain(second)
    }

    pub fn get(&self, hash: u64, key: &[u8]) -> Option<&V> {
        self.get_node(hash, key).map(|n| &n.value)
    }

    #[inline]
    fn get_node(&self, hash: u64, key: &[u8]) -> Option<&Node<V>> {
        if self.len == 0 {
            return None;
        }
        self.homes(hash).find_map(|b| chain_get(b, hash, key))
    }

    /// Also gets the key as stored (for callers that need an owned copy).
    pub fn get_key_value(&self, hash: u64, key: &[u8]) -> Option<(&[u8], &V)> {
        self.get_node(hash, key)
            .map(|n| (n.key.as_slice(), &n.value))
    }

    pub fn get_mut(&mut self, hash: u64, key: &[u8]) -> Option<&mut V> {
        self.rehash_step(1);
        self.find_mut(hash, key).map(|n| &mut n.value)
    }

    fn find_mut(&mut self, hash: u64, key: &[u8]) -> Option<&mut Node<V>> {
        if self.len == 0 {
            return None;
        }
        let (h0, h1) = (self.home(0, hash), self.home(1, hash));
        let [t0, t1] = &mut self.tabs;
        if let Some(i) = h0
            && let Some(n) = chain_get_mut(&mut t0[i], hash, key)
        {
            return Some(n);
        }
        chain_get_mut(&mut t1[h1?], hash, key)
    }

    /// Where `key` is, for a caller that must look at the entry before
    /// deciding whether to change or remove it (one key comparison instead
    /// of two lookups). Valid until the next `&mut self` call.
    #[inline]
    pub fn locate(&self, hash: u64, key: &[u8]) -> Option<Loc> {
        if self.len == 0 {
            return None;
        }
        let tag = tag_of(hash);
        for tab in 0..2 {
            let Some(bucket) = self.home(tab, hash) else {
                continue;
            };
            let mut b = &self.tabs[tab][bucket];
            let mut depth = 0;
            loop {
                if let Some(slot) = b.find(tag, hash, key) {
                    return Some(Loc {
                        tab,
                        bucket,
                        depth,
                        slot,
                    });
                }
                match b.child.as_deref() {
                    Some(c) => b = c,
                    None => break,
                }
                depth += 1;
            }
        }
        None
    }

    /// The value at a [`Table::locate`] result. Panics if the table has
    /// changed since and the place is gone.
    #[inline]
    pub fn at(&self, loc: Loc) -> &V {
        let mut b = &self.tabs[loc.tab][loc.bucket];
        for _ in 0..loc.depth {
            b = b.child.as_deref().expect("stale Loc");
        }
        &b.slots[loc.slot].as_deref().expect("stale Loc").value
    }

    /// [`Table::at`], mutable.
    #[inline]
    pub fn at_mut(&mut self, loc: Loc) -> &mut V {
        let mut b = &mut self.tabs[loc.tab][loc.bucket];
        for _ in 0..loc.depth {
            b = b.child.as_deref_mut().expect("stale Loc");
        }
        &mut b.slots[loc.slot].as_deref_mut().expect("stale Loc").value
    }

    /// Insert or replace; returns the previous value.
    pub fn insert(&mut self, hash: u64, key: &[u8], value: V) -> Option<V> {
        // Shrinking into a smaller table: move faster so it cannot fill up
        // before the move is done.
        let steps = if self.tabs[1].len() < self.tabs[0].len() {
            4
        } else {
            1
        };
        self.rehash_step(steps);
        if let Some(n) = self.find_mut(hash, key) {
            return Some(mem::replace(&mut n.value, value));
        }
        self.make_room();
        let key = Key::new(key);
        self.heap_keys += key.heap_bytes();
        let node = Box::new(Node { hash, key, value });
        let t = &mut self.tabs[self.rehash.is_some() as usize];
        let i = index(hash, t.len());
        if chain_push(&mut t[i], node) {
            self.children += 1;
        }
        self.len += 1;
        None
    }

    /// Before adding one entry: allocate, start a grow, or (only if a burst
    /// of inserts outran a shrink) finish the current resize.
    fn make_room(&mut self) {
        if self.tabs[0].is_empty() {
            self.tabs[0] = Buckets::zeroed(MIN_BUCKETS);
            return;
        }
        if self.rehash.is_some() {
            if self.len < self.tabs[1].len() * SLOTS {
                return;
            }
            while self.rehash.is_some() {
                self.rehash_step(usize::MAX);
            }
        }
        let n = self.tabs[0].len();
        if over_grow_limit(self.len + 1, n) {
            self.start_resize(n * 2);
        }
    }

    fn start_resize(&mut self, buckets: usize) {
        debug_assert!(self.rehash.is_none());
        self.tabs[1] = Buckets::zeroed(buckets);
        self.rehash = Some(0);
    }

    pub fn remove(&mut self, hash: u64, key: &[u8]) -> Option<V> {
        self.remove_entry(hash, key).map(|(_, v)| v)
    }

    fn remove_entry(&mut self, hash: u64, key: &[u8]) -> Option<(Key, V)> {
        self.rehash_step(1);
        if self.len == 0 {
            return None;
        }
        let tag = tag_of(hash);
        let mut freed = 0;
        let mut node = None;
        let rehash = self.rehash;
        for (t, tab) in self.tabs.iter_mut().enumerate() {
            if tab.is_empty() {
                continue;
            }
            let i = index(hash, tab.len());
            if t == 0 && rehash.is_some_and(|r| i < r) {
                continue;
            }
            node = chain_remove(&mut tab[i], tag, hash, key, &mut freed);
            if node.is_some() {
                break;
            }
        }
        self.children -= freed;
        let node = node?;
        self.len -= 1;
        self.heap_keys -= node.key.heap_bytes();
        self.maybe_shrink();
        let Node { key, value, .. } = *node;
        Some((key, value))
    }

    fn maybe_shrink(&mut self) {
        let n = self.tabs[0].len();
        if self.rehash.is_none() && n > MIN_BUCKETS && self.len * 8 < n * SLOTS {
            let target = buckets_for(self.len);
            if target < n {
                self.start_resize(target);
            }
        }
    }

    /// Move up to `n` non-empty bucket chains of a resize in progress
    /// (skipping up to 16 empty buckets each). Returns true while a resize
    /// is still in progress. The engine's cron may call this to finish
    /// resizes of idle databases.
    pub fn rehash_step(&mut self, n: usize) -> bool {
        let Some(mut r) = self.rehash else {
            return false;
        };
        let [t0, t1] = &mut self.tabs;
        let n0 = t0.len();
        let mut moved = 0;
        let mut empty = 0;
        while r < n0 && moved < n {
            if t0[r].present == 0 {
                r += 1;
                empty += 1;
                if empty > EMPTY_VISITS.saturating_mul(n) {
                    break;
                }
                continue;
            }
            let mut head = mem::replace(&mut t0[r], Bucket::new());
            self.children += spill(&mut head, t1);
            let mut next = head.child.take();
            while let Some(mut c) = next {
                self.children += spill(&mut c, t1);
                next = c.child.take();
                self.children -= 1;
            }
            r += 1;
            moved += 1;
        }
        if r >= n0 {
            self.tabs[0] = mem::replace(&mut self.tabs[1], Buckets::empty());
            self.rehash = None;
            // Deletes during a shrink may call for another one; without this
            // a table that stops seeing deletes would keep the larger size.
            self.maybe_shrink();
            self.rehash.is_some()
        } else {
            self.rehash = Some(r);
            self.prefetch_rehash(r);
            true
        }
    }

    /// The next rehash step will most likely move bucket `r` of the old
    /// array: start the misses it would wait on now, so that they overlap
    /// with the work between the two steps. The nodes (the step reads each
    /// one's hash) come from `r`'s line, which the step before prefetched;
    /// then the two buckets of the new array they can go to, and the line
    /// of the bucket after `r`, for the step after next.
    fn prefetch_rehash(&self, r: usize) {
        let [t0, t1] = &self.tabs;
        let Some(b) = t0.get(r) else { return };
        if t1.is_empty() {
            return;
        }
        for n in b.slots.iter().flatten() {
            prefetch_ptr(&**n);
        }
        if let Some(c) = &b.child {
            prefetch_ptr(&**c);
        }
        let m = t1.len() - 1;
        prefetch_ptr(&t1[r & m]);
        prefetch_ptr(&t1[(r + t0.len()) & m]);
        if let Some(next) = t0.get(r + 1) {
            prefetch_ptr(next);
        }
    }

    /// Hint that `hash` will be looked up soon: pull its bucket(s) into cache.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        for b in self.homes(hash) {
            prefetch_ptr(b);
        }
    }

    /// Prefetch the buckets of every hash, then the nodes whose tags match
    /// (by then the first prefetches have had time to land).
    pub fn prefetch_batch(&self, hashes: &[u64]) {
        if self.len == 0 {
            return;
        }
        for &h in hashes {
            self.prefetch(h);
        }
        for &h in hashes {
            self.prefetch_nodes(h);
        }
    }

    /// Once the buckets of `hash` ([`Table::prefetch`]) are expected in
    /// cache: the nodes in them whose tags match (both lines of each), and
    /// the first overflow bucket.
    #[inline]
    pub fn prefetch_nodes(&self, hash: u64) {
        if self.len == 0 {
            return;
        }
        let tag = tag_of(hash);
        for b in self.homes(hash) {
            let mut m = b.matches(tag);
            while m != 0 {
                let i = m.trailing_zeros() as usize;
                m &= m - 1;
                if let Some(n) = &b.slots[i] {
                    prefetch_node(n);
                }
            }
            if let Some(c) = &b.child {
                prefetch_ptr(&**c);
            }
        }
    }

    /// Third prefetch pass: for each hash, the value of the first node in
    /// its home buckets whose stored hash matches (the node is expected
    /// in cache from [`Table::prefetch_batch`]), handed to `f` to prefetch
    /// what the value points at. Hash-only matching: a collision costs a
    /// useless prefetch, never a wrong result.
    pub fn prefetch_values(&self, hashes: &[u64], mut f: impl FnMut(&V)) {
        if self.len == 0 {
            return;
        }
        for &h in hashes {
            let tag = tag_of(h);
            'found: for b in self.homes(h) {
                let mut m = b.matches(tag);
                while m != 0 {
                    let i = m.trailing_zeros() as usize;
                    m &= m - 1;
                    if let Some(n) = &b.slots[i]
                        && n.hash == h
                    {
                        f(&n.value);
                        break 'found;
                    }
                }
            }
        }
    }

    /// One SCAN step: calls `f` for some entries and returns the next cursor
    /// (0 when done). Every key present for the whole scan is visited at
    /// least once, across resizes.
    pub fn scan<'a>(&'a self, cursor: u64, mut f: impl FnMut(&'a [u8], &'a V)) -> u64 {
        self.scan_hashed(cursor, |_, k, v| f(k, v))
    }

    /// [`Table::scan`], also passing each entry's hash.
    pub fn scan_hashed<'a>(&'a self, cursor: u64, mut f: impl FnMut(u64, &'a [u8], &'a V)) -> u64 {
        if self.len == 0 {
            return 0;
        }
        let mut emit = |b: &'a Bucket<V>| {
            for n in b.nodes() {
                f(n.hash, n.key.as_slice(), &n.value)
            }
        };
        let mut v = cursor;
        if self.rehash.is_none() {
            let t = &self.tabs[0];
            let m = t.len() as u64 - 1;
            emit(&t[(v & m) as usize]);
            return next_cursor(v, m);
        }
        let (small, large) = if self.tabs[0].len() <= self.tabs[1].len() {
            (&self.tabs[0], &self.tabs[1])
        } else {
            (&self.tabs[1], &self.tabs[0])
        };
        let m0 = small.len() as u64 - 1;
        let m1 = large.len() as u64 - 1;
        emit(&small[(v & m0) as usize]);
        // Every bucket of the large table that the small bucket splits into.
        loop {
            emit(&large[(v & m1) as usize]);
            v = next_cursor(v, m1);
            if v & (m0 ^ m1) == 0 {
                break;
            }
        }
        v
    }

    /// A pseudo-random entry, `seed` choosing it. Picks a random (bucket,
    /// slot) over the bucket and its first overflow bucket and retries on
    /// empty slots, so entries are equally likely regardless of how full
    /// their bucket is; falls back to a walk from a random bucket.
    pub fn random(&self, seed: u64) -> Option<(&[u8], &V)> {
        self.random_hashed(seed).map(|(_, k, v)| (k, v))
    }

    /// [`Table::random`] with the entry's hash.
    pub fn random_hashed(&self, seed: u64) -> Option<(u64, &[u8], &V)> {
        if self.len == 0 {
            return None;
        }
        let mut s = seed;
        let n0 = self.tabs[0].len();
        let total = (n0 + self.tabs[1].len()) as u64;
        let bucket = |i: usize| {
            if i < n0 {
                &self.tabs[0][i]
            } else {
                &self.tabs[1][i - n0]
            }
        };
        for _ in 0..64 {
            let b = bucket((splitmix(&mut s) % total) as usize);
            let pos = (splitmix(&mut s) % (2 * SLOTS as u64)) as usize;
            let b = if pos < SLOTS {
                Some(b)
            } else {
                b.child.as_deref()
            };
            if let Some(n) = b.and_then(|b| b.slots[pos % SLOTS].as_deref()) {
                return Some((n.hash, n.key.as_slice(), &n.value));
            }
        }
        let start = (splitmix(&mut s) % total) as usize;
        let total = total as usize;
        for k in 0..total {
            let b = bucket((start + k) % total);
            if b.present != 0 {
                let count = b.nodes().count() as u64;
                let pick = (splitmix(&mut s) % count) as usize;
                return b
                    .nodes()
                    .nth(pick)
                    .map(|n| (n.hash, n.key.as_slice(), &n.value));
            }
        }
        None
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &V)> {
        self.tabs
            .iter()
            .flat_map(|t| t.iter())
            .flat_map(|b| b.nodes())
            .map(|n| (n.key.as_slice(), &n.value))
    }

    /// Like [`Table::iter`] with each entry's hash.
    pub fn iter_hashed(&self) -> impl Iterator<Item = (u64, &[u8], &V)> {
        self.tabs
            .iter()
            .flat_map(|t| t.iter())
            .flat_map(|b| b.nodes())
            .map(|n| (n.hash, n.key.as_slice(), &n.value))
    }

    pub fn clear(&mut self) {
        *self = Table::new();
    }

    /// Bytes the table itself holds (buckets + nodes + long keys), for INFO
    /// memory. Allocator rounding and whatever `V` owns are not counted.
    pub fn memory_usage(&self) -> usize {
        let buckets = self.tabs[0].len() + self.tabs[1].len() + self.children;
        buckets * mem::size_of::<Bucket<V>>()
            + self.len * mem::size_of::<Node<V>>()
            + self.heap_keys
    }

    /// Overflow buckets currently chained (test and tuning aid).
    pub fn overflow_buckets(&self) -> usize {
        self.children
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash_key;
    use proptest::prelude::*;
    use std::collections::{HashMap, HashSet};

    impl<V> Table<V> {
        /// Every structural invariant the code relies on.
        fn check(&self) {
            let mut len = 0;
            let mut children = 0;
            let mut heap = 0;
            for (t, tab) in self.tabs.iter().enumerate() {
                assert!(tab.is_empty() || tab.len().is_power_of_two());
                if t == 1 {
                    assert_eq!(tab.is_empty(), self.rehash.is_none());
                }
                for (i, head) in tab.iter().enumerate() {
                    if t == 0 && self.rehash.is_some_and(|r| i < r) {
                        assert!(head.present == 0 && head.child.is_none(), "moved bucket");
                    }
                    for (depth, b) in head.chain().enumerate() {
                        children += (depth > 0) as usize;
                        assert!(b.present != 0 || (depth == 0 && b.child.is_none()));
                        for s in 0..SLOTS {
                            let bit = b.present >> s & 1 == 1;
                            assert_eq!(bit, b.slots[s].is_some());
                            if let Some(n) = &b.slots[s] {
                                assert_eq!(b.tags[s], tag_of(n.hash));
                                assert_eq!(index(n.hash, tab.len()), i);
                                len += 1;
                                heap += n.key.heap_bytes();
                            }
                        }
                    }
                }
            }
            assert_eq!(len, self.len);
            assert_eq!(children, self.children);
            assert_eq!(heap, self.heap_keys);
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
        assert!(n as usize * 4 <= b0 * SLOTS * 3, "grow limit respected");
        assert!(
            t.overflow_buckets() < b0 / 10,
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
        assert!(t.memory_usage() > 10_000 * mem::size_of::<Node<u64>>());
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
}
