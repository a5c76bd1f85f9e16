//! Stress: 1,000 connections over IO threads, random pipelines, random
//! disconnects (mid-command, and with replies unread), checked reply by
//! reply. Bounded in time: `RINGKV_STRESS_SECS` (default 15; run it for
//! minutes by hand with e.g. `RINGKV_STRESS_SECS=300`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use ringkv_e2e::raw::encode_str;
use ringkv_e2e::{Opts, Reply, Rng, Server, e2e, info_field, raise_nofile, tcp};

const CONNS: usize = 1000;
const WORKERS: usize = 8;

/// Read exactly `n` replies of the simple kinds this test sends (status,
/// integer, bulk, nil), as lines of text.
fn read_replies(s: &mut TcpStream, buf: &mut Vec<u8>, n: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(n);
    let mut pos = 0;
    let mut chunk = [0u8; 16384];
    while out.len() < n {
        // Try to take one reply from buf[pos..].
        if let Some(end) = buf[pos..].windows(2).position(|w| w == b"\r\n") {
            let line = &buf[pos..pos + end];
            if line[0] == b'$' {
                let len: i64 = std::str::from_utf8(&line[1..]).unwrap().parse().unwrap();
                if len < 0 {
                    out.push("(nil)".to_string());
                    pos += end + 2;
                    continue;
                }
                let body = pos + end + 2;
                let need = body + len as usize + 2;
                if buf.len() >= need {
                    out.push(String::from_utf8_lossy(&buf[body..body + len as usize]).into_owned());
                    pos = need;
                    continue;
                }
            } else {
                out.push(String::from_utf8_lossy(line).into_owned());
                pos += end + 2;
                continue;
            }
        }
        let k = s.read(&mut chunk).expect("read replies");
        assert!(k > 0, "server closed a healthy connection");
        buf.extend_from_slice(&chunk[..k]);
    }
    buf.drain(..pos);
    out
}

struct Worker {
    id: usize,
    port: u16,
    rng: Rng,
    conns: Vec<TcpStream>,
    bufs: Vec<Vec<u8>>,
    /// INCR acks seen for this worker's counter.
    incr_acked: i64,
    commands: u64,
    disconnects: u64,
}

impl Worker {
    fn round(&mut self) {
        let i = self.rng.below(self.conns.len() as u64) as usize;
        match self.rng.below(100) {
            0..=3 => {
                // Vanish mid-command: half a SET, then close.
                let mut req = encode_str(&["SET", &format!("half:{}", self.id), "0123456789"]);
                req.truncate(req.len() / 2);
                let _ = self.conns[i].write_all(&req);
                self.replace(i);
            }
            4..=7 => {
                // Vanish with replies unread.
                let mut req = Vec::new();
                for j in 0..self.rng.below(64) + 1 {
                    req.extend(encode_str(&["SET", &format!("gone:{}:{j}", self.id), "x"]));
                }
                let _ = self.conns[i].write_all(&req);
                self.replace(i);
            }
            _ => self.pipeline(i),
        }
    }

    fn replace(&mut self, i: usize) {
        self.conns[i] = tcp(self.port);
        self.bufs[i].clear();
        self.disconnects += 1;
    }

    /// A random pipeline whose every reply is predicted.
    fn pipeline(&mut self, i: usize) {
        let depth = self.rng.below(32) as usize + 1;
        let key = format!("k:{}:{i}", self.id);
        let counter = format!("counter:{}", self.id);
        let mut req = Vec::new();
        let mut want = Vec::new();
        let mut incrs = 0;
        for j in 0..depth {
            match self.rng.below(4) {
                0 => {
                    let v = format!("v{j}-{}", self.rng.below(1_000_000));
                    req.extend(encode_str(&["SET", &key, &v]));
                    want.push("+OK".to_string());
                    req.extend(encode_str(&["GET", &key]));
                    want.push(v);
                }
                1 => {
                    incrs += 1;
                    req.extend(encode_str(&["INCR", &counter]));
                    want.push(format!(":{}", self.incr_acked + incrs));
                }
                2 => {
                    req.extend(encode_str(&["DEL", &key]));
                    want.push(String::new()); // :0 or :1
                    req.extend(encode_str(&["GET", &key]));
                    want.push("(nil)".to_string());
                }
                _ => {
                    req.extend(encode_str(&["PING"]));
                    want.push("+PONG".to_string());
                }
            }
        }
        self.conns[i].write_all(&req).expect("write pipeline");
        let got = read_replies(&mut self.conns[i], &mut self.bufs[i], want.len());
        for (g, w) in got.iter().zip(&want) {
            if w.is_empty() {
                assert!(g == ":0" || g == ":1", "DEL replied {g}");
            } else {
                assert_eq!(g, w, "worker {} conn {i}", self.id);
            }
        }
        self.incr_acked += incrs;
        self.commands += want.len() as u64;
    }
}

