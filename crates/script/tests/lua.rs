//! The script crate on its own: a fake host answers commands, the tests
//! read the replies a script produces.

use resp::{Protocol, ReplyWriter};
use script::{Host, Scripts};

/// Answers every command: GET → a bulk, ERR → an error, anything else →
/// its arguments as an array of bulks. Remembers logs.
#[derive(Default)]
struct Fake {
    logs: Vec<(u8, String)>,
    calls: usize,
}

impl Host for Fake {
    fn call(&mut self, argv: &[&[u8]], _resp3: bool, buf: &mut Vec<u8>) -> Result<(), String> {
        buf.extend_from_slice(&self.answer(argv)?);
        Ok(())
    }
    fn log(&mut self, level: u8, msg: &str) {
        self.logs.push((level, msg.to_string()));
    }
    fn set_repl(&mut self, _flags: u8) {}
    fn acl_check(&mut self, argv: &[&[u8]]) -> Option<bool> {
        (argv[0] != b"nosuch").then_some(argv[0] != b"denied")
    }
}

impl Fake {
    fn answer(&mut self, argv: &[&[u8]]) -> Result<Vec<u8>, String> {
        self.calls += 1;
        match argv[0] {
            b"get" => Ok(b"$3\r\nbar\r\n".to_vec()),
            b"nil" => Ok(b"$-1\r\n".to_vec()),
            b"err" => Ok(b"-WRONGTYPE bad\r\n".to_vec()),
            b"refuse" => Err("ERR This Redis command is not allowed from script".into()),
            b"map" => Ok(b"%1\r\n$1\r\na\r\n:1\r\n".to_vec()),
            _ => {
                let mut out = format!("*{}\r\n", argv.len()).into_bytes();
                for a in argv {
                    out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                    out.extend_from_slice(a);
                    out.extend_from_slice(b"\r\n");
                }
                Ok(out)
            }
        }
    }
}

fn eval_proto(s: &mut Scripts, body: &str, keys: &[&str], args: &[&str], p: Protocol) -> String {
    let mut out = Vec::new();
    let mut w = ReplyWriter::new(&mut out, p);
    match s.load(body.as_bytes()) {
        Ok(sha) => {
            let k: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
            let a: Vec<&[u8]> = args.iter().map(|k| k.as_bytes()).collect();
            s.run(&sha, &k, &a, &mut Fake::default(), &mut w);
        }
        Err(e) => w.error(&e),
    }
    String::from_utf8(out).unwrap()
}

fn eval(s: &mut Scripts, body: &str) -> String {
    eval_proto(s, body, &[], &[], Protocol::Resp2)
}

fn sha(body: &str) -> String {
    String::from_utf8(script::sha1::hex(body.as_bytes()).to_vec()).unwrap()
}

#[test]
fn lua_values_become_replies_as_valkey() {
    let mut s = Scripts::new();
    assert_eq!(eval(&mut s, "return 3.99"), ":3\r\n");
    assert_eq!(eval(&mut s, "return -3.99"), ":-3\r\n");
    assert_eq!(eval(&mut s, "return 'x'"), "$1\r\nx\r\n");
    assert_eq!(eval(&mut s, "return true"), ":1\r\n");
    assert_eq!(eval(&mut s, "return false"), "$-1\r\n");
    assert_eq!(eval(&mut s, "return nil"), "$-1\r\n");
    assert_eq!(
        eval(&mut s, "return {1,{2,'a'},nil,4}"),
        "*2\r\n:1\r\n*2\r\n:2\r\n$1\r\na\r\n"
    );
    assert_eq!(eval(&mut s, "return {ok='fine'}"), "+fine\r\n");
    assert_eq!(eval(&mut s, "return {err='MY oops'}"), "-MY oops\r\n");
    assert_eq!(eval(&mut s, "return redis.error_reply('x')"), "-ERR x\r\n");
    assert_eq!(
        eval(&mut s, "return redis.error_reply('-MINE x')"),
        "-MINE x\r\n"
    );
    assert_eq!(
        eval(&mut s, "return redis.status_reply('QUEUED')"),
        "+QUEUED\r\n"
    );
    // RESP3 types, written for a RESP3 caller.
    let r3 = |s: &mut Scripts, b: &str| eval_proto(s, b, &[], &[], Protocol::Resp3);
    assert_eq!(r3(&mut s, "return {double=1.5}"), ",1.5\r\n");
    assert_eq!(r3(&mut s, "return {map={a=1}}"), "%1\r\n$1\r\na\r\n:1\r\n");
    assert_eq!(r3(&mut s, "return {set={a=true}}"), "~1\r\n$1\r\na\r\n");
    assert_eq!(r3(&mut s, "return {big_number='123'}"), "(123\r\n");
    assert_eq!(r3(&mut s, "redis.setresp(3) return true"), "#t\r\n");
    assert_eq!(r3(&mut s, "redis.setresp(3) return false"), "#f\r\n");
    assert_eq!(r3(&mut s, "return false"), "_\r\n");
}

