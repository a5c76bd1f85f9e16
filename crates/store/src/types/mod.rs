//! Collection value types, each in its own module with its compact
//! (listpack/intset-like) and large encodings.

pub mod hash;
pub mod list;
pub(crate) mod lp_size;
pub mod set;
pub mod stream;
pub(crate) mod strpack;
pub mod zset;

pub use hash::Hash;
pub use list::List;
pub use set::Set;
pub use stream::{Stream, StreamId};
pub use zset::ZSet;
