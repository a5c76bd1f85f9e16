//! RESP2/RESP3 for ringkv: the request parser, the reply encoder and a parser
//! for replies (for clients: the load generator and the tests).
//!
//! ```text
//!  socket bytes ──► request::parse_command_mut ──► Span list over the read buffer (zero-copy)
//!                                                  │
//!  engine ─────────► reply::ReplyWriter ──────────► Vec<u8> of RESP2 or RESP3 frames
//!                                                  │
//!  client side ◄──── value::parse_value / value_len ◄┘   request::encode_command ──► server
//! ```
//!
//! This crate owns the wire format and nothing else: no sockets, no buffers'
//! lifetimes, no command semantics. It has no dependencies and no `unsafe`.
//! Every parser here has a cargo-fuzz target in `fuzz/`.
//!
//! * [`request`]: one command at a time from the start of a buffer, with
//!   Valkey's exact protocol errors. Multibulk is zero-copy; inline lines
//!   whose arguments need unescaping are rewritten in place by
//!   [`parse_command_mut`] (see the module docs for why).
//!   [`parse_command_resume`] keeps its place in a multibulk command that
//!   is still arriving, so a command of a million arguments read in 16 KiB
//!   pieces is scanned once, not once per read.
//! * [`reply`]: [`ReplyWriter`], one call per RESP3 type, downgraded to
//!   RESP2 as Valkey does.
//! * [`value`]: decoding replies, owned ([`parse_value`]) or skipped
//!   without allocation ([`value_len`]).
//! * [`num`]: `string2ll`-exact integer parsing, integer formatting and
//!   Valkey's double formatting, for the engine too.

mod grisu;
pub mod num;
pub mod reply;
pub mod replybuf;
pub mod request;
pub mod value;

pub use reply::{Protocol, ReplyWriter};
pub use replybuf::{Mark, ReplyBuf, SharedBytes};
pub use request::{
    Limits, Parsed, ProtocolError, Resume, Span, encode_command, parse_command, parse_command_mut,
    parse_command_resume, split_line, write_command,
};
pub use value::{Value, parse_value, value_len};
