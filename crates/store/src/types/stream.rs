//! The stream value type: entries ordered by ID, packed in blocks, plus
//! consumer groups.
//!
//! ```text
//!   Stream ─ BTreeMap<master id, Block>      blocks in ID order
//!              Block.data: master fields │ entry │ entry │ ...
//!                entry: flags │ ms delta │ seq delta │ [n, fields+values
//!                       │ values only, when SAMEFIELDS]  (varint lengths)
//!          ─ length, last id, first id, max deleted id, entries added
//!          ─ groups: name → Group { last id, entries read, PEL, consumers }
//! ```
//!
//! A block is what a node of Valkey's radix tree holds: its key is the ID
//! of its first entry, its master fields are that entry's field names, and
//! every entry whose fields are the same stores only its values. Where
//! Valkey packs a listpack, a block packs varints: no back-lengths, no
//! per-entry element count, so an entry costs a few bytes less than in
//! Valkey. Blocks end where Valkey's listpacks would end (the block keeps
//! the byte size its listpack would have, `lp_bytes`), so approximate
//! trimming (`~`) removes exactly the entries Valkey removes, and an RDB
//! file writes each block as the listpack Valkey would have.
//!
//! Deleting an entry only flags it, as in Valkey; a block whose entries
//! are all deleted is dropped.

use super::lp_size;
use crate::defrag::{LaterCursor, Mover};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Blocks one step of active defragmentation offers (each up to
/// `stream-node-max-bytes`, 4 KiB by default).
const RELOCATE_BLOCKS_PER_STEP: usize = 16;

/// A stream entry ID: milliseconds and sequence.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };
    pub const fn new(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }
    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }
    /// The next ID; `None` past the last possible one.
    pub fn next(self) -> Option<StreamId> {
        if self.seq == u64::MAX {
            if self.ms == u64::MAX {
                None
            } else {
                Some(StreamId::new(self.ms + 1, 0))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq + 1))
        }
    }
    /// The previous ID; `None` before 0-0.
    pub fn prev(self) -> Option<StreamId> {
        if self.seq == 0 {
            if self.ms == 0 {
                None
            } else {
                Some(StreamId::new(self.ms - 1, u64::MAX))
            }
        } else {
            Some(StreamId::new(self.ms, self.seq - 1))
        }
    }
    /// The 128-bit big-endian form RDB files use.
    pub fn to_be_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.ms.to_be_bytes());
        b[8..].copy_from_slice(&self.seq.to_be_bytes());
        b
    }
    pub fn from_be_bytes(b: &[u8; 16]) -> StreamId {
        StreamId::new(
            u64::from_be_bytes(b[..8].try_into().expect("8 bytes")),
            u64::from_be_bytes(b[8..].try_into().expect("8 bytes")),
        )
    }
    /// `<ms>-<seq>`.
    pub fn write(self, out: &mut Vec<u8>) {
        use std::io::Write;
        let _ = write!(out, "{}-{}", self.ms, self.seq);
    }
    pub fn to_vec(self) -> Vec<u8> {
        let mut v = Vec::with_capacity(24);
        self.write(&mut v);
        v
    }
}

/// Entry flags, Valkey's `STREAM_ITEM_FLAG_*` (the same bits go into RDB
/// listpacks).
pub const FLAG_DELETED: u8 = 1;
pub const FLAG_SAMEFIELDS: u8 = 2;

/// Where blocks end: `stream-node-max-bytes` and `stream-node-max-entries`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeLimits {
    pub max_bytes: usize,
    pub max_entries: usize,
}

impl Default for NodeLimits {
    fn default() -> Self {
        NodeLimits {
            max_bytes: 4096,
            max_entries: 100,
        }
    }
}

/// Valkey's cap on a stream listpack (`STREAM_LISTPACK_MAX_SIZE`).
pub const LISTPACK_MAX_SIZE: usize = 1 << 30;

// ---- varints ---------------------------------------------------------------

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
fn get_varint(b: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let c = b[*pos];
        *pos += 1;
        v |= u64::from(c & 0x7f) << shift;
        if c < 0x80 {
            return v;
        }
        shift += 7;
    }
}

/// A field or value as stored: bytes, or an integer for a string that is
/// a canonical decimal (as a listpack stores it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem<'a> {
    Bytes(&'a [u8]),
    Int(i64),
}

impl Elem<'_> {
    /// The string form (integers in decimal).
    pub fn write_to(&self, out: &mut Vec<u8>) {
        match self {
            Elem::Bytes(b) => out.extend_from_slice(b),
            Elem::Int(v) => {
                use std::io::Write;
                let _ = write!(out, "{v}");
            }
        }
    }
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.write_to(&mut v);
        v
    }
    /// Is this the element `s` is stored as?
    pub fn is(&self, s: &[u8]) -> bool {
        match (self, stored_int(s)) {
            (Elem::Int(v), Some(w)) => *v == w,
            (Elem::Bytes(b), None) => *b == s,
            _ => false,
        }
    }
}

