//! Arbitrary bytes as an ACL file (`aclfile`): it loads or is refused
//! with a reason, never a panic; and what loads, written out as ACL SAVE
//! writes it, loads again to the same users — unless a pattern holds what
//! ACL SAVE writes unquoted and a reader splits on (white space, quotes,
//! control bytes, a parenthesis inside a selector): Valkey's files cannot
//! carry those either.
#![no_main]

use engine::acl::{self, Acl};
use libfuzzer_sys::fuzz_target;

fn described(users: &[Vec<String>]) -> Vec<String> {
    let mut a = Acl::new();
    for u in users {
        a.declare(u);
    }
    a.users_sorted().iter().map(|u| u.describe()).collect()
}

/// Every rule written as it was read would be read back the same.
fn round_trippable(users: &[Vec<String>]) -> bool {
    users.iter().flatten().all(|rule| {
        let plain = |t: &str| {
            !t.chars()
                .any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '\'')
        };
        match rule.strip_prefix('(').and_then(|r| r.strip_suffix(')')) {
            Some(inner) => inner
                .split_ascii_whitespace()
                .all(|t| plain(t) && !t.contains(['(', ')'])),
            None => plain(rule),
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let users = match acl::file::parse(text, "fuzz.acl", false) {
        Ok(u) => u,
        Err(e) => {
            assert!(!e.is_empty());
            return;
        }
    };
    let first = described(&users);
    if !round_trippable(&users) {
        return;
    }
    let saved: String = first.iter().map(|l| format!("{l}\n")).collect();
    let again = acl::file::parse(&saved, "saved.acl", false)
        .unwrap_or_else(|e| panic!("the saved file does not load: {e}\n{saved}"));
    assert_eq!(described(&again), first, "{saved}");
});
