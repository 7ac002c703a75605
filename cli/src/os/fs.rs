//! The real filesystem behind the [`Fs`] seam: the operating system's files with `fsync` of
//! files and directories, private modes (directories 0700, files 0600, whatever the umask) and
//! refusal of symlinks (docs/ARCHITECTURE.md, the invariants).
//!
//! Paths are relative to a root (the coordination root). Every call goes through
//! [`crate::os::private`]: the directories of a path are opened one at a time from the root with
//! `O_NOFOLLOW`, and the final name is opened relative to its verified directory, so a symlink
//! anywhere below the root is refused when it is used, not only when it was checked.

use crate::os::private::{self, Dir};
use harn_core::env::{Fs, FsError, FsErrorKind};
use harn_core::signature::PathMeta;
use std::collections::BTreeMap;
use std::fs::{File, TryLockError};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub use crate::os::private::{DIR_MODE, FILE_MODE};

/// The operating system's filesystem under `root`.
#[derive(Debug)]
pub struct RealFs {
    root: PathBuf,
    /// Open lock files; a lock lives as long as its `File`, so as long as this `RealFs`.
    locks: BTreeMap<String, File>,
    /// Directories `meta` examines paths below, opened once each (a listing stats thousands
    /// of paths under the same two or three directories).
    bases: BTreeMap<String, Dir>,
}

impl RealFs {
    /// A filesystem rooted at `root`, which should exist.
    pub fn new(root: impl Into<PathBuf>) -> RealFs {
        RealFs { root: root.into(), locks: BTreeMap::new(), bases: BTreeMap::new() }
    }

    /// The directory every path is relative to.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of `rel` and its final name, after refusing odd paths.
    fn parent(&self, rel: &str) -> Result<(Dir, String), FsError> {
        check_plain(rel)?;
        let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
        let dir = Dir::open(&self.root, dir, false).map_err(|e| fs_error(rel, e))?;
        Ok((dir, name.to_owned()))
    }

    /// The directory `rel` itself.
    fn dir(&self, rel: &str) -> Result<Dir, FsError> {
        check_plain(rel)?;
        Dir::open(&self.root, rel, false).map_err(|e| fs_error(rel, e))
    }
}

fn check_plain(rel: &str) -> Result<(), FsError> {
    if rel.starts_with('/') || rel.split('/').any(|c| c == "." || c == "..") {
        return Err(FsError::new(FsErrorKind::Other, rel, "not a plain relative path"));
    }
    Ok(())
}

/// Maps an operating-system error to the seam's kinds. EIO and ENOSPC have the same numbers on
/// Linux and the BSDs.
fn fs_error(path: &str, e: io::Error) -> FsError {
    let kind = match (e.raw_os_error(), e.kind()) {
        _ if private::is_symlink_refusal(&e) => FsErrorKind::Symlink,
        (Some(5), _) => FsErrorKind::Io,
        (Some(28), _) => FsErrorKind::NoSpace,
        (_, io::ErrorKind::NotFound) => FsErrorKind::NotFound,
        (_, io::ErrorKind::AlreadyExists) => FsErrorKind::AlreadyExists,
        _ => FsErrorKind::Other,
    };
    let detail = match kind {
        FsErrorKind::Symlink => "symlinks are refused".to_owned(),
        _ => e.to_string(),
    };
    FsError::new(kind, path, detail)
}

