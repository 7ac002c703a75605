//! One run segment's lifecycle, as a sans-IO machine: the run's timeout, an operator's cancel
//! (TERM to everything the run started, a grace, then KILL), an operator's stop reaching the
//! workflow (interrupted rather than exited), and the moment the segment is over (the workflow
//! exited, its output read or a grace for it passed, no call in flight). The host feeds it what
//! happened with `now` (`handle`), wakes it at `poll_timeout` (`handle_timeout`, harmless when
//! late, early or repeated), carries out its effects in order (`poll_effect`), and asks it how
//! the workflow's process ended (`end`). Its one feed loop is `driver`, which `harn work run`
//! and `harn sim work` host; the conversation itself (messages, calls, policy) is the run
//! fold's.

pub mod driver;

use crate::time::{Duration, Instant};
use crate::work::run::ProcessEnd;
use serde_json::{json, Value};
use std::collections::VecDeque;

/// How often a running host looks for a cancel in its item's history.
pub(crate) const CANCEL_POLL: Duration = Duration::from_millis(200);
/// How long a cancelled run has after TERM before everything it started is killed.
pub const CANCEL_GRACE: Duration = Duration::from_secs(5);
/// How long output may still arrive after the workflow exits.
pub(crate) const EXIT_GRACE: Duration = Duration::from_secs(2);

/// Which processes a signal goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// The workflow's process group and every call's.
    Groups,
    /// Those, and everything the segment holds (its cgroup, or what carries its run id).
    Everything,
}

/// What the host does for the segment, in order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum SegmentEffect {
    /// Append this record to the run's transcript.
    Record(Value),
    /// Start no call any more: the queue is cleared and new requests are declined.
    Halt,
    /// Send TERM.
    Term(Reach),
    /// Send KILL.
    Kill(Reach),
    /// Kill what the workflow left in its own process group once it exited.
    KillLeftovers,
    /// Look in the item's history for a cancel recorded during this run, and tell the machine
    /// (`SegmentInput::Cancelled`) when there is one.
    LookForCancel,
}

/// What happened to the segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SegmentInput {
    /// The workflow's process exited (code) or was killed (signal).
    Exited {
        /// Its exit code.
        code: Option<i32>,
        /// The signal that ended it.
        signal: Option<i32>,
    },
    /// The workflow's stdout reached its end: every message it wrote was read.
    OutputEnded,
    /// Its item's history holds a cancel recorded during this run, by `by`.
    Cancelled {
        /// Who cancelled it.
        by: String,
    },
    /// An operator's stop (of the service, of the adapter the host runs in, a signal to a
    /// foreground run) is reaching the workflow now, before any signal is sent.
    Interrupting {
        /// Whose stop, in words.
        by: String,
        /// True when the workflow already gave its result: it ended on its own.
        has_result: bool,
    },
    /// The engine that runs the segment on a cluster ended it (a node that died, a job the
    /// cluster cancelled or preempted, a step lost): recorded before the exit that follows.
    EngineFault {
        /// What the engine did, in words.
        fault: String,
        /// True when the workflow already gave its result: it ended on its own.
        has_result: bool,
    },
    /// Policy stopped the run (a denial, a request that cannot be replayed).
    PolicyStopped,
    /// Once the workflow exited, the kernel's counters say the run reached these limits of
    /// its cgroup (an OOM kill, refused forks).
    LimitsReached(Vec<crate::limits::LimitReached>),
}

/// One segment, from its spawn to its end.
#[derive(Clone, Debug)]
pub(crate) struct Segment {
    deadline: Instant,
    timed_out: bool,
    halted: bool,
    exited: Option<(Option<i32>, Option<i32>, Instant)>,
    output_ended: bool,
    /// True once the grace for output after the exit has passed.
    grace_passed: bool,
    next_look: Instant,
    cancelled: bool,
    kill_at: Option<Instant>,
    interrupted: Option<String>,
    engine_fault: Option<String>,
    reached: Vec<crate::limits::LimitReached>,
    effects: VecDeque<SegmentEffect>,
}

