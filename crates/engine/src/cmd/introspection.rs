//! COMMAND and its subcommands: the table's metadata as clients read it
//! (cluster-aware clients use the key positions; tools use DOCS).

use crate::batch::ArgvRef;
use crate::command::flags::{self, *};
use crate::command::{
    ArgKind, ArgSpec, BeginSearch, CommandSpec, Ctx, FindKeys, KeySpec, arg_flags, doc_flags,
    key_flags,
};
use crate::getkeys;
use crate::table::{Table, table};

const fn sub(
    name: &'static str,
    arity: i32,
    summary: &'static str,
    complexity: &'static str,
    func: crate::command::CommandFn,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags: LOADING | STALE,
        acl_categories: &["slow", "connection"],
        group: "server",
        since: "7.0.0",
        summary,
        complexity,
        func: Some(func),
        ..CommandSpec::DEFAULT
    }
}

// Argument specs, as Valkey 8's command JSON gives them (COMMAND DOCS).
const COMMAND_NAMES_ARG: &[ArgSpec] = &[ArgSpec::string("command-name").optional().multiple()];
const COMMAND_LIST_ARGS: &[ArgSpec] = &[ArgSpec::oneof(
    "filterby",
    &[
        ArgSpec::string("module-name").token("MODULE"),
        ArgSpec::string("category").token("ACLCAT"),
        ArgSpec::pattern("pattern").token("PATTERN"),
    ],
)
.token("FILTERBY")
.optional()];

pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    tips: &["nondeterministic_output_order"],
    name: "command",
    arity: -1,
    flags: LOADING | STALE,
    acl_categories: &["slow", "connection"],
    group: "server",
    since: "2.8.13",
    summary: "Returns detailed information about all commands.",
    complexity: "O(N) where N is the total number of commands",
    func: Some(command_all),
    subcommands: &[
        CommandSpec {
            since: "2.8.13",
            ..sub("count", 2, "Returns a count of commands.", "O(1)", count)
        },
        CommandSpec {
            tips: &["nondeterministic_output_order"],
            history: &[(
                "7.0.0",
                "Allowed to be called with no argument to get info on all commands.",
            )],
            since: "2.8.13",
            args: COMMAND_NAMES_ARG,
            ..sub(
                "info",
                -2,
                "Returns information about one, multiple or all commands.",
                "O(N) where N is the number of commands to look up",
                info,
            )
        },
        CommandSpec {
            tips: &["nondeterministic_output_order"],
            args: COMMAND_NAMES_ARG,
            ..sub(
                "docs",
                -2,
                "Returns documentary information about one, multiple or all commands.",
                "O(N) where N is the number of commands to look up",
                docs,
            )
        },
        CommandSpec {
            tips: &["nondeterministic_output_order"],
            args: COMMAND_LIST_ARGS,
            ..sub(
                "list",
                -2,
                "Returns a list of command names.",
                "O(N) where N is the total number of commands",
                list,
            )
        },
        CommandSpec {
            since: "2.8.13",
            args: &[
                ArgSpec::string("command"),
                ArgSpec::string("arg").optional().multiple(),
            ],
            ..sub(
                "getkeys",
                -3,
                "Extracts the key names from an arbitrary command.",
                "O(N) where N is the number of arguments to the command",
                getkeys,
            )
        },
        CommandSpec {
            args: &[
                ArgSpec::string("command"),
                ArgSpec::string("arg").optional().multiple(),
            ],
            ..sub(
                "getkeysandflags",
                -3,
                "Extracts the key names and access flags for an arbitrary command.",
                "O(N) where N is the number of arguments to the command",
                getkeysandflags,
            )
        },
        CommandSpec {
            since: "5.0.0",
            ..sub(
                "help",
                2,
                "Returns helpful text about the different subcommands.",
                "O(1)",
                help,
            )
        },
    ],
    ..CommandSpec::DEFAULT
}];

