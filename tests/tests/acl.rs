//! ACL users, end to end, with Valkey 8.1 as the oracle: the same
//! scenario runs against ringkv and Valkey and every reply must match —
//! ACL SETUSER/GETUSER/LIST/USERS/CAT/DRYRUN/LOG/DELUSER, AUTH and HELLO
//! AUTH as a user, NOPERM for commands, keys and channels (top level,
//! inside MULTI, from a script), the INFO counters, CLIENT LIST/KILL by
//! user, `requirepass` as the default user's password. Then the places
//! users come from: `user` lines in a config file, CONFIG REWRITE, and
//! the ACL file, which ringkv and Valkey each read from the other.

use ringkv_e2e::raw::Raw;
use ringkv_e2e::server::TempDir;
use ringkv_e2e::{Backend, Opts, Reply, Server, e2e, info_field};
use std::time::Duration;

/// A reply with what cannot match between two servers taken out: ACL
/// LOG's client line and times, CAT's command order, GENPASS's value.
fn comparable(args: &[&str], r: Reply) -> Reply {
    let sub = args.get(1).map(|s| s.to_ascii_uppercase());
    match (args[0].to_ascii_uppercase().as_str(), sub.as_deref(), r) {
        ("ACL", Some("LOG"), Reply::Array(entries)) => Reply::Array(
            entries
                .into_iter()
                .map(|e| {
                    let Reply::Array(kv) = e else { return e };
                    let kept: Vec<Reply> = kv
                        .chunks(2)
                        .filter(|p| {
                            !matches!(
                                p[0].text().as_str(),
                                "client-info"
                                    | "age-seconds"
                                    | "timestamp-created"
                                    | "timestamp-last-updated"
                            )
                        })
                        .flat_map(|p| p.to_vec())
                        .collect();
                    Reply::Array(kept)
                })
                .collect(),
        ),
        ("ACL", Some("CAT"), Reply::Array(mut names)) if args.len() == 3 => {
            names.sort_by_key(|n| n.text());
            Reply::Array(names)
        }
        ("ACL", Some("GENPASS"), Reply::Bulk(p)) => Reply::Int(p.len() as i64),
        // Names the server and its version.
        ("HELLO", _, Reply::Array(_) | Reply::Map(_)) => Reply::status("HELLO reply"),
        (_, _, r) => r,
    }
}

