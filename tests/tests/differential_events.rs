//! Differential test of keyspace notifications against Valkey 8.1: the
//! same seeded-random command sequences go to ringkv and to Valkey, each
//! with `notify-keyspace-events KEAnm` and a subscriber to every event,
//! and after each command the events it fired must match exactly, in
//! order: the class and name of each (`new` before the command's own,
//! `expired` for a time already past, `keymiss` for every read lookup that
//! found nothing, `del` when a collection empties), the key and the
//! database. After each sequence the lookup counters (`keyspace_hits`,
//! `keyspace_misses`, `expired_keys`) must match too.
//!
//! Client-side caching's invalidation messages are compared the same way
//! (default, BCAST and NOLOOP tracking; the tracking client sends half of
//! the commands, so its own reads register keys and its own writes meet
//! NOLOOP).
//!
//! Keys are shared across types, so WRONGTYPE refusals, creations,
//! overwrites and deletions mix. Expire times are either past or far away:
//! nothing may expire between two commands, which would make the
//! comparison depend on timing. Replies are compared too, except where
//! they follow a set's hash order (SORT of a set with equal weights).

use ringkv_e2e::raw::{Raw, encode_str};
use ringkv_e2e::{Backend, Opts, Reply, Rng, e2e};

const SEEDS: u64 = 20;
const COMMANDS: usize = 250;

const KEYS: &[&str] = &["a", "b", "c", "n"];
/// HyperLogLogs only the PF commands touch: string commands would corrupt
/// them, and ringkv refuses a corrupt one where Valkey's PFADD may still
/// edit it (README).
const HLLS: &[&str] = &["p1", "p2"];
const VALUES: &[&str] = &["1", "x", "", "12345678901234567890", "-2", "3.5"];
const MEMBERS: &[&str] = &["m", "1", "2", "", "x"];
/// Past (deletes the key at once), or far away.
const TTLS: &[&str] = &["100", "-1", "0", "100000"];
const PAST_OR_FAR: &[&str] = &["1", "0", "99999999999"];

struct Gen {
    r: Rng,
    /// The next stream ID, so both servers get the same explicit IDs.
    next_id: u64,
}

impl Gen {
    fn pick(&mut self, from: &[&str]) -> String {
        self.r.pick(from).to_string()
    }
    fn key(&mut self) -> String {
        self.pick(KEYS)
    }

