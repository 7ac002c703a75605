//! Starting the daemon detached (`harn harness up`) and telling when it has exited.

use super::paths::Paths;
use std::fs::OpenOptions;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Names the descriptor on which a daemon `up` started says why it could not start: its
/// log may be where a full disk put nothing.
pub const REPORT_ENV: &str = "HARN_DAEMON_REPORT_FD";

/// The descriptor the report goes to in the daemon.
const REPORT_FD: i32 = 3;

/// Starts `harn harness daemon` in a session of its own, its output appended to
/// `daemon.log`, so it outlives the terminal and the `up` process. Also returns the read
/// end of the pipe on which the daemon says why it stopped before it was ready.
pub fn spawn_daemon(paths: &Paths, config: &Path) -> std::io::Result<(Child, OwnedFd)> {
    let (report, report_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    rustix::fs::fcntl_setfl(&report, rustix::fs::OFlags::NONBLOCK)?;
    let raw = report_w.as_raw_fd();
    let log = crate::os::private::append_below(&paths.root, &paths.daemon_log())?;
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg("harness").arg("daemon").arg("--root").arg(&paths.root).arg("--config").arg(config);
    cmd.current_dir(&paths.root);
    cmd.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
    // A detached daemon reports to its log, not to a service manager that started `up`.
    cmd.env_remove("NOTIFY_SOCKET").env_remove("WATCHDOG_USEC").env_remove("WATCHDOG_PID");
    cmd.env(REPORT_ENV, REPORT_FD.to_string());
    // SAFETY: runs in the forked child before exec; setsid(2), dup2(2) and fcntl(2) are
    // async-signal-safe. The report's write end becomes descriptor 3, kept across exec.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::setsid().map_err(std::io::Error::from)?;
            if libc::dup2(raw, REPORT_FD) < 0 || libc::fcntl(REPORT_FD, libc::F_SETFD, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    drop(report_w);
    Ok((child, report))
}

/// In the daemon: the descriptor `up` gave it for a failed start, taken out of the
/// environment (so no harness inherits the name) and closed on exec (so none inherits it).
pub fn take_report() -> Option<OwnedFd> {
    let fd = std::env::var(REPORT_ENV).ok()?;
    // No thread exists yet (the daemon's first act), so changing the environment is safe.
    std::env::remove_var(REPORT_ENV);
    if fd != REPORT_FD.to_string() {
        return None;
    }
    // SAFETY: descriptor 3 was made for this by `spawn_daemon`; it is checked to be a pipe
    // before it is used, and nothing else in this process owns it.
    let owned = unsafe { OwnedFd::from_raw_fd(REPORT_FD) };
    let stat = rustix::fs::fstat(&owned).ok()?;
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::Fifo {
        std::mem::forget(owned);
        return None;
    }
    rustix::io::fcntl_setfd(&owned, rustix::io::FdFlags::CLOEXEC).ok()?;
    Some(owned)
}

/// What a daemon said on its report pipe before it exited.
pub fn read_report(report: OwnedFd) -> String {
    use std::io::Read;
    let mut said = String::new();
    let _ = std::fs::File::from(report).take(64 << 10).read_to_string(&mut said);
    said.trim().to_owned()
}

/// True when no daemon holds the root's lock (it never ran, or it has exited).
pub fn lock_is_free(paths: &Paths) -> bool {
    let file = match OpenOptions::new().read(true).open(paths.lock()) {
        Ok(f) => f,
        Err(_) => return true,
    };
    match file.try_lock() {
        Ok(()) => {
            let _ = file.unlock();
            true
        }
        Err(_) => false,
    }
}

/// Rotates `daemon.log` once it holds `rotation.max_file_bytes`, when it is where this
/// process's output goes (a detached daemon): the old file becomes `daemon.log.1`, and
/// standard output and error are pointed at a new one. A daemon whose output goes elsewhere
/// (a terminal, a service manager's journal) leaves the file alone. Returns whether it did.
pub fn rotate_log_if_full(
    paths: &Paths,
    rotation: crate::os::logs::Rotation,
) -> std::io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let stderr = rustix::fs::fstat(rustix::stdio::stderr())?;
    let log = match std::fs::symlink_metadata(paths.daemon_log()) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let ours = log.dev() == stderr.st_dev && log.ino() == stderr.st_ino;
    if !ours || log.len() < rotation.max_file_bytes {
        return Ok(false);
    }
    crate::os::logs::rotate_files(&paths.root, &paths.daemon_log(), rotation.keep)?;
    let fresh = crate::os::private::append_below(&paths.root, &paths.daemon_log())?;
    rustix::stdio::dup2_stdout(&fresh)?;
    rustix::stdio::dup2_stderr(&fresh)?;
    Ok(true)
}
