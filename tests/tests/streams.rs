//! Streams against the real binary: the commands on both backends, a
//! differential run against Valkey 8.1 (random XADD / XRANGE / XDEL /
//! XTRIM / consumer-group sequences, replies compared byte for byte with
//! only idle times masked), blocking XREAD / XREADGROUP woken by another
//! client's XADD, and stream values crossing RDB files and DUMP payloads
//! with Valkey both ways.

use ringkv_e2e::{Backend, Reply, e2e};
use std::time::Duration;

fn arr(items: Vec<Reply>) -> Reply {
    Reply::Array(items)
}

fn b(s: &str) -> Reply {
    Reply::bulk(s)
}

e2e!(
    fn xadd_xrange_xlen_and_ids(b_) {
        let srv = b_.server();
        let mut c = srv.raw();
        assert_eq!(c.cmd(&["XADD", "s", "1-1", "a", "1"]), b("1-1"));
        assert_eq!(c.cmd(&["XADD", "s", "1-*", "b", "2"]), b("1-2"));
        assert_eq!(
            c.cmd(&["XADD", "s", "1-1", "a", "1"]),
            Reply::err("ERR The ID specified in XADD is equal or smaller than the target stream top item")
        );
        assert_eq!(
            c.cmd(&["XADD", "n", "0-0", "a", "1"]),
            Reply::err("ERR The ID specified in XADD must be greater than 0-0")
        );
        assert_eq!(c.cmd(&["XADD", "n", "NOMKSTREAM", "*", "a", "1"]), Reply::Nil);
        assert_eq!(c.cmd(&["EXISTS", "n"]), Reply::Int(0));
        // An auto ID is past the last one.
        let id = c.cmd(&["XADD", "s", "*", "c", "3"]).text();
        assert!(id.ends_with("-0") && id != "1-2", "{id}");
        assert_eq!(c.cmd(&["XLEN", "s"]), Reply::Int(3));
        assert_eq!(c.cmd(&["TYPE", "s"]), Reply::status("stream"));
        assert_eq!(c.cmd(&["OBJECT", "ENCODING", "s"]), b("stream"));
        assert_eq!(
            c.cmd(&["XRANGE", "s", "(1-1", "+", "COUNT", "1"]),
            arr(vec![arr(vec![b("1-2"), arr(vec![b("b"), b("2")])])])
        );
        assert_eq!(
            c.cmd(&["XREVRANGE", "s", "(1-2", "-"]),
            arr(vec![arr(vec![b("1-1"), arr(vec![b("a"), b("1")])])])
        );
        assert_eq!(c.cmd(&["XRANGE", "s", "-", "+", "COUNT", "0"]), Reply::Nil);
        assert_eq!(c.cmd(&["XDEL", "s", "1-1", "9-9"]), Reply::Int(1));
        assert_eq!(c.cmd(&["XLEN", "s"]), Reply::Int(2));
        assert_eq!(c.cmd(&["XTRIM", "s", "MAXLEN", "1"]), Reply::Int(1));
        assert_eq!(c.cmd(&["SCAN", "0", "TYPE", "stream"]), arr(vec![b("0"), arr(vec![b("s")])]));
        let Reply::Int(mem) = c.cmd(&["MEMORY", "USAGE", "s"]) else { panic!() };
        assert!(mem > 0);
        // COPY, RENAME and DEL carry or drop the whole stream.
        assert_eq!(c.cmd(&["COPY", "s", "s2"]), Reply::Int(1));
        assert_eq!(c.cmd(&["RENAME", "s2", "s3"]), Reply::status("OK"));
        assert_eq!(c.cmd(&["XLEN", "s3"]), Reply::Int(1));
        assert_eq!(c.cmd(&["MOVE", "s3", "1"]), Reply::Int(1));
        c.cmd(&["SELECT", "1"]);
        assert_eq!(c.cmd(&["XLEN", "s3"]), Reply::Int(1));
        assert_eq!(c.cmd(&["UNLINK", "s3"]), Reply::Int(1));
        c.cmd(&["SELECT", "0"]);
        assert_eq!(c.cmd(&["COPY", "s", "s3"]), Reply::Int(1));
        assert_eq!(c.cmd(&["DEL", "s3"]), Reply::Int(1));
        assert_eq!(c.cmd(&["SET", "str", "x"]), Reply::status("OK"));
        assert!(c.cmd(&["XADD", "str", "*", "a", "1"]).text().starts_with("WRONGTYPE"));
    }
);

