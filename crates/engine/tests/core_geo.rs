//! GEO, SORT and LCS through the engine: replies of the documented
//! examples, what the write forms emit for the AOF and replicas, and their
//! keyspace events.
//!
//! Checked against valkey-server 8.1 (`--appendonly yes`, its
//! `*.incr.aof` read back; `notify-keyspace-events KEA`):
//! * GEOADD → `zadd key [NX|XX] [CH] score member...` (lower-case, the
//!   options as sent, each point's 52-bit score in decimal); nothing when
//!   nothing changed; event `zadd`;
//! * GEORADIUS[BYMEMBER] STORE/STOREDIST, GEOSEARCHSTORE, SORT STORE: as
//!   sent; events `georadiusstore`, `geosearchstore`, `sortstore`, or
//!   `del` when an empty result deletes the destination;
//! * GEOSEARCH, GEORADIUS without STORE, SORT_RO, LCS: nothing.

mod core_util;
use core_util::*;

const PALERMO: [&str; 3] = ["13.361389", "38.115556", "Palermo"];
const CATANIA: [&str; 3] = ["15.087269", "37.502669", "Catania"];

fn sicily(e: &mut ringkv_engine::Engine, c: ringkv_engine::ClientId) {
    let mut w = vec!["geoadd", "Sicily"];
    w.extend(PALERMO);
    w.extend(CATANIA);
    assert_eq!(cmd(e, c, &w), ":2\r\n");
}

#[test]
fn the_documented_examples_reply_as_valkey() {
    let mut e = engine();
    let c = connect(&mut e);
    sicily(&mut e, c);
    assert_eq!(
        cmd(&mut e, c, &["geodist", "Sicily", "Palermo", "Catania"]),
        bulk("166274.1516")
    );
    assert_eq!(
        cmd(
            &mut e,
            c,
            &["geodist", "Sicily", "Palermo", "Catania", "km"]
        ),
        bulk("166.2742")
    );
    assert_eq!(
        cmd(&mut e, c, &["geohash", "Sicily", "Palermo", "Catania", "x"]),
        "*3\r\n$11\r\nsqc8b49rny0\r\n$11\r\nsqdtr74hyu0\r\n$-1\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["geopos", "Sicily", "Palermo", "x"]),
        "*2\r\n*2\r\n$20\r\n13.36138933897018433\r\n$20\r\n38.11555639549629859\r\n*-1\r\n"
    );
    assert_eq!(
        cmd(
            &mut e,
            c,
            &[
                "georadius",
                "Sicily",
                "15",
                "37",
                "200",
                "km",
                "WITHDIST",
                "ASC"
            ]
        ),
        "*2\r\n*2\r\n$7\r\nCatania\r\n$7\r\n56.4413\r\n*2\r\n$7\r\nPalermo\r\n$8\r\n190.4424\r\n"
    );
    assert_eq!(
        cmd(
            &mut e,
            c,
            &[
                "geosearch",
                "Sicily",
                "FROMLONLAT",
                "15",
                "37",
                "BYBOX",
                "400",
                "400",
                "km",
                "ASC",
                "WITHHASH"
            ]
        ),
        "*2\r\n*2\r\n$7\r\nCatania\r\n:3479447370796909\r\n*2\r\n$7\r\nPalermo\r\n:3479099956230698\r\n"
    );
    // RESP3: coordinates are doubles, distances stay strings.
    cmd(&mut e, c, &["hello", "3"]);
    assert_eq!(
        cmd(
            &mut e,
            c,
            &[
                "geosearch",
                "Sicily",
                "FROMMEMBER",
                "Palermo",
                "BYRADIUS",
                "1",
                "km",
                "WITHCOORD",
                "WITHDIST"
            ]
        ),
        "*1\r\n*3\r\n$7\r\nPalermo\r\n$6\r\n0.0000\r\n*2\r\n,13.36138933897018433\r\n,38.11555639549629859\r\n"
    );
}

