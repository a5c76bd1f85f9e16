//! The hash table behind every database and every large collection.
//!
//! ```text
//!  tabs[0] (and tabs[1] while resizing): [Bucket; 2^k], each one 64-byte line
//!  ┌──────────┬──────────┬─────┬────────────────────────┐
//!  │ tag│item │ tag│item │ ... │ tag│item  or  child|1  │ ─► overflow Bucket ─► ...
//!  └──────────┴──────────┴─────┴────────────────────────┘
//!      8 words: bits 48..64 = the tag (the hash's top 16 bits, lowest set),
//!      bits 0..48 = the item
//! ```
//!
//! * An item ([`Item`]) is one machine word that owns a heap node holding
//!   its key: the keyspace's [`crate::Entry`] (key, value and metadata in
//!   one allocation) or [`Table`]'s boxed `(hash, key, value)` node. User
//!   space addresses on x86-64 and aarch64 Linux fit in 47 bits, so the
//!   word's top 16 bits carry the slot's tag: the table costs 8 bytes per
//!   slot, and a lookup compares eight tags inside the bucket's cache line
//!   and only dereferences items whose tag matches (1/32768 false positives
//!   per occupied slot). A hit touches the bucket line and the node.
//! * A full bucket that needs one more slot moves its last item into a new
//!   child bucket and keeps the child's address in that last word, marked
//!   by bit 0 (nodes are at least 8-aligned). The table grows (×2) when it
//!   holds more items than slots, so the fill runs from 50% to 100% and the
//!   table costs 8–16 bytes per item plus its overflow buckets (measured in
//!   `crates/store/benches/table.rs`); chains stay short because a bucket
//!   overflows only past eight items. Chaining (rather than probing into
//!   neighbour buckets) keeps every key inside its home bucket index, which
//!   is what makes the SCAN cursor simple and exact across resizes.
//! * Resizing is incremental, as in Valkey's dict: a second bucket array is
//!   allocated (zeroed lazily by the OS) and every mutating call moves one
//!   non-empty bucket chain (up to 16 empty ones are skipped), so no single
//!   operation pays for a full rehash. Moving an item is a word copy; its
//!   new bucket comes from [`Item::hash`] (stored, or recomputed from the
//!   key as Valkey does). The table shrinks below 1/8 fill.
//! * A point-in-time view ([`crate::freeze`]) pauses resizing: no resize
//!   starts, one in progress stays half done and full buckets chain
//!   children, so every item keeps its home bucket and the view's walk over
//!   the home buckets (the old array's unmoved ones, then the new array's)
//!   stays exact. Resuming starts whatever grow or shrink the fill calls for.
//! * SCAN uses Valkey's reverse-binary cursor: incrementing the *reversed*
//!   bucket index means that after a resize the positions already visited map
//!   to the same set of bucket indices in the new size, so keys present for
//!   the whole scan are returned at least once (possibly twice).
//!
//! The numbers of the previous layout (six slots, separate tag bytes,
//! resize at 75% fill) are in docs/BENCHMARKS.md §3; the eight-slot layout
//! is measured there too, beside it.

use std::alloc::{self, Layout};
use std::mem;
use std::ptr::NonNull;

mod boxed;

use crate::defrag::Mover;
#[cfg(test)]
mod tests;

pub use boxed::Table;

/// Words per bucket: one 64-byte cache line.
const SLOTS: usize = 8;
/// Smallest non-empty table.
const MIN_BUCKETS: usize = 4;
/// Empty buckets one rehash step may skip besides the one it moves.
const EMPTY_VISITS: usize = 16;
/// The tag lives above this bit of a slot word; the item's address below.
const TAG_SHIFT: u32 = 48;
const ADDR_MASK: usize = (1 << TAG_SHIFT) - 1;
/// Set in the last word of a bucket that holds its overflow bucket there.
const CHILD_BIT: usize = 1;

/// An owned pointer to a node that holds its own key, stored by the table
/// as one word.
///
/// # Safety
/// `Self` must be `#[repr(transparent)]` over a non-zero `usize` that owns
/// what it points to (dropping `Self` frees it). Bit 0 of the word is always
/// clear, and bits 48..64 are the table's: it writes a tag there, and every
/// method of `Self` (and its `Drop`) must ignore them, and keep them as they
/// are when it replaces its own node.
pub unsafe trait Item: Sized {
    /// The key the item is stored under.
    fn key(&self) -> &[u8];
    /// The caller's hash of [`Item::key`], to place the item after a resize.
    fn hash(&self) -> u64;
    /// Start the loads a key comparison will make.
    fn prefetch(&self);
}

/// The address part of a slot word: what an [`Item`] points to.
#[inline(always)]
pub fn word_addr(word: usize) -> usize {
    word & ADDR_MASK
}

/// A tag-free word for a new item's address; panics on an address the
/// tag bits would collide with (a kernel handing out 57-bit user
/// addresses without being asked for them, which Linux does not do).
#[inline(always)]
pub fn addr_word(addr: usize) -> usize {
    assert!(
        addr & !ADDR_MASK == 0 && addr & CHILD_BIT == 0,
        "node address {addr:#x} does not fit a table slot"
    );
    addr
}

/// The set bits of `m`, lowest first: the slots a bucket mask names.
#[inline(always)]
fn bits(mut m: u32) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (m != 0).then(|| {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            i
        })
    })
}

