//! Fuzz bodies that live in the library, so cargo-fuzz targets are one-liners and the
//! committed corpus replays under `cargo test` on stable.

use crate::env::{ExitStatus, SpawnSpec};
use crate::harness::lifecycle::harness::Durable;
use crate::harness::lifecycle::{
    Harness, HarnessInput, HarnessSpec, LifecycleLimits, Readiness, RestartPolicy,
};
use crate::ids::Id;
use crate::time::{Duration, Instant};
use arbitrary::{Arbitrary, Result, Unstructured};

/// One fuzzed step against a single harness.
#[derive(Debug, Arbitrary)]
enum Op {
    Start,
    Stop,
    Restart,
    Halt,
    KillNow,
    FollowConfig(bool),
    /// Reports about the current run (`stale == false`) or an arbitrary one.
    Spawned {
        stale: bool,
        run: u8,
        pid: u16,
    },
    SpawnFailed {
        stale: bool,
        run: u8,
    },
    Exited {
        stale: bool,
        run: u8,
        code: i8,
        signalled: bool,
    },
    Ready {
        stale: bool,
        run: u8,
    },
    Watchdog {
        stale: bool,
        run: u8,
    },
    Unready {
        stale: bool,
        run: u8,
    },
    Reconfigure {
        policy: u8,
        argv_rev: u8,
        notify: bool,
    },
    /// Moves time forward by up to about 18 minutes and delivers a timeout.
    Advance {
        millis: u16,
        scale: u8,
    },
}

fn policy(n: u8) -> RestartPolicy {
    [
        RestartPolicy::Always,
        RestartPolicy::UnlessStopped,
        RestartPolicy::OnFailure,
        RestartPolicy::No,
    ][usize::from(n % 4)]
}

fn spec(policy_n: u8, rev: u8, notify: bool) -> HarnessSpec {
    HarnessSpec {
        spawn: SpawnSpec {
            argv: vec!["agent".into(), format!("--rev={rev}")],
            ..Default::default()
        },
        restart: policy(policy_n),
        readiness: if notify { Readiness::Notify } else { Readiness::None },
        // A notify harness is watched: not ready in 2 s, or silent for 1 s once ready, is hung.
        ready_timeout: notify.then(|| Duration::from_millis(2_000)),
        watchdog: notify.then(|| Duration::from_millis(1_000)),
        ..Default::default()
    }
}

fn limits(u: &mut Unstructured<'_>) -> Result<LifecycleLimits> {
    let flap_window = Duration::from_millis(u.int_in_range(1..=20_000)?);
    let restart_delay = Duration::from_millis(u.int_in_range(0..=5_000)?);
    Ok(LifecycleLimits {
        flap_threshold: u.int_in_range(1..=5)?,
        flap_window,
        restart_delay,
        restart_delay_max: restart_delay
            .saturating_add(Duration::from_millis(u.int_in_range(0..=60_000)?)),
        give_up_after: u.int_in_range(0..=6)?,
        healthy_run: flap_window
            .saturating_add(Duration::from_millis(u.int_in_range(0..=600_000)?)),
        stop_grace: Duration::from_millis(u.int_in_range(0..=20_000)?),
    })
}

/// Drives one harness with arbitrary inputs, including stale reports and late, early and
/// repeated timeouts, and checks its invariants after every input. Panics on a violation.
pub fn fuzz_lifecycle(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(limits) = limits(&mut u) else { return };
    let Ok(first) = u8::arbitrary(&mut u) else { return };
    let durable = Durable { enabled: first & 1 == 1, failed: first & 2 == 2, ..Durable::default() };
    let mut h = Harness::new(Id::new("fuzz").expect("valid"), spec(first >> 2, 0, false), durable);
    let mut now = Instant(0);
    let mut out = Vec::new();
    h.boot(now, &mut out);
    h.check(&limits).unwrap_or_else(|e| panic!("after boot: {e}"));
    for _ in 0..512 {
        let Ok(op) = Op::arbitrary(&mut u) else { break };
        out.clear();
        let input = to_input(&h, &op);
        match (input, op) {
            (Some(input), _) => h.handle(now, &limits, input, &mut out),
            (None, Op::Advance { millis, scale }) => {
                now = now.saturating_add(Duration::from_millis(u64::from(millis) << (scale % 5)));
                h.handle_timeout(now, &limits, &mut out);
                // A wake must consume everything due, or the driver would spin.
                if let Some(next) = h.poll_timeout(&limits) {
                    assert!(next > now, "deadline {next:?} still due after a wake at {now:?}");
                }
            }
            (None, _) => unreachable!("every other op is an input"),
        }
        h.check(&limits).unwrap_or_else(|e| panic!("{e}"));
    }
}

