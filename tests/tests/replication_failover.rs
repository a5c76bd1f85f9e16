//! FAILOVER: a primary hands over to its replica and follows it, with
//! writes paused meanwhile and none lost. ringkv on either side, Valkey
//! 8.1 on the other, and two Valkey servers doing the same as the oracle
//! for what a client sees (replies, errors, INFO, roles).

use ringkv_e2e::dataset::{fill, plain_view};
use ringkv_e2e::replication::{assert_same, follow, stat, wait_caught_up};
use ringkv_e2e::v::{ok, strings, text};
use ringkv_e2e::{Backend, Opts, Server, e2e, q, query, within};
use std::time::Duration;

fn start(backend: Backend) -> Server {
    backend.start(Opts::new().arg("repl-diskless-sync-delay", "0"))
}

/// A primary of `top` with `fill`'s data and a replica of `bottom` in
/// sync with it.
fn pair(top: Backend, bottom: Backend) -> (Server, Server) {
    synced(start(top), start(bottom))
}

/// `p` filled and `r` its replica, in sync and listed online.
fn synced(p: Server, r: Server) -> (Server, Server) {
    let (pc, rc) = (&mut p.client(), &mut r.client());
    fill(pc);
    follow(rc, &p);
    wait_caught_up(pc, rc);
    listed_online(pc);
    (p, r)
}

/// The replica is in sync on its side; wait until the primary lists
/// it as online too (a FAILOVER TO it needs that).
fn listed_online(pc: &mut redis::Connection) {
    within(10, "the primary to list its replica online", || {
        stat(pc, "replication", "slave0").contains("state=online")
    });
}

fn role(c: &mut redis::Connection) -> String {
    strings(&q(c, "ROLE"))[0].clone()
}

fn failover_state(c: &mut redis::Connection) -> String {
    stat(c, "replication", "master_failover_state")
}

/// A write sent while the failover runs: it waits, then meets a replica.
fn paused_write(p: &Server) -> std::thread::JoinHandle<Result<redis::Value, String>> {
    let mut c = p.client();
    std::thread::spawn(move || q(&mut c, "SET during:failover 1"))
}

fn hand_over(top: Backend, bottom: Backend) {
    let (p, r) = pair(top, bottom);
    let (pc, rc) = (&mut p.client(), &mut r.client());
    let want = plain_view(pc);
    let full_syncs = stat(pc, "stats", "sync_full");
    assert_eq!(q(pc, "FAILOVER"), ok());
    let write = paused_write(&p);
    within(20, "the failover to end", || {
        failover_state(pc) == "no-failover" && role(pc) == "slave" && role(rc) == "master"
    });
    let err = write.join().unwrap().unwrap_err();
    assert!(err.starts_with("READONLY "), "{top:?} -> {bottom:?}: {err}");
    wait_caught_up(rc, pc);
    // No full sync either way: the new primary continued the old one.
    assert_eq!(stat(rc, "stats", "sync_full"), "0", "{top:?} -> {bottom:?}");
    assert_eq!(
        stat(rc, "stats", "sync_partial_ok"),
        "1",
        "{top:?} -> {bottom:?}"
    );
    assert_eq!(stat(pc, "stats", "sync_full"), full_syncs);
    assert_same(&plain_view(rc), &want, "the new primary");
    // And the old primary follows the new one's writes.
    assert_eq!(q(rc, "SET after:failover 2"), ok());
    wait_caught_up(rc, pc);
    assert_eq!(text(&q(pc, "GET after:failover")), "2");
    let r_info = text(&q(pc, "INFO replication"));
    assert_eq!(
        ringkv_e2e::info_field(&r_info, "master_port"),
        r.port.to_string()
    );
}

e2e!(
    ringkv_only fn failover_hands_over_to_the_replica_that_caught_up(b) {
        hand_over(b, b);
        hand_over(b, Backend::Valkey);
        hand_over(Backend::Valkey, b);
        hand_over(Backend::Valkey, Backend::Valkey);
    }
);

