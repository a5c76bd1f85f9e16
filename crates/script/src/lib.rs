//! Lua scripting as Valkey 8 embeds it: a sandboxed Lua 5.1 state, the
//! libraries scripts see, the EVAL script cache, FUNCTION libraries (in
//! a state of their own, [`functions`]), and the conversions between Lua
//! values and replies.
//!
//! ```text
//!   engine (EVAL, EVALSHA, SCRIPT LOAD ...)
//!     │ Scripts::load / load_for_eval(body)   compiled once per SHA1
//!     │ Scripts::run(sha, keys, argv, host, reply)
//!     ▼
//!   Lua: KEYS/ARGV set, xpcall(f, error handler)
//!     │ redis.call / redis.pcall (C closures over the Lua C API)
//!     │     ──► Host::call(argv, resp3, buf) ──► the engine runs the
//!     │                                          command as the script's client
//!     │ ◄── the reply's RESP bytes: common ones pushed as they are, the
//!     │     others parsed and converted (Valkey's table)
//!     ▼
//!   the returned value (or the error table) converted into the caller's reply
//! ```
//!
//! What this crate owns: the Lua states, their sandbox (no io, no files,
//! read-only globals and libraries; `os` has only `clock`), the `bit`,
//! `cjson`, `cmsgpack` and `struct` libraries, the deterministic
//! `math.random` (Valkey's lrand48, one sequence for the life of the
//! process), shebang flags, the EVAL cache's LRU, the error format
//! (`ERR user_script:1: ... script: <sha>, on @user_script:1.`).
//!
//! A count hook asks the engine's [`Watchdog`] every [`HOOK_EVERY`]
//! instructions whether to stop (SCRIPT KILL, FUNCTION KILL): the engine
//! uses it to turn busy and to serve other clients meanwhile.
//!
//! What it must not touch: sockets, files, threads, the keyspace. It knows
//! nothing of commands: every command a script runs goes through the
//! [`Host`] the engine passes to [`Scripts::run`], on the engine's
//! execution thread, and comes back as reply bytes.
//!
//! Its `unsafe`: `redis.call` and the raising `redis.*` functions are
//! written against Lua's C API, and reach the host through a pointer that
//! is valid only while [`Scripts::run`] waits for the script.

pub mod bit;
pub mod cjson;
pub mod cmsgpack;
pub mod fpconv;
pub mod functions;
pub mod sha1;
pub mod structlib;
mod walk;

use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};
use resp::ReplyWriter;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Shebang flags (`#!lua flags=...`), Valkey's `SCRIPT_FLAG_*`.
pub mod flags {
    pub const NO_WRITES: u32 = 1 << 0;
    pub const ALLOW_OOM: u32 = 1 << 1;
    pub const ALLOW_STALE: u32 = 1 << 2;
    pub const NO_CLUSTER: u32 = 1 << 3;
    /// Without a shebang: EVAL's compatibility mode (writes allowed,
    /// denyoom judged per command).
    pub const EVAL_COMPAT_MODE: u32 = 1 << 4;
    pub const ALLOW_CROSS_SLOT: u32 = 1 << 5;
}

/// `redis.set_repl` flags.
pub mod repl {
    pub const NONE: u8 = 0;
    pub const AOF: u8 = 1;
    pub const REPLICA: u8 = 2;
    pub const ALL: u8 = 3;
}

/// What a script can ask of the server.
pub trait Host {
    /// Run one command as the script's client. `Ok`: its reply was
    /// appended to `out` (empty on entry), RESP3 when `resp3` (the script
    /// called `redis.setresp(3)`), RESP2 otherwise. `Err`: refused before
    /// it ran (unknown command, not allowed from a script, write in a
    /// read-only script, OOM): the error text with its code, e.g.
    /// `ERR Unknown command called from script`.
    fn call(&mut self, argv: &[&[u8]], resp3: bool, out: &mut Vec<u8>) -> Result<(), String>;
    /// `redis.log(level, ...)`: level 0 debug .. 3 warning.
    fn log(&mut self, level: u8, msg: &str);
    /// `redis.set_repl(flags)` ([`repl`]).
    fn set_repl(&mut self, flags: u8);
    /// `redis.acl_check_cmd(command, args...)`: may the script's caller
    /// run it? `None`: no such command (or subcommand).
    fn acl_check(&mut self, argv: &[&[u8]]) -> Option<bool>;
}

/// What a running script's count hook consults every [`HOOK_EVERY`] Lua
/// instructions: the engine's busy state (it may serve other clients from
/// there, see the engine's `busy` module) and whether SCRIPT KILL or
/// FUNCTION KILL asked the script to stop.
pub trait Watchdog: Send + Sync {
    /// `Some(text)`: stop the script now with the error `ERR <text>` (it is
    /// then raised again after any `pcall` that catches it, so the script
    /// cannot go on).
    fn check(&self) -> Option<&'static str>;
}

/// Lua instructions between two looks at the [`Watchdog`] (and at the
/// instruction budget): about 50–100 µs of a busy loop, so a kill or a
/// client waiting for `-BUSY` is seen quickly, at a negligible cost.
pub const HOOK_EVERY: u32 = 10_000;

/// Where the Rust functions registered in Lua find the run's state.
#[derive(Default)]
struct Shared {
    /// A `*mut &mut dyn Host` while a script runs, 0 otherwise.
    host: AtomicUsize,
    resp3: AtomicBool,
    /// The lrand48 state (48 bits).
    rand: AtomicU64,
    /// Instructions a run may execute before it is stopped (0: no limit).
    budget: AtomicU64,
    spent: AtomicU64,
    /// Consulted by the count hook while a script runs.
    watchdog: std::sync::OnceLock<Arc<dyn Watchdog>>,
    /// The kill text once the watchdog has stopped this run: the error
    /// handler reports it, and `pcall`/`xpcall`/`coroutine.resume` raise
    /// it again instead of letting the script catch it.
    killed: std::sync::Mutex<Option<&'static str>>,
    /// Reply bytes of the command a script runs (reused).
    reply: std::sync::Mutex<Vec<u8>>,
    /// A panic of the host while a script ran, resumed once the script
    /// has unwound.
    panic: std::sync::Mutex<Option<Box<dyn std::any::Any + Send>>>,
}

/// One cached script.
pub struct Script {
    func: Function,
    /// [`flags`] bits from its shebang.
    pub flags: u32,
    /// The source as loaded (SCRIPT SHOW).
    pub body: Vec<u8>,
    /// Its place in the EVAL LRU (`None`: loaded by SCRIPT LOAD, never
    /// evicted).
    lru: Option<u64>,
}

/// Scripts created by EVAL kept at most (Valkey 8's `LRU_LIST_LENGTH`);
/// the least recently used is evicted first.
pub const EVAL_CACHE_LIMIT: usize = 500;

/// The Lua state and the EVAL script cache.
pub struct Scripts {
    lua: Lua,
    shared: Arc<Shared>,
    /// The real global table (KEYS and ARGV are set here); scripts run
    /// with a read-only proxy of it as their environment.
    globals: Table,
    env: Table,
    xpcall: Function,
    handler: Function,
    cache: HashMap<[u8; 40], Script>,
    body_bytes: usize,
    /// EVAL-created scripts by last use.
    lru: std::collections::BTreeMap<u64, [u8; 40]>,
    lru_tick: u64,
    /// INFO `evicted_scripts`.
    evicted: u64,
    runs: u64,
}

impl std::fmt::Debug for Scripts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scripts")
            .field("cached", &self.cache.len())
            .finish()
    }
}

