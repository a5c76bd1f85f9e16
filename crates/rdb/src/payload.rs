//! DUMP payloads: type byte + value, the RDB version as 2 bytes (LE) and
//! the CRC64 of all that (LE).
//!
//! Design: a DUMP is the save path in one call: the value is captured
//! and encoded exactly as in a snapshot (compressed unless
//! `rdbcompression` is off, as in Valkey), then the trailer is appended.
//! Verification follows Valkey's `verifyDumpPayload`: at least the 10
//! trailer bytes, a version not newer than ours (with `rdb-version-check
//! relaxed`, also a later Valkey's, outside [`FOREIGN_VERSIONS`]), and a
//! matching CRC (a zero CRC is *not* accepted: only
//! `skip_checksum_validation`, which we do not have, skips the check in
//! Valkey).

use crate::capture::{Capture, Encoder};
use crate::consts::{FOREIGN_VERSIONS, RDB_VERSION};
use crate::crc64::crc64;
use crate::object;
use store::ValueRef;

/// DUMP's reply for a value, compressed as by default.
pub fn dump(v: ValueRef<'_>) -> Vec<u8> {
    dump_with(v, true)
}

/// DUMP's reply for a value; `compress`: `rdbcompression` (Valkey's DUMP
/// follows it as its saves do).
pub fn dump_with(v: ValueRef<'_>, compress: bool) -> Vec<u8> {
    let mut cap = Capture::new();
    cap.raw(&[object::type_byte(v)]);
    object::write_value(&mut cap, v);
    let mut out = Vec::new();
    Encoder::new(compress, false).feed(&cap, &mut out);
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(0, &out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// How many bytes the value takes in an RDB file, after its type byte
/// (Valkey's `rdbSavedObjectLen`, DEBUG OBJECT's `serializedlength`).
pub fn serialized_len(v: ValueRef<'_>, compress: bool) -> usize {
    // A DUMP is the type byte, the value, and 10 bytes of trailer.
    dump_with(v, compress).len() - 11
}

/// Check the trailer: `Some((type byte and value bytes))` when the version
/// is one we load and the checksum matches (Valkey's `verifyDumpPayload`,
/// which does not accept a zero checksum). `relaxed`: `rdb-version-check
/// relaxed`, a later Valkey's version is tried too.
pub fn verify(payload: &[u8], relaxed: bool) -> Option<&[u8]> {
    let n = payload.len();
    if n < 10 {
        return None;
    }
    let footer = &payload[n - 10..];
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let later_valkey = relaxed && version > *FOREIGN_VERSIONS.end();
    if version > RDB_VERSION && !later_valkey {
        return None;
    }
    let crc = u64::from_le_bytes(footer[2..].try_into().expect("8 bytes"));
    (crc64(0, &payload[..n - 8]) == crc).then_some(&payload[..n - 10])
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::types::list::End;
    use store::types::{Hash, List, Set, ZSet};
    use store::{EncodingLimits, Str, StrRef};

    #[test]
    fn dump_and_verify() {
        let s = Str::from_bytes(b"hello");
        let p = dump(ValueRef::Str(StrRef::of(&s)));
        assert_eq!(&p[..7], b"\x00\x05hello");
        assert_eq!(&p[7..9], &[11, 0]);
        assert_eq!(verify(&p, false), Some(&p[..7]));
        let mut bad = p.clone();
        bad[3] ^= 1;
        assert_eq!(verify(&bad, false), None);
        let mut newer = p[..9].to_vec();
        newer[7] = 12;
        let crc = crc64(0, &newer);
        newer.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(verify(&newer, false), None);
        let mut zero = p.clone();
        let at = zero.len() - 8;
        zero[at..].fill(0);
        assert_eq!(verify(&zero, false), None);
        assert_eq!(verify(&p[..9], false), None);
    }

    /// What Valkey 8.1 answers RESTORE with each version under
    /// `rdb-version-check strict` and `relaxed` (run against it).
    #[test]
    fn relaxed_lets_a_later_valkeys_versions_through_but_not_redis_ones() {
        let s = Str::from_bytes(b"hello");
        let p = dump(ValueRef::Str(StrRef::of(&s)));
        let with_version = |v: u16| {
            let mut q = p[..7].to_vec();
            q.extend_from_slice(&v.to_le_bytes());
            let crc = crc64(0, &q);
            q.extend_from_slice(&crc.to_le_bytes());
            q
        };
        for (v, strict, relaxed) in [
            (10, true, true),
            (11, true, true),
            (12, false, false),
            (79, false, false),
            (80, false, true),
            (65535, false, true),
        ] {
            let q = with_version(v);
            assert_eq!(verify(&q, false).is_some(), strict, "{v}, strict");
            assert_eq!(verify(&q, true).is_some(), relaxed, "{v}, relaxed");
        }
    }

    // Fixtures: `DUMP <key>` replies of a real Valkey 8.1.8
    // (`valkey-server --save ''`), after exactly these writes (default
    // encoding limits) on an empty server.
    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn check(v: ValueRef<'_>, valkey_hex: &str) {
        let want = hex(valkey_hex);
        assert_eq!(dump(v), want, "ours vs Valkey's");
        assert!(verify(&want, false).is_some());
    }

    /// `HSET h f1 v1 n 123 neg -5 big 3000000000`
    #[test]
    fn valkey_hash_listpack() {
        let lim = EncodingLimits::default();
        let mut h = Hash::new();
        for (f, v) in [
            ("f1", "v1"),
            ("n", "123"),
            ("neg", "-5"),
            ("big", "3000000000"),
        ] {
            h.set(f.as_bytes(), v.as_bytes(), &lim);
        }
        check(
            ValueRef::Hash(&h),
            "102b2b00000008008266310382763103816e027b01836e656704dffb028362696704f4005ed0b2000000\
             0009ff0b0081b775376443d0e9",
        );
    }

    /// `ZADD z 1 a 2.5 b -3 c 0.1 d 1e30 e inf f`
    #[test]
    fn valkey_zset_listpack() {
        let lim = EncodingLimits::default();
        let mut z = ZSet::new();
        for (s, m) in [(1.0, "a"), (2.5, "b"), (-3.0, "c"), (0.1, "d"), (1e30, "e")] {
            z.insert(m.as_bytes(), s, &lim);
        }
        z.insert(b"f", f64::INFINITY, &lim);
        check(
            ValueRef::ZSet(&z),
            "1134340000000c00816302dffd0281640283302e3104816102010181620283322e35048165028531652b\
             33300681660283696e6604ff0b00681a2aee7c36f861",
        );
    }

    /// `SADD si 1 5 -7 100000`
    #[test]
    fn valkey_set_intset() {
        let lim = EncodingLimits::default();
        let mut s = Set::new();
        for m in ["1", "5", "-7", "100000"] {
            s.add(m.as_bytes(), &lim);
        }
        assert_eq!(s.encoding(), "intset");
        check(
            ValueRef::Set(&s),
            "0b180400000004000000f9ffffff0100000005000000a08601000b00eb88dd7c44760443",
        );
    }

    /// `SADD sl x 42 hello`
    #[test]
    fn valkey_set_listpack() {
        let lim = EncodingLimits::default();
        let mut s = Set::new();
        for m in ["x", "42", "hello"] {
            s.add(m.as_bytes(), &lim);
        }
        assert_eq!(s.encoding(), "listpack");
        check(
            ValueRef::Set(&s),
            "14131300000003008178022a018568656c6c6f06ff0b008bcfcd5aabd1a4d6",
        );
    }

    /// `RPUSH l a 1 -100 5000 "hello world" 70000`
    #[test]
    fn valkey_list_listpack() {
        let lim = EncodingLimits::default();
        let mut l = List::new();
        let items: [&[u8]; 6] = [b"a", b"1", b"-100", b"5000", b"hello world", b"70000"];
        l.push(End::Right, &items, &lim);
        check(
            ValueRef::List(&l),
            "120102252500000006008161020101df9c02f18813038b68656c6c6f20776f726c640cf270110104ff0b\
             00387a18d05be4e3e8",
        );
    }

    /// `SET i 12345`, `SET bigi 123456789012`, `SET s hello`
    #[test]
    fn valkey_strings() {
        check(
            ValueRef::Str(StrRef::Int(12345)),
            "00c139300b00f44b57546e63e130",
        );
        check(
            ValueRef::Str(StrRef::Int(123_456_789_012)),
            "000c3132333435363738393031320b00f8cfbcc22c890e25",
        );
        check(
            ValueRef::Str(StrRef::Bytes(b"hello")),
            "000568656c6c6f0b000aad620598abc983",
        );
    }

    /// `SET lz <"abc" × 40>`: LZF, byte for byte as liblzf.
    #[test]
    fn valkey_lzf_string() {
        let s = b"abc".repeat(40);
        let want = "00c30b40780361626361e069020162630b00ad4b1c03d77dd78f";
        check(ValueRef::Str(StrRef::Bytes(&s)), want);
        let w = hex(want);
        assert_eq!(crate::lzf::decompress(&w[5..16], 120).unwrap(), s);
    }
}
