//! `syslog-enabled yes`: log lines also go to syslog(3), under
//! `syslog-ident` and `syslog-facility`, each at the priority Valkey maps
//! its level to (debug, info, notice, warning), the message without the
//! log file's prefix.

use engine::log::{self, Level};
use std::ffi::CString;

/// Open the connection to the system logger (at once, as Valkey's
/// `LOG_NDELAY`) and send every line logged from now on to it too.
pub fn start(ident: &str, facility: &str) {
    let facility = match facility {
        "user" => libc::LOG_USER,
        "local1" => libc::LOG_LOCAL1,
        "local2" => libc::LOG_LOCAL2,
        "local3" => libc::LOG_LOCAL3,
        "local4" => libc::LOG_LOCAL4,
        "local5" => libc::LOG_LOCAL5,
        "local6" => libc::LOG_LOCAL6,
        "local7" => libc::LOG_LOCAL7,
        _ => libc::LOG_LOCAL0,
    };
    // openlog(3) keeps the pointer: the string lives as long as the process.
    let ident: &'static CString = Box::leak(Box::new(
        CString::new(ident.replace('\0', "")).unwrap_or_default(),
    ));
    // SAFETY: `ident` is NUL-terminated and never freed.
    unsafe {
        libc::openlog(
            ident.as_ptr(),
            libc::LOG_PID | libc::LOG_NDELAY | libc::LOG_NOWAIT,
            facility,
        )
    };
    log::set_syslog(send);
}

fn send(level: Level, msg: &str) {
    let priority = match level {
        Level::Debug => libc::LOG_DEBUG,
        Level::Verbose => libc::LOG_INFO,
        Level::Notice => libc::LOG_NOTICE,
        Level::Warning => libc::LOG_WARNING,
        Level::Nothing => return,
    };
    let Ok(msg) = CString::new(msg.replace('\0', "")) else {
        return;
    };
    // SAFETY: a constant "%s" format with one NUL-terminated argument.
    unsafe { libc::syslog(priority, c"%s".as_ptr(), msg.as_ptr()) };
}