/// Valkey's `redisSrand48(0)`-less start: the C library's default seed.
const RAND_INIT: u64 = 0x1234_ABCD_330E;
const INTERNAL: &str = "=ringkv";

impl Default for Scripts {
    fn default() -> Self {
        Scripts::new()
    }
}

impl Scripts {
    pub fn new() -> Scripts {
        let shared = Arc::new(Shared {
            rand: AtomicU64::new(RAND_INIT),
            ..Shared::default()
        });
        Scripts::with_shared(shared)
    }

    fn with_shared(shared: Arc<Shared>) -> Scripts {
        build(shared).expect("the Lua state is built from fixed code")
    }

    /// SCRIPT FLUSH: forget every script and start a fresh Lua state (the
    /// random sequence goes on, as Valkey's lives outside Lua).
    pub fn flush(&mut self) {
        let budget = self.shared.budget.load(Relaxed);
        let shared = Arc::new(Shared {
            rand: AtomicU64::new(self.shared.rand.load(Relaxed)),
            ..Shared::default()
        });
        if let Some(w) = self.shared.watchdog.get() {
            let _ = shared.watchdog.set(w.clone());
        }
        let evicted = self.evicted;
        *self = Scripts::with_shared(shared);
        self.evicted = evicted;
        if budget != 0 {
            self.set_instruction_budget(Some(budget));
        }
    }

    /// Scripts evicted from the EVAL cache so far (INFO `evicted_scripts`).
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// EVAL: [`Scripts::load`], but a new script joins the EVAL LRU
    /// (evicting the least recently used past [`EVAL_CACHE_LIMIT`]) and a
    /// known one counts as used.
    pub fn load_for_eval(&mut self, body: &[u8]) -> Result<[u8; 40], String> {
        let sha = sha1::hex(body);
        if self.cache.contains_key(&sha) {
            self.touch(&sha);
            return Ok(sha);
        }
        let sha = self.compile(body, sha)?;
        while self.lru.len() >= EVAL_CACHE_LIMIT {
            let Some((_, old)) = self.lru.pop_first() else {
                break;
            };
            if let Some(s) = self.cache.remove(&old) {
                self.body_bytes -= s.body.len();
                self.evicted += 1;
            }
        }
        self.lru_tick += 1;
        self.lru.insert(self.lru_tick, sha);
        if let Some(s) = self.cache.get_mut(&sha) {
            s.lru = Some(self.lru_tick);
        }
        Ok(sha)
    }

    /// A script was run (EVAL, EVALSHA): most recently used.
    pub fn touch(&mut self, sha: &[u8]) {
        let Ok(key) = <&[u8; 40]>::try_from(sha) else {
            return;
        };
        let key = lower(key);
        let tick = self.lru_tick + 1;
        if let Some(s) = self.cache.get_mut(&key)
            && let Some(old) = s.lru
        {
            self.lru.remove(&old);
            self.lru.insert(tick, key);
            s.lru = Some(tick);
            self.lru_tick = tick;
        }
    }

    /// Stop any run after about `n` Lua instructions with an error (the
    /// fuzz target's guard against endless loops); `None`: no limit.
    pub fn set_instruction_budget(&mut self, n: Option<u64>) {
        self.shared.budget.store(n.unwrap_or(0), Relaxed);
    }

    /// Who the count hook asks whether to stop (set once; kept across
    /// SCRIPT FLUSH).
    pub fn set_watchdog(&mut self, w: Arc<dyn Watchdog>) {
        let _ = self.shared.watchdog.set(w);
    }

    /// A watchdog is set.
    pub fn has_watchdog(&self) -> bool {
        self.shared.watchdog.get().is_some()
    }

    /// (Re)install the count hook: at build, and after FUNCTION LOAD used
    /// a hook of its own. A global hook, so coroutines a script creates
    /// have it too.
    pub(crate) fn install_hook(&self) {
        let sh = self.shared.clone();
        let triggers = mlua::HookTriggers::new().every_nth_instruction(HOOK_EVERY);
        let _ = self.lua.set_global_hook(triggers, move |_, _| {
            let spent = sh.spent.fetch_add(u64::from(HOOK_EVERY), Relaxed) + u64::from(HOOK_EVERY);
            let budget = sh.budget.load(Relaxed);
            if budget != 0 && spent > budget {
                return Err(mlua::Error::runtime(
                    "script ran out of its instruction budget",
                ));
            }
            if let Some(w) = sh.watchdog.get()
                && let Some(text) = w.check()
            {
                *sh.killed.lock().expect("not poisoned") = Some(text);
                return Err(mlua::Error::runtime(text));
            }
            Ok(mlua::VmState::Continue)
        });
    }

    /// Scripts in the cache (INFO `number_of_cached_scripts`).
    pub fn len(&self) -> usize {
        self.cache.len()
    }
    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }
    /// Bytes the cache holds: bodies plus a fixed cost per script (INFO
    /// `used_memory_scripts_eval`).
    pub fn cache_memory(&self) -> usize {
        self.body_bytes + self.cache.len() * 200
    }
    /// Bytes the Lua state uses (INFO `used_memory_vm_eval`).
    pub fn lua_memory(&self) -> usize {
        self.lua.used_memory()
    }

    pub fn get(&self, sha: &[u8]) -> Option<&Script> {
        let key: &[u8; 40] = sha.try_into().ok()?;
        self.cache.get(&lower(key))
    }
    pub fn exists(&self, sha: &[u8]) -> bool {
        self.get(sha).is_some()
    }

    /// Compile `body` (once: a cached SHA is not compiled again) and
    /// return its SHA1. `Err`: the error reply (shebang or syntax).
    /// A script loaded by EVAL before is promoted: never evicted.
    pub fn load(&mut self, body: &[u8]) -> Result<[u8; 40], String> {
        let sha = sha1::hex(body);
        if let Some(s) = self.cache.get_mut(&sha) {
            if let Some(t) = s.lru.take() {
                self.lru.remove(&t);
            }
            return Ok(sha);
        }
        self.compile(body, sha)
    }

    fn compile(&mut self, body: &[u8], sha: [u8; 40]) -> Result<[u8; 40], String> {
        let (flags, code) = parse_shebang(body)?;
        let func = self
            .lua
            .load(code)
            .set_name("@user_script")
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| format!("ERR Error compiling script (new function): {}", lua_msg(&e)))?;
        self.body_bytes += body.len();
        self.cache.insert(
            sha,
            Script {
                func,
                flags,
                body: body.to_vec(),
                lru: None,
            },
        );
        Ok(sha)
    }

    /// Run the cached script `sha` with `keys` and `args`; its result (or
    /// its error) is written to `w`. `true`: the reply is an error the
    /// host already counted (a command's error the script passed on).
    pub fn run(
        &mut self,
        sha: &[u8],
        keys: &[&[u8]],
        args: &[&[u8]],
        host: &mut dyn Host,
        w: &mut ReplyWriter<'_>,
    ) -> bool {
        let Some(script) = self.get(sha) else {
            w.error("NOSCRIPT No matching script.");
            return false;
        };
        let func = script.func.clone();
        let mut label = [0u8; 40];
        label.copy_from_slice(&sha[..40]);
        label.make_ascii_lowercase();
        let sha = std::str::from_utf8(&label).unwrap_or("");
        if let Err(e) = self.set_argv("KEYS", keys).and(self.set_argv("ARGV", args)) {
            w.error(&format!("ERR {}", lua_msg(&e)));
            return false;
        }
        self.execute(func, sha, host, w)
    }

    /// Run `func` (no arguments) under the error handler, `host` reachable
    /// from `redis.call`; its result or error goes to `w`, errors naming
    /// `label` (the SHA, or the function's name).
    fn execute(
        &mut self,
        func: Function,
        label: &str,
        host: &mut dyn Host,
        w: &mut ReplyWriter<'_>,
    ) -> bool {
        self.shared.resp3.store(false, Relaxed);
        self.shared.spent.store(0, Relaxed);
        *self.shared.killed.lock().expect("not poisoned") = None;
        let mut h: &mut dyn Host = host;
        self.shared
            .host
            .store(&mut h as *mut &mut dyn Host as usize, Relaxed);
        let r = self.xpcall.call::<MultiValue>((&func, &self.handler));
        self.shared.host.store(0, Relaxed);
        if let Some(p) = self.shared.panic.lock().expect("not poisoned").take() {
            std::panic::resume_unwind(p);
        }
        let lua_resp3 = self.shared.resp3.load(Relaxed);
        let counted = match r {
            Ok(mv) => {
                let ok = matches!(mv.front(), Some(Value::Boolean(true)));
                let v = mv.get(1).cloned().unwrap_or(Value::Nil);
                let counted = already_counted(&v);
                if ok {
                    let at = w.out.len();
                    reply_from_lua(w, &v, lua_resp3, 0);
                    counted && w.out.get(at) == Some(&b'-')
                } else {
                    // Valkey writes `-` and the message as it is: a
                    // message that starts with `-` keeps it.
                    w.error(&format!("-{}", error_text(&v, label)));
                    counted
                }
            }
            Err(e) => {
                w.error(&format!(
                    "ERR Error running script {label}, {}",
                    lua_msg(&e)
                ));
                false
            }
        };
        // An incremental GC step every 50 runs, as Valkey's
        // LUA_GC_CYCLE_PERIOD: garbage does not pile up across many short
        // scripts, and a short script does not pay for a step each time.
        self.runs += 1;
        if self.runs.is_multiple_of(50) {
            let _ = self.lua.gc_step();
        }
        counted
    }

    fn set_argv(&self, name: &str, items: &[&[u8]]) -> mlua::Result<()> {
        let t = self.lua.create_table_with_capacity(items.len(), 0)?;
        for (i, a) in items.iter().enumerate() {
            t.raw_seti(i + 1, self.lua.create_string(a)?)?;
        }
        self.globals.raw_set(name, t)
    }
}

