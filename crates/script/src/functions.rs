//! Functions (FUNCTION LOAD, FCALL) as Valkey 8 has them: libraries of
//! named Lua functions registered with `redis.register_function`, in a
//! Lua state of their own (not EVAL's).
//!
//! Loading runs the library's code once with no globals but a `redis`
//! (and `server`) table that has only `register_function`, `log`, the log
//! levels and the version constants (anything else is an error, as in
//! Valkey); the callbacks it registers run later
//! with the full `redis` table, receiving `keys` and `args` as arguments
//! (there are no KEYS/ARGV globals).

use crate::{Host, Scripts, error_text, fail, flags, lua_msg};
use mlua::{Function, MultiValue, Table, Value};
use resp::ReplyWriter;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// One registered function.
pub struct FunctionInfo {
    pub name: String,
    pub description: Option<Vec<u8>>,
    /// [`crate::flags`] bits (never `EVAL_COMPAT_MODE`).
    pub flags: u32,
    func: Function,
}

/// One library: its code and its functions, in registration order.
pub struct Library {
    pub name: String,
    pub code: Vec<u8>,
    pub functions: Vec<FunctionInfo>,
}

/// Functions registered by the library being loaded, and an error that
/// fails the load as it is (not as "Error registering functions").
#[derive(Default)]
struct Loading {
    functions: Vec<FunctionInfo>,
    fatal: Option<String>,
}

type Pending = Arc<Mutex<Option<Loading>>>;

/// A function name as the index keys it: function names are
/// case-insensitive, library names are not (as Valkey's dictionaries).
fn fold(name: &str) -> String {
    name.to_ascii_lowercase()
}

/// The libraries and their Lua state.
pub struct Functions {
    vm: Scripts,
    libs: BTreeMap<String, Library>,
    /// Function name, folded by [`fold`] (Valkey's function dictionaries
    /// ignore case: FCALL TEST runs `test`) → library name.
    index: HashMap<String, String>,
    /// The `redis` table code sees while its library loads.
    load_api: Table,
    /// The `redis` table callbacks see.
    run_api: Value,
    /// Functions registered by the library being loaded (`None`: no load
    /// in progress).
    pending: Pending,
    code_bytes: usize,
}

impl std::fmt::Debug for Functions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Functions")
            .field("libraries", &self.libs.len())
            .finish()
    }
}

impl Default for Functions {
    fn default() -> Self {
        Functions::new()
    }
}

/// Valkey's flag names, in the order FUNCTION LIST prints them.
pub const FLAG_NAMES: &[(u32, &str)] = &[
    (flags::NO_WRITES, "no-writes"),
    (flags::ALLOW_OOM, "allow-oom"),
    (flags::ALLOW_STALE, "allow-stale"),
    (flags::NO_CLUSTER, "no-cluster"),
    (flags::ALLOW_CROSS_SLOT, "allow-cross-slot-keys"),
];

fn valid_name(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_')
}

/// The library's name from its `#!lua name=<name>` line, and the code to
/// compile (the line left out, its newline kept). The line is split as
/// Valkey splits it (`sdssplitargs`: `name="x"` names `x`).
pub fn parse_library_shebang(code: &[u8]) -> Result<(String, &[u8]), String> {
    if !code.starts_with(b"#!") {
        return Err("ERR Missing library metadata".into());
    }
    let invalid = || "ERR Invalid library metadata".to_string();
    let end = code.iter().position(|&b| b == b'\n').ok_or_else(invalid)?;
    let parts = resp::split_line(&code[..end]).ok_or_else(invalid)?;
    let Some((first, rest)) = parts.split_first() else {
        return Err(invalid());
    };
    let engine = String::from_utf8_lossy(first.get(2..).unwrap_or_default());
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("ERR Engine '{engine}' not found"));
    }
    let mut name = None;
    for part in rest {
        let part = String::from_utf8_lossy(part);
        if part.len() >= 5 && part.as_bytes()[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(
                    "ERR Invalid metadata value, name argument was given multiple times".into(),
                );
            }
            name = Some(part[5..].to_string());
        } else {
            return Err(format!("ERR Invalid metadata value given: {part}"));
        }
    }
    let Some(name) = name else {
        return Err("ERR Library name was not given".into());
    };
    if !valid_name(name.as_bytes()) {
        return Err("ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
    }
    Ok((name, &code[end..]))
}

