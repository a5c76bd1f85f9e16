//! `MSG_ZEROCOPY` sends and their completions on the socket's error queue
//! (the mechanism with the epoll backend, and the fallback where
//! `IORING_OP_SEND_ZC` is missing).

use super::{Sent, Tracker};
use effects::Slice;
use std::os::fd::RawFd;
use std::time::Duration;

/// `linux/errqueue.h`: a notification about zero-copy sends (libc does
/// not name these two).
const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
/// The kernel could not send from the pages and copied them.
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;

/// A socket with SO_ZEROCOPY on. Its ids are the kernel's: a per-socket
/// counter of successful zero-copy sends, which the tracker's `next_id`
/// follows from 0.
pub(super) struct ErrQueue {
    fd: RawFd,
}

impl ErrQueue {
    /// Turn SO_ZEROCOPY on for `fd`; `None` if the kernel refuses.
    pub(super) fn enable(fd: RawFd) -> Option<ErrQueue> {
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
        (r == 0).then_some(ErrQueue { fd })
    }

    /// Send what of `rest` the socket takes now, zero-copy; a kernel
    /// short of option memory (ENOBUFS) gets an ordinary copying send.
    pub(super) fn try_send(&mut self, t: &mut Tracker, rest: &Slice) -> Result<Sent, String> {
        loop {
            // SAFETY: the bytes stay valid and unchanged until the kernel's
            // completion for this send: the tracker holds the block.
            let n = unsafe {
                libc::send(
                    self.fd,
                    rest.as_ptr().cast(),
                    rest.len(),
                    libc::MSG_ZEROCOPY | libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
                )
            };
            if n >= 0 {
                t.track(rest.truncate(n as usize));
                return Ok(Sent::Bytes(n as usize));
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => {}
                Some(libc::EAGAIN) => return Ok(Sent::Blocked),
                Some(libc::ENOBUFS) => {
                    return copy_send(self.fd, rest, libc::MSG_DONTWAIT).map(Sent::or_blocked);
                }
                _ => return Err(format!("write error: {e}")),
            }
        }
    }

    /// Read every completion waiting on the error queue.
    pub(super) fn reap(&mut self, t: &mut Tracker) {
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
                            t.complete(ee.ee_info, ee.ee_data, copied);
                        }
                    }
                    cm = libc::CMSG_NXTHDR(&msg, cm);
                }
            }
        }
    }

    /// Sleep until the error queue has something, or `timeout`.
    pub(super) fn wait(&self, timeout: Duration) {
        let mut p = libc::pollfd {
            fd: self.fd,
            events: 0,
            revents: 0,
        };
        // SAFETY: one pollfd we own; POLLERR is reported with no events
        // asked for.
        unsafe { libc::poll(&mut p, 1, timeout.as_millis() as i32) };
    }
}

/// An ordinary (copying) send of some of `bytes`: how many went (0 when
/// `flags` has MSG_DONTWAIT and the socket is full).
pub(crate) fn copy_send(fd: RawFd, bytes: &[u8], flags: libc::c_int) -> Result<usize, String> {
    loop {
        // SAFETY: an ordinary send of bytes we hold.
        let m = unsafe {
            libc::send(
                fd,
                bytes.as_ptr().cast(),
                bytes.len(),
                libc::MSG_NOSIGNAL | flags,
            )
        };
        if m >= 0 {
            return Ok(m as usize);
        }
        let e = std::io::Error::last_os_error();
        match e.kind() {
            std::io::ErrorKind::Interrupted => {}
            std::io::ErrorKind::WouldBlock if flags & libc::MSG_DONTWAIT != 0 => return Ok(0),
            _ => return Err(format!("write error: {e}")),
        }
    }
}
