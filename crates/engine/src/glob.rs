//! Glob-style pattern matching with Valkey's `stringmatchlen` semantics
//! (`*`, `?`, `[a-z]`, `[^x]`, `\` escapes), for KEYS, SCAN MATCH, CONFIG GET.
//!
//! The quirks are Valkey's and kept on purpose, because clients see them:
//! an unterminated `[` class matches what it collected so far, `[z-a]` is
//! the range `a-z`, range bounds compare as C's signed `char`, a trailing
//! `\` is a literal backslash, and a pattern never matches the empty string
//! unless it is itself empty (`*` included: KEYS and SCAN special-case a
//! lone `*` before calling this).

/// Valkey gives up (no match) past this many nested `*`, so a pattern
/// cannot drive the recursion arbitrarily deep.
const MAX_NESTING: u32 = 1000;

/// Does `text` match `pattern`? `nocase` folds ASCII case.
pub fn matches(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    let mut give_up = false;
    match_from(pattern, text, nocase, &mut give_up, 0)
}

#[inline]
fn fold(b: u8, nocase: bool) -> u8 {
    if nocase { b.to_ascii_lowercase() } else { b }
}

/// A byte as C's (signed) `char`, which is what range bounds compare as.
#[inline]
fn signed(b: u8) -> i32 {
    b as i8 as i32
}

/// `give_up` is shared by the whole match: once the rest of a pattern
/// after some `*` matched nowhere in the remaining text, no earlier `*`
/// can help by swallowing more, so every caller returns false at once.
/// This bounds `*a*a*a*...b` patterns to polynomial work.
fn match_from(mut p: &[u8], mut s: &[u8], nocase: bool, give_up: &mut bool, nesting: u32) -> bool {
    if nesting > MAX_NESTING {
        return false;
    }
    while !p.is_empty() && !s.is_empty() {
        match p[0] {
            b'*' => {
                while p.len() >= 2 && p[1] == b'*' {
                    p = &p[1..];
                }
                if p.len() == 1 {
                    return true;
                }
                while !s.is_empty() {
                    if match_from(&p[1..], s, nocase, give_up, nesting + 1) {
                        return true;
                    }
                    if *give_up {
                        return false;
                    }
                    s = &s[1..];
                }
                *give_up = true;
                return false;
            }
            b'?' => s = &s[1..],
            b'[' => {
                p = &p[1..];
                let negate = p.first() == Some(&b'^');
                if negate {
                    p = &p[1..];
                }
                let c = s[0];
                let mut hit = false;
                loop {
                    match p.first() {
                        Some(b'\\') if p.len() >= 2 => {
                            p = &p[1..];
                            if p[0] == c {
                                hit = true;
                            }
                        }
                        // Left on the `]` so the shared advance below
                        // consumes it.
                        Some(b']') => break,
                        // Unterminated class: what was collected decides.
                        None => break,
                        Some(_) if p.len() >= 3 && p[1] == b'-' => {
                            let (mut lo, mut hi) = (signed(p[0]), signed(p[2]));
                            if lo > hi {
                                std::mem::swap(&mut lo, &mut hi);
                            }
                            let mut ch = signed(c);
                            if nocase {
                                lo = fold_signed(lo);
                                hi = fold_signed(hi);
                                ch = fold_signed(ch);
                            }
                            p = &p[2..];
                            if ch >= lo && ch <= hi {
                                hit = true;
                            }
                        }
                        Some(&b) => {
                            if fold(b, nocase) == fold(c, nocase) {
                                hit = true;
                            }
                        }
                    }
                    p = &p[1..];
                }
                if hit == negate {
                    return false;
                }
                s = &s[1..];
            }
            b => {
                // `\x` matches `x`; a trailing `\` is itself.
                let lit = if b == b'\\' && p.len() >= 2 {
                    p = &p[1..];
                    p[0]
                } else {
                    b
                };
                if fold(lit, nocase) != fold(s[0], nocase) {
                    return false;
                }
                s = &s[1..];
            }
        }
        if !p.is_empty() {
            p = &p[1..];
        }
        if s.is_empty() {
            while p.first() == Some(&b'*') {
                p = &p[1..];
            }
            break;
        }
    }
    p.is_empty() && s.is_empty()
}

