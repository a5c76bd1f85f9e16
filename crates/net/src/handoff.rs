//! What crosses between an IO thread and the execution thread in threaded
//! mode (`io-threads` > 1): the messages, and the buffers they carry.
//!
//! ```text
//!  IO thread k                                   execution thread
//!  ───────────                                   ────────────────
//!  accept ─────────── Connect{fd, addrs} ──────► engine.connect, pick a thread
//!         ◄────────── Adopt{fd, client} / Refuse ─┘ (the least-loaded one)
//!  parse ──────────── Commands{Request, out} ───► one execute_batch over every
//!         ◄────────── Replies{Request, out} ────┘ thread's requests
//!  close ──────────── Disconnect{client} ───────► engine.disconnect
//!         ◄────────── Output / Close / Unblocked / Shutdown (engine events)
//!
//!  large values (≥ store::SHARED_STR_MIN) travel by reference:
//!         ◄────────── Replies{.., out: bytes + Arc refs to values}
//!  sendmsg / IORING_OP_SENDMSG over bytes and values (no copy)
//!  sent (or the connection gone): refs collected per loop iteration
//!  spent ──────────── Spent{refs} ──────────────► dropped here: a value
//!                                                  overwritten or deleted
//!                                                  meanwhile is freed by
//!                                                  the thread that made it
//!
//!  moving a connection from IO thread A to B (load, CONFIG SET io-threads):
//!  A      ◄────────── Release{client} ─────────── owner stays A; output for
//!  A: once nothing is in flight, let go of the socket    the client is held
//!  A ──────────────── Released{Connection} ─────► owner = B
//!  B      ◄────────── Adopt{client, Moved(Connection)}, then the held output
//!  retiring a thread with no clients left:
//!         ◄────────── Retire;  Exited ──────────► join it
//! ```
//!
//! A connection has at most one request with the execution thread at a
//! time, so its commands run in order and its replies come back in order
//! with nothing to re-sequence. The buffers of a request (its bytes,
//! spans, and the reply buffer it is answered in) are allocated by the IO
//! thread and come back to it with the replies, to be reused or freed
//! there: the allocator never sees a cross-thread free on the hot path.
//! The execution thread allocates only the rare out-of-band output
//! (pub/sub messages, unblocked replies, refusals), and the large string
//! values that replies refer to: an IO thread never drops its reference
//! to one (it might be the last, and free the value), it hands it back in
//! `Spent`, and the execution thread drops it. Only the small `Vec`
//! carrying the references is freed there rather than where it was made.
//! In inline mode (`io-threads 1`) the loop's own thread drops them.

use crate::connection::Connection;
use engine::{ClientId, CommandHint};
use resp::{Limits, ProtocolError, ReplyBuf, SharedBytes, Span};
use ringkv_rings::spsc::Producer;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::RawFd;

/// One direction of a hand-off: the ring, and the messages that did not
/// fit it yet, kept back in order (a full ring is back-pressure, never a
/// drop).
pub(crate) struct Outlet<T> {
    tx: Producer<T>,
    held: VecDeque<T>,
}

impl<T: Send> Outlet<T> {
    pub(crate) fn new(tx: Producer<T>) -> Outlet<T> {
        Outlet {
            tx,
            held: VecDeque::new(),
        }
    }

    /// Queue a message (published by [`Outlet::flush`]). Straight into the
    /// ring when nothing waits ahead of it, so it is moved once.
    pub(crate) fn send(&mut self, msg: T) {
        if self.held.is_empty() {
            if let Err(msg) = self.tx.push(msg) {
                self.held.push_back(msg);
            }
        } else {
            self.held.push_back(msg);
        }
    }

    /// Move queued messages into the ring and publish them with one store.
    /// Returns how many were published.
    pub(crate) fn flush(&mut self) -> usize {
        while let Some(msg) = self.held.pop_front() {
            if let Err(msg) = self.tx.push(msg) {
                self.held.push_front(msg);
                break;
            }
        }
        self.tx.publish()
    }

    /// Messages wait for room in the ring.
    pub(crate) fn held_back(&self) -> bool {
        !self.held.is_empty()
    }

