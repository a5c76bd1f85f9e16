//! Decoder for the intset blob (legacy or current) found inside RDB values.
//!
//! ```text
//!   <width u32 LE: 2|4|8> <count u32 LE> <count integers of width bytes, LE>
//! ```
//!
//! The integers must be strictly ascending (that is what makes an intset a
//! set: checking it also rules out duplicates) and the blob exactly as long
//! as the header says; an empty intset is refused, as Valkey does.

use crate::Error;

fn err(at: usize, msg: impl Into<String>) -> Error {
    Error::new(at as u64, format!("intset: {}", msg.into()))
}

/// Decode `blob`. Error offsets are relative to `blob`.
pub fn decode(blob: &[u8]) -> Result<Vec<i64>, Error> {
    if blob.len() < 8 {
        return Err(err(0, format!("{} bytes is too short", blob.len())));
    }
    let width = u32::from_le_bytes([blob[0], blob[1], blob[2], blob[3]]) as usize;
    if !matches!(width, 2 | 4 | 8) {
        return Err(err(0, format!("bad width {width}")));
    }
    let count = u32::from_le_bytes([blob[4], blob[5], blob[6], blob[7]]) as usize;
    if count == 0 {
        return Err(err(4, "empty intset"));
    }
    if (blob.len() - 8) != count.saturating_mul(width) {
        return Err(err(
            4,
            format!(
                "{count} integers of {width} bytes do not fill {} bytes",
                blob.len() - 8
            ),
        ));
    }
    let mut out: Vec<i64> = Vec::with_capacity(count);
    for (k, c) in blob[8..].chunks_exact(width).enumerate() {
        let v = match width {
            2 => i16::from_le_bytes([c[0], c[1]]) as i64,
            4 => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64,
            _ => i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]),
        };
        if out.last().is_some_and(|&p| p >= v) {
            return Err(err(
                8 + k * width,
                "integers not strictly ascending (duplicate or unsorted)",
            ));
        }
        out.push(v);
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn build(width: u32, vals: &[i64]) -> Vec<u8> {
        let mut b = width.to_le_bytes().to_vec();
        b.extend_from_slice(&(vals.len() as u32).to_le_bytes());
        for v in vals {
            b.extend_from_slice(&v.to_le_bytes()[..width as usize]);
        }
        b
    }

    #[test]
    fn widths() {
        assert_eq!(decode(&build(2, &[-3, 0, 7])).unwrap(), vec![-3, 0, 7]);
        assert_eq!(
            decode(&build(4, &[-70000, 70000])).unwrap(),
            vec![-70000, 70000]
        );
        assert_eq!(
            decode(&build(8, &[i64::MIN, i64::MAX])).unwrap(),
            vec![i64::MIN, i64::MAX]
        );
    }

    #[test]
    fn rejects() {
        assert!(decode(&build(2, &[1, 1])).is_err());
        assert!(decode(&build(2, &[2, 1])).is_err());
        assert!(decode(&build(3, &[1])).is_err());
        assert!(decode(&build(2, &[])).is_err());
        let b = build(4, &[1, 2, 3]);
        for n in 0..b.len() {
            assert!(decode(&b[..n]).is_err());
        }
        let mut b = build(2, &[1, 2]);
        b[4] = 0xff;
        b[5] = 0xff;
        b[6] = 0xff;
        b[7] = 0xff;
        assert!(decode(&b).is_err());
    }
}
