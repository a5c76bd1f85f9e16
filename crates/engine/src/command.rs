//! The command table's shape: every command is a [`CommandSpec`] with its
//! arity, flags, key positions, key specs, docs and a function over a
//! [`Ctx`]. Fields equal to [`CommandSpec::DEFAULT`]'s are left out of the
//! specs.
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
    pub const SKIP_COMMANDLOG: u32 = 1 << 10;
    pub const FAST: u32 = 1 << 11;
    pub const NO_AUTH: u32 = 1 << 12;
    pub const MAY_REPLICATE: u32 = 1 << 13;
    pub const SENTINEL: u32 = 1 << 14;
    pub const ALLOW_BUSY: u32 = 1 << 15;
    pub const NO_MULTI: u32 = 1 << 16;
    pub const NO_ASYNC_LOADING: u32 = 1 << 17;
    pub const NO_MANDATORY_KEYS: u32 = 1 << 18;
    /// Derived from the key specs (Valkey's `CMD_MOVABLE_KEYS`); never
    /// written in a spec: COMMAND INFO computes it.
    pub const MOVABLE_KEYS: u32 = 1 << 20;
    /// Refused unless `enable-debug-command` allows it (DEBUG); not shown
    /// in COMMAND INFO.
    pub const PROTECTED: u32 = 1 << 19;
    /// RESTORE-ASKING (cluster migration); shown, no effect standalone.
    pub const ASKING: u32 = 1 << 21;

    /// Names as COMMAND INFO prints them, in Valkey's order (Valkey hides
    /// `may_replicate`, `sentinel` and `protected`).
    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_COMMANDLOG, "skip_commandlog"),
        (ASKING, "asking"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (MOVABLE_KEYS, "movablekeys"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// A top-level command of `group` with keys at `keys` = (first, last,
/// step): what every cmd/*.rs table is made of.
#[allow(clippy::too_many_arguments)]
pub const fn spec(
    group: &'static str,
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: (i32, i32, i32),
    acl_categories: &'static [&'static str],
    since: &'static str,
    summary: &'static str,
    complexity: &'static str,
    func: CommandFn,
    args: &'static [ArgSpec],
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        first_key: keys.0,
        last_key: keys.1,
        key_step: keys.2,
        acl_categories,
        group,
        since,
        summary,
        complexity,
        func: Some(func),
        args,
        ..CommandSpec::DEFAULT
    }
}

/// One command (or one subcommand of a container like CONFIG or CLIENT).
pub struct CommandSpec {
    /// Lower-case name, e.g. "get" or, for a subcommand, "get" under "config".
    pub name: &'static str,
    /// Valkey's arity: positive = exact argc, negative = at least -arity.
    pub arity: i32,
    pub flags: u32,
    /// Key positions (1-based; 0 = no keys; last_key -1 = to the end) as
    /// the engine reads them (WATCH, keyspace events, tracking, the batch
    /// prefetch). COMMAND reads `key_specs` instead (its first/last/step
    /// are derived from them, as Valkey's).
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
    /// Argument specs as COMMAND DOCS reports them (Valkey's command JSON);
    /// empty for argument-less commands and containers.
    pub args: &'static [ArgSpec],
    /// Where the keys are, as COMMAND INFO reports them; COMMAND GETKEYS
    /// interprets them ([`crate::getkeys`]).
    pub key_specs: &'static [KeySpec],
    /// Valkey's command tips (`nondeterministic_output`,
    /// `request_policy:all_shards`, ...).
    pub tips: &'static [&'static str],
    /// (version, change) pairs, as COMMAND DOCS `history`.
    pub history: &'static [(&'static str, &'static str)],
    /// [`doc_flags`] bits.
    pub doc_flags: u8,
    pub deprecated_since: Option<&'static str>,
    /// What a deprecated command's docs point to instead.
    pub replaced_by: Option<&'static str>,
    /// Keys computed by code instead of the key specs, where Valkey does so
    /// (its `getkeys_proc` for keys whose flags depend on the arguments).
    pub getkeys: Option<GetKeysFn>,
}

/// Computes a command's keys from its arguments (argv[0] is the command
/// name): positions and [`key_flags`]; `None` when the arguments are
/// invalid.
pub type GetKeysFn = fn(&[&[u8]]) -> Option<Vec<(usize, u16)>>;

/// COMMAND DOCS `doc_flags`.
pub mod doc_flags {
    pub const DEPRECATED: u8 = 1 << 0;
    pub const SYSCMD: u8 = 1 << 1;
    /// Names in Valkey's order.
    pub const NAMES: &[(u8, &str)] = &[(DEPRECATED, "deprecated"), (SYSCMD, "syscmd")];
}

