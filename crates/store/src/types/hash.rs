//! The hash value type: fields mapped to values.
//!
//! ```text
//!   Hash ─┬─ Pack          listpack: field, value, field, value, ... in one
//!         │                exact-size buffer, in insertion order (strpack.rs)
//!         └─ Box<Table>    hashtable: our keyspace table, field → value
//! ```
//!
//! A hash starts as a pack and converts once, for good, when it would hold
//! more than `hash-max-listpack-entries` fields or a field or value longer
//! than `hash-max-listpack-value` bytes, as Valkey does. The table is the
//! same one the keyspace uses, so HSCAN gets its reverse-binary cursor
//! (stable across resizes) and HRANDFIELD its fair random pick for free.

use super::strpack::{Slot, StrPack};
use crate::EncodingLimits;
use crate::defrag::Mover;
use crate::hash::hash_key;
use crate::table::Table;

#[derive(Default)]
enum Repr {
    #[default]
    Empty,
    Pack(StrPack),
    Table(Box<Table<Box<[u8]>>>),
}

/// A hash value.
#[derive(Default)]
pub struct Hash {
    repr: Repr,
}

impl Clone for Hash {
    fn clone(&self) -> Hash {
        let repr = match &self.repr {
            Repr::Empty => Repr::Empty,
            Repr::Pack(p) => Repr::Pack(p.clone()),
            Repr::Table(t) => {
                let mut c = Table::new();
                for (h, k, v) in t.iter_hashed() {
                    c.insert(h, k, v.clone());
                }
                Repr::Table(Box::new(c))
            }
        };
        Hash { repr }
    }
}

impl PartialEq for Hash {
    /// Same pairs, whatever the order and encoding.
    fn eq(&self, other: &Hash) -> bool {
        self.len() == other.len() && self.iter().all(|(f, v)| other.get(f) == Some(v))
    }
}

impl std::fmt::Debug for Hash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(
                self.iter()
                    .map(|(k, v)| (String::from_utf8_lossy(k), String::from_utf8_lossy(v))),
            )
            .finish()
    }
}

type TablePair<'a> = (&'a [u8], &'a Box<[u8]>);

/// Iterator over (field, value).
pub struct Iter<'a>(IterRepr<'a>);

enum IterRepr<'a> {
    Empty,
    Pack(super::strpack::Iter<'a>),
    Table(Box<dyn Iterator<Item = TablePair<'a>> + 'a>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            IterRepr::Empty => None,
            IterRepr::Pack(it) => {
                let f = it.next()?;
                let v = it.next()?;
                Some((f.bytes, v.bytes))
            }
            IterRepr::Table(it) => it.next().map(|(k, v)| (k, &**v)),
        }
    }
}

/// The pack's (field slot, value slot) for `field`.
fn pack_find<'a>(p: &'a StrPack, field: &[u8]) -> Option<(Slot<'a>, Slot<'a>)> {
    let mut it = p.iter();
    while let Some(f) = it.next() {
        let v = it.next()?;
        if f.bytes == field {
            return Some((f, v));
        }
    }
    None
}

/// Does any field come twice? Sorting hashes, not bytes: the bytes of two
/// fields are compared only when their hashes are equal.
fn has_duplicate<'a>(fields: impl Iterator<Item = &'a [u8]>) -> bool {
    let mut hashed: Vec<(u64, &[u8])> = fields.map(|f| (hash_key(f), f)).collect();
    // By hash, then bytes: equal fields end up side by side even among
    // colliding hashes.
    hashed.sort_unstable();
    hashed.windows(2).any(|w| w[0] == w[1])
}

impl Hash {
    /// Offer the packed buffer of a small hash to active defragmentation
    /// (a large one's insides go by [`Hash::relocate_step`]).
    pub(crate) fn relocate(&mut self, m: &mut Mover<'_>) {
        if let Repr::Pack(p) = &mut self.repr {
            p.relocate(m);
        }
    }

    /// A large hash's insides, one step of active defragmentation from
    /// `cursor` (0 starts; 0 when done): its table's struct, then its
    /// nodes, long fields and values a bucket chain at a time.
    pub(crate) fn relocate_step(&mut self, cursor: u64, m: &mut Mover<'_>) -> u64 {
        match &mut self.repr {
            Repr::Table(t) => m.boxed_then(t, cursor, |t, m| {
                t.defrag_step(cursor, m, |v, m| m.bytes(v))
            }),
            _ => 0,
        }
    }

    /// Whether [`Hash::relocate_step`] has work (a table, not a pack).
    pub(crate) fn is_table(&self) -> bool {
        matches!(self.repr, Repr::Table(_))
    }

