//! The real `Spawner`: each child in its own session and process group, its stdout and
//! stderr drained into its rotating log, signals sent to the whole group.

use super::logs::{drain_pipe, LogSink, Rotation};
use super::paths::Paths;
use harn_core::env::{Pid, Signal, SpawnError, SpawnSpec, Spawner};
use harn_core::ids::Id;
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

/// Environment variable naming the harness a process belongs to (inherited by its
/// descendants, which lets a restarted daemon find processes of an earlier one).
pub const HARNESS_ENV: &str = "HARN_HARNESS";
/// Environment variable naming the coordination root of that harness.
pub const ROOT_ENV: &str = "HARN_ROOT";

/// Starts and signals real children.
pub struct RealSpawner {
    paths: Paths,
    rotation: Rotation,
    sinks: BTreeMap<Id, Arc<Mutex<LogSink>>>,
    /// Extra environment per harness (the notify socket), set by the daemon from config.
    extra_env: BTreeMap<Id, Vec<(String, String)>>,
}

impl RealSpawner {
    /// A spawner for the harnesses of `paths.root`.
    pub fn new(paths: Paths, rotation: Rotation) -> RealSpawner {
        RealSpawner { paths, rotation, sinks: BTreeMap::new(), extra_env: BTreeMap::new() }
    }

    /// Sets variables added to every later spawn of `name`.
    pub fn set_extra_env(&mut self, name: &Id, vars: Vec<(String, String)>) {
        self.extra_env.insert(name.clone(), vars);
    }

    fn sink(&mut self, name: &Id) -> std::io::Result<Arc<Mutex<LogSink>>> {
        if let Some(s) = self.sinks.get(name) {
            return Ok(s.clone());
        }
        let sink = LogSink::open(self.paths.log(name), self.rotation)?;
        self.sinks.insert(name.clone(), sink.clone());
        Ok(sink)
    }

    /// Writes a line of the daemon's own into a harness's log (spawn failures, stops).
    pub fn note(&mut self, name: &Id, line: &str) {
        if let Ok(sink) = self.sink(name) {
            let _ = sink.lock().map(|mut s| s.write(format!("[harn] {line}\n").as_bytes()));
        }
    }

    fn command(&self, name: &Id, spec: &SpawnSpec) -> Command {
        let mut cmd = Command::new(&spec.argv[0]);
        cmd.args(&spec.argv[1..]);
        let cwd = spec
            .cwd
            .as_deref()
            .map_or_else(|| self.paths.root.clone(), |c| self.paths.root.join(c));
        cmd.current_dir(cwd);
        cmd.envs(&spec.env);
        cmd.env(HARNESS_ENV, name.as_str());
        cmd.env(ROOT_ENV, &self.paths.root);
        for (k, v) in self.extra_env.get(name).into_iter().flatten() {
            cmd.env(k, v);
        }
        cmd.stdin(if spec.stdin.is_empty() { Stdio::null() } else { Stdio::piped() });
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        // SAFETY: the closure runs in the forked child before exec and only calls setsid(2),
        // which is async-signal-safe and allocates nothing.
        unsafe {
            cmd.pre_exec(|| rustix::process::setsid().map(drop).map_err(std::io::Error::from));
        }
        cmd
    }
}

impl Spawner for RealSpawner {
    fn spawn(&mut self, name: &Id, spec: &SpawnSpec) -> Result<Pid, SpawnError> {
        let program = spec.argv.first().cloned().unwrap_or_default();
        let sink = self.sink(name).map_err(|e| SpawnError {
            not_found: false,
            detail: format!("{}: {e}", self.paths.log(name).display()),
        })?;
        let mut child = self.command(name, spec).spawn().map_err(|e| {
            let not_found = matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
            );
            SpawnError { not_found, detail: format!("{program}: {e}") }
        })?;
        if let Some(mut stdin) = child.stdin.take() {
            let bytes = spec.stdin.clone();
            std::thread::spawn(move || {
                let _ = stdin.write_all(&bytes);
            });
        }
        if let Some(out) = child.stdout.take() {
            drain_pipe(out, sink.clone());
        }
        if let Some(err) = child.stderr.take() {
            drain_pipe(err, sink);
        }
        // The child is reaped by the daemon's SIGCHLD handling (waitpid on any child), not
        // through this handle; dropping it neither waits nor kills.
        Ok(child.id())
    }

    fn signal(&mut self, pid: Pid, signal: Signal) -> Result<(), SpawnError> {
        let sig = match signal {
            Signal::Term => rustix::process::Signal::TERM,
            Signal::Kill => rustix::process::Signal::KILL,
        };
        let Some(group) = rustix::process::Pid::from_raw(pid as i32) else {
            return Err(SpawnError { not_found: false, detail: format!("bad pid {pid}") });
        };
        match rustix::process::kill_process_group(group, sig) {
            Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
            Err(e) => {
                Err(SpawnError { not_found: false, detail: format!("kill -{sig:?} -{pid}: {e}") })
            }
        }
    }
}

/// The log path of a harness (for messages).
pub fn log_path(paths: &Paths, name: &Id) -> PathBuf {
    paths.log(name)
}
