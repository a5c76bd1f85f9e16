//! Real threads through the real eventfd: the hand-off as the server runs it,
//! with the consumer going to sleep every time it finds its rings empty.
//!
//! A lost wake-up here would leave the consumer blocked in `wait(None)`
//! forever; the watchdog turns that into a failure after 60 s instead of a
//! hung test run.
#![cfg(not(loom))]

use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use ringkv_rings::{Consumer, Doorbell, Producer, channel};

const WATCHDOG: Duration = Duration::from_secs(60);

/// Small deterministic generator for batch sizes, so a failure reproduces.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// An IO thread's side: batches of 1..=40 items (more than the ring holds, so
/// back-pressure happens), one publish and one ring per batch, and now and
/// then a pause so that the consumer really runs dry and sleeps.
fn produce(mut p: Producer<u64>, bell: Arc<Doorbell>, count: u64, seed: u64) {
    let mut rng = XorShift(seed);
    let mut next = 0u64;
    while next < count {
        let batch = (1 + rng.below(40)).min(count - next);
        for _ in 0..batch {
            let mut item = next;
            while let Err(back) = p.push(item) {
                item = back;
                if p.publish() > 0 {
                    bell.ring();
                }
                thread::yield_now();
            }
            next += 1;
        }
        p.publish();
        bell.ring();
        if rng.below(20_000) == 0 {
            thread::sleep(Duration::from_millis(1));
        }
    }
}

/// The execution thread's side. Returns how many times it blocked.
fn consume(bell: &Doorbell, mut consumers: Vec<Consumer<u64>>, count: u64) -> u64 {
    let mut next = vec![0u64; consumers.len()];
    let mut sleeps = 0;
    loop {
        for (c, next) in consumers.iter_mut().zip(next.iter_mut()) {
            while let Some(v) = c.pop() {
                assert_eq!(v, *next, "out of order, lost or duplicated item");
                *next += 1;
            }
        }
        if next.iter().all(|&n| n == count) {
            return sleeps;
        }
        bell.prepare_sleep();
        if consumers.iter_mut().all(|c| c.is_empty()) {
            sleeps += 1;
            bell.wait(None);
        }
        bell.awake();
    }
}

/// Runs `producers` IO threads of `count` items each into one consumer, under
/// the watchdog. Returns (sleeps, eventfd writes).
fn run(producers: usize, capacity: usize, count: u64) -> (u64, u64) {
    let bell = Arc::new(Doorbell::new().unwrap());
    let mut consumers = Vec::new();
    let mut handles = Vec::new();
    for i in 0..producers {
        let (p, c) = channel::<u64>(capacity);
        consumers.push(c);
        let bell = Arc::clone(&bell);
        let seed = 0x9E37_79B9_7F4A_7C15 ^ (i as u64 + 1);
        handles.push(thread::spawn(move || produce(p, bell, count, seed)));
    }
    let (done_tx, done_rx) = mpsc::channel();
    {
        let bell = Arc::clone(&bell);
        thread::spawn(move || {
            let sleeps = consume(&bell, consumers, count);
            done_tx.send(sleeps).unwrap();
        });
    }
    let sleeps = done_rx
        .recv_timeout(WATCHDOG)
        .expect("consumer stuck (lost wake-up?) or panicked");
    for h in handles {
        h.join().unwrap();
    }
    (sleeps, bell.rings_written())
}

#[test]
fn million_items_through_a_64_slot_ring_with_a_sleeping_consumer() {
    let (sleeps, written) = run(1, 64, 1_000_000);
    println!("consumer slept {sleeps} times; eventfd written {written} times");
    assert!(
        sleeps > 0,
        "the consumer never slept: the test proved nothing"
    );
    // Every sleep needs a write to end it; writes without a matching sleep
    // happen only when the re-check found work after a ringer had already
    // taken the flag.
    assert!(written >= sleeps, "woke {sleeps} times on {written} writes");
}

#[test]
fn two_io_threads_ring_one_execution_thread() {
    let (sleeps, written) = run(2, 64, 500_000);
    println!("consumer slept {sleeps} times; eventfd written {written} times");
    assert!(
        sleeps > 0,
        "the consumer never slept: the test proved nothing"
    );
    assert!(written >= sleeps, "woke {sleeps} times on {written} writes");
}
