//! The ACL file (`aclfile`): one `user <name> <rules...>` line per user,
//! as ACL LIST writes them; read at start-up and by ACL LOAD, written by
//! ACL SAVE. A file with any bad line is refused whole.

use super::{Acl, merge_selector_args};
use std::path::Path;

/// Why an ACL file was not taken, in Valkey's words.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadError {
    /// It could not be opened or read.
    Open(String),
    /// Its bad lines, each with where it is.
    Lines(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Open(e) | ReadError::Lines(e) => f.write_str(e),
        }
    }
}

/// The users a file declares, each as `[name, rules...]`, checked as
/// Valkey's `ACLLoadFromFile` checks them; on error, every bad line.
/// `pubsub_all`: `acl-pubsub-default allchannels`.
pub fn read(path: &Path, pubsub_all: bool) -> Result<Vec<Vec<String>>, ReadError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        // strerror's text, as Valkey prints it (no "(os error N)").
        let why = e.to_string();
        let why = why.split(" (os error").next().unwrap_or_default();
        ReadError::Open(format!(
            "Error loading ACLs, opening file '{}': {why}",
            path.display()
        ))
    })?;
    parse(&text, &path.display().to_string(), pubsub_all).map_err(ReadError::Lines)
}

/// [`read`] of a file's text; `name` is the file's name, for errors.
pub fn parse(text: &str, name: &str, pubsub_all: bool) -> Result<Vec<Vec<String>>, String> {
    let mut users: Vec<Vec<String>> = Vec::new();
    let mut errors = String::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = n + 1;
        let Some(args) = crate::config::split_args(line) else {
            errors.push_str(&format!("{name}:{at}: unbalanced quotes in acl line. "));
            continue;
        };
        if args[0] != "user" {
            errors.push_str(&format!(
                "{name}:{at} should start with user keyword followed by the username. "
            ));
            continue;
        }
        // An empty name could not be read back from what ACL SAVE writes.
        if args.len() < 2 || args[1].is_empty() {
            errors.push_str(&format!("{name}:{at}: missing user name. "));
            continue;
        }
        let uname = &args[1];
        if uname.contains(' ') || uname.contains('\0') {
            errors.push_str(&format!(
                "{name}:{at}: username '{uname}' contains invalid characters. "
            ));
            continue;
        }
        if users.iter().any(|u| &u[0] == uname) {
            errors.push_str(&format!("{name}:{at}: Duplicate user '{uname}' found. "));
            continue;
        }
        let rules = match merge_selector_args(&args[2..]) {
            Ok(r) => r,
            Err(e) => {
                errors.push_str(&format!("{name}:{at}: {e}. "));
                continue;
            }
        };
        if let Err((_, why)) = Acl::validate(uname, &rules, pubsub_all) {
            errors.push_str(&format!("{name}:{at}: {why}. "));
            continue;
        }
        let mut u = vec![uname.clone()];
        u.extend(rules);
        users.push(u);
    }
    if errors.is_empty() {
        Ok(users)
    } else {
        Err(errors.trim_end().to_string())
    }
}

/// ACL SAVE: every user, as ACL LIST describes it, replacing the file at
/// once (written beside it, then renamed).
pub fn save(acl: &Acl, path: &Path) -> std::io::Result<()> {
    let mut text = String::new();
    for u in acl.users_sorted() {
        text.push_str(&u.describe());
        text.push('\n');
    }
    let tmp = path.with_extension(format!("acl-{}.tmp", std::process::id()));
    std::fs::write(&tmp, text.as_bytes())?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_acl_list_writes_and_refuses_bad_lines() {
        let mut a = Acl::new();
        a.set_user("u", &["on", ">pw", "~k*", "(~x +get)"]).unwrap();
        let text: String = a
            .users_sorted()
            .iter()
            .map(|u| u.describe() + "\n")
            .collect();
        let users = parse(&text, "f", false).unwrap();
        let mut b = Acl::new();
        for u in &users {
            b.declare(u);
        }
        let describe =
            |a: &Acl| -> Vec<String> { a.users_sorted().iter().map(|u| u.describe()).collect() };
        assert_eq!(describe(&a), describe(&b));
        assert_eq!(
            parse("# c\n\nuser u on\nuser u off\nfoo\nuser v bogus\n", "f", false),
            Err("f:4: Duplicate user 'u' found. f:5 should start with user keyword followed by the username. f:6: Syntax error.".into())
        );
    }
}
