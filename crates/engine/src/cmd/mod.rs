//! Command groups. Each module exports `pub const COMMANDS: &[CommandSpec]`;
//! [`crate::table`] concatenates them.

pub mod bitmaps;
pub mod client;
pub mod connection;
pub mod hashes;
pub mod hyperloglog;
pub mod introspection;
pub mod keys;
pub mod lists;
pub mod pubsub;
pub mod server;
pub mod sets;
pub mod strings;
pub mod transactions;
pub mod zsets;

use crate::command::Ctx;

/// Valkey's shared `syntax error` reply.
pub const SYNTAX_ERR: &str = "ERR syntax error";
/// Valkey's shared reply for a bad integer argument.
pub const NOT_INT: &str = "ERR value is not an integer or out of range";

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
    ctx.reply.simple("    Prints this help.");
}
