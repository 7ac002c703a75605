//! The system calls a run's child makes between fork and exec, on data the parent prepared:
//! a session of its own (no controlling terminal), the parent-death signal, its cgroup, then
//! a namespace of its own (a user namespace, so its capabilities are the namespace's, and a
//! mount namespace) with the guarded paths bound read-only, a `/dev` holding only what
//! programs need and a pseudo-terminal instance of its own, the cgroup hierarchy and the
//! machine's listening Unix sockets covered, then a second user and mount namespace that locks
//! every one of those mounts (no capability can make them writable or take them away), then
//! Landlock. A sealed child (a call whose program sandboxes itself by mounting) gets
//! everything but its writable paths read-only, a `/tmp` of its own over the machine's, a PID
//! and cgroup namespace,
//! the same lock, and Landlock's scopes alone.
//!
//! Only async-signal-safe system calls, on memory and descriptors prepared before the fork;
//! nothing here allocates. The sealed child's extra processes are made with a raw `clone`, not
//! the C library's `fork`, whose handlers are not safe here.

use std::ffi::{CStr, CString};
use std::io::{Error, Result};

/// Everything a child needs, prepared in the parent.
#[derive(Clone, Debug, Default)]
pub struct Setup {
    /// `Some`: a user namespace with these `uid_map` and `gid_map` lines.
    pub maps: Option<(Vec<u8>, Vec<u8>)>,
    /// A mount namespace, with a `/dev` of its own and the read-only binds.
    pub mount: bool,
    /// Paths bound read-only onto themselves (with everything below them).
    pub readonly: Vec<CString>,
    /// Sealed: everything read-only but the writable paths and a `/tmp` of its own; then a PID
    /// and cgroup namespace, and a second user namespace locking every mount.
    pub seal: Option<Seal>,
    /// The cgroup v2 mount point, covered with an empty read-only tmpfs: a child that could
    /// name a cgroup directory could start a process in it (`clone3` into a cgroup) and leave
    /// its run's.
    pub cgroups: Option<CString>,
    /// Listening Unix sockets of the machine (outside the writable paths), each covered with
    /// `/dev/null`: a session bus or a service manager's socket would start anything the
    /// child asks for, outside its containment.
    pub sockets: Vec<CString>,
    /// The person's credential files and directories
    /// (`harn_core::work::containment::credentials::hidden`), each covered: a directory with an
    /// empty read-only tmpfs, a file with `/dev/null`.
    pub hidden: Vec<CString>,
    /// A network namespace of the child's own (`None`: the machine's network).
    pub net: Option<Net>,
    /// Landlock, built in the child after the mounts, so that its rules name the namespace's
    /// own `/dev/pts` and `/dev/shm`.
    pub landlock: Option<Rules>,
    /// The options of its private `/dev/shm` (`mode=1777,size=N`): every tmpfs a run gets is
    /// sized, or it could fill half the machine's memory.
    pub shm: CString,
    /// The options of a sealed child's `/tmp` (`mode=0700,size=N`).
    pub tmp: CString,
    /// `RLIMIT_NPROC`, where no cgroup holds the run's task limit: the one rlimit that bounds
    /// a fork bomb (it counts every process of the user, so it is a coarse stand-in).
    pub nproc: Option<u64>,
}

impl Setup {
    /// The tmpfs options of `/dev/shm` and a sealed `/tmp` for tmpfs of at most `size` bytes
    /// (the kernel's default, half the memory, when `None`).
    pub fn tmpfs_options(size: Option<u64>) -> (CString, CString) {
        let sized = |mode: &str| {
            let text = match size {
                Some(n) => format!("mode={mode},size={n}"),
                None => format!("mode={mode}"),
            };
            CString::new(text).expect("no NUL in digits")
        };
        (sized("1777"), sized("0700"))
    }
}

/// What a sealed child may write.
#[derive(Clone, Debug, Default)]
pub struct Seal {
    /// The paths that stay writable (at most [`SEAL_MAX`]).
    pub writable: Vec<CString>,
}

/// The most writable paths a sealed child takes (the core's plan keeps to it).
pub const SEAL_MAX: usize = harn_core::work::containment::SEAL_MAX;

/// A Landlock ruleset to build: the access rights handled, the scopes, and what is allowed
/// beneath each path (a path that does not exist is skipped).
#[derive(Clone, Debug, Default)]
pub struct Rules {
    /// `handled_access_fs`.
    pub handled: u64,
    /// `scoped` (ABI 6: signals).
    pub scoped: u64,
    /// Each path and the rights allowed beneath it.
    pub paths: Vec<(CString, u64)>,
}

/// The rights Landlock allows on a file that is not a directory.
pub const FILE_RIGHTS: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;
const EXECUTE: u64 = 1 << 0;
/// `LANDLOCK_ACCESS_FS_WRITE_FILE`.
pub const WRITE_FILE: u64 = 1 << 1;
const READ_FILE: u64 = 1 << 2;
/// `LANDLOCK_ACCESS_FS_TRUNCATE` (ABI 3).
pub const TRUNCATE: u64 = 1 << 14;
/// `LANDLOCK_ACCESS_FS_IOCTL_DEV` (ABI 5).
pub const IOCTL_DEV: u64 = 1 << 15;

