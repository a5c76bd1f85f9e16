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

use criterion::{Criterion, Throughput};
use resp::{Limits, Parsed, Span};
use ringkv_engine::{ClientId, ClientInfo, CommandsView, Config, Engine, Job};
use std::hint::black_box;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const KEYS: u64 = 64;
const PIPELINE: usize = 16;
const BATCHES: usize = 64;

struct Input {
    data: Vec<u8>,
    args: Vec<Span>,
    argc: Vec<u32>,
}

fn parse(data: Vec<u8>) -> Input {
    let mut args = Vec::new();
    let mut argc = Vec::new();
    let mut at = 0;
    while at < data.len() {
        let before = args.len();
        match resp::parse_command(&data[at..], &Limits::default(), &mut args) {
            Ok(Parsed::Command { consumed, argc: n }) => {
                for s in &mut args[before..] {
                    s.start += at;
                }
                argc.push(n as u32);
                at += consumed;
            }
            _ => panic!("bad input"),
        }
    }
    Input { data, args, argc }
}

type Out = resp::ReplyBuf;

fn run(e: &mut Engine, client: ClientId, input: &Input, out: &mut Out) {
    out.clear();
    let mut jobs = [Job::new(
        client,
        CommandsView {
            data: &input.data,
            args: &input.args,
            argc: &input.argc,
            hints: &[],
        },
        out,
    )];
    e.execute_batch(&mut jobs);
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn thread_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

fn main() {
    let cpu_time = std::env::var("RINGKV_BENCH_CPU_TIME").is_ok_and(|v| v == "1");
    let mut e = Engine::new(Config::default(), None);
    let info = ClientInfo {
        peer: "127.0.0.1:40000".parse().unwrap(),
        local: "127.0.0.1:6379".parse().unwrap(),
        fd: 7,
    };
    let client = e.connect(info).unwrap();
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
            run(&mut e, client, &parse(d), &mut out);
        }
        let batches: Vec<Input> = (0..BATCHES)
            .map(|_| {
                let mut d = Vec::new();
                for _ in 0..PIPELINE {
                    let k = rng.below(KEYS);
                    resp::encode_command(&["GET", &format!("{name}:{k}")], &mut d);
                }
                parse(d)
            })
            .collect();
        let mut i = 0;
        g.bench_function(format!("get/{name}"), |b| {
            if cpu_time {
                b.iter_custom(|iters| {
                    let t0 = thread_cpu_ns();
                    for _ in 0..iters {
                        run(&mut e, client, &batches[i % BATCHES], &mut out);
                        i += 1;
                        black_box(&out);
                    }
                    std::time::Duration::from_nanos(thread_cpu_ns() - t0)
                })
            } else {
                b.iter(|| {
                    run(&mut e, client, &batches[i % BATCHES], &mut out);
                    i += 1;
                    black_box(&out);
                })
            }
        });
    }
    g.finish();
    c.final_summary();
}
