//! The large encoding (`skiplist` to OBJECT ENCODING): a treap ordered by
//! (score, member) with subtree sizes, and a chained hash index from member
//! to node, both threaded through one arena of nodes.
//!
//! ```text
//!   nodes: Vec<Node>   [ member | score | left right size prio | next hash ]
//!            ▲  treap links (left/right) by (score, member); `size` = subtree
//!            │  count, so rank, select and range bounds are O(log n)
//!            └─ hash chains (`next`) from `buckets[hash & mask]`
//!   buckets: Vec<u32>  power of two, chain heads; SCAN walks these with
//!                      Valkey's reverse-binary cursor
//! ```
//!
//! Why a treap rather than Valkey's skiplist: with nodes in an arena and
//! links as `u32` indices (no `unsafe`, no per-level allocations), a treap
//! gives the same expected O(log n) insert/delete/rank/range with a fixed
//! 48-byte node, where a skiplist needs a variable number of (link, span)
//! levels per node. The member bytes are stored once, in the node: the hash
//! index holds node indices, not copies of members. A freed node is filled
//! by moving the last node of the arena into its slot (the two links that
//! pointed at the moved node are found by key and by hash chain), so the
//! arena stays dense and holds no tombstones.
//!
//! Priorities come from a per-tree xorshift generator seeded from the
//! process-random hash seed, so a client cannot choose members that make
//! the treap degenerate.

use crate::defrag::Mover;
use crate::hash::hash_key;

/// Members one step of active defragmentation offers.
const RELOCATE_MEMBERS_PER_STEP: usize = 64;

pub(crate) const NIL: u32 = u32::MAX;

#[derive(Clone)]
struct Node {
    member: Box<[u8]>,
    score: f64,
    left: u32,
    right: u32,
    size: u32,
    prio: u32,
    next: u32,
    hash: u32,
}

#[derive(Clone)]
pub(crate) struct Tree {
    nodes: Vec<Node>,
    buckets: Vec<u32>,
    root: u32,
    rng: u64,
}

/// Buckets of the smallest non-empty index.
const MIN_BUCKETS: usize = 4;

#[inline]
fn hash32(member: &[u8]) -> u32 {
    hash_key(member) as u32
}

impl Tree {
    /// Active defragmentation's step over the members' buffers from node
    /// `cursor` (0 starts; returns 0 when done). Nodes link by arena
    /// index, not address, so each member's own buffer is the only block
    /// to move.
    pub(crate) fn relocate_step(&mut self, cursor: u64, m: &mut Mover<'_>) -> u64 {
        m.chunk(
            self.nodes.iter_mut(),
            cursor,
            RELOCATE_MEMBERS_PER_STEP,
            |n, m| m.bytes(&mut n.member),
        )
    }

    pub fn with_capacity(n: usize) -> Tree {
        let nb = n.next_power_of_two().max(MIN_BUCKETS);
        Tree {
            nodes: Vec::with_capacity(n),
            buckets: vec![NIL; nb],
            root: NIL,
            rng: crate::hash::seed() | 1,
        }
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Bytes the allocator holds for the arena, the bucket array and each
    /// node's member (each rounded up to jemalloc's size class), not
    /// counting the `Tree` struct itself, which its owner boxes. The
    /// arena's spare capacity counts: the allocator holds it.
    pub fn memory_usage(&self) -> usize {
        use crate::alloc_size;
        alloc_size(self.nodes.capacity() * std::mem::size_of::<Node>())
            + alloc_size(self.buckets.capacity() * std::mem::size_of::<u32>())
            + self
                .nodes
                .iter()
                .map(|n| alloc_size(n.member.len()))
                .sum::<usize>()
    }

    fn next_prio(&mut self) -> u32 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        (x >> 32) as u32
    }

    #[inline]
    fn size(&self, t: u32) -> usize {
        if t == NIL {
            0
        } else {
            self.nodes[t as usize].size as usize
        }
    }

