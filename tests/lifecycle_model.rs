//! The lifecycle machine against a small reference model (proptest-state-machine): random
//! operator commands, process reports (readiness shown and lost, watchdog pings) and time
//! leaps, under drawn readiness, readiness timeouts and watchdogs, with the model's
//! predictions of intent, latch, failure count, readiness and liveness compared after every
//! transition.

use harn_core::env::{ExitStatus, SpawnSpec};
use harn_core::harness::lifecycle::harness::Durable;
use harn_core::harness::lifecycle::{
    Harness, HarnessInput, HarnessOut, HarnessSpec, LifecycleLimits, Readiness, RestartPolicy,
    State,
};
use harn_core::ids::Id;
use harn_core::time::{Duration, Instant};
use proptest::prelude::*;
use proptest_state_machine::{prop_state_machine, ReferenceStateMachine, StateMachineTest};

/// Where the model thinks the harness is, at the grain the model can predict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Stopped,
    Failed,
    /// Starting, running or degraded with a live run; `pid` once the spawn was reported.
    Live {
        pid: bool,
    },
    /// Stopping a live run; `then_start` after a restart or start during the stop.
    Stopping {
        pid: bool,
        then_start: bool,
    },
    /// Restarting or degraded, waiting out a delay.
    Waiting,
    /// Stopping a live run judged hung (its readiness timeout or watchdog ran out): its end
    /// counts as a failed run under its policy.
    Condemned,
}

#[derive(Clone, Debug)]
struct Model {
    policy: RestartPolicy,
    phase: Phase,
    enabled: bool,
    failures: u32,
    now: u64,
    started_at: u64,
    stop_asked_at: u64,
    /// Exit times within the flap window.
    recent_exits: Vec<u64>,
    /// Crossed the flap threshold; only a run outliving the window clears it.
    flapping: bool,
    /// Readiness is by notify (shown by a report), not at the spawn.
    notify: bool,
    /// A run not ready this long after its spawn is hung (notify only).
    ready_timeout: Option<u64>,
    /// A ready run with no ping for this long is hung (notify only).
    watchdog: Option<u64>,
    /// The live run is ready.
    ready: bool,
    /// When the live run last became ready (kept when readiness is lost).
    ready_at: Option<u64>,
    /// The live run's last watchdog ping.
    pinged_at: Option<u64>,
}

#[derive(Clone, Debug)]
enum Step {
    Start,
    Stop,
    Restart,
    Spawned,
    SpawnFailed,
    Exit(i32),
    /// The run showed its readiness evidence.
    Ready,
    /// A recheck of the run's evidence failed.
    Unready,
    /// `WATCHDOG=1` from the run.
    Ping,
    /// Less than any delay or grace: nothing is due but a hang.
    Tick,
    /// More than the longest delay and the grace: every retry and kill is due.
    Leap(u64),
}

const SEC: u64 = 1_000_000_000;

/// Limits scaled so the model's time steps explore every regime: a leap (31–400 s) fires any
/// retry (the backoff caps at 30 s) and any kill (grace 10 s), while several leaps still fit
/// in one flap window (600 s), so flapping, its backoff and its end are all reachable.
fn limits() -> LifecycleLimits {
    LifecycleLimits {
        flap_window: Duration::from_secs(600),
        healthy_run: Duration::from_secs(3600),
        ..LifecycleLimits::default()
    }
}

impl Model {
    fn forget_flapping(&mut self) {
        self.recent_exits.clear();
        self.flapping = false;
    }

    /// Everything a manual start, a stop at rest or a policy stop forgets.
    fn forget_crashes(&mut self) {
        self.failures = 0;
        self.forget_flapping();
    }

    fn note_exit(&mut self) -> bool {
        let (now, window) = (self.now, limits().flap_window.0);
        self.recent_exits.retain(|t| now - t < window);
        self.recent_exits.push(now);
        self.flapping |= self.recent_exits.len() >= limits().flap_threshold as usize;
        self.flapping
    }

