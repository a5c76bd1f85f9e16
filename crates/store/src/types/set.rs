//! The set value type: unique byte-string members.
//!
//! ```text
//!   Set ─┬─ IntSet       intset: [width: 2|4|8] + sorted little-endian
//!        │               integers, one exact-size buffer (binary search)
//!        ├─ Pack         listpack: members in one exact-size buffer, in
//!        │               insertion order (strpack.rs)
//!        └─ Box<Table>   hashtable: our keyspace table, member → ()
//! ```
//!
//! Conversions follow Valkey 8 (`t_set.c`): a set is created as an intset
//! when its first member is an integer and the members being added fit
//! `set-max-intset-entries`, else as a listpack when they fit
//! `set-max-listpack-entries`, else as a table. An intset that gets a
//! non-integer becomes a listpack if it stays within the listpack limits,
//! else a table; one that grows past `set-max-intset-entries` becomes a
//! table. A listpack that outgrows its limits becomes a table. Nothing
//! converts back.

use super::strpack::StrPack;
use crate::EncodingLimits;
use crate::defrag::Mover;
use crate::hash::hash_key;
use crate::table::Table;

/// A member as stored: intset members are integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Member<'a> {
    Bytes(&'a [u8]),
    Int(i64),
}

impl Member<'_> {
    pub fn to_vec(self) -> Vec<u8> {
        match self {
            Member::Bytes(b) => b.to_vec(),
            Member::Int(i) => i.to_string().into_bytes(),
        }
    }
}

/// Valkey's `string2ll`: the canonical decimal form of an i64 only (no
/// sign on zero, no leading zeros or `+`, no spaces).
pub fn as_int(b: &[u8]) -> Option<i64> {
    // The listpack's rule is the same one (`lpStringToInt64`).
    super::lp_size::string_int(b)
}

/// The intset encoding: sorted integers stored as offsets from the
/// smallest (frame of reference), all of one width.
///
/// ```text
///   [width: 1|2|4|8] [base: zigzag varint] [offset: width bytes LE]*
/// ```
///
/// Ten integers close together (`SADD s 4711230 … 4711239`) take 15
/// bytes where Valkey's intset takes 48 (4-byte slots and an 8-byte
/// header); lookups stay a binary search over fixed-width slots.
#[derive(Clone, Default, PartialEq, Eq)]
struct IntSet {
    /// Empty when the set is empty. Boxed, not a Vec: 16 bytes, so
    /// `Value` stays within 32.
    buf: Box<[u8]>,
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// Bytes needed for offsets up to `span`.
fn width_for(span: u64) -> u8 {
    if span <= 0xff {
        1
    } else if span <= 0xffff {
        2
    } else if span <= 0xffff_ffff {
        4
    } else {
        8
    }
}

impl IntSet {
    /// (width, base, offset of the first slot).
    fn header(&self) -> (usize, i64, usize) {
        let mut at = 1;
        let base = unzigzag(super::strpack::get_varint(&self.buf, &mut at));
        (self.buf[0] as usize, base, at)
    }
    fn len(&self) -> usize {
        if self.buf.is_empty() {
            return 0;
        }
        let (w, _, at) = self.header();
        (self.buf.len() - at) / w
    }
    fn get(&self, i: usize) -> i64 {
        let (w, base, at) = self.header();
        let at = at + i * w;
        let mut b = [0u8; 8];
        b[..w].copy_from_slice(&self.buf[at..at + w]);
        base.wrapping_add(u64::from_le_bytes(b) as i64)
    }
    /// Index of `v`, or where it would go.
    fn search(&self, v: i64) -> Result<usize, usize> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.get(mid).cmp(&v) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }
    fn values(&self) -> Vec<i64> {
        (0..self.len()).map(|i| self.get(i)).collect()
    }
    /// Re-encode from sorted `vals`, exact-size.
    fn rebuild(&mut self, vals: &[i64]) {
        let (Some(&min), Some(&max)) = (vals.first(), vals.last()) else {
            self.buf = Box::default();
            return;
        };
        let w = width_for(max.wrapping_sub(min) as u64);
        let mut out = Vec::with_capacity(1 + 10 + vals.len() * w as usize);
        out.push(w);
        super::strpack::put_varint(&mut out, zigzag(min));
        for &v in vals {
            let off = v.wrapping_sub(min) as u64;
            out.extend_from_slice(&off.to_le_bytes()[..w as usize]);
        }
        self.buf = out.into_boxed_slice();
    }
    fn insert(&mut self, v: i64) -> bool {
        let Err(at) = self.search(v) else {
            return false;
        };
        let mut vals = self.values();
        vals.insert(at, v);
        self.rebuild(&vals);
        true
    }
    fn remove(&mut self, v: i64) -> bool {
        let Ok(at) = self.search(v) else {
            return false;
        };
        let mut vals = self.values();
        vals.remove(at);
        self.rebuild(&vals);
        true
    }
}

