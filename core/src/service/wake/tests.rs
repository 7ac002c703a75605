//! Tests of `wake`.

use super::*;
use proptest::prelude::*;
use serde_json::json;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn t(n: u64) -> Instant {
    Instant::ZERO.saturating_add(ms(n))
}

fn fp(s: &str) -> Fingerprint {
    Fingerprint::new(s)
}

fn id(s: &str) -> Id {
    Id::new(s).unwrap()
}

fn backoff(errors: u32, observed: &str, until: Instant) -> GoalWake {
    GoalWake {
        state: WakeState::Backoff,
        consecutive_errors: errors,
        observed: Some(fp(observed)),
        next_wake_at: Some(until),
    }
}

fn drain(s: &mut ServiceScheduler) -> Vec<ServiceEffect> {
    std::iter::from_fn(|| s.poll_effect()).collect()
}

fn scheduler(goals: &[&str]) -> ServiceScheduler {
    let goals = goals.iter().map(|g| id(g)).collect();
    ServiceScheduler::new(WakeConfig::default(), goals, BTreeMap::new(), t(0)).unwrap()
}

/// A scheduler at t(0) whose first sweep has been handed to the driver.
fn sweeping() -> ServiceScheduler {
    let mut s = scheduler(&["a"]);
    s.handle_timeout(t(0));
    assert_eq!(drain(&mut s), [ServiceEffect::Sweep]);
    s
}

// --- configuration ---

#[test]
fn default_config_is_harnerys_and_valid() {
    let c = WakeConfig::default();
    assert_eq!(c.wake_interval, ms(5_000));
    assert_eq!(c.heartbeat_interval, ms(2_000));
    assert_eq!(c.error_backoff_base, ms(2_000));
    assert_eq!(c.error_backoff_max, ms(300_000));
    assert_eq!(c.validate(), Ok(()));
}

#[test]
fn validate_names_the_field_out_of_range() {
    type Set = fn(&mut WakeConfig, Duration);
    let fields: [(&str, u64, Set); 4] = [
        ("wake_interval_ms", 3_600_000, |c, d| c.wake_interval = d),
        ("heartbeat_interval_ms", 60_000, |c, d| c.heartbeat_interval = d),
        ("error_backoff_base_ms", 3_600_000, |c, d| {
            c.error_backoff_base = d;
            c.error_backoff_max = ms(86_400_000);
        }),
        ("error_backoff_max_ms", 86_400_000, |c, d| {
            c.error_backoff_max = d;
            c.error_backoff_base = ms(1);
        }),
    ];
    for (name, max_ms, set) in fields {
        for (value, ok) in [(ms(0), false), (ms(1), true), (ms(max_ms), true)] {
            let mut c = WakeConfig::default();
            set(&mut c, value);
            assert_eq!(c.validate().is_ok(), ok, "{name} = {value}");
        }
        for bad in [Duration(999_999), ms(max_ms).saturating_add(Duration(1))] {
            let mut c = WakeConfig::default();
            set(&mut c, bad);
            let err = c.validate().unwrap_err();
            assert_eq!(err.field(), name);
            assert!(err.to_string().starts_with(name), "{err}");
        }
    }
}

#[test]
fn validate_refuses_a_cap_below_the_base() {
    let c = WakeConfig { error_backoff_max: ms(1_999), ..WakeConfig::default() };
    let err = c.validate().unwrap_err();
    assert_eq!(err, WakeConfigError::BackoffMaxBelowBase { base: ms(2_000), max: ms(1_999) });
    assert_eq!(err.field(), "error_backoff_max_ms");
    let equal = WakeConfig { error_backoff_max: ms(2_000), ..WakeConfig::default() };
    assert_eq!(equal.validate(), Ok(()));
}

#[test]
fn sub_millisecond_values_are_reported_exactly() {
    let c = WakeConfig { wake_interval: Duration(500), ..WakeConfig::default() };
    assert_eq!(
        c.validate().unwrap_err().to_string(),
        "wake_interval_ms must be between 1ms and 3600s, not 500ns"
    );
}

// --- backoff_delay ---

#[test]
fn backoff_is_zero_without_errors_then_doubles_to_the_cap() {
    let (base, max) = (ms(2_000), ms(300_000));
    let delays: Vec<u64> = (0..11).map(|n| backoff_delay(base, max, n).as_millis()).collect();
    assert_eq!(
        delays,
        [0, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 256_000, 300_000, 300_000]
    );
}

