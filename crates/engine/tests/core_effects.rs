//! The write-effects stream: what each command emits for the AOF and
//! replicas, checked against what Valkey 8.1 writes to its AOF for the
//! same commands.

mod core_util;
use core_util::*;
use ringkv_engine::Engine;

/// Every command published so far, as its arguments.
fn effects(e: &mut Engine, r: &mut effects::Reader) -> Vec<Vec<String>> {
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
        match resp::parse_command(&bytes[at..], &resp::Limits::default(), &mut args).unwrap() {
            resp::Parsed::Command { consumed, .. } => {
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

fn v(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

#[test]
fn writes_are_emitted_as_sent_after_a_select_and_reads_emit_nothing() {
    let mut e = engine();
    let c = connect(&mut e);
    let mut r = e.attach_effects();
    cmd(&mut e, c, &["set", "a", "1"]);
    cmd(&mut e, c, &["get", "a"]);
    cmd(&mut e, c, &["del", "nokey"]);
    cmd(&mut e, c, &["select", "3"]);
    cmd(&mut e, c, &["sadd", "s", "x"]);
    cmd(&mut e, c, &["sadd", "s", "x"]);
    assert_eq!(
        effects(&mut e, &mut r),
        vec![
            v(&["SELECT", "0"]),
            v(&["set", "a", "1"]),
            v(&["SELECT", "3"]),
            v(&["sadd", "s", "x"]),
        ]
    );
}

#[test]
fn a_transaction_with_several_writes_is_wrapped_and_one_write_is_not() {
    let mut e = engine();
    let c = connect(&mut e);
    let mut r = e.attach_effects();
    for w in [
        &["multi"][..],
        &["set", "m", "1"],
        &["incr", "m"],
        &["get", "m"],
        &["exec"],
    ] {
        cmd(&mut e, c, w);
    }
    for w in [&["multi"][..], &["set", "m1", "1"], &["exec"]] {
        cmd(&mut e, c, w);
    }
    assert_eq!(
        effects(&mut e, &mut r),
        vec![
            v(&["MULTI"]),
            v(&["SELECT", "0"]),
            v(&["set", "m", "1"]),
            v(&["incr", "m"]),
            v(&["EXEC"]),
            v(&["set", "m1", "1"]),
        ]
    );
}

#[test]
fn flushall_of_an_empty_server_is_still_emitted() {
    let mut e = engine();
    let c = connect(&mut e);
    let mut r = e.attach_effects();
    cmd(&mut e, c, &["flushall"]);
    cmd(&mut e, c, &["flushdb"]);
    assert_eq!(
        effects(&mut e, &mut r),
        vec![v(&["SELECT", "0"]), v(&["flushall"]), v(&["flushdb"])]
    );
}

#[test]
fn a_key_found_expired_is_unlinked_before_the_command_that_found_it() {
    let mut e = engine();
    e.pin_clock(Some(1_000_000));
    let c = connect(&mut e);
    cmd(&mut e, c, &["set", "k", "v", "px", "10"]);
    let mut r = e.attach_effects();
    e.pin_clock(Some(1_000_100));
    cmd(&mut e, c, &["get", "k"]);
    cmd(&mut e, c, &["set", "k2", "v", "px", "10"]);
    e.pin_clock(Some(1_000_200));
    cmd(&mut e, c, &["append", "k2", "x"]);
    cmd(&mut e, c, &["set", "k3", "v", "px", "10"]);
    e.pin_clock(Some(1_000_300));
    for w in [
        &["multi"][..],
        &["set", "k4", "1"],
        &["append", "k3", "y"],
        &["exec"],
    ] {
        cmd(&mut e, c, w);
    }
    let got = effects(&mut e, &mut r);
    let n = got.len();
    assert_eq!(got[..2], [v(&["SELECT", "0"]), v(&["UNLINK", "k"])]);
    assert_eq!(
        got[n - 8..n - 6],
        [v(&["UNLINK", "k2"]), v(&["append", "k2", "x"])]
    );
    // Inside a transaction too, as Valkey 8.1 writes it: the deletion
    // goes out on its own, ahead of the MULTI.
    assert_eq!(
        got[n - 5..],
        [
            v(&["UNLINK", "k3"]),
            v(&["MULTI"]),
            v(&["set", "k4", "1"]),
            v(&["append", "k3", "y"]),
            v(&["EXEC"])
        ]
    );
}
