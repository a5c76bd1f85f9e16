//! Clients blocked on keys (BLPOP, BLMOVE, BZPOPMIN, ...), without polling.
//!
//! ```text
//!   BLPOP k 5 ── nothing to pop ──► ctx.block([k], deadline)
//!        engine: copy argv, queue client under (db,k), add (deadline,id)
//!        IO layer: Job::blocked — keep its later commands, feed it nothing
//!   LPUSH k x ── ctx.touched(db,k) ──► (db,k) is ready
//!        after the command: run each waiter's BLPOP again, first blocked
//!        first; one that gets data replies into its pending output and is
//!        unblocked (Event::Unblocked), one that finds nothing stays queued
//!   cron ──► deadlines passed: null reply, unblocked
//! ```
//!
//! Re-running the blocked command (as Valkey 7+ does) keeps one code path
//! per command: the blocking form is the non-blocking one plus "block if
//! there was nothing". Waiters sit in one FIFO per key, so nothing is
//! scanned while they wait: an idle server with 10,000 blocked clients
//! costs one timeout-set peek per cron.

use crate::ClientId;
use crate::Event;
use crate::batch::ArgvRef;
use crate::command::Ctx;
use crate::server::Server;
use crate::session::Session;
use resp::{ReplyWriter, Span};
use std::collections::{BTreeSet, HashMap, VecDeque};

/// What a blocked command replies when its timeout passes (or CLIENT
/// UNBLOCK ... TIMEOUT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnTimeout {
    /// `*-1` (RESP3 `_`): BLPOP, BRPOP, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP.
    NullArray,
    /// BLMOVE, BRPOPLPUSH: `*-1` when the timeout passes too (Valkey's
    /// reply to every timed-out list pop), but `$-1` inside MULTI, where
    /// they cannot block (RESP3 `_` both).
    NullBulk,
    /// WAIT and WAITAOF: what has acknowledged the client's writes by
    /// then (the same reply as when they are served).
    Acks(crate::replication::wait::AckTarget),
    /// SHUTDOWN waiting for replicas: no timeout, not unblocked by CLIENT
    /// UNBLOCK; the shutdown's end answers it (shutdown.rs).
    Shutdown,
}

/// What a command asked for through [`Ctx::block`]; the engine turns it
/// into a [`Blocked`] once the command returns.
#[derive(Clone, Debug)]
pub struct BlockRequest {
    pub keys: Vec<Vec<u8>>,
    /// Unix ms; `None` blocks forever.
    pub deadline_ms: Option<i64>,
    pub on_timeout: OnTimeout,
    /// Arguments to replace in the stored command (index, new bytes):
    /// XREAD's `$` becomes the ID it stood for when the client blocked, so
    /// running it again serves what arrived since.
    pub rewrites: Vec<(usize, Vec<u8>)>,
    /// Answer whatever running the command again replies, a WRONGTYPE
    /// error included (XREADGROUP: Valkey's `unblock_on_nokey`; a list
    /// waiter whose key now holds another type stays blocked instead).
    pub unblock_on_nokey: bool,
}

/// A blocked client's state, kept in its Session.
#[derive(Debug)]
pub struct Blocked {
    pub db: usize,
    pub keys: Vec<Vec<u8>>,
    pub deadline_ms: Option<i64>,
    pub on_timeout: OnTimeout,
    unblock_on_nokey: bool,
    /// The command to run again, as owned bytes and spans over them.
    data: Vec<u8>,
    spans: Vec<Span>,
    /// Command-table index of what runs.
    cmd: usize,
    /// What its first run took, µs (SLOWLOG logs a blocked command when
    /// it is served or times out, with the time it ran, not waited).
    pub call_us: u64,
}

impl Blocked {
    fn argv(&self) -> ArgvRef<'_> {
        ArgvRef {
            data: &self.data,
            spans: &self.spans,
        }
    }
}

/// Server-wide index of blocked clients.
#[derive(Default)]
pub struct Blocking {
    /// Waiters per (db, key), in the order they blocked.
    by_key: HashMap<(usize, Vec<u8>), VecDeque<ClientId>>,
    /// (deadline, client) of every blocked client with a timeout.
    timeouts: BTreeSet<(i64, u64)>,
    /// Keys written since the last serve, with waiters.
    ready: VecDeque<(usize, Vec<u8>)>,
    /// Blocked clients (INFO blocked_clients).
    pub clients: usize,
}

