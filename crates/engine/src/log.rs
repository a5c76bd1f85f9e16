//! Valkey-style log lines (`pid:role dd Mon yyyy hh:mm:ss.mmm <level> msg`,
//! or with `log-format logfmt` `pid=.. role=.. timestamp=".." level=..
//! message=".."`; the time as `log-timestamp-format` says), written to
//! stdout or `logfile`, filtered by `loglevel`. Shared by all crates; never
//! called on the per-request path.
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
    /// The level's name in logfmt lines.
    fn name(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Verbose => "verbose",
            Level::Notice => "notice",
            Level::Warning | Level::Nothing => "warning",
        }
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

/// `log-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Legacy,
    Logfmt,
}

/// `log-timestamp-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timestamp {
    /// `27 Nov 2026 00:45:40.238`
    Legacy,
    /// `2026-11-27T00:45:41.654+00:00`
    Iso8601,
    /// Unix milliseconds.
    Milliseconds,
}

static MIN_LEVEL: AtomicU8 = AtomicU8::new(Level::Notice as u8);
static FORMAT: AtomicU8 = AtomicU8::new(Format::Legacy as u8);
static TIMESTAMP: AtomicU8 = AtomicU8::new(Timestamp::Legacy as u8);
/// `None` = stdout.
static FILE: Mutex<Option<String>> = Mutex::new(None);
/// The role character: `M` for the server (Valkey: `C` child, `S` replica...).
static ROLE: AtomicU8 = AtomicU8::new(b'M');
/// `crash-log-enabled`: a crash report carries the stack trace.
static CRASH_LOG: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

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

/// [`init`] from the `loglevel` and `logfile` directives, and the line
/// format.
pub fn init_from(config: &crate::Config) {
    init(config.loglevel, &config.logfile);
    set_format(config.log_format, config.log_timestamp);
    set_crash_log(config);
}

/// `crash-log-enabled` (CONFIG SET too).
pub fn set_crash_log(config: &crate::Config) {
    let on = config.get("crash-log-enabled").as_deref() != Some("no");
    CRASH_LOG.store(on, Ordering::Relaxed);
}

/// Whether a crash report should carry the stack trace.
pub fn crash_log_enabled() -> bool {
    CRASH_LOG.load(Ordering::Relaxed)
}

/// `log-format` and `log-timestamp-format` (CONFIG SET too).
pub fn set_format(format: Format, timestamp: Timestamp) {
    FORMAT.store(format as u8, Ordering::Relaxed);
    TIMESTAMP.store(timestamp as u8, Ordering::Relaxed);
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

/// `syslog-enabled yes`: every line logged also goes here (the binary's
/// syslog(3) call), as Valkey sends it to both.
static SYSLOG: std::sync::OnceLock<fn(Level, &str)> = std::sync::OnceLock::new();

/// Send every line logged from now on to `send` as well.
pub fn set_syslog(send: fn(Level, &str)) {
    let _ = SYSLOG.set(send);
}

pub fn log(level: Level, msg: &str) {
    if !enabled(level) {
        return;
    }
    if let Some(send) = SYSLOG.get() {
        send(level, msg);
    }
    write_out(&format_line(level, msg, SystemTime::now()));
}

/// `text` as it is, without a line's prefix (Valkey's `LL_RAW`: the
/// start-up logo), at `level`.
pub fn raw(level: Level, text: &str) {
    if enabled(level) {
        write_out(text);
    }
}

/// To the log file, or standard output without one.
fn write_out(line: &str) {
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

/// `12345:M 22 Nov 2026 13:42:03.123 * message\n` (UTC), or the same
/// in the configured format.
pub fn format_line(level: Level, msg: &str, at: SystemTime) -> String {
    let role = ROLE.load(Ordering::Relaxed);
    let time = timestamp(at);
    if FORMAT.load(Ordering::Relaxed) == Format::Logfmt as u8 {
        // Valkey's logfmt keeps the message one quoted value: its quotes
        // become apostrophes and line breaks spaces.
        let msg: String = msg
            .chars()
            .map(|c| match c {
                '"' => '\'',
                '\n' | '\r' => ' ',
                c => c,
            })
            .collect();
        format!(
            "pid={} role={} timestamp=\"{time}\" level={} message=\"{msg}\"\n",
            std::process::id(),
            role_name(role),
            level.name()
        )
    } else {
        format!(
            "{}:{} {time} {} {msg}\n",
            std::process::id(),
            role as char,
            level.mark()
        )
    }
}

/// The role's name in logfmt lines.
fn role_name(role: u8) -> &'static str {
    match role {
        b'S' => "replica",
        b'C' => "child",
        b'X' => "sentinel",
        _ => "primary",
    }
}

fn timestamp(at: SystemTime) -> String {
    let d = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let ms = d.subsec_millis();
    let (y, mo, day) = civil_from_days(secs.div_euclid(86400));
    let sod = secs.rem_euclid(86400);
    let (h, mi, s) = (sod / 3600, sod / 60 % 60, sod % 60);
    match TIMESTAMP.load(Ordering::Relaxed) {
        t if t == Timestamp::Iso8601 as u8 => {
            format!("{y:04}-{mo:02}-{day:02}T{h:02}:{mi:02}:{s:02}.{ms:03}+00:00")
        }
        t if t == Timestamp::Milliseconds as u8 => d.as_millis().to_string(),
        _ => format!(
            "{day:02} {} {y} {h:02}:{mi:02}:{s:02}.{ms:03}",
            MONTHS[(mo - 1) as usize]
        ),
    }
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
        // The other formats, as Valkey 8.1 writes them (one test: the
        // format is process-wide).
        set_format(Format::Logfmt, Timestamp::Iso8601);
        let line = format_line(Level::Warning, "he said \"hi\"\nbye", t);
        let rest = line.split_once(' ').unwrap().1;
        assert_eq!(
            rest,
            "role=primary timestamp=\"2026-11-22T13:42:03.123+00:00\" level=warning \
             message=\"he said 'hi' bye\"\n"
        );
        set_format(Format::Legacy, Timestamp::Milliseconds);
        let rest = format_line(Level::Notice, "x", t)
            .split_once(':')
            .unwrap()
            .1
            .to_string();
        assert_eq!(rest, "M 1795354923123 * x\n");
        set_format(Format::Legacy, Timestamp::Legacy);
        assert_eq!(civil_from_days(11016), (2000, 2, 29));
    }
}
