//! Encodings today's servers no longer write (ziplists, zipmaps, quicklist
//! 1, string-scored sorted sets, files before version 9) and opcodes the
//! fixtures do not carry, built byte by byte from the format; plus the
//! refusals (modules, streams, newer versions) and deep-sanitization
//! errors.

mod common;

use common::*;
use ringkv_rdb::consts::*;
use ringkv_rdb::restore::restore;
use ringkv_rdb::{Item, KeyRecord, Loader};
use store::{EncodingLimits, Str, Value};

fn lim() -> EncodingLimits {
    EncodingLimits::default()
}

fn keys(data: &[u8]) -> Vec<KeyRecord> {
    load_all(data, lim())
        .unwrap()
        .into_iter()
        .filter_map(|i| match i {
            Item::Key(k) => Some(k),
            _ => None,
        })
        .collect()
}

fn load_err(data: &[u8]) -> ringkv_rdb::Error {
    load_all(data, lim()).unwrap_err()
}

/// A ziplist: zlbytes, zltail, zllen, entries (1-byte prevlen + the given
/// encoding/data), 0xFF.
fn ziplist(entries: &[&[u8]]) -> Vec<u8> {
    let mut body = Vec::new();
    let mut prev = 0u8;
    let mut tail = 10;
    for e in entries {
        tail = 10 + body.len();
        body.push(prev);
        body.extend_from_slice(e);
        prev = (e.len() + 1) as u8;
    }
    let mut z = ((10 + body.len() + 1) as u32).to_le_bytes().to_vec();
    z.extend_from_slice(&(tail as u32).to_le_bytes());
    z.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    z.extend_from_slice(&body);
    z.push(0xff);
    z
}

/// A listpack: total bytes, count, entries each followed by a 1-byte
/// back-length (entries here are under 128 bytes), 0xFF.
fn listpack(entries: &[&[u8]]) -> Vec<u8> {
    let mut body = Vec::new();
    for e in entries {
        body.extend_from_slice(e);
        body.push(e.len() as u8);
    }
    let mut l = ((6 + body.len() + 1) as u32).to_le_bytes().to_vec();
    l.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    l.extend_from_slice(&body);
    l.push(0xff);
    l
}

fn list_items(v: &Value) -> Vec<Vec<u8>> {
    describe(v).2
}

