//! Property: any binary key and value survive SET/GET over the wire, whatever
//! bytes they contain and wherever the request is split into TCP writes.

use std::time::Duration;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use ringkv_e2e::raw::encode;
use ringkv_e2e::{Reply, e2e};

e2e!(
    fn binary_set_get_any_split(b) {
        let srv = b.server();
        let mut runner = TestRunner::new(Config {
            cases: 64,
            failure_persistence: None,
            ..Config::default()
        });
        let strategy = (
            vec(any::<u8>(), 1..40),
            vec(any::<u8>(), 0..300),
            any::<prop::sample::Index>(),
        );
        runner
            .run(&strategy, |(key, val, split)| {
                let mut req = encode(&[b"SET", &key, &val]);
                req.extend(encode(&[b"GET", &key]));
                req.extend(encode(&[b"STRLEN", &key]));
                let at = split.index(req.len());
                // A fresh connection per case, so a failing case cannot
                // desynchronise the ones shrinking runs after it.
                let mut raw = srv.raw();
                raw.send(&req[..at]);
                std::thread::sleep(Duration::from_millis(1));
                raw.send(&req[at..]);
                prop_assert_eq!(raw.read_reply(), Reply::status("OK"));
                prop_assert_eq!(raw.read_reply(), Reply::Bulk(val.clone()));
                prop_assert_eq!(raw.read_reply(), Reply::Int(val.len() as i64));
                Ok(())
            })
            .unwrap();
    }
);
