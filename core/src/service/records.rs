//! The supervisor service's records, decided purely: the enrollment it freezes
//! (`config.json`), the status it heartbeats (`status.json`), the per-goal wake hints it keeps
//! (`runtime.json`), and how a reader tells a live service from a stopped or crashed one. None
//! of these is ever read to decide a goal's state: they are scheduling hints and liveness.

use crate::ids::Id;
use crate::service::wake::{GoalWake, WakeConfig};
use crate::time::{Duration, WallTime};
use crate::work::policy::FrozenPolicy;
use crate::work::run::{Billing, Isolation};
use crate::work::FieldError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Schema version of the service's files.
pub const SERVICE_VERSION: u32 = 1;
/// Most goals one service may tick (the reference tool stops at 100; 10,000 is a tested load).
pub(crate) const GOALS_MAX: usize = 100_000;
/// A heartbeat older than this many intervals (and at least this slack) means the service is
/// gone even if its record says otherwise.
pub const HEARTBEAT_SLACK_MS: i64 = 30_000;

/// How the service runs the goals' work, frozen by value (the policy by content, never by
/// path).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineOptions {
    /// The harness that answers agent calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness: Option<String>,
    /// The working directory of workflows and agent calls (absolute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Which account calls may bill.
    #[serde(default)]
    pub billing: Billing,
    /// The declared isolation boundary.
    #[serde(default)]
    pub isolation: Isolation,
    /// Who is asked when policy says `ask`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_to: Option<String>,
    /// The host policy, by content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<FrozenPolicy>,
    /// Each run's wall-clock budget, in seconds.
    pub timeout_secs: u64,
    /// True when runs are started unconfined (`--no-containment`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_containment: bool,
    /// Where items' worktrees are made under `--isolation worktree` (absolute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_root: Option<String>,
    /// The commit new worktree branches start from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// The cluster whose nodes run the attempts (`--cluster`), frozen by value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<crate::work::cluster::FrozenCluster>,
    /// What its runs may reach over the network, frozen at enrollment (absent in an
    /// enrollment made before network policies: the root's configuration then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<crate::work::network::NetworkPolicy>,
}

/// `config.json`: what the service was enrolled with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceConfig {
    /// [`SERVICE_VERSION`].
    pub schema_version: u32,
    /// The goals, in the order each sweep ticks them.
    pub goal_ids: Vec<Id>,
    /// Pause between sweeps.
    pub wake_interval_ms: u64,
    /// Period of the heartbeat.
    pub heartbeat_interval_ms: u64,
    /// Delay after a goal's first failed tick.
    pub error_backoff_base_ms: u64,
    /// Cap of every backoff delay.
    pub error_backoff_max_ms: u64,
    /// How work is run.
    pub engine: EngineOptions,
    /// When it was enrolled; wake hints of another enrollment are discarded.
    pub created_at: WallTime,
}

impl ServiceConfig {
    /// The intervals as the wake machine takes them.
    pub fn wake_config(&self) -> WakeConfig {
        WakeConfig {
            wake_interval: Duration::from_millis(self.wake_interval_ms),
            heartbeat_interval: Duration::from_millis(self.heartbeat_interval_ms),
            error_backoff_base: Duration::from_millis(self.error_backoff_base_ms),
            error_backoff_max: Duration::from_millis(self.error_backoff_max_ms),
        }
    }

    /// Checks the goals and intervals; errors name the field.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.schema_version != SERVICE_VERSION {
            return Err(FieldError::new("schema_version", "is not supported"));
        }
        if self.goal_ids.is_empty() || self.goal_ids.len() > GOALS_MAX {
            return Err(FieldError::new("goal_ids", format!("must name 1 to {GOALS_MAX} goals")));
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some(dup) = self.goal_ids.iter().find(|g| !seen.insert(*g)) {
            return Err(FieldError::new("goal_ids", format!("{dup} is named twice")));
        }
        let range = |field: &str, v: u64, lo: u64, hi: u64| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(FieldError::new(field, format!("must be {lo} to {hi}, not {v}")))
            }
        };
        range("wake_interval_ms", self.wake_interval_ms, 1, 3_600_000)?;
        range("heartbeat_interval_ms", self.heartbeat_interval_ms, 1, 60_000)?;
        range("error_backoff_base_ms", self.error_backoff_base_ms, 1, 3_600_000)?;
        range(
            "error_backoff_max_ms",
            self.error_backoff_max_ms,
            self.error_backoff_base_ms,
            86_400_000,
        )?;
        if let Some(policy) = &self.engine.policy {
            policy.verify().map_err(|e| FieldError::new("engine.policy", e.to_string()))?;
        }
        self.wake_config().validate().map_err(|e| FieldError::new(e.field(), e.to_string()))
    }
}

