//! A compact list of byte strings in one exact-size buffer: the `listpack`
//! encoding of small hashes (field, value, field, value, ...) and small
//! sets (member, member, ...).
//!
//! ```text
//!   [count: varint] entry*
//!   entry = [len: varint] [bytes]
//! ```
//!
//! A string of up to 127 bytes costs one header byte, so ten hash fields
//! `f0`..`f9` with 8-byte values take 121 bytes (Valkey's listpack: two
//! bytes of overhead per entry, plus a 7-byte header). Every operation is a
//! linear walk, as with Valkey's listpack; the encoding only holds up to
//! the `*-max-listpack-entries` limits. The buffer is kept at its exact
//! size: a million small collections are what this encoding is for.

use crate::defrag::Mover;

/// Append `v` as a LEB128 varint.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Read a varint at `*at`, advancing it.
pub(crate) fn get_varint(b: &[u8], at: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let byte = b[*at];
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return v;
        }
        shift += 7;
    }
}

pub(crate) fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct StrPack {
    /// A boxed slice, not a Vec: 16 bytes, and always exact-size.
    buf: Box<[u8]>,
}

/// One entry and the byte span it occupies.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot<'a> {
    pub bytes: &'a [u8],
    pub start: usize,
    pub end: usize,
}

#[derive(Clone)]
pub(crate) struct Iter<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Slot<'a>;
    #[inline]
    fn next(&mut self) -> Option<Slot<'a>> {
        if self.at >= self.buf.len() {
            return None;
        }
        let start = self.at;
        let len = get_varint(self.buf, &mut self.at) as usize;
        let bytes = &self.buf[self.at..self.at + len];
        self.at += len;
        Some(Slot {
            bytes,
            start,
            end: self.at,
        })
    }
}

fn encode(out: &mut Vec<u8>, s: &[u8]) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// Bytes `s` takes as an entry.
fn entry_len(s: &[u8]) -> usize {
    varint_len(s.len() as u64) + s.len()
}

/// Write `v` as a varint at the start of `out`; returns its length.
fn write_varint(out: &mut [u8], mut v: u64) -> usize {
    let mut at = 0;
    while v >= 0x80 {
        out[at] = (v as u8) | 0x80;
        v >>= 7;
        at += 1;
    }
    out[at] = v as u8;
    at + 1
}

/// Write `s` as an entry at the start of `out`; returns the rest of `out`.
fn write_entry<'o>(out: &'o mut [u8], s: &[u8]) -> &'o mut [u8] {
    let at = write_varint(out, s.len() as u64);
    out[at..at + s.len()].copy_from_slice(s);
    &mut out[at + s.len()..]
}

impl StrPack {
    /// Offer the buffer to active defragmentation.
    pub(crate) fn relocate(&mut self, m: &mut Mover<'_>) {
        m.bytes(&mut self.buf);
    }

    /// Start the miss of the buffer's first line (a walk over many
    /// values asks for it ahead of reading).
    pub fn prefetch(&self) {
        crate::table::prefetch_ptr(self.buf.as_ptr());
    }
    /// Number of entries.
    pub fn len(&self) -> usize {
        if self.buf.is_empty() {
            return 0;
        }
        let mut at = 0;
        get_varint(&self.buf, &mut at) as usize
    }

    fn body_start(&self) -> usize {
        if self.buf.is_empty() {
            0
        } else {
            varint_len(self.len() as u64)
        }
    }

