//! Lua scripting against the real binary: EVAL/EVALSHA/SCRIPT on the
//! wire, the `redis` crate's `Script` helper, INFO, and differential runs
//! against Valkey 8.1 whose replies (errors included) must be
//! byte-for-byte the same: ~150 scripts (values, errors, libraries,
//! RESP2/RESP3 conversions), FUNCTION/FCALL, errorstats; FUNCTION DUMP
//! payloads and RDB files with functions crossing both ways; scripts'
//! effects and functions replayed from the AOF.

use ringkv_e2e::{Backend, Reply, e2e};

fn sha1_of(srv: &ringkv_e2e::Server, body: &str) -> String {
    srv.raw().cmd(&["SCRIPT", "LOAD", body]).text()
}

e2e!(
    fn eval_evalsha_and_the_script_cache(b) {
        let srv = b.server();
        let mut c = srv.raw();
        assert_eq!(
            c.cmd(&["EVAL", "return redis.call('SET', KEYS[1], ARGV[1])", "1", "k", "v"]),
            Reply::status("OK")
        );
        assert_eq!(c.cmd(&["GET", "k"]), Reply::bulk("v"));
        let sha = sha1_of(&srv, "return redis.call('GET', KEYS[1])");
        assert_eq!(c.cmd(&["EVALSHA", &sha, "1", "k"]), Reply::bulk("v"));
        assert_eq!(c.cmd(&["EVALSHA_RO", &sha, "1", "k"]), Reply::bulk("v"));
        assert_eq!(
            c.cmd(&["SCRIPT", "EXISTS", &sha, "ffffffffffffffffffffffffffffffffffffffff"]),
            Reply::Array(vec![Reply::Int(1), Reply::Int(0)])
        );
        assert_eq!(c.cmd(&["SCRIPT", "FLUSH"]), Reply::status("OK"));
        // Valkey 8 dropped redis-server 7.0's " Please use EVAL.".
        let noscript = if b.is_redis() {
            "NOSCRIPT No matching script. Please use EVAL."
        } else {
            "NOSCRIPT No matching script."
        };
        assert_eq!(c.cmd(&["EVALSHA", &sha, "1", "k"]), Reply::err(noscript));
        assert_eq!(c.cmd(&["SCRIPT", "KILL"]), Reply::err("NOTBUSY No scripts in execution right now."));
    }
);

e2e!(
    fn the_redis_crates_script_helper_works_unchanged(b) {
        let srv = b.server();
        let c = &mut srv.client();
        // A lock as client libraries write it: SET NX PX, then a compare
        // and delete.
        let acquire = redis::Script::new(
            "return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])",
        );
        let release = redis::Script::new(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end",
        );
        let got: Option<String> = acquire.key("lock").arg("me").arg(10_000).invoke(c).unwrap();
        assert_eq!(got.as_deref(), Some("OK"));
        let again: Option<String> = acquire.key("lock").arg("you").arg(10_000).invoke(c).unwrap();
        assert_eq!(again, None);
        let wrong: i64 = release.key("lock").arg("you").invoke(c).unwrap();
        assert_eq!(wrong, 0);
        let freed: i64 = release.key("lock").arg("me").invoke(c).unwrap();
        assert_eq!(freed, 1);
        // The helper loads the script on NOSCRIPT after a flush.
        let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(c).unwrap();
        let got: Option<String> = acquire.key("lock").arg("me").arg(10_000).invoke(c).unwrap();
        assert_eq!(got.as_deref(), Some("OK"));
    }
);

e2e!(
    fn scripts_show_in_info(b) {
        let srv = b.server();
        let mut c = srv.raw();
        c.cmd(&["SCRIPT", "LOAD", "return 1"]);
        c.cmd(&["SCRIPT", "LOAD", "return 2"]);
        let info = c.cmd(&["INFO", "memory"]).text();
        assert_eq!(ringkv_e2e::info_field(&info, "number_of_cached_scripts"), "2");
        let vm: u64 = ringkv_e2e::info_field(&info, "used_memory_vm_eval").parse().unwrap();
        assert!(vm > 0, "{info}");
        let scripts: u64 = ringkv_e2e::info_field(&info, "used_memory_scripts_eval").parse().unwrap();
        assert!(scripts > 0, "{info}");
    }
);

