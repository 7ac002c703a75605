//! The one way harn touches its own files: every directory under the coordination root is
//! opened one component at a time from a handle on the root, never following a symlink, and
//! every file and directory harn creates gets mode 0600 or 0700 exactly, whatever the umask
//! (docs/ARCHITECTURE.md, the invariants).
//!
//! Because each step is an `openat` relative to a directory handle already verified, a
//! symlink planted anywhere below the root (a directory or the final file) is refused with
//! `ELOOP` at the moment of use; there is no window between a check and the call. The root
//! itself is the operator's repository and may be reached through a symlink.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use rustix::fs::{AtFlags, Mode, OFlags};

/// Mode of every directory harn creates.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file harn creates.
pub const FILE_MODE: u32 = 0o600;

/// The largest file [`Dir::read`] returns whole; anything bigger under `.harnery/` was not
/// written by harn in one piece and is refused rather than loaded.
pub const READ_LIMIT: u64 = 1 << 30;

/// A directory reached from the root without following a symlink, open for `*at` calls.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
}

/// A symlink met where harn refuses one.
#[derive(Debug)]
struct SymlinkRefused(std::path::PathBuf);

impl std::fmt::Display for SymlinkRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: is a symlink, which harn refuses under its root", self.0.display())
    }
}

impl std::error::Error for SymlinkRefused {}

trait Context {
    fn with_context(self, what: &Path) -> io::Error;
}

impl Context for io::Error {
    /// Names the path in the error; a refused symlink keeps being recognisable.
    fn with_context(self, what: &Path) -> io::Error {
        if is_symlink_refusal(&self) {
            if self.raw_os_error() == Some(libc::ELOOP) {
                return io::Error::new(io::ErrorKind::InvalidInput, SymlinkRefused(what.into()));
            }
            return self;
        }
        io::Error::new(self.kind(), format!("{}: {self}", what.display()))
    }
}

/// True when `e` is the refusal of a symlink.
pub fn is_symlink_refusal(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ELOOP)
        || e.get_ref().is_some_and(|inner| inner.is::<SymlinkRefused>())
}

fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Makes a handle's mode exactly `mode` when it is ours and differs (an umask that took owner
/// bits, or a file an earlier version left group-readable).
fn tighten(fd: &impl AsFd, mode: u32) -> io::Result<()> {
    let stat = rustix::fs::fstat(fd)?;
    if stat.st_mode & 0o7777 != mode && stat.st_uid == rustix::process::geteuid().as_raw() {
        rustix::fs::fchmod(fd, Mode::from_raw_mode(mode))?;
    }
    Ok(())
}

/// The plain components of a relative path; `..`, `.` and absolute paths are refused.
fn components(rel: &Path) -> io::Result<Vec<&OsStr>> {
    rel.components()
        .map(|c| match c {
            Component::Normal(name) => Ok(name),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: not a plain relative path", rel.display()),
            )),
        })
        .collect()
}

