//! Scripting through the engine: EVAL and friends run their commands
//! through the normal dispatch, with Valkey 8.1's checks, replies and
//! effects (checked against valkey-server 8.1 by hand and by the e2e
//! differential test in tests/tests/scripting.rs).

mod core_util;
use core_util::*;
use ringkv_engine::Engine;

fn sha(body: &str) -> String {
    String::from_utf8(script::sha1::hex(body.as_bytes()).to_vec()).unwrap()
}

#[test]
fn eval_runs_commands_and_returns_their_results() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(
        cmd(
            &mut e,
            c,
            &[
                "EVAL",
                "return redis.call('SET', KEYS[1], ARGV[1])",
                "1",
                "k",
                "v"
            ]
        ),
        "+OK\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["GET", "k"]), "$1\r\nv\r\n");
    assert_eq!(
        cmd(
            &mut e,
            c,
            &[
                "EVAL",
                "return {redis.call('INCR', 'n'), redis.call('INCR', 'n'), redis.call('GET', 'nope')}",
                "0"
            ]
        ),
        "*3\r\n:1\r\n:2\r\n$-1\r\n"
    );
    assert_eq!(
        cmd(
            &mut e,
            c,
            &["EVAL", "return redis.call('GET', 'nope') == false", "0"]
        ),
        ":1\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["EVAL", "return redis.call('PING')", "0"]),
        "+PONG\r\n"
    );
}

