//! `Table` vs `hashbrown::HashMap<Box<[u8]>, u64>` at 1M and 10M keys.
//!
//! ```text
//! cargo bench -p ringkv-store --bench table -- --warm-up-time 1 --measurement-time 3
//! RINGKV_BENCH_SIZES=1000000 cargo bench ...   # only some sizes
//! ```
//!
//! Keys are 16 bytes (`key:000000012345`), values u64. Lookups walk a
//! precomputed list of random existing keys (with their hashes) so only the
//! table's own cache misses are measured. Variants:
//! * `ringkv`: hash precomputed (what the engine does: the IO path hashes once);
//! * `ringkv+hash`: hashes each key in the loop, to compare with hashbrown;
//! * `ringkv_batch16`: `prefetch_batch` of 16 hashes, then the 16 lookups;
//! * `hashbrown`: its default hasher, hashing every lookup.
//!
//! `db` times [`Db::get`] and an overwriting [`Db::insert`] of existing
//! keys (16 per iteration), the keyspace's paths above the table.
//!
//! `churn` inserts a new key and removes the oldest, so the table stays at
//! its size (and keeps resizing in neither). Filling from empty is timed
//! once per size outside criterion and printed with the slowest single
//! insert, which shows the incremental resize against hashbrown's
//! all-at-once one.

use std::hint::black_box;
use std::time::Instant;

use criterion::{BenchmarkId, Criterion, Throughput};
use ringkv_store::{Db, Entry, StrRef, Table, hash_key};

type Brown = hashbrown::HashMap<Box<[u8]>, u64>;

const BATCH: usize = 16;
const QUERIES: usize = 1 << 16;

fn key_of(i: u64) -> [u8; 16] {
    let mut k = *b"key:000000000000";
    let mut n = i;
    for d in k[4..].iter_mut().rev() {
        *d = b'0' + (n % 10) as u8;
        n /= 10;
    }
    k
}

fn splitmix(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn label(n: usize) -> String {
    if n.is_multiple_of(1_000_000) {
        format!("{}M", n / 1_000_000)
    } else {
        n.to_string()
    }
}

fn bench_size(c: &mut Criterion, n: usize) {
    // Fill both, timing the whole fill and the worst single insert.
    let mut ours: Table<u64> = Table::new();
    let mut worst = 0u128;
    let t = Instant::now();
    for i in 0..n as u64 {
        let k = key_of(i);
        let t1 = Instant::now();
        ours.insert(hash_key(&k), &k, i);
        worst = worst.max(t1.elapsed().as_nanos());
    }
    let ours_fill = t.elapsed();
    let mut brown = Brown::default();
    let mut bworst = 0u128;
    let t = Instant::now();
    for i in 0..n as u64 {
        let k = key_of(i);
        let t1 = Instant::now();
        brown.insert(Box::from(&k[..]), i);
        bworst = bworst.max(t1.elapsed().as_nanos());
    }
    let brown_fill = t.elapsed();
    eprintln!(
        "fill {}: ringkv {:.1} ns/insert (worst single {} us), hashbrown {:.1} ns/insert \
         (worst single {} us); ringkv memory_usage {} MB",
        label(n),
        ours_fill.as_nanos() as f64 / n as f64,
        worst / 1000,
        brown_fill.as_nanos() as f64 / n as f64,
        bworst / 1000,
        ours.memory_usage() >> 20,
    );

    let mut s = 42u64;
    let queries: Vec<(u64, [u8; 16])> = (0..QUERIES)
        .map(|_| {
            let k = key_of(splitmix(&mut s) % n as u64);
            (hash_key(&k), k)
        })
        .collect();

    let mut g = c.benchmark_group(format!("lookup/{}", label(n)));
    g.throughput(Throughput::Elements(BATCH as u64));
    let mut pos = 0;
    let mut next = move || {
        pos = (pos + BATCH) & (QUERIES - 1);
        pos
    };
    g.bench_function(BenchmarkId::from_parameter("ringkv"), |b| {
        b.iter(|| {
            let p = next();
            for (h, k) in &queries[p..p + BATCH] {
                black_box(ours.get(*h, k));
            }
        })
    });
    g.bench_function(BenchmarkId::from_parameter("ringkv+hash"), |b| {
        b.iter(|| {
            let p = next();
            for (_, k) in &queries[p..p + BATCH] {
                black_box(ours.get(hash_key(k), k));
            }
        })
    });
    g.bench_function(BenchmarkId::from_parameter("ringkv_batch16"), |b| {
        let mut hs = [0u64; BATCH];
        b.iter(|| {
            let p = next();
            let q = &queries[p..p + BATCH];
            for (h, (qh, _)) in hs.iter_mut().zip(q) {
                *h = *qh;
            }
            ours.prefetch_batch(&hs);
            for (h, k) in q {
                black_box(ours.get(*h, k));
            }
        })
    });
    g.bench_function(BenchmarkId::from_parameter("hashbrown"), |b| {
        b.iter(|| {
            let p = next();
            for (_, k) in &queries[p..p + BATCH] {
                black_box(brown.get(&k[..]));
            }
        })
    });
    g.finish();

    let mut g = c.benchmark_group(format!("churn/{}", label(n)));
    g.throughput(Throughput::Elements(1));
    let mut oldest = 0u64;
    g.bench_function(BenchmarkId::from_parameter("ringkv"), |b| {
        b.iter(|| {
            let k = key_of(oldest + n as u64);
            ours.insert(hash_key(&k), &k, oldest);
            let o = key_of(oldest);
            black_box(ours.remove(hash_key(&o), &o));
            oldest += 1;
        })
    });
    let mut oldest = 0u64;
    g.bench_function(BenchmarkId::from_parameter("hashbrown"), |b| {
        b.iter(|| {
            let k = key_of(oldest + n as u64);
            brown.insert(Box::from(&k[..]), oldest);
            let o = key_of(oldest);
            black_box(brown.remove(&o[..]));
            oldest += 1;
        })
    });
    g.finish();
    drop((ours, brown));

    // The keyspace's own entry points (what a command pays), so that a
    // check added to them shows here.
    let mut db = Db::default();
    for i in 0..n as u64 {
        let k = key_of(i);
        db.insert(
            hash_key(&k),
            &k,
            Entry::keyed_str(&k, StrRef::Int(i as i64), None),
            1,
        );
    }
    let mut g = c.benchmark_group(format!("db/{}", label(n)));
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function(BenchmarkId::from_parameter("get"), |b| {
        b.iter(|| {
            let p = next();
            for (h, k) in &queries[p..p + BATCH] {
                black_box(db.get(*h, k, 1).is_some());
            }
        })
    });
    g.bench_function(BenchmarkId::from_parameter("insert"), |b| {
        b.iter(|| {
            let p = next();
            for (h, k) in &queries[p..p + BATCH] {
                black_box(db.insert(*h, k, Entry::keyed_str(k, StrRef::Int(7), None), 1));
            }
        })
    });
    g.finish();
}

fn main() {
    let sizes: Vec<usize> = std::env::var("RINGKV_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000_000, 10_000_000]);
    let mut c = Criterion::default().sample_size(10).configure_from_args();
    for n in sizes {
        bench_size(&mut c, n);
    }
    c.final_summary();
}