    pub(crate) fn is_abandoned(&self) -> bool {
        self.tx.is_abandoned()
    }
}

/// Parsed commands detached from a connection's read buffer: the bytes of
/// complete commands, their argument spans, argument counts, command hints
/// (table entry, key hash: the execution thread prefetches from these
/// without reading the bytes) and where each command ends (for a client
/// that blocks part-way).
#[derive(Debug, Default)]
pub(crate) struct Request {
    pub(crate) data: Vec<u8>,
    pub(crate) args: Vec<Span>,
    pub(crate) argc: Vec<u32>,
    pub(crate) hints: Vec<CommandHint>,
    pub(crate) ends: Vec<usize>,
}

impl Request {
    pub(crate) fn clear(&mut self) {
        self.data.clear();
        self.args.clear();
        self.argc.clear();
        self.hints.clear();
        self.ends.clear();
    }
}

/// The socket an `Adopt` hands to an IO thread.
#[derive(Debug)]
pub(crate) enum Arrival {
    /// Just accepted.
    New { fd: RawFd, keepalive_s: u64 },
    /// Moved from another IO thread, with all its state.
    Moved(Box<Connection>),
}

impl Arrival {
    pub(crate) fn fd(&self) -> RawFd {
        match self {
            Arrival::New { fd, .. } => *fd,
            Arrival::Moved(c) => c.fd,
        }
    }
}

/// IO thread → execution thread.
#[derive(Debug)]
pub(crate) enum ToExec {
    /// A new socket (only the accepting IO thread sends these).
    Connect {
        fd: RawFd,
        peer: SocketAddr,
        local: SocketAddr,
    },
    /// Complete commands of one connection, and the buffer to reply into.
    Commands {
        slot: u32,
        generation: u32,
        client: ClientId,
        req: Request,
        out: ReplyBuf,
        /// Bytes read from this client since its last request.
        bytes_in: u64,
    },
    /// The connection is gone (after any request it sent before).
    Disconnect {
        client: ClientId,
    },
    ProtocolError {
        client: ClientId,
        err: ProtocolError,
    },
    QueryBufferLimit {
        client: ClientId,
        len: usize,
    },
    /// Closed for going over `client-output-buffer-limit`.
    OutputBufferLimit {
        client: ClientId,
        len: usize,
    },
    /// A connection the execution thread asked for with `Release`, whole:
    /// socket, unread input, unsent output, blocked state.
    Released {
        conn: Box<Connection>,
    },
    /// References to large values that this thread has finished sending
    /// (or dropped with their connection), gathered over one loop
    /// iteration: the execution thread drops them, so a value whose last
    /// reference this was is freed by the thread that allocated it.
    Spent {
        refs: Vec<SharedBytes>,
    },
    /// The thread has finished shutting down and is about to exit.
    Exited,
}

/// Execution thread → IO thread.
// `Replies` is nearly every message on this ring, so its size is the
// ring slot's size either way; boxing it would cost an allocation per
// request to shrink the rare variants.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum ToIo {
    /// Own this socket from now on.
    Adopt {
        client: ClientId,
        limits: Limits,
        qbuf_limit: usize,
        /// Where to publish the client's pending output (CLIENT LIST `omem`).
        meter: Option<engine::OutputMeter>,
        socket: Arrival,
    },
    /// Send these bytes (best effort) and close: maxclients, protected mode.
    Refuse {
        fd: RawFd,
        reply: Vec<u8>,
    },
    Replies {
        slot: u32,
        generation: u32,
        req: Request,
        out: ReplyBuf,
        close_after_reply: bool,
        /// The client blocked after this many commands.
        blocked_after: Option<usize>,
        limits: Limits,
        qbuf_limit: usize,
        /// The client's output buffer limit class after these commands.
        out_class: engine::OutputClass,
    },
    /// Output produced outside the client's own request.
    Output {
        client: ClientId,
        bytes: Vec<u8>,
    },
    Close {
        client: ClientId,
        flush: bool,
    },
    Unblocked {
        client: ClientId,
    },
    /// Let go of this client's connection and send it back as `Released`.
    Release {
        client: ClientId,
    },
    /// No connections are left here: end the thread.
    Retire,
    Shutdown,
}
