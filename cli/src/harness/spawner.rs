//! The real `Spawner`: each child in its own session and process group, its stdout and
//! stderr drained into its rotating log, signals sent to the whole group.

use super::contain::{HarnessCgroups, HARNESS_ENV, ROOT_ENV};
use super::fork;
use super::paths::Paths;
use crate::os::identity::Identity;
use crate::os::limits::Bounded;
use crate::os::logs::{LogPump, LogSink, Rotation};
use harn_core::env::Clock;
use harn_core::env::{Pid, Signal, SpawnError, SpawnSpec, Spawner};
use harn_core::harness::logline::Stream;
use harn_core::ids::Id;
use harn_core::limits::LimitReached;
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

/// Starts and signals real children.
pub struct RealSpawner {
    paths: Paths,
    rotation: Rotation,
    sinks: BTreeMap<Id, Arc<Mutex<LogSink>>>,
    /// Extra environment per harness (the notify socket), set by the daemon from config.
    extra_env: BTreeMap<Id, Vec<(String, String)>>,
    contain: HarnessCgroups,
    /// The run cgroup of each run's main process, for SIGKILL to reach all of it.
    owners: BTreeMap<Pid, Option<PathBuf>>,
    /// The resource limits set on each run's cgroup, by its main process, to read what the
    /// kernel counted once it ended.
    bounds: BTreeMap<Pid, Bounded>,
    pump: LogPump,
    /// Ready files, removed before each start so a stale one cannot vouch for a new run.
    ready_files: BTreeMap<Id, PathBuf>,
    /// The terminal of each terminal harness's latest run, and which run's main process
    /// holds it.
    terminals: BTreeMap<Id, (Pid, super::terminal::Terminal)>,
}

impl RealSpawner {
    /// A spawner for the harnesses of `paths.root`.
    pub fn new(
        paths: Paths,
        rotation: Rotation,
        contain: HarnessCgroups,
    ) -> std::io::Result<RealSpawner> {
        let (sinks, extra_env, owners) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
        let pump = LogPump::start()?;
        let (ready_files, terminals) = (BTreeMap::new(), BTreeMap::new());
        Ok(RealSpawner {
            paths,
            rotation,
            sinks,
            extra_env,
            contain,
            owners,
            bounds: BTreeMap::new(),
            pump,
            ready_files,
            terminals,
        })
    }

    /// The terminal of `name`'s live run, when it is a terminal harness with one.
    pub fn terminal(&self, name: &Id) -> Option<&super::terminal::Terminal> {
        self.terminals.get(name).map(|(_, t)| t)
    }

    /// Rotates every harness log (current and future) at these limits from now on.
    pub fn set_rotation(&mut self, rotation: Rotation) {
        self.rotation = rotation;
        for sink in self.sinks.values() {
            sink.lock().unwrap_or_else(|e| e.into_inner()).set_rotation(rotation);
        }
    }

    /// How children are contained.
    pub fn containment(&self) -> &HarnessCgroups {
        &self.contain
    }

    /// A run's main process was reaped: kill whatever it left behind in its cgroup and remove
    /// the cgroup, so no process of one run outlives it or meets the next. Returns how many
    /// were left.
    pub fn run_ended(&mut self, pid: Pid) -> (usize, Vec<LimitReached>) {
        // What the kernel counted against the run's limits, read before its cgroup goes.
        let bounded = self.bounds.remove(&pid);
        let reached = bounded.as_ref().map(Bounded::reached).unwrap_or_default();
        let left = match self.owners.remove(&pid).flatten() {
            Some(leaf) => HarnessCgroups::end_run(&leaf),
            None => 0,
        };
        if let Some(b) = bounded {
            b.remove();
        }
        (left, reached)
    }

    /// Sets the file whose appearance shows `name` is ready (`None`: readiness is not a file).
    pub fn set_ready_file(&mut self, name: &Id, file: Option<PathBuf>) {
        match file {
            Some(f) => self.ready_files.insert(name.clone(), f),
            None => self.ready_files.remove(name),
        };
    }

