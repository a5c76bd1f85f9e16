//! Value types. Strings for now; lists, hashes, sets and sorted sets come with
//! their own issue.

/// A string value: integers are kept as integers (OBJECT ENCODING `int`).
#[derive(Clone, Debug, PartialEq)]
pub enum Str {
    Int(i64),
    Bytes(Vec<u8>),
}

impl Str {
    pub fn from_bytes(b: &[u8]) -> Str {
        Str::Bytes(b.to_vec())
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(Str),
}
