//! `IORING_OP_SEND_ZC` sends from a small ring of the feed's own (the
//! mechanism when the server runs io_uring).
//!
//! One send is submitted at a time and the feed waits for its first CQE,
//! as it would for a blocking `send`: that CQE says how many bytes went
//! (a short send continues with the rest, as its own SEND_ZC) and, with
//! `IORING_CQE_F_MORE`, that a notification follows. The notification
//! (`IORING_CQE_F_NOTIF`, the same user_data) says the kernel is done with
//! the bytes: the tracker lets the slice go, counting it copied when `res`
//! has `IORING_NOTIF_USAGE_ZC_COPIED`. Notifications of earlier sends come
//! whenever the kernel frees their buffers: the feed polls the ring's
//! descriptor beside the socket and reaps them without waiting.

use super::errqueue::copy_send;
use super::{Sent, Tracker};
use effects::Slice;
use io_uring::{IoUring, Probe, cqueue, opcode, types};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

/// `IORING_SEND_ZC_REPORT_USAGE` (a `zc_flags` bit, Linux 6.2): the
/// notification's `res` says whether the kernel copied after all.
const REPORT_USAGE: u16 = 1 << 3;
/// `IORING_NOTIF_USAGE_ZC_COPIED`: in a notification's `res`.
const ZC_COPIED: u32 = 1 << 31;
/// user_data of a cancellation (send ids fit in the low 32 bits).
const CANCEL: u64 = 1 << 32;
/// A send and its cancellation at most are submitted at once.
const SQ_ENTRIES: u32 = 4;
/// Room for the notifications of every send a socket buffer can hold;
/// more overflow into the kernel's list and are flushed on the next
/// enter (IORING_FEAT_NODROP).
const CQ_ENTRIES: u32 = 512;
/// The longest single SEND_ZC (its length is a u32).
const MAX_SEND: usize = 1 << 30;

pub(super) struct SendZc {
    ring: IoUring,
    fd: RawFd,
    state: Completions,
    /// The submitted send's outcome, taken by a reap before `try_send`
    /// asked for it.
    outcome: Option<Outcome>,
    /// Off after a kernel (6.0, 6.1) refused REPORT_USAGE: copies are
    /// then not counted.
    report_usage: bool,
}

impl SendZc {
    /// A ring for sends on `fd`, if the kernel has SEND_ZC.
    pub(super) fn new(fd: RawFd) -> Result<SendZc, String> {
        let ring = IoUring::builder()
            .setup_cqsize(CQ_ENTRIES)
            .build(SQ_ENTRIES)
            .map_err(|e| format!("io_uring_setup: {e}"))?;
        let mut probe = Probe::new();
        ring.submitter()
            .register_probe(&mut probe)
            .map_err(|e| format!("IORING_REGISTER_PROBE: {e}"))?;
        if !probe.is_supported(opcode::SendZc::CODE) {
            return Err("the kernel lacks the opcode (Linux 6.0 or later)".into());
        }
        if !ring.params().is_feature_ext_arg() {
            return Err("the kernel lacks IORING_FEAT_EXT_ARG".into());
        }
        Ok(SendZc {
            ring,
            fd,
            state: Completions::default(),
            outcome: None,
            report_usage: true,
        })
    }

    pub(super) fn ring_fd(&self) -> RawFd {
        self.ring.as_raw_fd()
    }

    /// A send waits for its first CQE.
    pub(super) fn submitted(&self) -> bool {
        self.state.submitted.is_some()
    }

    /// A send is under way that only `try_send` may carry on.
    pub(super) fn busy(&self) -> bool {
        self.submitted() || self.outcome.is_some()
    }

