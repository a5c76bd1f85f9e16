//! End-to-end test harness for ringkv: starts the real `ringkv-server` binary (or
//! Debian's `redis-server`, the oracle) on a free loopback port and hands out
//! clients — the `redis` crate, a raw socket speaking RESP, and redis-cli.
//!
//! Owns: `tests/**` only. It must not reach into the server's crates: everything
//! here talks to a process over TCP, exactly as a user would, so a passing test
//! says something about the shipped binary.
//!
//! Target selection: `RINGKV_E2E_TARGET=ringkv|redis` (default ringkv). The ringkv
//! binary is `$RINGKV_SERVER_BIN`, else `<target dir>/debug/ringkv-server`.
//!
//! ```sh
//! cargo build -p ringkv-server && cargo test -p ringkv-e2e     # ringkv, both loops
//! RINGKV_E2E_TARGET=redis cargo test -p ringkv-e2e            # the oracle itself
//! ```
//!
//! Every test passes against redis-server 7.0 (where a reply legitimately
//! differs in Valkey 8, the test says so and expects Valkey's form from ringkv).

pub mod dataset;
pub mod netns;
pub mod raw;
pub mod replication;
pub mod server;

pub use raw::{Raw, Reply};
pub use server::{Backend, Opts, Server, Target, target};

