//! Feed arbitrary bytes to the request parser as a pipeline and check the
//! invariants the IO layer relies on: no panic, spans inside the consumed
//! bytes, progress on every command, the read-only and in-place parsers
//! agreeing, the resumable parser agreeing when fed the input in pieces,
//! and a prefix never completing a command differently.
#![no_main]

use libfuzzer_sys::fuzz_target;
use resp::{
    Limits, Parsed, ProtocolError, Resume, Span, parse_command, parse_command_mut,
    parse_command_resume,
};

type Cmds = Vec<Vec<Vec<u8>>>;

/// Parse commands from the front of `buf` until incomplete or an error;
/// returns the argvs and where it stopped.
fn drain(buf: &[u8], limits: &Limits) -> (Cmds, usize, Option<ProtocolError>) {
    let mut copy = buf.to_vec();
    let mut at = 0;
    let mut cmds = Vec::new();
    let mut args: Vec<Span> = vec![Span { start: 7, len: 7 }];
    loop {
        args.truncate(1);
        let before = buf[at..].to_vec();
        let mut shared_args = Vec::new();
        let shared = parse_command(&before, limits, &mut shared_args);
        match parse_command_mut(&mut copy[at..], limits, &mut args) {
            Ok(Parsed::Command { consumed, argc }) => {
                assert!(consumed > 0 && consumed <= buf.len() - at);
                assert_eq!(args.len(), argc + 1, "spans appended, old ones kept");
                assert_eq!(args[0], Span { start: 7, len: 7 });
                for s in &args[1..] {
                    assert!(s.end() <= consumed, "span {s:?} past {consumed}");
                }
                // Only the consumed bytes may have been rewritten.
                assert_eq!(&copy[at + consumed..], &before[consumed..]);
                match shared {
                    Ok(r) => {
                        assert_eq!(r, Parsed::Command { consumed, argc });
                        assert_eq!(&shared_args[..], &args[1..]);
                    }
                    Err(e) => assert_eq!(e.0, ProtocolError::NEEDS_REWRITE),
                }
                let rest = &copy[at..];
                cmds.push(args[1..].iter().map(|s| s.slice(rest).to_vec()).collect());
                at += consumed;
            }
            Ok(Parsed::Incomplete { need }) => {
                assert_eq!(args.len(), 1);
                assert_eq!(shared, Ok(Parsed::Incomplete { need }));
                assert_eq!(&copy[at..], &before[..], "incomplete input is untouched");
                if let Some(n) = need {
                    assert!(n > buf.len() - at);
                }
                return (cmds, at, None);
            }
            Err(e) => {
                assert_eq!(args.len(), 1);
                assert!(!e.0.is_empty() && !e.0.contains('\r') && !e.0.contains('\n'));
                assert_eq!(shared.unwrap_err(), e);
                return (cmds, at, Some(e));
            }
        }
    }
}

/// The same through `parse_command_resume`, growing the visible buffer by
/// `step` bytes at a time as a socket would deliver it.
fn drain_resume(buf: &[u8], limits: &Limits, step: usize) -> (Cmds, Option<ProtocolError>) {
    let mut copy = buf.to_vec();
    let mut resume = Resume::default();
    let mut at = 0;
    let mut visible = 0;
    let mut cmds = Vec::new();
    let mut args = Vec::new();
    loop {
        args.clear();
        let r = parse_command_resume(&mut copy[at..visible], limits, &mut args, &mut resume);
        match r {
            Ok(Parsed::Command { consumed, argc }) => {
                assert_eq!(argc, args.len());
                assert!(!resume.is_active());
                let rest = &copy[at..];
                cmds.push(args.iter().map(|s| s.slice(rest).to_vec()).collect());
                at += consumed;
            }
            Ok(Parsed::Incomplete { .. }) => {
                assert!(args.is_empty());
                if visible == buf.len() {
                    return (cmds, None);
                }
                visible = (visible + step).min(buf.len());
            }
            Err(e) => return (cmds, Some(e)),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    // The first byte picks limits small enough for the fuzzer to hit.
    let Some((&sel, buf)) = data.split_first() else {
        return;
    };
    let limits = Limits {
        max_bulk_len: if sel & 1 != 0 { 64 } else { 512 * 1024 * 1024 },
        max_multibulk_len: if sel & 2 != 0 { 8 } else { i32::MAX as usize },
        max_inline_len: if sel & 4 != 0 { 32 } else { 64 * 1024 },
        unauthenticated: sel & 8 != 0,
    };
    let (cmds, stopped, err) = drain(buf, &limits);
    // A command that completes inside a prefix completes identically in the
    // whole input (its terminators are the same bytes). The reverse does not
    // hold: a prefix may hit a "too big" limit where more bytes would have
    // brought the terminator, as in Valkey, so only this direction is checked.
    let cut = usize::from(sel >> 4) * buf.len() / 16;
    let (pre, pre_at, _) = drain(&buf[..cut], &limits);
    assert!(pre.len() <= cmds.len());
    assert_eq!(&pre[..], &cmds[..pre.len()]);
    assert!(pre_at <= stopped);
    // Fed in pieces, the resumable parser finds the same commands. Without
    // "too big" limits in play (whole-buffer errors), it also stops the same way.
    let step = usize::from(sel >> 4) + 1;
    let (res_cmds, res_err) = drain_resume(buf, &limits, step);
    let n = res_cmds.len().min(cmds.len());
    assert_eq!(&res_cmds[..n], &cmds[..n]);
    if err.is_none() && res_err.is_none() {
        assert_eq!(res_cmds, cmds);
    }
    if let (Some(a), Some(b)) = (&err, &res_err)
        && !a.0.starts_with("too big")
        && !b.0.starts_with("too big")
    {
        assert_eq!(res_cmds, cmds);
        assert_eq!(a, b);
    }
});
