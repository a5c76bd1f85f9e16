//! Db expiry bookkeeping through the public API only.

use std::time::Instant;

use ringkv_store::{Db, Entry, Keyspace, Str, Value, hash_key};

const NOW: i64 = 1_700_000_000_000;

fn entry(i: i64, ttl_at: Option<i64>) -> Entry {
    let mut e = Entry::new(Value::Str(Str::Int(i)));
    e.set_expire_at_ms(ttl_at);
    e
}

fn put(db: &mut Db, k: &str, at: Option<i64>) {
    db.insert(hash_key(k.as_bytes()), k.as_bytes(), entry(0, at), NOW);
}

fn has(db: &Db, k: &str) -> bool {
    db.peek(hash_key(k.as_bytes()), k.as_bytes()).is_some()
}

#[test]
fn expires_count_is_exact() {
    let mut db = Db::default();
    put(&mut db, "a", Some(NOW + 1000));
    put(&mut db, "b", None);
    assert_eq!((db.len(), db.expires_len()), (2, 1));
    // Overwrite a volatile key with a persistent one (SET without KEEPTTL).
    put(&mut db, "a", None);
    assert_eq!(db.expires_len(), 0);
    put(&mut db, "a", Some(NOW + 5));
    put(&mut db, "a", Some(NOW + 6));
    assert_eq!(db.expires_len(), 1);
    let hb = hash_key(b"b");
    assert!(db.set_expire(hb, b"b", Some(NOW + 10)));
    assert!(db.set_expire(hb, b"b", Some(NOW + 20)));
    assert_eq!(db.expires_len(), 2);
    assert!(db.set_expire(hb, b"b", None));
    assert_eq!(db.expires_len(), 1);
    assert!(!db.set_expire(hash_key(b"zz"), b"zz", Some(1)));
    // Lazy expiry on get.
    let ha = hash_key(b"a");
    assert!(db.get(ha, b"a", NOW).is_some());
    assert!(db.get(ha, b"a", NOW + 6).is_none());
    assert_eq!((db.len(), db.expires_len()), (1, 0));
    assert_eq!(db.stats.expired_keys, 1);
    put(&mut db, "c", Some(NOW));
    assert!(db.remove(hash_key(b"c"), b"c").is_some());
    assert_eq!(db.expires_len(), 0);
    put(&mut db, "d", Some(NOW));
    db.clear();
    assert_eq!((db.len(), db.expires_len()), (0, 0));
}

#[test]
fn a_logged_expiry_in_any_database_raises_the_keyspace_signal() {
    let mut ks = Keyspace::new(3);
    for db in &mut ks.dbs {
        db.log_expired = true;
    }
    put(&mut ks.dbs[2], "a", Some(NOW));
    put(&mut ks.dbs[2], "b", None);
    assert!(!ks.expired_logged(), "nothing expired yet");
    // A lookup that finds the key alive, then a miss: neither logs.
    assert!(ks.dbs[2].get(hash_key(b"b"), b"b", NOW + 1).is_some());
    assert!(ks.dbs[2].get(hash_key(b"zz"), b"zz", NOW + 1).is_none());
    assert!(!ks.expired_logged());
    assert!(ks.dbs[2].get(hash_key(b"a"), b"a", NOW + 1).is_none());
    assert!(ks.expired_logged(), "database 2 expired a key");
    ks.expired_log_drained();
    assert_eq!(ks.dbs[2].take_expired(), vec![Box::from(&b"a"[..])]);
    assert!(!ks.expired_logged());
    // Not logged, not raised: nobody listens to database 0.
    ks.dbs[0].log_expired = false;
    put(&mut ks.dbs[0], "c", Some(NOW));
    assert!(ks.dbs[0].get(hash_key(b"c"), b"c", NOW + 1).is_none());
    assert!(!ks.expired_logged());
    // Active expiry raises it too, and a database moved by SWAPDB keeps
    // raising it.
    ks.swap(1, 2);
    put(&mut ks.dbs[1], "d", Some(NOW));
    assert_eq!(ks.dbs[1].active_expire(NOW + 1, 1_000), 1);
    assert!(ks.expired_logged());
}

#[test]
fn get_updates_access_clock() {
    let mut db = Db::default();
    put(&mut db, "k", None);
    let h = hash_key(b"k");
    assert_eq!(db.get(h, b"k", 42_999).unwrap().access(), 42);
    assert_eq!(db.peek(h, b"k").unwrap().access(), 42);
    // A new entry takes the clock of its insert, not the last lookup's.
    db.insert(hash_key(b"j"), b"j", entry(0, None), 57_000);
    assert_eq!(db.peek(hash_key(b"j"), b"j").unwrap().access(), 57);
}

