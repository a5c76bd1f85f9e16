//! The command table: every group's `COMMANDS` concatenated, with a
//! case-insensitive lookup that does not allocate (the name is folded into a
//! stack buffer and hashed with FNV-1a).
//!
//! Each command and each subcommand gets a stable index; INFO commandstats
//! and CLIENT LIST `cmd=` use it.
//!
//! `rename-command` changes the names clients, scripts and COMMAND use
//! ([`Table::lookup`]): [`Renames`], installed once for the process before
//! it serves anyone, lays the renamed and removed names over the index.
//! An entry keeps its `fullname` (replies, COMMAND LIST and ACL rules
//! name it so, as Valkey's do: [`Table::lookup_original`]).

use crate::cmd;
use crate::command::CommandSpec;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

/// Longest command name we look up; longer names are unknown commands.
const MAX_NAME: usize = 48;

#[derive(Default)]
pub struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf29ce484222325
        } else {
            self.0
        };
        for &b in bytes {
            h ^= b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
        self.0 = h;
    }
}

pub type FnvBuild = BuildHasherDefault<Fnv>;

pub struct Entry {
    pub spec: &'static CommandSpec,
    /// `get`, or `config|get` for a subcommand (Valkey's fullname).
    pub fullname: String,
    pub parent: Option<usize>,
    /// Indices of the subcommands' entries.
    pub subs: Vec<usize>,
    /// Running it may run a Lua script (see `CommandHint::may_run_script`).
    pub may_run_script: bool,
    /// Its keys are not all at fixed places (COMMAND INFO `movablekeys`):
    /// finding them takes the key specs, not first/last/step.
    pub movable_keys: bool,
}

impl Entry {
    /// `argc` arguments (the name included) fit its arity: exactly that
    /// many when positive, at least `-arity` when negative.
    #[inline]
    pub fn accepts_argc(&self, argc: usize) -> bool {
        let (arity, argc) = (self.spec.arity, argc as i32);
        if arity > 0 {
            argc == arity
        } else {
            argc >= -arity
        }
    }
}

/// `name` folded to lower case in `buf`; `None` if it is longer than any
/// command name.
#[inline]
fn lower_case<'b>(name: &[u8], buf: &'b mut [u8; MAX_NAME]) -> Option<&'b [u8]> {
    let lower = buf.get_mut(..name.len())?;
    for (d, s) in lower.iter_mut().zip(name) {
        *d = s.to_ascii_lowercase();
    }
    Some(lower)
}

/// Commands that may run a Lua script: EVAL and FCALL and their
/// variants, and EXEC, whose transaction may hold them.
fn may_run_script(name: &str) -> bool {
    matches!(
        name,
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" | "exec"
    )
}

pub struct Table {
    pub entries: Vec<Entry>,
    /// Top-level commands in registration order.
    pub top: Vec<usize>,
    index: HashMap<&'static [u8], usize, FnvBuild>,
}

/// Every command group, in the order COMMAND lists them.
fn groups() -> [&'static [CommandSpec]; 28] {
    [
        cmd::strings::COMMANDS,
        cmd::lcs::COMMANDS,
        cmd::keys::COMMANDS,
        cmd::sort::COMMANDS,
        cmd::dump::COMMANDS,
        cmd::migrate::COMMANDS,
        cmd::lists::COMMANDS,
        cmd::hashes::COMMANDS,
        cmd::sets::COMMANDS,
        cmd::zsets::COMMANDS,
        cmd::geo::COMMANDS,
        cmd::streams::COMMANDS,
        cmd::bitmaps::COMMANDS,
        cmd::hyperloglog::COMMANDS,
        cmd::pubsub::COMMANDS,
        cmd::transactions::COMMANDS,
        cmd::scripting::COMMANDS,
        cmd::functions::COMMANDS,
        cmd::connection::COMMANDS,
        cmd::client::COMMANDS,
        cmd::server::COMMANDS,
        cmd::commandlog::COMMANDS,
        cmd::standalone::COMMANDS,
        cmd::replication::COMMANDS,
        cmd::persistence::COMMANDS,
        cmd::memory::COMMANDS,
        cmd::introspection::COMMANDS,
        cmd::acl::COMMANDS,
    ]
}

