//! A client's reply buffer: encoded reply bytes, plus large values held by
//! reference instead of copied in.
//!
//! A GET of a 100 MB string would otherwise copy 100 MB into the reply on
//! the thread that executes commands, holding up every other client. The
//! keyspace keeps large strings as immutable shared buffers
//! ([`SharedBytes`]); a reply takes another reference to one and records
//! where in the byte stream it goes. The socket layer then sends the bytes
//! and the referenced values as one iovec list, never copying the value.
//!
//! ```text
//!  bytes: "$1048576\r\n" "\r\n" "+OK\r\n"
//!                       ▲
//!  refs:  at 10 ────────┘ Arc<[u8]> (1 MiB, shared with the keyspace)
//!  sent as: bytes[..10], value, bytes[10..]
//! ```

use std::sync::Arc;

/// An immutable byte string shared between the keyspace and the replies
/// being sent.
pub type SharedBytes = Arc<[u8]>;

/// One value held by reference: it goes before `bytes[at..]`.
#[derive(Clone)]
struct RefSeg {
    at: usize,
    data: SharedBytes,
}

/// The references of a [`ReplyBuf`] (a [`crate::ReplyWriter`] borrows them
/// next to the bytes).
#[derive(Clone, Default)]
pub struct Refs {
    /// In stream order: `at` never decreases.
    segs: Vec<RefSeg>,
    /// Total length of the referenced values.
    len: usize,
}

impl Refs {
    pub(crate) fn push(&mut self, at: usize, data: &SharedBytes) {
        debug_assert!(self.segs.last().is_none_or(|s| s.at <= at));
        self.len += data.len();
        self.segs.push(RefSeg {
            at,
            data: Arc::clone(data),
        });
    }
}

/// Where a reply began, to measure or drop it afterwards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    pub bytes: usize,
    refs: usize,
}

/// Reply bytes with large values by reference. What goes on the wire is
/// [`ReplyBuf::segments`]; its length, [`ReplyBuf::len`], counts the
/// referenced values as if they had been copied in.
#[derive(Clone, Default)]
pub struct ReplyBuf {
    pub bytes: Vec<u8>,
    refs: Refs,
}

impl std::fmt::Debug for ReplyBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplyBuf")
            .field("bytes", &self.bytes.len())
            .field("refs", &self.refs.segs.len())
            .field("ref_bytes", &self.refs.len)
            .finish()
    }
}

impl ReplyBuf {
    pub fn new() -> ReplyBuf {
        ReplyBuf::default()
    }

    pub fn with_capacity(n: usize) -> ReplyBuf {
        ReplyBuf {
            bytes: Vec::with_capacity(n),
            refs: Refs::default(),
        }
    }

    /// Bytes on the wire: the encoded bytes plus every referenced value.
    pub fn len(&self) -> usize {
        self.bytes.len() + self.refs.len
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty() && self.refs.segs.is_empty()
    }

    /// Some value is held by reference (the send needs an iovec list).
    pub fn has_refs(&self) -> bool {
        !self.refs.segs.is_empty()
    }

    /// Capacity of the byte part.
    pub fn capacity(&self) -> usize {
        self.bytes.capacity()
    }

