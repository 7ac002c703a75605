//! Unit tests: one per transition of the lifecycle machine, with the default limits.

use super::harness::Durable;
use super::*;
use crate::env::{ExitStatus, Signal, SpawnSpec};
use crate::ids::Id;
use crate::time::Instant;

const SEC: u64 = 1_000_000_000;

struct Rig {
    h: Harness,
    limits: LifecycleLimits,
    now: Instant,
    out: Vec<HarnessOut>,
}

fn spec(restart: RestartPolicy) -> HarnessSpec {
    HarnessSpec {
        spawn: SpawnSpec { argv: vec!["agent".into()], ..Default::default() },
        restart,
        enabled: true,
        ..Default::default()
    }
}

impl Rig {
    fn new(restart: RestartPolicy) -> Rig {
        let durable = Durable { enabled: true, ..Durable::default() };
        let h = Harness::new(Id::new("h").unwrap(), spec(restart), durable);
        Rig { h, limits: LifecycleLimits::default(), now: Instant(0), out: Vec::new() }
    }

    fn input(&mut self, i: HarnessInput) {
        self.out.clear();
        self.h.handle(self.now, &self.limits, i, &mut self.out);
        self.h.check(&self.limits).unwrap();
    }

    fn advance(&mut self, secs: u64) {
        self.now = Instant(self.now.0 + secs * SEC);
        self.out.clear();
        self.h.handle_timeout(self.now, &self.limits, &mut self.out);
        self.h.check(&self.limits).unwrap();
    }

    /// A rig under `always` whose harness was spawned and has crashed and been respawned
    /// `times` times in a row.
    fn crash_looping(times: usize) -> Rig {
        let mut r = Rig::new(RestartPolicy::Always);
        r.boot_and_spawn();
        for _ in 0..times {
            r.exit(1);
            r.respawn();
        }
        r
    }

    fn boot_and_spawn(&mut self) -> u64 {
        self.out.clear();
        self.h.boot(self.now, &mut self.out);
        let run = self.spawned_run().expect("boot spawns an enabled harness");
        self.input(HarnessInput::Spawned { run, pid: 100 + run as u32 });
        run
    }

    fn spawned_run(&self) -> Option<u64> {
        self.out.iter().find_map(|o| match o {
            HarnessOut::Spawn { run, .. } => Some(*run),
            _ => None,
        })
    }

    fn signals(&self) -> Vec<Signal> {
        self.out
            .iter()
            .filter_map(|o| match o {
                HarnessOut::Signal { signal, .. } => Some(*signal),
                _ => None,
            })
            .collect()
    }

    fn exit(&mut self, code: i32) {
        let run = self.h.current_run().expect("a live run");
        self.input(HarnessInput::Exited { run, status: ExitStatus::Code(code) });
    }

    /// Waits out the retry delay and confirms the next spawn.
    fn respawn(&mut self) -> u64 {
        let at = self.h.retry_at().expect("a retry is scheduled");
        self.now = at;
        self.out.clear();
        self.h.handle_timeout(self.now, &self.limits, &mut self.out);
        let run = self.spawned_run().expect("retry spawns");
        self.input(HarnessInput::Spawned { run, pid: 100 + run as u32 });
        run
    }

    fn events(&self) -> Vec<Event> {
        self.out
            .iter()
            .filter_map(|o| match o {
                HarnessOut::Event(e) => Some(e.clone()),
                _ => None,
            })
            .collect()
    }
}

#[test]
fn boot_starts_an_enabled_harness_and_spawned_makes_it_running() {
    let mut r = Rig::new(RestartPolicy::Always);
    assert_eq!(r.h.state(), State::Stopped);
    r.boot_and_spawn();
    assert_eq!(r.h.state(), State::Running);
    assert!(r.h.ready(), "readiness none means ready at spawn");
    assert_eq!(r.h.durable().runs, 1);
}

#[test]
fn boot_leaves_a_disabled_harness_stopped() {
    let mut h =
        Harness::new(Id::new("h").unwrap(), spec(RestartPolicy::Always), Durable::default());
    let mut out = Vec::new();
    h.boot(Instant(0), &mut out);
    assert!(out.is_empty());
    assert_eq!(h.state(), State::Stopped);
}