#[inline(always)]
fn tag_of(hash: u64) -> usize {
    // Never 0: an empty word and a child's address (both 0 up there) can
    // then never match, and a tag test is one compare per word.
    (hash >> TAG_SHIFT) as usize | 1
}

#[inline(always)]
fn index(hash: u64, buckets: usize) -> usize {
    hash as usize & (buckets - 1)
}

/// Buckets for `len` items at about half fill after a shrink, so the table
/// sits well between the shrink and grow thresholds.
fn buckets_for(len: usize) -> usize {
    (len * 2)
        .div_ceil(SLOTS)
        .next_power_of_two()
        .max(MIN_BUCKETS)
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
pub fn key_eq(a: &[u8], b: &[u8]) -> bool {
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

/// Where an entry sits: valid until the table is next changed (any `&mut
/// self` call), see [`RawTable::locate`].
#[derive(Clone, Copy, Debug)]
pub struct Loc {
    tab: usize,
    bucket: usize,
    depth: usize,
    slot: usize,
}

/// One cache line of slot words; all-zero is an empty bucket. Invariant:
/// a bucket with no items has no child (removal pulls the child up), so
/// "home bucket empty" means "nothing stored at this index".
#[repr(C, align(64))]
struct Bucket {
    words: [usize; SLOTS],
}

const _: () = assert!(mem::size_of::<Bucket>() == 64);

impl Bucket {
    const EMPTY: Bucket = Bucket { words: [0; SLOTS] };

    #[inline(always)]
    fn child_word(&self) -> Option<usize> {
        let w = self.words[SLOTS - 1];
        (w & CHILD_BIT != 0).then_some(w & !CHILD_BIT)
    }

    #[inline(always)]
    fn child(&self) -> Option<&Bucket> {
        // SAFETY: a word with CHILD_BIT is a `Box<Bucket>` this bucket owns
        // (see `chain_push`); it lives as long as `self` is not changed.
        self.child_word().map(|a| unsafe { &*(a as *const Bucket) })
    }

    #[inline(always)]
    fn child_mut(&mut self) -> Option<&mut Bucket> {
        // SAFETY: as in `child`; `&mut self` makes the access unique.
        self.child_word()
            .map(|a| unsafe { &mut *(a as *mut Bucket) })
    }

    /// Slots that may hold items: all eight, or seven when the last holds
    /// the child.
    #[inline(always)]
    fn item_slots(&self) -> usize {
        SLOTS - (self.words[SLOTS - 1] & CHILD_BIT)
    }

    /// Item slots in use, as a bit mask.
    #[inline(always)]
    fn occupied(&self) -> u32 {
        let mut m = 0u32;
        for (i, &w) in self.words.iter().enumerate() {
            m |= ((w != 0) as u32 & (w & CHILD_BIT == 0) as u32) << i;
        }
        m
    }

    /// Whether slot `i` holds an item (not empty, not the child).
    #[inline(always)]
    fn holds_item(&self, i: usize) -> bool {
        let w = self.words[i];
        w != 0 && w & CHILD_BIT == 0
    }

    /// Item slots whose tag is `tag`, as a bit mask.
    #[inline(always)]
    fn matches(&self, tag: usize) -> u32 {
        let mut m = 0u32;
        for (i, &w) in self.words.iter().enumerate() {
            m |= ((w >> TAG_SHIFT == tag) as u32) << i;
        }
        m
    }

    #[inline(always)]
    fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// # Safety
    /// Slot `i` holds an item of type `I`.
    #[inline(always)]
    unsafe fn item<I: Item>(&self, i: usize) -> &I {
        // SAFETY: the slot word is a non-zero `I` (with the tag bits `I`
        // ignores), and `I` is `repr(transparent)` over a usize.
        unsafe { &*(&self.words[i] as *const usize as *const I) }
    }

    /// # Safety
    /// As [`Bucket::item`].
    #[inline(always)]
    unsafe fn item_mut<I: Item>(&mut self, i: usize) -> &mut I {
        // SAFETY: as in `item`; `&mut self` makes the access unique.
        unsafe { &mut *(&mut self.words[i] as *mut usize as *mut I) }
    }

    /// The first item slot whose tag matches and whose item `is` accepts.
    #[inline(always)]
    fn find<I: Item>(&self, tag: usize, is: &mut impl FnMut(&I) -> bool) -> Option<usize> {
        // SAFETY: `matches` only reports slots holding items.
        bits(self.matches(tag)).find(|&i| is(unsafe { self.item::<I>(i) }))
    }

    /// Start the loads of the items in `mask` (slots holding items) and
    /// of the overflow bucket.
    #[inline(always)]
    fn prefetch_items<I: Item>(&self, mask: u32) {
        for i in bits(mask) {
            // SAFETY: the caller's mask names slots holding items.
            unsafe { self.item::<I>(i) }.prefetch();
        }
        if let Some(c) = self.child_word() {
            prefetch_ptr(c as *const Bucket);
        }
    }

    fn chain(&self) -> impl Iterator<Item = &Bucket> {
        std::iter::successors(Some(self), |b| b.child())
    }

    /// Every item of the chain starting here.
    fn items<'a, I: Item + 'a>(&'a self) -> impl Iterator<Item = &'a I> {
        self.chain().flat_map(|b| {
            // SAFETY: `occupied` only reports slots holding items.
            bits(b.occupied()).map(move |i| unsafe { b.item::<I>(i) })
        })
    }

    /// Take the word out of slot `i`.
    #[inline(always)]
    fn take(&mut self, i: usize) -> usize {
        mem::replace(&mut self.words[i], 0)
    }
}

/// The item word `w` (tag included) back as an owned item.
///
/// # Safety
/// `w` came out of a slot holding an `I`, and no other copy of it is used.
#[inline(always)]
unsafe fn from_word<I: Item>(w: usize) -> I {
    debug_assert!(w != 0 && w & CHILD_BIT == 0);
    // SAFETY: `I` is `repr(transparent)` over a non-zero usize that
    // tolerates its tag bits (the `Item` contract), and `w` is one.
    unsafe { mem::transmute_copy::<usize, I>(&w) }
}

/// An owned item as a word for a slot, tagged with `hash`.
#[inline(always)]
fn into_word<I: Item>(item: I, hash: u64) -> usize {
    const { assert!(mem::size_of::<I>() == mem::size_of::<usize>()) };
    // SAFETY: `I` is `repr(transparent)` over a usize (the `Item` contract);
    // the item is forgotten, so the word is its only owner from here on.
    let w: usize = unsafe { mem::transmute_copy(&item) };
    mem::forget(item);
    (w & ADDR_MASK) | (tag_of(hash) << TAG_SHIFT)
}

fn chain_get<'a, I: Item>(
    mut b: &'a Bucket,
    tag: usize,
    is: &mut impl FnMut(&I) -> bool,
) -> Option<&'a I> {
    loop {
        if let Some(i) = b.find(tag, is) {
            // SAFETY: `find` reports slots holding items.
            return Some(unsafe { b.item(i) });
        }
        b = b.child()?;
    }
}

fn chain_get_mut<'a, I: Item>(
    mut b: &'a mut Bucket,
    tag: usize,
    is: &mut impl FnMut(&I) -> bool,
) -> Option<&'a mut I> {
    loop {
        if let Some(i) = b.find(tag, is) {
            // SAFETY: `find` reports slots holding items.
            return Some(unsafe { b.item_mut(i) });
        }
        b = b.child_mut()?;
    }
}

