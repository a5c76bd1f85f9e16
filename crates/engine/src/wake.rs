//! How another thread tells the thread running the engine that it has
//! work for it (a replication link with commands to apply): the IO layer
//! installs the ringer of whatever that thread sleeps on (the inline
//! loop's eventfd, the execution thread's futex), and installs it again
//! when the mode changes, so a holder of [`Wake`] never rings a stale one.

use std::sync::{Arc, Mutex};

type Ringer = Arc<dyn Fn() + Send + Sync>;

#[derive(Default)]
pub struct Wake {
    ringer: Mutex<Option<Ringer>>,
}

impl std::fmt::Debug for Wake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Wake")
    }
}

impl Wake {
    /// The IO layer: this is how the engine's thread is woken from now on.
    pub fn set(&self, ringer: Ringer) {
        *self.ringer.lock().unwrap_or_else(|e| e.into_inner()) = Some(ringer);
    }

    /// Wake the engine's thread (nothing when no IO layer runs it: the
    /// command tests poll).
    pub fn wake(&self) {
        let r = self
            .ringer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(r) = r {
            r();
        }
    }
}
