//! `harn work land` with the real binary and real git: accepted work lands on the branch its
//! worktree was made from, exactly as attested (a fast-forward, or a merge commit naming the
//! proof), once; a branch that moved after the review, a conflict and a dirty checkout are
//! refused with nothing changed; a land cut short before its record is found, not repeated.

use crate::cli::{json, text};
use crate::worktree::{git, Repo, RUN};

/// Runs `id` in its worktree to a passing proof and accepts it.
fn accepted(repo: &Repo, id: &str, parties: &str) {
    let args = [&RUN[..2], &[id][..], &RUN[2..]].concat();
    let out = repo.harn(&args, parties);
    assert_eq!(out.status.code(), Some(0), "{id}: {}", text(&out));
    let out = repo.harn(&["work", "accept", id], "");
    assert!(out.status.success(), "{id}: {}", text(&out));
}

fn land(repo: &Repo, args: &[&str]) -> std::process::Output {
    repo.harn(&[&["work", "land"][..], args].concat(), "")
}

#[test]
fn accepted_work_lands_once_on_its_base_branch_exactly_as_attested() {
    let repo = Repo::new();
    let root = repo.root();
    repo.create("a");
    // Not accepted yet: refused, saying what to type.
    let args = [&RUN[..2], &["a"][..], &RUN[2..]].concat();
    assert!(repo.harn(&args, "").status.success());
    let early = land(&repo, &["a"]);
    assert_eq!(early.status.code(), Some(1), "{}", text(&early));
    assert!(text(&early).contains("harn work accept a"), "{}", text(&early));
    assert!(repo.harn(&["work", "accept", "a"], "").status.success());
    let branch = git(&root, &["rev-parse", "harn/a"]);
    let out = land(&repo, &["a", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let doc = json(&out);
    assert_eq!(
        (doc["into"].as_str(), doc["method"].as_str()),
        (Some("main"), Some("fast-forward"))
    );
    assert_eq!(doc["commit"], branch.as_str(), "{doc}");
    // main moved, and its checked-out files with it.
    assert_eq!(git(&root, &["rev-parse", "main"]), branch);
    assert_eq!(std::fs::read_to_string(root.join("shared.txt")).unwrap(), "base\na\n");
    // Its worktree is gone (git's record of it too); its branch stays.
    assert!(!repo.dir.path().join("repo.worktrees/a").exists());
    assert!(!git(&root, &["worktree", "list"]).contains("repo.worktrees/a"));
    assert_eq!(git(&root, &["rev-parse", "harn/a"]), branch);
    // Landing again changes nothing.
    let again = land(&repo, &["a", "--json"]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    assert_eq!(json(&again)["landed_now"], false);
    let shown = text(&repo.harn(&["work", "show", "a"], ""));
    assert!(shown.contains(&format!("landed on main as {}", &branch[..12])), "{shown}");
}

#[test]
fn a_branch_moved_after_its_review_is_refused_with_nothing_changed() {
    let repo = Repo::new();
    let root = repo.root();
    repo.create("a");
    accepted(&repo, "a", "");
    let before = git(&root, &["rev-parse", "main"]);
    // Someone commits on the item's branch after it was accepted.
    let tree = git(&root, &["rev-parse", "harn/a^{tree}"]);
    let moved = git(&root, &["commit-tree", &tree, "-p", "harn/a", "-m", "sneaked in"]);
    git(&root, &["update-ref", "refs/heads/harn/a", &moved]);
    let out = land(&repo, &["a"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("moved after it was reviewed") && text(&out).contains(&moved),
        "{}",
        text(&out)
    );
    assert_eq!(git(&root, &["rev-parse", "main"]), before, "main untouched");
    // Put back, the branch would land; a proof changed on disk is caught (by its seal, and
    // by the digest the acceptance recorded) before anything moves.
    git(&root, &["update-ref", "refs/heads/harn/a", &format!("{moved}~1")]);
    let p = json(&repo.harn(&["work", "show", "a", "--json"], ""))["projection"]["latest_run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let proof = root.join(format!(".harnery/workflows/{p}/proof.json"));
    let mut bytes = std::fs::read(&proof).unwrap();
    bytes.push(b'\n');
    std::fs::write(&proof, bytes).unwrap();
    let out = land(&repo, &["a"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("does not count") || said.contains("not the proof that was accepted"),
        "{said}"
    );
    assert_eq!(git(&root, &["rev-parse", "main"]), before, "main untouched");
}

#[test]
fn a_second_item_on_the_same_lines_conflicts_naming_the_file_and_a_diverged_branch_merges() {
    let repo = Repo::new();
    let root = repo.root();
    for id in ["a", "b", "c"] {
        repo.create(id);
    }
    // a and b append to shared.txt at once; c runs after a landed, from a main that moved.
    let children: Vec<_> = ["a", "b"]
        .iter()
        .map(|id| {
            let args = [&RUN[..2], &[*id][..], &RUN[2..]].concat();
            let mut cmd = repo.command(&args, "a b");
            cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
            cmd.spawn().unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }
    for id in ["a", "b"] {
        assert!(repo.harn(&["work", "accept", id], "").status.success());
    }
    assert!(land(&repo, &["a"]).status.success());
    let after_a = git(&root, &["rev-parse", "main"]);
    let out = land(&repo, &["b"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("conflicts in shared.txt"), "{}", text(&out));
    assert!(text(&out).contains("landed work that changed them: a"), "{}", text(&out));
    assert_eq!(git(&root, &["rev-parse", "main"]), after_a, "main untouched");
    // main moves on its own; c's branch (made before that) lands as a merge commit.
    accepted(&repo, "c", "");
    std::fs::write(root.join("other.txt"), "on main\n").unwrap();
    git(&root, &["add", "other.txt"]);
    git(&root, &["commit", "-qm", "meanwhile"]);
    let out = land(&repo, &["c", "--json"]);
    // c also appended to shared.txt, from a's line: it merges cleanly over a.
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let doc = json(&out);
    assert_eq!(doc["method"], "merge", "{doc}");
    let message = git(&root, &["log", "-1", "--format=%B", "main"]);
    assert!(message.starts_with("Land c: c") && message.contains("Harn-Proof: "), "{message}");
    let parents = git(&root, &["log", "-1", "--format=%P", "main"]);
    assert!(parents.contains(&git(&root, &["rev-parse", "harn/c"])), "{parents}");
    assert!(root.join("other.txt").exists(), "the checkout kept main's own change");
}

#[test]
fn a_land_cut_short_before_its_record_is_found_and_a_dirty_checkout_is_refused() {
    let repo = Repo::new();
    let root = repo.root();
    repo.create("a");
    accepted(&repo, "a", "");
    // A dirty checkout of main: refused, naming the file.
    std::fs::write(root.join("shared.txt"), "edited by hand\n").unwrap();
    let out = land(&repo, &["a"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("changes not committed: shared.txt"), "{}", text(&out));
    git(&root, &["checkout", "--", "shared.txt"]);
    // The branch moved (a land killed before its record): found, recorded, not repeated.
    git(&root, &["merge", "-q", "--ff-only", "harn/a"]);
    let out = land(&repo, &["a", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(json(&out)["method"], "found already there");
    assert_eq!(git(&root, &["rev-parse", "main"]), git(&root, &["rev-parse", "harn/a"]));
    // With --delete-branch the branch goes too, once landed.
    repo.create("b");
    accepted(&repo, "b", "");
    let out = land(&repo, &["b", "--delete-branch", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(
        (json(&out)["worktree_removed"].as_bool(), json(&out)["branch_deleted"].as_bool()),
        (Some(true), Some(true))
    );
    assert!(git(&root, &["branch", "--list", "harn/b"]).is_empty());
}

#[test]
fn prune_removes_exactly_the_worktrees_no_attempt_will_use_again() {
    let repo = Repo::new();
    let root = repo.root();
    for id in ["kept-accepted", "kept-review", "gone-cancelled", "dirty-cancelled"] {
        repo.create(id);
        let args = [&RUN[..2], &[id][..], &RUN[2..]].concat();
        assert!(repo.harn(&args, "").status.success(), "{id}");
    }
    assert!(repo.harn(&["work", "accept", "kept-accepted"], "").status.success());
    let trees = repo.dir.path().join("repo.worktrees");
    // work show says where each worktree is and what it takes.
    let shown = json(&repo.harn(&["work", "show", "kept-review", "--json"], ""));
    assert_eq!(shown["worktree"]["exists"], true, "{shown}");
    assert!(shown["worktree"]["bytes"].as_u64() > Some(0), "{shown}");
    // A cancel removes the repository the item's attempt worked in; what it held that was
    // never committed is kept, under refs/harn/left/ID.
    std::fs::write(trees.join("dirty-cancelled/notes.txt"), "unsaved\n").unwrap();
    for id in ["gone-cancelled", "dirty-cancelled"] {
        let out = repo.harn(&["work", "cancel", id], "");
        assert!(out.status.success(), "{id}: {}", text(&out));
        assert!(!trees.join(id).exists(), "a cancel removed its repository");
    }
    let kept = git(&root, &["show", "refs/harn/left/dirty-cancelled:notes.txt"]);
    assert_eq!(kept, "unsaved");
    // Put them back as linked worktrees an older harn made and a cancel left, one of them
    // with changes.
    for id in ["gone-cancelled", "dirty-cancelled"] {
        let path = trees.join(id);
        git(&root, &["worktree", "add", "-q", path.to_str().unwrap(), &format!("harn/{id}")]);
    }
    std::fs::write(trees.join("dirty-cancelled/notes.txt"), "unsaved\n").unwrap();
    // A worktree on a harn/ branch no item has.
    git(
        &root,
        &["worktree", "add", "-q", "-b", "harn/ghost", trees.join("ghost").to_str().unwrap()],
    );
    let listed = |out: &std::process::Output| -> Vec<(String, bool)> {
        let mut rows: Vec<(String, bool)> = json(out)["worktrees"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| (w["id"].as_str().unwrap().to_owned(), w["prunable"].as_bool().unwrap()))
            .collect();
        rows.sort();
        rows
    };
    let dry = repo.harn(&["work", "prune", "--dry-run", "--json"], "");
    assert!(dry.status.success(), "{}", text(&dry));
    let expected = [
        ("dirty-cancelled", false),
        ("ghost", true),
        ("gone-cancelled", true),
        ("kept-accepted", false),
        ("kept-review", false),
    ];
    let expected: Vec<(String, bool)> = expected.iter().map(|(i, p)| (i.to_string(), *p)).collect();
    assert_eq!(listed(&dry), expected);
    assert!(trees.join("gone-cancelled").exists(), "a dry run removes nothing");
    let out = repo.harn(&["work", "prune"], "");
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("uncommitted changes"), "{}", text(&out));
    assert!(!trees.join("gone-cancelled").exists() && !trees.join("ghost").exists());
    for kept in ["kept-accepted", "kept-review", "dirty-cancelled"] {
        assert!(trees.join(kept).exists(), "{kept}");
    }
    assert!(!git(&root, &["worktree", "list"]).contains("gone-cancelled"));
    assert!(!git(&root, &["branch", "--list", "harn/gone-cancelled"]).is_empty(), "branches stay");
    let forced = repo.harn(&["work", "prune", "--force"], "");
    assert!(forced.status.success(), "{}", text(&forced));
    assert!(!trees.join("dirty-cancelled").exists());
    let bad = repo.harn(&["work", "prune", "--older-than", "7w"], "");
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
}

/// Each item of a chain starts from its prerequisite's accepted work, without anything
/// having landed yet: its branch is made holding that commit, recorded in its proof, and
/// its attested diff is its own change only. Landed in order, the base branch holds all.
#[test]
fn a_chain_of_three_items_each_sees_its_prerequisites_accepted_change() {
    let repo = Repo::new();
    let root = repo.root();
    repo.create("p1");
    for (id, dep) in [("p2", "p1"), ("p3", "p2")] {
        let create = format!(
            "work create {id} wf.sh --id {id} --objective edit --accept edited --depends-on {dep}"
        );
        let out = repo.harn(&create.split(' ').collect::<Vec<_>>(), "");
        assert!(out.status.success(), "{}", text(&out));
    }
    for id in ["p1", "p2", "p3"] {
        accepted(&repo, id, "");
    }
    let file = git(&root, &["show", "harn/p3:shared.txt"]);
    assert_eq!(file, "base\np1\np2\np3", "p3 saw p1 and p2");
    let run = json(&repo.harn(&["work", "show", "p3", "--json"], ""))["projection"]
        ["latest_run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let proof: serde_json::Value = serde_json::from_slice(
        &std::fs::read(root.join(format!(".harnery/workflows/{run}/proof.json"))).unwrap(),
    )
    .unwrap();
    let ws = &proof["workspace"];
    let p2 = git(&root, &["rev-parse", "harn/p2"]);
    assert_eq!(ws["prerequisites"][0]["id"], "p2", "{ws}");
    assert_eq!(ws["prerequisites"][0]["commit"], p2.as_str(), "{ws}");
    assert_eq!(ws["files_changed"], 1, "only p3's own change is attested: {ws}");
    // Nothing landed yet; main is untouched until each lands, in order.
    assert_eq!(std::fs::read_to_string(root.join("shared.txt")).unwrap(), "base\n");
    for id in ["p1", "p2", "p3"] {
        let out = land(&repo, &[id]);
        assert!(out.status.success(), "{id}: {}", text(&out));
    }
    assert_eq!(std::fs::read_to_string(root.join("shared.txt")).unwrap(), "base\np1\np2\np3\n");
}

/// Asks the goal's scripted agent to do the item's objective, then commits what it did.
const AGENT_WORKFLOW: &str = r#"#!/bin/sh
read -r start
objective=$(printf '%s' "$start" | sed -n 's/.*"objective":"\([^"]*\)".*/\1/p')
printf '{"op":"agent","id":"implement","prompt":"%s"}\n' "$objective"
read -r reply
case "$reply" in *'"ok":true'*) ;; *) echo '{"op":"result","ok":false,"error":"the agent failed"}'; exit 0 ;; esac
git add -A >/dev/null && git commit -qm "$HARN_WORK_ID" || exit 3
echo '{"op":"evidence","kind":"test","status":"passed","label":"edited","acceptanceIds":["accept-1"]}'
echo '{"op":"result","ok":true,"summary":"edited"}'
"#;

/// A scripted agent: writes the parser, or wires the cli to the parser it finds.
const EDITOR: &str = r#"#!/bin/sh
prompt=$(cat)
case "$prompt" in
  *WIRE-THE-CLI*) if [ -e parser.txt ]; then echo "wired to $(cat parser.txt)" > cli.txt; else echo "no parser" > cli.txt; fi ;;
  *WRITE-THE-PARSER*) echo "the parser" > parser.txt ;;
esac
echo done
"#;

/// A goal over `parser` and `cli` (which depends on it), each done by a scripted agent in
/// its own worktree, with passing proofs accepted and accepted work landed: both changes end
/// on main, `cli`'s agent saw the parser, and no worktree is left.
#[test]
fn a_goal_that_lands_accepted_work_ends_with_both_changes_on_main_and_no_worktree() {
    let repo = Repo::new();
    let root = repo.root();
    for (name, body) in [("chain.sh", AGENT_WORKFLOW), ("editor.sh", EDITOR)] {
        std::fs::write(root.join(name), body).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(root.join(name), mode).unwrap();
    }
    let team = r#"{"implementer": {"instructions": "Implement it.", "harness": "scripted"}}"#;
    std::fs::write(root.join("team.json"), team).unwrap();
    let editor = root.join("editor.sh");
    let config = serde_json::json!({"containment": {"writable": [repo.barrier.path()]},
                                    "harnesses": {"scripted": {"command": [editor]}}});
    std::fs::write(root.join(".harnery/config.json"), config.to_string()).unwrap();
    git(&root, &["add", "chain.sh", "editor.sh", "team.json"]);
    git(&root, &["commit", "-qm", "the chain's workflow and agent"]);
    for (id, objective, deps) in
        [("parser", "WRITE-THE-PARSER", None), ("cli", "WIRE-THE-CLI", Some("parser"))]
    {
        let mut args = vec!["work", "create", id, "chain.sh", "--id", id, "--objective", objective];
        args.extend(["--accept", "edited"]);
        if let Some(d) = deps {
            args.extend(["--depends-on", d]);
        }
        let out = repo.harn(&args, "");
        assert!(out.status.success(), "{}", text(&out));
    }
    let create = ["supervisor", "create", "cli", "--team", "team.json", "--id", "ship"];
    let out =
        repo.harn(&[&create[..], &["--accept-passing-proof", "--land-accepted"]].concat(), "");
    assert!(out.status.success(), "{}", text(&out));
    let run = ["supervisor", "run", "ship", "--isolation", "worktree", "--harness", "scripted"];
    let out = repo.harn(&run, "");
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("land parser: landed on main"), "{}", text(&out));
    assert!(text(&out).contains("land cli: landed on main"), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(root.join("parser.txt")).unwrap(), "the parser\n");
    assert_eq!(std::fs::read_to_string(root.join("cli.txt")).unwrap(), "wired to the parser\n");
    let trees = repo.dir.path().join("repo.worktrees");
    let left: Vec<_> = std::fs::read_dir(&trees).map(|d| d.flatten().collect()).unwrap_or_default();
    assert!(left.is_empty(), "no worktree left: {left:?}");
    let shown = json(&repo.harn(&["supervisor", "show", "ship", "--json"], ""));
    assert_eq!(shown["projection"]["state"], "succeeded", "{shown}");
}

/// A branch made from another branch's unreviewed commits never lands them elsewhere: onto
/// `main` it is refused, onto the branch it was made from it lands.
#[test]
fn work_made_from_another_branch_lands_there_and_not_onto_main() {
    let repo = Repo::new();
    let root = repo.root();
    git(&root, &["checkout", "-q", "-b", "feature"]);
    std::fs::write(root.join("feature.txt"), "not on main\n").unwrap();
    git(&root, &["add", "feature.txt"]);
    git(&root, &["commit", "-qm", "feature work"]);
    git(&root, &["checkout", "-q", "main"]);
    repo.create("x");
    let args = [&RUN[..2], &["x"][..], &RUN[2..], &["--base", "feature"][..]].concat();
    assert!(repo.harn(&args, "").status.success());
    assert!(repo.harn(&["work", "accept", "x"], "").status.success());
    let main = git(&root, &["rev-parse", "main"]);
    let out = land(&repo, &["x", "--into", "main"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("review did not cover"), "{}", text(&out));
    assert_eq!(git(&root, &["rev-parse", "main"]), main, "main untouched");
    let onto_item = land(&repo, &["x", "--into", "harn/x"]);
    assert_eq!(onto_item.status.code(), Some(1), "{}", text(&onto_item));
    let out = land(&repo, &["x", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(json(&out)["into"], "feature");
}
