//! `harn supervisor` with the real binary and the scripted harness: a two-item graph run to
//! success with automated acceptance, a stop for review without it, one tick doing exactly
//! one cycle, blocked work retried inside the ceilings, and bad input refused with nothing
//! written.

use crate::cli::{harn_at as harn, json, text};
use serde_json::Value;
use std::path::Path;

/// A root with the example workflow (or `failing` one), the scripted harness, a team, and
/// items `parser` and `cli` (which depends on `parser`).
fn root(workflow_body: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    match workflow_body {
        None => drop(std::fs::copy(examples.join("workflows/agent-review.sh"), r.join("wf.sh"))),
        Some(body) => {
            std::fs::write(r.join("wf.sh"), format!("#!/bin/sh\nread start\n{body}\n")).unwrap();
            let mut perms = std::fs::metadata(r.join("wf.sh")).unwrap().permissions();
            std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
            std::fs::set_permissions(r.join("wf.sh"), perms).unwrap();
        }
    }
    std::fs::copy(examples.join("harnesses/scripted.sh"), r.join("harness.sh")).unwrap();
    std::fs::create_dir_all(r.join(".harnery")).unwrap();
    let config = r#"{"harnesses": {"scripted": {"command": ["./harness.sh"]}}}"#;
    std::fs::write(r.join(".harnery/config.json"), config).unwrap();
    std::fs::write(
        r.join("team.json"),
        r#"{"implementer": {"instructions": "Implement it.", "harness": "scripted"}}"#,
    )
    .unwrap();
    for (id, deps) in [("parser", None), ("cli", Some("parser"))] {
        let mut args = vec!["work", "create", id, "wf.sh", "--id", id, "--objective", "do it"];
        args.extend(["--accept", "the agent answered"]);
        if let Some(d) = deps {
            args.extend(["--depends-on", d]);
        }
        let out = harn(r, &args);
        assert!(out.status.success(), "{}", text(&out));
    }
    dir
}

/// `supervisor create` of goal `mission` from `mission.json`, accepting passing proof.
const MISSION_CREATE: [&str; 11] = [
    "supervisor",
    "create",
    "--team",
    "team.json",
    "--id",
    "mission",
    "--accept-passing-proof",
    "--replanning",
    "replanning.json",
    "--mission",
    "mission.json",
];

/// The example mission and its planner, applying plans without a person, with `edit` applied
/// to the replanning policy.
fn mission(r: &Path, edit: impl Fn(String) -> String) {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    std::fs::copy(examples.join("mission.json"), r.join("mission.json")).unwrap();
    replanning(r, "mission-planner.sh", false, |p| {
        edit(p.replace("\"auto_apply\": false", "\"auto_apply\": true"))
    });
}

/// A root with the mission example whose planner notes in `planner.log` every time it is
/// started (uncontained, so it may write the root).
fn noting_mission() -> tempfile::TempDir {
    let dir = root(None);
    let r = dir.path();
    mission(r, |p| p);
    let planner = std::fs::read_to_string(r.join("planner.sh")).unwrap();
    let noted = planner.replacen('\n', "\necho started >> planner.log\n", 1);
    std::fs::write(r.join("planner.sh"), noted).unwrap();
    dir
}

fn create_goal(r: &Path, extra: &[&str]) {
    create_with(r, "cli", "ship", extra);
}

/// `supervisor create ROOT --team team.json --id ID` with `extra`, which must succeed.
fn create_with(r: &Path, root: &str, id: &str, extra: &[&str]) {
    let out = create(r, root, id, extra);
    assert!(out.status.success(), "{}", text(&out));
}

/// `supervisor create ROOT --team team.json --id ID` with `extra`.
fn create(r: &Path, root: &str, id: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["supervisor", "create", root, "--team", "team.json", "--id", id];
    args.extend(extra);
    harn(r, &args)
}

fn goal(r: &Path) -> Value {
    json(&harn(r, &["supervisor", "show", "ship", "--json"]))
}

#[test]
fn a_two_item_graph_runs_to_success_with_automated_acceptance() {
    let dir = root(None);
    let r = dir.path();
    create_goal(r, &["--accept-passing-proof"]);
    let out = harn(r, &["supervisor", "run", "ship", "--harness", "scripted"]);
    assert!(out.status.success(), "{}", text(&out));
    let said = text(&out);
    let parser = said.find("dispatch parser").expect("parser first");
    let cli = said.find("dispatch cli").expect("then cli");
    assert!(parser < cli, "prerequisites are dispatched first: {said}");
    assert!(said.contains("stop: succeeded"), "{said}");
    let g = goal(r);
    assert_eq!(g["projection"]["state"], "succeeded");
    assert_eq!(g["projection"]["charged_attempts"], 2);
}

