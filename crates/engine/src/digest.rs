//! DEBUG DIGEST and DIGEST-VALUE: Valkey's SHA1 fingerprint of a whole
//! dataset or of single values, bit for bit, so that a digest taken on
//! ringkv can be compared with one taken on Valkey — a replica against its
//! primary, a server that loaded a dump against the one that wrote it.
//!
//! Two ways of adding bytes to a 20-byte digest:
//! * [`xor`]: `d ^= SHA1(bytes)`. Commutative, so it is used wherever
//!   the order is not part of the data: keys, set members, hash fields,
//!   sorted-set members (each pair first digested on its own).
//! * [`mix`]: `d = SHA1(d ^ SHA1(bytes))`. Order matters: list elements,
//!   stream entries, the parts of one element.
//!
//! Per value, the type code (Valkey's `OBJ_*`, 4 bytes big-endian) is
//! mixed first, then the contents as their string forms (integers in
//! decimal, scores as Valkey prints doubles), then `!!expire!!` is
//! xored in if the key has a time to live (its value is not part of it).

use resp::num::{I64_MAX_LEN, fmt_i64};
use store::types::stream::{Elem, Stream};
use store::{Db, Entry, StrRef, StreamId, ValueRef};

pub type Digest = [u8; 20];

fn xor(d: &mut Digest, bytes: &[u8]) {
    let h = script::sha1::digest(bytes);
    for (a, b) in d.iter_mut().zip(h) {
        *a ^= b;
    }
}

fn mix(d: &mut Digest, bytes: &[u8]) {
    xor(d, bytes);
    *d = script::sha1::digest(d);
}

/// Valkey's `OBJ_STRING` ... `OBJ_STREAM` (5 is its modules' type).
fn type_code(v: ValueRef<'_>) -> u32 {
    match v {
        ValueRef::Str(_) => 0,
        ValueRef::List(_) => 1,
        ValueRef::Set(_) => 2,
        ValueRef::ZSet(_) => 3,
        ValueRef::Hash(_) => 4,
        ValueRef::Stream(_) => 6,
    }
}

/// Add one key's value (and whether it expires) to `d` (Valkey's
/// `xorObjectDigest`; the key itself is not part of it).
pub fn add_value(d: &mut Digest, e: &Entry) {
    let v = e.value();
    let mut int = [0u8; I64_MAX_LEN];
    mix(d, &type_code(v).to_be_bytes());
    match v {
        ValueRef::Str(StrRef::Int(n)) => mix(d, fmt_i64(n, &mut int)),
        ValueRef::Str(s) => mix(d, s.bytes().unwrap_or_default()),
        ValueRef::List(l) => l.iter().for_each(|el| mix(d, &el)),
        ValueRef::Set(s) => {
            for m in s.iter() {
                match m {
                    store::types::set::Member::Bytes(b) => xor(d, b),
                    store::types::set::Member::Int(n) => xor(d, fmt_i64(n, &mut int)),
                }
            }
        }
        ValueRef::ZSet(z) => {
            let mut buf = [0u8; resp::num::DOUBLE_MAX_LEN];
            for (m, score) in z.iter() {
                let mut el = Digest::default();
                mix(&mut el, m);
                mix(&mut el, resp::num::fmt_double(score, &mut buf));
                xor(d, &el);
            }
        }
        ValueRef::Hash(h) => {
            for (f, val) in h.iter() {
                let mut el = Digest::default();
                mix(&mut el, f);
                mix(&mut el, val);
                xor(d, &el);
            }
        }
        ValueRef::Stream(s) => add_stream(d, s),
    }
    if e.expire_at_ms().is_some() {
        xor(d, b"!!expire!!");
    }
}

/// A stream's entries in order: `<ms>.<seq>`, then each field and value.
/// Consumer groups are not part of it (nor of Valkey's).
fn add_stream(d: &mut Digest, s: &Stream) {
    let mut buf = Vec::new();
    let mut add = |d: &mut Digest, e: Elem<'_>| {
        buf.clear();
        e.write_to(&mut buf);
        mix(d, &buf);
    };
    s.range(StreamId::MIN, StreamId::MAX, false, |entry| {
        mix(d, format!("{}.{}", entry.id.ms, entry.id.seq).as_bytes());
        for (field, value) in entry.pairs() {
            add(d, field);
            add(d, value);
        }
        true
    });
}

/// The digest of every database: each non-empty one's number mixed in,
/// then each key-value pair's own digest (key mixed, then the value)
/// xored in. Keys past their expiry time that are still held count, as
/// in Valkey. All zeros for an empty dataset.
pub fn dataset<'a>(dbs: impl Iterator<Item = &'a Db>) -> Digest {
    let mut total = Digest::default();
    for (n, db) in dbs.enumerate() {
        if db.is_empty() {
            continue;
        }
        mix(&mut total, &(n as u32).to_be_bytes());
        for (key, e) in db.iter() {
            let mut d = Digest::default();
            mix(&mut d, key);
            add_value(&mut d, e);
            xor(&mut total, &d);
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `parts` added one after the other to a zero digest by `add`.
    fn of(add: fn(&mut Digest, &[u8]), parts: &[&[u8]]) -> Digest {
        let mut d = Digest::default();
        parts.iter().for_each(|p| add(&mut d, p));
        d
    }

    #[test]
    fn xor_ignores_order_and_mix_does_not() {
        assert_eq!(of(xor, &[b"x", b"y"]), of(xor, &[b"y", b"x"]));
        assert_ne!(of(mix, &[b"x", b"y"]), of(mix, &[b"y", b"x"]));
        // "fo" + "obar" is not "foo" + "bar".
        assert_ne!(of(mix, &[b"fo", b"obar"]), of(mix, &[b"foo", b"bar"]));
    }
}