fn reply_info(ctx: &mut Ctx<'_>, t: &Table, idx: usize) {
    let e = &t.entries[idx];
    let s = e.spec;
    let (first, last, step, movable) = getkeys::legacy_range(s.key_specs);
    let all_flags = s.flags | if movable { MOVABLE_KEYS } else { 0 };
    let r = &mut ctx.reply;
    r.array_len(10);
    r.bulk(e.fullname.as_bytes());
    r.int(s.arity as i64);
    let fl: Vec<&str> = flags::NAMES
        .iter()
        .filter(|(f, _)| all_flags & f != 0)
        .map(|(_, n)| *n)
        .collect();
    r.set_len(fl.len());
    for f in fl {
        r.simple(f);
    }
    r.int(first as i64);
    r.int(last as i64);
    r.int(step as i64);
    r.set_len(s.acl_categories.len());
    for c in s.acl_categories {
        r.simple(&format!("@{c}"));
    }
    r.set_len(s.tips.len());
    for tip in s.tips {
        r.bulk(tip.as_bytes());
    }
    r.set_len(s.key_specs.len());
    for k in s.key_specs {
        reply_key_spec(r, k);
    }
    // An empty set without subcommands, an array of them otherwise (as
    // Valkey answers).
    let subs = e.subs.clone();
    if subs.is_empty() {
        ctx.reply.set_len(0);
    } else {
        ctx.reply.array_len(subs.len());
    }
    for sidx in subs {
        reply_info(ctx, t, sidx);
    }
}

/// Valkey's `addReplyCommandKeySpecs` for one spec.
fn reply_key_spec(r: &mut resp::ReplyWriter<'_>, k: &KeySpec) {
    r.map_len(3 + usize::from(k.notes.is_some()));
    if let Some(notes) = k.notes {
        r.bulk(b"notes");
        r.bulk(notes.as_bytes());
    }
    r.bulk(b"flags");
    reply_key_flags(r, k.flags);
    r.bulk(b"begin_search");
    r.map_len(2);
    r.bulk(b"type");
    match k.begin {
        BeginSearch::Index(pos) => {
            r.bulk(b"index");
            r.bulk(b"spec");
            r.map_len(1);
            r.bulk(b"index");
            r.int(pos as i64);
        }
        BeginSearch::Keyword {
            keyword,
            start_from,
        } => {
            r.bulk(b"keyword");
            r.bulk(b"spec");
            r.map_len(2);
            r.bulk(b"keyword");
            r.bulk(keyword.as_bytes());
            r.bulk(b"startfrom");
            r.int(start_from as i64);
        }
        BeginSearch::Unknown => {
            r.bulk(b"unknown");
            r.bulk(b"spec");
            r.map_len(0);
        }
    }
    r.bulk(b"find_keys");
    r.map_len(2);
    r.bulk(b"type");
    match k.find {
        FindKeys::Range {
            last_key,
            key_step,
            limit,
        } => {
            r.bulk(b"range");
            r.bulk(b"spec");
            r.map_len(3);
            r.bulk(b"lastkey");
            r.int(last_key as i64);
            r.bulk(b"keystep");
            r.int(key_step as i64);
            r.bulk(b"limit");
            r.int(limit as i64);
        }
        FindKeys::Keynum {
            keynum_idx,
            first_key,
            key_step,
        } => {
            r.bulk(b"keynum");
            r.bulk(b"spec");
            r.map_len(3);
            r.bulk(b"keynumidx");
            r.int(keynum_idx as i64);
            r.bulk(b"firstkey");
            r.int(first_key as i64);
            r.bulk(b"keystep");
            r.int(key_step as i64);
        }
        FindKeys::Unknown => {
            r.bulk(b"unknown");
            r.bulk(b"spec");
            r.map_len(0);
        }
    }
}

fn reply_key_flags(r: &mut resp::ReplyWriter<'_>, bits: u16) {
    let names = key_flags::NAMES.iter().filter(|(f, _)| bits & f != 0);
    r.set_len(names.clone().count());
    for (_, n) in names {
        r.simple(n);
    }
}

fn command_all(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let t = table();
    ctx.reply.array_len(t.listed().count());
    for i in t.listed() {
        reply_info(ctx, t, i);
    }
}

fn count(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    ctx.reply.int(table().listed().count() as i64);
}

fn info(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let t = table();
    if argv.len() == 2 {
        return command_all(ctx, argv);
    }
    ctx.reply.array_len(argv.len() - 2);
    for j in 2..argv.len() {
        match t.lookup_fullname(argv.get(j)) {
            Some(i) => reply_info(ctx, t, i),
            None => ctx.reply.null(),
        }
    }
}