/// The devices a child's `/dev` holds, bound from the machine's.
pub const DEVICES: [&CStr; 6] =
    [c"/dev/null", c"/dev/zero", c"/dev/full", c"/dev/random", c"/dev/urandom", c"/dev/tty"];

fn check(r: libc::c_long) -> Result<()> {
    if r < 0 {
        Err(Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The whole setup, in order. Returns in the process that is to exec; a sealed child's
/// intermediate processes never return.
///
/// # Safety
/// Between fork and exec only.
pub unsafe fn enter(
    s: &Setup,
    join: &[std::os::fd::OwnedFd],
    cwd: Option<&CStr>,
    parent: libc::pid_t,
) -> Result<()> {
    // No descriptor reaches the program but its standard streams (an open terminal or a file
    // of the person's the caller passed on would be a door): every other one closes at exec.
    // The error pipe of `Command` is close-on-exec already, so a failed exec is still told.
    libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC);
    // A session of its own: no controlling terminal, so `/dev/tty` names nothing and no
    // terminal's input can be faked from here.
    check(libc::setsid() as libc::c_long)?;
    die_with(parent)?;
    if let Some(n) = s.nproc {
        let limit = libc::rlimit { rlim_cur: n as libc::rlim_t, rlim_max: n as libc::rlim_t };
        check(libc::setrlimit(libc::RLIMIT_NPROC, &limit) as libc::c_long)?;
    }
    for fd in join {
        let n = libc::write(std::os::fd::AsRawFd::as_raw_fd(fd), b"0".as_ptr().cast(), 1);
        check(n as libc::c_long)?;
    }
    if s.mount {
        namespace(s)?;
        if let Some(cwd) = cwd {
            // The binds may cover the directory the child was in; enter it again, through
            // the namespace's mounts.
            check(libc::chdir(cwd.as_ptr()) as _)?;
        }
    }
    if s.seal.is_some() {
        return seal(s);
    }
    if let Some((uid_map, gid_map)) = &s.maps {
        lock(uid_map, gid_map)?;
    }
    if let Some(rules) = &s.landlock {
        restrict(rules)?;
    }
    Ok(())
}

/// The parent-death signal, and a check that the parent did not die before it was set.
unsafe fn die_with(parent: libc::pid_t) -> Result<()> {
    check(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) as _)?;
    if parent > 0 && libc::getppid() != parent {
        libc::_exit(127);
    }
    Ok(())
}

/// Locks every mount made so far: a second user namespace and a mount namespace in it, in
/// which the mounts copied from the first are locked together and their read-only flag with
/// them, so that even the capabilities the child holds in its namespace (which
/// `mount_setattr`, unlike `mount`, lets past Landlock) cannot make them writable or take
/// them away.
unsafe fn lock(uid_map: &[u8], gid_map: &[u8]) -> Result<()> {
    check(libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) as _)?;
    write_maps(uid_map, gid_map)
}

/// The namespace: unshared, its mounts made slaves so nothing propagates back, the sealed
/// layout, the read-only binds, and a `/dev` of its own.
unsafe fn namespace(s: &Setup) -> Result<()> {
    let flags = match s.maps {
        Some(_) => libc::CLONE_NEWUSER | libc::CLONE_NEWNS,
        None => libc::CLONE_NEWNS,
    };
    let net = if s.net.is_some() { libc::CLONE_NEWNET } else { 0 };
    check(libc::unshare(flags | net) as _)?;
    if let Some((uid_map, gid_map)) = &s.maps {
        write_maps(uid_map, gid_map)?;
    }
    if s.net.is_some() {
        loopback_up()?;
    }
    let none = std::ptr::null();
    check(libc::mount(none, c"/".as_ptr(), none, libc::MS_REC | libc::MS_SLAVE, none.cast()) as _)?;
    if let Some(seal) = &s.seal {
        sealed_layout(s, seal)?;
    }
    for path in &s.readonly {
        if bind(path)? {
            set_readonly(path, true, true)?;
        }
    }
    make_dev(&s.shm)?;
    if let Some(dir) = &s.cgroups {
        let tmpfs = c"tmpfs".as_ptr();
        let flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        let data = c"size=4k,mode=0555".as_ptr();
        match check(libc::mount(tmpfs, dir.as_ptr(), tmpfs, flags, data.cast()) as _) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            other => other?,
        }
    }
    for path in &s.hidden {
        hide(path)?;
    }
    // The only way out of the namespace, started once its mounts are made (the proxy's
    // socket is in the segment's temporary directory, which they keep).
    if let Some(Net { proxy: Some(proxy), .. }) = &s.net {
        start_forwarder(s.net.as_ref().expect("matched"), proxy)?;
    }
    for socket in &s.sockets {
        let (none, data) = (std::ptr::null(), std::ptr::null());
        let r = libc::mount(c"/dev/null".as_ptr(), socket.as_ptr(), none, libc::MS_BIND, data);
        // A socket gone since it was listed, or one the child's own credentials cannot
        // reach (a directory it may not search), needs no cover.
        let unreachable = [libc::ENOENT, libc::EACCES, libc::ENOTDIR, libc::ELOOP];
        if r < 0 && !unreachable.contains(&Error::last_os_error().raw_os_error().unwrap_or(0)) {
            return Err(Error::last_os_error());
        }
    }
    Ok(())
}

