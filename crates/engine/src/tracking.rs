//! Client-side caching: CLIENT TRACKING, the invalidation messages.
//!
//! ```text
//!   default mode: GET k by a tracking client ──► keys[k] += client
//!                 k written (Ctx::touched), expired or evicted
//!                   ──► each client in keys[k]: `invalidate [k]`; keys[k] gone
//!   BCAST PREFIX p: every written key starting with p is queued under p
//!                   ──► after the batch, one `invalidate [k1, k2, ...]`
//!                       per client of p (NOLOOP: without its own writes)
//!   FLUSHDB/FLUSHALL ──► every tracking client: `invalidate` null
//! ```
//!
//! As in Valkey the table is keyed by name alone, whatever the database;
//! a message goes to the client itself as a RESP3 push, or to its
//! REDIRECT client — a RESP3 push, or for a RESP2 client subscribed to
//! anything a `__redis__:invalidate` message (a RESP2 client with no
//! redirection gets nothing). The running client's own invalidations
//! follow its reply. Clients that left or stopped tracking stay in the
//! table until the key is next invalidated, and are skipped then.

use crate::ClientId;
use crate::batch::ArgvRef;
use crate::server::Server;
use crate::session::Session;
use resp::{Protocol, ReplyWriter};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A client's CLIENT TRACKING state.
#[derive(Debug, Default)]
pub struct ClientTracking {
    /// REDIRECT target; 0: none.
    pub redirect: u64,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// CLIENT CACHING YES (OPTIN) or NO (OPTOUT) for the next command.
    pub caching: bool,
    /// The REDIRECT client is gone (reported once).
    pub broken_redirect: bool,
    /// BCAST prefixes, sorted.
    pub prefixes: BTreeSet<Box<[u8]>>,
}

impl ClientTracking {
    /// CLIENT TRACKINGINFO's `flags`.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut v = vec!["on"];
        for (on, name) in [
            (self.bcast, "bcast"),
            (self.optin, "optin"),
            (self.optout, "optout"),
            (self.optin && self.caching, "caching-yes"),
            (self.optout && self.caching, "caching-no"),
            (self.noloop, "noloop"),
            (self.broken_redirect, "broken_redirect"),
        ] {
            if on {
                v.push(name);
            }
        }
        v
    }
}

#[derive(Default)]
struct Prefix {
    clients: BTreeSet<u64>,
    /// Keys written since the last broadcast, each with its first writer.
    pending: Vec<(Box<[u8]>, Option<ClientId>)>,
}

/// The client whose command runs now (out of the client map while it
/// runs): what is for it waits until its reply is written.
#[derive(Clone, Copy)]
pub struct Running {
    pub id: ClientId,
    pub proto: Protocol,
    pub subscribed: bool,
    /// Its tracking state when the command began: (bcast, noloop).
    pub tracking: Option<(bool, bool)>,
}

impl Running {
    /// The state of `sess` as its command begins.
    pub fn of(sess: &Session) -> Running {
        Running {
            id: sess.id,
            proto: sess.proto,
            subscribed: sess.subs.is_some(),
            tracking: sess.tracking.as_deref().map(|t| (t.bcast, t.noloop)),
        }
    }
}

/// The server's tracking table.
#[derive(Default)]
pub struct Tracking {
    /// Key name → ids of the clients that read it.
    keys: HashMap<Box<[u8]>, BTreeSet<u64>>,
    /// Sum of the sets' sizes (INFO `tracking_total_items`).
    items: usize,
    prefixes: BTreeMap<Box<[u8]>, Prefix>,
    /// Clients with tracking on (INFO `tracking_clients`).
    pub clients: usize,
    pub running: Option<Running>,
    /// Invalidations of the running client's own cache (`None`: a
    /// flush), routed once it is back.
    pending_self: Vec<Option<Box<[u8]>>>,
    /// Messages for the running client as a REDIRECT target, in its
    /// protocol.
    pending_bytes: Vec<u8>,
}

impl Tracking {
    pub fn total_keys(&self) -> usize {
        self.keys.len()
    }
    pub fn total_items(&self) -> usize {
        self.items
    }
    pub fn total_prefixes(&self) -> usize {
        self.prefixes.len()
    }
    /// Nothing tracked and nothing to broadcast: writes cost one branch.
    #[inline]
    pub fn is_idle(&self) -> bool {
        self.keys.is_empty() && self.prefixes.is_empty()
    }
    fn running_id(&self) -> Option<ClientId> {
        self.running.map(|r| r.id)
    }
}

