//! Access control lists: Valkey's users, what each may run, read, write
//! and publish, and the log of what was refused.
//!
//! # Design
//!
//! ```text
//!  Acl ── users: Vec<Option<User>>  (a UserId never changes nor is reused)
//!   │        User ── flags, password hashes
//!   │              └─ root Selector + (selectors...)  any one allowing wins
//!   │                    Selector ── a bit per command-table entry
//!   │                             ├─ key patterns (%R~ %W~ ~)
//!   │                             └─ channel patterns (&)
//!   ├─ credentials: Arc<Credentials>  (what AUTH needs, for the busy path)
//!   └─ log: AclLog                    (ACL LOG)
//! ```
//!
//! * A session holds its user's [`UserId`]; every command looks the user
//!   up, so ACL SETUSER acts on connected clients at once, as in Valkey.
//!   A user allowed everything ([`User::unrestricted`]) costs one index
//!   and one flag per command.
//! * Rules are Valkey's, applied as Valkey's `ACLSetUser`/`ACLSetSelector`
//!   apply them, and described back as its ACL LIST does: the command
//!   rules are kept as given after the last `+@all`/`-@all`, each command
//!   once, so that a description read back gives the same permissions.
//! * ACL SETUSER is all or nothing: rules go to a copy of the user, which
//!   replaces it only if every rule was valid.
//!
//! This module owns users, the permission decision and the ACL log. It
//! never replies: callers (`cmd::acl`, dispatch, scripts) get a
//! [`Denied`], and [`refuse`] counts it, logs it and words it as Valkey.

pub mod file;
pub mod log;
pub mod sha256;

use crate::getkeys;
use crate::server::Server;
use crate::session::Session;
use crate::table::{Table, table};
use std::collections::HashMap;
use std::sync::Arc;

pub use log::AclLog;

/// A user's place in [`Acl`]; stays valid (pointing at nothing) once the
/// user is deleted.
pub type UserId = u32;
/// `default`: every new connection starts as it.
pub const DEFAULT_USER: UserId = 0;
/// Internal clients (the primary's link, the AOF loader): never checked.
pub const SUPERUSER: UserId = u32::MAX;

/// Valkey's ACL categories, in its order (ACL CAT).
pub const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

const KEY_READ: u8 = 1;
const KEY_WRITE: u8 = 2;

/// Why a rule was refused: Valkey's `ACLSetUserStringError` texts.
pub mod rule_errors {
    pub const UNKNOWN: &str = "Unknown command or category name in ACL";
    pub const SYNTAX: &str = "Syntax error";
    pub const KEY_AFTER_ALL: &str = "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns";
    pub const CHANNEL_AFTER_ALL: &str = "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels";
    pub const NO_SUCH_PASSWORD: &str =
        "The password you are trying to remove from the user does not exist";
    pub const BAD_HASH: &str = "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters";
    pub const FIRSTARG_OF_SUB: &str = "Allowing first-arg of a subcommand is not supported";
}

/// What one selector allows.
#[derive(Clone, Debug)]
struct Selector {
    /// A bit per command-table entry (subcommands have their own).
    commands: Vec<u64>,
    /// Entries allowed only with one of these first arguments (Valkey's
    /// deprecated `+select|0`), lower-cased.
    first_args: Vec<(usize, Vec<Vec<u8>>)>,
    /// The last of `+@all` / `-@all` was `+@all`.
    all_future: bool,
    /// The command rules after it, as given (`+get`, `-@string`, ...).
    rules: Vec<String>,
    all_keys: bool,
    /// (KEY_READ | KEY_WRITE, pattern).
    keys: Vec<(u8, Vec<u8>)>,
    all_channels: bool,
    channels: Vec<Vec<u8>>,
}

impl Selector {
    fn new(entries: usize) -> Selector {
        Selector {
            commands: vec![0; entries.div_ceil(64)],
            first_args: Vec::new(),
            all_future: false,
            rules: Vec::new(),
            all_keys: false,
            keys: Vec::new(),
            all_channels: false,
            channels: Vec::new(),
        }
    }

    fn allows_everything(&self) -> bool {
        self.all_future && self.rules.is_empty() && self.all_keys && self.all_channels
    }