/// Put a tagged item word in the first free slot of the chain. Returns true
/// if an overflow bucket had to be allocated.
fn chain_push(mut b: &mut Bucket, word: usize) -> bool {
    let mut grew = false;
    loop {
        let free = !b.occupied() & ((1 << b.item_slots()) - 1);
        if free != 0 {
            b.words[free.trailing_zeros() as usize] = word;
            return grew;
        }
        if b.child_word().is_none() {
            // Full: the last item moves down into a new child, whose
            // address takes its word.
            let mut child = Box::new(Bucket::EMPTY);
            child.words[0] = b.words[SLOTS - 1];
            b.words[SLOTS - 1] = Box::into_raw(child) as usize | CHILD_BIT;
            grew = true;
        }
        b = b.child_mut().expect("chained above");
    }
}

/// Remove the first item `is` accepts (among those tagged `tag`) from the
/// chain starting at `b`, keeping the no-empty-bucket-with-child invariant.
/// `freed` counts overflow buckets released.
fn chain_remove<I: Item>(
    b: &mut Bucket,
    tag: usize,
    is: &mut impl FnMut(&I) -> bool,
    freed: &mut usize,
) -> Option<usize> {
    let word = if let Some(i) = b.find(tag, is) {
        b.take(i)
    } else {
        let c = b.child_mut()?;
        let w = chain_remove(c, tag, is, freed)?;
        if c.is_empty() {
            // `c` pulled up its own child if it had one, so an empty `c` is
            // a chain end.
            let a = b.take(SLOTS - 1) & !CHILD_BIT;
            // SAFETY: the child word was a `Box<Bucket>` this bucket owned;
            // its word is cleared above, so it is freed once.
            drop(unsafe { Box::from_raw(a as *mut Bucket) });
            *freed += 1;
        }
        w
    };
    if let Some(a) = b.child_word()
        && b.occupied() == 0
    {
        // SAFETY: as above: the owned child, unlinked by the overwrite.
        let c = unsafe { Box::from_raw(a as *mut Bucket) };
        *b = *c;
        *freed += 1;
    }
    Some(word)
}

/// Move every item of `b` (not of its chain) into `to`. Returns overflow
/// buckets allocated there.
fn spill<I: Item>(b: &mut Bucket, to: &mut [Bucket]) -> usize {
    let occupied = b.occupied();
    // Each item's hash is read to place it: let the misses overlap. (The
    // chain was unlinked by the caller: no child to prefetch.)
    b.prefetch_items::<I>(occupied);
    let mut grown = 0;
    for i in bits(occupied) {
        // SAFETY: `occupied` reports slots holding items.
        let h = unsafe { b.item::<I>(i) }.hash();
        let w = b.take(i);
        grown += chain_push(&mut to[index(h, to.len())], w) as usize;
    }
    grown
}

/// Drop every item of the chain starting at `b` and free its overflow
/// buckets, leaving `b` empty.
fn chain_drop<I: Item>(b: &mut Bucket) {
    let mut next = Some(mem::replace(b, Bucket::EMPTY));
    while let Some(mut cur) = next {
        next = cur.child_word().map(|a| {
            cur.words[SLOTS - 1] = 0;
            // SAFETY: the owned child, unlinked just above.
            *unsafe { Box::from_raw(a as *mut Bucket) }
        });
        for i in bits(cur.occupied()) {
            // SAFETY: an item word of this chain, taken out once.
            drop(unsafe { from_word::<I>(cur.take(i)) });
        }
    }
}

