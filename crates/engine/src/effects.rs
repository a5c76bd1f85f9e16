//! What a command changed, as commands that replay to the same state
//! anywhere: the engine's side of the write-effects stream
//! (`ringkv-effects`), which the AOF (and replication) consume.
//!
//! Valkey's propagation rules, as `call()` applies them:
//!
//! * A command that changed the dataset (the dirty counter grew) is
//!   emitted as it was sent, unless it emitted something itself
//!   ([`Ctx::propagate`]): relative expiries become absolute, random
//!   removals name what they removed, INCRBYFLOAT becomes a SET of the
//!   result, a served blocking command becomes its non-blocking form.
//!   [`Ctx::force_propagation`] emits a command that changed nothing
//!   (FLUSHALL of an empty server); [`Ctx::prevent_propagation`] keeps one
//!   that did from being emitted (EXEC: its commands speak for it).
//! * Keys deleted by expiry or eviction are emitted as DEL (UNLINK with
//!   `lazyfree-lazy-expire` / `lazyfree-lazy-eviction`) as they go, each
//!   on its own: ahead of the effects of the command (or transaction)
//!   that found them expired, never inside its MULTI.
//! * An execution unit (one top-level command, with everything it ran)
//!   that emitted more than one command is wrapped in MULTI ... EXEC; a
//!   SELECT goes ahead of a command whose database differs from the last
//!   one the stream selected.
//!
//! Units are built in a scratch buffer and appended to the stream when
//! they end; [`Effects::publish`] (after each batch) makes them visible to
//! readers. With no stream (nobody consumes effects) every entry point is
//! one branch.

use crate::ArgvRef;
use crate::command::Ctx;
use crate::server::Server;

/// The stream and the unit being built.
#[derive(Default)]
pub struct Effects {
    stream: Option<effects::Writer>,
    /// The database the stream last selected (`None`: emit SELECT before
    /// the next command, as at the start of a new AOF file).
    stream_db: Option<usize>,
    /// The unit being built: RESP commands, SELECTs among them (but not
    /// ahead of the first: that one depends on what the stream selected
    /// when the unit is appended).
    unit: Vec<u8>,
    unit_ops: usize,
    /// Database of the unit's first command, and of its last.
    unit_first_db: usize,
    unit_db: usize,
    /// Nesting of calls (EXEC runs its commands inside its own).
    depth: usize,
    /// The running call emitted its effects itself (or wants none).
    handled: bool,
    /// The running call must be emitted even if it changed nothing.
    forced: bool,
    scratch: Vec<u8>,
    /// The offset the last stream reached (the next one starts there).
    ended_at: u64,
    /// Consumers attached (the AOF, the replication backlog): the stream
    /// runs while there is one.
    consumers: usize,
    /// This server is a replica: the stream carries its primary's stream
    /// byte for byte ([`Effects::relay`]) and nothing of its own.
    relaying: bool,
    /// A stream runs and takes this server's own effects (`on()`).
    emitting: bool,
}

/// What [`Effects::begin_call`] saved, for [`Effects::end_call`].
#[derive(Clone, Copy)]
pub struct CallMark {
    dirty: u64,
    handled: bool,
    forced: bool,
}

impl Effects {
    /// Is anyone consuming effects? When not, nothing is recorded.
    #[inline]
    pub fn on(&self) -> bool {
        self.emitting
    }

    fn sync_emitting(&mut self) {
        self.emitting = self.stream.is_some() && !self.relaying;
    }

    /// A replica's stream is its primary's (Valkey's
    /// `replicationFeedStreamFromPrimaryStream`): what the replica applies
    /// is appended verbatim by [`Effects::relay`], so its offsets are its
    /// primary's, and its own effects of those commands are not emitted.
    /// Turned off (promotion), the next command emitted starts with a
    /// SELECT.
    pub fn set_relaying(&mut self, on: bool) {
        self.relaying = on;
        self.stream_db = None;
        self.unit.clear();
        self.unit_ops = 0;
        self.sync_emitting();
    }

    /// Append bytes of the primary's stream that were just applied (whole
    /// commands, never part of a MULTI ... EXEC). The offset moves on even
    /// while no stream runs, so it keeps counting the primary's bytes.
    pub fn relay(&mut self, bytes: &[u8]) {
        match self.stream.as_mut() {
            Some(w) if self.relaying => w.append(bytes),
            Some(_) => {}
            None => self.ended_at += bytes.len() as u64,
        }
    }

