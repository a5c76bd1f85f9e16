//! The network half of ringkv: listeners, the two event loops (io_uring and
//! epoll), the per-socket [`Connection`](connection) state machine and the
//! inline driver that alternates IO with the engine's batch execution on one
//! thread (Valkey's `io-threads 1`).
//!
//! ```text
//!            ┌──────────── serve() ─────────────┐
//!  bind ───► │ listener.rs   probe.rs (auto?)   │
//!            │      │             │             │
//!            │      ▼             ▼             │
//!            │  uring.rs  ─or─  epoll.rs        │  syscalls only
//!            │      │ accepted fd, bytes in,    │
//!            │      │ bytes sent, EOF           │
//!            │      ▼                           │
//!            │  driver.rs  ── Connection ×N ──  │  parse, one batch per
//!            │      │        (connection.rs)    │  iteration, events, cron
//!            └──────┼───────────────────────────┘
//!                   ▼
//!            engine::Engine  (execute_batch, drain_events, cron, ...)
//! ```
//!
//! What this crate owns: sockets and file descriptors, read and reply
//! buffers, the io_uring ring and its provided-buffer ring, the epoll set.
//! Every `unsafe` block of the server outside the hash table is here, each
//! one a syscall or the memory shared with the kernel.
//!
//! In threaded mode an IO thread also serves sockets other crates hand
//! it (`hosted`: a replica's stream), as a step and a descriptor, knowing
//! nothing of what they carry.
//!
//! What it must not touch: anything inside a command beyond its argument
//! spans (the engine decides what commands mean, which replies to send,
//! who gets closed and when to shut down), and process-wide state such as
//! signal handlers or the log configuration (the server binary owns those).

// Connections and exchanges are boxed where they live (driver slots,
// pools) because they also travel as boxes — through rings, between
// threads and modes — where a box moves as one pointer; a Vec of them
// keeps the boxes rather than unboxing and reboxing.
#![allow(clippy::vec_box)]

mod accept_budget;
mod busy_poll;
mod connection;
pub mod detach;
mod driver;
mod epoll;
mod exec_thread;
mod handoff;
pub mod hosted;
mod io_thread;
mod listener;
pub use listener::connect_from;
mod probe;
mod rebind;
mod uring;

use engine::{Engine, IoUringMode, log};
use std::io;
use std::sync::atomic::AtomicBool;

/// What one mode hands to the next when CONFIG SET io-threads goes
/// between 1 and more: the engine, the listening sockets and every open
/// connection (unread input, unsent output, parser and blocked state),
/// none of them closed on the way.
pub(crate) struct Handover {
    pub(crate) engine: Engine,
    pub(crate) listeners: Vec<listener::Listener>,
    pub(crate) conns: Vec<Box<connection::Connection>>,
}

/// Binds the listeners from `engine.config()` (`bind` with Valkey's `-`
/// optional prefix, `*` / `::*`, `port`, `tcp-backlog`), picks the event loop
/// from `io-uring auto|yes|no`, logs which one runs and "Ready to accept
/// connections tcp", then serves until SHUTDOWN or until `stop` is set (the
/// binary's SIGTERM/SIGINT handler; it is polled at least every 100 ms).
/// Pending replies are flushed (for a few seconds at most), every
/// connection is closed, and `Ok(())` is returned.
///
/// `io-threads` picks the mode (inline, or IO threads and an execution
/// thread), and CONFIG SET io-threads between 1 and more switches it live:
/// the running mode ends without closing anything and hands over
/// ([`Handover`]) to the other, in a loop, as often as it is asked.
///
/// Errors: a bind failure ("Failed listening on port N (tcp), aborting.",
/// the cause is logged), or `io-uring yes` on a system where io_uring
/// cannot be used (the reason is in the message).
pub fn serve(mut engine: Engine, stop: &'static AtomicBool) -> io::Result<()> {
    let listeners = listener::bind_all(engine.config())?;
    rebind::install(&mut engine, &listeners);
    let port = listener::tcp_port(&listeners).unwrap_or(engine.config().port);
    engine.net_stats_mut().tcp_port = port;
    let mode = engine.config().io_uring;
    let batch_wait_us = engine.config().io_uring_batch_wait_us;

    let ring = match mode {
        IoUringMode::No => None,
        IoUringMode::Yes => match uring::Uring::new(&listeners, batch_wait_us) {
            Ok(r) => Some(r),
            Err(reason) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("io-uring is set to yes but io_uring cannot be used: {reason}"),
                ));
            }
        },
        IoUringMode::Auto => match uring::Uring::new(&listeners, batch_wait_us) {
            Ok(r) => Some(r),
            Err(reason) => {
                log::notice(&format!(
                    "io_uring unavailable: {reason}; falling back to epoll"
                ));
                None
            }
        },
    };
    engine.net_stats_mut().backend = if ring.is_some() { "io_uring" } else { "epoll" };
    match &ring {
        Some(ring) => log::notice(&format!("Event loop: io_uring ({})", ring.describe())),
        None => log::notice("Event loop: epoll (level-triggered)"),
    }
    // Every later loop, in either mode, uses the same backend.
    let backend = match ring {
        Some(_) => exec_thread::Backend::Uring { batch_wait_us },
        None => exec_thread::Backend::Epoll,
    };
    // The probe's ring serves the first inline loop; each IO thread builds
    // its own (SINGLE_ISSUER ties a ring to the thread that made it).
    let mut ring = ring;
    let mut h = Handover {
        engine,
        listeners,
        conns: Vec::new(),
    };
    let mut first = true;
    loop {
        let next = if h.engine.config().io_threads > 1 {
            drop(ring.take());
            exec_thread::serve(h, stop, backend, first)?
        } else {
            serve_inline(h, stop, backend, ring.take(), first)?
        };
        first = false;
        match next {
            Some(next) => h = next,
            None => return Ok(()),
        }
    }
}

/// Inline mode on this thread until shutdown (`None`) or until CONFIG SET
/// io-threads asks for more threads (its sockets handed over, all open).
fn serve_inline(
    h: Handover,
    stop: &'static AtomicBool,
    backend: exec_thread::Backend,
    ring: Option<uring::Uring>,
    first: bool,
) -> io::Result<Option<Handover>> {
    let Handover {
        mut engine,
        listeners,
        conns,
    } = h;
    if first {
        engine.server_ready();
    }
    let mut driver = driver::Driver::new(engine, stop);
    driver.take_in(conns);
    let ready_lines = listener::ready_lines(&listeners);
    let ready = || {
        if first {
            ready_lines.iter().for_each(|line| log::notice(line));
        } else {
            log::notice("io-threads set to 1: this thread serves every connection");
        }
    };
    let listeners = match backend {
        exec_thread::Backend::Uring { batch_wait_us } => {
            let ring = match ring {
                Some(r) => r,
                None => uring::Uring::new(&listeners, batch_wait_us)
                    .map_err(|reason| io::Error::other(format!("io_uring: {reason}")))?,
            };
            ready();
            ring.run(&mut driver, listeners)?
        }
        exec_thread::Backend::Epoll => {
            let ep = epoll::Epoll::new(&listeners)?;
            ready();
            ep.run(&mut driver, listeners)?
        }
    };
    if !driver.switching() {
        return Ok(None);
    }
    let (engine, conns) = driver.hand_off();
    Ok(Some(Handover {
        engine,
        listeners,
        conns,
    }))
}
