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
//! Units are built in a buffer and appended to the stream when they end,
//! except a unit of one top-level command (the common case, a SET), which
//! is encoded straight into the stream; [`Effects::publish`] (after each
//! batch) makes them visible to readers. With no stream (nobody consumes
//! effects) every entry point is one branch.
//!
//! A primary has one stream, read by the AOF and the replication backlog
//! alike. A replica's backlog must hold its primary's stream byte for byte
//! (its replicas continue from the same offsets), while its AOF holds its
//! own effects, as Valkey's: what the primary's commands did, and the
//! writes of a writable replica, without the primary's PINGs and GETACKs.
//! So while a replica has an AOF, its own effects go to a second stream
//! that only the AOF reads, and the AOF moves between the two as the role
//! changes ([`Effects::set_relaying`]).

use crate::ArgvRef;
use crate::command::Ctx;
use crate::server::Server;
use std::collections::VecDeque;

/// How many publish points of a replica's two streams are kept for
/// [`Effects::relayed_through`] (older ones make its answer lag, never
/// run ahead).
const MAX_MARKS: usize = 4096;

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
    /// The offset the last stream reached (the next one starts there).
    ended_at: u64,
    /// Consumers attached (the AOF, the replication backlog): the stream
    /// runs while there is one.
    consumers: usize,
    /// This server is a replica: the stream carries its primary's stream
    /// byte for byte ([`Effects::relay`]) and nothing of its own.
    relaying: bool,
    /// The AOF reads this server's own effects: `stream` on a primary,
    /// `own` on a replica.
    aof: bool,
    /// A replica's own effects, for its AOF (present while relaying with
    /// the AOF on).
    own: Option<effects::Writer>,
    /// Offsets of `own` and of `stream` published together, oldest first
    /// (what the AOF's progress covers of the primary's stream).
    marks: VecDeque<(u64, u64)>,
    /// Ranges of `stream` its AOF must not write (commands for replicas
    /// only), while the AOF reads it; handed to the AOF after each batch.
    aof_skips: Vec<(u64, u64)>,
    /// Such ranges within `unit`, relative to its start.
    unit_skips: Vec<(usize, usize)>,
    /// The last answer of [`Effects::relayed_through`] (it never goes
    /// back, even once the marks that gave it are gone).
    covered: u64,
    /// A stream runs and takes this server's own effects (`on()`).
    emitting: bool,
    /// Nothing is recorded, stream or not: the dataset is being rebuilt
    /// from what the stream's readers already have (DEBUG LOADAOF).
    muted: bool,
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
        self.emitting = !self.muted
            && if self.relaying {
                self.own.is_some()
            } else {
                self.stream.is_some()
            };
    }

    /// Record nothing while `muted` (see [`Effects::muted`]'s field).
    pub fn set_muted(&mut self, muted: bool) {
        self.muted = muted;
        self.sync_emitting();
    }

    /// Commands for replicas only must be kept out of the AOF: it reads
    /// the one stream they go into.
    fn skips_wanted(&self) -> bool {
        self.aof && !self.relaying
    }

    /// The ranges of the stream the AOF must not write, since the last
    /// call (see [`crate::aof::AppendLog::skip`]).
    pub fn take_aof_skips(&mut self) -> Vec<(u64, u64)> {
        std::mem::take(&mut self.aof_skips)
    }

    /// The stream this server's own effects go to.
    #[inline]
    fn target(&mut self) -> Option<&mut effects::Writer> {
        own_target(
            self.emitting,
            self.relaying,
            &mut self.own,
            &mut self.stream,
        )
    }

    /// A replica's stream is its primary's (Valkey's
    /// `replicationFeedStreamFromPrimaryStream`): what the replica applies
    /// is appended verbatim by [`Effects::relay`], so its offsets are its
    /// primary's, and its own effects go only to its AOF's stream. Either
    /// way the next command emitted starts with a SELECT. When the AOF
    /// must now read another stream, its reader is returned: it starts
    /// where the AOF's offsets left off (becoming a replica) or at the
    /// shared stream's end (promotion), once everything before is
    /// published.
    pub fn set_relaying(&mut self, on: bool) -> Option<effects::Reader> {
        let was = std::mem::replace(&mut self.relaying, on);
        self.stream_db = None;
        self.unit.clear();
        self.unit_skips.clear();
        self.unit_ops = 0;
        let mut reader = None;
        if was != on && self.aof {
            self.publish();
            if on {
                let own = effects::Writer::new(self.offset());
                reader = Some(own.reader());
                self.own = Some(own);
                self.covered = self.offset();
                self.drop_consumer();
            } else {
                self.own = None;
                self.marks.clear();
                reader = Some(self.add_consumer());
            }
        }
        self.sync_emitting();
        reader
    }

    /// The AOF starts: a reader of this server's own effects, at their
    /// end. Matched by a [`Effects::detach_aof`].
    pub fn attach_aof(&mut self) -> effects::Reader {
        self.aof = true;
        if !self.relaying {
            return self.attach(self.offset());
        }
        let own = effects::Writer::new(self.offset());
        let reader = own.reader();
        self.own = Some(own);
        self.covered = self.offset();
        self.stream_db = None;
        self.sync_emitting();
        reader
    }

    /// The AOF is gone.
    pub fn detach_aof(&mut self) {
        if !std::mem::replace(&mut self.aof, false) {
            return;
        }
        self.aof_skips.clear();
        if !self.relaying {
            return self.detach();
        }
        self.own = None;
        self.marks.clear();
        self.sync_emitting();
    }

    /// Where the AOF's stream is (its offsets are what the AOF reports
    /// written and fsynced).
    pub fn aof_offset(&self) -> u64 {
        match &self.own {
            Some(w) if self.relaying => w.offset(),
            _ => self.offset(),
        }
    }

    /// A replica's AOF has its own effects up to `aof_offset`: how far
    /// that covers the relayed stream (every relayed byte published with
    /// them or before). `None` when the AOF reads the relayed stream's
    /// own offsets (a primary).
    pub fn relayed_through(&mut self, aof_offset: u64) -> Option<u64> {
        let own = self.own.as_ref().filter(|_| self.relaying)?;
        let covered = if aof_offset >= own.published() {
            self.stream
                .as_ref()
                .map_or(self.ended_at, |w| w.published())
        } else {
            while self.marks.get(1).is_some_and(|m| m.0 <= aof_offset) {
                self.marks.pop_front();
            }
            match self.marks.front() {
                Some(&(o, s)) if o <= aof_offset => s,
                _ => 0,
            }
        };
        self.covered = self.covered.max(covered);
        Some(self.covered)
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
        if self.stream.is_none() {
            self.ended_at = offset;
        }
        let reader = self.add_consumer();
        self.sync_emitting();
        reader
    }

    /// A consumer is gone. Once none is left the stream is dropped (its
    /// offset stays, and a stream started later goes on from it).
    pub fn detach(&mut self) {
        self.drop_consumer();
        self.sync_emitting();
    }

    fn add_consumer(&mut self) -> effects::Reader {
        self.consumers += 1;
        let at = self.ended_at;
        let w = self.stream.get_or_insert_with(|| effects::Writer::new(at));
        w.publish();
        if !self.relaying {
            self.stream_db = None;
        }
        w.reader()
    }

    fn drop_consumer(&mut self) {
        self.consumers = self.consumers.saturating_sub(1);
        if self.consumers > 0 {
            return;
        }
        self.ended_at = self.offset();
        self.stream = None;
        if !self.relaying {
            self.stream_db = None;
            self.unit.clear();
            self.unit_skips.clear();
            self.unit_ops = 0;
        }
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
        if let Some(own) = self.own.as_mut() {
            own.publish();
            let point = (
                own.offset(),
                self.stream.as_ref().map_or(self.ended_at, |w| w.offset()),
            );
            if self.marks.back() != Some(&point) {
                if self.marks.len() == MAX_MARKS {
                    self.marks.pop_front();
                }
                self.marks.push_back(point);
            }
        }
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
    #[inline]
    pub fn emit<'a>(&mut self, db: usize, argv: impl ExactSizeIterator<Item = &'a [u8]>) {
        if self.emitting {
            self.add_to_unit(db, argv, false);
        }
    }

    /// Emit one command for replicas only, never for the AOF (PUBLISH,
    /// as Valkey propagates it): in the unit being built, in database
    /// `db`. A replica emits none (its replicas get its primary's).
    pub fn emit_repl_only<'a>(&mut self, db: usize, argv: impl ExactSizeIterator<Item = &'a [u8]>) {
        if self.emitting && !self.relaying {
            self.add_to_unit(db, argv, true);
        }
    }

    /// `argv` into the unit being built (after a SELECT if its database
    /// differs from the previous command's), or at once outside any call;
    /// `repl_only`: its bytes are marked for the AOF to skip.
    #[inline]
    fn add_to_unit<'a>(
        &mut self,
        db: usize,
        argv: impl ExactSizeIterator<Item = &'a [u8]>,
        repl_only: bool,
    ) {
        if self.depth == 0 {
            return self.append_now(db, argv, repl_only);
        }
        if self.unit_ops == 0 {
            self.unit_first_db = db;
        } else if self.unit_db != db {
            encode_select(db, |b| self.unit.extend_from_slice(b));
        }
        self.unit_db = db;
        let start = self.unit.len();
        resp::write_command(argv, |b| self.unit.extend_from_slice(b));
        if repl_only && self.skips_wanted() {
            self.unit_skips.push((start, self.unit.len()));
        }
        self.unit_ops += 1;
    }

    /// Append one command to the stream at once, as a unit of its own,
    /// ahead of the unit being built (a deletion by expiry or eviction,
    /// which Valkey propagates as it happens).
    pub fn emit_now<'a>(&mut self, db: usize, argv: impl ExactSizeIterator<Item = &'a [u8]>) {
        if self.emitting {
            self.append_now(db, argv, false);
        }
    }

    fn append_now<'a>(
        &mut self,
        db: usize,
        argv: impl ExactSizeIterator<Item = &'a [u8]>,
        repl_only: bool,
    ) {
        let skip = repl_only && self.skips_wanted();
        let select = self.stream_db != Some(db);
        self.stream_db = Some(db);
        let Some(w) = self.target() else {
            return;
        };
        if select {
            encode_select(db, |b| w.append(b));
        }
        let at = w.offset();
        resp::write_command(argv, |b| w.append(b));
        if skip {
            let range = (at, w.offset());
            self.aof_skips.push(range);
        }
    }

    /// Append a command that means the same in every database (PING,
    /// REPLCONF GETACK: what a primary sends its replicas), with no
    /// SELECT, as a unit of its own.
    pub fn emit_anywhere(&mut self, argv: &[&[u8]]) {
        let skip = self.skips_wanted();
        let Some(w) = self
            .stream
            .as_mut()
            .filter(|_| self.emitting && !self.relaying)
        else {
            return;
        };
        let at = w.offset();
        resp::write_command(argv.iter().copied(), |b| w.append(b));
        if skip {
            self.aof_skips.push((at, w.offset()));
        }
    }

    /// A unit is complete: append it to the stream (wrapped in MULTI/EXEC
    /// if it holds more than one command).
    pub fn end_unit(&mut self) {
        if self.unit_ops == 0 {
            return;
        }
        let Some(w) = own_target(
            self.emitting,
            self.relaying,
            &mut self.own,
            &mut self.stream,
        ) else {
            return;
        };
        let wrap = self.unit_ops > 1;
        if wrap {
            w.append(b"*1\r\n$5\r\nMULTI\r\n");
        }
        if self.stream_db != Some(self.unit_first_db) {
            encode_select(self.unit_first_db, |b| w.append(b));
        }
        let at = w.offset();
        w.append(&self.unit);
        self.aof_skips.extend(
            self.unit_skips
                .drain(..)
                .map(|(a, b)| (at + a as u64, at + b as u64)),
        );
        if wrap {
            w.append(b"*1\r\n$4\r\nEXEC\r\n");
        }
        self.stream_db = Some(self.unit_db);
        self.unit.clear();
        self.unit_skips.clear();
        self.unit_ops = 0;
    }

    /// Forget the unit being built: a script stopped by SHUTDOWN NOSAVE
    /// (Valkey exits inside it, before its effects are propagated, so
    /// neither the AOF nor a replica sees half of it).
    pub fn discard_unit(&mut self) {
        self.unit.clear();
        self.unit_skips.clear();
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

/// The stream this server's own effects go to: a replica's own stream,
/// or the one stream of a primary (fields apart, so that the unit being
/// built can be read while it is appended).
#[inline]
fn own_target<'a>(
    emitting: bool,
    relaying: bool,
    own: &'a mut Option<effects::Writer>,
    stream: &'a mut Option<effects::Writer>,
) -> Option<&'a mut effects::Writer> {
    match (emitting, relaying) {
        (false, _) => None,
        (true, true) => own.as_mut(),
        (true, false) => stream.as_mut(),
    }
}

