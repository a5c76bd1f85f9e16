//! Feed arbitrary bytes to the AOF manifest parser: it must never panic,
//! and whatever it accepts must format to text that parses back to the
//! same manifest (what we write, we can read).
#![no_main]

use libfuzzer_sys::fuzz_target;
use persist::aof::manifest::Manifest;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Manifest::parse(data) {
        let text = m.format();
        let again = Manifest::parse(text.as_bytes());
        if m.base.is_none() && m.history.is_empty() && m.incr.is_empty() {
            // Only comments: the formatted text is empty, which is an error.
            assert!(again.is_err());
        } else {
            assert_eq!(again.as_ref(), Ok(&m), "{text:?}");
        }
    }
});
