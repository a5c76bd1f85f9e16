//! Commands of subsystems a standalone server with Valkey's defaults has
//! switched off: CLUSTER and ASKING answer that cluster support is
//! disabled (`cluster-enabled no`), MODULE lists no modules and refuses
//! to load any (`enable-module-command no`) — Valkey 8.1's answers.
//! ringkv has neither subsystem (README's compatibility table).

use super::server::{ADMIN_ACL, cfg_sub};
use crate::batch::ArgvRef;
use crate::command::flags::*;
use crate::command::{ArgSpec, CommandSpec, Ctx, doc_flags};

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
        func: None,
        subcommands: CLUSTER_SUBCOMMANDS,
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

/// Valkey 8.1's CLUSTER subcommands, as its command table has them: with
/// cluster support off it still resolves them (an unknown one, or one
/// with the wrong number of arguments, gets the usual errors) before
/// answering that cluster support is disabled.
/// ADDSLOTSRANGE's and DELSLOTSRANGE's arguments.
const SLOT_RANGE_ARGS: &[ArgSpec] = &[ArgSpec::block(
    "range",
    &[ArgSpec::integer("start-slot"), ArgSpec::integer("end-slot")],
)
.multiple()];

const CLUSTER_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        args: &[ArgSpec::integer("slot").multiple()],
        ..cluster_sub(
            "addslots",
            -3,
            ADMIN | STALE | NO_ASYNC_LOADING,
            "3.0.0",
            "Assigns new hash slots to a node.",
            "O(N) where N is the total number of hash slot arguments",
        )
    },
    CommandSpec {
        args: SLOT_RANGE_ARGS,
        ..cluster_sub(
            "addslotsrange",
            -4,
            ADMIN | STALE | NO_ASYNC_LOADING,
            "7.0.0",
            "Assigns new hash slot ranges to a node.",
            "O(N) where N is the total number of the slots between the start slot and end slot arguments.",
        )
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        ..cluster_sub(
            "bumpepoch",
            2,
            ADMIN | STALE | NO_ASYNC_LOADING,
            "3.0.0",
            "Advances the cluster config epoch.",
            "O(1)",
        )
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        args: &[ArgSpec::string("node-id")],
        ..cluster_sub(
            "count-failure-reports",
            3,
            ADMIN | STALE,
            "3.0.0",
            "Returns the number of active failure reports active for a node.",
            "O(N) where N is the number of failure reports",
        )
    },
    CommandSpec {
        args: &[ArgSpec::integer("slot")],
        ..cluster_sub(
            "countkeysinslot",
            3,
            STALE,
            "3.0.0",
            "Returns the number of keys in a hash slot.",
            "O(1)",
        )
    },
    CommandSpec {
        args: &[ArgSpec::integer("slot").multiple()],
        ..cluster_sub(
            "delslots",
            -3,
            ADMIN | STALE | NO_ASYNC_LOADING,
            "3.0.0",
            "Sets hash slots as unbound for a node.",
            "O(N) where N is the total number of hash slot arguments",
        )
    },
    CommandSpec {
        args: SLOT_RANGE_ARGS,
        ..cluster_sub(
            "delslotsrange",
            -4,
            ADMIN | STALE | NO_ASYNC_LOADING,
            "7.0.0",
            "Sets hash slot ranges as unbound for a node.",
            "O(N) where N is the total number of the slots between the start slot and end slot arguments.",
        )
    },
    CommandSpec {
        args: &[ArgSpec::oneof(
            "options",
            &[
                ArgSpec::pure_token("force", "FORCE"),
                ArgSpec::pure_token("takeover", "TAKEOVER"),
            ],
        )
        .optional()],
        ..cluster_sub(
            "failover",
            -2,
            ADMIN | STALE | NO_ASYNC_LOADING,
            "3.0.0",
            "Forces a replica to perform a manual failover of its primary.",
            "O(1)",
        )
    },
    cluster_sub(
        "flushslots",
        2,
        ADMIN | STALE | NO_ASYNC_LOADING,
        "3.0.0",
        "Deletes all slots information from a node.",
        "O(1)",
    ),
    CommandSpec {
        args: &[ArgSpec::string("node-id")],
        ..cluster_sub(
            "forget",
            3,
            ADMIN | STALE | NO_ASYNC_LOADING,
            "3.0.0",
            "Removes a node from the nodes table.",
            "O(1)",
        )
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        args: &[ArgSpec::integer("slot"), ArgSpec::integer("count")],
        ..cluster_sub(
            "getkeysinslot",
            4,
            STALE,
            "3.0.0",
            "Returns the key names in a hash slot.",
            "O(N) where N is the number of requested keys",
        )
    },
    cluster_sub(
        "help",
        2,
        LOADING | STALE,
        "5.0.0",
        "Returns helpful text about the different subcommands.",
        "O(1)",
    ),
    CommandSpec {
        tips: &["nondeterministic_output"],
        ..cluster_sub(
            "info",
            2,
            LOADING | STALE,
            "3.0.0",
            "Returns information about the state of a node.",
            "O(1)",
        )
    },
    CommandSpec {
        args: &[ArgSpec::string("key")],
        ..cluster_sub(
            "keyslot",
            3,
            STALE,
            "3.0.0",
            "Returns the hash slot for a key.",
            "O(N) where N is the number of bytes in the key",
        )
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        ..cluster_sub(
            "links",
            2,
            STALE,
            "7.0.0",
            "Returns a list of all TCP links to and from peer nodes.",
            "O(N) where N is the total number of Cluster nodes",
        )
    },
    CommandSpec {
        args: &[
            ArgSpec::string("ip"),
            ArgSpec::integer("port"),
            ArgSpec::integer("cluster-bus-port")
                .since("4.0.0")
                .optional(),
        ],
        history: &[("4.0.0", "Added the optional `cluster_bus_port` argument.")],
        ..cluster_sub(
            "meet",
            -4,
            ADMIN | STALE | NO_ASYNC_LOADING,
            "3.0.0",
            "Forces a node to handshake with another node.",
            "O(1)",
        )
    },
    cluster_sub(
        "myid",
        2,
        LOADING | STALE,
        "3.0.0",
        "Returns the ID of a node.",
        "O(1)",
    ),
    CommandSpec {
        tips: &["nondeterministic_output"],
        ..cluster_sub(
            "myshardid",
            2,
            LOADING | STALE,
            "7.2.0",
            "Returns the shard ID of a node.",
            "O(1)",
        )
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        ..cluster_sub(
            "nodes",
            2,
            LOADING | STALE,
            "3.0.0",
            "Returns the cluster configuration for a node.",
            "O(N) where N is the total number of Cluster nodes",
        )
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        args: &[ArgSpec::string("node-id")],
        ..cluster_sub(
            "replicas",
            3,
            ADMIN | STALE,
            "5.0.0",
            "Lists the replica nodes of a primary node.",
            "O(N) where N is the number of replicas.",
        )
    },
    CommandSpec {
        args: &[ArgSpec::string("node-id")],
        ..cluster_sub(
            "replicate",
            3,
            ADMIN | STALE | NO_ASYNC_LOADING,
            "3.0.0",
            "Configure a node as replica of a primary node.",
            "O(1)",
        )
    },
    CommandSpec {
        args: &[ArgSpec::oneof(
            "reset-type",
            &[
                ArgSpec::pure_token("hard", "HARD"),
                ArgSpec::pure_token("soft", "SOFT"),
            ],
        )
        .optional()],
        ..cluster_sub(
            "reset",
            -2,
            ADMIN | NOSCRIPT | STALE,
            "3.0.0",
            "Resets a node.",
            "O(N) where N is the number of known nodes. The command may execute a FLUSHALL as a side effect.",
        )
    },
    cluster_sub(
        "saveconfig",
        2,
        ADMIN | STALE | NO_ASYNC_LOADING,
        "3.0.0",
        "Forces a node to save the cluster configuration to disk.",
        "O(1)",
    ),
    CommandSpec {
        args: &[ArgSpec::integer("config-epoch")],
        ..cluster_sub(
            "set-config-epoch",
            3,
            ADMIN | STALE | NO_ASYNC_LOADING,
            "3.0.0",
            "Sets the configuration epoch for a new node.",
            "O(1)",
        )
    },
    CommandSpec {
        args: &[
            ArgSpec::integer("slot"),
            ArgSpec::oneof(
                "subcommand",
                &[
                    ArgSpec::string("importing")
                        .token("IMPORTING")
                        .display("node-id"),
                    ArgSpec::string("migrating")
                        .token("MIGRATING")
                        .display("node-id"),
                    ArgSpec::string("node").token("NODE").display("node-id"),
                    ArgSpec::pure_token("stable", "STABLE"),
                ],
            ),
            ArgSpec::integer("timeout")
                .token("TIMEOUT")
                .since("8.0.0")
                .optional(),
        ],
        history: &[("8.0.0", "Added the `TIMEOUT` option.")],
        ..cluster_sub(
            "setslot",
            -4,
            ADMIN | STALE | NO_ASYNC_LOADING,
            "3.0.0",
            "Binds a hash slot to a node.",
            "O(1)",
        )
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        ..cluster_sub(
            "shards",
            2,
            LOADING | STALE,
            "7.0.0",
            "Returns the mapping of cluster slots to shards.",
            "O(N) where N is the total number of cluster nodes",
        )
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        args: &[ArgSpec::string("node-id")],
        doc_flags: doc_flags::DEPRECATED,
        deprecated_since: Some("5.0.0"),
        replaced_by: Some("`CLUSTER REPLICAS`"),
        ..cluster_sub(
            "slaves",
            3,
            ADMIN | STALE,
            "3.0.0",
            "Lists the replica nodes of a primary node.",
            "O(N) where N is the number of replicas.",
        )
    },
    CommandSpec {
        tips: &["nondeterministic_output", "request_policy:all_shards"],
        args: &[ArgSpec::oneof(
            "filter",
            &[
                ArgSpec::block(
                    "slotsrange",
                    &[ArgSpec::integer("start-slot"), ArgSpec::integer("end-slot")],
                )
                .token("SLOTSRANGE"),
                ArgSpec::block(
                    "orderby",
                    &[
                        ArgSpec::string("metric"),
                        ArgSpec::integer("limit").token("LIMIT").optional(),
                        ArgSpec::oneof(
                            "order",
                            &[
                                ArgSpec::pure_token("asc", "ASC"),
                                ArgSpec::pure_token("desc", "DESC"),
                            ],
                        )
                        .optional(),
                    ],
                )
                .token("ORDERBY"),
            ],
        )],
        ..cluster_sub(
            "slot-stats",
            -4,
            LOADING | STALE,
            "8.0.0",
            "Return an array of slot usage statistics for slots assigned to the current node.",
            "O(N) where N is the total number of slots based on arguments. O(N*log(N)) with ORDERBY subcommand.",
        )
    },
    CommandSpec {
        tips: &["nondeterministic_output"],
        history: &[
            ("4.0.0", "Added node IDs."),
            ("7.0.0", "Added additional networking metadata field."),
        ],
        ..cluster_sub(
            "slots",
            2,
            LOADING | STALE,
            "3.0.0",
            "Returns the mapping of cluster slots to nodes.",
            "O(N) where N is the total number of Cluster nodes",
        )
    },
];

/// A CLUSTER subcommand: its ACL categories follow from its flags
/// (`@admin @slow @dangerous` for an admin one, `@slow` otherwise), and
/// it answers that cluster support is disabled.
const fn cluster_sub(
    name: &'static str,
    arity: i32,
    flags: u32,
    since: &'static str,
    summary: &'static str,
    complexity: &'static str,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        acl_categories: if flags & ADMIN != 0 {
            ADMIN_ACL
        } else {
            &["slow"]
        },
        group: "cluster",
        since,
        summary,
        complexity,
        func: Some(cluster_disabled),
        ..CommandSpec::DEFAULT
    }
}

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