/// The integer `s` is stored as, if any: a canonical decimal whose
/// zigzag form leaves room for the tag bit.
fn stored_int(s: &[u8]) -> Option<i64> {
    lp_size::string_int(s).filter(|&v| zigzag(v) < 1 << 63)
}

/// Elements: a varint header, `len << 1` followed by the bytes, or
/// `zigzag(int) << 1 | 1`. A 12-digit number takes 6 bytes (a listpack:
/// 10), a short word its length plus one (a listpack: plus two).
#[inline]
fn get_elem<'a>(b: &'a [u8], pos: &mut usize) -> Elem<'a> {
    let h = get_varint(b, pos);
    if h & 1 == 1 {
        return Elem::Int(unzigzag(h >> 1));
    }
    let n = (h >> 1) as usize;
    let s = &b[*pos..*pos + n];
    *pos += n;
    Elem::Bytes(s)
}

#[inline]
fn skip_elem(b: &[u8], pos: &mut usize) {
    let h = get_varint(b, pos);
    if h & 1 == 0 {
        *pos += (h >> 1) as usize;
    }
}

fn put_elem(out: &mut Vec<u8>, s: &[u8]) {
    match stored_int(s) {
        Some(v) => put_varint(out, (zigzag(v) << 1) | 1),
        None => {
            put_varint(out, (s.len() as u64) << 1);
            out.extend_from_slice(s);
        }
    }
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

// ---- blocks ----------------------------------------------------------------

/// A run of entries after a master ID (the map key).
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// Master fields (count, then each), then the entries.
    data: Vec<u8>,
    /// Entries not flagged deleted.
    live: u32,
    /// Entries flagged deleted.
    deleted: u32,
    /// Listpack bytes of everything but the header, the end byte and the
    /// two counters (which change size as they grow).
    lp_rest: u32,
}

/// One entry of a block, as stored.
#[derive(Clone, Copy, Debug)]
pub struct RawEntry<'a> {
    pub id: StreamId,
    pub flags: u8,
    /// Offset of the flags byte in the block.
    at: usize,
    /// Number of field-value pairs.
    pub nfields: usize,
    /// The master fields (for SAMEFIELDS entries).
    master: &'a [u8],
    /// From the first field or value on.
    body: &'a [u8],
}

impl<'a> RawEntry<'a> {
    pub fn is_deleted(&self) -> bool {
        self.flags & FLAG_DELETED != 0
    }
    /// The field-value pairs in order.
    pub fn pairs(&self) -> Pairs<'a> {
        Pairs {
            same: self.flags & FLAG_SAMEFIELDS != 0,
            master: self.master,
            mpos: 0,
            body: self.body,
            pos: 0,
            left: self.nfields,
        }
    }
}

/// Iterator over an entry's field-value pairs.
pub struct Pairs<'a> {
    same: bool,
    master: &'a [u8],
    mpos: usize,
    body: &'a [u8],
    pos: usize,
    left: usize,
}

impl<'a> Iterator for Pairs<'a> {
    type Item = (Elem<'a>, Elem<'a>);
    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let f = if self.same {
            get_elem(self.master, &mut self.mpos)
        } else {
            get_elem(self.body, &mut self.pos)
        };
        let v = get_elem(self.body, &mut self.pos);
        Some((f, v))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Pairs<'_> {}

impl Block {
    /// A block whose master fields are `fields` (every other element of
    /// `fv`, a flat field, value, ... list), with no entries yet.
    fn new(fields: impl ExactSizeIterator<Item = impl AsRef<[u8]>> + Clone) -> Block {
        let mut data = Vec::new();
        put_varint(&mut data, fields.len() as u64);
        let mut lp_rest = lp_size::int_size(fields.len() as i64) + lp_size::int_size(0);
        for f in fields {
            put_elem(&mut data, f.as_ref());
            lp_rest += lp_size::str_size(f.as_ref());
        }
        Block {
            data,
            live: 0,
            deleted: 0,
            lp_rest: lp_rest as u32,
        }
    }