#[test]
fn keys_and_argv() {
    let mut s = Scripts::new();
    assert_eq!(
        eval_proto(
            &mut s,
            "return {KEYS[1], ARGV[2], #KEYS, #ARGV}",
            &["k"],
            &["a", "b"],
            Protocol::Resp2
        ),
        "*4\r\n$1\r\nk\r\n$1\r\nb\r\n:1\r\n:2\r\n"
    );
}

#[test]
fn errors_name_the_script_and_line() {
    let mut s = Scripts::new();
    let b = "return x";
    assert_eq!(
        eval(&mut s, b),
        format!(
            "-ERR user_script:1: Script attempted to access nonexistent global variable 'x' script: {}, on @user_script:1.\r\n",
            sha(b)
        )
    );
    let b = "x = 1";
    assert_eq!(
        eval(&mut s, b),
        format!(
            "-ERR user_script:1: Attempt to modify a readonly table script: {}, on @user_script:1.\r\n",
            sha(b)
        )
    );
    let b = "redis.call = 1";
    assert!(eval(&mut s, b).starts_with("-ERR user_script:1: Attempt to modify a readonly table"));
    let b = "string.x = 1";
    assert!(eval(&mut s, b).starts_with("-ERR user_script:1: Attempt to modify a readonly table"));
    let b = "\n\nerror('boom')";
    assert_eq!(
        eval(&mut s, b),
        format!(
            "-ERR user_script:3: boom script: {}, on @user_script:3.\r\n",
            sha(b)
        )
    );
    let b = "error({err='X custom'})";
    assert_eq!(
        eval(&mut s, b),
        format!("-X custom script: {}, on @user_script:1.\r\n", sha(b))
    );
    assert_eq!(
        eval(&mut s, "return +"),
        "-ERR Error compiling script (new function): user_script:1: unexpected symbol near '+'\r\n"
    );
    // redis.call raises the command's error; redis.pcall returns it.
    let b = "local a = 1\nreturn redis.call('err')";
    assert_eq!(
        eval(&mut s, b),
        format!("-WRONGTYPE bad script: {}, on @user_script:2.\r\n", sha(b))
    );
    assert_eq!(
        eval(&mut s, "return redis.pcall('err')"),
        "-WRONGTYPE bad\r\n"
    );
    assert_eq!(
        eval(&mut s, "local t = redis.pcall('refuse') return t.err"),
        "$49\r\nERR This Redis command is not allowed from script\r\n"
    );
    let b = "return redis.call()";
    assert_eq!(
        eval(&mut s, b),
        format!(
            "-ERR Please specify at least one argument for this call script: {}, on @user_script:1.\r\n",
            sha(b)
        )
    );
    let b = "return redis.call('set', {}, 1)";
    assert!(
        eval(&mut s, b).starts_with("-ERR Command arguments must be strings or integers script:")
    );
    let b = "return redis.setresp(4)";
    assert!(eval(&mut s, b).starts_with("-ERR RESP version must be 2 or 3. script:"));
    // A runaway recursion is an error, not a crash.
    assert!(
        eval(&mut s, "local function f() return f() + 1 end return f()")
            .starts_with("-ERR user_script:1: stack overflow")
    );
    // A table that holds itself stops at the depth limit.
    assert!(eval(&mut s, "local t = {} t[1] = t return t").contains("reached lua stack limit"));
}