/// Where the service says it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServiceState {
    /// Taking the lease, loading its records.
    Starting,
    /// Sweeping.
    Running,
    /// Asked to stop: finishing the current tick.
    Stopping,
    /// Stopped cleanly.
    Stopped,
}

/// `status.json`: the service's heartbeat record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceStatus {
    /// [`SERVICE_VERSION`].
    pub schema_version: u32,
    /// The daemon's pid.
    pub pid: u32,
    /// Where it says it is.
    pub state: ServiceState,
    /// When it started.
    pub started_at: WallTime,
    /// Its last heartbeat.
    pub heartbeat_at: WallTime,
    /// The enrollment it runs.
    pub config_created_at: WallTime,
    /// Sweeps completed.
    pub sweep_count: u64,
    /// The goal being ticked now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_goal_id: Option<Id>,
    /// When the last sweep ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sweep_at: Option<WallTime>,
    /// How long the last sweep took, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sweep_ms: Option<u64>,
    /// The last sweep-level error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_at: Option<WallTime>,
    /// Its last heartbeat on the machine's boot clock, which a step of the wall clock does not
    /// move: a reader on the same boot judges the heartbeat's age by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_boot: Option<BootMark>,
}

/// A moment on the machine's boot clock (`CLOCK_BOOTTIME`: monotonic, counting suspend, never
/// stepped), with the boot it belongs to: two marks compare only within one boot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootMark {
    /// The kernel's id of this boot (`/proc/sys/kernel/random/boot_id`).
    pub boot_id: String,
    /// Milliseconds since the boot.
    pub at_ms: u64,
}

impl BootMark {
    /// Milliseconds from `earlier` to this mark, when both are of the same boot.
    pub fn since(&self, earlier: &BootMark) -> Option<u64> {
        (self.boot_id == earlier.boot_id).then(|| self.at_ms.saturating_sub(earlier.at_ms))
    }
}

impl ServiceStatus {
    /// How long ago its last heartbeat was, in ms: on the boot clock when `boot_now` and the
    /// record share a boot (no step of the wall clock moves it), else on the wall clock.
    pub fn heartbeat_age(&self, now: WallTime, boot_now: Option<&BootMark>) -> i64 {
        let on_boot = boot_now.zip(self.heartbeat_boot.as_ref()).and_then(|(n, b)| n.since(b));
        match on_boot {
            Some(ms) => i64::try_from(ms).unwrap_or(i64::MAX),
            None => now.0.saturating_sub(self.heartbeat_at.0),
        }
    }

    /// The record of a daemon `pid` starting at `started` for the enrollment made at
    /// `config_created_at`: no sweep yet, its first heartbeat now.
    pub fn starting(pid: u32, started: WallTime, config_created_at: WallTime) -> ServiceStatus {
        ServiceStatus {
            schema_version: SERVICE_VERSION,
            pid,
            state: ServiceState::Starting,
            started_at: started,
            heartbeat_at: started,
            config_created_at,
            sweep_count: 0,
            active_goal_id: None,
            last_sweep_at: None,
            last_sweep_ms: None,
            last_error: None,
            stopped_at: None,
            heartbeat_boot: None,
        }
    }
}

