//! The execution half of ringkv: Sessions, the command table, the keyspace
//! and everything a command can see. Deterministic and socket-free: a test
//! feeds parsed commands in and reads reply bytes out.
//!
//! ```text
//!   IO layer (net)                        Engine (this crate)
//!   ─────────────                         ───────────────────
//!   Connection ── connect(ClientInfo) ──► Session created, ClientId returned
//!   parsed batch ─ execute_batch(jobs) ─► prefetch all keys, run in order,
//!                                         append replies to each job's `out`
//!              ◄─ take_events() ───────── kill client N, shut down, …
//!   close ─────── disconnect(id) ───────► Session dropped
//!   timer ─────── cron(now) ────────────► active expiry, idle timeouts
//! ```
//!
//! The engine must not touch sockets, file descriptors or threads. It may
//! read the clock (through [`Clock`], which tests can pin) and, for CONFIG
//! REWRITE only, write the config file.

pub mod batch;
pub mod cmd;
pub mod command;
pub mod server;
pub mod session;
pub mod config;
pub mod glob;
pub mod num;

pub use batch::{CommandsView, Job};
pub use config::{Config, ConfigError};

use std::net::SocketAddr;

/// Identifies a client for its whole life; never reused (CLIENT ID).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientId(pub u64);

/// What the IO layer knows about a new connection.
#[derive(Clone, Debug)]
pub struct ClientInfo {
    pub peer: SocketAddr,
    pub local: SocketAddr,
    pub fd: i32,
}

/// Something the engine asks the IO layer to do, outside any one reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Close this client (CLIENT KILL, idle timeout). Pending replies are
    /// flushed first when `flush` is true.
    Close { client: ClientId, flush: bool },
    /// Stop the server (SHUTDOWN, or a signal relayed through
    /// [`Engine::shutdown_requested`]). Replies are flushed first.
    Shutdown,
}

/// Everything the IO layer reports for INFO (stats the engine cannot see).
#[derive(Clone, Debug, Default)]
pub struct NetStats {
    pub total_net_input_bytes: u64,
    pub total_net_output_bytes: u64,
    pub rejected_connections: u64,
    /// "io_uring" or "epoll".
    pub backend: &'static str,
    pub tcp_port: u16,
}

pub mod log;

/// The execution state of the whole server: keyspace, sessions, config, stats.
pub struct Engine {
    _private: (),
}

impl Engine {
    /// `config` is final (file + command line applied); `config_file` is what
    /// CONFIG REWRITE writes back to.
    pub fn new(config: Config, config_file: Option<std::path::PathBuf>) -> Engine {
        let _ = (config, config_file);
        todo!("engine helper")
    }
    pub fn config(&self) -> &Config {
        todo!()
    }
    /// Register a new connection. `Err(bytes)` means: send these bytes and
    /// close (maxclients reached, protected mode DENIED).
    pub fn connect(&mut self, info: ClientInfo) -> Result<ClientId, Vec<u8>> {
        let _ = info;
        todo!()
    }
    /// The connection is gone; drop its Session.
    pub fn disconnect(&mut self, id: ClientId) {
        let _ = id;
        todo!()
    }
    /// Run a batch: prefetch every key of every command, then execute each
    /// job's commands in order, appending replies to its `out`.
    pub fn execute_batch(&mut self, jobs: &mut [Job<'_>]) {
        let _ = jobs;
        todo!()
    }
    /// Move pending events into `out`.
    pub fn drain_events(&mut self, out: &mut Vec<Event>) {
        let _ = out;
        todo!()
    }
    /// Periodic work, called `hz` times a second: active expiry, idle
    /// client timeouts (as `Event::Close`), stats sampling.
    pub fn cron(&mut self) {
        todo!()
    }
    /// Ask the engine to shut down (SIGTERM/SIGINT): it emits Event::Shutdown.
    pub fn shutdown_requested(&mut self) {
        todo!()
    }
    /// Counters only the IO layer sees, for INFO.
    pub fn net_stats_mut(&mut self) -> &mut NetStats {
        todo!()
    }
    /// Parser limits from `proto-max-bulk-len`.
    pub fn parser_limits(&self) -> resp::Limits {
        todo!()
    }
    /// `client-query-buffer-limit` in bytes.
    pub fn query_buffer_limit(&self) -> usize {
        todo!()
    }
    /// Record a protocol error for `client` (INFO errorstats, log line).
    pub fn note_protocol_error(&mut self, client: ClientId, err: &resp::ProtocolError) {
        let _ = (client, err);
        todo!()
    }
}