fn lower(sha: &[u8; 40]) -> [u8; 40] {
    let mut k = *sha;
    k.make_ascii_lowercase();
    k
}

/// Valkey's `evalExtractShebangFlags`: the flags, and the code to compile
/// (the shebang line left out, its newline kept so lines keep their numbers).
pub fn parse_shebang(body: &[u8]) -> Result<(u32, &[u8]), String> {
    if !body.starts_with(b"#!") {
        return Ok((flags::EVAL_COMPAT_MODE, body));
    }
    let Some(end) = body.iter().position(|&b| b == b'\n') else {
        return Err("ERR Invalid script shebang".into());
    };
    let line = String::from_utf8_lossy(&body[2..end]);
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or("");
    if engine != "lua" {
        return Err(format!("ERR Could not find scripting engine '{engine}'"));
    }
    let mut f = 0;
    for part in parts {
        let Some(list) = part.strip_prefix("flags=") else {
            return Err(format!("ERR Unknown lua shebang option: {part}"));
        };
        for flag in list.split(',').filter(|s| !s.is_empty()) {
            f |= match flag {
                "no-writes" => flags::NO_WRITES,
                "allow-oom" => flags::ALLOW_OOM,
                "allow-stale" => flags::ALLOW_STALE,
                "no-cluster" => flags::NO_CLUSTER,
                "allow-cross-slot-keys" => flags::ALLOW_CROSS_SLOT,
                _ => return Err(format!("ERR Unexpected flag in script shebang: {flag}")),
            };
        }
    }
    Ok((f, &body[end..]))
}

/// The message of a Lua error, without mlua's wrapping.
fn lua_msg(e: &mlua::Error) -> String {
    match e {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::RuntimeError(s) | mlua::Error::MemoryError(s) => s.clone(),
        mlua::Error::CallbackError { cause, .. } => lua_msg(cause),
        mlua::Error::WithContext { cause, .. } => lua_msg(cause),
        other => other.to_string(),
    }
}

/// Is `v` an error table from a command the host ran (so its error was
/// counted in INFO errorstats where it happened)?
fn already_counted(v: &Value) -> bool {
    match v {
        Value::Table(t) => matches!(
            t.raw_get::<Value>("ignore_error_stats_update"),
            Ok(Value::Boolean(true))
        ),
        _ => false,
    }
}

/// The error reply for a script that failed with `v` (the handler's
/// table): `<err> script: <sha>, on <source>:<line>.`
fn error_text(v: &Value, sha: &str) -> String {
    let Value::Table(t) = v else {
        return format!("ERR Error running script {sha}, execution failure");
    };
    let err = match t.raw_get::<Value>("err") {
        Ok(Value::String(s)) => s.to_string_lossy(),
        _ => "ERR unknown error".to_string(),
    };
    let source = t
        .raw_get::<Option<mlua::LuaString>>("source")
        .ok()
        .flatten();
    let line = t.raw_get::<Option<f64>>("line").ok().flatten();
    match (source, line) {
        (Some(s), Some(l)) => format!(
            "{err} script: {sha}, on {}:{}.",
            s.to_string_lossy(),
            l as i64
        ),
        _ => err,
    }
}

/// Deepest table nesting converted into a reply: deeper, the element is
/// the error `reached lua stack limit`, as Valkey's. Valkey stops at its Lua stack limit (about 8000 levels); we stop
/// sooner, so that the conversion's recursion fits the smallest thread
/// stack the execution step runs on.
const MAX_REPLY_DEPTH: usize = 200;

/// C's `(long long)d` as x86-64 computes it: truncation, and
/// 0x8000000000000000 for NaN and anything out of range (where Rust's
/// `as` would saturate).
fn c_long_long(d: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if d.is_nan() || !(-LIMIT..LIMIT).contains(&d) {
        i64::MIN
    } else {
        d as i64
    }
}

/// Valkey's `luaReplyToServerReply`.
fn reply_from_lua(w: &mut ReplyWriter<'_>, v: &Value, lua_resp3: bool, depth: usize) {
    match v {
        Value::String(s) => w.bulk(&s.as_bytes()),
        Value::Boolean(b) => {
            if lua_resp3 {
                w.boolean(*b)
            } else if *b {
                w.int(1)
            } else {
                w.null()
            }
        }
        Value::Integer(i) => w.int(*i),
        Value::Number(n) => w.int(c_long_long(*n)),
        Value::Table(t) => {
            if depth >= MAX_REPLY_DEPTH {
                return w.error("ERR reached lua stack limit");
            }
            table_reply(w, t, lua_resp3, depth + 1)
        }
        _ => w.null(),
    }
}

