//! A script that runs past `busy-reply-threshold` (`lua-time-limit`):
//! other clients get -BUSY while it runs, SCRIPT KILL / FUNCTION KILL
//! stop it (UNKILLABLE once it wrote), SHUTDOWN NOSAVE stops the server,
//! and replies stay in order. Each test runs in inline mode and in
//! threaded mode (`io-threads 2`, where the one IO thread would also run
//! the execution step when idle, and `io-threads 3` with both IO threads
//! taking clients), on both event loops; the error texts are compared
//! with Valkey 8.1's.

use ringkv_e2e::server::TempDir;
use ringkv_e2e::{Backend, Opts, Raw, Reply, Server, e2e, raw::encode_str};
use std::time::{Duration, Instant};

const BUSY_EVAL: &str =
    "BUSY Valkey is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
const BUSY_FUNCTION: &str =
    "BUSY Valkey is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";
const NOTBUSY: &str = "NOTBUSY No scripts in execution right now.";
/// The threshold the tests set (ms).
const THRESHOLD: &str = "100";

/// Inline, and threaded in two shapes.
fn modes() -> Vec<(&'static str, Opts)> {
    vec![
        ("inline", Opts::new().arg("io-threads", "1")),
        ("io-threads 2", Opts::new().arg("io-threads", "2")),
        (
            "io-threads 3",
            Opts::new()
                .arg("io-threads", "3")
                .arg("io-threads-adaptive", "no"),
        ),
    ]
}

/// Start `args` on `caller` without reading its reply, and wait until the
/// script is past the threshold: until `srv` logs that it turned busy
/// (Valkey's and ringkv's "Slow script detected"). A fixed sleep is not
/// enough on a loaded machine, and a probe command sent too early would
/// wait behind the script.
fn start_busy(srv: &Server, caller: &mut Raw, args: &[&str]) {
    let before = busy_episodes(srv);
    caller.send(&encode_str(args));
    wait_busy(srv, before);
}

/// A connection the server has fully taken in (one round trip done).
/// Under load, clients connected just before a script started were seen
/// to get their -BUSY replies only after it (README's scripting row).
fn ready(srv: &Server) -> Raw {
    let mut c = srv.raw();
    c.cmd(&["PING"]);
    c
}

/// How many times `srv` has logged that a script turned busy.
fn busy_episodes(srv: &Server) -> usize {
    srv.log().matches("Slow script detected").count()
}

/// Wait until `srv` logs a busy script after the `before`-th time, then
/// a moment for the IO threads to see the state.
fn wait_busy(srv: &Server, before: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while busy_episodes(srv) <= before {
        assert!(Instant::now() < deadline, "the script never turned busy");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(50));
}

fn set_threshold(c: &mut Raw) {
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "lua-time-limit", THRESHOLD]),
        Reply::status("OK")
    );
}

