//! Rough parser throughput on the hot shape (pipelined small SET/GET).
//! `cargo run --release -p ringkv-resp --example parse_pipeline`
//! Prints ns per command; not a benchmark of record.

use ringkv_resp::{Limits, Parsed, Span, encode_command, parse_command};
use std::hint::black_box;
use std::time::Instant;

fn main() {
    let mut buf = Vec::new();
    for i in 0..1000 {
        let key = format!("key:{i:012}");
        if i % 2 == 0 {
            encode_command(&[&b"SET"[..], key.as_bytes(), &[b'x'; 100]], &mut buf);
        } else {
            encode_command(&[&b"GET"[..], key.as_bytes()], &mut buf);
        }
    }
    let limits = Limits::default();
    let mut args: Vec<Span> = Vec::with_capacity(64);
    let rounds = 20_000;
    let start = Instant::now();
    let mut total = 0usize;
    for _ in 0..rounds {
        let mut at = 0;
        while at < buf.len() {
            args.clear();
            match parse_command(black_box(&buf[at..]), &limits, &mut args) {
                Ok(Parsed::Command { consumed, argc }) => {
                    at += consumed;
                    total += argc;
                }
                other => panic!("{other:?}"),
            }
        }
    }
    let dt = start.elapsed();
    let cmds = rounds * 1000;
    println!(
        "{:.1} ns/command, {:.2} GB/s ({} args)",
        dt.as_nanos() as f64 / cmds as f64,
        (buf.len() * rounds) as f64 / dt.as_secs_f64() / 1e9,
        total
    );
}
