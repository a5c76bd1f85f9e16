//! MIGRATE: keys moved to another server as RESTORE commands (Valkey's
//! `migrateCommand`), through a connection [`crate::migrate`] keeps for the
//! next MIGRATE to the same target.
//!
//! One exchange: AUTH / AUTH2 when asked for, SELECT when the connection's
//! database is not the destination, then `RESTORE key ttl payload
//! [REPLACE]` per key (the TTL what is left of the key's, at least 1 ms),
//! all written at once; then one reply line per command. A key the target
//! accepted is deleted here (unless COPY), and what was deleted goes to
//! replicas and the AOF as one DEL. The first error the target sent is the
//! reply (`ERR Target instance replied with error: ...`); a socket error
//! is `IOERR`, after one retry on a new connection when it is not a
//! timeout and no key was answered yet.

use super::{NOT_INT, SYNTAX_ERR};
use crate::batch::ArgvRef;
use crate::cmd::strings::lookup_read;
use crate::command::flags::*;
use crate::command::{ArgSpec, CommandSpec, Ctx, KeySpec, key_flags as kf, notify};
use crate::migrate::timed_out;
use std::time::Duration;

const KEY_FLAGS: u16 = kf::RW | kf::ACCESS | kf::DELETE;

pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    key_specs: &[
        KeySpec::index(3, KEY_FLAGS),
        KeySpec::keyword("KEYS", -2, KEY_FLAGS | kf::INCOMPLETE).range(-1, 1, 0),
    ],
    tips: &["nondeterministic_output"],
    history: &[
        ("3.0.0", "Added the `COPY` and `REPLACE` options."),
        ("3.0.6", "Added the `KEYS` option."),
        ("4.0.7", "Added the `AUTH` option."),
        ("6.0.0", "Added the `AUTH2` option."),
    ],
    name: "migrate",
    arity: -6,
    flags: WRITE,
    first_key: 3,
    last_key: 3,
    key_step: 1,
    acl_categories: &["keyspace", "write", "slow", "dangerous"],
    group: "generic",
    since: "2.6.0",
    summary: "Atomically transfers a key from one instance to another.",
    complexity: "This command actually executes a DUMP+DEL in the source instance, and a RESTORE in the target instance. See the pages of these commands for time complexity. Also an O(N) data transfer between the two instances is performed.",
    func: Some(migrate),
    getkeys: Some(migrate_keys),
    args: &[
        ArgSpec::string("host"),
        ArgSpec::integer("port"),
        ArgSpec::oneof(
            "key-selector",
            &[
                ArgSpec::key("key", 0),
                ArgSpec::pure_token("empty-string", ""),
            ],
        ),
        ArgSpec::integer("destination-db"),
        ArgSpec::integer("timeout"),
        ArgSpec::pure_token("copy", "COPY")
            .since("3.0.0")
            .optional(),
        ArgSpec::pure_token("replace", "REPLACE")
            .since("3.0.0")
            .optional(),
        ArgSpec::oneof(
            "authentication",
            &[
                ArgSpec::string("auth")
                    .display("password")
                    .token("AUTH")
                    .since("4.0.7"),
                ArgSpec::block(
                    "auth2",
                    &[ArgSpec::string("username"), ArgSpec::string("password")],
                )
                .token("AUTH2")
                .since("6.0.0"),
            ],
        )
        .optional(),
        ArgSpec::key("keys", 1)
            .display("key")
            .token("KEYS")
            .since("3.0.6")
            .optional()
            .multiple(),
    ],
    ..CommandSpec::DEFAULT
}];

/// What MIGRATE was asked to do.
struct Request<'a> {
    host: &'a str,
    port: u16,
    db: i64,
    timeout: Duration,
    copy: bool,
    replace: bool,
    /// AUTH's arguments: `[password]` or `[username, password]`.
    auth: Vec<&'a [u8]>,
    /// Where the keys start in argv, and how many.
    first_key: usize,
    num_keys: usize,
}

/// Options after the timeout, each with how many arguments follow it.
const OPTIONS: &[(&[u8], usize)] = &[(b"copy", 0), (b"replace", 0), (b"auth", 1), (b"auth2", 2)];