fn to_input(h: &Harness, op: &Op) -> Option<HarnessInput> {
    let pick = |stale: bool, run: u8| match h.current_run() {
        Some(current) if !stale => current,
        _ => u64::from(run),
    };
    Some(match *op {
        Op::Start => HarnessInput::Start,
        Op::Stop => HarnessInput::Stop,
        Op::Restart => HarnessInput::Restart,
        Op::Spawned { stale, run, pid } => {
            HarnessInput::Spawned { run: pick(stale, run), pid: u32::from(pid) + 2 }
        }
        Op::SpawnFailed { stale, run } => HarnessInput::SpawnFailed { run: pick(stale, run) },
        Op::Exited { stale, run, code, signalled } => {
            let status = if signalled {
                ExitStatus::Signal(i32::from(code))
            } else {
                ExitStatus::Code(i32::from(code))
            };
            HarnessInput::Exited { run: pick(stale, run), status }
        }
        Op::Ready { stale, run } => HarnessInput::Ready { run: pick(stale, run) },
        Op::Watchdog { stale, run } => HarnessInput::Watchdog { run: pick(stale, run) },
        Op::Unready { stale, run } => HarnessInput::Unready { run: pick(stale, run) },
        Op::Reconfigure { policy, argv_rev, notify } => {
            HarnessInput::Reconfigure(Box::new(spec(policy, argv_rev, notify)))
        }
        Op::Halt => HarnessInput::Halt,
        Op::FollowConfig(want) => HarnessInput::FollowConfig(want),
        Op::KillNow => HarnessInput::KillNow,
        Op::Advance { .. } => return None,
    })
}

/// An arbitrary work history (valid or not) with one inspection per attempt, for item `w`.
fn arbitrary_history(
    u: &mut Unstructured<'_>,
    w: &Id,
) -> (crate::work::WorkIntent, Vec<crate::work::WorkEvent>, Vec<crate::work::AttemptStatus>) {
    use crate::work::events::{EventKind, Trigger, WorkEvent, EVENT_VERSION};
    use crate::work::projection::{AttemptStatus, FailureClass};
    use crate::work::{intent::WorkflowRef, WorkIntent};
    use std::collections::BTreeMap;
    let intent = WorkIntent {
        schema_version: 2,
        id: w.clone(),
        title: "t".into(),
        objective: "o".into(),
        acceptance: Vec::new(),
        dependencies: Vec::new(),
        workflow: WorkflowRef { path: "/wf".into(), sha256: "0".repeat(64) },
        max_attempts: u.int_in_range(1..=5).unwrap_or(3),
        max_uncharged_attempts: u.int_in_range(1..=5).unwrap_or(2),
        created_at: crate::time::WallTime(0),
        sha256: None,
        strict_acceptance: false,
        source: None,
    };
    let mut events = Vec::new();
    let mut attempts = Vec::new();
    for seq in 1..=u.int_in_range(0..=30).unwrap_or(0) {
        let Ok(tag) = u8::arbitrary(u) else { break };
        // Mostly well-formed (the projection is reached), sometimes not (the validator refuses).
        let well_formed = tag & 0x80 == 0;
        let next = attempts.len() as u32 + 1;
        let attempt = if well_formed { next } else { u.int_in_range(0..=6).unwrap_or(1) };
        let run = if well_formed { next } else { u.int_in_range(0..=6).unwrap_or(0) };
        let run_id = Id::new(&format!("r{run}")).expect("valid");
        let kind = match tag % 7 {
            _ if seq == 1 && well_formed => EventKind::Created { intent_sha256: None },
            0 => EventKind::Created { intent_sha256: None },
            1 | 2 => EventKind::AttemptStarted {
                run_id,
                attempt,
                trigger: Trigger::Initial,
                prerequisites: BTreeMap::new(),
            },
            3 => EventKind::AttemptResumed { run_id, attempt },
            4 => EventKind::Accepted {
                run_id,
                attempt,
                proof_sha256: String::new(),
                dispositions: Vec::new(),
            },
            5 => EventKind::Cancelled,
            _ => EventKind::Reopened { findings: Vec::new(), feedback: None },
        };
        if matches!(kind, EventKind::AttemptStarted { .. }) {
            let status = match tag % 6 {
                0 => AttemptStatus::Lost,
                1 => AttemptStatus::Succeeded,
                2 => AttemptStatus::Parked {
                    approval_id: "a".into(),
                    decided: tag.is_multiple_of(2),
                },
                3 => {
                    AttemptStatus::Failed { class: Some(FailureClass::Upstream), decision_id: None }
                }
                4 => AttemptStatus::Failed {
                    class: Some(FailureClass::Decision),
                    decision_id: Some("d".into()),
                },
                _ => AttemptStatus::Failed { class: None, decision_id: None },
            };
            attempts.push(status);
        }
        let ts = crate::time::WallTime(seq as i64);
        events.push(WorkEvent {
            schema_version: EVENT_VERSION,
            work_id: w.clone(),
            seq,
            ts,
            actor: "f".into(),
            reason: None,
            kind,
        });
    }
    (intent, events, attempts)
}

