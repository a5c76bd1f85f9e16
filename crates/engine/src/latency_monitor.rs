//! The latency monitor: with `latency-monitor-threshold` N ms (0, the
//! default, turns it off), every event that took N ms or more is kept as a
//! sample of its event class — LATENCY LATEST, HISTORY and RESET read and
//! clear them, as Valkey's `latency.c` keeps them.
//!
//! Per event: the last 160 samples of one per second (a second with
//! several spikes keeps its worst), the all-time maximum, and the sum and
//! count of every spike. Classes recorded: `command` and `fast-command`
//! (a command's duration; a run of `fast` commands timed together, see
//! `latency_stats`, is sampled at its mean per call), `expire-cycle` (one
//! active expire cycle) and `eviction-cycle` (one eviction run).

use std::collections::BTreeMap;

/// Valkey's `LATENCY_TS_LEN`.
const SAMPLES: usize = 160;

#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Unix seconds.
    pub time: i64,
    /// Milliseconds.
    pub latency: u64,
}

/// One event class's samples.
#[derive(Clone, Debug)]
pub struct EventSeries {
    ring: [Sample; SAMPLES],
    /// The next slot to write.
    next: usize,
    pub max: u64,
    pub sum: u64,
    pub count: u64,
}

impl Default for EventSeries {
    fn default() -> Self {
        EventSeries {
            ring: [Sample::default(); SAMPLES],
            next: 0,
            max: 0,
            sum: 0,
            count: 0,
        }
    }
}

impl EventSeries {
    /// The samples, oldest first.
    pub fn samples(&self) -> impl Iterator<Item = Sample> + '_ {
        (0..SAMPLES)
            .map(move |j| self.ring[(self.next + j) % SAMPLES])
            .filter(|s| s.time != 0)
    }

    /// The newest sample.
    pub fn latest(&self) -> Sample {
        self.ring[(self.next + SAMPLES - 1) % SAMPLES]
    }

    fn add(&mut self, now_s: i64, ms: u64) {
        self.max = self.max.max(ms);
        self.sum += ms;
        self.count += 1;
        let prev = &mut self.ring[(self.next + SAMPLES - 1) % SAMPLES];
        if prev.time == now_s {
            prev.latency = prev.latency.max(ms);
            return;
        }
        self.ring[self.next] = Sample {
            time: now_s,
            latency: ms,
        };
        self.next = (self.next + 1) % SAMPLES;
    }
}

/// The event classes with samples, by name.
#[derive(Default)]
pub struct LatencyMonitor {
    events: BTreeMap<&'static str, Box<EventSeries>>,
}

impl LatencyMonitor {
    /// `event` took `ms`: kept when the monitor is on (`threshold_ms` > 0)
    /// and it is at least that long.
    #[inline]
    pub fn add_if_needed(&mut self, threshold_ms: u64, event: &'static str, ms: u64, now_ms: i64) {
        if threshold_ms > 0 && ms >= threshold_ms {
            self.events
                .entry(event)
                .or_default()
                .add(now_ms.div_euclid(1000), ms);
        }
    }

    pub fn events(&self) -> impl Iterator<Item = (&'static str, &EventSeries)> {
        self.events.iter().map(|(k, v)| (*k, &**v))
    }

    pub fn event(&self, name: &[u8]) -> Option<&EventSeries> {
        self.events
            .iter()
            .find(|(k, _)| k.as_bytes().eq_ignore_ascii_case(name))
            .map(|(_, v)| &**v)
    }

    /// Forget `names` (all events when empty); how many were forgotten.
    pub fn reset(&mut self, names: &[&[u8]]) -> usize {
        let before = self.events.len();
        if names.is_empty() {
            self.events.clear();
        } else {
            self.events
                .retain(|k, _| !names.iter().any(|n| k.as_bytes().eq_ignore_ascii_case(n)));
        }
        before - self.events.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sample_a_second_with_its_worst_and_totals_of_all() {
        let mut m = LatencyMonitor::default();
        m.add_if_needed(0, "command", 500, 1_000_000);
        assert!(m.events().next().is_none(), "off at threshold 0");
        m.add_if_needed(10, "command", 9, 1_000_000);
        assert!(m.events().next().is_none(), "under the threshold");
        m.add_if_needed(10, "command", 50, 1_000_000);
        m.add_if_needed(10, "command", 70, 1_000_400);
        m.add_if_needed(10, "command", 20, 1_001_000);
        let e = m.event(b"COMMAND").unwrap();
        let samples: Vec<_> = e.samples().map(|s| (s.time, s.latency)).collect();
        assert_eq!(samples, [(1000, 70), (1001, 20)]);
        assert_eq!(
            e.latest(),
            Sample {
                time: 1001,
                latency: 20
            }
        );
        assert_eq!((e.max, e.sum, e.count), (70, 140, 3));
    }

    #[test]
    fn the_ring_keeps_the_last_160_seconds() {
        let mut m = LatencyMonitor::default();
        for s in 0..200 {
            m.add_if_needed(1, "expire-cycle", s + 1, (s as i64 + 1) * 1000);
        }
        let e = m.event(b"expire-cycle").unwrap();
        let times: Vec<i64> = e.samples().map(|s| s.time).collect();
        assert_eq!(times, (41..=200).collect::<Vec<_>>());
        assert_eq!(e.count, 200);
    }

    #[test]
    fn reset_named_or_all() {
        let mut m = LatencyMonitor::default();
        for ev in ["command", "fast-command", "expire-cycle"] {
            m.add_if_needed(1, ev, 5, 1_000_000);
        }
        assert_eq!(m.reset(&[b"COMMAND", b"nosuch"]), 1);
        assert_eq!(m.reset(&[]), 2);
        assert_eq!(m.reset(&[]), 0);
    }
}
