//! How harnesses are held: where a writable cgroup v2 hierarchy exists, each run of a harness gets a
//! fresh cgroup of its own, and a run ends with that cgroup killed and removed, so
//! grandchildren that left the process group (setsid, double fork, daemonized) go too.
//! Without one, process groups are the fallback. Also finds processes of an earlier daemon
//! (orphans) so they are stopped before anything is spawned again.
//!
//! Layout: `<our cgroup>/harn-<hash of root>/<harness>/run-<N>`. A run's cgroup is never
//! reused: on the kernels we run on, a child cloned with `CLONE_INTO_CGROUP` into a cgroup
//! that has had `cgroup.kill` written is killed at birth, so a cgroup that was killed once is
//! only ever removed. The harness's own directory holds no process and is never killed.

use super::paths::Paths;
use crate::os::cgroup;
use crate::os::procfs::is_alive;
use harn_core::hash::fnv64;
use harn_core::ids::Id;
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Environment variable naming the harness a process belongs to (inherited by its
/// descendants, which lets a restarted daemon find processes of an earlier one).
pub const HARNESS_ENV: &str = "HARN_HARNESS";
/// Environment variable naming the coordination root of that harness.
pub const ROOT_ENV: &str = "HARN_ROOT";

/// How a root's harnesses are contained.
#[derive(Clone, Debug)]
pub struct HarnessCgroups {
    /// `<cgroup2 mount><our cgroup>/harn-<hash of root>`, when it could be created.
    base: Option<PathBuf>,
    /// Where an earlier daemon of this root kept its cgroups, when that was elsewhere (it
    /// ran from another cgroup: another login session, another service).
    earlier_base: Option<PathBuf>,
    /// Why the hint naming the earlier base was not trusted, for the daemon's log.
    hint_refused: Option<String>,
    root: PathBuf,
}

/// The file under `.harnery/harness/` that names the cgroup directory in use, so the next
/// daemon finds processes left there even when it runs from another cgroup.
const BASE_HINT: &str = "cgroup.path";

/// How many fresh names one run number may take when earlier cgroups of it are still there.
const FRESH_NAME_TRIES: u32 = 16;

/// The name of this root's cgroup directory: `harn-<hash of the root's path>`.
fn base_name(root: &Path) -> String {
    format!("harn-{:016x}", fnv64(root.as_os_str().as_encoded_bytes()))
}

impl HarnessCgroups {
    /// Finds a writable cgroup v2 hierarchy for `paths.root`, or settles for process groups.
    pub fn detect(paths: &Paths) -> HarnessCgroups {
        let found = cgroup::home();
        let base = found.as_ref().and_then(|(_, home)| {
            let base = home.join(base_name(&paths.root));
            // In the cgroup v2 hierarchy below our own cgroup, not under `.harnery/`: cgroupfs
            // holds no symlinks and its modes are the kernel's, so `private` has no part here.
            std::fs::create_dir_all(&base).ok().map(|()| base)
        });
        let hint_path = paths.dir.join(BASE_HINT);
        let (earlier_base, hint_refused) = match &found {
            Some((mount, home)) => match trusted_hint(&paths.root, &hint_path, mount, home) {
                Ok(Some(p)) if Some(&p) != base.as_ref() => (Some(p), None),
                Ok(_) => (None, None),
                Err(why) => (None, Some(why)),
            },
            None => (None, None),
        };
        if let Some(b) = &base {
            // A hint only: losing it costs the cross-cgroup search, not correctness (the
            // environment markers still find every process).
            let text = b.as_os_str().as_encoded_bytes();
            let _ = crate::os::private::replace_below(&paths.root, &hint_path, text);
        }
        HarnessCgroups { base, earlier_base, hint_refused, root: paths.root.clone() }
    }

    /// The same cgroups as [`HarnessCgroups::detect`] would use, found without creating or
    /// writing anything: for read-only verbs that look for what a daemon left running.
    pub fn observe(paths: &Paths) -> HarnessCgroups {
        let found = cgroup::home();
        let base = found
            .as_ref()
            .map(|(_, home)| home.join(base_name(&paths.root)))
            .filter(|b| b.is_dir());
        let hint_path = paths.dir.join(BASE_HINT);
        let earlier_base = found.as_ref().and_then(|(mount, home)| {
            trusted_hint(&paths.root, &hint_path, mount, home)
                .ok()
                .flatten()
                .filter(|p| Some(p) != base.as_ref())
        });
        HarnessCgroups { base, earlier_base, hint_refused: None, root: paths.root.clone() }
    }

    /// Process groups only (for tests and machines without cgroups).
    pub fn process_groups(paths: &Paths) -> HarnessCgroups {
        HarnessCgroups {
            base: None,
            earlier_base: None,
            hint_refused: None,
            root: paths.root.clone(),
        }
    }

    /// Why `cgroup.path` was ignored, when it was.
    pub fn hint_refused(&self) -> Option<&str> {
        self.hint_refused.as_deref()
    }

    /// `cgroup` or `process-group`, as status reports it.
    pub fn kind(&self) -> &'static str {
        if self.base.is_some() {
            "cgroup"
        } else {
            "process-group"
        }
    }

    fn harness_dir(&self, name: &Id) -> Option<PathBuf> {
        self.base.as_ref().map(|b| b.join(name.as_str()))
    }

    /// Creates a fresh cgroup for run `run` of `name` (removing the empty ones of earlier
    /// runs first); `None` without cgroups. The cgroup has never held a process.
    pub fn new_run(&self, name: &Id, run: u64) -> std::io::Result<Option<PathBuf>> {
        let Some(dir) = self.harness_dir(name) else { return Ok(None) };
        // Below the base `detect` made in cgroupfs (see there).
        std::fs::create_dir_all(&dir)?;
        prune(&dir);
        for n in 0..FRESH_NAME_TRIES {
            let leaf = match n {
                0 => dir.join(format!("run-{run}")),
                n => dir.join(format!("run-{run}.{n}")),
            };
            match std::fs::create_dir(&leaf) {
                Ok(()) => return Ok(Some(leaf)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::other(format!("{}: no fresh run cgroup name left", dir.display())))
    }

    /// Opens a run cgroup's `cgroup.procs`, for a child to join itself to before exec.
    pub fn join_handle(leaf: &Path) -> std::io::Result<OwnedFd> {
        let file = std::fs::OpenOptions::new().write(true).open(leaf.join("cgroup.procs"))?;
        Ok(file.into())
    }

    /// Opens a run cgroup's directory, for a child to be cloned into it.
    pub fn dir_handle(leaf: &Path) -> std::io::Result<OwnedFd> {
        use rustix::fs::{open, Mode, OFlags};
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        Ok(open(leaf, flags, Mode::empty())?)
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
                prune(&entry.path());
                let _ = std::fs::remove_dir(entry.path());
            }
        }
        if keep.is_empty() {
            let _ = std::fs::remove_dir(base);
        }
    }

    /// Every process in the harness's cgroups.
    pub fn members(&self, name: &Id) -> Vec<u32> {
        self.harness_dir(name).map(|d| tree_members(&d)).unwrap_or_default()
    }

    /// Kills everything left in one run's cgroup and removes the cgroup once it is empty (a
    /// killed cgroup is never used again). Returns how many processes were there.
    pub fn end_run(leaf: &Path) -> usize {
        cgroup::end(leaf)
    }

    /// Kills everything left in the harness's cgroups. Returns how many processes were there.
    pub fn kill_all(&self, name: &Id) -> usize {
        self.harness_dir(name).map(|d| kill_tree(&d)).unwrap_or(0)
    }

    /// Processes of this root's harnesses that no daemon supervises, whether or not they are
    /// still configured: every member of every harness cgroup of this root (the current base
    /// and an earlier daemon's), and every process of ours whose environment names this root.
    pub fn orphans(&self) -> BTreeMap<Id, Vec<u32>> {
        let mut found: BTreeMap<Id, Vec<u32>> = BTreeMap::new();
        for base in self.base.iter().chain(self.earlier_base.iter()) {
            for entry in std::fs::read_dir(base).into_iter().flatten().flatten() {
                let Some(name) = entry.file_name().to_str().and_then(|n| Id::new(n).ok()) else {
                    continue;
                };
                found.entry(name).or_default().extend(tree_members(&entry.path()));
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
    /// process group, up to `grace` for them to go, then SIGKILL (and the cgroups killed and
    /// removed). Returns, per harness, the pids found and whether the stop had to be forced.
    pub fn reclaim(
        &self,
        grace_of: &(dyn Fn(&Id) -> Duration + Sync),
    ) -> BTreeMap<Id, (Vec<u32>, bool)> {
        let orphans = self.orphans();
        // Each harness's orphans get its own grace, all at once: the boot waits the longest
        // grace among the harnesses that left something, not their sum.
        let left: Vec<u32> = std::thread::scope(|scope| {
            let stopping: Vec<_> = orphans
                .iter()
                .map(|(name, pids)| {
                    let grace = grace_of(name);
                    scope.spawn(move || {
                        crate::os::children::stop(pids, grace, signal_group, is_alive)
                    })
                })
                .collect();
            stopping.into_iter().filter_map(|s| s.join().ok()).flat_map(|s| s.left).collect()
        });
        let mut forced = BTreeMap::new();
        for (name, pids) in &orphans {
            let left: Vec<u32> = pids.iter().copied().filter(|p| left.contains(p)).collect();
            for base in self.base.iter().chain(self.earlier_base.iter()) {
                kill_tree(&base.join(name.as_str()));
            }
            wait_gone(pids, Duration::from_secs(5));
            for base in self.base.iter().chain(self.earlier_base.iter()) {
                prune(&base.join(name.as_str()));
            }
            forced.insert(name.clone(), (pids.clone(), !left.is_empty()));
        }
        forced
    }
}

/// Removes the run cgroups below `dir` that are empty (and any a child made inside them).
fn prune(dir: &Path) {
    for leaf in cgroup::children(dir) {
        cgroup::remove(&leaf);
    }
}

/// Every process in a harness's cgroups (its directory and its run cgroups, and below).
fn tree_members(dir: &Path) -> Vec<u32> {
    cgroup::members(dir)
}

/// Kills every process of a harness's cgroups; returns how many there were.
fn kill_tree(dir: &Path) -> usize {
    cgroup::kill(dir)
}

/// The earlier base `cgroup.path` names, if it may be trusted: read without following a
/// symlink, an absolute plain path directly below this daemon's own cgroup `home` (so a hint
/// can never aim the daemon at a cgroup elsewhere that someone else's processes were put in,
/// however it is named),
/// named as harn names this root's cgroup, reached from the mount without following a
/// symlink, and a cgroup. Anything else is refused with the reason, and never acted on; the
/// processes an earlier daemon in another cgroup left are still found by their markers.
fn trusted_hint(
    root: &Path,
    hint: &Path,
    mount: &Path,
    home: &Path,
) -> Result<Option<PathBuf>, String> {
    let refuse = |why: &str| Err(format!("ignoring {}: {why}", hint.display()));
    let bytes = match crate::os::private::read_below(root, hint) {
        Ok(Some(b)) if b.len() <= 4096 => b,
        Ok(Some(_)) => return refuse("too long for a path"),
        Ok(None) => return Ok(None),
        Err(e) => return Err(format!("ignoring {e}")),
    };
    let Ok(text) = std::str::from_utf8(&bytes) else { return refuse("not UTF-8") };
    let named = PathBuf::from(text.trim());
    if named.file_name().and_then(|n| n.to_str()) != Some(base_name(root).as_str()) {
        return refuse(&format!("{} is not a cgroup harn made for this root", named.display()));
    }
    if named.parent() != Some(home) {
        return refuse(&format!(
            "{} is not directly below this daemon's own cgroup {}",
            named.display(),
            home.display()
        ));
    }
    cgroup::trusted(&named, mount).map_err(|why| format!("ignoring {}: {why}", hint.display()))
}

/// Processes of our user (other than us and our ancestors, such as `harn harness up` run
/// inside a harness) whose environment says they belong to a harness of `root`.
fn marked_processes(root: &Path) -> Vec<(Id, u32)> {
    let root_marker = format!("{ROOT_ENV}={}", root.display());
    let name_prefix = format!("{HARNESS_ENV}=");
    let found = crate::os::procfs::ours_where(|vars| {
        if !vars.contains(&root_marker.as_bytes()) {
            return None;
        }
        vars.iter().find_map(|v| {
            let v = std::str::from_utf8(v).ok()?;
            v.strip_prefix(&name_prefix).and_then(|n| Id::new(n).ok())
        })
    });
    found.into_iter().map(|(pid, name)| (name, pid)).collect()
}

fn signal_group(pid: u32, sig: rustix::process::Signal) -> bool {
    let Some(p) = rustix::process::Pid::from_raw(pid as i32) else { return false };
    // The pid leads its group when it is a harness's main process; a grandchild in another
    // group is signalled directly.
    rustix::process::kill_process_group(p, sig).is_ok()
        || rustix::process::kill_process(p, sig).is_ok()
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