#[derive(Clone, Default)]
enum Repr {
    #[default]
    Empty,
    Ints(IntSet),
    Pack(StrPack),
    Table(Box<Table<()>>),
}

/// A set value.
#[derive(Clone, Default)]
pub struct Set {
    repr: Repr,
}

impl PartialEq for Set {
    fn eq(&self, other: &Set) -> bool {
        self.len() == other.len() && self.iter().all(|m| other.contains_member(m))
    }
}

impl std::fmt::Debug for Set {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set()
            .entries(
                self.iter()
                    .map(|m| String::from_utf8_lossy(&m.to_vec()).into_owned()),
            )
            .finish()
    }
}

impl Clone for Box<Table<()>> {
    fn clone(&self) -> Self {
        let mut c = Table::new();
        for (h, k, _) in self.iter_hashed() {
            c.insert(h, k, ());
        }
        Box::new(c)
    }
}

impl Set {
    /// Offer the buffer of a small set (intset or packed members) to
    /// active defragmentation (a large one's insides go by
    /// [`Set::relocate_step`]).
    pub(crate) fn relocate(&mut self, m: &mut Mover<'_>) {
        match &mut self.repr {
            Repr::Ints(i) => m.bytes(&mut i.buf),
            Repr::Pack(p) => p.relocate(m),
            Repr::Empty | Repr::Table(_) => {}
        }
    }

    /// A large set's insides, one step of active defragmentation from
    /// `cursor` (0 starts; 0 when done): its table's struct, then its
    /// nodes and long members a bucket chain at a time.
    pub(crate) fn relocate_step(&mut self, cursor: u64, m: &mut Mover<'_>) -> u64 {
        match &mut self.repr {
            Repr::Table(t) => m.boxed_then(t, cursor, |t, m| t.defrag_step(cursor, m, |_, _| {})),
            _ => 0,
        }
    }

    /// Whether [`Set::relocate_step`] has work (a table).
    pub(crate) fn is_table(&self) -> bool {
        matches!(self.repr, Repr::Table(_))
    }

    /// Start the miss of a compact set's buffer (see `Value::prefetch_heap`).
    pub(crate) fn prefetch_heap(&self) {
        match &self.repr {
            Repr::Pack(p) => p.prefetch(),
            Repr::Ints(i) => crate::table::prefetch_ptr(i.buf.as_ptr()),
            _ => {}
        }
    }
    /// An empty set encoded for its first member and the number of members
    /// about to be added (Valkey's `setTypeCreate`).
    pub fn new_for(first: &[u8], size_hint: usize, limits: &EncodingLimits) -> Set {
        let repr = if as_int(first).is_some() && size_hint <= limits.set_max_intset_entries {
            Repr::Ints(IntSet::default())
        } else if size_hint <= limits.set_max_listpack_entries {
            Repr::Pack(StrPack::default())
        } else {
            Repr::Table(Box::default())
        };
        Set { repr }
    }

