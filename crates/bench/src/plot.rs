//! Latency plots as hand-written SVG: by percentile, or against load.
//!
//! By percentile, the x axis is HdrHistogram's: log10 of 1/(1-p), so 0%,
//! 90%, 99%, 99.9%, ... are evenly spaced and the tail gets the room.
//! Against load, x is the offered rate, linear from 0. y is latency in µs,
//! linear from 0 or logarithmic. One polyline per series; a legend names
//! them.

use crate::stats::Series;
use std::fmt::Write as _;

const W: f64 = 960.0;
const H: f64 = 540.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;
const DECADES: usize = 5;
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// x position of percentile `p` (0..=1) in decades: 0 at 0%, 2 at 99%.
fn decades(p: f64) -> f64 {
    if p >= 1.0 {
        return DECADES as f64;
    }
    (1.0 / (1.0 - p)).log10().min(DECADES as f64)
}

/// A "nice" axis top at or above `v`: 1, 2 or 5 times a power of ten.
fn nice_ceiling(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * mag >= v {
            return m * mag;
        }
    }
    10.0 * mag
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// What the x axis of a chart is.
enum XAxis {
    /// Percentiles 0..=1 (`decades`).
    Percentile,
    /// Offered requests/s, 0..=`max`.
    Load { max: f64 },
}

impl XAxis {
    /// Position of `v` as a fraction of the axis.
    fn frac(&self, v: f64) -> f64 {
        match self {
            XAxis::Percentile => decades(v) / DECADES as f64,
            XAxis::Load { max } => (v / max).clamp(0.0, 1.0),
        }
    }

    /// Grid lines: (fraction of the axis, label).
    fn ticks(&self) -> Vec<(f64, String)> {
        match self {
            XAxis::Percentile => ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"]
                .iter()
                .enumerate()
                .map(|(i, l)| (i as f64 / DECADES as f64, l.to_string()))
                .collect(),
            XAxis::Load { max } => (0..=5)
                .map(|i| (i as f64 / 5.0, fmt_rate(max * i as f64 / 5.0)))
                .collect(),
        }
    }

    fn title(&self) -> &'static str {
        match self {
            XAxis::Percentile => "percentile",
            XAxis::Load { .. } => "offered load (requests/s)",
        }
    }
}

fn fmt_rate(v: f64) -> String {
    if v >= 1000.0 {
        format!("{}k", fmt_tick(v / 1000.0))
    } else {
        fmt_tick(v)
    }
}

/// Render `series` (points: percentile 0..=1, latency µs) to an SVG
/// document, y linear from 0 or (`log_y`) logarithmic, which keeps the body
/// of the distribution readable when the tail is 10× higher.
pub fn svg(title: &str, series: &[Series], log_y: bool) -> String {
    chart(title, series, log_y, &XAxis::Percentile)
}

/// Render `series` (points: offered requests/s, latency µs) to an SVG
/// document: latency against load.
pub fn svg_vs_load(title: &str, series: &[Series], log_y: bool) -> String {
    let max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(0.0, f64::max);
    chart(
        title,
        series,
        log_y,
        &XAxis::Load {
            max: nice_ceiling(max),
        },
    )
}

fn chart(title: &str, series: &[Series], log_y: bool, xaxis: &XAxis) -> String {
    let values = || series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let ymax = nice_ceiling(values().fold(0.0, f64::max));
    let ymin = if log_y {
        let lo = values().filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
        if lo.is_finite() {
            10f64.powf(lo.log10().floor())
        } else {
            1.0
        }
    } else {
        0.0
    };
    let ymax = if log_y { ymax.max(ymin * 10.0) } else { ymax };
    let pw = W - LEFT - RIGHT;
    let ph = H - TOP - BOTTOM;
    let x = |p: f64| LEFT + xaxis.frac(p) * pw;
    let frac = |v: f64| {
        if log_y {
            (v.max(ymin).log10() - ymin.log10()) / (ymax.log10() - ymin.log10())
        } else {
            v / ymax
        }
    };
    let y = |v: f64| TOP + ph - frac(v).clamp(0.0, 1.0) * ph;

    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="13">"#
    );
    let _ = writeln!(o, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="{}" y="28" text-anchor="middle" font-size="16">{}</text>"#,
        W / 2.0,
        esc(title)
    );

    // Grid and axis labels.
    for (f, label) in xaxis.ticks() {
        let gx = LEFT + f * pw;
        let _ = writeln!(
            o,
            r##"<line x1="{gx:.1}" y1="{TOP}" x2="{gx:.1}" y2="{:.1}" stroke="#ddd"/>"##,
            TOP + ph
        );
        let _ = writeln!(
            o,
            r#"<text x="{gx:.1}" y="{:.1}" text-anchor="middle">{label}</text>"#,
            TOP + ph + 18.0
        );
    }
    let ticks: Vec<f64> = if log_y {
        let mut t = Vec::new();
        let mut dec = ymin;
        while dec <= ymax * 1.0001 {
            for m in [1.0, 2.0, 5.0] {
                if m * dec <= ymax * 1.0001 {
                    t.push(m * dec);
                }
            }
            dec *= 10.0;
        }
        t
    } else {
        (0..=5).map(|i| ymax * i as f64 / 5.0).collect()
    };
    for v in ticks {
        let gy = y(v);
        let _ = writeln!(
            o,
            r##"<line x1="{LEFT}" y1="{gy:.1}" x2="{:.1}" y2="{gy:.1}" stroke="#ddd"/>"##,
            LEFT + pw
        );
        let _ = writeln!(
            o,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            gy + 4.0,
            fmt_tick(v)
        );
    }
    let _ = writeln!(
        o,
        r##"<rect x="{LEFT}" y="{TOP}" width="{pw:.1}" height="{ph:.1}" fill="none" stroke="#444"/>"##
    );
    let _ = writeln!(
        o,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        LEFT + pw / 2.0,
        H - 14.0,
        xaxis.title()
    );
    let _ = writeln!(
        o,
        r#"<text x="18" y="{:.1}" text-anchor="middle" transform="rotate(-90 18 {:.1})">latency (µs)</text>"#,
        TOP + ph / 2.0,
        TOP + ph / 2.0
    );

    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut pts = String::new();
        for &(p, v) in &s.points {
            let _ = write!(pts, "{:.1},{:.1} ", x(p), y(v));
        }
        let _ = writeln!(
            o,
            r#"<polyline data-label="{}" fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            esc(&s.label),
            pts.trim_end()
        );
        let ly = TOP + 16.0 + i as f64 * 18.0;
        let _ = writeln!(
            o,
            r#"<line x1="{:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="3"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            LEFT + 12.0,
            LEFT + 36.0,
            LEFT + 42.0,
            ly + 4.0,
            esc(&s.label)
        );
    }
    o.push_str("</svg>\n");
    o
}