    /// Sets variables added to every later spawn of `name`.
    pub fn set_extra_env(&mut self, name: &Id, vars: Vec<(String, String)>) {
        self.extra_env.insert(name.clone(), vars);
    }

    fn sink(&mut self, name: &Id) -> std::io::Result<Arc<Mutex<LogSink>>> {
        if let Some(s) = self.sinks.get(name) {
            return Ok(s.clone());
        }
        let sink = LogSink::open(&self.paths.root, self.paths.log(name), self.rotation)?;
        self.sinks.insert(name.clone(), sink.clone());
        Ok(sink)
    }

    /// Writes a line of the daemon's own into a harness's log (spawn failures, stops).
    pub fn note(&mut self, name: &Id, line: &str) {
        if let Ok(sink) = self.sink(name) {
            let wall = crate::os::clock::RealClock::new().wall();
            let line = harn_core::harness::logline::format(wall, Stream::Harn, line.as_bytes());
            let _ = sink.lock().map(|mut s| s.write(&line));
        }
    }

    fn command(
        &self,
        name: &Id,
        spec: &SpawnSpec,
        cwd: &std::path::Path,
        cgroups: Vec<i32>,
        identity: Option<Identity>,
        tty: Option<&std::os::fd::OwnedFd>,
    ) -> Command {
        let mut cmd = Command::new(&spec.argv[0]);
        cmd.args(&spec.argv[1..]);
        let cwd_c = std::ffi::CString::new(cwd.as_os_str().as_encoded_bytes()).ok();
        cmd.current_dir(cwd);
        for var in fork::MANAGER_ONLY {
            cmd.env_remove(var);
        }
        for (k, v) in identity.iter().flat_map(Identity::login_env) {
            cmd.env(k, v);
        }
        cmd.envs(&spec.env);
        cmd.env(HARNESS_ENV, name.as_str());
        cmd.env(ROOT_ENV, &self.paths.root);
        for (k, v) in self.extra_env.get(name).into_iter().flatten() {
            cmd.env(k, v);
        }
        match tty.map(|slave| (slave.try_clone(), slave.try_clone(), slave.try_clone())) {
            Some((Ok(i), Ok(o), Ok(e))) => {
                cmd.stdin(Stdio::from(i)).stdout(Stdio::from(o)).stderr(Stdio::from(e));
                if !spec.env.contains_key("TERM") {
                    cmd.env("TERM", "xterm-256color");
                }
            }
            _ => {
                cmd.stdin(if spec.stdin.is_empty() { Stdio::null() } else { Stdio::piped() });
                cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
            }
        }
        let controlling = tty.is_some();
        // SAFETY: the closure runs in the forked child before exec and only makes
        // async-signal-safe system calls, allocating nothing: setsid(2), get/setrlimit(2),
        // write(2) of "0" to the harness's cgroup.procs, whose descriptor the parent keeps
        // open until the spawn has returned, and, for another user, setgroups(2), setgid(2),
        // setuid(2) and chdir(2) again, so the directory is entered with the user's rights.
        unsafe {
            cmd.pre_exec(move || {
                rustix::process::setsid().map_err(std::io::Error::from)?;
                // The terminal on its 0 becomes the new session's controlling terminal.
                if controlling {
                    let stdin = std::os::fd::BorrowedFd::borrow_raw(0);
                    rustix::process::ioctl_tiocsctty(stdin).map_err(std::io::Error::from)?;
                }
                super::fds::restore_for_child();
                for &fd in &cgroups {
                    let fd = std::os::fd::BorrowedFd::borrow_raw(fd);
                    rustix::io::write(fd, b"0").map_err(std::io::Error::from)?;
                }
                if let Some(identity) = &identity {
                    identity.become_it()?;
                    if let Some(cwd) = &cwd_c {
                        if libc::chdir(cwd.as_ptr()) < 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                }
                Ok(())
            });
        }
        cmd
    }
}

impl RealSpawner {
    /// Spawns straight into the harness's cgroup with clone3; `None` when this kernel (or
    /// this machine) cannot, and the ordinary spawn should be used.
    fn spawn_into_cgroup(
        &mut self,
        name: &Id,
        leaf: &std::path::Path,
        spec: &SpawnSpec,
        cwd: &std::path::Path,
        sink: &Arc<Mutex<LogSink>>,
        identity: Option<Identity>,
    ) -> Option<Result<Pid, SpawnError>> {
        let cgroup = HarnessCgroups::dir_handle(leaf).ok()?;
        let failed = |detail: String| Some(Err(SpawnError { not_found: false, detail }));
        let mut extra: Vec<(String, String)> =
            spec.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        // The user's login variables first, so the harness's own env may override them.
        let login = identity.iter().flat_map(Identity::login_env).collect::<Vec<_>>();
        extra.splice(0..0, login);
        extra.push((HARNESS_ENV.into(), name.to_string()));
        extra.push((ROOT_ENV.into(), self.paths.root.display().to_string()));
        extra.extend(self.extra_env.get(name).into_iter().flatten().cloned());
        let who = identity.as_ref().map(|i| format!(" (as user {})", i.user)).unwrap_or_default();
        let env = fork::child_env(&extra);
        let prepared = match fork::Prepared::new(&spec.argv, cwd, &env, identity) {
            Ok(p) => p,
            Err(e) => return failed(format!("{}: {e}", spec.argv.join(" "))),
        };
        let pipes = (|| -> std::io::Result<_> {
            let flags = rustix::pipe::PipeFlags::CLOEXEC;
            let (stdin, stdin_write) = rustix::pipe::pipe_with(flags)?;
            Ok((
                stdin,
                stdin_write,
                rustix::pipe::pipe_with(flags)?,
                rustix::pipe::pipe_with(flags)?,
            ))
        })();
        let (stdin, stdin_write, (out_r, out_w), (err_r, err_w)) = match pipes {
            Ok(p) => p,
            Err(e) => return failed(format!("pipes for {name}: {e}")),
        };
        let stdio = fork::Stdio { stdin: &stdin, stdout: &out_w, stderr: &err_w };
        match fork::spawn_into(&prepared, &cgroup, stdio) {
            Err(fork::ForkError::Unsupported) => None,
            Err(fork::ForkError::Exec(e)) => {
                let not_found = matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
                );
                Some(Err(SpawnError { not_found, detail: format!("{}: {e}", spec.argv[0]) }))
            }
            Err(fork::ForkError::Cwd(e)) => {
                let not_found = e.kind() == std::io::ErrorKind::NotFound;
                Some(Err(SpawnError {
                    not_found,
                    detail: format!("cwd {}: {e}{who}", cwd.display()),
                }))
            }
            Err(fork::ForkError::Identity(e)) => failed(format!("becoming{who}: {e}")),
            Err(fork::ForkError::Other(e)) => failed(format!("{}: {e}", spec.argv[0])),
            Ok(pid) => {
                // Closing the write end at once gives the child an empty stdin.
                if !spec.stdin.is_empty() {
                    let bytes = spec.stdin.clone();
                    std::thread::spawn(move || {
                        let _ = std::fs::File::from(stdin_write).write_all(&bytes);
                    });
                }
                self.pump.add(out_r, Stream::Out, sink.clone());
                self.pump.add(err_r, Stream::Err, sink.clone());
                self.owners.insert(pid, Some(leaf.to_path_buf()));
                Some(Ok(pid))
            }
        }
    }
}

