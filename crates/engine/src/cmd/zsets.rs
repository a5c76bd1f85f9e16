//! Sorted-set commands: ZADD ZINCRBY ZREM ZCARD ZSCORE ZMSCORE ZRANK
//! ZREVRANK ZCOUNT ZLEXCOUNT, the ZRANGE family (ZRANGE ZREVRANGE
//! ZRANGEBYSCORE ZREVRANGEBYSCORE ZRANGEBYLEX ZREVRANGEBYLEX ZRANGESTORE),
//! ZPOPMIN ZPOPMAX ZMPOP, ZREMRANGEBYRANK/SCORE/LEX, the set algebra
//! (ZUNION ZINTER ZDIFF, their STORE forms, ZINTERCARD), ZRANDMEMBER and
//! ZSCAN, and the blocking pops BZPOPMIN BZPOPMAX BZMPOP, with Valkey 8's
//! replies and errors (`t_zset.c`).
//!
//! Every range is turned into a span of ascending ranks by the store
//! ([`ZSet::score_span`], [`ZSet::lex_span`]); reverse order, LIMIT offsets
//! and negative indexes are arithmetic on that span here. Replies with
//! scores are a flat array in RESP2 and an array of `[member, score]`
//! pairs in RESP3, as Valkey's `zrangeResultEmit*` writes them.
//!
//! The blocking pops (BZPOPMIN BZPOPMAX BZMPOP) build on [`key_state`],
//! [`pop_reply`] and `cmd::parse_mpop`: choose the key, then pop with the
//! reply shape ([`PopShape::KeyFlat`] / [`PopShape::KeyNested`]).

use super::{
    NOT_INT, SYNTAX_ERR, distinct_indexes, parse_cursor, parse_mpop, parse_rand_args, rand_below,
};
use crate::batch::ArgvRef;
use crate::blocking::OnTimeout;
use crate::cmd::strings::WRONGTYPE;
use crate::command::flags::*;
use crate::command::{
    ArgSpec, CommandSpec, Ctx, KeySpec, doc_flags, key_flags as kf, notify, spec,
};
use crate::glob;
use crate::num::{parse_f64, parse_i64};
use crate::server::Server;
use resp::{Protocol, ReplyWriter};
use std::collections::HashMap;
use store::types::ZSet;
use store::types::zset::{LexBound, LexRange, ScoreRange};
use store::{EncodingLimits, Entry, Value, ValueRef};

const NOT_FLOAT: &str = "ERR value is not a valid float";
const NAN_ERR: &str = "ERR resulting score is not a number (NaN)";
const RANGE_NOT_FLOAT: &str = "ERR min or max is not a float";
const RANGE_NOT_LEX: &str = "ERR min or max not valid string range item";

// ---- Argument specs (Valkey 8's command JSON, for COMMAND DOCS) ----

const KEY: ArgSpec = ArgSpec::key("key", 0);
const KEY_ARG: &[ArgSpec] = &[KEY];
const KEY_MEMBER: &[ArgSpec] = &[KEY, ArgSpec::string("member")];
const KEY_MEMBERS: &[ArgSpec] = &[KEY, ArgSpec::string("member").multiple()];
const LIMIT_BLOCK: ArgSpec = ArgSpec::block(
    "limit",
    &[ArgSpec::integer("offset"), ArgSpec::integer("count")],
)
.token("LIMIT")
.optional();
const WITHSCORES: ArgSpec = ArgSpec::pure_token("withscores", "WITHSCORES").optional();
const WEIGHTS: ArgSpec = ArgSpec::integer("weight")
    .token("WEIGHTS")
    .optional()
    .multiple();
const AGGREGATE: ArgSpec = ArgSpec::oneof(
    "aggregate",
    &[
        ArgSpec::pure_token("sum", "SUM"),
        ArgSpec::pure_token("min", "MIN"),
        ArgSpec::pure_token("max", "MAX"),
    ],
)
.token("AGGREGATE")
.optional();
const NUMKEYS: ArgSpec = ArgSpec::integer("numkeys");
const KEYS: ArgSpec = ArgSpec::key("key", 0).multiple();

const ZADD_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::oneof(
        "condition",
        &[
            ArgSpec::pure_token("nx", "NX"),
            ArgSpec::pure_token("xx", "XX"),
        ],
    )
    .since("3.0.2")
    .optional(),
    ArgSpec::oneof(
        "comparison",
        &[
            ArgSpec::pure_token("gt", "GT"),
            ArgSpec::pure_token("lt", "LT"),
        ],
    )
    .since("6.2.0")
    .optional(),
    ArgSpec::pure_token("change", "CH")
        .since("3.0.2")
        .optional(),
    ArgSpec::pure_token("increment", "INCR")
        .since("3.0.2")
        .optional(),
    ArgSpec::block(
        "data",
        &[ArgSpec::double("score"), ArgSpec::string("member")],
    )
    .multiple(),
];
const ZINCRBY_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::integer("increment"),
    ArgSpec::string("member"),
];
const SCORE_RANGE_ARGS: &[ArgSpec] = &[KEY, ArgSpec::double("min"), ArgSpec::double("max")];
const LEX_RANGE_ARGS: &[ArgSpec] = &[KEY, ArgSpec::string("min"), ArgSpec::string("max")];
const RANK_RANGE_ARGS: &[ArgSpec] = &[KEY, ArgSpec::integer("start"), ArgSpec::integer("stop")];
const RANK_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::string("member"),
    ArgSpec::pure_token("withscore", "WITHSCORE")
        .since("7.2.0")
        .optional(),
];
const SORTBY: ArgSpec = ArgSpec::oneof(
    "sortby",
    &[
        ArgSpec::pure_token("byscore", "BYSCORE"),
        ArgSpec::pure_token("bylex", "BYLEX"),
    ],
)
.since("6.2.0")
.optional();
const REV: ArgSpec = ArgSpec::pure_token("rev", "REV").since("6.2.0").optional();
const ZRANGE_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::string("start"),
    ArgSpec::string("stop"),
    SORTBY,
    REV,
    LIMIT_BLOCK.since("6.2.0"),
    WITHSCORES,
];
const ZRANGESTORE_ARGS: &[ArgSpec] = &[
    ArgSpec::key("dst", 0),
    ArgSpec::key("src", 1),
    ArgSpec::string("min"),
    ArgSpec::string("max"),
    SORTBY,
    REV,
    LIMIT_BLOCK,
];
const ZRANGEBYSCORE_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::double("min"),
    ArgSpec::double("max"),
    WITHSCORES.since("2.0.0"),
    LIMIT_BLOCK,
];
const ZREVRANGEBYSCORE_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::double("max"),
    ArgSpec::double("min"),
    WITHSCORES,
    LIMIT_BLOCK,
];
const ZRANGEBYLEX_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::string("min"),
    ArgSpec::string("max"),
    LIMIT_BLOCK,
];
const ZREVRANGEBYLEX_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::string("max"),
    ArgSpec::string("min"),
    LIMIT_BLOCK,
];
const ZREVRANGE_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::integer("start"),
    ArgSpec::integer("stop"),
    WITHSCORES,
];
const POP_ARGS: &[ArgSpec] = &[KEY, ArgSpec::integer("count").optional()];
const ZMPOP_ARGS: &[ArgSpec] = &[
    NUMKEYS,
    KEYS,
    ArgSpec::oneof(
        "where",
        &[
            ArgSpec::pure_token("min", "MIN"),
            ArgSpec::pure_token("max", "MAX"),
        ],
    ),
    ArgSpec::integer("count").token("COUNT").optional(),
];
const BZPOP_ARGS: &[ArgSpec] = &[KEYS, ArgSpec::double("timeout")];
const BZMPOP_ARGS: &[ArgSpec] = &[
    ArgSpec::double("timeout"),
    NUMKEYS,
    KEYS,
    ArgSpec::oneof(
        "where",
        &[
            ArgSpec::pure_token("min", "MIN"),
            ArgSpec::pure_token("max", "MAX"),
        ],
    ),
    ArgSpec::integer("count").token("COUNT").optional(),
];
const ZUNION_ARGS: &[ArgSpec] = &[NUMKEYS, KEYS, WEIGHTS, AGGREGATE, WITHSCORES];
const ZSTORE_ARGS: &[ArgSpec] = &[
    ArgSpec::key("destination", 0),
    NUMKEYS,
    ArgSpec::key("key", 1).multiple(),
    WEIGHTS,
    AGGREGATE,
];
const ZDIFF_ARGS: &[ArgSpec] = &[NUMKEYS, KEYS, WITHSCORES];
const ZDIFFSTORE_ARGS: &[ArgSpec] = &[
    ArgSpec::key("destination", 0),
    NUMKEYS,
    ArgSpec::key("key", 1).multiple(),
];
const ZINTERCARD_ARGS: &[ArgSpec] = &[
    NUMKEYS,
    KEYS,
    ArgSpec::integer("limit").token("LIMIT").optional(),
];
const ZRANDMEMBER_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::block(
        "options",
        &[
            ArgSpec::integer("count"),
            ArgSpec::pure_token("withscores", "WITHSCORES").optional(),
        ],
    )
    .optional(),
];
const ZSCAN_ARGS: &[ArgSpec] = &[
    KEY,
    ArgSpec::integer("cursor"),
    ArgSpec::pattern("pattern").token("MATCH").optional(),
    ArgSpec::integer("count").token("COUNT").optional(),
    ArgSpec::pure_token("noscores", "NOSCORES")
        .since("8.0.0")
        .optional(),
];

