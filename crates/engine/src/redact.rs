//! Arguments never shown to operators. MONITOR lines and SLOWLOG entries
//! print a command as its client sent it, except for secrets, which read
//! `(redacted)` — the arguments Valkey 8 redacts: every argument of AUTH,
//! the user name and password after HELLO's AUTH, MIGRATE's AUTH / AUTH2
//! credentials, the value CONFIG SET gives a sensitive setting (passwords,
//! the user name for the primary), the user names of ACL GETUSER and
//! DELUSER, and the user name and every rule of ACL SETUSER (rules hold
//! passwords and their hashes).

use crate::batch::ArgvRef;

pub const REDACTED: &[u8] = b"(redacted)";

/// Argument `j` of the command `fullname` (the table's name, `config|set`)
/// as it may be shown.
pub fn shown<'a>(fullname: &str, argv: ArgvRef<'a>, j: usize) -> &'a [u8] {
    if is_secret(fullname, argv, j) {
        REDACTED
    } else {
        argv.get(j)
    }
}

fn is_secret(fullname: &str, argv: ArgvRef<'_>, j: usize) -> bool {
    match fullname {
        "auth" => j >= 1,
        // ACL SETUSER's, GETUSER's and DELUSER's user names too (Valkey 8.1).
        "acl|setuser" | "acl|getuser" | "acl|deluser" => j >= 2,
        // HELLO [protover [AUTH username password] [SETNAME name]]
        "hello" => (3..argv.len())
            .any(|k| argv.get(k - 1).eq_ignore_ascii_case(b"auth") && (j == k || j == k + 1)),
        // CONFIG SET name value [name value ...]
        "config|set" => j >= 3 && j % 2 == 1 && crate::config::is_sensitive(argv.get(j - 1)),
        // MIGRATE ... [AUTH password | AUTH2 username password] [KEYS ...]
        "migrate" => (6..argv.len()).any(|k| {
            let t = argv.get(k);
            (t.eq_ignore_ascii_case(b"auth") && j == k + 1)
                || (t.eq_ignore_ascii_case(b"auth2") && (j == k + 1 || j == k + 2))
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown_all(fullname: &str, args: &[&str]) -> Vec<String> {
        let (mut data, mut spans) = (Vec::new(), Vec::new());
        crate::batch::pack_args(args.iter().map(|a| a.as_bytes()), &mut data, &mut spans);
        let argv = ArgvRef {
            data: &data,
            spans: &spans,
        };
        (0..argv.len())
            .map(|j| String::from_utf8_lossy(shown(fullname, argv, j)).into_owned())
            .collect()
    }

    #[test]
    fn secrets_read_redacted() {
        assert_eq!(shown_all("auth", &["AUTH", "pw"]), ["AUTH", "(redacted)"]);
        assert_eq!(
            shown_all("hello", &["HELLO", "3", "AUTH", "u", "p", "SETNAME", "n"]),
            [
                "HELLO",
                "3",
                "AUTH",
                "(redacted)",
                "(redacted)",
                "SETNAME",
                "n"
            ]
        );
        assert_eq!(
            shown_all(
                "config|set",
                &["CONFIG", "SET", "maxmemory", "1", "requirepass", "x"]
            ),
            [
                "CONFIG",
                "SET",
                "maxmemory",
                "1",
                "requirepass",
                "(redacted)"
            ]
        );
        // The user name for the primary is a secret too in Valkey 8.1,
        // under either name.
        for name in ["masteruser", "primaryuser", "MASTERAUTH", "primaryauth"] {
            assert_eq!(
                shown_all("config|set", &["CONFIG", "SET", name, "u"]),
                ["CONFIG", "SET", name, "(redacted)"]
            );
        }
        assert_eq!(
            shown_all(
                "migrate",
                &["MIGRATE", "h", "1", "k", "0", "5", "AUTH2", "u", "p"]
            ),
            [
                "MIGRATE",
                "h",
                "1",
                "k",
                "0",
                "5",
                "AUTH2",
                "(redacted)",
                "(redacted)"
            ]
        );
        assert_eq!(
            shown_all("acl|setuser", &["ACL", "SETUSER", "u", "on", ">pw"]),
            ["ACL", "SETUSER", "(redacted)", "(redacted)", "(redacted)"]
        );
        assert_eq!(
            shown_all("set", &["SET", "auth", "x"]),
            ["SET", "auth", "x"]
        );
    }
}