/// Key-spec flags (Valkey's `CMD_KEY_*`): how a command uses a key.
pub mod key_flags {
    /// Read only.
    pub const RO: u16 = 1 << 0;
    /// Read and write.
    pub const RW: u16 = 1 << 1;
    /// Overwrite: the old value is not read.
    pub const OW: u16 = 1 << 2;
    /// Remove: the key may be deleted.
    pub const RM: u16 = 1 << 3;
    /// Returns, copies or uses the user data.
    pub const ACCESS: u16 = 1 << 4;
    pub const UPDATE: u16 = 1 << 5;
    pub const INSERT: u16 = 1 << 6;
    pub const DELETE: u16 = 1 << 7;
    /// Not a key (channels of the shard pub/sub commands).
    pub const NOT_KEY: u16 = 1 << 8;
    /// The spec may miss keys: GETKEYS needs the command's own code.
    pub const INCOMPLETE: u16 = 1 << 9;
    /// The flags depend on the arguments.
    pub const VARIABLE_FLAGS: u16 = 1 << 10;

    /// Names as COMMAND INFO prints them, in Valkey's order.
    pub const NAMES: &[(u16, &str)] = &[
        (RO, "RO"),
        (RW, "RW"),
        (OW, "OW"),
        (RM, "RM"),
        (ACCESS, "access"),
        (UPDATE, "update"),
        (INSERT, "insert"),
        (DELETE, "delete"),
        (NOT_KEY, "not_key"),
        (INCOMPLETE, "incomplete"),
        (VARIABLE_FLAGS, "variable_flags"),
    ];
}

/// Where a key spec's search begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BeginSearch {
    /// At this argument (1 = the first after the command name).
    Index(i32),
    /// After the first argument equal to `keyword` (any case), searching
    /// from `start_from` (negative: from the end, backwards).
    Keyword {
        keyword: &'static str,
        start_from: i32,
    },
    Unknown,
}

/// Which keys follow the beginning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FindKeys {
    /// Keys from the beginning to `last_key` (relative to the beginning;
    /// negative: from the end), every `key_step`; with a `limit` > 1 and a
    /// negative `last_key`, only the first 1/limit of the remaining
    /// arguments.
    Range {
        last_key: i32,
        key_step: i32,
        limit: i32,
    },
    /// The argument at `keynum_idx` (relative to the beginning) counts the
    /// keys, which start `first_key` after the beginning.
    Keynum {
        keynum_idx: i32,
        first_key: i32,
        key_step: i32,
    },
    Unknown,
}

/// One of a command's key specs (Valkey's `keySpec`). The common case, a
/// single key at one position, is `KeySpec::index(1, RW | ACCESS | UPDATE)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySpec {
    /// [`key_flags`] bits.
    pub flags: u16,
    pub begin: BeginSearch,
    pub find: FindKeys,
    pub notes: Option<&'static str>,
}

impl KeySpec {
    /// One key at argument `pos`.
    pub const fn index(pos: i32, flags: u16) -> KeySpec {
        KeySpec {
            flags,
            begin: BeginSearch::Index(pos),
            find: FindKeys::Range {
                last_key: 0,
                key_step: 1,
                limit: 0,
            },
            notes: None,
        }
    }
    /// One key after `keyword`, searched from `start_from`.
    pub const fn keyword(keyword: &'static str, start_from: i32, flags: u16) -> KeySpec {
        KeySpec {
            begin: BeginSearch::Keyword {
                keyword,
                start_from,
            },
            ..KeySpec::index(0, flags)
        }
    }
    /// Keys no search can find (SORT's BY/GET patterns, its STORE
    /// anywhere among the options): GETKEYS falls back to the command's
    /// [`CommandSpec::getkeys`].
    pub const fn unknown(flags: u16) -> KeySpec {
        KeySpec {
            begin: BeginSearch::Unknown,
            find: FindKeys::Unknown,
            ..KeySpec::index(0, flags)
        }
    }
    pub const fn range(self, last_key: i32, key_step: i32, limit: i32) -> KeySpec {
        KeySpec {
            find: FindKeys::Range {
                last_key,
                key_step,
                limit,
            },
            ..self
        }
    }
    pub const fn keynum(self, keynum_idx: i32, first_key: i32, key_step: i32) -> KeySpec {
        KeySpec {
            find: FindKeys::Keynum {
                keynum_idx,
                first_key,
                key_step,
            },
            ..self
        }
    }
    pub const fn notes(self, notes: &'static str) -> KeySpec {
        KeySpec {
            notes: Some(notes),
            ..self
        }
    }
}

