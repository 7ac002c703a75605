//! One bad entry never hides the others: a name that is not UTF-8, a goal directory a killed
//! `create` left, an unreadable item. Each is one row or one warning, the rest still lists,
//! and the next writer of the directory sweeps what a kill left behind.

use crate::cli::{harn_at, json, text};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A pid far above any `pid_max`: never alive.
const DEAD: u32 = 2_000_000_000;

/// The example's root: items `parser` and `cli`, goal `ship`.
fn example_root(tmp: &Path) -> PathBuf {
    let root = tmp.join("r");
    let out = harn_at(&root, &["example"]);
    assert!(out.status.success(), "{}", text(&out));
    root
}

#[test]
fn a_name_that_is_not_utf8_is_one_warning_and_everything_else_lists() {
    let tmp = tempfile::tempdir().unwrap();
    let root = example_root(tmp.path());
    for dir in ["work", "supervisors"] {
        let odd = root.join(".harnery").join(dir).join(OsStr::from_bytes(b"bad\xff"));
        std::fs::create_dir(&odd).unwrap();
    }
    let list = harn_at(&root, &["work", "list", "--json"]);
    assert!(list.status.success(), "{}", text(&list));
    let doc = json(&list);
    let ids: Vec<&str> =
        doc["items"].as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["cli", "parser"]);
    assert!(doc["warnings"][0].as_str().unwrap().contains("is not an id harn made"), "{doc}");

    let goals = harn_at(&root, &["supervisor", "list", "--json"]);
    assert!(goals.status.success(), "{}", text(&goals));
    let doc = json(&goals);
    assert_eq!(doc["goals"][0]["id"], "ship", "{doc}");
    assert_eq!(doc["warnings"].as_array().unwrap().len(), 1, "{doc}");

    let reconcile = harn_at(&root, &["work", "reconcile"]);
    assert!(reconcile.status.success(), "{}", text(&reconcile));
    for page in ["goals", "work"] {
        let dash = harn_at(&root, &["dash", "--once", "--page", page]);
        assert!(dash.status.success(), "{}", text(&dash));
        let want = if page == "goals" { "ship" } else { "parser" };
        assert!(text(&dash).contains(want), "{page} shows the rest: {}", text(&dash));
        assert!(text(&dash).contains("unreadable"), "{page} names the bad entry: {}", text(&dash));
    }
}

#[test]
fn a_goal_directory_a_killed_create_left_is_not_a_goal_and_the_next_create_sweeps_it() {
    let tmp = tempfile::tempdir().unwrap();
    let root = example_root(tmp.path());
    let left = root.join(".harnery/supervisors/half");
    std::fs::create_dir(&left).unwrap();
    std::fs::write(left.join(format!(".intent.json.{DEAD}.tmp")), b"{").unwrap();
    let goals = harn_at(&root, &["supervisor", "list", "--json"]);
    assert!(goals.status.success(), "{}", text(&goals));
    let doc = json(&goals);
    assert_eq!(doc["goals"].as_array().unwrap().len(), 1, "only ship: {doc}");
    assert_eq!(doc["errors"].as_array().unwrap().len(), 0, "{doc}");
    let create =
        harn_at(&root, &["supervisor", "create", "cli", "--team", "team.json", "--id", "g2"]);
    assert!(create.status.success(), "{}", text(&create));
    assert!(!left.exists(), "the next create swept the residue");
}

#[test]
fn crash_residue_is_swept_by_the_next_writer_of_its_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let root = example_root(tmp.path());
    let staging = root.join(format!(".harnery/work/.new-half-{DEAD}"));
    std::fs::create_dir_all(&staging).unwrap();
    std::fs::write(staging.join("intent.json"), b"{}").unwrap();
    let create = ["work", "create", "Docs", "wf.sh", "--id", "docs", "--objective", "o"];
    let out = harn_at(&root, &create);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!staging.exists(), "work create swept a killed creation's staging directory");

    let service = root.join(".harnery/supervisor-service");
    std::fs::create_dir_all(&service).unwrap();
    let stale = [format!(".status.json.tmp.{DEAD}"), format!(".enrollment.json.{DEAD}.tmp")];
    for name in &stale {
        std::fs::write(service.join(name), b"{").unwrap();
    }
    let goal = ["supervisor", "create", "docs", "--team", "team.json", "--id", "dg"];
    assert!(harn_at(&root, &goal).status.success());
    let start = harn_at(&root, &["supervisor", "service", "start", "dg", "--harness", "scripted"]);
    assert!(start.status.success(), "{}", text(&start));
    assert!(harn_at(&root, &["supervisor", "service", "stop"]).status.success());
    for name in &stale {
        assert!(!service.join(name).exists(), "{name} was swept");
    }
}

#[test]
fn an_item_named_like_a_temporary_file_is_never_swept() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    std::fs::write(root.join("wf.sh"), "#!/bin/sh\nexit 0\n").unwrap();
    for id in ["cache.tmp.99999", "x.99999.tmp", "next"] {
        let out = harn_at(root, &["work", "create", id, "wf.sh", "--id", id, "--objective", "o"]);
        assert!(out.status.success(), "{}", text(&out));
    }
    for id in ["cache.tmp.99999", "x.99999.tmp"] {
        let out = harn_at(root, &["work", "show", id]);
        assert!(out.status.success(), "{id} is still there: {}", text(&out));
    }
}

