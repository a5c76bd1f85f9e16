//! One diskless full sync for several replicas: the snapshot's chunks go
//! to every replica's sink.
//!
//! The capture is paced by the slowest replica, as Valkey's parent stops
//! reading its child's pipe while any replica's socket is full: each sink
//! may hold back one chunk it had no room for, and while one does, no new
//! chunk is taken. A replica whose feed died takes chunks without a word
//! (its [`crate::persist::ChannelSink`] drops them); its feed reports why.

use crate::persist::SnapshotSink;
use rdb::Capture;

pub struct FanOutSink {
    sinks: Vec<Box<dyn SnapshotSink>>,
    /// Per sink: a chunk it had no room for yet.
    held: Vec<Option<Capture>>,
    /// Per sink: its outcome, once in.
    outcomes: Vec<Option<Result<u64, String>>>,
}

impl FanOutSink {
    pub fn new(sinks: Vec<Box<dyn SnapshotSink>>) -> FanOutSink {
        let n = sinks.len();
        FanOutSink {
            sinks,
            held: vec![None; n],
            outcomes: vec![None; n],
        }
    }

    /// Hand the held chunks over where there is room now; true once none
    /// is held.
    fn drain_held(&mut self) -> bool {
        let mut clear = true;
        for (sink, held) in self.sinks.iter_mut().zip(&mut self.held) {
            if let Some(c) = held.take()
                && let Err(c) = sink.push(c)
            {
                *held = Some(c);
                clear = false;
            }
        }
        clear
    }

    /// The sync's outcome: bytes if any replica got the whole RDB (the
    /// others' feeds say why they did not), else the first error.
    fn outcome(&self) -> Option<Result<u64, String>> {
        let mut first_err = None;
        let mut best = None;
        for o in &self.outcomes {
            match o.as_ref()? {
                Ok(n) => best = Some(best.map_or(*n, |b: u64| b.max(*n))),
                Err(e) => {
                    first_err.get_or_insert_with(|| e.clone());
                }
            }
        }
        Some(best.map_or_else(|| Err(first_err.unwrap_or_default()), Ok))
    }
}

impl SnapshotSink for FanOutSink {
    fn push(&mut self, chunk: Capture) -> Result<(), Capture> {
        if !self.drain_held() {
            return Err(chunk);
        }
        let last = self.sinks.len().saturating_sub(1);
        let mut chunk = Some(chunk);
        for (i, (sink, held)) in self.sinks.iter_mut().zip(&mut self.held).enumerate() {
            let c = if i == last {
                chunk.take().expect("one chunk per push")
            } else {
                chunk.clone().expect("one chunk per push")
            };
            if let Err(c) = sink.push(c) {
                *held = Some(c);
            }
        }
        Ok(())
    }

    fn push_wait(&mut self, chunk: Capture) {
        for (sink, held) in self.sinks.iter_mut().zip(&mut self.held) {
            if let Some(c) = held.take() {
                sink.push_wait(c);
            }
            sink.push_wait(chunk.clone());
        }
    }

    fn finish(&mut self) {
        for (sink, held) in self.sinks.iter_mut().zip(&mut self.held) {
            if let Some(c) = held.take() {
                sink.push_wait(c);
            }
            sink.finish();
        }
    }

    fn poll(&mut self) -> Option<Result<u64, String>> {
        for (sink, o) in self.sinks.iter_mut().zip(&mut self.outcomes) {
            if o.is_none() {
                *o = sink.poll();
            }
        }
        self.outcome()
    }

    fn wait(&mut self) -> Result<u64, String> {
        self.finish();
        for (sink, o) in self.sinks.iter_mut().zip(&mut self.outcomes) {
            if o.is_none() {
                *o = Some(sink.wait());
            }
        }
        self.outcome().expect("every sink has reported")
    }

