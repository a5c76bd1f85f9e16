//! Streaming RDB loader: versions 1..=11, every opcode and value type
//! Redis 6.x–7.2 and Valkey 7.2–8.x write (streams and modules refused with
//! an error naming what was met and where).
//!
//! ```text
//!   Loader ── Stream<R> ── 64 KiB buffer over R, running CRC64 and offset
//!     │           │
//!     │           └── Source (also implemented by Slice, for RESTORE)
//!     ▼
//!   next_item: opcode loop; EXPIRETIME*/IDLE/FREQ are remembered for the
//!     key that follows, SLOT_INFO skipped, EOF checks the CRC
//!     │
//!     ▼
//!   read_value(type): lengths, strings (int / LZF / raw), doubles, and the
//!     packed blobs through listpack / ziplist / intset / zipmap, built into
//!     store values with the caller's EncodingLimits
//! ```
//!
//! Nothing read from the file sizes an allocation before the bytes behind
//! it have arrived: strings grow in 64 KiB steps as they are read, element
//! counts preallocate at most [`PREALLOC_MAX`] slots, and blobs are
//! decoded into vectors bounded by their own length. So a forged length
//! costs an error, not memory. Every decoded element is checked (Valkey's
//! deep sanitization): duplicates in sets, hashes and sorted sets, empty
//! collections and NaN scores are errors.

use crate::consts::*;
use crate::listpack::Elem;
use crate::{Error, crc64, intset, listpack, lzf, ziplist, zipmap};
use store::types::list::End;
use store::types::set::as_int;
use store::types::{Hash, List, Set, ZSet};
use store::{EncodingLimits, Str, Value};

/// One item of the file, in file order.
#[derive(Debug)]
pub enum Item {
    Aux {
        key: Vec<u8>,
        value: Vec<u8>,
    },
    SelectDb(u64),
    ResizeDb {
        size: u64,
        expires: u64,
    },
    /// FUNCTION2: a library's source.
    Function(Vec<u8>),
    Key(KeyRecord),
    /// A key whose value is one packed blob, read but not decoded (only
    /// after [`Loader::defer_packed`]): [`PackedRecord::decode`] finishes
    /// it, on whichever thread the caller likes.
    Packed(PackedRecord),
}

/// A key with its value still a packed blob (listpack, ziplist, intset,
/// zipmap), already decompressed.
pub struct PackedRecord {
    pub db: u64,
    pub key: Vec<u8>,
    pub expire_ms: Option<i64>,
    pub idle_s: Option<u64>,
    pub freq: Option<u8>,
    t: u8,
    blob: Blob,
}

impl std::fmt::Debug for PackedRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedRecord")
            .field("key", &show_key(&self.key))
            .field("type", &self.t)
            .finish_non_exhaustive()
    }
}

impl PackedRecord {
    /// Decode the blob (every element checked, as for any other key).
    pub fn decode(self, limits: &EncodingLimits) -> Result<KeyRecord, Error> {
        let t = self.t;
        let value = decode_blob(t, &self.blob, limits).map_err(|e| {
            Error::new(
                e.offset,
                format!("{} in key \"{}\" (type {t})", e.msg, show_key(&self.key)),
            )
        })?;
        Ok(KeyRecord {
            db: self.db,
            key: self.key,
            value,
            expire_ms: self.expire_ms,
            idle_s: self.idle_s,
            freq: self.freq,
        })
    }
}

#[derive(Debug)]
pub struct KeyRecord {
    /// The database of the last SELECTDB (0 before any).
    pub db: u64,
    pub key: Vec<u8>,
    pub value: Value,
    pub expire_ms: Option<i64>,
    /// IDLE opcode: seconds idle.
    pub idle_s: Option<u64>,
    /// FREQ opcode: the LFU counter.
    pub freq: Option<u8>,
}

/// Element slots preallocated at most for a count read from the input.
const PREALLOC_MAX: usize = 1024;
/// Strings are read in steps of this much, so a forged length is paid
/// for only as far as the input backs it.
const CHUNK: usize = 64 * 1024;