e2e!(
    fn consumer_groups_deliver_ack_and_claim(b_) {
        let srv = b_.server();
        let mut c = srv.raw();
        for i in 1..=3 {
            c.cmd(&["XADD", "s", &format!("{i}-0"), "f", &i.to_string()]);
        }
        assert_eq!(c.cmd(&["XGROUP", "CREATE", "s", "g", "0"]), Reply::status("OK"));
        assert_eq!(
            c.cmd(&["XGROUP", "CREATE", "s", "g", "0"]),
            Reply::err("BUSYGROUP Consumer Group name already exists")
        );
        let got = c.cmd(&["XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">"]);
        assert_eq!(
            got,
            arr(vec![arr(vec![
                b("s"),
                arr(vec![
                    arr(vec![b("1-0"), arr(vec![b("f"), b("1")])]),
                    arr(vec![b("2-0"), arr(vec![b("f"), b("2")])]),
                ])
            ])])
        );
        assert_eq!(
            c.cmd(&["XPENDING", "s", "g"]),
            arr(vec![Reply::Int(2), b("1-0"), b("2-0"), arr(vec![arr(vec![b("alice"), b("2")])])])
        );
        assert_eq!(c.cmd(&["XACK", "s", "g", "1-0"]), Reply::Int(1));
        assert_eq!(
            c.cmd(&["XCLAIM", "s", "g", "bob", "0", "2-0", "JUSTID"]),
            arr(vec![b("2-0")])
        );
        assert_eq!(
            c.cmd(&["XAUTOCLAIM", "s", "g", "carol", "0", "0", "JUSTID"]),
            arr(vec![b("0-0"), arr(vec![b("2-0")]), arr(vec![])])
        );
        // History of a consumer; a deleted entry reads as nil.
        c.cmd(&["XDEL", "s", "2-0"]);
        assert_eq!(
            c.cmd(&["XREADGROUP", "GROUP", "g", "carol", "STREAMS", "s", "0"]),
            arr(vec![arr(vec![b("s"), arr(vec![arr(vec![b("2-0"), Reply::Nil])])])])
        );
        assert_eq!(c.cmd(&["XGROUP", "DELCONSUMER", "s", "g", "carol"]), Reply::Int(1));
        assert_eq!(c.cmd(&["XGROUP", "DESTROY", "s", "g"]), Reply::Int(1));
        assert_eq!(
            c.cmd(&["XREADGROUP", "GROUP", "g", "x", "STREAMS", "s", ">"]),
            Reply::err("NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option")
        );
    }
);

e2e!(
    fn blocking_xread_is_woken_by_xadd_from_another_client(b_) {
        let srv = b_.server();
        let mut waiter = srv.raw();
        let mut group_waiter = srv.raw();
        let mut writer = srv.raw();
        writer.cmd(&["XADD", "s", "1-0", "old", "1"]);
        writer.cmd(&["XGROUP", "CREATE", "s", "g", "$"]);
        waiter.send(&ringkv_e2e::raw::encode_str(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]));
        group_waiter.send(&ringkv_e2e::raw::encode_str(&[
            "XREADGROUP", "GROUP", "g", "c", "BLOCK", "5000", "STREAMS", "s", ">",
        ]));
        // Both are blocked before the write arrives.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let info = writer.cmd(&["INFO", "clients"]).text();
            if ringkv_e2e::info_field(&info, "blocked_clients") == "2" {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "clients did not block");
            std::thread::sleep(Duration::from_millis(5));
        }
        writer.cmd(&["XADD", "s", "2-0", "new", "2"]);
        let entry = arr(vec![b("2-0"), arr(vec![b("new"), b("2")])]);
        let want = arr(vec![arr(vec![b("s"), arr(vec![entry])])]);
        assert_eq!(waiter.read_reply(), want);
        assert_eq!(group_waiter.read_reply(), want);
        let Reply::Array(summary) = writer.cmd(&["XPENDING", "s", "g"]) else { panic!() };
        assert_eq!(summary[0], Reply::Int(1));
        // A timeout answers nil; inside MULTI a BLOCK does not wait.
        assert_eq!(waiter.cmd(&["XREAD", "BLOCK", "20", "STREAMS", "s", "$"]), Reply::Nil);
        waiter.cmd(&["MULTI"]);
        waiter.cmd(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]);
        assert_eq!(waiter.cmd(&["EXEC"]), arr(vec![Reply::Nil]));
        // CLIENT UNBLOCK.
        let id = waiter.cmd(&["CLIENT", "ID"]).text();
        waiter.send(&ringkv_e2e::raw::encode_str(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]));
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while writer.cmd(&["CLIENT", "UNBLOCK", &id]) != Reply::Int(1) {
            assert!(std::time::Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(waiter.read_reply(), Reply::Nil);
        // A blocked XREADGROUP hears of its group destroyed, its key
        // deleted or replaced (Valkey 8.1's replies); a blocked XREAD on a
        // key that goes stays blocked until an entry comes.
        let nogroup = Reply::err("NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option");
        for (change, want) in [
            (&["XGROUP", "DESTROY", "s", "g"][..], nogroup.clone()),
            (&["DEL", "s"], nogroup),
            (&["SET", "s", "x"], Reply::err("WRONGTYPE Operation against a key holding the wrong kind of value")),
        ] {
            writer.cmd(&["DEL", "s"]);
            writer.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
            group_waiter.send(&ringkv_e2e::raw::encode_str(&[
                "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">",
            ]));
            wait_blocked(&mut writer, 1);
            writer.cmd(change);
            assert_eq!(group_waiter.read_reply(), want, "{change:?}");
        }
        writer.cmd(&["DEL", "s"]);
        waiter.send(&ringkv_e2e::raw::encode_str(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]));
        wait_blocked(&mut writer, 1);
        writer.cmd(&["XADD", "s", "5-5", "a", "b"]);
        writer.cmd(&["DEL", "s"]);
        assert_eq!(
            waiter.read_reply(),
            arr(vec![arr(vec![b("s"), arr(vec![arr(vec![b("5-5"), arr(vec![b("a"), b("b")])])])])])
        );
    }
);

