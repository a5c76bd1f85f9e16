//! The command part of an AOF file (an incr file, a base written as
//! commands, the tail after an RDB preamble): RESP multibulk commands and
//! `#` annotation lines (`#TS:<unix s>`), which are skipped.
//!
//! [`Scanner`] is pure: it is handed the file's bytes a piece at a time
//! and reports complete commands (spans over the piece), where the last
//! complete command ends, and the MULTI a file may end inside, so the
//! loader (and the fuzzer) can tell a clean end from a torn write. Each
//! command is parsed by `resp::parse_command`, the network parser, with no
//! size limit: Valkey's loader takes any `$len` the file claims.

use resp::{Limits, Parsed, Span};

/// The parser's limits for file contents (no bulk or count cap; a header
/// line still has to end within 64 KiB).
fn limits() -> Limits {
    Limits {
        max_bulk_len: (i64::MAX / 2) as usize,
        ..Limits::default()
    }
}

/// Bytes that are not an AOF: Valkey's "Bad file format".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadFormat {
    /// File offset of the command or line that is wrong.
    pub offset: u64,
    pub reason: String,
}

/// What one [`Scanner::scan`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scanned {
    /// Bytes of the piece used (complete commands and annotations); the
    /// rest starts a command (or annotation) that needs more bytes.
    pub consumed: usize,
    /// How many bytes from the start of that rest the parser knows it
    /// needs, when it knows.
    pub need: Option<usize>,
}

/// How a file ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// After a complete command (or annotation), not inside a MULTI.
    Clean,
    /// A partial command at `at`, or a MULTI without its EXEC
    /// (`open_multi`): the file is whole up to `keep` (for a MULTI, the
    /// end of the command before it, as Valkey reverts to).
    Truncated {
        at: u64,
        keep: u64,
        open_multi: bool,
    },
}

/// Where a file's reading stands (file offsets).
#[derive(Clone, Debug, Default)]
pub struct Scanner {
    /// Offset of the next byte to scan.
    pos: u64,
    /// End of the last complete command.
    valid_up_to: u64,
    /// `valid_up_to` when the open MULTI was read.
    before_multi: u64,
    in_multi: bool,
}

impl Scanner {
    /// Reading starts at file offset `start`.
    pub fn new(start: u64) -> Scanner {
        Scanner {
            pos: start,
            valid_up_to: start,
            before_multi: start,
            in_multi: false,
        }
    }

    /// File offset of the next byte to hand in.
    pub fn offset(&self) -> u64 {
        self.pos
    }

    /// Scan `buf` (the file's bytes from [`Scanner::offset`] on): append
    /// each complete command's argument spans (relative to `buf`) to
    /// `args` and its argument count to `argc`. `eof`: nothing follows
    /// `buf` (a last annotation line needs no newline then).
    pub fn scan(
        &mut self,
        buf: &[u8],
        eof: bool,
        args: &mut Vec<Span>,
        argc: &mut Vec<u32>,
    ) -> Result<Scanned, BadFormat> {
        let limits = limits();
        let mut at = 0;
        let mut local = Vec::new();
        while at < buf.len() {
            let rest = &buf[at..];
            let here = self.pos + at as u64;
            if rest[0] == b'#' {
                match rest.iter().position(|&b| b == b'\n') {
                    Some(nl) => at += nl + 1,
                    None if eof => at = buf.len(),
                    None => break,
                }
                continue;
            }
            if rest[0] != b'*' {
                return Err(BadFormat {
                    offset: here,
                    reason: format!("expected '*' or '#', got {}", show(rest[0])),
                });
            }
            local.clear();
            let parsed = resp::parse_command(rest, &limits, &mut local).map_err(|e| BadFormat {
                offset: here,
                reason: e.message().to_string(),
            })?;
            match parsed {
                Parsed::Command { argc: 0, .. } => {
                    return Err(BadFormat {
                        offset: here,
                        reason: "a command with no arguments".into(),
                    });
                }
                Parsed::Command { consumed, argc: n } => {
                    let name = local[0].slice(rest);
                    if name.eq_ignore_ascii_case(b"multi") {
                        self.before_multi = self.valid_up_to;
                        self.in_multi = true;
                    } else if name.eq_ignore_ascii_case(b"exec") {
                        self.in_multi = false;
                    }
                    args.extend(local.iter().map(|s| Span {
                        start: s.start + at,
                        len: s.len,
                    }));
                    argc.push(n as u32);
                    at += consumed;
                    self.valid_up_to = self.pos + at as u64;
                }
                Parsed::Incomplete { need } => {
                    self.pos += at as u64;
                    return Ok(Scanned { consumed: at, need });
                }
            }
        }
        self.pos += at as u64;
        Ok(Scanned {
            consumed: at,
            need: None,
        })
    }

