//! Number parsing and formatting with Valkey's exact rules (string2ll,
//! string2ld, long double formatting for INCRBYFLOAT).
//! PLACEHOLDER: the data-commands helper implements it.

/// Parse a strict decimal i64 as Valkey's `string2ll` does (no spaces, no
/// '+', no leading zeros except "0"); `None` if not.
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    std::str::from_utf8(b).ok()?.parse().ok()
}
