//! The latency monitor: with `latency-monitor-threshold` N ms (0, the
//! default, turns it off), every event that took N ms or more is kept as a
//! sample of its event class — LATENCY LATEST, HISTORY and RESET read and
//! clear them, as Valkey's `latency.c` keeps them; LATENCY GRAPH draws an
//! event's samples ([`graph`]) and LATENCY DOCTOR reports on them all
//! ([`LatencyMonitor::doctor`]).
//!
//! Per event: the last 160 samples of one per second (a second with
//! several spikes keeps its worst), the all-time maximum, and the sum and
//! count of every spike. Classes recorded: `command` and `fast-command`
//! (a command's duration; a run of `fast` commands timed together, see
//! `latency_stats`, is sampled at its mean per call), `expire-cycle` (one
//! active expire cycle), `eviction-cycle` (one eviction run) and
//! `active-defrag-cycle` (one slice of active defragmentation).

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

    /// The event named exactly `name` (Valkey's HISTORY and GRAPH look
    /// events up case-sensitively; only RESET ignores case).
    pub fn event(&self, name: &[u8]) -> Option<(&'static str, &EventSeries)> {
        self.events
            .iter()
            .find(|(k, _)| k.as_bytes() == name)
            .map(|(k, v)| (*k, &**v))
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

// ---------------------------------------------------------------- GRAPH --

/// Valkey's `LATENCY_GRAPH_COLS`: a graph wraps after this many samples.
const GRAPH_COLUMNS: usize = 80;
/// Text rows a graph's columns are drawn in.
const GRAPH_ROWS: usize = 4;
/// The levels one row can show, lowest first; a row under a column's top
/// is `|`.
const LEVEL_CHARS: [char; 3] = ['_', 'o', '#'];

/// LATENCY GRAPH's text for `event`, as Valkey draws it: a header with
/// the samples' highest and lowest latency and the all-time maximum, a
/// dashed line, then one column per sample (oldest first) scaled between
/// the lowest and highest, each labelled downwards with its age at
/// `now_s` (`12s`, `3m`, `5h`, `2d`).
pub fn graph(event: &str, series: &EventSeries, now_s: i64) -> String {
    let samples: Vec<Sample> = series.samples().collect();
    let high = samples.iter().map(|s| s.latency).max().unwrap_or(0);
    let low = samples.iter().map(|s| s.latency).min().unwrap_or(0);
    let mut out = format!(
        "{event} - high {high} ms, low {low} ms (all time high {} ms)\n",
        series.max
    );
    out.push_str(&"-".repeat(GRAPH_COLUMNS));
    out.push('\n');
    let levels: Vec<usize> = samples
        .iter()
        .map(|s| level(s.latency, low, high))
        .collect();
    let labels: Vec<String> = samples.iter().map(|s| age_label(now_s - s.time)).collect();
    for (j, start) in (0..samples.len()).step_by(GRAPH_COLUMNS).enumerate() {
        if j > 0 {
            out.push('\n');
        }
        let end = (start + GRAPH_COLUMNS).min(samples.len());
        draw_columns(&mut out, &levels[start..end], &labels[start..end]);
    }
    out
}

/// Which of the graph's `3 * GRAPH_ROWS` levels `v` reaches between `low`
/// and `high`. Valkey's arithmetic, truncations included: the scaled value
/// is truncated before and after the division.
fn level(v: u64, low: u64, high: u64) -> usize {
    let steps = (LEVEL_CHARS.len() * GRAPH_ROWS) as i64;
    let span = if high == low {
        1.0
    } else {
        (high - low) as f64
    };
    let scaled = ((v - low) as f64 * steps as f64) as i64;
    ((scaled as f64 / span) as i64).clamp(0, steps - 1) as usize
}

/// A sample's age: seconds under a minute, then whole minutes, hours, days.
fn age_label(elapsed_s: i64) -> String {
    match elapsed_s {
        ..60 => format!("{elapsed_s}s"),
        60..3600 => format!("{}m", elapsed_s / 60),
        3600..86_400 => format!("{}h", elapsed_s / 3600),
        _ => format!("{}d", elapsed_s / 86_400),
    }
}

/// One piece of a graph: `GRAPH_ROWS` rows of columns, an empty row, then
/// the labels written downwards, one character a row.
fn draw_columns(out: &mut String, levels: &[usize], labels: &[String]) {
    let per_row = LEVEL_CHARS.len();
    for row in 0..GRAPH_ROWS {
        // The levels this row shows start at `floor`.
        let floor = (GRAPH_ROWS - row - 1) * per_row;
        out.extend(levels.iter().map(|&l| match l.checked_sub(floor) {
            None => ' ',
            Some(i) => LEVEL_CHARS.get(i).copied().unwrap_or('|'),
        }));
        out.push('\n');
    }
    out.extend(levels.iter().map(|_| ' '));
    out.push('\n');
    let longest = labels.iter().map(String::len).max().unwrap_or(0);
    for k in 0..longest {
        out.extend(
            labels
                .iter()
                .map(|l| l.as_bytes().get(k).map_or(' ', |&b| b as char)),
        );
        out.push('\n');
    }
}

// --------------------------------------------------------------- DOCTOR --

/// An event's samples summed up for LATENCY DOCTOR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventStats {
    pub samples: u64,
    /// Mean latency, ms (rounded down).
    pub avg: u64,
    /// Mean absolute deviation from `avg`, ms (rounded down).
    pub mad: u64,
    /// Seconds from the oldest sample to now (at least 1).
    pub period_s: i64,
}

