//! The AOF manifest: the text file that says which files make up the
//! append-only file (one base, history files waiting to be deleted, the
//! incr files in order). Parsing and formatting are pure (bytes in, bytes
//! out) so they can be fuzzed; reading and the atomic write are at the end.
//!
//! Parsing follows Valkey's `aofLoadManifestFromFile`: lines read as
//! `fgets` reads them (at most 1024 bytes), `#` lines skipped, arguments
//! split as `sdssplitargs` does, `key value` pairs in any order (unknown
//! keys ignored), the same error texts. Two checks are stricter than
//! Valkey's: a file name must be non-empty UTF-8 and a sequence number
//! positive (Valkey accepts what it would then fail to open or write).

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

/// `MANIFEST_MAX_LINE`: longer lines are an error.
const MAX_LINE: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Base,
    History,
    Incr,
}

impl Kind {
    fn letter(self) -> char {
        match self {
            Kind::Base => 'b',
            Kind::History => 'h',
            Kind::Incr => 'i',
        }
    }
}

/// One `file <name> seq <n> type <b|h|i>` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub seq: i64,
    pub kind: Kind,
}

/// What a manifest lists, in Valkey's order: base, history, incr.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    pub base: Option<Entry>,
    pub history: Vec<Entry>,
    /// Ascending sequence numbers.
    pub incr: Vec<Entry>,
}

/// Why a manifest was refused: Valkey's message, and the line it was on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestError {
    pub msg: &'static str,
    /// (1-based line number, the line as read, trimmed).
    pub line: Option<(usize, String)>,
}

impl std::fmt::Display for ManifestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.line {
            Some((n, text)) => write!(f, "{} (line {n}: '{text}')", self.msg),
            None => f.write_str(self.msg),
        }
    }
}

const INVALID: &str = "Invalid AOF manifest file format";

impl Manifest {
    /// The base's sequence number (0 without a base).
    pub fn base_seq(&self) -> i64 {
        self.base.as_ref().map_or(0, |e| e.seq)
    }
    /// The last incr file's sequence number (0 without one).
    pub fn incr_seq(&self) -> i64 {
        self.incr.last().map_or(0, |e| e.seq)
    }
    /// Base then incr files: what a load reads, in order.
    pub fn loaded(&self) -> impl Iterator<Item = &Entry> {
        self.base.iter().chain(self.incr.iter())
    }
    /// Is `name` one of the base or incr files?
    pub fn lists(&self, name: &str) -> bool {
        self.loaded().any(|e| e.name == name)
    }

    /// Parse a manifest's bytes.
    pub fn parse(text: &[u8]) -> Result<Manifest, ManifestError> {
        let mut m = Manifest::default();
        let mut rest = text;
        let mut linenum = 0;
        if rest.is_empty() {
            return Err(ManifestError {
                msg: "Found an empty AOF manifest",
                line: None,
            });
        }
        while !rest.is_empty() {
            // fgets: up to and including '\n', at most MAX_LINE bytes.
            let cap = rest.len().min(MAX_LINE);
            let len = rest[..cap]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(cap, |i| i + 1);
            let raw = &rest[..len];
            rest = &rest[len..];
            linenum += 1;
            if raw[0] == b'#' {
                continue;
            }
            // C string functions stop at a NUL byte.
            let cstr = raw.split(|&b| b == 0).next().unwrap_or(&[]);
            let shown = String::from_utf8_lossy(trim(cstr)).into_owned();
            let fail = |msg| ManifestError {
                msg,
                line: Some((linenum, shown.clone())),
            };
            if !cstr.contains(&b'\n') {
                return Err(fail("The AOF manifest file contains too long line"));
            }
            let line = std::str::from_utf8(trim(cstr)).map_err(|_| fail(INVALID))?;
            if line.is_empty() {
                return Err(fail(INVALID));
            }
            let argv = engine::config::split_args(line).ok_or_else(|| fail(INVALID))?;
            if argv.len() < 6 || argv.len() % 2 != 0 {
                return Err(fail(INVALID));
            }
            let (mut name, mut seq, mut kind) = (None, 0i64, None);
            for pair in argv.chunks(2) {
                let (key, value) = (&pair[0], &pair[1]);
                if key.eq_ignore_ascii_case("file") {
                    if value.contains('/') || value.contains('\\') {
                        return Err(fail("File can't be a path, just a filename"));
                    }
                    name = Some(value.clone());
                } else if key.eq_ignore_ascii_case("seq") {
                    seq = atoll(value.as_bytes());
                } else if key.eq_ignore_ascii_case("type") {
                    kind = Some(value.bytes().next().unwrap_or(0));
                }
            }
            let (Some(name), Some(kind)) = (name, kind) else {
                return Err(fail(INVALID));
            };
            if name.is_empty() || seq <= 0 || kind == 0 {
                return Err(fail(INVALID));
            }
            let kind = match kind {
                b'b' => Kind::Base,
                b'h' => Kind::History,
                b'i' => Kind::Incr,
                _ => return Err(fail("Unknown AOF file type")),
            };
            let entry = Entry { name, seq, kind };
            match kind {
                Kind::Base if m.base.is_some() => {
                    return Err(fail("Found duplicate base file information"));
                }
                Kind::Base => m.base = Some(entry),
                Kind::History => m.history.push(entry),
                Kind::Incr => {
                    if seq <= m.incr_seq() {
                        return Err(fail("Found a non-monotonic sequence number"));
                    }
                    m.incr.push(entry);
                }
            }
        }
        Ok(m)
    }

