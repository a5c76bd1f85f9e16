//! `max-new-connections-per-cycle` (Valkey 8.1's, default 10): how many
//! new connections an event loop takes in per iteration, so that a storm
//! of connects (clients reconnecting all at once after a failover, say)
//! is served a few at a time between the requests of the clients already
//! connected instead of stalling them.
//!
//! epoll leaves the rest in the listener's accept queue (level-triggered,
//! it is reported again next time), as Valkey does. io_uring's multishot
//! accept has taken them from the kernel already: the loop keeps their
//! sockets in a queue of its own and registers them first in the
//! iterations that follow, without sleeping while any wait.

use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

/// The setting, for every loop of the process: IO threads have no engine
/// to read it from. Written from cron.
static PER_CYCLE: AtomicU32 = AtomicU32::new(10);

/// Take the configured number (at least 1).
pub(crate) fn set_per_cycle(n: u32) {
    PER_CYCLE.store(n.max(1), Relaxed);
}

/// New connections a loop takes in per iteration.
pub(crate) fn per_cycle() -> usize {
    PER_CYCLE.load(Relaxed) as usize
}

/// One io_uring loop's accepts: what this iteration may still take in,
/// and the sockets accepted past that, oldest first.
#[derive(Default)]
pub(crate) struct AcceptBudget {
    left: usize,
    waiting: VecDeque<RawFd>,
}

impl AcceptBudget {
    /// A new iteration: the full budget again.
    pub(crate) fn refill(&mut self) {
        self.left = per_cycle();
    }

    /// The oldest socket that waited, while the budget allows.
    pub(crate) fn next_waiting(&mut self) -> Option<RawFd> {
        if self.left == 0 {
            return None;
        }
        let fd = self.waiting.pop_front()?;
        self.left -= 1;
        Some(fd)
    }

    /// A socket just accepted: `Some` to register it now, `None` when the
    /// budget is spent (it waits for the next iteration, behind the others).
    pub(crate) fn admit(&mut self, fd: RawFd) -> Option<RawFd> {
        if self.left > 0 && self.waiting.is_empty() {
            self.left -= 1;
            Some(fd)
        } else {
            self.waiting.push_back(fd);
            None
        }
    }

    /// Sockets wait: the loop must not sleep.
    pub(crate) fn has_waiting(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Every waiting socket, whatever the budget (the loop lets go of its
    /// connections, or stops).
    pub(crate) fn drain_all(&mut self) -> impl Iterator<Item = RawFd> + '_ {
        self.waiting.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_budget_sockets_wait_and_go_first_next_time() {
        set_per_cycle(3);
        let mut b = AcceptBudget::default();
        b.refill();
        let now: Vec<_> = (10..16).filter_map(|fd| b.admit(fd)).collect();
        assert_eq!(now, [10, 11, 12]);
        assert!(b.has_waiting());
        b.refill();
        let taken: Vec<_> = std::iter::from_fn(|| b.next_waiting()).collect();
        assert_eq!(taken, [13, 14, 15]);
        // The budget is spent on those: a new one waits.
        assert_eq!(b.admit(16), None);
        b.refill();
        assert_eq!(b.next_waiting(), Some(16));
        assert_eq!(b.next_waiting(), None);
        // Nothing waits: new sockets go at once, up to what is left.
        assert_eq!(b.admit(17), Some(17));
        assert_eq!(b.admit(18), Some(18));
        assert_eq!(b.admit(19), None);
        assert_eq!(b.drain_all().collect::<Vec<_>>(), [19]);
        assert!(!b.has_waiting());
        set_per_cycle(10);
    }
}
