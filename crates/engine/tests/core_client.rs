//! CLIENT subcommands, CLIENT LIST format, CLIENT KILL events, CLIENT REPLY.

#[path = "core_util.rs"]
mod util;

use engine::{ClientId, Event};
use ringkv_engine as engine;
use util::*;

fn connect_from(e: &mut engine::Engine, peer: &str) -> ClientId {
    e.connect(info(peer)).unwrap()
}

#[test]
fn list_line_has_valkey_fields_in_order() {
    let mut e = engine();
    e.pin_clock(Some(1_800_000_000_000));
    let a = connect_from(&mut e, "127.0.0.1:50001");
    let b = connect_from(&mut e, "127.0.0.1:50002");
    assert_eq!(
        cmd(&mut e, b, &["client", "setname", "worker-1"]),
        "+OK\r\n"
    );
    assert_eq!(
        cmd(&mut e, b, &["client", "setinfo", "lib-name", "redis-py"]),
        "+OK\r\n"
    );
    assert_eq!(
        cmd(&mut e, b, &["client", "setinfo", "LIB-VER", "5.0.1"]),
        "+OK\r\n"
    );
    e.pin_clock(Some(1_800_000_003_000));
    let r = cmd(&mut e, a, &["client", "list"]);
    let text = bulk_text(&r);
    let lines: Vec<&str> = text.split('\n').collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(lines[2], "");
    let keys: Vec<&str> = lines[0]
        .split(' ')
        .map(|kv| kv.split('=').next().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "id",
            "addr",
            "laddr",
            "fd",
            "name",
            "age",
            "idle",
            "flags",
            "capa",
            "db",
            "sub",
            "psub",
            "ssub",
            "multi",
            "watch",
            "qbuf",
            "qbuf-free",
            "argv-mem",
            "multi-mem",
            "rbs",
            "rbp",
            "obl",
            "oll",
            "omem",
            "tot-mem",
            "events",
            "cmd",
            "user",
            "redir",
            "resp",
            "lib-name",
            "lib-ver",
            "tot-net-in",
            "tot-net-out",
            "tot-cmds"
        ]
    );
    assert!(lines[0].starts_with(&format!(
        "id={} addr=127.0.0.1:50001 laddr=127.0.0.1:6379 fd=7 name= age=3 idle=0 flags=N capa= db=0 ",
        a.0
    )), "{}", lines[0]);
    assert!(
        lines[0].contains(" cmd=client|list user=default redir=-1 resp=2 lib-name= lib-ver= "),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains(" name=worker-1 age=3 idle=3 "),
        "{}",
        lines[1]
    );
    assert!(lines[1].contains(" cmd=client|setinfo "), "{}", lines[1]);
    assert!(
        lines[1].contains(" lib-name=redis-py lib-ver=5.0.1 "),
        "{}",
        lines[1]
    );
    // TYPE and ID filters.
    assert_eq!(
        bulk_text(&cmd(&mut e, a, &["client", "list", "type", "pubsub"])),
        ""
    );
    assert_eq!(
        bulk_text(&cmd(&mut e, a, &["client", "list", "TYPE", "normal"]))
            .lines()
            .count(),
        2
    );
    let only_b = bulk_text(&cmd(&mut e, a, &["client", "list", "id", &b.0.to_string()]));
    assert!(
        only_b.starts_with(&format!("id={} ", b.0)) && only_b.lines().count() == 1,
        "{only_b}"
    );
    assert_eq!(
        cmd(&mut e, a, &["client", "list", "type", "x"]),
        "-ERR Unknown client type 'x'\r\n"
    );
    assert_eq!(
        cmd(&mut e, a, &["client", "list", "id", "0"]),
        "-ERR client-id should be greater than 0\r\n"
    );
    assert_eq!(
        cmd(&mut e, a, &["client", "list", "foo"]),
        "-ERR syntax error\r\n"
    );
    // CLIENT INFO is the caller's own line; RESP3 sends it verbatim.
    cmd(&mut e, b, &["hello", "3"]);
    let r = cmd(&mut e, b, &["client", "info"]);
    assert!(r.starts_with('='), "{r}");
    assert!(bulk_text(&r).contains(" cmd=client|info "), "{r}");
    assert!(bulk_text(&r).contains(" resp=3 "), "{r}");
}