/// `tolower` in the C locale on a signed char: ASCII only.
#[inline]
fn fold_signed(c: i32) -> i32 {
    if (b'A' as i32..=b'Z' as i32).contains(&c) {
        c + 32
    } else {
        c
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    fn m(p: &str, s: &str) -> bool {
        matches(p.as_bytes(), s.as_bytes(), false)
    }

    #[test]
    fn literals_and_wildcards() {
        assert!(m("hello", "hello"));
        assert!(!m("hello", "hell"));
        assert!(!m("hell", "hello"));
        assert!(m("h?llo", "hello"));
        assert!(m("h?llo", "hallo"));
        assert!(!m("h?llo", "hllo"));
        assert!(m("h*llo", "hllo"));
        assert!(m("h*llo", "heeeello"));
        assert!(m("*", "anything"));
        assert!(m("**", "x"));
        assert!(m("a*", "a"));
        assert!(m("a**", "a"));
        assert!(m("*a*", "bab"));
        assert!(!m("*a*", "bbb"));
        assert!(m("*.txt", "notes.txt"));
        assert!(!m("*.txt", "notes.txt.bak"));
        assert!(m("", ""));
        assert!(!m("", "a"));
    }

    #[test]
    fn empty_text_matches_only_the_empty_pattern() {
        // Valkey's loop never runs on an empty string, so even `*` fails.
        assert!(!m("*", ""));
        assert!(!m("?", ""));
        assert!(!m("[a]", ""));
    }

    #[test]
    fn classes() {
        assert!(m("h[ae]llo", "hello"));
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(!m("h[a-b]llo", "hcllo"));
        // Reversed ranges are normalised.
        assert!(m("h[z-a]llo", "hqllo"));
        assert!(m("[0-9][0-9]", "42"));
        assert!(!m("[0-9]", "a"));
        assert!(m("[^0-9]", "a"));
        // A leading `-` is a member; before `]` it starts a range to `]`
        // (`c-]` is `]..=c`, which holds `_` but not `-`).
        assert!(m("[-a]", "-"));
        assert!(!m("[abc-]", "-"));
        assert!(m("[abc-]", "_"));
        assert!(!m("[abc-]", "d"));
        // `]` right after `[` closes an empty class: never matches.
        assert!(!m("[]a]", "a"));
        assert!(!m("[]a]", "]"));
        assert!(m("[\\]]", "]"));
        assert!(m("[\\-]", "-"));
        assert!(m("[a\\-z]", "-"));
        assert!(!m("[a\\-z]", "b"));
    }

    #[test]
    fn unterminated_class_uses_what_it_collected() {
        assert!(m("[ab", "a"));
        assert!(m("[ab", "b"));
        assert!(!m("[ab", "c"));
        assert!(!m("[ab", "ab"));
        assert!(!m("[", "a"));
        // `[^` with nothing after negates an empty set: any one byte.
        assert!(m("[^", "x"));
        assert!(!m("[^", "xy"));
        // `[a-` needs three bytes for a range, so `-` is just a member.
        assert!(m("[a-", "-"));
        assert!(!m("[a-", "b"));
    }

    #[test]
    fn dash_before_bracket_is_a_range_to_bracket() {
        // `a-]` is the range a..=] (reversed: ]..=a), and the class is
        // then unterminated.
        assert!(m("[a-]", "^"));
        assert!(m("[a-]", "a"));
        assert!(!m("[a-]", "b"));
    }

    #[test]
    fn escapes() {
        assert!(m("\\*", "*"));
        assert!(!m("\\*", "a"));
        assert!(m("a\\?b", "a?b"));
        assert!(!m("a\\?b", "acb"));
        assert!(m("\\[a]", "[a]"));
        // A trailing backslash is a literal backslash.
        assert!(m("a\\", "a\\"));
        assert!(!m("a\\", "a"));
    }

    #[test]
    fn nocase() {
        assert!(matches(b"HeLLo", b"hello", true));
        assert!(!matches(b"HeLLo", b"hello", false));
        assert!(matches(b"h[A-Z]llo", b"hello", true));
        assert!(matches(b"h[a-z]llo", b"hEllo", true));
        assert!(matches(b"h[E]llo", b"hello", true));
        assert!(matches(b"MAX*", b"maxmemory", true));
        // Escaped class members compare exactly.
        assert!(!matches(b"[\\E]", b"e", true));
    }

    #[test]
    fn ranges_compare_as_signed_char() {
        // 0xff is -1 as a C char, so [a-\xff] is the range -1..=97.
        assert!(matches(b"[a-\xff]", b"A", false));
        assert!(!matches(b"[a-\xff]", b"b", false));
        assert!(matches(b"[\x80-\xff]", b"\xc3", false));
        assert!(!matches(b"[\x80-\xff]", b"a", false));
    }

    #[test]
    fn binary_bytes() {
        assert!(matches(b"a\0*", b"a\0bc", false));
        assert!(!matches(b"a\0*", b"a1bc", false));
        assert!(matches(b"?", b"\xff", false));
    }

    #[test]
    fn pathological_patterns_finish() {
        let text = "a".repeat(10_000);
        let pat = format!("{}b", "a*".repeat(200));
        let t = std::time::Instant::now();
        assert!(!m(&pat, &text));
        let pat = format!("{}b", "*a".repeat(5000));
        assert!(!m(&pat, &text));
        assert!(t.elapsed() < std::time::Duration::from_secs(2));
        assert!(m(&"*a".repeat(100), &text));
    }

    #[test]
    fn nesting_limit() {
        // 1001 stars nest 1001 deep: past Valkey's limit, no match even
        // though the pattern would otherwise match.
        let text = "a".repeat(1100);
        assert!(m(&"a*".repeat(1000), &text));
        assert!(!m(&"*a".repeat(1001), &text));
        assert!(m(&"*a".repeat(1000), &text));
        assert!(!m(&"a*".repeat(1002), &text));
    }
}
