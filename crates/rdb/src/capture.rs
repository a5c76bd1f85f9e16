//! The save side's two halves: [`Capture`] (execution thread: cheap copies
//! as tokens) and [`Encoder`] (writer thread: tokens to RDB bytes + CRC).
//!
//! Design: a capture is one byte buffer of tokens.
//!
//! ```text
//!   RAW  0x00  len u32 LE  bytes     copied to the output as they are
//!   STR  0x01  len u32 LE  bytes     a string still to encode
//!                                    (integer / LZF / raw: rdbSaveRawString)
//!   INT  0x02  i64 LE                an integer value (int-encoded string)
//! ```
//!
//! Consecutive raw bytes (opcodes, type bytes, lengths) are merged into
//! one RAW token, so a key costs about one header per string plus a
//! `memcpy` of its bytes. Collections kept in Valkey's compact encodings
//! are packed into Valkey's listpack or intset blob right here, straight
//! into the buffer as a STR token: packing is a linear copy, while the
//! costly parts (integer detection of strings, LZF, the CRC) wait for
//! [`Encoder::feed`] on the writer thread.

use crate::consts::{
    OPCODE_AUX, OPCODE_EOF, OPCODE_EXPIRETIME_MS, OPCODE_FREQ, OPCODE_IDLE, OPCODE_RESIZEDB,
    OPCODE_SELECTDB, RDB_VERSION,
};
use crate::crc64::crc64;
use crate::encode::{self, Listpack};
use store::Entry;

/// Which access opcode to write before each key, as Valkey does by
/// `maxmemory-policy`: IDLE (seconds) under an LRU policy, FREQ under LFU,
/// neither otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessWrite {
    None,
    Lru,
    Lfu { decay_time: u32 },
}

const TOK_RAW: u8 = 0;
const TOK_STR: u8 = 1;
const TOK_INT: u8 = 2;
/// A compressed quicklist node's listpack: LZF whatever `rdbcompression`
/// says, as Valkey writes the LZF form the node holds.
const TOK_LZF_NODE: u8 = 3;
const TOK_HEAD: usize = 5;

/// Tokens for part of an RDB stream.
#[derive(Default, Debug, Clone)]
pub struct Capture {
    buf: Vec<u8>,
    /// Offset of the open RAW token's header, while it is the last token.
    open_raw: Option<usize>,
    /// For RDB 10 readers (redis-server 7.0): sets that Valkey 8 writes as
    /// a listpack (type 20, new in RDB 11) are written element by element.
    legacy_sets: bool,
}

impl Capture {
    pub fn new() -> Capture {
        Capture::default()
    }
    /// A capture for a reader of RDB `version` (10 or 11).
    pub fn for_version(version: u16) -> Capture {
        Capture {
            legacy_sets: version < 11,
            ..Capture::default()
        }
    }
    /// The tokens so far; this capture goes on empty, for the same reader.
    pub fn take(&mut self) -> Capture {
        let next = Capture {
            legacy_sets: self.legacy_sets,
            ..Capture::default()
        };
        std::mem::replace(self, next)
    }
    /// Bytes held (for chunking).
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    pub fn clear(&mut self) {
        self.buf.clear();
        self.open_raw = None;
    }
    /// AUX field.
    pub fn aux(&mut self, key: &[u8], value: &[u8]) {
        self.raw(&[OPCODE_AUX]);
        self.string(key);
        self.string(value);
    }
    pub fn select_db(&mut self, db: u64) {
        self.raw(&[OPCODE_SELECTDB]);
        self.length(db);
    }
    pub fn resize_db(&mut self, size: u64, expires: u64) {
        self.raw(&[OPCODE_RESIZEDB]);
        self.length(size);
        self.length(expires);
    }
    /// One key as Valkey's `rdbSaveKeyValuePair`: EXPIRETIME_MS if it has
    /// one, IDLE/FREQ per `access`, the type byte, the key, the value in
    /// the encoding Valkey would write for its current encoding.
    pub fn key(&mut self, e: &Entry, now_ms: i64, access: AccessWrite) {
        if let Some(t) = e.expire_at_ms() {
            let mut b = [0u8; 9];
            b[0] = OPCODE_EXPIRETIME_MS;
            b[1..].copy_from_slice(&t.to_le_bytes());
            self.raw(&b);
        }
        match access {
            AccessWrite::None => {}
            AccessWrite::Lru => {
                self.raw(&[OPCODE_IDLE]);
                self.length(e.idle_ms(now_ms) / 1000);
            }
            AccessWrite::Lfu { decay_time } => {
                self.raw(&[OPCODE_FREQ, e.lfu_counter(now_ms, decay_time)]);
            }
        }
        let v = e.value();
        if let (true, store::ValueRef::Set(s)) = (self.legacy_sets, v)
            && s.encoding() == "listpack"
        {
            self.raw(&[crate::consts::TYPE_SET]);
            self.string(e.key());
            crate::object::write_set_elements(self, s);
            return;
        }
        self.raw(&[crate::object::type_byte(v)]);
        self.string(e.key());
        crate::object::write_value(self, v);
    }