/// Scripts whose replies must match Valkey 8.1's exactly: values, Lua
/// errors and their `script: <sha>, on @user_script:N.` suffix, refused
/// commands, conversions both ways, the libraries.
const SCRIPTS: &[&str] = &[
    "return 1",
    "return 3.99",
    "return -2.5",
    "return 'hello'",
    "return true",
    "return false",
    "return nil",
    "return {1, 2, {3, 'x'}, 'y', nil, 'after nil'}",
    "return {ok='fine'}",
    "return {err='MY error'}",
    "return redis.error_reply('boom')",
    "return redis.error_reply('-CODE boom')",
    "return redis.error_reply('two words')",
    "return redis.error_reply('')",
    "return redis.error_reply('-')",
    "return redis.status_reply('QUEUED')",
    "return x",
    "x = 1",
    "redis.call = nil",
    "string.foo = 1",
    "error('boom')",
    "\n\nerror('on line 3')",
    "error({err='CUSTOM with table'})",
    "return +",
    "return redis.call('nosuch')",
    "return redis.call('multi')",
    "return redis.call('get')",
    "return redis.call()",
    "return redis.call('set', {}, 1)",
    "return redis.pcall('nosuch')",
    "return redis.setresp(4)",
    "redis.call('set', 'str', 'abc') return redis.call('incr', 'str')",
    "redis.call('set', 'str', 'abc') return redis.pcall('incr', 'str')",
    "return redis.call('incrby', 'n', 5)",
    "redis.call('rpush', 'big', 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12) return redis.call('lrange', 'big', 0, -1)",
    "return redis.call('get', 'missing')",
    "return tostring(redis.call('get', 'missing'))",
    "redis.call('rpush', 'l', 'a', 'b', 'c') return redis.call('lrange', 'l', 0, -1)",
    "redis.call('hset', 'h', 'f', 'v') return redis.call('hgetall', 'h')",
    "redis.setresp(3) redis.call('hset', 'h', 'f', 'v') return redis.call('hgetall', 'h')",
    "redis.setresp(3) return redis.call('get', 'missing') == nil",
    "redis.setresp(3) redis.call('zadd', 'z', 1.5, 'm') return redis.call('zscore', 'z', 'm')",
    "redis.setresp(3) redis.call('zadd', 'z', 1.5, 'm') return redis.call('zscore', 'z', 'm').double",
    "redis.setresp(3) redis.call('sadd', 'st', 'a') return redis.call('smembers', 'st')",
    "redis.setresp(3) redis.call('sadd', 'st', 'a') return redis.call('smembers', 'st').set.a",
    "redis.setresp(3) return redis.call('zrange', 'z', 0, -1, 'withscores')",
    // An integral double comes back from Lua as an integer.
    "redis.setresp(3) redis.call('zadd', 'z', 1, 'i') return redis.call('zscore', 'z', 'i')",
    "redis.setresp(3) redis.call('zadd', 'z', 2, 'j') return redis.call('zrange', 'z', 0, -1, 'withscores')",
    "return {double=1}",
    "return {err='-X y'}",
    "error({err='-X y'})",
    "return {err='--'}",
    "return {double=-3}",
    "redis.setresp(3) return redis.call('ping')",
    "redis.setresp(3) return redis.pcall('incr', 'str')",
    "redis.call('zadd', 'z', 1.5, 'm') return redis.call('zscore', 'z', 'm')",
    "return redis.call('zrange', 'z', 0, -1, 'withscores')",
    "return type(redis.call('ping'))",
    "return redis.call('ping')['ok']",
    "return redis.sha1hex('')",
    "return redis.sha1hex('abc')",
    "return {math.random(100), math.random(1, 10)}",
    "return bit.tohex(65535)",
    "return bit.band(0xff, 0x0f)",
    "return bit.lshift(1, 31)",
    "return cjson.encode({1, 2, {a='x/y'}, 1.5})",
    "return cjson.encode({})",
    "return cjson.decode('[1,2,{\"a\":3}]')[3].a",
    "return {type(os), type(io), type(loadfile)}",
    "return type(dofile)",
    "return redis.REPL_ALL + redis.LOG_WARNING",
    "return server.call('ping')",
    "return redis.replicate_commands()",
    "return #KEYS + #ARGV",
    "redis.call('select', 5) redis.call('set', 'db5', 'x') return redis.call('dbsize')",
    "return redis.call('exists', 'db5')",
    "return {1, {ok='s'}, {err='e'}}",
    "local t = {} for i = 1, 100 do t[i] = i end return t",
    "return string.format('%d-%s', 5, 'x')",
    "return table.concat({'a', 'b'}, ',')",
    "return redis.call('eval', 'return 1', 0)",
    "return redis.call('blpop', 'nolist', 0)",
    "#!lua flags=no-writes\nreturn redis.call('set', 'a', 'b')",
    "#!lua flags=no-writes\nreturn redis.call('get', 'n')",
    "#!lua flags=bad\nreturn 1",
    "#!lua name=x\nreturn 1",
    "#!luax\nreturn 1",
    "return cjson.decode('[1,')",
    "return cjson.decode('[1 2]')",
    "return cjson.decode('{\"a\" 1}')",
    "return bit.tohex(1, 'x')",
    "return math.random(0)",
    "return redis.log(99, 'x')",
    "return redis.set_repl(9)",
    "return redis.call('config', 'nosuch')",
    "local ok, e = pcall(redis.call, 'nosuch') return e",
    "local ok, e = pcall(error, {err='x'}) return e",
    "local ok, e = pcall(function() local x = nil + 1 end) return e",
    "return 2^53",
    "return 2^63",
    "return -2^63",
    "return 1e20",
    "return 0/0",
    "return -0",
    "return tostring(1/3)",
    "return tostring(1e15)",
    "return tostring(2^53)",
    "return {1, nil, 3}",
    "return {[1] = 1, [2] = 2, [4] = 4}",
    "return {a = 1}",
    "return {}",
    "return {{}, {{}}}",
    "return 'héllo'",
    "return redis.call('set', 'k')",
    "return redis.call('get', 'k', 'extra')",
    "return redis.call('incrby', 'big', 9007199254740993)",
    "return redis.call('incrby', 'big2', 12345678901234)",
    "return redis.call('set', 'f', 3.25)",
    "local r = {} for _, n in ipairs({1e20, 0.1, 1/3, 123456789012345678, 2^53, 1e-7, 1e18, 1e19, 2^63, 1/0, -1/0, 1e-5, 1.5e-6, 0.00012345, 5e-324}) do redis.call('set', 'nx', n) r[#r + 1] = redis.call('get', 'nx') end return r",
    "redis.call('set', 'f', 3.25) return redis.call('get', 'f')",
    "return redis.call('SeT', 'case', 'x')",
    "return redis.call('config', 'get', 'maxmemory')",
    "return redis.call('object', 'encoding', 'missing')",
    "return redis.call('type', 'nokey')",
    "return redis.call('type', 'nokey').ok",
    "return redis.call('time') ~= nil",
    "return redis.call('dbsize')",
    "return redis.status_reply(123)",
    "return redis.error_reply(123)",
    "return redis.sha1hex()",
    "return redis.log()",
    "return redis.log('x', 'y')",
    "return redis.set_repl()",
    "return redis.setresp()",
    "return select('#', redis.call('ping'))",
    "return pcall(redis.call)",
    "local ok, e = pcall(redis.call) return e",
    "return cmsgpack.pack(1, -1, 127, 128, -33, 255, 65536, -129, 4294967296, -2147483649, 1.5, 0.1, true, false, nil)",
    "return cmsgpack.pack('short', string.rep('x', 40), string.rep('y', 300), string.rep('z', 70000))",
    "return cmsgpack.pack({1, 2, 3}, {}, {a = 1}, {[1] = 'a', [3] = 'c'}, {{{{{{{{{{{{{{{{{{{1}}}}}}}}}}}}}}}}}}})",
    "return {cmsgpack.unpack(cmsgpack.pack(1, 'two', {3, 4}, -5, 2.5))}",
    "return cmsgpack.unpack(cmsgpack.pack({a = 'b'})).a",
    "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3))}",
    "return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), 1)}",
    "return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2)}",
    "return cmsgpack.unpack('\\205')",
    "return cmsgpack.unpack('\\193')",
    "return {cmsgpack.unpack('')}",
    "return struct.pack('>I2<i4bBhHlLfd', 258, -2, -1, 255, -300, 65535, -5, 7, 1.5, 2.25)",
    "return struct.pack('!4 b i4 c3 s x', 1, 2, 'abcdef', 'zz')",
    "return {struct.unpack('>I2<i4bB', struct.pack('>I2<i4bB', 258, -2, -1, 255))}",
    "return {struct.unpack('s c0', struct.pack('s b c0', 'hi', 3, 'xyz'))}",
    "return {struct.unpack('b', 'abc', 2)}",
    "return struct.size('!8 b d i2')",
    "return struct.pack('q', 1)",
    "return struct.unpack('i4', 'ab')",
    "return struct.size('s')",
    "return struct.pack('i40', 1)",
    "return struct.pack('i')",
    // lua-cjson 2.1's settings, tokenizer and errors.
    "return {cjson.encode_max_depth(), cjson.decode_max_depth(), cjson.encode_number_precision()}",
    "return {cjson.encode_sparse_array()}",
    "cjson.encode_number_precision(3) local r = cjson.encode(1/3) cjson.encode_number_precision(14) return r",
    "cjson.encode_sparse_array(true) local r = cjson.encode({[1]=1,[20]=3}) cjson.encode_sparse_array(false) return r",
    "local r = cjson.encode_invalid_numbers('null') .. cjson.encode({1/0, 0/0}) cjson.encode_invalid_numbers(false) return r",
    "return cjson.encode_number_precision(15)",
    "return cjson.encode_max_depth(1, 2)",
    "return cjson.encode({[true]=1})",
    "return {tostring(cjson.decode('0x10')), tostring(cjson.decode('-Infinity')), tostring(cjson.decode('+1'))}",
    "return cjson.decode('\"\\\\ud83d\"')",
    "return cjson.decode('\"abc')",
    "return cjson.decode('[1] x')",
    "local ok, e = pcall(cjson.decode, '[1,') return e",
    "local ok, e = pcall(bit.tohex) return type(e)",
    // Tables past Lua's ~8,000-slot C stack, whole.
    "local t = {} for i = 1, 100000 do t[i] = tostring(i) end return t",
    "local m = {} for i = 1, 100000 do m[tostring(i)] = i end return {#cmsgpack.pack(m), #cjson.encode(m)}",
    "local a = {} for i = 1, 7998 do a[i] = 'v' end return #redis.call('echo', unpack(a))",
    // The sandbox: no bytecode, no raw writes to the read-only tables.
    "return {loadstring(string.dump(function() return 1 end))}",
    "return select(2, loadstring(string.dump(function() return 1 end)))",
    "setmetatable(_G, {})",
    "rawset(_G, 'redis', 1)",
    "local g = getmetatable(_G) g.__index = {}",
    "return {type(getmetatable(_G)), tostring(getmetatable(redis))}",
    // acl_check_cmd for the default user.
    "return redis.acl_check_cmd('set', 'x', 1)",
    "return redis.acl_check_cmd('nosuch')",
    "return redis.acl_check_cmd('config', 'nosub')",
    "return redis.acl_check_cmd()",
];

