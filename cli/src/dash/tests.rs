//! Each page drawn from fixed snapshots into ratatui's `TestBackend`, compared with the text
//! committed under `snapshots/` (`UPDATE_SNAPSHOTS=1 cargo test -p harn dash` rewrites them).

use super::{once, Page, Snapshot, View};
use crate::dash::readers::{GoalRow, GoalSummary, ServiceView, WorkRow};
use harn_core::goal::{GoalNext, GoalState};
use harn_core::ids::Id;
use harn_core::service::wake::{Fingerprint, GoalWake, WakeState};
use harn_core::service::{
    EngineOptions, Liveness, RuntimeHints, ServiceConfig, ServiceState, ServiceStatus,
    SERVICE_VERSION,
};
use harn_core::time::{Instant, WallTime};
use harn_core::work::{NextAction, WorkState};
use serde_json::json;

const NOW: WallTime = WallTime(1_764_500_000_000);

fn id(s: &str) -> Id {
    Id::new(s).unwrap()
}

fn service() -> ServiceView {
    let config = ServiceConfig {
        schema_version: SERVICE_VERSION,
        goal_ids: vec![id("ship-login"), id("fix-flaky-ci")],
        wake_interval_ms: 5_000,
        heartbeat_interval_ms: 2_000,
        error_backoff_base_ms: 2_000,
        error_backoff_max_ms: 300_000,
        engine: EngineOptions { timeout_secs: 3_600, ..EngineOptions::default() },
        created_at: WallTime(NOW.0 - 600_000),
    };
    let status = ServiceStatus {
        schema_version: SERVICE_VERSION,
        pid: 4242,
        state: ServiceState::Running,
        started_at: WallTime(NOW.0 - 600_000),
        heartbeat_at: WallTime(NOW.0 - 1_200),
        config_created_at: config.created_at,
        sweep_count: 118,
        active_goal_id: Some(id("ship-login")),
        last_sweep_at: Some(WallTime(NOW.0 - 4_000)),
        last_sweep_ms: Some(3),
        last_error: None,
        stopped_at: None,
        heartbeat_boot: None,
    };
    let mut hints = RuntimeHints {
        config_created_at: config.created_at,
        written_at: Some((WallTime(NOW.0 - 4_000), Instant(50_000_000_000))),
        ..RuntimeHints::default()
    };
    hints.goals.insert(id("ship-login"), GoalWake::default());
    hints.goals.insert(
        id("fix-flaky-ci"),
        GoalWake {
            state: WakeState::Backoff,
            consecutive_errors: 3,
            observed: Some(Fingerprint::new("x")),
            next_wake_at: Some(Instant(62_000_000_000)),
        },
    );
    hints.last_outcome.insert(id("ship-login"), "dispatched: work-2 started".into());
    hints.last_outcome.insert(id("fix-flaky-ci"), "error: workflow not found".into());
    ServiceView {
        liveness: Liveness::Running,
        config: Some(config),
        status: Some(status),
        hints: Some(hints),
        problems: Vec::new(),
    }
}

fn goal(
    name: &str,
    state: GoalState,
    next: GoalNext,
    enrolled: bool,
    wake: Option<GoalWake>,
) -> GoalRow {
    GoalRow {
        id: id(name),
        read: Ok(GoalSummary {
            state,
            next_action: next,
            reason: "because".into(),
            work_items: 2,
            attempts_used: 1,
            attempts_remaining: 5,
        }),
        enrolled,
        wake,
        last_outcome: None,
    }
}

