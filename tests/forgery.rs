//! A workflow or an agent that forges harn's records, with the real binary in real
//! directories: an acceptance, an approval ruling, a goal's and an item's intent, a proof.
//! Contained (the default where the kernel allows), every forging write fails and the run's
//! outcome is what it would have been. Uncontained (`--no-containment`), each forgery lands
//! on disk and every verb that reads it detects it and refuses it, naming the file; a copied
//! proof is set aside and never counted.

use crate::cli::{harn_bin, json, text};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The forging workflow: forges (directly, or through its agent call when `FORGE_BY=agent`)
/// and then passes or fails as its mode needs.
const WORKFLOW: &str = r#"#!/bin/sh
read -r start
mode=${FORGE_MODE:-none}
case "$mode" in
  none|fail|ask) ;;
  *)
    if [ "${FORGE_BY:-workflow}" = agent ]; then
      echo '{"op":"agent","id":"a1","prompt":"forge"}'
      read -r reply
    else
      python3 "$FORGE_PY" "$mode" || echo "forge refused" >&2
    fi ;;
esac
pass() {
  echo '{"op":"evidence","kind":"test","status":"passed","label":"it passes","acceptanceIds":["accept-1"]}'
  echo '{"op":"result","ok":true,"summary":"done"}'
  exit 0
}
case "$mode" in
  none|goal) pass ;;
  decision|ask)
    echo '{"op":"authorize","id":"push","action":"push","target":"main"}'
    read -r verdict
    case "$verdict" in *'"verdict":"allow"'*) pass ;; esac
    echo '{"op":"result","ok":false,"error":"the push was not authorized"}'
    exit 1 ;;
  *)
    echo '{"op":"result","ok":false,"error":"forged, then failed"}'
    exit 1 ;;
esac
"#;

/// A root with the forging workflow, a forging harness and the example policy.
struct Root {
    dir: tempfile::TempDir,
    /// The host options every run and tick gets: none, or `--no-containment`.
    host: &'static [&'static str],
}

impl Root {
    fn new(host: &'static [&'static str]) -> Root {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("wf.sh"), WORKFLOW).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(root.join("wf.sh"), mode).unwrap();
        let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
        std::fs::copy(examples.join("policy.json"), root.join("policy.json")).unwrap();
        std::fs::create_dir_all(root.join(".harnery")).unwrap();
        // The agent forges with the same helper, then answers.
        let config = r#"{"harnesses": {"forger": {"command":
            ["sh", "-c", "python3 \"$FORGE_PY\" \"$FORGE_MODE\" >&2; echo forged"]}}}"#;
        std::fs::write(root.join(".harnery/config.json"), config).unwrap();
        Root { dir, host }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn harn(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let forge = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/forge.py");
        let runs = matches!(args, ["work", "run" | "retry", ..] | ["supervisor", "tick", ..]);
        Command::new(harn_bin())
            .args(args)
            .args(if runs { self.host } else { &[] })
            .arg("--root")
            .arg(self.path())
            .env("FORGE_PY", forge)
            .envs(env.iter().copied())
            .output()
            .unwrap()
    }

    fn create(&self, id: &str, extra: &[&str]) {
        let args = ["work", "create", id, "wf.sh", "--id", id, "--objective", "o"];
        let out = self.harn(&[&args[..], &["--accept", "it passes"], extra].concat(), &[]);
        assert!(out.status.success(), "{}", text(&out));
    }

    /// Work item `g1` and goal `goal` over it, whose team's one agent is the forger.
    fn forged_goal(&self) {
        self.create("g1", &[]);
        let team = r#"{"impl": {"instructions": "Do it.", "harness": "forger"}}"#;
        std::fs::write(self.path().join("team.json"), team).unwrap();
        let create = ["supervisor", "create", "g1", "--team", "team.json", "--id", "goal"];
        let out = self.harn(&create, &[]);
        assert!(out.status.success(), "{}", text(&out));
    }

    fn run(&self, id: &str, env: &[(&str, &str)]) -> Output {
        self.harn(&["work", "run", id, "--harness", "forger", "--json"], env)
    }

    fn show(&self, id: &str) -> Output {
        self.harn(&["work", "show", id, "--json"], &[])
    }

    fn run_dir(&self, run: &str) -> PathBuf {
        self.path().join(".harnery/workflows").join(run)
    }
}

