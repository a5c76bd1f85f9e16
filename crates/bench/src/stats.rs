//! Latency histograms and counters, per worker thread, merged at the end.
//!
//! Latencies are recorded in nanoseconds into HDR histograms covering
//! 1 ns .. 60 s with 3 significant digits (so 1 µs–60 s at better than
//! 0.1%); values above 60 s are clamped. Each thread writes only its own
//! [`ThreadStats`]; nothing is shared on the hot path.

use hdrhistogram::Histogram;
use std::fmt::Write as _;

/// Highest latency recorded without clamping: 60 s in ns.
pub const MAX_NS: u64 = 60_000_000_000;

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_NS, 3).expect("static histogram bounds are valid")
}

/// One thread's results for one test.
#[derive(Debug)]
pub struct ThreadStats {
    /// Latency per template (same index as `Workload::templates`).
    pub hist: Vec<Histogram<u64>>,
    /// Open loop: how late each request was sent after its intended time.
    pub lateness: Histogram<u64>,
    /// Error replies by message (first line without the `-`).
    pub errors: Vec<(String, u64)>,
    /// Requests in flight when their connection failed: no reply.
    pub lost: u64,
    pub conn_failures: u64,
    pub reconnects: u64,
    pub verify_checked: u64,
    pub verify_mismatch: u64,
    /// GETs of keys this run never SET and found empty (not a mismatch).
    pub verify_absent: u64,
    /// First few mismatch descriptions, for the report.
    pub verify_examples: Vec<String>,
}

impl ThreadStats {
    pub fn new(templates: usize) -> Self {
        ThreadStats {
            hist: (0..templates).map(|_| new_histogram()).collect(),
            lateness: new_histogram(),
            errors: Vec::new(),
            lost: 0,
            conn_failures: 0,
            reconnects: 0,
            verify_checked: 0,
            verify_mismatch: 0,
            verify_absent: 0,
            verify_examples: Vec::new(),
        }
    }

    #[inline]
    pub fn record(&mut self, template: usize, ns: u64) {
        self.hist[template].saturating_record(ns.clamp(1, MAX_NS));
    }

    pub fn error(&mut self, msg: &[u8]) {
        let msg = String::from_utf8_lossy(msg);
        match self.errors.iter_mut().find(|(m, _)| *m == msg) {
            Some((_, n)) => *n += 1,
            None => self.errors.push((msg.into_owned(), 1)),
        }
    }

    /// Add `other` into `self` (the end-of-run merge).
    pub fn merge(&mut self, other: &ThreadStats) {
        for (a, b) in self.hist.iter_mut().zip(&other.hist) {
            a.add(b).expect("histograms share bounds");
        }
        self.lateness
            .add(&other.lateness)
            .expect("histograms share bounds");
        for (m, n) in &other.errors {
            match self.errors.iter_mut().find(|(x, _)| x == m) {
                Some((_, c)) => *c += n,
                None => self.errors.push((m.clone(), *n)),
            }
        }
        self.lost += other.lost;
        self.conn_failures += other.conn_failures;
        self.reconnects += other.reconnects;
        self.verify_checked += other.verify_checked;
        self.verify_mismatch += other.verify_mismatch;
        self.verify_absent += other.verify_absent;
        for e in &other.verify_examples {
            if self.verify_examples.len() < 5 {
                self.verify_examples.push(e.clone());
            }
        }
    }

    /// Replies received, errors included.
    pub fn replies(&self) -> u64 {
        self.hist.iter().map(|h| h.len()).sum()
    }

    pub fn error_count(&self) -> u64 {
        self.errors.iter().map(|(_, n)| n).sum()
    }
}

/// The summary percentiles every report prints.
pub const SUMMARY: [(&str, f64); 5] = [
    ("p50", 50.0),
    ("p90", 90.0),
    ("p99", 99.0),
    ("p99.9", 99.9),
    ("p99.99", 99.99),
];

/// Summary of one histogram, in µs.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub count: u64,
    pub percentiles: [f64; 5],
    pub max: f64,
    pub mean: f64,
}

pub fn summarize(h: &Histogram<u64>) -> Summary {
    let us = |ns: u64| ns as f64 / 1000.0;
    let mut percentiles = [0.0; 5];
    for (slot, (_, p)) in percentiles.iter_mut().zip(SUMMARY) {
        *slot = if h.is_empty() {
            0.0
        } else {
            us(h.value_at_percentile(p))
        };
    }
    Summary {
        count: h.len(),
        percentiles,
        max: if h.is_empty() { 0.0 } else { us(h.max()) },
        mean: if h.is_empty() { 0.0 } else { h.mean() / 1000.0 },
    }
}

