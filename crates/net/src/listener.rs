//! Listening sockets from the `bind` / `port` / `tcp-backlog` and
//! `unixsocket` / `unixsocketperm` / `unixsocketgroup` directives, and the
//! small socket helpers both event loops use (addresses, options,
//! best-effort writes, close).

use engine::log;
use engine::{ClientAddr, Config};
use std::io;
use std::mem::{size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, ToSocketAddrs};
use std::os::fd::RawFd;

/// One bound, listening socket (blocking; the epoll loop makes its own
/// non-blocking). Both event loops accept from either kind alike.
#[derive(Debug)]
pub(crate) struct Listener {
    pub fd: RawFd,
    pub addr: ListenAddr,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ListenAddr {
    Tcp(SocketAddr),
    /// The socket file at this path, removed again when the listener is
    /// closed (at shutdown), as Valkey does.
    Unix(String),
}

impl Drop for Listener {
    fn drop(&mut self) {
        close_fd(self.fd);
        if let ListenAddr::Unix(path) = &self.addr {
            log::notice("Removing the unix socket file.");
            if let Err(e) = std::fs::remove_file(path) {
                log::warning(&format!(
                    "Error removing the unix socket file: {}",
                    os_text(&e)
                ));
            }
        }
    }
}

/// Valkey's "Ready to accept connections <type>" lines, one per kind of
/// listener (tcp before unix, as Valkey's listener table orders them).
pub(crate) fn ready_lines(listeners: &[Listener]) -> Vec<&'static str> {
    let unix = listeners
        .iter()
        .any(|l| matches!(l.addr, ListenAddr::Unix(_)));
    let mut lines = Vec::new();
    if tcp_port(listeners).is_some() || !unix {
        lines.push("Ready to accept connections tcp");
    }
    if unix {
        lines.push("Ready to accept connections unix");
    }
    lines
}

/// The TCP port the server listens on (INFO `tcp_port`), `None` without a
/// TCP listener.
pub(crate) fn tcp_port(listeners: &[Listener]) -> Option<u16> {
    listeners.iter().find_map(|l| match l.addr {
        ListenAddr::Tcp(a) => Some(a.port()),
        ListenAddr::Unix(_) => None,
    })
}

/// A `bind` entry as Valkey reads it: a leading `-` makes it optional
/// (skipped when the address family or address does not exist here), `*`
/// is IPv4 any, `::*` IPv6 any.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BindSpec {
    pub host: String,
    pub optional: bool,
}

pub(crate) fn parse_bind(entry: &str) -> BindSpec {
    let (optional, rest) = match entry.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, entry),
    };
    let host = match rest {
        "*" => "0.0.0.0".to_string(),
        "::*" => "::".to_string(),
        h => h.to_string(),
    };
    BindSpec { host, optional }
}

/// The errors under which an optional (`-`) address is skipped: this host
/// has no such family or address (Valkey's list).
fn skippable(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(
            libc::ENOPROTOOPT
                | libc::EPROTONOSUPPORT
                | libc::ESOCKTNOSUPPORT
                | libc::EPFNOSUPPORT
                | libc::EAFNOSUPPORT
                | libc::EADDRNOTAVAIL
        )
    )
}

/// Bind every configured address, then the unix socket if one is set.
/// `port 0` means no TCP listener at all, as in Valkey. Errors carry
/// Valkey's start-up failure text.
pub(crate) fn bind_all(cfg: &Config) -> io::Result<Vec<Listener>> {
    let mut out = bind_tcp(cfg)?;
    let path = cfg.get("unixsocket").unwrap_or_default();
    if !path.is_empty() {
        let perm = cfg
            .get("unixsocketperm")
            .and_then(|p| u32::from_str_radix(&p, 8).ok())
            .unwrap_or(0);
        let group = cfg.get("unixsocketgroup").unwrap_or_default();
        let l = unix_sockaddr(&path)
            .and_then(|sa| listen_unix(&path, &sa, perm, &group, cfg.tcp_backlog))
            .map_err(|e| io::Error::other(format!("Failed opening Unix socket: {e}")))?;
        out.push(l);
    }
    Ok(out)
}

