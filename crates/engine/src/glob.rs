//! Glob-style pattern matching with Valkey's `stringmatchlen` semantics
//! (`*`, `?`, `[a-z]`, `[^x]`, `\` escapes), for KEYS, SCAN MATCH, CONFIG GET.
//! PLACEHOLDER: the data-commands helper implements it.

/// Does `text` match `pattern`? `nocase` folds ASCII case.
pub fn matches(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    if nocase {
        pattern.eq_ignore_ascii_case(text) || pattern == b"*"
    } else {
        pattern == text || pattern == b"*"
    }
}
