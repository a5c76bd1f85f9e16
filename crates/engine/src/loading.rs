//! Loading a snapshot: a decoder thread (the [`LoadSource`]) reads the
//! file and builds entries; the execution thread only inserts them, in
//! slices, answering `-LOADING` to commands meanwhile (those flagged
//! `loading`, such as INFO, still run).
//!
//! A load into [`Staging`] (a replica's `repl-diskless-load swapdb`)
//! leaves the live dataset alone and replaces it only once the file is
//! whole; when it continues the replica's own history the live dataset is
//! served meanwhile (Valkey's async loading: only commands flagged
//! `no-async-loading` get `-LOADING`).
//!
//! A bad file stops the server (as Valkey does): a half-loaded keyspace
//! is never served.

use crate::log;
use crate::persist::{LoadSource, LoadStep};
use crate::server::Server;
use std::time::{Duration, Instant};

/// Execution-thread time one loading step may take while clients wait.
const STEP_BUDGET: Duration = Duration::from_millis(2);

pub struct Loading {
    source: Box<dyn LoadSource>,
    pub started: Instant,
    pub start_unix_s: i64,
    pub loaded: u64,
    /// The last step found nothing decoded yet.
    pub waiting: bool,
    /// The start-up load: the file's replication id and offset are taken
    /// up (not for DEBUG RELOAD, nor a replica's full sync).
    pub at_startup: bool,
    /// Where the keys go when they must not replace the live ones yet.
    staging: Option<Staging>,
    /// A key already held is replaced by the file's (DEBUG RELOAD MERGE)
    /// rather than failing the load.
    pub merge: bool,
    /// An AOF's commands being replayed (the load is an AOF's).
    pub replay: Option<Box<crate::aof_replay::Replay>>,
}

/// The databases and libraries a staged load fills.
pub struct Staging {
    dbs: Vec<store::Db>,
    functions: Option<Box<script::functions::Functions>>,
    /// Clients are served from the live dataset meanwhile.
    serving: bool,
}

impl Staging {
    /// Empty databases like the live ones; `serving`: clients go on
    /// being served from the live ones during the load.
    pub fn new(srv: &Server, serving: bool) -> Staging {
        Staging {
            dbs: srv.keyspace.dbs.iter().map(|db| db.staging()).collect(),
            functions: None,
            serving,
        }
    }
}

impl Loading {
    /// Clients are served during this load (Valkey's `async_loading`).
    pub fn serving(&self) -> bool {
        self.staging.as_ref().is_some_and(|s| s.serving)
    }
}

/// Whether a command with `flags` is refused while a load runs: all but
/// those flagged `loading`, or during a load that serves clients only
/// those flagged `no-async-loading` (Valkey's processCommand).
pub fn refuses(srv: &Server, flags: u32) -> bool {
    use crate::command::flags::{LOADING, NO_ASYNC_LOADING};
    match &srv.persist.loading {
        Some(l) if l.serving() => flags & NO_ASYNC_LOADING != 0,
        Some(_) => flags & LOADING == 0,
        None => false,
    }
}

/// Open `dbfilename` and begin loading it. `Ok(false)`: no file.
pub fn start(srv: &mut Server, now_ms: i64) -> Result<bool, String> {
    let name = srv.config.dbfilename.clone();
    start_file(srv, &name, now_ms)
}

/// Open `name` (relative to `dir`) and begin loading it. `Ok(false)`: no
/// file.
pub fn start_file(srv: &mut Server, name: &str, now_ms: i64) -> Result<bool, String> {
    let opts = crate::persist::load_options(srv, now_ms);
    let Some(storage) = srv.persist.storage.as_mut() else {
        return Ok(false);
    };
    let Some(source) = storage.load(name, opts)? else {
        return Ok(false);
    };
    begin(srv, source, now_ms);
    Ok(true)
}

/// Begin loading an RDB read from `input` as it arrives (a replica's
/// diskless load), into `staging` if given.
pub fn start_stream(
    srv: &mut Server,
    input: Box<dyn std::io::Read + Send>,
    staging: Option<Staging>,
    now_ms: i64,
) -> Result<(), String> {
    let opts = crate::persist::load_options(srv, now_ms);
    let Some(storage) = srv.persist.storage.as_mut() else {
        return Err("no storage configured".into());
    };
    let source = storage.load_stream("the primary's RDB", input, opts)?;
    begin(srv, source, now_ms);
    if let Some(l) = srv.persist.loading.as_mut() {
        l.staging = staging;
    }
    Ok(())
}

pub(crate) fn begin(srv: &mut Server, source: Box<dyn LoadSource>, now_ms: i64) {
    srv.persist.loading = Some(Loading {
        source,
        started: Instant::now(),
        start_unix_s: now_ms / 1000,
        loaded: 0,
        waiting: false,
        at_startup: false,
        staging: None,
        merge: false,
        replay: None,
    });
}