fn table_reply(w: &mut ReplyWriter<'_>, t: &Table, lua_resp3: bool, depth: usize) {
    if let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
        // As above: `-` and the message as it is.
        return w.error(&format!("-{}", e.to_string_lossy()));
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("ok") {
        return w.simple(&s.to_string_lossy());
    }
    // An integral double reads back from Lua as an integer.
    match t.raw_get::<Value>("double") {
        Ok(Value::Number(n)) => return w.double(n),
        Ok(Value::Integer(i)) => return w.double(i as f64),
        _ => {}
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("big_number") {
        return w.big_number(&s.to_string_lossy());
    }
    // Tables are walked twice (count, then write) rather than collected:
    // every Lua value held from Rust takes a slot of a stack of ~8,000,
    // and a reply may be far longer.
    if let Ok(Value::Table(m)) = t.raw_get::<Value>("map") {
        w.map_len(m.pairs::<Value, Value>().filter(Result::is_ok).count());
        for (k, v) in m.pairs::<Value, Value>().filter_map(Result::ok) {
            reply_from_lua(w, &k, lua_resp3, depth);
            reply_from_lua(w, &v, lua_resp3, depth);
        }
        return;
    }
    if let Ok(Value::Table(s)) = t.raw_get::<Value>("set") {
        w.set_len(s.pairs::<Value, Value>().filter(Result::is_ok).count());
        for (k, _) in s.pairs::<Value, Value>().filter_map(Result::ok) {
            reply_from_lua(w, &k, lua_resp3, depth);
        }
        return;
    }
    if let Ok(Value::Table(vs)) = t.raw_get::<Value>("verbatim_string")
        && let (Ok(Value::String(f)), Ok(Value::String(s))) =
            (vs.raw_get::<Value>("format"), vs.raw_get::<Value>("string"))
    {
        return w.verbatim(&f.to_string_lossy(), &s.as_bytes());
    }
    // An array: elements 1, 2, ... up to the first nil.
    let item = |i: usize| match t.raw_get::<Value>(i) {
        Ok(Value::Nil) | Err(_) => None,
        Ok(v) => Some(v),
    };
    let len = (1..).take_while(|&i| item(i).is_some()).count();
    w.array_len(len);
    for i in 1..=len {
        let v = item(i).unwrap_or(Value::Nil);
        reply_from_lua(w, &v, lua_resp3, depth);
    }
}

/// A reply as Lua sees it (Valkey's RESP-to-Lua tables).
fn lua_from_reply(lua: &Lua, v: resp::Value, resp3: bool) -> mlua::Result<Value> {
    use resp::Value as R;
    let one = |k: &str, v: Value| -> mlua::Result<Value> {
        let t = lua.create_table_with_capacity(0, 1)?;
        t.raw_set(k, v)?;
        Ok(Value::Table(t))
    };
    Ok(match v {
        R::Simple(s) => one("ok", Value::String(lua.create_string(&s)?))?,
        R::Error(e) => one("err", Value::String(lua.create_string(&e)?))?,
        R::Int(i) => Value::Number(i as f64),
        R::Bulk(b) => Value::String(lua.create_string(&b)?),
        R::Null => {
            if resp3 {
                Value::Nil
            } else {
                Value::Boolean(false)
            }
        }
        R::Array(items) | R::Push(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, it) in items.into_iter().enumerate() {
                t.raw_seti(i + 1, lua_from_reply(lua, it, resp3)?)?;
            }
            Value::Table(t)
        }
        R::Map(pairs) => {
            let m = lua.create_table_with_capacity(0, pairs.len())?;
            for (k, v) in pairs {
                let k = lua_from_reply(lua, k, resp3)?;
                if !matches!(k, Value::Nil) {
                    m.raw_set(k, lua_from_reply(lua, v, resp3)?)?;
                }
            }
            one("map", Value::Table(m))?
        }
        R::Set(items) => {
            let s = lua.create_table_with_capacity(0, items.len())?;
            for it in items {
                let k = lua_from_reply(lua, it, resp3)?;
                if !matches!(k, Value::Nil) {
                    s.raw_set(k, true)?;
                }
            }
            one("set", Value::Table(s))?
        }
        R::Double(d) => one("double", Value::Number(d))?,
        R::Bool(b) => Value::Boolean(b),
        R::BigNumber(d) => one("big_number", Value::String(lua.create_string(&d)?))?,
        R::Verbatim { format, text } => {
            let t = lua.create_table_with_capacity(0, 2)?;
            t.raw_set("format", lua.create_string(format)?)?;
            t.raw_set("string", lua.create_string(&text)?)?;
            one("verbatim_string", Value::Table(t))?
        }
        R::Attribute { value, .. } => lua_from_reply(lua, *value, resp3)?,
    })
}

/// `{err = msg}` and "failed": what the Rust halves of `redis.*` return
/// for their Lua wrappers to raise.
fn fail(lua: &Lua, msg: &str) -> mlua::Result<(Value, bool)> {
    let t = lua.create_table_with_capacity(0, 1)?;
    t.raw_set("err", msg)?;
    Ok((Value::Table(t), true))
}

fn next_rand(sh: &Shared) -> i32 {
    let x = sh.rand.load(Relaxed);
    let x = x.wrapping_mul(0x5_DEEC_E66D).wrapping_add(0xB) & ((1 << 48) - 1);
    sh.rand.store(x, Relaxed);
    (x >> 17) as i32
}

/// `luaL_checkint`: a number (or numeric string), truncated.
fn check_int(lua: &Lua, v: Option<&Value>, n: usize, fname: &str) -> mlua::Result<i32> {
    let v = v.cloned().unwrap_or(Value::Nil);
    match lua.coerce_number(v.clone())? {
        Some(x) => Ok(x as i64 as i32),
        None => Err(mlua::Error::runtime(format!(
            "bad argument #{n} to '{fname}' (number expected, got {})",
            if matches!(v, Value::Nil) {
                "no value"
            } else {
                v.type_name()
            }
        ))),
    }
}

/// The fixed Lua half of the sandbox: `error_reply`/`status_reply` raise
/// what their Rust halves return on bad arguments, every library and
/// `redis` become read-only proxies, loaded code gets the same
/// environment, `pcall` unwraps error tables, unknown globals are an error.
const SETUP: &str = r#"
local G, P, R, setfenv, loadstring, load, killed, errtext, target = ...
local error, setmetatable, tostring, type = error, setmetatable, tostring, type
-- A script stopped by SCRIPT/FUNCTION KILL cannot catch that: whatever
-- catches errors raises it again.
local function rethrow(...)
  if killed() then error('killed', 0) end
  return ...
end
do
  local resume, xpcall = G.coroutine.resume, G.xpcall
  G.coroutine.resume = function(...) return rethrow(resume(...)) end
  G.xpcall = function(...) return rethrow(xpcall(...)) end