#[test]
fn version_6_file_with_every_legacy_encoding() {
    let mut r = Rdb::new(6);
    r.byte(OPCODE_SELECTDB).len(0);
    // String keys: INT8, INT16, INT32 encodings; an LZF string (literal
    // "abc" then a back reference copying 6 bytes from distance 3).
    r.byte(TYPE_STRING).str(b"i8").raw(&[0xc0, 0xf9]);
    r.byte(TYPE_STRING).str(b"i16").raw(&[0xc1, 0x10, 0x27]);
    r.byte(TYPE_STRING)
        .str(b"i32")
        .raw(&[0xc2, 0x00, 0x94, 0x35, 0x77]);
    r.byte(TYPE_STRING)
        .str(b"lzf")
        .raw(&[0xc3, 6, 9, 2, b'a', b'b', b'c', 4 << 5, 2]);
    // EXPIRETIME in seconds (4 bytes LE) before a key.
    r.byte(OPCODE_EXPIRETIME)
        .raw(&1_000_000_000u32.to_le_bytes());
    r.byte(TYPE_STRING).str(b"old-ttl").str(b"v");
    // Lengths in the 14-bit and 32/64-bit forms (not minimal: allowed).
    r.byte(TYPE_STRING)
        .raw(&[0x40, 0x03])
        .raw(b"k14")
        .raw(&[0x80, 0, 0, 0, 2])
        .raw(b"vv");
    r.byte(TYPE_STRING)
        .raw(&[0x81, 0, 0, 0, 0, 0, 0, 0, 3])
        .raw(b"k64")
        .str(b"x");
    // Zipmap hash (type 9): 2 pairs, "f1"->"v1" with 2 free bytes.
    r.byte(TYPE_HASH_ZIPMAP).str(b"zipmap").str(&[
        2, 2, b'f', b'1', 2, 2, b'v', b'1', 0, 0, 1, b'g', 1, 0, b'w', 0xff,
    ]);
    // Ziplist list (type 10): "a", int16 300, imm 7, int8 -1.
    let zl = ziplist(&[b"\x01a", &[0xc0, 0x2c, 0x01], &[0xf8], &[0xfe, 0xff]]);
    r.byte(TYPE_LIST_ZIPLIST).str(b"zl-list").str(&zl);
    // Intsets (type 11) of width 2, 4 and 8.
    for (k, w, vals) in [
        (&b"is2"[..], 2u32, &[-1i64, 5][..]),
        (b"is4", 4, &[-100000, 100000]),
        (b"is8", 8, &[i64::MIN, 0, i64::MAX]),
    ] {
        let mut b = w.to_le_bytes().to_vec();
        b.extend_from_slice(&(vals.len() as u32).to_le_bytes());
        for v in vals {
            b.extend_from_slice(&v.to_le_bytes()[..w as usize]);
        }
        r.byte(TYPE_SET_INTSET).str(k).str(&b);
    }
    // Ziplist sorted set (type 12): member, score pairs; scores as a
    // string and as an int24.
    let zl = ziplist(&[b"\x01m", b"\x031.5", b"\x01n", &[0xf0, 0x00, 0x00, 0x01]]);
    r.byte(TYPE_ZSET_ZIPLIST).str(b"zl-zset").str(&zl);
    // Ziplist hash (type 13).
    let zl = ziplist(&[b"\x01f", b"\x01v", b"\x02ff", &[0xd0, 1, 0, 0, 0]]);
    r.byte(TYPE_HASH_ZIPLIST).str(b"zl-hash").str(&zl);
    // Quicklist 1 (type 14): two ziplist nodes and an empty one (skipped).
    let n1 = ziplist(&[b"\x01a", b"\x01b"]);
    let n2 = ziplist(&[b"\x01c"]);
    let n3 = ziplist(&[]);
    r.byte(TYPE_LIST_QUICKLIST)
        .str(b"ql1")
        .len(3)
        .str(&n1)
        .str(&n3)
        .str(&n2);
    // Linked list, set, hash, string-scored zset (types 1..4), zset2 (5).
    r.byte(TYPE_LIST)
        .str(b"list")
        .len(2)
        .str(b"x")
        .raw(&[0xc0, 9]);
    r.byte(TYPE_SET).str(b"set").len(2).str(b"m1").str(b"m2");
    r.byte(TYPE_HASH).str(b"hash").len(1).str(b"f").str(b"v");
    // Scores: "2.5", +inf (254), -inf (255).
    r.byte(TYPE_ZSET)
        .str(b"zset1")
        .len(3)
        .str(b"a")
        .raw(&[3])
        .raw(b"2.5")
        .str(b"b")
        .byte(254)
        .str(b"c")
        .byte(255);
    r.byte(TYPE_ZSET_2)
        .str(b"zset2")
        .len(1)
        .str(b"q")
        .raw(&0.25f64.to_le_bytes());
    let data = r.finish(6);
    let ks = keys(&data);
    let get = |k: &[u8]| &ks.iter().find(|r| r.key == k).unwrap().value;
    assert_eq!(get(b"i8"), &Value::Str(Str::Int(-7)));
    assert_eq!(get(b"i16"), &Value::Str(Str::Int(10000)));
    assert_eq!(get(b"i32"), &Value::Str(Str::Int(2000000000)));
    assert_eq!(get(b"lzf"), &Value::Str(Str::Bytes(b"abcabcabc".to_vec())));
    let old = ks.iter().find(|r| r.key == b"old-ttl").unwrap();
    assert_eq!(old.expire_ms, Some(1_000_000_000_000));
    assert_eq!(ks.iter().find(|r| r.key == b"i8").unwrap().expire_ms, None);
    assert_eq!(get(b"k14"), &Value::Str(Str::Bytes(b"vv".to_vec())));
    assert_eq!(get(b"k64"), &Value::Str(Str::Bytes(b"x".to_vec())));
    assert_eq!(
        list_items(get(b"zipmap")),
        vec![b"f1".to_vec(), b"v1".to_vec(), b"g".to_vec(), b"w".to_vec()]
    );
    assert_eq!(
        list_items(get(b"zl-list")),
        vec![
            b"a".to_vec(),
            b"300".to_vec(),
            b"7".to_vec(),
            b"-1".to_vec()
        ]
    );
    assert_eq!(list_items(get(b"is2")), vec![b"-1".to_vec(), b"5".to_vec()]);
    assert_eq!(describe(get(b"is8")).1, "intset");
    assert_eq!(describe(get(b"is8")).2.len(), 3);
    let (_, enc, z) = describe(get(b"zl-zset"));
    assert_eq!(enc, "listpack");
    assert_eq!(
        z,
        vec![
            b"m".to_vec(),
            b"1.5".to_vec(),
            b"n".to_vec(),
            b"65536.0".to_vec()
        ]
    );
    assert_eq!(
        list_items(get(b"zl-hash")),
        vec![b"f".to_vec(), b"v".to_vec(), b"ff".to_vec(), b"1".to_vec()]
    );
    assert_eq!(
        list_items(get(b"ql1")),
        vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]
    );
    assert_eq!(list_items(get(b"list")), vec![b"x".to_vec(), b"9".to_vec()]);
    assert_eq!(describe(get(b"set")).1, "listpack");
    assert_eq!(
        describe(get(b"zset1")).2,
        vec![
            b"c".to_vec(),
            b"-inf".to_vec(),
            b"a".to_vec(),
            b"2.5".to_vec(),
            b"b".to_vec(),
            b"inf".to_vec()
        ]
    );
    assert_eq!(
        describe(get(b"zset2")).2,
        vec![b"q".to_vec(), b"0.25".to_vec()]
    );
}