/// Commands from the admin connection (`a`) and a user's (`u`).
const SCENARIO: &[(char, &[&str])] = &[
    ('a', &["ACL", "WHOAMI"]),
    ('a', &["ACL", "USERS"]),
    ('a', &["ACL", "LIST"]),
    ('a', &["ACL", "GETUSER", "default"]),
    ('a', &["ACL", "SETUSER", "w"]),
    ('a', &["ACL", "GETUSER", "w"]),
    (
        'a',
        &[
            "ACL",
            "SETUSER",
            "u",
            "on",
            ">pw",
            "~k*",
            "%R~r*",
            "%W~w*",
            "&ch*",
            "+get",
            "+set",
            "-@all",
            "+@string",
            "-set",
            "+config|get",
            "+client",
            "+multi",
            "+exec",
            "+eval",
            "+subscribe",
            "+publish",
            "+echo",
            "+hello",
            "+acl|whoami",
        ],
    ),
    (
        'a',
        &[
            "ACL",
            "SETUSER",
            "v",
            "on",
            "nopass",
            "allkeys",
            "allchannels",
            "allcommands",
            "-debug",
            "+@dangerous",
            "-flushall",
        ],
    ),
    (
        'a',
        &[
            "ACL",
            "SETUSER",
            "x",
            "on",
            "#5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8",
        ],
    ),
    (
        'a',
        &[
            "ACL",
            "SETUSER",
            "s",
            "(~x +get)",
            "-@all",
            "+select|0",
            "+select|1",
        ],
    ),
    (
        'a',
        &[
            "ACL",
            "SETUSER",
            "t",
            "on",
            "nopass",
            "+@all",
            "-config",
            "+config|get",
            "resetkeys",
            "%R~a",
            "%W~a",
            "~b",
            "%RW~c",
        ],
    ),
    ('a', &["ACL", "LIST"]),
    ('a', &["ACL", "USERS"]),
    ('a', &["ACL", "GETUSER", "u"]),
    ('a', &["ACL", "GETUSER", "s"]),
    ('a', &["ACL", "GETUSER", "nosuch"]),
    // RESP3: GETUSER's map, its flags a set.
    ('a', &["HELLO", "3"]),
    ('a', &["ACL", "GETUSER", "u"]),
    ('a', &["ACL", "GETUSER", "s"]),
    ('a', &["ACL", "GETUSER", "nosuch"]),
    ('a', &["HELLO", "2"]),
    ('a', &["ACL", "SETUSER", "y", "bogus"]),
    ('a', &["ACL", "SETUSER", "y", "+nosuch"]),
    ('a', &["ACL", "SETUSER", "y", "+@nosuch"]),
    ('a', &["ACL", "SETUSER", "y", "+config|nosuch"]),
    ('a', &["ACL", "SETUSER", "y", "+config|get|x"]),
    ('a', &["ACL", "SETUSER", "y", "-select|0"]),
    ('a', &["ACL", "SETUSER", "y", "#abc"]),
    ('a', &["ACL", "SETUSER", "y", "<nothere"]),
    ('a', &["ACL", "SETUSER", "y", "(~x"]),
    ('a', &["ACL", "SETUSER", "v", "~x"]),
    ('a', &["ACL", "SETUSER", "v", "&x"]),
    (
        'a',
        &["ACL", "SETUSER", "v", "~*", "&*", "allkeys", "allchannels"],
    ),
    ('a', &["ACL", "SETUSER", "v", "%R~*"]),
    ('a', &["ACL", "SETUSER", "z2", "resetchannels", "&*", "&a"]),
    ('a', &["ACL", "SETUSER", "z4", "resetchannels", "&a", "&*"]),
    ('a', &["ACL", "GETUSER", "z4"]),
    ('a', &["ACL", "SETUSER", "a b"]),
    ('a', &["ACL", "USERS"]),
    ('a', &["ACL", "CAT"]),
    ('a', &["ACL", "CAT", "string"]),
    ('a', &["ACL", "CAT", "nosuch"]),
    ('a', &["ACL", "GENPASS"]),
    ('a', &["ACL", "GENPASS", "5"]),
    ('a', &["ACL", "GENPASS", "0"]),
    ('a', &["ACL", "GENPASS", "x"]),
    ('a', &["ACL", "DRYRUN", "u", "SET", "k", "v"]),
    ('a', &["ACL", "DRYRUN", "u", "GET", "x"]),
    ('a', &["ACL", "DRYRUN", "u", "GET", "k"]),
    ('a', &["ACL", "DRYRUN", "u", "PUBLISH", "zz", "m"]),
    ('a', &["ACL", "DRYRUN", "s", "SELECT", "1"]),
    ('a', &["ACL", "DRYRUN", "s", "SELECT", "2"]),
    ('a', &["ACL", "DRYRUN", "s", "GET", "x"]),
    ('a', &["ACL", "DRYRUN", "nobody", "GET", "k"]),
    ('a', &["ACL", "DRYRUN", "u", "NOSUCH", "k"]),
    ('a', &["ACL", "DRYRUN", "u", "GET"]),
    ('a', &["ACL", "SAVE"]),
    ('a', &["ACL", "LOAD"]),
    ('a', &["ACL", "HELP"]),
    ('a', &["ACL", "DELUSER", "w", "default"]),
    ('a', &["ACL", "DELUSER", "w", "nosuch"]),
    ('a', &["SET", "k1", "v1"]),
    ('a', &["RPUSH", "kl", "3", "1", "2"]),
    (
        'a',
        &["ACL", "SETUSER", "so", "on", "nopass", "+@all", "~k*"],
    ),
    (
        'a',
        &[
            "ACL",
            "SETUSER",
            "sr",
            "on",
            "nopass",
            "+@all",
            "~k*",
            "(%R~* +sort)",
        ],
    ),
    ('u', &["AUTH", "u", "wrong"]),
    ('u', &["AUTH", "nosuch", "pw"]),
    ('u', &["AUTH", "u", "pw"]),
    ('u', &["ACL", "WHOAMI"]),
    ('u', &["GET", "k1"]),
    ('u', &["GET", "x"]),
    ('u', &["SET", "k1", "v"]),
    ('u', &["GET", "w1"]),
    ('u', &["GET", "r1"]),
    ('u', &["APPEND", "r1", "v"]),
    ('u', &["APPEND", "w1", "v"]),
    ('u', &["CONFIG", "SET", "port", "1"]),
    ('u', &["ACL", "LIST"]),
    ('u', &["PUBLISH", "chx", "m"]),
    ('u', &["PUBLISH", "zz", "m"]),
    ('u', &["MULTI"]),
    ('u', &["SET", "k", "v"]),
    ('u', &["GET", "k"]),
    ('u', &["EXEC"]),
    ('u', &["EVAL", "return redis.call('set','k','v')", "0"]),
    ('u', &["EVAL", "return redis.call('get','x')", "0"]),
    ('u', &["EVAL", "return redis.pcall('get','x')", "0"]),
    ('u', &["EVAL", "return redis.call('get','k1')", "0"]),
    ('u', &["SUBSCRIBE", "zz"]),
    ('u', &["HELLO", "2", "AUTH", "u", "bad"]),
    ('u', &["HELLO", "2", "AUTH", "t", "any"]),
    ('u', &["ACL", "WHOAMI"]),
    ('u', &["RESET"]),
    ('u', &["ACL", "WHOAMI"]),
    ('u', &["HELLO", "2", "AUTH", "so", "x"]),
    ('u', &["SORT", "kl"]),
    ('u', &["SORT", "kl", "BY", "w_*"]),
    ('u', &["SORT", "kl", "BY", "nosort"]),
    ('u', &["SORT", "kl", "GET", "#"]),
    ('u', &["SORT_RO", "kl", "GET", "#"]),
    ('u', &["HELLO", "2", "AUTH", "sr", "x"]),
    ('u', &["SORT", "kl", "BY", "w_*"]),
    ('u', &["SORT", "kl", "GET", "#"]),
    ('u', &["SORT_RO", "kl", "GET", "#"]),
    ('a', &["ACL", "LOG"]),
    ('a', &["ACL", "LOG", "2"]),
    ('a', &["ACL", "LOG", "x"]),
    ('a', &["ACL", "LOG", "1", "2"]),
    // Lowering the length keeps the log until its next entry, as Valkey.
    ('a', &["CONFIG", "SET", "acllog-max-len", "2"]),
    ('a', &["ACL", "LOG"]),
    ('a', &["AUTH", "u", "wrong"]),
    ('a', &["ACL", "LOG"]),
    ('a', &["CONFIG", "SET", "acllog-max-len", "128"]),
    ('a', &["CLIENT", "KILL", "USER", "nosuch"]),
    ('a', &["ACL", "LOG", "RESET"]),
    ('a', &["ACL", "LOG"]),
    ('a', &["ACL", "SETUSER", "u", "off"]),
    ('a', &["AUTH", "u", "pw"]),
    ('a', &["AUTH", "default", "anything"]),
    ('a', &["AUTH", "anything"]),
    ('a', &["CONFIG", "SET", "requirepass", "s3cret"]),
    ('a', &["ACL", "GETUSER", "default"]),
    ('a', &["AUTH", "s3cret"]),
    ('a', &["AUTH", "default", "wrong"]),
    ('a', &["CONFIG", "SET", "requirepass", ""]),
    ('a', &["ACL", "LIST"]),
];