    /// Carry on sending `rest` without waiting: submit it if no send is
    /// under way, then look for the outcome. `rest` must be what is left
    /// of the bytes of the send under way, if there is one.
    pub(super) fn try_send(&mut self, t: &mut Tracker, rest: &Slice) -> Result<Sent, String> {
        if !self.busy() {
            self.submit(t, rest)?;
            // Into the kernel now: with room in the socket it completes
            // inline and the outcome is there at once.
            self.ring
                .submit()
                .map_err(|e| format!("write error: io_uring_enter: {e}"))?;
        }
        let outcome = self.outcome.take().or_else(|| self.take_cqes(t));
        match outcome {
            None => Ok(Sent::Blocked),
            Some(o) => self.advanced(o, rest).map(Sent::or_blocked),
        }
    }

    /// Queue a SEND_ZC of (the first [`MAX_SEND`] bytes of) `rest`.
    fn submit(&mut self, t: &Tracker, rest: &Slice) -> Result<(), String> {
        let rest = rest.truncate(MAX_SEND);
        let id = t.next_id;
        let zc_flags = if self.report_usage { REPORT_USAGE } else { 0 };
        let sqe = opcode::SendZc::new(types::Fd(self.fd), rest.as_ptr(), rest.len() as u32)
            .flags(libc::MSG_NOSIGNAL)
            .zc_flags(zc_flags)
            .build()
            .user_data(u64::from(id));
        // SAFETY: the SQE points at `rest`'s bytes, which stay valid
        // and unchanged until the kernel is done with them:
        // `state.submitted` holds their block until the first CQE, the
        // tracker from then until the notification.
        unsafe { self.ring.submission().push(&sqe) }
            .map_err(|_| "write error: the ring's submission queue is full".to_string())?;
        self.state.submitted = Some(Submitted {
            id,
            slice: rest,
            notified: None,
        });
        Ok(())
    }

    /// How far a send's outcome moved `rest` (0: try again), or the
    /// error that ends the feed. A kernel short of option memory gets an
    /// ordinary send, which does not wait either.
    fn advanced(&mut self, o: Outcome, rest: &Slice) -> Result<usize, String> {
        match o {
            Outcome::Sent(n) => Ok(n),
            Outcome::Failed(libc::EINTR | libc::EAGAIN) => Ok(0),
            Outcome::Failed(libc::ENOBUFS) => copy_send(self.fd, rest, libc::MSG_DONTWAIT),
            Outcome::Failed(libc::EINVAL) if self.report_usage => {
                self.report_usage = false;
                engine::log::notice(
                    "IORING_OP_SEND_ZC without IORING_SEND_ZC_REPORT_USAGE (before Linux 6.2): copies by the kernel are not counted",
                );
                Ok(0)
            }
            Outcome::Failed(0) => Err("write error: the send took no bytes".into()),
            Outcome::Failed(e) => Err(format!(
                "write error: {}",
                std::io::Error::from_raw_os_error(e)
            )),
        }
    }

    /// Take every CQE that has come, without waiting.
    pub(super) fn reap(&mut self, t: &mut Tracker) {
        if self.ring.submission().cq_overflow() {
            // Flushes the kernel's overflow list into the CQ.
            let _ = self.ring.submit();
        }
        if let Some(o) = self.take_cqes(t) {
            self.outcome = Some(o);
        }
    }

    fn take_cqes(&mut self, t: &mut Tracker) -> Option<Outcome> {
        let mut outcome = None;
        for cqe in self.ring.completion() {
            if let Some(o) = self
                .state
                .on_cqe(t, cqe.user_data(), cqe.result(), cqe.flags())
            {
                outcome = Some(o);
            }
        }
        outcome
    }

    /// Sleep until a CQE comes, or `timeout`.
    pub(super) fn wait(&mut self, timeout: Duration) {
        let ts = types::Timespec::from(timeout);
        let args = types::SubmitArgs::new().timespec(&ts);
        let _ = self.ring.submitter().submit_with_args(1, &args);
    }

