//! The command table's shape: every command is a [`CommandSpec`] with its
//! arity, flags, key positions and a function over a [`Ctx`].
//!
//! Command groups live in `cmd/<group>.rs`, each exporting
//! `pub const COMMANDS: &[CommandSpec]`; the table concatenates them.

use crate::batch::ArgvRef;
use crate::server::Server;
use crate::session::Session;
use resp::ReplyWriter;
use store::Db;

/// Executes one command. Arity was already checked against the spec.
pub type CommandFn = fn(&mut Ctx<'_>, ArgvRef<'_>);

/// Command flags, as COMMAND INFO reports them.
pub mod flags {
    pub const WRITE: u32 = 1 << 0;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const PUBSUB: u32 = 1 << 4;
    pub const NOSCRIPT: u32 = 1 << 5;
    pub const BLOCKING: u32 = 1 << 6;
    pub const LOADING: u32 = 1 << 7;
    pub const STALE: u32 = 1 << 8;
    pub const SKIP_MONITOR: u32 = 1 << 9;
    pub const SKIP_SLOWLOG: u32 = 1 << 10;
    pub const FAST: u32 = 1 << 11;
    pub const NO_AUTH: u32 = 1 << 12;
    pub const MAY_REPLICATE: u32 = 1 << 13;
    pub const SENTINEL: u32 = 1 << 14;
    pub const ALLOW_BUSY: u32 = 1 << 15;
}

/// One command (or one subcommand of a container like CONFIG or CLIENT).
pub struct CommandSpec {
    /// Lower-case name, e.g. "get" or, for a subcommand, "get" under "config".
    pub name: &'static str,
    /// Valkey's arity: positive = exact argc, negative = at least -arity.
    pub arity: i32,
    pub flags: u32,
    /// Key positions (1-based; 0 = no keys; last_key -1 = to the end).
    pub first_key: i32,
    pub last_key: i32,
    pub key_step: i32,
    /// ACL categories without the '@', e.g. &["string", "fast", "read"].
    pub acl_categories: &'static [&'static str],
    /// Docs group ("string", "generic", "connection", "server", ...).
    pub group: &'static str,
    /// Version that introduced the command, e.g. "1.0.0".
    pub since: &'static str,
    pub summary: &'static str,
    pub complexity: &'static str,
    /// Execution function; `None` for a container whose subcommands run.
    pub func: Option<CommandFn>,
    /// Subcommands (CONFIG GET, CLIENT LIST, ...), empty otherwise.
    pub subcommands: &'static [CommandSpec],
}

/// What a command can see and change while it runs.
pub struct Ctx<'a> {
    pub srv: &'a mut Server,
    pub session: &'a mut Session,
    pub reply: ReplyWriter<'a>,
    /// Unix time in ms, read once per batch (Valkey caches it per command).
    pub now_ms: i64,
}

impl Ctx<'_> {
    /// The session's selected database.
    pub fn db(&mut self) -> &mut Db {
        &mut self.srv.keyspace.dbs[self.session.db]
    }
    /// Reply with an error and count it in INFO errorstats (by its first word).
    pub fn error(&mut self, msg: &str) {
        self.srv.stats.record_error(msg);
        self.reply.error(msg);
    }
    /// A key was modified (WATCH invalidation, keyspace notifications later).
    pub fn touched(&mut self, db: usize, key: &[u8]) {
        let _ = (db, key);
    }
}
