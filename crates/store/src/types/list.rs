//! The list value type.
//!
//! ```text
//!   List ─┬─ Pack               listpack: elements in one exact-size buffer
//!         │                     (strpack.rs), while within
//!         │                     `list-max-listpack-size`
//!         └─ Box<Quick>         quicklist: a VecDeque of nodes, each a
//!                               StrPack of elements with its count and
//!                               its listpack-byte estimate
//! ```
//!
//! Conversions follow Valkey 8 (`t_list.c`): a listpack whose bytes plus
//! the new elements' lengths would pass `list-max-listpack-size`
//! (negative: -1..-5 = 4..64 KiB of listpack bytes; positive: that many
//! entries, and 8 KiB) becomes a quicklist, the listpack its first node
//! whole; a quicklist down to one node within half the limit becomes a
//! listpack again. Listpack bytes are estimated as Valkey's listpack
//! spends them: a 7-byte header and trailer, and per entry its length,
//! one or more header bytes and a back-length byte or more.
//!
//! The quicklist is Valkey's (`quicklist.c`) in its layout: a sequence
//! of packed nodes, each holding elements up to the same
//! `list-max-listpack-size` (with a positive size, also at most 8 KiB,
//! Valkey's `SIZE_SAFETY_LIMIT`). Every edit takes the steps of Valkey's
//! quicklist, so that nodes end where Valkey's end (checked node for node
//! against Valkey 8.1 on random command sequences, e2e): a push or insert
//! judges whether an element fits a node by the node's bytes plus the
//! element's length plus 8; a push fills the end node or starts a new one;
//! LINSERT goes into the pivot's node, or at its edge into the neighbour
//! on that side, or splits the full node at the pivot and merges the
//! nodes around where they fit (exact sizes, `_quicklistMergeNodes`);
//! LSET replaces in place whatever the node's size then; a deletion only
//! drops a node it empties (Valkey's quicklist never merges then).
//! The nodes sit in a `VecDeque` rather than a linked list.
//!
//! `list-compress-depth` N keeps N nodes at each end as they are and
//! LZF-compresses the nodes between (Valkey's rule: a node of at least 48
//! bytes, kept compressed only when that saves more than 8). A list keeps
//! the depth it was made with. Reads of a compressed node decompress a copy
//! and leave the node as it is; an edit decompresses the node in place, and
//! the operation ends by settling the nodes it may have moved across a
//! depth boundary or edited ([`Quick::settle`]), so a push or pop touches
//! O(depth) nodes, not the whole list. A node LZF could not shrink is
//! remembered as such until it changes, so it is not tried again on every
//! pass.
//! LINDEX, LSET and LRANGE find their node by walking node counts from
//! the nearer end, O(n / node size), then walk within the node, as
//! Valkey does. Each node is kept at its exact size, so pushing at an end
//! edits it in place (a realloc, usually within the allocator's size
//! class; at the head plus a move of the node's bytes, as in Valkey).
//!
//! Memory: the 10,000 elements `v0`..`v9999` (bench/memory.sh's list)
//! take 6.1 bytes each by [`List::memory_usage`], in 9 nodes (the unit
//! test `quicklist_short_elements_are_packed`); bench/memory.sh measured
//! 34.2 for the boxed-element deque this replaced, and 7.0 for
//! redis-server 7 and Valkey 8.

use super::lp_size;
use super::strpack::StrPack;
use crate::EncodingLimits;
use crate::defrag::Mover;

/// Quicklist nodes one step of active defragmentation offers.
const RELOCATE_NODES_PER_STEP: usize = 16;
use std::borrow::Cow;
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

#[derive(Clone, Default)]
enum Repr {
    #[default]
    Empty,
    Pack(StrPack),
    Quick(Box<Quick>),
}

/// The large encoding: a sequence of packed nodes, none empty.
#[derive(Clone, Default)]
struct Quick {
    nodes: VecDeque<Node>,
    /// `list-compress-depth` when the list was made.
    depth: u16,
    /// Elements in all nodes.
    len: usize,
}

#[derive(Clone, Default)]
struct Node {
    pack: Packed,
    /// Entries in `pack`, cached: locating an index walks these.
    count: usize,
    /// Sum of [`lp_entry_bytes`] of the entries: what the node would take
    /// as a Valkey listpack, less its header, for the node limits.
    lp: usize,
}

/// A node's elements, as they are or compressed.
#[derive(Clone)]
enum Packed {
    /// `tried`: LZF did not shrink it enough since it last changed.
    Raw { pack: StrPack, tried: bool },
    /// The LZF form of the pack's [`StrPack::encoded`] bytes, `len` long.
    Lzf { data: Box<[u8]>, len: usize },
}

impl Default for Packed {
    fn default() -> Packed {
        Packed::Raw {
            pack: StrPack::default(),
            tried: false,
        }
    }
}

/// Valkey's `MIN_COMPRESS_BYTES`: smaller nodes are not compressed.
const MIN_COMPRESS_BYTES: usize = 48;
/// Valkey's `MIN_COMPRESS_IMPROVE`: a node stays compressed only when
/// that saves more than this many bytes.
const MIN_COMPRESS_IMPROVE: usize = 8;

/// One node's elements: borrowed from an uncompressed node, or copied out
/// of a compressed one (decompressed once for the whole node).
enum NodeElems<'a> {
    Raw(super::strpack::Iter<'a>),
    Copied(std::vec::IntoIter<Vec<u8>>),
}

impl<'a> Iterator for NodeElems<'a> {
    type Item = Cow<'a, [u8]>;

    fn next(&mut self) -> Option<Cow<'a, [u8]>> {
        match self {
            NodeElems::Raw(it) => it.next().map(|s| Cow::Borrowed(s.bytes)),
            NodeElems::Copied(it) => it.next().map(Cow::Owned),
        }
    }
}

/// A list value.
#[derive(Clone, Default)]
pub struct List {
    repr: Repr,
}

impl PartialEq for List {
    fn eq(&self, other: &List) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl std::fmt::Debug for List {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(
                self.iter()
                    .map(|e| String::from_utf8_lossy(&e).into_owned()),
            )
            .finish()
    }
}

/// Which end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Left,
    Right,
}

/// Bytes an element costs in a Valkey listpack (an integer in its compact
/// form, else encoding header, data, back-length), for the node limits
/// and conversion thresholds.
fn lp_entry_bytes(e: &[u8]) -> usize {
    lp_size::str_size(e)
}

/// [`lp_entry_bytes`] of a string element of `n` bytes (it grows with `n`).
fn lp_entry_bytes_of_len(n: usize) -> usize {
    lp_size::str_size_of_len(n)
}

const LP_HEADER: usize = 7;

/// Valkey's `SIZE_ESTIMATE_OVERHEAD`: what it adds to an element's
/// length to judge whether it fits a node.
const SIZE_ESTIMATE_OVERHEAD: usize = 8;

/// Valkey caps nodes at 8 KiB of listpack bytes when the limit is a
/// count (`SIZE_SAFETY_LIMIT`), so that a count of big elements cannot
/// make one huge node.
const NODE_SAFETY_BYTES: usize = 8192;

/// Listpack size limit: (bytes, entries).
fn limits_of(l: &EncodingLimits) -> (usize, usize) {
    match l.list_max_listpack_size {
        // 0 is taken as 1, as Valkey's quicklistNodeLimit.
        n if n >= 0 => (usize::MAX, n.max(1) as usize),
        n => {
            let kib = match n {
                -1 => 4,
                -2 => 8,
                -3 => 16,
                -4 => 32,
                _ => 64,
            };
            (kib * 1024, usize::MAX)
        }
    }
}

/// Valkey's `packed_threshold` (quicklist.c): an element at least this
/// large gets a node of its own, written as a PLAIN node to RDB files.
/// Process-wide, as Valkey's; only DEBUG QUICKLIST-PACKED-THRESHOLD
/// changes it (tests use it to make plain nodes of small elements).
static PACKED_THRESHOLD: AtomicUsize = AtomicUsize::new(DEFAULT_PACKED_THRESHOLD);
const DEFAULT_PACKED_THRESHOLD: usize = 1 << 30;

pub fn packed_threshold() -> usize {
    PACKED_THRESHOLD.load(Ordering::Relaxed)
}

/// Valkey's `quicklistSetPackedThreshold`: 0 restores the default; false
/// (nothing changed) past 4 GiB less 1 MiB.
pub fn set_packed_threshold(bytes: u64) -> bool {
    if bytes > (1 << 32) - (1 << 20) {
        return false;
    }
    let t = if bytes == 0 {
        DEFAULT_PACKED_THRESHOLD
    } else {
        bytes as usize
    };
    PACKED_THRESHOLD.store(t, Ordering::Relaxed);
    true
}