fn reply_docs(ctx: &mut Ctx<'_>, t: &Table, idx: usize) {
    let e = &t.entries[idx];
    let s = e.spec;
    let has_subs = !e.subs.is_empty();
    let has_args = !s.args.is_empty();
    ctx.reply.map_len(
        3 + usize::from(!s.complexity.is_empty())
            + usize::from(s.doc_flags != 0)
            + usize::from(s.deprecated_since.is_some())
            + usize::from(s.replaced_by.is_some())
            + usize::from(!s.history.is_empty())
            + usize::from(has_args)
            + usize::from(has_subs),
    );
    ctx.reply.bulk(b"summary");
    ctx.reply.bulk(s.summary.as_bytes());
    ctx.reply.bulk(b"since");
    ctx.reply.bulk(s.since.as_bytes());
    ctx.reply.bulk(b"group");
    ctx.reply.bulk(s.group.as_bytes());
    if !s.complexity.is_empty() {
        ctx.reply.bulk(b"complexity");
        ctx.reply.bulk(s.complexity.as_bytes());
    }
    if s.doc_flags != 0 {
        ctx.reply.bulk(b"doc_flags");
        let names = doc_flags::NAMES
            .iter()
            .filter(|(f, _)| s.doc_flags & f != 0);
        ctx.reply.set_len(names.clone().count());
        for (_, n) in names {
            ctx.reply.simple(n);
        }
    }
    if let Some(v) = s.deprecated_since {
        ctx.reply.bulk(b"deprecated_since");
        ctx.reply.bulk(v.as_bytes());
    }
    if let Some(v) = s.replaced_by {
        ctx.reply.bulk(b"replaced_by");
        ctx.reply.bulk(v.as_bytes());
    }
    if !s.history.is_empty() {
        ctx.reply.bulk(b"history");
        ctx.reply.set_len(s.history.len());
        for (version, change) in s.history {
            ctx.reply.array_len(2);
            ctx.reply.bulk(version.as_bytes());
            ctx.reply.bulk(change.as_bytes());
        }
    }
    if has_args {
        ctx.reply.bulk(b"arguments");
        reply_args(&mut ctx.reply, s.args);
    }
    if has_subs {
        ctx.reply.bulk(b"subcommands");
        let subs = e.subs.clone();
        ctx.reply.map_len(subs.len());
        for sidx in subs {
            ctx.reply.bulk(t.entries[sidx].fullname.as_bytes());
            reply_docs(ctx, t, sidx);
        }
    }
}

/// Valkey's `addReplyCommandArgList`: name, type, display_text (not for
/// oneof/block, defaulting to the name), key_spec_index, token, since,
/// deprecated_since, flags, arguments (oneof/block).
fn reply_args(r: &mut resp::ReplyWriter<'_>, args: &[ArgSpec]) {
    r.array_len(args.len());
    for a in args {
        let nested = matches!(a.kind, ArgKind::Oneof | ArgKind::Block);
        let len = 2
            + usize::from(!nested)
            + usize::from(a.kind.key_spec_index().is_some())
            + usize::from(a.token.is_some())
            + usize::from(a.summary.is_some())
            + usize::from(a.since.is_some())
            + usize::from(a.deprecated_since.is_some())
            + usize::from(a.flags != 0)
            + usize::from(nested);
        r.map_len(len);
        r.bulk(b"name");
        r.bulk(a.name.as_bytes());
        r.bulk(b"type");
        r.bulk(a.kind.as_str().as_bytes());
        if !nested {
            r.bulk(b"display_text");
            r.bulk(a.display_text.unwrap_or(a.name).as_bytes());
        }
        if let Some(key_spec_index) = a.kind.key_spec_index() {
            r.bulk(b"key_spec_index");
            r.int(key_spec_index as i64);
        }
        if let Some(t) = a.token {
            r.bulk(b"token");
            r.bulk(t.as_bytes());
        }
        if let Some(v) = a.summary {
            r.bulk(b"summary");
            r.bulk(v.as_bytes());
        }
        if let Some(v) = a.since {
            r.bulk(b"since");
            r.bulk(v.as_bytes());
        }
        if let Some(v) = a.deprecated_since {
            r.bulk(b"deprecated_since");
            r.bulk(v.as_bytes());
        }
        if a.flags != 0 {
            r.bulk(b"flags");
            let names = arg_flags::NAMES.iter().filter(|(f, _)| a.flags & f != 0);
            r.set_len(names.clone().count());
            for (_, n) in names {
                r.simple(n);
            }
        }
        if nested {
            r.bulk(b"arguments");
            reply_args(r, a.subargs);
        }
    }
}

