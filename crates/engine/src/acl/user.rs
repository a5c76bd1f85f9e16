//! A user: its flags, password hashes and selectors (Valkey's `user`),
//! the rules that change it, and how ACL LIST and GETUSER describe it.

use super::selector::{Denied, Selector};
use super::{rule_errors, sha256};
use crate::table::{Table, table};

/// One user.
#[derive(Clone, Debug)]
pub struct User {
    pub name: String,
    pub(super) enabled: bool,
    pub(super) nopass: bool,
    /// `Some(true)`: sanitize-payload; `Some(false)`: skip-sanitize-payload.
    pub(super) sanitize: Option<bool>,
    pub(super) passwords: Vec<[u8; 32]>,
    pub(super) root: Selector,
    pub(super) selectors: Vec<Selector>,
    /// `acl-pubsub-default allchannels` when the user was made: its
    /// selectors (and `reset`) start with every channel.
    pub(super) pubsub_all: bool,
}

impl User {
    /// A new user as Valkey's `ACLCreateUser` makes it: off, no password,
    /// no commands or keys, and channels as `acl-pubsub-default` says.
    pub(super) fn new(name: &str, entries: usize, pubsub_all: bool) -> User {
        let mut root = Selector::new(entries);
        root.all_channels = pubsub_all;
        User {
            name: name.to_string(),
            enabled: false,
            nopass: false,
            sanitize: Some(true),
            passwords: Vec::new(),
            root,
            selectors: Vec::new(),
            pubsub_all,
        }
    }

    /// `base` with `rules` applied (selectors given over several arguments
    /// merged first), or the first rule that does not apply.
    pub(super) fn build<S: AsRef<str>>(
        mut base: User,
        rules: &[S],
    ) -> Result<User, super::RuleError> {
        let t = table();
        let rules = merge_selector_args(rules).map_err(|e| (String::new(), e.into()))?;
        for r in &rules {
            base.apply(t, r).map_err(|e| (r.clone(), e.into()))?;
        }
        Ok(base)
    }

    /// Allowed every command, key and channel: no check needed.
    pub fn unrestricted(&self) -> bool {
        self.root.allows_everything()
    }

    /// May subscribe to `channel` (a pattern subscription if `pattern`).
    pub fn channel_allowed(&self, channel: &[u8], pattern: bool) -> bool {
        std::iter::once(&self.root)
            .chain(&self.selectors)
            .any(|s| s.channel_allowed(channel, pattern))
    }

