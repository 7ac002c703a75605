//! The harness lifecycle: the seven states, restart policies, timing limits, and the events a
//! harness emits. The machine for one harness is in [`harness`]; many of them under one daemon,
//! with profiles and durable intent, are in [`crate::harness::daemon`].

mod event_json;
pub mod harness;
pub mod limits;

pub use harness::{Harness, HarnessInput, HarnessOut, LastExit};
pub use limits::{CrashLoop, LifecycleLimits};

use crate::env::SpawnSpec;
use crate::ids::Id;
use crate::time::Duration;
use serde::{Deserialize, Serialize};

/// Where a harness is in its lifecycle. `enabled` (the intent) is kept beside it, not in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Not running and not scheduled to run.
    Stopped,
    /// A spawn was requested and its outcome is not known yet.
    Starting,
    /// A process is alive and not flapping.
    Running,
    /// Flapping: too many exits within the flap window. A process may be alive (a restarted
    /// run not yet proven stable) or the next retry may be scheduled with a growing delay.
    Degraded,
    /// Waiting the restart delay before the next start.
    Restarting,
    /// Asked to stop: SIGTERM sent, SIGKILL follows after the grace period.
    Stopping,
    /// Gave up (or could not spawn under a no-restart policy). Needs a person: a manual
    /// `start` or `restart` clears it.
    Failed,
}

impl State {
    /// Every state, for tests and tables.
    pub const ALL: [State; 7] = [
        State::Stopped,
        State::Starting,
        State::Running,
        State::Degraded,
        State::Restarting,
        State::Stopping,
        State::Failed,
    ];

    /// The glyph the dashboard shows.
    pub fn glyph(self) -> char {
        match self {
            State::Stopped => '○',
            State::Starting | State::Restarting | State::Stopping => '◌',
            State::Running => '●',
            State::Degraded => '◐',
            State::Failed => '✖',
        }
    }

    /// The lowercase name used in JSON and on screen.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Stopped => "stopped",
            State::Starting => "starting",
            State::Running => "running",
            State::Degraded => "degraded",
            State::Restarting => "restarting",
            State::Stopping => "stopping",
            State::Failed => "failed",
        }
    }
}

/// When an exit is followed by a restart (Docker Compose's `restart` directive).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum RestartPolicy {
    /// Restart after any exit, clean or not (the default).
    #[default]
    Always,
    /// The same as `always` here: a manual stop already persists `enabled = false`.
    UnlessStopped,
    /// Restart only after a non-zero exit, a signal, or a spawn failure.
    OnFailure,
    /// Never restart automatically.
    No,
}

/// How a harness proves it is ready, beyond having a live pid.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Readiness {
    /// Ready as soon as it is spawned.
    #[default]
    None,
    /// Ready once this file exists.
    File {
        /// Path of the file, relative to the harness's working directory.
        path: String,
    },
    /// Ready once this command exits 0.
    Probe {
        /// Program and arguments of the probe.
        command: Vec<String>,
    },
    /// Ready once the child writes `READY=1` to its notify socket.
    Notify,
}

/// One harness's configuration, as read from `harness.toml`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HarnessSpec {
    /// What to run.
    pub spawn: SpawnSpec,
    /// When an exit is followed by a restart. Read at exit time, so a change applies at once.
    pub restart: RestartPolicy,
    /// Overrides [`LifecycleLimits::restart_delay`] for this harness.
    pub restart_delay: Option<Duration>,
    /// Overrides [`LifecycleLimits::stop_grace`] for this harness.
    pub stop_grace: Option<Duration>,
    /// The evidence of readiness.
    pub readiness: Readiness,
    /// A run not ready this long after its spawn failed to start (`TimeoutStartSec=`): it is
    /// stopped and counted as a failed run under its restart policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_timeout: Option<Duration>,
    /// How often a ready run's file or probe is checked again; a failed recheck makes it not
    /// ready until its evidence shows again. `None`: readiness, once shown, is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recheck: Option<Duration>,
    /// A ready run that sends no `WATCHDOG=1` for this long is hung (`WatchdogSec=`): it is
    /// stopped and counted as a failed run under its restart policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watchdog: Option<Duration>,
    /// Harnesses that must be ready before a run of this one is spawned (`Requires=`); the
    /// run waits in `starting` meanwhile. Applies at once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<Id>,
    /// Harnesses that, when they are starting too, must be ready first (`After=`): ordering
    /// only, a stopped one is not waited for. Applies at once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<Id>,
    /// Crash-loop limits of its own, overriding `[limits]` where set; they apply at once.
    #[serde(default, skip_serializing_if = "is_default")]
    pub crash_loop: CrashLoop,
    /// The intent to use when no intent was persisted yet.
    pub enabled: bool,
}