/// Arbitrary work histories (valid or not) and attempt inspections: the history validator
/// never panics, and every history it accepts projects without panicking to a result whose
/// budgets add up and whose `succeeded` follows only from acceptance.
pub fn fuzz_work_projection(data: &[u8]) {
    use crate::work::events::{validate_history, EventKind};
    use crate::work::projection::{project, Inputs, Prerequisite, WorkState};
    use std::collections::BTreeMap;
    let mut u = Unstructured::new(data);
    let w = Id::new("w").expect("valid");
    let (intent, events, attempts) = arbitrary_history(&mut u, &w);
    if validate_history(&w, &events).is_err() {
        return;
    }
    let dep = Prerequisite { state: WorkState::Succeeded, accepted_seq: Some(1) };
    let prerequisites = BTreeMap::from([(Id::new("d").expect("valid"), Some(dep))]);
    let inputs = Inputs::unleased(&intent, &events, &attempts, &prerequisites);
    let p = project(&inputs);
    assert!(p.charged_attempts <= p.attempts_used);
    assert_eq!(p.attempts_remaining, intent.max_attempts.saturating_sub(p.charged_attempts));
    let accepted_last = events
        .iter()
        .rev()
        .find(|e| {
            matches!(
                e.kind,
                EventKind::Accepted { .. } | EventKind::Cancelled | EventKind::Reopened { .. }
            )
        })
        .is_some_and(|e| matches!(e.kind, EventKind::Accepted { .. }));
    assert_eq!(p.state == WorkState::Succeeded, accepted_last);
}

