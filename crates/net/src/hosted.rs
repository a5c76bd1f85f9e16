//! Sockets an IO thread serves for another subsystem: in threaded mode a
//! replica's stream (`ringkv-repl`) is sent by an IO thread, beside its
//! clients, rather than by a thread of its own.
//!
//! This crate knows nothing of what such a socket carries. A [`Hosted`]
//! is a non-blocking step and a descriptor that turns readable when the
//! step has something to do (its own epoll set: socket, completions). Each
//! IO thread keeps a [`HostedSet`]: one epoll set of its members'
//! descriptors, which its event loop watches beside the doorbell, so a
//! replica's ACK or a socket with room again ends the loop's wait.
//!
//! ```text
//!  repl:  host(pump) ──► the IO thread hosting the fewest ──► inbox
//!  IO thread, each iteration (Driver::tick):
//!         inbox ──► joined(bell) ──► members
//!         step(woke) for each: woke = the set's descriptor was ready
//!  engine, after a batch that grew the stream: rings the hosting IO
//!         thread's doorbell (the bell `joined` gave it)
//!  the IO thread ends (threaded mode ends, or the pool shrinks):
//!         leave() for each: the member finds another host or a thread
//! ```

use ringkv_rings::doorbell::Doorbell;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Something an IO thread serves besides its connections.
pub trait Hosted: Send {
    /// Turns readable (level-triggered) when [`Hosted::step`] has input
    /// or completions to take, or room to send after it was blocked.
    fn fd(&self) -> RawFd;
    /// Taken in by an IO thread: ring `bell` when there is new work that
    /// no readiness of [`Hosted::fd`] announces (more to send).
    fn joined(&mut self, bell: &Arc<Doorbell>);
    /// Do what can be done now without blocking; `woke`: the descriptor
    /// may be ready. `false`: finished, it is dropped.
    fn step(&mut self, woke: bool) -> bool;
    /// Work waits that a step would do at once (checked after the thread
    /// announced its sleep, so a ring just before is not lost).
    fn ready(&self) -> bool;
    /// Its IO thread is ending: carry on elsewhere (another host, or a
    /// thread of its own).
    fn leave(self: Box<Self>);
}

/// A level-triggered epoll set of descriptors (each its own key): what a
/// [`HostedSet`] is, and what a [`Hosted`] can give as its descriptor.
pub struct EpollSet(OwnedFd);

