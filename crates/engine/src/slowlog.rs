//! SLOWLOG: the last `slowlog-max-len` commands that ran longer than
//! `slowlog-log-slower-than` µs, as Valkey keeps them — id, unix time,
//! duration, the arguments (at most 32, each cut at 128 bytes, secrets
//! redacted), the client's address and name.
//!
//! Durations come from the engine's command timer. Runs of the same
//! command share one clock read there, so a command is timed on its own
//! (two clock reads) only when the log could want it: every command when
//! the threshold is under [`EXACT_BELOW_US`], otherwise only commands not
//! flagged `fast` — a `fast` command (O(1) or O(log N)) is not expected to
//! take milliseconds, and timing each of them would cost a pipeline of
//! GETs two clock reads per GET.

use crate::batch::ArgvRef;
use crate::session::Session;
use std::collections::VecDeque;

/// Below this threshold (µs) every command is timed on its own.
pub const EXACT_BELOW_US: i64 = 1000;
const MAX_ARGS: usize = 32;
const MAX_ARG_BYTES: usize = 128;

pub struct Entry {
    pub id: u64,
    pub time_s: i64,
    pub duration_us: u64,
    pub args: Vec<Vec<u8>>,
    pub peer: String,
    pub name: Vec<u8>,
}

#[derive(Default)]
pub struct SlowLog {
    /// Newest first, as SLOWLOG GET lists them.
    pub entries: VecDeque<Entry>,
    /// Ids keep counting across SLOWLOG RESET, as Valkey's do.
    next_id: u64,
}

impl SlowLog {
    /// Should a command with these flags be timed on its own?
    #[inline]
    pub fn wants_exact(threshold_us: i64, cmd_flags: u32) -> bool {
        threshold_us >= 0
            && (threshold_us < EXACT_BELOW_US || cmd_flags & crate::command::flags::FAST == 0)
    }

    /// Log the command if it took at least the threshold (Valkey logs
    /// `duration >= slowlog-log-slower-than`).
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &mut self,
        threshold_us: i64,
        max_len: usize,
        fullname: &str,
        argv: ArgvRef<'_>,
        sess: &Session,
        duration_us: u64,
        now_ms: i64,
    ) {
        if threshold_us < 0 || duration_us < threshold_us as u64 {
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
        self.entries.push_front(Entry {
            id: self.next_id,
            time_s: now_ms.div_euclid(1000),
            duration_us,
            args,
            peer: sess.addr_string(),
            name: sess.name.clone().unwrap_or_default(),
        });
        self.next_id += 1;
        self.trim(max_len);
    }

    /// Keep at most `max_len` entries (also when CONFIG SET lowers it).
    pub fn trim(&mut self, max_len: usize) {
        self.entries.truncate(max_len);
    }

    pub fn reset(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ClientId;
    use resp::Span;

    fn record(log: &mut SlowLog, args: &[&[u8]], us: u64) {
        let mut data = Vec::new();
        let mut spans = Vec::new();
        for a in args {
            spans.push(Span {
                start: data.len(),
                len: a.len(),
            });
            data.extend_from_slice(a);
        }
        let argv = ArgvRef {
            data: &data,
            spans: &spans,
        };
        let sess = Session::new(ClientId(1));
        log.record(10, 3, "set", argv, &sess, us, 5_000);
    }

    #[test]
    fn only_slow_commands_are_kept_newest_first_and_bounded() {
        let mut log = SlowLog::default();
        record(&mut log, &[b"SET", b"fast"], 9);
        assert!(log.entries.is_empty());
        for n in 0..5u8 {
            record(&mut log, &[b"SET", &[b'a' + n]], 10);
        }
        let ids: Vec<u64> = log.entries.iter().map(|e| e.id).collect();
        assert_eq!(ids, [4, 3, 2]);
        assert_eq!(log.entries[0].time_s, 5);
        log.reset();
        record(&mut log, &[b"SET", b"x"], 11);
        assert_eq!(log.entries[0].id, 5);
    }

    #[test]
    fn long_arguments_and_long_commands_are_cut() {
        let mut log = SlowLog::default();
        let big = vec![b'a'; 200];
        record(&mut log, &[b"SET", b"k", &big], 10);
        let e = &log.entries[0];
        assert_eq!(e.args[2].len(), 128 + "... (72 more bytes)".len());
        assert!(e.args[2].ends_with(b"... (72 more bytes)"));
        let many: Vec<Vec<u8>> = (0..37).map(|i| i.to_string().into_bytes()).collect();
        let refs: Vec<&[u8]> = many.iter().map(|v| &v[..]).collect();
        record(&mut log, &refs, 10);
        let e = &log.entries[0];
        assert_eq!(e.args.len(), 32);
        assert_eq!(e.args[30], b"30");
        assert_eq!(e.args[31], b"... (6 more arguments)");
    }
}
