//! Bounded single-producer single-consumer ring that moves batches.
//!
//! Lamport's ring: `head` is written only by the consumer, `tail` only by the
//! producer, and each side keeps a private copy of the other's index so that
//! it touches the other side's cache line only when its copy says "full" (for
//! the producer) or "empty" (for the consumer). Indices are free-running
//! `usize` counters; a slot is `index & mask`, and `tail - head` (wrapping) is
//! the number of published items.
//!
//! The producer writes items into slots beyond `tail` ("staging") and moves
//! `tail` over all of them with one Release store (`publish`). An IO thread
//! therefore hands a whole event-loop iteration to the execution thread with a
//! single atomic store, and the execution thread learns about all of it with
//! a single Acquire load.

use std::fmt;
use std::mem::MaybeUninit;
use std::ops::Deref;

use crate::sync::{Arc, AtomicBool, AtomicUsize, Ordering, UnsafeCell};

/// Keeps `head` and `tail` on different cache lines: otherwise every publish
/// would invalidate the line the consumer reads `head` from, and every pop the
/// line the producer stores `tail` into.
#[repr(align(64))]
struct CachePadded<T>(T);

impl<T> Deref for CachePadded<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

struct Ring<T> {
    /// Next index the consumer will read. Stored (Release) only by the
    /// consumer, after it has moved the item out, so that a producer which
    /// loads it (Acquire) never overwrites a slot that is still being read.
    head: CachePadded<AtomicUsize>,
    /// One past the last published index. Stored (Release) only by the
    /// producer, after the items are written, so that a consumer which loads
    /// it (Acquire) sees initialised slots.
    tail: CachePadded<AtomicUsize>,
    /// Read-mostly from here on; these share a line and are written at most
    /// once each (the `*_alive` flags, on drop).
    producer_alive: AtomicBool,
    consumer_alive: AtomicBool,
    mask: usize,
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
}

// SAFETY: the ring is shared by exactly one Producer and one Consumer. A slot is
// accessed by the producer only while its index is in [tail, head + capacity)
// and by the consumer only while it is in [head, tail); an index moves from one
// range to the other only through a Release store of `tail` or `head` that the
// other side Acquire-loads before touching the slot. So no slot is ever
// accessed by both threads without a happens-before edge between them. Items
// cross threads by value, hence `T: Send`; `&T` is never shared, so `T: Sync`
// is not needed.
unsafe impl<T: Send> Sync for Ring<T> {}

impl<T> Ring<T> {
    #[inline]
    fn slot(&self, index: usize) -> &UnsafeCell<MaybeUninit<T>> {
        &self.slots[index & self.mask]
    }

    #[inline]
    fn capacity(&self) -> usize {
        self.mask + 1
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // Both sides are gone (this is the last Arc), and dropping the Arcs
        // ordered their last index stores before us. Staged-but-unpublished
        // items were already dropped by the producer, so [head, tail) is
        // exactly what is still initialised.
        let head = self.head.load(Ordering::Acquire);
        let tail = self.tail.load(Ordering::Acquire);
        let mut index = head;
        while index != tail {
            self.slot(index).with_mut(|slot| {
                // SAFETY: indices in [head, tail) were published and not yet
                // popped, so the slot holds an initialised T that nobody else
                // can reach any more; it is dropped exactly once here.
                unsafe { (*slot).assume_init_drop() }
            });
            index = index.wrapping_add(1);
        }
    }
}

/// Creates a ring holding at least `capacity` items (rounded up to a power of
/// two; 0 is rounded up to 1).
///
/// # Panics
///
/// If the rounded capacity does not fit in a `usize`.
pub fn channel<T: Send>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    let capacity = capacity
        .checked_next_power_of_two()
        .expect("ring capacity overflows usize");
    let slots = (0..capacity)
        .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
        .collect::<Box<[_]>>();
    let ring = Arc::new(Ring {
        head: CachePadded(AtomicUsize::new(0)),
        tail: CachePadded(AtomicUsize::new(0)),
        producer_alive: AtomicBool::new(true),
        consumer_alive: AtomicBool::new(true),
        mask: capacity - 1,
        slots,
    });
    let producer = Producer {
        ring: Arc::clone(&ring),
        staged: 0,
        published: 0,
        head_cache: 0,
    };
    let consumer = Consumer {
        ring,
        head: 0,
        tail_cache: 0,
    };
    (producer, consumer)
}

