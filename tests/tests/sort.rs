//! SORT / SORT_RO and LCS against the real binary: BY and GET patterns
//! over strings and hash fields, LIMIT, STORE, the ordering rules, LCS's
//! reply shapes; and differential runs against Valkey 8.1 (fixed cases
//! and random lists, weights and strings) whose replies must be the same
//! byte for byte in RESP2 and in RESP3.

use ringkv_e2e::server::TempDir;
use ringkv_e2e::{Backend, Opts, Raw, Reply, e2e};

fn bulks(items: &[&str]) -> Reply {
    Reply::Array(items.iter().map(|s| Reply::bulk(s)).collect())
}

e2e!(
    fn sort_by_patterns_get_and_store(b) {
        let srv = b.server();
        let mut c = srv.raw();
        c.cmd(&["RPUSH", "ids", "3", "1", "2"]);
        c.cmd(&["MSET", "w_1", "30", "w_2", "10", "w_3", "20"]);
        c.cmd(&["HSET", "user_1", "name", "carol"]);
        c.cmd(&["HSET", "user_2", "name", "alice"]);
        c.cmd(&["HSET", "user_3", "name", "bob"]);
        assert_eq!(c.cmd(&["SORT", "ids"]), bulks(&["1", "2", "3"]));
        assert_eq!(c.cmd(&["SORT", "ids", "DESC", "LIMIT", "0", "2"]), bulks(&["3", "2"]));
        assert_eq!(c.cmd(&["SORT", "ids", "BY", "w_*"]), bulks(&["2", "3", "1"]));
        assert_eq!(
            c.cmd(&["SORT", "ids", "BY", "user_*->name", "ALPHA", "GET", "#", "GET", "user_*->name"]),
            bulks(&["2", "alice", "3", "bob", "1", "carol"])
        );
        // BY a constant: the list's own order.
        assert_eq!(c.cmd(&["SORT", "ids", "BY", "nosort"]), bulks(&["3", "1", "2"]));
        assert_eq!(
            c.cmd(&["SORT", "ids", "GET", "nope_*"]),
            Reply::Array(vec![Reply::Nil, Reply::Nil, Reply::Nil])
        );
        assert_eq!(c.cmd(&["SORT", "ids", "BY", "w_*", "STORE", "out"]), Reply::Int(3));
        assert_eq!(c.cmd(&["LRANGE", "out", "0", "-1"]), bulks(&["2", "3", "1"]));
        assert_eq!(c.cmd(&["SORT_RO", "ids", "DESC"]), bulks(&["3", "2", "1"]));
        assert_eq!(c.cmd(&["SORT_RO", "ids", "STORE", "x"]), Reply::err("ERR syntax error"));
        // An empty result deletes the destination.
        assert_eq!(c.cmd(&["SORT", "missing", "STORE", "out"]), Reply::Int(0));
        assert_eq!(c.cmd(&["EXISTS", "out"]), Reply::Int(0));
        // Sets and sorted sets.
        c.cmd(&["SADD", "s", "b", "c", "a"]);
        assert_eq!(c.cmd(&["SORT", "s", "ALPHA"]), bulks(&["a", "b", "c"]));
        // A set stored without sorting is sorted anyway (ALPHA).
        assert_eq!(c.cmd(&["SORT", "s", "BY", "nosort", "STORE", "o2"]), Reply::Int(3));
        assert_eq!(c.cmd(&["LRANGE", "o2", "0", "-1"]), bulks(&["a", "b", "c"]));
        c.cmd(&["ZADD", "z", "1", "x", "2", "y", "3", "w"]);
        assert_eq!(c.cmd(&["SORT", "z", "BY", "nosort", "DESC"]), bulks(&["w", "y", "x"]));
        c.cmd(&["RPUSH", "bad", "1", "one"]);
        assert_eq!(
            c.cmd(&["SORT", "bad"]),
            Reply::err("ERR One or more scores can't be converted into double")
        );
        c.cmd(&["SET", "str", "x"]);
        assert_eq!(
            c.cmd(&["SORT", "str"]),
            Reply::err("WRONGTYPE Operation against a key holding the wrong kind of value")
        );
    }
);

