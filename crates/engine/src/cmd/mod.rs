//! Command groups. Each module exports `pub const COMMANDS: &[CommandSpec]`;
//! [`crate::table`] concatenates them.

/// Look a command's key up as one value type (`$pick`, e.g.
/// `Value::as_hash_mut`): `Option` of the value, or — on a key of another
/// type — reply WRONGTYPE and return from the command.
macro_rules! typed_or_reply {
    ($ctx:expr, $key:expr, $read:expr, $pick:expr) => {{
        let db = $ctx.session.db;
        let h = $ctx.key_hash($key);
        match crate::cmd::lookup_typed($ctx.srv, db, $key, h, $ctx.now_ms, $read, $pick) {
            Ok(x) => x,
            Err(crate::cmd::WrongType) => {
                return $ctx.reply.error(crate::cmd::strings::WRONGTYPE);
            }
        }
    }};
}

pub mod acl;
pub mod bitmaps;
pub mod client;
pub mod commandlog;
pub mod connection;
pub mod debug;
pub mod dump;
pub mod functions;
pub mod geo;
pub mod hashes;
pub mod hyperloglog;
pub mod introspection;
pub mod keys;
pub mod lcs;
pub mod lists;
pub mod memory;
pub mod migrate;
pub mod persistence;
pub mod pubsub;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod sets;
pub mod sort;
pub mod standalone;
pub mod streams;
pub mod strings;
pub mod transactions;
pub mod zsets;

use crate::command::Ctx;

/// Valkey's shared `syntax error` reply.
pub const SYNTAX_ERR: &str = "ERR syntax error";
/// Valkey's shared reply for a bad integer argument.
pub const NOT_INT: &str = "ERR value is not an integer or out of range";

/// Valkey's reply for a count that is not a non-negative integer
/// (`getPositiveLongFromObjectOrReply`: a non-integer gets it too).
pub const NOT_POSITIVE: &str = "ERR value is out of range, must be positive";

/// A count Valkey reads with `getPositiveLongFromObjectOrReply`: `None`
/// for anything but a non-negative integer (reply [`NOT_POSITIVE`]).
pub(crate) fn parse_positive(b: &[u8]) -> Option<u64> {
    crate::num::parse_i64(b).and_then(|n| u64::try_from(n).ok())
}

/// An integer argument within `min..=max`, with Valkey's errors
/// (getRangeLongFromObjectOrReply).
pub(crate) fn parse_range(b: &[u8], min: i64, max: i64) -> Result<i64, String> {
    match crate::num::parse_i64(b) {
        None => Err(NOT_INT.into()),
        Some(n) if (min..=max).contains(&n) => Ok(n),
        Some(_) => Err(format!(
            "ERR value is out of range, value must between {min} and {max}"
        )),
    }
}

/// Valkey's `addReplySubcommandSyntaxError`: the subcommand as typed (up
/// to 128 characters), the command upper-cased.
pub(crate) fn subcommand_syntax_error(
    r: &mut resp::ReplyWriter<'_>,
    argv: crate::batch::ArgvRef<'_>,
) {
    let cmd = String::from_utf8_lossy(argv.get(0)).to_uppercase();
    let sub = String::from_utf8_lossy(argv.get(1));
    let sub: String = sub.chars().take(128).collect();
    r.error(&format!(
        "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try {cmd} HELP."
    ));
}

