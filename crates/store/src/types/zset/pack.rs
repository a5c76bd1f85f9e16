//! The compact encoding (`listpack`): every member/score pair of a small
//! sorted set in one contiguous byte buffer, kept in (score, member) order.
//!
//! ```text
//!   [count: varint] pair*
//!   pair  = 0LLLSSSS [member]                 tiny: member ≤ 7 bytes (L),
//!                                             score an integer 0..=15 (S)
//!         | 1LLLLLLL [len-127: varint if L=127] [member] [score]
//!   score = varint (zigzag(i) << 1)           an integral score, |i| < 2^53
//!         | 0x01 [f64 little-endian, 8B]      anything else (incl. ±inf)
//! ```
//!
//! The tiny form is what small sets of short members with small scores
//! (ranks, counters, flags) look like: `ZADD k 1 m1` stores 3 bytes, so
//! ten such pairs and the count fit jemalloc's 32-byte class. Otherwise a
//! member of up to 126 bytes costs one header byte and a score like `42`
//! one more. Every
//! operation is a linear walk, which is what Valkey's listpack does too:
//! the encoding only holds up to `zset-max-listpack-entries` pairs.
//! The buffer is kept at its exact size (no spare capacity), since a
//! million small sets are what this encoding is for.

use crate::defrag::Mover;

/// Tag of a score stored as a raw double (even tags are integers).
const F64_TAG: u64 = 1;
/// Integral scores below this magnitude are stored as varints; all of
/// them convert to f64 exactly.
const INT_LIMIT: f64 = (1u64 << 53) as f64;

#[derive(Clone, Default, PartialEq)]
pub(crate) struct Pack {
    buf: Vec<u8>,
}