static TABLE: OnceLock<Table> = OnceLock::new();
static RENAMES: OnceLock<Renames> = OnceLock::new();

/// The names `rename-command` changed, over the table's own.
#[derive(Clone, Debug, Default)]
pub struct Renames {
    /// Lower-case names whose meaning changed: the entry they run now, or
    /// `None`: no command.
    names: HashMap<Vec<u8>, Option<usize>, FnvBuild>,
}

impl Renames {
    /// The command the lower-case `name` runs after the renames so far.
    fn resolve(&self, t: &Table, lower: &[u8]) -> Option<usize> {
        match self.names.get(lower) {
            Some(&now) => now,
            None => t.index.get(lower).copied(),
        }
    }

    /// `rename-command from to` (`to` empty: the command goes), with
    /// Valkey's errors.
    pub fn rename(&mut self, from: &str, to: &str) -> Result<(), &'static str> {
        let t = table();
        let from_lower = from.to_ascii_lowercase().into_bytes();
        let Some(idx) = self.resolve(t, &from_lower) else {
            return Err("No such command in rename-command");
        };
        self.names.insert(from_lower, None);
        if to.is_empty() {
            return Ok(());
        }
        let to_lower = to.to_ascii_lowercase().into_bytes();
        if self.resolve(t, &to_lower).is_some() {
            return Err("Target command name already exists");
        }
        self.names.insert(to_lower, Some(idx));
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Some name still runs the top-level entry `idx`.
    fn reaches(&self, idx: usize) -> bool {
        let t = table();
        let own = t.entries[idx].spec.name.as_bytes();
        !self.names.contains_key(own) || self.names.values().any(|&v| v == Some(idx))
    }
}

/// Make `renames` the names every lookup of this process sees from now on.
/// Once per process: a second, different set is refused (false).
pub fn install_renames(renames: Renames) -> bool {
    let same = |r: &Renames| r.names == renames.names;
    match RENAMES.get() {
        Some(r) => same(r),
        None => {
            let _ = RENAMES.set(renames.clone());
            RENAMES.get().is_some_and(same)
        }
    }
}

/// The process-wide command table (built on first use).
pub fn table() -> &'static Table {
    TABLE.get_or_init(Table::build)
}

