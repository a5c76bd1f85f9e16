//! LZF, the compression RDB strings and compressed list nodes use
//! (liblzf's format).
//!
//! Design: the format is a sequence of literal runs (`000LLLLL` and L+1
//! bytes) and back-references (`LLLooooo oooooooo`, or `111ooooo LLLLLLLL
//! oooooooo` for long ones: length L+2, offset o+1 back, up to 8 KiB).
//! The compressor follows liblzf's greedy parse as Valkey builds it
//! (`HLOG` 16, `VERY_FAST`): a 64 Ki-slot table maps a hash of the next
//! three bytes (and, through the rolling hash word, the byte before) to
//! the last position seen; a hit within the window whose first three
//! bytes agree is extended as far as it goes, and after a match only the
//! two positions before its end are hashed. Taking the same decisions as
//! the liblzf in Valkey 8.1, including its output-space checks, makes our
//! LZF strings byte-identical to Valkey's (checked on a few hundred DUMPs,
//! see `capture.rs`'s `valkey_dataset`). The table lives per thread,
//! tagged per call, so a short string does not pay for clearing it. The
//! decompressor checks every length and offset against both buffers and
//! returns [`LzfError`] instead of panicking.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LzfError(pub &'static str);

impl std::fmt::Display for LzfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "lzf: {}", self.0)
    }
}

impl std::error::Error for LzfError {}

const HLOG: u32 = 16;
const HSIZE: usize = 1 << HLOG;
const MAX_LIT: usize = 1 << 5;
const MAX_OFF: usize = 1 << 13;
const MAX_REF: usize = (1 << 8) + (1 << 3);

#[inline]
fn first(p: &[u8], i: usize) -> u32 {
    (u32::from(p[i]) << 8) | u32::from(p[i + 1])
}

#[inline]
fn next(h: u32, p: &[u8], i: usize) -> u32 {
    (h << 8) | u32::from(p[i + 2])
}

#[inline]
fn idx(h: u32) -> usize {
    ((h >> (24 - HLOG)).wrapping_sub(h.wrapping_mul(5)) as usize) & (HSIZE - 1)
}

/// Append the compressed form of `input` to `out`; false (and `out`
/// unchanged) if it would not be shorter than the input.
pub fn compress(input: &[u8], out: &mut Vec<u8>) -> bool {
    compress_within(input, input.len().saturating_sub(1), out)
}

/// liblzf's `lzf_compress` with an output budget of `max_out` bytes:
/// false (and `out` unchanged) when the output would not fit, judged by
/// the same conservative checks liblzf makes (Valkey passes `len - 4`).
pub fn compress_within(input: &[u8], max_out: usize, out: &mut Vec<u8>) -> bool {
    let start = out.len();
    if compress_into(input, max_out, out) {
        true
    } else {
        out.truncate(start);
        false
    }
}

fn compress_into(input: &[u8], max_out: usize, out: &mut Vec<u8>) -> bool {
    let n = input.len();
    // Positions are kept in 32 bits (Valkey strings stop at 512 MiB).
    if n == 0 || max_out == 0 || n > u32::MAX as usize {
        return false;
    }
    HTAB.with(|t| {
        let mut t = t.borrow_mut();
        let (epoch, table) = &mut *t;
        if table.is_empty() {
            table.resize(HSIZE, 0);
        }
        *epoch = epoch.wrapping_add(1);
        if *epoch == 0 {
            // Tags are about to repeat: forget everything once.
            table.fill(0);
            *epoch = 1;
        }
        compress_with(
            input,
            max_out,
            out,
            &mut HashTable {
                epoch: *epoch,
                slots: table,
            },
        )
    })
}

thread_local! {
    /// The hash table, kept per thread so that each string (most are
    /// short) does not pay for clearing 64 Ki slots: a slot is tagged with
    /// the call that wrote it, and a stale tag reads as empty.
    static HTAB: std::cell::RefCell<(u32, Vec<u64>)> = const { std::cell::RefCell::new((0, Vec::new())) };
}

struct HashTable<'a> {
    epoch: u32,
    slots: &'a mut [u64],
}

