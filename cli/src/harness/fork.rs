//! Spawning a child directly into its cgroup with `clone3(CLONE_INTO_CGROUP)` (Linux 5.7+).
//!
//! A child that moves itself into a cgroup after fork pays for a cgroup migration, which takes
//! the kernel several milliseconds; one created inside the cgroup pays nothing. The standard
//! library cannot pass a cgroup to clone, so this module does fork and exec itself: everything
//! is prepared before the clone, and the child only makes async-signal-safe system calls
//! (setsid, dup2, setgroups, setgid, setuid, chdir, signal, sigprocmask, execve, write,
//! _exit) before it execs.

use crate::os::identity::Identity;
use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

/// Which step of the child's set-up failed, as it reports it before exiting.
const STEP_EXEC: u8 = 0;
const STEP_CWD: u8 = 1;
const STEP_IDENTITY: u8 = 2;

/// `CLONE_INTO_CGROUP` from linux/sched.h.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// The kernel's `struct clone_args`, version 2 (with `cgroup`).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// A program ready to exec: every string the child needs, converted before the clone.
pub struct Prepared {
    candidates: Vec<CString>,
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: CString,
    identity: Option<Identity>,
}

/// Why a spawn failed.
#[derive(Debug)]
pub enum ForkError {
    /// This kernel cannot clone into a cgroup; use the ordinary spawn.
    Unsupported,
    /// The program could not be executed (errno from execve).
    Exec(std::io::Error),
    /// The child could not enter its working directory (errno from chdir, as the user it
    /// runs as).
    Cwd(std::io::Error),
    /// The child could not become the user and group it runs as.
    Identity(std::io::Error),
    /// Anything else.
    Other(std::io::Error),
}

impl Prepared {
    /// Prepares `argv` to run in `cwd` with exactly `env`, as `identity` when given.
    pub fn new(
        argv: &[String],
        cwd: &Path,
        env: &[(OsString, OsString)],
        identity: Option<Identity>,
    ) -> std::io::Result<Prepared> {
        let nul = |e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
        let cstr = |b: Vec<u8>| CString::new(b).map_err(nul);
        let empty = || std::io::Error::new(std::io::ErrorKind::InvalidInput, "an empty command");
        let program = argv.first().ok_or_else(empty)?;
        let path_var = env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.clone());
        let candidates = if program.contains('/') {
            vec![cstr(program.clone().into_bytes())?]
        } else {
            let path = path_var.unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
            path.as_bytes()
                .split(|&b| b == b':')
                .map(|dir| {
                    let dir = if dir.is_empty() { &b"."[..] } else { dir };
                    let mut full = dir.to_vec();
                    full.push(b'/');
                    full.extend_from_slice(program.as_bytes());
                    cstr(full)
                })
                .collect::<Result<_, _>>()?
        };
        let argv = argv.iter().map(|a| cstr(a.clone().into_bytes())).collect::<Result<_, _>>()?;
        let envp = env
            .iter()
            .map(|(k, v)| {
                let mut kv = k.as_bytes().to_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                cstr(kv)
            })
            .collect::<Result<_, _>>()?;
        let cwd = cstr(cwd.as_os_str().to_owned().into_vec())?;
        Ok(Prepared { candidates, argv, envp, cwd, identity })
    }
}

/// The child's standard streams.
pub struct Stdio<'a> {
    /// Becomes fd 0.
    pub stdin: &'a OwnedFd,
    /// Becomes fd 1.
    pub stdout: &'a OwnedFd,
    /// Becomes fd 2.
    pub stderr: &'a OwnedFd,
}

