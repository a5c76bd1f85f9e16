//! One worker thread: connect its share of the connections, wait for the
//! start signal, run one event loop (io_uring or epoll) until its share of
//! the requests is answered, hand back its statistics.

use crate::conn::{Conn, Ctx, State, VerifySet};
use crate::keygen::{KeyGen, KeyPattern};
use crate::stats::ThreadStats;
use crate::sys::{Blocking, Target, now_ns};
use crate::workload::Workload;
use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};

/// How often timeouts are checked and progress is published.
pub const TICK_NS: u64 = 100_000_000;

/// Read-only state every worker of one test shares.
pub struct Shared {
    pub target: Target,
    pub workload: Workload,
    pub verify: Option<VerifySet>,
    pub progress: Option<Progress>,
    pub pipeline: usize,
    pub data_size: usize,
    pub pattern: KeyPattern,
    pub keyspace: u64,
    /// Open loop: requests per second over all connections.
    pub rate: Option<f64>,
    pub total_conns: usize,
    /// Issue nothing after this long (ns after the start).
    pub duration_ns: Option<u64>,
    pub timeout_ns: u64,
    pub use_uring: bool,
}

/// Live numbers for the progress line.
pub struct Progress {
    pub done: Vec<AtomicU64>,
    pub snapshots: Vec<Mutex<Option<Vec<Histogram<u64>>>>>,
}

impl Progress {
    pub fn new(threads: usize) -> Self {
        Progress {
            done: (0..threads).map(|_| AtomicU64::new(0)).collect(),
            snapshots: (0..threads).map(|_| Mutex::new(None)).collect(),
        }
    }
}

/// What one worker is given.
pub struct Plan {
    pub index: usize,
    pub conns: usize,
    /// Global index of this worker's first connection (open-loop stagger).
    pub first_conn: usize,
    pub budget: u64,
    pub key_start: u64,
    pub seed: u64,
}

pub struct WorkerResult {
    pub stats: ThreadStats,
    /// When the last reply was handled.
    pub end_ns: u64,
}

/// Connect, meet the others at `start`, run, return the statistics.
pub fn run(
    plan: Plan,
    sh: &Shared,
    start: &Barrier,
    t0: &AtomicU64,
) -> Result<WorkerResult, String> {
    if sh.rate.is_some() {
        // Open loop sleeps until intended send times; the default 50 µs
        // timer slack would show up as lateness.
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    }
    let prepared = prepare(&plan, sh);
    // Twice: once when all are connected (the main thread then takes the
    // start time and CPU reading), once to go.
    start.wait();
    start.wait();
    let (conns, ring) = prepared?;
    let t0 = t0.load(Ordering::Acquire);
    let mut ctx = Ctx {
        workload: &sh.workload,
        keys: KeyGen::new(sh.pattern, sh.keyspace, plan.seed, plan.key_start),
        stats: ThreadStats::new(sh.workload.templates.len()),
        budget: plan.budget,
        deadline: sh.duration_ns.map_or(u64::MAX, |d| t0 + d),
        seq: 0,
        data_size: sh.data_size,
        pipeline: sh.pipeline,
        interval: sh
            .rate
            .map(|r| (sh.total_conns as f64 * 1e9 / r).max(1.0) as u64),
        verify: sh.verify.as_ref(),
        done: 0,
    };
    let mut conns = conns;
    if let Some(r) = sh.rate {
        let gap = 1e9 / r;
        for (j, c) in conns.iter_mut().enumerate() {
            c.next_due = t0 + ((plan.first_conn + j) as f64 * gap) as u64;
        }
    }
    let mut lp = Loop {
        conns,
        index: plan.index,
        sh,
        next_tick: t0 + TICK_NS,
        next_snapshot: t0 + 1_000_000_000,
    };
    let end = match ring {
        Some(ring) => crate::uring::run(ring, &mut lp, &mut ctx),
        None => crate::epoll::run(&mut lp, &mut ctx),
    }?;
    if let Some(p) = &sh.progress {
        p.done[plan.index].store(ctx.done, Ordering::Relaxed);
    }
    Ok(WorkerResult {
        stats: ctx.stats,
        end_ns: end,
    })
}

type Prepared = (Vec<Conn>, Option<io_uring::IoUring>);

