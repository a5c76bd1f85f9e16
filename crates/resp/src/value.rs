//! A parser for whole RESP2/RESP3 replies, for the client side: the load
//! generator checks replies with it and the tests decode with it.
//!
//! Handles every RESP3 type (`+ - : $ * _ , # ! = ( % ~ > |`) but not
//! streamed strings or aggregates (`$?`, `*?`): those are errors. Unlike
//! the request parser it is strict: every line must end in CRLF, and
//! nesting deeper than [`MAX_DEPTH`] is an error (so hostile input cannot
//! exhaust the stack).

use crate::request::find_byte;

/// One decoded RESP value (owned).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Int(i64),
    Bulk(Vec<u8>),
    /// RESP2 `$-1`/`*-1` and RESP3 `_`.
    Null,
    Array(Vec<Value>),
    Map(Vec<(Value, Value)>),
    Set(Vec<Value>),
    Push(Vec<Value>),
    Double(f64),
    Bool(bool),
    Verbatim {
        format: [u8; 3],
        text: Vec<u8>,
    },
    BigNumber(Vec<u8>),
    /// RESP3 attribute `|` followed by the value it annotates.
    Attribute {
        attrs: Vec<(Value, Value)>,
        value: Box<Value>,
    },
}

/// Deepest nesting [`parse_value`] and [`value_len`] accept.
pub const MAX_DEPTH: usize = 512;

/// Parse one value from the start of `buf`. `Ok(None)` means more bytes
/// are needed; `Ok(Some((value, consumed)))` otherwise.
pub fn parse_value(buf: &[u8]) -> Result<Option<(Value, usize)>, String> {
    let mut pos = 0;
    match parse_at(buf, &mut pos, 0)? {
        Some(v) => Ok(Some((v, pos))),
        None => Ok(None),
    }
}

/// Skip one value without building it: the length it occupies, or `None`
/// if incomplete. The load generator's hot path uses this plus a peek at the
/// first byte, so checking a reply costs no allocation.
pub fn value_len(buf: &[u8]) -> Result<Option<usize>, String> {
    // Values still to skip at the current level, and at each open one:
    // the first 16 levels on the stack (so ordinary replies allocate
    // nothing and a scalar costs no big memset), deeper ones in a Vec.
    let mut pending: u64 = 1;
    let mut pos = 0;
    let mut near = [0u64; 16];
    let mut far: Vec<u64> = Vec::new();
    let mut depth = 0usize;
    loop {
        let Some(h) = header(buf, pos)? else {
            return Ok(None);
        };
        pos = h.next;
        let children = match h.kind {
            Kind::Leaf => 0,
            Kind::Payload(len) => {
                let end = pos.checked_add(len).and_then(|e| e.checked_add(2));
                match end {
                    Some(e) if e <= buf.len() => {
                        check_crlf(buf, pos + len)?;
                        if h.ty == b'=' {
                            check_verbatim(&buf[pos..pos + len])?;
                        }
                        pos = e;
                    }
                    _ => return Ok(None),
                }
                0
            }
            Kind::Aggregate(n) => n,
        };
        pending -= 1;
        if children > 0 {
            if depth == MAX_DEPTH {
                return Err("nesting too deep".into());
            }
            match near.get_mut(depth) {
                Some(slot) => *slot = pending,
                None => far.push(pending),
            }
            depth += 1;
            pending = children;
        }
        while pending == 0 {
            if depth == 0 {
                return Ok(Some(pos));
            }
            depth -= 1;
            pending = match near.get(depth) {
                Some(&p) => p,
                None => far.pop().unwrap_or(0),
            };
        }
    }
}

enum Kind {
    /// Complete after its line.
    Leaf,
    /// A payload of this many bytes plus CRLF follows the line.
    Payload(usize),
    /// This many child values follow (maps and attributes counted twice,
    /// attributes plus the annotated value).
    Aggregate(u64),
}

