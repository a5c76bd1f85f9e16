//! The server's global allocator: jemalloc, counting the bytes it hands
//! out so that `maxmemory` can be checked before every command at the
//! cost of a few loads ([`used_memory`]), where jemalloc's own
//! `stats.allocated` needs an epoch refresh (a lock and a walk over
//! arenas) to be current.
//!
//! ```text
//!  alloc/dealloc/realloc ─► jemalloc ─► usable size (nallocx, the size
//!     class jemalloc really uses, what stats.allocated counts)
//!     ─► this thread's slot += / -= (relaxed load + store: one writer)
//!  used_memory() ─► Σ slots (a thread may free what another allocated:
//!     slots go negative, the sum does not)
//! ```
//!
//! Each thread claims a slot of [`SLOTS`] on its first allocation; slots
//! are cache-line padded so threads never share a line. Slots are not
//! given back when a thread ends (that would need a thread-exit hook,
//! which may allocate); threads beyond [`SLOTS`] share an overflow slot
//! updated with `fetch_add`. Nothing here allocates.
//!
//! [`defrag`] holds what active defragmentation asks of jemalloc.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

use tikv_jemalloc_sys as ffi;

pub mod defrag;

/// Per-thread counters (the last one is the shared overflow slot).
pub const SLOTS: usize = 64;

/// The largest alignment jemalloc gives every allocation of at least that
/// size without being asked (`alignof(max_align_t)`), as tikv-jemallocator
/// decides its flags.
const MAX_ALIGN_T: usize = 16;

/// One thread's net bytes, alone on its cache line.
#[repr(align(64))]
struct Slot(AtomicI64);

static COUNTERS: [Slot; SLOTS] = [const { Slot(AtomicI64::new(0)) }; SLOTS];
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);
const OVERFLOW: usize = SLOTS - 1;
const UNCLAIMED: usize = usize::MAX;

thread_local! {
    // Const-initialized and without a destructor: a plain TLS word, so
    // reading it never allocates nor registers anything.
    static MY_SLOT: Cell<usize> = const { Cell::new(UNCLAIMED) };
}

/// jemalloc with byte counting; use as `#[global_allocator]`.
#[derive(Debug, Default, Clone, Copy)]
pub struct CountingJemalloc;

/// The flags tikv-jemallocator passes for this alignment and size, so
/// that `nallocx` sizes the allocation jemalloc really made.
#[inline]
fn flags(align: usize, size: usize) -> std::ffi::c_int {
    if align <= MAX_ALIGN_T && align <= size {
        0
    } else {
        ffi::MALLOCX_LG_ALIGN(align.trailing_zeros() as usize)
    }
}

/// Bytes jemalloc hands out for `size` at `align`.
#[inline]
fn usable(align: usize, size: usize) -> i64 {
    // SAFETY: nallocx only computes a size class; `size` is non-zero (a
    // GlobalAlloc layout or realloc size) and the flags are a valid
    // alignment request.
    unsafe { ffi::nallocx(size, flags(align, size)) as i64 }
}

/// Add `delta` to this thread's counter.
#[inline]
fn count(delta: i64) {
    let slot = match MY_SLOT.try_with(Cell::get) {
        Ok(UNCLAIMED) => {
            let s = NEXT_SLOT.fetch_add(1, Ordering::Relaxed).min(OVERFLOW);
            // A thread whose TLS is already gone (being torn down) counts
            // in the overflow slot below.
            let _ = MY_SLOT.try_with(|c| c.set(s));
            s
        }
        Ok(s) => s,
        Err(_) => OVERFLOW,
    };
    let c = &COUNTERS[slot].0;
    if slot == OVERFLOW {
        c.fetch_add(delta, Ordering::Relaxed);
    } else {
        // This thread is the slot's only writer: no read-modify-write
        // needed, readers see one value or the other.
        c.store(c.load(Ordering::Relaxed) + delta, Ordering::Relaxed);
    }
}

/// Bytes allocated and not yet freed by the whole process, as jemalloc's
/// `stats.allocated` counts them (usable size), but current at every call.
pub fn used_memory() -> u64 {
    // Only slots some thread has claimed can be non-zero (a claim is
    // counted before its slot is first written), plus the overflow slot:
    // a handful of cache lines, not all of them.
    let claimed = NEXT_SLOT.load(Ordering::Relaxed).min(OVERFLOW);
    let sum: i64 = COUNTERS[..claimed]
        .iter()
        .map(|s| s.0.load(Ordering::Relaxed))
        .sum();
    (sum + COUNTERS[OVERFLOW].0.load(Ordering::Relaxed)).max(0) as u64
}

