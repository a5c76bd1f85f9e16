//! The `cmsgpack` library as Valkey embeds it (lua-cmsgpack 0.4):
//! `pack(...)`, `unpack(s)`, `unpack_one(s [, offset])`,
//! `unpack_limit(s, limit [, offset])`.
//!
//! Encoding follows lua-cmsgpack's choices: integral numbers in the
//! smallest int format, other numbers as float32 when exact, else
//! float64; strings as str (str8 from 32 bytes); a table whose keys are
//! exactly 1..n is an array, any other a map (in `next` order); nesting
//! past 16 levels, functions and userdata encode as nil.

use mlua::{Lua, MultiValue, Result, Table, Value};

const MAX_NESTING: usize = 16;
/// Deepest nesting decoded (hostile input must not exhaust the stack).
const MAX_DECODE_DEPTH: usize = 200;

/// The `cmsgpack` table.
pub fn open(lua: &Lua) -> Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lua.create_function(|lua, a: MultiValue| {
            if a.is_empty() {
                return Err(mlua::Error::runtime("MessagePack pack needs input."));
            }
            let mut out = Vec::new();
            for v in a.iter() {
                encode(v, &mut out, 0)?;
            }
            lua.create_string(out)
        })?,
    )?;
    t.set(
        "unpack",
        lua.create_function(|lua, s: mlua::LuaString| {
            let b = s.as_bytes();
            let (_, vals) = unpack(lua, &b, 0, 0)?;
            Ok(MultiValue::from_vec(vals))
        })?,
    )?;
    t.set(
        "unpack_one",
        lua.create_function(|lua, (s, offset): (mlua::LuaString, Option<i64>)| {
            let b = s.as_bytes();
            let (next, mut vals) = unpack(lua, &b, 1, offset.unwrap_or(0))?;
            vals.insert(0, Value::Number(next as f64));
            Ok(MultiValue::from_vec(vals))
        })?,
    )?;
    t.set(
        "unpack_limit",
        lua.create_function(
            |lua, (s, limit, offset): (mlua::LuaString, i64, Option<i64>)| {
                let b = s.as_bytes();
                let (next, mut vals) = unpack(lua, &b, limit.max(0), offset.unwrap_or(0))?;
                vals.insert(0, Value::Number(next as f64));
                Ok(MultiValue::from_vec(vals))
            },
        )?,
    )?;
    t.set("_NAME", "cmsgpack")?;
    t.set("_VERSION", "lua-cmsgpack 0.4.0")?;
    Ok(t)
}

