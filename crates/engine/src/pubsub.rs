//! Pub/Sub state and message delivery, plus keyspace notifications (which
//! are PUBLISHes the server makes itself).
//!
//! ```text
//!   SUBSCRIBE ch ──► Session.subs (what the client holds, for replies,
//!                    CLIENT LIST, cleanup) + PubSub.channels[ch] (who to
//!                    deliver to, in subscription order)
//!   PUBLISH ch m ──► every subscriber of ch, then every pattern matching ch:
//!                    the publisher itself through its own reply (it is
//!                    taken out of the client map while it runs), everyone
//!                    else through Server::write_to → Engine::drain_output
//!   SET k v      ──► ctx.notify(STRING, "set", k) → __keyspace@0__:k "set",
//!                    __keyevent@0__:set "k" (if notify-keyspace-events says so)
//! ```
//!
//! Messages are RESP2 arrays or RESP3 push frames (`>`), each in the
//! receiving client's protocol. Shard channels (SSUBSCRIBE) are a separate
//! namespace with the same delivery; without cluster mode they are not
//! restricted to one slot.

use crate::ClientId;
use crate::server::Server;
use crate::session::Session;
use resp::ReplyWriter;
use std::collections::{BTreeSet, HashMap};

/// Which of the three subscription namespaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Channel,
    Pattern,
    Shard,
}

impl Kind {
    pub fn subscribe_msg(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"subscribe",
            Kind::Pattern => b"psubscribe",
            Kind::Shard => b"ssubscribe",
        }
    }
    pub fn unsubscribe_msg(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"unsubscribe",
            Kind::Pattern => b"punsubscribe",
            Kind::Shard => b"sunsubscribe",
        }
    }
}

/// A client's subscriptions. Sorted sets keep UNSUBSCRIBE-all replies
/// deterministic (Valkey's order is its dict's, i.e. unspecified).
#[derive(Default, Debug)]
pub struct ClientSubs {
    pub channels: BTreeSet<Box<[u8]>>,
    pub patterns: BTreeSet<Box<[u8]>>,
    pub shard: BTreeSet<Box<[u8]>>,
}

impl ClientSubs {
    fn set(&mut self, kind: Kind) -> &mut BTreeSet<Box<[u8]>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }
    /// The count a (un)subscribe reply carries: channels + patterns for the
    /// classic namespaces, shard channels alone for the shard one.
    pub fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Channel | Kind::Pattern => self.channels.len() + self.patterns.len(),
            Kind::Shard => self.shard.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.channels.is_empty() && self.patterns.is_empty() && self.shard.is_empty()
    }
}

/// Server-wide subscriber index.
#[derive(Default)]
pub struct PubSub {
    channels: HashMap<Box<[u8]>, Vec<ClientId>>,
    patterns: HashMap<Box<[u8]>, Vec<ClientId>>,
    shard: HashMap<Box<[u8]>, Vec<ClientId>>,
    /// Clients with at least one subscription (INFO pubsub_clients).
    pub clients: usize,
}

impl PubSub {
    fn map(&mut self, kind: Kind) -> &mut HashMap<Box<[u8]>, Vec<ClientId>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }
    fn map_ref(&self, kind: Kind) -> &HashMap<Box<[u8]>, Vec<ClientId>> {
        match kind {
            Kind::Channel => &self.channels,
            Kind::Pattern => &self.patterns,
            Kind::Shard => &self.shard,
        }
    }
    /// Channels (or patterns, shard channels) with at least one subscriber.
    pub fn len(&self, kind: Kind) -> usize {
        self.map_ref(kind).len()
    }
    /// Subscribers of one channel (PUBSUB NUMSUB / SHARDNUMSUB).
    pub fn subscribers(&self, kind: Kind, name: &[u8]) -> usize {
        self.map_ref(kind).get(name).map_or(0, Vec::len)
    }
    /// Active channels matching `pattern` (all when `None`), sorted.
    pub fn names(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<&[u8]> {
        let mut v: Vec<&[u8]> = self
            .map_ref(kind)
            .keys()
            .map(|k| &**k)
            .filter(|k| pattern.is_none_or(|p| crate::glob::matches(p, k, false)))
            .collect();
        v.sort_unstable();
        v
    }
    /// Nobody listens to anything: PUBLISH and notifications are free.
    pub fn is_idle(&self) -> bool {
        self.channels.is_empty() && self.patterns.is_empty() && self.shard.is_empty()
    }
}