/// Reply with a `HELP` text: an array of status lines, the first naming
/// the command (Valkey's `addReplyHelp`).
pub fn reply_help(ctx: &mut Ctx<'_>, command: &str, lines: &[&str]) {
    ctx.reply.array_len(lines.len() + 3);
    ctx.reply.simple(&format!(
        "{command} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    for l in lines {
        ctx.reply.simple(l);
    }
    ctx.reply.simple("HELP");
    ctx.reply.simple("    Print this help.");
}

/// Valkey's `string2ull`: a strict `string2ll` that is not negative, else
/// whatever C's `strtoull` accepts whole (leading spaces, a sign, a value
/// up to u64::MAX; a `-` wraps). The argument is read as a C string.
pub(crate) fn parse_cursor(arg: &[u8]) -> Option<u64> {
    let s = arg.split(|&b| b == 0).next().unwrap_or(&[]);
    if let Some(n) = crate::num::parse_i64(s) {
        return u64::try_from(n).ok();
    }
    // C's isspace, which (unlike trim_ascii) includes vertical tab.
    let lead = s
        .iter()
        .take_while(|&&b| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
        .count();
    let s = &s[lead..];
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// A process-wide splitmix64 stream, seeded from the store's random seed
/// (HRANDFIELD, SRANDMEMBER, SPOP, ZRANDMEMBER).
pub(crate) fn rand_u64() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static STATE: AtomicU64 = AtomicU64::new(0);
    let mut s = STATE.load(Ordering::Relaxed);
    if s == 0 {
        s = store::hash::seed() | 1;
    }
    s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
    STATE.store(s, Ordering::Relaxed);
    let mut z = s;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Uniform in `0..n` (n > 0).
pub(crate) fn rand_below(n: usize) -> usize {
    (rand_u64() % n as u64) as usize
}

/// A key holds a value of another type than the command works on.
#[derive(Debug)]
pub(crate) struct WrongType;

/// Count a read lookup as Valkey's lookupKeyRead does: a keyspace hit, or
/// a miss, logged for `keymiss` unless `misses` is None (OBJECT's
/// LOOKUP_NONOTIFY). Takes the two fields rather than the server so that
/// the caller may still hold the entry it found.
pub(crate) fn count_read(
    stats: &mut crate::server::Stats,
    misses: Option<&mut crate::pubsub::KeyMisses>,
    hit: bool,
    db: usize,
    key: &[u8],
) {
    if hit {
        stats.keyspace_hits += 1;
    } else {
        stats.keyspace_misses += 1;
        if let Some(m) = misses {
            m.record(db, key);
        }
    }
}

/// Look `key` up for a command on one value type: `Ok(None)` when missing
/// (or expired: lazy expiry), `Err(WrongType)` when it holds another type.
/// `read` counts a keyspace hit or miss, as Valkey's `lookupKeyRead` does.
pub(crate) fn lookup_typed<'s, T>(
    srv: &'s mut crate::server::Server,
    db: usize,
    key: &[u8],
    hash: u64,
    now_ms: i64,
    read: bool,
    pick: fn(&mut store::Value) -> Option<&mut T>,
) -> Result<Option<&'s mut T>, WrongType> {
    // A read leaves a snapshot in progress alone; a write lookup lets it
    // keep the value as it was (see `store::freeze`).
    let d = &mut srv.keyspace.dbs[db];
    let found = if read {
        d.get_read(hash, key, now_ms)
    } else {
        d.get(hash, key, now_ms)
    };
    if read {
        count_read(
            &mut srv.stats,
            Some(&mut srv.keymisses),
            found.is_some(),
            db,
            key,
        );
    }
    match found {
        None => Ok(None),
        Some(e) => e.boxed_mut().and_then(pick).map(Some).ok_or(WrongType),
    }
}

/// After a command removed elements from `key` (of class `class`): fire
/// `event`, delete the key if it is now empty (firing `del`), and signal
/// WATCH and blocked clients.
pub(crate) fn after_removal(ctx: &mut Ctx<'_>, key: &[u8], class: u32, event: &str) {
    let db = ctx.session.db;
    let h = ctx.key_hash(key);
    let emptied = ctx.srv.keyspace.dbs[db]
        .peek(h, key)
        .is_some_and(|e| e.value().is_empty_collection());
    ctx.notify(class, event, key);
    if emptied {
        ctx.srv.keyspace.dbs[db].remove(h, key);
        ctx.notify(crate::command::notify::GENERIC, "del", key);
    }
    ctx.touched(db, key);
}

/// Store `key`, known not to exist, in `db` (Valkey's dbAdd, which RENAME,
/// COPY, MOVE and RESTORE use after deleting any old value): fire `new`.
pub(crate) fn add_key(ctx: &mut Ctx<'_>, db: usize, hash: u64, key: &[u8], entry: store::Entry) {
    ctx.srv.keyspace.dbs[db].insert(hash, key, entry, ctx.now_ms);
    ctx.notify_db(crate::command::notify::NEW, "new", db, key);
}

/// Store `key` in the session's database whether it exists or not
/// (Valkey's setKey): `new` only when it did not. Returns that.
pub(crate) fn set_key(ctx: &mut Ctx<'_>, hash: u64, key: &[u8], entry: store::Entry) -> bool {
    let db = ctx.session.db;
    let created = ctx.srv.keyspace.dbs[db]
        .insert(hash, key, entry, ctx.now_ms)
        .is_none_or(|old| old.expired);
    if created {
        ctx.notify(crate::command::notify::NEW, "new", key);
    }
    created
}

/// The expire time a command gave `key` (EXPIRE, SET EXAT, GETEX PXAT) is
/// already past: Valkey 8 removes it as an expiry (lazily with
/// `lazyfree-lazy-expire`, counted in `expired_keys`, event `expired`)
/// and propagates UNLINK with `lazyfree-lazy-expire`, else DEL.
pub(crate) fn delete_already_expired(ctx: &mut Ctx<'_>, hash: u64, key: &[u8]) {
    let db = ctx.session.db;
    let d = &mut ctx.srv.keyspace.dbs[db];
    if d.delete_expired(hash, key) {
        d.stats.expired_keys += 1;
    }
    ctx.touched(db, key);
    ctx.notify(crate::command::notify::EXPIRED, "expired", key);
    if ctx.srv.effects.on() {
        let verb = crate::effects::del_verb(ctx.srv.config.lazyfree_lazy_expire);
        ctx.propagate(&[verb, key]);
    }
}

/// HSCAN/SSCAN options after the cursor: COUNT, MATCH and (HSCAN only)
/// NOVALUES, with Valkey's errors.
pub(crate) struct ScanOpts<'a> {
    pub count: usize,
    pub pattern: Option<&'a [u8]>,
    pub novalues: bool,
}

