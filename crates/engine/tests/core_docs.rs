//! COMMAND DOCS: argument specs in Valkey 8's reply shape.

#[path = "core_util.rs"]
mod util;

use ringkv_engine as engine;
use util::*;

/// One argument map entry: `$len\r\ntext\r\n`.
fn b(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

/// `name`/`type`/`display_text` of a plain argument (Valkey 8 prints
/// `display_text`, defaulting to the name, for every non-oneof/block one).
fn head(name: &str, ty: &str) -> String {
    format!(
        "{}{}{}{}{}{}",
        b("name"),
        b(name),
        b("type"),
        b(ty),
        b("display_text"),
        b(name)
    )
}

#[test]
fn docs_get_resp2_and_resp3() {
    let mut e = engine();
    let c = connect(&mut e);
    let fields = format!(
        "{}{}{}{}{}{}{}{}{}",
        b("summary"),
        b("Returns the string value of a key."),
        b("since"),
        b("1.0.0"),
        b("group"),
        b("string"),
        b("complexity"),
        b("O(1)"),
        b("arguments"),
    );
    let arg = format!("{}{}:0\r\n", head("key", "key"), b("key_spec_index"));
    // What redis-server 7.0 sends, plus Valkey 8's display_text.
    let resp2 = format!("*2\r\n{}*10\r\n{fields}*1\r\n*8\r\n{arg}", b("get"));
    assert_eq!(cmd(&mut e, c, &["command", "docs", "get"]), resp2);
    cmd(&mut e, c, &["hello", "3"]);
    let resp3 = format!("%1\r\n{}%5\r\n{fields}*1\r\n%4\r\n{arg}", b("get"));
    assert_eq!(cmd(&mut e, c, &["command", "docs", "get"]), resp3);
}

#[test]
fn docs_set_arguments() {
    let mut e = engine();
    let c = connect(&mut e);
    let r = cmd(&mut e, c, &["command", "docs", "set"]);
    let at = r.find("$9\r\narguments\r\n").expect("arguments") + 15;
    let pure = |name: &str, token: &str, extra: &str, n: usize| {
        format!(
            "*{n}\r\n{}{}{}{extra}",
            head(name, "pure-token"),
            b("token"),
            b(token)
        )
    };
    let tok = |name: &str, ty: &str, token: &str, since: &str| {
        format!(
            "*10\r\n{}{}{}{}{}",
            head(name, ty),
            b("token"),
            b(token),
            b("since"),
            b(since)
        )
    };
    let optional = format!("{}*1\r\n+optional\r\n", b("flags"));
    // Valkey 8.1's bytes for SET's arguments (IFEQ is new in 8.1; NX and
    // XX carry the since, not their oneof).
    let want = [
        "*5\r\n".to_string(),
        format!("*8\r\n{}{}:0\r\n", head("key", "key"), b("key_spec_index")),
        format!("*6\r\n{}", head("value", "string")),
        format!(
            "*8\r\n{}{}{}{}{optional}{}*3\r\n",
            b("name"),
            b("condition"),
            b("type"),
            b("oneof"),
            b("arguments")
        ),
        pure("nx", "NX", &format!("{}{}", b("since"), b("2.6.12")), 10),
        pure("xx", "XX", &format!("{}{}", b("since"), b("2.6.12")), 10),
        format!(
            "*12\r\n{}{}{}{}{}{}{}",
            head("comparison-value", "string"),
            b("token"),
            b("IFEQ"),
            b("summary"),
            b("Sets the key's value only if the current value matches the specified comparison value."),
            b("since"),
            b("8.1.0")
        ),
        pure(
            "get",
            "GET",
            &format!("{}{}{optional}", b("since"), b("6.2.0")),
            12,
        ),
        format!(
            "*8\r\n{}{}{}{}{optional}{}*5\r\n",
            b("name"),
            b("expiration"),
            b("type"),
            b("oneof"),
            b("arguments")
        ),
        tok("seconds", "integer", "EX", "2.6.12"),
        tok("milliseconds", "integer", "PX", "2.6.12"),
        tok("unix-time-seconds", "unix-time", "EXAT", "6.2.0"),
        tok("unix-time-milliseconds", "unix-time", "PXAT", "6.2.0"),
        tok("keepttl", "pure-token", "KEEPTTL", "6.0.0"),
    ]
    .concat();
    assert_eq!(&r[at..], want);
}

#[test]
fn docs_omit_arguments_when_none() {
    let mut e = engine();
    let c = connect(&mut e);
    let r = cmd(&mut e, c, &["command", "docs", "dbsize"]);
    assert!(r.starts_with("*2\r\n$6\r\ndbsize\r\n*8\r\n"), "{r}");
    assert!(!r.contains("arguments"), "{r}");
    // A oneof nested in a block, a display text, deprecated_since.
    let r = cmd(&mut e, c, &["command", "docs", "client|kill"]);
    assert!(r.contains(&format!("{}{}", b("display_text"), b("ip:port"))));
    assert!(r.contains(&format!("{}{}", b("deprecated_since"), b("2.8.12"))));
    let r = cmd(&mut e, c, &["command", "docs", "mset"]);
    assert!(r.contains(&format!(
        "{}{}{}{}{}*1\r\n+multiple\r\n{}*2\r\n",
        b("name"),
        b("data"),
        b("type"),
        b("block"),
        b("flags"),
        b("arguments")
    )));
}

/// Every command whose arity allows arguments documents them, and none
/// whose arity forbids them does; the exceptions are deliberate (Valkey's
/// JSON documents no arguments for them either).
#[test]
fn every_command_with_arguments_documents_them() {
    // DEBUG's subcommands are undocumented; QUIT ignores extra arguments;
    // Valkey documents CLUSTER's arguments in its subcommands, which a
    // ringkv without cluster mode does not have. Valkey documents none for
    // these either.
    const NO_ARGS: &[&str] = &["debug", "quit", "replconf", "cluster"];
    let t = engine::table::table();
    assert!(t.entries.len() > 60);
    for e in &t.entries {
        let s = e.spec;
        let name = e.fullname.as_str();
        if !s.subcommands.is_empty() {
            assert!(s.args.is_empty(), "container {name} documents arguments");
            continue;
        }
        // The command name (and subcommand name) count in the arity.
        let words = name.split('|').count() as i32;
        let takes_args = s.arity > words || s.arity < -words || s.arity == -words;
        if s.arity == words {
            assert!(
                s.args.is_empty(),
                "{name} (arity {}) documents arguments",
                s.arity
            );
        } else if takes_args && !NO_ARGS.contains(&name) {
            assert!(
                !s.args.is_empty(),
                "{name} (arity {}) lacks arguments",
                s.arity
            );
        }
    }
}
