//! The connection state machine both event loops drive: what to send next,
//! which reply answers which request, and what a reply means.
//!
//! A connection never touches a syscall here; the io_uring and epoll loops
//! move bytes in and out of its buffers and call [`Conn::fill`],
//! [`Conn::stamp`] and [`Conn::on_bytes`].

use crate::stats::ThreadStats;
use crate::workload::{Workload, value_matches};
use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};

/// Initial receive buffer; it doubles when one reply does not fit.
pub const RECV_BUF: usize = 16 * 1024;

/// One request waiting for its reply.
#[derive(Clone, Copy, Debug)]
struct Pending {
    /// Intended send time (open loop) or send-batch time (closed loop), ns.
    t: u64,
    template: u16,
    /// `--verify`: the key was SET (acknowledged) before this GET was issued.
    expect_value: bool,
    key: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Open,
    /// Failed; waiting for the kernel to give back in-flight operations
    /// before the fd is closed and the buffers reused.
    Closing,
    /// Closed for good (the run is over or reconnecting is pointless).
    Dead,
}

/// Keys acknowledged by SET during this run, shared by all threads, so a
/// GET of a key known to be set must return a value.
#[derive(Debug)]
pub struct VerifySet {
    bits: Vec<AtomicU64>,
}

impl VerifySet {
    pub fn new(keyspace: u64) -> Self {
        VerifySet {
            bits: (0..keyspace.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }
    fn set(&self, k: u64) {
        if let Some(w) = self.bits.get((k / 64) as usize) {
            w.fetch_or(1 << (k % 64), Ordering::Relaxed);
        }
    }
    fn contains(&self, k: u64) -> bool {
        self.bits
            .get((k / 64) as usize)
            .is_some_and(|w| w.load(Ordering::Relaxed) & (1 << (k % 64)) != 0)
    }
}

/// Per-thread state the connections share: what to send, how many are
/// left, where results go.
pub struct Ctx<'a> {
    pub workload: &'a Workload,
    pub keys: crate::keygen::KeyGen,
    pub stats: ThreadStats,
    /// Requests this thread may still issue.
    pub budget: u64,
    /// No new requests after this time (ns; `u64::MAX` = none).
    pub deadline: u64,
    /// Requests issued so far (drives the mixed ratio and LPUSH values).
    pub seq: u64,
    pub data_size: usize,
    pub pipeline: usize,
    /// Open loop: ns between one connection's intended sends.
    pub interval: Option<u64>,
    pub verify: Option<&'a VerifySet>,
    /// Replies received plus requests lost.
    pub done: u64,
}

impl Ctx<'_> {
    #[inline]
    fn may_issue(&self, now: u64) -> bool {
        self.budget > 0 && now < self.deadline
    }

    /// True when nothing more will be issued.
    pub fn exhausted(&self, now: u64) -> bool {
        !self.may_issue(now)
    }
}

pub struct Conn {
    pub fd: RawFd,
    /// Bumped on every reconnect; io_uring completions carry it so a late
    /// completion for an old socket is recognised.
    pub generation: u32,
    pub state: State,
    pub rbuf: Vec<u8>,
    pub rstart: usize,
    pub rend: usize,
    /// Requests built but not yet handed to the kernel.
    pub out_next: Vec<u8>,
    /// Bytes handed to the kernel (io_uring: must not move until the send
    /// completes); `busy_off` of them are sent.
    pub out_busy: Vec<u8>,
    pub busy_off: usize,
    pub recv_armed: bool,
    pub send_armed: bool,
    pending: VecDeque<Pending>,
    /// Closed loop: the newest `unstamped` pending requests still need the
    /// send-batch time.
    unstamped: usize,
    /// Open loop: intended time of the next request.
    pub next_due: u64,
    /// Last time a reply arrived or an idle connection got work: the
    /// reference for `--timeout`.
    pub last_progress: u64,
}

