//! DEBUG through the engine: the subcommands clients and tools use, with
//! Valkey 8.1's replies (DIGEST's values are compared with Valkey's own
//! by the e2e test tests/tests/debug.rs).

mod core_util;
use core_util::*;
use ringkv_engine::{Config, Engine};

/// DEBUG is refused unless the configuration allows it, as Valkey's.
fn engine() -> Engine {
    let allow = ["--enable-debug-command".to_string(), "yes".to_string()];
    engine_with(Config::load(None, &allow).unwrap())
}

#[test]
fn digest_is_zero_for_nothing_and_ignores_the_order_of_unordered_things() {
    let mut e = engine();
    let c = connect(&mut e);
    let zero = format!("+{}\r\n", "0".repeat(40));
    assert_eq!(cmd(&mut e, c, &["DEBUG", "DIGEST"]), zero);
    assert_eq!(
        cmd(&mut e, c, &["DEBUG", "DIGEST-VALUE", "nokey"]),
        format!("*1\r\n{zero}")
    );
    cmd(&mut e, c, &["SADD", "s", "a", "b", "c"]);
    cmd(&mut e, c, &["RPUSH", "l", "a", "b"]);
    let first = cmd(&mut e, c, &["DEBUG", "DIGEST"]);
    cmd(&mut e, c, &["FLUSHALL"]);
    cmd(&mut e, c, &["RPUSH", "l", "a", "b"]);
    cmd(&mut e, c, &["SADD", "s", "c", "b", "a"]);
    assert_eq!(cmd(&mut e, c, &["DEBUG", "DIGEST"]), first);
    // A list's order is part of it; a TTL is, its value is not.
    let list = cmd(&mut e, c, &["DEBUG", "DIGEST-VALUE", "l"]);
    cmd(&mut e, c, &["DEL", "l"]);
    cmd(&mut e, c, &["RPUSH", "l", "b", "a"]);
    assert_ne!(cmd(&mut e, c, &["DEBUG", "DIGEST-VALUE", "l"]), list);
    cmd(&mut e, c, &["EXPIRE", "s", "100"]);
    let expiring = cmd(&mut e, c, &["DEBUG", "DIGEST-VALUE", "s"]);
    cmd(&mut e, c, &["EXPIRE", "s", "200"]);
    assert_eq!(cmd(&mut e, c, &["DEBUG", "DIGEST-VALUE", "s"]), expiring);
    cmd(&mut e, c, &["PERSIST", "s"]);
    assert_ne!(cmd(&mut e, c, &["DEBUG", "DIGEST-VALUE", "s"]), expiring);
    // The same data in another database is another dataset.
    let here = cmd(&mut e, c, &["DEBUG", "DIGEST"]);
    cmd(&mut e, c, &["MOVE", "s", "1"]);
    cmd(&mut e, c, &["SELECT", "1"]);
    cmd(&mut e, c, &["MOVE", "s", "0"]);
    assert_eq!(cmd(&mut e, c, &["DEBUG", "DIGEST"]), here);
    cmd(&mut e, c, &["SELECT", "0"]);
    cmd(&mut e, c, &["MOVE", "l", "2"]);
    assert_ne!(cmd(&mut e, c, &["DEBUG", "DIGEST"]), here);
}

#[test]
fn error_is_returned_as_given_and_counted_nowhere() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(
        cmd(&mut e, c, &["DEBUG", "ERROR", "LOADING fake\r\nmessage"]),
        "-LOADING fake  message\r\n"
    );
    let stats = cmd(&mut e, c, &["INFO", "stats"]);
    assert!(stats.contains("total_error_replies:0"), "{stats}");
    let cmdstats = cmd(&mut e, c, &["INFO", "commandstats"]);
    assert!(cmdstats.contains("cmdstat_debug:calls=1,"), "{cmdstats}");
    assert!(cmdstats.contains("failed_calls=0"), "{cmdstats}");
    // The next real error is counted as usual.
    cmd(&mut e, c, &["DEBUG", "NOPE"]);
    let stats = cmd(&mut e, c, &["INFO", "stats"]);
    assert!(stats.contains("total_error_replies:1"), "{stats}");
}