#[test]
fn backoff_exponent_stops_at_its_bound() {
    let (base, max) = (ms(1), Duration::MAX);
    assert_eq!(backoff_delay(base, max, 21), ms(1 << 20));
    assert_eq!(backoff_delay(base, max, 22), ms(1 << 20));
    assert_eq!(backoff_delay(base, max, u32::MAX), ms(1 << 20));
}

#[test]
fn backoff_saturates_on_huge_inputs() {
    assert_eq!(backoff_delay(Duration::MAX, Duration::MAX, u32::MAX), Duration::MAX);
    assert_eq!(backoff_delay(Duration(1 << 63), Duration::MAX, 1), Duration(1 << 63));
    assert_eq!(backoff_delay(Duration(1 << 63), Duration::MAX, 2), Duration::MAX);
    assert_eq!(backoff_delay(Duration::MAX, ms(7), 1), ms(7));
}

// --- decide ---

#[test]
fn a_ready_idle_goal_is_ticked_every_time() {
    let prev = after_tick_ok(fp("a"), true);
    assert_eq!(decide(&prev, &fp("a"), true, t(0)), SweepDecision::Tick);
    assert_eq!(decide(&GoalWake::default(), &fp("a"), true, t(0)), SweepDecision::Tick);
}

#[test]
fn a_goal_that_is_not_ready_becomes_awaiting_with_errors_forgiven() {
    let prev = backoff(4, "a", t(10));
    let expected = GoalWake::awaiting(fp("a"));
    assert_eq!(decide(&prev, &fp("a"), false, t(10)), SweepDecision::BecomeAwaiting(expected));
    let d = decide(&GoalWake::default(), &fp("b"), false, t(0));
    assert_eq!(d, SweepDecision::BecomeAwaiting(GoalWake::awaiting(fp("b"))));
}

#[test]
fn backoff_skips_until_its_deadline_then_ticks() {
    let prev = backoff(1, "a", t(10));
    let skip = SweepDecision::Skip(SkipReason::BackoffNotElapsed { until: t(10) });
    assert_eq!(decide(&prev, &fp("a"), true, t(9)), skip);
    assert_eq!(decide(&prev, &fp("a"), true, t(10)), SweepDecision::Tick);
    assert_eq!(decide(&prev, &fp("a"), true, t(11)), SweepDecision::Tick);
}

#[test]
fn a_changed_fingerprint_bypasses_backoff() {
    let prev = backoff(3, "a", t(1_000));
    assert_eq!(decide(&prev, &fp("b"), true, t(0)), SweepDecision::Tick);
    let d = decide(&prev, &fp("b"), false, t(0));
    assert_eq!(d, SweepDecision::BecomeAwaiting(GoalWake::awaiting(fp("b"))));
}

#[test]
fn an_unchanged_awaiting_goal_costs_no_tick_even_if_it_claims_ready() {
    let prev = GoalWake::awaiting(fp("a"));
    assert_eq!(decide(&prev, &fp("a"), true, t(0)), SweepDecision::Skip(SkipReason::Unchanged));
    assert_eq!(decide(&prev, &fp("a"), false, t(0)), SweepDecision::Skip(SkipReason::Unchanged));
}

#[test]
fn a_changed_fingerprint_bypasses_quiescence() {
    let prev = GoalWake::awaiting(fp("a"));
    assert_eq!(decide(&prev, &fp("b"), true, t(0)), SweepDecision::Tick);
    let d = decide(&prev, &fp("b"), false, t(0));
    assert_eq!(d, SweepDecision::BecomeAwaiting(GoalWake::awaiting(fp("b"))));
}

#[test]
fn inconsistent_records_fall_on_the_side_of_reading_again() {
    let no_deadline = GoalWake { next_wake_at: None, ..backoff(1, "a", t(0)) };
    assert_eq!(decide(&no_deadline, &fp("a"), true, t(0)), SweepDecision::Tick);
    let blind = GoalWake { observed: None, ..GoalWake::awaiting(fp("a")) };
    assert_eq!(decide(&blind, &fp("a"), true, t(0)), SweepDecision::Tick);
    // A backoff with no fingerprint cannot be "changed", so it still waits its delay.
    let unseen = GoalWake { observed: None, ..backoff(1, "a", t(5)) };
    assert!(matches!(decide(&unseen, &fp("b"), true, t(0)), SweepDecision::Skip(_)));
}

// --- after a tick ---