end
local function ro() error('Attempt to modify a readonly table', 2) end
-- The read-only proxies, and what getmetatable shows of each (true:
-- nothing, as for Valkey's read-only tables).
local protected = setmetatable({}, {__mode = 'k'})
-- The table behind each proxy, for next, pairs and ipairs (walk.rs):
-- Valkey's read-only tables are the tables themselves, so scripts can
-- walk them.
local function readonly(t)
  local p = setmetatable({}, {__index = t, __newindex = ro, __metatable = false})
  protected[p] = true
  target[p] = t
  return p
end
do
  local getmetatable, real_setmetatable = G.getmetatable, G.setmetatable
  G.getmetatable = function(t)
    local shown = protected[t]
    if shown == true then return nil end
    if shown ~= nil then return shown end
    return getmetatable(t)
  end
  -- Valkey raises these from C, without a position.
  G.setmetatable = function(t, mt)
    if protected[t] ~= nil then error('Attempt to modify a readonly table', 0) end
    return real_setmetatable(t, mt)
  end
  local rawset = G.rawset
  G.rawset = function(t, k, v)
    if protected[t] ~= nil then error('Attempt to modify a readonly table', 0) end
    return rawset(t, k, v)
  end
end
local function raising(f)
  return function(...)
    local v, failed = f(...)
    if failed then error(v) end
    return v
  end
end
for _, name in ipairs({'error_reply', 'status_reply'}) do
  R[name] = raising(R[name])
end
for _, name in ipairs({'string', 'table', 'math', 'bit', 'cjson', 'cmsgpack', 'struct', 'os', 'coroutine'}) do
  G[name] = readonly(G[name])
end
local r = readonly(R)
G.redis = r
G.server = r
-- Valkey's Lua loads no bytecode: a binary chunk is text that does not
-- parse, and the error names it as luaO_chunkid does.
local function chunkid(source)
  if source:sub(1, 1) == '=' then return source:sub(2, 60) end
  local line = source:match('^[^%z\n\r]*')
  local cut = #line > 43 or (#line < #source and source:byte(#line + 1) ~= 0)
  return '[string "' .. line:sub(1, 43) .. (cut and '..."]' or '"]')
end
local function binary(s, name)
  return nil, chunkid(name or s) .. ":1: unexpected symbol near 'char(27)'"
end
G.loadstring = function(s, name)
  if type(s) == 'string' and s:byte(1) == 27 then return binary(s, name) end
  local f, e = loadstring(s, name)
  if f then setfenv(f, P) end
  return f, e
end
local concat = table.concat
G.load = function(fn, name)
  if type(fn) ~= 'function' then
    error("bad argument #1 to 'load' (function expected, got " .. type(fn) .. ")", 2)
  end
  -- The reader's pieces, read here to look at the first byte.
  local parts = {}
  while true do
    local piece = fn()
    if piece == nil or piece == '' then break end
    if type(piece) == 'number' then piece = tostring(piece) end
    if type(piece) ~= 'string' then return nil, 'reader function must return a string' end
    parts[#parts + 1] = piece
  end
  local s = concat(parts)
  if s:byte(1) == 27 then return binary(s, name or '=(load)') end
  local f, e = loadstring(s, name or '=(load)')
  if f then setfenv(f, P) end
  return f, e
end
-- pcall hands a raised error table's text to the script, as Valkey's.
local pcall, rawget = pcall, rawget
local function unwrap(ok, ...)
  if killed() then error('killed', 0) end
  if not ok then
    local e = ...
    if type(e) == 'table' and type(rawget(e, 'err')) == 'string' then
      return false, e.err
    end
    -- Raised by a library function written in Rust: its text, as the
    -- string a C library raises.
    if type(e) == 'userdata' then
      return false, errtext(e)
    end
  end
  return ok, ...
end
G.pcall = function(...) return unwrap(pcall(...)) end
G._G = P
setmetatable(G, {
  __index = function(_, k)
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end,
  __metatable = false,
})
local Pmeta = {__index = G, __newindex = ro, __metatable = false}
setmetatable(P, Pmeta)
-- getmetatable(_G) shows a read-only table, as Valkey's.
protected[P] = readonly({})
target[P] = G
-- While FUNCTION LOAD runs a library's code, its globals are the `server`
-- API alone (Valkey's library globals); its functions, once called, see
-- every global as usual.
local loading = setmetatable({}, {
  __index = function(_, k)
    if k == 'redis' or k == 'server' then return rawget(G, k) end
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end,
  __metatable = false,
})
return function(on) Pmeta.__index = on and loading or G end
"#;

fn build(shared: Arc<Shared>) -> mlua::Result<Scripts> {
    let libs = StdLib::TABLE | StdLib::STRING | StdLib::MATH;
    let lua = Lua::new_with(libs, LuaOptions::default())?;
    let g = lua.globals();
    let setfenv: Function = g.raw_get("setfenv")?;
    let loadstring: Function = g.raw_get("loadstring")?;
    let load: Function = g.raw_get("load")?;
    for name in [
        "dofile", "loadfile", "print", "require", "module", "setfenv", "getfenv", "newproxy",
        "package",
    ] {
        g.raw_set(name, Value::Nil)?;
    }

    // math.random / math.randomseed: Valkey's lrand48-based versions.
    let math: Table = g.raw_get("math")?;
    let sh = shared.clone();
    math.raw_set(
        "random",
        lua.create_function(move |lua, a: MultiValue| {
            let r = f64::from(next_rand(&sh) % i32::MAX) / f64::from(i32::MAX);
            match a.len() {
                0 => Ok(r),
                1 => {
                    let u = check_int(lua, a.front(), 1, "random")?;
                    if u < 1 {
                        return Err(mlua::Error::runtime(
                            "bad argument #1 to 'random' (interval is empty)",
                        ));
                    }
                    Ok((r * f64::from(u)).floor() + 1.0)
                }
                2 => {
                    let l = check_int(lua, a.front(), 1, "random")?;
                    let u = check_int(lua, a.get(1), 2, "random")?;
                    if l > u {
                        return Err(mlua::Error::runtime(
                            "bad argument #2 to 'random' (interval is empty)",
                        ));
                    }
                    Ok((r * (f64::from(u) - f64::from(l) + 1.0)).floor() + f64::from(l))
                }
                _ => Err(mlua::Error::runtime("wrong number of arguments")),
            }
        })?,
    )?;
    let sh = shared.clone();
    math.raw_set(
        "randomseed",
        lua.create_function(move |lua, a: MultiValue| {
            let seed = check_int(lua, a.front(), 1, "randomseed")?;
            sh.rand
                .store(0x330E | (u64::from(seed as u32) << 16), Relaxed);
            Ok(())
        })?,
    )?;

    // os: only clock, as Valkey 8.
    let os = lua.create_table()?;
    let started = std::time::Instant::now();
    os.raw_set(
        "clock",
        lua.create_function(move |_, ()| Ok(started.elapsed().as_secs_f64()))?,
    )?;
    g.raw_set("os", os)?;
    g.raw_set("bit", bit::open(&lua)?)?;
    g.raw_set("cjson", cjson::open(&lua)?)?;
    g.raw_set("cmsgpack", cmsgpack::open(&lua)?)?;
    g.raw_set("struct", structlib::open(&lua)?)?;

    let r = redis_table(&lua, &shared)?;
    // redis.call / redis.pcall: C closures over the Shared state, a
    // "raise" flag and the Rust converter for replies beyond the common
    // ones (see `redis_call_c`).
    let convert =
        lua.create_function(
            |lua, (reply, resp3): (mlua::LuaString, bool)| match resp::parse_value(
                &reply.as_bytes(),
            ) {
                Ok(Some((v, _))) => {
                    let failed = matches!(v, resp::Value::Error(_));
                    Ok((lua_from_reply(lua, v, resp3)?, failed))
                }
                _ => fail(lua, "ERR the command's reply could not be read"),
            },
        )?;
    let shp = Arc::as_ptr(&shared) as *mut std::ffi::c_void;
    for (name, raise) in [("call", true), ("pcall", false)] {
        // SAFETY: the closure gets the Shared pointer (kept alive by the
        // `Scripts` that owns this Lua state, which the closure cannot
        // outlive), the flag and the converter as its three upvalues, in
        // that order; `redis_call_c` follows the Lua C API contract.
        let f: Function = unsafe {
            lua.exec_raw(&convert, |l| {
                use mlua::ffi;
                ffi::lua_pushlightuserdata(l, shp);
                ffi::lua_insert(l, -2);
                ffi::lua_pushboolean(l, i32::from(raise));
                ffi::lua_insert(l, -2);
                ffi::lua_pushcclosure(l, redis_call_c, 3);
            })
        }?;
        r.raw_set(name, f)?;
    }

    install_raising(&lua, &r)?;
    lua.set_named_registry_value("ringkv.redis", r.clone())?;
    let env = lua.create_table()?;
    // The real xpcall, for running scripts (the sandbox's is wrapped).
    let xpcall: Function = g.raw_get("xpcall")?;
    let sh = shared.clone();
    let killed =
        lua.create_function(move |_, ()| Ok(sh.killed.lock().expect("not poisoned").is_some()))?;
    // Proxy -> table behind it (weak keys), filled by SETUP.
    let target = lua.create_table()?;
    let weak = lua.create_table()?;
    weak.raw_set("__mode", "k")?;
    target.set_metatable(Some(weak))?;
    let set_loading: Function = lua.load(SETUP).set_name(INTERNAL).call((
        g.clone(),
        env.clone(),
        r,
        setfenv,
        loadstring,
        load,
        killed,
        lua.create_function(|lua, e: Value| {
            Ok(match e {
                Value::Error(e) => Value::String(lua.create_string(lua_msg(&e))?),
                other => other,
            })
        })?,
        target.clone(),
    ))?;
    lua.set_named_registry_value("ringkv.set_loading", set_loading)?;
    walk::install(&lua, &g, &target)?;

    let sh = shared.clone();
    let handler = lua.create_function(move |lua, err: Value| {
        // Stopped by the watchdog (SCRIPT KILL): that text, whatever was
        // raised last, at the script's line.
        let kill = *sh.killed.lock().expect("not poisoned");
        let err = match kill {
            Some(text) => Value::String(lua.create_string(text)?),
            None => err,
        };
        // An error raised by a Rust function (a library's bad argument)
        // carries no position: it gets its caller's, as luaL_error gives.
        let mut needs_where = false;
        let t = match err {
            Value::Table(t) => t,
            other => {
                let msg = match &other {
                    Value::String(s) => s.to_string_lossy(),
                    Value::Error(e) => {
                        needs_where = true;
                        lua_msg(e)
                    }
                    v => lua
                        .coerce_string(v.clone())
                        .ok()
                        .flatten()
                        .map(|s| s.to_string_lossy())
                        .unwrap_or_else(|| format!("({})", v.type_name())),
                };
                let t = lua.create_table()?;
                t.raw_set("err", format!("ERR {msg}"))?;
                t
            }
        };
        // The frame that raised it: the first Lua frame of the script's
        // own code (C functions and this crate's wrappers skipped).
        for level in 1..64 {
            let frame = lua.inspect_stack(level, |d| {
                let s = d.source();
                (s.what, s.source.map(|c| c.into_owned()), d.current_line())
            });
            let Some((what, source, line)) = frame else {
                break;
            };
            // A kill raised again by a wrapper that was tail-called: the
            // script's line is the one that called the wrapper.
            let tail = kill.is_some() && what == "tail";
            if what == "C" || source.as_deref() == Some(INTERNAL) || tail {
                continue;
            }
            if let (Some(s), Some(l)) = (source, line) {
                if needs_where && let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
                    let short = s.strip_prefix('@').unwrap_or(&s);
                    let e = e.to_string_lossy();
                    let msg = e.strip_prefix("ERR ").unwrap_or(&e);
                    t.raw_set("err", format!("ERR {short}:{l}: {msg}"))?;
                }
                t.raw_set("source", s)?;
                t.raw_set("line", l as f64)?;
            }
            break;
        }
        Ok(t)
    })?;

    // Valkey's EVAL globals name its error handler (older scripts pass it
    // to xpcall); here functions see them too, one state serving both.
    for name in ["__server__err__handler", "__redis__err__handler"] {
        g.raw_set(name, handler.clone())?;
    }

    let scripts = Scripts {
        lua,
        shared,
        globals: g,
        env,
        xpcall,
        handler,
        cache: HashMap::new(),
        body_bytes: 0,
        lru: std::collections::BTreeMap::new(),
        lru_tick: 0,
        evicted: 0,
        runs: 0,
    };
    scripts.install_hook();
    Ok(scripts)
}

/// What [`call_host`] found, for [`redis_call_c`] to push: numbers and
/// offsets into `Shared::reply`, nothing that needs dropping.
enum Pushed {
    Num(f64),
    /// A bulk string: `reply[at..at + len]`.
    Str(usize, usize),
    /// A null bulk: `false` in RESP2, `nil` in RESP3.
    Null(bool),
    /// A status (`{ok=}`), an error (`{err=}`, also a refusal).
    Status(usize, usize),
    Error(usize, usize),
    /// Anything else: the whole reply (its length) for the converter.
    Complex(usize, bool),
    Panicked,
}

/// The Rust part of `redis.call`: arguments `1..=n` (all strings by now)
/// to the host, the reply classified.
///
/// # Safety
/// `l` is the running state with `n` string arguments on its stack.
unsafe fn call_host(sh: &Shared, l: *mut mlua::ffi::lua_State, n: i32) -> (Pushed, *const u8) {
    // Up to 8 arguments on the stack, more in a Vec.
    let mut small: [&[u8]; 8] = [&[]; 8];
    let mut large: Vec<&[u8]> = Vec::new();
    let n = n as usize;
    if n > small.len() {
        large.resize(n, &[]);
    }
    let argv: &mut [&[u8]] = if n > small.len() {
        &mut large
    } else {
        &mut small[..n]
    };
    for (i, slot) in argv.iter_mut().enumerate() {
        let mut len = 0usize;
        // SAFETY: argument `i + 1` is a string (converted before), so this
        // neither allocates nor raises; the bytes live on the stack until
        // this function returns.
        let p = unsafe { mlua::ffi::lua_tolstring(l, i as i32 + 1, &mut len) };
        // SAFETY: Lua guarantees `len` readable bytes at `p`.
        *slot = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
    }
    let argv: &[&[u8]] = argv;
    let mut reply = std::mem::take(&mut *sh.reply.lock().expect("not poisoned"));
    reply.clear();
    let resp3 = sh.resp3.load(Relaxed);
    let p = sh.host.load(Relaxed) as *mut &mut dyn Host;
    let res = if p.is_null() {
        Err("ERR redis.call() can only be called inside a script invocation".to_string())
    } else {
        // SAFETY: `host` holds a pointer to a `&mut dyn Host` on the stack
        // of `Scripts::execute`, set just before the script starts and
        // reset to 0 before it returns; this runs only inside that window
        // (a script cannot outlive its run), and nothing else uses the
        // host meanwhile: `execute` is blocked in the call.
        let host = unsafe { &mut *p };
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            host.call(argv, resp3, &mut reply)
        })) {
            Ok(r) => r,
            Err(payload) => {
                *sh.panic.lock().expect("not poisoned") = Some(payload);
                *sh.reply.lock().expect("not poisoned") = reply;
                return (Pushed::Panicked, std::ptr::null());
            }
        }
    };
    let pushed = match res {
        Err(msg) => {
            reply.clear();
            reply.extend_from_slice(msg.as_bytes());
            Pushed::Error(0, reply.len())
        }
        Ok(()) => classify(&reply, resp3),
    };
    // Large buffers are not kept (the next call starts small).
    if reply.capacity() > 64 * 1024 && !matches!(pushed, Pushed::Str(..) | Pushed::Complex(..)) {
        reply = Vec::new();
    }
    // The bytes stay where they are when the Vec moves into the mutex.
    let base = reply.as_ptr();
    *sh.reply.lock().expect("not poisoned") = reply;
    (pushed, base)
}