    /// Live entries.
    pub fn live(&self) -> u64 {
        u64::from(self.live)
    }
    /// Entries flagged deleted.
    pub fn deleted(&self) -> u64 {
        u64::from(self.deleted)
    }
    /// The bytes Valkey's listpack for this node would take.
    pub fn lp_bytes(&self) -> usize {
        6 + 1
            + lp_size::int_size(i64::from(self.live))
            + lp_size::int_size(i64::from(self.deleted))
            + self.lp_rest as usize
    }
    fn master_end(&self) -> (usize, usize) {
        let mut pos = 0;
        let n = get_varint(&self.data, &mut pos) as usize;
        for _ in 0..n {
            skip_elem(&self.data, &mut pos);
        }
        (n, pos)
    }
    /// The master field names.
    pub fn master_fields(&self) -> impl Iterator<Item = Elem<'_>> {
        let mut pos = 0;
        let n = get_varint(&self.data, &mut pos) as usize;
        let data = &self.data;
        (0..n).map(move |_| get_elem(data, &mut pos))
    }
    fn same_fields(&self, fv: &[&[u8]]) -> bool {
        let mut pos = 0;
        let n = get_varint(&self.data, &mut pos) as usize;
        if n * 2 != fv.len() {
            return false;
        }
        for i in 0..n {
            if !get_elem(&self.data, &mut pos).is(fv[i * 2]) {
                return false;
            }
        }
        true
    }
    /// Append an entry (flags, id relative to `master`, pairs).
    fn push(&mut self, master: StreamId, id: StreamId, fv: &[&[u8]], deleted: bool) {
        let same = self.same_fields(fv);
        let mut flags = if same { FLAG_SAMEFIELDS } else { 0 };
        if deleted {
            flags |= FLAG_DELETED;
        }
        let ms_delta = id.ms.wrapping_sub(master.ms) as i64;
        let seq_delta = id.seq.wrapping_sub(master.seq) as i64;
        let n = fv.len() / 2;
        let body: usize = fv.iter().map(|s| s.len() + 2).sum();
        self.data.reserve(3 + 20 + body);
        self.data.push(flags);
        put_varint(&mut self.data, ms_delta as u64);
        put_varint(&mut self.data, zigzag(seq_delta));
        let mut lp = lp_size::int_size(i64::from(flags))
            + lp_size::int_size(ms_delta)
            + lp_size::int_size(seq_delta);
        if !same {
            put_varint(&mut self.data, n as u64);
            lp += lp_size::int_size(n as i64);
        }
        for (i, s) in fv.iter().enumerate() {
            if !same || i % 2 == 1 {
                put_elem(&mut self.data, s);
                lp += lp_size::str_size(s);
            }
        }
        let lp_count = if same { n + 3 } else { 2 * n + 4 };
        lp += lp_size::int_size(lp_count as i64);
        self.lp_rest += lp as u32;
        if deleted {
            self.deleted += 1;
        } else {
            self.live += 1;
        }
    }
    /// Every entry, deleted ones included, in order.
    pub fn entries(&self, master: StreamId) -> BlockIter<'_> {
        let (nmaster, end) = self.master_end();
        let mut mpos = 0;
        get_varint(&self.data, &mut mpos);
        BlockIter {
            data: &self.data,
            master_fields: &self.data[mpos..end],
            nmaster,
            pos: end,
            master,
        }
    }
    fn set_deleted(&mut self, at: usize) {
        self.data[at] |= FLAG_DELETED;
        self.live -= 1;
        self.deleted += 1;
    }
    fn capacity_bytes(&self) -> usize {
        crate::alloc_size(self.data.capacity())
    }
}

/// Iterator over a block's entries.
pub struct BlockIter<'a> {
    data: &'a [u8],
    master_fields: &'a [u8],
    nmaster: usize,
    pos: usize,
    master: StreamId,
}

impl<'a> Iterator for BlockIter<'a> {
    type Item = RawEntry<'a>;
    fn next(&mut self) -> Option<RawEntry<'a>> {
        if self.pos >= self.data.len() {
            return None;
        }
        let d = self.data;
        let at = self.pos;
        let mut pos = at;
        let flags = d[pos];
        pos += 1;
        let ms_delta = get_varint(d, &mut pos);
        let seq_delta = unzigzag(get_varint(d, &mut pos));
        let id = StreamId::new(
            self.master.ms.wrapping_add(ms_delta),
            self.master.seq.wrapping_add(seq_delta as u64),
        );
        let same = flags & FLAG_SAMEFIELDS != 0;
        let nfields = if same {
            self.nmaster
        } else {
            get_varint(d, &mut pos) as usize
        };
        let body_start = pos;
        let elems = if same { nfields } else { nfields * 2 };
        for _ in 0..elems {
            skip_elem(d, &mut pos);
        }
        self.pos = pos;
        Some(RawEntry {
            id,
            flags,
            at,
            nfields,
            master: self.master_fields,
            body: &d[body_start..pos],
        })
    }
}

// ---- consumer groups -------------------------------------------------------

/// `entries_read` of a group whose counter is unknown.
pub const ENTRIES_READ_INVALID: i64 = -1;