#[test]
fn setname_getname_setinfo_validation() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(cmd(&mut e, c, &["client", "getname"]), "$-1\r\n");
    assert_eq!(
        cmd(&mut e, c, &["client", "setname", "a b"]),
        "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["client", "setname", "x"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["client", "getname"]), "$1\r\nx\r\n");
    assert_eq!(cmd(&mut e, c, &["client", "setname", ""]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["client", "getname"]), "$-1\r\n");
    assert_eq!(
        cmd(&mut e, c, &["client", "setinfo", "foo", "x"]),
        "-ERR Unrecognized option 'foo'\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["client", "setinfo", "lib-name", "a\nb"]),
        "-ERR lib-name cannot contain spaces, newlines or special characters.\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["client", "no-evict", "on"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["client", "no-touch", "ON"]), "+OK\r\n");
    assert_eq!(
        cmd(&mut e, c, &["client", "no-touch", "maybe"]),
        "-ERR syntax error\r\n"
    );
    let line = bulk_text(&cmd(&mut e, c, &["client", "info"]));
    assert!(line.contains(" flags=eT "), "{line}");
    let help = cmd(&mut e, c, &["client", "help"]);
    assert!(
        help.starts_with("*")
            && help
                .contains("+CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n"),
        "{help}"
    );
}

#[test]
fn kill_old_and_new_forms() {
    let mut e = engine();
    let a = connect_from(&mut e, "127.0.0.1:50001");
    let b = connect_from(&mut e, "127.0.0.1:50002");
    let c = connect_from(&mut e, "127.0.0.1:50003");
    // Old form.
    assert_eq!(
        cmd(&mut e, a, &["client", "kill", "1.2.3.4:5"]),
        "-ERR No such client\r\n"
    );
    assert_eq!(
        cmd(&mut e, a, &["client", "kill", "127.0.0.1:50002"]),
        "+OK\r\n"
    );
    assert_eq!(
        events(&mut e),
        vec![Event::Close {
            client: b,
            flush: false
        }]
    );
    // A killed client runs nothing more, even before the IO layer closes it.
    assert_eq!(cmd(&mut e, b, &["ping"]), "");
    // New form: filters, integer reply, SKIPME defaults to yes.
    assert_eq!(
        cmd(&mut e, a, &["client", "kill", "id", "0"]),
        "-ERR client-id should be greater than 0\r\n"
    );
    assert_eq!(
        cmd(&mut e, a, &["client", "kill", "id", "x"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        cmd(&mut e, a, &["client", "kill", "user", "bob"]),
        "-ERR No such user 'bob'\r\n"
    );
    assert_eq!(
        cmd(&mut e, a, &["client", "kill", "skipme", "maybe"]),
        "-ERR syntax error\r\n"
    );
    assert_eq!(
        cmd(&mut e, a, &["client", "kill", "type", "master"]),
        ":0\r\n"
    );
    assert_eq!(
        cmd(&mut e, a, &["client", "kill", "addr", "127.0.0.1:50001"]),
        ":0\r\n"
    );
    assert_eq!(
        cmd(&mut e, a, &["client", "kill", "laddr", "127.0.0.1:6379"]),
        ":1\r\n"
    );
    assert_eq!(
        events(&mut e),
        vec![Event::Close {
            client: c,
            flush: false
        }]
    );
    // Killing oneself: the reply goes out, then the connection closes.
    let d = connect_from(&mut e, "127.0.0.1:50004");
    let input = encode(&[
        &["client", "kill", "id", &d.0.to_string(), "skipme", "no"],
        &["ping"],
    ]);
    let (out, close) = run_raw(&mut e, d, &input);
    assert_eq!(out, b":1\r\n");
    assert!(close);
    assert!(events(&mut e).is_empty());
}

#[test]
fn reply_off_on_skip() {
    let mut e = engine();
    let c = connect(&mut e);
    let input = encode(&[
        &["client", "reply", "off"],
        &["ping"],
        &["client", "reply", "on"],
        &["echo", "a"],
        &["client", "reply", "skip"],
        &["echo", "b"],
        &["echo", "c"],
    ]);
    let (out, _) = run_raw(&mut e, c, &input);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "+OK\r\n$1\r\na\r\n$1\r\nc\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["client", "reply", "x"]),
        "-ERR syntax error\r\n"
    );
}

/// `omem` is the output the IO layer has not sent (its meter) plus what is
/// queued here for it, less what fits Valkey's reply buffer (`obl`);
/// `tot-mem` includes both.
#[test]
fn omem_counts_output_not_sent_yet() {
    let mut e = engine();
    let a = connect(&mut e);
    let b = connect(&mut e);
    let field = |e: &mut engine::Engine, name: &str| -> u64 {
        let text = bulk_text(&cmd(e, b, &["client", "list", "id", &a.0.to_string()]));
        let kv = text
            .split([' ', '\n'])
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("{name} in {text}"));
        kv.parse().unwrap()
    };
    assert_eq!(field(&mut e, "omem"), 0);
    let events = |e: &mut engine::Engine| {
        let text = bulk_text(&cmd(e, b, &["client", "list", "id", &a.0.to_string()]));
        let ev = text.split(' ').find_map(|kv| kv.strip_prefix("events="));
        ev.unwrap().to_string()
    };
    assert_eq!(events(&mut e), "r");
    let base = field(&mut e, "tot-mem");
    // Within Valkey's 1 KiB reply buffer: `obl`, no `omem`.
    e.client_meter(a).unwrap().set_output(31);
    // Output waits: the socket is watched for writability too.
    assert_eq!(events(&mut e), "rw");
    assert_eq!(field(&mut e, "obl"), 31);
    assert_eq!(field(&mut e, "oll"), 0);
    assert_eq!(field(&mut e, "omem"), 0);
    assert_eq!(field(&mut e, "tot-mem"), base + 31);
    // Past it: all in the reply list, 16 KiB blocks.
    e.client_meter(a).unwrap().set_output(5000);
    assert_eq!(field(&mut e, "obl"), 0);
    assert_eq!(field(&mut e, "oll"), 1);
    assert_eq!(field(&mut e, "omem"), 5000);
    assert_eq!(field(&mut e, "tot-mem"), base + 5000);
    cmd(&mut e, a, &["subscribe", "ch"]);
    e.drain_output(|_, _| {});
    assert_eq!(cmd(&mut e, b, &["publish", "ch", "hello"]), ":1\r\n");
    // The message is still with the engine, not handed to the IO layer.
    let msg = "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n".len() as u64;
    assert_eq!(field(&mut e, "omem"), 5000 + msg);
}

#[test]
fn reply_off_still_sends_pubsub_confirmations() {
    // Valkey's subscribe and unsubscribe confirmations are pushes
    // (CLIENT_PUSHING), which CLIENT REPLY OFF and SKIP do not drop, in
    // RESP2 as in RESP3.
    for proto in ["2", "3"] {
        let mut e = engine();
        let c = connect(&mut e);
        cmd(&mut e, c, &["HELLO", proto]);
        let input = encode(&[
            &["CLIENT", "REPLY", "OFF"],
            &["SUBSCRIBE", "ch"],
            &["PING"],
            &["UNSUBSCRIBE", "ch"],
            &["CLIENT", "REPLY", "SKIP"],
            &["SUBSCRIBE", "x"],
        ]);
        let (out, _) = run_raw(&mut e, c, &input);
        let agg = if proto == "2" { '*' } else { '>' };
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!(
                "{agg}3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n\
                 {agg}3\r\n$11\r\nunsubscribe\r\n$2\r\nch\r\n:0\r\n\
                 {agg}3\r\n$9\r\nsubscribe\r\n$1\r\nx\r\n:1\r\n"
            ),
            "RESP{proto}"
        );
    }
}