e2e!(
    fn lcs_shapes_and_edges(b) {
        let srv = b.server();
        let mut c = srv.raw();
        c.cmd(&["MSET", "key1", "ohmytext", "key2", "mynewtext", "empty", ""]);
        assert_eq!(c.cmd(&["LCS", "key1", "key2"]), Reply::bulk("mytext"));
        assert_eq!(c.cmd(&["LCS", "key1", "key2", "LEN"]), Reply::Int(6));
        assert_eq!(c.cmd(&["LCS", "key1", "empty"]), Reply::bulk(""));
        assert_eq!(c.cmd(&["LCS", "missing", "key2", "LEN"]), Reply::Int(0));
        let range = |a: i64, b: i64| Reply::Array(vec![Reply::Int(a), Reply::Int(b)]);
        assert_eq!(
            c.cmd(&["LCS", "key1", "key2", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"]),
            Reply::Array(vec![
                Reply::bulk("matches"),
                Reply::Array(vec![Reply::Array(vec![range(4, 7), range(5, 8), Reply::Int(4)])]),
                Reply::bulk("len"),
                Reply::Int(6),
            ])
        );
        assert_eq!(
            c.cmd(&["LCS", "key1", "key2", "IDX", "LEN"]),
            Reply::err("ERR If you want both the length and indexes, please just use IDX.")
        );
        c.cmd(&["RPUSH", "list", "a"]);
        assert_eq!(
            c.cmd(&["LCS", "key1", "list"]),
            Reply::err("ERR The specified keys must contain string values")
        );
        assert_eq!(
            c.cmd(&["LCS", "key1", "key2", "MINMATCHLEN", "x"]),
            Reply::err("ERR value is not an integer or out of range")
        );
    }
);

/// xorshift64*: reproducible test data without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
}

fn same(a: &mut Raw, v: &mut Raw, cmd: &[&str]) {
    assert_eq!(a.cmd(cmd), v.cmd(cmd), "{cmd:?}");
}

const CASES: &[&[&str]] = &[
    &["RPUSH", "l", "3", "1", "2", "10", "-5", "2.5"],
    &["SORT", "l"],
    &["SORT", "l", "DESC"],
    &["SORT", "l", "ALPHA"],
    &["SORT", "l", "ALPHA", "DESC"],
    &["SORT", "l", "LIMIT", "1", "2"],
    &["SORT", "l", "LIMIT", "-1", "2"],
    &["SORT", "l", "LIMIT", "2", "-1"],
    &["SORT", "l", "LIMIT", "10", "2"],
    &["SORT", "l", "LIMIT", "0", "0"],
    &["SORT", "l", "LIMIT", "1"],
    &["SORT", "l", "LIMIT", "a", "1"],
    &["SORT", "l", "bogus"],
    &["SORT", "l", "STORE"],
    &["SORT", "l", "BY", "nosort", "DESC", "LIMIT", "1", "3"],
    &["SORT", "l", "BY", "nosort", "LIMIT", "5", "10"],
    &[
        "MSET", "w_3", "30", "w_1", "10", "w_2", "20", "w_10", "5", "w_2.5", "0", "w_-5", "x",
    ],
    &["SORT", "l", "BY", "w_*"],
    &["DEL", "w_-5"],
    &["SORT", "l", "BY", "w_*", "DESC", "LIMIT", "1", "3"],
    &["SORT", "l", "BY", "w_*", "ALPHA"],
    &[
        "SORT", "l", "GET", "#", "GET", "w_*", "GET", "nope_*", "GET", "nostar",
    ],
    &["HSET", "h_1", "f", "b", "g", "1"],
    &["HSET", "h_2", "f", "a", "g", "2"],
    &["HSET", "h_3", "f", "c"],
    &["SORT", "l", "BY", "h_*->g"],
    &["SORT", "l", "BY", "h_*->f", "ALPHA", "DESC"],
    &["SORT", "l", "BY", "h_*->f"],
    &[
        "SORT", "l", "GET", "h_*->f", "GET", "#", "GET", "h_*->", "GET", "w_*->f",
    ],
    &["SORT", "l", "GET", "#", "GET", "nope_*", "STORE", "dst"],
    &["LRANGE", "dst", "0", "-1"],
    &["SORT", "nokey", "STORE", "dst"],
    &["EXISTS", "dst"],
    &["SADD", "s", "5", "3", "9", "1"],
    &["SORT", "s", "DESC", "LIMIT", "1", "2"],
    &[
        "SORT", "s", "BY", "nosort", "LIMIT", "1", "2", "STORE", "dst",
    ],
    &["LRANGE", "dst", "0", "-1"],
    &["ZADD", "z", "1", "c", "2", "a", "3", "b"],
    &["SORT", "z", "ALPHA"],
    &["SORT", "z", "BY", "nosort", "DESC", "LIMIT", "1", "1"],
    &["SORT", "z", "BY", "nosort", "LIMIT", "1", "5"],
    &["ZADD", "zz", "1", "a"],
    &["OBJECT", "ENCODING", "zz"],
    &["SORT_RO", "zz", "ALPHA"],
    &["OBJECT", "ENCODING", "zz"],
    &["RPUSH", "e", "", " 2", "1e500", "3"],
    &["SORT", "e"],
    &["RPUSH", "e2", "", "1", "-1", " 7"],
    &["SORT", "e2"],
    &["SORT_RO", "l", "STORE", "x"],
    &["SET", "str", "x"],
    &["SORT", "str"],
    &["SORT", "str", "bogus"],
    &["SET", "k1", "ohmytext"],
    &["SET", "k2", "mynewtext"],
    &["SET", "n1", "12345"],
    &["SET", "n2", "2345"],
    &["LCS", "k1", "k2", "IDX"],
    &[
        "LCS",
        "k1",
        "k2",
        "IDX",
        "MINMATCHLEN",
        "-3",
        "WITHMATCHLEN",
    ],
    &["LCS", "k1", "k2", "MINMATCHLEN"],
    &["LCS", "k1", "k2", "bogus"],
    &["LCS", "k1", "nokey", "IDX"],
    &["LCS", "nokey", "nokey2", "IDX", "WITHMATCHLEN"],
    &["LCS", "l", "k1"],
    &["LCS", "k1", "k1", "IDX", "WITHMATCHLEN"],
    &["LCS", "n1", "n2", "IDX"],
];

e2e!(
    ringkv_only fn sort_and_lcs_reply_exactly_as_valkey(b) {
        let ours = b.server();
        let theirs = Backend::Valkey.server();
        let mut a = ours.raw();
        let mut v = theirs.raw();
        let mut rng = Rng(7);
        for proto in ["2", "3"] {
            a.cmd(&["HELLO", proto]);
            v.cmd(&["HELLO", proto]);
            same(&mut a, &mut v, &["FLUSHALL"]);
            for cmd in CASES {
                same(&mut a, &mut v, cmd);
            }
            for _ in 0..150 {
                let s: String = (0..rng.below(30)).map(|_| (b'a' + rng.below(3) as u8) as char).collect();
                let t: String = (0..rng.below(30)).map(|_| (b'a' + rng.below(3) as u8) as char).collect();
                same(&mut a, &mut v, &["MSET", "ra", &s, "rb", &t]);
                let min = rng.below(4).to_string();
                same(&mut a, &mut v, &["LCS", "ra", "rb", "IDX", "WITHMATCHLEN", "MINMATCHLEN", &min]);
                same(&mut a, &mut v, &["LCS", "ra", "rb"]);

                same(&mut a, &mut v, &["DEL", "rl"]);
                let els: Vec<String> = (0..rng.below(20)).map(|_| rng.int(-50, 50).to_string()).collect();
                for e in &els {
                    let w = rng.below(6).to_string();
                    let f = ["x", "y", "z"][rng.below(3) as usize];
                    same(&mut a, &mut v, &["SET", &format!("w_{e}"), &w]);
                    same(&mut a, &mut v, &["HSET", &format!("h_{e}"), "f", f]);
                }
                if !els.is_empty() {
                    let mut push = vec!["RPUSH", "rl"];
                    push.extend(els.iter().map(String::as_str));
                    same(&mut a, &mut v, &push);
                }
                let (off, cnt) = (rng.int(-2, 10).to_string(), rng.int(-2, 10).to_string());
                let order = if rng.below(2) == 0 { "ASC" } else { "DESC" };
                same(&mut a, &mut v, &["SORT", "rl", "BY", "w_*", "LIMIT", &off, &cnt, "GET", "#", "GET", "h_*->f", order]);
                same(&mut a, &mut v, &["SORT", "rl", "LIMIT", &off, &cnt, order]);
                same(&mut a, &mut v, &["SORT", "rl", "ALPHA", order]);
                same(&mut a, &mut v, &["SORT", "rl", "BY", "nosort", "LIMIT", &off, &cnt, order]);
                same(&mut a, &mut v, &["SORT", "rl", "BY", "w_*", "STORE", "rs"]);
                same(&mut a, &mut v, &["LRANGE", "rs", "0", "-1"]);
            }
        }
    }
);

/// A directory holding the en_US.UTF-8 locale, built with localedef(1)
/// (the `locales` package, which scripts/test.sh installs), for LOCPATH.
fn en_us_locale(dir: &std::path::Path) {
    let out = std::process::Command::new("localedef")
        .args(["-i", "en_US", "-f", "UTF-8"])
        .arg(dir.join("en_US.UTF-8"))
        .output()
        .expect("localedef (the locales package)");
    assert!(
        dir.join("en_US.UTF-8/LC_COLLATE").exists(),
        "localedef: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// SORT ... ALPHA in a collating locale, and what changes it, on `b`.
fn collated(b: Backend, locpath: &std::path::Path) -> Vec<Reply> {
    let srv = b.start(
        Opts::new()
            .env("LOCPATH", locpath.to_str().unwrap())
            .arg("locale-collate", "en_US.UTF-8"),
    );
    let mut c = srv.raw();
    let words = ["b", "A", "a", "B", "_x", "é", "e", "10", "9", "Z"];
    let mut rpush = vec!["RPUSH", "l"];
    rpush.extend(words);
    c.cmd(&rpush);
    for (i, w) in words.iter().enumerate() {
        c.cmd(&["SET", &format!("w_{i}"), w]);
        c.cmd(&["RPUSH", "idx", &i.to_string()]);
    }
    [
        &["SORT", "l", "ALPHA"][..],
        &["SORT", "l", "ALPHA", "DESC", "LIMIT", "0", "4"],
        &["SORT", "idx", "BY", "w_*", "ALPHA"],
        // Stored, the order is the bytes' (as Valkey's).
        &["SORT", "l", "ALPHA", "STORE", "dst"],
        &["LRANGE", "dst", "0", "-1"],
        &["CONFIG", "SET", "locale-collate", "no_such_locale"],
        &["CONFIG", "GET", "locale-collate"],
        &["CONFIG", "SET", "locale-collate", "C"],
        &["SORT", "l", "ALPHA"],
    ]
    .iter()
    .map(|line| c.cmd(line))
    .collect()
}

e2e!(
    ringkv_only fn sort_alpha_collates_in_locale_collate_as_valkey_does(b) {
        let dir = TempDir::new("locale");
        en_us_locale(dir.path());
        let (ours, theirs) = (collated(b, dir.path()), collated(Backend::Valkey, dir.path()));
        for (i, (a, v)) in ours.iter().zip(&theirs).enumerate() {
            assert_eq!(a, v, "reply {i}");
        }
        // The locale's order is not the bytes' (the stored copy's).
        assert_ne!(ours[0], ours[4]);
        // An unknown locale stops the start, as Valkey's.
        for backend in [b, Backend::Valkey] {
            let (status, log) =
                backend.start_expect_exit(Opts::new().arg("locale-collate", "no_such_locale"));
            assert!(!status.success());
            assert!(
                log.contains("Failed to configure LOCALE for invalid locale name."),
                "{backend:?}:\n{log}"
            );
        }
    }
);