fn latest_run(out: &Output) -> String {
    json(out)["run_id"].as_str().unwrap_or_else(|| panic!("a run id: {}", text(out))).to_owned()
}

fn refused(out: &Output, needle: &str) {
    assert_eq!(out.status.code(), Some(1), "refused: {}", text(out));
    assert!(text(out).contains(needle), "names the forgery ({needle}): {}", text(out));
}

/// Each forging party: the workflow itself, and its agent.
const BY: [&str; 2] = ["workflow", "agent"];

/// Uncontained: the forgery lands and is detected.
const OPEN: &[&str] = &["--no-containment"];
/// Contained: the forgery never lands.
const CONTAINED: &[&str] = &[];

/// True when this machine confines runs (Landlock and, for a workspace holding `.harnery/`, a
/// mount namespace); says so when it does not.
fn confines(root: &Root, run: &str) -> bool {
    let manifest = std::fs::read(root.run_dir(run).join("run.json")).unwrap();
    let manifest: Value = serde_json::from_slice(&manifest).unwrap();
    let confined = manifest["containment"]["confined"] == true;
    let offer = harn::work::confine::offer();
    if !confined {
        // A machine that offers both must confine: a run left open there is the defect.
        assert!(
            offer.landlock.is_err() || offer.namespace.is_err(),
            "this machine confines ({offer:?}), the run was not: {}",
            manifest["containment"]
        );
        crate::skip::skip(format!("the contained half: {}", manifest["containment"]["why"]));
    }
    confined
}

/// A file's bytes, or nothing.
fn bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_default()
}

#[test]
fn a_forged_acceptance_never_lands_contained() {
    for by in BY {
        let root = Root::new(CONTAINED);
        root.create("a", &[]);
        root.create("b", &["--depends-on", "a"]);
        let history = root.path().join(".harnery/work/a/events.jsonl");
        let before = bytes(&history);
        let out = root.run("a", &[("FORGE_MODE", "accept"), ("FORGE_BY", by)]);
        assert_eq!(out.status.code(), Some(1), "{by}: {}", text(&out));
        if !confines(&root, &latest_run(&out)) {
            return;
        }
        let after = String::from_utf8(bytes(&history)).unwrap();
        assert!(after.starts_with(std::str::from_utf8(&before).unwrap()));
        assert!(!after.contains("work.accepted"), "{by}: the write failed");
        let p = json(&root.show("a"))["projection"].clone();
        assert_eq!(
            (p["state"].as_str(), p["charged_attempts"].as_u64()),
            (Some("blocked"), Some(1))
        );
        let b = json(&root.show("b"))["projection"].clone();
        assert_eq!(b["state"], "waiting", "{by}: {b}");
    }
}

#[test]
fn a_forged_acceptance_is_refused_and_its_dependent_never_becomes_ready() {
    for by in BY {
        let root = Root::new(OPEN);
        root.create("a", &[]);
        root.create("b", &["--depends-on", "a"]);
        let out = root.run("a", &[("FORGE_MODE", "accept"), ("FORGE_BY", by)]);
        assert_eq!(out.status.code(), Some(1), "{by}: {}", text(&out));
        let events = std::fs::read_to_string(root.path().join(".harnery/work/a/events.jsonl"));
        assert!(events.unwrap().contains("work.accepted"), "{by}: the forgery is on disk");
        refused(&root.show("a"), "harn never recorded this acceptance");
        let list = root.harn(&["work", "list"], &[]);
        assert!(text(&list).contains("never recorded"), "{by}: {}", text(&list));
        let b = json(&root.show("b"));
        assert_ne!(b["projection"]["next_action"], "run", "{by}: {b}");
        let run_b = root.harn(&["work", "run", "b", "--harness", "forger"], &[]);
        assert_ne!(run_b.status.code(), Some(0), "{by}: {}", text(&run_b));
    }
}

