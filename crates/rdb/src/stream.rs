//! Loading stream values: RDB types 15, 19 and 21 (Valkey's
//! `RDB_TYPE_STREAM_LISTPACKS*`), from files and DUMP payloads.
//!
//! ```text
//!   nodes: len, then per node: master ID (16 bytes, big-endian) as a
//!          string, the node's listpack as a string
//!   length, last ID (ms, seq)
//!   19+:   first ID, max deleted ID, entries added
//!   groups: len, per group: name, last ID, [19+: entries read], PEL (len,
//!           per entry: raw 16-byte ID, delivery time (8 bytes LE ms),
//!           delivery count), consumers (len, per consumer: name, seen
//!           time, [21: active time], PEL (len, raw IDs))
//! ```
//!
//! Each listpack is decoded and checked entry by entry (the flags, the ID
//! deltas, the field counts and every entry's element count must agree)
//! before it becomes a block; a consumer's PEL entry must exist in its
//! group's PEL and every group PEL entry must have an owner, as Valkey's
//! loader requires.

use crate::Error;
use crate::consts::{TYPE_STREAM_LISTPACKS_2, TYPE_STREAM_LISTPACKS_3};
use crate::listpack::{self, Elem};
use crate::load::{Source, read_len, read_string};
use std::sync::Arc;
use store::types::stream::{Consumer, FLAG_DELETED, FLAG_SAMEFIELDS, Nack, Stream};
use store::{StreamId, Value};

fn raw_id<S: Source>(s: &mut S) -> Result<StreamId, Error> {
    let mut b = [0u8; 16];
    s.read_into(&mut b)?;
    Ok(StreamId::from_be_bytes(&b))
}

fn millis<S: Source>(s: &mut S) -> Result<i64, Error> {
    let mut b = [0u8; 8];
    s.read_into(&mut b)?;
    Ok(i64::from_le_bytes(b))
}

fn id_of<S: Source>(s: &mut S) -> Result<StreamId, Error> {
    Ok(StreamId::new(read_len(s)?, read_len(s)?))
}

/// Read a stream value of type `t` (after its key).
pub(crate) fn read_stream<S: Source>(s: &mut S, t: u8) -> Result<Value, Error> {
    let mut st = Stream::new();
    let nodes = read_len(s)?;
    for _ in 0..nodes {
        let at = s.pos();
        let key = read_string(s)?;
        let key: [u8; 16] = key
            .as_slice()
            .try_into()
            .map_err(|_| Error::new(at, "stream node key is not the size of a stream ID"))?;
        let master = StreamId::from_be_bytes(&key);
        let at = s.pos();
        let lp = read_string(s)?;
        load_node(&mut st, master, &lp).map_err(|e| Error::new(at, e))?;
    }
    let at = s.pos();
    let length = read_len(s)?;
    if length != st.length {
        return Err(Error::new(
            at,
            format!(
                "stream length {length} but {} entries in its nodes",
                st.length
            ),
        ));
    }
    st.last_id = id_of(s)?;
    if t >= TYPE_STREAM_LISTPACKS_2 {
        st.first_id = id_of(s)?;
        st.max_deleted_id = id_of(s)?;
        st.entries_added = read_len(s)?;
    } else {
        st.first_id = st.edge_id(false).unwrap_or(StreamId::MAX);
        if st.length == 0 {
            st.first_id = StreamId::MIN;
        }
        st.entries_added = st.length;
    }
    let ngroups = read_len(s)?;
    for _ in 0..ngroups {
        let at = s.pos();
        let name = read_string(s)?;
        let last = id_of(s)?;
        let entries_read = if t >= TYPE_STREAM_LISTPACKS_2 {
            read_len(s)? as i64
        } else {
            st.estimate_distance(last)
        };
        if !st.create_group(&name, last, entries_read) {
            return Err(Error::new(at, "duplicated consumer group name"));
        }
        let npel = read_len(s)?;
        let mut pel = std::collections::BTreeMap::new();
        let empty: Arc<[u8]> = Arc::from(&b""[..]);
        for _ in 0..npel {
            let at = s.pos();
            let id = raw_id(s)?;
            let delivery_time = millis(s)?;
            let delivery_count = read_len(s)?;
            let nack = Nack {
                consumer: empty.clone(),
                delivery_time,
                delivery_count,
            };
            if pel.insert(id, (nack, false)).is_some() {
                return Err(Error::new(at, "duplicated global PEL entry"));
            }
        }
        let nconsumers = read_len(s)?;
        let mut consumers = std::collections::BTreeMap::new();
        for _ in 0..nconsumers {
            let at = s.pos();
            let cname = read_string(s)?;
            let seen = millis(s)?;
            let active = if t >= TYPE_STREAM_LISTPACKS_3 {
                millis(s)?
            } else {
                seen
            };
            let mut c = Consumer::new(&cname, seen);
            c.active_time = active;
            let n = read_len(s)?;
            for _ in 0..n {
                let at = s.pos();
                let id = raw_id(s)?;
                let Some((nack, owned)) = pel.get_mut(&id) else {
                    return Err(Error::new(at, "consumer PEL entry not in the group's PEL"));
                };
                if *owned {
                    return Err(Error::new(at, "PEL entry with two consumers"));
                }
                *owned = true;
                nack.consumer = c.name.clone();
                c.pel.insert(id);
            }
            if consumers.insert(c.name.clone(), c).is_some() {
                return Err(Error::new(at, "duplicated consumer name"));
            }
        }
        if pel.values().any(|(_, owned)| !owned) {
            return Err(Error::new(at, "group PEL entry without a consumer"));
        }
        let g = st.group_mut(&name).expect("just created");
        g.pel = pel.into_iter().map(|(id, (n, _))| (id, n)).collect();
        g.consumers = consumers;
    }
    Ok(Value::Stream(Box::new(st)))
}