impl HashTable<'_> {
    /// The position last stored in `slot` during this call, and store `pos`.
    /// 0 doubles as "none", harmless because liblzf never matches against
    /// position 0 (`ref > in_data`).
    #[inline]
    fn swap(&mut self, slot: usize, pos: usize) -> usize {
        let old = self.slots[slot];
        self.slots[slot] = (u64::from(self.epoch) << 32) | pos as u64;
        if (old >> 32) as u32 == self.epoch {
            (old & 0xffff_ffff) as usize
        } else {
            0
        }
    }
    #[inline]
    fn set(&mut self, slot: usize, pos: usize) {
        self.slots[slot] = (u64::from(self.epoch) << 32) | pos as u64;
    }
}

/// Append one literal byte to the run being written; a run full at 32
/// bytes gets its control byte, and the next run's is reserved.
#[inline(always)]
fn put_literal(o: &mut [u8], op: &mut usize, lit: &mut usize, b: u8) {
    *lit += 1;
    o[*op] = b;
    *op += 1;
    if *lit == MAX_LIT {
        o[*op - *lit - 1] = (*lit - 1) as u8;
        *lit = 0;
        *op += 1;
    }
}

fn compress_with(
    input: &[u8],
    max_out: usize,
    out: &mut Vec<u8>,
    htab: &mut HashTable<'_>,
) -> bool {
    let n = input.len();
    let base = out.len();
    // `out` grows as we go; `op` is the write position relative to
    // `base`, with the literal run's control byte reserved at `op - lit - 1`.
    out.resize(base + max_out + 1, 0);
    let o = &mut out[base..];
    let mut op = 1usize;
    let mut lit = 0usize;
    let mut ip = 0usize;

    if n >= 2 {
        let mut hval = first(input, 0);
        while ip + 2 < n {
            hval = next(hval, input, ip);
            let r = htab.swap(idx(hval), ip);
            if r > 0
                && r < ip
                && ip - r - 1 < MAX_OFF
                && input[r] == input[ip]
                && input[r + 1] == input[ip + 1]
                && input[r + 2] == input[ip + 2]
            {
                let off = ip - r - 1;
                let mut len = 2usize;
                let maxlen = (n - ip - len).min(MAX_REF);
                // Room for the longest back-reference and the next run's
                // control byte, counting the current run's control byte
                // only if the run has bytes.
                if op - usize::from(lit == 0) + 3 + 1 >= max_out {
                    return false;
                }
                // Close the literal run (or drop its unused control byte).
                o[op - lit - 1] = (lit as u8).wrapping_sub(1);
                if lit == 0 {
                    op -= 1;
                }
                // liblzf's unrolled first 16 steps do not check `maxlen`,
                // so a match may run one or two bytes past it there; the
                // bytes compared are still in the input.
                let mut done = false;
                if maxlen > 16 {
                    for _ in 0..16 {
                        len += 1;
                        if input[r + len] != input[ip + len] {
                            done = true;
                            break;
                        }
                    }
                }
                if !done {
                    loop {
                        len += 1;
                        if !(len < maxlen && input[r + len] == input[ip + len]) {
                            break;
                        }
                    }
                }
                len -= 2;
                ip += 1;
                if len < 7 {
                    o[op] = ((off >> 8) + (len << 5)) as u8;
                    op += 1;
                } else {
                    o[op] = ((off >> 8) + (7 << 5)) as u8;
                    o[op + 1] = (len - 7) as u8;
                    op += 2;
                }
                o[op] = off as u8;
                op += 1;
                lit = 0;
                op += 1;
                ip += len + 1;
                if ip + 2 >= n {
                    break;
                }
                ip -= 2;
                hval = first(input, ip);
                hval = next(hval, input, ip);
                htab.set(idx(hval), ip);
                ip += 1;
                hval = next(hval, input, ip);
                htab.set(idx(hval), ip);
                ip += 1;
            } else {
                if op >= max_out {
                    return false;
                }
                put_literal(o, &mut op, &mut lit, input[ip]);
                ip += 1;
            }
        }
    }
    if op + 3 > max_out {
        return false;
    }
    while ip < n {
        put_literal(o, &mut op, &mut lit, input[ip]);
        ip += 1;
    }
    o[op - lit - 1] = (lit as u8).wrapping_sub(1);
    if lit == 0 {
        op -= 1;
    }
    out.truncate(base + op);
    true
}

