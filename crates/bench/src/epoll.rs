//! The epoll fallback (`--io-uring no`, or when io_uring is unavailable):
//! the same connection state machine, driven by `recv`/`send` on
//! non-blocking sockets. Level-triggered; EPOLLOUT is asked for only while
//! a send is short.

use crate::conn::{Ctx, State};
use crate::sys::now_ns;
use crate::worker::{Dirty, Loop};
use std::os::fd::RawFd;

struct Epoll(RawFd);

impl Epoll {
    fn new() -> Result<Self, String> {
        // SAFETY: plain syscall, no pointers.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(format!(
                "epoll_create1: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Epoll(fd))
    }

    fn ctl(&self, op: i32, fd: RawFd, events: u32, idx: usize) -> Result<(), String> {
        let mut ev = libc::epoll_event {
            events,
            u64: idx as u64,
        };
        // SAFETY: `ev` is a valid epoll_event for the duration of the call.
        if unsafe { libc::epoll_ctl(self.0, op, fd, &mut ev) } < 0 {
            return Err(format!("epoll_ctl: {}", std::io::Error::last_os_error()));
        }
        Ok(())
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        // SAFETY: closing the epoll fd we created.
        unsafe { libc::close(self.0) };
    }
}

const IN: u32 = libc::EPOLLIN as u32;
const OUT: u32 = libc::EPOLLOUT as u32;

pub fn run(lp: &mut Loop<'_>, ctx: &mut Ctx<'_>) -> Result<u64, String> {
    let ep = Epoll::new()?;
    let r = drive(&ep, lp, ctx);
    for c in &mut lp.conns {
        if c.fd >= 0 {
            // SAFETY: closing a socket we own.
            unsafe { libc::close(c.fd) };
            c.fd = -1;
        }
    }
    r
}

fn drive(ep: &Epoll, lp: &mut Loop<'_>, ctx: &mut Ctx<'_>) -> Result<u64, String> {
    let n = lp.conns.len();
    for (i, c) in lp.conns.iter().enumerate() {
        ep.ctl(libc::EPOLL_CTL_ADD, c.fd, IN, i)?;
    }
    let mut dirty = Dirty::all(n);
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; n.clamp(16, 1024)];
    let open_loop = ctx.interval.is_some();
    let mut now = now_ns();
    let mut end = now;
    loop {
        if open_loop {
            for i in 0..n {
                if lp.conns[i].fill(ctx, now) {
                    dirty.add(i);
                }
            }
        } else {
            for &i in &dirty.list {
                lp.conns[i].fill(ctx, now);
            }
        }
        let ts = now_ns();
        // A failed send may reconnect and re-add the connection: that one
        // waits for the next iteration.
        let mut list = std::mem::take(&mut dirty.list);
        for &i in &list {
            dirty.mark[i] = false;
            if let Err(e) = flush(ep, lp, i, ts) {
                fail(ep, lp, ctx, i, &e, now, &mut dirty)?;
            }
        }
        list.clear();
        if dirty.list.is_empty() {
            dirty.list = list;
        }
        if lp.finished(ctx, now) {
            return Ok(end);
        }

        let wake = lp.wake_at(ctx, now);
        let d = wake.saturating_sub(now_ns());
        let t = libc::timespec {
            tv_sec: (d / 1_000_000_000) as _,
            tv_nsec: (d % 1_000_000_000) as _,
        };
        // SAFETY: `events` is writable for `len` entries; `t` outlives the call.
        let got = unsafe {
            libc::epoll_pwait2(
                ep.0,
                events.as_mut_ptr(),
                events.len() as i32,
                &t,
                std::ptr::null(),
            )
        };
        if got < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(format!("epoll_pwait2: {e}"));
            }
        }
        now = now_ns();
        for ev in &events[..got.max(0) as usize] {
            let i = ev.u64 as usize;
            let flags = ev.events;
            if lp.conns[i].state != State::Open {
                continue;
            }
            if flags & OUT != 0
                && let Err(e) = flush(ep, lp, i, now)
            {
                fail(ep, lp, ctx, i, &e, now, &mut dirty)?;
                continue;
            }
            if flags & !OUT == 0 {
                continue;
            }
            let c = &mut lp.conns[i];
            let free = &mut c.rbuf[c.rend..];
            // SAFETY: `free` is writable for its length.
            let r = unsafe {
                libc::recv(
                    c.fd,
                    free.as_mut_ptr().cast(),
                    free.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if r > 0 {
                c.rend += r as usize;
                match c.on_bytes(ctx, now) {
                    Ok(k) if k > 0 => {
                        end = now;
                        dirty.add(i);
                    }
                    Ok(_) => {}
                    Err(e) => fail(ep, lp, ctx, i, &e, now, &mut dirty)?,
                }
            } else if r == 0 {
                fail(
                    ep,
                    lp,
                    ctx,
                    i,
                    "server closed the connection",
                    now,
                    &mut dirty,
                )?;
            } else {
                let e = std::io::Error::last_os_error();
                if !matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EINTR)) {
                    fail(ep, lp, ctx, i, &format!("recv: {e}"), now, &mut dirty)?;
                }
            }
        }
        if now >= lp.next_tick {
            for i in lp.tick(ctx, now) {
                let msg = format!(
                    "no reply for {:.1} s (--timeout)",
                    lp.sh.timeout_ns as f64 / 1e9
                );
                fail(ep, lp, ctx, i, &msg, now, &mut dirty)?;
            }
        }
    }
}

/// Send what is queued; ask for EPOLLOUT while the socket is full.
fn flush(ep: &Epoll, lp: &mut Loop<'_>, i: usize, ts: u64) -> Result<(), String> {
    let c = &mut lp.conns[i];
    if c.state != State::Open {
        return Ok(());
    }
    loop {
        if c.unsent().is_empty() {
            if !c.take_next_batch() {
                break;
            }
            c.stamp(ts);
        }
        let out = c.unsent();
        // SAFETY: `out` is readable for its length.
        let r = unsafe {
            libc::send(
                c.fd,
                out.as_ptr().cast(),
                out.len(),
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
        if r >= 0 {
            c.sent(r as usize);
            continue;
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => {
                if !c.send_armed {
                    ep.ctl(libc::EPOLL_CTL_MOD, c.fd, IN | OUT, i)?;
                    c.send_armed = true;
                }
                return Ok(());
            }
            _ => return Err(format!("send: {e}")),
        }
    }
    if c.send_armed {
        ep.ctl(libc::EPOLL_CTL_MOD, c.fd, IN, i)?;
        c.send_armed = false;
    }
    Ok(())
}

fn fail(
    ep: &Epoll,
    lp: &mut Loop<'_>,
    ctx: &mut Ctx<'_>,
    i: usize,
    reason: &str,
    now: u64,
    dirty: &mut Dirty,
) -> Result<(), String> {
    if lp.conns[i].state != State::Open {
        return Ok(());
    }
    lp.report_failure(ctx, i, reason);
    let c = &mut lp.conns[i];
    c.drop_in_flight(ctx);
    let _ = ep.ctl(libc::EPOLL_CTL_DEL, c.fd, 0, i);
    // SAFETY: closing a socket we own; epoll no longer watches it.
    unsafe { libc::close(c.fd) };
    c.fd = -1;
    c.send_armed = false;
    c.state = State::Dead;
    if lp.reconnect(ctx, i, now)? {
        let c = &lp.conns[i];
        ep.ctl(libc::EPOLL_CTL_ADD, c.fd, IN, i)?;
        dirty.add(i);
    }
    Ok(())
}