#[test]
fn replies_become_lua_values() {
    let mut s = Scripts::new();
    assert_eq!(
        eval(&mut s, "return redis.call('get', 'k')"),
        "$3\r\nbar\r\n"
    );
    assert_eq!(
        eval(&mut s, "return tostring(redis.call('nil'))"),
        "$5\r\nfalse\r\n"
    );
    assert_eq!(
        eval(&mut s, "return redis.call('echo', 1.5, 7)"),
        "*3\r\n$4\r\necho\r\n$3\r\n1.5\r\n$1\r\n7\r\n"
    );
    assert_eq!(
        eval(&mut s, "return server.call('get', 'k')"),
        "$3\r\nbar\r\n"
    );
    assert_eq!(eval(&mut s, "return redis.call('map').map.a"), ":1\r\n");
}

#[test]
fn sandbox_hides_io_and_friends() {
    let mut s = Scripts::new();
    for g in [
        "io", "dofile", "loadfile", "require", "debug", "setfenv", "print",
    ] {
        let r = eval(&mut s, &format!("return type({g})"));
        assert!(r.contains("nonexistent global variable"), "{g}: {r}");
    }
    assert_eq!(eval(&mut s, "return type(os.clock)"), "$8\r\nfunction\r\n");
    assert_eq!(eval(&mut s, "return os.exit"), "$-1\r\n");
    // Code loaded at run time gets the same read-only globals.
    assert!(eval(&mut s, "loadstring('y = 1')()").contains("Attempt to modify a readonly table"));
}

/// Read-only libraries and `_G` can be walked as Valkey's (the test suite
/// of Valkey 8.1 lists `os` to check that only `clock` is left), without
/// handing out the table behind the proxy; argument errors name the
/// script's line even from a tail call.
#[test]
fn readonly_tables_can_be_walked() {
    let mut s = Scripts::new();
    let keys = "local t = {} for k, v in pairs(os) do t[#t + 1] = k .. '=' .. type(v) end return t";
    assert_eq!(eval(&mut s, keys), "*1\r\n$14\r\nclock=function\r\n");
    assert_eq!(text(&mut s, "return next(os)"), "clock");
    assert_eq!(
        eval(
            &mut s,
            "local n = 0 for i, v in ipairs({5, 6, nil, 8}) do n = n + v end return n"
        ),
        ":11\r\n"
    );
    let globals = "local n = 0 for k in pairs(_G) do if k == 'redis' or k == 'cjson' then n = n + 1 end end return n";
    assert_eq!(eval(&mut s, globals), ":2\r\n");
    // The iteration state is the proxy: still read-only.
    let b = "local _, t = pairs(string) t.x = 1";
    assert!(eval(&mut s, b).contains("Attempt to modify a readonly table"));
    for (b, msg) in [
        (
            "return pairs(nil)",
            "bad argument #1 to 'pairs' (table expected, got nil)",
        ),
        (
            "return ipairs()",
            "bad argument #1 to 'ipairs' (table expected, got no value)",
        ),
        (
            "return next(1)",
            "bad argument #1 to 'next' (table expected, got number)",
        ),
    ] {
        assert_eq!(
            eval(&mut s, b),
            format!(
                "-ERR user_script:1: {msg} script: {}, on @user_script:1.\r\n",
                sha(b)
            )
        );
    }
}

#[test]
fn math_random_follows_valkeys_sequence() {
    // A fresh Valkey 8.1 answers 40, 85, 4 and then 45, 32, 9.
    let mut s = Scripts::new();
    let b = "return {math.random(100), math.random(100), math.random(1,10)}";
    assert_eq!(eval(&mut s, b), "*3\r\n:40\r\n:85\r\n:4\r\n");
    assert_eq!(eval(&mut s, b), "*3\r\n:45\r\n:32\r\n:9\r\n");
    assert_eq!(
        eval(&mut s, "math.randomseed(7) return tostring(math.random())"),
        "$14\r\n0.26644419658298\r\n".replace("$14", "$16")
    );
}

