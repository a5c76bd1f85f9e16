//! Keyspace notifications: `notify-keyspace-events` parsing and canonical
//! form, the events of the string and generic commands, expiry events
//! (lazy and active), and delivery to subscribers, byte for byte.

#[path = "core_util.rs"]
mod util;

use ringkv_engine as engine;
use util::*;

const T0: i64 = 1_800_000_000_000;

fn setup(flags: &str) -> (engine::Engine, engine::ClientId, engine::ClientId) {
    let mut e = engine();
    e.pin_clock(Some(T0));
    let a = connect(&mut e);
    let sub = connect(&mut e);
    assert_eq!(
        cmd(
            &mut e,
            a,
            &["CONFIG", "SET", "notify-keyspace-events", flags]
        ),
        "+OK\r\n"
    );
    cmd(&mut e, sub, &["PSUBSCRIBE", "__key*__:*"]);
    (e, a, sub)
}

/// The (channel, payload) of every pmessage delivered to `sub` since the
/// last call.
fn events(e: &mut engine::Engine, sub: engine::ClientId) -> Vec<(String, String)> {
    let mut raw = Vec::new();
    e.drain_output(|c, b| {
        if c == sub {
            raw.extend_from_slice(b);
        }
    });
    parse_pmessages(&String::from_utf8(raw).unwrap())
}

fn parse_pmessages(s: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = s.split("\r\n").collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 8 < lines.len() {
        assert!(lines[i] == "*4" || lines[i] == ">4", "{s}");
        assert_eq!(lines[i + 2], "pmessage");
        out.push((lines[i + 6].to_string(), lines[i + 8].to_string()));
        i += 9;
    }
    out
}

fn ev(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn config_flags_parse_and_print_like_valkey() {
    let mut e = engine();
    let a = connect(&mut e);
    for (set, shown) in [
        ("KEA", "AKE"),
        ("AnKE", "AKE"),
        ("gx$", "g$x"),
        ("nK", "nK"),
        ("Ex", "xE"),
        ("Kmlshzetd", "lshzetdKm"),
        ("g$lshzxetd", "A"),
        ("", ""),
    ] {
        assert_eq!(
            cmd(&mut e, a, &["CONFIG", "SET", "notify-keyspace-events", set]),
            "+OK\r\n"
        );
        assert_eq!(
            cmd(&mut e, a, &["CONFIG", "GET", "notify-keyspace-events"]),
            format!(
                "*2\r\n$22\r\nnotify-keyspace-events\r\n${}\r\n{shown}\r\n",
                shown.len()
            ),
            "{set}"
        );
    }
    assert_eq!(
        cmd(
            &mut e,
            a,
            &["CONFIG", "SET", "notify-keyspace-events", "KEQ"]
        ),
        "-ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class character. Use 'Ag$lshzxeKEtmdn'.\r\n"
    );
}

#[test]
fn set_fires_keyspace_and_keyevent() {
    let (mut e, a, sub) = setup("KEA");
    cmd(&mut e, a, &["SET", "k", "v"]);
    assert_eq!(
        events(&mut e, sub),
        ev(&[("__keyspace@0__:k", "set"), ("__keyevent@0__:set", "k")])
    );
    // Another database shows in the channel name.
    cmd(&mut e, a, &["SELECT", "5"]);
    cmd(&mut e, a, &["SET", "k", "v"]);
    assert_eq!(
        events(&mut e, sub),
        ev(&[("__keyspace@5__:k", "set"), ("__keyevent@5__:set", "k")])
    );
}

#[test]
fn k_or_e_alone_and_class_filtering() {
    let (mut e, a, sub) = setup("K$");
    cmd(&mut e, a, &["SET", "k", "v"]);
    cmd(&mut e, a, &["DEL", "k"]);
    assert_eq!(events(&mut e, sub), ev(&[("__keyspace@0__:k", "set")]));
    cmd(
        &mut e,
        a,
        &["CONFIG", "SET", "notify-keyspace-events", "Eg"],
    );
    cmd(&mut e, a, &["SET", "k", "v"]);
    cmd(&mut e, a, &["DEL", "k"]);
    assert_eq!(events(&mut e, sub), ev(&[("__keyevent@0__:del", "k")]));
    // Classes without K or E publish nothing.
    cmd(
        &mut e,
        a,
        &["CONFIG", "SET", "notify-keyspace-events", "g$"],
    );
    cmd(&mut e, a, &["SET", "k", "v"]);
    cmd(&mut e, a, &["DEL", "k"]);
    assert!(events(&mut e, sub).is_empty());
    // Off by default.
    cmd(&mut e, a, &["CONFIG", "SET", "notify-keyspace-events", ""]);
    cmd(&mut e, a, &["SET", "k", "v"]);
    assert!(events(&mut e, sub).is_empty());
}

fn keyevents(e: &mut engine::Engine, sub: engine::ClientId) -> Vec<(String, String)> {
    events(e, sub)
        .into_iter()
        .filter(|(c, _)| c.starts_with("__keyevent"))
        .map(|(c, k)| (c.trim_start_matches("__keyevent@0__:").to_string(), k))
        .collect()
}

/// A command and the (event, key) pairs it fires.
type Case = (
    &'static [&'static str],
    &'static [(&'static str, &'static str)],
);

