//! Primitive encodings: lengths, strings (integer / LZF / raw), doubles,
//! and the listpack and intset blobs Valkey stores small collections in.
//!
//! Design: free functions appending to a `Vec<u8>`, each the counterpart
//! of one Valkey routine (`rdbSaveLen`, `rdbSaveRawString`,
//! `rdbSaveBinaryDoubleValue`, `lpAppend`, `intsetAdd`), taking the same
//! decisions so that the bytes come out identical: which strings become
//! integers (exactly the canonical decimal `i64`s, as `string2ll` +
//! `ll2string` and `lpStringToInt64` accept), when LZF is tried and kept,
//! and how a non-integral sorted-set score is spelled in a listpack
//! (`d2string`: Valkey's `fpconv_dtoa` layout, from the RESP encoder).

use crate::consts::{ENC_INT8, ENC_INT16, ENC_INT32, ENC_LZF, LEN_32BIT, LEN_64BIT, LEN_ENCVAL};
use crate::lzf;

/// `rdbSaveLen`: 6-bit, 14-bit, 32-bit or 64-bit (the wide forms
/// big-endian).
pub fn put_len(out: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        out.push(len as u8);
    } else if len < 1 << 14 {
        out.extend_from_slice(&[0x40 | (len >> 8) as u8, len as u8]);
    } else if len <= u64::from(u32::MAX) {
        out.push(LEN_32BIT);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        out.push(LEN_64BIT);
        out.extend_from_slice(&len.to_be_bytes());
    }
}

/// The `i64` whose canonical decimal form `s` is (no sign on zero, no
/// leading zeros, no `+`, no spaces), as Valkey's `string2ll` followed by
/// the `ll2string` round-trip check, and `lpStringToInt64`, accept.
pub fn canonical_i64(s: &[u8]) -> Option<i64> {
    // The RESP parser's integer rule is exactly this one.
    resp::num::parse_i64(s)
}

/// `rdbEncodeInteger`: the INT8/16/32 special encoding of `v`, or false
/// if it does not fit in 32 bits.
pub fn put_int_encoded(out: &mut Vec<u8>, v: i64) -> bool {
    const ENC: u8 = LEN_ENCVAL << 6;
    if let Ok(b) = i8::try_from(v) {
        out.extend_from_slice(&[ENC | ENC_INT8, b as u8]);
    } else if let Ok(h) = i16::try_from(v) {
        out.push(ENC | ENC_INT16);
        out.extend_from_slice(&h.to_le_bytes());
    } else if let Ok(w) = i32::try_from(v) {
        out.push(ENC | ENC_INT32);
        out.extend_from_slice(&w.to_le_bytes());
    } else {
        return false;
    }
    true
}

