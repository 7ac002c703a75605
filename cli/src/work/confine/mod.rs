//! What every process a run segment spawns (its workflow, each agent call, harn's own git
//! commands in a worktree) gets between fork and exec: a session of its own, the segment's
//! cgroup, and, where the core's plan says so (`harn_core::work::containment::plan`), a
//! namespace of its own (`child`) with the guarded paths read-only and a `/dev` without the
//! person's terminals, then Landlock, so it may write beneath its workspace, its `TMPDIR` and
//! its harnesses' state directories only, and may not signal any process outside its domain.
//! A call whose program sandboxes itself by mounting (Codex) is sealed instead.
//!
//! Everything is prepared in the parent ([`child::Setup`]); the child only makes
//! async-signal-safe system calls. What the machine offers is probed once (`probe`), and
//! what a run must not change is found and digested by `guard`.

mod child;
mod probe;

pub use child::{Net, DIRECT_MAX};
pub use probe::offer;

use child::{Rules, Seal, Setup};
use harn_core::work::containment::{credentials, NamespaceKind, Plan};
use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

/// A run segment's confinement, shared by its workflow and its agent calls.
#[derive(Clone, Debug, Default)]
pub struct Confine {
    /// The segment's cgroup, when it has one.
    pub cgroup: Option<PathBuf>,
    /// The cgroup v1 directories that carry its limits where v2 does not, which every child
    /// joins too.
    pub also: Arc<Vec<PathBuf>>,
    /// The segment's private temporary directory, given to every child as `TMPDIR`.
    pub temp: Option<PathBuf>,
    /// What every child does before exec.
    setup: Arc<Setup>,
    /// What a call whose program sandboxes itself by mounting does instead
    /// ([`harn_core::work::adapter::sandbox_mounts`]), when it can be sealed.
    sealed: Option<Arc<Setup>>,
    /// The credentials from the environment children keep, by name; every other one is
    /// removed from what they inherit.
    env: Arc<Vec<String>>,
    /// Where children may write, for a program whose own sandbox must be told (empty when
    /// the segment is not confined).
    pub writable: Arc<Vec<String>>,
    /// True when children keep the person's credentials ([`Confine::with_credentials`]).
    credentials: bool,
}

/// The `uid_map` and `gid_map` lines mapping our own ids into a user namespace.
fn own_maps() -> (Vec<u8>, Vec<u8>) {
    let uid = rustix::process::geteuid().as_raw();
    let gid = rustix::process::getegid().as_raw();
    (format!("{uid} {uid} 1\n").into_bytes(), format!("{gid} {gid} 1\n").into_bytes())
}

fn c_path(path: &str) -> Result<CString, String> {
    CString::new(path.as_bytes()).map_err(|e| format!("{path}: {e}"))
}

fn c_paths(paths: &[String]) -> Result<Vec<CString>, String> {
    paths.iter().map(|p| c_path(p)).collect()
}

