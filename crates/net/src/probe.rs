//! Why io_uring cannot be used here, in one phrase for the log: the kernel
//! is too old or lacks it, `kernel.io_uring_disabled` forbids it, or a
//! seccomp filter refuses it.

use std::io;

/// `kernel.io_uring_disabled`: 0 allowed, 1 only for `io_uring_group` /
/// CAP_SYS_ADMIN, 2 disabled. `None` when the sysctl does not exist
/// (kernels before 6.6).
pub(crate) fn sysctl_disabled() -> Option<u8> {
    std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The running kernel's (major, minor).
pub(crate) fn kernel_version() -> Option<(u32, u32)> {
    let text = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    parse_version(&text)
}

fn parse_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.trim().split(['.', '-']);
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor))
}

/// Refuse before trying when the answer is already known.
pub(crate) fn precheck() -> Result<(), String> {
    if sysctl_disabled() == Some(2) {
        return Err("disabled by sysctl kernel.io_uring_disabled=2".into());
    }
    // Multishot recv with a provided-buffer ring appeared in 6.0.
    if let Some((maj, min)) = kernel_version()
        && (maj, min) < (6, 0)
    {
        return Err(format!(
            "kernel {maj}.{min} lacks multishot recv (needs 6.0 or later)"
        ));
    }
    Ok(())
}

/// Turn the error of `io_uring_setup` into the reason to log.
pub(crate) fn explain_setup_error(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOSYS) => "the kernel lacks io_uring (io_uring_setup: ENOSYS)".into(),
        Some(libc::EPERM) => match sysctl_disabled() {
            Some(1) => "kernel.io_uring_disabled=1 and this process is not in \
                        kernel.io_uring_group (io_uring_setup: EPERM)"
                .into(),
            _ => {
                "io_uring_setup refused with EPERM, by a seccomp filter or container policy".into()
            }
        },
        Some(libc::ENOMEM) => "io_uring_setup: ENOMEM, RLIMIT_MEMLOCK may be too low".into(),
        _ => format!("io_uring_setup: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(parse_version("6.18.44-fc-v669\n"), Some((6, 18)));
        assert_eq!(parse_version("5.15.0-91-generic"), Some((5, 15)));
        assert_eq!(parse_version("6.1"), Some((6, 1)));
        assert_eq!(parse_version("junk"), None);
    }

    #[test]
    fn setup_errors_name_the_cause() {
        let e = io::Error::from_raw_os_error(libc::ENOSYS);
        assert!(explain_setup_error(&e).contains("lacks io_uring"));
        let e = io::Error::from_raw_os_error(libc::EPERM);
        assert!(explain_setup_error(&e).contains("EPERM"));
    }
}
