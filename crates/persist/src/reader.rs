//! The two threads of one load: `rdb-loader` reads, parses and
//! decompresses the file; `rdb-builder` decodes packed values, builds and
//! hashes the entries, and hands them to the execution thread in batches.

use engine::persist::{LoadOptions, LoadSource, LoadStep, LoadedKey, SavedReplication};
use rdb::{Item, Loader};
use std::fs::File;
use std::io::{BufReader, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError};
use store::Entry;

/// Keys per batch handed to the execution thread.
const BATCH: usize = 1024;
/// Batches decoded ahead of the inserts.
const AHEAD: usize = 16;
const READ_BUF: usize = 1 << 20;

enum Msg {
    Keys(Vec<LoadedKey>),
    Function(Vec<u8>),
    Done {
        expired: u64,
        repl: Option<SavedReplication>,
    },
    Failed(String),
}

pub(crate) struct FileSource {
    rx: Receiver<Msg>,
    read: Arc<AtomicU64>,
    /// Where the RDB data ended in the file, once it has (an AOF base may
    /// go on with commands after it).
    end: Arc<AtomicU64>,
    size: u64,
    finished: bool,
}

/// Counts bytes as the loader reads them (INFO loading progress).
struct Counting<R> {
    inner: R,
    read: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

impl FileSource {
    /// `Ok(None)`: no such file. The header is read here, so a file that is
    /// not one we can load fails before the server starts serving.
    pub(crate) fn open(filename: &str, opts: LoadOptions) -> Result<Option<FileSource>, String> {
        let file = match File::open(filename) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("Can't open {filename}: {e}")),
        };
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        let read = Arc::new(AtomicU64::new(0));
        let reader = counted(file, &read);
        let loader = Loader::new(reader, opts.limits).map_err(|e| format!("{filename}: {e}"))?;
        FileSource::spawn(move || Ok(loader), filename, opts, read, size).map(Some)
    }

    /// An RDB read from `input` as it arrives (a replica's diskless load):
    /// even its header is read on the loader thread, so that the caller
    /// never waits for the network; a bad header fails the load.
    pub(crate) fn stream(
        input: Box<dyn Read + Send>,
        name: &str,
        opts: LoadOptions,
    ) -> Result<FileSource, String> {
        let read = Arc::new(AtomicU64::new(0));
        let reader = counted(input, &read);
        let what = name.to_string();
        let open = move || Loader::new(reader, opts.limits).map_err(|e| format!("{what}: {e}"));
        FileSource::spawn(open, name, opts, read, 0)
    }

    /// Start the two threads; `open` makes the parser on the first.
    fn spawn<R: Read + Send + 'static>(
        open: impl FnOnce() -> Result<Loader<R>, String> + Send + 'static,
        name: &str,
        opts: LoadOptions,
        read: Arc<AtomicU64>,
        size: u64,
    ) -> Result<FileSource, String> {
        let (raw_tx, raw_rx) = mpsc::sync_channel(AHEAD);
        let (tx, rx) = mpsc::sync_channel(AHEAD);
        let end = Arc::new(AtomicU64::new(u64::MAX));
        let end_set = end.clone();
        let what = name.to_string();
        std::thread::Builder::new()
            .name("rdb-loader".into())
            .spawn(move || match open() {
                Ok(loader) => read_file(loader, &what, &raw_tx, &end_set),
                Err(e) => {
                    let _ = raw_tx.send(Raw::Failed(e));
                }
            })
            .map_err(|e| format!("can't start the RDB loader thread: {e}"))?;
        let what = name.to_string();
        std::thread::Builder::new()
            .name("rdb-builder".into())
            .spawn(move || build(&raw_rx, opts, &what, &tx))
            .map_err(|e| format!("can't start the RDB builder thread: {e}"))?;
        Ok(FileSource {
            rx,
            read,
            end,
            size,
            finished: false,
        })
    }
}

/// `input`, buffered, counting what is read into `read`.
fn counted<R: Read>(input: R, read: &Arc<AtomicU64>) -> BufReader<Counting<R>> {
    BufReader::with_capacity(
        READ_BUF,
        Counting {
            inner: input,
            read: read.clone(),
        },
    )
}

/// What the reading thread hands the building thread.
enum Raw {
    Items(Vec<Item>),
    Done(Option<SavedReplication>),
    Failed(String),
}

