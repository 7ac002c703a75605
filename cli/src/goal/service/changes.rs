//! File-change notification as an early-wake hint: the directories the enrolled goals' state
//! is read from are watched with inotify, and a change reported between sweeps brings the next
//! sweep forward (`ServiceScheduler::wake_early`). The poll at the wake interval stays the
//! guarantee; a watch that cannot be added, or a platform without inotify, costs only latency.

use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
use std::collections::BTreeSet;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::{mpsc, Arc};
use std::time::Instant;

/// Most directories watched; past this the poll alone serves the rest.
pub const WATCHES_MAX: usize = 4_096;

/// What wakes the daemon's loop before its next deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// A stop was asked for.
    Stop,
    /// A watched directory changed at this instant.
    Changed(Instant),
}

/// The inotify instance and the directories it watches.
pub struct Changes {
    fd: Arc<OwnedFd>,
    watched: BTreeSet<String>,
}

impl Changes {
    /// Starts a thread that sends [`Wake::Changed`] for every batch of events read; `None`
    /// when inotify is not available.
    pub fn start(tx: mpsc::Sender<Wake>) -> Option<Changes> {
        let fd = Arc::new(inotify::init(CreateFlags::CLOEXEC).ok()?);
        let reading = fd.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // Blocks until events arrive; their content does not matter, only their moment.
            while rustix::io::read(&*reading, &mut buf).is_ok_and(|n| n > 0) {
                if tx.send(Wake::Changed(Instant::now())).is_err() {
                    return;
                }
            }
        });
        Some(Changes { fd, watched: BTreeSet::new() })
    }

    /// Adds watches for `dirs` (relative to `root`) not yet watched, up to [`WATCHES_MAX`].
    pub fn watch<'a>(&mut self, root: &Path, dirs: impl IntoIterator<Item = &'a String>) {
        let flags = WatchFlags::MODIFY
            | WatchFlags::CREATE
            | WatchFlags::MOVED_TO
            | WatchFlags::DELETE
            | WatchFlags::ONLYDIR;
        for dir in dirs {
            if self.watched.len() >= WATCHES_MAX {
                return;
            }
            if !self.watched.contains(dir)
                && inotify::add_watch(&*self.fd, root.join(dir), flags).is_ok()
            {
                self.watched.insert(dir.clone());
            }
        }
    }
}
