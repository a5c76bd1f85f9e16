//! LCS: the longest common subsequence of two strings, with Valkey 8's
//! options (LEN, IDX, MINMATCHLEN, WITHMATCHLEN), replies and errors
//! (`lcsCommand` in `t_string.c`).
//!
//! The table is Valkey's full (len(a)+1) x (len(b)+1) dynamic program, and
//! the walk back through it takes the same turns, so the subsequence and
//! the IDX ranges are the ones Valkey picks among equally long answers.

use super::{NOT_INT, SYNTAX_ERR};
use crate::batch::ArgvRef;
use crate::cmd::strings::{as_str, bytes_of, lookup_read};
use crate::command::flags::*;
use crate::command::key_flags as kf;
use crate::command::{ArgSpec, CommandSpec, Ctx, KeySpec, spec};
use crate::num::parse_i64;

const LCS_ARGS: &[ArgSpec] = &[
    ArgSpec::key("key1", 0),
    ArgSpec::key("key2", 0),
    ArgSpec::pure_token("len", "LEN").optional(),
    ArgSpec::pure_token("idx", "IDX").optional(),
    ArgSpec::integer("min-match-len")
        .token("MINMATCHLEN")
        .optional(),
    ArgSpec::pure_token("withmatchlen", "WITHMATCHLEN").optional(),
];

pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    key_specs: &[KeySpec::index(1, kf::RO | kf::ACCESS).range(1, 1, 0)],
    ..spec(
        "string",
        "lcs",
        -3,
        READONLY,
        (1, 2, 1),
        &["read", "string", "slow"],
        "7.0.0",
        "Finds the longest common substring.",
        "O(N*M) where N and M are the lengths of s1 and s2, respectively",
        lcs,
        LCS_ARGS,
    )
}];

/// One key's string (empty when missing); `None` for another type.
fn string_of(ctx: &mut Ctx<'_>, key: &[u8]) -> Option<Vec<u8>> {
    let h = ctx.key_hash(key);
    let db = ctx.session.db;
    match lookup_read(ctx.srv, db, h, key, ctx.now_ms) {
        None => Some(Vec::new()),
        Some(e) => {
            let s = as_str(e)?;
            let mut buf = [0u8; resp::num::I64_MAX_LEN];
            Some(bytes_of(s, &mut buf).to_vec())
        }
    }
}

