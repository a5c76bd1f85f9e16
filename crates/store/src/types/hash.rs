//! The hash value type. Being built under issue 4; this is only the
//! shape the rest of the store and the engine compile against.

/// A hash value.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Hash {}

impl Hash {
    /// Number of elements.
    pub fn len(&self) -> usize {
        0
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// OBJECT ENCODING, with Valkey's names.
    pub fn encoding(&self) -> &'static str {
        "hashtable"
    }
}
