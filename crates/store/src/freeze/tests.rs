//! The view's contract: what `freeze_step` visits plus what
//! `take_preimages` returns is exactly the database at the freeze.

use super::*;
use crate::{Keyspace, Str, StrRef, Value, hash_key};
use proptest::prelude::*;
use std::collections::BTreeMap;

/// A key's state as compared: value, expiry, access bits.
type State = (Value, Option<i64>, u32);

fn key(i: u32) -> Vec<u8> {
    if i.is_multiple_of(5) {
        format!("a-longer-key-that-is-not-so-short:{i}").into_bytes()
    } else {
        format!("k{i}").into_bytes()
    }
}

fn put(db: &mut Db, k: &[u8], v: &[u8], exp: Option<i64>) {
    db.insert(
        hash_key(k),
        k,
        Entry::keyed_str(k, StrRef::Bytes(v), exp),
        0,
    );
}

fn state(e: &Entry) -> (Vec<u8>, State) {
    (
        e.key().to_vec(),
        (e.to_value(), e.expire_at_ms(), e.access()),
    )
}

/// The database now, as `iter()` sees it.
fn snapshot(db: &Db) -> BTreeMap<Vec<u8>, State> {
    db.iter().map(|(_, e)| state(e)).collect()
}

/// Collects a view: visited entries and preimages, each key at most once.
#[derive(Default)]
struct Sink {
    got: BTreeMap<Vec<u8>, State>,
}

impl Sink {
    fn add(&mut self, e: &Entry) {
        let (k, s) = state(e);
        let dup = self.got.insert(k.clone(), s);
        assert!(
            dup.is_none(),
            "{:?} captured twice",
            String::from_utf8_lossy(&k)
        );
    }
    fn step(&mut self, db: &mut Db, n: usize) -> bool {
        let more = db.freeze_step(n, |e| self.add(e));
        for e in db.take_preimages() {
            self.add(&e);
        }
        more
    }
    fn drain(&mut self, db: &mut Db) {
        while self.step(db, 7) {}
        self.step(db, 1);
    }
}

fn filled(n: u32) -> Db {
    let mut db = Db::default();
    for i in 0..n {
        put(&mut db, &key(i), format!("v{i}").as_bytes(), None);
    }
    db
}

/// A full table that is not resizing, whatever `n` its fill left behind.
fn settled(n: u32) -> Db {
    let mut db = filled(n);
    while db.rehash_step(1000) {}
    db
}

#[test]
fn no_writes_no_copies() {
    let mut db = settled(5000);
    let before = snapshot(&db);
    let (buckets, _) = db.table.buckets();
    db.freeze(3);
    assert_eq!(db.frozen_index(), Some(3));
    let mut sink = Sink::default();
    while db.freeze_step(3, |e| sink.add(e)) {
        assert!(db.take_preimages().is_empty());
        assert_eq!(db.view_memory_usage(), 0);
        // Reads keep no copy either.
        let k = key(17);
        db.get_read(hash_key(&k), &k, 0).unwrap();
    }
    assert!(db.take_preimages().is_empty());
    assert_eq!(db.table.buckets().0, buckets);
    db.thaw();
    assert_eq!(db.frozen_index(), None);
    assert_eq!(sink.got, before);
}

#[test]
fn writes_before_and_after_the_cursor() {
    let mut db = settled(3000);
    let before = snapshot(&db);
    db.freeze(0);
    let mut sink = Sink::default();
    let half = db.table.home_count() / 2;
    sink.step(&mut db, half);
    let mut writes = 0;
    for i in 0..3000u32 {
        let k = key(i);
        let h = hash_key(&k);
        writes += 1;
        match i % 5 {
            0 => put(&mut db, &k, b"overwritten", Some(99)),
            1 => {
                db.remove(h, &k).unwrap();
            }
            2 => db
                .get(h, &k, 7_000_000)
                .unwrap()
                .set_str(StrRef::Raw(b"edited")),
            3 => *db.get(h, &k, 0).unwrap().value_mut() = Value::Str(Str::Raw(b"boxed".into())),
            _ => assert!(db.set_expire(h, &k, Some(5))),
        }
        // Born after the freeze, in either part; one of them dies again.
        let n = key(10_000 + i);
        put(&mut db, &n, b"new", None);
        if i % 2 == 0 {
            db.remove(hash_key(&n), &n);
        }
    }
    let mut pre = 0;
    while db.freeze_step(5, |e| sink.add(e)) {
        let p = db.take_preimages();
        pre += p.len();
        p.iter().for_each(|e| sink.add(e));
    }
    sink.step(&mut db, 1);
    // One copy per key written ahead of the cursor, none for the others.
    assert!(pre < writes);
    db.thaw();
    assert_eq!(sink.got, before);
}