/// Wait until INFO shows `n` blocked clients.
fn wait_blocked(c: &mut ringkv_e2e::Raw, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let info = c.cmd(&["INFO", "clients"]).text();
        if ringkv_e2e::info_field(&info, "blocked_clients") == n.to_string() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "clients did not block"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A splitmix64 stream: the random sequences are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Replies that carry times (idle, inactive) with the times zeroed.
fn mask_times(cmd: &[String], r: Reply) -> Reply {
    let name = cmd[0].to_uppercase();
    match (name.as_str(), r) {
        ("XPENDING", Reply::Array(items)) if cmd.len() > 3 => Reply::Array(
            items
                .into_iter()
                .map(|e| match e {
                    Reply::Array(mut f) if f.len() == 4 => {
                        f[2] = Reply::Int(0);
                        Reply::Array(f)
                    }
                    other => other,
                })
                .collect(),
        ),
        ("XINFO", Reply::Array(items)) if cmd[1].eq_ignore_ascii_case("consumers") => Reply::Array(
            items
                .into_iter()
                .map(|e| match e {
                    Reply::Array(mut f) => {
                        for i in (0..f.len()).step_by(2) {
                            if f[i] == b("idle") || f[i] == b("inactive") {
                                f[i + 1] = Reply::Int(0);
                            }
                        }
                        Reply::Array(f)
                    }
                    other => other,
                })
                .collect(),
        ),
        (_, r) => r,
    }
}

/// One random stream command over keys `s0`, `s1`, groups `g0`, `g1` and
/// consumers `c0`..`c2`, with explicit IDs (auto IDs differ by clock).
fn random_command(r: &mut Rng, ms: &mut u64) -> Vec<String> {
    let key = format!("s{}", r.below(2));
    let group = format!("g{}", r.below(2));
    let consumer = format!("c{}", r.below(3));
    let id = |r: &mut Rng, ms: u64| format!("{}-{}", r.below(ms + 2), r.below(3));
    let v: Vec<String> = match r.below(22) {
        0..=5 => {
            *ms += r.below(3);
            let mut c = vec!["XADD".to_string(), key];
            match r.below(8) {
                0 => c.extend(["MAXLEN".into(), "~".into(), r.below(30).to_string()]),
                1 => c.extend(["MAXLEN".into(), "=".into(), r.below(30).to_string()]),
                2 => c.extend(["MINID".into(), "~".into(), id(r, *ms)]),
                3 => c.extend([
                    "MAXLEN".into(),
                    "~".into(),
                    r.below(30).to_string(),
                    "LIMIT".into(),
                    r.below(12).to_string(),
                ]),
                _ => {}
            }
            c.push(if r.below(3) == 0 {
                format!("{ms}-*")
            } else {
                format!("{ms}-{}", r.below(4))
            });
            let n = 1 + r.below(3);
            let same = r.below(3) != 0;
            for i in 0..n {
                c.push(if same {
                    format!("f{i}")
                } else {
                    format!("x{}", r.below(5))
                });
                c.push(if r.below(2) == 0 {
                    r.below(1000).to_string()
                } else {
                    "v".repeat(r.below(20) as usize)
                });
            }
            c
        }
        6 => vec!["XDEL".into(), key, id(r, *ms), id(r, *ms)],
        7 => match r.below(3) {
            0 => vec![
                "XTRIM".into(),
                key,
                "MAXLEN".into(),
                "~".into(),
                r.below(25).to_string(),
            ],
            1 => vec!["XTRIM".into(), key, "MINID".into(), id(r, *ms)],
            _ => vec![
                "XTRIM".into(),
                key,
                "MAXLEN".into(),
                r.below(25).to_string(),
            ],
        },
        8 => {
            let lo = if r.below(3) == 0 {
                "-".to_string()
            } else {
                format!("({}", id(r, *ms))
            };
            let hi = if r.below(3) == 0 {
                "+".to_string()
            } else {
                id(r, *ms)
            };
            let mut c = vec!["XRANGE".into(), key, lo, hi];
            if r.below(2) == 0 {
                c.extend(["COUNT".into(), r.below(5).to_string()]);
            }
            c
        }
        9 => vec![
            "XREVRANGE".into(),
            key,
            "+".into(),
            "-".into(),
            "COUNT".into(),
            r.below(6).to_string(),
        ],
        10 => vec!["XLEN".into(), key],
        11 => match r.below(3) {
            0 => vec![
                "XGROUP".into(),
                "CREATE".into(),
                key,
                group,
                if r.below(2) == 0 {
                    "$".into()
                } else {
                    "0".into()
                },
                "MKSTREAM".into(),
            ],
            1 => vec!["XGROUP".into(), "SETID".into(), key, group, id(r, *ms)],
            _ => vec![
                "XGROUP".into(),
                "CREATECONSUMER".into(),
                key,
                group,
                consumer,
            ],
        },
        12 | 13 => {
            let mut c = vec![
                "XREADGROUP".into(),
                "GROUP".into(),
                group,
                consumer,
                "COUNT".into(),
                (1 + r.below(4)).to_string(),
            ];
            if r.below(5) == 0 {
                c.push("NOACK".into());
            }
            c.extend([
                "STREAMS".into(),
                key,
                if r.below(4) == 0 {
                    "0".into()
                } else {
                    ">".into()
                },
            ]);
            c
        }
        14 => vec!["XACK".into(), key, group, id(r, *ms), id(r, *ms)],
        15 => vec!["XPENDING".into(), key, group],
        16 => vec![
            "XPENDING".into(),
            key,
            group,
            "-".into(),
            "+".into(),
            "10".into(),
        ],
        17 => vec![
            "XCLAIM".into(),
            key,
            group,
            consumer,
            "0".into(),
            id(r, *ms),
            id(r, *ms),
            "JUSTID".into(),
        ],
        18 => vec![
            "XAUTOCLAIM".into(),
            key,
            group,
            consumer,
            "0".into(),
            "0".into(),
            "COUNT".into(),
            (1 + r.below(3)).to_string(),
        ],
        19 => match r.below(3) {
            0 => vec!["XINFO".into(), "STREAM".into(), key],
            1 => vec!["XINFO".into(), "GROUPS".into(), key],
            _ => vec!["XINFO".into(), "CONSUMERS".into(), key, group],
        },
        20 => vec![
            "XREAD".into(),
            "COUNT".into(),
            "3".into(),
            "STREAMS".into(),
            key,
            id(r, *ms),
        ],
        _ => match r.below(4) {
            0 => vec!["XGROUP".into(), "DESTROY".into(), key, group],
            1 => vec!["XGROUP".into(), "DELCONSUMER".into(), key, group, consumer],
            2 => vec!["XSETID".into(), key, format!("{}-9", *ms + 1)],
            _ => vec!["XINFO".into(), "STREAM".into(), key, "FULL".into()],
        },
    };
    v
}

e2e!(
    ringkv_only fn random_stream_sequences_reply_exactly_as_valkey(b_) {
        let ours = b_.server();
        let theirs = Backend::Valkey.server();
        let mut a = ours.raw();
        let mut v = theirs.raw();
        for seed in 0..6u64 {
            for c in [&mut a, &mut v] {
                c.cmd(&["FLUSHALL"]);
                // Small nodes: many blocks, so trimming and radix-tree
                // counts are exercised.
                c.cmd(&["CONFIG", "SET", "stream-node-max-entries", &(3 + seed * 2).to_string()]);
            }
            let mut r = Rng(seed * 7919 + 1);
            let mut ms = 1;
            for step in 0..400 {
                let cmd = random_command(&mut r, &mut ms);
                // XINFO STREAM FULL shows delivery times.
                if cmd.len() == 4 && cmd[0] == "XINFO" && cmd[3] == "FULL" {
                    continue;
                }
                let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
                let ours = mask_times(&cmd, a.cmd(&args));
                let theirs = mask_times(&cmd, v.cmd(&args));
                assert_eq!(ours, theirs, "seed {seed} step {step}: {cmd:?}");
            }
        }
        // Every command looked its keys up as Valkey does.
        for field in ["keyspace_hits", "keyspace_misses"] {
            let ours = ringkv_e2e::info_field(&a.cmd(&["INFO", "stats"]).text(), field);
            let theirs = ringkv_e2e::info_field(&v.cmd(&["INFO", "stats"]).text(), field);
            assert_eq!(ours, theirs, "{field}");
        }
    }
);

e2e!(
    ringkv_only fn errors_and_help_reply_exactly_as_valkey(b_) {
        let ours = b_.server();
        let theirs = Backend::Valkey.server();
        let mut a = ours.raw();
        let mut v = theirs.raw();
        let cmds: &[&[&str]] = &[
            &["XADD", "s", "1-1", "f", "v"],
            &["XADD", "s", "MAXLEN", "1", "MINID", "0", "*", "f", "v"],
            &["XADD", "s", "MAXLEN", "-1", "*", "f", "v"],
            &["XADD", "s", "LIMIT", "5", "*", "f", "v"],
            &["XADD", "s", "MAXLEN", "5", "LIMIT", "5", "*", "f", "v"],
            &["XADD", "s", "1-x", "f", "v"],
            &["XADD", "s", "*", "f"],
            &["XTRIM", "s", "LIMIT", "1"],
            &["XTRIM", "s", "FOO"],
            &["XRANGE", "s", "(-", "+"],
            &["XRANGE", "s", "-", "(0-0"],
            &["XRANGE", "s", "-", "+", "COUNT"],
            &["XRANGE", "s", "-", "+", "COUNT", "x"],
            &["XREAD", "STREAMS", "s"],
            &["XREAD", "GROUP", "g", "c", "STREAMS", "s", "0"],
            &["XREAD", "NOACK", "STREAMS", "s", "0"],
            &["XREAD", "STREAMS", "s", ">"],
            &["XREAD", "BLOCK", "-1", "STREAMS", "s", "0"],
            &["XREAD", "COUNT", "1", "STREAMS", "s", "0-0"],
            &["XREAD", "STREAMS", "s", "+"],
            &["XREADGROUP", "STREAMS", "s", ">"],
            &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "$"],
            &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"],
            &["XGROUP", "CREATE", "nokey", "g", "$"],
            &["XGROUP", "CREATE", "s", "g", "$", "ENTRIESREAD", "-5"],
            &["XGROUP", "CREATE", "s", "g", "$", "BAD"],
            &["XGROUP", "SETID", "s", "nogroup", "0"],
            &["XGROUP", "FOO", "s", "g"],
            &["XGROUP", "HELP"],
            &["XINFO", "HELP"],
            &["XINFO", "STREAM", "nokey"],
            &["XINFO", "STREAM", "s", "FULL", "COUNT"],
            &["XINFO", "CONSUMERS", "s", "nogroup"],
            &["XSETID", "s", "0-1"],
            &["XSETID", "s", "5-0", "ENTRIESADDED", "0"],
            &["XSETID", "s", "5-0", "MAXDELETEDID", "6-0"],
            &["XSETID", "nokey", "1-0"],
            &["XPENDING", "s", "nogroup"],
            &["XPENDING", "s", "g", "IDLE", "1", "-", "+"],
            &["XCLAIM", "s", "nogroup", "c", "0", "1-1"],
            &["XAUTOCLAIM", "s", "g", "c", "x", "0"],
            &["XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "0"],
            &["XGROUP", "CREATE", "s", "g", "0"],
            &["XCLAIM", "s", "g", "c", "0", "1-1", "BOGUS"],
            &["XGROUP", "CREATE", "e", "g", "$", "MKSTREAM"],
            &["XREAD", "STREAMS", "e", "+"],
            &["XADD", "e", "0-1", "a", "b"],
            &["XDEL", "e", "0-1"],
            &["XREAD", "STREAMS", "e", "+"],
            &["XINFO", "STREAM", "e"],
            &["XINFO", "GROUPS", "e"],
            &["XGROUP", "CREATE", "e", "g2", "0", "ENTRIESREAD", "1000"],
            &["XGROUP", "CREATE", "e", "g3", "$", "ENTRIESREAD", "-1"],
            &["XGROUP", "CREATE", "e", "g4", "5-5"],
            &["XGROUP", "SETID", "e", "g", "0", "ENTRIESREAD", "0"],
            &["XINFO", "GROUPS", "e"],
            // A script cannot block: BLOCK answers as a timeout would.
            &["EVAL", "return redis.call('xread', 'block', '0', 'streams', 'e', '$')", "0"],
            &["EVAL", "return redis.pcall('XREADGROUP', 'GROUP', 'g', 'c', 'BLOCK', '10', 'STREAMS', 'e', '>')", "0"],
            &["XINFO", "STREAM", "s"],
        ];
        for cmd in cmds {
            assert_eq!(a.cmd(cmd), v.cmd(cmd), "{cmd:?}");
        }
        // RESP3: XREAD answers a map.
        a.cmd(&["HELLO", "3"]);
        v.cmd(&["HELLO", "3"]);
        for cmd in [&["XREAD", "STREAMS", "s", "0"][..], &["XINFO", "GROUPS", "s"], &["XREAD", "STREAMS", "s", "9-9"]] {
            assert_eq!(a.cmd(cmd), v.cmd(cmd), "{cmd:?}");
        }
    }
);

/// Fill a stream with entries (some deleted), groups, consumers and
/// pending entries, through `c`.
fn fill_stream(c: &mut ringkv_e2e::Raw) {
    c.cmd(&["CONFIG", "SET", "stream-node-max-entries", "4"]);
    for i in 1..=20 {
        let v = format!("value-{i}");
        if i % 5 == 0 {
            c.cmd(&["XADD", "s", &format!("{i}-1"), "other", &v]);
        } else {
            c.cmd(&["XADD", "s", &format!("{i}-1"), "f", &v, "n", &i.to_string()]);
        }
    }
    c.cmd(&["XDEL", "s", "3-1", "7-1"]);
    c.cmd(&["XGROUP", "CREATE", "s", "g", "0"]);
    c.cmd(&["XGROUP", "CREATE", "s", "empty", "$"]);
    c.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "alice",
        "COUNT",
        "5",
        "STREAMS",
        "s",
        ">",
    ]);
    c.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "bob",
        "COUNT",
        "2",
        "STREAMS",
        "s",
        ">",
    ]);
    c.cmd(&["XACK", "s", "g", "2-1"]);
    c.cmd(&["XGROUP", "CREATECONSUMER", "s", "g", "idle"]);
}