/// COMMAND GETKEYS (Valkey's `migrateGetKeys`): argv[3], or what follows
/// KEYS, the other options' arguments skipped on the way.
fn migrate_keys(argv: &[&[u8]]) -> Option<Vec<(usize, u16)>> {
    let (mut first, mut num) = (3, 1);
    let mut i = 6;
    while i < argv.len() {
        if argv[i].eq_ignore_ascii_case(b"keys") {
            if !argv[3].is_empty() {
                return None;
            }
            first = i + 1;
            num = argv.len() - first;
            break;
        }
        if let Some((_, skip)) = OPTIONS
            .iter()
            .find(|(o, _)| argv[i].eq_ignore_ascii_case(o))
        {
            i += skip;
        }
        i += 1;
    }
    Some((first..first + num).map(|k| (k, KEY_FLAGS)).collect())
}

/// MIGRATE's arguments with Valkey's errors, in Valkey's order (options,
/// then the timeout, then the database).
fn parse<'a>(argv: &ArgvRef<'a>) -> Result<Request<'a>, &'static str> {
    let mut r = Request {
        host: std::str::from_utf8(argv.get(1)).unwrap_or(""),
        port: 0,
        db: 0,
        timeout: Duration::ZERO,
        copy: false,
        replace: false,
        auth: Vec::new(),
        first_key: 3,
        num_keys: 1,
    };
    let mut j = 6;
    while j < argv.len() {
        let a = argv.get(j);
        let left = argv.len() - j - 1;
        if a.eq_ignore_ascii_case(b"copy") {
            r.copy = true;
        } else if a.eq_ignore_ascii_case(b"replace") {
            r.replace = true;
        } else if a.eq_ignore_ascii_case(b"auth") {
            if left == 0 {
                return Err(SYNTAX_ERR);
            }
            r.auth = vec![argv.get(j + 1)];
            j += 1;
        } else if a.eq_ignore_ascii_case(b"auth2") {
            if left < 2 {
                return Err(SYNTAX_ERR);
            }
            r.auth = vec![argv.get(j + 1), argv.get(j + 2)];
            j += 2;
        } else if a.eq_ignore_ascii_case(b"keys") {
            if !argv.get(3).is_empty() {
                return Err(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                );
            }
            r.first_key = j + 1;
            r.num_keys = left;
            break;
        } else {
            return Err(SYNTAX_ERR);
        }
        j += 1;
    }
    let timeout = crate::num::parse_i64(argv.get(5)).ok_or(NOT_INT)?;
    r.db = crate::num::parse_i64(argv.get(4)).ok_or(NOT_INT)?;
    r.timeout = Duration::from_millis(if timeout <= 0 { 1000 } else { timeout as u64 });
    // Valkey reads the port with atoi: a bad one fails to connect.
    r.port = std::str::from_utf8(argv.get(2))
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    Ok(r)
}

/// A key to send: its name, what is left of its TTL (0: none) and its
/// DUMP payload.
struct Outgoing<'a> {
    key: &'a [u8],
    ttl_ms: i64,
    payload: Vec<u8>,
}

fn migrate(ctx: &mut Ctx<'_>, argv: ArgvRef<'_>) {
    let req = match parse(&argv) {
        Ok(r) => r,
        Err(e) => return ctx.error(e),
    };
    let db = ctx.session.db;
    let now = ctx.now_ms;
    let compress = ctx.srv.config.rdbcompression;
    let mut keys = Vec::with_capacity(req.num_keys);
    for k in req.first_key..req.first_key + req.num_keys {
        let key = argv.get(k);
        let h = ctx.key_hash(key);
        if let Some(e) = lookup_read(ctx.srv, db, h, key, now) {
            let ttl_ms = e.expire_at_ms().map_or(0, |at| (at - now).max(1));
            let payload = rdb::payload::dump_with(e.value(), compress);
            keys.push(Outgoing {
                key,
                ttl_ms,
                payload,
            });
        }
    }
    // Nothing moved, nothing for replicas (a DEL goes instead if any is).
    ctx.prevent_propagation();
    if keys.is_empty() {
        return ctx.reply.simple("NOKEY");
    }
    let mut retried = false;
    loop {
        match exchange(ctx, &req, &keys) {
            Ok(()) => return,
            Err(Failure::Connect) => {
                return ctx.error("IOERR error or timeout connecting to the client");
            }
            Err(Failure::Io { writing, retry }) => {
                close_link(ctx, &req);
                if retry && !retried {
                    retried = true;
                    continue;
                }
                let what = if writing { "writing" } else { "reading" };
                return ctx.error(&format!("IOERR error or timeout {what} to target instance"));
            }
        }
    }
}

enum Failure {
    Connect,
    /// `retry`: nothing was answered and it was not a timeout.
    Io {
        writing: bool,
        retry: bool,
    },
}

