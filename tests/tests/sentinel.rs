//! Valkey Sentinel (Valkey 8.1 in sentinel mode) watching ringkv: three
//! sentinels find each other and the replicas through ringkv's INFO and
//! pub/sub, fail over when the primary is killed (the promoted replica
//! gets REPLICAOF NO ONE and CONFIG REWRITE inside MULTI, the other is
//! pointed at it), and turn the old primary into a replica when it comes
//! back. The data written before the kill is on every server after it.

use ringkv_e2e::replication::{follow, wait_caught_up};
use ringkv_e2e::server::TempDir;
use ringkv_e2e::v::{ok, strings, text};
use ringkv_e2e::{Backend, Opts, Server, e2e, q, within};

/// A sentinel watching `primary` as `mymaster` (quorum 2), reconfigured
/// quickly: down after 1 s, failovers 5 s apart.
fn sentinel(primary: &Server, dir: &TempDir, n: usize) -> Server {
    let conf = dir.path().join(format!("sentinel-{n}.conf"));
    std::fs::write(
        &conf,
        format!(
            "sentinel monitor mymaster 127.0.0.1 {} 2\n\
             sentinel down-after-milliseconds mymaster 1000\n\
             sentinel failover-timeout mymaster 5000\n",
            primary.port
        ),
    )
    .unwrap();
    Backend::Valkey.start(
        Opts::new()
            .conf(&conf)
            .no_backend_args()
            .arg_multi("sentinel", &[]),
    )
}

/// `line` on a fresh connection to `s`; `None` if the connection or the
/// command failed (a sentinel may be killing clients just then).
fn ask(s: &Server, line: &str) -> Option<redis::Value> {
    let client = redis::Client::open(s.url()).ok()?;
    let mut c = client.get_connection().ok()?;
    q(&mut c, line).ok()
}

/// `name`'s value in an INFO text, empty when the text lacks it (a look
/// that failed).
fn info_field(info: &str, name: &str) -> String {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The primary's address as a sentinel gives it.
fn primary_port(s: &mut redis::Connection) -> String {
    match q(s, "SENTINEL get-master-addr-by-name mymaster") {
        Ok(v) => strings(&Ok(v)).get(1).cloned().unwrap_or_default(),
        Err(e) => e,
    }
}

e2e!(
    ringkv_only fn valkey_sentinel_fails_a_ringkv_primary_over_to_a_ringkv_replica(b) {
        let mut primary = b.server();
        let old_port = primary.port;
        let replicas = [b.server(), b.server()];
        let pc = &mut primary.client();
        for r in &replicas {
            let rc = &mut r.client();
            follow(rc, &primary);
            wait_caught_up(pc, rc);
        }
        for i in 0..100 {
            assert_eq!(q(pc, &format!("SET key:{i} {i}")), ok());
        }
        for r in &replicas {
            wait_caught_up(pc, &mut r.client());
        }
        let dir = TempDir::new("sentinels");
        let sentinels: Vec<Server> = (0..3).map(|n| sentinel(&primary, &dir, n)).collect();
        let sc = &mut sentinels[0].client();
        within(30, "the sentinels to see each other and both replicas", || {
            let m = strings(&q(sc, "SENTINEL master mymaster"));
            let field = |name: &str| {
                m.iter()
                    .position(|f| f == name)
                    .map(|i| m[i + 1].clone())
                    .unwrap_or_default()
            };
            field("num-other-sentinels") == "2" && field("num-slaves") == "2"
        });
        primary.kill_9();
        within(60, "a sentinel failover to a replica", || {
            let port = primary_port(sc);
            port != old_port.to_string() && !port.is_empty()
        });
        // On a loaded machine a primary just promoted may miss a second of
        // the sentinels' PINGs and be failed over in turn (legitimately):
        // every look asks the sentinels for the primary of the moment.
        let info = |s: &Server| {
            // The sentinels kill every normal client of a server they
            // reconfigure (CLIENT KILL TYPE normal): each look connects
            // afresh, and a connection cut meanwhile is looked at again.
            ask(s, "INFO replication")
                .map(|v| text(&Ok(v)))
                .unwrap_or_default()
        };
        // (Not there yet is a nil, which is not a text.)
        let has = |s: &Server, key: &str, want: &str| {
            matches!(ask(s, &format!("GET {key}")),
                Some(redis::Value::BulkString(v)) if v == want.as_bytes())
        };
        // Every server but the primary follows it, up, with `key`.
        let settled = |sc: &mut redis::Connection, servers: &[&Server], key: &str, want: &str| {
            let Ok(port) = primary_port(sc).parse::<u16>() else {
                return false;
            };
            let Some(primary) = servers.iter().find(|s| s.port == port) else {
                return false;
            };
            info_field(&info(primary), "role") == "master"
                && servers.iter().filter(|s| s.port != port).all(|s| {
                    let i = info(s);
                    info_field(&i, "role") == "slave"
                        && info_field(&i, "master_port") == port.to_string()
                        && info_field(&i, "master_link_status") == "up"
                        && has(s, key, want)
                })
        };
        let both = [&replicas[0], &replicas[1]];
        within(30, "the other replica to follow the new primary", || {
            settled(sc, &both, "key:99", "99")
        });
        within(10, "a write on the new primary", || {
            let port = primary_port(sc);
            both.iter()
                .find(|s| s.port.to_string() == port)
                .is_some_and(|p| ask(p, "SET after:failover 1").is_some())
        });
        within(30, "both to hold every write", || {
            settled(sc, &both, "after:failover", "1")
        });
        // The old primary comes back on its port: the sentinels make it a
        // replica of the new one, and it gets what was written meanwhile.
        let back = b.start(Opts::new().port(old_port));
        let all = [&replicas[0], &replicas[1], &back];
        within(60, "the old primary to be made a replica", || {
            settled(sc, &all, "after:failover", "1")
        });
        drop(sentinels);
    }
);