fn snapshot() -> Snapshot {
    let service = service();
    let hints = service.hints.clone().unwrap();
    let mut ship = goal(
        "ship-login",
        GoalState::Running,
        GoalNext::WaitForRun,
        true,
        hints.goals.get(&id("ship-login")).cloned(),
    );
    ship.last_outcome = hints.last_outcome.get(&id("ship-login")).cloned();
    let mut flaky = goal(
        "fix-flaky-ci",
        GoalState::Ready,
        GoalNext::Run,
        true,
        hints.goals.get(&id("fix-flaky-ci")).cloned(),
    );
    flaky.last_outcome = hints.last_outcome.get(&id("fix-flaky-ci")).cloned();
    let broken = GoalRow {
        id: id("old-goal"),
        read: Err(".harnery/supervisors/old-goal/events.jsonl line 3: bad checksum".into()),
        enrolled: false,
        wake: None,
        last_outcome: None,
    };
    let done = goal("docs-pass", GoalState::Succeeded, GoalNext::None, false, None);
    let work = vec![
        WorkRow {
            id: id("work-1"),
            title: "Add the login form".into(),
            state: WorkState::Succeeded,
            next_action: NextAction::None,
            charged: 1,
            max_attempts: 3,
            uncharged: 0,
            cost_micro_usd: Some(412_300),
            running: None,
        },
        WorkRow {
            id: id("work-2"),
            title: "Wire the session cookie".into(),
            state: WorkState::Running,
            next_action: NextAction::WaitForRun,
            charged: 1,
            max_attempts: 3,
            uncharged: 2,
            cost_micro_usd: None,
            running: Some(crate::dash::readers::RunningNow {
                run_id: id("wf-2026-12-01-10-00-00-000-abc123"),
                started_at: harn_core::time::WallTime(NOW.0 - 75_000),
                call: Some(("implement".into(), "claude-code".into())),
            }),
        },
    ];
    let harnesses = json!({
        "daemon": { "running": true, "pid": 77, "containment": "process-group", "draining": false },
        "harnesses": [
            { "name": "agent-a", "state": "running", "enabled": true, "restarts": 0, "pid": 900,
              "uptime_ms": 3_720_000, "ready": true, "readiness": "file", "last_exit": null, "config_changed": true },
            { "name": "crashy", "state": "running", "enabled": true, "restarts": 3, "pid": 912,
              "uptime_ms": 400, "consecutive_failures": 3, "ready": true, "readiness": "none",
              "last_exit": { "code": 2, "forced": false } },
            { "name": "watcher", "state": "restarting", "enabled": true, "restarts": 4, "pid": null,
              "next_retry_in_ms": 8000, "last_exit": { "code": 1, "forced": false } },
            { "name": "flaky", "state": "failed", "enabled": true, "restarts": 9, "pid": null,
              "last_exit": { "signal": 9, "forced": true } }
        ]
    });
    Snapshot {
        root: "/repo".into(),
        taken_at: NOW,
        service,
        goals: Ok((vec![ship, flaky, broken, done], Vec::new())),
        work: Ok((work, vec!["work-9: .harnery/work/work-9/intent.json: not JSON".into()])),
        harnesses: Ok(harnesses),
        approvals: Ok((
            vec![
                crate::dash::readers::ApprovalRow {
                    id: id("wf-2026-12-01-10-00-00-000-abc123-p1"),
                    status: "pending".into(),
                    work_id: "work-2".into(),
                    addressee: "ana".into(),
                    asks: "authorize push main".into(),
                },
                crate::dash::readers::ApprovalRow {
                    id: id("wf-2026-11-30-09-00-00-000-def456-p1"),
                    status: "approved".into(),
                    work_id: "work-1".into(),
                    addressee: "ana".into(),
                    asks: "agent call to claude-code (opus, 1200 bytes)".into(),
                },
            ],
            Vec::new(),
        )),
        detail: None,
    }
}

/// Compares `text` with `snapshots/<name>.txt`, or rewrites it when asked to.
fn assert_snapshot(name: &str, text: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/dash/snapshots")
        .join(format!("{name}.txt"));
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_SNAPSHOTS=1 writes it)", path.display()));
    assert_eq!(text, expected, "page {name} drew differently from {}", path.display());
}

#[test]
fn the_goals_page_shows_the_service_and_each_goal() {
    assert_snapshot("goals", &once(&snapshot(), &View::new(Page::Goals), 110, 14));
}

#[test]
fn the_work_page_counts_states_and_uncharged_attempts() {
    assert_snapshot("work", &once(&snapshot(), &View::new(Page::Work), 110, 10));
}

#[test]
fn the_harnesses_page_shows_state_glyphs_and_last_exits() {
    assert_snapshot("harnesses", &once(&snapshot(), &View::new(Page::Harnesses), 110, 8));
}

#[test]
fn unreadable_sources_degrade_to_a_message() {
    let mut s = snapshot();
    s.service = ServiceView {
        liveness: Liveness::Stale,
        problems: vec![".harnery/supervisor-service/status.json: not JSON".into()],
        ..service()
    };
    s.goals = Err(".harnery/supervisors: permission denied".into());
    s.harnesses = Err("control socket: timed out".into());
    assert_snapshot("unreadable-goals", &once(&s, &View::new(Page::Goals), 90, 8));
    assert_snapshot("unreadable-harnesses", &once(&s, &View::new(Page::Harnesses), 90, 5));
}

