//! CRC-64 as Valkey computes it (Jones polynomial, reflected, `crc64(0, ..)`
//! of "123456789" is 0xe9c6d914c4b8d9ca).

/// Extend `crc` over `data` (start with 0).
pub fn crc64(crc: u64, data: &[u8]) -> u64 {
    let _ = (crc, data);
    todo!("helper W")
}