    /// A consumer starts: the stream starts at `offset` (or the running
    /// one goes on) and the reader is at its published end. The next
    /// command is preceded by a SELECT. Each attach is matched by a
    /// [`Effects::detach`].
    pub fn attach(&mut self, offset: u64) -> effects::Reader {
        self.consumers += 1;
        let w = self
            .stream
            .get_or_insert_with(|| effects::Writer::new(offset));
        w.publish();
        let reader = w.reader();
        self.stream_db = None;
        self.sync_emitting();
        reader
    }

    /// A consumer is gone. Once none is left the stream is dropped (its
    /// offset stays, and a stream started later goes on from it).
    pub fn detach(&mut self) {
        self.consumers = self.consumers.saturating_sub(1);
        if self.consumers > 0 {
            return;
        }
        self.ended_at = self.offset();
        self.stream = None;
        self.stream_db = None;
        self.unit.clear();
        self.unit_ops = 0;
        self.sync_emitting();
    }

    /// The next command emitted is preceded by a SELECT (a consumer starts
    /// a new file or link here).
    pub fn force_select(&mut self) {
        self.stream_db = None;
    }

    /// The database the stream last selected (what a replica that
    /// continues from here has selected).
    pub fn stream_db(&self) -> Option<usize> {
        self.stream_db
    }

    /// The stream offset after everything appended.
    pub fn offset(&self) -> u64 {
        self.stream.as_ref().map_or(self.ended_at, |w| w.offset())
    }

    /// Make every finished unit visible to readers; returns the offset
    /// readers can now reach.
    pub fn publish(&mut self) -> u64 {
        match self.stream.as_mut() {
            Some(w) => {
                w.publish();
                w.offset()
            }
            None => 0,
        }
    }

    /// Emit one command of the current unit (outside any call: a unit of
    /// its own), in database `db`.
    pub fn emit<'a>(&mut self, db: usize, argv: impl ExactSizeIterator<Item = &'a [u8]>) {
        if !self.emitting {
            return;
        }
        if self.depth == 0 {
            return self.emit_now(db, argv);
        }
        if self.unit_ops == 0 {
            self.unit_first_db = db;
        } else if self.unit_db != db {
            encode_select(&mut self.unit, db);
        }
        self.unit_db = db;
        encode(&mut self.unit, argv);
        self.unit_ops += 1;
    }

    /// Append one command to the stream at once, as a unit of its own,
    /// ahead of the unit being built (a deletion by expiry or eviction,
    /// which Valkey propagates as it happens).
    pub fn emit_now<'a>(&mut self, db: usize, argv: impl ExactSizeIterator<Item = &'a [u8]>) {
        let Some(w) = self.stream.as_mut().filter(|_| self.emitting) else {
            return;
        };
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        if self.stream_db != Some(db) {
            encode_select(&mut buf, db);
            self.stream_db = Some(db);
        }
        encode(&mut buf, argv);
        w.append(&buf);
        self.scratch = buf;
    }

    /// Append a command that means the same in every database (PING,
    /// REPLCONF GETACK: what a primary sends its replicas), with no
    /// SELECT, as a unit of its own.
    pub fn emit_anywhere(&mut self, argv: &[&[u8]]) {
        let Some(w) = self.stream.as_mut().filter(|_| self.emitting) else {
            return;
        };
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        encode(&mut buf, argv.iter().copied());
        w.append(&buf);
        self.scratch = buf;
    }

    /// A unit is complete: append it to the stream (wrapped in MULTI/EXEC
    /// if it holds more than one command).
    pub fn end_unit(&mut self) {
        let Some(w) = self.stream.as_mut().filter(|_| self.emitting) else {
            return;
        };
        if self.unit_ops == 0 {
            return;
        }
        let wrap = self.unit_ops > 1;
        if wrap {
            w.append(b"*1\r\n$5\r\nMULTI\r\n");
        }
        if self.stream_db != Some(self.unit_first_db) {
            let mut buf = std::mem::take(&mut self.scratch);
            buf.clear();
            encode_select(&mut buf, self.unit_first_db);
            w.append(&buf);
            self.scratch = buf;
        }
        w.append(&self.unit);
        if wrap {
            w.append(b"*1\r\n$4\r\nEXEC\r\n");
        }
        self.stream_db = Some(self.unit_db);
        self.unit.clear();
        self.unit_ops = 0;
    }

    /// Forget the unit being built: a script stopped by SHUTDOWN NOSAVE
    /// (Valkey exits inside it, before its effects are propagated, so
    /// neither the AOF nor a replica sees half of it).
    pub fn discard_unit(&mut self) {
        self.unit.clear();
        self.unit_ops = 0;
    }

    /// A command is about to run (top level or inside EXEC).
    #[inline]
    pub fn begin_call(&mut self, dirty: u64) -> CallMark {
        let m = CallMark {
            dirty,
            handled: self.handled,
            forced: self.forced,
        };
        self.depth += 1;
        self.handled = false;
        self.forced = false;
        m
    }
}

