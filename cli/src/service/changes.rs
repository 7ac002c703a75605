//! File-change notification as an early-wake hint: the directories the enrolled goals' state
//! is read from are watched with inotify, and a change reported between sweeps brings the next
//! sweep forward (`ServiceScheduler::wake_early`). The poll at the wake interval stays the
//! guarantee; a watch that cannot be added, or a platform without inotify, costs only latency.

use harn_core::env::Clock;
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};

/// Most directories watched; past this the poll alone serves the rest.
pub const WATCHES_MAX: usize = 4_096;

/// What wakes the daemon's loop before its next deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// A stop was asked for.
    Stop,
    /// A watched directory changed at this instant (of the process's `RealClock`).
    Changed(harn_core::time::Instant),
}

/// The inotify instance and the directories it watches, by watch descriptor.
pub struct Changes {
    fd: Arc<OwnedFd>,
    watched: Arc<Mutex<BTreeMap<String, i32>>>,
}

impl Changes {
    /// Starts a thread that sends [`Wake::Changed`] for every batch of events read; `None`
    /// when inotify is not available.
    pub fn start(tx: mpsc::Sender<Wake>) -> Option<Changes> {
        let fd = Arc::new(inotify::init(CreateFlags::CLOEXEC).ok()?);
        let watched = Arc::new(Mutex::new(BTreeMap::new()));
        let (reading, forget) = (fd.clone(), watched.clone());
        std::thread::spawn(move || {
            let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
            let mut events = inotify::Reader::new(&*reading, &mut buf);
            // Blocks until events arrive; only their moment matters, and which watches the
            // kernel dropped (a directory removed): those may be added again later.
            while let Ok(event) = events.next() {
                if event.events().contains(ReadFlags::IGNORED) {
                    let wd = event.wd();
                    forget.lock().unwrap_or_else(|e| e.into_inner()).retain(|_, w| *w != wd);
                }
                let seen_at = crate::os::clock::RealClock::new().now();
                if events.is_buffer_empty() && tx.send(Wake::Changed(seen_at)).is_err() {
                    return;
                }
            }
        });
        Some(Changes { fd, watched })
    }

    /// Adds watches for `dirs` (relative to `root`) not yet watched, up to [`WATCHES_MAX`].
    pub fn watch<'a>(&mut self, root: &Path, dirs: impl IntoIterator<Item = &'a String>) {
        let flags = WatchFlags::MODIFY
            | WatchFlags::CREATE
            | WatchFlags::MOVED_TO
            | WatchFlags::DELETE
            | WatchFlags::ONLYDIR;
        let mut watched = self.watched.lock().unwrap_or_else(|e| e.into_inner());
        for dir in dirs {
            if watched.len() >= WATCHES_MAX {
                return;
            }
            if !watched.contains_key(dir) {
                if let Ok(wd) = inotify::add_watch(&*self.fd, root.join(dir), flags) {
                    watched.insert(dir.clone(), wd);
                }
            }
        }
    }
}
