//! Resource limits on a cgroup of ours (`harn_core::limits`): set through cgroup v2's
//! controllers where our part of the hierarchy has them, else through the cgroup v1
//! hierarchies a hybrid machine mounts them on (a directory of the same name in each, which
//! the child joins too); and read back, once its processes ended, as what the kernel counted
//! (OOM kills, refused forks). What no hierarchy offers is said, never pretended.

use harn_core::limits::{LimitReached, ResourceLimits};
use std::path::{Path, PathBuf};

/// A controller harn sets limits through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Controller {
    Memory,
    Pids,
    Cpu,
}

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Pids => "pids",
            Controller::Cpu => "cpu",
        }
    }

    /// Whether `limits` asks anything of this controller.
    fn wanted(self, limits: &ResourceLimits) -> bool {
        match self {
            Controller::Memory => limits.memory.is_some(),
            Controller::Pids => limits.tasks.is_some(),
            Controller::Cpu => limits.cpu_weight.is_some(),
        }
    }
}

const CONTROLLERS: [Controller; 3] = [Controller::Memory, Controller::Pids, Controller::Cpu];

/// The limits set on one cgroup (a run segment's, a harness run's), and where.
#[derive(Debug, Default)]
pub struct Bounded {
    limits: ResourceLimits,
    /// Where each controller's limits were written: the v2 leaf, or a v1 directory.
    set: Vec<(Controller, PathBuf)>,
    /// The v1 directories made for this cgroup, which the child joins and which are
    /// removed at the end.
    v1: Vec<PathBuf>,
    /// What could not be enforced, in words.
    pub unenforced: Vec<String>,
}

impl Bounded {
    /// Sets `limits` on the v2 cgroup `leaf` (made by the caller, holding no process yet),
    /// enabling the controllers in its parent where our hierarchy delegates them; each one v2
    /// does not offer here is set on a directory `name` below our own cgroup in the v1
    /// hierarchy that has it.
    pub fn apply(leaf: Option<&Path>, name: &str, limits: &ResourceLimits) -> Bounded {
        let mut b = Bounded { limits: *limits, ..Bounded::default() };
        if let Some(parent) = leaf.and_then(Path::parent) {
            // The parent holds no process of its own (only run cgroups), so it may hand the
            // controllers down when our own cgroup has them.
            // One controller at a time: a write naming one the parent lacks fails whole.
            for c in CONTROLLERS.into_iter().filter(|c| c.wanted(limits)) {
                let _ =
                    std::fs::write(parent.join("cgroup.subtree_control"), format!("+{}", c.name()));
            }
        }
        for c in CONTROLLERS.into_iter().filter(|c| c.wanted(limits)) {
            let v2 = leaf.filter(|l| offered_v2(l, c));
            let dir = match v2 {
                Some(l) => Ok(l.to_owned()),
                None => v1_dir(c, name),
            };
            let written = dir.and_then(|dir| match write_limits(&dir, c, limits, v2.is_some()) {
                Ok(()) => Ok(dir),
                Err(why) => {
                    // A v1 directory made for a limit that could not be set is not kept.
                    if v2.is_none() && !b.v1.contains(&dir) {
                        let _ = std::fs::remove_dir(&dir);
                    }
                    Err(why)
                }
            });
            match written {
                Ok(dir) => {
                    if v2.is_none() && !b.v1.contains(&dir) {
                        b.v1.push(dir.clone());
                    }
                    b.set.push((c, dir));
                }
                Err(why) => b.unenforced.push(format!("{} limit: {why}", c.name())),
            }
        }
        b
    }

    /// The v1 directories the child must join (write its pid to `cgroup.procs`) besides its
    /// v2 cgroup.
    pub fn joins(&self) -> &[PathBuf] {
        &self.v1
    }

    /// True when a cgroup holds the task limit.
    pub fn holds_tasks(&self) -> bool {
        self.set.iter().any(|(c, _)| *c == Controller::Pids)
    }

    /// What was set, in a few words (`memory 256M, tasks 64, cpu weight 100 (cgroup v1)`).
    pub fn summary(&self) -> Option<String> {
        if self.set.is_empty() {
            return None;
        }
        let l = &self.limits;
        let mut parts = Vec::new();
        for (c, _) in &self.set {
            parts.push(match c {
                Controller::Memory => {
                    format!("memory {}", harn_core::limits::show_bytes(l.memory.unwrap_or(0)))
                }
                Controller::Pids => format!("tasks {}", l.tasks.unwrap_or(0)),
                Controller::Cpu => format!("cpu weight {}", l.cpu_weight.unwrap_or(0)),
            });
        }
        let how = if self.v1.is_empty() { "cgroup v2" } else { "cgroup v1" };
        Some(format!("{} ({how})", parts.join(", ")))
    }

