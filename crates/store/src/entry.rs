//! A key's entry: its key, value, expiry and access bits in one allocation.
//!
//! ```text
//!  byte 0     flags: kind (bits 0-1) | EXPIRES (bit 2)
//!  bytes 1-3  access: Valkey's 24-bit LRU clock or LFU time + counter
//!  [8 bytes]  expire time, Unix ms (only with EXPIRES)
//!  varint     key length, then the key
//!  payload    BYTES: varint length, then the string
//!             INT:   the integer, 8 bytes
//!             BOXED: a `Box<Value>` (collections, shared and edited strings)
//! ```
//!
//! `SET key:123456 <16 bytes>` makes one 32-byte node (jemalloc's 32-byte
//! class) and an integer value no allocation besides it. Strings written
//! whole up to [`SHARED_STR_MIN`] live in the node; larger ones stay
//! shared (`Arc`) for by-reference replies, and strings edited in place
//! (APPEND, SETRANGE, SETBIT: Valkey's `raw`) stay an owned buffer. Both
//! are boxed, like every collection.
//!
//! An [`Entry`] is one word: the node's address, with bits 48..64 left to
//! the table's tag (see [`crate::table::Item`]). The table hands out
//! `&mut Entry` pointing at its slot, so a method that has to move the node
//! (a larger value, an expiry added) rewrites the slot in place.

use std::alloc::{self, Layout};
use std::num::NonZeroUsize;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::defrag::Mover;
use crate::table::{Item, addr_word, prefetch_ptr, word_addr};
use crate::types::{Hash, List, Set, Stream, ZSet};
use crate::{SHARED_STR_MIN, Str, Value, hash_key};

const KIND_MASK: u8 = 0b11;
const KIND_BYTES: u8 = 0;
const KIND_INT: u8 = 1;
const KIND_BOXED: u8 = 2;
const EXPIRES: u8 = 1 << 2;
/// Nodes are 8-aligned: bit 0 of the address stays clear for the table,
/// and jemalloc's size classes are multiples of 8 anyway.
const NODE_ALIGN: usize = 8;
/// The access field keeps 24 bits, as Valkey's `robj.lru`.
pub const ACCESS_BITS: u32 = 24;
const ACCESS_MASK: u32 = (1 << ACCESS_BITS) - 1;
/// Bytes of a node prefetched ahead of a read: a GET copies all of an
/// inline value into the reply, and past this the hardware's stream
/// prefetcher keeps up with the copy.
const VALUE_PREFETCH_BYTES: usize = 1024;

/// Whether Valkey 8.1 keeps a string of `value_len` bytes embedded in the
/// object that also embeds its key (`embstr`), measured on Valkey 8.1:
/// key and value together up to 41 bytes, and 39 with an expire once the
/// key needs a larger header (32 bytes and longer).
fn embeds_with_key(key_len: usize, value_len: usize, has_expire: bool) -> bool {
    let room = if has_expire && key_len >= 32 { 39 } else { 41 };
    key_len + value_len <= room
}