/// The writing side of a ring. Items are first staged with [`push`](Self::push)
/// and become visible to the consumer only at [`publish`](Self::publish).
pub struct Producer<T> {
    ring: Arc<Ring<T>>,
    /// One past the last staged index (private: the consumer never looks past
    /// the published tail).
    staged: usize,
    /// The value last stored to `ring.tail`.
    published: usize,
    /// The consumer's `head` as last loaded. It only lags the real one, which
    /// can only make the ring look fuller than it is, never emptier.
    head_cache: usize,
}

impl<T: Send> Producer<T> {
    /// Stages one item (not yet visible to the consumer). `Err(item)` when the
    /// ring is full counting staged items: the caller keeps the item
    /// (back-pressure).
    pub fn push(&mut self, item: T) -> Result<(), T> {
        let capacity = self.ring.capacity();
        if self.staged.wrapping_sub(self.head_cache) == capacity {
            // Full as far as we know; only now is the consumer's line worth a
            // (possibly contended) read.
            self.head_cache = self.ring.head.load(Ordering::Acquire);
            if self.staged.wrapping_sub(self.head_cache) == capacity {
                return Err(item);
            }
        }
        self.ring.slot(self.staged).with_mut(|slot| {
            // SAFETY: `staged` is in [tail, head + capacity): the consumer has
            // finished with this slot (its Release store of `head` past it was
            // Acquire-loaded into `head_cache`) and will not read it before our
            // Release store of `tail` covers it. The slot holds no live T (it was
            // moved out or never written), so overwriting leaks nothing.
            unsafe { (*slot).write(item) };
        });
        self.staged = self.staged.wrapping_add(1);
        Ok(())
    }

    /// Makes every staged item visible (one Release store). Returns how many
    /// were published.
    pub fn publish(&mut self) -> usize {
        let count = self.staged.wrapping_sub(self.published);
        if count != 0 {
            self.ring.tail.store(self.staged, Ordering::Release);
            self.published = self.staged;
        }
        count
    }

    /// Slots free for staging right now. It may under-count (the consumer can
    /// pop more at any moment) but never over-counts, so that many pushes in a
    /// row are guaranteed to succeed.
    pub fn free_slots(&mut self) -> usize {
        // An explicit question deserves a fresh answer: callers use it to size
        // a batch, and a stale cache would make them stop early for nothing.
        self.head_cache = self.ring.head.load(Ordering::Acquire);
        self.ring.capacity() - self.staged.wrapping_sub(self.head_cache)
    }

    /// How many items the ring holds at most.
    pub fn capacity(&self) -> usize {
        self.ring.capacity()
    }

    /// The consumer was dropped: nothing pushed from now on will be read.
    pub fn is_abandoned(&self) -> bool {
        !self.ring.consumer_alive.load(Ordering::Acquire)
    }
}

impl<T> Drop for Producer<T> {
    fn drop(&mut self) {
        // Publishing is the commit point: items staged but never published are
        // not delivered. They are still ours alone (the consumer never reads
        // past `tail`), so they are dropped right here even if the consumer
        // lives on.
        let mut index = self.published;
        while index != self.staged {
            self.ring.slot(index).with_mut(|slot| {
                // SAFETY: indices in [published, staged) were written by push and
                // are invisible to the consumer, so this thread owns them and
                // drops each exactly once; the Ring's own drop only covers
                // [head, tail), which ends at `published`.
                unsafe { (*slot).assume_init_drop() }
            });
            index = index.wrapping_add(1);
        }
        self.ring.producer_alive.store(false, Ordering::Release);
    }
}

impl<T> fmt::Debug for Producer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("capacity", &self.ring.capacity())
            .field("staged", &self.staged.wrapping_sub(self.published))
            .field("published_tail", &self.published)
            .finish()
    }
}

/// The reading side of a ring.
pub struct Consumer<T> {
    ring: Arc<Ring<T>>,
    /// Next index to read; mirrored into `ring.head` after every pop.
    head: usize,
    /// The producer's `tail` as last loaded. It only lags the real one, which
    /// can only make the ring look emptier than it is.
    tail_cache: usize,
}