/// The full distribution as an HdrHistogram percentile table (values in µs),
/// the format HdrHistogram's `outputPercentileDistribution` writes and its
/// plotters read. `label` goes in a leading `#[Label = ...]` comment line.
pub fn percentile_table(h: &Histogram<u64>, label: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "#[Label = {label}]");
    let _ = writeln!(
        s,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    if !h.is_empty() {
        for v in h.iter_quantiles(5) {
            let q = v.quantile_iterated_to();
            let value = h.highest_equivalent(v.value_iterated_to()) as f64 / 1000.0;
            if q < 1.0 {
                let _ = writeln!(
                    s,
                    "{value:12.3} {q:14.12} {:>10} {:14.2}",
                    v.count_since_last_iteration(),
                    1.0 / (1.0 - q)
                );
            } else {
                let _ = writeln!(
                    s,
                    "{value:12.3} {q:14.12} {:>10}",
                    v.count_since_last_iteration()
                );
            }
        }
    }
    let mean = if h.is_empty() { 0.0 } else { h.mean() / 1000.0 };
    let sd = if h.is_empty() {
        0.0
    } else {
        h.stdev() / 1000.0
    };
    let _ = writeln!(s, "#[Mean    = {mean:12.3}, StdDeviation   = {sd:12.3}]");
    let _ = writeln!(
        s,
        "#[Max     = {:12.3}, Total count    = {:12}]",
        h.max() as f64 / 1000.0,
        h.len()
    );
    let _ = writeln!(
        s,
        "#[Buckets = {:12}, SubBuckets     = {:12}]",
        h.buckets(),
        h.distinct_values()
    );
    s
}

/// One labelled distribution read back from a percentile table:
/// (percentile in 0..=1, latency in µs).
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// Read the tables [`percentile_table`] wrote (several may follow each
/// other in one file), or redis-benchmark's "Latency by percentile
/// distribution" output (`50.000% <= 0.103 milliseconds ...`).
pub fn parse_distributions(text: &str, default_label: &str) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    let mut current: Option<Series> = None;
    let mut rb_section = false;
    // Once a file shows redis-benchmark's format, only its percentile
    // sections count (its summary lines look like table rows).
    let mut redis_benchmark = false;
    for line in text.lines() {
        let t = line.trim();
        if let Some(label) = t
            .strip_prefix("#[Label = ")
            .and_then(|r| r.strip_suffix(']'))
        {
            out.extend(current.take());
            current = Some(Series {
                label: label.to_string(),
                points: Vec::new(),
            });
            continue;
        }
        if t.starts_with("====== ") {
            // redis-benchmark's per-test header: "====== GET ======".
            out.extend(current.take());
            let name = t.trim_matches(|c| c == '=' || c == ' ');
            current = Some(Series {
                label: name.to_string(),
                points: Vec::new(),
            });
            rb_section = false;
            continue;
        }
        if t.starts_with("Latency by percentile distribution") {
            rb_section = true;
            redis_benchmark = true;
            continue;
        }
        if rb_section {
            // "99.900% <= 0.415 milliseconds (cumulative count 199800)"
            if let Some((p, rest)) = t.split_once("% <= ") {
                let ms = rest
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<f64>().ok());
                if let (Ok(p), Some(ms)) = (p.parse::<f64>(), ms) {
                    let cur = current.get_or_insert_with(|| Series {
                        label: default_label.into(),
                        points: Vec::new(),
                    });
                    cur.points.push((p / 100.0, (ms * 1e6).round() / 1e3));
                    continue;
                }
            }
            if !t.is_empty() {
                rb_section = false;
            }
            continue;
        }
        if redis_benchmark || t.starts_with('#') || t.is_empty() {
            continue;
        }
        // "Value Percentile TotalCount [1/(1-Percentile)]": 3 or 4 columns.
        let f: Vec<&str> = t.split_whitespace().collect();
        if !(3..=4).contains(&f.len()) || f[2].parse::<u64>().is_err() {
            continue;
        }
        if let (Ok(v), Ok(p)) = (f[0].parse::<f64>(), f[1].parse::<f64>())
            && (0.0..=1.0).contains(&p)
        {
            let cur = current.get_or_insert_with(|| Series {
                label: default_label.into(),
                points: Vec::new(),
            });
            cur.points.push((p, v));
        }
    }
    out.extend(current);
    out.retain(|s| !s.points.is_empty());
    out
}

