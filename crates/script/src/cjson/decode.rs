//! cjson.decode: lua-cjson 2.1's tokenizer and parser, with its error
//! texts and 1-based character positions (see the parent module).

use super::{Config, rt};
use mlua::{Lua, Result, Value};

pub(super) fn decode(lua: &Lua, cfg: &Config, s: &[u8]) -> Result<Value> {
    if s.len() >= 2 && (s[0] == 0 || s[1] == 0) {
        return Err(rt(
            "JSON parser does not support UTF-16 or UTF-32".to_string()
        ));
    }
    let mut p = Parser {
        s,
        i: 0,
        depth: 0,
        cfg,
    };
    let first = p.next_token();
    let v = p.value(lua, first)?;
    let last = p.next_token();
    if !matches!(last.tok, Tok::End) {
        return Err(p.expected("the end", &last));
    }
    Ok(v)
}

enum Tok {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    Str(Vec<u8>),
    Num(f64),
    Bool(bool),
    Null,
    Colon,
    Comma,
    End,
    /// A token that could not be read, and why.
    Error(&'static str),
}

struct Token {
    tok: Tok,
    /// 0-based position (of the token, or where reading it failed).
    at: usize,
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    depth: i64,
    cfg: &'a Config,
}

impl Parser<'_> {
    /// The byte at `i`: a NUL past the end, as the C string lua-cjson reads.
    fn at(&self, i: usize) -> u8 {
        self.s.get(i).copied().unwrap_or(0)
    }

    fn expected(&self, what: &str, t: &Token) -> mlua::Error {
        let found = match &t.tok {
            Tok::ObjBegin => "T_OBJ_BEGIN",
            Tok::ObjEnd => "T_OBJ_END",
            Tok::ArrBegin => "T_ARR_BEGIN",
            Tok::ArrEnd => "T_ARR_END",
            Tok::Str(_) => "T_STRING",
            Tok::Num(_) => "T_NUMBER",
            Tok::Bool(_) => "T_BOOLEAN",
            Tok::Null => "T_NULL",
            Tok::Colon => "T_COLON",
            Tok::Comma => "T_COMMA",
            Tok::End => "T_END",
            Tok::Error(why) => why,
        };
        rt(format!(
            "Expected {what} but found {found} at character {}",
            t.at + 1
        ))
    }

    /// lua-cjson's `json_next_token`.
    fn next_token(&mut self) -> Token {
        while matches!(self.at(self.i), b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
        let at = self.i;
        let single = |t: Tok| Token { tok: t, at };
        let c = self.at(at);
        let tok = match c {
            0 => return single(Tok::End),
            b'{' => Tok::ObjBegin,
            b'}' => Tok::ObjEnd,
            b'[' => Tok::ArrBegin,
            b']' => Tok::ArrEnd,
            b':' => Tok::Colon,
            b',' => Tok::Comma,
            b'"' => return self.string_token(),
            b'-' | b'0'..=b'9' => {
                if self.cfg.decode_invalid == 0 && self.is_invalid_number() {
                    return single(Tok::Error("invalid number"));
                }
                return self.number_token();
            }
            b'f' | b'i' | b'I' | b'n' | b'N' | b't' | b'+' => {
                let rest = &self.s[at..];
                for (word, t) in [
                    (&b"true"[..], Tok::Bool(true)),
                    (b"false", Tok::Bool(false)),
                    (b"null", Tok::Null),
                ] {
                    if rest.starts_with(word) {
                        self.i += word.len();
                        return single(t);
                    }
                }
                if self.cfg.decode_invalid != 0 && self.is_invalid_number() {
                    return self.number_token();
                }
                return single(Tok::Error("invalid token"));
            }
            _ => return single(Tok::Error("invalid token")),
        };
        self.i += 1;
        single(tok)
    }

    /// lua-cjson's `json_is_invalid_number`: a number JSON does not allow
    /// (a `+`, hex, leading zeros, inf, nan).
    fn is_invalid_number(&self) -> bool {
        let mut p = self.i;
        if self.at(p) == b'+' {
            return true;
        }
        if self.at(p) == b'-' {
            p += 1;
        }
        let c = self.at(p);
        if c == b'0' {
            let c2 = self.at(p + 1);
            return c2 | 0x20 == b'x' || c2.is_ascii_digit();
        }
        if c <= b'9' {
            return false;
        }
        let rest = &self.s[p.min(self.s.len())..];
        let starts = |w: &[u8]| rest.len() >= 3 && rest[..3].eq_ignore_ascii_case(w);
        starts(b"inf") || starts(b"nan")
    }

    fn number_token(&mut self) -> Token {
        let at = self.i;
        match strtod(&self.s[at..]) {
            Some((n, len)) => {
                self.i += len;
                Token {
                    tok: Tok::Num(n),
                    at,
                }
            }
            None => Token {
                tok: Tok::Error("invalid number"),
                at,
            },
        }
    }

    /// lua-cjson's `json_next_string_token`, on the opening quote.
    fn string_token(&mut self) -> Token {
        let start = self.i;
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let c = self.at(self.i);
            let fail = |why, at| Token {
                tok: Tok::Error(why),
                at,
            };
            match c {
                b'"' => break,
                0 => return fail("unexpected end of string", self.i),
                b'\\' => {
                    let e = match self.at(self.i + 1) {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => match self.unicode_escape(&mut out) {
                            Some(len) => {
                                self.i += len;
                                continue;
                            }
                            None => return fail("invalid unicode escape code", self.i),
                        },
                        _ => return fail("invalid escape code", self.i),
                    };
                    out.push(e);
                    self.i += 2;
                }
                c => {
                    out.push(c);
                    self.i += 1;
                }
            }
        }
        self.i += 1;
        Token {
            tok: Tok::Str(out),
            at: start,
        }
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let mut v = 0;
        for k in 0..4 {
            v = v << 4 | char::from(self.at(at + k)).to_digit(16)?;
        }
        Some(v)
    }