#[test]
fn protocol_replies_with_each_type() {
    let mut e = engine();
    let c = connect(&mut e);
    let p = |e: &mut Engine, t: &str| cmd(e, c, &["DEBUG", "PROTOCOL", t]);
    assert_eq!(
        p(&mut e, "map"),
        "*6\r\n:0\r\n:0\r\n:1\r\n:1\r\n:2\r\n:0\r\n"
    );
    assert_eq!(
        p(&mut e, "push"),
        "-ERR RESP2 is not supported by this command\r\n"
    );
    assert_eq!(
        p(&mut e, "attrib"),
        "$39\r\nSome real reply following the attribute\r\n"
    );
    cmd(&mut e, c, &["HELLO", "3"]);
    assert_eq!(
        p(&mut e, "map"),
        "%3\r\n:0\r\n#f\r\n:1\r\n#t\r\n:2\r\n#f\r\n"
    );
    assert_eq!(p(&mut e, "double"), ",3.141\r\n");
    assert_eq!(
        p(&mut e, "bignum"),
        "(1234567999999999999999999999999999999\r\n"
    );
    assert_eq!(p(&mut e, "set"), "~3\r\n:0\r\n:1\r\n:2\r\n");
    assert_eq!(
        p(&mut e, "verbatim"),
        "=29\r\ntxt:This is a verbatim\nstring\r\n"
    );
    assert_eq!(
        p(&mut e, "push"),
        "$40\r\nSome real reply following the push reply\r\n>2\r\n$16\r\nserver-cpu-usage\r\n:42\r\n"
    );
    assert!(p(&mut e, "nope").starts_with("-ERR Wrong protocol type name."));
}

#[test]
fn object_reports_the_rdb_size_and_the_access_bits() {
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["SET", "n", "12345"]);
    cmd(&mut e, c, &["SET", "s", "hello"]);
    let line = cmd(&mut e, c, &["DEBUG", "OBJECT", "n"]);
    // An integer is saved in 3 bytes (a 16-bit integer encoding).
    assert!(
        line.contains(" encoding:int serializedlength:3 lru:"),
        "{line}"
    );
    assert!(line.contains(" lfu_freq:"), "{line}");
    let line = cmd(&mut e, c, &["DEBUG", "OBJECT", "s", "fast"]);
    assert!(!line.contains("serializedlength"), "{line}");
    assert_eq!(
        cmd(&mut e, c, &["DEBUG", "OBJECT", "x"]),
        "-ERR no such key\r\n"
    );
}

#[test]
fn change_repl_id_forgets_the_old_history() {
    let mut e = engine();
    let c = connect(&mut e);
    let before = bulk_text(&cmd(&mut e, c, &["INFO", "replication"]));
    assert_eq!(cmd(&mut e, c, &["DEBUG", "CHANGE-REPL-ID"]), "+OK\r\n");
    let after = bulk_text(&cmd(&mut e, c, &["INFO", "replication"]));
    assert_ne!(
        info_value(&before, "master_replid"),
        info_value(&after, "master_replid")
    );
    assert_eq!(info_value(&after, "master_replid2"), "0".repeat(40));
    assert_eq!(info_value(&after, "second_repl_offset"), "-1");
}

#[test]
fn set_disable_deny_scripts_lets_scripts_call_noscript_commands_but_not_reenter() {
    let mut e = engine();
    let c = connect(&mut e);
    let protocol = "return redis.call('debug', 'protocol', 'true')";
    let denied = |e: &mut Engine, body: &str| cmd(e, c, &["EVAL", body, "0"]);
    assert!(
        denied(&mut e, protocol).starts_with("-ERR This Redis command is not allowed from script")
    );
    assert_eq!(
        cmd(&mut e, c, &["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"]),
        "+OK\r\n"
    );
    assert_eq!(denied(&mut e, protocol), ":1\r\n");
    let listed = denied(&mut e, "return redis.call('client', 'list')");
    assert!(listed.contains("cmd=eval"), "{listed}");
    // What acts on the calling client's connection or on the script
    // engine itself stays refused.
    for body in [
        "return redis.call('eval', 'return 1', 0)",
        "return redis.call('multi')",
        "return redis.call('subscribe', 'ch')",
    ] {
        assert!(
            denied(&mut e, body).starts_with("-ERR This Redis command is not allowed from script"),
            "{body}"
        );
    }
    assert_eq!(
        cmd(&mut e, c, &["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "0"]),
        "+OK\r\n"
    );
    assert!(
        denied(&mut e, protocol).starts_with("-ERR This Redis command is not allowed from script")
    );
}
