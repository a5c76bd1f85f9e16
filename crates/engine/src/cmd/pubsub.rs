//! Pub/Sub commands: SUBSCRIBE UNSUBSCRIBE PSUBSCRIBE PUNSUBSCRIBE PUBLISH
//! SSUBSCRIBE SUNSUBSCRIBE SPUBLISH PUBSUB, with Valkey 8's replies
//! (`pubsub.c`). State and delivery live in [`crate::pubsub`]; the RESP2
//! subscribed-mode restriction is checked by the engine before a command
//! runs (lib.rs `resolve`).

use crate::batch::ArgvRef;
use crate::command::flags::*;
use crate::command::{ArgSpec, CommandSpec, Ctx, KeySpec, key_flags as kf};
use crate::pubsub::{self, Kind, Me};

const PS_SLOW: &[&str] = &["pubsub", "slow"];
const PS_FAST: &[&str] = &["pubsub", "fast"];
const SUB_FLAGS: u32 = PUBSUB | NOSCRIPT | LOADING | STALE | SENTINEL;

// One spec per row, like Valkey's command table.
#[allow(clippy::too_many_arguments)]
const fn ps(
    name: &'static str,
    arity: i32,
    flags: u32,
    acl: &'static [&'static str],
    since: &'static str,
    summary: &'static str,
    complexity: &'static str,
    func: crate::command::CommandFn,
    args: &'static [ArgSpec],
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        acl_categories: acl,
        group: "pubsub",
        since,
        summary,
        complexity,
        func: Some(func),
        args,
        ..CommandSpec::DEFAULT
    }
}

/// Shard commands name their channels as (not-key) key specs.
const fn keyed(spec: CommandSpec, last_key: i32) -> CommandSpec {
    CommandSpec {
        first_key: 1,
        last_key,
        key_step: 1,
        ..spec
    }
}

