//! `ringkv-bench evict`: how close a server's eviction comes to exact LRU
//! or LFU, in the manner of `redis-cli --lru-test`.
//!
//! 1. Set-up: CONFIG SET maxmemory 0, FLUSHALL, CONFIG SET the policy,
//!    samples and maxmemory (unless `--no-setup`).
//! 2. Fill: SET key 0, 1, 2, … (hottest first) in pipelined batches until
//!    INFO's `evicted_keys` grows; bounded by the keyspace and a timeout,
//!    so a server that never evicts is reported as such.
//! 3. Cycles: batches of GETs whose keys come from a seeded power-law (or
//!    Zipf) trace over a keyspace larger than what fits, each followed by
//!    a SET for every key the batch missed, until a cycle's count or time
//!    runs out. Warm-up cycles are shown but left out of the totals.
//! 4. Simulation: the same fill and the same trace, batch by batch,
//!    replayed on an exact LRU and an exact LFU cache whose capacity is the
//!    mean DBSIZE at the end of the measured cycles (the number of keys the
//!    server held once settled; DBSIZE right after the fill is the moment
//!    eviction began, a little above where it settles).
//!
//! [`trace`] draws keys, [`server`] talks to the server, [`sim`] holds the
//! exact caches, [`report`] prints text and JSON.

pub mod args;
pub mod report;
pub mod server;
pub mod sim;
pub mod trace;

use args::EvictArgs;
use server::{Client, Cycle, Fill};
use sim::{Counts, ExactLfu, ExactLru};
use std::io::Write as _;
use trace::TraceGen;

/// The exact simulations' results, per cycle.
#[derive(Debug)]
pub struct Sim {
    pub capacity: u64,
    pub capacity_source: &'static str,
    pub lru: Vec<Counts>,
    pub lfu: Vec<Counts>,
}

/// Everything one run measured.
#[derive(Debug)]
pub struct Outcome {
    /// As the server reports them after set-up (CONFIG GET; "?" if not).
    pub policy: String,
    pub samples: String,
    pub maxmemory: String,
    pub fill: Fill,
    pub cycles: Vec<Cycle>,
    pub sim: Option<Sim>,
}

impl Outcome {
    pub fn evicting(&self) -> bool {
        self.fill.evicted > 0
    }

    fn measured(&self) -> impl Iterator<Item = (usize, &Cycle)> {
        self.cycles.iter().enumerate().filter(|(_, c)| !c.warmup)
    }

    /// Server hits and misses over the measured cycles.
    pub fn server_total(&self) -> Counts {
        let mut t = Counts::default();
        for (_, c) in self.measured() {
            t.add(c.counts);
        }
        t
    }

    /// A simulation's hits and misses over the measured cycles.
    pub fn sim_total(&self, per_cycle: &[Counts]) -> Counts {
        let mut t = Counts::default();
        for (i, _) in self.measured() {
            t.add(per_cycle[i]);
        }
        t
    }

    /// The exact policy a server policy is measured against: LFU for the
    /// LFU policies, LRU for everything else (for `allkeys-random` it is
    /// the bar random eviction falls short of).
    pub fn reference_is_lfu(&self) -> bool {
        self.policy.ends_with("-lfu")
    }

    /// Server hit rate ÷ the reference simulation's, over measured cycles.
    pub fn ratio(&self) -> Option<f64> {
        let s = self.sim.as_ref()?;
        let r = if self.reference_is_lfu() {
            &s.lfu
        } else {
            &s.lru
        };
        Some(self.server_total().rate() / self.sim_total(r).rate())
    }
}

/// Mean DBSIZE at the end of the measured cycles, rounded.
fn settled_dbsize(cycles: &[Cycle]) -> u64 {
    let v: Vec<u64> = cycles
        .iter()
        .filter(|c| !c.warmup)
        .map(|c| c.dbsize)
        .collect();
    if v.is_empty() {
        return 0;
    }
    (v.iter().sum::<u64>() as f64 / v.len() as f64).round() as u64
}

fn write_trace(path: &std::path::Path, trace: &[u64]) -> Result<(), String> {
    let err = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    let f = std::fs::File::create(path).map_err(err)?;
    let mut w = std::io::BufWriter::new(f);
    for k in trace {
        writeln!(w, "{k}").map_err(err)?;
    }
    w.flush().map_err(err)
}

pub fn run(a: &EvictArgs) -> Result<i32, String> {
    let mut client = Client::connect(a)?;
    if !a.no_setup {
        client.setup(a)?;
    }
    let mut out = Outcome {
        policy: client.config("maxmemory-policy"),
        samples: client.config("maxmemory-samples"),
        maxmemory: client.config("maxmemory"),
        fill: Fill::default(),
        cycles: Vec::new(),
        sim: None,
    };
    out.fill = client.fill(a)?;
    if !a.json {
        eprintln!(
            "fill: {} keys in {:.2} s, stopped: {}",
            out.fill.keys, out.fill.seconds, out.fill.stop
        );
    }
    if out.evicting() {
        let mut keys = TraceGen::new(a.key_dist, a.keyspace, a.seed);
        let mut trace = Vec::new();
        for i in 0..a.warmup + a.cycles {
            let c = client.cycle(a, &mut keys, &mut trace, i < a.warmup)?;
            if !a.json {
                eprintln!(
                    "cycle {}: {} GETs, hit rate {:.4}, DBSIZE {}, {:.2} s",
                    i + 1,
                    c.requests,
                    c.counts.rate(),
                    c.dbsize,
                    c.seconds
                );
            }
            out.cycles.push(c);
        }
        let (capacity, capacity_source) = match a.sim_capacity {
            Some(c) => (c, "--sim-capacity"),
            None => (
                settled_dbsize(&out.cycles),
                "mean DBSIZE at the end of the measured cycles",
            ),
        };
        let per: Vec<usize> = out.cycles.iter().map(|c| c.requests as usize).collect();
        let p = a.pipeline as usize;
        let cap = capacity as usize;
        out.sim = Some(Sim {
            capacity,
            capacity_source,
            lru: sim::replay(&mut ExactLru::new(cap), out.fill.keys, &trace, &per, p),
            lfu: sim::replay(&mut ExactLfu::new(cap), out.fill.keys, &trace, &per, p),
        });
        if let Some(path) = &a.trace_out {
            write_trace(path, &trace)?;
        }
    }
    if a.json {
        print!("{}", report::json(a, &out));
    } else {
        print!("{}", report::text(a, &out));
    }
    Ok(0)
}
