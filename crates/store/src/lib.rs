//! The keyspace of ringkv: our hash table, the value types and the
//! per-database view with expiry.
//!
//! ```text
//!  Keyspace ── Db[0..databases] ── RawTable<Entry>   (cache-line buckets of
//!                               │                    8 tagged words, incremental
//!                               │                    resize, prefetch)
//!                               │    └─ Entry: one node = key + value (inline
//!                               │       string, integer or Box<Value>) +
//!                               │       expire time + 24 access bits
//!                               ├─ expiry index: min-heap of (time, key hash)
//!                               └─ view (while frozen for BGSAVE): cursor over
//!                                  the home buckets, preimages (old copies of
//!                                  keys written ahead of it), recorded keys,
//!                                  the frozen table if a clear detached it
//! ```
//!
//! This crate owns memory layout, the key hash ([`hash_key`], seeded per
//! process), access stamps (Valkey's LRU clock or LFU counter, per
//! [`AccessPolicy`]) and expiry bookkeeping (lazy expiry in [`Db::get`], the
//! active cycle in [`Db::active_expire`]) and point-in-time views for a
//! fork-less BGSAVE ([`freeze`]: while frozen the table stops resizing, a
//! cursor walks its buckets, and the first write to a key not yet walked
//! keeps a copy of it first), and the walk that offers each key's blocks to
//! the allocator for active defragmentation ([`defrag`]). It knows nothing of commands,
//! replies, sessions or sockets, and never reads the clock for expiry
//! decisions: the engine passes `now_ms` in. It is the only crate besides
//! `net` allowed `unsafe`, and only in the table, the entry node layout
//! and the defragmentation mover.

pub mod alloc_size;
pub mod defrag;
pub mod entry;
pub mod freeze;
pub mod hash;
pub mod keyspace;
pub mod table;
pub mod types;
pub mod value;

pub use alloc_size::alloc_size;
pub use defrag::{DefragCounts, LaterCursor, Relocate};
pub use entry::{Entry, StrRef, ValueRef};
pub use hash::hash_key;
pub use keyspace::{
    AccessPolicy, Db, ExpireStats, Keyspace, LFU_INIT_VAL, LazyRemovals, Replaced, lru_clock,
    restored_access,
};
pub use table::{RawTable, Table};
pub use types::stream::StreamId;
pub use value::{EncodingLimits, SHARED_STR_MIN, Str, Value};
