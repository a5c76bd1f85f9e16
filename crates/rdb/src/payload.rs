//! DUMP payloads: type byte + value, the RDB version as 2 bytes (LE) and
//! the CRC64 of all that (LE).

use store::ValueRef;

/// DUMP's reply for a value.
pub fn dump(v: ValueRef<'_>) -> Vec<u8> {
    let _ = v;
    todo!("helper W")
}

/// Check the trailer: `Some((type byte and value bytes))` when the version
/// is one we load and the checksum matches (or is 0, as Valkey accepts).
pub fn verify(payload: &[u8]) -> Option<&[u8]> {
    let _ = payload;
    todo!("helper W")
}
