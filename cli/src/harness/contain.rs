//! Containment: where a writable cgroup v2 hierarchy exists, each harness gets a cgroup of its
//! own and a run ends with the whole cgroup killed, so grandchildren that left the process
//! group (setsid, double fork, daemonized) go too. Without one, process groups are the
//! fallback. Also finds processes of an earlier daemon (orphans) so they are stopped before
//! anything is spawned again.

use super::paths::Paths;
use super::spawner::{HARNESS_ENV, ROOT_ENV};
use harn_core::hash::fnv64;
use harn_core::ids::Id;
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How a root's harnesses are contained.
#[derive(Clone, Debug)]
pub struct Containment {
    /// `<cgroup2 mount><our cgroup>/harn-<hash of root>`, when it could be created.
    base: Option<PathBuf>,
    /// Where an earlier daemon of this root kept its cgroups, when that was elsewhere (it
    /// ran from another cgroup: another login session, another service).
    earlier_base: Option<PathBuf>,
    root: PathBuf,
}

/// The file under `.harnery/harness/` that names the cgroup directory in use, so the next
/// daemon finds processes left there even when it runs from another cgroup.
const BASE_HINT: &str = "cgroup.path";

impl Containment {
    /// Finds a writable cgroup v2 hierarchy for `paths.root`, or settles for process groups.
    pub fn detect(paths: &Paths) -> Containment {
        let base = cgroup2_home().and_then(|home| {
            let hash = fnv64(paths.root.as_os_str().as_encoded_bytes());
            let base = home.join(format!("harn-{hash:016x}"));
            std::fs::create_dir_all(&base).ok().map(|()| base)
        });
        let hint = paths.dir.join(BASE_HINT);
        let earlier_base = std::fs::read_to_string(&hint)
            .ok()
            .map(|s| PathBuf::from(s.trim()))
            .filter(|p| Some(p) != base.as_ref() && p.join("cgroup.procs").exists());
        if let Some(b) = &base {
            // A hint only: losing it costs the cross-cgroup search, not correctness (the
            // environment markers still find every process).
            let _ = std::fs::write(&hint, b.display().to_string());
        }
        Containment { base, earlier_base, root: paths.root.clone() }
    }

    /// Process groups only (for tests and machines without cgroups).
    pub fn process_groups(paths: &Paths) -> Containment {
        Containment { base: None, earlier_base: None, root: paths.root.clone() }
    }

    /// `cgroup` or `process-group`, as status reports it.
    pub fn kind(&self) -> &'static str {
        if self.base.is_some() {
            "cgroup"
        } else {
            "process-group"
        }
    }

    fn dir(&self, name: &Id) -> Option<PathBuf> {
        self.base.as_ref().map(|b| b.join(name.as_str()))
    }

    /// Creates the harness's cgroup and opens its `cgroup.procs` for a child to join itself to
    /// before exec; `None` without cgroups.
    pub fn join_handle(&self, name: &Id) -> std::io::Result<Option<OwnedFd>> {
        let Some(dir) = self.dir(name) else { return Ok(None) };
        std::fs::create_dir_all(&dir)?;
        let file = std::fs::OpenOptions::new().write(true).open(dir.join("cgroup.procs"))?;
        Ok(Some(file.into()))
    }

    /// Removes the cgroups of this root that hold no process: those of harnesses no longer
    /// configured (at boot), or all of them and the root's own (at a clean exit). A cgroup
    /// that still holds a process stays; the kernel refuses to remove it.
    pub fn remove_empty(&self, keep: &[Id]) {
        let Some(base) = &self.base else { return };
        let Ok(entries) = std::fs::read_dir(base) else { return };
        for entry in entries.flatten().filter(|e| e.path().is_dir()) {
            let name = entry.file_name();
            if !keep.iter().any(|k| k.as_str() == name.to_string_lossy()) {
                let _ = std::fs::remove_dir(entry.path());
            }
        }
        if keep.is_empty() {
            let _ = std::fs::remove_dir(base);
        }
    }

    /// Creates the harness's cgroup and opens its directory, for a child to be cloned into it;
    /// `None` without cgroups.
    pub fn dir_handle(&self, name: &Id) -> std::io::Result<Option<OwnedFd>> {
        use rustix::fs::{open, Mode, OFlags};
        let Some(dir) = self.dir(name) else { return Ok(None) };
        std::fs::create_dir_all(&dir)?;
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        Ok(Some(open(&dir, flags, Mode::empty())?))
    }

    /// Every process in the harness's cgroup.
    pub fn members(&self, name: &Id) -> Vec<u32> {
        let Some(dir) = self.dir(name) else { return Vec::new() };
        read_pids(&dir.join("cgroup.procs"))
    }

    /// Kills everything left in the harness's cgroup. Returns how many processes were there.
    pub fn kill_all(&self, name: &Id) -> usize {
        let Some(dir) = self.dir(name) else { return 0 };
        let members = read_pids(&dir.join("cgroup.procs"));
        if members.is_empty() {
            return 0;
        }
        if std::fs::write(dir.join("cgroup.kill"), "1").is_err() {
            // Kernels before 5.14 have no cgroup.kill: signal each member instead.
            for pid in &members {
                signal(*pid, rustix::process::Signal::KILL);
            }
        }
        members.len()
    }

    /// Processes of this root's harnesses that no daemon supervises, whether or not they are
    /// still configured: every member of every harness cgroup of this root (the current base
    /// and an earlier daemon's), and every process whose environment names this root.
    pub fn orphans(&self) -> BTreeMap<Id, Vec<u32>> {
        let mut found: BTreeMap<Id, Vec<u32>> = BTreeMap::new();
        for base in self.base.iter().chain(self.earlier_base.iter()) {
            for entry in std::fs::read_dir(base).into_iter().flatten().flatten() {
                let Some(name) = entry.file_name().to_str().and_then(|n| Id::new(n).ok()) else {
                    continue;
                };
                let pids = read_pids(&entry.path().join("cgroup.procs"));
                found.entry(name).or_default().extend(pids);
            }
        }
        for (name, pid) in marked_processes(&self.root) {
            found.entry(name).or_default().push(pid);
        }
        found.retain(|_, pids| {
            pids.sort_unstable();
            pids.dedup();
            !pids.is_empty()
        });
        found
    }

    /// Stops orphans of an earlier daemon before anything is spawned: SIGTERM to each
    /// process group, up to `grace` for them to go, then SIGKILL (and the cgroup killed).
    /// Returns, per harness, the pids found and whether the stop had to be forced.
    pub fn reclaim(&self, grace: Duration) -> BTreeMap<Id, (Vec<u32>, bool)> {
        let orphans = self.orphans();
        for pids in orphans.values() {
            for pid in pids {
                signal_group(*pid, rustix::process::Signal::TERM);
            }
        }
        let started = Instant::now();
        let mut forced = BTreeMap::new();
        for (name, pids) in &orphans {
            let left = wait_gone(pids, grace.saturating_sub(started.elapsed()));
            for pid in &left {
                signal_group(*pid, rustix::process::Signal::KILL);
            }
            self.kill_all(name);
            if let Some(earlier) = &self.earlier_base {
                let _ = std::fs::write(earlier.join(name.as_str()).join("cgroup.kill"), "1");
            }
            wait_gone(pids, Duration::from_secs(5));
            forced.insert(name.clone(), (pids.clone(), !left.is_empty()));
        }
        forced
    }
}