e2e!(
    ringkv_only fn scripts_reply_exactly_as_valkey(b) {
        let ours = b.server();
        let theirs = Backend::Valkey.server();
        let mut a = ours.raw();
        let mut v = theirs.raw();
        for body in SCRIPTS {
            let cmd = ["EVAL", body, "0"];
            assert_eq!(a.cmd(&cmd), v.cmd(&cmd), "EVAL {body:?}");
        }
        // EVAL_RO, keys and arguments, numkeys errors.
        for cmd in [
            &["EVAL_RO", "return redis.call('set', 'a', 'b')", "0"][..],
            &["EVAL_RO", "return redis.call('publish', 'ch', 'm')", "0"],
            &["EVAL_RO", "return redis.call('get', KEYS[1])", "1", "n"],
            &["EVAL", "return {KEYS[1], ARGV[1], ARGV[2]}", "1", "k", "a1", "a2"],
            &["EVAL", "return 1", "2", "a"],
            &["EVAL", "return 1", "-1"],
            &["EVAL", "return 1", "x"],
            &["EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0"],
            &["SCRIPT", "FLUSH", "BAD"],
            &["SCRIPT", "KILL"],
        ] {
            assert_eq!(a.cmd(cmd), v.cmd(cmd), "{cmd:?}");
        }
        // RESP3 callers.
        a.cmd(&["HELLO", "3"]);
        v.cmd(&["HELLO", "3"]);
        for body in [
            "return {double=3.5}",
            "return {map={a=1}}",
            "return {set={a=true}}",
            "return {big_number='12345678901234567890'}",
            "return nil",
            "return false",
            "redis.setresp(3) return true",
            "redis.setresp(3) return false",
            "redis.setresp(3) return redis.call('hgetall', 'h')",
            "redis.setresp(3) return redis.call('zscore', 'z', 'm')",
            "redis.setresp(3) return redis.call('smembers', 'st')",
            "redis.setresp(3) return redis.call('zrange', 'z', 0, -1, 'withscores')",
            "redis.setresp(3) return redis.call('hget', 'h', 'nofield')",
            "return redis.call('hget', 'h', 'nofield')",
            "return {1, 'two', {3}}",
        ] {
            let cmd = ["EVAL", body, "0"];
            assert_eq!(a.cmd(&cmd), v.cmd(&cmd), "RESP3 EVAL {body:?}");
        }
    }
);