/// Covers the credential at `path`: a directory with an empty read-only tmpfs, anything else
/// with `/dev/null`; a path that is not there needs no cover.
unsafe fn hide(path: &CStr) -> Result<()> {
    let mut st: libc::stat = std::mem::zeroed();
    if libc::stat(path.as_ptr(), &mut st) < 0 {
        return Ok(());
    }
    let none = std::ptr::null();
    let r = if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
        let tmpfs = c"tmpfs".as_ptr();
        let flags = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        let data = c"size=4k,mode=0700".as_ptr();
        libc::mount(tmpfs, path.as_ptr(), tmpfs, flags, data.cast())
    } else {
        libc::mount(c"/dev/null".as_ptr(), path.as_ptr(), none, libc::MS_BIND, none.cast())
    };
    let unreachable = [libc::ENOENT, libc::EACCES, libc::ENOTDIR, libc::ELOOP];
    if r < 0 && !unreachable.contains(&Error::last_os_error().raw_os_error().unwrap_or(0)) {
        return Err(Error::last_os_error());
    }
    Ok(())
}

/// The sealed layout: every writable path cloned first, as detached trees, while they are
/// still writable; then every mount made read-only; then a `/tmp` of the child's own over
/// the machine's (an overlay: reads see the machine's `/tmp`, writes land in memory and go
/// with the call, and no other user's program finds them); then each clone attached back at
/// its own path (a path missing in the new `/tmp` is made there).
///
/// Where another program has a mount below the machine's `/tmp` (a tmpfs of its own, a test's
/// small disk), that mount is locked to `/tmp` in the child's user namespace, and the kernel
/// refuses both a copy of `/tmp` without it and an overlay whose lower layer holds it (EINVAL):
/// the call then keeps the machine's `/tmp` as it is, read-only like everything else, with its
/// writable paths attached below it. Before, such a mount made every sealed call started
/// meanwhile fail to start.
unsafe fn sealed_layout(s: &Setup, seal: &Seal) -> Result<()> {
    let mut trees = [-1; SEAL_MAX];
    let n = seal.writable.len().min(SEAL_MAX);
    for (tree, path) in trees.iter_mut().zip(&seal.writable[..n]) {
        *tree = clone_tree(path, true)?.unwrap_or(-1);
    }
    let machine_tmp = match clone_tree(c"/tmp", false) {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => None,
        other => other?,
    };
    set_readonly(c"/", true, true)?;
    let attached = (|| {
        if let Some(lower) = machine_tmp {
            private_tmp(lower, &s.tmp)?;
        }
        for (&tree, path) in trees.iter().zip(&seal.writable[..n]) {
            if tree >= 0 {
                make_mountpoint(path, tree)?;
                attach(tree, path)?;
            }
        }
        Ok(())
    })();
    for fd in trees.into_iter().chain(machine_tmp).filter(|&fd| fd >= 0) {
        libc::close(fd);
    }
    attached
}

/// `/tmp` as an overlay: the machine's (the detached tree `lower`) below, a tmpfs above.
unsafe fn private_tmp(lower: libc::c_int, options: &CStr) -> Result<()> {
    let tmpfs = c"tmpfs".as_ptr();
    let flags = libc::MS_NOSUID | libc::MS_NODEV;
    check(libc::mount(tmpfs, c"/tmp".as_ptr(), tmpfs, flags, options.as_ptr().cast()) as _)?;
    for (dir, mode) in [(c"/tmp/.lower", 0o700), (c"/tmp/.upper", 0o1777), (c"/tmp/.work", 0o700)] {
        check(libc::mkdir(dir.as_ptr(), 0o700) as _)?;
        check(libc::chmod(dir.as_ptr(), mode) as _)?;
    }
    attach(lower, c"/tmp/.lower")?;
    let overlay = c"overlay".as_ptr();
    let layers = c"lowerdir=/tmp/.lower,upperdir=/tmp/.upper,workdir=/tmp/.work";
    check(libc::mount(overlay, c"/tmp".as_ptr(), overlay, flags, layers.as_ptr().cast()) as _)
}

/// A detached copy of the mount at `path` (with everything below it when `recursive`),
/// `None` when it does not exist.
unsafe fn clone_tree(path: &CStr, recursive: bool) -> Result<Option<libc::c_int>> {
    const AT_RECURSIVE: libc::c_uint = 0x8000;
    let below = if recursive { AT_RECURSIVE } else { 0 };
    let flags = OPEN_TREE_CLONE | below | libc::O_CLOEXEC as libc::c_uint;
    let fd = libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, path.as_ptr(), flags);
    if fd < 0 && Error::last_os_error().raw_os_error() == Some(libc::ENOENT) {
        return Ok(None);
    }
    check(fd)?;
    Ok(Some(fd as libc::c_int))
}

