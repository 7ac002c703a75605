//! How a run's processes are held and ended: a cgroup of the run segment's own where the
//! machine gives one (`<our cgroup>/harn-work-<hash of root>/<run>.<host pid>`), else only its
//! process groups. Ending a segment kills the whole cgroup, and also every process of ours that
//! still carries the run's `HARN_RUN_ID`, which finds what left the process groups on a machine
//! without cgroups (setsid, a double fork, a daemon). The same ending reaps a run whose host
//! died, from the record it left (`harn_core::work::live`).

use crate::os::cgroup;
use crate::os::limits::Bounded;
use harn_core::hash::fnv64;
use harn_core::ids::Id;
use harn_core::limits::ResourceLimits;
use harn_core::work::containment::Holding;
use harn_core::work::live::LiveRun;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The directory below our cgroup that holds this root's run cgroups.
fn base_name(root: &Path) -> String {
    format!("harn-work-{:016x}", fnv64(root.as_os_str().as_encoded_bytes()))
}

/// A segment's cgroup below our own, `harn-work-<root>/<run>.<host pid>`: the same name in
/// the v2 hierarchy and in each v1 hierarchy that carries a limit.
fn leaf_name(root: &Path, run_id: &str) -> String {
    format!("{}/{run_id}.{}", base_name(root), std::process::id())
}

/// How a run started now on this machine would be held, and why not by a cgroup.
pub fn planned() -> (Holding, Option<String>) {
    match cgroup::home() {
        Some(_) => (Holding::Cgroup, None),
        None => (
            Holding::ProcessGroup,
            Some("no cgroup v2 hierarchy this process may write".to_owned()),
        ),
    }
}

/// One run segment's processes.
pub struct RunHold {
    run_id: String,
    /// The segment's cgroup, when one could be made.
    pub leaf: Option<PathBuf>,
    /// Why there is none, when there is none.
    pub why_not: Option<String>,
    /// The resource limits set on it (in cgroup v1 directories of the same name where v2
    /// does not offer a controller).
    pub bounded: crate::os::limits::Bounded,
}

impl RunHold {
    /// A fresh cgroup for a segment of `run_id` (never used before: a killed cgroup is never
    /// reused) bounded by `limits`, or the process groups alone, with why.
    pub fn create(root: &Path, run_id: &Id, limits: Option<&ResourceLimits>) -> RunHold {
        let made = cgroup::home()
            .ok_or_else(|| "no cgroup v2 hierarchy this process may write".to_owned())
            .and_then(|(_, home)| {
                let leaf = home.join(leaf_name(root, run_id.as_str()));
                let base = leaf.parent().expect("a leaf below a base").to_owned();
                // A leaf of the same name can only be a segment of this run whose host had our
                // pid; whatever it holds is that segment's and goes first.
                if leaf.exists() {
                    cgroup::end(&leaf);
                }
                // The last segment to end removes the base: made again if that happens
                // between the two calls.
                let mut made = Err(std::io::Error::from(std::io::ErrorKind::NotFound));
                for _ in 0..3 {
                    // cgroupfs below our own cgroup, not `.harnery/`: no symlinks can be
                    // planted there and the kernel owns the modes.
                    std::fs::create_dir_all(&base)
                        .map_err(|e| format!("{}: {e}", base.display()))?;
                    made = std::fs::create_dir(&leaf);
                    if !matches!(&made, Err(e) if e.kind() == std::io::ErrorKind::NotFound) {
                        break;
                    }
                }
                made.map_err(|e| format!("{}: {e}", leaf.display()))?;
                Ok(leaf)
            });
        let (leaf, why_not) = match made {
            Ok(leaf) => (Some(leaf), None),
            Err(why) => (None, Some(why)),
        };
        let bounded = match limits {
            Some(l) => Bounded::apply(leaf.as_deref(), &leaf_name(root, run_id.as_str()), l),
            None => Bounded::default(),
        };
        RunHold { run_id: run_id.as_str().to_owned(), leaf, why_not, bounded }
    }