    fn bit(&self, i: usize) -> bool {
        self.commands[i / 64] & (1 << (i % 64)) != 0
    }

    fn set_bit(&mut self, i: usize, on: bool) {
        if on {
            self.commands[i / 64] |= 1 << (i % 64);
        } else {
            self.commands[i / 64] &= !(1 << (i % 64));
        }
    }

    /// Valkey's `ACLChangeSelectorPerm`: the command and, for a
    /// container, all its subcommands.
    fn change(&mut self, t: &Table, i: usize, allow: bool) {
        self.set_bit(i, allow);
        self.first_args.retain(|(e, _)| *e != i);
        for &s in &t.entries[i].subs {
            self.set_bit(s, allow);
        }
    }

    /// Valkey's `ACLUpdateCommandRules`: the rule replaces any earlier one
    /// for the same command (or, for a command, its subcommands).
    fn note_rule(&mut self, rule: &str, allow: bool) {
        let rule = rule.to_ascii_lowercase();
        self.rules.retain(|r| {
            let name = &r[1..];
            !(name == rule
                || (name.len() > rule.len()
                    && name.starts_with(rule.as_str())
                    && name.as_bytes()[rule.len()] == b'|'))
        });
        self.rules
            .push(format!("{}{rule}", if allow { '+' } else { '-' }));
    }

    fn set_all(&mut self, allow: bool) {
        let fill = if allow { u64::MAX } else { 0 };
        self.commands.iter_mut().for_each(|w| *w = fill);
        self.first_args.clear();
        self.all_future = allow;
        self.rules.clear();
    }

