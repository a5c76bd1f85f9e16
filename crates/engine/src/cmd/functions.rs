//! Functions: FCALL FCALL_RO and FUNCTION (LOAD DELETE FLUSH LIST DUMP
//! RESTORE STATS KILL HELP), with Valkey 8's replies (`functions.c`). The
//! libraries and their Lua state are `script::functions::Functions`;
//! a function runs exactly as an EVAL script does
//! ([`super::scripting::run_script`]).
//!
//! FUNCTION LOAD/DELETE/FLUSH/RESTORE are emitted to the effects stream
//! as sent (a replica or AOF replays them); snapshots write every library
//! as RDB's FUNCTION2 (engine/src/snapshot.rs) and loads read them back
//! (engine/src/loading.rs).

use super::reply_help;
use super::scripting::{EVAL_FLAGS, EVAL_RO_FLAGS, numkeys, refused_up_front, run_script};
use crate::batch::ArgvRef;
use crate::command::flags::*;
use crate::command::{ArgSpec, CommandSpec, Ctx};
use script::functions::{FLAG_NAMES, Functions};

const ACL: &[&str] = &["slow", "scripting"];

const FCALL_ARGS: &[ArgSpec] = &[
    ArgSpec::string("function"),
    ArgSpec::integer("numkeys"),
    ArgSpec::key("key", 0).optional().multiple(),
    ArgSpec::string("arg").optional().multiple(),
];

const fn sub(
    name: &'static str,
    arity: i32,
    flags: u32,
    summary: &'static str,
    complexity: &'static str,
    func: crate::command::CommandFn,
    args: &'static [ArgSpec],
) -> CommandSpec {
    crate::command::spec(
        "scripting",
        name,
        arity,
        flags,
        (0, 0, 0),
        ACL,
        "7.0.0",
        summary,
        complexity,
        func,
        args,
    )
}

const FLUSH_MODE: &[ArgSpec] = &[ArgSpec::oneof(
    "flush-type",
    &[
        ArgSpec::pure_token("async", "ASYNC"),
        ArgSpec::pure_token("sync", "SYNC"),
    ],
)
.optional()];

pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        key_specs: super::scripting::SCRIPT_KEYS_RW,
        name: "fcall",
        arity: -3,
        flags: EVAL_FLAGS,
        acl_categories: ACL,
        group: "scripting",
        since: "7.0.0",
        summary: "Invokes a function.",
        complexity: "Depends on the function that is executed.",
        func: Some(fcall),
        args: FCALL_ARGS,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        key_specs: super::scripting::SCRIPT_KEYS_RO,
        name: "fcall_ro",
        arity: -3,
        flags: EVAL_RO_FLAGS,
        acl_categories: ACL,
        group: "scripting",
        since: "7.0.0",
        summary: "Invokes a read-only function.",
        complexity: "Depends on the function that is executed.",
        func: Some(fcall_ro),
        args: FCALL_ARGS,
        ..CommandSpec::DEFAULT
    },
    CommandSpec {
        name: "function",
        arity: -2,
        acl_categories: &["slow"],
        group: "scripting",
        since: "7.0.0",
        summary: "A container for function commands.",
        complexity: "Depends on subcommand.",
        subcommands: &[
            CommandSpec {
                acl_categories: &["write", "slow", "scripting"],
                tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
                ..sub(
                    "delete",
                    3,
                    NOSCRIPT | WRITE,
                    "Deletes a library and its functions.",
                    "O(1)",
                    function_delete,
                    &[ArgSpec::string("library-name")],
                )
            },
            sub(
                "dump",
                2,
                NOSCRIPT,
                "Dumps all libraries into a serialized binary payload.",
                "O(N) where N is the number of functions",
                function_dump,
                &[],
            ),
            CommandSpec {
                acl_categories: &["write", "slow", "scripting"],
                tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
                ..sub(
                    "flush",
                    -2,
                    NOSCRIPT | WRITE,
                    "Deletes all libraries and functions.",
                    "O(N) where N is the number of functions deleted",
                    function_flush,
                    FLUSH_MODE,
                )
            },
            sub(
                "help",
                2,
                LOADING | STALE,
                "Returns helpful text about the different subcommands.",
                "O(1)",
                function_help,
                &[],
            ),
            CommandSpec {
                tips: &["request_policy:all_shards", "response_policy:one_succeeded"],
                ..sub(
                    "kill",
                    2,
                    NOSCRIPT | ALLOW_BUSY,
                    "Terminates a function during execution.",
                    "O(1)",
                    function_kill,
                    &[],
                )
            },
            CommandSpec {
                tips: &["nondeterministic_output_order"],
                ..sub(
                    "list",
                    -2,
                    NOSCRIPT,
                    "Returns information about all libraries.",
                    "O(N) where N is the number of functions",
                    function_list,
                    &[
                        ArgSpec::string("library-name-pattern")
                            .token("LIBRARYNAME")
                            .optional(),
                        ArgSpec::pure_token("withcode", "WITHCODE").optional(),
                    ],
                )
            },
            CommandSpec {
                acl_categories: &["write", "slow", "scripting"],
                tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
                ..sub(
                    "load",
                    -3,
                    NOSCRIPT | WRITE | DENYOOM,
                    "Creates a library.",
                    "O(1) (considering compilation time is redundant)",
                    function_load,
                    &[
                        ArgSpec::pure_token("replace", "REPLACE").optional(),
                        ArgSpec::string("function-code"),
                    ],
                )
            },
            CommandSpec {
                acl_categories: &["write", "slow", "scripting"],
                tips: &["request_policy:all_shards", "response_policy:all_succeeded"],
                ..sub(
                    "restore",
                    -3,
                    NOSCRIPT | WRITE | DENYOOM,
                    "Restores all libraries from a payload.",
                    "O(N) where N is the number of functions on the payload",
                    function_restore,
                    &[
                        ArgSpec::string("serialized-value"),
                        ArgSpec::oneof(
                            "policy",
                            &[
                                ArgSpec::pure_token("flush", "FLUSH"),
                                ArgSpec::pure_token("append", "APPEND"),
                                ArgSpec::pure_token("replace", "REPLACE"),
                            ],
                        )
                        .optional(),
                    ],
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
                    NOSCRIPT | ALLOW_BUSY,
                    "Returns information about a function during execution.",
                    "O(1)",
                    function_stats,
                    &[],
                )
            },
        ],
        ..CommandSpec::DEFAULT
    },
];