impl Table {
    fn build() -> Table {
        let mut t = Table {
            entries: Vec::new(),
            top: Vec::new(),
            index: HashMap::default(),
        };
        for group in groups() {
            for spec in group {
                debug_assert!(spec.name.len() <= MAX_NAME);
                debug_assert_eq!(spec.name, spec.name.to_ascii_lowercase());
                if t.index.contains_key(spec.name.as_bytes()) {
                    // Two groups defining one command is a bug; keep the first.
                    debug_assert!(false, "duplicate command {}", spec.name);
                    continue;
                }
                let idx = t.entries.len();
                t.entries.push(Entry {
                    spec,
                    fullname: spec.name.to_string(),
                    parent: None,
                    subs: Vec::new(),
                    may_run_script: may_run_script(spec.name),
                    movable_keys: crate::getkeys::legacy_range(spec.key_specs).3,
                });
                t.top.push(idx);
                t.index.insert(spec.name.as_bytes(), idx);
                for sub in spec.subcommands {
                    let sidx = t.entries.len();
                    t.entries.push(Entry {
                        spec: sub,
                        fullname: format!("{}|{}", spec.name, sub.name),
                        parent: Some(idx),
                        subs: Vec::new(),
                        may_run_script: false,
                        movable_keys: crate::getkeys::legacy_range(sub.key_specs).3,
                    });
                    t.entries[idx].subs.push(sidx);
                }
            }
        }
        t
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A top-level command by the name clients call it (`rename-command`
    /// applied), any case.
    #[inline]
    pub fn lookup(&self, name: &[u8]) -> Option<usize> {
        let mut buf = [0u8; MAX_NAME];
        let Some(lower) = lower_case(name, &mut buf) else {
            // Longer than any command's own name: only a rename can be.
            let r = RENAMES.get()?;
            return r.names.get(&name.to_ascii_lowercase()).copied().flatten();
        };
        match RENAMES.get() {
            None => self.index.get(lower).copied(),
            Some(r) => r.resolve(self, lower),
        }
    }

    /// A top-level command by its own name, any case, whatever
    /// `rename-command` did (ACL rules, the server's own uses).
    #[inline]
    pub fn lookup_original(&self, name: &[u8]) -> Option<usize> {
        let mut buf = [0u8; MAX_NAME];
        self.index.get(lower_case(name, &mut buf)?).copied()
    }

    /// The top-level commands some name still runs (all but those
    /// `rename-command` removed), in registration order: COMMAND COUNT,
    /// LIST, INFO and DOCS without arguments.
    pub fn listed(&self) -> impl Iterator<Item = usize> + '_ {
        let renames = RENAMES.get();
        self.top
            .iter()
            .copied()
            .filter(move |&i| renames.is_none_or(|r| r.reaches(i)))
    }

    /// A subcommand of the command at `parent`, any case.
    pub fn lookup_sub(&self, parent: usize, name: &[u8]) -> Option<usize> {
        self.entries[parent].subs.iter().copied().find(|&i| {
            self.entries[i]
                .spec
                .name
                .as_bytes()
                .eq_ignore_ascii_case(name)
        })
    }

    /// The entry a command line runs: its command, or for a container
    /// the subcommand its second argument names; `None` if either is
    /// unknown.
    pub fn lookup_command(&self, argv: &[&[u8]]) -> Option<usize> {
        let i = self.lookup(argv.first()?)?;
        if self.entries[i].subs.is_empty() || argv.len() < 2 {
            return Some(i);
        }
        self.lookup_sub(i, argv[1])
    }

    /// `get` or `config|get`, any case, by the names clients call them
    /// (COMMAND INFO/DOCS arguments).
    pub fn lookup_fullname(&self, name: &[u8]) -> Option<usize> {
        self.fullname_via(name, Table::lookup)
    }

    /// [`Table::lookup_fullname`] by the commands' own names (ACL rules).
    pub fn lookup_fullname_original(&self, name: &[u8]) -> Option<usize> {
        self.fullname_via(name, Table::lookup_original)
    }

    fn fullname_via(&self, name: &[u8], top: fn(&Table, &[u8]) -> Option<usize>) -> Option<usize> {
        match name.iter().position(|&b| b == b'|') {
            None => top(self, name),
            Some(p) => {
                let parent = top(self, &name[..p])?;
                self.lookup_sub(parent, &name[p + 1..])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_is_case_insensitive_and_knows_subcommands() {
        let t = table();
        let ping = t.lookup(b"PiNg").expect("ping");
        assert_eq!(t.entries[ping].fullname, "ping");
        assert!(t.lookup(b"nosuchcommand").is_none());
        assert!(t.lookup(&[b'a'; 100]).is_none());
        let cfg = t.lookup(b"CONFIG").unwrap();
        let get = t.lookup_sub(cfg, b"Get").unwrap();
        assert_eq!(t.entries[get].fullname, "config|get");
        assert_eq!(t.lookup_fullname(b"CONFIG|GET"), Some(get));
    }

    #[test]
    fn renames_chain_and_free_names_as_valkeys_do() {
        let t = table();
        let (set, get) = (
            t.lookup_original(b"set").unwrap(),
            t.lookup_original(b"get").unwrap(),
        );
        let mut r = Renames::default();
        r.rename("SET", "foo").unwrap();
        r.rename("foo", "Bar").unwrap();
        assert_eq!(r.resolve(t, b"bar"), Some(set));
        assert_eq!(r.resolve(t, b"foo"), None);
        assert_eq!(r.resolve(t, b"set"), None);
        // A name given up is free for another command.
        r.rename("get", "set").unwrap();
        assert_eq!(r.resolve(t, b"set"), Some(get));
        assert_eq!(
            r.rename("get", "x"),
            Err("No such command in rename-command")
        );
        assert_eq!(
            r.rename("bar", "set"),
            Err("Target command name already exists")
        );
        assert_eq!(
            r.rename("config|get", "x"),
            Err("No such command in rename-command")
        );
        r.rename("ping", "").unwrap();
        assert!(!r.reaches(t.lookup_original(b"ping").unwrap()));
        assert!(r.reaches(get) && r.reaches(t.lookup_original(b"echo").unwrap()));
    }
}