/// Where value bytes come from: the file (with its CRC) or a DUMP payload.
pub(crate) trait Source {
    /// Offset of the next byte.
    fn pos(&self) -> u64;
    /// Fill `buf` exactly or fail.
    fn read_into(&mut self, buf: &mut [u8]) -> Result<(), Error>;
    /// `n` bytes, grown as they arrive.
    fn read_vec(&mut self, n: u64) -> Result<Vec<u8>, Error> {
        let n = usize::try_from(n).map_err(|_| Error::new(self.pos(), "length too large"))?;
        let mut v = Vec::with_capacity(n.min(CHUNK));
        while v.len() < n {
            let old = v.len();
            v.resize(old + (n - old).min(CHUNK), 0);
            self.read_into(&mut v[old..])?;
        }
        Ok(v)
    }
}

/// A byte slice as a [`Source`] (RESTORE bodies).
pub(crate) struct Slice<'a> {
    pub(crate) data: &'a [u8],
    pub(crate) at: usize,
}

impl Source for Slice<'_> {
    fn pos(&self) -> u64 {
        self.at as u64
    }
    fn read_into(&mut self, buf: &mut [u8]) -> Result<(), Error> {
        let src = self
            .data
            .get(self.at..self.at + buf.len())
            .ok_or_else(|| Error::new(self.at as u64, "unexpected end of payload"))?;
        buf.copy_from_slice(src);
        self.at += buf.len();
        Ok(())
    }
    fn read_vec(&mut self, n: u64) -> Result<Vec<u8>, Error> {
        let left = (self.data.len() - self.at) as u64;
        if n > left {
            return Err(Error::new(
                self.at as u64,
                format!("length {n} runs past the end of the payload ({left} bytes left)"),
            ));
        }
        let v = self.data[self.at..self.at + n as usize].to_vec();
        self.at += n as usize;
        Ok(v)
    }
}

/// The file: buffered reads, the offset and the CRC of every byte consumed.
struct Stream<R> {
    inner: R,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    pos: u64,
    crc: u64,
}