/// A goal over a chain of work items with arbitrary histories (each depending on the one
/// before), arbitrary automation and limits: the goal projection never panics; it succeeds
/// exactly when its root is accepted; what a cycle dispatches respects parallelism, the
/// attempt ceiling and the automation flags, and is offered only from `ready/run`; a
/// `ready/run` goal always has something to do; the fingerprints ignore reasons.
pub fn fuzz_goal_projection(data: &[u8]) {
    use crate::goal::{
        acceptances, candidates, goal_fingerprint, project_goal, Automation, DispatchAction,
        GoalIntent, GoalLimits, GoalNext, GoalState, GraphItem,
    };
    use crate::work::events::validate_history;
    use crate::work::projection::{project, Inputs, Prerequisite, WorkState};
    use std::collections::BTreeMap;
    let mut u = Unstructured::new(data);
    let flags = u8::arbitrary(&mut u).unwrap_or(0);
    let automation = Automation {
        accept_passing_proof: flags & 1 != 0,
        resume_approved: flags & 2 != 0,
        retry_blocked: flags & 4 != 0,
        land_accepted: flags & 8 != 0,
    };
    let limits = GoalLimits {
        max_parallel_work: u.int_in_range(1..=4).unwrap_or(1),
        max_total_attempts: u.int_in_range(1..=12).unwrap_or(5),
        ..GoalLimits::default()
    };
    let mut items: Vec<GraphItem> = Vec::new();
    for n in 0..u.int_in_range(1..=6).unwrap_or(1) {
        let w = Id::new(&format!("w{n}")).expect("valid");
        let (intent, events, attempts) = arbitrary_history(&mut u, &w);
        if validate_history(&w, &events).is_err() {
            continue;
        }
        let mut prerequisites = BTreeMap::new();
        if let Some(before) = items.last() {
            let p = &before.projection;
            let view = Prerequisite { state: p.state, accepted_seq: p.accepted_seq };
            prerequisites.insert(before.id.clone(), Some(view));
        }
        let inputs = Inputs::unleased(&intent, &events, &attempts, &prerequisites);
        items.push(GraphItem { id: w, projection: project(&inputs) });
    }
    let Some(root) = items.last().map(|i| i.id.clone()) else { return };
    let team = crate::work::team::Team::new();
    let g = Id::new("g").expect("valid");
    let t = crate::time::WallTime(0);
    let intent = GoalIntent::new(g, "g".into(), Some(root), team, limits, automation, t)
        .expect("a valid goal");
    let p = project_goal(&intent, &items, &[], false);
    let root_accepted = items.last().is_some_and(|i| i.projection.state == WorkState::Succeeded);
    assert_eq!(p.state == GoalState::Succeeded, root_accepted);
    let picked = candidates(&intent, &items, &p);
    let accepts = acceptances(&intent, &items);
    assert!(picked.len() <= limits.max_parallel_work as usize);
    let charged = picked.iter().filter(|c| c.1 != DispatchAction::Resume).count() as u32;
    assert!(charged <= p.attempts_remaining);
    let ready = (p.state, p.next_action) == (GoalState::Ready, GoalNext::Run);
    assert!(picked.is_empty() || ready, "dispatch only from ready/run");
    assert!(!ready || !picked.is_empty() || !accepts.is_empty(), "ready means work: {}", p.reason);
    assert!(automation.accept_passing_proof || accepts.is_empty());
    for (id, action) in &picked {
        let q = &items.iter().find(|i| &i.id == id).expect("picked from the graph").projection;
        match action {
            DispatchAction::Run => assert_eq!(q.state, WorkState::Ready),
            DispatchAction::Resume => assert!(automation.resume_approved),
            DispatchAction::Retry => assert!(automation.retry_blocked),
        }
    }
    let mut reworded = items.clone();
    for i in &mut reworded {
        i.projection.reason.push_str(" (said again)");
    }
    let q = crate::goal::GoalProjection { reason: String::new(), ..p.clone() };
    assert_eq!(goal_fingerprint(&p, &items), goal_fingerprint(&q, &reworded));
}

/// One fuzzed step against the service's scheduler and watcher.
#[derive(Debug, Arbitrary)]
enum ServiceOp {
    /// Moves time forward (up to about 65 s) and wakes both machines.
    Advance(u16),
    /// Runs a sweep over the goals, if one was handed out: each goal read with this
    /// fingerprint byte and readiness, ticked (ok, no progress, or failed) when decided.
    Sweep { fingerprints: [u8; 3], ready: [bool; 3], outcome: [u8; 3] },
    /// A file-change hint.
    WakeEarly,
    /// A stop request, with a drain deadline in ms or none.
    Stop(Option<u16>),
    /// A tick starts or ends (what a forced stop would terminate).
    Ticking(bool),
    /// A crash: both machines start again from the records last persisted.
    Restart,
}

