//! Readiness evidence beyond a live pid: a file that appears, a probe command that exits 0,
//! or `READY=1` on the harness's notify socket. Files and probes are checked every
//! `CHECK_EVERY` only while some run awaits them; notify needs no checking at all.

use super::daemon::Msg;
use super::paths::Paths;
use super::spawner::RealSpawner;
use harn_core::env::Pid;
use harn_core::harness::daemon::{Daemon, DaemonConfig};
use harn_core::harness::lifecycle::Readiness as Kind;
use harn_core::ids::Id;
use std::collections::BTreeMap;
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc::Sender;
use std::time::Duration;

/// How often files and probes are checked while a run awaits them.
const CHECK_EVERY: Duration = Duration::from_millis(250);

/// The readiness watches of every harness.
pub struct ReadinessWatch {
    kinds: BTreeMap<Id, Kind>,
    cwd: BTreeMap<Id, PathBuf>,
    /// Runs that await a file or a probe.
    awaiting: BTreeMap<Id, u64>,
    /// When files and probes were last checked.
    last_check: Option<std::time::Instant>,
    /// Probe processes in flight: pid to (harness, run).
    probes: BTreeMap<Pid, (Id, u64, std::time::Instant)>,
    notify_sockets: BTreeMap<Id, PathBuf>,
    tx: Sender<Msg>,
}

impl ReadinessWatch {
    /// Sets up the watches (and notify sockets) for `config`.
    pub fn new(
        paths: &Paths,
        config: &DaemonConfig,
        spawner: &mut RealSpawner,
        tx: Sender<Msg>,
    ) -> std::io::Result<ReadinessWatch> {
        let mut r = ReadinessWatch {
            kinds: BTreeMap::new(),
            cwd: BTreeMap::new(),
            awaiting: BTreeMap::new(),
            last_check: None,
            probes: BTreeMap::new(),

            notify_sockets: BTreeMap::new(),
            tx,
        };
        r.configure(paths, config, spawner)?;
        Ok(r)
    }

    /// Applies a (re)loaded configuration; a new notify socket is bound for each harness that
    /// asks for one.
    pub fn configure(
        &mut self,
        paths: &Paths,
        config: &DaemonConfig,
        spawner: &mut RealSpawner,
    ) -> std::io::Result<()> {
        for (name, spec) in &config.harnesses {
            let cwd = spec
                .spawn
                .cwd
                .as_deref()
                .map_or_else(|| paths.root.clone(), |c| paths.root.join(c));
            self.cwd.insert(name.clone(), cwd);
            if spec.readiness == Kind::Notify && !self.notify_sockets.contains_key(name) {
                let path = self.bind_notify(paths, name)?;
                spawner.set_extra_env(
                    name,
                    vec![("NOTIFY_SOCKET".into(), path.display().to_string())],
                );
                self.notify_sockets.insert(name.clone(), path);
            }
            let file = match &spec.readiness {
                Kind::File { path } => Some(self.cwd[name].join(path)),
                _ => None,
            };
            spawner.set_ready_file(name, file);
            self.kinds.insert(name.clone(), spec.readiness.clone());
        }
        Ok(())
    }