impl Dir {
    /// The coordination root itself (following a symlink to it is the operator's choice).
    pub fn root(root: &Path) -> io::Result<Dir> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rustix::fs::open(root, flags, Mode::empty())
            .map_err(|e| io::Error::from(e).with_context(root))?;
        Ok(Dir { fd })
    }

    /// Opens `rel` below `root`, one component at a time without following symlinks.
    /// With `create`, missing directories are made 0700 (each parent synced) and existing
    /// ones of ours are tightened to 0700: the directory is about to be written.
    pub fn open(root: &Path, rel: impl AsRef<Path>, create: bool) -> io::Result<Dir> {
        let rel = rel.as_ref();
        let mut dir = Dir::root(root)?;
        let mut walked = root.to_path_buf();
        for name in components(rel)? {
            walked.push(name);
            dir = dir.child(name, create).map_err(|e| e.with_context(&walked))?;
        }
        Ok(dir)
    }

    /// Opens `abs`, which must lie below `root`; see [`Dir::open`].
    pub fn open_below(root: &Path, abs: &Path, create: bool) -> io::Result<Dir> {
        let rel = abs.strip_prefix(root).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not below {}", abs.display(), root.display()),
            )
        })?;
        Dir::open(root, rel, create)
    }

    /// True when `name` here is a symlink (not followed).
    pub fn is_symlink(&self, name: impl AsRef<OsStr>) -> bool {
        rustix::fs::statat(&self.fd, name.as_ref(), AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|s| rustix::fs::FileType::from_raw_mode(s.st_mode).is_symlink())
    }

    /// The subdirectory `name`, made 0700 when `create` and missing.
    pub fn child(&self, name: &OsStr, create: bool) -> io::Result<Dir> {
        match rustix::fs::openat(&self.fd, name, dir_flags(), Mode::empty()) {
            // `O_DIRECTORY | O_NOFOLLOW` on a symlink says "not a directory"; say what it is.
            Err(rustix::io::Errno::NOTDIR) if self.is_symlink(name) => {
                Err(io::Error::from_raw_os_error(libc::ELOOP))
            }
            Ok(fd) => {
                if create {
                    tighten(&fd, DIR_MODE)?;
                }
                Ok(Dir { fd })
            }
            Err(rustix::io::Errno::NOENT) if create => {
                match rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(DIR_MODE)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                let fd = rustix::fs::openat(&self.fd, name, dir_flags(), Mode::empty())?;
                tighten(&fd, DIR_MODE)?;
                self.sync()?;
                Ok(Dir { fd })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The handle, for callers that need `fstat` or an `*at` call of their own.
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    fn open_file(&self, name: &OsStr, flags: OFlags) -> io::Result<File> {
        // Non-blocking, so a FIFO planted under a name harn writes fails the open (no reader)
        // or the check below instead of hanging the writer; on a regular file it changes
        // nothing.
        let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd = rustix::fs::openat(&self.fd, name, flags, Mode::from_raw_mode(FILE_MODE))?;
        let file = File::from(fd);
        if !file.metadata()?.is_file() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
        }
        if flags.contains(OFlags::CREATE) {
            tighten(&file, FILE_MODE)?;
        }
        Ok(file)
    }

    /// The whole of file `name`, or `None` when it does not exist.
    pub fn read(&self, name: impl AsRef<OsStr>) -> io::Result<Option<Vec<u8>>> {
        let flags = OFlags::RDONLY | OFlags::NONBLOCK;
        let mut file = match self.open_file(name.as_ref(), flags) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let len = file.metadata()?.len();
        if len > READ_LIMIT {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{len} bytes, more than harn ever writes to one file"),
            ));
        }
        // The length as it was when looked at, in as few reads as the kernel allows (a
        // reader that grows its buffer as it goes reads a large file in many small pieces),
        // then whatever was appended since.
        let mut bytes = Vec::with_capacity(len as usize);
        huge_pages_for(&mut bytes);
        bytes.resize(len as usize, 0);
        let mut got = 0;
        while got < bytes.len() {
            match file.read(&mut bytes[got..])? {
                0 => break,
                n => got += n,
            }
        }
        bytes.truncate(got);
        Read::by_ref(&mut file).take(READ_LIMIT + 1 - got as u64).read_to_end(&mut bytes)?;
        Ok(Some(bytes))
    }

    /// At most `len` bytes of `name` from `offset`, and its length; `None` when absent.
    pub fn read_at(
        &self,
        name: impl AsRef<OsStr>,
        offset: u64,
        len: usize,
    ) -> io::Result<Option<(Vec<u8>, u64)>> {
        use std::os::unix::fs::FileExt;
        let flags = OFlags::RDONLY | OFlags::NONBLOCK;
        let file = match self.open_file(name.as_ref(), flags) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let total = file.metadata()?.len();
        let want = len.min(total.saturating_sub(offset) as usize);
        let mut bytes = vec![0u8; want];
        let mut got = 0;
        while got < want {
            match file.read_at(&mut bytes[got..], offset + got as u64)? {
                0 => break,
                n => got += n,
            }
        }
        bytes.truncate(got);
        Ok(Some((bytes, total)))
    }

    /// Creates `name` holding `bytes`; fails if it exists.
    pub fn create_new(&self, name: impl AsRef<OsStr>, bytes: &[u8]) -> io::Result<()> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL;
        self.open_file(name.as_ref(), flags)?.write_all(bytes)
    }

    /// Creates or truncates `name` and writes `bytes` (for temporary files).
    pub fn write_temp(&self, name: impl AsRef<OsStr>, bytes: &[u8]) -> io::Result<()> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC;
        self.open_file(name.as_ref(), flags)?.write_all(bytes)
    }

    /// Opens `name` for appending, creating it when missing.
    pub fn append(&self, name: impl AsRef<OsStr>) -> io::Result<File> {
        self.open_file(name.as_ref(), OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE)
    }

    /// Opens an existing `name` for appending.
    pub fn append_existing(&self, name: impl AsRef<OsStr>) -> io::Result<File> {
        self.open_file(name.as_ref(), OFlags::WRONLY | OFlags::APPEND)
    }

    /// Opens an existing `name` for writing in place (truncation, syncing).
    pub fn open_write(&self, name: impl AsRef<OsStr>) -> io::Result<File> {
        self.open_file(name.as_ref(), OFlags::WRONLY)
    }

    /// Opens `name` for reading and writing, creating it when missing (lock files).
    pub fn open_lock(&self, name: impl AsRef<OsStr>) -> io::Result<File> {
        self.open_file(name.as_ref(), OFlags::RDWR | OFlags::CREATE)
    }

    /// Opens an existing `name` for reading.
    pub fn open_read(&self, name: impl AsRef<OsStr>) -> io::Result<File> {
        self.open_file(name.as_ref(), OFlags::RDONLY | OFlags::NONBLOCK)
    }

    /// Replaces `name` whole: a temporary file, fsync, rename, fsync of this directory.
    pub fn replace(&self, name: impl AsRef<OsStr>, bytes: &[u8]) -> io::Result<()> {
        self.replace_with_mode(name, bytes, FILE_MODE)
    }

    /// [`Dir::replace`] with the file's mode exactly `mode` (a program copy is `0o700`).
    pub fn replace_with_mode(
        &self,
        name: impl AsRef<OsStr>,
        bytes: &[u8],
        mode: u32,
    ) -> io::Result<()> {
        let name = name.as_ref();
        let mut temp = OsString::from(".");
        temp.push(name);
        temp.push(format!(".tmp.{}", std::process::id()));
        let result = (|| {
            let mut file =
                self.open_file(&temp, OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC)?;
            if mode != FILE_MODE {
                rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?;
            }
            file.write_all(bytes)?;
            file.sync_all()?;
            self.rename(&temp, self, name)?;
            self.sync()
        })();
        if result.is_err() {
            let _ = self.remove(&temp);
        }
        result
    }

    /// Replaces `name` whole from space kept for it in `spare`: the new bytes are written over
    /// `spare` in place (padded with spaces to its length: JSON ends in whitespace freely),
    /// synced, and exchanged with `name`, so the old version becomes the next spare with its
    /// blocks. A replacement no longer than the last needs no new space, and a full disk
    /// cannot stop it; a longer one reserves twice its length first. Without an atomic
    /// exchange (a filesystem that lacks it), a plain rename replaces `name`.
    pub fn replace_reserved(
        &self,
        name: impl AsRef<OsStr>,
        spare: impl AsRef<OsStr>,
        bytes: &[u8],
    ) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        let (name, spare) = (name.as_ref(), spare.as_ref());
        let file = self.open_file(spare, OFlags::WRONLY | OFlags::CREATE)?;
        let mut kept = file.metadata()?.len();
        if kept < bytes.len() as u64 {
            let want = (bytes.len() as u64 * 2).next_multiple_of(4096);
            rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, want)?;
            kept = want;
        }
        let mut padded = Vec::with_capacity(kept as usize);
        padded.extend_from_slice(bytes);
        padded.resize(kept as usize, b' ');
        file.write_all_at(&padded, 0)?;
        file.sync_all()?;
        let exchange = rustix::fs::RenameFlags::EXCHANGE;
        match rustix::fs::renameat_with(&self.fd, spare, &self.fd, name, exchange) {
            Ok(()) => {}
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::INVAL) => {
                rustix::fs::renameat(&self.fd, spare, &self.fd, name)?;
                // The spare went with the rename: the next one is reserved now, while there
                // may be room (best effort; without it the next replacement reserves its own).
                if let Ok(next) = self.open_file(spare, OFlags::WRONLY | OFlags::CREATE) {
                    let empty = rustix::fs::FallocateFlags::empty();
                    let _ = rustix::fs::fallocate(&next, empty, 0, kept);
                    let blank = vec![b' '; kept as usize];
                    let _ = next.write_all_at(&blank, 0);
                }
            }
            Err(e) => return Err(e.into()),
        }
        self.sync()
    }

    /// Renames `from` here to `to` in `dir` (a rename never follows a symlink).
    pub fn rename(
        &self,
        from: impl AsRef<OsStr>,
        dir: &Dir,
        to: impl AsRef<OsStr>,
    ) -> io::Result<()> {
        Ok(rustix::fs::renameat(&self.fd, from.as_ref(), &dir.fd, to.as_ref())?)
    }

    /// Links `from` here as `to` in `dir`; fails if `to` exists (a write-once record). The
    /// link is made to `from` itself, never to what a symlink there would point at.
    pub fn link(
        &self,
        from: impl AsRef<OsStr>,
        dir: &Dir,
        to: impl AsRef<OsStr>,
    ) -> io::Result<()> {
        let flags = AtFlags::empty();
        Ok(rustix::fs::linkat(&self.fd, from.as_ref(), &dir.fd, to.as_ref(), flags)?)
    }

    /// Removes file `name`; a missing one is fine. A symlink is refused, not removed: what
    /// planted it is for a person to look at.
    pub fn remove(&self, name: impl AsRef<OsStr>) -> io::Result<()> {
        if self.is_symlink(name.as_ref()) {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        match rustix::fs::unlinkat(&self.fd, name.as_ref(), AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Removes directory `name` and everything below it, without following a symlink; a
    /// missing one is fine.
    pub fn remove_tree(&self, name: impl AsRef<OsStr>) -> io::Result<()> {
        let name = name.as_ref();
        let child = match self.child(name, false) {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        for (entry, is_dir) in child.entries()? {
            if is_dir {
                child.remove_tree(&entry)?;
            } else {
                // The entry itself goes, a symlink included; nothing it points at is touched.
                match rustix::fs::unlinkat(&child.fd, entry.as_os_str(), AtFlags::empty()) {
                    Ok(()) | Err(rustix::io::Errno::NOENT) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Makes this directory's entries durable.
    pub fn sync(&self) -> io::Result<()> {
        Ok(rustix::fs::fsync(&self.fd)?)
    }

    /// The names in this directory, with whether each is a directory (not following links),
    /// in the order the kernel gives them.
    pub fn entries(&self) -> io::Result<Vec<(OsString, bool)>> {
        let fd = rustix::fs::openat(&self.fd, ".", dir_flags(), Mode::empty())?;
        let mut found = Vec::new();
        for entry in rustix::fs::Dir::read_from(&fd)? {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let name = OsStr::from_bytes(name).to_owned();
            let is_dir = match entry.file_type() {
                rustix::fs::FileType::Directory => true,
                rustix::fs::FileType::Unknown => {
                    rustix::fs::statat(&self.fd, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
                        .is_ok_and(|s| rustix::fs::FileType::from_raw_mode(s.st_mode).is_dir())
                }
                _ => false,
            };
            found.push((name, is_dir));
        }
        Ok(found)
    }
}

/// Opens (making when missing) `levels` below `base`, a directory outside any root such as
/// `$XDG_RUNTIME_DIR` or `/tmp`, where other users may create names too: every level must be
/// a directory owned by us with no access for group or others, reached without following a
/// symlink, or the walk is refused naming the level and what is wrong with it.
pub fn owned_dir(base: &Path, levels: &[&OsStr]) -> io::Result<Dir> {
    let me = rustix::process::geteuid().as_raw();
    let mut dir = Dir::root(base)?;
    let mut walked = base.to_path_buf();
    for level in levels {
        walked.push(level);
        dir = dir.child(level, false).or_else(|e| {
            if e.kind() != io::ErrorKind::NotFound {
                return Err(e.with_context(&walked));
            }
            match rustix::fs::mkdirat(&dir.fd, *level, Mode::from_raw_mode(DIR_MODE)) {
                Ok(()) => {
                    let made = dir.child(level, false).map_err(|e| e.with_context(&walked))?;
                    tighten(&made.fd, DIR_MODE)?;
                    return Ok(made);
                }
                Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(io::Error::from(e).with_context(&walked)),
            }
            dir.child(level, false).map_err(|e| e.with_context(&walked))
        })?;
        let stat = rustix::fs::fstat(&dir.fd)?;
        if stat.st_uid != me || stat.st_mode & 0o077 != 0 {
            let msg = format!(
                "{} must be a directory owned by uid {me} with mode 0700 (it is uid {}, mode {:o})",
                walked.display(),
                stat.st_uid,
                stat.st_mode & 0o7777
            );
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, msg));
        }
    }
    Ok(dir)
}

/// The process that owns a temporary name harn writes, when `name` is one: `.X.tmp.PID`
/// (whole-file replacement), `.X.PID.tmp` (write-once records) and `.new-ID-PID` (a work item
/// being created). Every one starts with `.`, which no id may, so a record named like a
/// temporary file (`cache.tmp.99999`) is never taken for one.
pub fn temp_owner(name: &str) -> Option<u32> {
    fn pid(s: &str) -> Option<u32> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok())?
    }
    let hidden = name.strip_prefix('.')?;
    if let Some(staging) = hidden.strip_prefix("new-") {
        return pid(staging.rsplit_once('-')?.1);
    }
    if let Some((_, owner)) = hidden.rsplit_once(".tmp.") {
        return pid(owner);
    }
    pid(hidden.strip_suffix(".tmp")?.rsplit_once('.')?.1)
}

/// True when a process with this pid exists (another user's counts).
fn pid_alive(pid: u32) -> bool {
    let Some(pid) = rustix::process::Pid::from_raw(pid as i32) else { return false };
    !matches!(rustix::process::test_kill_process(pid), Err(rustix::io::Errno::SRCH))
}

impl Dir {
    /// Removes what a killed writer left here: temporary files and staging directories (see
    /// [`temp_owner`]) whose process is gone. Returns the names removed.
    pub fn sweep_residue(&self) -> Vec<OsString> {
        let mut swept = Vec::new();
        for (name, is_dir) in self.entries().unwrap_or_default() {
            let Some(pid) = name.to_str().and_then(temp_owner) else { continue };
            if pid == std::process::id() || pid_alive(pid) {
                continue;
            }
            // Only a staging directory is ever removed whole.
            if is_dir && !name.to_str().is_some_and(|n| n.starts_with(".new-")) {
                continue;
            }
            let removed = if is_dir { self.remove_tree(&name) } else { self.remove(&name) };
            if removed.is_ok() {
                swept.push(name);
            }
        }
        swept
    }

    /// True when this directory holds residue of a killed writer and nothing else: one whose
    /// first record was never written. (An empty one may be a creation in progress.)
    pub fn only_residue(&self) -> bool {
        self.entries().is_ok_and(|entries| {
            !entries.is_empty()
                && entries.iter().all(|(name, _)| {
                    name.to_str().and_then(temp_owner).is_some_and(|pid| !pid_alive(pid))
                })
        })
    }
}

/// Splits a path into its parent directory and its final name.
pub fn split(path: &Path) -> io::Result<(&Path, &OsStr)> {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => Ok((parent, name)),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: not a file path", path.display()),
        )),
    }
}

/// Opens `abs` (below `root`) for appending, creating it and its directories privately.
pub fn append_below(root: &Path, abs: &Path) -> io::Result<File> {
    let (parent, name) = split(abs)?;
    Dir::open_below(root, parent, true)?.append(name).map_err(|e| e.with_context(abs))
}

/// Replaces `abs` (below `root`) whole and durably, creating its directories privately.
pub fn replace_below(root: &Path, abs: &Path, bytes: &[u8]) -> io::Result<()> {
    let (parent, name) = split(abs)?;
    Dir::open_below(root, parent, true)?.replace(name, bytes).map_err(|e| e.with_context(abs))
}

/// Reads `abs` (below `root`) whole without following a symlink; `None` when missing.
pub fn read_below(root: &Path, abs: &Path) -> io::Result<Option<Vec<u8>>> {
    let (parent, name) = split(abs)?;
    match Dir::open_below(root, parent, false) {
        Ok(dir) => dir.read(name).map_err(|e| e.with_context(abs)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Refuses to trust `abs` (below `root`, reached without following a symlink) unless it is a
/// regular file owned by us with mode 0600: a file that grants authority (a frozen
/// enrollment) is used only if no one else could have written it.
pub fn check_ours(root: &Path, abs: &Path) -> io::Result<()> {
    let (parent, name) = split(abs)?;
    let file =
        Dir::open_below(root, parent, false)?.open_read(name).map_err(|e| e.with_context(abs))?;
    let stat = rustix::fs::fstat(&file)?;
    let me = rustix::process::geteuid().as_raw();
    let mode = stat.st_mode & 0o7777;
    if stat.st_uid != me || mode != FILE_MODE {
        let msg = format!(
            "{}: owned by uid {} with mode {mode:o}; harn trusts it only when it is owned by \
             uid {me} with mode 600",
            abs.display(),
            stat.st_uid
        );
        return Err(io::Error::new(io::ErrorKind::PermissionDenied, msg));
    }
    Ok(())
}

/// Removes file `abs` (below `root`); missing is fine.
pub fn remove_below(root: &Path, abs: &Path) -> io::Result<()> {
    let (parent, name) = split(abs)?;
    match Dir::open_below(root, parent, false) {
        Ok(dir) => dir.remove(name).map_err(|e| e.with_context(abs)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Asks for huge pages under a large buffer about to be filled (an index of ten thousand
/// rows is megabytes): one page fault per 2 MiB instead of one per 4 KiB, which is most of
/// the cost of reading such a file from the page cache. Only advice: without transparent
/// huge pages nothing changes.
fn huge_pages_for(buffer: &mut Vec<u8>) {
    const HUGE: usize = 2 << 20;
    if buffer.capacity() < 2 * HUGE {
        return;
    }
    let start = buffer.as_mut_ptr() as usize;
    let aligned = start.next_multiple_of(HUGE);
    let end = (start + buffer.capacity()) / HUGE * HUGE;
    if end > aligned {
        // SAFETY: the range lies within the buffer's own allocation, which nothing has
        // touched yet; MADV_HUGEPAGE only changes how its pages will be backed.
        unsafe {
            libc::madvise(aligned as *mut libc::c_void, end - aligned, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, OpenOptionsExt, PermissionsExt};

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_directory_being_written_is_tightened() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("d")).unwrap();
        std::fs::set_permissions(tmp.path().join("d"), PermissionsExt::from_mode(0o755)).unwrap();
        Dir::open(tmp.path(), "d", false).unwrap();
        assert_eq!(mode(&tmp.path().join("d")), 0o755, "reading changes nothing");
        Dir::open(tmp.path(), "d", true).unwrap().append("log").unwrap();
        assert_eq!(mode(&tmp.path().join("d")), DIR_MODE);
    }

    #[test]
    fn symlinks_are_refused_at_every_level() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("victim"), b"v").unwrap();
        std::fs::create_dir(tmp.path().join("real")).unwrap();
        symlink(outside.path(), tmp.path().join("linkdir")).unwrap();
        symlink(outside.path().join("victim"), tmp.path().join("real/log")).unwrap();
        let e = Dir::open(tmp.path(), "linkdir", true).unwrap_err();
        assert!(is_symlink_refusal(&e), "{e}");
        let e = append_below(tmp.path(), &tmp.path().join("linkdir/victim")).unwrap_err();
        assert!(is_symlink_refusal(&e), "{e}");
        let real = Dir::open(tmp.path(), "real", true).unwrap();
        assert!(is_symlink_refusal(&real.append("log").unwrap_err()));
        assert!(is_symlink_refusal(&real.write_temp("log", b"x").unwrap_err()));
        assert!(is_symlink_refusal(&real.read("log").unwrap_err()));
        real.replace("log", b"new").unwrap();
        assert_eq!(std::fs::read(outside.path().join("victim")).unwrap(), b"v");
        assert_eq!(std::fs::read(tmp.path().join("real/log")).unwrap(), b"new");
    }

    #[test]
    fn a_fifo_or_a_device_is_not_read() {
        let tmp = tempfile::tempdir().unwrap();
        rustix::fs::mkfifoat(rustix::fs::CWD, tmp.path().join("fifo"), Mode::from_raw_mode(0o600))
            .unwrap();
        let dir = Dir::open(tmp.path(), "", false).unwrap();
        assert!(dir.read("fifo").is_err(), "a FIFO never blocks the reader");
    }

    #[test]
    fn an_owned_directory_is_refused_when_others_could_reach_it() {
        let tmp = tempfile::tempdir().unwrap();
        let levels = [OsStr::new("harn-x"), OsStr::new("abc")];
        owned_dir(tmp.path(), &levels).unwrap();
        assert_eq!(mode(&tmp.path().join("harn-x")), DIR_MODE);
        assert_eq!(mode(&tmp.path().join("harn-x/abc")), DIR_MODE);
        std::fs::set_permissions(tmp.path().join("harn-x"), PermissionsExt::from_mode(0o777))
            .unwrap();
        let e = owned_dir(tmp.path(), &levels).unwrap_err();
        assert!(e.to_string().contains("harn-x must be a directory owned by"), "{e}");
        std::fs::remove_dir_all(tmp.path().join("harn-x")).unwrap();
        let outside = tempfile::tempdir().unwrap();
        symlink(outside.path(), tmp.path().join("harn-x")).unwrap();
        assert!(is_symlink_refusal(&owned_dir(tmp.path(), &levels).unwrap_err()));
    }

    #[test]
    fn a_planted_fifo_is_refused_by_every_write_instead_of_hanging_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open(tmp.path(), "d", true).unwrap();
        let fifo = tmp.path().join("d/daemon.log");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, Mode::from_raw_mode(0o600)).unwrap();
        assert!(dir.append("daemon.log").is_err(), "append");
        assert!(dir.write_temp("daemon.log", b"x").is_err(), "write");
        assert!(dir.open_write("daemon.log").is_err(), "open for writing");
        assert!(dir.read("daemon.log").is_err(), "read");
        // With a reader on the other end the open succeeds, and the type check refuses it.
        let _reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        let err = dir.append("daemon.log").unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }

    #[test]
    fn temporary_names_name_their_writer() {
        assert_eq!(temp_owner(".status.json.tmp.42"), Some(42));
        assert_eq!(temp_owner(".intent.json.42.tmp"), Some(42));
        assert_eq!(temp_owner(".new-parser-42"), Some(42));
        for not_temp in [
            "status.json",
            "intent.json",
            ".tmp",
            "a.tmp.x",
            ".new-x",
            "g1",
            ".x.tmp",
            "cache.tmp.99999",
            "x.7.tmp",
        ] {
            assert_eq!(temp_owner(not_temp), None, "{not_temp}");
        }
    }

    #[test]
    fn residue_of_dead_writers_is_swept_and_live_ones_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open(tmp.path(), "d", true).unwrap();
        // A pid far above any pid_max is never alive.
        let dead = 2_000_000_000u32;
        let mine = std::process::id();
        for name in [format!(".status.json.tmp.{dead}"), format!(".status.json.tmp.{mine}")] {
            dir.write_temp(&name, b"x").unwrap();
        }
        std::fs::create_dir_all(tmp.path().join(format!("d/.new-w1-{dead}/sub"))).unwrap();
        dir.write_temp("status.json", b"{}").unwrap();
        let mut swept = dir.sweep_residue();
        swept.sort();
        let want: Vec<OsString> =
            [format!(".new-w1-{dead}"), format!(".status.json.tmp.{dead}")].map(Into::into).into();
        assert_eq!(swept, want);
        assert!(tmp.path().join(format!("d/.status.json.tmp.{mine}")).exists());
        assert!(tmp.path().join("d/status.json").exists());
        let goal = Dir::open(tmp.path(), "g", true).unwrap();
        goal.write_temp(format!(".intent.json.{dead}.tmp"), b"x").unwrap();
        assert!(goal.only_residue());
        goal.write_temp("intent.json", b"{}").unwrap();
        assert!(!goal.only_residue());
    }

    #[test]
    fn remove_tree_does_not_follow_links() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), b"k").unwrap();
        std::fs::create_dir_all(tmp.path().join("t/sub")).unwrap();
        std::fs::write(tmp.path().join("t/sub/f"), b"f").unwrap();
        symlink(outside.path(), tmp.path().join("t/link")).unwrap();
        Dir::root(tmp.path()).unwrap().remove_tree("t").unwrap();
        assert!(!tmp.path().join("t").exists());
        assert!(outside.path().join("keep").exists());
    }
}