const LOAD_API: &str = r#"
local L, register, log = ...
local error, tostring, rawget, setmetatable = error, tostring, rawget, setmetatable
-- Valkey's library API: register_function, log and its levels, and
-- the version constants.
local api = {register_function = register, log = log}
for k, v in pairs(L) do
  if type(v) ~= 'function' and (k:find('^LOG_') or k:find('VERSION') or k == 'SERVER_NAME') then
    api[k] = v
  end
end
return setmetatable({}, {
  __index = function(_, k)
    local v = rawget(api, k)
    if v == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
    end
    return v
  end,
  __newindex = function() error('Attempt to modify a readonly table', 2) end,
  __metatable = false,
})
"#;

impl Functions {
    pub fn new() -> Functions {
        let vm = Scripts::new();
        let pending: Pending = Arc::new(Mutex::new(None));
        let lua = vm.lua.clone();
        let p = pending.clone();
        let register = lua
            .create_function(move |lua, a: MultiValue| register(lua, a, &p))
            .expect("fixed code");
        lua.set_named_registry_value("ringkv.register_function", register)
            .expect("fixed code");
        // SAFETY: `raising_register` follows the Lua C API contract (see
        // the `raising!` macro).
        let register =
            unsafe { lua.create_c_function(crate::raising_register) }.expect("fixed code");
        let run_api: Value = vm.globals.raw_get("redis").expect("redis is set");
        let real: Table = lua
            .named_registry_value("ringkv.redis")
            .expect("the redis table is kept");
        let log: Function = real.raw_get("log").expect("log");
        let load_api: Table = lua
            .load(LOAD_API)
            .set_name(crate::INTERNAL)
            .call((real, register, log))
            .expect("fixed code");
        Functions {
            vm,
            libs: BTreeMap::new(),
            index: HashMap::new(),
            load_api,
            run_api,
            pending,
            code_bytes: 0,
        }
    }

