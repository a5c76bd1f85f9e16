//! The execution thread alone (issue 5): `Engine::execute_batch` on
//! pre-parsed batches, no sockets.
//!
//! ```text
//! cargo bench -p ringkv-engine --bench exec_batch -- --warm-up-time 2 --measurement-time 5
//! RINGKV_BENCH_KEYS=1000000 cargo bench -p ringkv-engine --bench exec_batch   # smaller table
//! ```
//!
//! The keyspace holds RINGKV_BENCH_KEYS (default 10,000,000) keys of
//! 512-byte values, loaded through the batch path. Each measured batch is
//! what an IO loop hands over at `-P 16` with 50 connections: 50 jobs of 16
//! pipelined GETs (or SETs) of uniformly random keys, so nearly every
//! lookup misses the CPU caches. 64 different batches are cycled so no
//! batch's keys are warm. Before each batch, untimed, its request bytes
//! are read once: in the server the IO thread has just received and
//! parsed them, so they are in the cache, not in DRAM as 64 cycled batches
//! (29 MB of requests at SET) would otherwise leave them.
//! RINGKV_BENCH_COLD_INPUT=1 skips that (the numbers in BENCHMARKS.md
//! before 2026-11-24). Variants: `prefetch-batch-max-size` 16 (default)
//! and 0 (no prefetching). Throughput is commands per second. jemalloc,
//! as in ringkv-server. RINGKV_BENCH_CPU_TIME=1 measures the thread's CPU
//! time instead of wall time (for a machine shared with other work).
//! RINGKV_BENCH_PREFETCH="8 16 32" picks the prefetch-batch-max-size
//! values to run (default "16 0").
//! `_RJEM_MALLOC_CONF=thp:always,metadata_thp:auto` puts the heap on
//! transparent huge pages, as ringkv-server's `disable-thp no` does.
//! Each command carries the hint (table entry, key hash) an IO thread
//! works out while parsing; RINGKV_BENCH_NO_HINTS=1 leaves them out, so
//! the execution thread reads every request to work them out itself.
//! RINGKV_BENCH_CONFIG="latency-tracking no" applies settings (name value
//! pairs) to the engine. RINGKV_BENCH_EFFECTS=1 records the write-effects
//! stream, as a server with an AOF or a replica does: each batch is
//! committed, and what it appended is read between batches, untimed (a
//! consumer thread reads it in the server).

mod support;

use criterion::{Criterion, Throughput};
use resp::ReplyBuf;
use ringkv_engine::{ClientId, Config, Engine};
use std::hint::black_box;
use support::{Input, Rng};

#[global_allocator]
static GLOBAL: ringkv_alloc::CountingJemalloc = ringkv_alloc::CountingJemalloc;

const CLIENTS: usize = 50;
const PIPELINE: usize = 16;
const BATCHES: usize = 64;

fn key(i: u64) -> String {
    format!("key:{i:012}")
}

fn run(e: &mut Engine, clients: &[ClientId], inputs: &[Input], outs: &mut [ReplyBuf], hints: bool) {
    support::run_batch(e, clients, inputs, outs, hints);
}

/// Read every line of a batch's input (bytes, spans, argc, hints), as the
/// IO thread's recv into its buffer and its parse have just done when a
/// batch reaches the execution thread. Untimed.
fn warm(batch: &[Input]) {
    for inp in batch {
        black_box(inp.data.iter().step_by(64).map(|&x| x as u64).sum::<u64>());
        black_box((inp.args.clone(), inp.argc.clone(), inp.hints.clone()));
    }
}

fn batches(rng: &mut Rng, keys: u64, set: bool, value: &str) -> Vec<Vec<Input>> {
    (0..BATCHES)
        .map(|_| {
            (0..CLIENTS)
                .map(|_| {
                    let mut data = Vec::new();
                    for _ in 0..PIPELINE {
                        let k = key(rng.below(keys));
                        if set {
                            resp::encode_command(&["SET", &k, value], &mut data);
                        } else {
                            resp::encode_command(&["GET", &k], &mut data);
                        }
                    }
                    Input::parse(data)
                })
                .collect()
        })
        .collect()
}

