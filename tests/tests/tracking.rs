//! CLIENT TRACKING against the real binary, transcript for transcript
//! with Valkey 8.1: invalidation pushes (RESP3), redirection to a RESP2
//! subscriber, BCAST prefixes batched per event-loop pass, NOLOOP,
//! OPTIN/OPTOUT with CLIENT CACHING, flushes, a broken redirection, the
//! errors, TRACKINGINFO / GETREDIR / CLIENT LIST / INFO.

use ringkv_e2e::raw::encode_str;
use ringkv_e2e::{Backend, e2e};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A client that records everything it reads, in order.
struct Conn {
    s: TcpStream,
}

impl Conn {
    fn open(port: u16) -> Conn {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_nodelay(true).unwrap();
        Conn { s }
    }
    /// Everything that arrives until the line goes quiet for a moment
    /// (waiting up to 2 s for the first bytes: the servers may be busy).
    fn drain(&mut self) -> String {
        let mut out = Vec::new();
        let mut buf = [0u8; 65536];
        let mut wait = Duration::from_secs(2);
        loop {
            self.s.set_read_timeout(Some(wait)).unwrap();
            match self.s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(_) => break,
            }
            wait = Duration::from_millis(60);
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    fn send(&mut self, args: &[&str]) {
        self.s.write_all(&encode_str(args)).unwrap();
    }
    fn cmd(&mut self, args: &[&str]) -> String {
        self.send(args);
        self.drain()
    }
    fn id(&mut self) -> String {
        self.cmd(&["CLIENT", "ID"])
            .trim()
            .trim_start_matches(':')
            .to_string()
    }
}

/// The scenario; each entry of the transcript is who read what. Client
/// ids differ between servers and are written as `ID`.
fn transcript(port: u16) -> Vec<String> {
    let mut t = Vec::new();
    let mut log = |who: &str, what: String, ids: &[&str]| {
        let mut w = what;
        for id in ids {
            w = w.replace(&format!(":{id}\r\n"), ":ID\r\n");
        }
        t.push(format!("{who}: {w:?}"));
    };
    let (mut a, mut b) = (Conn::open(port), Conn::open(port));
    a.cmd(&["HELLO", "3"]);
    log("a", a.cmd(&["CLIENT", "TRACKING", "ON"]), &[]);
    log("a", a.cmd(&["GET", "k"]), &[]);
    log("a", a.cmd(&["MGET", "k", "k2"]), &[]);
    log("b", b.cmd(&["SET", "k", "1"]), &[]);
    log("a", a.drain(), &[]);
    log("a", a.cmd(&["GET", "k"]), &[]);
    // Its own write: the reply, then the push.
    log("a", a.cmd(&["SET", "k", "2"]), &[]);
    log("a", a.cmd(&["GET", "k"]), &[]);
    log("a", a.cmd(&["MSET", "k", "3", "k2", "4"]), &[]);
    log("a", a.cmd(&["GET", "k"]), &[]);
    log("b", b.cmd(&["FLUSHDB"]), &[]);
    log("a", a.drain(), &[]);
    // Expiry invalidates too.
    log("a", a.cmd(&["SET", "e", "1", "PX", "50"]), &[]);
    log("a", a.cmd(&["GET", "e"]), &[]);
    std::thread::sleep(Duration::from_millis(300));
    log("a", a.drain(), &[]);

    // RESP2 redirected to a subscriber of __redis__:invalidate.
    let (mut c, mut r) = (Conn::open(port), Conn::open(port));
    let rid = r.id();
    log("r", r.cmd(&["SUBSCRIBE", "__redis__:invalidate"]), &[]);
    log(
        "c",
        c.cmd(&["CLIENT", "TRACKING", "ON", "REDIRECT", &rid]),
        &[],
    );
    log("c", c.cmd(&["GET", "x"]), &[]);
    log("b", b.cmd(&["SET", "x", "1"]), &[]);
    log("r", r.drain(), &[]);
    log("c", c.cmd(&["CLIENT", "GETREDIR"]), &[&rid]);
    log("b", b.cmd(&["FLUSHALL"]), &[]);
    log("r", r.drain(), &[]);

    // BCAST: a pipeline's keys in one message; NOLOOP.
    let mut d = Conn::open(port);
    d.cmd(&["HELLO", "3"]);
    log(
        "d",
        d.cmd(&[
            "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "p:", "PREFIX", "u:",
        ]),
        &[],
    );
    let mut pipe = Vec::new();
    for args in [
        &["SET", "p:1", "a"][..],
        &["SET", "p:2", "b"],
        &["SET", "q", "c"],
        &["DEL", "u:1"],
        &["SET", "u:1", "x"],
    ] {
        pipe.extend_from_slice(&encode_str(args));
    }
    b.s.write_all(&pipe).unwrap();
    log("b", b.drain(), &[]);
    log("d", d.drain(), &[]);
    log("d", d.cmd(&["SET", "p:3", "x"]), &[]);
    let mut n = Conn::open(port);
    n.cmd(&["HELLO", "3"]);
    log(
        "n",
        n.cmd(&["CLIENT", "TRACKING", "ON", "BCAST", "NOLOOP"]),
        &[],
    );
    log("n", n.cmd(&["SET", "mine", "1"]), &[]);
    log("b", b.cmd(&["SET", "theirs", "1"]), &[]);
    log("n", n.drain(), &[]);
    log("n", n.cmd(&["CLIENT", "TRACKINGINFO"]), &[]);

    // A redirect target that goes away.
    let mut e = Conn::open(port);
    e.cmd(&["HELLO", "3"]);
    let mut gone = Conn::open(port);
    let gid = gone.id();
    log(
        "e",
        e.cmd(&["CLIENT", "TRACKING", "ON", "REDIRECT", &gid]),
        &[],
    );
    log("e", e.cmd(&["GET", "y"]), &[]);
    drop(gone);
    std::thread::sleep(Duration::from_millis(100));
    log("b", b.cmd(&["SET", "y", "1"]), &[]);
    log("e", e.drain(), &[&gid]);
    log("e", e.cmd(&["CLIENT", "TRACKINGINFO"]), &[&gid]);
    let eid = e.id();
    let list = e.cmd(&["CLIENT", "LIST", "ID", &eid]);
    let flags = list
        .split(' ')
        .find(|f| f.starts_with("flags="))
        .unwrap_or("")
        .to_string();
    log("e", flags, &[]);

    // OPTIN / OPTOUT.
    let mut f = Conn::open(port);
    f.cmd(&["HELLO", "3"]);
    log("f", f.cmd(&["CLIENT", "TRACKING", "ON", "OPTIN"]), &[]);
    log("f", f.cmd(&["GET", "o1"]), &[]);
    log("f", f.cmd(&["CLIENT", "CACHING", "YES"]), &[]);
    log("f", f.cmd(&["GET", "o2"]), &[]);
    log("f", f.cmd(&["GET", "o3"]), &[]);
    log("b", b.cmd(&["MSET", "o1", "1", "o2", "2", "o3", "3"]), &[]);
    log("f", f.drain(), &[]);
    log("f", f.cmd(&["CLIENT", "TRACKING", "OFF"]), &[]);
    log("f", f.cmd(&["CLIENT", "TRACKING", "ON", "OPTOUT"]), &[]);
    log("f", f.cmd(&["CLIENT", "CACHING", "NO"]), &[]);
    log("f", f.cmd(&["GET", "o1"]), &[]);
    log("f", f.cmd(&["GET", "o2"]), &[]);
    log("b", b.cmd(&["MSET", "o1", "1", "o2", "2"]), &[]);
    log("f", f.drain(), &[]);

    // Reads whose keys move with their arguments.
    let mut h = Conn::open(port);
    h.cmd(&["HELLO", "3"]);
    log("h", h.cmd(&["CLIENT", "TRACKING", "ON"]), &[]);
    log("h", h.cmd(&["ZUNION", "2", "z1", "z2"]), &[]);
    log(
        "h",
        h.cmd(&["SINTERCARD", "2", "s1", "s2", "LIMIT", "5"]),
        &[],
    );
    log("h", h.cmd(&["LCS", "l1", "l2"]), &[]);
    log("h", h.cmd(&["ZINTERCARD", "1", "z3"]), &[]);
    log("b", b.cmd(&["ZADD", "z2", "1", "b"]), &[]);
    log("b", b.cmd(&["SADD", "s1", "x"]), &[]);
    log("b", b.cmd(&["SET", "l2", "v"]), &[]);
    log("b", b.cmd(&["ZADD", "z3", "1", "c"]), &[]);
    log("h", h.drain(), &[]);

    // Errors, in Valkey's order of checks.
    let mut g = Conn::open(port);
    for args in [
        &["CLIENT", "TRACKING", "ON", "PREFIX", "a"][..],
        &[
            "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a", "PREFIX", "ab",
        ],
        &["CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"],
        &["CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"],
        &["CLIENT", "TRACKING", "ON", "REDIRECT", "999999"],
        &["CLIENT", "TRACKING", "ON", "REDIRECT", "x"],
        &["CLIENT", "TRACKING", "MAYBE"],
        &["CLIENT", "TRACKING", "ON", "FOO"],
        &["CLIENT", "CACHING", "YES"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "GETREDIR"],
        &["CLIENT", "TRACKING", "ON"],
        &["CLIENT", "TRACKING", "ON", "BCAST"],
        &["CLIENT", "CACHING", "YES"],
        &["CLIENT", "TRACKING", "OFF"],
        &[
            "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a", "PREFIX", "b",
        ],
        &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "bc"],
        &["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "c"],
        &["CLIENT", "TRACKINGINFO"],
    ] {
        log("g", g.cmd(args), &[]);
    }
    let info = b.cmd(&["INFO", "clients"]);
    let tracking = info
        .lines()
        .find(|l| l.starts_with("tracking_clients"))
        .unwrap_or("")
        .to_string();
    log("b", tracking, &[]);
    t
}

e2e!(
    ringkv_only fn tracking_transcripts_match_valkeys(b) {
        let ours = b.server();
        let theirs = Backend::Valkey.server();
        let (mine, valkeys) = (transcript(ours.port), transcript(theirs.port));
        for (m, v) in mine.iter().zip(&valkeys) {
            assert_eq!(m, v);
        }
        assert_eq!(mine.len(), valkeys.len());
    }
);
