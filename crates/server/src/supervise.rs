//! `supervised systemd|upstart|auto`: a service manager learns when the
//! server is up, as it learns it from Valkey. systemd gets sd_notify
//! datagrams on `$NOTIFY_SOCKET` (a path, or an abstract name after `@`);
//! upstart (`expect stop`) sees the process stop itself once before it
//! loads. The messages themselves are the engine's (`engine::supervisor`);
//! this module owns the socket and the environment.

use engine::log;
use std::os::unix::net::UnixDatagram;

/// Who is asked to supervise us, from `supervised` and, for `auto`, the
/// environment (upstart first, as Valkey checks).
pub(crate) fn requested(setting: &str) -> Option<&'static str> {
    match setting {
        "systemd" => Some("systemd"),
        "upstart" => Some("upstart"),
        "auto" if std::env::var_os("UPSTART_JOB").is_some() => Some("upstart"),
        "auto" if std::env::var_os("NOTIFY_SOCKET").is_some() => Some("systemd"),
        _ => None,
    }
}

/// Whether the supervisor `mode` left us its address: a supervised server
/// never daemonizes, and this is decided before logging starts.
pub(crate) fn reachable(mode: &str) -> bool {
    let var = if mode == "upstart" {
        "UPSTART_JOB"
    } else {
        "NOTIFY_SOCKET"
    };
    std::env::var_os(var).is_some()
}

/// Tell the supervisor we are starting. If it cannot be reached (Valkey's
/// warnings say why) the server runs unsupervised.
pub(crate) fn start(mode: &'static str) {
    match mode {
        "upstart" => {
            if !reachable(mode) {
                log::warning("upstart supervision requested, but UPSTART_JOB not found!");
                return;
            }
            log::notice("supervised by upstart, will stop to signal readiness.");
            // SAFETY: raise(3) has no memory preconditions; upstart sends
            // SIGCONT once it has seen the stop.
            unsafe { libc::raise(libc::SIGSTOP) };
            // SAFETY: start-up, before the server starts threads that
            // read the environment.
            unsafe { std::env::remove_var("UPSTART_JOB") };
            engine::supervisor::install("upstart", None);
        }
        _ => {
            if !notify_systemd("STATUS=ringkv is loading...\n") {
                return;
            }
            log::notice(
                "Supervised by systemd. Please make sure you set appropriate values for \
                 TimeoutStartSec and TimeoutStopSec in your service unit.",
            );
            engine::supervisor::install(
                "systemd",
                Some(|msg| {
                    notify_systemd(msg);
                }),
            );
        }
    }
}

/// One sd_notify message; `false` (and a warning, Valkey's words) if it
/// could not be sent.
fn notify_systemd(msg: &str) -> bool {
    let Some(target) = std::env::var_os("NOTIFY_SOCKET") else {
        log::warning("systemd supervision error: NOTIFY_SOCKET not found!");
        return false;
    };
    match send(target.as_encoded_bytes(), msg) {
        Ok(()) => true,
        Err(e) => {
            log::warning(&format!("systemd supervision error: sd_notify: {e}"));
            false
        }
    }
}

fn send(target: &[u8], msg: &str) -> std::io::Result<()> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::net::SocketAddr;
    let addr = match target.strip_prefix(b"@") {
        Some(name) => SocketAddr::from_abstract_name(name)?,
        None => SocketAddr::from_pathname(std::ffi::OsStr::from_bytes(target))?,
    };
    let sock = UnixDatagram::unbound()?;
    sock.send_to_addr(msg.as_bytes(), &addr).map(drop)
}
