//! ACL: users and permissions (SETUSER GETUSER DELUSER USERS LIST WHOAMI
//! CAT GENPASS DRYRUN LOG SAVE LOAD HELP), replies and errors as Valkey
//! 8.1's. The users themselves: crate::acl.

use super::server::{ADMIN_ACL, cfg_sub};
use crate::acl::{self, Acl, UserId};
use crate::batch::ArgvRef;
use crate::command::flags::*;
use crate::command::{ArgSpec, CommandSpec, Ctx};
use crate::session::Session;
use crate::table::table;
use crate::{ClientId, Event};

const ALL_NODES: &[&str] = &["request_policy:all_nodes", "response_policy:all_succeeded"];
const USERS_O_N: &str = "O(N). Where N is the number of configured users.";
const NO_ACL_FILE: &str = "ERR This instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a configuration file set) in order to store users in the configuration.";

pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "acl",
    arity: -2,
    flags: 0,
    acl_categories: &["slow"],
    group: "server",
    since: "6.0.0",
    summary: "A container for Access List Control commands.",
    complexity: "Depends on subcommand.",
    func: None,
    subcommands: &[
        CommandSpec {
            complexity: "O(1) since the categories and commands are a fixed set.",
            args: &[ArgSpec::string("category").optional()],
            ..cfg_sub(
                "cat",
                -2,
                NOSCRIPT | LOADING | STALE,
                &["slow"],
                "6.0.0",
                "Lists the ACL categories, or the commands inside a category.",
                acl_cat,
            )
        },
        CommandSpec {
            complexity: "O(1) amortized time considering the typical user.",
            tips: ALL_NODES,
            args: &[ArgSpec::string("username").multiple()],
            ..cfg_sub(
                "deluser",
                -3,
                ADMIN | NOSCRIPT | LOADING | STALE,
                ADMIN_ACL,
                "6.0.0",
                "Deletes ACL users, and terminates their connections.",
                acl_deluser,
            )
        },
        CommandSpec {
            complexity: "O(1).",
            args: &[
                ArgSpec::string("username"),
                ArgSpec::string("command"),
                ArgSpec::string("arg").optional().multiple(),
            ],
            ..cfg_sub(
                "dryrun",
                -4,
                ADMIN | NOSCRIPT | LOADING | STALE,
                ADMIN_ACL,
                "7.0.0",
                "Simulates the execution of a command by a user, without executing the command.",
                acl_dryrun,
            )
        },
        CommandSpec {
            complexity: "O(1)",
            args: &[ArgSpec::integer("bits").optional()],
            ..cfg_sub(
                "genpass",
                -2,
                NOSCRIPT | LOADING | STALE,
                &["slow"],
                "6.0.0",
                "Generates a pseudorandom, secure password that can be used to identify ACL users.",
                acl_genpass,
            )
        },
        CommandSpec {
            complexity: "O(N). Where N is the number of password, command and pattern rules that the user has.",
            history: &[
                ("6.2.0", "Added Pub/Sub channel patterns."),
                (
                    "7.0.0",
                    "Added selectors and changed the format of key and channel patterns from a list to their rule representation.",
                ),
            ],
            args: &[ArgSpec::string("username")],
            ..cfg_sub(
                "getuser",
                3,
                ADMIN | NOSCRIPT | LOADING | STALE,
                ADMIN_ACL,
                "6.0.0",
                "Lists the ACL rules of a user.",
                acl_getuser,
            )
        },
        CommandSpec {
            complexity: "O(1)",
            ..cfg_sub(
                "help",
                2,
                LOADING | STALE,
                &["slow"],
                "6.0.0",
                "Returns helpful text about the different subcommands.",
                acl_help,
            )
        },
        CommandSpec {
            complexity: USERS_O_N,
            ..cfg_sub(
                "list",
                2,
                ADMIN | NOSCRIPT | LOADING | STALE,
                ADMIN_ACL,
                "6.0.0",
                "Dumps the effective rules in ACL file format.",
                acl_list,
            )
        },
        CommandSpec {
            complexity: USERS_O_N,
            ..cfg_sub(
                "load",
                2,
                ADMIN | NOSCRIPT | LOADING | STALE,
                ADMIN_ACL,
                "6.0.0",
                "Reloads the rules from the configured ACL file.",
                acl_load,
            )
        },
        CommandSpec {
            complexity: "O(N) with N being the number of entries shown.",
            history: &[(
                "7.2.0",
                "Added entry ID, timestamp created, and timestamp last updated.",
            )],
            args: &[ArgSpec::oneof(
                "operation",
                &[
                    ArgSpec::integer("count"),
                    ArgSpec::pure_token("reset", "RESET"),
                ],
            )
            .optional()],
            ..cfg_sub(
                "log",
                -2,
                ADMIN | NOSCRIPT | LOADING | STALE,
                ADMIN_ACL,
                "6.0.0",
                "Lists recent security events generated due to ACL rules.",
                acl_log,
            )
        },
        CommandSpec {
            complexity: USERS_O_N,
            tips: ALL_NODES,
            ..cfg_sub(
                "save",
                2,
                ADMIN | NOSCRIPT | LOADING | STALE,
                ADMIN_ACL,
                "6.0.0",
                "Saves the effective ACL rules in the configured ACL file.",
                acl_save,
            )
        },
        CommandSpec {
            complexity: "O(N). Where N is the number of rules provided.",
            tips: ALL_NODES,
            history: &[
                ("6.2.0", "Added Pub/Sub channel patterns."),
                ("7.0.0", "Added selectors and key based permissions."),
            ],
            args: &[
                ArgSpec::string("username"),
                ArgSpec::string("rule").optional().multiple(),
            ],
            ..cfg_sub(
                "setuser",
                -3,
                ADMIN | NOSCRIPT | LOADING | STALE,
                ADMIN_ACL,
                "6.0.0",
                "Creates and modifies an ACL user and its rules.",
                acl_setuser,
            )
        },
        CommandSpec {
            complexity: USERS_O_N,
            ..cfg_sub(
                "users",
                2,
                ADMIN | NOSCRIPT | LOADING | STALE,
                ADMIN_ACL,
                "6.0.0",
                "Lists all ACL users.",
                acl_users,
            )
        },
        CommandSpec {
            complexity: "O(1)",
            ..cfg_sub(
                "whoami",
                2,
                NOSCRIPT | LOADING | STALE,
                &["slow"],
                "6.0.0",
                "Returns the authenticated username of the current connection.",
                acl_whoami,
            )
        },
    ],
    ..CommandSpec::DEFAULT
}];

