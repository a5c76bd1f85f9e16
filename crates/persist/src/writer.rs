//! The writer thread of one save.

use engine::persist::{SaveOptions, SnapshotSink};
use rdb::Capture;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError, TrySendError};
use std::thread::JoinHandle;

/// Chunks queued between the execution thread and the writer (each up to
/// ~256 KiB of tokens): how far capture may run ahead of the disk.
const QUEUE: usize = 16;
/// Encoded bytes gathered before each write(2).
const WRITE_BUF: usize = 1 << 20;

enum Msg {
    Chunk(Capture),
    Finish,
}

pub(crate) struct FileSink {
    tx: Option<SyncSender<Msg>>,
    done: Receiver<Result<u64, String>>,
    outcome: Option<Result<u64, String>>,
    thread: Option<JoinHandle<()>>,
}

/// Temp file names are unique within the process.
static SAVES: AtomicU64 = AtomicU64::new(0);

impl FileSink {
    /// Write `opts.filename` through a temp file in `temp_dir`.
    pub(crate) fn start_in(opts: SaveOptions, temp_dir: &Path) -> Result<FileSink, String> {
        let (tx, rx) = mpsc::sync_channel(QUEUE);
        let (done_tx, done) = mpsc::channel();
        let n = SAVES.fetch_add(1, Ordering::Relaxed);
        let temp = temp_dir.join(format!("temp-{}-{n}.rdb", std::process::id()));
        let thread = std::thread::Builder::new()
            .name("rdb-writer".into())
            .spawn(move || {
                let outcome = write_file(&opts, &temp, &rx);
                if outcome.is_err() {
                    let _ = fs::remove_file(&temp);
                }
                let _ = done_tx.send(outcome);
            })
            .map_err(|e| format!("can't start the RDB writer thread: {e}"))?;
        Ok(FileSink {
            tx: Some(tx),
            done,
            outcome: None,
            thread: Some(thread),
        })
    }
}

/// Write every chunk until Finish; the error says what failed.
fn write_file(opts: &SaveOptions, temp: &PathBuf, rx: &Receiver<Msg>) -> Result<u64, String> {
    let mut file = File::create(temp).map_err(|e| {
        format!(
            "Failed opening the temp RDB file {} (in server root dir {}) for saving: {e}",
            temp.display(),
            cwd()
        )
    })?;
    let mut enc = rdb::Encoder::new(opts.compress, opts.checksum);
    let mut buf = Vec::with_capacity(WRITE_BUF + WRITE_BUF / 4);
    let mut written = 0u64;
    let mut flush = |buf: &mut Vec<u8>, file: &mut File| -> Result<(), String> {
        file.write_all(buf)
            .map_err(|e| format!("Write error saving DB on disk: {e}"))?;
        written += buf.len() as u64;
        buf.clear();
        Ok(())
    };
    enc.header(&mut buf);
    loop {
        // The sender gone without Finish: the save was abandoned.
        let msg = rx.recv().map_err(|_| "the save was aborted".to_string())?;
        match msg {
            Msg::Chunk(c) => {
                enc.feed(&c, &mut buf);
                if buf.len() >= WRITE_BUF {
                    flush(&mut buf, &mut file)?;
                }
            }
            Msg::Finish => break,
        }
    }
    enc.finish(&mut buf);
    flush(&mut buf, &mut file)?;
    file.sync_data()
        .map_err(|e| format!("Write error saving DB on disk (fsync): {e}"))?;
    drop(file);
    fs::rename(temp, &opts.filename).map_err(|e| {
        format!(
            "Error moving temp DB file {} on the final destination {} (in server root dir {}): {e}",
            temp.display(),
            opts.filename,
            cwd()
        )
    })?;
    // The rename itself is durable only once the directory is synced.
    let dir = match Path::new(&opts.filename).parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if let Ok(dir) = File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(written)
}

fn cwd() -> String {
    std::env::current_dir()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

impl FileSink {
    fn collect(&mut self, block: bool) -> Option<Result<u64, String>> {
        if self.outcome.is_none() {
            let got = if block {
                self.done.recv().ok()
            } else {
                match self.done.try_recv() {
                    Ok(r) => Some(r),
                    Err(TryRecvError::Empty) => None,
                    Err(TryRecvError::Disconnected) => {
                        Some(Err("the RDB writer thread died".into()))
                    }
                }
            };
            if got.is_some() {
                if let Some(t) = self.thread.take() {
                    let _ = t.join();
                }
                self.outcome = got;
            }
        }
        self.outcome.clone()
    }
}

impl SnapshotSink for FileSink {
    fn push(&mut self, chunk: Capture) -> Result<(), Capture> {
        let Some(tx) = &self.tx else {
            return Ok(());
        };
        match tx.try_send(Msg::Chunk(chunk)) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(Msg::Chunk(c))) => Err(c),
            // The writer stopped on an error: the outcome tells.
            Err(_) => Ok(()),
        }
    }

    fn push_wait(&mut self, chunk: Capture) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Msg::Chunk(chunk));
        }
    }

    fn finish(&mut self) {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(Msg::Finish);
        }
    }

    fn poll(&mut self) -> Option<Result<u64, String>> {
        self.collect(false)
    }

    fn wait(&mut self) -> Result<u64, String> {
        self.finish();
        self.collect(true)
            .unwrap_or_else(|| Err("the RDB writer thread died".into()))
    }

    fn abort(&mut self) {
        // Dropping the sender ends the writer, which removes its file.
        self.tx = None;
        let _ = self.collect(true);
    }
}

impl Drop for FileSink {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