struct Header<'a> {
    ty: u8,
    line: &'a [u8],
    kind: Kind,
    next: usize,
}

/// Parse the type line at `pos`; `Ok(None)` if incomplete.
fn header(buf: &[u8], pos: usize) -> Result<Option<Header<'_>>, String> {
    let Some(&ty) = buf.get(pos) else {
        return Ok(None);
    };
    let Some(cr) = find_byte(buf, pos + 1, b'\r') else {
        return Ok(None);
    };
    if cr + 1 >= buf.len() {
        return Ok(None);
    }
    if buf[cr + 1] != b'\n' {
        return Err(format!("expected LF after CR at {}", cr + 1));
    }
    let line = &buf[pos + 1..cr];
    let next = cr + 2;
    let count = |line: &[u8]| -> Result<Option<u64>, String> {
        if line == b"-1" {
            return Ok(None);
        }
        if line == b"?" {
            return Err("streamed RESP3 types are not supported".into());
        }
        match parse_int(line) {
            Some(n) if n >= 0 => Ok(Some(n as u64)),
            _ => Err(format!("bad length {:?}", String::from_utf8_lossy(line))),
        }
    };
    let kind = match ty {
        b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => Kind::Leaf,
        b'$' | b'!' | b'=' => match count(line)? {
            None if ty == b'$' => Kind::Leaf,
            None => return Err("negative length".into()),
            Some(n) => Kind::Payload(usize::try_from(n).map_err(|_| "length too big")?),
        },
        b'*' | b'~' | b'>' => match count(line)? {
            None if ty == b'*' => Kind::Leaf,
            None => return Err("negative length".into()),
            Some(n) => Kind::Aggregate(n),
        },
        b'%' => match count(line)? {
            None => return Err("negative length".into()),
            Some(n) => Kind::Aggregate(n.checked_mul(2).ok_or("length too big")?),
        },
        b'|' => match count(line)? {
            None => return Err("negative length".into()),
            Some(n) => Kind::Aggregate(
                n.checked_mul(2)
                    .and_then(|m| m.checked_add(1))
                    .ok_or("length too big")?,
            ),
        },
        other => return Err(format!("unknown RESP type byte {other:#04x}")),
    };
    // Leaf-line validation shared by both parsers.
    match ty {
        b':' if parse_int(line).is_none() => return Err("bad integer".into()),
        b'_' if !line.is_empty() => return Err("bad null".into()),
        b'#' if line != b"t" && line != b"f" => return Err("bad boolean".into()),
        b',' if parse_double(line).is_none() => return Err("bad double".into()),
        b'(' if !is_big_number(line) => return Err("bad big number".into()),
        _ => {}
    }
    Ok(Some(Header {
        ty,
        line,
        kind,
        next,
    }))
}

fn check_verbatim(p: &[u8]) -> Result<(), String> {
    if p.len() < 4 || p[3] != b':' {
        return Err("bad verbatim string".into());
    }
    Ok(())
}

fn check_crlf(buf: &[u8], at: usize) -> Result<(), String> {
    if &buf[at..at + 2] != b"\r\n" {
        return Err(format!("missing CRLF after payload at {at}"));
    }
    Ok(())
}

/// RESP integers: optional sign, decimal digits, fits in i64.
fn parse_int(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 19 {
        return None;
    }
    let mut v: i128 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + i128::from(c - b'0');
    }
    if neg {
        v = -v;
    }
    i64::try_from(v).ok()
}

fn parse_double(s: &[u8]) -> Option<f64> {
    let t = core::str::from_utf8(s).ok()?;
    match t {
        "inf" | "+inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        "nan" | "-nan" => Some(f64::NAN),
        _ if t.is_empty() || !t.bytes().all(|c| b"0123456789+-.eE".contains(&c)) => None,
        _ => t.parse().ok(),
    }
}