#[test]
fn a_successful_tick_forgives_errors() {
    let idle = after_tick_ok(fp("b"), true);
    assert_eq!(idle, GoalWake { observed: Some(fp("b")), ..GoalWake::default() });
    assert_eq!(after_tick_ok(fp("c"), false), GoalWake::awaiting(fp("c")));
    assert_eq!(idle.check(), Ok(()));
}

#[test]
fn a_failed_tick_backs_off_exponentially_to_the_cap() {
    let cfg = WakeConfig::default();
    let mut wake = GoalWake::default();
    let mut delays = Vec::new();
    for _ in 0..10 {
        wake = after_tick_err(&wake, fp("a"), t(1_000), &cfg);
        assert_eq!(wake.check(), Ok(()));
        delays.push(wake.next_wake_at.unwrap().saturating_since(t(1_000)).as_millis());
    }
    assert_eq!(wake.consecutive_errors, 10);
    assert_eq!(delays[..3], [2_000, 4_000, 8_000]);
    assert_eq!(delays[8..], [300_000, 300_000]);
}

#[test]
fn the_error_count_saturates() {
    let prev = backoff(u32::MAX, "a", t(0));
    let next = after_tick_err(&prev, fp("b"), t(0), &WakeConfig::default());
    assert_eq!(next.consecutive_errors, u32::MAX);
    assert_eq!(next.observed, Some(fp("b")));
}

#[test]
fn records_serialize_in_snake_case_and_round_trip() {
    let wake = GoalWake::awaiting(fp("ab12"));
    let value = serde_json::to_value(&wake).unwrap();
    let expected = json!({"state": "awaiting_change", "consecutive_errors": 0,
        "observed": fp("ab12").to_hex(), "next_wake_at": null});
    assert_eq!(value, expected);
    let b = backoff(2, "ff", Instant(7));
    let text = serde_json::to_string(&b).unwrap();
    assert!(text.contains("\"backoff\""), "{text}");
    assert_eq!(serde_json::from_str::<GoalWake>(&text).unwrap(), b);
    let short = json!({"state": "idle", "consecutive_errors": 0, "observed": "ab12",
        "next_wake_at": null});
    assert!(serde_json::from_value::<GoalWake>(short).is_err(), "not 32 hex digits");
}

#[test]
fn check_rejects_inconsistent_records() {
    let bad = [
        GoalWake { consecutive_errors: 1, ..GoalWake::default() },
        GoalWake { next_wake_at: Some(t(1)), ..GoalWake::default() },
        GoalWake { consecutive_errors: 0, ..backoff(1, "a", t(1)) },
        GoalWake { next_wake_at: None, ..backoff(1, "a", t(1)) },
        GoalWake { observed: None, ..GoalWake::awaiting(fp("a")) },
    ];
    for wake in bad {
        assert!(wake.check().is_err(), "{wake:?}");
    }
}

// --- scheduler ---

#[test]
fn a_new_service_sweeps_at_once() {
    let mut s = scheduler(&["a"]);
    assert_eq!(s.poll_timeout(), Some(t(0)));
    assert_eq!(s.check(), Ok(()));
    s.handle_timeout(t(0));
    assert_eq!(drain(&mut s), [ServiceEffect::Sweep]);
    assert!(s.is_sweeping());
    assert_eq!(s.poll_timeout(), None, "a running sweep has no deadline of its own");
}

#[test]
fn early_late_and_repeated_wakes_during_a_sweep_do_nothing() {
    let mut s = sweeping();
    for at in [0, 1_999, 11_000, 11_000] {
        s.handle_timeout(t(at));
        assert!(drain(&mut s).is_empty());
    }
}

#[test]
fn the_hints_are_written_after_the_first_sweep_then_only_when_they_change() {
    let mut s = sweeping();
    s.sweep_finished(t(10), Ok(()));
    assert_eq!(drain(&mut s), [ServiceEffect::WriteHints], "nothing written yet");
    let next_sweep = |s: &mut ServiceScheduler| {
        let at = s.next_sweep_at().expect("waiting");
        s.handle_timeout(at);
        assert_eq!(drain(s), [ServiceEffect::Sweep]);
        at.saturating_add(ms(10))
    };
    for _ in 0..3 {
        let end = next_sweep(&mut s);
        s.sweep_finished(end, Ok(()));
        assert!(drain(&mut s).is_empty(), "an idle service writes no hints");
    }
    let end = next_sweep(&mut s);
    s.record_outcome(&id("a"), "no_progress: nothing to do".into());
    s.record_outcome(&id("ghost"), "never enrolled".into());
    s.sweep_finished(end, Ok(()));
    assert_eq!(drain(&mut s), [ServiceEffect::WriteHints], "an outcome changed");
    assert_eq!(s.outcomes().len(), 1, "only enrolled goals have outcomes");
    s.hints_lost();
    let end = next_sweep(&mut s);
    s.sweep_finished(end, Ok(()));
    assert_eq!(drain(&mut s), [ServiceEffect::WriteHints], "a lost write is tried again");
    assert_eq!(s.check(), Ok(()));
}

