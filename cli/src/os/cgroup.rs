//! cgroup v2 primitives shared by the harness daemon and work runs: finding our own cgroup,
//! the processes of a cgroup and everything below it, killing a whole subtree, removing it
//! depth first, and checking that a path a hint names is a cgroup reached without a symlink.
//!
//! A child may create cgroups of its own below the one it was put in (it owns nothing else),
//! so every operation here covers the subtree: `cgroup.kill` kills it recursively, and a
//! cgroup is emptied and removed from the leaves up.

use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

/// Where the cgroup v2 hierarchy is mounted, if it is.
pub fn mount() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mounts.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let fstype = right.split_whitespace().next()?;
        (fstype == "cgroup2").then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
    })
}

/// The cgroup v2 mount and our own cgroup in it, when it is writable by us.
pub fn home() -> Option<(PathBuf, PathBuf)> {
    let mount = mount()?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let relative = own.lines().find_map(|l| l.strip_prefix("0::"))?.trim_start_matches('/');
    let home = mount.join(relative);
    let writable = rustix::fs::access(&home, rustix::fs::Access::WRITE_OK).is_ok();
    (writable && home.join("cgroup.procs").exists()).then_some((mount, home))
}

/// The pids listed in a `cgroup.procs` file.
pub fn read_pids(path: &Path) -> Vec<u32> {
    std::fs::read_to_string(path)
        .map(|text| text.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// The cgroups directly below `dir`.
pub fn children(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect()
}

/// Every process in `dir` and in every cgroup below it.
pub fn members(dir: &Path) -> Vec<u32> {
    let mut pids = read_pids(&dir.join("cgroup.procs"));
    for child in children(dir) {
        pids.extend(members(&child));
    }
    pids
}

/// True while `dir` or a cgroup below it holds a process (`populated` in `cgroup.events`).
pub fn populated(dir: &Path) -> bool {
    match std::fs::read_to_string(dir.join("cgroup.events")) {
        Ok(events) => events.lines().any(|l| l == "populated 1"),
        Err(_) => !members(dir).is_empty(),
    }
}

/// Kills every process in `dir`'s subtree; returns how many there were. `cgroup.kill` is
/// written whatever `dir`'s own `cgroup.procs` says: a child that moved itself into a
/// cgroup of its own below is in the subtree, not in the list.
pub fn kill(dir: &Path) -> usize {
    let found = members(dir);
    if !populated(dir) {
        return found.len();
    }
    if std::fs::write(dir.join("cgroup.kill"), "1").is_err() {
        // Kernels before 5.14 have no cgroup.kill: signal each member instead.
        for pid in &found {
            signal(*pid, rustix::process::Signal::KILL);
        }
    }
    found.len()
}

/// Sends `sig` to every process in `dir`'s subtree; returns how many there were.
pub fn signal_all(dir: &Path, sig: rustix::process::Signal) -> usize {
    let found = members(dir);
    for pid in &found {
        signal(*pid, sig);
    }
    found.len()
}

/// Waits up to `limit` for `dir`'s subtree to hold no process; true when it is empty.
pub fn wait_empty(dir: &Path, limit: Duration) -> bool {
    let started = Instant::now();
    loop {
        if !populated(dir) {
            return true;
        }
        if started.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Removes `dir` and every cgroup below it, leaves first; a cgroup that still holds a process
/// stays (the kernel refuses). True when `dir` is gone.
pub fn remove(dir: &Path) -> bool {
    for child in children(dir) {
        remove(&child);
    }
    std::fs::remove_dir(dir).is_ok() || !dir.exists()
}

/// Kills `dir`'s subtree, waits briefly for it to empty, and removes it (a killed cgroup is
/// never used again). Returns how many processes were there.
pub fn end(dir: &Path) -> usize {
    let killed = kill(dir);
    if killed > 0 || populated(dir) {
        wait_empty(dir, Duration::from_millis(500));
    }
    remove(dir);
    killed
}

/// Checks that `named` is a cgroup harn may act on: an absolute plain path below the cgroup
/// v2 `mount`, reached from it one component at a time without following a symlink, and a
/// cgroup (not a directory elsewhere planted under a cgroup-like name). `Ok(None)` when it no
/// longer exists.
pub fn trusted(named: &Path, mount: &Path) -> Result<Option<PathBuf>, String> {
    let Ok(below) = named.strip_prefix(mount) else {
        return Err(format!("{} is not in the cgroup v2 hierarchy", named.display()));
    };
    if below.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(format!("{} is not a plain path", named.display()));
    }
    let mut dir = crate::os::private::Dir::root(mount).map_err(|e| e.to_string())?;
    for component in below.components() {
        dir = match dir.child(component.as_os_str(), false) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", named.display())),
        };
    }
    let is_cgroup = rustix::fs::fstatfs(dir.fd())
        .is_ok_and(|s| s.f_type as u64 == libc::CGROUP2_SUPER_MAGIC as u64);
    if !is_cgroup {
        return Err(format!("{} is not a cgroup", named.display()));
    }
    Ok(Some(named.to_owned()))
}

fn signal(pid: u32, sig: rustix::process::Signal) {
    if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(p, sig);
    }
}
