//! Starting the daemon detached (`harn harness up`) and telling when it has exited.

use super::paths::Paths;
use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Starts `harn harness daemon` in a session of its own, its output appended to
/// `daemon.log`, so it outlives the terminal and the `up` process.
pub fn spawn_daemon(paths: &Paths, config: &Path) -> std::io::Result<Child> {
    let log = crate::os::private::append_below(&paths.root, &paths.daemon_log())?;
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg("harness").arg("daemon").arg("--root").arg(&paths.root).arg("--config").arg(config);
    cmd.current_dir(&paths.root);
    cmd.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
    // A detached daemon reports to its log, not to a service manager that started `up`.
    cmd.env_remove("NOTIFY_SOCKET").env_remove("WATCHDOG_USEC").env_remove("WATCHDOG_PID");
    // SAFETY: runs in the forked child before exec; setsid(2) is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| rustix::process::setsid().map(drop).map_err(std::io::Error::from));
    }
    cmd.spawn()
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