#[test]
fn an_empty_root_says_how_to_begin() {
    let s = Snapshot {
        root: "/repo".into(),
        taken_at: NOW,
        service: ServiceView {
            liveness: Liveness::Unconfigured,
            config: None,
            status: None,
            hints: None,
            problems: vec![],
        },
        goals: Ok((vec![], Vec::new())),
        work: Ok((vec![], vec![])),
        harnesses: Ok(json!({ "daemon": { "running": false }, "harnesses": [] })),
        approvals: Ok((vec![], vec![])),
        detail: None,
    };
    let text: String = [Page::Goals, Page::Work, Page::Harnesses, Page::Approvals]
        .into_iter()
        .map(|p| once(&s, &View::new(p), 80, 6))
        .collect();
    assert_snapshot("empty", &text);
}

#[test]
fn pages_cycle_both_ways_and_digits_pick_one() {
    assert_eq!(Page::Goals.next(), Page::Work);
    assert_eq!(Page::Goals.previous(), Page::Approvals);
    assert_eq!(Page::Approvals.next(), Page::Goals);
    assert_eq!(Page::from_key('3'), Some(Page::Harnesses));
    assert_eq!(Page::from_key('0'), None);
    assert_eq!(Page::from_key('4'), Some(Page::Approvals));
    assert_eq!(Page::from_key('5'), None);
}

#[test]
fn the_approvals_page_lists_pending_ones_first_with_what_they_ask() {
    assert_snapshot("approvals", &once(&snapshot(), &View::new(Page::Approvals), 110, 8));
}

#[test]
fn enter_opens_a_detail_and_question_mark_shows_the_keys() {
    let mut s = snapshot();
    s.detail = Some((
        crate::dash::readers::Focus::Work(id("work-2")),
        Ok(crate::dash::readers::Detail {
            title: "work work-2 — Wire the session cookie".into(),
            sections: vec![
                ("state".into(), vec!["running (next: wait_for_run) — run wf-… is running".into()]),
                (
                    "attempts and runs".into(),
                    vec!["attempt 1  run wf-2026-12-01-10-00-00-000-abc123  no proof".into()],
                ),
                ("proof criteria".into(), vec!["accept-1 the cookie is set (no proof yet)".into()]),
                ("open findings".into(), vec![]),
            ],
        }),
    ));
    let open = View { open: true, ..View::new(Page::Work) };
    assert_snapshot("work-detail", &once(&s, &open, 90, 14));
    let scrolled = View { scroll: 5, ..open };
    assert!(once(&s, &scrolled, 90, 14).lines().nth(1).unwrap().contains("attempts and runs"));
    let help = View { help: true, ..View::new(Page::Goals) };
    assert_snapshot("help", &once(&s, &help, 90, 16));
    // A long list keeps its selected row in view.
    let low = View { selected: 3, ..View::new(Page::Goals) };
    assert!(once(&s, &low, 110, 9).contains("docs-pass"), "scrolled to the selection");
}

/// Every page at the smallest terminal people use and at a large one: nothing overlaps,
/// names are never cut where the width allows them whole.
#[test]
fn every_page_fits_80_by_24_and_200_by_50() {
    let pages = [
        (Page::Goals, "goals"),
        (Page::Work, "work"),
        (Page::Harnesses, "harnesses"),
        (Page::Approvals, "approvals"),
    ];
    let names: [&[&str]; 4] = [
        &["ship-login", "fix-flaky-ci", "docs-pass"],
        &["work-1", "work-2"],
        &[
            "agent-a",
            "crashy",
            "watcher",
            "flaky",
            "LAST EXIT",
            "(changed)",
            "next: harn harness restart flaky",
        ],
        &["wf-2026-12-01-10-00-00-000-abc123-p1", "pending"],
    ];
    for ((page, name), whole) in pages.into_iter().zip(names) {
        for (w, h) in [(80, 24), (200, 50)] {
            let text = once(&snapshot(), &View::new(page), w, h);
            for n in whole {
                assert!(text.contains(n), "{name} at {w}x{h} cuts {n}:\n{text}");
            }
            // The footer has a line of its own: no table row runs into it.
            let footer = text.lines().filter(|l| l.contains("q quit")).count();
            assert_eq!(footer, 1, "{name} at {w}x{h}:\n{text}");
            assert_snapshot(&format!("{name}-{w}x{h}"), &text);
        }
    }
}