    /// `\uXXXX` (or a surrogate pair of them) at `i`, appended as UTF-8;
    /// the escape's length, or `None` for a bad one.
    fn unicode_escape(&self, out: &mut Vec<u8>) -> Option<usize> {
        let mut cp = self.hex4(self.i + 2)?;
        let mut len = 6;
        if cp & 0xF800 == 0xD800 {
            // A low surrogate first, or a high one not followed by a low.
            if cp & 0x400 != 0 || self.at(self.i + 6) != b'\\' || self.at(self.i + 7) != b'u' {
                return None;
            }
            let low = self.hex4(self.i + 8)?;
            if low & 0xFC00 != 0xDC00 {
                return None;
            }
            cp = (((cp & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            len = 12;
        }
        let ch = char::from_u32(cp)?;
        let mut buf = [0u8; 4];
        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
        Some(len)
    }

    /// A value starting with token `t` (lua-cjson's `json_process_value`).
    fn value(&mut self, lua: &Lua, t: Token) -> Result<Value> {
        match t.tok {
            Tok::Str(s) => Ok(Value::String(lua.create_string(s)?)),
            Tok::Num(n) => Ok(Value::Number(n)),
            Tok::Bool(b) => Ok(Value::Boolean(b)),
            Tok::Null => Ok(Value::NULL),
            Tok::ObjBegin => self.object(lua),
            Tok::ArrBegin => self.array(lua),
            _ => Err(self.expected("value", &t)),
        }
    }

    fn descend(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > self.cfg.decode_max_depth {
            return Err(rt(format!(
                "Found too many nested data structures ({}) at character {}",
                self.depth, self.i
            )));
        }
        Ok(())
    }

    fn object(&mut self, lua: &Lua) -> Result<Value> {
        self.descend()?;
        let t = lua.create_table()?;
        let mut tok = self.next_token();
        if matches!(tok.tok, Tok::ObjEnd) {
            self.depth -= 1;
            return Ok(Value::Table(t));
        }
        loop {
            let Tok::Str(k) = tok.tok else {
                return Err(self.expected("object key string", &tok));
            };
            let colon = self.next_token();
            if !matches!(colon.tok, Tok::Colon) {
                return Err(self.expected("colon", &colon));
            }
            let first = self.next_token();
            let v = self.value(lua, first)?;
            t.raw_set(lua.create_string(k)?, v)?;
            let next = self.next_token();
            match next.tok {
                Tok::ObjEnd => {
                    self.depth -= 1;
                    return Ok(Value::Table(t));
                }
                Tok::Comma => tok = self.next_token(),
                _ => return Err(self.expected("comma or object end", &next)),
            }
        }
    }

    fn array(&mut self, lua: &Lua) -> Result<Value> {
        self.descend()?;
        let t = lua.create_table()?;
        let mut tok = self.next_token();
        if matches!(tok.tok, Tok::ArrEnd) {
            self.depth -= 1;
            return Ok(Value::Table(t));
        }
        for n in 1.. {
            let v = self.value(lua, tok)?;
            t.raw_seti(n, v)?;
            let next = self.next_token();
            match next.tok {
                Tok::ArrEnd => break,
                Tok::Comma => tok = self.next_token(),
                _ => return Err(self.expected("comma or array end", &next)),
            }
        }
        self.depth -= 1;
        Ok(Value::Table(t))
    }
}

/// C's `strtod` in the C locale: the number at the start of `s` and its
/// length, `None` when there is none. Decimal (correctly rounded), hex
/// (`0x1.8p3`), `inf`/`infinity` and `nan`/`nan(...)`, each with an
/// optional sign.
fn strtod(s: &[u8]) -> Option<(f64, usize)> {
    let mut i = 0;
    let neg = match s.first() {
        Some(b'-') => {
            i = 1;
            true
        }
        Some(b'+') => {
            i = 1;
            false
        }
        _ => false,
    };
    let sign = |x: f64| if neg { -x } else { x };
    let rest = &s[i..];
    let word = |w: &[u8]| rest.len() >= w.len() && rest[..w.len()].eq_ignore_ascii_case(w);
    if word(b"infinity") {
        return Some((sign(f64::INFINITY), i + 8));
    }
    if word(b"inf") {
        return Some((sign(f64::INFINITY), i + 3));
    }
    if word(b"nan") {
        let mut len = i + 3;
        // nan(n-char-sequence)
        if s.get(len) == Some(&b'(')
            && let Some(close) = s[len + 1..]
                .iter()
                .position(|&c| !(c.is_ascii_alphanumeric() || c == b'_'))
            && s[len + 1 + close] == b')'
        {
            len += close + 2;
        }
        return Some((sign(f64::NAN), len));
    }
    if rest.len() > 2 && rest[0] == b'0' && rest[1] | 0x20 == b'x' {
        if let Some((v, len)) = hex_float(&rest[2..]) {
            return Some((sign(v), i + 2 + len));
        }
        // "0x" with no hex digit: the "0" alone.
        return Some((sign(0.0), i + 1));
    }
    let digits = |from: usize| s[from..].iter().take_while(|c| c.is_ascii_digit()).count();
    let mut j = i;
    let int = digits(j);
    j += int;
    let mut frac = 0;
    if s.get(j) == Some(&b'.') {
        frac = digits(j + 1);
        if int + frac > 0 {
            j += 1 + frac;
        }
    }
    if int + frac == 0 {
        return None;
    }
    if matches!(s.get(j), Some(b'e' | b'E')) {
        let mut k = j + 1;
        if matches!(s.get(k), Some(b'+' | b'-')) {
            k += 1;
        }
        let exp = digits(k);
        if exp > 0 {
            j = k + exp;
        }
    }
    let text = std::str::from_utf8(&s[i..j]).ok()?;
    Some((sign(text.parse().ok()?), j))
}

/// The digits after `0x`: `h[.h][p[+-]d]`.
fn hex_float(s: &[u8]) -> Option<(f64, usize)> {
    let mut v = 0f64;
    let mut i = 0;
    let mut any = false;
    let mut scale = 0i32;
    while let Some(d) = s.get(i).and_then(|&c| char::from(c).to_digit(16)) {
        v = v * 16.0 + f64::from(d);
        any = true;
        i += 1;
    }
    if s.get(i) == Some(&b'.') {
        let mut k = i + 1;
        while let Some(d) = s.get(k).and_then(|&c| char::from(c).to_digit(16)) {
            v = v * 16.0 + f64::from(d);
            scale -= 4;
            any = true;
            k += 1;
        }
        if any {
            i = k;
        }
    }
    if !any {
        return None;
    }
    if matches!(s.get(i), Some(b'p' | b'P')) {
        let mut k = i + 1;
        let neg = match s.get(k) {
            Some(b'-') => {
                k += 1;
                true
            }
            Some(b'+') => {
                k += 1;
                false
            }
            _ => false,
        };
        let n = s[k..].iter().take_while(|c| c.is_ascii_digit()).count();
        if n > 0 {
            let e: i32 = std::str::from_utf8(&s[k..k + n])
                .ok()?
                .parse()
                .unwrap_or(i32::MAX / 2);
            scale = scale.saturating_add(if neg { -e } else { e });
            i = k + n;
        }
    }
    Some((v * 2f64.powi(scale), i))
}

#[cfg(test)]
mod tests {
    use super::strtod;

    #[test]
    fn strtod_reads_as_c_does() {
        type Case = (&'static [u8], Option<(f64, usize)>);
        let cases: &[Case] = &[
            (b"1", Some((1.0, 1))),
            (b"-5e3,", Some((-5000.0, 4))),
            (b"0.3e-3]", Some((0.0003, 6))),
            (b"1.", Some((1.0, 2))),
            (b"1e", Some((1.0, 1))),
            (b"1e+", Some((1.0, 1))),
            (b"0x10", Some((16.0, 4))),
            (b"0x1.8p1", Some((3.0, 7))),
            (b"0xg", Some((0.0, 1))),
            (b"+1", Some((1.0, 2))),
            (b"-Infinity", Some((f64::NEG_INFINITY, 9))),
            (b"inf", Some((f64::INFINITY, 3))),
            (b"01", Some((1.0, 2))),
            (b"-", None),
            (b"-x", None),
            (b".", None),
        ];
        for &(s, want) in cases {
            assert_eq!(strtod(s), want, "{}", String::from_utf8_lossy(s));
        }
        let (n, len) = strtod(b"nan(123)x").unwrap();
        assert!(n.is_nan());
        assert_eq!(len, 8);
    }
}