/// A string value as stored, borrowed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StrRef<'a> {
    Int(i64),
    /// Written whole (`embstr` if it fits beside its key, else `raw`).
    Bytes(&'a [u8]),
    /// Edited in place (`raw` whatever its length).
    Raw(&'a [u8]),
    Shared(&'a Arc<[u8]>),
}

impl<'a> StrRef<'a> {
    pub fn of(s: &'a Str) -> StrRef<'a> {
        match s {
            Str::Int(n) => StrRef::Int(*n),
            Str::Bytes(b) => StrRef::Bytes(b),
            Str::Raw(b) => StrRef::Raw(b),
            Str::Shared(b) => StrRef::Shared(b),
        }
    }
    /// The bytes of a non-integer string.
    pub fn bytes(self) -> Option<&'a [u8]> {
        match self {
            StrRef::Int(_) => None,
            StrRef::Bytes(b) | StrRef::Raw(b) => Some(b),
            StrRef::Shared(b) => Some(b),
        }
    }
    /// An owned copy, as [`Str`].
    pub fn to_owned(self) -> Str {
        match self {
            StrRef::Int(n) => Str::Int(n),
            StrRef::Bytes(b) => Str::Bytes(b.to_vec()),
            StrRef::Raw(b) => Str::Raw(b.to_vec()),
            StrRef::Shared(b) => Str::Shared(b.clone()),
        }
    }
}

/// A value as stored, borrowed: [`Value`]'s shape with strings as
/// [`StrRef`].
#[derive(Clone, Copy, Debug)]
pub enum ValueRef<'a> {
    Str(StrRef<'a>),
    List(&'a List),
    Hash(&'a Hash),
    Set(&'a Set),
    ZSet(&'a ZSet),
    Stream(&'a Stream),
}

impl<'a> ValueRef<'a> {
    pub fn of(v: &'a Value) -> ValueRef<'a> {
        match v {
            Value::Str(s) => ValueRef::Str(StrRef::of(s)),
            Value::List(l) => ValueRef::List(l),
            Value::Hash(h) => ValueRef::Hash(h),
            Value::Set(s) => ValueRef::Set(s),
            Value::ZSet(z) => ValueRef::ZSet(z),
            Value::Stream(s) => ValueRef::Stream(s),
        }
    }
    /// How many allocations dropping the value walks, roughly (Valkey's
    /// `lazyfreeGetFreeEffort`): 1 for strings and compact encodings, the
    /// element count for the large ones but lists, whose quicklist frees
    /// one buffer per node (Valkey counts its nodes).
    pub fn free_effort(self) -> usize {
        let (len, encoding) = match self {
            ValueRef::List(l) => return l.nodes().max(1),
            ValueRef::Hash(h) => (h.len(), h.encoding()),
            ValueRef::Set(s) => (s.len(), s.encoding()),
            ValueRef::ZSet(z) => (z.len(), z.encoding()),
            ValueRef::Str(_) => return 1,
            ValueRef::Stream(s) => return s.free_effort().max(1),
        };
        match encoding {
            "listpack" | "intset" => 1,
            _ => len,
        }
    }
    /// TYPE's answer (and what SCAN TYPE compares against).
    pub fn type_name(self) -> &'static str {
        match self {
            ValueRef::Str(_) => "string",
            ValueRef::List(_) => "list",
            ValueRef::Hash(_) => "hash",
            ValueRef::Set(_) => "set",
            ValueRef::ZSet(_) => "zset",
            ValueRef::Stream(_) => "stream",
        }
    }
    /// OBJECT ENCODING, with Valkey's names. Strings follow Valkey's
    /// `tryObjectEncoding`: `int` for a canonical integer, else `embstr` up
    /// to 44 bytes, else `raw` ([`Entry::encoding`] also weighs the key).
    pub fn encoding(self) -> &'static str {
        match self {
            ValueRef::Str(StrRef::Int(_)) => "int",
            ValueRef::Str(StrRef::Bytes(b)) if b.len() <= 44 => "embstr",
            ValueRef::Str(_) => "raw",
            ValueRef::List(l) => l.encoding(),
            ValueRef::Hash(h) => h.encoding(),
            ValueRef::Set(s) => s.encoding(),
            ValueRef::ZSet(z) => z.encoding(),
            ValueRef::Stream(_) => "stream",
        }
    }
    /// A collection with no elements (Valkey never keeps one).
    pub fn is_empty_collection(self) -> bool {
        match self {
            ValueRef::Str(_) => false,
            ValueRef::List(l) => l.is_empty(),
            ValueRef::Hash(h) => h.is_empty(),
            ValueRef::Set(s) => s.is_empty(),
            ValueRef::ZSet(z) => z.is_empty(),
            // A stream may be empty (XDEL, XTRIM, MKSTREAM) and stays.
            ValueRef::Stream(_) => false,
        }
    }
    pub fn as_str(self) -> Option<StrRef<'a>> {
        match self {
            ValueRef::Str(s) => Some(s),
            _ => None,
        }
    }
    /// An owned deep copy.
    pub fn to_owned(self) -> Value {
        match self {
            ValueRef::Str(s) => Value::Str(s.to_owned()),
            ValueRef::List(l) => Value::List(l.clone()),
            ValueRef::Hash(h) => Value::Hash(h.clone()),
            ValueRef::Set(s) => Value::Set(s.clone()),
            ValueRef::ZSet(z) => Value::ZSet(z.clone()),
            ValueRef::Stream(s) => Value::Stream(Box::new(s.clone())),
        }
    }
}

/// What a new node's payload is made of.
enum Payload<'a> {
    Bytes(&'a [u8]),
    Int(i64),
    Boxed(Box<Value>),
}

impl Payload<'_> {
    fn kind(&self) -> u8 {
        match self {
            Payload::Bytes(_) => KIND_BYTES,
            Payload::Int(_) => KIND_INT,
            Payload::Boxed(_) => KIND_BOXED,
        }
    }
    fn len(&self) -> usize {
        match self {
            Payload::Bytes(b) => varint_len(b.len()) + b.len(),
            Payload::Int(_) | Payload::Boxed(_) => 8,
        }
    }
    /// Write at `p`, which has room for [`Payload::len`] bytes.
    ///
    /// # Safety
    /// `p..p + self.len()` is writable memory of one allocation.
    unsafe fn write(self, p: *mut u8) {
        // SAFETY: the caller gives `len()` writable bytes at `p`.
        unsafe {
            match self {
                Payload::Bytes(b) => {
                    let n = write_varint(p, b.len());
                    std::ptr::copy_nonoverlapping(b.as_ptr(), p.add(n), b.len());
                }
                Payload::Int(v) => std::ptr::write_unaligned(p.cast::<i64>(), v),
                Payload::Boxed(v) => {
                    std::ptr::write_unaligned(p.cast::<usize>(), Box::into_raw(v) as usize)
                }
            }
        }
    }
}

/// `f` on the payload a value is stored as: integers and whole strings
/// below [`SHARED_STR_MIN`] inline (the string's buffer lives until `f`
/// has copied it), everything else boxed.
fn with_payload<R>(value: Value, f: impl FnOnce(Payload<'_>) -> R) -> R {
    match value {
        Value::Str(Str::Int(n)) => f(Payload::Int(n)),
        Value::Str(Str::Bytes(b)) if b.len() < SHARED_STR_MIN => f(Payload::Bytes(&b)),
        v => f(Payload::Boxed(Box::new(v))),
    }
}

fn varint_len(mut n: usize) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

/// # Safety
/// `p` has room for `varint_len(n)` bytes.
unsafe fn write_varint(p: *mut u8, mut n: usize) -> usize {
    let mut i = 0;
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        // SAFETY: at most `varint_len(n)` bytes are written.
        unsafe { p.add(i).write(byte | if n != 0 { 0x80 } else { 0 }) };
        i += 1;
        if n == 0 {
            return i;
        }
    }
}

/// # Safety
/// `p` points at a varint written by [`write_varint`].
#[inline(always)]
unsafe fn read_varint(p: *const u8) -> (usize, usize) {
    // SAFETY: the caller's varint ends at the first byte below 0x80.
    let b = unsafe { p.read() };
    if b < 0x80 {
        return (b as usize, 1);
    }
    let (mut n, mut shift, mut i) = (0usize, 0, 0);
    loop {
        // SAFETY: as above.
        let b = unsafe { p.add(i).read() };
        n |= ((b & 0x7f) as usize) << shift;
        i += 1;
        if b < 0x80 {
            return (n, i);
        }
        shift += 7;
    }
}

fn header_len(flags: u8) -> usize {
    4 + if flags & EXPIRES != 0 { 8 } else { 0 }
}

/// A key's entry; see the module doc.
#[repr(transparent)]
pub struct Entry {
    word: NonZeroUsize,
}

// SAFETY: an Entry owns its node and boxed value exclusively, like a Box.
unsafe impl Send for Entry {}
// SAFETY: `&Entry` only reads.
unsafe impl Sync for Entry {}

/// Where a node's parts are, parsed from its flags and varints.
struct Parts {
    flags: u8,
    payload_at: usize,
    /// The whole node's size, as allocated.
    size: usize,
}

fn build(key: &[u8], payload: Payload<'_>, expire: Option<i64>, access: u32) -> NonZeroUsize {
    let flags = payload.kind() | if expire.is_some() { EXPIRES } else { 0 };
    let head = header_len(flags);
    let key_at = head + varint_len(key.len());
    let payload_at = key_at + key.len();
    let size = payload_at + payload.len();
    let layout = Layout::from_size_align(size, NODE_ALIGN).expect("entry size overflows");
    // SAFETY: `layout` is non-zero (the header alone is 4 bytes).
    let p = unsafe { alloc::alloc(layout) };
    if p.is_null() {
        alloc::handle_alloc_error(layout);
    }
    // SAFETY: every write below stays inside the `size` bytes allocated,
    // at the offsets computed above.
    unsafe {
        p.write(flags);
        let a = (access & ACCESS_MASK).to_le_bytes();
        std::ptr::copy_nonoverlapping(a.as_ptr(), p.add(1), 3);
        if let Some(t) = expire {
            std::ptr::write_unaligned(p.add(4).cast::<i64>(), t);
        }
        write_varint(p.add(head), key.len());
        std::ptr::copy_nonoverlapping(key.as_ptr(), p.add(key_at), key.len());
        payload.write(p.add(payload_at));
    }
    NonZeroUsize::new(addr_word(p as usize)).expect("non-null allocation")
}

impl Entry {
    fn from_addr(addr: NonZeroUsize) -> Entry {
        Entry { word: addr }
    }

    /// A value with no key yet (the table re-keys it on insert).
    pub fn new(value: Value) -> Entry {
        Entry::keyed(b"", value)
    }

    /// A value under `key`.
    pub fn keyed(key: &[u8], value: Value) -> Entry {
        with_payload(value, |p| Entry::from_addr(build(key, p, None, 0)))
    }

    /// A string under `key` expiring at `expire`, built without an
    /// intermediate [`Str`] (SET's path).
    pub fn keyed_str(key: &[u8], s: StrRef<'_>, expire: Option<i64>) -> Entry {
        Entry::from_addr(build(key, str_payload(s), expire, 0))
    }

    #[inline(always)]
    fn ptr(&self) -> *mut u8 {
        word_addr(self.word.get()) as *mut u8
    }

    #[inline(always)]
    fn flags(&self) -> u8 {
        // SAFETY: the node's first byte is its flags.
        unsafe { self.ptr().read() }
    }

    #[inline(always)]
    fn parts(&self) -> Parts {
        let p = self.ptr();
        let flags = self.flags();
        let head = header_len(flags);
        // SAFETY: a node holds the key's varint right after its header.
        let (key_len, n) = unsafe { read_varint(p.add(head)) };
        let key_at = head + n;
        let payload_at = key_at + key_len;
        let size = payload_at
            + match flags & KIND_MASK {
                KIND_BYTES => {
                    // SAFETY: a BYTES payload starts with its length varint.
                    let (len, n) = unsafe { read_varint(p.add(payload_at)) };
                    n + len
                }
                _ => 8,
            };
        Parts {
            flags,
            payload_at,
            size,
        }
    }

    /// The key. Parses only the header and the key's length: lookups call
    /// this for every candidate they compare.
    #[inline(always)]
    pub fn key(&self) -> &[u8] {
        let p = self.ptr();
        let head = header_len(self.flags());
        // SAFETY: a node holds the key's varint right after its header, then
        // the key's bytes, inside the node, which lives as long as `self` is
        // borrowed.
        unsafe {
            let (len, n) = read_varint(p.add(head));
            std::slice::from_raw_parts(p.add(head + n), len)
        }
    }

    /// The boxed value, for BOXED nodes.
    fn boxed_ptr(&self, parts: &Parts) -> Option<*mut Value> {
        (parts.flags & KIND_MASK == KIND_BOXED).then(|| {
            // SAFETY: a BOXED payload is the 8-byte address of a Box<Value>.
            let addr = unsafe {
                std::ptr::read_unaligned(self.ptr().add(parts.payload_at).cast::<usize>())
            };
            addr as *mut Value
        })
    }

    /// The value, borrowed.
    #[inline]
    pub fn value(&self) -> ValueRef<'_> {
        let parts = self.parts();
        // SAFETY: payload reads at the offsets `parts` found, inside the
        // node; a boxed value is owned by the node and lives while `self`
        // is borrowed.
        unsafe {
            let p = self.ptr().add(parts.payload_at);
            match parts.flags & KIND_MASK {
                KIND_BYTES => {
                    let (len, n) = read_varint(p);
                    ValueRef::Str(StrRef::Bytes(std::slice::from_raw_parts(p.add(n), len)))
                }
                KIND_INT => ValueRef::Str(StrRef::Int(std::ptr::read_unaligned(p.cast::<i64>()))),
                _ => ValueRef::of(&*self.boxed_ptr(&parts).expect("boxed")),
            }
        }
    }

    /// The string value, if it is one.
    #[inline]
    pub fn str(&self) -> Option<StrRef<'_>> {
        self.value().as_str()
    }

    /// The value, mutable. An inline string moves into a box first (the
    /// node is rebuilt), as it is about to be edited in place.
    pub fn value_mut(&mut self) -> &mut Value {
        let parts = self.parts();
        if parts.flags & KIND_MASK != KIND_BOXED {
            let v = self.value().to_owned();
            self.set_payload(Payload::Boxed(Box::new(v)));
        }
        let parts = self.parts();
        // SAFETY: the node is BOXED now; its value is owned by the node and
        // `&mut self` makes the access unique.
        unsafe { &mut *self.boxed_ptr(&parts).expect("boxed") }
    }

    /// The boxed value (collections, shared and edited strings), mutable;
    /// `None` for an inline string or integer, which stays inline.
    pub fn boxed_mut(&mut self) -> Option<&mut Value> {
        let parts = self.parts();
        // SAFETY: the node's boxed value; `&mut self` makes the access
        // unique.
        self.boxed_ptr(&parts).map(|b| unsafe { &mut *b })
    }

    /// Replace the value with a string (SET over an existing key, INCR).
    pub fn set_str(&mut self, s: StrRef<'_>) {
        self.set_payload(str_payload(s));
    }

    /// Replace the value.
    pub fn set_value(&mut self, value: Value) {
        with_payload(value, |p| self.set_payload(p))
    }

    /// Swap in a new payload, keeping key, expiry and access bits. The
    /// node is resized in place where the allocator can (same size class).
    fn set_payload(&mut self, payload: Payload<'_>) {
        let parts = self.parts();
        let old_box = self.boxed_ptr(&parts);
        let new_size = parts.payload_at + payload.len();
        let layout = Layout::from_size_align(parts.size, NODE_ALIGN).expect("entry layout");
        let kind = payload.kind();
        // SAFETY: the node was allocated with `layout`; `realloc` keeps the
        // header and key (the first `payload_at` bytes, below both sizes),
        // then the new payload is written inside the new size. The old
        // boxed value, if any, was read out above and is dropped once.
        unsafe {
            // The common overwrite (a value of the same length): no call
            // into the allocator at all.
            let p = if new_size == parts.size {
                self.ptr()
            } else {
                alloc::realloc(self.ptr(), layout, new_size)
            };
            if p.is_null() {
                alloc::handle_alloc_error(Layout::from_size_align_unchecked(new_size, NODE_ALIGN));
            }
            p.write((parts.flags & !KIND_MASK) | kind);
            payload.write(p.add(parts.payload_at));
            self.set_addr(p);
            if let Some(b) = old_box {
                drop(Box::from_raw(b));
            }
        }
    }

    /// Point at a new node, keeping the table's tag bits.
    fn set_addr(&mut self, p: *mut u8) {
        let tag = self.word.get() & !word_addr(usize::MAX);
        self.word = NonZeroUsize::new(addr_word(p as usize) | tag).expect("non-null");
    }

    /// The value, owned; frees the node.
    pub fn into_value(self) -> Value {
        match self.value() {
            ValueRef::Str(StrRef::Int(n)) => Value::Str(Str::Int(n)),
            ValueRef::Str(StrRef::Bytes(b)) => Value::Str(Str::Bytes(b.to_vec())),
            _ => *self.into_box(),
        }
    }

    /// The boxed value of a BOXED node, owned; frees the node.
    fn into_box(self) -> Box<Value> {
        let parts = self.parts();
        let b = self.boxed_ptr(&parts).expect("boxed");
        // Turn the payload into an integer so that dropping the node does
        // not drop the box handed out here.
        // SAFETY: the node's flags byte, then the box this node owned, now
        // owned by the caller only.
        unsafe {
            self.ptr().write((parts.flags & !KIND_MASK) | KIND_INT);
            Box::from_raw(b)
        }
    }

    /// An owned deep copy of the value.
    pub fn to_value(&self) -> Value {
        self.value().to_owned()
    }

    /// The same entry under another key (RENAME, COPY, insert of a keyless
    /// entry), moving the value.
    pub fn rekey(self, key: &[u8]) -> Entry {
        let expire = self.expire_at_ms();
        let access = self.access();
        match self.value() {
            ValueRef::Str(s @ (StrRef::Int(_) | StrRef::Bytes(_))) => {
                Entry::from_addr(build(key, str_payload(s), expire, access))
            }
            // The box moves to the new node as it is.
            _ => Entry::from_addr(build(key, Payload::Boxed(self.into_box()), expire, access)),
        }
    }

    /// Absolute Unix time in ms at which the key expires.
    #[inline]
    pub fn expire_at_ms(&self) -> Option<i64> {
        (self.flags() & EXPIRES != 0)
            // SAFETY: with EXPIRES the 8 bytes after the access bits are
            // the time.
            .then(|| unsafe { std::ptr::read_unaligned(self.ptr().add(4).cast::<i64>()) })
    }

    #[inline]
    pub fn is_expired(&self, now_ms: i64) -> bool {
        self.expire_at_ms().is_some_and(|t| t <= now_ms)
    }

    /// Set or clear the expiry. Inside a [`crate::Db`], go through
    /// [`crate::Db::set_expire`], which keeps its expiry index.
    pub fn set_expire_at_ms(&mut self, at: Option<i64>) {
        let had = self.flags() & EXPIRES != 0;
        match (had, at) {
            (true, Some(t)) => {
                // SAFETY: as in `expire_at_ms`.
                unsafe { std::ptr::write_unaligned(self.ptr().add(4).cast::<i64>(), t) }
            }
            (false, None) => {}
            _ => self.rebuild_with_expire(at),
        }
    }

    fn rebuild_with_expire(&mut self, at: Option<i64>) {
        let parts = self.parts();
        let old_head = header_len(parts.flags);
        let flags = (parts.flags & !EXPIRES) | if at.is_some() { EXPIRES } else { 0 };
        let new_head = header_len(flags);
        let rest = parts.size - old_head;
        let size = new_head + rest;
        let layout = Layout::from_size_align(size, NODE_ALIGN).expect("entry size");
        // SAFETY: a fresh node of `size` bytes gets the flags, the access
        // bits, the expiry if any, and the old node's bytes after its
        // header (key and payload, a boxed value's address moving with
        // them); then the old node is freed with its own layout.
        unsafe {
            let p = alloc::alloc(layout);
            if p.is_null() {
                alloc::handle_alloc_error(layout);
            }
            let old = self.ptr();
            p.write(flags);
            std::ptr::copy_nonoverlapping(old.add(1), p.add(1), 3);
            if let Some(t) = at {
                std::ptr::write_unaligned(p.add(4).cast::<i64>(), t);
            }
            std::ptr::copy_nonoverlapping(old.add(old_head), p.add(new_head), rest);
            alloc::dealloc(
                old,
                Layout::from_size_align_unchecked(parts.size, NODE_ALIGN),
            );
            self.set_addr(p);
        }
    }

    /// The 24 access bits: Valkey's LRU clock or its LFU time and counter,
    /// as the database's [`crate::AccessPolicy`] stamped them.
    #[inline]
    pub fn access(&self) -> u32 {
        let mut a = [0u8; 4];
        // SAFETY: bytes 1..4 of a node are the access bits.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr().add(1), a.as_mut_ptr(), 3) };
        u32::from_le_bytes(a)
    }

    #[inline]
    pub fn set_access(&mut self, access: u32) {
        let a = (access & ACCESS_MASK).to_le_bytes();
        // SAFETY: as in `access`.
        unsafe { std::ptr::copy_nonoverlapping(a.as_ptr(), self.ptr().add(1), 3) };
    }

    /// TYPE's answer.
    pub fn type_name(&self) -> &'static str {
        self.value().type_name()
    }

    /// OBJECT ENCODING's answer. A string Valkey 8.1 would make `embstr`
    /// stays one only if the key fits beside it in the object's 64 bytes.
    pub fn encoding(&self) -> &'static str {
        match self.value().encoding() {
            "embstr"
                if !embeds_with_key(
                    self.key().len(),
                    self.str_len(),
                    self.expire_at_ms().is_some(),
                ) =>
            {
                "raw"
            }
            enc => enc,
        }
    }

    /// Bytes of a string value that is not an integer (0 otherwise).
    fn str_len(&self) -> usize {
        self.str().and_then(StrRef::bytes).map_or(0, <[u8]>::len)
    }

    /// The node's first line only: its header (flags, access bits, expire
    /// time) and, for a short key, the key. What eviction's sample reads
    /// to score a key and keep it as a candidate, and its removal to
    /// compare the key: [`Item::prefetch`]'s second line would be one more
    /// miss per node that nothing reads.
    #[inline(always)]
    pub(crate) fn prefetch_header(&self) {
        prefetch_ptr(self.ptr());
    }

    /// After [`Item::prefetch`] (the node's first two lines): the rest of
    /// an inline value, up to [`VALUE_PREFETCH_BYTES`].
    pub fn prefetch_value(&self) {
        let n = self.parts().size.min(VALUE_PREFETCH_BYTES);
        let p = self.ptr();
        let mut off = 128;
        while off < n {
            prefetch_ptr(p.wrapping_add(off));
            off += 64;
        }
        if n > 128 {
            prefetch_ptr(p.wrapping_add(n - 1));
        }
    }

    /// After [`Item::prefetch`] has brought the node in: start the miss of
    /// a boxed value (a walk over many keys, as a snapshot's, asks for it a
    /// bucket ahead of reading it).
    pub(crate) fn prefetch_boxed(&self) {
        let parts = self.parts();
        if let Some(b) = self.boxed_ptr(&parts) {
            prefetch_ptr(b);
        }
    }

    /// After [`Entry::prefetch_boxed`] brought the boxed value in: start
    /// the miss of its compact buffer.
    pub(crate) fn prefetch_heap(&self) {
        let parts = self.parts();
        if let Some(b) = self.boxed_ptr(&parts) {
            // SAFETY: the node owns the boxed value, alive while `self` is
            // borrowed; only its pointer fields are read.
            unsafe { (*b).prefetch_heap() }
        }
    }

    /// Offer the node, a boxed value's box and that value's own buffer
    /// to the mover (active defragmentation); the entry follows whatever
    /// moved. Counts each block moved or left in `counts`; true if any
    /// moved.
    pub(crate) fn relocate(&mut self, m: &mut Mover<'_>) -> bool {
        let hits = m.counts.hits;
        let parts = self.parts();
        let node = Layout::from_size_align(parts.size, NODE_ALIGN).expect("entry layout");
        // SAFETY: the node is a live block made with `node`, owned by this
        // entry and reached by nothing else while `&mut self` is held; on a
        // move the entry points at the copy at once. The `Relocate`
        // contract makes the copy byte for byte.
        if let Some(p) = unsafe { m.block(self.node_ptr(), node) } {
            self.set_addr(p.as_ptr());
        }
        if let Some(b) = self
            .boxed_ptr(&parts)
            .and_then(|b| NonNull::new(b.cast::<u8>()))
        {
            // SAFETY: the box this node owns, made with Value's layout and
            // reached only through the node; a move rewrites the node's
            // payload, the only copy of its address. A `Value` moves by
            // copying its bytes (nothing points into it).
            unsafe {
                if let Some(p) = m.block(b, Layout::new::<Value>()) {
                    let at = self.ptr().add(parts.payload_at).cast::<usize>();
                    std::ptr::write_unaligned(at, p.as_ptr() as usize);
                }
            }
        }
        if let Some(v) = self.boxed_mut() {
            v.relocate(m);
        }
        m.counts.hits > hits
    }

    fn node_ptr(&self) -> NonNull<u8> {
        NonNull::new(self.ptr()).expect("a node is never null")
    }

    /// Bytes the node holds, as asked of the allocator.
    pub fn node_size(&self) -> usize {
        self.parts().size
    }

    /// Bytes the allocator holds for this key: the node, and the boxed
    /// value with everything it owns.
    pub fn memory_usage(&self) -> usize {
        let parts = self.parts();
        let node = crate::alloc_size(parts.size);
        match self.boxed_ptr(&parts) {
            Some(b) => {
                // SAFETY: the boxed value, owned by the node, read while
                // `self` is borrowed.
                let value = unsafe { &*b };
                node + crate::alloc_size(std::mem::size_of::<Value>()) + value.memory_usage()
            }
            None => node,
        }
    }
}