const LIB: &str = "#!lua name=mylib
redis.register_function('myfunc', function(keys, args) return {keys[1], args[1]} end)";
const LIB_RO: &str = "#!lua name=rolib
redis.register_function{function_name='ro', callback=function(keys, args) return redis.call('get', keys[1]) end, flags={'no-writes'}, description='a ro fn'}";
const LIB_W: &str = "#!lua name=wlib
redis.register_function('setter', function(keys, args) return redis.call('set', keys[1], args[1]) end)
redis.register_function('boom', function(keys, args)
  error('boom')
end)";

e2e!(
    ringkv_only fn functions_reply_exactly_as_valkey(b) {
        let ours = b.server();
        let theirs = Backend::Valkey.server();
        let mut a = ours.raw();
        let mut v = theirs.raw();
        let cmds: &[&[&str]] = &[
            &["FUNCTION", "LOAD", LIB],
            &["FUNCTION", "LIST"],
            &["FUNCTION", "LIST", "WITHCODE"],
            &["FUNCTION", "LIST", "LIBRARYNAME", "my*"],
            &["FUNCTION", "LIST", "LIBRARYNAME", "zz"],
            &["FUNCTION", "LIST", "LIBRARYNAME"],
            &["FUNCTION", "LOAD", LIB],
            &["FUNCTION", "LOAD", "REPLACE", LIB],
            &["FCALL", "myfunc", "1", "k", "a"],
            &["FCALL", "myfunc", "2", "k"],
            &["FCALL", "nosuch", "0"],
            &["FCALL", "MYFUNC", "1", "k", "a"],
            &["FUNCTION", "FLUSH", "SYNC", "x"],
            &["FUNCTION", "RESTORE", "a", "b", "c"],
            &["FUNCTION", "LOAD", "#!lua name=g\nreturn math.random()"],
            &["FUNCTION", "LOAD", "#!lua name=g\nreturn server.setresp(3)"],
            &["FUNCTION", "LOAD", "#! name=g\nserver.register_function('g', function() return 1 end)"],
            &["FUNCTION", "LOAD", "#!lua name=a name=b\nserver.register_function('g', function() return 1 end)"],
            &["FUNCTION", "LOAD", "#!lua name=\"q\"\nserver.register_function('g', function() return 1 end)"],
            &["FUNCTION", "DELETE", "q"],
            &["FUNCTION", "STATS"],
            &["FUNCTION", "DELETE", "mylib"],
            &["FUNCTION", "DELETE", "mylib"],
            &["FUNCTION", "LOAD", LIB_RO],
            &["FUNCTION", "LIST"],
            &["SET", "k", "v"],
            &["FCALL_RO", "ro", "1", "k"],
            &["FUNCTION", "LOAD", LIB_W],
            &["FCALL_RO", "setter", "1", "k", "x"],
            &["FCALL", "setter", "1", "k", "x"],
            &["GET", "k"],
            &["FCALL", "boom", "0"],
            &["FUNCTION", "DELETE", "rolib"],
            &["FUNCTION", "DELETE", "wlib"],
            &["FUNCTION", "LOAD", "#!lua name=mylib\nreturn 1"],
            &["FUNCTION", "LOAD", "return 1"],
            &["FUNCTION", "LOAD", "#!lua\nreturn 1"],
            &["FUNCTION", "LOAD", "#!lua name=l2\nredis.call('ping')"],
            &["FUNCTION", "LOAD", "#!lua name=l3\nreturn +"],
            &["FUNCTION", "LOAD", "#!lua name=l4\nlocal x = 1"],
            &["FUNCTION", "LOAD", "#!lua name=l6\nredis.register_function('a b', function() end)"],
            &["FUNCTION", "LOAD", "#!lua name=l7\nredis.register_function{function_name='x', callback=function() end, flags={'bad'}}"],
            &["FUNCTION", "LOAD", "#!lua name=l8\nredis.register_function('x')"],
            &["FUNCTION", "LOAD", "#!lua name=l9\nredis.register_function('f', function(keys, args) return KEYS end)"],
            &["FCALL", "f", "0"],
            &["FUNCTION", "LOAD", "#!lua name=l10\nx = 5"],
            &["FUNCTION", "LOAD", "#!lua name=l11\nredis.register_function('g', function(keys, args) return type(redis.register_function) end)"],
            &["FCALL", "g", "0"],
            &["FUNCTION", "LOAD", "#!lua name=l12 bad=x\nreturn 1"],
            &["FUNCTION", "LOAD", "#!lua name=inf\nwhile true do end"],
            &["FUNCTION", "FLUSH"],
            &["FUNCTION", "FLUSH", "BAD"],
            &["FUNCTION", "KILL"],
            &["FUNCTION", "LIST"],
            &["FUNCTION", "STATS"],
        ];
        for cmd in cmds {
            assert_eq!(a.cmd(cmd), v.cmd(cmd), "{cmd:?}");
        }
    }
);

