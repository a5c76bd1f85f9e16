//! MIGRATE's connections to other servers.
//!
//! The command (`cmd/migrate.rs`) builds the request — AUTH, SELECT when
//! the connection's database differs, one RESTORE per key — and reads one
//! reply line per command it sent; it decides what the replies mean. The
//! sockets belong to the [`Migrator`] the server plugs in
//! ([`crate::Engine::set_migrator`]), which does blocking IO under the
//! command's timeout: as Valkey's MIGRATE, the engine's thread waits for
//! the target. Without a migrator every MIGRATE fails to connect.
//!
//! Connections are kept for the next MIGRATE to the same `host:port`
//! (Valkey's cached sockets): at most [`MAX_CACHED`], each closed by cron
//! once idle for [`CACHE_TTL`], and dropped after any socket error.

use std::io;
use std::time::Duration;

/// Valkey's MIGRATE_SOCKET_CACHE_ITEMS.
pub const MAX_CACHED: usize = 64;
/// Valkey's MIGRATE_SOCKET_CACHE_TTL.
pub const CACHE_TTL: Duration = Duration::from_secs(10);

/// The sockets MIGRATE talks through.
pub trait Migrator: Send {
    /// The connection to `host:port`: the cached one, or a new one
    /// connected within `timeout` (after closing another when
    /// [`MAX_CACHED`] are open).
    fn connect(
        &mut self,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> io::Result<&mut dyn MigrateLink>;
    /// Close the connection to `host:port`, if there is one.
    fn close(&mut self, host: &str, port: u16);
    /// Close the connections unused for longer than `idle`.
    fn close_idle(&mut self, idle: Duration);
    /// How many connections are open (INFO `migrate_cached_sockets`).
    fn cached(&self) -> usize;
}

/// One connection to a target.
pub trait MigrateLink {
    /// The database its last successful MIGRATE selected (`None`: new, or
    /// unknown after an error).
    fn db(&self) -> Option<i64>;
    fn set_db(&mut self, db: Option<i64>);
    /// Write all of `bytes`, each write waiting `timeout` at most.
    fn send(&mut self, bytes: &[u8], timeout: Duration) -> io::Result<()>;
    /// One reply line, without its CRLF, waiting `timeout` at most.
    fn read_line(&mut self, timeout: Duration) -> io::Result<Vec<u8>>;
}

/// Valkey retries a failed exchange once on a new connection (a cached one
/// may have been closed by the target), but not after a timeout.
pub fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    )
}
