//! The open-file limit (`RLIMIT_NOFILE`) against `maxclients`, as Valkey
//! handles it: every client is a descriptor, so at start-up the server
//! raises the limit to `maxclients` plus the descriptors it keeps for
//! itself ([`engine::Config::reserved_fds`]); when the system will not go
//! that far, `maxclients` comes down to what fits, so that a client over
//! the limit is told "max number of clients reached" instead of waiting
//! in the listen backlog for an accept that keeps failing. CONFIG SET
//! maxclients goes through the same raise ([`raise_for_engine`]) and is
//! refused when it cannot be met.

use std::io;

/// What [`raise`] managed.
pub struct Raised {
    /// The soft limit before.
    pub was: u64,
    /// The soft limit now in force.
    pub now: u64,
    /// Why it is below what was asked, when it is.
    pub refused: Option<io::Error>,
}

/// Raise the soft (and, if need be and allowed, the hard) open-file limit
/// to `want`, or as close to it as the system lets this process go. Never
/// lowers it. Without privilege the hard limit is the ceiling; with
/// `CAP_SYS_RESOURCE` the kernel's `fs.nr_open` is.
pub fn raise(want: u64) -> io::Result<Raised> {
    let (was, hard) = get()?;
    if was >= want {
        return Ok(Raised {
            was,
            now: was,
            refused: None,
        });
    }
    let refused = match set(want, hard.max(want)) {
        Ok(()) => {
            return Ok(Raised {
                was,
                now: want,
                refused: None,
            });
        }
        Err(e) => e,
    };
    // Second best: as far as the kernel allows (only privilege gets past
    // the hard limit), then the hard limit itself (always allowed).
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    for ceiling in nr_open.into_iter().chain([hard]) {
        let best = ceiling.min(want);
        if best > was && set(best, hard.max(best)).is_ok() {
            return Ok(Raised {
                was,
                now: best,
                refused: Some(refused),
            });
        }
    }
    Ok(Raised {
        was,
        now: was,
        refused: Some(refused),
    })
}

/// The engine's hook ([`engine::Engine::set_file_limit`]): raise towards
/// `want` and say what is in force (0 when the limit cannot be read,
/// which refuses any raise of `maxclients`).
pub fn raise_for_engine(want: u64) -> u64 {
    raise(want).map_or(0, |r| r.now)
}

fn get() -> io::Result<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into `lim`, valid for writes.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok((lim.rlim_cur, lim.rlim_max))
}

fn set(soft: u64, hard: u64) -> io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: setrlimit reads one rlimit from `lim`, valid for reads.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