impl<R: std::io::Read> Stream<R> {
    fn fill(&mut self) -> Result<(), Error> {
        loop {
            match self.inner.read(&mut self.buf) {
                Ok(0) => return Err(Error::new(self.pos, "unexpected end of file")),
                Ok(n) => {
                    self.start = 0;
                    self.end = n;
                    return Ok(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::new(self.pos, format!("read error: {e}"))),
            }
        }
    }
    /// Read without adding to the CRC (the trailer holding it).
    fn read_raw(&mut self, out: &mut [u8]) -> Result<(), Error> {
        let mut done = 0;
        while done < out.len() {
            if self.start == self.end {
                self.fill()?;
            }
            let n = (self.end - self.start).min(out.len() - done);
            out[done..done + n].copy_from_slice(&self.buf[self.start..self.start + n]);
            self.start += n;
            self.pos += n as u64;
            done += n;
        }
        Ok(())
    }
}

impl<R: std::io::Read> Source for Stream<R> {
    fn pos(&self) -> u64 {
        self.pos
    }
    fn read_into(&mut self, out: &mut [u8]) -> Result<(), Error> {
        self.read_raw(out)?;
        self.crc = crc64::crc64(self.crc, out);
        Ok(())
    }
}

fn u8_of<S: Source>(s: &mut S) -> Result<u8, Error> {
    let mut b = [0u8; 1];
    s.read_into(&mut b)?;
    Ok(b[0])
}

fn array<S: Source, const N: usize>(s: &mut S) -> Result<[u8; N], Error> {
    let mut b = [0u8; N];
    s.read_into(&mut b)?;
    Ok(b)
}

/// A length, or the special string encoding (INT8/16/32, LZF) in its place.
enum Len {
    Plain(u64),
    Encoded(u8),
}

fn len_or_enc<S: Source>(s: &mut S) -> Result<Len, Error> {
    let at = s.pos();
    let b = u8_of(s)?;
    Ok(match b >> 6 {
        0 => Len::Plain((b & 0x3f) as u64),
        1 => Len::Plain((((b & 0x3f) as u64) << 8) | u8_of(s)? as u64),
        3 => Len::Encoded(b & 0x3f),
        _ => match b {
            LEN_32BIT => Len::Plain(u32::from_be_bytes(array(s)?) as u64),
            LEN_64BIT => Len::Plain(u64::from_be_bytes(array(s)?)),
            _ => return Err(Error::new(at, format!("bad length encoding 0x{b:02x}"))),
        },
    })
}

pub(crate) fn read_len<S: Source>(s: &mut S) -> Result<u64, Error> {
    let at = s.pos();
    match len_or_enc(s)? {
        Len::Plain(n) => Ok(n),
        Len::Encoded(e) => Err(Error::new(
            at,
            format!("string encoding {e} where a length was expected"),
        )),
    }
}

/// A string as stored: integer encodings stay integers (a string value
/// loaded from one has the `int` encoding).
enum RdbStr {
    Int(i64),
    Bytes(Vec<u8>),
}

fn read_str_obj<S: Source>(s: &mut S) -> Result<RdbStr, Error> {
    let at = s.pos();
    match len_or_enc(s)? {
        Len::Plain(n) => s.read_vec(n).map(RdbStr::Bytes),
        Len::Encoded(ENC_INT8) => Ok(RdbStr::Int(i8::from_le_bytes(array(s)?) as i64)),
        Len::Encoded(ENC_INT16) => Ok(RdbStr::Int(i16::from_le_bytes(array(s)?) as i64)),
        Len::Encoded(ENC_INT32) => Ok(RdbStr::Int(i32::from_le_bytes(array(s)?) as i64)),
        Len::Encoded(ENC_LZF) => read_lzf(s, at).map(RdbStr::Bytes),
        Len::Encoded(e) => Err(Error::new(at, format!("unknown string encoding {e}"))),
    }
}

/// The rest of an LZF string whose encoding byte was at `at`.
fn read_lzf<S: Source>(s: &mut S, at: u64) -> Result<Vec<u8>, Error> {
    let clen = read_len(s)?;
    let len = read_len(s)?;
    let len = usize::try_from(len).map_err(|_| Error::new(at, "LZF string: length too large"))?;
    let comp = s.read_vec(clen)?;
    lzf::decompress(&comp, len).map_err(|e| Error::new(at, format!("LZF string: {}", e.0)))
}

/// A string's bytes (integers in decimal).
pub(crate) fn read_string<S: Source>(s: &mut S) -> Result<Vec<u8>, Error> {
    Ok(match read_str_obj(s)? {
        RdbStr::Int(i) => i.to_string().into_bytes(),
        RdbStr::Bytes(b) => b,
    })
}

/// A packed blob (listpack, ziplist, intset, zipmap) and how to place a
/// decoder's blob-relative error offset in the file.
struct Blob {
    bytes: Vec<u8>,
    at: u64,
    compressed: bool,
}

impl Blob {
    fn read<S: Source>(s: &mut S) -> Result<Blob, Error> {
        let at = s.pos();
        match len_or_enc(s)? {
            Len::Plain(n) => {
                let data_at = s.pos();
                Ok(Blob {
                    bytes: s.read_vec(n)?,
                    at: data_at,
                    compressed: false,
                })
            }
            Len::Encoded(ENC_LZF) => Ok(Blob {
                bytes: read_lzf(s, at)?,
                at,
                compressed: true,
            }),
            Len::Encoded(_) => Err(Error::new(at, "integer where a packed blob was expected")),
        }
    }
    /// Turn a decoder's error into one at a file offset.
    fn place(&self, e: Error) -> Error {
        if self.compressed {
            Error::new(
                self.at,
                format!("{} (byte {} of the LZF-compressed blob)", e.msg, e.offset),
            )
        } else {
            Error::new(self.at + e.offset, e.msg)
        }
    }
}

fn parse_score(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    let v: f64 = s.parse().ok()?;
    (!v.is_nan()).then_some(v)
}

/// Valkey's string-encoded double (RDB type 3 scores).
fn read_text_double<S: Source>(s: &mut S) -> Result<f64, Error> {
    let at = s.pos();
    match u8_of(s)? {
        253 => Err(Error::new(at, "NaN score")),
        254 => Ok(f64::INFINITY),
        255 => Ok(f64::NEG_INFINITY),
        n => {
            let b = s.read_vec(n as u64)?;
            parse_score(&b).ok_or_else(|| Error::new(at, "unparsable score"))
        }
    }
}

fn read_binary_double<S: Source>(s: &mut S) -> Result<f64, Error> {
    let at = s.pos();
    let v = f64::from_le_bytes(array(s)?);
    if v.is_nan() {
        return Err(Error::new(at, "NaN score"));
    }
    Ok(v)
}

/// Elements in one buffer: no allocation per element while collecting.
#[derive(Default)]
struct Flat {
    arena: Vec<u8>,
    ends: Vec<usize>,
}

impl Flat {
    fn with_hint(n: u64) -> Flat {
        Flat {
            arena: Vec::new(),
            ends: Vec::with_capacity((n as usize).min(PREALLOC_MAX)),
        }
    }
    fn push(&mut self, b: &[u8]) {
        self.arena.extend_from_slice(b);
        self.ends.push(self.arena.len());
    }
    fn push_elem(&mut self, e: &Elem<'_>) {
        e.write_to(&mut self.arena);
        self.ends.push(self.arena.len());
    }
    fn len(&self) -> usize {
        self.ends.len()
    }
    fn refs(&self) -> Vec<&[u8]> {
        let mut start = 0;
        self.ends
            .iter()
            .map(|&e| {
                let s = &self.arena[start..e];
                start = e;
                s
            })
            .collect()
    }
}

/// The string forms of a blob's elements: its byte strings as they are
/// (no copy), its integers written out into `ints`.
fn strings_of<'a>(elems: &[Elem<'a>], ints: &'a mut Vec<u8>) -> Vec<&'a [u8]> {
    let mut spans = Vec::with_capacity(elems.len());
    for e in elems {
        if let Elem::Int(_) = e {
            let start = ints.len();
            e.write_to(ints);
            spans.push((start, ints.len()));
        }
    }
    let ints: &'a [u8] = ints;
    let mut next = spans.iter();
    elems
        .iter()
        .map(|e| match e {
            Elem::Bytes(b) => *b,
            Elem::Int(_) => {
                let &(s, t) = next.next().expect("one span per integer");
                &ints[s..t]
            }
        })
        .collect()
}