fn docs(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let t = table();
    let found: Vec<usize> = if argv.len() == 2 {
        t.listed().collect()
    } else {
        (2..argv.len())
            .filter_map(|j| t.lookup_fullname(argv.get(j)))
            .collect()
    };
    ctx.reply.map_len(found.len());
    for i in found {
        ctx.reply.bulk(t.entries[i].fullname.as_bytes());
        reply_docs(ctx, t, i);
    }
}

fn list(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let t = table();
    enum Filter {
        None,
        Module,
        AclCat(String),
        Pattern(Vec<u8>),
    }
    let filter = match argv.len() {
        2 => Filter::None,
        5 if argv.get(2).eq_ignore_ascii_case(b"filterby") => {
            let kind = argv.get(3);
            let val = argv.get(4);
            if kind.eq_ignore_ascii_case(b"module") {
                Filter::Module
            } else if kind.eq_ignore_ascii_case(b"aclcat") {
                Filter::AclCat(String::from_utf8_lossy(val).to_ascii_lowercase())
            } else if kind.eq_ignore_ascii_case(b"pattern") {
                Filter::Pattern(val.to_vec())
            } else {
                ctx.error(super::SYNTAX_ERR);
                return;
            }
        }
        _ => {
            ctx.error(super::SYNTAX_ERR);
            return;
        }
    };
    let listed: Vec<usize> = t.listed().collect();
    let names: Vec<&str> = t
        .entries
        .iter()
        .enumerate()
        .filter(|(i, e)| listed.contains(&e.parent.unwrap_or(*i)))
        .map(|(_, e)| e)
        .filter(|e| match &filter {
            Filter::None => true,
            Filter::Module => false,
            Filter::AclCat(c) => e.spec.acl_categories.iter().any(|x| x == c),
            Filter::Pattern(p) => crate::glob::matches(p, e.fullname.as_bytes(), true),
        })
        .map(|e| e.fullname.as_str())
        .collect();
    ctx.reply.array_len(names.len());
    for n in names {
        ctx.reply.bulk(n.as_bytes());
    }
}

fn getkeys(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    getkeys_reply(ctx, argv, false);
}

fn getkeysandflags(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    getkeys_reply(ctx, argv, true);
}

/// Valkey's `getKeysSubcommandImpl`.
fn getkeys_reply(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, with_flags: bool) {
    let t = table();
    let cmd: Vec<&[u8]> = (2..argv.len()).map(|j| argv.get(j)).collect();
    // A container needs a known subcommand (Valkey's `lookupCommand`).
    let idx = t.lookup(cmd[0]).and_then(|i| {
        if t.entries[i].subs.is_empty() || cmd.len() == 1 {
            Some(i)
        } else {
            t.lookup_sub(i, cmd[1])
        }
    });
    let Some(idx) = idx else {
        ctx.error("ERR Invalid command specified");
        return;
    };
    let s = t.entries[idx].spec;
    let argc = cmd.len() as i32;
    if !getkeys::has_keys(s) {
        ctx.error("ERR The command has no key arguments");
        return;
    }
    if (s.arity > 0 && argc != s.arity) || argc < -s.arity {
        ctx.error("ERR Invalid number of arguments specified for command");
        return;
    }
    let keys = getkeys::command_keys(s, &cmd);
    if keys.is_empty() && s.flags & NO_MANDATORY_KEYS == 0 {
        ctx.error("ERR Invalid arguments specified for command");
        return;
    }
    ctx.reply.array_len(keys.len());
    for (pos, bits) in keys {
        if with_flags {
            ctx.reply.array_len(2);
            ctx.reply.bulk(cmd[pos]);
            reply_key_flags(&mut ctx.reply, bits);
        } else {
            ctx.reply.bulk(cmd[pos]);
        }
    }
}

fn help(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    super::reply_help(
        ctx,
        "COMMAND",
        &[
            "(no subcommand)",
            "    Return details about all commands.",
            "COUNT",
            "    Return the total number of commands in this server.",
            "LIST",
            "    Return a list of all commands in this server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full command.",
        ],
    );
}
