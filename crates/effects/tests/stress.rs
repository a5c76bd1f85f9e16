//! One writer publishing units of random sizes while readers on other
//! threads follow: every reader must see exactly the bytes written, in
//! order, whatever the interleaving (blocks filling mid-unit included).

use effects::Writer;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

fn byte_at(offset: u64) -> u8 {
    (offset.wrapping_mul(2654435761) >> 7) as u8
}

#[test]
fn readers_on_other_threads_see_every_byte_in_order() {
    const TOTAL: u64 = 8 << 20;
    let mut w = Writer::new(1 << 40);
    let start = w.offset();
    let done = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(Barrier::new(4));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let mut r = w.reader();
            let done = done.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let mut at = start;
                loop {
                    let finished = done.load(Ordering::Acquire);
                    while let Some(s) = r.next_slice() {
                        assert_eq!(s.offset(), at);
                        for (i, &b) in s.iter().enumerate() {
                            assert_eq!(b, byte_at(at + i as u64), "offset {}", at + i as u64);
                        }
                        at += s.len() as u64;
                    }
                    if finished && at == start + TOTAL {
                        return at;
                    }
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    barrier.wait();
    let mut seed = 12345u64;
    let mut unit = Vec::new();
    while w.offset() < start + TOTAL {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        let n = ((seed >> 33) % 40_000) + 1;
        let n = n.min(start + TOTAL - w.offset());
        unit.clear();
        let at = w.offset();
        unit.extend((0..n).map(|i| byte_at(at + i)));
        w.append(&unit);
        w.publish();
    }
    done.store(true, Ordering::Release);
    for r in readers {
        assert_eq!(r.join().unwrap(), start + TOTAL);
    }
}