e2e!(
    ringkv_only fn function_dumps_restore_across_valkey_and_ringkv(b) {
        let ours = b.server();
        let theirs = Backend::Valkey.server();
        let mut a = ours.raw();
        let mut v = theirs.raw();
        // A library long enough for its code to be LZF-compressed.
        assert_eq!(v.cmd(&["FUNCTION", "LOAD", LIB_W]), Reply::bulk("wlib"));
        let Reply::Bulk(payload) = v.cmd(&["FUNCTION", "DUMP"]) else { panic!() };
        assert_eq!(a.cmd_bytes(&[b"FUNCTION", b"RESTORE", &payload]), Reply::status("OK"));
        assert_eq!(a.cmd(&["FCALL", "setter", "1", "k", "x"]), Reply::status("OK"));
        // The same again collides; REPLACE replaces.
        assert_eq!(
            a.cmd_bytes(&[b"FUNCTION", b"RESTORE", &payload]),
            v.cmd_bytes(&[b"FUNCTION", b"RESTORE", &payload])
        );
        assert_eq!(a.cmd_bytes(&[b"FUNCTION", b"RESTORE", &payload, b"REPLACE"]), Reply::status("OK"));
        // Our dump restores in Valkey.
        assert_eq!(a.cmd(&["FUNCTION", "LOAD", LIB]), Reply::bulk("mylib"));
        let Reply::Bulk(ours_payload) = a.cmd(&["FUNCTION", "DUMP"]) else { panic!() };
        assert_eq!(v.cmd_bytes(&[b"FUNCTION", b"RESTORE", &ours_payload, b"FLUSH"]), Reply::status("OK"));
        assert_eq!(v.cmd(&["FCALL", "myfunc", "1", "k", "a"]), Reply::Array(vec![Reply::bulk("k"), Reply::bulk("a")]));
        assert_eq!(
            a.cmd(&["FUNCTION", "RESTORE", "garbage"]),
            v.cmd(&["FUNCTION", "RESTORE", "garbage"])
        );
    }
);