#[test]
fn scan_and_random_skip_expired() {
    let mut db = Db::default();
    for i in 0..50 {
        put(&mut db, &format!("dead{i}"), Some(NOW - 1));
    }
    put(&mut db, "live", None);
    // SCAN meets every key; `shows` tells the live ones (the engine expires
    // the others as it goes).
    let mut seen = vec![];
    let mut met = 0;
    let mut c = 0;
    loop {
        c = db.scan(c, |k, e| {
            met += 1;
            if db.shows(e, NOW) {
                seen.push(k.to_vec());
            }
        });
        if c == 0 {
            break;
        }
    }
    assert_eq!(met, 51);
    assert_eq!(seen, vec![b"live".to_vec()]);
    for s in 0..20 {
        if let Some(k) = db.random_key(s, NOW) {
            assert_eq!(k, b"live");
        }
    }
    // Picks of expired keys deleted them, so it now always succeeds.
    while db.len() > 10 {
        db.random_key(db.len() as u64, NOW);
    }
    assert_eq!(db.random_key(7, NOW).as_deref(), Some(&b"live"[..]));
    assert_eq!(db.expires_len(), db.len() - 1);
    let mut empty = Db::default();
    assert!(empty.random_key(1, NOW).is_none());
}

/// While expiry is paused and hides keys past their time (a replica, a
/// pause, import mode), a keyspace of nothing but such keys still gives a
/// random key after a bound number of picks, as Valkey's dbRandomKey, and
/// deletes none; with expired keys revealed they are ordinary keys.
#[test]
fn random_key_ends_when_every_key_is_expired_but_none_may_be_deleted() {
    let mut db = Db::default();
    for i in 0..20 {
        put(&mut db, &format!("dead{i}"), Some(NOW - 1));
    }
    db.expiry_paused = true;
    db.expiry_hidden = true;
    let k = db.random_key(3, NOW).expect("gives up and returns one");
    assert!(k.starts_with(b"dead"));
    assert_eq!(db.len(), 20);
    db.expiry_hidden = false;
    assert!(db.shows(db.peek(hash_key(&k), &k).unwrap(), NOW));
    assert!(db.random_key(4, NOW).is_some());
    // With one key that never expires, that one is found instead.
    db.expiry_hidden = true;
    put(&mut db, "live", None);
    for s in 0..10 {
        if let Some(k) = db.random_key(s, NOW) {
            assert!(k == b"live" || db.len() == 21, "{k:?}");
        }
    }
    assert_eq!(db.len(), 21);
}

#[test]
fn active_expire_removes_untouched_expired_keys() {
    let mut db = Db::default();
    for i in 0..3000 {
        put(&mut db, &format!("gone{i}"), Some(NOW + (i % 100)));
        put(&mut db, &format!("stay{i}"), Some(NOW + 1_000_000));
        put(&mut db, &format!("persist{i}"), None);
    }
    assert_eq!(db.expires_len(), 6000);
    // Nothing is due yet.
    assert_eq!(db.active_expire(NOW - 1, 10_000), 0);
    assert_eq!(db.stats.expired_stale_perc, 0.0);
    let mut removed = 0;
    for _ in 0..1000 {
        removed += db.active_expire(NOW + 100, 100_000);
        if db.expires_len() <= 3000 + 300 {
            break;
        }
    }
    // The cycle stops once under ~10% of a sample is stale, so a few expired
    // keys may remain; they are a small fraction.
    assert!(db.expires_len() <= 3300, "{}", db.expires_len());
    assert_eq!(db.len(), 6000 + 3000 - removed);
    assert_eq!(db.stats.expired_keys, removed as u64);
    assert!(db.stats.expired_stale_perc > 0.0);
    for i in 0..3000 {
        assert!(has(&db, &format!("stay{i}")));
        assert!(has(&db, &format!("persist{i}")));
    }
    // With only expired keys left to sample, one cycle gets them all.
    let mut db = Db::default();
    for i in 0..5000 {
        put(&mut db, &format!("k{i}"), Some(NOW));
    }
    assert_eq!(db.active_expire(NOW, 1_000_000), 5000);
    assert_eq!((db.len(), db.expires_len()), (0, 0));
    assert_eq!(db.stats.expired_time_cap_reached_count, 0);
}

#[test]
fn active_expire_respects_budget() {
    let mut db = Db::default();
    let n = 300_000;
    for i in 0..n {
        put(&mut db, &format!("key:{i:08}"), Some(NOW - 1));
    }
    let t = Instant::now();
    let removed = db.active_expire(NOW, 1_000);
    let took = t.elapsed();
    assert!(removed > 0 && removed < n, "{removed}");
    // 1 ms budget; allow slack for one sample and a loaded 2-core box.
    assert!(took.as_millis() < 50, "{took:?}");
    assert_eq!(db.stats.expired_time_cap_reached_count, 1);
    assert_eq!(db.len(), n - removed);
    assert_eq!(db.expires_len(), n - removed);
}