/// Decompress exactly `out_len` bytes.
pub fn decompress(input: &[u8], out_len: usize) -> Result<Vec<u8>, LzfError> {
    // A hostile length cannot make us reserve more than the input could
    // expand to (a 3-byte back-reference yields at most 264 bytes).
    let cap = out_len.min(input.len().saturating_mul(MAX_REF / 3 + 1));
    let mut out = Vec::with_capacity(cap);
    let mut ip = 0usize;
    while ip < input.len() {
        let ctrl = input[ip] as usize;
        ip += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            if out.len() + run > out_len {
                return Err(LzfError("literal run past the output length"));
            }
            let lits = input
                .get(ip..ip + run)
                .ok_or(LzfError("literal run past the input"))?;
            out.extend_from_slice(lits);
            ip += run;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += *input.get(ip).ok_or(LzfError("truncated back-reference"))? as usize;
                ip += 1;
            }
            len += 2;
            let lo = *input.get(ip).ok_or(LzfError("truncated back-reference"))? as usize;
            ip += 1;
            let back = (((ctrl & 0x1f) << 8) | lo) + 1;
            if back > out.len() {
                return Err(LzfError("back-reference before the start"));
            }
            if out.len() + len > out_len {
                return Err(LzfError("back-reference past the output length"));
            }
            let from = out.len() - back;
            if back >= len {
                out.extend_from_within(from..from + len);
            } else {
                // Overlapping copy: each byte may be one just written.
                for k in 0..len {
                    let b = out[from + k];
                    out.push(b);
                }
            }
        }
    }
    if out.len() != out_len {
        return Err(LzfError("output shorter than its stated length"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn roundtrip(data: &[u8]) {
        let mut c = Vec::new();
        if compress_within(data, data.len() + 64, &mut c) {
            assert_eq!(decompress(&c, data.len()).unwrap(), data);
        }
        let mut c2 = vec![9u8];
        if compress(data, &mut c2) {
            assert!(c2.len() - 1 < data.len());
            assert_eq!(decompress(&c2[1..], data.len()).unwrap(), data);
        } else {
            assert_eq!(c2, vec![9u8]);
        }
    }

    #[test]
    fn repetitive_text_compresses() {
        let s = b"abcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabc".repeat(10);
        let mut c = Vec::new();
        assert!(compress(&s, &mut c));
        assert!(c.len() < s.len() / 10);
        assert_eq!(decompress(&c, s.len()).unwrap(), s);
    }

    #[test]
    fn small_and_edge_inputs() {
        for data in [
            &b""[..],
            b"a",
            b"ab",
            b"abc",
            b"aaaa",
            b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            b"abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz",
        ] {
            roundtrip(data);
        }
        let long: Vec<u8> = (0..100_000u32)
            .map(|i| (i % 251) as u8 ^ (i / 7) as u8)
            .collect();
        roundtrip(&long);
        roundtrip(&vec![0u8; 70_000]);
    }

    #[test]
    fn decompress_rejects_garbage() {
        assert!(decompress(&[0x05, b'a'], 6).is_err()); // short literal
        assert!(decompress(&[0x20, 0x00], 3).is_err()); // ref before start
        assert!(decompress(&[0x00, b'a', 0xe0], 20).is_err()); // truncated
        assert!(decompress(&[0x00, b'a'], 2).is_err()); // short output
        assert!(decompress(&[0x01, b'a', b'b'], 1).is_err()); // too long
        assert_eq!(decompress(&[], 0).unwrap(), b"");
    }

    proptest! {
        #[test]
        fn roundtrips(data in proptest::collection::vec(0u8..4, 0..3000)) {
            roundtrip(&data);
        }

        #[test]
        fn roundtrips_any_bytes(data in proptest::collection::vec(any::<u8>(), 0..500)) {
            roundtrip(&data);
        }

        #[test]
        fn decompress_never_panics(
            data in proptest::collection::vec(any::<u8>(), 0..300),
            len in 0usize..2000,
        ) {
            let _ = decompress(&data, len);
        }
    }
}
