//! Run arbitrary bytes as a Lua script through EVAL on a real engine: the
//! reply must be one well-formed RESP value (a result or an error), never
//! a crash, and the engine must answer the next command. Scripts get an
//! instruction budget, so endless loops end in an error.
#![no_main]

use engine::{ClientId, CommandHint, CommandsView, Config, Engine, Job};
use libfuzzer_sys::fuzz_target;
use resp::{Limits, Parsed, Span};

fn run(e: &mut Engine, c: ClientId, args: &[&[u8]]) -> Vec<u8> {
    let mut input = Vec::new();
    input.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        input.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        input.extend_from_slice(a);
        input.extend_from_slice(b"\r\n");
    }
    let mut spans: Vec<Span> = Vec::new();
    let argc = match resp::parse_command(&input, &Limits::default(), &mut spans) {
        Ok(Parsed::Command { argc, .. }) => argc as u32,
        other => panic!("our own request did not parse: {other:?}"),
    };
    let hint = CommandHint::of(engine::ArgvRef {
        data: &input,
        spans: &spans,
    });
    let mut out = resp::ReplyBuf::new();
    let view = CommandsView {
        data: &input,
        args: &spans,
        argc: &[argc],
        hints: &[hint],
    };
    let mut jobs = [Job::new(c, view, &mut out)];
    e.execute_batch(&mut jobs);
    out.to_vec()
}

fuzz_target!(|data: &[u8]| {
    let mut e = Engine::new(Config::default(), None);
    let mut scripts = script::Scripts::new();
    scripts.set_instruction_budget(Some(1_000_000));
    e.server_mut().scripts = Some(Box::new(scripts));
    let c = e
        .connect(engine::ClientInfo::tcp(
            "127.0.0.1:40000".parse().unwrap(),
            "127.0.0.1:6379".parse().unwrap(),
            7,
        ))
        .unwrap();
    let out = run(&mut e, c, &[b"EVAL", data, b"1", b"key", b"arg"]);
    match resp::parse_value(&out) {
        Ok(Some((_, n))) => assert_eq!(n, out.len(), "one reply: {out:?}"),
        other => panic!("not a reply: {other:?} {out:?}"),
    }
    assert_eq!(run(&mut e, c, &[b"PING"]), b"+PONG\r\n");
});
