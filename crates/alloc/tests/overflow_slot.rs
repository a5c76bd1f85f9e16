//! More threads than counter slots, in a process of their own: once every
//! slot is claimed, later threads share the overflow slot, which the
//! per-thread tests of the library must not land in.

use ringkv_alloc::{CountingJemalloc, SLOTS, used_memory};

#[global_allocator]
static GLOBAL: CountingJemalloc = CountingJemalloc;

#[test]
fn threads_beyond_the_slots_still_count() {
    let held: Vec<Vec<u8>> = (0..SLOTS + 8)
        .map(|_| std::thread::spawn(|| vec![1u8; 1 << 20]).join().unwrap())
        .collect();
    assert!(
        used_memory() >= ((SLOTS + 8) << 20) as u64,
        "{}",
        used_memory()
    );
    let before = used_memory();
    drop(held);
    assert!(before - used_memory() >= ((SLOTS + 8) << 20) as u64);
}
