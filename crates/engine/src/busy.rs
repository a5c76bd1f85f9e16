//! The busy state of a long script (Valkey's `busy-reply-threshold`,
//! alias `lua-time-limit`), SCRIPT KILL and FUNCTION KILL.
//!
//! ```text
//!  EVAL/FCALL ──► begin(): RUNNING, clock started
//!    Lua count hook, every script::HOOK_EVERY instructions ──► BusyState::check
//!       past the threshold: BUSY (logged once)
//!       BUSY: the pump the net layer installed for this thread (inline
//!             mode: its event loop, serving other clients from here)
//!       killed (SCRIPT/FUNCTION KILL, SHUTDOWN NOSAVE): stop the script
//!  end(): IDLE; commands refused meanwhile settle (MULTI flagged)
//!
//!  other clients' commands while BUSY ──► BusyState::answer (any thread,
//!       no engine): -BUSY, the KILLs, FUNCTION STATS, SHUTDOWN NOSAVE
//!       noted; the rest of what Valkey lets through (AUTH, HELLO, MULTI,
//!       WATCH ...) waits for the script's end and runs then
//! ```
//!
//! The state is shared (`Arc`) with the net layer: in threaded mode the
//! IO threads answer from it while the execution thread is inside the
//! script; in inline mode the pump does, on the engine's own thread. The
//! engine itself stays IO-free: it only calls the pump it was given.

use crate::ClientId;
use crate::batch::ArgvRef;
use crate::command::flags::ALLOW_BUSY;
use crate::table::table;
use resp::ReplyBuf;
use std::cell::Cell;
use std::sync::Mutex;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering::*};
use std::time::Instant;

pub const NOTBUSY_ERR: &str = "NOTBUSY No scripts in execution right now.";
pub const UNKILLABLE_PRIMARY_ERR: &str = "UNKILLABLE The busy script was sent by a master instance in the context of replication and cannot be killed.";
pub const UNKILLABLE_ERR: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";
const KILLED_BY_SCRIPT_KILL: &str = "Script killed by user with SCRIPT KILL.";
const KILLED_BY_FUNCTION_KILL: &str = "Script killed by user with FUNCTION KILL.";
const KILLED_BY_SHUTDOWN: &str = "Script killed by SHUTDOWN NOSAVE.";

// `BusyState::phase`; a script that runs but is not busy yet is IDLE
// (nobody else needs to know).
const IDLE: u8 = 0;
const BUSY: u8 = 1;

// Bits of `BusyState::run`, set once per run: the kill decision and the
// first write race (a KILL from an IO thread), so one atomic holds both.
const WROTE: u8 = 1;
const KILL_SCRIPT: u8 = 2;
const KILL_FUNCTION: u8 = 4;
const KILL_SHUTDOWN: u8 = 8;
const KILLED: u8 = KILL_SCRIPT | KILL_FUNCTION | KILL_SHUTDOWN;
/// The script came from our primary (replication): never killed but by
/// SHUTDOWN NOSAVE.
const FROM_PRIMARY: u8 = 16;

/// How often the pump runs while busy (the hook looks more often).
const PUMP_EVERY_NS: u64 = 1_000_000;

/// What [`BusyState::answer`] did with a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BusyAnswer {
    /// Its reply was appended.
    Replied,
    /// AUTH succeeded (reply appended): the client is authenticated from
    /// here on (the engine's session follows after the script).
    Authenticated,
    /// QUIT (reply appended): close once it is sent; nothing after it runs.
    Close,
    /// MULTI (`true`) or DISCARD (`false`) ran (reply appended): the
    /// client is inside a transaction from here on, or no longer.
    Multi(bool),
    /// It runs after the script (it and everything after it from the same
    /// client: replies stay in order).
    Deferred,
}

/// What the engine's thread does for the world while a script is busy
/// (installed by the net layer around a batch with [`with_pump`]).
pub trait BusyPump {
    fn pump(&mut self);
}

/// What FUNCTION STATS shows of a busy function (`running_script`).
#[derive(Clone, Debug, Default)]
pub struct Running {
    pub name: Vec<u8>,
    /// The FCALL as sent.
    pub command: Vec<Vec<u8>>,
    pub libraries: usize,
    pub functions: usize,
}

