//! The append-only file in Valkey 7+'s multi-part layout: a directory
//! (`appenddirname`) with a manifest naming one base (an RDB file, or
//! commands) and the incr files (RESP commands) written after it.
//!
//! ```text
//!  appendonlydir/
//!    appendonly.aof.manifest       file appendonly.aof.2.base.rdb seq 2 type b
//!    appendonly.aof.2.base.rdb     file appendonly.aof.2.incr.aof seq 2 type i
//!    appendonly.aof.2.incr.aof     ◄── aof-writer appends the effects stream
//! ```
//!
//! * [`manifest`]: the manifest's text (pure parse/format) and its atomic
//!   write.
//! * [`commands`]: the command files' parser (pure), for the loader and
//!   the fuzzer.
//! * `log`: the open AOF ([`engine::aof::AppendLog`]): writer and fsync
//!   threads, rewrites.
//! * `load`: reading it back ([`engine::aof::AofSource`]).
//!
//! Paths are relative to a root, the server's `dir` (it chdir()s there,
//! so `FileStorage` passes "."); the tests pass a directory of their own.
//!
//! Where the files differ from Valkey's: a rewrite's base is always RDB
//! (`.base.rdb`), also with `aof-use-rdb-preamble no` (Valkey then writes
//! commands; both load either). An AOF opened by CONFIG SET appendonly
//! yes writes its first incr file under its final name (Valkey: a
//! `temp-...incr` file renamed when the first rewrite ends); it is listed
//! only by the manifest that rewrite writes, as in Valkey.

pub mod commands;
mod load;
mod log;
pub mod manifest;

use engine::aof::{AofOptions, AofSource, AppendLog, OpenMode};
use engine::persist::LoadOptions;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// Open the AOF under `root` for appending what `reader` publishes.
pub fn open(
    root: &Path,
    opts: &AofOptions,
    reader: effects::Reader,
    mode: OpenMode,
) -> Result<Box<dyn AppendLog>, String> {
    Ok(Box::new(log::FileLog::open(root, opts, reader, mode)?))
}

/// Read the AOF under `root`: `Ok(None)` when it has no manifest.
pub fn load(
    root: &Path,
    opts: &AofOptions,
    load: LoadOptions,
) -> Result<Option<Box<dyn AofSource>>, String> {
    Ok(load::FileAofSource::open(root, opts, load)?.map(|s| Box::new(s) as Box<dyn AofSource>))
}

/// The names of the files in the AOF directory.
struct AofDir {
    /// The server's `dir` (temp files of a rewrite go there, as Valkey's).
    root: PathBuf,
    /// `root/appenddirname`.
    dir: PathBuf,
    dirname: String,
    filename: String,
}

impl AofDir {
    fn new(root: &Path, opts: &AofOptions) -> AofDir {
        AofDir {
            root: root.to_path_buf(),
            dir: root.join(&opts.dirname),
            dirname: opts.dirname.clone(),
            filename: opts.filename.clone(),
        }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
    fn manifest_name(&self) -> String {
        format!("{}.manifest", self.filename)
    }
    fn incr_name(&self, seq: i64) -> String {
        format!("{}.{seq}.incr.aof", self.filename)
    }
    /// The base is always written as RDB (see the module docs).
    fn base_name(&self, seq: i64) -> String {
        format!("{}.{seq}.base.rdb", self.filename)
    }
}

/// The OS error's text alone, as C's `strerror` gives it.
fn strerror(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.rfind(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// fsync a directory, so a rename or a new file in it is durable.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