fn encode_select(out: &mut Vec<u8>, db: usize) {
    let mut n = [0u8; resp::num::I64_MAX_LEN];
    let n = resp::num::fmt_u64(db as u64, &mut n);
    encode(out, [&b"SELECT"[..], n].into_iter());
}

/// `*N\r\n$len\r\narg\r\n...` into `out`.
fn encode<'a>(out: &mut Vec<u8>, argv: impl ExactSizeIterator<Item = &'a [u8]>) {
    let mut n = [0u8; resp::num::I64_MAX_LEN];
    out.push(b'*');
    out.extend_from_slice(resp::num::fmt_u64(argv.len() as u64, &mut n));
    out.extend_from_slice(b"\r\n");
    for a in argv {
        out.push(b'$');
        out.extend_from_slice(resp::num::fmt_u64(a.len() as u64, &mut n));
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Run `f` as one call: afterwards, keys it found expired are emitted as
/// deletions, then the command itself as sent if it changed the dataset
/// and emitted nothing of its own. `top`: the call is an execution unit
/// (not a command inside EXEC), so its unit ends here.
#[inline]
pub fn call(ctx: &mut Ctx<'_>, f: crate::command::CommandFn, argv: ArgvRef<'_>, top: bool) {
    if !ctx.srv.effects.on() {
        f(ctx, argv);
        return;
    }
    let mark = ctx.srv.effects.begin_call(ctx.srv.persist.dirty);
    f(ctx, argv);
    end_call(ctx.srv, ctx.session.db, mark, argv, top);
}

#[cold]
fn end_call(srv: &mut Server, db: usize, mark: CallMark, argv: ArgvRef<'_>, top: bool) {
    emit_expired(srv);
    let e = &mut srv.effects;
    let changed = srv.persist.dirty > mark.dirty;
    if e.forced || (changed && !e.handled) {
        e.emit(db, (0..argv.len()).map(|i| argv.get(i)));
    }
    e.handled = mark.handled;
    e.forced = mark.forced;
    e.depth -= 1;
    if top && e.depth == 0 {
        e.end_unit();
    }
}

/// Keys the store deleted by expiry since the last look: DEL (UNLINK
/// with `lazyfree-lazy-expire`) each. The expired-key log is on while
/// effects are (see `Server::sync_expiry_logging`); WATCH and keyspace
/// events read the same log, so this drains a copy of it.
pub fn emit_expired(srv: &mut Server) {
    if !srv.effects.on() {
        return;
    }
    let verb = del_verb(srv.config.lazyfree_lazy_expire);
    let Server {
        keyspace, effects, ..
    } = srv;
    for (db, d) in keyspace.dbs.iter_mut().enumerate() {
        if !d.has_expired_log() {
            continue;
        }
        for key in d.expired_not_emitted() {
            effects.emit_now(db, [verb, &key[..]].into_iter());
        }
    }
}

/// How a deletion is propagated: UNLINK when the matching `lazyfree-*`
/// directive frees lazily, DEL otherwise (Valkey's choice).
pub fn del_verb(lazy: bool) -> &'static [u8] {
    if lazy { b"UNLINK" } else { b"DEL" }
}

/// An evicted key: DEL (UNLINK with `lazyfree-lazy-eviction`), a unit of
/// its own.
pub fn emit_evicted(srv: &mut Server, db: usize, key: &[u8]) {
    if !srv.effects.on() {
        return;
    }
    let verb = del_verb(srv.config.lazyfree_lazy_eviction);
    srv.effects.emit_now(db, [verb, key].into_iter());
}

impl Ctx<'_> {
    /// Emit `argv`, run in the session's database, as (one of) this
    /// command's effects instead of the command as sent.
    pub fn propagate(&mut self, argv: &[&[u8]]) {
        let db = self.session.db;
        self.propagate_db(db, argv);
    }

    /// As [`Ctx::propagate`], in database `db`.
    pub fn propagate_db(&mut self, db: usize, argv: &[&[u8]]) {
        if !self.srv.effects.on() {
            return;
        }
        // Deletions found so far go first, in the order they happened.
        emit_expired(self.srv);
        let e = &mut self.srv.effects;
        e.handled = true;
        e.emit(db, argv.iter().copied());
    }

    /// This command's effects are whatever it emitted with
    /// [`Ctx::propagate`] (possibly nothing), not the command as sent.
    pub fn prevent_propagation(&mut self) {
        self.srv.effects.handled = true;
    }

    /// Emit this command as sent even if it changed nothing (FLUSHALL,
    /// FLUSHDB: a replica or file must be emptied too).
    pub fn force_propagation(&mut self) {
        self.srv.effects.forced = true;
    }
}