#[test]
fn without_automated_acceptance_the_run_stops_for_review_and_a_tick_is_one_cycle() {
    let dir = root(None);
    let r = dir.path();
    create_goal(r, &[]);
    let out = harn(r, &["supervisor", "tick", "ship", "--harness", "scripted", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let report = json(&out);
    assert_eq!((report["cycles"].as_u64(), report["dispatches"].as_u64()), (Some(1), Some(1)));
    assert_eq!(report["stop"]["reason"], "tick_complete");
    let p = &goal(r)["projection"];
    assert_eq!(
        (p["state"].as_str(), p["next_action"].as_str()),
        (Some("awaiting_attention"), Some("review"))
    );
    let out = harn(r, &["supervisor", "run", "ship", "--harness", "scripted", "--json"]);
    assert_eq!(
        json(&out)["stop"]["reason"],
        "awaiting_attention",
        "nothing accepted without the flag"
    );
    assert_eq!(json(&out)["dispatches"], 0);
    // Waiting for a person, it names what they type, in show and where a run stops.
    let root = p["attention_work"][0].as_str().unwrap().to_owned();
    let shown = text(&harn(r, &["supervisor", "show", "ship"]));
    assert!(shown.contains(&format!("\n  next       harn work accept {root}\n")), "{shown}");
    assert!(shown.contains(&format!("\n  or         harn work reopen {root} --reason")), "{shown}");
    let out = harn(r, &["supervisor", "run", "ship", "--harness", "scripted"]);
    assert!(text(&out).contains("(0 cycles, 0 dispatched"), "{}", text(&out));
    assert!(text(&out).contains(&format!("\nnext: harn work accept {root}")), "{}", text(&out));
    let quiet = harn(r, &["supervisor", "run", "ship", "--harness", "scripted", "--quiet"]);
    let said = String::from_utf8_lossy(&quiet.stdout).into_owned();
    assert!(said.starts_with("stop: awaiting_attention") && !said.contains("cycle 1:"), "{said}");
    let doc = json(&harn(r, &["supervisor", "show", "ship", "--json"]));
    assert_eq!(doc["next_commands"][0], format!("harn work accept {root}"));
}

#[test]
fn blocked_work_is_retried_only_when_automated_and_inside_the_ceiling() {
    let dir = root(Some("echo '{\"op\":\"result\",\"ok\":false,\"error\":\"tests failed\"}'"));
    let r = dir.path();
    create_goal(r, &["--retry-blocked", "--max-total-attempts", "2"]);
    let out = harn(r, &["supervisor", "run", "ship", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let report = json(&out);
    assert_eq!(report["dispatches"], 2, "{report}");
    assert_eq!(report["outcomes"][1]["action"], "retry");
    assert_eq!(report["stop"]["reason"], "budget_exhausted", "{report}");
    let p = &goal(r)["projection"];
    assert_eq!(
        (p["charged_attempts"].as_u64(), p["attempts_remaining"].as_u64()),
        (Some(2), Some(0))
    );
}

#[test]
fn bad_input_is_refused_and_an_edited_intent_is_noticed() {
    let dir = root(None);
    let r = dir.path();
    std::fs::write(r.join("bad.json"), r#"{"x": {"harness": "no-such-harness"}}"#).unwrap();
    let out = harn(r, &["supervisor", "create", "cli", "--team", "bad.json", "--id", "g"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let out = harn(r, &["supervisor", "create", "nope", "--team", "team.json", "--id", "g"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let bad_limit = create(r, "cli", "g", &["--max-parallel-work", "21"]);
    assert_eq!(bad_limit.status.code(), Some(2));
    assert!(!r.join(".harnery/supervisors/g").exists(), "nothing written");
    create_goal(r, &[]);
    let again = harn(r, &["supervisor", "create", "cli", "--team", "team.json", "--id", "ship"]);
    assert_eq!(again.status.code(), Some(1), "an id is never reused: {}", text(&again));
    let path = r.join(".harnery/supervisors/ship/intent.json");
    let edited = std::fs::read_to_string(&path)
        .unwrap()
        .replace("\"max_total_attempts\": 100", "\"max_total_attempts\": 10000");
    std::fs::write(&path, edited).unwrap();
    let out = harn(r, &["supervisor", "show", "ship"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("edited after creation"), "{}", text(&out));
    let list = json(&harn(r, &["supervisor", "list", "--json"]));
    assert_eq!(list["errors"][0]["id"], "ship", "the list names the unreadable goal: {list}");
}

/// The id of plan number `n` of `goal`, as harn derives it.
fn plan(goal: &str, n: u32) -> String {
    harn_core::goal::plan::plan_id(&harn_core::ids::Id::new(goal).unwrap(), n)
}

/// Whether the work item `<plan>-<key>` exists.
fn work(r: &Path, plan: &str, key: &str) -> bool {
    r.join(format!(".harnery/work/{plan}-{key}")).exists()
}

/// Adds replanning to a root: the template's workflow, the example policy as `edit` changes
/// it, the scripted `planner` (and, with `reviewer`, the scripted reviewer) declared as
/// harnesses, and a team naming them.
fn replanning(r: &Path, planner: &str, reviewer: bool, edit: impl Fn(String) -> String) {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    std::fs::create_dir_all(r.join("workflows")).unwrap();
    std::fs::copy(examples.join("workflows/agent-review.sh"), r.join("workflows/agent-review.sh"))
        .unwrap();
    std::fs::copy(examples.join("harnesses").join(planner), r.join("planner.sh")).unwrap();
    let policy = std::fs::read_to_string(examples.join("replanning.json")).unwrap();
    std::fs::write(r.join("replanning.json"), edit(policy)).unwrap();
    let mut harnesses = vec![
        r#""scripted": {"command": ["./harness.sh"]}"#,
        r#""planner": {"command": ["./planner.sh"]}"#,
    ];
    let mut team = vec![r#""planner": {"instructions": "Plan.", "harness": "planner"}"#];
    if reviewer {
        std::fs::copy(examples.join("harnesses/reviewer.sh"), r.join("reviewer.sh")).unwrap();
        harnesses.push(r#""reviewer": {"command": ["./reviewer.sh"]}"#);
        team.push(r#""reviewer": {"instructions": "Review.", "harness": "reviewer"}"#);
    }
    let config = format!("{{\"harnesses\": {{{}}}}}", harnesses.join(", "));
    std::fs::write(r.join(".harnery/config.json"), config).unwrap();
    std::fs::write(r.join("team.json"), format!("{{{}}}", team.join(", "))).unwrap();
}

/// Creates `lone`, an item with one charged attempt, so a failure leaves the graph stuck.
fn lone(r: &Path) {
    one_attempt_item(r, "Lone", "lone");
}

/// Creates item `id` titled `title` with one charged attempt.
fn one_attempt_item(r: &Path, title: &str, id: &str) {
    let create =
        ["work", "create", title, "wf.sh", "--id", id, "--objective", "o", "--max-attempts", "1"];
    let out = harn(r, &create);
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn a_stuck_goal_replans_and_a_rejected_proposal_is_never_applied() {
    let dir = root(Some("echo '{\"op\":\"result\",\"ok\":false,\"error\":\"tests failed\"}'"));
    let r = dir.path();
    replanning(r, "planner.sh", false, |p| p);
    lone(r);
    create_with(r, "lone", "fixit", &["--accept-passing-proof", "--replanning", "replanning.json"]);
    let fixit = |r: &Path| json(&harn(r, &["supervisor", "show", "fixit", "--json"]));
    // The lone item fails for good; the goal asks the planner, which proposes a fix.
    let out = harn(r, &["supervisor", "run", "fixit", "--harness", "scripted"]);
    assert!(out.status.success(), "{}", text(&out));
    let p = &fixit(r)["projection"];
    assert_eq!(
        (p["state"].as_str(), p["next_action"].as_str()),
        (Some("awaiting_attention"), Some("review_plan")),
        "{p}"
    );
    assert_eq!(p["pending_plan_id"], plan("fixit", 1));
    let shown = text(&harn(r, &["supervisor", "show", "fixit"]));
    let pending = plan("fixit", 1);
    assert!(shown.contains(&format!("next       harn supervisor plan approve fixit {pending}\n")));
    assert!(
        shown.contains(&format!("or         harn supervisor plan reject fixit {pending} --reason")),
        "{shown}"
    );
    let out = harn(
        r,
        &["supervisor", "plan", "reject", "fixit", &plan("fixit", 1), "--reason", "name it better"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        !r.join(format!(".harnery/work/{}-fix", plan("fixit", 1))).exists(),
        "a rejected proposal is never applied"
    );
    // A new plan is asked for; this one is approved, applied and run to success.
    let out = harn(r, &["supervisor", "run", "fixit", "--harness", "scripted"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(fixit(r)["projection"]["pending_plan_id"], plan("fixit", 2));
    // Named by prefixes of the goal's and the plan's ids.
    let out = harn(r, &["supervisor", "plan", "approve", "fix", "plan-0002"]);
    assert!(out.status.success(), "{}", text(&out));
    let ambiguous = harn(r, &["supervisor", "plan", "show", "fixit", "plan-000"]);
    assert_eq!(ambiguous.status.code(), Some(2), "{}", text(&ambiguous));
    assert!(text(&ambiguous).contains("is the start of 2 plan ids"), "{}", text(&ambiguous));
    let out = harn(r, &["supervisor", "run", "fixit", "--harness", "scripted"]);
    assert!(text(&out).contains("stop: succeeded"), "{}", text(&out));
    let p = &fixit(r)["projection"];
    assert_eq!(p["root_work_id"], format!("{}-fix", plan("fixit", 2)));
    assert_eq!(
        (p["replans_used"].as_u64(), p["attempts_used"].as_u64()),
        (Some(2), Some(2)),
        "the lone item's attempt still counts: {p}"
    );
    let plans = json(&harn(r, &["supervisor", "plan", "list", "fixit", "--json"]));
    assert_eq!(plans["plans"][0]["status"], "rejected");
    assert_eq!(plans["plans"][1]["status"], "applied");
}

#[test]
fn a_two_milestone_mission_runs_to_completion() {
    let dir = root(None);
    let r = dir.path();
    mission(r, |p| p);
    let create = MISSION_CREATE;
    let out = harn(r, &create);
    assert!(out.status.success(), "{}", text(&out));
    let show = |r: &Path| json(&harn(r, &["supervisor", "show", "mission", "--json"]));
    assert_eq!(
        show(r)["projection"]["next_action"],
        "plan_initial",
        "no placeholder work: the first tick plans"
    );
    let out = harn(r, &["supervisor", "run", "mission", "--harness", "scripted"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("stop: succeeded"), "{}", text(&out));
    let p = &show(r)["projection"];
    assert_eq!(p["state"], "succeeded");
    let plans = json(&harn(r, &["supervisor", "plan", "list", "mission", "--json"]));
    let statuses: Vec<&str> =
        plans["plans"].as_array().unwrap().iter().map(|p| p["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["applied", "applied", "completed"], "two milestones, then completion");
    assert!(work(r, &plan("mission", 1), "m1") && work(r, &plan("mission", 2), "m2"));
    let m = &show(r)["milestones"];
    assert_eq!((m["completed"].as_u64(), m["max"].as_u64()), (Some(2), Some(2)), "{m}");
    assert_eq!(m["mission_complete"], true, "{m}");
    let shown = text(&harn(r, &["supervisor", "plan", "show", "mission", &plan("mission", 2)]));
    assert!(shown.contains("milestone  2:") && shown.contains("accept-1"), "{shown}");
}

#[test]
fn an_approved_completion_records_the_operators_reason() {
    let dir = root(None);
    let r = dir.path();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    std::fs::copy(examples.join("mission.json"), r.join("mission.json")).unwrap();
    replanning(r, "mission-planner.sh", false, |p| p);
    let create = MISSION_CREATE;
    assert!(harn(r, &create).status.success());
    for n in 1..=3 {
        let out = harn(r, &["supervisor", "run", "mission", "--harness", "scripted"]);
        assert!(out.status.success(), "{}", text(&out));
        let id = plan("mission", n);
        let approve =
            ["supervisor", "plan", "approve", "mission", &id, "--reason", "checked by hand"];
        let out = harn(r, &approve);
        assert!(out.status.success(), "{id}: {}", text(&out));
    }
    let p3 =
        json(&harn(r, &["supervisor", "plan", "show", "mission", &plan("mission", 3), "--json"]));
    let completed =
        p3["events"].as_array().unwrap().iter().find(|e| e["event"] == "plan.completed");
    assert_eq!(completed.map(|e| e["reason"].clone()), Some("checked by hand".into()), "{p3}");
}

#[test]
fn a_review_panel_asks_for_one_revision_and_only_a_passed_plan_is_approved() {
    let dir = root(Some("echo '{\"op\":\"result\",\"ok\":false,\"error\":\"tests failed\"}'"));
    let r = dir.path();
    replanning(r, "planner.sh", true, |p| {
        p.replace(
            "\"templates\"",
            "\"review\": {\"reviewer_specialists\": [\"reviewer\"], \"max_revision_rounds\": 1},\n  \"templates\"",
        )
    });
    lone(r);
    create_with(r, "lone", "rev", &["--accept-passing-proof", "--replanning", "replanning.json"]);
    let out = harn(r, &["supervisor", "run", "rev", "--harness", "scripted"]);
    assert!(out.status.success(), "{}", text(&out));
    let receipt: Value = serde_json::from_slice(
        &std::fs::read(
            r.join(format!(".harnery/supervisors/rev/plans/{}/review.json", plan("rev", 1))),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(receipt["status"], "passed", "{receipt}");
    assert_eq!(receipt["rounds"].as_array().unwrap().len(), 2, "one revision, then approval");
    let shown = json(&harn(r, &["supervisor", "plan", "show", "rev", &plan("rev", 1), "--json"]));
    assert_eq!(shown["proposal"]["work"][0]["title"], "Fix the parser (revised)");
    // Every call the plan took is on record, in order: who, which harness, what came of it.
    let p1 = plan("rev", 1);
    let calls: Vec<(String, String, bool)> = shown["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or("").to_owned();
            (s("role"), s("label"), c["outcome"]["ok"] == true)
        })
        .collect();
    let expected = [
        ("planner", p1.clone()),
        ("reviewer", format!("{p1}-review-1-1")),
        ("planner", format!("{p1}-revision-1")),
        ("reviewer", format!("{p1}-review-2-1")),
    ];
    let expected: Vec<(String, String, bool)> =
        expected.iter().map(|(r, l)| (r.to_string(), l.clone(), true)).collect();
    assert_eq!(calls, expected, "{shown}");
    assert_eq!(shown["calls"][1]["harness"], "reviewer");
    assert!(shown["calls"][1]["outcome"]["text"].as_str().unwrap().contains("revise"));
    let text_shown = text(&harn(r, &["supervisor", "plan", "show", "rev", &p1]));
    assert!(
        text_shown.contains(&format!("call       reviewer (reviewer, {p1}-review-1-1): answered")),
        "{text_shown}"
    );
    let out = harn(r, &["supervisor", "plan", "approve", "rev", &plan("rev", 1)]);
    assert!(out.status.success(), "{}", text(&out));
    let out = harn(r, &["supervisor", "run", "rev", "--harness", "scripted"]);
    assert!(text(&out).contains("stop: succeeded"), "{}", text(&out));
}

#[test]
fn plan_retry_is_refused_once_no_replan_slot_remains() {
    let dir = root(Some("echo '{\"op\":\"result\",\"ok\":false,\"error\":\"tests failed\"}'"));
    let r = dir.path();
    replanning(r, "planner.sh", false, |p| p.replace("\"max_replans\": 3", "\"max_replans\": 1"));
    // A planner that asks a person instead of proposing work.
    let attention = "#!/bin/sh\ncat >/dev/null\necho '{\"decision\": \"attention\", \"rationale\": \"which parser do we keep? a person must say\", \"work\": []}'\n";
    std::fs::write(r.join("planner.sh"), attention).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(r.join("planner.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    lone(r);
    create_with(r, "lone", "fixit", &["--replanning", "replanning.json"]);
    let out = harn(r, &["supervisor", "run", "fixit", "--harness", "scripted"]);
    assert!(out.status.success(), "{}", text(&out));
    let p = json(&harn(r, &["supervisor", "show", "fixit", "--json"]))["projection"].clone();
    assert_eq!(
        (p["attention_plan_id"].as_str(), p["replans_remaining"].as_u64()),
        (Some(plan("fixit", 1).as_str()), Some(0)),
        "{p} {}",
        text(&harn(r, &["supervisor", "plan", "show", "fixit", &plan("fixit", 1), "--json"]))
    );
    let retry =
        ["supervisor", "plan", "retry", "fixit", &plan("fixit", 1), "--reason", "keep the new one"];
    let out = harn(r, &retry);
    assert!(!out.status.success(), "a retry with no slot left is refused: {}", text(&out));
    assert!(text(&out).contains("no replan slot remains"), "{}", text(&out));
    let plans = json(&harn(r, &["supervisor", "plan", "list", "fixit", "--json"]));
    assert_eq!(plans["plans"][0]["status"], "attention", "nothing was recorded: {plans}");
}

#[test]
fn two_goals_planning_the_same_key_get_items_of_their_own() {
    let dir = root(Some("echo '{\"op\":\"result\",\"ok\":false,\"error\":\"tests failed\"}'"));
    let r = dir.path();
    replanning(r, "planner.sh", false, |p| p);
    lone(r);
    one_attempt_item(r, "Lone 2", "lone2");
    for (goal, root) in [("ga", "lone"), ("gb", "lone2")] {
        create_with(r, root, goal, &["--replanning", "replanning.json"]);
        let out = harn(r, &["supervisor", "run", goal, "--harness", "scripted"]);
        assert!(out.status.success(), "{}", text(&out));
        let out = harn(r, &["supervisor", "plan", "approve", goal, &plan(goal, 1)]);
        assert!(out.status.success(), "{goal}: {}", text(&out));
    }
    let root_of = |g: &str| {
        json(&harn(r, &["supervisor", "show", g, "--json"]))["projection"]["root_work_id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (a, b) = (root_of("ga"), root_of("gb"));
    assert_ne!(a, b, "each goal's plan made its own item");
    assert!(a.starts_with("plan-0001-") && a.ends_with("-fix"), "{a}");
    assert!(work(r, &plan("ga", 1), "fix") && work(r, &plan("gb", 1), "fix"));
    let intent = &json(&harn(r, &["work", "show", &b, "--json"]))["intent"];
    assert_eq!(intent["source"], serde_json::json!({ "goal": "gb", "plan": plan("gb", 1) }));
    let shown = text(&harn(r, &["work", "show", &a]));
    assert!(shown.contains(&format!("source     plan {} of goal ga", plan("ga", 1))), "{shown}");
}

#[test]
fn a_failing_planner_stops_the_run_at_its_first_failure() {
    let dir = root(Some("echo '{\"op\":\"result\",\"ok\":false,\"error\":\"tests failed\"}'"));
    let r = dir.path();
    replanning(r, "planner.sh", false, |p| p);
    // A planner whose reply is never a plan.
    std::fs::write(r.join("planner.sh"), "#!/bin/sh\ncat >/dev/null\necho 'no plan today'\n")
        .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(r.join("planner.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    lone(r);
    create_with(r, "lone", "fixit", &["--replanning", "replanning.json"]);
    let out = harn(r, &["supervisor", "run", "fixit", "--harness", "scripted", "--json"]);
    let report = json(&out);
    assert_eq!(report["stop"]["reason"], "plan_failed", "{report}");
    let plans = json(&harn(r, &["supervisor", "plan", "list", "fixit", "--json"]));
    assert_eq!(
        plans["plans"].as_array().unwrap().len(),
        1,
        "one plan, not the whole budget: {plans}"
    );
    assert_eq!(plans["plans"][0]["status"], "failed");
    // Every replan spent without a proposal: `show` attributes them, and the exhaustion says
    // how many ended so.
    for _ in 0..3 {
        harn(r, &["supervisor", "run", "fixit", "--harness", "scripted"]);
    }
    let g = json(&harn(r, &["supervisor", "show", "fixit", "--json"]));
    let p = &g["projection"];
    assert_eq!(p["state"], "budget_exhausted", "{p}");
    assert_eq!(p["replan_consumption"]["planner_no_proposal"], 3, "{p}");
    assert_eq!(p["replan_consumption"]["reviewer_rejection"], 0, "{p}");
    let why = p["reason"].as_str().unwrap();
    assert!(why.ends_with("every replan is used (3 ended without a proposal)"), "{why}");
    let shown = text(&harn(r, &["supervisor", "show", "fixit"]));
    assert!(shown.contains("replans    3 asked for, 0 left of 3; 3 ended without"), "{shown}");
}

/// Work a manual `harn work run` is running (its run lease held by that process) makes the
/// goal wait: `show` says so, and a tick dispatches nothing past it and stops `running`.
#[test]
fn work_running_elsewhere_makes_the_goal_wait() {
    let dir = root(Some("echo $$ > workflow.pid\nsleep 300"));
    let r = dir.path();
    create_goal(r, &["--accept-passing-proof"]);
    let (mut host, _) = crate::work_run::run_item_in_background(r, "parser");
    let p = &goal(r)["projection"];
    assert_eq!(
        (p["state"].as_str(), p["next_action"].as_str()),
        (Some("running"), Some("wait_for_run"))
    );
    assert!(p["reason"].as_str().unwrap().contains("parser running elsewhere"), "{p}");
    let out = harn(r, &["supervisor", "tick", "ship", "--harness", "scripted", "--json"]);
    let report = json(&out);
    assert_eq!(report["stop"]["reason"], "running", "{report}");
    assert_eq!(report["dispatches"], 0, "{report}");
    host.kill().unwrap();
    host.wait().unwrap();
    let pid = std::fs::read_to_string(r.join("workflow.pid")).unwrap();
    let _ = std::process::Command::new("kill").args(["-9", pid.trim()]).status();
}

/// `harn work reopen` on an item of a complete mission reopens the mission with it (its
/// reopened work runs before the milestone is reassessed); a refusal (the goal ticked by
/// another process) leaves both untouched; an item of an earlier milestone is found too and
/// said to be outside the active graph; `plan reopen` reopens the mission itself.
#[test]
fn reopening_work_of_a_complete_mission_reopens_the_mission_first() {
    let dir = root(None);
    let r = dir.path();
    mission(r, |p| p.replace("\"max_replans\": 3", "\"max_replans\": 5"));
    let create = MISSION_CREATE;
    assert!(harn(r, &create).status.success());
    let run = |r: &Path| harn(r, &["supervisor", "run", "mission", "--harness", "scripted"]);
    assert!(text(&run(r)).contains("stop: succeeded"));
    let statuses = |r: &Path| -> Vec<String> {
        let plans = json(&harn(r, &["supervisor", "plan", "list", "mission", "--json"]));
        let all = plans["plans"].as_array().unwrap().iter();
        all.map(|p| p["status"].as_str().unwrap().to_owned()).collect()
    };
    let item_state = |r: &Path, id: &str| {
        json(&harn(r, &["work", "show", id, "--json"]))["projection"]["state"].clone()
    };
    let (m1, m2) = (format!("{}-m1", plan("mission", 1)), format!("{}-m2", plan("mission", 2)));

    // Refused while another process holds the goal's lease: nothing is written.
    let lease = r.join(".harnery/supervisors/mission/lease.lock");
    // `-o`: the lock stays with flock itself, not the sleep it runs, so a kill releases it.
    let mut holder = std::process::Command::new("flock")
        .arg("-o")
        .arg(&lease)
        .args(["sleep", "30"])
        .spawn()
        .unwrap();
    let held = || {
        let mut probe = std::process::Command::new("flock");
        !probe.arg("-n").arg(&lease).arg("true").output().unwrap().status.success()
    };
    let since = std::time::Instant::now();
    while !held() {
        assert!(since.elapsed().as_secs() < 30, "flock never took the lease");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let refused = harn(r, &["work", "reopen", &m2, "--reason", "crashes on empty input"]);
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    assert!(text(&refused).contains("nothing was reopened"), "{}", text(&refused));
    assert_eq!(item_state(r, &m2), "succeeded");
    assert_eq!(statuses(r), ["applied", "applied", "completed"]);

    // Reopened: the mission first, then the item; the item runs before any reassessment.
    let out = harn(r, &["work", "reopen", &m2, "--reason", "crashes on empty input"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("mission mission reopened"), "{}", text(&out));
    assert_eq!(statuses(r), ["applied", "applied", "reopened"]);
    let p = &json(&harn(r, &["supervisor", "show", "mission", "--json"]))["projection"];
    assert_eq!((p["state"].as_str(), p["next_action"].as_str()), (Some("ready"), Some("run")));
    let out = run(r);
    let said = text(&out);
    let ran = said.find(&format!("dispatch {m2}")).expect("the reopened item runs");
    let planned = said.find("plan: ").expect("then the planner reassesses");
    assert!(ran < planned && said.contains("stop: succeeded"), "{said}");
    assert_eq!(statuses(r), ["applied", "applied", "reopened", "completed"]);

    // An item of an earlier milestone is found, and said to be outside the active graph.
    let out = harn(r, &["work", "reopen", &m1, "--reason", "milestone 1 regressed"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("earlier generation"), "{}", text(&out));
    assert_eq!(statuses(r).last().map(String::as_str), Some("reopened"));
    let again = harn(r, &["supervisor", "plan", "reopen", "mission", "--reason", "again"]);
    assert!(text(&again).contains("already reopened"), "{}", text(&again));
}

/// The reviewers of one round are asked together, at most `agent_concurrency` at once: two
/// slow reviewers overlap at 2 and follow one another at 1.
#[test]
fn the_reviewers_of_a_round_run_in_parallel_within_agent_concurrency() {
    for (concurrency, overlap) in [("2", true), ("1", false)] {
        let dir = root(Some("echo '{\"op\":\"result\",\"ok\":false,\"error\":\"tests failed\"}'"));
        let r = dir.path();
        replanning(r, "planner.sh", false, |p| {
            p.replace(
                "\"templates\"",
                "\"review\": {\"reviewer_specialists\": [\"ra\", \"rb\"], \"max_revision_rounds\": 0},\n  \"templates\"",
            )
        });
        // Each reviewer approves, a second after it started, with when it started and ended
        // as its rationale (a reviewer may not write the repository).
        let slow = "#!/bin/sh\ncat >/dev/null\nstart=$(date +%s%N)\nsleep 1\n\
                    echo \"{\\\"verdict\\\": \\\"approve\\\", \\\"rationale\\\": \\\"$start $(date +%s%N)\\\", \
                    \\\"findings\\\": []}\"\n";
        std::fs::write(r.join("slow.sh"), slow).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(r.join("slow.sh"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let config = r#"{"harnesses": {"scripted": {"command": ["./harness.sh"]},
            "planner": {"command": ["./planner.sh"]}, "slow": {"command": ["./slow.sh"]}}}"#;
        std::fs::write(r.join(".harnery/config.json"), config).unwrap();
        let team = r#"{"planner": {"instructions": "Plan.", "harness": "planner"},
            "ra": {"instructions": "Review.", "harness": "slow"},
            "rb": {"instructions": "Review.", "harness": "slow"}}"#;
        std::fs::write(r.join("team.json"), team).unwrap();
        lone(r);
        create_with(
            r,
            "lone",
            "par",
            &["--replanning", "replanning.json", "--agent-concurrency", concurrency],
        );
        let out = harn(r, &["supervisor", "run", "par", "--harness", "scripted"]);
        assert!(out.status.success(), "{}", text(&out));
        let receipt =
            r.join(format!(".harnery/supervisors/par/plans/{}/review.json", plan("par", 1)));
        let receipt: Value = serde_json::from_slice(&std::fs::read(receipt).unwrap()).unwrap();
        assert_eq!(receipt["status"], "passed", "{receipt}");
        let spans: Vec<(u128, u128)> = receipt["rounds"][0]["reviews"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                let mut t = v["rationale"].as_str().unwrap().split(' ').map(|n| n.parse().unwrap());
                (t.next().unwrap(), t.next().unwrap())
            })
            .collect();
        let (a, b) = (spans[0], spans[1]);
        let overlapped = a.0 < b.1 && b.0 < a.1;
        assert_eq!(overlapped, overlap, "agent_concurrency {concurrency}: {spans:?}");
    }
}

#[test]
fn a_policy_that_denies_agent_calls_stops_the_planner_before_it_starts() {
    let dir = noting_mission();
    let r = dir.path();
    std::fs::write(
        r.join("deny.json"),
        r#"{"rules": [{"name": "no-agents", "on": "agent", "verdict": "deny"}]}"#,
    )
    .unwrap();
    assert!(harn(r, &MISSION_CREATE).status.success());
    let tick = ["supervisor", "tick", "mission", "--harness", "scripted", "--no-containment"];
    let tick = [&tick[..], &["--policy", "deny.json"]].concat();
    let out = harn(r, &tick);
    assert!(!r.join("planner.log").exists(), "no agent was started: {}", text(&out));
    let plans = json(&harn(r, &["supervisor", "plan", "list", "mission", "--json"]));
    let first = &plans["plans"][0];
    assert_eq!(
        (first["status"].as_str(), first["class"].as_str()),
        (Some("failed"), Some("decision")),
        "{plans}"
    );
    let shown = text(&harn(r, &["supervisor", "plan", "show", "mission", &plan("mission", 1)]));
    assert!(shown.contains("the host policy denies the planner call (rule no-agents)"), "{shown}");
    // The goal reports it, and says what to type.
    let shown = text(&harn(r, &["supervisor", "show", "mission"]));
    assert!(shown.contains("harn supervisor plan retry mission"), "{shown}");
    // Asked for again without the policy, the same goal plans.
    let first = plan("mission", 1);
    let retry = ["supervisor", "plan", "retry", "mission", &first, "--reason", "policy relaxed"];
    assert!(harn(r, &retry).status.success());
    let tick = ["supervisor", "tick", "mission", "--harness", "scripted", "--no-containment"];
    let out = harn(r, &tick);
    assert!(out.status.success(), "{}", text(&out));
    assert!(r.join("planner.log").exists(), "{}", text(&out));
}

/// Puts the script `file` (with `body`) in front of the planner: the `planner` harness runs
/// it, with `extra` added to its declaration.
fn planner_behind(r: &Path, file: &str, body: &str, extra: &str) {
    std::fs::write(r.join(file), body).unwrap();
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(r.join(file), mode).unwrap();
    let config = format!(
        r#"{{"harnesses": {{"scripted": {{"command": ["./harness.sh"]}}, "planner": {{"command": ["./{file}"]{extra}}}}}}}"#
    );
    std::fs::write(r.join(".harnery/config.json"), config).unwrap();
}

#[test]
fn the_goals_cost_includes_its_planning_calls() {
    let dir = root(None);
    let r = dir.path();
    mission(r, |p| p);
    // The example planner behind Claude Code's dialect, reporting what its call cost.
    let wrapped = "#!/bin/sh\nout=$(./planner.sh)\npython3 -c 'import json,sys; print(json.dumps({\"type\":\"result\",\"subtype\":\"success\",\"is_error\":False,\"result\":sys.argv[1],\"session_id\":\"p1\",\"num_turns\":1,\"total_cost_usd\":0.25,\"usage\":{\"input_tokens\":10,\"output_tokens\":5}}))' \"$out\"\n";
    planner_behind(r, "costly.sh", wrapped, r#", "kind": "claude-code""#);
    assert!(harn(r, &MISSION_CREATE).status.success());
    let out =
        harn(r, &["supervisor", "tick", "mission", "--harness", "scripted", "--allow-api-billing"]);
    assert!(out.status.success(), "{}", text(&out));
    let g = json(&harn(r, &["supervisor", "show", "mission", "--json"]));
    let cost = g["usage"]["cost_micro_usd"].as_u64().unwrap_or(0);
    assert!(cost >= 250_000, "the planner's $0.25 is the goal's: {}", g["usage"]);
}

/// The runs of a root, newest first, as `run list --json` gives them.
fn runs(r: &Path) -> Vec<Value> {
    let listed = json(&harn(r, &["run", "list", "--limit", "100", "--json"]));
    listed["runs"].as_array().unwrap().clone()
}

/// A mission goal whose plans a reviewer checks, ticked once.
fn reviewed_mission(r: &Path) {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    std::fs::copy(examples.join("mission.json"), r.join("mission.json")).unwrap();
    replanning(r, "mission-planner.sh", true, |p| {
        p.replace("\"auto_apply\": false", "\"auto_apply\": true").replace(
            "\"templates\"",
            "\"review\": {\"reviewer_specialists\": [\"reviewer\"], \"max_revision_rounds\": 1},\n  \"templates\"",
        )
    });
    assert!(harn(r, &MISSION_CREATE).status.success());
}

#[test]
fn the_planner_and_the_reviewers_are_runs_with_proofs_naming_their_replies() {
    let dir = root(None);
    let r = dir.path();
    reviewed_mission(r);
    let out = harn(r, &["supervisor", "tick", "mission", "--harness", "scripted"]);
    assert!(out.status.success(), "{}", text(&out));
    let planning: Vec<Value> =
        runs(r).into_iter().filter(|run| run["planning"].is_object()).collect();
    let steps: Vec<&str> = planning.iter().filter_map(|p| p["planning"]["step"].as_str()).collect();
    assert!(steps.contains(&"plan") && steps.contains(&"review"), "{planning:?}");
    for run in &planning {
        assert_eq!(run["work_id"], "mission", "a planning run names its goal: {run}");
        assert_eq!(run["state"], "succeeded", "{run}");
    }
    // Each call of the plan names its run, whose sealed proof names the reply by digest.
    let p1 = plan("mission", 1);
    let shown = json(&harn(r, &["supervisor", "plan", "show", "mission", &p1, "--json"]));
    let calls = shown["calls"].as_array().unwrap();
    assert_eq!(calls.len(), planning.len(), "one run per call: {shown}");
    for call in calls {
        let run_id = call["run_id"].as_str().expect("the call names its run");
        let run = json(&harn(r, &["run", "show", run_id, "--json"]));
        let reply = call["outcome"]["text"].as_str().unwrap();
        let digest = harn_core::hash::sha256_hex(reply.as_bytes());
        assert_eq!(run["proof"]["planning"]["reply_sha256"], digest.as_str(), "{run}");
        assert_eq!(run["proof"]["planning"]["label"], call["label"], "{run}");
        assert_eq!(run["manifest"]["planning"]["plan"], p1.as_str());
        // Planners and reviewers read: the frozen team says so.
        let role = call["role"].as_str().unwrap();
        assert_eq!(run["manifest"]["team"][role]["access"], "read-only", "{run}");
    }
    let listed = text(&harn(r, &["run", "list"]));
    assert!(listed.contains("mission (plan)") && listed.contains("mission (review)"), "{listed}");
    let run_id = calls[0]["run_id"].as_str().unwrap();
    let shown = text(&harn(r, &["run", "show", run_id]));
    assert!(shown.contains(&format!("plan call {p1} for goal mission (planner)")), "{shown}");
    assert!(shown.contains("reply      sha256 "), "{shown}");
    let followed = harn(r, &["run", "follow", run_id]);
    assert!(followed.status.success(), "{}", text(&followed));
    assert!(text(&followed).contains("succeeded"), "{}", text(&followed));
}

#[test]
fn a_planning_step_a_crash_cut_short_resumes_as_the_same_run() {
    let dir = root(None);
    let r = dir.path();
    mission(r, |p| p);
    // The planner takes its time on its first call only.
    let slow = "#!/bin/sh\nif [ ! -e slept ]; then touch slept; sleep 30; fi\nexec ./planner.sh\n";
    planner_behind(r, "slow.sh", slow, "");
    assert!(harn(r, &MISSION_CREATE).status.success());
    let tick = ["supervisor", "tick", "mission", "--harness", "scripted", "--no-containment"];
    let mut child = std::process::Command::new(crate::cli::harn_bin())
        .args(tick)
        .current_dir(r)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed once the planner call is under way.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !r.join("slept").exists() {
        assert!(std::time::Instant::now() < deadline, "the planner never started");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let before: Vec<Value> =
        runs(r).into_iter().filter(|run| run["planning"].is_object()).collect();
    assert_eq!(before.len(), 1, "{before:?}");
    assert_ne!(before[0]["state"], "succeeded", "{before:?}");
    let out = harn(r, &tick);
    assert!(out.status.success(), "{}", text(&out));
    let after: Vec<Value> = runs(r).into_iter().filter(|run| run["planning"].is_object()).collect();
    assert_eq!(after.len(), 1, "the step resumed as the same run: {after:?}");
    assert_eq!(after[0]["run_id"], before[0]["run_id"]);
    assert_eq!(after[0]["state"], "succeeded", "{after:?}");
    let run_id = after[0]["run_id"].as_str().unwrap();
    let transcript =
        std::fs::read_to_string(r.join(format!(".harnery/workflows/{run_id}/transcript.jsonl")))
            .unwrap();
    assert!(transcript.contains("run.reaped") && transcript.contains("run.resume"), "{transcript}");
    let plans = json(&harn(r, &["supervisor", "plan", "list", "mission", "--json"]));
    assert_eq!(plans["plans"][0]["status"], "applied", "{plans}");
}

#[test]
fn a_planning_reply_a_crash_left_unrecorded_is_used_without_asking_again() {
    let dir = noting_mission();
    let r = dir.path();
    assert!(harn(r, &MISSION_CREATE).status.success());
    // A crash after the planning run's proof and before the plan's first record: the plan
    // has its request and nothing else.
    let p1 = plan("mission", 1);
    let dir1 = r.join(format!(".harnery/supervisors/mission/plans/{p1}"));
    let tick = ["supervisor", "tick", "mission", "--harness", "scripted", "--no-containment"];
    let planned = harn(r, &tick);
    assert!(planned.status.success(), "{}", text(&planned));
    assert_eq!(std::fs::read_to_string(r.join("planner.log")).unwrap().lines().count(), 1);
    let kept = std::fs::read(dir1.join("request.json")).unwrap();
    let planning = runs(r).into_iter().find(|run| run["planning"].is_object()).unwrap();
    std::fs::remove_dir_all(r.join(".harnery/supervisors/mission/plans")).unwrap();
    std::fs::create_dir_all(&dir1).unwrap();
    std::fs::write(dir1.join("request.json"), kept).unwrap();
    for item in std::fs::read_dir(r.join(".harnery/work")).unwrap() {
        std::fs::remove_dir_all(item.unwrap().path()).unwrap();
    }
    let out = harn(r, &tick);
    assert!(out.status.success(), "{}", text(&out));
    let log = std::fs::read_to_string(r.join("planner.log")).unwrap();
    assert_eq!(log.lines().count(), 1, "the planner was not asked again: {}", text(&out));
    let shown = json(&harn(r, &["supervisor", "plan", "show", "mission", &p1, "--json"]));
    assert_eq!(shown["calls"][0]["run_id"], planning["run_id"], "{shown}");
    let plans = json(&harn(r, &["supervisor", "plan", "list", "mission", "--json"]));
    assert_eq!(plans["plans"][0]["status"], "applied", "{plans}");
}

/// A stuck goal with replanning whose planner harness is `planner` as declared by `spec`.
fn stuck_with_planner(spec: &str) -> tempfile::TempDir {
    let dir = root(Some("echo '{\"op\":\"result\",\"ok\":false,\"error\":\"tests failed\"}'"));
    let r = dir.path();
    replanning(r, "planner.sh", false, |p| p);
    let config = format!(
        "{{\"harnesses\": {{\"scripted\": {{\"command\": [\"./harness.sh\"]}}, \"planner\": {spec}}}}}"
    );
    std::fs::write(r.join(".harnery/config.json"), config).unwrap();
    std::fs::write(r.join("README"), "before\n").unwrap();
    lone(r);
    create_with(r, "lone", "fixit", &["--accept-passing-proof", "--replanning", "replanning.json"]);
    dir
}

#[test]
fn a_planner_reads_the_repository_and_writes_nothing_of_it() {
    // The scripted planner, wrapped in a program that writes to the root before it proposes.
    let dir = stuck_with_planner(r#"{"command": ["./writer.sh"]}"#);
    let r = dir.path();
    std::fs::write(
        r.join("writer.sh"),
        "#!/bin/sh\necho planned >> README\ntouch made-by-planner\nexec ./planner.sh\n",
    )
    .unwrap();
    let exec = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(r.join("writer.sh"), exec).unwrap();
    let out = harn(r, &["supervisor", "run", "fixit", "--harness", "scripted"]);
    assert!(out.status.success(), "{}", text(&out));
    // It still read the repository and proposed; it changed nothing of it.
    let shown = json(&harn(r, &["supervisor", "show", "fixit", "--json"]));
    assert_eq!(shown["projection"]["pending_plan_id"], plan("fixit", 1), "{shown}");
    assert_eq!(std::fs::read_to_string(r.join("README")).unwrap(), "before\n");
    assert!(!r.join("made-by-planner").exists(), "the planner wrote the root");
}

#[test]
fn an_acp_planner_that_writes_without_asking_writes_nothing_of_the_repository() {
    let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agents/fake-acp");
    let spec = serde_json::json!({"command": [fake], "kind": "acp", "mode": "default"});
    let dir = stuck_with_planner(&spec.to_string());
    let r = dir.path();
    // The agent writes `unasked.txt` in its working directory, the root, before anything;
    // asked, its write of `hello.txt` is denied for a read-only specialist.
    let out = std::process::Command::new(crate::cli::harn_bin())
        .args(["supervisor", "run", "fixit", "--harness", "scripted", "--allow-api-billing"])
        .arg("--root")
        .arg(r)
        .env("HARN_FAKE_ACP", "write-allow,write-deny")
        .env("HARN_FAKE_ACP_UNASKED", "unasked.txt")
        .output()
        .unwrap();
    assert!(!r.join("unasked.txt").exists(), "the ACP planner wrote the root: {}", text(&out));
    assert!(!r.join("hello.txt").exists(), "the ACP planner wrote the root: {}", text(&out));
    assert_eq!(std::fs::read_to_string(r.join("README")).unwrap(), "before\n");
}
