//! Commands of subsystems a standalone server with Valkey's defaults has
//! switched off: CLUSTER and ASKING answer that cluster support is
//! disabled (`cluster-enabled no`), MODULE lists no modules and refuses
//! to load any (`enable-module-command no`) — Valkey 8.1's answers.
//! ringkv has neither subsystem (README's compatibility table).

use super::server::{ADMIN_ACL, cfg_sub};
use crate::batch::ArgvRef;
use crate::command::flags::*;
use crate::command::{ArgSpec, CommandSpec, Ctx};

const CLUSTER_DISABLED: &str = "ERR This instance has cluster support disabled";
const MODULE_REFUSED: &str = "ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "cluster",
        arity: -2,
        flags: 0,
        acl_categories: &["slow"],
        group: "cluster",
        since: "3.0.0",
        summary: "A container for Cluster commands.",
        complexity: "Depends on subcommand.",
        func: Some(cluster_disabled),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "asking",
        arity: 1,
        flags: FAST,
        acl_categories: &["fast", "connection"],
        group: "cluster",
        since: "3.0.0",
        summary: "Signals that a cluster client is following an -ASK redirect.",
        func: Some(cluster_disabled),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "module",
        arity: -2,
        flags: 0,
        acl_categories: &["slow"],
        group: "server",
        since: "4.0.0",
        summary: "A container for module commands.",
        complexity: "Depends on subcommand.",
        func: None,
        subcommands: &[
            CommandSpec {
                complexity: "O(N) where N is the number of loaded modules.",
                tips: &["nondeterministic_output_order"],
                ..cfg_sub(
                    "list",
                    2,
                    ADMIN | NOSCRIPT,
                    ADMIN_ACL,
                    "4.0.0",
                    "Returns all loaded modules.",
                    module_list,
                )
            },
            CommandSpec {
                args: &[
                    ArgSpec::string("path"),
                    ArgSpec::string("arg").optional().multiple(),
                ],
                ..cfg_sub(
                    "load",
                    -3,
                    ADMIN | NOSCRIPT | NO_ASYNC_LOADING,
                    ADMIN_ACL,
                    "4.0.0",
                    "Loads a module.",
                    module_refused,
                )
            },
            CommandSpec {
                args: &[
                    ArgSpec::string("path"),
                    ArgSpec::block(
                        "configs",
                        &[ArgSpec::string("name"), ArgSpec::string("value")],
                    )
                    .token("CONFIG")
                    .optional()
                    .multiple()
                    .multiple_token(),
                    ArgSpec::string("args").token("ARGS").optional().multiple(),
                ],
                ..cfg_sub(
                    "loadex",
                    -3,
                    ADMIN | NOSCRIPT | NO_ASYNC_LOADING,
                    ADMIN_ACL,
                    "7.0.0",
                    "Loads a module using extended parameters.",
                    module_refused,
                )
            },
            CommandSpec {
                args: &[ArgSpec::string("name")],
                ..cfg_sub(
                    "unload",
                    3,
                    ADMIN | NOSCRIPT | NO_ASYNC_LOADING,
                    ADMIN_ACL,
                    "4.0.0",
                    "Unloads a module.",
                    module_refused,
                )
            },
            cfg_sub(
                "help",
                2,
                LOADING | STALE,
                &["slow"],
                "5.0.0",
                "Returns helpful text about the different subcommands.",
                module_help,
            ),
        ],
        ..CommandSpec::DEFAULT
    },
];

fn cluster_disabled(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    ctx.error(CLUSTER_DISABLED);
}

fn module_list(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    ctx.reply.array_len(0);
}

fn module_refused(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    ctx.error(MODULE_REFUSED);
}

fn module_help(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    super::reply_help(
        ctx,
        "MODULE",
        &[
            "LIST",
            "    Return a list of loaded modules.",
            "LOAD <path> [<arg> ...]",
            "    Load a module library from <path>, passing to it any optional arguments.",
            "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
            "    Load a module library from <path>, while passing it module configurations and optional arguments.",
            "UNLOAD <name>",
            "    Unload a module.",
        ],
    );
}