    fn pull(&mut self, t: u32) {
        let n = &self.nodes[t as usize];
        let s = 1 + self.size(n.left) + self.size(n.right);
        self.nodes[t as usize].size = s as u32;
    }

    /// Node `a` sorts before node `b`.
    #[inline]
    fn less(&self, a: u32, b: u32) -> bool {
        let (x, y) = (&self.nodes[a as usize], &self.nodes[b as usize]);
        super::pack::less(x.score, &x.member, y.score, &y.member)
    }

    // ---- hash index ----

    fn mask(&self) -> usize {
        self.buckets.len() - 1
    }

    pub fn find(&self, member: &[u8]) -> Option<u32> {
        let h = hash32(member);
        let mut i = self.buckets[h as usize & self.mask()];
        while i != NIL {
            let n = &self.nodes[i as usize];
            if n.hash == h && &*n.member == member {
                return Some(i);
            }
            i = n.next;
        }
        None
    }

    fn link(&mut self, i: u32) {
        let b = self.nodes[i as usize].hash as usize & self.mask();
        self.nodes[i as usize].next = self.buckets[b];
        self.buckets[b] = i;
    }

    fn unlink(&mut self, i: u32) {
        let b = self.nodes[i as usize].hash as usize & self.mask();
        let after = self.nodes[i as usize].next;
        if self.buckets[b] == i {
            self.buckets[b] = after;
            return;
        }
        let mut p = self.buckets[b];
        while self.nodes[p as usize].next != i {
            p = self.nodes[p as usize].next;
        }
        self.nodes[p as usize].next = after;
    }

    /// Rebuild the index with `nb` buckets (a power of two). All at once:
    /// Valkey's SCAN guarantee holds across a resize between two calls.
    fn rehash(&mut self, nb: usize) {
        self.buckets = vec![NIL; nb];
        for i in 0..self.nodes.len() as u32 {
            self.link(i);
        }
    }

    // ---- treap ----