    pub fn iter(&self) -> Iter<'_> {
        Iter {
            at: self.body_start(),
            buf: &self.buf,
        }
    }

    /// Bytes of the encoding (tests compare it with the size class that
    /// [`StrPack::memory_usage`] reports).
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// The encoded buffer, for a quicklist that compresses the node.
    pub fn encoded(&self) -> &[u8] {
        &self.buf
    }

    /// A pack from bytes [`StrPack::encoded`] gave (a compressed quicklist
    /// node restored).
    pub fn from_encoded(buf: Box<[u8]>) -> StrPack {
        StrPack { buf }
    }

    /// Bytes the allocator holds for the buffer: its exact length (a boxed
    /// slice has no spare capacity) rounded up to jemalloc's size class.
    pub fn memory_usage(&self) -> usize {
        crate::alloc_size(self.buf.len())
    }

    /// Append entries at the end.
    pub fn push(&mut self, items: &[&[u8]]) {
        let end = self.buf.len();
        self.splice(end, end, 0, items);
    }

    /// Replace the bytes `start..end` (whole entries, `removed` of them;
    /// an empty span inserts there) with `items`.
    pub fn splice(&mut self, start: usize, end: usize, removed: usize, items: &[&[u8]]) {
        let count = (self.len() - removed + items.len()) as u64;
        let extra: usize = items.iter().map(|s| entry_len(s)).sum();
        self.replace_bytes(start, end, count, extra, |mut out| {
            for s in items {
                out = write_entry(out, s);
            }
        });
    }

    /// Append every entry of `other` (a quicklist merging two nodes).
    pub fn append(&mut self, other: &StrPack) {
        if other.buf.is_empty() {
            return;
        }
        let body = &other.buf[other.body_start()..];
        let end = self.buf.len();
        let count = (self.len() + other.len()) as u64;
        self.replace_bytes(end, end, count, body.len(), |out| out.copy_from_slice(body));
    }

    /// Split after the first `at` entries: `self` keeps them, the rest is
    /// returned (a quicklist splitting a full node).
    pub fn split_off(&mut self, at: usize) -> StrPack {
        let len = self.len();
        let Some(first) = self.iter().nth(at) else {
            return StrPack::default();
        };
        let start = first.start;
        let rest = &self.buf[start..];
        let mut buf = Vec::with_capacity(varint_len((len - at) as u64) + rest.len());
        put_varint(&mut buf, (len - at) as u64);
        buf.extend_from_slice(rest);
        let end = self.buf.len();
        self.replace_bytes(start, end, at as u64, 0, |_| {});
        StrPack {
            buf: buf.into_boxed_slice(),
        }
    }

    /// Replace the body bytes `start..end` with `extra` bytes that `fill`
    /// writes, and make the count `count`. The buffer is edited in place
    /// (grown or shrunk to its exact new size) rather than copied into a
    /// new one: a quicklist node of several KiB takes one push at an end
    /// after another, and reallocating in place within a size class is
    /// what keeps that cheap.
    fn replace_bytes(
        &mut self,
        start: usize,
        end: usize,
        count: u64,
        extra: usize,
        fill: impl FnOnce(&mut [u8]),
    ) {
        if count == 0 {
            self.buf = Box::default();
            return;
        }
        let head = self.body_start();
        let start = start.max(head);
        let end = end.max(head);
        let mut v = std::mem::take(&mut self.buf).into_vec();
        let old_len = v.len();
        let new_len = old_len - (end - start) + extra;
        if new_len > old_len {
            // Exact: the buffer is boxed back without spare capacity.
            v.reserve_exact(new_len - old_len);
            v.resize(new_len, 0);
        }
        v.copy_within(end..old_len, start + extra);
        v.truncate(new_len);
        fill(&mut v[start..start + extra]);
        // The count header, rewritten in place unless its length changed.
        let mut header = [0u8; 10];
        let header_len = write_varint(&mut header, count);
        let header = &header[..header_len];
        if header.len() == head {
            v[..head].copy_from_slice(header);
        } else {
            v.reserve_exact(header.len().saturating_sub(head));
            v.splice(..head, header.iter().copied());
        }
        self.buf = v.into_boxed_slice();
    }

    /// Build from entries.
    pub fn from_items<'a, I>(items: I) -> StrPack
    where
        I: IntoIterator<Item = &'a [u8]>,
        I::IntoIter: Clone,
    {
        let items = items.into_iter();
        // Sized first: one exact allocation, nothing to grow or copy.
        let (n, body) = items
            .clone()
            .fold((0u64, 0usize), |(n, b), s| (n + 1, b + entry_len(s)));
        if n == 0 {
            return StrPack::default();
        }
        let mut buf = Vec::with_capacity(varint_len(n) + body);
        put_varint(&mut buf, n);
        for s in items {
            encode(&mut buf, s);
        }
        StrPack {
            buf: buf.into_boxed_slice(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(p: &StrPack) -> Vec<Vec<u8>> {
        p.iter().map(|s| s.bytes.to_vec()).collect()
    }

    #[test]
    fn push_splice_retain_round_trip() {
        let mut p = StrPack::default();
        assert_eq!(p.len(), 0);
        p.push(&[b"a", b"bb"]);
        let long = vec![b'x'; 300];
        p.push(&[&long, b""]);
        assert_eq!(p.len(), 4);
        assert_eq!(
            items(&p),
            vec![b"a".to_vec(), b"bb".to_vec(), long.clone(), vec![]]
        );
        // Replace "bb" by two entries.
        let s = p.iter().nth(1).unwrap();
        p.splice(s.start, s.end, 1, &[b"c", b"d"]);
        assert_eq!(p.len(), 5);
        assert_eq!(items(&p)[1..3], [b"c".to_vec(), b"d".to_vec()]);
        // Remove the long one.
        let s = p.iter().nth(3).unwrap();
        p.splice(s.start, s.end, 1, &[]);
        assert_eq!(
            items(&p),
            vec![b"a".to_vec(), b"c".to_vec(), b"d".to_vec(), vec![]]
        );
        while let Some(s) = p.iter().next() {
            p.splice(s.start, s.end, 1, &[]);
        }
        assert_eq!(p.len(), 0);
        assert_eq!(p.bytes(), 0);
        assert_eq!(p.memory_usage(), 0);
    }

    #[test]
    fn memory_usage_is_the_size_class_of_the_buffer() {
        // Count byte + 33 entries of "mNN" (1 + 3 bytes each) = 133 bytes,
        // which jemalloc serves from its 160-byte class.
        let v: Vec<Vec<u8>> = (10..43).map(|i| format!("m{i}").into_bytes()).collect();
        let p = StrPack::from_items(v.iter().map(|x| x.as_slice()));
        assert_eq!(p.bytes(), 133);
        assert_eq!(p.memory_usage(), 160);
    }

    #[test]
    fn count_header_grows_past_one_byte() {
        let v: Vec<Vec<u8>> = (0..200).map(|i| format!("m{i}").into_bytes()).collect();
        let p = StrPack::from_items(v.iter().map(|x| x.as_slice()));
        assert_eq!(p.len(), 200);
        assert_eq!(items(&p), v);
        let mut q = StrPack::default();
        for x in &v {
            q.push(&[x]);
        }
        assert!(q == p);
        let s = q.iter().nth(5).unwrap();
        q.splice(s.start, s.end, 1, &[]);
        assert_eq!(q.len(), 199);
        // Shrinking below 128 entries shortens the header.
        for _ in 0..100 {
            let s = q.iter().next().unwrap();
            q.splice(s.start, s.end, 1, &[]);
        }
        assert_eq!(q.len(), 99);
        assert_eq!(q.iter().count(), 99);
        assert_eq!(q.iter().next().unwrap().bytes, b"m101");
    }

    #[test]
    fn append_and_split_off_keep_entries_and_counts() {
        let v: Vec<Vec<u8>> = (0..300).map(|i| format!("e{i}").into_bytes()).collect();
        for at in [0, 1, 127, 128, 129, 200, 299, 300] {
            let mut p = StrPack::from_items(v.iter().map(|x| x.as_slice()));
            let rest = p.split_off(at);
            assert_eq!(p.len(), at);
            assert_eq!(rest.len(), 300 - at);
            assert_eq!(items(&p), v[..at]);
            assert_eq!(items(&rest), v[at..]);
            // Exact size after the split, as from_items builds it.
            assert!(p == StrPack::from_items(v[..at].iter().map(|x| x.as_slice())));
            p.append(&rest);
            assert!(p == StrPack::from_items(v.iter().map(|x| x.as_slice())));
        }
        let mut e = StrPack::default();
        e.append(&StrPack::default());
        assert_eq!(e.bytes(), 0);
    }

    #[test]
    fn splice_in_place_matches_a_rebuild() {
        let v: Vec<Vec<u8>> = (0..140).map(|i| vec![b'x'; i % 7 * 40]).collect();
        let mut p = StrPack::default();
        let mut model: Vec<Vec<u8>> = Vec::new();
        for (i, x) in v.iter().enumerate() {
            // Insert at the front, the middle and the end in turn.
            let at = [0, model.len() / 2, model.len()][i % 3];
            match p.iter().nth(at) {
                Some(s) => p.splice(s.start, s.start, 0, &[x]),
                None => p.push(&[x]),
            }
            model.insert(at, x.clone());
            assert!(p == StrPack::from_items(model.iter().map(|x| x.as_slice())));
        }
        while !model.is_empty() {
            let at = model.len() / 3;
            let s = p.iter().nth(at).unwrap();
            p.splice(s.start, s.end, 1, &[b"ab"]);
            model[at] = b"ab".to_vec();
            let s = p.iter().nth(at).unwrap();
            p.splice(s.start, s.end, 1, &[]);
            model.remove(at);
            assert!(p == StrPack::from_items(model.iter().map(|x| x.as_slice())));
        }
        assert_eq!(p.bytes(), 0);
    }
}