// One spec per row, like Valkey's command table.
const GROUP: &str = "sorted-set";

const ONE: (i32, i32, i32) = (1, 1, 1);
const TWO: (i32, i32, i32) = (1, 2, 1);
/// Keys counted by a numkeys argument: no fixed positions.
const MOVABLE: (i32, i32, i32) = (0, 0, 0);

const READ_FAST: &[&str] = &["read", "sortedset", "fast"];
const READ_SLOW: &[&str] = &["read", "sortedset", "slow"];
const WRITE_FAST: &[&str] = &["write", "sortedset", "fast"];
const WRITE_SLOW: &[&str] = &["write", "sortedset", "slow"];
const BLOCK_FAST: &[&str] = &["write", "sortedset", "fast", "blocking"];
const BLOCK_SLOW: &[&str] = &["write", "sortedset", "slow", "blocking"];

const LOG_N: &str = "O(log(N))";
const RANGE_CX: &str = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.";
const REM_RANGE_CX: &str = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.";

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::UPDATE)],
        history: &[
            ("2.4.0", "Accepts multiple elements."),
            ("3.0.2", "Added the `XX`, `NX`, `CH` and `INCR` options."),
            ("6.2.0", "Added the `GT` and `LT` options."),
        ],
        ..spec(
            GROUP,
            "zadd",
            -4,
            WRITE | DENYOOM | FAST,
            ONE,
            WRITE_FAST,
            "1.2.0",
            "Adds one or more members to a sorted set, or updates their scores. Creates the key if it doesn't exist.",
            "O(log(N)) for each item added, where N is the number of elements in the sorted set.",
            zadd,
            ZADD_ARGS,
        )
    },
    CommandSpec {
        complexity: "O(log(N)) where N is the number of elements in the sorted set.",
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS | kf::UPDATE)],
        ..spec(
            GROUP,
            "zincrby",
            4,
            WRITE | DENYOOM | FAST,
            ONE,
            WRITE_FAST,
            "1.2.0",
            "Increments the score of a member in a sorted set.",
            LOG_N,
            zincrby,
            ZINCRBY_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::DELETE)],
        history: &[("2.4.0", "Accepts multiple elements.")],
        ..spec(
            GROUP,
            "zrem",
            -3,
            WRITE | FAST,
            ONE,
            WRITE_FAST,
            "1.2.0",
            "Removes one or more members from a sorted set. Deletes the sorted set if all members were removed.",
            "O(M*log(N)) with N being the number of elements in the sorted set and M the number of elements to be removed.",
            zrem,
            KEY_MEMBERS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO)],
        ..spec(
            GROUP,
            "zcard",
            2,
            READONLY | FAST,
            ONE,
            READ_FAST,
            "1.2.0",
            "Returns the number of members in a sorted set.",
            "O(1)",
            zcard,
            KEY_ARG,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        ..spec(
            GROUP,
            "zscore",
            3,
            READONLY | FAST,
            ONE,
            READ_FAST,
            "1.2.0",
            "Returns the score of a member in a sorted set.",
            "O(1)",
            zscore,
            KEY_MEMBER,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        ..spec(
            GROUP,
            "zmscore",
            -3,
            READONLY | FAST,
            ONE,
            READ_FAST,
            "6.2.0",
            "Returns the score of one or more members in a sorted set.",
            "O(N) where N is the number of members being requested.",
            zmscore,
            KEY_MEMBERS,
        )
    },
    CommandSpec {
        args: &[
            ArgSpec::key("key", 0),
            ArgSpec::string("member"),
            ArgSpec::pure_token("withscore", "WITHSCORE").optional(),
        ],
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        history: &[("7.2.0", "Added the optional `WITHSCORE` argument.")],
        ..spec(
            GROUP,
            "zrank",
            -3,
            READONLY | FAST,
            ONE,
            READ_FAST,
            "2.0.0",
            "Returns the index of a member in a sorted set ordered by ascending scores.",
            LOG_N,
            zrank,
            RANK_ARGS,
        )
    },
    CommandSpec {
        args: &[
            ArgSpec::key("key", 0),
            ArgSpec::string("member"),
            ArgSpec::pure_token("withscore", "WITHSCORE").optional(),
        ],
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        history: &[("7.2.0", "Added the optional `WITHSCORE` argument.")],
        ..spec(
            GROUP,
            "zrevrank",
            -3,
            READONLY | FAST,
            ONE,
            READ_FAST,
            "2.0.0",
            "Returns the index of a member in a sorted set ordered by descending scores.",
            LOG_N,
            zrevrank,
            RANK_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        ..spec(
            GROUP,
            "zcount",
            4,
            READONLY | FAST,
            ONE,
            READ_FAST,
            "2.0.0",
            "Returns the count of members in a sorted set that have scores within a range.",
            "O(log(N)) with N being the number of elements in the sorted set.",
            zcount,
            SCORE_RANGE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        ..spec(
            GROUP,
            "zlexcount",
            4,
            READONLY | FAST,
            ONE,
            READ_FAST,
            "2.8.9",
            "Returns the number of members in a sorted set within a lexicographical range.",
            "O(log(N)) with N being the number of elements in the sorted set.",
            zlexcount,
            LEX_RANGE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        history: &[(
            "6.2.0",
            "Added the `REV`, `BYSCORE`, `BYLEX` and `LIMIT` options.",
        )],
        ..spec(
            GROUP,
            "zrange",
            -4,
            READONLY,
            ONE,
            READ_SLOW,
            "1.2.0",
            "Returns members in a sorted set within a range of indexes.",
            RANGE_CX,
            zrange,
            ZRANGE_ARGS,
        )
    },
    CommandSpec {
        args: &[
            ArgSpec::key("dst", 0),
            ArgSpec::key("src", 1),
            ArgSpec::string("min"),
            ArgSpec::string("max"),
            ArgSpec::oneof(
                "sortby",
                &[
                    ArgSpec::pure_token("byscore", "BYSCORE"),
                    ArgSpec::pure_token("bylex", "BYLEX"),
                ],
            )
            .optional(),
            ArgSpec::pure_token("rev", "REV").optional(),
            ArgSpec::block(
                "limit",
                &[ArgSpec::integer("offset"), ArgSpec::integer("count")],
            )
            .token("LIMIT")
            .optional(),
        ],
        key_specs: &[
            KeySpec::index(1, kf::OW | kf::UPDATE),
            KeySpec::index(2, kf::RO | kf::ACCESS),
        ],
        ..spec(
            GROUP,
            "zrangestore",
            -5,
            WRITE | DENYOOM,
            TWO,
            WRITE_SLOW,
            "6.2.0",
            "Stores a range of members from sorted set in a key.",
            "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements stored into the destination key.",
            zrangestore,
            ZRANGESTORE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        doc_flags: doc_flags::DEPRECATED,
        deprecated_since: Some("6.2.0"),
        replaced_by: Some("`ZRANGE` with the `REV` argument"),
        ..spec(
            GROUP,
            "zrevrange",
            -4,
            READONLY,
            ONE,
            READ_SLOW,
            "1.2.0",
            "Returns members in a sorted set within a range of indexes in reverse order.",
            RANGE_CX,
            zrevrange,
            ZREVRANGE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        history: &[("2.0.0", "Added the `WITHSCORES` modifier.")],
        doc_flags: doc_flags::DEPRECATED,
        deprecated_since: Some("6.2.0"),
        replaced_by: Some("`ZRANGE` with the `BYSCORE` argument"),
        ..spec(
            GROUP,
            "zrangebyscore",
            -4,
            READONLY,
            ONE,
            READ_SLOW,
            "1.0.5",
            "Returns members in a sorted set within a range of scores.",
            "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).",
            zrangebyscore,
            ZRANGEBYSCORE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        history: &[("2.1.6", "`min` and `max` can be exclusive.")],
        doc_flags: doc_flags::DEPRECATED,
        deprecated_since: Some("6.2.0"),
        replaced_by: Some("`ZRANGE` with the `REV` and `BYSCORE` arguments"),
        ..spec(
            GROUP,
            "zrevrangebyscore",
            -4,
            READONLY,
            ONE,
            READ_SLOW,
            "2.2.0",
            "Returns members in a sorted set within a range of scores in reverse order.",
            "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).",
            zrevrangebyscore,
            ZREVRANGEBYSCORE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        doc_flags: doc_flags::DEPRECATED,
        deprecated_since: Some("6.2.0"),
        replaced_by: Some("`ZRANGE` with the `BYLEX` argument"),
        ..spec(
            GROUP,
            "zrangebylex",
            -4,
            READONLY,
            ONE,
            READ_SLOW,
            "2.8.9",
            "Returns members in a sorted set within a lexicographical range.",
            "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).",
            zrangebylex,
            ZRANGEBYLEX_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        doc_flags: doc_flags::DEPRECATED,
        deprecated_since: Some("6.2.0"),
        replaced_by: Some("`ZRANGE` with the `REV` and `BYLEX` arguments"),
        ..spec(
            GROUP,
            "zrevrangebylex",
            -4,
            READONLY,
            ONE,
            READ_SLOW,
            "2.8.9",
            "Returns members in a sorted set within a lexicographical range in reverse order.",
            "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).",
            zrevrangebylex,
            ZREVRANGEBYLEX_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS | kf::DELETE)],
        ..spec(
            GROUP,
            "zpopmin",
            -2,
            WRITE | FAST,
            ONE,
            WRITE_FAST,
            "5.0.0",
            "Returns the lowest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.",
            "O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.",
            zpopmin,
            POP_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS | kf::DELETE)],
        ..spec(
            GROUP,
            "zpopmax",
            -2,
            WRITE | FAST,
            ONE,
            WRITE_FAST,
            "5.0.0",
            "Returns the highest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.",
            "O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.",
            zpopmax,
            POP_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS | kf::DELETE).keynum(0, 1, 1)],
        ..spec(
            GROUP,
            "zmpop",
            -4,
            WRITE,
            MOVABLE,
            WRITE_SLOW,
            "7.0.0",
            "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them. Deletes the sorted set if the last member was popped.",
            "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.",
            zmpop,
            ZMPOP_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS | kf::DELETE).range(-2, 1, 0)],
        history: &[(
            "6.0.0",
            "`timeout` is interpreted as a double instead of an integer.",
        )],
        ..spec(
            GROUP,
            "bzpopmin",
            -3,
            WRITE | FAST | BLOCKING,
            (1, -2, 1),
            BLOCK_FAST,
            "5.0.0",
            "Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.",
            "O(log(N)) with N being the number of elements in the sorted set.",
            bzpopmin,
            BZPOP_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::ACCESS | kf::DELETE).range(-2, 1, 0)],
        history: &[(
            "6.0.0",
            "`timeout` is interpreted as a double instead of an integer.",
        )],
        ..spec(
            GROUP,
            "bzpopmax",
            -3,
            WRITE | FAST | BLOCKING,
            (1, -2, 1),
            BLOCK_FAST,
            "5.0.0",
            "Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member available otherwise.  Deletes the sorted set if the last element was popped.",
            "O(log(N)) with N being the number of elements in the sorted set.",
            bzpopmax,
            BZPOP_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(2, kf::RW | kf::ACCESS | kf::DELETE).keynum(0, 1, 1)],
        ..spec(
            GROUP,
            "bzmpop",
            -5,
            WRITE | BLOCKING,
            MOVABLE,
            BLOCK_SLOW,
            "7.0.0",
            "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.",
            "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.",
            bzmpop,
            BZMPOP_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::DELETE)],
        ..spec(
            GROUP,
            "zremrangebyrank",
            4,
            WRITE,
            ONE,
            WRITE_SLOW,
            "2.0.0",
            "Removes members in a sorted set within a range of indexes. Deletes the sorted set if all members were removed.",
            REM_RANGE_CX,
            zremrangebyrank,
            RANK_RANGE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::DELETE)],
        ..spec(
            GROUP,
            "zremrangebyscore",
            4,
            WRITE,
            ONE,
            WRITE_SLOW,
            "1.2.0",
            "Removes members in a sorted set within a range of scores. Deletes the sorted set if all members were removed.",
            REM_RANGE_CX,
            zremrangebyscore,
            SCORE_RANGE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RW | kf::DELETE)],
        ..spec(
            GROUP,
            "zremrangebylex",
            4,
            WRITE,
            ONE,
            WRITE_SLOW,
            "2.8.9",
            "Removes members in a sorted set within a lexicographical range. Deletes the sorted set if all members were removed.",
            REM_RANGE_CX,
            zremrangebylex,
            LEX_RANGE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS).keynum(0, 1, 1)],
        ..spec(
            GROUP,
            "zunion",
            -3,
            READONLY,
            MOVABLE,
            READ_SLOW,
            "6.2.0",
            "Returns the union of multiple sorted sets.",
            "O(N)+O(M*log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.",
            zunion,
            ZUNION_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS).keynum(0, 1, 1)],
        ..spec(
            GROUP,
            "zinter",
            -3,
            READONLY,
            MOVABLE,
            READ_SLOW,
            "6.2.0",
            "Returns the intersect of multiple sorted sets.",
            "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.",
            zinter,
            ZUNION_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS).keynum(0, 1, 1)],
        ..spec(
            GROUP,
            "zdiff",
            -3,
            READONLY,
            MOVABLE,
            READ_SLOW,
            "6.2.0",
            "Returns the difference between multiple sorted sets.",
            "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.",
            zdiff,
            ZDIFF_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[
            KeySpec::index(1, kf::OW | kf::UPDATE),
            KeySpec::index(2, kf::RO | kf::ACCESS).keynum(0, 1, 1),
        ],
        ..spec(
            GROUP,
            "zunionstore",
            -4,
            WRITE | DENYOOM,
            ONE,
            WRITE_SLOW,
            "2.0.0",
            "Stores the union of multiple sorted sets in a key.",
            "O(N)+O(M log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.",
            zunionstore,
            ZSTORE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[
            KeySpec::index(1, kf::OW | kf::UPDATE),
            KeySpec::index(2, kf::RO | kf::ACCESS).keynum(0, 1, 1),
        ],
        ..spec(
            GROUP,
            "zinterstore",
            -4,
            WRITE | DENYOOM,
            ONE,
            WRITE_SLOW,
            "2.0.0",
            "Stores the intersect of multiple sorted sets in a key.",
            "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.",
            zinterstore,
            ZSTORE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[
            KeySpec::index(1, kf::OW | kf::UPDATE),
            KeySpec::index(2, kf::RO | kf::ACCESS).keynum(0, 1, 1),
        ],
        ..spec(
            GROUP,
            "zdiffstore",
            -4,
            WRITE | DENYOOM,
            ONE,
            WRITE_SLOW,
            "6.2.0",
            "Stores the difference of multiple sorted sets in a key.",
            "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.",
            zdiffstore,
            ZDIFFSTORE_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS).keynum(0, 1, 1)],
        ..spec(
            GROUP,
            "zintercard",
            -3,
            READONLY,
            MOVABLE,
            READ_SLOW,
            "7.0.0",
            "Returns the number of members of the intersect of multiple sorted sets.",
            "O(N*K) worst case with N being the smallest input sorted set, K being the number of input sorted sets.",
            zintercard,
            ZINTERCARD_ARGS,
        )
    },
    CommandSpec {
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        tips: &["nondeterministic_output"],
        ..spec(
            GROUP,
            "zrandmember",
            -2,
            READONLY,
            ONE,
            READ_SLOW,
            "6.2.0",
            "Returns one or more random members from a sorted set.",
            "O(N) where N is the number of members returned",
            zrandmember,
            ZRANDMEMBER_ARGS,
        )
    },
    CommandSpec {
        args: &[
            ArgSpec::key("key", 0),
            ArgSpec::integer("cursor"),
            ArgSpec::pattern("pattern").token("MATCH").optional(),
            ArgSpec::integer("count").token("COUNT").optional(),
            ArgSpec::pure_token("noscores", "NOSCORES").optional(),
        ],
        key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS)],
        tips: &["nondeterministic_output"],
        history: &[("8.0.0", "Added noscores option.")],
        ..spec(
            GROUP,
            "zscan",
            -3,
            READONLY,
            ONE,
            READ_SLOW,
            "2.8.0",
            "Iterates over members and scores of a sorted set.",
            "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.",
            zscan,
            ZSCAN_ARGS,
        )
    },
];