#[test]
fn argument_and_cache_errors() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(
        cmd(&mut e, c, &["EVAL", "return 1", "2", "a"]),
        "-ERR Number of keys can't be greater than number of args\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["EVAL", "return 1", "-1"]),
        "-ERR Number of keys can't be negative\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["EVAL", "return 1", "x"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["EVALSHA", "aaaa", "0"]),
        "-NOSCRIPT No matching script.\r\n"
    );
    let s = sha("return 7");
    assert_eq!(
        cmd(&mut e, c, &["EVALSHA", &s, "0"]),
        "-NOSCRIPT No matching script.\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["SCRIPT", "LOAD", "return 7"]), bulk(&s));
    assert_eq!(cmd(&mut e, c, &["EVALSHA", &s, "0"]), ":7\r\n");
    assert_eq!(
        cmd(&mut e, c, &["EVALSHA", &s.to_uppercase(), "0"]),
        ":7\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["SCRIPT", "EXISTS", &s, "nope"]),
        "*2\r\n:1\r\n:0\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["SCRIPT", "SHOW", &s]), bulk("return 7"));
    assert!(cmd(&mut e, c, &["INFO", "memory"]).contains("number_of_cached_scripts:1\r\n"));
    assert_eq!(cmd(&mut e, c, &["SCRIPT", "FLUSH", "ASYNC"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["SCRIPT", "EXISTS", &s]), "*1\r\n:0\r\n");
    assert!(cmd(&mut e, c, &["INFO", "memory"]).contains("number_of_cached_scripts:0\r\n"));
    assert_eq!(
        cmd(&mut e, c, &["SCRIPT", "FLUSH", "BAD"]),
        "-ERR SCRIPT FLUSH only support SYNC|ASYNC option\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["SCRIPT", "KILL"]),
        "-NOTBUSY No scripts in execution right now.\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["SCRIPT", "LOAD", "return +"]),
        "-ERR Error compiling script (new function): user_script:1: unexpected symbol near '+'\r\n"
    );
}

#[test]
fn commands_refused_inside_scripts() {
    let mut e = engine();
    let c = connect(&mut e);
    let check = |e: &mut Engine, body: &str, msg: &str| {
        assert_eq!(
            cmd(e, c, &["EVAL", body, "0"]),
            format!("-{msg} script: {}, on @user_script:1.\r\n", sha(body))
        );
    };
    check(
        &mut e,
        "return redis.call('nosuch')",
        "ERR Unknown command called from script",
    );
    check(
        &mut e,
        "return redis.call('multi')",
        "ERR This Redis command is not allowed from script",
    );
    check(
        &mut e,
        "return redis.call('eval', 'return 1', 0)",
        "ERR This Redis command is not allowed from script",
    );
    check(
        &mut e,
        "return redis.call('get')",
        "ERR Wrong number of args calling command from script",
    );
    check(
        &mut e,
        "return redis.call('config', 'nosuch')",
        "ERR Unknown command called from script",
    );
    assert_eq!(
        cmd(&mut e, c, &["EVAL", "return redis.pcall('nosuch')", "0"]),
        "-ERR Unknown command called from script\r\n"
    );
    // Read-only scripts: EVAL_RO, and the no-writes flag.
    let body = "return redis.call('set','a','b')";
    assert_eq!(
        cmd(&mut e, c, &["EVAL_RO", body, "0"]),
        format!(
            "-ERR Write commands are not allowed from read-only scripts. script: {}, on @user_script:1.\r\n",
            sha(body)
        )
    );
    let body = "#!lua flags=no-writes\nreturn redis.call('set','a','b')";
    assert_eq!(
        cmd(&mut e, c, &["EVAL", body, "0"]),
        format!(
            "-ERR Write commands are not allowed from read-only scripts. script: {}, on @user_script:2.\r\n",
            sha(body)
        )
    );
    assert_eq!(
        cmd(&mut e, c, &["EVAL_RO", "return redis.call('get','a')", "0"]),
        "$-1\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["EXISTS", "a"]), ":0\r\n");
    // Wrong type errors come from the command itself.
    cmd(&mut e, c, &["SET", "s", "abc"]);
    let body = "return redis.call('incr','s')";
    assert_eq!(
        cmd(&mut e, c, &["EVAL", body, "0"]),
        format!(
            "-ERR value is not an integer or out of range script: {}, on @user_script:1.\r\n",
            sha(body)
        )
    );
    // EVAL itself cannot be queued inside a script, but can inside MULTI.
    assert_eq!(cmd(&mut e, c, &["MULTI"]), "+OK\r\n");
    assert_eq!(
        cmd(&mut e, c, &["EVAL", "return redis.call('incr', 'm')", "0"]),
        "+QUEUED\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["EXEC"]), "*1\r\n:1\r\n");
}

#[test]
fn select_inside_a_script_does_not_change_the_callers_db() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(
        cmd(
            &mut e,
            c,
            &[
                "EVAL",
                "redis.call('select', 3) redis.call('set', 'x', 'in3') return 1",
                "0"
            ]
        ),
        ":1\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["EXISTS", "x"]), ":0\r\n");
    assert_eq!(cmd(&mut e, c, &["SELECT", "3"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["GET", "x"]), bulk("in3"));
    // The script starts in the caller's db.
    assert_eq!(
        cmd(&mut e, c, &["EVAL", "return redis.call('get', 'x')", "0"]),
        bulk("in3")
    );
}

#[test]
fn resp3_conversions_follow_setresp() {
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["HSET", "h", "f", "v"]);
    // RESP2 (the default): HGETALL is a flat array.
    assert_eq!(
        cmd(
            &mut e,
            c,
            &["EVAL", "return redis.call('hgetall', 'h')", "0"]
        ),
        "*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    );
    // RESP3: a map table, returned to a RESP2 caller as a flat array and
    // to a RESP3 caller as a map.
    let body = "redis.setresp(3) return redis.call('hgetall', 'h')";
    assert_eq!(
        cmd(&mut e, c, &["EVAL", body, "0"]),
        "*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    );
    assert_eq!(
        cmd(
            &mut e,
            c,
            &[
                "EVAL",
                "redis.setresp(3) return redis.call('hgetall', 'h').map.f",
                "0"
            ]
        ),
        bulk("v")
    );
    assert_eq!(
        cmd(
            &mut e,
            c,
            &[
                "EVAL",
                "redis.setresp(3) return redis.call('get', 'nope') == nil",
                "0"
            ]
        ),
        ":1\r\n"
    );
    cmd(&mut e, c, &["HELLO", "3"]);
    assert_eq!(
        cmd(&mut e, c, &["EVAL", body, "0"]),
        "%1\r\n$1\r\nf\r\n$1\r\nv\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["EVAL", "return {double=3.5}", "0"]),
        ",3.5\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["EVAL", "return nil", "0"]), "_\r\n");
    // The caller's protocol is back after the script.
    assert_eq!(
        cmd(&mut e, c, &["HGETALL", "h"]),
        "%1\r\n$1\r\nf\r\n$1\r\nv\r\n"
    );
}

#[test]
fn blocking_commands_do_not_block_inside_scripts() {
    let mut e = engine();
    let c = connect(&mut e);
    assert_eq!(
        cmd(
            &mut e,
            c,
            &["EVAL", "return redis.call('blpop', 'q', 0)", "0"]
        ),
        "$-1\r\n"
    );
}

#[test]
fn denyoom_commands_fail_over_maxmemory_unless_allowed() {
    let mut e = engine();
    let c = connect(&mut e);
    // Always 100 bytes: over the limit, and nothing to evict (noeviction).
    e.set_used_memory_model(|_| 100);
    assert_eq!(
        cmd(&mut e, c, &["CONFIG", "SET", "maxmemory", "1"]),
        "+OK\r\n"
    );
    let body = "return redis.call('set', 'k', 'v')";
    let got = cmd(&mut e, c, &["EVAL", body, "0"]);
    assert_eq!(
        got,
        format!(
            "-OOM command not allowed when used memory > 'maxmemory'. script: {}, on @user_script:1.\r\n",
            sha(body)
        )
    );
    // A shebang script that may write is refused before it runs.
    assert_eq!(
        cmd(&mut e, c, &["EVAL", "#!lua\nreturn 1", "0"]),
        "-OOM command not allowed when used memory > 'maxmemory'.\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["EVAL", "#!lua flags=no-writes\nreturn 1", "0"]),
        ":1\r\n"
    );
    assert_eq!(
        cmd(
            &mut e,
            c,
            &[
                "EVAL",
                "#!lua flags=allow-oom\nreturn redis.call('set', 'k', 'v')",
                "0"
            ]
        ),
        "+OK\r\n"
    );
    // Reads still run.
    assert_eq!(
        cmd(&mut e, c, &["EVAL", "return redis.call('get', 'k')", "0"]),
        bulk("v")
    );
}

#[test]
fn a_scripts_writes_are_emitted_as_its_commands_in_one_unit() {
    let mut e = engine();
    let c = connect(&mut e);
    let mut r = e.attach_effects();
    // Several writes: their effects (not EVAL), wrapped in MULTI/EXEC,
    // with the SELECT the script ran inside the unit.
    cmd(
        &mut e,
        c,
        &[
            "EVAL",
            "redis.call('set', KEYS[1], 'v') redis.call('expire', KEYS[1], 100) redis.call('select', 2) redis.call('incr', 'n') return 1",
            "1",
            "k",
        ],
    );
    let got = effects(&mut e, &mut r);
    assert_eq!(got[0], v(&["MULTI"]));
    assert_eq!(got[1], v(&["SELECT", "0"]));
    assert_eq!(got[2], v(&["set", "k", "v"]));
    assert_eq!(got[3][0], "PEXPIREAT");
    assert_eq!(got[4], v(&["SELECT", "2"]));
    assert_eq!(got[5], v(&["incr", "n"]));
    assert_eq!(got[6], v(&["EXEC"]));
    assert_eq!(got.len(), 7);
    // One write: the command alone. A read-only script: nothing. A
    // failing write: nothing.
    cmd(&mut e, c, &["EVAL", "return redis.call('incr', 'n')", "0"]);
    cmd(&mut e, c, &["EVAL", "return redis.call('get', 'n')", "0"]);
    cmd(&mut e, c, &["SET", "s", "abc"]);
    cmd(&mut e, c, &["EVAL", "return redis.pcall('incr', 's')", "0"]);
    assert_eq!(
        effects(&mut e, &mut r),
        vec![
            v(&["SELECT", "0"]),
            v(&["incr", "n"]),
            v(&["SET", "s", "abc"]),
        ]
    );
    // redis.set_repl(REPL_NONE) keeps the next writes out of the stream.
    cmd(
        &mut e,
        c,
        &[
            "EVAL",
            "redis.set_repl(redis.REPL_NONE) redis.call('set', 'a', '1') redis.set_repl(redis.REPL_ALL) redis.call('set', 'b', '2')",
            "0",
        ],
    );
    assert_eq!(effects(&mut e, &mut r), vec![v(&["set", "b", "2"])]);
    assert_eq!(
        cmd(&mut e, c, &["MGET", "a", "b"]),
        "*2\r\n$1\r\n1\r\n$1\r\n2\r\n"
    );
}

#[test]
fn eval_keeps_at_most_500_scripts_and_evicts_the_least_recently_used() {
    let mut e = engine();
    let c = connect(&mut e);
    // Loaded with SCRIPT LOAD: never evicted.
    let kept = sha("return 'kept'");
    cmd(&mut e, c, &["SCRIPT", "LOAD", "return 'kept'"]);
    let first = sha("return 0");
    for i in 0..500 {
        cmd(&mut e, c, &["EVAL", &format!("return {i}"), "0"]);
        if i == 10 {
            // Used again: moves to the back of the line.
            assert_eq!(cmd(&mut e, c, &["EVALSHA", &first, "0"]), ":0\r\n");
        }
    }
    assert_eq!(
        cmd(&mut e, c, &["SCRIPT", "EXISTS", &first, &kept]),
        "*2\r\n:1\r\n:1\r\n"
    );
    assert!(cmd(&mut e, c, &["INFO", "stats"]).contains("evicted_scripts:0\r\n"));
    // The 501st EVAL script evicts the least recently used: `return 1`.
    cmd(&mut e, c, &["EVAL", "return 'new'", "0"]);
    assert_eq!(
        cmd(
            &mut e,
            c,
            &["SCRIPT", "EXISTS", &sha("return 1"), &first, &kept]
        ),
        "*3\r\n:0\r\n:1\r\n:1\r\n"
    );
    assert!(cmd(&mut e, c, &["INFO", "stats"]).contains("evicted_scripts:1\r\n"));
    assert!(cmd(&mut e, c, &["INFO", "memory"]).contains("number_of_cached_scripts:501\r\n"));
}

#[test]
fn functions_run_with_their_flags_and_propagate() {
    let mut e = engine();
    let c = connect(&mut e);
    let mut r = e.attach_effects();
    let lib = "#!lua name=lib\nredis.register_function('incr2', function(keys, args) redis.call('incr', keys[1]) return redis.call('incr', keys[1]) end)\nredis.register_function{function_name='peek', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}}";
    assert_eq!(cmd(&mut e, c, &["FUNCTION", "LOAD", lib]), bulk("lib"));
    assert_eq!(cmd(&mut e, c, &["FCALL", "incr2", "1", "n"]), ":2\r\n");
    assert_eq!(cmd(&mut e, c, &["FCALL_RO", "peek", "1", "n"]), bulk("2"));
    assert_eq!(
        cmd(&mut e, c, &["FCALL_RO", "incr2", "1", "n"]),
        "-ERR Can not execute a script with write flag using *_ro command.\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["FCALL", "nope", "0"]),
        "-ERR Function not found\r\n"
    );
    assert!(cmd(&mut e, c, &["INFO", "memory"]).contains("number_of_functions:2\r\n"));
    assert_eq!(cmd(&mut e, c, &["FUNCTION", "DELETE", "lib"]), "+OK\r\n");
    assert_eq!(
        effects(&mut e, &mut r),
        vec![
            v(&["SELECT", "0"]),
            v(&["FUNCTION", "LOAD", lib]),
            v(&["MULTI"]),
            v(&["incr", "n"]),
            v(&["incr", "n"]),
            v(&["EXEC"]),
            v(&["FUNCTION", "DELETE", "lib"]),
        ]
    );
}

#[test]
fn function_libraries_load_as_valkeys() {
    let mut e = engine();
    let c = connect(&mut e);
    let reg = "\nserver.register_function('f', function() return 1 end)";
    let load = |e: &mut Engine, shebang: &str| {
        cmd(e, c, &["FUNCTION", "FLUSH"]);
        cmd(e, c, &["FUNCTION", "LOAD", &format!("{shebang}{reg}")])
    };
    // The #! line is split as sdssplitargs splits: quotes, any case of
    // `name=`, and the engine is what follows #! up to the first space.
    assert_eq!(load(&mut e, "#!lua name=\"q\""), bulk("q"));
    assert_eq!(load(&mut e, "#!LUA NAME=up"), bulk("up"));
    assert_eq!(load(&mut e, "#! name=x"), "-ERR Engine '' not found\r\n");
    assert_eq!(
        load(&mut e, "#!lua name=a name=b"),
        "-ERR Invalid metadata value, name argument was given multiple times\r\n"
    );
    assert_eq!(
        load(&mut e, "#!lua name=\"open"),
        "-ERR Invalid library metadata\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["FUNCTION", "LOAD", "#!lua name=noline"]),
        "-ERR Invalid library metadata\r\n"
    );
    // While the library's code runs, only the server API exists (and of
    // it only register_function, log and the constants); its functions
    // see every global when called.
    for (code, missing) in [
        ("return math.random()", "math"),
        ("return tostring(1)", "tostring"),
        ("return cjson.encode({})", "cjson"),
        ("return server.setresp(3)", "setresp"),
        ("return server.REPL_ALL", "REPL_ALL"),
    ] {
        let lib = format!("#!lua name=g\n{code}");
        assert_eq!(
            cmd(&mut e, c, &["FUNCTION", "LOAD", "REPLACE", &lib]),
            format!(
                "-ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable '{missing}'\r\n"
            ),
            "{code}"
        );
    }
    let lib = "#!lua name=ok\nlocal level = server.LOG_NOTICE\nserver.register_function('Mixed_Case', function() return tostring(level) .. string.rep('x', 2) end)";
    assert_eq!(cmd(&mut e, c, &["FUNCTION", "LOAD", lib]), bulk("ok"));
    // Function names ignore case, library names do not.
    assert_eq!(cmd(&mut e, c, &["FCALL", "MIXED_CASE", "0"]), bulk("2xx"));
    assert_eq!(cmd(&mut e, c, &["FCALL", "mixed_case", "0"]), bulk("2xx"));
    let clash = "#!lua name=OK\nserver.register_function('mixed_CASE', function() return 1 end)";
    assert_eq!(
        cmd(&mut e, c, &["FUNCTION", "LOAD", clash]),
        "-ERR Function mixed_CASE already exists\r\n"
    );
    // Too many arguments: Valkey's subcommand syntax error.
    assert_eq!(
        cmd(&mut e, c, &["FUNCTION", "FLUSH", "SYNC", "x"]),
        "-ERR unknown subcommand or wrong number of arguments for 'FLUSH'. Try FUNCTION HELP.\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["FUNCTION", "RESTORE", "a", "b", "c"]),
        "-ERR unknown subcommand or wrong number of arguments for 'RESTORE'. Try FUNCTION HELP.\r\n"
    );
}

#[test]
fn read_only_scripts_refuse_commands_that_may_replicate() {
    let mut e = engine();
    let c = connect(&mut e);
    let refused = cmd(
        &mut e,
        c,
        &["EVAL_RO", "return redis.call('publish', 'ch', 'm')", "0"],
    );
    assert!(
        refused.starts_with("-ERR Write commands are not allowed from read-only scripts."),
        "{refused}"
    );
    assert_eq!(
        cmd(
            &mut e,
            c,
            &["EVAL", "return redis.call('publish', 'ch', 'm')", "0"]
        ),
        ":0\r\n"
    );
}

/// A small deterministic generator (xorshift) for the random-script test.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

#[test]
fn random_lua_gets_a_reply_never_a_crash() {
    // Fragments that reach the sandbox, the libraries, redis.call and the
    // conversions; glued at random, most programs do not even compile,
    // the rest run into every kind of error (or succeed).
    const PIECES: &[&str] = &[
        "return ",
        "local x = ",
        "x",
        " = ",
        "{",
        "}",
        "(",
        ")",
        "[",
        "]",
        ",",
        ";",
        " .. ",
        " + ",
        " - ",
        " * ",
        " / ",
        " % ",
        "#",
        "1",
        "0",
        "-1",
        "1e308",
        "0/0",
        "'s'",
        "\"\\0\"",
        "nil",
        "true",
        "false",
        "KEYS[1]",
        "ARGV[1]",
        "redis.call",
        "redis.pcall",
        "redis.error_reply",
        "redis.status_reply",
        "redis.setresp",
        "redis.sha1hex",
        "redis.log",
        "redis.set_repl",
        "'set'",
        "'get'",
        "'incr'",
        "'lpush'",
        "'hgetall'",
        "'del'",
        "'select'",
        "'eval'",
        "'multi'",
        "'nosuch'",
        "'k'",
        "'v'",
        "cjson.encode",
        "cjson.decode",
        "cmsgpack.pack",
        "cmsgpack.unpack",
        "struct.pack",
        "struct.unpack",
        "bit.band",
        "bit.tohex",
        "math.random",
        "string.rep",
        "table.concat",
        "tostring",
        "tonumber",
        "pcall",
        "error",
        "setmetatable",
        "getmetatable",
        "loadstring",
        "rawset",
        "_G",
        "string",
        "unpack",
        "select",
        "'#'",
        " function() ",
        " end ",
        " if ",
        " then ",
        " else ",
        " for i = 1, 3 do ",
        " while ",
        " do ",
        " and ",
        " or ",
        " not ",
        "{err='e'}",
        "{ok='o'}",
        "{double=1.5}",
        "{map={a=1}}",
        "{set={a=true}}",
        "{1,{2,{3}}}",
        "'%d'",
        "'[1,2'",
        "'\\205'",
        "'>i4'",
        "coroutine.wrap",
    ];
    let mut e = engine();
    let c = connect(&mut e);
    let mut scripts = script::Scripts::new();
    scripts.set_instruction_budget(Some(100_000));
    e.server_mut().scripts = Some(Box::new(scripts));
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..3000 {
        let n = 1 + rng.below(12);
        let body: String = (0..n).map(|_| PIECES[rng.below(PIECES.len())]).collect();
        let (out, _) = run_raw(&mut e, c, &encode(&[&["EVAL", &body, "1", "k", "a"]]));
        match resp::parse_value(&out) {
            Ok(Some((_, used))) => assert_eq!(used, out.len(), "one reply for {body:?}: {out:?}"),
            other => panic!("no reply for {body:?}: {other:?} {out:?}"),
        }
    }
    // The server still answers, in the caller's database and protocol.
    assert_eq!(cmd(&mut e, c, &["PING"]), "+PONG\r\n");
    assert_eq!(cmd(&mut e, c, &["SET", "after", "1"]), "+OK\r\n");
}

#[test]
fn function_restore_is_all_or_nothing() {
    let lib = |name: &str, f: &str| {
        format!("#!lua name={name}\nredis.register_function('{f}', function() return '{name}' end)")
    };
    // The payload: libraries b (function fb) and c (function fa).
    let mut other = engine();
    let o = connect(&mut other);
    cmd(&mut other, o, &["FUNCTION", "LOAD", &lib("b", "fb")]);
    cmd(&mut other, o, &["FUNCTION", "LOAD", &lib("c", "fa")]);
    let (dump, _) = run_raw(&mut other, o, &encode(&[&["FUNCTION", "DUMP"]]));
    let payload = match resp::parse_value(&dump).unwrap().unwrap().0 {
        resp::Value::Bulk(b) => b,
        other => panic!("{other:?}"),
    };
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["FUNCTION", "LOAD", &lib("a", "fa")]);
    let restore = |e: &mut Engine, policy: &[u8]| {
        let mut args: Vec<&[u8]> = vec![b"FUNCTION", b"RESTORE", &payload];
        if !policy.is_empty() {
            args.push(policy);
        }
        let mut req = Vec::new();
        req.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in &args {
            req.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            req.extend_from_slice(a);
            req.extend_from_slice(b"\r\n");
        }
        String::from_utf8_lossy(&run_raw(e, c, &req).0).into_owned()
    };
    // fa would exist twice: refused, and b is not half-restored.
    assert_eq!(restore(&mut e, b""), "-ERR Function fa already exists\r\n");
    assert_eq!(
        restore(&mut e, b"REPLACE"),
        "-ERR Function fa already exists\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["FCALL", "fb", "0"]),
        "-ERR Function not found\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["FCALL", "fa", "0"]), bulk("a"));
    // FLUSH replaces everything.
    assert_eq!(restore(&mut e, b"FLUSH"), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["FCALL", "fa", "0"]), bulk("c"));
    assert_eq!(cmd(&mut e, c, &["FCALL", "fb", "0"]), bulk("b"));
    assert_eq!(
        restore(&mut e, b"BAD"),
        "-ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.\r\n"
    );
}

#[test]
fn a_subscribed_callers_own_keyspace_events_do_not_become_the_commands_reply() {
    let mut e = engine();
    let c = connect(&mut e);
    cmd(&mut e, c, &["HELLO", "3"]);
    cmd(
        &mut e,
        c,
        &["CONFIG", "SET", "notify-keyspace-events", "KEA"],
    );
    cmd(&mut e, c, &["SUBSCRIBE", "__keyevent@0__:set"]);
    let mut drained = Vec::new();
    e.drain_output(|_, b| drained.extend_from_slice(b));
    // RESP2 inside the script (the default) and RESP3; the events come
    // as pushes, after each reply.
    let mut pushes = String::new();
    let out = cmd(
        &mut e,
        c,
        &[
            "EVAL",
            "local r = redis.call('set', 'k', 'v') return {r.ok, 'after'}",
            "0",
        ],
    );
    let reply = "*2\r\n$2\r\nOK\r\n$5\r\nafter\r\n";
    assert!(out.starts_with(reply), "{out}");
    pushes.push_str(&out[reply.len()..]);
    e.drain_output(|_, b| pushes.push_str(&String::from_utf8_lossy(b)));
    let out = cmd(
        &mut e,
        c,
        &[
            "EVAL",
            "redis.setresp(3) redis.call('hset', 'h', 'f', 'v') return redis.call('set', 'k', 'w')",
            "0",
        ],
    );
    assert!(out.starts_with("+OK\r\n"), "{out}");
    pushes.push_str(&out[5..]);
    e.drain_output(|_, b| pushes.push_str(&String::from_utf8_lossy(b)));
    let text = pushes;
    assert_eq!(
        text.matches(">3\r\n$7\r\nmessage\r\n$18\r\n__keyevent@0__:set\r\n$1\r\nk\r\n")
            .count(),
        2,
        "{text}"
    );
}

#[test]
fn scripts_see_the_versions_info_and_hello_report() {
    let mut e = engine();
    let c = connect(&mut e);
    let info = bulk_text(&cmd(&mut e, c, &["INFO", "server"]));
    let valkey = info_value(&info, "valkey_version");
    let redis = info_value(&info, "redis_version");
    assert_eq!(valkey, "8.1.8");
    let script = "return {server.VALKEY_VERSION, server.REDIS_VERSION, \
                  server.VALKEY_VERSION_NUM, server.REDIS_VERSION_NUM}";
    let num = |v: &str| {
        v.split('.')
            .fold(0i64, |n, part| (n << 8) | part.parse::<i64>().unwrap())
    };
    assert_eq!(
        cmd(&mut e, c, &["EVAL", script, "0"]),
        format!(
            "*4\r\n{}{}:{}\r\n:{}\r\n",
            bulk(&valkey),
            bulk(&redis),
            num(&valkey),
            num(&redis)
        )
    );
    // HELLO's `version` is Valkey's too.
    let hello = cmd(&mut e, c, &["HELLO", "2"]);
    assert!(
        hello.contains(&format!("$7\r\nversion\r\n{}", bulk(&valkey))),
        "{hello}"
    );
}

#[test]
fn acl_check_cmd_answers_for_the_scripts_caller() {
    let mut e = engine();
    let admin = connect(&mut e);
    cmd(
        &mut e,
        admin,
        &[
            "ACL", "SETUSER", "bob", "on", "nopass", "+@all", "-set", "~x*",
        ],
    );
    let c = connect(&mut e);
    assert_eq!(cmd(&mut e, c, &["AUTH", "bob", "any"]), "+OK\r\n");
    let check = |e: &mut Engine, call: &str| {
        cmd(
            e,
            c,
            &["EVAL", &format!("return redis.acl_check_cmd({call})"), "0"],
        )
    };
    assert_eq!(check(&mut e, "'get', 'x1'"), ":1\r\n");
    // A denied command, and a key outside the user's patterns.
    assert_eq!(check(&mut e, "'set', 'x1', 1"), "$-1\r\n");
    assert_eq!(check(&mut e, "'get', 'y'"), "$-1\r\n");
    assert_eq!(check(&mut e, "'config', 'get', 'x'"), ":1\r\n");
    for (call, err) in [
        (
            "'nosuch'",
            "ERR Invalid command passed to server.acl_check_cmd()",
        ),
        (
            "'config', 'nosub'",
            "ERR Invalid command passed to server.acl_check_cmd()",
        ),
        ("", "ERR Please specify at least one argument for this call"),
        (
            "'get', {}",
            "ERR Command arguments must be strings or integers",
        ),
    ] {
        let r = check(&mut e, call);
        assert!(r.starts_with(&format!("-{err} script: ")), "{call}: {r}");
    }
}