#[test]
fn bit_and_cjson() {
    let mut s = Scripts::new();
    assert_eq!(
        eval(&mut s, "return bit.tohex(65535)"),
        "$8\r\n0000ffff\r\n"
    );
    assert_eq!(eval(&mut s, "return bit.tohex(-1, -4)"), "$4\r\nFFFF\r\n");
    // Valkey's fix: the most negative width is 8 upper-case digits.
    assert_eq!(
        eval(&mut s, "return bit.tohex(65535, -2147483648)"),
        "$8\r\n0000FFFF\r\n"
    );
    assert_eq!(eval(&mut s, "return bit.band(0xff, 0x0f, 0x3)"), ":3\r\n");
    assert_eq!(eval(&mut s, "return bit.lshift(1, 31)"), ":-2147483648\r\n");
    assert_eq!(eval(&mut s, "return bit.rshift(-1, 28)"), ":15\r\n");
    assert_eq!(eval(&mut s, "return bit.arshift(-256, 4)"), ":-16\r\n");
    assert_eq!(eval(&mut s, "return bit.tobit(2^32 + 5)"), ":5\r\n");
    assert_eq!(
        eval(&mut s, "return bit.bswap(0x12345678)"),
        format!(":{}\r\n", 0x78563412)
    );
    assert_eq!(
        eval(&mut s, "return cjson.encode({1,2,{a='x/y'}, 1.5, 1e20})"),
        "$28\r\n[1,2,{\"a\":\"x\\/y\"},1.5,1e+20]\r\n"
    );
    assert_eq!(eval(&mut s, "return cjson.encode({})"), "$2\r\n{}\r\n");
    assert_eq!(
        eval(
            &mut s,
            "return cjson.decode('[1,2,{\"a\":null}]')[3].a == cjson.null"
        ),
        ":1\r\n"
    );
    assert_eq!(
        eval(&mut s, "return cjson.decode('{\"k\":\"\\\\u00e9\"}').k"),
        "$2\r\n\u{e9}\r\n"
    );
    let r = eval(&mut s, "return cjson.decode('[1,')");
    assert!(
        r.starts_with("-ERR user_script:1: Expected value but found T_END at character 4 script:"),
        "{r}"
    );
}

/// `eval` of a script that returns one string, as that string.
fn text(s: &mut Scripts, body: &str) -> String {
    let r = eval(s, body);
    match r.split_once("\r\n") {
        Some((len, rest)) if len.starts_with('$') => rest.trim_end_matches("\r\n").to_string(),
        _ => r,
    }
}

#[test]
fn cjson_settings_and_rules_are_lua_cjsons() {
    // Every expected text below is what Valkey 8.1 answered.
    let mut s = Scripts::new();
    let cases: &[(&str, &str)] = &[
        // The settings in force, and their changes, last for the state.
        (
            "return table.concat({cjson.encode_max_depth(), cjson.decode_max_depth(), cjson.encode_number_precision()}, ' ')",
            "1000 1000 14",
        ),
        (
            "local c, r, s = cjson.encode_sparse_array() return tostring(c) .. ' ' .. r .. ' ' .. s",
            "false 2 10",
        ),
        (
            "return tostring(cjson.encode_invalid_numbers()) .. tostring(cjson.decode_invalid_numbers())",
            "falsetrue",
        ),
        (
            "cjson.encode_number_precision(3) return cjson.encode(1/3)",
            "0.333",
        ),
        ("return cjson.encode(1/3)", "0.333"),
        (
            "cjson.encode_number_precision(14) return cjson.encode(1/3)",
            "0.33333333333333",
        ),
        ("return cjson.encode({[1]=1,[3]=3})", "[1,null,3]"),
        (
            "cjson.encode_sparse_array(true) local r = cjson.encode({[1]=1,[20]=3}) cjson.encode_sparse_array(false) return r",
            "{\"1\":1,\"20\":3}",
        ),
        (
            "local ok, e = pcall(cjson.encode, {[1]=1,[20]=3}) return e",
            "Cannot serialise table: excessively sparse array",
        ),
        (
            "return cjson.encode_invalid_numbers('null') .. cjson.encode({1/0, 0/0})",
            "null[null,null]",
        ),
        (
            "cjson.encode_invalid_numbers(true) local r = cjson.encode({1/0, -1/0, 0/0}) cjson.encode_invalid_numbers(false) return r",
            "[inf,-inf,nan]",
        ),
        (
            "cjson.encode_max_depth(2) local ok, e = pcall(cjson.encode, {{{1}}}) cjson.encode_max_depth(1000) return e",
            "Cannot serialise, excessive nesting (3)",
        ),
        (
            "cjson.decode_max_depth(2) local ok, e = pcall(cjson.decode, '[[[1]]]') cjson.decode_max_depth(1000) return e",
            "Found too many nested data structures (3) at character 3",
        ),
        (
            "local ok, e = pcall(cjson.encode_number_precision, 15) return e",
            "bad argument #1 to 'encode_number_precision' (expected integer between 1 and 14)",
        ),
        (
            "local ok, e = pcall(cjson.encode_sparse_array, 'yes') return e",
            "bad argument #1 to 'encode_sparse_array' (invalid option 'yes')",
        ),
        (
            "local ok, e = pcall(cjson.encode_max_depth, 1, 2) return e",
            "bad argument #2 to 'encode_max_depth' (found too many arguments)",
        ),
        (
            "local ok, e = pcall(cjson.encode, {[true]=1}) return e",
            "Cannot serialise boolean: table key must be a number or string",
        ),
        // Decoding reads numbers as strtod does, JSON or not.
        (
            "return tostring(cjson.decode('0x10')) .. tostring(cjson.decode('-Infinity')) .. tostring(cjson.decode('+1'))",
            "16-inf1",
        ),
        (
            "cjson.decode_invalid_numbers(false) local ok, e = pcall(cjson.decode, '0x10') cjson.decode_invalid_numbers(true) return e",
            "Expected value but found invalid number at character 1",
        ),
        (
            "local ok, e = pcall(cjson.decode, '\"\\\\ud83d\"') return e",
            "Expected value but found invalid unicode escape code at character 2",
        ),
        (
            "local ok, e = pcall(cjson.decode, '\"abc') return e",
            "Expected value but found unexpected end of string at character 5",
        ),
        (
            "local ok, e = pcall(cjson.decode, 'tru') return e",
            "Expected value but found invalid token at character 1",
        ),
        (
            "local ok, e = pcall(cjson.decode, '[1] x') return e",
            "Expected the end but found invalid token at character 5",
        ),
    ];
    for (body, want) in cases {
        assert_eq!(&text(&mut s, body), want, "{body}");
    }
}