    fn start_run(&mut self) {
        self.phase = Phase::Live { pid: false };
        self.started_at = self.now;
        self.ready = false;
        self.ready_at = None;
        self.pinged_at = None;
    }

    /// A process is alive for the run (a spawn was confirmed and it has not ended).
    fn has_pid(&self) -> bool {
        matches!(
            self.phase,
            Phase::Live { pid: true } | Phase::Stopping { pid: true, .. } | Phase::Condemned
        )
    }

    /// The live run counts as hung now: not yet ready past its readiness timeout, or, once
    /// ready, silent past its watchdog since the later of its last ping and its readiness.
    fn hang_due(&self) -> bool {
        if self.phase != (Phase::Live { pid: true }) {
            return false;
        }
        if !self.ready && self.ready_at.is_none() {
            return self.ready_timeout.is_some_and(|t| self.now - self.started_at >= t);
        }
        let since = self.pinged_at.max(self.ready_at).unwrap_or(self.started_at);
        self.watchdog.is_some_and(|w| self.now - since >= w)
    }

    /// What any wake of the machine does beyond retries: condemn a hung run, then forget the
    /// crash bookkeeping a live run has outlived.
    fn on_wake(&mut self) {
        if self.hang_due() {
            self.phase = Phase::Condemned;
            self.stop_asked_at = self.now;
        }
        if self.has_pid() {
            let lived = self.now - self.started_at;
            if lived >= limits().flap_window.0 {
                self.forget_flapping();
            }
            if lived >= limits().healthy_run.0 {
                self.failures = 0;
            }
        }
    }

    fn unplanned_end(&mut self, status: Option<i32>, hung: bool) {
        let lived = self.now - self.started_at;
        if !hung && status.is_some() && lived >= limits().flap_window.0 {
            self.forget_flapping();
        }
        if !hung && status.is_some() && lived >= limits().healthy_run.0 {
            self.failures = 0;
        }
        let failure = hung || status != Some(0);
        let restart = self.enabled
            && match self.policy {
                RestartPolicy::Always | RestartPolicy::UnlessStopped => true,
                RestartPolicy::OnFailure => failure,
                RestartPolicy::No => false,
            };
        if !restart {
            self.forget_crashes();
            if status.is_none() && self.enabled {
                self.phase = Phase::Failed;
            } else {
                self.enabled = false;
                self.phase = Phase::Stopped;
            }
            return;
        }
        let flapping = self.note_exit();
        if failure || flapping {
            self.failures += 1;
        }
        if self.failures >= limits().give_up_after {
            self.forget_flapping();
            self.phase = Phase::Failed;
        } else {
            self.phase = Phase::Waiting;
        }
    }
}

struct Reference;

impl ReferenceStateMachine for Reference {
    type State = Model;
    type Transition = Step;

    fn init_state() -> BoxedStrategy<Model> {
        let policy = prop_oneof![
            Just(RestartPolicy::Always),
            Just(RestartPolicy::UnlessStopped),
            Just(RestartPolicy::OnFailure),
            Just(RestartPolicy::No)
        ];
        // A third of the cases without readiness; the rest notify, with a readiness timeout,
        // a watchdog, both or neither. Both are longer than a tick and shorter than a leap.
        let watch = prop_oneof![
            1 => Just((false, None, None)),
            2 => (proptest::option::of(35u64..60), proptest::option::of(32u64..50))
                .prop_map(|(t, w)| (true, t.map(|s| s * SEC), w.map(|s| s * SEC))),
        ];
        (policy, watch)
            .prop_map(|(policy, (notify, ready_timeout, watchdog))| Model {
                policy,
                notify,
                ready_timeout,
                watchdog,
                ready: false,
                ready_at: None,
                pinged_at: None,
                phase: Phase::Stopped,
                enabled: false,
                failures: 0,
                now: 0,
                started_at: 0,
                stop_asked_at: 0,
                recent_exits: Vec::new(),
                flapping: false,
            })
            .boxed()
    }