fn str_payload(s: StrRef<'_>) -> Payload<'_> {
    match s {
        StrRef::Int(n) => Payload::Int(n),
        StrRef::Bytes(b) if b.len() < SHARED_STR_MIN => Payload::Bytes(b),
        StrRef::Bytes(b) => Payload::Boxed(Box::new(Value::Str(Str::Shared(Arc::from(b))))),
        StrRef::Raw(b) => Payload::Boxed(Box::new(Value::Str(Str::Raw(b.to_vec())))),
        StrRef::Shared(b) => Payload::Boxed(Box::new(Value::Str(Str::Shared(b.clone())))),
    }
}

/// A deep copy: a new node with the same key, value, expiry and access
/// bits (and none of the table's tag bits). A boxed value is cloned, so a
/// later edit of either copy leaves the other as it was; a shared string
/// (`Arc`) is shared, as it is never edited in place.
impl Clone for Entry {
    fn clone(&self) -> Entry {
        let parts = self.parts();
        let (expire, access) = (self.expire_at_ms(), self.access());
        let payload = match self.boxed_ptr(&parts) {
            // SAFETY: the node's boxed value, read while `self` is borrowed.
            Some(b) => Payload::Boxed(Box::new(unsafe { &*b }.clone())),
            None => match self.value() {
                ValueRef::Str(StrRef::Int(n)) => Payload::Int(n),
                ValueRef::Str(StrRef::Bytes(b)) => Payload::Bytes(b),
                _ => unreachable!("an unboxed value is an integer or inline bytes"),
            },
        };
        Entry::from_addr(build(self.key(), payload, expire, access))
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        let parts = self.parts();
        let b = self.boxed_ptr(&parts);
        // SAFETY: the node and its boxed value are owned by this entry and
        // freed once, with the node's own layout.
        unsafe {
            if let Some(b) = b {
                drop(Box::from_raw(b));
            }
            alloc::dealloc(
                self.ptr(),
                Layout::from_size_align_unchecked(parts.size, NODE_ALIGN),
            );
        }
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("key", &String::from_utf8_lossy(self.key()))
            .field("value", &self.value())
            .field("expire_at_ms", &self.expire_at_ms())
            .finish()
    }
}

// SAFETY: `Entry` is `repr(transparent)` over a non-zero usize that owns
// its node; nodes are 8-aligned (bit 0 clear) and every access masks the
// address with `word_addr`, ignoring and keeping the tag bits.
unsafe impl Item for Entry {
    #[inline(always)]
    fn key(&self) -> &[u8] {
        Entry::key(self)
    }
    /// Recomputed from the key, as Valkey does on resize: a node does not
    /// spend 8 bytes on it.
    fn hash(&self) -> u64 {
        hash_key(self.key())
    }
    /// The node's first two lines: the header and key (a lookup compares
    /// the key, an access stamps the header), and the start of the value.
    /// A node is 8-aligned, so these may be its first line and a half; the
    /// rest of a value comes from [`Entry::prefetch_value`], from byte 128.
    #[inline(always)]
    fn prefetch(&self) {
        let p = self.ptr();
        prefetch_ptr(p);
        prefetch_ptr(p.wrapping_add(64));
    }
}