/// Attaches the detached tree `tree` at `path`.
unsafe fn attach(tree: libc::c_int, path: &CStr) -> Result<()> {
    let empty = c"".as_ptr();
    let r = libc::syscall(
        libc::SYS_move_mount,
        tree,
        empty,
        libc::AT_FDCWD,
        path.as_ptr(),
        MOVE_MOUNT_F_EMPTY_PATH,
    );
    check(r)
}

/// Makes `path` (and its parents) where it is missing, a directory or a file as `tree` is.
unsafe fn make_mountpoint(path: &CStr, tree: libc::c_int) -> Result<()> {
    let bytes = path.to_bytes();
    let mut buf = [0u8; libc::PATH_MAX as usize];
    if bytes.len() >= buf.len() {
        return Err(Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    buf[..bytes.len()].copy_from_slice(bytes);
    let mut st: libc::stat = std::mem::zeroed();
    let is_dir = libc::fstat(tree, &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFDIR;
    for end in (1..=bytes.len()).filter(|&i| i == bytes.len() || bytes[i] == b'/') {
        let saved = buf[end];
        buf[end] = 0;
        let part = buf.as_ptr().cast::<libc::c_char>();
        let last = end == bytes.len();
        let r = if last && !is_dir {
            let flags = libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC;
            let fd = libc::open(part, flags | libc::O_NONBLOCK | libc::O_NOFOLLOW, 0o600);
            if fd >= 0 {
                libc::close(fd);
            }
            fd
        } else {
            libc::mkdir(part, 0o700)
        };
        buf[end] = saved;
        if r < 0 {
            match Error::last_os_error().raw_os_error() {
                Some(libc::EEXIST) | Some(libc::EROFS) => {}
                _ => return Err(Error::last_os_error()),
            }
        }
    }
    Ok(())
}

/// Binds `path` onto itself with everything below it; false when it does not exist.
unsafe fn bind(path: &CStr) -> Result<bool> {
    let none = std::ptr::null();
    let p = path.as_ptr();
    match check(libc::mount(p, p, none, libc::MS_BIND | libc::MS_REC, none.cast()) as _) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Sets (or clears) the read-only flag of the mount at `path` (and of every mount below it
/// when `recursive`), keeping the flags a user namespace may not clear (nosuid, nodev) as
/// they are.
unsafe fn set_readonly(path: &CStr, on: bool, recursive: bool) -> Result<()> {
    let attr = MountAttr {
        attr_set: if on { MOUNT_ATTR_RDONLY } else { 0 },
        attr_clr: if on { 0 } else { MOUNT_ATTR_RDONLY },
        propagation: 0,
        userns_fd: 0,
    };
    let r = libc::syscall(
        libc::SYS_mount_setattr,
        libc::AT_FDCWD,
        path.as_ptr(),
        if recursive { libc::AT_RECURSIVE } else { 0 },
        &attr as *const MountAttr,
        std::mem::size_of::<MountAttr>(),
    );
    check(r)
}

/// `struct mount_attr` from linux/mount.h.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;

/// A `/dev` of the child's own, as a container runtime makes one: a small tmpfs holding the
/// machine's null, zero, full, random, urandom and tty (bound, not made: a user namespace
/// may not make devices), a pseudo-terminal instance of its own at `/dev/pts` (`/dev/ptmx`
/// leads there), a private `/dev/shm`, and the `/proc/self/fd` links. None of the person's
/// terminals is in it.
unsafe fn make_dev(shm: &CStr) -> Result<()> {
    let mut trees = [-1; DEVICES.len()];
    for (tree, dev) in trees.iter_mut().zip(DEVICES) {
        let flags = OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint;
        let fd = libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, dev.as_ptr(), flags);
        check(fd)?;
        *tree = fd as libc::c_int;
    }
    let old = libc::umask(0);
    let made = populate(&trees, shm);
    libc::umask(old);
    for fd in trees {
        libc::close(fd);
    }
    made
}

unsafe fn populate(trees: &[libc::c_int], shm: &CStr) -> Result<()> {
    let (nosuid, noexec) = (libc::MS_NOSUID, libc::MS_NOEXEC);
    let tmpfs = c"tmpfs".as_ptr();
    let data = c"mode=0755,size=64k".as_ptr();
    check(libc::mount(tmpfs, c"/dev".as_ptr(), tmpfs, nosuid | noexec, data.cast()) as _)?;
    for (&tree, dev) in trees.iter().zip(DEVICES) {
        let fd = libc::open(dev.as_ptr(), libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC, 0o666);
        check(fd as _)?;
        libc::close(fd);
        attach(tree, dev)?;
    }
    check(libc::mkdir(c"/dev/pts".as_ptr(), 0o755) as _)?;
    let devpts = c"devpts".as_ptr();
    let opts = c"newinstance,ptmxmode=0666,mode=0620".as_ptr();
    check(libc::mount(devpts, c"/dev/pts".as_ptr(), devpts, nosuid | noexec, opts.cast()) as _)?;
    check(libc::symlink(c"pts/ptmx".as_ptr(), c"/dev/ptmx".as_ptr()) as _)?;
    check(libc::mkdir(c"/dev/shm".as_ptr(), 0o1777) as _)?;
    let shm = shm.as_ptr();
    let flags = nosuid | libc::MS_NODEV;
    check(libc::mount(tmpfs, c"/dev/shm".as_ptr(), tmpfs, flags, shm.cast()) as _)?;
    let links = [
        (c"/proc/self/fd", c"/dev/fd"),
        (c"/proc/self/fd/0", c"/dev/stdin"),
        (c"/proc/self/fd/1", c"/dev/stdout"),
        (c"/proc/self/fd/2", c"/dev/stderr"),
    ];
    for (target, link) in links {
        check(libc::symlink(target.as_ptr(), link.as_ptr()) as _)?;
    }
    Ok(())
}

/// Writes the user namespace's maps (`setgroups` denied first, as an unprivileged writer
/// must).
unsafe fn write_maps(uid_map: &[u8], gid_map: &[u8]) -> Result<()> {
    write_file(c"/proc/self/setgroups", b"deny")?;
    write_file(c"/proc/self/uid_map", uid_map)?;
    write_file(c"/proc/self/gid_map", gid_map)
}

/// Writes `bytes` to `path` with open, write, close.
unsafe fn write_file(path: &CStr, bytes: &[u8]) -> Result<()> {
    let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
    check(fd as _)?;
    let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
    let err = if n < 0 { Error::last_os_error() } else { Error::from_raw_os_error(libc::EIO) };
    libc::close(fd);
    if n != bytes.len() as isize {
        return Err(err);
    }
    Ok(())
}

/// No new privileges (Landlock requires it of an unprivileged process), then the ruleset,
/// built here: from now on the process and everything it starts are confined.
unsafe fn restrict(rules: &Rules) -> Result<()> {
    #[repr(C)]
    struct RulesetAttr {
        handled_access_fs: u64,
        handled_access_net: u64,
        scoped: u64,
    }
    #[repr(C, packed)]
    struct PathBeneath {
        allowed_access: u64,
        parent_fd: i32,
    }
    const RULE_PATH_BENEATH: libc::c_int = 1;
    let attr = RulesetAttr { handled_access_fs: rules.handled, handled_access_net: 0, scoped: 0 };
    // A kernel older than the `scoped` field takes the shorter structure; its unknown tail
    // must then be zero, which it is.
    let attr = RulesetAttr { scoped: rules.scoped, ..attr };
    let ruleset = libc::syscall(
        libc::SYS_landlock_create_ruleset,
        &attr as *const RulesetAttr,
        std::mem::size_of::<RulesetAttr>(),
        0u32,
    );
    check(ruleset)?;
    let ruleset = ruleset as libc::c_int;
    let added = (|| {
        for (path, allowed) in &rules.paths {
            let fd = libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
            if fd < 0 {
                if Error::last_os_error().raw_os_error() == Some(libc::ENOENT) {
                    continue;
                }
                return Err(Error::last_os_error());
            }
            let mut st: libc::stat = std::mem::zeroed();
            let is_dir =
                libc::fstat(fd, &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFDIR;
            let mut allowed = *allowed & rules.handled;
            if !is_dir {
                allowed &= FILE_RIGHTS;
            }
            let beneath = PathBeneath { allowed_access: allowed, parent_fd: fd };
            let r = libc::syscall(
                libc::SYS_landlock_add_rule,
                ruleset,
                RULE_PATH_BENEATH,
                &beneath as *const PathBeneath,
                0u32,
            );
            let err = Error::last_os_error();
            libc::close(fd);
            if r < 0 && allowed != 0 {
                return Err(err);
            }
        }
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) as _)?;
        check(libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32))
    })();
    libc::close(ruleset);
    added
}

/// The seal: a PID and cgroup namespace, whose first process mounts its own `/proc`, then
/// makes a second user and mount namespace (every mount the first one made is now locked:
/// it can be neither unmounted nor made writable again, capabilities or not) and starts the
/// process that execs, under Landlock's scopes alone (no signal, no abstract socket outside;
/// it handles no file access, so the program's own sandbox may still mount). The process
/// harn started stays outside, ignores the signals harn sends the group (the one that execs
/// gets them), and ends as that process ended. Neither of the two may be dumped: they are
/// copies of harn, its environment included, which the sealed program must not read.
unsafe fn seal(s: &Setup) -> Result<()> {
    check(libc::unshare(libc::CLONE_NEWPID | libc::CLONE_NEWCGROUP) as _)?;
    let mut status_pipe = [-1; 2];
    check(libc::pipe2(status_pipe.as_mut_ptr(), libc::O_CLOEXEC) as _)?;
    let [read_end, write_end] = status_pipe;
    let outside_pid = libc::getpid();
    match fork() {
        -1 => Err(Error::last_os_error()),
        0 => {
            libc::close(read_end);
            first_in_namespace(s, write_end, outside_pid)
        }
        first => {
            libc::close(write_end);
            outside(first, read_end)
        }
    }
}

/// A new process, made with a raw `clone` (the C library's `fork` runs handlers that are not
/// safe between fork and exec of a multi-threaded parent).
unsafe fn fork() -> libc::pid_t {
    libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_ulong, 0usize, 0usize, 0usize, 0usize)
        as libc::pid_t
}

/// Every signal back to its default action: a copy of harn that never execs keeps harn's
/// handlers otherwise.
unsafe fn default_signals() {
    // 1 to 64: every signal Linux has (`_NSIG` is 65).
    for sig in 1..65 {
        if sig != libc::SIGKILL && sig != libc::SIGSTOP {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
}

/// The namespace's first process (its PID 1): returns in the child that execs, and in
/// itself reaps until that child ends, then reports its wait status and exits, which ends
/// every process left in the namespace.
unsafe fn first_in_namespace(
    s: &Setup,
    report: libc::c_int,
    outside_pid: libc::pid_t,
) -> Result<()> {
    default_signals();
    // Its parent is outside its PID namespace, where `getppid` cannot name it: the signal
    // alone, which `outside` (waiting for this process) cannot have missed.
    let _ = outside_pid;
    if die_with(0).is_err() {
        libc::_exit(126);
    }
    let proc_ = c"proc".as_ptr();
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    if libc::mount(proc_, c"/proc".as_ptr(), proc_, flags, std::ptr::null()) < 0 {
        die(c"harn: the sealed namespace's /proc could not be mounted\n");
    }
    let Some((uid_map, gid_map)) = &s.maps else {
        die(c"harn: a sealed namespace needs a user namespace\n");
    };
    if lock(uid_map, gid_map).is_err() {
        die(c"harn: the sealed namespace's mounts could not be locked\n");
    }
    // After the maps: a process that may not be dumped cannot write its own.
    libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    let first_pid = libc::getpid();
    let payload = fork();
    if payload == 0 {
        libc::close(report);
        die_with(first_pid)?;
        if let Some(rules) = &s.landlock {
            restrict(rules)?;
        }
        return Ok(());
    }
    if payload < 0 {
        die(c"harn: the sealed namespace could not start its process\n");
    }
    close_all_but(report);
    loop {
        let mut status = 0;
        let r = libc::waitpid(-1, &mut status, 0);
        if r == payload {
            libc::write(report, (&status as *const libc::c_int).cast(), 4);
            libc::_exit(0);
        }
        if r < 0 && Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            libc::_exit(0);
        }
    }
}

/// The process harn started, outside the namespace: waits for the report and ends the same
/// way the process that exec'd did (or, when the first process died before it could report,
/// as that one did).
unsafe fn outside(first: libc::pid_t, report: libc::c_int) -> ! {
    libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    close_all_but(report);
    default_signals();
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT, libc::SIGPIPE] {
        libc::signal(sig, libc::SIG_IGN);
    }
    let mut status: libc::c_int = 0;
    let mut got = 0usize;
    while got < 4 {
        let buf = (&mut status as *mut libc::c_int).cast::<u8>().add(got);
        match libc::read(report, buf.cast(), 4 - got) {
            n if n > 0 => got += n as usize,
            n if n < 0 && Error::last_os_error().raw_os_error() == Some(libc::EINTR) => {}
            _ => break,
        }
    }
    let mut first_status: libc::c_int = 0;
    while libc::waitpid(first, &mut first_status, 0) < 0
        && Error::last_os_error().raw_os_error() == Some(libc::EINTR)
    {}
    if got < 4 {
        status = first_status;
    }
    if libc::WIFEXITED(status) {
        libc::_exit(libc::WEXITSTATUS(status));
    }
    let sig = libc::WTERMSIG(status);
    libc::signal(sig, libc::SIG_DFL);
    let mut set: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut set);
    libc::sigaddset(&mut set, sig);
    libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    libc::kill(libc::getpid(), sig);
    libc::_exit(128 + sig)
}

