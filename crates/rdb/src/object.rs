//! A value's type byte and payload as Valkey writes each encoding
//! (strings; lists as quicklist 2; sets intset / listpack / hashtable;
//! sorted sets listpack / skiplist; hashes listpack / hashtable).
//!
//! Design: Valkey's `rdbSaveObjectType` + `rdbSaveObject`, one arm per
//! in-memory encoding, writing into a [`Capture`]. Our compact encodings
//! are our own byte layouts, so each is re-packed here into the blob
//! Valkey would hold in memory (listpack, intset); Valkey writes that blob
//! as one string, and so do we. The large encodings are written element by
//! element. A listpack-encoded list is written as a one-node quicklist, and
//! a quicklist node by node, as Valkey 7.2+ does.

use crate::capture::Capture;
use crate::consts::{
    QUICKLIST_NODE_PACKED, QUICKLIST_NODE_PLAIN, TYPE_HASH, TYPE_HASH_LISTPACK,
    TYPE_LIST_QUICKLIST_2, TYPE_SET, TYPE_SET_INTSET, TYPE_SET_LISTPACK, TYPE_STREAM_LISTPACKS_3,
    TYPE_STRING, TYPE_ZSET_2, TYPE_ZSET_LISTPACK,
};
use crate::encode::{self, Listpack};
use store::types::set::Member;
use store::types::stream::Elem;
use store::types::{Hash, List, Set, Stream, ZSet};
use store::{StrRef, ValueRef};

/// `rdbSaveObjectType`: the type byte for the value's current encoding.
pub fn type_byte(v: ValueRef<'_>) -> u8 {
    match v {
        ValueRef::Str(_) => TYPE_STRING,
        ValueRef::List(_) => TYPE_LIST_QUICKLIST_2,
        ValueRef::Set(s) => match s.encoding() {
            "intset" => TYPE_SET_INTSET,
            "listpack" => TYPE_SET_LISTPACK,
            _ => TYPE_SET,
        },
        ValueRef::ZSet(z) => match z.encoding() {
            "listpack" => TYPE_ZSET_LISTPACK,
            _ => TYPE_ZSET_2,
        },
        ValueRef::Hash(h) => match h.encoding() {
            "listpack" => TYPE_HASH_LISTPACK,
            _ => TYPE_HASH,
        },
        ValueRef::Stream(_) => TYPE_STREAM_LISTPACKS_3,
    }
}

/// `rdbSaveObject`: the value after its type byte.
pub fn write_value(cap: &mut Capture, v: ValueRef<'_>) {
    match v {
        ValueRef::Str(StrRef::Int(n)) => cap.int(n),
        ValueRef::Str(s) => cap.string(s.bytes().expect("a non-integer string has bytes")),
        ValueRef::List(l) => write_list(cap, l),
        ValueRef::Set(s) => write_set(cap, s),
        ValueRef::ZSet(z) => write_zset(cap, z),
        ValueRef::Hash(h) => write_hash(cap, h),
        ValueRef::Stream(s) => write_stream(cap, s),
    }
}

/// `RDB_TYPE_STREAM_LISTPACKS_3` as Valkey 8 writes it: each block as the
/// listpack Valkey's node would hold, then the metadata and the groups.
fn write_stream(cap: &mut Capture, s: &Stream) {
    cap.length(s.block_count() as u64);
    for (master, b) in s.blocks() {
        cap.string(&master.to_be_bytes());
        cap.string_with(|out| stream_listpack(out, master, b));
    }
    cap.length(s.length);
    for id in [s.last_id, s.first_id, s.max_deleted_id] {
        cap.length(id.ms);
        cap.length(id.seq);
    }
    cap.length(s.entries_added);
    cap.length(s.group_count() as u64);
    let Some(groups) = &s.groups else {
        return;
    };
    for (name, g) in groups.iter() {
        cap.string(name);
        cap.length(g.last_id.ms);
        cap.length(g.last_id.seq);
        // -1 (unknown) is written as the u64 it is in C.
        cap.length(g.entries_read as u64);
        cap.length(g.pel.len() as u64);
        for (id, n) in &g.pel {
            cap.raw(&id.to_be_bytes());
            cap.raw(&n.delivery_time.to_le_bytes());
            cap.length(n.delivery_count);
        }
        cap.length(g.consumers.len() as u64);
        for c in g.consumers.values() {
            cap.string(&c.name);
            cap.raw(&c.seen_time.to_le_bytes());
            cap.raw(&c.active_time.to_le_bytes());
            cap.length(c.pel.len() as u64);
            for id in &c.pel {
                cap.raw(&id.to_be_bytes());
            }
        }
    }
}

