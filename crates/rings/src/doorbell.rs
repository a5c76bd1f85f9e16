//! Sleep/wake hand-off between one sleeper and any number of ringers.
//!
//! The `sleeping` flag is what keeps the eventfd off the fast path: a ringer
//! whose consumer is awake pays one fence and one load of a line that nobody is
//! writing, and no syscall. The eventfd is written only when the sleeper has
//! announced that it is about to block, and then only once however many
//! ringers race for it.
//!
//! Why no wake-up can be lost (Dekker's pattern). Each side stores one location
//! and then loads the other, and nothing short of SeqCst on both sides orders a
//! store before a later load of a different location. The ring's own accesses
//! are Release/Acquire, so the SeqCst part is a fence on each side (loom also
//! honours only SeqCst fences; it treats SeqCst accesses as AcqRel):
//!
//! ```text
//! sleeper                              ringer
//! swap sleeping to true                tail = t        (publish, Release)
//! fence(SeqCst)  -- F1                 fence(SeqCst)   -- F2
//! re-check rings (load tail)           if sleeping: swap it false, write eventfd
//! if empty: block on the eventfd
//! ```
//!
//! F1 and F2 are totally ordered. If F2 comes first, the re-check sees `t`
//! and the sleeper does not block. If F1 comes first, the ringer's load sees
//! `sleeping == true`, or a later store to it: another ringer's swap (which
//! writes the eventfd itself) or the sleeper's own `awake` (after which the
//! sleeper re-checks before it can block again). In every case the sleeper
//! either sees the item or gets an eventfd write.
//!
//! Every write to the flag is an RMW (swap), the sleeper's included. An RMW
//! reads the newest value and writes right after it, so the flag's
//! modification order is one chain and "a later store" above is well defined
//! in the model checker too: loom tracks modification order only as far as
//! threads have seen each other's writes, and with a plain store in
//! `prepare_sleep` it places that store *concurrently* with a ringer's swap it
//! has not seen, then lets a ringer's post-fence load return the swap's older
//! `false` (a lost wake-up the C++ model forbids). On x86 a SeqCst store is an
//! `xchg` anyway, so the swaps cost a few cycles, and only on the sleep path.

use std::fmt;
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::sync::{AtomicBool, Ordering, fence};

/// Wakes one sleeping consumer when any of its producers has published.
///
/// The sleeper's loop, with `bell` its doorbell:
///
/// ```
/// # use ringkv_rings::{channel, Doorbell};
/// # let (mut producer, mut consumer) = channel::<u32>(8);
/// # let bell = Doorbell::new().unwrap();
/// # producer.push(1).unwrap(); producer.publish(); bell.ring();
/// # let mut received = 0;
/// loop {
///     while let Some(_item) = consumer.pop() {
///         received += 1;
///     }
///     if received == 1 {
///         break;
///     }
///     bell.prepare_sleep();
///     if consumer.is_empty() {
///         bell.wait(None); // or epoll_wait / io_uring_enter with bell.fd() registered
///     }
///     bell.awake();
/// }
/// ```
///
/// and every producer, after filling its ring: `producer.publish(); bell.ring();`.
pub struct Doorbell {
    /// Set by the sleeper before its final re-check; cleared by the first
    /// ringer that sees it (who then owns the eventfd write) or by the sleeper
    /// once awake.
    sleeping: AtomicBool,
    event: Event,
    /// Statistics only: the protocol never reads it, so it stays on std even
    /// under loom and adds nothing to the state space.
    rings_written: std::sync::atomic::AtomicU64,
}

impl Doorbell {
    /// A doorbell with nobody asleep and a fresh eventfd
    /// (`EFD_NONBLOCK | EFD_CLOEXEC`).
    pub fn new() -> io::Result<Doorbell> {
        Ok(Doorbell::with(Event::new()?))
    }

