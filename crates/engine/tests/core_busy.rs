//! A script past `busy-reply-threshold`: the pump the IO layer installs
//! is called from the script's hook, other clients are answered from the
//! busy state (-BUSY, SCRIPT KILL, FUNCTION KILL, SHUTDOWN NOSAVE), and
//! what they were refused settles once the script ends. Error texts as
//! Valkey 8.1's (checked against it by tests/tests/busy.rs).

mod core_util;
use core_util::*;
use resp::{Limits, Parsed, Span};
use ringkv_engine::batch::{ArgvRef, CommandHint, CommandsView, Job};
use ringkv_engine::busy::{BusyAnswer, BusyClient, BusyPump, BusyState};
use ringkv_engine::{ClientId, Engine};
use std::collections::VecDeque;
use std::sync::Arc;

const BUSY_EVAL: &str =
    "-BUSY Valkey is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";
const BUSY_FUNCTION: &str = "-BUSY Valkey is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n";
const UNKILLABLE: &str = "-UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.\r\n";
const NOTBUSY: &str = "-NOTBUSY No scripts in execution right now.\r\n";

/// Another client's commands, one per pump call, answered from the busy
/// state as the IO layer would.
struct Other {
    busy: Arc<BusyState>,
    client: ClientId,
    steps: VecDeque<Vec<&'static str>>,
    replies: Vec<String>,
    pumps: usize,
    /// As the IO layer would know it from the client's last request.
    in_multi: bool,
    /// A third client, outside any transaction: a step that starts with
    /// `BY_KILLER` is its command.
    killer: ClientId,
}

const BY_KILLER: &str = "@killer";

impl BusyPump for Other {
    fn pump(&mut self) {
        self.pumps += 1;
        assert!(self.pumps < 100_000, "the script was never stopped");
        let Some(mut words) = self.steps.pop_front() else {
            return;
        };
        let by_killer = words.first() == Some(&BY_KILLER);
        if by_killer {
            words.remove(0);
        }
        let data = encode(&[&words]);
        let mut spans: Vec<Span> = Vec::new();
        let Ok(Parsed::Command { .. }) = resp::parse_command(&data, &Limits::default(), &mut spans)
        else {
            panic!("bad request")
        };
        let mut out = resp::ReplyBuf::new();
        let argv = ArgvRef {
            data: &data,
            spans: &spans,
        };
        let who = BusyClient {
            id: if by_killer { self.killer } else { self.client },
            resp3: false,
            in_multi: self.in_multi && !by_killer,
            subscribed: false,
            authenticated: true,
        };
        let r = match self.busy.answer(who, argv, &mut out) {
            BusyAnswer::Deferred => "deferred".to_string(),
            answer => {
                if let BusyAnswer::Multi(entered) = answer {
                    self.in_multi = entered;
                }
                String::from_utf8_lossy(&out.to_vec()).into_owned()
            }
        };
        self.replies.push(r);
    }
}

/// Run `words` for `client` with `other` as the pump; the reply.
fn run_pumped(e: &mut Engine, client: ClientId, words: &[&str], other: &mut Other) -> String {
    let input = encode(&[words]);
    let mut args: Vec<Span> = Vec::new();
    let Ok(Parsed::Command { argc, .. }) =
        resp::parse_command(&input, &Limits::default(), &mut args)
    else {
        panic!("bad request")
    };
    let hints = [CommandHint::of(ArgvRef {
        data: &input,
        spans: &args,
    })];
    let argc = [argc as u32];
    let view = CommandsView {
        data: &input,
        args: &args,
        argc: &argc,
        hints: &hints,
    };
    let mut out = resp::ReplyBuf::new();
    e.execute_batch_pumped(&mut [Job::new(client, view, &mut out)], other);
    String::from_utf8_lossy(&out.to_vec()).into_owned()
}

fn setup(threshold: &str) -> (Engine, ClientId, Other) {
    let mut e = engine();
    let c = connect(&mut e);
    let o = connect(&mut e);
    let killer = connect(&mut e);
    assert_eq!(
        cmd(&mut e, c, &["CONFIG", "SET", "lua-time-limit", threshold]),
        "+OK\r\n"
    );
    let other = Other {
        busy: e.busy_state(),
        client: o,
        steps: VecDeque::new(),
        replies: Vec::new(),
        pumps: 0,
        in_multi: false,
        killer,
    };
    (e, c, other)
}

fn sha(body: &str) -> String {
    String::from_utf8(script::sha1::hex(body.as_bytes()).to_vec()).unwrap()
}