/// Our own cgroup in the writable cgroup v2 hierarchy, if there is one.
fn cgroup2_home() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mounts.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let fstype = right.split_whitespace().next()?;
        (fstype == "cgroup2").then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
    })?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let relative = own.lines().find_map(|l| l.strip_prefix("0::"))?.trim_start_matches('/');
    let home = mount.join(relative);
    home.join("cgroup.procs").exists().then_some(home)
}

fn read_pids(path: &Path) -> Vec<u32> {
    std::fs::read_to_string(path)
        .map(|text| text.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// Processes (other than us) whose environment says they belong to a harness of `root`.
fn marked_processes(root: &Path) -> Vec<(Id, u32)> {
    let ancestors = ancestors();
    let root_marker = format!("{ROOT_ENV}={}", root.display());
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if ancestors.contains(&pid) {
            continue; // Us, or whoever started us (`harn harness up` run inside a harness).
        }
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else { continue };
        let vars: Vec<&[u8]> = environ.split(|&b| b == 0).collect();
        if !vars.contains(&root_marker.as_bytes()) {
            continue;
        }
        let name = vars.iter().find_map(|v| {
            let v = std::str::from_utf8(v).ok()?;
            v.strip_prefix(&format!("{HARNESS_ENV}=")).and_then(|n| Id::new(n).ok())
        });
        if let Some(name) = name {
            found.push((name, pid));
        }
    }
    found
}

/// Our pid and every ancestor's, up to init.
fn ancestors() -> Vec<u32> {
    let mut chain = vec![std::process::id()];
    while chain.len() < 64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", chain[chain.len() - 1]))
            .unwrap_or_default();
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        match ppid {
            Some(p) if p > 1 => chain.push(p),
            _ => break,
        }
    }
    chain
}

fn signal(pid: u32, sig: rustix::process::Signal) {
    if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(p, sig);
    }
}

fn signal_group(pid: u32, sig: rustix::process::Signal) {
    if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
        // The pid leads its group when it is a harness's main process; a grandchild in
        // another group is signalled directly.
        if rustix::process::kill_process_group(p, sig).is_err() {
            let _ = rustix::process::kill_process(p, sig);
        }
    }
}

/// Waits up to `limit` for every pid to be gone (or a zombie); returns those still alive.
fn wait_gone(pids: &[u32], limit: Duration) -> Vec<u32> {
    let started = Instant::now();
    loop {
        let alive: Vec<u32> = pids.iter().copied().filter(|p| is_alive(*p)).collect();
        if alive.is_empty() || started.elapsed() >= limit {
            return alive;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// True when `pid` exists and is not a zombie.
pub fn is_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
        }
    }
}