/// CLIENT TRACKING ON with its options already checked.
pub fn enable(srv: &mut Server, sess: &mut Session, mut opts: ClientTracking) {
    match sess.tracking.as_deref_mut() {
        Some(t) => {
            // Flags are replaced; prefixes add to those held.
            opts.prefixes.append(&mut t.prefixes);
        }
        None => srv.tracking.clients += 1,
    }
    if opts.bcast && opts.prefixes.is_empty() {
        opts.prefixes.insert(Box::default());
    }
    for p in &opts.prefixes {
        srv.tracking
            .prefixes
            .entry(p.clone())
            .or_default()
            .clients
            .insert(sess.id.0);
    }
    sess.tracking = Some(Box::new(opts));
    srv.sync_expiry_logging();
}

/// CLIENT TRACKING OFF, RESET, disconnect.
pub fn disable(srv: &mut Server, sess: &mut Session) {
    let Some(t) = sess.tracking.take() else {
        return;
    };
    srv.tracking.clients -= 1;
    for p in &t.prefixes {
        if let Some(pre) = srv.tracking.prefixes.get_mut(p) {
            pre.clients.remove(&sess.id.0);
            if pre.clients.is_empty() {
                srv.tracking.prefixes.remove(p);
            }
        }
    }
    srv.sync_expiry_logging();
}

/// After a command of `sess` (table entry `i`) ran: remember the keys a
/// read-only command read (Valkey's `trackingRememberKeys`), per OPTIN /
/// OPTOUT and CLIENT CACHING.
pub fn remember(srv: &mut Server, sess: &Session, i: usize, argv: ArgvRef<'_>) {
    let Some(t) = sess.tracking.as_deref() else {
        return;
    };
    let e = &crate::table::table().entries[i];
    if t.bcast || e.spec.flags & crate::command::flags::READONLY == 0 {
        return;
    }
    // A read-only script's keys are the ones its commands read, remembered
    // as they run (Valkey's call() leaves the script's own out).
    if matches!(e.fullname.as_str(), "eval_ro" | "evalsha_ro" | "fcall_ro") {
        return;
    }
    if (t.optin && !t.caching) || (t.optout && t.caching) {
        return;
    }
    let (first, last, step) = (e.spec.first_key, e.spec.last_key, e.spec.key_step);
    if first > 0 && step > 0 && !e.movable_keys {
        // Keys at fixed places (GET, MGET, HGET ...): no allocation.
        let n = argv.len() as i32;
        let last = if last < 0 { n + last } else { last.min(n - 1) };
        let mut k = first;
        while k <= last {
            remember_key(srv, sess.id, argv.get(k as usize));
            k += step;
        }
    } else {
        // Keys that move with the arguments (ZUNION, SINTERCARD, XREAD,
        // EVAL_RO ...): found as COMMAND GETKEYS finds them.
        let args: Vec<&[u8]> = argv.iter().collect();
        for (k, _) in crate::getkeys::command_keys(e.spec, &args) {
            // A command that failed on its arguments may name keys past them.
            if let Some(key) = args.get(k) {
                remember_key(srv, sess.id, key);
            }
        }
    }
    limit_table(srv);
}

/// The table holds more keys than `tracking-table-max-keys` allows.
#[inline]
pub fn over_limit(srv: &Server) -> bool {
    let max = srv.config.tracking_table_max_keys;
    max > 0 && srv.tracking.keys.len() > max
}

/// Keep the table within `tracking-table-max-keys` (after a read, and
/// from cron: the limit may have been lowered), telling the readers of
/// each key dropped.
pub fn limit_table(srv: &mut Server) {
    while over_limit(srv) {
        // Valkey evicts random keys from a full table, telling their
        // readers; any key will do.
        let Some(key) = srv.tracking.keys.keys().next().cloned() else {
            break;
        };
        invalidate_key(srv, &key, None);
    }
}

fn remember_key(srv: &mut Server, id: ClientId, key: &[u8]) {
    let set = srv.tracking.keys.entry(key.into()).or_default();
    if set.insert(id.0) {
        srv.tracking.items += 1;
    }
}