#[test]
fn a_file_change_seen_before_the_last_sweep_ended_is_old_news() {
    let mut s = sweeping();
    s.sweep_finished(t(1_000), Ok(()));
    drain(&mut s);
    assert_eq!(s.next_sweep_at(), Some(t(6_000)));
    s.file_changed(t(2_000), t(900));
    assert_eq!(s.next_sweep_at(), Some(t(6_000)), "the sweep made it, or read after it");
    s.file_changed(t(2_000), t(1_000));
    assert_eq!(s.next_sweep_at(), Some(t(6_000)), "seen as the sweep ended");
    s.file_changed(t(2_000), t(1_001));
    assert_eq!(s.next_sweep_at(), Some(t(2_000)), "a change after the sweep wakes it early");
}

#[test]
fn outcomes_of_goals_no_longer_enrolled_are_dropped_on_restore() {
    let mut s = scheduler(&["a"]);
    let prior = [("a", "succeeded: done"), ("gone", "blocked: x")];
    s.restore_outcomes(prior.iter().map(|(g, o)| (id(g), o.to_string())).collect());
    assert_eq!(s.outcomes().keys().collect::<Vec<_>>(), [&id("a")]);
    assert_eq!(s.check(), Ok(()));
}

#[test]
fn an_early_wake_brings_the_sweep_forward_but_not_closer_than_the_gap() {
    let mut s = sweeping();
    s.wake_early(t(10));
    assert!(s.is_sweeping(), "a hint during a sweep changes nothing");
    s.sweep_finished(t(1_000), Ok(()));
    assert_eq!(s.next_sweep_at(), Some(t(6_000)));
    s.wake_early(t(1_100));
    assert_eq!(s.next_sweep_at(), Some(t(1_250)), "not sooner than the gap");
    s.wake_early(t(3_000));
    assert_eq!(s.next_sweep_at(), Some(t(1_250)), "repeating it never delays");
    assert_eq!(s.check(), Ok(()));
}

#[test]
fn an_early_wake_leaves_a_sweep_level_backoff_alone() {
    let mut s = sweeping();
    s.sweep_finished(t(1_000), Err(RecordError::refused("disk")));
    let backoff = s.next_sweep_at();
    s.wake_early(t(1_500));
    assert_eq!(s.next_sweep_at(), backoff);
}

#[test]
fn the_next_sweep_waits_the_wake_interval_after_the_last_finished() {
    let mut s = sweeping();
    s.sweep_finished(t(3_000), Ok(()));
    assert_eq!((s.sweep_count(), s.last_sweep_at()), (1, Some(t(3_000))));
    assert_eq!(s.next_sweep_at(), Some(t(8_000)));
    assert_eq!(drain(&mut s), [ServiceEffect::WriteHints]);
    s.handle_timeout(t(7_999));
    assert!(drain(&mut s).is_empty());
    s.handle_timeout(t(8_000));
    assert_eq!(drain(&mut s), [ServiceEffect::Sweep]);
}

#[test]
fn sweep_errors_back_off_exponentially_and_success_forgets_them() {
    let mut s = sweeping();
    let mut finish = 0;
    for expected in [2_000, 4_000, 8_000] {
        finish += 100;
        s.sweep_finished(t(finish), Err(RecordError::refused("runtime.json: EIO")));
        assert_eq!(s.next_sweep_at(), Some(t(finish + expected)));
        assert_eq!(s.last_error(), Some("runtime.json: EIO"));
        finish += expected;
        s.handle_timeout(t(finish));
        assert!(drain(&mut s).contains(&ServiceEffect::Sweep));
    }
    assert_eq!((s.sweep_errors(), s.sweep_count()), (3, 0));
    s.sweep_finished(t(finish), Ok(()));
    assert_eq!((s.sweep_errors(), s.last_error(), s.sweep_count()), (0, None, 1));
    assert_eq!(s.next_sweep_at(), Some(t(finish + 5_000)));
}

