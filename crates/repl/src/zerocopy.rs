//! Zero-copy sends of the stream to one replica (seed 003): writes of at
//! least `tcp-zerocopy-min-write-size` bytes go out without the kernel
//! copying them into the socket buffer — it sends from the effects block
//! itself.
//!
//! The price is that the bytes must not change or be freed until the
//! kernel says it is done with them. Published stream bytes never change;
//! the [`Tracker`] keeps them alive by holding each send's
//! [`effects::Slice`] (a reference on its block) under an id until the
//! completion for that id comes back. Two mechanisms deliver completions,
//! and share the tracker (ids, slices, counters, the give-up rule):
//!
//! ```text
//!  MSG_ZEROCOPY (errqueue.rs; the epoll backend)
//!   send(MSG_ZEROCOPY) ─► id n (the kernel's per-socket u32, wrapping)
//!   error queue ◄─ SO_EE_ORIGIN_ZEROCOPY [lo, hi]: every id in the range
//!                  is done (ranges coalesce; ids wrap past u32::MAX);
//!                  SO_EE_CODE_ZEROCOPY_COPIED: the kernel copied after all
//!
//!  IORING_OP_SEND_ZC (sendzc.rs; the io_uring backend)
//!   SQE SEND_ZC, user_data = id n (ours, u32, wrapping)
//!   CQE 1: bytes sent, IORING_CQE_F_MORE ─► a notification follows
//!   CQE 2: IORING_CQE_F_NOTIF: id n is done; res has
//!          IORING_NOTIF_USAGE_ZC_COPIED when the kernel copied
//! ```
//!
//! A socket with sends in flight is closed only after the tracker has
//! drained (or a deadline passed): closing earlier would make the kernel
//! drop the notifications, and the slices would have to be kept forever
//! or freed while possibly still read.

mod errqueue;
mod sendzc;

use effects::Slice;
use errqueue::ErrQueue;
pub(crate) use errqueue::copy_send;
use sendzc::SendZc;
use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Completions looked at before deciding that the kernel copies anyway.
const PROBE: u64 = 32;

/// A replica's zero-copy sender: the tracker and the mechanism that
/// delivers its completions.
pub struct ZeroCopy {
    tracker: Tracker,
    via: Via,
}

enum Via {
    ErrQueue(ErrQueue),
    SendZc(Box<SendZc>),
}

impl ZeroCopy {
    /// Zero-copy sends of at least `min` bytes on `fd`: with
    /// `IORING_OP_SEND_ZC` when the server runs io_uring (`io_uring`) and
    /// the kernel has it, else with `MSG_ZEROCOPY`; `None` if the kernel
    /// refuses both.
    pub fn start(fd: RawFd, min: usize, io_uring: bool) -> Option<ZeroCopy> {
        if io_uring {
            match SendZc::new(fd) {
                Ok(s) => {
                    return Some(ZeroCopy {
                        tracker: Tracker::new(min, 0),
                        via: Via::SendZc(Box::new(s)),
                    });
                }
                Err(why) => {
                    // Once per process: every feed would say the same.
                    static SAID: AtomicBool = AtomicBool::new(false);
                    if !SAID.swap(true, Ordering::Relaxed) {
                        engine::log::notice(&format!(
                            "IORING_OP_SEND_ZC is not available ({why}): replica feeds use MSG_ZEROCOPY"
                        ));
                    }
                }
            }
        }
        ErrQueue::enable(fd).map(|e| ZeroCopy {
            tracker: Tracker::new(min, 0),
            via: Via::ErrQueue(e),
        })
    }

