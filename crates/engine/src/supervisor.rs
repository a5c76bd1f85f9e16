//! Status for a service manager (`supervised systemd`): the moments Valkey
//! reports with sd_notify — ready, a replica's sync done, stopping, saving
//! at shutdown and failing to — named here, where the engine knows them.
//!
//! The engine does no IO for this: the binary, which owns the notification
//! socket, installs the sender once at start-up ([`install`]); without one
//! (tests, `supervised no`) every call is a no-op. Process-wide, like the
//! logger, because a server has one supervisor.

use std::sync::OnceLock;

struct Supervisor {
    /// INFO `process_supervised`: `systemd` or `upstart`.
    mode: &'static str,
    /// Sends one sd_notify message (`KEY=value\n`); `None` under upstart,
    /// which learns of readiness from the process stopping itself once.
    notify: Option<fn(&str)>,
}

static SUPERVISOR: OnceLock<Supervisor> = OnceLock::new();

/// Supervised by `mode`, told of state changes through `notify`.
pub fn install(mode: &'static str, notify: Option<fn(&str)>) {
    let _ = SUPERVISOR.set(Supervisor { mode, notify });
}

/// INFO `process_supervised`.
pub fn mode() -> &'static str {
    SUPERVISOR.get().map_or("no", |s| s.mode)
}

fn notify(msg: &str) {
    if let Some(send) = SUPERVISOR.get().and_then(|s| s.notify) {
        send(msg);
    }
}

/// Listening and loaded. A replica says it waits for its sync.
pub fn ready(replica: bool) {
    if replica {
        notify(
            "STATUS=Ready to accept connections in read-only mode. Waiting for MASTER <-> REPLICA sync\n",
        );
    } else {
        notify("STATUS=Ready to accept connections\n");
    }
    notify("READY=1\n");
}

/// A replica's full sync has loaded.
pub fn sync_finished() {
    notify(
        "STATUS=PRIMARY <-> REPLICA sync: Finished with success. Ready to accept connections in read-write mode.\n",
    );
}

/// A replica's primary continued its stream (PSYNC +CONTINUE).
pub fn partial_sync_accepted() {
    notify(
        "STATUS=PRIMARY <-> REPLICA sync: Partial Resynchronization accepted. Ready to accept connections in read-write mode.\n",
    );
}

/// Shutting down (SHUTDOWN, SIGTERM).
pub fn stopping() {
    notify("STOPPING=1\n");
}

pub fn saving_final_snapshot() {
    notify("STATUS=Saving the final RDB snapshot\n");
}

/// The final save failed and the server stays up.
pub fn save_failed_staying_up() {
    notify("STATUS=Error trying to save the DB, can't exit.\n");
}