pub(crate) fn parse_scan_opts<'a>(
    argv: crate::batch::ArgvRef<'a>,
    from: usize,
    allow_novalues: bool,
) -> Result<ScanOpts<'a>, &'static str> {
    let mut o = ScanOpts {
        count: 10,
        pattern: None,
        novalues: false,
    };
    let mut i = from;
    while i < argv.len() {
        let a = argv.get(i);
        let has_value = i + 1 < argv.len();
        if a.eq_ignore_ascii_case(b"count") && has_value {
            match crate::num::parse_i64(argv.get(i + 1)) {
                None => return Err(NOT_INT),
                Some(n) if n < 1 => return Err(SYNTAX_ERR),
                Some(n) => o.count = n as usize,
            }
            i += 2;
        } else if a.eq_ignore_ascii_case(b"match") && has_value {
            let p = argv.get(i + 1);
            o.pattern = (p != b"*").then_some(p);
            i += 2;
        } else if a.eq_ignore_ascii_case(b"novalues") {
            if !allow_novalues {
                return Err("ERR NOVALUES option can only be used in HSCAN");
            }
            o.novalues = true;
            i += 1;
        } else if a.eq_ignore_ascii_case(b"noscores") {
            return Err("ERR NOSCORES option can only be used in ZSCAN");
        } else {
            return Err(SYNTAX_ERR);
        }
    }
    Ok(o)
}

/// HRANDFIELD/ZRANDMEMBER's count and values flag (WITHVALUES or
/// WITHSCORES), checked in Valkey's order: the count (i64::MIN refused,
/// it could not be negated), then the flag, then — with the flag — that
/// the doubled reply length fits.
pub(crate) fn parse_rand_args(
    argv: crate::batch::ArgvRef<'_>,
    flag: &[u8],
) -> Result<(i64, bool), String> {
    let count = match crate::num::parse_i64(argv.get(2)) {
        None => return Err(NOT_INT.into()),
        Some(i64::MIN) => {
            return Err(format!(
                "ERR value is out of range, value must between {} and {}",
                -i64::MAX,
                i64::MAX
            ));
        }
        Some(n) => n,
    };
    let with = match argv.len() {
        3 => false,
        4 if argv.get(3).eq_ignore_ascii_case(flag) => true,
        _ => return Err(SYNTAX_ERR.into()),
    };
    if with && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Err("ERR value is out of range".into());
    }
    Ok((count, with))
}

/// `count` distinct indexes of `0..size` in random order (count < size):
/// Valkey's HRANDFIELD/SRANDMEMBER cases 3 and 4.
pub(crate) fn distinct_indexes(count: usize, size: usize) -> Vec<usize> {
    let mut picks: Vec<usize> = if count * 3 > size {
        let mut all: Vec<usize> = (0..size).collect();
        while all.len() > count {
            let i = rand_below(all.len());
            all.swap_remove(i);
        }
        all
    } else {
        let mut seen = std::collections::HashSet::with_capacity(count);
        while seen.len() < count {
            seen.insert(rand_below(size));
        }
        seen.into_iter().collect()
    };
    for i in (1..picks.len()).rev() {
        picks.swap(i, rand_below(i + 1));
    }
    picks
}

