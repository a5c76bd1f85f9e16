//! The two concurrency primitives of ringkv's IO-thread hand-off, and nothing
//! else.
//!
//! This crate owns:
//!
//! - [`spsc`]: a bounded single-producer single-consumer ring whose producer
//!   stages items and publishes them all with one Release store;
//! - [`doorbell`]: the sleep/wake hand-off (a flag plus an eventfd or a futex) that lets a
//!   consumer block when all its rings are empty without losing a wake-up.
//!
//! It must not know about sockets, connections, RESP, commands or the engine:
//! what travels through a ring is the caller's type, and who sleeps where is
//! the caller's loop. Keeping it this small is what makes it checkable: every
//! atomic of the hand-off lives here and is model-checked with loom
//! (`crates/rings/loom.sh`; see `tests/loom.rs`).
//!
//! # Where it sits
//!
//! ```text
//!                     request ring 0
//!  +---------------+ ===============> +--------------------+
//!  | IO thread 0   |                  |                    |
//!  |  (bell io0)   | <=============== |                    |
//!  +---------------+   reply ring 0   |                    |
//!                                     |  execution thread  |
//!  +---------------+  request ring 1  |    (bell exec)     |
//!  | IO thread 1   | ===============> |                    |
//!  |  (bell io1)   | <=============== |                    |
//!  +---------------+   reply ring 1   +--------------------+
//!
//!  IO thread i:  push.. publish(request ring i);  bell_exec.ring()
//!  exec thread:  push.. publish(reply ring i);    bell_io_i.ring()
//! ```
//!
//! One ring per direction per IO thread, so every ring has exactly one
//! producer and one consumer. Each consumer thread has one doorbell: the
//! execution thread's has one ringer per IO thread, an IO thread's has only the
//! execution thread. An IO thread sleeps inside its event loop (epoll_wait or
//! io_uring_enter) with its doorbell's [`fd`](Doorbell::fd) registered for
//! readability; the execution thread sleeps in [`Doorbell::wait`].
//!
//! # The wake-up protocol
//!
//! A producer publishes its batch, then rings the consumer's doorbell. Ringing
//! costs a fence and a load while the consumer is awake; it wakes the consumer
//! (an eventfd write, or a futex wake) only if the consumer has announced that
//! it is going to sleep, and of several ringers only the first one that sees
//! the announcement does.
//!
//! A consumer that finds all its rings empty first announces that it is going
//! to sleep ([`Doorbell::prepare_sleep`]), then checks all its rings once more.
//! If the re-check finds anything it calls [`Doorbell::awake`] and works;
//! otherwise it blocks on the eventfd and calls `awake` when it wakes. Because
//! the announcement is ordered before the re-check, and each producer's publish
//! before its look at the announcement, a producer either publishes in time for
//! the re-check to see it or sees the announcement and writes the eventfd: the
//! consumer cannot go to sleep on a published item. The full argument is in
//! [`doorbell`].
//!
//! # Why our own ring and not `rtrb`
//!
//! `rtrb` is the same Lamport design (cached head and tail, power-of-two
//! slots) and would do the job at run time. But the property that matters is
//! the hand-off as a whole, ring plus doorbell, and loom can only explore the
//! interleavings of atomics it can see. rtrb's atomics are std's, invisible to
//! loom, so its half of the protocol would be taken on trust. Ours go through
//! one small `sync` module that swaps in loom's types under `cfg(loom)`. Being
//! ours also gives the batch publish (rtrb makes each item visible as it is
//! written unless one goes through its chunk API) and the exact drop semantics
//! the server wants.

pub mod doorbell;
pub mod spsc;
mod sync;

pub use doorbell::Doorbell;
pub use spsc::{Consumer, Producer, channel};
