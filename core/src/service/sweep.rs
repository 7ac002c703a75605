//! One sweep of the service over its enrolled goals, in order, through a host that reads and
//! ticks them: the decisions the CLI's daemon and the simulator share.

use super::wake::GoalWake;
use crate::error::RecordError;
use crate::ids::Id;

/// What a sweep needs from its host.
pub trait SweepHost {
    /// Why a goal could not be read or ticked, in the host's terms; the goal backs off and
    /// the error's words go to [`SweepHost::failed`].
    type Error: std::fmt::Display;
    /// The monotonic time now.
    fn now(&mut self) -> crate::time::Instant;
    /// Reads a goal: its fingerprint and whether it is ready for a tick.
    fn read(&mut self, goal: &Id)
        -> Result<(crate::service::wake::Fingerprint, bool), Self::Error>;
    /// One tick of a ready goal: how it stopped, or the infrastructure error that kept it
    /// from running (a domain outcome is a stop reason, never an error).
    fn tick(&mut self, goal: &Id) -> Result<Ticked, Self::Error>;
    /// The goal being ticked now, for the status.
    fn ticking(&mut self, goal: Option<&Id>);
    /// A goal's read or tick failed and it backs off.
    fn failed(&mut self, goal: &Id, error: &str, wake: &GoalWake);
    /// Whether the service was asked to stop: the sweep then ends before its next goal (the
    /// tick running when the request came finishes first).
    fn stopping(&mut self) -> bool {
        false
    }
    /// Where a goal stands after its last read, in words (`"succeeded: the root parser is
    /// accepted"`), when the host knows: kept as its outcome when it changed without a tick
    /// (a person accepted, approved or reopened), so status readers see that, not a stale tick.
    /// `first` is a goal this service looks at for the first time, not a change it saw.
    fn standing(&mut self, _goal: &Id, _first: bool) -> Option<String> {
        None
    }
}

/// How a goal's tick stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ticked {
    /// The stop reason.
    pub reason: crate::goal::StopReason,
    /// What it said about it.
    pub detail: String,
}

impl Ticked {
    /// The outcome the service keeps for status readers: `"<stop reason>: <detail>"`.
    pub fn outcome(&self) -> String {
        let reason = serde_json::to_value(self.reason).unwrap_or_default();
        format!("{}: {}", reason.as_str().unwrap_or(""), self.detail)
    }
}

/// One sweep over the enrolled goals, in order: each is read, then ticked, quiesced or left
/// alone as the wake machine decides; a goal whose read or tick fails backs off alone. The
/// error is the scheduler refusing a goal's new record (which no single goal owns).
pub fn sweep<H: SweepHost>(
    host: &mut H,
    scheduler: &mut crate::service::wake::ServiceScheduler,
) -> Result<(), RecordError> {
    use crate::service::wake::{after_tick_err, decide, Fingerprint, SweepDecision};
    let cfg = *scheduler.config();
    // Walks positions, not ids: a quiescent goal costs its read and a compare, with no lookup
    // or copy of its id.
    for at in 0..scheduler.goals().len() {
        if host.stopping() {
            break;
        }
        let goal = &scheduler.goals()[at];
        let prev = scheduler.goal_at(at).expect("every position has a record");
        let now = host.now();
        let read = host.read(goal);
        let decision = match &read {
            Ok((fp, ready)) => decide(prev, fp, *ready, now),
            Err(_) => SweepDecision::Tick,
        };
        if matches!(decision, SweepDecision::Skip(_)) {
            continue;
        }
        let (goal, prev) = (goal.clone(), prev.clone());
        let (fp, _) = match read {
            Ok(read) => read,
            // Still backing off: with no fingerprint to compare, nothing proves a change.
            Err(_) if prev.next_wake_at.is_some_and(|until| until > now) => continue,
            Err(e) => {
                let fp = prev.observed.unwrap_or_else(|| Fingerprint::new("unreadable"));
                let wake = after_tick_err(&prev, fp, now, &cfg);
                host.failed(&goal, &e.to_string(), &wake);
                scheduler.record_goal_at(now, at, wake)?;
                continue;
            }
        };
        let wake = match decision {
            SweepDecision::BecomeAwaiting(wake) => {
                // Only a first look or a real change: a backoff that ran out on the same
                // fingerprint keeps its error as the outcome.
                let first = prev.observed.is_none();
                if first || prev.observed != Some(fp) {
                    if let Some(standing) = host.standing(&goal, first) {
                        scheduler.record_outcome(&goal, standing);
                    }
                }
                wake
            }
            SweepDecision::Skip(_) => unreachable!("skipped above"),
            // A stop asked for while the goal was read: no new tick starts.
            SweepDecision::Tick if host.stopping() => break,
            SweepDecision::Tick => tick_one(host, scheduler, &goal, &prev, fp),
        };
        scheduler.record_goal_at(host.now(), at, wake)?;
    }
    Ok(())
}