    fn bind_notify(&self, paths: &Paths, name: &Id) -> std::io::Result<PathBuf> {
        paths.prepare_socket_dir("notify")?;
        let path = paths.notify_socket(name);
        let _ = std::fs::remove_file(&path);
        let socket = UnixDatagram::bind(&path)?;
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        // The kernel attaches each sender's credentials, so the daemon can tell a harness's
        // own READY=1 from anyone else's.
        rustix::net::sockopt::set_socket_passcred(&socket, true)?;
        let (tx, name) = (self.tx.clone(), name.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Some((n, sender)) = recv_with_sender(&socket, &mut buf) {
                if super::sdnotify::says_ready(&buf[..n])
                    && tx.send(Msg::Notified(name.clone(), sender)).is_err()
                {
                    return;
                }
            }
        });
        Ok(path)
    }

    /// A run started: watch for its file or probe.
    pub fn started(&mut self, name: &Id, run: u64) {
        if matches!(self.kinds.get(name), Some(Kind::File { .. } | Kind::Probe { .. })) {
            self.awaiting.insert(name.clone(), run);
        }
    }

    /// How long until [`ReadinessWatch::check`] has work; `None` when nothing awaits.
    pub fn poll_interval(&self) -> Option<Duration> {
        if self.awaiting.is_empty() {
            return None;
        }
        Some(self.last_check.map_or(Duration::ZERO, |t| CHECK_EVERY.saturating_sub(t.elapsed())))
    }

    /// Checks files and starts probes for runs still awaiting them, at most every
    /// `CHECK_EVERY`; returns runs now ready.
    pub fn check(&mut self, daemon: &Daemon) -> Vec<(Id, u64)> {
        if self.poll_interval() != Some(Duration::ZERO) {
            return Vec::new();
        }
        self.last_check = Some(std::time::Instant::now());
        let live = |name: &Id, run: u64| {
            daemon.harnesses().get(name).and_then(|h| h.current_run()) == Some(run)
        };
        self.awaiting.retain(|name, run| live(name, *run));
        let mut ready = Vec::new();
        for (name, run) in self.awaiting.clone() {
            match self.kinds.get(&name) {
                Some(Kind::File { path }) if self.cwd[&name].join(path).exists() => {
                    self.awaiting.remove(&name);
                    ready.push((name, run));
                }
                Some(Kind::Probe { command })
                    if !self.probes.values().any(|(n, _, _)| *n == name) =>
                {
                    let command = command.clone();
                    self.start_probe(&name, run, &command);
                }
                _ => {}
            }
        }
        ready
    }

    fn start_probe(&mut self, name: &Id, run: u64, command: &[String]) {
        let mut cmd = Command::new(&command[0]);
        cmd.args(&command[1..]).current_dir(&self.cwd[name]);
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        cmd.process_group(0);
        if let Ok(child) = cmd.spawn() {
            self.probes.insert(child.id(), (name.clone(), run, std::time::Instant::now()));
        }
    }

    /// The reaper found `pid` exited: if it was a probe, the run it vouches for when it
    /// exited 0.
    pub fn probe_exited(&mut self, pid: Pid, success: bool) -> Option<Option<(Id, u64)>> {
        let (name, run, _) = self.probes.remove(&pid)?;
        if success && self.awaiting.get(&name) == Some(&run) {
            self.awaiting.remove(&name);
            return Some(Some((name, run)));
        }
        Some(None)
    }

    /// The kind of evidence a harness needs, for status.
    pub fn kind(&self, name: &Id) -> &'static str {
        match self.kinds.get(name) {
            None | Some(Kind::None) => "none",
            Some(Kind::File { .. }) => "file",
            Some(Kind::Probe { .. }) => "probe",
            Some(Kind::Notify) => "notify",
        }
    }
}

/// How long a probe may run before it counts as a failure and is killed.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

impl ReadinessWatch {
    /// Kills probes that ran too long or whose run ended; their exits are reaped as failures.
    pub fn expire_probes(&mut self, live: &dyn Fn(&Id, u64) -> bool) {
        for (pid, (name, run, started)) in &self.probes {
            if started.elapsed() > PROBE_TIMEOUT || !live(name, *run) {
                if let Some(p) = rustix::process::Pid::from_raw(*pid as i32) {
                    let _ = rustix::process::kill_process_group(p, rustix::process::Signal::KILL);
                }
            }
        }
    }
}

/// One datagram and the pid of its sender (0 when the kernel did not say).
fn recv_with_sender(socket: &UnixDatagram, buf: &mut [u8]) -> Option<(usize, u32)> {
    use rustix::net::{recvmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmCredentials(1))];
    let mut ancillary = RecvAncillaryBuffer::new(&mut space);
    let mut iov = [std::io::IoSliceMut::new(buf)];
    let msg = recvmsg(socket, &mut iov, &mut ancillary, RecvFlags::empty()).ok()?;
    let sender = ancillary.drain().find_map(|m| match m {
        RecvAncillaryMessage::ScmCredentials(cred) => Some(cred.pid.as_raw_nonzero().get() as u32),
        _ => None,
    });
    Some((msg.bytes, sender.unwrap_or(0)))
}
