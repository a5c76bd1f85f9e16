//! RESTORE: a verified DUMP payload back to a value.
//!
//! The body is decoded with the loader's own value reader over a slice
//! (the same checks as loading a file), and must be consumed exactly:
//! trailing bytes mean the payload is not what it claims to be. Error
//! offsets are relative to the body's first byte (the type byte).

use crate::Error;
use crate::load::{Slice, read_value};
use store::{EncodingLimits, Value};

/// Decode `body` (type byte + value, as [`crate::payload::verify`] returns
/// it). Every element is decoded and checked (our in-memory encodings are
/// our own, so a listpack is always walked whole): this is Valkey's deep
/// sanitization, always on.
pub fn restore(body: &[u8], limits: &EncodingLimits) -> Result<Value, Error> {
    let Some(&t) = body.first() else {
        return Err(Error::new(0, "empty payload"));
    };
    let mut s = Slice { data: body, at: 1 };
    let v = read_value(&mut s, t, limits)?;
    if s.at != body.len() {
        return Err(Error::new(
            s.at as u64,
            format!("{} trailing bytes after the value", body.len() - s.at),
        ));
    }
    Ok(v)
}
