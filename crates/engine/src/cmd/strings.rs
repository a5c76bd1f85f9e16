//! String commands: GET SET SETNX SETEX PSETEX GETEX GETDEL GETSET MGET
//! MSET MSETNX INCR DECR INCRBY DECRBY INCRBYFLOAT APPEND STRLEN GETRANGE
//! SUBSTR SETRANGE, with Valkey 8's replies and error strings
//! (`t_string.c`).

use super::{NOT_INT, SYNTAX_ERR};
use crate::batch::ArgvRef;
use crate::command::flags::*;
use crate::command::{ArgSpec, CommandSpec, Ctx, KeySpec, doc_flags, key_flags as kf, notify};
use crate::num::{self, LongDouble};
use crate::server::Server;
use resp::ReplyWriter;
use store::{Db, Entry, Str, StrRef, Value};

pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_FLOAT: &str = "ERR value is not a valid float";
const TOO_BIG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
const RANGE_COMPLEXITY: &str = "O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings.";

// Argument specs, as Valkey 8's command JSON gives them (COMMAND DOCS).
const KEY_ARG: &[ArgSpec] = &[ArgSpec::key("key", 0)];
const KEY_VALUE_ARGS: &[ArgSpec] = &[ArgSpec::key("key", 0), ArgSpec::string("value")];
const IFEQ_SUMMARY: &str =
    "Sets the key's value only if the current value matches the specified comparison value.";
const SET_ARGS: &[ArgSpec] = &[
    ArgSpec::key("key", 0),
    ArgSpec::string("value"),
    ArgSpec::oneof(
        "condition",
        &[
            ArgSpec::pure_token("nx", "NX").since("2.6.12"),
            ArgSpec::pure_token("xx", "XX").since("2.6.12"),
            ArgSpec::string("comparison-value")
                .token("IFEQ")
                .summary(IFEQ_SUMMARY)
                .since("8.1.0"),
        ],
    )
    .optional(),
    ArgSpec::pure_token("get", "GET").since("6.2.0").optional(),
    ArgSpec::oneof(
        "expiration",
        &[
            ArgSpec::integer("seconds").token("EX").since("2.6.12"),
            ArgSpec::integer("milliseconds").token("PX").since("2.6.12"),
            ArgSpec::unix_time("unix-time-seconds")
                .token("EXAT")
                .since("6.2.0"),
            ArgSpec::unix_time("unix-time-milliseconds")
                .token("PXAT")
                .since("6.2.0"),
            ArgSpec::pure_token("keepttl", "KEEPTTL").since("6.0.0"),
        ],
    )
    .optional(),
];
const SETEX_ARGS: &[ArgSpec] = &[
    ArgSpec::key("key", 0),
    ArgSpec::integer("seconds"),
    ArgSpec::string("value"),
];
const PSETEX_ARGS: &[ArgSpec] = &[
    ArgSpec::key("key", 0),
    ArgSpec::integer("milliseconds"),
    ArgSpec::string("value"),
];
const GETEX_ARGS: &[ArgSpec] = &[
    ArgSpec::key("key", 0),
    ArgSpec::oneof(
        "expiration",
        &[
            ArgSpec::integer("seconds").token("EX"),
            ArgSpec::integer("milliseconds").token("PX"),
            ArgSpec::unix_time("unix-time-seconds").token("EXAT"),
            ArgSpec::unix_time("unix-time-milliseconds").token("PXAT"),
            ArgSpec::pure_token("persist", "PERSIST"),
        ],
    )
    .optional(),
];
const MGET_ARGS: &[ArgSpec] = &[ArgSpec::key("key", 0).multiple()];
const MSET_ARGS: &[ArgSpec] =
    &[ArgSpec::block("data", &[ArgSpec::key("key", 0), ArgSpec::string("value")]).multiple()];
const INCRBY_ARGS: &[ArgSpec] = &[ArgSpec::key("key", 0), ArgSpec::integer("increment")];
const DECRBY_ARGS: &[ArgSpec] = &[ArgSpec::key("key", 0), ArgSpec::integer("decrement")];
const INCRBYFLOAT_ARGS: &[ArgSpec] = &[ArgSpec::key("key", 0), ArgSpec::double("increment")];
const RANGE_ARGS: &[ArgSpec] = &[
    ArgSpec::key("key", 0),
    ArgSpec::integer("start"),
    ArgSpec::integer("end"),
];
const SETRANGE_ARGS: &[ArgSpec] = &[
    ArgSpec::key("key", 0),
    ArgSpec::integer("offset"),
    ArgSpec::string("value"),
];

// One spec per row, like Valkey's command table.
#[allow(clippy::too_many_arguments)]
const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    acl: &'static [&'static str],
    since: &'static str,
    summary: &'static str,
    func: crate::command::CommandFn,
    args: &'static [ArgSpec],
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl_categories: acl,
        group: "string",
        since,
        summary,
        func: Some(func),
        args,
        ..CommandSpec::DEFAULT
    }
}

