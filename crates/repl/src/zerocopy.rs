//! Zero-copy sends of the stream to one replica (seed 003): writes of at
//! least `tcp-zerocopy-min-write-size` bytes go out with `MSG_ZEROCOPY`,
//! so the kernel sends from the effects block itself instead of copying
//! it into the socket buffer.
//!
//! The price is that the bytes must not change or be freed until the
//! kernel says it is done with them. Published stream bytes never change;
//! the [`Tracker`] keeps them alive by holding each send's
//! [`effects::Slice`] (a reference on its block) until its completion
//! comes back on the socket's error queue:
//!
//! ```text
//!  send(MSG_ZEROCOPY) ─► id n (a per-socket u32 counter, wrapping)
//!                         tracker: [(n, slice) ...]
//!  error queue ◄─ SO_EE_ORIGIN_ZEROCOPY [lo, hi]: every id in the range is
//!                 done (ranges coalesce; ids wrap past u32::MAX);
//!                 SO_EE_CODE_ZEROCOPY_COPIED: the kernel copied after all
//! ```
//!
//! A socket with sends in flight is closed only after the tracker has
//! drained (or a deadline passed): closing earlier would make the kernel
//! drop the notifications, and the slices would have to be kept forever
//! or freed while possibly still read.

use effects::Slice;
use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// `linux/errqueue.h`: a notification about zero-copy sends (libc does
/// not name these two).
const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
/// The kernel could not send from the pages and copied them.
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;

/// Completions looked at before deciding that the kernel copies anyway.
const PROBE: u64 = 32;

/// The in-flight zero-copy sends of one socket.
pub struct Tracker {
    fd: RawFd,
    min: usize,
    /// The id the kernel gives the next successful zero-copy send.
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
    /// Turn SO_ZEROCOPY on for `fd`; `None` if the kernel refuses.
    pub fn enable(fd: RawFd, min: usize) -> Option<Tracker> {
        let one: libc::c_int = 1;
        // SAFETY: setsockopt reads an int we own for its duration.
        let r = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_ZEROCOPY,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        (r == 0).then(|| Tracker::new(fd, min, 0))
    }