#[test]
fn a_stray_sweep_report_is_ignored() {
    let mut s = scheduler(&["a"]);
    s.sweep_finished(t(10), Ok(()));
    assert_eq!((s.sweep_count(), s.next_sweep_at()), (0, Some(t(0))));
    s.handle_timeout(t(0));
    s.sweep_finished(t(10), Err(RecordError::refused("x")));
    assert_eq!(s.sweep_errors(), 0, "a sweep not yet polled has not started");
    assert_eq!(s.check(), Ok(()));
}

#[test]
fn a_stop_between_sweeps_is_immediate() {
    let mut s = sweeping();
    s.sweep_finished(t(1), Ok(()));
    assert_eq!(drain(&mut s), [ServiceEffect::WriteHints]);
    s.request_stop(t(2));
    assert_eq!(s.phase(), ServicePhase::Stopped);
    assert_eq!(s.poll_timeout(), None);
    s.handle_timeout(t(100_000));
    assert!(drain(&mut s).is_empty());
    s.request_stop(t(100_001));
    assert_eq!(s.check(), Ok(()));
}

#[test]
fn a_stop_drops_a_sweep_not_yet_handed_out() {
    let mut s = scheduler(&["a"]);
    s.handle_timeout(t(0));
    s.request_stop(t(0));
    assert_eq!(s.phase(), ServicePhase::Stopped);
    assert!(drain(&mut s).is_empty());
}

#[test]
fn a_stop_during_a_sweep_waits_for_it_then_writes_its_hints() {
    let mut s = sweeping();
    s.request_stop(t(1));
    assert_eq!(s.phase(), ServicePhase::Stopping);
    s.handle_timeout(t(2_000));
    assert!(drain(&mut s).is_empty());
    s.sweep_finished(t(2_500), Ok(()));
    assert_eq!(drain(&mut s), [ServiceEffect::WriteHints], "the last sweep's hints");
    assert_eq!((s.phase(), s.sweep_count()), (ServicePhase::Stopped, 1));
    assert_eq!(s.poll_timeout(), None);
    assert_eq!(s.check(), Ok(()));
}

#[test]
fn new_restores_prior_records_as_hints() {
    let cfg = WakeConfig::default();
    let prior = BTreeMap::from([
        (id("gone"), backoff(1, "x", t(1))),
        (id("far"), backoff(2, "a", t(999_999_999))),
        (id("lost"), GoalWake { next_wake_at: None, ..backoff(1, "b", t(0)) }),
        (id("blind"), GoalWake { observed: None, ..GoalWake::awaiting(fp("c")) }),
        (id("quiet"), GoalWake::awaiting(fp("d"))),
    ]);
    let goals = ["far", "lost", "blind", "quiet", "new", "far"].map(id).to_vec();
    let s = ServiceScheduler::new(cfg, goals, prior, t(100)).unwrap();
    assert_eq!(s.goals(), ["far", "lost", "blind", "quiet", "new"].map(id));
    assert_eq!(s.goal(&id("gone")), None);
    assert_eq!(s.goal(&id("far")), Some(&backoff(2, "a", t(4_100))), "clamped to its delay");
    assert_eq!(s.goal(&id("lost")), Some(&backoff(1, "b", t(100))), "due at once");
    assert_eq!(s.goal(&id("blind")), Some(&GoalWake::default()));
    assert_eq!(s.goal(&id("quiet")), Some(&GoalWake::awaiting(fp("d"))));
    assert_eq!(s.goal(&id("new")), Some(&GoalWake::default()));
    assert_eq!(s.check(), Ok(()));
}

#[test]
fn new_refuses_an_invalid_config() {
    let cfg = WakeConfig { heartbeat_interval: Duration::ZERO, ..WakeConfig::default() };
    let err = ServiceScheduler::new(cfg, vec![id("a")], BTreeMap::new(), t(0)).unwrap_err();
    assert_eq!(err.field(), "heartbeat_interval_ms");
}

#[test]
fn record_goal_stores_tick_results_and_refuses_bad_ones() {
    let mut s = sweeping();
    let a = id("a");
    let prev = s.goal(&a).unwrap().clone();
    let failed = after_tick_err(&prev, fp("a"), t(50), s.config());
    assert_eq!(s.record_goal(t(50), &a, failed.clone()), Ok(()));
    assert_eq!(s.goal(&a), Some(&failed));
    assert!(s.record_goal(t(50), &id("b"), GoalWake::default()).is_err());
    let inconsistent = GoalWake { next_wake_at: None, ..failed.clone() };
    assert!(s.record_goal(t(50), &a, inconsistent).is_err());
    let beyond = backoff(1, "a", t(50 + 300_001));
    assert!(s.record_goal(t(50), &a, beyond).is_err());
    assert_eq!(s.goal(&a), Some(&failed), "a refusal changes nothing");
    assert_eq!(s.check(), Ok(()));
}