    /// The empty set the *STORE commands start from (an intset).
    pub fn new() -> Set {
        Set {
            repr: Repr::Ints(IntSet::default()),
        }
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Empty => 0,
            Repr::Ints(i) => i.len(),
            Repr::Pack(p) => p.len(),
            Repr::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the allocator holds for this set's heap data, each
    /// allocation rounded up to jemalloc's size class (see
    /// [`crate::alloc_size`]): the intset's or pack's buffer, or the boxed
    /// table with what [`Table::memory_usage`] counts (members are its
    /// keys; the values are `()` and own nothing). The `Value` holding the
    /// set is not counted.
    pub fn memory_usage(&self) -> usize {
        match &self.repr {
            Repr::Empty => 0,
            // A boxed slice: no spare capacity beyond its length.
            Repr::Ints(i) => crate::alloc_size(i.buf.len()),
            Repr::Pack(p) => p.memory_usage(),
            Repr::Table(t) => {
                crate::alloc_size(std::mem::size_of::<Table<()>>()) + t.memory_usage()
            }
        }
    }

    /// OBJECT ENCODING, with Valkey's names.
    pub fn encoding(&self) -> &'static str {
        match &self.repr {
            Repr::Empty | Repr::Ints(_) => "intset",
            Repr::Pack(_) => "listpack",
            Repr::Table(_) => "hashtable",
        }
    }

    pub fn contains(&self, m: &[u8]) -> bool {
        match &self.repr {
            Repr::Empty => false,
            Repr::Ints(i) => as_int(m).is_some_and(|v| i.search(v).is_ok()),
            Repr::Pack(p) => p.iter().any(|s| s.bytes == m),
            Repr::Table(t) => t.get(hash_key(m), m).is_some(),
        }
    }

    fn contains_member(&self, m: Member<'_>) -> bool {
        match m {
            Member::Bytes(b) => self.contains(b),
            Member::Int(v) => match &self.repr {
                Repr::Ints(i) => i.search(v).is_ok(),
                _ => self.contains(v.to_string().as_bytes()),
            },
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = Member<'_>> + '_ {
        let ints = match &self.repr {
            Repr::Ints(i) => Some(i),
            _ => None,
        };
        let n_ints = ints.map_or(0, IntSet::len);
        let pack = match &self.repr {
            Repr::Pack(p) => Some(p.iter()),
            _ => None,
        };
        let table = match &self.repr {
            Repr::Table(t) => Some(t.iter().map(|(k, _)| k)),
            _ => None,
        };
        (0..n_ints)
            .map(move |k| Member::Int(ints.expect("intset").get(k)))
            .chain(pack.into_iter().flatten().map(|s| Member::Bytes(s.bytes)))
            .chain(table.into_iter().flatten().map(Member::Bytes))
    }

    fn convert(&mut self, to_table: bool) {
        let members: Vec<Vec<u8>> = self.iter().map(Member::to_vec).collect();
        self.repr = if to_table {
            let mut t: Table<()> = Table::new();
            for m in &members {
                t.insert(hash_key(m), m, ());
            }
            Repr::Table(Box::new(t))
        } else {
            Repr::Pack(StrPack::from_items(members.iter().map(Vec::as_slice)))
        };
    }

    /// Add `m`; true if it is new.
    pub fn add(&mut self, m: &[u8], limits: &EncodingLimits) -> bool {
        if let Repr::Empty = self.repr {
            *self = Set::new_for(m, 1, limits);
        }
        match &mut self.repr {
            Repr::Ints(i) => {
                if let Some(v) = as_int(m) {
                    if !i.insert(v) {
                        return false;
                    }
                    if i.len() > limits.set_max_intset_entries {
                        self.convert(true);
                    }
                    return true;
                }
                let n = i.len();
                let longest = (0..n).map(|k| width_str(i.get(k))).max().unwrap_or(0);
                let fits = n < limits.set_max_listpack_entries
                    && m.len() <= limits.set_max_listpack_value
                    && longest <= limits.set_max_listpack_value;
                self.convert(!fits);
            }
            Repr::Pack(p) => {
                if p.iter().any(|s| s.bytes == m) {
                    return false;
                }
                if p.len() < limits.set_max_listpack_entries
                    && m.len() <= limits.set_max_listpack_value
                {
                    p.push(&[m]);
                    return true;
                }
                self.convert(true);
            }
            Repr::Table(_) | Repr::Empty => {}
        }
        match &mut self.repr {
            Repr::Pack(p) => {
                p.push(&[m]);
                true
            }
            Repr::Table(t) => t.insert(hash_key(m), m, ()).is_none(),
            _ => unreachable!("converted above"),
        }
    }

    /// Remove `m`; true if it was there.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match &mut self.repr {
            Repr::Empty => false,
            Repr::Ints(i) => as_int(m).is_some_and(|v| i.remove(v)),
            Repr::Pack(p) => match p.iter().find(|s| s.bytes == m) {
                Some(s) => {
                    p.splice(s.start, s.end, 1, &[]);
                    true
                }
                None => false,
            },
            Repr::Table(t) => t.remove(hash_key(m), m).is_some(),
        }
    }