/// Drives `wake::ServiceScheduler`, the sweep decisions and `watch::Watcher` with arbitrary
/// times, reads and outcomes, and checks after every step: both machines' invariants, no tick
/// of an unchanged `awaiting_change` goal, beats never closer than the interval, and a forced
/// stop only after a drain. Panics on a violation.
pub fn fuzz_service(data: &[u8]) {
    use crate::service::wake::{
        after_tick_err, after_tick_ok, decide, Fingerprint, ServiceEffect, ServiceScheduler,
        SweepDecision, WakeConfig, WakeState,
    };
    use crate::service::watch::{WatchEffect, Watcher};
    let mut u = Unstructured::new(data);
    let cfg = WakeConfig {
        wake_interval: Duration::from_millis(u.int_in_range(1..=10_000).unwrap_or(1_000)),
        heartbeat_interval: Duration::from_millis(u.int_in_range(1..=5_000).unwrap_or(200)),
        error_backoff_base: Duration::from_millis(u.int_in_range(1..=5_000).unwrap_or(500)),
        error_backoff_max: Duration::from_millis(u.int_in_range(5_000..=60_000).unwrap_or(8_000)),
    };
    let goals: Vec<Id> = ["a", "b", "c"].iter().map(|g| Id::new(g).expect("valid")).collect();
    let mut now = Instant(0);
    let mut persisted = std::collections::BTreeMap::new();
    let new = |prior, now| ServiceScheduler::new(cfg, goals.clone(), prior, now).expect("valid");
    let mut sched = new(persisted.clone(), now);
    let mut watch = Watcher::new(cfg.heartbeat_interval, now);
    let (mut last_beat, mut drained, mut sweep_due) = (None::<Instant>, false, false);
    // Exhausted input reads as zeros forever: stop when it runs out.
    while !u.is_empty() {
        let Ok(op) = ServiceOp::arbitrary(&mut u) else { break };
        match op {
            ServiceOp::Advance(ms) => {
                now = now.saturating_add(Duration::from_millis(u64::from(ms)));
                sched.handle_timeout(now);
                watch.handle_timeout(now);
            }
            ServiceOp::Sweep { fingerprints, ready, outcome } if sweep_due => {
                for (i, goal) in goals.iter().enumerate() {
                    let prev = sched.goal(goal).expect("enrolled").clone();
                    let fp = Fingerprint::new([fingerprints[i]]);
                    let wake = match decide(&prev, &fp, ready[i], now) {
                        SweepDecision::Skip(_) => continue,
                        SweepDecision::BecomeAwaiting(w) => w,
                        SweepDecision::Tick => {
                            let unchanged = prev.observed.as_ref() == Some(&fp);
                            assert!(
                                !(prev.state == WakeState::AwaitingChange && unchanged),
                                "an unchanged awaiting_change goal was ticked"
                            );
                            match outcome[i] % 3 {
                                0 => after_tick_ok(fp, true),
                                1 => after_tick_ok(fp, false),
                                _ => after_tick_err(&prev, fp, now, &cfg),
                            }
                        }
                    };
                    sched.record_goal(now, goal, wake).expect("a consistent record");
                }
                sched.sweep_finished(now, Ok(()));
                sweep_due = false;
            }
            ServiceOp::Sweep { .. } => {}
            ServiceOp::WakeEarly => sched.wake_early(now),
            ServiceOp::Stop(ms) => {
                watch.stop_requested(now, ms.map(|m| Duration::from_millis(u64::from(m))));
                sched.request_stop(now);
            }
            ServiceOp::Ticking(on) => watch.set_ticking(on),
            ServiceOp::Restart => {
                sched = new(persisted.clone(), now);
                watch = Watcher::new(cfg.heartbeat_interval, now);
                (last_beat, drained, sweep_due) = (None, false, false);
            }
        }
        while let Some(effect) = sched.poll_effect() {
            match effect {
                ServiceEffect::Sweep => sweep_due = true,
                ServiceEffect::WriteHints => persisted = sched.wakes(),
            }
        }
        while let Some(effect) = watch.poll_effect() {
            match effect {
                WatchEffect::Beat => {
                    if let Some(last) = last_beat {
                        assert!(
                            now.saturating_since(last) >= cfg.heartbeat_interval,
                            "beats too close"
                        );
                    }
                    last_beat = Some(now);
                }
                WatchEffect::BeginDrain => drained = true,
                WatchEffect::ForceStop => assert!(drained, "a forced stop without a drain"),
            }
        }
        sched.check().expect("scheduler invariants");
        watch.check().expect("watcher invariants");
    }
}

/// Arbitrary inputs and wakes against one run segment's machine (`work::segment`), checking
/// after each: a wake it asks for is never already due once handled (a driver cannot spin),
/// it is over only once its workflow exited, its end exists exactly after the exit, an end
/// after a timeout says so, and a cancel is carried out once.
#[doc(hidden)]
pub fn fuzz_segment(data: &[u8]) {
    use crate::work::run::ProcessEnd;
    use crate::work::segment::{Segment, SegmentEffect, SegmentInput};
    let mut bytes = data.iter().copied();
    let timeout = Duration::from_millis(u64::from(bytes.next().unwrap_or(0)) * 100);
    let mut now = Instant(1_000_000_000);
    let mut s = Segment::new(now, timeout);
    let (mut exited, mut terms, mut timed_out_records) = (false, 0, 0);
    while let Some(b) = bytes.next() {
        let step = Duration::from_millis(u64::from(bytes.next().unwrap_or(0)) * 50);
        now = now.saturating_add(step);
        match b % 8 {
            0 => {
                let (code, signal) =
                    if b & 8 == 0 { (Some(i32::from(b >> 4)), None) } else { (None, Some(9)) };
                s.handle(now, SegmentInput::Exited { code, signal });
                exited = true;
            }
            1 => s.handle(now, SegmentInput::OutputEnded),
            2 => s.handle(now, SegmentInput::Cancelled { by: "ana".into() }),
            3 => s.handle(
                now,
                SegmentInput::Interrupting { by: "stop".into(), has_result: b & 8 != 0 },
            ),
            4 => s.handle(now, SegmentInput::PolicyStopped),
            _ => {
                if let Some(wake) = s.poll_timeout() {
                    now = now.max(wake);
                }
                s.handle_timeout(now);
            }
        }
        while let Some(effect) = s.poll_effect() {
            match effect {
                SegmentEffect::Term(_) => terms += 1,
                SegmentEffect::Record(r) if r["event"] == "run.timed_out" => timed_out_records += 1,
                _ => {}
            }
        }
        assert!(terms <= 1, "a cancel's TERM is sent once");
        assert!(timed_out_records <= 1, "the timeout is recorded once");
        if let Some(wake) = s.poll_timeout() {
            s.handle_timeout(now);
            while s.poll_effect().is_some() {}
            let again = s.poll_timeout();
            assert!(again.is_none_or(|w| w > now) || wake > now, "a driver would spin at {now:?}");
        }
        assert_eq!(s.end().is_some(), exited, "an end exists exactly once the workflow exited");
        assert!(!s.over(now, 0) || exited, "over before the workflow exited");
        if let Some(ProcessEnd::Exited { timed_out, .. }) = s.end() {
            assert_eq!(timed_out, timed_out_records == 1, "the end says whether it timed out");
        }
    }
}