/// The common replies, located in `r`.
fn classify(r: &[u8], resp3: bool) -> Pushed {
    let Some(line_end) = r.iter().position(|&b| b == b'\r') else {
        return Pushed::Complex(r.len(), resp3);
    };
    let line = &r[1.min(line_end)..line_end];
    let num = |b: &[u8]| {
        std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
    };
    match r.first() {
        Some(b':') => match num(line) {
            Some(n) => Pushed::Num(n as f64),
            None => Pushed::Complex(r.len(), resp3),
        },
        Some(b'$') if line == b"-1" => Pushed::Null(resp3),
        Some(b'$') => match num(line) {
            Some(n) if n >= 0 && line_end + 2 + n as usize <= r.len() => {
                Pushed::Str(line_end + 2, n as usize)
            }
            _ => Pushed::Complex(r.len(), resp3),
        },
        Some(b'+') => Pushed::Status(1, line_end - 1),
        Some(b'-') => Pushed::Error(1, line_end - 1),
        _ => Pushed::Complex(r.len(), resp3),
    }
}

/// `redis.call` (upvalue 2 true: an error reply raises) and `redis.pcall`
/// (false: it is returned as `{err=...}`). Upvalue 1 is the `Shared`
/// state, 3 the converter for replies beyond the common ones. Written
/// against the C API so that a call costs no handles or allocations
/// beyond the command's own, and keeps the script's frame for the line
/// an error names.
unsafe extern "C-unwind" fn redis_call_c(l: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    use mlua::ffi;
    // SAFETY: called by Lua with a valid state and the three upvalues
    // `build` gave it. No value that needs dropping is alive while a Lua
    // function that may raise (and so longjmp over this frame) runs:
    // `call_host` returns only numbers and offsets, and the reply buffer
    // it filled stays in `Shared` (unchanged until the next call) while
    // its bytes are pushed.
    unsafe {
        let sh = &*(ffi::lua_touserdata(l, ffi::lua_upvalueindex(1)) as *const Shared);
        let raise = ffi::lua_toboolean(l, ffi::lua_upvalueindex(2)) != 0;
        let n = ffi::lua_gettop(l);
        let mut refusal: Option<&'static std::ffi::CStr> = None;
        if n == 0 {
            refusal = Some(c"ERR Please specify at least one argument for this call");
        }
        for i in 1..=n {
            match ffi::lua_type(l, i) {
                ffi::LUA_TSTRING => {}
                ffi::LUA_TNUMBER => {
                    // Replaced by its text as Valkey writes it (fpconv's
                    // shortest round-trip form, not Lua's "%.14g").
                    let mut buf = [0u8; 32];
                    let len = fpconv::dtoa(ffi::lua_tonumber(l, i), &mut buf);
                    ffi::lua_pushlstring(l, buf.as_ptr() as *const std::ffi::c_char, len);
                    ffi::lua_replace(l, i);
                }
                _ => {
                    refusal = Some(c"ERR Command arguments must be strings or integers");
                    break;
                }
            }
        }
        let pushed = refusal.is_none().then(|| call_host(sh, l, n));
        // As Valkey: the arguments go before the reply is pushed, so that
        // a call with as many arguments as Lua allows has room for it.
        ffi::lua_settop(l, 0);
        if ffi::lua_checkstack(l, 4) == 0 {
            ffi::lua_pushstring(l, c"stack overflow".as_ptr());
            ffi::lua_error(l);
        }
        let (pushed, base) = match pushed {
            Some(p) => p,
            None => {
                // `pushed` is None only for a refusal.
                let msg = refusal.unwrap_or(c"ERR unknown error");
                ffi::lua_createtable(l, 0, 1);
                ffi::lua_pushstring(l, msg.as_ptr());
                ffi::lua_setfield(l, -2, c"err".as_ptr());
                if raise {
                    ffi::lua_error(l);
                }
                return 1;
            }
        };
        let base = base as *const std::ffi::c_char;
        match pushed {
            Pushed::Num(x) => ffi::lua_pushnumber(l, x),
            Pushed::Str(at, len) => {
                ffi::lua_pushlstring(l, base.add(at), len);
            }
            Pushed::Null(resp3) => {
                if resp3 {
                    ffi::lua_pushnil(l);
                } else {
                    ffi::lua_pushboolean(l, 0);
                }
            }
            Pushed::Status(at, len) | Pushed::Error(at, len) => {
                let is_err = matches!(pushed, Pushed::Error(..));
                ffi::lua_createtable(l, 0, 1);
                ffi::lua_pushlstring(l, base.add(at), len);
                ffi::lua_setfield(l, -2, if is_err { c"err" } else { c"ok" }.as_ptr());
                if is_err {
                    // The host counted it (INFO errorstats) already.
                    ffi::lua_pushboolean(l, 1);
                    ffi::lua_setfield(l, -2, c"ignore_error_stats_update".as_ptr());
                }
                if is_err && raise {
                    ffi::lua_error(l);
                }
            }
            Pushed::Complex(len, resp3) => {
                ffi::lua_pushvalue(l, ffi::lua_upvalueindex(3));
                ffi::lua_pushlstring(l, base, len);
                ffi::lua_pushboolean(l, i32::from(resp3));
                ffi::lua_call(l, 2, 2);
                let failed = ffi::lua_toboolean(l, -1) != 0;
                ffi::lua_pop(l, 1);
                if failed && raise {
                    ffi::lua_error(l);
                }
            }
            Pushed::Panicked => {
                ffi::lua_pushstring(l, c"the server panicked running a command".as_ptr());
                ffi::lua_error(l);
            }
        }
        1
    }
}

