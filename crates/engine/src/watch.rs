//! WATCH: optimistic locking for MULTI/EXEC.
//!
//! ```text
//!   WATCH k      ──► by_key[(db,k)] += client; clients[client].keys += k
//!   any write    ──► ctx.touched(db,k) ──► every watcher of (db,k) is dirty
//!   expiry       ──► store's expired log ──► touch_expired (see below)
//!   FLUSH/SWAPDB ──► touch_db: watched keys that existed (or appear)
//!   EXEC         ──► dirty, or a watched key expired since WATCH: null reply
//! ```
//!
//! A client whose transaction a write dooms stops watching its keys
//! (Valkey's touchWatchedKey unwatches them all; a flush only marks it),
//! and later WATCHes are no-ops: the mark stays until EXEC, DISCARD,
//! UNWATCH or RESET.
//!
//! As in Valkey 8, a key that was already expired (but not yet deleted)
//! when it was watched is remembered as such: its deletion by expiry is
//! not a change, while a key that expires after WATCH aborts the EXEC.
//! Dirtiness lives here, keyed by client id, not in the Session, because
//! the writer may run while the watcher's session is taken out of the map.

use crate::ClientId;
use crate::server::Server;
use crate::session::Session;
use std::collections::HashMap;
use store::Keyspace;

struct WatchedKey {
    db: usize,
    key: Box<[u8]>,
    /// The key was logically expired when WATCH ran.
    expired: bool,
}

#[derive(Default)]
struct ClientWatch {
    keys: Vec<WatchedKey>,
    dirty: bool,
}

/// A client's WATCH as CLIENT LIST shows it: flag `d`, `watch=`.
#[derive(Clone, Copy, Default, Debug)]
pub struct WatchState {
    /// A watched key changed: EXEC will fail.
    pub dirty: bool,
    /// Keys still watched.
    pub keys: usize,
}

#[derive(Default)]
pub struct Watches {
    /// Watchers per key, with the database each watches it in (keyed by
    /// the key alone so a write can look it up without allocating).
    by_key: HashMap<Box<[u8]>, Vec<(usize, ClientId)>>,
    clients: HashMap<u64, ClientWatch>,
}

impl Watches {
    /// Distinct watched keys (INFO total_watched_keys).
    pub fn keys(&self) -> usize {
        self.by_key
            .values()
            .map(|v| {
                let mut dbs: Vec<usize> = v.iter().map(|&(d, _)| d).collect();
                dbs.sort_unstable();
                dbs.dedup();
                dbs.len()
            })
            .sum()
    }
    /// Clients watching at least one key (INFO watching_clients).
    pub fn clients(&self) -> usize {
        self.clients.values().filter(|c| !c.keys.is_empty()).count()
    }
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// A write to `(db, key)`: its watchers' transactions will fail.
    #[inline]
    pub fn touch(&mut self, db: usize, key: &[u8]) {
        if self.by_key.is_empty() {
            return;
        }
        let Some(ids) = self.by_key.get(key) else {
            return;
        };
        let doomed: Vec<ClientId> = ids
            .iter()
            .filter(|(d, _)| *d == db)
            .map(|&(_, id)| id)
            .collect();
        for id in doomed {
            self.doom(id);
        }
    }

    /// `id`'s transaction will fail: mark it, and stop watching its keys.
    fn doom(&mut self, id: ClientId) {
        let Some(cw) = self.clients.get_mut(&id.0) else {
            return;
        };
        cw.dirty = true;
        let keys = std::mem::take(&mut cw.keys);
        self.forget(id, keys);
    }

    /// Take `id` off the watcher lists of `keys`.
    fn forget(&mut self, id: ClientId, keys: Vec<WatchedKey>) {
        for k in keys {
            if let Some(ids) = self.by_key.get_mut(&k.key) {
                ids.retain(|&(d, c)| !(d == k.db && c == id));
                if ids.is_empty() {
                    self.by_key.remove(&k.key);
                }
            }
        }
    }

    /// Expiry deleted `(db, key)`. Not a change for a watcher that saw it
    /// already expired (its flag is cleared: the key is now simply absent).
    pub fn touch_expired(&mut self, db: usize, key: &[u8]) {
        if self.by_key.is_empty() {
            return;
        }
        let Some(ids) = self.by_key.get(key) else {
            return;
        };
        let mut doomed = Vec::new();
        for &(_, id) in ids.iter().filter(|(d, _)| *d == db) {
            let Some(cw) = self.clients.get_mut(&id.0) else {
                continue;
            };
            match cw.keys.iter_mut().find(|w| w.db == db && *w.key == *key) {
                Some(w) if w.expired => w.expired = false,
                _ => doomed.push(id),
            }
        }
        for id in doomed {
            self.doom(id);
        }
    }