fn is_big_number(s: &[u8]) -> bool {
    let d = s
        .strip_prefix(b"-")
        .or_else(|| s.strip_prefix(b"+"))
        .unwrap_or(s);
    !d.is_empty() && d.iter().all(u8::is_ascii_digit)
}

fn parse_at(buf: &[u8], pos: &mut usize, depth: usize) -> Result<Option<Value>, String> {
    if depth > MAX_DEPTH {
        return Err("nesting too deep".into());
    }
    let Some(h) = header(buf, *pos)? else {
        return Ok(None);
    };
    let line = h.line;
    let start = h.next;
    let payload = |len: usize| -> Result<Option<&[u8]>, String> {
        match start.checked_add(len).and_then(|e| e.checked_add(2)) {
            Some(e) if e <= buf.len() => {
                check_crlf(buf, start + len)?;
                Ok(Some(&buf[start..start + len]))
            }
            _ => Ok(None),
        }
    };
    let value = match (h.ty, h.kind) {
        (b'+', _) => Value::Simple(line.to_vec()),
        (b'-', _) => Value::Error(line.to_vec()),
        (b':', _) => Value::Int(parse_int(line).ok_or("bad integer")?),
        (b'_', _) => Value::Null,
        (b',', _) => Value::Double(parse_double(line).ok_or("bad double")?),
        (b'#', _) => Value::Bool(line == b"t"),
        (b'(', _) => Value::BigNumber(line.to_vec()),
        (b'$' | b'*', Kind::Leaf) => Value::Null,
        (ty, Kind::Payload(len)) => {
            let Some(p) = payload(len)? else {
                return Ok(None);
            };
            *pos = start + len + 2;
            return Ok(Some(match ty {
                b'$' => Value::Bulk(p.to_vec()),
                b'!' => Value::Error(p.to_vec()),
                _ => {
                    check_verbatim(p)?;
                    Value::Verbatim {
                        format: [p[0], p[1], p[2]],
                        text: p[4..].to_vec(),
                    }
                }
            }));
        }
        (ty, Kind::Aggregate(n)) => {
            *pos = start;
            // Each element takes at least 3 bytes: cap the up-front reservation.
            let cap = (n as usize).min((buf.len() - start) / 3 + 1);
            match ty {
                b'%' | b'|' => {
                    let pairs = (n / 2) as usize;
                    let mut kv = Vec::with_capacity(pairs.min(cap));
                    for _ in 0..pairs {
                        let Some(k) = parse_at(buf, pos, depth + 1)? else {
                            return Ok(None);
                        };
                        let Some(v) = parse_at(buf, pos, depth + 1)? else {
                            return Ok(None);
                        };
                        kv.push((k, v));
                    }
                    if ty == b'%' {
                        return Ok(Some(Value::Map(kv)));
                    }
                    let Some(v) = parse_at(buf, pos, depth + 1)? else {
                        return Ok(None);
                    };
                    return Ok(Some(Value::Attribute {
                        attrs: kv,
                        value: Box::new(v),
                    }));
                }
                _ => {
                    let mut items = Vec::with_capacity(cap);
                    for _ in 0..n {
                        let Some(v) = parse_at(buf, pos, depth + 1)? else {
                            return Ok(None);
                        };
                        items.push(v);
                    }
                    return Ok(Some(match ty {
                        b'*' => Value::Array(items),
                        b'~' => Value::Set(items),
                        _ => Value::Push(items),
                    }));
                }
            }
        }
        _ => return Err("unexpected type".into()),
    };
    *pos = start;
    Ok(Some(value))
}