impl EpollSet {
    pub fn new() -> std::io::Result<EpollSet> {
        // SAFETY: epoll_create1 takes no pointers.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a descriptor just made, owned by nothing else.
        Ok(EpollSet(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Readable while a descriptor in the set is ready for its events.
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    pub fn add(&self, fd: RawFd, events: libc::c_int) -> std::io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, events)
    }

    pub fn modify(&self, fd: RawFd, events: libc::c_int) -> std::io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, events)
    }

    pub fn remove(&self, fd: RawFd) -> std::io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0)
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: libc::c_int) -> std::io::Result<()> {
        let mut ev = libc::epoll_event {
            events: events as u32,
            u64: fd as u64,
        };
        // SAFETY: epoll_ctl reads one event we own for the call.
        if unsafe { libc::epoll_ctl(self.fd(), op, fd, &mut ev) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

/// An IO thread's door for members on their way in.
struct Inbox {
    bell: Arc<Doorbell>,
    /// `None` once the thread no longer takes members.
    queue: Mutex<Option<Vec<Box<dyn Hosted>>>>,
    arrived: AtomicBool,
    /// Members and arrivals, to pick the least loaded.
    load: AtomicUsize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The IO threads taking members.
pub(crate) struct Registry {
    inboxes: Mutex<Vec<Arc<Inbox>>>,
    /// How many there are, read without the lock.
    count: AtomicUsize,
}

/// The process's IO threads.
pub(crate) static HOSTS: Registry = Registry::new();

/// Whether IO threads take members now (threaded mode), for a member
/// served by a thread of its own to come back to one.
pub fn hosts_running() -> bool {
    HOSTS.count.load(Ordering::Relaxed) > 0
}

/// Give `h` to the IO thread hosting the fewest; back if no IO thread
/// runs (inline mode).
pub fn host<H: Hosted + 'static>(h: Box<H>) -> Result<(), Box<H>> {
    HOSTS.host(h)
}

impl Registry {
    const fn new() -> Registry {
        Registry {
            inboxes: Mutex::new(Vec::new()),
            count: AtomicUsize::new(0),
        }
    }

    /// Add or take out an inbox, under the lock.
    fn update(&self, f: impl FnOnce(&mut Vec<Arc<Inbox>>)) {
        let mut all = lock(&self.inboxes);
        f(&mut all);
        self.count.store(all.len(), Ordering::Relaxed);
    }

    fn host<H: Hosted + 'static>(&self, h: Box<H>) -> Result<(), Box<H>> {
        let inbox = lock(&self.inboxes)
            .iter()
            .min_by_key(|i| i.load.load(Ordering::Relaxed))
            .cloned();
        let Some(inbox) = inbox else { return Err(h) };
        let mut queue = lock(&inbox.queue);
        let Some(q) = queue.as_mut() else {
            return Err(h);
        };
        q.push(h);
        inbox.load.fetch_add(1, Ordering::Relaxed);
        inbox.arrived.store(true, Ordering::Release);
        drop(queue);
        inbox.bell.ring();
        Ok(())
    }
}

/// One IO thread's members and the epoll set of their descriptors.
pub(crate) struct HostedSet {
    registry: &'static Registry,
    inbox: Arc<Inbox>,
    set: EpollSet,
    members: Vec<Box<dyn Hosted>>,
    /// The loop saw the set's descriptor ready since the last step.
    woke: bool,
    /// Members are stepped as woken at least this often: a readiness the
    /// loop missed (its poll re-armed late) costs a little delay, never a
    /// stall.
    next_look: Instant,
}

/// See [`HostedSet::next_look`].
const LOOK_EVERY: Duration = Duration::from_millis(100);

impl HostedSet {
    /// A set for the IO thread woken by `bell`, open for members at once.
    pub(crate) fn open(
        registry: &'static Registry,
        bell: Arc<Doorbell>,
    ) -> std::io::Result<HostedSet> {
        let set = EpollSet::new()?;
        let inbox = Arc::new(Inbox {
            bell,
            queue: Mutex::new(Some(Vec::new())),
            arrived: AtomicBool::new(false),
            load: AtomicUsize::new(0),
        });
        registry.update(|all| all.push(inbox.clone()));
        Ok(HostedSet {
            registry,
            inbox,
            set,
            members: Vec::new(),
            woke: false,
            next_look: Instant::now(),
        })
    }

    /// Readable while a member's descriptor is.
    pub(crate) fn fd(&self) -> RawFd {
        self.set.fd()
    }

    /// The loop found [`HostedSet::fd`] readable.
    pub(crate) fn mark_woke(&mut self) {
        self.woke = true;
    }

    /// A member has work to do now, or one is arriving.
    pub(crate) fn ready(&self) -> bool {
        self.inbox.arrived.load(Ordering::Acquire) || self.members.iter().any(|m| m.ready())
    }

    /// Take arrivals in and step every member.
    pub(crate) fn step(&mut self, now: Instant) {
        // A plain load first: this runs every loop iteration.
        if self.inbox.arrived.load(Ordering::Relaxed)
            && self.inbox.arrived.swap(false, Ordering::Acquire)
        {
            let arrivals = lock(&self.inbox.queue)
                .as_mut()
                .map(std::mem::take)
                .unwrap_or_default();
            for mut m in arrivals {
                if self.set.add(m.fd(), libc::EPOLLIN).is_err() {
                    // Never seen (the set has room for any descriptor);
                    // served by the tick alone it would only be slower.
                    engine::log::warning("hosted socket: epoll_ctl failed; served at each tick");
                }
                m.joined(&self.inbox.bell);
                self.members.push(m);
                self.woke = true;
            }
        }
        if self.members.is_empty() {
            return;
        }
        if now >= self.next_look {
            self.next_look = now + LOOK_EVERY;
            self.woke = true;
        }
        let woke = std::mem::take(&mut self.woke);
        let mut i = 0;
        while i < self.members.len() {
            if self.members[i].step(woke) {
                i += 1;
                continue;
            }
            let m = self.members.swap_remove(i);
            let _ = self.set.remove(m.fd());
            self.inbox.load.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for HostedSet {
    /// Closed to arrivals first, so that what leaves cannot come back here.
    fn drop(&mut self) {
        self.registry
            .update(|all| all.retain(|i| !Arc::ptr_eq(i, &self.inbox)));
        let queued = lock(&self.inbox.queue).take().unwrap_or_default();
        for m in std::mem::take(&mut self.members) {
            let _ = self.set.remove(m.fd());
            m.leave();
        }
        for m in queued {
            m.leave();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    /// A member that counts its steps and ends after `left` of them.
    struct Counting {
        fd: RawFd,
        joined: Arc<AtomicU32>,
        steps: Arc<AtomicU32>,
        left: u32,
        left_host: Arc<AtomicU32>,
    }

    impl Hosted for Counting {
        fn fd(&self) -> RawFd {
            self.fd
        }
        fn joined(&mut self, _: &Arc<Doorbell>) {
            self.joined.fetch_add(1, Ordering::Relaxed);
        }
        fn step(&mut self, _: bool) -> bool {
            self.steps.fetch_add(1, Ordering::Relaxed);
            self.left -= 1;
            self.left > 0
        }
        fn ready(&self) -> bool {
            false
        }
        fn leave(self: Box<Self>) {
            self.left_host.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn members_join_step_end_and_leave_with_their_thread() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        use std::os::fd::AsRawFd;
        let counters = || Arc::new(AtomicU32::new(0));
        let (joined, steps, left_host) = (counters(), counters(), counters());
        let member = |left| {
            Box::new(Counting {
                fd: a.as_raw_fd(),
                joined: joined.clone(),
                steps: steps.clone(),
                left,
                left_host: left_host.clone(),
            })
        };
        static REGISTRY: Registry = Registry::new();
        let host = |m| REGISTRY.host(m);
        // No IO thread: refused.
        assert!(host(member(1)).is_err());

        let bell = Arc::new(Doorbell::new().unwrap());
        let mut set = HostedSet::open(&REGISTRY, bell).unwrap();
        assert_eq!(REGISTRY.count.load(Ordering::Relaxed), 1);
        assert!(host(member(2)).is_ok());
        assert!(set.ready(), "an arrival is work");
        set.step(Instant::now());
        assert_eq!(joined.load(Ordering::Relaxed), 1);
        assert_eq!(steps.load(Ordering::Relaxed), 1);
        assert_eq!(set.members.len(), 1);
        set.step(Instant::now());
        assert_eq!(set.members.len(), 0, "a member that finished is dropped");
        assert_eq!(set.inbox.load.load(Ordering::Relaxed), 0);

        // The set's descriptor turns readable with a member's.
        assert!(host(member(10)).is_ok());
        set.step(Instant::now());
        let readable = || {
            let mut p = libc::pollfd {
                fd: set.fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one pollfd we own.
            unsafe { libc::poll(&mut p, 1, 0) == 1 }
        };
        assert!(!readable());
        use std::io::Write;
        (&b).write_all(b"x").unwrap();
        assert!(readable());

        // A member in the set and one still in the inbox both leave.
        assert!(host(member(10)).is_ok());
        drop(set);
        assert_eq!(left_host.load(Ordering::Relaxed), 2);
        assert!(host(member(1)).is_err(), "a closed set takes no more");
        assert_eq!(REGISTRY.count.load(Ordering::Relaxed), 0);
    }
}