    /// The `i`-th member in iteration order.
    pub fn nth(&self, i: usize) -> Option<Member<'_>> {
        match &self.repr {
            Repr::Ints(s) => (i < s.len()).then(|| Member::Int(s.get(i))),
            _ => self.iter().nth(i),
        }
    }

    /// A random member, `seed` choosing it.
    pub fn random(&self, seed: u64) -> Option<Member<'_>> {
        let n = self.len();
        if n == 0 {
            return None;
        }
        match &self.repr {
            Repr::Table(t) => t.random(seed).map(|(k, _)| Member::Bytes(k)),
            _ => self.nth((seed % n as u64) as usize),
        }
    }

    /// One SSCAN step (a compact set is returned whole, cursor 0).
    pub fn scan<'a>(&'a self, cursor: u64, mut f: impl FnMut(Member<'a>)) -> u64 {
        match &self.repr {
            Repr::Table(t) => t.scan(cursor, |k, _| f(Member::Bytes(k))),
            _ => {
                for m in self.iter() {
                    f(m);
                }
                0
            }
        }
    }
}

/// Length of an integer's decimal form.
fn width_str(v: i64) -> usize {
    v.to_string().len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(s: &Set) -> Vec<String> {
        s.iter()
            .map(|m| String::from_utf8(m.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn canonical_integers_only() {
        assert_eq!(as_int(b"12"), Some(12));
        assert_eq!(as_int(b"-7"), Some(-7));
        assert_eq!(as_int(b"9223372036854775807"), Some(i64::MAX));
        for s in [
            &b"007"[..],
            b"+5",
            b"-0",
            b" 1",
            b"",
            b"1.0",
            b"9223372036854775808",
        ] {
            assert_eq!(as_int(s), None, "{s:?}");
        }
    }

    #[test]
    fn intset_sorted_and_widening() {
        let l = EncodingLimits::default();
        let mut s = Set::new_for(b"5", 1, &l);
        for m in ["5", "-3", "100000", "5", "9223372036854775807", "0"] {
            s.add(m.as_bytes(), &l);
        }
        assert_eq!(s.encoding(), "intset");
        assert_eq!(
            members(&s),
            vec!["-3", "0", "5", "100000", "9223372036854775807"]
        );
        assert!(s.contains(b"100000"));
        assert!(!s.contains(b"0100000"));
        assert!(s.remove(b"5"));
        assert!(!s.remove(b"5"));
        assert_eq!(s.len(), 4);
    }

    #[test]
    fn intset_frame_of_reference_spans() {
        let l = EncodingLimits::default();
        for vals in [
            vec![i64::MIN, 0, i64::MAX],
            vec![-1, 0, 1],
            vec![4_711_230, 4_711_239],
            vec![i64::MIN, i64::MIN + 1],
            vec![70_000, -70_000, 5],
        ] {
            let mut s = Set::new();
            for v in &vals {
                assert!(s.add(v.to_string().as_bytes(), &l));
            }
            let mut want = vals.clone();
            want.sort();
            let got: Vec<i64> = s
                .iter()
                .map(|m| match m {
                    Member::Int(i) => i,
                    Member::Bytes(_) => panic!("not an intset"),
                })
                .collect();
            assert_eq!(got, want);
            for v in &vals {
                assert!(s.contains(v.to_string().as_bytes()));
            }
            assert!(!s.contains(b"12345"));
        }
        // Ten close integers: width 1, one varint base.
        let mut s = Set::new();
        for v in 4_711_230..4_711_240 {
            s.add(v.to_string().as_bytes(), &l);
        }
        let Repr::Ints(i) = &s.repr else {
            panic!("intset")
        };
        assert_eq!(i.buf.len(), 1 + 4 + 10);
    }

    #[test]
    fn memory_usage_grows_and_rounds_to_size_classes() {
        let l = EncodingLimits {
            set_max_intset_entries: 16,
            set_max_listpack_entries: 16,
            ..EncodingLimits::default()
        };
        let mut s = Set::new();
        assert_eq!(s.memory_usage(), 0);
        // Ten close integers: width byte + 4-byte base + 10 offsets = 15
        // bytes, served from the 16-byte class.
        for v in 4_711_230..4_711_240 {
            s.add(v.to_string().as_bytes(), &l);
        }
        assert_eq!(s.memory_usage(), 16);
        let mut p = Set::new_for(b"x", 1, &l);
        p.add(b"x", &l);
        // Count byte, length byte, "x": 3 bytes in the 8-byte class.
        assert_eq!(p.memory_usage(), 8);
        let small = p.memory_usage();
        let mut last = small;
        for i in 0..100 {
            p.add(format!("member{i}").as_bytes(), &l);
            let now = p.memory_usage();
            // Only the pack is checked step by step: the table's
            // incremental rehash briefly holds both bucket arrays, so its
            // total dips when a rehash finishes.
            if p.encoding() == "listpack" {
                assert!(now >= last, "{now} < {last} after {i}");
            }
            last = now;
        }
        assert_eq!(p.encoding(), "hashtable");
        // 101 table nodes and their buckets are well past a pack of one.
        assert!(last > small + 101 * 16);
    }

    #[test]
    fn conversions_like_valkey() {
        let l = EncodingLimits {
            set_max_intset_entries: 4,
            set_max_listpack_entries: 3,
            set_max_listpack_value: 5,
            ..EncodingLimits::default()
        };
        // intset + a string → listpack while within the listpack limits.
        let mut s = Set::new_for(b"1", 1, &l);
        s.add(b"1", &l);
        s.add(b"x", &l);
        assert_eq!(s.encoding(), "listpack");
        assert_eq!(members(&s), vec!["1", "x"]);
        s.add(b"y", &l);
        assert_eq!(s.encoding(), "listpack");
        s.add(b"z", &l);
        assert_eq!(s.encoding(), "hashtable");
        assert_eq!(s.len(), 4);
        // intset past its own limit → table.
        let mut i = Set::new_for(b"1", 1, &l);
        for m in 1..=5 {
            i.add(m.to_string().as_bytes(), &l);
        }
        assert_eq!(i.encoding(), "hashtable");
        // A long string goes straight to a table.
        let mut p = Set::new_for(b"a", 1, &l);
        p.add(b"a", &l);
        p.add(b"toolong", &l);
        assert_eq!(p.encoding(), "hashtable");
        assert!(p.contains(b"a") && p.contains(b"toolong"));
        let c = p.clone();
        assert_eq!(c, p);
    }
}
