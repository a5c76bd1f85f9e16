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
//! What it must not touch: anything inside a command beyond its argument
//! spans (the engine decides what commands mean, which replies to send,
//! who gets closed and when to shut down), and process-wide state such as
//! signal handlers or the log configuration (the server binary owns those).

mod connection;
mod driver;
mod epoll;
mod exec_thread;
mod handoff;
mod io_thread;
mod listener;
mod probe;
mod uring;

use engine::{Engine, IoUringMode, log};
use std::io;
use std::sync::atomic::AtomicBool;

/// Binds the listeners from `engine.config()` (`bind` with Valkey's `-`
/// optional prefix, `*` / `::*`, `port`, `tcp-backlog`), picks the event loop
/// from `io-uring auto|yes|no`, logs which one runs and "Ready to accept
/// connections tcp", then serves until SHUTDOWN or until `stop` is set (the
/// binary's SIGTERM/SIGINT handler; it is polled at least every 100 ms).
/// Pending replies are flushed (for a few seconds at most), every
/// connection is closed, and `Ok(())` is returned.
///
/// Errors: a bind failure ("Failed listening on port N (tcp), aborting.",
/// the cause is logged), or `io-uring yes` on a system where io_uring
/// cannot be used (the reason is in the message).
pub fn serve(mut engine: Engine, stop: &'static AtomicBool) -> io::Result<()> {
    let listeners = listener::bind_all(engine.config())?;
    let port = listeners
        .first()
        .map_or(engine.config().port, |l| l.addr.port());
    engine.net_stats_mut().tcp_port = port;
    let mode = engine.config().io_uring;

    let ring = match mode {
        IoUringMode::No => None,
        IoUringMode::Yes => {
            match uring::Uring::new(&listeners, engine.config().io_uring_batch_wait_us) {
                Ok(r) => Some(r),
                Err(reason) => {
                    return Err(io::Error::new(
                        io::ErrorKind::Unsupported,
                        format!("io-uring is set to yes but io_uring cannot be used: {reason}"),
                    ));
                }
            }
        }
        IoUringMode::Auto => {
            match uring::Uring::new(&listeners, engine.config().io_uring_batch_wait_us) {
                Ok(r) => Some(r),
                Err(reason) => {
                    log::notice(&format!(
                        "io_uring unavailable: {reason}; falling back to epoll"
                    ));
                    None
                }
            }
        }
    };
    engine.net_stats_mut().backend = if ring.is_some() { "io_uring" } else { "epoll" };
    match &ring {
        Some(ring) => log::notice(&format!("Event loop: io_uring ({})", ring.describe())),
        None => log::notice("Event loop: epoll (level-triggered)"),
    }
    if engine.config().io_threads > 1 {
        // Each IO thread builds its own ring (SINGLE_ISSUER ties a ring
        // to the thread that made it): this one only proved it works.
        let backend = match ring {
            Some(_) => exec_thread::Backend::Uring {
                batch_wait_us: engine.config().io_uring_batch_wait_us,
            },
            None => exec_thread::Backend::Epoll,
        };
        drop(ring);
        return exec_thread::serve(engine, stop, listeners, backend);
    }
    let mut driver = driver::Driver::new(engine, stop);
    match ring {
        Some(ring) => {
            log::notice("Ready to accept connections tcp");
            ring.run(&mut driver, listeners)
        }
        None => {
            let ep = epoll::Epoll::new(&listeners)?;
            log::notice("Ready to accept connections tcp");
            ep.run(&mut driver, listeners)
        }
    }
}