fn is_default(c: &CrashLoop) -> bool {
    *c == CrashLoop::default()
}

impl HarnessSpec {
    /// True when `other` would start a different process or judge its readiness
    /// differently. Such a change waits for the next start; the restart policy, the restart
    /// delay, the stop grace and the default intent apply at once.
    pub(crate) fn run_affecting_change(&self, other: &HarnessSpec) -> bool {
        self.spawn != other.spawn
            || self.readiness != other.readiness
            || self.ready_timeout != other.ready_timeout
            || self.recheck != other.recheck
            || self.watchdog != other.watchdog
    }
}

/// Why a live run was judged hung and stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Hang {
    /// Not ready within `ready_timeout_ms`.
    ReadyTimeout,
    /// No `WATCHDOG=1` within `watchdog_ms`.
    Watchdog,
}

impl Hang {
    /// The reason in words.
    pub fn as_str(self) -> &'static str {
        match self {
            Hang::ReadyTimeout => "not ready within its ready_timeout_ms",
            Hang::Watchdog => "no WATCHDOG=1 within its watchdog_ms",
        }
    }
}

/// Who or what made a harness start or stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// The daemon booted, and the harness's intent says run.
    Autostart,
    /// An operator's start, stop or restart.
    Operator,
    /// An operator made a profile active.
    Profile,
    /// The configuration: its intent after a reload, or the harness removed from it.
    Configuration,
    /// The restart policy, after an exit.
    RestartPolicy,
    /// The daemon shutting down.
    Shutdown,
    /// The run was hung (its watchdog or its readiness timeout).
    Hung,
}

impl Cause {
    /// The cause in words, as the recovery ledger records it.
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Autostart => "autostart",
            Cause::Operator => "operator",
            Cause::Profile => "operator (profile use)",
            Cause::Configuration => "configuration",
            Cause::RestartPolicy => "restart policy",
            Cause::Shutdown => "shutdown",
            Cause::Hung => "hung (watchdog or readiness timeout)",
        }
    }
}

/// What a harness tells the world, pushed to subscribers and appended to the events journal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// Any state change.
    HarnessStateChanged {
        /// The harness.
        name: Id,
        /// The state it left.
        from: State,
        /// The state it entered.
        to: State,
        /// Who asked for it: set on a start, on a stop request, and on a stop that ended a
        /// pending restart; absent where the machine's own rules moved it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<Cause>,
    },
    /// A run ended (or never began: a spawn failure has neither code nor signal).
    HarnessExited {
        /// The harness.
        name: Id,
        /// The exit code, when it exited.
        code: Option<i32>,
        /// The signal number, when a signal ended it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
    },
    /// A run showed its readiness evidence (never for a harness without readiness: it is
    /// ready when it runs).
    HarnessReady {
        /// The harness.
        name: Id,
        /// The run.
        run: u64,
    },
    /// A ready run lost its readiness: a recheck of its file or probe failed. It stays
    /// running, not ready, until its evidence shows again (another `harness_ready`).
    HarnessUnready {
        /// The harness.
        name: Id,
        /// The run.
        run: u64,
    },
    /// A live run was judged hung and is being stopped; its end counts as a failed run.
    HarnessHung {
        /// The harness.
        name: Id,
        /// Why.
        reason: Hang,
        /// How long it waited, in ms (the timeout that ran out).
        after_ms: u64,
    },
    /// The harness crossed the flap threshold; restarts are slowed down.
    HarnessFlapping {
        /// The harness.
        name: Id,
        /// Restarts so far.
        restarts: u64,
        /// Milliseconds until the next attempt.
        next_retry_in: u64,
    },
}

#[cfg(test)]
mod tests;