fn push_elem(lp: &mut Listpack<'_>, e: Elem<'_>) {
    match e {
        Elem::Bytes(b) => lp.push(b),
        Elem::Int(v) => lp.push_int(v),
    }
}

/// A block as Valkey's stream listpack: the master entry (count, deleted,
/// field count, fields, 0), then per entry flags, ID deltas, [field
/// count, fields and] values, and the entry's element count.
pub fn stream_listpack(
    out: &mut Vec<u8>,
    master: store::StreamId,
    b: &store::types::stream::Block,
) {
    use store::types::stream::FLAG_SAMEFIELDS;
    let mut lp = Listpack::new(out);
    lp.push_int(b.live() as i64);
    lp.push_int(b.deleted() as i64);
    let fields: Vec<Elem<'_>> = b.master_fields().collect();
    lp.push_int(fields.len() as i64);
    for f in &fields {
        push_elem(&mut lp, *f);
    }
    lp.push_int(0);
    for e in b.entries(master) {
        let same = e.flags & FLAG_SAMEFIELDS != 0;
        lp.push_int(i64::from(e.flags));
        lp.push_int(e.id.ms.wrapping_sub(master.ms) as i64);
        lp.push_int(e.id.seq.wrapping_sub(master.seq) as i64);
        if !same {
            lp.push_int(e.nfields as i64);
        }
        for (f, v) in e.pairs() {
            if !same {
                push_elem(&mut lp, f);
            }
            push_elem(&mut lp, v);
        }
        let count = if same {
            e.nfields + 3
        } else {
            2 * e.nfields + 4
        };
        lp.push_int(count as i64);
    }
    lp.finish();
}

fn write_list(cap: &mut Capture, l: &List) {
    cap.length(l.nodes() as u64);
    for (compressed, node) in l.nodes_held() {
        let mut node = node.peekable();
        let first = node.next();
        match (&first, node.peek()) {
            (Some(big), None) if big.len() >= store::types::list::packed_threshold() => {
                cap.length(QUICKLIST_NODE_PLAIN);
                cap.string(big);
            }
            _ => {
                cap.length(QUICKLIST_NODE_PACKED);
                cap.listpack_held(first.into_iter().chain(node), compressed);
            }
        }
    }
}

/// The bytes a list's nodes hold as Valkey's quicklist would hold them
/// (each packed node's listpack, a plain node's element): DEBUG OBJECT's
/// `ql_uncompressed_size`.
pub fn quicklist_bytes(l: &List) -> usize {
    let mut buf = Vec::new();
    l.node_iter()
        .map(|node| {
            let mut node = node.peekable();
            let first = node.next();
            match (&first, node.peek()) {
                (Some(big), None) if big.len() >= store::types::list::packed_threshold() => {
                    big.len()
                }
                _ => {
                    buf.clear();
                    let mut lp = Listpack::new(&mut buf);
                    first.into_iter().chain(node).for_each(|e| lp.push(&e));
                    lp.finish();
                    buf.len()
                }
            }
        })
        .sum()
}

fn write_set(cap: &mut Capture, s: &Set) {
    match s.encoding() {
        "intset" => {
            let vals: Vec<i64> = s
                .iter()
                .map(|m| match m {
                    Member::Int(i) => i,
                    Member::Bytes(b) => {
                        encode::canonical_i64(b).expect("an intset member is an integer")
                    }
                })
                .collect();
            cap.string_with(|out| encode::put_intset(out, &vals));
        }
        "listpack" => cap.string_with(|out| {
            let mut lp = Listpack::new(out);
            for m in s.iter() {
                match m {
                    Member::Bytes(b) => lp.push(b),
                    Member::Int(i) => lp.push_int(i),
                }
            }
            lp.finish();
        }),
        _ => write_set_elements(cap, s),
    }
}

/// A set as RDB_TYPE_SET: its length, then each member.
pub fn write_set_elements(cap: &mut Capture, s: &Set) {
    cap.length(s.len() as u64);
    for m in s.iter() {
        match m {
            Member::Bytes(b) => cap.string(b),
            Member::Int(i) => cap.string(i.to_string().as_bytes()),
        }
    }
}