/// Subscribe `sess` to `name`; false if it already was.
pub fn subscribe(srv: &mut Server, sess: &mut Session, kind: Kind, name: &[u8]) -> bool {
    let subs = sess.subs.get_or_insert_with(Default::default);
    let was_empty = subs.is_empty();
    if !subs.set(kind).insert(name.into()) {
        return false;
    }
    if was_empty {
        srv.pubsub.clients += 1;
    }
    srv.pubsub
        .map(kind)
        .entry(name.into())
        .or_default()
        .push(sess.id);
    true
}

/// Unsubscribe `sess` from `name`; false if it was not subscribed.
pub fn unsubscribe(srv: &mut Server, sess: &mut Session, kind: Kind, name: &[u8]) -> bool {
    let Some(subs) = sess.subs.as_deref_mut() else {
        return false;
    };
    if !subs.set(kind).remove(name) {
        return false;
    }
    let map = srv.pubsub.map(kind);
    if let Some(ids) = map.get_mut(name) {
        ids.retain(|&c| c != sess.id);
        if ids.is_empty() {
            map.remove(name);
        }
    }
    if subs.is_empty() {
        sess.subs = None;
        srv.pubsub.clients -= 1;
    }
    true
}

/// The client's subscriptions of one kind, in order (UNSUBSCRIBE with no
/// arguments).
pub fn held(sess: &Session, kind: Kind) -> Vec<Box<[u8]>> {
    match sess.subs.as_deref() {
        None => Vec::new(),
        Some(s) => match kind {
            Kind::Channel => s.channels.iter().cloned().collect(),
            Kind::Pattern => s.patterns.iter().cloned().collect(),
            Kind::Shard => s.shard.iter().cloned().collect(),
        },
    }
}

/// Drop every subscription without replying (RESET, disconnect).
pub fn forget(srv: &mut Server, sess: &mut Session) {
    for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
        for name in held(sess, kind) {
            unsubscribe(srv, sess, kind, &name);
        }
    }
}

/// The running client, which is out of the client map while its command
/// runs: messages for it go straight into its reply, in order.
pub struct Me<'a, 'b> {
    pub id: ClientId,
    pub reply: &'a mut ReplyWriter<'b>,
}

