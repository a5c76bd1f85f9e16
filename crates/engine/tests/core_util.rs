//! Shared by the core_* tests: drive an [`Engine`] with real RESP bytes.
#![allow(dead_code)]

use engine::{
    ArgvRef, ClientId, ClientInfo, CommandHint, CommandsView, Config, Engine, Event, Job,
};
use resp::{Limits, Parsed, Span};
use ringkv_engine as engine;

pub fn info(peer: &str) -> ClientInfo {
    ClientInfo::tcp(peer.parse().unwrap(), "127.0.0.1:6379".parse().unwrap(), 7)
}

pub fn engine() -> Engine {
    Engine::new(Config::default(), None)
}

pub fn engine_with(cfg: Config) -> Engine {
    Engine::new(cfg, None)
}

pub fn connect(e: &mut Engine) -> ClientId {
    e.connect(info("127.0.0.1:40000")).expect("connect")
}

/// Parse `input` (one or more RESP requests) into a view and run it as
/// one job; returns the reply bytes and whether the engine asked to close.
pub fn run_raw(e: &mut Engine, client: ClientId, input: &[u8]) -> (Vec<u8>, bool) {
    let (out, close) = run_buf(e, client, input);
    (out.to_vec(), close)
}

/// [`run_raw`], with the reply buffer as the engine left it (large values
/// by reference).
#[allow(dead_code)]
pub fn run_buf(e: &mut Engine, client: ClientId, input: &[u8]) -> (resp::ReplyBuf, bool) {
    let (out, outcome) = run_job(e, client, input);
    (out, outcome.close_after_reply)
}

/// [`run_buf`], with all the job's outcome.
pub fn run_job(
    e: &mut Engine,
    client: ClientId,
    input: &[u8],
) -> (resp::ReplyBuf, ringkv_engine::Outcome) {
    run_jobs(e, &[(client, input)]).pop().expect("one job")
}

/// The parsed commands of `input`, as the IO layer hands them over.
struct Request {
    args: Vec<Span>,
    argc: Vec<u32>,
    hints: Vec<CommandHint>,
}

fn parse(input: &[u8]) -> Request {
    let (mut args, mut argc, mut hints) = (Vec::new(), Vec::new(), Vec::new());
    let mut at = 0;
    let limits = Limits::default();
    while at < input.len() {
        let before = args.len();
        match resp::parse_command(&input[at..], &limits, &mut args).expect("valid request") {
            Parsed::Command { consumed, argc: n } => {
                for s in &mut args[before..] {
                    s.start += at;
                }
                if n > 0 {
                    argc.push(n as u32);
                    // As the IO layer does: each command's hint worked out
                    // as it is parsed.
                    hints.push(CommandHint::of(ArgvRef {
                        data: input,
                        spans: &args[before..],
                    }));
                }
                at += consumed;
            }
            Parsed::Incomplete { .. } => panic!("incomplete request"),
        }
    }
    Request { args, argc, hints }
}

/// Several clients' requests in one batch (as when the IO threads hand
/// over the input of several connections at once).
pub fn run_jobs(
    e: &mut Engine,
    inputs: &[(ClientId, &[u8])],
) -> Vec<(resp::ReplyBuf, ringkv_engine::Outcome)> {
    let parsed: Vec<Request> = inputs.iter().map(|(_, input)| parse(input)).collect();
    let mut outs: Vec<resp::ReplyBuf> = inputs.iter().map(|_| resp::ReplyBuf::new()).collect();
    let mut jobs: Vec<Job<'_>> = inputs
        .iter()
        .zip(&parsed)
        .zip(outs.iter_mut())
        .map(|((&(client, input), p), out)| {
            let view = CommandsView {
                data: input,
                args: &p.args,
                argc: &p.argc,
                hints: &p.hints,
            };
            Job::new(client, view, out)
        })
        .collect();
    e.execute_batch(&mut jobs);
    let outcomes: Vec<ringkv_engine::Outcome> = jobs.iter().map(|j| j.outcome()).collect();
    drop(jobs);
    outs.into_iter().zip(outcomes).collect()
}

pub fn encode(cmds: &[&[&str]]) -> Vec<u8> {
    let mut buf = Vec::new();
    for c in cmds {
        resp::encode_command(c, &mut buf);
    }
    buf
}

/// Run one command given as words; the reply as a (lossy) string.
pub fn cmd(e: &mut Engine, client: ClientId, words: &[&str]) -> String {
    let (out, _) = run_raw(e, client, &encode(&[words]));
    String::from_utf8_lossy(&out).into_owned()
}

pub fn events(e: &mut Engine) -> Vec<Event> {
    let mut v = Vec::new();
    e.drain_events(&mut v);
    v
}

/// The bulk payload of a `$n\r\n...\r\n` (or RESP3 verbatim) reply.
pub fn bulk_text(reply: &str) -> String {
    let (_, rest) = reply.split_once("\r\n").expect("header");
    let body = rest.strip_suffix("\r\n").expect("trailer");
    body.strip_prefix("txt:").unwrap_or(body).to_string()
}

/// The value of `name` in an INFO reply's text (panics if it is missing).
pub fn info_value(text: &str, name: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("{name} not in INFO:\n{text}"))
        .to_string()
}

/// A RESP2 bulk string reply.
pub fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

/// A RESP2 array of bulk strings.
pub fn arr(items: &[&str]) -> String {
    let mut s = format!("*{}\r\n", items.len());
    for i in items {
        s.push_str(&bulk(i));
    }
    s
}

/// Valkey's WRONGTYPE error line.
pub const WRONGTYPE_ERR: &str =
    "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

/// Every command the effects stream has published to `r` so far, each
/// as its arguments.
pub fn effects(e: &mut Engine, r: &mut effects::Reader) -> Vec<Vec<String>> {
    e.commit_effects();
    let mut bytes = Vec::new();
    while let Some(s) = r.next_slice() {
        bytes.extend_from_slice(&s);
    }
    let mut out = Vec::new();
    let mut at = 0;
    let mut args = Vec::new();
    while at < bytes.len() {
        args.clear();
        match resp::parse_command(&bytes[at..], &Limits::default(), &mut args).unwrap() {
            Parsed::Command { consumed, .. } => {
                let base = &bytes[at..at + consumed];
                out.push(
                    args.iter()
                        .map(|s| String::from_utf8_lossy(s.slice(base)).into_owned())
                        .collect(),
                );
                at += consumed;
            }
            other => panic!("partial command in the stream: {other:?}"),
        }
    }
    out
}

pub fn v(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

/// The output delivered out of band (pub/sub, MONITOR, invalidations)
/// to `client` since the last drain; other clients' output is dropped.
pub fn output_for(e: &mut Engine, client: ClientId) -> String {
    let mut s = String::new();
    e.drain_output(|c, b| {
        if c == client {
            s.push_str(&String::from_utf8_lossy(b));
        }
    });
    s
}