#[test]
fn string_and_generic_events() {
    let (mut e, a, sub) = setup("EA");
    let cases: &[Case] = &[
        (
            &["SET", "k", "1", "EX", "100"],
            &[("set", "k"), ("expire", "k")],
        ),
        (&["SET", "k", "1", "KEEPTTL"], &[("set", "k")]),
        (&["SETNX", "k", "2"], &[]),
        (&["SETEX", "s", "10", "v"], &[("set", "s"), ("expire", "s")]),
        (&["INCR", "k"], &[("incrby", "k")]),
        (&["DECRBY", "k", "5"], &[("incrby", "k")]),
        (&["INCRBYFLOAT", "k", "1.5"], &[("incrbyfloat", "k")]),
        (&["APPEND", "k", "x"], &[("append", "k")]),
        (&["SETRANGE", "k", "0", "z"], &[("setrange", "k")]),
        (&["MSET", "a", "1", "b", "2"], &[("set", "a"), ("set", "b")]),
        (&["GETSET", "a", "3"], &[("set", "a")]),
        (&["EXPIRE", "a", "100"], &[("expire", "a")]),
        (&["PERSIST", "a"], &[("persist", "a")]),
        (&["PERSIST", "a"], &[]),
        (&["GETEX", "a", "PX", "5000"], &[("expire", "a")]),
        (&["GETEX", "a", "PERSIST"], &[("persist", "a")]),
        (
            &["RENAME", "a", "c"],
            &[("rename_from", "a"), ("rename_to", "c")],
        ),
        (&["COPY", "c", "d"], &[("copy_to", "d")]),
        (&["GETDEL", "d"], &[("del", "d")]),
        (&["DEL", "c", "nokey", "b"], &[("del", "c"), ("del", "b")]),
        (&["UNLINK", "s"], &[("del", "s")]),
        // A time already past is an expiry in Valkey 8, not a deletion.
        (&["EXPIRE", "k", "-1"], &[("expired", "k")]),
        (&["GET", "k"], &[]),
        (&["SET", "k", "v", "PXAT", "1"], &[]),
        (&["SET", "k", "v"], &[("set", "k")]),
        (&["SET", "k", "w", "PXAT", "1"], &[("expired", "k")]),
        (&["SET", "k", "v"], &[("set", "k")]),
        (&["GETEX", "k", "EXAT", "1"], &[("expired", "k")]),
        (&["SET", "k", "v"], &[("set", "k")]),
        (&["BITOP", "NOT", "n", "k"], &[("set", "n")]),
    ];
    for (c, want) in cases {
        let r = cmd(&mut e, a, c);
        assert!(!r.starts_with('-'), "{c:?}: {r}");
        assert_eq!(keyevents(&mut e, sub), ev(want), "{c:?}");
    }
    // The EXPIRE, SET and GETEX above with past times.
    let stats = cmd(&mut e, a, &["INFO", "stats"]);
    assert!(stats.contains("\r\nexpired_keys:3\r\n"), "{stats}");
}

#[test]
fn move_events_name_both_databases() {
    let (mut e, a, sub) = setup("KEg");
    cmd(&mut e, a, &["SET", "k", "v"]);
    cmd(&mut e, a, &["MOVE", "k", "2"]);
    assert_eq!(
        events(&mut e, sub),
        ev(&[
            ("__keyspace@0__:k", "move_from"),
            ("__keyevent@0__:move_from", "k"),
            ("__keyspace@2__:k", "move_to"),
            ("__keyevent@2__:move_to", "k"),
        ])
    );
}

