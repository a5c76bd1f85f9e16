//! Active defragmentation (`activedefrag`): once the allocator holds
//! enough free space inside partly used slabs, walk the keyspace and move
//! keys out of the emptiest slabs so that those empty and their pages go
//! back to the OS.
//!
//! ```text
//!  cron, once a second (and at once after a setting changed):
//!    fragmentation = free bytes in small slabs ÷ allocated bytes
//!    ≥ active-defrag-threshold-lower and ≥ active-defrag-ignore-bytes
//!      ─► run at a CPU share interpolated between active-defrag-cycle-min
//!         (at the lower threshold) and -cycle-max (at the upper one);
//!         a run's share only rises while it lasts
//!  background step, when due: one slice of active-defrag-cycle-us µs of a
//!    SCAN-cursor walk over the databases, each key's blocks offered to
//!    the allocator (store::defrag) with the insides of its collection
//!    (tables, quicklist nodes, sorted-set members, stream blocks); those
//!    of more than active-defrag-max-scan-fields items walked apart, a
//!    few a step, before the walk goes on; the next slice after
//!    cycle-us × (100 − share) ÷ share, so the run takes its share
//!  the walk ends ─► log, stop, and check again at once
//! ```
//!
//! Which block moves is the allocator's call ([`crate::AllocatorOps`]'s
//! `relocate`; without one nothing runs). Nothing moves while a load fills
//! the dataset or a snapshot (BGSAVE, an AOF rewrite, a replica's full
//! sync) is under way: Valkey does not defragment while a child process
//! shares its pages either.

use std::time::{Duration, Instant};

use store::{DefragCounts, LaterCursor};

use crate::config::ActiveDefragConfig;
use crate::log;
use crate::server::{MemoryStats, Server};

/// How often a stopped defragmenter looks at the fragmentation.
const CHECK_EVERY: Duration = Duration::from_secs(1);
/// Walk steps (one bucket chain each) between clock reads in a slice.
const STEPS_PER_CLOCK_READ: u32 = 8;

/// The defragmenter's state: the run under way and Valkey's counters.
#[derive(Debug, Default)]
pub struct ActiveDefrag {
    /// The run's CPU share, percent; 0 when none runs (INFO
    /// `active_defrag_running`).
    pub running: u32,
    /// Blocks and keys moved or left, since start or CONFIG RESETSTAT.
    pub counts: DefragCounts,
    /// The settings the last check saw (a change is checked at once).
    seen: Option<ActiveDefragConfig>,
    next_check: Option<Instant>,
    next_slice: Option<Instant>,
    /// Where the walk is: database and SCAN cursor, and whether that
    /// database's walk is done (the next step moves on to the next one,
    /// once its large collections are walked).
    db: usize,
    cursor: u64,
    db_done: bool,
    /// Large collections met in this database whose insides are walked
    /// apart, a step at a time (the last one first), and that walk's
    /// cursor.
    later: Vec<Box<[u8]>>,
    later_cursor: LaterCursor,
    /// The walk's start, and the blocks moved before it (for its log line).
    walk_started: Option<(Instant, u64)>,
    /// While a run lasts, since when (INFO `current_active_defrag_time`).
    running_since: Option<Instant>,
    /// Time of the runs that ended, µs.
    total_us: u64,
}

impl ActiveDefrag {
    /// INFO `current_active_defrag_time`, ms.
    pub fn current_ms(&self) -> u64 {
        self.current_us() / 1000
    }
    /// INFO `total_active_defrag_time`, ms (the run under way included).
    pub fn total_ms(&self) -> u64 {
        (self.total_us + self.current_us()) / 1000
    }
    fn current_us(&self) -> u64 {
        self.running_since
            .map_or(0, |t| t.elapsed().as_micros() as u64)
    }
    /// CONFIG RESETSTAT.
    pub fn reset_stats(&mut self) {
        self.counts = DefragCounts::default();
        self.total_us = 0;
        if self.running_since.is_some() {
            self.running_since = Some(Instant::now());
        }
    }

    /// Back to the start of the keyspace.
    fn rewind(&mut self) {
        self.db = 0;
        self.cursor = 0;
        self.db_done = false;
        self.later.clear();
        self.later_cursor = 0;
    }

    /// Book a run's time when it starts or stops.
    fn settle_time(&mut self) {
        match (self.running > 0, self.running_since) {
            (true, None) => self.running_since = Some(Instant::now()),
            (false, Some(t)) => {
                self.total_us += t.elapsed().as_micros() as u64;
                self.running_since = None;
            }
            _ => {}
        }
    }

    /// End the run and forget the walk (the walk is done, or the setting
    /// was turned off).
    fn stop(&mut self) {
        self.running = 0;
        self.rewind();
        self.walk_started = None;
        self.next_slice = None;
        self.settle_time();
    }
}

/// Whether keys may move now: not during a load, nor while a snapshot
/// (BGSAVE, an AOF rewrite, a replica's full sync) is under way: its walk
/// reads a frozen database between steps, and Valkey does not defragment
/// while a child process exists either.
fn may_move(srv: &Server) -> bool {
    !srv.persist.is_loading()
        && srv.persist.snapshot.is_none()
        && srv.aof.rewrite.is_none()
        && srv.repl.feeds.snapshot.is_none()
        && srv.keyspace.dbs.iter().all(|d| d.frozen_index().is_none())
}