#[test]
fn a_forged_ruling_never_lands_contained() {
    for by in BY {
        let root = Root::new(CONTAINED);
        root.create("s", &[]);
        let slot = if by == "agent" { "2" } else { "1" };
        let env = [("FORGE_MODE", "decision"), ("FORGE_BY", by), ("FORGE_SLOT", slot)];
        let args = ["work", "run", "s", "--harness", "forger", "--policy", "policy.json"];
        let out = root.harn(&[&args[..], &["--json"]].concat(), &env);
        assert_eq!(out.status.code(), Some(1), "{by}: parked: {}", text(&out));
        let doc = json(&out);
        if !confines(&root, doc["run_id"].as_str().unwrap()) {
            return;
        }
        assert_eq!(doc["parked"], true, "{by}: {doc}");
        let approval = doc["approval"]["approval_id"].as_str().unwrap().to_owned();
        let shown = json(&root.harn(&["approval", "show", &approval, "--json"], &[]));
        assert_eq!(shown["status"], "pending", "{by}: no forged ruling: {shown}");
        let p = json(&root.show("s"))["projection"].clone();
        assert_eq!(p["next_action"], "resolve_approval", "{by}: {p}");
    }
}

#[test]
fn a_forged_ruling_never_authorizes_and_a_person_ruling_again_sets_it_aside() {
    for by in BY {
        let root = Root::new(OPEN);
        root.create("s", &[]);
        // The agent call takes policy check 1, so the push is check 2 when an agent forges.
        let slot = if by == "agent" { "2" } else { "1" };
        let env = [("FORGE_MODE", "decision"), ("FORGE_BY", by), ("FORGE_SLOT", slot)];
        let args = ["work", "run", "s", "--harness", "forger", "--policy", "policy.json"];
        // The run parks on the push, and its own read of the item meets the forgery.
        refused(&root.harn(&args, &env), "was not recorded by `harn approval`");
        let approvals = std::fs::read_dir(root.path().join(".harnery/approvals")).unwrap();
        let approval = approvals
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|n| n.starts_with("wf-"))
            .expect("an approval");
        assert!(approval.ends_with(&format!("-p{slot}")), "{by}: {approval}");
        let decision = root.path().join(format!(".harnery/approvals/{approval}/decision.json"));
        assert!(decision.exists(), "{by}: the forgery is on disk");
        refused(&root.show("s"), "was not recorded by `harn approval`");
        refused(&root.harn(&["approval", "list"], &[]), "was not recorded by `harn approval`");
        let resumed = root.harn(&["work", "run", "s"], &env);
        refused(&resumed, "was not recorded by `harn approval`");
        // A person's ruling moves the forged decision aside and counts.
        let out = root.harn(&["approval", "deny", &approval, "--actor", "ana", "--json"], &[]);
        assert!(out.status.success(), "{by}: {}", text(&out));
        let dir = decision.parent().unwrap();
        let aside = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("decision.unrecorded-"));
        assert!(aside, "{by}: the forged decision is kept as evidence");
        let out = root.harn(&["work", "run", "s", "--json"], &env);
        assert_eq!(out.status.code(), Some(1), "{by}: {}", text(&out));
        let error = json(&out)["proof"]["run"]["error"].as_str().unwrap_or("").to_owned();
        assert!(error.contains("was denied"), "{by}: the person's ruling counts: {error}");
    }
}

#[test]
fn a_forged_goal_intent_never_lands_contained() {
    for by in BY {
        let root = Root::new(CONTAINED);
        root.forged_goal();
        let intent = root.path().join(".harnery/supervisors/goal/intent.json");
        let before = bytes(&intent);
        let env = [("FORGE_MODE", "goal"), ("FORGE_BY", by), ("FORGE_GOAL", "goal")];
        let tick = ["supervisor", "tick", "goal", "--harness", "forger"];
        let out = root.harn(&tick, &env);
        let run =
            json(&root.show("g1"))["projection"]["latest_run_id"].as_str().unwrap().to_owned();
        if !confines(&root, &run) {
            return;
        }
        assert!(out.status.success(), "{by}: {}", text(&out));
        assert_eq!(bytes(&intent), before, "{by}: the intent is as created");
        assert!(root.harn(&tick, &[]).status.success(), "the next tick reads it");
        let p = json(&root.show("g1"))["projection"].clone();
        assert_eq!(p["state"], "in_review", "{by}: its work was not accepted: {p}");
    }
}