impl Confine {
    /// The confinement a segment's `plan` asks for, built now: the namespace's binds and
    /// maps, and the Landlock rules for each writable path and the devices.
    pub fn prepare(
        plan: &Plan,
        cgroup: Option<PathBuf>,
        temp: Option<PathBuf>,
        tmpfs: Option<u64>,
    ) -> Result<Confine, String> {
        let (shm, tmp) = Setup::tmpfs_options(tmpfs);
        let maps = |kind| (kind == NamespaceKind::UserAndMount).then(own_maps);
        let landlock = match plan.landlock {
            Some(abi) => Some(rules(abi, &plan.writable, plan.namespace.is_some())?),
            None => None,
        };
        // What the namespace covers: the cgroup hierarchy, and every listening Unix socket
        // of the machine outside what the run may write.
        let cgroups = match plan.namespace {
            Some(_) => {
                crate::os::cgroup::mount().map(|m| c_path(&m.display().to_string())).transpose()?
            }
            None => None,
        };
        let sockets = match plan.namespace {
            Some(_) => c_paths(&listening_sockets(&plan.writable))?,
            None => Vec::new(),
        };
        // The person's credentials, where a namespace can cover them.
        let hidden = match (plan.namespace, std::env::var("HOME")) {
            (Some(_), Ok(home)) => {
                c_paths(&harn_core::work::containment::credentials::hidden(&home, &plan.writable))?
            }
            _ => Vec::new(),
        };
        let setup = Setup {
            maps: plan.namespace.and_then(maps),
            mount: plan.namespace.is_some(),
            readonly: c_paths(&plan.readonly)?,
            seal: None,
            cgroups: cgroups.clone(),
            sockets: sockets.clone(),
            hidden: hidden.clone(),
            net: None,
            landlock,
            shm: shm.clone(),
            tmp: tmp.clone(),
            nproc: None,
        };
        let sealed = match plan.sealed {
            Some(kind) => {
                let seal = Seal { writable: c_paths(&plan.writable)? };
                Some(Arc::new(Setup {
                    maps: maps(kind),
                    mount: true,
                    readonly: c_paths(&plan.readonly)?,
                    seal: Some(seal),
                    cgroups,
                    sockets,
                    hidden,
                    net: None,
                    landlock: plan.landlock.filter(|&abi| abi >= 6).map(|_| Rules {
                        handled: 0,
                        scoped: SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET,
                        paths: Vec::new(),
                    }),
                    shm,
                    tmp,
                    nproc: None,
                }))
            }
            _ => None,
        };
        let writable =
            Arc::new(if plan.landlock.is_some() { plan.writable.clone() } else { vec![] });
        let also = Arc::default();
        Ok(Confine {
            cgroup,
            also,
            temp,
            setup: Arc::new(setup),
            sealed,
            env: Arc::default(),
            writable,
            credentials: false,
        })
    }

    /// The same confinement, every child in a network namespace of its own (`net`): its
    /// loopback up and, when `net` has a proxy, a forwarder to it, with the proxy variables
    /// set.
    pub fn networked(mut self, net: Option<child::Net>) -> Confine {
        let Some(net) = net else { return self };
        let with = |setup: &mut Arc<Setup>| {
            let mut s = (**setup).clone();
            s.net = Some(net.clone());
            *setup = Arc::new(s);
        };
        with(&mut self.setup);
        if let Some(sealed) = self.sealed.as_mut() {
            with(sealed);
        }
        self
    }

    /// The same confinement, the person's credentials left visible: for harn's own git
    /// commands, which may have to reach a cluster's repository with them.
    pub fn with_credentials(mut self) -> Confine {
        let reveal = |setup: &mut Arc<Setup>| {
            if !setup.hidden.is_empty() {
                let mut s = (**setup).clone();
                s.hidden.clear();
                *setup = Arc::new(s);
            }
        };
        reveal(&mut self.setup);
        if let Some(sealed) = self.sealed.as_mut() {
            reveal(sealed);
        }
        self.credentials = true;
        self
    }

    /// The same confinement, its children joining the cgroup v1 directories `also` too.
    pub fn joining(mut self, also: Vec<PathBuf>) -> Confine {
        self.also = Arc::new(also);
        self
    }

    /// The same confinement, its children limited to `nproc` processes of the user
    /// (`RLIMIT_NPROC`), where no cgroup holds a task limit.
    pub fn limiting_processes(mut self, nproc: Option<u64>) -> Confine {
        for setup in [Some(&mut self.setup), self.sealed.as_mut()].into_iter().flatten() {
            if let Some(s) = Arc::get_mut(setup) {
                s.nproc = nproc;
            }
        }
        self
    }

    /// The same confinement, its children keeping the credentials named in `env`.
    pub fn keeping(mut self, env: Vec<String>) -> Confine {
        self.env = Arc::new(env);
        self
    }

    /// The confinement of a call whose program brings a sandbox that has to mount: the
    /// same cgroup, `TMPDIR` and read-only paths, sealed rather than Landlocked. Where the
    /// machine cannot seal, the call keeps Landlock (and its own sandbox cannot start).
    pub fn for_own_sandbox(&self) -> Confine {
        match &self.sealed {
            Some(sealed) => Confine { setup: sealed.clone(), sealed: None, ..self.clone() },
            None => self.clone(),
        }
    }

