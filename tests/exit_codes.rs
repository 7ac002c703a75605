//! One meaning per exit code (docs/CLI.md): 0 done, 1 a failure of the work or the machine,
//! 2 bad input, an unknown name among it. The real binary.

use crate::cli::{harn_at, text};

#[test]
fn an_unknown_work_item_is_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("r");
    assert!(harn_at(&root, &["example"]).status.success());
    for verb in ["show", "run", "retry", "cancel", "accept", "reopen"] {
        let out = harn_at(&root, &["work", verb, "nosuch"]);
        assert_eq!(out.status.code(), Some(2), "work {verb} nosuch: {}", text(&out));
        assert!(text(&out).contains("no work item nosuch"), "work {verb}: {}", text(&out));
    }
}

#[test]
fn an_unknown_harness_or_profile_is_bad_input() {
    let root = crate::harness_daemon::Root::new(
        "[harness.a]\ncommand = [\"sleep\", \"100\"]\n\n[profile.day]\nharnesses = [\"a\"]\n",
    );
    root.up();
    for args in [&["start", "nosuch"][..], &["stop", "nosuch"][..], &["restart", "a", "nosuch"][..]]
    {
        let out = root.harn(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains("no harness named \"nosuch\""), "{args:?}: {}", text(&out));
    }
    let out = root.harn(&["profile", "use", "nosuch"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("no profile named"), "{}", text(&out));
}

/// A workflow that cannot run is refused when it is named; one that prints something else
/// than the protocol is told with the line it printed; `run show` names its stderr.log and
/// shows its last lines when the run failed.
#[test]
fn bad_workflows_are_found_where_they_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("r");
    assert!(harn_at(&root, &["example"]).status.success());
    std::fs::write(root.join("notes.txt"), "just some text\n").unwrap();
    let out = harn_at(&root, &["work", "create", "T", "notes.txt", "--objective", "o"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("#!"), "{}", text(&out));
    assert!(!root.join(".harnery/work/t").exists());

    std::fs::write(
        root.join("chatty.sh"),
        "#!/bin/sh\necho 'hello there'\necho oops >&2\nexit 3\n",
    )
    .unwrap();
    let create = ["work", "create", "Chatty", "chatty.sh", "--objective", "o", "--id", "chatty"];
    assert!(harn_at(&root, &create).status.success());
    let run = harn_at(&root, &["work", "run", "chatty", "--harness", "scripted"]);
    assert_eq!(run.status.code(), Some(1), "{}", text(&run));
    let list = crate::cli::json(&harn_at(&root, &["run", "list", "--json"]));
    let run_id = list["runs"][0]["run_id"].as_str().unwrap().to_owned();
    let show = harn_at(&root, &["run", "show", &run_id]);
    assert!(text(&show).contains("stderr.log"), "{}", text(&show));
    assert!(text(&show).contains("oops"), "the last lines of stderr: {}", text(&show));
    let proof = crate::cli::json(&harn_at(&root, &["run", "show", &run_id, "--json"]));
    assert!(proof.to_string().contains("hello there"), "the line it printed: {proof}");
}

/// An effort word no preset takes is said when the goal is made, not frozen unseen.
#[test]
fn an_unknown_effort_word_is_said_at_create() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("r");
    assert!(harn_at(&root, &["example"]).status.success());
    std::fs::write(
        root.join("ultra.json"),
        r#"{"worker": {"instructions": "x", "effort": "ultra"}}"#,
    )
    .unwrap();
    let out = harn_at(&root, &["supervisor", "create", "cli", "--team", "ultra.json", "--id", "u"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("effort \"ultra\""), "{}", text(&out));
}
