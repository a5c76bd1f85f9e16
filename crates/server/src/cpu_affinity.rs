//! The calling thread's CPU mask (sched_setaffinity / sched_getaffinity),
//! for `engine::affinity`'s `*-cpulist` directives.

/// The CPUs the calling thread may run on now.
pub fn current() -> Vec<usize> {
    // SAFETY: an all-zero cpu_set_t is an empty set; sched_getaffinity(2)
    // fills at most `size_of::<cpu_set_t>()` bytes of it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Pin the calling thread to `cpus` (a failure, e.g. only CPUs this
/// machine lacks, leaves it as it was, as Valkey's does).
pub fn set(cpus: &[usize]) {
    if cpus.is_empty() {
        return;
    }
    // SAFETY: as in `current`; CPU_SET is given indices below CPU_SETSIZE
    // only, and sched_setaffinity(2) reads the set's bytes.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
    }
}