/// A C function that runs the Rust half of a `redis.*` function (kept
/// in the registry under `$key`) and raises the error table it returns.
/// C, not a Lua wrapper, so that `return redis.call(...)` keeps the
/// script's frame, whose line the error names, as Valkey's C functions do.
macro_rules! raising {
    ($name:ident, $key:literal) => {
        unsafe extern "C-unwind" fn $name(l: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
            use mlua::ffi;
            // SAFETY: called by Lua with a valid state. The stack gets room
            // for the function and its two results; the Rust half is an
            // mlua callback, which turns its own errors into Lua errors
            // after dropping its values. This frame holds nothing that
            // needs dropping, so `lua_error` may jump over it.
            unsafe {
                let n = ffi::lua_gettop(l);
                if ffi::lua_checkstack(l, 3) == 0 {
                    ffi::lua_pushstring(l, c"stack overflow".as_ptr());
                    ffi::lua_error(l);
                }
                ffi::lua_getfield_(l, ffi::LUA_REGISTRYINDEX, $key.as_ptr());
                ffi::lua_insert(l, 1);
                ffi::lua_call(l, n, 2);
                if ffi::lua_toboolean(l, -1) != 0 {
                    ffi::lua_pop(l, 1);
                    ffi::lua_error(l);
                }
                ffi::lua_pop(l, 1);
                1
            }
        }
    };
}

raising!(raising_log, c"ringkv.log");
raising!(raising_setresp, c"ringkv.setresp");
raising!(raising_set_repl, c"ringkv.set_repl");
raising!(raising_sha1hex, c"ringkv.sha1hex");
raising!(raising_register, c"ringkv.register_function");
raising!(raising_acl_check_cmd, c"ringkv.acl_check_cmd");

/// Install the raising C halves: `redis.<name>` becomes a C function
/// over the Rust half now in `redis.<name>` (which moves to the registry).
fn install_raising(lua: &Lua, r: &Table) -> mlua::Result<()> {
    let table: [(&str, mlua::ffi::lua_CFunction); 5] = [
        ("log", raising_log),
        ("setresp", raising_setresp),
        ("set_repl", raising_set_repl),
        ("sha1hex", raising_sha1hex),
        ("acl_check_cmd", raising_acl_check_cmd),
    ];
    for (name, cf) in table {
        let half: Function = r.raw_get(name)?;
        lua.set_named_registry_value(&format!("ringkv.{name}"), half)?;
        // SAFETY: the functions above follow the Lua C API contract.
        let f = unsafe { lua.create_c_function(cf) }?;
        r.raw_set(name, f)?;
    }
    Ok(())
}