#[test]
fn pcall_gives_a_library_functions_error_as_a_string() {
    let mut s = Scripts::new();
    assert_eq!(
        text(
            &mut s,
            "local ok, e = pcall(bit.tohex) return type(e) .. ': ' .. e"
        ),
        "string: bad argument #1 to 'tohex' (number expected, got no value)"
    );
    assert_eq!(
        text(&mut s, "local ok, e = pcall(cjson.decode, '[1,') return e"),
        "Expected value but found T_END at character 4"
    );
}

#[test]
fn tables_far_larger_than_luas_c_stack_are_replied_and_encoded_whole() {
    // Lua 5.1 lets Rust hold ~8,000 values at once; these are larger.
    let mut s = Scripts::new();
    let r = eval(
        &mut s,
        "local t = {} for i = 1, 100000 do t[i] = tostring(i) end return t",
    );
    assert!(r.starts_with("*100000\r\n$1\r\n1\r\n"), "{}", &r[..40]);
    assert!(r.ends_with("$6\r\n100000\r\n"));
    let map = "local m = {} for i = 1, 100000 do m[tostring(i)] = i end ";
    assert_eq!(
        eval(&mut s, &format!("{map} return #cmsgpack.pack(m)")),
        ":957448\r\n"
    );
    assert_eq!(
        eval(&mut s, &format!("{map} return #cjson.encode(m)")),
        ":1377791\r\n"
    );
    let r = eval_proto(
        &mut s,
        &format!("redis.setresp(3) {map} return {{map = m}}"),
        &[],
        &[],
        Protocol::Resp3,
    );
    assert!(r.starts_with("%100000\r\n"), "{}", &r[..20]);
}

#[test]
fn redis_call_takes_as_many_arguments_as_lua_can_pass() {
    // 7,999 values fill Lua 5.1's C stack but for one slot: the call's
    // arguments are dropped before its reply is pushed, as in Valkey.
    let mut s = Scripts::new();
    let r = eval(
        &mut s,
        "local a = {} for i = 1, 7998 do a[i] = 'v' end return #redis.call('echo', unpack(a))",
    );
    assert_eq!(r, ":7999\r\n");
}

