//! Whole-file replacement that a crash can never leave half-done (docs/FORMATS.md).
//!
//! The new content goes to a temporary sibling, is synced, renamed over the target, and the
//! parent directory is synced. A crash before the rename leaves the old file (and maybe a stray
//! `.tmp`); a crash after it leaves the new file or, until the directory sync, the old one.
//! Readers therefore only ever see one complete version.

use crate::env::{parent_dir, Fs, FsError};

/// Suffix of the temporary sibling written before the rename.
pub(crate) const TEMP_SUFFIX: &str = ".tmp";

/// The temporary sibling used while replacing `path`.
pub fn temp_path(path: &str) -> String {
    // Two copies, not the formatting machinery: every persist of the daemon names one.
    let mut temp = String::with_capacity(path.len() + TEMP_SUFFIX.len());
    temp.push_str(path);
    temp.push_str(TEMP_SUFFIX);
    temp
}

/// Replaces `path` with `bytes` atomically and durably: `write_temp`, `sync_file`, `rename`,
/// `sync_dir` of the parent, each a separate [`Fs`] call. When this returns `Ok`, the new
/// content survives a crash.
pub fn atomic_replace(fs: &mut dyn Fs, path: &str, bytes: &[u8]) -> Result<(), FsError> {
    let temp = temp_path(path);
    fs.write_temp(&temp, bytes)?;
    fs.sync_file(&temp)?;
    fs.rename(&temp, path)?;
    fs.sync_dir(parent_dir(path))
}

/// [`atomic_replace`] from space kept for `path` where the filesystem keeps it
/// ([`Fs::replace_reserved`]): what the harness daemon's `state.json` is written with, so a
/// disk its children filled does not stop it saving what it decided.
pub fn replace_kept(fs: &mut dyn Fs, path: &str, bytes: &[u8]) -> Result<(), FsError> {
    match fs.replace_reserved(path, bytes)? {
        true => Ok(()),
        false => atomic_replace(fs, path, bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Logs each call and fails the one named in `fail_at`.
    #[derive(Default)]
    struct LogFs {
        calls: Vec<String>,
        fail_at: Option<&'static str>,
    }

    impl LogFs {
        fn log(&mut self, op: &'static str, path: &str) -> Result<(), FsError> {
            self.calls.push(format!("{op} {path}"));
            match self.fail_at {
                Some(f) if f == op => Err(FsError::new(crate::env::FsErrorKind::Io, path, "")),
                _ => Ok(()),
            }
        }
    }

    impl Fs for LogFs {
        fn read(&mut self, _: &str) -> Result<Option<Vec<u8>>, FsError> {
            unreachable!()
        }
        fn list(&mut self, _: &str) -> Result<Vec<String>, FsError> {
            unreachable!()
        }
        fn create_dir_all(&mut self, _: &str) -> Result<(), FsError> {
            unreachable!()
        }
        fn create_new(&mut self, _: &str, _: &[u8]) -> Result<(), FsError> {
            unreachable!()
        }
        fn write_temp(&mut self, path: &str, _: &[u8]) -> Result<(), FsError> {
            self.log("write_temp", path)
        }
        fn append(&mut self, _: &str, _: &[u8]) -> Result<(), FsError> {
            unreachable!()
        }
        fn truncate(&mut self, _: &str, _: u64) -> Result<(), FsError> {
            unreachable!()
        }
        fn sync_file(&mut self, path: &str) -> Result<(), FsError> {
            self.log("sync_file", path)
        }
        fn rename(&mut self, from: &str, to: &str) -> Result<(), FsError> {
            self.log("rename", &format!("{from} {to}"))
        }
        fn sync_dir(&mut self, dir: &str) -> Result<(), FsError> {
            self.log("sync_dir", dir)
        }
        fn remove(&mut self, _: &str) -> Result<(), FsError> {
            unreachable!()
        }
        fn try_lock(&mut self, _: &str) -> Result<bool, FsError> {
            unreachable!()
        }
    }

    #[test]
    fn replaces_in_four_separate_calls() {
        let mut fs = LogFs::default();
        atomic_replace(&mut fs, "d/status.json", b"{}").unwrap();
        assert_eq!(
            fs.calls,
            [
                "write_temp d/status.json.tmp",
                "sync_file d/status.json.tmp",
                "rename d/status.json.tmp d/status.json",
                "sync_dir d",
            ]
        );
    }

    #[test]
    fn stops_at_the_first_failure() {
        let mut fs = LogFs { fail_at: Some("sync_file"), ..LogFs::default() };
        assert!(atomic_replace(&mut fs, "status.json", b"{}").is_err());
        assert_eq!(fs.calls, ["write_temp status.json.tmp", "sync_file status.json.tmp"]);
    }
}
