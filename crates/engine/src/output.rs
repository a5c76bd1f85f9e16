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
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

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
    pub fn set_output(&self, bytes: usize) {
        self.0.output.store(bytes as u64, Relaxed);
    }

    pub fn output(&self) -> u64 {
        self.0.output.load(Relaxed)
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