    /// The manifest's text, as Valkey's `getAofManifestAsString` writes it.
    pub fn format(&self) -> String {
        let mut out = String::new();
        let all = self
            .base
            .iter()
            .chain(self.history.iter())
            .chain(self.incr.iter());
        for e in all {
            out.push_str("file ");
            if needs_repr(&e.name) {
                out.push_str(&engine::config::repr(&e.name));
            } else {
                out.push_str(&e.name);
            }
            out.push_str(&format!(" seq {} type {}\n", e.seq, e.kind.letter()));
        }
        out
    }
}

/// `sdstrim(line, " \t\r\n")`.
fn trim(mut s: &[u8]) -> &[u8] {
    let blank = |b: &u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
    while let Some((first, rest)) = s.split_first()
        && blank(first)
    {
        s = rest;
    }
    while let Some((last, rest)) = s.split_last()
        && blank(last)
    {
        s = rest;
    }
    s
}

/// C's `atoll`: leading blanks, a sign, digits up to the first non-digit
/// (saturating where C would overflow).
fn atoll(s: &[u8]) -> i64 {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let mut v: i64 = 0;
    while let Some(d) = s.get(i).filter(|d| d.is_ascii_digit()) {
        let d = (d - b'0') as i64;
        v = if neg {
            v.saturating_mul(10).saturating_sub(d)
        } else {
            v.saturating_mul(10).saturating_add(d)
        };
        i += 1;
    }
    v
}

/// `sdsneedsrepr`: the name must be quoted to survive `sdssplitargs`.
fn needs_repr(s: &str) -> bool {
    s.is_empty()
        || s.bytes().any(|c| {
            matches!(c, b'\\' | b'"' | b'\'' | b'\n' | b'\r' | b'\t' | 7 | 8)
                || !(0x20..0x7f).contains(&c)
                || c == b' '
        })
}

/// Read and parse `path`: `Ok(None)` when it does not exist.
pub fn read(path: &Path) -> Result<Option<Manifest>, String> {
    let text = match fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(format!(
                "Fatal error: can't open the AOF manifest file {} for reading: {}",
                path.display(),
                super::strerror(&e)
            ));
        }
    };
    Manifest::parse(&text)
        .map(Some)
        .map_err(|e| format!("Bad AOF manifest file {}: {e}", path.display()))
}