impl Spawner for RealSpawner {
    fn spawn(&mut self, name: &Id, run: u64, spec: &SpawnSpec) -> Result<Pid, SpawnError> {
        let program = spec.argv.first().cloned().unwrap_or_default();
        // Out of descriptors is this harness's failed start, never the daemon's crash.
        super::fds::room_for_spawn().map_err(|detail| SpawnError {
            not_found: false,
            detail: format!("{program}: {detail}"),
        })?;
        let sink = self.sink(name).map_err(|e| SpawnError {
            not_found: false,
            detail: format!("{}: {e}", self.paths.log(name).display()),
        })?;
        // A working directory that is not there is said as such: the child's chdir would
        // fail and exec report the program as missing. A relative one is resolved first and
        // must stay inside the root: a link inside may lead anywhere.
        let cwd = super::config::resolve_cwd(&self.paths.root, spec.cwd.as_deref())
            .map_err(|(not_found, detail)| SpawnError { not_found, detail })?;
        let identity = match &spec.user {
            None => None,
            Some(user) => {
                let id = crate::os::identity::resolve(user, spec.group.as_deref())
                    .map_err(|detail| SpawnError { not_found: true, detail })?;
                if let Some(detail) = id.refused() {
                    return Err(SpawnError { not_found: true, detail });
                }
                Some(id)
            }
        };
        if let Some(file) = self.ready_files.get(name) {
            remove_ready_file(file, identity.is_some());
        }
        // A cgroup that cannot be made degrades this run to process-group containment rather
        // than failing it.
        let leaf = self.contain.new_run(name, run).unwrap_or(None);
        // Its limits, on the run's cgroup (and, where cgroup v2 lacks a controller, on a
        // directory of the same name in the v1 hierarchy that has it).
        let bounded = match &spec.limits {
            Some(limits) => {
                let below = leaf.as_deref().map_or_else(
                    || format!("harn-harness/{name}/run-{run}"),
                    |l| {
                        l.iter()
                            .rev()
                            .take(3)
                            .collect::<Vec<_>>()
                            .into_iter()
                            .rev()
                            .collect::<PathBuf>()
                            .display()
                            .to_string()
                    },
                );
                let b = Bounded::apply(leaf.as_deref(), &below, limits);
                for missing in &b.unenforced {
                    self.note(name, &format!("not enforced on this machine: {missing}"));
                }
                b
            }
            None => Bounded::default(),
        };
        // A terminal harness is spawned by the ordinary path, which can make its terminal
        // the controlling one.
        let pty = match spec.tty {
            None => None,
            Some(size) => Some(super::terminal::open(size).map_err(|e| {
                if let Some(leaf) = &leaf {
                    HarnessCgroups::end_run(leaf);
                }
                SpawnError { not_found: false, detail: format!("a terminal for {name}: {e}") }
            })?),
        };
        // Straight into the cgroup with clone3, unless the child must join v1 directories
        // too, which only the path that runs code before exec can do.
        let cloned = pty.is_none() && bounded.joins().is_empty();
        if let Some(leaf) = leaf.as_ref().filter(|_| cloned) {
            let into = self.spawn_into_cgroup(name, leaf, spec, &cwd, &sink, identity.clone());
            if let Some(done) = into {
                match &done {
                    Err(_) => drop(HarnessCgroups::end_run(leaf)),
                    Ok(pid) => drop(self.bounds.insert(*pid, bounded)),
                }
                return done;
            }
        }
        let mut handles: Vec<std::os::fd::OwnedFd> = Vec::new();
        handles.extend(leaf.as_deref().and_then(|l| HarnessCgroups::join_handle(l).ok()));
        for dir in bounded.joins() {
            handles.extend(HarnessCgroups::join_handle(dir).ok());
        }
        let raw: Vec<i32> = handles.iter().map(std::os::fd::AsRawFd::as_raw_fd).collect();
        let user = identity.as_ref().map(|i| i.user.clone());
        let slave = pty.as_ref().map(|(_, slave)| slave);
        // A terminal is its user's, as a login makes it: a harness run as another user may
        // reopen it by name (`tty`, `/dev/pts/N`), not only through the descriptors it holds.
        if let (Some(slave), Some(identity)) = (slave, identity.as_ref()) {
            let uid = rustix::process::Uid::from_raw(identity.uid);
            if let Err(e) = rustix::fs::fchown(slave, Some(uid), None) {
                if let Some(leaf) = &leaf {
                    HarnessCgroups::end_run(leaf);
                }
                let detail = format!("a terminal for {name}: chown to {}: {e}", identity.user);
                return Err(SpawnError { not_found: false, detail });
            }
        }
        let spawned = self.command(name, spec, &cwd, raw, identity, slave).spawn();
        drop(handles);
        if spawned.is_err() {
            if let Some(leaf) = &leaf {
                HarnessCgroups::end_run(leaf);
            }
        }
        let mut child = spawned.map_err(|e| {
            let not_found = matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
            );
            // This path cannot tell the user's chdir from its exec: a refusal names both.
            let detail = match &user {
                Some(user) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                    format!("{program} in cwd {} (as user {user}): {e}", cwd.display())
                }
                _ => format!("{program}: {e}"),
            };
            SpawnError { not_found, detail }
        })?;
        if let Some(mut stdin) = child.stdin.take() {
            let bytes = spec.stdin.clone();
            std::thread::spawn(move || {
                let _ = stdin.write_all(&bytes);
            });
        }
        if let Some(out) = child.stdout.take() {
            self.pump.add(out, Stream::Out, sink.clone());
        }
        if let Some(err) = child.stderr.take() {
            self.pump.add(err, Stream::Err, sink.clone());
        }
        // The child holds the slave side now; the daemon keeps only the master.
        if let (Some((master, slave)), Some(size)) = (pty, spec.tty) {
            drop(slave);
            let terminal = super::terminal::Terminal::start(master, size, sink);
            self.terminals.insert(name.clone(), (child.id(), terminal));
        }
        // The child is reaped by the daemon's SIGCHLD handling (waitpid on any child), not
        // through this handle; dropping it neither waits nor kills.
        self.owners.insert(child.id(), leaf);
        self.bounds.insert(child.id(), bounded);
        Ok(child.id())
    }

    fn signal(&mut self, pid: Pid, signal: Signal) -> Result<(), SpawnError> {
        let sig = match signal {
            // The session's terminal is hung up: SIGHUP reaches its foreground group, which
            // a job-control shell inside may have moved away from the leader's.
            Signal::Hangup => {
                if let Some((_, terminal)) = self.terminals.values().find(|(p, _)| *p == pid) {
                    terminal.hangup();
                }
                return Ok(());
            }
            Signal::Term => rustix::process::Signal::TERM,
            Signal::Kill => rustix::process::Signal::KILL,
        };
        let Some(group) = rustix::process::Pid::from_raw(pid as i32) else {
            return Err(SpawnError { not_found: false, detail: format!("bad pid {pid}") });
        };
        if signal == Signal::Kill {
            if let Some(Some(leaf)) = self.owners.get(&pid) {
                HarnessCgroups::end_run(leaf);
            }
        }
        match rustix::process::kill_process_group(group, sig) {
            Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
            Err(e) => {
                Err(SpawnError { not_found: false, detail: format!("kill -{sig:?} -{pid}: {e}") })
            }
        }
    }
}