/// Closes every descriptor but `keep` (the standard ones too: the exec'ing child holds the
/// pipes; a copy held here would keep them open past its end), one at a time where
/// `close_range` is refused.
unsafe fn close_all_but(keep: libc::c_int) {
    let below =
        keep <= 0 || libc::syscall(libc::SYS_close_range, 0u32, (keep - 1) as u32, 0u32) == 0;
    let above = libc::syscall(libc::SYS_close_range, (keep + 1) as u32, u32::MAX, 0u32) == 0;
    if below && above {
        return;
    }
    let mut limit: libc::rlimit = std::mem::zeroed();
    let most = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
        limit.rlim_cur.min(1 << 20) as libc::c_int
    } else {
        1024
    };
    for fd in (0..most).filter(|&fd| fd != keep) {
        libc::close(fd);
    }
}

/// Says why on stderr and exits 126, from a process that cannot return an error.
unsafe fn die(why: &CStr) -> ! {
    let bytes = why.to_bytes();
    libc::write(2, bytes.as_ptr().cast(), bytes.len());
    libc::_exit(126)
}

/// A run's own network namespace: its loopback brought up and, when it may reach anything,
/// a forwarder relaying to harn's proxy outside.
#[derive(Clone, Debug)]
pub struct Net {
    /// The proxy's socket (`None`: the run reaches nothing).
    pub proxy: Option<CString>,
    /// The port on `127.0.0.1` in the namespace where the forwarder takes the proxy's clients
    /// (`HTTP_PROXY`).
    pub port: u16,
    /// The loopback endpoints the policy lists, listened on in the namespace at the same port
    /// and tunnelled through the proxy (`CONNECT HOST:PORT`), for a client that goes to a
    /// loopback address directly rather than through a proxy.
    pub direct: Vec<(u16, CString)>,
}

