//! What every process a run segment spawns (its workflow, each agent call) gets between fork
//! and exec: it joins the segment's cgroup, and, where the core's plan says so
//! (`harn_core::workflow::containment::plan`), enters a mount namespace in which the root's
//! `.harnery/` is bound read-only (in a user namespace of its own when harn is not root) and
//! restricts itself with Landlock, so it may write beneath its workspace, its `TMPDIR` and its
//! harnesses' state directories only, and may not signal any process outside its domain.
//!
//! Everything is prepared in the parent: the Landlock ruleset (built with the `landlock`
//! crate), the paths and the uid and gid maps as C strings. The child only makes
//! async-signal-safe system calls on memory and descriptors the closure owns, in this order:
//! parent-death signal, cgroup, namespaces and mounts, no-new-privileges, Landlock (a
//! Landlock domain may not mount, so the mounts come first).

use harn_core::workflow::containment::{NamespaceKind, Offer, Plan};
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, OnceLock};

/// A run segment's confinement, shared by its workflow and its agent calls.
#[derive(Clone, Debug, Default)]
pub struct Confine {
    /// The segment's cgroup, when it has one.
    pub cgroup: Option<PathBuf>,
    /// The segment's private temporary directory, given to every child as `TMPDIR`.
    pub temp: Option<PathBuf>,
    /// The Landlock ruleset every child restricts itself with.
    landlock: Option<Arc<OwnedFd>>,
    /// The mount namespace every child enters.
    namespace: Option<Arc<Namespace>>,
    /// The namespace a call whose program sandboxes itself by mounting enters instead of
    /// Landlock ([`harn_core::workflow::adapter::sandbox_mounts`]).
    own_sandbox: Option<Arc<Namespace>>,
}

/// What a child needs to bind `.harnery/` read-only in a namespace of its own.
#[derive(Debug)]
struct Namespace {
    /// The root's `.harnery/`.
    harnery: CString,
    /// `Some` for a user namespace: the `uid_map` and `gid_map` lines mapping the host's ids.
    maps: Option<(Vec<u8>, Vec<u8>)>,
}

impl Namespace {
    fn new(dir: &str, userns: bool) -> Result<Namespace, String> {
        let harnery = CString::new(dir.as_bytes()).map_err(|e| format!("{dir}: {e}"))?;
        let maps = userns.then(|| {
            let uid = rustix::process::geteuid().as_raw();
            let gid = rustix::process::getegid().as_raw();
            (format!("{uid} {uid} 1\n").into_bytes(), format!("{gid} {gid} 1\n").into_bytes())
        });
        Ok(Namespace { harnery, maps })
    }
}

impl Confine {
    /// The confinement a segment's `plan` asks for, built now: the ruleset with a rule for
    /// each writable path that exists, the namespace's paths and maps.
    pub fn prepare(
        plan: &Plan,
        cgroup: Option<PathBuf>,
        temp: Option<PathBuf>,
    ) -> Result<Confine, String> {
        let landlock = match plan.landlock {
            Some(abi) => Some(Arc::new(ruleset(abi, &plan.writable)?)),
            None => None,
        };
        let namespace = match &plan.bind_readonly {
            Some(dir) => Some(Arc::new(Namespace::new(dir, plan.userns)?)),
            None => None,
        };
        let own_sandbox = match &plan.own_sandbox {
            Some((dir, userns)) if plan.landlock.is_some() => {
                Some(Arc::new(Namespace::new(dir, *userns)?))
            }
            _ => None,
        };
        Ok(Confine { cgroup, temp, landlock, namespace, own_sandbox })
    }

    /// The confinement of a call whose program brings a sandbox that has to mount: the
    /// same cgroup and `TMPDIR`, the namespace with `.harnery/` read-only, no Landlock. An
    /// unconfined segment's calls stay unconfined.
    pub fn for_own_sandbox(&self) -> Confine {
        match &self.own_sandbox {
            Some(ns) => Confine {
                landlock: None,
                namespace: Some(ns.clone()),
                own_sandbox: None,
                ..self.clone()
            },
            None => self.clone(),
        }
    }