/// A command answered while busy, counted (and a refused one's MULTI
/// settled) once the script has ended.
#[derive(Clone, Debug)]
struct Refused {
    client: ClientId,
    /// Its table entry (`None`: an unknown command).
    cmd: Option<u32>,
    exec: bool,
    /// Refused (-BUSY, arity...: a rejected call); otherwise a command
    /// that ran here (the KILLs, FUNCTION STATS), with its error if any.
    rejected: bool,
    error: Option<String>,
    /// An AUTH that succeeded: the session is this user's.
    authenticated: Option<crate::acl::UserId>,
    /// A MULTI (`Some(true)`) or DISCARD (`Some(false)`) that ran here:
    /// the session enters or leaves its transaction.
    multi: Option<bool>,
}

impl Refused {
    /// A command refused before it ran (-BUSY, arity, NOAUTH...).
    fn rejected(client: ClientId, cmd: Option<u32>, error: String) -> Self {
        Refused {
            client,
            cmd,
            exec: false,
            rejected: true,
            error: Some(error),
            authenticated: None,
            multi: None,
        }
    }

    /// A command that ran while busy, with its error if any.
    fn ran(client: ClientId, cmd: u32, error: Option<&str>) -> Self {
        Refused {
            client,
            cmd: Some(cmd),
            exec: false,
            rejected: false,
            error: error.map(str::to_string),
            authenticated: None,
            multi: None,
        }
    }
}

/// Who sent a command answered while busy, as the IO layer knows the
/// client from its last request.
#[derive(Clone, Copy, Debug)]
pub struct BusyClient {
    pub id: ClientId,
    /// It speaks RESP3 (FUNCTION STATS is a map then).
    pub resp3: bool,
    /// It is inside MULTI (a refused EXEC is Valkey's EXECABORT).
    pub in_multi: bool,
    /// It is subscribed (in RESP2 only pub/sub commands are allowed).
    pub subscribed: bool,
    /// It has authenticated (or needs not).
    pub authenticated: bool,
}

/// A value on a cache line of its own.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Line<T>(T);

#[derive(Debug, Default)]
pub struct BusyState {
    /// IDLE or BUSY: read by every IO thread on every loop iteration,
    /// written only when a script turns busy and when a busy one ends (a
    /// line of its own: the per-script fields below change with every
    /// EVAL).
    phase: Line<AtomicU8>,
    /// The running script is an EVAL (not a function).
    eval: AtomicBool,
    run: AtomicU8,
    /// When the run began, ns since [`epoch`].
    started_ns: AtomicU64,
    threshold_ms: AtomicU64,
    /// When the pump last ran, ns since [`epoch`].
    pumped_ns: AtomicU64,
    refused: Mutex<Vec<Refused>>,
    any_refused: AtomicBool,
    /// New clients must AUTH (as of the script's start).
    auth_required: AtomicBool,
    /// The busy function, for FUNCTION STATS (taken when it turns busy).
    running: Mutex<Option<Running>>,
    /// The users' credentials, kept current by the engine: AUTH while busy.
    credentials: Mutex<std::sync::Arc<crate::acl::Credentials>>,
    /// Clients that authenticated while busy before the engine knew them
    /// (accepted then): their sessions start as that user.
    authed_early: Mutex<Vec<(ClientId, crate::acl::UserId)>>,
    /// A busy script ended and nobody has asked since ([`BusyState::take_ended`]).
    ended: AtomicBool,
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ns() -> u64 {
    epoch().elapsed().as_nanos() as u64
}

impl BusyState {
    /// A script starts (the engine's thread).
    pub(crate) fn begin(
        &self,
        eval: bool,
        threshold_ms: u64,
        auth_required: bool,
        from_primary: bool,
    ) {
        self.eval.store(eval, Relaxed);
        self.auth_required.store(auth_required, Relaxed);
        self.run
            .store(if from_primary { FROM_PRIMARY } else { 0 }, Relaxed);
        self.threshold_ms.store(threshold_ms, Relaxed);
        self.started_ns.store(now_ns(), Relaxed);
    }

    /// The script has ended. Whether it had been busy.
    pub(crate) fn end(&self) -> bool {
        let was = self.phase.0.load(Relaxed);
        if was == BUSY {
            self.phase.0.store(IDLE, Release);
            self.ended.store(true, Release);
            *self
                .running
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
            crate::log::warning("Slow script finished or killed: the server serves commands again");
        }
        was == BUSY
    }