fn list_of(items: &Flat, limits: &EncodingLimits) -> Value {
    let mut l = List::new();
    l.push(End::Right, &items.refs(), limits);
    Value::List(l)
}

/// A set from `members`, rejecting duplicates. `offsets[i]` is where the
/// i-th member was read, for the error.
fn set_of<'a>(
    members: impl ExactSizeIterator<Item = &'a [u8]>,
    at: impl Fn(usize) -> u64,
    limits: &EncodingLimits,
) -> Result<Value, Error> {
    let n = members.len();
    let mut set: Option<Set> = None;
    for (i, m) in members.enumerate() {
        let s = set.get_or_insert_with(|| Set::new_for(m, n, limits));
        if !s.add(m, limits) {
            return Err(Error::new(at(i), "duplicate set member"));
        }
    }
    set.map(Value::Set)
        .ok_or_else(|| Error::new(at(0), "empty set"))
}

fn hash_of<'a>(
    pairs: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    at: impl Fn(usize) -> u64,
    limits: &EncodingLimits,
) -> Result<Value, Error> {
    let pairs: Vec<(&[u8], &[u8])> = pairs.collect();
    if pairs.is_empty() {
        return Err(Error::new(at(0), "empty hash"));
    }
    match Hash::from_pairs(&pairs, limits) {
        Some(h) => Ok(Value::Hash(h)),
        None => {
            // Rare: find which field repeats, for the message.
            let mut seen = std::collections::HashSet::new();
            let i = pairs
                .iter()
                .position(|(f, _)| !seen.insert(*f))
                .unwrap_or(0);
            Err(Error::new(at(i), "duplicate hash field"))
        }
    }
}

fn zset_of(
    pairs: Vec<(Vec<u8>, f64)>,
    at: impl Fn(usize) -> u64,
    limits: &EncodingLimits,
) -> Result<Value, Error> {
    if pairs.is_empty() {
        return Err(Error::new(at(0), "empty sorted set"));
    }
    let mut seen = std::collections::HashSet::with_capacity(pairs.len());
    for (i, (m, _)) in pairs.iter().enumerate() {
        if !seen.insert(m.as_slice()) {
            return Err(Error::new(at(i), "duplicate sorted set member"));
        }
    }
    drop(seen);
    Ok(Value::ZSet(ZSet::from_pairs(pairs, limits)))
}

