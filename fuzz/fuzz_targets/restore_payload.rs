//! Arbitrary bytes as a DUMP payload: through the trailer check and
//! RESTORE's decoder, and straight into the decoder too, so that the
//! checksum does not hide decoder bugs from the fuzzer.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = store::EncodingLimits::default();
    if let Some(body) = rdb::payload::verify(data, true) {
        let _ = rdb::restore::restore(body, &limits);
    }
    let _ = rdb::restore::restore(data, &limits);
});
