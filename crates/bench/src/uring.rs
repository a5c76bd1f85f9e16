//! The io_uring event loop: one ring per worker thread.
//!
//! Every connection keeps one `RECV` armed into its own buffer. Each loop
//! iteration builds the new requests, queues one `SEND` per connection that
//! has bytes to go, and hands all of it to the kernel with a single
//! `io_uring_enter` that also waits for the next completions. No SQPOLL and
//! no forced async: both cost CPU this workload does not get back.
//! The ring is `SINGLE_ISSUER | DEFER_TASKRUN` when the kernel has them, so
//! completion work runs only when this thread asks for it.

use crate::conn::{Conn, Ctx, State};
use crate::sys::now_ns;
use crate::worker::{Dirty, Loop};
use io_uring::{IoUring, opcode, squeue, types};

const RECV: u64 = 0;
const SEND: u64 = 1;

fn user_data(generation: u32, idx: usize, op: u64) -> u64 {
    (u64::from(generation) << 32) | ((idx as u64) << 1) | op
}

/// A ring sized for `conns` connections (a recv and a send each).
pub fn new_ring(conns: usize) -> Result<IoUring, String> {
    let entries = (conns * 2 + 8).next_power_of_two().clamp(8, 32_768) as u32;
    let mut b = IoUring::builder();
    b.setup_single_issuer()
        .setup_defer_taskrun()
        .setup_cqsize(entries * 2);
    match b.build(entries) {
        Ok(r) => Ok(r),
        // Kernels before 6.1 lack DEFER_TASKRUN; a plain ring still works.
        Err(_) => IoUring::builder()
            .setup_cqsize(entries * 2)
            .build(entries)
            .map_err(|e| format!("io_uring setup failed: {e}")),
    }
}

/// Whether this process may use io_uring at all (kernel support,
/// `kernel.io_uring_disabled`, seccomp).
pub fn probe() -> Result<(), String> {
    IoUring::new(8)
        .map(|_| ())
        .map_err(|e| format!("io_uring unavailable ({e})"))
}

fn push(ring: &mut IoUring, e: &squeue::Entry) -> Result<(), String> {
    // SAFETY: every entry points into a connection's rbuf/out_busy, which
    // are neither moved nor resized while the operation is armed (the
    // armed flags guard that), and `drain` waits for all armed operations
    // (or leaks the buffers) before they are dropped.
    unsafe {
        if ring.submission().push(e).is_ok() {
            return Ok(());
        }
        ring.submit().map_err(|e| format!("io_uring submit: {e}"))?;
        ring.submission()
            .push(e)
            .map_err(|_| "io_uring submission queue full".to_string())
    }
}

fn arm_recv(ring: &mut IoUring, c: &mut Conn, i: usize) -> Result<(), String> {
    let free = &mut c.rbuf[c.rend..];
    let e = opcode::Recv::new(types::Fd(c.fd), free.as_mut_ptr(), free.len() as u32)
        .build()
        .user_data(user_data(c.generation, i, RECV));
    push(ring, &e)?;
    c.recv_armed = true;
    Ok(())
}

fn arm_send(ring: &mut IoUring, c: &mut Conn, i: usize) -> Result<(), String> {
    let out = c.unsent();
    let e = opcode::Send::new(types::Fd(c.fd), out.as_ptr(), out.len() as u32)
        .flags(libc::MSG_NOSIGNAL)
        .build()
        .user_data(user_data(c.generation, i, SEND));
    push(ring, &e)?;
    c.send_armed = true;
    Ok(())
}

/// Run until this worker's requests are answered; returns the time the
/// last reply was handled.
pub fn run(mut ring: IoUring, lp: &mut Loop<'_>, ctx: &mut Ctx<'_>) -> Result<u64, String> {
    let r = drive(&mut ring, lp, ctx);
    drain(&mut ring, lp);
    r
}

