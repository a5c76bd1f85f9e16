//! Decoder for the zipmap blob (legacy or current) found inside RDB values.
//!
//! ```text
//!   <zmlen: 1 byte, 254 = unknown>
//!   ( <len> <key> <len> <free: 1 byte> <value> <free unused bytes> )*  0xFF
//!   len: 1 byte < 254, or 254 + u32 LE
//! ```
//!
//! Zipmaps held small hashes up to Redis 2.6 (RDB type 9); an old file can
//! still carry them. Pairs are returned borrowed, in order; the caller
//! checks for duplicate fields as it builds the hash.

use crate::Error;

const BIGLEN: u8 = 254;
const END: u8 = 0xff;

fn err(at: usize, msg: impl Into<String>) -> Error {
    Error::new(at as u64, format!("zipmap: {}", msg.into()))
}

/// A field and its value, borrowed from the blob.
pub type Pair<'a> = (&'a [u8], &'a [u8]);

/// (field, value) pairs of `zm`. Error offsets are relative to `zm`.
pub fn decode(zm: &[u8]) -> Result<Vec<Pair<'_>>, Error> {
    let Some((&zmlen, _)) = zm.split_first() else {
        return Err(err(0, "empty blob"));
    };
    let mut at = 1;
    let len_at = |at: &mut usize| -> Result<Option<usize>, Error> {
        let b = *zm.get(*at).ok_or_else(|| err(*at, "runs past the end"))?;
        match b {
            END => Ok(None),
            BIGLEN => {
                let l = zm
                    .get(*at + 1..*at + 5)
                    .ok_or_else(|| err(*at, "length runs past the end"))?;
                *at += 5;
                Ok(Some(u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize))
            }
            _ => {
                *at += 1;
                Ok(Some(b as usize))
            }
        }
    };
    let take = |at: &mut usize, n: usize| -> Result<&[u8], Error> {
        let s = zm
            .get(*at..at.saturating_add(n))
            .ok_or_else(|| err(*at, "runs past the end"))?;
        *at += n;
        Ok(s)
    };
    let mut out = Vec::with_capacity((zmlen as usize).min(zm.len() / 3));
    loop {
        let entry = at;
        let Some(klen) = len_at(&mut at)? else {
            break;
        };
        let key = take(&mut at, klen)?;
        let vlen = len_at(&mut at)?.ok_or_else(|| err(entry, "field without a value"))?;
        let free = *take(&mut at, 1)?.first().expect("one byte") as usize;
        let value = take(&mut at, vlen)?;
        take(&mut at, free)?;
        out.push((key, value));
    }
    if at + 1 != zm.len() {
        return Err(err(at + 1, "bytes after the terminator"));
    }
    if zmlen < BIGLEN && zmlen as usize != out.len() {
        return Err(err(
            0,
            format!("header says {zmlen} pairs, found {}", out.len()),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_and_free_space() {
        // 2 pairs: "a" -> "xy" (1 free byte after), "bb" -> "" (no free).
        let zm = [2, 1, b'a', 2, 1, b'x', b'y', 0, 2, b'b', b'b', 0, 0, END];
        assert_eq!(
            decode(&zm).unwrap(),
            vec![(&b"a"[..], &b"xy"[..]), (&b"bb"[..], &b""[..])]
        );
        for n in 0..zm.len() {
            assert!(decode(&zm[..n]).is_err());
        }
        let mut bad = zm;
        bad[0] = 3;
        assert!(decode(&bad).is_err());
        // Unknown count.
        bad[0] = BIGLEN;
        assert_eq!(decode(&bad).unwrap().len(), 2);
        // A 5-byte length.
        let zm = [1, BIGLEN, 1, 0, 0, 0, b'k', 1, 0, b'v', END];
        assert_eq!(decode(&zm).unwrap(), vec![(&b"k"[..], &b"v"[..])]);
        assert!(decode(&[0, END, 0]).is_err());
    }
}