/// Decode one node's listpack into a block of `st`.
fn load_node(st: &mut Stream, master: StreamId, lp: &[u8]) -> Result<(), String> {
    let elems = listpack::decode(lp).map_err(|e| format!("stream listpack: {}", e.msg))?;
    if elems.is_empty() {
        return Err("empty listpack inside a stream".into());
    }
    let mut i = 0;
    let mut next = || -> Result<Elem<'_>, String> {
        let e = elems.get(i).copied().ok_or("stream listpack ends early")?;
        i += 1;
        Ok(e)
    };
    let int = |e: Elem<'_>| -> Result<i64, String> {
        match e {
            Elem::Int(v) => Ok(v),
            Elem::Bytes(b) => std::str::from_utf8(b)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| "an integer was expected in a stream listpack".to_string()),
        }
    };
    let count = int(next()?)?;
    let deleted = int(next()?)?;
    let nmaster = int(next()?)?;
    if count < 0 || deleted < 0 || nmaster < 0 {
        return Err("negative count in a stream listpack".into());
    }
    let mut master_fields = Vec::new();
    for _ in 0..nmaster {
        master_fields.push(next()?.to_vec());
    }
    if int(next()?)? != 0 {
        return Err("stream master entry without its zero terminator".into());
    }
    let mut entries: Vec<(u8, StreamId, Vec<Vec<u8>>)> = Vec::new();
    let (mut live, mut dead) = (0, 0);
    // Counts and field counts come from the file: bounded by the elements
    // there are before anything is sized by them.
    let total = count
        .checked_add(deleted)
        .filter(|&t| t as u64 <= elems.len() as u64)
        .ok_or("stream listpack counts more entries than it holds")? as usize;
    for _ in 0..total {
        let flags = int(next()?)?;
        if !(0..=3).contains(&flags) {
            return Err("bad stream entry flags".into());
        }
        let flags = flags as u8;
        let ms = int(next()?)?;
        let seq = int(next()?)?;
        let id = StreamId::new(
            master.ms.wrapping_add(ms as u64),
            master.seq.wrapping_add(seq as u64),
        );
        let same = flags & FLAG_SAMEFIELDS != 0;
        let n = if same { nmaster } else { int(next()?)? };
        if n < 0 || n as u64 > elems.len() as u64 {
            return Err("bad field count in a stream entry".into());
        }
        let mut fv = Vec::with_capacity(2 * n as usize);
        #[allow(clippy::needless_range_loop)]
        for k in 0..n as usize {
            if same {
                fv.push(master_fields[k].clone());
            } else {
                fv.push(next()?.to_vec());
            }
            fv.push(next()?.to_vec());
        }
        let lp_count = int(next()?)?;
        let want = if same { n + 3 } else { 2 * n + 4 };
        if lp_count != want {
            return Err("stream entry element count does not match".into());
        }
        if entries.last().is_some_and(|(_, last, _)| *last >= id) {
            return Err("stream entries out of order".into());
        }
        if flags & FLAG_DELETED != 0 {
            dead += 1;
        } else {
            live += 1;
        }
        entries.push((flags, id, fv));
    }
    if i != elems.len() {
        return Err("stream listpack has elements past its entries".into());
    }
    if live != count || dead != deleted {
        return Err("stream listpack counts do not match its entries".into());
    }
    if let Some((k, _)) = st.blocks().last()
        && k >= master
    {
        return Err("stream nodes out of order".into());
    }
    let fields: Vec<&[u8]> = master_fields.iter().map(Vec::as_slice).collect();
    let entries: Vec<(u8, StreamId, Vec<&[u8]>)> = entries
        .iter()
        .map(|(f, id, fv)| (*f, *id, fv.iter().map(Vec::as_slice).collect()))
        .collect();
    st.push_loaded_block(master, &fields, &entries);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::payload::{dump, verify};
    use crate::restore::restore;
    use store::types::stream::{NodeLimits, Stream};
    use store::{EncodingLimits, StreamId, Value, ValueRef};

    fn sample() -> Stream {
        let mut s = Stream::new();
        let lim = NodeLimits {
            max_bytes: 4096,
            max_entries: 3,
        };
        for i in 1..=8u64 {
            let v = i.to_string();
            let fv: Vec<&[u8]> = if i % 3 == 0 {
                vec![b"other", v.as_bytes()]
            } else {
                vec![b"f", v.as_bytes(), b"g", b"text value"]
            };
            s.append(StreamId::new(i, i % 2), &fv, lim);
        }
        s.delete(StreamId::new(2, 0));
        s.max_deleted_id = StreamId::new(2, 0);
        s.create_group(b"g1", StreamId::new(4, 0), 3);
        s.create_group(b"g2", StreamId::MIN, -1);
        let g = s.group_mut(b"g1").unwrap();
        let c: std::sync::Arc<[u8]> = std::sync::Arc::from(&b"alice"[..]);
        g.consumers.insert(
            c.clone(),
            store::types::stream::Consumer::new(b"alice", 1234),
        );
        g.assign(StreamId::new(1, 1), &c, 99).delivery_count = 3;
        g.assign(StreamId::new(3, 1), &c, 100);
        s
    }

    #[test]
    fn a_stream_survives_dump_and_restore() {
        let s = sample();
        let payload = dump(ValueRef::Stream(&s));
        let body = verify(&payload, false).expect("valid payload");
        let back = restore(body, &EncodingLimits::default()).expect("restores");
        let Value::Stream(back) = back else { panic!() };
        assert_eq!(*back, s);
    }

    /// A stream of `t` (15 or 19) by hand: one node (from our own
    /// listpack writer), one group with one pending entry owned by one
    /// consumer.
    fn legacy_body(t: u8, s: &Stream) -> Vec<u8> {
        use crate::encode::put_len;
        let put_str = |out: &mut Vec<u8>, b: &[u8]| {
            put_len(out, b.len() as u64);
            out.extend_from_slice(b);
        };
        let mut out = vec![t];
        put_len(&mut out, s.block_count() as u64);
        for (k, b) in s.blocks() {
            put_str(&mut out, &k.to_be_bytes());
            let mut lp = Vec::new();
            crate::object::stream_listpack(&mut lp, k, b);
            put_str(&mut out, &lp);
        }
        put_len(&mut out, s.length);
        put_len(&mut out, s.last_id.ms);
        put_len(&mut out, s.last_id.seq);
        if t == 19 {
            for id in [s.first_id, s.max_deleted_id] {
                put_len(&mut out, id.ms);
                put_len(&mut out, id.seq);
            }
            put_len(&mut out, s.entries_added);
        }
        put_len(&mut out, 1);
        put_str(&mut out, b"grp");
        put_len(&mut out, 3);
        put_len(&mut out, 0);
        if t == 19 {
            put_len(&mut out, 2);
        }
        put_len(&mut out, 1);
        out.extend_from_slice(&StreamId::new(3, 0).to_be_bytes());
        out.extend_from_slice(&777i64.to_le_bytes());
        put_len(&mut out, 4);
        put_len(&mut out, 1);
        put_str(&mut out, b"bob");
        out.extend_from_slice(&555i64.to_le_bytes());
        put_len(&mut out, 1);
        out.extend_from_slice(&StreamId::new(3, 0).to_be_bytes());
        out
    }

    #[test]
    fn streams_of_rdb_types_15_and_19_load() {
        let mut s = Stream::new();
        for i in 1..=5u64 {
            s.append(StreamId::new(i, 0), &[b"f", b"v"], NodeLimits::default());
        }
        for t in [15u8, 19] {
            let v = restore(&legacy_body(t, &s), &EncodingLimits::default()).expect("loads");
            let Value::Stream(got) = v else { panic!() };
            assert_eq!(got.length, 5);
            assert_eq!(got.last_id, StreamId::new(5, 0));
            assert_eq!(got.first_id, StreamId::new(1, 0));
            // Type 15 knows no counters: entries added = length, the
            // group's read counter estimated (unknown: 3-0 is inside).
            assert_eq!(got.entries_added, 5);
            let g = got.group(b"grp").unwrap();
            assert_eq!(g.entries_read, if t == 15 { -1 } else { 2 });
            let n = &g.pel[&StreamId::new(3, 0)];
            assert_eq!(
                (&n.consumer[..], n.delivery_time, n.delivery_count),
                (&b"bob"[..], 777, 4)
            );
            // Before type 21, active time is the seen time.
            let c = g.consumers.values().next().unwrap();
            assert_eq!((c.seen_time, c.active_time), (555, 555));
        }
    }

    #[test]
    fn hostile_counts_in_a_node_are_refused_not_trusted() {
        use crate::encode::Listpack;
        let node = |items: &[i64]| {
            let mut out = Vec::new();
            let mut lp = Listpack::new(&mut out);
            for &v in items {
                lp.push_int(v);
            }
            lp.finish();
            out
        };
        let id = StreamId::new(1, 0);
        for items in [
            // count + deleted overflows.
            &[i64::MAX, 1, 0, 0][..],
            // An entry claiming 2^62 fields.
            &[1, 0, 0, 0, 0, 0, 0, 1 << 62, 0][..],
            // More entries than elements.
            &[1_000_000, 0, 0, 0, 2, 0, 0, 3][..],
        ] {
            let mut st = Stream::new();
            assert!(
                super::load_node(&mut st, id, &node(items)).is_err(),
                "{items:?}"
            );
        }
    }

    #[test]
    fn corrupt_stream_payloads_are_refused() {
        let s = sample();
        let payload = dump(ValueRef::Stream(&s));
        let body = verify(&payload, false).unwrap().to_vec();
        // Every truncation fails cleanly.
        for n in 1..body.len() {
            assert!(
                restore(&body[..n], &EncodingLimits::default()).is_err(),
                "{n}"
            );
        }
        // Flipped bytes never panic.
        for i in 1..body.len() {
            let mut b = body.clone();
            b[i] ^= 0x5a;
            let _ = restore(&b, &EncodingLimits::default());
        }
    }
}