impl Blocking {
    /// Distinct keys with waiters (INFO total_blocking_keys).
    pub fn keys(&self) -> usize {
        self.by_key.len()
    }
    /// Keys with a waiter that also wakes when the key is deleted or
    /// changes type (XREADGROUP; INFO total_blocking_keys_on_nokey).
    pub fn keys_on_nokey(&self, clients: &crate::server::Clients) -> usize {
        self.by_key
            .values()
            .filter(|q| {
                q.iter().any(|&id| {
                    clients
                        .get(id)
                        .and_then(|s| s.blocked.as_deref())
                        .is_some_and(|b| b.unblock_on_nokey)
                })
            })
            .count()
    }
    /// Called by [`Ctx::touched`]: queue the key if anyone waits on it.
    #[inline]
    pub fn signal(&mut self, db: usize, key: &[u8]) {
        if self.by_key.is_empty() {
            return;
        }
        // Short lists: a linear dedup is cheaper than a second set.
        if self.by_key.contains_key(&(db, key.to_vec()))
            && !self.ready.iter().any(|(d, k)| *d == db && k == key)
        {
            self.ready.push_back((db, key.to_vec()));
        }
    }
    /// SWAPDB or a flush: every waited key of `db` may have changed
    /// (Valkey's scanDatabaseForReadyKeys and scanDatabaseForDeletedKeys);
    /// serving re-checks each.
    pub fn signal_db(&mut self, db: usize) {
        let keys: Vec<Vec<u8>> = self
            .by_key
            .keys()
            .filter(|(d, _)| *d == db)
            .map(|(_, k)| k.clone())
            .collect();
        for k in keys {
            self.signal(db, &k);
        }
    }
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }
    /// The earliest deadline of any blocked client.
    pub fn next_deadline(&self) -> Option<i64> {
        self.timeouts.first().map(|&(t, _)| t)
    }
}

/// `timeout` argument of the blocking commands: seconds as a float, 0 =
/// forever. Returns the deadline.
pub fn parse_timeout(arg: &[u8], now_ms: i64) -> Result<Option<i64>, &'static str> {
    let secs = match crate::num::parse_f64(arg) {
        Some(v) if v.is_finite() => v,
        _ => return Err("ERR timeout is not a float or out of range"),
    };
    if secs < 0.0 {
        return Err("ERR timeout is negative");
    }
    let ms = (secs * 1000.0).ceil();
    if ms > (i64::MAX / 2) as f64 {
        return Err("ERR timeout is out of range");
    }
    if ms == 0.0 {
        return Ok(None);
    }
    Ok(Some(now_ms.saturating_add(ms as i64)))
}

impl Ctx<'_> {
    /// Block the client on `keys` (the command found nothing to serve).
    /// Inside MULTI/EXEC a command cannot block: it replies as if it timed
    /// out, now. Otherwise it writes no reply; the engine runs the command
    /// again when one of the keys is written.
    pub fn block(&mut self, keys: &[&[u8]], deadline_ms: Option<i64>, on_timeout: OnTimeout) {
        if self.session.in_exec {
            if on_timeout == OnTimeout::NullBulk {
                self.reply.null();
                return;
            }
            let counts = counts_for(self.srv, on_timeout);
            write_timeout_reply(&mut self.reply, on_timeout, counts);
            return;
        }
        self.session.block_request = Some(BlockRequest {
            keys: keys.iter().map(|k| k.to_vec()).collect(),
            deadline_ms,
            on_timeout,
            rewrites: Vec::new(),
            unblock_on_nokey: false,
        });
    }

    /// As [`Ctx::block`], with arguments replaced in the command that will
    /// run again (see [`BlockRequest::rewrites`]).
    pub fn block_rewritten(
        &mut self,
        keys: &[&[u8]],
        deadline_ms: Option<i64>,
        on_timeout: OnTimeout,
        rewrites: Vec<(usize, Vec<u8>)>,
        unblock_on_nokey: bool,
    ) {
        self.block(keys, deadline_ms, on_timeout);
        if let Some(r) = self.session.block_request.as_mut() {
            r.rewrites = rewrites;
            r.unblock_on_nokey = unblock_on_nokey;
        }
    }
}