#[test]
fn a_sweep_driven_by_decide_quiesces_and_wakes_on_change() {
    let mut s = sweeping();
    let a = id("a");
    let prev = s.goal(&a).unwrap().clone();
    let SweepDecision::BecomeAwaiting(wake) = decide(&prev, &fp("1"), false, t(0)) else {
        panic!("not ready goal must become awaiting");
    };
    s.record_goal(t(0), &a, wake).unwrap();
    let prev = s.goal(&a).unwrap().clone();
    assert_eq!(decide(&prev, &fp("1"), true, t(9)), SweepDecision::Skip(SkipReason::Unchanged));
    assert_eq!(decide(&prev, &fp("2"), true, t(9)), SweepDecision::Tick);
}

// --- properties ---

fn wake_strategy() -> impl Strategy<Value = GoalWake> {
    let state = prop_oneof![
        Just(WakeState::Idle),
        Just(WakeState::Backoff),
        Just(WakeState::AwaitingChange)
    ];
    let observed = proptest::option::of("[abc]".prop_map(Fingerprint::new));
    let at = proptest::option::of(any::<u64>().prop_map(Instant));
    (state, any::<u32>(), observed, at).prop_map(|(state, consecutive_errors, observed, at)| {
        GoalWake { state, consecutive_errors, observed, next_wake_at: at }
    })
}

fn config_strategy() -> impl Strategy<Value = WakeConfig> {
    (1u64..50, 1u64..20, 1u64..20, 0u64..200).prop_map(|(wake, beat, base, extra)| WakeConfig {
        wake_interval: ms(wake),
        heartbeat_interval: ms(beat),
        error_backoff_base: ms(base),
        error_backoff_max: ms(base + extra),
    })
}

proptest! {
    #[test]
    fn backoff_never_exceeds_the_cap(base: u64, max: u64, n: u32) {
        let d = backoff_delay(Duration(base), Duration(max), n);
        prop_assert!(d <= Duration(max));
        if n == 0 {
            prop_assert_eq!(d, Duration::ZERO);
        }
    }

    #[test]
    fn backoff_never_decreases_with_more_errors(base: u64, max: u64, n in 0u32..u32::MAX) {
        let (base, max) = (Duration(base), Duration(max));
        prop_assert!(backoff_delay(base, max, n) <= backoff_delay(base, max, n + 1));
    }

    #[test]
    fn one_error_waits_exactly_the_base(
        (base, max) in any::<u64>().prop_flat_map(|max| (0..=max, Just(max)))
    ) {
        prop_assert_eq!(backoff_delay(Duration(base), Duration(max), 1), Duration(base));
    }

    #[test]
    fn a_changed_fingerprint_is_never_skipped(
        prev in wake_strategy(), seen in "[abc]", ready: bool, now: u64
    ) {
        let current = Fingerprint::new(format!("{seen}'"));
        let prev = GoalWake { observed: Some(Fingerprint::new(seen)), ..prev };
        let d = decide(&prev, &current, ready, Instant(now));
        prop_assert!(!matches!(d, SweepDecision::Skip(_)), "{:?}", d);
    }

    #[test]
    fn an_unchanged_awaiting_goal_is_never_ticked(
        prev in wake_strategy(), seen in "[abc]", ready: bool, now: u64
    ) {
        let current = Fingerprint::new(seen);
        let prev = GoalWake {
            state: WakeState::AwaitingChange,
            observed: Some(current),
            ..prev
        };
        let d = decide(&prev, &current, ready, Instant(now));
        prop_assert_ne!(d, SweepDecision::Tick);
    }

    #[test]
    fn decisions_and_tick_results_are_consistent_records(
        prev in wake_strategy(), current in "[abc]", ready: bool, now: u64,
        cfg in config_strategy()
    ) {
        let (current, now) = (Fingerprint::new(current), Instant(now));
        if let SweepDecision::BecomeAwaiting(w) = decide(&prev, &current, ready, now) {
            prop_assert_eq!(w.check(), Ok(()));
            prop_assert_eq!(w.observed.as_ref(), Some(&current));
        }
        let err = after_tick_err(&prev, current, now, &cfg);
        prop_assert_eq!(err.check(), Ok(()));
        let until = err.next_wake_at.unwrap_or(now);
        prop_assert!(until.saturating_since(now) <= cfg.error_backoff_max);
        prop_assert_eq!(after_tick_ok(current, ready).check(), Ok(()));
    }

    #[test]
    fn any_prior_record_is_restored_consistently(
        prior in proptest::collection::vec(wake_strategy(), 1..4), now: u64,
        cfg in config_strategy()
    ) {
        let goals: Vec<Id> = (0..prior.len()).map(|i| id(&format!("g{i}"))).collect();
        let prior = goals.iter().cloned().zip(prior).collect();
        let s = ServiceScheduler::new(cfg, goals, prior, Instant(now)).unwrap();
        prop_assert_eq!(s.check(), Ok(()));
    }

    #[test]
    fn the_scheduler_survives_any_schedule_of_wakes(
        cfg in config_strategy(),
        start: u32,
        ops in proptest::collection::vec(op_strategy(), 1..120),
    ) {
        drive(cfg, Instant(u64::from(start)), ops)?;
    }
}