/// Send one frame to `id`, built by `f` in that client's protocol.
fn deliver(
    srv: &mut Server,
    me: &mut Option<Me<'_, '_>>,
    id: ClientId,
    f: impl FnOnce(&mut ReplyWriter<'_>),
) {
    match me {
        // To the client whose command runs: after that command's reply
        // (`Server::pending_pushes`). Outside a command (eviction before
        // one) at once.
        Some(m) if m.id == id && srv.pending_pushes.as_ref().is_some_and(|p| p.0 == id) => {
            let proto = m.reply.proto;
            if let Some((_, buf)) = srv.pending_pushes.as_mut() {
                f(&mut ReplyWriter::new(buf, proto));
            }
        }
        Some(m) if m.id == id => f(m.reply),
        _ => {
            srv.write_to(id, f);
        }
    }
}

/// PUBLISH (or SPUBLISH with `shard`): deliver to the channel's
/// subscribers, then (not for shard) to every matching pattern's. Returns
/// the number of deliveries, as PUBLISH replies.
pub fn publish(
    srv: &mut Server,
    mut me: Option<Me<'_, '_>>,
    shard: bool,
    channel: &[u8],
    msg: &[u8],
) -> usize {
    if srv.pubsub.is_idle() {
        return 0;
    }
    let mut n = 0;
    let kind = if shard { Kind::Shard } else { Kind::Channel };
    // Taken out while delivering: write_to needs the server mutably, and
    // delivery cannot change subscriptions.
    let map = std::mem::take(srv.pubsub.map(kind));
    if let Some(ids) = map.get(channel) {
        let tag: &[u8] = if shard { b"smessage" } else { b"message" };
        for &id in ids {
            deliver(srv, &mut me, id, |w| {
                w.push_len(3);
                w.bulk(tag);
                w.bulk(channel);
                w.bulk(msg);
            });
            n += 1;
        }
    }
    *srv.pubsub.map(kind) = map;
    if shard || srv.pubsub.patterns.is_empty() {
        return n;
    }
    let pats = std::mem::take(&mut srv.pubsub.patterns);
    for (p, ids) in &pats {
        if !crate::glob::matches(p, channel, false) {
            continue;
        }
        for &id in ids {
            deliver(srv, &mut me, id, |w| {
                w.push_len(4);
                w.bulk(b"pmessage");
                w.bulk(p);
                w.bulk(channel);
                w.bulk(msg);
            });
            n += 1;
        }
    }
    srv.pubsub.patterns = pats;
    n
}

/// Valkey's `notifyKeyspaceEvent`: `__keyspace@<db>__:<key>` gets the
/// event name, `__keyevent@<db>__:<event>` gets the key, as
/// `notify-keyspace-events` selects.
pub fn keyspace_event(
    srv: &mut Server,
    mut me: Option<Me<'_, '_>>,
    class: u32,
    event: &str,
    db: usize,
    key: &[u8],
) {
    use crate::command::notify::{KEYEVENT, KEYSPACE};
    let flags = srv.config.notify_keyspace_events;
    if flags & class == 0 || srv.pubsub.is_idle() {
        return;
    }
    if flags & KEYSPACE != 0 {
        let mut chan = format!("__keyspace@{db}__:").into_bytes();
        chan.extend_from_slice(key);
        publish(
            srv,
            me.as_mut().map(reborrow),
            false,
            &chan,
            event.as_bytes(),
        );
    }
    if flags & KEYEVENT != 0 {
        let chan = format!("__keyevent@{db}__:{event}");
        publish(srv, me, false, chan.as_bytes(), key);
    }
}

pub fn reborrow<'a, 'b>(m: &'a mut Me<'_, 'b>) -> Me<'a, 'b> {
    Me {
        id: m.id,
        reply: &mut *m.reply,
    }
}

/// Turn the keys the store expired since the last call into WATCH
/// invalidations and `expired` events, then the logged read misses into
/// `keymiss` events. Cheap when nothing listens
/// ([`Server::expiry_logging`] off, no miss logged).
pub fn drain_expired(srv: &mut Server, mut me: Option<Me<'_, '_>>) {
    if srv.keymisses.pending() {
        // Expired keys first: a read of an expired key deletes it, then misses.
        drain_expired_keys(srv, me.as_mut().map(reborrow));
        for (db, key) in std::mem::take(&mut srv.keymisses.keys) {
            let class = crate::command::notify::KEY_MISS;
            keyspace_event(srv, me.as_mut().map(reborrow), class, "keymiss", db, &key);
        }
        return;
    }
    drain_expired_keys(srv, me);
}

fn drain_expired_keys(srv: &mut Server, mut me: Option<Me<'_, '_>>) {
    if !srv.expiry_logging || !srv.keyspace.expired_logged() {
        return;
    }
    crate::effects::emit_expired(srv);
    // Cleared before the logs are taken: a key expired by what runs below
    // raises it again.
    srv.keyspace.expired_log_drained();
    for db in 0..srv.keyspace.dbs.len() {
        if !srv.keyspace.dbs[db].has_expired_log() {
            continue;
        }
        for key in srv.keyspace.dbs[db].take_expired() {
            srv.watches.touch_expired(db, &key);
            crate::tracking::invalidate_key(srv, &key, None);
            keyspace_event(
                srv,
                me.as_mut().map(reborrow),
                crate::command::notify::EXPIRED,
                "expired",
                db,
                &key,
            );
        }
    }
}

/// Keys read lookups missed while `keymiss` events are on. Valkey fires
/// `keymiss` inside the lookup; a lookup here holds the keyspace borrowed,
/// so the miss is logged and fired by [`drain_expired`] before the
/// command's next event, or after the command: the order of events is
/// Valkey's.
#[derive(Default)]
pub struct KeyMisses {
    on: bool,
    keys: Vec<(usize, Box<[u8]>)>,
}

impl KeyMisses {
    /// A read lookup of `key` in `db` found nothing.
    pub fn record(&mut self, db: usize, key: &[u8]) {
        if self.on {
            self.keys.push((db, key.into()));
        }
    }
    pub fn pending(&self) -> bool {
        !self.keys.is_empty()
    }
    /// How many are logged, for [`KeyMisses::rewind`].
    pub fn mark(&self) -> usize {
        self.keys.len()
    }
    /// Forget the misses logged since `mark`.
    pub fn rewind(&mut self, mark: usize) {
        self.keys.truncate(mark);
    }
    pub(crate) fn set_on(&mut self, on: bool) {
        self.on = on;
        if !on {
            self.keys.clear();
        }
    }
}

/// `(sub, psub, ssub)` counts for CLIENT LIST.
pub fn counts(sess: &Session) -> (usize, usize, usize) {
    sess.subs.as_deref().map_or((0, 0, 0), |s| {
        (s.channels.len(), s.patterns.len(), s.shard.len())
    })
}
