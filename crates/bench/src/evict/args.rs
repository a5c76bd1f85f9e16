//! Flags of `ringkv-bench evict`.

use super::trace::KeyDist;
use crate::cli::parse_duration;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
pub struct EvictArgs {
    /// Server host (loopback by default; the test fills the server's memory).
    #[arg(short = 'H', long, default_value = "127.0.0.1")]
    pub host: String,
    #[arg(short = 'p', long, default_value_t = 6379)]
    pub port: u16,
    /// Password (AUTH).
    #[arg(short = 'a', long)]
    pub auth: Option<String>,
    /// maxmemory-policy to CONFIG SET (allkeys-lru, allkeys-lfu, allkeys-random...).
    #[arg(long, default_value = "allkeys-lru")]
    pub policy: String,
    /// maxmemory to CONFIG SET (bytes, or with a unit: 32mb).
    #[arg(long, default_value = "32mb")]
    pub maxmemory: String,
    /// maxmemory-samples to CONFIG SET [default: leave the server's].
    #[arg(long)]
    pub samples: Option<u32>,
    /// Do not CONFIG SET or FLUSHALL: use the server as it is configured
    /// (it must be empty, or hold none of the test's keys).
    #[arg(long = "no-setup")]
    pub no_setup: bool,
    /// Keys are key:000000000000 .. key:(keyspace-1); should be several
    /// times what fits in maxmemory.
    #[arg(short = 'r', long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=999_999_999_999))]
    pub keyspace: u64,
    /// Key distribution: powerlaw[:A] (redis-cli --lru-test's skew, A = 6.2)
    /// or zipf[:S] (S = 0.99). Key 0 is the hottest.
    #[arg(long = "key-dist", default_value = "powerlaw:6.2", value_parser = KeyDist::parse)]
    pub key_dist: KeyDist,
    /// Value size in bytes.
    #[arg(short = 'd', long = "data-size", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub data_size: u64,
    /// Requests per pipelined batch (redis-cli --lru-test uses 250).
    #[arg(short = 'P', long, default_value_t = 250, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub pipeline: u32,
    /// Cap on GETs per second (0: as fast as the server answers). An LRU
    /// with Valkey's one-second clock sees more ties the faster the
    /// requests come, so servers are compared on LRU at the same rate.
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
    /// Measured cycles (after the warm-up ones).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub cycles: u32,
    /// Warm-up cycles: run and reported, but not in the overall numbers.
    /// The fill leaves the cache holding the keys 0..fill, not what the
    /// trace keeps hot; at the defaults redis's hit rate took about 8
    /// cycles to settle.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub warmup: u32,
    /// GETs per cycle (a cycle also ends at --cycle-time).
    #[arg(long = "cycle-requests", default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub cycle_requests: u64,
    /// Longest cycle; it ends at the first batch boundary after this.
    #[arg(long = "cycle-time", default_value = "5s", value_parser = parse_duration)]
    pub cycle_time: Duration,
    /// Give up filling after this long (a server that never evicts).
    #[arg(long = "fill-timeout", default_value = "60s", value_parser = parse_duration)]
    pub fill_timeout: Duration,
    /// Stop filling after this many keys [default: the keyspace].
    #[arg(long = "fill-max-keys")]
    pub fill_max_keys: Option<u64>,
    /// Seed of the request trace: same seed, same trace.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Capacity of the exact simulations [default: mean DBSIZE at the end
    /// of the measured cycles].
    #[arg(long = "sim-capacity")]
    pub sim_capacity: Option<u64>,
    /// Write the trace (one key index per line, fill excluded) to this file.
    #[arg(long = "trace-out")]
    pub trace_out: Option<PathBuf>,
    /// Connect/reply timeout.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Print one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}
