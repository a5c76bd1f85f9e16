//! BGSAVE, SAVE, DEBUG RELOAD and loading through an in-memory `Storage`:
//! the engine captures, an `rdb::Encoder` writes to a buffer, an
//! `rdb::Loader` reads it back. The writer is slowed on purpose so the
//! capture interleaves with commands.

#[path = "core_util.rs"]
mod util;

use engine::Config;
use engine::persist::{
    LoadOptions, LoadSource, LoadStep, LoadedKey, SaveOptions, SnapshotSink, Storage,
};
use ringkv_engine as engine;
use std::sync::{Arc, Mutex};
use util::*;

/// The "disk": one file's bytes.
type Disk = Arc<Mutex<Option<Vec<u8>>>>;

struct MemStorage {
    disk: Disk,
    /// Every `slow`-th push is accepted (the writer is behind otherwise).
    slow: u32,
    fail: bool,
}

struct MemSink {
    disk: Disk,
    enc: rdb::Encoder,
    buf: Vec<u8>,
    slow: u32,
    pushes: u32,
    fail: bool,
    done: Option<Result<u64, String>>,
}

impl SnapshotSink for MemSink {
    fn push(&mut self, chunk: rdb::Capture) -> Result<(), rdb::Capture> {
        self.pushes += 1;
        if self.slow > 1 && !self.pushes.is_multiple_of(self.slow) {
            return Err(chunk);
        }
        self.push_wait(chunk);
        Ok(())
    }
    fn push_wait(&mut self, chunk: rdb::Capture) {
        self.enc.feed(&chunk, &mut self.buf);
    }
    fn finish(&mut self) {
        if self.fail {
            self.done = Some(Err("No space left on device".into()));
            return;
        }
        self.enc.finish(&mut self.buf);
        let n = self.buf.len() as u64;
        *self.disk.lock().unwrap() = Some(std::mem::take(&mut self.buf));
        self.done = Some(Ok(n));
    }
    fn poll(&mut self) -> Option<Result<u64, String>> {
        self.done.clone()
    }
    fn wait(&mut self) -> Result<u64, String> {
        if self.done.is_none() {
            self.finish();
        }
        self.done.clone().unwrap()
    }
    fn abort(&mut self) {}
}

struct MemSource {
    keys: Vec<LoadedKey>,
}

impl LoadSource for MemSource {
    fn next(&mut self, _wait: bool) -> LoadStep {
        if self.keys.is_empty() {
            return LoadStep::Done {
                expired: 0,
                repl: None,
            };
        }
        let n = self.keys.len().min(100);
        LoadStep::Keys(self.keys.drain(..n).collect())
    }
    fn progress(&self) -> (u64, u64) {
        (0, 0)
    }
}

impl Storage for MemStorage {
    fn save(&mut self, opts: &SaveOptions) -> Result<Box<dyn SnapshotSink>, String> {
        let mut enc = rdb::Encoder::new(opts.compress, opts.checksum);
        let mut buf = Vec::new();
        enc.header(&mut buf);
        Ok(Box::new(MemSink {
            disk: self.disk.clone(),
            enc,
            buf,
            slow: self.slow,
            pushes: 0,
            fail: self.fail,
            done: None,
        }))
    }
    fn load(
        &mut self,
        _filename: &str,
        opts: LoadOptions,
    ) -> Result<Option<Box<dyn LoadSource>>, String> {
        let Some(bytes) = self.disk.lock().unwrap().clone() else {
            return Ok(None);
        };
        let mut loader = rdb::Loader::new(&bytes[..], opts.limits).map_err(|e| e.to_string())?;
        let mut keys = Vec::new();
        while let Some(item) = loader.next_item().map_err(|e| e.to_string())? {
            if let rdb::Item::Key(k) = item {
                let mut entry = store::Entry::keyed(&k.key, k.value);
                entry.set_expire_at_ms(k.expire_ms);
                keys.push(LoadedKey {
                    db: k.db as usize,
                    hash: store::hash_key(&k.key),
                    entry,
                });
            }
        }
        Ok(Some(Box::new(MemSource { keys })))
    }
}

fn with_storage(disk: &Disk, slow: u32, fail: bool) -> engine::Engine {
    let cfg = Config::load(None, &["--enable-debug-command".into(), "yes".into()]).unwrap();
    let mut e = engine_with(cfg);
    e.set_storage(Box::new(MemStorage {
        disk: disk.clone(),
        slow,
        fail,
    }));
    e
}