    fn transitions(_: &Model) -> BoxedStrategy<Step> {
        prop_oneof![
            2 => Just(Step::Start),
            1 => Just(Step::Stop),
            1 => Just(Step::Restart),
            3 => Just(Step::Spawned),
            1 => Just(Step::SpawnFailed),
            3 => (0..3i32).prop_map(Step::Exit),
            2 => Just(Step::Ready),
            1 => Just(Step::Unready),
            2 => Just(Step::Ping),
            1 => Just(Step::Tick),
            2 => (31u64..400).prop_map(Step::Leap),
        ]
        .boxed()
    }

    fn preconditions(m: &Model, step: &Step) -> bool {
        let pid = m.has_pid();
        let spawning =
            matches!(m.phase, Phase::Live { pid: false } | Phase::Stopping { pid: false, .. });
        match step {
            Step::Spawned | Step::SpawnFailed => spawning,
            Step::Exit(_) => pid,
            _ => true,
        }
    }

    fn apply(mut m: Model, step: &Step) -> Model {
        match *step {
            Step::Start => {
                m.enabled = true;
                match m.phase {
                    Phase::Stopped | Phase::Failed => {
                        m.forget_crashes();
                        m.start_run();
                    }
                    Phase::Stopping { pid, .. } => {
                        m.phase = Phase::Stopping { pid, then_start: true }
                    }
                    // The operator's start ends the hung run as a stop, then starts anew.
                    Phase::Condemned => m.phase = Phase::Stopping { pid: true, then_start: true },
                    _ => {}
                }
            }
            Step::Stop => {
                m.enabled = false;
                match m.phase {
                    Phase::Live { pid } => {
                        m.phase = Phase::Stopping { pid, then_start: false };
                        m.stop_asked_at = m.now;
                    }
                    Phase::Stopping { pid, .. } => {
                        m.phase = Phase::Stopping { pid, then_start: false }
                    }
                    Phase::Condemned => m.phase = Phase::Stopping { pid: true, then_start: false },
                    Phase::Waiting | Phase::Failed => {
                        m.forget_crashes();
                        m.phase = Phase::Stopped;
                    }
                    Phase::Stopped => {}
                }
            }
            Step::Restart => {
                m.enabled = true;
                m.forget_crashes();
                match m.phase {
                    Phase::Live { pid: false } => {}
                    Phase::Live { pid: true } => {
                        m.phase = Phase::Stopping { pid: true, then_start: true };
                        m.stop_asked_at = m.now;
                    }
                    Phase::Stopping { pid, .. } => {
                        m.phase = Phase::Stopping { pid, then_start: true }
                    }
                    Phase::Condemned => m.phase = Phase::Stopping { pid: true, then_start: true },
                    Phase::Waiting | Phase::Stopped | Phase::Failed => m.start_run(),
                }
            }
            Step::Spawned => {
                m.started_at = m.now;
                m.ready = !m.notify;
                m.ready_at = m.ready.then_some(m.now);
                m.phase = match m.phase {
                    Phase::Live { .. } => Phase::Live { pid: true },
                    Phase::Stopping { then_start, .. } => {
                        m.stop_asked_at = m.now;
                        Phase::Stopping { pid: true, then_start }
                    }
                    other => other,
                };
            }
            Step::SpawnFailed | Step::Exit(_) => {
                let status = match step {
                    Step::Exit(code) => Some(*code),
                    _ => None,
                };
                match m.phase {
                    Phase::Stopping { then_start, .. } => {
                        m.phase = Phase::Stopped;
                        if then_start {
                            m.enabled = true;
                            m.start_run();
                        }
                    }
                    Phase::Live { .. } => m.unplanned_end(status, false),
                    Phase::Condemned => m.unplanned_end(status, true),
                    _ => unreachable!("precondition"),
                }
            }
            Step::Ready => {
                if m.has_pid() && !m.ready {
                    m.ready = true;
                    m.ready_at = Some(m.now);
                }
            }
            Step::Unready => m.ready = false,
            Step::Ping => {
                if m.has_pid() {
                    m.pinged_at = Some(m.now);
                }
            }
            Step::Tick => {
                m.now += SEC / 10;
                m.on_wake();
            }
            Step::Leap(secs) => {
                m.now += secs * SEC;
                if m.phase == Phase::Waiting {
                    m.start_run();
                }
                m.on_wake();
            }
        }
        m
    }
}

