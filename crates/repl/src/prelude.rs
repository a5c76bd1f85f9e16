//! What a feed sends before its stream — replies the client had not
//! received yet, `+FULLRESYNC`/`+CONTINUE`, a full sync's RDB — as a
//! queue from the feed's thread to the pump that owns the socket.
//!
//! The feed's thread makes these bytes (it waits for the saved file, or
//! encodes the capture's chunks into RDB, which is CPU work no IO thread
//! should do) but never writes them: the pump does, on an IO thread in
//! threaded mode, without blocking, as it then sends the stream.
//!
//! ```text
//!  feed thread ── Producer::push ──► [bounded queue] ──► Prelude::take ── pump
//!    Bytes (unsent replies, preamble, "$EOF:<mark>", 1 MB of RDB, "\n" …)
//!    File  (a saved RDB: sendfile(2) when the socket has room)
//!    RdbEnd (the RDB is out: online / hold for the first ACK / rdb-only)
//!    End   (the stream follows)   Fail (the feed ends, saying why)
//! ```

use crate::feed::Shared;
use crate::zerocopy::Sent;
use effects::Slice;
use std::fs::File;
use std::io::ErrorKind;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};

/// Items queued ahead of the pump: the RDB's buffers are ~1 MB each, so
/// a sync holds at most a few MB beyond what the socket has taken.
const DEPTH: usize = 2;
/// The most one sendfile(2) call is asked to move.
const SENDFILE_MAX: usize = 1 << 30;

/// One thing to send (or to do) before the stream.
pub(crate) enum Out {
    /// Sent as they are (zero-copy from the feed's size on).
    Bytes(Slice),
    /// A saved RDB file, page cache to socket.
    File(FileOut),
    /// The RDB is all sent.
    RdbEnd(RdbEnd),
    /// The feed's thread failed: the feed ends with this reason.
    Fail(String),
    /// Nothing more: the stream follows.
    End,
}

impl Out {
    pub(crate) fn bytes(b: impl Into<Vec<u8>>) -> Out {
        Out::Bytes(Slice::from_vec(b.into()))
    }
}

/// What follows the last byte of a full sync's RDB.
pub(crate) struct RdbEnd {
    /// A diskless sync's capture waits for this: the RDB's size once the
    /// replica's socket has taken it all, or why not.
    pub(crate) outcome: Option<mpsc::Sender<Result<u64, String>>>,
    pub(crate) bytes: u64,
    pub(crate) then: Then,
    /// Logged once sent.
    pub(crate) note: Option<String>,
}

/// What follows a full sync's RDB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Then {
    /// The replica is online and the stream follows (an RDB with `$len`).
    Online,
    /// Nothing more goes until the replica's first ACK: the end of an
    /// EOF-marked RDB must end one of the replica's reads (Valkey's
    /// repl_put_online_on_ack).
    AwaitAck,
    /// `REPLCONF rdb-only 1`: the connection ends with the RDB.
    Close,
}

impl RdbEnd {
    /// Whoever waits for the outcome hears that the RDB did not all go.
    pub(crate) fn failed(self, why: &str) {
        if let Some(tx) = self.outcome {
            let _ = tx.send(Err(why.to_string()));
        }
    }
}

/// A saved RDB on its way out by sendfile(2).
pub(crate) struct FileOut {
    file: File,
    len: u64,
    off: u64,
}

impl FileOut {
    pub(crate) fn new(file: File, len: u64) -> FileOut {
        FileOut { file, len, off: 0 }
    }

    pub(crate) fn done(&self) -> bool {
        self.off >= self.len
    }

    /// Move what the socket `fd` (non-blocking) takes now.
    pub(crate) fn send(&mut self, fd: RawFd) -> Result<Sent, String> {
        let want = ((self.len - self.off) as usize).min(SENDFILE_MAX);
        let mut off = self.off as libc::off_t;
        // SAFETY: sendfile(2) between two descriptors open for the call
        // (the socket is the pump's, the file this value's); the kernel
        // writes only `off`, a local.
        let n = unsafe { libc::sendfile(fd, self.file.as_raw_fd(), &mut off, want) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            return match e.kind() {
                ErrorKind::Interrupted => Ok(Sent::Bytes(0)),
                ErrorKind::WouldBlock => Ok(Sent::Blocked),
                _ => Err(format!("write error sending the RDB: {e}")),
            };
        }
        if n == 0 {
            return Err(format!(
                "the RDB file ended at {} of {} bytes",
                self.off, self.len
            ));
        }
        self.off += n as u64;
        Ok(Sent::Bytes(n as usize))
    }
}