#[test]
fn clean_exit_under_always_restarts_after_the_delay() {
    let mut r = Rig::new(RestartPolicy::Always);
    r.boot_and_spawn();
    r.advance(20);
    r.exit(0);
    assert_eq!(r.h.state(), State::Restarting);
    assert_eq!(r.h.retry_at(), Some(Instant(r.now.0 + SEC)));
    assert_eq!(r.h.durable().restarts, 1);
    assert_eq!(r.h.durable().consecutive_failures, 0, "a clean exit is not a failure");
    assert!(r.events().contains(&Event::HarnessExited {
        name: Id::new("h").unwrap(),
        code: Some(0),
        signal: None
    }));
    r.respawn();
    assert_eq!(r.h.state(), State::Running);
}

#[test]
fn an_exit_that_its_policy_does_not_restart_stops_for_good_and_one_it_does_restarts() {
    // (policy, exit code, the state after, still enabled, consecutive failures)
    let table = [
        (RestartPolicy::OnFailure, 0, State::Stopped, false, 0),
        (RestartPolicy::OnFailure, 3, State::Restarting, true, 1),
        (RestartPolicy::No, 1, State::Stopped, false, 0),
    ];
    for (policy, code, state, enabled, failures) in table {
        let mut r = Rig::new(policy);
        r.boot_and_spawn();
        r.exit(code);
        let why = format!("exit {code} under {policy:?}");
        assert_eq!(r.h.state(), state, "{why}");
        assert_eq!(r.h.enabled(), enabled, "{why}");
        if failures > 0 {
            assert_eq!(r.h.durable().consecutive_failures, failures, "{why}");
        }
    }
}

#[test]
fn spawn_failure_under_no_lands_in_failed() {
    let mut r = Rig::new(RestartPolicy::No);
    r.h.boot(r.now, &mut r.out);
    let run = r.spawned_run().unwrap();
    r.input(HarnessInput::SpawnFailed { run });
    assert_eq!(r.h.state(), State::Failed);
    assert!(r.h.durable().failed);
}

#[test]
fn spawn_failure_under_on_failure_counts_as_a_failure_and_retries() {
    let mut r = Rig::new(RestartPolicy::OnFailure);
    r.h.boot(r.now, &mut r.out);
    let run = r.spawned_run().unwrap();
    r.input(HarnessInput::SpawnFailed { run });
    assert_eq!(r.h.state(), State::Restarting);
    assert_eq!(r.h.durable().consecutive_failures, 1);
}

#[test]
fn crash_loop_goes_degraded_with_doubling_delays_then_failed() {
    let mut r = Rig::new(RestartPolicy::Always);
    r.boot_and_spawn();
    let mut delays = Vec::new();
    let mut states = Vec::new();
    for _ in 0..5 {
        r.exit(1);
        states.push(r.h.state());
        if let Some(at) = r.h.retry_at() {
            delays.push(at.saturating_since(r.now).as_millis());
            r.respawn();
        }
    }
    use State::*;
    assert_eq!(states, [Restarting, Restarting, Degraded, Degraded, Failed]);
    assert_eq!(delays, [1000, 1000, 2000, 4000]);
    assert_eq!(r.h.durable().restarts, 4);
    assert!(r.h.poll_timeout(&r.limits).is_none(), "failed has no deadlines");
}

#[test]
fn flapping_event_names_the_next_retry() {
    let mut r = Rig::new(RestartPolicy::Always);
    r.boot_and_spawn();
    r.exit(1);
    r.respawn();
    r.exit(1);
    r.respawn();
    r.exit(1);
    assert!(r.events().contains(&Event::HarnessFlapping {
        name: Id::new("h").unwrap(),
        restarts: 3,
        next_retry_in: 2000
    }));
}

#[test]
fn a_run_outliving_the_flap_window_returns_degraded_to_running() {
    let mut r = Rig::crash_looping(3);
    assert_eq!(r.h.state(), State::Degraded);
    assert!(r.h.flapping());
    let started = r.h.started_at().unwrap();
    assert_eq!(r.h.poll_timeout(&r.limits), Some(started.saturating_add(r.limits.flap_window)));
    r.advance(10);
    assert_eq!(r.h.state(), State::Running);
    assert!(!r.h.flapping());
    assert_eq!(r.h.recent_exit_count(), 0);
    assert_eq!(r.h.durable().consecutive_failures, 3, "failures are kept until a healthy run");
}