/// The most loopback endpoints a namespace listens on directly.
pub const DIRECT_MAX: usize = 8;

/// Brings the namespace's loopback interface up.
unsafe fn loopback_up() -> Result<()> {
    let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
    check(fd as _)?;
    let mut ifr: libc::ifreq = std::mem::zeroed();
    ifr.ifr_name[0] = b'l' as libc::c_char;
    ifr.ifr_name[1] = b'o' as libc::c_char;
    let got = libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut ifr);
    if got == 0 {
        ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
    }
    let set = if got == 0 { libc::ioctl(fd, libc::SIOCSIFFLAGS, &ifr) } else { got };
    let err = Error::last_os_error();
    libc::close(fd);
    if set < 0 {
        return Err(err);
    }
    Ok(())
}

/// A socket listening on `127.0.0.1:port`.
unsafe fn listen_loopback(port: u16) -> Result<libc::c_int> {
    let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
    check(fd as _)?;
    let one: libc::c_int = 1;
    let size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    libc::setsockopt(
        fd,
        libc::SOL_SOCKET,
        libc::SO_REUSEADDR,
        (&one as *const libc::c_int).cast(),
        size,
    );
    let mut addr: libc::sockaddr_in = std::mem::zeroed();
    addr.sin_family = libc::AF_INET as libc::sa_family_t;
    addr.sin_port = port.to_be();
    addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    if libc::bind(fd, (&addr as *const libc::sockaddr_in).cast(), len) < 0
        || libc::listen(fd, 64) < 0
    {
        let err = Error::last_os_error();
        libc::close(fd);
        return Err(err);
    }
    Ok(fd)
}

