//! A planted bug for checking the checker: a filesystem whose `sync_dir` does nothing.

use harn_core::env::{Fs, FsError};

/// Wraps a filesystem and drops every `sync_dir`, as a misconfigured mount or a buggy
/// durability helper would. New and renamed files then never become durable.
pub struct LyingDirSync<'a, F: Fs>(pub &'a mut F);

impl<F: Fs> Fs for LyingDirSync<'_, F> {
    fn read(&mut self, path: &str) -> Result<Option<Vec<u8>>, FsError> {
        self.0.read(path)
    }
    fn list(&mut self, dir: &str) -> Result<Vec<String>, FsError> {
        self.0.list(dir)
    }
    fn create_dir_all(&mut self, dir: &str) -> Result<(), FsError> {
        self.0.create_dir_all(dir)
    }
    fn create_new(&mut self, path: &str, bytes: &[u8]) -> Result<(), FsError> {
        self.0.create_new(path, bytes)
    }
    fn write_temp(&mut self, path: &str, bytes: &[u8]) -> Result<(), FsError> {
        self.0.write_temp(path, bytes)
    }
    fn append(&mut self, path: &str, bytes: &[u8]) -> Result<(), FsError> {
        self.0.append(path, bytes)
    }
    fn truncate(&mut self, path: &str, len: u64) -> Result<(), FsError> {
        self.0.truncate(path, len)
    }
    fn sync_file(&mut self, path: &str) -> Result<(), FsError> {
        self.0.sync_file(path)
    }
    fn rename(&mut self, from: &str, to: &str) -> Result<(), FsError> {
        self.0.rename(from, to)
    }
    fn sync_dir(&mut self, _dir: &str) -> Result<(), FsError> {
        Ok(()) // The bug.
    }
    fn remove(&mut self, path: &str) -> Result<(), FsError> {
        self.0.remove(path)
    }
    fn try_lock(&mut self, path: &str) -> Result<bool, FsError> {
        self.0.try_lock(path)
    }
}
