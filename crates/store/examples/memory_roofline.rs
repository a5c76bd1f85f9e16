//! What this machine's memory allows for the execution thread's bench
//! (docs/BENCHMARKS.md §6): random 512-byte blocks in a 5 GB region, each
//! block prefetched `D` blocks ahead, then read (GET's copy) or overwritten
//! (SET's copy). No table, no parsing: an upper bound on GET/SET per second
//! at 10M keys of 512 bytes, since those touch at least these lines.
//!
//! ```text
//! cargo run --release -p ringkv-store --example memory_roofline          # 4 KiB pages
//! cargo run --release -p ringkv-store --example memory_roofline -- thp   # huge pages
//! ```

use std::hint::black_box;
use std::time::Instant;

#[path = "common/roofline.rs"]
mod roofline;
use roofline::{Region, touch};

const BLOCKS: usize = 10_000_000;
const BLOCK: usize = 512;
const OPS: usize = 4_000_000;
const AHEAD: usize = 16;

fn main() {
    let thp = std::env::args().any(|a| a == "thp");
    let mut mem = Region::new(BLOCKS * BLOCK, thp);

    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let idx: Vec<usize> = (0..OPS)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % BLOCKS as u64) as usize * BLOCK
        })
        .collect();
    let src = [7u8; BLOCK];
    for write in [false, true] {
        let t = Instant::now();
        let mut sum = 0usize;
        for i in 0..OPS {
            if let Some(&ahead) = idx.get(i + AHEAD) {
                for off in (0..BLOCK).step_by(64) {
                    ringkv_store::table::prefetch_ptr(mem[ahead + off..].as_ptr());
                }
            }
            sum += touch(&mut mem[idx[i]..idx[i] + BLOCK], write, &src);
        }
        black_box(sum);
        let dt = t.elapsed().as_secs_f64();
        println!(
            "{} pages, {}: {:.2}M blocks/s ({:.0} ns each)",
            if thp { "huge" } else { "4 KiB" },
            if write {
                "overwrite 512 B"
            } else {
                "read 512 B"
            },
            OPS as f64 / dt / 1e6,
            dt / OPS as f64 * 1e9
        );
    }
}