/// What one quicklist node may hold.
#[derive(Clone, Copy)]
struct NodeLimit {
    bytes: usize,
    entries: usize,
    /// [`lp_entry_bytes`] of an element of [`packed_threshold`] bytes: a
    /// node of one entry this large is plain, and joins no other.
    plain_from: usize,
}

impl NodeLimit {
    fn of(l: &EncodingLimits) -> NodeLimit {
        let (bytes, entries) = limits_of(l);
        let bytes = if entries == usize::MAX {
            bytes
        } else {
            NODE_SAFETY_BYTES
        };
        let plain_from = lp_entry_bytes_of_len(packed_threshold());
        NodeLimit {
            bytes,
            entries,
            plain_from,
        }
    }

    /// May a node hold `count` entries of `lp` listpack bytes? One entry
    /// always fits: an element past the limit gets a node of its own.
    fn allows(self, lp: usize, count: usize) -> bool {
        count <= 1 || (LP_HEADER + lp <= self.bytes && count <= self.entries)
    }

    /// Is a group of `(lp, count)` one plain element?
    fn plain(self, (lp, count): (usize, usize)) -> bool {
        count == 1 && lp >= self.plain_from
    }

    /// May the entries `a` and `b` (each `(lp, count)`) share a node?
    /// (Valkey's `_quicklistNodeAllowMerge`, exact sizes.)
    fn joins(self, a: (usize, usize), b: (usize, usize)) -> bool {
        !self.plain(a) && !self.plain(b) && self.allows(a.0 + b.0, a.1 + b.1)
    }

    /// Valkey's `quicklistNodeExceedsLimit`: is a node or listpack of `sz`
    /// bytes and `count` entries past the limit?
    fn exceeds(self, sz: usize, count: usize) -> bool {
        sz > self.bytes || count > self.entries
    }

    /// May a node of `(lp, count)` take one more element, `len` bytes
    /// long? Valkey's `_quicklistNodeAllowInsert`, which judges by an
    /// overestimate of the entry (its length and 8 bytes), so that nodes
    /// end where Valkey's end and a list's RDB bytes are Valkey's. An
    /// empty (new) node takes anything.
    fn admits(self, (lp, count): (usize, usize), len: usize) -> bool {
        count == 0
            || !self.plain((lp, count))
                && !self.plain((lp_entry_bytes_of_len(len), 1))
                && !self.exceeds(LP_HEADER + lp + len + SIZE_ESTIMATE_OVERHEAD, count + 1)
    }
}

impl Node {
    fn from_items(items: &[&[u8]]) -> Node {
        Node::from_pack(
            StrPack::from_items(items.iter().copied()),
            items.len(),
            items.iter().map(|e| lp_entry_bytes(e)).sum(),
        )
    }

    fn from_pack(pack: StrPack, count: usize, lp: usize) -> Node {
        Node {
            pack: Packed::Raw { pack, tried: false },
            count,
            lp,
        }
    }

    /// The elements for an edit: a compressed node is decompressed in
    /// place, and either kind counts as changed (worth compressing again).
    fn raw_mut(&mut self) -> &mut StrPack {
        if let Packed::Lzf { data, len } = &self.pack {
            let pack = decompress(data, *len);
            self.pack = Packed::Raw { pack, tried: false };
        }
        match &mut self.pack {
            Packed::Raw { pack, tried } => {
                *tried = false;
                pack
            }
            Packed::Lzf { .. } => unreachable!("decompressed above"),
        }
    }

    /// Insert `v` (of listpack bytes `add`) so that it becomes entry `at`
    /// (<= count).
    fn insert(&mut self, at: usize, v: &[u8], add: usize) {
        let pack = self.raw_mut();
        match pack.iter().nth(at) {
            Some(s) => pack.splice(s.start, s.start, 0, &[v]),
            None => pack.push(&[v]),
        }
        self.count += 1;
        self.lp += add;
    }

    /// The elements, taken out of the node.
    fn into_raw(self) -> StrPack {
        match self.pack {
            Packed::Raw { pack, .. } => pack,
            Packed::Lzf { data, len } => decompress(&data, len),
        }
    }

    /// `f` on the node's pack, decompressed into a copy if it is
    /// compressed (one decompression, no copy of each element).
    fn read<R>(&self, f: impl FnOnce(&StrPack) -> R) -> R {
        match &self.pack {
            Packed::Raw { pack, .. } => f(pack),
            Packed::Lzf { data, len } => f(&decompress(data, *len)),
        }
    }

    /// The elements for reading; the node stays as it is.
    fn elems(&self) -> NodeElems<'_> {
        match &self.pack {
            Packed::Raw { pack, .. } => NodeElems::Raw(pack.iter()),
            Packed::Lzf { data, len } => {
                let pack = decompress(data, *len);
                let copied: Vec<Vec<u8>> = pack.iter().map(|s| s.bytes.to_vec()).collect();
                NodeElems::Copied(copied.into_iter())
            }
        }
    }

    fn is_compressed(&self) -> bool {
        matches!(self.pack, Packed::Lzf { .. })
    }

    /// Compress the node unless it is small, was already found not to
    /// shrink enough, or is compressed (Valkey's `__quicklistCompressNode`).
    fn compress(&mut self) {
        let Packed::Raw { pack, tried } = &mut self.pack else {
            return;
        };
        let raw = pack.encoded();
        if *tried || raw.len() < MIN_COMPRESS_BYTES {
            return;
        }
        let mut data = Vec::new();
        if lzf::compress_within(raw, raw.len() - MIN_COMPRESS_IMPROVE - 1, &mut data) {
            let len = raw.len();
            self.pack = Packed::Lzf {
                data: data.into_boxed_slice(),
                len,
            };
        } else {
            *tried = true;
        }
    }

    /// Leave the node uncompressed (it is within the depth of an end).
    fn decompress(&mut self) {
        if self.is_compressed() {
            self.raw_mut();
        }
    }

    fn memory_usage(&self) -> usize {
        match &self.pack {
            Packed::Raw { pack, .. } => pack.memory_usage(),
            Packed::Lzf { data, .. } => crate::alloc_size(data.len()),
        }
    }
}

/// A node's pack back from its LZF form; only this module compresses
/// nodes, so the data is known good.
fn decompress(data: &[u8], len: usize) -> StrPack {
    let raw = lzf::decompress(data, len).expect("a node this module compressed");
    StrPack::from_encoded(raw.into_boxed_slice())
}

impl Quick {
    /// A quicklist of one node holding `pack` (none if it is empty).
    fn from_pack(pack: StrPack, depth: u16) -> Quick {
        let count = pack.len();
        let lp: usize = pack.iter().map(|s| lp_entry_bytes(s.bytes)).sum();
        let mut q = Quick {
            depth,
            len: count,
            ..Quick::default()
        };
        if count > 0 {
            q.nodes.push_back(Node::from_pack(pack, count, lp));
        }
        q
    }

    /// After an edit that left `before` nodes as `self.nodes.len()` and
    /// edited the nodes `touched`: the nodes within the depth of either
    /// end uncompressed, the ones between compressed. Only nodes that can
    /// have crossed a boundary are looked at: with nodes gone, those now
    /// within the depth of an end; with `g` nodes gained, the `g` just
    /// inside each boundary (as many as a push or split can have moved
    /// inwards, or the whole inside of a list that just grew past twice
    /// the depth); and the edited ones.
    fn settle(&mut self, before: usize, touched: Range<usize>) {
        let d = usize::from(self.depth);
        let n = self.nodes.len();
        if d == 0 {
            return;
        }
        if n < before {
            for k in (0..d.min(n)).chain(n.saturating_sub(d)..n) {
                self.nodes[k].decompress();
            }
        }
        if n <= 2 * d {
            return;
        }
        let inner = d..n - d;
        let gained = n.saturating_sub(before);
        let from_left = d..d + gained;
        let from_right = (n - d).saturating_sub(gained)..n - d;
        for r in [from_left, from_right, touched] {
            for k in r.start.max(inner.start)..r.end.min(inner.end) {
                self.nodes[k].compress();
            }
        }
    }

    fn end_index(&self, end: End) -> usize {
        match end {
            End::Left => 0,
            End::Right => self.nodes.len() - 1,
        }
    }

