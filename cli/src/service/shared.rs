//! What the service's loop, its watcher thread and the sweep share: the status record
//! (written under its lock), the stop flag, the audit ledger, and the thread carrying out a
//! forced stop.

use super::files::{write_whole, Audit};
use crate::os::clock::RealClock;
use harn_core::env::Clock;
use harn_core::service::{ServiceConfig, ServiceStatus};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

/// What the watcher thread and the loop share.
pub struct Shared {
    status: Mutex<ServiceStatus>,
    /// Set by SIGTERM or SIGINT, or by the watcher when `stop.json` appears.
    pub stop: Arc<AtomicBool>,
    pub(super) root: PathBuf,
    /// The audit ledger and the log.
    pub audit: Audit,
    /// The thread terminating the tick's children after a forced stop, joined before the
    /// daemon records that it stopped.
    pub(super) forcing: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The thread telling a person what the last sweep left waiting, so a receiver that is
    /// slow to answer never holds a sweep.
    pub(super) telling: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Shared {
    pub(super) fn new(root: &std::path::Path, config: &ServiceConfig, audit: Audit) -> Shared {
        let started = RealClock::new().wall();
        let mut status = ServiceStatus::starting(std::process::id(), started, config.created_at);
        status.heartbeat_boot = crate::os::clock::boot_mark();
        Shared {
            status: Mutex::new(status),
            stop: Arc::new(AtomicBool::new(false)),
            root: root.to_owned(),
            audit,
            forcing: Mutex::new(None),
            telling: Mutex::new(None),
        }
    }

    /// Changes the status and writes it, under the lock, so two writers can never leave an
    /// older record on disk after a newer one.
    pub fn update(&self, f: impl FnOnce(&mut ServiceStatus)) {
        let mut status = self.status.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut status);
        let _ = write_whole(&self.root, "status.json", &*status);
    }

    pub(super) fn active_goal(&self) -> Option<String> {
        let status = self.status.lock().unwrap_or_else(|e| e.into_inner());
        status.active_goal_id.as_ref().map(|g| g.to_string())
    }
}