// ACL categories in the order COMMAND INFO prints them (Valkey's category
// table order), including the ones implied by the flags.
const READ_FAST: &[&str] = &["read", "string", "fast"];
const READ_SLOW: &[&str] = &["read", "string", "slow"];
const WRITE_FAST: &[&str] = &["write", "string", "fast"];
const WRITE_SLOW: &[&str] = &["write", "string", "slow"];

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        ..spec(
            "get",
            2,
            READONLY | FAST,
            READ_FAST,
            "1.0.0",
            "Returns the string value of a key.",
            get,
            KEY_ARG,
        )
    },
    CommandSpec {
        key_specs: &[
            KeySpec::index(1, kf::RW | kf::ACCESS | kf::UPDATE | kf::VARIABLE_FLAGS)
                .notes("RW and ACCESS due to the optional `GET` argument"),
        ],
        getkeys: Some(set_keys),
        history: &[
            ("2.6.12", "Added the `EX`, `PX`, `NX` and `XX` options."),
            ("6.0.0", "Added the `KEEPTTL` option."),
            ("6.2.0", "Added the `GET`, `EXAT` and `PXAT` option."),
            (
                "7.0.0",
                "Allowed the `NX` and `GET` options to be used together.",
            ),
            ("8.1.0", "Added the `IFEQ` option."),
        ],
        ..spec(
            "set",
            -3,
            WRITE | DENYOOM,
            WRITE_SLOW,
            "1.0.0",
            "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.",
            set,
            SET_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::OW | kf::INSERT)],
        doc_flags: doc_flags::DEPRECATED,
        deprecated_since: Some("2.6.12"),
        replaced_by: Some("`SET` with the `NX` argument"),
        ..spec(
            "setnx",
            3,
            WRITE | DENYOOM | FAST,
            WRITE_FAST,
            "1.0.0",
            "Set the string value of a key only when the key doesn't exist.",
            setnx,
            KEY_VALUE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::OW | kf::UPDATE)],
        doc_flags: doc_flags::DEPRECATED,
        deprecated_since: Some("2.6.12"),
        replaced_by: Some("`SET` with the `EX` argument"),
        ..spec(
            "setex",
            4,
            WRITE | DENYOOM,
            WRITE_SLOW,
            "2.0.0",
            "Sets the string value and expiration time of a key. Creates the key if it doesn't exist.",
            setex,
            SETEX_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::OW | kf::UPDATE)],
        doc_flags: doc_flags::DEPRECATED,
        deprecated_since: Some("2.6.12"),
        replaced_by: Some("`SET` with the `PX` argument"),
        ..spec(
            "psetex",
            4,
            WRITE | DENYOOM,
            WRITE_SLOW,
            "2.6.0",
            "Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist.",
            psetex,
            PSETEX_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS | kf::UPDATE)
            .notes("RW and UPDATE because it changes the TTL")],
        ..spec(
            "getex",
            -2,
            WRITE | FAST,
            WRITE_FAST,
            "6.2.0",
            "Returns the string value of a key after setting its expiration time.",
            getex,
            GETEX_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS | kf::DELETE)],
        ..spec(
            "getdel",
            2,
            WRITE | FAST,
            WRITE_FAST,
            "6.2.0",
            "Returns the string value of a key after deleting the key.",
            getdel,
            KEY_ARG,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS | kf::UPDATE)],
        doc_flags: doc_flags::DEPRECATED,
        deprecated_since: Some("6.2.0"),
        replaced_by: Some("`SET` with the `!GET` argument"),
        ..spec(
            "getset",
            3,
            WRITE | DENYOOM | FAST,
            WRITE_FAST,
            "1.0.0",
            "Returns the previous string value of a key after setting it to a new value.",
            getset,
            KEY_VALUE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS).range(-1, 1, 0)],
        tips: &["request_policy:multi_shard"],
        last_key: -1,
        complexity: "O(N) where N is the number of keys to retrieve.",
        ..spec(
            "mget",
            -2,
            READONLY | FAST,
            READ_FAST,
            "1.0.0",
            "Atomically returns the string values of one or more keys.",
            mget,
            MGET_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::OW | kf::UPDATE).range(-1, 2, 0)],
        tips: &[
            "request_policy:multi_shard",
            "response_policy:all_succeeded",
        ],
        last_key: -1,
        key_step: 2,
        complexity: "O(N) where N is the number of keys to set.",
        ..spec(
            "mset",
            -3,
            WRITE | DENYOOM,
            WRITE_SLOW,
            "1.0.1",
            "Atomically creates or modifies the string values of one or more keys.",
            mset,
            MSET_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::OW | kf::INSERT).range(-1, 2, 0)],
        last_key: -1,
        key_step: 2,
        complexity: "O(N) where N is the number of keys to set.",
        ..spec(
            "msetnx",
            -3,
            WRITE | DENYOOM,
            WRITE_SLOW,
            "1.0.1",
            "Atomically modifies the string values of one or more keys only when all keys don't exist.",
            msetnx,
            MSET_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS | kf::UPDATE)],
        ..spec(
            "incr",
            2,
            WRITE | DENYOOM | FAST,
            WRITE_FAST,
            "1.0.0",
            "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.",
            incr,
            KEY_ARG,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS | kf::UPDATE)],
        ..spec(
            "decr",
            2,
            WRITE | DENYOOM | FAST,
            WRITE_FAST,
            "1.0.0",
            "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.",
            decr,
            KEY_ARG,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS | kf::UPDATE)],
        ..spec(
            "incrby",
            3,
            WRITE | DENYOOM | FAST,
            WRITE_FAST,
            "1.0.0",
            "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist.",
            incrby,
            INCRBY_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS | kf::UPDATE)],
        ..spec(
            "decrby",
            3,
            WRITE | DENYOOM | FAST,
            WRITE_FAST,
            "1.0.0",
            "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist.",
            decrby,
            DECRBY_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS | kf::UPDATE)],
        ..spec(
            "incrbyfloat",
            3,
            WRITE | DENYOOM | FAST,
            WRITE_FAST,
            "2.6.0",
            "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist.",
            incrbyfloat,
            INCRBYFLOAT_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::INSERT)],
        complexity: "O(1). The amortized time complexity is O(1) assuming the appended value is small and the already present value is of any size, since the dynamic string library used by the server will double the free space available on every reallocation.",
        ..spec(
            "append",
            3,
            WRITE | DENYOOM | FAST,
            WRITE_FAST,
            "2.0.0",
            "Appends a string to the value of a key. Creates the key if it doesn't exist.",
            append,
            KEY_VALUE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO)],
        ..spec(
            "strlen",
            2,
            READONLY | FAST,
            READ_FAST,
            "2.2.0",
            "Returns the length of a string value.",
            strlen,
            KEY_ARG,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        complexity: RANGE_COMPLEXITY,
        ..spec(
            "getrange",
            4,
            READONLY,
            READ_SLOW,
            "2.4.0",
            "Returns a substring of the string stored at a key.",
            getrange,
            RANGE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        doc_flags: doc_flags::DEPRECATED,
        deprecated_since: Some("2.0.0"),
        replaced_by: Some("`GETRANGE`"),
        complexity: RANGE_COMPLEXITY,
        ..spec(
            "substr",
            4,
            READONLY,
            READ_SLOW,
            "1.0.0",
            "Returns a substring from a string value.",
            getrange,
            RANGE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::UPDATE)],
        complexity: "O(1), not counting the time taken to copy the new string in place. Usually, this string is very small so the amortized complexity is O(1). Otherwise, complexity is O(M) with M being the length of the value argument.",
        ..spec(
            "setrange",
            4,
            WRITE | DENYOOM,
            WRITE_SLOW,
            "2.2.0",
            "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.",
            setrange,
            SETRANGE_ARGS,
        )
    },
];