/// Parsed ZMPOP/BZMPOP/LMPOP/BLMPOP arguments: `numkeys` keys from
/// `first_key`, the side (MIN|MAX, LEFT|RIGHT) and COUNT.
pub(crate) struct Mpop<T> {
    pub first_key: usize,
    pub numkeys: usize,
    pub side: T,
    pub count: usize,
}

/// Parse the *MPOP arguments after `numkeys_at` (Valkey's
/// `zmpopGenericCommand`/`lmpopGenericCommand`); `side` reads MIN|MAX or
/// LEFT|RIGHT. `Err` carries the error reply.
pub(crate) fn parse_mpop<T>(
    argv: crate::batch::ArgvRef<'_>,
    numkeys_at: usize,
    side: fn(&[u8]) -> Option<T>,
) -> Result<Mpop<T>, &'static str> {
    let numkeys = match crate::num::parse_i64(argv.get(numkeys_at)) {
        Some(n) if n >= 1 => n as usize,
        _ => return Err("ERR numkeys should be greater than 0"),
    };
    let where_at = numkeys_at as u64 + numkeys as u64 + 1;
    if where_at >= argv.len() as u64 {
        return Err(SYNTAX_ERR);
    }
    let where_at = where_at as usize;
    let Some(side) = side(argv.get(where_at)) else {
        return Err(SYNTAX_ERR);
    };
    let mut count = None;
    let mut j = where_at + 1;
    while j < argv.len() {
        if count.is_none() && argv.get(j).eq_ignore_ascii_case(b"count") && j + 1 < argv.len() {
            match crate::num::parse_i64(argv.get(j + 1)) {
                Some(n) if n >= 1 => count = Some(n as usize),
                _ => return Err("ERR count should be greater than 0"),
            }
            j += 2;
        } else {
            return Err(SYNTAX_ERR);
        }
    }
    Ok(Mpop {
        first_key: numkeys_at + 1,
        numkeys,
        side,
        count: count.unwrap_or(1),
    })
}

// ---- Propagation (the write-effects stream, see `crate::effects`) ----------
//
// Each helper returns at once when nobody consumes effects, before it
// formats anything: on the hot path they cost one branch.

/// A command removed `key` as a whole where a replica should (SPOP of the
/// whole set, RESTORE with a past TTL): UNLINK with
/// `lazyfree-lazy-server-del`, else DEL.
pub(crate) fn propagate_server_del(ctx: &mut Ctx<'_>, key: &[u8]) {
    if !ctx.srv.effects.on() {
        return;
    }
    let verb = crate::effects::del_verb(ctx.srv.config.lazyfree_lazy_server_del);
    ctx.propagate(&[verb, key]);
}

/// `PEXPIREAT key <at_ms> argv[rest..]`: a relative or seconds expiry made
/// absolute (EXPIRE's NX/XX/GT/LT kept as sent; GETEX passes none).
pub(crate) fn propagate_pexpireat(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    at_ms: i64,
    argv: crate::batch::ArgvRef<'_>,
    rest: usize,
) {
    if !ctx.srv.effects.on() {
        return;
    }
    let mut n = [0u8; resp::num::I64_MAX_LEN];
    let n = resp::num::fmt_i64(at_ms, &mut n);
    let mut out: Vec<&[u8]> = vec![b"PEXPIREAT", key, n];
    out.extend((rest..argv.len()).map(|i| argv.get(i)));
    ctx.propagate(&out);
}

/// `verb key <count>` (`LPOP l 2`, `ZPOPMIN z 1`): what LMPOP, BLMPOP,
/// ZMPOP and BZMPOP propagate, `count` being how many they popped.
pub(crate) fn propagate_pop_count(ctx: &mut Ctx<'_>, verb: &[u8], key: &[u8], count: usize) {
    if !ctx.srv.effects.on() {
        return;
    }
    let mut n = [0u8; resp::num::I64_MAX_LEN];
    let n = resp::num::fmt_u64(count as u64, &mut n);
    ctx.propagate(&[verb, key, n]);
}

/// A key Valkey's `signalModifiedKey` reports as modified although nothing
/// in it changed (LTRIM of its whole range): WATCH sees it, the dirty
/// counter does not grow, so nothing is propagated.
pub(crate) fn signal_unchanged(ctx: &mut Ctx<'_>, db: usize, key: &[u8]) {
    ctx.srv.watches.touch(db, key);
}