fn encode_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn encode_number(n: f64, out: &mut Vec<u8>) {
    // lua-cmsgpack's IS_INT64_EQUIVALENT: finite and integral.
    if n.is_finite() && n == (n as i64) as f64 {
        return encode_int(n as i64, out);
    }
    let f = n as f32;
    if f64::from(f) == n {
        out.push(0xca);
        out.extend_from_slice(&f.to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn header(out: &mut Vec<u8>, n: usize, fix: u8, fix_max: usize, b16: u8, b32: u8) {
    if n <= fix_max {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(b16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn encode(v: &Value, out: &mut Vec<u8>, level: usize) -> Result<()> {
    match v {
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => encode_int(*i, out),
        Value::Number(n) => encode_number(*n, out),
        Value::String(s) => {
            let b = s.as_bytes();
            let n = b.len();
            if n < 32 {
                out.push(0xa0 | n as u8);
            } else if n <= 0xff {
                out.extend_from_slice(&[0xd9, n as u8]);
            } else if n <= 0xffff {
                out.push(0xda);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            } else {
                out.push(0xdb);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            }
            out.extend_from_slice(&b);
        }
        Value::Table(t) if level < MAX_NESTING => {
            // Pairs are walked (twice), never collected: each Lua value
            // held from Rust takes a slot of a stack of ~8,000.
            let (mut max, mut count, mut all_positive) = (0f64, 0usize, true);
            for pair in t.pairs::<Value, Value>() {
                let (k, _) = pair?;
                count += 1;
                match k {
                    Value::Number(n) if n > 0.0 && n.fract() == 0.0 => max = max.max(n),
                    Value::Integer(i) if i > 0 => max = max.max(i as f64),
                    _ => all_positive = false,
                }
            }
            let is_array = all_positive && max as usize == count;
            if is_array {
                let n = t.raw_len();
                header(out, n, 0x90, 15, 0xdc, 0xdd);
                for i in 1..=n {
                    encode(&t.raw_get::<Value>(i)?, out, level + 1)?;
                }
            } else {
                header(out, count, 0x80, 15, 0xde, 0xdf);
                for pair in t.pairs::<Value, Value>() {
                    let (k, v) = pair?;
                    encode(&k, out, level + 1)?;
                    encode(&v, out, level + 1)?;
                }
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

enum Bad {
    Missing,
    Format,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> std::result::Result<&[u8], Bad> {
        let end = self.i.checked_add(n).ok_or(Bad::Missing)?;
        let s = self.b.get(self.i..end).ok_or(Bad::Missing)?;
        self.i = end;
        Ok(s)
    }
    fn be(&mut self, n: usize) -> std::result::Result<u64, Bad> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &x| (acc << 8) | u64::from(x)))
    }
    fn value(&mut self, lua: &Lua, depth: usize) -> std::result::Result<Value, Bad> {
        if depth > MAX_DECODE_DEPTH {
            return Err(Bad::Format);
        }
        let lerr = |_| Bad::Format;
        let t = self.take(1)?[0];
        let str_of = |r: &mut Self, n: usize| -> std::result::Result<Value, Bad> {
            let s = r.take(n)?;
            lua.create_string(s).map(Value::String).map_err(lerr)
        };
        Ok(match t {
            0x00..=0x7f => Value::Number(f64::from(t)),
            0xe0..=0xff => Value::Number(f64::from(t as i8)),
            0xc0 => Value::Nil,
            0xc2 => Value::Boolean(false),
            0xc3 => Value::Boolean(true),
            0xcc => Value::Number(self.be(1)? as f64),
            0xcd => Value::Number(self.be(2)? as f64),
            0xce => Value::Number(self.be(4)? as f64),
            0xcf => Value::Number(self.be(8)? as f64),
            0xd0 => Value::Number(f64::from(self.be(1)? as u8 as i8)),
            0xd1 => Value::Number(f64::from(self.be(2)? as u16 as i16)),
            0xd2 => Value::Number(f64::from(self.be(4)? as u32 as i32)),
            0xd3 => Value::Number(self.be(8)? as i64 as f64),
            0xca => Value::Number(f64::from(f32::from_bits(self.be(4)? as u32))),
            0xcb => Value::Number(f64::from_bits(self.be(8)?)),
            0xa0..=0xbf => str_of(self, usize::from(t & 0x1f))?,
            0xd9 | 0xc4 => {
                let n = self.be(1)? as usize;
                str_of(self, n)?
            }
            0xda | 0xc5 => {
                let n = self.be(2)? as usize;
                str_of(self, n)?
            }
            0xdb | 0xc6 => {
                let n = self.be(4)? as usize;
                str_of(self, n)?
            }
            0x90..=0x9f | 0xdc | 0xdd => {
                let n = match t {
                    0xdc => self.be(2)? as usize,
                    0xdd => self.be(4)? as usize,
                    _ => usize::from(t & 0x0f),
                };
                let tab = lua.create_table().map_err(lerr)?;
                for i in 1..=n {
                    let v = self.value(lua, depth + 1)?;
                    tab.raw_set(i, v).map_err(lerr)?;
                }
                Value::Table(tab)
            }
            0x80..=0x8f | 0xde | 0xdf => {
                let n = match t {
                    0xde => self.be(2)? as usize,
                    0xdf => self.be(4)? as usize,
                    _ => usize::from(t & 0x0f),
                };
                let tab = lua.create_table().map_err(lerr)?;
                for _ in 0..n {
                    let k = self.value(lua, depth + 1)?;
                    let v = self.value(lua, depth + 1)?;
                    if !matches!(k, Value::Nil) {
                        tab.raw_set(k, v).map_err(lerr)?;
                    }
                }
                Value::Table(tab)
            }
            _ => return Err(Bad::Format),
        })
    }
}

/// Decode up to `limit` objects (0: all) from `offset`: the offset after
/// them (-1 at the end of the input) and the objects.
fn unpack(lua: &Lua, b: &[u8], limit: i64, offset: i64) -> Result<(i64, Vec<Value>)> {
    if offset < 0 || offset as usize > b.len() {
        return Err(mlua::Error::runtime(format!(
            "Start offset {offset} greater than input length {}.",
            b.len()
        )));
    }
    let mut r = Reader {
        b,
        i: offset as usize,
    };
    let mut vals = Vec::new();
    while r.i < b.len() && (limit == 0 || (vals.len() as i64) < limit) {
        match r.value(lua, 0) {
            Ok(v) => vals.push(v),
            Err(Bad::Missing) => return Err(mlua::Error::runtime("Missing bytes in input.")),
            Err(Bad::Format) => return Err(mlua::Error::runtime("Bad data format in input.")),
        }
    }
    let next = if r.i >= b.len() { -1 } else { r.i as i64 };
    Ok((next, vals))
}