/// What must survive a file or a payload (no idle times).
fn snapshot(c: &mut ringkv_e2e::Raw, key: &str) -> Vec<Reply> {
    vec![
        c.cmd(&["XRANGE", key, "-", "+"]),
        c.cmd(&["XINFO", "STREAM", key]),
        c.cmd(&["XINFO", "GROUPS", key]),
        c.cmd(&["XPENDING", key, "g"]),
        c.cmd(&["XREADGROUP", "GROUP", "g", "alice", "STREAMS", key, "0"]),
    ]
}

fn save_and_stop(mut srv: ringkv_e2e::Server) {
    let mut c = srv.raw();
    assert_eq!(c.cmd(&["SAVE"]), Reply::status("OK"));
    c.send(&ringkv_e2e::raw::encode_str(&["SHUTDOWN", "NOSAVE"]));
    srv.wait_exit(Duration::from_secs(10));
}

e2e!(
    ringkv_only fn streams_cross_rdb_files_with_valkey_both_ways(b_) {
        use ringkv_e2e::server::TempDir;
        for (writer, reader) in [(b_, Backend::Valkey), (Backend::Valkey, b_), (b_, b_)] {
            let dir = TempDir::new("stream-rdb");
            let srv = writer.start(ringkv_e2e::Opts::new().dir(dir.path()));
            let mut c = srv.raw();
            fill_stream(&mut c);
            let want = snapshot(&mut c, "s");
            drop(c);
            save_and_stop(srv);
            let srv = reader.start(ringkv_e2e::Opts::new().dir(dir.path()));
            srv.wait_loaded();
            let mut c = srv.raw();
            c.cmd(&["CONFIG", "SET", "stream-node-max-entries", "4"]);
            assert_eq!(snapshot(&mut c, "s"), want, "{writer:?} -> {reader:?}");
            // The loaded stream goes on growing in its last node.
            assert_eq!(c.cmd(&["XADD", "s", "21-1", "f", "x"]), b("21-1"));
        }
    }
);