impl Conn {
    pub fn new(fd: RawFd, pipeline: usize) -> Self {
        Conn {
            fd,
            generation: 0,
            state: State::Open,
            rbuf: vec![0; RECV_BUF],
            rstart: 0,
            rend: 0,
            out_next: Vec::with_capacity(4096),
            out_busy: Vec::with_capacity(4096),
            busy_off: 0,
            recv_armed: false,
            send_armed: false,
            pending: VecDeque::with_capacity(pipeline),
            unstamped: 0,
            next_due: 0,
            last_progress: 0,
        }
    }

    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// Issue as many requests as the mode allows now. Returns whether any
    /// were issued.
    #[inline]
    pub fn fill(&mut self, ctx: &mut Ctx<'_>, now: u64) -> bool {
        if self.state != State::Open {
            return false;
        }
        let before = self.pending.len();
        match ctx.interval {
            None => {
                while self.pending.len() < ctx.pipeline && ctx.may_issue(now) {
                    self.issue(ctx, 0, now);
                    self.unstamped += 1;
                }
            }
            Some(iv) => {
                while self.pending.len() < ctx.pipeline
                    && self.next_due <= now
                    && ctx.may_issue(now)
                {
                    let due = self.next_due;
                    ctx.stats.lateness.saturating_record((now - due).max(1));
                    self.issue(ctx, due, now);
                    self.next_due += iv;
                }
            }
        }
        self.pending.len() > before
    }

    #[inline]
    fn issue(&mut self, ctx: &mut Ctx<'_>, t: u64, now: u64) {
        if self.pending.is_empty() {
            self.last_progress = now;
        }
        let which = ctx.workload.pick(ctx.seq);
        let tmpl = &ctx.workload.templates[which];
        let key = tmpl.emit(&mut self.out_next, &mut ctx.keys, ctx.data_size, ctx.seq);
        let expect_value = tmpl.reads_value && ctx.verify.is_some_and(|v| v.contains(key));
        ctx.seq += 1;
        ctx.budget -= 1;
        self.pending.push_back(Pending {
            t,
            template: which as u16,
            expect_value,
            key,
        });
    }

    /// Closed loop: give the requests built since the last batch their
    /// send time (taken right before the batch goes to the kernel).
    #[inline]
    pub fn stamp(&mut self, t: u64) {
        let n = self.pending.len();
        for p in self.pending.range_mut(n - self.unstamped..) {
            p.t = t;
        }
        self.unstamped = 0;
    }

    /// Consume whole replies from `rbuf[rstart..rend]`, received at `now`.
    /// Returns the number of replies, or a protocol error.
    pub fn on_bytes(&mut self, ctx: &mut Ctx<'_>, now: u64) -> Result<usize, String> {
        let mut replies = 0;
        while self.rstart < self.rend {
            let buf = &self.rbuf[self.rstart..self.rend];
            let n = match resp::value::value_len(buf) {
                Ok(Some(n)) => n,
                Ok(None) => break,
                Err(e) => return Err(format!("protocol error in reply: {e}")),
            };
            let frame = &buf[..n];
            if frame[0] == b'>' {
                // RESP3 push (e.g. an invalidation): not an answer.
                self.rstart += n;
                continue;
            }
            let Some(p) = self.pending.pop_front() else {
                return Err("reply without a request".into());
            };
            ctx.stats
                .record(p.template as usize, now.saturating_sub(p.t));
            match frame[0] {
                b'-' => ctx.stats.error(&frame[1..n - 2]),
                b'!' => ctx.stats.error(payload(frame)),
                b'+' | b'$' | b'_' if ctx.verify.is_some() => check(ctx, &p, frame),
                _ => {}
            }
            self.rstart += n;
            replies += 1;
        }
        if self.rstart == self.rend {
            self.rstart = 0;
            self.rend = 0;
        } else if self.rstart > 0 && self.rbuf.len() - self.rend < self.rbuf.len() / 4 {
            // Little room left behind a partial reply: move it to the front.
            self.rbuf.copy_within(self.rstart..self.rend, 0);
            self.rend -= self.rstart;
            self.rstart = 0;
        } else if self.rstart == 0 && self.rend == self.rbuf.len() {
            // One reply bigger than the buffer.
            let len = self.rbuf.len() * 2;
            self.rbuf.resize(len, 0);
        }
        if replies > 0 {
            self.last_progress = now;
            ctx.done += replies as u64;
        }
        Ok(replies)
    }

    /// Requests in flight are lost; buffers are cleared for a new socket.
    pub fn drop_in_flight(&mut self, ctx: &mut Ctx<'_>) {
        let n = self.pending.len() as u64;
        ctx.stats.lost += n;
        ctx.done += n;
        self.pending.clear();
        self.unstamped = 0;
        self.out_next.clear();
        self.out_busy.clear();
        self.busy_off = 0;
        self.rstart = 0;
        self.rend = 0;
    }

    /// Move queued requests to the send slot; false if there is nothing to
    /// send or a send is already in progress.
    pub fn take_next_batch(&mut self) -> bool {
        if self.busy_off < self.out_busy.len() || self.out_next.is_empty() {
            return false;
        }
        std::mem::swap(&mut self.out_next, &mut self.out_busy);
        self.out_next.clear();
        self.busy_off = 0;
        true
    }

