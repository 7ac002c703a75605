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

/// Each verb's error paths, in the root `harn example` leaves (items `parser` and `cli`
/// accepted, goal `ship` succeeded, no daemon, no service): the arguments, the code, and a
/// word of the message.
const ERRORS: &[(&str, i32, &str)] = &[
    ("init --root /nonexistent/x", 2, "No such file"),
    ("example --root /proc/x", 2, "No such file"),
    ("work create T nosuch.sh --objective x", 2, "nosuch.sh"),
    ("work create T wf.sh --objective x --depends-on nosuch", 2, "no work item nosuch"),
    ("work create T wf.sh --objective x --id parser", 1, "parser"),
    ("work list --state nosuch", 2, "invalid value"),
    ("work show nosuch", 2, "no work item nosuch"),
    ("work show q", 2, "no work item q"),
    ("work cancel parser", 1, "cannot cancel parser"),
    ("work cancel cli --finding x", 2, "--finding"),
    ("work reopen nosuch", 2, "no work item nosuch"),
    ("work reject nosuch --feedback x", 2, "no work item nosuch"),
    ("work reject parser", 2, "reject needs --feedback"),
    ("work cancel parser --feedback x", 2, "--feedback belongs to reopen and reject"),
    ("work run parser", 1, "cannot start an attempt of parser"),
    ("work run nosuch", 2, "no work item nosuch"),
    ("work run parser --cwd nosuch", 2, "nosuch"),
    ("work retry parser", 1, "cannot start an attempt of parser"),
    ("work accept parser", 1, "cannot accept parser"),
    ("work accept nosuch", 2, "no work item nosuch"),
    ("work land parser", 1, "not made in a worktree"),
    ("work land nosuch", 2, "no work item nosuch"),
    ("work prune --older-than 3x", 2, "end a span"),
    ("work reconcile nosuch", 2, "no work item nosuch"),
    ("run show nosuch", 2, "no workflow run nosuch"),
    ("run show wf", 2, "is the start of 2 workflow run ids"),
    ("run follow nosuch", 2, "no workflow run nosuch"),
    ("run list --limit x", 2, "invalid value"),
    ("supervisor create nosuch --team team.json", 2, "no work item nosuch"),
    ("supervisor create parser --team nosuch.json", 2, "nosuch.json"),
    ("supervisor create parser --team team.json --id ship", 1, "ship"),
    ("supervisor list extra", 2, "unexpected argument"),
    ("supervisor show nosuch", 2, "no goal nosuch"),
    ("supervisor tick nosuch", 2, "no goal nosuch"),
    ("supervisor run nosuch", 2, "no goal nosuch"),
    ("supervisor plan list nosuch", 2, "no goal nosuch"),
    ("supervisor plan show ship nosuch", 2, "goal ship has no plan nosuch"),
    ("supervisor plan approve ship nosuch", 2, "goal ship has no plan nosuch"),
    ("supervisor plan reject ship nosuch --reason x", 2, "goal ship has no plan nosuch"),
    ("supervisor plan reopen ship --reason x", 1, "not a mission"),
    ("supervisor plan retry ship nosuch --reason x", 2, "goal ship has no plan nosuch"),
    ("supervisor service run nosuch", 2, "no goal nosuch"),
    ("supervisor service start nosuch", 2, "no goal nosuch"),
    ("supervisor service status --lines 3", 2, "unexpected argument"),
    ("supervisor service stop --timeout x", 2, "invalid value"),
    ("supervisor service logs --lines x", 2, "invalid value"),
    ("supervisor service unit --as nosuchuser", 2, "no such user"),
    ("approval list --status x", 2, "invalid value"),
    ("approval show nosuch", 2, "no approval nosuch"),
    ("approval approve nosuch", 2, "no approval nosuch"),
    ("approval deny nosuch", 2, "no approval nosuch"),
    ("dash --once --page nosuch", 2, "invalid value"),
    ("web --listen 0.0.0.0:0", 2, "--not-loopback"),
    ("fsck --root /nonexistent", 2, "No such file"),
    ("cluster check nosuch", 2, "no cluster \"nosuch\""),
    ("cluster probe --repository /nonexistent", 2, "--scratch"),
    ("cluster segment", 2, "no setup on standard input"),
    ("notify list --root /nonexistent", 2, "/nonexistent"),
    ("notify test --root /nonexistent", 2, "/nonexistent"),
    ("notify deliver --root /nonexistent", 2, "/nonexistent"),
    ("completions nosuch", 2, "invalid value"),
    ("man --dir /proc/nosuch", 1, "man"),
    ("sim run --seed x", 2, "invalid value"),
    ("sim seeds --seeds 5..1", 2, "the range 5..1 is empty"),
    ("sim replay /nonexistent", 2, "No such file"),
    ("sim minimize /nonexistent", 2, "No such file"),
    ("sim work --seeds x", 2, "expected A..B"),
    ("sim goals --seeds x", 2, "expected A..B"),
    ("sim service --seeds x", 2, "expected A..B"),
    ("sim day --seed x", 2, "invalid value"),
    ("harness daemon --config nosuch.toml", 2, "nosuch.toml: No such file"),
    ("harness up --config nosuch.toml", 2, "nosuch.toml: No such file"),
    ("harness down --timeout x", 2, "invalid value"),
    ("harness list --config /proc", 2, "not a regular file"),
    ("harness status nosuch", 2, "no harness named \"nosuch\""),
    ("harness start nosuch", 1, "no harness daemon is running"),
    ("harness stop nosuch", 1, "no harness daemon is running"),
    ("harness restart nosuch", 1, "no harness daemon is running"),
    ("harness profile use nosuch", 1, "no harness daemon is running"),
    ("harness reload", 1, "no harness daemon is running"),
    ("harness logs --since x", 2, "not a time"),
    ("harness events", 1, "no harness daemon is running"),
    ("harness ledger --since x", 2, "not a time"),
    ("harness attach nosuch", 2, "needs a terminal"),
    ("harness screen nosuch", 1, "no harness daemon is running"),
    ("harness send nosuch hi", 1, "no harness daemon is running"),
    ("harness unit --as nosuchuser", 2, "no such user"),
];

