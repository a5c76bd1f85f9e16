//! LZF, the compression RDB strings use (liblzf's format).

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LzfError(pub &'static str);

/// Append the compressed form of `input` to `out`; false (and `out`
/// unchanged) if it would not be shorter than the input.
pub fn compress(input: &[u8], out: &mut Vec<u8>) -> bool {
    let _ = (input, out);
    todo!("helper W")
}

/// Decompress exactly `out_len` bytes.
///
/// Interim version for the load side (the save side's replaces it). The
/// output is preallocated only up to what `input` could expand to (a
/// 3-byte back reference yields at most 264 bytes), so a forged `out_len`
/// cannot reserve memory the input does not back.
pub fn decompress(input: &[u8], out_len: usize) -> Result<Vec<u8>, LzfError> {
    if out_len > input.len().saturating_mul(88).saturating_add(8) {
        return Err(LzfError(
            "declared length exceeds what the input can expand to",
        ));
    }
    let mut out: Vec<u8> = Vec::with_capacity(out_len);
    let mut i = 0;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            // Literal run of ctrl + 1 bytes.
            let n = ctrl + 1;
            let lit = input
                .get(i..i + n)
                .ok_or(LzfError("literal run past the input"))?;
            if out.len() + n > out_len {
                return Err(LzfError("output longer than declared"));
            }
            out.extend_from_slice(lit);
            i += n;
        } else {
            let mut n = ctrl >> 5;
            if n == 7 {
                n += *input.get(i).ok_or(LzfError("truncated back reference"))? as usize;
                i += 1;
            }
            n += 2;
            let low = *input.get(i).ok_or(LzfError("truncated back reference"))? as usize;
            i += 1;
            let dist = ((ctrl & 0x1f) << 8) + low + 1;
            if dist > out.len() {
                return Err(LzfError("back reference before the start"));
            }
            if out.len() + n > out_len {
                return Err(LzfError("output longer than declared"));
            }
            // Byte by byte: the source may overlap what is being written.
            let from = out.len() - dist;
            for k in 0..n {
                let b = out[from + k];
                out.push(b);
            }
        }
    }
    if out.len() != out_len {
        return Err(LzfError("output shorter than declared"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_and_back_reference() {
        // "abcabcabc": literal "abc" (ctrl 2), then a back reference of
        // 6 bytes (ctrl len field 4 -> 4 + 2) at distance 3 (low byte 2).
        let input = [2, b'a', b'b', b'c', 4 << 5, 2];
        assert_eq!(decompress(&input, 9).unwrap(), b"abcabcabc");
        assert!(decompress(&input, 8).is_err());
        assert!(decompress(&input, 10).is_err());
        assert!(decompress(&input[..5], 9).is_err());
        assert!(decompress(&[0x20, 5], 3).is_err());
        assert!(decompress(&[0], 1_000_000).is_err());
    }
}
