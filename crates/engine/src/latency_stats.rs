//! Per-command latency distributions: INFO `latencystats` and LATENCY
//! HISTOGRAM, as Valkey keeps them with `latency-tracking yes` (its
//! default).
//!
//! Each command that has run gets an HDR histogram of its call
//! durations in nanoseconds, from 1 ns to 1 s with two significant
//! figures — Valkey's bounds and precision, so that the same durations
//! give the same bucket boundaries, percentile values and histogram keys.
//! Durations outside the range are clamped into it, as Valkey does.
//!
//! Where the durations come from is the engine's command timer
//! (`CmdTimer` in lib.rs), which reads the clock once per run of the same
//! command in a batch rather than around every call: a run of n calls
//! taking t is recorded as n calls of t / n. A command timed on its own
//! (for the slow log, inside MULTI/EXEC, a blocked command when it is
//! served) is recorded as itself. Commands a script calls are recorded
//! when they are timed for the slow log, not otherwise (Valkey times
//! every one; here that would be two clock reads per call).

use hdrhistogram::Histogram;

/// Valkey's `LATENCY_HISTOGRAM_MIN_VALUE` / `_MAX_VALUE` (ns) and
/// precision.
const LOWEST_NS: u64 = 1;
const HIGHEST_NS: u64 = 1_000_000_000;
const SIGNIFICANT_FIGURES: u8 = 2;
/// LATENCY HISTOGRAM's first bucket ends at 1024 ns; each next one is
/// twice as wide (Valkey's `hdr_iter_log_init(…, 1024, 2)`).
const FIRST_BUCKET_NS: u64 = 1024;

/// The histograms, indexed like the command table; made on first use.
#[derive(Default)]
pub struct LatencyStats {
    by_command: Vec<Option<Box<Histogram<u64>>>>,
}

impl LatencyStats {
    /// `calls` calls of command `cmd`, each taking `ns_each`.
    #[inline]
    pub fn record(&mut self, cmd: usize, ns_each: u64, calls: u64) {
        if calls == 0 {
            return;
        }
        if self.by_command.len() <= cmd {
            self.by_command.resize_with(cmd + 1, || None);
        }
        let h = self.by_command[cmd].get_or_insert_with(|| {
            Box::new(
                Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_FIGURES)
                    .expect("valid bounds"),
            )
        });
        let v = ns_each.clamp(LOWEST_NS, HIGHEST_NS);
        // Saturating: a counter cannot overflow in practice, and a
        // recording must never fail a command.
        h.saturating_record_n(v, calls);
    }

    /// The histogram of command `cmd`, if it has recorded anything.
    pub fn get(&self, cmd: usize) -> Option<&Histogram<u64>> {
        self.by_command.get(cmd)?.as_deref()
    }
}

/// The value at `percentile` (0–100) in ns, as HdrHistogram_c's
/// `hdr_value_at_percentile` computes it (the count rounded half up,
/// where the Rust crate rounds up): Valkey's figures.
pub fn value_at_percentile(h: &Histogram<u64>, percentile: f64) -> u64 {
    let p = percentile.min(100.0);
    let wanted = ((p / 100.0 * h.len() as f64 + 0.5) as u64).max(1);
    let mut seen = 0u64;
    for v in h.iter_recorded() {
        seen += v.count_at_value();
        if seen >= wanted {
            let at = v.value_iterated_to();
            return if p == 0.0 {
                h.lowest_equivalent(at)
            } else {
                h.highest_equivalent(at)
            };
        }
    }
    h.highest_equivalent(h.max())
}

/// LATENCY HISTOGRAM's buckets: (upper bound in µs, calls at or below
/// it), for each bucket whose cumulative count grew.
pub fn cumulative_buckets(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let total = h.len();
    let mut level = FIRST_BUCKET_NS;
    let mut previous = 0;
    while previous < total {
        let upper = h.highest_equivalent(level);
        let cumulative = h.count_between(0, upper);
        if cumulative > previous {
            out.push((upper / 1000, cumulative));
        }
        previous = cumulative;
        if level >= HIGHEST_NS {
            break;
        }
        level *= 2;
    }
    out
}

/// A percentile's name in INFO (`p50`, `p99.9`, `p100`): the number as
/// Valkey prints it, `%f` without trailing zeros.
pub fn percentile_name(p: f64) -> String {
    let s = format!("{p:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("p{s}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(values_ns: &[u64]) -> Histogram<u64> {
        let mut s = LatencyStats::default();
        for &v in values_ns {
            s.record(0, v, 1);
        }
        s.get(0).unwrap().clone()
    }

    #[test]
    fn bucket_keys_are_valkeys() {
        // DEBUG SLEEPs of 0.03 to 30 ms on valkey-server 8.1 gave these
        // keys (LATENCY HISTOGRAM debug): 132 264 528 1056 2113 16908 33816.
        let h = hist(&[
            100_000, 200_000, 400_000, 700_000, 2_000_000, 9_500_000, 30_200_000,
        ]);
        let keys: Vec<u64> = cumulative_buckets(&h).iter().map(|b| b.0).collect();
        assert_eq!(keys, [132, 264, 528, 1056, 2113, 16908, 33816]);
        let counts: Vec<u64> = cumulative_buckets(&h).iter().map(|b| b.1).collect();
        assert_eq!(counts, [1, 2, 3, 4, 5, 6, 7]);
        // Two GETs of about 1 and 2 µs: keys 1 and 2, as Valkey printed.
        assert_eq!(cumulative_buckets(&hist(&[1000, 1900])), [(1, 1), (2, 2)]);
    }

    #[test]
    fn percentiles_round_as_hdrhistogram_c() {
        // 11 values: p10 is the 1st (1.1 rounds down in C; the crate's
        // own value_at_percentile would take the 2nd).
        let h = hist(&[
            1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10_000, 11_000,
        ]);
        assert_eq!(value_at_percentile(&h, 10.0), 1003);
        assert_eq!(value_at_percentile(&h, 50.0), 6015);
        assert_eq!(value_at_percentile(&h, 100.0), 11_007);
        // Valkey printed p50=1.003 and p99=2.007 for GETs of ~1 and ~2 µs.
        let h = hist(&[1000, 2000]);
        assert_eq!(value_at_percentile(&h, 50.0), 1003);
        assert_eq!(value_at_percentile(&h, 99.0), 2007);
    }

    #[test]
    fn out_of_range_durations_are_clamped() {
        let h = hist(&[0, 5_000_000_000]);
        assert_eq!(h.len(), 2);
        assert_eq!(h.min(), 1);
        assert!(h.max() >= HIGHEST_NS);
    }

    #[test]
    fn percentile_names() {
        assert_eq!(percentile_name(50.0), "p50");
        assert_eq!(percentile_name(99.9), "p99.9");
        assert_eq!(percentile_name(99.99), "p99.99");
        assert_eq!(percentile_name(100.0), "p100");
        assert_eq!(percentile_name(0.0), "p0");
    }
}
