//! What active defragmentation asks of jemalloc: how much of the small
//! size classes' slabs is free space held by live neighbours, and whether
//! one block sits in a slab emptier than its size class's average, so that
//! moving it (to the fullest slab jemalloc allocates from next) lets that
//! slab empty and its pages go back to the OS.
//!
//! ```text
//!  refresh()      epoch; per size class (bin): curregs, curslabs, nonfull_slabs
//!                 over all arenas ─► kept here (one writer: the execution thread)
//!                 ─► returns Σ (nregs × curslabs − curregs) × size: free bytes in slabs
//!  relocate(p)    experimental.utilization.batch_query(p) ─► its slab's nfree, nregs, size
//!                 move when the slab is not full, at least two slabs of its class
//!                 are not full, and the slab holds fewer than 9/8 of the average
//!                 of the non-full slabs: new block and free of the old both
//!                 bypass the thread cache (a cached block could be in the same
//!                 sparse slab; a cached free would keep it from emptying)
//! ```
//!
//! Both controls are jemalloc 5.3's own (`experimental.utilization.*` and
//! the `stats.arenas.<i>.bins.<j>.*` counters), so the bundled, unpatched
//! jemalloc serves; the decision is the one Valkey 8.1 makes from the same
//! counters. The usage figures are as fresh as the last [`refresh`]:
//! blocks moved since only make their destination fuller, so a stale
//! average errs towards moving less.

use std::alloc::Layout;
use std::ffi::{CString, c_void};
use std::ptr::NonNull;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use tikv_jemalloc_sys as ffi;

/// jemalloc's "all arenas merged" index in `stats.arenas.<i>`.
const ALL_ARENAS: usize = 4096;
/// A slab is left alone unless it is used less than this many
/// thousandths of the average non-full slab of its class.
const MOVE_BELOW_PER_MILLE: usize = 1125;

/// A control's name translated once (`mallctlnametomib`).
struct Mib {
    key: [usize; 8],
    len: usize,
}

impl Mib {
    fn of(name: &str) -> Option<Mib> {
        let c = CString::new(name).ok()?;
        let mut m = Mib {
            key: [0; 8],
            len: 8,
        };
        // SAFETY: `c` is NUL-terminated; `key` has room for `len` words.
        let rc = unsafe { ffi::mallctlnametomib(c.as_ptr(), m.key.as_mut_ptr(), &mut m.len) };
        (rc == 0).then_some(m)
    }

    /// Read a size_t control.
    fn read(&self) -> Option<usize> {
        let mut v = 0usize;
        let mut sz = size_of::<usize>();
        // SAFETY: the control is a size_t, `v` its room; nothing written.
        let rc = unsafe {
            ffi::mallctlbymib(
                self.key.as_ptr(),
                self.len,
                (&mut v as *mut usize).cast(),
                &mut sz,
                std::ptr::null_mut(),
                0,
            )
        };
        (rc == 0).then_some(v)
    }
}

/// One small size class: its geometry and the usage last read.
struct Bin {
    reg_size: usize,
    nregs: usize,
    curregs: Mib,
    curslabs: Mib,
    nonfull: Mib,
    /// curregs, curslabs, nonfull_slabs as of the last [`refresh`].
    usage: [AtomicUsize; 3],
}

struct Controls {
    epoch: Mib,
    batch_query: Mib,
    /// Ordered by `reg_size`.
    bins: Vec<Bin>,
}

fn read_named(name: &str) -> Option<usize> {
    Mib::of(name)?.read()
}

fn read_named_u32(name: &str) -> Option<usize> {
    let c = CString::new(name).ok()?;
    let mut v = 0u32;
    let mut sz = size_of::<u32>();
    // SAFETY: the control is an unsigned (u32), `v` its room.
    let rc = unsafe {
        ffi::mallctl(
            c.as_ptr(),
            (&mut v as *mut u32).cast(),
            &mut sz,
            std::ptr::null_mut(),
            0,
        )
    };
    (rc == 0).then_some(v as usize)
}

impl Controls {
    fn init() -> Option<Controls> {
        let nbins = read_named_u32("arenas.nbins")?;
        let mut bins = Vec::with_capacity(nbins);
        for j in 0..nbins {
            let stat = |what: &str| Mib::of(&format!("stats.arenas.{ALL_ARENAS}.bins.{j}.{what}"));
            bins.push(Bin {
                reg_size: read_named(&format!("arenas.bin.{j}.size"))?,
                nregs: read_named_u32(&format!("arenas.bin.{j}.nregs"))?,
                curregs: stat("curregs")?,
                curslabs: stat("curslabs")?,
                nonfull: stat("nonfull_slabs")?,
                usage: Default::default(),
            });
        }
        bins.sort_by_key(|b| b.reg_size);
        Some(Controls {
            epoch: Mib::of("epoch")?,
            batch_query: Mib::of("experimental.utilization.batch_query")?,
            bins,
        })
    }

    fn advance_epoch(&self) {
        let mut e: u64 = 1;
        let mut sz = size_of::<u64>();
        // SAFETY: `epoch` reads and writes a u64.
        unsafe {
            ffi::mallctlbymib(
                self.epoch.key.as_ptr(),
                self.epoch.len,
                (&mut e as *mut u64).cast(),
                &mut sz,
                (&mut e as *mut u64).cast(),
                size_of::<u64>(),
            );
        }
    }

