//! `next`, `pairs` and `ipairs` that see through the sandbox's read-only
//! proxies. Valkey makes its libraries, `redis` and `_G` read-only in
//! place, so scripts can still walk them (`for k in pairs(os)`); ours are
//! empty proxies whose `__index` is the table (see SETUP in lib.rs), and
//! these walk the table behind one instead, never handing it out (the
//! iteration state is the proxy).
//!
//! They are Rust (C) functions rather than Lua wrappers: a tail call to a
//! Lua function replaces the script's frame, so `return pairs(nil)` would
//! lose the line its error names; a C function's does not.

use mlua::{Function, Lua, MultiValue, Result, Table, Value, Variadic};

/// Replaces `next`, `pairs` and `ipairs` in `g`. `target` maps each proxy
/// to its table (weak keys; SETUP fills it).
pub fn install(lua: &Lua, g: &Table, target: &Table) -> Result<()> {
    let raw_next: Function = g.raw_get("next")?;
    let seen = {
        let target = target.clone();
        move |t: Table| -> Table {
            target
                .raw_get::<Option<Table>>(&t)
                .ok()
                .flatten()
                .unwrap_or(t)
        }
    };
    let next = {
        let seen = seen.clone();
        lua.create_function(move |_, a: Variadic<Value>| {
            let t = table_arg(&a, "next")?;
            let key = a.get(1).cloned().unwrap_or(Value::Nil);
            // Lua's own error (an invalid key), without mlua's traceback.
            raw_next
                .call::<MultiValue>((seen(t), key))
                .map_err(|e| mlua::Error::runtime(super::lua_msg(&e)))
        })?
    };
    let inext = lua.create_function(move |_, (t, i): (Table, i64)| {
        let i = i + 1;
        match seen(t).raw_get::<Value>(i)? {
            Value::Nil => Ok((Value::Nil, Value::Nil)),
            v => Ok((Value::Integer(i), v)),
        }
    })?;
    let pairs = {
        let next = next.clone();
        lua.create_function(move |_, a: Variadic<Value>| {
            let t = table_arg(&a, "pairs")?;
            Ok((next.clone(), t, Value::Nil))
        })?
    };
    let ipairs = lua.create_function(move |_, a: Variadic<Value>| {
        let t = table_arg(&a, "ipairs")?;
        Ok((inext.clone(), t, 0))
    })?;
    g.raw_set("next", next)?;
    g.raw_set("pairs", pairs)?;
    g.raw_set("ipairs", ipairs)?;
    Ok(())
}

/// The first argument, a table, or luaL_checktype's error.
fn table_arg(a: &[Value], fname: &str) -> Result<Table> {
    match a.first() {
        Some(Value::Table(t)) => Ok(t.clone()),
        other => Err(mlua::Error::runtime(format!(
            "bad argument #1 to '{fname}' (table expected, got {})",
            // Lua 5.1 has one number type.
            other.map_or("no value", |v| match v {
                Value::Integer(_) => "number",
                v => v.type_name(),
            })
        ))),
    }
}
