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
pub fn decompress(input: &[u8], out_len: usize) -> Result<Vec<u8>, LzfError> {
    let _ = (input, out_len);
    todo!("helper W")
}
