//! COMMANDLOG (Valkey 8.1) and SLOWLOG, its `slow` part: the last
//! commands that ran longer than `commandlog-execution-slower-than` µs
//! (alias `slowlog-log-slower-than`), or whose request or reply was
//! larger than `commandlog-request-larger-than` / `-reply-larger-than`
//! bytes — each entry Valkey's: id, unix time, the value (µs or bytes),
//! the arguments (at most 32, each cut at 128 bytes, secrets redacted),
//! the client's address and name.
//!
//! Durations come from the engine's command timer. Runs of the same
//! command share one clock read there, so a command is timed on its own
//! (two clock reads) only when the log could want it: every command when
//! the threshold is under [`EXACT_BELOW_US`], otherwise only commands not
//! flagged `fast` — a `fast` command (O(1) or O(log N)) is not expected to
//! take milliseconds, and timing each of them would cost a pipeline of
//! GETs two clock reads per GET. Sizes cost a bound check per command.

use crate::batch::ArgvRef;
use crate::session::Session;
use std::collections::VecDeque;

/// Below this threshold (µs) every command is timed on its own.
pub const EXACT_BELOW_US: i64 = 1000;
const MAX_ARGS: usize = 32;
const MAX_ARG_BYTES: usize = 128;

/// The three logs, by COMMANDLOG's type names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Slow,
    LargeRequest,
    LargeReply,
}

impl Kind {
    pub fn parse(name: &[u8]) -> Option<Kind> {
        match name.to_ascii_lowercase().as_slice() {
            b"slow" => Some(Kind::Slow),
            b"large-request" => Some(Kind::LargeRequest),
            b"large-reply" => Some(Kind::LargeReply),
            _ => None,
        }
    }
    /// (threshold, max entries) from the configuration.
    pub fn limits(self, c: &crate::config::Config) -> (i64, usize) {
        match self {
            Kind::Slow => (c.slowlog_log_slower_than, c.slowlog_max_len),
            Kind::LargeRequest => (
                c.commandlog_request_larger_than,
                c.commandlog_large_request_max_len,
            ),
            Kind::LargeReply => (
                c.commandlog_reply_larger_than,
                c.commandlog_large_reply_max_len,
            ),
        }
    }
}

pub struct Entry {
    pub id: u64,
    pub time_s: i64,
    /// µs for `slow`, bytes for the others.
    pub value: u64,
    pub args: Vec<Vec<u8>>,
    pub peer: String,
    pub name: Vec<u8>,
}

/// One of the logs.
#[derive(Default)]
pub struct Log {
    /// Newest first, as GET lists them.
    pub entries: VecDeque<Entry>,
    /// Ids keep counting across RESET, as Valkey's do.
    next_id: u64,
}

#[derive(Default)]
pub struct CommandLog {
    logs: [Log; 3],
}

impl CommandLog {
    pub fn log(&self, kind: Kind) -> &Log {
        &self.logs[kind as usize]
    }
    pub fn reset(&mut self, kind: Kind) {
        self.logs[kind as usize].entries.clear();
    }

    /// Should a command with these flags be timed on its own?
    #[inline]
    pub fn wants_exact(threshold_us: i64, cmd_flags: u32) -> bool {
        threshold_us >= 0
            && (threshold_us < EXACT_BELOW_US || cmd_flags & crate::command::flags::FAST == 0)
    }

    /// Log the command if `value` reaches the threshold (Valkey logs
    /// `value >= threshold`; a negative threshold turns the log off).
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &mut self,
        kind: Kind,
        (threshold, max_len): (i64, usize),
        fullname: &str,
        argv: ArgvRef<'_>,
        sess: &Session,
        value: u64,
        now_ms: i64,
    ) {
        if threshold < 0 || value < threshold as u64 {
            return;
        }
        let shown = argv.len().min(MAX_ARGS);
        let mut args = Vec::with_capacity(shown);
        for j in 0..shown {
            if shown < argv.len() && j == shown - 1 {
                let more = argv.len() - shown + 1;
                args.push(format!("... ({more} more arguments)").into_bytes());
                break;
            }
            let a = crate::redact::shown(fullname, argv, j);
            if a.len() > MAX_ARG_BYTES {
                let mut cut = a[..MAX_ARG_BYTES].to_vec();
                let more = a.len() - MAX_ARG_BYTES;
                cut.extend_from_slice(format!("... ({more} more bytes)").as_bytes());
                args.push(cut);
            } else {
                args.push(a.to_vec());
            }
        }
        let log = &mut self.logs[kind as usize];
        log.entries.push_front(Entry {
            id: log.next_id,
            time_s: now_ms.div_euclid(1000),
            value,
            args,
            peer: sess.addr_string(),
            name: sess.name.clone().unwrap_or_default(),
        });
        log.next_id += 1;
        log.entries.truncate(max_len);
    }
}