/// A fresh engine on the same disk, loaded; `(key, GET reply)` of `keys`.
fn reload(disk: &Disk, keys: &[String]) -> Vec<(String, String)> {
    let mut e = with_storage(disk, 1, false);
    e.load_at_startup().unwrap();
    for _ in 0..10_000 {
        e.background_step();
        if e.background_wait().is_none() {
            break;
        }
    }
    let c = connect(&mut e);
    keys.iter()
        .map(|k| (k.clone(), cmd(&mut e, c, &["get", k])))
        .collect()
}

#[test]
fn bgsave_is_the_dataset_of_its_instant_while_writes_interleave() {
    let disk: Disk = Arc::default();
    let mut e = with_storage(&disk, 7, false);
    let c = connect(&mut e);
    let n = 5000;
    for i in 0..n {
        cmd(&mut e, c, &["set", &format!("k:{i}"), "v0"]);
    }
    // 10 µs a key at least: 5,000 keys take 50 ms, some 200 steps of
    // 250 µs (with 2 µs a kernel with precise sleeps finished in 45).
    cmd(&mut e, c, &["config", "set", "rdb-key-save-delay", "10"]);
    assert_eq!(
        cmd(&mut e, c, &["bgsave"]),
        "+Background saving started\r\n"
    );
    assert_eq!(
        cmd(&mut e, c, &["bgsave"]),
        "-ERR Background save already in progress\r\n"
    );
    // Writes, steps of the capture, more writes, until it is done.
    let mut i = 0;
    let mut steps = 0;
    while e.background_wait().is_some() {
        let k = format!("k:{}", (i as u64 * 7919) % n as u64);
        match i % 4 {
            0 => cmd(&mut e, c, &["set", &k, "v1"]),
            1 => cmd(&mut e, c, &["del", &k]),
            2 => cmd(&mut e, c, &["set", &format!("new:{i}"), "x"]),
            _ => cmd(&mut e, c, &["append", &k, "-more"]),
        };
        i += 1;
        e.background_step();
        if i == 100 {
            let info = cmd(&mut e, c, &["info", "persistence"]);
            assert!(
                !info.contains(&format!("current_save_keys_processed:{n}\r\n")),
                "captured before the writes: {info}"
            );
        }
        steps += 1;
        assert!(steps < 1_000_000, "the save never finished");
    }
    assert!(i > 100, "the save finished before the writes ({i})");
    let info = cmd(&mut e, c, &["info", "persistence"]);
    assert!(info.contains("rdb_last_bgsave_status:ok"), "{info}");
    assert!(info.contains("rdb_bgsave_in_progress:0"), "{info}");
    let keys: Vec<String> = (0..n).map(|i| format!("k:{i}")).collect();
    for (k, v) in reload(&disk, &keys) {
        assert_eq!(v, "$2\r\nv0\r\n", "{k}");
    }
    let news: Vec<String> = (0..i).map(|j| format!("new:{j}")).collect();
    assert!(reload(&disk, &news).iter().all(|(_, v)| v == "$-1\r\n"));
}

