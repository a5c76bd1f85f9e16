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
mod selector;
pub mod sha256;
mod user;

use crate::server::Server;
use crate::session::Session;
use crate::table::table;
use std::collections::HashMap;
use std::sync::Arc;

pub use log::AclLog;
pub use selector::Denied;
pub use user::{SelectorFields, User, merge_selector_args};

/// A user's place in [`Acl`]; stays valid (pointing at nothing) once the
/// user is deleted.
pub type UserId = u32;
/// `default`: every new connection starts as it.
pub const DEFAULT_USER: UserId = 0;
/// Internal clients (the primary's link, the AOF loader): never checked.
pub const SUPERUSER: UserId = u32::MAX;
/// `default` at start-up (and after an ACL LOAD whose file leaves it out).
const DEFAULT_RULES: &[&str] = &["on", "nopass", "~*", "&*", "+@all"];

/// A refused ACL SETUSER or `user` line: the rule and why (the rule is
/// empty when the selectors' parentheses do not match up).
pub type RuleError = (String, std::borrow::Cow<'static, str>);

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
        let default = User::build(
            User::new("default", table().entries.len(), false),
            DEFAULT_RULES,
        )
        .expect("the default user's rules");
        let mut acl = Acl {
            users: vec![Some(default)],
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
        std::iter::once(&u.root)
            .chain(&u.selectors)
            .any(|s| s.check(t, entry, argv).is_ok() && s.reads_every_key())
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
    pub fn set_user<S: AsRef<str>>(&mut self, name: &str, rules: &[S]) -> Result<(), RuleError> {
        let base = match self.by_name.get(name).and_then(|&id| self.user(id)) {
            Some(u) => u.clone(),
            None => self.new_user(name),
        };
        self.put(User::build(base, rules)?);
        Ok(())
    }

    /// A declared user (`[name, rules...]`, from a config file's `user`
    /// line or the ACL file), already checked: it starts over from a new
    /// user, `default` too, as Valkey's loader does.
    pub fn declare(&mut self, user: &[String]) {
        if let Ok(u) = User::build(self.new_user(&user[0]), &user[1..]) {
            self.put(u);
        }
    }

    /// ACL LOAD: exactly the declared users (`default` as at start-up if
    /// the file leaves it out). A user kept keeps its id, so connected
    /// clients stay its own; the ids of the users gone are returned.
    pub fn redeclare(&mut self, users: &[Vec<String>]) -> Vec<UserId> {
        let gone: Vec<String> = self
            .by_name
            .keys()
            .filter(|n| *n != "default" && !users.iter().any(|u| &u[0] == *n))
            .cloned()
            .collect();
        let gone = gone.iter().filter_map(|n| self.delete_user(n)).collect();
        if !users.iter().any(|u| u[0] == "default") {
            let fresh = Acl::new();
            self.users[DEFAULT_USER as usize] = fresh.users.into_iter().next().flatten();
        }
        for u in users {
            self.declare(u);
        }
        self.refresh_credentials();
        gone
    }

    /// Whether a declared user's rules (a `user` line) apply to a new
    /// user: the check made while a config or ACL file is read.
    pub fn validate<S: AsRef<str>>(
        name: &str,
        rules: &[S],
        pubsub_all: bool,
    ) -> Result<(), RuleError> {
        User::build(User::new(name, table().entries.len(), pubsub_all), rules).map(drop)
    }

    /// A user as ACL SETUSER creates it.
    fn new_user(&self, name: &str) -> User {
        User::new(name, table().entries.len(), self.pubsub_default_all)
    }

    /// `u` in place of its namesake (its id kept), or as a new user.
    fn put(&mut self, u: User) {
        match self.by_name.get(&u.name) {
            Some(&id) => self.users[id as usize] = Some(u),
            None => {
                let id = self.users.len() as UserId;
                self.by_name.insert(u.name.clone(), id);
                self.users.push(Some(u));
            }
        }
        self.refresh_credentials();
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
        client_info: crate::cmd::client::client_line(sess, srv.watches.state(sess.id), now_ms),
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