#[test]
fn a_goal_intent_forged_with_its_digest_recomputed_is_refused_by_the_next_tick() {
    for by in BY {
        let root = Root::new(OPEN);
        root.forged_goal();
        let env = [("FORGE_MODE", "goal"), ("FORGE_BY", by), ("FORGE_GOAL", "goal")];
        let tick = ["supervisor", "tick", "goal", "--harness", "forger"];
        // The tick's own read after its cycle already meets the forgery.
        refused(&root.harn(&tick, &env), "is not the intent this goal was created with");
        let intent = root.path().join(".harnery/supervisors/goal/intent.json");
        let forged: Value = serde_json::from_slice(&std::fs::read(intent).unwrap()).unwrap();
        assert_eq!(forged["automation"]["accept_passing_proof"], true, "{by}: on disk");
        // Its own digest holds (the forger recomputed it as harn does); the journal's does not.
        let out = root.harn(&tick, &[]);
        refused(&out, "is not the intent this goal was created with");
        refused(&root.harn(&["supervisor", "show", "goal"], &[]), "was created with");
        let p = json(&root.show("g1"))["projection"].clone();
        assert_eq!(p["state"], "in_review", "{by}: its work was not accepted: {p}");
    }
}

#[test]
fn a_forged_work_intent_never_lands_contained() {
    for by in BY {
        let root = Root::new(CONTAINED);
        root.create("w", &[]);
        let intent = root.path().join(".harnery/work/w/intent.json");
        let before = bytes(&intent);
        let out = root.run("w", &[("FORGE_MODE", "intent"), ("FORGE_BY", by)]);
        assert_eq!(out.status.code(), Some(1), "{by}: {}", text(&out));
        if !confines(&root, &latest_run(&out)) {
            return;
        }
        assert_eq!(bytes(&intent), before, "{by}: the intent is as created");
        let p = json(&root.show("w"))["projection"].clone();
        assert_eq!(
            (p["state"].as_str(), p["attempts_remaining"].as_u64()),
            (Some("blocked"), Some(2))
        );
    }
}

#[test]
fn a_work_intent_forged_with_its_digest_recomputed_is_refused() {
    for by in BY {
        let root = Root::new(OPEN);
        root.create("w", &[]);
        let out = root.run("w", &[("FORGE_MODE", "intent"), ("FORGE_BY", by)]);
        assert_eq!(out.status.code(), Some(1), "{by}: {}", text(&out));
        let intent = root.path().join(".harnery/work/w/intent.json");
        let forged: Value = serde_json::from_slice(&std::fs::read(intent).unwrap()).unwrap();
        assert_eq!(forged["max_attempts"], 100, "{by}: the forgery is on disk");
        refused(&root.show("w"), "is not the intent this item was created with");
        refused(&root.harn(&["work", "run", "w"], &[]), "was created with");
    }
}

#[test]
fn a_copied_proof_never_lands_contained() {
    for by in BY {
        let root = Root::new(CONTAINED);
        let (_, failed) = copy_a_proof(&root, by);
        if !confines(&root, &failed) {
            return;
        }
        let transcript = std::fs::read_to_string(root.run_dir(&failed).join("transcript.jsonl"));
        assert!(!transcript.unwrap().contains("run.tampered"), "{by}: nothing was put there");
        let p = json(&root.show("bad"))["projection"].clone();
        assert_eq!(p["state"], "blocked", "{by}: its own failed proof: {p}");
    }
}

#[test]
fn a_copied_proof_is_set_aside_and_one_put_in_place_afterwards_is_refused() {
    for by in BY {
        let root = Root::new(OPEN);
        let (passing, failed) = copy_a_proof(&root, by);
        let p = json(&root.show("bad"))["projection"].clone();
        assert_ne!(p["state"], "in_review", "{by}: the copied proof did not count: {p}");
        let dir = root.run_dir(&failed);
        let aside = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("proof.foreign-"));
        assert!(aside, "{by}: the copied proof is kept aside as evidence");
        let transcript = std::fs::read_to_string(dir.join("transcript.jsonl")).unwrap();
        assert!(transcript.contains("run.tampered"), "{by}: and the run says so");

        // Another process of the same user replaces the proof after the run.
        std::fs::copy(root.run_dir(&passing).join("proof.json"), dir.join("proof.json")).unwrap();
        refused(&root.show("bad"), "harn did not write this proof");
        refused(&root.harn(&["run", "show", &failed], &[]), "harn did not write this proof");
        refused(&root.harn(&["work", "accept", "bad"], &[]), "harn did not write this proof");
    }
}