/// Removes a run's readiness file before the run starts, so only the new run can vouch. For a
/// harness run as another user, that user may own directories on the way: no symlink is
/// followed on the path, so the daemon's user never removes a file elsewhere (a path with a
/// symlink in it is left alone).
fn remove_ready_file(file: &std::path::Path, other_user: bool) {
    if !other_user {
        let _ = std::fs::remove_file(file);
        return;
    }
    use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags};
    let (Some(parent), Some(name)) = (file.parent(), file.file_name()) else { return };
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let resolve = ResolveFlags::NO_SYMLINKS;
    if let Ok(dir) = rustix::fs::openat2(rustix::fs::CWD, parent, flags, Mode::empty(), resolve) {
        let _ = rustix::fs::unlinkat(&dir, name, AtFlags::empty());
    }
}

/// The log path of a harness (for messages).
pub fn log_path(paths: &Paths, name: &Id) -> PathBuf {
    paths.log(name)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_ready_file_of_another_user_is_never_removed_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("ready.flag"), "").unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.path().join("link")).unwrap();
        super::remove_ready_file(&dir.path().join("link/ready.flag"), true);
        assert!(elsewhere.join("ready.flag").exists(), "not through the symlink");
        super::remove_ready_file(&elsewhere.join("ready.flag"), true);
        assert!(!elsewhere.join("ready.flag").exists(), "straight to it: removed");
    }
}
