//! HyperLogLog against the real binary: counts and the stored bytes agree
//! with Debian's redis-server 7 for the same elements (when installed).

use ringkv_e2e::v::{int, ok};
use ringkv_e2e::{Backend, e2e, q};

e2e!(
    ringkv_only fn hll_counts_and_bytes_match_redis(b) {
        let ours = b.server();
        let redis_bin = std::env::var("REDIS_SERVER_BIN").unwrap_or_else(|_| "/usr/bin/redis-server".into());
        let theirs = std::path::Path::new(&redis_bin).exists().then(|| Backend::Redis.server());
        let o = &mut ours.client();
        let mut t = theirs.as_ref().map(|s| s.client());
        for (key, n) in [("tiny", 3), ("sparse", 800), ("dense", 30_000)] {
            for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
                let mut cmd = redis::cmd("PFADD");
                cmd.arg(key);
                for i in chunk {
                    cmd.arg(format!("user:{i}"));
                }
                let added: i64 = cmd.query(o).unwrap();
                assert_eq!(added, 1);
                if let Some(t) = t.as_mut() {
                    let _: i64 = cmd.query(t).unwrap();
                }
            }
            let count: i64 = redis::cmd("PFCOUNT").arg(key).query(o).unwrap();
            let err = (count - n).abs() as f64 / n as f64;
            assert!(err < 0.0081 * 3.0, "{key}: {count} for {n}");
            if let Some(t) = t.as_mut() {
                let theirs: i64 = redis::cmd("PFCOUNT").arg(key).query(t).unwrap();
                assert_eq!(count, theirs, "{key}");
                let a: Vec<u8> = redis::cmd("GET").arg(key).query(o).unwrap();
                let b: Vec<u8> = redis::cmd("GET").arg(key).query(t).unwrap();
                assert_eq!(a, b, "{key}: stored bytes differ");
            }
        }
        assert_eq!(q(o, "PFMERGE all tiny sparse dense"), ok());
        assert_eq!(q(o, "PFADD tiny user:0"), int(0));
    }
);