    /// Empty it, keeping the byte allocation. References are dropped here:
    /// see [`ReplyBuf::take_refs`] for a thread that must not drop them.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.refs.segs.clear();
        self.refs.len = 0;
    }

    pub fn extend_from_slice(&mut self, b: &[u8]) {
        self.bytes.extend_from_slice(b);
    }

    /// Append `data` by reference.
    pub fn push_shared(&mut self, data: &SharedBytes) {
        self.refs.push(self.bytes.len(), data);
    }

    /// The buffer's end, for [`ReplyBuf::truncate`] or measuring a reply.
    pub fn mark(&self) -> Mark {
        Mark {
            bytes: self.bytes.len(),
            refs: self.refs.segs.len(),
        }
    }

    /// Drop everything written after `m`.
    pub fn truncate(&mut self, m: Mark) {
        self.bytes.truncate(m.bytes);
        for s in self.refs.segs.drain(m.refs.min(self.refs.segs.len())..) {
            self.refs.len -= s.data.len();
        }
    }

    /// Move `other`'s content to the end of this one (`other` is left
    /// empty). Taken over whole, without copying its bytes, when this one
    /// is empty.
    pub fn append(&mut self, other: &mut ReplyBuf) {
        if self.is_empty() {
            std::mem::swap(self, other);
            return;
        }
        let base = self.bytes.len();
        self.bytes.extend_from_slice(&other.bytes);
        other.bytes.clear();
        self.refs.len += other.refs.len;
        other.refs.len = 0;
        self.refs
            .segs
            .extend(other.refs.segs.drain(..).map(|s| RefSeg {
                at: s.at + base,
                data: s.data,
            }));
    }

    /// Move the references out (into `spent`), leaving only the bytes: for
    /// a buffer that was sent or is being discarded, whose values must be
    /// released by the thread that allocated them.
    pub fn take_refs(&mut self, spent: &mut Vec<SharedBytes>) {
        spent.extend(self.refs.segs.drain(..).map(|s| s.data));
        self.refs.len = 0;
    }

    /// The wire content from logical offset `from` on, as contiguous
    /// slices in order (empty ones skipped); stops early when `f` returns
    /// false.
    pub fn segments(&self, from: usize, mut f: impl FnMut(&[u8]) -> bool) {
        let mut skip = from;
        let mut emit = |s: &[u8]| -> bool {
            if skip >= s.len() {
                skip -= s.len();
                return true;
            }
            let s = &s[skip..];
            skip = 0;
            f(s)
        };
        let mut pos = 0;
        for seg in &self.refs.segs {
            if !emit(&self.bytes[pos..seg.at]) || !emit(&seg.data) {
                return;
            }
            pos = seg.at;
        }
        emit(&self.bytes[pos..]);
    }

    /// The whole wire content, copied (tests, and callers that need one
    /// slice).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len());
        self.segments(0, |s| {
            v.extend_from_slice(s);
            true
        });
        v
    }

    pub(crate) fn parts(&mut self) -> (&mut Vec<u8>, &mut Refs) {
        (&mut self.bytes, &mut self.refs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(b: &[u8]) -> SharedBytes {
        Arc::from(b)
    }

    /// "a" [XYZ] "bc" [] "" [Q] "d"
    fn sample() -> ReplyBuf {
        let mut r = ReplyBuf::new();
        r.extend_from_slice(b"a");
        r.push_shared(&shared(b"XYZ"));
        r.extend_from_slice(b"bc");
        r.push_shared(&shared(b""));
        r.push_shared(&shared(b"Q"));
        r.extend_from_slice(b"d");
        r
    }

    fn from(r: &ReplyBuf, at: usize) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        r.segments(at, |s| {
            v.push(s.to_vec());
            true
        });
        v
    }

    #[test]
    fn segments_in_order_from_any_offset() {
        let r = sample();
        assert_eq!(r.len(), 8);
        assert_eq!(r.to_vec(), b"aXYZbcQd");
        let whole = b"aXYZbcQd";
        for at in 0..=whole.len() {
            let segs = from(&r, at);
            assert!(segs.iter().all(|s| !s.is_empty()), "at {at}: {segs:?}");
            assert_eq!(segs.concat(), &whole[at..], "at {at}");
        }
        assert_eq!(
            from(&r, 2),
            vec![b"YZ".to_vec(), b"bc".to_vec(), b"Q".to_vec(), b"d".to_vec()]
        );
    }

    #[test]
    fn segments_stop_when_asked() {
        let r = sample();
        let mut n = 0;
        r.segments(0, |_| {
            n += 1;
            n < 2
        });
        assert_eq!(n, 2);
    }

    #[test]
    fn append_shifts_references() {
        let mut a = ReplyBuf::new();
        a.extend_from_slice(b"12");
        let mut b = sample();
        a.append(&mut b);
        assert!(b.is_empty() && !b.has_refs());
        assert_eq!(a.to_vec(), b"12aXYZbcQd");
        assert_eq!(a.len(), 10);
        // Into an empty buffer: taken over whole.
        let mut e = ReplyBuf::new();
        e.append(&mut a);
        assert_eq!(e.to_vec(), b"12aXYZbcQd");
        assert!(a.is_empty());
    }

    #[test]
    fn truncate_to_a_mark_drops_later_references() {
        let mut r = ReplyBuf::new();
        r.extend_from_slice(b"$3\r\n");
        r.push_shared(&shared(b"abc"));
        r.extend_from_slice(b"\r\n");
        let m = r.mark();
        r.extend_from_slice(b"$4\r\n");
        r.push_shared(&shared(b"wxyz"));
        r.extend_from_slice(b"\r\n");
        assert_eq!(r.len(), 9 + 10);
        r.truncate(m);
        assert_eq!(r.to_vec(), b"$3\r\nabc\r\n");
        assert_eq!(r.len(), 9);
    }

    #[test]
    fn take_refs_hands_the_values_over() {
        let v = shared(b"value");
        let mut r = ReplyBuf::new();
        r.extend_from_slice(b"x");
        r.push_shared(&v);
        assert_eq!(Arc::strong_count(&v), 2);
        let mut spent = Vec::new();
        r.take_refs(&mut spent);
        assert_eq!(spent.len(), 1);
        assert!(!r.has_refs());
        assert_eq!(r.len(), 1);
        drop(spent);
        assert_eq!(Arc::strong_count(&v), 1);
    }
}
