//! The execution half of a client (see docs/ARCHITECTURE.md): everything
//! about a client that commands read or change. The connection half (socket,
//! buffers) lives in the IO layer; the two share only the [`ClientId`].

use crate::ClientId;
use resp::Protocol;
use std::net::SocketAddr;

/// What happens to the replies of the next commands (CLIENT REPLY).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ReplyMode {
    #[default]
    On,
    Off,
    /// Drop the reply of the command after CLIENT REPLY SKIP.
    Skip,
    /// The command being run now is the skipped one.
    SkipThis,
}

pub struct Session {
    pub id: ClientId,
    /// Selected database index.
    pub db: usize,
    pub proto: Protocol,
    /// CLIENT SETNAME; `None` when unset (an empty name unsets it).
    pub name: Option<Vec<u8>>,
    /// False only while the `default` user needs a password and AUTH has
    /// not succeeded.
    pub authenticated: bool,
    /// Who the client is (AUTH, HELLO AUTH): its permissions.
    pub user: crate::acl::UserId,
    /// ... and its name (CLIENT LIST `user=`; users are never renamed).
    pub user_name: std::borrow::Cow<'static, str>,
    pub lib_name: Option<Vec<u8>>,
    pub lib_ver: Option<Vec<u8>>,
    pub peer: Option<SocketAddr>,
    pub local: Option<SocketAddr>,
    /// Connected through the unix socket at this path (then `peer` and
    /// `local` are `None`).
    pub unix_socket: Option<std::sync::Arc<str>>,
    pub fd: i32,
    /// Unix ms when the client connected (CLIENT LIST `age`).
    pub created_ms: i64,
    /// Unix ms of the last command (CLIENT LIST `idle`, `timeout`).
    pub last_interaction_ms: i64,
    /// Command-table index of the last command run (CLIENT LIST `cmd`).
    pub last_cmd: Option<usize>,
    /// CLIENT CAPA REDIRECT: on a replica, send reads and writes to the
    /// primary (`-REDIRECT host:port`) instead of serving or refusing them.
    pub capa_redirect: bool,
    /// CLIENT IMPORT-SOURCE ON: in import mode, keys past their time are
    /// live to this client (`expiry_mode`).
    pub import_source: bool,
    /// READONLY: with CAPA REDIRECT, reads are still served here.
    pub readonly: bool,
    /// MULTI or WATCH was used once: CLIENT LIST shows `multi=0` rather
    /// than -1 outside a transaction from then on (Valkey 8.1 allocates
    /// the transaction state then and keeps it).
    pub multi_state: bool,
    /// CLIENT TRACKING on.
    pub tracking: Option<Box<crate::tracking::ClientTracking>>,
    /// Holding a command until CLIENT PAUSE ends (CLIENT LIST flag `b`).
    pub paused: bool,
    /// MONITOR mode (CLIENT LIST flag `O`).
    pub monitor: bool,
    pub no_evict: bool,
    pub no_touch: bool,
    pub reply_mode: ReplyMode,
    /// The reply being written is pub/sub's confirmations: CLIENT REPLY
    /// OFF and SKIP leave it (Valkey's `CLIENT_PUSHING`).
    pub reply_is_push: bool,
    /// Close once the current reply is sent (QUIT, CLIENT KILL of self).
    pub close_after_reply: bool,
    /// Killed by another client or timed out: run nothing more.
    pub close_asap: bool,
    /// CLIENT LIST `tot-cmds`, `tot-net-out`, `tot-net-in`.
    pub commands_processed: u64,
    pub net_output_bytes: u64,
    pub net_input_bytes: u64,
    /// Output produced outside this client's own batch (pub/sub messages,
    /// the reply that unblocks it), waiting for [`crate::Engine::drain_output`].
    pub pending: Vec<u8>,
    /// Listed in the server's outbox.
    pub pending_queued: bool,
    /// Set by [`crate::command::Ctx::block`] while a command runs.
    pub block_request: Option<crate::blocking::BlockRequest>,
    /// Blocked on keys (BLPOP ...): runs nothing until unblocked.
    pub blocked: Option<Box<crate::blocking::Blocked>>,
    /// EXEC is running this client's queued commands: nothing may block.
    pub in_exec: bool,
    /// Inside MULTI: the queued commands (`None` outside a transaction).
    pub multi: Option<Box<crate::cmd::transactions::Multi>>,
    /// Pub/Sub subscriptions; `None` while there are none.
    pub subs: Option<Box<crate::pubsub::ClientSubs>>,
    /// Bytes the IO layer holds for this client: output not sent yet
    /// (CLIENT LIST `omem`) and input not parsed yet (`qbuf`).
    pub meter: crate::output::ClientMeter,
    /// What a replica said in its handshake (REPLCONF listening-port,
    /// capa eof / psync2), for the PSYNC that follows.
    pub replica_hello: Option<Box<crate::replication::ReplicaHello>>,
    /// The effects stream's offset after this client's last write (what
    /// WAIT waits for).
    pub woff: u64,
}

