//! The harness daemon's decision core: many harnesses, profiles, durable intent in
//! `state.json`, operator commands and their acknowledgements, in the sans-IO shape
//! (`handle`, `handle_timeout`, `poll_effect`, `poll_timeout`).
//!
//! Persist before act: every batch of effects that follows one input starts with the
//! `PersistState` barrier when the durable view changed, so a spawn, a signal or an
//! acknowledgement is never executed before the intent it depends on is on disk.

mod attach;
mod config;
mod state_file;

pub use attach::Attachment;
pub use config::{DaemonConfig, Profile};
pub use state_file::PersistedState;
pub use state_file::StateFileError;
pub(crate) use state_file::STATE_VERSION;

use crate::env::{Pid, Signal, SpawnSpec};
use crate::error::RecordError;
use crate::harness::lifecycle::harness::Durable;
use crate::harness::lifecycle::{Cause, Event, Harness, HarnessInput, HarnessOut};
use crate::ids::Id;
use crate::time::{Duration, Instant};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// An operator's request, acknowledged once its effect on intent is durable.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "command")]
pub enum Command {
    /// Start harnesses.
    Start {
        /// Which ones; every name must be known, or none is started.
        names: Vec<Id>,
    },
    /// Stop harnesses.
    Stop {
        /// Which ones; every name must be known, or none is stopped.
        names: Vec<Id>,
    },
    /// Restart harnesses, clearing their failure latches.
    Restart {
        /// Which ones; every name must be known, or none is restarted.
        names: Vec<Id>,
    },
    /// Make a profile active: start its harnesses, stop the enabled ones outside it.
    UseProfile {
        /// Which profile.
        profile: Id,
    },
    /// Apply a newly read configuration. Running harnesses are never bounced by it.
    Reload {
        /// The new configuration.
        config: DaemonConfig,
        /// Apply it even when it removes every harness (`reload --force`).
        force: bool,
    },
    /// Close intake and stop every harness gracefully, keeping every intent, so the daemon
    /// can exit; see [`Daemon::drained`]. With a drain timeout, every run still stopping when
    /// it has passed is killed (SIGKILL) by [`Daemon::handle_timeout`]; a later shutdown can
    /// bring that deadline forward, never push it back.
    Shutdown {
        /// How long the harnesses may take to stop; `None` waits for each one's own kill
        /// deadline.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        drain_timeout: Option<Duration>,
    },
}

/// One input to the daemon core.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum DaemonInput {
    /// An operator command with the id its acknowledgement will carry.
    Command {
        /// Echoed in [`DaemonEffect::Ack`].
        id: u64,
        /// The request.
        command: Command,
    },
    /// A report about one harness's process.
    Process {
        /// The harness.
        name: Id,
        /// The report (spawned, spawn failed, exited, ready).
        report: HarnessInput,
    },
    /// A client asks to see (and, unless `read_only`, type into) a terminal harness.
    Attach {
        /// The connection's id, unique for the daemon's life.
        client: u64,
        /// The harness.
        name: Id,
        /// Watch only.
        read_only: bool,
    },
    /// A client detached or its connection dropped.
    Detach {
        /// The connection's id.
        client: u64,
    },
}

/// What the daemon asks the driver to do, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum DaemonEffect {
    /// Durability barrier: atomically replace `state.json` with these bytes before anything
    /// after it runs.
    PersistState {
        /// Increases with every persist; the simulator checks none is lost.
        generation: u64,
        /// The file's new content.
        bytes: Vec<u8>,
    },
    /// Append these events to the events journal.
    AppendEvents(Vec<Event>),
    /// Start a run of a harness.
    Spawn {
        /// The harness.
        name: Id,
        /// The run number.
        run: u64,
        /// What to start.
        spec: SpawnSpec,
    },
    /// Signal a run's process group.
    Signal {
        /// The harness.
        name: Id,
        /// The run.
        run: u64,
        /// Its process group.
        pid: Pid,
        /// Which signal.
        signal: Signal,
    },
    /// Answer an attach: the attachment, or why not. Never behind a barrier: attaching
    /// changes no intent.
    Attached {
        /// The connection's id.
        client: u64,
        /// The harness asked for.
        name: Id,
        /// What was granted, or the refusal as the person reads it.
        result: Result<Attachment, RecordError>,
    },
    /// Tell the operator their command took effect (or why not).
    Ack {
        /// The command's id.
        id: u64,
        /// `Err` is the command's refusal, as the operator reads it.
        result: Result<(), RecordError>,
    },
}

#[cfg(feature = "planted-bugs")]
use crate::planted::PlantedBug;

/// Why a configuration is not applied; the last good one stays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReloadRefused {
    /// The daemon is shutting down.
    Draining,
    /// The configuration breaks a rule (bad input).
    Invalid(RecordError),
    /// It removes every harness, which would stop them all, and `force` was not given (bad
    /// input: the person says it again with `--force`).
    RemovesEvery,
}

impl ReloadRefused {
    /// True for bad input (exit 2), false for the moment (exit 1).
    pub fn bad_input(&self) -> bool {
        !matches!(self, ReloadRefused::Draining)
    }
}

impl std::fmt::Display for ReloadRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReloadRefused::Draining => f.write_str("the daemon is shutting down"),
            ReloadRefused::Invalid(e) => write!(f, "{e}"),
            ReloadRefused::RemovesEvery => f.write_str(
                "it removes every harness, which would stop them all; reload --force does it",
            ),
        }
    }
}

/// Why the daemon could not boot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BootError {
    /// `state.json` could not be read.
    State(StateFileError),
    /// The configuration is inconsistent.
    Config(RecordError),
}

impl std::fmt::Display for BootError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BootError::State(e) => write!(f, "{e}"),
            BootError::Config(e) => write!(f, "configuration: {e}"),
        }
    }
}

impl std::error::Error for BootError {}

/// The daemon's decision core.
#[derive(Clone, Debug)]
pub struct Daemon {
    config: DaemonConfig,
    harnesses: BTreeMap<Id, Harness>,
    /// Harnesses removed from the configuration, kept until their last run has ended.
    removed: Vec<Id>,
    /// Last run numbers of harnesses no longer configured (see `PersistedState::retired`).
    retired: BTreeMap<Id, u64>,
    active_profile: Option<Id>,
    /// Set by [`Command::Shutdown`]: no command but another shutdown is accepted.
    draining: bool,
    /// The drain deadline a bounded shutdown set, and whether it passed (and everything still
    /// stopping was killed).
    drain_deadline: Option<Instant>,
    drain_forced: bool,
    generation: u64,
    persisted: PersistedState,
    effects: VecDeque<DaemonEffect>,
    scratch: Vec<HarnessOut>,
    /// Spawns waiting for their harness's dependencies to be ready: the run and what to start.
    held: BTreeMap<Id, (u64, crate::env::SpawnSpec)>,
    /// Clients attached to terminal harnesses; never persisted.
    attachments: attach::Attachments,
    #[cfg(feature = "planted-bugs")]
    planted: Option<PlantedBug>,
}

mod machine;
pub use machine::no_such_harness;

#[cfg(test)]
mod tests;