/// Starts the forwarder: a copy of this process that never execs, in the namespace, taking
/// connections on the proxy's port (and each direct port) and relaying each, in a process
/// of its own, to the proxy's socket. It ends with the process that started it, which
/// becomes the workflow: it watches that process through a pidfd, because the parent-death
/// signal alone does not reach it once the workflow runs under Landlock's signal scope (the
/// forwarder, forked before the ruleset, is outside the workflow's domain, so the kernel
/// refuses the signal the dying workflow would send it).
unsafe fn start_forwarder(net: &Net, proxy: &CStr) -> Result<()> {
    let mut fds = [-1; 1 + DIRECT_MAX];
    let mut hosts: [Option<&CStr>; 1 + DIRECT_MAX] = [None; 1 + DIRECT_MAX];
    let mut ports = [0u16; 1 + DIRECT_MAX];
    fds[0] = listen_loopback(net.port)?;
    let mut n = 1;
    for (port, host) in net.direct.iter().take(DIRECT_MAX) {
        fds[n] = listen_loopback(*port)?;
        hosts[n] = Some(host.as_c_str());
        ports[n] = *port;
        n += 1;
    }
    let parent = libc::getpid();
    match fork() {
        -1 => Err(Error::last_os_error()),
        0 => {
            // Nothing of the run's: every descriptor but the listening ones goes (the
            // workflow's pipes above all, whose end would otherwise never come).
            for (i, fd) in fds[..n].iter_mut().enumerate() {
                let low = 3 + i as libc::c_int;
                if *fd != low {
                    libc::dup2(*fd, low);
                }
                *fd = low;
            }
            libc::syscall(libc::SYS_close_range, 0u32, 2u32, 0u32);
            libc::syscall(libc::SYS_close_range, (3 + n) as u32, u32::MAX, 0u32);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
            // Without pidfds (kernels before 5.3, a seccomp filter that refuses them) the
            // watch is -1, which poll skips: the parent-death signal is all there is then.
            let watched = libc::syscall(libc::SYS_pidfd_open, parent, 0) as libc::c_int;
            if libc::getppid() != parent {
                libc::_exit(0);
            }
            // Nothing of the host's handlers. TERM, INT and HUP, which the run's end sends
            // its process group first, are ignored: the workflow and its agents keep their
            // way out through the grace, and the forwarder ends with the workflow.
            default_signals();
            for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGCHLD, libc::SIGPIPE] {
                libc::signal(sig, libc::SIG_IGN);
            }
            forward(&fds[..n], &hosts[..n], &ports[..n], proxy, watched)
        }
        _ => {
            for fd in &fds[..n] {
                libc::close(*fd);
            }
            Ok(())
        }
    }
}

