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

e2e!(
    ringkv_only fn hll_bytes_follow_valkey_through_random_writes(b) {
        // Random PFADD / PFMERGE / PFCOUNT on three keys, sparse and dense,
        // on ringkv and Valkey 8.1: every reply, GET and DUMP byte for
        // byte, so the cached count's bytes too (a write marks it stale
        // and keeps the rest of it; a new key starts stale).
        let ours = b.server();
        let theirs = Backend::Valkey.server();
        let (mut a, mut v) = (ours.raw(), theirs.raw());
        let keys = ["h0", "h1", "h2"];
        let mut compared = 0;
        for seed in 0..12 {
            let mut r = ringkv_e2e::Rng::new(seed + 1);
            for c in [&mut a, &mut v] {
                c.cmd(&["FLUSHALL"]);
            }
            for _ in 0..150 {
                let key = *r.pick(&keys);
                let mut cmd: Vec<String> = match r.below(10) {
                    0..=4 => {
                        let range = if r.below(3) == 0 { 5000 } else { 50 };
                        let n = *r.pick(&[0, 1, 3, 30, 300]);
                        let mut c = vec!["PFADD".to_string(), key.into()];
                        c.extend((0..n).map(|_| format!("e{}", r.below(range))));
                        c
                    }
                    5..=6 => vec!["PFMERGE".into(), key.into()],
                    7 => vec!["PFCOUNT".into(), key.into()],
                    8 => vec!["GET".into(), key.into()],
                    _ => vec!["DUMP".into(), key.into()],
                };
                if cmd[0] == "PFMERGE" {
                    for _ in 0..r.below(3) {
                        cmd.push(r.pick(&keys).to_string());
                    }
                }
                let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
                assert_eq!(a.cmd(&args), v.cmd(&args), "seed {seed}: {:?}", &args[..args.len().min(4)]);
                compared += 1;
            }
        }
        assert_eq!(compared, 12 * 150);
    }
);
