//! What the replication tests share: INFO fields, following a primary,
//! waiting for a replica to catch up, and comparing two servers' datasets.

use crate::dataset::plain_view;
use crate::v::{int_of, ok, text};
use crate::{Server, info_field, q, query, within};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// One field of `INFO <section>`.
pub fn stat(c: &mut redis::Connection, section: &str, field: &str) -> String {
    info_field(&text(&q(c, &format!("INFO {section}"))), field)
}

/// A replica's `master_sync_read_bytes`: how much of its full sync's RDB
/// has come (0 while no transfer runs and the field is absent).
pub fn sync_read_bytes(c: &mut redis::Connection) -> u64 {
    text(&q(c, "INFO replication"))
        .lines()
        .find_map(|l| l.strip_prefix("master_sync_read_bytes:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Sends `line` on a raw replica connection and reads its one-line reply
/// (a replica waits for each: Valkey refuses a SYNC behind a reply still
/// unsent). Byte by byte, so that nothing after the reply is consumed.
pub fn handshake_line(s: &mut std::net::TcpStream, line: &str) -> String {
    use std::io::{Read, Write};
    s.write_all(format!("{line}\r\n").as_bytes()).unwrap();
    let mut reply = Vec::new();
    let mut byte = [0u8; 1];
    while !reply.ends_with(b"\r\n") {
        match s.read(&mut byte) {
            Ok(1) => reply.push(byte[0]),
            other => panic!("no reply to {line}: {other:?}"),
        }
    }
    String::from_utf8_lossy(&reply).trim_end().to_string()
}

/// `slaveN`'s `state=` on the primary, for each replica listed.
pub fn replica_states(c: &mut redis::Connection) -> Vec<String> {
    let info = text(&q(c, "INFO replication"));
    info.lines()
        .filter(|l| l.starts_with("slave") && l.contains("state="))
        .filter_map(|l| {
            l.split("state=")
                .nth(1)?
                .split(',')
                .next()
                .map(String::from)
        })
        .collect()
}

/// REPLICAOF the primary on loopback.
pub fn follow(replica: &mut redis::Connection, primary: &Server) {
    assert_eq!(
        query(
            replica,
            &["REPLICAOF", "127.0.0.1", &primary.port.to_string()],
        ),
        ok()
    );
}

/// Wait until the replica's link is up and it has applied everything the
/// primary has sent.
pub fn wait_caught_up(primary: &mut redis::Connection, replica: &mut redis::Connection) {
    within(30, "the replica to catch up", || {
        let p = text(&q(primary, "INFO replication"));
        let r = text(&q(replica, "INFO replication"));
        info_field(&r, "master_link_status") == "up"
            && info_field(&r, "slave_repl_offset") == info_field(&p, "master_repl_offset")
    });
}

/// 20 writes on the primary, each followed by `WAIT 1 5000`: each is
/// acknowledged by the one replica within `limit`, and is there.
pub fn writes_acknowledged_by_wait(
    primary: &mut redis::Connection,
    replica: &mut redis::Connection,
    limit: Duration,
) {
    for i in 0..20 {
        assert_eq!(query(primary, &["SET", "k", &i.to_string()]), ok());
        let t = Instant::now();
        assert_eq!(int_of(&q(primary, "WAIT 1 5000")), 1, "write {i}");
        assert!(t.elapsed() < limit, "WAIT took {:?}", t.elapsed());
        assert_eq!(text(&q(replica, "GET k")), i.to_string());
    }
}

/// The two views are the same; on failure, only the keys that differ
/// are shown (values cut short).
///
/// Scores are compared as numbers: redis-server 7 prints 17 significant
/// digits (`1.0000000000000001e-05`) where Valkey 8 and ringkv print the
/// shortest form (`0.00001`).
pub fn assert_same(got: &BTreeMap<String, String>, want: &BTreeMap<String, String>, what: &str) {
    let (got, want) = (&numeric_scores(got), &numeric_scores(want));
    let cut = |v: Option<&String>| v.map(|v| v.chars().take(120).collect::<String>());
    let diff: Vec<String> = got
        .keys()
        .chain(want.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|k| got.get(*k) != want.get(*k))
        .map(|k| {
            format!(
                "{k}: replica {:?}, primary {:?}",
                cut(got.get(k)),
                cut(want.get(k))
            )
        })
        .collect();
    assert!(diff.is_empty(), "{what}:\n{}", diff.join("\n"));
}

fn numeric_scores(view: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let norm = |v: &String| -> String {
        let Some(rest) = v.strip_prefix("zset/") else {
            return v.clone();
        };
        let (ttl, items) = rest.split_once('/').unwrap_or((rest, ""));
        let items: Vec<String> = items
            .split(',')
            .enumerate()
            .map(|(i, x)| match x.parse::<f64>() {
                Ok(f) if i % 2 == 1 => format!("{f:?}"),
                _ => x.to_string(),
            })
            .collect();
        format!("zset/{ttl}/{}", items.join(","))
    };
    view.iter().map(|(k, v)| (k.clone(), norm(v))).collect()
}

/// The primary's dataset once its short TTLs have run out and its active
/// expiry has sent their DELs.
pub fn settled_view(c: &mut redis::Connection) -> BTreeMap<String, String> {
    std::thread::sleep(Duration::from_millis(300));
    plain_view(c)
}

/// A write on the primary reaches both replicas, which then hold exactly
/// the primary's dataset.
pub fn both_follow_a_write(
    primary: &mut redis::Connection,
    a: &mut redis::Connection,
    b: &mut redis::Connection,
) {
    assert_eq!(q(primary, "SET after sync"), ok());
    wait_caught_up(primary, a);
    wait_caught_up(primary, b);
    let want = plain_view(primary);
    assert_same(&plain_view(a), &want, "first replica");
    assert_same(&plain_view(b), &want, "second replica");
}

/// The commands in the incr files of the AOF in `dir`, as text.
pub fn incr_files_text(dir: &std::path::Path) -> String {
    let mut names: Vec<_> = std::fs::read_dir(dir.join("appendonlydir"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".incr.aof"))
        .collect();
    names.sort();
    names
        .iter()
        .map(|p| String::from_utf8_lossy(&std::fs::read(p).unwrap()).into_owned())
        .collect()
}