// ---- Value helpers ---------------------------------------------------------

/// The string of an entry, `None` for any other type (WRONGTYPE). Every
/// type check of this module goes through here.
pub fn as_str(e: &Entry) -> Option<StrRef<'_>> {
    e.str()
}

/// The string of an entry, to edit in place: an inline string moves into
/// its own buffer first (it is about to become Valkey's `raw`).
pub(crate) fn as_str_mut(e: &mut Entry) -> Option<&mut Str> {
    e.str()?;
    match e.value_mut() {
        Value::Str(s) => Some(s),
        _ => None,
    }
}

/// Valkey's `tryObjectEncoding` for an argument: integers in `string2ll`
/// form are kept as integers (OBJECT ENCODING `int`).
pub fn encode(b: &[u8]) -> StrRef<'_> {
    match num::parse_i64(b) {
        Some(n) => StrRef::Int(n),
        None => StrRef::Bytes(b),
    }
}

/// The bytes of a string; integers are formatted into `buf`.
pub(crate) fn bytes_of<'a>(s: StrRef<'a>, buf: &'a mut [u8; resp::num::I64_MAX_LEN]) -> &'a [u8] {
    match s {
        StrRef::Int(n) => resp::num::fmt_i64(n, buf),
        StrRef::Bytes(b) | StrRef::Raw(b) => b,
        StrRef::Shared(b) => b,
    }
}

fn str_len(s: StrRef<'_>) -> usize {
    let mut buf = [0u8; resp::num::I64_MAX_LEN];
    bytes_of(s, &mut buf).len()
}

fn reply_str(r: &mut ReplyWriter<'_>, s: StrRef<'_>) {
    match s {
        StrRef::Int(n) => r.bulk_from_int(n),
        StrRef::Bytes(b) | StrRef::Raw(b) => r.bulk(b),
        // By reference: no copy of a large value on this thread.
        StrRef::Shared(b) => r.bulk_shared(b),
    }
}

/// Make a string editable in place (Valkey's `dbUnshareStringValue`): the
/// result is always `raw`, as in Valkey.
pub(crate) fn unshare(s: &mut Str) -> &mut Vec<u8> {
    *s = match std::mem::replace(s, Str::Int(0)) {
        Str::Int(n) => Str::Raw(n.to_string().into_bytes()),
        Str::Bytes(b) | Str::Raw(b) => Str::Raw(b),
        // Copy-on-write: replies still being sent keep the old bytes.
        Str::Shared(b) => Str::Raw(b.to_vec()),
    };
    match s {
        Str::Raw(b) => b,
        Str::Int(_) | Str::Bytes(_) | Str::Shared(_) => unreachable!("converted above"),
    }
}

/// Valkey's `checkStringLength`: would `size + append` bytes pass
/// `proto-max-bulk-len`?
pub(crate) fn too_long(max: usize, size: u64, append: u64) -> bool {
    size.checked_add(append).is_none_or(|t| t > max as u64)
}

// ---- Keyspace helpers ------------------------------------------------------