fn scenario(srv: &Server) -> Vec<String> {
    let mut a = srv.raw();
    let mut u = srv.raw();
    let mut out: Vec<String> = SCENARIO
        .iter()
        .map(|(who, args)| {
            let c: &mut Raw = if *who == 'a' { &mut a } else { &mut u };
            let r = comparable(args, c.cmd(args));
            format!("{who} {args:?} -> {r:?}")
        })
        .collect();
    // The counters, then after CONFIG RESETSTAT.
    for _ in 0..2 {
        let stats = a.cmd(&["INFO", "stats"]).text();
        for f in ["auth", "cmd", "key", "channel"] {
            let name = format!("acl_access_denied_{f}");
            out.push(format!("{name}:{}", info_field(&stats, &name)));
        }
        a.cmd(&["CONFIG", "RESETSTAT"]);
    }
    out
}

e2e!(
    ringkv_only fn acl_commands_and_refusals_answer_as_valkey(b) {
        let ours = scenario(&b.server());
        let theirs = scenario(&Backend::Valkey.server());
        for (o, t) in ours.iter().zip(&theirs) {
            assert_eq!(o, t);
        }
        assert_eq!(ours.len(), theirs.len());
    }
);

/// A transaction queued under rules that change before its EXEC.
fn exec_after_the_rules_changed(srv: &Server) -> Vec<String> {
    let mut a = srv.raw();
    let mut u = srv.raw();
    let mut out = Vec::new();
    let mut run = |c: &mut Raw, args: &[&str]| {
        let r = comparable(args, c.cmd(args));
        out.push(format!("{args:?} -> {r:?}"));
    };
    run(
        &mut a,
        &["ACL", "SETUSER", "u", "on", "nopass", "+@all", "~*", "&*"],
    );
    run(&mut u, &["AUTH", "u", "x"]);
    run(&mut u, &["MULTI"]);
    run(&mut u, &["SET", "k", "v"]);
    run(&mut u, &["GET", "k"]);
    run(&mut u, &["PUBLISH", "c", "m"]);
    run(&mut u, &["PING"]);
    run(
        &mut a,
        &[
            "ACL",
            "SETUSER",
            "u",
            "-get",
            "resetkeys",
            "~z",
            "resetchannels",
        ],
    );
    run(&mut u, &["EXEC"]);
    run(&mut a, &["ACL", "LOG"]);
    run(&mut a, &["GET", "k"]);
    out
}