/// Write `m` as `dir/name` atomically: a temp file in `dir`, fsync,
/// rename, fsync the directory (Valkey's `writeAofManifestFile`).
pub fn write(dir: &Path, name: &str, m: &Manifest) -> Result<(), String> {
    let temp_name = format!("temp-{name}");
    let temp = dir.join(&temp_name);
    let result = (|| {
        let mut f = File::create(&temp).map_err(|e| {
            format!(
                "Can't open the AOF manifest file {temp_name}: {}",
                super::strerror(&e)
            )
        })?;
        f.write_all(m.format().as_bytes()).map_err(|e| {
            format!(
                "Error trying to write the temporary AOF manifest file {temp_name}: {}",
                super::strerror(&e)
            )
        })?;
        f.sync_data().map_err(|e| {
            format!(
                "Fail to fsync the temp AOF file {temp_name}: {}.",
                super::strerror(&e)
            )
        })?;
        fs::rename(&temp, dir.join(name)).map_err(|e| {
            format!(
                "Error trying to rename the temporary AOF manifest file {temp_name} into {name}: {}",
                super::strerror(&e)
            )
        })?;
        super::sync_dir(dir).map_err(|e| {
            format!(
                "Fail to fsync AOF directory {}: {}.",
                dir.display(),
                super::strerror(&e)
            )
        })
    })();
    if let Err(e) = &result {
        let _ = fs::remove_file(&temp);
        engine::log::warning(e);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, seq: i64, kind: Kind) -> Entry {
        Entry {
            name: name.into(),
            seq,
            kind,
        }
    }

    #[test]
    fn valkey_manifest() {
        let text = b"file appendonly.aof.2.base.rdb seq 2 type b\n\
                     file appendonly.aof.1.incr.aof seq 1 type h\n\
                     file appendonly.aof.2.incr.aof seq 2 type i\n\
                     file appendonly.aof.3.incr.aof seq 3 type i\n";
        let m = Manifest::parse(text).unwrap();
        assert_eq!(
            m.base,
            Some(entry("appendonly.aof.2.base.rdb", 2, Kind::Base))
        );
        assert_eq!(
            m.history,
            vec![entry("appendonly.aof.1.incr.aof", 1, Kind::History)]
        );
        assert_eq!(m.incr.len(), 2);
        assert_eq!(m.incr_seq(), 3);
        assert_eq!(m.format().as_bytes(), &text[..]);
    }

    #[test]
    fn any_key_order_comments_quotes_unknown_keys() {
        let text = b"# a comment\n  type i seq 5 file \"a b.aof\" extra x  \r\nTYPE b SEQ 1 FILE base.rdb\n";
        let m = Manifest::parse(text).unwrap();
        assert_eq!(m.incr, vec![entry("a b.aof", 5, Kind::Incr)]);
        assert_eq!(m.base, Some(entry("base.rdb", 1, Kind::Base)));
        assert_eq!(
            m.format(),
            "file base.rdb seq 1 type b\nfile \"a b.aof\" seq 5 type i\n"
        );
        assert_eq!(Manifest::parse(m.format().as_bytes()).unwrap(), m);
    }

    #[test]
    fn errors() {
        let msg = |t: &[u8]| Manifest::parse(t).unwrap_err().msg;
        assert_eq!(msg(b""), "Found an empty AOF manifest");
        assert_eq!(
            msg(b"file a seq 1 type i"),
            "The AOF manifest file contains too long line"
        );
        let long = format!("file {} seq 1 type i\n", "x".repeat(1100));
        assert_eq!(
            msg(long.as_bytes()),
            "The AOF manifest file contains too long line"
        );
        assert_eq!(msg(b"\n"), INVALID);
        assert_eq!(msg(b"file a seq 1\n"), INVALID);
        assert_eq!(msg(b"file a seq 1 type\n"), INVALID);
        assert_eq!(msg(b"file a seq 0 type i\n"), INVALID);
        assert_eq!(msg(b"file a seq x type i\n"), INVALID);
        assert_eq!(msg(b"file \"a seq 1 type i\n"), INVALID);
        assert_eq!(msg(b"file a x 1 type i\n"), INVALID);
        assert_eq!(msg(b"file a seq 1 type x\n"), "Unknown AOF file type");
        assert_eq!(
            msg(b"file d/a seq 1 type i\n"),
            "File can't be a path, just a filename"
        );
        assert_eq!(
            msg(b"file a seq 1 type b\nfile b seq 2 type b\n"),
            "Found duplicate base file information"
        );
        assert_eq!(
            msg(b"file a seq 2 type i\nfile b seq 2 type i\n"),
            "Found a non-monotonic sequence number"
        );
        let e = Manifest::parse(b"# c\nfile a seq 1 type i\nbad\n").unwrap_err();
        assert_eq!(e.line, Some((3, "bad".into())));
        assert_eq!(e.to_string(), format!("{INVALID} (line 3: 'bad')"));
    }

    #[test]
    fn odd_names_round_trip() {
        for name in ["a\"b", "tab\there", "é", "x'y", "\u{7f}", " lead"] {
            let m = Manifest {
                base: None,
                history: vec![],
                incr: vec![entry(name, 1, Kind::Incr)],
            };
            assert_eq!(Manifest::parse(m.format().as_bytes()).unwrap(), m, "{name}");
        }
    }

    #[test]
    fn atoll_like_c() {
        assert_eq!(atoll(b" +12abc"), 12);
        assert_eq!(atoll(b"-3"), -3);
        assert_eq!(atoll(b"x"), 0);
        assert_eq!(atoll(b"99999999999999999999999"), i64::MAX);
    }
}
