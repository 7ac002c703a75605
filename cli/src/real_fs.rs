//! The real filesystem behind the [`Fs`] seam: the operating system's files with `fsync` of
//! files and directories, private modes (directories 0700, files 0600) and refusal of symlinks
//! (DESIGN.md §4 and §5).
//!
//! Paths are relative to a root (the coordination root). Before every call, each existing
//! component of the path is checked with `lstat`, and a symlink is refused with
//! [`FsErrorKind::Symlink`]. The check and the call are two steps, so it guards against
//! mistakes and stray links, not against an attacker racing us inside a 0700 directory.

use harn_core::env::{Fs, FsError, FsErrorKind};
use std::collections::BTreeMap;
use std::fs::{self, DirBuilder, File, OpenOptions, TryLockError};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Mode of every directory harn creates.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file harn creates.
pub const FILE_MODE: u32 = 0o600;

/// The operating system's filesystem under `root`.
#[derive(Debug)]
pub struct RealFs {
    root: PathBuf,
    /// Open lock files; a lock lives as long as its `File`, so as long as this `RealFs`.
    locks: BTreeMap<String, File>,
}

impl RealFs {
    /// A filesystem rooted at `root`, which should exist.
    pub fn new(root: impl Into<PathBuf>) -> RealFs {
        RealFs { root: root.into(), locks: BTreeMap::new() }
    }

    /// The directory every path is relative to.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The full path of `rel`, after refusing odd paths and symlinked components.
    fn resolve(&self, rel: &str) -> Result<PathBuf, FsError> {
        if rel.starts_with('/') || rel.split('/').any(|c| c == "." || c == "..") {
            return Err(FsError::new(FsErrorKind::Other, rel, "not a plain relative path"));
        }
        let mut full = self.root.clone();
        let mut exists = true;
        for component in rel.split('/').filter(|c| !c.is_empty()) {
            full.push(component);
            if !exists {
                continue;
            }
            match fs::symlink_metadata(&full) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(FsError::new(FsErrorKind::Symlink, rel, "symlinks are refused"));
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => exists = false,
                Err(e) => return Err(fs_error(rel, e)),
            }
        }
        Ok(full)
    }

    /// Creates one directory component, syncing its parent when it is new.
    fn make_dir(&self, rel: &str, full: &Path) -> Result<(), FsError> {
        match DirBuilder::new().mode(DIR_MODE).create(full) {
            Ok(()) => {
                let parent = full.parent().expect("a created directory has a parent");
                sync_path(parent).map_err(|e| fs_error(rel, e))
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let meta = fs::symlink_metadata(full).map_err(|e| fs_error(rel, e))?;
                if meta.file_type().is_symlink() {
                    Err(FsError::new(FsErrorKind::Symlink, rel, "symlinks are refused"))
                } else if meta.is_dir() {
                    Ok(())
                } else {
                    Err(FsError::new(FsErrorKind::Other, rel, "not a directory"))
                }
            }
            Err(e) => Err(fs_error(rel, e)),
        }
    }
}

/// Maps an operating-system error to the seam's kinds. EIO and ENOSPC have the same numbers on
/// Linux and the BSDs.
fn fs_error(path: &str, e: io::Error) -> FsError {
    let kind = match (e.raw_os_error(), e.kind()) {
        (Some(5), _) => FsErrorKind::Io,
        (Some(28), _) => FsErrorKind::NoSpace,
        (_, io::ErrorKind::NotFound) => FsErrorKind::NotFound,
        (_, io::ErrorKind::AlreadyExists) => FsErrorKind::AlreadyExists,
        _ => FsErrorKind::Other,
    };
    FsError::new(kind, path, e.to_string())
}

/// `fsync` of a file or a directory.
fn sync_path(full: &Path) -> io::Result<()> {
    File::open(full)?.sync_all()
}

fn write_with(options: &mut OpenOptions, full: &Path, bytes: &[u8]) -> io::Result<()> {
    options.mode(FILE_MODE).open(full)?.write_all(bytes)
}

impl Fs for RealFs {
    fn read(&mut self, path: &str) -> Result<Option<Vec<u8>>, FsError> {
        match fs::read(self.resolve(path)?) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(fs_error(path, e)),
        }
    }

    fn list(&mut self, dir: &str) -> Result<Vec<String>, FsError> {
        let entries = match fs::read_dir(self.resolve(dir)?) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(fs_error(dir, e)),
        };
        let mut names = Vec::new();
        for entry in entries {
            let name = entry.map_err(|e| fs_error(dir, e))?.file_name();
            let name = name.into_string().map_err(|raw| {
                FsError::new(FsErrorKind::Other, dir, format!("a name is not UTF-8: {raw:?}"))
            })?;
            names.push(name);
        }
        names.sort_unstable();
        Ok(names)
    }

    fn create_dir_all(&mut self, dir: &str) -> Result<(), FsError> {
        self.resolve(dir)?;
        let mut full = self.root.clone();
        for component in dir.split('/').filter(|c| !c.is_empty()) {
            full.push(component);
            self.make_dir(dir, &full)?;
        }
        Ok(())
    }

    fn create_new(&mut self, path: &str, bytes: &[u8]) -> Result<(), FsError> {
        let full = self.resolve(path)?;
        write_with(OpenOptions::new().write(true).create_new(true), &full, bytes)
            .map_err(|e| fs_error(path, e))
    }

    fn write_temp(&mut self, path: &str, bytes: &[u8]) -> Result<(), FsError> {
        let full = self.resolve(path)?;
        write_with(OpenOptions::new().write(true).create(true).truncate(true), &full, bytes)
            .map_err(|e| fs_error(path, e))
    }

    fn append(&mut self, path: &str, bytes: &[u8]) -> Result<(), FsError> {
        let full = self.resolve(path)?;
        write_with(OpenOptions::new().append(true), &full, bytes).map_err(|e| fs_error(path, e))
    }

    fn truncate(&mut self, path: &str, len: u64) -> Result<(), FsError> {
        let full = self.resolve(path)?;
        let file = OpenOptions::new().write(true).open(full).map_err(|e| fs_error(path, e))?;
        file.set_len(len).map_err(|e| fs_error(path, e))
    }

    fn sync_file(&mut self, path: &str) -> Result<(), FsError> {
        // A fresh descriptor is enough: fsync flushes the file, not the descriptor's writes.
        sync_path(&self.resolve(path)?).map_err(|e| fs_error(path, e))
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<(), FsError> {
        let (full_from, full_to) = (self.resolve(from)?, self.resolve(to)?);
        fs::rename(full_from, full_to).map_err(|e| fs_error(from, e))
    }

    fn sync_dir(&mut self, dir: &str) -> Result<(), FsError> {
        sync_path(&self.resolve(dir)?).map_err(|e| fs_error(dir, e))
    }

    fn remove(&mut self, path: &str) -> Result<(), FsError> {
        match fs::remove_file(self.resolve(path)?) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(fs_error(path, e)),
        }
    }

    // `File::try_lock` is stable since Rust 1.89; the workspace's declared minimum is older.
    fn try_lock(&mut self, path: &str) -> Result<bool, FsError> {
        if self.locks.contains_key(path) {
            return Ok(false);
        }
        let full = self.resolve(path)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(FILE_MODE)
            .open(full)
            .map_err(|e| fs_error(path, e))?;
        match file.try_lock() {
            Ok(()) => {
                self.locks.insert(path.to_owned(), file);
                Ok(true)
            }
            Err(TryLockError::WouldBlock) => Ok(false),
            Err(TryLockError::Error(e)) => Err(fs_error(path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