impl Segment {
    /// A segment spawned at `now` whose run may last `timeout` in all.
    pub fn new(now: Instant, timeout: Duration) -> Segment {
        Segment {
            deadline: now.saturating_add(timeout),
            timed_out: false,
            halted: false,
            exited: None,
            output_ended: false,
            grace_passed: false,
            next_look: now.saturating_add(CANCEL_POLL),
            cancelled: false,
            kill_at: None,
            interrupted: None,
            engine_fault: None,
            reached: Vec::new(),
            effects: VecDeque::new(),
        }
    }

    /// Takes one input.
    pub fn handle(&mut self, now: Instant, input: SegmentInput) {
        match input {
            SegmentInput::Exited { code, signal } => {
                if self.exited.is_none() {
                    self.exited = Some((code, signal, now));
                    // Whatever the workflow left behind in its group goes with it.
                    self.effects.push_back(SegmentEffect::KillLeftovers);
                }
            }
            SegmentInput::OutputEnded => {
                if !self.output_ended {
                    self.output_ended = true;
                    // Nobody is left to read the replies of calls not yet started.
                    self.effects.push_back(SegmentEffect::Halt);
                }
            }
            SegmentInput::Cancelled { by } => {
                if self.exited.is_none() && !self.cancelled {
                    self.cancelled = true;
                    self.effects.push_back(SegmentEffect::Record(
                        json!({ "event": "run.cancelled", "by": by }),
                    ));
                    self.halted = true;
                    self.effects.push_back(SegmentEffect::Halt);
                    self.effects.push_back(SegmentEffect::Term(Reach::Everything));
                    self.kill_at = Some(now.saturating_add(CANCEL_GRACE));
                    self.interrupted.get_or_insert(format!("work cancel by {by}"));
                }
            }
            SegmentInput::Interrupting { by, has_result } => {
                // A workflow that already ended, or already gave its result, ended on its own.
                if self.exited.is_none() && !has_result {
                    let record = json!({ "event": "run.interrupted", "by": by });
                    self.effects.push_back(SegmentEffect::Record(record));
                    self.interrupted = Some(by);
                }
            }
            SegmentInput::EngineFault { fault, has_result } => {
                // Once the workflow exited, gave its result or outlived its timeout, its end
                // is its own: a fault reported later changes nothing (nor what a crash after
                // the record would make of the run).
                let own_end = self.exited.is_some() || has_result || self.timed_out;
                if self.engine_fault.is_none() && !own_end {
                    let record = json!({ "event": "run.engine_fault", "fault": fault });
                    self.effects.push_back(SegmentEffect::Record(record));
                    self.engine_fault = Some(fault);
                }
            }
            SegmentInput::PolicyStopped => self.halt("policy.stopped"),
            SegmentInput::LimitsReached(reached) => {
                // The kernel holds the memory and task limits itself; the disk limit is only
                // measured, so reaching it ends the run here.
                let ends =
                    reached.iter().any(|r| matches!(r, crate::limits::LimitReached::Disk { .. }));
                for r in reached {
                    self.effects.push_back(SegmentEffect::Record(
                        json!({ "event": "run.limit_reached", "reached": r, "said": r.to_string() }),
                    ));
                    self.reached.push(r);
                }
                if ends && !self.halted && self.exited.is_none() {
                    self.halt("run.ended_at_limit");
                }
            }
        }
        self.handle_timeout(now);
    }

    /// Does what is due at `now`: the timeout, the end of a cancel's grace, the next look for
    /// a cancel. Harmless when late, early or repeated.
    pub fn handle_timeout(&mut self, now: Instant) {
        if !self.timed_out && now >= self.deadline {
            self.timed_out = true;
            self.halt("run.timed_out");
        }
        if let Some(at) = self.kill_at {
            if now >= at {
                self.kill_at = None;
                if self.exited.is_none() {
                    self.effects.push_back(SegmentEffect::Kill(Reach::Everything));
                }
            }
        }
        if let Some((_, _, exit)) = self.exited {
            self.grace_passed |= now >= exit.saturating_add(EXIT_GRACE);
        }
        if self.exited.is_none() && !self.cancelled && now >= self.next_look {
            self.next_look = now.saturating_add(CANCEL_POLL);
            self.effects.push_back(SegmentEffect::LookForCancel);
        }
    }

