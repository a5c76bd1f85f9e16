//! A log line written from inside a signal handler, where the logger's
//! locks and allocations are off limits: Valkey's
//! `serverLogRawFromHandler` (`<pid>:signal-handler (<unix time>) <msg>`),
//! by open(2)/write(2)/close(2) only, all async-signal-safe.

use std::ffi::{CString, c_char};
use std::sync::atomic::{AtomicPtr, Ordering};

use engine::log::{self, Level};

/// The `logfile` as a C string (null: stdout), set once at start-up
/// (`logfile` cannot change at runtime) and never freed.
static LOG_PATH: AtomicPtr<c_char> = AtomicPtr::new(std::ptr::null_mut());

/// Remember where the log goes; before the signal handlers are installed.
pub fn init(logfile: &str) {
    if logfile.is_empty() {
        return;
    }
    if let Ok(path) = CString::new(logfile) {
        LOG_PATH.store(path.into_raw(), Ordering::Release);
    }
}

/// A fixed buffer the line is put together in, without allocating.
struct Line {
    buf: [u8; 256],
    len: usize,
}

impl Line {
    fn push(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }

    fn push_num(&mut self, v: u64) {
        let mut digits = [0u8; resp::num::I64_MAX_LEN];
        self.push(resp::num::fmt_u64(v, &mut digits));
    }
}

/// Write `msg` as a warning, from a signal handler.
pub fn warning(msg: &str) {
    if !log::enabled(Level::Warning) {
        return;
    }
    let path = LOG_PATH.load(Ordering::Acquire);
    let mut line = Line {
        buf: [0; 256],
        len: 0,
    };
    // SAFETY: getpid(2) and time(2) (with a null argument) are
    // async-signal-safe and cannot fail.
    let (pid, now) = unsafe { (libc::getpid(), libc::time(std::ptr::null_mut())) };
    line.push_num(pid as u64);
    line.push(b":signal-handler (");
    line.push_num(now.max(0) as u64);
    line.push(b") ");
    line.push(msg.as_bytes());
    line.push(b"\n");
    let fd = if path.is_null() {
        libc::STDOUT_FILENO
    } else {
        // SAFETY: `path` is the NUL-terminated string `init` leaked; open(2)
        // is async-signal-safe.
        unsafe {
            libc::open(
                path,
                libc::O_APPEND | libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                0o644,
            )
        }
    };
    if fd < 0 {
        return;
    }
    // SAFETY: write(2) of the line's initialised bytes to the descriptor
    // opened above (or stdout); close(2) of the one we opened.
    unsafe {
        libc::write(fd, line.buf.as_ptr().cast(), line.len);
        if !path.is_null() {
            libc::close(fd);
        }
    }
}
