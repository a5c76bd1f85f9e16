//! The `cjson` library as Valkey embeds it (lua-cjson 2.1 with its default
//! settings): `cjson.encode`, `cjson.decode`, `cjson.null`. The other
//! settings functions of lua-cjson are not provided.

use mlua::{Lua, Result, Table, Value};

const MAX_DEPTH: usize = 1000;

/// The `cjson` table.
pub fn open(lua: &Lua) -> Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "encode",
        lua.create_function(|lua, v: Value| {
            let mut out = Vec::new();
            encode(lua, &v, &mut out, 0)?;
            lua.create_string(out)
        })?,
    )?;
    t.set(
        "decode",
        lua.create_function(|lua, s: mlua::LuaString| {
            let b = s.as_bytes();
            let mut p = Parser { s: &b, i: 0 };
            p.ws();
            let v = p.value(lua, 0)?;
            p.ws();
            if p.i < b.len() {
                return Err(p.err("the end"));
            }
            Ok(v)
        })?,
    )?;
    t.set("null", Value::NULL)?;
    t.set("_NAME", "cjson")?;
    t.set("_VERSION", "2.1.0")?;
    Ok(t)
}

fn rt(msg: String) -> mlua::Error {
    mlua::Error::runtime(msg)
}

fn number(lua: &Lua, n: f64, out: &mut Vec<u8>) -> Result<()> {
    if !n.is_finite() {
        return Err(rt(
            "Cannot serialise number: must not be NaN or Inf".to_string()
        ));
    }
    // Lua's own "%.14g", which lua-cjson uses too.
    match lua.coerce_string(Value::Number(n))? {
        Some(s) => out.extend_from_slice(&s.as_bytes()),
        None => out.push(b'0'),
    }
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

fn encode(lua: &Lua, v: &Value, out: &mut Vec<u8>, depth: usize) -> Result<()> {
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => number(lua, *i as f64, out)?,
        Value::Number(n) => number(lua, *n, out)?,
        Value::String(s) => string(&s.as_bytes(), out),
        Value::Table(t) => {
            if depth + 1 > MAX_DEPTH {
                return Err(rt(format!(
                    "Cannot serialise, excessive nesting ({})",
                    depth + 1
                )));
            }
            let pairs: Vec<(Value, Value)> = t.pairs::<Value, Value>().collect::<Result<_>>()?;
            match array_len(&pairs)? {
                Some(max) => {
                    out.push(b'[');
                    for i in 1..=max {
                        if i > 1 {
                            out.push(b',');
                        }
                        encode(lua, &t.raw_get::<Value>(i)?, out, depth + 1)?;
                    }
                    out.push(b']');
                }
                None => {
                    out.push(b'{');
                    for (n, (k, v)) in pairs.iter().enumerate() {
                        if n > 0 {
                            out.push(b',');
                        }
                        match k {
                            Value::String(s) => string(&s.as_bytes(), out),
                            Value::Number(_) | Value::Integer(_) => {
                                let s =
                                    lua.coerce_string(k.clone())?.map(|s| s.as_bytes().to_vec());
                                string(&s.unwrap_or_default(), out);
                            }
                            _ => {
                                return Err(rt(
                                    "Cannot serialise table: table key must be a number or string"
                                        .to_string(),
                                ));
                            }
                        }
                        out.push(b':');
                        encode(lua, v, out, depth + 1)?;
                    }
                    out.push(b'}');
                }
            }
        }
        other => {
            return Err(rt(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            )));
        }
    }
    Ok(())
}

