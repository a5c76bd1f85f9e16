//! Streams in the engine: what each command emits for the AOF and
//! replicas (checked against the `*.incr.aof` valkey-server 8.1 writes for
//! the same commands), keyspace events, and XADD's ID choice on a pinned
//! clock.
//!
//! Valkey 8.1 writes: XADD with the ID it chose (`*` and `ms-*`
//! resolved) and `MAXLEN|MINID ~ x` as `= <length or first ID>` (LIMIT
//! kept); XREADGROUP as `XCLAIM key group consumer 0 id TIME t RETRYCOUNT
//! n FORCE JUSTID LASTID last` per delivered entry then `XGROUP SETID key
//! group last ENTRIESREAD n` (NOACK: no XCLAIM; a consumer it created:
//! `XGROUP CREATECONSUMER` first), in MULTI/EXEC when several; XCLAIM and
//! XAUTOCLAIM as XCLAIMs (a deleted entry's too); XACK, XDEL, XGROUP as
//! sent.

mod core_util;
use core_util::*;

const T0: i64 = 1_795_670_122_517;

#[test]
fn stream_writes_are_emitted_as_valkey_writes_them() {
    let mut e = engine();
    e.pin_clock(Some(T0));
    let c = connect(&mut e);
    let mut r = e.attach_effects();
    for i in 1..=5 {
        cmd(
            &mut e,
            c,
            &["xadd", "s", &format!("{i}-1"), "a", &i.to_string()],
        );
    }
    assert_eq!(
        cmd(
            &mut e,
            c,
            &[
                "xadd", "s", "maxlen", "~", "2", "LIMIT", "100", "6-*", "a", "3"
            ]
        ),
        bulk("6-0")
    );
    cmd(&mut e, c, &["xgroup", "create", "s", "g", "0"]);
    cmd(
        &mut e,
        c,
        &[
            "xreadgroup",
            "group",
            "g",
            "alice",
            "count",
            "1",
            "streams",
            "s",
            ">",
        ],
    );
    cmd(
        &mut e,
        c,
        &[
            "xreadgroup",
            "group",
            "g",
            "bob",
            "noack",
            "count",
            "2",
            "streams",
            "s",
            ">",
        ],
    );
    cmd(&mut e, c, &["xclaim", "s", "g", "carol", "0", "1-1"]);
    cmd(&mut e, c, &["xack", "s", "g", "1-1"]);
    cmd(
        &mut e,
        c,
        &[
            "xreadgroup",
            "group",
            "g",
            "alice",
            "count",
            "1",
            "streams",
            "s",
            ">",
        ],
    );
    cmd(&mut e, c, &["xdel", "s", "4-1"]);
    cmd(&mut e, c, &["xautoclaim", "s", "g", "dave", "0", "0"]);
    cmd(
        &mut e,
        c,
        &["config", "set", "stream-node-max-entries", "2"],
    );
    for i in 7..=11 {
        cmd(
            &mut e,
            c,
            &["xadd", "t", &format!("{i}-1"), "a", &i.to_string()],
        );
    }
    assert_eq!(
        cmd(&mut e, c, &["xtrim", "t", "minid", "~", "10"]),
        ":2\r\n"
    );
    let t = T0.to_string();
    let mut want = vec![v(&["SELECT", "0"])];
    for i in 1..=5 {
        want.push(v(&["xadd", "s", &format!("{i}-1"), "a", &i.to_string()]));
    }
    want.extend([
        v(&[
            "xadd", "s", "maxlen", "=", "6", "LIMIT", "100", "6-0", "a", "3",
        ]),
        v(&["xgroup", "create", "s", "g", "0"]),
        v(&["MULTI"]),
        v(&[
            "XCLAIM",
            "s",
            "g",
            "alice",
            "0",
            "1-1",
            "TIME",
            &t,
            "RETRYCOUNT",
            "1",
            "FORCE",
            "JUSTID",
            "LASTID",
            "1-1",
        ]),
        v(&["XGROUP", "SETID", "s", "g", "1-1", "ENTRIESREAD", "1"]),
        v(&["EXEC"]),
        v(&["MULTI"]),
        v(&["XGROUP", "CREATECONSUMER", "s", "g", "bob"]),
        v(&["XGROUP", "SETID", "s", "g", "3-1", "ENTRIESREAD", "3"]),
        v(&["EXEC"]),
        v(&[
            "XCLAIM",
            "s",
            "g",
            "carol",
            "0",
            "1-1",
            "TIME",
            &t,
            "RETRYCOUNT",
            "2",
            "FORCE",
            "JUSTID",
            "LASTID",
            "3-1",
        ]),
        v(&["xack", "s", "g", "1-1"]),
        v(&["MULTI"]),
        v(&[
            "XCLAIM",
            "s",
            "g",
            "alice",
            "0",
            "4-1",
            "TIME",
            &t,
            "RETRYCOUNT",
            "1",
            "FORCE",
            "JUSTID",
            "LASTID",
            "4-1",
        ]),
        v(&["XGROUP", "SETID", "s", "g", "4-1", "ENTRIESREAD", "4"]),
        v(&["EXEC"]),
        v(&["xdel", "s", "4-1"]),
        v(&[
            "XCLAIM",
            "s",
            "g",
            "alice",
            "0",
            "4-1",
            "TIME",
            &t,
            "RETRYCOUNT",
            "1",
            "FORCE",
            "JUSTID",
            "LASTID",
            "4-1",
        ]),
    ]);
    for i in 7..=11 {
        want.push(v(&["xadd", "t", &format!("{i}-1"), "a", &i.to_string()]));
    }
    want.push(v(&["xtrim", "t", "minid", "=", "9-1"]));
    // CONFIG SET is not a write: nothing for it.
    assert_eq!(effects(&mut e, &mut r), want);
}