/// `lookupKeyRead`: lazy expiry, access time, hit/miss statistics.
pub(crate) fn lookup_read<'a>(
    srv: &'a mut Server,
    dbi: usize,
    h: u64,
    key: &[u8],
    now_ms: i64,
) -> Option<&'a mut Entry> {
    // `Db::get_read` stamps the access (LRU clock or LFU counter).
    let found = srv.keyspace.dbs[dbi].get_read(h, key, now_ms);
    super::count_read(
        &mut srv.stats,
        Some(&mut srv.keymisses),
        found.is_some(),
        dbi,
        key,
    );
    found
}

/// `lookupKeyWrite`: lazy expiry and access time, no statistics.
pub(crate) fn lookup_write<'a>(
    db: &'a mut Db,
    h: u64,
    key: &[u8],
    now_ms: i64,
) -> Option<&'a mut Entry> {
    db.get(h, key, now_ms)
}

/// Store a string built elsewhere (an edited buffer), replacing whatever
/// was there. True if the key is new (nothing live was there: a `new`
/// event).
pub(crate) fn store(db: &mut Db, h: u64, key: &[u8], s: Str, now_ms: i64) -> bool {
    store_entry(db, h, key, Entry::keyed(key, Value::Str(s)), now_ms)
}

/// Store an argument as [`encode`] makes it, with the given expiry: SET's
/// path, one allocation for key and value.
pub(crate) fn store_arg(
    db: &mut Db,
    h: u64,
    key: &[u8],
    arg: &[u8],
    expire_at_ms: Option<i64>,
    now_ms: i64,
) -> bool {
    store_entry(
        db,
        h,
        key,
        Entry::keyed_str(key, encode(arg), expire_at_ms),
        now_ms,
    )
}

fn store_entry(db: &mut Db, h: u64, key: &[u8], e: Entry, now_ms: i64) -> bool {
    db.insert(h, key, e, now_ms).is_none_or(|old| old.expired)
}

/// Keyspace events of a string write: `new` first when the key was
/// created, then `event` (Valkey's order: dbAdd notifies before the
/// command does).
pub(crate) fn notify_write(ctx: &mut Ctx<'_>, created: bool, event: &str, key: &[u8]) {
    if created {
        ctx.notify(notify::NEW, "new", key);
    }
    ctx.notify(notify::STRING, event, key);
}

/// Outcome of Valkey's `getGenericCommand`, which SET GET, GETSET and
/// GETDEL share.
enum Got {
    Missing,
    Found,
    WrongType,
}

/// Reply with the string at `key` (null when missing, WRONGTYPE for other
/// types) as GET does.
fn get_generic(ctx: &mut Ctx<'_>, key: &[u8], h: u64) -> Got {
    let dbi = ctx.session.db;
    match lookup_read(ctx.srv, dbi, h, key, ctx.now_ms) {
        None => {
            ctx.reply.null();
            Got::Missing
        }
        Some(e) => match as_str(e) {
            Some(s) => {
                reply_str(&mut ctx.reply, s);
                Got::Found
            }
            None => {
                ctx.reply.error(WRONGTYPE);
                Got::WrongType
            }
        },
    }
}

// ---- GET / SET family ------------------------------------------------------

fn get(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    let h = ctx.key_hash(key);
    get_generic(ctx, key, h);
}

/// Option flags of SET and GETEX (Valkey's `ARGS_*`).
mod opt {
    pub const NX: u32 = 1 << 0;
    pub const XX: u32 = 1 << 1;
    pub const GET: u32 = 1 << 2;
    pub const KEEPTTL: u32 = 1 << 3;
    pub const PERSIST: u32 = 1 << 4;
    pub const EX: u32 = 1 << 5;
    pub const PX: u32 = 1 << 6;
    pub const EXAT: u32 = 1 << 7;
    pub const PXAT: u32 = 1 << 8;
    pub const IFEQ: u32 = 1 << 9;
    pub const ANY_EXPIRE: u32 = EX | PX | EXAT | PXAT;
}

/// SET's and GETEX's options as parsed.
struct SetOptions<'a> {
    flags: u32,
    /// The argument of EX, PX, EXAT or PXAT.
    expire: Option<&'a [u8]>,
    /// IFEQ's comparison value.
    ifeq: Option<&'a [u8]>,
}

impl<'a> SetOptions<'a> {
    /// The options SETNX, SETEX and PSETEX imply.
    fn only(flags: u32, expire: Option<&'a [u8]>) -> Self {
        SetOptions {
            flags,
            expire,
            ifeq: None,
        }
    }
}

