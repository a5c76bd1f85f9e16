//! The keyspace of ringkv: our hash table, the value types and the
//! per-database view with expiry.
//!
//! ```text
//!  Keyspace ── Db[0..databases] ── Table<Entry>   (cache-line buckets, tags,
//!                                  │               incremental resize, prefetch)
//!                                  └─ Entry { value: Value, expire_at_ms, access clock }
//! ```
//!
//! ```text
//!  Db ── table:    Table<Entry>  every key
//!     └─ volatile: Table<i64>    keys with a TTL → expire time (exact
//!                                `expires`, sampled by the active cycle)
//! ```
//!
//! This crate owns memory layout, the key hash ([`hash_key`], seeded per
//! process) and expiry bookkeeping (lazy expiry in [`Db::get`], Valkey's
//! adaptive cycle in [`Db::active_expire`]). It knows nothing of commands,
//! replies, sessions or sockets, and never reads the clock for expiry
//! decisions: the engine passes `now_ms` in. It is the only crate besides
//! `net` allowed `unsafe`, and only inside the table (prefetch and the bucket
//! array allocation).

pub mod hash;
pub mod keyspace;
pub mod table;
pub mod types;
pub mod value;

pub use hash::hash_key;
pub use keyspace::{AccessPolicy, Db, Entry, ExpireStats, Keyspace};
pub use table::Table;
pub use value::{EncodingLimits, SHARED_STR_MIN, Str, Value};
