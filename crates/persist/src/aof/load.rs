//! Reading an AOF directory back at start-up: the manifest, then the base
//! and each incr file in order, handed to the engine a chunk at a time
//! (an RDB part through the RDB loader threads, commands in pieces of a
//! few MiB parsed by `commands::Scanner`).
//!
//! Bad input is handled as Valkey's `loadAppendOnlyFiles` does: a listed
//! file that is missing fails before anything is loaded; a partial command
//! (or a MULTI without its EXEC) at the end of the last file is cut off
//! the file with `aof-load-truncated`, and fails otherwise or in any other
//! file; bytes that are not commands fail with the file and offset.

use super::AofDir;
use super::commands::{End, Scanner};
use super::manifest;
use crate::reader::FileSource;
use engine::aof::{AofChunk, AofOptions, AofSource, Commands};
use engine::log;
use engine::persist::LoadOptions;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Bytes of commands handed over per chunk.
const CHUNK: usize = 4 << 20;

struct Listed {
    name: String,
    path: PathBuf,
    size: u64,
    base: bool,
}

/// The file being read as commands.
struct Reading {
    idx: usize,
    file: File,
    scanner: Scanner,
    /// File bytes from `scanner.offset()` on.
    buf: Vec<u8>,
    /// How many bytes `buf` should hold before the next scan.
    want: usize,
    eof: bool,
}

/// An RDB part handed over: where it ends decides whether commands follow.
struct RdbPart {
    idx: usize,
    end: Arc<AtomicU64>,
}

pub(crate) struct FileAofSource {
    files: Vec<Listed>,
    next: usize,
    reading: Option<Reading>,
    rdb: Option<RdbPart>,
    /// Bytes of the files read to their end, and of the current command
    /// file's reads (for INFO's loading progress).
    files_done: u64,
    read_in_file: u64,
    started: Instant,
    load: LoadOptions,
    load_truncated: bool,
}

impl FileAofSource {
    /// `Ok(None)`: no manifest (or one that lists no base nor incr file).
    pub(crate) fn open(
        root: &std::path::Path,
        opts: &AofOptions,
        load: LoadOptions,
    ) -> Result<Option<FileAofSource>, String> {
        let dir = AofDir::new(root, opts);
        let Some(m) = manifest::read(&dir.path(&dir.manifest_name()))? else {
            return Ok(None);
        };
        let mut files = Vec::new();
        for e in m.loaded() {
            let path = dir.path(&e.name);
            let size = std::fs::metadata(&path).map(|md| md.len()).map_err(|err| {
                format!(
                    "Unable to obtain the AOF file {} length. stat: {} (listed in {})",
                    e.name,
                    super::strerror(&err),
                    dir.manifest_name()
                )
            })?;
            files.push(Listed {
                name: e.name.clone(),
                path,
                size,
                base: Some(e) == m.base.as_ref(),
            });
        }
        if files.is_empty() {
            return Ok(None);
        }
        Ok(Some(FileAofSource {
            files,
            next: 0,
            reading: None,
            rdb: None,
            files_done: 0,
            read_in_file: 0,
            started: Instant::now(),
            load,
            load_truncated: opts.load_truncated,
        }))
    }

    fn loaded(&mut self, idx: usize) {
        self.files_done += self.files[idx].size;
        self.read_in_file = 0;
        let f = &self.files[idx];
        log::notice(&format!(
            "DB loaded from {} file {}: {:.3} seconds",
            if f.base { "base" } else { "incr" },
            f.name,
            self.started.elapsed().as_secs_f64()
        ));
    }

    fn open_file(&self, idx: usize) -> Result<File, String> {
        let f = &self.files[idx];
        File::open(&f.path).map_err(|e| {
            format!(
                "Fatal error: can't open the append log file {} for reading: {}",
                f.name,
                super::strerror(&e)
            )
        })
    }

    fn start_commands(&mut self, idx: usize, at: u64) -> Result<(), String> {
        let mut file = self.open_file(idx)?;
        if at > 0 {
            file.seek(SeekFrom::Start(at))
                .map_err(|e| self.read_error(idx, &e))?;
        }
        self.read_in_file = at;
        self.reading = Some(Reading {
            idx,
            file,
            scanner: Scanner::new(at),
            buf: Vec::new(),
            want: CHUNK,
            eof: false,
        });
        Ok(())
    }

    fn read_error(&self, idx: usize, e: &std::io::Error) -> String {
        format!(
            "Unrecoverable error reading the append only file {}: {}",
            self.files[idx].name,
            super::strerror(e)
        )
    }

