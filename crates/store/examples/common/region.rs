//! Memory for the roofline examples: one anonymous mapping, optionally on
//! transparent huge pages, every page touched.

/// An anonymous mapping of `len` bytes, every page touched (filled with 1s).
pub fn region(len: usize, thp: bool) -> &'static mut [u8] {
    // SAFETY: an anonymous private mapping, checked below.
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
    // SAFETY: `len` readable and writable bytes, mapped until the caller
    // unmaps them (or the process exits).
    let s = unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), len) };
    s.fill(1);
    s
}