fn write_zset(cap: &mut Capture, z: &ZSet) {
    if z.encoding() == "listpack" {
        cap.string_with(|out| {
            let mut lp = Listpack::new(out);
            let mut buf = Vec::new();
            for (m, score) in z.iter() {
                lp.push(m);
                // zzlInsertAt: integral scores as integers, the rest as
                // d2string's text.
                match encode::double_as_i64(score) {
                    Some(i) => lp.push_int(i),
                    None => {
                        buf.clear();
                        encode::d2string(score, &mut buf);
                        lp.push_str(&buf);
                    }
                }
            }
            lp.finish();
        });
    } else {
        // From the highest rank down, so that loading inserts each at the
        // skiplist's head.
        cap.length(z.len() as u64);
        for (m, score) in z.range(0, usize::MAX, true) {
            cap.string(m);
            let mut b = [0u8; 8];
            b.copy_from_slice(&score.to_le_bytes());
            cap.raw(&b);
        }
    }
}

fn write_hash(cap: &mut Capture, h: &Hash) {
    if h.encoding() == "listpack" {
        cap.listpack(h.iter().flat_map(|(f, v)| [f, v]));
    } else {
        cap.length(h.len() as u64);
        for (f, v) in h.iter() {
            cap.string(f);
            cap.string(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::Encoder;
    use store::EncodingLimits;
    use store::types::list::End;

    fn body(v: ValueRef<'_>) -> Vec<u8> {
        let mut c = Capture::new();
        c.raw(&[type_byte(v)]);
        write_value(&mut c, v);
        let mut out = Vec::new();
        Encoder::new(true, true).feed(&c, &mut out);
        out
    }

    #[test]
    fn list_nodes_map_one_to_one() {
        let lim = EncodingLimits {
            list_max_listpack_size: 4,
            ..EncodingLimits::default()
        };
        let mut l = List::new();
        let items: Vec<Vec<u8>> = (0..10).map(|i| format!("e{i}").into_bytes()).collect();
        let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
        l.push(End::Right, &refs, &lim);
        assert_eq!(l.encoding(), "quicklist");
        let b = body(ValueRef::List(&l));
        assert_eq!(b[0], TYPE_LIST_QUICKLIST_2);
        assert_eq!(b[1] as usize, l.nodes());
        // First node: PACKED, then its listpack as a string of 4 entries.
        assert_eq!(b[2], 2);
        assert_eq!(b[3] as usize, 6 + 4 * 4 + 1);
        assert_eq!(b[4 + 4], 4);
    }

    #[test]
    fn skiplist_zset_highest_first() {
        let lim = EncodingLimits {
            zset_max_listpack_entries: 1,
            ..EncodingLimits::default()
        };
        let mut z = ZSet::new();
        z.insert(b"a", 1.0, &lim);
        z.insert(b"b", 2.5, &lim);
        assert_eq!(z.encoding(), "skiplist");
        let b = body(ValueRef::ZSet(&z));
        let mut want = vec![TYPE_ZSET_2, 2, 1, b'b'];
        want.extend_from_slice(&2.5f64.to_le_bytes());
        want.extend_from_slice(&[1, b'a']);
        want.extend_from_slice(&1.0f64.to_le_bytes());
        assert_eq!(b, want);
    }

    #[test]
    fn hashtable_set_and_hash() {
        let lim = EncodingLimits {
            set_max_listpack_entries: 1,
            set_max_intset_entries: 1,
            hash_max_listpack_entries: 1,
            ..EncodingLimits::default()
        };
        let mut s = Set::new();
        s.add(b"x", &lim);
        s.add(b"y", &lim);
        assert_eq!(s.encoding(), "hashtable");
        let b = body(ValueRef::Set(&s));
        assert_eq!(&b[..2], &[TYPE_SET, 2]);
        assert_eq!(b.len(), 2 + 4);
        let mut h = Hash::new();
        h.set(b"f", b"1", &lim);
        h.set(b"g", b"2", &lim);
        assert_eq!(h.encoding(), "hashtable");
        let b = body(ValueRef::Hash(&h));
        assert_eq!(&b[..2], &[TYPE_HASH, 2]);
        assert_eq!(b.len(), 2 + 2 * (2 + 2));
    }
}