#[test]
fn version_4_has_no_checksum_and_version_1_loads() {
    for v in [1, 4] {
        let mut r = Rdb::new(v);
        r.byte(TYPE_STRING).str(b"k").str(b"v");
        let data = r.finish(v);
        assert_eq!(keys(&data).len(), 1);
        assert_eq!(Loader::new(&data[..], lim()).unwrap().version(), v);
    }
}

#[test]
fn quicklist2_plain_and_packed_nodes_listpack_set_slot_info() {
    let mut r = Rdb::new(11);
    r.byte(OPCODE_AUX).str(b"valkey-ver").str(b"8.1.0");
    // Valkey 8 cluster slot info: slot, size, expires size; skipped.
    r.byte(OPCODE_SLOT_INFO).len(7).len(1).len(0);
    r.byte(OPCODE_RESIZEDB).len(3).len(1);
    r.byte(OPCODE_IDLE).len(1234);
    r.byte(OPCODE_EXPIRETIME_MS)
        .raw(&1_700_000_000_000i64.to_le_bytes());
    // Quicklist 2: a PLAIN node holding one element as is, then a PACKED
    // listpack node (7-bit int 5, 13-bit int -1, 6-bit string "hi"), and
    // an empty PACKED node (skipped, as Valkey does).
    let lp = listpack(&[&[5], &[0xdf, 0xff], b"\x82hi"]);
    r.byte(TYPE_LIST_QUICKLIST_2)
        .str(b"ql2")
        .len(3)
        .len(QUICKLIST_NODE_PLAIN)
        .str(b"plain element")
        .len(QUICKLIST_NODE_PACKED)
        .str(&lp)
        .len(QUICKLIST_NODE_PACKED)
        .str(&listpack(&[]));
    r.byte(OPCODE_FREQ).byte(7);
    r.byte(TYPE_SET_LISTPACK)
        .str(b"lpset")
        .str(&listpack(&[b"\x81a", &[1]]));
    r.byte(TYPE_HASH_LISTPACK)
        .str(b"lphash")
        .str(&listpack(&[b"\x81f", &[0xf1, 0x00, 0x80]]));
    r.byte(OPCODE_FUNCTION2).str(b"#!lua name=x\n");
    let items = load_all(&r.finish(11), lim()).unwrap();
    assert!(
        matches!(&items[0], Item::Aux { key, value } if key == b"valkey-ver" && value == b"8.1.0")
    );
    assert!(matches!(
        items[1],
        Item::ResizeDb {
            size: 3,
            expires: 1
        }
    ));
    let Item::Key(ql) = &items[2] else { panic!() };
    assert_eq!(ql.idle_s, Some(1234));
    assert_eq!(ql.expire_ms, Some(1_700_000_000_000));
    assert_eq!(ql.freq, None);
    assert_eq!(
        list_items(&ql.value),
        vec![
            b"plain element".to_vec(),
            b"5".to_vec(),
            b"-1".to_vec(),
            b"hi".to_vec()
        ]
    );
    let Item::Key(s) = &items[3] else { panic!() };
    assert_eq!((s.freq, s.idle_s, s.expire_ms), (Some(7), None, None));
    assert_eq!(describe(&s.value).2, vec![b"1".to_vec(), b"a".to_vec()]);
    let Item::Key(h) = &items[4] else { panic!() };
    assert_eq!(
        describe(&h.value).2,
        vec![b"f".to_vec(), b"-32768".to_vec()]
    );
    assert!(matches!(&items[5], Item::Function(f) if f == b"#!lua name=x\n"));
    assert_eq!(items.len(), 6);
}