    /// The file ended with `rest` bytes after the last scanned ones.
    pub fn end(&self, rest: usize) -> End {
        if rest == 0 && !self.in_multi {
            return End::Clean;
        }
        End::Truncated {
            at: self.pos,
            keep: if self.in_multi {
                self.before_multi
            } else {
                self.valid_up_to
            },
            open_multi: self.in_multi,
        }
    }
}

fn show(b: u8) -> String {
    if b.is_ascii_graphic() {
        format!("'{}'", b as char)
    } else {
        format!("'\\x{b:02x}'")
    }
}

/// One command's arguments.
pub type Argv = Vec<Vec<u8>>;

/// Every command of a whole file held in memory, as owned argument lists,
/// and how it ends (tests and the fuzzer).
pub fn parse_all(data: &[u8]) -> Result<(Vec<Argv>, End), BadFormat> {
    let mut sc = Scanner::new(0);
    let (mut args, mut argc) = (Vec::new(), Vec::new());
    let s = sc.scan(data, true, &mut args, &mut argc)?;
    let mut out = Vec::with_capacity(argc.len());
    let mut spans = args.iter();
    for n in argc {
        out.push(
            spans
                .by_ref()
                .take(n as usize)
                .map(|sp| sp.slice(data).to_vec())
                .collect(),
        );
    }
    Ok((out, sc.end(data.len() - s.consumed)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmds(v: &[Argv]) -> Vec<String> {
        v.iter()
            .map(|c| {
                c.iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }

    #[test]
    fn commands_and_annotations() {
        let data = b"#TS:1700000000\r\n*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\na b\r\n#TS:1700000001";
        let (c, end) = parse_all(data).unwrap();
        assert_eq!(cmds(&c), ["SELECT 0", "SET k a b"]);
        assert_eq!(end, End::Clean);
    }

    #[test]
    fn truncated_command() {
        let whole = b"*1\r\n$4\r\nPING\r\n";
        let mut data = whole.to_vec();
        data.extend_from_slice(b"*2\r\n$3\r\nDEL\r\n$1\r");
        let (c, end) = parse_all(&data).unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(
            end,
            End::Truncated {
                at: whole.len() as u64,
                keep: whole.len() as u64,
                open_multi: false
            }
        );
    }

    #[test]
    fn open_multi_reverts_before_it() {
        let one = b"*1\r\n$4\r\nPING\r\n#TS:1\r\n";
        let mut data = one.to_vec();
        data.extend_from_slice(b"*1\r\n$5\r\nMULTI\r\n*2\r\n$4\r\nINCR\r\n$1\r\nx\r\n");
        let (c, end) = parse_all(&data).unwrap();
        assert_eq!(c.len(), 3);
        // Valkey keeps the annotation's bytes out too: it reverts to the
        // end of the command before the MULTI.
        assert_eq!(
            end,
            End::Truncated {
                at: data.len() as u64,
                keep: 14,
                open_multi: true
            }
        );
        data.extend_from_slice(b"*1\r\n$4\r\nEXEC\r\n");
        assert_eq!(parse_all(&data).unwrap().1, End::Clean);
    }

    #[test]
    fn garbage_has_its_offset() {
        let e = parse_all(b"*1\r\n$4\r\nPING\r\nhello\r\n").unwrap_err();
        assert_eq!(e.offset, 14);
        let e = parse_all(b"*1\r\n$x\r\nPING\r\n").unwrap_err();
        assert_eq!(e.offset, 0);
        assert_eq!(e.reason, "invalid bulk length");
        let e = parse_all(b"*0\r\n").unwrap_err();
        assert_eq!(e.offset, 0);
    }

    #[test]
    fn pieces_resume() {
        let data =
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\n0123456789\r\n#TS:5\r\n*1\r\n$4\r\nPING\r\n";
        for cut in 0..data.len() {
            let mut sc = Scanner::new(0);
            let (mut args, mut argc) = (Vec::new(), Vec::new());
            let s = sc.scan(&data[..cut], false, &mut args, &mut argc).unwrap();
            let before = argc.len();
            let rest = &data[s.consumed..];
            let s2 = sc.scan(rest, true, &mut args, &mut argc).unwrap();
            assert_eq!(s.consumed + s2.consumed, data.len(), "cut {cut}");
            assert_eq!(argc.len(), 2, "cut {cut} ({before} before)");
            assert_eq!(sc.end(0), End::Clean);
        }
    }
}