/// Cron's part: start, stop or speed up a run.
pub fn cron(srv: &mut Server) {
    let cfg = srv.config.active_defrag;
    if !cfg.enabled {
        if srv.defrag.running > 0 {
            srv.defrag.stop();
        }
        srv.defrag.seen = Some(cfg);
        return;
    }
    if srv.allocator_ops.and_then(|o| o.relocate).is_none() || !may_move(srv) {
        return;
    }
    let now = Instant::now();
    let changed = srv.defrag.seen != Some(cfg);
    if changed || srv.defrag.next_check.is_none_or(|t| now >= t) {
        srv.defrag.seen = Some(cfg);
        srv.defrag.next_check = Some(now + CHECK_EVERY);
        decide(srv, changed);
    }
}

/// Valkey's computeDefragCycles: whether to run, and at what share.
fn decide(srv: &mut Server, reconsider: bool) {
    let m = srv.memory();
    decide_from(srv, &m, reconsider);
}

/// [`decide`] from allocator figures already read.
fn decide_from(srv: &mut Server, m: &MemoryStats, reconsider: bool) {
    let cfg = srv.config.active_defrag;
    let Some((frag_bytes, frag_pct)) = fragmentation(m) else {
        return;
    };
    let d = &mut srv.defrag;
    if d.running == 0
        && (frag_pct < f64::from(cfg.threshold_lower) || frag_bytes < cfg.ignore_bytes)
    {
        return;
    }
    let (lo, hi) = (
        f64::from(cfg.threshold_lower),
        f64::from(cfg.threshold_upper),
    );
    let (cmin, cmax) = (cfg.cycle_min, cfg.cycle_max);
    let share = if hi > lo {
        f64::from(cmin) + (frag_pct - lo) * (f64::from(cmax) - f64::from(cmin)) / (hi - lo)
    } else {
        f64::from(cmax)
    };
    let share = (share as i64).clamp(i64::from(cmin), i64::from(cmax.max(cmin))) as u32;
    if share > d.running || reconsider {
        if d.running == 0 {
            d.walk_started = Some((Instant::now(), d.counts.hits));
            d.next_slice = Some(Instant::now());
        }
        d.running = share;
        d.settle_time();
        log::verbose(&format!(
            "Starting active defrag, frag={frag_pct:.0}%, frag_bytes={frag_bytes}, cpu={share}%"
        ));
    }
}

/// How soon [`step`] wants to run again, while a run is under way.
pub fn wait(srv: &Server) -> Option<Duration> {
    let d = &srv.defrag;
    if d.running == 0 || !may_move(srv) {
        return None;
    }
    let at = d.next_slice?;
    Some(at.saturating_duration_since(Instant::now()))
}

/// One slice of the walk, when due.
pub fn step(srv: &mut Server) {
    let d = &srv.defrag;
    if d.running == 0 || d.next_slice.is_none_or(|t| Instant::now() < t) || !may_move(srv) {
        return;
    }
    let Some(relocate) = srv.allocator_ops.and_then(|o| o.relocate) else {
        return;
    };
    let cfg = srv.config.active_defrag;
    let slice = Duration::from_micros(u64::from(cfg.cycle_us.max(1)));
    let max_scan_fields = usize::try_from(cfg.max_scan_fields).unwrap_or(usize::MAX);
    let start = Instant::now();
    let deadline = start + slice;
    let watch = srv.latency_watch();
    let mut steps = 0u32;
    let walked_all = loop {
        let d = &mut srv.defrag;
        let Some(db) = srv.keyspace.dbs.get_mut(d.db) else {
            break true;
        };
        if let Some(key) = d.later.last() {
            d.later_cursor = db.defrag_later_step(key, d.later_cursor, relocate, &mut d.counts);
            if d.later_cursor == 0 {
                d.later.pop();
            }
        } else if d.db_done {
            d.db += 1;
            d.db_done = false;
        } else {
            d.cursor = db.defrag_step(
                d.cursor,
                relocate,
                &mut d.counts,
                max_scan_fields,
                &mut d.later,
            );
            d.db_done = d.cursor == 0;
        }
        steps += 1;
        if steps.is_multiple_of(STEPS_PER_CLOCK_READ) && Instant::now() >= deadline {
            break false;
        }
    };
    let now_ms = srv.now_ms();
    srv.latency_event_since(watch, "active-defrag-cycle", now_ms);
    if walked_all {
        finish_walk(srv);
        return;
    }
    let d = &mut srv.defrag;
    let took = start.elapsed();
    let share = d.running.clamp(1, 100);
    let rest = took * (100 - share) / share;
    d.next_slice = Some(Instant::now() + rest);
}

/// The walk covered every database: log it, stop, and see whether another
/// is needed.
fn finish_walk(srv: &mut Server) {
    let d = &mut srv.defrag;
    let (started, hits_before) = d
        .walk_started
        .take()
        .unwrap_or((Instant::now(), d.counts.hits));
    let moved = d.counts.hits - hits_before;
    d.stop();
    let m = srv.memory();
    let (frag_bytes, frag_pct) = fragmentation(&m).unwrap_or((0, 0.0));
    log::verbose(&format!(
        "Active defrag done in {}ms, reallocated={moved}, frag={frag_pct:.0}%, frag_bytes={frag_bytes}",
        started.elapsed().as_millis(),
    ));
    decide_from(srv, &m, false);
}

/// Free bytes in small slabs, and their share of allocated bytes in
/// percent, when the allocator tells.
fn fragmentation(m: &MemoryStats) -> Option<(u64, f64)> {
    let bytes = m.frag_smallbins?;
    Some((bytes, bytes as f64 * 100.0 / m.allocated.max(1) as f64))
}