impl EventSeries {
    pub fn stats(&self, now_s: i64) -> EventStats {
        let (mut samples, mut sum, mut oldest) = (0u64, 0u64, i64::MAX);
        for s in self.samples() {
            samples += 1;
            sum += s.latency;
            oldest = oldest.min(s.time);
        }
        if samples == 0 {
            return EventStats {
                samples: 0,
                avg: 0,
                mad: 0,
                period_s: 0,
            };
        }
        let avg = sum / samples;
        let deviation: u64 = self.samples().map(|s| s.latency.abs_diff(avg)).sum();
        let period_s = match now_s - oldest {
            0 => 1,
            p => p,
        };
        EventStats {
            samples,
            avg,
            mad: deviation / samples,
            period_s,
        }
    }
}

/// The settings LATENCY DOCTOR's advice depends on.
#[derive(Clone, Copy, Debug)]
pub struct DoctorSettings {
    /// `latency-monitor-threshold`, ms.
    pub threshold_ms: u64,
    /// `slowlog-log-slower-than`, µs (negative: off).
    pub slowlog_slower_than_us: i64,
    /// `slowlog-max-len`.
    pub slowlog_max_len: usize,
    pub hz: u32,
}

/// A piece of advice; the report gives them in this order, each once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Advice {
    EnableSlowlog,
    LowerSlowlogThreshold,
    ReadSlowlog,
    CpuStarved,
    RaiseHz,
    SplitLargeKeys,
    MassEviction,
}

impl Advice {
    fn text(self, s: &DoctorSettings) -> String {
        let us = s.threshold_ms * 1000;
        match self {
            Advice::EnableSlowlog => format!(
                "- Commands were slow while the slow log is off, so it cannot tell which: \
                 turn it on with 'CONFIG SET slowlog-log-slower-than {us}'."
            ),
            Advice::LowerSlowlogThreshold => format!(
                "- The slow log keeps only commands slower than the latency monitor's threshold, \
                 so it misses some of these spikes: 'CONFIG SET slowlog-log-slower-than {us}' \
                 makes it keep them."
            ),
            Advice::ReadSlowlog => "- SLOWLOG GET shows which commands took too long, with their \
                 arguments (see https://valkey.io/commands/slowlog)."
                .into(),
            Advice::CpuStarved => {
                "- Commands that are cheap by design (O(1), O(log N)) took long: \
                 the process was probably waiting for a CPU. Lower the machine's load, give the \
                 server a machine or VM of its own, look for noisy neighbours, and measure the \
                 system's intrinsic latency with 'valkey-cli --intrinsic-latency 100'."
                    .into()
            }
            Advice::RaiseHz => "- 'CONFIG SET hz 100' runs the active expire cycle more often, \
                 in smaller steps."
                .into(),
            Advice::SplitLargeKeys => "- Deleting, expiring or evicting a very large key blocks \
                 the server while it is freed: where large keys are often deleted, expired or \
                 evicted, split them into several smaller ones."
                .into(),
            Advice::MassEviction => "- Eviction had to free a lot at once: a sudden cut of \
                 'maxmemory' (CONFIG SET) or commands that create large keys in one go (set or \
                 sorted set stores, SORT ... STORE, RESTORE) make the server block while it \
                 evicts. Change 'maxmemory' in steps."
                .into(),
        }
    }
}