pub const COMMANDS: &[CommandSpec] = &[
    ps(
        "subscribe",
        -2,
        SUB_FLAGS,
        PS_SLOW,
        "2.0.0",
        "Listens for messages published to channels.",
        "O(N) where N is the number of channels to subscribe to.",
        subscribe,
        &[ArgSpec::string("channel").multiple()],
    ),
    ps(
        "unsubscribe",
        -1,
        SUB_FLAGS,
        PS_SLOW,
        "2.0.0",
        "Stops listening to messages posted to channels.",
        "O(N) where N is the number of channels to unsubscribe.",
        unsubscribe,
        &[ArgSpec::string("channel").optional().multiple()],
    ),
    ps(
        "psubscribe",
        -2,
        SUB_FLAGS,
        PS_SLOW,
        "2.0.0",
        "Listens for messages published to channels that match one or more patterns.",
        "O(N) where N is the number of patterns to subscribe to.",
        psubscribe,
        &[ArgSpec::pattern("pattern").multiple()],
    ),
    ps(
        "punsubscribe",
        -1,
        SUB_FLAGS,
        PS_SLOW,
        "2.0.0",
        "Stops listening to messages published to channels that match one or more patterns.",
        "O(N) where N is the number of patterns to unsubscribe.",
        punsubscribe,
        &[ArgSpec::pattern("pattern").optional().multiple()],
    ),
    ps(
        "publish",
        3,
        PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE | SENTINEL,
        PS_FAST,
        "2.0.0",
        "Posts a message to a channel.",
        "O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client).",
        publish,
        &[ArgSpec::string("channel"), ArgSpec::string("message")],
    ),
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::NOT_KEY).range(-1, 1, 0)],
        ..keyed(
            ps(
                "ssubscribe",
                -2,
                PUBSUB | NOSCRIPT | LOADING | STALE,
                PS_SLOW,
                "7.0.0",
                "Listens for messages published to shard channels.",
                "O(N) where N is the number of shard channels to subscribe to.",
                ssubscribe,
                &[ArgSpec::string("shardchannel").multiple()],
            ),
            -1,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::NOT_KEY).range(-1, 1, 0)],
        ..keyed(
            ps(
                "sunsubscribe",
                -1,
                PUBSUB | NOSCRIPT | LOADING | STALE,
                PS_SLOW,
                "7.0.0",
                "Stops listening to messages posted to shard channels.",
                "O(N) where N is the number of shard channels to unsubscribe.",
                sunsubscribe,
                &[ArgSpec::string("shardchannel").optional().multiple()],
            ),
            -1,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::NOT_KEY)],
        ..keyed(
            ps(
                "spublish",
                3,
                PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE,
                PS_FAST,
                "7.0.0",
                "Post a message to a shard channel",
                "O(N) where N is the number of clients subscribed to the receiving shard channel.",
                spublish,
                &[ArgSpec::string("shardchannel"), ArgSpec::string("message")],
            ),
            1,
        )
    },
    CommandSpec {
        name: "pubsub",
        arity: -2,
        flags: 0,
        acl_categories: &["slow"],
        group: "pubsub",
        since: "2.8.0",
        summary: "A container for Pub/Sub commands.",
        complexity: "Depends on subcommand.",
        func: None,
        subcommands: &[
            ps(
                "channels",
                -2,
                PUBSUB | LOADING | STALE,
                PS_SLOW,
                "2.8.0",
                "Returns the active channels.",
                "O(N) where N is the number of active channels, and assuming constant time pattern matching (relatively short channels and patterns)",
                pubsub_channels,
                &[ArgSpec::pattern("pattern").optional()],
            ),
            ps(
                "help",
                2,
                LOADING | STALE,
                &["slow"],
                "6.2.0",
                "Returns helpful text about the different subcommands.",
                "O(1)",
                pubsub_help,
                &[],
            ),
            ps(
                "numpat",
                2,
                PUBSUB | LOADING | STALE,
                PS_SLOW,
                "2.8.0",
                "Returns a count of unique pattern subscriptions.",
                "O(1)",
                pubsub_numpat,
                &[],
            ),
            ps(
                "numsub",
                -2,
                PUBSUB | LOADING | STALE,
                PS_SLOW,
                "2.8.0",
                "Returns a count of subscribers to channels.",
                "O(N) for the NUMSUB subcommand, where N is the number of requested channels",
                pubsub_numsub,
                &[ArgSpec::string("channel").optional().multiple()],
            ),
            ps(
                "shardchannels",
                -2,
                PUBSUB | LOADING | STALE,
                PS_SLOW,
                "7.0.0",
                "Returns the active shard channels.",
                "O(N) where N is the number of active shard channels, and assuming constant time pattern matching (relatively short shard channels).",
                pubsub_shardchannels,
                &[ArgSpec::pattern("pattern").optional()],
            ),
            ps(
                "shardnumsub",
                -2,
                PUBSUB | LOADING | STALE,
                PS_SLOW,
                "7.0.0",
                "Returns the count of subscribers of shard channels.",
                "O(N) for the SHARDNUMSUB subcommand, where N is the number of requested shard channels",
                pubsub_shardnumsub,
                &[ArgSpec::string("shardchannel").optional().multiple()],
            ),
        ],
        ..CommandSpec::DEFAULT
    },
];

/// `[p|s]subscribe <name> <count>` (or the unsubscribe form), as a push,
/// sent even under CLIENT REPLY OFF.
fn confirm(ctx: &mut Ctx<'_>, what: &[u8], name: Option<&[u8]>, count: usize) {
    ctx.session.reply_is_push = true;
    let r = &mut ctx.reply;
    r.push_len(3);
    r.bulk(what);
    match name {
        Some(n) => r.bulk(n),
        None => r.null(),
    }
    r.int(count as i64);
}

fn count(ctx: &Ctx<'_>, kind: Kind) -> usize {
    ctx.session.subs.as_deref().map_or(0, |s| s.count(kind))
}

fn subscribe_generic(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, kind: Kind) {
    for i in 1..argv.len() {
        let name = argv.get(i);
        pubsub::subscribe(ctx.srv, ctx.session, kind, name);
        let n = count(ctx, kind);
        confirm(ctx, kind.subscribe_msg(), Some(name), n);
    }
}