/// One decoded pair and where it sits in the buffer.
#[derive(Clone, Copy)]
pub(crate) struct Item<'a> {
    pub member: &'a [u8],
    pub score: f64,
    pub start: usize,
    pub end: usize,
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(b: &[u8], at: &mut usize) -> u64 {
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

fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Longest member of the tiny pair form, and its largest score.
const TINY_LEN: usize = 7;
const TINY_SCORE: f64 = 15.0;
/// Header value meaning "length continues in a varint".
const LONG_LEN: usize = 0x7f;

/// -0 is stored as the integer 0 and reads back as 0, as in Valkey's
/// listpack (its skiplist keeps the sign: `ZSCORE` answers `-0` there).
fn is_int_score(score: f64) -> bool {
    score.fract() == 0.0 && score.abs() < INT_LIMIT
}

fn is_tiny(member: &[u8], score: f64) -> bool {
    member.len() <= TINY_LEN && (0.0..=TINY_SCORE).contains(&score) && score.fract() == 0.0
}

fn zigzag_tag(score: f64) -> u64 {
    let i = score as i64;
    (((i << 1) ^ (i >> 63)) as u64) << 1
}

/// Append one encoded pair.
fn encode_pair(out: &mut Vec<u8>, member: &[u8], score: f64) {
    if is_tiny(member, score) {
        out.push(((member.len() as u8) << 4) | score as u8);
        out.extend_from_slice(member);
        return;
    }
    let len = member.len();
    out.push(0x80 | len.min(LONG_LEN) as u8);
    if len >= LONG_LEN {
        put_varint(out, (len - LONG_LEN) as u64);
    }
    out.extend_from_slice(member);
    if is_int_score(score) {
        put_varint(out, zigzag_tag(score));
    } else {
        put_varint(out, F64_TAG);
        out.extend_from_slice(&score.to_le_bytes());
    }
}

fn pair_len(member: &[u8], score: f64) -> usize {
    let len = member.len();
    if is_tiny(member, score) {
        return 1 + len;
    }
    let head = 1 + if len >= LONG_LEN {
        varint_len((len - LONG_LEN) as u64)
    } else {
        0
    };
    let s = if is_int_score(score) {
        varint_len(zigzag_tag(score))
    } else {
        9
    };
    head + len + s
}

/// `a` sorts before `b` in (score, member) order.
#[inline]
pub(crate) fn less(sa: f64, ma: &[u8], sb: f64, mb: &[u8]) -> bool {
    sa < sb || (sa == sb && ma < mb)
}

impl Pack {
    /// Offer the buffer to active defragmentation.
    pub(crate) fn relocate(&mut self, m: &mut Mover<'_>) {
        m.vec(&mut self.buf);
    }

    pub fn len(&self) -> usize {
        if self.buf.is_empty() {
            return 0;
        }
        let mut at = 0;
        get_varint(&self.buf, &mut at) as usize
    }

    /// Where the pairs start (after the count).
    fn body(&self) -> usize {
        if self.buf.is_empty() {
            return 0;
        }
        let mut at = 0;
        get_varint(&self.buf, &mut at);
        at
    }

    pub fn iter(&self) -> PackIter<'_> {
        PackIter {
            buf: &self.buf,
            at: self.body(),
        }
    }

    /// Bytes the buffer takes.
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.buf.capacity()
    }

    fn set_count(&mut self, n: usize) {
        let old = self.body();
        let mut head = Vec::with_capacity(4);
        put_varint(&mut head, n as u64);
        if n == 0 {
            self.buf = Vec::new();
            return;
        }
        if head.len() != old {
            self.buf.splice(0..old, head);
        } else {
            self.buf[..old].copy_from_slice(&head);
        }
    }

    pub fn find(&self, member: &[u8]) -> Option<(usize, Item<'_>)> {
        self.iter().enumerate().find(|(_, it)| it.member == member)
    }

    /// Insert a member that is not present.
    pub fn insert_new(&mut self, member: &[u8], score: f64) {
        let pos = self
            .iter()
            .find(|it| less(score, member, it.score, it.member))
            .map(|it| it.start);
        let n = self.len();
        if self.buf.is_empty() {
            put_varint(&mut self.buf, 0);
        }
        let pos = pos.unwrap_or(self.buf.len());
        let mut enc = Vec::with_capacity(pair_len(member, score));
        encode_pair(&mut enc, member, score);
        // Amortised growth: a ZADD of many pairs reallocates a few times,
        // not once per pair; the command ends with `shrink`.
        self.buf.splice(pos..pos, enc);
        self.set_count(n + 1);
    }

    /// Bytes the allocator holds for the buffer: its capacity (which
    /// includes any spare room [`Pack::shrink`] has not yet dropped),
    /// rounded up to jemalloc's size class.
    pub fn memory_usage(&self) -> usize {
        crate::alloc_size(self.buf.capacity())
    }

    /// Drop spare capacity, so a stored set costs its exact size.
    pub fn shrink(&mut self) {
        if self.buf.capacity() > self.buf.len() {
            self.buf.shrink_to_fit();
        }
    }

    /// Remove the bytes `start..end` holding `k` pairs.
    fn cut(&mut self, start: usize, end: usize, k: usize) {
        let n = self.len();
        self.buf.drain(start..end);
        self.set_count(n - k);
        self.buf.shrink_to_fit();
    }

    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let (_, it) = self.find(member)?;
        let (s, e, score) = (it.start, it.end, it.score);
        self.cut(s, e, 1);
        Some(score)
    }

    /// Remove ascending ranks `lo..hi` (in bounds).
    pub fn remove_ranks(&mut self, lo: usize, hi: usize) {
        if lo >= hi {
            return;
        }
        let mut start = 0;
        let mut end = 0;
        for (i, it) in self.iter().enumerate().skip(lo).take(hi - lo) {
            if i == lo {
                start = it.start;
            }
            end = it.end;
        }
        self.cut(start, end, hi - lo);
    }

    /// The pair at an ascending rank.
    pub fn item_at(&self, rank: usize) -> Option<Item<'_>> {
        self.iter().nth(rank)
    }

    /// Build from pairs already in (score, member) order, unique members.
    pub fn from_sorted<'a>(pairs: impl Iterator<Item = (&'a [u8], f64)>, n: usize) -> Pack {
        if n == 0 {
            return Pack::default();
        }
        let mut buf = Vec::new();
        put_varint(&mut buf, n as u64);
        for (m, s) in pairs {
            encode_pair(&mut buf, m, s);
        }
        buf.shrink_to_fit();
        Pack { buf }
    }

    /// Exact size an encoding of these pairs would take, header included.
    #[cfg(test)]
    pub fn encoded_len(pairs: &[(&[u8], f64)]) -> usize {
        varint_len(pairs.len() as u64) + pairs.iter().map(|(m, s)| pair_len(m, *s)).sum::<usize>()
    }
}

impl std::fmt::Debug for Pack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(
                self.iter()
                    .map(|it| (String::from_utf8_lossy(it.member), it.score)),
            )
            .finish()
    }
}