/// This thread's net allocated bytes (what it allocated less what it
/// freed), for tests that must not see other threads' allocations.
pub fn thread_net_allocated() -> i64 {
    match MY_SLOT.try_with(Cell::get) {
        Ok(s) if s != UNCLAIMED && s != OVERFLOW => COUNTERS[s].0.load(Ordering::Relaxed),
        _ => 0,
    }
}

// SAFETY: every method forwards to tikv-jemallocator's `Jemalloc` with
// the caller's arguments unchanged, so its GlobalAlloc contract holds;
// the counting around it touches only atomics and a TLS word.
unsafe impl GlobalAlloc for CountingJemalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded under the caller's guarantees (non-zero size).
        let p = unsafe { tikv_jemallocator::Jemalloc.alloc(layout) };
        if !p.is_null() {
            count(usable(layout.align(), layout.size()));
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded under the caller's guarantees.
        let p = unsafe { tikv_jemallocator::Jemalloc.alloc_zeroed(layout) };
        if !p.is_null() {
            count(usable(layout.align(), layout.size()));
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-usable(layout.align(), layout.size()));
        // SAFETY: `ptr` was allocated by this allocator with `layout`
        // (the caller's guarantee), i.e. by Jemalloc with it.
        unsafe { tikv_jemallocator::Jemalloc.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded under the caller's guarantees (`ptr` from this
        // allocator with `layout`, `new_size` non-zero and valid).
        let p = unsafe { tikv_jemallocator::Jemalloc.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            // On failure the old block stays, and so does its count.
            count(usable(layout.align(), new_size) - usable(layout.align(), layout.size()));
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[global_allocator]
    static GLOBAL: CountingJemalloc = CountingJemalloc;

    /// Per-thread net counts make these exact even while the test
    /// harness's other threads allocate.
    fn net_during(f: impl FnOnce()) -> i64 {
        let before = thread_net_allocated();
        f();
        thread_net_allocated() - before
    }

    #[test]
    fn counts_usable_size_and_frees_to_zero() {
        let mut keep: Option<Vec<u8>> = None;
        let n = net_during(|| keep = Some(Vec::with_capacity(100)));
        // 100 bytes live in jemalloc's 112-byte class.
        assert_eq!(n, 112);
        let n = net_during(|| keep = None);
        assert_eq!(n, -112);
        let _ = keep;
    }

    #[test]
    fn large_and_aligned_allocations() {
        let layout = Layout::from_size_align(10_000, 4096).unwrap();
        let expect = usable(4096, 10_000);
        assert!(expect >= 10_000);
        let n = net_during(|| {
            // SAFETY: non-zero size; freed with the same layout.
            unsafe {
                let p = GLOBAL.alloc(layout);
                assert!(!p.is_null());
                assert_eq!(p as usize % 4096, 0);
                GLOBAL.dealloc(p, layout);
            }
        });
        assert_eq!(n, 0);
        let mut v: Option<Box<[u8]>> = None;
        let n = net_during(|| v = Some(vec![0u8; 1 << 20].into_boxed_slice()));
        assert_eq!(n, 1 << 20);
        drop(v);
    }

    #[test]
    fn realloc_moves_the_count() {
        let mut v: Vec<u8> = Vec::with_capacity(8);
        let n = net_during(|| v.reserve_exact(5000));
        assert_eq!(n, usable(1, 5000) - 8);
        let n = net_during(|| v.shrink_to(100));
        // shrink_to(100) with len 0 reallocates to 100 bytes: class 112.
        assert_eq!(n, 112 - usable(1, 5000));
        let n = net_during(|| drop(std::mem::take(&mut v)));
        assert_eq!(n, -112);
    }

    #[test]
    fn other_threads_count_in_the_total() {
        // Memory allocated on another thread and kept shows in
        // used_memory(); freeing it here nets the two slots out.
        let big = 8 << 20;
        let held = std::thread::spawn(move || vec![1u8; big]).join().unwrap();
        let n = net_during(|| drop(held));
        assert_eq!(n, -(big as i64));
    }

    #[test]
    fn used_memory_follows_a_large_allocation() {
        // Other tests run concurrently, but none holds 64 MiB for long.
        let v = vec![7u8; 64 << 20];
        let during = used_memory();
        // What jemalloc itself counts agrees (tcache-held objects and the
        // other tests' allocations are the difference).
        let _ = tikv_jemalloc_ctl::epoch::advance();
        let jemalloc = tikv_jemalloc_ctl::stats::allocated::read().unwrap() as u64;
        drop(v);
        assert!(during >= 64 << 20, "{during}");
        assert!(
            during.abs_diff(jemalloc) < 4 << 20,
            "{during} vs jemalloc {jemalloc}"
        );
    }
}
