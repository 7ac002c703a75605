//! The supervisor's loop, decided purely: when a `tick` or a `run` stops and why, and the
//! fingerprints that tell whether a cycle (or anything since the last look) changed
//! something durable.
//!
//! **Durable change**, defined once: a change in any governed item's state, next action,
//! attempts used, charged attempts or latest run, or in the goal's own state, next action
//! or work lists. Receipts (`work.reconciled`), reasons in words and timestamps are not
//! durable change: appending a receipt never makes a quiet goal look busy.

use super::fingerprint::{feed_items, feed_str, hex16};
use super::intent::GoalLimits;
use super::projection::{GoalProjection, GoalState, GraphItem};
use crate::time::WallTime;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// `tick` (one cycle) or `run` (cycles until a stop).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// One cycle.
    Tick,
    /// Cycles until success, a person, a ceiling or no progress.
    Run,
}

/// Why a `tick` or a `run` stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The root is accepted.
    Succeeded,
    /// A person must act.
    AwaitingAttention,
    /// Nothing can go on without an intervention.
    Blocked,
    /// A ceiling (attempts, cycles, wall time) is reached.
    BudgetExhausted,
    /// A cycle changed nothing durable.
    NoProgress,
    /// The tick's one cycle is done and changed something.
    TickComplete,
    /// Another process is running the goal or its work.
    Running,
    /// The planner failed (`plan.failed`): a domain outcome, recorded and counted. The run
    /// stops at the first one instead of asking again at once, and the service leaves the
    /// goal quiet until something durable changes.
    PlanFailed,
    /// A dispatched attempt could not start its workflow (an IO error, a refused path, a
    /// changed workflow): an infrastructure error, not an attempt. The loop stops on it and
    /// the service backs the goal off; nothing is retried in a tight loop.
    NotStarted,
}

/// A stop and its reason in words.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stop {
    /// Why, as a code.
    pub reason: StopReason,
    /// Why, in words.
    pub detail: String,
}

fn stop(reason: StopReason, detail: impl Into<String>) -> Option<Stop> {
    Some(Stop { reason, detail: detail.into() })
}

/// The stop a goal's state implies when no cycle can go on.
pub(crate) fn by_state(p: &GoalProjection) -> Stop {
    let reason = match p.state {
        GoalState::Succeeded => StopReason::Succeeded,
        GoalState::BudgetExhausted => StopReason::BudgetExhausted,
        GoalState::Blocked => StopReason::Blocked,
        GoalState::Running => StopReason::Running,
        GoalState::Ready | GoalState::AwaitingAttention => StopReason::AwaitingAttention,
    };
    Stop { reason, detail: p.reason.clone() }
}

/// One invocation's cycle counter and deadline.
#[derive(Clone, Debug)]
pub(crate) struct RunLoop {
    mode: Mode,
    cycle_limit: u32,
    deadline: WallTime,
    cycles: u32,
}

impl RunLoop {
    /// A loop starting at `now` under `limits` (a tick takes one cycle).
    pub fn new(mode: Mode, limits: &GoalLimits, now: WallTime) -> RunLoop {
        let cycle_limit = if mode == Mode::Tick { 1 } else { limits.max_cycles };
        let deadline = WallTime(now.0.saturating_add(limits.max_runtime_ms as i64));
        RunLoop { mode, cycle_limit, deadline, cycles: 0 }
    }

    /// Cycles begun so far.
    pub fn cycles(&self) -> u32 {
        self.cycles
    }

    /// Before a cycle: stop, or count the cycle and go on. Only a goal that is `ready`
    /// starts a cycle.
    pub fn begin(&mut self, now: WallTime, p: &GoalProjection) -> Option<Stop> {
        if p.state == GoalState::Succeeded {
            return Some(by_state(p));
        }
        if self.cycles >= self.cycle_limit {
            return stop(
                StopReason::BudgetExhausted,
                format!("the cycle limit ({}) is reached", self.cycle_limit),
            );
        }
        if now >= self.deadline {
            return stop(StopReason::BudgetExhausted, "the run's wall-time limit is reached");
        }
        if p.state != GoalState::Ready {
            return Some(by_state(p));
        }
        self.cycles += 1;
        None
    }

    /// After a cycle: stop, or go on. `before` and `after` are progress fingerprints;
    /// `acted` is true when the cycle accepted or dispatched anything.
    pub fn end(
        &mut self,
        now: WallTime,
        before: &str,
        after: &str,
        p: &GoalProjection,
        acted: bool,
    ) -> Option<Stop> {
        if p.state == GoalState::Succeeded {
            return Some(by_state(p));
        }
        if self.mode == Mode::Tick {
            return if before == after {
                stop(StopReason::NoProgress, "the tick changed nothing durable")
            } else {
                stop(StopReason::TickComplete, p.reason.clone())
            };
        }
        if now >= self.deadline {
            return stop(StopReason::BudgetExhausted, "the run's wall-time limit is reached");
        }
        if p.state == GoalState::BudgetExhausted || (!acted && p.state != GoalState::Ready) {
            return Some(by_state(p));
        }
        if before == after {
            return stop(StopReason::NoProgress, "the cycle changed nothing durable");
        }
        None
    }
}

/// The goal fingerprint a service compares between sweeps, and a cycle before and after:
/// the goal's standing, its plans' (count, latest status, active root) and its graph's (the
/// rows of [`progress_fingerprint`]); reasons in words are left out.
pub fn goal_fingerprint(p: &GoalProjection, items: &[GraphItem]) -> String {
    let mut h = Sha256::new();
    h.update([p.state as u8, p.next_action as u8]);
    h.update(p.attempts_used.to_le_bytes());
    h.update(p.attempts_remaining.to_le_bytes());
    h.update(p.replans_used.to_le_bytes());
    h.update([p.latest_plan_status.map_or(0xff, |s| s as u8)]);
    feed_str(&mut h, p.root_work_id.as_ref().map_or("", |r| r.as_str()));
    for list in [&p.ready_work, &p.resumable_work, &p.retryable_work, &p.attention_work] {
        h.update((list.len() as u32).to_le_bytes());
        for id in list {
            feed_str(&mut h, id.as_str());
        }
    }
    feed_items(&mut h, items);
    hex16(h)
}
