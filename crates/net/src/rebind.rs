//! CONFIG SET `port` / `bind` at runtime.
//!
//! The engine asks through the hook [`install`] gives it, on the thread
//! that runs commands: the new TCP listeners are bound there and then, so
//! that CONFIG SET can answer Valkey's error when an address is taken
//! (the old listeners untouched). An address the server already listens
//! on is shared by a dup of its descriptor, not bound again. The bound set
//! waits here until the loop that accepts — the one holding listeners:
//! the inline loop, or IO thread 1 — takes it at the end of an iteration
//! ([`swap`]): the unix listener stays, the old TCP listeners close. A
//! connection made to a new address before the swap waits in the socket's
//! backlog; IO thread 1 wakes at least every 100 ms. The loop that was
//! started with the listeners stays the one that takes them, also after
//! `port 0` (without `unixsocket`) left it none for a while. Process-wide,
//! as a process has one server.

use crate::listener::{self, ListenAddr, Listener};
use engine::{Config, Engine};
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

struct State {
    /// The TCP listeners the accepting loop holds: address, descriptor.
    current: Vec<(SocketAddr, RawFd)>,
    /// Bound for the latest CONFIG SET, not taken by the loop yet.
    pending: Option<Vec<Listener>>,
}

static STATE: Mutex<State> = Mutex::new(State {
    current: Vec::new(),
    pending: None,
});

/// `pending` is set: the loop's cheap check each iteration.
static PENDING: AtomicBool = AtomicBool::new(false);

fn lock() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

fn tcp_of(listeners: &[Listener]) -> Vec<(SocketAddr, RawFd)> {
    listeners
        .iter()
        .filter_map(|l| match l.addr {
            ListenAddr::Tcp(a) => Some((a, l.fd)),
            ListenAddr::Unix(_) => None,
        })
        .collect()
}

/// The server listens on `listeners`; CONFIG SET `port` / `bind` of
/// `engine` rebind through here from now on.
pub(crate) fn install(engine: &mut Engine, listeners: &[Listener]) {
    lock().current = tcp_of(listeners);
    engine.set_listen(listen);
}

/// The engine's hook: bind for `cfg`; the accepting loop swaps them in.
fn listen(cfg: &Config) -> Result<(), String> {
    let mut st = lock();
    // A set bound before and not taken yet is what listens next.
    let base = match &st.pending {
        Some(p) => tcp_of(p),
        None => st.current.clone(),
    };
    let new = listener::rebind_tcp(cfg, &base).map_err(|e| e.to_string())?;
    st.pending = Some(new);
    PENDING.store(true, Ordering::Release);
    Ok(())
}

/// Whether a new set waits (the uring loop first cancels its accepts).
pub(crate) fn pending() -> bool {
    PENDING.load(Ordering::Relaxed)
}

/// Put the waiting TCP listeners in place of those in `listeners` (which
/// close; the unix one stays, after them), if a set waits. Call only
/// while no accept is in flight on `listeners`.
pub(crate) fn swap(listeners: &mut Vec<Listener>) {
    if !PENDING.swap(false, Ordering::Acquire) {
        return;
    }
    let mut st = lock();
    let Some(mut new) = st.pending.take() else {
        return;
    };
    listeners.retain(|l| matches!(l.addr, ListenAddr::Unix(_)));
    new.append(listeners);
    *listeners = new;
    st.current = tcp_of(listeners);
}
