//! The execution thread's cost of GET on a large value (issue 5, item 4):
//! `Engine::execute_batch` on batches of GETs of 1 MiB (and 64 KiB)
//! values, no sockets. Before values were handed over by reference this
//! was a memcpy of the value into the reply buffer per GET; now it is a
//! refcount increment and a reference in the reply.
//!
//! ```text
//! RINGKV_BENCH_CPU_TIME=1 cargo bench -p ringkv-engine --bench large_get -- --warm-up-time 2 --measurement-time 5
//! ```
//!
//! 64 keys per size (64 MiB of 1 MiB values: more than the last-level
//! cache, so every copy streams from memory), one job of 16 pipelined
//! GETs of random keys per batch. Throughput is GETs per second.

mod support;

use criterion::{Criterion, Throughput};
use ringkv_engine::{ClientId, Config, Engine, Job};
use std::hint::black_box;
use support::{Input, Rng};

#[global_allocator]
static GLOBAL: ringkv_alloc::CountingJemalloc = ringkv_alloc::CountingJemalloc;

const KEYS: u64 = 64;
const PIPELINE: usize = 16;
const BATCHES: usize = 64;

type Out = resp::ReplyBuf;

fn run(e: &mut Engine, client: ClientId, input: &Input, out: &mut Out) {
    out.clear();
    let mut jobs = [Job::new(client, input.view(false), out)];
    e.execute_batch(&mut jobs);
}

fn main() {
    let cpu_time = support::cpu_time();
    let mut e = Engine::new(Config::default(), None);
    let client = e.connect(support::client_info()).unwrap();
    let mut out = Out::default();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut c = Criterion::default().configure_from_args();
    let mut g = c.benchmark_group("large_get");
    g.throughput(Throughput::Elements(PIPELINE as u64));
    for (name, size) in [("1MiB", 1usize << 20), ("64KiB", 64 << 10)] {
        let value = "v".repeat(size);
        for k in 0..KEYS {
            let mut d = Vec::new();
            resp::encode_command(&["SET", &format!("{name}:{k}"), &value], &mut d);
            run(&mut e, client, &Input::parse(d), &mut out);
        }
        let batches: Vec<Input> = (0..BATCHES)
            .map(|_| {
                let mut d = Vec::new();
                for _ in 0..PIPELINE {
                    let k = rng.below(KEYS);
                    resp::encode_command(&["GET", &format!("{name}:{k}")], &mut d);
                }
                Input::parse(d)
            })
            .collect();
        let mut i = 0;
        g.bench_function(format!("get/{name}"), |b| {
            support::measure(b, cpu_time, || {
                run(&mut e, client, &batches[i % BATCHES], &mut out);
                i += 1;
                black_box(&out);
            })
        });
    }
    g.finish();
    c.final_summary();
}