    /// Push `items` one by one at `end`: into the end node while it has
    /// room, then into new nodes, with one splice per node touched.
    fn extend<'a>(&mut self, end: End, items: impl IntoIterator<Item = &'a [u8]>, lim: NodeLimit) {
        let before = self.nodes.len();
        let mut batch: Vec<&[u8]> = Vec::new();
        let mut new_node = self.nodes.is_empty();
        let (mut lp, mut count) = if new_node {
            (0, 0)
        } else {
            let n = &self.nodes[self.end_index(end)];
            (n.lp, n.count)
        };
        for e in items {
            let add = lp_entry_bytes(e);
            if !lim.admits((lp, count), e.len()) {
                self.flush(end, &mut batch, new_node);
                new_node = true;
                (lp, count) = (0, 0);
            }
            batch.push(e);
            lp += add;
            count += 1;
        }
        self.flush(end, &mut batch, new_node);
        self.settle(before, 0..0);
    }

    /// Put `batch` (in push order) into the end node, or into a new one.
    fn flush(&mut self, end: End, batch: &mut Vec<&[u8]>, new_node: bool) {
        if batch.is_empty() {
            return;
        }
        if end == End::Left {
            // Pushed one by one at the left, the last pushed comes first.
            batch.reverse();
        }
        let add: usize = batch.iter().map(|e| lp_entry_bytes(e)).sum();
        self.len += batch.len();
        if new_node {
            let node = Node::from_items(batch);
            match end {
                End::Left => self.nodes.push_front(node),
                End::Right => self.nodes.push_back(node),
            }
        } else {
            let k = self.end_index(end);
            let node = &mut self.nodes[k];
            let pack = node.raw_mut();
            match end {
                End::Left => pack.splice(0, 0, 0, batch),
                End::Right => pack.push(batch),
            }
            node.count += batch.len();
            node.lp += add;
        }
        batch.clear();
    }

    /// Remove `n` (at most `len`) elements from `end`, appending them to
    /// `out` in pop order if given.
    fn take(&mut self, end: End, n: usize, mut out: Option<&mut Vec<Vec<u8>>>) {
        let before = self.nodes.len();
        let mut left = n.min(self.len);
        while left > 0 {
            let k = self.end_index(end);
            let node = &mut self.nodes[k];
            if node.count <= left {
                // The whole node goes.
                let node = match end {
                    End::Left => self.nodes.pop_front(),
                    End::Right => self.nodes.pop_back(),
                }
                .expect("a node holds the remaining elements");
                if let Some(out) = out.as_deref_mut() {
                    let es = node.elems().map(Cow::into_owned);
                    match end {
                        End::Left => out.extend(es),
                        End::Right => out.extend(es.collect::<Vec<_>>().into_iter().rev()),
                    }
                }
                left -= node.count;
                self.len -= node.count;
                continue;
            }
            // Part of the node: one splice.
            let count = node.count;
            let pack = node.raw_mut();
            let slots: Vec<_> = match end {
                End::Left => pack.iter().take(left).collect(),
                End::Right => pack.iter().skip(count - left).collect(),
            };
            let (start, stop) = (slots[0].start, slots[slots.len() - 1].end);
            let lp: usize = slots.iter().map(|s| lp_entry_bytes(s.bytes)).sum();
            if let Some(out) = out.as_deref_mut() {
                let es = slots.iter().map(|s| s.bytes.to_vec());
                match end {
                    End::Left => out.extend(es),
                    End::Right => out.extend(es.rev()),
                }
            }
            pack.splice(start, stop, left, &[]);
            node.count -= left;
            node.lp -= lp;
            self.len -= left;
            left = 0;
        }
        self.settle(before, 0..0);
    }

    /// Merge node `k` and node `k + 1` if they fit in one node.
    fn merge_at(&mut self, k: usize, lim: NodeLimit) -> bool {
        let (a, b) = (&self.nodes[k], &self.nodes[k + 1]);
        if !lim.joins((a.lp, a.count), (b.lp, b.count)) {
            return false;
        }
        let b = self.nodes.remove(k + 1).expect("k + 1 is a node");
        let (b_count, b_lp) = (b.count, b.lp);
        let a = &mut self.nodes[k];
        a.raw_mut().append(&b.into_raw());
        a.count += b_count;
        a.lp += b_lp;
        true
    }

    /// Split node `k` after its first `at` entries (0 < at < count).
    fn split_node(&mut self, k: usize, at: usize) {
        let node = &mut self.nodes[k];
        let pack = node.raw_mut().split_off(at);
        let lp: usize = pack.iter().map(|s| lp_entry_bytes(s.bytes)).sum();
        let right = Node::from_pack(pack, node.count - at, lp);
        node.count = at;
        node.lp -= lp;
        self.nodes.insert(k + 1, right);
    }

    /// The node holding element `i` (< len) and its offset there, walking
    /// node counts from the nearer end.
    fn locate(&self, i: usize) -> (usize, usize) {
        if i < self.len / 2 {
            let mut i = i;
            for (k, n) in self.nodes.iter().enumerate() {
                if i < n.count {
                    return (k, i);
                }
                i -= n.count;
            }
        } else {
            let mut first = self.len;
            for (k, n) in self.nodes.iter().enumerate().rev() {
                first -= n.count;
                if i >= first {
                    return (k, i - first);
                }
            }
        }
        unreachable!("index {i} past a list of {}", self.len)
    }

    fn get(&self, i: usize) -> Option<Cow<'_, [u8]>> {
        if i >= self.len {
            return None;
        }
        let (k, off) = self.locate(i);
        match &self.nodes[k].pack {
            Packed::Raw { pack, .. } => pack.iter().nth(off).map(|s| Cow::Borrowed(s.bytes)),
            Packed::Lzf { data, len } => {
                let pack = decompress(data, *len);
                pack.iter().nth(off).map(|s| Cow::Owned(s.bytes.to_vec()))
            }
        }
    }

    fn for_each_in_range(&self, start: usize, end: usize, mut f: impl FnMut(&[u8])) {
        if start >= self.len || start > end {
            return;
        }
        let (k, mut skip) = self.locate(start);
        let mut left = end.min(self.len - 1) + 1 - start;
        for node in self.nodes.range(k..) {
            node.read(|pack| {
                for s in pack.iter().skip(skip).take(left) {
                    f(s.bytes);
                    left -= 1;
                }
            });
            if left == 0 {
                return;
            }
            skip = 0;
        }
    }

    /// LINSERT: insert `v` before (or `after`) element `pivot` (< len).
    fn insert(&mut self, pivot: usize, after: bool, v: &[u8], lim: NodeLimit) {
        let index = pivot + usize::from(after);
        if index == 0 || index >= self.len {
            // At an end: what a push does there (Valkey's insert takes the
            // same steps).
            let end = if index == 0 { End::Left } else { End::Right };
            return self.extend(end, [v], lim);
        }
        let before = self.nodes.len();
        let (k, off) = self.locate(pivot);
        self.insert_at(k, off, after, v, lim);
        self.settle(before, k.saturating_sub(2)..k + 4);
    }

    /// Valkey's `_quicklistInsert` at entry `off` of node `k`: into the node
    /// if it has room; at its edge into the neighbour on that side if that
    /// one has room, else a node of its own; inside a full node, split at
    /// the pivot, the element joining the part on its side, and the nodes
    /// around merged where they fit. An element as large as a plain node's
    /// gets one of its own there.
    fn insert_at(&mut self, k: usize, off: usize, after: bool, v: &[u8], lim: NodeLimit) {
        let add = lp_entry_bytes(v);
        self.len += 1;
        let (count, lp) = (self.nodes[k].count, self.nodes[k].lp);
        let admits = |n: Option<&Node>| n.is_some_and(|n| lim.admits((n.lp, n.count), v.len()));
        let full = !lim.admits((lp, count), v.len());
        let at_tail = after && off + 1 == count;
        let at_head = !after && off == 0;
        let avail_next = at_tail && admits(self.nodes.get(k + 1));
        let avail_prev = at_head && k > 0 && admits(self.nodes.get(k - 1));
        if lim.plain((add, 1)) {
            if lim.plain((lp, count)) || at_tail || at_head {
                self.nodes
                    .insert(k + usize::from(after), Node::from_items(&[v]));
            } else {
                self.split_node(k, off + usize::from(after));
                self.nodes.insert(k + 1, Node::from_items(&[v]));
            }
            return;
        }
        if !full {
            self.nodes[k].insert(off + usize::from(after), v, add);
        } else if at_tail && avail_next {
            self.nodes[k + 1].insert(0, v, add);
        } else if at_head && avail_prev {
            let prev = &mut self.nodes[k - 1];
            prev.insert(prev.count, v, add);
        } else if at_tail || at_head {
            self.nodes
                .insert(k + usize::from(after), Node::from_items(&[v]));
        } else if after {
            // The pivot's node keeps what is up to it; the rest starts
            // with the element.
            self.split_node(k, off + 1);
            self.nodes[k + 1].insert(0, v, add);
            self.merge_around(k, lim);
        } else {
            // What is before the pivot ends with the element; the pivot's
            // node keeps the rest.
            self.split_node(k, off);
            let left = &mut self.nodes[k];
            left.insert(left.count, v, add);
            self.merge_around(k + 1, lim);
        }
    }

    /// Valkey's `_quicklistMergeNodes` around node `center`: the two before
    /// it, the two after it, then it with the one before and the result
    /// with the one after, each pair where it fits in one node.
    fn merge_around(&mut self, center: usize, lim: NodeLimit) {
        let mut c = center;
        if c >= 2 && self.merge_at(c - 2, lim) {
            c -= 1;
        }
        if c + 2 < self.nodes.len() {
            self.merge_at(c + 1, lim);
        }
        let target = if c >= 1 && self.merge_at(c - 1, lim) {
            c - 1
        } else {
            c
        };
        if target + 1 < self.nodes.len() {
            self.merge_at(target, lim);
        }
    }

    /// Replace element `i` (< len) by `v`.
    fn set(&mut self, i: usize, v: &[u8], lim: NodeLimit) {
        let before = self.nodes.len();
        let (k, off) = self.locate(i);
        self.set_at(k, off, v, lim);
        self.settle(before, k.saturating_sub(2)..k + 4);
    }

    /// Valkey's `quicklistReplaceEntry` of entry `off` of node `k`: in
    /// place, whatever the node's size then, unless the element is as
    /// large as a plain node's (it gets one of its own, the node split
    /// around it) or the node is plain and the element not (the element
    /// goes in after it, as LINSERT AFTER would put it, and the plain node
    /// goes).
    fn set_at(&mut self, k: usize, off: usize, v: &[u8], lim: NodeLimit) {
        let new = lp_entry_bytes(v);
        let node = &self.nodes[k];
        let (large, plain) = (lim.plain((new, 1)), lim.plain((node.lp, node.count)));
        if large == plain {
            let node = &mut self.nodes[k];
            let pack = node.raw_mut();
            let s = pack.iter().nth(off).expect("off < count");
            let old = lp_entry_bytes(s.bytes);
            let (start, end) = (s.start, s.end);
            pack.splice(start, end, 1, &[v]);
            node.lp = node.lp - old + new;
            return;
        }
        if plain {
            self.insert_at(k, 0, true, v, lim);
            self.nodes.remove(k).expect("the plain node");
            self.len -= 1;
            return;
        }
        // A large element inside a packed node: [before][element][after].
        if off + 1 < self.nodes[k].count {
            self.split_node(k, off + 1);
        }
        self.nodes.insert(k + 1, Node::from_items(&[v]));
        self.len += 1;
        self.take_at(k, off);
        if self.nodes[k].count == 0 {
            self.nodes.remove(k);
        } else {
            self.merge_around(k + 1, lim);
        }
    }

    /// Remove entry `off` of node `k` (the node may be left empty).
    fn take_at(&mut self, k: usize, off: usize) {
        let node = &mut self.nodes[k];
        let pack = node.raw_mut();
        let s = pack.iter().nth(off).expect("off < count");
        let lp = lp_entry_bytes(s.bytes);
        let (start, end) = (s.start, s.end);
        pack.splice(start, end, 1, &[]);
        node.count -= 1;
        node.lp -= lp;
        self.len -= 1;
    }

    /// LREM: remove up to `limit` elements equal to `elem`, scanning from
    /// the head (or from the tail if `from_tail`); the count removed.
    fn remove(&mut self, elem: &[u8], limit: usize, from_tail: bool) -> usize {
        let mut removed = 0;
        let n = self.nodes.len();
        for j in 0..n {
            if removed >= limit {
                break;
            }
            let k = if from_tail { n - 1 - j } else { j };
            let node = &mut self.nodes[k];
            if !node.read(|p| p.iter().any(|s| s.bytes == elem)) {
                continue;
            }
            let pack = node.raw_mut();
            let slots: Vec<_> = pack.iter().collect();
            let mut drop = vec![false; slots.len()];
            let order: Box<dyn Iterator<Item = usize>> = if from_tail {
                Box::new((0..slots.len()).rev())
            } else {
                Box::new(0..slots.len())
            };
            for x in order {
                if removed < limit && slots[x].bytes == elem {
                    drop[x] = true;
                    removed += 1;
                }
            }
            let kept: Vec<&[u8]> = slots
                .iter()
                .zip(&drop)
                .filter(|(_, d)| !**d)
                .map(|(s, _)| s.bytes)
                .collect();
            let gone = slots.len() - kept.len();
            let gone_lp = gone * lp_entry_bytes(elem);
            let new = StrPack::from_items(kept);
            *pack = new;
            node.count -= gone;
            node.lp -= gone_lp;
            self.len -= gone;
        }
        if removed > 0 {
            self.nodes.retain(|n| n.count > 0);
            self.settle(n, 0..self.nodes.len());
        }
        removed
    }
}

