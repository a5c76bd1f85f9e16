//! The RDB file format as Valkey 8 writes it (version 11), and every older
//! version and legacy encoding Redis 6.x–7.2 and Valkey 7.2–8.x wrote.
//!
//! ```text
//!  save side (two threads)                      load side
//!  ───────────────────────                      ─────────
//!  execution thread: Capture::key(entry)        Loader<R: Read>
//!    type byte, key, value as tokens:             header "REDIS00vv" (1..=11)
//!    raw bytes + strings still to encode          opcodes → Item::{Aux, SelectDb,
//!    (collections already packed as listpacks)      ResizeDb, Function, Key}
//!            │ chunk                               values → store::Value via the
//!            ▼                                     decoders: listpack, ziplist,
//!  writer thread: Encoder::feed                    intset, zipmap, quicklist 1/2
//!    strings → int / LZF / raw encodings         EOF → CRC64 check
//!    CRC64 over every byte                      restore::restore(payload)
//!  payload::dump(value) = both, in one call       DUMP payload → Value
//! ```
//!
//! The split on the save side is what lets a snapshot run beside the
//! execution thread: copying a value into a [`capture::Capture`] is about a
//! `memcpy`, and the costly parts (integer detection, LZF, the checksum)
//! happen on the writer thread.
//!
//! This crate owns bytes only: it opens no files, starts no threads and
//! never touches a keyspace. It reads `store` types to write them and
//! builds `store` types when loading (honouring [`store::EncodingLimits`],
//! so a loaded value has the encoding Valkey would give it). Integers and
//! doubles are recognised and written by `resp::num`, the same rules the
//! replies follow.

pub mod capture;
pub mod consts;
pub mod crc64;
pub mod encode;
pub mod error;
pub mod intset;
pub mod listpack;
pub mod load;
pub use lzf;
pub mod object;
pub mod payload;
pub mod restore;
mod stream;
pub mod ziplist;
pub mod zipmap;

pub use capture::{AccessWrite, Capture, Encoder};
pub use consts::RDB_VERSION;
pub use error::Error;
pub use load::{Item, KeyRecord, Loader, PackedRecord};