#[test]
fn a_key_written_twice_is_copied_once() {
    let mut db = settled(100);
    let before = snapshot(&db);
    db.freeze(0);
    let k = key(42);
    let h = hash_key(&k);
    put(&mut db, &k, b"one", None);
    put(&mut db, &k, b"two", None);
    db.remove(h, &k);
    put(&mut db, &k, b"three", Some(1));
    db.get(h, &k, 0).unwrap().set_str(StrRef::Int(4));
    assert_eq!(db.take_preimages().len(), 1);
    let mut sink = Sink::default();
    sink.got.insert(k.clone(), before[&k].clone());
    sink.drain(&mut db);
    assert_eq!(sink.got, before);
}

#[test]
fn get_read_keeps_no_copy() {
    let mut db = settled(100);
    db.freeze(0);
    for i in 0..100 {
        let k = key(i);
        db.get_read(hash_key(&k), &k, 0).unwrap();
    }
    assert!(db.take_preimages().is_empty());
    let k = key(1);
    db.get(hash_key(&k), &k, 0).unwrap();
    assert_eq!(db.take_preimages().len(), 1);
}

fn clear_during_view(take: bool) {
    let mut db = settled(2000);
    let before = snapshot(&db);
    db.freeze(0);
    let mut sink = Sink::default();
    let third = db.table.home_count() / 3;
    sink.step(&mut db, third);
    for i in (0..2000).step_by(3) {
        put(&mut db, &key(i), b"changed", None);
    }
    let preimages = db.view.as_ref().unwrap().preimages.len();
    if take {
        assert!(db.take_contents().is_empty());
    } else {
        db.clear();
    }
    assert!(db.is_empty());
    // No copy is made by the clear, and the new table's keys are newer
    // than the view: the hook is off for them.
    assert_eq!(db.view.as_ref().unwrap().preimages.len(), preimages);
    for i in 0..3000 {
        put(&mut db, &key(i), b"after", None);
        let k = key(i / 2);
        db.get(hash_key(&k), &k, 0);
    }
    assert_eq!(db.view.as_ref().unwrap().preimages.len(), preimages);
    sink.drain(&mut db);
    assert_eq!(sink.got, before);
    let old = db.thaw_detached().expect("the frozen contents");
    assert_eq!(old.len(), 2000);
    assert_eq!(db.len(), 3000);
    assert!(
        db.iter()
            .all(|(_, e)| e.str() == Some(StrRef::Bytes(b"after")))
    );
    // A clear after the view is an ordinary one.
    db.clear();
    assert!(db.is_empty());
}

#[test]
fn clear_during_view_keeps_the_frozen_table() {
    clear_during_view(false);
}

#[test]
fn take_contents_during_view_keeps_the_frozen_table() {
    clear_during_view(true);
}

#[test]
fn resize_in_progress_is_paused_and_resumed() {
    for grow in [true, false] {
        // Stop right after a grow (or a shrink) has started.
        let mut db = settled(if grow { 1000 } else { 4000 });
        let mut i = if grow { 1000 } else { 0 };
        while !db.table.is_rehashing() {
            let k = key(i);
            if grow {
                put(&mut db, &k, b"v", None);
            } else {
                db.remove(hash_key(&k), &k);
            }
            i += 1;
        }
        // Partway through: some of the old array moved, some not.
        db.rehash_step(3);
        assert!(db.table.is_rehashing(), "grow={grow}");
        let before = snapshot(&db);
        let shape = db.table.buckets();
        db.freeze(1);
        let mut sink = Sink::default();
        sink.step(&mut db, 5);
        for i in 0..6000 {
            put(&mut db, &key(i), b"x", None);
            if i % 3 == 0 {
                let k = key(i / 2);
                db.remove(hash_key(&k), &k);
            }
            assert!(!db.rehash_step(10));
        }
        assert_eq!(db.table.buckets(), shape, "nothing moved");
        db.table.check();
        sink.drain(&mut db);
        assert_eq!(sink.got, before);
        db.thaw();
        while db.rehash_step(100) {}
        db.table.check();
        let (n, _) = db.table.buckets();
        assert!(db.len() <= n * 8, "grown to fit after the thaw");
    }
}