    /// Bytes for the output as they are.
    pub fn raw(&mut self, b: &[u8]) {
        let at = match self.open_raw {
            Some(at) => at,
            None => {
                let at = self.buf.len();
                self.buf.extend_from_slice(&[TOK_RAW, 0, 0, 0, 0]);
                self.open_raw = Some(at);
                at
            }
        };
        self.buf.extend_from_slice(b);
        self.patch_len(at);
    }

    /// A length (`rdbSaveLen`), as raw bytes.
    pub fn length(&mut self, n: u64) {
        self.raw(&[]);
        encode::put_len(&mut self.buf, n);
        let at = self.open_raw.expect("raw(&[]) opened a token");
        self.patch_len(at);
    }

    /// A string to encode as `rdbSaveRawString` does.
    pub fn string(&mut self, s: &[u8]) {
        self.buf.push(TOK_STR);
        self.buf.extend_from_slice(&(s.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(s);
        self.open_raw = None;
    }

    /// An integer value, encoded as Valkey encodes an `int` string object.
    pub fn int(&mut self, v: i64) {
        self.buf.push(TOK_INT);
        self.buf.extend_from_slice(&v.to_le_bytes());
        self.open_raw = None;
    }

    /// A string token built in place by `fill` (a listpack or intset blob):
    /// no intermediate copy.
    pub fn string_with(&mut self, fill: impl FnOnce(&mut Vec<u8>)) {
        let at = self.buf.len();
        self.buf.extend_from_slice(&[TOK_STR, 0, 0, 0, 0]);
        fill(&mut self.buf);
        self.open_raw = None;
        self.patch_len(at);
    }

    /// A listpack of `items` (each stored as an integer entry when Valkey
    /// would) as one string token.
    pub fn listpack(&mut self, items: impl IntoIterator<Item = impl AsRef<[u8]>>) {
        self.listpack_held(items, false);
    }

    /// [`Capture::listpack`] of a quicklist node, `compressed` as the list
    /// holds it.
    pub fn listpack_held(
        &mut self,
        items: impl IntoIterator<Item = impl AsRef<[u8]>>,
        compressed: bool,
    ) {
        let at = self.buf.len();
        self.string_with(|out| {
            let mut lp = Listpack::new(out);
            for s in items {
                lp.push(s.as_ref());
            }
            lp.finish();
        });
        if compressed {
            self.buf[at] = TOK_LZF_NODE;
        }
    }

    fn patch_len(&mut self, at: usize) {
        let n = self.buf.len() - at - TOK_HEAD;
        let n = u32::try_from(n).expect("a capture token over 4 GiB");
        self.buf[at + 1..at + TOK_HEAD].copy_from_slice(&n.to_le_bytes());
    }
}

/// Turns captures into RDB bytes, keeping the running CRC64.
#[derive(Debug)]
pub struct Encoder {
    crc: u64,
    compress: bool,
    checksum: bool,
    version: u16,
}

impl Encoder {
    /// `compress`: `rdbcompression` (LZF for strings over 20 bytes);
    /// `checksum`: `rdbchecksum` (without it the trailer is 0).
    pub fn new(compress: bool, checksum: bool) -> Encoder {
        Encoder {
            crc: 0,
            compress,
            checksum,
            version: RDB_VERSION,
        }
    }
    /// An encoder whose header names RDB `version` (the captures fed to it
    /// must be [`Capture::for_version`] the same).
    pub fn with_version(compress: bool, checksum: bool, version: u16) -> Encoder {
        Encoder {
            version,
            ..Encoder::new(compress, checksum)
        }
    }
    /// `REDIS0011` (or the version asked for).
    pub fn header(&mut self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(format!("REDIS{:04}", self.version).as_bytes());
        self.sum(&out[start..]);
    }
    /// Append the bytes for `cap` to `out`.
    pub fn feed(&mut self, cap: &Capture, out: &mut Vec<u8>) {
        let start = out.len();
        let b = &cap.buf;
        let mut at = 0;
        while at < b.len() {
            let tag = b[at];
            if tag == TOK_INT {
                let v = i64::from_le_bytes(b[at + 1..at + 9].try_into().expect("8 bytes"));
                encode::put_int_string(out, v);
                at += 9;
                continue;
            }
            let n = u32::from_le_bytes(b[at + 1..at + TOK_HEAD].try_into().expect("4 bytes"));
            let body = &b[at + TOK_HEAD..at + TOK_HEAD + n as usize];
            match tag {
                TOK_RAW => out.extend_from_slice(body),
                TOK_LZF_NODE => encode::put_compressed_node(out, body, self.compress),
                _ => encode::put_string(out, body, self.compress),
            }
            at += TOK_HEAD + n as usize;
        }
        self.sum(&out[start..]);
    }
    /// EOF opcode and the checksum.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        out.push(OPCODE_EOF);
        self.sum(&[OPCODE_EOF]);
        let crc = if self.checksum { self.crc } else { 0 };
        out.extend_from_slice(&crc.to_le_bytes());
    }
    /// The checksum of every byte written so far.
    pub fn crc(&self) -> u64 {
        self.crc
    }

    fn sum(&mut self, bytes: &[u8]) {
        if self.checksum {
            self.crc = crc64(self.crc, bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::{Str, Value};

    fn encode(cap: &Capture) -> Vec<u8> {
        let mut out = Vec::new();
        Encoder::new(true, true).feed(cap, &mut out);
        out
    }

    #[test]
    fn raw_runs_merge() {
        let mut c = Capture::new();
        c.raw(b"ab");
        c.raw(b"c");
        c.length(300);
        assert_eq!(c.len(), TOK_HEAD + 5);
        c.string(b"12");
        c.raw(b"z");
        c.int(-5);
        c.int(1 << 40);
        assert_eq!(encode(&c), b"abc\x41\x2c\xc0\x0cz\xc0\xfb\x0d1099511627776");
        c.clear();
        assert!(c.is_empty());
    }

    #[test]
    fn key_with_expiry_and_access() {
        let mut e = Entry::keyed(b"k", Value::Str(Str::from_bytes(b"v")));
        e.set_expire_at_ms(Some(0x0102_0304_0506));
        // LRU clock of 100 s; now is 130 s.
        e.set_access(100);
        let mut c = Capture::new();
        c.key(&e, 130_000, AccessWrite::Lru);
        assert_eq!(
            encode(&c),
            b"\xfc\x06\x05\x04\x03\x02\x01\x00\x00\xf8\x1e\x00\x01k\x01v"
        );
        // LFU: counter 7, stamped at the current minute.
        e.set_access(7);
        let mut c = Capture::new();
        c.key(&e, 0, AccessWrite::Lfu { decay_time: 1 });
        assert_eq!(&encode(&c)[9..], b"\xf9\x07\x00\x01k\x01v");
    }

    #[test]
    fn whole_file_framing() {
        let mut enc = Encoder::new(true, true);
        let mut out = Vec::new();
        enc.header(&mut out);
        let mut c = Capture::new();
        c.aux(b"redis-ver", b"8.1.0");
        c.select_db(0);
        c.resize_db(1, 0);
        c.key(
            &Entry::keyed(b"a", Value::Str(Str::Int(1))),
            0,
            AccessWrite::None,
        );
        enc.feed(&c, &mut out);
        enc.finish(&mut out);
        assert_eq!(&out[..9], b"REDIS0011");
        let body = &out[..out.len() - 8];
        assert_eq!(*body.last().unwrap(), 0xff);
        let crc = u64::from_le_bytes(out[out.len() - 8..].try_into().unwrap());
        assert_eq!(crc, crc64(0, body));
        assert_eq!(
            &out[9..out.len() - 9],
            b"\xfa\x09redis-ver\x058.1.0\xfe\x00\xfb\x01\x00\x00\x01a\xc0\x01"
        );

        let mut enc = Encoder::new(true, false);
        let mut out = Vec::new();
        enc.header(&mut out);
        enc.finish(&mut out);
        assert_eq!(out, b"REDIS0011\xff\0\0\0\0\0\0\0\0");
    }

    /// A length or special-encoding marker (true) at `*at`.
    fn rdb_len(b: &[u8], at: &mut usize) -> (u64, bool) {
        let c = b[*at];
        *at += 1;
        match c >> 6 {
            0 => (u64::from(c & 63), false),
            1 => {
                *at += 1;
                ((u64::from(c & 63) << 8) | u64::from(b[*at - 1]), false)
            }
            3 => (u64::from(c & 63), true),
            _ => {
                *at += 4;
                (
                    u64::from(u32::from_be_bytes(b[*at - 4..*at].try_into().unwrap())),
                    false,
                )
            }
        }
    }
    /// (elements, bytes) of each listpack node of a list's DUMP.
    fn list_nodes(b: &[u8]) -> Vec<(u16, usize)> {
        let mut at = 1;
        let (n, _) = rdb_len(b, &mut at);
        let mut v = Vec::new();
        for _ in 0..n {
            rdb_len(b, &mut at);
            let (l, enc) = rdb_len(b, &mut at);
            let lp = if enc {
                let (cl, _) = rdb_len(b, &mut at);
                let (ul, _) = rdb_len(b, &mut at);
                at += cl as usize;
                crate::lzf::decompress(&b[at - cl as usize..at], ul as usize).unwrap()
            } else {
                at += l as usize;
                b[at - l as usize..at].to_vec()
            };
            v.push((u16::from_le_bytes([lp[4], lp[5]]), lp.len()));
        }
        v
    }

    /// Cross-check against a real Valkey (not run by default): reads the
    /// dataset `RINGKV_RDB_VALKEY_DATA` describes (keys, their elements in
    /// write order, Valkey's OBJECT ENCODING and DUMP of each), builds the
    /// same values, asserts our DUMP is Valkey's byte for byte wherever the
    /// encoding has a defined order (everything but hashtables), and writes
    /// the whole dataset as an RDB file to `RINGKV_RDB_OUT` for Valkey to
    /// load. `tools/valkey_dataset.py` makes the dataset and checks the
    /// loaded file; its docstring has the steps.
    #[test]
    #[ignore]
    fn valkey_dataset() {
        use crate::encode::canonical_i64;
        use store::types::list::End;
        use store::types::{Hash, List, Set, ZSet};
        use store::{EncodingLimits, ValueRef};
        let Ok(path) = std::env::var("RINGKV_RDB_VALKEY_DATA") else {
            return;
        };
        let data = std::fs::read(path).unwrap();
        let mut at = 0;
        fn take<'d>(data: &'d [u8], at: &mut usize, n: usize) -> &'d [u8] {
            *at += n;
            &data[*at - n..*at]
        }
        fn string(data: &[u8], at: &mut usize) -> Vec<u8> {
            let n = u32::from_le_bytes(take(data, at, 4).try_into().unwrap()) as usize;
            take(data, at, n).to_vec()
        }
        let lim = EncodingLimits::default();
        let mut entries = Vec::new();
        let (mut same, mut unordered) = (0, 0);
        let (mut mismatches, mut layout) = (Vec::new(), Vec::new());
        while let Some(&t) = data.get(at) {
            at += 1;
            let key = string(&data, &mut at);
            let ttl = i64::from_le_bytes(take(&data, &mut at, 8).try_into().unwrap());
            let n = u32::from_le_bytes(take(&data, &mut at, 4).try_into().unwrap()) as usize;
            let items: Vec<Vec<u8>> = (0..n).map(|_| string(&data, &mut at)).collect();
            let encoding = String::from_utf8(string(&data, &mut at)).unwrap();
            let theirs = string(&data, &mut at);
            let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
            let value = match t {
                b's' => Value::Str(match canonical_i64(&items[0]) {
                    Some(i) => Str::Int(i),
                    None => Str::from_bytes(&items[0]),
                }),
                b'l' => {
                    let mut l = List::new();
                    for chunk in refs.chunks(500) {
                        l.push(End::Right, chunk, &lim);
                    }
                    Value::List(l)
                }
                b'h' => {
                    let mut h = Hash::new();
                    for p in refs.chunks(400) {
                        for fv in p.chunks(2) {
                            h.set(fv[0], fv[1], &lim);
                        }
                    }
                    Value::Hash(h)
                }
                b'S' => {
                    let mut s = Set::new_for(refs[0], refs.len(), &lim);
                    for m in &refs {
                        s.add(m, &lim);
                    }
                    Value::Set(s)
                }
                b'z' => {
                    let longest = refs.chunks(2).map(|p| p[1].len()).max().unwrap();
                    let mut z = ZSet::with_hint(refs.len() / 2, longest, &lim);
                    for p in refs.chunks(2) {
                        let score: f64 = std::str::from_utf8(p[0]).unwrap().parse().unwrap();
                        z.insert(p[1], score, &lim);
                    }
                    Value::ZSet(z)
                }
                _ => panic!("type {t}"),
            };
            let v = ValueRef::of(&value);
            let ours_enc = v.encoding();
            let ok_enc = ours_enc == encoding
                || (matches!(ours_enc, "embstr" | "raw") && matches!(&*encoding, "embstr" | "raw"));
            assert!(
                ok_enc,
                "{}: ours {ours_enc}, Valkey {encoding}",
                String::from_utf8_lossy(&key)
            );
            if encoding == "hashtable" {
                unordered += 1;
            } else if crate::payload::dump(v) == theirs {
                same += 1;
            } else {
                let ours = crate::payload::dump(v);
                let name = String::from_utf8_lossy(&key).into_owned();
                if t == b'l' && list_nodes(&ours) != list_nodes(&theirs) {
                    // The store's quicklist splits nodes by its own
                    // estimate of listpack bytes, not Valkey's.
                    layout.push(name);
                } else {
                    let diff = ours.iter().zip(&theirs).position(|(a, b)| a != b);
                    mismatches.push(format!(
                        "{name} ({} vs Valkey's {} bytes, first difference at {diff:?})",
                        ours.len(),
                        theirs.len()
                    ));
                }
            }
            let mut e = Entry::keyed(&key, value);
            if ttl >= 0 {
                e.set_expire_at_ms(Some(ttl));
            }
            entries.push(e);
        }
        eprintln!(
            "{same} DUMPs identical, {unordered} hashtables not compared, \
             lists split into other nodes: {layout:?}, mismatches: {mismatches:?}"
        );
        if let Ok(out_path) = std::env::var("RINGKV_RDB_OUT") {
            let mut enc = Encoder::new(true, true);
            let mut out = Vec::new();
            enc.header(&mut out);
            let mut c = Capture::new();
            c.aux(b"redis-ver", b"8.1.8");
            c.aux(b"redis-bits", b"64");
            c.select_db(0);
            let expires = entries
                .iter()
                .filter(|e| e.expire_at_ms().is_some())
                .count();
            c.resize_db(entries.len() as u64, expires as u64);
            for e in &entries {
                c.key(e, 0, AccessWrite::None);
                if c.len() > 1 << 16 {
                    enc.feed(&c, &mut out);
                    c.clear();
                }
            }
            enc.feed(&c, &mut out);
            enc.finish(&mut out);
            std::fs::write(out_path, out).unwrap();
        }
        assert!(mismatches.is_empty());
    }
}