/// Iterates a quicklist from both ends: forward through each node's
/// entries as they are packed; backward by unpacking one node at a time
/// (an entry's length is only known from its front).
struct QuickIter<'a> {
    nodes: std::collections::vec_deque::Iter<'a, Node>,
    front: Option<NodeElems<'a>>,
    /// The node being taken from the back, in order; the front takes from
    /// `back[back_start..]` once it has no node of its own left.
    back: Vec<Cow<'a, [u8]>>,
    back_start: usize,
    /// Elements not yet yielded from either end.
    left: usize,
}

impl<'a> Iterator for QuickIter<'a> {
    type Item = Cow<'a, [u8]>;

    fn next(&mut self) -> Option<Cow<'a, [u8]>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        loop {
            if let Some(e) = self.front.as_mut().and_then(Iterator::next) {
                return Some(e);
            }
            match self.nodes.next() {
                Some(n) => self.front = Some(n.elems()),
                None => {
                    let e = std::mem::take(&mut self.back[self.back_start]);
                    self.back_start += 1;
                    return Some(e);
                }
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl DoubleEndedIterator for QuickIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        loop {
            if self.back.len() > self.back_start {
                return self.back.pop();
            }
            self.back.clear();
            self.back_start = 0;
            match self.nodes.next_back() {
                Some(n) => self.back.extend(n.elems()),
                // Only the front's node is left: take the rest of it.
                None => {
                    let rest = self.front.as_mut().into_iter().flatten();
                    self.back.extend(rest);
                    if self.back.is_empty() {
                        return None;
                    }
                }
            }
        }
    }
}

impl List {
    /// Offer the packed buffer of a small list to active defragmentation
    /// (a quicklist's nodes go by [`List::relocate_step`]).
    pub(crate) fn relocate(&mut self, m: &mut Mover<'_>) {
        if let Repr::Pack(p) = &mut self.repr {
            p.relocate(m);
        }
    }

    /// A quicklist's insides, one step of active defragmentation from
    /// `cursor` (0 starts; 0 when done): its struct, then the packed or
    /// compressed buffers of [`RELOCATE_NODES_PER_STEP`] nodes a step.
    pub(crate) fn relocate_step(&mut self, cursor: u64, m: &mut Mover<'_>) -> u64 {
        let Repr::Quick(q) = &mut self.repr else {
            return 0;
        };
        m.boxed_then(q, cursor, |q, m| {
            m.chunk(
                q.nodes.iter_mut(),
                cursor,
                RELOCATE_NODES_PER_STEP,
                |node, m| match &mut node.pack {
                    Packed::Raw { pack, .. } => pack.relocate(m),
                    Packed::Lzf { data, .. } => m.bytes(data),
                },
            )
        })
    }

    /// A quicklist's node count ([`List::relocate_step`] has work);
    /// `None` for a packed list.
    pub(crate) fn quicklist_nodes(&self) -> Option<usize> {
        match &self.repr {
            Repr::Quick(q) => Some(q.nodes.len()),
            _ => None,
        }
    }

    pub fn new() -> List {
        List::default()
    }