    /// The mechanism, for the log.
    pub fn mechanism(&self) -> &'static str {
        match self.via {
            Via::ErrQueue(_) => "MSG_ZEROCOPY",
            Via::SendZc(_) => "IORING_OP_SEND_ZC",
        }
    }

    /// Sends of at least this many bytes go zero-copy (none, once the
    /// tracker gave up on this socket).
    pub fn min_size(&self) -> usize {
        self.tracker.min_size()
    }

    /// Send what of `rest` the socket takes now, zero-copy, without
    /// waiting. While [`ZeroCopy::busy`], `rest` must be what was left
    /// when it became so.
    pub fn try_send(&mut self, rest: &Slice) -> Result<Sent, String> {
        match &mut self.via {
            Via::ErrQueue(e) => e.try_send(&mut self.tracker, rest),
            Via::SendZc(s) => s.try_send(&mut self.tracker, rest),
        }
    }

    /// A send is under way (SEND_ZC's first CQE has not been taken): the
    /// bytes it was given go on through [`ZeroCopy::try_send`] alone.
    pub fn busy(&self) -> bool {
        match &self.via {
            Via::ErrQueue(_) => false,
            Via::SendZc(s) => s.busy(),
        }
    }

    /// Take every completion that has come, without waiting.
    pub fn reap(&mut self) {
        match &mut self.via {
            Via::ErrQueue(e) => e.reap(&mut self.tracker),
            Via::SendZc(s) => s.reap(&mut self.tracker),
        }
    }

    /// A descriptor besides the socket that becomes readable when
    /// completions come (the ring's), for the feed's poll. The error
    /// queue's show as POLLERR on the socket itself.
    pub fn poll_fd(&self) -> Option<RawFd> {
        match &self.via {
            Via::ErrQueue(_) => None,
            Via::SendZc(s) => Some(s.ring_fd()),
        }
    }

    /// Sends the kernel may still read from.
    pub fn in_flight(&self) -> usize {
        let submitted = match &self.via {
            Via::ErrQueue(_) => false,
            Via::SendZc(s) => s.submitted(),
        };
        self.tracker.in_flight.len() + usize::from(submitted)
    }

    /// Before the socket closes: wait (up to `limit`) for every send in
    /// flight to complete.
    pub fn drain(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        if let Via::SendZc(s) = &mut self.via {
            // A send still waiting for room (a write that timed out).
            s.cancel();
        }
        while self.in_flight() > 0 && Instant::now() < deadline {
            let tick = Duration::from_millis(10);
            match &mut self.via {
                Via::ErrQueue(e) => e.wait(tick),
                Via::SendZc(s) => s.wait(tick),
            }
            self.reap();
        }
        let left = self.in_flight();
        if left > 0 {
            // The kernel may still read these blocks: keep them forever
            // rather than free memory it could touch.
            engine::log::warning(&format!(
                "replica feed: {left} zero-copy sends still in flight at close; their buffers are leaked"
            ));
            self.tracker.leak();
            if let Via::SendZc(s) = &mut self.via {
                s.leak();
            }
        }
    }

    /// Copy the counters where INFO reads them.
    pub(crate) fn publish(&self, shared: &crate::feed::SharedCounters) {
        self.tracker.publish(shared);
    }
}

/// What a send that does not wait did.
#[derive(Debug, PartialEq, Eq)]
pub enum Sent {
    /// The kernel took this many bytes (0: try again).
    Bytes(usize),
    /// The socket is full (or, SEND_ZC, the kernel has not answered):
    /// the descriptors the feed polls say when to try again.
    Blocked,
}

impl Sent {
    /// `n` bytes taken by a send that does not wait, none meaning full.
    pub(crate) fn or_blocked(n: usize) -> Sent {
        if n == 0 {
            Sent::Blocked
        } else {
            Sent::Bytes(n)
        }
    }
}

/// The in-flight zero-copy sends of one socket, whatever delivers their
/// completions.
struct Tracker {
    min: usize,
    /// The id of the next send tracked.
    next_id: u32,
    in_flight: VecDeque<(u32, Slice)>,
    bytes_in_flight: u64,
    writes: u64,
    bytes: u64,
    copied: u64,
    completed: u64,
    /// Every one of the first [`PROBE`] completions said "copied": the
    /// path copies anyway (loopback, a veth, a device without scatter-
    /// gather), and zero-copy would only add its notifications. Later
    /// writes are ordinary sends.
    gave_up: bool,
}

impl Tracker {
    fn new(min: usize, first_id: u32) -> Tracker {
        Tracker {
            min,
            next_id: first_id,
            in_flight: VecDeque::new(),
            bytes_in_flight: 0,
            writes: 0,
            bytes: 0,
            copied: 0,
            completed: 0,
            gave_up: false,
        }
    }

    fn min_size(&self) -> usize {
        if self.gave_up { usize::MAX } else { self.min }
    }

    /// A send the kernel accepted: it has the next id.
    fn track(&mut self, sent: Slice) -> u32 {
        self.writes += 1;
        self.bytes += sent.len() as u64;
        self.hold(sent)
    }

    /// Keep `slice` until the completion of the next id, without counting
    /// a write (a failed send whose notification is still to come).
    fn hold(&mut self, slice: Slice) -> u32 {
        let id = self.next_id;
        self.bytes_in_flight += slice.len() as u64;
        self.in_flight.push_back((id, slice));
        self.next_id = id.wrapping_add(1);
        id
    }