/// When the driver wakes, relative to the machine's next deadline.
#[derive(Clone, Debug)]
enum When {
    Early,
    Exact,
    Late(u64),
    Repeat,
}

#[derive(Clone, Debug)]
enum Op {
    Timeout(When),
    /// A sweep report: whether it succeeded, whether its hints' write is lost.
    Finish(When, bool, bool),
    /// A file change seen this many nanoseconds before it is reported.
    Changed(When, u64),
    Record(When, usize, u8, u8),
    Stop(When),
    WakeEarly(When),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let when = prop_oneof![
        Just(When::Early),
        Just(When::Exact),
        (1u64..300_000_000).prop_map(When::Late),
        Just(When::Repeat),
    ];
    prop_oneof![
        12 => when.clone().prop_map(Op::Timeout),
        4 => (when.clone(), any::<bool>(), any::<bool>())
            .prop_map(|(w, ok, lost)| Op::Finish(w, ok, lost)),
        2 => (when.clone(), 0u64..20_000_000_000).prop_map(|(w, back)| Op::Changed(w, back)),
        4 => (when.clone(), 0usize..3, 0u8..3, 0u8..3)
            .prop_map(|(w, g, kind, f)| Op::Record(w, g, kind, f)),
        2 => when.clone().prop_map(Op::WakeEarly),
        1 => when.prop_map(Op::Stop),
    ]
}

fn next_time(now: Instant, deadline: Option<Instant>, when: &When) -> Instant {
    let target = deadline.unwrap_or(now).max(now);
    match when {
        When::Repeat => now,
        When::Exact => target,
        When::Early => Instant(target.0.saturating_sub(1)).max(now),
        When::Late(ns) => target.saturating_add(Duration(*ns)),
    }
}

/// A test driver: plays operations against a scheduler as the service loop would.
struct Driver {
    cfg: WakeConfig,
    goals: Vec<Id>,
    s: ServiceScheduler,
    now: Instant,
    sweeping: bool,
    /// The hints last handed out to be written, as the model sees them.
    written: Option<BTreeMap<Id, GoalWake>>,
}

impl Driver {
    /// Wakes the machine and checks that effects come only once a deadline passed, and
    /// that a sweep is handed out only when none runs.
    fn timeout(&mut self, w: &When) -> Result<(), TestCaseError> {
        let now = next_time(self.now, self.s.poll_timeout(), w);
        let deadline = self.s.poll_timeout();
        self.s.handle_timeout(now);
        let effects = drain(&mut self.s);
        if !effects.is_empty() {
            prop_assert!(deadline.is_some_and(|d| d <= now));
            prop_assert_eq!(&effects, &[ServiceEffect::Sweep]);
            prop_assert!(!self.sweeping, "a second sweep while one runs");
            self.sweeping = true;
        }
        self.now = now;
        Ok(())
    }

