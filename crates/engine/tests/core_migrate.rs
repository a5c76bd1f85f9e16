//! MIGRATE against a scripted target: the request the engine writes
//! (AUTH, SELECT only when the connection's database changes, RESTORE
//! with the TTL left), what a reply or a socket error does to the keys,
//! the retry, and what goes to replicas and the AOF. The same replies
//! from a real Valkey target are compared with Valkey's in
//! tests/tests/migrate.rs.

mod core_util;
use core_util::*;
use ringkv_engine::migrate::{MigrateLink, Migrator};
use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the scripted target does and saw.
#[derive(Default)]
struct Script {
    /// Per connection made: the reply lines it gives (then EOF).
    conns: VecDeque<VecDeque<io::Result<Vec<u8>>>>,
    /// Everything written, per connection.
    sent: Vec<Vec<u8>>,
    connects: usize,
}

#[derive(Clone, Default)]
struct Target(Arc<Mutex<Script>>);

struct Link {
    script: Target,
    replies: VecDeque<io::Result<Vec<u8>>>,
    db: Option<i64>,
    index: usize,
}

impl MigrateLink for Link {
    fn db(&self) -> Option<i64> {
        self.db
    }
    fn set_db(&mut self, db: Option<i64>) {
        self.db = db;
    }
    fn send(&mut self, bytes: &[u8], _: Duration) -> io::Result<()> {
        let mut s = self.script.0.lock().unwrap();
        s.sent[self.index].extend_from_slice(bytes);
        Ok(())
    }
    fn read_line(&mut self, _: Duration) -> io::Result<Vec<u8>> {
        self.replies
            .pop_front()
            .unwrap_or_else(|| Err(io::ErrorKind::UnexpectedEof.into()))
    }
}

struct Sockets {
    script: Target,
    link: Option<Link>,
}

impl Migrator for Sockets {
    fn connect(&mut self, _: &str, _: u16, _: Duration) -> io::Result<&mut dyn MigrateLink> {
        if self.link.is_none() {
            let mut s = self.script.0.lock().unwrap();
            s.connects += 1;
            let replies = s.conns.pop_front().unwrap_or_default();
            s.sent.push(Vec::new());
            let index = s.sent.len() - 1;
            self.link = Some(Link {
                script: self.script.clone(),
                replies,
                db: None,
                index,
            });
        }
        Ok(self.link.as_mut().unwrap())
    }
    fn close(&mut self, _: &str, _: u16) {
        self.link = None;
    }
    fn close_idle(&mut self, _: Duration) {}
    fn cached(&self) -> usize {
        usize::from(self.link.is_some())
    }
}

/// An engine whose MIGRATE talks to `conns` (reply lines per connection).
fn setup(conns: Vec<Vec<io::Result<&str>>>) -> (ringkv_engine::Engine, Target) {
    let mut e = engine();
    e.pin_clock(Some(1_000_000));
    let target = Target::default();
    {
        let mut s = target.0.lock().unwrap();
        s.conns = conns
            .into_iter()
            .map(|c| {
                c.into_iter()
                    .map(|r| r.map(|l| l.as_bytes().to_vec()))
                    .collect()
            })
            .collect();
    }
    e.set_migrator(Box::new(Sockets {
        script: target.clone(),
        link: None,
    }));
    (e, target)
}

/// The commands written on connection `i`, as words (payloads shown as
/// `<payload>`).
fn sent(t: &Target, i: usize) -> Vec<Vec<String>> {
    let s = t.0.lock().unwrap();
    let mut out = Vec::new();
    let mut rest: &[u8] = &s.sent[i];
    while !rest.is_empty() {
        let (argv, used) = parse_command(rest);
        out.push(argv);
        rest = &rest[used..];
    }
    out
}