#[test]
fn checksum_zero_is_accepted_and_a_wrong_one_named() {
    let mut r = Rdb::new(11);
    r.byte(TYPE_STRING).str(b"k").str(b"v");
    let mut data = r.finish(11);
    let n = data.len();
    data[n - 8..].copy_from_slice(&[0; 8]);
    assert_eq!(keys(&data).len(), 1);
    data[n - 1] = 1;
    let e = load_err(&data);
    assert!(e.msg.contains("checksum mismatch"), "{e}");
    assert_eq!(e.offset, (n - 8) as u64);
}

#[test]
fn header_refusals() {
    let e = Loader::new(&b"REDIS0012\xff"[..], lim()).err().unwrap();
    assert_eq!(e.offset, 5);
    assert_eq!(
        e.msg,
        "RDB version 12 is newer than this server supports (11)"
    );
    for bad in [&b"HELLO WORLD"[..], b"", b"RED", b"\x00REDIS0011"] {
        let e = Loader::new(bad, lim()).err().unwrap();
        assert_eq!(e.msg, "not an RDB file (bad magic)");
        assert_eq!(e.offset, 0);
    }
    assert!(Loader::new(&b"REDIS00x1"[..], lim()).is_err());
    assert!(Loader::new(&b"REDIS0000"[..], lim()).is_err());
    assert!(Loader::new(&b"REDIS00"[..], lim()).is_err());
}

#[test]
fn modules_and_pre_ga_functions_are_refused_and_bad_streams_rejected() {
    // A module value: type 7, key, module id ("mymodule1" v3, as Valkey
    // packs 9 six-bit characters and a 10-bit version).
    const CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let id = b"mymodule1".iter().fold(0u64, |id, c| {
        (id << 6) | CHARS.iter().position(|x| x == c).unwrap() as u64
    }) << 10
        | 3;
    let mut r = Rdb::new(11);
    r.byte(TYPE_STRING).str(b"ok").str(b"v");
    let at = r.buf.len() as u64;
    r.byte(TYPE_MODULE_2).str(b"modkey").len(id);
    let e = load_err(&r.finish(11));
    assert_eq!(e.offset, at);
    assert!(e.msg.starts_with("module value type 7 (module id"), "{e}");
    assert!(
        e.msg.contains("mymodule1") && e.msg.contains("modkey"),
        "{e}"
    );

    for t in [
        TYPE_STREAM_LISTPACKS,
        TYPE_STREAM_LISTPACKS_2,
        TYPE_STREAM_LISTPACKS_3,
    ] {
        // Streams load (see the stream module's tests); a node key that
        // is not a 16-byte ID is refused with the key named.
        let mut r = Rdb::new(11);
        r.byte(t)
            .str(b"stream-key")
            .len(1)
            .str(b"short")
            .raw(&[0; 20]);
        let e = load_err(&r.finish(11));
        assert!(e.msg.contains("not the size of a stream ID"), "{e}");
        assert!(e.msg.contains("stream-key"), "{e}");
    }
    for op in [OPCODE_FUNCTION_PRE_GA, OPCODE_MODULE_AUX] {
        let mut r = Rdb::new(10);
        r.byte(op).len(id).raw(&[0; 10]);
        let e = load_err(&r.finish(10));
        assert_eq!(e.offset, 9);
        assert!(e.msg.contains("not supported"), "{e}");
    }
    let mut r = Rdb::new(11);
    r.byte(8).str(b"k");
    assert!(load_err(&r.finish(11)).msg.contains("unknown"));
}

/// One key of type `t` whose value bytes are `v`; the error it gives.
fn value_err(t: u8, v: &[u8]) -> ringkv_rdb::Error {
    let mut r = Rdb::new(11);
    r.byte(t).str(b"bad").raw(v);
    let e = load_err(&r.finish(11));
    // RESTORE gives the same verdict on the bare value.
    let mut body = vec![t];
    body.extend_from_slice(v);
    assert!(restore(&body, &lim()).is_err());
    e
}