    pub fn new() -> Hash {
        Hash::default()
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Empty => 0,
            Repr::Pack(p) => p.len() / 2,
            Repr::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// OBJECT ENCODING, with Valkey's names.
    pub fn encoding(&self) -> &'static str {
        match &self.repr {
            Repr::Table(_) => "hashtable",
            _ => "listpack",
        }
    }

    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match &self.repr {
            Repr::Empty => None,
            Repr::Pack(p) => pack_find(p, field).map(|(_, v)| v.bytes),
            Repr::Table(t) => t.get(hash_key(field), field).map(|v| &**v),
        }
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    pub fn iter(&self) -> Iter<'_> {
        match &self.repr {
            Repr::Empty => Iter(IterRepr::Empty),
            Repr::Pack(p) => Iter(IterRepr::Pack(p.iter())),
            Repr::Table(t) => Iter(IterRepr::Table(Box::new(t.iter()))),
        }
    }

    fn convert_to_table(&mut self) {
        let mut t: Table<Box<[u8]>> = Table::new();
        for (f, v) in self.iter() {
            t.insert(hash_key(f), f, v.into());
        }
        self.repr = Repr::Table(Box::new(t));
    }

    /// A hash of `pairs` built at once (RDB load, RESTORE), in the
    /// encoding their count and lengths call for: a pack is one
    /// allocation, not one per field. `None` if a field repeats.
    pub fn from_pairs(pairs: &[(&[u8], &[u8])], limits: &EncodingLimits) -> Option<Hash> {
        if pairs.is_empty() {
            return Some(Hash::new());
        }
        let fits = pairs.len() <= limits.hash_max_listpack_entries
            && pairs.iter().all(|(f, v)| {
                f.len() <= limits.hash_max_listpack_value
                    && v.len() <= limits.hash_max_listpack_value
            });
        if fits {
            if has_duplicate(pairs.iter().map(|p| p.0)) {
                return None;
            }
            let items = pairs.iter().flat_map(|(f, v)| [*f, *v]);
            return Some(Hash {
                repr: Repr::Pack(StrPack::from_items(items)),
            });
        }
        let mut t: Table<Box<[u8]>> = Table::new();
        for (f, v) in pairs {
            if t.insert(hash_key(f), f, (*v).into()).is_some() {
                return None;
            }
        }
        Some(Hash {
            repr: Repr::Table(Box::new(t)),
        })
    }

    /// Start the miss of a pack's buffer (see `Value::prefetch_heap`).
    pub(crate) fn prefetch_heap(&self) {
        if let Repr::Pack(p) = &self.repr {
            p.prefetch();
        }
    }

    /// Set `field` to `value`; true if the field is new. Converts to a
    /// table past the listpack limits.
    pub fn set(&mut self, field: &[u8], value: &[u8], limits: &EncodingLimits) -> bool {
        if let Repr::Empty = self.repr {
            self.repr = Repr::Pack(StrPack::default());
        }
        if let Repr::Pack(p) = &self.repr {
            let too_long = field.len() > limits.hash_max_listpack_value
                || value.len() > limits.hash_max_listpack_value;
            let found = pack_find(p, field).map(|(_, v)| (v.start, v.end));
            let too_many = found.is_none() && p.len() / 2 + 1 > limits.hash_max_listpack_entries;
            if too_long || too_many {
                self.convert_to_table();
            } else {
                let Repr::Pack(p) = &mut self.repr else {
                    unreachable!()
                };
                return match found {
                    Some((start, end)) => {
                        p.splice(start, end, 1, &[value]);
                        false
                    }
                    None => {
                        p.push(&[field, value]);
                        true
                    }
                };
            }
        }
        let Repr::Table(t) = &mut self.repr else {
            unreachable!()
        };
        t.insert(hash_key(field), field, value.into()).is_none()
    }

    /// Remove `field`; true if it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        let removed = match &mut self.repr {
            Repr::Empty => false,
            Repr::Pack(p) => match pack_find(p, field).map(|(f, v)| (f.start, v.end)) {
                Some((start, end)) => {
                    p.splice(start, end, 2, &[]);
                    true
                }
                None => false,
            },
            Repr::Table(t) => t.remove(hash_key(field), field).is_some(),
        };
        if removed && self.is_empty() {
            self.repr = Repr::Empty;
        }
        removed
    }

    /// The `i`-th pair in iteration order (pack only; HRANDFIELD's picks
    /// with repetition on small hashes).
    pub fn nth(&self, i: usize) -> Option<(&[u8], &[u8])> {
        self.iter().nth(i)
    }

    /// A random pair, `seed` choosing it (fair over buckets, like
    /// Valkey's dictGetFairRandomKey).
    pub fn random(&self, seed: u64) -> Option<(&[u8], &[u8])> {
        match &self.repr {
            Repr::Empty => None,
            Repr::Pack(p) => {
                let n = p.len() / 2;
                self.nth((seed % n as u64) as usize)
            }
            Repr::Table(t) => t.random(seed).map(|(k, v)| (k, &**v)),
        }
    }

    /// One HSCAN step: calls `f` for the pairs of this step and returns
    /// the next cursor (0 = done). A pack is returned whole, as Valkey
    /// does for listpacks.
    pub fn scan<'a>(&'a self, cursor: u64, mut f: impl FnMut(&'a [u8], &'a [u8])) -> u64 {
        match &self.repr {
            Repr::Table(t) => t.scan(cursor, |k, v| f(k, v)),
            _ => {
                for (k, v) in self.iter() {
                    f(k, v);
                }
                0
            }
        }
    }

    /// Bytes the allocator holds for this hash's heap data, each
    /// allocation rounded up to jemalloc's size class (see
    /// [`crate::alloc_size`]): the pack's buffer, or the boxed table with
    /// what [`Table::memory_usage`] counts (buckets, nodes, long fields)
    /// plus each value's own allocation. The `Value` holding the hash is
    /// not counted.
    pub fn memory_usage(&self) -> usize {
        use crate::alloc_size;
        match &self.repr {
            Repr::Empty => 0,
            Repr::Pack(p) => p.memory_usage(),
            Repr::Table(t) => {
                alloc_size(std::mem::size_of::<Table<Box<[u8]>>>())
                    + t.memory_usage()
                    + t.iter().map(|(_, v)| alloc_size(v.len())).sum::<usize>()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(entries: usize, value: usize) -> EncodingLimits {
        EncodingLimits {
            hash_max_listpack_entries: entries,
            hash_max_listpack_value: value,
            ..EncodingLimits::default()
        }
    }

    #[test]
    fn pack_set_get_remove_keeps_order() {
        let l = limits(8, 16);
        let mut h = Hash::new();
        assert!(h.set(b"a", b"1", &l));
        assert!(h.set(b"b", b"2", &l));
        assert!(!h.set(b"a", b"one", &l));
        assert_eq!(h.get(b"a"), Some(&b"one"[..]));
        assert_eq!(h.encoding(), "listpack");
        let pairs: Vec<_> = h.iter().collect();
        assert_eq!(
            pairs,
            vec![(&b"a"[..], &b"one"[..]), (&b"b"[..], &b"2"[..])]
        );
        assert!(h.remove(b"a"));
        assert!(!h.remove(b"a"));
        assert_eq!(h.len(), 1);
        assert!(h.remove(b"b"));
        assert!(h.is_empty());
    }

    #[test]
    fn converts_past_limits_and_never_back() {
        let l = limits(4, 8);
        let mut h = Hash::new();
        for i in 0..4 {
            h.set(format!("f{i}").as_bytes(), b"v", &l);
        }
        assert_eq!(h.encoding(), "listpack");
        // Overwriting an existing field does not count as a new entry.
        h.set(b"f0", b"w", &l);
        assert_eq!(h.encoding(), "listpack");
        h.set(b"f4", b"v", &l);
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.len(), 5);
        assert_eq!(h.get(b"f0"), Some(&b"w"[..]));
        for i in 0..4 {
            h.remove(format!("f{i}").as_bytes());
        }
        assert_eq!(h.encoding(), "hashtable");
        let mut g = Hash::new();
        g.set(b"f", b"a value longer than 8", &l);
        assert_eq!(g.encoding(), "hashtable");
        let c = g.clone();
        assert_eq!(c, g);
    }

    #[test]
    fn memory_usage_grows_and_rounds_to_size_classes() {
        let l = limits(8, 16);
        let mut h = Hash::new();
        assert_eq!(h.memory_usage(), 0);
        // Count byte, then (1 + 1) + (1 + 1) for "f" and "v": 5 bytes, the
        // 8-byte class.
        h.set(b"f", b"v", &l);
        assert_eq!(h.memory_usage(), 8);
        let small = h.memory_usage();
        let mut last = small;
        let mut converted_at = None;
        for i in 0..100 {
            h.set(format!("field{i}").as_bytes(), b"value", &l);
            let now = h.memory_usage();
            // Only the pack is checked step by step: the table's
            // incremental rehash briefly holds both bucket arrays, so its
            // total dips when a rehash finishes.
            if h.encoding() == "listpack" {
                assert!(now >= last, "{now} < {last} after {i}");
            } else if converted_at.is_none() {
                assert!(now > last, "conversion to a table costs more");
                converted_at = Some(now);
            }
            last = now;
        }
        assert!(last > converted_at.expect("converted"));
        // What the table counts plus one smallest-class allocation per
        // value, each of the 101 values being 1 or 5 bytes.
        let table_part = |h: &Hash| {
            let Repr::Table(t) = &h.repr else {
                panic!("hashtable")
            };
            crate::alloc_size(std::mem::size_of::<Table<Box<[u8]>>>()) + t.memory_usage()
        };
        assert_eq!(last, table_part(&h) + 101 * 8);
        // Rewriting every value at 9 bytes moves each into the 16-byte
        // class.
        for i in 0..100 {
            h.set(format!("field{i}").as_bytes(), b"123456789", &l);
        }
        h.set(b"f", b"123456789", &l);
        assert_eq!(h.memory_usage(), table_part(&h) + 101 * 16);
    }

    #[test]
    fn scan_visits_every_field_once() {
        let l = limits(4, 8);
        let mut h = Hash::new();
        for i in 0..1000 {
            h.set(format!("f{i}").as_bytes(), b"v", &l);
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        loop {
            cursor = h.scan(cursor, |k, _| {
                assert!(seen.insert(k.to_vec()));
            });
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(seen.len(), 1000);
        assert!(h.random(7).is_some());
    }
}