fn fmt_tick(v: f64) -> String {
    if v >= 100.0 || v == v.round() {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x_axis_is_log_of_inverse_tail() {
        assert_eq!(decades(0.0), 0.0);
        assert!((decades(0.9) - 1.0).abs() < 1e-9);
        assert!((decades(0.999) - 3.0).abs() < 1e-9);
        assert_eq!(decades(1.0), 5.0);
        assert_eq!(nice_ceiling(130.0), 200.0);
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(nice_ceiling(1000.0), 1000.0);
    }

    #[test]
    fn svg_has_one_polyline_per_series_and_is_balanced() {
        let series = vec![
            Series {
                label: "GET <a&b>".into(),
                points: vec![(0.0, 10.0), (0.5, 20.0), (0.99, 40.0), (1.0, 90.0)],
            },
            Series {
                label: "SET".into(),
                points: vec![(0.0, 12.0), (1.0, 50.0)],
            },
        ];
        let s = svg("cmp", &series, false);
        assert!(s.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(s.trim_end().ends_with("</svg>"));
        assert_eq!(s.matches("<polyline").count(), 2);
        assert!(s.contains("data-label=\"GET &lt;a&amp;b&gt;\""));
        assert!(s.contains(">99.999%</text>"));
        // Every element is self-closed or closed: count opening vs closing tags.
        let opens = s.matches("<text").count();
        assert_eq!(opens, s.matches("</text>").count());
        assert!(!s.contains("NaN") && !s.contains("inf"));
        // The 90 µs max sits at the top of a 100 µs axis, at the right edge.
        assert!(
            s.contains(&format!(
                "{:.1},{:.1}",
                W - RIGHT,
                TOP + (H - TOP - BOTTOM) * 0.1
            )),
            "{s}"
        );
    }

    #[test]
    fn latency_against_load_has_a_linear_rate_axis() {
        let series = vec![Series {
            label: "redis p50".into(),
            points: vec![(20_000.0, 60.0), (80_000.0, 100.0)],
        }];
        let s = svg_vs_load("vs load", &series, false);
        assert!(s.contains(">offered load (requests/s)</text>"));
        // 0 .. 100k in fifths; 80k sits at 4/5 of the width, at the top.
        for tick in [">0</text>", ">20k</text>", ">100k</text>"] {
            assert!(s.contains(tick), "missing tick {tick}");
        }
        let x80 = LEFT + (W - LEFT - RIGHT) * 0.8;
        assert!(s.contains(&format!("{x80:.1},{TOP:.1}")), "{s}");
    }

    #[test]
    fn log_y_axis_spans_whole_decades() {
        let series = vec![Series {
            label: "x".into(),
            points: vec![(0.0, 20.0), (0.9, 100.0), (1.0, 900.0)],
        }];
        let s = svg("log", &series, true);
        // 10 µs .. 1000 µs: 100 µs (at 90%, one decade of five) sits halfway up.
        let mid = TOP + (H - TOP - BOTTOM) / 2.0;
        assert!(
            s.contains(&format!("{:.1},{mid:.1}", LEFT + (W - LEFT - RIGHT) / 5.0)),
            "{s}"
        );
        for tick in [
            ">10</text>",
            ">20</text>",
            ">50</text>",
            ">100</text>",
            ">1000</text>",
        ] {
            assert!(s.contains(tick), "missing tick {tick}");
        }
    }
}
