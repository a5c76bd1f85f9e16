//! Command line. Flags follow redis-benchmark where it has them (`-c`, `-n`,
//! `-d`, `-P`, `-t`, `-p`, `-a`, `-q`), except the host: clap keeps `-h`
//! for help, so the host is `-H`/`--host`.

use crate::keygen::KeyPattern;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "ringkv-bench",
    version,
    about = "io_uring load generator for RESP servers (ringkv, Valkey, Redis) that reports latency as a distribution",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Overlay distributions from --histogram-out files (or saved
    /// redis-benchmark output) in one SVG; with --vs-load, latency against
    /// offered load from bench/latency.sh's table of runs.
    Plot {
        /// Percentile tables written by --histogram-out, or redis-benchmark
        /// output; with --vs-load, tables of runs (bench/latency.sh RAW_OUT).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Latency against load: x is the `rate` column, y the median over
        /// runs of the column named here (p50, p90, p99, p999, max).
        #[arg(long = "vs-load", value_name = "COLUMN")]
        vs_load: Option<String>,
        #[arg(short = 'o', long)]
        out: PathBuf,
        #[arg(long, default_value = "latency by percentile")]
        title: String,
        /// Logarithmic latency axis.
        #[arg(long = "log-y")]
        log_y: bool,
    },
    /// Eviction quality: fill a server with maxmemory until it evicts,
    /// then GET (SET on a miss) keys of a seeded power-law trace, and set
    /// its hit rate beside exact LRU and LFU simulations of the same trace.
    Evict(Box<crate::evict::args::EvictArgs>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum IoMode {
    /// io_uring if this kernel allows it, else epoll (one line says why).
    Auto,
    /// io_uring or fail.
    Yes,
    /// epoll.
    No,
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Server host.
    #[arg(short = 'H', long, default_value = "127.0.0.1")]
    pub host: String,
    #[arg(short = 'p', long, default_value_t = 6379)]
    pub port: u16,
    /// Worker threads, each with its own io_uring (or epoll) and connections.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: u32,
    /// Connections in total, spread over the threads.
    #[arg(short = 'c', long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub clients: u32,
    /// Requests in flight per connection.
    #[arg(short = 'P', long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub pipeline: u32,
    /// Requests per test [default: 100000 unless --duration].
    #[arg(short = 'n', long, conflicts_with = "duration")]
    pub requests: Option<u64>,
    /// Run each test this long instead (`10`, `10s`, `500ms`, `2m`).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Value size in bytes for SET, LPUSH, HSET, MSET.
    #[arg(short = 'd', long = "data-size", default_value_t = 3)]
    pub data_size: usize,
    /// Keys are key:000000000000 .. key:(keyspace-1), 12 digits as redis-benchmark -r.
    #[arg(long, short = 'r', default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..=999_999_999_999))]
    pub keyspace: u64,
    /// uniform, sequential, zipf or zipf:S (exponent, default 0.99), gaussian or gaussian:SD.
    #[arg(long = "key-pattern", default_value = "uniform", value_parser = KeyPattern::parse)]
    pub key_pattern: KeyPattern,
    /// SET:GET ratio of the `mixed` test.
    #[arg(long, default_value = "1:10", value_parser = parse_ratio)]
    pub ratio: (u32, u32),
    /// Comma-separated tests: ping,set,get,incr,lpush,rpop,sadd,hset,zadd,mset,mixed.
    #[arg(short = 't', long, value_delimiter = ',')]
    pub tests: Vec<String>,
    /// Open loop: this many requests per second overall, latency measured
    /// from each request's intended send time.
    #[arg(long)]
    pub rate: Option<f64>,
    #[arg(long = "io-uring", value_enum, default_value_t = IoMode::Auto)]
    pub io_uring: IoMode,
    /// Check that GET returns what this tool SET for the key.
    #[arg(long)]
    pub verify: bool,
    /// Print results as one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
    /// Write the full percentile distribution (HdrHistogram text format).
    #[arg(long = "histogram-out")]
    pub histogram_out: Option<PathBuf>,
    /// Draw latency by percentile to this SVG file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Logarithmic latency axis for --plot.
    #[arg(long = "log-y")]
    pub log_y: bool,
    /// Read server CPU from /proc/PID/stat instead of INFO.
    #[arg(long = "server-pid")]
    pub server_pid: Option<u32>,
    /// Password (AUTH, or HELLO ... AUTH default with --resp 3).
    #[arg(short = 'a', long)]
    pub auth: Option<String>,
    /// Protocol to negotiate with HELLO (nothing is sent unless given).
    #[arg(long, value_parser = clap::value_parser!(u8).range(2..=3))]
    pub resp: Option<u8>,
    /// Only the summary lines.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Give up on a connection that has had requests in flight this long
    /// with no reply; also the connect and reconnect timeout.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Seed for key generators (each thread derives its own).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Skip the INFO calls that measure server CPU.
    #[arg(long = "no-server-cpu")]
    pub no_server_cpu: bool,
    /// Custom command after `--`: `-- SET key:__rand_key__ __data__`.
    #[arg(last = true)]
    pub template: Vec<String>,
}

/// `10`, `10s`, `250ms`, `2m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, mult) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num.parse().map_err(|_| format!("bad duration {s:?}"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("duration must be > 0: {s:?}"));
    }
    Ok(Duration::from_secs_f64(v * mult))
}

