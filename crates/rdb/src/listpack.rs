//! Decoder for the listpack blob (legacy or current) found inside RDB values.
//!
//! ```text
//!   <total-bytes u32 LE> <count u16 LE, 65535 = unknown>
//!   ( <encoding + data> <backlen: 1..5 bytes> )*  0xFF
//! ```
//!
//! The blob comes from an untrusted file, so [`decode`] checks everything
//! Valkey's deep sanitization checks: the header's byte total against the
//! blob, every entry's encoding and extent, every back-length (it must be
//! the canonical encoding of the entry's length, or a backward walk would
//! go astray), the terminator as the last byte and nowhere else, and the
//! element count when the header knows it. Elements are returned borrowed
//! from the blob; the vector is sized by the blob, not by the header.

use crate::Error;

/// One element of a packed blob (listpack or ziplist): bytes, or an
/// integer stored in one of the integer encodings — the store's own
/// element type, so loaded streams take their elements as they are.
pub use store::types::stream::Elem;

const HEADER: usize = 6;
const EOF: u8 = 0xff;
/// The header's count when there are too many elements to count in 16 bits.
const COUNT_UNKNOWN: u16 = u16::MAX;

fn err(at: usize, msg: impl Into<String>) -> Error {
    Error::new(at as u64, format!("listpack: {}", msg.into()))
}