e2e!(
    ringkv_only fn script_kill_stops_an_endless_eval_and_others_get_busy(b) {
        for (mode, opts) in modes() {
            let srv = b.start(opts);
            let (mut a, mut other) = (ready(&srv), ready(&srv));
            set_threshold(&mut a);
            let body = "while true do end";
            // The script's id, for the error text.
            let sha = a.cmd(&["SCRIPT", "LOAD", body]).text();
            start_busy(&srv, &mut a, &["EVAL", body, "0"]);
            assert_eq!(other.cmd(&["PING"]), Reply::err(BUSY_EVAL), "{mode}");
            assert_eq!(other.cmd(&["GET", "x"]), Reply::err(BUSY_EVAL), "{mode}");
            assert_eq!(other.cmd(&["FUNCTION", "KILL"]), Reply::err(BUSY_EVAL), "{mode}");
            assert_eq!(other.cmd(&["SHUTDOWN"]), Reply::err(BUSY_EVAL), "{mode}");
            // QUIT is served: +OK, and the connection closes now.
            let mut leaving = srv.raw();
            assert_eq!(leaving.cmd(&["QUIT"]), Reply::status("OK"), "{mode}");
            leaving.closed_within(Duration::from_secs(5)).unwrap();
            // A client that connects while the script runs is served too:
            // it can be the one that kills it.
            let mut late = srv.raw();
            assert_eq!(late.cmd(&["ECHO", "late"]), Reply::err(BUSY_EVAL), "{mode}");
            assert_eq!(late.cmd(&["SCRIPT", "KILL"]), Reply::status("OK"), "{mode}");
            assert_eq!(
                a.read_reply(),
                Reply::err(&format!(
                    "ERR Script killed by user with SCRIPT KILL. script: {sha}, on @user_script:1."
                )),
                "{mode}"
            );
            assert_eq!(late.cmd(&["ECHO", "late"]), Reply::bulk("late"), "{mode}");
            assert_eq!(other.cmd(&["PING"]), Reply::status("PONG"), "{mode}");
            assert_eq!(a.cmd(&["PING"]), Reply::status("PONG"), "{mode}");
            assert_eq!(other.cmd(&["SCRIPT", "KILL"]), Reply::err(NOTBUSY), "{mode}");
            // The refused calls are counted as Valkey counts them.
            let stats = other.cmd(&["INFO", "commandstats"]).text();
            let get = stats.lines().find(|l| l.starts_with("cmdstat_get:")).unwrap_or("");
            assert!(get.contains("rejected_calls=1"), "{mode}: {stats}");
        }
    }
);

e2e!(
    ringkv_only fn loops_that_catch_errors_or_call_commands_are_killable(b) {
        let srv = b.start(Opts::new().arg("busy-reply-threshold", THRESHOLD));
        for body in [
            "while true do redis.call('PING') end",
            "while true do pcall(function() while true do end end) end",
            "while true do pcall(redis.call, 'GET', 'x') end",
        ] {
            let (mut a, mut other) = (ready(&srv), ready(&srv));
            start_busy(&srv, &mut a, &["EVAL", body, "0"]);
            assert_eq!(other.cmd(&["SCRIPT", "KILL"]), Reply::status("OK"), "{body}");
            let reply = a.read_reply().text();
            assert!(
                reply.starts_with("ERR Script killed by user with SCRIPT KILL. script: "),
                "{body}: {reply}"
            );
            assert_eq!(a.cmd(&["PING"]), Reply::status("PONG"));
        }
    }
);

e2e!(
    ringkv_only fn a_script_that_wrote_is_unkillable_and_shutdown_nosave_stops_the_server(b) {
        for (mode, opts) in modes() {
            let mut srv = b.start(opts);
            let (mut a, mut other) = (ready(&srv), ready(&srv));
            set_threshold(&mut a);
            start_busy(&srv, &mut a,
                &["EVAL", "redis.call('SET', 'k', 'v') while true do end", "0"],
            );
            assert_eq!(other.cmd(&["SCRIPT", "KILL"]), Reply::err(UNKILLABLE), "{mode}");
            assert_eq!(other.cmd(&["FUNCTION", "KILL"]), Reply::err(UNKILLABLE), "{mode}");
            assert_eq!(other.cmd(&["SHUTDOWN", "SAVE"]), Reply::err(BUSY_EVAL), "{mode}");
            // From a new connection, as redis-cli would.
            let mut admin = srv.raw();
            admin.send(&encode_str(&["SHUTDOWN", "NOSAVE"]));
            let status = srv.wait_exit(Duration::from_secs(10));
            assert!(status.is_some(), "{mode}: the server did not stop");
            assert!(
                !srv.dir().join("dump.rdb").exists(),
                "{mode}: SHUTDOWN NOSAVE saved"
            );
        }
    }
);

