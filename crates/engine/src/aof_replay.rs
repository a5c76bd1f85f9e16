//! Replaying an append-only file: at start-up as a background load, the
//! way an RDB file loads (clients connect meanwhile and get `-LOADING`,
//! INFO shows `loading:1` and the progress), and all at once for DEBUG
//! LOADAOF.
//!
//! ```text
//!  AofSource (ringkv-persist: the manifest, the base, the incr files)
//!    └─ AofLoad, a LoadSource over it ─► crate::loading::step
//!         the RDB base ─► keys, inserted as any RDB load's
//!         commands     ─► Replay: run by the AOF's own client
//!                         (LOADING_CLIENT), SLICE at a time, until the
//!                         step's deadline
//!  the end ─► the AOF opens for appending (start-up)
//! ```
//!
//! While a slice runs, `Aof::replaying` is set (no OOM refusal, no key
//! deleted for an expiry time already past: a later command of the file
//! may still need it) and the AOF's client is in the client table; between
//! slices both are gone, so other clients' commands (only those Valkey
//! allows during a load) and CLIENT LIST see the server as they would any
//! loading one. Active expiry stays paused for the whole load.

use crate::aof::{AofChunk, AofSource, Commands, LOADING_CLIENT};
use crate::batch::{CommandHint, CommandsView, NameCache};
use crate::loading::Loading;
use crate::log;
use crate::persist::{LoadSource, LoadStep};
use crate::server::Server;
use crate::session::Session;
use std::time::{Duration, Instant};

/// Commands one slice runs between deadline checks.
const SLICE: usize = 256;

/// `key-load-delay`, applied to each replayed command as Valkey does (so
/// a test can watch an AOF load): such a load runs one command a slice.
fn delay_per_command(srv: &Server) -> Option<Duration> {
    u64::try_from(srv.config.key_load_delay)
        .ok()
        .filter(|&us| us > 0)
        .map(Duration::from_micros)
}

/// An AOF read as one load: its RDB base's keys, then its commands.
struct AofLoad {
    aof: Box<dyn AofSource>,
    /// The RDB part being read.
    rdb: Option<Box<dyn LoadSource>>,
    /// Keys the RDB part handed over so far.
    rdb_keys: u64,
    /// Keys the RDB parts skipped as already expired.
    expired: u64,
}

impl LoadSource for AofLoad {
    fn next(&mut self, wait: bool) -> LoadStep {
        loop {
            if let Some(rdb) = self.rdb.as_mut() {
                match rdb.next(wait) {
                    LoadStep::Done { expired, .. } => {
                        // The base's replication id is not taken up: an
                        // AOF load starts a new history, as Valkey's.
                        log::notice(&format!(
                            "Done loading RDB, keys loaded: {}, keys expired: {expired}.",
                            self.rdb_keys
                        ));
                        self.expired += expired;
                        self.rdb = None;
                    }
                    LoadStep::Keys(keys) => {
                        self.rdb_keys += keys.len() as u64;
                        return LoadStep::Keys(keys);
                    }
                    step => return step,
                }
            }
            match self.aof.next() {
                Ok(Some(AofChunk::Rdb(src))) => {
                    self.rdb = Some(src);
                    self.rdb_keys = 0;
                }
                Ok(Some(AofChunk::Commands(cmds))) => return LoadStep::Commands(cmds),
                Ok(None) => {
                    return LoadStep::Done {
                        expired: self.expired,
                        repl: None,
                    };
                }
                Err(e) => return LoadStep::Failed(e),
            }
        }
    }

    fn progress(&self) -> (u64, u64) {
        let (read, total) = self.aof.progress();
        let in_rdb = self.rdb.as_ref().map_or(0, |r| r.progress().0);
        (read + in_rdb, total)
    }
}

/// A replay's state, beside the [`Loading`] that reads the files.
pub struct Replay {
    /// The AOF's client between slices (its database, an open MULTI).
    session: Option<Box<Session>>,
    /// The commands read and not yet run.
    pending: Option<Pending>,
    /// Each command's table entry and key hash, looked up once (the
    /// unknown-command check and the execution share them).
    names: NameCache,
    hints: Vec<CommandHint>,
    commands: u64,
    /// Each database's `expiry_paused` before the load, put back after.
    expiry_paused: Vec<bool>,
    /// The start-up load: the AOF opens for appending once it is whole.
    at_startup: bool,
}

struct Pending {
    cmds: Commands,
    /// The next command to run, and its first argument.
    next: usize,
    arg: usize,
}

impl Replay {
    /// Bytes read from the files whose commands have not run yet (about:
    /// from the next command's first argument on), which INFO's loading
    /// progress leaves out.
    pub fn unrun_bytes(&self) -> u64 {
        self.pending.as_ref().map_or(0, |p| {
            let at = p
                .cmds
                .args
                .get(p.arg)
                .map_or(p.cmds.data.len(), |a| a.start);
            (p.cmds.data.len() - at) as u64
        })
    }
}

