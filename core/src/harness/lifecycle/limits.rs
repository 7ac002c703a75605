//! The timing and counting limits of the lifecycle, with their defaults in one place.

use crate::error::RecordError;
use crate::time::Duration;
use serde::{Deserialize, Serialize};

/// Crash-loop and stop limits. Two clocks on purpose: the short flap window decides when a
/// harness is flapping; the much longer healthy-run time decides when consecutive failures
/// are forgotten. With one clock, a job failing slowly (say every 40 s) never trips either and
/// restarts forever.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LifecycleLimits {
    /// N: exits within the flap window that make a harness `degraded`.
    pub flap_threshold: u32,
    /// T: the flap window. A run that outlives it clears the flap count.
    pub flap_window: Duration,
    /// Delay before a restart while not flapping; the base of the backoff while flapping.
    pub restart_delay: Duration,
    /// Cap of the flapping backoff.
    pub restart_delay_max: Duration,
    /// K: consecutive failed runs before giving up (`failed`); 0 never gives up.
    pub give_up_after: u32,
    /// H: a run that outlives this clears the consecutive-failure count.
    pub healthy_run: Duration,
    /// Time between SIGTERM and SIGKILL when stopping.
    pub stop_grace: Duration,
}

impl Default for LifecycleLimits {
    fn default() -> LifecycleLimits {
        LifecycleLimits {
            flap_threshold: 3,
            flap_window: Duration::from_secs(10),
            restart_delay: Duration::from_secs(1),
            restart_delay_max: Duration::from_secs(30),
            give_up_after: 5,
            healthy_run: Duration::from_secs(5 * 60),
            stop_grace: Duration::from_secs(10),
        }
    }
}

/// One harness's own crash-loop limits, each overriding [`LifecycleLimits`] where set (as
/// supervisord's `startretries` and systemd's `StartLimitBurst=` are per program).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct CrashLoop {
    /// Overrides [`LifecycleLimits::flap_threshold`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flap_threshold: Option<u32>,
    /// Overrides [`LifecycleLimits::flap_window`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flap_window: Option<Duration>,
    /// Overrides [`LifecycleLimits::give_up_after`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub give_up_after: Option<u32>,
    /// Overrides [`LifecycleLimits::healthy_run`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub healthy_run: Option<Duration>,
}

impl CrashLoop {
    /// The limits a harness with these overrides lives under.
    pub fn apply(&self, shared: &LifecycleLimits) -> LifecycleLimits {
        LifecycleLimits {
            flap_threshold: self.flap_threshold.unwrap_or(shared.flap_threshold),
            flap_window: self.flap_window.unwrap_or(shared.flap_window),
            give_up_after: self.give_up_after.unwrap_or(shared.give_up_after),
            healthy_run: self.healthy_run.unwrap_or(shared.healthy_run),
            ..*shared
        }
    }
}

/// The shortest time between a run's end and the next start, whatever the configuration
/// says (systemd's default `RestartSec=`), and where the flapping backoff starts when the
/// restart delay is shorter: no configuration can make the daemon spend itself respawning.
pub(crate) const RESTART_FLOOR: Duration = Duration::from_millis(100);

/// Largest doubling exponent of the flapping backoff; beyond it the delay is the cap anyway.
pub(crate) const BACKOFF_EXPONENT_MAX: u32 = 32;

impl LifecycleLimits {
    /// Checks the limits make sense together; the error names the field.
    pub fn validate(&self) -> Result<(), RecordError> {
        if self.flap_threshold == 0 {
            return Err(RecordError::refused("flap_threshold must be at least 1"));
        }
        if self.flap_window == Duration::ZERO {
            return Err(RecordError::refused("flap_window_ms must be at least 1"));
        }
        if self.restart_delay_max < self.restart_delay {
            return Err(RecordError::refused(
                "restart_delay_max_ms must be at least restart_delay_ms",
            ));
        }
        if self.healthy_run < self.flap_window {
            return Err(RecordError::refused("healthy_run_ms must be at least flap_window_ms"));
        }
        Ok(())
    }

    /// The restart delay after the `level`-th consecutive flapping exit: `base × 2^level`,
    /// capped; `level` 0 is the plain delay. Never overflows, and never under
    /// [`RESTART_FLOOR`]: a base under it grows from the floor, and a cap of 0 is the floor.
    pub(crate) fn flapping_delay(base: Duration, max: Duration, level: u32) -> Duration {
        let base = base.max(RESTART_FLOOR);
        if level == 0 {
            return base;
        }
        let grown = base.saturating_shl(level.min(BACKOFF_EXPONENT_MAX));
        grown.min(max.max(base))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_documented_ones_and_valid() {
        let l = LifecycleLimits::default();
        assert_eq!(l.flap_threshold, 3);
        assert_eq!(l.flap_window, Duration::from_secs(10));
        assert_eq!(l.restart_delay, Duration::from_secs(1));
        assert_eq!(l.restart_delay_max, Duration::from_secs(30));
        assert_eq!(l.give_up_after, 5);
        assert_eq!(l.healthy_run, Duration::from_secs(300));
        assert_eq!(l.stop_grace, Duration::from_secs(10));
        assert_eq!(l.validate(), Ok(()));
    }

    #[test]
    fn flapping_delay_doubles_to_the_cap() {
        let (b, m) = (Duration::from_secs(1), Duration::from_secs(30));
        let got: Vec<u64> =
            (0..7).map(|k| LifecycleLimits::flapping_delay(b, m, k).as_millis() / 1000).collect();
        assert_eq!(got, [1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(LifecycleLimits::flapping_delay(b, m, u32::MAX), m);
        assert_eq!(LifecycleLimits::flapping_delay(Duration::MAX, m, 3), Duration::MAX);
    }

    #[test]
    fn a_zero_restart_delay_still_backs_off_once_flapping_unless_the_cap_is_zero() {
        let (zero, m) = (Duration::ZERO, Duration::from_secs(30));
        let got: Vec<u64> =
            (0..5).map(|k| LifecycleLimits::flapping_delay(zero, m, k).as_millis()).collect();
        assert_eq!(got, [100, 200, 400, 800, 1600]);
        let floor = LifecycleLimits::flapping_delay(zero, zero, 4);
        assert_eq!(floor, RESTART_FLOOR, "no configuration restarts faster than the floor");
    }

    mod properties {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn never_exceeds_the_cap_and_never_overflows(base in 0u64.., max in 0u64.., level in 0u32..) {
                let d = LifecycleLimits::flapping_delay(Duration(base), Duration(max), level);
                prop_assert!(d <= Duration(max.max(base)));
            }

            #[test]
            fn never_decreases_as_the_level_rises(base in 0u64..1 << 40, max in 0u64..1 << 50, level in 0u32..100) {
                let a = LifecycleLimits::flapping_delay(Duration(base), Duration(max), level);
                let b = LifecycleLimits::flapping_delay(Duration(base), Duration(max), level + 1);
                prop_assert!(a <= b);
            }

            #[test]
            fn level_zero_is_the_plain_delay(base in 0u64.., extra in 0u64..) {
                let max = base.saturating_add(extra);
                prop_assert_eq!(LifecycleLimits::flapping_delay(Duration(base), Duration(max), 0), Duration(base));
            }
        }
    }
}
