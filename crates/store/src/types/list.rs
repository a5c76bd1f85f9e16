//! The list value type.
//!
//! ```text
//!   List ─┬─ Pack               listpack: elements in one exact-size buffer
//!         │                     (strpack.rs), while within
//!         │                     `list-max-listpack-size`
//!         └─ Box<Deque>         quicklist: a ring buffer of elements, O(1)
//!                               push/pop at both ends and O(1) index
//! ```
//!
//! Conversions follow Valkey 8 (`t_list.c`): a listpack that would grow
//! past `list-max-listpack-size` (negative: -1..-5 = 4..64 KiB of
//! listpack bytes; positive: that many entries) becomes a quicklist; a
//! quicklist that shrinks to half the limit becomes a listpack again.
//! Listpack bytes are estimated as Valkey's listpack spends them: a
//! 7-byte header and trailer, and per entry its length, one or more
//! header bytes and a back-length byte or more.
//!
//! Unlike Valkey's quicklist (a linked list of listpack nodes), the large
//! encoding here is a `VecDeque` of boxed elements: simpler, O(1) LINDEX,
//! more bytes per element. The memory bar is on small collections, which
//! stay packed.

use super::strpack::{StrPack, varint_len};
use crate::EncodingLimits;
use std::collections::VecDeque;

#[derive(Clone, Default)]
enum Repr {
    #[default]
    Empty,
    Pack(StrPack),
    Deque(Box<Deque>),
}

#[derive(Clone, Default)]
struct Deque {
    items: VecDeque<Box<[u8]>>,
    /// Sum of [`lp_entry_bytes`] of the items.
    lp_bytes: usize,
}

/// A list value.
#[derive(Clone, Default)]
pub struct List {
    repr: Repr,
}

impl PartialEq for List {
    fn eq(&self, other: &List) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl std::fmt::Debug for List {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.iter().map(String::from_utf8_lossy))
            .finish()
    }
}

/// Which end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Left,
    Right,
}

/// Bytes an element costs in a Valkey listpack (encoding header, data,
/// back-length), for the conversion thresholds.
fn lp_entry_bytes(e: &[u8]) -> usize {
    let n = e.len();
    let head = if n < 64 {
        1
    } else if n < 4096 {
        2
    } else {
        5
    };
    let body = head + n;
    body + varint_len(body as u64)
}

const LP_HEADER: usize = 7;

/// Listpack size limit: (bytes, entries).
fn limits_of(l: &EncodingLimits) -> (usize, usize) {
    match l.list_max_listpack_size {
        n if n > 0 => (usize::MAX, n as usize),
        n => {
            let kib = match n {
                -1 => 4,
                -2 => 8,
                -3 => 16,
                -4 => 32,
                _ => 64,
            };
            (kib * 1024, usize::MAX)
        }
    }
}

impl List {
    pub fn new() -> List {
        List::default()
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Empty => 0,
            Repr::Pack(p) => p.len(),
            Repr::Deque(d) => d.items.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the allocator holds for this list's heap data, each
    /// allocation rounded up to jemalloc's size class (see
    /// [`crate::alloc_size`]): the pack's buffer, or the boxed deque with
    /// its ring buffer (spare capacity included) and one allocation per
    /// element. The `Value` holding the list is not counted.
    pub fn memory_usage(&self) -> usize {
        use crate::alloc_size;
        match &self.repr {
            Repr::Empty => 0,
            Repr::Pack(p) => p.memory_usage(),
            Repr::Deque(d) => {
                alloc_size(std::mem::size_of::<Deque>())
                    + alloc_size(d.items.capacity() * std::mem::size_of::<Box<[u8]>>())
                    + d.items.iter().map(|e| alloc_size(e.len())).sum::<usize>()
            }
        }
    }

    /// OBJECT ENCODING, with Valkey's names.
    pub fn encoding(&self) -> &'static str {
        match &self.repr {
            Repr::Deque(_) => "quicklist",
            _ => "listpack",
        }
    }

