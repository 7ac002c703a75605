//! The supervisor service under faults: the core's wake machine (`wake::ServiceScheduler`)
//! and sweep (`service::sweep`, the code the daemon runs) over the goal world of
//! [`crate::goal`], with an enrolled goal that never reads (a corrupt or missing one), ticks
//! that fail for reasons outside the goal, a person acting between sweeps, late and missed
//! wakes, and crashes mid-sweep after which the service restarts from its persisted wake
//! hints (sometimes stale). After every step: the goal world's invariants (no dispatch
//! repeated, ceilings, frozen intent), the scheduler's own, no tick of an unchanged
//! `awaiting_change` goal, no attempt consumed by a failed tick, and the unreadable goal never
//! stalls the readable one.

use crate::entropy::Entropy;
use crate::goal::GoalWorld;
use harn_core::goal::{goal_fingerprint, GoalState, Mode, StopReason};
use harn_core::ids::Id;
use harn_core::service::{sweep, SweepHost};
use harn_core::time::{Duration, Instant};
use harn_core::wake::{
    Fingerprint, GoalWake, ServiceEffect, ServiceScheduler, WakeConfig, WakeState,
};
use std::collections::BTreeMap;

/// What one seed did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceSimSummary {
    /// Sweeps completed.
    pub sweeps: u64,
    /// Ticks run.
    pub ticks: u64,
    /// Ticks that failed for reasons outside the goal.
    pub failed_ticks: u64,
    /// Service crashes (restarts from persisted hints).
    pub crashes: u64,
}

const STEPS: u64 = 150;

fn config() -> WakeConfig {
    WakeConfig {
        wake_interval: Duration::from_millis(1_000),
        heartbeat_interval: Duration::from_millis(200),
        error_backoff_base: Duration::from_millis(500),
        error_backoff_max: Duration::from_millis(8_000),
    }
}

/// Runs one seed; the error names the first invariant broken.
pub fn run_service_seed(seed: u64) -> Result<ServiceSimSummary, String> {
    run(seed).map_err(|e| format!("seed {seed}: {e}"))
}

fn run(seed: u64) -> Result<ServiceSimSummary, String> {
    let mut g = GoalWorld::new(seed);
    let goals = vec![Id::new("g").expect("valid"), Id::new("ghost").expect("valid")];
    let mut now = Instant(0);
    let mut persisted: BTreeMap<Id, GoalWake> = BTreeMap::new();
    let new_scheduler = |prior, now| {
        ServiceScheduler::new(config(), goals.clone(), prior, now).map_err(|e| e.to_string())
    };
    let mut sched = new_scheduler(persisted.clone(), now)?;
    let mut summary = ServiceSimSummary::default();
    for _ in 0..STEPS {
        // Wakes come on time, late, or very late (a missed one).
        let due = sched.poll_timeout().unwrap_or(now.saturating_add(Duration::from_millis(1_000)));
        let late = match g.w.entropy.below(10) {
            0 => Duration::from_millis(g.w.entropy.between(2_000, 20_000)),
            1..=3 => Duration::from_millis(g.w.entropy.below(500)),
            _ => Duration::from_millis(0),
        };
        now = due.max(now).saturating_add(late);
        if g.w.entropy.chance(1, 5) {
            g.person()?; // Approvals, reviews and plan decisions change what the goal awaits.
            g.w.take_acknowledged();
        }
        sched.handle_timeout(now);
        while let Some(effect) = sched.poll_effect() {
            if effect != ServiceEffect::Sweep {
                continue;
            }
            if g.w.entropy.chance(1, 4) {
                let after = g.w.entropy.below(60);
                g.w.ledger.fs.crash_after(after);
            }
            let before: BTreeMap<Id, GoalWake> = sched.wakes().clone();
            let mut broken = None;
            let mut host = SimSweep {
                g: &mut g,
                now,
                before: &before,
                summary: &mut summary,
                broken: &mut broken,
            };
            let result = sweep(&mut host, &mut sched);
            if let Some(violation) = broken {
                return Err(violation);
            }
            if g.w.ledger.fs.is_crashed() {
                // The service died mid-sweep: the disk loses what was not synced, and a new
                // daemon starts from the wake hints it last persisted.
                g.w.ledger.fs.clear_faults();
                g.w.take_acknowledged();
                g.w.ledger.fs.crash(&mut g.w.entropy);
                summary.crashes += 1;
                sched = new_scheduler(persisted.clone(), now)?;
                break;
            }
            g.w.ledger.fs.clear_faults();
            g.w.take_acknowledged();
            sched.sweep_finished(now, result);
            summary.sweeps += 1;
            // The unreadable goal backs off alone; it never stalls the sweep.
            let ghost = sched.goal(&goals[1]).cloned().unwrap_or_default();
            if ghost.state != WakeState::Backoff || ghost.consecutive_errors == 0 {
                return Err(format!("the unreadable goal is not backing off: {ghost:?}"));
            }
            // `runtime.json` is written after each sweep; now and then the write is lost.
            if !g.w.entropy.chance(1, 5) {
                persisted = sched.wakes().clone();
            }
        }
        sched.check()?;
        g.check()?;
    }
    Ok(summary)
}