e2e!(
    ringkv_only fn exec_checks_the_rules_again_as_valkey(b) {
        assert_eq!(
            exec_after_the_rules_changed(&b.server()),
            exec_after_the_rules_changed(&Backend::Valkey.server())
        );
    }
);

/// `acl-pubsub-default`, and a subscriber whose channels its user's new
/// rules refuse: (replies, whether each subscriber was disconnected).
fn channel_rules(srv: &Server) -> (Vec<String>, Vec<bool>) {
    let mut a = srv.raw();
    let mut out = Vec::new();
    for args in [
        &["CONFIG", "SET", "acl-pubsub-default", "allchannels"][..],
        &["ACL", "SETUSER", "p", "on", "nopass", "+@all", "~*"],
        &[
            "ACL", "SETUSER", "q", "on", "nopass", "+@all", "~*", "&news*",
        ],
        &["ACL", "SETUSER", "q", "(+get)", "reset"],
        &["CONFIG", "SET", "acl-pubsub-default", "resetchannels"],
        &[
            "ACL", "SETUSER", "r", "on", "nopass", "+@all", "~*", "&news*",
        ],
        &["ACL", "LIST"],
    ] {
        out.push(format!("{args:?} -> {:?}", a.cmd(args)));
    }
    let subscribe = |user: &str, kind: &str, ch: &str| {
        let mut c = srv.raw();
        assert_eq!(c.cmd(&["AUTH", user, "x"]), Reply::status("OK"));
        let r = c.cmd(&[kind, ch]);
        assert!(matches!(r, Reply::Array(_)), "{kind} {ch} as {user}: {r:?}");
        c
    };
    let mut subs = [
        subscribe("p", "SUBSCRIBE", "news1"),
        subscribe("p", "PSUBSCRIBE", "news*"),
        subscribe("r", "SUBSCRIBE", "news2"),
        subscribe("r", "PSUBSCRIBE", "news*"),
    ];
    out.push(format!(
        "{:?}",
        a.cmd(&["ACL", "SETUSER", "p", "resetchannels", "&news*"])
    ));
    out.push(format!(
        "{:?}",
        a.cmd(&["ACL", "SETUSER", "r", "resetchannels", "&news2"])
    ));
    let closed = subs
        .iter_mut()
        .map(|c| c.closed_within(Duration::from_millis(500)).is_ok())
        .collect();
    (out, closed)
}

e2e!(
    ringkv_only fn channel_rules_and_refused_subscribers_as_valkey(b) {
        let (ours, ours_closed) = channel_rules(&b.server());
        let (theirs, theirs_closed) = channel_rules(&Backend::Valkey.server());
        assert_eq!(ours, theirs);
        assert_eq!(ours_closed, theirs_closed);
        assert!(ours_closed.contains(&true) && ours_closed.contains(&false));
    }
);

e2e!(
    fn a_deleted_user_is_disconnected_and_client_list_names_users(b) {
        let srv = b.server();
        let mut a = srv.raw();
        assert_eq!(
            a.cmd(&["ACL", "SETUSER", "bob", "on", ">pw", "+@all", "~*"]),
            Reply::status("OK")
        );
        let mut bob = srv.raw();
        assert_eq!(bob.cmd(&["AUTH", "bob", "pw"]), Reply::status("OK"));
        assert_eq!(bob.cmd(&["CLIENT", "SETNAME", "bobs"]), Reply::status("OK"));
        let list = a.cmd(&["CLIENT", "LIST", "USER", "bob"]).text();
        assert!(list.contains("name=bobs") && list.contains("user=bob"), "{list}");
        assert_eq!(list.lines().count(), 1, "{list}");
        let me = a.cmd(&["CLIENT", "INFO"]).text();
        assert!(me.contains("user=default"), "{me}");
        // CLIENT KILL USER closes that user's connections only.
        assert_eq!(a.cmd(&["CLIENT", "KILL", "USER", "bob"]), Reply::Int(1));
        bob.closed_within(Duration::from_secs(5)).expect("killed by user");
        assert_eq!(a.cmd(&["PING"]), Reply::status("PONG"));
        let mut bob = srv.raw();
        assert_eq!(bob.cmd(&["AUTH", "bob", "pw"]), Reply::status("OK"));
        assert_eq!(a.cmd(&["ACL", "DELUSER", "bob"]), Reply::Int(1));
        bob.closed_within(Duration::from_secs(5))
            .expect("a deleted user's connection closes");
        assert_eq!(a.cmd(&["ACL", "USERS"]), Reply::Array(vec![Reply::bulk("default")]));
    }
);