e2e!(
    ringkv_only fn stream_dump_payloads_restore_both_ways(b_) {
        let ours = b_.server();
        let theirs = Backend::Valkey.server();
        let mut a = ours.raw();
        let mut v = theirs.raw();
        fill_stream(&mut a);
        fill_stream(&mut v);
        let want = snapshot(&mut v, "s");
        assert_eq!(snapshot(&mut a, "s"), want);
        // Same nodes, same listpacks, same groups: the payloads differ
        // only in the delivery and seen times.
        let Reply::Bulk(ours_payload) = a.cmd(&["DUMP", "s"]) else { panic!() };
        let Reply::Bulk(theirs_payload) = v.cmd(&["DUMP", "s"]) else { panic!() };
        assert_eq!(ours_payload.len(), theirs_payload.len());
        assert_eq!(ours_payload[..600], theirs_payload[..600]);
        assert_eq!(a.cmd_bytes(&[b"RESTORE", b"r", b"0", &theirs_payload]), Reply::status("OK"));
        assert_eq!(v.cmd_bytes(&[b"RESTORE", b"r", b"0", &ours_payload]), Reply::status("OK"));
        assert_eq!(snapshot(&mut a, "r"), snapshot(&mut v, "r"));
        assert_eq!(
            a.cmd_bytes(&[b"RESTORE", b"bad", b"0", &ours_payload[..ours_payload.len() - 11]]),
            v.cmd_bytes(&[b"RESTORE", b"bad", b"0", &ours_payload[..ours_payload.len() - 11]])
        );
    }
);

