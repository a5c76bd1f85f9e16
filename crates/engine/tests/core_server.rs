//! DEBUG, TIME, ROLE, SLOWLOG, LATENCY, DBSIZE/FLUSH.

#[path = "core_util.rs"]
mod util;

use engine::Config;
use ringkv_engine as engine;
use util::*;

#[test]
fn debug_is_refused_unless_enabled() {
    let mut e = engine();
    let c = connect(&mut e);
    let r = cmd(&mut e, c, &["debug", "sleep", "0"]);
    assert!(
        r.starts_with(
            "-ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\""
        ),
        "{r}"
    );

    let cfg = Config::load(None, &["--enable-debug-command".into(), "local".into()]).unwrap();
    let mut e = engine_with(cfg);
    let c = connect(&mut e);
    assert_eq!(cmd(&mut e, c, &["debug", "sleep", "0"]), "+OK\r\n");
    let remote = {
        let mut cfg =
            Config::load(None, &["--enable-debug-command".into(), "local".into()]).unwrap();
        cfg.set_many(&[(b"protected-mode", b"no")]).unwrap();
        let mut e2 = engine_with(cfg);
        let r = e2.connect(info("10.1.1.1:3")).unwrap();
        cmd(&mut e2, r, &["debug", "sleep", "0"])
    };
    assert!(
        remote.starts_with("-ERR DEBUG command not allowed"),
        "{remote}"
    );
    assert_eq!(
        cmd(&mut e, c, &["debug", "set-active-expire", "0"]),
        "+OK\r\n"
    );
    assert!(!e.server().active_expire_enabled);
    assert_eq!(
        cmd(&mut e, c, &["debug", "nosuch"]),
        "-ERR unknown subcommand or wrong number of arguments for 'nosuch'. Try DEBUG HELP.\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["debug", "object", "nokey"]),
        "-ERR no such key\r\n"
    );
    let t = std::time::Instant::now();
    assert_eq!(cmd(&mut e, c, &["debug", "sleep", "0.05"]), "+OK\r\n");
    assert!(t.elapsed() >= std::time::Duration::from_millis(50));
}

#[test]
fn time_role_slowlog_latency() {
    let mut e = engine();
    let c = connect(&mut e);
    e.pin_clock(Some(1_800_000_000_123));
    assert_eq!(
        cmd(&mut e, c, &["time"]),
        "*2\r\n$10\r\n1800000000\r\n$6\r\n123000\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["role"]),
        "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["slowlog", "len"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["slowlog", "get", "10"]), "*0\r\n");
    assert_eq!(cmd(&mut e, c, &["slowlog", "reset"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["latency", "latest"]), "*0\r\n");
    assert_eq!(cmd(&mut e, c, &["lastsave"]).chars().next(), Some(':'));
}

#[test]
fn the_latency_monitor_keeps_spikes_over_its_threshold() {
    let cfg = Config::load(None, &["--enable-debug-command".into(), "local".into()]).unwrap();
    let mut e = engine_with(cfg);
    let c = connect(&mut e);
    e.pin_clock(Some(1_800_000_000_123));
    // Off (threshold 0): nothing is kept.
    cmd(&mut e, c, &["debug", "sleep", "0.003"]);
    assert_eq!(cmd(&mut e, c, &["latency", "latest"]), "*0\r\n");
    assert_eq!(
        cmd(
            &mut e,
            c,
            &["config", "set", "latency-monitor-threshold", "2"]
        ),
        "+OK\r\n"
    );
    cmd(&mut e, c, &["debug", "sleep", "0"]);
    assert_eq!(
        cmd(&mut e, c, &["latency", "latest"]),
        "*0\r\n",
        "under the threshold"
    );
    cmd(&mut e, c, &["debug", "sleep", "0.003"]);
    e.pin_clock(Some(1_800_000_001_500));
    cmd(&mut e, c, &["debug", "sleep", "0.005"]);
    let latest = cmd(&mut e, c, &["latency", "latest"]);
    // command, the newest sample's second, its ms, the maximum, the sum, the count.
    let parts: Vec<&str> = latest.split("\r\n").collect();
    assert_eq!(&parts[..4], ["*1", "*6", "$7", "command"], "{latest}");
    assert_eq!(parts[4], ":1800000001");
    let ms: Vec<i64> = parts[5..9]
        .iter()
        .map(|p| p[1..].parse().unwrap())
        .collect();
    assert!(
        ms[0] >= 5 && ms[1] >= 5 && ms[2] >= 8 && ms[3] == 2,
        "{latest}"
    );
    let history = cmd(&mut e, c, &["latency", "history", "command"]);
    assert!(
        history.starts_with("*2\r\n*2\r\n:1800000000\r\n:"),
        "{history}"
    );
    assert_eq!(cmd(&mut e, c, &["latency", "history", "nosuch"]), "*0\r\n");
    assert_eq!(cmd(&mut e, c, &["latency", "reset", "nosuch"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["latency", "reset"]), ":1\r\n");
    assert_eq!(cmd(&mut e, c, &["latency", "latest"]), "*0\r\n");
}

#[test]
fn dbsize_flushdb_flushall() {
    let mut e = engine();
    let c = connect(&mut e);
    for (db, key) in [(0usize, "a"), (0, "b"), (3, "c")] {
        e.server_mut().keyspace.dbs[db].insert(
            store::hash_key(key.as_bytes()),
            key.as_bytes(),
            store::Entry::new(store::Value::Str(store::Str::from_bytes(b"v"))),
            0,
        );
    }
    assert_eq!(cmd(&mut e, c, &["dbsize"]), ":2\r\n");
    let ks = bulk_text(&cmd(&mut e, c, &["info", "keyspace"]));
    assert_eq!(
        ks,
        "# Keyspace\r\ndb0:keys=2,expires=0,avg_ttl=0\r\ndb3:keys=1,expires=0,avg_ttl=0\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["flushdb", "sync"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["dbsize"]), ":0\r\n");
    assert_eq!(e.server().keyspace.dbs[3].len(), 1);
    assert_eq!(cmd(&mut e, c, &["flushall"]), "+OK\r\n");
    assert_eq!(e.server().keyspace.dbs[3].len(), 0);
    assert_eq!(
        bulk_text(&cmd(&mut e, c, &["info", "keyspace"])),
        "# Keyspace\r\n"
    );
}

#[test]
fn key_hash_uses_the_hint_only_for_the_hinted_key() {
    use engine::command::Ctx;
    use engine::server::KeyHint;
    let mut srv = engine::Server::new(Config::default());
    let mut sess = engine::Session::new(engine::ClientId(1));
    let mut out = Vec::new();
    let buf = b"key1key2".to_vec();
    let (k1, k2) = (&buf[..4], &buf[4..]);
    // A deliberately wrong hint proves which path was taken.
    srv.key_hint = KeyHint {
        ptr: k1.as_ptr() as usize,
        len: 4,
        hash: 42,
    };
    let ctx = Ctx {
        srv: &mut srv,
        session: &mut sess,
        reply: resp::ReplyWriter::new(&mut out, resp::Protocol::Resp2),
        now_ms: 0,
    };
    assert_eq!(ctx.key_hash(k1), 42);
    assert_eq!(ctx.key_hash(k2), store::hash_key(b"key2"));
    assert_eq!(ctx.key_hash(&buf[..3]), store::hash_key(b"key"));
    assert_eq!(ctx.key_hash(b"key1"), store::hash_key(b"key1"));
}
