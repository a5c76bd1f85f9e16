//! `ringkv-server`: the binary. It owns process-level concerns only —
//! command line and config file, daemonizing, the working directory, the
//! pidfile, signals, the allocator — and then hands an [`engine::Engine`] to
//! [`net::serve`], which runs until SHUTDOWN or a signal.
//!
//! ```text
//!  argv ─► Config::load(file, --directives) ─► daemonize? ─► chdir(dir)
//!       ─► log::init ─► pidfile ─► signal handlers ─► net::serve(engine, &STOP)
//!       ─► remove pidfile ─► exit 0
//! ```
//!
//! It must not run commands or touch sockets itself: commands belong to
//! `engine`, sockets to `net`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use engine::log;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Set from the SIGTERM/SIGINT handler; the event loop polls it.
static STOP: AtomicBool = AtomicBool::new(false);

const USAGE: &str = "Usage: ringkv-server [/path/to/valkey.conf] [options] [-]
       ringkv-server -v or --version
       ringkv-server -h or --help

Examples:
       ringkv-server (run the server with default config)
       ringkv-server /etc/valkey/6379.conf
       ringkv-server --port 7777
       ringkv-server /etc/myvalkey.conf --loglevel verbose --io-uring no
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("-v" | "--version") => {
            println!(
                "ringkv server v={} (Valkey/Redis protocol compatible)",
                env!("CARGO_PKG_VERSION")
            );
            return ExitCode::SUCCESS;
        }
        Some("-h" | "--help") => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => {}
    }
    // As Valkey: a first argument that is not an option is the config file.
    let (file, rest) = match args.first() {
        Some(a) if !a.starts_with("--") => (Some(PathBuf::from(a)), &args[1..]),
        _ => (None, &args[..]),
    };
    let config = match engine::Config::load(file.as_deref(), rest) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    // CONFIG REWRITE needs an absolute path: we may chdir below.
    let file = file.map(|f| std::path::absolute(&f).unwrap_or(f));

    if config.daemonize
        && let Err(e) = daemonize()
    {
        eprintln!("Can't daemonize: {e}");
        return ExitCode::FAILURE;
    }
    if !config.dir.is_empty()
        && let Err(e) = std::env::set_current_dir(&config.dir)
    {
        eprintln!("Can't chdir to '{}': {e}", config.dir);
        return ExitCode::FAILURE;
    }
    log::init_from(&config);
    log::notice("oO0OoO0OoO0Oo ringkv is starting oO0OoO0OoO0Oo");
    log::notice(&format!(
        "ringkv version={}, bits=64, pid={}, just started",
        env!("CARGO_PKG_VERSION"),
        std::process::id()
    ));
    match &file {
        Some(f) => log::notice(&format!("Configuration loaded from {}", f.display())),
        None => log::warning(
            "Warning: no config file specified, using the default config. In order to specify \
             a config file use ringkv-server /path/to/valkey.conf",
        ),
    }
    for w in &config.warnings {
        log::warning(w);
    }

    let pidfile = (!config.pidfile.is_empty()).then(|| PathBuf::from(&config.pidfile));
    if let Some(p) = &pidfile
        && let Err(e) = std::fs::write(p, format!("{}\n", std::process::id()))
    {
        log::warning(&format!(
            "Failed to write PID file {}: {e}",
            p.to_string_lossy()
        ));
    }
    if let Err(e) = install_signal_handlers() {
        log::warning(&format!("Can't install signal handlers: {e}"));
    }

    let mut engine = engine::Engine::new(config, file);
    engine.set_memory_probe(jemalloc_stats);
    let result = net::serve(engine, &STOP);
    if let Some(p) = &pidfile {
        remove_pidfile(p);
    }
    match result {
        Ok(()) => {
            log::warning("ringkv is now ready to exit, bye bye...");
            ExitCode::SUCCESS
        }
        Err(e) => {
            log::warning(&e.to_string());
            ExitCode::FAILURE
        }
    }
}

fn remove_pidfile(p: &Path) {
    if let Err(e) = std::fs::remove_file(p)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        log::warning(&format!("Failed to remove PID file {}: {e}", p.display()));
    }
}

/// Valkey's `daemonize yes`: fork, let the parent exit, start a new session
/// and point stdio at /dev/null (logging without a `logfile` is discarded, as
/// in Valkey).
fn daemonize() -> std::io::Result<()> {
    // SAFETY: fork(2) before any thread exists: the child gets a consistent
    // copy of the only thread.
    match unsafe { libc::fork() } {
        -1 => return Err(std::io::Error::last_os_error()),
        0 => {}
        // SAFETY: _exit(2) ends the parent without running destructors that
        // the child still relies on.
        _ => unsafe { libc::_exit(0) },
    }
    // SAFETY: setsid(2) has no memory-safety preconditions.
    if unsafe { libc::setsid() } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    let devnull = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    use std::os::fd::AsRawFd;
    for fd in 0..=2 {
        // SAFETY: dup2(2) onto the standard descriptors, which this process
        // owns; `devnull` stays open for the call.
        if unsafe { libc::dup2(devnull.as_raw_fd(), fd) } == -1 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

extern "C" fn on_stop_signal(_sig: libc::c_int) {
    // An atomic store is async-signal-safe; the loop notices within ~100 ms.
    STOP.store(true, Ordering::SeqCst);
}

fn install_signal_handlers() -> std::io::Result<()> {
    let handler: extern "C" fn(libc::c_int) = on_stop_signal;
    for (sig, action) in [
        (libc::SIGTERM, handler as libc::sighandler_t),
        (libc::SIGINT, handler as libc::sighandler_t),
        // A peer that vanishes mid-write must give EPIPE, not kill us.
        (libc::SIGPIPE, libc::SIG_IGN),
    ] {
        // SAFETY: a zeroed sigaction is a valid "no flags, empty mask"
        // value; `action` is SIG_IGN or an async-signal-safe handler.
        let rc = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = action;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if rc == -1 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// INFO memory's allocator numbers, read from jemalloc after refreshing its
/// statistics epoch.
fn jemalloc_stats() -> engine::MemoryStats {
    use tikv_jemalloc_ctl::{epoch, stats};
    let _ = epoch::advance();
    engine::MemoryStats {
        allocated: stats::allocated::read().unwrap_or(0) as u64,
        active: stats::active::read().unwrap_or(0) as u64,
        resident: stats::resident::read().unwrap_or(0) as u64,
        allocator: "jemalloc-5.3.0",
    }
}