#[test]
fn argument_errors_are_valkeys() {
    let mut e = engine();
    let c = connect(&mut e);
    sicily(&mut e, c);
    for (w, err) in [
        (
            &["geoadd", "g", "200", "1", "m"][..],
            "-ERR invalid longitude,latitude pair 200.000000,1.000000\r\n",
        ),
        (
            &["geoadd", "g", "nx", "xx", "1", "1", "m"],
            "-ERR syntax error\r\n",
        ),
        (
            &["geoadd", "g", "1", "1", "m", "2"],
            "-ERR syntax error\r\n",
        ),
        (
            &["geodist", "Sicily", "a", "b", "yd"],
            "-ERR unsupported unit provided. please use M, KM, FT, MI\r\n",
        ),
        (
            &["georadius", "Sicily", "1", "1", "-1", "km"],
            "-ERR radius cannot be negative\r\n",
        ),
        (
            &["georadius", "Sicily", "1", "1", "x", "km"],
            "-ERR need numeric radius\r\n",
        ),
        (
            &["georadius", "Sicily", "1", "1", "1", "km", "ANY"],
            "-ERR the ANY argument requires COUNT argument\r\n",
        ),
        (
            &["georadius", "Sicily", "1", "1", "1", "km", "COUNT", "0"],
            "-ERR COUNT must be > 0\r\n",
        ),
        (
            &[
                "georadius",
                "Sicily",
                "1",
                "1",
                "1",
                "km",
                "STORE",
                "d",
                "WITHDIST",
            ],
            "-ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options\r\n",
        ),
        (
            &["georadius_ro", "Sicily", "1", "1", "1", "km", "STORE", "d"],
            "-ERR syntax error\r\n",
        ),
        (
            &["georadiusbymember", "Sicily", "nope", "1", "km"],
            "-ERR could not decode requested zset member\r\n",
        ),
        (
            &[
                "geosearch",
                "Sicily",
                "BYRADIUS",
                "1",
                "km",
                "ASC",
                "WITHDIST",
            ],
            "-ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for geosearch\r\n",
        ),
        (
            &[
                "GEOSEARCH",
                "Sicily",
                "FROMLONLAT",
                "1",
                "1",
                "ASC",
                "WITHHASH",
            ],
            "-ERR exactly one of BYRADIUS and BYBOX can be specified for GEOSEARCH\r\n",
        ),
        (
            &[
                "geosearch",
                "Sicily",
                "FROMLONLAT",
                "1",
                "1",
                "BYBOX",
                "1",
                "-1",
                "m",
            ],
            "-ERR height or width cannot be negative\r\n",
        ),
        (
            &["lcs", "a", "b", "len", "idx"],
            "-ERR If you want both the length and indexes, please just use IDX.\r\n",
        ),
        (
            &["lcs", "Sicily", "b"],
            "-ERR The specified keys must contain string values\r\n",
        ),
        (
            &["sort_ro", "Sicily", "STORE", "x"],
            "-ERR syntax error\r\n",
        ),
        (
            &["sort", "Sicily", "LIMIT", "a", "1"],
            "-ERR value is not an integer or out of range\r\n",
        ),
    ] {
        assert_eq!(cmd(&mut e, c, w), err, "{w:?}");
    }
    cmd(&mut e, c, &["rpush", "l", "1", "x"]);
    assert_eq!(
        cmd(&mut e, c, &["sort", "l"]),
        "-ERR One or more scores can't be converted into double\r\n"
    );
    cmd(&mut e, c, &["set", "s", "v"]);
    assert_eq!(cmd(&mut e, c, &["geopos", "s", "m"]), WRONGTYPE_ERR);
    assert_eq!(cmd(&mut e, c, &["sort", "s"]), WRONGTYPE_ERR);
    // The source's type is checked before the coordinates.
    assert_eq!(
        cmd(&mut e, c, &["georadius", "s", "999", "1", "1", "km"]),
        WRONGTYPE_ERR
    );
}

