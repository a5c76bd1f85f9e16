//! Pub/Sub: (un)subscribe replies in RESP2 and RESP3, out-of-band message
//! delivery, patterns, shard channels, subscribed-mode restrictions,
//! PUBSUB introspection and cleanup, byte for byte.

#[path = "core_util.rs"]
mod util;

use ringkv_engine as engine;
use std::collections::HashMap;
use util::*;

fn setup() -> (engine::Engine, engine::ClientId, engine::ClientId) {
    let mut e = engine();
    let a = connect(&mut e);
    let b = connect(&mut e);
    (e, a, b)
}

/// Output delivered out of band since the last call, per client.
fn oob(e: &mut engine::Engine) -> HashMap<u64, String> {
    let mut m: HashMap<u64, String> = HashMap::new();
    e.drain_output(|c, b| {
        m.entry(c.0)
            .or_default()
            .push_str(&String::from_utf8_lossy(b))
    });
    m
}

fn b(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

fn frame(head: char, parts: &[&str], n: Option<i64>) -> String {
    let len = parts.len() + n.is_some() as usize;
    let mut s = format!("{head}{len}\r\n");
    for p in parts {
        s.push_str(&b(p));
    }
    if let Some(n) = n {
        s.push_str(&format!(":{n}\r\n"));
    }
    s
}

fn field<'a>(line: &'a str, name: &str) -> &'a str {
    let key = format!(" {name}=");
    let at = line
        .find(&key)
        .unwrap_or_else(|| panic!("{name} in {line}"))
        + key.len();
    line[at..].split(' ').next().unwrap()
}

#[test]
fn subscribe_and_unsubscribe_replies_resp2() {
    let (mut e, a, _) = setup();
    assert_eq!(
        cmd(&mut e, a, &["SUBSCRIBE", "c1", "c2", "c1"]),
        frame('*', &["subscribe", "c1"], Some(1))
            + &frame('*', &["subscribe", "c2"], Some(2))
            + &frame('*', &["subscribe", "c1"], Some(2))
    );
    assert_eq!(
        cmd(&mut e, a, &["PSUBSCRIBE", "p*"]),
        frame('*', &["psubscribe", "p*"], Some(3))
    );
    // Shard channels count on their own.
    assert_eq!(
        cmd(&mut e, a, &["SSUBSCRIBE", "s1"]),
        frame('*', &["ssubscribe", "s1"], Some(1))
    );
    assert_eq!(
        cmd(&mut e, a, &["UNSUBSCRIBE", "nope", "c1"]),
        frame('*', &["unsubscribe", "nope"], Some(3))
            + &frame('*', &["unsubscribe", "c1"], Some(2))
    );
    assert_eq!(
        cmd(&mut e, a, &["UNSUBSCRIBE"]),
        frame('*', &["unsubscribe", "c2"], Some(1))
    );
    assert_eq!(
        cmd(&mut e, a, &["PUNSUBSCRIBE"]),
        frame('*', &["punsubscribe", "p*"], Some(0))
    );
    assert_eq!(
        cmd(&mut e, a, &["SUNSUBSCRIBE"]),
        frame('*', &["sunsubscribe", "s1"], Some(0))
    );
    // Nothing left: still one reply each, with a null name.
    assert_eq!(
        cmd(&mut e, a, &["UNSUBSCRIBE"]),
        "*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n"
    );
    assert_eq!(
        cmd(&mut e, a, &["PUNSUBSCRIBE"]),
        "*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:0\r\n"
    );
    assert_eq!(
        cmd(&mut e, a, &["SUNSUBSCRIBE"]),
        "*3\r\n$12\r\nsunsubscribe\r\n$-1\r\n:0\r\n"
    );
    // Out of subscribed mode again.
    assert_eq!(cmd(&mut e, a, &["GET", "x"]), "$-1\r\n");
}

