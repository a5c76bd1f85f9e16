//! The compact entry node through the public API: every kind of value, in
//! and out of a database, resized in place and moved.

use std::sync::Arc;

use ringkv_store::types::Hash;
use ringkv_store::{
    AccessPolicy, Db, Entry, Keyspace, SHARED_STR_MIN, Str, StrRef, Value, ValueRef, hash_key,
};

const NOW: i64 = 1_700_000_000_000;

#[test]
fn small_strings_and_integers_live_in_one_small_node() {
    let e = Entry::keyed_str(b"key:123456", StrRef::Bytes(&[b'x'; 16]), None);
    assert_eq!(e.node_size(), 32, "header 4 + key 1+10 + value 1+16");
    assert_eq!(e.key(), b"key:123456");
    assert_eq!(e.str(), Some(StrRef::Bytes(&[b'x'; 16])));
    assert_eq!(e.encoding(), "embstr");
    let n = Entry::keyed_str(b"n", StrRef::Int(-42), None);
    assert_eq!(n.str(), Some(StrRef::Int(-42)));
    assert_eq!(n.encoding(), "int");
    assert_eq!(n.node_size(), 4 + 2 + 8);
}

#[test]
fn values_change_in_place_and_keep_key_expiry_and_access() {
    let mut e = Entry::keyed_str(b"k", StrRef::Bytes(b"short"), None);
    e.set_expire_at_ms(Some(NOW));
    e.set_access(0xABCDEF);
    e.set_str(StrRef::Bytes(&[b'y'; 300]));
    assert_eq!(e.str().unwrap().bytes().unwrap(), &[b'y'; 300][..]);
    assert_eq!(e.encoding(), "raw");
    e.set_str(StrRef::Int(7));
    assert_eq!(
        (e.key(), e.expire_at_ms(), e.access()),
        (&b"k"[..], Some(NOW), 0xABCDEF)
    );
    // Editing promotes an inline string to a boxed one (Valkey's `raw`).
    if let Value::Str(s) = e.value_mut() {
        *s = Str::Raw(b"7!".to_vec());
    }
    assert_eq!(e.str(), Some(StrRef::Raw(b"7!")));
    assert_eq!(e.encoding(), "raw");
    e.set_expire_at_ms(None);
    assert_eq!(e.expire_at_ms(), None);
    e.set_expire_at_ms(Some(NOW + 5));
    assert_eq!(e.expire_at_ms(), Some(NOW + 5));
    assert_eq!((e.key(), e.access()), (&b"k"[..], 0xABCDEF));
    assert_eq!(e.into_value(), Value::Str(Str::Raw(b"7!".to_vec())));
}

#[test]
fn large_and_collection_values_are_boxed() {
    let big = vec![b'z'; SHARED_STR_MIN];
    let e = Entry::keyed_str(b"big", StrRef::Bytes(&big), None);
    assert!(matches!(e.str(), Some(StrRef::Shared(b)) if b.len() == big.len()));
    let shared: Arc<[u8]> = Arc::from(&big[..]);
    let e = Entry::keyed(b"s", Value::Str(Str::Shared(shared.clone())));
    assert!(matches!(e.str(), Some(StrRef::Shared(b)) if Arc::ptr_eq(b, &shared)));
    drop(e);
    assert_eq!(
        Arc::strong_count(&shared),
        1,
        "the node released its reference"
    );
    let mut h = Entry::keyed(b"h", Value::Hash(Hash::new()));
    assert!(matches!(h.value(), ValueRef::Hash(_)));
    assert_eq!(h.type_name(), "hash");
    let moved = h.to_value();
    assert!(matches!(moved, Value::Hash(_)));
    h.set_value(Value::Str(Str::Bytes(b"now a string".to_vec())));
    assert_eq!(h.str(), Some(StrRef::Bytes(b"now a string")));
    assert!(h.memory_usage() >= h.node_size());
}

#[test]
fn overwrites_and_moves_keep_lookups_working() {
    let mut db = Db::default();
    for i in 0..5000u32 {
        let k = format!("key:{i}");
        let h = hash_key(k.as_bytes());
        db.insert(
            h,
            k.as_bytes(),
            Entry::new(Value::Str(Str::Int(i as i64))),
            NOW,
        );
        // Overwrite half of them at once: the replaced slot keeps its tag.
        if i % 2 == 0 {
            let before = db.peek(h, k.as_bytes()).and_then(|e| e.str());
            assert_eq!(before, Some(StrRef::Int(i as i64)));
            let old = db.insert(
                h,
                k.as_bytes(),
                Entry::keyed_str(k.as_bytes(), StrRef::Bytes(b"v"), None),
                NOW,
            );
            assert_eq!(old, Some(ringkv_store::Replaced { expired: false }));
        }
    }
    for i in 0..5000u32 {
        let k = format!("key:{i}");
        let e = db
            .get(hash_key(k.as_bytes()), k.as_bytes(), NOW)
            .expect("present");
        // Grow some values past their size class, moving the node.
        e.set_str(StrRef::Bytes(&[b'q'; 200]));
    }
    for i in 0..5000u32 {
        let k = format!("key:{i}");
        let e = db
            .peek(hash_key(k.as_bytes()), k.as_bytes())
            .expect("present");
        assert_eq!(e.str().unwrap().bytes().unwrap().len(), 200);
    }
    // RENAME-like move to another key keeps value and expiry.
    let h = hash_key(b"key:1");
    db.set_expire(h, b"key:1", Some(NOW + 1000));
    let e = db.remove(h, b"key:1").unwrap();
    db.insert(hash_key(b"dst"), b"dst", e, NOW);
    let d = db.peek(hash_key(b"dst"), b"dst").unwrap();
    assert_eq!((d.expire_at_ms(), d.key()), (Some(NOW + 1000), &b"dst"[..]));
    assert_eq!(db.expires_len(), 1);
}

#[test]
fn lru_and_lfu_stamps_follow_valkey() {
    let mut ks = Keyspace::new(1);
    let db = &mut ks.dbs[0];
    let h = hash_key(b"k");
    db.insert(h, b"k", Entry::new(Value::Str(Str::Int(1))), NOW);
    assert_eq!(db.peek(h, b"k").unwrap().idle_ms(NOW + 5_000), 5_000);
    db.get(h, b"k", NOW + 5_000);
    assert_eq!(db.peek(h, b"k").unwrap().idle_ms(NOW + 5_000), 0);
    ks.set_access_policy(AccessPolicy::Lfu {
        log_factor: 10,
        decay_time: 1,
    });
    let db = &mut ks.dbs[0];
    db.insert(
        hash_key(b"f"),
        b"f",
        Entry::new(Value::Str(Str::Int(1))),
        NOW,
    );
    let e = db.peek(hash_key(b"f"), b"f").unwrap();
    assert_eq!(e.lfu_counter(NOW, 1), 5, "LFU_INIT_VAL");
    // Logarithmic: 1000 hits at log factor 10 stay far below 255.
    for _ in 0..1000 {
        db.get(hash_key(b"f"), b"f", NOW);
    }
    let c = db.peek(hash_key(b"f"), b"f").unwrap().lfu_counter(NOW, 1);
    assert!((10..40).contains(&c), "{c}");
    // One period of decay per minute.
    let later = db
        .peek(hash_key(b"f"), b"f")
        .unwrap()
        .lfu_counter(NOW + 3 * 60_000, 1);
    assert_eq!(later, c - 3);
}