/// The advice an event's spikes call for.
fn advice_for(event: &str, s: &DoctorSettings, out: &mut Vec<Advice>) {
    match event {
        "command" => {
            if s.slowlog_slower_than_us < 0 || s.slowlog_max_len == 0 {
                out.push(Advice::EnableSlowlog);
            } else if s.slowlog_slower_than_us / 1000 > s.threshold_ms as i64 {
                out.push(Advice::LowerSlowlogThreshold);
            }
            out.extend([Advice::ReadSlowlog, Advice::SplitLargeKeys]);
        }
        "fast-command" => out.push(Advice::CpuStarved),
        "expire-cycle" => {
            if s.hz < 100 {
                out.push(Advice::RaiseHz);
            }
            out.push(Advice::SplitLargeKeys);
        }
        "eviction-cycle" => out.push(Advice::MassEviction),
        _ => {}
    }
}

impl LatencyMonitor {
    /// LATENCY DOCTOR's report, in Valkey's structure: whether the monitor
    /// is off or saw nothing; otherwise a numbered line of statistics per
    /// event and the advice those events call for.
    pub fn doctor(&self, settings: &DoctorSettings, now_s: i64) -> String {
        if self.events.is_empty() {
            return if settings.threshold_ms == 0 {
                "Dave, I cannot do that: the latency monitor is off in this instance, so there \
                 is nothing to report. Turn it on with 'CONFIG SET latency-monitor-threshold \
                 <milliseconds>'.\n"
                    .into()
            } else {
                "No latency spike was observed since this instance started.\n".into()
            };
        }
        let mut out = String::from("Latency spikes were observed in this instance.\n\n");
        let mut advice = Vec::new();
        for (n, (name, e)) in self.events().enumerate() {
            let st = e.stats(now_s);
            out.push_str(&format!(
                "{}. {name}: {} latency spikes (average {}ms, mean deviation {}ms, \
                 period {:.2} sec). Worst all time event {}ms.\n",
                n + 1,
                st.samples,
                st.avg,
                st.mad,
                st.period_s as f64 / st.samples as f64,
                e.max
            ));
            advice_for(name, settings, &mut advice);
        }
        advice.sort();
        advice.dedup();
        if !advice.is_empty() {
            out.push_str("\nWhat you could do:\n\n");
            for a in advice {
                out.push_str(&a.text(settings));
                out.push('\n');
            }
        }
        out
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
        assert!(m.event(b"COMMAND").is_none(), "names are case-sensitive");
        let (_, e) = m.event(b"command").unwrap();
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
        let (_, e) = m.event(b"expire-cycle").unwrap();
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

    /// Valkey 8.1's samples of DEBUG SLEEPs, one a second (3 ms ... 140 ms).
    const SLEEPS_MS: [u64; 15] = [3, 40, 7, 12, 90, 25, 5, 60, 33, 18, 2, 75, 50, 9, 140];
    const T0: i64 = 1_795_702_863;
    const DASHES: &str =
        "--------------------------------------------------------------------------------";

    /// `n` of SLEEPS_MS's spikes, one a second from T0.
    fn one_a_second(n: usize) -> LatencyMonitor {
        let mut m = LatencyMonitor::default();
        for i in 0..n {
            m.add_if_needed(1, "command", SLEEPS_MS[i % 15], (T0 + i as i64) * 1000 + 50);
        }
        m
    }

    fn text(lines: &[&str]) -> String {
        lines.iter().map(|l| format!("{l}\n")).collect()
    }

    #[test]
    fn graph_draws_the_samples_as_valkey_does() {
        // Valkey 8.1's LATENCY GRAPH for the same samples, read in the
        // second of the last one.
        let m = one_a_second(15);
        let (name, e) = m.event(b"command").unwrap();
        let expected = text(&[
            "command - high 140 ms, low 2 ms (all time high 140 ms)",
            DASHES,
            "              #",
            "    o      _  |",
            " _  |  #   |o |",
            "_|__|#_|#o_||_|",
            "               ",
            "111119876543210",
            "43210ssssssssss",
            "sssss          ",
        ]);
        assert_eq!(graph(name, e, T0 + 14), expected);
    }

    #[test]
    fn a_graph_wraps_every_80_samples() {
        // Valkey 8.1's graph of 100 samples: 80 columns, an empty line, 20.
        let m = one_a_second(100);
        let (name, e) = m.event(b"command").unwrap();
        let expected = text(&[
            "command - high 140 ms, low 2 ms (all time high 140 ms)",
            DASHES,
            "              #              #              #              #              #     ",
            "    o      _  |    o      _  |    o      _  |    o      _  |    o      _  |    o",
            " _  |  #   |o | _  |  #   |o | _  |  #   |o | _  |  #   |o | _  |  #   |o | _  |",
            "_|__|#_|#o_||_|_|__|#_|#o_||_|_|__|#_|#o_||_|_|__|#_|#o_||_|_|__|#_|#o_||_|_|__|",
            "                                                                                ",
            "11111111111111111111111111111111111111115555555555444444444433333333332222222222",
            "mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm9876543210987654321098765432109876543210",
            "                                        ssssssssssssssssssssssssssssssssssssssss",
            "",
            "         #          ",
            "      _  |    o     ",
            "  #   |o | _  |  #  ",
            "#_|#o_||_|_|__|#_|#o",
            "                    ",
            "11111111119876543210",
            "9876543210ssssssssss",
            "ssssssssss          ",
        ]);
        assert_eq!(graph(name, e, T0 + 99), expected);
    }

    #[test]
    fn equal_samples_lie_on_the_floor_and_ages_are_rounded_down() {
        let mut m = LatencyMonitor::default();
        let now = 10_000_000;
        for age in [86_400 * 2 + 5, 3600, 3599, 60, 59] {
            m.add_if_needed(1, "expire-cycle", 7, (now - age) * 1000);
        }
        let (name, e) = m.event(b"expire-cycle").unwrap();
        let expected = text(&[
            "expire-cycle - high 7 ms, low 7 ms (all time high 7 ms)",
            DASHES,
            "     ",
            "     ",
            "     ",
            "_____",
            "     ",
            "21515",
            "dh9m9",
            "  m s",
        ]);
        assert_eq!(graph(name, e, now), expected);
    }

    fn settings() -> DoctorSettings {
        DoctorSettings {
            threshold_ms: 1,
            slowlog_slower_than_us: 10_000,
            slowlog_max_len: 128,
            hz: 10,
        }
    }

    #[test]
    fn doctor_with_no_spikes_says_why() {
        let m = LatencyMonitor::default();
        let off = DoctorSettings {
            threshold_ms: 0,
            ..settings()
        };
        assert!(m.doctor(&off, T0).contains("latency monitor is off"));
        assert_eq!(
            m.doctor(&settings(), T0),
            "No latency spike was observed since this instance started.\n"
        );
    }

    #[test]
    fn doctor_sums_up_each_event_and_advises_once_each_in_order() {
        let mut m = LatencyMonitor::default();
        for (dt, ms) in [(0, 10), (1, 20), (3, 60)] {
            m.add_if_needed(1, "command", ms, (T0 + dt) * 1000);
        }
        // An earlier spike in the newest second: the sample keeps the worst.
        m.add_if_needed(1, "command", 90, (T0 + 3) * 1000 + 10);
        m.add_if_needed(1, "expire-cycle", 4, (T0 + 5) * 1000);
        let report = m.doctor(&settings(), T0 + 5);
        let lines: Vec<&str> = report.lines().collect();
        // command: samples 10, 20, 90: average 40, deviations 30, 20, 50;
        // 5 s since the oldest over 3 samples.
        assert_eq!(
            &lines[..5],
            [
                "Latency spikes were observed in this instance.",
                "",
                "1. command: 3 latency spikes (average 40ms, mean deviation 33ms, period 1.67 sec). \
                 Worst all time event 90ms.",
                "2. expire-cycle: 1 latency spikes (average 4ms, mean deviation 0ms, period 1.00 sec). \
                 Worst all time event 4ms.",
                "",
            ]
        );
        let advice: Vec<&str> = lines[7..].iter().map(|l| &l[..24]).collect();
        assert_eq!(
            advice,
            [
                "- The slow log keeps onl",
                "- SLOWLOG GET shows whic",
                "- 'CONFIG SET hz 100' ru",
                "- Deleting, expiring or ",
            ],
            "{report}"
        );
        assert!(report.contains("'CONFIG SET slowlog-log-slower-than 1000'"));

        // With the slow log off, it says to turn it on; at hz 100 the
        // expire cycle needs no advice of its own.
        let other = DoctorSettings {
            slowlog_slower_than_us: -1,
            hz: 100,
            ..settings()
        };
        let report = m.doctor(&other, T0 + 5);
        let advice: Vec<&str> = report.lines().skip(7).map(|l| &l[..24]).collect();
        assert_eq!(
            advice,
            [
                "- Commands were slow whi",
                "- SLOWLOG GET shows whic",
                "- Deleting, expiring or ",
            ]
        );
    }
}