fn write_timeout_reply(w: &mut ReplyWriter<'_>, on_timeout: OnTimeout, counts: (usize, usize)) {
    use crate::replication::wait::AckTarget;
    match on_timeout {
        OnTimeout::NullArray | OnTimeout::NullBulk => w.null_array(),
        OnTimeout::Acks(AckTarget::Replicas { .. }) => w.int(counts.1 as i64),
        OnTimeout::Acks(AckTarget::Aof { .. }) => {
            w.array_len(2);
            w.int(counts.0 as i64);
            w.int(counts.1 as i64);
        }
        OnTimeout::Shutdown => w.error(crate::shutdown::FAILED_REPLY),
    }
}

/// What a WAIT or WAITAOF counts now, (local, replicas) (zeros for every
/// other command).
fn counts_for(srv: &Server, on_timeout: OnTimeout) -> (usize, usize) {
    match on_timeout {
        OnTimeout::Acks(target) => target.counts(srv),
        _ => (0, 0),
    }
}

/// After command `cmd` ran for `sess`: if it asked to block, register it.
/// Returns true if the client is now blocked.
pub(crate) fn after_command(
    srv: &mut Server,
    sess: &mut Session,
    cmd: usize,
    argv: ArgvRef<'_>,
) -> bool {
    let Some(req) = sess.block_request.take() else {
        return false;
    };
    let mut data = Vec::new();
    let mut spans = Vec::with_capacity(argv.len());
    let rewritten =
        argv.iter().enumerate().map(
            |(i, a)| match req.rewrites.iter().find(|(at, _)| *at == i) {
                Some((_, new)) => new.as_slice(),
                None => a,
            },
        );
    crate::batch::pack_args(rewritten, &mut data, &mut spans);
    let b = &mut srv.blocking;
    for k in &req.keys {
        let q = b.by_key.entry((sess.db, k.clone())).or_default();
        if !q.contains(&sess.id) {
            q.push_back(sess.id);
        }
    }
    if let Some(t) = req.deadline_ms {
        b.timeouts.insert((t, sess.id.0));
    }
    b.clients += 1;
    sess.blocked = Some(Box::new(Blocked {
        db: sess.db,
        keys: req.keys,
        deadline_ms: req.deadline_ms,
        on_timeout: req.on_timeout,
        unblock_on_nokey: req.unblock_on_nokey,
        data,
        spans,
        cmd,
        call_us: 0,
    }));
    true
}

/// Forget `sess`'s blocked state (served, timed out, unblocked, gone).
fn unregister(blocking: &mut Blocking, id: ClientId, st: &Blocked) {
    for k in &st.keys {
        let slot = (st.db, k.clone());
        if let Some(q) = blocking.by_key.get_mut(&slot) {
            q.retain(|&c| c != id);
            if q.is_empty() {
                blocking.by_key.remove(&slot);
            }
        }
    }
    if let Some(t) = st.deadline_ms {
        blocking.timeouts.remove(&(t, id.0));
    }
    blocking.clients -= 1;
}

/// The client disconnected: drop it from every queue.
pub(crate) fn forget(srv: &mut Server, sess: &mut Session) {
    if let Some(st) = sess.blocked.take() {
        unregister(&mut srv.blocking, sess.id, &st);
    }
}