#[test]
fn failed_bgsave_reports_err_and_denies_writes_until_a_good_save() {
    let disk: Disk = Arc::default();
    let mut e = with_storage(&disk, 1, true);
    let c = connect(&mut e);
    cmd(&mut e, c, &["set", "a", "1"]);
    cmd(&mut e, c, &["bgsave"]);
    while e.background_wait().is_some() {
        e.background_step();
    }
    let info = cmd(&mut e, c, &["info", "persistence"]);
    assert!(info.contains("rdb_last_bgsave_status:err"), "{info}");
    let r = cmd(&mut e, c, &["set", "b", "2"]);
    assert!(
        r.starts_with("-MISCONF Valkey is configured to save RDB snapshots"),
        "{r}"
    );
    assert_eq!(cmd(&mut e, c, &["get", "a"]), "$1\r\n1\r\n");
    assert_eq!(
        cmd(
            &mut e,
            c,
            &["config", "set", "stop-writes-on-bgsave-error", "no"]
        ),
        "+OK\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["set", "b", "2"]), "+OK\r\n");
}

#[test]
fn save_then_debug_reload_keeps_everything_and_resets_the_dirty_counter() {
    let disk: Disk = Arc::default();
    let mut e = with_storage(&disk, 1, false);
    let c = connect(&mut e);
    cmd(&mut e, c, &["set", "s", "x"]);
    cmd(&mut e, c, &["rpush", "l", "a", "b"]);
    cmd(&mut e, c, &["hset", "h", "f", "v"]);
    cmd(&mut e, c, &["zadd", "z", "1.5", "m"]);
    cmd(&mut e, c, &["sadd", "st", "1", "2"]);
    cmd(&mut e, c, &["pexpire", "s", "100000000"]);
    let info = cmd(&mut e, c, &["info", "persistence"]);
    // As Valkey counts: RPUSH of 2 and SADD of 2 are two changes each.
    assert!(info.contains("rdb_changes_since_last_save:8"), "{info}");
    cmd(&mut e, c, &["hset", "h2", "a", "1", "b", "2", "f", "3"]);
    cmd(&mut e, c, &["zadd", "z2", "1", "m", "2", "n"]);
    cmd(&mut e, c, &["srem", "st", "1", "2", "3"]);
    let info = cmd(&mut e, c, &["info", "persistence"]);
    assert!(info.contains("rdb_changes_since_last_save:15"), "{info}");
    cmd(&mut e, c, &["sadd", "st", "1", "2"]);
    assert_eq!(cmd(&mut e, c, &["save"]), "+OK\r\n");
    let info = cmd(&mut e, c, &["info", "persistence"]);
    assert!(info.contains("rdb_changes_since_last_save:0"), "{info}");
    assert_eq!(cmd(&mut e, c, &["debug", "reload"]), "+OK\r\n");
    assert_eq!(
        cmd(&mut e, c, &["lrange", "l", "0", "-1"]),
        "*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    );
    assert_eq!(cmd(&mut e, c, &["zscore", "z", "m"]), "$3\r\n1.5\r\n");
    assert_eq!(cmd(&mut e, c, &["hget", "h", "f"]), "$1\r\nv\r\n");
    assert_eq!(cmd(&mut e, c, &["scard", "st"]), ":2\r\n");
    let ttl: i64 = cmd(&mut e, c, &["pttl", "s"])[1..].trim().parse().unwrap();
    assert!(ttl > 99_000_000, "{ttl}");
}

#[test]
fn without_storage_save_fails_and_nothing_loads() {
    let mut e = engine();
    let c = connect(&mut e);
    assert!(cmd(&mut e, c, &["save"]).starts_with("-ERR"));
    assert!(cmd(&mut e, c, &["bgsave"]).starts_with("-ERR"));
    e.load_at_startup().unwrap();
    assert!(e.background_wait().is_none());
}

#[test]
fn debug_reload_options_choose_what_is_saved_flushed_and_merged() {
    let disk: Disk = Arc::default();
    let mut e = with_storage(&disk, 1, false);
    let c = connect(&mut e);
    cmd(&mut e, c, &["mset", "a", "1", "b", "1"]);
    assert_eq!(cmd(&mut e, c, &["save"]), "+OK\r\n");
    cmd(&mut e, c, &["mset", "b", "2", "c", "2"]);
    // NOSAVE: the file as it is replaces the dataset.
    assert_eq!(cmd(&mut e, c, &["debug", "reload", "nosave"]), "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["dbsize"]), ":2\r\n");
    assert_eq!(cmd(&mut e, c, &["get", "b"]), "$1\r\n1\r\n");
    // NOFLUSH MERGE: the file's keys join what is held, its values win.
    cmd(&mut e, c, &["mset", "b", "3", "c", "3"]);
    let merged = cmd(
        &mut e,
        c,
        &["debug", "reload", "nosave", "noflush", "merge"],
    );
    assert_eq!(merged, "+OK\r\n");
    assert_eq!(cmd(&mut e, c, &["dbsize"]), ":3\r\n");
    assert_eq!(cmd(&mut e, c, &["get", "b"]), "$1\r\n1\r\n");
    assert_eq!(cmd(&mut e, c, &["get", "c"]), "$1\r\n3\r\n");
    // NOFLUSH alone: a key in both fails the load (Valkey stops the
    // server there; ringkv answers the error).
    let r = cmd(&mut e, c, &["debug", "reload", "nosave", "noflush"]);
    assert!(
        r.starts_with("-ERR Error trying to load the RDB dump"),
        "{r}"
    );
    assert_eq!(
        cmd(&mut e, c, &["debug", "reload", "fast"]),
        "-ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.\r\n"
    );
}
