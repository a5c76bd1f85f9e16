//! Eviction's cost per SET in the execution thread alone (issue 19): the
//! load of `bench/eviction_load.sh` without sockets, so a change to the
//! eviction path can be compared on a machine shared with other work.
//!
//! ```text
//! cargo bench -p ringkv-engine --bench evict_load
//! RINGKV_BENCH_SETS=3000000 RINGKV_BENCH_MODES=lru cargo bench -p ringkv-engine --bench evict_load
//! ```
//!
//! For each mode (RINGKV_BENCH_MODES, default "lru unlimited"), a fresh
//! engine with ringkv-server's counting allocator as its used-memory probe
//! runs RINGKV_BENCH_SETS (default 6,000,000) SETs of 100-byte values over
//! 20,000,000 random keys, in batches of 50 jobs of 16 pipelined SETs (as
//! redis-benchmark `-c 50 -P 16` sends them): `lru` with `maxmemory 200mb`
//! (RINGKV_BENCH_MAXMEMORY) and `allkeys-lru`, `unlimited` without a limit.
//! Each batch is built and its bytes read untimed; the engine's work on it
//! is timed by this thread's CPU time. Prints ns per SET over the whole
//! run (what `bench/eviction_load.sh` divides) and over the SETs after the
//! first eviction, and the two modes' ratio.

mod support;

use resp::ReplyBuf;
use ringkv_engine::{ClientId, Config, Engine};
use std::hint::black_box;
use support::{Input, Rng};

#[global_allocator]
static GLOBAL: ringkv_alloc::CountingJemalloc = ringkv_alloc::CountingJemalloc;

const CLIENTS: usize = 50;
const PIPELINE: usize = 16;
const KEYRANGE: u64 = 20_000_000;

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn run(e: &mut Engine, clients: &[ClientId], inputs: &[Input], outs: &mut [ReplyBuf]) {
    support::run_batch(e, clients, inputs, outs, true);
}

fn command(e: &mut Engine, client: ClientId, out: &mut ReplyBuf, words: &[&str]) {
    let mut d = Vec::new();
    resp::encode_command(words, &mut d);
    let inp = Input::parse(d);
    run(
        e,
        &[client],
        std::slice::from_ref(&inp),
        std::slice::from_mut(out),
    );
    assert_eq!(out.bytes, b"+OK\r\n", "{words:?}");
}

/// (ns per SET over the run, ns per SET once evicting, keys evicted)
fn one_mode(limited: bool, sets: u64, maxmemory: &str) -> (f64, f64, u64) {
    let mut e = Engine::new(Config::default(), None);
    e.set_used_memory_probe(ringkv_alloc::used_memory);
    let (clients, mut outs) = support::clients(&mut e, CLIENTS);
    if limited {
        command(
            &mut e,
            clients[0],
            &mut outs[0],
            &["CONFIG", "SET", "maxmemory", maxmemory],
        );
        command(
            &mut e,
            clients[0],
            &mut outs[0],
            &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
        );
    }
    let value = "v".repeat(100);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let per_batch = (CLIENTS * PIPELINE) as u64;
    let (mut total, mut evicting, mut evicting_sets) = (0u64, 0u64, 0u64);
    let mut done = 0;
    while done < sets {
        let inputs: Vec<Input> = (0..CLIENTS)
            .map(|_| {
                let mut data = Vec::new();
                for _ in 0..PIPELINE {
                    let k = format!("key:{:012}", rng.below(KEYRANGE));
                    resp::encode_command(&["SET", &k, &value], &mut data);
                }
                Input::parse(data)
            })
            .collect();
        for inp in &inputs {
            black_box(inp.data.iter().step_by(64).map(|&x| x as u64).sum::<u64>());
        }
        let was_evicting = e.server().stats.evicted_keys > 0;
        let t0 = support::now_ns(true);
        run(&mut e, &clients, &inputs, &mut outs);
        let dt = support::now_ns(true) - t0;
        black_box(&outs);
        total += dt;
        if was_evicting {
            evicting += dt;
            evicting_sets += per_batch;
        }
        done += per_batch;
    }
    (
        total as f64 / done as f64,
        evicting as f64 / evicting_sets.max(1) as f64,
        e.server().stats.evicted_keys,
    )
}

fn main() {
    let sets: u64 = env_or("RINGKV_BENCH_SETS", "6000000")
        .parse()
        .expect("RINGKV_BENCH_SETS");
    let maxmemory = env_or("RINGKV_BENCH_MAXMEMORY", "200mb");
    let mut lru = None;
    let mut unlimited = None;
    for mode in env_or("RINGKV_BENCH_MODES", "lru unlimited").split_whitespace() {
        let limited = match mode {
            "lru" => true,
            "unlimited" => false,
            _ => panic!("RINGKV_BENCH_MODES: lru and/or unlimited"),
        };
        let (all, ev, evicted) = one_mode(limited, sets, &maxmemory);
        println!(
            "{mode}: {all:.0} ns/SET over {sets} SETs, {ev:.0} ns/SET once evicting, {evicted} evicted"
        );
        if limited {
            lru = Some(all);
        } else {
            unlimited = Some(all);
        }
    }
    if let (Some(a), Some(b)) = (lru, unlimited) {
        println!("ratio {:.2}x", a / b);
    }
}