#[test]
fn the_sandbox_refuses_bytecode_and_raw_writes_as_valkeys() {
    // Texts and replies as Valkey 8.1 gives them.
    let mut s = Scripts::new();
    let cases: &[(&str, &str)] = &[
        (
            "return select(2, loadstring(string.dump(function() return 1 end)))",
            "[string \"\u{1b}LuaQ\"]:1: unexpected symbol near 'char(27)'",
        ),
        (
            "local s, done = string.dump(function() return 1 end), false return select(2, load(function() if done then return nil end done = true return s end))",
            "(load):1: unexpected symbol near 'char(27)'",
        ),
        (
            "return select(2, loadstring('return +\\nx'))",
            "[string \"return +...\"]:1: unexpected symbol near '+'",
        ),
        ("return loadstring('return 7')() .. ''", "7"),
        (
            "return type(getmetatable(_G)) .. tostring(getmetatable(redis))",
            "tablenil",
        ),
    ];
    for (body, want) in cases {
        assert_eq!(&text(&mut s, body), want, "{body}");
    }
    for body in [
        "setmetatable(_G, {})",
        "setmetatable(cjson, {})",
        "rawset(_G, 'redis', 1)",
        "rawset(redis, 'call', 1)",
        "getmetatable(_G).__index = {}",
    ] {
        let r = eval(&mut s, body);
        assert!(
            r.contains("Attempt to modify a readonly table"),
            "{body}: {r}"
        );
    }
    // Nothing of that stuck: a new script sees the real `redis`.
    assert_eq!(
        eval(&mut s, "return type(redis.call)"),
        "$8\r\nfunction\r\n"
    );
}

#[test]
fn cache_and_flush() {
    let mut s = Scripts::new();
    let sha = s.load(b"return 1").unwrap();
    assert!(s.exists(&sha));
    assert!(s.exists(&sha.to_ascii_uppercase()));
    assert_eq!(s.len(), 1);
    s.flush();
    assert!(!s.exists(&sha));
    assert_eq!(s.len(), 0);
}

#[test]
fn shebang_flags() {
    use script::flags::*;
    assert_eq!(
        script::parse_shebang(b"return 1").unwrap().0,
        EVAL_COMPAT_MODE
    );
    assert_eq!(
        script::parse_shebang(b"#!lua flags=no-writes,allow-oom\nreturn 1")
            .unwrap()
            .0,
        NO_WRITES | ALLOW_OOM
    );
    assert_eq!(script::parse_shebang(b"#!lua\nreturn 1").unwrap().0, 0);
    assert_eq!(
        script::parse_shebang(b"#!lua flags=bad\n").unwrap_err(),
        "ERR Unexpected flag in script shebang: bad"
    );
    assert_eq!(
        script::parse_shebang(b"#!lua name=x\n").unwrap_err(),
        "ERR Unknown lua shebang option: name=x"
    );
    assert_eq!(
        script::parse_shebang(b"#!luax\n").unwrap_err(),
        "ERR Could not find scripting engine 'luax'"
    );
    let mut s = Scripts::new();
    let b = "#!lua\nerror('x')";
    assert_eq!(
        eval(&mut s, b),
        format!(
            "-ERR user_script:2: x script: {}, on @user_script:2.\r\n",
            sha(b)
        )
    );
}

#[test]
fn log_reaches_the_host() {
    let mut s = Scripts::new();
    let sha = s
        .load(b"redis.log(redis.LOG_WARNING, 'hello', 42) return 1")
        .unwrap();
    let mut out = Vec::new();
    let mut w = ReplyWriter::new(&mut out, Protocol::Resp2);
    let mut h = Fake::default();
    s.run(&sha, &[], &[], &mut h, &mut w);
    assert_eq!(h.logs, vec![(3, "hello 42".to_string())]);
}

#[test]
fn cmsgpack_round_trips_and_encodes_as_lua_cmsgpack() {
    let mut s = Scripts::new();
    // 1 → fixint, 300 → uint16, -1 → negative fixint, 'ab' → fixstr,
    // {1,2} → fixarray, 1.5 → float32.
    let sha = s
        .load(b"return cmsgpack.pack(1, 300, -1, 'ab', {1, 2}, 1.5)")
        .unwrap();
    let mut out = Vec::new();
    let mut w = ReplyWriter::new(&mut out, Protocol::Resp2);
    s.run(&sha, &[], &[], &mut Fake::default(), &mut w);
    let mut want = b"$16\r\n".to_vec();
    want.extend_from_slice(&[
        0x01, 0xcd, 0x01, 0x2c, 0xff, 0xa2, b'a', b'b', 0x92, 0x01, 0x02, 0xca, 0x3f, 0xc0, 0x00,
        0x00,
    ]);
    want.extend_from_slice(b"\r\n");
    assert_eq!(out, want);
    assert_eq!(
        eval(
            &mut s,
            "local a, b, c = cmsgpack.unpack(cmsgpack.pack('x', {k = 'v'}, 7)) return {a, b.k, c}"
        ),
        "*3\r\n$1\r\nx\r\n$1\r\nv\r\n:7\r\n"
    );
    assert!(eval(&mut s, "return cmsgpack.unpack('\\205')").contains("Missing bytes in input."));
    // Deep hostile nesting is an error, not a crash.
    assert!(
        eval(
            &mut s,
            "return cmsgpack.unpack(string.rep('\\145', 100000))"
        )
        .contains("Bad data format in input.")
    );
}