/// A key was written, expired or evicted (`by`: the client that wrote it).
pub fn invalidate_key(srv: &mut Server, key: &[u8], by: Option<ClientId>) {
    if srv.tracking.is_idle() {
        return;
    }
    if !srv.tracking.prefixes.is_empty() {
        for (p, pre) in srv.tracking.prefixes.iter_mut() {
            if !key.starts_with(p) {
                continue;
            }
            // The last writer is the one NOLOOP leaves out, as in Valkey.
            match pre.pending.iter_mut().find(|(k, _)| &**k == key) {
                Some(pending) => pending.1 = by,
                None => pre.pending.push((key.into(), by)),
            }
        }
    }
    let Some(ids) = srv.tracking.keys.remove(key) else {
        return;
    };
    srv.tracking.items -= ids.len();
    for id in ids {
        let id = ClientId(id);
        let state = match srv.tracking.running {
            Some(r) if r.id == id => r.tracking,
            _ => srv
                .clients
                .get(id)
                .and_then(|s| s.tracking.as_deref())
                .map(|t| (t.bcast, t.noloop)),
        };
        match state {
            Some((false, noloop)) if !(noloop && by == Some(id)) => send(srv, id, Some(&[key])),
            _ => {}
        }
    }
}

/// FLUSHDB / FLUSHALL: every tracking client drops its whole cache.
pub fn invalidate_all(srv: &mut Server) {
    let _ = std::mem::take(&mut srv.tracking.keys);
    srv.tracking.items = 0;
    if srv.tracking.clients == 0 {
        return;
    }
    let mut ids: Vec<ClientId> = srv
        .clients
        .map
        .values()
        .flatten()
        .filter(|s| s.tracking.is_some())
        .map(|s| s.id)
        .collect();
    if let Some(r) = srv.tracking.running
        && r.tracking.is_some()
    {
        ids.push(r.id);
    }
    for id in ids {
        send(srv, id, None);
    }
}

/// After a batch (Valkey: before sleeping): the BCAST messages.
pub fn broadcast(srv: &mut Server) {
    if srv.tracking.prefixes.values().all(|p| p.pending.is_empty()) {
        return;
    }
    let mut msgs: Vec<(ClientId, Vec<Box<[u8]>>)> = Vec::new();
    for pre in srv.tracking.prefixes.values_mut() {
        let mut pending = std::mem::take(&mut pre.pending);
        if pending.is_empty() {
            continue;
        }
        // Valkey keeps them in a radix tree: the message lists them sorted.
        pending.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        for &c in &pre.clients {
            let id = ClientId(c);
            let noloop = srv
                .clients
                .get(id)
                .and_then(|s| s.tracking.as_deref())
                .is_some_and(|t| t.noloop);
            let keys: Vec<Box<[u8]>> = pending
                .iter()
                .filter(|(_, by)| !(noloop && *by == Some(id)))
                .map(|(k, _)| k.clone())
                .collect();
            if !keys.is_empty() {
                msgs.push((id, keys));
            }
        }
    }
    for (id, keys) in msgs {
        let refs: Vec<&[u8]> = keys.iter().map(|k| &**k).collect();
        send(srv, id, Some(&refs));
    }
}

/// `sess` (out of the client map while it works) begins something whose
/// invalidations of its own cache must follow what it writes: a command,
/// a served blocked command, evictions or table trimming before one.
#[inline]
pub fn begin_own(srv: &mut Server, sess: &Session) {
    if srv.tracking.clients > 0 {
        srv.tracking.running = Some(Running::of(sess));
    }
}

/// ... and has ended it: what it caused for itself is written now, to
/// the writer `w` makes in the session's protocol (only if there is
/// something). Whether anything was.
#[inline]
pub fn end_own<'a>(
    srv: &mut Server,
    sess: &mut Session,
    w: impl FnOnce(Protocol) -> ReplyWriter<'a>,
) -> bool {
    if srv.tracking.running.is_none() {
        return false;
    }
    srv.tracking.running = None;
    if !running_has_output(srv) {
        return false;
    }
    let mut w = w(sess.proto);
    flush_running(srv, sess, &mut w);
    true
}

/// After the running client's reply: what its command caused for it.
pub fn flush_running(srv: &mut Server, sess: &mut Session, out: &mut ReplyWriter<'_>) {
    let bytes = std::mem::take(&mut srv.tracking.pending_bytes);
    for key in std::mem::take(&mut srv.tracking.pending_self) {
        let keys = key.as_ref().map(|k| [&**k]);
        deliver(srv, sess, keys.as_ref().map(|k| &k[..]), out);
    }
    out.raw(&bytes);
}