    /// How this segment is held.
    pub fn holding(&self) -> Holding {
        if self.leaf.is_some() {
            Holding::Cgroup
        } else {
            Holding::ProcessGroup
        }
    }

    /// The cgroup's `cgroup.procs`, opened for a child to join itself to before exec.
    pub fn join_handle(&self) -> Option<OwnedFd> {
        let leaf = self.leaf.as_ref()?;
        let file = std::fs::OpenOptions::new().write(true).open(leaf.join("cgroup.procs")).ok()?;
        Some(file.into())
    }

    /// Sends TERM to every process of the segment; returns how many there were.
    pub fn term(&self) -> usize {
        match self.leaf.as_deref() {
            Some(leaf) => cgroup::signal_all(leaf, rustix::process::Signal::TERM),
            None => {
                let found = marked(&self.run_id);
                for &pid in &found {
                    signal(pid, rustix::process::Signal::TERM);
                }
                found.len()
            }
        }
    }

    /// Kills every process of the segment and removes its cgroup; returns how many there were.
    /// Without a cgroup, the processes that still carry the run's `HARN_RUN_ID` are found by
    /// a look through `/proc`; a cgroup holds them all already.
    pub fn end(&self) -> usize {
        let killed = match self.leaf.as_deref() {
            Some(leaf) => {
                let killed = cgroup::end(leaf);
                remove_if_empty(leaf.parent());
                killed
            }
            None => kill_marked(&self.run_id),
        };
        self.bounded.remove();
        killed
    }
}

/// Ends what a run whose host died left: its cgroup, once the path its record names is
/// checked to be one harn made for this root and run; without one (or when it is gone), every
/// process that carries its `HARN_RUN_ID`. Returns how many processes there were.
pub fn reap(root: &Path, live: &LiveRun) -> usize {
    // A remote segment's processes are its job's, on its node: the engine ends them.
    if let Some(job) = &live.job {
        if !crate::work::remote::engine::live(&job.id) {
            return 0;
        }
        crate::work::remote::engine::cancel(&job.id);
        errln!(
            "harn: run {}'s job {} on {} ({}) still ran without its coordinator; it was cancelled",
            live.run_id,
            job.id,
            job.node,
            job.cluster
        );
        return 1;
    }
    if let Some(named) = &live.cgroup {
        match trusted_leaf(root, live, Path::new(named)) {
            Ok(Some(leaf)) => {
                let killed = cgroup::end(&leaf);
                remove_if_empty(leaf.parent());
                return killed;
            }
            Ok(None) => {}
            Err(why) => errln!("harn: warning: the record of run {} names {why}", live.run_id),
        }
    }
    kill_marked(live.run_id.as_str())
}

/// How many processes a run whose host died left running, as [`reap`] would find them,
/// without touching any.
pub fn left_behind(root: &Path, live: &LiveRun) -> usize {
    // A remote segment's job may still run: counted as one without asking the engine, since
    // a read verb never waits on a cluster (the reaper asks, and cancels it).
    if live.job.is_some() {
        return 1;
    }
    if let Some(named) = &live.cgroup {
        if let Ok(Some(leaf)) = trusted_leaf(root, live, Path::new(named)) {
            return cgroup::members(&leaf).len();
        }
    }
    marked(live.run_id.as_str()).len()
}

/// Removes this root's `harn-work-…` cgroup once no segment's cgroup is left in it (the
/// kernel refuses to remove one that still has children or processes).
fn remove_if_empty(base: Option<&Path>) {
    if let Some(base) = base {
        let _ = std::fs::remove_dir(base);
    }
}

