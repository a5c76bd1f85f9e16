//! The writer thread of one save.

use engine::persist::{ChannelSink, SaveOptions, SinkMsg};
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;

/// Chunks queued between the execution thread and the writer (each up to
/// ~256 KiB of tokens): how far capture may run ahead of the disk.
const QUEUE: usize = 16;
/// Encoded bytes gathered before each write(2).
const WRITE_BUF: usize = 1 << 20;

/// Valkey's `REDIS_AUTOSYNC_BYTES`: with incremental fsync, the bytes
/// written between two fdatasyncs.
const AUTOSYNC_BYTES: u64 = 4 << 20;

/// When an incrementally synced file is due its next fdatasync.
struct AutoSync {
    every: Option<u64>,
    since: u64,
}

impl AutoSync {
    fn new(on: bool) -> AutoSync {
        AutoSync {
            every: on.then_some(AUTOSYNC_BYTES),
            since: 0,
        }
    }

    /// `n` more bytes are written: whether to sync now.
    fn wrote(&mut self, n: usize) -> bool {
        let Some(every) = self.every else {
            return false;
        };
        self.since += n as u64;
        if self.since < every {
            return false;
        }
        self.since = 0;
        true
    }
}

/// Temp file names are unique within the process.
static SAVES: AtomicU64 = AtomicU64::new(0);

/// Start a save's writer thread: `opts.filename` is written through a
/// temp file in `temp_dir`. The execution thread's end is the sink.
pub(crate) fn start_save(
    opts: SaveOptions,
    temp_dir: &Path,
    role: engine::affinity::Role,
) -> Result<ChannelSink, String> {
    let (mut sink, writer) = ChannelSink::new(QUEUE, "RDB writer thread");
    let n = SAVES.fetch_add(1, Ordering::Relaxed);
    let temp = temp_dir.join(format!("temp-{}-{n}.rdb", std::process::id()));
    let thread = std::thread::Builder::new()
        .name("rdb-writer".into())
        .spawn(move || {
            engine::affinity::pin(role);
            let outcome = write_file(&opts, &temp, &writer.chunks);
            if outcome.is_err() {
                let _ = fs::remove_file(&temp);
            }
            let _ = writer.outcome.send(outcome);
        })
        .map_err(|e| format!("can't start the RDB writer thread: {e}"))?;
    sink.set_thread(thread);
    Ok(sink)
}

/// Write every chunk until Finish; the error says what failed.
fn write_file(opts: &SaveOptions, temp: &PathBuf, rx: &Receiver<SinkMsg>) -> Result<u64, String> {
    let mut file = File::create(temp).map_err(|e| {
        format!(
            "Failed opening the temp RDB file {} (in server root dir {}) for saving: {e}",
            temp.display(),
            cwd()
        )
    })?;
    let mut enc = rdb::Encoder::with_version(opts.compress, opts.checksum, opts.version);
    let mut buf = Vec::with_capacity(WRITE_BUF + WRITE_BUF / 4);
    let mut written = 0u64;
    let mut sync = AutoSync::new(opts.incremental_fsync);
    let mut flush = |buf: &mut Vec<u8>, file: &mut File| -> Result<(), String> {
        file.write_all(buf)
            .map_err(|e| format!("Write error saving DB on disk: {e}"))?;
        written += buf.len() as u64;
        if sync.wrote(buf.len()) {
            file.sync_data()
                .map_err(|e| format!("Write error saving DB on disk (fsync): {e}"))?;
        }
        buf.clear();
        Ok(())
    };
    enc.header(&mut buf);
    loop {
        // The sender gone without Finish: the save was abandoned.
        let msg = rx.recv().map_err(|_| "the save was aborted".to_string())?;
        match msg {
            SinkMsg::Chunk(c) => {
                enc.feed(&c, &mut buf);
                if buf.len() >= WRITE_BUF {
                    flush(&mut buf, &mut file)?;
                }
            }
            SinkMsg::Finish => break,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incremental_fsync_every_4_mib_written_or_never() {
        let mut on = AutoSync::new(true);
        let syncs: Vec<bool> = [1 << 20, 2 << 20, 1 << 20, 1, 4 << 20, 3 << 20]
            .into_iter()
            .map(|n| on.wrote(n))
            .collect();
        assert_eq!(syncs, [false, false, true, false, true, false]);
        let mut off = AutoSync::new(false);
        assert!(!(0..10).any(|_| off.wrote(8 << 20)));
    }
}