    /// (free regions, regions, slab bytes) of the slab holding `ptr`.
    fn slab_of(&self, ptr: *const u8) -> Option<(usize, usize, usize)> {
        let mut out = [0usize; 3];
        let mut out_len = size_of::<[usize; 3]>();
        let mut input = ptr as *const c_void;
        // SAFETY: the query reads one pointer and writes three size_t, the
        // sizes passed; `ptr` is a live block of this allocator (caller).
        let rc = unsafe {
            ffi::mallctlbymib(
                self.batch_query.key.as_ptr(),
                self.batch_query.len,
                out.as_mut_ptr().cast(),
                &mut out_len,
                (&mut input as *mut *const c_void).cast(),
                size_of::<*const c_void>(),
            )
        };
        (rc == 0 && out[1] > 0).then_some((out[0], out[1], out[2]))
    }

    fn should_move(&self, ptr: *const u8) -> bool {
        let Some((nfree, nregs, slab)) = self.slab_of(ptr) else {
            return false;
        };
        // A large (non-slab) block reads as one region of its own size.
        if nfree == 0 || nregs <= 1 {
            return false;
        }
        let reg_size = slab / nregs;
        let Ok(i) = self.bins.binary_search_by_key(&reg_size, |b| b.reg_size) else {
            return false;
        };
        let bin = &self.bins[i];
        let [curregs, curslabs, nonfull] = bin.usage.each_ref().map(|a| a.load(Ordering::Relaxed));
        if nonfull < 2 {
            return false;
        }
        let full = curslabs.saturating_sub(nonfull);
        let in_nonfull = curregs.saturating_sub(full * bin.nregs);
        let used = nregs - nfree;
        1000 * used * nonfull < MOVE_BELOW_PER_MILLE * in_nonfull
    }
}

fn controls() -> Option<&'static Controls> {
    static CONTROLS: OnceLock<Option<Controls>> = OnceLock::new();
    CONTROLS.get_or_init(Controls::init).as_ref()
}

/// Whether this jemalloc answers the controls active defragmentation
/// needs.
pub fn supported() -> bool {
    controls().is_some()
}

/// Refresh jemalloc's statistics and each size class's usage (what
/// [`relocate`] decides by), and return the bytes of free regions inside
/// the small size classes' slabs: the fragmentation moving blocks can
/// remove. `None` when [`supported`] is false.
pub fn refresh() -> Option<u64> {
    let c = controls()?;
    c.advance_epoch();
    let mut frag = 0u64;
    for b in &c.bins {
        let now = [&b.curregs, &b.curslabs, &b.nonfull].map(|m| m.read().unwrap_or(0));
        for (slot, v) in b.usage.iter().zip(now) {
            slot.store(v, Ordering::Relaxed);
        }
        let [curregs, curslabs, _] = now;
        frag += ((b.nregs * curslabs).saturating_sub(curregs) * b.reg_size) as u64;
    }
    Some(frag)
}

/// Move the block at `ptr` to a fuller slab when its own slab is emptier
/// than its size class's average (see the module doc); returns its new
/// address, the old block freed, or `None` when it stays.
///
/// # Safety
/// `ptr` is a live block of this process's global allocator made with
/// `layout`, and nothing reads or writes it while this runs; on `Some`,
/// every use of the old address is replaced by the new one.
pub unsafe fn relocate(ptr: NonNull<u8>, layout: Layout) -> Option<NonNull<u8>> {
    let c = controls()?;
    if !c.should_move(ptr.as_ptr()) {
        return None;
    }
    let flags = crate::flags(layout.align(), layout.size()) | ffi::MALLOCX_TCACHE_NONE;
    // SAFETY: a non-zero size (a live block's layout) and valid flags.
    let new = NonNull::new(unsafe { ffi::mallocx(layout.size(), flags) }.cast::<u8>())?;
    // SAFETY: both blocks hold `layout.size()` bytes and are distinct; the
    // old one is freed with the size and alignment it was made with. The
    // byte count is unchanged (same size class both ways), so the
    // allocator's counters are left alone.
    unsafe {
        std::ptr::copy_nonoverlapping(ptr.as_ptr(), new.as_ptr(), layout.size());
        ffi::sdallocx(ptr.as_ptr().cast(), layout.size(), flags);
    }
    Some(new)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of one size class spread over many slabs, most freed: moving
    /// the survivors must leave fewer free bytes in slabs than before.
    #[test]
    fn moving_survivors_of_sparse_slabs_lowers_fragmentation() {
        assert!(supported(), "the bundled jemalloc answers the controls");
        let layout = Layout::from_size_align(48, 8).unwrap();
        // SAFETY: plain allocations of a non-zero layout, freed below.
        let mut blocks: Vec<NonNull<u8>> = (0..200_000)
            .map(|_| NonNull::new(unsafe { std::alloc::alloc(layout) }).unwrap())
            .collect();
        // Keep one in eight, spread over every slab.
        let mut kept = Vec::new();
        for (i, b) in blocks.drain(..).enumerate() {
            if i % 8 == 0 {
                // SAFETY: a live block; marked so the copy can be checked.
                unsafe { b.as_ptr().write(i as u8) };
                kept.push((i, b));
            } else {
                // SAFETY: allocated above with `layout`, freed once.
                unsafe { std::alloc::dealloc(b.as_ptr(), layout) };
            }
        }
        let before = refresh().unwrap();
        let mut moved = 0;
        for (_, b) in kept.iter_mut() {
            // SAFETY: a live block made with `layout`; its address is
            // replaced when it moves.
            if let Some(n) = unsafe { relocate(*b, layout) } {
                *b = n;
                moved += 1;
            }
        }
        let after = refresh().unwrap();
        assert!(moved > 1000, "moved {moved} of {}", kept.len());
        assert!(
            after + 2_000_000 < before,
            "free bytes in slabs: {before} before, {after} after"
        );
        for (i, b) in kept {
            // SAFETY: the live (possibly moved) block, freed once.
            unsafe {
                assert_eq!(b.as_ptr().read(), i as u8);
                std::alloc::dealloc(b.as_ptr(), layout);
            }
        }
    }
}