#[test]
fn geoadd_is_emitted_as_the_zadd_it_became() {
    let mut e = engine();
    let c = connect(&mut e);
    let mut r = e.attach_effects();
    sicily(&mut e, c);
    let mut w = vec!["geoadd", "Sicily", "NX", "CH"];
    w.extend(PALERMO);
    w.extend(["1", "1", "x"]);
    assert_eq!(cmd(&mut e, c, &w), ":1\r\n");
    // Nothing changed: nothing emitted.
    let mut w = vec!["geoadd", "Sicily", "XX"];
    w.extend(PALERMO);
    assert_eq!(cmd(&mut e, c, &w), ":0\r\n");
    assert_eq!(
        effects(&mut e, &mut r),
        vec![
            v(&["SELECT", "0"]),
            v(&[
                "zadd",
                "Sicily",
                "3479099956230698",
                "Palermo",
                "3479447370796909",
                "Catania"
            ]),
            v(&[
                "zadd",
                "Sicily",
                "NX",
                "CH",
                "3479099956230698",
                "Palermo",
                "3377822707026402",
                "x"
            ]),
        ]
    );
}

#[test]
fn stores_are_emitted_as_sent_and_reads_emit_nothing() {
    let mut e = engine();
    let c = connect(&mut e);
    sicily(&mut e, c);
    cmd(&mut e, c, &["rpush", "l", "3", "1", "2"]);
    let mut r = e.attach_effects();
    let stores: &[&[&str]] = &[
        &[
            "georadius",
            "Sicily",
            "15",
            "37",
            "200",
            "km",
            "STORE",
            "d1",
        ],
        &[
            "georadiusbymember",
            "Sicily",
            "Palermo",
            "200",
            "km",
            "STOREDIST",
            "d2",
        ],
        &[
            "geosearchstore",
            "d3",
            "Sicily",
            "FROMMEMBER",
            "Palermo",
            "BYRADIUS",
            "200",
            "km",
        ],
        &["sort", "l", "STORE", "sl"],
    ];
    for w in stores {
        cmd(&mut e, c, w);
    }
    for w in [
        &[
            "geosearch",
            "Sicily",
            "FROMMEMBER",
            "Palermo",
            "BYRADIUS",
            "200",
            "km",
        ][..],
        &["georadius_ro", "Sicily", "15", "37", "200", "km"],
        &["sort_ro", "l"],
        &["sort", "l"],
        &["lcs", "d1", "d2"],
        // An empty result over a missing destination changes nothing.
        &["georadius", "Sicily", "0", "0", "1", "km", "STORE", "none"],
    ] {
        cmd(&mut e, c, w);
    }
    let mut want = vec![v(&["SELECT", "0"])];
    want.extend(stores.iter().map(|w| v(w)));
    assert_eq!(effects(&mut e, &mut r), want);
    assert_eq!(
        cmd(&mut e, c, &["zrange", "d2", "0", "-1", "WITHSCORES"]),
        arr(&["Palermo", "0", "Catania", "166.27415156960032"])
    );
    assert_eq!(
        cmd(&mut e, c, &["lrange", "sl", "0", "-1"]),
        arr(&["1", "2", "3"])
    );
}

