//! A selector: the commands (a bit per command-table entry), keys and
//! channels one rule set allows, Valkey's `aclSelector`; and the check of
//! one command against it.

use super::CATEGORIES;
use super::rule_errors::*;
use crate::getkeys;
use crate::table::Table;

pub(super) const KEY_READ: u8 = 1;
pub(super) const KEY_WRITE: u8 = 2;

/// What one selector allows.
#[derive(Clone, Debug)]
pub(super) struct Selector {
    /// A bit per command-table entry (subcommands have their own).
    pub(super) commands: Vec<u64>,
    /// Entries allowed only with one of these first arguments (Valkey's
    /// deprecated `+select|0`), lower-cased.
    pub(super) first_args: Vec<(usize, Vec<Vec<u8>>)>,
    /// The last of `+@all` / `-@all` was `+@all`.
    pub(super) all_future: bool,
    /// The command rules after it, as given (`+get`, `-@string`, ...).
    pub(super) rules: Vec<String>,
    pub(super) all_keys: bool,
    /// (KEY_READ | KEY_WRITE, pattern).
    pub(super) keys: Vec<(u8, Vec<u8>)>,
    pub(super) all_channels: bool,
    pub(super) channels: Vec<Vec<u8>>,
}

impl Selector {
    pub(super) fn new(entries: usize) -> Selector {
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

    pub(super) fn allows_everything(&self) -> bool {
        self.all_future && self.rules.is_empty() && self.all_keys && self.all_channels
    }

    pub(super) fn bit(&self, i: usize) -> bool {
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
    pub(super) fn apply(&mut self, t: &Table, op: &str) -> Result<(), &'static str> {
        let lower = op.to_ascii_lowercase();
        match lower.as_str() {
            // `~*` and `&*` are the flags themselves: given again they
            // change nothing (other patterns after them are refused).
            "allkeys" | "~*" => {
                self.all_keys = true;
                self.keys.clear();
                return Ok(());
            }
            "resetkeys" => {
                self.all_keys = false;
                self.keys.clear();
                return Ok(());
            }
            "allchannels" | "&*" => {
                self.all_channels = true;
                self.channels.clear();
                return Ok(());
            }
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
                if !self.channels.iter().any(|p| p == pat) {
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
                    let i = t.lookup_fullname_original(name.as_bytes()).ok_or(UNKNOWN)?;
                    self.change(t, i, allow);
                    self.note_rule(&t.entries[i].fullname, allow);
                    return Ok(());
                }
                // `+cmd|sub`: a subcommand; or, for a command without
                // subcommands, a first argument (Valkey splits at the last
                // `|`, so `+config|get|x` names a subcommand's first-arg).
                let (base, arg) = name.rsplit_once('|').ok_or(UNKNOWN)?;
                let i = t.lookup_fullname_original(base.as_bytes()).ok_or(UNKNOWN)?;
                if t.entries[i].parent.is_some() {
                    return Err(FIRSTARG_OF_SUB);
                }
                if arg.is_empty() {
                    return Err(SYNTAX);
                }
                if !t.entries[i].subs.is_empty() {
                    let sub = t.lookup_fullname_original(name.as_bytes()).ok_or(UNKNOWN)?;
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

    pub(super) fn describe_keys(&self) -> String {
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

    pub(super) fn describe_channels(&self, reset: bool) -> String {
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

    pub(super) fn describe_commands(&self) -> String {
        let mut s = String::from(if self.all_future { "+@all" } else { "-@all" });
        for r in &self.rules {
            s.push(' ');
            s.push_str(r);
        }
        s
    }

    /// As ACL LIST shows a selector.
    pub(super) fn describe(&self) -> String {
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
    pub(super) fn check(&self, t: &Table, entry: usize, argv: &[&[u8]]) -> Result<(), Denied> {
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
    pub(super) fn channel_allowed(&self, channel: &[u8], pattern: bool) -> bool {
        self.all_channels
            || self.channels.iter().any(|p| {
                if pattern {
                    p.as_slice() == channel
                } else {
                    crate::glob::matches(p, channel, false)
                }
            })
    }

    /// Valkey's `ACLSelectorHasUnrestrictedKeyAccess` for reads: all keys,
    /// or `*` readable.
    pub(super) fn reads_every_key(&self) -> bool {
        self.all_keys
            || self
                .keys
                .iter()
                .any(|(f, p)| f & KEY_READ != 0 && p.as_slice() == b"*")
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
    pub(super) fn rank(self) -> u8 {
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
