//! After a command ran — from a client, inside EXEC, or from a script —
//! what else sees it: the slow log, MONITOR, and client tracking (the
//! keys a read-only command read). One place, so the three ways a command
//! runs cannot drift apart.

use crate::batch::ArgvRef;
use crate::command::flags::{ADMIN, SKIP_MONITOR};
use crate::monitor::Origin;
use crate::pubsub::Me;
use crate::server::Server;
use crate::session::Session;

/// `i` is the command's table entry; `slow_us` what it took when it was
/// timed on its own (`None`: not timed, or logged elsewhere); `me` the
/// reply of the client running it, for a monitor watching itself.
#[allow(clippy::too_many_arguments)]
pub(crate) fn after_call(
    srv: &mut Server,
    sess: &Session,
    i: usize,
    argv: ArgvRef<'_>,
    from_script: bool,
    slow_us: Option<u64>,
    me: Option<Me<'_, '_>>,
    now_ms: i64,
) {
    if let Some(us) = slow_us {
        crate::log_if_slow(srv, sess, i, argv, us, now_ms);
    }
    let e = &crate::table::table().entries[i];
    if !srv.monitors.is_empty() && e.spec.flags & (SKIP_MONITOR | ADMIN) == 0 {
        let origin = if from_script {
            Origin::Script
        } else {
            Origin::Client(sess)
        };
        crate::monitor::feed(srv, me, origin, sess.db, e.fullname.as_str(), argv);
    }
    if sess.tracking.is_some() {
        crate::tracking::remember(srv, sess, i, argv);
    }
}