#[test]
fn overflow_into_children_while_paused() {
    let mut db = settled(20);
    let before = snapshot(&db);
    let (buckets, _) = db.table.buckets();
    db.freeze(0);
    for i in 20..5000 {
        put(&mut db, &key(i), b"more", None);
    }
    assert_eq!(db.table.buckets(), (buckets, 0));
    assert!(db.table.overflow_buckets() > 500);
    db.table.check();
    for i in 0..5000 {
        let k = key(i);
        assert!(db.peek(hash_key(&k), &k).is_some());
    }
    let mut sink = Sink::default();
    sink.drain(&mut db);
    assert_eq!(sink.got, before);
    // The view had ended; more inserts leave it alone.
    put(&mut db, &key(9999), b"x", None);
    assert!(db.take_preimages().is_empty());
    db.thaw();
    assert!(
        db.table.is_rehashing(),
        "the pending grow starts at the thaw"
    );
    while db.rehash_step(100) {}
    db.table.check();
    assert!(db.table.overflow_buckets() * 10 < db.table.buckets().0);
}

#[test]
fn shrink_waits_for_the_thaw() {
    let mut db = settled(4000);
    let (buckets, _) = db.table.buckets();
    db.freeze(0);
    for i in 0..3990 {
        let k = key(i);
        db.remove(hash_key(&k), &k);
    }
    assert_eq!(db.table.buckets(), (buckets, 0));
    db.thaw();
    while db.rehash_step(100) {}
    assert!(db.table.buckets().0 < buckets);
    assert_eq!(db.len(), 10);
}

#[test]
fn expiry_changes_and_expiry_deletes() {
    let mut db = Db::default();
    for i in 0..1000 {
        let exp = (i % 2 == 0).then_some(1000 + i as i64);
        put(&mut db, &key(i), b"v", exp);
    }
    while db.rehash_step(100) {}
    let before = snapshot(&db);
    db.freeze(0);
    let mut sink = Sink::default();
    sink.step(&mut db, 10);
    for i in 0..1000 {
        let k = key(i);
        let h = hash_key(&k);
        match i % 4 {
            0 => {
                db.set_expire(h, &k, None);
            }
            1 => {
                db.set_expire(h, &k, Some(1500));
            }
            _ => {}
        }
    }
    // Lazy expiry through a read and through a random pick, then the
    // active cycle: all deletions the view has to see past.
    let k = key(2);
    assert!(db.get_read(hash_key(&k), &k, 1600).is_none());
    db.random_key(7, 1600);
    assert!(db.active_expire(1600, 1_000_000) > 0);
    sink.drain(&mut db);
    db.thaw();
    assert_eq!(sink.got, before);
    assert!(db.iter().all(|(_, e)| !e.is_expired(1600)));
}

#[test]
fn the_view_moves_with_swapdb() {
    let mut ks = Keyspace::new(2);
    for i in 0..500 {
        put(&mut ks.dbs[0], &key(i), b"zero", None);
        put(&mut ks.dbs[1], &key(i), b"one", None);
    }
    let before = snapshot(&ks.dbs[0]);
    ks.dbs[0].freeze(0);
    let mut sink = Sink::default();
    sink.step(&mut ks.dbs[0], 3);
    ks.swap(0, 1);
    assert_eq!(ks.dbs[0].frozen_index(), None);
    assert_eq!(ks.dbs[1].frozen_index(), Some(0));
    for i in 0..500 {
        put(&mut ks.dbs[1], &key(i), b"later", None);
        put(&mut ks.dbs[0], &key(i), b"other", None);
    }
    assert!(ks.dbs[0].take_preimages().is_empty());
    sink.drain(&mut ks.dbs[1]);
    ks.dbs[1].thaw();
    assert_eq!(sink.got, before);
}

#[test]
fn freeze_of_an_empty_db() {
    let mut db = Db::default();
    db.freeze(0);
    put(&mut db, b"a", b"b", None);
    assert!(!db.freeze_step(10, |_| panic!("born later")));
    assert!(db.take_preimages().is_empty());
    db.thaw();
    assert_eq!(db.len(), 1);
}

#[test]
fn entry_clone_is_deep() {
    let mut e = Entry::keyed(b"k", Value::Str(Str::Raw(b"abc".to_vec())));
    e.set_expire_at_ms(Some(77));
    e.set_access(1234);
    let c = e.clone();
    if let Value::Str(Str::Raw(b)) = e.value_mut() {
        b.push(b'd');
    }
    assert_eq!(c.key(), b"k");
    assert_eq!(c.str(), Some(StrRef::Raw(b"abc")));
    assert_eq!(c.expire_at_ms(), Some(77));
    assert_eq!(c.access(), 1234);
    for v in [
        Value::Str(Str::Int(-5)),
        Value::Str(Str::Bytes(b"inline".to_vec())),
        Value::Str(Str::from_bytes(&[7; crate::SHARED_STR_MIN])),
    ] {
        let e = Entry::keyed(b"x", v.clone());
        assert_eq!(e.clone().to_value(), v);
    }
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u32, Vec<u8>, Option<i64>),
    Remove(u32),
    SetExpire(u32, Option<i64>),
    /// `get` and change the value (boxed in place, or replaced).
    Mutate(u32, Vec<u8>, bool),
    Read(u32),
    ActiveExpire(i64),
    Clear,
    Step(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0..400u32;
    let v = prop::collection::vec(any::<u8>(), 0..12);
    let exp = prop::option::of(1..1000i64);
    prop_oneof![
        6 => (k.clone(), v.clone(), exp.clone()).prop_map(|(k, v, e)| Op::Insert(k, v, e)),
        3 => k.clone().prop_map(Op::Remove),
        2 => (k.clone(), exp).prop_map(|(k, e)| Op::SetExpire(k, e)),
        3 => (k.clone(), v, any::<bool>()).prop_map(|(k, v, b)| Op::Mutate(k, v, b)),
        1 => k.prop_map(Op::Read),
        1 => (0..1000i64).prop_map(Op::ActiveExpire),
        1 => Just(Op::Clear),
        4 => (0..40usize).prop_map(Op::Step),
    ]
}