    pub fn libraries(&self) -> impl Iterator<Item = &Library> {
        self.libs.values()
    }
    pub fn library(&self, name: &str) -> Option<&Library> {
        self.libs.get(name)
    }
    pub fn function_count(&self) -> usize {
        self.index.len()
    }
    pub fn library_count(&self) -> usize {
        self.libs.len()
    }
    /// Bytes of library code and bookkeeping (INFO `used_memory_functions`).
    pub fn memory(&self) -> usize {
        self.code_bytes + self.index.len() * 200 + self.libs.len() * 200
    }
    /// The Lua state's bytes (INFO `used_memory_vm_functions`).
    pub fn lua_memory(&self) -> usize {
        self.vm.lua_memory()
    }
    /// The library that holds function `name`.
    pub fn library_of(&self, name: &str) -> Option<&str> {
        self.index.get(&fold(name)).map(String::as_str)
    }
    pub fn get(&self, name: &str) -> Option<&FunctionInfo> {
        let lib = self.libs.get(self.index.get(&fold(name))?)?;
        lib.functions
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))
    }

    /// FUNCTION FLUSH: no libraries, a fresh Lua state.
    pub fn flush(&mut self) {
        *self = Functions::new();
    }

    /// FUNCTION DELETE.
    pub fn delete(&mut self, name: &str) -> bool {
        match self.libs.remove(name) {
            Some(lib) => {
                for f in &lib.functions {
                    self.index.remove(&fold(&f.name));
                }
                self.code_bytes -= lib.code.len();
                true
            }
            None => false,
        }
    }

    /// FUNCTION LOAD: run the library's code, register its functions.
    /// `Ok`: the library's name; `Err`: the error reply.
    pub fn load(&mut self, code: &[u8], replace: bool) -> Result<String, String> {
        let (name, body) = parse_library_shebang(code)?;
        if self.libs.contains_key(&name) && !replace {
            return Err(format!("ERR Library '{name}' already exists"));
        }
        let f = self
            .vm
            .lua
            .load(body)
            .set_name("@user_function")
            .set_environment(self.vm.env.clone())
            .into_function()
            .map_err(|e| format!("ERR Error compiling function: {}", lua_msg(&e)))?;
        *self.pending.lock().expect("not poisoned") = Some(Loading::default());
        // A library's code gets 500 ms to register its functions (Valkey's
        // LOAD_TIMEOUT_MS): an endless loop there is an error, not a hang.
        let started = std::time::Instant::now();
        let timed_out = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = timed_out.clone();
        let _ = self.vm.lua.set_hook(
            mlua::HookTriggers::new().every_nth_instruction(10_000),
            move |_, _| {
                if started.elapsed() > std::time::Duration::from_millis(500) {
                    flag.store(true, std::sync::atomic::Ordering::Relaxed);
                    return Err(mlua::Error::runtime("FUNCTION LOAD timeout"));
                }
                Ok(mlua::VmState::Continue)
            },
        );
        let g = &self.vm.globals;
        let set_loading: Function = self
            .vm
            .lua
            .named_registry_value("ringkv.set_loading")
            .map_err(|e| format!("ERR {}", lua_msg(&e)))?;
        let swap = |v: Value, loading: bool| {
            g.raw_set("redis", v.clone())
                .and(g.raw_set("server", v))
                .and(set_loading.call::<()>(loading))
        };
        let r = swap(Value::Table(self.load_api.clone()), true).and_then(|_| {
            self.vm
                .xpcall
                .call::<MultiValue>((f, self.vm.handler.clone()))
        });
        let restored = swap(self.run_api.clone(), false);
        self.vm.lua.remove_hook();
        self.vm.install_hook();
        let loading = self
            .pending
            .lock()
            .expect("not poisoned")
            .take()
            .unwrap_or_default();
        restored.map_err(|e| format!("ERR {}", lua_msg(&e)))?;
        if timed_out.load(std::sync::atomic::Ordering::Relaxed) {
            return Err("ERR Error registering functions: ERR FUNCTION LOAD timeout".into());
        }
        if let Some(e) = loading.fatal {
            return Err(e);
        }
        let registered = loading.functions;
        match r {
            Ok(mv) if !matches!(mv.front(), Some(Value::Boolean(true))) => {
                let v = mv.get(1).cloned().unwrap_or(Value::Nil);
                let msg = match &v {
                    Value::Table(t) => match t.raw_get::<Value>("err") {
                        Ok(Value::String(s)) => s.to_string_lossy(),
                        _ => error_text(&v, &name),
                    },
                    _ => error_text(&v, &name),
                };
                return Err(format!("ERR Error registering functions: {msg}"));
            }
            Ok(_) => {}
            Err(e) => return Err(format!("ERR Error registering functions: {}", lua_msg(&e))),
        }
        if registered.is_empty() {
            return Err("ERR No functions registered".into());
        }
        for f in &registered {
            if let Some(lib) = self.index.get(&fold(&f.name))
                && lib != &name
            {
                return Err(format!("ERR Function {} already exists", f.name));
            }
        }
        self.delete(&name);
        for f in &registered {
            self.index.insert(fold(&f.name), name.clone());
        }
        self.code_bytes += code.len();
        self.libs.insert(
            name.clone(),
            Library {
                name: name.clone(),
                code: code.to_vec(),
                functions: registered,
            },
        );
        Ok(name)
    }

    /// FCALL: run function `name` with `keys` and `args` as its arguments
    /// (the result as [`Scripts::run`]'s).
    /// See [`Scripts::set_watchdog`] (functions run in a state of their own).
    pub fn set_watchdog(&mut self, w: Arc<dyn crate::Watchdog>) {
        self.vm.set_watchdog(w);
    }

    pub fn has_watchdog(&self) -> bool {
        self.vm.has_watchdog()
    }

    pub fn call(
        &mut self,
        name: &str,
        keys: &[&[u8]],
        args: &[&[u8]],
        host: &mut dyn Host,
        w: &mut ReplyWriter<'_>,
    ) -> bool {
        let Some(f) = self.get(name) else {
            w.error("ERR Function not found");
            return false;
        };
        let func = f.func.clone();
        let lua = &self.vm.lua;
        let bound = (|| {
            let seq = |items: &[&[u8]]| -> mlua::Result<Table> {
                let t = lua.create_table_with_capacity(items.len(), 0)?;
                for (i, x) in items.iter().enumerate() {
                    t.raw_seti(i + 1, lua.create_string(x)?)?;
                }
                Ok(t)
            };
            let (k, a) = (seq(keys)?, seq(args)?);
            func.bind((k, a))
        })();
        match bound {
            Ok(b) => self.vm.execute(b, name, host, w),
            Err(e) => {
                w.error(&format!("ERR {}", lua_msg(&e)));
                false
            }
        }
    }
}