    /// What the kernel counted against these limits so far.
    pub fn reached(&self) -> Vec<LimitReached> {
        let (mut oom_kills, mut refused) = (0, 0);
        for (c, dir) in &self.set {
            let v1 = self.v1.contains(dir);
            match c {
                Controller::Memory => {
                    let file = if v1 { "memory.oom_control" } else { "memory.events" };
                    oom_kills = counter(&dir.join(file), "oom_kill");
                }
                Controller::Pids => refused = counter(&dir.join("pids.events"), "max"),
                Controller::Cpu => {}
            }
        }
        LimitReached::from_counters(&self.limits, oom_kills, refused)
    }

    /// Removes the v1 directories (once their processes are gone, as the v2 cgroup's end
    /// makes them), and the base directory above them once empty.
    pub fn remove(&self) {
        for dir in &self.v1 {
            let _ = std::fs::remove_dir(dir);
            if let Some(base) = dir.parent() {
                let _ = std::fs::remove_dir(base);
            }
        }
    }
}

/// The directories `name` names below our own cgroup in each v1 hierarchy of a controller
/// harn bounds, where they exist.
pub fn v1_dirs(name: &str) -> Vec<PathBuf> {
    CONTROLLERS
        .iter()
        .filter_map(|c| v1_home(c.name()))
        .map(|(mount, own)| mount.join(own.trim_start_matches('/')).join(name))
        .filter(|dir| dir.is_dir())
        .collect()
}

/// True when the v2 cgroup `leaf` has `c`'s files (its parent hands the controller down).
fn offered_v2(leaf: &Path, c: Controller) -> bool {
    let probe = match c {
        Controller::Memory => "memory.max",
        Controller::Pids => "pids.max",
        Controller::Cpu => "cpu.weight",
    };
    leaf.join(probe).exists()
}

/// Writes `limits`' values for `c` into `dir`.
fn write_limits(dir: &Path, c: Controller, l: &ResourceLimits, v2: bool) -> Result<(), String> {
    let put = |file: &str, value: String| {
        std::fs::write(dir.join(file), &value)
            .map_err(|e| format!("{}: {e}", dir.join(file).display()))
    };
    match (c, v2) {
        (Controller::Memory, true) => {
            put("memory.max", l.memory.unwrap_or(0).to_string())?;
            // No swap beyond the limit, where the machine has swap accounting.
            if dir.join("memory.swap.max").exists() {
                put("memory.swap.max", "0".into())?;
            }
        }
        (Controller::Memory, false) => {
            put("memory.limit_in_bytes", l.memory.unwrap_or(0).to_string())?;
            if dir.join("memory.memsw.limit_in_bytes").exists() {
                put("memory.memsw.limit_in_bytes", l.memory.unwrap_or(0).to_string())?;
            }
        }
        (Controller::Pids, _) => put("pids.max", l.tasks.unwrap_or(0).to_string())?,
        (Controller::Cpu, true) => put("cpu.weight", l.cpu_weight.unwrap_or(100).to_string())?,
        (Controller::Cpu, false) => {
            // v1 shares: 1024 is the default share, as weight 100 is (systemd's mapping).
            let shares = u64::from(l.cpu_weight.unwrap_or(100)) * 1024 / 100;
            put("cpu.shares", shares.max(2).to_string())?;
        }
    }
    Ok(())
}

/// Makes (or finds) the directory `name` below our own cgroup in the v1 hierarchy of `c`.
fn v1_dir(c: Controller, name: &str) -> Result<PathBuf, String> {
    let (mount, own) = v1_home(c.name())
        .ok_or_else(|| format!("no cgroup hierarchy has the {} controller", c.name()))?;
    let dir = mount.join(own.trim_start_matches('/')).join(name);
    // In cgroupfs, below our own cgroup: no symlinks can be planted, and the kernel owns the
    // modes.
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

/// The mount of the v1 hierarchy holding `controller`, and our cgroup in it.
fn v1_home(controller: &str) -> Option<(PathBuf, String)> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mounts.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mut fields = right.split_whitespace();
        let (fstype, options) = (fields.next()?, fields.nth(1)?);
        let has = options.split(',').any(|o| o == controller);
        let mount = left.split_whitespace().nth(4)?;
        (fstype == "cgroup" && has).then(|| PathBuf::from(mount))
    })?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = own.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers.split(',').any(|c| c == controller).then(|| path.to_owned())
    })?;
    Some((mount, path))
}

/// The value of `key` in a `key value` lines file (`memory.events`, `pids.events`), 0 when
/// absent.
fn counter(file: &Path, key: &str) -> u64 {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_read_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("memory.events");
        std::fs::write(&f, "low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n").unwrap();
        assert_eq!(counter(&f, "oom_kill"), 1);
        assert_eq!(counter(&f, "max"), 12);
        assert_eq!(counter(&f, "oom"), 2);
        assert_eq!(counter(&dir.path().join("none"), "max"), 0);
    }
}
