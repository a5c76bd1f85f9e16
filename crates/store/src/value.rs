//! Value types: strings here, collections in [`crate::types`].

use crate::defrag::{LaterCursor, Mover};
use crate::types::{Hash, List, Set, Stream, ZSet};
use std::sync::Arc;

/// Strings written whole at or above this length are kept as a shared,
/// immutable buffer ([`Str::Shared`]), so a reply refers to the value
/// instead of copying it on the execution thread. At 16 KiB the copy a GET
/// would make (~1 µs from memory) already costs several times a whole
/// small GET, while what a reference costs instead (a refcount, an extra
/// iovec, handing the reference back after the send) is flat and small;
/// below it the copy is cheap and the plain single-buffer send is kept.
/// It is also the size of a read chunk and of Valkey's reply chunks.
pub const SHARED_STR_MIN: usize = 16 * 1024;

/// A string value. The variant is also what OBJECT ENCODING reports, so it
/// follows how Valkey created the value, not only what it holds.
#[derive(Clone, Debug, PartialEq)]
pub enum Str {
    /// An integer in `string2ll` form (`int`).
    Int(i64),
    /// Bytes written whole by SET and friends (`embstr` if it fits beside
    /// its key, else `raw`).
    Bytes(Vec<u8>),
    /// Bytes edited in place by APPEND or SETRANGE: Valkey reports `raw`
    /// for these whatever their length.
    Raw(Vec<u8>),
    /// Bytes written whole, at least [`SHARED_STR_MIN`] of them (`raw`):
    /// immutable and shared with replies still being sent, which hold a
    /// reference instead of a copy. Editing it makes an owned [`Str::Raw`]
    /// copy first; the replies keep the old bytes.
    Shared(Arc<[u8]>),
}

impl Str {
    /// A string written whole (SET and friends): owned bytes, or shared
    /// ones from [`SHARED_STR_MIN`] on.
    pub fn from_bytes(b: &[u8]) -> Str {
        if b.len() >= SHARED_STR_MIN {
            Str::Shared(Arc::from(b))
        } else {
            Str::Bytes(b.to_vec())
        }
    }
    /// The bytes of a non-integer string.
    pub fn bytes(&self) -> Option<&[u8]> {
        crate::StrRef::of(self).bytes()
    }
}

/// The strong and weak counts an `Arc<[u8]>` keeps in front of its bytes,
/// in the same allocation.
const ARC_HEADER: usize = 2 * std::mem::size_of::<usize>();

/// Every key pays for the largest variant: collections keep their large
/// encodings behind a pointer so the enum stays this small.
const _: () = assert!(std::mem::size_of::<Value>() <= 32);

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(Str),
    List(List),
    Hash(Hash),
    Set(Set),
    ZSet(ZSet),
    Stream(Box<Stream>),
}

impl Value {
    /// Offer the value's own buffer to active defragmentation: a small
    /// collection's packed elements, an edited or boxed string's bytes, a
    /// stream's struct and its groups' map. Shared strings (a reply may
    /// hold them) and the insides of large collections stay.
    pub(crate) fn relocate(&mut self, m: &mut Mover<'_>) {
        match self {
            Value::Str(Str::Bytes(b) | Str::Raw(b)) => m.vec(b),
            Value::Str(Str::Int(_) | Str::Shared(_)) => {}
            Value::List(l) => l.relocate(m),
            Value::Hash(h) => h.relocate(m),
            Value::Set(s) => s.relocate(m),
            Value::ZSet(z) => z.relocate(m),
            Value::Stream(s) => {
                m.boxed(s);
                if let Some(g) = &mut s.groups {
                    m.boxed(g);
                }
            }
        }
    }

    /// For a collection whose insides active defragmentation walks by
    /// [`Value::relocate_step`] (large hashes, sets, sorted sets and
    /// lists, every stream), how many items that walk visits, as Valkey
    /// weighs it against `active-defrag-max-scan-fields`: fields or
    /// members, a list's quicklist nodes, a stream's blocks.
    pub(crate) fn steps_over(&self) -> Option<usize> {
        match self {
            Value::Hash(h) => h.is_table().then(|| h.len()),
            Value::Set(s) => s.is_table().then(|| s.len()),
            Value::List(l) => l.quicklist_nodes(),
            Value::ZSet(z) => z.is_tree().then(|| z.len()),
            Value::Stream(s) => Some(s.block_count()),
            Value::Str(_) => None,
        }
    }

    /// One step of moving a large collection's insides (0 starts;
    /// returns 0 when done).
    pub(crate) fn relocate_step(&mut self, cursor: LaterCursor, m: &mut Mover<'_>) -> LaterCursor {
        // The table and sequence walks' cursors fit in 64 bits; a stream's
        // is an entry ID.
        let narrow = cursor as u64;
        let next = match self {
            Value::Hash(h) => h.relocate_step(narrow, m),
            Value::Set(s) => s.relocate_step(narrow, m),
            Value::List(l) => l.relocate_step(narrow, m),
            Value::ZSet(z) => z.relocate_step(narrow, m),
            Value::Stream(s) => return s.relocate_step(cursor, m),
            Value::Str(_) => 0,
        };
        LaterCursor::from(next)
    }