// ---- Keyspace helpers ------------------------------------------------------

/// A key that holds something other than a sorted set.
struct WrongType;

/// `lookupKeyRead`/`lookupKeyWrite` of a sorted set: lazy expiry, access
/// time, and (for reads) the hit/miss counters.
fn lookup<'s>(
    srv: &'s mut Server,
    db: usize,
    key: &[u8],
    h: u64,
    now_ms: i64,
    read: bool,
) -> Result<Option<&'s mut ZSet>, WrongType> {
    let d = &mut srv.keyspace.dbs[db];
    let found = if read {
        d.get_read(h, key, now_ms)
    } else {
        d.get(h, key, now_ms)
    };
    if read {
        let misses = Some(&mut srv.keymisses);
        super::count_read(&mut srv.stats, misses, found.is_some(), db, key);
    }
    match found {
        None => Ok(None),
        Some(e) => match e.boxed_mut() {
            Some(Value::ZSet(z)) => Ok(Some(z)),
            _ => Err(WrongType),
        },
    }
}

/// Look up the command's key for reading; `None` after replying
/// WRONGTYPE, `Some(None)` when missing.
macro_rules! read_or_reply {
    ($ctx:expr, $key:expr) => {{
        let db = $ctx.session.db;
        let h = $ctx.key_hash($key);
        match lookup($ctx.srv, db, $key, h, $ctx.now_ms, true) {
            Ok(z) => z,
            Err(WrongType) => return $ctx.reply.error(WRONGTYPE),
        }
    }};
}