    /// The running (or last) script was stopped by SHUTDOWN NOSAVE.
    pub(crate) fn stopped_by_shutdown(&self) -> bool {
        self.run.load(Acquire) & KILL_SHUTDOWN != 0
    }

    /// A busy script has ended since the last call (the execution thread
    /// then wakes the IO threads: input they kept waiting runs now).
    pub fn take_ended(&self) -> bool {
        self.ended.load(Relaxed) && self.ended.swap(false, AcqRel)
    }

    /// The users changed (start-up, CONFIG SET requirepass, ACL).
    pub(crate) fn set_credentials(&self, c: std::sync::Arc<crate::acl::Credentials>) {
        *lock(&self.credentials) = c;
    }

    /// A client registered now authenticated while busy, before the
    /// engine knew it: as which user.
    pub(crate) fn take_authed_early(&self, id: ClientId) -> Option<crate::acl::UserId> {
        let mut v = lock(&self.authed_early);
        let i = v.iter().position(|&(c, _)| c == id)?;
        Some(v.swap_remove(i).1)
    }

    /// A client that connects now has to AUTH first (its commands then
    /// wait for the script's end, as an unauthenticated client's do).
    pub fn new_clients_must_auth(&self) -> bool {
        self.auth_required.load(Relaxed)
    }

    /// A script is past the threshold: other clients get -BUSY.
    pub fn is_busy(&self) -> bool {
        self.phase.0.load(Acquire) == BUSY
    }

    /// The script is about to run its first write command (Valkey's
    /// SCRIPT_WRITE_DIRTY): from now on it cannot be killed. `Err`: it was
    /// killed just before (the write must not run).
    pub(crate) fn note_write(&self) -> Result<(), &'static str> {
        let mut cur = self.run.load(Acquire);
        loop {
            if let Some(t) = kill_text(cur) {
                return Err(t);
            }
            match self.run.compare_exchange(cur, cur | WROTE, AcqRel, Acquire) {
                Ok(_) => return Ok(()),
                Err(now) => cur = now,
            }
        }
    }

