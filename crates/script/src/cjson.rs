//! The `cjson` library as Valkey embeds it: lua-cjson 2.1.0.
//!
//! `cjson.encode`, `cjson.decode`, `cjson.null`, and the settings
//! functions — `encode_sparse_array`, `encode_max_depth`,
//! `decode_max_depth`, `encode_number_precision`, `encode_keep_buffer`,
//! `encode_invalid_numbers`, `decode_invalid_numbers` — each of which
//! changes its setting(s) when given arguments and returns the
//! setting(s) in force, as lua-cjson's do. Settings belong to the Lua
//! state, so they outlast the script that changed them, as in Valkey.
//!
//! Decoding follows lua-cjson's tokenizer rather than the JSON grammar:
//! a NUL byte ends the text, numbers are read as C's `strtod` reads them,
//! and with `decode_invalid_numbers` on (the default) `nan`, `inf`,
//! `+1`, `0x10` and leading zeros are numbers too. Errors carry
//! lua-cjson's texts and 1-based character positions.

mod decode;

use decode::decode;
use mlua::{Lua, MultiValue, Result, Table, Value};
use std::sync::{Arc, Mutex};

/// One Lua state's settings (lua-cjson's `json_config_t`).
#[derive(Clone, Copy)]
struct Config {
    sparse_convert: bool,
    sparse_ratio: i64,
    sparse_safe: i64,
    encode_max_depth: i64,
    decode_max_depth: i64,
    precision: i64,
    /// Enum settings hold the index of their option: 0 off, 1 on (and 2
    /// `null` for [`INVALID_NUMBER_OPTIONS`]).
    keep_buffer: usize,
    encode_invalid: usize,
    decode_invalid: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            sparse_convert: false,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            precision: 14,
            keep_buffer: 1,
            encode_invalid: 0,
            decode_invalid: 1,
        }
    }
}

type Shared = Arc<Mutex<Config>>;

/// A settings function's body: its arguments (padded with nil) in, its
/// results out.
type SettingFn = Box<dyn Fn(&Lua, &mut Config, &[Value]) -> Result<MultiValue> + Send>;

const BOOL_OPTIONS: &[&str] = &["off", "on"];
const INVALID_NUMBER_OPTIONS: &[&str] = &["off", "on", "null"];
const INT_MAX: i64 = i32::MAX as i64;