fn lcs(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let a = string_of(ctx, argv.get(1));
    let b = string_of(ctx, argv.get(2));
    let (Some(a), Some(b)) = (a, b) else {
        return ctx.error("ERR The specified keys must contain string values");
    };
    let (mut getidx, mut getlen, mut withmatchlen) = (false, false, false);
    let mut minmatchlen: i64 = 0;
    let mut j = 3;
    while j < argv.len() {
        let o = argv.get(j);
        let more = argv.len() - 1 - j;
        if o.eq_ignore_ascii_case(b"idx") {
            getidx = true;
        } else if o.eq_ignore_ascii_case(b"len") {
            getlen = true;
        } else if o.eq_ignore_ascii_case(b"withmatchlen") {
            withmatchlen = true;
        } else if o.eq_ignore_ascii_case(b"minmatchlen") && more > 0 {
            let Some(n) = parse_i64(argv.get(j + 1)) else {
                return ctx.error(NOT_INT);
            };
            minmatchlen = n.max(0);
            j += 1;
        } else {
            return ctx.error(SYNTAX_ERR);
        }
        j += 1;
    }
    if getidx && getlen {
        return ctx.error("ERR If you want both the length and indexes, please just use IDX.");
    }
    if a.len() >= u32::MAX as usize - 1 || b.len() >= u32::MAX as usize - 1 {
        return ctx.error("ERR String too long for LCS");
    }
    let cells = (a.len() as u64 + 1) * (b.len() as u64 + 1);
    if cells * 4 > ctx.srv.config.proto_max_bulk_len as u64 {
        return ctx
            .error("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
    }
    let table = Table::build(&a, &b);
    let total = table.at(a.len(), b.len());
    if getlen {
        return ctx.reply.int(i64::from(total));
    }
    let walk = table.walk(&a, &b);
    if !getidx {
        return ctx.reply.bulk(&walk.common);
    }
    let min = minmatchlen as u64;
    let r = &mut ctx.reply;
    r.map_len(2);
    r.bulk(b"matches");
    let kept: Vec<&Match> = walk
        .matches
        .iter()
        .filter(|m| min == 0 || u64::from(m.len) >= min)
        .collect();
    r.array_len(kept.len());
    for m in kept {
        r.array_len(2 + usize::from(withmatchlen));
        r.array_len(2);
        r.int(i64::from(m.a.0));
        r.int(i64::from(m.a.1));
        r.array_len(2);
        r.int(i64::from(m.b.0));
        r.int(i64::from(m.b.1));
        if withmatchlen {
            r.int(i64::from(m.len));
        }
    }
    r.bulk(b"len");
    r.int(i64::from(total));
}

/// `LCS(i, j)`: the length of the LCS of `a[..i]` and `b[..j]`.
struct Table {
    cells: Vec<u32>,
    width: usize,
}

/// A run of common bytes: inclusive ranges in `a` and `b`, and its length.
struct Match {
    a: (u32, u32),
    b: (u32, u32),
    len: u32,
}

/// The walk back through the table: the subsequence and its runs, last
/// run first (Valkey's order).
struct Walk {
    common: Vec<u8>,
    matches: Vec<Match>,
}

impl Table {
    fn build(a: &[u8], b: &[u8]) -> Table {
        let width = b.len() + 1;
        let mut cells = vec![0u32; (a.len() + 1) * width];
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                cells[i * width + j] = if a[i - 1] == b[j - 1] {
                    cells[(i - 1) * width + j - 1] + 1
                } else {
                    cells[(i - 1) * width + j].max(cells[i * width + j - 1])
                };
            }
        }
        Table { cells, width }
    }

    fn at(&self, i: usize, j: usize) -> u32 {
        self.cells[i * self.width + j]
    }

    fn walk(&self, a: &[u8], b: &[u8]) -> Walk {
        let mut idx = self.at(a.len(), b.len()) as usize;
        let mut common = vec![0u8; idx];
        let mut matches = Vec::new();
        // `None`: no run open (Valkey's `arange_start == alen`).
        let mut run: Option<Match> = None;
        let (mut i, mut j) = (a.len(), b.len());
        while i > 0 && j > 0 {
            let mut emit = false;
            if a[i - 1] == b[j - 1] {
                common[idx - 1] = a[i - 1];
                let (ai, bj) = ((i - 1) as u32, (j - 1) as u32);
                match &mut run {
                    None => {
                        run = Some(Match {
                            a: (ai, ai),
                            b: (bj, bj),
                            len: 0,
                        })
                    }
                    // Contiguous with the open run: extend it backwards.
                    Some(m) if m.a.0 == ai + 1 && m.b.0 == bj + 1 => {
                        m.a.0 = ai;
                        m.b.0 = bj;
                    }
                    Some(_) => emit = true,
                }
                // Reached the first byte of either string: the run ends.
                if let Some(m) = &run
                    && (m.a.0 == 0 || m.b.0 == 0)
                {
                    emit = true;
                }
                idx -= 1;
                i -= 1;
                j -= 1;
            } else {
                if self.at(i - 1, j) > self.at(i, j - 1) {
                    i -= 1;
                } else {
                    j -= 1;
                }
                emit = run.is_some();
            }
            if emit && let Some(mut m) = run.take() {
                m.len = m.a.1 - m.a.0 + 1;
                matches.push(m);
            }
        }
        Walk { common, matches }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run as (range in a, range in b, length).
    type Run = ((u32, u32), (u32, u32), u32);

    fn lcs_of(a: &str, b: &str) -> (String, Vec<Run>) {
        let t = Table::build(a.as_bytes(), b.as_bytes());
        let w = t.walk(a.as_bytes(), b.as_bytes());
        let runs = w.matches.iter().map(|m| (m.a, m.b, m.len)).collect();
        (String::from_utf8(w.common).unwrap(), runs)
    }

    #[test]
    fn finds_valkeys_documented_example() {
        let (s, runs) = lcs_of("ohmytext", "mynewtext");
        assert_eq!(s, "mytext");
        assert_eq!(runs, vec![((4, 7), (5, 8), 4), ((2, 3), (0, 1), 2)]);
    }

    #[test]
    fn empty_and_disjoint_strings_have_nothing_in_common() {
        assert_eq!(lcs_of("", "abc").0, "");
        assert_eq!(lcs_of("abc", "").0, "");
        assert_eq!(lcs_of("abc", "xyz"), (String::new(), vec![]));
    }
}