impl Session {
    /// What any client takes, roughly: its session and a read buffer's
    /// worth ([`Session::memory`] adds its name and waiting output).
    pub const BASE_MEMORY: u64 = (std::mem::size_of::<Session>() + 1024) as u64;

    /// Output waiting for this client: what the IO layer has not sent yet
    /// (its meter) and what is still queued here for it (pub/sub messages
    /// of this batch). In threaded mode output in transit between the
    /// threads is not counted. CLIENT LIST shows it as `obl`/`oll`/`omem`
    /// ([`crate::output::OutputShape`]).
    pub fn output_bytes(&self) -> u64 {
        self.meter.output() + self.pending.len() as u64
    }

    /// [`Session::output_bytes`] as Valkey would hold it: CLIENT LIST
    /// `obl`, `oll`, `omem`.
    pub fn output_shape(&self) -> crate::output::OutputShape {
        crate::output::OutputShape::of(self.output_bytes())
    }

    /// What this client takes in memory, roughly: the session, a read
    /// buffer's worth, its name and its waiting output. CLIENT LIST
    /// `tot-mem`, and INFO `mem_clients_normal` summed.
    pub fn memory(&self) -> u64 {
        self.memory_with_output(self.output_bytes())
    }

    /// [`Session::memory`] with the waiting output already read (the meter
    /// moves under a reader: one CLIENT LIST line reads it once).
    pub fn memory_with_output(&self, output: u64) -> u64 {
        Session::BASE_MEMORY + self.name.as_ref().map_or(0, Vec::len) as u64 + output
    }

    /// A fresh session: db 0, RESP2, no name. Stable API for tests.
    pub fn new(id: ClientId) -> Session {
        Session {
            id,
            db: 0,
            proto: Protocol::Resp2,
            name: None,
            authenticated: true,
            user: crate::acl::DEFAULT_USER,
            user_name: std::borrow::Cow::Borrowed("default"),
            lib_name: None,
            lib_ver: None,
            peer: None,
            local: None,
            unix_socket: None,
            fd: -1,
            created_ms: 0,
            last_interaction_ms: 0,
            last_cmd: None,
            monitor: false,
            paused: false,
            tracking: None,
            capa_redirect: false,
            import_source: false,
            readonly: false,
            multi_state: false,
            no_evict: false,
            no_touch: false,
            reply_mode: ReplyMode::On,
            reply_is_push: false,
            close_after_reply: false,
            close_asap: false,
            commands_processed: 0,
            net_output_bytes: 0,
            net_input_bytes: 0,
            pending: Vec::new(),
            pending_queued: false,
            block_request: None,
            blocked: None,
            in_exec: false,
            multi: None,
            subs: None,
            replica_hello: None,
            woff: 0,
            meter: Default::default(),
        }
    }

    /// Valkey's `getClientType`: a client with a subscription is held to
    /// the `pubsub` output buffer limit (in RESP3 too).
    pub fn output_class(&self) -> crate::output::OutputClass {
        if self.subs.is_some() {
            crate::output::OutputClass::Pubsub
        } else {
            crate::output::OutputClass::Normal
        }
    }

    /// RESET: back to a just-connected state, keeping the library info
    /// (as Valkey's `clearClientConnectionState` does). Transaction, watches
    /// and subscriptions need the server: RESET clears them first.
    pub fn reset(&mut self, auth_required: bool) {
        self.db = 0;
        self.proto = Protocol::Resp2;
        self.name = None;
        self.authenticated = !auth_required;
        // Logged out: back to `default` (Valkey's clientSetDefaultAuth).
        if self.user != crate::acl::SUPERUSER {
            self.user = crate::acl::DEFAULT_USER;
            self.user_name = std::borrow::Cow::Borrowed("default");
        }
        self.monitor = false;
        self.readonly = false;
        self.no_evict = false;
        self.no_touch = false;
        self.reply_mode = ReplyMode::On;
    }

    /// `addr=` of CLIENT LIST: `ip:port`, `[v6]:port`, or a unix
    /// socket's `path:0`.
    pub fn addr_string(&self) -> String {
        Self::shown_addr(self.peer, self.unix_socket.as_deref())
    }
    /// RESP2 with a subscription: only (P|S)(UN)SUBSCRIBE, PING, QUIT and
    /// RESET may run.
    pub fn in_resp2_pubsub(&self) -> bool {
        self.subs.is_some() && self.proto == Protocol::Resp2
    }
    pub fn laddr_string(&self) -> String {
        Self::shown_addr(self.local, self.unix_socket.as_deref())
    }

    fn shown_addr(tcp: Option<SocketAddr>, unix: Option<&str>) -> String {
        match (tcp, unix) {
            (Some(a), _) => a.to_string(),
            (None, Some(path)) => format!("{path}:0"),
            (None, None) => "?:0".to_string(),
        }
    }
}