/// Read a value of RDB type `t` (not a module or stream type).
/// Value types kept whole in one packed blob (listpack, ziplist, intset,
/// zipmap): read in one piece, decoded by [`decode_blob`].
fn is_blob_type(t: u8) -> bool {
    matches!(
        t,
        TYPE_HASH_ZIPMAP
            | TYPE_LIST_ZIPLIST
            | TYPE_SET_INTSET
            | TYPE_SET_LISTPACK
            | TYPE_ZSET_ZIPLIST
            | TYPE_ZSET_LISTPACK
            | TYPE_HASH_ZIPLIST
            | TYPE_HASH_LISTPACK
    )
}

/// Decode a packed blob of type `t` into a value.
fn decode_blob(t: u8, blob: &Blob, limits: &EncodingLimits) -> Result<Value, Error> {
    match t {
        TYPE_HASH_ZIPMAP => {
            let pairs = zipmap::decode(&blob.bytes).map_err(|e| blob.place(e))?;
            hash_of(pairs.into_iter(), |_| blob.at, limits)
        }
        TYPE_LIST_ZIPLIST => {
            let elems = ziplist::decode(&blob.bytes).map_err(|e| blob.place(e))?;
            if elems.is_empty() {
                return Err(Error::new(blob.at, "empty list"));
            }
            let mut items = Flat::with_hint(elems.len() as u64);
            elems.iter().for_each(|e| items.push_elem(e));
            Ok(list_of(&items, limits))
        }
        TYPE_SET_INTSET => {
            let ints = intset::decode(&blob.bytes).map_err(|e| blob.place(e))?;
            let mut items = Flat::with_hint(ints.len() as u64);
            ints.iter().for_each(|&i| items.push_elem(&Elem::Int(i)));
            set_of(items.refs().into_iter(), |_| blob.at, limits)
        }
        TYPE_SET_LISTPACK => {
            let elems = listpack::decode(&blob.bytes).map_err(|e| blob.place(e))?;
            let mut items = Flat::with_hint(elems.len() as u64);
            elems.iter().for_each(|e| items.push_elem(e));
            set_of(items.refs().into_iter(), |_| blob.at, limits)
        }
        TYPE_ZSET_ZIPLIST | TYPE_ZSET_LISTPACK => {
            let elems = if t == TYPE_ZSET_ZIPLIST {
                ziplist::decode(&blob.bytes)
            } else {
                listpack::decode(&blob.bytes)
            }
            .map_err(|e| blob.place(e))?;
            if elems.len() % 2 != 0 {
                return Err(Error::new(
                    blob.at,
                    "sorted set blob with an odd element count",
                ));
            }
            let mut pairs = Vec::with_capacity(elems.len() / 2);
            for c in elems.chunks_exact(2) {
                let score = match c[1] {
                    Elem::Int(i) => i as f64,
                    Elem::Bytes(b) => parse_score(b).ok_or_else(|| {
                        Error::new(blob.at, "unparsable score in sorted set blob")
                    })?,
                };
                pairs.push((c[0].to_vec(), score));
            }
            zset_of(pairs, |_| blob.at, limits)
        }
        TYPE_HASH_ZIPLIST | TYPE_HASH_LISTPACK => {
            let elems = if t == TYPE_HASH_ZIPLIST {
                ziplist::decode(&blob.bytes)
            } else {
                listpack::decode(&blob.bytes)
            }
            .map_err(|e| blob.place(e))?;
            if elems.len() % 2 != 0 {
                return Err(Error::new(blob.at, "hash blob with an odd element count"));
            }
            let mut ints = Vec::new();
            let refs = strings_of(&elems, &mut ints);
            hash_of(
                refs.chunks_exact(2).map(|c| (c[0], c[1])),
                |_| blob.at,
                limits,
            )
        }
        _ => unreachable!("not a blob type: {t}"),
    }
}