/// Runs item `good` to a passing proof, then item `bad` whose run (by `by`) copies that proof
/// over its own failing one; returns both runs.
fn copy_a_proof(root: &Root, by: &str) -> (String, String) {
    root.create("good", &[]);
    let passing = latest_run(&root.run("good", &[]));
    root.create("bad", &[]);
    let env = [("FORGE_MODE", "proof"), ("FORGE_BY", by), ("FORGE_FROM_RUN", &passing)];
    let out = root.run("bad", &env);
    assert_eq!(out.status.code(), Some(1), "{by}: {}", text(&out));
    (passing.clone(), latest_run(&out))
}

/// Forges `mode` as a process of the same user outside any run, after run `run` ended.
fn forge_after(root: &Root, mode: &str, run: &str, env: &[(&str, &str)]) {
    let forge = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/forge.py");
    let out = Command::new("python3")
        .arg(forge)
        .arg(mode)
        .current_dir(root.path())
        .env("HARN_RUN_ID", run)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(out.status.success(), "forge {mode}: {}", text(&out));
}

#[test]
fn an_acceptance_of_a_failed_proof_with_its_real_digest_is_refused_by_its_meaning() {
    let root = Root::new(OPEN);
    root.create("a", &[]);
    root.create("b", &["--depends-on", "a"]);
    let out = root.run("a", &[("FORGE_MODE", "fail")]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let run = latest_run(&out);
    assert_eq!(json(&root.show("a"))["projection"]["state"], "blocked");
    forge_after(&root, "accept-real", &run, &[]);
    refused(&root.show("a"), "whose proof did not pass");
    let b = json(&root.show("b"));
    assert_eq!(b["projection"]["state"], "waiting", "its dependent waits: {b}");
}

#[test]
fn a_second_goal_created_with_its_digest_recomputed_is_damage() {
    let root = Root::new(OPEN);
    root.forged_goal();
    let out = root.run("g1", &[]);
    let run = latest_run(&out);
    forge_after(&root, "goal-created", &run, &[("FORGE_GOAL", "goal")]);
    let show = root.harn(&["supervisor", "show", "goal"], &[]);
    refused(&show, "2 goal.created records");
    let tick = root.harn(&["supervisor", "tick", "goal", "--harness", "forger"], &[]);
    refused(&tick, "2 goal.created records");
}

#[test]
fn a_second_ruling_of_a_denied_approval_is_refused_by_its_meaning() {
    let root = Root::new(OPEN);
    root.create("s", &[]);
    let args = ["work", "run", "s", "--harness", "forger", "--policy", "policy.json", "--json"];
    let env = [("FORGE_MODE", "ask")];
    let out = root.harn(&args, &env);
    assert_eq!(out.status.code(), Some(1), "parked: {}", text(&out));
    let doc = json(&out);
    let run = doc["run_id"].as_str().unwrap().to_owned();
    let approval = doc["approval"]["approval_id"].as_str().unwrap().to_owned();
    let out = root.harn(&["approval", "deny", &approval, "--actor", "ana"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    forge_after(&root, "rule-again", &run, &[("FORGE_APPROVAL", &approval)]);
    refused(&root.harn(&["approval", "show", &approval], &[]), "is ruled on 2 times");
    let resumed = root.harn(&["work", "run", "s"], &[]);
    refused(&resumed, "is ruled on 2 times");
}

#[test]
fn a_failed_proof_rewritten_as_passed_with_its_seal_disagrees_with_its_transcript() {
    let root = Root::new(OPEN);
    root.create("p", &[]);
    let out = root.run("p", &[("FORGE_MODE", "fail")]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let run = latest_run(&out);
    forge_after(&root, "proof-pass", &run, &[]);
    refused(&root.show("p"), "its transcript's run.end names sha256");
    let list = root.harn(&["work", "list"], &[]);
    assert!(text(&list).contains("run.end names"), "{}", text(&list));
}
