//! `locale-collate`: the C library's collation (setlocale(3) for
//! LC_COLLATE, strcoll(3)), which SORT ... ALPHA orders by, as Valkey's.
//! An empty name takes the locale from the environment (LC_ALL,
//! LC_COLLATE, LANG).

use std::cell::RefCell;
use std::cmp::Ordering;
use std::ffi::CString;

/// Make `name` the collation locale; false if the C library has no such
/// locale (nothing changes then).
pub fn set_locale(name: &str) -> bool {
    let Ok(name) = CString::new(name) else {
        return false;
    };
    // SAFETY: a NUL-terminated name; setlocale copies what it keeps. It
    // runs on the thread that runs commands, the only one that collates.
    !unsafe { libc::setlocale(libc::LC_COLLATE, name.as_ptr()) }.is_null()
}

thread_local! {
    /// The two strings, NUL-terminated, reused from compare to compare.
    static BUFS: RefCell<(Vec<u8>, Vec<u8>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// strcoll(3) of `a` and `b`, each up to its first NUL as a C string ends.
pub fn collate(a: &[u8], b: &[u8]) -> Ordering {
    BUFS.with_borrow_mut(|(x, y)| {
        for (buf, s) in [(&mut *x, a), (&mut *y, b)] {
            buf.clear();
            buf.extend_from_slice(&s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())]);
            buf.push(0);
        }
        // SAFETY: both buffers end in a NUL, as pushed just above.
        unsafe { libc::strcoll(x.as_ptr().cast(), y.as_ptr().cast()) }.cmp(&0)
    })
}
