//! SAVE, BGSAVE [SCHEDULE], LASTSAVE and BGREWRITEAOF (the snapshot
//! itself is `crate::snapshot`, the AOF `crate::aof`; SHUTDOWN's save and
//! DEBUG RELOAD call them too).

use super::SYNTAX_ERR;
use crate::batch::ArgvRef;
use crate::command::flags::*;
use crate::command::{ArgSpec, CommandSpec, Ctx};
use crate::snapshot;

const ADMIN_ACL: &[&str] = &["admin", "slow", "dangerous"];

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "save",
        arity: 1,
        flags: ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI,
        acl_categories: ADMIN_ACL,
        group: "server",
        since: "1.0.0",
        summary: "Synchronously saves the database(s) to disk.",
        complexity: "O(N) where N is the total number of keys in all databases",
        func: Some(save),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        history: &[
            ("3.2.2", "Added the `SCHEDULE` option."),
            ("8.1.0", "Added the `CANCEL` option."),
        ],
        name: "bgsave",
        arity: -1,
        flags: ADMIN | NOSCRIPT | NO_ASYNC_LOADING,
        acl_categories: ADMIN_ACL,
        group: "server",
        since: "1.0.0",
        summary: "Asynchronously saves the database(s) to disk.",
        complexity: "O(1)",
        func: Some(bgsave),
        args: &[ArgSpec::oneof(
            "operation",
            &[
                ArgSpec::pure_token("schedule", "SCHEDULE").since("3.2.2"),
                ArgSpec::pure_token("cancel", "CANCEL").since("8.1.0"),
            ],
        )
        .optional()],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "bgrewriteaof",
        arity: 1,
        flags: ADMIN | NOSCRIPT | NO_ASYNC_LOADING,
        acl_categories: ADMIN_ACL,
        group: "server",
        since: "1.0.0",
        summary: "Asynchronously rewrites the append-only file to disk.",
        complexity: "O(1)",
        func: Some(bgrewriteaof),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        name: "lastsave",
        arity: 1,
        flags: LOADING | STALE | FAST,
        acl_categories: &["admin", "fast", "dangerous"],
        group: "server",
        since: "1.0.0",
        summary: "Returns the Unix timestamp of the last successful save to disk.",
        func: Some(lastsave),
        ..CommandSpec::DEFAULT
    },
];

fn save(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    match snapshot::save_now(ctx.srv, ctx.now_ms) {
        Ok(()) => ctx.reply.ok(),
        Err(e) => ctx.error(&e),
    }
}

fn bgsave(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    if argv.len() > 2 || (argv.len() == 2 && !argv.get(1).eq_ignore_ascii_case(b"schedule")) {
        return ctx.error(SYNTAX_ERR);
    }
    let schedule = argv.len() == 2;
    if schedule && (ctx.srv.aof.rewrite.is_some() || ctx.srv.repl.feeds.snapshot.is_some()) {
        ctx.srv.persist.bgsave_scheduled = true;
        return ctx.reply.simple("Background saving scheduled");
    }
    match snapshot::start_bgsave(ctx.srv, ctx.now_ms) {
        Ok(()) => ctx.reply.simple("Background saving started"),
        Err(e) => ctx.error(&e),
    }
}

fn bgrewriteaof(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    match crate::aof::start_rewrite(ctx.srv, ctx.now_ms) {
        Ok(true) => ctx
            .reply
            .simple("Background append only file rewriting started"),
        Ok(false) => ctx
            .reply
            .simple("Background append only file rewriting scheduled"),
        Err(e) => ctx.error(&e),
    }
}

fn lastsave(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    ctx.reply.int(ctx.srv.persist.last_save_s);
}