    pub fn len(&self) -> usize {
        match &self.repr {
            Repr::Empty => 0,
            Repr::Pack(p) => p.len(),
            Repr::Quick(q) => q.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the allocator holds for this list's heap data, each
    /// allocation rounded up to jemalloc's size class (see
    /// [`crate::alloc_size`]): the pack's buffer, or the boxed quicklist
    /// with its ring buffer of nodes (spare capacity included) and each
    /// node's buffer. The `Value` holding the list is not counted.
    pub fn memory_usage(&self) -> usize {
        use crate::alloc_size;
        match &self.repr {
            Repr::Empty => 0,
            Repr::Pack(p) => p.memory_usage(),
            Repr::Quick(q) => {
                alloc_size(std::mem::size_of::<Quick>())
                    + alloc_size(q.nodes.capacity() * std::mem::size_of::<Node>())
                    + q.nodes.iter().map(Node::memory_usage).sum::<usize>()
            }
        }
    }

    /// Packed buffers dropping the list frees: 1 for a listpack, the node
    /// count for a quicklist (Valkey's lazyfree effort for a list).
    pub fn nodes(&self) -> usize {
        match &self.repr {
            Repr::Empty => 0,
            Repr::Pack(_) => 1,
            Repr::Quick(q) => q.nodes.len(),
        }
    }

    /// Each packed buffer's elements, in order: the listpack as one node,
    /// or the quicklist's nodes (RDB writes them 1:1 as Valkey's nodes).
    pub fn node_iter(&self) -> impl Iterator<Item = impl Iterator<Item = Cow<'_, [u8]>>> {
        self.nodes_held().map(|(_, elems)| elems)
    }

    /// [`List::node_iter`], each node with whether it is held compressed
    /// (`list-compress-depth`).
    pub fn nodes_held(&self) -> impl Iterator<Item = (bool, impl Iterator<Item = Cow<'_, [u8]>>)> {
        let (single, quick) = match &self.repr {
            Repr::Empty => (None, None),
            Repr::Pack(p) => (Some((false, NodeElems::Raw(p.iter()))), None),
            Repr::Quick(q) => (
                None,
                Some(q.nodes.iter().map(|n| (n.is_compressed(), n.elems()))),
            ),
        };
        single.into_iter().chain(quick.into_iter().flatten())
    }

    /// The `list-compress-depth` a quicklist was made with (None for a
    /// listpack).
    pub fn compress_depth(&self) -> Option<u16> {
        match &self.repr {
            Repr::Quick(q) => Some(q.depth),
            _ => None,
        }
    }

    /// Quicklist nodes held compressed.
    pub fn compressed_nodes(&self) -> usize {
        match &self.repr {
            Repr::Quick(q) => q.nodes.iter().filter(|n| n.is_compressed()).count(),
            _ => 0,
        }
    }

    /// OBJECT ENCODING, with Valkey's names.
    pub fn encoding(&self) -> &'static str {
        match &self.repr {
            Repr::Quick(_) => "quicklist",
            _ => "listpack",
        }
    }

    /// The elements in order; those of a compressed node are copies.
    pub fn iter(&self) -> Box<dyn DoubleEndedIterator<Item = Cow<'_, [u8]>> + '_> {
        match &self.repr {
            Repr::Empty => Box::new(std::iter::empty()),
            Repr::Pack(p) => {
                let v: Vec<Cow<[u8]>> = p.iter().map(|s| Cow::Borrowed(s.bytes)).collect();
                Box::new(v.into_iter())
            }
            Repr::Quick(q) => Box::new(QuickIter {
                nodes: q.nodes.iter(),
                front: None,
                back: Vec::new(),
                back_start: 0,
                left: q.len,
            }),
        }
    }

    fn pack_bytes(p: &StrPack) -> usize {
        LP_HEADER + p.iter().map(|s| lp_entry_bytes(s.bytes)).sum::<usize>()
    }

    /// Convert to a quicklist if adding `adding` would pass the limits,
    /// judged as Valkey's `listTypeTryConvertListpack` judges it: the
    /// listpack's bytes plus the new elements' lengths. The listpack
    /// becomes the first node whole, as in Valkey.
    fn grow_check(&mut self, adding: &[&[u8]], limits: &EncodingLimits) {
        if let Repr::Empty = self.repr {
            self.repr = Repr::Pack(StrPack::default());
        }
        let Repr::Pack(p) = &mut self.repr else {
            return;
        };
        let bytes = Self::pack_bytes(p) + adding.iter().map(|e| e.len()).sum::<usize>();
        if NodeLimit::of(limits).exceeds(bytes, p.len() + adding.len()) {
            let q = Quick::from_pack(std::mem::take(p), limits.list_compress_depth);
            self.repr = Repr::Quick(Box::new(q));
        }
    }

    /// After a removal: back to a listpack at half the limits; empty
    /// lists drop their buffers.
    fn shrink_check(&mut self, limits: &EncodingLimits) {
        if self.is_empty() {
            self.repr = Repr::Empty;
            return;
        }
        let (max_bytes, max_entries) = limits_of(limits);
        // Valkey's `listTypeTryConvertQuicklist`: only a single packed node
        // goes back, and whole.
        if let Repr::Quick(q) = &mut self.repr
            && q.nodes.len() == 1
            && let Some(node) = q.nodes.front()
            && !NodeLimit::of(limits).plain((node.lp, node.count))
            && LP_HEADER + node.lp <= max_bytes / 2
            && (max_entries == usize::MAX || node.count <= max_entries / 2)
        {
            let node = q.nodes.pop_front().expect("one node");
            self.repr = Repr::Pack(node.into_raw());
        }
    }

    /// Push `items` one by one at `end` (LPUSH a b c leaves c first).
    pub fn push(&mut self, end: End, items: &[&[u8]], limits: &EncodingLimits) {
        self.grow_check(items, limits);
        match &mut self.repr {
            Repr::Pack(p) => match end {
                End::Right => p.push(items),
                End::Left => {
                    let rev: Vec<&[u8]> = items.iter().rev().copied().collect();
                    p.splice(0, 0, 0, &rev);
                }
            },
            Repr::Quick(q) => q.extend(end, items.iter().copied(), NodeLimit::of(limits)),
            Repr::Empty => unreachable!("grow_check set a representation"),
        }
    }

    /// Pop up to `n` from `end`, in pop order.
    pub fn pop(&mut self, end: End, n: usize, limits: &EncodingLimits) -> Vec<Vec<u8>> {
        let n = n.min(self.len());
        let mut out = Vec::with_capacity(n);
        match &mut self.repr {
            Repr::Empty => {}
            Repr::Pack(p) => {
                let slots: Vec<_> = match end {
                    End::Left => p.iter().take(n).collect(),
                    End::Right => p.iter().skip(p.len() - n).collect(),
                };
                if let (Some(first), Some(last)) = (slots.first(), slots.last()) {
                    let (start, stop) = (first.start, last.end);
                    let es = slots.iter().map(|s| s.bytes.to_vec());
                    match end {
                        End::Left => out.extend(es),
                        End::Right => out.extend(es.rev()),
                    }
                    p.splice(start, stop, n, &[]);
                }
            }
            Repr::Quick(q) => q.take(end, n, Some(&mut out)),
        }
        self.shrink_check(limits);
        out
    }

