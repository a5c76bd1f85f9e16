//! What the memory allows for a lookup chain like the keyspace's, with the
//! value in its own allocation or in the node's (docs/BENCHMARKS.md §6.4).
//!
//! 10M entries, 512-byte values, 4M 64-byte buckets; lookups in windows of
//! 16, prefetched stage by stage as the engine does (`prefetch_batch`,
//! `prefetch_values`), then the value read (GET) or overwritten (SET):
//!
//! - `separate`: bucket → 80-byte node → 512-byte value elsewhere (today's
//!   layout: three dependent loads, each on a page of its own);
//! - `inline`: bucket → node with the value in its tail; the tail's lines
//!   are prefetched once the node's first line is read (its length is in
//!   the node);
//! - `inline-hinted`: the same, with every line of node and value
//!   prefetched as soon as the bucket is read (as if the bucket knew the
//!   node's size).
//!
//! No table code, no parsing: an upper bound per layout.
//!
//! ```text
//! cargo run --release -p ringkv-store --example chain_roofline [-- set] [-- thp]
//! ```

use std::hint::black_box;
use std::time::Instant;

use ringkv_store::table::prefetch_ptr;

#[path = "common/roofline.rs"]
mod roofline;
use roofline::{Region, touch};

const ENTRIES: usize = 10_000_000;
const BUCKETS: usize = 1 << 22;
const NODE: usize = 80;
const VALUE: usize = 512;
const LOOKUPS: usize = 4_000_000;
const WINDOW: usize = 16;

#[derive(Clone, Copy, PartialEq)]
enum Layout {
    Separate,
    Inline,
    InlineHinted,
}

impl Layout {
    fn name(self) -> &'static str {
        match self {
            Layout::Separate => "separate",
            Layout::Inline => "inline",
            Layout::InlineHinted => "inline-hinted",
        }
    }
}

fn read_word(m: &[u8], at: usize) -> usize {
    usize::from_le_bytes(m[at..at + 8].try_into().unwrap())
}

fn write_word(m: &mut [u8], at: usize, v: usize) {
    m[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn prefetch_lines(m: &[u8], from: usize, len: usize) {
    let p = m[from..].as_ptr();
    for off in (0..len).step_by(64) {
        prefetch_ptr(p.wrapping_add(off));
    }
    prefetch_ptr(p.wrapping_add(len - 1));
}

fn bucket_of(entry: usize) -> usize {
    entry.wrapping_mul(2_654_435_761) % BUCKETS * 64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let thp = args.iter().any(|a| a == "thp");
    let write = args.iter().any(|a| a == "set");
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as usize
    };
    // Where each entry's node sits: a random permutation, as an allocator
    // that has seen churn would place them.
    let mut place: Vec<usize> = (0..ENTRIES).collect();
    for i in (1..ENTRIES).rev() {
        place.swap(i, rnd() % (i + 1));
    }
    let lookups: Vec<usize> = (0..LOOKUPS).map(|_| rnd() % ENTRIES).collect();
    let src = [7u8; VALUE];
    for layout in [Layout::Separate, Layout::Inline, Layout::InlineHinted] {
        // A node in `inline` layouts is 80 + 512 bytes in jemalloc's
        // 640-byte class.
        let stride = if layout == Layout::Separate {
            NODE
        } else {
            640
        };
        let mut buckets = Region::new(BUCKETS * 64, thp);
        let mut nodes = Region::new(ENTRIES * stride, thp);
        let mut values = Region::new(
            if layout == Layout::Separate {
                ENTRIES * VALUE
            } else {
                64
            },
            thp,
        );
        for e in 0..ENTRIES {
            let node = place[e] * stride;
            write_word(&mut buckets, bucket_of(e) + 8, node);
            // The node's second word: the value's address, or its length.
            let word = match layout {
                Layout::Separate => place[(e + 7) % ENTRIES] * VALUE,
                _ => VALUE,
            };
            write_word(&mut nodes, node + 8, word);
        }
        let (mut bucket, mut node, mut value) = ([0; WINDOW], [0; WINDOW], [0; WINDOW]);
        let mut sum = 0usize;
        let t = Instant::now();
        for w in lookups.chunks(WINDOW) {
            for (k, &e) in w.iter().enumerate() {
                bucket[k] = bucket_of(e);
                prefetch_ptr(buckets[bucket[k]..].as_ptr());
            }
            for k in 0..w.len() {
                node[k] = read_word(&buckets, bucket[k] + 8);
                let len = if layout == Layout::InlineHinted {
                    NODE + VALUE
                } else {
                    NODE
                };
                prefetch_lines(&nodes, node[k], len);
            }
            for k in 0..w.len() {
                match layout {
                    Layout::Separate => {
                        value[k] = read_word(&nodes, node[k] + 8);
                        prefetch_lines(&values, value[k], VALUE);
                    }
                    Layout::Inline => {
                        value[k] = node[k] + NODE;
                        prefetch_lines(&nodes, value[k], read_word(&nodes, node[k] + 8));
                    }
                    Layout::InlineHinted => value[k] = node[k] + NODE,
                }
            }
            for &at in &value[..w.len()] {
                let m: &mut [u8] = if layout == Layout::Separate {
                    &mut values
                } else {
                    &mut nodes
                };
                sum += touch(&mut m[at..at + VALUE], write, &src);
            }
        }
        black_box(sum);
        let dt = t.elapsed().as_secs_f64();
        println!(
            "{:>13}, {} pages, {}: {:.2}M/s ({:.0} ns each)",
            layout.name(),
            if thp { "huge" } else { "4 KiB" },
            if write { "SET" } else { "GET" },
            LOOKUPS as f64 / dt / 1e6,
            dt * 1e9 / LOOKUPS as f64
        );
    }
}