/// The cgroup a live record names, if harn may act on it: a cgroup reached without a symlink,
/// named `<run>.<pid>` for this record's run, in this root's `harn-work-` directory.
fn trusted_leaf(root: &Path, live: &LiveRun, named: &Path) -> Result<Option<PathBuf>, String> {
    let Some((mount, _)) = cgroup::home().or_else(mount_only) else { return Ok(None) };
    let leaf_ok = named
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.strip_prefix(live.run_id.as_str()).is_some_and(|r| r.starts_with('.')));
    let base_ok = named
        .parent()
        .and_then(|p| p.file_name())
        .is_some_and(|n| n.to_str() == Some(base_name(root).as_str()));
    if !leaf_ok || !base_ok {
        return Err(format!("{}, not a cgroup harn made for this run", named.display()));
    }
    cgroup::trusted(named, &mount)
}

/// The cgroup v2 mount, when our own cgroup is not writable (a reaper in another session).
fn mount_only() -> Option<(PathBuf, PathBuf)> {
    let mounts = crate::os::procfs::mountinfo()?;
    mounts.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let mount = PathBuf::from(left.split_whitespace().nth(4)?);
        (right.split_whitespace().next()? == "cgroup2").then(|| (mount.clone(), mount))
    })
}

/// Kills the processes that carry `run`'s `HARN_RUN_ID`, giving them a moment to go.
fn kill_marked(run: &str) -> usize {
    let found = marked(run);
    for &pid in &found {
        signal(pid, rustix::process::Signal::KILL);
    }
    let started = std::time::Instant::now();
    while found.iter().any(|&p| crate::os::procfs::is_alive(p))
        && started.elapsed() < Duration::from_millis(500)
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    found.len()
}

/// Processes of our user, other than us and our ancestors, whose environment carries
/// `HARN_RUN_ID=<run>`.
fn marked(run: &str) -> Vec<u32> {
    let marker = format!("HARN_RUN_ID={run}");
    let found =
        crate::os::procfs::ours_where(|vars| vars.contains(&marker.as_bytes()).then_some(()));
    found.into_iter().map(|(pid, ())| pid).filter(|&pid| crate::os::procfs::is_alive(pid)).collect()
}

fn signal(pid: u32, sig: rustix::process::Signal) {
    if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(p, sig);
    }
}

/// What every command that writes to the root does first (decision record 0012: reads stay
/// read-only): reaps the runs whose host died, so what such a run left running is stopped
/// by the next writer, not only by the next run, retry, cancel or tick of its item. A root
/// without a ledger has nothing to reap; a failure to reap is said and the command goes on.
pub fn reap_before_writing(store: &mut crate::os::store::Store) {
    sweep_leftovers(store.root());
    if !store.root().join(harn_core::layout::RUNNING).is_dir() {
        return;
    }
    match store.recover(reap) {
        Ok(recovered) => {
            for (run, killed) in &recovered.reaped {
                errln!("harn: run {run} had lost its host; {killed} of its processes were stopped");
            }
        }
        Err(e) => errln!("harn: warning: the runs whose host died could not be reaped: {e}"),
    }
}

/// Removes the empty cgroups this root's segments left when their host died (v2, and the v1
/// directories of their limits, which only the segment's own end removes), then the root's
/// `harn-work-` directories once empty. A segment's cgroup is `<run>.<host pid>`: one whose
/// host lives is left alone, and the kernel refuses to remove one that still holds a process.
pub fn sweep_leftovers(root: &Path) {
    let base = base_name(root);
    let mut bases: Vec<PathBuf> = crate::os::limits::v1_dirs(&base);
    if let Some((_, home)) = cgroup::home() {
        bases.push(home.join(&base));
    }
    for dir in bases {
        for leaf in cgroup::children(&dir) {
            let host = leaf.file_name().and_then(|n| n.to_str()).and_then(|n| n.rsplit_once('.'));
            let host = host.and_then(|(_, pid)| pid.parse::<u32>().ok());
            let alive = host.is_none_or(crate::os::procfs::exists);
            if !alive {
                let _ = std::fs::remove_dir(&leaf);
            }
        }
        remove_if_empty(Some(&dir));
    }
}