/// The `cjson` table.
pub fn open(lua: &Lua) -> Result<Table> {
    let t = lua.create_table()?;
    let cfg: Shared = Arc::default();
    let c = cfg.clone();
    t.set(
        "encode",
        lua.create_function(move |lua, args: MultiValue| {
            let v = one_arg(&args, "encode")?;
            let cfg = *c.lock().expect("not poisoned");
            let mut out = Vec::new();
            encode(lua, &cfg, &v, &mut out, 0)?;
            lua.create_string(out)
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "decode",
        lua.create_function(move |lua, args: MultiValue| {
            let v = one_arg(&args, "decode")?;
            let Some(s) = lua.coerce_string(v.clone())? else {
                return Err(bad_arg(1, "decode", &expected("string", &v)));
            };
            let cfg = *c.lock().expect("not poisoned");
            decode(lua, &cfg, &s.as_bytes())
        })?,
    )?;
    let setting = |name: &'static str, n: usize, f: SettingFn| {
        let c = cfg.clone();
        lua.create_function(move |lua, args: MultiValue| {
            if args.len() > n {
                return Err(bad_arg(n + 1, name, "found too many arguments"));
            }
            let mut a: Vec<Value> = args.into_iter().collect();
            a.resize(n, Value::Nil);
            f(lua, &mut c.lock().expect("not poisoned"), &a)
        })
    };
    const F: &str = "encode_sparse_array";
    let sparse = setting(
        F,
        3,
        Box::new(|lua, c, a| {
            let convert = enum_option(lua, &a[0], F, BOOL_OPTIONS, c.sparse_convert as usize)?;
            c.sparse_convert = convert == 1;
            c.sparse_ratio = int_option(lua, &a[1], 2, F, 0, INT_MAX, c.sparse_ratio)?;
            c.sparse_safe = int_option(lua, &a[2], 3, F, 0, INT_MAX, c.sparse_safe)?;
            Ok(MultiValue::from_iter([
                enum_value(lua, BOOL_OPTIONS, convert)?,
                Value::Number(c.sparse_ratio as f64),
                Value::Number(c.sparse_safe as f64),
            ]))
        }),
    )?;
    t.set(F, sparse)?;
    // One integer each: (name, lowest, highest, the setting).
    type IntField = fn(&mut Config) -> &mut i64;
    let ints: [(&'static str, i64, IntField); 3] = [
        ("encode_max_depth", INT_MAX, |c| &mut c.encode_max_depth),
        ("decode_max_depth", INT_MAX, |c| &mut c.decode_max_depth),
        ("encode_number_precision", 14, |c| &mut c.precision),
    ];
    for (name, max, field) in ints {
        let f = setting(
            name,
            1,
            Box::new(move |lua, c, a| {
                let v = int_option(lua, &a[0], 1, name, 1, max, *field(c))?;
                *field(c) = v;
                Ok(MultiValue::from_iter([Value::Number(v as f64)]))
            }),
        )?;
        t.set(name, f)?;
    }
    // One option each: (name, its options, the setting as an option index).
    type EnumField = fn(&mut Config) -> &mut usize;
    let enums: [(&'static str, &'static [&'static str], EnumField); 3] = [
        ("encode_keep_buffer", BOOL_OPTIONS, |c| &mut c.keep_buffer),
        ("encode_invalid_numbers", INVALID_NUMBER_OPTIONS, |c| {
            &mut c.encode_invalid
        }),
        ("decode_invalid_numbers", BOOL_OPTIONS, |c| {
            &mut c.decode_invalid
        }),
    ];
    for (name, options, field) in enums {
        let f = setting(
            name,
            1,
            Box::new(move |lua, c, a| {
                let v = enum_option(lua, &a[0], name, options, *field(c))?;
                *field(c) = v;
                Ok(MultiValue::from_iter([enum_value(lua, options, v)?]))
            }),
        )?;
        t.set(name, f)?;
    }
    t.set("null", Value::NULL)?;
    t.set("_NAME", "cjson")?;
    t.set("_VERSION", "2.1.0")?;
    Ok(t)
}

fn rt(msg: String) -> mlua::Error {
    mlua::Error::runtime(msg)
}

/// `luaL_argerror`'s text.
fn bad_arg(n: usize, fname: &str, why: &str) -> mlua::Error {
    rt(format!("bad argument #{n} to '{fname}' ({why})"))
}

/// `luaL_typerror`'s reason.
fn expected(what: &str, got: &Value) -> String {
    format!("{what} expected, got {}", lua_type_name(got))
}

/// Lua's own name of a value's type (`lua_typename`).
fn lua_type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::LightUserData(_) | Value::UserData(_) | Value::Error(_) => "userdata",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

/// encode and decode take exactly one argument.
fn one_arg(args: &MultiValue, fname: &str) -> Result<Value> {
    if args.len() != 1 {
        return Err(bad_arg(1, fname, "expected 1 argument"));
    }
    Ok(args.front().cloned().unwrap_or(Value::Nil))
}

/// lua-cjson's `json_integer_option`: nil keeps `current`; a number (or
/// numeric string) in `min..=max` replaces it. Its range error names
/// argument #1 whichever argument it was, as lua-cjson's does.
fn int_option(
    lua: &Lua,
    v: &Value,
    n: usize,
    fname: &str,
    min: i64,
    max: i64,
    current: i64,
) -> Result<i64> {
    if v.is_nil() {
        return Ok(current);
    }
    let Some(x) = lua.coerce_number(v.clone())? else {
        return Err(bad_arg(n, fname, &expected("number", v)));
    };
    let x = x as i64;
    if x < min || x > max {
        return Err(bad_arg(
            1,
            fname,
            &format!("expected integer between {min} and {max}"),
        ));
    }
    Ok(x)
}

/// lua-cjson's `json_enum_option` for argument #1: nil keeps `current`, a
/// boolean picks off/on, a string names an option.
fn enum_option(
    lua: &Lua,
    v: &Value,
    fname: &str,
    options: &[&str],
    current: usize,
) -> Result<usize> {
    match v {
        Value::Nil => Ok(current),
        Value::Boolean(b) => Ok(*b as usize),
        _ => {
            let Some(s) = lua.coerce_string(v.clone())? else {
                return Err(bad_arg(1, fname, &expected("string", v)));
            };
            let s = s.to_string_lossy();
            options
                .iter()
                .position(|o| *o == s)
                .ok_or_else(|| bad_arg(1, fname, &format!("invalid option '{s}'")))
        }
    }
}

/// What a setting function returns for an enum: a boolean for off/on, the
/// option's name otherwise.
fn enum_value(lua: &Lua, options: &[&str], v: usize) -> Result<Value> {
    Ok(if v <= 1 {
        Value::Boolean(v == 1)
    } else {
        Value::String(lua.create_string(options[v])?)
    })
}

// ---- encoding -----------------------------------------------------------------

fn encode(lua: &Lua, cfg: &Config, v: &Value, out: &mut Vec<u8>, depth: i64) -> Result<()> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => number(cfg, *i as f64, out)?,
        Value::Number(n) => number(cfg, *n, out)?,
        Value::String(s) => string(&s.as_bytes(), out),
        Value::Table(t) => {
            let depth = depth + 1;
            if depth > cfg.encode_max_depth {
                return Err(rt(format!("Cannot serialise, excessive nesting ({depth})")));
            }
            // Pairs are walked, never collected: each Lua value held from
            // Rust takes a slot of a stack of ~8,000, and tables may be
            // far larger.
            match array_len(cfg, t)? {
                Some(max) if max > 0 => {
                    out.push(b'[');
                    for i in 1..=max {
                        if i > 1 {
                            out.push(b',');
                        }
                        encode(lua, cfg, &t.raw_get::<Value>(i)?, out, depth)?;
                    }
                    out.push(b']');
                }
                _ => {
                    out.push(b'{');
                    for (n, pair) in t.pairs::<Value, Value>().enumerate() {
                        let (k, v) = pair?;
                        if n > 0 {
                            out.push(b',');
                        }
                        match &k {
                            Value::String(s) => string(&s.as_bytes(), out),
                            Value::Number(_) | Value::Integer(_) => {
                                out.push(b'"');
                                number(cfg, lua.coerce_number(k.clone())?.unwrap_or(0.0), out)?;
                                out.push(b'"');
                            }
                            other => {
                                return Err(rt(format!(
                                    "Cannot serialise {}: table key must be a number or string",
                                    lua_type_name(other)
                                )));
                            }
                        }
                        out.push(b':');
                        encode(lua, cfg, &v, out, depth)?;
                    }
                    out.push(b'}');
                }
            }
        }
        other => {
            return Err(rt(format!(
                "Cannot serialise {}: type not supported",
                lua_type_name(other)
            )));
        }
    }
    Ok(())
}

fn number(cfg: &Config, n: f64, out: &mut Vec<u8>) -> Result<()> {
    match cfg.encode_invalid {
        0 if !n.is_finite() => {
            return Err(rt(
                "Cannot serialise number: must not be NaN or Inf".to_string()
            ));
        }
        // "-nan" on some platforms: lua-cjson writes it itself.
        1 if n.is_nan() => {
            out.extend_from_slice(b"nan");
            return Ok(());
        }
        2 if !n.is_finite() => {
            out.extend_from_slice(b"null");
            return Ok(());
        }
        _ => {}
    }
    out.extend_from_slice(resp::num::fmt_g(n, cfg.precision as usize).as_bytes());
    Ok(())
}

fn string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            c if c < 0x20 || c == 0x7f => {
                out.extend_from_slice(format!("\\u{c:04x}").as_bytes());
            }
            c => out.push(c),
        }
    }
    out.push(b'"');
}

/// lua-cjson's `lua_array_length`: `Some(max)` when every key is an
/// integer ≥ 1 (`Some(0)` for an empty table, written as an object), `None`
/// for an object; an excessively sparse array is an error, or an object
/// with `encode_sparse_array(true)`.
fn array_len(cfg: &Config, t: &Table) -> Result<Option<usize>> {
    let (mut max, mut items) = (0usize, 0i64);
    for pair in t.pairs::<Value, Value>() {
        let (k, _) = pair?;
        items += 1;
        let n = match k {
            Value::Number(n) => n,
            Value::Integer(i) => i as f64,
            _ => return Ok(None),
        };
        if n < 1.0 || n.fract() != 0.0 {
            return Ok(None);
        }
        max = max.max(n as usize);
    }
    if cfg.sparse_ratio > 0 && max as i64 > items * cfg.sparse_ratio && max as i64 > cfg.sparse_safe
    {
        if !cfg.sparse_convert {
            return Err(rt(
                "Cannot serialise table: excessively sparse array".to_string()
            ));
        }
        return Ok(None);
    }
    Ok(Some(max))
}
