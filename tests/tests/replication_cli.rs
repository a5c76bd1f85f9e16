//! What `valkey-cli` asks of a primary: `--rdb` (`REPLCONF rdb-only 1`,
//! then SYNC: the RDB and nothing after it), `--functions-rdb`
//! (`REPLCONF rdb-filter-only functions`: an RDB of the libraries alone)
//! and old-style SYNC replicas, which send no ACKs. Valkey 8.1 runs beside
//! as the oracle.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ringkv_e2e::replication::{handshake_line, replica_states};
use ringkv_e2e::server::{TempDir, valkey_binary};
use ringkv_e2e::v::{int_of, ok};
use ringkv_e2e::{Backend, Opts, Server, e2e, q, within};

const LIBRARY: &str =
    "#!lua name=cli_lib\nserver.register_function('cli_f', function() return 1 end)";

/// A primary with 50 keys and one function library.
fn primary(b: Backend, diskless: bool) -> Server {
    let p = b.start(
        Opts::new()
            .arg("save", "")
            .arg("repl-diskless-sync", if diskless { "yes" } else { "no" }),
    );
    let pc = &mut p.client();
    for i in 0..50 {
        assert_eq!(q(pc, &format!("SET cli:{i} v{i}")), ok());
    }
    let loaded = ringkv_e2e::query(pc, &["FUNCTION", "LOAD", LIBRARY]);
    assert_eq!(ringkv_e2e::v::text(&loaded), "cli_lib");
    p
}