/// Valkey's `parseExtendedCommandArgumentsOrReply`: each option is refused
/// (syntax error) when a conflicting one came before it; repeating the same
/// option is allowed and the last value wins, except IFEQ (once, and
/// never with NX or XX).
fn parse_options<'a>(argv: ArgvRef<'a>, set: bool) -> Option<SetOptions<'a>> {
    use opt::*;
    let mut flags = 0u32;
    let mut expire = None;
    let mut ifeq = None;
    let mut j = if set { 3 } else { 2 };
    while j < argv.len() {
        let a = argv.get(j);
        let has_next = j + 1 < argv.len();
        let is = |w: &str| a.eq_ignore_ascii_case(w.as_bytes());
        let unit = if is("ex") {
            EX
        } else if is("px") {
            PX
        } else if is("exat") {
            EXAT
        } else if is("pxat") {
            PXAT
        } else {
            0
        };
        if set && is("nx") && flags & (XX | IFEQ) == 0 {
            flags |= NX;
        } else if set && is("xx") && flags & (NX | IFEQ) == 0 {
            flags |= XX;
        } else if set && is("ifeq") && has_next && flags & (NX | XX | IFEQ) == 0 {
            flags |= IFEQ;
            ifeq = Some(argv.get(j + 1));
            j += 1;
        } else if set && is("get") {
            flags |= GET;
        } else if set && is("keepttl") && flags & (PERSIST | ANY_EXPIRE) == 0 {
            flags |= KEEPTTL;
        } else if !set && is("persist") && flags & (KEEPTTL | ANY_EXPIRE) == 0 {
            flags |= PERSIST;
        } else if unit != 0 && has_next && flags & (KEEPTTL | PERSIST | (ANY_EXPIRE & !unit)) == 0 {
            flags |= unit;
            expire = Some(argv.get(j + 1));
            j += 1;
        } else {
            return None;
        }
        j += 1;
    }
    Some(SetOptions {
        flags,
        expire,
        ifeq,
    })
}

/// Valkey's `getExpireMillisecondsOrReply`: the absolute expiry in ms, or
/// the error to reply.
fn expire_at(arg: &[u8], flags: u32, now_ms: i64, cmd: &str) -> Result<i64, String> {
    let invalid = || format!("ERR invalid expire time in '{cmd}' command");
    let v = num::parse_i64(arg).ok_or_else(|| NOT_INT.to_string())?;
    let seconds = flags & (opt::EX | opt::EXAT) != 0;
    if v <= 0 || (seconds && v > i64::MAX / 1000) {
        return Err(invalid());
    }
    let mut ms = if seconds { v * 1000 } else { v };
    if flags & (opt::EX | opt::PX) != 0 {
        ms = ms.checked_add(now_ms).ok_or_else(invalid)?;
    }
    if ms <= 0 {
        return Err(invalid());
    }
    Ok(ms)
}

/// What SETNX replies instead of `+OK` / null.
#[derive(Clone, Copy)]
enum SetReplies {
    OkNull,
    OneZero,
}

/// Valkey's `setGenericCommand`.
fn set_generic(
    ctx: &mut Ctx<'_>,
    opts: SetOptions<'_>,
    key: &[u8],
    val: &[u8],
    cmd: &str,
    replies: SetReplies,
) {
    let now = ctx.now_ms;
    let flags = opts.flags;
    let when = match opts
        .expire
        .map(|e| expire_at(e, flags, now, cmd))
        .transpose()
    {
        Ok(w) => w,
        Err(msg) => return ctx.error(&msg),
    };
    let h = ctx.key_hash(key);
    let with_get = flags & opt::GET != 0;
    if with_get && matches!(get_generic(ctx, key, h), Got::WrongType) {
        return;
    }
    let dbi = ctx.session.db;
    let past = when.is_some_and(|t| ctx.already_expired(t));
    let db = &mut ctx.srv.keyspace.dbs[dbi];
    if let Some(expected) = opts.ifeq {
        // Only an existing string equal to `expected` is replaced; SET GET
        // has answered with the old value (or WRONGTYPE) already.
        let mut buf = [0u8; resp::num::I64_MAX_LEN];
        let equal = lookup_write(db, h, key, now)
            .map(|e| as_str(e).map(|s| bytes_of(s, &mut buf) == expected));
        match equal {
            Some(Some(true)) => {}
            Some(None) if !with_get => return ctx.error(WRONGTYPE),
            _ if !with_get => return ctx.reply.null(),
            _ => return,
        }
    }
    let mut old_ttl = None;
    let mut done = false;
    if let Some(e) = lookup_write(db, h, key, now) {
        let was = e.expire_at_ms();
        old_ttl = Some(was);
        // The common overwrite (no NX, no TTL change): replace the value in
        // place, reusing its buffer, instead of a second lookup to insert.
        // A large collection goes through insert, which leaves it to the
        // lazyfree thread.
        let ttl = if flags & opt::KEEPTTL != 0 { was } else { when };
        if flags & opt::NX == 0
            && when.is_none_or(|t| t > now)
            && ttl == was
            && e.value().free_effort() <= store::keyspace::LAZYFREE_THRESHOLD
        {
            e.set_str(encode(val));
            done = true;
        }
    }
    let found = old_ttl.is_some();
    if done {
        propagate_set(ctx, flags, key, val, when);
        set_done(ctx, dbi, key, false, when.is_some(), with_get, replies);
        return;
    }
    if (flags & opt::NX != 0 && found) || (flags & opt::XX != 0 && !found) {
        if !with_get {
            match replies {
                SetReplies::OkNull => ctx.reply.null(),
                SetReplies::OneZero => ctx.reply.int(0),
            }
        }
        return;
    }
    // Already expired: storing it would only leave garbage for the expire
    // cycle, so the old value is deleted instead (Valkey replicates a DEL).
    if past {
        if found {
            super::delete_already_expired(ctx, h, key);
        }
        if !with_get {
            ctx.reply.ok();
        }
        return;
    }
    let ttl = match when {
        Some(t) => Some(t),
        None if flags & opt::KEEPTTL != 0 => old_ttl.flatten(),
        None => None,
    };
    store_arg(db, h, key, val, ttl, now);
    propagate_set(ctx, flags, key, val, when);
    set_done(ctx, dbi, key, !found, when.is_some(), with_get, replies);
}