    /// Reports a sweep (or a stray report) and checks the next sweep's delay, and that the
    /// hints are handed out exactly when they differ from the last ones written.
    fn finish(&mut self, w: &When, ok: bool, lost: bool) -> Result<(), TestCaseError> {
        self.now = next_time(self.now, None, w);
        let result = if ok { Ok(()) } else { Err(RecordError::refused("boom")) };
        self.s.sweep_finished(self.now, result);
        if self.sweeping && self.s.phase() == ServicePhase::Running {
            let errors = self.s.sweep_errors();
            let delay = if ok { self.cfg.wake_interval } else { self.cfg.backoff(errors) };
            prop_assert_eq!(self.s.next_sweep_at(), Some(self.now.saturating_add(delay)));
        }
        let effects = drain(&mut self.s);
        let changed = self.written.as_ref() != Some(&self.s.wakes());
        if self.sweeping && changed {
            prop_assert_eq!(&effects, &[ServiceEffect::WriteHints]);
            self.written = Some(self.s.wakes());
            if lost {
                self.s.hints_lost();
                self.written = None;
            }
        } else {
            prop_assert!(effects.is_empty(), "hints written unchanged: {:?}", effects);
        }
        self.sweeping = false;
        Ok(())
    }

    /// A file change: old news (seen before the last sweep ended) changes nothing, a new
    /// one acts as an early wake.
    fn changed(&mut self, w: &When, back: u64) -> Result<(), TestCaseError> {
        self.now = next_time(self.now, None, w);
        let seen_at = Instant(self.now.0.saturating_sub(back));
        let before = self.s.next_sweep_at();
        let old_news = self.s.last_sweep_at().is_some_and(|ended| seen_at <= ended);
        self.s.file_changed(self.now, seen_at);
        if old_news {
            prop_assert_eq!(self.s.next_sweep_at(), before);
        }
        Ok(())
    }

    /// Records a tick result of one goal, as a sweep would.
    fn record(&mut self, w: &When, g: usize, kind: u8, f: u8) -> Result<(), TestCaseError> {
        self.now = next_time(self.now, None, w);
        let (goal, f) = (&self.goals[g], Fingerprint::new(f.to_string()));
        let prev = self.s.goal(goal).unwrap().clone();
        let wake = match kind {
            0 => after_tick_ok(f, true),
            1 => after_tick_ok(f, false),
            _ => after_tick_err(&prev, f, self.now, &self.cfg),
        };
        prop_assert_eq!(self.s.record_goal(self.now, goal, wake), Ok(()));
        Ok(())
    }

    /// An early-wake hint: never delays the sweep, never brings it closer than the gap
    /// after the last one, never bypasses a sweep-level backoff.
    fn wake_early(&mut self, w: &When) -> Result<(), TestCaseError> {
        self.now = next_time(self.now, None, w);
        let before = self.s.next_sweep_at();
        self.s.wake_early(self.now);
        let after = self.s.next_sweep_at();
        prop_assert_eq!(before.is_some(), after.is_some());
        if let (Some(b), Some(a)) = (before, after) {
            prop_assert!(a <= b, "a hint delayed the sweep");
            if self.s.sweep_errors() > 0 {
                prop_assert_eq!(a, b);
            }
            if let Some(last) = self.s.last_sweep_at() {
                prop_assert!(a >= last.saturating_add(EARLY_WAKE_GAP).min(b));
            }
        }
        Ok(())
    }

    fn stop(&mut self, w: &When) {
        self.now = next_time(self.now, None, w);
        self.s.request_stop(self.now);
        self.sweeping &= self.s.phase() == ServicePhase::Stopping;
    }

    /// What must hold after every step, whatever the step was.
    fn after_step(&mut self) -> Result<(), TestCaseError> {
        prop_assert!(drain(&mut self.s).is_empty(), "effects outside handle_timeout");
        prop_assert_eq!(self.s.check(), Ok(()));
        let stopped = self.s.phase() == ServicePhase::Stopped;
        prop_assert_eq!(self.s.poll_timeout().is_none(), stopped || self.s.is_sweeping());
        Ok(())
    }
}

/// Plays `ops` against a fresh scheduler, checking the driver's assertions at every step.
fn drive(cfg: WakeConfig, start: Instant, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let goals: Vec<Id> = ["g0", "g1", "g2"].map(id).to_vec();
    let s = ServiceScheduler::new(cfg, goals.clone(), BTreeMap::new(), start).unwrap();
    let mut d = Driver { cfg, goals, s, now: start, sweeping: false, written: None };
    for op in ops {
        match op {
            Op::Timeout(w) => d.timeout(&w)?,
            Op::Finish(w, ok, lost) => d.finish(&w, ok, lost)?,
            Op::Changed(w, back) => d.changed(&w, back)?,
            Op::Record(w, g, kind, f) => d.record(&w, g, kind, f)?,
            Op::WakeEarly(w) => d.wake_early(&w)?,
            Op::Stop(w) => d.stop(&w),
        }
        d.after_step()?;
    }
    Ok(())
}