/// `valkey-cli -p PORT <flag> <file>`: it must succeed.
fn cli_dump(p: &Server, flag: &str, file: &Path) {
    let cli = valkey_binary().with_file_name("valkey-cli");
    let out = Command::new(cli)
        .args(["-h", "127.0.0.1", "-p", &p.port.to_string(), flag])
        .arg(file)
        .output()
        .expect("run valkey-cli");
    assert!(
        out.status.success() && file.exists(),
        "valkey-cli {flag}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What Valkey 8.1 finds in an RDB file: its key count, and whether the
/// library's function is there.
fn contents(file: &Path) -> (i64, bool) {
    let dir = TempDir::new("cli-rdb-load");
    std::fs::copy(file, dir.path().join("dump.rdb")).expect("copy the RDB");
    let v = Backend::Valkey.start(Opts::new().dir(dir.path()));
    v.wait_loaded();
    let vc = &mut v.client();
    let has_function = q(vc, "FCALL cli_f 0") == Ok(redis::Value::Int(1));
    (int_of(&q(vc, "DBSIZE")), has_function)
}

/// Both dumps of `p`, and what each holds.
fn dumps_of(p: &Server) -> [(i64, bool); 2] {
    let out = TempDir::new("cli-rdb");
    let (all, functions) = (out.path().join("all.rdb"), out.path().join("fn.rdb"));
    cli_dump(p, "--rdb", &all);
    cli_dump(p, "--functions-rdb", &functions);
    let pc = &mut p.client();
    // The primary let go of both: neither is a replica any more.
    within(10, "the rdb-only replicas to be gone", || {
        replica_states(pc).is_empty()
    });
    [contents(&all), contents(&functions)]
}

e2e!(
    ringkv_only fn valkey_cli_rdb_and_functions_rdb_get_what_valkey_gives_them(b) {
        for diskless in [true, false] {
            let want = dumps_of(&primary(Backend::Valkey, diskless));
            assert_eq!(want, [(50, true), (0, true)], "Valkey 8.1, the oracle");
            let got = dumps_of(&primary(b, diskless));
            assert_eq!(got, want, "ringkv, repl-diskless-sync {diskless}");
        }
    }
);

/// Sends each of `handshake` and reads its one-line reply (a replica
/// waits for each: Valkey refuses a SYNC with replies still unsent), then
/// sends `last` and reads until the server closes the connection (or
/// `secs` pass): the replies, what followed `last`, and whether it closed.
fn exchange(port: u16, handshake: &[&str], last: &str, secs: u64) -> (Vec<String>, Vec<u8>, bool) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let replies: Vec<String> = handshake
        .iter()
        .map(|line| handshake_line(&mut s, line))
        .collect();
    s.write_all(format!("{last}\r\n").as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        match s.read(&mut buf) {
            Ok(0) => return (replies, got, true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    (replies, got, false)
}

/// An rdb-only SYNC, as `valkey-cli --rdb` sends it: the replies to the
/// REPLCONFs, then `$EOF:<mark>`, the RDB and the mark, and the close.
fn rdb_only_shape(p: &Server) -> (String, bool) {
    let (replies, got, closed) = exchange(
        p.port,
        &["REPLCONF capa eof", "REPLCONF rdb-only 1"],
        "SYNC",
        10,
    );
    assert_eq!(replies, ["+OK", "+OK"]);
    let text = String::from_utf8_lossy(&got);
    let text = text.trim_start_matches('\n');
    let mark = text
        .strip_prefix("$EOF:")
        .map(|t| &t[..40])
        .unwrap_or_else(|| panic!("no EOF-marked RDB: {text:?}"));
    let body = &text[5 + 40 + 2..];
    let shape = if body.ends_with(mark) && body.starts_with("REDIS") {
        "an RDB ended by its mark, nothing after"
    } else {
        "something else"
    };
    (shape.to_string(), closed)
}

e2e!(
    ringkv_only fn an_rdb_only_sync_ends_with_its_rdb_and_the_primary_closes(b) {
        let want = rdb_only_shape(&primary(Backend::Valkey, true));
        assert_eq!(
            want,
            ("an RDB ended by its mark, nothing after".to_string(), true),
            "Valkey 8.1, the oracle"
        );
        assert_eq!(rdb_only_shape(&primary(b, true)), want, "ringkv");
    }
);

/// Replies to the handshake options valkey-cli and replicas send, and to
/// a SYNC that asks for a filtered RDB without `capa eof`.
fn replconf_replies(p: &Server) -> Vec<String> {
    let pc = &mut p.client();
    let mut replies: Vec<String> = [
        "REPLCONF rdb-only 1",
        "REPLCONF rdb-only 0",
        "REPLCONF rdb-only 2",
        "REPLCONF rdb-only x",
        "REPLCONF rdb-filter-only functions",
        "REPLCONF rdb-filter-only \"\"",
        "REPLCONF rdb-filter-only keys",
    ]
    .iter()
    .map(|line| format!("{:?}", q(pc, line)))
    .collect();
    let (_, got, _) = exchange(p.port, &["REPLCONF rdb-filter-only functions"], "SYNC", 1);
    replies.push(String::from_utf8_lossy(&got).into_owned());
    replies
}

e2e!(
    ringkv_only fn rdb_only_and_rdb_filter_only_are_checked_as_valkey_checks_them(b) {
        let want = replconf_replies(&primary(Backend::Valkey, true));
        assert!(
            want.last().unwrap().contains("Filtered replica requires EOF capability"),
            "{want:?}"
        );
        assert_eq!(replconf_replies(&primary(b, true)), want);
    }
);

/// A SYNC replica (no `capa eof`: the RDB comes with its length) that
/// reads and never ACKs, for three seconds of writes with `repl-timeout 1`:
/// whether it got the last write and is still listed.
fn sync_replica_outlives_repl_timeout(p: &Server) -> (bool, usize) {
    let pc = &mut p.client();
    assert_eq!(q(pc, "CONFIG SET repl-timeout 1"), ok());
    let mut s = TcpStream::connect(("127.0.0.1", p.port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    s.write_all(b"SYNC\r\n").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let until = Instant::now() + Duration::from_secs(3);
    let mut i = 0;
    while Instant::now() < until {
        assert_eq!(q(pc, &format!("SET late {i}")), ok());
        i += 1;
        if let Ok(n) = s.read(&mut buf) {
            got.extend_from_slice(&buf[..n]);
        }
    }
    assert_eq!(q(pc, "SET late last"), ok());
    let tail = b"$4\r\nlate\r\n$4\r\nlast\r\n";
    let seen = within_secs(5, || {
        if let Ok(n) = s.read(&mut buf) {
            got.extend_from_slice(&buf[..n]);
        }
        got.windows(tail.len()).any(|w| w == tail)
    });
    (seen, replica_states(pc).len())
}

/// Polls `f` until it holds or `secs` pass.
fn within_secs(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        if f() {
            return true;
        }
    }
    false
}

e2e!(
    ringkv_only fn a_sync_replica_that_never_acks_is_not_timed_out(b) {
        let want = sync_replica_outlives_repl_timeout(&primary(Backend::Valkey, true));
        assert_eq!(want, (true, 1), "Valkey 8.1, the oracle");
        assert_eq!(sync_replica_outlives_repl_timeout(&primary(b, true)), want, "ringkv");
    }
);

/// `PING` and `SYNC` in one write, then a `PING` once their replies are
/// in: what the client reads, and how many replicas the primary lists.
fn pipelined_sync(p: &Server) -> (String, usize) {
    let mut s = ringkv_e2e::tcp(p.port);
    s.write_all(b"PING\r\nSYNC\r\n").unwrap();
    let mut got = Vec::new();
    let read_lines = |s: &mut TcpStream, got: &mut Vec<u8>, lines: usize| {
        let mut buf = [0u8; 512];
        while got.iter().filter(|&&b| b == b'\n').count() < lines {
            let n = s.read(&mut buf).expect("a reply");
            assert!(n > 0, "closed: {:?}", String::from_utf8_lossy(got));
            got.extend_from_slice(&buf[..n]);
        }
    };
    read_lines(&mut s, &mut got, 2);
    s.write_all(b"PING\r\n").unwrap();
    read_lines(&mut s, &mut got, 3);
    let pc = &mut p.client();
    (
        String::from_utf8_lossy(&got).into_owned(),
        replica_states(pc).len(),
    )
}

e2e!(
    ringkv_only fn a_sync_pipelined_behind_a_reply_is_refused_as_valkeys_is(b) {
        let want = pipelined_sync(&primary(Backend::Valkey, true));
        assert_eq!(
            want,
            (
                "+PONG\r\n-ERR SYNC and PSYNC are invalid with pending output\r\n+PONG\r\n"
                    .to_string(),
                0
            ),
            "Valkey 8.1, the oracle"
        );
        assert_eq!(pipelined_sync(&primary(b, true)), want, "ringkv");
    }
);

/// A diskless RDB from a primary on `b` with `rdbcompression no` and
/// `rdbchecksum no` (and a key whose value LZF would shrink): whether the
/// value is in it as it is, and whether its checksum is left at zero.
fn diskless_rdb_format(b: Backend) -> (bool, bool) {
    let p = b.start(
        Opts::new()
            .arg("save", "")
            .arg("rdbcompression", "no")
            .arg("rdbchecksum", "no"),
    );
    let pc = &mut p.client();
    let value = "ab".repeat(500);
    assert_eq!(q(pc, &format!("SET plain {value}")), ok());
    let (replies, got, _) = exchange(
        p.port,
        &["REPLCONF capa eof", "REPLCONF rdb-only 1"],
        "SYNC",
        10,
    );
    assert_eq!(replies, ["+OK", "+OK"]);
    let start = got.iter().position(|&b| b != b'\n').expect("an RDB");
    let framed = &got[start..];
    assert!(
        framed.starts_with(b"$EOF:"),
        "{:?}",
        String::from_utf8_lossy(framed)
    );
    let mark = &framed[5..45];
    let body = framed[47..]
        .strip_suffix(mark)
        .expect("the RDB ends with its mark");
    (
        body.windows(value.len()).any(|w| w == value.as_bytes()),
        body.ends_with(&[0u8; 8]) && body[body.len() - 9] == 0xff,
    )
}

e2e!(
    ringkv_only fn a_diskless_rdb_follows_rdbcompression_and_rdbchecksum(b) {
        let want = diskless_rdb_format(Backend::Valkey);
        assert_eq!(want, (true, true), "Valkey 8.1, the oracle");
        assert_eq!(diskless_rdb_format(b), want, "ringkv");
    }
);