/// Bytes of the back-length for an entry of `l` bytes.
fn backlen_size(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// Check the back-length at `at` encodes `l`: most significant 7-bit
/// group first, every byte but the first with its top bit set.
fn check_backlen(lp: &[u8], at: usize, l: usize) -> Result<usize, Error> {
    let n = backlen_size(l);
    let bytes = lp
        .get(at..at + n)
        .ok_or_else(|| err(at, "back-length runs past the end"))?;
    for (k, &b) in bytes.iter().enumerate() {
        let shift = 7 * (n - 1 - k);
        let mut want = ((l >> shift) & 127) as u8;
        if k > 0 {
            want |= 128;
        }
        if b != want {
            return Err(err(
                at + k,
                format!("back-length does not match the entry's {l} bytes"),
            ));
        }
    }
    Ok(n)
}

/// A little-endian signed integer of `b.len()` bytes (listpack and
/// ziplist integer entries).
pub(crate) fn int_le(b: &[u8]) -> i64 {
    let mut v: u64 = 0;
    for (k, &x) in b.iter().enumerate() {
        v |= (x as u64) << (8 * k);
    }
    // Sign-extend from the field's width.
    let bits = 64 - 8 * b.len() as u32;
    ((v << bits) as i64) >> bits
}

/// Decode every element of `lp`. Error offsets are relative to `lp`.
pub fn decode(lp: &[u8]) -> Result<Vec<Elem<'_>>, Error> {
    if lp.len() < HEADER + 1 {
        return Err(err(0, format!("{} bytes is too short", lp.len())));
    }
    let total = u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]) as usize;
    if total != lp.len() {
        return Err(err(
            0,
            format!("header says {total} bytes, blob has {}", lp.len()),
        ));
    }
    let count = u16::from_le_bytes([lp[4], lp[5]]);
    let end = lp.len() - 1;
    if lp[end] != EOF {
        return Err(err(end, "missing terminator"));
    }
    // Each entry takes at least two bytes.
    let mut out = Vec::with_capacity((count as usize).min((lp.len() - HEADER) / 2));
    let mut at = HEADER;
    while at < end {
        let start = at;
        let b = lp[at];
        let need = move |n: usize| -> Result<&[u8], Error> {
            lp.get(start + 1..start + 1 + n)
                .filter(|_| start + 1 + n <= end)
                .ok_or_else(|| err(start, "entry runs past the end"))
        };
        let (elem, len) = if b & 0x80 == 0 {
            (Elem::Int((b & 0x7f) as i64), 1)
        } else if b & 0xc0 == 0x80 {
            let n = (b & 0x3f) as usize;
            (Elem::Bytes(need(n)?), 1 + n)
        } else if b & 0xe0 == 0xc0 {
            let lo = need(1)?[0];
            let u = (((b & 0x1f) as i64) << 8) | lo as i64;
            // 13-bit two's complement.
            let v = if u >= 1 << 12 { u - (1 << 13) } else { u };
            (Elem::Int(v), 2)
        } else if b & 0xf0 == 0xe0 {
            let lo = need(1)?[0];
            let n = (((b & 0x0f) as usize) << 8) | lo as usize;
            let data = lp
                .get(start + 2..start + 2 + n)
                .filter(|_| start + 2 + n <= end)
                .ok_or_else(|| err(start, "string runs past the end"))?;
            (Elem::Bytes(data), 2 + n)
        } else {
            match b {
                0xf0 => {
                    let l = need(4)?;
                    let n = u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize;
                    let data = lp
                        .get(start + 5..)
                        .and_then(|r| r.get(..n))
                        .filter(|_| start + 5 + n <= end)
                        .ok_or_else(|| err(start, "string runs past the end"))?;
                    (Elem::Bytes(data), 5 + n)
                }
                0xf1 => (Elem::Int(int_le(need(2)?)), 3),
                0xf2 => (Elem::Int(int_le(need(3)?)), 4),
                0xf3 => (Elem::Int(int_le(need(4)?)), 5),
                0xf4 => (Elem::Int(int_le(need(8)?)), 9),
                EOF => return Err(err(start, "terminator before the end")),
                _ => return Err(err(start, format!("unknown entry encoding 0x{b:02x}"))),
            }
        };
        at = start + len;
        at += check_backlen(&lp[..end], at, len)?;
        out.push(elem);
    }
    if count != COUNT_UNKNOWN && count as usize != out.len() {
        return Err(err(
            4,
            format!("header says {count} elements, found {}", out.len()),
        ));
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Test helper: a listpack of `entries` (raw encoding+data bytes each),
    /// with correct back-lengths and header.
    pub(crate) fn build(entries: &[Vec<u8>]) -> Vec<u8> {
        let mut body = Vec::new();
        for e in entries {
            body.extend_from_slice(e);
            let l = e.len();
            let n = backlen_size(l);
            for k in 0..n {
                let mut b = ((l >> (7 * (n - 1 - k))) & 127) as u8;
                if k > 0 {
                    b |= 128;
                }
                body.push(b);
            }
        }
        let total = (HEADER + body.len() + 1) as u32;
        let mut lp = total.to_le_bytes().to_vec();
        lp.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        lp.extend_from_slice(&body);
        lp.push(EOF);
        lp
    }

    /// Entry bytes for a string, picking the encoding by length.
    pub(crate) fn str_entry(s: &[u8]) -> Vec<u8> {
        let n = s.len();
        let mut e = if n < 64 {
            vec![0x80 | n as u8]
        } else if n < 4096 {
            vec![0xe0 | (n >> 8) as u8, n as u8]
        } else {
            let mut v = vec![0xf0];
            v.extend_from_slice(&(n as u32).to_le_bytes());
            v
        };
        e.extend_from_slice(s);
        e
    }

    #[test]
    fn every_encoding() {
        let long = vec![b'x'; 5000];
        let mid = vec![b'y'; 300];
        let entries = vec![
            vec![5],                 // 7-bit uint
            vec![0x7f],              // 127
            str_entry(b"hello"),     // 6-bit string
            vec![0xc0 | 0x10, 0x00], // 13-bit: 4096 -> -4096
            vec![0xc0 | 0x0f, 0xff], // 13-bit: 4095
            str_entry(&mid),         // 12-bit string
            str_entry(&long),        // 32-bit string
            vec![0xf1, 0x00, 0x80],  // int16 -32768
            vec![0xf2, 0xff, 0xff, 0x7f],
            vec![0xf3, 0xfe, 0xff, 0xff, 0xff],
            {
                let mut v = vec![0xf4];
                v.extend_from_slice(&i64::MIN.to_le_bytes());
                v
            },
            str_entry(b""),
        ];
        let lp = build(&entries);
        let got = decode(&lp).unwrap();
        assert_eq!(
            got,
            vec![
                Elem::Int(5),
                Elem::Int(127),
                Elem::Bytes(b"hello"),
                Elem::Int(-4096),
                Elem::Int(4095),
                Elem::Bytes(&mid),
                Elem::Bytes(&long),
                Elem::Int(-32768),
                Elem::Int(0x7fffff),
                Elem::Int(-2),
                Elem::Int(i64::MIN),
                Elem::Bytes(b""),
            ]
        );
    }

    #[test]
    fn rejects_damage() {
        let lp = build(&[str_entry(b"abc"), vec![7]]);
        assert!(decode(&lp).is_ok());
        // Every truncation and every single-byte change but the ones that
        // keep the blob valid must fail, and none may panic.
        for n in 0..lp.len() {
            assert!(decode(&lp[..n]).is_err(), "truncated at {n}");
        }
        for i in 0..lp.len() {
            for v in 0..=255u8 {
                let mut b = lp.clone();
                b[i] = v;
                let _ = decode(&b);
            }
        }
        // Wrong count.
        let mut b = lp.clone();
        b[4] = 3;
        assert!(decode(&b).unwrap_err().msg.contains("elements"));
        // Unknown count is accepted.
        b[4] = 0xff;
        b[5] = 0xff;
        assert_eq!(decode(&b).unwrap().len(), 2);
        // Bad back-length.
        let mut b = lp.clone();
        b[10] = 9;
        assert!(decode(&b).unwrap_err().msg.contains("back-length"));
        // Terminator in the middle.
        let mut b = build(&[vec![7], vec![8]]);
        b[8] = 0xff;
        assert!(decode(&b).is_err());
    }

    #[test]
    fn backlen_boundaries() {
        for n in [126usize, 127, 128, 16380, 16381, 16382, 16383, 70000] {
            let s = vec![b'z'; n];
            let lp = build(&[str_entry(&s)]);
            assert_eq!(decode(&lp).unwrap(), vec![Elem::Bytes(&s)], "{n}");
        }
    }
}
