use super::*;

fn drain(r: &mut Reader) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(s) = r.next_slice() {
        assert_eq!(s.offset(), r.offset() - s.len() as u64);
        out.extend_from_slice(&s);
    }
    out
}

#[test]
fn readers_see_only_published_bytes() {
    let mut w = Writer::new(100);
    let mut r = w.reader();
    w.append(b"*1\r\n$4\r\nPING\r\n");
    assert!(r.next_slice().is_none());
    assert_eq!(w.offset(), 114);
    assert_eq!(w.published(), 100);
    w.publish();
    assert_eq!(drain(&mut r), b"*1\r\n$4\r\nPING\r\n");
    assert_eq!(r.offset(), 114);
    assert_eq!(r.pending(), 0);
}

#[test]
fn a_unit_larger_than_blocks_spans_them_in_order() {
    let mut w = Writer::new(0);
    let mut r = w.reader();
    let big: Vec<u8> = (0..BLOCK_SIZE * 3 + 17).map(|i| (i % 251) as u8).collect();
    w.append(b"x");
    w.append(&big);
    // Full blocks are visible as they fill; the rest waits for publish.
    let early = drain(&mut r);
    assert_eq!(early.len(), BLOCK_SIZE * 3);
    w.publish();
    let mut all = early;
    all.extend(drain(&mut r));
    assert_eq!(all[0], b'x');
    assert_eq!(&all[1..], &big[..]);
    assert_eq!(w.offset(), big.len() as u64 + 1);
}

#[test]
fn small_appends_fill_blocks_exactly_and_continue_in_the_next() {
    let mut w = Writer::new(0);
    let mut r = w.reader();
    // Pieces of 1..=13 bytes: some end exactly on a block boundary (the
    // next one then starts a new block), most straddle one.
    let mut sent = Vec::new();
    let mut i = 0usize;
    while sent.len() < 3 * BLOCK_SIZE + 5 {
        let piece: Vec<u8> = (0..i % 13 + 1).map(|j| ((i + j) % 251) as u8).collect();
        w.append(&piece);
        sent.extend_from_slice(&piece);
        i += 1;
    }
    w.publish();
    assert_eq!(drain(&mut r), sent);
    assert_eq!(w.offset(), sent.len() as u64);
}

#[test]
fn discarded_bytes_are_never_seen() {
    let mut w = Writer::new(0);
    let mut r = w.reader();
    w.append(b"keep");
    w.publish();
    w.append(b"drop");
    w.discard_unpublished();
    w.append(b"!");
    w.publish();
    assert_eq!(drain(&mut r), b"keep!");
}

#[test]
fn slices_outlive_the_writer_and_later_blocks_are_freed() {
    let mut w = Writer::new(0);
    let mut r = w.reader();
    w.append(&vec![7u8; BLOCK_SIZE + 10]);
    w.publish();
    let first = r.next_slice().unwrap();
    let weak = Arc::downgrade(&first.block);
    drop(w);
    assert_eq!(first.len(), BLOCK_SIZE);
    assert!(first.iter().all(|&b| b == 7));
    assert_eq!(r.next_slice().unwrap().len(), 10);
    drop(first);
    // The reader moved to the second block: the first one is gone.
    assert!(weak.upgrade().is_none());
}

#[test]
fn a_long_unread_chain_drops_without_recursion() {
    // On a 64 KiB stack, dropping 5,000 chained blocks one frame each
    // would overflow it.
    std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(|| {
            let mut w = Writer::new(0);
            let r = w.reader();
            let chunk = vec![1u8; BLOCK_SIZE];
            for _ in 0..5_000 {
                w.append(&chunk);
            }
            w.publish();
            assert_eq!(r.pending(), 5_000 * BLOCK_SIZE as u64);
            drop(w);
            drop(r);
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn split_and_truncate_stay_inside_the_slice() {
    let mut w = Writer::new(0);
    let mut r = w.reader();
    w.append(b"abcdef");
    w.publish();
    let s = r.next_slice().unwrap();
    assert_eq!(&*s.split_from(2), b"cdef");
    assert_eq!(s.split_from(2).offset(), 2);
    assert_eq!(&*s.truncate(3), b"abc");
    assert_eq!(&*s.split_from(99), b"");
}

#[test]
fn a_copy_of_a_backlog_reader_skips_to_any_published_offset() {
    let mut w = Writer::new(100);
    let backlog = w.reader();
    // Three and a half blocks, so the target offsets cross block edges.
    let data: Vec<u8> = (0..BLOCK_SIZE * 7 / 2).map(|i| (i % 251) as u8).collect();
    w.append(&data);
    w.publish();
    for at in [
        0,
        1,
        BLOCK_SIZE - 1,
        BLOCK_SIZE,
        2 * BLOCK_SIZE + 7,
        data.len(),
    ] {
        let mut r = backlog.clone();
        assert!(r.skip_to(100 + at as u64), "offset {at}");
        assert_eq!(r.offset(), 100 + at as u64);
        assert_eq!(drain(&mut r), data[at..], "from {at}");
    }
    // Past the published end, or behind the reader: refused.
    let mut r = backlog.clone();
    assert!(!r.skip_to(100 + data.len() as u64 + 1));
    let mut r2 = backlog.clone();
    assert!(r2.skip_to(200));
    assert!(!r2.skip_to(150));
}

#[test]
fn a_slice_of_owned_bytes_reads_them_and_splits_like_a_stream_slice() {
    let bytes: Vec<u8> = (0..3 * BLOCK_SIZE).map(|i| (i % 253) as u8).collect();
    let mut owned = Vec::with_capacity(bytes.len() * 2);
    owned.extend_from_slice(&bytes);
    let s = Slice::from_vec(owned);
    assert_eq!((s.offset(), &s[..]), (0, &bytes[..]));
    let tail = s.split_from(BLOCK_SIZE);
    assert_eq!(
        (tail.offset(), &tail[..]),
        (BLOCK_SIZE as u64, &bytes[BLOCK_SIZE..])
    );
    // The bytes live as long as any slice of them.
    drop(s);
    assert_eq!(&tail.truncate(5)[..], &bytes[BLOCK_SIZE..BLOCK_SIZE + 5]);
}

#[test]
fn has_pending_says_yes_whenever_a_slice_may_come() {
    let mut w = Writer::new(0);
    let mut r = w.reader();
    assert!(!r.has_pending());
    w.append(b"abc");
    assert!(!r.has_pending(), "appended, not published");
    w.publish();
    assert!(r.has_pending());
    drain(&mut r);
    assert!(!r.has_pending());
    // Past the reader's block: a successor is enough (its bytes may be
    // published a moment later).
    let big = vec![7u8; BLOCK_SIZE];
    w.append(&big);
    assert!(
        r.has_pending(),
        "the filled block is published with its successor"
    );
    assert_eq!(drain(&mut r).len(), BLOCK_SIZE - 3);
    w.publish();
    assert!(r.has_pending());
    assert_eq!(drain(&mut r).len(), 3);
    assert!(!r.has_pending());
}