#[test]
fn resp3_uses_push_frames_and_allows_any_command() {
    let (mut e, a, _) = setup();
    cmd(&mut e, a, &["HELLO", "3"]);
    assert_eq!(
        cmd(&mut e, a, &["SUBSCRIBE", "c"]),
        frame('>', &["subscribe", "c"], Some(1))
    );
    assert_eq!(cmd(&mut e, a, &["GET", "x"]), "_\r\n");
    assert_eq!(cmd(&mut e, a, &["PING"]), "+PONG\r\n");
    assert_eq!(
        cmd(&mut e, a, &["UNSUBSCRIBE"]),
        frame('>', &["unsubscribe", "c"], Some(0))
    );
    assert_eq!(
        cmd(&mut e, a, &["UNSUBSCRIBE"]),
        ">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n"
    );
}

#[test]
fn resp2_subscribed_mode_restrictions() {
    let (mut e, a, _) = setup();
    cmd(&mut e, a, &["SUBSCRIBE", "c"]);
    assert_eq!(
        cmd(&mut e, a, &["GET", "k"]),
        "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"
    );
    assert_eq!(
        cmd(&mut e, a, &["CLIENT", "LIST"]),
        "-ERR Can't execute 'client|list': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"
    );
    assert_eq!(cmd(&mut e, a, &["PING"]), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    assert_eq!(
        cmd(&mut e, a, &["PING", "hi"]),
        "*2\r\n$4\r\npong\r\n$2\r\nhi\r\n"
    );
    assert_eq!(
        cmd(&mut e, a, &["PSUBSCRIBE", "x*"]),
        frame('*', &["psubscribe", "x*"], Some(2))
    );
    // RESET leaves subscribed mode.
    assert_eq!(cmd(&mut e, a, &["RESET"]), "+RESET\r\n");
    assert_eq!(cmd(&mut e, a, &["PING"]), "+PONG\r\n");
    assert_eq!(cmd(&mut e, a, &["PUBSUB", "NUMPAT"]), ":0\r\n");
    // Not even HELLO may run (Valkey's list has no exceptions).
    cmd(&mut e, a, &["SUBSCRIBE", "c"]);
    assert!(cmd(&mut e, a, &["HELLO", "3"]).starts_with("-ERR Can't execute 'hello'"));
}

#[test]
fn publish_delivers_out_of_band() {
    let (mut e, a, b) = setup();
    let c = connect(&mut e);
    cmd(&mut e, a, &["SUBSCRIBE", "news"]);
    cmd(&mut e, c, &["HELLO", "3"]);
    cmd(&mut e, c, &["PSUBSCRIBE", "n*", "x*"]);
    oob(&mut e);
    assert_eq!(cmd(&mut e, b, &["PUBLISH", "news", "hello"]), ":2\r\n");
    let out = oob(&mut e);
    assert_eq!(out[&a.0], frame('*', &["message", "news", "hello"], None));
    assert_eq!(
        out[&c.0],
        frame('>', &["pmessage", "n*", "news", "hello"], None)
    );
    assert!(!out.contains_key(&b.0));
    assert_eq!(cmd(&mut e, b, &["PUBLISH", "other", "x"]), ":0\r\n");
    assert!(oob(&mut e).is_empty());
    // A client matching by channel and by pattern gets both.
    cmd(&mut e, c, &["SUBSCRIBE", "news"]);
    oob(&mut e);
    assert_eq!(cmd(&mut e, b, &["PUBLISH", "news", "m"]), ":3\r\n");
    let out = oob(&mut e);
    assert_eq!(
        out[&c.0],
        frame('>', &["message", "news", "m"], None)
            + &frame('>', &["pmessage", "n*", "news", "m"], None)
    );
}

#[test]
fn pending_messages_precede_the_next_reply() {
    let (mut e, a, b) = setup();
    cmd(&mut e, a, &["HELLO", "3"]);
    cmd(&mut e, a, &["SUBSCRIBE", "c"]);
    cmd(&mut e, b, &["PUBLISH", "c", "1"]);
    // Not drained: it goes out ahead of a's next reply.
    assert_eq!(
        cmd(&mut e, a, &["PING"]),
        frame('>', &["message", "c", "1"], None) + "+PONG\r\n"
    );
}

/// The message comes after PUBLISH's reply, as Valkey 8 defers pushes to
/// the client whose command caused them.
#[test]
fn publishing_to_oneself() {
    let (mut e, a, _) = setup();
    cmd(&mut e, a, &["HELLO", "3"]);
    cmd(&mut e, a, &["SUBSCRIBE", "me"]);
    assert_eq!(
        cmd(&mut e, a, &["PUBLISH", "me", "hi"]),
        ":1\r\n".to_string() + &frame('>', &["message", "me", "hi"], None)
    );
    assert!(oob(&mut e).is_empty());
}

#[test]
fn shard_channels() {
    let (mut e, a, b) = setup();
    cmd(&mut e, a, &["SSUBSCRIBE", "s", "t"]);
    cmd(&mut e, a, &["PSUBSCRIBE", "*"]);
    oob(&mut e);
    assert_eq!(cmd(&mut e, b, &["SPUBLISH", "s", "x"]), ":1\r\n");
    assert_eq!(oob(&mut e)[&a.0], frame('*', &["smessage", "s", "x"], None));
    // PUBLISH does not reach shard subscribers, patterns do not see SPUBLISH.
    assert_eq!(cmd(&mut e, b, &["PUBLISH", "t", "x"]), ":1\r\n");
    assert_eq!(
        oob(&mut e)[&a.0],
        frame('*', &["pmessage", "*", "t", "x"], None)
    );
    assert_eq!(
        cmd(&mut e, b, &["PUBSUB", "SHARDCHANNELS"]),
        "*2\r\n$1\r\ns\r\n$1\r\nt\r\n"
    );
    assert_eq!(
        cmd(&mut e, b, &["PUBSUB", "SHARDCHANNELS", "s*"]),
        "*1\r\n$1\r\ns\r\n"
    );
    assert_eq!(
        cmd(&mut e, b, &["PUBSUB", "SHARDNUMSUB", "s", "zz"]),
        "*4\r\n$1\r\ns\r\n:1\r\n$2\r\nzz\r\n:0\r\n"
    );
    assert_eq!(
        cmd(&mut e, a, &["SUNSUBSCRIBE", "s"]),
        frame('*', &["sunsubscribe", "s"], Some(1))
    );
}

#[test]
fn pubsub_introspection() {
    let (mut e, a, b) = setup();
    let c = connect(&mut e);
    cmd(&mut e, a, &["SUBSCRIBE", "news.1", "news.2", "sport"]);
    cmd(&mut e, c, &["SUBSCRIBE", "news.1"]);
    cmd(&mut e, c, &["PSUBSCRIBE", "a*", "b*"]);
    cmd(&mut e, a, &["PSUBSCRIBE", "a*"]);
    assert_eq!(
        cmd(&mut e, b, &["PUBSUB", "CHANNELS"]),
        "*3\r\n$6\r\nnews.1\r\n$6\r\nnews.2\r\n$5\r\nsport\r\n"
    );
    assert_eq!(
        cmd(&mut e, b, &["PUBSUB", "CHANNELS", "news.*"]),
        "*2\r\n$6\r\nnews.1\r\n$6\r\nnews.2\r\n"
    );
    assert_eq!(
        cmd(&mut e, b, &["PUBSUB", "NUMSUB", "news.1", "sport", "none"]),
        "*6\r\n$6\r\nnews.1\r\n:2\r\n$5\r\nsport\r\n:1\r\n$4\r\nnone\r\n:0\r\n"
    );
    assert_eq!(cmd(&mut e, b, &["PUBSUB", "NUMSUB"]), "*0\r\n");
    assert_eq!(cmd(&mut e, b, &["PUBSUB", "NUMPAT"]), ":2\r\n");
    assert_eq!(
        cmd(&mut e, b, &["PUBSUB", "CHANNELS", "a", "b"]),
        "-ERR unknown subcommand or wrong number of arguments for 'CHANNELS'. Try PUBSUB HELP.\r\n"
    );
    assert_eq!(
        cmd(&mut e, b, &["PUBSUB", "NUMPAT", "x"]),
        "-ERR wrong number of arguments for 'pubsub|numpat' command\r\n"
    );
    assert_eq!(
        cmd(&mut e, b, &["PUBSUB", "FOO"]),
        "-ERR unknown subcommand 'FOO'. Try PUBSUB HELP.\r\n"
    );
    assert!(cmd(&mut e, b, &["PUBSUB", "HELP"]).starts_with(
        "*14\r\n+PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n"
    ));
    let info = cmd(&mut e, b, &["INFO", "stats"]);
    assert!(info.contains("pubsub_channels:3\r\n"), "{info}");
    assert!(info.contains("pubsub_patterns:2\r\n"), "{info}");
    assert!(info.contains("pubsubshard_channels:0\r\n"), "{info}");
    let info = cmd(&mut e, b, &["INFO", "clients"]);
    assert!(info.contains("pubsub_clients:2\r\n"), "{info}");

    let line = bulk_text(&cmd(&mut e, b, &["CLIENT", "LIST", "ID", &a.0.to_string()]));
    assert_eq!(field(&line, "flags"), "P");
    assert_eq!(field(&line, "sub"), "3");
    assert_eq!(field(&line, "psub"), "1");
    assert_eq!(field(&line, "ssub"), "0");

    // Disconnecting cleans up.
    e.disconnect(a);
    e.disconnect(c);
    assert_eq!(cmd(&mut e, b, &["PUBSUB", "CHANNELS"]), "*0\r\n");
    assert_eq!(cmd(&mut e, b, &["PUBSUB", "NUMPAT"]), ":0\r\n");
    let info = cmd(&mut e, b, &["INFO", "clients"]);
    assert!(info.contains("pubsub_clients:0\r\n"), "{info}");
    assert_eq!(cmd(&mut e, b, &["PUBLISH", "news.1", "x"]), ":0\r\n");
}

#[test]
fn arity_errors() {
    let (mut e, a, _) = setup();
    for (words, name) in [
        (&["SUBSCRIBE"][..], "subscribe"),
        (&["PSUBSCRIBE"], "psubscribe"),
        (&["SSUBSCRIBE"], "ssubscribe"),
        (&["PUBLISH", "c"], "publish"),
        (&["SPUBLISH", "c"], "spublish"),
        (&["PUBSUB"], "pubsub"),
    ] {
        assert_eq!(
            cmd(&mut e, a, words),
            format!("-ERR wrong number of arguments for '{name}' command\r\n")
        );
    }
}

#[test]
fn subscribe_inside_multi() {
    let (mut e, a, b) = setup();
    cmd(&mut e, a, &["MULTI"]);
    assert_eq!(cmd(&mut e, a, &["SUBSCRIBE", "q"]), "+QUEUED\r\n");
    assert_eq!(
        cmd(&mut e, a, &["EXEC"]),
        "*1\r\n".to_string() + &frame('*', &["subscribe", "q"], Some(1))
    );
    cmd(&mut e, b, &["PUBLISH", "q", "m"]);
    assert_eq!(oob(&mut e)[&a.0], frame('*', &["message", "q", "m"], None));
}

#[test]
fn pattern_matching_uses_glob_rules() {
    let (mut e, a, b) = setup();
    cmd(&mut e, a, &["PSUBSCRIBE", "h?llo", "x[ab]z", "esc\\*"]);
    oob(&mut e);
    for (ch, n) in [
        ("hello", 1),
        ("hallo", 1),
        ("hllo", 0),
        ("xaz", 1),
        ("xcz", 0),
        ("esc*", 1),
        ("escX", 0),
    ] {
        assert_eq!(
            cmd(&mut e, b, &["PUBLISH", ch, "m"]),
            format!(":{n}\r\n"),
            "{ch}"
        );
    }
}
