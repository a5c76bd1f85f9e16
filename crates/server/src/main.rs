//! `ringkv-server`: the binary. It owns process-level concerns only —
//! command line and config file, daemonizing, the working directory, the
//! pidfile, signals, the open-file limit, the allocator and its huge
//! pages, the service manager's notifications, the OOM score, the process
//! title — and then hands an [`engine::Engine`] to [`net::serve`], which
//! runs until SHUTDOWN or a signal.
//!
//! ```text
//!  (THP off, before the runtime) ─► argv ─► proc_title::init (the environment
//!       moves out of the title's room) ─► Config::load(file, --directives)
//!       ─► disable-thp: prctl ─► daemonize? (not when supervised) ─► chdir(dir)
//!       ─► log::init ─► supervised? ─► open-file limit vs maxclients ─► pidfile
//!       ─► signal handlers ─► net::serve(engine, &STOP)
//!       ─► remove pidfile ─► exit 0
//! ```
//!
//! It must not run commands or touch sockets itself: commands belong to
//! `engine`, sockets to `net`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use engine::log;

mod banner;
mod collation;
mod cpu_affinity;
mod crash_report;
mod fdlimit;
mod migrate;
mod oom_score;
mod proc_title;
mod signal_log;
mod supervise;
mod syslog;

/// jemalloc, counting the bytes it hands out: INFO `used_memory` and the
/// `maxmemory` check before each command read the count
/// ([`ringkv_alloc::used_memory`]), which costs a few loads.
#[global_allocator]
static GLOBAL: ringkv_alloc::CountingJemalloc = ringkv_alloc::CountingJemalloc;

/// jemalloc's options, read at its first allocation (before `main`): ask
/// for transparent huge pages on every heap mapping, and on its own
/// metadata once that is large. Whether the kernel grants them is settled
/// per process by `disable-thp` ([`set_thp`]): yes, the default as in
/// Valkey, turns THP off for the whole process, which overrides this
/// advice. With huge pages, random lookups in a large keyspace miss the
/// TLB far less: the execution thread's batch path at 10M keys ran a
/// median 3.19M SETs/s against 2.65M without (docs/BENCHMARKS.md §6.3).
///
/// Freed memory goes back to the OS as in Valkey, which turns jemalloc's
/// background purging thread on by default (`jemalloc-bg-thread yes`): it
/// returns dirty pages after jemalloc's decay time instead of only when the
/// heap is next used. Allocations of 2 MiB and more (the keyspace's bucket
/// arrays from 32,768 buckets up, values that large) come from jemalloc's
/// own arena for large blocks, which gives pages back as soon as they are
/// freed, so the arrays a growing table leaves behind do not stay resident
/// (jemalloc's default for this is 8 MiB). Measured with
/// shared/tools/mem-per-key.sh at 16-byte values, 0.5 s after loading 1M
/// keys: RSS 69.5 MB before, 63.6 MB after (io_uring), 65.6 → 56.8 MB
/// (epoll); 60.5 and 51.5 MB ten seconds later (docs/BENCHMARKS.md §4).
// SAFETY: jemalloc (built with the `_rjem_` prefix) reads this symbol as
// `const char *malloc_conf`: a thin, nullable pointer to a NUL-terminated
// string that lives as long as the process.
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static MALLOC_CONF: Option<&'static u8> =
    Some(&b"thp:always,metadata_thp:auto,background_thread:true,oversize_threshold:2097152\0"[0]);

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

/// Transparent huge pages are off from the process's first instruction
/// until `disable-thp` is read: Rust's runtime allocates before `main`,
/// and under [`MALLOC_CONF`] every page jemalloc touched then would be a
/// huge one (6 MB of them in an idle server, measured), which prctl later
/// cannot undo. A constructor in `.init_array` runs before the runtime.
// SAFETY: the loader calls every pointer in `.init_array` once, before
// `main`, as `extern "C" fn()`; this one only makes a prctl call.
#[unsafe(link_section = ".init_array")]
#[used]
static THP_OFF_AT_START: extern "C" fn() = thp_off_at_start;

extern "C" fn thp_off_at_start() {
    let _ = set_thp(false);
}

