//! DUMP and RESTORE in Valkey's payload format (a value as RDB writes it,
//! the RDB version and a CRC64), so payloads cross between ringkv and
//! Valkey both ways.
//!
//! `sanitize-dump-payload` is accepted in all three settings, and a payload
//! is always validated deeply: ringkv keeps values in its own encodings,
//! so every element of a listpack or ziplist is decoded and checked on
//! the way in whatever the setting.

use super::{NOT_INT, SYNTAX_ERR};
use crate::batch::ArgvRef;
use crate::cmd::strings::{lookup_read, lookup_write};
use crate::command::flags::*;
use crate::command::{ArgSpec, CommandSpec, Ctx, KeySpec, key_flags as kf, notify};
use store::Entry;

const RESTORE_ARGS: &[ArgSpec] = &[
    ArgSpec::key("key", 0),
    ArgSpec::integer("ttl"),
    ArgSpec::string("serialized-value"),
    ArgSpec::pure_token("replace", "REPLACE")
        .since("3.0.0")
        .optional(),
    ArgSpec::pure_token("absttl", "ABSTTL")
        .since("5.0.0")
        .optional(),
    ArgSpec::integer("seconds")
        .token("IDLETIME")
        .since("5.0.0")
        .optional(),
    ArgSpec::integer("frequency")
        .token("FREQ")
        .since("5.0.0")
        .optional(),
];

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        tips: &["nondeterministic_output"],
        name: "dump",
        arity: 2,
        flags: READONLY,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl_categories: &["keyspace", "read", "slow"],
        group: "generic",
        since: "2.6.0",
        summary: "Returns a serialized representation of the value stored at a key.",
        complexity: "O(1) to access the key and additional O(N*M) to serialize it, where N is the number of objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1).",
        func: Some(dump),
        args: &[ArgSpec::key("key", 0)],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::OW | kf::UPDATE)],
        history: &[
            ("3.0.0", "Added the `REPLACE` modifier."),
            ("5.0.0", "Added the `ABSTTL` modifier."),
            ("5.0.0", "Added the `IDLETIME` and `FREQ` options."),
        ],
        name: "restore",
        arity: -4,
        flags: WRITE | DENYOOM,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl_categories: &["keyspace", "write", "slow", "dangerous"],
        group: "generic",
        since: "2.6.0",
        summary: "Creates a key from the serialized representation of a value.",
        complexity: "O(1) to create the new key and additional O(N*M) to reconstruct the serialized value, where N is the number of objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1). However for sorted set values the complexity is O(N*M*log(N)) because inserting values into sorted sets is O(log(N)).",
        func: Some(restore),
        args: RESTORE_ARGS,
        ..CommandSpec::DEFAULT
    },
    // What a cluster's MIGRATE sends; standalone it is RESTORE.
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::OW | kf::UPDATE)],
        history: &[
            ("3.0.0", "Added the `REPLACE` modifier."),
            ("5.0.0", "Added the `ABSTTL` modifier."),
            ("5.0.0", "Added the `IDLETIME` and `FREQ` options."),
        ],
        doc_flags: crate::command::doc_flags::SYSCMD,
        name: "restore-asking",
        arity: -4,
        flags: WRITE | DENYOOM | ASKING,
        first_key: 1,
        last_key: 1,
        key_step: 1,
        acl_categories: &["keyspace", "write", "slow", "dangerous"],
        group: "server",
        since: "3.0.0",
        summary: "An internal command for migrating keys in a cluster.",
        complexity: "O(1) to create the new key and additional O(N*M) to reconstruct the serialized value, where N is the number of objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1). However for sorted set values the complexity is O(N*M*log(N)) because inserting values into sorted sets is O(log(N)).",
        func: Some(restore),
        args: RESTORE_ARGS,
        ..CommandSpec::DEFAULT
    },
];

fn dump(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    let h = ctx.key_hash(key);
    let db = ctx.session.db;
    let compress = ctx.srv.config.rdbcompression;
    let Some(e) = lookup_read(ctx.srv, db, h, key, ctx.now_ms) else {
        return ctx.reply.null();
    };
    let payload = rdb::payload::dump_with(e.value(), compress);
    ctx.reply.bulk(&payload);
}