    /// Element at a non-negative index.
    pub fn get(&self, i: usize) -> Option<Cow<'_, [u8]>> {
        match &self.repr {
            Repr::Empty => None,
            Repr::Pack(p) => p.iter().nth(i).map(|s| Cow::Borrowed(s.bytes)),
            Repr::Quick(q) => q.get(i),
        }
    }

    /// Call `f` on elements `start..=end` (already clamped, non-negative)
    /// in order.
    pub fn for_each_in_range(&self, start: usize, end: usize, mut f: impl FnMut(&[u8])) {
        match &self.repr {
            Repr::Empty => {}
            Repr::Pack(p) => p
                .iter()
                .skip(start)
                .take(end + 1 - start)
                .for_each(|s| f(s.bytes)),
            Repr::Quick(q) => q.for_each_in_range(start, end, f),
        }
    }

    /// Replace the whole list.
    pub fn replace_all(&mut self, items: Vec<Vec<u8>>, limits: &EncodingLimits) {
        self.repr = Repr::Empty;
        let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
        if refs.is_empty() {
            return;
        }
        // Re-encode for the new contents, keeping a quicklist a quicklist
        // unless it shrank enough (Valkey converts in place, with the same
        // rules).
        self.push(End::Right, &refs, limits);
        self.shrink_check(limits);
    }

    /// Set element `i` (in range).
    pub fn set(&mut self, i: usize, v: &[u8], limits: &EncodingLimits) {
        // As Valkey's LSET: the listpack's limits are checked as if `v`
        // were added (so a full listpack converts even when `v` is no
        // larger), then whether the list shrank back within half of them.
        self.grow_check(&[v], limits);
        match &mut self.repr {
            Repr::Quick(q) => q.set(i, v, NodeLimit::of(limits)),
            Repr::Pack(p) => {
                let s = p.iter().nth(i).expect("in range");
                let (start, end) = (s.start, s.end);
                p.splice(start, end, 1, &[v]);
            }
            Repr::Empty => {}
        }
        self.shrink_check(limits);
    }

    /// LINSERT: insert `v` before (or `after`) element `pivot` (< len),
    /// converting to a quicklist first if it would not fit the listpack.
    pub fn insert(&mut self, pivot: usize, after: bool, v: &[u8], limits: &EncodingLimits) {
        self.grow_check(&[v], limits);
        match &mut self.repr {
            Repr::Pack(p) => match p.iter().nth(pivot + usize::from(after)) {
                Some(s) => p.splice(s.start, s.start, 0, &[v]),
                None => p.push(&[v]),
            },
            Repr::Quick(q) => q.insert(pivot, after, v, NodeLimit::of(limits)),
            Repr::Empty => unreachable!("grow_check set a representation"),
        }
    }

    /// LREM: remove elements equal to `elem`, `count` of them from the
    /// head (positive), from the tail (negative) or all (0); the number
    /// removed.
    pub fn remove(&mut self, elem: &[u8], count: i64, limits: &EncodingLimits) -> usize {
        let limit = if count == 0 {
            usize::MAX
        } else {
            usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX)
        };
        let from_tail = count < 0;
        let removed = match &mut self.repr {
            Repr::Empty => 0,
            Repr::Pack(p) => {
                let slots: Vec<_> = p.iter().collect();
                let mut drop = vec![false; slots.len()];
                let mut removed = 0;
                for k in 0..slots.len() {
                    let x = if from_tail { slots.len() - 1 - k } else { k };
                    if removed < limit && slots[x].bytes == elem {
                        drop[x] = true;
                        removed += 1;
                    }
                }
                if removed > 0 {
                    let kept = slots.iter().zip(&drop).filter(|(_, d)| !**d);
                    let pack = StrPack::from_items(kept.map(|(s, _)| s.bytes));
                    *p = pack;
                }
                removed
            }
            Repr::Quick(q) => q.remove(elem, limit, from_tail),
        };
        if removed > 0 {
            self.shrink_check(limits);
        }
        removed
    }

    /// LTRIM: keep elements `start..=stop` only (clamped to the list; an
    /// empty range empties it).
    pub fn trim(&mut self, start: usize, stop: usize, limits: &EncodingLimits) {
        let len = self.len();
        if start > stop || start >= len {
            self.repr = Repr::Empty;
            return;
        }
        let (head, tail) = (start, len - 1 - stop.min(len - 1));
        if head + tail == 0 {
            return;
        }
        match &mut self.repr {
            Repr::Empty => {}
            Repr::Pack(p) => {
                let keep: Vec<&[u8]> = p
                    .iter()
                    .skip(head)
                    .take(len - head - tail)
                    .map(|s| s.bytes)
                    .collect();
                let pack = StrPack::from_items(keep);
                *p = pack;
            }
            Repr::Quick(q) => {
                q.take(End::Left, head, None);
                q.take(End::Right, tail, None);
            }
        }
        self.shrink_check(limits);
    }

    /// LPOS: indices of elements equal to `elem`, skipping the first
    /// `|rank| - 1` matches, scanning from the head (rank > 0) or the tail
    /// (rank < 0), at most `maxlen` elements (0: all), up to `want`
    /// matches.
    pub fn positions(&self, elem: &[u8], rank: i64, want: usize, maxlen: usize) -> Vec<usize> {
        let len = self.len();
        let scan = if maxlen == 0 { len } else { maxlen.min(len) };
        let mut skip = rank.unsigned_abs().saturating_sub(1);
        let indexed: Box<dyn Iterator<Item = (usize, Cow<[u8]>)>> = if rank >= 0 {
            Box::new(self.iter().enumerate())
        } else {
            Box::new(self.iter().rev().enumerate().map(|(k, e)| (len - 1 - k, e)))
        };
        let mut found = Vec::new();
        for (i, e) in indexed.take(scan) {
            if *e != *elem {
                continue;
            }
            if skip > 0 {
                skip -= 1;
                continue;
            }
            found.push(i);
            if found.len() >= want {
                break;
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(l: &List) -> Vec<String> {
        l.iter()
            .map(|e| String::from_utf8(e.to_vec()).unwrap())
            .collect()
    }

    fn range(l: &List, start: usize, end: usize) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        l.for_each_in_range(start, end, |e| out.push(e.to_vec()));
        out
    }

    fn limit(n: i64) -> EncodingLimits {
        EncodingLimits {
            list_max_listpack_size: n,
            ..EncodingLimits::default()
        }
    }

    /// The representation's invariants: nodes non-empty and within the
    /// node limit (or alone), cached counts and byte sums right, a
    /// listpack within the listpack limit; the nodes within the compress
    /// depth of an end uncompressed, and those between compressed unless
    /// LZF cannot shrink them enough.
    fn check(l: &List, lim: &EncodingLimits) {
        check_with(l, lim, true)
    }

    /// [`check`], the node limits only if `limits` (an LSET may grow a
    /// node past them, as Valkey's does).
    fn check_with(l: &List, lim: &EncodingLimits, limits: bool) {
        let (max_bytes, max_entries) = limits_of(lim);
        match &l.repr {
            Repr::Empty => {}
            Repr::Pack(p) => {
                assert!(p.len() > 0, "an empty list is Empty");
                assert!(List::pack_bytes(p) <= max_bytes && p.len() <= max_entries);
            }
            Repr::Quick(q) => {
                let nl = NodeLimit::of(lim);
                let mut len = 0;
                let (d, nodes) = (usize::from(q.depth), q.nodes.len());
                for (k, n) in q.nodes.iter().enumerate() {
                    assert!(n.count > 0, "no empty nodes");
                    assert_eq!(n.count, n.elems().count());
                    let node_lp: usize = n.elems().map(|e| lp_entry_bytes(&e)).sum();
                    assert_eq!(n.lp, node_lp);
                    let inner = d > 0 && k >= d && k + d < nodes;
                    if !inner {
                        assert!(!n.is_compressed(), "node {k} of {nodes} compressed");
                    } else if !n.is_compressed() {
                        let mut probe = Node::from_pack(n.clone().into_raw(), n.count, n.lp);
                        probe.compress();
                        assert!(
                            !probe.is_compressed(),
                            "node {k} of {nodes} left uncompressed"
                        );
                    }
                    // A listpack converted whole may be over the limit by
                    // its entries' headers (Valkey judges it by lengths).
                    let body: usize = n.elems().map(|e| e.len()).sum();
                    assert!(
                        !limits || nl.allows(body, n.count),
                        "node {k} over its limit: {body} bytes, {} entries, {lim:?}",
                        n.count
                    );
                    len += n.count;
                }
                assert_eq!(q.len, len);
            }
        }
    }

    #[test]
    fn push_pop_both_ends_both_encodings() {
        for limit in [-2, 3] {
            let lim = EncodingLimits {
                list_max_listpack_size: limit,
                ..EncodingLimits::default()
            };
            let mut l = List::new();
            l.push(End::Left, &[b"a", b"b"], &lim);
            l.push(End::Right, &[b"c", b"d"], &lim);
            assert_eq!(items(&l), ["b", "a", "c", "d"]);
            assert_eq!(l.get(2).as_deref(), Some(&b"c"[..]));
            assert_eq!(range(&l, 1, 2), vec![&b"a"[..], &b"c"[..]]);
            assert_eq!(l.pop(End::Right, 1, &lim), vec![b"d".to_vec()]);
            assert_eq!(
                l.pop(End::Left, 5, &lim),
                vec![b"b".to_vec(), b"a".to_vec(), b"c".to_vec()]
            );
            assert!(l.is_empty());
        }
    }

    #[test]
    fn memory_usage_grows_and_rounds_to_size_classes() {
        let lim = limit(8);
        let mut l = List::new();
        assert_eq!(l.memory_usage(), 0);
        // Count byte + (length byte + 1 byte) = 3 bytes: the 8-byte class.
        l.push(End::Right, &[b"a"], &lim);
        assert_eq!(l.memory_usage(), 8);
        let small = l.memory_usage();
        let mut last = small;
        for i in 0..100 {
            l.push(End::Right, &[format!("element{i}").as_bytes()], &lim);
            let now = l.memory_usage();
            assert!(now >= last, "{now} < {last} after {i}");
            last = now;
        }
        assert_eq!(l.encoding(), "quicklist");
        // 13 nodes of 8 entries (the last of 5); each node's buffer in its
        // size class, the nodes' ring buffer and the box of the quicklist.
        let Repr::Quick(q) = &l.repr else {
            unreachable!()
        };
        assert_eq!(q.nodes.len(), 13);
        let nodes: usize = q
            .nodes
            .iter()
            .map(|n| crate::alloc_size(n.elems().map(|e| 1 + e.len()).sum::<usize>() + 1))
            .sum();
        assert_eq!(
            last,
            nodes
                + crate::alloc_size(std::mem::size_of::<Quick>())
                + crate::alloc_size(q.nodes.capacity() * std::mem::size_of::<Node>())
        );
        l.pop(End::Left, 101, &lim);
        assert_eq!(l.memory_usage(), 0);
    }

    #[test]
    fn quicklist_short_elements_are_packed() {
        // bench/memory.sh's list: RPUSH l v0 ... v9999.
        let lim = EncodingLimits::default();
        let mut l = List::new();
        let v: Vec<Vec<u8>> = (0..10_000).map(|i| format!("v{i}").into_bytes()).collect();
        for e in &v {
            l.push(End::Right, &[e], &lim);
        }
        assert_eq!(l.encoding(), "quicklist");
        check(&l, &lim);
        let per = l.memory_usage() as f64 / 10_000.0;
        assert!(per < 8.0, "{per} bytes per element");
        // One push of all of them packs the same.
        let mut m = List::new();
        let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
        m.push(End::Right, &refs, &lim);
        assert_eq!(m.memory_usage(), l.memory_usage());
        assert!(m == l);
        // Pushed at the head, too.
        let mut h = List::new();
        for e in v.iter().rev() {
            h.push(End::Left, &[e], &lim);
        }
        assert!(h == l);
        let per = h.memory_usage() as f64 / 10_000.0;
        assert!(per < 8.0, "{per} bytes per element");
        // 8 KiB nodes: a handful of them, freed as a handful.
        assert!(l.nodes() < 16, "{} nodes", l.nodes());
    }

    #[test]
    fn converts_on_size_and_back_at_half() {
        let lim = limit(4);
        let mut l = List::new();
        l.push(End::Right, &[b"1", b"2", b"3", b"4"], &lim);
        assert_eq!(l.encoding(), "listpack");
        l.push(End::Right, &[b"5"], &lim);
        assert_eq!(l.encoding(), "quicklist");
        // Back only from a single node within half the limit (Valkey 8.1:
        // two nodes of one element each stay a quicklist).
        l.pop(End::Left, 2, &lim);
        assert_eq!(l.encoding(), "quicklist");
        l.pop(End::Left, 1, &lim);
        assert_eq!(l.encoding(), "quicklist");
        assert_eq!(items(&l), ["4", "5"]);
        l.pop(End::Left, 1, &lim);
        assert_eq!(l.encoding(), "listpack");
        assert_eq!(items(&l), ["5"]);
        // Bytes: 8 KiB by default.
        let lim = EncodingLimits::default();
        let big = vec![b'x'; 5000];
        let mut l = List::new();
        l.push(End::Right, &[&big], &lim);
        assert_eq!(l.encoding(), "listpack");
        l.push(End::Right, &[&big], &lim);
        assert_eq!(l.encoding(), "quicklist");
        l.set(0, b"small", &lim);
        l.pop(End::Right, 1, &lim);
        assert_eq!(l.encoding(), "listpack");
        // LSET of a smaller element converts back too (Valkey's LSET).
        let mut l = List::new();
        l.push(End::Right, &[&big, &big], &lim);
        l.pop(End::Right, 1, &lim);
        assert_eq!(l.encoding(), "quicklist");
        l.set(0, b"c", &lim);
        assert_eq!(l.encoding(), "listpack");
        assert_eq!(items(&l), ["c"]);
    }

    #[test]
    fn insert_remove_trim_keep_the_conversion_rules() {
        let lim = limit(4);
        let mut l = List::new();
        l.push(End::Right, &[b"a", b"b", b"c", b"d"], &lim);
        l.insert(2, false, b"x", &lim);
        assert_eq!(l.encoding(), "quicklist");
        assert_eq!(items(&l), ["a", "b", "x", "c", "d"]);
        // Down to 3 (over half of 4): still a quicklist; at 2, a listpack.
        assert_eq!(l.remove(b"x", 0, &lim), 1);
        assert_eq!(l.remove(b"nope", 0, &lim), 0);
        l.trim(1, 3, &lim);
        assert_eq!(l.encoding(), "quicklist");
        assert_eq!(items(&l), ["b", "c", "d"]);
        // Still two nodes (Valkey 8.1 too): no conversion.
        l.trim(0, 1, &lim);
        assert_eq!(l.encoding(), "quicklist");
        assert_eq!(items(&l), ["b", "c"]);
        l.trim(5, 9, &lim);
        assert!(l.is_empty());
        assert_eq!(l.memory_usage(), 0);
    }

    #[test]
    fn splits_and_merges() {
        let lim = limit(3);
        let mut l = List::new();
        let v: Vec<Vec<u8>> = (0..9).map(|i| vec![b'a' + i]).collect();
        let refs: Vec<&[u8]> = v.iter().map(Vec::as_slice).collect();
        l.push(End::Right, &refs, &lim);
        let counts = |l: &List| match &l.repr {
            Repr::Quick(q) => q.nodes.iter().map(|n| n.count).collect::<Vec<_>>(),
            _ => vec![],
        };
        assert_eq!(counts(&l), [3, 3, 3]);
        // Node counts after each step as Valkey 8.1's DEBUG QUICKLIST shows
        // them for the same commands.
        // LINSERT BEFORE the head of a full node whose previous is full: a
        // node of its own.
        l.insert(3, false, b"y", &lim);
        assert_eq!(counts(&l), [3, 1, 3, 3]);
        // LINSERT AFTER d, inside its full node: split after the pivot, the
        // element starts the right part, and the node before the pivot's
        // takes the pivot's part in ([y] and [d] merge).
        l.insert(4, true, b"x", &lim);
        assert_eq!(counts(&l), [3, 2, 3, 3]);
        let want = ["a", "b", "c", "y", "d", "x", "e", "f", "g", "h", "i"];
        assert_eq!(items(&l), want);
        // Deleting never merges nodes.
        assert_eq!(l.remove(b"y", 1, &lim), 1);
        assert_eq!(counts(&l), [3, 1, 3, 3]);
        assert_eq!(l.remove(b"e", -1, &lim), 1);
        assert_eq!(counts(&l), [3, 1, 2, 3]);
        assert_eq!(items(&l), ["a", "b", "c", "d", "x", "f", "g", "h", "i"]);
        // LSET replaces in place whatever the node's size then (only an
        // element as large as a plain node's would stand alone).
        let big = vec![b'z'; NODE_SAFETY_BYTES];
        l.set(4, &big, &lim);
        assert_eq!(counts(&l), [3, 1, 2, 3]);
        assert_eq!(l.get(4).as_deref(), Some(&big[..]));
        check_with(&l, &lim, false);
        l.set(4, b"x", &lim);
        assert_eq!(l.get(4).as_deref(), Some(&b"x"[..]));
        assert_eq!(l.pop(End::Left, 4, &lim).len(), 4);
        // Popping leaves the other nodes as they are.
        assert_eq!(counts(&l), [2, 3]);
        check(&l, &lim);
    }

    /// A small deterministic generator (xorshift64*), so that failures
    /// replay.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    fn model_positions(
        m: &VecDeque<Vec<u8>>,
        elem: &[u8],
        rank: i64,
        want: usize,
        maxlen: usize,
    ) -> Vec<usize> {
        let len = m.len();
        let scan = if maxlen == 0 { len } else { maxlen.min(len) };
        let mut skip = rank.unsigned_abs() - 1;
        let mut found = Vec::new();
        for k in 0..scan {
            let i = if rank > 0 { k } else { len - 1 - k };
            if m[i] == elem {
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
                found.push(i);
                if found.len() >= want {
                    break;
                }
            }
        }
        found
    }

    /// Random operations against a `VecDeque` model, with node limits small
    /// enough that nodes split, merge and the encoding converts all the
    /// time.
    fn random_ops(limit_n: i64, big: usize, seed: u64, steps: usize) {
        random_ops_at_depth(limit_n, 0, big, seed, steps);
    }

    fn random_ops_at_depth(limit_n: i64, depth: u16, big: usize, seed: u64, steps: usize) {
        let lim = EncodingLimits {
            list_compress_depth: depth,
            ..limit(limit_n)
        };
        let mut rng = Rng(seed);
        let mut l = List::new();
        let mut m: VecDeque<Vec<u8>> = VecDeque::new();
        let elem = |rng: &mut Rng| -> Vec<u8> {
            match rng.below(20) {
                0 => vec![b'B'; big / 2 + rng.below(big)],
                1..=3 => format!("long-element-{}", rng.below(1000)).into_bytes(),
                _ => vec![b'a' + rng.below(5) as u8],
            }
        };
        // What the run went through, so that it is known to have split,
        // merged and converted.
        let (mut max_nodes, mut conversions, mut last_encoding) = (0, 0, "listpack");
        let mut max_compressed = 0;
        // An LSET may grow a node past the limits (Valkey's does).
        let mut grown_by_set = false;
        for step in 0..steps {
            let op = rng.below(13);
            let len = m.len();
            match op {
                0 | 1 => {
                    let n = 1 + rng.below(3);
                    let es: Vec<Vec<u8>> = (0..n).map(|_| elem(&mut rng)).collect();
                    let refs: Vec<&[u8]> = es.iter().map(Vec::as_slice).collect();
                    let end = if op == 0 { End::Left } else { End::Right };
                    l.push(end, &refs, &lim);
                    for e in es {
                        match end {
                            End::Left => m.push_front(e),
                            End::Right => m.push_back(e),
                        }
                    }
                }
                2 | 3 => {
                    let n = rng.below(4);
                    let end = if op == 2 { End::Left } else { End::Right };
                    let got = l.pop(end, n, &lim);
                    let want: Vec<Vec<u8>> = (0..n.min(len))
                        .map(|_| match end {
                            End::Left => m.pop_front().unwrap(),
                            End::Right => m.pop_back().unwrap(),
                        })
                        .collect();
                    assert_eq!(got, want, "step {step}: pop");
                }
                4 | 5 => {
                    let e = elem(&mut rng);
                    let at = rng.below(len + 1);
                    // LINSERT names an element: before it, or after the
                    // one before.
                    let after = at > 0 && (at == len || rng.below(2) == 0);
                    if len == 0 {
                        l.push(End::Right, &[&e], &lim);
                    } else {
                        l.insert(at - usize::from(after), after, &e, &lim);
                    }
                    m.insert(at, e);
                }
                6 if len > 0 => {
                    grown_by_set = true;
                    let e = elem(&mut rng);
                    let at = rng.below(len);
                    l.set(at, &e, &lim);
                    m[at] = e;
                }
                7 => {
                    let e = elem(&mut rng);
                    let count = rng.below(7) as i64 - 3;
                    let limit = if count == 0 {
                        usize::MAX
                    } else {
                        count.unsigned_abs() as usize
                    };
                    let mut removed = 0;
                    let mut v: Vec<Vec<u8>> = m.drain(..).collect();
                    if count < 0 {
                        v.reverse();
                    }
                    v.retain(|x| {
                        let hit = removed < limit && *x == e;
                        removed += usize::from(hit);
                        !hit
                    });
                    if count < 0 {
                        v.reverse();
                    }
                    m = v.into();
                    assert_eq!(l.remove(&e, count, &lim), removed, "step {step}: lrem");
                }
                8 if rng.below(4) == 0 => {
                    let start = rng.below(len + 2);
                    let stop = rng.below(len + 2);
                    l.trim(start, stop, &lim);
                    if start > stop || start >= len {
                        m.clear();
                    } else {
                        m = m.range(start..=stop.min(len - 1)).cloned().collect();
                    }
                }
                9 if len > 0 => {
                    let start = rng.below(len);
                    let stop = start + rng.below(len - start);
                    let want: Vec<&[u8]> = m.range(start..=stop).map(Vec::as_slice).collect();
                    assert_eq!(range(&l, start, stop), want, "step {step}: range");
                }
                10 => {
                    let i = rng.below(len + 1);
                    assert_eq!(
                        l.get(i).as_deref(),
                        m.get(i).map(Vec::as_slice),
                        "step {step}: get"
                    );
                }
                11 => {
                    let e = elem(&mut rng);
                    let rank = (1 + rng.below(3) as i64) * if rng.below(2) == 0 { 1 } else { -1 };
                    let want = [1, 2, usize::MAX][rng.below(3)];
                    let maxlen = [0, 1, 5][rng.below(3)];
                    assert_eq!(
                        l.positions(&e, rank, want, maxlen),
                        model_positions(&m, &e, rank, want, maxlen),
                        "step {step}: lpos"
                    );
                }
                _ => {
                    // Iterate from both ends at once, meeting anywhere.
                    let mut it = l.iter();
                    let (mut front, mut back) = (0, len);
                    while front < back {
                        if rng.below(2) == 0 {
                            assert_eq!(
                                it.next().as_deref(),
                                Some(&m[front][..]),
                                "step {step}: next"
                            );
                            front += 1;
                        } else {
                            back -= 1;
                            assert_eq!(
                                it.next_back().as_deref(),
                                Some(&m[back][..]),
                                "step {step}: next_back"
                            );
                        }
                    }
                    assert_eq!(it.next(), None);
                    assert_eq!(it.next_back(), None);
                }
            }
            assert_eq!(l.len(), m.len(), "step {step}: len after op {op}");
            check_with(&l, &lim, !grown_by_set);
            max_nodes = max_nodes.max(l.nodes());
            max_compressed = max_compressed.max(l.compressed_nodes());
            if !l.is_empty() && l.encoding() != last_encoding {
                conversions += 1;
                last_encoding = l.encoding();
            }
            if step % 16 == 0 {
                assert!(
                    l.iter().eq(m.iter().map(Vec::as_slice)),
                    "step {step}: contents"
                );
                assert!(l.iter().rev().eq(m.iter().rev().map(Vec::as_slice)));
            }
            // Keep the list around a few nodes' worth, so that it keeps
            // crossing the conversion limits.
            if m.len() > 60 {
                let n = m.len() - 30;
                let end = if step % 2 == 0 { End::Left } else { End::Right };
                l.pop(end, n, &lim);
                for _ in 0..n {
                    match end {
                        End::Left => m.pop_front(),
                        End::Right => m.pop_back(),
                    };
                }
            }
        }
        assert!(l.iter().eq(m.iter().map(Vec::as_slice)));
        assert!(max_nodes >= 4, "{max_nodes} nodes at most");
        assert!(conversions >= 10, "{conversions} conversions");
        if depth > 0 {
            // Lists of up to ~20 nodes: at depth 3 few are inside.
            let want = if depth >= 3 { 1 } else { 2 };
            assert!(
                max_compressed >= want,
                "depth {depth}: {max_compressed} nodes compressed at most"
            );
        } else {
            assert_eq!(max_compressed, 0);
        }
    }

    #[test]
    fn random_ops_against_a_model_three_per_node() {
        for seed in 1..=8u64 {
            random_ops(3, 40, seed.wrapping_mul(0x9e37_79b9_7f4a_7c15), 3000);
        }
    }

    #[test]
    fn random_ops_against_a_model_other_limits() {
        // One per node; five per node with elements past the 8 KiB safety
        // limit; 4 KiB nodes with elements of up to 6 KiB.
        random_ops(1, 40, 7, 3000);
        random_ops(5, 12_000, 11, 2000);
        random_ops(-1, 4000, 13, 2000);
    }

    #[test]
    fn random_ops_against_a_model_with_compressed_nodes() {
        // Depths 1 to 3 on lists of a few to twenty nodes, so that the
        // list keeps crossing 2 × depth nodes both ways.
        for (depth, seed) in [(1, 3u64), (2, 5), (3, 17), (3, 19)] {
            random_ops_at_depth(3, depth, 40, seed.wrapping_mul(0x9e37_79b9_7f4a_7c15), 3000);
        }
        random_ops_at_depth(1, 1, 40, 23, 2000);
        random_ops_at_depth(-1, 1, 4000, 29, 2000);
    }

    #[test]
    fn compressed_nodes_save_memory_and_read_back() {
        let lim = EncodingLimits {
            list_max_listpack_size: 16,
            list_compress_depth: 1,
            ..EncodingLimits::default()
        };
        let items: Vec<Vec<u8>> = (0..1600)
            .map(|i| format!("{{\"user\":{},\"event\":\"page-view\"}}", i % 50).into_bytes())
            .collect();
        let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
        let mut plain = List::new();
        plain.push(End::Right, &refs, &limit(16));
        let mut packed = List::new();
        packed.push(End::Right, &refs, &lim);
        assert_eq!(packed.compress_depth(), Some(1));
        assert_eq!(packed.nodes(), 100);
        // Every node but the two ends.
        assert_eq!(packed.compressed_nodes(), 98);
        assert!(
            packed.memory_usage() * 3 < plain.memory_usage(),
            "{} compressed against {}",
            packed.memory_usage(),
            plain.memory_usage()
        );
        assert!(packed.iter().eq(plain.iter()));
        assert_eq!(packed.get(800), plain.get(800));
        assert_eq!(range(&packed, 15, 40), range(&plain, 15, 40));
        // Popping down to two nodes leaves nothing to compress.
        packed.pop(End::Left, 1568, &lim);
        assert_eq!((packed.nodes(), packed.compressed_nodes()), (2, 0));
        check(&packed, &lim);
    }
}
