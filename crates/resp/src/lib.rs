//! RESP2/RESP3 for ringkv: the request parser, the reply encoder and a parser
//! for replies (for clients: the load generator and the tests).
//!
//! ```text
//!  socket bytes ──► request::parse_command ──► Span list over the read buffer (zero-copy)
//!                                              │
//!  engine ─────────► reply::ReplyWriter ──────► Vec<u8> of RESP2 or RESP3 frames
//!                                              │
//!  client side ◄──── value::parse_value ◄──────┘
//! ```
//!
//! This crate owns the wire format and nothing else: no sockets, no buffers'
//! lifetimes, no command semantics. It has no dependencies and no `unsafe`.
//! Every parser here has a cargo-fuzz target in `fuzz/`.

pub mod reply;
pub mod request;
pub mod value;

pub use reply::{Protocol, ReplyWriter};
pub use request::{Limits, Parsed, ProtocolError, Span, parse_command};
pub use value::{Value, parse_value};