/// A zeroed, 64-byte aligned bucket array.
///
/// Not a `Box<[Bucket]>`: asking the allocator for 64-byte alignment makes
/// the system allocator use `posix_memalign` plus a memset of the whole
/// block (measured: 333 ms inside one insert when a 10M-key table doubles).
/// With the allocator's natural alignment `alloc_zeroed` is `calloc`, which
/// gets fresh zero pages from the OS lazily, so the cost is paid page by
/// page as the incremental rehash walks in. Blocks of a page or more come
/// back page-aligned from jemalloc and glibc alike and are used as they
/// are; a smaller block that is not 64-aligned is asked for again one
/// bucket larger and aligned inside. (Always asking one bucket more would
/// cost a whole size class on large tables: 8 MiB + 64 bytes is served
/// from jemalloc's 10 MiB class.) Dropping it frees the block only: the
/// items are the table's to drop.
struct Buckets {
    /// First bucket, 64-byte aligned; dangling when `len == 0`.
    ptr: NonNull<Bucket>,
    len: usize,
    /// What the allocator returned (null when `len == 0`).
    base: *mut u8,
    /// Whether `base` holds one spare bucket for alignment.
    padded: bool,
}

// SAFETY: `Buckets` owns its buckets exactly like a `Box<[Bucket]>` would;
// the raw pointers are never shared outside it.
unsafe impl Send for Buckets {}
// SAFETY: as above; `&Buckets` only hands out `&[Bucket]`.
unsafe impl Sync for Buckets {}

impl Buckets {
    fn empty() -> Self {
        Buckets {
            ptr: NonNull::dangling(),
            len: 0,
            base: std::ptr::null_mut(),
            padded: false,
        }
    }

    fn layout(n: usize, padded: bool) -> Layout {
        let size = n
            .checked_add(padded as usize)
            .and_then(|b| b.checked_mul(mem::size_of::<Bucket>()))
            .expect("hash table size overflows");
        Layout::from_size_align(size, 16).expect("hash table size overflows")
    }

    fn alloc(layout: Layout) -> *mut u8 {
        // SAFETY: `layout` has a non-zero size.
        let base = unsafe { alloc::alloc_zeroed(layout) };
        if base.is_null() {
            alloc::handle_alloc_error(layout);
        }
        base
    }

    fn zeroed(n: usize) -> Self {
        if n == 0 {
            return Self::empty();
        }
        let mut padded = false;
        let mut base = Self::alloc(Self::layout(n, false));
        if base.align_offset(mem::align_of::<Bucket>()) != 0 {
            // SAFETY: allocated just above with this layout, not used.
            unsafe { alloc::dealloc(base, Self::layout(n, false)) };
            padded = true;
            base = Self::alloc(Self::layout(n, true));
        }
        let off = base.align_offset(mem::align_of::<Bucket>());
        assert!(off < mem::size_of::<Bucket>() && (padded || off == 0));
        // SAFETY: `off` is 0, or less than the one spare bucket allocated,
        // so `base + off` and the `n` buckets after it lie inside the block.
        let first = unsafe { base.add(off) }.cast::<Bucket>();
        Buckets {
            ptr: NonNull::new(first).expect("non-null allocation"),
            len: n,
            base,
            padded,
        }
    }
}