/// A queue from a feed's thread to its pump.
pub(crate) fn queue(shared: Arc<Shared>) -> (Producer, Prelude) {
    let (tx, rx) = mpsc::sync_channel(DEPTH);
    let queued = Arc::new(AtomicUsize::new(0));
    (
        Producer {
            tx,
            queued: queued.clone(),
            shared,
        },
        Prelude { rx, queued },
    )
}

/// The feed thread's end.
pub(crate) struct Producer {
    tx: SyncSender<Out>,
    queued: Arc<AtomicUsize>,
    shared: Arc<Shared>,
}

impl Producer {
    /// Queue `out`, waiting while the queue is full, and wake the pump;
    /// no bytes is nothing to queue (SYNC has no preamble). Fails once
    /// the pump has ended (the replica went away).
    pub(crate) fn push(&self, out: Out) -> Result<(), String> {
        if matches!(&out, Out::Bytes(s) if s.is_empty()) {
            return Ok(());
        }
        // Counted first: a pump that takes the item at once must not see
        // the count go below zero.
        self.queued.fetch_add(1, Ordering::Relaxed);
        if let Err(mpsc::SendError(out)) = self.tx.send(out) {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            let why = self
                .shared
                .gone()
                .unwrap_or_else(|| "the replica's connection ended".into());
            if let Out::RdbEnd(end) = out {
                end.failed(&why);
            }
            return Err(why);
        }
        self.shared.ring();
        Ok(())
    }

    /// The saved file the engine named is open.
    pub(crate) fn file_opened(&self) {
        self.shared.file_opened();
    }

    /// The feed was stopped by the engine.
    pub(crate) fn stopped(&self) -> bool {
        self.shared.stop.load(Ordering::Relaxed)
    }
}

/// The pump's end.
pub(crate) struct Prelude {
    rx: Receiver<Out>,
    queued: Arc<AtomicUsize>,
}

impl Prelude {
    /// Something is queued (no system call: the pump's `ready`).
    pub(crate) fn pending(&self) -> bool {
        self.queued.load(Ordering::Relaxed) > 0
    }

    /// The next item, if one is queued.
    pub(crate) fn take(&self) -> Result<Option<Out>, String> {
        match self.rx.try_recv() {
            Ok(out) => {
                self.queued.fetch_sub(1, Ordering::Relaxed);
                Ok(Some(out))
            }
            Err(TryRecvError::Empty) => Ok(None),
            Err(TryRecvError::Disconnected) => {
                Err("the feed's thread ended before its full sync did".into())
            }
        }
    }

    /// The feed ends first: a capture waiting for the RDB's outcome
    /// hears why (the producer, whose next push fails, stops).
    pub(crate) fn abandon(self, why: &str) {
        while let Ok(out) = self.rx.try_recv() {
            if let Out::RdbEnd(end) = out {
                end.failed(why);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_arrive_in_order_and_a_gone_pump_fails_the_producer_and_the_outcome() {
        let shared = Shared::for_tests(None, 0);
        let (tx, rx) = queue(shared.clone());
        assert!(!rx.pending());
        tx.push(Out::bytes(&b"+FULLRESYNC"[..])).unwrap();
        assert!(rx.pending());
        let Ok(Some(Out::Bytes(s))) = rx.take() else {
            panic!("the bytes first")
        };
        assert_eq!(&s[..], b"+FULLRESYNC");
        assert!(!rx.pending());
        assert!(matches!(rx.take(), Ok(None)));

        // An outcome queued when the pump ends is told why.
        let (otx, orx) = mpsc::channel();
        let end = |outcome| {
            Out::RdbEnd(RdbEnd {
                outcome,
                bytes: 9,
                then: Then::AwaitAck,
                note: None,
            })
        };
        tx.push(end(Some(otx))).unwrap();
        rx.abandon("connection closed by the replica");
        assert_eq!(
            orx.recv().unwrap(),
            Err("connection closed by the replica".into())
        );
        // ... and so is one pushed after it: the push fails.
        shared.set_gone("connection closed by the replica".into());
        let (otx, orx) = mpsc::channel();
        assert_eq!(
            tx.push(end(Some(otx))).err().as_deref(),
            Some("connection closed by the replica")
        );
        assert!(orx.recv().unwrap().is_err());
    }

    #[test]
    fn a_producer_that_ends_early_is_an_error_for_the_pump() {
        let (tx, rx) = queue(Shared::for_tests(None, 0));
        drop(tx);
        assert!(rx.take().is_err());
    }
}