e2e!(
    fn auth_as_a_user_is_answered_while_a_script_is_busy(b) {
        let srv = b.server();
        let mut a = srv.raw();
        a.cmd(&["ACL", "SETUSER", "bob", "on", ">pw", "+@all", "~*"]);
        a.cmd(&["CONFIG", "SET", "busy-reply-threshold", "50"]);
        let mut bob = srv.raw();
        // A round trip first, so the connection is known before the script.
        assert_eq!(bob.cmd(&["PING"]), Reply::status("PONG"));
        a.send(&ringkv_e2e::raw::encode_str(&["EVAL", "while true do end", "0"]));
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(bob.cmd(&["AUTH", "bob", "nope"]).text().split(' ').next(), Some("WRONGPASS"));
        assert_eq!(bob.cmd(&["AUTH", "bob", "pw"]), Reply::status("OK"));
        let mut k = srv.raw();
        assert_eq!(k.cmd(&["SCRIPT", "KILL"]), Reply::status("OK"));
        let r = a.read_reply();
        assert!(matches!(r, Reply::Error(_)), "{r:?}");
        assert_eq!(bob.cmd(&["ACL", "WHOAMI"]), Reply::bulk("bob"));
    }
);

/// Every bulk and status string in a reply, depth first.
fn flat_text(r: &Reply) -> Vec<String> {
    match r {
        Reply::Array(v) => v.iter().flat_map(flat_text).collect(),
        Reply::Bulk(_) | Reply::Status(_) => vec![r.text()],
        _ => Vec::new(),
    }
}

/// A server's ACL LIST.
fn acl_list(srv: &Server) -> Vec<String> {
    match srv.raw().cmd(&["ACL", "LIST"]) {
        Reply::Array(v) => v.iter().map(Reply::text).collect(),
        r => panic!("ACL LIST: {r:?}"),
    }
}

