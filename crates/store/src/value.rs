//! Value types. Strings for now; lists, hashes, sets and sorted sets come with
//! their own issue.

/// A string value. The variant is also what OBJECT ENCODING reports, so it
/// follows how Valkey created the value, not only what it holds.
#[derive(Clone, Debug, PartialEq)]
pub enum Str {
    /// An integer in `string2ll` form (`int`).
    Int(i64),
    /// Bytes written whole by SET and friends (`embstr` up to 44 bytes,
    /// `raw` above).
    Bytes(Vec<u8>),
    /// Bytes edited in place by APPEND or SETRANGE: Valkey reports `raw`
    /// for these whatever their length.
    Raw(Vec<u8>),
}

impl Str {
    pub fn from_bytes(b: &[u8]) -> Str {
        Str::Bytes(b.to_vec())
    }
    /// The bytes of a non-integer string.
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            Str::Int(_) => None,
            Str::Bytes(b) | Str::Raw(b) => Some(b),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(Str),
}
