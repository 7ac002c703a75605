//! What a run of an action world ([`crate::work`], [`crate::goal`], [`crate::service`]) is
//! beyond its seed ([`WorldOptions`]) and what a traced run records after each action
//! ([`ActionLog`]). The worlds fill them; [`crate::worlds`] runs, replays and minimizes them.

use crate::fs::SimFs;
use crate::harness::options::InjectedBug;
use serde::{Deserialize, Serialize};

/// The shape of one run beyond its seed: what minimizing reduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorldOptions {
    /// Actions of the phase with faults (steps, for the service); a calm phase follows where
    /// the world has one.
    pub faulty: u64,
    /// Crashes armed before actions (and inside sweeps and plans). Switched off, the draws
    /// still happen, so the rest of the run keeps its course as far as it can.
    pub crashes: bool,
    /// A planted bug (test builds only): only `lying-dir-sync` applies to these worlds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bug: Option<InjectedBug>,
}

impl WorldOptions {
    /// A faulty phase of `faulty` actions, crashes armed, no bug planted: how a sweep runs.
    pub fn new(faulty: u64) -> WorldOptions {
        WorldOptions { faulty, crashes: true, bug: None }
    }
}

/// What one action left behind, for replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionRecord {
    /// The action's number, from 1.
    pub action: u64,
    /// [`SimFs::state_hash`] after it: every name and every byte, current and durable.
    pub hash: u64,
}

/// The records of a run being traced (nothing while it is not).
#[derive(Debug, Default)]
pub struct ActionLog(Option<Vec<ActionRecord>>);

impl ActionLog {
    /// A log that records when `on`.
    pub fn new(on: bool) -> ActionLog {
        ActionLog(on.then(Vec::new))
    }

    /// Records the state `fs` is in after the next action.
    pub fn record(&mut self, fs: &SimFs) {
        if let Some(records) = &mut self.0 {
            let action = records.len() as u64 + 1;
            records.push(ActionRecord { action, hash: fs.state_hash() });
        }
    }

    pub(crate) fn take(&mut self) -> Option<Vec<ActionRecord>> {
        self.0.take()
    }
}

/// Plants `bug` in a world's filesystem, if it is one that applies.
pub(crate) fn plant(fs: &mut SimFs, bug: Option<InjectedBug>) {
    #[cfg(feature = "planted-bugs")]
    if crate::harness::options::lies_about_dir_sync(bug) {
        fs.lie_about_dir_sync();
    }
    #[cfg(not(feature = "planted-bugs"))]
    let _ = (fs, bug);
}
