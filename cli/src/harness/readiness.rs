//! Readiness evidence beyond a live pid: a file that appears, a probe command that exits 0,
//! or `READY=1` on the harness's notify socket. When to look and what a probe vouches for is
//! the core's `harness::readiness::ReadinessSchedule`; this looks at files, starts and kills
//! probes, and listens on the notify sockets.

use super::paths::Paths;
use super::protocol::Msg;
use super::spawner::RealSpawner;
use harn_core::env::Pid;
use harn_core::harness::daemon::{Daemon, DaemonConfig};
use harn_core::harness::lifecycle::Readiness as Kind;
use harn_core::harness::readiness::{Found, ReadinessHost, ReadinessSchedule};
use harn_core::ids::Id;
use harn_core::time::Instant;
use std::collections::BTreeMap;
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc::Sender;

/// The readiness watches of every harness.
pub struct ReadinessWatch {
    /// What is awaited and when it is next looked at; the reaper reports a probe's exit to it.
    pub(crate) schedule: ReadinessSchedule,
    cwd: BTreeMap<Id, PathBuf>,
    /// The user and group a harness runs as, which its probes run as too.
    run_as: BTreeMap<Id, (String, Option<String>)>,
    /// Each notify harness's `NOTIFY_SOCKET` and whether it is in the abstract namespace.
    notify_sockets: BTreeMap<Id, (String, bool)>,
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
            schedule: ReadinessSchedule::default(),
            cwd: BTreeMap::new(),
            run_as: BTreeMap::new(),
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
            match &spec.spawn.user {
                Some(user) => {
                    self.run_as.insert(name.clone(), (user.clone(), spec.spawn.group.clone()))
                }
                None => self.run_as.remove(name),
            };
            // A harness run as another user cannot enter `.harnery/`, where the daemon's own
            // sockets live: its socket is in the abstract namespace, as systemd allows
            // (`@name`), where no file permission applies; the kernel-attested pid and uid of
            // each sender decide whose word counts.
            let abstract_wanted = spec.spawn.user.is_some();
            let bound = self.notify_sockets.get(name).map(|(_, a)| *a);
            if spec.readiness == Kind::Notify && bound != Some(abstract_wanted) {
                let expected_uid = match &spec.spawn.user {
                    Some(user) => Some(
                        crate::os::identity::resolve(user, None)
                            .map_err(|e| {
                                std::io::Error::other(format!("harness.{name}.user: {e}"))
                            })?
                            .uid,
                    ),
                    None => None,
                };
                let address = self.bind_notify(paths, name, abstract_wanted, expected_uid)?;
                let mut env = vec![("NOTIFY_SOCKET".into(), address.clone())];
                // As systemd does, so sd_watchdog_enabled() tells the child how often to ping.
                if let Some(w) = spec.watchdog {
                    env.push(("WATCHDOG_USEC".into(), (w.as_millis() * 1_000).to_string()));
                }
                spawner.set_extra_env(name, env);
                self.notify_sockets.insert(name.clone(), (address, abstract_wanted));
            }
            let file = match &spec.readiness {
                Kind::File { path } => Some(self.cwd[name].join(path)),
                _ => None,
            };
            spawner.set_ready_file(name, file);
        }
        self.schedule.configure(&config.harnesses);
        Ok(())
    }

    /// Binds `name`'s notify socket: a file under the daemon's private socket directory, or
    /// (`abstract_name`) an unguessable name in the abstract namespace, which only messages
    /// from `expected_uid` may use. Returns the `NOTIFY_SOCKET` value.
    fn bind_notify(
        &self,
        paths: &Paths,
        name: &Id,
        abstract_name: bool,
        expected_uid: Option<u32>,
    ) -> std::io::Result<String> {
        let (socket, address) = if abstract_name {
            use std::os::linux::net::SocketAddrExt;
            let address = paths.notify_abstract(name)?;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(&address[1..])?;
            (UnixDatagram::bind_addr(&addr)?, address)
        } else {
            paths.prepare_socket_dir("notify")?;
            let path = paths.notify_socket(name);
            let _ = std::fs::remove_file(&path);
            let socket = UnixDatagram::bind(&path)?;
            let mode = std::os::unix::fs::PermissionsExt::from_mode(0o600);
            std::fs::set_permissions(&path, mode)?;
            (socket, path.display().to_string())
        };
        // The kernel attaches each sender's credentials, so the daemon can tell a harness's
        // own READY=1 from anyone else's.
        rustix::net::sockopt::set_socket_passcred(&socket, true)?;
        let (tx, name) = (self.tx.clone(), name.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Some((n, sender, uid)) = recv_with_sender(&socket, &mut buf) {
                if expected_uid.is_some_and(|wanted| wanted != uid) {
                    continue; // Not the harness's user: nobody else's word counts.
                }
                let said = &buf[..n];
                let mut gone = false;
                if crate::os::sdnotify::says_ready(said) {
                    gone |= tx.send(Msg::Notified(name.clone(), sender)).is_err();
                }
                if crate::os::sdnotify::says_alive(said) {
                    gone |= tx.send(Msg::Pinged(name.clone(), sender)).is_err();
                }
                if gone {
                    return;
                }
            }
        });
        Ok(address)
    }

    /// A run started at `now`: the schedule watches for its file or probe.
    pub fn started(&mut self, now: Instant, name: &Id, run: u64) {
        self.schedule.started(now, name, run);
    }

    /// When [`ReadinessWatch::check`] next has work; `None` when nothing awaits.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.schedule.poll_timeout()
    }

    /// Carries out what the schedule asks at `now` (the core's `look`): looks at files,
    /// starts probes, kills probes that ran too long or outlived their run. Returns what the
    /// looks found, in order: runs now ready, and rechecked runs that lost their readiness.
    pub fn check(&mut self, now: Instant, daemon: &Daemon) -> Vec<Found> {
        let live = |name: &Id, run: u64| {
            daemon.harnesses().get(name).and_then(|h| h.current_run()) == Some(run)
        };
        let mut host = Looks { cwd: &self.cwd, run_as: &self.run_as };
        self.schedule.look(now, &live, &mut host)
    }

    /// The kind of evidence a harness needs, for status.
    pub fn kind(&self, name: &Id) -> &'static str {
        self.schedule.kind(name)
    }
}