struct Rig {
    h: Harness,
    now: Instant,
    out: Vec<HarnessOut>,
}

struct Test;

impl StateMachineTest for Test {
    type SystemUnderTest = Rig;
    type Reference = Reference;

    fn init_test(m: &Model) -> Rig {
        let spec = HarnessSpec {
            spawn: SpawnSpec { argv: vec!["agent".into()], ..Default::default() },
            restart: m.policy,
            readiness: if m.notify { Readiness::Notify } else { Readiness::None },
            ready_timeout: m.ready_timeout.map(Duration),
            watchdog: m.watchdog.map(Duration),
            ..Default::default()
        };
        Rig {
            h: Harness::new(Id::new("h").unwrap(), spec, Durable::default()),
            now: Instant(0),
            out: Vec::new(),
        }
    }

    fn apply(mut rig: Rig, m: &Model, step: Step) -> Rig {
        let limits = limits();
        rig.now = Instant(m.now);
        rig.out.clear();
        let run = rig.h.current_run().unwrap_or(0);
        let input = match step {
            Step::Start => Some(HarnessInput::Start),
            Step::Stop => Some(HarnessInput::Stop),
            Step::Restart => Some(HarnessInput::Restart),
            Step::Spawned => Some(HarnessInput::Spawned { run, pid: 4242 }),
            Step::SpawnFailed => Some(HarnessInput::SpawnFailed { run }),
            Step::Exit(code) => Some(HarnessInput::Exited { run, status: ExitStatus::Code(code) }),
            Step::Ready => Some(HarnessInput::Ready { run }),
            Step::Unready => Some(HarnessInput::Unready { run }),
            Step::Ping => Some(HarnessInput::Watchdog { run }),
            Step::Tick | Step::Leap(_) => None,
        };
        match input {
            Some(i) => rig.h.handle(rig.now, &limits, i, &mut rig.out),
            None => rig.h.handle_timeout(rig.now, &limits, &mut rig.out),
        }
        rig
    }

    fn check_invariants(rig: &Rig, m: &Model) {
        let limits = limits();
        rig.h.check(&limits).unwrap();
        assert_eq!(rig.h.enabled(), m.enabled, "intent");
        assert_eq!(rig.h.durable().consecutive_failures, m.failures, "consecutive failures");
        let state = rig.h.state();
        let flapping_state = if m.flapping { State::Degraded } else { State::Running };
        let waiting_state = if m.flapping { State::Degraded } else { State::Restarting };
        let ok = match m.phase {
            Phase::Stopped => state == State::Stopped,
            Phase::Failed => state == State::Failed,
            Phase::Live { pid: false } => state == State::Starting,
            Phase::Live { pid: true } => state == flapping_state && rig.h.pid().is_some(),
            Phase::Stopping { pid, .. } => state == State::Stopping && rig.h.pid().is_some() == pid,
            Phase::Waiting => state == waiting_state && rig.h.pid().is_none(),
            Phase::Condemned => state == State::Stopping && rig.h.pid().is_some(),
        };
        assert!(ok, "model phase {:?} but machine is {state:?}", m.phase);
        if m.has_pid() {
            assert_eq!(rig.h.ready(), m.ready, "readiness");
        }
        if matches!(m.phase, Phase::Stopping { pid: true, .. } | Phase::Condemned) {
            let grace_over = m.now - m.stop_asked_at >= limits.stop_grace.0;
            let killed = rig.h.poll_timeout(&limits).is_none_or(|t| t > rig.now);
            assert!(!grace_over || killed, "the kill is overdue");
        }
    }
}

prop_state_machine! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]
    #[test]
    fn lifecycle_matches_the_reference_model(sequential 1..60 => Test);
}
