//! Whether keys past their time are expired, and who sees them.
//!
//! Three things stop expiry (active and lazy) on this server: being a
//! replica (the primary's DELs expire keys), a pause (CLIENT PAUSE WRITE,
//! FAILOVER) and Valkey 8.1's `import-mode` on a primary (the import
//! source's DELs expire keys). While expiry is stopped, a key past its time
//! stays in memory and is hidden from ordinary clients, which see it as
//! missing — but not from the client that will expire it: a replica's
//! primary link and, in import mode, a client that said CLIENT
//! IMPORT-SOURCE ON see every key as live (Valkey's `expireIfNeeded`
//! returning KEY_VALID for them). The store holds the state per database
//! (`Db::expiry_paused`, `Db::expiry_hidden`); this module is the one
//! place that computes it.

use crate::server::Server;
use crate::session::Session;

/// Is expiry stopped, for any of the three reasons?
pub fn stopped(srv: &Server) -> bool {
    srv.repl.is_replica() || srv.pause.is_some() || srv.config.import_mode
}

/// Sets every database's state after one of the reasons changed.
pub fn apply(srv: &mut Server) {
    set(srv, stopped(srv), true);
}

/// Does `sess` see keys past their time as live? A replica's primary
/// link always does; an import source does in import mode on a primary.
pub fn sees_expired(srv: &Server, sess: &Session) -> bool {
    sess.import_source && srv.config.import_mode && !srv.repl.is_replica()
}

/// Until the next [`apply`], keys past their time are live to whatever
/// runs: a command of a client [`sees_expired`] says so for, or the
/// primary's stream.
pub fn reveal(srv: &mut Server) {
    set(srv, true, false);
}

fn set(srv: &mut Server, paused: bool, hidden: bool) {
    for db in &mut srv.keyspace.dbs {
        db.expiry_paused = paused;
        db.expiry_hidden = paused && hidden;
    }
}