/// Points (percentile, µs) of a live histogram, the same ones the table has.
pub fn series_of(h: &Histogram<u64>, label: &str) -> Series {
    parse_distributions(&percentile_table(h, label), label)
        .pop()
        .unwrap_or(Series {
            label: label.into(),
            points: Vec::new(),
        })
}

/// Minimal JSON string escaping.
pub fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// A JSON number (non-finite values become null).
pub fn json_num(x: f64) -> String {
    if x.is_finite() {
        format!("{}", (x * 1000.0).round() / 1000.0)
    } else {
        "null".into()
    }
}

pub fn summary_json(s: &Summary) -> String {
    let mut o = format!("{{\"count\":{}", s.count);
    for ((name, _), v) in SUMMARY.iter().zip(s.percentiles) {
        let _ = write!(o, ",\"{name}_us\":{}", json_num(v));
    }
    let _ = write!(
        o,
        ",\"max_us\":{},\"mean_us\":{}}}",
        json_num(s.max),
        json_num(s.mean)
    );
    o
}

/// Latency against load from a table of runs: tab-separated, a header
/// naming at least `rate`, `variant` and `column` (bench/latency.sh's
/// RAW_OUT), one row per run. One series per variant, in order of first
/// appearance: for each rate, the median of `column` over its runs.
pub fn parse_load_table(text: &str, column: &str) -> Result<Vec<Series>, String> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines.next().ok_or("empty table")?.split('\t').collect();
    let find = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| format!("no column {name:?} in the header"))
    };
    let (rate_i, variant_i, value_i) = (find("rate")?, find("variant")?, find(column)?);
    /// A variant's runs: each rate with the values measured at it.
    type Runs = Vec<(f64, Vec<f64>)>;
    let mut runs: Vec<(String, Runs)> = Vec::new();
    for (n, line) in lines.enumerate() {
        let f: Vec<&str> = line.split('\t').collect();
        let get = |i: usize| {
            f.get(i)
                .ok_or_else(|| format!("row {}: too few columns", n + 2))
        };
        let num = |i: usize| -> Result<f64, String> {
            let v = get(i)?;
            v.parse()
                .map_err(|_| format!("row {}: {v:?} is not a number", n + 2))
        };
        let (rate, value, variant) = (num(rate_i)?, num(value_i)?, get(variant_i)?.to_string());
        let idx = match runs.iter().position(|(v, _)| *v == variant) {
            Some(i) => i,
            None => {
                runs.push((variant, Vec::new()));
                runs.len() - 1
            }
        };
        let rates = &mut runs[idx].1;
        match rates.iter_mut().find(|(r, _)| *r == rate) {
            Some((_, vs)) => vs.push(value),
            None => rates.push((rate, vec![value])),
        }
    }
    Ok(runs
        .into_iter()
        .map(|(label, mut rates)| {
            rates.sort_by(|a, b| a.0.total_cmp(&b.0));
            let points = rates
                .into_iter()
                .map(|(r, mut vs)| {
                    vs.sort_by(f64::total_cmp);
                    let m = vs.len() / 2;
                    let med = if vs.len() % 2 == 1 {
                        vs[m]
                    } else {
                        (vs[m - 1] + vs[m]) / 2.0
                    };
                    (r, med)
                })
                .collect();
            Series { label, points }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist_of(values_us: &[u64]) -> Histogram<u64> {
        let mut h = new_histogram();
        for v in values_us {
            h.record(v * 1000).unwrap();
        }
        h
    }

    #[test]
    fn merge_adds_histograms_and_counters() {
        let mut a = ThreadStats::new(2);
        let mut b = ThreadStats::new(2);
        for i in 1..=100 {
            a.record(0, i * 1000);
            b.record(0, (i + 100) * 1000);
        }
        b.record(1, 5_000);
        a.error(b"ERR one");
        b.error(b"ERR one");
        b.error(b"WRONGTYPE two");
        b.lost = 3;
        a.merge(&b);
        assert_eq!(a.hist[0].len(), 200);
        assert_eq!(a.hist[1].len(), 1);
        assert_eq!(a.replies(), 201);
        let p50 = a.hist[0].value_at_percentile(50.0);
        assert!((99_000..=101_000).contains(&p50), "p50 {p50}");
        assert_eq!(a.hist[0].max() / 1000, 200);
        assert_eq!(
            a.errors,
            vec![("ERR one".to_string(), 2), ("WRONGTYPE two".to_string(), 1)]
        );
        assert_eq!(a.error_count(), 3);
        assert_eq!(a.lost, 3);
    }

    #[test]
    fn summary_percentiles_are_ordered_and_in_us() {
        let h = hist_of(&(1..=10_000).collect::<Vec<_>>());
        let s = summarize(&h);
        assert_eq!(s.count, 10_000);
        assert!((s.percentiles[0] - 5000.0).abs() < 10.0, "{s:?}");
        assert!((s.percentiles[2] - 9900.0).abs() < 10.0, "{s:?}");
        assert!(s.percentiles.windows(2).all(|w| w[0] <= w[1]));
        assert!(s.percentiles[4] <= s.max);
        assert!((s.mean - 5000.5).abs() < 5.0);
        let j = summary_json(&s);
        assert!(j.starts_with("{\"count\":10000,\"p50_us\":"), "{j}");
        assert!(j.contains("\"p99.99_us\":") && j.ends_with('}'));
    }

    #[test]
    fn percentile_table_format_and_round_trip() {
        let h = hist_of(&[10, 20, 30, 40, 1000]);
        let t = percentile_table(&h, "GET");
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "#[Label = GET]");
        assert_eq!(
            lines[1],
            "       Value     Percentile TotalCount 1/(1-Percentile)"
        );
        assert_eq!(lines[2], "");
        // First row: the smallest value at percentile 0.
        assert_eq!(
            lines[3],
            "      10.007 0.000000000000          1           1.00"
        );
        assert!(
            t.contains("#[Max     =     1000.447, Total count    =            5]"),
            "{t}"
        );
        let series = parse_distributions(&t, "x");
        assert_eq!(series.len(), 1);
        assert_eq!(series[0].label, "GET");
        let last = series[0].points.last().unwrap();
        assert_eq!(last.0, 1.0);
        assert!((last.1 - 1000.447).abs() < 0.01);
        assert!(
            series[0]
                .points
                .windows(2)
                .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1)
        );
    }

    #[test]
    fn parses_several_tables_and_redis_benchmark_output() {
        let a = percentile_table(&hist_of(&[1, 2, 3]), "SET");
        let b = percentile_table(&hist_of(&[4, 5, 6]), "GET");
        let both = parse_distributions(&format!("{a}{b}"), "x");
        assert_eq!(
            both.iter().map(|s| s.label.as_str()).collect::<Vec<_>>(),
            ["SET", "GET"]
        );

        let rb = "====== GET ======\n  200000 requests completed in 2.00 seconds\n\n\
                  Latency by percentile distribution:\n\
                  0.000% <= 0.055 milliseconds (cumulative count 3)\n\
                  50.000% <= 0.143 milliseconds (cumulative count 100000)\n\
                  100.000% <= 1.007 milliseconds (cumulative count 200000)\n\
                  \nCumulative distribution of latencies:\n\
                  0.103% <= 0.103 milliseconds (cumulative count 206)\n\
                  \nSummary:\n  latency summary (msec):\n  avg min p50 p95 p99 max\n\
                  0.290 0.088 0.279 0.375 0.495 4.391\n  0.290 0.088 3\n";
        let s = parse_distributions(rb, "redis-benchmark");
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].label, "GET");
        assert_eq!(s[0].points, vec![(0.0, 55.0), (0.5, 143.0), (1.0, 1007.0)]);
    }

    #[test]
    fn json_escapes() {
        assert_eq!(json_str("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
        assert_eq!(json_num(f64::NAN), "null");
        assert_eq!(json_num(1.23456), "1.235");
    }

    #[test]
    fn load_table_gives_medians_per_rate_and_variant() {
        let t = "rate\tround\tvariant\tp50\n\
                 20000\t1\tredis\t60\n20000\t1\tringkv\t50\n\
                 20000\t2\tredis\t70\n20000\t2\tringkv\t55\n\
                 20000\t3\tredis\t90\n10000\t1\tredis\t40\n";
        let s = parse_load_table(t, "p50").unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].label, "redis");
        assert_eq!(s[0].points, vec![(10000.0, 40.0), (20000.0, 70.0)]);
        assert_eq!(s[1].points, vec![(20000.0, 52.5)]);
        assert!(parse_load_table(t, "p99").unwrap_err().contains("p99"));
        assert!(parse_load_table("rate\tvariant\tp50\n1\tx\tfast\n", "p50").is_err());
    }
}
