//! Shared by the roofline examples: memory mapped for the run, and the
//! GET/SET stand-in applied to one value.

use std::ops::{Deref, DerefMut};

/// An anonymous mapping, optionally on transparent huge pages, every page
/// touched (filled with 1s); unmapped when dropped.
pub struct Region {
    ptr: *mut u8,
    len: usize,
}

impl Region {
    pub fn new(len: usize, thp: bool) -> Region {
        // SAFETY: a fresh private anonymous mapping, checked below; no
        // existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED, "mmap {len} bytes");
        if thp {
            // SAFETY: advice on the mapping made above; no contents change.
            unsafe { libc::madvise(p, len, libc::MADV_HUGEPAGE) };
        }
        let mut r = Region { ptr: p.cast(), len };
        r.fill(1);
        r
    }
}

impl Deref for Region {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `len` readable bytes, mapped while `self` lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl DerefMut for Region {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, writable, and `&mut self` is unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, no longer borrowed.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// What a GET or SET does to a value's bytes: read one byte per cache
/// line (returned summed, for `black_box`), or overwrite it with `src`.
pub fn touch(value: &mut [u8], write: bool, src: &[u8]) -> usize {
    if write {
        value.copy_from_slice(src);
        0
    } else {
        value.iter().step_by(64).map(|&b| b as usize).sum()
    }
}