/// Stream writes of every kind through `c` (auto IDs, trims, groups,
/// reads, claims, acks); `round` varies the names.
fn stream_workload(c: &mut ringkv_e2e::Raw, round: usize) {
    for i in 0..30 {
        c.cmd(&["XADD", "s", "*", "f", &i.to_string(), "g", "text"]);
    }
    c.cmd(&["XADD", "s", "MAXLEN", "~", "20", "*", "f", "x"]);
    c.cmd(&["XGROUP", "CREATE", "s", &format!("g{round}"), "0"]);
    c.cmd(&["XGROUP", "CREATE", "s", "g", "0"]);
    c.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "alice",
        "COUNT",
        "5",
        "STREAMS",
        "s",
        ">",
    ]);
    c.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "bob",
        "NOACK",
        "COUNT",
        "3",
        "STREAMS",
        "s",
        ">",
    ]);
    c.cmd(&[
        "XREADGROUP",
        "GROUP",
        &format!("g{round}"),
        "carol",
        "COUNT",
        "2",
        "STREAMS",
        "s",
        ">",
    ]);
    let Reply::Array(first) = c.cmd(&["XRANGE", "s", "-", "+", "COUNT", "4"]) else {
        panic!()
    };
    let ids: Vec<String> = first
        .iter()
        .map(|e| match e {
            Reply::Array(p) => p[0].text(),
            _ => panic!(),
        })
        .collect();
    c.cmd(&["XACK", "s", "g", &ids[0]]);
    c.cmd(&["XCLAIM", "s", "g", "erin", "0", &ids[1], "RETRYCOUNT", "7"]);
    c.cmd(&["XDEL", "s", &ids[2]]);
    c.cmd(&["XAUTOCLAIM", "s", "g", "dave", "0", "0", "COUNT", "3"]);
    c.cmd(&["XTRIM", "s", "MINID", "~", &ids[3]]);
    c.cmd(&[
        "XGROUP",
        "SETID",
        "s",
        &format!("g{round}"),
        "0",
        "ENTRIESREAD",
        "0",
    ]);
    c.cmd(&["XGROUP", "DELCONSUMER", "s", "g", "bob"]);
    c.cmd(&[
        "XGROUP",
        "CREATECONSUMER",
        "s",
        "g",
        &format!("frank{round}"),
    ]);
    c.cmd(&["MULTI"]);
    c.cmd(&["XADD", "s", "*", "in", "multi"]);
    c.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "alice",
        "COUNT",
        "1",
        "STREAMS",
        "s",
        ">",
    ]);
    c.cmd(&["EXEC"]);
}