fn drive(ring: &mut IoUring, lp: &mut Loop<'_>, ctx: &mut Ctx<'_>) -> Result<u64, String> {
    let n = lp.conns.len();
    let mut dirty = Dirty::all(n);
    for i in 0..n {
        arm_recv(ring, &mut lp.conns[i], i)?;
    }
    let open_loop = ctx.interval.is_some();
    let mut cqes: Vec<(u64, i32)> = Vec::with_capacity(2 * n + 8);
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
        // The send time of everything in this batch.
        let ts = now_ns();
        for &i in &dirty.list {
            dirty.mark[i] = false;
            let c = &mut lp.conns[i];
            if c.state == State::Open && !c.send_armed && c.take_next_batch() {
                c.stamp(ts);
                arm_send(ring, c, i)?;
            }
        }
        dirty.list.clear();
        if lp.finished(ctx, now) {
            return Ok(end);
        }

        let wake = lp.wake_at(ctx, now);
        let cur = now_ns();
        // Always enter with GETEVENTS (want 1, possibly a zero timeout):
        // under DEFER_TASKRUN that is what runs the completion work, so a
        // plain submit could spin without ever seeing a reply.
        let d = wake.saturating_sub(cur);
        let t = types::Timespec::new()
            .sec(d / 1_000_000_000)
            .nsec((d % 1_000_000_000) as u32);
        let r = ring
            .submitter()
            .submit_with_args(1, &types::SubmitArgs::new().timespec(&t));
        if let Err(e) = r {
            match e.raw_os_error() {
                Some(libc::ETIME | libc::EINTR | libc::EBUSY) => {}
                _ => return Err(format!("io_uring_enter: {e}")),
            }
        }
        now = now_ns();

        cqes.clear();
        cqes.extend(ring.completion().map(|c| (c.user_data(), c.result())));
        for &(ud, res) in &cqes {
            let i = ((ud >> 1) & 0x7FFF_FFFF) as usize;
            let generation = (ud >> 32) as u32;
            let c = &mut lp.conns[i];
            if ud & 1 == RECV {
                c.recv_armed = false;
            } else {
                c.send_armed = false;
            }
            if c.generation != generation || c.state != State::Open {
                if c.state == State::Closing && !c.recv_armed && !c.send_armed {
                    finish_close(ring, lp, ctx, i, now, &mut dirty)?;
                }
                continue;
            }
            if ud & 1 == RECV {
                if res > 0 {
                    c.rend += res as usize;
                    match c.on_bytes(ctx, now) {
                        Ok(k) => {
                            if k > 0 {
                                end = now;
                                dirty.add(i);
                            }
                            arm_recv(ring, c, i)?;
                        }
                        Err(e) => fail(ring, lp, ctx, i, &e, now, &mut dirty)?,
                    }
                } else if res == 0 {
                    fail(
                        ring,
                        lp,
                        ctx,
                        i,
                        "server closed the connection",
                        now,
                        &mut dirty,
                    )?;
                } else if matches!(-res, libc::EINTR | libc::EAGAIN) {
                    arm_recv(ring, c, i)?;
                } else {
                    let e = std::io::Error::from_raw_os_error(-res);
                    fail(ring, lp, ctx, i, &format!("recv: {e}"), now, &mut dirty)?;
                }
            } else if res >= 0 {
                c.sent(res as usize);
                if !c.unsent().is_empty() {
                    arm_send(ring, c, i)?;
                } else {
                    // Requests built while this send was in flight go next.
                    dirty.add(i);
                }
            } else {
                let e = std::io::Error::from_raw_os_error(-res);
                fail(ring, lp, ctx, i, &format!("send: {e}"), now, &mut dirty)?;
            }
        }
        if now >= lp.next_tick {
            for i in lp.tick(ctx, now) {
                let msg = format!(
                    "no reply for {:.1} s (--timeout)",
                    lp.sh.timeout_ns as f64 / 1e9
                );
                fail(ring, lp, ctx, i, &msg, now, &mut dirty)?;
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn fail(
    ring: &mut IoUring,
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
    c.state = State::Closing;
    // SAFETY: shutdown on a socket we own; it makes armed operations complete.
    unsafe { libc::shutdown(c.fd, libc::SHUT_RDWR) };
    if !c.recv_armed && !c.send_armed {
        finish_close(ring, lp, ctx, i, now, dirty)?;
    }
    Ok(())
}

/// The kernel is done with the old socket's buffers: close it and reconnect.
fn finish_close(
    ring: &mut IoUring,
    lp: &mut Loop<'_>,
    ctx: &mut Ctx<'_>,
    i: usize,
    now: u64,
    dirty: &mut Dirty,
) -> Result<(), String> {
    let c = &mut lp.conns[i];
    // SAFETY: closing a socket we own with no operation armed on it.
    unsafe { libc::close(c.fd) };
    c.fd = -1;
    c.state = State::Dead;
    if lp.reconnect(ctx, i, now)? {
        arm_recv(ring, &mut lp.conns[i], i)?;
        dirty.add(i);
    }
    Ok(())
}

/// Wake every armed operation (shutdown) and wait for the kernel to give
/// the buffers back, then close the sockets. If the kernel does not answer
/// in time the buffers are leaked rather than freed under it.
fn drain(ring: &mut IoUring, lp: &mut Loop<'_>) {
    for c in &lp.conns {
        if c.fd >= 0 {
            // SAFETY: shutdown on a socket we own.
            unsafe { libc::shutdown(c.fd, libc::SHUT_RDWR) };
        }
    }
    let give_up = now_ns() + 2_000_000_000;
    while lp.conns.iter().any(|c| c.recv_armed || c.send_armed) && now_ns() < give_up {
        let t = types::Timespec::new().nsec(100_000_000);
        let _ = ring
            .submitter()
            .submit_with_args(1, &types::SubmitArgs::new().timespec(&t));
        for cqe in ring.completion() {
            let i = ((cqe.user_data() >> 1) & 0x7FFF_FFFF) as usize;
            if cqe.user_data() & 1 == RECV {
                lp.conns[i].recv_armed = false;
            } else {
                lp.conns[i].send_armed = false;
            }
        }
    }
    for c in &mut lp.conns {
        if c.fd >= 0 {
            // SAFETY: closing a socket we own.
            unsafe { libc::close(c.fd) };
            c.fd = -1;
        }
    }
    if lp.conns.iter().any(|c| c.recv_armed || c.send_armed) {
        std::mem::forget(std::mem::take(&mut lp.conns));
    }
}