fn functions<'a>(ctx: &'a mut Ctx<'_>) -> &'a mut Functions {
    ctx.srv.functions.get_or_insert_with(Box::default)
}

fn fcall(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    fcall_generic(ctx, argv, false);
}
fn fcall_ro(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    fcall_generic(ctx, argv, true);
}

/// Valkey's `fcallCommandGeneric`.
fn fcall_generic(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>, ro: bool) {
    ctx.monitor_script_command(argv);
    let name = String::from_utf8_lossy(argv.get(1)).into_owned();
    let Some(flags) = ctx
        .srv
        .functions
        .as_ref()
        .and_then(|f| f.get(&name))
        .map(|f| f.flags)
    else {
        return ctx.error("ERR Function not found");
    };
    let Some(numkeys) = numkeys(ctx, argv, "ERR Bad number of keys provided") else {
        return;
    };
    let no_writes = flags & script::flags::NO_WRITES != 0;
    let allow_oom = flags & script::flags::ALLOW_OOM != 0;
    if ro && !no_writes {
        return ctx.error("ERR Can not execute a script with write flag using *_ro command.");
    }
    if let Some(msg) = refused_up_front(ctx.srv, no_writes, allow_oom) {
        return ctx.error(msg);
    }
    let Some(mut fs) = ctx.srv.functions.take() else {
        return ctx.error("ERR Function not found");
    };
    let keys: Vec<&[u8]> = (3..3 + numkeys).map(|i| argv.get(i)).collect();
    let args: Vec<&[u8]> = (3 + numkeys..argv.len()).map(|i| argv.get(i)).collect();
    if !fs.has_watchdog() {
        fs.set_watchdog(super::scripting::watchdog(ctx.srv));
    }
    let (libraries, functions) = (fs.library_count(), fs.function_count());
    let describe = || crate::busy::Running {
        name: name.as_bytes().to_vec(),
        command: (0..argv.len()).map(|i| argv.get(i).to_vec()).collect(),
        libraries,
        functions,
    };
    crate::busy::with_running(&describe, || {
        run_script(ctx, false, ro || no_writes, allow_oom, |host, reply| {
            fs.call(&name, &keys, &args, host, reply)
        })
    });
    ctx.srv.functions = Some(fs);
}

fn function_load(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let mut replace = false;
    let mut i = 2;
    while i < argv.len() - 1 {
        if argv.get(i).eq_ignore_ascii_case(b"replace") {
            replace = true;
            i += 1;
        } else {
            let a = String::from_utf8_lossy(argv.get(i)).into_owned();
            return ctx.error(&format!("ERR Unknown option given: {a}"));
        }
    }
    match functions(ctx).load(argv.get(argv.len() - 1), replace) {
        Ok(name) => {
            ctx.force_propagation();
            ctx.reply.bulk(name.as_bytes());
        }
        Err(e) => ctx.error(&e),
    }
}

fn function_delete(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let name = String::from_utf8_lossy(argv.get(2)).into_owned();
    if functions(ctx).delete(&name) {
        ctx.force_propagation();
        ctx.reply.ok();
    } else {
        ctx.error("ERR Library not found");
    }
}