/// `r` with the values after `seen-time` / `active-time` (set where a
/// command runs, so a replica's differ) zeroed.
fn mask_consumer_times(r: Reply) -> Reply {
    match r {
        Reply::Array(items) => {
            let mut out: Vec<Reply> = Vec::with_capacity(items.len());
            for it in items {
                let zero = matches!(out.last(), Some(Reply::Bulk(k)) if k == b"seen-time" || k == b"active-time");
                out.push(if zero {
                    Reply::Int(0)
                } else {
                    mask_consumer_times(it)
                });
            }
            Reply::Array(out)
        }
        other => other,
    }
}

/// What a replica must hold the same as its primary.
fn replicated_view(c: &mut ringkv_e2e::Raw) -> Vec<Reply> {
    let mut pending = match c.cmd(&["XPENDING", "s", "g", "-", "+", "100"]) {
        Reply::Array(items) => items,
        other => panic!("{other:?}"),
    };
    for e in &mut pending {
        if let Reply::Array(f) = e {
            f[2] = Reply::Int(0);
        }
    }
    vec![
        c.cmd(&["XRANGE", "s", "-", "+"]),
        c.cmd(&["XINFO", "STREAM", "s"]),
        c.cmd(&["XINFO", "GROUPS", "s"]),
        Reply::Array(pending),
        mask_consumer_times(c.cmd(&["XINFO", "STREAM", "s", "FULL", "COUNT", "0"])),
    ]
}