/// `rdbSaveRawString`: a canonical integer of up to 11 characters that
/// fits 32 bits as INT8/16/32; else with `compress`, over 20 bytes, LZF
/// when it saves at least 4 bytes (Valkey gives `lzf_compress` a budget of
/// `len - 4`); else the length and the bytes.
pub fn put_string(out: &mut Vec<u8>, s: &[u8], compress: bool) {
    if s.len() <= 11
        && let Some(v) = canonical_i64(s)
        && put_int_encoded(out, v)
    {
        return;
    }
    if compress && s.len() > 20 && put_lzf(out, s) {
        return;
    }
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// A compressed quicklist node's listpack `lp`, as Valkey writes it from
/// the LZF form the node holds (rdbSaveLzfBlob), with or without
/// `compress`: LZF when Valkey's node compression would have kept it (a
/// node of at least 48 bytes that LZF shrinks by more than 8), else as
/// any string.
pub fn put_compressed_node(out: &mut Vec<u8>, lp: &[u8], compress: bool) {
    const MIN_COMPRESS_BYTES: usize = 48;
    const MIN_COMPRESS_IMPROVE: usize = 8;
    // Valkey's __quicklistCompressNode: a budget of the node's size.
    if lp.len() >= MIN_COMPRESS_BYTES
        && put_lzf_if(out, lp, lp.len(), |clen| {
            clen + MIN_COMPRESS_IMPROVE < lp.len()
        })
    {
        return;
    }
    put_string(out, lp, compress);
}

/// The header of an LZF string: its compressed and original lengths.
fn put_lzf_header(out: &mut Vec<u8>, clen: usize, len: usize) {
    out.push((LEN_ENCVAL << 6) | ENC_LZF);
    put_len(out, clen as u64);
    put_len(out, len as u64);
}

/// `rdbSaveLzfStringObject`: the LZF form of `s` if liblzf would fit it
/// in `len - 4` bytes.
fn put_lzf(out: &mut Vec<u8>, s: &[u8]) -> bool {
    let Some(budget) = s.len().checked_sub(4).filter(|&b| b > 0) else {
        return false;
    };
    put_lzf_if(out, s, budget, |_| true)
}

/// The LZF form of `s` with its header, if liblzf fits it in `budget`
/// bytes and `keep` accepts its compressed length (else nothing).
fn put_lzf_if(out: &mut Vec<u8>, s: &[u8], budget: usize, keep: impl Fn(usize) -> bool) -> bool {
    // Compress in place, then put the header before the blob once its
    // length (and so the header's) is known: one copy of the compressed
    // bytes instead of a scratch allocation per string.
    let start = out.len();
    if !lzf::compress_within(s, budget, out) {
        return false;
    }
    let clen = out.len() - start;
    if !keep(clen) {
        out.truncate(start);
        return false;
    }
    let mut head = Vec::with_capacity(19);
    put_lzf_header(&mut head, clen, s.len());
    out.splice(start..start, head);
    true
}

/// `rdbSaveLongLongAsStringObject`: an integer value, encoded as the
/// string of its decimal form would be.
pub fn put_int_string(out: &mut Vec<u8>, v: i64) {
    if !put_int_encoded(out, v) {
        let s = v.to_string();
        put_len(out, s.len() as u64);
        out.extend_from_slice(s.as_bytes());
    }
}

/// `rdbSaveBinaryDoubleValue`: the IEEE 754 bits, little-endian.
pub fn put_binary_double(out: &mut Vec<u8>, f: f64) {
    out.extend_from_slice(&f.to_le_bytes());
}

/// Valkey's `double2ll`: the integer an integral double in ±`LLONG_MAX/2`
/// equals (this is how sorted-set listpacks decide to store a score as an
/// integer; -0.0 gives 0).
pub fn double_as_i64(d: f64) -> Option<i64> {
    const LIM: f64 = (i64::MAX / 2) as f64;
    if !(-LIM..=LIM).contains(&d) {
        return None;
    }
    let i = d as i64;
    (i as f64 == d).then_some(i)
}

/// Valkey's `d2string` (the text of a sorted-set score in a listpack):
/// the RESP encoder's double formatting, which follows `fpconv_dtoa`.
pub fn d2string(d: f64, out: &mut Vec<u8>) {
    let mut buf = [0u8; resp::num::DOUBLE_MAX_LEN];
    out.extend_from_slice(resp::num::fmt_double(d, &mut buf));
}

/// Writes one listpack in place at the end of a buffer: a 6-byte header
/// (total bytes u32 LE, element count u16 LE, 65535 once it does not fit),
/// the entries, and the 0xFF terminator, patched in by [`Listpack::finish`].
#[derive(Debug)]
pub struct Listpack<'a> {
    out: &'a mut Vec<u8>,
    start: usize,
    count: usize,
}

const LP_HEADER: usize = 6;
const LP_EOF: u8 = 0xff;
/// Valkey's `LP_HDR_NUMELE_UNKNOWN`.
const LP_COUNT_UNKNOWN: usize = u16::MAX as usize;