#[test]
fn busy_reply_threshold_is_lua_time_limit() {
    let mut e = engine();
    let c = connect(&mut e);
    let get = |e: &mut Engine, name| cmd(e, c, &["CONFIG", "GET", name]);
    assert_eq!(
        get(&mut e, "busy-reply-threshold"),
        "*2\r\n$20\r\nbusy-reply-threshold\r\n$4\r\n5000\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["CONFIG", "SET", "lua-time-limit", "200"]),
        "+OK\r\n"
    );
    assert_eq!(
        get(&mut e, "busy-reply-threshold"),
        "*2\r\n$20\r\nbusy-reply-threshold\r\n$3\r\n200\r\n"
    );
    assert_eq!(
        get(&mut e, "lua-time-limit"),
        "*2\r\n$14\r\nlua-time-limit\r\n$3\r\n200\r\n"
    );
}

#[test]
fn script_kill_stops_a_busy_eval_and_others_get_busy() {
    let (mut e, c, mut other) = setup("0");
    let body = "while true do end";
    other.steps = VecDeque::from(vec![
        vec!["GET", "x"],
        vec!["FUNCTION", "KILL"],
        vec!["FUNCTION", "STATS"],
        vec!["SHUTDOWN"],
        vec!["HELLO", "3"],
        vec!["NOSUCHCOMMAND", "a"],
        vec!["GET"],
        vec!["SCRIPT", "KILL"],
    ]);
    let reply = run_pumped(&mut e, c, &["EVAL", body, "0"], &mut other);
    assert_eq!(
        reply,
        format!(
            "-ERR Script killed by user with SCRIPT KILL. script: {}, on @user_script:1.\r\n",
            sha(body)
        )
    );
    assert_eq!(
        other.replies,
        [
            BUSY_EVAL,
            BUSY_EVAL,
            BUSY_EVAL,
            BUSY_EVAL,
            "deferred",
            // Refused before the BUSY check, as in Valkey.
            "-ERR unknown command 'NOSUCHCOMMAND', with args beginning with: 'a' \r\n",
            "-ERR wrong number of arguments for 'get' command\r\n",
            "+OK\r\n"
        ]
    );
    // Over: the server is not busy, the kills say so.
    let o = other.client;
    assert_eq!(cmd(&mut e, o, &["SCRIPT", "KILL"]), NOTBUSY);
    assert_eq!(cmd(&mut e, o, &["FUNCTION", "KILL"]), NOTBUSY);
    assert_eq!(cmd(&mut e, o, &["GET", "x"]), "$-1\r\n");
    // The refused commands count as Valkey counts them.
    let stats = cmd(&mut e, o, &["INFO", "commandstats"]);
    assert!(
        stats.contains("cmdstat_get:calls=1,usec=")
            && stats.contains("rejected_calls=2,failed_calls=0"),
        "{stats}"
    );
    let errors = cmd(&mut e, o, &["INFO", "errorstats"]);
    assert!(errors.contains("errorstat_BUSY:count=4"), "{errors}");
}

#[test]
fn a_script_that_wrote_is_unkillable_but_shutdown_nosave_stops_it() {
    let (mut e, c, mut other) = setup("0");
    other.steps = VecDeque::from(vec![
        vec!["SCRIPT", "KILL"],
        vec!["FUNCTION", "KILL"],
        vec!["SHUTDOWN", "NOSAVE"],
    ]);
    let reply = run_pumped(
        &mut e,
        c,
        &["EVAL", "redis.call('SET', 'k', 'v') while true do end", "0"],
        &mut other,
    );
    assert!(
        reply.starts_with("-ERR Script killed by SHUTDOWN NOSAVE."),
        "{reply}"
    );
    assert_eq!(other.replies, [UNKILLABLE, UNKILLABLE, "deferred"]);
}

#[test]
fn function_kill_stops_a_busy_function_and_script_kill_does_not() {
    let (mut e, c, mut other) = setup("0");
    let lib = "#!lua name=lib\nredis.register_function('spin', function(keys, args)\n  while true do end\nend)";
    assert_eq!(cmd(&mut e, c, &["FUNCTION", "LOAD", lib]), "$3\r\nlib\r\n");
    other.steps = VecDeque::from(vec![
        vec!["PING"],
        vec!["SCRIPT", "KILL"],
        vec!["FUNCTION", "STATS"],
        vec!["FUNCTION", "KILL"],
    ]);
    let reply = run_pumped(&mut e, c, &["FCALL", "spin", "0"], &mut other);
    assert_eq!(
        reply,
        "-ERR Script killed by user with FUNCTION KILL. script: spin, on @user_function:3.\r\n"
    );
    assert_eq!(other.replies[..2], [BUSY_FUNCTION, BUSY_FUNCTION]);
    assert_eq!(other.replies[3], "+OK\r\n");
    // FUNCTION STATS shows the function that runs (its duration varies).
    let stats = &other.replies[2];
    let (head, tail) = stats.split_once("$11\r\nduration_ms\r\n:").expect(stats);
    assert_eq!(
        head,
        "*4\r\n$14\r\nrunning_script\r\n*6\r\n$4\r\nname\r\n$4\r\nspin\r\n$7\r\ncommand\r\n*3\r\n$5\r\nFCALL\r\n$4\r\nspin\r\n$1\r\n0\r\n"
    );
    let (_, tail) = tail.split_once("\r\n").unwrap();
    assert_eq!(
        tail,
        "$7\r\nengines\r\n*2\r\n$3\r\nLUA\r\n*4\r\n$15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:1\r\n"
    );
}