/// The Rust half of `redis.register_function` (Valkey's
/// `luaRegisterFunction`): validate, and add to the library being loaded.
fn register(lua: &mlua::Lua, a: MultiValue, pending: &Pending) -> mlua::Result<(Value, bool)> {
    let mut name: Option<mlua::LuaString> = None;
    let mut callback: Option<Function> = None;
    let mut description = None;
    let mut fflags = 0u32;
    match a.len() {
        1 => {
            let Some(Value::Table(t)) = a.front() else {
                return fail(
                    lua,
                    "ERR calling server.register_function with a single argument is only applicable to Lua table (representing named arguments).",
                );
            };
            for pair in t.pairs::<Value, Value>() {
                let (k, v) = pair?;
                let key = match &k {
                    Value::String(s) => s.to_string_lossy(),
                    _ => {
                        return fail(
                            lua,
                            "ERR named argument key given to server.register_function is not a string",
                        );
                    }
                };
                match (key.as_str(), v) {
                    ("function_name", Value::String(s)) => name = Some(s),
                    ("function_name", _) => {
                        return fail(
                            lua,
                            "ERR function_name argument given to server.register_function must be a string",
                        );
                    }
                    ("callback", Value::Function(f)) => callback = Some(f),
                    ("callback", _) => {
                        return fail(
                            lua,
                            "ERR callback argument given to server.register_function must be a function",
                        );
                    }
                    ("description", Value::String(s)) => description = Some(s.as_bytes().to_vec()),
                    ("description", _) => {
                        return fail(
                            lua,
                            "ERR description argument given to server.register_function must be a string",
                        );
                    }
                    ("flags", Value::Table(fl)) => {
                        for v in fl.sequence_values::<Value>() {
                            let Value::String(s) = v? else {
                                return fail(lua, "ERR unknown flag given");
                            };
                            let s = s.to_string_lossy();
                            match FLAG_NAMES.iter().find(|(_, n)| *n == s) {
                                Some((bit, _)) => fflags |= bit,
                                None => return fail(lua, "ERR unknown flag given"),
                            }
                        }
                    }
                    ("flags", _) => {
                        return fail(
                            lua,
                            "ERR flags argument to server.register_function must be a table representing function flags",
                        );
                    }
                    _ => {
                        return fail(
                            lua,
                            "ERR unknown argument given to server.register_function",
                        );
                    }
                }
            }
            if name.is_none() {
                return fail(
                    lua,
                    "ERR server.register_function must get a function name argument",
                );
            }
            if callback.is_none() {
                return fail(
                    lua,
                    "ERR server.register_function must get a callback argument",
                );
            }
        }
        2 => {
            let Some(Value::String(n)) = a.front() else {
                return fail(
                    lua,
                    "ERR first argument to server.register_function must be a string",
                );
            };
            let Some(Value::Function(f)) = a.get(1) else {
                return fail(
                    lua,
                    "ERR second argument to server.register_function must be a function",
                );
            };
            name = Some(n.clone());
            callback = Some(f.clone());
        }
        _ => {
            return fail(
                lua,
                "ERR wrong number of arguments to server.register_function",
            );
        }
    }
    let (Some(name), Some(func)) = (name, callback) else {
        return fail(
            lua,
            "ERR wrong number of arguments to server.register_function",
        );
    };
    let mut p = pending.lock().expect("not poisoned");
    let Some(loading) = p.as_mut() else {
        return fail(
            lua,
            "ERR server.register_function can only be called on FUNCTION LOAD command",
        );
    };
    if !valid_name(&name.as_bytes()) {
        let msg = "ERR Function names can only contain letters, numbers, or underscores(_) and must be at least one character long";
        loading.fatal.get_or_insert_with(|| msg.to_string());
        return fail(lua, msg);
    }
    let name = name.to_string_lossy();
    if loading
        .functions
        .iter()
        .any(|f| f.name.eq_ignore_ascii_case(&name))
    {
        let msg = "ERR Function already exists in the library";
        loading.fatal.get_or_insert_with(|| msg.to_string());
        return fail(lua, msg);
    }
    loading.functions.push(FunctionInfo {
        name,
        description,
        flags: fflags,
        func,
    });
    Ok((Value::Nil, false))
}
