//! CRC-64 as Valkey computes it (Jones polynomial, reflected, `crc64(0, ..)`
//! of "123456789" is 0xe9c6d914c4b8d9ca).
//!
//! Design: slice-by-8. Eight 256-entry tables are built at compile time
//! (`const fn`), so the hot loop folds 8 input bytes per step with eight
//! independent table lookups instead of eight dependent ones; the tail
//! (and short inputs) go byte by byte through table 0. Every byte of a
//! snapshot passes through here on the writer thread, which is why it is
//! worth the 16 KiB of tables.

/// The Jones polynomial 0xad93d23594c935a9, bit-reversed for the
/// reflected (LSB-first) form of the algorithm.
const POLY_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;

const fn make_tables() -> [[u64; 256]; 8] {
    let mut t = [[0u64; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u64;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ POLY_REFLECTED
            } else {
                crc >> 1
            };
            bit += 1;
        }
        t[0][i] = crc;
        i += 1;
    }
    // Table k advances a byte that still has k more zero bytes to pass
    // through, which is what lets 8 bytes be folded at once.
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

static TABLES: [[u64; 256]; 8] = make_tables();

/// One byte at a time: the reference the sliced loop must agree with.
pub fn crc64_bytewise(mut crc: u64, data: &[u8]) -> u64 {
    let t0 = &TABLES[0];
    for &b in data {
        crc = t0[((crc ^ b as u64) & 0xff) as usize] ^ (crc >> 8);
    }
    crc
}

/// Extend `crc` over `data` (start with 0).
pub fn crc64(mut crc: u64, data: &[u8]) -> u64 {
    let t = &TABLES;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let v = crc ^ u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        crc = t[7][(v & 0xff) as usize]
            ^ t[6][((v >> 8) & 0xff) as usize]
            ^ t[5][((v >> 16) & 0xff) as usize]
            ^ t[4][((v >> 24) & 0xff) as usize]
            ^ t[3][((v >> 32) & 0xff) as usize]
            ^ t[2][((v >> 40) & 0xff) as usize]
            ^ t[1][((v >> 48) & 0xff) as usize]
            ^ t[0][(v >> 56) as usize];
    }
    crc64_bytewise(crc, chunks.remainder())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn check_value() {
        assert_eq!(crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        assert_eq!(crc64_bytewise(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        assert_eq!(crc64(0, b""), 0);
    }

    #[test]
    fn valkey_self_test_vector() {
        // Valkey's crc64 self-test string.
        let s = b"This is a test of the emergency broadcast system.";
        assert_eq!(crc64(0, &s[..]), crc64_bytewise(0, &s[..]));
    }

    proptest! {
        #[test]
        fn sliced_equals_bytewise_over_splits(
            data in proptest::collection::vec(any::<u8>(), 0..600),
            cuts in proptest::collection::vec(any::<usize>(), 0..5),
        ) {
            let whole = crc64_bytewise(0, &data);
            prop_assert_eq!(crc64(0, &data), whole);
            let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
            cuts.sort_unstable();
            let (mut crc, mut at) = (0, 0);
            for c in cuts {
                crc = crc64(crc, &data[at..c]);
                at = c;
            }
            prop_assert_eq!(crc64(crc, &data[at..]), whole);
        }
    }
}