macro_rules! write_or_reply {
    ($ctx:expr, $key:expr) => {{
        let db = $ctx.session.db;
        let h = $ctx.key_hash($key);
        match lookup($ctx.srv, db, $key, h, $ctx.now_ms, false) {
            Ok(z) => z,
            Err(WrongType) => return $ctx.reply.error(WRONGTYPE),
        }
    }};
}

/// After removing from `key`: delete it if it became empty, and fire
/// `event` (plus `del`) and the WATCH/blocking hook.
fn after_removal(ctx: &mut Ctx<'_>, key: &[u8], event: &str) {
    let db = ctx.session.db;
    let h = ctx.key_hash(key);
    let emptied = ctx.srv.keyspace.dbs[db]
        .peek(h, key)
        .is_some_and(|e| matches!(e.value(), ValueRef::ZSet(z) if z.is_empty()));
    ctx.notify(notify::ZSET, event, key);
    if emptied {
        ctx.srv.keyspace.dbs[db].remove(h, key);
        ctx.notify(notify::GENERIC, "del", key);
    }
    ctx.touched(db, key);
}

/// Write `pairs` as the result of a *STORE command: replace `dst` (and its
/// TTL) with them, or delete it when there are none. Replies with the count.
pub(crate) fn store_result(ctx: &mut Ctx<'_>, dst: &[u8], pairs: Vec<(Vec<u8>, f64)>, event: &str) {
    let db = ctx.session.db;
    let h = ctx.key_hash(dst);
    let n = pairs.len();
    if n == 0 {
        let d = &mut ctx.srv.keyspace.dbs[db];
        let existed = d.get(h, dst, ctx.now_ms).is_some();
        if existed {
            d.delete(h, dst);
            ctx.touched(db, dst);
            ctx.notify(notify::GENERIC, "del", dst);
        }
        return ctx.reply.int(0);
    }
    let z = ZSet::from_pairs(pairs, &ctx.srv.config.encoding);
    super::set_key(ctx, h, dst, Entry::new(Value::ZSet(z)));
    ctx.reply.int(n as i64);
    ctx.notify(notify::ZSET, event, dst);
    ctx.touched(db, dst);
}

fn resp3(r: &ReplyWriter<'_>) -> bool {
    r.proto == Protocol::Resp3
}

/// Members (and scores) as the ZRANGE family replies: flat in RESP2,
/// `[member, score]` pairs in RESP3.
fn reply_pairs<'a>(
    r: &mut ReplyWriter<'_>,
    n: usize,
    pairs: impl Iterator<Item = (&'a [u8], f64)>,
    withscores: bool,
) {
    let nested = withscores && resp3(r);
    r.array_len(if withscores && !nested { n * 2 } else { n });
    for (m, s) in pairs {
        if nested {
            r.array_len(2);
        }
        r.bulk(m);
        if withscores {
            r.double(s);
        }
    }
}

// ---- Parsing ---------------------------------------------------------------

/// C's `strtod` over a whole argument, as `zslParseRange` uses it: leading
/// space is skipped, an overflow is ±inf, NaN is refused, and (since only
/// what is left over is checked) an empty string reads as 0.
fn strtod_whole(s: &[u8]) -> Option<f64> {
    if s.is_empty() {
        return Some(0.0);
    }
    let lead = s
        .iter()
        .take_while(|&&b| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))
        .count();
    let t = std::str::from_utf8(&s[lead..]).ok()?;
    let d: f64 = t.parse().ok()?;
    (!d.is_nan()).then_some(d)
}

fn parse_score_bound(b: &[u8]) -> Option<(f64, bool)> {
    match b.first() {
        Some(b'(') => strtod_whole(&b[1..]).map(|d| (d, true)),
        _ => strtod_whole(b).map(|d| (d, false)),
    }
}

/// `zslParseRange`: `1.5`, `(1.5`, `-inf`, `+inf`.
fn parse_score_range(min: &[u8], max: &[u8]) -> Option<ScoreRange> {
    let (min, min_ex) = parse_score_bound(min)?;
    let (max, max_ex) = parse_score_bound(max)?;
    Some(ScoreRange {
        min,
        min_ex,
        max,
        max_ex,
    })
}

/// `zslParseLexRangeItem`: `-`, `+`, `[x`, `(x`.
fn parse_lex_bound(b: &[u8]) -> Option<LexBound<'_>> {
    match b {
        b"+" => Some(LexBound::Max),
        b"-" => Some(LexBound::Min),
        [b'(', rest @ ..] => Some(LexBound::Excl(rest)),
        [b'[', rest @ ..] => Some(LexBound::Incl(rest)),
        _ => None,
    }
}

fn parse_lex_range<'a>(min: &'a [u8], max: &'a [u8]) -> Option<LexRange<'a>> {
    Some(LexRange {
        min: parse_lex_bound(min)?,
        max: parse_lex_bound(max)?,
    })
}

/// Valkey's start/end index sanitising: the inclusive ascending ranks, or
/// `None` when the range is empty.
fn index_span(start: i64, end: i64, n: usize) -> Option<(usize, usize)> {
    let n = n as i64;
    let mut s = if start < 0 { n + start } else { start };
    let mut e = if end < 0 { n + end } else { end };
    if s < 0 {
        s = 0;
    }
    if s > e || s >= n {
        return None;
    }
    if e >= n {
        e = n - 1;
    }
    Some((s as usize, e as usize))
}

/// Apply LIMIT offset/count to the ascending span `lo..hi` walked forwards
/// or (`rev`) backwards; the span that remains. A negative count means no
/// limit. A negative offset skips everything on a set in the compact
/// encoding and counts back from the end of the range on one in the
/// large encoding (`large`): Valkey 8.1 does both, its listpack walk never
/// reaching the offset and its skiplist one starting at length + offset.
fn limit_span(
    lo: usize,
    hi: usize,
    rev: bool,
    offset: i64,
    limit: i64,
    large: bool,
) -> (usize, usize) {
    let n = hi - lo;
    let offset = if offset < 0 && large {
        offset.saturating_add(n as i64)
    } else {
        offset
    };
    if offset < 0 || offset as u64 >= n as u64 {
        return (lo, lo);
    }
    let off = offset as usize;
    let take = if limit < 0 {
        n - off
    } else {
        (limit as u64).min((n - off) as u64) as usize
    };
    if rev {
        (hi - off - take, hi - off)
    } else {
        (lo + off, lo + off + take)
    }
}

// ---- ZADD / ZINCRBY / ZREM ---------------------------------------------------

pub(crate) const Z_NX: u8 = 1;
pub(crate) const Z_XX: u8 = 2;
const Z_GT: u8 = 4;
const Z_LT: u8 = 8;
const Z_INCR: u8 = 16;

/// Outcome of `zsetAdd` for one pair.
enum AddOutcome {
    Added(f64),
    Updated(f64),
    /// Left alone (NX on an existing member, GT/LT not met, same score).
    Unchanged(f64),
    Nop,
    Nan,
}

/// Valkey's `zsetAdd` for one member, with the ZADD flags.
fn zset_add(
    z: &mut ZSet,
    member: &[u8],
    score: f64,
    flags: u8,
    lim: &EncodingLimits,
) -> AddOutcome {
    match z.score(member) {
        Some(cur) => {
            if flags & Z_NX != 0 {
                return AddOutcome::Nop;
            }
            let mut score = score;
            if flags & Z_INCR != 0 {
                score += cur;
                if score.is_nan() {
                    return AddOutcome::Nan;
                }
            }
            if (flags & Z_LT != 0 && score >= cur) || (flags & Z_GT != 0 && score <= cur) {
                return AddOutcome::Nop;
            }
            if score != cur {
                z.insert(member, score, lim);
                AddOutcome::Updated(score)
            } else {
                AddOutcome::Unchanged(score)
            }
        }
        None if flags & Z_XX != 0 => AddOutcome::Nop,
        None => {
            z.insert(member, score, lim);
            AddOutcome::Added(score)
        }
    }
}

fn zadd_generic(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, mut flags: u8) {
    let key = argv.get(1);
    let mut ch = false;
    let mut at = 2;
    while at < argv.len() {
        let o = argv.get(at);
        let f = if o.eq_ignore_ascii_case(b"nx") {
            Z_NX
        } else if o.eq_ignore_ascii_case(b"xx") {
            Z_XX
        } else if o.eq_ignore_ascii_case(b"gt") {
            Z_GT
        } else if o.eq_ignore_ascii_case(b"lt") {
            Z_LT
        } else if o.eq_ignore_ascii_case(b"incr") {
            Z_INCR
        } else if o.eq_ignore_ascii_case(b"ch") {
            ch = true;
            0
        } else {
            break;
        };
        flags |= f;
        at += 1;
    }
    let rest = argv.len() - at;
    if rest == 0 || !rest.is_multiple_of(2) {
        return ctx.error(SYNTAX_ERR);
    }
    let elements = rest / 2;
    let has = |f: u8| flags & f != 0;
    if has(Z_NX) && has(Z_XX) {
        return ctx.error("ERR XX and NX options at the same time are not compatible");
    }
    if (has(Z_GT) && has(Z_NX)) || (has(Z_LT) && has(Z_NX)) || (has(Z_GT) && has(Z_LT)) {
        return ctx.error("ERR GT, LT, and/or NX options at the same time are not compatible");
    }
    let incr = has(Z_INCR);
    if incr && elements > 1 {
        return ctx.error("ERR INCR option supports a single increment-element pair");
    }
    let mut pairs = Vec::with_capacity(elements);
    for j in 0..elements {
        match parse_f64(argv.get(at + 2 * j)) {
            Some(s) => pairs.push((s, argv.get(at + 2 * j + 1))),
            None => return ctx.error(NOT_FLOAT),
        }
    }
    zadd_pairs(ctx, key, flags, ch, &pairs);
}