fn unsubscribe_generic(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, kind: Kind) {
    if argv.len() > 1 {
        for i in 1..argv.len() {
            let name = argv.get(i);
            pubsub::unsubscribe(ctx.srv, ctx.session, kind, name);
            let n = count(ctx, kind);
            confirm(ctx, kind.unsubscribe_msg(), Some(name), n);
        }
        return;
    }
    let held = pubsub::held(ctx.session, kind);
    if held.is_empty() {
        // Subscribed to nothing: still one reply.
        let n = count(ctx, kind);
        return confirm(ctx, kind.unsubscribe_msg(), None, n);
    }
    for name in held {
        pubsub::unsubscribe(ctx.srv, ctx.session, kind, &name);
        let n = count(ctx, kind);
        confirm(ctx, kind.unsubscribe_msg(), Some(&name), n);
    }
}

fn subscribe(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    subscribe_generic(ctx, argv, Kind::Channel);
}
fn unsubscribe(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    unsubscribe_generic(ctx, argv, Kind::Channel);
}
fn psubscribe(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    subscribe_generic(ctx, argv, Kind::Pattern);
}
fn punsubscribe(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    unsubscribe_generic(ctx, argv, Kind::Pattern);
}
fn ssubscribe(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    subscribe_generic(ctx, argv, Kind::Shard);
}
fn sunsubscribe(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    unsubscribe_generic(ctx, argv, Kind::Shard);
}

fn publish_generic(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, shard: bool) {
    let me = Me {
        id: ctx.session.id,
        reply: &mut ctx.reply,
    };
    let n = pubsub::publish(ctx.srv, Some(me), shard, argv.get(1), argv.get(2));
    // As Valkey without cluster mode: replicas deliver it to their own
    // subscribers; the AOF does not keep it.
    ctx.propagate_to_replicas(argv);
    ctx.reply.int(n as i64);
}

fn publish(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    publish_generic(ctx, argv, false);
}
fn spublish(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    publish_generic(ctx, argv, true);
}

fn channels_generic(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, kind: Kind) {
    if argv.len() > 3 {
        return super::subcommand_syntax_error(&mut ctx.reply, argv);
    }
    let pattern = (argv.len() == 3).then(|| argv.get(2));
    let names = ctx.srv.pubsub.names(kind, pattern);
    ctx.reply.array_len(names.len());
    for n in names {
        ctx.reply.bulk(n);
    }
}

fn numsub_generic(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, kind: Kind) {
    ctx.reply.array_len((argv.len() - 2) * 2);
    for i in 2..argv.len() {
        let name = argv.get(i);
        let n = ctx.srv.pubsub.subscribers(kind, name);
        ctx.reply.bulk(name);
        ctx.reply.int(n as i64);
    }
}

fn pubsub_channels(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    channels_generic(ctx, argv, Kind::Channel);
}
fn pubsub_shardchannels(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    channels_generic(ctx, argv, Kind::Shard);
}
fn pubsub_numsub(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    numsub_generic(ctx, argv, Kind::Channel);
}
fn pubsub_shardnumsub(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    numsub_generic(ctx, argv, Kind::Shard);
}
fn pubsub_numpat(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let n = ctx.srv.pubsub.len(Kind::Pattern);
    ctx.reply.int(n as i64);
}

fn pubsub_help(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    super::reply_help(
        ctx,
        "PUBSUB",
        &[
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
        ],
    );
}

/// May this command (by full name) run in RESP2 subscribed mode? Only
/// (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PING, QUIT and RESET.
pub fn allowed_in_subscribed_mode(fullname: &str) -> bool {
    matches!(
        fullname,
        "ping"
            | "subscribe"
            | "ssubscribe"
            | "unsubscribe"
            | "sunsubscribe"
            | "psubscribe"
            | "punsubscribe"
            | "quit"
            | "reset"
    )
}