    /// Sends `[lo, hi]` (inclusive, ids wrapping) are complete.
    fn complete(&mut self, lo: u32, hi: u32, copied: bool) {
        let span = hi.wrapping_sub(lo);
        let inside = |id: u32| id.wrapping_sub(lo) <= span;
        // Completions come in order in practice: pop from the front, and
        // fall back to a scan for anything else.
        while let Some((id, _)) = self.in_flight.front() {
            if !inside(*id) {
                break;
            }
            let (_, s) = self.in_flight.pop_front().expect("front");
            self.done(&s, copied);
        }
        if self.in_flight.iter().any(|(id, _)| inside(*id)) {
            let mut kept = VecDeque::with_capacity(self.in_flight.len());
            for (id, s) in std::mem::take(&mut self.in_flight) {
                if inside(id) {
                    self.done(&s, copied);
                } else {
                    kept.push_back((id, s));
                }
            }
            self.in_flight = kept;
        }
    }

    fn done(&mut self, s: &Slice, copied: bool) {
        self.bytes_in_flight -= s.len() as u64;
        self.completed += 1;
        if copied {
            self.copied += 1;
        }
        if !self.gave_up && self.completed == PROBE && self.copied == PROBE {
            self.gave_up = true;
            engine::log::notice(
                "Zero-copy sends to a replica were all copied by the kernel: sending that replica ordinary copies",
            );
        }
    }

    /// Never free the blocks of the sends in flight (the kernel may still
    /// read them).
    fn leak(&mut self) {
        std::mem::forget(std::mem::take(&mut self.in_flight));
        self.bytes_in_flight = 0;
    }

    fn publish(&self, shared: &crate::feed::SharedCounters) {
        use std::sync::atomic::Ordering::Relaxed;
        shared.writes.store(self.writes, Relaxed);
        shared.bytes.store(self.bytes, Relaxed);
        shared.in_flight.store(self.in_flight.len() as u64, Relaxed);
        shared.copied.store(self.copied, Relaxed);
        shared.tracker_bytes.store(
            (self.in_flight.capacity() * std::mem::size_of::<(u32, Slice)>()) as u64,
            Relaxed,
        );
    }
}

/// Test helpers shared by the mechanisms' tests.
#[cfg(test)]
fn test_slices(n: usize, len: usize) -> Vec<Slice> {
    let mut w = effects::Writer::new(0);
    let mut r = w.reader();
    w.append(&vec![7u8; n * len]);
    w.publish();
    let all = r.next_slice().expect("published");
    (0..n)
        .map(|i| all.split_from(i * len).truncate(len))
        .collect()
}