e2e!(
    ringkv_only fn users_come_from_config_lines_config_rewrite_and_the_acl_file(b) {
        // `user` lines in a config file: the same users as Valkey's.
        let dir = TempDir::new("acl-conf");
        let conf = dir.path().join("users.conf");
        std::fs::write(
            &conf,
            "user alice on >a ~a* +@read\nuser default on nopass ~* &* +@all\n",
        )
        .unwrap();
        let srv = b.start(Opts::new().conf(&conf));
        let valkey = Backend::Valkey.start(Opts::new().conf(&conf));
        assert_eq!(acl_list(&srv), acl_list(&valkey));
        let mut alice = srv.raw();
        assert_eq!(alice.cmd(&["AUTH", "alice", "a"]), Reply::status("OK"));
        assert_eq!(alice.cmd(&["GET", "a1"]), Reply::Nil);
        assert_eq!(
            alice.cmd(&["SET", "a1", "v"]),
            Reply::err("NOPERM User alice has no permissions to run the 'set' command")
        );
        // CONFIG REWRITE writes every user; a restart reads them back.
        let mut c = srv.raw();
        c.cmd(&["ACL", "SETUSER", "bob", "on", ">b", "~b*", "+get"]);
        assert_eq!(c.cmd(&["CONFIG", "REWRITE"]), Reply::status("OK"));
        let before = acl_list(&srv);
        drop(srv);
        let srv = b.start(Opts::new().conf(&conf));
        assert_eq!(acl_list(&srv), before);
        drop(srv);

        // The ACL file: Valkey writes one, ringkv reads it; ringkv writes
        // one, Valkey reads it.
        let from_valkey = dir.path().join("from-valkey.acl");
        std::fs::write(&from_valkey, "").unwrap();
        let valkey = Backend::Valkey.start(Opts::new().arg("aclfile", from_valkey.to_str().unwrap()));
        let mut v = valkey.raw();
        v.cmd(&["ACL", "SETUSER", "carol", "on", ">c", "%R~c*", "&news", "+@read", "-get", "(~x +set)"]);
        v.cmd(&["ACL", "SETUSER", "default", "on", ">top"]);
        v.cmd(&["AUTH", "top"]);
        assert_eq!(v.cmd(&["ACL", "SAVE"]), Reply::status("OK"));
        let valkey_list = v.cmd(&["ACL", "LIST"]);
        let srv = b.start(Opts::new().arg("aclfile", from_valkey.to_str().unwrap()));
        let mut r = srv.raw();
        assert_eq!(r.cmd(&["AUTH", "top"]), Reply::status("OK"));
        assert_eq!(r.cmd(&["ACL", "LIST"]), valkey_list);
        let from_ringkv = dir.path().join("from-ringkv.acl");
        std::fs::write(&from_ringkv, "").unwrap();
        let srv2 = b.start(Opts::new().arg("aclfile", from_ringkv.to_str().unwrap()));
        let mut r2 = srv2.raw();
        r2.cmd(&["ACL", "SETUSER", "dave", "on", ">d", "~d*", "&*", "+@all", "-@dangerous", "+client|list"]);
        assert_eq!(r2.cmd(&["ACL", "SAVE"]), Reply::status("OK"));
        let ours2 = acl_list(&srv2);
        let valkey2 = Backend::Valkey.start(Opts::new().arg("aclfile", from_ringkv.to_str().unwrap()));
        assert_eq!(acl_list(&valkey2), ours2);
        // ACL LOAD takes what the file says now; clients of a user it no
        // longer has are closed, the others keep theirs.
        let mut dave = srv2.raw();
        assert_eq!(dave.cmd(&["AUTH", "dave", "d"]), Reply::status("OK"));
        r2.cmd(&["ACL", "SETUSER", "erin", "on", ">e", "+@all", "~*"]);
        let mut erin = srv2.raw();
        assert_eq!(erin.cmd(&["AUTH", "erin", "e"]), Reply::status("OK"));
        std::fs::write(
            &from_ringkv,
            "user default on nopass ~* &* +@all\nuser erin on >e -@all +acl|whoami\n",
        )
        .unwrap();
        assert_eq!(r2.cmd(&["ACL", "LOAD"]), Reply::status("OK"));
        let both = Reply::Array(vec![Reply::bulk("default"), Reply::bulk("erin")]);
        assert_eq!(r2.cmd(&["ACL", "USERS"]), both);
        dave.closed_within(Duration::from_secs(5)).expect("dave's connection closes");
        // erin's connection stays hers, under the file's rules.
        assert_eq!(erin.cmd(&["ACL", "WHOAMI"]), Reply::bulk("erin"));
        assert_eq!(
            erin.cmd(&["GET", "k"]),
            Reply::err("NOPERM User erin has no permissions to run the 'get' command")
        );
        // A bad file, or none at all, changes nothing.
        std::fs::write(&from_ringkv, "user eve bogus\n").unwrap();
        let e = r2.cmd(&["ACL", "LOAD"]).text();
        assert!(e.contains(":1: Syntax error. WARNING: ACL errors detected, no change to the previously active ACL rules was performed"), "{e}");
        std::fs::remove_file(&from_ringkv).unwrap();
        let e = r2.cmd(&["ACL", "LOAD"]).text();
        assert!(e.starts_with("ERR Error loading ACLs, opening file"), "{e}");
        assert!(e.ends_with("': No such file or directory"), "{e}");
        assert_eq!(r2.cmd(&["ACL", "USERS"]), both);
        assert_eq!(erin.cmd(&["ACL", "WHOAMI"]), Reply::bulk("erin"));
    }
);

e2e!(
    ringkv_only fn a_bad_user_declaration_stops_the_start(b) {
        let dir = TempDir::new("acl-bad");
        let conf = dir.path().join("bad.conf");
        std::fs::write(&conf, "user alice on bogus\n").unwrap();
        let (status, log) = b.start_expect_exit(Opts::new().conf(&conf));
        assert!(!status.success());
        assert!(log.contains("Error in user declaration 'alice': Syntax error"), "{log}");
        let acl = dir.path().join("users.acl");
        std::fs::write(&acl, "user bob on\n").unwrap();
        std::fs::write(&conf, "user alice on\n").unwrap();
        let (status, log) = b.start_expect_exit(
            Opts::new().conf(&conf).arg("aclfile", acl.to_str().unwrap()),
        );
        assert!(!status.success());
        assert!(log.contains("at the same setting an ACL file path is invalid"), "{log}");
        // An ACL file that is not there stops the start too (as Valkey).
        let missing = dir.path().join("missing.acl");
        let (status, log) =
            b.start_expect_exit(Opts::new().arg("aclfile", missing.to_str().unwrap()));
        assert!(!status.success());
        assert!(log.contains("Error loading ACLs, opening file"), "{log}");
    }
);