impl CommandSpec {
    /// A base for struct-update syntax in `const` tables:
    /// `CommandSpec { name: "get", arity: 2, func: Some(get), ..CommandSpec::DEFAULT }`.
    pub const DEFAULT: CommandSpec = CommandSpec {
        name: "",
        arity: -1,
        flags: 0,
        first_key: 0,
        last_key: 0,
        key_step: 0,
        acl_categories: &[],
        group: "generic",
        since: "1.0.0",
        summary: "",
        complexity: "O(1)",
        func: None,
        subcommands: &[],
        args: &[],
        key_specs: &[],
        tips: &[],
        history: &[],
        doc_flags: 0,
        deprecated_since: None,
        replaced_by: None,
        getkeys: None,
    };
}

/// An argument's type, as COMMAND DOCS names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    String,
    Integer,
    Double,
    /// A key; the index is into the command's key specs.
    Key {
        key_spec_index: u32,
    },
    Pattern,
    /// A pattern whose matches are key names (SORT's BY and GET); the
    /// index is into the command's key specs.
    KeyPattern {
        key_spec_index: u32,
    },
    UnixTime,
    PureToken,
    /// Exactly one of the sub-arguments.
    Oneof,
    /// All the sub-arguments, in order.
    Block,
}

impl ArgKind {
    /// The name COMMAND DOCS prints (Valkey's `ARG_TYPE_STR`).
    pub const fn as_str(self) -> &'static str {
        match self {
            ArgKind::String => "string",
            ArgKind::Integer => "integer",
            ArgKind::Double => "double",
            ArgKind::Key { .. } => "key",
            ArgKind::Pattern | ArgKind::KeyPattern { .. } => "pattern",
            ArgKind::UnixTime => "unix-time",
            ArgKind::PureToken => "pure-token",
            ArgKind::Oneof => "oneof",
            ArgKind::Block => "block",
        }
    }
    /// The key spec COMMAND DOCS names for the argument, if any.
    pub const fn key_spec_index(self) -> Option<u32> {
        match self {
            ArgKind::Key { key_spec_index } | ArgKind::KeyPattern { key_spec_index } => {
                Some(key_spec_index)
            }
            _ => None,
        }
    }
}

/// Argument flags, as COMMAND DOCS reports them.
pub mod arg_flags {
    pub const OPTIONAL: u8 = 1 << 0;
    pub const MULTIPLE: u8 = 1 << 1;
    pub const MULTIPLE_TOKEN: u8 = 1 << 2;

    /// Names in Valkey's order.
    pub const NAMES: &[(u8, &str)] = &[
        (OPTIONAL, "optional"),
        (MULTIPLE, "multiple"),
        (MULTIPLE_TOKEN, "multiple_token"),
    ];
}

/// One argument of a command (Valkey's `serverCommandArg`). Built in
/// `const` tables with the constructors and chained modifiers:
/// `ArgSpec::integer("count").token("COUNT").optional()`.
#[derive(Clone, Copy, Debug)]
pub struct ArgSpec {
    pub name: &'static str,
    pub kind: ArgKind,
    pub token: Option<&'static str>,
    /// [`arg_flags`] bits.
    pub flags: u8,
    pub since: Option<&'static str>,
    pub deprecated_since: Option<&'static str>,
    /// How the syntax shows the argument; COMMAND DOCS falls back to the
    /// name (not printed for oneof/block).
    pub display_text: Option<&'static str>,
    /// A short description (few of Valkey's arguments have one).
    pub summary: Option<&'static str>,
    /// Sub-arguments of a oneof or block.
    pub subargs: &'static [ArgSpec],
}