    /// Valkey's `ACLSetSelector`: one rule about commands, keys or channels.
    fn apply(&mut self, t: &Table, op: &str) -> Result<(), &'static str> {
        use rule_errors::*;
        let lower = op.to_ascii_lowercase();
        match lower.as_str() {
            "allkeys" => return self.apply(t, "~*"),
            "resetkeys" => {
                self.all_keys = false;
                self.keys.clear();
                return Ok(());
            }
            "allchannels" => return self.apply(t, "&*"),
            "resetchannels" => {
                self.all_channels = false;
                self.channels.clear();
                return Ok(());
            }
            "allcommands" | "+@all" => {
                self.set_all(true);
                return Ok(());
            }
            "nocommands" | "-@all" => {
                self.set_all(false);
                return Ok(());
            }
            _ => {}
        }
        let b = op.as_bytes();
        match b.first() {
            Some(b'~' | b'%') => {
                if self.all_keys {
                    return Err(KEY_AFTER_ALL);
                }
                let (flags, pat) = if b[0] == b'~' {
                    (KEY_READ | KEY_WRITE, &b[1..])
                } else {
                    let Some(tilde) = b.iter().position(|&c| c == b'~') else {
                        return Err(SYNTAX);
                    };
                    let mut f = 0;
                    for &c in &b[1..tilde] {
                        match c.to_ascii_uppercase() {
                            b'R' => f |= KEY_READ,
                            b'W' => f |= KEY_WRITE,
                            _ => return Err(SYNTAX),
                        }
                    }
                    if f == 0 {
                        return Err(SYNTAX);
                    }
                    (f, &b[tilde + 1..])
                };
                if pat == b"*" && flags == KEY_READ | KEY_WRITE {
                    self.all_keys = true;
                    self.keys.clear();
                } else if let Some(k) = self.keys.iter_mut().find(|(_, p)| p == pat) {
                    k.0 |= flags;
                } else {
                    self.keys.push((flags, pat.to_vec()));
                }
                Ok(())
            }
            Some(b'&') => {
                if self.all_channels {
                    return Err(CHANNEL_AFTER_ALL);
                }
                let pat = &b[1..];
                if pat == b"*" {
                    self.all_channels = true;
                    self.channels.clear();
                } else if !self.channels.iter().any(|p| p == pat) {
                    self.channels.push(pat.to_vec());
                }
                Ok(())
            }
            Some(&sign @ (b'+' | b'-')) => {
                let allow = sign == b'+';
                let name = &lower[1..];
                if let Some(cat) = name.strip_prefix('@') {
                    if !CATEGORIES.contains(&cat) {
                        return Err(UNKNOWN);
                    }
                    for (i, e) in t.entries.iter().enumerate() {
                        if e.spec.acl_categories.contains(&cat) {
                            self.change(t, i, allow);
                        }
                    }
                    self.note_rule(name, allow);
                    return Ok(());
                }
                if !allow || !name.contains('|') {
                    let i = t.lookup_fullname(name.as_bytes()).ok_or(UNKNOWN)?;
                    self.change(t, i, allow);
                    self.note_rule(&t.entries[i].fullname, allow);
                    return Ok(());
                }
                // `+cmd|sub`: a subcommand; or, for a command without
                // subcommands, a first argument (Valkey splits at the last
                // `|`, so `+config|get|x` names a subcommand's first-arg).
                let (base, arg) = name.rsplit_once('|').ok_or(UNKNOWN)?;
                let i = t.lookup_fullname(base.as_bytes()).ok_or(UNKNOWN)?;
                if t.entries[i].parent.is_some() {
                    return Err(FIRSTARG_OF_SUB);
                }
                if arg.is_empty() {
                    return Err(SYNTAX);
                }
                if !t.entries[i].subs.is_empty() {
                    let sub = t.lookup_fullname(name.as_bytes()).ok_or(UNKNOWN)?;
                    self.change(t, sub, true);
                } else if !self.bit(i) {
                    match self.first_args.iter_mut().find(|(e, _)| *e == i) {
                        Some((_, args)) => args.push(arg.as_bytes().to_vec()),
                        None => self.first_args.push((i, vec![arg.as_bytes().to_vec()])),
                    }
                }
                self.note_rule(name, true);
                Ok(())
            }
            _ => Err(SYNTAX),
        }
    }

    fn describe_keys(&self) -> String {
        if self.all_keys {
            return "~*".into();
        }
        let parts: Vec<String> = self
            .keys
            .iter()
            .map(|(f, p)| {
                let prefix = match *f {
                    KEY_READ => "%R~",
                    KEY_WRITE => "%W~",
                    _ => "~",
                };
                format!("{prefix}{}", String::from_utf8_lossy(p))
            })
            .collect();
        parts.join(" ")
    }

    fn describe_channels(&self, reset: bool) -> String {
        if self.all_channels {
            return "&*".into();
        }
        let mut parts: Vec<String> = Vec::new();
        if reset {
            parts.push("resetchannels".into());
        }
        parts.extend(
            self.channels
                .iter()
                .map(|p| format!("&{}", String::from_utf8_lossy(p))),
        );
        parts.join(" ")
    }

    fn describe_commands(&self) -> String {
        let mut s = String::from(if self.all_future { "+@all" } else { "-@all" });
        for r in &self.rules {
            s.push(' ');
            s.push_str(r);
        }
        s
    }

    /// As ACL LIST shows a selector.
    fn describe(&self) -> String {
        let parts = [
            self.describe_keys(),
            self.describe_channels(true),
            self.describe_commands(),
        ];
        parts
            .iter()
            .filter(|p| !p.is_empty())
            .cloned()
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Valkey's `ACLSelectorCheckCmd`.
    fn check(&self, t: &Table, entry: usize, argv: &[&[u8]]) -> Result<(), Denied> {
        let spec = t.entries[entry].spec;
        if spec.flags & crate::command::flags::NO_AUTH == 0 && !self.bit(entry) {
            let first_ok = argv.len() >= 2
                && self.first_args.iter().any(|(e, args)| {
                    *e == entry && args.iter().any(|a| a.eq_ignore_ascii_case(argv[1]))
                });
            if !first_ok {
                return Err(Denied::Command);
            }
        }
        if !self.all_keys && getkeys::has_keys(spec) {
            for (pos, flags) in getkeys::command_keys(spec, argv) {
                if !self.key_allowed(argv[pos], flags) {
                    return Err(Denied::Key(pos));
                }
            }
        }
        if !self.all_channels {
            for (pos, pattern) in channels(spec.name, t.entries[entry].parent.is_some(), argv) {
                if !self.channel_allowed(argv[pos], pattern) {
                    return Err(Denied::Channel(pos));
                }
            }
        }
        Ok(())
    }

    /// Valkey's `ACLCheckChannelAgainstList`: a pattern subscription must
    /// be one of the patterns as written; a channel must match one.
    fn channel_allowed(&self, channel: &[u8], pattern: bool) -> bool {
        self.all_channels
            || self.channels.iter().any(|p| {
                if pattern {
                    p.as_slice() == channel
                } else {
                    crate::glob::matches(p, channel, false)
                }
            })
    }

    /// Valkey's `ACLSelectorCheckKey`.
    fn key_allowed(&self, key: &[u8], spec_flags: u16) -> bool {
        use crate::command::key_flags as kf;
        let mut need = 0;
        if spec_flags & kf::ACCESS != 0 {
            need |= KEY_READ;
        }
        if spec_flags & (kf::INSERT | kf::DELETE | kf::UPDATE) != 0 {
            need |= KEY_WRITE;
        }
        self.keys
            .iter()
            .any(|(f, p)| f & need == need && crate::glob::matches(p, key, false))
    }
}