    fn new(fd: RawFd, min: usize, first_id: u32) -> Tracker {
        Tracker {
            fd,
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

    /// Sends of at least this many bytes go zero-copy (none, once the
    /// tracker gave up on this socket).
    pub fn min_size(&self) -> usize {
        if self.gave_up { usize::MAX } else { self.min }
    }

    /// Send all of `slice`, zero-copy; a kernel short of option memory
    /// (ENOBUFS) gets an ordinary copying send instead.
    pub fn send(&mut self, slice: &Slice) -> Result<(), String> {
        let mut at = 0;
        while at < slice.len() {
            let rest = &slice[at..];
            // SAFETY: the bytes stay valid and unchanged until the kernel's
            // completion for this send: `self.in_flight` holds the block.
            let n = unsafe {
                libc::send(
                    self.fd,
                    rest.as_ptr().cast(),
                    rest.len(),
                    libc::MSG_ZEROCOPY | libc::MSG_NOSIGNAL,
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::ENOBUFS) => {
                        // SAFETY: an ordinary send of bytes we hold.
                        let m = unsafe {
                            libc::send(
                                self.fd,
                                rest.as_ptr().cast(),
                                rest.len(),
                                libc::MSG_NOSIGNAL,
                            )
                        };
                        if m < 0 {
                            return Err(format!(
                                "write error: {}",
                                std::io::Error::last_os_error()
                            ));
                        }
                        at += m as usize;
                        continue;
                    }
                    _ => return Err(format!("write error: {e}")),
                }
            }
            let n = n as usize;
            self.track(slice.split_from(at).truncate(n));
            at += n;
        }
        Ok(())
    }

    /// A send the kernel accepted: it has the next id.
    fn track(&mut self, sent: Slice) {
        self.writes += 1;
        self.bytes += sent.len() as u64;
        self.bytes_in_flight += sent.len() as u64;
        self.in_flight.push_back((self.next_id, sent));
        self.next_id = self.next_id.wrapping_add(1);
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

    /// Read every completion waiting on the error queue.
    pub fn reap(&mut self) {
        loop {
            let mut control = [0u64; 16];
            // SAFETY: an all-zero msghdr is valid; we point it at our own
            // control buffer for the duration of the call.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&control) as _;
            // SAFETY: recvmsg fills `msg` and `control`, which we own.
            let r = unsafe {
                libc::recvmsg(self.fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT)
            };
            if r < 0 {
                return;
            }
            // SAFETY: the CMSG macros walk the control buffer recvmsg
            // filled, within `msg_controllen`.
            unsafe {
                let mut cm = libc::CMSG_FIRSTHDR(&msg);
                while !cm.is_null() {
                    let level = (*cm).cmsg_level;
                    let ty = (*cm).cmsg_type;
                    let ip = level == libc::SOL_IP && ty == libc::IP_RECVERR;
                    let ip6 = level == libc::SOL_IPV6 && ty == libc::IPV6_RECVERR;
                    if ip || ip6 {
                        let ee = libc::CMSG_DATA(cm) as *const libc::sock_extended_err;
                        let ee = std::ptr::read_unaligned(ee);
                        if ee.ee_origin == SO_EE_ORIGIN_ZEROCOPY && ee.ee_errno == 0 {
                            let copied = ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED != 0;
                            self.complete(ee.ee_info, ee.ee_data, copied);
                        }
                    }
                    cm = libc::CMSG_NXTHDR(&msg, cm);
                }
            }
        }
    }

    /// Before the socket closes: wait (up to `limit`) for every send in
    /// flight to complete.
    pub fn drain(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while !self.in_flight.is_empty() && Instant::now() < deadline {
            let mut p = libc::pollfd {
                fd: self.fd,
                events: 0,
                revents: 0,
            };
            // SAFETY: one pollfd we own; POLLERR is reported with no
            // events asked for.
            unsafe { libc::poll(&mut p, 1, 10) };
            self.reap();
        }
        if !self.in_flight.is_empty() {
            // The kernel may still read these blocks: keep them forever
            // rather than free memory it could touch.
            engine::log::warning(&format!(
                "replica feed: {} zero-copy sends still in flight at close; their buffers are leaked",
                self.in_flight.len()
            ));
            std::mem::forget(std::mem::take(&mut self.in_flight));
        }
    }

    /// Copy the counters where INFO reads them.
    pub(crate) fn publish(&self, shared: &crate::feed::SharedCounters) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn slices(n: usize, len: usize) -> Vec<Slice> {
        let mut w = effects::Writer::new(0);
        let mut r = w.reader();
        w.append(&vec![7u8; n * len]);
        w.publish();
        let all = r.next_slice().expect("published");
        (0..n)
            .map(|i| all.split_from(i * len).truncate(len))
            .collect()
    }

    #[test]
    fn ids_wrap_past_u32_max_and_ranges_coalesce() {
        let mut t = Tracker::new(-1, 0, u32::MAX - 2);
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
        let mut t = Tracker::new(-1, 100, 0);
        for s in slices(PROBE as usize, 4) {
            t.track(s);
        }
        t.complete(0, PROBE as u32 - 2, true);
        assert_eq!(t.min_size(), 100, "not all copied yet");
        t.complete(PROBE as u32 - 1, PROBE as u32 - 1, true);
        assert_eq!(t.min_size(), usize::MAX);
        // One send the kernel really did without a copy keeps it on.
        let mut t = Tracker::new(-1, 100, 0);
        for s in slices(PROBE as usize, 4) {
            t.track(s);
        }
        t.complete(0, 0, false);
        t.complete(1, PROBE as u32 - 1, true);
        assert_eq!(t.min_size(), 100);
    }

    #[test]
    fn out_of_order_ranges_release_only_their_sends() {
        let mut t = Tracker::new(-1, 0, 100);
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
}