    /// Sets `command` up to start inside the segment's cgroup and confinement (with the
    /// parent-death signal every run child gets, and `TMPDIR`). Fails when the cgroup exists
    /// but cannot be joined: a child started outside it could outlive the run.
    pub fn apply(&self, command: &mut Command) -> std::io::Result<()> {
        let join: Option<OwnedFd> = match &self.cgroup {
            Some(leaf) => {
                let procs = leaf.join("cgroup.procs");
                Some(std::fs::OpenOptions::new().write(true).open(&procs)?.into())
            }
            None => None,
        };
        if let Some(temp) = &self.temp {
            command.env("TMPDIR", temp);
        }
        let landlock = self.landlock.clone();
        let namespace = self.namespace.clone();
        // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
        // system calls (prctl, write, open, close, unshare, mount, mount_setattr,
        // landlock_restrict_self) on memory and descriptors it owns, allocating nothing.
        unsafe {
            command.pre_exec(move || {
                rustix::process::set_parent_process_death_signal(Some(
                    rustix::process::Signal::KILL,
                ))
                .map_err(std::io::Error::from)?;
                if let Some(fd) = &join {
                    let fd = std::os::fd::BorrowedFd::borrow_raw(fd.as_raw_fd());
                    rustix::io::write(fd, b"0").map_err(std::io::Error::from)?;
                }
                if let Some(ns) = &namespace {
                    enter_namespace(ns)?;
                }
                if let Some(ruleset) = &landlock {
                    restrict_self(ruleset.as_raw_fd())?;
                }
                Ok(())
            });
        }
        Ok(())
    }
}

/// Builds the ruleset: every write right Landlock `abi` knows is handled, and allowed beneath
/// each writable path that exists; with ABI 6, signals to processes outside the domain are
/// refused too (a run may not stop its own host).
fn ruleset(abi: u32, writable: &[String]) -> Result<OwnedFd, String> {
    use landlock::{
        path_beneath_rules, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr,
        RulesetCreatedAttr, Scope, ABI,
    };
    let abi = match abi {
        1 => ABI::V1,
        2 => ABI::V2,
        3 => ABI::V3,
        4 => ABI::V4,
        5 => ABI::V5,
        6 => ABI::V6,
        _ => ABI::V7,
    };
    let err = |e: &dyn std::fmt::Display| format!("landlock: {e}");
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_write(abi))
        .map_err(|e| err(&e))?;
    if abi >= ABI::V6 {
        ruleset = ruleset.scope(Scope::Signal).map_err(|e| err(&e))?;
    }
    let existing: Vec<&String> =
        writable.iter().filter(|p| std::path::Path::new(p).exists()).collect();
    // Devices (a terminal, /dev/null) are written by every program.
    let devices = ["/dev"];
    let created = ruleset
        .create()
        .map_err(|e| err(&e))?
        .add_rules(path_beneath_rules(
            existing.iter().map(|p| p.as_str()).chain(devices),
            AccessFs::from_write(abi),
        ))
        .map_err(|e| err(&e))?;
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or_else(|| "landlock: the kernel gave no ruleset".to_owned())
}

/// In the child: a mount namespace (in a user namespace mapping our own ids, when not root)
/// whose mounts no longer propagate back, and `.harnery/` bound onto itself read-only.
///
/// # Safety
/// Between fork and exec only: system calls on the prepared data.
unsafe fn enter_namespace(ns: &Namespace) -> std::io::Result<()> {
    let check = |r: libc::c_int| if r < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) };
    let flags =
        if ns.maps.is_some() { libc::CLONE_NEWUSER | libc::CLONE_NEWNS } else { libc::CLONE_NEWNS };
    check(libc::unshare(flags))?;
    if let Some((uid_map, gid_map)) = &ns.maps {
        write_file(c"/proc/self/setgroups", b"deny")?;
        write_file(c"/proc/self/uid_map", uid_map)?;
        write_file(c"/proc/self/gid_map", gid_map)?;
    }
    let none = std::ptr::null();
    check(libc::mount(none, c"/".as_ptr(), none, libc::MS_REC | libc::MS_SLAVE, std::ptr::null()))?;
    let dir = ns.harnery.as_ptr();
    check(libc::mount(dir, dir, none, libc::MS_BIND | libc::MS_REC, std::ptr::null()))?;
    // mount_setattr changes only the read-only flag, keeping the flags a user namespace may
    // not clear (nosuid, nodev) as they are.
    let attr = MountAttr { attr_set: MOUNT_ATTR_RDONLY, attr_clr: 0, propagation: 0, userns_fd: 0 };
    let r = libc::syscall(
        libc::SYS_mount_setattr,
        libc::AT_FDCWD,
        dir,
        libc::AT_RECURSIVE,
        &attr as *const MountAttr,
        std::mem::size_of::<MountAttr>(),
    );
    check(r as libc::c_int)
}