fn args_of(argv: ArgvRef<'_>, from: usize) -> Vec<String> {
    (from..argv.len())
        .map(|i| String::from_utf8_lossy(argv.get(i)).into_owned())
        .collect()
}

fn acl_setuser(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let name = argv.get(2);
    if name.iter().any(|&c| c == b' ' || c == 0) {
        return ctx.error("ERR Usernames can't contain spaces or null characters");
    }
    let name = String::from_utf8_lossy(name).into_owned();
    match ctx.srv.acl.set_user(&name, &args_of(argv, 3)) {
        Ok(()) => {
            ctx.srv.sync_busy_auth();
            drop_refused_subscribers(ctx);
            ctx.reply.ok();
        }
        Err((rule, why)) if rule.is_empty() => ctx.error(&format!("ERR {why}")),
        Err((rule, why)) => ctx.error(&format!(
            "ERR Error in ACL SETUSER modifier '{rule}': {why}"
        )),
    }
}

fn acl_getuser(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let acl = &ctx.srv.acl;
    let Some(u) = acl.id(argv.get(2)).and_then(|id| acl.user(id)) else {
        return ctx.reply.null();
    };
    let flags = u.flags();
    let passwords = u.password_hashes();
    let (root, selectors) = u.selector_fields();
    let r = &mut ctx.reply;
    r.map_len(6);
    r.bulk(b"flags");
    r.set_len(flags.len());
    for f in flags {
        r.bulk(f.as_bytes());
    }
    r.bulk(b"passwords");
    r.array_len(passwords.len());
    for p in &passwords {
        r.bulk(p.as_bytes());
    }
    let fields = |r: &mut resp::ReplyWriter<'_>, s: &acl::SelectorFields| {
        r.bulk(b"commands");
        r.bulk(s.commands.as_bytes());
        r.bulk(b"keys");
        r.bulk(s.keys.as_bytes());
        r.bulk(b"channels");
        r.bulk(s.channels.as_bytes());
    };
    fields(r, &root);
    r.bulk(b"selectors");
    r.array_len(selectors.len());
    for s in &selectors {
        r.map_len(3);
        fields(r, s);
    }
}

fn acl_deluser(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let names = args_of(argv, 2);
    if names.iter().any(|n| n == "default") {
        return ctx.error("ERR The 'default' user cannot be removed");
    }
    let mut deleted: Vec<UserId> = Vec::new();
    for n in &names {
        deleted.extend(ctx.srv.acl.delete_user(n));
    }
    if !deleted.is_empty() {
        ctx.srv.sync_busy_auth();
        disconnect_users(ctx, &deleted);
    }
    ctx.reply.int(deleted.len() as i64);
}

