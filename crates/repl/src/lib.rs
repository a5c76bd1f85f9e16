//! Replication's IO: the threads that own replication sockets, so that
//! neither the engine (no sockets) nor the event loops (no knowledge of
//! what replication means) have to.
//!
//! * [`link`]: this server as a replica — one `repl-link` thread per
//!   primary connects, handshakes, receives the RDB into a file and hands
//!   the stream over as whole commands ([`TcpLinks`]); [`preamble`]
//!   reads what the primary answers before the stream.
//! * [`feed`]: this server as a primary — one `repl-feed` thread per
//!   replica takes the replica's socket from the event loop after PSYNC
//!   ([`adopt`]), hands it to a pump, and makes what goes before the
//!   stream: the full sync's RDB, encoded as the snapshot capture
//!   produces it (or the file a save to disk wrote) ([`FeedThreads`]),
//!   queued for the pump (`prelude`);
//! * `pump`: sends that, then the write-effects stream straight from its
//!   refcounted blocks, and reads the replica's ACKs, without blocking —
//!   served by an IO thread in threaded mode (`net::hosted`), else by a
//!   thread of its own.
//! * [`zerocopy`]: zero-copy sends from those blocks (`MSG_ZEROCOPY`, or
//!   `IORING_OP_SEND_ZC` under the io_uring backend) and the tracker of
//!   sends in flight (seed 003).
//! * [`traffic`]: the bytes those sockets move (INFO, CLIENT LIST).
//!
//! This crate owns replication sockets, transfer files while they are
//! written, and the framing of the stream on the wire. It must not touch
//! the keyspace or the event loops (an IO thread steps a pump through
//! `net::hosted` and knows nothing else of it), and it never runs a
//! command: every
//! decision (full or partial sync, what to load, when a replica is too
//! far behind) is the engine's (`engine::replication`).

pub mod feed;
pub mod link;
pub mod preamble;
mod prelude;
mod pump;
pub mod traffic;
pub mod zerocopy;

pub use feed::{FeedThreads, adopt};
pub use link::TcpLinks;
