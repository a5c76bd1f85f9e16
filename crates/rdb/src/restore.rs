//! RESTORE: a verified DUMP payload back to a value.

use crate::Error;
use store::{EncodingLimits, Value};

/// Decode `body` (type byte + value, as [`crate::payload::verify`] returns
/// it). Every element is decoded and checked (our in-memory encodings are
/// our own, so a listpack is always walked whole): this is Valkey's deep
/// sanitization, always on.
pub fn restore(body: &[u8], limits: &EncodingLimits) -> Result<Value, Error> {
    let _ = (body, limits);
    todo!("helper R")
}