/// Valkey's `ACLKillPubsubClientsIfNeeded`: a client subscribed to a
/// channel or pattern its user's rules no longer allow is disconnected.
fn drop_refused_subscribers(ctx: &mut Ctx<'_>) {
    let acl = &ctx.srv.acl;
    let refused = |s: &Session| {
        let (Some(subs), Some(u)) = (s.subs.as_deref(), acl.user(s.user)) else {
            return false;
        };
        !u.unrestricted()
            && (subs.channels.iter().any(|c| !u.channel_allowed(c, false))
                || subs.shard.iter().any(|c| !u.channel_allowed(c, false))
                || subs.patterns.iter().any(|p| !u.channel_allowed(p, true)))
    };
    let ids = clients_where(ctx, refused);
    close(ctx, ids);
}

/// Disconnects the clients of the users in `gone` (deleted by ACL
/// DELUSER, or left out of the file by ACL LOAD).
fn disconnect_users(ctx: &mut Ctx<'_>, gone: &[UserId]) {
    let ids = clients_where(ctx, |s| gone.contains(&s.user));
    close(ctx, ids);
}

/// The clients `pick` chooses, the caller included, none already closing.
fn clients_where(ctx: &Ctx<'_>, pick: impl Fn(&Session) -> bool) -> Vec<ClientId> {
    let me = std::iter::once(&*ctx.session);
    let others = (ctx.srv.clients.map.values())
        .filter_map(|s| s.as_deref())
        .filter(|s| s.id != ctx.session.id);
    me.chain(others)
        .filter(|s| !s.close_asap && pick(s))
        .map(|s| s.id)
        .collect()
}

/// Closes `ids`: the caller's connection once its reply is sent, the
/// others at once (as CLIENT KILL closes them).
fn close(ctx: &mut Ctx<'_>, ids: Vec<ClientId>) {
    for id in ids {
        if id == ctx.session.id {
            ctx.session.close_after_reply = true;
            continue;
        }
        if let Some(s) = ctx.srv.clients.get_mut(id) {
            s.close_asap = true;
        }
        ctx.srv.events.push(Event::Close {
            client: id,
            flush: false,
        });
    }
}

fn acl_users(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let names: Vec<String> = ctx
        .srv
        .acl
        .users_sorted()
        .iter()
        .map(|u| u.name.clone())
        .collect();
    ctx.reply.array_len(names.len());
    for n in &names {
        ctx.reply.bulk(n.as_bytes());
    }
}

fn acl_list(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let lines: Vec<String> = ctx
        .srv
        .acl
        .users_sorted()
        .iter()
        .map(|u| u.describe())
        .collect();
    ctx.reply.array_len(lines.len());
    for l in &lines {
        ctx.reply.bulk(l.as_bytes());
    }
}

fn acl_whoami(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let name = ctx.session.user_name.clone();
    ctx.reply.bulk(name.as_bytes());
}

fn acl_cat(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    if argv.len() == 2 {
        ctx.reply.array_len(acl::CATEGORIES.len());
        for c in acl::CATEGORIES {
            ctx.reply.bulk(c.as_bytes());
        }
        return;
    }
    if argv.len() > 3 {
        return super::subcommand_syntax_error(&mut ctx.reply, argv);
    }
    let cat = String::from_utf8_lossy(argv.get(2)).into_owned();
    match Acl::category_commands(&cat) {
        Some(names) => {
            ctx.reply.array_len(names.len());
            for n in &names {
                ctx.reply.bulk(n.as_bytes());
            }
        }
        None => ctx.error(&format!("ERR Unknown category '{cat}'")),
    }
}

fn acl_genpass(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    if argv.len() > 3 {
        return super::subcommand_syntax_error(&mut ctx.reply, argv);
    }
    let bits = if argv.len() >= 3 {
        match crate::num::parse_i64(argv.get(2)) {
            Some(b) => b,
            None => return ctx.error(crate::cmd::NOT_INT),
        }
    } else {
        256
    };
    if !(1..=4096).contains(&bits) {
        return ctx.error("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096");
    }
    let chars = (bits as usize).div_ceil(4);
    let mut raw = vec![0u8; chars.div_ceil(2)];
    if !secure_random(&mut raw) {
        return ctx.error("ERR Unable to generate a secure random password");
    }
    let hex = crate::num::hex(&raw);
    ctx.reply.bulk(&hex.as_bytes()[..chars]);
}