/// ZADD's work once its arguments are parsed (also GEOADD's, which is ZADD
/// of encoded points): add or update `pairs` of (score, member) with the
/// `Z_*` flags, reply and fire the events. `ch` counts updates too.
/// Whether the set changed.
pub(crate) fn zadd_pairs(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    flags: u8,
    ch: bool,
    pairs: &[(f64, &[u8])],
) -> bool {
    let has = |f: u8| flags & f != 0;
    let incr = has(Z_INCR);
    let elements = pairs.len();
    let max_len = pairs.iter().map(|p| p.1.len()).max().unwrap_or(0);
    let lim = ctx.srv.config.encoding;
    let db = ctx.session.db;
    let h = ctx.key_hash(key);
    let existing = match lookup(ctx.srv, db, key, h, ctx.now_ms, false) {
        Err(WrongType) => {
            ctx.error(WRONGTYPE);
            return false;
        }
        Ok(z) => z.is_some(),
    };
    let (mut added, mut updated, mut processed) = (0i64, 0i64, 0);
    let mut last = 0.0;
    let mut nan = false;
    if existing || !has(Z_XX) {
        let mut fresh = ZSet::with_hint(elements, max_len, &lim);
        let z = if existing {
            let Ok(Some(z)) = lookup(ctx.srv, db, key, h, ctx.now_ms, false) else {
                unreachable!("looked up above")
            };
            z.maybe_convert(elements, max_len, &lim);
            z
        } else {
            &mut fresh
        };
        for &(score, member) in pairs {
            match zset_add(z, member, score, flags, &lim) {
                AddOutcome::Added(s) => {
                    added += 1;
                    processed += 1;
                    last = s;
                }
                AddOutcome::Updated(s) => {
                    updated += 1;
                    processed += 1;
                    last = s;
                }
                AddOutcome::Unchanged(s) => {
                    processed += 1;
                    last = s;
                }
                AddOutcome::Nop => {}
                AddOutcome::Nan => {
                    nan = true;
                    break;
                }
            }
        }
        z.shrink();
        if !existing && !fresh.is_empty() {
            super::add_key(ctx, db, h, key, Entry::new(Value::ZSet(fresh)));
        }
    }
    if nan {
        ctx.error(NAN_ERR);
    } else if incr {
        if processed > 0 {
            ctx.reply.double(last);
        } else {
            ctx.reply.null();
        }
    } else {
        ctx.reply.int(if ch { added + updated } else { added });
    }
    if added + updated > 0 {
        ctx.touched(db, key);
        ctx.changed_elements((added + updated) as usize);
        ctx.notify(notify::ZSET, if incr { "zincr" } else { "zadd" }, key);
    }
    added + updated > 0
}

fn zadd(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    zadd_generic(ctx, argv, 0);
}

fn zincrby(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    zadd_generic(ctx, argv, Z_INCR);
}

fn zrem(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    let Some(z) = write_or_reply!(ctx, key) else {
        return ctx.reply.int(0);
    };
    let mut n = 0;
    for i in 2..argv.len() {
        if z.remove(argv.get(i)).is_some() {
            n += 1;
            if z.is_empty() {
                break;
            }
        }
    }
    ctx.reply.int(n);
    if n > 0 {
        after_removal(ctx, key, "zrem");
        ctx.changed_elements(n as usize);
    }
}

// ---- Point reads -------------------------------------------------------------

fn zcard(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let n = read_or_reply!(ctx, argv.get(1)).map_or(0, |z| z.len());
    ctx.reply.int(n as i64);
}

fn zscore(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    match read_or_reply!(ctx, argv.get(1)).and_then(|z| z.score(argv.get(2))) {
        Some(s) => ctx.reply.double(s),
        None => ctx.reply.null(),
    }
}

fn zmscore(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let z = read_or_reply!(ctx, argv.get(1));
    ctx.reply.array_len(argv.len() - 2);
    for i in 2..argv.len() {
        match z.as_ref().and_then(|z| z.score(argv.get(i))) {
            Some(s) => ctx.reply.double(s),
            None => ctx.reply.null(),
        }
    }
}

fn zrank_generic(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, rev: bool) {
    if argv.len() > 4 {
        let name = if rev { "zrevrank" } else { "zrank" };
        return ctx.error(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
    }
    let withscore = argv.len() == 4;
    if withscore && !argv.get(3).eq_ignore_ascii_case(b"withscore") {
        return ctx.error(SYNTAX_ERR);
    }
    let found = match read_or_reply!(ctx, argv.get(1)) {
        None => None,
        Some(z) => {
            let n = z.len();
            z.rank(argv.get(2))
                .map(|(r, s)| (if rev { n - 1 - r } else { r }, s))
        }
    };
    match found {
        Some((r, s)) => {
            if withscore {
                ctx.reply.array_len(2);
            }
            ctx.reply.int(r as i64);
            if withscore {
                ctx.reply.double(s);
            }
        }
        None if withscore => ctx.reply.null_array(),
        None => ctx.reply.null(),
    }
}

fn zrank(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    zrank_generic(ctx, argv, false);
}

fn zrevrank(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    zrank_generic(ctx, argv, true);
}

fn zcount(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let Some(r) = parse_score_range(argv.get(2), argv.get(3)) else {
        return ctx.error(RANGE_NOT_FLOAT);
    };
    let n = read_or_reply!(ctx, argv.get(1)).map_or(0, |z| {
        let (lo, hi) = z.score_span(&r);
        hi - lo
    });
    ctx.reply.int(n as i64);
}

fn zlexcount(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let Some(r) = parse_lex_range(argv.get(2), argv.get(3)) else {
        return ctx.error(RANGE_NOT_LEX);
    };
    let n = read_or_reply!(ctx, argv.get(1)).map_or(0, |z| {
        let (lo, hi) = z.lex_span(&r);
        hi - lo
    });
    ctx.reply.int(n as i64);
}

// ---- The ZRANGE family -------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    Auto,
    Rank,
    Score,
    Lex,
}

/// Valkey's `zrangeGenericCommand`: `key_at` is the source key's index,
/// `dst` the ZRANGESTORE destination; `by`/`rev` are fixed by the legacy
/// commands and chosen by options for ZRANGE/ZRANGESTORE.
fn zrange_generic(
    ctx: &mut Ctx<'_>,
    argv: ArgvRef<'_>,
    key_at: usize,
    dst: Option<&[u8]>,
    mut by: By,
    mut rev: Option<bool>,
) {
    let key = argv.get(key_at);
    let mut withscores = false;
    let mut offset: i64 = 0;
    let mut limit: i64 = -1;
    let mut j = key_at + 3;
    while j < argv.len() {
        let o = argv.get(j);
        let left = argv.len() - j - 1;
        if dst.is_none() && o.eq_ignore_ascii_case(b"withscores") {
            withscores = true;
        } else if o.eq_ignore_ascii_case(b"limit") && left >= 2 {
            match (parse_i64(argv.get(j + 1)), parse_i64(argv.get(j + 2))) {
                (Some(a), Some(b)) => {
                    offset = a;
                    limit = b;
                }
                _ => return ctx.error(NOT_INT),
            }
            j += 2;
        } else if rev.is_none() && o.eq_ignore_ascii_case(b"rev") {
            rev = Some(true);
        } else if by == By::Auto && o.eq_ignore_ascii_case(b"bylex") {
            by = By::Lex;
        } else if by == By::Auto && o.eq_ignore_ascii_case(b"byscore") {
            by = By::Score;
        } else {
            return ctx.error(SYNTAX_ERR);
        }
        j += 1;
    }
    let rev = rev.unwrap_or(false);
    if by == By::Auto {
        by = By::Rank;
    }
    if limit != -1 && by == By::Rank {
        return ctx.error(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        );
    }
    if withscores && by == By::Lex {
        return ctx.error("ERR syntax error, WITHSCORES not supported in combination with BYLEX");
    }
    let (mut a, mut b) = (argv.get(key_at + 1), argv.get(key_at + 2));
    if rev && by != By::Rank {
        std::mem::swap(&mut a, &mut b);
    }
    enum Spec<'a> {
        Rank(i64, i64),
        Score(ScoreRange),
        Lex(LexRange<'a>),
    }
    let spec = match by {
        By::Score => match parse_score_range(a, b) {
            Some(r) => Spec::Score(r),
            None => return ctx.error(RANGE_NOT_FLOAT),
        },
        By::Lex => match parse_lex_range(a, b) {
            Some(r) => Spec::Lex(r),
            None => return ctx.error(RANGE_NOT_LEX),
        },
        _ => match (parse_i64(a), parse_i64(b)) {
            (Some(s), Some(e)) => Spec::Rank(s, e),
            _ => return ctx.error(NOT_INT),
        },
    };

    let Some(z) = read_or_reply!(ctx, key) else {
        match dst {
            Some(d) => store_result(ctx, d, Vec::new(), "zrangestore"),
            None => ctx.reply.array_len(0),
        }
        return;
    };
    let (lo, hi) = match spec {
        Spec::Rank(s, e) => match index_span(s, e, z.len()) {
            None => (0, 0),
            Some((s, e)) if rev => (z.len() - 1 - e, z.len() - s),
            Some((s, e)) => (s, e + 1),
        },
        Spec::Score(r) => {
            let (lo, hi) = z.score_span(&r);
            limit_span(lo, hi, rev, offset, limit, z.is_large())
        }
        Spec::Lex(r) => {
            let (lo, hi) = z.lex_span(&r);
            limit_span(lo, hi, rev, offset, limit, z.is_large())
        }
    };
    match dst {
        None => reply_pairs(&mut ctx.reply, hi - lo, z.range(lo, hi, rev), withscores),
        Some(d) => {
            let pairs: Vec<_> = z.range(lo, hi, rev).map(|(m, s)| (m.to_vec(), s)).collect();
            store_result(ctx, d, pairs, "zrangestore");
        }
    }
}