#[test]
fn new_events_need_their_own_flag() {
    let (mut e, a, sub) = setup("E$n");
    cmd(&mut e, a, &["SET", "k", "v"]);
    cmd(&mut e, a, &["SET", "k", "w"]);
    cmd(&mut e, a, &["INCR", "n"]);
    assert_eq!(
        keyevents(&mut e, sub),
        ev(&[
            ("new", "k"),
            ("set", "k"),
            ("set", "k"),
            ("new", "n"),
            ("incrby", "n")
        ])
    );
    // `A` does not include `n`.
    cmd(
        &mut e,
        a,
        &["CONFIG", "SET", "notify-keyspace-events", "EA"],
    );
    cmd(&mut e, a, &["SET", "j", "v"]);
    assert_eq!(keyevents(&mut e, sub), ev(&[("set", "j")]));
}

#[test]
fn expired_events_lazy_and_active() {
    let (mut e, a, sub) = setup("Ex");
    cmd(&mut e, a, &["SET", "k", "v", "PX", "100"]);
    cmd(&mut e, a, &["SET", "j", "v", "PX", "100"]);
    assert!(events(&mut e, sub).is_empty());
    e.pin_clock(Some(T0 + 200));
    // Lazy: the read that finds it expired.
    assert_eq!(cmd(&mut e, a, &["GET", "k"]), "$-1\r\n");
    assert_eq!(events(&mut e, sub), ev(&[("__keyevent@0__:expired", "k")]));
    // Active: the cron cycle.
    e.cron();
    assert_eq!(events(&mut e, sub), ev(&[("__keyevent@0__:expired", "j")]));
    // The expired event comes before the write that found the key gone.
    cmd(
        &mut e,
        a,
        &["CONFIG", "SET", "notify-keyspace-events", "KEA"],
    );
    cmd(&mut e, a, &["SET", "k", "v", "PX", "100"]);
    events(&mut e, sub);
    e.pin_clock(Some(T0 + 400));
    cmd(&mut e, a, &["SET", "k", "w"]);
    assert_eq!(
        events(&mut e, sub),
        ev(&[
            ("__keyspace@0__:k", "expired"),
            ("__keyevent@0__:expired", "k"),
            ("__keyspace@0__:k", "set"),
            ("__keyevent@0__:set", "k"),
        ])
    );
}

/// A client's pushes caused by its own command (its keyspace events, what
/// it publishes to itself, from a script too) follow that command's reply,
/// as Valkey 8's pending push messages.
#[test]
fn resp3_subscriber_gets_its_own_events_after_the_reply() {
    let (mut e, a, _sub) = setup("KA");
    cmd(&mut e, a, &["HELLO", "3"]);
    cmd(&mut e, a, &["SUBSCRIBE", "__keyspace@0__:k", "ch"]);
    let push = |event: &str| {
        format!(
            ">3\r\n$7\r\nmessage\r\n$16\r\n__keyspace@0__:k\r\n${}\r\n{event}\r\n",
            event.len()
        )
    };
    assert_eq!(
        cmd(&mut e, a, &["SET", "k", "v"]),
        format!("+OK\r\n{}", push("set"))
    );
    assert_eq!(
        cmd(&mut e, a, &["PUBLISH", "ch", "hi"]),
        ":1\r\n>3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n"
    );
    assert_eq!(
        cmd(
            &mut e,
            a,
            &["EVAL", "redis.call('SET', 'k', 'w') return 7", "0"]
        ),
        format!(":7\r\n{}", push("set"))
    );
}

#[test]
fn events_inside_exec() {
    let (mut e, a, sub) = setup("E$");
    cmd(&mut e, a, &["MULTI"]);
    cmd(&mut e, a, &["SET", "x", "1"]);
    cmd(&mut e, a, &["INCR", "x"]);
    assert!(events(&mut e, sub).is_empty());
    cmd(&mut e, a, &["EXEC"]);
    assert_eq!(keyevents(&mut e, sub), ev(&[("set", "x"), ("incrby", "x")]));
}