fn bind_tcp(cfg: &Config) -> io::Result<Vec<Listener>> {
    let port = cfg.port;
    let failed = |kind| {
        io::Error::new(
            kind,
            format!("Failed listening on port {port} (tcp), aborting."),
        )
    };
    let opts = TcpOpts::of(cfg);
    let out =
        open_tcp(cfg, |addr| listen_waiting_for_port(addr, &opts)).map_err(|e| failed(e.kind()))?;
    if out.is_empty() && port != 0 {
        log::warning("Configured to not listen anywhere, exiting.");
        return Err(failed(io::ErrorKind::AddrNotAvailable));
    }
    Ok(out)
}

/// CONFIG SET `port` / `bind`: listeners for the new addresses. One
/// already listened on (in `current`, address and descriptor) is shared
/// with its listener (a dup of the descriptor) instead of bound a second
/// time, which the port being in use would refuse. Nothing is bound for
/// good unless every address is: on an error the new listeners are
/// dropped and the running ones stay (the error is logged, as Valkey's).
pub(crate) fn rebind_tcp(
    cfg: &Config,
    current: &[(SocketAddr, RawFd)],
) -> io::Result<Vec<Listener>> {
    let opts = TcpOpts::of(cfg);
    open_tcp(cfg, |addr| match current.iter().find(|(a, _)| *a == addr) {
        Some(&(_, fd)) => dup_listener(fd, addr),
        None => listen_on(addr, &opts),
    })
}

/// A second descriptor of the listening socket `fd`.
fn dup_listener(fd: RawFd, addr: SocketAddr) -> Result<Listener, StepError> {
    // SAFETY: fcntl(2) F_DUPFD_CLOEXEC on a descriptor the caller keeps
    // open for the call.
    let fd = step(
        "dup",
        check(unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) }),
    )?;
    Ok(Listener {
        fd,
        addr: ListenAddr::Tcp(addr),
    })
}

/// Every configured TCP address (none with `port 0`, as in Valkey), each
/// opened by `open`; optional (`-`) ones this host lacks are skipped. The
/// first failure is logged in Valkey's words and returned.
fn open_tcp(
    cfg: &Config,
    mut open: impl FnMut(SocketAddr) -> Result<Listener, StepError>,
) -> io::Result<Vec<Listener>> {
    let port = cfg.port;
    let mut out = Vec::new();
    if port == 0 {
        return Ok(out);
    }
    for entry in &cfg.bind {
        let spec = parse_bind(entry);
        let shown = entry.strip_prefix('-').unwrap_or(entry);
        let addr = match resolve(&spec.host, port) {
            Ok(a) => a,
            Err(e) => {
                log::warning(&format!(
                    "Could not create server TCP listening socket {shown}:{port}: {}",
                    os_text(&e)
                ));
                return Err(e);
            }
        };
        match open(addr) {
            Ok(l) => out.push(l),
            Err(e) if spec.optional && skippable(&e.1) => {
                log::verbose(&format!("Skipping optional bind address {entry}: {e}"));
            }
            Err(e) => {
                log::warning(&format!(
                    "Warning: Could not create server TCP listening socket {shown}:{port}: {e}"
                ));
                return Err(e.1);
            }
        }
    }
    Ok(out)
}

fn resolve(host: &str, port: u16) -> io::Result<SocketAddr> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address for host"))
}

/// Turn a libc return value into a `Result` carrying errno.
fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// A failed step of setting up a listener: its name (for the log line,
/// Valkey style "bind: Address already in use") and errno.
#[derive(Debug)]
struct StepError(&'static str, io::Error);

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.0, os_text(&self.1))
    }
}

