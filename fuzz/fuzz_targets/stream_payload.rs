//! Arbitrary bytes as the body of a stream value (RDB types 15, 19 and
//! 21), so the fuzzer starts inside the stream decoder: it must refuse or
//! load, never panic, and what it loads must write back (as type 21) and
//! load again to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = store::EncodingLimits::default();
    for t in [15u8, 19, 21] {
        let mut body = Vec::with_capacity(data.len() + 1);
        body.push(t);
        body.extend_from_slice(data);
        if let Ok(v) = rdb::restore::restore(&body, &limits) {
            let payload = rdb::payload::dump(store::ValueRef::of(&v));
            let again = rdb::payload::verify(&payload, false).expect("our own payload verifies");
            let back = rdb::restore::restore(again, &limits).expect("our own payload loads");
            assert_eq!(back, v);
        }
    }
});