pub(crate) fn read_value<S: Source>(
    s: &mut S,
    t: u8,
    limits: &EncodingLimits,
) -> Result<Value, Error> {
    let at = s.pos();
    match t {
        TYPE_STRING => Ok(Value::Str(match read_str_obj(s)? {
            RdbStr::Int(i) => Str::Int(i),
            // As Valkey's tryObjectEncoding: a decimal integer is `int`.
            RdbStr::Bytes(b) => match as_int(&b) {
                Some(i) => Str::Int(i),
                None => Str::from_bytes(&b),
            },
        })),
        TYPE_LIST => {
            let n = read_len(s)?;
            if n == 0 {
                return Err(Error::new(at, "empty list"));
            }
            let mut items = Flat::with_hint(n);
            for _ in 0..n {
                items.push(&read_string(s)?);
            }
            Ok(list_of(&items, limits))
        }
        TYPE_SET => {
            let n = read_len(s)?;
            if n == 0 {
                return Err(Error::new(at, "empty set"));
            }
            let hint = usize::try_from(n).unwrap_or(usize::MAX);
            let mut set: Option<Set> = None;
            for _ in 0..n {
                let m_at = s.pos();
                let m = read_string(s)?;
                let set = set.get_or_insert_with(|| Set::new_for(&m, hint, limits));
                if !set.add(&m, limits) {
                    return Err(Error::new(m_at, "duplicate set member"));
                }
            }
            Ok(Value::Set(set.expect("n > 0")))
        }
        TYPE_ZSET | TYPE_ZSET_2 => {
            let n = read_len(s)?;
            let mut pairs = Vec::with_capacity((n as usize).min(PREALLOC_MAX));
            let mut offs = Vec::with_capacity((n as usize).min(PREALLOC_MAX));
            for _ in 0..n {
                offs.push(s.pos());
                let m = read_string(s)?;
                let score = if t == TYPE_ZSET {
                    read_text_double(s)?
                } else {
                    read_binary_double(s)?
                };
                pairs.push((m, score));
            }
            zset_of(pairs, |i| offs.get(i).copied().unwrap_or(at), limits)
        }
        TYPE_HASH => {
            let n = read_len(s)?;
            if n == 0 {
                return Err(Error::new(at, "empty hash"));
            }
            let mut h = Hash::new();
            for _ in 0..n {
                let f_at = s.pos();
                let f = read_string(s)?;
                let v = read_string(s)?;
                if !h.set(&f, &v, limits) {
                    return Err(Error::new(f_at, "duplicate hash field"));
                }
            }
            Ok(Value::Hash(h))
        }
        TYPE_HASH_ZIPMAP | TYPE_LIST_ZIPLIST | TYPE_SET_INTSET | TYPE_SET_LISTPACK
        | TYPE_ZSET_ZIPLIST | TYPE_ZSET_LISTPACK | TYPE_HASH_ZIPLIST | TYPE_HASH_LISTPACK => {
            decode_blob(t, &Blob::read(s)?, limits)
        }
        TYPE_LIST_QUICKLIST | TYPE_LIST_QUICKLIST_2 => {
            let nodes = read_len(s)?;
            let mut items = Flat::default();
            for _ in 0..nodes {
                let container = if t == TYPE_LIST_QUICKLIST_2 {
                    let c_at = s.pos();
                    match read_len(s)? {
                        c @ (QUICKLIST_NODE_PLAIN | QUICKLIST_NODE_PACKED) => c,
                        c => {
                            return Err(Error::new(
                                c_at,
                                format!("unknown quicklist node container {c}"),
                            ));
                        }
                    }
                } else {
                    QUICKLIST_NODE_PACKED
                };
                let blob = Blob::read(s)?;
                if container == QUICKLIST_NODE_PLAIN {
                    items.push(&blob.bytes);
                    continue;
                }
                let elems = if t == TYPE_LIST_QUICKLIST {
                    ziplist::decode(&blob.bytes)
                } else {
                    listpack::decode(&blob.bytes)
                }
                .map_err(|e| blob.place(e))?;
                // Empty nodes are skipped, as Valkey does; an empty list
                // is still an error below.
                elems.iter().for_each(|e| items.push_elem(e));
            }
            if items.len() == 0 {
                return Err(Error::new(at, "empty list"));
            }
            Ok(list_of(&items, limits))
        }
        TYPE_MODULE_PRE_GA | TYPE_MODULE_2 => {
            let id = read_len(s)?;
            Err(Error::new(
                at - 1,
                format!(
                    "module value type {t} ({}) is not supported",
                    module_name(id)
                ),
            ))
        }
        TYPE_STREAM_LISTPACKS | TYPE_STREAM_LISTPACKS_2 | TYPE_STREAM_LISTPACKS_3 => {
            crate::stream::read_stream(s, t)
        }
        _ => Err(Error::new(at - 1, format!("unknown value type {t}"))),
    }
}

