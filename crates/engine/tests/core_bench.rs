//! Not a test: prints the engine's cost per command for a pipelined batch
//! (`cargo test -p ringkv-engine --release --test core_bench -- --ignored --nocapture`).
//! No assertion on time, by design.

#[path = "core_util.rs"]
mod util;

use engine::{CommandsView, Job};
use resp::{Limits, Parsed, Span};
use ringkv_engine as engine;
use util::*;

#[test]
#[ignore]
fn batch_cost_per_command() {
    let mut e = engine();
    let clients: Vec<_> = (0..50).map(|_| connect(&mut e)).collect();
    for words in [
        &["ping"][..],
        &["echo", "hello"][..],
        &["get", "key:000123"][..],
    ] {
        let mut input = Vec::new();
        for _ in 0..16 {
            resp::encode_command(words, &mut input);
        }
        let mut args: Vec<Span> = Vec::new();
        let mut argc: Vec<u32> = Vec::new();
        let mut at = 0;
        while at < input.len() {
            let before = args.len();
            if let Ok(Parsed::Command { consumed, argc: n }) =
                resp::parse_command(&input[at..], &Limits::default(), &mut args)
            {
                for s in &mut args[before..] {
                    s.start += at;
                }
                argc.push(n as u32);
                at += consumed;
            }
        }
        let mut outs: Vec<resp::ReplyBuf> =
            vec![resp::ReplyBuf::with_capacity(4096); clients.len()];
        let rounds = 2000;
        let t = std::time::Instant::now();
        for _ in 0..rounds {
            let mut jobs: Vec<Job<'_>> = clients
                .iter()
                .zip(outs.iter_mut())
                .map(|(&client, out)| {
                    out.clear();
                    let view = CommandsView {
                        data: &input,
                        args: &args,
                        argc: &argc,
                        hints: &[],
                    };
                    Job::new(client, view, out)
                })
                .collect();
            e.execute_batch(&mut jobs);
        }
        let n = rounds * clients.len() * 16;
        println!(
            "{:>5}: {:.1} ns/command over {n} commands (50 clients x 16 pipelined per batch)",
            words[0],
            t.elapsed().as_nanos() as f64 / n as f64
        );
    }
}