    pub fn iter(&self) -> Box<dyn DoubleEndedIterator<Item = &[u8]> + '_> {
        match &self.repr {
            Repr::Empty => Box::new(std::iter::empty()),
            Repr::Pack(p) => {
                let v: Vec<&[u8]> = p.iter().map(|s| s.bytes).collect();
                Box::new(v.into_iter())
            }
            Repr::Deque(d) => Box::new(d.items.iter().map(|b| &**b)),
        }
    }

    fn pack_bytes(p: &StrPack) -> usize {
        LP_HEADER + p.iter().map(|s| lp_entry_bytes(s.bytes)).sum::<usize>()
    }

    /// Convert to a deque if adding `adding` would pass the limits.
    fn grow_check(&mut self, adding: &[&[u8]], limits: &EncodingLimits) {
        let (max_bytes, max_entries) = limits_of(limits);
        if let Repr::Empty = self.repr {
            self.repr = Repr::Pack(StrPack::default());
        }
        let Repr::Pack(p) = &self.repr else {
            return;
        };
        let bytes = Self::pack_bytes(p) + adding.iter().map(|e| lp_entry_bytes(e)).sum::<usize>();
        if bytes > max_bytes || p.len() + adding.len() > max_entries {
            let items: VecDeque<Box<[u8]>> = p.iter().map(|s| s.bytes.into()).collect();
            let lp_bytes = items.iter().map(|e| lp_entry_bytes(e)).sum();
            self.repr = Repr::Deque(Box::new(Deque { items, lp_bytes }));
        }
    }

    /// After a removal: back to a listpack at half the limits; empty
    /// lists drop their buffers.
    fn shrink_check(&mut self, limits: &EncodingLimits) {
        if self.is_empty() {
            self.repr = Repr::Empty;
            return;
        }
        let (max_bytes, max_entries) = limits_of(limits);
        if let Repr::Deque(d) = &self.repr
            && LP_HEADER + d.lp_bytes <= max_bytes / 2
            && (max_entries == usize::MAX || d.items.len() <= max_entries / 2)
        {
            let p = StrPack::from_items(d.items.iter().map(|b| &**b));
            self.repr = Repr::Pack(p);
        }
    }

    /// Push `items` one by one at `end` (LPUSH a b c leaves c first).
    pub fn push(&mut self, end: End, items: &[&[u8]], limits: &EncodingLimits) {
        self.grow_check(items, limits);
        match &mut self.repr {
            Repr::Pack(p) => match end {
                End::Right => p.push(items),
                End::Left => {
                    let rev: Vec<&[u8]> = items.iter().rev().copied().collect();
                    p.splice(0, 0, 0, &rev);
                }
            },
            Repr::Deque(d) => {
                for e in items {
                    d.lp_bytes += lp_entry_bytes(e);
                    match end {
                        End::Left => d.items.push_front((*e).into()),
                        End::Right => d.items.push_back((*e).into()),
                    }
                }
            }
            Repr::Empty => unreachable!("grow_check set a representation"),
        }
    }

    /// Pop up to `n` from `end`, in pop order.
    pub fn pop(&mut self, end: End, n: usize, limits: &EncodingLimits) -> Vec<Vec<u8>> {
        let n = n.min(self.len());
        let mut out = Vec::with_capacity(n);
        match &mut self.repr {
            Repr::Empty => {}
            Repr::Pack(p) => {
                let all: Vec<&[u8]> = p.iter().map(|s| s.bytes).collect();
                let len = all.len();
                match end {
                    End::Left => out.extend(all[..n].iter().map(|e| e.to_vec())),
                    End::Right => out.extend(all[len - n..].iter().rev().map(|e| e.to_vec())),
                }
                let keep: Vec<&[u8]> = match end {
                    End::Left => all[n..].to_vec(),
                    End::Right => all[..len - n].to_vec(),
                };
                *p = StrPack::from_items(keep);
            }
            Repr::Deque(d) => {
                for _ in 0..n {
                    let e = match end {
                        End::Left => d.items.pop_front(),
                        End::Right => d.items.pop_back(),
                    }
                    .expect("n <= len");
                    d.lp_bytes -= lp_entry_bytes(&e);
                    out.push(e.into_vec());
                }
            }
        }
        self.shrink_check(limits);
        out
    }

    /// Element at a non-negative index.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        match &self.repr {
            Repr::Empty => None,
            Repr::Pack(p) => p.iter().nth(i).map(|s| s.bytes),
            Repr::Deque(d) => d.items.get(i).map(|b| &**b),
        }
    }

    /// Elements `start..=end` (already clamped, non-negative).
    pub fn range(&self, start: usize, end: usize) -> Vec<&[u8]> {
        match &self.repr {
            Repr::Deque(d) => d.items.range(start..=end).map(|b| &**b).collect(),
            _ => self.iter().skip(start).take(end + 1 - start).collect(),
        }
    }

    /// Replace the whole list (LSET, LINSERT, LREM, LTRIM rebuild it).
    pub fn replace_all(&mut self, items: Vec<Vec<u8>>, limits: &EncodingLimits) {
        self.repr = Repr::Empty;
        let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
        if refs.is_empty() {
            return;
        }
        // Re-encode for the new contents, keeping a deque a deque unless it
        // shrank enough (Valkey converts in place, with the same rules).
        self.push(End::Right, &refs, limits);
        self.shrink_check(limits);
    }

    /// Set element `i` (in range).
    pub fn set(&mut self, i: usize, v: &[u8], limits: &EncodingLimits) {
        match &mut self.repr {
            Repr::Deque(d) => {
                d.lp_bytes = d.lp_bytes - lp_entry_bytes(&d.items[i]) + lp_entry_bytes(v);
                d.items[i] = v.into();
            }
            Repr::Pack(p) => {
                let s = p.iter().nth(i).expect("in range");
                let (start, end) = (s.start, s.end);
                let old = s.bytes.len();
                p.splice(start, end, 1, &[v]);
                if v.len() > old {
                    // May have grown past the limits.
                    let items: Vec<Vec<u8>> = self.iter().map(<[u8]>::to_vec).collect();
                    self.replace_all(items, limits);
                }
            }
            Repr::Empty => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(l: &List) -> Vec<String> {
        l.iter()
            .map(|e| String::from_utf8(e.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn push_pop_both_ends_both_encodings() {
        for limit in [-2, 3] {
            let lim = EncodingLimits {
                list_max_listpack_size: limit,
                ..EncodingLimits::default()
            };
            let mut l = List::new();
            l.push(End::Left, &[b"a", b"b"], &lim);
            l.push(End::Right, &[b"c", b"d"], &lim);
            assert_eq!(items(&l), ["b", "a", "c", "d"]);
            assert_eq!(l.get(2), Some(&b"c"[..]));
            assert_eq!(l.range(1, 2), vec![&b"a"[..], &b"c"[..]]);
            assert_eq!(l.pop(End::Right, 1, &lim), vec![b"d".to_vec()]);
            assert_eq!(
                l.pop(End::Left, 5, &lim),
                vec![b"b".to_vec(), b"a".to_vec(), b"c".to_vec()]
            );
            assert!(l.is_empty());
        }
    }

    #[test]
    fn memory_usage_grows_and_rounds_to_size_classes() {
        let lim = EncodingLimits {
            list_max_listpack_size: 8,
            ..EncodingLimits::default()
        };
        let mut l = List::new();
        assert_eq!(l.memory_usage(), 0);
        // Count byte + (length byte + 1 byte) = 3 bytes: the 8-byte class.
        l.push(End::Right, &[b"a"], &lim);
        assert_eq!(l.memory_usage(), 8);
        let small = l.memory_usage();
        let mut last = small;
        for i in 0..100 {
            l.push(End::Right, &[format!("element{i}").as_bytes()], &lim);
            let now = l.memory_usage();
            assert!(now >= last, "{now} < {last} after {i}");
            last = now;
        }
        assert_eq!(l.encoding(), "quicklist");
        // 101 boxed elements (each at least the 8-byte class) plus their
        // 16-byte slots in the ring buffer.
        assert!(last >= small + 101 * (8 + 16));
        l.pop(End::Left, 101, &lim);
        assert_eq!(l.memory_usage(), 0);
    }

    #[test]
    fn converts_on_size_and_back_at_half() {
        let lim = EncodingLimits {
            list_max_listpack_size: 4,
            ..EncodingLimits::default()
        };
        let mut l = List::new();
        l.push(End::Right, &[b"1", b"2", b"3", b"4"], &lim);
        assert_eq!(l.encoding(), "listpack");
        l.push(End::Right, &[b"5"], &lim);
        assert_eq!(l.encoding(), "quicklist");
        l.pop(End::Left, 2, &lim);
        assert_eq!(l.encoding(), "quicklist");
        l.pop(End::Left, 1, &lim);
        assert_eq!(l.encoding(), "listpack");
        assert_eq!(items(&l), ["4", "5"]);
        // Bytes: 8 KiB by default.
        let lim = EncodingLimits::default();
        let big = vec![b'x'; 5000];
        let mut l = List::new();
        l.push(End::Right, &[&big], &lim);
        assert_eq!(l.encoding(), "listpack");
        l.push(End::Right, &[&big], &lim);
        assert_eq!(l.encoding(), "quicklist");
        l.set(0, b"small", &lim);
        l.pop(End::Right, 1, &lim);
        assert_eq!(l.encoding(), "listpack");
    }
}
