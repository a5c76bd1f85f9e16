//! Feed arbitrary bytes to the reply parsers: no panic, `value_len` agrees
//! with `parse_value`, consumed <= input, and a parsed value re-encodes to
//! bytes that parse back to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use resp::{parse_value, value_len};

fuzz_target!(|data: &[u8]| {
    let parsed = parse_value(data);
    let len = value_len(data);
    match (&parsed, &len) {
        (Ok(Some((v, n))), Ok(Some(m))) => {
            assert_eq!(n, m);
            assert!(*n <= data.len() && *n > 0);
            // Every strict prefix is incomplete.
            assert_eq!(parse_value(&data[..n - 1]), Ok(None));
            let mut re = Vec::new();
            v.encode(&mut re);
            let (v2, n2) = parse_value(&re)
                .expect("re-encoded parses")
                .expect("complete");
            assert_eq!(n2, re.len());
            // NaN != NaN: compare the encodings instead.
            let mut re2 = Vec::new();
            v2.encode(&mut re2);
            assert_eq!(re, re2);
        }
        (Ok(None), Ok(None)) | (Err(_), Err(_)) => {}
        _ => panic!("parse_value {parsed:?} vs value_len {len:?}"),
    }
});
