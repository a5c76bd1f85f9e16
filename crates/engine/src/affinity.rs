//! CPU affinity by role, Valkey's `server-cpulist`, `bio-cpulist`,
//! `bgsave-cpulist` and `aof-rewrite-cpulist`: the thread that takes on a
//! role pins itself to that list when it starts.
//!
//! | role | Valkey's | ringkv's threads |
//! |---|---|---|
//! | [`Role::Server`] | main and IO threads | the thread running commands (inline or execution thread), IO threads, and what they start unpinned (replication feeds and link, loaders) |
//! | [`Role::Bio`] | bio threads | `lazyfree`, `aof-bio`, `aof-writer` |
//! | [`Role::Bgsave`] | BGSAVE's child | `rdb-writer` of a snapshot |
//! | [`Role::AofRewrite`] | BGREWRITEAOF's child | `rdb-writer` of an AOF rewrite's base |
//!
//! Without a list, a bio thread keeps the mask the process started with
//! (Valkey's are created before its main thread pins itself) and a save
//! keeps the one it was started under (Valkey's child inherits the main
//! thread's). A list Valkey's parser rejects pins nothing, as in Valkey.
//!
//! The engine does no syscall for this: the binary installs the function
//! that sets a thread's mask ([`install`]); without one (tests) every call
//! is a no-op.

use std::sync::OnceLock;

/// glibc's `CPU_SETSIZE`: CPUs from here on are outside any mask, and
/// ignored as glibc's `CPU_SET` ignores them.
const CPU_SETSIZE: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Server,
    Bio,
    Bgsave,
    AofRewrite,
}

struct Affinity {
    /// Per role (in [`Role`]'s order), the CPUs to pin to.
    lists: [Option<Vec<usize>>; 4],
    /// The mask the process started with.
    original: Vec<usize>,
    /// Sets the calling thread's mask.
    set: fn(&[usize]),
}

static AFFINITY: OnceLock<Affinity> = OnceLock::new();

/// From the configuration's four lists (empty: none); `original` is the
/// process's mask now, `set` pins the calling thread.
pub fn install(config: &crate::Config, original: Vec<usize>, set: fn(&[usize])) {
    let list = |name: &str| parse(&config.get(name).unwrap_or_default());
    let _ = AFFINITY.set(Affinity {
        lists: [
            list("server-cpulist"),
            list("bio-cpulist"),
            list("bgsave-cpulist"),
            list("aof-rewrite-cpulist"),
        ],
        original,
        set,
    });
}

/// Pin the calling thread for `role`.
pub fn pin(role: Role) {
    let Some(a) = AFFINITY.get() else {
        return;
    };
    match &a.lists[role as usize] {
        Some(cpus) => (a.set)(cpus),
        None if role == Role::Bio => (a.set)(&a.original),
        None => {}
    }
}

/// Valkey's `setcpuaffinity` list: comma-separated CPUs and ranges `a-b`
/// with an optional step `a-b:s`; `None` for an empty list or one its
/// parser gives up on (then nothing is pinned).
pub fn parse(list: &str) -> Option<Vec<usize>> {
    if list.is_empty() {
        return None;
    }
    let num = |s: &str| -> Option<usize> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let mut cpus = Vec::new();
    for item in list.split(',') {
        let (range, step) = match item.split_once(':') {
            Some((r, s)) if r.contains('-') => (r, num(s)?),
            Some(_) => return None,
            None => (item, 1),
        };
        if step == 0 {
            return None;
        }
        let (a, b) = match range.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(range)?, num(range)?),
        };
        if a > b {
            return None;
        }
        cpus.extend((a..=b.min(CPU_SETSIZE - 1)).step_by(step));
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn valkeys_cpu_lists() {
        assert_eq!(parse("0"), Some(vec![0]));
        assert_eq!(parse("0,2,3"), Some(vec![0, 2, 3]));
        assert_eq!(parse("0-3"), Some(vec![0, 1, 2, 3]));
        assert_eq!(parse("0-7:2"), Some(vec![0, 2, 4, 6]));
        assert_eq!(parse("1,4-6,8-12:2"), Some(vec![1, 4, 5, 6, 8, 10, 12]));
        // Past the mask's size: ignored, not a huge list.
        assert_eq!(parse("1022-4294967295").map(|c| c.len()), Some(2));
        // What Valkey's parser gives up on: nothing is pinned.
        for bad in [
            "", "a", "3-1", "0-4:0", "1:2", "0-", "-1", "0,,1", "0-3:x", "0 1",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}