/// The channels a command publishes or subscribes to (Valkey's
/// `getChannelsFromCommand`, less the unsubscribing ones, which ACLs do
/// not check): (argument position, is a pattern).
fn channels(name: &str, is_sub: bool, argv: &[&[u8]]) -> Vec<(usize, bool)> {
    if is_sub {
        return Vec::new();
    }
    match name {
        "publish" | "spublish" if argv.len() > 1 => vec![(1, false)],
        "subscribe" | "ssubscribe" => (1..argv.len()).map(|i| (i, false)).collect(),
        "psubscribe" => (1..argv.len()).map(|i| (i, true)).collect(),
        _ => Vec::new(),
    }
}

/// Why a command was refused, ordered as Valkey ranks them (the highest
/// over all selectors is the one reported).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    Command,
    /// The argument at this position is a key the user may not touch.
    Key(usize),
    /// ... a channel it may not use.
    Channel(usize),
}

impl Denied {
    fn rank(self) -> u8 {
        match self {
            Denied::Command => 1,
            Denied::Key(_) => 2,
            Denied::Channel(_) => 4,
        }
    }

    /// Valkey's `getAclErrorMessage` (verbose: DRYRUN names the key).
    pub fn message(self, user: &str, fullname: &str, argv: &[&[u8]], verbose: bool) -> String {
        match self {
            Denied::Command => {
                format!("User {user} has no permissions to run the '{fullname}' command")
            }
            Denied::Key(i) if verbose => format!(
                "User {user} has no permissions to access the '{}' key",
                String::from_utf8_lossy(argv[i])
            ),
            Denied::Key(_) => "No permissions to access a key".into(),
            Denied::Channel(i) if verbose => format!(
                "User {user} has no permissions to access the '{}' channel",
                String::from_utf8_lossy(argv[i])
            ),
            Denied::Channel(_) => "No permissions to access a channel".into(),
        }
    }

    /// ACL LOG's `reason`.
    pub fn reason(self) -> &'static str {
        match self {
            Denied::Command => "command",
            Denied::Key(_) => "key",
            Denied::Channel(_) => "channel",
        }
    }

    /// ACL LOG's `object`: the command's name, or the key or channel.
    pub fn object(self, fullname: &str, argv: &[&[u8]]) -> Vec<u8> {
        match self {
            Denied::Command => fullname.as_bytes().to_vec(),
            Denied::Key(i) | Denied::Channel(i) => argv[i].to_vec(),
        }
    }
}

/// One user.
#[derive(Clone, Debug)]
pub struct User {
    pub name: String,
    enabled: bool,
    nopass: bool,
    /// `Some(true)`: sanitize-payload; `Some(false)`: skip-sanitize-payload.
    sanitize: Option<bool>,
    passwords: Vec<[u8; 32]>,
    root: Selector,
    selectors: Vec<Selector>,
    /// `acl-pubsub-default allchannels` when the user was made: its
    /// selectors (and `reset`) start with every channel.
    pubsub_all: bool,
}