impl Value {
    /// Encode as RESP3 (RESP2 values come out as themselves). Used by tests
    /// and the fuzzers to check the parsers against each other.
    pub fn encode(&self, out: &mut Vec<u8>) {
        fn line(out: &mut Vec<u8>, p: u8, s: &[u8]) {
            out.push(p);
            out.extend_from_slice(s);
            out.extend_from_slice(b"\r\n");
        }
        fn hdr(out: &mut Vec<u8>, p: u8, n: usize) {
            line(out, p, n.to_string().as_bytes());
        }
        match self {
            Value::Simple(s) => line(out, b'+', s),
            // A blob error (`!`) may hold CR/LF, which a `-` line cannot.
            Value::Error(s) if s.contains(&b'\r') || s.contains(&b'\n') => {
                hdr(out, b'!', s.len());
                out.extend_from_slice(s);
                out.extend_from_slice(b"\r\n");
            }
            Value::Error(s) => line(out, b'-', s),
            Value::Int(n) => line(out, b':', n.to_string().as_bytes()),
            Value::Bulk(b) => {
                hdr(out, b'$', b.len());
                out.extend_from_slice(b);
                out.extend_from_slice(b"\r\n");
            }
            Value::Null => out.extend_from_slice(b"_\r\n"),
            Value::Array(v) | Value::Set(v) | Value::Push(v) => {
                let p = match self {
                    Value::Array(_) => b'*',
                    Value::Set(_) => b'~',
                    _ => b'>',
                };
                hdr(out, p, v.len());
                for x in v {
                    x.encode(out);
                }
            }
            Value::Map(kv) => {
                hdr(out, b'%', kv.len());
                for (k, v) in kv {
                    k.encode(out);
                    v.encode(out);
                }
            }
            Value::Double(d) => {
                let mut tmp = [0u8; crate::num::DOUBLE_MAX_LEN];
                line(out, b',', crate::num::fmt_double(*d, &mut tmp));
            }
            Value::Bool(b) => line(out, b'#', if *b { b"t" } else { b"f" }),
            Value::Verbatim { format, text } => {
                hdr(out, b'=', text.len() + 4);
                out.extend_from_slice(format);
                out.push(b':');
                out.extend_from_slice(text);
                out.extend_from_slice(b"\r\n");
            }
            Value::BigNumber(d) => line(out, b'(', d),
            Value::Attribute { attrs, value } => {
                hdr(out, b'|', attrs.len());
                for (k, v) in attrs {
                    k.encode(out);
                    v.encode(out);
                }
                value.encode(out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(buf: &[u8]) -> Value {
        let (v, n) = parse_value(buf).unwrap().expect("complete");
        assert_eq!(n, buf.len(), "consumed all of {buf:?}");
        assert_eq!(value_len(buf), Ok(Some(n)));
        for cut in 0..buf.len() {
            assert_eq!(parse_value(&buf[..cut]), Ok(None), "cut {cut}");
            assert_eq!(value_len(&buf[..cut]), Ok(None), "cut {cut}");
        }
        v
    }
    fn bad(buf: &[u8]) {
        assert!(parse_value(buf).is_err(), "{buf:?}");
        assert!(value_len(buf).is_err(), "{buf:?}");
    }
    fn b(s: &str) -> Value {
        Value::Bulk(s.as_bytes().to_vec())
    }

    #[test]
    fn resp2_values() {
        assert_eq!(one(b"+OK\r\n"), Value::Simple(b"OK".to_vec()));
        assert_eq!(one(b"-ERR x y\r\n"), Value::Error(b"ERR x y".to_vec()));
        assert_eq!(one(b":-12\r\n"), Value::Int(-12));
        assert_eq!(one(b"$3\r\na\r\n\r\n"), b("a\r\n"));
        assert_eq!(one(b"$0\r\n\r\n"), b(""));
        assert_eq!(one(b"$-1\r\n"), Value::Null);
        assert_eq!(one(b"*-1\r\n"), Value::Null);
        assert_eq!(one(b"*0\r\n"), Value::Array(vec![]));
        assert_eq!(
            one(b"*2\r\n$1\r\na\r\n*1\r\n:1\r\n"),
            Value::Array(vec![b("a"), Value::Array(vec![Value::Int(1)])])
        );
    }

    #[test]
    fn resp3_values() {
        assert_eq!(one(b"_\r\n"), Value::Null);
        assert_eq!(one(b",1.5\r\n"), Value::Double(1.5));
        assert_eq!(one(b",-inf\r\n"), Value::Double(f64::NEG_INFINITY));
        assert_eq!(one(b",1e+300\r\n"), Value::Double(1e300));
        assert!(matches!(one(b",nan\r\n"), Value::Double(d) if d.is_nan()));
        assert_eq!(one(b"#t\r\n"), Value::Bool(true));
        assert_eq!(one(b"#f\r\n"), Value::Bool(false));
        assert_eq!(one(b"!3\r\nERR\r\n"), Value::Error(b"ERR".to_vec()));
        assert_eq!(
            one(b"=6\r\ntxt:hi\r\n"),
            Value::Verbatim {
                format: *b"txt",
                text: b"hi".to_vec()
            }
        );
        assert_eq!(one(b"(-123\r\n"), Value::BigNumber(b"-123".to_vec()));
        assert_eq!(
            one(b"%1\r\n+a\r\n:1\r\n"),
            Value::Map(vec![(Value::Simple(b"a".to_vec()), Value::Int(1))])
        );
        assert_eq!(one(b"~1\r\n_\r\n"), Value::Set(vec![Value::Null]));
        assert_eq!(
            one(b">2\r\n$7\r\nmessage\r\n:1\r\n"),
            Value::Push(vec![b("message"), Value::Int(1)])
        );
        assert_eq!(
            one(b"|1\r\n+ttl\r\n:3\r\n$1\r\nv\r\n"),
            Value::Attribute {
                attrs: vec![(Value::Simple(b"ttl".to_vec()), Value::Int(3))],
                value: Box::new(b("v")),
            }
        );
    }

    #[test]
    fn trailing_bytes_are_left() {
        assert_eq!(parse_value(b":1\r\n:2\r\n"), Ok(Some((Value::Int(1), 4))));
        assert_eq!(value_len(b"*1\r\n:1\r\n+x"), Ok(Some(8)));
    }

    #[test]
    fn encode_keeps_blob_errors_intact() {
        let v = one(b"*2\r\n!5\r\na\r\n%1\r\n+k\r\n");
        let mut re = Vec::new();
        v.encode(&mut re);
        assert_eq!(parse_value(&re), Ok(Some((v, re.len()))));
    }

    #[test]
    fn malformed() {
        for x in [
            &b"?\r\n"[..],
            b":x\r\n",
            b":\r\n",
            b"$2\r\nabc\r\n",
            b"$-2\r\n",
            b"*-2\r\n",
            b"%-1\r\n",
            b"~-1\r\n",
            b"$?\r\n",
            b"*?\r\n",
            b"#x\r\n",
            b"_x\r\n",
            b",abc\r\n",
            b"(1a\r\n",
            b"=2\r\nab\r\n",
            b"+OK\rX",
            b"*1\r\n:1\r\r",
        ] {
            bad(x);
        }
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = b"*1\r\n".repeat(MAX_DEPTH + 2);
        let mut buf = deep.clone();
        buf.extend_from_slice(b":1\r\n");
        bad(&buf);
        let ok = b"*1\r\n".repeat(MAX_DEPTH - 1);
        let mut buf = ok.clone();
        buf.extend_from_slice(b":1\r\n");
        assert_eq!(value_len(&buf), Ok(Some(buf.len())));
        assert!(parse_value(&buf).unwrap().is_some());
    }

    #[test]
    fn huge_claimed_lengths_do_not_allocate_up_front() {
        assert_eq!(parse_value(b"*4000000000\r\n:1\r\n"), Ok(None));
        assert_eq!(value_len(b"*4000000000\r\n:1\r\n"), Ok(None));
        assert_eq!(parse_value(b"$4000000000\r\nab"), Ok(None));
    }
}