e2e!(
    fn acl_save_on_a_full_disk_fails_and_keeps_the_old_file(b) {
        let Some(disk) = ringkv_e2e::server::SmallDisk::mount(64) else {
            // Mounting needs root; CI runs as root.
            assert!(std::env::var("CI").is_err(), "cannot mount a tmpfs in CI");
            eprintln!("skipped: cannot mount a tmpfs here (not root?)");
            return;
        };
        let path = disk.dir.path().join("users.acl");
        std::fs::write(&path, "").unwrap();
        let srv = b.start(Opts::new().arg("aclfile", path.to_str().unwrap()));
        let mut c = srv.raw();
        c.cmd(&["ACL", "SETUSER", "small", "on", ">s", "~*", "+get"]);
        assert_eq!(c.cmd(&["ACL", "SAVE"]), Reply::status("OK"));
        let saved = std::fs::read(&path).unwrap();
        // Users whose lines fill more than the disk holds.
        for i in 0..200 {
            let mut rule = vec!["ACL".to_string(), "SETUSER".into(), format!("big{i}")];
            rule.extend((0..20).map(|j| format!("~{}{j}", "p".repeat(40))));
            let args: Vec<&str> = rule.iter().map(String::as_str).collect();
            assert_eq!(c.cmd(&args), Reply::status("OK"));
        }
        assert_eq!(
            c.cmd(&["ACL", "SAVE"]),
            Reply::err("ERR There was an error trying to save the ACLs. Please check the server logs for more information")
        );
        assert_eq!(std::fs::read(&path).unwrap(), saved, "the saved file changed");
        assert_eq!(c.cmd(&["PING"]), Reply::status("PONG"));
        // Once there is room, the save goes through.
        for i in 0..200 {
            c.cmd(&["ACL", "DELUSER", &format!("big{i}")]);
        }
        assert_eq!(c.cmd(&["ACL", "SAVE"]), Reply::status("OK"));
    }
);

e2e!(
    ringkv_only fn replicas_authenticate_as_an_acl_user(b) {
        let primary = b.server();
        let mut p = primary.raw();
        p.cmd(&["ACL", "SETUSER", "repl", "on", ">rpw", "+psync", "+replconf", "+ping"]);
        p.cmd(&["ACL", "SETUSER", "norepl", "on", ">x", "+replconf", "+ping"]);
        p.cmd(&["SET", "k", "v"]);
        assert_eq!(p.cmd(&["CONFIG", "SET", "requirepass", "adminpw"]), Reply::status("OK"));
        let port = primary.port.to_string();
        let link = |replica: &Server| {
            let info = replica.raw().cmd(&["INFO", "replication"]).text();
            info_field(&info, "master_link_status")
        };
        // ringkv and Valkey 8.1 replicas, as the user `repl`.
        for backend in [b, Backend::Valkey] {
            let replica = backend.start(Opts::new().arg("masteruser", "repl").arg("masterauth", "rpw"));
            let mut r = replica.raw();
            assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &port]), Reply::status("OK"));
            ringkv_e2e::within(30, "the replica to sync as `repl`", || {
                link(&replica) == "up" && r.cmd(&["GET", "k"]) == Reply::bulk("v")
            });
        }
        // A user that may not PSYNC never gets a link; the primary logs why.
        let replica = b.start(Opts::new().arg("masteruser", "norepl").arg("masterauth", "x"));
        replica.raw().cmd(&["REPLICAOF", "127.0.0.1", &port]);
        ringkv_e2e::within(10, "the refused PSYNC in the primary's ACL LOG", || {
            flat_text(&p.cmd(&["ACL", "LOG"])).contains(&"psync".to_string())
        });
        assert_eq!(link(&replica), "down");
    }
);

