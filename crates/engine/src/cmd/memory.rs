//! MEMORY: USAGE STATS DOCTOR MALLOC-STATS PURGE HELP, with Valkey 8's
//! replies. The figures come from [`crate::memory`]; the allocator's own
//! report and purge from the server crate's [`crate::AllocatorOps`].

use super::{NOT_INT, SYNTAX_ERR, reply_help};
use crate::batch::ArgvRef;
use crate::command::flags::*;
use crate::command::{ArgSpec, CommandSpec, Ctx, KeySpec, key_flags as kf};
use crate::memory::Overhead;

const fn sub(
    name: &'static str,
    arity: i32,
    flags: u32,
    acl: &'static [&'static str],
    summary: &'static str,
    complexity: &'static str,
    func: crate::command::CommandFn,
) -> CommandSpec {
    CommandSpec {
        complexity,
        ..super::server::cfg_sub(name, arity, flags, acl, "4.0.0", summary, func)
    }
}

const ALLOCATOR_COMPLEXITY: &str = "Depends on how much memory is allocated, could be slow";

pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "memory",
    arity: -2,
    acl_categories: &["slow"],
    group: "server",
    since: "4.0.0",
    summary: "A container for memory diagnostics commands.",
    complexity: "Depends on subcommand.",
    subcommands: &[
        CommandSpec {
            tips: &[
                "nondeterministic_output",
                "request_policy:all_shards",
                "response_policy:special",
            ],
            ..sub(
                "doctor",
                2,
                0,
                &["slow"],
                "Outputs a memory problems report.",
                "O(1)",
                doctor,
            )
        },
        sub(
            "help",
            2,
            LOADING | STALE,
            &["slow"],
            "Returns helpful text about the different subcommands.",
            "O(1)",
            help,
        ),
        CommandSpec {
            tips: &[
                "nondeterministic_output",
                "request_policy:all_shards",
                "response_policy:special",
            ],
            ..sub(
                "malloc-stats",
                2,
                LOADING,
                &["slow"],
                "Returns the allocator statistics.",
                ALLOCATOR_COMPLEXITY,
                malloc_stats,
            )
        },
        CommandSpec {
            tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
            ..sub(
                "purge",
                2,
                LOADING,
                &["slow"],
                "Asks the allocator to release memory.",
                ALLOCATOR_COMPLEXITY,
                purge,
            )
        },
        CommandSpec {
            tips: &[
                "nondeterministic_output",
                "request_policy:all_shards",
                "response_policy:special",
            ],
            ..sub(
                "stats",
                2,
                0,
                &["slow"],
                "Returns details about memory usage.",
                "O(1)",
                stats,
            )
        },
        CommandSpec {
            key_specs: &[KeySpec::index(2, kf::RO)],
            first_key: 2,
            last_key: 2,
            key_step: 1,
            args: &[
                ArgSpec::key("key", 0),
                ArgSpec::integer("count").token("SAMPLES").optional(),
            ],
            ..sub(
                "usage",
                -3,
                READONLY,
                &["read", "slow"],
                "Estimates the memory usage of a key.",
                "O(N) where N is the number of samples.",
                usage,
            )
        },
    ],
    ..CommandSpec::DEFAULT
}];

/// MEMORY USAGE key [SAMPLES n]: the key's entry and value as the store
/// accounts them, plus its share of its database's table. The store
/// counts every element, so SAMPLES is checked (as Valkey parses it) and
/// otherwise has no effect. The key is looked up without expiring it or
/// touching its access time, as Valkey's `dbFind` does.
fn usage(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let mut j = 3;
    while j < argv.len() {
        if argv.get(j).eq_ignore_ascii_case(b"samples") && j + 1 < argv.len() {
            match crate::num::parse_i64(argv.get(j + 1)) {
                None => return ctx.error(NOT_INT),
                Some(n) if n < 0 => return ctx.error(SYNTAX_ERR),
                Some(_) => {}
            }
            j += 2;
        } else {
            return ctx.error(SYNTAX_ERR);
        }
    }
    let key = argv.get(2);
    let hash = ctx.key_hash(key);
    let db = &ctx.srv.keyspace.dbs[ctx.session.db];
    let Some(e) = db.peek(hash, key) else {
        return ctx.reply.null();
    };
    let share = db.table_overhead() / db.len().max(1);
    let bytes = e.memory_usage() + share;
    ctx.reply.int(bytes as i64);
}