    /// Stops the run now: no call starts, everything is killed, `event` is recorded.
    fn halt(&mut self, event: &str) {
        self.halted = true;
        self.effects.push_back(SegmentEffect::Halt);
        self.effects.push_back(SegmentEffect::Kill(Reach::Groups));
        self.effects.push_back(SegmentEffect::Record(json!({ "event": event })));
    }

    /// The next effect to carry out.
    pub fn poll_effect(&mut self) -> Option<SegmentEffect> {
        self.effects.pop_front()
    }

    /// When the machine wants `handle_timeout` next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut wake: Option<Instant> = None;
        let mut at = |t: Instant| wake = Some(wake.map_or(t, |w| w.min(t)));
        if !self.timed_out {
            at(self.deadline);
        }
        if let Some(k) = self.kill_at {
            at(k);
        }
        match self.exited {
            Some((_, _, exit)) if !self.output_ended && !self.grace_passed => {
                at(exit.saturating_add(EXIT_GRACE))
            }
            Some(_) => {}
            None if !self.cancelled => at(self.next_look),
            None => {}
        }
        wake
    }

    /// True when no new call may start: the run timed out, was cancelled or stopped by
    /// policy.
    pub(crate) fn halted(&self) -> bool {
        self.halted
    }

    /// True when the segment is over at `now`: the workflow exited, its output was read to
    /// the end (or the grace for it passed: a descendant that escaped its group may hold the
    /// pipe open), and no call is in flight.
    pub fn over(&self, now: Instant, calls_in_flight: usize) -> bool {
        let Some((_, _, exit)) = self.exited else { return false };
        let output_done = self.output_ended || now >= exit.saturating_add(EXIT_GRACE);
        output_done && calls_in_flight == 0
    }

    /// How the workflow's process ended: ended by its cluster when the engine ended it (not
    /// the work's doing) and the run's own timeout had not come first; interrupted when an
    /// operator's stop or a cancel
    /// reached it before its result (whatever its exit status: not the work's doing), unless
    /// the run's own timeout ended it; at a limit of its own when the kernel counted one
    /// reached (and no timeout came first); else how it exited. `None` before it exited.
    pub fn end(&self) -> Option<ProcessEnd> {
        let (code, signal, _) = self.exited?;
        if let Some(fault) = self.engine_fault.as_ref().filter(|_| !self.timed_out) {
            return Some(ProcessEnd::EngineFault { fault: fault.clone(), code, signal });
        }
        Some(match &self.interrupted {
            Some(by) if !self.timed_out => ProcessEnd::Interrupted { by: by.clone(), code, signal },
            _ if !self.timed_out && !self.reached.is_empty() => {
                ProcessEnd::LimitReached { code, signal, reached: self.reached.clone() }
            }
            _ => ProcessEnd::Exited { code, signal, timed_out: self.timed_out },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Instant = Instant(1_000_000_000);

    fn at(ms: u64) -> Instant {
        T0.saturating_add(Duration::from_millis(ms))
    }

    fn drain(s: &mut Segment) -> Vec<SegmentEffect> {
        std::iter::from_fn(|| s.poll_effect()).collect()
    }

    fn records(effects: &[SegmentEffect]) -> Vec<String> {
        effects
            .iter()
            .filter_map(|e| match e {
                SegmentEffect::Record(r) => r["event"].as_str().map(str::to_owned),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_workflow_that_exits_is_over_once_its_output_ended_and_no_call_runs() {
        let mut s = Segment::new(T0, Duration::from_secs(60));
        s.handle(at(10), SegmentInput::Exited { code: Some(0), signal: None });
        assert_eq!(drain(&mut s), [SegmentEffect::KillLeftovers]);
        assert!(!s.over(at(10), 0), "its output may still come");
        s.handle(at(20), SegmentInput::OutputEnded);
        assert!(!s.over(at(20), 1), "a call is still in flight");
        assert!(s.over(at(20), 0));
        let end = ProcessEnd::Exited { code: Some(0), signal: None, timed_out: false };
        assert_eq!(s.end(), Some(end));
    }

    #[test]
    fn an_engine_fault_is_recorded_once_and_ends_the_segment_unless_the_timeout_came_first() {
        let mut s = Segment::new(T0, Duration::from_secs(60));
        let fault = |f: &str| SegmentInput::EngineFault { fault: f.into(), has_result: false };
        s.handle(at(10), fault("node n2 failed"));
        s.handle(at(11), fault("job 7 ended"));
        assert_eq!(records(&drain(&mut s)), ["run.engine_fault"], "recorded once");
        s.handle(at(12), SegmentInput::Exited { code: Some(1), signal: None });
        let end =
            ProcessEnd::EngineFault { fault: "node n2 failed".into(), code: Some(1), signal: None };
        assert_eq!(s.end(), Some(end), "whatever the exit said");

        let mut s = Segment::new(T0, Duration::from_secs(1));
        s.handle_timeout(at(1_000));
        drain(&mut s);
        s.handle(at(1_001), fault("job 7 cancelled"));
        assert!(records(&drain(&mut s)).is_empty(), "not recorded after the timeout");
        s.handle(at(1_002), SegmentInput::Exited { code: None, signal: Some(9) });
        let end = ProcessEnd::Exited { code: None, signal: Some(9), timed_out: true };
        assert_eq!(s.end(), Some(end), "the run's own timeout is the work's");

        let mut s = Segment::new(T0, Duration::from_secs(60));
        s.handle(at(10), SegmentInput::EngineFault { fault: "late".into(), has_result: true });
        s.handle(at(11), SegmentInput::Exited { code: Some(0), signal: None });
        assert!(matches!(s.end(), Some(ProcessEnd::Exited { .. })), "its result came first");
        s.handle(at(12), fault("after the exit"));
        assert!(!records(&drain(&mut s)).contains(&"run.engine_fault".to_owned()));
    }

    #[test]
    fn a_disk_limit_reached_ends_the_run_at_its_limit_and_a_kernel_limit_does_not() {
        use crate::limits::LimitReached;
        let mut s = Segment::new(T0, Duration::from_secs(60));
        let disk = LimitReached::Disk { max: 1 << 20, used: 3 << 20 };
        s.handle(at(10), SegmentInput::LimitsReached(vec![disk.clone()]));
        let effects = drain(&mut s);
        assert_eq!(records(&effects), ["run.limit_reached", "run.ended_at_limit"]);
        assert!(effects.contains(&SegmentEffect::Kill(Reach::Groups)), "{effects:?}");
        // Measured again before the workflow is gone: recorded, not halted twice.
        s.handle(at(11), SegmentInput::LimitsReached(vec![disk.clone()]));
        assert_eq!(records(&drain(&mut s)), ["run.limit_reached"]);
        s.handle(at(12), SegmentInput::Exited { code: None, signal: Some(9) });
        let Some(ProcessEnd::LimitReached { reached, .. }) = s.end() else {
            panic!("{:?}", s.end())
        };
        assert_eq!(reached[0], disk);

        let mut s = Segment::new(T0, Duration::from_secs(60));
        let memory = LimitReached::Memory { max: 1 << 30, oom_kills: 1 };
        s.handle(at(10), SegmentInput::LimitsReached(vec![memory]));
        assert_eq!(
            records(&drain(&mut s)),
            ["run.limit_reached"],
            "the kernel ended what it had to"
        );
    }

    #[test]
    fn output_held_open_by_a_descendant_gets_a_grace_not_forever() {
        let mut s = Segment::new(T0, Duration::from_secs(60));
        s.handle(at(10), SegmentInput::Exited { code: Some(1), signal: None });
        assert_eq!(s.poll_timeout(), Some(at(10).saturating_add(EXIT_GRACE)));
        assert!(!s.over(at(1_000), 0));
        assert!(s.over(at(10).saturating_add(EXIT_GRACE), 0));
    }

    #[test]
    fn the_timeout_halts_kills_and_records_and_the_end_says_timed_out() {
        let mut s = Segment::new(T0, Duration::from_secs(1));
        s.handle_timeout(at(999));
        assert!(!s.halted());
        s.handle_timeout(at(1_000));
        let effects = drain(&mut s);
        assert!(effects.contains(&SegmentEffect::Kill(Reach::Groups)), "{effects:?}");
        assert_eq!(records(&effects), ["run.timed_out"]);
        assert!(s.halted());
        s.handle_timeout(at(5_000));
        assert!(records(&drain(&mut s)).is_empty(), "a late or repeated wake does it once");
        // An interruption after the timeout does not make the end an operator's.
        s.handle(at(5_000), SegmentInput::Interrupting { by: "x".into(), has_result: false });
        s.handle(at(5_001), SegmentInput::Exited { code: None, signal: Some(9) });
        let end = ProcessEnd::Exited { code: None, signal: Some(9), timed_out: true };
        assert_eq!(s.end(), Some(end));
    }

    #[test]
    fn a_cancel_terms_everything_then_kills_after_its_grace_once() {
        let mut s = Segment::new(T0, Duration::from_secs(600));
        s.handle_timeout(at(200));
        assert_eq!(drain(&mut s), [SegmentEffect::LookForCancel]);
        s.handle(at(250), SegmentInput::Cancelled { by: "ana".into() });
        let effects = drain(&mut s);
        assert_eq!(records(&effects), ["run.cancelled"]);
        assert!(effects.contains(&SegmentEffect::Term(Reach::Everything)));
        assert_eq!(s.poll_timeout(), Some(at(250).saturating_add(CANCEL_GRACE)));
        s.handle(at(300), SegmentInput::Cancelled { by: "ana".into() });
        assert!(drain(&mut s).is_empty(), "a cancel is carried out once");
        s.handle_timeout(at(250).saturating_add(CANCEL_GRACE));
        assert_eq!(drain(&mut s), [SegmentEffect::Kill(Reach::Everything)]);
        s.handle_timeout(at(20_000));
        assert!(drain(&mut s).is_empty());
        s.handle(at(20_001), SegmentInput::Exited { code: None, signal: Some(15) });
        let end = ProcessEnd::Interrupted {
            by: "work cancel by ana".into(),
            code: None,
            signal: Some(15),
        };
        assert_eq!(s.end(), Some(end));
    }

    #[test]
    fn a_stop_interrupts_only_a_workflow_still_working() {
        let mut s = Segment::new(T0, Duration::from_secs(600));
        s.handle(at(5), SegmentInput::Interrupting { by: "stop".into(), has_result: true });
        assert!(records(&drain(&mut s)).is_empty(), "it already gave its result");
        s.handle(at(6), SegmentInput::Interrupting { by: "stop".into(), has_result: false });
        assert_eq!(records(&drain(&mut s)), ["run.interrupted"]);
        s.handle(at(7), SegmentInput::Exited { code: Some(143), signal: None });
        let end = ProcessEnd::Interrupted { by: "stop".into(), code: Some(143), signal: None };
        assert_eq!(s.end(), Some(end));
        let mut done = Segment::new(T0, Duration::from_secs(600));
        done.handle(at(1), SegmentInput::Exited { code: Some(0), signal: None });
        done.handle(at(2), SegmentInput::Interrupting { by: "stop".into(), has_result: false });
        assert!(records(&drain(&mut done)).is_empty(), "it had already exited");
    }

    #[test]
    fn every_wake_it_asks_for_is_in_the_future_once_handled() {
        let mut s = Segment::new(T0, Duration::from_secs(3));
        let mut now = T0;
        for step in 0..200 {
            if step == 3 {
                s.handle(now, SegmentInput::Exited { code: Some(0), signal: None });
            }
            let Some(wake) = s.poll_timeout() else { break };
            now = now.max(wake);
            s.handle_timeout(now);
            drain(&mut s);
            assert!(s.poll_timeout().is_none_or(|w| w > now), "a driver would spin at {now:?}");
        }
    }
}