/// Declares an end-to-end test that runs once per ringkv event loop
/// (`<name>::io_uring` and `<name>::epoll`), or once against redis-server when
/// `RINGKV_E2E_TARGET=redis`. `ringkv_only` marks tests of ringkv-specific
/// behaviour, skipped on the redis target.
#[macro_export]
macro_rules! e2e {
    ($(#[$m:meta])* fn $name:ident($b:ident) $body:block) => {
        $crate::e2e!(@gen false, $(#[$m])* fn $name($b) $body);
    };
    ($(#[$m:meta])* ringkv_only fn $name:ident($b:ident) $body:block) => {
        $crate::e2e!(@gen true, $(#[$m])* fn $name($b) $body);
    };
    (@gen $only:expr, $(#[$m:meta])* fn $name:ident($b:ident) $body:block) => {
        #[allow(unused_imports)]
        mod $name {
            use super::*;
            #[allow(unused_variables, clippy::needless_pass_by_value)]
            fn e2e_body($b: $crate::Backend) $body
            $(#[$m])*
            #[test]
            fn io_uring() {
                if let Some(b) = $crate::Backend::for_variant(0, $only) {
                    e2e_body(b)
                }
            }
            $(#[$m])*
            #[test]
            fn epoll() {
                if let Some(b) = $crate::Backend::for_variant(1, $only) {
                    e2e_body(b)
                }
            }
        }
    };
}

/// A plain TCP client socket to the server on `port` (30 s read timeout,
/// Nagle off), for tests that write and read raw bytes from many threads.
/// The value of `name` in an INFO reply's text (panics if it is missing).
pub fn info_field(text: &str, name: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("{name} not in INFO:\n{text}"))
        .trim()
        .to_string()
}

/// A numeric field of the CLIENT LIST line of the client named `name`
/// (`None` if there is no such client).
pub fn client_list_field(c: &mut Raw, name: &str, field: &str) -> Option<u64> {
    let list = c.cmd(&["CLIENT", "LIST"]).text();
    let line = list
        .lines()
        .find(|l| l.contains(&format!(" name={name} ")))?;
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(field)?.strip_prefix('='))
        .map(|v| v.parse().unwrap())
}

/// Poll `f` every 20 ms until it is true; panics after `secs` seconds.
pub fn within(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while !f() {
        assert!(
            std::time::Instant::now() < until,
            "{what}: not within {secs} s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Keep the calling thread, and any server it starts afterwards (a child
/// inherits the mask), on one CPU: the CPU it may run on with the lowest
/// number. Races between a server thread and a client that read its reply
/// show up far more often when they share a core, where the client's
/// wake-up can preempt the thread that sent it.
/// Where the system refuses (a sandbox), the test goes on unpinned, with
/// a note: the race it looks for only shows less often.
pub fn pin_to_one_cpu() {
    // SAFETY: `set` is a plain bitmask, zeroed and then filled by the
    // kernel for the calling thread (pid 0); its size is passed.
    let pinned = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let size = std::mem::size_of::<libc::cpu_set_t>();
        libc::sched_getaffinity(0, size, &mut set) == 0
            && match (0..libc::CPU_SETSIZE as usize).find(|&c| libc::CPU_ISSET(c, &set)) {
                Some(cpu) => {
                    libc::CPU_ZERO(&mut set);
                    libc::CPU_SET(cpu, &mut set);
                    libc::sched_setaffinity(0, size, &set) == 0
                }
                None => false,
            }
    };
    if !pinned {
        eprintln!(
            "note: could not pin to one CPU: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Run `f` on a thread of its own at `SCHED_IDLE` priority (where the
/// system allows it), pinned as [`pin_to_one_cpu`] pins; a server `f`
/// starts inherits both. Pinned to
/// the same CPU, a client thread then preempts every server thread the
/// moment it is woken, so a server thread that wakes a client is stopped
/// right after the system call that did it: what it does next happens
/// after the client's next move.
pub fn at_idle_priority<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        pin_to_one_cpu();
        // SAFETY: a zeroed sched_param is priority 0, the only one
        // SCHED_IDLE takes; pid 0 is the calling thread.
        let idle = unsafe {
            let param: libc::sched_param = std::mem::zeroed();
            libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) == 0
        };
        if !idle {
            eprintln!(
                "note: could not drop to SCHED_IDLE: {}",
                std::io::Error::last_os_error()
            );
        }
        f()
    })
    .join()
    .unwrap()
}

pub fn tcp(port: u16) -> std::net::TcpStream {
    let s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// Lifts the soft fd limit to the hard one, so thousands of sockets fit.
pub fn raise_nofile() {
    // SAFETY: getrlimit/setrlimit with a valid, owned struct.
    unsafe {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

/// A deterministic xorshift generator, so failing seeds can be replayed without
/// pulling in a rand crate.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// Uniform in `0..n` (n > 0); the modulo bias is irrelevant for tests.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

/// Runs the `redis` crate query and turns a server error into its exact wire
/// line without the leading `-` (e.g. `ERR syntax error`), so tests can compare
/// Valkey's error strings exactly.
pub fn query(con: &mut redis::Connection, args: &[&str]) -> Result<redis::Value, String> {
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query::<redis::Value>(con).map_err(|e| err_line(&e))
}

/// The `-CODE detail` line of a server error as the client library saw it.
pub fn err_line(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => format!("client error: {e}"),
    }
}

/// `query` with the command written as one whitespace-separated string, for
/// arguments without spaces: `q(&mut c, "SET k v NX")`.
pub fn q(con: &mut redis::Connection, line: &str) -> Result<redis::Value, String> {
    let args: Vec<&str> = line.split_whitespace().collect();
    query(con, &args)
}

/// Expected-reply constructors for comparing with `query`/`q` results.
pub mod v {
    use redis::Value;

    pub type R = Result<Value, String>;

    pub fn ok() -> R {
        Ok(Value::Okay)
    }
    pub fn nil() -> R {
        Ok(Value::Nil)
    }
    pub fn int(i: i64) -> R {
        Ok(Value::Int(i))
    }
    pub fn bulk(s: &str) -> R {
        Ok(Value::BulkString(s.as_bytes().to_vec()))
    }
    pub fn status(s: &str) -> R {
        Ok(Value::SimpleString(s.to_string()))
    }
    pub fn err(s: &str) -> R {
        Err(s.to_string())
    }
    pub fn arr(items: Vec<R>) -> R {
        Ok(Value::Array(
            items.into_iter().map(|r| r.unwrap()).collect(),
        ))
    }
    /// The text of a bulk/status value (panics on anything else).
    pub fn text(r: &R) -> String {
        match r {
            Ok(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
            Ok(Value::SimpleString(s)) => s.clone(),
            Ok(Value::Okay) => "OK".into(),
            other => panic!("not a text reply: {other:?}"),
        }
    }
    pub fn int_of(r: &R) -> i64 {
        match r {
            Ok(Value::Int(i)) => *i,
            other => panic!("not an integer reply: {other:?}"),
        }
    }
    /// Bulk strings of an array reply.
    pub fn strings(r: &R) -> Vec<String> {
        match r {
            Ok(Value::Array(a)) => a
                .iter()
                .map(|x| match x {
                    Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                    Value::SimpleString(s) => s.clone(),
                    Value::Nil => "(nil)".into(),
                    Value::Int(i) => i.to_string(),
                    other => format!("{other:?}"),
                })
                .collect(),
            other => panic!("not an array reply: {other:?}"),
        }
    }
}