fn parse_command(b: &[u8]) -> (Vec<String>, usize) {
    let text = |from: usize| {
        let end = from + b[from..].windows(2).position(|w| w == b"\r\n").unwrap();
        (
            std::str::from_utf8(&b[from..end]).unwrap().to_string(),
            end + 2,
        )
    };
    let (n, mut at) = text(1);
    let mut argv = Vec::new();
    for _ in 0..n.parse::<usize>().unwrap() {
        let (len, start) = text(at + 1);
        let len: usize = len.parse().unwrap();
        let word = &b[start..start + len];
        argv.push(match std::str::from_utf8(word) {
            Ok(w) if !w.contains('\0') && w.is_ascii() => w.to_string(),
            _ => "<payload>".to_string(),
        });
        at = start + len + 2;
    }
    (argv, at)
}

#[test]
fn the_request_selects_once_and_sends_what_is_left_of_the_ttl() {
    let ok = || Ok("+OK");
    let (mut e, t) = setup(vec![vec![ok(), ok(), ok(), ok(), ok(), ok()]]);
    let c = connect(&mut e);
    cmd(&mut e, c, &["set", "a", "1"]);
    cmd(&mut e, c, &["set", "b", "2", "px", "5000"]);
    cmd(&mut e, c, &["set", "c", "3"]);
    let mut r = e.attach_effects();
    let m = [
        "migrate", "h", "1", "", "4", "100", "replace", "auth2", "u", "p",
    ];
    let reply = cmd(&mut e, c, &[&m[..], &["keys", "a", "nope", "b"]].concat());
    assert_eq!(reply, "+OK\r\n");
    let reply = cmd(&mut e, c, &["migrate", "h", "1", "c", "4", "100", "copy"]);
    assert_eq!(reply, "+OK\r\n");
    let w = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        sent(&t, 0),
        [
            w(&["AUTH", "u", "p"]),
            w(&["SELECT", "4"]),
            w(&["RESTORE", "a", "0", "<payload>", "REPLACE"]),
            w(&["RESTORE", "b", "5000", "<payload>", "REPLACE"]),
            // The same connection, the database already selected.
            w(&["RESTORE", "c", "0", "<payload>"]),
        ]
    );
    assert_eq!(cmd(&mut e, c, &["exists", "a", "b", "c"]), ":1\r\n");
    // Replicas and the AOF see one DEL of what moved; COPY moves nothing.
    assert_eq!(
        effects(&mut e, &mut r),
        [v(&["SELECT", "0"]), v(&["DEL", "a", "b"])]
    );
    let info = bulk_text(&cmd(&mut e, c, &["info", "stats"]));
    assert!(info.contains("\r\nmigrate_cached_sockets:1\r\n"), "{info}");
}