impl std::ops::Deref for Buckets {
    type Target = [Bucket];
    fn deref(&self) -> &[Bucket] {
        // SAFETY: `ptr` is 64-byte aligned and points at `len` initialised
        // buckets inside our block (all-zero bytes are an empty bucket); for
        // `len == 0` it is dangling but aligned, which an empty slice allows.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for Buckets {
    fn deref_mut(&mut self) -> &mut [Bucket] {
        // SAFETY: as in `deref`, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Buckets {
    fn drop(&mut self) {
        if self.len != 0 {
            // SAFETY: the block was allocated with this layout and is not
            // used again.
            unsafe { alloc::dealloc(self.base, Self::layout(self.len, self.padded)) }
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

/// The buckets one SCAN step at `cursor` visits, as (table, index), and
/// the next cursor: the bucket of the (only, or smaller) table, and while
/// resizing every bucket of the larger one that it splits into.
fn cursor_buckets(
    lens: [usize; 2],
    rehashing: bool,
    cursor: u64,
    mut visit: impl FnMut(usize, usize),
) -> u64 {
    let mut v = cursor;
    if !rehashing {
        let m = lens[0] as u64 - 1;
        visit(0, (v & m) as usize);
        return next_cursor(v, m);
    }
    let (small, large) = if lens[0] <= lens[1] { (0, 1) } else { (1, 0) };
    let m0 = lens[small] as u64 - 1;
    let m1 = lens[large] as u64 - 1;
    visit(small, (v & m0) as usize);
    loop {
        visit(large, (v & m1) as usize);
        v = next_cursor(v, m1);
        if v & (m0 ^ m1) == 0 {
            break;
        }
    }
    v
}

/// The table over any [`Item`]; see the module doc.
pub struct RawTable<I: Item> {
    /// `tabs[0]` is the table; `tabs[1]` is the resize target (empty when
    /// not resizing).
    tabs: [Buckets; 2],
    /// While resizing: buckets of `tabs[0]` below this index are moved.
    rehash: Option<usize>,
    len: usize,
    /// Overflow buckets allocated (for memory_usage).
    children: usize,
    /// While set, no item changes home bucket: no resize starts and one in
    /// progress stays where it is, so a frozen view's walk over the
    /// buckets ([`RawTable::home_count`]) stays valid; a full bucket
    /// overflows into child buckets instead.
    paused: bool,
    _items: std::marker::PhantomData<I>,
}

impl<I: Item> Default for RawTable<I> {
    fn default() -> Self {
        Self::new()
    }
}

impl<I: Item> Drop for RawTable<I> {
    fn drop(&mut self) {
        for tab in &mut self.tabs {
            for b in tab.iter_mut() {
                if !b.is_empty() {
                    chain_drop::<I>(b);
                }
            }
        }
    }
}

impl<I: Item> RawTable<I> {
    pub fn new() -> Self {
        RawTable {
            tabs: [Buckets::empty(), Buckets::empty()],
            rehash: None,
            len: 0,
            children: 0,
            paused: false,
            _items: std::marker::PhantomData,
        }
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Bucket count of the main table (and of the resize target), for tests
    /// and introspection.
    pub fn buckets(&self) -> (usize, usize) {
        (self.tabs[0].len(), self.tabs[1].len())
    }
    pub fn is_rehashing(&self) -> bool {
        self.rehash.is_some()
    }
    /// While a resize is in progress, the bytes of the bucket array it is
    /// leaving (Valkey's `overhead.db.hashtable.rehashing`).
    pub fn rehashing_memory(&self) -> Option<usize> {
        self.rehash
            .map(|_| self.tabs[0].len() * mem::size_of::<Bucket>())
    }
    /// Overflow buckets currently chained (test and tuning aid).
    pub fn overflow_buckets(&self) -> usize {
        self.children
    }
    /// Bytes of the table's own buckets (the items' nodes are their
    /// owners' to count).
    pub fn memory_usage(&self) -> usize {
        (self.tabs[0].len() + self.tabs[1].len() + self.children) * mem::size_of::<Bucket>()
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
    fn homes(&self, hash: u64) -> impl Iterator<Item = &Bucket> {
        let first = self.home(0, hash).map(|i| &self.tabs[0][i]);
        let second = self.home(1, hash).map(|i| &self.tabs[1][i]);
        first.into_iter().chain(second)
    }

    #[inline]
    pub fn get(&self, hash: u64, key: &[u8]) -> Option<&I> {
        self.get_by(hash, |it| key_eq(it.key(), key))
    }

    /// The first item tagged like `hash` that `is` accepts.
    #[inline]
    pub fn get_by(&self, hash: u64, mut is: impl FnMut(&I) -> bool) -> Option<&I> {
        if self.len == 0 {
            return None;
        }
        let tag = tag_of(hash);
        self.homes(hash).find_map(|b| chain_get(b, tag, &mut is))
    }

    /// The item for `key`, mutable. Does not move a resize along: callers
    /// that write decide that ([`RawTable::rehash_step`]).
    pub fn get_mut(&mut self, hash: u64, key: &[u8]) -> Option<&mut I> {
        if self.len == 0 {
            return None;
        }
        let (h0, h1) = (self.home(0, hash), self.home(1, hash));
        let tag = tag_of(hash);
        let mut is = |it: &I| key_eq(it.key(), key);
        let [t0, t1] = &mut self.tabs;
        if let Some(i) = h0
            && let Some(n) = chain_get_mut(&mut t0[i], tag, &mut is)
        {
            return Some(n);
        }
        chain_get_mut(&mut t1[h1?], tag, &mut is)
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
        let mut is = |it: &I| key_eq(it.key(), key);
        for tab in 0..2 {
            let Some(bucket) = self.home(tab, hash) else {
                continue;
            };
            for (depth, b) in self.tabs[tab][bucket].chain().enumerate() {
                if let Some(slot) = b.find(tag, &mut is) {
                    return Some(Loc {
                        tab,
                        bucket,
                        depth,
                        slot,
                    });
                }
            }
        }
        None
    }

    /// The item at a [`RawTable::locate`] result. Panics if the table has
    /// changed since and the place is gone.
    #[inline]
    pub fn at(&self, loc: Loc) -> &I {
        let b = self.tabs[loc.tab][loc.bucket]
            .chain()
            .nth(loc.depth)
            .expect("stale Loc");
        assert!(b.holds_item(loc.slot), "stale Loc");
        // SAFETY: checked just above that the slot holds an item.
        unsafe { b.item(loc.slot) }
    }

    /// [`RawTable::at`], mutable.
    #[inline]
    pub fn at_mut(&mut self, loc: Loc) -> &mut I {
        let mut b = &mut self.tabs[loc.tab][loc.bucket];
        for _ in 0..loc.depth {
            b = b.child_mut().expect("stale Loc");
        }
        assert!(b.holds_item(loc.slot), "stale Loc");
        // SAFETY: checked just above that the slot holds an item.
        unsafe { b.item_mut(loc.slot) }
    }

    /// Store `item` under `hash`, replacing the item with the same key.
    /// Returns the replaced item.
    pub fn insert(&mut self, hash: u64, item: I) -> Option<I> {
        self.step_for_insert();
        if let Some(slot) = self.get_mut(hash, item.key()) {
            let w = into_word(item, hash);
            // SAFETY: `slot` is an item's slot word (`I` is
            // `repr(transparent)` over it); the new word carries its tag,
            // and the old one comes back out as the owned old item.
            return Some(unsafe { from_word((slot as *mut I).cast::<usize>().replace(w)) });
        }
        self.push(hash, item);
        None
    }

    /// Store `item`, whose key the caller knows is absent.
    pub fn insert_new(&mut self, hash: u64, item: I) {
        self.step_for_insert();
        debug_assert!(self.get(hash, item.key()).is_none());
        self.push(hash, item);
    }

    /// Shrinking into a smaller table: move faster so it cannot fill up
    /// before the move is done.
    fn step_for_insert(&mut self) {
        let steps = if self.tabs[1].len() < self.tabs[0].len() {
            4
        } else {
            1
        };
        self.rehash_step(steps);
    }

    fn push(&mut self, hash: u64, item: I) {
        self.make_room();
        let t = &mut self.tabs[self.rehash.is_some() as usize];
        let i = index(hash, t.len());
        if chain_push(&mut t[i], into_word(item, hash)) {
            self.children += 1;
        }
        self.len += 1;
    }

    /// Before adding one item: allocate, start a grow, or (only if a burst
    /// of inserts outran a shrink) finish the current resize.
    fn make_room(&mut self) {
        if self.tabs[0].is_empty() {
            self.tabs[0] = Buckets::zeroed(MIN_BUCKETS);
            return;
        }
        if self.rehash.is_some() {
            if self.len < self.tabs[1].len() * SLOTS || self.paused {
                return;
            }
            while self.rehash.is_some() {
                self.rehash_step(usize::MAX);
            }
        }
        let n = self.tabs[0].len();
        if self.len + 1 > n * SLOTS && !self.paused {
            self.start_resize(n * 2);
        }
    }

    fn start_resize(&mut self, buckets: usize) {
        debug_assert!(self.rehash.is_none());
        self.tabs[1] = Buckets::zeroed(buckets);
        self.rehash = Some(0);
    }

    pub fn remove(&mut self, hash: u64, key: &[u8]) -> Option<I> {
        self.remove_by(hash, |it| key_eq(it.key(), key))
    }

    /// Remove the first item tagged like `hash` that `is` accepts.
    pub fn remove_by(&mut self, hash: u64, mut is: impl FnMut(&I) -> bool) -> Option<I> {
        self.rehash_step(1);
        if self.len == 0 {
            return None;
        }
        let tag = tag_of(hash);
        let mut freed = 0;
        let mut word = None;
        for t in 0..2 {
            let Some(i) = self.home(t, hash) else {
                continue;
            };
            word = chain_remove(&mut self.tabs[t][i], tag, &mut is, &mut freed);
            if word.is_some() {
                break;
            }
        }
        self.children -= freed;
        let word = word?;
        self.len -= 1;
        self.maybe_shrink();
        // SAFETY: the word was just taken out of its slot.
        Some(unsafe { from_word(word) })
    }

    fn maybe_shrink(&mut self) {
        let n = self.tabs[0].len();
        if self.rehash.is_none() && n > MIN_BUCKETS && self.len * 8 < n * SLOTS && !self.paused {
            let target = buckets_for(self.len);
            if target < n {
                self.start_resize(target);
            }
        }
    }

    /// Move up to `n` non-empty bucket chains of a resize in progress
    /// (skipping up to 16 empty buckets each). Returns true while a resize
    /// is still in progress and can move on (false while paused, so that a
    /// loop finishing resizes stops). The engine's cron may call this to
    /// finish resizes of idle databases.
    pub fn rehash_step(&mut self, n: usize) -> bool {
        let Some(mut r) = self.rehash else {
            return false;
        };
        if self.paused {
            return false;
        }
        let [t0, t1] = &mut self.tabs;
        let n0 = t0.len();
        let mut moved = 0;
        let mut empty = 0;
        while r < n0 && moved < n {
            if t0[r].is_empty() {
                r += 1;
                empty += 1;
                if empty > EMPTY_VISITS.saturating_mul(n) {
                    break;
                }
                continue;
            }
            let mut next = Some(mem::replace(&mut t0[r], Bucket::EMPTY));
            let mut first = true;
            while let Some(mut b) = next {
                next = b.child_word().map(|a| {
                    b.words[SLOTS - 1] = 0;
                    // SAFETY: the owned child, unlinked just above.
                    *unsafe { Box::from_raw(a as *mut Bucket) }
                });
                self.children += spill::<I>(&mut b, t1);
                self.children -= !first as usize;
                first = false;
            }
            r += 1;
            moved += 1;
        }
        if r >= n0 {
            self.tabs[0] = mem::replace(&mut self.tabs[1], Buckets::empty());
            self.rehash = None;
            // Deletes during a shrink may call for another one (without this
            // a table that stops seeing deletes would keep the larger size),
            // and inserts during a pause for a larger one.
            self.maybe_resize();
            self.rehash.is_some()
        } else {
            self.rehash = Some(r);
            self.prefetch_rehash(r);
            true
        }
    }

    /// The next rehash step will most likely move bucket `r` of the old
    /// array: start the misses it would wait on now, so that they overlap
    /// with the work between the two steps. The items (the step reads each
    /// one's hash) come from `r`'s line, which the step before prefetched;
    /// then the two buckets of the new array they can go to, and the line
    /// of the bucket after `r`, for the step after next.
    fn prefetch_rehash(&self, r: usize) {
        let [t0, t1] = &self.tabs;
        let Some(b) = t0.get(r) else { return };
        if t1.is_empty() {
            return;
        }
        b.prefetch_items::<I>(b.occupied());
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

    /// Prefetch the buckets of every hash, then the items whose tags match
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

    /// [`RawTable::prefetch_batch`], with `f` prefetching what it needs of
    /// each item whose tag matches (eviction's removals want less of a
    /// node than a lookup).
    pub fn prefetch_batch_with(&self, hashes: &[u64], f: impl Fn(&I)) {
        if self.len == 0 {
            return;
        }
        for &h in hashes {
            self.prefetch(h);
        }
        for &h in hashes {
            let tag = tag_of(h);
            for b in self.homes(h) {
                // SAFETY: `matches` only reports slots holding items.
                bits(b.matches(tag)).for_each(|i| f(unsafe { b.item::<I>(i) }));
            }
        }
    }

    /// Once the buckets of `hash` ([`RawTable::prefetch`]) are expected in
    /// cache: the items in them whose tags match, and the first overflow
    /// bucket.
    #[inline]
    pub fn prefetch_nodes(&self, hash: u64) {
        if self.len == 0 {
            return;
        }
        let tag = tag_of(hash);
        for b in self.homes(hash) {
            b.prefetch_items::<I>(b.matches(tag));
        }
    }

    /// Third prefetch pass: for each hash, the first item of its home
    /// chains whose tag matches and that `is` accepts, handed to `f` to
    /// prefetch what it points at. An item in the home bucket is expected
    /// in cache from [`RawTable::prefetch_batch`]; one in an overflow
    /// bucket (whose line that pass prefetched) only gets its own first
    /// lines prefetched here. A tag collision costs a useless prefetch,
    /// never a wrong result.
    pub fn prefetch_values(
        &self,
        hashes: &[u64],
        mut is: impl FnMut(u64, &I) -> bool,
        mut f: impl FnMut(&I),
    ) {
        if self.len == 0 {
            return;
        }
        for &h in hashes {
            let tag = tag_of(h);
            let found = self.homes(h).find_map(|home| {
                home.chain().enumerate().find_map(|(depth, b)| {
                    b.find(tag, &mut |it| is(h, it)).map(|i| {
                        // SAFETY: `find` reports slots holding items.
                        (depth, unsafe { b.item::<I>(i) })
                    })
                })
            });
            match found {
                Some((0, it)) => f(it),
                // Its node was not prefetched yet: reading it for `f` would
                // wait here for the miss. Start it; the value follows.
                Some((_, it)) => it.prefetch(),
                None => {}
            }
        }
    }

    /// One SCAN step: calls `f` for some items and returns the next cursor
    /// (0 when done). Every item present for the whole scan is visited at
    /// least once, across resizes.
    pub fn scan<'a>(&'a self, cursor: u64, mut f: impl FnMut(&'a I)) -> u64 {
        if self.len == 0 {
            return 0;
        }
        let tabs = &self.tabs;
        self.cursor_buckets(cursor, |t, i| tabs[t][i].items::<I>().for_each(&mut f))
    }

    /// One step of a defragmentation walk (a SCAN step, see
    /// [`RawTable::scan`]): `f` gets each item to move its own blocks,
    /// and each overflow bucket of the chains visited is offered to the
    /// mover. Items stay in their buckets.
    pub(crate) fn defrag_scan(
        &mut self,
        cursor: u64,
        m: &mut Mover<'_>,
        mut f: impl FnMut(&mut I, &mut Mover<'_>),
    ) -> u64 {
        if self.len == 0 {
            return 0;
        }
        let lens = [self.tabs[0].len(), self.tabs[1].len()];
        let rehashing = self.rehash.is_some();
        let tabs = &mut self.tabs;
        cursor_buckets(lens, rehashing, cursor, |t, i| {
            let mut b = Some(&mut tabs[t][i]);
            while let Some(bucket) = b {
                for slot in bits(bucket.occupied()) {
                    // SAFETY: `occupied` only reports slots holding items.
                    f(unsafe { bucket.item_mut::<I>(slot) }, m);
                }
                if let Some(c) = bucket.child_word().and_then(|c| NonNull::new(c as *mut u8)) {
                    // SAFETY: the child is a `Box<Bucket>` this bucket owns
                    // and the only holder of its address (see
                    // `chain_push`); a move rewrites that word at once.
                    if let Some(n) = unsafe { m.block(c, Layout::new::<Bucket>()) } {
                        bucket.words[SLOTS - 1] = n.as_ptr() as usize | CHILD_BIT;
                    }
                }
                b = bucket.child_mut();
            }
        })
    }

    fn cursor_buckets(&self, cursor: u64, visit: impl FnMut(usize, usize)) -> u64 {
        let lens = [self.tabs[0].len(), self.tabs[1].len()];
        cursor_buckets(lens, self.rehash.is_some(), cursor, visit)
    }

    /// A pseudo-random item, `seed` choosing it. Picks a random bucket and
    /// a random position among 16 (two buckets' worth) and retries when no
    /// item of the bucket's chain is there, so items are equally likely
    /// however full their bucket is; a chain longer than 16 items (only
    /// with colliding hashes) draws its position over its whole length.
    /// Falls back to a walk from a random bucket.
    pub fn random(&self, seed: u64) -> Option<&I> {
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
            if b.is_empty() {
                continue;
            }
            let count = b.items::<I>().count();
            let pos = (splitmix(&mut s) % count.max(2 * SLOTS) as u64) as usize;
            if pos < count {
                return b.items().nth(pos);
            }
        }
        let start = (splitmix(&mut s) % total) as usize;
        let total = total as usize;
        for k in 0..total {
            let b = bucket((start + k) % total);
            if !b.is_empty() {
                let count = b.items::<I>().count() as u64;
                let pick = (splitmix(&mut s) % count) as usize;
                return b.items().nth(pick);
            }
        }
        None
    }

    /// Up to `count` items from consecutive buckets, starting at a random
    /// one (Valkey's `dictGetSomeKeys`, for eviction's sample): one random
    /// line, then lines the hardware prefetcher follows. Stops after
    /// `10 × count` buckets once it has found something, so a sparse table
    /// costs bounded work; a non-empty table always gives at least one
    /// item (while resizing, the walk goes on into the other array).
    pub fn sample_run<'a>(&'a self, seed: u64, count: usize, mut f: impl FnMut(&'a I)) {
        if self.len == 0 || count == 0 {
            return;
        }
        let mut s = seed;
        let (first, start) = self.sample_start(&mut s);
        let mut found = 0;
        let mut visited = 0;
        for (t, from) in [(first, start), (1 - first, 0)] {
            let tab = &self.tabs[t];
            for k in 0..tab.len() {
                if found > 0 && visited >= count.saturating_mul(10) {
                    return;
                }
                let b = &tab[(from + k) & (tab.len() - 1)];
                // The first bucket is read from a random item on, wrapping:
                // otherwise the items past `count` in a full bucket could
                // only ever be sampled by a walk that started before it.
                let off = if visited == 0 {
                    (splitmix(&mut s) % b.items::<I>().count().max(1) as u64) as usize
                } else {
                    0
                };
                visited += 1;
                for it in b.items::<I>().skip(off).chain(b.items::<I>().take(off)) {
                    f(it);
                    found += 1;
                    if found == count {
                        return;
                    }
                }
            }
        }
    }

    /// Where [`RawTable::sample_run`] with this seed starts: (array,
    /// bucket).
    fn sample_start(&self, s: &mut u64) -> (usize, usize) {
        let n0 = self.tabs[0].len();
        let pick = (splitmix(s) % (n0 + self.tabs[1].len()) as u64) as usize;
        if pick < n0 { (0, pick) } else { (1, pick - n0) }
    }

    /// Start the miss of the bucket [`RawTable::sample_run`] with `seed`
    /// will read first, so that it lands before that sample is taken.
    pub fn prefetch_sample(&self, seed: u64) {
        if self.len > 0 {
            let (t, i) = self.sample_start(&mut { seed });
            prefetch_ptr(&self.tabs[t][i]);
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &I> {
        self.tabs
            .iter()
            .flat_map(|t| t.iter())
            .flat_map(|b| b.items::<I>())
    }

    pub fn clear(&mut self) {
        *self = RawTable::new();
    }

    /// Stop moving items between buckets (see the `paused` field) until
    /// [`RawTable::resume_resize`].
    pub(crate) fn pause_resize(&mut self) {
        self.paused = true;
    }

    /// Let items move again, and start the grow or shrink that inserts and
    /// removals while paused may have called for (a resize that was in
    /// progress goes on with the next writes).
    pub(crate) fn resume_resize(&mut self) {
        self.paused = false;
        if self.rehash.is_none() {
            self.maybe_resize();
        }
    }

    /// With no resize in progress: the grow or shrink the fill calls for.
    fn maybe_resize(&mut self) {
        let n = self.tabs[0].len();
        if n > 0 && self.len > n * SLOTS && !self.paused {
            // Sized for the items now, not doubled once: a pause may have
            // let them outgrow several doublings.
            self.start_resize(buckets_for(self.len));
        } else {
            self.maybe_shrink();
        }
    }

    /// How many home buckets a frozen view walks: the old array's not yet
    /// moved ones, then all of the new array's while a resize is paused;
    /// else every bucket. Positions `0..home_count()` number them in that
    /// order; they stay valid while paused (the cursor of the walk is one
    /// such position).
    pub(crate) fn home_count(&self) -> usize {
        let r = self.rehash.unwrap_or(0);
        self.tabs[0].len() - r + self.tabs[1].len()
    }

    fn position(&self, tab: usize, bucket: usize) -> usize {
        let r = self.rehash.unwrap_or(0);
        match tab {
            0 => bucket - r,
            _ => self.tabs[0].len() - r + bucket,
        }
    }

    /// The position (see [`RawTable::home_count`]) of the home bucket that
    /// holds `key`, or, when absent, the one an insert would put it in;
    /// and whether it is present. `None` while the table has no buckets.
    pub(crate) fn key_position(&self, hash: u64, key: &[u8]) -> Option<(usize, bool)> {
        if let Some(loc) = self.locate(hash, key) {
            return Some((self.position(loc.tab, loc.bucket), true));
        }
        let tab = self.rehash.is_some() as usize;
        let i = self.home(tab, hash)?;
        Some((self.position(tab, i), false))
    }

    /// Every item of the home bucket at `pos` and its chain.
    pub(crate) fn items_at(&self, pos: usize) -> impl Iterator<Item = &I> {
        let r = self.rehash.unwrap_or(0);
        let old = self.tabs[0].len() - r;
        let b = if pos < old {
            &self.tabs[0][r + pos]
        } else {
            &self.tabs[1][pos - old]
        };
        b.items::<I>()
    }
}