pub(crate) struct PackIter<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Iterator for PackIter<'a> {
    type Item = Item<'a>;
    fn next(&mut self) -> Option<Item<'a>> {
        if self.at >= self.buf.len() {
            return None;
        }
        let start = self.at;
        let mut at = self.at;
        let h = self.buf[at];
        at += 1;
        if h < 0x80 {
            let mlen = usize::from(h >> 4);
            let member = &self.buf[at..at + mlen];
            self.at = at + mlen;
            return Some(Item {
                member,
                score: f64::from(h & 0x0f),
                start,
                end: self.at,
            });
        }
        let mut mlen = usize::from(h & 0x7f);
        if mlen == LONG_LEN {
            mlen += get_varint(self.buf, &mut at) as usize;
        }
        let member = &self.buf[at..at + mlen];
        at += mlen;
        let tag = get_varint(self.buf, &mut at);
        let score = if tag == F64_TAG {
            let mut w = [0u8; 8];
            w.copy_from_slice(&self.buf[at..at + 8]);
            at += 8;
            f64::from_le_bytes(w)
        } else {
            let zz = tag >> 1;
            (((zz >> 1) as i64) ^ -((zz & 1) as i64)) as f64
        };
        self.at = at;
        Some(Item {
            member,
            score,
            start,
            end: at,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_round_trip() {
        let mut p = Pack::default();
        p.insert_new(&[b'y'; 127], 3.0);
        p.insert_new(&[b'z'; 126], 2.0);
        p.insert_new(b"1234567", 15.0);
        p.insert_new(b"12345678", 15.0);
        p.insert_new(b"", 16.0);
        let scores = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            63.0,
            64.0,
            -65.0,
            1.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            9007199254740992.0,
            -9007199254740991.0,
            1e100,
            f64::MIN_POSITIVE,
        ];
        for (i, s) in scores.iter().enumerate() {
            p.insert_new(format!("m{i}").as_bytes(), *s);
        }
        assert_eq!(p.len(), scores.len() + 5);
        assert_eq!(p.find(&[b'y'; 127]).unwrap().1.score, 3.0);
        assert_eq!(p.find(&[b'z'; 126]).unwrap().1.score, 2.0);
        assert_eq!(p.find(b"").unwrap().1.score, 16.0);
        assert_eq!(p.find(b"1234567").unwrap().1.score, 15.0);
        for (i, s) in scores.iter().enumerate() {
            let (_, it) = p.find(format!("m{i}").as_bytes()).unwrap();
            // -0 comes back as 0 (Valkey's listpack).
            assert_eq!(it.score.to_bits(), (s + 0.0).to_bits(), "{s}");
        }
        let v: Vec<f64> = p.iter().map(|it| it.score).collect();
        assert!(v.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn small_pairs_are_small() {
        let mut p = Pack::default();
        for i in 1..=10 {
            p.insert_new(format!("m{i}").as_bytes(), i as f64);
        }
        p.shrink();
        // 1 count byte, then one header byte + the member per pair.
        assert_eq!(p.buf.len(), 1 + 9 * 3 + 4);
        assert_eq!(p.bytes(), p.buf.len());
        // 32 bytes is a jemalloc class of its own: nothing is rounded up.
        assert_eq!(p.memory_usage(), 32);
        // Ten pairs like `ZADD k 0 m0 … 9 m9` fit in 32 bytes.
        let ten: Vec<(Vec<u8>, f64)> = (0..10)
            .map(|i| (format!("m{i}").into_bytes(), i as f64))
            .collect();
        let refs: Vec<(&[u8], f64)> = ten.iter().map(|(m, s)| (m.as_slice(), *s)).collect();
        assert_eq!(Pack::encoded_len(&refs), 31);
        assert_eq!(
            Pack::encoded_len(&[(b"m1", 1.0), (b"m2", 2.5), (b"12345678", 16.0)]),
            1 + 3 + (1 + 2 + 1 + 8) + (1 + 8 + 1)
        );
        let long = vec![b'x'; 300];
        assert_eq!(Pack::encoded_len(&[(&long, 1.0)]), 1 + 1 + 2 + 300 + 1);
    }

    #[test]
    fn count_header_grows_and_shrinks() {
        let mut p = Pack::default();
        for i in 0..300 {
            p.insert_new(format!("{i:04}").as_bytes(), 0.0);
        }
        assert_eq!(p.len(), 300);
        assert_eq!(p.iter().count(), 300);
        p.remove_ranks(0, 250);
        assert_eq!(p.len(), 50);
        assert_eq!(p.iter().next().unwrap().member, b"0250");
        p.remove_ranks(0, 50);
        assert_eq!(p.len(), 0);
        assert_eq!(p.bytes(), 0);
    }
}