    fn command(&mut self) -> Vec<String> {
        let s = |x: &[&str]| x.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        let (k, k2, v, m) = (
            self.key(),
            self.key(),
            self.pick(VALUES),
            self.pick(MEMBERS),
        );
        match self.r.below(64) {
            // Strings.
            0..=2 => {
                let mut c = s(&["SET", &k, &v]);
                match self.r.below(6) {
                    0 => c.push("NX".into()),
                    1 => c.extend(s(&["XX", "GET"])),
                    2 => c.extend(s(&["PXAT", &self.pick(PAST_OR_FAR)])),
                    3 => c.extend(s(&["EX", "100"])),
                    _ => {}
                }
                c
            }
            3 => s(&["GET", &k]),
            4 => s(&["GETSET", &k, &v]),
            5 => s(&["GETDEL", &k]),
            6 => match self.r.below(3) {
                0 => s(&["GETEX", &k, "PXAT", &self.pick(PAST_OR_FAR)]),
                1 => s(&["GETEX", &k, "EX", "100"]),
                _ => s(&["GETEX", &k, "PERSIST"]),
            },
            7 => s(&["APPEND", &k, &v]),
            8 => s(&["INCRBY", &k, "2"]),
            9 => s(&["SETRANGE", &k, "2", "zz"]),
            10 => s(&["SETBIT", &k, "9", "1"]),
            11 => s(&["BITOP", &self.pick(&["AND", "OR", "NOT"]), &k, &k2]),
            12 => s(&["BITFIELD", &k, "INCRBY", "u8", "0", "1"]),
            13 => s(&["PFADD", &self.pick(HLLS), &m, &v]),
            14 => s(&["PFCOUNT", &self.pick(HLLS), &self.pick(HLLS)]),
            15 => s(&["PFMERGE", &self.pick(HLLS), &self.pick(HLLS)]),
            16 => s(&["MGET", &k, &k2]),
            17 => s(&["MSETNX", &k, &v, &k2, &v]),
            18 => s(&["STRLEN", &k]),
            // Keys.
            19 => s(&["EXPIRE", &k, &self.pick(TTLS)]),
            20 => s(&["PEXPIREAT", &k, &self.pick(PAST_OR_FAR)]),
            21 => s(&["PERSIST", &k]),
            22 => s(&[&self.pick(&["TTL", "TYPE", "EXISTS", "TOUCH"]), &k]),
            23 => s(&[&self.pick(&["DEL", "UNLINK"]), &k, &k2]),
            24 => s(&[&self.pick(&["RENAME", "RENAMENX"]), &k, &k2]),
            25 => match self.r.below(3) {
                0 => s(&["COPY", &k, &k2]),
                1 => s(&["COPY", &k, &k2, "REPLACE"]),
                _ => s(&["COPY", &k, &k2, "DB", "1", "REPLACE"]),
            },
            26 => s(&["MOVE", &k, "1"]),
            27 => s(&["OBJECT", &self.pick(&["ENCODING", "FREQ"]), &k]),
            28 => match self.r.below(3) {
                0 => s(&["SORT", &k]),
                1 => s(&["SORT", &k, "BY", "w_*", "GET", "#", "GET", "w_*"]),
                _ => s(&["SORT", &k, "STORE", &k2]),
            },
            // Lists.
            29..=30 => s(&[&self.pick(&["LPUSH", "RPUSH", "LPUSHX"]), &k, &m, &v]),
            31 => s(&[&self.pick(&["LPOP", "RPOP"]), &k]),
            32 => s(&["LMOVE", &k, &k2, "LEFT", "RIGHT"]),
            33 => s(&["RPOPLPUSH", &k, &k2]),
            34 => s(&["LRANGE", &k, "0", "-1"]),
            35 => s(&["LSET", &k, "0", &v]),
            36 => s(&["LREM", &k, "0", &m]),
            37 => s(&["LTRIM", &k, "1", "-1"]),
            38 => s(&["LINSERT", &k, "BEFORE", &m, &v]),
            39 => s(&["LMPOP", "2", &k, &k2, "LEFT", "COUNT", "2"]),
            // Sets.
            40 => s(&["SADD", &k, &m, &v]),
            41 => s(&["SREM", &k, &m]),
            42 => s(&["SMOVE", &k, &k2, &m]),
            43 => s(&["SISMEMBER", &k, &m]),
            44 => s(&[
                &self.pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]),
                &k,
                &k2,
                &self.key(),
            ]),
            45 => s(&["SINTERCARD", "2", &k, &k2]),
            // Hashes.
            46 => s(&["HSET", &k, &m, &v]),
            47 => s(&["HSETNX", &k, &m, &v]),
            48 => s(&["HDEL", &k, &m]),
            49 => s(&["HINCRBY", &k, &m, "1"]),
            50 => s(&["HGET", &k, &m]),
            51 => s(&["HLEN", &k]),
            // Sorted sets.
            52 => s(&["ZADD", &k, &self.pick(&["1", "2", "3"]), &m]),
            53 => s(&["ZINCRBY", &k, "1", &m]),
            54 => s(&["ZREM", &k, &m]),
            55 => s(&["ZSCORE", &k, &m]),
            56 => s(&["ZRANGESTORE", &k, &k2, "0", "-1"]),
            57 => s(&[
                &self.pick(&["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"]),
                &k,
                "2",
                &k2,
                &self.key(),
            ]),
            58 => s(&["ZPOPMIN", &k]),
            59 => s(&["ZREMRANGEBYSCORE", &k, "1", "2"]),
            // Streams, with explicit increasing IDs.
            60 => {
                self.next_id += 1;
                let id = format!("{}-1", self.next_id);
                s(&["XADD", &k, &id, "f", &v])
            }
            61 => s(&["XTRIM", &k, "MAXLEN", "1"]),
            62 => s(&["XGROUP", "CREATE", &k, "g", "0", "MKSTREAM"]),
            // Geo.
            _ => match self.r.below(2) {
                0 => s(&["GEOADD", &k, "13.36", "38.11", &m]),
                _ => s(&[
                    "GEOSEARCHSTORE",
                    &k,
                    &k2,
                    "FROMLONLAT",
                    "13",
                    "38",
                    "BYRADIUS",
                    "100",
                    "km",
                ]),
            },
        }
    }
}

/// A subscriber to every keyspace and keyevent channel.
struct Listener(Raw);

impl Listener {
    fn new(port: u16) -> Listener {
        let mut raw = Raw::connect(port);
        raw.cmd(&["PSUBSCRIBE", "__key*__:*"]);
        Listener(raw)
    }