impl ArgSpec {
    pub const fn new(name: &'static str, kind: ArgKind) -> ArgSpec {
        ArgSpec {
            name,
            kind,
            token: None,
            flags: 0,
            since: None,
            deprecated_since: None,
            display_text: None,
            summary: None,
            subargs: &[],
        }
    }
    pub const fn key(name: &'static str, key_spec_index: u32) -> ArgSpec {
        ArgSpec::new(name, ArgKind::Key { key_spec_index })
    }
    pub const fn string(name: &'static str) -> ArgSpec {
        ArgSpec::new(name, ArgKind::String)
    }
    pub const fn integer(name: &'static str) -> ArgSpec {
        ArgSpec::new(name, ArgKind::Integer)
    }
    pub const fn double(name: &'static str) -> ArgSpec {
        ArgSpec::new(name, ArgKind::Double)
    }
    pub const fn pattern(name: &'static str) -> ArgSpec {
        ArgSpec::new(name, ArgKind::Pattern)
    }
    /// A pattern of key names, e.g. SORT's `BY`.
    pub const fn key_pattern(name: &'static str, key_spec_index: u32) -> ArgSpec {
        ArgSpec::new(name, ArgKind::KeyPattern { key_spec_index })
    }
    pub const fn unix_time(name: &'static str) -> ArgSpec {
        ArgSpec::new(name, ArgKind::UnixTime)
    }
    /// A bare keyword, e.g. `pure_token("nx", "NX")`.
    pub const fn pure_token(name: &'static str, token: &'static str) -> ArgSpec {
        ArgSpec::new(name, ArgKind::PureToken).token(token)
    }
    pub const fn oneof(name: &'static str, subargs: &'static [ArgSpec]) -> ArgSpec {
        ArgSpec {
            subargs,
            ..ArgSpec::new(name, ArgKind::Oneof)
        }
    }
    pub const fn block(name: &'static str, subargs: &'static [ArgSpec]) -> ArgSpec {
        ArgSpec {
            subargs,
            ..ArgSpec::new(name, ArgKind::Block)
        }
    }
    pub const fn token(self, token: &'static str) -> ArgSpec {
        ArgSpec {
            token: Some(token),
            ..self
        }
    }
    pub const fn optional(self) -> ArgSpec {
        ArgSpec {
            flags: self.flags | arg_flags::OPTIONAL,
            ..self
        }
    }
    pub const fn multiple(self) -> ArgSpec {
        ArgSpec {
            flags: self.flags | arg_flags::MULTIPLE,
            ..self
        }
    }
    pub const fn multiple_token(self) -> ArgSpec {
        ArgSpec {
            flags: self.flags | arg_flags::MULTIPLE_TOKEN,
            ..self
        }
    }
    pub const fn since(self, version: &'static str) -> ArgSpec {
        ArgSpec {
            since: Some(version),
            ..self
        }
    }
    pub const fn deprecated_since(self, version: &'static str) -> ArgSpec {
        ArgSpec {
            deprecated_since: Some(version),
            ..self
        }
    }
    pub const fn summary(self, text: &'static str) -> ArgSpec {
        ArgSpec {
            summary: Some(text),
            ..self
        }
    }
    pub const fn display(self, text: &'static str) -> ArgSpec {
        ArgSpec {
            display_text: Some(text),
            ..self
        }
    }
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
    /// Reply with an error. The engine counts every command whose reply
    /// starts with `-` in INFO errorstats/commandstats (by the error's first
    /// word), so writing the error through `reply.error` counts the same.
    pub fn error(&mut self, msg: &str) {
        self.reply.error(msg);
    }
    /// `store::hash_key(key)`, free when `key` is the command's first key
    /// (the engine hashed it for the batch prefetch). The address check is
    /// exact: the argument buffer does not change while a command runs.
    #[inline]
    pub fn key_hash(&self, key: &[u8]) -> u64 {
        let h = &self.srv.key_hint;
        if key.as_ptr() as usize == h.ptr && key.len() == h.len && h.len != 0 {
            h.hash
        } else {
            store::hash_key(key)
        }
    }
    /// Is the absolute time `at_ms` already past, so that setting it
    /// deletes the key instead? Never while an AOF is replayed, nor on a
    /// replica or in import mode: a later command of the file or the
    /// stream may still need the key, and a replica (an importing server)
    /// deletes only when its primary (import source) says so (Valkey's
    /// `checkAlreadyExpired`).
    pub fn already_expired(&self, at_ms: i64) -> bool {
        at_ms <= self.now_ms
            && !self.srv.aof.replaying
            && !self.srv.repl.is_replica()
            && !self.srv.config.import_mode
    }
    /// A key was modified: call on every write, after the change (WATCH
    /// invalidation; wakes clients blocked on the key).
    pub fn touched(&mut self, db: usize, key: &[u8]) {
        self.srv.persist.dirty += 1;
        self.srv.blocking.signal(db, key);
        self.srv.watches.touch(db, key);
        if !self.srv.tracking.is_idle() {
            crate::tracking::invalidate_key(self.srv, key, Some(self.session.id));
        }
    }
    /// A command that changed `n` elements of one key (HSET's fields,
    /// SADD's members, ...): Valkey counts each in the dirty counter,
    /// [`Ctx::touched`] counted the key once.
    pub fn changed_elements(&mut self, n: usize) {
        self.srv.persist.dirty += n.saturating_sub(1) as u64;
    }
    /// A keyspace event in the session's database (`notify-keyspace-events`):
    /// `class` is one of [`notify`]'s flags, `event` Valkey's event name
    /// (`"hset"`, `"lpush"`, `"del"`, `"expire"`, ...).
    pub fn notify(&mut self, class: u32, event: &str, key: &[u8]) {
        let db = self.session.db;
        self.notify_db(class, event, db, key);
    }
    /// As [`Ctx::notify`], for a key in another database (MOVE, COPY DB).
    pub fn notify_db(&mut self, class: u32, event: &str, db: usize, key: &[u8]) {
        if self.srv.config.notify_keyspace_events & class == 0 {
            return;
        }
        // Keys expired earlier in this command fire first, as in Valkey
        // (where the deletion publishes on the spot).
        if self.srv.expiry_logging || self.srv.keymisses.pending() {
            let me = crate::pubsub::Me {
                id: self.session.id,
                reply: &mut self.reply,
            };
            crate::pubsub::drain_expired(self.srv, Some(me));
        }
        let me = crate::pubsub::Me {
            id: self.session.id,
            reply: &mut self.reply,
        };
        crate::pubsub::keyspace_event(self.srv, Some(me), class, event, db, key);
    }
}