/// A module id as Valkey forms it: 9 characters of 6 bits each from this
/// set, then a 10-bit encoding version.
fn module_name(id: u64) -> String {
    const CHARS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let name: String = (0..9)
        .map(|k| CHARS[((id >> (58 - 6 * k)) & 63) as usize] as char)
        .collect();
    format!(
        "module id 0x{id:016x}: \"{name}\" encoding version {}",
        id & 1023
    )
}

/// A key for an error message: escaped, cut at 64 bytes.
pub(crate) fn show_key(k: &[u8]) -> String {
    let mut s: String = k
        .iter()
        .take(64)
        .flat_map(|&b| std::ascii::escape_default(b))
        .map(char::from)
        .collect();
    if k.len() > 64 {
        s.push_str("...");
    }
    s
}

pub struct Loader<R> {
    src: Stream<R>,
    limits: EncodingLimits,
    version: u16,
    db: u64,
    expire_ms: Option<i64>,
    idle_s: Option<u64>,
    freq: Option<u8>,
    /// Hand packed values over undecoded ([`Item::Packed`]).
    defer: bool,
    /// Set once EOF was verified, or after an error (which is repeated).
    end: Option<Result<(), Error>>,
}

impl<R: std::io::Read> Loader<R> {
    /// Read and check the header (`REDIS` + 4 digits, version 1..=11).
    pub fn new(reader: R, limits: EncodingLimits) -> Result<Loader<R>, Error> {
        let mut src = Stream {
            inner: reader,
            buf: vec![0u8; CHUNK].into_boxed_slice(),
            start: 0,
            end: 0,
            pos: 0,
            crc: 0,
        };
        // Byte by byte, so a short non-RDB file is told apart from a
        // truncated RDB header.
        let mut head = [0u8; 9];
        for got in 0..head.len() {
            let r = src.read_into(&mut head[got..got + 1]);
            let seen = &head[..(got + 1).min(5)];
            if r.is_ok() && seen != &b"REDIS"[..seen.len()] {
                return Err(Error::new(0, "not an RDB file (bad magic)"));
            }
            if let Err(e) = r {
                return Err(if got < 5 {
                    Error::new(0, "not an RDB file (bad magic)")
                } else {
                    Error::new(e.offset, "truncated RDB header")
                });
            }
        }
        let digits = &head[5..];
        if !digits.iter().all(u8::is_ascii_digit) {
            return Err(Error::new(
                5,
                format!("bad RDB version field \"{}\"", show_key(digits)),
            ));
        }
        let version = digits.iter().fold(0u16, |v, d| v * 10 + (d - b'0') as u16);
        if version < MIN_VERSION {
            return Err(Error::new(5, format!("RDB version {version} is not valid")));
        }
        if version > RDB_VERSION {
            return Err(Error::new(
                5,
                format!("RDB version {version} is newer than this server supports ({RDB_VERSION})"),
            ));
        }
        Ok(Loader {
            src,
            limits,
            version,
            db: 0,
            expire_ms: None,
            idle_s: None,
            freq: None,
            defer: false,
            end: None,
        })
    }
    pub fn version(&self) -> u16 {
        self.version
    }
    /// From now on, return keys whose value is one packed blob as
    /// [`Item::Packed`], read and decompressed but not decoded, so that a
    /// second thread can decode them while this one reads on.
    pub fn defer_packed(&mut self, on: bool) {
        self.defer = on;
    }
    /// Bytes consumed so far (for loading progress).
    pub fn offset(&self) -> u64 {
        self.src.pos
    }
    /// The next item; `None` once EOF was read and the checksum verified.
    pub fn next_item(&mut self) -> Result<Option<Item>, Error> {
        match &self.end {
            Some(Ok(())) => return Ok(None),
            Some(Err(e)) => return Err(e.clone()),
            None => {}
        }
        let r = self.step();
        match &r {
            Ok(None) => self.end = Some(Ok(())),
            Err(e) => self.end = Some(Err(e.clone())),
            Ok(Some(_)) => {}
        }
        r
    }