impl<T: Send> Consumer<T> {
    /// Next published item, if any.
    pub fn pop(&mut self) -> Option<T> {
        if self.head == self.tail_cache {
            // One Acquire load picks up everything published since the last
            // time, so a whole batch is drained without touching `tail` again.
            self.tail_cache = self.ring.tail.load(Ordering::Acquire);
            if self.head == self.tail_cache {
                return None;
            }
        }
        let item = self.ring.slot(self.head).with(|slot| {
            // SAFETY: `head` is in [head, tail) as of an Acquire load of `tail`,
            // so the producer's write of this slot happened before this read and
            // it will not write the slot again until our Release store of `head`
            // below moves past it. The value is moved out exactly once: `head`
            // advances right after, so neither we nor Ring::drop read it again.
            unsafe { (*slot).assume_init_read() }
        });
        self.head = self.head.wrapping_add(1);
        self.ring.head.store(self.head, Ordering::Release);
        Some(item)
    }

    /// Nothing published is waiting. When the cached tail says "empty" this is
    /// an Acquire load of the producer's tail, which is what a sleeper's
    /// re-check after [`Doorbell::prepare_sleep`](crate::Doorbell::prepare_sleep)
    /// relies on.
    pub fn is_empty(&mut self) -> bool {
        if self.head != self.tail_cache {
            return false;
        }
        self.tail_cache = self.ring.tail.load(Ordering::Acquire);
        self.head == self.tail_cache
    }

    /// How many items the ring holds at most.
    pub fn capacity(&self) -> usize {
        self.ring.capacity()
    }

    /// The producer was dropped: once the ring is drained nothing more will come.
    pub fn is_abandoned(&self) -> bool {
        !self.ring.producer_alive.load(Ordering::Acquire)
    }
}

impl<T> Drop for Consumer<T> {
    fn drop(&mut self) {
        // Items still published are left for Ring::drop, which runs once the
        // producer is gone too.
        self.ring.consumer_alive.store(false, Ordering::Release);
    }
}