fn prepare(plan: &Plan, sh: &Shared) -> Result<Prepared, String> {
    let ring = if sh.use_uring {
        Some(crate::uring::new_ring(plan.conns)?)
    } else {
        None
    };
    let mut conns = Vec::with_capacity(plan.conns);
    for _ in 0..plan.conns {
        let fd = Blocking::connect(&sh.target)?.into_fd()?;
        conns.push(Conn::new(fd, sh.pipeline));
    }
    Ok((conns, ring))
}

/// The parts of a worker both event loops share.
pub struct Loop<'a> {
    pub conns: Vec<Conn>,
    pub index: usize,
    pub sh: &'a Shared,
    pub next_tick: u64,
    next_snapshot: u64,
}

impl Loop<'_> {
    /// Nothing more to issue and nothing in flight.
    pub fn finished(&self, ctx: &Ctx<'_>, now: u64) -> bool {
        ctx.exhausted(now)
            && self
                .conns
                .iter()
                .all(|c| c.state != State::Open || c.in_flight() == 0)
    }

    /// Every [`TICK_NS`]: connections that have waited too long for a reply
    /// (returned, for the loop to fail them), and the progress numbers.
    pub fn tick(&mut self, ctx: &Ctx<'_>, now: u64) -> Vec<usize> {
        self.next_tick = now + TICK_NS;
        let timeout = self.sh.timeout_ns;
        let stale = self
            .conns
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                c.state == State::Open
                    && c.in_flight() > 0
                    && now.saturating_sub(c.last_progress) > timeout
            })
            .map(|(i, _)| i)
            .collect();
        if let Some(p) = &self.sh.progress {
            p.done[self.index].store(ctx.done, Ordering::Relaxed);
            if now >= self.next_snapshot {
                self.next_snapshot = now + 1_000_000_000;
                if let Ok(mut slot) = p.snapshots[self.index].lock() {
                    *slot = Some(ctx.stats.hist.clone());
                }
            }
        }
        stale
    }

    /// When the loop must wake up even with no completions.
    pub fn wake_at(&self, ctx: &Ctx<'_>, now: u64) -> u64 {
        let mut at = self.next_tick;
        if !ctx.exhausted(now) {
            // Past the deadline only replies are awaited: no reason to wake.
            at = at.min(ctx.deadline);
        }
        if ctx.interval.is_some() && !ctx.exhausted(now) {
            for c in &self.conns {
                if c.state == State::Open && c.in_flight() < ctx.pipeline {
                    at = at.min(c.next_due);
                }
            }
        }
        at
    }

    pub fn report_failure(&self, ctx: &mut Ctx<'_>, i: usize, reason: &str) {
        eprintln!(
            "ringkv-bench: thread {} connection {i}: {reason}",
            self.index
        );
        ctx.stats.conn_failures += 1;
    }

    /// Open a new socket for connection `i` after a failure, unless the run
    /// is over. An error here ends the run: the server is gone.
    pub fn reconnect(&mut self, ctx: &mut Ctx<'_>, i: usize, now: u64) -> Result<bool, String> {
        let c = &mut self.conns[i];
        if ctx.exhausted(now) {
            c.state = State::Dead;
            return Ok(false);
        }
        let fd = Blocking::connect(&self.sh.target)
            .and_then(|b| b.into_fd())
            .map_err(|e| format!("connection lost and reconnecting failed: {e}"))?;
        c.fd = fd;
        c.generation = c.generation.wrapping_add(1);
        c.state = State::Open;
        c.last_progress = now_ns();
        // Open loop: requests that fell due meanwhile keep their intended
        // times, so the outage shows up as latency.
        ctx.stats.reconnects += 1;
        eprintln!(
            "ringkv-bench: thread {} connection {i}: reconnected",
            self.index
        );
        Ok(true)
    }
}

/// Connections with something to do this iteration, each listed once.
pub struct Dirty {
    pub list: Vec<usize>,
    pub mark: Vec<bool>,
}

impl Dirty {
    pub fn all(n: usize) -> Self {
        Dirty {
            list: (0..n).collect(),
            mark: vec![true; n],
        }
    }

    #[inline]
    pub fn add(&mut self, i: usize) {
        if !self.mark[i] {
            self.mark[i] = true;
            self.list.push(i);
        }
    }
}