#[test]
fn slow_failures_still_give_up_because_the_healthy_clock_is_separate() {
    // Fails every 40 s: never flapping (T = 10 s), but never healthy either (H = 5 min).
    let mut r = Rig::new(RestartPolicy::Always);
    r.boot_and_spawn();
    for _ in 0..5 {
        r.advance(40);
        r.exit(1);
        if r.h.state() == State::Failed {
            break;
        }
        assert_eq!(r.h.state(), State::Restarting, "never flapping");
        r.respawn();
    }
    assert_eq!(r.h.state(), State::Failed);
}

#[test]
fn a_healthy_run_forgets_consecutive_failures() {
    let mut r = Rig::new(RestartPolicy::Always);
    r.boot_and_spawn();
    for _ in 0..4 {
        r.advance(40);
        r.exit(1);
        r.respawn();
    }
    assert_eq!(r.h.durable().consecutive_failures, 4);
    r.advance(300);
    assert_eq!(r.h.durable().consecutive_failures, 0);
    r.exit(1);
    assert_eq!(r.h.state(), State::Restarting, "one failure after a healthy run is not a give-up");
}

#[test]
fn a_missed_wake_cannot_turn_a_long_run_into_a_crash() {
    let mut r = Rig::crash_looping(4);
    // No handle_timeout at all for ten minutes, then the exit arrives.
    r.now = Instant(r.now.0 + 600 * SEC);
    r.exit(1);
    assert_eq!(r.h.state(), State::Restarting);
    assert_eq!(r.h.durable().consecutive_failures, 1);
}

#[test]
fn manual_restart_clears_failed_and_starts_fresh() {
    let mut r = Rig::new(RestartPolicy::Always);
    r.boot_and_spawn();
    for _ in 0..5 {
        r.exit(1);
        if r.h.retry_at().is_some() {
            r.respawn();
        }
    }
    assert_eq!(r.h.state(), State::Failed);
    r.input(HarnessInput::Restart);
    assert_eq!(r.h.state(), State::Starting);
    assert!(!r.h.durable().failed);
    assert_eq!(r.h.durable().consecutive_failures, 0);
    assert!(r.spawned_run().is_some());
}

#[test]
fn graceful_stop_sends_term_and_ends_stopped_and_disabled() {
    let mut r = Rig::new(RestartPolicy::Always);
    r.boot_and_spawn();
    r.input(HarnessInput::Stop);
    assert_eq!(r.h.state(), State::Stopping);
    assert_eq!(r.signals(), [Signal::Term]);
    assert!(!r.h.enabled());
    r.exit(0);
    assert_eq!(r.h.state(), State::Stopped);
    assert!(!r.h.durable().last_exit.unwrap().forced);
    assert!(r.h.retry_at().is_none(), "a stopped harness is not respawned");
}

#[test]
fn a_child_ignoring_term_is_killed_after_the_grace() {
    let mut r = Rig::new(RestartPolicy::Always);
    r.boot_and_spawn();
    r.input(HarnessInput::Stop);
    r.advance(9);
    assert!(r.signals().is_empty());
    r.advance(1);
    assert_eq!(r.signals(), [Signal::Kill]);
    let run = r.h.current_run().unwrap();
    r.input(HarnessInput::Exited { run, status: ExitStatus::Signal(9) });
    assert_eq!(r.h.state(), State::Stopped);
    assert!(r.h.durable().last_exit.unwrap().forced);
}

#[test]
fn stop_while_restarting_cancels_the_retry() {
    let mut r = Rig::new(RestartPolicy::Always);
    r.boot_and_spawn();
    r.exit(1);
    r.input(HarnessInput::Stop);
    assert_eq!(r.h.state(), State::Stopped);
    assert!(r.h.retry_at().is_none());
    assert!(!r.h.enabled());
}