e2e!(
    ringkv_only fn shutdown_nosave_leaves_none_of_the_scripts_writes_in_the_aof(b) {
        let tmp = TempDir::new("busy-aof");
        let opts = Opts::new()
            .dir(tmp.path())
            .arg("save", "")
            .arg("appendonly", "yes")
            .arg("appendfsync", "always")
            .arg("busy-reply-threshold", THRESHOLD);
        {
            let mut srv = b.start(opts.clone());
            let (mut a, mut admin) = (ready(&srv), ready(&srv));
            assert_eq!(a.cmd(&["SET", "before", "1"]), Reply::status("OK"));
            start_busy(&srv, &mut a,
                &["EVAL", "redis.call('SET', 'k', 'v') redis.call('INCR', 'before') while true do end", "0"],
            );
            admin.send(&encode_str(&["SHUTDOWN", "NOSAVE"]));
            assert!(srv.wait_exit(Duration::from_secs(10)).is_some());
        }
        // As in Valkey, which exits inside the script: all of it or none.
        let srv = b.start(opts);
        let mut c = srv.raw();
        assert_eq!(c.cmd(&["GET", "before"]), Reply::bulk("1"));
        assert_eq!(c.cmd(&["EXISTS", "k"]), Reply::Int(0));
    }
);

e2e!(
    ringkv_only fn function_kill_stops_an_fcall(b) {
        for (mode, opts) in modes() {
            let srv = b.start(opts.arg("busy-reply-threshold", THRESHOLD));
            let (mut a, mut other) = (ready(&srv), ready(&srv));
            let lib = "#!lua name=spinlib\nredis.register_function('spin', function(keys, args)\n  while true do end\nend)";
            assert_eq!(a.cmd(&["FUNCTION", "LOAD", lib]), Reply::bulk("spinlib"));
            start_busy(&srv, &mut a, &["FCALL", "spin", "0"]);
            assert_eq!(other.cmd(&["PING"]), Reply::err(BUSY_FUNCTION), "{mode}");
            assert_eq!(other.cmd(&["SCRIPT", "KILL"]), Reply::err(BUSY_FUNCTION), "{mode}");
            assert_eq!(other.cmd(&["FUNCTION", "KILL"]), Reply::status("OK"), "{mode}");
            assert_eq!(
                a.read_reply(),
                Reply::err(
                    "ERR Script killed by user with FUNCTION KILL. script: spin, on @user_function:3."
                ),
                "{mode}"
            );
            assert_eq!(other.cmd(&["FUNCTION", "KILL"]), Reply::err(NOTBUSY), "{mode}");
        }
    }
);

e2e!(
    ringkv_only fn a_client_pipelining_during_busy_gets_every_reply_in_order(b) {
        for (mode, opts) in modes() {
            let srv = b.start(opts.arg("lua-time-limit", THRESHOLD));
            let (mut a, mut killer, mut p) = (ready(&srv), ready(&srv), ready(&srv));
            start_busy(&srv, &mut a, &["EVAL", "while true do end", "0"]);
            // Answered at once, in order.
            let mut batch = Vec::new();
            for i in 0..200 {
                let text = i.to_string();
                let cmd: &[&str] = match i % 3 {
                    0 => &["PING"],
                    1 => &["INCR", "n"],
                    _ => &["ECHO", &text],
                };
                batch.extend(encode_str(cmd));
            }
            p.send(&batch);
                        for i in 0..200 {
                assert_eq!(p.read_reply(), Reply::err(BUSY_EVAL), "{mode}: reply {i}");
            }
            // WATCH needs the client's session: it and what follows it
            // wait for the script, and still come back in order.
            let mut rest = encode_str(&["PING"]);
            rest.extend(encode_str(&["WATCH", "k"]));
            rest.extend(encode_str(&["ECHO", "after"]));
            rest.extend(encode_str(&["INCR", "n"]));
            p.send(&rest);
            assert_eq!(p.read_reply(), Reply::err(BUSY_EVAL), "{mode}");
            std::thread::sleep(Duration::from_millis(100));
            assert_eq!(killer.cmd(&["SCRIPT", "KILL"]), Reply::status("OK"), "{mode}");
            assert!(a.read_reply().text().starts_with("ERR Script killed"), "{mode}");
            assert_eq!(p.read_reply(), Reply::status("OK"), "{mode}");
            assert_eq!(p.read_reply(), Reply::bulk("after"), "{mode}");
            // None of the refused INCRs ran.
            assert_eq!(p.read_reply(), Reply::Int(1), "{mode}");
            // A transaction with a refused command is doomed, as in Valkey.
            assert_eq!(p.cmd(&["MULTI"]), Reply::status("OK"));
            start_busy(&srv, &mut a, &["EVAL", "while true do end", "0"]);
            assert_eq!(p.cmd(&["SET", "k", "v"]), Reply::err(BUSY_EVAL), "{mode}");
            assert_eq!(killer.cmd(&["SCRIPT", "KILL"]), Reply::status("OK"), "{mode}");
            a.read_reply();
            assert_eq!(
                p.cmd(&["EXEC"]),
                Reply::err("EXECABORT Transaction discarded because of previous errors."),
                "{mode}"
            );
        }
    }
);