/// Errors, on a standalone server, a replica and a primary with one.
fn error_replies(b: Backend) -> Vec<String> {
    let (p, r) = pair(b, b);
    let (pc, rc) = (&mut p.client(), &mut r.client());
    let alone = start(b);
    let ac = &mut alone.client();
    let reply = |c: &mut redis::Connection, line: &str| match q(c, line) {
        Ok(v) => format!("{v:?}"),
        Err(e) => e,
    };
    let mut out = Vec::new();
    for line in [
        "FAILOVER",
        "FAILOVER ABORT",
        "FAILOVER TIMEOUT 0",
        "FAILOVER TIMEOUT -5",
        "FAILOVER TIMEOUT x",
        "FAILOVER TO 127.0.0.1",
        "FAILOVER TO 127.0.0.1 x",
        "FAILOVER FORCE",
        "FAILOVER ABORT FORCE",
        "FAILOVER BOGUS",
    ] {
        out.push(format!("alone {line}: {}", reply(ac, line)));
    }
    out.push(format!("replica FAILOVER: {}", reply(rc, "FAILOVER")));
    let bad_port = (r.port as u32 + 1).to_string();
    for line in [
        "FAILOVER FORCE".to_string(),
        "FAILOVER TO 127.0.0.1 1 FORCE".to_string(),
        "FAILOVER TIMEOUT 100 FORCE".to_string(),
        format!("FAILOVER TO 127.0.0.1 {bad_port}"),
        "FAILOVER TO 127.0.0.1 1 TO 127.0.0.1 2".to_string(),
    ] {
        out.push(format!("primary {line}: {}", reply(pc, &line)));
    }
    // The port's number differs between runs; the error does not.
    out.into_iter()
        .map(|l| l.replace(&bad_port, "PORT"))
        .collect()
}

e2e!(
    ringkv_only fn failover_errors_are_valkeys(b) {
        assert_eq!(error_replies(b), error_replies(Backend::Valkey));
    }
);

/// The replica is stopped (SIGSTOP) and one write behind: it cannot
/// catch up, so the failover waits with writes paused.
fn stuck_replica(top: Backend, bottom: Backend) -> (Server, Server) {
    let (p, r) = pair(top, bottom);
    let pid = r.pid().expect("a pid") as i32;
    // SAFETY: kill(2) with a pid this test started; no memory is involved.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    assert_eq!(q(&mut p.client(), "SET behind 1"), ok());
    (p, r)
}

fn resume(r: &Server) {
    let pid = r.pid().expect("a pid") as i32;
    // SAFETY: as in `stuck_replica`.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
}

/// What a client sees of a failover that cannot complete: the state
/// while it waits, then (aborted by `end`) the paused write's reply and
/// the roles.
fn aborted(b: Backend, end: &str) -> Vec<String> {
    let (p, r) = stuck_replica(b, b);
    let pc = &mut p.client();
    let mut seen = Vec::new();
    let start = if end == "timeout" {
        "FAILOVER TIMEOUT 3000"
    } else {
        "FAILOVER"
    };
    assert_eq!(q(pc, start), ok());
    let write = paused_write(&p);
    std::thread::sleep(Duration::from_millis(300));
    seen.push(format!("waiting: {}", failover_state(pc)));
    let info = text(&q(pc, "INFO clients"));
    for f in ["paused_reason", "paused_actions"] {
        seen.push(format!("{f}: {}", ringkv_e2e::info_field(&info, f)));
    }
    // The end of time less now, in ms.
    let left: i64 = ringkv_e2e::info_field(&info, "paused_timeout_milliseconds")
        .parse()
        .unwrap();
    seen.push(format!("paused for ever: {}", left > i64::MAX / 2));
    seen.push(format!("write finished early: {}", write.is_finished()));
    if end == "abort" {
        seen.push(format!("ABORT: {:?}", q(pc, "FAILOVER ABORT")));
    }
    within(10, "the failover to be aborted", || {
        failover_state(pc) == "no-failover"
    });
    seen.push(format!("the paused write: {:?}", write.join().unwrap()));
    seen.push(format!("role: {}", role(pc)));
    let info = text(&q(pc, "INFO clients"));
    seen.push(format!(
        "paused_reason after: {}",
        ringkv_e2e::info_field(&info, "paused_reason")
    ));
    resume(&r);
    seen
}

e2e!(
    ringkv_only fn a_failover_that_times_out_or_is_aborted_leaves_the_primary_as_it_was(b) {
        for end in ["timeout", "abort"] {
            assert_eq!(aborted(b, end), aborted(Backend::Valkey, end), "{end}");
        }
    }
);

/// One RESP command from `r`: its arguments.
fn read_command(r: &mut impl std::io::BufRead) -> Vec<String> {
    let mut line = String::new();
    let mut next_line = |r: &mut dyn std::io::BufRead| {
        line.clear();
        r.read_line(&mut line).expect("a line from the primary");
        line.trim_end().to_string()
    };
    let n: usize = next_line(r)[1..].parse().expect("*<n>");
    (0..n)
        .map(|_| {
            let len: usize = next_line(r)[1..].parse().expect("$<len>");
            let mut arg = vec![0; len + 2];
            r.read_exact(&mut arg).expect("an argument");
            String::from_utf8_lossy(&arg[..len]).into_owned()
        })
        .collect()
}

