//! One benchmark run: split the connections and requests over threads, run
//! each test, measure client and server CPU around it, merge the results.

use crate::cli::{IoMode, RunArgs};
use crate::conn::VerifySet;
use crate::stats::{ThreadStats, new_histogram};
use crate::sys::{Blocking, ServerCpu, Target, info_cpu, now_ns, proc_cpu_us, self_cpu_us};
use crate::worker::{self, Plan, Progress, Shared};
use crate::workload::{DEFAULT_TESTS, Template, Workload};
use std::io::{IsTerminal, Write};
use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What the server spent on one test.
#[derive(Clone, Debug)]
pub struct ServerCost {
    pub cpu_us: u64,
    /// Commands the server counted (INFO only).
    pub commands: Option<u64>,
    /// `info` or `proc`.
    pub source: &'static str,
}

/// Everything measured for one test.
#[derive(Debug)]
pub struct TestResult {
    pub test: String,
    /// Template labels, same order as `stats.hist`.
    pub labels: Vec<String>,
    pub stats: ThreadStats,
    pub elapsed_ns: u64,
    pub client_cpu_us: u64,
    pub server: Option<ServerCost>,
    pub threads: usize,
    pub open_loop: bool,
}

impl TestResult {
    /// Requests finished: replies plus requests lost to failed connections.
    pub fn requests(&self) -> u64 {
        self.stats.replies() + self.stats.lost
    }

    pub fn rps(&self) -> f64 {
        self.stats.replies() as f64 / (self.elapsed_ns.max(1) as f64 / 1e9)
    }
}

/// The workloads the command line asks for, in order.
pub fn workloads(a: &RunArgs) -> Result<Vec<Workload>, String> {
    if !a.template.is_empty() {
        let t = Template::from_args(&a.template, a.data_size)?;
        return Ok(vec![Workload::single(&t.name.to_ascii_lowercase(), t)]);
    }
    let names: Vec<String> = if a.tests.is_empty() {
        DEFAULT_TESTS.iter().map(|s| s.to_string()).collect()
    } else {
        a.tests
            .iter()
            .map(|s| s.trim().to_ascii_lowercase())
            .filter(|s| !s.is_empty())
            .collect()
    };
    names
        .iter()
        .map(|n| Workload::builtin(n, a.data_size, a.ratio))
        .collect()
}

/// io_uring or epoll, per `--io-uring`.
pub fn choose_backend(mode: IoMode, quiet: bool) -> Result<bool, String> {
    match mode {
        IoMode::No => Ok(false),
        IoMode::Yes => crate::uring::probe().map(|_| true),
        IoMode::Auto => match crate::uring::probe() {
            Ok(()) => Ok(true),
            Err(e) => {
                if !quiet {
                    eprintln!("ringkv-bench: {e}; using epoll");
                }
                Ok(false)
            }
        },
    }
}

/// Reads the server's CPU before and after a test.
pub enum CpuProbe {
    None,
    Info(Blocking),
    Proc(u32),
}

impl CpuProbe {
    pub fn new(a: &RunArgs, target: &Target) -> Self {
        if let Some(pid) = a.server_pid {
            return CpuProbe::Proc(pid);
        }
        if a.no_server_cpu {
            return CpuProbe::None;
        }
        match Blocking::connect(target) {
            Ok(c) => CpuProbe::Info(c),
            Err(e) => {
                eprintln!("ringkv-bench: no server CPU figures: {e}");
                CpuProbe::None
            }
        }
    }

    fn read(&mut self) -> Option<ServerCpu> {
        match self {
            CpuProbe::None => None,
            CpuProbe::Proc(pid) => match proc_cpu_us(*pid) {
                Ok(us) => Some(ServerCpu {
                    cpu_us: us,
                    commands: None,
                }),
                Err(e) => {
                    eprintln!("ringkv-bench: {e}");
                    None
                }
            },
            CpuProbe::Info(c) => match info_cpu(c) {
                Ok(v) => Some(v),
                Err(e) => {
                    eprintln!("ringkv-bench: server CPU: {e}");
                    None
                }
            },
        }
    }

    fn source(&self) -> &'static str {
        match self {
            CpuProbe::Proc(_) => "proc",
            _ => "info",
        }
    }
}

/// Split `total` into `parts` shares that differ by at most one.
pub fn split(total: u64, parts: usize) -> Vec<u64> {
    let p = parts as u64;
    (0..p)
        .map(|i| total / p + u64::from(i < total % p))
        .collect()
}

