//! Damaged input: every truncation, flipped bytes, absurd lengths and
//! random mutations (the fuzz targets' bodies, run briefly in CI). The
//! property throughout: an error, never a panic, never a huge allocation.

mod common;

use common::*;
use ringkv_rdb::consts::*;
use ringkv_rdb::restore::restore;
use store::EncodingLimits;

fn lim() -> EncodingLimits {
    EncodingLimits::default()
}

/// The `rdb_load` fuzz target's body.
fn fuzz_rdb_load(data: &[u8]) {
    if let Ok(mut l) = ringkv_rdb::Loader::new(data, lim()) {
        while let Ok(Some(_)) = l.next_item() {}
    }
}

/// The `restore_payload` fuzz target's body, less `payload::verify`
/// (the save side's): the trailer is stripped as it would, unchecked.
fn fuzz_restore(data: &[u8]) {
    let _ = restore(data, &lim());
    if data.len() >= 10 {
        let _ = restore(&data[..data.len() - 10], &lim());
    }
}

#[test]
fn every_truncation_fails() {
    for name in ["valkey8-lfu.rdb", "valkey8-lru.rdb"] {
        let data = fixture(name);
        load_all(&data, lim()).unwrap();
        for n in 0..data.len() {
            assert!(load_all(&data[..n], lim()).is_err(), "{name} cut at {n}");
        }
    }
    // The big fixture: every offset in its first 2 KiB, then a stride.
    let data = fixture("valkey8-types.rdb");
    for n in (0..data.len()).filter(|n| *n < 2048 || n % 61 == 0) {
        let e = load_all(&data[..n], lim()).unwrap_err();
        assert!(e.offset <= n as u64, "cut at {n}: {e}");
    }
}

#[test]
fn every_flipped_byte_fails() {
    let data = fixture("valkey8-lfu.rdb");
    // Bytes 5..9 are the version digits: some flips give another valid
    // version (an old one has no checksum, so its trailer is ignored).
    for i in (0..data.len()).filter(|i| !(5..9).contains(i)) {
        for bit in [0x01u8, 0x80] {
            let mut d = data.clone();
            d[i] ^= bit;
            assert!(load_all(&d, lim()).is_err(), "flip 0x{bit:02x} at {i}");
        }
    }
}

#[test]
fn flipped_string_byte_is_a_checksum_error_at_the_trailer() {
    let data = fixture("valkey8-types.rdb");
    // A byte inside s:embstr's value (short: never compressed), so the
    // structure is intact and only the content differs.
    let at = data.windows(11).position(|w| w == b"hello world").unwrap() + 3;
    let mut d = data.clone();
    d[at] = b'y';
    let e = load_all(&d, lim()).unwrap_err();
    assert!(e.msg.contains("checksum mismatch"), "{e}");
    assert_eq!(e.offset, (data.len() - 8) as u64);
}

#[test]
fn absurd_lengths_are_errors_not_allocations() {
    let cases: Vec<Vec<u8>> = vec![
        // A string claiming 2^64-1 bytes.
        [vec![TYPE_STRING, 1, b'k', LEN_64BIT], vec![0xff; 8]].concat(),
        // A string claiming 4 GiB.
        vec![
            TYPE_STRING,
            1,
            b'k',
            LEN_32BIT,
            0xff,
            0xff,
            0xff,
            0xff,
            b'x',
        ],
        // A list of 2^62 elements with one present.
        [
            vec![TYPE_LIST, 1, b'k', LEN_64BIT],
            (1u64 << 62).to_be_bytes().to_vec(),
            vec![1, b'a'],
        ]
        .concat(),
        // A hash, set, zset and quicklist of 2^32-1 elements.
        vec![TYPE_HASH, 1, b'k', LEN_32BIT, 0xff, 0xff, 0xff, 0xff],
        vec![
            TYPE_SET, 1, b'k', LEN_32BIT, 0xff, 0xff, 0xff, 0xff, 1, b'1',
        ],
        vec![TYPE_ZSET_2, 1, b'k', LEN_32BIT, 0xff, 0xff, 0xff, 0xff],
        vec![
            TYPE_LIST_QUICKLIST_2,
            1,
            b'k',
            LEN_32BIT,
            0xff,
            0xff,
            0xff,
            0xff,
            2,
            0,
        ],
        // LZF: 3 compressed bytes claiming to expand to 2^40.
        [
            vec![TYPE_STRING, 1, b'k', 0xc3, 3, LEN_64BIT],
            (1u64 << 40).to_be_bytes().to_vec(),
            vec![0, b'a', 0],
        ]
        .concat(),
        // A listpack blob whose header claims 4 GiB.
        vec![
            TYPE_SET_LISTPACK,
            1,
            b'k',
            7,
            0xff,
            0xff,
            0xff,
            0xff,
            1,
            0,
            0xff,
        ],
    ];
    for c in cases {
        let mut r = Rdb::new(11);
        r.raw(&c);
        let data = r.finish(11);
        assert!(load_all(&data, lim()).is_err(), "{c:?}");
        assert!(
            restore(
                &c[..1].iter().chain(&c[3..]).copied().collect::<Vec<_>>(),
                &lim()
            )
            .is_err()
        );
    }
}

/// A cheap fuzz run over the fixtures and hand-made files: thousands of
/// random mutations through both targets' bodies.
#[test]
fn fuzz_smoke() {
    let mut seeds: Vec<Vec<u8>> = [
        "valkey8-lfu.rdb",
        "valkey8-lru.rdb",
        "valkey8-types.rdb",
        "redis7-types.rdb",
    ]
    .iter()
    .map(|n| fixture(n))
    .collect();
    let dumps = String::from_utf8(fixture("valkey8.dumps")).unwrap();
    let payloads: Vec<Vec<u8>> = dumps
        .lines()
        .map(|l| unescape(l.split_once('\t').unwrap().1))
        .collect();
    // Small files mutate into more distinct paths per iteration.
    for p in &payloads {
        // Each payload's value as a one-key file.
        let mut r = Rdb::new(11);
        r.raw(&p[..1]).str(b"key").raw(&p[1..p.len() - 10]);
        seeds.push(r.finish(11));
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for s in &seeds {
        fuzz_rdb_load(s);
        let rounds = if s.len() > 4096 { 200 } else { 60 };
        for _ in 0..rounds {
            fuzz_rdb_load(&rng.mutate(s));
        }
    }
    for p in &payloads {
        fuzz_restore(p);
        for _ in 0..100 {
            fuzz_restore(&rng.mutate(p));
        }
    }
}
