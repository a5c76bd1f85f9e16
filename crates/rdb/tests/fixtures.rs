//! The real dump files make.sh wrote (Valkey 8.1 and Redis 7.0) against
//! the listings of what Valkey 8.1 holds after loading them.

mod common;

use common::*;
use ringkv_rdb::Item;
use ringkv_rdb::restore::restore;
use store::EncodingLimits;

/// Load `name`.rdb and compare it key by key with `name`.expect.
fn check_fixture(name: &str, version: u16, check_enc: impl Fn(&[u8]) -> bool) -> Vec<Item> {
    let data = fixture(&format!("{name}.rdb"));
    let l = ringkv_rdb::Loader::new(&data[..], EncodingLimits::default()).unwrap();
    assert_eq!(l.version(), version);
    let items = load_all(&data, EncodingLimits::default()).unwrap();
    let want = expectations(&format!("{name}.expect"));
    let mut keys: Vec<_> = items
        .iter()
        .filter_map(|i| match i {
            Item::Key(k) => Some(k),
            _ => None,
        })
        .collect();
    keys.sort_by(|a, b| (a.db, &a.key).cmp(&(b.db, &b.key)));
    assert_eq!(keys.len(), want.len(), "{name}: key count");
    for (k, e) in keys.iter().zip(&want) {
        assert_eq!((k.db, &k.key), (e.db, &e.key));
        assert_eq!(k.expire_ms, e.expire_ms, "expiry of {:?}", e.key);
        check(&k.value, e, check_enc(&k.key));
    }
    assert!(items.iter().any(
        |i| matches!(i, Item::Aux { key, .. } if key == b"redis-ver" || key == b"valkey-ver")
    ));
    items
}

/// Sets whose listpack holds only integers: Valkey keeps such a listpack
/// as it loaded it; our `Set` always makes an all-integer small set an
/// intset (store has no constructor for an integer listpack). Same
/// contents, different OBJECT ENCODING.
fn not_int_listpack(key: &[u8]) -> bool {
    key != b"set:lpints"
}

#[test]
fn valkey8_every_type() {
    let items = check_fixture("valkey8-types", 11, not_int_listpack);
    let f: Vec<_> = items
        .iter()
        .filter_map(|i| match i {
            Item::Function(f) => Some(f),
            _ => None,
        })
        .collect();
    assert_eq!(f.len(), 1);
    assert!(f[0].starts_with(b"#!lua name=mylib"));
    assert!(items.iter().any(|i| matches!(i, Item::SelectDb(5))));
    assert!(
        items
            .iter()
            .any(|i| matches!(i, Item::ResizeDb { size: 2, .. }))
    );
}

#[test]
fn redis7_every_type() {
    check_fixture("redis7-types", 10, not_int_listpack);
}

#[test]
fn lfu_and_lru_access_opcodes() {
    for (name, lfu) in [("valkey8-lfu", true), ("valkey8-lru", false)] {
        let items = check_fixture(name, 11, |_| true);
        for i in &items {
            if let Item::Key(k) = i {
                assert_eq!(k.freq.is_some(), lfu, "{name}");
                assert_eq!(k.idle_s.is_some(), !lfu, "{name}");
            }
        }
    }
}

#[test]
fn real_dump_payloads_restore() {
    let text = String::from_utf8(fixture("valkey8.dumps")).unwrap();
    let want = expectations("valkey8-types.expect");
    let mut n = 0;
    for line in text.lines() {
        let (k, p) = line.split_once('\t').unwrap();
        let (key, payload) = (unescape(k), unescape(p));
        // Trailer: 2 bytes of version, 8 of CRC over everything before.
        let (body, trailer) = payload.split_at(payload.len() - 10);
        assert_eq!(u16::from_le_bytes([trailer[0], trailer[1]]), 11);
        let crc = ringkv_rdb::crc64::crc64(0, &payload[..payload.len() - 8]);
        assert_eq!(crc.to_le_bytes(), trailer[2..]);
        let v = restore(body, &EncodingLimits::default()).unwrap();
        let e = want.iter().find(|e| e.key == key).unwrap();
        check(&v, e, not_int_listpack(&key));
        // The body must be consumed exactly.
        let mut longer = body.to_vec();
        longer.push(0);
        assert!(restore(&longer, &EncodingLimits::default()).is_err());
        for cut in 0..body.len() {
            assert!(restore(&body[..cut], &EncodingLimits::default()).is_err());
        }
        n += 1;
    }
    assert!(n > 20);
}

/// The loader honours the limits it is given: the same file under
/// smaller limits gives the large encodings.
#[test]
fn limits_pick_the_encoding() {
    let data = fixture("valkey8-types.rdb");
    let tiny = EncodingLimits {
        list_max_listpack_size: 2,
        list_compress_depth: 0,
        hash_max_listpack_entries: 1,
        hash_max_listpack_value: 64,
        set_max_intset_entries: 1,
        set_max_listpack_entries: 1,
        set_max_listpack_value: 64,
        zset_max_listpack_entries: 1,
        zset_max_listpack_value: 64,
    };
    for i in load_all(&data, tiny).unwrap() {
        if let Item::Key(k) = i {
            let (ty, enc, elems) = describe(&k.value);
            let n = if ty == "hash" || ty == "zset" {
                elems.len() / 2
            } else {
                elems.len()
            };
            match ty {
                "list" if n > 2 => assert_eq!(enc, "quicklist"),
                "hash" if n > 1 => assert_eq!(enc, "hashtable"),
                "set" if n > 1 => assert_eq!(enc, "hashtable"),
                "zset" if n > 1 => assert_eq!(enc, "skiplist"),
                _ => {}
            }
        }
    }
}
