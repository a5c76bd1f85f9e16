//! Freeing large values off the execution thread (Valkey's lazyfree).
//!
//! ```text
//!  UNLINK big ─► keyspace entry removed now ─► Value sent ─► "lazyfree" thread drops it
//!  FLUSHALL ASYNC ─► each database's contents swapped for an empty one ─► sent
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
use store::{Db, Entry, ValueRef};

/// Values with a larger free effort than this go to the lazyfree thread.
pub const LAZYFREE_THRESHOLD: usize = 64;

/// Anything to drop over there, and how many objects it counts for in
/// INFO (a database: its keys, as Valkey counts an async flush).
type Garbage = (Box<dyn Send>, u64);

/// The handle to the lazyfree thread and its counters.
#[derive(Default)]
pub struct LazyFree {
    tx: Option<mpsc::Sender<Garbage>>,
    counters: Arc<Counters>,
}

#[derive(Default)]
struct Counters {
    /// Sent and not yet dropped (INFO `lazyfree_pending_objects`).
    pending: AtomicU64,
    /// Dropped by the thread since start-up (INFO `lazyfreed_objects`).
    freed: AtomicU64,
}

/// How many allocations dropping `v` walks, roughly: 1 for strings and
/// compact encodings, the element count for the large ones but lists,
/// whose quicklist frees one buffer per node (Valkey counts its nodes).
pub fn free_effort(v: ValueRef<'_>) -> usize {
    let (len, encoding) = match v {
        ValueRef::List(l) => return l.nodes().max(1),
        ValueRef::Hash(h) => (h.len(), h.encoding()),
        ValueRef::Set(s) => (s.len(), s.encoding()),
        ValueRef::ZSet(z) => (z.len(), z.encoding()),
        ValueRef::Str(_) => return 1,
        ValueRef::Stream(s) => return s.free_effort().max(1),
    };
    match encoding {
        "listpack" | "intset" => 1,
        _ => len,
    }
}

impl LazyFree {
    /// Drop a removed key's entry, here or (the whole node, value and
    /// all) on the lazyfree thread by its effort.
    pub fn free(&mut self, e: Entry) {
        if free_effort(e.value()) > LAZYFREE_THRESHOLD {
            self.send(Box::new(e), 1);
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

    pub fn freed(&self) -> u64 {
        self.counters.freed.load(Ordering::Relaxed)
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
