//! The environment seams: `Clock`, `Fs` and `Spawner`, implemented by the simulator and the CLI.
//!
//! Each `Fs` call is one separate step so the simulator can crash the host between any two of
//! them. Paths are relative to the coordination root and use `/` as separator; the caller has
//! already validated every component (see [`crate::ids`]).

use crate::signature::PathMeta;
use crate::time::{Instant, WallTime};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// A source of time. The only place either clock is read.
pub trait Clock {
    /// Monotonic time.
    fn now(&self) -> Instant;
    /// Wall-clock time; may jump.
    fn wall(&self) -> WallTime;
}

/// What went wrong with a filesystem call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FsErrorKind {
    /// The path does not exist.
    NotFound,
    /// `create_new` found the path already there.
    AlreadyExists,
    /// The device reported an input/output error (EIO).
    Io,
    /// The device is full (ENOSPC).
    NoSpace,
    /// The path is a symlink, which is refused inside `.harnery/`.
    Symlink,
    /// The host crashed during the call; nothing after it runs (simulation only).
    Crashed,
    /// Anything else the operating system reported.
    Other,
}

/// A failed filesystem call, naming the path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsError {
    /// The class of failure.
    pub kind: FsErrorKind,
    /// The path the call was about.
    pub path: String,
    /// The operating system's words, if any.
    pub detail: String,
}

impl FsError {
    /// An error of `kind` about `path`.
    pub fn new(kind: FsErrorKind, path: &str, detail: impl Into<String>) -> FsError {
        FsError { kind, path: path.to_owned(), detail: detail.into() }
    }
}

impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {:?}", self.path, self.kind)?;
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

impl std::error::Error for FsError {}

/// A small POSIX subset with explicit durability. Written bytes are *pending* until `sync_file`;
/// a new directory entry (create, rename) is pending until `sync_dir` of its parent.
pub trait Fs {
    /// The whole file, or `None` if it does not exist.
    fn read(&mut self, path: &str) -> Result<Option<Vec<u8>>, FsError>;
    /// At most `len` bytes of the file from `offset` (fewer at its end) and the file's whole
    /// length, or `None` if it does not exist: what a reader that needs only part of a large
    /// file (a journal's last lines) reads.
    fn read_at(
        &mut self,
        path: &str,
        offset: u64,
        len: usize,
    ) -> Result<Option<(Vec<u8>, u64)>, FsError> {
        Ok(self.read(path)?.map(|bytes| {
            let total = bytes.len() as u64;
            let start = offset.min(total) as usize;
            let end = start.saturating_add(len).min(bytes.len());
            (bytes[start..end].to_vec(), total)
        }))
    }
    /// The names of the entries of `dir`, sorted; empty if `dir` does not exist.
    fn list(&mut self, dir: &str) -> Result<Vec<String>, FsError>;
    /// Creates `dir` and its missing parents (mode 0700), syncing each parent it changed.
    fn create_dir_all(&mut self, dir: &str) -> Result<(), FsError>;
    /// Creates `path` holding `bytes` (mode 0600); fails with `AlreadyExists` if it exists.
    fn create_new(&mut self, path: &str, bytes: &[u8]) -> Result<(), FsError>;
    /// Creates or truncates `path` and writes `bytes` to it; meant for temporary files.
    fn write_temp(&mut self, path: &str, bytes: &[u8]) -> Result<(), FsError>;
    /// Appends `bytes` to an existing file.
    fn append(&mut self, path: &str, bytes: &[u8]) -> Result<(), FsError>;
    /// Cuts an existing file to `len` bytes.
    fn truncate(&mut self, path: &str, len: u64) -> Result<(), FsError>;
    /// Makes the file's bytes durable (fsync).
    fn sync_file(&mut self, path: &str) -> Result<(), FsError>;
    /// Atomically replaces `to` with `from`.
    fn rename(&mut self, from: &str, to: &str) -> Result<(), FsError>;
    /// Replaces `path` with `bytes` atomically and durably from space kept beside it for
    /// the purpose, so a full disk cannot stop a replacement no longer than the last
    /// (see [`crate::atomic::replace_kept`]); `Ok(false)` when this filesystem keeps no
    /// such space, and the caller replaces the file the usual way.
    fn replace_reserved(&mut self, path: &str, bytes: &[u8]) -> Result<bool, FsError> {
        let _ = (path, bytes);
        Ok(false)
    }
    /// Makes the entries of `dir` durable (fsync of the directory).
    fn sync_dir(&mut self, dir: &str) -> Result<(), FsError>;
    /// Removes a file; a missing file is not an error.
    fn remove(&mut self, path: &str) -> Result<(), FsError>;
    /// Takes an exclusive lock on `path` for the life of this `Fs`; `false` if another holds it.
    fn try_lock(&mut self, path: &str) -> Result<bool, FsError>;
    /// The metadata of `path`, not following a final symlink ([`PathMeta::Missing`] when it
    /// is not there), which a derived index compares to tell that what it read is unchanged;
    /// `None` when this filesystem cannot say, and then nothing derived is ever trusted.
    fn meta(&mut self, path: &str) -> Option<PathMeta> {
        let _ = path;
        None
    }
    /// [`Fs::meta`] of each path, in order: what a reader about to check many rows asks at
    /// once, so a real filesystem may examine them in parallel.
    fn metas(&mut self, paths: &[String]) -> Vec<Option<PathMeta>> {
        paths.iter().map(|p| self.meta(p)).collect()
    }
}

