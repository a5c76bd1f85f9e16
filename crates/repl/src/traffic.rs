//! Bytes moved on replication sockets, for INFO (`total_net_repl_*`) and
//! a replica's CLIENT LIST line. A thread adds to its own [`Counters`] and
//! to the totals its factory ([`crate::FeedThreads`], [`crate::TcpLinks`])
//! shares among all the threads it started, so a link or feed that ended
//! still counts.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes read and written.
#[derive(Debug, Default)]
pub struct Counters {
    read: AtomicU64,
    written: AtomicU64,
}

impl Counters {
    pub fn read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }
}

/// One thread's counters and its factory's totals, moved together.
#[derive(Debug, Default)]
pub(crate) struct Meter {
    pub(crate) own: Counters,
    pub(crate) total: Arc<Counters>,
}

impl Meter {
    pub(crate) fn new(total: Arc<Counters>) -> Meter {
        Meter {
            own: Counters::default(),
            total,
        }
    }

    pub(crate) fn add_read(&self, n: usize) {
        for c in [&self.own, &*self.total] {
            c.read.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    pub(crate) fn add_written(&self, n: usize) {
        for c in [&self.own, &*self.total] {
            c.written.fetch_add(n as u64, Ordering::Relaxed);
        }
    }
}