/// Rules a random user is given, a few at a time.
const RULES: &[&str] = &[
    "on",
    "off",
    "nopass",
    "resetpass",
    ">pw1",
    ">pw2",
    "<pw1",
    "reset",
    "#5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8",
    "!5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8",
    "sanitize-payload",
    "skip-sanitize-payload",
    "~k*",
    "~*",
    "%R~r*",
    "%W~w*",
    "%RW~x",
    "allkeys",
    "resetkeys",
    "~a?c",
    "&ch*",
    "&*",
    "allchannels",
    "resetchannels",
    "&news",
    "+@all",
    "-@all",
    "allcommands",
    "nocommands",
    "+@string",
    "-@string",
    "+@read",
    "-@write",
    "+@admin",
    "-@dangerous",
    "+@keyspace",
    "+@pubsub",
    "+@scripting",
    "+@slow",
    "-@fast",
    "+@connection",
    "-@hash",
    "+get",
    "-get",
    "+set",
    "+config",
    "-config",
    "+config|get",
    "-config|set",
    "+client|list",
    "+select|0",
    "+debug",
    "-flushall",
    "+acl",
    "-acl|setuser",
    "+eval",
    "+object|encoding",
    "+publish",
    "+subscribe",
    "+psubscribe",
    "(~x +get)",
    "(+@read %R~r*)",
    "(&news +publish)",
    "clearselectors",
];

/// Commands asked about with ACL DRYRUN.
const ASKED: &[&[&str]] = &[
    &["GET", "k1"],
    &["GET", "r1"],
    &["GET", "w1"],
    &["GET", "x"],
    &["GET", "abc"],
    &["SET", "k1", "v"],
    &["SET", "w1", "v"],
    &["SET", "r1", "v"],
    &["SET", "x", "v"],
    &["CONFIG", "GET", "port"],
    &["CONFIG", "SET", "maxmemory", "0"],
    &["CLIENT", "LIST"],
    &["CLIENT", "ID"],
    &["SELECT", "0"],
    &["SELECT", "1"],
    &["PUBLISH", "ch1", "m"],
    &["PUBLISH", "news", "m"],
    &["SUBSCRIBE", "ch1", "news"],
    &["PSUBSCRIBE", "ch*"],
    &["PSUBSCRIBE", "news"],
    &["OBJECT", "ENCODING", "k1"],
    &["OBJECT", "FREQ", "k1"],
    &["DEBUG", "SLEEP", "0"],
    &["FLUSHALL"],
    &["ACL", "WHOAMI"],
    &["ACL", "SETUSER", "x"],
    &["EVAL", "return 1", "1", "k1"],
    &["DEL", "k1", "x"],
    &["MGET", "k1", "r1"],
    &["LPUSH", "k1", "a"],
    &["COPY", "r1", "w1"],
    &["RENAME", "k1", "k2"],
    &["HSET", "k1", "f", "v"],
    &["PING"],
    &["EXISTS", "x"],
    &["SPUBLISH", "ch1", "m"],
    &["SORT", "k1"],
    &["INFO"],
    &["AUTH", "a", "b"],
];

/// A seeded run of ACL SETUSERs and DRYRUNs; every reply, and the user as
/// ACL GETUSER and ACL LIST show it after each change.
fn random_rules(srv: &Server, seed: u64) -> Vec<String> {
    let mut rng = ringkv_e2e::Rng::new(seed);
    let mut c = srv.raw();
    let mut out = Vec::new();
    for _ in 0..8 {
        let mut args = vec!["ACL", "SETUSER", "r"];
        for _ in 0..1 + rng.below(5) {
            args.push(*rng.pick(RULES));
        }
        out.push(format!("{args:?} -> {:?}", c.cmd(&args)));
        out.push(format!("{:?}", c.cmd(&["ACL", "GETUSER", "r"])));
        out.push(format!("{:?}", c.cmd(&["ACL", "LIST"])));
        for _ in 0..6 {
            let mut q = vec!["ACL", "DRYRUN", "r"];
            let asked: &&[&str] = rng.pick(ASKED);
            q.extend_from_slice(asked);
            out.push(format!("{q:?} -> {:?}", c.cmd(&q)));
        }
    }
    out
}

e2e!(
    ringkv_only fn random_rules_answer_as_valkey(b) {
        let ours = b.server();
        let theirs = Backend::Valkey.server();
        for seed in 1..=25 {
            let (o, t) = (random_rules(&ours, seed), random_rules(&theirs, seed));
            for (a, b) in o.iter().zip(&t) {
                assert_eq!(a, b, "seed {seed}");
            }
            ours.raw().cmd(&["ACL", "DELUSER", "r"]);
            theirs.raw().cmd(&["ACL", "DELUSER", "r"]);
        }
    }
);