fn restore(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let (mut replace, mut absttl) = (false, false);
    let (mut idle_s, mut freq): (Option<i64>, Option<i64>) = (None, None);
    let mut j = 4;
    while j < argv.len() {
        let a = argv.get(j);
        let more = j + 1 < argv.len();
        if a.eq_ignore_ascii_case(b"replace") {
            replace = true;
        } else if a.eq_ignore_ascii_case(b"absttl") {
            absttl = true;
        } else if a.eq_ignore_ascii_case(b"idletime") && more && freq.is_none() {
            let Some(v) = ctx_int(ctx, argv.get(j + 1)) else {
                return;
            };
            if v < 0 {
                return ctx.error("ERR Invalid IDLETIME value, must be >= 0");
            }
            idle_s = Some(v);
            j += 1;
        } else if a.eq_ignore_ascii_case(b"freq") && more && idle_s.is_none() {
            let Some(v) = ctx_int(ctx, argv.get(j + 1)) else {
                return;
            };
            if !(0..=255).contains(&v) {
                return ctx.error("ERR Invalid FREQ value, must be >= 0 and <= 255");
            }
            freq = Some(v);
            j += 1;
        } else {
            return ctx.error(SYNTAX_ERR);
        }
        j += 1;
    }
    let key = argv.get(1);
    let h = ctx.key_hash(key);
    let now = ctx.now_ms;
    let dbi = ctx.session.db;
    let exists = lookup_write(&mut ctx.srv.keyspace.dbs[dbi], h, key, now).is_some();
    if exists && !replace {
        return ctx.error("BUSYKEY Target key name already exists.");
    }
    let Some(mut ttl) = ctx_int(ctx, argv.get(2)) else {
        return;
    };
    if ttl < 0 {
        return ctx.error("ERR Invalid TTL value, must be >= 0");
    }
    let Some(body) = rdb::payload::verify(argv.get(3), ctx.srv.config.rdb_version_check_relaxed)
    else {
        return ctx.error("ERR DUMP payload version or checksum are wrong");
    };
    let Ok(value) = rdb::restore::restore(body, &ctx.srv.config.encoding) else {
        return ctx.error("ERR Bad data format");
    };
    if ttl > 0 && !absttl {
        ttl = ttl.saturating_add(now);
    }
    let past = ttl > 0 && ctx.already_expired(ttl);
    let db = &mut ctx.srv.keyspace.dbs[dbi];
    if past {
        // Already expired: the key ends up deleted (Valkey propagates a DEL).
        if exists {
            db.delete(h, key);
            ctx.touched(dbi, key);
            ctx.notify(notify::GENERIC, "del", key);
            super::propagate_server_del(ctx, key);
        }
        return ctx.reply.ok();
    }
    let mut entry = Entry::keyed(key, value);
    entry.set_expire_at_ms((ttl > 0).then_some(ttl));
    let policy = db.access_policy();
    let to_u8 = |v: i64| v as u8;
    if let Some(bits) =
        store::restored_access(policy, now, idle_s.map(|v| v as u64), freq.map(to_u8))
    {
        entry.set_access(bits);
    }
    super::add_key(ctx, dbi, h, key, entry);
    ctx.touched(dbi, key);
    ctx.notify(notify::GENERIC, "restore", key);
    if ttl > 0 && !absttl {
        propagate_absttl(ctx, argv, ttl);
    }
    ctx.reply.ok();
}

/// RESTORE with a relative TTL is propagated with the TTL made absolute
/// and ABSTTL appended, the rest as sent (Valkey's rewrite).
fn propagate_absttl(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, at_ms: i64) {
    if !ctx.srv.effects.on() {
        return;
    }
    let mut n = [0u8; resp::num::I64_MAX_LEN];
    let n = resp::num::fmt_i64(at_ms, &mut n);
    let mut out: Vec<&[u8]> = (0..argv.len()).map(|i| argv.get(i)).collect();
    out[2] = n;
    out.push(b"ABSTTL");
    ctx.propagate(&out);
}

/// An integer argument, or Valkey's "not an integer" reply.
fn ctx_int(ctx: &mut Ctx<'_>, arg: &[u8]) -> Option<i64> {
    let v = crate::num::parse_i64(arg);
    if v.is_none() {
        ctx.error(NOT_INT);
    }
    v
}