/// `runtime.json`: per-goal wake hints of one enrollment.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeHints {
    /// The enrollment they belong to.
    pub config_created_at: WallTime,
    /// By goal.
    pub goals: BTreeMap<Id, GoalWake>,
    /// What each goal's last tick came to, for status readers.
    #[serde(default)]
    pub last_outcome: BTreeMap<Id, String>,
    /// When these hints were written, on the wall clock and on the writer's monotonic clock:
    /// together they let another process place a `next_wake_at` on the wall clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written_at: Option<(WallTime, crate::time::Instant)>,
}

impl RuntimeHints {
    /// When `at`, an instant of the writer's monotonic clock, falls on the wall clock; `None`
    /// for hints that do not say when they were written.
    pub fn wall_of(&self, at: crate::time::Instant) -> Option<WallTime> {
        let (wall, mono) = self.written_at?;
        let ahead = i64::try_from(at.0.saturating_sub(mono.0) / 1_000_000).unwrap_or(i64::MAX);
        let behind = i64::try_from(mono.0.saturating_sub(at.0) / 1_000_000).unwrap_or(i64::MAX);
        Some(WallTime(wall.0.saturating_add(ahead).saturating_sub(behind)))
    }

    /// The hints for `config`: these, if they belong to it, else none (a new enrollment
    /// starts every goal idle).
    pub fn for_config(self, config: &ServiceConfig) -> RuntimeHints {
        if self.config_created_at == config.created_at {
            self
        } else {
            RuntimeHints { config_created_at: config.created_at, ..RuntimeHints::default() }
        }
    }
}

/// What a reader makes of the service.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Liveness {
    /// Never enrolled.
    Unconfigured,
    /// Running (or starting).
    Running,
    /// Finishing its current tick before it stops.
    Stopping,
    /// Stopped cleanly.
    Stopped,
    /// Its record says it runs, but nobody holds the lease or its heartbeat lapsed: it
    /// crashed.
    Stale,
}