#[test]
fn auto_ids_follow_the_clock_and_never_go_back() {
    let mut e = engine();
    e.pin_clock(Some(T0));
    let c = connect(&mut e);
    let mut r = e.attach_effects();
    let id = |ms: i64, seq: u64| bulk(&format!("{ms}-{seq}"));
    assert_eq!(cmd(&mut e, c, &["xadd", "s", "*", "f", "v"]), id(T0, 0));
    assert_eq!(cmd(&mut e, c, &["xadd", "s", "*", "f", "v"]), id(T0, 1));
    // The clock goes back: the sequence goes on.
    e.pin_clock(Some(T0 - 5));
    assert_eq!(cmd(&mut e, c, &["xadd", "s", "*", "f", "v"]), id(T0, 2));
    e.pin_clock(Some(T0 + 1));
    assert_eq!(cmd(&mut e, c, &["xadd", "s", "*", "f", "v"]), id(T0 + 1, 0));
    assert_eq!(
        cmd(
            &mut e,
            c,
            &["xadd", "s", &format!("{}-*", T0 + 1), "f", "v"]
        ),
        id(T0 + 1, 1)
    );
    let got = effects(&mut e, &mut r);
    let ids: Vec<&str> = got.iter().skip(1).map(|c| c[2].as_str()).collect();
    let t = |ms: i64, seq: u64| format!("{ms}-{seq}");
    assert_eq!(
        ids,
        vec![t(T0, 0), t(T0, 1), t(T0, 2), t(T0 + 1, 0), t(T0 + 1, 1)]
    );
}

#[test]
fn stream_commands_fire_valkeys_keyspace_events() {
    let mut e = engine();
    e.pin_clock(Some(T0));
    let a = connect(&mut e);
    let sub = connect(&mut e);
    assert_eq!(
        cmd(
            &mut e,
            a,
            &["CONFIG", "SET", "notify-keyspace-events", "Et"]
        ),
        "+OK\r\n"
    );
    cmd(&mut e, sub, &["PSUBSCRIBE", "__keyevent*__:*"]);
    let mut raw = Vec::new();
    e.drain_output(|_, _| {});
    for w in [
        &["xadd", "s", "1-0", "f", "v"][..],
        &["xadd", "s", "maxlen", "0", "2-0", "f", "v"],
        &["xadd", "s", "3-0", "f", "v"],
        &["xdel", "s", "3-0"],
        &["xgroup", "create", "s", "g", "0"],
        &["xgroup", "createconsumer", "s", "g", "c"],
        &["xreadgroup", "group", "g", "new", "streams", "s", ">"],
        &["xgroup", "setid", "s", "g", "0"],
        &["xgroup", "delconsumer", "s", "g", "c"],
        &["xgroup", "destroy", "s", "g"],
        &["xsetid", "s", "9-0"],
        &["xtrim", "s", "maxlen", "0"],
    ] {
        cmd(&mut e, a, w);
    }
    e.drain_output(|c, b| {
        if c == sub {
            raw.extend_from_slice(b);
        }
    });
    let text = String::from_utf8(raw).unwrap();
    let events: Vec<&str> = text
        .split("\r\n")
        .filter(|l| l.starts_with("__keyevent@0__:"))
        .map(|l| &l["__keyevent@0__:".len()..])
        .collect();
    assert_eq!(
        events,
        vec![
            "xadd",
            "xadd",
            "xtrim",
            "xadd",
            "xdel",
            "xgroup-create",
            "xgroup-createconsumer",
            "xgroup-createconsumer",
            "xgroup-setid",
            "xgroup-delconsumer",
            "xgroup-destroy",
            "xsetid",
        ]
    );
}