#[test]
fn a_work_create_cut_short_is_no_item_and_the_same_create_completes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let root = example_root(tmp.path());
    let create = ["work", "create", "Docs", "wf.sh", "--id", "docs", "--objective", "o"];
    let out = harn_at(&root, &create);
    assert!(out.status.success(), "{}", text(&out));
    // What a kill between the creation event and the intent leaves.
    let dir = root.join(".harnery/work/docs");
    std::fs::remove_file(dir.join("intent.json")).unwrap();
    let list = json(&harn_at(&root, &["work", "list", "--json"]));
    let ids: Vec<&str> =
        list["items"].as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap()).collect();
    assert!(!ids.contains(&"docs"), "a creation cut short is no item: {list}");
    assert!(ids.contains(&"parser"), "{list}");
    let other = ["work", "create", "Other", "wf.sh", "--id", "docs", "--objective", "o"];
    let refused = harn_at(&root, &other);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    assert!(text(&refused).contains("give the item another id"), "{}", text(&refused));
    assert!(!dir.join("intent.json").exists(), "a refusal writes nothing");
    let again = harn_at(&root, &create);
    assert!(again.status.success(), "{}", text(&again));
    let shown = json(&harn_at(&root, &["work", "show", "docs", "--json"]));
    assert_eq!(shown["events"].as_array().unwrap().len(), 1, "one creation event: {shown}");
    assert_eq!(shown["intent"]["title"], "Docs");
}

#[test]
fn ids_may_hold_capitals_as_the_reference_allows() {
    let tmp = tempfile::tempdir().unwrap();
    let root = example_root(tmp.path());
    let create = ["work", "create", "Docs", "wf.sh", "--id", "Fix-Parser", "--objective", "o"];
    let out = harn_at(&root, &create);
    assert!(out.status.success(), "{}", text(&out));
    let goal = ["supervisor", "create", "Fix-Parser", "--team", "team.json", "--id", "Ship2"];
    let out = harn_at(&root, &goal);
    assert!(out.status.success(), "{}", text(&out));
    let shown = json(&harn_at(&root, &["supervisor", "show", "Ship2", "--json"]));
    assert_eq!(shown["intent"]["root_work_id"], "Fix-Parser", "{shown}");
    let bad = harn_at(&root, &["work", "create", "D", "wf.sh", "--id", "a/b", "--objective", "o"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
}

#[test]
fn a_new_goal_needs_a_team_whose_every_specialist_has_instructions() {
    let tmp = tempfile::tempdir().unwrap();
    let root = example_root(tmp.path());
    let goals_before = std::fs::read_dir(root.join(".harnery/supervisors")).unwrap().count();
    for (team, says) in [
        ("{}", "team: needs at least one specialist"),
        (r#"{"implementer": {"harness": "scripted"}}"#, "implementer.instructions: is required"),
        (r#"{"implementer": {"instructions": "  "}}"#, "implementer.instructions: is required"),
    ] {
        std::fs::write(root.join("bad-team.json"), team).unwrap();
        let create = ["supervisor", "create", "parser", "--team", "bad-team.json", "--id", "g9"];
        let out = harn_at(&root, &create);
        assert_eq!(out.status.code(), Some(2), "{team}: {}", text(&out));
        assert!(
            text(&out).contains("bad-team.json") && text(&out).contains(says),
            "{}",
            text(&out)
        );
    }
    std::fs::write(
        root.join("mission.json"),
        r#"{"objective": "o", "acceptance": [], "max_milestones": 2}"#,
    )
    .unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    std::fs::create_dir_all(root.join("workflows")).unwrap();
    let review = "workflows/agent-review.sh";
    std::fs::copy(examples.join(review), root.join(review)).unwrap();
    std::fs::copy(examples.join("replanning.json"), root.join("replanning.json")).unwrap();
    let team = r#"{"planner": {"instructions": "Plan."}, "implementer": {"instructions": "Do."}}"#;
    std::fs::write(root.join("mission-team.json"), team).unwrap();
    let create = [
        "supervisor",
        "create",
        "--team",
        "mission-team.json",
        "--id",
        "g9",
        "--mission",
        "mission.json",
        "--replanning",
        "replanning.json",
    ];
    let out = harn_at(&root, &create);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("mission.json: mission.acceptance"), "{}", text(&out));
    let goals_after = std::fs::read_dir(root.join(".harnery/supervisors")).unwrap().count();
    assert_eq!(goals_before, goals_after, "nothing was written");
}

/// `run list`'s columns line up under their header: the attempt number sits under `#`.
#[test]
fn run_list_columns_line_up() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("r");
    assert!(crate::cli::harn_at(&root, &["example"]).status.success());
    let out = crate::cli::harn_at(&root, &["run", "list"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let hash = header.find('#').unwrap();
    for row in lines {
        assert_eq!(&row[hash..=hash], "1", "{text}");
    }
}