#[test]
fn stop_during_spawn_terminates_the_child_once_its_pid_is_known() {
    let mut r = Rig::new(RestartPolicy::Always);
    r.h.boot(r.now, &mut r.out);
    let run = r.spawned_run().unwrap();
    r.input(HarnessInput::Stop);
    assert_eq!(r.h.state(), State::Stopping);
    r.input(HarnessInput::Spawned { run, pid: 7 });
    assert_eq!(r.signals(), [Signal::Term]);
}

#[test]
fn restart_of_a_running_harness_stops_then_starts() {
    let mut r = Rig::new(RestartPolicy::Always);
    r.boot_and_spawn();
    r.input(HarnessInput::Restart);
    assert_eq!(r.h.state(), State::Stopping);
    r.exit(0);
    assert_eq!(r.h.state(), State::Starting);
    assert!(r.h.enabled());
    assert!(r.spawned_run().is_some());
}

#[test]
fn start_while_stopping_starts_again_after_the_exit() {
    let mut r = Rig::new(RestartPolicy::Always);
    r.boot_and_spawn();
    r.input(HarnessInput::Stop);
    r.input(HarnessInput::Start);
    r.exit(0);
    assert_eq!(r.h.state(), State::Starting);
}

#[test]
fn exit_reports_about_an_earlier_run_are_ignored() {
    let mut r = Rig::new(RestartPolicy::Always);
    let first = r.boot_and_spawn();
    r.exit(1);
    r.respawn();
    r.input(HarnessInput::Exited { run: first, status: ExitStatus::Code(1) });
    assert_eq!(r.h.state(), State::Running);
    assert!(r.out.is_empty());
}

#[test]
fn config_change_is_staged_while_running_and_applied_at_next_start() {
    let mut r = Rig::new(RestartPolicy::Always);
    r.boot_and_spawn();
    let mut new = spec(RestartPolicy::Always);
    new.spawn.argv = vec!["agent".into(), "--v2".into()];
    r.input(HarnessInput::Reconfigure(Box::new(new.clone())));
    assert!(r.out.is_empty(), "a reload never bounces a running harness");
    assert!(r.h.config_changed());
    r.exit(0);
    r.respawn();
    assert_eq!(r.h.active_spec().spawn.argv, new.spawn.argv);
    assert!(!r.h.config_changed());
}

#[test]
fn a_restart_policy_change_alone_applies_at_once() {
    let mut r = Rig::new(RestartPolicy::Always);
    r.boot_and_spawn();
    r.input(HarnessInput::Reconfigure(Box::new(spec(RestartPolicy::No))));
    assert!(!r.h.config_changed());
    r.exit(0);
    assert_eq!(r.h.state(), State::Stopped, "the new policy decided this exit");
}

#[test]
fn a_stop_grace_change_applies_to_the_next_stop_of_the_running_harness() {
    let mut r = Rig::new(RestartPolicy::Always);
    r.boot_and_spawn();
    let mut shorter = spec(RestartPolicy::Always);
    shorter.stop_grace = Some(Duration::from_millis(1_000));
    shorter.restart_delay = Some(Duration::from_millis(50));
    r.input(HarnessInput::Reconfigure(Box::new(shorter)));
    assert!(!r.h.config_changed(), "nothing to stage: the run itself is the same");
    r.input(HarnessInput::Stop);
    assert_eq!(r.signals(), [Signal::Term]);
    let kill_at = r.h.poll_timeout(&r.limits).expect("a kill deadline");
    assert_eq!(kill_at, Instant(r.now.0 + SEC), "the new 1 s grace, not the default");
}

#[test]
fn readiness_evidence_is_separate_from_a_live_pid() {
    let mut r = Rig::new(RestartPolicy::Always);
    let mut s = spec(RestartPolicy::Always);
    s.readiness = Readiness::Notify;
    r.h = Harness::new(Id::new("h").unwrap(), s, Durable { enabled: true, ..Durable::default() });
    let run = r.boot_and_spawn();
    assert_eq!(r.h.state(), State::Running);
    assert!(!r.h.ready());
    r.input(HarnessInput::Ready { run });
    assert!(r.h.ready());
}