    pub fn as_list_mut(&mut self) -> Option<&mut List> {
        match self {
            Value::List(l) => Some(l),
            _ => None,
        }
    }
    pub fn as_hash_mut(&mut self) -> Option<&mut Hash> {
        match self {
            Value::Hash(h) => Some(h),
            _ => None,
        }
    }
    pub fn as_stream_mut(&mut self) -> Option<&mut Stream> {
        match self {
            Value::Stream(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_set_mut(&mut self) -> Option<&mut Set> {
        match self {
            Value::Set(s) => Some(s),
            _ => None,
        }
    }
    /// Start the miss of the first line of a compact collection's buffer
    /// (a snapshot's walk asks for it ahead of packing the value).
    pub fn prefetch_heap(&self) {
        match self {
            Value::Hash(h) => h.prefetch_heap(),
            Value::Set(s) => s.prefetch_heap(),
            _ => {}
        }
    }
    /// Bytes the allocator holds for this value's heap data, each
    /// allocation rounded up to jemalloc's size class (see
    /// [`crate::alloc_size`]); the `Value` itself, which lives inside the
    /// keyspace's entry, is not counted. An integer string owns nothing;
    /// owned bytes cost their capacity (APPEND leaves spare room in a
    /// `Raw`); a shared string is one `Arc` block, the two reference
    /// counts followed by the bytes. Collections report their own.
    pub fn memory_usage(&self) -> usize {
        match self {
            Value::Str(Str::Int(_)) => 0,
            Value::Str(Str::Bytes(b) | Str::Raw(b)) => crate::alloc_size(b.capacity()),
            Value::Str(Str::Shared(b)) => crate::alloc_size(ARC_HEADER + b.len()),
            Value::List(l) => l.memory_usage(),
            Value::Hash(h) => h.memory_usage(),
            Value::Set(s) => s.memory_usage(),
            Value::ZSet(z) => z.memory_usage(),
            Value::Stream(s) => crate::alloc_size(std::mem::size_of::<Stream>()) + s.memory_usage(),
        }
    }
}

/// The `*-max-listpack-*` / `set-max-intset-entries` directives: past these,
/// a small collection converts to its large encoding (and never back, as in
/// Valkey).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodingLimits {
    /// Negative: -1..-5 = 4..64 KiB per node; positive: entries per node.
    pub list_max_listpack_size: i64,
    /// Quicklist nodes left uncompressed at each end (0: none compressed);
    /// a list keeps the depth it was made with, as Valkey's.
    pub list_compress_depth: u16,
    pub hash_max_listpack_entries: usize,
    pub hash_max_listpack_value: usize,
    pub set_max_intset_entries: usize,
    pub set_max_listpack_entries: usize,
    pub set_max_listpack_value: usize,
    pub zset_max_listpack_entries: usize,
    pub zset_max_listpack_value: usize,
}

impl Default for EncodingLimits {
    /// Valkey 8's defaults.
    fn default() -> Self {
        EncodingLimits {
            list_max_listpack_size: -2,
            list_compress_depth: 0,
            hash_max_listpack_entries: 512,
            hash_max_listpack_value: 64,
            set_max_intset_entries: 512,
            set_max_listpack_entries: 128,
            set_max_listpack_value: 64,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::list::End;

    #[test]
    fn memory_usage_of_strings() {
        assert_eq!(Value::Str(Str::Int(42)).memory_usage(), 0);
        assert_eq!(Value::Str(Str::from_bytes(b"")).memory_usage(), 0);
        // `to_vec` allocates exactly: 100 bytes are served from 112.
        assert_eq!(
            Value::Str(Str::from_bytes(&[b'x'; 100])).memory_usage(),
            112
        );
        // Spare capacity is held too: 100 bytes in a 129-byte buffer.
        let mut raw = Vec::with_capacity(129);
        raw.extend_from_slice(&[b'x'; 100]);
        assert_eq!(Value::Str(Str::Raw(raw)).memory_usage(), 160);
        // A shared string: 16 bytes of counts + 16 KiB = 16400, in the
        // 20 KiB class.
        let big = Str::from_bytes(&[b'x'; SHARED_STR_MIN]);
        assert!(matches!(big, Str::Shared(_)));
        assert_eq!(Value::Str(big).memory_usage(), 20 * 1024);
    }

    #[test]
    fn memory_usage_of_collections_is_theirs() {
        let lim = EncodingLimits::default();
        let mut l = List::new();
        l.push(End::Right, &[b"a", b"b"], &lim);
        let want = l.memory_usage();
        assert!(want > 0);
        assert_eq!(Value::List(l).memory_usage(), want);
        let mut h = Hash::new();
        h.set(b"f", b"v", &lim);
        assert_eq!(Value::Hash(h).memory_usage(), 8);
        let mut s = Set::new();
        s.add(b"1", &lim);
        let want = s.memory_usage();
        assert!(want > 0);
        assert_eq!(Value::Set(s).memory_usage(), want);
        let mut z = ZSet::new();
        z.insert(b"m", 1.0, &lim);
        z.shrink();
        assert_eq!(Value::ZSet(z).memory_usage(), 8);
        assert_eq!(Value::ZSet(ZSet::new()).memory_usage(), 0);
    }
}