type Model = BTreeMap<Vec<u8>, (Vec<u8>, Option<i64>)>;

fn bytes_of(e: &Entry) -> Vec<u8> {
    e.str()
        .and_then(StrRef::bytes)
        .expect("a byte string")
        .to_vec()
}

fn apply(db: &mut Db, m: &mut Model, op: &Op, sink: &mut Sink) {
    match op {
        Op::Insert(i, v, exp) => {
            let k = key(*i);
            put(db, &k, v, *exp);
            m.insert(k, (v.clone(), *exp));
        }
        Op::Remove(i) => {
            let k = key(*i);
            assert_eq!(
                db.remove(hash_key(&k), &k).is_some(),
                m.remove(&k).is_some()
            );
        }
        Op::SetExpire(i, exp) => {
            let k = key(*i);
            let present = m.get_mut(&k).map(|s| s.1 = *exp).is_some();
            assert_eq!(db.set_expire(hash_key(&k), &k, *exp), present);
        }
        Op::Mutate(i, v, in_place) => {
            let k = key(*i);
            // At time 0 nothing has expired: no lazy deletion here.
            match db.get(hash_key(&k), &k, 0) {
                Some(e) if *in_place => match e.value_mut() {
                    Value::Str(s) => *s = Str::Raw(v.clone()),
                    _ => unreachable!(),
                },
                Some(e) => e.set_str(StrRef::Bytes(v)),
                None => assert!(!m.contains_key(&k)),
            }
            if let Some(s) = m.get_mut(&k) {
                s.0 = v.clone();
            }
        }
        Op::Read(i) => {
            let k = key(*i);
            let got = db.get_read(hash_key(&k), &k, 0).map(|e| bytes_of(e));
            assert_eq!(got, m.get(&k).map(|s| s.0.clone()));
        }
        Op::ActiveExpire(now) => {
            db.active_expire(*now, 10_000_000);
            m.retain(|_, s| s.1.is_none_or(|t| t > *now));
        }
        Op::Clear => {
            db.clear();
            m.clear();
        }
        Op::Step(n) => {
            sink.step(db, *n);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn view_is_the_db_at_the_freeze(
        n in 0..400u32,
        drop_every in 1..6u32,
        settle in any::<bool>(),
        ops in prop::collection::vec(op(), 0..300),
    ) {
        // Fill, then thin out: at the freeze the table may be growing,
        // shrinking or still.
        let mut db = Db::default();
        let mut m = Model::new();
        for i in 0..n {
            let v = format!("v{i}").into_bytes();
            let exp = (i % 3 == 0).then_some(i as i64 * 2 + 1);
            put(&mut db, &key(i), &v, exp);
            m.insert(key(i), (v, exp));
        }
        for i in (0..n).filter(|i| i % drop_every == 1) {
            let k = key(i);
            db.remove(hash_key(&k), &k);
            m.remove(&k);
        }
        if settle {
            while db.rehash_step(100) {}
        }
        let before = snapshot(&db);
        db.freeze(5);
        let mut sink = Sink::default();
        for op in &ops {
            apply(&mut db, &mut m, op, &mut sink);
            prop_assert_eq!(db.frozen_index(), Some(5));
        }
        sink.drain(&mut db);
        db.thaw();
        prop_assert_eq!(&sink.got, &before);
        db.table.check();
        let live: Model = db.iter().map(|(k, e)| (k.to_vec(), (bytes_of(e), e.expire_at_ms()))).collect();
        prop_assert_eq!(&live, &m);
        // The table works as ever after the thaw.
        for i in 400..900 {
            put(&mut db, &key(i), b"x", None);
        }
        while db.rehash_step(100) {}
        db.table.check();
        prop_assert_eq!(db.len(), m.len() + 500);
    }
}
