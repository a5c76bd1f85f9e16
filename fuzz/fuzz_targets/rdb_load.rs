//! Arbitrary bytes as an RDB file: the loader must return items or an
//! error, never panic or allocate beyond what the input backs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = store::EncodingLimits::default();
    if let Ok(mut l) = rdb::Loader::new(data, limits) {
        while let Ok(Some(_)) = l.next_item() {}
    }
});
