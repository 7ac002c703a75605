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

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (systemd and most shells start programs
/// at 1,024 soft). Returns the limits before and after, for the log.
pub fn raise_limit() -> (Option<u64>, Option<u64>) {
    let before = getrlimit(Resource::Nofile);
    if before.current != before.maximum {
        let raised = Rlimit { current: before.maximum, maximum: before.maximum };
        let _ = setrlimit(Resource::Nofile, raised);
    }
    (before.current, getrlimit(Resource::Nofile).current)
}

/// How many descriptors this process has open, counted in `/proc/self/fd`.
fn open_count() -> Option<u64> {
    let dir = std::fs::read_dir("/proc/self/fd").ok()?;
    // The directory's own descriptor is counted too; the difference of one is in the reserve.
    Some(dir.count() as u64)
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