/// Tests' small socket buffers (SO_RCVBUF / SO_SNDBUF of `n` bytes).
#[cfg(test)]
pub(crate) fn set_socket_buffer(fd: RawFd, opt: libc::c_int, n: libc::c_int) {
    // SAFETY: setsockopt reads an int we own for its duration.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (&n as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "setsockopt");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slices(n: usize, len: usize) -> Vec<Slice> {
        test_slices(n, len)
    }

    #[test]
    fn ids_wrap_past_u32_max_and_ranges_coalesce() {
        let mut t = Tracker::new(0, u32::MAX - 2);
        for s in slices(6, 10) {
            t.track(s);
        }
        let ids: Vec<u32> = t.in_flight.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, [u32::MAX - 2, u32::MAX - 1, u32::MAX, 0, 1, 2]);
        assert_eq!(t.bytes_in_flight, 60);
        // One completion covering the wrap: MAX-2 ..= 0.
        t.complete(u32::MAX - 2, 0, false);
        assert_eq!(t.in_flight.len(), 2);
        assert_eq!(t.bytes_in_flight, 20);
        t.complete(1, 2, true);
        assert!(t.in_flight.is_empty());
        assert_eq!(t.bytes_in_flight, 0);
        assert_eq!(t.copied, 2);
        assert_eq!((t.writes, t.bytes), (6, 60));
    }

    #[test]
    fn a_path_that_always_copies_ends_zero_copy_sends() {
        let mut t = Tracker::new(100, 0);
        for s in slices(PROBE as usize, 4) {
            t.track(s);
        }
        t.complete(0, PROBE as u32 - 2, true);
        assert_eq!(t.min_size(), 100, "not all copied yet");
        t.complete(PROBE as u32 - 1, PROBE as u32 - 1, true);
        assert_eq!(t.min_size(), usize::MAX);
        // One send the kernel really did without a copy keeps it on.
        let mut t = Tracker::new(100, 0);
        for s in slices(PROBE as usize, 4) {
            t.track(s);
        }
        t.complete(0, 0, false);
        t.complete(1, PROBE as u32 - 1, true);
        assert_eq!(t.min_size(), 100);
    }

    #[test]
    fn out_of_order_ranges_release_only_their_sends() {
        let mut t = Tracker::new(0, 100);
        for s in slices(5, 4) {
            t.track(s);
        }
        t.complete(102, 103, false);
        let ids: Vec<u32> = t.in_flight.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, [100, 101, 104]);
        t.complete(100, 101, false);
        t.complete(104, 104, false);
        assert!(t.in_flight.is_empty());
        assert_eq!(t.bytes_in_flight, 0);
    }

    #[test]
    fn the_backend_chooses_the_mechanism() {
        use std::os::fd::AsRawFd;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let sock = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let fd = sock.as_raw_fd();
        let epoll = ZeroCopy::start(fd, 10, false).expect("SO_ZEROCOPY");
        assert_eq!(epoll.mechanism(), "MSG_ZEROCOPY");
        assert_eq!(epoll.poll_fd(), None);
        let uring = ZeroCopy::start(fd, 10, true).expect("either mechanism");
        match SendZc::new(fd) {
            Ok(_) => {
                assert_eq!(uring.mechanism(), "IORING_OP_SEND_ZC");
                assert!(uring.poll_fd().is_some_and(|r| r != fd));
            }
            // A kernel without it: the fallback.
            Err(_) => assert_eq!(uring.mechanism(), "MSG_ZEROCOPY"),
        }
        assert_eq!(uring.min_size(), 10);
    }

    /// A replica that stops reading: a SEND_ZC waits for room; the feed
    /// gives up on it, the send is cancelled (as the drain does
    /// first), and once the connection is gone the drain sees every
    /// notification.
    #[test]
    fn a_send_that_finds_no_room_waits_and_drains_when_cancelled() {
        use std::os::fd::AsRawFd;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        set_socket_buffer(listener.as_raw_fd(), libc::SO_RCVBUF, 4096);
        let sock = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (never_reads, _) = listener.accept().unwrap();
        set_socket_buffer(sock.as_raw_fd(), libc::SO_SNDBUF, 4096);
        let Ok(ring) = SendZc::new(sock.as_raw_fd()) else {
            eprintln!("skipped: no IORING_OP_SEND_ZC here");
            return;
        };
        let mut z = ZeroCopy {
            tracker: Tracker::new(0, 0),
            via: Via::SendZc(Box::new(ring)),
        };
        let mut blocked_since: Option<Instant> = None;
        'sending: for s in slices(64, 16 << 10) {
            let mut at = 0;
            while at < s.len() {
                match z.try_send(&s.split_from(at)).unwrap() {
                    Sent::Bytes(n) => (at, blocked_since) = (at + n, None),
                    Sent::Blocked => {
                        let since = *blocked_since.get_or_insert_with(Instant::now);
                        if since.elapsed() > Duration::from_millis(200) {
                            break 'sending;
                        }
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
            }
        }
        assert!(blocked_since.is_some(), "1 MB fills the socket");
        let Via::SendZc(ring) = &mut z.via else {
            unreachable!()
        };
        assert!(ring.submitted(), "the send still waits for room");
        ring.cancel();
        let deadline = Instant::now() + Duration::from_secs(5);
        while ring.submitted() && Instant::now() < deadline {
            ring.wait(Duration::from_millis(10));
            ring.reap(&mut z.tracker);
        }
        assert!(!ring.submitted(), "the cancelled send never completed");
        // The replica's end goes away with unread bytes: a reset, and the
        // kernel lets go of every queued send.
        drop(never_reads);
        z.drain(Duration::from_secs(5));
        assert_eq!(z.in_flight(), 0);
        assert_eq!(z.tracker.bytes_in_flight, 0);
    }

    #[test]
    fn a_held_send_is_kept_but_not_counted() {
        let mut t = Tracker::new(0, 0);
        let s = slices(2, 8);
        t.track(s[0].clone());
        let held = t.hold(s[1].truncate(0));
        assert_eq!(held, 1);
        assert_eq!((t.writes, t.bytes, t.in_flight.len()), (1, 8, 2));
        t.complete(0, 1, false);
        assert!(t.in_flight.is_empty());
        assert_eq!(t.bytes_in_flight, 0);
    }
}