/// A SET with EX, PX or EXAT (SETEX, PSETEX) is propagated as `SET key
/// value PXAT <ms>`: the time made absolute, NX/XX/GET dropped (they were
/// decided here), as Valkey rewrites it. PXAT as sent is kept as sent.
/// IFEQ, decided here too, is always dropped: replicas and AOF loaders
/// older than Valkey 8.1 would refuse it.
fn propagate_set(ctx: &mut Ctx<'_>, flags: u32, key: &[u8], val: &[u8], at_ms: Option<i64>) {
    let ifeq = flags & opt::IFEQ != 0;
    if !ctx.srv.effects.on() || (at_ms.is_none() || flags & opt::PXAT != 0) && !ifeq {
        return;
    }
    let mut n = [0u8; resp::num::I64_MAX_LEN];
    match at_ms {
        Some(t) => {
            let n = resp::num::fmt_i64(t, &mut n);
            ctx.propagate(&[b"SET", key, val, b"PXAT", n]);
        }
        None if flags & opt::KEEPTTL != 0 => ctx.propagate(&[b"SET", key, val, b"KEEPTTL"]),
        None => ctx.propagate(&[b"SET", key, val]),
    }
}

/// After a SET stored its value: WATCH and blocked clients, keyspace events
/// (`new` for a key that did not exist), and the success reply unless SET
/// GET answers with the old value instead.
fn set_done(
    ctx: &mut Ctx<'_>,
    dbi: usize,
    key: &[u8],
    new: bool,
    expires: bool,
    with_get: bool,
    replies: SetReplies,
) {
    ctx.touched(dbi, key);
    notify_write(ctx, new, "set", key);
    if expires {
        ctx.notify(notify::GENERIC, "expire", key);
    }
    if !with_get {
        match replies {
            SetReplies::OkNull => ctx.reply.ok(),
            SetReplies::OneZero => ctx.reply.int(1),
        }
    }
}

fn set(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let Some(opts) = parse_options(argv, true) else {
        return ctx.error(SYNTAX_ERR);
    };
    set_generic(
        ctx,
        opts,
        argv.get(1),
        argv.get(2),
        "set",
        SetReplies::OkNull,
    );
}

fn setnx(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    set_generic(
        ctx,
        SetOptions::only(opt::NX, None),
        argv.get(1),
        argv.get(2),
        "setnx",
        SetReplies::OneZero,
    );
}

fn setex(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let (key, ttl, val) = (argv.get(1), argv.get(2), argv.get(3));
    set_generic(
        ctx,
        SetOptions::only(opt::EX, Some(ttl)),
        key,
        val,
        "setex",
        SetReplies::OkNull,
    );
}

fn psetex(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let (key, ttl, val) = (argv.get(1), argv.get(2), argv.get(3));
    set_generic(
        ctx,
        SetOptions::only(opt::PX, Some(ttl)),
        key,
        val,
        "psetex",
        SetReplies::OkNull,
    );
}

/// GETEX. Valkey 8 looks the key up before it validates the expire time,
/// so a missing key replies nil even to `EX 0`.
fn getex(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let Some(SetOptions { flags, expire, .. }) = parse_options(argv, false) else {
        return ctx.error(SYNTAX_ERR);
    };
    let now = ctx.now_ms;
    let key = argv.get(1);
    let h = ctx.key_hash(key);
    let dbi = ctx.session.db;
    let had_ttl = match lookup_read(ctx.srv, dbi, h, key, now) {
        None => return ctx.reply.null(),
        Some(e) => match as_str(e) {
            None => return ctx.error(WRONGTYPE),
            Some(_) => e.expire_at_ms().is_some(),
        },
    };
    let when = match expire
        .map(|e| expire_at(e, flags, now, "getex"))
        .transpose()
    {
        Ok(w) => w,
        Err(msg) => return ctx.error(&msg),
    };
    let past = when.is_some_and(|t| ctx.already_expired(t));
    let db = &mut ctx.srv.keyspace.dbs[dbi];
    if let Some(s) = db.peek(h, key).and_then(as_str) {
        reply_str(&mut ctx.reply, s);
    }
    match when {
        // Only an absolute time can be in the past already.
        Some(_) if flags & (opt::EXAT | opt::PXAT) != 0 && past => {
            super::delete_already_expired(ctx, h, key);
        }
        Some(t) => {
            db.set_expire(h, key, Some(t));
            ctx.touched(dbi, key);
            ctx.notify(notify::GENERIC, "expire", key);
            super::propagate_pexpireat(ctx, key, t, argv, argv.len());
        }
        None if flags & opt::PERSIST != 0 && had_ttl => {
            db.set_expire(h, key, None);
            ctx.touched(dbi, key);
            ctx.notify(notify::GENERIC, "persist", key);
            ctx.propagate(&[b"PERSIST", key]);
        }
        None => {}
    }
}

fn getdel(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    let h = ctx.key_hash(key);
    if let Got::Found = get_generic(ctx, key, h) {
        let dbi = ctx.session.db;
        ctx.srv.keyspace.dbs[dbi].remove(h, key);
        ctx.touched(dbi, key);
        ctx.notify(notify::GENERIC, "del", key);
        ctx.propagate(&[b"DEL", key]);
    }
}