    /// Valkey's `ACLSetUser`: one rule.
    pub fn apply(&mut self, t: &Table, op: &str) -> Result<(), &'static str> {
        use rule_errors::*;
        let lower = op.to_ascii_lowercase();
        match lower.as_str() {
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "skip-sanitize-payload" => self.sanitize = Some(false),
            "sanitize-payload" => self.sanitize = Some(true),
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "clearselectors" => self.selectors.clear(),
            "reset" => {
                for r in ["resetpass", "resetkeys", "resetchannels", "off"] {
                    self.apply(t, r)?;
                }
                if self.pubsub_all {
                    self.apply(t, "allchannels")?;
                }
                self.apply(t, "sanitize-payload")?;
                self.apply(t, "clearselectors")?;
                self.apply(t, "-@all")?;
            }
            _ => {
                let b = op.as_bytes();
                match b.first() {
                    Some(b'>') => {
                        let h = sha256::digest(&b[1..]);
                        if !self.passwords.contains(&h) {
                            self.passwords.push(h);
                        }
                        self.nopass = false;
                    }
                    Some(b'#') => {
                        let h = parse_hash(&b[1..]).ok_or(BAD_HASH)?;
                        if !self.passwords.contains(&h) {
                            self.passwords.push(h);
                        }
                        self.nopass = false;
                    }
                    Some(b'<') => {
                        let h = sha256::digest(&b[1..]);
                        self.remove_password(&h)?;
                    }
                    Some(b'!') => {
                        let h = parse_hash(&b[1..]).ok_or(BAD_HASH)?;
                        self.remove_password(&h)?;
                    }
                    Some(b'(') if b.last() == Some(&b')') && b.len() >= 2 => {
                        let mut s = Selector::new(t.entries.len());
                        s.all_channels = self.pubsub_all;
                        for part in op[1..op.len() - 1].split_ascii_whitespace() {
                            s.apply(t, part)?;
                        }
                        self.selectors.push(s);
                    }
                    _ => self.root.apply(t, op)?,
                }
            }
        }
        Ok(())
    }

    pub(super) fn remove_password(&mut self, h: &[u8; 32]) -> Result<(), &'static str> {
        let before = self.passwords.len();
        self.passwords.retain(|p| p != h);
        if self.passwords.len() == before {
            return Err(rule_errors::NO_SUCH_PASSWORD);
        }
        Ok(())
    }

    /// The flags as ACL GETUSER lists them.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        match self.sanitize {
            Some(false) => f.push("skip-sanitize-payload"),
            Some(true) => f.push("sanitize-payload"),
            None => {}
        }
        f
    }

    pub fn password_hashes(&self) -> Vec<String> {
        self.passwords.iter().map(|p| crate::num::hex(p)).collect()
    }

    /// One line of ACL LIST (and of an ACL file): `user <name> <rules>`.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = vec![format!("user {}", self.name)];
        parts.extend(self.flags().iter().map(|f| f.to_string()));
        parts.extend(self.password_hashes().iter().map(|h| format!("#{h}")));
        parts.push(self.root.describe());
        parts.extend(self.selectors.iter().map(|s| format!("({})", s.describe())));
        parts.join(" ")
    }

    /// ACL GETUSER's `commands`, `keys`, `channels` of the root selector,
    /// then of each further selector.
    pub fn selector_fields(&self) -> (SelectorFields, Vec<SelectorFields>) {
        let f = |s: &Selector| SelectorFields {
            commands: s.describe_commands(),
            keys: s.describe_keys(),
            channels: s.describe_channels(false),
        };
        (f(&self.root), self.selectors.iter().map(f).collect())
    }

    /// Valkey's `ACLCheckAllUserCommandPerm`: any selector allowing is
    /// enough; else the gravest refusal among them.
    pub fn check(&self, entry: usize, argv: &[&[u8]]) -> Result<(), Denied> {
        let t = table();
        let mut worst: Option<Denied> = None;
        for s in std::iter::once(&self.root).chain(&self.selectors) {
            match s.check(t, entry, argv) {
                Ok(()) => return Ok(()),
                Err(d) => {
                    if worst.is_none_or(|w| d.rank() > w.rank()) {
                        worst = Some(d);
                    }
                }
            }
        }
        Err(worst.unwrap_or(Denied::Command))
    }
}

/// ACL GETUSER's description of one selector.
pub struct SelectorFields {
    pub commands: String,
    pub keys: String,
    pub channels: String,
}

fn parse_hash(hex: &[u8]) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; 32];
    for (o, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        *o = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(out)
}

/// Valkey's `ACLMergeSelectorArguments`: a selector given over several
/// arguments (`(~x`, `+get)`), as a config file's `user` line splits it,
/// becomes one rule.
pub fn merge_selector_args<S: AsRef<str>>(args: &[S]) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut open: Option<String> = None;
    for a in args {
        let a = a.as_ref();
        match open.as_mut() {
            Some(s) => {
                s.push(' ');
                s.push_str(a);
                if a.ends_with(')') {
                    out.extend(open.take());
                }
            }
            None if a.starts_with('(') && !a.ends_with(')') => open = Some(a.to_string()),
            None => out.push(a.to_string()),
        }
    }
    match open {
        Some(s) => Err(format!(
            "Unmatched parenthesis in acl selector starting at '{}'.",
            s.split(' ').next().unwrap_or_default()
        )),
        None => Ok(out),
    }
}