#[test]
fn expiry_index_survives_resizes() {
    // Grow and shrink both tables with interleaved TTL changes; the count
    // must stay exact and each volatile key must stay expirable.
    let mut db = Db::default();
    let mut volatile = 0;
    for i in 0..20_000 {
        let at = (i % 3 == 0).then_some(NOW + i as i64);
        volatile += at.is_some() as usize;
        put(&mut db, &format!("k{i}"), at);
        if i % 5 == 0 {
            let k = format!("k{}", i / 2);
            let h = hash_key(k.as_bytes());
            let was = db.peek(h, k.as_bytes()).unwrap().expire_at_ms().is_some();
            db.set_expire(h, k.as_bytes(), None);
            volatile -= was as usize;
        }
    }
    assert_eq!(db.expires_len(), volatile);
    for i in 0..20_000 {
        if i % 4 != 0 {
            let k = format!("k{i}");
            let h = hash_key(k.as_bytes());
            if db.remove(h, k.as_bytes()).unwrap().expire_at_ms().is_some() {
                volatile -= 1;
            }
        }
    }
    assert_eq!(db.expires_len(), volatile);
    let mut removed = 0;
    for _ in 0..10_000 {
        removed += db.active_expire(i64::MAX, 1_000_000);
        if db.expires_len() == 0 {
            break;
        }
    }
    assert_eq!(removed, volatile);
    assert_eq!(db.expires_len(), 0);
    assert!(db.memory_usage() > 0);
}

#[test]
fn eviction_sample_always_finds_a_key_in_a_non_empty_table() {
    // Shrinking leaves most keys in one array and few in the other; a
    // sample starting in the near-empty one must still find a key.
    let mut db = Db::default();
    for i in 0..5000 {
        put(
            &mut db,
            &format!("k{i}"),
            if i % 2 == 0 { Some(NOW + 1000) } else { None },
        );
    }
    for i in 0..4990 {
        let k = format!("k{i}");
        db.remove(hash_key(k.as_bytes()), k.as_bytes());
        if i % 97 == 0 {
            for volatile in [false, true] {
                let want = if volatile { db.expires_len() } else { db.len() };
                let mut n = 0;
                let mut keys = vec![];
                db.sample(5, volatile, i as u64, |e| {
                    keys.push(db_keys_view(e));
                    n += 1;
                });
                assert!(keys.iter().all(|k| has(&db, k)));
                assert!(n > 0 || want == 0, "nothing sampled from {want} keys");
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    for seed in 0..200 {
        db.sample(3, false, seed, |e| {
            seen.insert(e.key().to_vec());
        });
    }
    assert_eq!(seen.len(), db.len(), "every remaining key can be sampled");
}

/// The key of a sampled entry, checked to be a live key by `has`.
fn db_keys_view(e: &Entry) -> String {
    String::from_utf8(e.key().to_vec()).unwrap()
}

#[test]
fn expiry_index_memory_is_reported_apart_from_the_table() {
    let mut db = Db::default();
    put(&mut db, "p", None);
    assert_eq!(db.memory_usage(), db.table_overhead());
    for i in 0..100 {
        put(&mut db, &format!("t{i}"), Some(NOW + 1000));
    }
    assert!(db.memory_usage() >= db.table_overhead() + 100 * 16);
}

#[test]
fn a_batch_sample_takes_its_whole_count_and_the_prefetch_hints_change_nothing() {
    // Eviction's batches sample maxmemory-samples × keys in one run and
    // prefetch it first; on an empty table, and while it shrinks (two
    // arrays), the hints must neither fail nor change a thing.
    let mut db = Db::default();
    db.prefetch_sample(1);
    db.prefetch_sample_nodes(1, 40);
    db.prefetch_removals(&[hash_key(b"k1")]);
    let mut n = 0;
    db.sample(40, false, 1, |_| n += 1);
    assert_eq!(n, 0);
    for i in 0..5000 {
        put(&mut db, &format!("k{i}"), None);
    }
    for i in 0..4000 {
        let k = format!("k{i}");
        db.remove(hash_key(k.as_bytes()), k.as_bytes());
        if i % 500 == 0 {
            let hashes: Vec<u64> = (i..i + 8)
                .map(|j| hash_key(format!("k{j}").as_bytes()))
                .collect();
            for seed in 0..20u64 {
                db.prefetch_sample(seed);
                db.prefetch_sample_nodes(seed, 40);
                db.prefetch_removals(&hashes);
                let mut keys = vec![];
                db.sample(40, false, seed, |e| keys.push(db_keys_view(e)));
                assert_eq!(keys.len(), 40, "a run of 40 from {} keys", db.len());
                assert!(keys.iter().all(|k| has(&db, k)));
            }
        }
    }
    assert_eq!(db.len(), 1000);
}

#[test]
fn a_staged_load_replaces_the_keys_with_their_expiry() {
    let mut db = Db::default();
    put(&mut db, "old", Some(NOW + 1000));
    put(&mut db, "gone", None);
    let mut staged = db.staging();
    assert_eq!((staged.len(), staged.expires_len()), (0, 0));
    put(&mut staged, "new", Some(NOW + 5));
    // The live database is untouched until the load is whole.
    assert!(has(&db, "old") && has(&db, "gone") && !has(&db, "new"));
    let old = db.replace_keys(staged);
    assert_eq!((old.len(), old.expires_len()), (2, 1));
    assert!(has(&db, "new") && !has(&db, "old") && !has(&db, "gone"));
    assert_eq!((db.len(), db.expires_len()), (1, 1));
}