fn getset(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    let h = ctx.key_hash(key);
    if let Got::WrongType = get_generic(ctx, key, h) {
        return;
    }
    let dbi = ctx.session.db;
    let now = ctx.now_ms;
    let created = store_arg(
        &mut ctx.srv.keyspace.dbs[dbi],
        h,
        key,
        argv.get(2),
        None,
        now,
    );
    ctx.touched(dbi, key);
    notify_write(ctx, created, "set", key);
    ctx.propagate(&[b"SET", key, argv.get(2)]);
}

// ---- Multi-key -------------------------------------------------------------

fn mget(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let dbi = ctx.session.db;
    let now = ctx.now_ms;
    ctx.reply.array_len(argv.len() - 1);
    for i in 1..argv.len() {
        let key = argv.get(i);
        let h = ctx.key_hash(key);
        match lookup_read(ctx.srv, dbi, h, key, now).and_then(|e| as_str(e)) {
            Some(s) => reply_str(&mut ctx.reply, s),
            // Other types read as missing here, not as an error.
            None => ctx.reply.null(),
        }
    }
}

fn mset_generic(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, nx: bool, name: &str) {
    if argv.len().is_multiple_of(2) {
        return ctx.error(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
    }
    let dbi = ctx.session.db;
    let now = ctx.now_ms;
    if nx {
        for i in (1..argv.len()).step_by(2) {
            let key = argv.get(i);
            let h = ctx.key_hash(key);
            if lookup_write(&mut ctx.srv.keyspace.dbs[dbi], h, key, now).is_some() {
                return ctx.reply.int(0);
            }
        }
    }
    for i in (1..argv.len()).step_by(2) {
        let key = argv.get(i);
        let h = ctx.key_hash(key);
        let db = &mut ctx.srv.keyspace.dbs[dbi];
        let created = store_arg(db, h, key, argv.get(i + 1), None, now);
        ctx.touched(dbi, key);
        notify_write(ctx, created, "set", key);
    }
    if nx {
        ctx.reply.int(1);
    } else {
        ctx.reply.ok();
    }
}

fn mset(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    mset_generic(ctx, argv, false, "mset");
}

fn msetnx(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    mset_generic(ctx, argv, true, "msetnx");
}

// ---- Counters --------------------------------------------------------------

/// Valkey's `incrDecrCommand`. The TTL is kept.
fn incr_decr(ctx: &mut Ctx<'_>, key: &[u8], incr: i64) {
    let h = ctx.key_hash(key);
    let dbi = ctx.session.db;
    let now = ctx.now_ms;
    let db = &mut ctx.srv.keyspace.dbs[dbi];
    let mut created = false;
    let result = match lookup_write(db, h, key, now) {
        None => {
            created = store(db, h, key, Str::Int(incr), now);
            incr
        }
        Some(e) => {
            let Some(s) = as_str(e) else {
                return ctx.error(WRONGTYPE);
            };
            let old = match s {
                StrRef::Int(n) => n,
                // A shared string is too long to be an integer.
                StrRef::Shared(_) => return ctx.error(NOT_INT),
                StrRef::Bytes(b) | StrRef::Raw(b) => match num::parse_i64(b) {
                    Some(n) => n,
                    None => return ctx.error(NOT_INT),
                },
            };
            let Some(v) = old.checked_add(incr) else {
                return ctx.error("ERR increment or decrement would overflow");
            };
            e.set_str(StrRef::Int(v));
            v
        }
    };
    ctx.touched(dbi, key);
    notify_write(ctx, created, "incrby", key);
    ctx.reply.int(result);
}

fn incr(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    incr_decr(ctx, argv.get(1), 1);
}

fn decr(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    incr_decr(ctx, argv.get(1), -1);
}

fn incrby(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    match num::parse_i64(argv.get(2)) {
        Some(n) => incr_decr(ctx, argv.get(1), n),
        None => ctx.error(NOT_INT),
    }
}

fn decrby(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    match num::parse_i64(argv.get(2)) {
        Some(i64::MIN) => ctx.error("ERR decrement would overflow"),
        Some(n) => incr_decr(ctx, argv.get(1), -n),
        None => ctx.error(NOT_INT),
    }
}

/// Valkey's `incrbyfloatCommand`: long double arithmetic, the result stored
/// as text (not int-encoded, even when integral) and the TTL kept.
fn incrbyfloat(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    let h = ctx.key_hash(key);
    let dbi = ctx.session.db;
    let now = ctx.now_ms;
    let db = &mut ctx.srv.keyspace.dbs[dbi];
    let entry = lookup_write(db, h, key, now);
    let old = match entry.as_deref().map(as_str) {
        None => Some(LongDouble::ZERO),
        Some(None) => return ctx.error(WRONGTYPE),
        Some(Some(StrRef::Int(n))) => Some(LongDouble::from_i64(n)),
        Some(Some(StrRef::Bytes(b) | StrRef::Raw(b))) => LongDouble::parse(b),
        Some(Some(StrRef::Shared(b))) => LongDouble::parse(b),
    };
    let (Some(old), Some(incr)) = (old, LongDouble::parse(argv.get(2))) else {
        return ctx.error(NOT_FLOAT);
    };
    let sum = match old.checked_add(incr) {
        Some(v) if v.is_finite() => v,
        _ => return ctx.error("ERR increment would produce NaN or Infinity"),
    };
    let text = sum.to_human();
    ctx.reply.bulk(&text);
    let created = match entry {
        Some(e) => {
            e.set_str(StrRef::Bytes(&text));
            false
        }
        None => true,
    };
    // The result, not the increment: the sum depends on the float
    // arithmetic of whoever replays it.
    ctx.propagate(&[b"SET", key, &text, b"KEEPTTL"]);
    if created {
        store(
            &mut ctx.srv.keyspace.dbs[dbi],
            h,
            key,
            Str::Bytes(text),
            now,
        );
    }
    ctx.touched(dbi, key);
    notify_write(ctx, created, "incrbyfloat", key);
}

// ---- Byte ranges -----------------------------------------------------------

fn append(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let (key, tail) = (argv.get(1), argv.get(2));
    let h = ctx.key_hash(key);
    let dbi = ctx.session.db;
    let now = ctx.now_ms;
    let max = ctx.srv.config.proto_max_bulk_len;
    let db = &mut ctx.srv.keyspace.dbs[dbi];
    let mut created = false;
    let total = match lookup_write(db, h, key, now) {
        None => {
            created = store_arg(db, h, key, tail, None, now);
            tail.len()
        }
        Some(e) => {
            let Some(s) = as_str(e) else {
                return ctx.error(WRONGTYPE);
            };
            if too_long(max, str_len(s) as u64, tail.len() as u64) {
                return ctx.error(TOO_BIG);
            }
            let b = unshare(as_str_mut(e).expect("a string"));
            b.extend_from_slice(tail);
            b.len()
        }
    };
    ctx.touched(dbi, key);
    notify_write(ctx, created, "append", key);
    ctx.reply.int(total as i64);
}

fn strlen(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    let h = ctx.key_hash(key);
    let dbi = ctx.session.db;
    match lookup_read(ctx.srv, dbi, h, key, ctx.now_ms) {
        None => ctx.reply.int(0),
        Some(e) => match as_str(e) {
            Some(s) => ctx.reply.int(str_len(s) as i64),
            None => ctx.error(WRONGTYPE),
        },
    }
}

/// GETRANGE and SUBSTR. Valkey's index rules: negative indexes count from
/// the end, both are clamped, and an empty range replies `""`.
fn getrange(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let (Some(mut start), Some(mut end)) =
        (num::parse_i64(argv.get(2)), num::parse_i64(argv.get(3)))
    else {
        return ctx.error(NOT_INT);
    };
    let key = argv.get(1);
    let h = ctx.key_hash(key);
    let dbi = ctx.session.db;
    let Some(e) = lookup_read(ctx.srv, dbi, h, key, ctx.now_ms) else {
        return ctx.reply.bulk(b"");
    };
    let Some(s) = as_str(e) else {
        return ctx.error(WRONGTYPE);
    };
    let mut buf = [0u8; resp::num::I64_MAX_LEN];
    let b = bytes_of(s, &mut buf);
    let len = b.len() as i64;
    if start < 0 && end < 0 && start > end {
        return ctx.reply.bulk(b"");
    }
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0).min(len - 1);
    if start > end || len == 0 {
        ctx.reply.bulk(b"");
    } else {
        ctx.reply.bulk(&b[start as usize..=end as usize]);
    }
}

