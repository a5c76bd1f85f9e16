//! The set value type. Being built under issue 4; this is only the
//! shape the rest of the store and the engine compile against.

/// A set value.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Set {}

impl Set {
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