/// Run one workload to completion.
pub fn run_test(
    a: &RunArgs,
    w: Workload,
    target: &Target,
    use_uring: bool,
    cpu: &mut CpuProbe,
    progress_line: bool,
) -> Result<TestResult, String> {
    let clients = a.clients as usize;
    let threads = (a.threads as usize).min(clients);
    let conns = split(clients as u64, threads);
    let requests = a.requests.unwrap_or(if a.duration.is_some() {
        u64::MAX
    } else {
        100_000
    });
    // Requests are dealt per connection, then summed per thread, so a
    // thread with more connections gets proportionally more work.
    let budgets: Vec<u64> = if requests == u64::MAX {
        vec![u64::MAX; threads]
    } else {
        let per_conn = split(requests, clients);
        let mut at = 0;
        conns
            .iter()
            .map(|&c| {
                let b = per_conn[at..at + c as usize].iter().sum();
                at += c as usize;
                b
            })
            .collect()
    };
    let labels: Vec<String> = w.templates.iter().map(|t| t.name.clone()).collect();
    let test = w.name.clone();
    let sh = Shared {
        target: target.clone(),
        verify: a.verify.then(|| VerifySet::new(a.keyspace)),
        workload: w,
        progress: progress_line.then(|| Progress::new(threads)),
        pipeline: a.pipeline as usize,
        data_size: a.data_size,
        pattern: a.key_pattern,
        keyspace: a.keyspace,
        rate: a.rate,
        total_conns: clients,
        duration_ns: a.duration.map(|d| d.as_nanos() as u64),
        timeout_ns: a.timeout.as_nanos() as u64,
        use_uring,
    };
    let server_before = cpu.read();
    let start = Barrier::new(threads + 1);
    let t0 = AtomicU64::new(0);
    let mut first_conn = 0usize;
    let mut key_start = 0u64;
    let mut plans = Vec::with_capacity(threads);
    for (t, (&c, &budget)) in conns.iter().zip(&budgets).enumerate() {
        plans.push(Plan {
            index: t,
            conns: c as usize,
            first_conn,
            budget,
            key_start: if budget == u64::MAX {
                a.keyspace / threads as u64 * t as u64
            } else {
                key_start
            },
            seed: a
                .seed
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .wrapping_add(t as u64 + 1),
        });
        first_conn += c as usize;
        key_start = key_start.wrapping_add(budget) % a.keyspace;
    }

    let (results, cpu0, started) = std::thread::scope(|s| {
        let handles: Vec<_> = plans
            .into_iter()
            .map(|p| {
                let (sh, start, t0) = (&sh, &start, &t0);
                std::thread::Builder::new()
                    .name(format!("bench-{}", p.index))
                    .spawn_scoped(s, move || worker::run(p, sh, start, t0))
                    .expect("spawn worker thread")
            })
            .collect();
        start.wait(); // everyone connected (or failed)
        let cpu0 = self_cpu_us();
        let started = now_ns();
        t0.store(started, Ordering::Release);
        start.wait(); // go
        let mut next_line = started + 1_000_000_000;
        let mut last_done = 0u64;
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(50));
            if let Some(p) = &sh.progress {
                let now = now_ns();
                if now >= next_line {
                    let done: u64 = p.done.iter().map(|d| d.load(Ordering::Relaxed)).sum();
                    let rate = (done - last_done) as f64
                        / ((now - next_line + 1_000_000_000) as f64 / 1e9);
                    last_done = done;
                    next_line = now + 1_000_000_000;
                    let mut h = new_histogram();
                    for slot in &p.snapshots {
                        if let Ok(g) = slot.lock() {
                            for x in g.iter().flatten() {
                                let _ = h.add(x);
                            }
                        }
                    }
                    let p99 = if h.is_empty() {
                        0.0
                    } else {
                        h.value_at_percentile(99.0) as f64 / 1000.0
                    };
                    let mut out = std::io::stdout().lock();
                    let _ = write!(
                        out,
                        "\r\x1b[K{test}: {done} done, {rate:.0} req/s, p99 so far {p99:.1} µs",
                        test = sh.workload.name
                    );
                    let _ = out.flush();
                }
            }
        }
        let results: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().expect("worker thread panicked"))
            .collect();
        (results, cpu0, started)
    });
    if sh.progress.is_some() {
        print!("\r\x1b[K");
        let _ = std::io::stdout().flush();
    }
    let client_cpu_us = self_cpu_us().saturating_sub(cpu0);
    let server_after = cpu.read();

    let mut merged = ThreadStats::new(labels.len());
    let mut end = started;
    for r in results {
        let r = r?;
        merged.merge(&r.stats);
        end = end.max(r.end_ns);
    }
    let server = match (server_before, server_after) {
        (Some(b), Some(a)) => Some(ServerCost {
            cpu_us: a.cpu_us.saturating_sub(b.cpu_us),
            commands: a.commands.zip(b.commands).map(|(a, b)| a.saturating_sub(b)),
            source: cpu.source(),
        }),
        _ => None,
    };
    Ok(TestResult {
        test,
        labels,
        stats: merged,
        elapsed_ns: end - started,
        client_cpu_us,
        server,
        threads,
        open_loop: a.rate.is_some(),
    })
}

/// Whether the live progress line is wanted: stdout is a terminal and the
/// output is for a person.
pub fn want_progress(a: &RunArgs) -> bool {
    !a.quiet && !a.json && std::io::stdout().is_terminal()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_fair_and_complete() {
        assert_eq!(split(10, 3), [4, 3, 3]);
        assert_eq!(split(2, 4), [1, 1, 0, 0]);
        assert_eq!(split(100_000, 50).iter().sum::<u64>(), 100_000);
    }
}