e2e!(
    ringkv_only fn a_short_script_never_turns_busy(b) {
        let srv = b.start(Opts::new().arg("busy-reply-threshold", "5000"));
        let (mut a, mut other) = (ready(&srv), ready(&srv));
        // ~200 ms of work, under the threshold: the other client waits for
        // it and then gets its answer, not BUSY.
        let body = "local t = os.clock() while os.clock() - t < 0.2 do end return 1";
        a.send(&encode_str(&["EVAL", body, "0"]));
        std::thread::sleep(Duration::from_millis(50));
        let started = Instant::now();
        assert_eq!(other.cmd(&["PING"]), Reply::status("PONG"));
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(a.read_reply(), Reply::Int(1));
    }
);

/// The same conversation with Valkey 8.1 and with ringkv: every reply the
/// other client and the script's caller get.
fn conversation(srv: &Server) -> Vec<Reply> {
    let (mut a, mut other) = (ready(srv), ready(srv));
    let (mut resp3, mut tx) = (ready(srv), ready(srv));
    let (mut sub2, mut sub3) = (ready(srv), ready(srv));
    let (mut opened, mut discarded) = (ready(srv), ready(srv));
    // (The HELLO reply names the server: not compared.)
    resp3.cmd(&["HELLO", "3"]);
    sub3.cmd(&["HELLO", "3"]);
    let mut seen = vec![
        a.cmd(&["CONFIG", "SET", "lua-time-limit", THRESHOLD]),
        a.cmd(&["CONFIG", "GET", "busy-reply-threshold"]),
        a.cmd(&["CONFIG", "GET", "lua-time-limit"]),
        other.cmd(&["SCRIPT", "KILL"]),
        other.cmd(&["FUNCTION", "KILL"]),
        tx.cmd(&["MULTI"]),
        sub2.cmd(&["SUBSCRIBE", "ch"]),
        sub3.cmd(&["SUBSCRIBE", "ch"]),
    ];
    let body = "local n = 0\nwhile true do\n  n = n + 1\nend";
    start_busy(srv, &mut a, &["EVAL", body, "0"]);
    // Inside MULTI: a refused command dooms it, a refused EXEC ends it.
    seen.push(tx.cmd(&["SET", "k", "v"]));
    seen.push(tx.cmd(&["EXEC"]));
    // MULTI and DISCARD are served; a transaction opened now is doomed by
    // a refused command like any other.
    for cmd in [&["DISCARD"][..], &["MULTI"], &["MULTI"], &["INCR", "n2"]] {
        seen.push(opened.cmd(cmd));
    }
    for cmd in [&["MULTI"][..], &["DISCARD"], &["PING"]] {
        seen.push(discarded.cmd(cmd));
    }
    // QUIT is served: +OK, then the connection closes (what follows it in
    // the pipeline never runs).
    let mut q = srv.raw();
    let mut quit = encode_str(&["QUIT"]);
    quit.extend(encode_str(&["SET", "after-quit", "1"]));
    q.send(&quit);
    seen.push(q.read_reply());
    seen.push(Reply::Bool(q.closed_within(Duration::from_secs(5)).is_ok()));
    // Subscribed: in RESP2 the pub/sub context is checked first.
    for cmd in [&["GET", "x"][..], &["PING"], &["SUBSCRIBE", "ch2"]] {
        seen.push(sub2.cmd(cmd));
        seen.push(sub3.cmd(cmd));
    }
    for cmd in [
        &["NOSUCHCOMMAND", "a", "b"][..],
        &["GET"],
        &["PING"],
        &["SET", "k", "v"],
        &["FUNCTION", "KILL"],
        &["FUNCTION", "STATS"],
        &["SHUTDOWN", "SAVE"],
        &["SCRIPT", "KILL"],
    ] {
        seen.push(other.cmd(cmd));
    }
    seen.push(a.read_reply());
    seen.push(tx.cmd(&["EXEC"]));
    seen.push(opened.cmd(&["INCR", "n2"]));
    seen.push(opened.cmd(&["EXEC"]));
    seen.push(discarded.cmd(&["EXEC"]));
    seen.push(a.cmd(&["EXISTS", "after-quit"]));
    let lib = "#!lua name=difflib\nredis.register_function('spin', function(keys, args)\n  while true do end\nend)";
    seen.push(a.cmd(&["FUNCTION", "LOAD", lib]));
    start_busy(srv, &mut a, &["FCALL", "spin", "0"]);
    for cmd in [&["GET", "k"][..], &["SCRIPT", "KILL"]] {
        seen.push(other.cmd(cmd));
    }
    seen.push(without_durations(other.cmd(&["FUNCTION", "STATS"])));
    seen.push(without_durations(resp3.cmd(&["FUNCTION", "STATS"])));
    seen.push(other.cmd(&["FUNCTION", "KILL"]));
    seen.push(a.read_reply());
    let errors = other.cmd(&["INFO", "errorstats"]).text();
    seen.push(Reply::Bulk(errors.into_bytes()));
    start_busy(
        srv,
        &mut a,
        &["EVAL", "redis.call('INCR', 'n') while true do end", "0"],
    );
    seen.push(other.cmd(&["SCRIPT", "KILL"]));
    seen.push(other.cmd(&["FUNCTION", "KILL"]));
    seen
}