impl Fs for RealFs {
    fn read(&mut self, path: &str) -> Result<Option<Vec<u8>>, FsError> {
        let (dir, name) = match self.parent(path) {
            Ok(found) => found,
            Err(e) if e.kind == FsErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        dir.read(&name).map_err(|e| fs_error(path, e))
    }

    fn read_at(
        &mut self,
        path: &str,
        offset: u64,
        len: usize,
    ) -> Result<Option<(Vec<u8>, u64)>, FsError> {
        let (dir, name) = match self.parent(path) {
            Ok(found) => found,
            Err(e) if e.kind == FsErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        dir.read_at(&name, offset, len).map_err(|e| fs_error(path, e))
    }

    fn list(&mut self, dir: &str) -> Result<Vec<String>, FsError> {
        let handle = match self.dir(dir) {
            Ok(d) => d,
            Err(e) if e.kind == FsErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        // A name that is not UTF-8 is listed with replacement characters: it can never be a
        // valid id, so the caller reports that one entry and lists the rest.
        let mut names: Vec<String> = handle
            .entries()
            .map_err(|e| fs_error(dir, e))?
            .into_iter()
            .map(|(name, _)| name.to_string_lossy().into_owned())
            .collect();
        names.sort_unstable();
        Ok(names)
    }

    fn create_dir_all(&mut self, dir: &str) -> Result<(), FsError> {
        check_plain(dir)?;
        Dir::open(&self.root, dir, true).map(drop).map_err(|e| fs_error(dir, e))
    }

    fn create_new(&mut self, path: &str, bytes: &[u8]) -> Result<(), FsError> {
        let (dir, name) = self.parent(path)?;
        dir.create_new(&name, bytes).map_err(|e| fs_error(path, e))
    }

    fn write_temp(&mut self, path: &str, bytes: &[u8]) -> Result<(), FsError> {
        let (dir, name) = self.parent(path)?;
        dir.write_temp(&name, bytes).map_err(|e| fs_error(path, e))
    }

    fn append(&mut self, path: &str, bytes: &[u8]) -> Result<(), FsError> {
        let (dir, name) = self.parent(path)?;
        let mut file = dir.append_existing(&name).map_err(|e| fs_error(path, e))?;
        file.write_all(bytes).map_err(|e| fs_error(path, e))
    }

    fn truncate(&mut self, path: &str, len: u64) -> Result<(), FsError> {
        let (dir, name) = self.parent(path)?;
        let file = dir.open_write(&name).map_err(|e| fs_error(path, e))?;
        file.set_len(len).map_err(|e| fs_error(path, e))
    }

    fn sync_file(&mut self, path: &str) -> Result<(), FsError> {
        // A fresh descriptor is enough: fsync flushes the file, not the descriptor's writes.
        let (dir, name) = self.parent(path)?;
        let file = dir.open_read(&name).map_err(|e| fs_error(path, e))?;
        file.sync_all().map_err(|e| fs_error(path, e))
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<(), FsError> {
        let (from_dir, from_name) = self.parent(from)?;
        let (to_dir, to_name) = self.parent(to)?;
        from_dir.rename(&from_name, &to_dir, &to_name).map_err(|e| fs_error(from, e))
    }

    fn replace_reserved(&mut self, path: &str, bytes: &[u8]) -> Result<bool, FsError> {
        let (dir, name) = self.parent(path)?;
        let spare = harn_core::atomic::temp_path(&name);
        dir.replace_reserved(&name, &spare, bytes).map_err(|e| fs_error(path, e))?;
        Ok(true)
    }

    fn sync_dir(&mut self, dir: &str) -> Result<(), FsError> {
        self.dir(dir)?.sync().map_err(|e| fs_error(dir, e))
    }

    fn remove(&mut self, path: &str) -> Result<(), FsError> {
        let (dir, name) = match self.parent(path) {
            Ok(found) => found,
            Err(e) if e.kind == FsErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        dir.remove(&name).map_err(|e| fs_error(path, e))
    }

    // `File::try_lock` is stable since Rust 1.89; the workspace's declared minimum is older.
    fn try_lock(&mut self, path: &str) -> Result<bool, FsError> {
        if self.locks.contains_key(path) {
            return Ok(false);
        }
        let (dir, name) = self.parent(path)?;
        let file = dir.open_lock(&name).map_err(|e| fs_error(path, e))?;
        match file.try_lock() {
            Ok(()) => {
                self.locks.insert(path.to_owned(), file);
                Ok(true)
            }
            Err(TryLockError::WouldBlock) => Ok(false),
            Err(TryLockError::Error(e)) => Err(fs_error(path, e)),
        }
    }

    /// `lstat` of `path` from an open handle on its grandparent (opened from the root
    /// without following a symlink): two names resolved per call, not the whole path. A
    /// symlink standing for the parent is followed, but then the inode differs from the
    /// one recorded, which is all a signature needs.
    fn meta(&mut self, path: &str) -> Option<PathMeta> {
        let (base, rest) = split_base(path)?;
        self.open_base(base)?;
        stat_below(self.bases.get(base), rest)
    }

    /// Many paths at once, split between two threads when there are many: a listing's
    /// checks are a stat each, and the kernel's path walks run in parallel.
    fn metas(&mut self, paths: &[String]) -> Vec<Option<PathMeta>> {
        let split: Vec<Option<(&str, &str)>> = paths
            .iter()
            .map(|p| split_base(p).filter(|(base, _)| self.open_base(base).is_some()))
            .collect();
        let bases = &self.bases;
        let stat = |part: &[Option<(&str, &str)>]| -> Vec<Option<PathMeta>> {
            part.iter()
                .map(|s| s.and_then(|(base, rest)| stat_below(bases.get(base), rest)))
                .collect()
        };
        if split.len() < PARALLEL_METAS {
            return stat(&split);
        }
        let (first, second) = split.split_at(split.len() / 2);
        std::thread::scope(|scope| {
            let other = scope.spawn(|| stat(second));
            let mut metas = stat(first);
            metas.extend(other.join().unwrap_or_else(|_| vec![None; second.len()]));
            metas
        })
    }
}

/// How many paths `metas` examines before it takes a second thread.
const PARALLEL_METAS: usize = 1024;

/// The directory `path` is examined from (its grandparent) and the rest of it; `None` for a
/// path that is not plain.
fn split_base(path: &str) -> Option<(&str, &str)> {
    check_plain(path).ok()?;
    let mut cut = path.rmatch_indices('/').map(|(at, _)| at);
    let (_, at) = (cut.next(), cut.next());
    Some(match at {
        Some(at) => (&path[..at], &path[at + 1..]),
        None => ("", path),
    })
}

impl RealFs {
    /// Opens `base` (from the root, following no symlink) and keeps it for later calls;
    /// `None` when it cannot be opened for another reason than its absence (an absent base
    /// makes every path below it missing, and is looked for again next time).
    fn open_base(&mut self, base: &str) -> Option<()> {
        if self.bases.contains_key(base) {
            return Some(());
        }
        match Dir::open(&self.root, base, false) {
            Ok(dir) => {
                self.bases.insert(base.to_owned(), dir);
                Some(())
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Some(()),
            Err(_) => None,
        }
    }
}

/// `lstat` of `rest` below `base` (absent when the base is not there).
fn stat_below(base: Option<&Dir>, rest: &str) -> Option<PathMeta> {
    let Some(dir) = base else { return Some(PathMeta::Missing) };
    match rustix::fs::statat(dir.fd(), rest, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Some(PathMeta::Present {
            ino: st.st_ino,
            size: u64::try_from(st.st_size).unwrap_or(0),
            mtime_ns: i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec),
            ctime_ns: i128::from(st.st_ctime) * 1_000_000_000 + i128::from(st.st_ctime_nsec),
        }),
        Err(rustix::io::Errno::NOENT) | Err(rustix::io::Errno::NOTDIR) => Some(PathMeta::Missing),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn creates_private_directories_and_files() {
        let tmp = tempfile::tempdir().unwrap();
        let mut fs = RealFs::new(tmp.path());
        fs.create_dir_all(".harnery/goals").unwrap();
        fs.create_new(".harnery/goals/a", b"x").unwrap();
        fs.write_temp(".harnery/goals/b.tmp", b"y").unwrap();
        assert_eq!(mode(&tmp.path().join(".harnery")), DIR_MODE);
        assert_eq!(mode(&tmp.path().join(".harnery/goals")), DIR_MODE);
        assert_eq!(mode(&tmp.path().join(".harnery/goals/a")), FILE_MODE);
        assert_eq!(mode(&tmp.path().join(".harnery/goals/b.tmp")), FILE_MODE);
    }

    #[test]
    fn refuses_symlinks_anywhere_in_the_path() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), b"s").unwrap();
        let mut fs = RealFs::new(tmp.path());
        fs.create_dir_all("d").unwrap();
        symlink(outside.path(), tmp.path().join("d/link")).unwrap();
        symlink(outside.path().join("secret"), tmp.path().join("d/file")).unwrap();
        for path in ["d/link/secret", "d/file"] {
            assert_eq!(fs.read(path).unwrap_err().kind, FsErrorKind::Symlink, "{path}");
            assert_eq!(fs.append(path, b"x").unwrap_err().kind, FsErrorKind::Symlink);
            assert_eq!(fs.remove(path).unwrap_err().kind, FsErrorKind::Symlink);
        }
        assert_eq!(fs.create_dir_all("d/link/sub").unwrap_err().kind, FsErrorKind::Symlink);
        assert_eq!(fs.write_temp("d/file", b"x").unwrap_err().kind, FsErrorKind::Symlink);
        assert_eq!(fs::read(outside.path().join("secret")).unwrap(), b"s");
    }

    #[test]
    fn a_lock_excludes_other_holders_until_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let mut first = RealFs::new(tmp.path());
        let mut second = RealFs::new(tmp.path());
        assert!(first.try_lock("lock").unwrap());
        assert!(!first.try_lock("lock").unwrap());
        assert!(!second.try_lock("lock").unwrap());
        drop(first);
        assert!(second.try_lock("lock").unwrap());
    }

    #[test]
    fn maps_errors_to_the_seam_kinds() {
        let tmp = tempfile::tempdir().unwrap();
        let mut fs = RealFs::new(tmp.path());
        assert_eq!(fs.append("missing", b"x").unwrap_err().kind, FsErrorKind::NotFound);
        fs.create_new("f", b"").unwrap();
        assert_eq!(fs.create_new("f", b"").unwrap_err().kind, FsErrorKind::AlreadyExists);
        assert_eq!(fs.read("../f").unwrap_err().kind, FsErrorKind::Other);
        assert_eq!(fs_error("p", io::Error::from_raw_os_error(5)).kind, FsErrorKind::Io);
        assert_eq!(fs_error("p", io::Error::from_raw_os_error(28)).kind, FsErrorKind::NoSpace);
    }
}