    /// Sets `command` up to start in a session of its own, inside the segment's cgroup and
    /// confinement, with the parent-death signal every run child gets, and `TMPDIR`. The
    /// child is its session's and its process group's leader (its pid names the group). Fails
    /// when the cgroup exists but cannot be joined: a child started outside it could outlive
    /// the run.
    pub fn apply(&self, command: &mut Command) -> std::io::Result<()> {
        let mut join: Vec<OwnedFd> = Vec::new();
        for dir in self.cgroup.iter().chain(self.also.iter()) {
            let procs = dir.join("cgroup.procs");
            join.push(std::fs::OpenOptions::new().write(true).open(&procs)?.into());
        }
        if let Some(temp) = &self.temp {
            command.env("TMPDIR", temp);
        }
        if let Some(net) = &self.setup.net {
            // Every way out is the forwarder in the child's namespace; a client that ignores
            // the variables finds no route (and the policy's loopback endpoints at their own
            // ports).
            for name in ["NO_PROXY", "no_proxy"] {
                command.env_remove(name);
            }
            if net.proxy.is_some() {
                let url = format!("http://127.0.0.1:{}", net.port);
                for name in [
                    "HTTP_PROXY",
                    "HTTPS_PROXY",
                    "ALL_PROXY",
                    "http_proxy",
                    "https_proxy",
                    "all_proxy",
                ] {
                    command.env(name, &url);
                }
                // Node reads the variables only when told to.
                command.env("NODE_USE_ENV_PROXY", "1");
            }
        }
        if !self.credentials {
            // No credential helper of the person's configuration answers git in a run (an
            // empty value empties git's list of helpers), and git never prompts for one.
            command.env("GIT_CONFIG_COUNT", "1");
            command.env("GIT_CONFIG_KEY_0", "credential.helper");
            command.env("GIT_CONFIG_VALUE_0", "");
            command.env("GIT_TERMINAL_PROMPT", "0");
            command.env_remove("GIT_ASKPASS").env_remove("SSH_ASKPASS");
        }
        // No credential from the environment unless the run was given it by name.
        for (name, _) in std::env::vars_os() {
            let Some(name) = name.to_str() else { continue };
            if credentials::is_credential(name) && !self.env.iter().any(|e| e == name) {
                command.env_remove(name);
            }
        }
        let cwd = match command.get_current_dir() {
            Some(dir) if dir.is_absolute() => Some(dir.to_owned()),
            Some(dir) => Some(std::env::current_dir()?.join(dir)),
            None => None,
        };
        let cwd = match cwd {
            Some(dir) => Some(CString::new(dir.into_os_string().into_encoded_bytes())?),
            None => None,
        };
        let setup = self.setup.clone();
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
        // system calls on memory and descriptors it owns, allocating nothing (`child`).
        unsafe {
            command.pre_exec(move || child::enter(&setup, &join, cwd.as_deref(), parent));
        }
        Ok(())
    }
}

/// The Landlock rules: every write right Landlock `abi` knows is handled, and allowed
/// beneath each writable path; the devices programs write (null, zero, full, random,
/// urandom) may be written, truncated and sent their own ioctls; in a namespace of the
/// child's own, its terminal (`/dev/tty`, only ever its own after `setsid`) and its own `/dev/pts`
/// take ioctls too, and its private `/dev/shm` is writable. With ABI 6, signals to processes
/// outside the domain are refused (a run may not stop its own host).
fn rules(abi: u32, writable: &[String], namespace: bool) -> Result<Rules, String> {
    use landlock::{AccessFs, ABI};
    let abi = match abi {
        1 => ABI::V1,
        2 => ABI::V2,
        3 => ABI::V3,
        4 => ABI::V4,
        5 => ABI::V5,
        6 => ABI::V6,
        _ => ABI::V7,
    };
    let handled = AccessFs::from_write(abi).bits();
    let scoped = if abi >= ABI::V6 { SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET } else { 0 };
    let mut paths = Vec::new();
    for path in writable {
        paths.push((c_path(path)?, handled));
    }
    // The data devices take their ioctls (a terminal's request is refused by them anyway,
    // and `isatty` then says no for the usual reason).
    let device = child::WRITE_FILE | child::TRUNCATE;
    for dev in &child::DEVICES[..5] {
        paths.push(((*dev).to_owned(), device | child::IOCTL_DEV));
    }
    if namespace {
        let terminal = device | child::IOCTL_DEV;
        paths.push((c"/dev/tty".to_owned(), terminal));
        paths.push((c"/dev/pts".to_owned(), terminal));
        paths.push((c"/dev/shm".to_owned(), handled));
    }
    Ok(Rules { handled, scoped, paths })
}