/// Start `b` in `dir`, load `lib` and a key, SAVE, stop it.
fn save_with_library(b: Backend, dir: &std::path::Path, lib: &str) {
    let mut srv = b.start(ringkv_e2e::Opts::new().dir(dir));
    let mut c = srv.raw();
    assert!(!c.cmd(&["FUNCTION", "LOAD", lib]).text().is_empty());
    assert_eq!(c.cmd(&["SET", "k", "v"]), Reply::status("OK"));
    assert_eq!(c.cmd(&["SAVE"]), Reply::status("OK"));
    c.send(&ringkv_e2e::raw::encode_str(&["SHUTDOWN", "NOSAVE"]));
    srv.wait_exit(std::time::Duration::from_secs(10));
}

e2e!(
    ringkv_only fn functions_survive_a_restart_and_cross_rdb_files_with_valkey(b) {
        use ringkv_e2e::server::TempDir;
        // ringkv's own file, read back by ringkv and by Valkey 8.1.
        for reader in [b, Backend::Valkey] {
            let dir = TempDir::new("fn-rdb");
            save_with_library(b, dir.path(), LIB_W);
            let srv = reader.start(ringkv_e2e::Opts::new().dir(dir.path()));
            srv.wait_loaded();
            let mut c = srv.raw();
            assert_eq!(c.cmd(&["FCALL", "setter", "1", "k2", "x"]), Reply::status("OK"), "{reader:?}");
            assert_eq!(c.cmd(&["GET", "k"]), Reply::bulk("v"));
            let Reply::Array(libs) = c.cmd(&["FUNCTION", "LIST", "WITHCODE"]) else { panic!() };
            assert_eq!(libs.len(), 1);
        }
        // Valkey's file, read by ringkv.
        let dir = TempDir::new("fn-rdb-valkey");
        save_with_library(Backend::Valkey, dir.path(), LIB);
        let srv = b.start(ringkv_e2e::Opts::new().dir(dir.path()));
        srv.wait_loaded();
        let mut c = srv.raw();
        assert_eq!(
            c.cmd(&["FCALL", "myfunc", "1", "k", "a"]),
            Reply::Array(vec![Reply::bulk("k"), Reply::bulk("a")])
        );
    }
);

