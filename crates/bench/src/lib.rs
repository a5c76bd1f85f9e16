//! ringkv-bench: a load generator for RESP servers (ringkv, Valkey, Redis)
//! that drives them through io_uring (or epoll) and reports latency as a
//! distribution, not an average.
//!
//! This crate owns the `ringkv-bench` binary and nothing else: it talks to
//! a server only over TCP and shares only the RESP codec (`resp`) with the
//! rest of the workspace. It must not depend on the server's crates, so it
//! measures ringkv exactly as it measures anyone else.
//!
//! ```text
//!  main thread: parse CLI, INFO before ─┐                 ┌─ INFO after, merge, report
//!                                       ▼                 │   (text / JSON / .hgrm / SVG)
//!  worker 0 ── io_uring 0 ──┬─ conn 0 ─┐                  │
//!   (KeyGen, ThreadStats)   ├─ conn 1 ─┼─ HDR histogram per command ─┐
//!                           └─ ...    ─┘                             ├─ merged
//!  worker 1 ── io_uring 1 ──┬─ conn k ─┐                             │
//!                           └─ ...    ─┴─ HDR histogram per command ─┘
//! ```
//!
//! * [`cli`]: flags (redis-benchmark's where it has them).
//! * [`workload`]: built-in tests and `--` templates, pre-encoded with
//!   holes for keys and values.
//! * [`keygen`]: uniform, sequential, Zipf and Gaussian key indexes.
//! * [`conn`]: the per-connection state machine both loops share:
//!   pipelining, open-loop schedule, reply matching, `--verify`.
//! * [`evict`]: the `evict` subcommand, an eviction-quality test (server
//!   hit rate against exact LRU/LFU simulations of the same trace).
//! * [`uring`] / [`epoll`]: the two event loops; [`worker`] runs one per
//!   thread; [`run`] splits work and measures CPU; [`report`], [`stats`],
//!   [`plot`] turn histograms into output.
//!
//! Timing: one CLOCK_MONOTONIC reading per send batch (just before the
//! batch goes to the kernel) and one per receive batch (right after the
//! wait returns). A reply's latency is receive-batch time minus its
//! request's send-batch time, or, in open loop (`--rate`), minus its
//! intended send time, so a stalled server cannot hide its queueing
//! (coordinated omission).

pub mod cli;
pub mod conn;
pub mod epoll;
pub mod evict;
pub mod keygen;
pub mod plot;
pub mod report;
pub mod run;
pub mod stats;
pub mod sys;
pub mod uring;
pub mod worker;
pub mod workload;

use clap::Parser;
use cli::{Cli, Command};
use std::path::Path;

/// Run the command line; returns the process exit code.
pub fn main_cli() -> i32 {
    let cli = Cli::parse();
    let r = match cli.command {
        Some(Command::Plot {
            files,
            vs_load,
            out,
            title,
            log_y,
        }) => plot_files(&files, vs_load.as_deref(), &out, &title, log_y),
        Some(Command::Evict(a)) => evict::run(&a),
        None => bench(&cli.run),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ringkv-bench: {e}");
            1
        }
    }
}

fn read_file(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn write_file(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// `ringkv-bench plot a.hgrm b.hgrm -o cmp.svg` (latency by percentile),
/// or with `vs_load` = a column, `ringkv-bench plot --vs-load p50 runs.tsv
/// -o p50.svg` (latency against load).
fn plot_files(
    files: &[std::path::PathBuf],
    vs_load: Option<&str>,
    out: &Path,
    title: &str,
    log_y: bool,
) -> Result<i32, String> {
    let mut all = Vec::new();
    for f in files {
        let text = read_file(f)?;
        if let Some(column) = vs_load {
            let series = stats::parse_load_table(&text, column)
                .map_err(|e| format!("{}: {e}", f.display()))?;
            all.extend(series);
            continue;
        }
        let stem = f.file_stem().map_or_else(
            || f.display().to_string(),
            |s| s.to_string_lossy().into_owned(),
        );
        let series = stats::parse_distributions(&text, &stem);
        if series.is_empty() {
            return Err(format!("{}: no percentile distribution found", f.display()));
        }
        for mut s in series {
            if files.len() > 1 && s.label != stem {
                s.label = format!("{stem}: {}", s.label);
            }
            all.push(s);
        }
    }
    let svg = match vs_load {
        Some(_) => plot::svg_vs_load(title, &all, log_y),
        None => plot::svg(title, &all, log_y),
    };
    write_file(out, &svg)?;
    Ok(0)
}

fn bench(a: &cli::RunArgs) -> Result<i32, String> {
    if let Some(r) = a.rate
        && !(r.is_finite() && r > 0.0)
    {
        return Err("--rate must be > 0".into());
    }
    let workloads = run::workloads(a)?;
    let use_uring = run::choose_backend(a.io_uring, a.quiet || a.json)?;
    let backend = if use_uring { "io_uring" } else { "epoll" };
    let target = sys::Target {
        host: a.host.clone(),
        port: a.port,
        auth: a.auth.clone(),
        resp: a.resp,
        timeout: a.timeout,
    };
    let mut cpu = run::CpuProbe::new(a, &target);
    let progress = run::want_progress(a);
    let mut results = Vec::new();
    for w in workloads {
        let r = run::run_test(a, w, &target, use_uring, &mut cpu, progress)?;
        if !a.json {
            print!("{}", report::text(a, &r, backend));
            if !a.quiet {
                println!();
            }
        }
        results.push(r);
    }
    if a.json {
        print!("{}", report::json(a, &results, backend));
    }
    if let Some(p) = &a.histogram_out {
        write_file(p, &report::histogram_file(&results))?;
    }
    if let Some(p) = &a.plot {
        let title = format!(
            "ringkv-bench {}:{} ({} connections, pipeline {})",
            a.host, a.port, a.clients, a.pipeline
        );
        write_file(p, &plot::svg(&title, &report::series(&results), a.log_y))?;
    }
    let mismatches: u64 = results.iter().map(|r| r.stats.verify_mismatch).sum();
    if mismatches > 0 {
        eprintln!("ringkv-bench: --verify found {mismatches} wrong values");
        return Ok(2);
    }
    Ok(0)
}