#[test]
fn a_persisted_failed_latch_survives_a_reboot() {
    let durable = Durable { enabled: true, failed: true, ..Durable::default() };
    let mut h = Harness::new(Id::new("h").unwrap(), spec(RestartPolicy::Always), durable);
    let mut out = Vec::new();
    h.boot(Instant(0), &mut out);
    assert_eq!(h.state(), State::Failed);
    assert!(out.is_empty());
}

#[test]
fn late_and_repeated_timeouts_are_harmless() {
    let mut r = Rig::new(RestartPolicy::Always);
    r.boot_and_spawn();
    r.exit(1);
    let at = r.h.retry_at().unwrap();
    r.now = Instant(at.0 - 1);
    r.out.clear();
    r.h.handle_timeout(r.now, &r.limits, &mut r.out);
    assert!(r.out.is_empty(), "early wake does nothing");
    r.now = Instant(at.0 + 5 * SEC);
    r.h.handle_timeout(r.now, &r.limits, &mut r.out);
    assert_eq!(r.h.state(), State::Starting);
    r.out.clear();
    r.h.handle_timeout(r.now, &r.limits, &mut r.out);
    assert!(r.out.is_empty(), "repeated wake does nothing");
}

#[test]
fn halt_stops_the_run_but_keeps_the_intent() {
    let mut r = Rig::new(RestartPolicy::Always);
    r.boot_and_spawn();
    r.input(HarnessInput::Halt);
    assert_eq!(r.h.state(), State::Stopping);
    assert_eq!(r.signals(), [Signal::Term]);
    r.exit(0);
    assert_eq!(r.h.state(), State::Stopped);
    assert!(r.h.enabled(), "the next daemon starts it again");
    assert!(r.h.retry_at().is_none());
}

#[test]
fn halt_cancels_a_pending_restart_and_leaves_failed_alone() {
    let mut r = Rig::new(RestartPolicy::Always);
    r.boot_and_spawn();
    r.exit(1);
    r.input(HarnessInput::Halt);
    assert_eq!(r.h.state(), State::Stopped);
    assert!(r.h.enabled());
    let durable = Durable { enabled: true, failed: true, ..Durable::default() };
    r.h = Harness::new(Id::new("h").unwrap(), spec(RestartPolicy::Always), durable);
    r.input(HarnessInput::Halt);
    assert_eq!(r.h.state(), State::Failed);
}

#[test]
fn kill_now_forces_a_stopping_run_and_nothing_else() {
    let mut r = Rig::new(RestartPolicy::Always);
    r.boot_and_spawn();
    r.input(HarnessInput::KillNow);
    assert!(r.signals().is_empty(), "a running harness is not killed");
    r.input(HarnessInput::Halt);
    r.input(HarnessInput::KillNow);
    assert_eq!(r.signals(), [Signal::Kill]);
    let run = r.h.current_run().unwrap();
    r.input(HarnessInput::Exited { run, status: ExitStatus::Signal(9) });
    assert!(r.h.durable().last_exit.unwrap().forced);
}

#[test]
fn backoff_keeps_doubling_to_the_cap_until_a_run_outlives_the_window() {
    let mut r = Rig::new(RestartPolicy::Always);
    r.limits.give_up_after = 0;
    r.boot_and_spawn();
    let mut delays = Vec::new();
    for _ in 0..10 {
        r.exit(0);
        delays.push(r.h.retry_at().unwrap().saturating_since(r.now).as_millis() / 1000);
        r.respawn();
    }
    // Delays outgrow the 10 s flap window from the fourth on; they must not fall back.
    assert_eq!(delays, [1, 1, 2, 4, 8, 16, 30, 30, 30, 30]);
    assert_eq!(r.h.state(), State::Degraded);
    r.advance(10);
    assert_eq!(r.h.state(), State::Running, "a run that outlives the window ends flapping");
    r.exit(0);
    assert_eq!(r.h.retry_at().unwrap().saturating_since(r.now).as_millis(), 1000);
}

#[test]
fn a_clean_exit_loop_gives_up_once_it_is_flapping() {
    let mut r = Rig::new(RestartPolicy::Always);
    r.boot_and_spawn();
    let mut states = Vec::new();
    for _ in 0..8 {
        r.exit(0);
        states.push(r.h.state());
        if r.h.state() == State::Failed {
            break;
        }
        r.respawn();
    }
    use State::*;
    // Two plain restarts, then every exit while flapping counts: five of them give up.
    assert_eq!(states, [Restarting, Restarting, Degraded, Degraded, Degraded, Degraded, Failed]);
}