fn function_flush(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    if argv.len() > 3 {
        return super::subcommand_syntax_error(&mut ctx.reply, argv);
    }
    if argv.len() == 3
        && !argv.get(2).eq_ignore_ascii_case(b"sync")
        && !argv.get(2).eq_ignore_ascii_case(b"async")
    {
        return ctx.error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
    }
    if let Some(f) = ctx.srv.functions.as_mut() {
        f.flush();
    }
    ctx.force_propagation();
    ctx.reply.ok();
}

fn function_list(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let mut with_code = false;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 2;
    while i < argv.len() {
        let a = argv.get(i);
        if a.eq_ignore_ascii_case(b"withcode") {
            if with_code {
                return ctx.error("ERR Unknown argument withcode");
            }
            with_code = true;
        } else if a.eq_ignore_ascii_case(b"libraryname") {
            if pattern.is_some() {
                return ctx.error("ERR Unknown argument libraryname");
            }
            i += 1;
            if i >= argv.len() {
                return ctx.error("ERR library name argument was not given");
            }
            pattern = Some(argv.get(i));
        } else {
            let a = String::from_utf8_lossy(a).into_owned();
            return ctx.error(&format!("ERR Unknown argument {a}"));
        }
        i += 1;
    }
    let Ctx { srv, reply, .. } = ctx;
    let libs: Vec<_> = srv
        .functions
        .as_ref()
        .map(|f| {
            f.libraries()
                .filter(|l| {
                    pattern.is_none_or(|p| crate::glob::matches(p, l.name.as_bytes(), false))
                })
                .collect()
        })
        .unwrap_or_default();
    reply.array_len(libs.len());
    for lib in libs {
        reply.map_len(if with_code { 4 } else { 3 });
        reply.bulk(b"library_name");
        reply.bulk(lib.name.as_bytes());
        reply.bulk(b"engine");
        reply.bulk(b"LUA");
        reply.bulk(b"functions");
        reply.array_len(lib.functions.len());
        for f in &lib.functions {
            reply.map_len(3);
            reply.bulk(b"name");
            reply.bulk(f.name.as_bytes());
            reply.bulk(b"description");
            match &f.description {
                Some(d) => reply.bulk(d),
                None => reply.null(),
            }
            reply.bulk(b"flags");
            let names: Vec<&str> = FLAG_NAMES
                .iter()
                .filter(|(bit, _)| f.flags & bit != 0)
                .map(|(_, n)| *n)
                .collect();
            reply.set_len(names.len());
            for n in names {
                reply.simple(n);
            }
        }
        if with_code {
            reply.bulk(b"library_code");
            reply.bulk(&lib.code);
        }
    }
}

fn function_stats(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let (libs, funcs) = ctx
        .srv
        .functions
        .as_ref()
        .map_or((0, 0), |f| (f.library_count(), f.function_count()));
    let r = &mut ctx.reply;
    r.map_len(2);
    r.bulk(b"running_script");
    r.null();
    r.bulk(b"engines");
    r.map_len(1);
    r.bulk(b"LUA");
    r.map_len(2);
    r.bulk(b"libraries_count");
    r.int(libs as i64);
    r.bulk(b"functions_count");
    r.int(funcs as i64);
}

fn function_kill(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    // No script runs when the engine executes this (see `crate::busy`).
    ctx.error(crate::busy::NOTBUSY_ERR);
}

/// FUNCTION DUMP: each library as RDB's FUNCTION2 opcode and its code
/// (an RDB string), then the RDB version and a CRC64, as DUMP payloads.
fn function_dump(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    let mut out = Vec::new();
    if let Some(f) = ctx.srv.functions.as_ref() {
        for lib in f.libraries() {
            out.push(rdb::consts::OPCODE_FUNCTION2);
            rdb::encode::put_string(&mut out, &lib.code, ctx.srv.config.rdbcompression);
        }
    }
    out.extend_from_slice(&rdb::consts::RDB_VERSION.to_le_bytes());
    let crc = rdb::crc64::crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    ctx.reply.bulk(&out);
}

