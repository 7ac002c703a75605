//! File descriptors: the daemon raises its soft limit to the hard one at start, and keeps a
//! reserve for its own files, so running out costs one harness its start, never the daemon
//! (which would leave every child unsupervised).

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// Descriptors kept free for the daemon's own work: `state.json` and its temporary file, the
/// journals, the ledger, the control socket and its connections, readiness probes.
pub const RESERVED: u64 = 128;

/// Descriptors one spawn may need at once: the log, the three pipes of the child's standard
/// streams (both ends until the child has them), the exec report pipe and the cgroup handle.
pub const PER_SPAWN: u64 = 10;

/// The soft limit the daemon started with, which its children get back before exec: a
/// program that uses `select()` or closes every descriptor up to the limit would break or
/// crawl under the raised one. `u64::MAX` until [`raise_limit`] runs.
static ORIGINAL_SOFT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(u64::MAX);

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (systemd and most shells start programs
/// at 1,024 soft). Returns the limits before and after, for the log.
pub fn raise_limit() -> (Option<u64>, Option<u64>) {
    let before = getrlimit(Resource::Nofile);
    if let Some(soft) = before.current {
        ORIGINAL_SOFT.store(soft, std::sync::atomic::Ordering::SeqCst);
    }
    if before.current != before.maximum {
        let raised = Rlimit { current: before.maximum, maximum: before.maximum };
        let _ = setrlimit(Resource::Nofile, raised);
    }
    (before.current, getrlimit(Resource::Nofile).current)
}

/// How many descriptors this process has open, counted in `/proc/self/fd`.
fn open_count() -> Option<u64> {
    // The directory's own descriptor is counted too; the difference of one is in the reserve.
    crate::os::procfs::open_descriptors()
}

/// Refuses a spawn that would leave fewer than [`RESERVED`] descriptors free.
pub fn room_for_spawn() -> Result<(), String> {
    let Some(limit) = getrlimit(Resource::Nofile).current else { return Ok(()) };
    let Some(open) = open_count() else { return Ok(()) };
    if open + PER_SPAWN + RESERVED > limit {
        return Err(format!(
            "too many open files: {open} of the limit of {limit} are open, and {RESERVED} are \
             kept for the daemon's own files (raise the hard limit: LimitNOFILE= in the unit, \
             or ulimit -Hn)"
        ));
    }
    Ok(())
}

/// True when `e` says the process (or the system) ran out of descriptors.
pub fn is_exhaustion(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Gives a child about to exec the soft limit the daemon started with. Only one
/// async-signal-safe system call, so it may run between fork and exec.
pub fn restore_for_child() {
    let soft = ORIGINAL_SOFT.load(std::sync::atomic::Ordering::Relaxed);
    if soft == u64::MAX {
        return;
    }
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit on a local struct; both are async-signal-safe.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur > soft {
            limit.rlim_cur = soft;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}