/// Serve the waiters of every ready key: run their commands again, first
/// blocked first. Runs after each command, so the pushes of a MULTI/EXEC
/// are seen only once EXEC is done. As Valkey's: whether a key can serve
/// is judged at `now_ms`, the time of the command that readied it, but a
/// waiter's command runs at the time it runs (the transaction that readied
/// the key may have taken long enough for it to expire meanwhile: the
/// waiter's own lookup then deletes it, and it waits on).
pub(crate) fn serve_ready(srv: &mut Server, now_ms: i64) {
    let run_ms = srv.now_ms();
    let table = crate::table::table();
    while let Some(slot) = srv.blocking.ready.pop_front() {
        let Some(queue) = srv.blocking.by_key.get(&slot) else {
            continue;
        };
        let waiters: Vec<ClientId> = queue.iter().copied().collect();
        // A key past its time is as good as missing: as Valkey's
        // handleClientsBlockedOnKey (a lookup that deletes nothing), it
        // serves only the waiters that also wake when the key goes away,
        // and is left for a later access to delete (and propagate).
        let expired = {
            let db = &srv.keyspace.dbs[slot.0];
            db.peek(store::hash_key(&slot.1), &slot.1)
                .is_some_and(|e| !db.shows(e, now_ms))
        };
        for id in waiters {
            let Some(mut sess) = srv.clients.map.get_mut(&id.0).and_then(Option::take) else {
                continue;
            };
            let Some(st) = sess.blocked.take() else {
                put_back(srv, sess);
                continue;
            };
            if expired && !st.unblock_on_nokey {
                sess.blocked = Some(st);
                put_back(srv, sess);
                continue;
            }
            let mut out = std::mem::take(&mut sess.pending);
            let before = out.len();
            let lookups = (
                srv.stats.keyspace_hits,
                srv.stats.keyspace_misses,
                srv.keymisses.mark(),
            );
            let started = std::time::Instant::now();
            // Its own invalidations (BLMOVE's destination) follow its reply.
            crate::tracking::begin_own(srv, &sess);
            if let Some(f) = table.entries[st.cmd].spec.func {
                let proto = sess.proto;
                let mut ctx = Ctx {
                    srv: &mut *srv,
                    session: &mut sess,
                    reply: ReplyWriter::new(&mut out, proto),
                    now_ms: run_ms,
                };
                crate::effects::call(&mut ctx, f, st.argv(), true);
            }
            // A waited key that now holds another type does not serve the
            // client (Valkey only serves waiters of the key's type): it
            // stays blocked instead of getting WRONGTYPE. A WRONGTYPE from
            // elsewhere (BLMOVE's destination) is its answer.
            let wrong_type = !st.unblock_on_nokey
                && out[before..].starts_with(b"-WRONGTYPE")
                && !holds_waited_type(srv, slot.0, &slot.1, st.cmd);
            if sess.block_request.take().is_some() || wrong_type {
                // Still nothing for it (another waiter took it, or the
                // write was not a push): keep its place in the queues.
                out.truncate(before);
                sess.pending = out;
                sess.blocked = Some(st);
                // Valkey does not run a waiter its key cannot serve: the
                // lookups of this run are not counted, nor its misses fired.
                (srv.stats.keyspace_hits, srv.stats.keyspace_misses) = (lookups.0, lookups.1);
                srv.keymisses.rewind(lookups.2);
                srv.tracking.running = None;
            } else {
                crate::tracking::end_own(srv, &mut sess, |p| ReplyWriter::new(&mut out, p));
                unregister(&mut srv.blocking, id, &st);
                count_error_reply(srv, st.cmd, &out[before..]);
                count_call(srv, &mut sess, st.cmd);
                let us = st.call_us + started.elapsed().as_micros() as u64;
                srv.record_latency(st.cmd, us * 1000, 1);
                crate::log_if_slow(srv, &sess, st.cmd, st.argv(), us, run_ms);
                deliver_pending(srv, &mut sess, out);
                srv.events.push(Event::Unblocked { client: id });
            }
            put_back(srv, sess);
            // Keys its run expired or missed: their events now, before the
            // next waiter's, as Valkey's fire during the command.
            if srv.expiry_logging || srv.keymisses.pending() {
                crate::pubsub::drain_expired(srv, None);
            }
        }
    }
}

/// A blocked command is counted as a call (commandstats, INFO
/// `total_commands_processed`, CLIENT LIST `tot-cmds`) when it leaves the
/// blocked state, however it leaves it, as Valkey's updateStatsOnUnblock.
fn count_call(srv: &mut Server, sess: &mut Session, cmd: usize) {
    srv.stats.commands[cmd].calls += 1;
    srv.stats.total_commands_processed += 1;
    sess.commands_processed += 1;
}

/// A served waiter's error reply (XREADGROUP's NOGROUP once its key is
/// gone) counts as the error of a call: errorstats and `failed_calls`,
/// as Valkey's updateStatsOnUnblock.
fn count_error_reply(srv: &mut Server, cmd: usize, reply: &[u8]) {
    if srv.stats.record_error_reply(reply) {
        srv.stats.commands[cmd].failed_calls += 1;
    }
}