#[test]
fn an_exit_after_outliving_the_window_goes_straight_to_restarting() {
    let mut r = Rig::crash_looping(3);
    assert_eq!(r.h.state(), State::Degraded);
    r.now = Instant(r.now.0 + 11 * SEC); // No wake in between.
    r.exit(1);
    let changes: Vec<(State, State)> = r
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::HarnessStateChanged { from, to, .. } => Some((from, to)),
            _ => None,
        })
        .collect();
    assert_eq!(changes, [(State::Degraded, State::Restarting)], "no detour through running");
}

#[test]
fn a_zero_restart_delay_still_waits_the_floor() {
    let mut r = Rig::new(RestartPolicy::Always);
    r.limits.restart_delay = crate::time::Duration::ZERO;
    r.limits.restart_delay_max = crate::time::Duration::ZERO;
    r.boot_and_spawn();
    r.exit(1);
    assert_eq!(r.h.state(), State::Restarting, "never a start within the exit's transition");
    assert!(r.spawned_run().is_none());
    let floor = crate::harness::lifecycle::limits::RESTART_FLOOR;
    assert_eq!(r.h.retry_at(), Some(r.now.saturating_add(floor)));
    assert_eq!(r.h.durable().restarts, 1);
    r.respawn();
    assert_eq!(r.h.state(), State::Running, "started once the floor passed");
}

/// The causes the state changes in `out` carry, as `(to, cause)`.
fn causes(r: &Rig) -> Vec<(State, Option<Cause>)> {
    r.events()
        .into_iter()
        .filter_map(|e| match e {
            Event::HarnessStateChanged { to, cause, .. } => Some((to, cause)),
            _ => None,
        })
        .collect()
}

#[test]
fn every_start_and_stop_carries_who_asked_for_it() {
    let mut r = Rig::new(RestartPolicy::Always);
    r.out.clear();
    r.h.boot(r.now, &mut r.out);
    assert_eq!(causes(&r), [(State::Starting, Some(Cause::Autostart))]);
    let run = r.spawned_run().unwrap();
    r.input(HarnessInput::Spawned { run, pid: 7 });
    assert_eq!(causes(&r), [(State::Running, None)], "the machine's own rule");
    // A restart asked while running starts again only after the old run ended, and the
    // new start still names the operator, not the exit that let it happen.
    r.input(HarnessInput::Restart);
    assert_eq!(causes(&r), [(State::Stopping, Some(Cause::Operator))]);
    r.exit(0);
    assert_eq!(
        causes(&r),
        [(State::Stopped, None), (State::Starting, Some(Cause::Operator))],
        "{:?}",
        r.events()
    );
    let run = r.spawned_run().unwrap();
    r.input(HarnessInput::Spawned { run, pid: 8 });
    r.exit(1);
    r.respawn();
    let mut r2 = Rig::new(RestartPolicy::Always);
    r2.boot_and_spawn();
    r2.exit(1);
    r2.out.clear();
    let at = r2.h.retry_at().unwrap();
    r2.h.handle_timeout(at, &r2.limits, &mut r2.out);
    assert_eq!(causes(&r2), [(State::Starting, Some(Cause::RestartPolicy))]);
    r.out.clear();
    r.h.handle_because(r.now, &r.limits, HarnessInput::Stop, Cause::Profile, &mut r.out);
    assert_eq!(causes(&r), [(State::Stopping, Some(Cause::Profile))]);
    r.out.clear();
    r.h.handle(r.now, &r.limits, HarnessInput::Halt, &mut r.out);
    r.h.handle(r.now, &r.limits, HarnessInput::FollowConfig(true), &mut r.out);
    assert!(causes(&r).is_empty(), "already stopping: nothing new to say");
}

