//! Sockets that leave the event loop's connections for good: a replica's
//! connection, once PSYNC has made it one, goes to its feed thread
//! (`ringkv-repl`, which the server binary installs here; in threaded mode
//! everything sent to the replica comes back to an IO thread as a
//! [`crate::hosted`] member). The event loops only let go of
//! the socket (no operation in flight, out of their poll sets) and hand
//! over what the connection still held.

use engine::ClientId;
use std::os::fd::OwnedFd;
use std::sync::OnceLock;

/// A connection's socket and the bytes it had not dealt with yet.
#[derive(Debug)]
pub struct Detached {
    pub fd: OwnedFd,
    /// Replies not sent yet: they go out first.
    pub unsent: Vec<u8>,
    /// Input read and not parsed yet.
    pub unparsed: Vec<u8>,
}

type Hook = Box<dyn Fn(ClientId, Detached) + Send + Sync>;

static HOOK: OnceLock<Hook> = OnceLock::new();

/// Where detached sockets go (set once, before serving).
pub fn set_detach_hook(hook: Hook) {
    let _ = HOOK.set(hook);
}

/// Give `client`'s socket away; without a hook it is closed.
pub(crate) fn hand_out(client: ClientId, d: Detached) {
    if let Some(h) = HOOK.get() {
        h(client, d);
    }
}