/// Does `key` hold (or lack) a value of the type command `cmd` waits for?
fn holds_waited_type(srv: &Server, db: usize, key: &[u8], cmd: usize) -> bool {
    let want = match crate::table::table().entries[cmd].spec.group {
        "list" => "list",
        "sorted-set" => "zset",
        "stream" => "stream",
        _ => return true,
    };
    srv.keyspace.dbs[db]
        .peek(store::hash_key(key), key)
        .is_none_or(|e| e.type_name() == want)
}

fn put_back(srv: &mut Server, sess: Box<Session>) {
    if let Some(slot) = srv.clients.map.get_mut(&sess.id.0) {
        *slot = Some(sess);
    }
}

/// Set `out` as the session's pending output and tell the IO layer.
fn deliver_pending(srv: &mut Server, sess: &mut Session, out: Vec<u8>) {
    sess.pending = out;
    if !sess.pending.is_empty() && !sess.pending_queued {
        sess.pending_queued = true;
        srv.outbox.push(sess.id);
    }
}

/// Unblock `id` now with its timeout reply, or with `-UNBLOCKED ...` when
/// `error` (CLIENT UNBLOCK). False if it is not blocked.
pub(crate) fn unblock(srv: &mut Server, id: ClientId, error: bool) -> bool {
    let shutdown = srv
        .clients
        .get(id)
        .and_then(|s| s.blocked.as_deref())
        .is_some_and(|b| matches!(b.on_timeout, OnTimeout::Shutdown));
    if shutdown {
        return false;
    }
    let how = match error {
        true => Unblock::Error("UNBLOCKED client unblocked via CLIENT UNBLOCK"),
        false => Unblock::Timeout,
    };
    unblock_with(srv, id, how)
}

/// How a client leaves its blocked state.
#[derive(Clone, Copy)]
pub(crate) enum Unblock<'a> {
    /// With its timeout reply.
    Timeout,
    Error(&'a str),
    /// A WAIT or WAITAOF that has what it waited for: with its counts.
    Counts,
}

/// Unblock every blocked client with Valkey's error for a server that
/// became a replica (its keys now change only by its primary's hand).
pub(crate) fn unblock_all_for_role_change(srv: &mut Server) {
    let ids: Vec<ClientId> = srv
        .clients
        .map
        .values()
        .flatten()
        .filter(|s| s.blocked.is_some())
        .map(|s| s.id)
        .collect();
    for id in ids {
        unblock_with(
            srv,
            id,
            Unblock::Error(
                "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)",
            ),
        );
    }
}

/// Unblock `id` with the reply `how` says.
pub(crate) fn unblock_with(srv: &mut Server, id: ClientId, how: Unblock<'_>) -> bool {
    let Some(mut sess) = srv.clients.map.get_mut(&id.0).and_then(Option::take) else {
        return false;
    };
    let Some(st) = sess.blocked.take() else {
        put_back(srv, sess);
        return false;
    };
    unregister(&mut srv.blocking, id, &st);
    let counts = counts_for(srv, st.on_timeout);
    let mut out = std::mem::take(&mut sess.pending);
    {
        let mut w = ReplyWriter::new(&mut out, sess.proto);
        match how {
            Unblock::Error(msg) => w.error(msg),
            Unblock::Timeout | Unblock::Counts => {
                write_timeout_reply(&mut w, st.on_timeout, counts)
            }
        }
    }
    if let Unblock::Error(msg) = how {
        srv.stats.record_error(msg);
        srv.stats.commands[st.cmd].failed_calls += 1;
    }
    count_call(srv, &mut sess, st.cmd);
    srv.record_latency(st.cmd, st.call_us * 1000, 1);
    let now_ms = srv.now_ms();
    crate::log_if_slow(srv, &sess, st.cmd, st.argv(), st.call_us, now_ms);
    deliver_pending(srv, &mut sess, out);
    srv.events.push(Event::Unblocked { client: id });
    put_back(srv, sess);
    true
}

/// Unblock every client whose deadline has passed.
pub(crate) fn expire_timeouts(srv: &mut Server, now_ms: i64) {
    while let Some(&(t, id)) = srv.blocking.timeouts.first() {
        // Strictly past, as Valkey checks it: the clock is in whole ms, so
        // `t == now` can still be up to 1 ms before the deadline.
        if t >= now_ms {
            break;
        }
        if !unblock(srv, ClientId(id), false) {
            // Not blocked any more (should not happen): drop the entry.
            srv.blocking.timeouts.remove(&(t, id));
        }
    }
}