/// The error text without Rust's " (os error N)" suffix, as Valkey prints
/// `strerror`.
fn os_text(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

fn step<T>(what: &'static str, r: io::Result<T>) -> Result<T, StepError> {
    r.map_err(|e| StepError(what, e))
}

/// How long a start-up waits for a port still held by a server that has
/// just exited.
const PORT_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// [`listen_on`], retried while the port is in use for up to
/// [`PORT_WAIT`]: a process that uses io_uring (ringkv itself) and was
/// killed frees the sockets its rings hold only when the kernel's
/// deferred ring teardown runs, a moment after the process is gone, so a
/// restart right after a `kill -9` would otherwise find its own port
/// taken. A port another server really holds still fails, 2 s later.
fn listen_waiting_for_port(addr: SocketAddr, opts: &TcpOpts) -> Result<Listener, StepError> {
    let started = std::time::Instant::now();
    loop {
        match listen_on(addr, opts) {
            Err(e)
                if e.1.raw_os_error() == Some(libc::EADDRINUSE)
                    && started.elapsed() < PORT_WAIT =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            r => return r,
        }
    }
}

/// What a TCP listener is made with: `tcp-backlog`, and `socket-mark-id`
/// (the SO_MARK routing and filtering rules see; 0: none).
struct TcpOpts {
    backlog: u32,
    mark: u32,
}

impl TcpOpts {
    fn of(cfg: &Config) -> TcpOpts {
        let mark = cfg.get("socket-mark-id").and_then(|m| m.parse().ok());
        TcpOpts {
            backlog: cfg.tcp_backlog,
            mark: mark.unwrap_or(0),
        }
    }
}

fn listen_on(addr: SocketAddr, opts: &TcpOpts) -> Result<Listener, StepError> {
    let family = match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    // SAFETY: socket(2) has no memory preconditions.
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    let fd = step("socket", check(fd))?;
    // From here on the fd is owned by the Listener and closed on error.
    let mut l = Listener {
        fd,
        addr: ListenAddr::Tcp(addr),
    };
    step(
        "setsockopt SO_REUSEADDR",
        set_int_opt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1),
    )?;
    if family == libc::AF_INET6 {
        // So `*` and `::*` can share the port, as Valkey does.
        step(
            "setsockopt IPV6_V6ONLY",
            set_int_opt(fd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1),
        )?;
    }
    let (storage, len) = to_sockaddr(&addr);
    // SAFETY: `storage` is a valid sockaddr of `len` bytes for this family.
    let r = unsafe { libc::bind(fd, (&raw const storage).cast(), len) };
    step("bind", check(r))?;
    let backlog = opts.backlog.min(i32::MAX as u32) as libc::c_int;
    // SAFETY: listen(2) on a socket we own.
    let r = unsafe { libc::listen(fd, backlog) };
    step("listen", check(r))?;
    // As Valkey: after listen, and not fatal (it needs CAP_NET_ADMIN).
    if opts.mark > 0
        && let Err(e) = set_int_opt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_MARK,
            opts.mark as libc::c_int,
        )
    {
        log::warning(&format!("setsockopt SO_MARK: {e}"));
    }
    l.addr = ListenAddr::Tcp(local_addr(fd).unwrap_or(addr));
    Ok(l)
}

/// The unix socket's address, or Valkey's error for a path that does
/// not fit.
fn unix_sockaddr(path: &str) -> Result<libc::sockaddr_un, String> {
    // SAFETY: an all-zero sockaddr_un is a valid value.
    let mut sa: libc::sockaddr_un = unsafe { zeroed() };
    let room = sa.sun_path.len();
    if path.len() >= room || path.contains('\0') {
        return Err(format!(
            "unix socket path too long ({}), must be under {room}",
            path.len()
        ));
    }
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in sa.sun_path.iter_mut().zip(path.as_bytes()) {
        *d = *s as libc::c_char;
    }
    Ok(sa)
}

/// Valkey's unix listener, step for step: whatever file is at `path` is
/// removed (a socket left by a server that was killed), the socket is
/// bound, given `perm` (octal `unixsocketperm`, 0 = leave the umask's) and
/// `group` (`unixsocketgroup`, a name or a numeric id; empty = leave it),
/// then listens. Errors read as Valkey's ("bind: Permission denied").
fn listen_unix(
    path: &str,
    sa: &libc::sockaddr_un,
    perm: u32,
    group: &str,
    backlog: u32,
) -> Result<Listener, String> {
    use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};
    let _ = std::fs::remove_file(path);
    // SAFETY: socket(2) has no memory preconditions.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    let fd = step("socket", check(fd)).map_err(|e| e.to_string())?;
    // SAFETY: a new descriptor nothing else owns; closed on the error paths.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let len = size_of::<libc::sockaddr_un>() as libc::socklen_t;
    // SAFETY: `sa` is a valid sockaddr_un of `len` bytes.
    let r = unsafe { libc::bind(fd, (sa as *const libc::sockaddr_un).cast(), len) };
    step("bind", check(r)).map_err(|e| e.to_string())?;
    // Bound: from here on dropping the listener also removes the file.
    let l = Listener {
        fd: owned.into_raw_fd(),
        addr: ListenAddr::Unix(path.to_string()),
    };
    if perm != 0 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm))
            .map_err(|e| format!("chmod: {}", os_text(&e)))?;
    }
    if !group.is_empty() {
        let gid = group_id(group)
            .ok_or_else(|| format!("getgrnam error for group '{group}': no such group"))?;
        std::os::unix::fs::chown(path, None, Some(gid))
            .map_err(|e| format!("chown error for group '{group}': {}", os_text(&e)))?;
    }
    let backlog = backlog.min(i32::MAX as u32) as libc::c_int;
    // SAFETY: listen(2) on a socket we own.
    let r = unsafe { libc::listen(l.fd, backlog) };
    step("listen", check(r)).map_err(|e| e.to_string())?;
    Ok(l)
}