/// The parent directory of a `/`-separated relative path (`""` for the root).
pub fn parent_dir(path: &str) -> &str {
    // Every filesystem call asks: memchr's word-at-a-time search, not a generic one.
    match memchr::memrchr(b'/', path.as_bytes()) {
        Some(slash) => &path[..slash],
        None => "",
    }
}

/// An operating-system process id.
pub type Pid = u32;

/// The signals the host sends to a child's process group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Signal {
    /// Close a terminal harness's session (SIGHUP to the terminal's foreground group), as
    /// a closed terminal does; sent before [`Signal::Term`] only to harnesses with a tty.
    #[serde(rename = "HUP")]
    Hangup,
    /// Ask politely (SIGTERM).
    Term,
    /// Insist (SIGKILL).
    Kill,
}

/// Everything needed to start a child process.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SpawnSpec {
    /// Program and arguments; never empty once validated.
    pub argv: Vec<String>,
    /// Working directory, relative to the coordination root or absolute; `None` is the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Extra environment variables.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Bytes written to the child's stdin, which is then closed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stdin: Vec<u8>,
    /// The user to run as (a name or a uid); `None` is the host's own user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The group to run as (a name or a gid); `None` is the user's primary group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// A pseudo-terminal of this size as the child's controlling terminal and its 0, 1 and 2;
    /// `None` is pipes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tty: Option<TtySize>,
    /// The resource limits of each run's cgroup (`memory_max`, `tasks_max`, `cpu_weight`);
    /// `None` leaves the run unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<crate::limits::ResourceLimits>,
}

/// A terminal's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TtySize {
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
}

impl Default for TtySize {
    /// 120 columns by 40 rows.
    fn default() -> TtySize {
        TtySize { cols: 120, rows: 40 }
    }
}

/// How a child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitStatus {
    /// The child called exit with this code.
    Code(i32),
    /// The child was ended by this signal number.
    Signal(i32),
}

impl ExitStatus {
    /// True only for exit code 0.
    pub fn success(self) -> bool {
        self == ExitStatus::Code(0)
    }

    /// The exit code, if the child exited rather than being signalled.
    pub fn code(self) -> Option<i32> {
        match self {
            ExitStatus::Code(c) => Some(c),
            ExitStatus::Signal(_) => None,
        }
    }
}

/// Why a spawn failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpawnError {
    /// True when the program does not exist or is not executable (an environment problem).
    pub not_found: bool,
    /// The operating system's words.
    pub detail: String,
}

/// Starts children and signals their process groups. Exits arrive as inputs through the
/// driver's wait, never by polling this trait.
pub trait Spawner {
    /// Starts run `run` of harness `name` in a new session and process group. Run numbers
    /// are never reused, so a spawner may name what it creates for one run by its number.
    fn spawn(
        &mut self,
        name: &crate::ids::Id,
        run: u64,
        spec: &SpawnSpec,
    ) -> Result<Pid, SpawnError>;
    /// Sends `signal` to the process group led by `pid`. A group that is already gone is fine.
    fn signal(&mut self, pid: Pid, signal: Signal) -> Result<(), SpawnError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_of_nested_and_top_level_paths() {
        assert_eq!(parent_dir(".harnery/harness/state.json"), ".harnery/harness");
        assert_eq!(parent_dir("state.json"), "");
    }

    #[test]
    fn only_code_zero_is_success() {
        assert!(ExitStatus::Code(0).success());
        assert!(!ExitStatus::Code(1).success());
        assert!(!ExitStatus::Signal(9).success());
        assert_eq!(ExitStatus::Signal(9).code(), None);
    }
}