#[test]
fn deep_sanitization() {
    let dup_set = value_err(TYPE_SET, b"\x02\x01a\x01a");
    assert!(
        dup_set
            .msg
            .starts_with("duplicate set member in key \"bad\""),
        "{dup_set}"
    );
    assert_eq!(dup_set.offset, 9 + 1 + 4 + 1 + 2);
    assert!(
        value_err(TYPE_HASH, b"\x02\x01f\x01v\x01f\x01w")
            .msg
            .contains("duplicate hash field")
    );
    let z = [
        b"\x02\x01m".to_vec(),
        1f64.to_le_bytes().to_vec(),
        b"\x01m".to_vec(),
        2f64.to_le_bytes().to_vec(),
    ]
    .concat();
    assert!(
        value_err(TYPE_ZSET_2, &z)
            .msg
            .contains("duplicate sorted set member")
    );
    let nan = [b"\x01\x01m".to_vec(), f64::NAN.to_le_bytes().to_vec()].concat();
    assert!(value_err(TYPE_ZSET_2, &nan).msg.contains("NaN"));
    assert!(value_err(TYPE_ZSET, b"\x01\x01m\xfd").msg.contains("NaN"));
    assert!(
        value_err(TYPE_ZSET, b"\x01\x01m\x03abc")
            .msg
            .contains("score")
    );
    for t in [
        TYPE_LIST,
        TYPE_SET,
        TYPE_ZSET,
        TYPE_ZSET_2,
        TYPE_HASH,
        TYPE_LIST_QUICKLIST_2,
    ] {
        assert!(value_err(t, b"\x00").msg.contains("empty"), "type {t}");
    }
    // Empty blobs where a collection needs elements.
    let mut lp = vec![];
    put_len(&mut lp, 7);
    lp.extend_from_slice(&listpack(&[]));
    for t in [TYPE_SET_LISTPACK, TYPE_HASH_LISTPACK, TYPE_ZSET_LISTPACK] {
        assert!(value_err(t, &lp).msg.contains("empty"), "type {t}");
    }
    let dup = listpack(&[b"\x81a", b"\x81a"]);
    let mut v = vec![dup.len() as u8];
    v.extend_from_slice(&dup);
    assert!(value_err(TYPE_SET_LISTPACK, &v).msg.contains("duplicate"));
    let odd = listpack(&[b"\x81a", b"\x81b", b"\x81c"]);
    let mut v = vec![odd.len() as u8];
    v.extend_from_slice(&odd);
    assert!(value_err(TYPE_HASH_LISTPACK, &v).msg.contains("odd"));
    let dup_hash = listpack(&[b"\x81a", b"\x81x", b"\x81a", b"\x81y"]);
    let mut v = vec![dup_hash.len() as u8];
    v.extend_from_slice(&dup_hash);
    assert!(
        value_err(TYPE_HASH_LISTPACK, &v)
            .msg
            .contains("duplicate hash field")
    );
    assert!(value_err(TYPE_ZSET_LISTPACK, &v).msg.contains("score"));
    let zl = ziplist(&[b"\x01a", b"\x01b", b"\x01a", b"\x01c"]);
    let mut v = vec![zl.len() as u8];
    v.extend_from_slice(&zl);
    assert!(value_err(TYPE_HASH_ZIPLIST, &v).msg.contains("duplicate"));
    // An unsorted intset is a duplicate-or-disorder error.
    let is = [2u32.to_le_bytes(), 2u32.to_le_bytes()].concat();
    let mut v = vec![12u8];
    v.extend_from_slice(&is);
    v.extend_from_slice(&[5, 0, 3, 0]);
    assert!(value_err(TYPE_SET_INTSET, &v).msg.contains("ascending"));
    // Quicklist 2 with an unknown container.
    assert!(
        value_err(TYPE_LIST_QUICKLIST_2, b"\x01\x03\x01x")
            .msg
            .contains("container")
    );
    // A blob error's offset points into the file: the listpack's bad
    // back-length byte.
    let mut lp = listpack(&[b"\x81a"]);
    lp[8] = 9;
    let mut v = vec![lp.len() as u8];
    v.extend_from_slice(&lp);
    let e = value_err(TYPE_SET_LISTPACK, &v);
    assert!(e.msg.contains("back-length"), "{e}");
    // Header 9, type 1, key 4, blob length 1, then byte 8 of the blob.
    assert_eq!(e.offset, 9 + 1 + 4 + 1 + 8);
}

#[test]
fn restore_rejects_trailing_bytes_and_empty_bodies() {
    assert!(restore(b"", &lim()).is_err());
    assert_eq!(
        restore(b"\x00\x01v", &lim()).unwrap(),
        Value::Str(Str::Bytes(b"v".to_vec()))
    );
    let e = restore(b"\x00\x01vX", &lim()).unwrap_err();
    assert_eq!(e.offset, 3);
    assert!(e.msg.contains("trailing"));
    assert!(restore(&[TYPE_MODULE_2, 1], &lim()).is_err());
    assert!(restore(&[TYPE_STREAM_LISTPACKS_3], &lim()).is_err());
    assert!(restore(&[200], &lim()).is_err());
}