/// Fuzz body: arbitrary bytes as what an agent program writes, its first byte choosing the
/// dialect, each line through the reader, the watchdog's view and the progress shown, and
/// (for ACP) the client, which answers every permission, and each line as words that may
/// name a usage limit's reset; never panics, the client only ever writes JSON-RPC messages,
/// an answered permission is written at once, and no reset is believed past every window.
pub fn fuzz_agent_output(data: &[u8]) {
    use crate::work::acp::{billing_refusal, judge, AcpStep, Client};
    use crate::work::adapter::{self, Activity, Kind};
    use serde_json::Value;
    let Some((&first, rest)) = data.split_first() else { return };
    let kind = [Kind::Text, Kind::ClaudeCode, Kind::Codex, Kind::Acp][usize::from(first % 4)];
    let text = String::from_utf8_lossy(rest);
    let _ = adapter::read(kind, &text);
    let mut activity = Activity::default();
    let mut client = Client::start("p", "/w", (first & 4 == 4).then_some("s"), Some("m"), None);
    // 2026-12-08 10:00 UTC, moved by the first byte so day and year ends are reached.
    let now = crate::time::WallTime(1_796_724_000_000 + i64::from(first) * 3_517_000);
    for line in text.lines() {
        activity.observe(kind, line);
        let _ = adapter::progress(kind, line);
        if let Some(at) = crate::work::usage_limit::resets_at(line, now, first & 32 == 32) {
            assert!(at.0 - now.0 <= 45 * 86_400_000, "a reset past every window: {line}");
        }
        let _ = billing_refusal(line, false);
        if let AcpStep::Permission(ask) = client.handle(line) {
            let _ = judge(None, first & 8 == 8, &ask);
            client.permit(&ask, first & 16 == 16);
            let answer = client.poll_line().expect("an answered permission is written");
            assert!(answer.contains("\"result\""), "{answer}");
        }
        while let Some(out) = client.poll_line() {
            let msg: Value = serde_json::from_str(&out).expect("the client writes JSON");
            assert_eq!(msg["jsonrpc"], "2.0", "{out}");
        }
    }
}