/// One RDB string at the front of `b`: plain or LZF (the forms a
/// function's code takes); the rest after it.
fn read_rdb_string(b: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    fn len(b: &[u8]) -> Option<(u64, bool, &[u8])> {
        let first = *b.first()?;
        match first >> 6 {
            0 => Some((u64::from(first & 0x3f), false, &b[1..])),
            1 => Some((
                (u64::from(first & 0x3f) << 8) | u64::from(*b.get(1)?),
                false,
                &b[2..],
            )),
            2 if first == 0x80 => Some((
                u64::from(u32::from_be_bytes(b.get(1..5)?.try_into().ok()?)),
                false,
                &b[5..],
            )),
            2 if first == 0x81 => Some((
                u64::from_be_bytes(b.get(1..9)?.try_into().ok()?),
                false,
                &b[9..],
            )),
            3 => Some((u64::from(first & 0x3f), true, &b[1..])),
            _ => None,
        }
    }
    let (n, special, rest) = len(b)?;
    if !special {
        let n = usize::try_from(n).ok()?;
        return Some((rest.get(..n)?.to_vec(), &rest[n..]));
    }
    match n {
        // RDB_ENC_LZF
        3 => {
            let (clen, _, rest) = len(rest)?;
            let (ulen, _, rest) = len(rest)?;
            let clen = usize::try_from(clen).ok()?;
            let data = rest.get(..clen)?;
            let s = rdb::lzf::decompress(data, usize::try_from(ulen).ok()?).ok()?;
            Some((s, &rest[clen..]))
        }
        // RDB_ENC_INT8/16/32: a number as text.
        0 => Some(((*rest.first()? as i8).to_string().into_bytes(), &rest[1..])),
        1 => Some((
            i16::from_le_bytes(rest.get(..2)?.try_into().ok()?)
                .to_string()
                .into_bytes(),
            &rest[2..],
        )),
        2 => Some((
            i32::from_le_bytes(rest.get(..4)?.try_into().ok()?)
                .to_string()
                .into_bytes(),
            &rest[4..],
        )),
        _ => None,
    }
}

fn function_restore(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    if argv.len() > 4 {
        return super::subcommand_syntax_error(&mut ctx.reply, argv);
    }
    #[derive(PartialEq)]
    enum Policy {
        Flush,
        Append,
        Replace,
    }
    let policy = if argv.len() == 4 {
        let p = argv.get(3);
        if p.eq_ignore_ascii_case(b"flush") {
            Policy::Flush
        } else if p.eq_ignore_ascii_case(b"append") {
            Policy::Append
        } else if p.eq_ignore_ascii_case(b"replace") {
            Policy::Replace
        } else {
            return ctx.error(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            );
        }
    } else {
        Policy::Append
    };
    let Some(body) = rdb::payload::verify(argv.get(2), ctx.srv.config.rdb_version_check_relaxed)
    else {
        return ctx.error("ERR DUMP payload version or checksum are wrong");
    };
    let mut codes = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        if rest[0] != rdb::consts::OPCODE_FUNCTION2 {
            return ctx.error("ERR given type is not a function");
        }
        match read_rdb_string(&rest[1..]) {
            Some((code, r)) => {
                codes.push(code);
                rest = r;
            }
            None => return ctx.error("ERR failed loading the given functions payload"),
        }
    }
    // All or nothing: every library loads on its own first (its code
    // runs, its functions register, the payload's libraries do not
    // collide with each other), then against what exists per the policy.
    let mut trial = Functions::new();
    for code in &codes {
        if let Err(e) = trial.load(code, false) {
            return ctx.error(&e);
        }
    }
    if policy != Policy::Flush
        && let Some(existing) = ctx.srv.functions.as_ref()
    {
        for lib in trial.libraries() {
            if policy == Policy::Append && existing.library(&lib.name).is_some() {
                return ctx.error(&format!("ERR Library {} already exists", lib.name));
            }
            for f in &lib.functions {
                if let Some(owner) = existing.library_of(&f.name)
                    && owner != lib.name
                {
                    return ctx.error(&format!("ERR Function {} already exists", f.name));
                }
            }
        }
    }
    if policy == Policy::Flush {
        functions(ctx).flush();
    }
    for code in &codes {
        if let Err(e) = functions(ctx).load(code, true) {
            return ctx.error(&e);
        }
    }
    ctx.force_propagation();
    ctx.reply.ok();
}

fn function_help(ctx: &mut Ctx<'_>, _argv: ArgvRef<'_>) {
    reply_help(
        ctx,
        "FUNCTION",
        &[
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries:",
            "    * Library name",
            "    * The engine used to run the Library",
            "    * Functions list",
            "    * Library code (if WITHCODE is given)",
            "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
            "STATS",
            "    Return information about the current function running:",
            "    * Function name",
            "    * Command used to run the function",
            "    * Duration in MS that the function is running",
            "    If no function is running, return nil",
            "    In addition, returns a list of available engines.",
            "KILL",
            "    Kill the current running function.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the libraries.",
            "    * SYNC: Synchronously flush the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
            "    control how to handle existing libraries (default APPEND):",
            "    * FLUSH: delete all existing libraries.",
            "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
            "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
            "      libraries with the new libraries (notice that even on this option there is a chance of failure",
            "      in case of functions name collision with another library).",
        ],
    );
}