fn zrange(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    zrange_generic(ctx, argv, 1, None, By::Auto, None);
}

fn zrangestore(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    zrange_generic(ctx, argv, 2, Some(argv.get(1)), By::Auto, None);
}

fn zrevrange(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    zrange_generic(ctx, argv, 1, None, By::Rank, Some(true));
}

fn zrangebyscore(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    zrange_generic(ctx, argv, 1, None, By::Score, Some(false));
}

fn zrevrangebyscore(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    zrange_generic(ctx, argv, 1, None, By::Score, Some(true));
}

fn zrangebylex(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    zrange_generic(ctx, argv, 1, None, By::Lex, Some(false));
}

fn zrevrangebylex(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    zrange_generic(ctx, argv, 1, None, By::Lex, Some(true));
}

// ---- ZREMRANGEBY* ------------------------------------------------------------

fn zremrange_generic(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, by: By) {
    let key = argv.get(1);
    let (a, b) = (argv.get(2), argv.get(3));
    let (rank, score, lex) = match by {
        By::Score => match parse_score_range(a, b) {
            Some(r) => (None, Some(r), None),
            None => return ctx.error(RANGE_NOT_FLOAT),
        },
        By::Lex => match parse_lex_range(a, b) {
            Some(r) => (None, None, Some(r)),
            None => return ctx.error(RANGE_NOT_LEX),
        },
        _ => match (parse_i64(a), parse_i64(b)) {
            (Some(s), Some(e)) => (Some((s, e)), None, None),
            _ => return ctx.error(NOT_INT),
        },
    };
    let Some(z) = write_or_reply!(ctx, key) else {
        return ctx.reply.int(0);
    };
    let (lo, hi) = if let Some((s, e)) = rank {
        match index_span(s, e, z.len()) {
            Some((s, e)) => (s, e + 1),
            None => (0, 0),
        }
    } else if let Some(r) = score {
        z.score_span(&r)
    } else if let Some(r) = lex {
        z.lex_span(&r)
    } else {
        (0, 0)
    };
    let n = z.remove_ranks(lo, hi);
    ctx.reply.int(n as i64);
    if n > 0 {
        let event = match by {
            By::Score => "zremrangebyscore",
            By::Lex => "zremrangebylex",
            _ => "zremrangebyrank",
        };
        after_removal(ctx, key, event);
    }
}

fn zremrangebyrank(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    zremrange_generic(ctx, argv, By::Rank);
}

fn zremrangebyscore(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    zremrange_generic(ctx, argv, By::Score);
}

fn zremrangebylex(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    zremrange_generic(ctx, argv, By::Lex);
}

// ---- Pops --------------------------------------------------------------------

/// How a pop reply is laid out (Valkey's `genericZpopCommand` with its
/// `emitkey` and `use_nested_array` switches).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PopShape {
    /// `[m1, s1, m2, s2, ...]`: ZPOPMIN/ZPOPMAX without COUNT, or any
    /// ZPOPMIN/ZPOPMAX in RESP2.
    Flat,
    /// `[[m1, s1], ...]`: ZPOPMIN/ZPOPMAX with COUNT in RESP3.
    Nested,
    /// `[key, m1, s1, ...]`: BZPOPMIN/BZPOPMAX (both protocols).
    KeyFlat,
    /// `[key, [[m1, s1], ...]]`: ZMPOP/BZMPOP (both protocols).
    KeyNested,
}

/// What a key holds, as a pop sees it: Valkey's `lookupKeyWrite` (lazy
/// expiry, no hit/miss counters). A stored sorted set is never empty, so
/// [`KeyState::ZSet`] means there is something to pop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyState {
    Missing,
    WrongType,
    ZSet,
}

/// The state of `key` in the session's database (for choosing the key a
/// pop works on, as ZMPOP and the blocking pops do).
pub(crate) fn key_state(ctx: &mut Ctx<'_>, key: &[u8]) -> KeyState {
    let db = ctx.session.db;
    let h = ctx.key_hash(key);
    match lookup(ctx.srv, db, key, h, ctx.now_ms, false) {
        Ok(Some(_)) => KeyState::ZSet,
        Ok(None) => KeyState::Missing,
        Err(WrongType) => KeyState::WrongType,
    }
}

/// Pop up to `count` (at least 1) lowest (`max == false`) or highest
/// members of the sorted set at `key` in the session's database and write
/// the reply in `shape`. The caller has already chosen the key: it must
/// exist, be live and hold a non-empty sorted set (the blocking forms
/// check this when woken, the non-blocking ones after their lookup).
/// Fires `zpopmin`/`zpopmax` (and `del` when the set is emptied, which
/// deletes the key) and signals the key. Returns how many were popped.
pub(crate) fn pop_reply(
    ctx: &mut Ctx<'_>,
    key: &[u8],
    max: bool,
    count: usize,
    shape: PopShape,
) -> usize {
    let db = ctx.session.db;
    let h = ctx.key_hash(key);
    let popped = match ctx.srv.keyspace.dbs[db]
        .get(h, key, ctx.now_ms)
        .and_then(|e| e.boxed_mut())
    {
        Some(Value::ZSet(z)) => z.pop(max, count),
        _ => Vec::new(),
    };
    let r = &mut ctx.reply;
    let nested = matches!(shape, PopShape::Nested | PopShape::KeyNested);
    match shape {
        PopShape::Flat => r.array_len(popped.len() * 2),
        PopShape::Nested => r.array_len(popped.len()),
        PopShape::KeyFlat => {
            r.array_len(popped.len() * 2 + 1);
            r.bulk(key);
        }
        PopShape::KeyNested => {
            r.array_len(2);
            r.bulk(key);
            r.array_len(popped.len());
        }
    }
    for (m, s) in &popped {
        if nested {
            r.array_len(2);
        }
        r.bulk(m);
        r.double(*s);
    }
    if !popped.is_empty() {
        after_removal(ctx, key, if max { "zpopmax" } else { "zpopmin" });
    }
    popped.len()
}

fn zpop_generic(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, max: bool) {
    if argv.len() > 3 {
        return ctx.error(SYNTAX_ERR);
    }
    let mut count = None;
    if argv.len() == 3 {
        match super::parse_positive(argv.get(2)) {
            Some(n) => count = Some(n as usize),
            None => return ctx.error(super::NOT_POSITIVE),
        }
    }
    let key = argv.get(1);
    match key_state(ctx, key) {
        KeyState::Missing => return ctx.reply.array_len(0),
        KeyState::WrongType => return ctx.error(WRONGTYPE),
        KeyState::ZSet => {}
    }
    match count {
        Some(0) => ctx.reply.array_len(0),
        Some(n) => {
            let shape = if resp3(&ctx.reply) {
                PopShape::Nested
            } else {
                PopShape::Flat
            };
            pop_reply(ctx, key, max, n, shape);
        }
        None => {
            pop_reply(ctx, key, max, 1, PopShape::Flat);
        }
    }
}

fn zpopmin(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    zpop_generic(ctx, argv, false);
}

fn zpopmax(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    zpop_generic(ctx, argv, true);
}

/// MIN or MAX: true for MAX.
fn parse_min_max(b: &[u8]) -> Option<bool> {
    if b.eq_ignore_ascii_case(b"min") {
        Some(false)
    } else if b.eq_ignore_ascii_case(b"max") {
        Some(true)
    } else {
        None
    }
}

/// The pop a blocking or multi-key pop is propagated as.
fn pop_verb(max: bool) -> &'static [u8] {
    if max { b"ZPOPMAX" } else { b"ZPOPMIN" }
}