/// Arbitrary bytes as a cluster's configuration (JSON) and as `sinfo`'s node list: parsing
/// never panics, a configuration that checks round-trips, every node parsed is named and
/// listed once, and the pre-flight over any of it fails only with a line that says so.
pub fn fuzz_cluster_config(data: &[u8]) {
    use crate::work::cluster::{parse_nodes, preflight, ClusterSpec, Survey};
    if let Ok(spec) = serde_json::from_slice::<ClusterSpec>(data) {
        if spec.check().is_ok() {
            let again: ClusterSpec =
                serde_json::from_str(&serde_json::to_string(&spec).expect("serializes"))
                    .expect("round-trips");
            assert_eq!(again, spec);
        }
    }
    let text = String::from_utf8_lossy(data);
    if let Ok(job) = crate::work::cluster::parse_job(&text) {
        // Every state has a verdict; a restarted job is never a plain end.
        let verdict = crate::work::cluster::judge_job(&job, false);
        if job.restarts > 0 {
            assert!(matches!(verdict, crate::work::cluster::JobVerdict::Fault(_)));
        }
        // Whose cancel it was changes the verdict of a cancelled job alone.
        let ours = crate::work::cluster::judge_job(&job, true);
        if job.state != "CANCELLED" || job.restarts > 0 {
            assert_eq!(ours, verdict);
        }
    }
    if let Ok(nodes) = parse_nodes(&text, None) {
        for (i, n) in nodes.iter().enumerate() {
            assert!(!n.name.is_empty() && !n.state.is_empty());
            assert!(nodes[..i].iter().all(|m| m.name != n.name), "listed once");
        }
        let up = nodes.iter().filter(|n| n.up()).count();
        let survey = Survey { nodes: Some(Ok(nodes)), ..Survey::default() };
        let checks = preflight("c", "v", &survey);
        assert!(!checks.is_empty());
        // Nothing was probed: with a node up the verdict fails on it; with none, on the engine.
        assert!(!checks.iter().all(|c| c.ok), "{up} up: {checks:?}");
    }
}

/// Arbitrary lines as what a node or a coordinator says over a remote segment's step: each
/// parses or is refused with the line (cut) and why; a message parsed writes back as a line
/// that parses to the same message; hexadecimal round-trips.
pub fn fuzz_remote_wire(data: &[u8]) {
    use crate::work::remote::{from_hex, line, parse_from_node, parse_to_node, to_hex};
    let text = String::from_utf8_lossy(data);
    for l in text.lines() {
        match parse_from_node(l) {
            Ok(said) => {
                let again = String::from_utf8(line(&said)).expect("JSON is text");
                assert_eq!(parse_from_node(again.trim_end()).expect("written, so read"), said);
            }
            Err(e) => assert!(e.text.chars().count() <= 200 && !e.why.is_empty()),
        }
        if let Ok(told) = parse_to_node(l) {
            let again = String::from_utf8(line(&told)).expect("JSON is text");
            assert_eq!(parse_to_node(again.trim_end()).expect("written, so read"), told);
        }
    }
    assert_eq!(from_hex(&to_hex(data)).as_deref(), Some(data));
    if let Some(bytes) = from_hex(&text) {
        assert_eq!(to_hex(&bytes), text.to_ascii_lowercase());
    }
}

/// Arbitrary bytes as `git diff-tree -z --raw` output, which harn reads from the person's
/// repository about a run's work: each parses or is refused with its offset; what parses
/// holds non-empty paths, a records path is found wherever it lies, and what waits for a
/// person is a path of the change.
pub fn fuzz_candidate(data: &[u8]) {
    use crate::work::candidate::{guarded, parse_raw, records_touched};
    match parse_raw(data) {
        Ok(changed) => {
            assert!(changed.iter().all(|c| !c.path.is_empty()));
            let touched = records_touched(changed.iter().map(|c| c.path.as_str()));
            assert!(touched.iter().all(|p| p.split('/').any(|c| c == ".harnery")));
            let text = String::from_utf8_lossy(data).into_owned();
            for (path, _) in guarded(&changed, |_| Some(text.clone())) {
                assert!(changed.iter().any(|c| c.path == path && c.new_mode != 0));
            }
        }
        Err(e) => assert!(e.at <= data.len() && !e.why.is_empty()),
    }
}

/// Arbitrary text as a `notify` configuration and as outbox lines: the channels parse or are
/// refused naming a field under `notify`; the outbox folds whatever lines parse, a sent
/// delivery is never due, and nothing is due twice.
pub fn fuzz_notify(data: &[u8]) {
    use crate::notify::outbox::{Outbox, OutboxRecord};
    let text = String::from_utf8_lossy(data);
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) {
        match crate::notify::parse_channels(&value) {
            Ok(channels) => {
                for c in &channels {
                    assert_eq!(c.id().len(), 16);
                }
            }
            Err(e) => assert!(e.field.starts_with("notify"), "{e}"),
        }
    }
    let records: Vec<OutboxRecord> =
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let outbox = Outbox::fold(&records);
    let channels = crate::notify::parse_channels(&serde_json::json!([
        {"webhook": "http://127.0.0.1:9/a"}, {"command": ["true"]}
    ]))
    .expect("valid channels");
    let due = outbox.due(&channels, crate::time::WallTime(i64::MAX));
    let mut seen = std::collections::BTreeSet::new();
    for d in &due {
        let delivery = &outbox.deliveries[&(d.notice.key.clone(), d.channel.id())];
        assert!(delivery.sent_at.is_none(), "a sent delivery is never due");
        assert!(seen.insert((d.notice.key.clone(), d.channel.id())), "due once");
    }
    assert_eq!(outbox.order.len(), outbox.notices.len());
}