/// Starts `prepared` in a new session, inside the cgroup whose directory is `cgroup`.
/// Returns the child's pid once it has exec'd; an exec failure is reported, and the failed
/// child (which exits 127) is left for the daemon's reaper.
pub fn spawn_into(
    prepared: &Prepared,
    cgroup: &OwnedFd,
    stdio: Stdio<'_>,
) -> Result<u32, ForkError> {
    let (report_read, report_write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| ForkError::Other(e.into()))?;
    let mut argv: Vec<*const libc::c_char> = prepared.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = prepared.envp.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    // Block every signal across the clone: until the child has reset its handlers, a signal
    // sent to it must not run the daemon's handlers (they would talk to the daemon's pipes).
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    let mut previous: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: plain signal-mask calls on valid, initialized sets.
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut previous);
    }
    let args = CloneArgs {
        flags: CLONE_INTO_CGROUP,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: cgroup.as_raw_fd() as u64,
        ..CloneArgs::default()
    };
    // SAFETY: a fork-like clone3 (no CLONE_VM, no new stack). The child runs `exec_child`,
    // which only makes async-signal-safe system calls on data prepared above, then execs or
    // exits; it never returns here.
    let pid = unsafe {
        libc::syscall(libc::SYS_clone3, &args as *const CloneArgs, std::mem::size_of::<CloneArgs>())
    };
    if pid == 0 {
        // SAFETY: in the child, see above.
        unsafe { exec_child(prepared, &argv, &envp, &stdio, report_write.as_raw_fd()) }
    }
    let clone_error = std::io::Error::last_os_error();
    // SAFETY: restores the mask saved above.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut());
    }
    if pid < 0 {
        let e = clone_error;
        return Err(match e.raw_os_error() {
            Some(libc::ENOSYS | libc::EINVAL | libc::E2BIG | libc::EOPNOTSUPP) => {
                ForkError::Unsupported
            }
            _ => ForkError::Other(e),
        });
    }
    drop(report_write);
    // The child closes its end by exec (CLOEXEC) or writes the step that failed and its
    // errno first.
    let mut report = [0u8; 5];
    match rustix::io::read(&report_read, &mut report) {
        Ok(5) => {
            let errno = i32::from_ne_bytes([report[1], report[2], report[3], report[4]]);
            let e = std::io::Error::from_raw_os_error(errno);
            Err(match report[0] {
                STEP_CWD => ForkError::Cwd(e),
                STEP_IDENTITY => ForkError::Identity(e),
                _ => ForkError::Exec(e),
            })
        }
        _ => Ok(pid as u32),
    }
}

/// The child's side: new session, standard streams, working directory, default signal
/// dispositions, then exec the first candidate that exists.
///
/// # Safety
/// Only for the child of a fork-like clone: it touches nothing but the prepared data and
/// async-signal-safe system calls, and never returns.
unsafe fn exec_child(
    prepared: &Prepared,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char],
    stdio: &Stdio<'_>,
    report: libc::c_int,
) -> ! {
    let fail_at = |step: u8, errno: libc::c_int| -> ! {
        let e = errno.to_ne_bytes();
        let bytes = [step, e[0], e[1], e[2], e[3]];
        libc::write(report, bytes.as_ptr().cast(), bytes.len());
        libc::_exit(127)
    };
    let fail = |errno: libc::c_int| -> ! { fail_at(STEP_EXEC, errno) };
    if libc::setsid() < 0 {
        fail(*libc::__errno_location());
    }
    super::fds::restore_for_child();
    for (from, to) in [(stdio.stdin, 0), (stdio.stdout, 1), (stdio.stderr, 2)] {
        if libc::dup2(from.as_raw_fd(), to) < 0 {
            fail(*libc::__errno_location());
        }
    }
    // The user first, so the working directory is entered with the user's own rights.
    if let Some(identity) = &prepared.identity {
        if identity.become_it().is_err() {
            fail_at(STEP_IDENTITY, *libc::__errno_location());
        }
    }
    if libc::chdir(prepared.cwd.as_ptr()) < 0 {
        fail_at(STEP_CWD, *libc::__errno_location());
    }
    // Every signal back to its default (the daemon ignores SIGPIPE and handles others), then
    // unblocked: a child starts as a fresh process would.
    for sig in 1..libc::SIGRTMAX() {
        if sig != libc::SIGKILL && sig != libc::SIGSTOP {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
    // Descriptors the daemon holds or inherited stay out of the child.
    libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC);
    let mut empty: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut empty);
    libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
    let mut last = libc::ENOENT;
    for path in &prepared.candidates {
        libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr());
        let errno = *libc::__errno_location();
        // Keep looking past a missing file; remember a more telling error.
        if errno != libc::ENOENT && errno != libc::ENOTDIR {
            last = errno;
        }
    }
    fail(last)
}

/// Variables a service manager hands the daemon itself; a child must not see them.
pub const MANAGER_ONLY: [&str; 6] = [
    "NOTIFY_SOCKET",
    "WATCHDOG_USEC",
    "WATCHDOG_PID",
    "LISTEN_FDS",
    "LISTEN_PID",
    "LISTEN_FDNAMES",
];

/// The environment a child gets: the daemon's own without the service manager's variables,
/// then `extra` on top.
pub fn child_env(extra: &[(impl AsRef<OsStr>, impl AsRef<OsStr>)]) -> Vec<(OsString, OsString)> {
    let mut env: std::collections::BTreeMap<OsString, OsString> = std::env::vars_os().collect();
    for var in MANAGER_ONLY {
        env.remove(OsStr::new(var));
    }
    for (k, v) in extra {
        env.insert(k.as_ref().to_owned(), v.as_ref().to_owned());
    }
    env.into_iter().collect()
}