/// A pending (delivered, not acknowledged) entry of a group.
#[derive(Clone, Debug, PartialEq)]
pub struct Nack {
    /// The consumer that owns it.
    pub consumer: Arc<[u8]>,
    /// Unix ms of the last delivery.
    pub delivery_time: i64,
    pub delivery_count: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Consumer {
    pub name: Arc<[u8]>,
    /// Unix ms of the last attempted interaction (XREADGROUP, XCLAIM, ...).
    pub seen_time: i64,
    /// Unix ms of the last successful interaction; -1 never.
    pub active_time: i64,
    /// IDs of its pending entries (details in the group's PEL).
    pub pel: std::collections::BTreeSet<StreamId>,
}

impl Consumer {
    pub fn new(name: &[u8], now_ms: i64) -> Consumer {
        Consumer {
            name: Arc::from(name),
            seen_time: now_ms,
            active_time: -1,
            pel: Default::default(),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub last_id: StreamId,
    /// Logical read counter; [`ENTRIES_READ_INVALID`] when unknown.
    pub entries_read: i64,
    pub pel: BTreeMap<StreamId, Nack>,
    pub consumers: BTreeMap<Arc<[u8]>, Consumer>,
}

impl Group {
    pub fn new(last_id: StreamId, entries_read: i64) -> Group {
        Group {
            last_id,
            entries_read,
            pel: BTreeMap::new(),
            consumers: BTreeMap::new(),
        }
    }
    /// Drop `id` from the PEL and its owner's PEL; true if it was pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        match self.pel.remove(&id) {
            Some(n) => {
                if let Some(c) = self.consumers.get_mut(&n.consumer) {
                    c.pel.remove(&id);
                }
                true
            }
            None => false,
        }
    }
    /// Give pending `id` to `consumer` (which exists), creating the NACK if
    /// missing; returns it.
    pub fn assign(&mut self, id: StreamId, consumer: &Arc<[u8]>, now_ms: i64) -> &mut Nack {
        use std::collections::btree_map::Entry;
        match self.pel.entry(id) {
            Entry::Vacant(v) => {
                if let Some(c) = self.consumers.get_mut(consumer) {
                    c.pel.insert(id);
                }
                v.insert(Nack {
                    consumer: consumer.clone(),
                    delivery_time: now_ms,
                    delivery_count: 1,
                })
            }
            Entry::Occupied(o) => {
                let n = o.into_mut();
                if n.consumer != *consumer {
                    if let Some(c) = self.consumers.get_mut(&n.consumer) {
                        c.pel.remove(&id);
                    }
                    if let Some(c) = self.consumers.get_mut(consumer) {
                        c.pel.insert(id);
                    }
                    n.consumer = consumer.clone();
                }
                n
            }
        }
    }
    /// Remove a consumer and its pending entries; how many it had.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let c = self.consumers.remove(name)?;
        for id in &c.pel {
            self.pel.remove(id);
        }
        Some(c.pel.len())
    }
}

// ---- the stream ------------------------------------------------------------

/// Trimming: what to keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trim {
    MaxLen(u64),
    MinId(StreamId),
}

/// A stream value.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Stream {
    blocks: BTreeMap<StreamId, Block>,
    pub length: u64,
    pub last_id: StreamId,
    pub first_id: StreamId,
    pub max_deleted_id: StreamId,
    pub entries_added: u64,
    /// Consumer groups by name (sorted, as Valkey's radix tree lists them).
    pub groups: Option<Box<BTreeMap<Vec<u8>, Group>>>,
}

/// BTreeMap node overhead per block: a leaf holds up to 11 (key, value)
/// pairs of 16 + 40 bytes plus its header; counted as one leaf's share.
const PER_BLOCK_OVERHEAD: usize = 64;

impl Stream {
    pub fn new() -> Stream {
        Stream::default()
    }

    /// The blocks' buffers, one step of active defragmentation from
    /// `cursor` (0 starts; 0 when done). The cursor is the ID of the next
    /// block to offer, so blocks added or trimmed between steps neither
    /// stop the walk nor make it start over. The map's own nodes and the
    /// consumer groups stay where they are.
    pub(crate) fn relocate_step(&mut self, cursor: LaterCursor, m: &mut Mover<'_>) -> LaterCursor {
        let from = StreamId::new((cursor >> 64) as u64, cursor as u64);
        let mut blocks = self.blocks.range_mut(from..);
        for (_, b) in blocks.by_ref().take(RELOCATE_BLOCKS_PER_STEP) {
            m.vec(&mut b.data);
        }
        // A block keyed 0-0 (which XADD never makes) would read as the
        // walk's end: only what is offered changes.
        blocks.next().map_or(0, |(id, _)| {
            (LaterCursor::from(id.ms) << 64) | LaterCursor::from(id.seq)
        })
    }