    pub fn is_dirty(&self, id: ClientId) -> bool {
        self.clients.get(&id.0).is_some_and(|c| c.dirty)
    }
    /// What CLIENT LIST shows of `id`'s WATCH.
    pub fn state(&self, id: ClientId) -> WatchState {
        self.clients
            .get(&id.0)
            .map_or(WatchState::default(), |c| WatchState {
                dirty: c.dirty,
                keys: c.keys.len(),
            })
    }
    /// [`Watches::state`] of every client that watches or is marked.
    pub fn states(&self) -> HashMap<u64, WatchState> {
        self.clients
            .keys()
            .map(|&id| (id, self.state(ClientId(id))))
            .collect()
    }
}

/// WATCH one key for `sess` (a key watched twice counts once).
pub fn watch(srv: &mut Server, sess: &mut Session, db: usize, key: &[u8], now_ms: i64) {
    sess.multi_state = true;
    let w = &mut srv.watches;
    let cw = w.clients.entry(sess.id.0).or_default();
    if cw.dirty || cw.keys.iter().any(|k| k.db == db && *k.key == *key) {
        return;
    }
    let expired = srv.keyspace.dbs[db]
        .peek(store::hash_key(key), key)
        .is_some_and(|e| e.is_expired(now_ms));
    cw.keys.push(WatchedKey {
        db,
        key: key.into(),
        expired,
    });
    w.by_key.entry(key.into()).or_default().push((db, sess.id));
    srv.sync_expiry_logging();
}

/// UNWATCH (also EXEC, DISCARD, RESET, disconnect).
pub fn unwatch_all(srv: &mut Server, sess: &mut Session) {
    let w = &mut srv.watches;
    let Some(cw) = w.clients.remove(&sess.id.0) else {
        return;
    };
    w.forget(sess.id, cw.keys);
    srv.sync_expiry_logging();
}

/// EXEC's check (Valkey's `isWatchedKeyExpired`): a key that was live at
/// WATCH time and has expired since, even if nobody deleted it yet.
pub fn any_expired_since_watch(srv: &Server, id: ClientId, now_ms: i64) -> bool {
    let Some(cw) = srv.watches.clients.get(&id.0) else {
        return false;
    };
    cw.keys.iter().any(|w| {
        !w.expired
            && srv.keyspace.dbs[w.db]
                .peek(store::hash_key(&w.key), &w.key)
                .is_some_and(|e| e.is_expired(now_ms))
    })
}

/// Valkey's `touchAllWatchedKeysInDb`: database `emptied` is being
/// flushed, or (SWAPDB) replaced by `replaced_with`. Call before the
/// change. A watched key is touched if it exists in `emptied` or in
/// `replaced_with`, with Valkey's care for keys that were and stay expired.
pub fn touch_db(srv: &mut Server, emptied: usize, replaced_with: Option<usize>, now_ms: i64) {
    let Server {
        watches, keyspace, ..
    } = srv;
    if watches.by_key.is_empty() {
        return;
    }
    let ks: &Keyspace = keyspace;
    let find = |db: usize, key: &[u8]| ks.dbs[db].peek(store::hash_key(key), key);
    for (key, ids) in &watches.by_key {
        if !ids.iter().any(|&(d, _)| d == emptied) {
            continue;
        }
        let in_emptied = find(emptied, key).is_some();
        let in_new = replaced_with.and_then(|r| find(r, key));
        if !in_emptied && in_new.is_none() {
            continue;
        }
        for &(_, id) in ids.iter().filter(|(d, _)| *d == emptied) {
            let Some(cw) = watches.clients.get_mut(&id.0) else {
                continue;
            };
            let Some(w) = cw
                .keys
                .iter_mut()
                .find(|w| w.db == emptied && w.key == *key)
            else {
                continue;
            };
            if w.expired {
                match in_new {
                    // The expired key is gone: no logical change.
                    None => {
                        w.expired = false;
                        continue;
                    }
                    // Still expired after the swap.
                    Some(e) if e.is_expired(now_ms) => continue,
                    Some(_) => {}
                }
            } else if !in_emptied && in_new.is_some_and(|e| e.is_expired(now_ms)) {
                // A missing key replaced by an expired one.
                w.expired = true;
                continue;
            }
            // Marked only: a flush leaves the keys watched, as in Valkey.
            cw.dirty = true;
        }
    }
}