/// Arbitrary text as a request to `harn web`: its lines are the method, the path, the
/// `Host`, `Origin`, `Sec-Fetch-Site` and `Cookie` headers (an empty line: none) and whether
/// a run asks. Whatever it holds, the door answers a change only from this server's own
/// pages, with the session's cookie, from outside every run; and a path names a page or an
/// action only through ids that are ids.
pub fn fuzz_web(data: &[u8]) {
    use crate::web::route::{route, Route};
    use crate::web::{Admission, Asked, Door, Peer, Session};
    let text = String::from_utf8_lossy(data);
    let lines: Vec<&str> = text.split('\n').collect();
    let line = |n: usize| lines.get(n).copied().unwrap_or("");
    let (method, path, host, origin, site, cookie, ran) =
        (line(0), line(1), line(2), line(3), line(4), line(5), line(6));
    let some = |s: &str| -> Option<String> { (!s.is_empty()).then(|| s.to_owned()) };
    let (h, o, f, c) = (some(host), some(origin), some(site), some(cookie));
    let mut door = Door::new("127.0.0.1:8080", &["localhost:8080".into()], "k".repeat(32));
    let session = Session { id: "s".repeat(32), token: "t".repeat(32) };
    assert!(door.log_in(&"k".repeat(32), session).is_ok());
    let peer = if ran.is_empty() { Peer::Outside } else { Peer::Contained(ran.to_owned()) };
    let asked = Asked {
        method,
        path,
        host: h.as_deref(),
        origin: o.as_deref(),
        fetch_site: f.as_deref(),
        cookie: c.as_deref(),
        peer: peer.clone(),
    };
    let ours =
        |h: &str| ["127.0.0.1:8080", "localhost:8080"].contains(&h.to_ascii_lowercase().as_str());
    match door.admit(&asked) {
        Admission::Refused { status, .. } => assert!(status >= 400),
        admitted => {
            assert_eq!(peer, Peer::Outside, "a run is never answered");
            assert!(ours(host), "answered under a foreign Host {host:?}");
            if let Admission::Change(at) = admitted {
                assert_eq!(method, "POST");
                assert_eq!(
                    origin.to_ascii_lowercase(),
                    format!("http://{}", host.to_ascii_lowercase())
                );
                assert!(site.is_empty() || site == "same-origin");
                assert!(cookie.contains(&door.session(at).expect("a session").id));
                assert!(!door.token_ok(at, "forged"));
            }
        }
    }
    if let Some(r) = route(method, path) {
        let read = matches!(method, "GET" | "HEAD");
        let acts = matches!(r, Route::ItemAction(..) | Route::Rule(..) | Route::Restart(..));
        assert_eq!(read, !acts, "{method} {path} names {r:?}");
        assert!(!path.contains(".."), "{path} names {r:?}");
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    /// One property per fuzz body: arbitrary bytes of up to the given length keep its
    /// invariants (the body panics when one breaks).
    macro_rules! every_body_holds {
        ($($name:ident: $body:ident up to $len:literal;)*) => {
            proptest! {
                #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]
                $(
                    #[test]
                    fn $name(data in proptest::collection::vec(any::<u8>(), 0..$len)) {
                        super::$body(&data);
                    }
                )*
            }
        };
    }

    every_body_holds! {
        arbitrary_input_sequences_keep_the_invariants: fuzz_lifecycle up to 2048;
        arbitrary_work_histories_project_consistently: fuzz_work_projection up to 512;
        arbitrary_service_schedules_keep_the_invariants: fuzz_service up to 1024;
        arbitrary_segments_keep_the_invariants: fuzz_segment up to 512;
        arbitrary_goals_project_and_dispatch_consistently: fuzz_goal_projection up to 1024;
        arbitrary_cluster_configs_and_node_lists_parse_safely: fuzz_cluster_config up to 512;
        arbitrary_wire_lines_parse_and_round_trip: fuzz_remote_wire up to 512;
        arbitrary_channels_and_outboxes_keep_deliveries_once: fuzz_notify up to 512;
        arbitrary_diff_tree_output_parses_or_is_refused: fuzz_candidate up to 512;
    }
}