/// lua-cjson's `lua_array_length`: `Some(max)` when every key is a
/// positive integer (and the array is not excessively sparse), `None` for
/// an object (an empty table is an object).
fn array_len(pairs: &[(Value, Value)]) -> Result<Option<usize>> {
    if pairs.is_empty() {
        return Ok(None);
    }
    let mut max = 0usize;
    for (k, _) in pairs {
        let n = match k {
            Value::Number(n) => *n,
            Value::Integer(i) => *i as f64,
            _ => return Ok(None),
        };
        if n < 1.0 || n.fract() != 0.0 {
            return Ok(None);
        }
        max = max.max(n as usize);
    }
    if max > 10 && max > pairs.len() * 2 {
        return Err(rt(
            "Cannot serialise table: excessively sparse array".to_string()
        ));
    }
    Ok(Some(max))
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn err(&self, expected: &str) -> mlua::Error {
        // lua-cjson names the token it found.
        let found = match self.s.get(self.i) {
            None => "T_END",
            Some(b'{') => "T_OBJ_BEGIN",
            Some(b'}') => "T_OBJ_END",
            Some(b'[') => "T_ARR_BEGIN",
            Some(b']') => "T_ARR_END",
            Some(b'"') => "T_STRING",
            Some(b'-' | b'0'..=b'9') => "T_NUMBER",
            Some(b't' | b'f') => "T_BOOLEAN",
            Some(b'n') => "T_NULL",
            Some(b':') => "T_COLON",
            Some(b',') => "T_COMMA",
            Some(_) => "invalid token",
        };
        rt(format!(
            "Expected {expected} but found {found} at character {}",
            self.i + 1
        ))
    }
    fn ws(&mut self) {
        while matches!(self.s.get(self.i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }
    fn lit(&mut self, word: &[u8]) -> bool {
        if self.s[self.i..].starts_with(word) {
            self.i += word.len();
            true
        } else {
            false
        }
    }
    fn value(&mut self, lua: &Lua, depth: usize) -> Result<Value> {
        match self.s.get(self.i) {
            Some(b'{') | Some(b'[') if depth + 1 > MAX_DEPTH => Err(rt(format!(
                "Found too many nested data structures ({}) at character {}",
                depth + 1,
                self.i + 1
            ))),
            Some(b'{') => {
                self.i += 1;
                let t = lua.create_table()?;
                self.ws();
                if self.s.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    return Ok(Value::Table(t));
                }
                loop {
                    self.ws();
                    if self.s.get(self.i) != Some(&b'"') {
                        return Err(self.err("object key string"));
                    }
                    let k = self.string()?;
                    self.ws();
                    if self.s.get(self.i) != Some(&b':') {
                        return Err(self.err("colon"));
                    }
                    self.i += 1;
                    self.ws();
                    let v = self.value(lua, depth + 1)?;
                    t.raw_set(lua.create_string(k)?, v)?;
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Value::Table(t));
                        }
                        _ => return Err(self.err("comma or object end")),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let t = lua.create_table()?;
                self.ws();
                if self.s.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Ok(Value::Table(t));
                }
                let mut n = 0;
                loop {
                    self.ws();
                    let v = self.value(lua, depth + 1)?;
                    n += 1;
                    t.raw_seti(n, v)?;
                    self.ws();
                    match self.s.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Value::Table(t));
                        }
                        _ => return Err(self.err("comma or array end")),
                    }
                }
            }
            Some(b'"') => Ok(Value::String(lua.create_string(self.string()?)?)),
            Some(b't') if self.lit(b"true") => Ok(Value::Boolean(true)),
            Some(b'f') if self.lit(b"false") => Ok(Value::Boolean(false)),
            Some(b'n') if self.lit(b"null") => Ok(Value::NULL),
            Some(b'-' | b'0'..=b'9') => {
                let start = self.i;
                while matches!(
                    self.s.get(self.i),
                    Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                ) {
                    self.i += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
                match text.parse::<f64>() {
                    Ok(n) => Ok(Value::Number(n)),
                    Err(_) => {
                        self.i = start;
                        Err(self.err("value"))
                    }
                }
            }
            _ => Err(self.err("value")),
        }
    }
    /// A string token at `i` (on its opening quote), unescaped.
    fn string(&mut self) -> Result<Vec<u8>> {
        let start = self.i;
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.i) else {
                self.i = start;
                return Err(self.err("value"));
            };
            self.i += 1;
            match c {
                b'"' => return Ok(out),
                b'\\' => {
                    let Some(&e) = self.s.get(self.i) else {
                        return Err(self.err("value"));
                    };
                    self.i += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(0x08),
                        b'f' => out.push(0x0c),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let mut cp = self.hex4()?;
                            if (0xD800..0xDC00).contains(&cp)
                                && self.s[self.i..].starts_with(b"\\u")
                            {
                                self.i += 2;
                                let lo = self.hex4()?;
                                if (0xDC00..0xE000).contains(&lo) {
                                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                                }
                            }
                            let ch = char::from_u32(cp).unwrap_or('\u{FFFD}');
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => {
                            self.i -= 2;
                            return Err(self.err("value"));
                        }
                    }
                }
                c => out.push(c),
            }
        }
    }
    fn hex4(&mut self) -> Result<u32> {
        let h = self.s.get(self.i..self.i + 4).unwrap_or(b"");
        let v = std::str::from_utf8(h)
            .ok()
            .filter(|s| s.len() == 4)
            .and_then(|s| u32::from_str_radix(s, 16).ok());
        match v {
            Some(v) => {
                self.i += 4;
                Ok(v)
            }
            None => Err(self.err("value")),
        }
    }
}
