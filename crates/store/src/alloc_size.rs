//! What an allocation really costs: the request rounded up to jemalloc's
//! size class, so MEMORY USAGE-like reports match what the allocator
//! holds rather than what the code asked for.
//!
//! The server runs on jemalloc 5 (64-bit, 16-byte quantum, 4 KiB pages),
//! whose classes are:
//!
//! ```text
//!   8                                   tiny
//!   16, 32, 48, 64                      quantum-spaced
//!   80, 96, 112, 128                    then four classes per doubling:
//!   160, 192, 224, 256                  (2^k, 2^(k+1)] in steps of 2^(k-2)
//!   320, 384, 448, 512
//!   ...  10240, 12288, 14336            largest small (slab) class
//!   16384, 20480, 24576, 28672, 32768   large: same rule, every step is
//!   ...                                 a whole number of pages
//! ```
//!
//! This is `sz_s2u_compute` in jemalloc 5.3's `sz.h`. Large sizes are
//! page-rounded only through the rule itself: from 16 KiB on the step is
//! at least a page, so every class is a page multiple. (jemalloc's dev
//! branch adds `limit_usize_gap`, which rounds large sizes to a page only;
//! 5.3, which `tikv-jemalloc-sys` 0.6 builds, does not.) The per-extent
//! guard page of `cache_oblivious` is not part of the usable size and is
//! left out, as `malloc_usable_size` leaves it out.

/// Smallest class: jemalloc's one tiny class on 64-bit with a 16-byte
/// quantum.
const TINY: usize = 8;
/// log2 of the quantum: classes up to 128 bytes are 16 apart.
const LG_QUANTUM: u32 = 4;
/// log2 of the classes per doubling.
const LG_NGROUP: u32 = 2;

/// The size jemalloc 5 hands out for a `request`-byte allocation.
///
/// `0` maps to `0`, not to the 8 a `malloc(0)` would get: Rust never
/// allocates for an empty `Vec`, `Box<[u8]>` or `String`, so a zero
/// capacity costs nothing. Requests past the largest class saturate to
/// `usize::MAX` (such an allocation fails anyway).
pub fn alloc_size(request: usize) -> usize {
    if request == 0 {
        return 0;
    }
    if request <= TINY {
        return TINY;
    }
    // `x` = ceil(log2(request)): the class lies in (2^(x-1), 2^x]. Written
    // with the bit length of `request - 1` rather than jemalloc's
    // `lg_floor(2 * request - 1)` so that huge requests cannot overflow.
    let x = usize::BITS - (request - 1).leading_zeros();
    // Within (2^(x-1), 2^x] there are 2^LG_NGROUP classes, so the step is
    // 2^(x-1-LG_NGROUP); never below the quantum, which is what makes
    // 16..=128 evenly 16 apart.
    let lg_delta = (x - 1).saturating_sub(LG_NGROUP).max(LG_QUANTUM);
    let mask = (1usize << lg_delta) - 1;
    request.checked_add(mask).map_or(usize::MAX, |r| r & !mask)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples() {
        assert_eq!(alloc_size(0), 0);
        assert_eq!(alloc_size(1), 8);
        assert_eq!(alloc_size(8), 8);
        assert_eq!(alloc_size(9), 16);
        assert_eq!(alloc_size(17), 32);
        assert_eq!(alloc_size(33), 48);
        assert_eq!(alloc_size(65), 80);
        assert_eq!(alloc_size(100), 112);
        assert_eq!(alloc_size(116), 128);
        assert_eq!(alloc_size(128), 128);
        assert_eq!(alloc_size(129), 160);
        assert_eq!(alloc_size(257), 320);
        assert_eq!(alloc_size(4097), 5120);
        assert_eq!(alloc_size(usize::MAX), usize::MAX);
    }

    /// Pairs read from jemalloc 5.3 itself (`nallocx(size, 0)` from the
    /// `libjemalloc.a` that `tikv-jemalloc-sys` 0.6.1 builds), around the
    /// small/large boundary and far into the large classes. The same
    /// check over every size up to 2 MiB matched too; it is not kept here
    /// because the store crate does not link jemalloc.
    #[test]
    fn matches_jemalloc_nallocx() {
        for (req, got) in [
            (14336, 14336),
            (14337, 16384),
            (16384, 16384),
            (16385, 20480),
            (1 << 30, 1 << 30),
            ((1 << 30) + 1, 1_342_177_280),
            ((3 << 33) + 12345, 30_064_771_072),
            ((1 << 40) - 7, 1 << 40),
        ] {
            assert_eq!(alloc_size(req), got, "{req}");
        }
    }

    #[test]
    fn four_classes_per_doubling_and_page_multiples_when_large() {
        let mut classes = Vec::new();
        let mut prev = 0;
        for req in 1..=(1 << 18) {
            let c = alloc_size(req);
            assert!(c >= req && c >= prev);
            // A class maps to itself: rounding is idempotent.
            assert_eq!(alloc_size(c), c);
            if c != prev {
                classes.push(c);
                prev = c;
            }
        }
        assert_eq!(
            classes[..16],
            [
                8, 16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448
            ]
        );
        // Past 64, each doubling (2^k, 2^(k+1)] holds exactly four classes.
        for k in 6..17 {
            let n = classes
                .iter()
                .filter(|&&c| c > 1 << k && c <= 1 << (k + 1))
                .count();
            assert_eq!(n, 4, "(2^{k}, 2^{}]", k + 1);
        }
        for &c in classes.iter().filter(|&&c| c >= 16 * 1024) {
            assert_eq!(c % 4096, 0, "{c}");
        }
    }
}
