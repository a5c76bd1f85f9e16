//! What crosses between an IO thread and the execution thread in threaded
//! mode (`io-threads` > 1): the messages, and the buffers they carry.
//!
//! ```text
//!  IO thread k                                   execution thread
//!  ───────────                                   ────────────────
//!  accept ─────────── Connect{fd, addrs} ──────► engine.connect, pick a thread
//!         ◄────────── Adopt{fd, client} / Refuse ─┘ (the least-loaded one)
//!  parse ──────────── Commands(Exchange) ───────► one execute_batch over every
//!         ◄────────── Replies(Exchange) ────────┘ thread's requests
//!  (an Exchange is a pooled box: Request, out, limits; a ring slot moves
//!   a pointer)
//!  close ──────────── Disconnect{client} ───────► engine.disconnect
//!         ◄────────── Output / Close / Unblocked / Shutdown (engine events)
//!
//!  large values (≥ store::SHARED_STR_MIN) travel by reference:
//!         ◄────────── Replies(Exchange{out: bytes + Arc refs to values})
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
//!         ◄────────── Retire;  Exited ──────────► join it (io-thread-1,
//!                                                  retired on the way back
//!                                                  to inline mode, returns
//!                                                  the listeners)
//!  back to inline mode (io-threads 1): every client Released to the
//!  execution thread itself, which keeps it until every thread has exited
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

use crate::connection::{Connection, release_if_grown};
use engine::{ClientId, ClientInfo, CommandHint};
use resp::{Limits, ProtocolError, ReplyBuf, SharedBytes, Span};
use ringkv_rings::spsc::Producer;
use std::collections::VecDeque;
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
    /// Emptied for reuse; a vector one big request grew gives its memory
    /// back.
    pub(crate) fn clear(&mut self) {
        self.data.clear();
        self.args.clear();
        self.argc.clear();
        self.hints.clear();
        self.ends.clear();
        release_if_grown(&mut self.data);
        release_if_grown(&mut self.args);
        release_if_grown(&mut self.argc);
        release_if_grown(&mut self.hints);
        release_if_grown(&mut self.ends);
    }
}

/// The socket an `Adopt` hands to an IO thread.
#[derive(Debug)]
pub(crate) enum Arrival {
    /// Just accepted; `meter` is where its buffered bytes are published
    /// (CLIENT LIST `omem`, `qbuf`; a moved connection carries its own).
    New {
        fd: RawFd,
        keepalive_s: u64,
        meter: Option<engine::ClientMeter>,
    },
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

/// One connection's round trip through the execution thread: its parsed
/// commands, the buffer they are answered in, and what the execution
/// thread then tells the IO thread about the client.
///
/// Boxed and pooled by the IO thread. A ring slot then carries a pointer
/// rather than ~250 bytes of buffers and limits (a message is 24 bytes
/// one way, 40 the other), and the buffers inside come back to be reused
/// (or freed) by the thread that allocated them.
#[derive(Debug, Default)]
pub(crate) struct Exchange {
    pub(crate) slot: u32,
    pub(crate) generation: u32,
    pub(crate) client: ClientId,
    pub(crate) req: Request,
    pub(crate) out: ReplyBuf,
    /// Bytes read from this client since its last request.
    pub(crate) bytes_in: u64,
    // Set by the execution thread with the replies.
    pub(crate) close_after_reply: bool,
    /// The client blocked after this many commands.
    pub(crate) blocked_after: Option<usize>,
    pub(crate) limits: Limits,
    pub(crate) qbuf_limit: usize,
    /// The client's output buffer limit class after these commands.
    pub(crate) out_class: engine::OutputClass,
    /// The client speaks RESP3 after these commands.
    pub(crate) resp3: bool,
    /// The client is inside MULTI after these commands.
    pub(crate) in_multi: bool,
}

/// A socket just accepted, for the execution thread to admit.
#[derive(Debug)]
pub(crate) struct Accepted {
    pub(crate) info: ClientInfo,
    /// Accepted while a script was busy: already served by the accepting
    /// IO thread as this client (an id from `Engine::client_ids`); the
    /// execution thread registers it there, or refuses it with
    /// `Output` + `Close`.
    pub(crate) installed: Option<ClientId>,
}

/// A connection an IO thread accepted while a script was busy, now
/// registered: its limits and meter.
#[derive(Debug)]
pub(crate) struct Registration {
    pub(crate) client: ClientId,
    pub(crate) limits: Limits,
    pub(crate) qbuf_limit: usize,
    pub(crate) meter: Option<engine::ClientMeter>,
}

/// What an IO thread needs to own a client's socket.
#[derive(Debug)]
pub(crate) struct Adoption {
    pub(crate) client: ClientId,
    pub(crate) limits: Limits,
    pub(crate) qbuf_limit: usize,
    pub(crate) socket: Arrival,
}

// The rare variants are boxed so that a ring slot is no bigger than the
// per-request ones (a pointer and a tag).

/// IO thread → execution thread.
#[derive(Debug)]
pub(crate) enum ToExec {
    /// A new socket (only the accepting IO thread sends these).
    Connect(Box<Accepted>),
    /// Complete commands of one connection, and the buffer to reply into.
    Commands(Box<Exchange>),
    /// The connection is gone (after any request it sent before).
    Disconnect {
        client: ClientId,
    },
    ProtocolError {
        client: ClientId,
        err: Box<(ProtocolError, engine::QuerySample)>,
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
#[derive(Debug)]
pub(crate) enum ToIo {
    /// Own this socket from now on.
    Adopt(Box<Adoption>),
    /// Send these bytes (best effort) and close: maxclients, protected mode.
    Refuse {
        fd: RawFd,
        reply: Vec<u8>,
    },
    /// The [`Exchange`] of a `Commands`, answered.
    Replies(Box<Exchange>),
    /// The [`Exchange`] of a `Commands`, not run: it arrived while a
    /// script was busy (answer it from the busy state, or ship it again).
    Unrun(Box<Exchange>),
    /// A connection accepted while a script was busy is registered.
    Registered(Box<Registration>),
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
    /// PSYNC: let go of this client's socket for the replication IO.
    Detach {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring slot is one message: keep them a few words, so that moving
    /// one through a ring is a cache line at most.
    #[test]
    fn ring_messages_are_small() {
        assert!(
            std::mem::size_of::<ToExec>() <= 24,
            "{}",
            std::mem::size_of::<ToExec>()
        );
        assert!(
            std::mem::size_of::<ToIo>() <= 40,
            "{}",
            std::mem::size_of::<ToIo>()
        );
    }
}
