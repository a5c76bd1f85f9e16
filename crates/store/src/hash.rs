//! The key hash. Computed once per key (by the IO layer when it can), then
//! carried with the key so the table never hashes twice.
//!
//! A folded-multiply hash in the style of wyhash/foldhash, written for this
//! crate: keys up to 16 bytes are read as two overlapping words (no loop, no
//! branch on every byte), longer keys fold 16 bytes per round. The 64x64→128
//! multiply is the mixer: xoring its halves spreads every input bit over the
//! whole result, so both the low bits (bucket index) and the top byte (tag)
//! are well mixed.
//!
//! The seed is random per process (address-space layout + clock + pid, taken
//! once), so an attacker who does not see the process cannot pick keys that
//! all land in one bucket. Hash values are therefore not stable across
//! restarts; nothing may persist them.

use std::sync::OnceLock;

// Odd constants with roughly half their bits set, so multiplying by them
// moves every bit around.
const P0: u64 = 0xa076_1d64_78bd_642f;
const P1: u64 = 0xe703_7ed1_a0b4_28db;
const P2: u64 = 0x8ebc_6af0_9c88_c6e3;

#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let r = (a as u128).wrapping_mul(b as u128);
    (r as u64) ^ ((r >> 64) as u64)
}

#[inline(always)]
fn r8(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

#[inline(always)]
fn r4(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w) as u64
}

fn make_seed() -> u64 {
    let local = 0u8;
    let stack = &local as *const u8 as u64;
    let code = make_seed as fn() -> u64 as usize as u64;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let pid = std::process::id() as u64;
    fold(stack ^ P0, code ^ P1) ^ fold(nanos ^ P2, pid ^ P0)
}

/// The per-process seed (see the module doc).
#[inline]
pub fn seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(make_seed)
}

/// Hash of a key for [`crate::Table`]. Fixed per process.
#[inline]
pub fn hash_key(key: &[u8]) -> u64 {
    hash_with_seed(key, seed())
}

/// [`hash_key`] with an explicit seed (tests, benchmarks that need
/// reproducible values).
#[inline]
pub fn hash_with_seed(key: &[u8], seed: u64) -> u64 {
    let len = key.len();
    let mut s = seed ^ P0;
    let (a, b);
    if len <= 16 {
        if len >= 4 {
            // Two overlapping 4-byte reads at each end cover 4..=16 bytes.
            let q = (len >> 3) << 2;
            a = (r4(key, 0) << 32) | r4(key, q);
            b = (r4(key, len - 4) << 32) | r4(key, len - 4 - q);
        } else if len > 0 {
            a = ((key[0] as u64) << 16) | ((key[len >> 1] as u64) << 8) | key[len - 1] as u64;
            b = 0;
        } else {
            a = 0;
            b = 0;
        }
    } else {
        let mut i = 0;
        // Two independent lanes let the multiplies overlap.
        let mut s2 = s ^ P2;
        while len - i > 32 {
            s = fold(r8(key, i) ^ P1, r8(key, i + 8) ^ s);
            s2 = fold(r8(key, i + 16) ^ P2, r8(key, i + 24) ^ s2);
            i += 32;
        }
        if i > 0 {
            s ^= s2;
        }
        if len - i > 16 {
            s = fold(r8(key, i) ^ P1, r8(key, i + 8) ^ s);
        }
        // The last 16 bytes, overlapping what was already folded if needed.
        a = r8(key, len - 16);
        b = r8(key, len - 8);
    }
    let r = ((a ^ P1) as u128).wrapping_mul((b ^ s) as u128);
    fold((r as u64) ^ P0 ^ len as u64, ((r >> 64) as u64) ^ P1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_length_sensitive() {
        assert_eq!(hash_key(b"foo"), hash_key(b"foo"));
        assert_ne!(hash_key(b""), hash_key(b"\0"));
        assert_ne!(hash_key(b"\0"), hash_key(b"\0\0"));
        let long = [7u8; 100];
        for n in 0..100 {
            assert_ne!(hash_key(&long[..n]), hash_key(&long[..n + 1]), "len {n}");
        }
        assert_ne!(hash_with_seed(b"k", 1), hash_with_seed(b"k", 2));
    }

    #[test]
    fn low_bits_and_top_byte_spread() {
        // Sequential keys (the common benchmark shape) must fill 1024
        // buckets and all 256 tags evenly.
        let mut buckets = [0u32; 1024];
        let mut tags = [0u32; 256];
        let n = 256 * 1024;
        for i in 0..n {
            let h = hash_key(format!("key:{i:012}").as_bytes());
            buckets[(h & 1023) as usize] += 1;
            tags[(h >> 56) as usize] += 1;
        }
        let exp_b = n / 1024;
        let exp_t = n / 256;
        assert!(buckets.iter().all(|&c| c > exp_b / 2 && c < exp_b * 2));
        assert!(
            tags.iter()
                .all(|&c| c > exp_t * 8 / 10 && c < exp_t * 12 / 10)
        );
    }

    #[test]
    fn single_bit_flips_avalanche() {
        let key = *b"abcdefghijklmnopqrstuvwxyz0123456789";
        for len in [1usize, 3, 4, 8, 12, 16, 17, 31, 33, 36] {
            let base = hash_key(&key[..len]);
            for bit in 0..len * 8 {
                let mut k = key;
                k[bit / 8] ^= 1 << (bit % 8);
                let d = (base ^ hash_key(&k[..len])).count_ones();
                assert!(
                    (12..=52).contains(&d),
                    "len {len} bit {bit}: {d} bits changed"
                );
            }
        }
    }
}