/// A group by name, else by number (Valkey takes names only).
fn group_id(group: &str) -> Option<u32> {
    let name = std::ffi::CString::new(group).ok()?;
    // SAFETY: getgrnam(3) reads a NUL-terminated name; the entry it returns
    // is read at once, before any other call could reuse its storage.
    let entry = unsafe { libc::getgrnam(name.as_ptr()) };
    if entry.is_null() {
        return group.parse().ok();
    }
    // SAFETY: non-null: a valid group entry.
    Some(unsafe { (*entry).gr_gid })
}

fn set_int_opt(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    val: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the option value is a valid c_int of the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&raw const val).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    check(r).map(drop)
}

/// Per-connection options: no Nagle delay (replies are already batched per
/// loop iteration), and keepalive probes as `tcp-keepalive` asks (Valkey's
/// `anetKeepAlive`: idle = interval, probe every interval/3, 3 probes).
pub(crate) fn tune_client_socket(fd: RawFd, keepalive_s: u64) {
    let _ = set_int_opt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
    if keepalive_s > 0 {
        let idle = keepalive_s.min(i32::MAX as u64) as libc::c_int;
        let _ = set_int_opt(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1);
        let _ = set_int_opt(fd, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, idle);
        let _ = set_int_opt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_KEEPINTVL,
            (idle / 3).max(1),
        );
        let _ = set_int_opt(fd, libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 3);
    }
}

pub(crate) fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl(2) flag queries/updates on an fd we own.
    let flags = check(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    // SAFETY: as above.
    check(unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) }).map(drop)
}

/// Write `data` without blocking and ignore the outcome (rejection
/// messages to a client that is closed right after).
pub(crate) fn send_best_effort(fd: RawFd, data: &[u8]) {
    // SAFETY: `data` is valid for `data.len()` bytes for the whole call.
    unsafe {
        libc::send(
            fd,
            data.as_ptr().cast(),
            data.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        );
    }
}

pub(crate) fn close_fd(fd: RawFd) {
    if fd >= 0 {
        // SAFETY: the caller owns `fd` and never uses it again.
        unsafe {
            libc::close(fd);
        }
    }
}

/// End both directions, waking any operation blocked on the socket.
pub(crate) fn shutdown_fd(fd: RawFd) {
    // SAFETY: shutdown(2) on an fd we own; no memory is involved.
    unsafe {
        libc::shutdown(fd, libc::SHUT_RDWR);
    }
}

/// Where an accepted connection came in: its TCP ends, or the path of the
/// unix socket it came through (an accepted unix socket's own name is the
/// listener's). `None` if the socket is gone already.
pub(crate) fn client_addr(fd: RawFd) -> Option<ClientAddr> {
    let storage = raw_name(fd, false)?;
    if storage.ss_family as libc::c_int == libc::AF_UNIX {
        // SAFETY: the family says this storage holds a sockaddr_un, which
        // is smaller than sockaddr_storage and has a compatible alignment.
        let sun = unsafe { &*(&raw const storage).cast::<libc::sockaddr_un>() };
        let bytes: Vec<u8> = sun
            .sun_path
            .iter()
            .map(|&c| c as u8)
            .take_while(|&b| b != 0)
            .collect();
        return Some(ClientAddr::Unix(String::from_utf8_lossy(&bytes).into()));
    }
    let local = from_sockaddr(&storage)?;
    let peer = peer_addr(fd)?;
    Some(ClientAddr::Tcp { peer, local })
}

pub(crate) fn peer_addr(fd: RawFd) -> Option<SocketAddr> {
    sock_name(fd, true)
}

pub(crate) fn local_addr(fd: RawFd) -> Option<SocketAddr> {
    sock_name(fd, false)
}

fn sock_name(fd: RawFd, peer: bool) -> Option<SocketAddr> {
    from_sockaddr(&raw_name(fd, peer)?)
}

