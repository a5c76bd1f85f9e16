//! What the engine benches share: parsed input as an IO thread hands it
//! over, a client, a small RNG, and timing by wall clock or thread CPU.

use criterion::Bencher;
use resp::{Limits, Parsed, Span};
use ringkv_engine::{ArgvRef, ClientInfo, CommandHint, CommandsView};

/// One connection's parsed input: bytes, argument spans, argc and hint per
/// command, as an IO thread hands them over.
pub struct Input {
    pub data: Vec<u8>,
    pub args: Vec<Span>,
    pub argc: Vec<u32>,
    pub hints: Vec<CommandHint>,
}

impl Input {
    /// Parse `data` (complete RESP commands) the way a connection does.
    pub fn parse(data: Vec<u8>) -> Input {
        let mut args = Vec::new();
        let mut argc = Vec::new();
        let mut hints = Vec::new();
        let mut at = 0;
        while at < data.len() {
            let before = args.len();
            match resp::parse_command(&data[at..], &Limits::default(), &mut args) {
                Ok(Parsed::Command { consumed, argc: n }) => {
                    for s in &mut args[before..] {
                        s.start += at;
                    }
                    argc.push(n as u32);
                    hints.push(CommandHint::of(ArgvRef {
                        data: &data,
                        spans: &args[before..],
                    }));
                    at += consumed;
                }
                _ => panic!("bad input"),
            }
        }
        Input {
            data,
            args,
            argc,
            hints,
        }
    }

    /// The commands for a `Job`, with their hints or (`hints` false)
    /// without, for the engine to work them out.
    pub fn view(&self, hints: bool) -> CommandsView<'_> {
        CommandsView {
            data: &self.data,
            args: &self.args,
            argc: &self.argc,
            hints: if hints { &self.hints } else { &[] },
        }
    }
}

pub fn client_info() -> ClientInfo {
    ClientInfo::tcp(
        "127.0.0.1:40000".parse().unwrap(),
        "127.0.0.1:6379".parse().unwrap(),
        7,
    )
}

/// xorshift64: the same key sequence every run.
pub struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// RINGKV_BENCH_CPU_TIME=1: time the thread's CPU instead of the wall
/// clock, so other processes sharing the machine inflate the numbers less
/// (they still share caches).
#[allow(dead_code)] // evict_load always measures CPU time
pub fn cpu_time() -> bool {
    std::env::var("RINGKV_BENCH_CPU_TIME").is_ok_and(|v| v == "1")
}

/// Measure `step` by wall clock, or by this thread's CPU time when
/// `cpu_time`.
#[allow(dead_code)] // each bench compiles this module; exec_batch uses measure_each
pub fn measure(b: &mut Bencher<'_>, cpu_time: bool, mut step: impl FnMut()) {
    if cpu_time {
        b.iter_custom(|iters| {
            let t0 = now_ns(true);
            for _ in 0..iters {
                step();
            }
            std::time::Duration::from_nanos(now_ns(true) - t0)
        })
    } else {
        b.iter(step)
    }
}

/// Like [`measure`], but `setup` runs before each step, outside the timed
/// part, and hands the step its input. The clock is read around every
/// step, so it suits steps far longer than a clock read.
#[allow(dead_code)] // large_get compiles this module too
pub fn measure_each<T>(
    b: &mut Bencher<'_>,
    cpu_time: bool,
    mut setup: impl FnMut() -> T,
    mut step: impl FnMut(T),
) {
    b.iter_custom(|iters| {
        let mut total = 0u64;
        for _ in 0..iters {
            let input = setup();
            let t0 = now_ns(cpu_time);
            step(input);
            total += now_ns(cpu_time) - t0;
        }
        std::time::Duration::from_nanos(total)
    })
}

/// This thread's CPU time (`cpu_time`) or the monotonic clock, in ns.
pub fn now_ns(cpu_time: bool) -> u64 {
    let t = rustix::time::clock_gettime(if cpu_time {
        rustix::time::ClockId::ThreadCPUTime
    } else {
        rustix::time::ClockId::Monotonic
    });
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Run one batch: job i is `inputs[i]` from `clients[i]`, its replies in
/// `outs[i]` (cleared first); `hints`: hand the engine the parser's hints.
#[allow(dead_code)] // large_get compiles this module too
pub fn run_batch(
    e: &mut ringkv_engine::Engine,
    clients: &[ringkv_engine::ClientId],
    inputs: &[Input],
    outs: &mut [resp::ReplyBuf],
    hints: bool,
) {
    let mut jobs: Vec<ringkv_engine::Job<'_>> = clients
        .iter()
        .zip(inputs)
        .zip(outs.iter_mut())
        .map(|((&client, inp), out)| {
            out.clear();
            ringkv_engine::Job::new(client, inp.view(hints), out)
        })
        .collect();
    e.execute_batch(&mut jobs);
}

/// `n` clients of `e`, and a reply buffer for each.
#[allow(dead_code)] // large_get compiles this module too
pub fn clients(
    e: &mut ringkv_engine::Engine,
    n: usize,
) -> (Vec<ringkv_engine::ClientId>, Vec<resp::ReplyBuf>) {
    let clients = (0..n).map(|_| e.connect(client_info()).unwrap()).collect();
    let outs = (0..n)
        .map(|_| resp::ReplyBuf::with_capacity(1 << 16))
        .collect();
    (clients, outs)
}
