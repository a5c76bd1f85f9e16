//! `io-busy-poll-us`: an event loop that just read input polls for more
//! (zero-timeout waits) for that long before it sleeps.
//!
//! On a virtual machine a core that goes idle halts, and waking it for the
//! next request costs more than serving it; at moderate load most requests
//! find the loop asleep and pay that. Polling keeps the core running through
//! the short gaps between requests, at the price of the CPU time spent
//! polling; an idle server still sleeps (the window starts at input, not at
//! a wake-up). Measured in docs/BENCHMARKS.md ("Latency against load").

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// The setting, for every loop of the process: IO threads have no engine
/// to read it from. Written from cron.
static WINDOW_US: AtomicU32 = AtomicU32::new(0);

/// Take the configured window (µs; 0 = sleep at once).
pub(crate) fn set_window_us(us: u32) {
    WINDOW_US.store(us, Relaxed);
}

/// One loop's view: when it last read input.
#[derive(Default)]
pub(crate) struct BusyPoll {
    had_input: bool,
    last_input: Option<Instant>,
}

impl BusyPoll {
    /// The loop read input this iteration.
    pub(crate) fn input(&mut self) {
        self.had_input = true;
    }

    /// Whether the loop should poll rather than sleep now: within the
    /// window after its last input.
    pub(crate) fn next(&mut self) -> Poll {
        let window = WINDOW_US.load(Relaxed);
        let had_input = std::mem::take(&mut self.had_input);
        if window == 0 {
            return Poll::Sleep;
        }
        let now = Instant::now();
        if had_input {
            self.last_input = Some(now);
            return Poll::AfterInput;
        }
        let within = self
            .last_input
            .is_some_and(|t| now.duration_since(t) < Duration::from_micros(u64::from(window)));
        if within { Poll::Idle } else { Poll::Sleep }
    }
}

/// What a loop does instead of sleeping.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Poll {
    Sleep,
    /// Poll; this iteration read input (its time was work).
    AfterInput,
    /// Poll; nothing came since the last poll (its time was idle).
    Idle,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polls_from_input_until_the_window_has_passed() {
        let mut p = BusyPoll::default();
        // One process-wide setting: only this test changes it.
        set_window_us(20_000);
        assert_eq!(p.next(), Poll::Sleep, "no input yet");
        p.input();
        assert_eq!(p.next(), Poll::AfterInput);
        assert_eq!(p.next(), Poll::Idle, "still within the window");
        std::thread::sleep(Duration::from_millis(25));
        assert_eq!(p.next(), Poll::Sleep, "window over");
        set_window_us(0);
        p.input();
        assert_eq!(p.next(), Poll::Sleep, "off: sleep at once");
    }
}