/// FUNCTION STATS with its `duration_ms` values zeroed (they vary).
fn without_durations(r: Reply) -> Reply {
    fn zero(items: Vec<Reply>) -> Vec<Reply> {
        let mut out: Vec<Reply> = Vec::with_capacity(items.len());
        for item in items {
            let after_duration = out.last() == Some(&Reply::bulk("duration_ms"));
            out.push(match item {
                Reply::Int(_) if after_duration => Reply::Int(0),
                other => without_durations(other),
            });
        }
        out
    }
    match r {
        Reply::Array(items) => Reply::Array(zero(items)),
        Reply::Map(pairs) => Reply::Map(
            pairs
                .into_iter()
                .map(|(k, v)| {
                    let v = match v {
                        Reply::Int(_) if k == Reply::bulk("duration_ms") => Reply::Int(0),
                        v => without_durations(v),
                    };
                    (k, v)
                })
                .collect(),
        ),
        other => other,
    }
}

#[test]
fn busy_replies_match_valkey() {
    let mut theirs = Backend::Valkey.server();
    let mut ours = Backend::IoUring.start(Opts::new().arg("io-threads", "1"));
    let want = conversation(&theirs);
    let got = conversation(&ours);
    assert_eq!(got, want);
    // Both are stuck in a script that wrote: SHUTDOWN NOSAVE ends both.
    for srv in [&mut theirs, &mut ours] {
        let mut c = srv.raw();
        c.send(&encode_str(&["SHUTDOWN", "NOSAVE"]));
        let st = srv.wait_exit(Duration::from_secs(10));
        assert!(
            st.is_some(),
            "{:?} did not stop: {}",
            srv.backend,
            srv.log()
        );
    }
}

