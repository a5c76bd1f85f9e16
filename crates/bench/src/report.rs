//! Turning [`TestResult`]s into text for people, JSON for scripts, a
//! percentile table file and an SVG.

use crate::cli::RunArgs;
use crate::run::TestResult;
use crate::stats::{
    SUMMARY, Series, json_num, json_str, new_histogram, percentile_table, series_of, summarize,
    summary_json,
};
use hdrhistogram::Histogram;
use std::fmt::Write as _;

/// Per-command histograms plus, for several commands, their sum as "all".
fn rows(r: &TestResult) -> Vec<(String, Histogram<u64>)> {
    let mut out: Vec<(String, Histogram<u64>)> = r
        .labels
        .iter()
        .cloned()
        .zip(r.stats.hist.iter().cloned())
        .filter(|(_, h)| !h.is_empty())
        .collect();
    if out.len() > 1 {
        let mut all = new_histogram();
        for (_, h) in &out {
            all.add(h).expect("same bounds");
        }
        out.push(("all".into(), all));
    }
    out
}

fn per_request(us: u64, n: u64) -> f64 {
    if n == 0 {
        f64::NAN
    } else {
        us as f64 / n as f64
    }
}

pub fn text(a: &RunArgs, r: &TestResult, backend: &str) -> String {
    let mut s = String::new();
    let secs = r.elapsed_ns as f64 / 1e9;
    let all = rows(r).pop().map(|(_, h)| summarize(&h));
    if a.quiet {
        let (p50, p99) = all
            .as_ref()
            .map_or((0.0, 0.0), |x| (x.percentiles[0], x.percentiles[2]));
        let _ = writeln!(
            s,
            "{}: {:.0} requests per second, p50={p50:.1} µs, p99={p99:.1} µs, errors={}",
            r.test,
            r.rps(),
            r.stats.error_count() + r.stats.lost
        );
        return s;
    }
    let mode = match a.rate {
        Some(rate) => format!("open loop at {rate:.0} req/s"),
        None => "closed loop".into(),
    };
    let _ = writeln!(
        s,
        "====== {} ======\n  {} requests in {secs:.3} s: {:.0} requests per second\n  {} connections on {} thread(s), pipeline {}, {} bytes, {backend}, {mode}, keys {} of {}",
        r.test,
        r.requests(),
        r.rps(),
        a.clients,
        r.threads,
        a.pipeline,
        a.data_size,
        a.key_pattern,
        a.keyspace
    );
    let _ = write!(s, "  {:<10}", "latency µs");
    for (name, _) in SUMMARY {
        let _ = write!(s, " {name:>9}");
    }
    let _ = writeln!(s, " {:>9} {:>9} {:>10}", "max", "mean", "count");
    for (label, h) in rows(r) {
        let m = summarize(&h);
        let _ = write!(s, "  {label:<10}");
        for v in m.percentiles {
            let _ = write!(s, " {v:>9.1}");
        }
        let _ = writeln!(s, " {:>9.1} {:>9.1} {:>10}", m.max, m.mean, m.count);
    }
    if r.open_loop && !r.stats.lateness.is_empty() {
        let l = summarize(&r.stats.lateness);
        let _ = writeln!(
            s,
            "  sent late (µs after intended time): p50 {:.1}, p99 {:.1}, max {:.1}",
            l.percentiles[0], l.percentiles[2], l.max
        );
    }
    let n = r.requests();
    let _ = writeln!(
        s,
        "  client CPU: {:.2} µs per request ({:.3} s user+sys)",
        per_request(r.client_cpu_us, n),
        r.client_cpu_us as f64 / 1e6
    );
    if let Some(sv) = &r.server {
        let src = if sv.source == "proc" {
            "/proc/PID/stat utime+stime"
        } else {
            "INFO used_cpu_user+used_cpu_sys"
        };
        let cmds = sv
            .commands
            .map(|c| format!(", {c} commands processed"))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "  server CPU: {:.2} µs per request ({src}{cmds})",
            per_request(sv.cpu_us, n)
        );
    }
    if r.stats.errors.is_empty() && r.stats.lost == 0 {
        let _ = writeln!(s, "  errors: none");
    } else {
        for (m, c) in &r.stats.errors {
            let _ = writeln!(s, "  error reply x{c}: {m}");
        }
        if r.stats.lost > 0 {
            let _ = writeln!(s, "  {} requests lost with their connection", r.stats.lost);
        }
    }
    if r.stats.conn_failures > 0 {
        let _ = writeln!(
            s,
            "  connection failures: {}, reconnects: {}",
            r.stats.conn_failures, r.stats.reconnects
        );
    }
    if a.verify {
        let st = &r.stats;
        let _ = writeln!(
            s,
            "  verify: {} values checked, {} mismatches, {} GETs of keys never set",
            st.verify_checked, st.verify_mismatch, st.verify_absent
        );
        for e in &st.verify_examples {
            let _ = writeln!(s, "    {e}");
        }
    }
    s
}