/// The simulated sweep host: reads and ticks of the goal world, an unreadable `ghost` goal,
/// and ticks that now and then fail before they start (a lease held elsewhere).
struct SimSweep<'a> {
    g: &'a mut GoalWorld,
    now: Instant,
    before: &'a BTreeMap<Id, GoalWake>,
    summary: &'a mut ServiceSimSummary,
    broken: &'a mut Option<String>,
}

impl SimSweep<'_> {
    fn fingerprint(&mut self) -> Result<(Fingerprint, bool), String> {
        let view = self.g.view()?;
        let fp = Fingerprint::new(goal_fingerprint(&view.projection, &view.items));
        Ok((fp, view.projection.state == GoalState::Ready))
    }

    fn attempts(&mut self) -> Result<u32, String> {
        Ok(self.g.view()?.projection.attempts_used)
    }
}

impl SweepHost for SimSweep<'_> {
    fn now(&mut self) -> Instant {
        self.now
    }

    fn read(&mut self, goal: &Id) -> Result<(Fingerprint, bool), String> {
        if goal.as_str() == "ghost" {
            return Err("no goal ghost: its intent is unreadable".into());
        }
        self.fingerprint()
    }

    fn tick(&mut self, goal: &Id) -> Result<StopReason, String> {
        let (fp, _) = self.fingerprint()?;
        if let Some(prev) = self.before.get(goal) {
            if prev.state == WakeState::AwaitingChange && prev.observed.as_ref() == Some(&fp) {
                let why = "an unchanged awaiting_change goal was ticked".to_owned();
                self.broken.get_or_insert(why.clone());
                return Err(why);
            }
        }
        self.summary.ticks += 1;
        if self.g.w.entropy.chance(1, 8) {
            // An infrastructure error: the tick never starts, and must cost nothing.
            let before = self.attempts()?;
            self.summary.failed_ticks += 1;
            let after = self.attempts()?;
            if before != after {
                self.broken.get_or_insert("a failed tick consumed an attempt".into());
            }
            return Err("the goal lease is held by a foreground run".into());
        }
        if self.g.w.entropy.chance(1, 8) {
            // A tick that ran and changed nothing durable (a dispatch that could not start):
            // the goal stays ready, and must now wait for a change rather than be re-ticked.
            return Ok(StopReason::NoProgress);
        }
        self.g.tick(Mode::Tick)
    }

    fn ticking(&mut self, _goal: Option<&Id>) {}

    fn failed(&mut self, _goal: &Id, _error: &str, _wake: &GoalWake) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_keeps_its_promises_through_crashes_and_late_wakes() {
        let mut total = ServiceSimSummary::default();
        for seed in 0..16 {
            let s = run_service_seed(seed).unwrap_or_else(|e| panic!("{e}"));
            total.sweeps += s.sweeps;
            total.ticks += s.ticks;
            total.failed_ticks += s.failed_ticks;
            total.crashes += s.crashes;
        }
        assert!(total.sweeps > 500 && total.ticks > 20 && total.crashes > 10, "{total:?}");
    }
}