impl<T> fmt::Debug for Consumer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("capacity", &self.ring.capacity())
            .field("head", &self.head)
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize as StdAtomicUsize;

    /// Counts its drops into a shared counter, to prove no item is leaked or
    /// dropped twice.
    #[derive(Debug)]
    struct Counted<'a>(u32, &'a StdAtomicUsize);

    impl Drop for Counted<'_> {
        fn drop(&mut self) {
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn drops(counter: &StdAtomicUsize) -> usize {
        counter.load(std::sync::atomic::Ordering::Relaxed)
    }

    #[test]
    fn capacity_rounds_up_to_a_power_of_two() {
        for (asked, got) in [(0, 1), (1, 1), (2, 2), (3, 4), (64, 64), (65, 128)] {
            let (p, c) = channel::<u8>(asked);
            assert_eq!(p.capacity(), got, "asked for {asked}");
            assert_eq!(c.capacity(), got, "asked for {asked}");
        }
    }

    #[test]
    fn fifo_across_many_wrap_arounds() {
        let (mut p, mut c) = channel::<u64>(4);
        let mut next_in = 0u64;
        let mut next_out = 0u64;
        // Batch sizes 1..=4 in a cycle so the ring wraps at every offset.
        for round in 0..20_000usize {
            let batch = round % 4 + 1;
            for _ in 0..batch {
                p.push(next_in).unwrap();
                next_in += 1;
            }
            assert_eq!(p.publish(), batch);
            // Drain only part of it sometimes, so head and tail drift apart.
            let take = if round % 3 == 0 {
                batch / 2
            } else {
                usize::MAX
            };
            let mut taken = 0;
            while taken < take {
                match c.pop() {
                    Some(v) => {
                        assert_eq!(v, next_out);
                        next_out += 1;
                        taken += 1;
                    }
                    None => break,
                }
            }
            // Whatever was left must still fit the next batch eventually.
            while p.free_slots() < 4 {
                assert_eq!(c.pop(), Some(next_out));
                next_out += 1;
            }
        }
        while let Some(v) = c.pop() {
            assert_eq!(v, next_out);
            next_out += 1;
        }
        assert_eq!(next_out, next_in);
        assert!(next_in > 40_000, "the ring wrapped many times");
    }

    #[test]
    fn staged_items_are_invisible_until_publish() {
        let (mut p, mut c) = channel::<u32>(8);
        for i in 0..3 {
            p.push(i).unwrap();
        }
        assert!(c.is_empty());
        assert_eq!(c.pop(), None);
        assert_eq!(p.publish(), 3);
        assert_eq!(p.publish(), 0, "nothing new staged");
        assert!(!c.is_empty());
        // A second batch staged while the first is being drained stays hidden.
        assert_eq!(c.pop(), Some(0));
        p.push(3).unwrap();
        assert_eq!(c.pop(), Some(1));
        assert_eq!(c.pop(), Some(2));
        assert_eq!(c.pop(), None);
        assert!(c.is_empty());
        assert_eq!(p.publish(), 1);
        assert_eq!(c.pop(), Some(3));
        assert!(c.is_empty());
    }

    #[test]
    fn push_counts_staged_items_and_hands_back_the_item_when_full() {
        let (mut p, mut c) = channel::<String>(2);
        assert_eq!(p.free_slots(), 2);
        p.push("a".into()).unwrap();
        p.push("b".into()).unwrap();
        assert_eq!(p.free_slots(), 0);
        // Full with nothing published yet: the staged items count.
        assert_eq!(p.push("c".into()), Err("c".to_string()));
        assert_eq!(p.publish(), 2);
        assert_eq!(p.push("c".into()), Err("c".to_string()));
        assert_eq!(c.pop().as_deref(), Some("a"));
        assert_eq!(p.free_slots(), 1);
        p.push("c".into()).unwrap();
        assert_eq!(p.free_slots(), 0);
        p.publish();
        assert_eq!(c.pop().as_deref(), Some("b"));
        assert_eq!(c.pop().as_deref(), Some("c"));
        assert_eq!(c.pop(), None);
        assert_eq!(p.free_slots(), 2);
    }

    #[test]
    fn zero_sized_items_are_counted() {
        let (mut p, mut c) = channel::<()>(2);
        p.push(()).unwrap();
        p.push(()).unwrap();
        assert_eq!(p.push(()), Err(()));
        p.publish();
        assert_eq!(c.pop(), Some(()));
        assert_eq!(c.pop(), Some(()));
        assert_eq!(c.pop(), None);
    }

    #[test]
    fn abandonment_is_seen_by_the_other_side() {
        let (p, c) = channel::<u8>(2);
        assert!(!p.is_abandoned());
        assert!(!c.is_abandoned());
        drop(c);
        assert!(p.is_abandoned());

        let (p, c) = channel::<u8>(2);
        drop(p);
        assert!(c.is_abandoned());
    }

    #[test]
    fn every_item_is_dropped_exactly_once_producer_first() {
        let counter = StdAtomicUsize::new(0);
        {
            let (mut p, mut c) = channel(4);
            for i in 0..4 {
                p.push(Counted(i, &counter)).unwrap();
            }
            p.publish();
            let popped = c.pop().unwrap();
            assert_eq!(popped.0, 0);
            drop(popped);
            assert_eq!(drops(&counter), 1);
            // Two staged behind the published ones, wrapping past the start.
            p.push(Counted(4, &counter)).unwrap();
            assert!(p.push(Counted(5, &counter)).is_err()); // dropped by the caller
            assert_eq!(drops(&counter), 2);
            drop(p); // drops the staged item 4 at once
            assert_eq!(drops(&counter), 3);
            assert_eq!(c.pop().map(|x| x.0), Some(1)); // published items still arrive
            assert_eq!(drops(&counter), 4);
            // items 2 and 3 are still in the ring
        }
        assert_eq!(drops(&counter), 6);
    }

    #[test]
    fn every_item_is_dropped_exactly_once_consumer_first() {
        let counter = StdAtomicUsize::new(0);
        {
            let (mut p, mut c) = channel(8);
            for i in 0..5 {
                p.push(Counted(i, &counter)).unwrap();
            }
            p.publish();
            for i in 5..7 {
                p.push(Counted(i, &counter)).unwrap();
            }
            drop(c.pop());
            drop(c);
            assert!(p.is_abandoned());
            assert_eq!(drops(&counter), 1);
        }
        assert_eq!(drops(&counter), 7);
    }

    #[test]
    fn sides_can_move_to_other_threads() {
        fn is_send<T: Send>(_: &T) {}
        let (p, c) = channel::<Box<u8>>(2);
        is_send(&p);
        is_send(&c);
        let (mut p, mut c) = (p, c);
        std::thread::spawn(move || {
            p.push(Box::new(7)).unwrap();
            p.publish();
        })
        .join()
        .unwrap();
        assert_eq!(c.pop().as_deref(), Some(&7));
    }
}
