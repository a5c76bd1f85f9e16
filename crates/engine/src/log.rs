//! Valkey-style log lines (`pid:role dd Mon yyyy hh:mm:ss.mmm <level> msg`),
//! written to stdout or `logfile`, filtered by `loglevel`. Shared by all
//! crates; never called on the per-request path.
//!
//! One process-wide logger set by [`init`]; until then lines go to stdout at
//! `notice`. A filtered-out call costs one atomic load.

use std::fs::OpenOptions;
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug,
    Verbose,
    Notice,
    Warning,
    /// `loglevel nothing`: log nothing.
    Nothing,
}

impl Level {
    pub fn from_name(s: &str) -> Option<Level> {
        Some(match s {
            "debug" => Level::Debug,
            "verbose" => Level::Verbose,
            "notice" => Level::Notice,
            "warning" => Level::Warning,
            "nothing" => Level::Nothing,
            _ => return None,
        })
    }
    /// The character Valkey puts before the message.
    fn mark(self) -> char {
        match self {
            Level::Debug => '.',
            Level::Verbose => '-',
            Level::Notice => '*',
            Level::Warning | Level::Nothing => '#',
        }
    }
}

static MIN_LEVEL: AtomicU8 = AtomicU8::new(Level::Notice as u8);
/// `None` = stdout.
static FILE: Mutex<Option<String>> = Mutex::new(None);
/// The role character: `M` for the server (Valkey: `C` child, `S` replica...).
static ROLE: AtomicU8 = AtomicU8::new(b'M');

/// Configure the logger: lines below `level` are dropped; `file` empty =
/// stdout. The file is opened per line in append mode (as Valkey does), so
/// log rotation by renaming works.
pub fn init(level: Level, file: &str) {
    set_level(level);
    *FILE.lock().unwrap_or_else(|e| e.into_inner()) = if file.is_empty() {
        None
    } else {
        Some(file.to_string())
    };
}

/// [`init`] from the `loglevel` and `logfile` directives.
pub fn init_from(config: &crate::Config) {
    init(config.loglevel, &config.logfile);
}

/// CONFIG SET loglevel.
pub fn set_level(level: Level) {
    MIN_LEVEL.store(level as u8, Ordering::Relaxed);
}

pub fn set_role(role: u8) {
    ROLE.store(role, Ordering::Relaxed);
}

#[inline]
pub fn enabled(level: Level) -> bool {
    level != Level::Nothing && level as u8 >= MIN_LEVEL.load(Ordering::Relaxed)
}

pub fn log(level: Level, msg: &str) {
    if !enabled(level) {
        return;
    }
    let line = format_line(level, msg, SystemTime::now());
    let file = FILE.lock().unwrap_or_else(|e| e.into_inner()).clone();
    match file {
        Some(path) => {
            if let Ok(mut f) = OpenOptions::new().create(true).append(true).open(&path) {
                let _ = f.write_all(line.as_bytes());
            }
        }
        None => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(line.as_bytes());
            let _ = out.flush();
        }
    }
}

pub fn debug(msg: &str) {
    log(Level::Debug, msg)
}
pub fn verbose(msg: &str) {
    log(Level::Verbose, msg)
}
pub fn notice(msg: &str) {
    log(Level::Notice, msg)
}
pub fn warning(msg: &str) {
    log(Level::Warning, msg)
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// `12345:M 22 Nov 2026 13:42:03.123 * message\n` (UTC).
pub fn format_line(level: Level, msg: &str, at: SystemTime) -> String {
    let d = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let ms = d.subsec_millis();
    let (y, mo, day) = civil_from_days(secs.div_euclid(86400));
    let sod = secs.rem_euclid(86400);
    format!(
        "{}:{} {:02} {} {} {:02}:{:02}:{:02}.{:03} {} {}\n",
        std::process::id(),
        ROLE.load(Ordering::Relaxed) as char,
        day,
        MONTHS[(mo - 1) as usize],
        y,
        sod / 3600,
        sod / 60 % 60,
        sod % 60,
        ms,
        level.mark(),
        msg
    )
}

/// Days since 1970-01-01 to (year, month 1-12, day 1-31), proleptic Gregorian.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719468;
    let era = z.div_euclid(146097);
    let doe = z.rem_euclid(146097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn valkey_line_format() {
        // 2026-11-22 13:42:03.123 UTC
        let t = UNIX_EPOCH + Duration::from_millis(1_795_354_923_123);
        let line = format_line(Level::Notice, "hello", t);
        let rest = line.split_once(':').unwrap().1;
        assert_eq!(rest, "M 22 Nov 2026 13:42:03.123 * hello\n");
        assert!(format_line(Level::Warning, "x", t).ends_with(" # x\n"));
        assert!(format_line(Level::Debug, "x", t).ends_with(" . x\n"));
        assert!(format_line(Level::Verbose, "x", t).ends_with(" - x\n"));
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11016), (2000, 2, 29));
    }
}