e2e!(
    ringkv_only fn many_clients_pipelining_and_leaving_while_busy_all_get_their_replies(b) {
        for (mode, opts) in modes() {
            let srv = b.start(opts.arg("busy-reply-threshold", THRESHOLD));
            let mut a = ready(&srv);
            let mut clients: Vec<Raw> = (0..16).map(|_| ready(&srv)).collect();
            // The caller's own pipeline: its PING runs after the script.
            let mut call = encode_str(&["EVAL", "while true do end", "0"]);
            call.extend(encode_str(&["PING"]));
            let before = busy_episodes(&srv);
            a.send(&call);
            wait_busy(&srv, before);
            let per_client = 100;
            let mut batch = Vec::new();
            for i in 0..per_client {
                batch.extend(encode_str(&["SET", "k", &i.to_string()]));
            }
            for c in &mut clients {
                c.send(&batch);
            }
            // Clients that come and go without reading. Their own key:
            // one accepted only after SCRIPT KILL below runs its SETs, as
            // it should, and that must not count as a refused SET that ran.
            let mut gone_batch = Vec::new();
            for i in 0..per_client {
                gone_batch.extend(encode_str(&["SET", "gone", &i.to_string()]));
            }
            for _ in 0..8 {
                let mut gone = srv.raw();
                gone.send(&gone_batch);
            }
                        for (n, c) in clients.iter_mut().enumerate() {
                for i in 0..per_client {
                    assert_eq!(c.read_reply(), Reply::err(BUSY_EVAL), "{mode}: client {n} reply {i}");
                }
            }
            assert_eq!(clients[0].cmd(&["SCRIPT", "KILL"]), Reply::status("OK"), "{mode}");
            assert!(a.read_reply().text().starts_with("ERR Script killed"), "{mode}");
            assert_eq!(a.read_reply(), Reply::status("PONG"), "{mode}");
            for c in &mut clients {
                assert_eq!(c.cmd(&["PING"]), Reply::status("PONG"), "{mode}");
            }
            // None of the refused SETs ran; the clients that left are gone.
            assert_eq!(a.cmd(&["EXISTS", "k"]), Reply::Int(0), "{mode}");
            ringkv_e2e::within(5, "the departed clients are gone", || {
                let list = a.cmd(&["CLIENT", "LIST"]).text();
                list.lines().count() == 17
            });
        }
    }
);

e2e!(
    ringkv_only fn commands_sent_as_a_script_starts_are_answered_while_it_runs(b) {
        for (mode, opts) in modes() {
            let srv = b.start(
                opts.arg("busy-reply-threshold", THRESHOLD)
                    .arg("enable-debug-command", "yes"),
            );
            let (mut sleeper, mut a, mut other) = (ready(&srv), ready(&srv), ready(&srv));
            let before = busy_episodes(&srv);
            // While the server sleeps, the script and then another client's
            // PING arrive, to be read in one round: inline, the PING waits
            // in the script's batch and gets -BUSY; threaded, it runs
            // before the script (its reply leaves first) when both reach
            // one round of the execution thread, else it gets -BUSY. Either
            // way it is answered before the script ends.
            sleeper.send(&encode_str(&["DEBUG", "SLEEP", "0.5"]));
            std::thread::sleep(Duration::from_millis(100));
            a.send(&encode_str(&["EVAL", "while true do end", "0"]));
            std::thread::sleep(Duration::from_millis(50));
            other.send(&encode_str(&["PING"]));
            assert_eq!(sleeper.read_reply(), Reply::status("OK"), "{mode}");
            let first = other.read_reply();
            if mode == "inline" {
                assert_eq!(first, Reply::err(BUSY_EVAL), "{mode}");
            } else {
                assert!(
                    [Reply::status("PONG"), Reply::err(BUSY_EVAL)].contains(&first),
                    "{mode}: {first:?}"
                );
            }
            // (Threaded, a KILL sent now could run before the script.)
            wait_busy(&srv, before);
            // Sent after the script started and before it turned busy:
            // in threaded mode shipped to the execution thread, which
            // sends it back unrun once busy.
            let before = busy_episodes(&srv);
            assert_eq!(other.cmd(&["SCRIPT", "KILL"]), Reply::status("OK"), "{mode}");
            assert!(a.read_reply().text().starts_with("ERR Script killed"), "{mode}");
            a.send(&encode_str(&["EVAL", "while true do end", "0"]));
            std::thread::sleep(Duration::from_millis(20));
            other.send(&encode_str(&["GET", "k"]));
            assert_eq!(other.read_reply(), Reply::err(BUSY_EVAL), "{mode}");
            wait_busy(&srv, before);
            assert_eq!(other.cmd(&["SCRIPT", "KILL"]), Reply::status("OK"), "{mode}");
            assert!(a.read_reply().text().starts_with("ERR Script killed"), "{mode}");
            assert_eq!(other.cmd(&["PING"]), Reply::status("PONG"), "{mode}");
            assert_eq!(a.cmd(&["PING"]), Reply::status("PONG"), "{mode}");
        }
    }
);

