//! Decoder for the ziplist blob (legacy or current) found inside RDB values.
//!
//! ```text
//!   <zlbytes u32 LE> <zltail u32 LE> <zllen u16 LE, 65535 = unknown>
//!   ( <prevlen: 1 byte < 254 | 0xFE + u32 LE> <encoding> <data> )*  0xFF
//! ```
//!
//! Ziplists are what Redis before 7.0 stored small lists, hashes and
//! sorted sets in; RDB files from then still carry them (types 10, 12, 13
//! and quicklist 14). [`decode`] checks the header's byte total and tail
//! offset, each entry's prevlen against the previous entry's real length
//! (a 5-byte prevlen holding a small value is legal: Redis keeps one to
//! avoid cascading updates), every encoding and extent, the terminator,
//! and the count when the header knows it.

use crate::Error;
use crate::listpack::{Elem, int_le};

const HEADER: usize = 10;
const END: u8 = 0xff;
const COUNT_UNKNOWN: u16 = u16::MAX;

fn err(at: usize, msg: impl Into<String>) -> Error {
    Error::new(at as u64, format!("ziplist: {}", msg.into()))
}

/// Decode every element of `zl`. Error offsets are relative to `zl`.
pub fn decode(zl: &[u8]) -> Result<Vec<Elem<'_>>, Error> {
    if zl.len() < HEADER + 1 {
        return Err(err(0, format!("{} bytes is too short", zl.len())));
    }
    let total = u32::from_le_bytes([zl[0], zl[1], zl[2], zl[3]]) as usize;
    if total != zl.len() {
        return Err(err(
            0,
            format!("header says {total} bytes, blob has {}", zl.len()),
        ));
    }
    let tail = u32::from_le_bytes([zl[4], zl[5], zl[6], zl[7]]) as usize;
    let count = u16::from_le_bytes([zl[8], zl[9]]);
    let end = zl.len() - 1;
    if zl[end] != END {
        return Err(err(end, "missing terminator"));
    }
    let mut out = Vec::with_capacity((count as usize).min((zl.len() - HEADER) / 2));
    let mut at = HEADER;
    let mut prev_len = 0usize;
    let mut last_start = HEADER;
    while at < end {
        let start = at;
        let field = |from: usize, n: usize| -> Result<&[u8], Error> {
            zl.get(from..from.saturating_add(n))
                .filter(|_| from + n <= end)
                .ok_or_else(|| err(start, "entry runs past the end"))
        };
        let (prevlen, p) = if zl[at] < 254 {
            (zl[at] as usize, 1)
        } else if zl[at] == 254 {
            let b = field(at + 1, 4)?;
            (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize, 5)
        } else {
            return Err(err(start, "terminator before the end"));
        };
        if prevlen != prev_len {
            return Err(err(
                start,
                format!("prevlen {prevlen}, previous entry is {prev_len} bytes"),
            ));
        }
        at += p;
        let b = *field(at, 1)?.first().expect("one byte");
        let (elem, len) = match b >> 6 {
            0 => {
                let n = (b & 0x3f) as usize;
                (Elem::Bytes(field(at + 1, n)?), 1 + n)
            }
            1 => {
                let n = (((b & 0x3f) as usize) << 8) | field(at + 1, 1)?[0] as usize;
                (Elem::Bytes(field(at + 2, n)?), 2 + n)
            }
            2 => {
                if b != 0x80 {
                    return Err(err(at, format!("unknown entry encoding 0x{b:02x}")));
                }
                let l = field(at + 1, 4)?;
                let n = u32::from_be_bytes([l[0], l[1], l[2], l[3]]) as usize;
                (Elem::Bytes(field(at + 5, n)?), 5 + n)
            }
            _ => match b {
                0xc0 => (Elem::Int(int_le(field(at + 1, 2)?)), 3),
                0xd0 => (Elem::Int(int_le(field(at + 1, 4)?)), 5),
                0xe0 => (Elem::Int(int_le(field(at + 1, 8)?)), 9),
                0xf0 => (Elem::Int(int_le(field(at + 1, 3)?)), 4),
                0xfe => (Elem::Int(int_le(field(at + 1, 1)?)), 2),
                0xf1..=0xfd => (Elem::Int((b & 0x0f) as i64 - 1), 1),
                _ => return Err(err(at, format!("unknown entry encoding 0x{b:02x}"))),
            },
        };
        at += len;
        prev_len = at - start;
        last_start = start;
        out.push(elem);
    }
    if tail != last_start {
        return Err(err(
            4,
            format!("tail offset {tail}, last entry at {last_start}"),
        ));
    }
    if count != COUNT_UNKNOWN && count as usize != out.len() {
        return Err(err(
            8,
            format!("header says {count} elements, found {}", out.len()),
        ));
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Test helper: a ziplist of raw entries (encoding + data each), with
    /// prevlens, header and terminator filled in.
    pub(crate) fn build(entries: &[Vec<u8>]) -> Vec<u8> {
        let mut body = Vec::new();
        let mut prev = 0usize;
        let mut tail = HEADER;
        for e in entries {
            tail = HEADER + body.len();
            let before = body.len();
            if prev < 254 {
                body.push(prev as u8);
            } else {
                body.push(254);
                body.extend_from_slice(&(prev as u32).to_le_bytes());
            }
            body.extend_from_slice(e);
            prev = body.len() - before;
        }
        let total = (HEADER + body.len() + 1) as u32;
        let mut zl = total.to_le_bytes().to_vec();
        zl.extend_from_slice(&(tail as u32).to_le_bytes());
        zl.extend_from_slice(&(entries.len() as u16).to_le_bytes());
        zl.extend_from_slice(&body);
        zl.push(END);
        zl
    }

    /// Entry bytes for a string, picking the encoding by length.
    pub(crate) fn str_entry(s: &[u8]) -> Vec<u8> {
        let n = s.len();
        let mut e = if n < 64 {
            vec![n as u8]
        } else if n < 16384 {
            vec![0x40 | (n >> 8) as u8, n as u8]
        } else {
            let mut v = vec![0x80];
            v.extend_from_slice(&(n as u32).to_be_bytes());
            v
        };
        e.extend_from_slice(s);
        e
    }

    #[test]
    fn every_encoding() {
        let big = vec![b'q'; 300];
        let huge = vec![b'r'; 17000];
        let entries = vec![
            str_entry(b"a"),
            str_entry(&big),
            str_entry(&huge),
            vec![0xc0, 0xff, 0x7f],             // int16 32767
            vec![0xd0, 0x00, 0x00, 0x00, 0x80], // int32 MIN
            {
                let mut v = vec![0xe0];
                v.extend_from_slice(&(-5i64).to_le_bytes());
                v
            },
            vec![0xf0, 0x00, 0x00, 0x80], // int24 MIN
            vec![0xfe, 0x80],             // int8 -128
            vec![0xf1],                   // imm 0
            vec![0xfd],                   // imm 12
        ];
        let zl = build(&entries);
        assert_eq!(
            decode(&zl).unwrap(),
            vec![
                Elem::Bytes(b"a"),
                Elem::Bytes(&big),
                Elem::Bytes(&huge),
                Elem::Int(32767),
                Elem::Int(i32::MIN as i64),
                Elem::Int(-5),
                Elem::Int(-(1 << 23)),
                Elem::Int(-128),
                Elem::Int(0),
                Elem::Int(12),
            ]
        );
    }

    #[test]
    fn five_byte_prevlen_for_a_small_entry() {
        // Entry 1: "ab"; entry 2 with a 5-byte prevlen holding 4.
        let mut zl = vec![0u8; HEADER];
        zl.extend_from_slice(&[0, 2, b'a', b'b']);
        zl.extend_from_slice(&[254, 4, 0, 0, 0, 0xf2]);
        zl.push(END);
        let n = zl.len() as u32;
        zl[0..4].copy_from_slice(&n.to_le_bytes());
        zl[4..8].copy_from_slice(&14u32.to_le_bytes());
        zl[8..10].copy_from_slice(&2u16.to_le_bytes());
        assert_eq!(decode(&zl).unwrap(), vec![Elem::Bytes(b"ab"), Elem::Int(1)]);
    }

    #[test]
    fn rejects_damage() {
        let zl = build(&[str_entry(b"abc"), vec![0xf5]]);
        assert!(decode(&zl).is_ok());
        for n in 0..zl.len() {
            assert!(decode(&zl[..n]).is_err());
        }
        for i in 0..zl.len() {
            for v in 0..=255u8 {
                let mut b = zl.clone();
                b[i] = v;
                let _ = decode(&b);
            }
        }
        let mut b = zl.clone();
        b[HEADER + 5] = 3; // second entry's prevlen
        assert!(decode(&b).unwrap_err().msg.contains("prevlen"));
        let mut b = zl.clone();
        b[4] = 0;
        assert!(decode(&b).unwrap_err().msg.contains("tail"));
        // An empty ziplist is well-formed (the caller decides).
        assert_eq!(decode(&build(&[])).unwrap(), vec![]);
    }
}