/// Stands in for the failover's target on `listener`: answers the
/// handshake, refuses the PSYNC; returns the PSYNC's arguments.
fn refusing_target(listener: std::net::TcpListener) -> Vec<String> {
    use std::io::Write;
    let (conn, _) = listener.accept().expect("the primary connects");
    conn.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut w = conn.try_clone().unwrap();
    let mut r = std::io::BufReader::new(conn);
    loop {
        let cmd = read_command(&mut r);
        let reply: &[u8] = match cmd[0].to_ascii_uppercase().as_str() {
            "PING" => b"+PONG\r\n",
            "PSYNC" => {
                w.write_all(b"-ERR PSYNC FAILOVER replid must match my replid.\r\n")
                    .unwrap();
                return cmd;
            }
            _ => b"+OK\r\n",
        };
        w.write_all(reply).unwrap();
    }
}

/// A primary of `b` with `fill`'s data and a Valkey replica in sync that
/// announces `port` as its own: the primary hands over "to it" and
/// connects there, to whatever the test put on that port.
fn announcing_replica(b: Backend, port: &str) -> (Server, Server) {
    let r = Backend::Valkey.start(
        Opts::new()
            .arg("replica-announce-port", port)
            .arg("repl-diskless-sync-delay", "0"),
    );
    synced(start(b), r)
}

/// A failover whose target refuses: what the primary asked and became.
fn refused(b: Backend) -> Vec<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let fake_port = listener.local_addr().unwrap().port().to_string();
    let target = std::thread::spawn(move || refusing_target(listener));
    let (p, _r) = announcing_replica(b, &fake_port);
    let pc = &mut p.client();
    let id = stat(pc, "replication", "master_replid");
    let offset = stat(pc, "replication", "master_repl_offset");
    let to = ["FAILOVER", "TO", "127.0.0.1", &fake_port];
    assert_eq!(query(pc, &to), ok());
    let psync = target.join().unwrap();
    within(20, "the refused failover to end", || {
        failover_state(pc) == "no-failover" && role(pc) == "master"
    });
    let mut seen = vec![
        format!("PSYNC args: {}", psync.len()),
        format!(
            "PSYNC FAILOVER: {}",
            psync.get(3).map_or("", String::as_str)
        ),
        format!("PSYNC our id: {}", psync[1] == id),
        format!(
            "PSYNC offset + 1: {}",
            psync[2] == (offset.parse::<u64>().unwrap() + 1).to_string()
        ),
        format!(
            "id changed: {}",
            stat(pc, "replication", "master_replid") != id
        ),
        format!(
            "old id kept: {}",
            stat(pc, "replication", "master_replid2") == id
        ),
        format!(
            "logged: {}",
            p.log().contains("Failover target rejected psync request")
        ),
    ];
    seen.push(format!("write: {:?}", q(pc, "SET writable 1")));
    seen
}

/// A failover whose target hangs up at once, every time: the primary
/// keeps trying (as a replica of it, writes paused) until ABORT.
fn unreachable(b: Backend) -> Vec<String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let fake_port = listener.local_addr().unwrap().port().to_string();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = accepted.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            drop(conn);
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let (p, _r) = announcing_replica(b, &fake_port);
    let pc = &mut p.client();
    assert_eq!(
        query(pc, &["FAILOVER", "TO", "127.0.0.1", &fake_port]),
        ok()
    );
    let write = paused_write(&p);
    within(20, "a second attempt to reach the target", || {
        accepted.load(std::sync::atomic::Ordering::SeqCst) >= 2
    });
    let mut seen = vec![
        format!("state: {}", failover_state(pc)),
        format!("role: {}", role(pc)),
        format!("write waits: {}", !write.is_finished()),
        format!("ABORT: {:?}", q(pc, "FAILOVER ABORT")),
    ];
    within(10, "the abort", || failover_state(pc) == "no-failover");
    seen.push(format!("role after: {}", role(pc)));
    seen.push(format!("the paused write: {:?}", write.join().unwrap()));
    seen
}

e2e!(
    ringkv_only fn an_unreachable_target_is_retried_until_abort(b) {
        assert_eq!(unreachable(b), unreachable(Backend::Valkey));
    }
);

e2e!(
    ringkv_only fn a_target_that_refuses_the_handover_leaves_a_primary(b) {
        // As Valkey's: a primary again, under a new id, writes going on.
        let got = refused(b);
        assert_eq!(got, refused(Backend::Valkey));
        assert!(got.contains(&"PSYNC FAILOVER: FAILOVER".to_string()), "{got:?}");
    }
);

e2e!(
    ringkv_only fn psync_failover_is_refused_as_valkey_refuses_it(b) {
        // Sent to a primary, or to a replica with another id.
        let run = |backend: Backend| {
            let (p, r) = pair(backend, backend);
            let mut out = Vec::new();
            for s in [&p, &r] {
                let mut raw = s.raw();
                let reply = raw.cmd(&["PSYNC", &"1".repeat(40), "1", "FAILOVER"]);
                out.push(format!("{reply:?}"));
            }
            out
        };
        assert_eq!(run(b), run(Backend::Valkey));
    }
);
