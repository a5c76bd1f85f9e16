//! HyperLogLog: counts, Valkey's byte format (sparse and dense), the
//! cached cardinality, merges and errors.

#[path = "core_util.rs"]
mod util;

use util::*;

const NOT_HLL: &str = "-WRONGTYPE Key is not a valid HyperLogLog string value.\r\n";

#[test]
fn pfadd_pfcount_and_the_sparse_bytes() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(cmd(&mut e, c, &["PFADD", "h"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["PFADD", "h"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["PFCOUNT", "h"]), ":0\r\n");
    // An empty HLL: header with a valid cached 0, one XZERO of 16384.
    let (got, _) = run_raw(&mut e, c, &encode(&[&["GET", "h"]]));
    let mut want = b"$18\r\nHYLL\x01\x00\x00\x00".to_vec();
    want.extend_from_slice(&[0; 8]);
    want.extend_from_slice(b"\x7f\xff\r\n");
    assert_eq!(got, want);
    assert_eq!(
        cmd(&mut e, c, &["PFADD", "h", "a", "b", "c", "a"]),
        ":1\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["PFADD", "h", "b"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["PFCOUNT", "h"]), ":3\r\n");
    assert_eq!(cmd(&mut e, c, &["PFCOUNT", "h", "nokey"]), ":3\r\n");
    assert_eq!(cmd(&mut e, c, &["PFCOUNT", "nokey"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["TYPE", "h"]), "+string\r\n");
}

#[test]
fn large_counts_go_dense_within_the_error_bound() {
    let mut e = engine();
    let c = connect(&mut e);
    for chunk in 0..20 {
        let els: Vec<String> = (0..1000)
            .map(|i| format!("el:{}", chunk * 1000 + i))
            .collect();
        let mut words = vec!["PFADD", "big"];
        words.extend(els.iter().map(String::as_str));
        cmd(&mut e, c, &words);
    }
    let n: f64 = cmd(&mut e, c, &["PFCOUNT", "big"])
        .trim_start_matches(':')
        .trim_end()
        .parse()
        .unwrap();
    assert!((n - 20_000.0).abs() / 20_000.0 < 0.0081 * 3.0, "{n}");
    // Dense: 16 bytes of header and 12288 of registers.
    assert_eq!(cmd(&mut e, c, &["STRLEN", "big"]), ":12304\r\n");
    // Merging keeps the union; the destination is an input too.
    cmd(&mut e, c, &["PFADD", "small", "el:1", "zzz"]);
    assert_eq!(cmd(&mut e, c, &["PFMERGE", "small", "big"]), "+OK\r\n");
    let m: f64 = cmd(&mut e, c, &["PFCOUNT", "small"])
        .trim_start_matches(':')
        .trim_end()
        .parse()
        .unwrap();
    // One more distinct element ("zzz") moves the estimate a little.
    assert!(m >= n && m - n <= 10.0, "{m} vs {n}");
    assert_eq!(cmd(&mut e, c, &["STRLEN", "small"]), ":12304\r\n");
}

#[test]
fn errors_for_values_that_are_not_hlls() {
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["SET", "s", "hello"]);
    assert_eq!(cmd(&mut e, c, &["PFADD", "s", "a"]), NOT_HLL);
    assert_eq!(cmd(&mut e, c, &["PFCOUNT", "s"]), NOT_HLL);
    assert_eq!(cmd(&mut e, c, &["PFMERGE", "d", "s"]), NOT_HLL);
    cmd(&mut e, c, &["LPUSH", "l", "a"]);
    assert_eq!(
        cmd(&mut e, c, &["PFADD", "l", "a"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    // A sparse body whose runs do not add up to 16384 registers.
    cmd(&mut e, c, &["PFADD", "h", "a"]);
    cmd(&mut e, c, &["APPEND", "h", "x"]);
    assert_eq!(
        cmd(&mut e, c, &["PFCOUNT", "h"]),
        "-INVALIDOBJ Corrupted HLL object detected\r\n"
    );
}