    /// Unsent part of the send slot.
    pub fn unsent(&self) -> &[u8] {
        &self.out_busy[self.busy_off..]
    }

    pub fn sent(&mut self, n: usize) {
        self.busy_off += n;
        if self.busy_off >= self.out_busy.len() {
            self.out_busy.clear();
            self.busy_off = 0;
        }
    }
}

/// The payload of a `$`/`!`/`=` frame (between the header line and CRLF).
fn payload(frame: &[u8]) -> &[u8] {
    let start = frame
        .iter()
        .position(|&b| b == b'\n')
        .map_or(frame.len(), |i| i + 1);
    &frame[start.min(frame.len() - 2)..frame.len() - 2]
}

/// `--verify`: remember acknowledged SETs, check GETs.
fn check(ctx: &mut Ctx<'_>, p: &Pending, frame: &[u8]) {
    let Some(v) = ctx.verify else { return };
    let t = &ctx.workload.templates[p.template as usize];
    if t.writes_value && frame[0] == b'+' {
        v.set(p.key);
        return;
    }
    if !t.reads_value {
        return;
    }
    let null = frame[0] == b'_' || frame.starts_with(b"$-1\r\n");
    let s = &mut ctx.stats;
    if null {
        if p.expect_value {
            s.verify_mismatch += 1;
            if s.verify_examples.len() < 5 {
                s.verify_examples.push(format!(
                    "key:{:012}: SET was acknowledged, GET returned nil",
                    p.key
                ));
            }
        } else {
            s.verify_absent += 1;
        }
        return;
    }
    if frame[0] != b'$' {
        return;
    }
    s.verify_checked += 1;
    let got = payload(frame);
    if !value_matches(got, p.key, ctx.data_size) {
        s.verify_mismatch += 1;
        if s.verify_examples.len() < 5 {
            let shown = String::from_utf8_lossy(&got[..got.len().min(40)]).into_owned();
            s.verify_examples.push(format!(
                "key:{:012}: got {} bytes {shown:?}, expected {} bytes",
                p.key,
                got.len(),
                ctx.data_size
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keygen::{KeyGen, KeyPattern};
    use crate::workload::value_for_key;

    fn ctx<'a>(w: &'a Workload, verify: Option<&'a VerifySet>, budget: u64) -> Ctx<'a> {
        Ctx {
            workload: w,
            keys: KeyGen::new(KeyPattern::Sequential, 100, 0, 7),
            stats: ThreadStats::new(w.templates.len()),
            budget,
            deadline: u64::MAX,
            seq: 0,
            data_size: 5,
            pipeline: 2,
            interval: None,
            verify,
            done: 0,
        }
    }

    fn feed(c: &mut Conn, bytes: &[u8]) {
        c.rbuf[c.rend..c.rend + bytes.len()].copy_from_slice(bytes);
        c.rend += bytes.len();
    }

    #[test]
    fn closed_loop_keeps_pipeline_full_and_records_latency() {
        let w = Workload::builtin("get", 5, (1, 1)).unwrap();
        let mut cx = ctx(&w, None, 3);
        let mut c = Conn::new(-1, 2);
        assert!(c.fill(&mut cx, 100));
        assert_eq!(c.in_flight(), 2);
        c.stamp(1_000);
        assert!(c.take_next_batch());
        assert_eq!(
            c.unsent(),
            b"*2\r\n$3\r\nGET\r\n$16\r\nkey:000000000007\r\n*2\r\n$3\r\nGET\r\n$16\r\nkey:000000000008\r\n"
        );
        // One and a half replies: one counted, the rest waits.
        feed(&mut c, b"$-1\r\n-ERR bo");
        assert_eq!(c.on_bytes(&mut cx, 6_000), Ok(1));
        assert_eq!(cx.stats.hist[0].len(), 1);
        assert_eq!(
            cx.stats.hist[0].max(),
            cx.stats.hist[0].highest_equivalent(5_000)
        );
        feed(&mut c, b"om\r\n");
        assert_eq!(c.on_bytes(&mut cx, 7_000), Ok(1));
        assert_eq!(cx.stats.errors, vec![("ERR boom".to_string(), 1)]);
        assert_eq!((c.rstart, c.rend), (0, 0));
        // Budget 3: one more, then nothing.
        c.fill(&mut cx, 8_000);
        c.fill(&mut cx, 8_000);
        assert_eq!(c.in_flight(), 1);
        assert!(cx.exhausted(8_000));
        assert_eq!(cx.done, 2);
    }

    #[test]
    fn open_loop_measures_from_intended_time() {
        let w = Workload::builtin("ping", 5, (1, 1)).unwrap();
        let mut cx = ctx(&w, None, 10);
        cx.pipeline = 1;
        cx.interval = Some(1_000);
        let mut c = Conn::new(-1, 1);
        c.next_due = 10_000;
        assert!(!c.fill(&mut cx, 9_999), "nothing due yet");
        // Due at 10_000 but sent at 10_500: 500 late.
        assert!(c.fill(&mut cx, 10_500));
        c.stamp(10_600); // nothing unstamped in open loop
        assert_eq!(c.in_flight(), 1);
        // The reply takes until 13_000: the request due at 11_000 and
        // 12_000 queue behind it (pipeline 1).
        feed(&mut c, b"+PONG\r\n");
        c.on_bytes(&mut cx, 13_000).unwrap();
        assert_eq!(
            cx.stats.hist[0].max(),
            cx.stats.hist[0].highest_equivalent(3_000)
        );
        assert!(c.fill(&mut cx, 13_000));
        feed(&mut c, b"+PONG\r\n");
        c.on_bytes(&mut cx, 13_100).unwrap();
        // Measured from 11_000, not from 13_000.
        assert_eq!(
            cx.stats.hist[0].max(),
            cx.stats.hist[0].highest_equivalent(3_000)
        );
        assert_eq!(
            cx.stats.hist[0].min(),
            cx.stats.hist[0].lowest_equivalent(2_100)
        );
        assert_eq!(cx.stats.lateness.len(), 2);
        assert!(cx.stats.lateness.max() >= 1_990);
    }

    #[test]
    fn verify_flags_wrong_and_missing_values() {
        let w = Workload::builtin("mixed", 5, (1, 1)).unwrap();
        let vs = VerifySet::new(100);
        let mut cx = ctx(&w, Some(&vs), 4);
        let mut c = Conn::new(-1, 2);
        // SET key 7, GET key 8 (not set: nil is fine).
        c.fill(&mut cx, 0);
        feed(&mut c, b"+OK\r\n$-1\r\n");
        c.on_bytes(&mut cx, 1).unwrap();
        assert_eq!(cx.stats.verify_absent, 1);
        assert!(vs.contains(7));
        // Next: SET key 9, GET key 10; pretend key 10 was set earlier.
        vs.set(10);
        c.fill(&mut cx, 2);
        let mut reply = b"+OK\r\n$5\r\n".to_vec();
        reply.extend_from_slice(&value_for_key(11, 5));
        reply.extend_from_slice(b"\r\n");
        feed(&mut c, &reply);
        c.on_bytes(&mut cx, 3).unwrap();
        assert_eq!(cx.stats.verify_checked, 1);
        assert_eq!(cx.stats.verify_mismatch, 1);
        assert!(cx.stats.verify_examples[0].starts_with("key:000000000010: got 5 bytes"));
    }

    #[test]
    fn protocol_garbage_and_unsolicited_replies_are_errors() {
        let w = Workload::builtin("ping", 5, (1, 1)).unwrap();
        let mut cx = ctx(&w, None, 1);
        let mut c = Conn::new(-1, 1);
        feed(&mut c, b"+PONG\r\n");
        assert!(c.on_bytes(&mut cx, 0).is_err());
        let mut c = Conn::new(-1, 1);
        c.fill(&mut cx, 0);
        feed(&mut c, b"$x\r\n");
        assert!(c.on_bytes(&mut cx, 0).is_err());
        c.drop_in_flight(&mut cx);
        assert_eq!((cx.stats.lost, cx.done), (1, 1));
    }

    #[test]
    fn big_reply_grows_the_buffer() {
        let w = Workload::builtin("get", 5, (1, 1)).unwrap();
        let mut cx = ctx(&w, None, 1);
        let mut c = Conn::new(-1, 1);
        c.fill(&mut cx, 0);
        let big = RECV_BUF + 100;
        let mut reply = format!("${big}\r\n").into_bytes();
        reply.resize(reply.len() + big, b'x');
        reply.extend_from_slice(b"\r\n");
        feed(&mut c, &reply[..RECV_BUF]);
        assert_eq!(c.on_bytes(&mut cx, 0), Ok(0));
        assert_eq!(c.rbuf.len(), 2 * RECV_BUF);
        feed(&mut c, &reply[RECV_BUF..]);
        assert_eq!(c.on_bytes(&mut cx, 0), Ok(1));
    }
}