/// Fills `buf` from the kernel's CSPRNG (getrandom(2)).
fn secure_random(buf: &mut [u8]) -> bool {
    let mut filled = 0;
    while filled < buf.len() {
        let rest = &mut buf[filled..];
        // SAFETY: getrandom(2) writes at most `rest.len()` bytes into
        // `rest`, which is valid, writable memory of that length.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n <= 0 {
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        filled += n as usize;
    }
    true
}

fn acl_dryrun(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let Some(user) = ctx.srv.acl.id(argv.get(2)) else {
        return ctx.error(&format!(
            "ERR User '{}' not found",
            String::from_utf8_lossy(argv.get(2))
        ));
    };
    let args: Vec<&[u8]> = argv.iter().skip(3).collect();
    let t = table();
    let Some(i) = t.lookup_command(&args) else {
        return ctx.error(&format!(
            "ERR Command '{}' not found",
            String::from_utf8_lossy(args[0])
        ));
    };
    if !t.entries[i].accepts_argc(args.len()) {
        return ctx.error(&format!(
            "ERR wrong number of arguments for '{}' command",
            t.entries[i].fullname
        ));
    }
    match ctx.srv.acl.check(user, i, &args) {
        Ok(()) => ctx.reply.ok(),
        Err(d) => {
            let name = ctx.srv.acl.name(user).to_string();
            let msg = d.message(&name, &t.entries[i].fullname, &args, true);
            ctx.reply.bulk(msg.as_bytes());
        }
    }
}

fn acl_log(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    if argv.len() > 3 {
        return super::subcommand_syntax_error(&mut ctx.reply, argv);
    }
    let mut count = 10usize;
    if argv.len() == 3 {
        let a = argv.get(2);
        if a.eq_ignore_ascii_case(b"reset") {
            ctx.srv.acl.log.reset();
            return ctx.reply.ok();
        }
        match crate::num::parse_i64(a) {
            Some(n) => count = n.max(0) as usize,
            None => return ctx.error(crate::cmd::NOT_INT),
        }
    }
    let now = ctx.now_ms;
    let entries: Vec<acl::log::Entry> = ctx.srv.acl.log.newest(count).cloned().collect();
    let r = &mut ctx.reply;
    r.array_len(entries.len());
    for e in &entries {
        r.map_len(10);
        r.bulk(b"count");
        r.int(e.count as i64);
        r.bulk(b"reason");
        r.bulk(e.reason.as_bytes());
        r.bulk(b"context");
        r.bulk(e.context.as_str().as_bytes());
        r.bulk(b"object");
        r.bulk(&e.object);
        r.bulk(b"username");
        r.bulk(&e.username);
        r.bulk(b"age-seconds");
        r.double((now - e.updated_ms).max(0) as f64 / 1000.0);
        r.bulk(b"client-info");
        r.bulk(e.client_info.as_bytes());
        r.bulk(b"entry-id");
        r.int(e.entry_id as i64);
        r.bulk(b"timestamp-created");
        r.int(e.created_ms);
        r.bulk(b"timestamp-last-updated");
        r.int(e.updated_ms);
    }
}

/// The `aclfile`, if one is set.
fn acl_file(ctx: &Ctx<'_>) -> Option<String> {
    ctx.srv.config.get("aclfile").filter(|f| !f.is_empty())
}

fn acl_save(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let Some(path) = acl_file(ctx) else {
        return ctx.error(NO_ACL_FILE);
    };
    match acl::file::save(&ctx.srv.acl, std::path::Path::new(&path)) {
        Ok(()) => ctx.reply.ok(),
        Err(e) => {
            crate::log::warning(&format!("Saving ACL file {path}: {e}"));
            ctx.error(
                "ERR There was an error trying to save the ACLs. Please check the server logs for more information",
            )
        }
    }
}

fn acl_load(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let Some(path) = acl_file(ctx) else {
        return ctx.error(NO_ACL_FILE);
    };
    let pubsub_all = ctx.srv.config.acl_pubsub_all();
    let users = match acl::file::read(std::path::Path::new(&path), pubsub_all) {
        Ok(u) => u,
        Err(acl::file::ReadError::Open(e)) => return ctx.error(&format!("ERR {e}")),
        Err(acl::file::ReadError::Lines(e)) => {
            return ctx.error(&format!(
                "ERR {e} WARNING: ACL errors detected, no change to the previously active ACL rules was performed"
            ));
        }
    };
    let gone = ctx.srv.acl.redeclare(&users);
    ctx.srv.sync_busy_auth();
    disconnect_users(ctx, &gone);
    drop_refused_subscribers(ctx);
    ctx.reply.ok();
}

fn acl_help(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    super::reply_help(
        ctx,
        "ACL",
        &[
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
        ],
    );
}