fn words(args: &str) -> Vec<&str> {
    args.split(' ').collect()
}

/// Every verb's error paths exit as docs/CLI.md's table of exit codes says: an option no verb
/// has and every row of `ERRORS`; each verb has a row.
#[test]
fn every_verb_s_error_paths_exit_as_documented() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("r");
    assert!(harn_at(&root, &["example"]).status.success());
    let mut wrong = Vec::new();
    let mut tree = crate::cli_reference::leaves();
    for (path, _) in &tree {
        let mut args = words(path);
        args.push("--no-such-option");
        let out = crate::cli::harn(&root, &args);
        if out.status.code() != Some(2) || !text(&out).contains("unexpected argument") {
            wrong.push(format!(
                "harn {path} --no-such-option: {:?} {}",
                out.status.code(),
                text(&out)
            ));
        }
    }
    for (args, code, says) in ERRORS {
        let out = crate::cli::harn(&root, &words(args));
        if out.status.code() != Some(*code) || !text(&out).contains(says) {
            wrong.push(format!(
                "harn {args}: exited {:?}, not {code} saying {says:?}: {}",
                out.status.code(),
                text(&out)
            ));
        }
    }
    tree.retain(|(path, _)| !ERRORS.iter().any(|(args, _, _)| args.starts_with(path.as_str())));
    for (path, _) in tree {
        wrong.push(format!("harn {path} has no row in ERRORS"));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A read verb where no root has begun fails (1) and says how to begin one.
#[test]
fn a_read_without_a_root_fails_and_names_harn_init() {
    let tmp = tempfile::tempdir().unwrap();
    for args in [
        "work list",
        "work show x",
        "supervisor list",
        "supervisor show x",
        "supervisor plan list x",
        "supervisor service status",
        "approval list",
        "approval show x",
        "run list",
        "run show x",
        "dash --once",
    ] {
        let out = crate::cli::harn(tmp.path(), &words(args));
        assert_eq!(out.status.code(), Some(1), "harn {args}: {}", text(&out));
        assert!(text(&out).contains("harn init"), "harn {args}: {}", text(&out));
    }
}
