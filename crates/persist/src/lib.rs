//! Persistence files: the threads that write and read RDB files and the
//! append-only file for the engine (`engine::persist::Storage`).
//!
//! ```text
//!  execution thread                      writer thread (one per save)
//!  Capture chunks ──sync_channel(QUEUE)──► Encoder::feed → 1 MiB buffer → write
//!                                          finish: EOF+CRC, fdatasync,
//!                                          rename temp → dbfilename, fsync dir
//!  poll()  ◄──────── outcome ──────────────┘   (error: temp file removed)
//!
//!  rdb-loader (one per load): 1 MiB reads → rdb::Loader (parse, LZF;
//!    packed values passed on undecoded) ──► rdb-builder: decode packed
//!    values, build and hash entries → batches ──► execution thread inserts
//! ```
//!
//! This crate owns the files and these threads, nothing else: it never
//! touches the keyspace (the engine inserts what it decodes and hands it
//! what to write) and holds no state between saves. A save never writes
//! under the real name until the whole file is on disk: a failed or
//! abandoned save leaves the previous dump as it was.
//!
//! The AOF ([`aof`]) reuses both: its RDB base is written by the same
//! writer thread and read back by the same loader threads.

pub mod aof;
mod reader;
mod writer;

use engine::aof::{AofOptions, AofSource, AppendLog, OpenMode};
use engine::persist::{LoadOptions, LoadSource, SaveOptions, SnapshotSink, Storage};
use std::path::Path;

/// Files in the working directory (the server chdir()s to `dir`).
#[derive(Debug, Default)]
pub struct FileStorage;

impl Storage for FileStorage {
    fn save(&mut self, opts: &SaveOptions) -> Result<Box<dyn SnapshotSink>, String> {
        Ok(Box::new(writer::start_save(
            opts.clone(),
            Path::new(""),
            engine::affinity::Role::Bgsave,
        )?))
    }

    fn load(
        &mut self,
        filename: &str,
        opts: LoadOptions,
    ) -> Result<Option<Box<dyn LoadSource>>, String> {
        Ok(reader::FileSource::open(filename, opts)?.map(|s| Box::new(s) as Box<dyn LoadSource>))
    }

    fn load_stream(
        &mut self,
        name: &str,
        input: Box<dyn std::io::Read + Send>,
        opts: LoadOptions,
    ) -> Result<Box<dyn LoadSource>, String> {
        Ok(Box::new(reader::FileSource::stream(input, name, opts)?))
    }

    fn remove(&mut self, filename: &str) -> Result<bool, String> {
        match std::fs::remove_file(filename) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e.to_string()),
        }
    }

    fn open_aof(
        &mut self,
        opts: &AofOptions,
        stream: effects::Reader,
        mode: OpenMode,
    ) -> Result<Box<dyn AppendLog>, String> {
        aof::open(Path::new("."), opts, stream, mode)
    }

    fn load_aof(
        &mut self,
        opts: &AofOptions,
        load: LoadOptions,
    ) -> Result<Option<Box<dyn AofSource>>, String> {
        aof::load(Path::new("."), opts, load)
    }
}