    /// The next chunk of commands of the file being read; `None` at its
    /// (clean or repaired) end.
    fn read_chunk(&mut self) -> Result<Option<AofChunk>, String> {
        let rd = self.reading.as_mut().expect("a file being read");
        loop {
            if !rd.eof && rd.buf.len() < rd.want {
                let ask = (rd.want - rd.buf.len()) as u64;
                let got = (&mut rd.file)
                    .take(ask)
                    .read_to_end(&mut rd.buf)
                    .map_err(|e| {
                        format!(
                            "Unrecoverable error reading the append only file {}: {}",
                            self.files[rd.idx].name,
                            super::strerror(&e)
                        )
                    })?;
                rd.eof = (got as u64) < ask;
                self.read_in_file += got as u64;
            }
            let (mut args, mut argc) = (Vec::new(), Vec::new());
            let s = rd
                .scanner
                .scan(&rd.buf, rd.eof, &mut args, &mut argc)
                .map_err(|e| {
                    format!(
                        "Bad file format reading the append only file {} at offset {}: {}",
                        self.files[rd.idx].name, e.offset, e.reason
                    )
                })?;
            if !argc.is_empty() {
                let mut rest = Vec::with_capacity(CHUNK.max(rd.buf.len() - s.consumed));
                rest.extend_from_slice(&rd.buf[s.consumed..]);
                let mut data = std::mem::replace(&mut rd.buf, rest);
                data.truncate(s.consumed);
                rd.want = CHUNK;
                return Ok(Some(AofChunk::Commands(Commands { data, args, argc })));
            }
            rd.buf.drain(..s.consumed);
            if rd.eof {
                let (idx, end) = (rd.idx, rd.scanner.end(rd.buf.len()));
                return self.finish_file(idx, end).map(|()| None);
            }
            rd.want = rd.buf.len() + CHUNK.max(s.need.unwrap_or(0).saturating_sub(rd.buf.len()));
        }
    }

    /// A file read to its end: fine, repaired, or an error.
    fn finish_file(&mut self, idx: usize, end: End) -> Result<(), String> {
        let End::Truncated {
            at,
            keep,
            open_multi,
        } = end
        else {
            return Ok(());
        };
        let name = &self.files[idx].name;
        let last = idx + 1 == self.files.len();
        if open_multi {
            log::warning(&format!(
                "Revert incomplete MULTI/EXEC transaction in AOF file {name}"
            ));
        }
        let what = if open_multi {
            format!("a MULTI without its EXEC (from offset {keep})")
        } else {
            format!("a partial command at offset {at}")
        };
        if self.load_truncated && last {
            log::warning(&format!(
                "!!! Warning: short read while loading the AOF file {name}!!!"
            ));
            log::warning(&format!(
                "!!! Truncating the AOF {name} at offset {keep} !!!"
            ));
            let cut = OpenOptions::new()
                .write(true)
                .open(&self.files[idx].path)
                .and_then(|f| f.set_len(keep));
            match cut {
                Ok(()) => {
                    log::warning(&format!(
                        "AOF {name} loaded anyway because aof-load-truncated is enabled"
                    ));
                    return Ok(());
                }
                Err(e) => log::warning(&format!(
                    "Error truncating the AOF file {name}: {}",
                    super::strerror(&e)
                )),
            }
        } else if self.load_truncated {
            return Err(format!(
                "Fatal error: the truncated file is not the last file: {name} ends with {what}"
            ));
        }
        Err(format!(
            "Unexpected end of file reading the append only file {name}: it ends with {what}. \
             You can: 1) Make a backup of your AOF file, then use ./valkey-check-aof --fix <filename.manifest>. \
             2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server."
        ))
    }
}

impl AofSource for FileAofSource {
    fn progress(&self) -> (u64, u64) {
        let total = self.files.iter().map(|f| f.size).sum();
        ((self.files_done + self.read_in_file).min(total), total)
    }

    fn next(&mut self) -> Result<Option<AofChunk>, String> {
        loop {
            if let Some(part) = self.rdb.take() {
                // Commands may follow an RDB preamble (an old-style AOF).
                let end = part.end.load(Ordering::Acquire);
                if end < self.files[part.idx].size {
                    log::notice("Reading the remaining AOF tail...");
                    self.start_commands(part.idx, end)?;
                } else {
                    self.loaded(part.idx);
                }
                continue;
            }
            if self.reading.is_some() {
                if let Some(chunk) = self.read_chunk()? {
                    return Ok(Some(chunk));
                }
                let idx = self.reading.take().expect("checked").idx;
                self.loaded(idx);
                continue;
            }
            let idx = self.next;
            let Some(f) = self.files.get(idx) else {
                return Ok(None);
            };
            self.next += 1;
            self.started = Instant::now();
            if f.size == 0 {
                continue;
            }
            let mut sig = [0u8; 5];
            let mut file = self.open_file(idx)?;
            let n = (&mut file)
                .take(5)
                .read(&mut sig)
                .map_err(|e| self.read_error(idx, &e))?;
            if n == 5 && &sig == b"REDIS" {
                log::notice("Reading RDB base file on AOF loading...");
                let path = f.path.to_string_lossy().into_owned();
                let src = FileSource::open(&path, self.load)?
                    .ok_or_else(|| format!("The append log file {} doesn't exist", f.name))?;
                self.rdb = Some(RdbPart {
                    idx,
                    end: src.end_offset(),
                });
                return Ok(Some(AofChunk::Rdb(Box::new(src))));
            }
            self.start_commands(idx, 0)?;
        }
    }
}