#[test]
fn a_cause_is_absent_from_older_records_and_round_trips() {
    let old = r#"{"event":"harness_state_changed","name":"h","from":"stopped","to":"starting"}"#;
    let e: Event = serde_json::from_str(old).unwrap();
    assert!(matches!(e, Event::HarnessStateChanged { cause: None, .. }));
    let new = Event::HarnessStateChanged {
        name: Id::new("h").unwrap(),
        from: State::Stopped,
        to: State::Starting,
        cause: Some(Cause::RestartPolicy),
    };
    let text = serde_json::to_string(&new).unwrap();
    assert!(text.contains(r#""cause":"restart_policy""#), "{text}");
    assert_eq!(serde_json::from_str::<Event>(&text).unwrap(), new);
}

/// A rig whose harness has `readiness`, a readiness timeout and a watchdog.
fn watched(readiness: Readiness, ready_timeout: Option<u64>, watchdog: Option<u64>) -> Rig {
    let mut r = Rig::new(RestartPolicy::Always);
    let mut s = spec(RestartPolicy::Always);
    s.readiness = readiness;
    s.ready_timeout = ready_timeout.map(|secs| Duration::from_millis(secs * 1_000));
    s.watchdog = watchdog.map(|secs| Duration::from_millis(secs * 1_000));
    r.h = Harness::new(Id::new("h").unwrap(), s, Durable { enabled: true, ..Durable::default() });
    r
}

fn hung(events: &[Event]) -> Option<Hang> {
    events.iter().find_map(|e| match e {
        Event::HarnessHung { reason, .. } => Some(*reason),
        _ => None,
    })
}

#[test]
fn a_run_that_stops_pinging_its_watchdog_is_stopped_and_counted_as_failed() {
    let mut r = watched(Readiness::None, None, Some(2));
    let run = r.boot_and_spawn();
    r.advance(1);
    r.input(HarnessInput::Watchdog { run });
    r.advance(1);
    assert!(r.signals().is_empty(), "pinged a second ago: alive");
    assert_eq!(r.h.poll_timeout(&r.limits), Some(Instant(3 * SEC)), "the next deadline");
    r.advance(1);
    assert_eq!(hung(&r.events()), Some(Hang::Watchdog));
    assert_eq!(r.signals(), [Signal::Term]);
    assert_eq!(r.h.state(), State::Stopping);
    r.exit(0);
    assert_eq!(r.h.state(), State::Restarting, "its policy restarts it");
    assert_eq!(r.h.durable().consecutive_failures, 1, "a hung run is a failed run, exit 0 or not");
}

#[test]
fn a_run_not_ready_in_time_is_a_failed_start() {
    let mut r = watched(Readiness::Notify, Some(5), None);
    r.boot_and_spawn();
    r.advance(4);
    assert!(r.signals().is_empty());
    r.advance(1);
    assert_eq!(hung(&r.events()), Some(Hang::ReadyTimeout));
    assert_eq!(r.signals(), [Signal::Term]);
    r.exit(143);
    assert_eq!(r.h.state(), State::Restarting);
    // Ready in time: no deadline is left while it has no watchdog.
    let run = r.respawn();
    r.input(HarnessInput::Ready { run });
    r.advance(60);
    assert!(r.signals().is_empty() && r.h.state() == State::Running, "{:?}", r.h.state());
}

#[test]
fn a_hung_run_with_no_stop_grace_is_killed_in_the_wake_that_condemns_it() {
    // A running notify harness not ready within its 2 s, under `stop_grace = 0`, woken a
    // little late: the wake condemns it, which arms the kill deadline at that same instant.
    let mut r = watched(Readiness::Notify, Some(2), None);
    r.limits.stop_grace = Duration::ZERO;
    let run = r.boot_and_spawn();
    assert_eq!(r.h.state(), State::Running);
    r.now = Instant(2 * SEC + 48_000_000);
    r.out.clear();
    r.h.handle_timeout(r.now, &r.limits, &mut r.out);
    assert_eq!(hung(&r.events()), Some(Hang::ReadyTimeout));
    assert_eq!(r.signals(), [Signal::Term, Signal::Kill], "no grace: the KILL follows at once");
    assert_eq!(r.h.poll_timeout(&r.limits), None, "nothing left due, so a driver cannot spin");
    r.out.clear();
    r.h.handle_timeout(r.now, &r.limits, &mut r.out);
    assert!(r.out.is_empty(), "a repeated wake does nothing");
    r.input(HarnessInput::Exited { run, status: ExitStatus::Signal(9) });
    assert_eq!(r.h.state(), State::Restarting, "a failed start, restarted by its policy");
    assert!(r.h.durable().last_exit.unwrap().forced);
}

#[test]
fn an_operator_stop_of_a_hung_run_ends_stopped_not_restarted() {
    let mut r = watched(Readiness::None, None, Some(2));
    r.boot_and_spawn();
    r.advance(2);
    assert_eq!(r.h.state(), State::Stopping);
    r.input(HarnessInput::Stop);
    r.exit(0);
    assert_eq!(r.h.state(), State::Stopped);
    assert!(!r.h.enabled());
}

#[test]
fn a_harness_own_crash_loop_limits_override_the_shared_ones() {
    let mut r = Rig::new(RestartPolicy::Always);
    r.limits.give_up_after = 5;
    let mut s = spec(RestartPolicy::Always);
    s.crash_loop.give_up_after = Some(2);
    r.h = Harness::new(Id::new("h").unwrap(), s, Durable { enabled: true, ..Durable::default() });
    r.boot_and_spawn();
    r.exit(1);
    assert_eq!(r.h.state(), State::Restarting);
    r.respawn();
    r.exit(1);
    assert_eq!(r.h.state(), State::Failed, "its own ceiling of 2, not the shared 5");
    // Raised again by a reload: the next failures count against the new ceiling.
    let mut raised = spec(RestartPolicy::Always);
    raised.crash_loop.give_up_after = Some(4);
    r.input(HarnessInput::Reconfigure(Box::new(raised)));
    r.input(HarnessInput::Restart);
    assert_eq!(r.h.state(), State::Starting);
}

#[test]
fn lost_readiness_is_not_ready_until_shown_again_and_is_no_failed_start() {
    let probe = Readiness::Probe { command: vec!["check".into()] };
    let mut r = watched(probe, Some(5), None);
    let run = r.boot_and_spawn();
    r.input(HarnessInput::Unready { run });
    assert!(r.events().is_empty(), "not ready yet: nothing to lose");
    r.input(HarnessInput::Ready { run });
    assert!(r.h.ready());
    r.input(HarnessInput::Unready { run: run + 1 });
    assert!(r.h.ready(), "another run's loss is stale");
    r.input(HarnessInput::Unready { run });
    assert!(!r.h.ready());
    assert_eq!(r.events(), [Event::HarnessUnready { name: Id::new("h").unwrap(), run }]);
    assert_eq!(r.h.state(), State::Running, "it stays running, not ready");
    r.advance(60);
    assert!(r.signals().is_empty(), "past its start: the ready timeout no longer applies");
    r.input(HarnessInput::Ready { run });
    assert!(r.h.ready());
    assert!(matches!(r.events()[..], [Event::HarnessReady { .. }]), "ready again is said again");
}

#[test]
fn the_watchdog_counts_from_readiness_when_that_came_after_the_last_ping() {
    let mut r = watched(Readiness::Notify, None, Some(5));
    let run = r.boot_and_spawn();
    r.input(HarnessInput::Watchdog { run });
    r.advance(4);
    r.input(HarnessInput::Ready { run });
    r.advance(4);
    assert!(r.signals().is_empty(), "8 s after the ping, but 4 s after READY=1: alive");
    r.advance(1);
    assert_eq!(hung(&r.events()), Some(Hang::Watchdog));
}

#[test]
fn a_start_while_a_hung_run_stops_is_the_operator_s_word() {
    let mut r = Rig::new(RestartPolicy::No);
    let mut s = spec(RestartPolicy::No);
    s.watchdog = Some(Duration::from_millis(2_000));
    r.h = Harness::new(Id::new("h").unwrap(), s, Durable { enabled: true, ..Durable::default() });
    r.boot_and_spawn();
    r.advance(2);
    assert_eq!(r.h.state(), State::Stopping, "hung");
    r.input(HarnessInput::Start);
    r.exit(0);
    assert_eq!(r.h.state(), State::Starting, "started again, not stopped by its policy");
    assert!(r.h.enabled());
    assert_eq!(r.h.durable().consecutive_failures, 0, "ended as a stop, not as a failure");
}
