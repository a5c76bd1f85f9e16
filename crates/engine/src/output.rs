//! `client-output-buffer-limit` as the IO layer applies it, and the
//! buffered-bytes figures (CLIENT LIST `omem`, `qbuf`) it reports back.
//!
//! ```text
//!   CONFIG SET ──► Config ──► Server::sync_output_limits ──► OutputLimits
//!                                                              (atomics, read
//!   execute_batch ──► Job::output_class (per job, free) ──┐    at every check
//!                                                         ▼    by any thread)
//!   IO layer: Connection { class, meter } ── output added ──► over its limit?
//!                                         ├─ sent / added ──► meter.output
//!                                         └─ read / parsed ─► meter.input
//!   CLIENT LIST, INFO ◄── Session::meter (the same ClientMeter) ◄──┘
//! ```
//!
//! The connection's pending output lives with the IO layer, which in
//! threaded mode is another thread; the engine never asks it anything. The
//! limits in force are read at each check (as Valkey does), so CONFIG SET
//! applies to connected clients at their next write, and the class comes
//! back with each job, as only a client's own commands change it.

use crate::config::OutputLimit;
use std::sync::Arc;
use std::sync::atomic::{
    AtomicU64,
    Ordering::{Acquire, Relaxed, Release},
};

/// Which `client-output-buffer-limit` class applies to a client (Valkey's
/// `getClientType`, less the replication classes ringkv has no use for).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OutputClass {
    #[default]
    Normal,
    /// Subscribed to at least one channel, pattern or shard channel.
    Pubsub,
}

/// The `normal` and `pubsub` limits in force, shared by the engine (the
/// writer, on start and CONFIG SET) and every IO thread.
#[derive(Debug, Default)]
pub struct OutputLimits {
    /// `[hard, soft, soft_seconds]` per class, indexed by `OutputClass`.
    classes: [[AtomicU64; 3]; 2],
}

impl OutputLimits {
    /// The limit for `class` now. Each field is read on its own: a check
    /// that races a CONFIG SET may mix the old and the new limit once.
    pub fn get(&self, class: OutputClass) -> OutputLimit {
        let [hard, soft, secs] = &self.classes[class as usize];
        OutputLimit {
            hard: hard.load(Relaxed),
            soft: soft.load(Relaxed),
            soft_seconds: secs.load(Relaxed),
        }
    }

    pub(crate) fn set(&self, class: OutputClass, l: OutputLimit) {
        let [hard, soft, secs] = &self.classes[class as usize];
        hard.store(l.hard, Relaxed);
        soft.store(l.soft, Relaxed);
        secs.store(l.soft_seconds, Relaxed);
    }
}

/// CLIENT LIST's `rbs`: the reply buffer Valkey gives a client that is
/// not busy (it grows to 16 KiB under load; ringkv has no such buffer and
/// shows the idle size).
pub const REPLY_BUFFER: u64 = 1024;

/// Valkey's reply-list block (`PROTO_REPLY_CHUNK_BYTES`).
const LIST_BLOCK: u64 = 16 * 1024;

/// Waiting output in Valkey's terms, for CLIENT LIST and the limits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutputShape {
    /// `obl`: bytes in the client's reply buffer.
    pub buffer: u64,
    /// `oll`: blocks in its reply list.
    pub blocks: u64,
    /// `omem`: bytes in the reply list, what `client-output-buffer-limit`
    /// is checked against.
    pub list: u64,
}

impl OutputShape {
    /// `pending` bytes not yet taken by the kernel. Valkey puts replies in
    /// its reply buffer until one does not fit, then in the list, and sends
    /// the buffer first; so output that fits the buffer is `obl` and takes
    /// no `omem`, and a backlog larger than that is all list (redis-server
    /// 7 shows `obl=0 oll=88 omem=1804352` for a subscriber 1.8 MB behind).
    pub fn of(pending: u64) -> OutputShape {
        if pending <= REPLY_BUFFER {
            OutputShape {
                buffer: pending,
                blocks: 0,
                list: 0,
            }
        } else {
            OutputShape {
                buffer: 0,
                blocks: pending.div_ceil(LIST_BLOCK),
                list: pending,
            }
        }
    }
}

/// Bytes buffered for one client, kept current by the thread that owns
/// its connection and read by CLIENT LIST / CLIENT INFO and INFO clients:
/// output waiting to be sent (`omem`), and input received but not yet
/// parsed into commands (`qbuf`, with the read buffer's spare room as
/// `qbuf-free`).
#[derive(Clone, Debug, Default)]
pub struct ClientMeter(Arc<MeterCell>);

/// On a cache line of its own: the IO thread writes it as bytes come and
/// go, and it must not share a line with what other threads use (in
/// threaded mode the execution thread allocates it, among its own data).
#[derive(Debug, Default)]
#[repr(align(64))]
struct MeterCell {
    output: AtomicU64,
    input: AtomicU64,
    input_free: AtomicU64,
}

impl ClientMeter {
    /// Release, paired with [`ClientMeter::output`]'s Acquire: an IO thread
    /// stores the figure before the send that lets the client read its
    /// bytes, and a CLIENT LIST that client asks for afterwards (through
    /// the kernel and the hand-off rings) must see that store, not an
    /// older one. Free on x86, where both are plain moves.
    pub fn set_output(&self, bytes: usize) {
        self.0.output.store(bytes as u64, Release);
    }

    pub fn output(&self) -> u64 {
        self.0.output.load(Acquire)
    }

    /// Unparsed input, and the read buffer's room for more.
    pub fn set_input(&self, bytes: usize, free: usize) {
        self.0.input.store(bytes as u64, Relaxed);
        self.0.input_free.store(free as u64, Relaxed);
    }

    pub fn input(&self) -> u64 {
        self.0.input.load(Relaxed)
    }

    pub fn input_free(&self) -> u64 {
        self.0.input_free.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_that_fits_the_reply_buffer_takes_no_omem() {
        assert_eq!(OutputShape::of(0), OutputShape::default());
        let small = OutputShape::of(31);
        assert_eq!((small.buffer, small.blocks, small.list), (31, 0, 0));
        let edge = OutputShape::of(REPLY_BUFFER);
        assert_eq!((edge.buffer, edge.list), (REPLY_BUFFER, 0));
        let over = OutputShape::of(REPLY_BUFFER + 1);
        assert_eq!(
            (over.buffer, over.blocks, over.list),
            (0, 1, REPLY_BUFFER + 1)
        );
        let big = OutputShape::of(1_804_352);
        assert_eq!((big.buffer, big.blocks, big.list), (0, 111, 1_804_352));
    }

    #[test]
    fn limits_per_class() {
        let l = OutputLimits::default();
        let pubsub = OutputLimit {
            hard: 1 << 20,
            soft: 512 << 10,
            soft_seconds: 10,
        };
        l.set(OutputClass::Pubsub, pubsub);
        assert_eq!(l.get(OutputClass::Pubsub), pubsub);
        assert_eq!(l.get(OutputClass::Normal), OutputLimit::default());
    }

    #[test]
    fn meter_is_shared_by_its_clones() {
        let m = ClientMeter::default();
        let seen = m.clone();
        m.set_output(1234);
        m.set_input(56, 78);
        assert_eq!(
            (seen.output(), seen.input(), seen.input_free()),
            (1234, 56, 78)
        );
    }
}