/// Says "stop" once it has been asked `after` times (a SCRIPT KILL that
/// arrives while the script runs), counting the looks.
struct KillAfter {
    after: usize,
    looks: std::sync::atomic::AtomicUsize,
}

impl script::Watchdog for KillAfter {
    fn check(&self) -> Option<&'static str> {
        let n = self
            .looks
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        (n > self.after).then_some("Script killed by user with SCRIPT KILL.")
    }
}

fn killable(after: usize) -> (Scripts, std::sync::Arc<KillAfter>) {
    let mut s = Scripts::new();
    let w = std::sync::Arc::new(KillAfter {
        after,
        looks: Default::default(),
    });
    s.set_watchdog(w.clone());
    (s, w)
}

#[test]
fn the_watchdog_stops_endless_loops_that_try_to_catch_it() {
    let loops = [
        ("while true do end", 1),
        ("local i = 0\nwhile true do\n  i = i + 1\nend", 3),
        // pcall, xpcall and coroutines catch errors: not this one.
        (
            "while true do pcall(function() while true do end end) end",
            1,
        ),
        (
            "while true do\n  xpcall(function() while true do end end, function(e) return e end)\nend",
            2,
        ),
        (
            "while true do coroutine.resume(coroutine.create(function() while true do end end)) end",
            1,
        ),
        ("while true do redis.pcall('ping') end", 1),
    ];
    for (body, line) in loops {
        let (mut s, w) = killable(3);
        let reply = eval(&mut s, body);
        assert_eq!(
            reply,
            format!(
                "-ERR Script killed by user with SCRIPT KILL. script: {}, on @user_script:{line}.\r\n",
                sha(body)
            ),
            "{body}"
        );
        // It ran until told, and was not asked again and again after.
        let looks = w.looks.load(std::sync::atomic::Ordering::Relaxed);
        assert!((4..=6).contains(&looks), "{body}: {looks} looks");
        // The next run starts clean: the kill belonged to the last one.
        w.looks.store(0, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(eval(&mut s, "return 1"), ":1\r\n");
    }
}

#[test]
fn a_script_the_watchdog_lets_run_finishes() {
    let (mut s, w) = killable(usize::MAX);
    let reply = eval(
        &mut s,
        "local n = 0 for i = 1, 200000 do n = n + 1 end return n",
    );
    assert_eq!(reply, ":200000\r\n");
    assert!(w.looks.load(std::sync::atomic::Ordering::Relaxed) >= 20);
    // Kept across SCRIPT FLUSH (a new Lua state).
    s.flush();
    let (mut s2, _) = killable(0);
    s2.flush();
    assert!(eval(&mut s2, "while true do end").starts_with("-ERR Script killed"));
}

#[test]
fn eval_cache_keeps_the_500_most_recent_eval_scripts() {
    let mut s = Scripts::new();
    let loaded = s.load(b"return 'loaded'").unwrap();
    let mut shas = Vec::new();
    for i in 0..script::EVAL_CACHE_LIMIT {
        shas.push(s.load_for_eval(format!("return {i}").as_bytes()).unwrap());
    }
    assert_eq!(s.evicted(), 0);
    // The oldest one used again: the second oldest goes first.
    s.touch(&shas[0]);
    s.load_for_eval(b"return 'new'").unwrap();
    assert_eq!(s.evicted(), 1);
    assert!(s.exists(&shas[0]));
    assert!(!s.exists(&shas[1]));
    // SCRIPT LOAD's scripts are never evicted.
    for i in 0..600 {
        s.load_for_eval(format!("return 'more {i}'").as_bytes())
            .unwrap();
    }
    assert!(s.exists(&loaded));
    assert_eq!(s.len(), script::EVAL_CACHE_LIMIT + 1);
    assert_eq!(s.evicted(), 601);
}