#[test]
fn a_command_refused_inside_multi_dooms_the_transaction() {
    let (mut e, c, mut other) = setup("0");
    let o = other.client;
    assert_eq!(cmd(&mut e, o, &["MULTI"]), "+OK\r\n");
    other.in_multi = true;
    other.steps = VecDeque::from(vec![
        vec!["SET", "k", "v"],
        // Queued in Valkey, not run: it waits for the script here.
        vec!["SCRIPT", "KILL"],
        vec![BY_KILLER, "SCRIPT", "KILL"],
    ]);
    run_pumped(&mut e, c, &["EVAL", "while true do end", "0"], &mut other);
    assert_eq!(other.replies, [BUSY_EVAL, "deferred", "+OK\r\n"]);
    assert_eq!(cmd(&mut e, o, &["SCRIPT", "KILL"]), "+QUEUED\r\n");
    assert_eq!(
        cmd(&mut e, o, &["EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    // EXEC itself refused: Valkey's EXECABORT with the BUSY text, and the
    // transaction is over.
    assert_eq!(cmd(&mut e, o, &["MULTI"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, o, &["SET", "k", "v"]), "+QUEUED\r\n");
    other.replies.clear();
    other.steps = VecDeque::from(vec![vec!["EXEC"], vec!["SCRIPT", "KILL"]]);
    run_pumped(&mut e, c, &["EVAL", "while true do end", "0"], &mut other);
    assert_eq!(
        other.replies,
        [
            "-EXECABORT Transaction discarded because of: BUSY Valkey is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n",
            "+OK\r\n"
        ]
    );
    assert!(!other.in_multi);
    assert_eq!(cmd(&mut e, o, &["EXEC"]), "-ERR EXEC without MULTI\r\n");
    assert_eq!(cmd(&mut e, o, &["GET", "k"]), "$-1\r\n");
}

#[test]
fn multi_and_discard_while_busy_open_and_close_the_transaction() {
    let (mut e, c, mut other) = setup("0");
    let o = other.client;
    assert_eq!(cmd(&mut e, c, &["SET", "xx", "1"]), "+OK\r\n");
    other.steps = VecDeque::from(vec![
        vec!["DISCARD"],
        vec!["MULTI"],
        vec!["MULTI"],
        vec!["INCR", "xx"],
        // Inside MULTI: queued once the script ends.
        vec!["SCRIPT", "KILL"],
        vec![BY_KILLER, "SCRIPT", "KILL"],
    ]);
    run_pumped(&mut e, c, &["EVAL", "while true do end", "0"], &mut other);
    assert_eq!(
        other.replies,
        [
            "-ERR DISCARD without MULTI\r\n",
            "+OK\r\n",
            "-ERR Command not allowed inside a transaction\r\n",
            BUSY_EVAL,
            "deferred",
            "+OK\r\n"
        ]
    );
    assert!(other.in_multi);
    // The transaction opened while busy is the session's, doomed by the
    // refused INCR.
    assert_eq!(cmd(&mut e, o, &["INCR", "xx"]), "+QUEUED\r\n");
    assert_eq!(
        cmd(&mut e, o, &["EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    assert_eq!(cmd(&mut e, o, &["GET", "xx"]), "$1\r\n1\r\n");
    // DISCARD while busy ends one.
    assert_eq!(cmd(&mut e, o, &["MULTI"]), "+OK\r\n");
    other.in_multi = true;
    other.steps = VecDeque::from(vec![vec!["DISCARD"], vec!["SCRIPT", "KILL"]]);
    other.replies.clear();
    run_pumped(&mut e, c, &["EVAL", "while true do end", "0"], &mut other);
    assert_eq!(other.replies, ["+OK\r\n", "+OK\r\n"]);
    assert!(!other.in_multi);
    assert_eq!(cmd(&mut e, o, &["EXEC"]), "-ERR EXEC without MULTI\r\n");
}

#[test]
fn a_short_script_is_never_busy() {
    let (mut e, c, mut other) = setup("5000");
    other.steps = VecDeque::from(vec![vec!["SCRIPT", "KILL"]]);
    let reply = run_pumped(
        &mut e,
        c,
        &[
            "EVAL",
            "local n = 0 for i = 1, 100000 do n = n + 1 end return n",
            "0",
        ],
        &mut other,
    );
    assert_eq!(reply, ":100000\r\n");
    assert_eq!(other.pumps, 0);
    assert!(!other.busy.is_busy());
}