impl User {
    /// A new user as Valkey's `ACLCreateUser` makes it: off, no password,
    /// no commands or keys, and channels as `acl-pubsub-default` says.
    fn new(name: &str, entries: usize, pubsub_all: bool) -> User {
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

    fn remove_password(&mut self, h: &[u8; 32]) -> Result<(), &'static str> {
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
        self.passwords.iter().map(sha256::hex).collect()
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

/// What AUTH needs to know of every user: kept apart so that the busy
/// path (AUTH while a script runs, off the engine) can check passwords.
#[derive(Debug, Default)]
pub struct Credentials {
    users: HashMap<Vec<u8>, Login>,
}

/// One user as AUTH sees it.
#[derive(Debug)]
struct Login {
    id: UserId,
    enabled: bool,
    nopass: bool,
    hashes: Vec<[u8; 32]>,
}

impl Credentials {
    /// The user `name` authenticates with `pass`: on, and nopass or one of
    /// its passwords.
    pub fn authenticate(&self, name: &[u8], pass: &[u8]) -> Option<UserId> {
        let login = self.users.get(name)?;
        if !login.enabled {
            return None;
        }
        let h = sha256::digest(pass);
        // Compared in full whichever matches, so the time does not tell.
        let matched = login.hashes.iter().fold(false, |m, p| {
            m | crate::cmd::connection::constant_time_eq(p, &h)
        });
        (login.nopass || matched).then_some(login.id)
    }

    /// `default` has no password: AUTH <password> is an error.
    pub fn default_nopass(&self) -> bool {
        self.users.get(&b"default"[..]).is_some_and(|l| l.nopass)
    }
}

/// Every user, the ACL log, and the refusal counters.
pub struct Acl {
    users: Vec<Option<User>>,
    by_name: HashMap<String, UserId>,
    credentials: Arc<Credentials>,
    /// `acl-pubsub-default allchannels`: new users may use every channel.
    pub pubsub_default_all: bool,
    pub log: AclLog,
    /// INFO `acl_access_denied_{auth,cmd,key,channel}`.
    pub denied_auth: u64,
    pub denied_cmd: u64,
    pub denied_key: u64,
    pub denied_channel: u64,
}

impl Default for Acl {
    fn default() -> Self {
        Acl::new()
    }
}

impl Acl {
    /// Only `default`: on, nopass, every command, key and channel.
    pub fn new() -> Acl {
        let t = table();
        let mut d = User::new("default", t.entries.len(), false);
        for r in ["on", "nopass", "~*", "&*", "+@all"] {
            d.apply(t, r).expect("default user rules");
        }
        let mut acl = Acl {
            users: vec![Some(d)],
            by_name: HashMap::from([("default".to_string(), DEFAULT_USER)]),
            credentials: Arc::default(),
            pubsub_default_all: false,
            log: AclLog::default(),
            denied_auth: 0,
            denied_cmd: 0,
            denied_key: 0,
            denied_channel: 0,
        };
        acl.refresh_credentials();
        acl
    }

    pub fn user(&self, id: UserId) -> Option<&User> {
        self.users.get(id as usize).and_then(Option::as_ref)
    }

    pub fn id(&self, name: &[u8]) -> Option<UserId> {
        std::str::from_utf8(name)
            .ok()
            .and_then(|n| self.by_name.get(n).copied())
    }

    /// A session's user name (CLIENT LIST `user=`, ACL WHOAMI).
    pub fn name(&self, id: UserId) -> &str {
        self.user(id).map_or("default", |u| u.name.as_str())
    }

    /// Users by name (ACL USERS, ACL LIST).
    pub fn users_sorted(&self) -> Vec<&User> {
        let mut v: Vec<&User> = self.users.iter().flatten().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    pub fn credentials(&self) -> Arc<Credentials> {
        self.credentials.clone()
    }

    /// A new connection must AUTH: `default` is off or has passwords.
    pub fn auth_required(&self) -> bool {
        self.user(DEFAULT_USER)
            .is_none_or(|u| !(u.enabled && u.nopass))
    }

    /// `default` has no password (protected mode looks at this).
    pub fn default_nopass(&self) -> bool {
        self.user(DEFAULT_USER).is_some_and(|u| u.nopass)
    }

    /// Whether `id` may run table entry `entry` with `argv`; `Ok` at once
    /// for the superuser and for users allowed everything.
    #[inline]
    pub fn check(&self, id: UserId, entry: usize, argv: &[&[u8]]) -> Result<(), Denied> {
        if id == SUPERUSER {
            return Ok(());
        }
        match self.user(id) {
            Some(u) if u.unrestricted() => Ok(()),
            Some(u) => u.check(entry, argv),
            None => Err(Denied::Command),
        }
    }

    /// Valkey's `ACLUserCheckCmdWithUnrestrictedKeyAccess`: a selector that
    /// allows the command may also read every key (SORT's BY and GET).
    pub fn full_key_access(&self, id: UserId, entry: usize, argv: &[&[u8]]) -> bool {
        if id == SUPERUSER {
            return true;
        }
        let Some(u) = self.user(id) else {
            return false;
        };
        let t = table();
        std::iter::once(&u.root).chain(&u.selectors).any(|s| {
            s.check(t, entry, argv).is_ok()
                && (s.all_keys
                    || s.keys
                        .iter()
                        .any(|(f, p)| f & KEY_READ != 0 && p.as_slice() == b"*"))
        })
    }

    /// Whether `id` needs [`Acl::check`] at all (so the caller can skip
    /// gathering the arguments).
    #[inline]
    pub fn restricted(&self, id: UserId) -> bool {
        id != SUPERUSER && self.user(id).is_none_or(|u| !u.unrestricted())
    }

    /// ACL SETUSER: the rules to a copy of the user (a new one if none),
    /// which replaces it only if all of them apply. On error, the rule
    /// that failed and why.
    pub fn set_user<S: AsRef<str>>(
        &mut self,
        name: &str,
        rules: &[S],
    ) -> Result<(), (String, std::borrow::Cow<'static, str>)> {
        let t = table();
        let rules = merge_selector_args(rules).map_err(|e| (String::new(), e.into()))?;
        let existing = self.by_name.get(name).copied();
        let mut u = match existing.and_then(|id| self.user(id)) {
            Some(u) => u.clone(),
            None => User::new(name, t.entries.len(), self.pubsub_default_all),
        };
        for r in &rules {
            u.apply(t, r).map_err(|e| (r.clone(), e.into()))?;
        }
        match existing {
            Some(id) => self.users[id as usize] = Some(u),
            None => {
                let id = self.users.len() as UserId;
                self.users.push(Some(u));
                self.by_name.insert(name.to_string(), id);
            }
        }
        self.refresh_credentials();
        Ok(())
    }

    /// Whether a declared user's rules (a `user` line) apply to a new
    /// user: the check made while a config or ACL file is read.
    pub fn validate<S: AsRef<str>>(
        name: &str,
        rules: &[S],
        pubsub_all: bool,
    ) -> Result<(), (String, std::borrow::Cow<'static, str>)> {
        let t = table();
        let rules = merge_selector_args(rules).map_err(|e| (String::new(), e.into()))?;
        let mut u = User::new(name, t.entries.len(), pubsub_all);
        for r in &rules {
            u.apply(t, r).map_err(|e| (r.clone(), e.into()))?;
        }
        Ok(())
    }

    /// ACL DELUSER of one user (never `default`): its id, if it existed.
    pub fn delete_user(&mut self, name: &str) -> Option<UserId> {
        if name == "default" {
            return None;
        }
        let id = self.by_name.remove(name)?;
        self.users[id as usize] = None;
        self.refresh_credentials();
        Some(id)
    }

    /// Every user but `default` gone and `default` reset to its start
    /// (ACL LOAD, before the file's users).
    pub fn clear(&mut self) {
        let fresh = Acl::new();
        self.users = fresh.users;
        self.by_name = fresh.by_name;
        self.refresh_credentials();
    }

    fn refresh_credentials(&mut self) {
        let mut c = Credentials::default();
        for (id, u) in self.users.iter().enumerate() {
            if let Some(u) = u {
                let login = Login {
                    id: id as UserId,
                    enabled: u.enabled,
                    nopass: u.nopass,
                    hashes: u.passwords.clone(),
                };
                c.users.insert(u.name.as_bytes().to_vec(), login);
            }
        }
        self.credentials = Arc::new(c);
    }

    /// `requirepass` (start-up, CONFIG SET): the default user's password,
    /// or nopass when empty, as Valkey's `ACLUpdateDefaultUserPassword`.
    pub fn set_default_password(&mut self, pass: Option<&[u8]>) {
        let t = table();
        if let Some(Some(d)) = self.users.get_mut(DEFAULT_USER as usize) {
            let _ = d.apply(t, "resetpass");
            match pass {
                Some(p) => {
                    d.passwords.push(sha256::digest(p));
                }
                None => {
                    let _ = d.apply(t, "nopass");
                }
            }
        }
        self.refresh_credentials();
    }

    /// The commands (and `parent|sub` subcommands) of a category (ACL CAT).
    pub fn category_commands(cat: &str) -> Option<Vec<String>> {
        let cat = cat.to_ascii_lowercase();
        if !CATEGORIES.contains(&cat.as_str()) {
            return None;
        }
        let t = table();
        Some(
            t.entries
                .iter()
                .filter(|e| e.spec.acl_categories.contains(&cat.as_str()))
                .map(|e| e.fullname.clone())
                .collect(),
        )
    }
}

/// A declared user (`[name, rules...]`, from a config file's `user` line
/// or the ACL file), already checked: `default` starts over from
/// `reset`, as Valkey's loader does.
pub fn apply_declared(acl: &mut Acl, user: &[String]) {
    if user[0] == "default" {
        let _ = acl.set_user("default", &["reset"]);
    }
    let _ = acl.set_user(&user[0], &user[1..]);
}

/// The session is now `id` (AUTH, HELLO AUTH).
pub fn login(srv: &Server, sess: &mut Session, id: UserId) {
    sess.user = id;
    sess.user_name = std::borrow::Cow::Owned(srv.acl.name(id).to_string());
    sess.authenticated = true;
}

/// Adds an ACL LOG entry for a refusal of `sess`.
pub fn log_refusal(
    srv: &mut Server,
    sess: &Session,
    reason: &'static str,
    context: log::Context,
    object: &[u8],
    username: &[u8],
    now_ms: i64,
) {
    let max_len = srv
        .config
        .get("acllog-max-len")
        .and_then(|v| v.parse().ok())
        .unwrap_or(128);
    let r = log::Refusal {
        reason,
        context,
        object,
        username,
        client_info: crate::cmd::client::client_line(sess, now_ms),
    };
    srv.acl.log.add(r, now_ms, max_len);
}

/// A command refused by `sess`'s ACL: counted (INFO), logged (ACL LOG),
/// and Valkey's error text (without its `NOPERM` code).
pub fn refuse(
    srv: &mut Server,
    sess: &Session,
    d: Denied,
    entry: usize,
    argv: &[&[u8]],
    now_ms: i64,
) -> String {
    refuse_in(srv, sess, d, entry, argv, log::Context::of(sess), now_ms)
}

/// [`refuse`] from a given context (a script's call).
pub fn refuse_in(
    srv: &mut Server,
    sess: &Session,
    d: Denied,
    entry: usize,
    argv: &[&[u8]],
    context: log::Context,
    now_ms: i64,
) -> String {
    match d {
        Denied::Command => srv.acl.denied_cmd += 1,
        Denied::Key(_) => srv.acl.denied_key += 1,
        Denied::Channel(_) => srv.acl.denied_channel += 1,
    }
    let fullname = table().entries[entry].fullname.as_str();
    let object = d.object(fullname, argv);
    log_refusal(
        srv,
        sess,
        d.reason(),
        context,
        &object,
        sess.user_name.as_bytes(),
        now_ms,
    );
    d.message(&sess.user_name, fullname, argv, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl_with(name: &str, rules: &[&str]) -> Acl {
        let mut a = Acl::new();
        a.set_user(name, rules).unwrap();
        a
    }

    #[test]
    fn describes_as_valkey_lists() {
        let a = acl_with(
            "u",
            &[
                "on",
                ">pw",
                "~k*",
                "%R~r*",
                "%W~w*",
                "&ch*",
                "+get",
                "+set",
                "-@all",
                "+@string",
                "-set",
                "+config|get",
                "+client",
            ],
        );
        let u = a.user(a.id(b"u").unwrap()).unwrap();
        assert_eq!(
            u.describe(),
            "user u on sanitize-payload #30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4 ~k* %R~r* %W~w* resetchannels &ch* -@all +@string -set +config|get +client"
        );
        assert_eq!(
            a.user(DEFAULT_USER).unwrap().describe(),
            "user default on nopass sanitize-payload ~* &* +@all"
        );
        let a = acl_with(
            "v",
            &[
                "on",
                "nopass",
                "allkeys",
                "allchannels",
                "allcommands",
                "-debug",
                "+@dangerous",
                "-flushall",
            ],
        );
        let v = a.user(a.id(b"v").unwrap()).unwrap();
        assert_eq!(
            v.describe(),
            "user v on nopass sanitize-payload ~* &* +@all -debug +@dangerous -flushall"
        );
        let a = acl_with("w", &[]);
        let w = a.user(a.id(b"w").unwrap()).unwrap();
        assert_eq!(
            w.describe(),
            "user w off sanitize-payload resetchannels -@all"
        );
    }

    #[test]
    fn checks_commands_keys_and_channels() {
        let t = table();
        let a = acl_with(
            "u",
            &["on", "nopass", "~k*", "%R~r*", "&ch*", "+@all", "-set"],
        );
        let id = a.id(b"u").unwrap();
        let get = t.lookup(b"get").unwrap();
        let set = t.lookup(b"set").unwrap();
        let del = t.lookup(b"del").unwrap();
        let publish = t.lookup(b"publish").unwrap();
        assert_eq!(a.check(id, get, &[b"get", b"k1"]), Ok(()));
        assert_eq!(a.check(id, get, &[b"get", b"r1"]), Ok(()));
        assert_eq!(a.check(id, get, &[b"get", b"x"]), Err(Denied::Key(1)));
        assert_eq!(
            a.check(id, set, &[b"set", b"k", b"v"]),
            Err(Denied::Command)
        );
        assert_eq!(a.check(id, del, &[b"del", b"r1"]), Err(Denied::Key(1)));
        assert_eq!(a.check(id, publish, &[b"publish", b"chx", b"m"]), Ok(()));
        assert_eq!(
            a.check(id, publish, &[b"publish", b"zz", b"m"]),
            Err(Denied::Channel(1))
        );
        assert_eq!(a.check(DEFAULT_USER, set, &[b"set", b"x", b"v"]), Ok(()));
        assert!(!a.restricted(DEFAULT_USER));
        assert!(a.restricted(id));
    }

    #[test]
    fn rule_errors_are_valkeys_and_leave_the_user_as_it_was() {
        let mut a = Acl::new();
        assert_eq!(
            a.set_user("y", &["on", "bogus"]),
            Err(("bogus".into(), rule_errors::SYNTAX.into()))
        );
        assert!(a.id(b"y").is_none(), "a failed SETUSER creates nothing");
        for (r, e) in [
            ("+nosuch", rule_errors::UNKNOWN),
            ("+@nosuch", rule_errors::UNKNOWN),
            ("+config|nosuch", rule_errors::UNKNOWN),
            ("#abc", rule_errors::BAD_HASH),
            ("<nothere", rule_errors::NO_SUCH_PASSWORD),
        ] {
            assert_eq!(a.set_user("y", &[r]), Err((r.to_string(), e.into())));
        }
        a.set_user("z", &["~*"]).unwrap();
        assert_eq!(
            a.set_user("z", &["~x"]),
            Err(("~x".into(), rule_errors::KEY_AFTER_ALL.into()))
        );
        assert!(a.set_user("z", &["+get|x", "(~x +get)"]).is_ok());
    }

    #[test]
    fn passwords_authenticate_enabled_users() {
        let mut a = acl_with("u", &["on", ">pw", ">other"]);
        let id = a.id(b"u").unwrap();
        assert_eq!(a.credentials().authenticate(b"u", b"pw"), Some(id));
        assert_eq!(a.credentials().authenticate(b"u", b"other"), Some(id));
        assert_eq!(a.credentials().authenticate(b"u", b"bad"), None);
        a.set_user("u", &["off"]).unwrap();
        assert_eq!(a.credentials().authenticate(b"u", b"pw"), None);
        assert!(!a.auth_required());
        a.set_default_password(Some(b"s3cret"));
        assert!(a.auth_required());
        assert_eq!(
            a.user(DEFAULT_USER).unwrap().describe(),
            "user default on sanitize-payload #1ec1c26b50d5d3c58d9583181af8076655fe00756bf7285940ba3670f99fcba0 ~* &* +@all"
        );
    }
}