    fn step(&mut self) -> Result<Option<Item>, Error> {
        let s = &mut self.src;
        loop {
            let at = s.pos;
            let op = u8_of(s)?;
            match op {
                OPCODE_AUX => {
                    let key = read_string(s)?;
                    let value = read_string(s)?;
                    return Ok(Some(Item::Aux { key, value }));
                }
                OPCODE_SELECTDB => {
                    self.db = read_len(s)?;
                    return Ok(Some(Item::SelectDb(self.db)));
                }
                OPCODE_RESIZEDB => {
                    let size = read_len(s)?;
                    let expires = read_len(s)?;
                    return Ok(Some(Item::ResizeDb { size, expires }));
                }
                OPCODE_EXPIRETIME => {
                    self.expire_ms = Some(i32::from_le_bytes(array(s)?) as i64 * 1000);
                }
                OPCODE_EXPIRETIME_MS => {
                    self.expire_ms = Some(i64::from_le_bytes(array(s)?));
                }
                OPCODE_IDLE => self.idle_s = Some(read_len(s)?),
                OPCODE_FREQ => self.freq = Some(u8_of(s)?),
                OPCODE_SLOT_INFO => {
                    // Valkey 8 cluster sizing hints: slot, keys, expiring keys.
                    for _ in 0..3 {
                        read_len(s)?;
                    }
                }
                OPCODE_FUNCTION2 => return Ok(Some(Item::Function(read_string(s)?))),
                OPCODE_FUNCTION_PRE_GA => {
                    return Err(Error::new(
                        at,
                        "pre-GA function format (opcode 246, Redis 7.0 RC) is not supported",
                    ));
                }
                OPCODE_MODULE_AUX => {
                    let id = read_len(s)?;
                    return Err(Error::new(
                        at,
                        format!("module aux data ({}) is not supported", module_name(id)),
                    ));
                }
                OPCODE_EOF => {
                    if self.version >= 5 {
                        let want = s.crc;
                        let mut b = [0u8; 8];
                        let crc_at = s.pos;
                        s.read_raw(&mut b)?;
                        let got = u64::from_le_bytes(b);
                        if got != 0 && got != want {
                            return Err(Error::new(
                                crc_at,
                                format!(
                                    "checksum mismatch: file says 0x{got:016x}, content is 0x{want:016x}"
                                ),
                            ));
                        }
                    }
                    return Ok(None);
                }
                t if self.defer && is_blob_type(t) => {
                    let key = read_string(s)?;
                    let blob = Blob::read(s)?;
                    return Ok(Some(Item::Packed(PackedRecord {
                        db: self.db,
                        key,
                        expire_ms: self.expire_ms.take(),
                        idle_s: self.idle_s.take(),
                        freq: self.freq.take(),
                        t,
                        blob,
                    })));
                }
                t => {
                    let key = read_string(s)?;
                    let value = match t {
                        TYPE_MODULE_PRE_GA | TYPE_MODULE_2 => {
                            let e = read_value(s, t, &self.limits).expect_err("refused type");
                            return Err(Error::new(
                                at,
                                format!("{} for key \"{}\"", e.msg, show_key(&key)),
                            ));
                        }
                        TYPE_STRING..=TYPE_ZSET_2
                        | TYPE_HASH_ZIPMAP..=TYPE_LIST_QUICKLIST
                        | TYPE_HASH_LISTPACK..=TYPE_LIST_QUICKLIST_2
                        | TYPE_SET_LISTPACK
                        | TYPE_STREAM_LISTPACKS
                        | TYPE_STREAM_LISTPACKS_2
                        | TYPE_STREAM_LISTPACKS_3 => {
                            read_value(s, t, &self.limits).map_err(|e| {
                                Error::new(
                                    e.offset,
                                    format!("{} in key \"{}\" (type {t})", e.msg, show_key(&key)),
                                )
                            })?
                        }
                        _ => {
                            return Err(Error::new(
                                at,
                                format!("unknown opcode or value type {t}"),
                            ));
                        }
                    };
                    return Ok(Some(Item::Key(KeyRecord {
                        db: self.db,
                        key,
                        value,
                        expire_ms: self.expire_ms.take(),
                        idle_s: self.idle_s.take(),
                        freq: self.freq.take(),
                    })));
                }
            }
        }
    }
}
