//! Freeing large values off the execution thread (Valkey's lazyfree).
//!
//! ```text
//!  UNLINK big ─► keyspace entry removed now ─► Value sent ─► "lazyfree" thread drops it
//!  FLUSHALL ASYNC ─► each database's contents swapped for an empty one ─► sent
//!  SET over big, big expired ─► the store keeps the entry aside ─► collected
//!      after the batch (or the timers' round) ─► sent
//! ```
//!
//! Dropping a collection of a million elements walks a million allocations;
//! on the execution thread that is a latency spike for every client. Only
//! values whose free effort is above [`LAZYFREE_THRESHOLD`] are sent (as
//! Valkey's `lazyfreeGetFreeEffort` decides): compact encodings and strings
//! are one allocation and are cheaper to drop here than to hand over.
//!
//! The thread starts on first use, so engines that never free anything
//! large (and the engine's tests) run no extra thread.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use store::{Db, Entry};

pub use store::keyspace::LAZYFREE_THRESHOLD;

/// Anything to drop over there, and how many objects it counts for in
/// INFO (a database: its keys, as Valkey counts an async flush).
type Garbage = (Box<dyn Send>, u64);

/// The handle to the lazyfree thread and its counters.
#[derive(Default)]
pub struct LazyFree {
    tx: Option<mpsc::Sender<Garbage>>,
    counters: Arc<Counters>,
    /// `freed` at the last CONFIG RESETSTAT.
    freed_at_reset: u64,
}

#[derive(Default)]
struct Counters {
    /// Sent and not yet dropped (INFO `lazyfree_pending_objects`).
    pending: AtomicU64,
    /// Dropped by the thread since start-up.
    freed: AtomicU64,
}

impl LazyFree {
    /// Drop a removed key's entry, here or (the whole node, value and
    /// all) on the lazyfree thread by its effort.
    pub fn free(&mut self, e: Entry) {
        if e.value().free_effort() > LAZYFREE_THRESHOLD {
            self.send(Box::new(e), 1);
        }
    }

    /// Free what expiry and overwrites left in `keyspace`'s databases
    /// (`lazyfree-lazy-expire`, `lazyfree-lazy-server-del`; see
    /// `store::Db::take_retired`). Called after each batch and each round
    /// of timers, so that nothing waits there long.
    pub fn collect(&mut self, keyspace: &mut store::Keyspace) {
        if !keyspace.any_retired() {
            return;
        }
        for db in keyspace.dbs.iter_mut() {
            if let Some(retired) = db.take_retired() {
                for e in retired {
                    self.free(e);
                }
            }
        }
    }

    /// Drop a whole database's former contents on the lazyfree thread
    /// (small ones here, counted all the same: Valkey sends every database
    /// it flushes asynchronously to its thread).
    pub fn free_db(&mut self, db: Db) {
        let keys = db.len() as u64;
        if db.len() > LAZYFREE_THRESHOLD {
            self.send(Box::new(db), keys);
        } else {
            drop(db);
            self.counters.freed.fetch_add(keys, Ordering::Relaxed);
        }
    }

    pub fn pending(&self) -> u64 {
        self.counters.pending.load(Ordering::Relaxed)
    }

    /// Objects dropped since start-up or CONFIG RESETSTAT (INFO
    /// `lazyfreed_objects`).
    pub fn freed(&self) -> u64 {
        self.counters.freed.load(Ordering::Relaxed) - self.freed_at_reset
    }

    pub fn reset_stats(&mut self) {
        self.freed_at_reset = self.counters.freed.load(Ordering::Relaxed);
    }

    fn send(&mut self, garbage: Box<dyn Send>, objects: u64) {
        if self.tx.is_none() {
            self.tx = self.spawn();
        }
        let Some(tx) = &self.tx else {
            // No thread could be started: free it here.
            return;
        };
        self.counters.pending.fetch_add(objects, Ordering::Relaxed);
        if let Err(mpsc::SendError(g)) = tx.send((garbage, objects)) {
            // The thread is gone (it panicked): free here.
            self.counters.pending.fetch_sub(objects, Ordering::Relaxed);
            self.tx = None;
            drop(g);
        }
    }

    fn spawn(&self) -> Option<mpsc::Sender<Garbage>> {
        let (tx, rx) = mpsc::channel::<Garbage>();
        let counters = Arc::clone(&self.counters);
        std::thread::Builder::new()
            .name("lazyfree".into())
            .spawn(move || {
                crate::affinity::pin(crate::affinity::Role::Bio);
                for (garbage, objects) in rx {
                    drop(garbage);
                    counters.pending.fetch_sub(objects, Ordering::Relaxed);
                    counters.freed.fetch_add(objects, Ordering::Relaxed);
                }
            })
            .ok()?;
        Some(tx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_small_values_are_freed_inline() {
        let mut lf = LazyFree::default();
        lf.free(Entry::keyed_str(
            b"k",
            store::StrRef::Bytes(&[b'x'; 1 << 20]),
            None,
        ));
        lf.free(Entry::keyed_str(b"k", store::StrRef::Bytes(b"short"), None));
        assert!(lf.tx.is_none(), "no thread for a string");
        assert_eq!((lf.pending(), lf.freed()), (0, 0));
    }
}