fn zmpop(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let a = match parse_mpop(argv, 1, parse_min_max) {
        Ok(a) => a,
        Err(e) => return ctx.error(e),
    };
    let keys = (a.first_key..a.first_key + a.numkeys).map(|i| argv.get(i));
    match first_poppable(ctx, keys) {
        Err(()) => ctx.error(WRONGTYPE),
        Ok(Some(key)) => {
            let n = pop_reply(ctx, key, a.side, a.count, PopShape::KeyNested);
            super::propagate_pop_count(ctx, pop_verb(a.side), key, n);
        }
        Ok(None) => ctx.reply.null_array(),
    }
}

/// The first key, in argument order, holding a sorted set to pop from;
/// `Err` on a key of another type (Valkey checks them in order and stops
/// at the first one that is not missing).
fn first_poppable<'a>(
    ctx: &mut Ctx<'_>,
    keys: impl Iterator<Item = &'a [u8]>,
) -> Result<Option<&'a [u8]>, ()> {
    for key in keys {
        match key_state(ctx, key) {
            KeyState::Missing => {}
            KeyState::WrongType => return Err(()),
            KeyState::ZSet => return Ok(Some(key)),
        }
    }
    Ok(None)
}

/// BZPOPMIN/BZPOPMAX: pop one member from the first non-empty key, or
/// block on all of them. The engine runs this again when one is written.
fn bzpop_generic(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, max: bool) {
    let last = argv.len() - 1;
    let deadline = match crate::blocking::parse_timeout(argv.get(last), ctx.now_ms) {
        Ok(d) => d,
        Err(e) => return ctx.error(e),
    };
    let keys = (1..last).map(|i| argv.get(i));
    match first_poppable(ctx, keys.clone()) {
        Err(()) => ctx.error(WRONGTYPE),
        Ok(Some(key)) => {
            pop_reply(ctx, key, max, 1, PopShape::KeyFlat);
            ctx.propagate(&[pop_verb(max), key]);
        }
        Ok(None) => {
            let keys: Vec<&[u8]> = keys.collect();
            ctx.block(&keys, deadline, OnTimeout::NullArray);
        }
    }
}

fn bzpopmin(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    bzpop_generic(ctx, argv, false);
}

fn bzpopmax(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    bzpop_generic(ctx, argv, true);
}

fn bzmpop(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    // Valkey checks numkeys, MIN|MAX and COUNT before the timeout.
    let a = match parse_mpop(argv, 2, parse_min_max) {
        Ok(a) => a,
        Err(e) => return ctx.error(e),
    };
    let deadline = match crate::blocking::parse_timeout(argv.get(1), ctx.now_ms) {
        Ok(d) => d,
        Err(e) => return ctx.error(e),
    };
    let keys = (a.first_key..a.first_key + a.numkeys).map(|i| argv.get(i));
    match first_poppable(ctx, keys.clone()) {
        Err(()) => ctx.error(WRONGTYPE),
        Ok(Some(key)) => {
            let n = pop_reply(ctx, key, a.side, a.count, PopShape::KeyNested);
            super::propagate_pop_count(ctx, pop_verb(a.side), key, n);
        }
        Ok(None) => {
            let keys: Vec<&[u8]> = keys.collect();
            ctx.block(&keys, deadline, OnTimeout::NullArray);
        }
    }
}

// ---- ZUNION / ZINTER / ZDIFF ------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Agg {
    Sum,
    Min,
    Max,
}