impl<'a> Listpack<'a> {
    pub fn new(out: &'a mut Vec<u8>) -> Listpack<'a> {
        let start = out.len();
        out.extend_from_slice(&[0; LP_HEADER]);
        Listpack {
            out,
            start,
            count: 0,
        }
    }

    /// Append a string element: as an integer entry when Valkey's
    /// `lpStringToInt64` would take it for one, else as a string entry.
    pub fn push(&mut self, s: &[u8]) {
        match canonical_i64(s) {
            Some(v) => self.push_int(v),
            None => self.push_str(s),
        }
    }

    /// Append an integer element in the smallest integer encoding.
    pub fn push_int(&mut self, v: i64) {
        let at = self.out.len();
        let o = &mut *self.out;
        if (0..=127).contains(&v) {
            o.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let u = (v as u16) & 0x1fff;
            o.extend_from_slice(&[0xc0 | (u >> 8) as u8, u as u8]);
        } else if let Ok(h) = i16::try_from(v) {
            o.push(0xf1);
            o.extend_from_slice(&h.to_le_bytes());
        } else if (-(1 << 23)..(1 << 23)).contains(&v) {
            o.push(0xf2);
            o.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        } else if let Ok(w) = i32::try_from(v) {
            o.push(0xf3);
            o.extend_from_slice(&w.to_le_bytes());
        } else {
            o.push(0xf4);
            o.extend_from_slice(&v.to_le_bytes());
        }
        self.backlen(at);
    }

    /// Append a string element as a string entry, whatever it looks like.
    pub fn push_str(&mut self, s: &[u8]) {
        let at = self.out.len();
        let o = &mut *self.out;
        let n = s.len();
        if n < 64 {
            o.push(0x80 | n as u8);
        } else if n < 4096 {
            o.extend_from_slice(&[0xe0 | (n >> 8) as u8, n as u8]);
        } else {
            o.push(0xf0);
            o.extend_from_slice(&(n as u32).to_le_bytes());
        }
        o.extend_from_slice(s);
        self.backlen(at);
    }

    /// `lpEncodeBacklen`: the entry's size (encoding + data) read from its
    /// end, 7 bits per byte, the first byte without the high bit.
    fn backlen(&mut self, entry_start: usize) {
        let l = (self.out.len() - entry_start) as u64;
        let o = &mut *self.out;
        if l <= 127 {
            o.push(l as u8);
        } else if l < 16383 {
            o.extend_from_slice(&[(l >> 7) as u8, (l & 127) as u8 | 128]);
        } else if l < 2_097_151 {
            o.extend_from_slice(&[
                (l >> 14) as u8,
                ((l >> 7) & 127) as u8 | 128,
                (l & 127) as u8 | 128,
            ]);
        } else if l < 268_435_455 {
            o.extend_from_slice(&[
                (l >> 21) as u8,
                ((l >> 14) & 127) as u8 | 128,
                ((l >> 7) & 127) as u8 | 128,
                (l & 127) as u8 | 128,
            ]);
        } else {
            o.extend_from_slice(&[
                (l >> 28) as u8,
                ((l >> 21) & 127) as u8 | 128,
                ((l >> 14) & 127) as u8 | 128,
                ((l >> 7) & 127) as u8 | 128,
                (l & 127) as u8 | 128,
            ]);
        }
        self.count += 1;
    }

    /// Terminate and patch the header; returns the listpack's size.
    pub fn finish(self) -> usize {
        self.out.push(LP_EOF);
        let total = self.out.len() - self.start;
        let count = self.count.min(LP_COUNT_UNKNOWN) as u16;
        let h = &mut self.out[self.start..self.start + LP_HEADER];
        h[..4].copy_from_slice(&(total as u32).to_le_bytes());
        h[4..].copy_from_slice(&count.to_le_bytes());
        total
    }
}

/// A listpack of `items` as one blob.
pub fn listpack<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut lp = Listpack::new(&mut out);
    for s in items {
        lp.push(s);
    }
    lp.finish();
    out
}