/// Begin replaying `source`; [`crate::loading::step`] does the work.
pub fn begin(srv: &mut Server, source: Box<dyn AofSource>, at_startup: bool, now_ms: i64) {
    let mut session = Session::new(LOADING_CLIENT);
    session.authenticated = true;
    session.user = crate::acl::SUPERUSER;
    let expiry_paused = srv.keyspace.dbs.iter().map(|d| d.expiry_paused).collect();
    for db in &mut srv.keyspace.dbs {
        db.expiry_paused = true;
    }
    let load = AofLoad {
        aof: source,
        rdb: None,
        rdb_keys: 0,
        expired: 0,
    };
    crate::loading::begin(srv, Box::new(load), now_ms);
    if let Some(ld) = srv.persist.loading.as_mut() {
        ld.replay = Some(Box::new(Replay {
            session: Some(Box::new(session)),
            pending: None,
            names: NameCache::default(),
            hints: Vec::new(),
            commands: 0,
            expiry_paused,
            at_startup,
        }));
    }
}

/// Commands the load handed over, to run before it reads on.
pub fn queue(ld: &mut Loading, cmds: Commands) -> Result<(), String> {
    let Some(replay) = ld.replay.as_mut() else {
        return Err("commands found in an RDB file".into());
    };
    replay.pending = Some(Pending {
        cmds,
        next: 0,
        arg: 0,
    });
    Ok(())
}

/// Whether commands are waiting to run.
pub fn has_pending(srv: &Server) -> bool {
    srv.persist
        .loading
        .as_ref()
        .and_then(|l| l.replay.as_ref())
        .is_some_and(|r| r.pending.is_some())
}

/// Run the waiting commands until they are done (`Ok(true)`) or
/// `deadline` passes (`Ok(false)`). An unknown command fails the load, as
/// in Valkey.
pub fn run(srv: &mut Server, deadline: Option<Instant>) -> Result<bool, String> {
    let Some(replay) = srv.persist.loading.as_mut().and_then(|l| l.replay.as_mut()) else {
        return Ok(true);
    };
    let (Some(mut p), Some(session)) = (replay.pending.take(), replay.session.take()) else {
        return Ok(true);
    };
    let mut names = std::mem::take(&mut replay.names);
    let mut hints = std::mem::take(&mut replay.hints);
    srv.clients.map.insert(LOADING_CLIENT.0, Some(session));
    srv.aof.replaying = true;
    let mut ran = 0u64;
    let delay = delay_per_command(srv);
    let result = loop {
        let slice = if delay.is_some() { 1 } else { SLICE };
        let n = slice.min(p.cmds.argc.len() - p.next);
        let argc = &p.cmds.argc[p.next..p.next + n];
        let nargs: usize = argc.iter().map(|&c| c as usize).sum();
        let mut view = CommandsView {
            data: &p.cmds.data,
            args: &p.cmds.args[p.arg..p.arg + nargs],
            argc,
            hints: &[],
        };
        hints.clear();
        hints.extend(
            view.iter()
                .map(|argv| CommandHint::of_cached(argv, &mut names)),
        );
        if let Some((argv, _)) = view
            .iter()
            .zip(&hints)
            .find(|(_, h)| h.idx == CommandHint::UNKNOWN)
        {
            break Err(format!(
                "Unknown command '{}' reading the append only file",
                String::from_utf8_lossy(argv.get(0))
            ));
        }
        view.hints = &hints;
        if let Some(d) = delay {
            std::thread::sleep(d);
        }
        let mut out = resp::ReplyBuf::default();
        let mut job = crate::Job::new(LOADING_CLIENT, view, &mut out);
        crate::execute_replayed(srv, &mut job);
        p.next += n;
        p.arg += nargs;
        ran += n as u64;
        if p.next == p.cmds.argc.len() {
            break Ok(true);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break Ok(false);
        }
    };
    srv.aof.replaying = false;
    let session = srv.clients.map.remove(&LOADING_CLIENT.0).flatten();
    if let Some(replay) = srv.persist.loading.as_mut().and_then(|l| l.replay.as_mut()) {
        replay.session = session;
        replay.names = names;
        replay.hints = hints;
        replay.commands += ran;
        if result == Ok(false) {
            replay.pending = Some(p);
        }
    }
    result
}

/// The load ended before it was whole: put back what it changed.
pub fn abandon(srv: &mut Server, replay: Replay) {
    for (db, paused) in srv.keyspace.dbs.iter_mut().zip(replay.expiry_paused) {
        db.expiry_paused = paused;
    }
}

/// The load that began at `started` is whole: put back what it changed;
/// a start-up load opens the AOF for appending.
pub fn finish(srv: &mut Server, replay: Replay, started: Instant) -> Result<(), String> {
    let (commands, at_startup) = (replay.commands, replay.at_startup);
    abandon(srv, replay);
    srv.aof.loaded_commands = commands;
    log::notice(&format!(
        "DB loaded from append only file: {:.3} seconds",
        started.elapsed().as_secs_f64()
    ));
    if at_startup {
        crate::aof::open_loaded(srv)?;
    }
    Ok(())
}