    /// Split `t` into (keys before node `x`, the rest).
    fn split(&mut self, t: u32, x: u32) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        if self.less(t, x) {
            let (l, r) = self.split(self.nodes[t as usize].right, x);
            self.nodes[t as usize].right = l;
            self.pull(t);
            (t, r)
        } else {
            let (l, r) = self.split(self.nodes[t as usize].left, x);
            self.nodes[t as usize].left = r;
            self.pull(t);
            (l, t)
        }
    }

    /// Join two treaps where every key of `a` sorts before every key of `b`.
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.nodes[a as usize].prio > self.nodes[b as usize].prio {
            let r = self.merge(self.nodes[a as usize].right, b);
            self.nodes[a as usize].right = r;
            self.pull(a);
            a
        } else {
            let l = self.merge(a, self.nodes[b as usize].left);
            self.nodes[b as usize].left = l;
            self.pull(b);
            b
        }
    }

    fn insert_at(&mut self, t: u32, x: u32) -> u32 {
        if t == NIL {
            return x;
        }
        if self.nodes[x as usize].prio > self.nodes[t as usize].prio {
            let (l, r) = self.split(t, x);
            let n = &mut self.nodes[x as usize];
            n.left = l;
            n.right = r;
            self.pull(x);
            return x;
        }
        if self.less(x, t) {
            let l = self.insert_at(self.nodes[t as usize].left, x);
            self.nodes[t as usize].left = l;
        } else {
            let r = self.insert_at(self.nodes[t as usize].right, x);
            self.nodes[t as usize].right = r;
        }
        self.nodes[t as usize].size += 1;
        t
    }

    /// Detach node `x` (which is in the subtree `t`).
    fn erase_at(&mut self, t: u32, x: u32) -> u32 {
        if t == x {
            let n = &self.nodes[x as usize];
            return self.merge(n.left, n.right);
        }
        if self.less(x, t) {
            let l = self.erase_at(self.nodes[t as usize].left, x);
            self.nodes[t as usize].left = l;
        } else {
            let r = self.erase_at(self.nodes[t as usize].right, x);
            self.nodes[t as usize].right = r;
        }
        self.nodes[t as usize].size -= 1;
        t
    }

    fn reset_links(&mut self, x: u32) {
        let n = &mut self.nodes[x as usize];
        n.left = NIL;
        n.right = NIL;
        n.size = 1;
    }

    // ---- public operations ----

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.find(member).map(|i| self.nodes[i as usize].score)
    }

    /// Set `member`'s score; the old score if it was present.
    pub fn insert(&mut self, member: &[u8], score: f64) -> Option<f64> {
        if let Some(i) = self.find(member) {
            let old = self.nodes[i as usize].score;
            if old != score {
                self.root = self.erase_at(self.root, i);
                self.nodes[i as usize].score = score;
                self.reset_links(i);
                self.root = self.insert_at(self.root, i);
            }
            return Some(old);
        }
        let prio = self.next_prio();
        let i = self.nodes.len() as u32;
        self.nodes.push(Node {
            member: member.into(),
            score,
            left: NIL,
            right: NIL,
            size: 1,
            prio,
            next: NIL,
            hash: hash32(member),
        });
        if self.nodes.len() > self.buckets.len() {
            self.rehash(self.buckets.len() * 2);
        } else {
            self.link(i);
        }
        self.root = self.insert_at(self.root, i);
        None
    }

    /// Remove node `i` from both structures and free its slot.
    fn delete_node(&mut self, i: u32) -> f64 {
        self.root = self.erase_at(self.root, i);
        self.unlink(i);
        let last = self.nodes.len() as u32 - 1;
        let gone = self.nodes.swap_remove(i as usize);
        if i != last {
            self.relocate(last, i);
        }
        let nb = self.buckets.len();
        if nb > MIN_BUCKETS && self.nodes.len() * 8 < nb {
            self.rehash(self.nodes.len().next_power_of_two().max(MIN_BUCKETS));
        }
        gone.score
    }

    /// The node that was at `from` now lives at `to`: repoint the tree
    /// link and the hash-chain link that referred to it.
    fn relocate(&mut self, from: u32, to: u32) {
        if self.root == from {
            self.root = to;
        } else {
            let mut t = self.root;
            loop {
                let n = &self.nodes[t as usize];
                if n.left == from {
                    self.nodes[t as usize].left = to;
                    break;
                }
                if n.right == from {
                    self.nodes[t as usize].right = to;
                    break;
                }
                t = if self.less(to, t) { n.left } else { n.right };
            }
        }
        let b = self.nodes[to as usize].hash as usize & self.mask();
        if self.buckets[b] == from {
            self.buckets[b] = to;
        } else {
            let mut p = self.buckets[b];
            while self.nodes[p as usize].next != from {
                p = self.nodes[p as usize].next;
            }
            self.nodes[p as usize].next = to;
        }
    }

    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let i = self.find(member)?;
        Some(self.delete_node(i))
    }

    /// Ascending rank of `member` and its score.
    pub fn rank(&self, member: &[u8]) -> Option<(usize, f64)> {
        let x = self.find(member)?;
        let mut r = 0;
        let mut t = self.root;
        while t != x {
            let n = &self.nodes[t as usize];
            if self.less(x, t) {
                t = n.left;
            } else {
                r += self.size(n.left) + 1;
                t = n.right;
            }
        }
        r += self.size(self.nodes[x as usize].left);
        Some((r, self.nodes[x as usize].score))
    }

    fn select(&self, mut k: usize) -> Option<u32> {
        let mut t = self.root;
        while t != NIL {
            let n = &self.nodes[t as usize];
            let ls = self.size(n.left);
            if k < ls {
                t = n.left;
            } else if k == ls {
                return Some(t);
            } else {
                k -= ls + 1;
                t = n.right;
            }
        }
        None
    }

    pub fn get(&self, rank: usize) -> Option<(&[u8], f64)> {
        let n = &self.nodes[self.select(rank)? as usize];
        Some((&n.member, n.score))
    }

    /// How many elements satisfy `pred`, which must hold for a prefix of
    /// the order (the partition point, found in O(log n)).
    pub fn partition(&self, pred: impl Fn(f64, &[u8]) -> bool) -> usize {
        let mut r = 0;
        let mut t = self.root;
        while t != NIL {
            let n = &self.nodes[t as usize];
            if pred(n.score, &n.member) {
                r += self.size(n.left) + 1;
                t = n.right;
            } else {
                t = n.left;
            }
        }
        r
    }

    /// Remove ascending ranks `lo..hi` (in bounds).
    pub fn remove_ranks(&mut self, lo: usize, hi: usize) {
        for _ in lo..hi {
            if let Some(i) = self.select(lo) {
                self.delete_node(i);
            }
        }
    }

    /// In-order walk starting at `from` (counted in walk order: from the
    /// end when `rev`).
    pub fn walk(&self, from: usize, rev: bool) -> Walk<'_> {
        let mut stack = Vec::new();
        let mut t = self.root;
        let mut k = from;
        while t != NIL {
            let n = &self.nodes[t as usize];
            let (near, far) = if rev {
                (n.right, n.left)
            } else {
                (n.left, n.right)
            };
            let ns = self.size(near);
            if k < ns {
                stack.push(t);
                t = near;
            } else if k == ns {
                stack.push(t);
                break;
            } else {
                k -= ns + 1;
                t = far;
            }
        }
        Walk {
            tree: self,
            stack,
            rev,
        }
    }

    /// Visit one bucket of the hash index; the next cursor (0 = done).
    pub fn scan_step(&self, cursor: u64, mut f: impl FnMut(&[u8], f64)) -> u64 {
        let mask = self.mask() as u64;
        let mut i = self.buckets[(cursor & mask) as usize];
        while i != NIL {
            let n = &self.nodes[i as usize];
            f(&n.member, n.score);
            i = n.next;
        }
        // Increment the reversed masked bits, so a cursor stays meaningful
        // when the table has grown or shrunk since it was handed out.
        let mut v = cursor | !mask;
        v = v.reverse_bits().wrapping_add(1).reverse_bits();
        v
    }

    /// Assert that sizes, order and the index all agree.
    #[cfg(test)]
    pub fn check(&self) {
        fn sz(t: &Tree, x: u32) -> usize {
            if x == NIL {
                return 0;
            }
            let n = &t.nodes[x as usize];
            let s = 1 + sz(t, n.left) + sz(t, n.right);
            assert_eq!(s, n.size as usize);
            s
        }
        assert_eq!(sz(self, self.root), self.nodes.len());
        let v: Vec<_> = self.walk(0, false).collect();
        assert!(
            v.windows(2)
                .all(|w| super::pack::less(w[0].1, w[0].0, w[1].1, w[1].0))
        );
        for (i, n) in self.nodes.iter().enumerate() {
            assert_eq!(self.find(&n.member), Some(i as u32));
        }
    }
}

pub(crate) struct Walk<'a> {
    tree: &'a Tree,
    stack: Vec<u32>,
    rev: bool,
}

impl<'a> Iterator for Walk<'a> {
    type Item = (&'a [u8], f64);
    fn next(&mut self) -> Option<Self::Item> {
        let t = self.stack.pop()?;
        let nodes = &self.tree.nodes;
        let n = &nodes[t as usize];
        let mut c = if self.rev { n.left } else { n.right };
        while c != NIL {
            self.stack.push(c);
            let m = &nodes[c as usize];
            // The subtree after `m` is walked once `m` is popped: start its
            // root's cache miss now, so long range walks overlap misses
            // instead of taking them one by one.
            let later = if self.rev { m.left } else { m.right };
            if later != NIL {
                crate::table::prefetch_ptr(nodes.as_ptr().wrapping_add(later as usize));
            }
            c = if self.rev { m.right } else { m.left };
        }
        Some((&n.member, n.score))
    }
}