/// The reading thread: parse the file, decompress, and pass items on in
/// batches; packed values (listpacks, intsets, ...) are left to decode on
/// the building thread, so both run at once.
fn read_file<R: Read>(mut loader: Loader<R>, name: &str, tx: &SyncSender<Raw>, end_at: &AtomicU64) {
    loader.defer_packed(true);
    let mut batch = Vec::with_capacity(BATCH);
    // AUX fields about the replication stream (the others are ignored).
    let mut repl_aux = Vec::new();
    let end = loop {
        match loader.next_item() {
            Ok(Some(item @ (Item::Key(_) | Item::Packed(_) | Item::Function(_)))) => {
                batch.push(item);
                if batch.len() == BATCH {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                    if tx.send(Raw::Items(full)).is_err() {
                        return;
                    }
                }
            }
            Ok(Some(Item::Aux { key, value })) => {
                if key.starts_with(b"repl-") {
                    repl_aux.push((key, value));
                }
            }
            Ok(Some(Item::SelectDb(_) | Item::ResizeDb { .. })) => {}
            Ok(None) => {
                end_at.store(loader.offset(), Ordering::Release);
                break Raw::Done(SavedReplication::from_aux(&repl_aux));
            }
            Err(e) => break Raw::Failed(format!("{name}: {e}")),
        }
    };
    if !batch.is_empty() && tx.send(Raw::Items(batch)).is_err() {
        return;
    }
    let _ = tx.send(end);
}

/// The building thread: decode packed values, build and hash entries,
/// hand them to the execution thread; the last message says how it ended.
fn build(rx: &Receiver<Raw>, opts: LoadOptions, name: &str, tx: &SyncSender<Msg>) {
    let mut expired = 0u64;
    let end = 'file: loop {
        let items = match rx.recv() {
            Ok(Raw::Items(items)) => items,
            Ok(Raw::Done(repl)) => break Msg::Done { expired, repl },
            Ok(Raw::Failed(e)) => break Msg::Failed(e),
            Err(_) => break Msg::Failed(format!("{name}: the RDB reader thread died")),
        };
        let mut batch = Vec::with_capacity(items.len());
        for item in items {
            let k = match item {
                Item::Key(k) => k,
                Item::Packed(p) => match p.decode(&opts.limits) {
                    Ok(k) => k,
                    Err(e) => break 'file Msg::Failed(format!("{name}: {e}")),
                },
                Item::Function(code) => {
                    if tx.send(Msg::Function(code)).is_err() {
                        return;
                    }
                    continue;
                }
                _ => continue,
            };
            if opts.key_load_delay_us > 0 {
                std::thread::sleep(std::time::Duration::from_micros(
                    opts.key_load_delay_us as u64,
                ));
            }
            let db = k.db as usize;
            if db >= opts.databases {
                break 'file Msg::Failed(format!(
                    "{name}: key in DB {db}, but the server has {} databases (databases directive)",
                    opts.databases
                ));
            }
            // Keys already expired are not loaded (Valkey, as a primary,
            // does the same).
            if k.expire_ms.is_some_and(|t| t < opts.now_ms) {
                expired += 1;
                continue;
            }
            let mut entry = Entry::keyed(&k.key, k.value);
            entry.set_expire_at_ms(k.expire_ms);
            if let Some(bits) = store::restored_access(opts.policy, opts.now_ms, k.idle_s, k.freq) {
                entry.set_access(bits);
            }
            let hash = store::hash_key(&k.key);
            batch.push(LoadedKey { db, hash, entry });
        }
        if tx.send(Msg::Keys(batch)).is_err() {
            return;
        }
    };
    let _ = tx.send(end);
}

impl FileSource {
    /// The file offset after the RDB data: `u64::MAX` until the whole RDB
    /// was read.
    pub(crate) fn end_offset(&self) -> Arc<AtomicU64> {
        self.end.clone()
    }
}

impl LoadSource for FileSource {
    fn next(&mut self, wait: bool) -> LoadStep {
        if self.finished {
            return LoadStep::Failed("the load already ended".into());
        }
        let msg = if wait {
            match self.rx.recv() {
                Ok(m) => m,
                Err(_) => return LoadStep::Failed("the RDB loader thread died".into()),
            }
        } else {
            match self.rx.try_recv() {
                Ok(m) => m,
                Err(TryRecvError::Empty) => return LoadStep::Pending,
                Err(TryRecvError::Disconnected) => {
                    return LoadStep::Failed("the RDB loader thread died".into());
                }
            }
        };
        match msg {
            Msg::Keys(k) => LoadStep::Keys(k),
            Msg::Function(code) => LoadStep::Function(code),
            Msg::Done { expired, repl } => {
                self.finished = true;
                LoadStep::Done { expired, repl }
            }
            Msg::Failed(e) => {
                self.finished = true;
                LoadStep::Failed(e)
            }
        }
    }

    fn progress(&self) -> (u64, u64) {
        (self.read.load(Ordering::Relaxed), self.size)
    }
}