/// One datagram and the pid and uid of its sender, as the kernel attests them (0 and
/// `u32::MAX` when it did not say).
fn recv_with_sender(socket: &UnixDatagram, buf: &mut [u8]) -> Option<(usize, u32, u32)> {
    use rustix::net::{recvmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmCredentials(1))];
    let mut ancillary = RecvAncillaryBuffer::new(&mut space);
    let mut iov = [std::io::IoSliceMut::new(buf)];
    let msg = recvmsg(socket, &mut iov, &mut ancillary, RecvFlags::empty()).ok()?;
    let sender = ancillary.drain().find_map(|m| match m {
        RecvAncillaryMessage::ScmCredentials(cred) => {
            Some((cred.pid.as_raw_nonzero().get() as u32, cred.uid.as_raw()))
        }
        _ => None,
    });
    let (pid, uid) = sender.unwrap_or((0, u32::MAX));
    Some((msg.bytes, pid, uid))
}

/// The daemon's side of a readiness look: real files, real probe processes.
struct Looks<'a> {
    cwd: &'a BTreeMap<Id, PathBuf>,
    run_as: &'a BTreeMap<Id, (String, Option<String>)>,
}

impl ReadinessHost for Looks<'_> {
    fn file_present(&mut self, name: &Id, path: &str) -> bool {
        self.cwd.get(name).is_some_and(|cwd| cwd.join(path).exists())
    }

    fn kill_probe(&mut self, pid: Pid) {
        if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
            let _ = rustix::process::kill_process_group(p, rustix::process::Signal::KILL);
        }
    }

    fn start_probe(&mut self, name: &Id, command: &[String]) -> Option<Pid> {
        let (program, args) = command.split_first()?;
        let mut cmd = Command::new(program);
        cmd.args(args).current_dir(self.cwd.get(name)?);
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        cmd.process_group(0);
        if let Some((user, group)) = self.run_as.get(name) {
            // A probe runs as its harness does; one that cannot is a failed look.
            let identity = crate::os::identity::resolve(user, group.as_deref()).ok()?;
            if identity.refused().is_some() {
                return None;
            }
            let cwd = std::ffi::CString::new(self.cwd.get(name)?.as_os_str().as_encoded_bytes());
            let cwd = cwd.ok()?;
            // SAFETY: become_it makes only raw setgroups(2), setresgid(2) and setresuid(2)
            // calls, and chdir(2) follows, all on data prepared before the fork: the probe
            // enters its directory with its user's rights, as its harness does.
            unsafe {
                cmd.pre_exec(move || {
                    identity.become_it()?;
                    if libc::chdir(cwd.as_ptr()) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        cmd.spawn().ok().map(|child| child.id())
    }
}