    /// The events published so far, as `channel payload`: a PING's reply
    /// comes after every message published before it was sent.
    fn events(&mut self) -> Vec<String> {
        self.0.send(&encode_str(&["PING"]));
        let mut out = Vec::new();
        loop {
            match self.0.read_reply() {
                Reply::Array(parts) if parts.len() == 4 => {
                    out.push(format!("{} {}", parts[2].text(), parts[3].text()));
                }
                Reply::Array(parts) if parts.first() == Some(&Reply::bulk("pong")) => {
                    return out;
                }
                other => panic!("unexpected on the subscriber: {other:?}"),
            }
        }
    }
}

/// The lookup counters both servers must agree on.
fn counters(raw: &mut Raw) -> Vec<String> {
    let info = raw.cmd(&["INFO", "stats"]).text();
    info.lines()
        .filter(|l| {
            l.starts_with("keyspace_hits:")
                || l.starts_with("keyspace_misses:")
                || l.starts_with("expired_keys:")
        })
        .map(str::to_string)
        .collect()
}

fn sorted(r: Reply) -> Reply {
    match r {
        Reply::Array(mut items) => {
            items.sort_by_key(|i| format!("{i:?}"));
            Reply::Array(items)
        }
        other => other,
    }
}

e2e!(
    ringkv_only fn keyspace_events_as_valkeys(b) {
        let ours = b.server();
        let theirs = Backend::Valkey.start(Opts::new());
        let mut o = ours.raw();
        let mut t = theirs.raw();
        for raw in [&mut o, &mut t] {
            raw.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEAnm"]);
            // `n` is on, but not shown beside `A`.
            assert_eq!(
                raw.cmd(&["CONFIG", "GET", "notify-keyspace-events"]),
                Reply::Array(vec![Reply::bulk("notify-keyspace-events"), Reply::bulk("AKEm")])
            );
        }
        let mut ol = Listener::new(ours.port);
        let mut tl = Listener::new(theirs.port);
        let mut fired = 0;
        for seed in 0..SEEDS {
            for raw in [&mut o, &mut t] {
                raw.cmd(&["FLUSHALL"]);
                raw.cmd(&["CONFIG", "RESETSTAT"]);
            }
            ol.events();
            tl.events();
            let mut g = Gen { r: Rng::new(seed + 1), next_id: 0 };
            let mut history: Vec<String> = Vec::new();
            for i in 0..COMMANDS {
                let cmd = g.command();
                let args: Vec<&str> = cmd.iter().map(|s| s.as_str()).collect();
                let (mut a, mut v) = (o.cmd(&args), t.cmd(&args));
                let (mut ae, mut ve) = (ol.events(), tl.events());
                history.push(format!("{args:?}"));
                if cmd[0] == "SORT" {
                    // A set's order (and so the order of its lookups) is
                    // its hash table's.
                    (a, v) = (sorted(a), sorted(v));
                    ae.sort();
                    ve.sort();
                }
                let start = history.len().saturating_sub(8);
                assert!(
                    a == v && ae == ve,
                    "divergence at seed {seed} command #{i}: {args:?}\n  ringkv: {a:?}\n    {ae:?}\n  \
                     valkey: {v:?}\n    {ve:?}\npreceding commands:\n    {}",
                    history[start..].join("\n    ")
                );
                fired += ae.len();
            }
            assert_eq!(counters(&mut o), counters(&mut t), "counters after seed {seed}");
        }
        assert!(fired > 5000, "only {fired} events fired");
    }
);