/// Give up the load in progress; what a staged load filled is freed.
pub fn abandon(srv: &mut Server) {
    let Some(ld) = srv.persist.loading.take() else {
        return;
    };
    if let Some(replay) = ld.replay {
        crate::aof_replay::abandon(srv, *replay);
    }
    for db in ld.staging.into_iter().flat_map(|s| s.dbs) {
        srv.lazyfree.free_db(db);
    }
}

/// What a step left to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// More keys are ready.
    Busy,
    /// Waiting for the decoder.
    Waiting,
    Done,
}

/// Insert decoded keys until `deadline` (`None`: to the end). An error
/// names what was wrong with the file.
pub fn step(srv: &mut Server, deadline: Option<Instant>) -> Result<Progress, String> {
    let past = |d: Option<Instant>| d.is_some_and(|d| Instant::now() >= d);
    loop {
        if crate::aof_replay::has_pending(srv) {
            if !crate::aof_replay::run(srv, deadline)? || past(deadline) {
                return Ok(Progress::Busy);
            }
            continue;
        }
        let Some(ld) = srv.persist.loading.as_mut() else {
            return Ok(Progress::Done);
        };
        match ld.source.next(deadline.is_none()) {
            LoadStep::Keys(keys) => {
                ld.waiting = false;
                let dbs = match ld.staging.as_mut() {
                    Some(s) => &mut s.dbs,
                    None => &mut srv.keyspace.dbs,
                };
                for k in keys {
                    let Some(db) = dbs.get_mut(k.db) else {
                        return Err(format!("DB index {} is out of range", k.db));
                    };
                    if let Some(dup) = db.insert_loaded(k.hash, k.entry)
                        && !ld.merge
                    {
                        return Err(format!(
                            "RDB has duplicated key '{}' in DB {}",
                            String::from_utf8_lossy(dup.key()),
                            k.db
                        ));
                    }
                    ld.loaded += 1;
                }
            }
            LoadStep::Function(code) => {
                ld.waiting = false;
                // A library already held fails the load, as a key does,
                // unless DEBUG RELOAD MERGE asked to replace it (every
                // other load starts without functions).
                let functions = match ld.staging.as_mut() {
                    Some(s) => &mut s.functions,
                    None => &mut srv.functions,
                };
                let f = functions.get_or_insert_with(Box::default);
                if let Err(e) = f.load(&code, ld.merge) {
                    return Err(format!("Failed loading library: {e}"));
                }
            }
            LoadStep::Commands(cmds) => {
                ld.waiting = false;
                crate::aof_replay::queue(ld, cmds)?;
            }
            LoadStep::Pending => {
                ld.waiting = true;
                return Ok(Progress::Waiting);
            }
            LoadStep::Done { expired, repl } => {
                let mut ld = srv.persist.loading.take().expect("loading");
                srv.persist.last_load_loaded = ld.loaded;
                srv.persist.last_load_expired = expired;
                if let Some(replay) = ld.replay.take() {
                    crate::aof_replay::finish(srv, *replay, ld.started)?;
                    return Ok(Progress::Done);
                }
                if let Some(staged) = ld.staging.take() {
                    for (live, new) in srv.keyspace.dbs.iter_mut().zip(staged.dbs) {
                        let old = live.replace_keys(new);
                        srv.lazyfree.free_db(old);
                    }
                    srv.functions = staged.functions;
                }
                match repl {
                    Some(saved) if ld.at_startup => crate::replication::restore_saved(srv, saved),
                    // A full sync's file: the stream that follows runs in
                    // the database it names (a replica's replicas get a
                    // stream that does not start with a SELECT).
                    Some(saved) if srv.repl.primary.as_ref().is_some_and(|p| p.loading) => {
                        crate::replication::set_stream_db(srv, saved.stream_db)
                    }
                    _ => {}
                }
                log::notice(&format!(
                    "Done loading RDB, keys loaded: {}, keys expired: {expired}.",
                    ld.loaded
                ));
                log::notice(&format!(
                    "DB loaded from disk: {:.3} seconds",
                    ld.started.elapsed().as_secs_f64()
                ));
                return Ok(Progress::Done);
            }
            LoadStep::Failed(e) => return Err(e),
        }
        if past(deadline) {
            return Ok(Progress::Busy);
        }
    }
}

/// One slice of the start-up load.
pub fn background_step(srv: &mut Server) -> Result<Progress, String> {
    step(srv, Some(Instant::now() + STEP_BUDGET))
}

/// (bytes loaded, file size) of the load in progress; an AOF's commands
/// count once they have run.
pub fn progress(srv: &Server) -> Option<(u64, u64)> {
    srv.persist.loading.as_ref().map(|l| {
        let (read, size) = l.source.progress();
        let unrun = l.replay.as_ref().map_or(0, |r| r.unrun_bytes());
        (read.saturating_sub(unrun), size)
    })
}
