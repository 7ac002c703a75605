//! Where the harness daemon keeps its files under a coordination root, and where its control
//! socket lives (the root's own directory unless that path is too long for a Unix socket).

use harn_core::harness::driver::DaemonPaths;
use harn_core::hash::fnv64;
use harn_core::ids::Id;
use std::path::{Path, PathBuf};

/// The longest socket path the kernel accepts (`sun_path` is 108 bytes with its NUL).
const SOCKET_PATH_MAX: usize = 107;

/// Every path the daemon and its clients use, absolute.
#[derive(Clone, Debug)]
pub struct Paths {
    /// The coordination root.
    pub root: PathBuf,
    /// `.harnery/harness` under the root.
    pub dir: PathBuf,
}

impl Paths {
    /// Paths under `root`, which is made absolute.
    pub fn new(root: &Path) -> std::io::Result<Paths> {
        let root = std::fs::canonicalize(root)?;
        let dir = root.join(".harnery").join("harness");
        Ok(Paths { root, dir })
    }

    /// The same layout, relative to the root, for the core's driver.
    pub fn relative() -> DaemonPaths {
        DaemonPaths::default()
    }

    /// The exclusive lock held for the daemon's life.
    pub fn lock(&self) -> PathBuf {
        self.dir.join("daemon.lock")
    }
    /// Relative path of the lock, for `Fs::try_lock`.
    pub fn lock_relative() -> &'static str {
        ".harnery/harness/daemon.lock"
    }
    /// The owner hint: pid, socket, start time (a hint only).
    pub fn owner(&self) -> PathBuf {
        self.dir.join("daemon.json")
    }
    /// Relative path of the owner hint.
    pub fn owner_relative() -> &'static str {
        ".harnery/harness/daemon.json"
    }
    /// Intent and counters.
    pub fn state(&self) -> PathBuf {
        self.dir.join("state.json")
    }
    /// The events journal.
    pub fn events(&self) -> PathBuf {
        self.dir.join("events.jsonl")
    }
    /// The recovery ledger.
    pub fn ledger(&self) -> PathBuf {
        self.dir.join("ledger.jsonl")
    }
    /// Relative path of the recovery ledger.
    pub fn ledger_relative() -> &'static str {
        ".harnery/harness/ledger.jsonl"
    }
    /// What a detached daemon prints.
    pub fn daemon_log(&self) -> PathBuf {
        self.dir.join("daemon.log")
    }
    /// The directory of per-harness logs.
    pub fn logs_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }
    /// A harness's current log file.
    pub fn log(&self, name: &Id) -> PathBuf {
        self.logs_dir().join(format!("{name}.log"))
    }
    /// The directory of per-harness notify sockets.
    pub fn notify_dir(&self) -> PathBuf {
        self.short_dir().join("notify")
    }
    /// A harness's notify socket, named by a hash of the harness name so its length does not
    /// depend on the name.
    pub fn notify_socket(&self, name: &Id) -> PathBuf {
        self.notify_dir().join(format!("{:016x}.sock", fnv64(name.as_str().as_bytes())))
    }

    /// A new `NOTIFY_SOCKET` in the abstract namespace for `name` (`@harn-ROOT-NAME-RANDOM`):
    /// the root and the harness in hashes, and 64 random bits so no other user can take the
    /// name first.
    pub fn notify_abstract(&self, name: &Id) -> std::io::Result<String> {
        let mut random = [0u8; 8];
        std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut random)?;
        Ok(format!(
            "@harn-{:016x}-{:016x}-{:016x}",
            fnv64(self.root.as_os_str().as_encoded_bytes()),
            fnv64(name.as_str().as_bytes()),
            u64::from_le_bytes(random)
        ))
    }

    /// The control socket: under the root when the path fits, otherwise in a private
    /// per-user runtime directory named after a hash of the root.
    pub fn socket(&self) -> PathBuf {
        self.short_dir().join("control.sock")
    }

    /// Makes the directory the sockets live in, privately: under the root through the
    /// private write path, or, for a long root, the fallback directory with every level
    /// checked for owner and mode (another user may have made a name there first).
    pub fn prepare_socket_dir(&self, sub: &str) -> std::io::Result<PathBuf> {
        let dir = self.short_dir();
        if dir.starts_with(&self.root) {
            crate::os::private::Dir::open_below(&self.root, &dir.join(sub), true)?;
        } else {
            let (base, levels) = self.fallback();
            let mut levels: Vec<std::ffi::OsString> = levels.into();
            if !sub.is_empty() {
                levels.push(sub.into());
            }
            let levels: Vec<&std::ffi::OsStr> = levels.iter().map(|l| l.as_os_str()).collect();
            crate::os::private::owned_dir(&base, &levels)?;
        }
        Ok(dir.join(sub))
    }

    /// The fallback socket directory: a base and the levels below it.
    fn fallback(&self) -> (PathBuf, [std::ffi::OsString; 2]) {
        let base = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| PathBuf::from("/tmp"));
        let uid = rustix::process::geteuid().as_raw();
        let hash = fnv64(self.root.as_os_str().as_encoded_bytes());
        (base, [format!("harn-{uid}").into(), format!("{hash:016x}").into()])
    }

    /// `.harnery/harness` when socket paths under it fit, otherwise a private directory in
    /// `$XDG_RUNTIME_DIR` (or `/tmp`) named after a hash of the root.
    fn short_dir(&self) -> PathBuf {
        let longest = self.dir.join("notify").join("0123456789abcdef.sock");
        if longest.as_os_str().len() <= SOCKET_PATH_MAX {
            return self.dir.clone();
        }
        let (base, [user, root]) = self.fallback();
        base.join(user).join(root)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_roots_get_a_short_private_socket_directory() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("d".repeat(90));
        std::fs::create_dir_all(&deep).unwrap();
        let p = Paths::new(&deep).unwrap();
        assert!(p.socket().as_os_str().len() <= SOCKET_PATH_MAX);
        assert!(!p.socket().starts_with(&p.root));
        let short = Paths::new(dir.path()).unwrap();
        assert!(short.socket().starts_with(&short.dir));
    }
}