    pub fn len(&self) -> u64 {
        self.length
    }
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }
    /// Blocks (Valkey's radix tree keys).
    pub fn block_count(&self) -> usize {
        self.blocks.len()
    }
    /// Every block with its master ID, in order.
    pub fn blocks(&self) -> impl Iterator<Item = (StreamId, &Block)> {
        self.blocks.iter().map(|(k, b)| (*k, b))
    }
    pub fn group_count(&self) -> usize {
        self.groups.as_ref().map_or(0, |g| g.len())
    }
    pub fn group(&self, name: &[u8]) -> Option<&Group> {
        self.groups.as_ref()?.get(name)
    }
    pub fn group_mut(&mut self, name: &[u8]) -> Option<&mut Group> {
        self.groups.as_mut()?.get_mut(name)
    }
    /// Add a group; false if the name is taken.
    pub fn create_group(&mut self, name: &[u8], last_id: StreamId, entries_read: i64) -> bool {
        let g = self.groups.get_or_insert_with(Default::default);
        if g.contains_key(name) {
            return false;
        }
        g.insert(name.to_vec(), Group::new(last_id, entries_read));
        true
    }
    pub fn destroy_group(&mut self, name: &[u8]) -> bool {
        self.groups
            .as_mut()
            .is_some_and(|g| g.remove(name).is_some())
    }

    /// Append an entry with ID `id` (greater than `last_id`, checked by
    /// the caller) and pairs `fv` (field, value, ...).
    pub fn append(&mut self, id: StreamId, fv: &[&[u8]], lim: NodeLimits) {
        let total: usize = fv.iter().map(|s| s.len()).sum();
        let max_bytes = if lim.max_bytes == 0 || lim.max_bytes > LISTPACK_MAX_SIZE {
            LISTPACK_MAX_SIZE
        } else {
            lim.max_bytes
        };
        let mut new_block = true;
        if let Some(mut last) = self.blocks.last_entry() {
            let b = last.get_mut();
            let full_bytes = b.lp_bytes() + total >= max_bytes;
            let full_count =
                lim.max_entries != 0 && (b.live + b.deleted) as usize >= lim.max_entries;
            if full_bytes || full_count {
                // The block is done: give back what growth reserved.
                b.data.shrink_to_fit();
            } else {
                let master = *last.key();
                last.get_mut().push(master, id, fv, false);
                new_block = false;
            }
        }
        if new_block {
            let mut b = Block::new(fv.iter().step_by(2));
            // Most blocks fill up to the byte or entry limit: reserve what
            // Valkey preallocates (4 KiB at most).
            let pre = max_bytes.min(4096);
            b.data.reserve(pre.saturating_sub(b.data.len()));
            b.push(id, id, fv, false);
            self.blocks.insert(id, b);
        }
        self.length += 1;
        self.entries_added += 1;
        self.last_id = id;
        if self.length == 1 {
            self.first_id = id;
        }
    }

    /// Visit entries with `start <= id <= end`, deleted ones skipped,
    /// forward or (`rev`) backward, until `f` returns false.
    pub fn range<'a>(
        &'a self,
        start: StreamId,
        end: StreamId,
        rev: bool,
        mut f: impl FnMut(RawEntry<'a>) -> bool,
    ) {
        if start > end {
            return;
        }
        if !rev {
            // The block holding `start` begins at or before it.
            let first = self
                .blocks
                .range(..=start)
                .next_back()
                .map(|(k, _)| *k)
                .unwrap_or(StreamId::MIN);
            for (k, b) in self.blocks.range(first..) {
                if *k > end {
                    return;
                }
                for e in b.entries(*k) {
                    if e.id < start || e.is_deleted() {
                        continue;
                    }
                    if e.id > end || !f(e) {
                        return;
                    }
                }
            }
        } else {
            let mut buf: Vec<RawEntry<'a>> = Vec::new();
            for (k, b) in self.blocks.range(..=end).rev() {
                buf.clear();
                buf.extend(b.entries(*k));
                for e in buf.iter().rev() {
                    if e.id > end || e.is_deleted() {
                        continue;
                    }
                    if e.id < start || !f(*e) {
                        return;
                    }
                }
                if *k < start {
                    return;
                }
            }
        }
    }

    /// The entry `id`, if present and not deleted.
    pub fn get(&self, id: StreamId) -> Option<RawEntry<'_>> {
        let mut found = None;
        self.range(id, id, false, |e| {
            found = Some(e);
            false
        });
        found
    }

    pub fn contains(&self, id: StreamId) -> bool {
        self.get(id).is_some()
    }

    /// First (or last) live entry's ID.
    pub fn edge_id(&self, last: bool) -> Option<StreamId> {
        if last {
            // A forward walk of the last blocks, without the buffer a
            // reverse range collects (XREAD and XREADGROUP ask this on
            // every call).
            for (k, b) in self.blocks.iter().rev() {
                if b.live != 0 {
                    return b
                        .entries(*k)
                        .filter(|e| !e.is_deleted())
                        .last()
                        .map(|e| e.id);
                }
            }
            return None;
        }
        let mut found = None;
        self.range(StreamId::MIN, StreamId::MAX, false, |e| {
            found = Some(e.id);
            false
        });
        found
    }

    /// Flag entry `id` deleted; false if absent. Updates the length and
    /// drops a block left with no live entry. (The caller updates
    /// `first_id` and `max_deleted_id`, as XDEL does.)
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((&k, b)) = self.blocks.range_mut(..=id).next_back() else {
            return false;
        };
        let Some(at) = b
            .entries(k)
            .find(|e| e.id == id && !e.is_deleted())
            .map(|e| e.at)
        else {
            return false;
        };
        if b.live == 1 {
            self.blocks.remove(&k);
        } else {
            b.set_deleted(at);
        }
        self.length -= 1;
        true
    }

    /// Valkey's `streamTrim`: remove entries from the head until `how` is
    /// met; with `approx` only whole blocks go; `limit` (0 = none) caps the
    /// entries removed. Returns how many were removed.
    pub fn trim(&mut self, how: Trim, approx: bool, limit: u64) -> u64 {
        let mut deleted = 0u64;
        while let Some(mut first) = self.blocks.first_entry() {
            if let Trim::MaxLen(max) = how
                && self.length <= max
            {
                break;
            }
            let master = *first.key();
            let b = first.get_mut();
            let entries = b.live();
            if limit != 0 && deleted + entries > limit {
                break;
            }
            let remove_block = match how {
                Trim::MaxLen(max) => self.length - entries >= max,
                Trim::MinId(min) => {
                    let last = b.entries(master).last().map_or(master, |e| e.id);
                    last < min
                }
            };
            if remove_block {
                first.remove();
                self.length -= entries;
                deleted += entries;
                continue;
            }
            if approx {
                break;
            }
            let mut marks = Vec::new();
            let mut len = self.length;
            for e in b.entries(master) {
                let stop = match how {
                    Trim::MaxLen(max) => len <= max,
                    Trim::MinId(min) => e.id >= min,
                };
                if stop {
                    break;
                }
                if !e.is_deleted() {
                    marks.push(e.at);
                    len -= 1;
                }
            }
            for at in &marks {
                b.set_deleted(*at);
            }
            self.length -= marks.len() as u64;
            deleted += marks.len() as u64;
            break;
        }
        if self.length == 0 {
            self.first_id = StreamId::MIN;
        } else if deleted != 0 {
            self.first_id = self.edge_id(false).unwrap_or(StreamId::MAX);
        }
        deleted
    }

    /// Valkey's `streamRangeHasTombstones` from `start` to the end.
    pub fn has_tombstones_from(&self, start: StreamId) -> bool {
        if self.length == 0 || self.max_deleted_id.is_zero() {
            return false;
        }
        start <= self.max_deleted_id
    }

    /// Valkey's `streamEstimateDistanceFromFirstEverEntry`:
    /// [`ENTRIES_READ_INVALID`] when it cannot be known.
    pub fn estimate_distance(&self, id: StreamId) -> i64 {
        if self.entries_added == 0 {
            return 0;
        }
        if self.length == 0 && id <= self.last_id {
            return self.entries_added as i64;
        }
        if !id.is_zero() && id < self.max_deleted_id {
            return ENTRIES_READ_INVALID;
        }
        if id == self.last_id {
            return self.entries_added as i64;
        } else if id > self.last_id {
            return ENTRIES_READ_INVALID;
        }
        if self.max_deleted_id.is_zero() || self.max_deleted_id < self.first_id {
            if id < self.first_id {
                return (self.entries_added - self.length) as i64;
            } else if id == self.first_id {
                return (self.entries_added - self.length + 1) as i64;
            }
        }
        ENTRIES_READ_INVALID
    }

    /// A group's lag (`None`: unknown), as XINFO reports it.
    pub fn lag(&self, g: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if g.entries_read != ENTRIES_READ_INVALID && !self.has_tombstones_from(g.last_id) {
            return Some(self.entries_added as i64 - g.entries_read);
        }
        let read = self.estimate_distance(g.last_id);
        (read != ENTRIES_READ_INVALID).then(|| self.entries_added as i64 - read)
    }

    /// A group was just delivered `id` (greater than its last ID): move
    /// its last ID and read counter as Valkey's `streamReplyWithRange`.
    pub fn advance_group(&mut self, name: &[u8], id: StreamId) {
        let est = self.estimate_distance(id);
        let first = self.first_id;
        let tomb = |from: StreamId| self.has_tombstones_from(from);
        let added = self.entries_added;
        let Some(g) = self.groups.as_ref().and_then(|m| m.get(name)) else {
            return;
        };
        let valid =
            g.entries_read != ENTRIES_READ_INVALID && g.last_id >= first && !tomb(g.last_id);
        let g = self.group_mut(name).expect("group exists");
        if valid {
            g.entries_read += 1;
        } else if added != 0 {
            g.entries_read = est;
        }
        g.last_id = id;
    }

    /// Bytes the allocator holds for this stream (blocks, map nodes,
    /// groups).
    pub fn memory_usage(&self) -> usize {
        let mut n = 0;
        for b in self.blocks.values() {
            n += b.capacity_bytes() + PER_BLOCK_OVERHEAD;
        }
        if let Some(gs) = &self.groups {
            for (name, g) in gs.iter() {
                n += crate::alloc_size(name.len()) + 96;
                n += g.pel.len() * 64;
                for c in g.consumers.values() {
                    n += 96 + crate::alloc_size(c.name.len() + 16) + c.pel.len() * 24;
                }
            }
        }
        n
    }

    /// Effort to free it (lazyfree decides by it): blocks plus groups'
    /// entries, as Valkey's `lazyfreeGetFreeEffort`.
    pub fn free_effort(&self) -> usize {
        let mut n = self.blocks.len();
        if let Some(gs) = &self.groups {
            for g in gs.values() {
                n += 1 + g.pel.len();
            }
        }
        n
    }

    // ---- building from files (RDB) ----

    /// Insert a block read from a file: master ID, master fields and its
    /// entries as (flags, id, field-value list). The caller sets the
    /// stream's metadata afterwards; `length` grows by the live entries.
    pub fn push_loaded_block(
        &mut self,
        master: StreamId,
        master_fields: &[&[u8]],
        entries: &[(u8, StreamId, Vec<&[u8]>)],
    ) {
        let mut b = Block::new(master_fields.iter());
        for (flags, id, fv) in entries {
            let deleted = flags & FLAG_DELETED != 0;
            b.push(master, *id, fv, deleted);
        }
        b.data.shrink_to_fit();
        self.length += b.live();
        if b.live != 0 || b.deleted != 0 {
            self.blocks.insert(master, b);
        }
    }

    /// Entries of all blocks, for checks: (id, deleted).
    pub fn all_ids(&self) -> Vec<(StreamId, bool)> {
        let mut v = Vec::new();
        for (k, b) in &self.blocks {
            for e in b.entries(*k) {
                v.push((e.id, e.is_deleted()));
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId::new(ms, seq)
    }

    fn add(s: &mut Stream, i: StreamId, fv: &[&[u8]]) {
        s.append(i, fv, NodeLimits::default());
    }

    fn ids(s: &Stream, start: StreamId, end: StreamId, rev: bool) -> Vec<StreamId> {
        let mut v = Vec::new();
        s.range(start, end, rev, |e| {
            v.push(e.id);
            true
        });
        v
    }

    #[test]
    fn id_order_and_neighbours() {
        assert!(id(1, 5) < id(2, 0));
        assert!(id(1, 5) > id(1, 4));
        assert_eq!(id(1, u64::MAX).next(), Some(id(2, 0)));
        assert_eq!(StreamId::MAX.next(), None);
        assert_eq!(id(2, 0).prev(), Some(id(1, u64::MAX)));
        assert_eq!(StreamId::MIN.prev(), None);
        assert_eq!(id(7, 9).to_vec(), b"7-9");
        assert_eq!(StreamId::from_be_bytes(&id(3, 4).to_be_bytes()), id(3, 4));
    }

    #[test]
    fn entries_read_back_with_and_without_master_fields() {
        let mut s = Stream::new();
        add(&mut s, id(1, 0), &[b"a", b"1", b"b", b"2"]);
        add(&mut s, id(1, 1), &[b"a", b"x", b"b", b"y"]);
        add(&mut s, id(5, 0), &[b"other", b"v"]);
        let mut got = Vec::new();
        s.range(StreamId::MIN, StreamId::MAX, false, |e| {
            got.push((
                e.id,
                e.pairs()
                    .map(|(f, v)| (f.to_vec(), v.to_vec()))
                    .collect::<Vec<_>>(),
            ));
            true
        });
        assert_eq!(got.len(), 3);
        assert_eq!(
            got[1].1,
            vec![
                (b"a".to_vec(), b"x".to_vec()),
                (b"b".to_vec(), b"y".to_vec())
            ]
        );
        assert_eq!(got[2].1, vec![(b"other".to_vec(), b"v".to_vec())]);
        assert_eq!(ids(&s, id(1, 1), id(5, 0), true), vec![id(5, 0), id(1, 1)]);
        assert_eq!(s.edge_id(true), Some(id(5, 0)));
    }

    #[test]
    fn blocks_split_at_valkeys_node_limits() {
        let mut s = Stream::new();
        for i in 0..250u64 {
            add(&mut s, id(i + 1, 0), &[b"f", b"v"]);
        }
        // 100 entries a node.
        assert_eq!(s.block_count(), 3);
        let counts: Vec<u64> = s.blocks().map(|(_, b)| b.live()).collect();
        assert_eq!(counts, vec![100, 100, 50]);
        // Bytes: big values end nodes sooner.
        let mut s = Stream::new();
        let big = vec![b'x'; 1000];
        for i in 0..10u64 {
            add(&mut s, id(i + 1, 0), &[b"f", &big]);
        }
        let counts: Vec<u64> = s.blocks().map(|(_, b)| b.live()).collect();
        assert_eq!(counts, vec![4, 4, 2]);
    }

    #[test]
    fn listpack_size_matches_a_hand_count() {
        // Master: count 1, deleted 0, nfields 1, "f", 0 terminator; entry:
        // flags 2, 0, 0, "v", lp-count 4. Each small element 1 byte + 1
        // back-length: 10 elements * 2 = 20, plus 7 header/end bytes.
        let mut s = Stream::new();
        add(&mut s, id(1, 0), &[b"f", b"v"]);
        let (_, b) = s.blocks().next().unwrap();
        // "f" and "v" are strings: 1 + 1 + 1 backlen = 3 each, so 8 ints
        // (2 bytes) and 2 strings (3 bytes).
        assert_eq!(b.lp_bytes(), 7 + 8 * 2 + 2 * 3);
    }

    #[test]
    fn delete_flags_and_drops_empty_blocks() {
        let mut s = Stream::new();
        for i in 1..=3 {
            add(&mut s, id(i, 0), &[b"f", b"v"]);
        }
        assert!(s.delete(id(2, 0)));
        assert!(!s.delete(id(2, 0)));
        assert_eq!(s.len(), 2);
        assert_eq!(
            ids(&s, StreamId::MIN, StreamId::MAX, false),
            vec![id(1, 0), id(3, 0)]
        );
        assert!(s.delete(id(1, 0)));
        assert!(s.delete(id(3, 0)));
        assert_eq!(s.block_count(), 0);
        assert!(s.is_empty());
    }

    #[test]
    fn trim_exact_and_approximate() {
        let mut s = Stream::new();
        for i in 1..=250 {
            add(&mut s, id(i, 0), &[b"f", b"v"]);
        }
        // Approximate: only whole nodes; 250 -> 160 drops one node of 100.
        assert_eq!(s.trim(Trim::MaxLen(160), true, 10_000), 0);
        let mut t = s.clone();
        assert_eq!(t.trim(Trim::MaxLen(140), true, 10_000), 100);
        assert_eq!(t.len(), 150);
        assert_eq!(t.first_id, id(101, 0));
        // Exact: flags entries inside the first node.
        assert_eq!(s.trim(Trim::MaxLen(160), false, 0), 90);
        assert_eq!(s.len(), 160);
        assert_eq!(s.first_id, id(91, 0));
        // MINID.
        assert_eq!(s.trim(Trim::MinId(id(200, 0)), false, 0), 109);
        assert_eq!(s.first_id, id(200, 0));
        // LIMIT stops before a node bigger than what is left.
        let mut u = Stream::new();
        for i in 1..=250 {
            add(&mut u, id(i, 0), &[b"f", b"v"]);
        }
        assert_eq!(u.trim(Trim::MaxLen(0), true, 150), 100);
    }

    #[test]
    fn pel_assign_ack_and_consumer_removal() {
        let mut g = Group::new(StreamId::MIN, 0);
        let alice: Arc<[u8]> = Arc::from(&b"alice"[..]);
        let bob: Arc<[u8]> = Arc::from(&b"bob"[..]);
        g.consumers
            .insert(alice.clone(), Consumer::new(b"alice", 1));
        g.consumers.insert(bob.clone(), Consumer::new(b"bob", 1));
        g.assign(id(1, 0), &alice, 10);
        g.assign(id(2, 0), &alice, 10);
        let n = g.assign(id(1, 0), &bob, 20);
        assert_eq!(n.delivery_count, 1);
        assert_eq!(g.consumers[&alice].pel.len(), 1);
        assert_eq!(g.consumers[&bob].pel.len(), 1);
        assert!(g.ack(id(1, 0)));
        assert!(!g.ack(id(1, 0)));
        assert!(g.consumers[&bob].pel.is_empty());
        assert_eq!(g.delete_consumer(b"alice"), Some(1));
        assert!(g.pel.is_empty());
    }

    #[test]
    fn lag_and_distance() {
        let mut s = Stream::new();
        for i in 1..=5 {
            add(&mut s, id(i, 0), &[b"f", b"v"]);
        }
        s.create_group(b"g", StreamId::MIN, 0);
        assert_eq!(s.lag(s.group(b"g").unwrap()), Some(5));
        s.advance_group(b"g", id(1, 0));
        assert_eq!(s.group(b"g").unwrap().entries_read, 1);
        assert_eq!(s.lag(s.group(b"g").unwrap()), Some(4));
        // A tombstone ahead of the group makes the lag unknown.
        s.delete(id(3, 0));
        s.max_deleted_id = id(3, 0);
        assert_eq!(s.lag(s.group(b"g").unwrap()), None);
        assert_eq!(s.estimate_distance(id(5, 0)), 5);
    }

    #[test]
    fn integers_are_stored_as_integers_and_read_back_as_sent() {
        let mut s = Stream::new();
        let vals: [&[u8]; 6] = [
            b"123",
            b"-5",
            b"007",
            b"9223372036854775807",
            b"-9223372036854775808",
            b"",
        ];
        for (i, v) in vals.iter().enumerate() {
            add(&mut s, id(i as u64 + 1, 0), &[b"1", v, b"f", v]);
        }
        let mut got = Vec::new();
        s.range(StreamId::MIN, StreamId::MAX, false, |e| {
            for (f, v) in e.pairs() {
                got.push((f.to_vec(), v.to_vec(), matches!(v, Elem::Int(_))));
            }
            true
        });
        assert_eq!(got.len(), 12);
        for (i, v) in vals.iter().enumerate() {
            assert_eq!(got[i * 2].0, b"1");
            assert_eq!(got[i * 2].1, *v);
            assert_eq!(got[i * 2 + 1].0, b"f");
        }
        // Canonical and small enough: an integer; "007" and the extremes
        // (no room for the tag bit) stay bytes.
        let ints: Vec<bool> = got.iter().step_by(2).map(|g| g.2).collect();
        assert_eq!(ints, vec![true, true, false, false, false, false]);
        // Numeric field names compare as the master's: one block, all
        // SAMEFIELDS after the first.
        let (k, b) = s.blocks().next().unwrap();
        assert!(b.entries(k).all(|e| e.flags & FLAG_SAMEFIELDS != 0));
    }
}