/// Ticks one ready goal and returns its next record: quiescent after a tick that changed nothing
/// or left it not ready, backed off after a failed one.
fn tick_one<H: SweepHost>(
    host: &mut H,
    scheduler: &mut crate::service::wake::ServiceScheduler,
    goal: &Id,
    prev: &GoalWake,
    fp: crate::service::wake::Fingerprint,
) -> GoalWake {
    use crate::service::wake::{after_tick_err, after_tick_ok};
    let cfg = *scheduler.config();
    host.ticking(Some(goal));
    let ticked = host.tick(goal);
    host.ticking(None);
    let now = host.now();
    if let Ok(ticked) = &ticked {
        scheduler.record_outcome(goal, ticked.outcome());
    }
    // A dispatch that could not start is the host's failure: the goal backs off like any
    // other infrastructure error and is ticked again after the delay.
    let ticked = match ticked.map(|t| t.reason) {
        Ok(crate::goal::StopReason::NotStarted) => {
            Err("a dispatched attempt could not start its workflow".to_owned())
        }
        Ok(stop) => Ok(stop),
        Err(e) => Err(e.to_string()),
    };
    match ticked {
        Ok(stop) => match host.read(goal) {
            // A tick that changed nothing waits for a change (harnery §9.20).
            // A tick that changed nothing, or whose planner failed, waits for a change
            // rather than being ticked again at once.
            Ok((fp_after, ready)) => {
                use crate::goal::StopReason::{NoProgress, PlanFailed};
                after_tick_ok(fp_after, ready && !matches!(stop, NoProgress | PlanFailed))
            }
            Err(_) => after_tick_ok(fp, false),
        },
        Err(e) => {
            let fp_now = host.read(goal).map(|(f, _)| f).unwrap_or(fp);
            let wake = after_tick_err(prev, fp_now, now, &cfg);
            host.failed(goal, &e, &wake);
            wake
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::records::tests::config;
    use std::collections::BTreeMap;

    #[test]
    fn ten_thousand_goals_enroll_and_one_sweep_quiesces_them() {
        let mut c = config();
        c.goal_ids = (0..10_000).map(|n| Id::new(&format!("g{n}")).unwrap()).collect();
        assert!(c.validate().is_ok(), "no cap at 100");
        let mut s = crate::service::wake::ServiceScheduler::new(
            c.wake_config(),
            c.goal_ids.clone(),
            BTreeMap::new(),
            crate::time::Instant(0),
        )
        .unwrap();
        struct Blocked;
        impl SweepHost for Blocked {
            type Error = String;
            fn now(&mut self) -> crate::time::Instant {
                crate::time::Instant(0)
            }
            fn read(
                &mut self,
                g: &Id,
            ) -> Result<(crate::service::wake::Fingerprint, bool), Self::Error> {
                Ok((crate::service::wake::Fingerprint::new(g.as_str()), false))
            }
            fn tick(&mut self, _: &Id) -> Result<Ticked, Self::Error> {
                Err("a blocked goal is never ticked".into())
            }
            fn ticking(&mut self, _: Option<&Id>) {}
            fn failed(&mut self, g: &Id, e: &str, _: &GoalWake) {
                panic!("{g}: {e}")
            }
        }
        sweep(&mut Blocked, &mut s).unwrap();
        assert!(s
            .wakes()
            .values()
            .all(|w| w.state == crate::service::wake::WakeState::AwaitingChange));
        assert_eq!(s.check(), Ok(()));
    }

    /// A host over one goal: unreadable, or ready; counts reads and ticks; stops on demand.
    struct OneGoal {
        now: u64,
        readable: bool,
        stop_after_read: bool,
        stopping: bool,
        reads: u32,
        ticks: u32,
        /// How each tick stops.
        stop: crate::goal::StopReason,
    }

    impl SweepHost for OneGoal {
        type Error = String;
        fn now(&mut self) -> crate::time::Instant {
            crate::time::Instant(self.now)
        }
        fn read(
            &mut self,
            _: &Id,
        ) -> Result<(crate::service::wake::Fingerprint, bool), Self::Error> {
            self.reads += 1;
            self.stopping |= self.stop_after_read;
            if self.readable {
                Ok((crate::service::wake::Fingerprint::new("fp"), true))
            } else {
                Err("intent.json: not JSON".into())
            }
        }
        fn tick(&mut self, _: &Id) -> Result<Ticked, Self::Error> {
            self.ticks += 1;
            Ok(Ticked { reason: self.stop, detail: "ticked".into() })
        }
        fn ticking(&mut self, _: Option<&Id>) {}
        fn failed(&mut self, _: &Id, _: &str, _: &GoalWake) {}
        fn stopping(&mut self) -> bool {
            self.stopping
        }
    }

    fn one_goal(readable: bool) -> (OneGoal, crate::service::wake::ServiceScheduler) {
        let c = config();
        let s = crate::service::wake::ServiceScheduler::new(
            c.wake_config(),
            c.goal_ids.clone(),
            BTreeMap::new(),
            crate::time::Instant(0),
        )
        .unwrap();
        let host = OneGoal {
            now: 0,
            readable,
            stop_after_read: false,
            stopping: false,
            reads: 0,
            ticks: 0,
            stop: crate::goal::StopReason::NoProgress,
        };
        (host, s)
    }

    #[test]
    fn an_unreadable_goal_backs_off_instead_of_counting_an_error_every_sweep() {
        let (mut host, mut s) = one_goal(false);
        let g1 = Id::new("g1").unwrap();
        sweep(&mut host, &mut s).unwrap();
        assert_eq!(s.goal(&g1).unwrap().consecutive_errors, 1);
        host.now = 1_000_000_000; // 1 s later, inside the 2 s backoff.
        sweep(&mut host, &mut s).unwrap();
        assert_eq!(s.goal(&g1).unwrap().consecutive_errors, 1, "still backing off");
        host.now = 2_500_000_000;
        sweep(&mut host, &mut s).unwrap();
        assert_eq!(s.goal(&g1).unwrap().consecutive_errors, 2, "its backoff ended: tried again");
    }

    #[test]
    fn a_tick_whose_dispatch_never_started_backs_off_like_an_infrastructure_error() {
        let (mut host, mut s) = one_goal(true);
        host.stop = crate::goal::StopReason::NotStarted;
        let g1 = Id::new("g1").unwrap();
        sweep(&mut host, &mut s).unwrap();
        let wake = s.goal(&g1).unwrap().clone();
        assert_eq!(wake.consecutive_errors, 1, "{wake:?}");
        assert!(wake.next_wake_at.is_some(), "backing off, not quiescent: {wake:?}");
        host.now = 1_000_000_000; // Inside the 2 s backoff: not ticked again.
        sweep(&mut host, &mut s).unwrap();
        assert_eq!(host.ticks, 1);
        host.now = 2_500_000_000;
        sweep(&mut host, &mut s).unwrap();
        assert_eq!(host.ticks, 2, "tried again once the backoff ended");
    }

    #[test]
    fn a_tick_whose_planner_failed_waits_for_a_change_instead_of_planning_again() {
        let (mut host, mut s) = one_goal(true);
        host.stop = crate::goal::StopReason::PlanFailed;
        let g1 = Id::new("g1").unwrap();
        sweep(&mut host, &mut s).unwrap();
        let wake = s.goal(&g1).unwrap().clone();
        assert_eq!(wake.state, crate::service::wake::WakeState::AwaitingChange, "{wake:?}");
        assert_eq!(wake.consecutive_errors, 0, "a domain outcome, not an error");
        host.now = 60_000_000_000;
        sweep(&mut host, &mut s).unwrap();
        assert_eq!(host.ticks, 1, "nothing changed: the planner is not asked again");
    }

    /// A goal that is never ready, whose standing a person changes between sweeps.
    struct Standing {
        fingerprint: &'static str,
        told: Vec<(String, bool)>,
    }

    impl SweepHost for Standing {
        type Error = String;
        fn now(&mut self) -> crate::time::Instant {
            crate::time::Instant(0)
        }
        fn read(
            &mut self,
            _: &Id,
        ) -> Result<(crate::service::wake::Fingerprint, bool), Self::Error> {
            Ok((crate::service::wake::Fingerprint::new(self.fingerprint), false))
        }
        fn tick(&mut self, _: &Id) -> Result<Ticked, Self::Error> {
            Err("never ready".into())
        }
        fn ticking(&mut self, _: Option<&Id>) {}
        fn failed(&mut self, _: &Id, _: &str, _: &GoalWake) {}
        fn standing(&mut self, _: &Id, first: bool) -> Option<String> {
            let said = format!("{}: as read", self.fingerprint);
            self.told.push((said.clone(), first));
            Some(said)
        }
    }

    #[test]
    fn a_goal_that_changed_without_a_tick_shows_where_it_stands_not_its_last_tick() {
        let (_, mut s) = one_goal(true);
        let g1 = Id::new("g1").unwrap();
        s.record_outcome(&g1, "awaiting_attention: parser is in review".into());
        let mut host = Standing { fingerprint: "in_review", told: Vec::new() };
        sweep(&mut host, &mut s).unwrap();
        assert_eq!(host.told, [("in_review: as read".to_owned(), true)], "a first look");
        sweep(&mut host, &mut s).unwrap();
        assert_eq!(host.told.len(), 1, "unchanged: not read into words again");
        host.fingerprint = "succeeded";
        sweep(&mut host, &mut s).unwrap();
        assert_eq!(host.told[1], ("succeeded: as read".to_owned(), false), "a change");
        assert_eq!(s.outcomes()[&g1], "succeeded: as read");
    }

    #[test]
    fn a_stop_asked_for_during_a_read_starts_no_tick() {
        let (mut host, mut s) = one_goal(true);
        host.stop_after_read = true;
        sweep(&mut host, &mut s).unwrap();
        assert_eq!((host.reads, host.ticks), (1, 0));
        let (mut host, mut s) = one_goal(true);
        sweep(&mut host, &mut s).unwrap();
        assert_eq!(host.ticks, 1, "without a stop the ready goal is ticked");
    }
}