/// `SELECT db` handed to `put` in pieces (see [`resp::write_command`]).
fn encode_select(db: usize, put: impl FnMut(&[u8])) {
    let mut n = [0u8; resp::num::I64_MAX_LEN];
    let n = resp::num::fmt_u64(db as u64, &mut n);
    resp::write_command([&b"SELECT"[..], n].into_iter(), put);
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
        let argv = (0..argv.len()).map(|i| argv.get(i));
        if top && e.depth == 1 && e.unit_ops == 0 {
            // A unit of this one command: straight into the stream, as
            // `end_unit` would append it, without building it first.
            e.emit_now(db, argv);
        } else {
            e.emit(db, argv);
        }
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
    if !srv.effects.on() || !srv.keyspace.expired_logged() {
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

    /// Emit this command as sent, for replicas only (PUBLISH, SPUBLISH:
    /// Valkey's `forceCommandPropagation(c, PROPAGATE_REPL)`).
    pub fn propagate_to_replicas(&mut self, argv: ArgvRef<'_>) {
        if !self.srv.effects.on() {
            return;
        }
        emit_expired(self.srv);
        let db = self.session.db;
        let e = &mut self.srv.effects;
        e.handled = true;
        e.emit_repl_only(db, (0..argv.len()).map(|i| argv.get(i)));
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

#[cfg(test)]
mod tests {
    use super::Effects;

    fn read(r: &mut effects::Reader) -> Vec<u8> {
        let mut out = Vec::new();
        while let Some(s) = r.next_slice() {
            out.extend_from_slice(&s);
        }
        out
    }

    fn set(e: &mut Effects, key: &str) {
        e.emit(0, [&b"SET"[..], key.as_bytes(), b"1"].into_iter());
    }

    const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
    const SELECT0: &[u8] = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n";

    fn set_bytes(key: &str) -> Vec<u8> {
        format!("*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n$1\r\n1\r\n", key.len()).into_bytes()
    }

    #[test]
    fn commands_are_framed_alike_in_a_unit_and_straight_into_the_stream() {
        let long = vec![b'v'; 70_000];
        let argvs: [&[&[u8]]; 4] = [
            &[b"PING"],
            &[b"SET", b"", b"x"],
            &[b"SET", b"k", &long],
            &[
                b"RPUSH", b"l", b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h", b"i",
            ],
        ];
        for argv in argvs {
            let mut expected = format!("*{}\r\n", argv.len()).into_bytes();
            for a in argv {
                expected.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                expected.extend_from_slice(a);
                expected.extend_from_slice(b"\r\n");
            }
            let mut unit = Vec::new();
            resp::encode_command(argv, &mut unit);
            assert_eq!(unit, expected);
            // In place in the tail block, and (10 bytes left) across two.
            for filler in [0, effects::BLOCK_SIZE - 10] {
                let mut w = effects::Writer::new(0);
                let mut r = w.reader();
                w.append(&vec![b'-'; filler]);
                resp::write_command(argv.iter().copied(), |b| w.append(b));
                w.publish();
                assert_eq!(read(&mut r)[filler..], expected[..]);
            }
        }
    }

    #[test]
    fn a_replicas_aof_takes_its_own_effects_while_the_backlog_takes_the_relayed_stream() {
        let mut e = Effects::default();
        let mut aof = e.attach_aof();
        let mut backlog = e.attach(e.offset());
        set(&mut e, "a");
        let before = e.publish();
        let primary = [SELECT0, &set_bytes("a")].concat();
        assert_eq!(read(&mut aof), primary);
        assert_eq!(read(&mut backlog), primary);

        // A replica now: the AOF goes on from its offset in a stream of
        // its own; the primary's PING reaches only the backlog.
        let mut own = e.set_relaying(true).expect("the AOF moves");
        assert_eq!(own.offset(), before);
        e.relay(PING);
        set(&mut e, "b");
        let relayed_end = e.publish();
        assert_eq!(read(&mut backlog), PING);
        assert_eq!(read(&mut own), [SELECT0, &set_bytes("b")].concat());
        assert_eq!(e.aof_offset(), own.offset());
        // The AOF up to where it was covers nothing new; up to its end,
        // everything relayed.
        assert_eq!(e.relayed_through(before), Some(before));
        assert_eq!(e.relayed_through(own.offset()), Some(relayed_end));
        assert!(e.on());
        e.emit_anywhere(&[b"PING"]);
        e.publish();
        assert!(
            read(&mut own).is_empty(),
            "a primary's PING is no effect of ours"
        );

        // Promoted: the AOF rejoins the one stream, at its end.
        let mut shared = e.set_relaying(false).expect("the AOF moves back");
        assert_eq!(shared.offset(), relayed_end);
        set(&mut e, "c");
        e.publish();
        let after = [SELECT0, &set_bytes("c")].concat();
        assert_eq!(read(&mut shared), after);
        assert_eq!(read(&mut backlog), after);
        assert_eq!(e.relayed_through(0), None);
    }

    #[test]
    fn what_only_replicas_get_is_marked_for_the_aof_to_skip() {
        let mut e = Effects::default();
        let mut aof = e.attach_aof();
        let start = e.offset();
        // A unit: a write, then a PUBLISH (wrapped in MULTI ... EXEC).
        e.begin_call(0);
        set(&mut e, "a");
        e.emit_repl_only(0, [&b"PUBLISH"[..], b"c", b"m"].into_iter());
        e.depth -= 1;
        e.end_unit();
        e.emit_anywhere(&[b"PING"]);
        e.publish();
        let bytes = read(&mut aof);
        let skips = e.take_aof_skips();
        assert_eq!(skips.len(), 2, "{skips:?}");
        let cut = |(a, b): (u64, u64)| {
            String::from_utf8_lossy(&bytes[(a - start) as usize..(b - start) as usize]).into_owned()
        };
        assert_eq!(
            cut(skips[0]),
            "*3\r\n$7\r\nPUBLISH\r\n$1\r\nc\r\n$1\r\nm\r\n"
        );
        assert_eq!(cut(skips[1]), "*1\r\n$4\r\nPING\r\n");
        // Without an AOF nothing needs marking.
        e.detach_aof();
        let _backlog = e.attach(e.offset());
        e.emit_anywhere(&[b"PING"]);
        assert!(e.take_aof_skips().is_empty());
    }

    #[test]
    fn without_an_aof_a_replica_emits_nothing_of_its_own() {
        let mut e = Effects::default();
        let mut backlog = e.attach(0);
        assert!(e.set_relaying(true).is_none());
        assert!(!e.on());
        set(&mut e, "a");
        e.relay(PING);
        e.publish();
        assert_eq!(read(&mut backlog), PING);
        // An AOF turned on while a replica reads its own effects only.
        let mut own = e.attach_aof();
        set(&mut e, "b");
        e.relay(PING);
        e.publish();
        assert_eq!(read(&mut own), [SELECT0, &set_bytes("b")].concat());
        assert_eq!(read(&mut backlog), PING);
        e.detach_aof();
        assert!(!e.on());
    }
}