e2e!(
    ringkv_only fn stream_writes_replicate_to_and_from_valkey(b_) {
        use ringkv_e2e::replication::{follow, wait_caught_up};
        for (pb, rb) in [(b_, Backend::Valkey), (Backend::Valkey, b_)] {
            let p = pb.server();
            let r = rb.server();
            let (mut pc, mut rc) = (p.client(), r.client());
            let (mut a, mut z) = (p.raw(), r.raw());
            for c in [&mut a, &mut z] {
                c.cmd(&["CONFIG", "SET", "stream-node-max-entries", "4"]);
            }
            // Before the link (the full sync carries it), then as a stream.
            stream_workload(&mut a, 0);
            follow(&mut rc, &p);
            wait_caught_up(&mut pc, &mut rc);
            stream_workload(&mut a, 1);
            wait_caught_up(&mut pc, &mut rc);
            assert_eq!(replicated_view(&mut z), replicated_view(&mut a), "{pb:?} -> {rb:?}");
        }
    }
);

e2e!(
    ringkv_only fn node_boundaries_match_valkeys_listpack_sizes(b_) {
        let ours = b_.server();
        let theirs = Backend::Valkey.server();
        let mut a = ours.raw();
        let mut v = theirs.raw();
        let mut r = Rng(99);
        for max_bytes in ["4096", "300", "1000"] {
            for c in [&mut a, &mut v] {
                c.cmd(&["FLUSHALL"]);
                c.cmd(&["CONFIG", "SET", "stream-node-max-bytes", max_bytes]);
                c.cmd(&["CONFIG", "SET", "stream-node-max-entries", "0"]);
            }
            for i in 1..=300u64 {
                // Strings of every length class, integers of every width,
                // repeated and new field names.
                let value = match r.below(6) {
                    0 => "x".repeat(r.below(70) as usize),
                    1 => "y".repeat(60 + r.below(300) as usize),
                    2 => (r.below(1 << 40) as i64 - (1 << 39)).to_string(),
                    3 => r.below(200).to_string(),
                    4 => format!("0{}", r.below(100)),
                    _ => (-(r.below(70000) as i64)).to_string(),
                };
                let field = if r.below(4) == 0 { format!("f{}", r.below(3)) } else { "f".to_string() };
                let id = format!("{}-{}", i * 3000 + r.below(3000), r.below(5));
                let cmd = ["XADD", "s", &id, &field, &value, "n", &i.to_string()];
                assert_eq!(a.cmd(&cmd), v.cmd(&cmd), "{cmd:?}");
                if i % 50 == 0 {
                    let info = ["XINFO", "STREAM", "s"];
                    assert_eq!(a.cmd(&info), v.cmd(&info), "max-bytes {max_bytes}, {i} entries");
                }
            }
            // The same listpacks: DUMP payloads differ in nothing.
            assert_eq!(a.cmd(&["DUMP", "s"]), v.cmd(&["DUMP", "s"]), "max-bytes {max_bytes}");
        }
    }
);

e2e!(
    fn streams_replay_from_the_aof_and_its_rewrite(b_) {
        use ringkv_e2e::server::TempDir;
        let tmp = TempDir::new("stream-aof");
        let opts = ringkv_e2e::Opts::new()
            .dir(tmp.path())
            .arg("save", "")
            .arg("appendonly", "yes")
            .arg("stream-node-max-entries", "4");
        let want = {
            let mut srv = b_.start(opts.clone());
            let mut c = srv.raw();
            stream_workload(&mut c, 0);
            // The first half goes into a rewrite's RDB base, the second
            // stays as commands in the incr file.
            assert!(!c.cmd(&["BGREWRITEAOF"]).text().is_empty());
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            while ringkv_e2e::info_field(&c.cmd(&["INFO", "persistence"]).text(), "aof_rewrite_in_progress") != "0" {
                assert!(std::time::Instant::now() < deadline, "rewrite did not end");
                std::thread::sleep(Duration::from_millis(20));
            }
            stream_workload(&mut c, 1);
            let want = replicated_view(&mut c);
            c.send(&ringkv_e2e::raw::encode_str(&["SHUTDOWN", "NOSAVE"]));
            srv.wait_exit(Duration::from_secs(10));
            want
        };
        let srv = b_.start(opts);
        srv.wait_loaded();
        let got = replicated_view(&mut srv.raw());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(g == w, "view {i} differs after the restart:\n{g:?}\n{w:?}");
        }
    }
);