/// Run the workers against `srv` for `secs`; meanwhile CONFIG SET
/// io-threads cycles through `churn` (every 300 ms), so connections keep
/// moving between IO threads (and threads are retired and started), or
/// between inline and threaded mode where the cycle passes through 1,
/// mid-traffic.
fn stress(srv: &Server, secs: u64, churn: &[u32]) {
    let port = srv.port;
    let deadline = Instant::now() + Duration::from_secs(secs);
    let hs: Vec<_> = (0..WORKERS)
        .map(|id| {
            std::thread::spawn(move || {
                let conns: Vec<TcpStream> = (0..CONNS / WORKERS).map(|_| tcp(port)).collect();
                let n = conns.len();
                let mut w = Worker {
                    id,
                    port,
                    rng: Rng::new(0x5eed + id as u64),
                    conns,
                    bufs: vec![Vec::new(); n],
                    incr_acked: 0,
                    commands: 0,
                    disconnects: 0,
                };
                while Instant::now() < deadline {
                    w.round();
                }
                (w.id, w.incr_acked, w.commands, w.disconnects)
            })
        })
        .collect();
    let mut changes = 0;
    if !churn.is_empty() {
        let mut admin = srv.raw();
        for n in churn.iter().cycle() {
            if Instant::now() >= deadline {
                break;
            }
            let n = n.to_string();
            assert_eq!(
                admin.cmd(&["CONFIG", "SET", "io-threads", &n]),
                Reply::status("OK")
            );
            changes += 1;
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    let results: Vec<_> = hs.into_iter().map(|h| h.join().expect("worker")).collect();
    let mut r = srv.raw();
    let mut total = 0;
    let mut drops = 0;
    for (id, acked, commands, disconnects) in results {
        // Every acknowledged INCR happened once, and no other did.
        let got = r.cmd(&["GET", &format!("counter:{id}")]);
        let want = if acked == 0 {
            Reply::Nil
        } else {
            Reply::bulk(&acked.to_string())
        };
        assert_eq!(got, want, "worker {id}");
        total += commands;
        drops += disconnects;
    }
    let threads = r.cmd(&["INFO", "threads"]).text();
    let moves: u64 = info_field(&threads, "io_thread_client_moves")
        .parse()
        .unwrap();
    // Moves between IO threads; a cycle through 1 moves every connection
    // to and from the main thread too, which this does not count.
    let moving = churn.iter().filter(|&&n| n > 1).count() >= 2;
    eprintln!(
        "stress: {total} commands checked, {drops} disconnects, {changes} io-threads changes, \
         {moves} connections moved, {secs} s"
    );
    assert!(!moving || moves > 100, "only {moves} connections moved");
    assert!(total > 10_000, "only {total} commands in {secs} s");
    assert!(drops > 100, "only {drops} disconnects");
    assert!(
        churn.is_empty() || changes >= 3,
        "only {changes} io-threads changes"
    );
    assert_eq!(r.cmd(&["PING"]), Reply::status("PONG"));
    // Every connection was let go (the workers' are closed now): only
    // this one is left.
    let mut connected = 0;
    for _ in 0..200 {
        let info = r.cmd(&["INFO", "clients"]).text();
        connected = info_field(&info, "connected_clients").parse().unwrap();
        if connected == 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(connected, 1, "connected_clients");
}

fn stress_secs() -> u64 {
    std::env::var("RINGKV_STRESS_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15)
}

e2e!(
    ringkv_only fn thousand_connections_random_pipelines_and_disconnects(b) {
        raise_nofile();
        let threads = ringkv_e2e::server::io_threads().unwrap_or(4).max(2).to_string();
        let srv = b.start(Opts::new().arg("io-threads", &threads));
        stress(&srv, stress_secs(), &[]);
    }
);

e2e!(
    ringkv_only fn connections_move_between_io_threads_under_load(b) {
        raise_nofile();
        let srv = b.start(Opts::new().arg("io-threads", "4").arg("io-threads-adaptive", "no"));
        stress(&srv, stress_secs().div_ceil(2), &[2, 4, 3, 5, 2, 4]);
    }
);

e2e!(
    ringkv_only fn connections_switch_between_inline_and_threaded_under_load(b) {
        raise_nofile();
        // Inline at first; the cycle goes 1 -> N and N -> 1 twice a round.
        let srv = b.start(Opts::new().arg("io-threads", "1").arg("io-threads-adaptive", "no"));
        stress(&srv, stress_secs().div_ceil(2), &[4, 1, 3, 5, 1, 2]);
    }
);