/// `struct mount_attr` from linux/mount.h.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `MOUNT_ATTR_RDONLY` from linux/mount.h.
const MOUNT_ATTR_RDONLY: u64 = 0x1;

/// Writes `bytes` to `path` with open, write, close.
///
/// # Safety
/// Async-signal-safe: for the child between fork and exec.
unsafe fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> std::io::Result<()> {
    let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
    let err = std::io::Error::last_os_error();
    libc::close(fd);
    if n != bytes.len() as isize {
        return Err(err);
    }
    Ok(())
}

/// In the child: no new privileges (Landlock requires it of an unprivileged process), then
/// the ruleset. From here on the process and everything it starts are confined.
///
/// # Safety
/// Async-signal-safe: for the child between fork and exec.
unsafe fn restrict_self(ruleset: libc::c_int) -> std::io::Result<()> {
    if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// What this machine offers, probed once per process: the kernel's Landlock ABI, and whether
/// a child can bind a directory read-only in a namespace of its own (tried in a throwaway
/// child, which is how an AppArmor or sysctl refusal of user namespaces shows).
pub fn offer() -> Offer {
    static OFFER: OnceLock<Offer> = OnceLock::new();
    OFFER.get_or_init(|| Offer { landlock: landlock_abi(), namespace: namespace_probe() }).clone()
}

/// The kernel's Landlock ABI version.
fn landlock_abi() -> Result<u32, String> {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: the version query takes no ruleset attributes and returns a number.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    match r {
        n if n > 0 => Ok(n as u32),
        _ => {
            let e = std::io::Error::last_os_error();
            Err(match e.raw_os_error() {
                Some(libc::ENOSYS) => "this kernel has no Landlock (Linux 5.13 or later)".into(),
                Some(libc::EOPNOTSUPP) => "Landlock is not enabled at boot (lsm=landlock)".into(),
                _ => format!("Landlock is not available: {e}"),
            })
        }
    }
}

/// Tries, in a throwaway child, what a confined child will do: unshare and bind a directory
/// read-only.
fn namespace_probe() -> Result<NamespaceKind, String> {
    let root = rustix::process::geteuid().is_root();
    let kind = if root { NamespaceKind::Mount } else { NamespaceKind::UserAndMount };
    let dir = std::env::temp_dir();
    let probe = CString::new(dir.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())?;
    let ns = Namespace { harnery: probe, ..Namespace::new("/", !root)? };
    let mut command = Command::new("/bin/true");
    command.stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null());
    command.stderr(std::process::Stdio::null());
    // SAFETY: as in `Confine::apply`: the prepared data, async-signal-safe calls only.
    unsafe {
        command.pre_exec(move || enter_namespace(&ns));
    }
    let what = if root { "a mount namespace" } else { "a user and mount namespace" };
    match command.status() {
        Ok(s) if s.success() => Ok(kind),
        Ok(s) => Err(format!("{what} could not be made here ({s})")),
        Err(e) => Err(format!("{what} could not be made here: {e}")),
    }
}

/// `path` as an absolute path: `~` and `~/…` in the home directory, a relative path in the
/// root, without a trailing `/`.
pub fn resolve(root: &std::path::Path, path: &str) -> String {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let resolved = match (path.strip_prefix('~'), &home) {
        (Some(""), Some(h)) => h.clone(),
        (Some(rest), Some(h)) if rest.starts_with('/') => h.join(rest.trim_start_matches('/')),
        _ if path.starts_with('/') => PathBuf::from(path),
        _ => root.join(path),
    };
    let text = resolved.display().to_string();
    match text.trim_end_matches('/') {
        "" => "/".to_owned(),
        t => t.to_owned(),
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
    let need = harn_core::workflow::containment::Need {
        root: root.display().to_string(),
        workspace: workspace.map_or(dir.clone(), |w| w.display().to_string()),
        temp: dir,
        writable,
        off,
    };
    let plan = harn_core::workflow::containment::plan(&need, &offer());
    let confine = Confine::prepare(&plan, None, Some(temp.0.clone()))?;
    Ok((confine, temp))
}