/// `SET:GET`, e.g. `1:10`.
pub fn parse_ratio(s: &str) -> Result<(u32, u32), String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("ratio must be SET:GET, got {s:?}"))?;
    let a = a.parse().map_err(|_| format!("bad ratio {s:?}"))?;
    let b = b.parse().map_err(|_| format!("bad ratio {s:?}"))?;
    if a == 0 && b == 0 {
        return Err("ratio 0:0 sends nothing".into());
    }
    Ok((a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("ringkv-bench").chain(args.iter().copied()))
    }

    #[test]
    fn defaults_match_redis_benchmark() {
        let c = parse(&[]).unwrap();
        let r = c.run;
        assert_eq!(
            (r.host.as_str(), r.port, r.clients, r.pipeline, r.data_size),
            ("127.0.0.1", 6379, 50, 1, 3)
        );
        assert_eq!(r.requests, None);
        assert_eq!(r.io_uring, IoMode::Auto);
        assert!(r.tests.is_empty() && r.template.is_empty());
    }

    #[test]
    fn full_command_line() {
        let c = parse(&[
            "-H",
            "10.0.0.1",
            "-p",
            "7000",
            "--threads",
            "2",
            "-c",
            "8",
            "-P",
            "16",
            "-n",
            "1000",
            "-d",
            "100",
            "--keyspace",
            "500",
            "--key-pattern",
            "zipf:1.1",
            "--ratio",
            "1:3",
            "-t",
            "get,set",
            "--rate",
            "5000",
            "--io-uring",
            "no",
            "--verify",
            "--json",
            "--resp",
            "3",
            "--timeout",
            "250ms",
        ])
        .unwrap();
        let r = c.run;
        assert_eq!(r.host, "10.0.0.1");
        assert_eq!((r.port, r.threads, r.clients, r.pipeline), (7000, 2, 8, 16));
        assert_eq!(r.requests, Some(1000));
        assert_eq!(r.key_pattern, KeyPattern::Zipf(1.1));
        assert_eq!(r.ratio, (1, 3));
        assert_eq!(r.tests, ["get", "set"]);
        assert_eq!(r.rate, Some(5000.0));
        assert_eq!(r.io_uring, IoMode::No);
        assert!(r.verify && r.json);
        assert_eq!(r.resp, Some(3));
        assert_eq!(r.timeout, Duration::from_millis(250));
    }

    #[test]
    fn template_after_double_dash() {
        let c = parse(&["-n", "10", "--", "SET", "key:__rand_key__", "__data__"]).unwrap();
        assert_eq!(c.run.template, ["SET", "key:__rand_key__", "__data__"]);
    }

    #[test]
    fn plot_subcommand() {
        let c = parse(&["plot", "a.hgrm", "b.hgrm", "-o", "cmp.svg"]).unwrap();
        match c.command {
            Some(Command::Plot { files, out, .. }) => {
                assert_eq!(files, [PathBuf::from("a.hgrm"), PathBuf::from("b.hgrm")]);
                assert_eq!(out, PathBuf::from("cmp.svg"));
            }
            _ => panic!("not the plot subcommand"),
        }
        assert!(parse(&["plot", "-o", "x.svg"]).is_err(), "plot needs files");
    }

    #[test]
    fn evict_subcommand() {
        let c = parse(&[
            "evict",
            "-p",
            "7000",
            "--policy",
            "allkeys-lfu",
            "--samples",
            "10",
            "--key-dist",
            "zipf:1.1",
            "--cycles",
            "3",
        ])
        .unwrap();
        let Some(Command::Evict(e)) = c.command else {
            panic!("not evict")
        };
        assert_eq!(
            (e.port, e.policy.as_str(), e.samples),
            (7000, "allkeys-lfu", Some(10))
        );
        assert_eq!(e.key_dist, crate::evict::trace::KeyDist::Zipf(1.1));
        assert_eq!((e.cycles, e.warmup, e.pipeline), (3, 8, 250));
        assert!(parse(&["evict", "--key-dist", "uniform"]).is_err());
        assert!(parse(&["evict", "-P", "0"]).is_err());
    }

    #[test]
    fn rejects_bad_values() {
        assert!(parse(&["-n", "5", "--duration", "2s"]).is_err());
        assert!(parse(&["--key-pattern", "pareto"]).is_err());
        assert!(parse(&["--ratio", "3"]).is_err());
        assert!(parse(&["-c", "0"]).is_err());
        assert!(parse(&["--resp", "4"]).is_err());
        assert!(parse(&["--io-uring", "maybe"]).is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("20ms"), Ok(Duration::from_millis(20)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("x").is_err());
    }
}
