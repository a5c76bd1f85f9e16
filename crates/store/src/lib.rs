//! The keyspace of ringkv: our hash table, the value types and the
//! per-database view with expiry.
//!
//! ```text
//!  Keyspace ── Db[0..databases] ── Table<Entry>   (cache-line buckets, tags,
//!                                  │               incremental resize, prefetch)
//!                                  └─ Entry { value: Value, expire_at_ms, access clock }
//! ```
//!
//! This crate owns memory layout and expiry bookkeeping. It knows nothing of
//! commands, replies, sessions or sockets. It is the only crate besides `net`
//! allowed `unsafe`, and only inside the table.

pub mod hash;
pub mod keyspace;
pub mod table;
pub mod value;

pub use hash::hash_key;
pub use keyspace::{Db, Entry, Keyspace};
pub use table::Table;
pub use value::{Str, Value};