/// MEMORY STATS: Valkey's map, in its order (31 fields plus one `db.N` map
/// per database that has a table).
fn stats(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let mh = Overhead::read(ctx.srv);
    let r = &mut ctx.reply;
    let int = |r: &mut resp::ReplyWriter<'_>, name: &str, v: i64| {
        r.bulk(name.as_bytes());
        r.int(v);
    };
    let dbl = |r: &mut resp::ReplyWriter<'_>, name: &str, v: f64| {
        r.bulk(name.as_bytes());
        r.double(v);
    };
    r.map_len(31 + mh.dbs.len());
    int(r, "peak.allocated", mh.peak as i64);
    int(r, "total.allocated", mh.used as i64);
    int(r, "startup.allocated", mh.startup as i64);
    int(r, "replication.backlog", 0);
    int(r, "clients.slaves", 0);
    int(r, "clients.normal", mh.clients_normal as i64);
    int(r, "cluster.links", 0);
    int(r, "aof.buffer", 0);
    int(r, "lua.caches", 0);
    int(r, "functions.caches", 0);
    for d in &mh.dbs {
        r.bulk(format!("db.{}", d.id).as_bytes());
        r.map_len(2);
        int(r, "overhead.hashtable.main", d.main as i64);
        int(r, "overhead.hashtable.expires", d.expires as i64);
    }
    int(r, "overhead.db.hashtable.lut", 0);
    int(
        r,
        "overhead.db.hashtable.rehashing",
        mh.rehashing_bytes as i64,
    );
    int(r, "overhead.total", mh.total as i64);
    int(r, "db.dict.rehashing.count", mh.rehashing as i64);
    int(r, "keys.count", mh.keys as i64);
    int(r, "keys.bytes-per-key", mh.bytes_per_key as i64);
    int(r, "dataset.bytes", mh.dataset as i64);
    dbl(r, "dataset.percentage", mh.dataset_perc);
    dbl(r, "peak.percentage", mh.peak_perc);
    int(r, "allocator.allocated", mh.alloc.allocated as i64);
    int(r, "allocator.active", mh.alloc.active as i64);
    int(r, "allocator.resident", mh.alloc.resident as i64);
    int(r, "allocator.muzzy", mh.alloc.muzzy as i64);
    dbl(r, "allocator-fragmentation.ratio", mh.allocator_frag());
    int(
        r,
        "allocator-fragmentation.bytes",
        mh.allocator_frag_bytes(),
    );
    dbl(r, "allocator-rss.ratio", mh.allocator_rss());
    int(r, "allocator-rss.bytes", mh.allocator_rss_bytes());
    dbl(r, "rss-overhead.ratio", mh.rss_extra());
    int(r, "rss-overhead.bytes", mh.rss_extra_bytes());
    dbl(r, "fragmentation", mh.total_frag());
    int(r, "fragmentation.bytes", mh.total_frag_bytes());
}

fn doctor(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let report = crate::memory::doctor_report(ctx.srv);
    ctx.reply.verbatim("txt", report.as_bytes());
}

fn malloc_stats(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    match ctx.srv.allocator_ops {
        Some(ops) => {
            let text = (ops.stats_text)();
            ctx.reply.verbatim("txt", text.as_bytes());
        }
        None => ctx
            .reply
            .bulk(b"Stats not supported for the current allocator"),
    }
}

/// MEMORY PURGE: jemalloc gives its dirty pages back; with no allocator
/// to ask there is nothing to purge, and Valkey says OK then too.
fn purge(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    match ctx.srv.allocator_ops {
        Some(ops) if !(ops.purge)() => ctx.error("ERR Error purging dirty pages"),
        _ => ctx.reply.ok(),
    }
}

fn help(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    reply_help(
        ctx,
        "MEMORY",
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    );
}