/// getpeername(2) (`peer`) or getsockname(2), as the kernel wrote it.
fn raw_name(fd: RawFd, peer: bool) -> Option<libc::sockaddr_storage> {
    // SAFETY: an all-zero sockaddr_storage is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { zeroed() };
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    let p = (&raw mut storage).cast::<libc::sockaddr>();
    // SAFETY: `storage` has room for `len` bytes; the kernel writes at most
    // that and updates `len`.
    let r = unsafe {
        if peer {
            libc::getpeername(fd, p, &mut len)
        } else {
            libc::getsockname(fd, p, &mut len)
        }
    };
    (r >= 0).then_some(storage)
}

fn from_sockaddr(s: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match s.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says this storage holds a sockaddr_in, which
            // is smaller than sockaddr_storage and has a compatible alignment.
            let a = unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let a = unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// An outgoing connection to `addr` (the replication link), from
/// `source` (`bind-source-addr`) if given and it can be bound, else from
/// wherever the kernel picks: Valkey's best-effort bind. Bounded by
/// `timeout`, as `TcpStream::connect_timeout`.
pub fn connect_from(
    addr: SocketAddr,
    source: Option<IpAddr>,
    timeout: std::time::Duration,
) -> io::Result<std::net::TcpStream> {
    use std::os::fd::{FromRawFd, OwnedFd};
    let Some(source) = source.filter(|s| s.is_ipv4() == addr.is_ipv4()) else {
        return std::net::TcpStream::connect_timeout(&addr, timeout);
    };
    let family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: socket(2) has no memory preconditions.
    let fd = check(unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: a new descriptor nothing else owns.
    let stream = std::net::TcpStream::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let (from, len) = to_sockaddr(&SocketAddr::new(source, 0));
    // SAFETY: `from` holds a sockaddr of `len` bytes for this family.
    if unsafe { libc::bind(fd, (&raw const from).cast(), len) } != 0 {
        drop(stream);
        return std::net::TcpStream::connect_timeout(&addr, timeout);
    }
    // SO_SNDTIMEO bounds a blocking connect(2) on Linux.
    stream.set_write_timeout(Some(timeout))?;
    let (to, len) = to_sockaddr(&addr);
    // SAFETY: as above, on the socket `stream` owns.
    if unsafe { libc::connect(fd, (&raw const to).cast(), len) } != 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EINPROGRESS) => io::Error::from(io::ErrorKind::TimedOut),
            _ => e,
        });
    }
    Ok(stream)
}

fn to_sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_storage is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_storage is large and aligned enough for any
            // sockaddr type; we write a sockaddr_in into it.
            let sin = unsafe { &mut *(&raw mut storage).cast::<libc::sockaddr_in>() };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = a.port().to_be();
            sin.sin_addr = libc::in_addr {
                s_addr: u32::from(*a.ip()).to_be(),
            };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6 = unsafe { &mut *(&raw mut storage).cast::<libc::sockaddr_in6>() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_addr = libc::in6_addr {
                s6_addr: a.ip().octets(),
            };
            sin6.sin6_flowinfo = a.flowinfo();
            sin6.sin6_scope_id = a.scope_id();
            size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_entries() {
        assert_eq!(
            parse_bind("-::*"),
            BindSpec {
                host: "::".into(),
                optional: true
            }
        );
        assert_eq!(parse_bind("*").host, "0.0.0.0");
        assert!(!parse_bind("127.0.0.1").optional);
        assert_eq!(parse_bind("-::1").host, "::1");
    }

    #[test]
    fn sockaddr_round_trip() {
        for a in ["127.0.0.1:6379", "[::1]:7000", "[fe80::1%2]:1"] {
            let addr: SocketAddr = a.parse().unwrap();
            let (s, _) = to_sockaddr(&addr);
            assert_eq!(from_sockaddr(&s), Some(addr));
        }
    }

    #[test]
    fn listen_on_ephemeral_port() {
        let opts = TcpOpts {
            backlog: 16,
            mark: 0,
        };
        let l = listen_on("127.0.0.1:0".parse().unwrap(), &opts).unwrap();
        let ListenAddr::Tcp(addr) = l.addr else {
            panic!("a TCP listener")
        };
        assert_ne!(addr.port(), 0);
        assert_eq!(local_addr(l.fd), Some(addr));
    }
}
