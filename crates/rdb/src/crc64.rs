//! CRC-64 as Valkey computes it (Jones polynomial, reflected, `crc64(0, ..)`
//! of "123456789" is 0xe9c6d914c4b8d9ca).
//!
//! Interim version for the load side: a 256-entry table built at compile
//! time, one byte per step. The save side's (faster) one replaces it.

/// The Jones polynomial (0xad93d23594c935a9) with its bits reversed, for
/// the LSB-first (reflected) table.
const POLY: u64 = 0x95ac_9329_ac4b_c9b5;

const TABLE: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u64;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 == 1 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// Extend `crc` over `data` (start with 0).
pub fn crc64(crc: u64, data: &[u8]) -> u64 {
    let mut c = crc;
    for &b in data {
        c = TABLE[((c ^ b as u64) & 0xff) as usize] ^ (c >> 8);
    }
    c
}

#[cfg(test)]
mod tests {
    #[test]
    fn check_value() {
        assert_eq!(super::crc64(0, b"123456789"), 0xe9c6_d914_c4b8_d9ca);
        let split = super::crc64(super::crc64(0, b"1234"), b"56789");
        assert_eq!(split, 0xe9c6_d914_c4b8_d9ca);
    }
}