fn setrange(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let (key, value) = (argv.get(1), argv.get(3));
    let Some(offset) = num::parse_i64(argv.get(2)) else {
        return ctx.error(NOT_INT);
    };
    if offset < 0 {
        return ctx.error("ERR offset is out of range");
    }
    let offset = offset as u64;
    let h = ctx.key_hash(key);
    let dbi = ctx.session.db;
    let now = ctx.now_ms;
    let max = ctx.srv.config.proto_max_bulk_len;
    let db = &mut ctx.srv.keyspace.dbs[dbi];
    let existing = match lookup_write(db, h, key, now) {
        None => None,
        Some(e) => match as_str(e) {
            None => return ctx.error(WRONGTYPE),
            Some(s) => Some(str_len(s)),
        },
    };
    if value.is_empty() {
        // Nothing to write: not even a missing key is created.
        return ctx.reply.int(existing.unwrap_or(0) as i64);
    }
    if too_long(max, offset, value.len() as u64) {
        return ctx.error(TOO_BIG);
    }
    let offset = offset as usize;
    let end = offset + value.len();
    let mut created = false;
    let total = match lookup_write(db, h, key, now).and_then(as_str_mut) {
        Some(s) => {
            let b = unshare(s);
            if b.len() < end {
                b.resize(end, 0);
            }
            b[offset..end].copy_from_slice(value);
            b.len()
        }
        None => {
            let mut b = vec![0u8; end];
            b[offset..].copy_from_slice(value);
            created = store(db, h, key, Str::Raw(b), now);
            end
        }
    };
    ctx.touched(dbi, key);
    notify_write(ctx, created, "setrange", key);
    ctx.reply.int(total as i64);
}

/// SET reads its key only with GET, so its key flags depend on the
/// arguments (Valkey's `setGetKeys`, for COMMAND GETKEYSANDFLAGS).
fn set_keys(argv: &[&[u8]]) -> Option<Vec<(usize, u16)>> {
    let get = argv.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get"));
    let flags = if get {
        kf::RW | kf::ACCESS | kf::UPDATE
    } else {
        kf::OW | kf::UPDATE
    };
    Some(vec![(1, flags)])
}