/// The `redis` table (also `server`): the Rust halves of its functions
/// and its constants.
fn redis_table(lua: &Lua, shared: &Arc<Shared>) -> mlua::Result<Table> {
    let r = lua.create_table()?;
    for (k, v) in [
        ("LOG_DEBUG", 0),
        ("LOG_VERBOSE", 1),
        ("LOG_NOTICE", 2),
        ("LOG_WARNING", 3),
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", 3),
    ] {
        r.raw_set(k, v)?;
    }
    r.raw_set("REDIS_VERSION", "7.2.4")?;
    r.raw_set("REDIS_VERSION_NUM", 0x0007_0204)?;
    // The engine reports the same versions (INFO, HELLO; a test compares).
    r.raw_set("VALKEY_VERSION", "8.1.8")?;
    r.raw_set("VALKEY_VERSION_NUM", 0x0008_0108)?;
    r.raw_set("SERVER_NAME", "ringkv")?;

    let sh = shared.clone();
    r.raw_set(
        "log",
        lua.create_function(move |lua, a: MultiValue| {
            if a.len() < 2 {
                return fail(lua, "ERR server.log() requires two arguments or more.");
            }
            let level = match a.front() {
                Some(Value::Number(n)) => *n as i64,
                Some(Value::Integer(n)) => *n,
                _ => return fail(lua, "ERR First argument must be a number (log level)."),
            };
            if !(0..=3).contains(&level) {
                return fail(lua, "ERR Invalid log level.");
            }
            let mut msg = String::new();
            for (i, v) in a.iter().skip(1).enumerate() {
                if i > 0 {
                    msg.push(' ');
                }
                if let Ok(Some(s)) = lua.coerce_string(v.clone()) {
                    msg.push_str(&s.to_string_lossy());
                }
            }
            let p = sh.host.load(Relaxed) as *mut &mut dyn Host;
            if !p.is_null() {
                // SAFETY: as in `call_host`: the pointer is set only while
                // `Scripts::run` waits for the script.
                unsafe { &mut *p }.log(level as u8, &msg);
            }
            Ok((Value::Nil, false))
        })?,
    )?;
    let sh = shared.clone();
    r.raw_set(
        "acl_check_cmd",
        lua.create_function(move |lua, a: MultiValue| {
            if a.is_empty() {
                return fail(
                    lua,
                    "ERR Please specify at least one argument for this call",
                );
            }
            // The arguments as redis.call takes them.
            let mut argv: Vec<Vec<u8>> = Vec::with_capacity(a.len());
            for v in &a {
                match v {
                    Value::String(s) => argv.push(s.as_bytes().to_vec()),
                    Value::Number(_) | Value::Integer(_) => {
                        let n = lua.coerce_number(v.clone())?.unwrap_or(0.0);
                        let mut buf = [0u8; 32];
                        let len = fpconv::dtoa(n, &mut buf);
                        argv.push(buf[..len].to_vec());
                    }
                    _ => return fail(lua, "ERR Command arguments must be strings or integers"),
                }
            }
            let p = sh.host.load(Relaxed) as *mut &mut dyn Host;
            if p.is_null() {
                return fail(
                    lua,
                    "ERR server.acl_check_cmd can only be called inside a script invocation",
                );
            }
            let argv: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
            // SAFETY: as in `call_host`: the pointer is set only while
            // `Scripts::run` waits for the script.
            match unsafe { &mut *p }.acl_check(&argv) {
                Some(allowed) => Ok((Value::Boolean(allowed), false)),
                None => fail(lua, "ERR Invalid command passed to server.acl_check_cmd()"),
            }
        })?,
    )?;
    let sh = shared.clone();
    r.raw_set(
        "setresp",
        lua.create_function(move |lua, a: MultiValue| {
            if a.len() != 1 {
                return fail(lua, "ERR server.setresp() requires one argument.");
            }
            let n = match a.front() {
                Some(Value::Number(n)) => *n as i64,
                Some(Value::Integer(n)) => *n,
                _ => 0,
            };
            if n != 2 && n != 3 {
                return fail(lua, "ERR RESP version must be 2 or 3.");
            }
            sh.resp3.store(n == 3, Relaxed);
            Ok((Value::Nil, false))
        })?,
    )?;
    let sh = shared.clone();
    r.raw_set(
        "set_repl",
        lua.create_function(move |lua, a: MultiValue| {
            if a.len() != 1 {
                return fail(lua, "ERR server.set_repl() requires one argument.");
            }
            let n = match a.front() {
                Some(Value::Number(n)) => *n as i64,
                Some(Value::Integer(n)) => *n,
                _ => -1,
            };
            if !(0..=3).contains(&n) {
                return fail(
                    lua,
                    "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
                );
            }
            let p = sh.host.load(Relaxed) as *mut &mut dyn Host;
            if !p.is_null() {
                // SAFETY: as in `call_host`.
                unsafe { &mut *p }.set_repl(n as u8);
            }
            Ok((Value::Nil, false))
        })?,
    )?;
    r.raw_set(
        "sha1hex",
        lua.create_function(|lua, a: MultiValue| {
            if a.len() != 1 {
                return fail(lua, "ERR wrong number of arguments");
            }
            let s = lua
                .coerce_string(a[0].clone())?
                .map(|s| s.as_bytes().to_vec())
                .unwrap_or_default();
            let hex = sha1::hex(&s);
            Ok((Value::String(lua.create_string(hex)?), false))
        })?,
    )?;
    r.raw_set(
        "error_reply",
        lua.create_function(|lua, a: MultiValue| {
            let Some(Value::String(s)) = a.front().filter(|_| a.len() == 1) else {
                // Returned, not raised, as Valkey's.
                return fail(lua, "ERR wrong number or type of arguments").map(|(v, _)| (v, false));
            };
            // Valkey's luaPushErrorBuff: "-CODE msg" keeps its code, a
            // message without one (no space) gets ERR; CR/LF trimmed.
            let b = s.as_bytes();
            let b = b.strip_prefix(b"-").unwrap_or(&b);
            let mut msg = if b.contains(&b' ') {
                b.to_vec()
            } else {
                [&b"ERR "[..], b].concat()
            };
            while msg.last().is_some_and(|c| *c == b'\r' || *c == b'\n') {
                msg.pop();
            }
            let t = lua.create_table()?;
            t.raw_set("err", lua.create_string(msg)?)?;
            Ok((Value::Table(t), false))
        })?,
    )?;
    r.raw_set(
        "status_reply",
        lua.create_function(|lua, a: MultiValue| {
            let Some(Value::String(s)) = a.front().filter(|_| a.len() == 1) else {
                // Returned, not raised, as Valkey's.
                return fail(lua, "ERR wrong number or type of arguments").map(|(v, _)| (v, false));
            };
            let t = lua.create_table()?;
            t.raw_set("ok", s.clone())?;
            Ok((Value::Table(t), false))
        })?,
    )?;
    r.raw_set(
        "replicate_commands",
        lua.create_function(|_, _: MultiValue| Ok(true))?,
    )?;
    r.raw_set(
        "breakpoint",
        lua.create_function(|_, _: MultiValue| Ok(false))?,
    )?;
    r.raw_set("debug", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
    Ok(r)
}
