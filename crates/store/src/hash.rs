//! The key hash. Computed once per key (by the IO layer when it can), then
//! carried with the key so the table never hashes twice.

/// Hash of a key for [`crate::Table`]. Fixed per process.
pub fn hash_key(key: &[u8]) -> u64 {
    // Placeholder (FNV-1a); the store helper replaces it with a fast, well-mixed hash.
    let mut h: u64 = 0xcbf29ce484222325;
    for &b in key {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}