/// The service's liveness from its status record, whether its lease is held, and `now` (on
/// the wall clock, and on the boot clock when the reader has it). The lease decides (a crash
/// releases it); a lapsed heartbeat marks a live-looking record whose holder stopped beating,
/// judged on the boot clock when the record and the reader share a boot, so that a step of
/// the wall clock (an NTP correction, a person's `date`) never makes a live service stale.
pub fn liveness(
    status: Option<&ServiceStatus>,
    configured: bool,
    lease_held: bool,
    heartbeat_interval_ms: u64,
    now: WallTime,
    boot_now: Option<&BootMark>,
) -> Liveness {
    let Some(s) = status else {
        return if lease_held {
            Liveness::Running
        } else if configured {
            Liveness::Stopped
        } else {
            Liveness::Unconfigured
        };
    };
    let lapse = (heartbeat_interval_ms as i64).saturating_mul(3).max(HEARTBEAT_SLACK_MS);
    let beating = s.heartbeat_age(now, boot_now) <= lapse;
    match (s.state, lease_held) {
        (ServiceState::Stopped, false) => Liveness::Stopped,
        (_, false) => Liveness::Stale,
        (ServiceState::Stopping, true) => Liveness::Stopping,
        (_, true) if beating => Liveness::Running,
        (_, true) => Liveness::Stale,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An enrollment of one goal, `g1`, made at `WallTime(7)`, with the default intervals.
    pub(crate) fn config() -> ServiceConfig {
        ServiceConfig {
            schema_version: SERVICE_VERSION,
            goal_ids: vec![Id::new("g1").unwrap()],
            wake_interval_ms: 5_000,
            heartbeat_interval_ms: 2_000,
            error_backoff_base_ms: 2_000,
            error_backoff_max_ms: 300_000,
            engine: EngineOptions { timeout_secs: 3_600, ..EngineOptions::default() },
            created_at: WallTime(7),
        }
    }

    fn status(state: ServiceState, heartbeat: i64) -> ServiceStatus {
        let mut s = ServiceStatus::starting(1, WallTime(0), WallTime(7));
        s.state = state;
        s.heartbeat_at = WallTime(heartbeat);
        s
    }

    #[test]
    fn a_config_names_its_bad_field() {
        assert!(config().validate().is_ok());
        let mut c = config();
        c.goal_ids.push(Id::new("g1").unwrap());
        assert_eq!(c.validate().unwrap_err().field, "goal_ids");
        let mut c = config();
        c.error_backoff_max_ms = 1_000;
        assert_eq!(c.validate().unwrap_err().field, "error_backoff_max_ms");
    }

    #[test]
    fn a_policy_edited_after_it_was_frozen_is_refused() {
        let rules = r#"{"rules": [{"name": "no-push", "on": "authorize", "action": "push", "verdict": "deny"}]}"#;
        let policy = crate::work::policy::parse_policy("policy.jsonc", rules.as_bytes()).unwrap();
        let mut c = config();
        c.engine.policy = Some(crate::work::policy::FrozenPolicy::new(policy));
        assert!(c.validate().is_ok());
        let mut edited = c.clone();
        let rule = &mut edited.engine.policy.as_mut().unwrap().policy.rules[0];
        rule.verdict = crate::work::policy::Verdict::Allow;
        let e = edited.validate().unwrap_err();
        assert_eq!(e.field, "engine.policy");
        assert!(e.to_string().contains("edited after it was frozen"), "{e}");
    }

    #[test]
    fn the_lease_and_the_heartbeat_tell_live_from_crashed() {
        let now = WallTime(100_000);
        assert_eq!(liveness(None, false, false, 2_000, now, None), Liveness::Unconfigured);
        assert_eq!(liveness(None, true, false, 2_000, now, None), Liveness::Stopped);
        let running = status(ServiceState::Running, 99_000);
        assert_eq!(liveness(Some(&running), true, true, 2_000, now, None), Liveness::Running);
        assert_eq!(
            liveness(Some(&running), true, false, 2_000, now, None),
            Liveness::Stale,
            "a crash releases the lease"
        );
        let silent = status(ServiceState::Running, 1_000);
        assert_eq!(liveness(Some(&silent), true, true, 2_000, now, None), Liveness::Stale);
        let stopped = status(ServiceState::Stopped, 1_000);
        assert_eq!(liveness(Some(&stopped), true, false, 2_000, now, None), Liveness::Stopped);
    }

    #[test]
    fn a_step_of_the_wall_clock_never_makes_a_beating_service_stale() {
        let mark = |boot: &str, at_ms| BootMark { boot_id: boot.into(), at_ms };
        let mut beat = status(ServiceState::Running, 99_000);
        beat.heartbeat_boot = Some(mark("b1", 50_000));
        // The wall clock jumped ten minutes ahead; the boot clock says one second passed.
        let ahead = WallTime(99_000 + 600_000);
        let boot = mark("b1", 51_000);
        assert_eq!(liveness(Some(&beat), true, true, 2_000, ahead, Some(&boot)), Liveness::Running);
        // A hung service is still caught: the boot clock moved on past the lapse.
        let later = mark("b1", 50_000 + 31_000);
        assert_eq!(liveness(Some(&beat), true, true, 2_000, ahead, Some(&later)), Liveness::Stale);
        // The wall clock stepped back: still beating, and still caught when it stops.
        let behind = WallTime(0);
        assert_eq!(
            liveness(Some(&beat), true, true, 2_000, behind, Some(&boot)),
            Liveness::Running
        );
        // Another boot's mark says nothing: the wall clock decides, as for an older record.
        let rebooted = mark("b2", 10);
        assert_eq!(
            liveness(Some(&beat), true, true, 2_000, ahead, Some(&rebooted)),
            Liveness::Stale
        );
        assert_eq!(liveness(Some(&beat), true, true, 2_000, ahead, None), Liveness::Stale);
    }

    #[test]
    fn hints_of_another_enrollment_are_discarded() {
        let mut hints = RuntimeHints { config_created_at: WallTime(1), ..RuntimeHints::default() };
        hints.goals.insert(Id::new("g1").unwrap(), GoalWake::default());
        assert!(hints.clone().for_config(&config()).goals.is_empty());
        hints.config_created_at = WallTime(7);
        assert_eq!(hints.for_config(&config()).goals.len(), 1);
    }
}
