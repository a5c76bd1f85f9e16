//! A panic anywhere in the process ends it with a bug report in the log,
//! as Valkey's serverPanic ends Valkey: the Guru Meditation line with the
//! message and where it was raised, the thread, the stack trace (unless
//! `crash-log-enabled no`), then abort(3) — a core dump where they are
//! enabled — rather than a server going on with one thread gone.

use engine::log;

/// Make every panic from now on write the report and abort.
pub fn install() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".to_string());
        let at = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        report(&msg, &at);
        std::process::abort();
    }));
}

fn report(msg: &str, at: &str) {
    log::warning("=== RINGKV BUG REPORT START: Cut & paste starting from here ===");
    log::warning("------------------------------------------------");
    log::warning("!!! Software Failure. Press left mouse button to continue");
    log::warning(&format!("Guru Meditation: {msg} #{at}"));
    let thread = std::thread::current();
    log::warning(&format!(
        "in thread {}",
        thread.name().unwrap_or("(unnamed)")
    ));
    if log::crash_log_enabled() {
        let trace = std::backtrace::Backtrace::force_capture();
        log::warning(&format!("------ STACK TRACE ------\n{trace}"));
    }
    log::warning("=== RINGKV BUG REPORT END. Make sure to include from START to END. ===");
}