fn main() -> ExitCode {
    let argv0 = std::env::args().next().unwrap_or_default();
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Before any thread: it moves the environment out of the title's room.
    proc_title::init();
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
    let mut config = match engine::Config::load(file.as_deref(), rest) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let thp = set_thp(!config.disable_thp);
    // CONFIG REWRITE needs an absolute path: we may chdir below.
    let file = file.map(|f| std::path::absolute(&f).unwrap_or(f));

    let supervisor = supervise::requested(&config.get("supervised").unwrap_or_default());
    if config.daemonize
        && !supervisor.is_some_and(supervise::reachable)
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
    crash_report::install();
    if !collation::set_locale(&config.get("locale-collate").unwrap_or_default()) {
        log::warning("Failed to configure LOCALE for invalid locale name.");
        return ExitCode::FAILURE;
    }
    signal_log::init(&config.logfile);
    if config.get("syslog-enabled").as_deref() == Some("yes") {
        syslog::start(
            &config.get("syslog-ident").unwrap_or_default(),
            &config.get("syslog-facility").unwrap_or_default(),
        );
    }
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
    if let Some(mode) = supervisor {
        supervise::start(mode);
    }
    match thp {
        Err(e) => log::warning(&format!("Can't set transparent huge pages with prctl: {e}")),
        Ok(()) if !config.disable_thp => {
            log::notice("Transparent huge pages: the heap asks for them (disable-thp no)")
        }
        Ok(()) => {}
    }

    if !fit_open_files(&mut config) {
        return ExitCode::FAILURE;
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

    engine::affinity::install(&config, cpu_affinity::current(), cpu_affinity::set);
    let mut engine = engine::Engine::new(config, file);
    engine.set_memory_probe(jemalloc_stats);
    engine.set_used_memory_probe(ringkv_alloc::used_memory);
    engine.set_allocator_ops(engine::AllocatorOps {
        stats_text: jemalloc_stats_text,
        purge: jemalloc_purge,
        background_thread: jemalloc_background_thread,
        relocate: ringkv_alloc::defrag::supported().then_some(ringkv_alloc::defrag::relocate as _),
    });
    engine.set_file_limit(fdlimit::raise_for_engine);
    engine.set_oom_score(oom_score::apply);
    engine.set_proc_title(proc_title::set, argv0);
    engine.set_collation(engine::server::Collation {
        set_locale: collation::set_locale,
        collate: collation::collate,
    });
    banner::show(engine.config());
    engine.set_storage(Box::new(persist::FileStorage));
    engine.set_migrator(Box::<migrate::MigrateSockets>::default());
    if let Err(e) = engine.load_at_startup() {
        log::warning(&format!("Fatal error loading the DB: {e}. Exiting."));
        if let Some(p) = &pidfile {
            remove_pidfile(p);
        }
        return ExitCode::FAILURE;
    }
    engine.set_links(Box::<repl::TcpLinks>::default());
    engine.set_senders(Box::<repl::FeedThreads>::default());
    net::detach::set_detach_hook(Box::new(|client, d| {
        repl::adopt(client, d.fd, d.unsent, d.unparsed)
    }));
    // As Valkey, once loaded: this thread runs the event loop (and in
    // threaded mode the execution loop), and what it starts from here on
    // (the replication link and feeds, IO threads) inherits the mask
    // unless its role has a list of its own.
    engine::affinity::pin(engine::affinity::Role::Server);
    engine.start_replication();
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

/// Raise the open-file limit for `maxclients` (Valkey's start-up step),
/// or lower `maxclients` to what the limit allows. False: the limit leaves
/// no room for a single client, and the server must not start.
fn fit_open_files(config: &mut engine::Config) -> bool {
    let want = config.files_needed();
    let reserved = config.reserved_fds();
    let r = match fdlimit::raise(want) {
        Ok(r) => r,
        Err(e) => {
            // As Valkey: assume the common default.
            config.lower_maxclients(1024u64.saturating_sub(reserved));
            log::warning(&format!(
                "Could not read the open-file limit ({e}): assuming 1024, so maxclients is {}.",
                config.maxclients
            ));
            return true;
        }
    };
    if r.now >= want {
        if r.now > r.was {
            log::notice(&format!(
                "Raised the open-file limit from {} to {want} for maxclients {}.",
                r.was, config.maxclients
            ));
        }
        return true;
    }
    if r.now <= reserved {
        log::warning(&format!(
            "The open-file limit ('ulimit -n') of {} leaves no room for clients: at least {want} \
             is needed for maxclients {}. Exiting.",
            r.now, config.maxclients
        ));
        return false;
    }
    let asked = config.maxclients;
    config.lower_maxclients(r.now - reserved);
    let why = r.refused.map(|e| e.to_string()).unwrap_or_default();
    log::warning(&format!(
        "maxclients {asked} needs an open-file limit of {want}, and it could not be raised past \
         {} ({why}): maxclients has been reduced to {}. To serve more clients, raise 'ulimit -n'.",
        r.now, config.maxclients
    ));
    true
}

/// `disable-thp`: allow (no) or forbid (yes) transparent huge pages for
/// this process with `PR_SET_THP_DISABLE`, which the kernel checks at
/// every fault, so it holds for mappings jemalloc made before `main` too.
fn set_thp(allow: bool) -> std::io::Result<()> {
    let disable: libc::c_ulong = if allow { 0 } else { 1 };
    // SAFETY: prctl(2) with PR_SET_THP_DISABLE takes integers only.
    let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, disable, 0, 0, 0) };
    if rc == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
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

extern "C" fn on_stop_signal(sig: libc::c_int) {
    // Atomic stores are async-signal-safe; the loop notices within ~100 ms.
    if engine::shutdown::note_signal(sig) {
        // A second SIGINT (Ctrl+C again) while the first one's shutdown is
        // under way: Valkey's way out of a wait for lagging replicas or a
        // long final save, with an error status as the stop is not clean.
        signal_log::warning("You insist... exiting now.");
        // SAFETY: _exit(2) is async-signal-safe; nothing is flushed, as in
        // Valkey, which exits from its handler too.
        unsafe { libc::_exit(1) };
    }
    signal_log::warning(match sig {
        libc::SIGINT => "Received SIGINT scheduling shutdown...",
        libc::SIGTERM => "Received SIGTERM scheduling shutdown...",
        _ => "Received shutdown signal, scheduling shutdown...",
    });
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
    use tikv_jemalloc_ctl::{epoch, raw, stats};
    // The size classes' usage for active defragmentation, read after the
    // epoch advance it makes; without those controls, advance it here.
    let frag_smallbins = ringkv_alloc::defrag::refresh();
    if frag_smallbins.is_none() {
        let _ = epoch::advance();
    }
    let allocated = stats::allocated::read().unwrap_or(0) as u64;
    // Pages purged lazily (`pmuzzy`) over every arena; 4096 is jemalloc's
    // MALLCTL_ARENAS_ALL, the merged view.
    // SAFETY: `stats.arenas.<i>.pmuzzy` is a size_t; the name is
    // NUL-terminated.
    let pmuzzy = unsafe { raw::read::<libc::size_t>(b"stats.arenas.4096.pmuzzy\0") };
    // SAFETY: `arenas.page` is a size_t; the name is NUL-terminated.
    let page = unsafe { raw::read::<libc::size_t>(b"arenas.page\0") };
    engine::MemoryStats {
        // The one source of used_memory: a counting allocator's total can
        // take this place.
        used: allocated,
        allocated,
        active: stats::active::read().unwrap_or(0) as u64,
        resident: stats::resident::read().unwrap_or(0) as u64,
        retained: stats::retained::read().unwrap_or(0) as u64,
        metadata: stats::metadata::read().unwrap_or(0) as u64,
        muzzy: (pmuzzy.unwrap_or(0) * page.unwrap_or(0)) as u64,
        frag_smallbins,
        allocator: "jemalloc-5.3.0",
    }
}

/// MEMORY MALLOC-STATS: jemalloc's own report (`malloc_stats_print`).
fn jemalloc_stats_text() -> String {
    let mut out = Vec::new();
    match tikv_jemalloc_ctl::stats_print::stats_print(&mut out, Default::default()) {
        Ok(()) => String::from_utf8_lossy(&out).into_owned(),
        Err(e) => format!("jemalloc statistics failed: {e}"),
    }
}

/// MEMORY PURGE: return every arena's unused dirty pages to the OS
/// (`arena.<MALLCTL_ARENAS_ALL>.purge`, as Valkey asks jemalloc).
/// `jemalloc-bg-thread`: jemalloc's purging thread on (as [`MALLOC_CONF`]
/// starts it) or off.
fn jemalloc_background_thread(on: bool) -> bool {
    tikv_jemalloc_ctl::background_thread::write(on).is_ok()
}

fn jemalloc_purge() -> bool {
    // SAFETY: the purge control takes and returns nothing: every pointer is
    // null and the length 0, as jemalloc requires of it; the name is a
    // NUL-terminated static string.
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            c"arena.4096.purge".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    rc == 0
}