/// Nothing has arrived on `c` (its reply waits for the script).
fn nothing_yet(c: &mut Raw) -> bool {
    std::thread::sleep(Duration::from_millis(200));
    c.stream.set_nonblocking(true).unwrap();
    let mut b = [0u8; 1];
    let idle =
        matches!(c.stream.peek(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
    c.stream.set_nonblocking(false).unwrap();
    idle
}

e2e!(
    ringkv_only fn an_unauthenticated_client_cannot_kill_a_busy_script_until_it_authenticates(b) {
        for (mode, opts) in modes() {
            let srv = b.start(
                opts.arg("requirepass", "pw")
                    .arg("busy-reply-threshold", THRESHOLD),
            );
            let mut a = ready(&srv);
            assert_eq!(a.cmd(&["AUTH", "pw"]), Reply::status("OK"));
            start_busy(&srv, &mut a, &["EVAL", "while true do end", "0"]);
            let noauth = Reply::err("NOAUTH Authentication required.");
            // Connected while the script runs, as `redis-cli -a` would.
            let mut late = srv.raw();
            assert_eq!(late.cmd(&["SCRIPT", "KILL"]), noauth, "{mode}");
            assert_eq!(late.cmd(&["AUTH", "nope"]), Reply::err(WRONGPASS), "{mode}");
            assert!(nothing_yet(&mut a), "{mode}: the script was stopped");
            // AUTH and the kill in one pipeline.
            let mut both = encode_str(&["AUTH", "pw"]);
            both.extend(encode_str(&["SCRIPT", "KILL"]));
            late.send(&both);
            assert_eq!(late.read_reply(), Reply::status("OK"), "{mode}");
            assert_eq!(late.read_reply(), Reply::status("OK"), "{mode}");
            assert!(a.read_reply().text().starts_with("ERR Script killed"), "{mode}");
            // The engine knows it authenticated.
            assert_eq!(late.cmd(&["GET", "x"]), Reply::Nil, "{mode}");
        }
    }
);

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// AUTH while busy, with Valkey 8.1 beside ringkv: every reply.
fn auth_conversation(srv: &Server) -> Vec<Reply> {
    let (mut a, mut stranger) = (ready(srv), ready(srv));
    let mut seen = vec![
        a.cmd(&["AUTH", "pw"]),
        a.cmd(&["CONFIG", "SET", "lua-time-limit", THRESHOLD]),
    ];
    start_busy(srv, &mut a, &["EVAL", "while true do end", "0"]);
    let mut late = srv.raw();
    for c in [&mut stranger, &mut late] {
        for cmd in [
            &["GET", "x"][..],
            &["SCRIPT", "KILL"],
            &["NOSUCH"],
            &["AUTH", "nope"],
            &["AUTH", "someone", "pw"],
            &["AUTH", "a", "b", "c"],
            &["AUTH", "default", "pw"],
            &["PING"],
        ] {
            seen.push(c.cmd(cmd));
        }
    }
    seen.push(late.cmd(&["SCRIPT", "KILL"]));
    seen.push(a.read_reply());
    for c in [&mut stranger, &mut late] {
        seen.push(c.cmd(&["GET", "x"]));
    }
    let errors = a.cmd(&["INFO", "errorstats"]).text();
    seen.push(Reply::Bulk(errors.into_bytes()));
    seen
}

#[test]
fn auth_while_busy_matches_valkey() {
    let opts = || Opts::new().arg("requirepass", "pw");
    let theirs = Backend::Valkey.start(opts());
    let ours = Backend::IoUring.start(opts().arg("io-threads", "1"));
    assert_eq!(auth_conversation(&ours), auth_conversation(&theirs));
}
