//! What every process a run segment spawns (its workflow, each agent call) gets between fork
//! and exec: it joins the segment's cgroup. Everything is prepared in the parent; the child
//! only makes async-signal-safe system calls on descriptors the closure owns.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

/// A run segment's confinement, shared by its workflow and its agent calls.
#[derive(Clone, Debug, Default)]
pub struct Confine {
    /// The segment's cgroup, when it has one.
    pub cgroup: Option<PathBuf>,
}

impl Confine {
    /// Sets `command` up to start inside the segment's cgroup (with the parent-death signal
    /// every run child gets). Fails when the cgroup exists but cannot be joined: a child
    /// started outside it could outlive the run.
    pub fn apply(&self, command: &mut Command) -> std::io::Result<()> {
        let join: Option<OwnedFd> = match &self.cgroup {
            Some(leaf) => {
                let procs = leaf.join("cgroup.procs");
                Some(std::fs::OpenOptions::new().write(true).open(&procs)?.into())
            }
            None => None,
        };
        // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
        // system calls on memory and descriptors it owns: prctl(PR_SET_PDEATHSIG) and write(2)
        // of "0" to the cgroup's cgroup.procs. A host that dies takes its children with it.
        unsafe {
            command.pre_exec(move || {
                rustix::process::set_parent_process_death_signal(Some(
                    rustix::process::Signal::KILL,
                ))
                .map_err(std::io::Error::from)?;
                if let Some(fd) = &join {
                    let fd = std::os::fd::BorrowedFd::borrow_raw(fd.as_raw_fd());
                    rustix::io::write(fd, b"0").map_err(std::io::Error::from)?;
                }
                Ok(())
            });
        }
        Ok(())
    }
}