/// INFO errorstats and the calls/failed_calls of commandstats.
fn error_counts(c: &mut ringkv_e2e::Raw) -> Vec<String> {
    let mut out = Vec::new();
    for section in ["errorstats", "commandstats"] {
        let text = c.cmd(&["INFO", section]).text();
        for line in text.lines() {
            if line.starts_with("errorstat_")
                || line.starts_with("cmdstat_eval")
                || line.starts_with("cmdstat_incr")
            {
                // usec figures differ by nature; calls and failures must not.
                let kept: Vec<&str> = line.split(',').filter(|f| !f.contains("usec")).collect();
                out.push(kept.join(","));
            }
        }
    }
    out.sort();
    out
}

e2e!(
    ringkv_only fn script_errors_are_counted_once_as_valkey_counts_them(b) {
        let ours = b.server();
        let theirs = Backend::Valkey.server();
        let mut a = ours.raw();
        let mut v = theirs.raw();
        for body in [
            "return redis.call('incr','s')",
            "return redis.pcall('incr','s')",
            "redis.pcall('incr','s') return 1",
            "return redis.call('nosuch')",
            "return redis.pcall('nosuch')",
            "return {err='X bad'}",
            "error('boom')",
            "return redis.error_reply('E y')",
            "return redis.call()",
            // The line is `-` and the message as it is: `--X y` counts as
            // `-X`; no space in the first 32 bytes counts as ERR.
            "return {err='-X y'}",
            "error({err='-X y'})",
            "return {err='-'}",
            "return {err=''}",
            "return {err=' lead'}",
            "return {err='ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJ x'}",
        ] {
            for c in [&mut a, &mut v] {
                c.cmd(&["CONFIG", "RESETSTAT"]);
                c.cmd(&["SET", "s", "abc"]);
                c.cmd(&["EVAL", body, "0"]);
            }
            assert_eq!(error_counts(&mut a), error_counts(&mut v), "{body}");
        }
    }
);

