//! MONITOR: every command the server runs, as one status line per command
//! to each monitoring client, in execution order — which in threaded mode
//! is the execution thread's order across every IO thread.
//!
//! ```text
//!   +1795669265.079544 [0 127.0.0.1:48028] "set" "b" "x\n\"y"
//!    unix time, µs    db  client (`lua` for a script's calls)
//! ```
//!
//! As in Valkey a command is shown once it ran (so a SELECT shows its new
//! db), except the script commands (EVAL*, FCALL*), shown before their
//! own calls; commands refused before running (unknown, arity, OOM,
//! queued in MULTI) and `admin` commands are not shown; a blocked command
//! is shown when it blocks, not again when served. Arguments are quoted
//! as `sdscatrepr` does, secrets redacted ([`crate::redact`]).

use crate::ClientId;
use crate::batch::ArgvRef;
use crate::command::Ctx;
use crate::pubsub::Me;
use crate::server::Server;

/// Who ran the command, for the bracket.
#[derive(Clone, Copy)]
pub enum Origin<'a> {
    Client(&'a crate::session::Session),
    Script,
}

/// Send the command to every monitor. `me` is the client running it (out
/// of the client map while it runs): a monitor sees its own commands too,
/// after their replies.
pub fn feed(
    srv: &mut Server,
    me: Option<Me<'_, '_>>,
    origin: Origin<'_>,
    db: usize,
    fullname: &str,
    argv: ArgvRef<'_>,
) {
    if srv.monitors.is_empty() {
        return;
    }
    let line = format_line(srv.now_us(), origin, db, fullname, argv);
    let mut me = me;
    // By index: writing to a monitor borrows the server, and a copy of
    // the list per command would be an allocation per command.
    for i in 0..srv.monitors.len() {
        let id = srv.monitors[i];
        match me.as_mut() {
            Some(m) if m.id == id => m.reply.simple(&line),
            _ => {
                srv.write_to(id, |w| w.simple(&line));
            }
        }
    }
}

fn format_line(
    now_us: i64,
    origin: Origin<'_>,
    db: usize,
    fullname: &str,
    argv: ArgvRef<'_>,
) -> String {
    let mut line = format!(
        "{}.{:06} [{db} ",
        now_us.div_euclid(1_000_000),
        now_us.rem_euclid(1_000_000)
    );
    match origin {
        Origin::Client(s) => match &s.unix_socket {
            Some(path) => {
                line.push_str("unix:");
                line.push_str(path);
            }
            None => line.push_str(&s.addr_string()),
        },
        Origin::Script => line.push_str("lua"),
    }
    line.push(']');
    for j in 0..argv.len() {
        line.push(' ');
        crate::config::repr_into(crate::redact::shown(fullname, argv, j), &mut line);
    }
    line
}

/// MONITOR: the client becomes a monitor. A client already a monitor (or
/// a replica) gets no reply at all, as in Valkey.
pub fn start(srv: &mut Server, id: ClientId) -> bool {
    if srv.monitors.contains(&id) {
        return false;
    }
    srv.monitors.push(id);
    true
}

/// The client left monitor mode (RESET) or disconnected.
pub fn stop(srv: &mut Server, id: ClientId) {
    srv.monitors.retain(|&m| m != id);
}

impl Ctx<'_> {
    /// EVAL and FCALL show themselves before the calls they make, even
    /// when they then fail (Valkey feeds them from the command itself).
    pub fn monitor_script_command(&mut self, argv: ArgvRef<'_>) {
        if self.srv.monitors.is_empty() {
            return;
        }
        let me = Me {
            id: self.session.id,
            reply: &mut self.reply,
        };
        let db = self.session.db;
        feed(
            self.srv,
            Some(me),
            Origin::Client(self.session),
            db,
            "eval",
            argv,
        );
    }
}