/// Keyspace-notification classes, Valkey's `NOTIFY_*` (the letters of
/// `notify-keyspace-events`).
pub mod notify {
    /// `K`: publish to `__keyspace@<db>__:<key>`.
    pub const KEYSPACE: u32 = 1 << 0;
    /// `E`: publish to `__keyevent@<db>__:<event>`.
    pub const KEYEVENT: u32 = 1 << 1;
    /// `g`: DEL, EXPIRE, RENAME, ... on any type.
    pub const GENERIC: u32 = 1 << 2;
    /// `$`
    pub const STRING: u32 = 1 << 3;
    /// `l`
    pub const LIST: u32 = 1 << 4;
    /// `s`
    pub const SET: u32 = 1 << 5;
    /// `h`
    pub const HASH: u32 = 1 << 6;
    /// `z`
    pub const ZSET: u32 = 1 << 7;
    /// `x`
    pub const EXPIRED: u32 = 1 << 8;
    /// `e`
    pub const EVICTED: u32 = 1 << 9;
    /// `t`
    pub const STREAM: u32 = 1 << 10;
    /// `m`
    pub const KEY_MISS: u32 = 1 << 11;
    /// `d`
    pub const MODULE: u32 = 1 << 13;
    /// `n`
    pub const NEW: u32 = 1 << 14;
    /// `A`: every class but `m` and `n`.
    pub const ALL: u32 =
        GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

    /// Valkey's `keyspaceEventsStringToFlags`; `None` on an unknown letter.
    pub fn parse(s: &[u8]) -> Option<u32> {
        let mut f = 0;
        for &c in s {
            f |= match c {
                b'A' => ALL,
                b'g' => GENERIC,
                b'$' => STRING,
                b'l' => LIST,
                b's' => SET,
                b'h' => HASH,
                b'z' => ZSET,
                b'x' => EXPIRED,
                b'e' => EVICTED,
                b'K' => KEYSPACE,
                b'E' => KEYEVENT,
                b't' => STREAM,
                b'm' => KEY_MISS,
                b'd' => MODULE,
                b'n' => NEW,
                _ => return None,
            };
        }
        Some(f)
    }

    /// Valkey's `keyspaceEventsFlagsToString`: `A` when every class of
    /// `A` is on (and then, as in Valkey, `n` is not shown), then `K`,
    /// `E`, `m`.
    pub fn to_string(f: u32) -> String {
        let mut s = String::new();
        if f & ALL == ALL {
            s.push('A');
        } else {
            for (bit, c) in [
                (GENERIC, 'g'),
                (STRING, '$'),
                (LIST, 'l'),
                (SET, 's'),
                (HASH, 'h'),
                (ZSET, 'z'),
                (EXPIRED, 'x'),
                (EVICTED, 'e'),
                (STREAM, 't'),
                (MODULE, 'd'),
                (NEW, 'n'),
            ] {
                if f & bit != 0 {
                    s.push(c);
                }
            }
        }
        for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
            if f & bit != 0 {
                s.push(c);
            }
        }
        s
    }
}