    /// The engine's thread, every few thousand Lua instructions.
    fn look(&self) -> Option<&'static str> {
        if let Some(t) = kill_text(self.run.load(Acquire)) {
            return Some(t);
        }
        let now = now_ns();
        if self.phase.0.load(Relaxed) != BUSY {
            let elapsed = now.saturating_sub(self.started_ns.load(Relaxed));
            if elapsed < self.threshold_ms.load(Relaxed).saturating_mul(1_000_000) {
                return None;
            }
            if !self.eval.load(Relaxed) {
                *self
                    .running
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = describe();
            }
            self.phase.0.store(BUSY, Release);
            crate::log::warning(&format!(
                "Slow script detected: still in execution after {} milliseconds. You can try killing the script using the {} command.",
                elapsed / 1_000_000,
                if self.eval.load(Relaxed) {
                    "SCRIPT KILL"
                } else {
                    "FUNCTION KILL"
                }
            ));
        }
        if now.saturating_sub(self.pumped_ns.load(Relaxed)) >= PUMP_EVERY_NS {
            self.pumped_ns.store(now, Relaxed);
            run_pump();
        }
        kill_text(self.run.load(Acquire))
    }

    fn busy_error(&self) -> &'static str {
        if self.eval.load(Relaxed) {
            crate::compat::BUSY_EVAL.get()
        } else {
            crate::compat::BUSY_FUNCTION.get()
        }
    }

    /// SCRIPT KILL (`eval`) or FUNCTION KILL: Valkey's `scriptKill`.
    pub fn kill(&self, eval: bool) -> Result<(), &'static str> {
        if !self.is_busy() {
            return Err(NOTBUSY_ERR);
        }
        let mine = self.eval.load(Relaxed) == eval;
        let bit = if eval { KILL_SCRIPT } else { KILL_FUNCTION };
        let mut cur = self.run.load(Acquire);
        loop {
            if cur & FROM_PRIMARY != 0 {
                return Err(UNKILLABLE_PRIMARY_ERR);
            }
            if cur & WROTE != 0 {
                return Err(UNKILLABLE_ERR);
            }
            if !mine {
                return Err(self.busy_error());
            }
            if cur & KILLED != 0 {
                return Ok(());
            }
            match self.run.compare_exchange(cur, cur | bit, AcqRel, Acquire) {
                Ok(_) => return Ok(()),
                Err(now) => cur = now,
            }
        }
    }

    /// Another client's command while busy (any thread; the engine is
    /// not touched). Valkey's `processCommand` under
    /// `isInsideYieldingLongCommand`: commands not flagged `allow-busy`
    /// get -BUSY; SCRIPT KILL, FUNCTION KILL and FUNCTION STATS are
    /// answered here (`resp3`: the client's protocol); SHUTDOWN NOSAVE
    /// stops the script and runs after it. What Valkey would refuse
    /// before the BUSY check (unknown command, wrong arity) and what needs
    /// the client's session (AUTH, HELLO, MULTI, WATCH, QUIT, RESET) is
    /// deferred.
    pub fn answer(&self, who: BusyClient, argv: ArgvRef<'_>, out: &mut ReplyBuf) -> BusyAnswer {
        if !self.is_busy() || argv.is_empty() {
            return BusyAnswer::Deferred;
        }
        let t = table();
        let idx = t.lookup(argv.get(0)).map_or(u32::MAX, |i| i as u32);
        let i = match crate::resolve_static(t, argv, idx) {
            Ok(i) => i,
            Err(r) => {
                // Refused before the BUSY check, as in Valkey.
                error(out, &r.msg);
                self.note(Refused::rejected(who.id, r.cmd.map(|c| c as u32), r.msg));
                return BusyAnswer::Replied;
            }
        };
        let spec = t.entries[i].spec;
        if !who.authenticated && spec.flags & crate::command::flags::NO_AUTH == 0 {
            // Valkey checks AUTH before BUSY: a stranger cannot kill.
            let msg = "NOAUTH Authentication required.".to_string();
            error(out, &msg);
            self.note(Refused::rejected(who.id, Some(i as u32), msg));
            return BusyAnswer::Replied;
        }
        if who.subscribed
            && !who.resp3
            && !crate::cmd::pubsub::allowed_in_subscribed_mode(&t.entries[i].fullname)
        {
            // Valkey checks the RESP2 pub/sub context before BUSY too.
            let msg = format!(
                "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                t.entries[i].fullname
            );
            error(out, &msg);
            self.note(Refused::rejected(who.id, Some(i as u32), msg));
            return BusyAnswer::Replied;
        }
        if who.in_multi && spec.flags & crate::command::flags::NO_MULTI != 0 {
            // Before BUSY too; it dooms the transaction as there.
            let msg = "ERR Command not allowed inside a transaction".to_string();
            error(out, &msg);
            self.note(Refused::rejected(who.id, Some(i as u32), msg));
            return BusyAnswer::Replied;
        }
        let ran = |out: &mut ReplyBuf, r: Result<(), &'static str>| {
            match r {
                Ok(()) => out.extend_from_slice(b"+OK\r\n"),
                Err(e) => error(out, e),
            }
            self.note(Refused::ran(who.id, i as u32, r.err()));
        };
        if spec.flags & ALLOW_BUSY == 0 {
            let exec = spec.name == "exec";
            self.refuse(who, i, exec, out);
            // A refused EXEC ends the transaction (EXECABORT).
            return if exec && who.in_multi {
                BusyAnswer::Multi(false)
            } else {
                BusyAnswer::Replied
            };
        }
        let parent = t.entries[i].parent.map(|p| t.entries[p].spec.name);
        match (parent, spec.name) {
            (None, "quit") => {
                ran(out, Ok(()));
                return BusyAnswer::Close;
            }
            (None, "discard") if who.in_multi => return self.transaction(who, i, false, out),
            // Queued in Valkey (only EXEC, DISCARD, MULTI, WATCH, QUIT and
            // RESET run inside MULTI): queued here once the script ends.
            _ if who.in_multi => return BusyAnswer::Deferred,
            (None, "multi") => return self.transaction(who, i, true, out),
            (None, "discard") => ran(out, Err("ERR DISCARD without MULTI")),
            (None, "auth") => return self.auth(who, i, argv, out),
            (Some("script"), "kill") => ran(out, self.kill(true)),
            (Some("function"), "kill") => ran(out, self.kill(false)),
            (Some("function"), "stats") if self.eval.load(Relaxed) => {
                self.refuse(who, i, false, out)
            }
            (Some("function"), "stats") => {
                let running = self
                    .running
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone();
                let Some(r) = running else {
                    return BusyAnswer::Deferred;
                };
                let elapsed = now_ns().saturating_sub(self.started_ns.load(Relaxed));
                function_stats(out, who.resp3, &r, elapsed / 1_000_000);
                self.note(Refused::ran(who.id, i as u32, None));
            }
            (None, "shutdown") => {
                let nosave = (1..argv.len()).any(|a| argv.get(a).eq_ignore_ascii_case(b"nosave"));
                if !nosave {
                    self.refuse(who, i, false, out);
                    return BusyAnswer::Replied;
                }
                // Stopped even after writes; the SHUTDOWN itself runs next.
                self.run.fetch_or(KILL_SHUTDOWN, AcqRel);
                return BusyAnswer::Deferred;
            }
            _ => return BusyAnswer::Deferred,
        }
        BusyAnswer::Replied
    }

    /// MULTI (`enter`) or DISCARD inside one: +OK, and the session
    /// follows when the script ends.
    fn transaction(
        &self,
        who: BusyClient,
        cmd: usize,
        enter: bool,
        out: &mut ReplyBuf,
    ) -> BusyAnswer {
        out.extend_from_slice(b"+OK\r\n");
        self.note(Refused {
            multi: Some(enter),
            ..Refused::ran(who.id, cmd as u32, None)
        });
        BusyAnswer::Multi(enter)
    }

    /// -BUSY (EXEC inside MULTI: Valkey's EXECABORT with the BUSY text).
    fn refuse(&self, who: BusyClient, cmd: usize, exec: bool, out: &mut ReplyBuf) {
        let busy = self.busy_error();
        let text = if exec && who.in_multi {
            format!("EXECABORT Transaction discarded because of: {busy}")
        } else {
            busy.to_string()
        };
        error(out, &text);
        self.note(Refused {
            exec,
            ..Refused::rejected(who.id, Some(cmd as u32), text)
        });
    }

    /// AUTH while busy, as the engine's `auth` (`default` without a
    /// password: AUTH <password> is an error).
    fn auth(
        &self,
        who: BusyClient,
        cmd: usize,
        argv: ArgvRef<'_>,
        out: &mut ReplyBuf,
    ) -> BusyAnswer {
        let credentials = lock(&self.credentials).clone();
        let mut user = None;
        let result = if argv.len() > 3 {
            Err(crate::cmd::SYNTAX_ERR)
        } else if argv.len() == 2 && credentials.default_nopass() {
            Err(
                "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
            )
        } else {
            let (name, pass) = if argv.len() == 2 {
                (&b"default"[..], argv.get(1))
            } else {
                (argv.get(1), argv.get(2))
            };
            user = credentials.authenticate(name, pass);
            if user.is_some() {
                Ok(())
            } else {
                Err(crate::cmd::connection::WRONGPASS)
            }
        };
        match result {
            Ok(()) => out.extend_from_slice(b"+OK\r\n"),
            Err(e) => error(out, e),
        }
        self.note(Refused {
            authenticated: user,
            ..Refused::ran(who.id, cmd as u32, result.err())
        });
        if result.is_ok() {
            BusyAnswer::Authenticated
        } else {
            BusyAnswer::Replied
        }
    }

    fn note(&self, r: Refused) {
        self.refused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(r);
        self.any_refused.store(true, Release);
    }

    /// Commands were refused with -BUSY and are not settled yet.
    pub(crate) fn has_refused(&self) -> bool {
        self.any_refused.load(Acquire)
    }

    /// After the script (the engine's thread): count the refused commands
    /// as Valkey counts rejected calls, and doom the transactions they
    /// were sent in (an EXEC refused ends its transaction, as Valkey's
    /// EXECABORT does).
    pub(crate) fn settle(&self, srv: &mut crate::server::Server) {
        if !self.any_refused.swap(false, AcqRel) {
            return;
        }
        let refused = std::mem::take(
            &mut *self
                .refused
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for r in refused {
            if let Some(st) = r.cmd.and_then(|c| srv.stats.commands.get_mut(c as usize)) {
                if r.rejected {
                    st.rejected_calls += 1;
                } else {
                    st.calls += 1;
                    st.failed_calls += u64::from(r.error.is_some());
                }
            }
            if let Some(text) = &r.error {
                srv.stats.record_error(text);
            }
            if let Some(user) = r.authenticated {
                match srv.clients.map.get_mut(&r.client.0).and_then(Option::take) {
                    Some(mut sess) => {
                        crate::acl::login(srv, &mut sess, user);
                        if let Some(slot) = srv.clients.map.get_mut(&r.client.0) {
                            *slot = Some(sess);
                        }
                    }
                    // Accepted while busy, registered next.
                    None => lock(&self.authed_early).push((r.client, user)),
                }
            }
            if !r.rejected && r.multi.is_none() {
                continue;
            }
            // Taken out of its slot for the moment, as a running job's is.
            let Some(mut sess) = srv.clients.map.get_mut(&r.client.0).and_then(Option::take) else {
                continue;
            };
            match r.multi {
                Some(true) => {
                    sess.multi = Some(Box::default());
                    sess.multi_state = true;
                }
                Some(false) => {
                    sess.multi = None;
                    crate::watch::unwatch_all(srv, &mut sess);
                }
                None if r.exec && sess.multi.is_some() => {
                    sess.multi = None;
                    crate::watch::unwatch_all(srv, &mut sess);
                }
                None => {
                    if let Some(m) = sess.multi.as_deref_mut() {
                        m.dirty = true;
                    }
                }
            }
            if let Some(slot) = srv.clients.map.get_mut(&r.client.0) {
                *slot = Some(sess);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn kill_text(run: u8) -> Option<&'static str> {
    // A KILL is only taken before the first write, and a write only
    // before a KILL (both by compare-and-swap): never both bits.
    if run & KILL_SHUTDOWN != 0 {
        Some(KILLED_BY_SHUTDOWN)
    } else if run & KILL_SCRIPT != 0 {
        Some(KILLED_BY_SCRIPT_KILL)
    } else if run & KILL_FUNCTION != 0 {
        Some(KILLED_BY_FUNCTION_KILL)
    } else {
        None
    }
}

/// FUNCTION STATS while a function is busy, as Valkey's
/// `functionStatsCommand`.
fn function_stats(out: &mut ReplyBuf, resp3: bool, r: &Running, duration_ms: u64) {
    let proto = if resp3 {
        resp::Protocol::Resp3
    } else {
        resp::Protocol::Resp2
    };
    let mut w = resp::ReplyWriter::for_buf(out, proto);
    w.map_len(2);
    w.bulk(b"running_script");
    w.map_len(3);
    w.bulk(b"name");
    w.bulk(&r.name);
    w.bulk(b"command");
    w.array_len(r.command.len());
    for a in &r.command {
        w.bulk(a);
    }
    w.bulk(b"duration_ms");
    w.int(duration_ms as i64);
    w.bulk(b"engines");
    w.map_len(1);
    w.bulk(b"LUA");
    w.map_len(2);
    w.bulk(b"libraries_count");
    w.int(r.libraries as i64);
    w.bulk(b"functions_count");
    w.int(r.functions as i64);
}

fn error(out: &mut ReplyBuf, text: &str) {
    out.extend_from_slice(b"-");
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// The hook's view: the state behind an `Arc` the script crate keeps.
#[derive(Debug, Default)]
pub struct Watch(pub std::sync::Arc<BusyState>);

impl script::Watchdog for Watch {
    fn check(&self) -> Option<&'static str> {
        self.0.look()
    }
}

thread_local! {
    /// A `*mut &mut dyn BusyPump` while [`with_pump`] runs on this thread.
    static PUMP: Cell<*mut ()> = const { Cell::new(std::ptr::null_mut()) };
}

/// Run `f` (a batch) with `pump` reachable from a busy script's hook on
/// this thread.
pub fn with_pump<R>(pump: &mut dyn BusyPump, f: impl FnOnce() -> R) -> R {
    struct Restore(*mut ());
    impl Drop for Restore {
        fn drop(&mut self) {
            PUMP.with(|p| p.set(self.0));
        }
    }
    let mut p: &mut dyn BusyPump = pump;
    let prev = PUMP.with(|c| c.replace(&mut p as *mut &mut dyn BusyPump as *mut ()));
    let _restore = Restore(prev);
    f()
}

thread_local! {
    /// A `*const &dyn Fn() -> Running` while [`with_running`] runs.
    static DESCRIBE: Cell<*const ()> = const { Cell::new(std::ptr::null()) };
}

/// Run `f` (a function) with `describe` telling FUNCTION STATS what runs,
/// asked only if it turns busy (nothing is copied for a short one).
pub(crate) fn with_running<R>(describe: &dyn Fn() -> Running, f: impl FnOnce() -> R) -> R {
    struct Restore(*const ());
    impl Drop for Restore {
        fn drop(&mut self) {
            DESCRIBE.with(|c| c.set(self.0));
        }
    }
    let d: &dyn Fn() -> Running = describe;
    let prev = DESCRIBE.with(|c| c.replace(&d as *const &dyn Fn() -> Running as *const ()));
    let _restore = Restore(prev);
    f()
}

fn describe() -> Option<Running> {
    let p = DESCRIBE.with(Cell::get);
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` was stored by `with_running` on this thread and points
    // to its local `&dyn Fn`, which lives until `with_running` returns
    // (its Restore guard resets the cell first).
    Some(unsafe { (*(p as *const &dyn Fn() -> Running))() })
}

fn run_pump() {
    let p = PUMP.with(|c| c.replace(std::ptr::null_mut()));
    if p.is_null() {
        return;
    }
    struct Restore(*mut ());
    impl Drop for Restore {
        fn drop(&mut self) {
            PUMP.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(p);
    // SAFETY: `p` was stored by `with_pump` on this thread and points to
    // its local `&mut dyn BusyPump`, which lives until `with_pump`
    // returns (and the Restore guard there clears it first); the cell is
    // emptied while the pump runs, so no second reference is made.
    unsafe { (*(p as *mut &mut dyn BusyPump)).pump() }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run that is busy at once (threshold 0).
    fn busy(eval: bool, from_primary: bool) -> BusyState {
        let b = BusyState::default();
        b.begin(eval, 0, false, from_primary);
        assert_eq!(b.look(), None);
        assert!(b.is_busy());
        b
    }

    #[test]
    fn a_kill_and_the_first_write_exclude_each_other() {
        // Killed first: the write is refused, the script stops.
        let b = busy(true, false);
        assert_eq!(b.kill(true), Ok(()));
        assert_eq!(b.note_write(), Err(KILLED_BY_SCRIPT_KILL));
        assert_eq!(b.look(), Some(KILLED_BY_SCRIPT_KILL));
        // Wrote first: unkillable, the script goes on.
        let b = busy(true, false);
        assert_eq!(b.note_write(), Ok(()));
        assert_eq!(b.kill(true), Err(UNKILLABLE_ERR));
        assert_eq!(b.kill(false), Err(UNKILLABLE_ERR));
        assert_eq!(b.look(), None);
        // SHUTDOWN NOSAVE stops it even so.
        b.run.fetch_or(KILL_SHUTDOWN, AcqRel);
        assert_eq!(b.look(), Some(KILLED_BY_SHUTDOWN));
        assert!(b.stopped_by_shutdown());
    }

    #[test]
    fn each_kill_stops_only_its_own_kind() {
        let b = busy(false, false);
        assert_eq!(b.kill(true), Err(crate::compat::BUSY_FUNCTION.get()));
        assert_eq!(b.look(), None);
        assert_eq!(b.kill(false), Ok(()));
        assert_eq!(b.look(), Some(KILLED_BY_FUNCTION_KILL));
        let b = busy(true, false);
        assert_eq!(b.kill(false), Err(crate::compat::BUSY_EVAL.get()));
    }

    #[test]
    fn not_busy_until_the_threshold_and_never_after_the_end() {
        let b = BusyState::default();
        assert_eq!(b.kill(true), Err(NOTBUSY_ERR));
        b.begin(true, 60_000, false, false);
        assert_eq!(b.look(), None);
        assert!(!b.is_busy());
        assert_eq!(b.kill(true), Err(NOTBUSY_ERR));
        assert!(!b.end());
        let b = busy(true, false);
        assert!(b.end());
        assert!(b.take_ended());
        assert!(!b.take_ended());
        assert_eq!(b.kill(true), Err(NOTBUSY_ERR));
    }

    #[test]
    fn a_script_from_our_primary_is_unkillable() {
        let b = busy(true, true);
        assert_eq!(b.kill(true), Err(UNKILLABLE_PRIMARY_ERR));
        assert_eq!(b.look(), None);
        // The next run starts clean.
        b.end();
        let b2 = busy(true, false);
        assert_eq!(b2.kill(true), Ok(()));
    }
}