fn main() {
    let cpu_time = support::cpu_time();
    let cold_input = std::env::var("RINGKV_BENCH_COLD_INPUT").is_ok_and(|v| v == "1");
    let hints = !std::env::var("RINGKV_BENCH_NO_HINTS").is_ok_and(|v| v == "1");
    let effects = std::env::var("RINGKV_BENCH_EFFECTS").is_ok_and(|v| v == "1");
    let keys: u64 = std::env::var("RINGKV_BENCH_KEYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    let value = "v".repeat(512);
    let mut cfg = Config::default();
    // RINGKV_BENCH_CONFIG="latency-tracking no": settings for the engine,
    // as name value pairs.
    if let Ok(v) = std::env::var("RINGKV_BENCH_CONFIG") {
        let words: Vec<&str> = v.split_whitespace().collect();
        let pairs: Vec<(&[u8], &[u8])> = words
            .chunks(2)
            .map(|p| (p[0].as_bytes(), p.get(1).copied().unwrap_or("").as_bytes()))
            .collect();
        cfg.set_many(&pairs)
            .expect("RINGKV_BENCH_CONFIG: valid settings");
    }
    let mut e = Engine::new(cfg, None);
    let (clients, mut outs) = support::clients(&mut e, CLIENTS);

    // Load every key once, in batches of the same shape.
    let t = std::time::Instant::now();
    let per_batch = (CLIENTS * PIPELINE) as u64;
    let mut next = 0u64;
    while next < keys {
        let inputs: Vec<Input> = (0..CLIENTS)
            .map(|_| {
                let mut data = Vec::new();
                for _ in 0..PIPELINE {
                    if next < keys {
                        resp::encode_command(&["SET", &key(next), &value], &mut data);
                        next += 1;
                    } else {
                        resp::encode_command(&["PING"], &mut data);
                    }
                }
                Input::parse(data)
            })
            .collect();
        run(&mut e, &clients, &inputs, &mut outs, true);
    }
    eprintln!(
        "loaded {keys} keys of 512 bytes in {:.1} s ({per_batch} commands per batch)",
        t.elapsed().as_secs_f64()
    );

    let mut stream = effects.then(|| e.attach_effects());
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let gets = batches(&mut rng, keys, false, &value);
    let sets = batches(&mut rng, keys, true, &value);
    let mut c = Criterion::default().configure_from_args();
    let mut g = c.benchmark_group(format!("exec_batch/{keys}"));
    g.throughput(Throughput::Elements(per_batch));
    let windows: Vec<u32> = std::env::var("RINGKV_BENCH_PREFETCH")
        .ok()
        .map(|v| {
            v.split_whitespace()
                .map(|w| w.parse().expect("RINGKV_BENCH_PREFETCH: numbers"))
                .collect()
        })
        .unwrap_or_else(|| vec![16, 0]);
    for prefetch in windows {
        let cfg = Input::parse({
            let mut d = Vec::new();
            resp::encode_command(
                &[
                    "CONFIG",
                    "SET",
                    "prefetch-batch-max-size",
                    &prefetch.to_string(),
                ],
                &mut d,
            );
            d
        });
        run(
            &mut e,
            &clients[..1],
            std::slice::from_ref(&cfg),
            &mut outs[..1],
            true,
        );
        assert_eq!(outs[0].bytes, b"+OK\r\n");
        for (name, set) in [("get", &gets), ("set", &sets)] {
            let mut i = 0;
            g.bench_function(format!("{name}/prefetch{prefetch}"), |b| {
                support::measure_each(
                    b,
                    cpu_time,
                    || {
                        if let Some(r) = stream.as_mut() {
                            while let Some(s) = r.next_slice() {
                                black_box(s.len());
                            }
                        }
                        let batch = &set[i % BATCHES];
                        i += 1;
                        if !cold_input {
                            warm(batch);
                        }
                        batch
                    },
                    |batch| {
                        run(&mut e, &clients, batch, &mut outs, hints);
                        if effects {
                            e.commit_effects();
                        }
                        black_box(&outs);
                    },
                )
            });
        }
    }
    g.finish();
    c.final_summary();
}