/// One attempt: connect, send, read, delete what the target took, reply
/// unless the socket failed.
fn exchange(ctx: &mut Ctx<'_>, req: &Request<'_>, keys: &[Outgoing<'_>]) -> Result<(), Failure> {
    let Some(migrator) = ctx.srv.migrator.as_mut() else {
        return Err(Failure::Connect);
    };
    let link = match migrator.connect(req.host, req.port, req.timeout) {
        Ok(link) => link,
        // Valkey's connect only waits for the socket to be writable: a
        // refused connection fails at the first write.
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            return Err(io_failure(true, &e));
        }
        Err(_) => return Err(Failure::Connect),
    };
    let select = link.db() != Some(req.db);
    let mut out = Vec::new();
    if !req.auth.is_empty() {
        let mut cmd: Vec<&[u8]> = vec![b"AUTH"];
        cmd.extend(&req.auth);
        resp::encode_command(&cmd, &mut out);
    }
    if select {
        resp::encode_command(&[b"SELECT", req.db.to_string().as_bytes()], &mut out);
    }
    for k in keys {
        let ttl = k.ttl_ms.to_string();
        let mut cmd: Vec<&[u8]> = vec![b"RESTORE", k.key, ttl.as_bytes(), &k.payload];
        if req.replace {
            cmd.push(b"REPLACE");
        }
        resp::encode_command(&cmd, &mut out);
    }
    link.send(&out, req.timeout)
        .map_err(|e| io_failure(true, &e))?;
    let auth_reply = match req.auth.is_empty() {
        true => None,
        false => Some(
            link.read_line(req.timeout)
                .map_err(|e| io_failure(false, &e))?,
        ),
    };
    let select_reply = match select {
        true => Some(
            link.read_line(req.timeout)
                .map_err(|e| io_failure(false, &e))?,
        ),
        false => None,
    };
    let refused = [&auth_reply, &select_reply]
        .into_iter()
        .flatten()
        .find(|l| l.starts_with(b"-"))
        .cloned();
    let mut moved: Vec<&[u8]> = vec![b"DEL"];
    let mut error: Option<Vec<u8>> = None;
    let mut socket_error = None;
    for (i, k) in keys.iter().enumerate() {
        let line = match link.read_line(req.timeout) {
            Ok(l) => l,
            Err(e) => {
                socket_error = Some(Failure::Io {
                    writing: false,
                    retry: i == 0 && !timed_out(&e),
                });
                break;
            }
        };
        match refused.as_ref().or(line.starts_with(b"-").then_some(&line)) {
            Some(e) => {
                // The connection's database is unknown after an error.
                link.set_db(None);
                error.get_or_insert_with(|| e[1..].to_vec());
            }
            None if !req.copy => moved.push(k.key),
            None => {}
        }
    }
    if error.is_none() && socket_error.is_none() {
        link.set_db(Some(req.db));
    }
    if let Some(Failure::Io { retry: true, .. }) = &socket_error
        && error.is_none()
    {
        return Err(socket_error.unwrap_or(Failure::Connect));
    }
    delete_moved(ctx, &moved[1..]);
    if moved.len() > 1 {
        ctx.propagate(&moved);
    }
    match (error, socket_error) {
        (Some(e), socket_error) => {
            if socket_error.is_some() {
                close_link(ctx, req);
            }
            ctx.error(&format!(
                "ERR Target instance replied with error: {}",
                String::from_utf8_lossy(&e)
            ));
        }
        (None, Some(f)) => return Err(f),
        (None, None) => ctx.reply.ok(),
    }
    Ok(())
}

/// A failed write or read before any key was answered: worth one retry
/// unless it timed out.
fn io_failure(writing: bool, e: &std::io::Error) -> Failure {
    Failure::Io {
        writing,
        retry: !timed_out(e),
    }
}

fn close_link(ctx: &mut Ctx<'_>, req: &Request<'_>) {
    if let Some(m) = ctx.srv.migrator.as_mut() {
        m.close(req.host, req.port);
    }
}

/// The keys the target took leave this server.
fn delete_moved(ctx: &mut Ctx<'_>, keys: &[&[u8]]) {
    let db = ctx.session.db;
    for &key in keys {
        let h = ctx.key_hash(key);
        if ctx.db().delete(h, key) {
            ctx.touched(db, key);
            ctx.notify(notify::GENERIC, "del", key);
        }
    }
}