#[test]
fn write_forms_fire_valkeys_keyspace_events() {
    let mut e = engine();
    let c = connect(&mut e);
    let sub = connect(&mut e);
    cmd(
        &mut e,
        c,
        &["config", "set", "notify-keyspace-events", "KEA"],
    );
    cmd(&mut e, sub, &["psubscribe", "__keyevent@0__:*"]);
    e.drain_output(|_, _| {});
    sicily(&mut e, c);
    for w in [
        &[
            "georadius",
            "Sicily",
            "15",
            "37",
            "200",
            "km",
            "STORE",
            "d1",
        ][..],
        &["georadius", "Sicily", "0", "0", "1", "km", "STORE", "d1"],
        &[
            "geosearchstore",
            "d3",
            "Sicily",
            "FROMMEMBER",
            "Palermo",
            "BYRADIUS",
            "200",
            "km",
        ],
        &[
            "geosearchstore",
            "d3",
            "nokey",
            "FROMMEMBER",
            "Palermo",
            "BYRADIUS",
            "200",
            "km",
        ],
        &["rpush", "l", "3", "1"],
        &["sort", "l", "STORE", "sl"],
        &["sort", "nokey", "STORE", "sl"],
    ] {
        cmd(&mut e, c, w);
    }
    let mut raw = Vec::new();
    e.drain_output(|id, b| {
        if id == sub {
            raw.extend_from_slice(b);
        }
    });
    let text = String::from_utf8(raw).unwrap();
    let lines: Vec<&str> = text.split("\r\n").collect();
    let got: Vec<(String, String)> = lines
        .chunks(9)
        .filter(|ch| ch.len() == 9)
        .map(|ch| {
            let event = ch[6].rsplit(':').next().unwrap().to_string();
            (event, ch[8].to_string())
        })
        .collect();
    let want: Vec<(String, String)> = [
        ("zadd", "Sicily"),
        ("georadiusstore", "d1"),
        ("del", "d1"),
        ("geosearchstore", "d3"),
        ("del", "d3"),
        ("rpush", "l"),
        ("sortstore", "sl"),
        ("del", "sl"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(got, want);
}

#[test]
fn sort_by_and_get_patterns_read_strings_and_hash_fields() {
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["rpush", "ids", "1", "2", "3"]);
    cmd(&mut e, c, &["mset", "w_1", "30", "w_2", "10", "w_3", "20"]);
    cmd(&mut e, c, &["hset", "o_1", "name", "c"]);
    cmd(&mut e, c, &["hset", "o_2", "name", "a"]);
    assert_eq!(
        cmd(
            &mut e,
            c,
            &["sort", "ids", "BY", "w_*", "GET", "#", "GET", "o_*->name"]
        ),
        "*6\r\n$1\r\n2\r\n$1\r\na\r\n$1\r\n3\r\n$-1\r\n$1\r\n1\r\n$1\r\nc\r\n"
    );
    assert_eq!(
        cmd(
            &mut e,
            c,
            &["sort", "ids", "BY", "o_*->name", "ALPHA", "DESC"]
        ),
        arr(&["1", "2", "3"])
    );
    assert_eq!(
        cmd(
            &mut e,
            c,
            &["sort", "ids", "BY", "nosort", "DESC", "LIMIT", "1", "5"]
        ),
        arr(&["2", "1"])
    );
    // STORE writes GET's missing values as empty strings.
    assert_eq!(
        cmd(
            &mut e,
            c,
            &["sort", "ids", "GET", "o_*->name", "STORE", "out"]
        ),
        ":3\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["lrange", "out", "0", "-1"]),
        arr(&["c", "a", ""])
    );
    // A sorted set SORT reads moves to the skiplist encoding, as in Valkey.
    cmd(&mut e, c, &["zadd", "z", "1", "a", "2", "b"]);
    assert_eq!(
        cmd(&mut e, c, &["object", "encoding", "z"]),
        bulk("listpack")
    );
    assert_eq!(cmd(&mut e, c, &["sort_ro", "z", "ALPHA"]), arr(&["a", "b"]));
    assert_eq!(
        cmd(&mut e, c, &["object", "encoding", "z"]),
        bulk("skiplist")
    );
}

#[test]
fn lcs_replies_in_both_protocols() {
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["mset", "a", "ohmytext", "b", "mynewtext"]);
    assert_eq!(cmd(&mut e, c, &["lcs", "a", "b"]), bulk("mytext"));
    assert_eq!(cmd(&mut e, c, &["lcs", "a", "b", "LEN"]), ":6\r\n");
    assert_eq!(cmd(&mut e, c, &["lcs", "a", "missing"]), bulk(""));
    assert_eq!(
        cmd(
            &mut e,
            c,
            &["lcs", "a", "b", "IDX", "WITHMATCHLEN", "MINMATCHLEN", "2"]
        ),
        "*4\r\n$7\r\nmatches\r\n*2\r\n\
         *3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n\
         *3\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n:2\r\n\
         $3\r\nlen\r\n:6\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["lcs", "a", "b", "IDX", "MINMATCHLEN", "4"]),
        "*4\r\n$7\r\nmatches\r\n*1\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n$3\r\nlen\r\n:6\r\n"
    );
    cmd(&mut e, c, &["hello", "3"]);
    assert_eq!(
        cmd(&mut e, c, &["lcs", "a", "b", "IDX", "MINMATCHLEN", "4"]),
        "%2\r\n$7\r\nmatches\r\n*1\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n$3\r\nlen\r\n:6\r\n"
    );
}