    /// A doorbell whose sleeper waits on nothing else ([`wait`](Self::wait)
    /// only): a futex word instead of an eventfd. No descriptor, and a
    /// wake-up costs the sleeper one system call (the wait returning)
    /// instead of two (ppoll, then the read in [`awake`](Self::awake)).
    /// [`fd`](Self::fd) returns -1. Under `cfg(loom)` it is the same model
    /// as [`new`](Self::new). Measured as the execution thread's doorbell at
    /// `-P 1`: its CPU per request while awake fell to 0.91× (SET) and
    /// 0.82× (GET) of the eventfd's (docs/BENCHMARKS.md §7.2).
    pub fn new_futex() -> Doorbell {
        Doorbell::with(Event::futex())
    }

    fn with(event: Event) -> Doorbell {
        Doorbell {
            sleeping: AtomicBool::new(false),
            event,
            rings_written: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The eventfd, to register for readability in epoll or io_uring (poll).
    /// It becomes readable when a ringer writes it and stays readable until
    /// [`awake`](Self::awake) drains it (level-triggered epoll is fine). Under
    /// `cfg(loom)` there is no descriptor and this returns -1.
    pub fn fd(&self) -> RawFd {
        self.event.raw_fd()
    }

    /// Sleeper, step 1: announce the intent to sleep. The caller must then
    /// re-check all its rings (for example [`Consumer::is_empty`]); if anything
    /// is there it calls [`awake`](Self::awake) and works instead of sleeping.
    ///
    /// [`Consumer::is_empty`]: crate::Consumer::is_empty
    pub fn prepare_sleep(&self) {
        // A swap, not a store: see "Every write to the flag is an RMW" in the
        // module docs. Its ordering comes from the fence.
        self.sleeping.swap(true, Ordering::Relaxed);
        // F1 of the module docs: orders the flag write before the caller's
        // re-check loads of the rings' tails.
        fence(Ordering::SeqCst);
    }

    /// Sleeper, after waking (or when the re-check found work): clear the flag
    /// and drain the eventfd so that it stops reporting readable.
    pub fn awake(&self) {
        self.awake_after(true);
    }

    /// [`awake`](Self::awake), for a sleeper whose own wait (epoll,
    /// io_uring) says whether it saw the eventfd readable (`rung`): the
    /// counter is read only then, or when a ringer took the flag since
    /// [`prepare_sleep`](Self::prepare_sleep) (its write may still be on
    /// the way: a later wait reports it, and that call drains it). Most
    /// wake-ups of an IO thread are its sockets', and this spares each of
    /// them a read that would find the counter at zero. A count left
    /// behind is never lost and never spun on: a wait that returns for it
    /// reports `rung`.
    pub fn awake_after(&self, rung: bool) {
        // No ordering needed: a ringer that reads this `false` skips the write,
        // which is safe because the sleeper re-checks its rings after the next
        // `prepare_sleep` before it can block again. A swap for the same reason
        // as in `prepare_sleep`; what it read says whether a ringer took the
        // flag.
        let untouched = self.sleeping.swap(false, Ordering::Relaxed);
        // Drained after the flag is cleared so that a ringer which swapped the
        // flag just before leaves at most one stale count behind, which costs
        // one spurious wake-up later and is never lost.
        if rung || !untouched {
            self.event.drain();
        }
    }

    /// Sleeper: block until rung or until `timeout` passes (`None` = forever),
    /// with ppoll(2) on the eventfd, or FUTEX_WAIT on the word of a
    /// [`new_futex`](Self::new_futex) doorbell. Call only between
    /// [`prepare_sleep`](Self::prepare_sleep) and [`awake`](Self::awake).
    /// Returns true if rung; false on timeout. Either way the caller re-checks
    /// its rings, so a false return is never a lost item.
    pub fn wait(&self, timeout: Option<Duration>) -> bool {
        self.event.wait(timeout)
    }

    /// Ringer, after `publish()`: wakes the sleeper if (and only if) it
    /// announced sleep. Of several concurrent ringers only the one that wins
    /// the swap writes the eventfd. Returns whether this call wrote it.
    pub fn ring(&self) -> bool {
        // F2 of the module docs: orders the caller's publish (tail store)
        // before the flag load below.
        fence(Ordering::SeqCst);
        // A plain load first: when the sleeper is awake (the common case) the
        // flag's line stays shared instead of bouncing on an RMW.
        if !self.sleeping.load(Ordering::Relaxed) {
            return false;
        }
        if !self.sleeping.swap(false, Ordering::Relaxed) {
            return false;
        }
        self.event.signal();
        self.rings_written
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        true
    }

    /// How many times a ringer wrote the eventfd (i.e. woke, or was about to
    /// wake, the sleeper).
    pub fn rings_written(&self) -> u64 {
        self.rings_written
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl fmt::Debug for Doorbell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Doorbell")
            .field("fd", &self.fd())
            .field("rings_written", &self.rings_written())
            .finish()
    }
}

/// The real thing: an eventfd (for sleepers that wait in epoll or
/// io_uring), or a futex word (for one that waits on the doorbell alone).
#[cfg(not(loom))]
enum Event {
    Fd(std::os::fd::OwnedFd),
    /// 1 when rung and not yet drained.
    Futex(std::sync::atomic::AtomicU32),
}

#[cfg(not(loom))]
impl Event {
    fn new() -> io::Result<Event> {
        use std::os::fd::FromRawFd;
        // SAFETY: eventfd takes no pointers; a negative return is an error.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by eventfd, is open, and is owned by
        // nobody else, so OwnedFd may take it over and close it once.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        Ok(Event::Fd(fd))
    }

    fn futex() -> Event {
        Event::Futex(std::sync::atomic::AtomicU32::new(0))
    }

    fn raw_fd(&self) -> RawFd {
        use std::os::fd::AsRawFd;
        match self {
            Event::Fd(fd) => fd.as_raw_fd(),
            Event::Futex(_) => -1,
        }
    }

    fn signal(&self) {
        match self {
            Event::Fd(_) => self.transfer(true),
            Event::Futex(word) => {
                word.store(1, std::sync::atomic::Ordering::Release);
                futex(word, libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1, None);
            }
        }
    }

    fn drain(&self) {
        match self {
            Event::Fd(_) => self.transfer(false),
            Event::Futex(word) => word.store(0, std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// One 8-byte eventfd write of 1 (`write`) or read of the counter,
    /// retried on EINTR. EAGAIN is fine either way: on a write the counter
    /// is at its maximum (already readable: the wake-up is pending), on a
    /// read it already was zero (one read resets it).
    fn transfer(&self, write: bool) {
        let mut value: u64 = 1;
        loop {
            let buf = (&raw mut value).cast::<libc::c_void>();
            // SAFETY: `buf` is a live, writable 8-byte u64 as eventfd
            // requires, and the fd is open for as long as `self` lives.
            let n = unsafe {
                if write {
                    libc::write(self.raw_fd(), buf, size_of::<u64>())
                } else {
                    libc::read(self.raw_fd(), buf, size_of::<u64>())
                }
            };
            if n >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                return;
            }
        }
    }

    fn wait(&self, timeout: Option<Duration>) -> bool {
        // A deadline too far away to represent (None) is as good as forever.
        let deadline = timeout.and_then(|t| std::time::Instant::now().checked_add(t));
        let left = || {
            deadline.map(|d| {
                let left = d.saturating_duration_since(std::time::Instant::now());
                libc::timespec {
                    tv_sec: libc::time_t::try_from(left.as_secs()).unwrap_or(libc::time_t::MAX),
                    // Below 10^9, so it fits every c_long.
                    tv_nsec: left.subsec_nanos() as libc::c_long,
                }
            })
        };
        match self {
            Event::Fd(_) => loop {
                let mut pfd = libc::pollfd {
                    fd: self.raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // ppoll rather than poll: nanosecond timeouts, so a
                // sub-millisecond wait is neither rounded down to a busy loop
                // nor up to 1 ms.
                let ts = left();
                let ts_ptr = ts
                    .as_ref()
                    .map_or(std::ptr::null(), |ts| ts as *const libc::timespec);
                // SAFETY: `pfd` is one live pollfd matching nfds = 1; `ts_ptr`
                // is null or points to `ts`, which outlives the call; a null
                // sigmask keeps the thread's mask, making this plain poll(2).
                let r = unsafe { libc::ppoll(&mut pfd, 1, ts_ptr, std::ptr::null()) };
                if r > 0 {
                    return pfd.revents & libc::POLLIN != 0;
                }
                if r == 0 {
                    return false;
                }
                // Interrupted by a signal: go back to sleep for what is left.
                // Any other error cannot happen with these arguments; report
                // "not rung" and let the caller re-check rather than panic in
                // a server.
                if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                    return false;
                }
            },
            Event::Futex(word) => loop {
                if word.load(std::sync::atomic::Ordering::Acquire) != 0 {
                    return true;
                }
                let ts = left();
                if ts.is_some_and(|t| t.tv_sec == 0 && t.tv_nsec == 0) {
                    return false;
                }
                // Sleeps only while the word is still 0, so a ring between
                // the load above and the call is not missed. Returns on a
                // wake, a signal, a timeout or a spurious wake-up: the load
                // above decides.
                futex(
                    word,
                    libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                    0,
                    ts.as_ref(),
                );
            },
        }
    }
}

/// futex(2) on `word`: FUTEX_WAIT (sleep while `*word == val`, for at most
/// `timeout`, relative) or FUTEX_WAKE (wake up to `val` waiters). The
/// result is not needed: callers re-read the word.
#[cfg(not(loom))]
fn futex(
    word: &std::sync::atomic::AtomicU32,
    op: libc::c_int,
    val: u32,
    timeout: Option<&libc::timespec>,
) {
    let ts_ptr = timeout.map_or(std::ptr::null(), |ts| ts as *const libc::timespec);
    // SAFETY: `word` is a live, aligned u32 for the whole call (AtomicU32
    // has u32's layout); `ts_ptr` is null or points to a timespec that
    // outlives the call; the two trailing arguments are unused by WAIT and
    // WAKE.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            op,
            val,
            ts_ptr,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// The model of the eventfd for loom: a counter under a mutex, and a condvar
/// for blocking readers. Only the syscalls are replaced; the flag protocol
/// above is the same code in both builds.
#[cfg(loom)]
struct Event {
    count: crate::sync::Mutex<u64>,
    readable: crate::sync::Condvar,
}

#[cfg(loom)]
impl Event {
    fn new() -> io::Result<Event> {
        Ok(Event::futex())
    }

    fn futex() -> Event {
        Event {
            count: crate::sync::Mutex::new(0),
            readable: crate::sync::Condvar::new(),
        }
    }

    fn raw_fd(&self) -> RawFd {
        -1
    }

    fn signal(&self) {
        let mut count = self.count.lock().unwrap();
        *count += 1;
        self.readable.notify_one();
    }

    fn drain(&self) {
        *self.count.lock().unwrap() = 0;
    }

    fn wait(&self, timeout: Option<Duration>) -> bool {
        let mut count = self.count.lock().unwrap();
        if timeout.is_some() {
            // loom has no clock (its Condvar::wait_timeout never times out), so
            // a timed wait is modelled as one whose time has already run out:
            // report readiness without blocking. That is a legal real-world
            // outcome and exercises the caller's "woke without a ring" path.
            return *count != 0;
        }
        while *count == 0 {
            count = self.readable.wait(count).unwrap();
        }
        true
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::time::Instant;

    fn readable(fd: RawFd) -> bool {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd, nfds = 1, zero timeout.
        let r = unsafe { libc::poll(&mut pfd, 1, 0) };
        assert!(r >= 0);
        r == 1
    }

    #[test]
    fn ring_without_a_sleeper_does_not_touch_the_eventfd() {
        let bell = Doorbell::new().unwrap();
        assert!(!bell.ring());
        assert!(!readable(bell.fd()));
        assert_eq!(bell.rings_written(), 0);
    }

    #[test]
    fn only_the_first_ringer_writes_and_awake_drains() {
        let bell = Doorbell::new().unwrap();
        bell.prepare_sleep();
        assert!(bell.ring());
        assert!(!bell.ring(), "the flag was taken by the first ringer");
        assert!(readable(bell.fd()));
        assert!(bell.wait(None), "already rung: returns at once");
        bell.awake();
        assert!(!readable(bell.fd()), "awake drains the counter");
        assert_eq!(bell.rings_written(), 1);
        // awake with nothing to drain (EAGAIN) is fine too.
        bell.prepare_sleep();
        bell.awake();
        assert!(!bell.ring(), "awake cleared the flag");
    }

    #[test]
    fn awake_after_reads_the_counter_only_when_it_may_hold_a_ring() {
        let bell = Doorbell::new().unwrap();
        // A ringer took the flag: drained although the wait was not asked.
        bell.prepare_sleep();
        assert!(bell.ring());
        bell.awake_after(false);
        assert!(!readable(bell.fd()));
        // Nobody rang: nothing to read, and the flag is down.
        bell.prepare_sleep();
        bell.awake_after(false);
        assert!(!bell.ring());
        // A ringer's write that landed after the drain is left behind,
        // and the next wait reports it: then it is read.
        bell.event.signal();
        bell.prepare_sleep();
        let rung = bell.wait(Some(Duration::ZERO));
        assert!(rung);
        bell.awake_after(rung);
        assert!(!readable(bell.fd()));
    }

    #[test]
    fn wait_times_out_when_nobody_rings() {
        let bell = Doorbell::new().unwrap();
        bell.prepare_sleep();
        let start = Instant::now();
        assert!(!bell.wait(Some(Duration::from_millis(20))));
        assert!(start.elapsed() >= Duration::from_millis(20));
        assert!(!bell.wait(Some(Duration::ZERO)));
        bell.awake();
    }

    /// Rings `bell` from another thread 10 ms from now.
    fn ring_later(bell: &std::sync::Arc<Doorbell>) -> std::thread::JoinHandle<bool> {
        let bell = std::sync::Arc::clone(bell);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(10));
            bell.ring()
        })
    }

    #[test]
    fn wait_wakes_when_another_thread_rings() {
        let bell = std::sync::Arc::new(Doorbell::new().unwrap());
        bell.prepare_sleep();
        let ringer = ring_later(&bell);
        assert!(bell.wait(Some(Duration::from_secs(30))));
        bell.awake();
        assert!(ringer.join().unwrap());
    }

    #[test]
    fn futex_doorbell_times_out_and_wakes_like_the_eventfd_one() {
        let bell = std::sync::Arc::new(Doorbell::new_futex());
        assert_eq!(bell.fd(), -1);
        assert!(!bell.ring(), "nobody asleep: no wake-up");
        bell.prepare_sleep();
        let start = Instant::now();
        assert!(!bell.wait(Some(Duration::from_millis(20))));
        assert!(start.elapsed() >= Duration::from_millis(20));
        assert!(!bell.wait(Some(Duration::ZERO)));
        let ringer = ring_later(&bell);
        assert!(bell.wait(Some(Duration::from_secs(30))));
        assert!(ringer.join().unwrap());
        // Rung and not drained: a second wait returns at once.
        assert!(bell.wait(None));
        bell.awake();
        bell.prepare_sleep();
        assert!(!bell.wait(Some(Duration::ZERO)), "awake drained the ring");
        bell.awake();
        assert_eq!(bell.rings_written(), 1);
    }

    #[test]
    fn fd_works_in_epoll() {
        let bell = std::sync::Arc::new(Doorbell::new().unwrap());
        // SAFETY: plain syscall, no pointers.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        assert!(ep >= 0);
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: 7,
        };
        // SAFETY: `ev` is a live epoll_event; both fds are open.
        let r = unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, bell.fd(), &mut ev) };
        assert_eq!(r, 0);

        bell.prepare_sleep();
        let ringer = ring_later(&bell);
        let mut out = [libc::epoll_event { events: 0, u64: 0 }; 4];
        // SAFETY: `out` has room for the 4 events we allow.
        let n = unsafe { libc::epoll_wait(ep, out.as_mut_ptr(), 4, 30_000) };
        assert_eq!(n, 1);
        assert_eq!({ out[0].u64 }, 7);
        bell.awake();
        assert!(ringer.join().unwrap());
        // Level-triggered: after awake the fd must no longer be reported.
        // SAFETY: as above, with a zero timeout.
        let n = unsafe { libc::epoll_wait(ep, out.as_mut_ptr(), 4, 0) };
        assert_eq!(n, 0);
        // SAFETY: `ep` is ours and closed once.
        unsafe { libc::close(ep) };
    }
}