/// Anything for the running client?
#[inline]
pub fn running_has_output(srv: &Server) -> bool {
    !srv.tracking.pending_self.is_empty() || !srv.tracking.pending_bytes.is_empty()
}

/// One invalidation (`keys`, or null for a flush) of client `id`'s cache.
fn send(srv: &mut Server, id: ClientId, keys: Option<&[&[u8]]>) {
    if srv.tracking.running_id() == Some(id) {
        match keys {
            Some(ks) => {
                for k in ks {
                    srv.tracking.pending_self.push(Some((*k).into()));
                }
            }
            None => srv.tracking.pending_self.push(None),
        }
        return;
    }
    let Some(mut sess) = srv.clients.map.get_mut(&id.0).and_then(Option::take) else {
        return;
    };
    let mut out = std::mem::take(&mut sess.pending);
    {
        let mut w = ReplyWriter::new(&mut out, sess.proto);
        deliver(srv, &mut sess, keys, &mut w);
    }
    sess.pending = out;
    let queue = !sess.pending.is_empty() && !sess.pending_queued;
    sess.pending_queued |= queue;
    if let Some(slot) = srv.clients.map.get_mut(&id.0) {
        *slot = Some(sess);
    }
    if queue {
        srv.outbox.push(id);
    }
}

/// Route one invalidation of `sess`'s cache: to its own connection
/// (`own`, RESP3 only) or to its REDIRECT client.
fn deliver(
    srv: &mut Server,
    sess: &mut Session,
    keys: Option<&[&[u8]]>,
    own: &mut ReplyWriter<'_>,
) {
    let own_proto = sess.proto;
    let own_subscribed = sess.subs.is_some();
    let Some(t) = sess.tracking.as_deref_mut() else {
        return;
    };
    if t.redirect == 0 || t.redirect == sess.id.0 {
        if own_proto == Protocol::Resp3 || (t.redirect != 0 && own_subscribed) {
            write_message(own, own_proto, keys, own_proto);
        }
        return;
    }
    let target = ClientId(t.redirect);
    let state = match srv.tracking.running {
        Some(r) if r.id == target => Some((r.proto, r.subscribed)),
        // One that is closing (QUIT, killed) is as good as gone: Valkey
        // has freed it before another client's command runs.
        _ => srv
            .clients
            .get(target)
            .filter(|s| !s.close_after_reply && !s.close_asap)
            .map(|s| (s.proto, s.subs.is_some())),
    };
    let Some((proto, subscribed)) = state else {
        // Gone: said once, to a RESP3 client (`tracking-redir-broken`).
        if !t.broken_redirect {
            t.broken_redirect = true;
            if own_proto == Protocol::Resp3 {
                own.push_len(2);
                own.bulk(b"tracking-redir-broken");
                own.int(t.redirect as i64);
            }
        }
        return;
    };
    if !(proto == Protocol::Resp3 || subscribed) {
        return;
    }
    if srv.tracking.running_id() == Some(target) {
        let mut w = ReplyWriter::new(&mut srv.tracking.pending_bytes, proto);
        write_message(&mut w, proto, keys, own_proto);
    } else {
        srv.write_to(target, |w| write_message(w, proto, keys, own_proto));
    }
}

/// `>2 invalidate [keys]` (RESP3), or for a RESP2 recipient the pub/sub
/// message `__redis__:invalidate [keys]`. A flush sends null in the
/// tracking client's own protocol, as Valkey does.
fn write_message(
    w: &mut ReplyWriter<'_>,
    proto: Protocol,
    keys: Option<&[&[u8]]>,
    tracker_proto: Protocol,
) {
    if proto == Protocol::Resp3 {
        w.push_len(2);
        w.bulk(b"invalidate");
    } else {
        w.array_len(3);
        w.bulk(b"message");
        w.bulk(TRACKING_CHANNEL);
    }
    match keys {
        Some(ks) => {
            w.array_len(ks.len());
            for k in ks {
                w.bulk(k);
            }
        }
        None if tracker_proto == Protocol::Resp3 => w.raw(b"_\r\n"),
        None => w.raw(b"$-1\r\n"),
    }
}

/// The channel RESP2 clients subscribe to for redirected invalidations.
pub const TRACKING_CHANNEL: &[u8] = b"__redis__:invalidate";