/// `zunionInterAggregate`: +inf + -inf is taken as 0, not NaN.
fn aggregate(target: &mut f64, v: f64, agg: Agg) {
    match agg {
        Agg::Sum => {
            *target += v;
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Agg::Min => {
            if v < *target {
                *target = v;
            }
        }
        Agg::Max => {
            if v > *target {
                *target = v;
            }
        }
    }
}

/// One input of the set algebra: a sorted set, a plain set (every member
/// scores 1), or a missing key (empty).
#[derive(Clone, Copy)]
enum Src<'a> {
    Missing,
    Z(&'a ZSet),
}

impl<'a> Src<'a> {
    fn len(&self) -> usize {
        match self {
            Src::Missing => 0,
            Src::Z(z) => z.len(),
        }
    }
    fn score(&self, m: &[u8]) -> Option<f64> {
        match self {
            Src::Missing => None,
            Src::Z(z) => z.score(m),
        }
    }
    fn pairs(&self) -> Box<dyn Iterator<Item = (&'a [u8], f64)> + 'a> {
        match *self {
            Src::Missing => Box::new(std::iter::empty()),
            Src::Z(z) => Box::new(z.iter()),
        }
    }
}

/// Valkey's `zunionInterDiffGenericCommand`. `numkeys_at` indexes numkeys;
/// `dst` is the STORE destination; `card_only` is ZINTERCARD.
fn setop_generic(
    ctx: &mut Ctx<'_>,
    argv: ArgvRef<'_>,
    numkeys_at: usize,
    dst: Option<&[u8]>,
    op: SetOp,
    card_only: bool,
    name: &str,
) {
    let setnum = match parse_i64(argv.get(numkeys_at)) {
        None => return ctx.error(NOT_INT),
        Some(n) if n < 1 => {
            return ctx.error(&format!(
                "ERR at least 1 input key is needed for '{name}' command"
            ));
        }
        Some(n) => n as u64,
    };
    if setnum > (argv.len() - numkeys_at - 1) as u64 {
        return ctx.error(SYNTAX_ERR);
    }
    let setnum = setnum as usize;
    let first = numkeys_at + 1;
    // Pass 1: expire and type-check every input (reads count as lookups).
    let db = ctx.session.db;
    let now = ctx.now_ms;
    let mut hashes = Vec::with_capacity(setnum);
    for i in first..first + setnum {
        let key = argv.get(i);
        let h = ctx.key_hash(key);
        let found = ctx.srv.keyspace.dbs[db].get(h, key, now);
        let wrong = found
            .as_ref()
            .is_some_and(|e| !matches!(e.value(), ValueRef::ZSet(_) | ValueRef::Set(_)));
        // Valkey 8 reads the inputs with lookupKeyRead in the STORE forms
        // too.
        super::count_read(
            &mut ctx.srv.stats,
            Some(&mut ctx.srv.keymisses),
            found.is_some(),
            db,
            key,
        );
        if wrong {
            return ctx.error(WRONGTYPE);
        }
        hashes.push(h);
    }
    let mut weights = vec![1.0f64; setnum];
    let mut agg = Agg::Sum;
    let mut withscores = false;
    let mut limit: u64 = 0;
    let mut j = first + setnum;
    while j < argv.len() {
        let remaining = argv.len() - j;
        let o = argv.get(j);
        if op != SetOp::Diff && remaining > setnum && o.eq_ignore_ascii_case(b"weights") {
            for (k, w) in weights.iter_mut().enumerate() {
                match parse_f64(argv.get(j + 1 + k)) {
                    Some(v) => *w = v,
                    None => return ctx.error("ERR weight value is not a float"),
                }
            }
            j += 1 + setnum;
        } else if op != SetOp::Diff && remaining >= 2 && o.eq_ignore_ascii_case(b"aggregate") {
            let a = argv.get(j + 1);
            agg = if a.eq_ignore_ascii_case(b"sum") {
                Agg::Sum
            } else if a.eq_ignore_ascii_case(b"min") {
                Agg::Min
            } else if a.eq_ignore_ascii_case(b"max") {
                Agg::Max
            } else {
                return ctx.error(SYNTAX_ERR);
            };
            j += 2;
        } else if dst.is_none() && !card_only && o.eq_ignore_ascii_case(b"withscores") {
            withscores = true;
            j += 1;
        } else if card_only && remaining >= 2 && o.eq_ignore_ascii_case(b"limit") {
            match parse_i64(argv.get(j + 1)) {
                Some(n) if n >= 0 => limit = n as u64,
                _ => return ctx.error("ERR LIMIT can't be negative"),
            }
            j += 2;
        } else {
            return ctx.error(SYNTAX_ERR);
        }
    }

    // Pass 2: borrow every input at once (read-only). A plain set is an
    // input whose members all score 1: read it as such a sorted set.
    let d = &ctx.srv.keyspace.dbs[db];
    let limits = ctx.srv.config.encoding;
    let as_zsets: Vec<Option<ZSet>> = (0..setnum)
        .map(
            |k| match d.peek(hashes[k], argv.get(first + k)).map(Entry::value) {
                Some(ValueRef::Set(s)) => Some(ZSet::from_pairs(
                    crate::cmd::sets::members(s).map(|m| (m, 1.0)).collect(),
                    &limits,
                )),
                _ => None,
            },
        )
        .collect();
    let mut srcs: Vec<(Src<'_>, f64)> = (0..setnum)
        .map(|k| {
            let src = match d.peek(hashes[k], argv.get(first + k)).map(Entry::value) {
                Some(ValueRef::ZSet(z)) => Src::Z(z),
                Some(ValueRef::Set(_)) => Src::Z(as_zsets[k].as_ref().expect("materialized")),
                _ => Src::Missing,
            };
            (src, weights[k])
        })
        .collect();
    let weighted = |s: f64, w: f64| {
        let v = s * w;
        if v.is_nan() { 0.0 } else { v }
    };
    let mut out: Vec<(&[u8], f64)> = Vec::new();
    let mut card: u64 = 0;
    match op {
        SetOp::Inter => {
            // Walk the smallest input and probe the others, as Valkey does
            // (which also fixes the order scores are summed in).
            srcs.sort_by_key(|(s, _)| s.len());
            let (first_src, w0) = srcs[0];
            'outer: for (m, s) in first_src.pairs() {
                let mut score = weighted(s, w0);
                for (src, w) in &srcs[1..] {
                    match src.score(m) {
                        Some(v) => aggregate(&mut score, v * w, agg),
                        None => continue 'outer,
                    }
                }
                if card_only {
                    card += 1;
                    if limit != 0 && card >= limit {
                        break;
                    }
                } else {
                    out.push((m, score));
                }
            }
        }
        SetOp::Union => {
            srcs.sort_by_key(|(s, _)| s.len());
            let mut acc: HashMap<&[u8], usize> = HashMap::new();
            for (src, w) in &srcs {
                for (m, s) in src.pairs() {
                    let score = weighted(s, *w);
                    match acc.get(m) {
                        Some(&i) => aggregate(&mut out[i].1, score, agg),
                        None => {
                            acc.insert(m, out.len());
                            out.push((m, score));
                        }
                    }
                }
            }
        }
        SetOp::Diff => {
            let (first_src, _) = srcs[0];
            for (m, s) in first_src.pairs() {
                if srcs[1..].iter().all(|(src, _)| src.score(m).is_none()) {
                    out.push((m, s));
                }
            }
        }
    }
    if card_only {
        return ctx.reply.int(card as i64);
    }
    if let Some(dst) = dst {
        let pairs: Vec<(Vec<u8>, f64)> = out.into_iter().map(|(m, s)| (m.to_vec(), s)).collect();
        let event = match op {
            SetOp::Union => "zunionstore",
            SetOp::Inter => "zinterstore",
            SetOp::Diff => "zdiffstore",
        };
        return store_result(ctx, dst, pairs, event);
    }
    out.sort_by(|a, b| {
        a.1.partial_cmp(&b.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.0.cmp(b.0))
    });
    reply_pairs(&mut ctx.reply, out.len(), out.into_iter(), withscores);
}

fn zunion(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    setop_generic(ctx, argv, 1, None, SetOp::Union, false, "zunion");
}

fn zinter(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    setop_generic(ctx, argv, 1, None, SetOp::Inter, false, "zinter");
}

fn zdiff(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    setop_generic(ctx, argv, 1, None, SetOp::Diff, false, "zdiff");
}

fn zunionstore(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let dst = argv.get(1);
    setop_generic(ctx, argv, 2, Some(dst), SetOp::Union, false, "zunionstore");
}

fn zinterstore(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let dst = argv.get(1);
    setop_generic(ctx, argv, 2, Some(dst), SetOp::Inter, false, "zinterstore");
}

fn zdiffstore(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let dst = argv.get(1);
    setop_generic(ctx, argv, 2, Some(dst), SetOp::Diff, false, "zdiffstore");
}

fn zintercard(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    setop_generic(ctx, argv, 1, None, SetOp::Inter, true, "zintercard");
}

// ---- ZRANDMEMBER -------------------------------------------------------------

fn zrandmember(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let key = argv.get(1);
    if argv.len() == 2 {
        let Some(z) = read_or_reply!(ctx, key) else {
            return ctx.reply.null();
        };
        let (m, _) = z.get(rand_below(z.len())).expect("non-empty set");
        return ctx.reply.bulk(m);
    }
    let (count, withscores) = match parse_rand_args(argv, b"withscores") {
        Ok(x) => x,
        Err(e) => return ctx.error(&e),
    };
    let Some(z) = read_or_reply!(ctx, key) else {
        return ctx.reply.array_len(0);
    };
    let size = z.len();
    if count == 0 {
        return ctx.reply.array_len(0);
    }
    let r = &mut ctx.reply;
    // Negative: that many draws, repeats allowed; one draw is the same.
    if count < 0 || count == 1 {
        let n = count.unsigned_abs() as usize;
        let picks = (0..n).map(|_| z.get(rand_below(size)).expect("in range"));
        return reply_pairs(r, n, picks, withscores);
    }
    let count = count as usize;
    if count >= size {
        // The whole set, highest first: Valkey's zset iterator walks from
        // the tail.
        return reply_pairs(r, size, z.range(0, size, true), withscores);
    }
    let ranks = distinct_indexes(count, size);
    let picks = ranks.iter().map(|&k| z.get(k).expect("in range"));
    reply_pairs(r, count, picks, withscores);
}

// ---- ZSCAN -------------------------------------------------------------------

fn zscan(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let Some(mut cursor) = parse_cursor(argv.get(2)) else {
        return ctx.error("ERR invalid cursor");
    };
    let Some(z) = read_or_reply!(ctx, argv.get(1)) else {
        ctx.reply.array_len(2);
        ctx.reply.bulk(b"0");
        return ctx.reply.array_len(0);
    };
    let mut count: i64 = 10;
    let mut pattern: Option<&[u8]> = None;
    let mut noscores = false;
    let mut i = 3;
    while i < argv.len() {
        let o = argv.get(i);
        let has_value = i + 1 < argv.len();
        if o.eq_ignore_ascii_case(b"count") && has_value {
            match parse_i64(argv.get(i + 1)) {
                None => return ctx.reply.error(NOT_INT),
                Some(n) if n < 1 => return ctx.reply.error(SYNTAX_ERR),
                Some(n) => count = n,
            }
            i += 2;
        } else if o.eq_ignore_ascii_case(b"match") && has_value {
            let p = argv.get(i + 1);
            pattern = (p != b"*").then_some(p);
            i += 2;
        } else if o.eq_ignore_ascii_case(b"novalues") {
            return ctx
                .reply
                .error("ERR NOVALUES option can only be used in HSCAN");
        } else if o.eq_ignore_ascii_case(b"noscores") {
            noscores = true;
            i += 1;
        } else {
            return ctx.reply.error(SYNTAX_ERR);
        }
    }
    let compact = z.encoding() == "listpack";
    let mut found: Vec<(Vec<u8>, f64)> = Vec::new();
    let mut sampled: i64 = 0;
    let mut steps_left = count.saturating_mul(10);
    loop {
        cursor = z.scan_step(cursor, |m, s| {
            sampled += 1;
            if pattern.is_none_or(|p| glob::matches(p, m, false)) {
                found.push((m.to_vec(), s));
            }
        });
        if cursor == 0 || steps_left == 0 || sampled >= count {
            break;
        }
        steps_left -= 1;
    }
    let r = &mut ctx.reply;
    let mut buf = [0u8; resp::num::I64_MAX_LEN];
    r.array_len(2);
    r.bulk(resp::num::fmt_u64(cursor, &mut buf));
    r.array_len(if noscores {
        found.len()
    } else {
        found.len() * 2
    });
    let mut dbuf = [0u8; resp::num::DOUBLE_MAX_LEN];
    for (m, s) in &found {
        r.bulk(m);
        if !noscores {
            // The compact encoding hands back the score text it stores
            // (Valkey's d2string); the large one prints with %.17g.
            if compact {
                r.bulk(resp::num::fmt_double(*s, &mut dbuf));
            } else {
                // C's %.17g (`ld2string` with `LD_STR_AUTO`).
                r.bulk(resp::num::fmt_g(*s, 17).as_bytes());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans() {
        assert_eq!(index_span(0, -1, 5), Some((0, 4)));
        assert_eq!(index_span(-100, 100, 5), Some((0, 4)));
        assert_eq!(index_span(3, 1, 5), None);
        assert_eq!(index_span(5, 10, 5), None);
        assert_eq!(index_span(i64::MIN, i64::MAX, 5), Some((0, 4)));
        assert_eq!(limit_span(2, 8, false, 1, 2, false), (3, 5));
        assert_eq!(limit_span(2, 8, true, 1, 2, false), (5, 7));
        assert_eq!(limit_span(2, 8, false, 0, -1, false), (2, 8));
        assert_eq!(limit_span(2, 8, false, -1, 5, false), (2, 2));
        assert_eq!(limit_span(2, 8, false, 6, 5, false), (2, 2));
        // The large encoding counts a negative offset from the range's end.
        assert_eq!(limit_span(2, 8, false, -1, 5, true), (7, 8));
        assert_eq!(limit_span(2, 8, true, -2, -1, true), (2, 4));
        assert_eq!(limit_span(2, 8, false, -6, 2, true), (2, 4));
        assert_eq!(limit_span(2, 8, false, -7, 2, true), (2, 2));
        assert_eq!(limit_span(2, 8, false, i64::MIN, 2, true), (2, 2));
        assert_eq!(strtod_whole(b""), Some(0.0));
        assert_eq!(strtod_whole(b" 1"), Some(1.0));
        assert_eq!(strtod_whole(b"1e400"), Some(f64::INFINITY));
        assert_eq!(strtod_whole(b"nan"), None);
        assert_eq!(strtod_whole(b"1x"), None);
    }
}
