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

impl StrPack {
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
        let head = self.body_start();
        let start = start.max(head);
        let end = end.max(head);
        let n = (self.len() - removed + items.len()) as u64;
        if n == 0 {
            self.buf = Box::default();
            return;
        }
        let extra: usize = items
            .iter()
            .map(|s| varint_len(s.len() as u64) + s.len())
            .sum();
        let mut out =
            Vec::with_capacity(varint_len(n) + (start - head) + extra + (self.buf.len() - end));
        put_varint(&mut out, n);
        out.extend_from_slice(&self.buf[head..start]);
        for s in items {
            encode(&mut out, s);
        }
        out.extend_from_slice(&self.buf[end..]);
        self.buf = out.into_boxed_slice();
    }

    /// Build from entries.
    pub fn from_items<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> StrPack {
        let mut body = Vec::new();
        let mut n = 0u64;
        for s in items {
            encode(&mut body, s);
            n += 1;
        }
        if n == 0 {
            return StrPack::default();
        }
        let mut buf = Vec::with_capacity(varint_len(n) + body.len());
        put_varint(&mut buf, n);
        buf.extend_from_slice(&body);
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
}