    fn abort(&mut self) {
        for sink in &mut self.sinks {
            sink.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A sink with room for `room` chunks until `drain` is called;
    /// records the bytes of what it took.
    #[derive(Clone, Default)]
    struct Probe {
        got: Arc<Mutex<Vec<Vec<u8>>>>,
        room: Arc<Mutex<usize>>,
        finished: Arc<Mutex<bool>>,
        outcome: Option<Result<u64, String>>,
    }

    impl Probe {
        fn with_room(room: usize) -> Probe {
            let p = Probe::default();
            *p.room.lock().unwrap() = room;
            p
        }
        fn lines(&self) -> Vec<Vec<u8>> {
            self.got.lock().unwrap().clone()
        }
        fn make_room(&self, n: usize) {
            *self.room.lock().unwrap() += n;
        }
    }

    impl SnapshotSink for Probe {
        fn push(&mut self, chunk: Capture) -> Result<(), Capture> {
            let mut room = self.room.lock().unwrap();
            if *room == 0 {
                return Err(chunk);
            }
            *room -= 1;
            self.got
                .lock()
                .unwrap()
                .push(format!("{chunk:?}").into_bytes());
            Ok(())
        }
        fn push_wait(&mut self, chunk: Capture) {
            self.got
                .lock()
                .unwrap()
                .push(format!("{chunk:?}").into_bytes());
        }
        fn finish(&mut self) {
            *self.finished.lock().unwrap() = true;
        }
        fn poll(&mut self) -> Option<Result<u64, String>> {
            let done = *self.finished.lock().unwrap();
            done.then(|| {
                self.outcome
                    .clone()
                    .unwrap_or(Ok(self.lines().concat().len() as u64))
            })
        }
        fn wait(&mut self) -> Result<u64, String> {
            self.finish();
            self.poll().unwrap()
        }
        fn abort(&mut self) {}
    }

    fn chunk(text: &[u8]) -> Capture {
        let mut c = Capture::new();
        c.raw(text);
        c
    }

    fn fan(probes: &[Probe]) -> FanOutSink {
        FanOutSink::new(
            probes
                .iter()
                .map(|p| Box::new(p.clone()) as Box<dyn SnapshotSink>)
                .collect(),
        )
    }

    #[test]
    fn every_replica_gets_every_chunk_in_order() {
        let probes = [
            Probe::with_room(10),
            Probe::with_room(10),
            Probe::with_room(10),
        ];
        let mut sink = fan(&probes);
        for t in [&b"one"[..], b"two", b"three"] {
            assert!(sink.push(chunk(t)).is_ok());
        }
        sink.finish();
        let want = probes[0].lines();
        assert_eq!(want.len(), 3);
        for p in &probes {
            assert_eq!(p.lines(), want);
        }
        assert_eq!(sink.poll(), Some(Ok(want.concat().len() as u64)));
    }

    #[test]
    fn the_slowest_replica_holds_the_capture_back_and_loses_nothing() {
        let fast = Probe::with_room(10);
        let slow = Probe::with_room(1);
        let mut sink = fan(&[fast.clone(), slow.clone()]);
        assert!(sink.push(chunk(b"a")).is_ok());
        // The slow one has no room: it holds "b", the fast one took it.
        assert!(sink.push(chunk(b"b")).is_ok());
        assert_eq!(fast.lines().len(), 2);
        assert_eq!(slow.lines().len(), 1);
        // While it holds one, nothing new is taken by anyone.
        let back = sink.push(chunk(b"c")).expect_err("held back");
        assert_eq!(fast.lines().len(), 2);
        slow.make_room(1);
        // "b" goes; "c" is taken, and held for the slow one.
        assert!(sink.push(back).is_ok());
        assert_eq!((fast.lines().len(), slow.lines().len()), (3, 2));
        assert!(sink.push(chunk(b"d")).is_err(), "\"c\" is still held");
        slow.make_room(5);
        assert!(sink.push(chunk(b"d")).is_ok());
        sink.finish();
        assert_eq!(fast.lines(), slow.lines());
        assert_eq!(fast.lines().len(), 4);
    }

    #[test]
    fn the_outcome_is_known_once_every_replica_reported_and_one_success_counts() {
        let ok = Probe::with_room(10);
        let mut failed = Probe::with_room(10);
        failed.outcome = Some(Err("the replica went away".into()));
        let mut sink = fan(&[ok.clone(), failed.clone()]);
        assert!(sink.push(chunk(b"x")).is_ok());
        assert_eq!(sink.poll(), None, "nobody is finished");
        sink.finish();
        assert!(matches!(sink.poll(), Some(Ok(n)) if n > 0));

        let mut both_failed = fan(&[failed.clone(), failed]);
        assert_eq!(both_failed.wait(), Err("the replica went away".into()));
    }
}