/// Commands, each as its words.
type Commands = &'static [&'static [&'static str]];

/// Blocked clients and the writes that wake them, or that do not.
const BLOCKING: &[(Commands, Commands)] = &[
    // XREADGROUP waiters are woken by the stream's deletion (and read it
    // again, missing it); a plain XREAD waiter is not.
    (
        &[
            &[
                "XREADGROUP",
                "GROUP",
                "g",
                "c1",
                "BLOCK",
                "2000",
                "STREAMS",
                "x",
                ">",
            ],
            &["XREAD", "BLOCK", "300", "STREAMS", "x", "$"],
        ],
        &[&["DEL", "x"]],
    ),
    // A list waiter served by a push, another left waiting by a push to a
    // key it does not wait on.
    (
        &[
            &["BLMOVE", "a", "b", "RIGHT", "LEFT", "2"],
            &["BLPOP", "c", "0.3"],
        ],
        &[
            &["RPUSH", "d", "1"],
            &["RPUSH", "a", "1", "2"],
            &["SET", "c", "s"],
        ],
    ),
    // Sorted-set waiters, one served inside a transaction.
    (
        &[&["BZPOPMIN", "z", "2"], &["BZMPOP", "0.3", "1", "z", "MAX"]],
        &[
            &["MULTI"],
            &["ZADD", "z", "1", "m"],
            &["DEL", "y"],
            &["EXEC"],
        ],
    ),
];

fn blocked_clients(raw: &mut Raw) -> String {
    let info = raw.cmd(&["INFO", "clients"]).text();
    ringkv_e2e::info_field(&info, "blocked_clients")
}

e2e!(
    ringkv_only fn blocked_clients_fire_events_as_valkeys(b) {
        let ours = b.server();
        let theirs = Backend::Valkey.start(Opts::new());
        for (blockers, writes) in BLOCKING {
            let mut seen = Vec::new();
            for port in [ours.port, theirs.port] {
                let mut w = Raw::connect(port);
                w.cmd(&["FLUSHALL"]);
                w.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEAnm"]);
                w.cmd(&["XGROUP", "CREATE", "x", "g", "$", "MKSTREAM"]);
                w.cmd(&["CONFIG", "RESETSTAT"]);
                let mut l = Listener::new(port);
                let mut waiters: Vec<Raw> = Vec::new();
                for (n, cmd) in blockers.iter().enumerate() {
                    let mut c = Raw::connect(port);
                    c.send(&encode_str(cmd));
                    // In the order given: each blocked before the next.
                    while blocked_clients(&mut w) != (n + 1).to_string() {
                        std::thread::sleep(std::time::Duration::from_millis(2));
                    }
                    waiters.push(c);
                }
                let mut events = vec![l.events()];
                for cmd in writes.iter() {
                    let reply = w.cmd(cmd);
                    events.push(vec![format!("{reply:?}")]);
                    events.push(l.events());
                }
                // Every waiter answers, served or timed out.
                let replies: Vec<String> =
                    waiters.iter_mut().map(|c| format!("{:?}", c.read_reply())).collect();
                events.push(replies);
                events.push(l.events());
                events.push(counters(&mut w));
                seen.push(events);
            }
            assert_eq!(seen[0], seen[1], "{blockers:?} then {writes:?} (ringkv, then Valkey)");
        }
    }
);

/// Steps of two clients: `(0, words)` by the one whose CLIENT INFO is
/// compared, `(1, words)` by the other.
type Steps = &'static [(usize, &'static [&'static str])];

/// Scenarios whose every reply, event and counter, and the first client's
/// CLIENT INFO state after, must be Valkey's.
const SCRIPTED: &[Steps] = &[
    // A write by another client dooms the transaction: flag `d`, nothing
    // watched any more, a later WATCH a no-op; EXEC fails.
    &[
        (0, &["WATCH", "k", "j"]),
        (1, &["SET", "k", "1"]),
        (0, &["WATCH", "z"]),
    ],
    &[
        (0, &["WATCH", "k"]),
        (1, &["SET", "k", "1"]),
        (0, &["MULTI"]),
        (0, &["EXEC"]),
    ],
    // A flush marks it and leaves the keys watched.
    &[
        (1, &["SET", "k", "1"]),
        (0, &["WATCH", "k"]),
        (1, &["FLUSHALL"]),
    ],
    // `multi=0` once MULTI or WATCH was used; READONLY's flag `r`.
    &[(0, &["MULTI"]), (0, &["DISCARD"]), (0, &["READONLY"])],
    &[(0, &["READONLY"]), (0, &["RESET"])],
    // No key's value is shared; seconds of the latest expire time.
    &[
        (0, &["SET", "k", "10"]),
        (0, &["OBJECT", "REFCOUNT", "k"]),
        (0, &["PEXPIREAT", "k", "9223372036854775807"]),
        (0, &["EXPIRETIME", "k"]),
    ],
    // XAUTOCLAIM reads its key before it parses its arguments.
    &[(0, &["XAUTOCLAIM", "x", "g", "c", "0", ">"])],
];

/// `flags=`, `multi=` and `watch=` of CLIENT INFO.
fn client_state(raw: &mut Raw) -> Vec<String> {
    let state: Vec<String> = raw
        .cmd(&["CLIENT", "INFO"])
        .text()
        .split_whitespace()
        .filter(|f| {
            ["flags=", "multi=", "watch="]
                .iter()
                .any(|p| f.starts_with(p))
        })
        .map(str::to_string)
        .collect();
    assert_eq!(state.len(), 3, "{state:?}");
    state
}

e2e!(
    ringkv_only fn scripted_steps_as_valkeys(b) {
        let ours = b.server();
        let theirs = Backend::Valkey.start(Opts::new());
        for steps in SCRIPTED {
            let mut seen = Vec::new();
            for port in [ours.port, theirs.port] {
                let mut c = [Raw::connect(port), Raw::connect(port)];
                c[1].cmd(&["FLUSHALL"]);
                c[1].cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEAnm"]);
                c[1].cmd(&["CONFIG", "RESETSTAT"]);
                let mut l = Listener::new(port);
                let mut out = vec![l.events()];
                for (who, words) in steps.iter() {
                    out.push(vec![format!("{:?}", c[*who].cmd(words))]);
                    out.push(l.events());
                }
                out.push(client_state(&mut c[0]));
                let info = c[1].cmd(&["INFO", "clients"]).text();
                out.push(
                    ["watching_clients", "total_watched_keys"]
                        .iter()
                        .map(|f| ringkv_e2e::info_field(&info, f))
                        .collect(),
                );
                out.push(counters(&mut c[1]));
                seen.push(out);
            }
            assert_eq!(seen[0], seen[1], "{steps:?} (ringkv, then Valkey)");
        }
    }
);

/// A RESP3 client with CLIENT TRACKING on and a plain one beside it.
struct Tracked {
    tracker: Raw,
    writer: Raw,
}

impl Tracked {
    fn new(port: u16, mode: &[&str]) -> Tracked {
        let mut tracker = Raw::connect(port);
        tracker.cmd(&["HELLO", "3"]);
        let mut on = vec!["CLIENT", "TRACKING", "ON"];
        on.extend_from_slice(mode);
        assert_eq!(tracker.cmd(&on), Reply::status("OK"));
        Tracked {
            tracker,
            writer: Raw::connect(port),
        }
    }

    /// The invalidation pushes the tracker got so far (a PING's reply
    /// follows them).
    fn pushes(&mut self) -> Vec<Reply> {
        self.tracker.send(&encode_str(&["PING"]));
        let mut out = Vec::new();
        loop {
            match self.tracker.read_reply() {
                Reply::Status(s) if s == "PONG" => return out,
                push @ Reply::Push(_) => out.push(push),
                other => panic!("unexpected on the tracking connection: {other:?}"),
            }
        }
    }
}

e2e!(
    ringkv_only fn tracking_invalidations_as_valkeys(b) {
        let ours = b.server();
        let theirs = Backend::Valkey.start(Opts::new());
        let mut pushed = 0;
        for (n, mode) in [&[][..], &["NOLOOP"], &["BCAST"], &["BCAST", "NOLOOP"]].iter().enumerate() {
            let mut o = Tracked::new(ours.port, mode);
            let mut t = Tracked::new(theirs.port, mode);
            for seed in 0..SEEDS / 4 {
                o.writer.cmd(&["FLUSHALL"]);
                t.writer.cmd(&["FLUSHALL"]);
                o.pushes();
                t.pushes();
                let mut g = Gen { r: Rng::new(100 * n as u64 + seed), next_id: 0 };
                for i in 0..COMMANDS {
                    let cmd = g.command();
                    let args: Vec<&str> = cmd.iter().map(|s| s.as_str()).collect();
                    let by_tracker = g.r.below(2) == 0;
                    for side in [&mut o, &mut t] {
                        let conn = if by_tracker { &mut side.tracker } else { &mut side.writer };
                        conn.cmd(&args);
                    }
                    let (a, v) = (o.pushes(), t.pushes());
                    assert_eq!(
                        a, v,
                        "{mode:?} seed {seed} command #{i} by the {}: {args:?}",
                        if by_tracker { "tracker" } else { "writer" }
                    );
                    pushed += a.len();
                }
            }
        }
        assert!(pushed > 300, "only {pushed} invalidations");
    }
);

/// The generator reaches every kind of event the comparison is about.
#[test]
fn generator_covers_creation_expiry_and_misses() {
    let mut g = Gen {
        r: Rng::new(3),
        next_id: 0,
    };
    let (mut past, mut names) = (0, std::collections::BTreeSet::new());
    for _ in 0..5000 {
        let c = g.command();
        past += usize::from(c.iter().any(|a| a == "-1" || a == "0" || a == "1"));
        names.insert(c[0].clone());
    }
    assert!(
        names.len() >= 60,
        "only {} commands: {names:?}",
        names.len()
    );
    assert!(past > 200, "{past} commands with past times");
}
