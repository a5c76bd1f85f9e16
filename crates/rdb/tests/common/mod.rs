//! Shared by the integration tests: fixture files, the `.expect` format
//! make.sh writes, loading a whole file, and a builder for hand-made RDB
//! bytes.
#![allow(dead_code)]

use ringkv_rdb::consts::*;
use ringkv_rdb::{Error, Item, Loader, crc64::crc64};
use store::{EncodingLimits, Str, Value, ValueRef};

pub fn fixture(name: &str) -> Vec<u8> {
    let p = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

/// `\xHH` escapes back to bytes.
pub fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            out.push(u8::from_str_radix(&s[i + 2..i + 4], 16).unwrap());
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

#[derive(Debug)]
pub struct Expect {
    pub db: u64,
    pub key: Vec<u8>,
    pub ty: String,
    pub enc: String,
    pub expire_ms: Option<i64>,
    pub elems: Vec<Vec<u8>>,
}

pub fn expectations(name: &str) -> Vec<Expect> {
    let text = String::from_utf8(fixture(name)).unwrap();
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let exp: i64 = f[4].parse().unwrap();
            Expect {
                db: f[0].parse().unwrap(),
                key: unescape(f[1]),
                ty: f[2].to_string(),
                enc: f[3].to_string(),
                expire_ms: (exp >= 0).then_some(exp),
                elems: f[5..].iter().map(|e| unescape(e)).collect(),
            }
        })
        .collect()
}

/// Every item of `data`, or the first error.
pub fn load_all(data: &[u8], limits: EncodingLimits) -> Result<Vec<Item>, Error> {
    let mut l = Loader::new(data, limits)?;
    let mut out = Vec::new();
    while let Some(it) = l.next_item()? {
        out.push(it);
    }
    Ok(out)
}

fn score_text(b: &[u8]) -> f64 {
    std::str::from_utf8(b).unwrap().parse().unwrap()
}

/// The value's contents in the `.expect` order, its type and encoding.
pub fn describe(v: &Value) -> (&'static str, &'static str, Vec<Vec<u8>>) {
    let r = ValueRef::of(v);
    let elems = match v {
        Value::Str(Str::Int(i)) => vec![i.to_string().into_bytes()],
        Value::Str(s) => vec![s.bytes().unwrap().to_vec()],
        Value::List(l) => l.iter().map(std::borrow::Cow::into_owned).collect(),
        Value::Set(s) => {
            let mut m: Vec<Vec<u8>> = s.iter().map(|m| m.to_vec()).collect();
            m.sort();
            m
        }
        Value::Hash(h) => {
            let mut p: Vec<(&[u8], &[u8])> = h.iter().collect();
            p.sort();
            p.into_iter()
                .flat_map(|(f, v)| [f.to_vec(), v.to_vec()])
                .collect()
        }
        // Scores as text are compared numerically by `check`.
        Value::ZSet(z) => z
            .iter()
            .flat_map(|(m, s)| [m.to_vec(), format!("{s:?}").into_bytes()])
            .collect(),
        // Entries as `id` then fields and values.
        Value::Stream(s) => {
            let mut out = Vec::new();
            s.range(store::StreamId::MIN, store::StreamId::MAX, false, |e| {
                out.push(e.id.to_vec());
                for (f, v) in e.pairs() {
                    out.push(f.to_vec());
                    out.push(v.to_vec());
                }
                true
            });
            out
        }
    };
    (r.type_name(), r.encoding(), elems)
}

/// Compare a loaded value with its expectation; `check_enc` false skips
/// the encoding.
pub fn check(v: &Value, e: &Expect, check_enc: bool) {
    let (ty, enc, elems) = describe(v);
    let k = String::from_utf8_lossy(&e.key);
    assert_eq!(ty, e.ty, "type of {k}");
    if check_enc {
        assert_eq!(enc, e.enc, "encoding of {k}");
    }
    assert_eq!(elems.len(), e.elems.len(), "length of {k}");
    if ty == "zset" {
        for (i, (a, b)) in elems.iter().zip(&e.elems).enumerate() {
            if i % 2 == 0 {
                assert_eq!(a, b, "member {i} of {k}");
            } else {
                assert_eq!(score_text(a), score_text(b), "score {i} of {k}");
            }
        }
    } else {
        assert_eq!(elems, e.elems, "contents of {k}");
    }
}

/// Hand-made RDB bytes.
pub struct Rdb {
    pub buf: Vec<u8>,
}

impl Rdb {
    pub fn new(version: u16) -> Rdb {
        Rdb {
            buf: format!("REDIS{version:04}").into_bytes(),
        }
    }
    pub fn byte(&mut self, b: u8) -> &mut Self {
        self.buf.push(b);
        self
    }
    pub fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(b);
        self
    }
    /// A length in the smallest encoding.
    pub fn len(&mut self, n: u64) -> &mut Self {
        put_len(&mut self.buf, n);
        self
    }
    /// A plain string.
    pub fn str(&mut self, s: &[u8]) -> &mut Self {
        put_len(&mut self.buf, s.len() as u64);
        self.raw(s)
    }
    /// EOF and, for version 5 on, the CRC.
    pub fn finish(&mut self, version: u16) -> Vec<u8> {
        self.buf.push(OPCODE_EOF);
        if version >= 5 {
            let c = crc64(0, &self.buf);
            self.buf.extend_from_slice(&c.to_le_bytes());
        }
        self.buf.clone()
    }
}

pub fn put_len(out: &mut Vec<u8>, n: u64) {
    if n < 64 {
        out.push(n as u8);
    } else if n < 16384 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u32::MAX as u64 {
        out.push(LEN_32BIT);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(LEN_64BIT);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// A deterministic xorshift generator for mutations.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    /// A random damage to `data`: flip, overwrite, truncate, insert,
    /// delete or duplicate a range.
    pub fn mutate(&mut self, data: &[u8]) -> Vec<u8> {
        let mut d = data.to_vec();
        for _ in 0..1 + self.below(3) {
            if d.is_empty() {
                d.push(self.next() as u8);
            }
            let i = self.below(d.len());
            match self.below(6) {
                0 => d[i] ^= 1 << self.below(8),
                1 => d[i] = self.next() as u8,
                2 => d.truncate(i),
                3 => d.insert(i, self.next() as u8),
                4 => {
                    d.remove(i);
                }
                _ => {
                    let j = (i + self.below(16)).min(d.len());
                    let chunk = d[i..j].to_vec();
                    let at = self.below(d.len());
                    d.splice(at..at, chunk);
                }
            }
        }
        d
    }
}