    /// Cancel a send still waiting for room (its first CQE, then its
    /// notification, still come).
    pub(super) fn cancel(&mut self) {
        let Some(s) = &self.state.submitted else {
            return;
        };
        let sqe = opcode::AsyncCancel::new(u64::from(s.id))
            .build()
            .user_data(CANCEL);
        // SAFETY: a cancellation points at no memory.
        if unsafe { self.ring.submission().push(&sqe) }.is_ok() {
            let _ = self.ring.submit();
        }
    }

    /// Never free the block of a send still submitted.
    pub(super) fn leak(&mut self) {
        std::mem::forget(self.state.submitted.take());
    }
}

/// A SEND_ZC whose first CQE has not come yet.
struct Submitted {
    id: u32,
    slice: Slice,
    /// A notification that came first (the kernel posts it after the
    /// first CQE; this is in case it ever does not): copied or not.
    notified: Option<bool>,
}

/// What a send's first CQE said.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Sent(usize),
    /// An errno (0: nothing sent, no error).
    Failed(i32),
}

/// The CQE handling, apart from the ring (for tests).
#[derive(Default)]
struct Completions {
    submitted: Option<Submitted>,
}

impl Completions {
    /// One CQE: the submitted send's outcome, if it is its first CQE.
    fn on_cqe(&mut self, t: &mut Tracker, user_data: u64, res: i32, flags: u32) -> Option<Outcome> {
        let Ok(id) = u32::try_from(user_data) else {
            return None; // a cancellation's own CQE
        };
        if cqueue::notif(flags) {
            let copied = res as u32 & ZC_COPIED != 0;
            match &mut self.submitted {
                Some(s) if s.id == id => s.notified = Some(copied),
                _ => t.complete(id, id, copied),
            }
            return None;
        }
        if self.submitted.as_ref().is_none_or(|s| s.id != id) {
            return None;
        }
        let s = self.submitted.take()?;
        let outcome = if res > 0 {
            Outcome::Sent(res as usize)
        } else {
            Outcome::Failed(-res)
        };
        if cqueue::more(flags) {
            // The kernel holds the bytes until the notification: so does
            // the tracker, under the id the SQE carried (the next one,
            // as nothing else was tracked since).
            let tracked = match outcome {
                Outcome::Sent(n) => t.track(s.slice.truncate(n)),
                Outcome::Failed(_) => t.hold(s.slice.truncate(0)),
            };
            debug_assert_eq!(tracked, id);
            if let Some(copied) = s.notified {
                t.complete(id, id, copied);
            }
        }
        Some(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_slices;
    use super::*;
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};
    use std::time::Instant;

    /// `IORING_CQE_F_MORE` and `IORING_CQE_F_NOTIF`.
    const MORE: u32 = 1 << 1;
    const NOTIF: u32 = 1 << 3;

    /// What `SendZc::send` does before it waits: `s` is submitted under
    /// the tracker's next id.
    fn submit(c: &mut Completions, t: &Tracker, s: Slice) -> u64 {
        let id = t.next_id;
        c.submitted = Some(Submitted {
            id,
            slice: s,
            notified: None,
        });
        u64::from(id)
    }

    #[test]
    fn a_notification_with_the_copied_bit_counts_a_copy() {
        let (mut c, mut t) = (Completions::default(), Tracker::new(0, 0));
        let s = test_slices(2, 100);
        let a = submit(&mut c, &t, s[0].clone());
        assert_eq!(c.on_cqe(&mut t, a, 100, MORE), Some(Outcome::Sent(100)));
        assert_eq!((t.writes, t.bytes, t.in_flight.len()), (1, 100, 1));
        let b = submit(&mut c, &t, s[1].clone());
        assert_eq!(b, a + 1);
        assert_eq!(c.on_cqe(&mut t, b, 100, MORE), Some(Outcome::Sent(100)));
        assert_eq!(c.on_cqe(&mut t, a, ZC_COPIED as i32, NOTIF), None);
        assert_eq!((t.copied, t.completed, t.in_flight.len()), (1, 1, 1));
        // Sent from the pages: no bit.
        assert_eq!(c.on_cqe(&mut t, b, 0, NOTIF), None);
        assert_eq!((t.copied, t.completed), (1, 2));
        assert!(t.in_flight.is_empty());
        assert_eq!(t.bytes_in_flight, 0);
    }

    #[test]
    fn a_short_send_tracks_only_the_bytes_it_took() {
        let (mut c, mut t) = (Completions::default(), Tracker::new(0, 0));
        let s = test_slices(1, 1000).remove(0);
        let id = submit(&mut c, &t, s.clone());
        assert_eq!(c.on_cqe(&mut t, id, 300, MORE), Some(Outcome::Sent(300)));
        assert_eq!((t.bytes, t.bytes_in_flight), (300, 300));
        // The rest is its own send, with the next id.
        let rest = submit(&mut c, &t, s.split_from(300));
        assert_eq!(rest, id + 1);
        assert_eq!(c.on_cqe(&mut t, rest, 700, MORE), Some(Outcome::Sent(700)));
        assert_eq!((t.writes, t.bytes, t.bytes_in_flight), (2, 1000, 1000));
        let starts: Vec<u64> = t.in_flight.iter().map(|(_, s)| s.offset()).collect();
        assert_eq!(starts, [0, 300]);
        c.on_cqe(&mut t, rest, 0, NOTIF);
        c.on_cqe(&mut t, id, 0, NOTIF);
        assert!(t.in_flight.is_empty());
        assert_eq!(t.bytes_in_flight, 0);
    }

    #[test]
    fn ids_near_u32_max_wrap_through_user_data() {
        let (mut c, mut t) = (Completions::default(), Tracker::new(0, u32::MAX - 1));
        let mut ids = Vec::new();
        for s in test_slices(3, 10) {
            let id = submit(&mut c, &t, s);
            assert_eq!(c.on_cqe(&mut t, id, 10, MORE), Some(Outcome::Sent(10)));
            ids.push(id);
        }
        assert_eq!(ids, [u64::from(u32::MAX - 1), u64::from(u32::MAX), 0]);
        // Notifications in any order release their own sends.
        c.on_cqe(&mut t, 0, 0, NOTIF);
        let left: Vec<u32> = t.in_flight.iter().map(|(id, _)| *id).collect();
        assert_eq!(left, [u32::MAX - 1, u32::MAX]);
        c.on_cqe(&mut t, u64::from(u32::MAX), 0, NOTIF);
        c.on_cqe(&mut t, u64::from(u32::MAX - 1), 0, NOTIF);
        assert!(t.in_flight.is_empty());
        assert_eq!(t.next_id, 1);
    }

    #[test]
    fn a_failed_send_holds_its_block_until_its_notification() {
        let (mut c, mut t) = (Completions::default(), Tracker::new(0, 7));
        let id = submit(&mut c, &t, test_slices(1, 50).remove(0));
        let r = c.on_cqe(&mut t, id, -libc::EPIPE, MORE);
        assert_eq!(r, Some(Outcome::Failed(libc::EPIPE)));
        assert_eq!((t.writes, t.bytes, t.in_flight.len()), (0, 0, 1));
        c.on_cqe(&mut t, id, 0, NOTIF);
        assert!(t.in_flight.is_empty());
    }

    #[test]
    fn a_first_cqe_without_more_releases_at_once() {
        let (mut c, mut t) = (Completions::default(), Tracker::new(0, 0));
        let id = submit(&mut c, &t, test_slices(1, 50).remove(0));
        assert_eq!(
            c.on_cqe(&mut t, id, -libc::EINVAL, 0),
            Some(Outcome::Failed(libc::EINVAL))
        );
        assert!(c.submitted.is_none());
        assert!(t.in_flight.is_empty());
        assert_eq!(t.next_id, 0, "the id was never the kernel's");
    }

    #[test]
    fn a_notification_before_the_first_cqe_completes_the_send_with_it() {
        let (mut c, mut t) = (Completions::default(), Tracker::new(0, 0));
        let id = submit(&mut c, &t, test_slices(1, 50).remove(0));
        assert_eq!(c.on_cqe(&mut t, id, ZC_COPIED as i32, NOTIF), None);
        assert!(c.submitted.is_some());
        assert_eq!(c.on_cqe(&mut t, id, 50, MORE), Some(Outcome::Sent(50)));
        assert!(t.in_flight.is_empty());
        assert_eq!((t.writes, t.completed, t.copied), (1, 1, 1));
    }

    #[test]
    fn other_cqes_are_not_the_outcome() {
        let (mut c, mut t) = (Completions::default(), Tracker::new(0, 5));
        let id = submit(&mut c, &t, test_slices(1, 50).remove(0));
        assert_eq!(c.on_cqe(&mut t, CANCEL, 0, 0), None);
        assert_eq!(c.on_cqe(&mut t, id + 1, 50, MORE), None);
        assert!(c.submitted.is_some());
    }

    /// A real ring over loopback: a send buffer smaller than a slice makes
    /// short sends, the rest follows, every byte arrives in order, and
    /// every notification comes (loopback delivery copies: each says so).
    #[test]
    fn slices_over_loopback_arrive_whole_through_short_sends() {
        // Small buffers on both ends: the receiver's window bounds the
        // kernel's segments (to half of it), the sender's buffer how many
        // it queues before a send comes back short.
        let small = crate::zerocopy::set_socket_buffer;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        small(listener.as_raw_fd(), libc::SO_RCVBUF, 16 << 10);
        let tx = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut rx, _) = listener.accept().unwrap();
        small(tx.as_raw_fd(), libc::SO_SNDBUF, 4 << 10);
        let mut z = match SendZc::new(tx.as_raw_fd()) {
            Ok(z) => z,
            Err(why) => {
                eprintln!("skipped: no IORING_OP_SEND_ZC here: {why}");
                return;
            }
        };
        let data: Vec<u8> = (0..256usize << 10).map(|i| (i % 251) as u8).collect();
        let mut w = effects::Writer::new(0);
        let mut reader = w.reader();
        w.append(&data);
        w.publish();
        let want = data.len();
        let got = std::thread::spawn(move || {
            let mut got = Vec::with_capacity(want);
            let mut buf = [0u8; 8192];
            while got.len() < want {
                match rx.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            got
        });
        // Ids start near the wrap: the kernel gives user_data back as is.
        let mut t = Tracker::new(0, u32::MAX - 3);
        let mut slices = 0u64;
        let deadline = Instant::now() + Duration::from_secs(20);
        while let Some(s) = reader.next_slice() {
            let mut at = 0;
            while at < s.len() {
                assert!(Instant::now() < deadline, "the reader stalled");
                match z.try_send(&mut t, &s.split_from(at)).unwrap() {
                    Sent::Bytes(n) => at += n,
                    Sent::Blocked => z.wait(Duration::from_millis(10)),
                }
            }
            z.reap(&mut t);
            slices += 1;
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while !t.in_flight.is_empty() && Instant::now() < deadline {
            z.wait(Duration::from_millis(10));
            z.reap(&mut t);
        }
        assert!(
            t.in_flight.is_empty(),
            "{} notifications missing",
            t.in_flight.len()
        );
        assert_eq!(got.join().unwrap(), data);
        assert_eq!(t.bytes, data.len() as u64);
        assert!(t.writes > slices, "{} sends for {slices} slices", t.writes);
        assert_eq!(t.completed, t.writes);
        assert_eq!(t.copied, t.completed, "loopback copies every send");
        assert!(t.next_id < 100, "ids wrapped");
    }
}