/// `LANDLOCK_SCOPE_SIGNAL` (ABI 6): no signal to a process outside the domain.
const SCOPE_SIGNAL: u64 = 1 << 1;
/// `LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET` (ABI 6): no connection to an abstract socket made
/// outside the domain (an X server, a session bus).
const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;

/// The most listening sockets a child's namespace covers; more is a machine this design did
/// not foresee, and the rest stay reachable (the harness daemon still lets a contained peer
/// only look).
const SOCKETS_MAX: usize = 1024;

/// The paths of the machine's listening Unix sockets (`/proc/net/unix`) outside `writable`.
fn listening_sockets(writable: &[String]) -> Vec<String> {
    const ACCEPTING: u32 = 0x0001_0000; // __SO_ACCEPTCON
    let Some(table) = crate::os::procfs::unix_sockets() else { return Vec::new() };
    let mut out: Vec<String> = table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let flags = u32::from_str_radix(fields.get(3)?, 16).ok()?;
            let path = fields.get(7)?;
            (flags & ACCEPTING != 0 && path.starts_with('/')).then(|| (*path).to_owned())
        })
        .filter(|p| !writable.iter().any(|w| p == w || p.starts_with(&format!("{w}/"))))
        .collect();
    out.sort();
    out.dedup();
    out.truncate(SOCKETS_MAX);
    out
}

/// Makes each of the `state` paths (a harness's, the configuration's) that `plan` keeps
/// writable and that does not exist yet as the core says
/// ([`harn_core::work::containment::made_before_rules`]), before the rules are built, so it
/// gets its rule: a program's state on a fresh home (Claude Code's `~/.claude.json`) is
/// written as an open call would write it. An unconfined plan keeps nothing and a path inside
/// `.harnery/` is never kept, so neither is made; nothing that exists is touched; a path that
/// cannot be made goes without its rule, as before.
pub fn make_missing(plan: &Plan, state: &[String]) {
    use harn_core::work::containment::{made_before_rules, Made};
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let kept = state
        .iter()
        .map(|w| w.trim_end_matches('/'))
        .filter(|w| plan.writable.iter().any(|k| k == w));
    for written in kept {
        let path = std::path::Path::new(written);
        if path.symlink_metadata().is_ok() {
            continue;
        }
        match made_before_rules(written) {
            Some(Made::Directory) => {
                let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(path);
            }
            Some(Made::File(bytes)) if path.parent().is_some_and(|d| d.is_dir()) => {
                let made = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(path);
                if let Ok(mut file) = made {
                    let _ = file.write_all(bytes.as_bytes()).and_then(|()| file.sync_all());
                }
            }
            _ => {}
        }
    }
}

/// A segment's private temporary directory (mode 0700, fresh), and its removal.
pub struct Temp(pub PathBuf);

impl Temp {
    /// Makes `<system temporary directory>/harn-<run>-<pid>`.
    pub fn create(run: &str) -> Result<Temp, String> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = std::env::temp_dir().join(format!("harn-{run}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(Temp(dir))
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The confinement of a short-lived child harn starts outside a run segment: it may write
/// `workspace` (none: nothing of the root, as for a goal's planner or reviewer, which only
/// read), the `writable` paths and a private `TMPDIR` made for it, removed with the `Temp`.
pub fn scratch(
    root: &std::path::Path,
    workspace: Option<&std::path::Path>,
    writable: Vec<String>,
    off: Option<String>,
    label: &str,
) -> Result<(Confine, Temp), String> {
    let temp = Temp::create(label)?;
    let dir = temp.0.display().to_string();
    let need = harn_core::work::containment::Need {
        root: root.display().to_string(),
        workspace: workspace.map_or(dir.clone(), |w| w.display().to_string()),
        temp: dir,
        writable,
        protected: Vec::new(),
        off,
        read_only: false,
    };
    let plan = harn_core::work::containment::plan(&need, &offer());
    make_missing(&plan, &need.writable);
    // harn's own git commands get the run's default tmpfs size.
    let size = harn_core::limits::RUN_DEFAULTS.tmpfs;
    // harn's own git commands may reach a cluster's repository with the person's credentials;
    // nothing they run is the run's (no hook, no monitor, confined).
    let confine = Confine::prepare(&plan, None, Some(temp.0.clone()), size)?.with_credentials();
    Ok((confine, temp))
}
