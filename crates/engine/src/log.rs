//! Valkey-style log lines (`pid:role dd Mon yyyy hh:mm:ss.mmm <level> msg`),
//! written to stdout or `logfile`, filtered by `loglevel`. Shared by all
//! crates; never called on the per-request path.
//! PLACEHOLDER: the engine helper implements it.

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug,
    Verbose,
    Notice,
    Warning,
}

pub fn log(level: Level, msg: &str) {
    let _ = level;
    eprintln!("{msg}");
}
