//! A run's disk limit (`limits.disk`), held by measuring: every
//! [`harn_core::limits::DISK_WATCH_INTERVAL`] the bytes its own space holds (its repository of
//! its own, its temporary directory) are added up, and a run over its limit is reported to the
//! core, which ends it (`work::segment`). No filesystem here gives a directory a quota for
//! free, so harn watches; a run that fills a disk it shares with others is the machine's
//! (decision record 0015), not this.

use harn_core::limits::{LimitReached, DISK_WATCH_INTERVAL};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The disk limit of one segment.
pub struct DiskWatch {
    /// The limit, in bytes.
    max: u64,
    /// The run's own space: what is measured.
    paths: Vec<PathBuf>,
    /// When it is measured next.
    next: Instant,
    /// Reported once: the core ends the run.
    reported: bool,
}

impl DiskWatch {
    /// A watch of `paths` against `max` bytes, measured first at once.
    pub fn new(max: u64, paths: Vec<PathBuf>) -> DiskWatch {
        DiskWatch { max, paths, next: Instant::now(), reported: false }
    }

    /// Adds a path to measure (the temporary directory, known once the workflow started).
    pub fn watch(&mut self, path: PathBuf) {
        if !self.paths.contains(&path) {
            self.paths.push(path);
        }
    }

    /// How long a wait of `wait` may last before the next measure is due.
    pub fn bound(&self, wait: Option<Duration>) -> Option<Duration> {
        if self.reported {
            return wait;
        }
        let due = self.next.saturating_duration_since(Instant::now());
        Some(wait.map_or(due, |w| w.min(due)))
    }

    /// Measures when due: the limit reached, once.
    pub fn check(&mut self) -> Option<LimitReached> {
        if self.reported || Instant::now() < self.next {
            return None;
        }
        self.next = Instant::now() + Duration::from_nanos(DISK_WATCH_INTERVAL.0);
        let used: u64 = self.paths.iter().map(|p| usage(p)).sum();
        if used <= self.max {
            return None;
        }
        self.reported = true;
        Some(LimitReached::Disk { max: self.max, used })
    }
}

/// The bytes the files below `root` take on disk (allocated blocks, so a sparse file counts
/// what it holds), never following a link and counting a file linked twice once per link.
pub fn usage(root: &std::path::Path) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        let Ok(meta) = path.symlink_metadata() else { continue };
        total = total.saturating_add(meta.blocks().saturating_mul(512));
        if meta.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&path) {
                stack.extend(entries.flatten().map(|e| e.path()));
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_space_over_its_limit_is_reported_once_and_one_under_it_never() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), vec![7u8; 256 * 1024]).unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("d/b"), vec![7u8; 256 * 1024]).unwrap();
        assert!(usage(dir.path()) >= 512 * 1024);
        let mut under = DiskWatch::new(64 << 20, vec![dir.path().to_path_buf()]);
        assert_eq!(under.check(), None);
        let mut over = DiskWatch::new(128 * 1024, vec![dir.path().to_path_buf()]);
        let Some(LimitReached::Disk { max, used }) = over.check() else { panic!("not reported") };
        assert_eq!(max, 128 * 1024);
        assert!(used >= 512 * 1024, "{used}");
        assert_eq!(over.check(), None, "reported once");
        assert_eq!(over.bound(Some(Duration::from_secs(9))), Some(Duration::from_secs(9)));
    }
}
