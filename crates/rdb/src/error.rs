//! The one error type: what was wrong and the byte offset where it was met.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// Offset from the start of the file (or payload) where the bad input
    /// begins; for an IO error, how far reading got.
    pub offset: u64,
    pub msg: String,
}

impl Error {
    pub fn new(offset: u64, msg: impl Into<String>) -> Error {
        Error {
            offset,
            msg: msg.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at offset {}", self.msg, self.offset)
    }
}

impl std::error::Error for Error {}