/// The forwarder's loop: accepts, and relays each connection in a process of its own, until
/// the process `watched` (a pidfd) is gone.
unsafe fn forward(
    fds: &[libc::c_int],
    hosts: &[Option<&CStr>],
    ports: &[u16],
    proxy: &CStr,
    watched: libc::c_int,
) -> ! {
    let mut polled = [libc::pollfd { fd: -1, events: libc::POLLIN, revents: 0 }; 2 + DIRECT_MAX];
    for (p, fd) in polled.iter_mut().zip(fds) {
        p.fd = *fd;
    }
    let n = fds.len();
    polled[n].fd = watched;
    let me = libc::getpid();
    loop {
        if libc::poll(polled.as_mut_ptr(), (n + 1) as libc::nfds_t, -1) < 0 {
            continue;
        }
        if watched >= 0 && polled[n].revents != 0 {
            libc::_exit(0);
        }
        for i in 0..n {
            if polled[i].revents & libc::POLLIN == 0 {
                continue;
            }
            let client = libc::accept4(
                fds[i],
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC,
            );
            if client < 0 {
                continue;
            }
            match fork() {
                0 => {
                    // A relay ends with the forwarder (neither is under the workflow's
                    // Landlock domain, so this signal is delivered).
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0);
                    if libc::getppid() != me {
                        libc::_exit(0);
                    }
                    for fd in fds.iter().chain([&watched]).filter(|fd| **fd >= 0) {
                        libc::close(*fd);
                    }
                    relay(client, hosts[i].map(|h| (h, ports[i])), proxy);
                    libc::_exit(0);
                }
                _ => {
                    libc::close(client);
                }
            }
        }
    }
}

/// Relays `client` to the proxy; for a direct port, after asking the proxy for a tunnel to
/// the endpoint.
unsafe fn relay(client: libc::c_int, direct: Option<(&CStr, u16)>, proxy: &CStr) {
    let up = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
    if up < 0 {
        return;
    }
    let mut addr: libc::sockaddr_un = std::mem::zeroed();
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let path = proxy.to_bytes();
    if path.len() >= addr.sun_path.len() {
        return;
    }
    for (d, s) in addr.sun_path.iter_mut().zip(path) {
        *d = *s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    if libc::connect(up, (&addr as *const libc::sockaddr_un).cast(), len) < 0 {
        return;
    }
    if let Some((host, port)) = direct {
        let mut line = [0u8; 512];
        let mut at = 0;
        for part in [b"CONNECT ".as_slice(), host.to_bytes(), b":"] {
            if at + part.len() > line.len() - 32 {
                return;
            }
            line[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        at += digits(port, &mut line[at..]);
        let tail = b" HTTP/1.1\r\n\r\n";
        line[at..at + tail.len()].copy_from_slice(tail);
        at += tail.len();
        if !send_all(up, &line[..at]) {
            return;
        }
        // The proxy's answer, up to its blank line: anything but 200 ends the connection.
        let mut head = [0u8; 1024];
        let mut got = 0;
        loop {
            let r = libc::read(up, head[got..].as_mut_ptr().cast(), 1);
            if r <= 0 {
                return;
            }
            got += 1;
            if got >= 4 && &head[got - 4..got] == b"\r\n\r\n" {
                break;
            }
            if got == head.len() {
                return;
            }
        }
        if !head[..got].starts_with(b"HTTP/1.1 200") && !head[..got].starts_with(b"HTTP/1.0 200") {
            return;
        }
    }
    pump(client, up);
}

/// Writes `port` in decimal at the start of `out`; returns how many bytes.
fn digits(port: u16, out: &mut [u8]) -> usize {
    let mut tmp = [0u8; 5];
    let (mut n, mut v) = (0, port);
    loop {
        tmp[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for i in 0..n {
        out[i] = tmp[n - 1 - i];
    }
    n
}

/// Sends all of `bytes` to `fd`.
unsafe fn send_all(fd: libc::c_int, mut bytes: &[u8]) -> bool {
    while !bytes.is_empty() {
        let w = libc::send(fd, bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL);
        if w < 0 {
            if Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return false;
        }
        bytes = &bytes[w as usize..];
    }
    true
}

/// Copies both ways between `a` and `b` until both directions ended.
unsafe fn pump(a: libc::c_int, b: libc::c_int) {
    let mut buf = [0u8; 16 * 1024];
    let mut open = [true, true];
    let fds = [a, b];
    while open[0] || open[1] {
        let mut polled = [
            libc::pollfd { fd: if open[0] { a } else { -1 }, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: if open[1] { b } else { -1 }, events: libc::POLLIN, revents: 0 },
        ];
        if libc::poll(polled.as_mut_ptr(), 2, -1) < 0 {
            if Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return;
        }
        for side in 0..2 {
            if !open[side] || polled[side].revents == 0 {
                continue;
            }
            let (from, to) = (fds[side], fds[1 - side]);
            let r = libc::read(from, buf.as_mut_ptr().cast(), buf.len());
            if r <= 0 {
                open[side] = false;
                libc::shutdown(to, libc::SHUT_WR);
                continue;
            }
            if !send_all(to, &buf[..r as usize]) {
                return;
            }
        }
    }
}