#[test]
fn a_target_error_keeps_the_refused_keys_and_is_the_reply() {
    let busy = "-BUSYKEY Target key name already exists.";
    let (mut e, t) = setup(vec![vec![
        Ok("+OK"),
        Ok("+OK"),
        Ok(busy),
        Ok("+OK"),
        Ok("-ERR invalid password"),
        Ok("+OK"),
        Ok("-NOAUTH Authentication required."),
    ]]);
    let c = connect(&mut e);
    for k in ["a", "b", "c"] {
        cmd(&mut e, c, &["set", k, "v"]);
    }
    let mut r = e.attach_effects();
    let reply = cmd(
        &mut e,
        c,
        &["migrate", "h", "1", "", "0", "100", "keys", "a", "b", "c"],
    );
    assert_eq!(
        reply,
        "-ERR Target instance replied with error: BUSYKEY Target key name already exists.\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["exists", "a", "b", "c"]), ":1\r\n");
    assert_eq!(
        effects(&mut e, &mut r),
        [v(&["SELECT", "0"]), v(&["DEL", "a", "c"])]
    );
    // After an error the database is selected again; an AUTH refused
    // refuses every key, whatever RESTORE answered.
    assert_eq!(cmd(&mut e, c, &["exists", "b"]), ":1\r\n");
    let reply = cmd(
        &mut e,
        c,
        &["migrate", "h", "1", "b", "0", "100", "auth", "x"],
    );
    assert_eq!(
        reply,
        "-ERR Target instance replied with error: ERR invalid password\r\n"
    );
    let connection = sent(&t, 0);
    assert_eq!(connection[connection.len() - 2][0], "SELECT");
    assert_eq!(cmd(&mut e, c, &["exists", "b"]), ":1\r\n");
    assert_eq!(effects(&mut e, &mut r), Vec::<Vec<String>>::new());
}

/// MIGRATE of one key `a` to a target answering `conns`: the reply, how
/// many connections were made, and whether `a` is still here.
fn migrate_one(conns: Vec<Vec<io::Result<&str>>>) -> (String, usize, bool) {
    let (mut e, t) = setup(conns);
    let c = connect(&mut e);
    cmd(&mut e, c, &["set", "a", "1"]);
    let reply = cmd(&mut e, c, &["migrate", "h", "1", "a", "0", "100"]);
    let kept = cmd(&mut e, c, &["exists", "a"]) == ":1\r\n";
    let connects = t.0.lock().unwrap().connects;
    (reply, connects, kept)
}

#[test]
fn a_socket_error_before_any_reply_is_retried_once() {
    let eof = || Err(io::ErrorKind::UnexpectedEof.into());
    let late = || Err(io::ErrorKind::WouldBlock.into());
    let lost = "-IOERR error or timeout reading to target instance\r\n";
    // A cached connection the target closed: the second one works.
    let moved = migrate_one(vec![vec![eof()], vec![Ok("+OK"), Ok("+OK")]]);
    assert_eq!(moved, ("+OK\r\n".to_string(), 2, false));
    // Twice: the error, the key kept.
    let twice = migrate_one(vec![vec![eof()], vec![eof()], vec![Ok("+OK")]]);
    assert_eq!(twice, (lost.to_string(), 2, true));
    // A timeout is not retried.
    let timed_out = migrate_one(vec![vec![late()], vec![Ok("+OK"), Ok("+OK")]]);
    assert_eq!(timed_out, (lost.to_string(), 1, true));
    // Lost after the first key was answered: that key moved, no retry.
    let (mut e, t) = setup(vec![vec![Ok("+OK"), Ok("+OK"), eof()], vec![Ok("+OK")]]);
    let c = connect(&mut e);
    cmd(&mut e, c, &["set", "a", "1"]);
    cmd(&mut e, c, &["set", "b", "2"]);
    let mut r = e.attach_effects();
    assert_eq!(
        cmd(
            &mut e,
            c,
            &["migrate", "h", "1", "", "0", "100", "keys", "a", "b"]
        ),
        "-IOERR error or timeout reading to target instance\r\n"
    );
    assert_eq!(t.0.lock().unwrap().connects, 1);
    assert_eq!(cmd(&mut e, c, &["exists", "a", "b"]), ":1\r\n");
    assert_eq!(
        effects(&mut e, &mut r),
        [v(&["SELECT", "0"]), v(&["DEL", "a"])]
    );
}

#[test]
fn nothing_to_move_and_bad_arguments() {
    let (mut e, t) = setup(vec![]);
    let c = connect(&mut e);
    assert_eq!(
        cmd(&mut e, c, &["migrate", "h", "1", "a", "0", "100"]),
        "+NOKEY\r\n"
    );
    cmd(&mut e, c, &["set", "a", "1"]);
    for (args, want) in [
        (&["a", "0", "100", "bogus"][..], "-ERR syntax error\r\n"),
        (&["a", "0", "100", "auth"], "-ERR syntax error\r\n"),
        (&["a", "0", "100", "auth2", "u"], "-ERR syntax error\r\n"),
        (
            &["a", "x", "100"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (
            &["a", "0", "x"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (
            &["a", "0", "100", "keys", "a"],
            "-ERR When using MIGRATE KEYS option, the key argument must be set to the empty string\r\n",
        ),
    ] {
        let argv = [&["migrate", "h", "1"][..], args].concat();
        assert_eq!(cmd(&mut e, c, &argv), want, "{argv:?}");
    }
    assert_eq!(t.0.lock().unwrap().connects, 0);
}