/// Valkey's intset blob of ascending `vals`: encoding width (2, 4 or 8,
/// the narrowest holding every value) as u32 LE, the count as u32 LE, the
/// values LE.
pub fn put_intset(out: &mut Vec<u8>, vals: &[i64]) {
    let (lo, hi) = match (vals.first(), vals.last()) {
        (Some(&lo), Some(&hi)) => (lo, hi),
        _ => (0, 0),
    };
    let width: usize = if i16::try_from(lo).is_ok() && i16::try_from(hi).is_ok() {
        2
    } else if i32::try_from(lo).is_ok() && i32::try_from(hi).is_ok() {
        4
    } else {
        8
    };
    out.reserve(8 + vals.len() * width);
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(vals.len() as u32).to_le_bytes());
    for &v in vals {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn string(s: &[u8], compress: bool) -> Vec<u8> {
        let mut o = Vec::new();
        put_string(&mut o, s, compress);
        o
    }

    #[test]
    fn lengths() {
        let enc = |n| {
            let mut o = Vec::new();
            put_len(&mut o, n);
            o
        };
        assert_eq!(enc(0), [0]);
        assert_eq!(enc(63), [63]);
        assert_eq!(enc(64), [0x40, 64]);
        assert_eq!(enc(16383), [0x7f, 0xff]);
        assert_eq!(enc(16384), [0x80, 0, 0, 0x40, 0]);
        assert_eq!(enc(1 << 32), [0x81, 0, 0, 0, 1, 0, 0, 0, 0]);
    }

    #[test]
    fn integers_as_valkey_detects_them() {
        for (s, v) in [
            (&b"0"[..], Some(0)),
            (b"-1", Some(-1)),
            (b"9223372036854775807", Some(i64::MAX)),
            (b"-9223372036854775808", Some(i64::MIN)),
            (b"9223372036854775808", None),
            (b"-0", None),
            (b"007", None),
            (b"+5", None),
            (b" 5", None),
            (b"5 ", None),
            (b"-", None),
            (b"", None),
            (b"1a", None),
        ] {
            assert_eq!(canonical_i64(s), v, "{:?}", String::from_utf8_lossy(s));
        }
    }

    #[test]
    fn string_encodings() {
        assert_eq!(string(b"12", true), [0xc0, 12]);
        assert_eq!(string(b"-129", true), [0xc1, 0x7f, 0xff]);
        assert_eq!(string(b"100000", true), [0xc2, 0xa0, 0x86, 1, 0]);
        // Past 32 bits: a raw string.
        assert_eq!(string(b"4294967296", true), b"\x0a4294967296");
        assert_eq!(string(b"012", true), b"\x03012");
        let long = b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        let c = string(long, true);
        assert_eq!(c[0], 0xc3);
        assert!(c.len() < long.len());
        assert_eq!(string(long, false)[1..], long[..]);
        // 21 bytes of noise: LZF cannot save 4 bytes, so it is raw.
        let noise = b"q8#kZ!p2@Lm9$Xv4^Nb7&";
        assert_eq!(string(noise, true)[1..], noise[..]);
    }

    #[test]
    fn listpack_entries() {
        let lp = listpack([&b"1"[..], b"-1", b"5000", b"abc", b"70000", b"3000000000"]);
        let mut want = vec![0u8; 6];
        want.extend_from_slice(&[1, 1]); // 7-bit uint
        want.extend_from_slice(&[0xdf, 0xff, 2]); // 13-bit -1
        want.extend_from_slice(&[0xf1, 0x88, 0x13, 3]); // 16-bit
        want.extend_from_slice(&[0x83, b'a', b'b', b'c', 4]); // 6-bit str
        want.extend_from_slice(&[0xf2, 0x70, 0x11, 0x01, 4]); // 24-bit
        want.extend_from_slice(&[0xf4, 0, 0x5e, 0xd0, 0xb2, 0, 0, 0, 0, 9]); // 64-bit
        want.push(0xff);
        let n = want.len() as u32;
        want[..4].copy_from_slice(&n.to_le_bytes());
        want[4] = 6;
        assert_eq!(lp, want);
    }

    #[test]
    fn listpack_long_strings_and_backlen() {
        let s = [b'x'; 200];
        let lp = listpack([&s[..]]);
        // 12-bit string header, then backlen 202 in two bytes.
        assert_eq!(&lp[6..8], &[0xe0, 200]);
        assert_eq!(&lp[208..210], &[1, 202 - 128 + 128]);
        let s = vec![b'y'; 5000];
        let lp = listpack([&s[..]]);
        assert_eq!(lp[6], 0xf0);
        assert_eq!(lp.len(), 6 + 5 + 5000 + 2 + 1);
    }

    #[test]
    fn intsets() {
        let mut o = Vec::new();
        put_intset(&mut o, &[1, 2, 3]);
        assert_eq!(o, [2, 0, 0, 0, 3, 0, 0, 0, 1, 0, 2, 0, 3, 0]);
        o.clear();
        put_intset(&mut o, &[-40000, 1]);
        assert_eq!(&o[..8], &[4, 0, 0, 0, 2, 0, 0, 0]);
        o.clear();
        put_intset(&mut o, &[1, 1 << 40]);
        assert_eq!(o.len(), 8 + 16);
    }

    #[test]
    fn scores_as_d2string() {
        let s = |d: f64| {
            let mut o = Vec::new();
            d2string(d, &mut o);
            String::from_utf8(o).unwrap()
        };
        assert_eq!(s(1.5), "1.5");
        assert_eq!(s(-0.25), "-0.25");
        assert_eq!(s(0.1), "0.1");
        assert_eq!(s(3.0), "3");
        assert_eq!(s(f64::INFINITY), "inf");
        assert_eq!(s(f64::NEG_INFINITY), "-inf");
        assert_eq!(s(1e20), "1e+20");
        assert_eq!(s(4e18), "4000000000000000000");
        assert_eq!(s(1e19), "1e+19");
        assert_eq!(s(1234567890123e7), "12345678901230000000");
        assert_eq!(s(12345678.5e12), "1.23456785e+19");
        assert_eq!(s(1e30), "1e+30");
        assert_eq!(s(1.5e-7), "1.5e-7");
        assert_eq!(s(0.000001), "0.000001");
        assert_eq!(s(123456.789), "123456.789");
        assert_eq!(s(1.2345678901234567e-300), "1.2345678901234568e-300");
    }

    proptest! {
        #[test]
        fn canonical_matches_display(v in any::<i64>()) {
            prop_assert_eq!(canonical_i64(v.to_string().as_bytes()), Some(v));
        }

        #[test]
        fn d2string_round_trips(bits in any::<u64>()) {
            let d = f64::from_bits(bits);
            prop_assume!(d.is_finite());
            let mut o = Vec::new();
            d2string(d, &mut o);
            let back: f64 = std::str::from_utf8(&o).unwrap().parse().unwrap();
            prop_assert_eq!(back, d);
        }
    }
}