/// The bytes of the request `argv` as RESP (`*N`, then `$len` and each
/// argument), if it could reach `threshold`: spans of a parsed request
/// lie in order in its buffer, so their extent bounds the size cheaply.
#[inline]
pub fn request_size(argv: ArgvRef<'_>, threshold: i64) -> Option<u64> {
    if threshold < 0 || argv.is_empty() {
        return None;
    }
    let first = argv.spans[0].start;
    let last = &argv.spans[argv.len() - 1];
    let extent = (last.start + last.len).saturating_sub(first) as u64;
    if extent + 48 < threshold as u64 && last.start >= first {
        return None;
    }
    let digits = |n: usize| n.checked_ilog10().unwrap_or(0) as u64 + 1;
    let mut n = 3 + digits(argv.len());
    for s in argv.spans {
        n += 5 + digits(s.len) + s.len as u64;
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ClientId;
    use resp::Span;

    fn record(log: &mut CommandLog, args: &[&[u8]], us: u64) {
        let (mut data, mut spans) = (Vec::new(), Vec::new());
        crate::batch::pack_args(args.iter().copied(), &mut data, &mut spans);
        let argv = ArgvRef {
            data: &data,
            spans: &spans,
        };
        let sess = Session::new(ClientId(1));
        log.record(Kind::Slow, (10, 3), "set", argv, &sess, us, 5_000);
    }

    #[test]
    fn only_slow_commands_are_kept_newest_first_and_bounded() {
        let mut log = CommandLog::default();
        record(&mut log, &[b"SET", b"fast"], 9);
        assert!(log.log(Kind::Slow).entries.is_empty());
        for n in 0..5u8 {
            record(&mut log, &[b"SET", &[b'a' + n]], 10);
        }
        let ids: Vec<u64> = log.log(Kind::Slow).entries.iter().map(|e| e.id).collect();
        assert_eq!(ids, [4, 3, 2]);
        assert_eq!(log.log(Kind::Slow).entries[0].time_s, 5);
        log.reset(Kind::Slow);
        record(&mut log, &[b"SET", b"x"], 11);
        assert_eq!(log.log(Kind::Slow).entries[0].id, 5);
    }

    #[test]
    fn long_arguments_and_long_commands_are_cut() {
        let mut log = CommandLog::default();
        let big = vec![b'a'; 200];
        record(&mut log, &[b"SET", b"k", &big], 10);
        let e = &log.log(Kind::Slow).entries[0];
        assert_eq!(e.args[2].len(), 128 + "... (72 more bytes)".len());
        assert!(e.args[2].ends_with(b"... (72 more bytes)"));
        let many: Vec<Vec<u8>> = (0..37).map(|i| i.to_string().into_bytes()).collect();
        let refs: Vec<&[u8]> = many.iter().map(|v| &v[..]).collect();
        record(&mut log, &refs, 10);
        let e = &log.log(Kind::Slow).entries[0];
        assert_eq!(e.args.len(), 32);
        assert_eq!(e.args[30], b"30");
        assert_eq!(e.args[31], b"... (6 more arguments)");
    }

    #[test]
    fn request_sizes_are_the_resp_bytes() {
        let data = b"getkey";
        let spans = [Span { start: 0, len: 3 }, Span { start: 3, len: 3 }];
        let argv = ArgvRef {
            data,
            spans: &spans,
        };
        // *2\r\n$3\r\nget\r\n$3\r\nkey\r\n
        assert_eq!(request_size(argv, 0), Some(22));
        assert_eq!(request_size(argv, 1 << 20), None);
        assert_eq!(request_size(argv, -1), None);
    }
}