pub fn json(a: &RunArgs, results: &[TestResult], backend: &str) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "{{\"tool\":\"ringkv-bench\",\"version\":{},\"config\":{{\"host\":{},\"port\":{},\"threads\":{},\"clients\":{},\"pipeline\":{},\"data_size\":{},\"keyspace\":{},\"key_pattern\":{},\"rate\":{},\"io\":{}}},\"tests\":[",
        json_str(env!("CARGO_PKG_VERSION")),
        json_str(&a.host),
        a.port,
        a.threads,
        a.clients,
        a.pipeline,
        a.data_size,
        a.keyspace,
        json_str(&a.key_pattern.to_string()),
        a.rate.map_or("null".into(), json_num),
        json_str(backend)
    );
    for (i, r) in results.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        let n = r.requests();
        let st = &r.stats;
        let _ = write!(
            o,
            "{{\"test\":{},\"requests\":{n},\"replies\":{},\"errors\":{},\"lost\":{},\"connection_failures\":{},\"reconnects\":{},\"duration_s\":{},\"rps\":{},\"client_cpu_us_per_request\":{}",
            json_str(&r.test),
            st.replies(),
            st.error_count(),
            st.lost,
            st.conn_failures,
            st.reconnects,
            json_num(r.elapsed_ns as f64 / 1e9),
            json_num(r.rps()),
            json_num(per_request(r.client_cpu_us, n)),
        );
        match &r.server {
            Some(sv) => {
                let _ = write!(
                    o,
                    ",\"server_cpu_us_per_request\":{},\"server_cpu_source\":{},\"server_commands\":{}",
                    json_num(per_request(sv.cpu_us, n)),
                    json_str(sv.source),
                    sv.commands.map_or("null".into(), |c| c.to_string())
                );
            }
            None => o.push_str(",\"server_cpu_us_per_request\":null"),
        }
        o.push_str(",\"error_messages\":{");
        for (k, (m, c)) in st.errors.iter().enumerate() {
            let _ = write!(o, "{}{}:{c}", if k > 0 { "," } else { "" }, json_str(m));
        }
        o.push_str("},\"latency_us\":{");
        for (k, (label, h)) in rows(r).iter().enumerate() {
            let _ = write!(
                o,
                "{}{}:{}",
                if k > 0 { "," } else { "" },
                json_str(label),
                summary_json(&summarize(h))
            );
        }
        o.push('}');
        if r.open_loop {
            let _ = write!(
                o,
                ",\"lateness_us\":{}",
                summary_json(&summarize(&st.lateness))
            );
        }
        if a.verify {
            let _ = write!(
                o,
                ",\"verify\":{{\"checked\":{},\"mismatches\":{},\"absent\":{}}}",
                st.verify_checked, st.verify_mismatch, st.verify_absent
            );
        }
        o.push('}');
    }
    o.push_str("]}\n");
    o
}

/// Label of a command's series: `GET`, or `set/SET` when several tests ran.
fn label(results: &[TestResult], r: &TestResult, cmd: &str) -> String {
    if results.len() > 1 && !r.test.eq_ignore_ascii_case(cmd) {
        format!("{}/{cmd}", r.test)
    } else {
        cmd.to_string()
    }
}

/// All distributions, one percentile table each.
pub fn histogram_file(results: &[TestResult]) -> String {
    let mut s = String::new();
    for r in results {
        for (l, h) in r.labels.iter().zip(&r.stats.hist) {
            if !h.is_empty() {
                s.push_str(&percentile_table(h, &label(results, r, l)));
                s.push('\n');
            }
        }
    }
    s
}

pub fn series(results: &[TestResult]) -> Vec<Series> {
    let mut out = Vec::new();
    for r in results {
        for (l, h) in r.labels.iter().zip(&r.stats.hist) {
            if !h.is_empty() {
                out.push(series_of(h, &label(results, r, l)));
            }
        }
    }
    out
}
