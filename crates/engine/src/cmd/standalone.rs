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
const CLUSTER_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        name: "addslots",
        arity: -3,
        flags: ADMIN | STALE | NO_ASYNC_LOADING,
        acl_categories: &["admin", "slow", "dangerous"],
        group: "cluster",
        since: "3.0.0",
        summary: "Assigns new hash slots to a node.",
        complexity: "O(N) where N is the total number of hash slot arguments",
        func: Some(cluster_disabled),
        args: &[ArgSpec::integer("slot").multiple()],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "addslotsrange",
        arity: -4,
        flags: ADMIN | STALE | NO_ASYNC_LOADING,
        acl_categories: &["admin", "slow", "dangerous"],
        group: "cluster",
        since: "7.0.0",
        summary: "Assigns new hash slot ranges to a node.",
        complexity: "O(N) where N is the total number of the slots between the start slot and end slot arguments.",
        func: Some(cluster_disabled),
        args: &[ArgSpec::block(
            "range",
            &[ArgSpec::integer("start-slot"), ArgSpec::integer("end-slot")],
        )
        .multiple()],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "bumpepoch",
        arity: 2,
        flags: ADMIN | STALE | NO_ASYNC_LOADING,
        acl_categories: &["admin", "slow", "dangerous"],
        group: "cluster",
        since: "3.0.0",
        summary: "Advances the cluster config epoch.",
        complexity: "O(1)",
        func: Some(cluster_disabled),
        tips: &["nondeterministic_output"],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "count-failure-reports",
        arity: 3,
        flags: ADMIN | STALE,
        acl_categories: &["admin", "slow", "dangerous"],
        group: "cluster",
        since: "3.0.0",
        summary: "Returns the number of active failure reports active for a node.",
        complexity: "O(N) where N is the number of failure reports",
        func: Some(cluster_disabled),
        tips: &["nondeterministic_output"],
        args: &[ArgSpec::string("node-id")],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "countkeysinslot",
        arity: 3,
        flags: STALE,
        acl_categories: &["slow"],
        group: "cluster",
        since: "3.0.0",
        summary: "Returns the number of keys in a hash slot.",
        complexity: "O(1)",
        func: Some(cluster_disabled),
        args: &[ArgSpec::integer("slot")],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "delslots",
        arity: -3,
        flags: ADMIN | STALE | NO_ASYNC_LOADING,
        acl_categories: &["admin", "slow", "dangerous"],
        group: "cluster",
        since: "3.0.0",
        summary: "Sets hash slots as unbound for a node.",
        complexity: "O(N) where N is the total number of hash slot arguments",
        func: Some(cluster_disabled),
        args: &[ArgSpec::integer("slot").multiple()],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "delslotsrange",
        arity: -4,
        flags: ADMIN | STALE | NO_ASYNC_LOADING,
        acl_categories: &["admin", "slow", "dangerous"],
        group: "cluster",
        since: "7.0.0",
        summary: "Sets hash slot ranges as unbound for a node.",
        complexity: "O(N) where N is the total number of the slots between the start slot and end slot arguments.",
        func: Some(cluster_disabled),
        args: &[ArgSpec::block(
            "range",
            &[ArgSpec::integer("start-slot"), ArgSpec::integer("end-slot")],
        )
        .multiple()],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "failover",
        arity: -2,
        flags: ADMIN | STALE | NO_ASYNC_LOADING,
        acl_categories: &["admin", "slow", "dangerous"],
        group: "cluster",
        since: "3.0.0",
        summary: "Forces a replica to perform a manual failover of its primary.",
        complexity: "O(1)",
        func: Some(cluster_disabled),
        args: &[ArgSpec::oneof(
            "options",
            &[
                ArgSpec::pure_token("force", "FORCE"),
                ArgSpec::pure_token("takeover", "TAKEOVER"),
            ],
        )
        .optional()],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "flushslots",
        arity: 2,
        flags: ADMIN | STALE | NO_ASYNC_LOADING,
        acl_categories: &["admin", "slow", "dangerous"],
        group: "cluster",
        since: "3.0.0",
        summary: "Deletes all slots information from a node.",
        complexity: "O(1)",
        func: Some(cluster_disabled),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "forget",
        arity: 3,
        flags: ADMIN | STALE | NO_ASYNC_LOADING,
        acl_categories: &["admin", "slow", "dangerous"],
        group: "cluster",
        since: "3.0.0",
        summary: "Removes a node from the nodes table.",
        complexity: "O(1)",
        func: Some(cluster_disabled),
        args: &[ArgSpec::string("node-id")],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "getkeysinslot",
        arity: 4,
        flags: STALE,
        acl_categories: &["slow"],
        group: "cluster",
        since: "3.0.0",
        summary: "Returns the key names in a hash slot.",
        complexity: "O(N) where N is the number of requested keys",
        func: Some(cluster_disabled),
        tips: &["nondeterministic_output"],
        args: &[ArgSpec::integer("slot"), ArgSpec::integer("count")],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "help",
        arity: 2,
        flags: LOADING | STALE,
        acl_categories: &["slow"],
        group: "cluster",
        since: "5.0.0",
        summary: "Returns helpful text about the different subcommands.",
        complexity: "O(1)",
        func: Some(cluster_disabled),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "info",
        arity: 2,
        flags: LOADING | STALE,
        acl_categories: &["slow"],
        group: "cluster",
        since: "3.0.0",
        summary: "Returns information about the state of a node.",
        complexity: "O(1)",
        func: Some(cluster_disabled),
        tips: &["nondeterministic_output"],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "keyslot",
        arity: 3,
        flags: STALE,
        acl_categories: &["slow"],
        group: "cluster",
        since: "3.0.0",
        summary: "Returns the hash slot for a key.",
        complexity: "O(N) where N is the number of bytes in the key",
        func: Some(cluster_disabled),
        args: &[ArgSpec::string("key")],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "links",
        arity: 2,
        flags: STALE,
        acl_categories: &["slow"],
        group: "cluster",
        since: "7.0.0",
        summary: "Returns a list of all TCP links to and from peer nodes.",
        complexity: "O(N) where N is the total number of Cluster nodes",
        func: Some(cluster_disabled),
        tips: &["nondeterministic_output"],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "meet",
        arity: -4,
        flags: ADMIN | STALE | NO_ASYNC_LOADING,
        acl_categories: &["admin", "slow", "dangerous"],
        group: "cluster",
        since: "3.0.0",
        summary: "Forces a node to handshake with another node.",
        complexity: "O(1)",
        func: Some(cluster_disabled),
        args: &[
            ArgSpec::string("ip"),
            ArgSpec::integer("port"),
            ArgSpec::integer("cluster-bus-port")
                .since("4.0.0")
                .optional(),
        ],
        history: &[("4.0.0", "Added the optional `cluster_bus_port` argument.")],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "myid",
        arity: 2,
        flags: LOADING | STALE,
        acl_categories: &["slow"],
        group: "cluster",
        since: "3.0.0",
        summary: "Returns the ID of a node.",
        complexity: "O(1)",
        func: Some(cluster_disabled),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "myshardid",
        arity: 2,
        flags: LOADING | STALE,
        acl_categories: &["slow"],
        group: "cluster",
        since: "7.2.0",
        summary: "Returns the shard ID of a node.",
        complexity: "O(1)",
        func: Some(cluster_disabled),
        tips: &["nondeterministic_output"],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "nodes",
        arity: 2,
        flags: LOADING | STALE,
        acl_categories: &["slow"],
        group: "cluster",
        since: "3.0.0",
        summary: "Returns the cluster configuration for a node.",
        complexity: "O(N) where N is the total number of Cluster nodes",
        func: Some(cluster_disabled),
        tips: &["nondeterministic_output"],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "replicas",
        arity: 3,
        flags: ADMIN | STALE,
        acl_categories: &["admin", "slow", "dangerous"],
        group: "cluster",
        since: "5.0.0",
        summary: "Lists the replica nodes of a primary node.",
        complexity: "O(N) where N is the number of replicas.",
        func: Some(cluster_disabled),
        tips: &["nondeterministic_output"],
        args: &[ArgSpec::string("node-id")],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "replicate",
        arity: 3,
        flags: ADMIN | STALE | NO_ASYNC_LOADING,
        acl_categories: &["admin", "slow", "dangerous"],
        group: "cluster",
        since: "3.0.0",
        summary: "Configure a node as replica of a primary node.",
        complexity: "O(1)",
        func: Some(cluster_disabled),
        args: &[ArgSpec::string("node-id")],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "reset",
        arity: -2,
        flags: ADMIN | NOSCRIPT | STALE,
        acl_categories: &["admin", "slow", "dangerous"],
        group: "cluster",
        since: "3.0.0",
        summary: "Resets a node.",
        complexity: "O(N) where N is the number of known nodes. The command may execute a FLUSHALL as a side effect.",
        func: Some(cluster_disabled),
        args: &[ArgSpec::oneof(
            "reset-type",
            &[
                ArgSpec::pure_token("hard", "HARD"),
                ArgSpec::pure_token("soft", "SOFT"),
            ],
        )
        .optional()],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "saveconfig",
        arity: 2,
        flags: ADMIN | STALE | NO_ASYNC_LOADING,
        acl_categories: &["admin", "slow", "dangerous"],
        group: "cluster",
        since: "3.0.0",
        summary: "Forces a node to save the cluster configuration to disk.",
        complexity: "O(1)",
        func: Some(cluster_disabled),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "set-config-epoch",
        arity: 3,
        flags: ADMIN | STALE | NO_ASYNC_LOADING,
        acl_categories: &["admin", "slow", "dangerous"],
        group: "cluster",
        since: "3.0.0",
        summary: "Sets the configuration epoch for a new node.",
        complexity: "O(1)",
        func: Some(cluster_disabled),
        args: &[ArgSpec::integer("config-epoch")],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "setslot",
        arity: -4,
        flags: ADMIN | STALE | NO_ASYNC_LOADING,
        acl_categories: &["admin", "slow", "dangerous"],
        group: "cluster",
        since: "3.0.0",
        summary: "Binds a hash slot to a node.",
        complexity: "O(1)",
        func: Some(cluster_disabled),
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
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "shards",
        arity: 2,
        flags: LOADING | STALE,
        acl_categories: &["slow"],
        group: "cluster",
        since: "7.0.0",
        summary: "Returns the mapping of cluster slots to shards.",
        complexity: "O(N) where N is the total number of cluster nodes",
        func: Some(cluster_disabled),
        tips: &["nondeterministic_output"],
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "slaves",
        arity: 3,
        flags: ADMIN | STALE,
        acl_categories: &["admin", "slow", "dangerous"],
        group: "cluster",
        since: "3.0.0",
        summary: "Lists the replica nodes of a primary node.",
        complexity: "O(N) where N is the number of replicas.",
        func: Some(cluster_disabled),
        tips: &["nondeterministic_output"],
        args: &[ArgSpec::string("node-id")],
        doc_flags: doc_flags::DEPRECATED,
        deprecated_since: Some("5.0.0"),
        replaced_by: Some("`CLUSTER REPLICAS`"),
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "slot-stats",
        arity: -4,
        flags: LOADING | STALE,
        acl_categories: &["slow"],
        group: "cluster",
        since: "8.0.0",
        summary: "Return an array of slot usage statistics for slots assigned to the current node.",
        complexity: "O(N) where N is the total number of slots based on arguments. O(N*log(N)) with ORDERBY subcommand.",
        func: Some(cluster_disabled),
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
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "slots",
        arity: 2,
        flags: LOADING | STALE,
        acl_categories: &["slow"],
        group: "cluster",
        since: "3.0.0",
        summary: "Returns the mapping of cluster slots to nodes.",
        complexity: "O(N) where N is the total number of Cluster nodes",
        func: Some(cluster_disabled),
        tips: &["nondeterministic_output"],
        history: &[
            ("4.0.0", "Added node IDs."),
            ("7.0.0", "Added additional networking metadata field."),
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