/// Wait until no AOF rewrite is in progress.
fn wait_rewrite(c: &mut ringkv_e2e::Raw) {
    for _ in 0..400 {
        let info = c.cmd(&["INFO", "persistence"]).text();
        if ringkv_e2e::info_field(&info, "aof_rewrite_in_progress") == "0" {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    panic!("the AOF rewrite did not finish");
}

e2e!(
    ringkv_only fn scripts_and_functions_replay_from_the_aof(b) {
        use ringkv_e2e::server::TempDir;
        let dir = TempDir::new("script-aof");
        let opts = || {
            ringkv_e2e::Opts::new()
                .dir(dir.path())
                .arg("save", "")
                .arg("appendonly", "yes")
                .arg("appendfsync", "always")
        };
        {
            let mut srv = b.start(opts());
            let mut c = srv.raw();
            assert_eq!(c.cmd(&["FUNCTION", "LOAD", LIB_W]), Reply::bulk("wlib"));
            let body = "redis.call('set', KEYS[1], ARGV[1]) redis.call('select', 3) return redis.call('incr', 'n')";
            assert_eq!(c.cmd(&["EVAL", body, "1", "a", "1"]), Reply::Int(1));
            // A rewrite: the base holds the library (FUNCTION2) and the data.
            c.cmd(&["BGREWRITEAOF"]);
            wait_rewrite(&mut c);
            assert_eq!(c.cmd(&["FCALL", "setter", "1", "b", "2"]), Reply::status("OK"));
            assert_eq!(c.cmd(&["EVAL", body, "1", "a", "3"]), Reply::Int(2));
            c.send(&ringkv_e2e::raw::encode_str(&["SHUTDOWN", "NOSAVE"]));
            srv.wait_exit(std::time::Duration::from_secs(10));
        }
        let srv = b.start(opts());
        let mut c = srv.raw();
        assert_eq!(c.cmd(&["MGET", "a", "b"]), Reply::Array(vec![Reply::bulk("3"), Reply::bulk("2")]));
        assert_eq!(c.cmd(&["SELECT", "3"]), Reply::status("OK"));
        assert_eq!(c.cmd(&["GET", "n"]), Reply::bulk("2"));
        assert_eq!(c.cmd(&["FCALL", "setter", "1", "c", "4"]), Reply::status("OK"));
    }
);

e2e!(
    ringkv_only fn the_eval_cache_keeps_500_scripts_as_valkey(b) {
        let ours = b.server();
        let theirs = Backend::Valkey.server();
        let run = |srv: &ringkv_e2e::Server| {
            let mut c = srv.raw();
            let mut seen = vec![c.cmd(&["SCRIPT", "LOAD", "return 'loaded'"])];
            let first = c.cmd(&["SCRIPT", "LOAD", "return 0"]).text();
            // `return 0` was loaded, so EVAL does not make it evictable.
            for i in 0..520 {
                c.cmd(&["EVAL", &format!("return {i}"), "0"]);
                if i == 10 {
                    seen.push(c.cmd(&["EVALSHA", &first, "0"]));
                }
            }
            // Which survived: the least recently used went first.
            let hex = "return redis.sha1hex(ARGV[1])";
            let shas: Vec<String> = [0, 1, 2, 10, 19, 20, 21, 22, 519]
                .iter()
                .map(|i| c.cmd(&["EVAL", hex, "0", &format!("return {i}")]).text())
                .collect();
            let mut exists = vec!["SCRIPT", "EXISTS"];
            exists.extend(shas.iter().map(String::as_str));
            seen.push(c.cmd(&exists));
            seen.push(c.cmd(&["EVALSHA", &shas[1], "0"]));
            seen.push(c.cmd(&["EVALSHA", &shas[8], "0"]));
            let info = c.cmd(&["INFO", "everything"]).text();
            for field in ["evicted_scripts", "number_of_cached_scripts"] {
                seen.push(Reply::bulk(&ringkv_e2e::info_field(&info, field)));
            }
            seen
        };
        assert_eq!(run(&ours), run(&theirs));
    }
);
