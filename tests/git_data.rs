//! What a run leaves is data, never code: a worktree's own configuration a run wrote (a
//! clean filter in `config.worktree`) is never executed by harn's own git commands (land,
//! cancel, prune), and with a repository a run made in its workspace it is a guarded change
//! that refuses acceptance and landing until a person confirms it; trailers a run wrote never
//! make another item's work count as landed.

use crate::cli::{json, text};
use crate::worktree::{git, Repo, RUN};
use std::path::Path;

/// Plants a clean filter in its worktree's own configuration, as any agent could, and
/// commits a file the filter applies to: a `git status` in the worktree would run it. The
/// filter touches `$PWNED`, outside everything the run may write.
const FILTER_WORKFLOW: &str = r#"#!/bin/sh
read -r start
gd=$(git rev-parse --absolute-git-dir)
cat > "$gd/evil.sh" <<EOF
#!/bin/sh
touch "$PWNED" 2>/dev/null
cat
EOF
chmod +x "$gd/evil.sh"
git config filter.evil.clean "$gd/evil.sh" || exit 4
echo '*.txt filter=evil' > .gitattributes
echo "$HARN_WORK_ID" > x.txt
git add -A >/dev/null && git commit -qm "$HARN_WORK_ID" || exit 3
# A stat that no longer matches the index makes git read the file again, through the filter.
touch -d "@$(( $(date +%s) + 3600 ))" x.txt
echo '{"op":"result","ok":true,"summary":"planted"}'
"#;

fn with_workflow(repo: &Repo, name: &str, body: &str) {
    let path = repo.root().join(name);
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

fn create(repo: &Repo, id: &str, workflow: &str) {
    let args = ["work", "create", id, workflow, "--id", id, "--objective", "o"];
    let out = repo.harn(&args, "");
    assert!(out.status.success(), "{}", text(&out));
}

fn latest_run(repo: &Repo, id: &str) -> String {
    let shown = json(&repo.harn(&["work", "show", id, "--json"], ""));
    shown["projection"]["latest_run_id"].as_str().unwrap().to_owned()
}

#[test]
fn a_filter_in_a_worktrees_own_config_never_runs_as_the_person_and_holds_its_land() {
    let repo = Repo::new();
    let root = repo.root();
    // The person's repository turns worktree configuration on (`git sparse-checkout set`
    // does).
    git(&root, &["config", "extensions.worktreeConfig", "true"]);
    with_workflow(&repo, "filter.sh", FILTER_WORKFLOW);
    let pwned = repo.dir.path().join("PWNED");
    for id in ["t", "u"] {
        create(&repo, id, "filter.sh");
        let args = [&RUN[..2], &[id][..], &RUN[2..]].concat();
        let out = repo.command(&args, "").env("PWNED", &pwned).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{id}: {}", text(&out));
        assert!(!pwned.exists(), "the run's own git ran its filter outside its wall");
    }
    // The run's config is its own repository's, never read outside it; the attributes it
    // committed pick a driver, which holds the item's acceptance for a person.
    let run = latest_run(&repo, "t");
    let shown = json(&repo.harn(&["run", "show", &run, "--json"], ""));
    let changes = shown["guarded_changes"].as_array().unwrap();
    assert!(
        changes.iter().any(|c| c["path"].as_str().unwrap().ends_with("/t/.gitattributes")),
        "{shown}"
    );
    let refused = repo.harn(&["work", "accept", "t"], "");
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    let said = text(&refused);
    assert!(said.contains(".gitattributes") && said.contains("*.txt filter=evil"), "{said}");
    assert!(said.contains("harn work accept t --accept-guarded-change"), "{said}");
    assert!(!said.contains("accepted t"), "{said}");
    let out = repo.harn(&["work", "accept", "t", "--accept-guarded-change"], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // Landing removes the worktree; git's own look for changes there would run the filter.
    let out = repo.harn(&["work", "land", "t"], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!repo.dir.path().join("repo.worktrees/t").exists(), "{}", text(&out));
    assert!(!pwned.exists(), "work land ran the run's filter as the person");
    // A cancel removes a clean worktree the same way.
    let out = repo.harn(&["work", "cancel", "u", "--reason", "no"], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!repo.dir.path().join("repo.worktrees/u").exists(), "{}", text(&out));
    assert!(!pwned.exists(), "work cancel ran the run's filter as the person");
}

#[test]
fn a_repository_a_run_makes_in_its_workspace_is_reported_and_holds_acceptance() {
    let repo = Repo::new();
    let root = repo.root();
    with_workflow(
        &repo,
        "nest.sh",
        "#!/bin/sh\nread -r start\ngit init -q src && git -C src config core.fsmonitor \
         \"$PWD/src/monitor.sh\"\necho '{\"op\":\"result\",\"ok\":true,\"summary\":\"nested\"}'\n",
    );
    create(&repo, "n", "nest.sh");
    let out = repo.harn(&["work", "run", "n"], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let run = latest_run(&repo, "n");
    let shown = json(&repo.harn(&["run", "show", &run, "--json"], ""));
    let nested = root.join("src/.git").display().to_string();
    let changes = shown["guarded_changes"].as_array().unwrap();
    assert!(changes.iter().any(|c| c["path"] == nested.as_str()), "{shown}");
    let said = text(&repo.harn(&["run", "show", &run], ""));
    assert!(said.contains(&nested), "{said}");
    let refused = repo.harn(&["work", "accept", "n"], "");
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    assert!(text(&refused).contains(&format!("made {nested}")), "{}", text(&refused));
    let out = repo.harn(&["work", "accept", "n", "--accept-guarded-change"], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // Confirmed once; a later look finds nothing pending for it.
    let shown = json(&repo.harn(&["work", "show", "n", "--json"], ""));
    assert_eq!(shown["projection"]["state"], "succeeded", "{shown}");
}

/// Appends its id to `$FILE` and commits with `$TRAILERS` as the message's trailers.
const TRAILER_WORKFLOW: &str = r#"#!/bin/sh
read -r start
echo "$HARN_WORK_ID" >> "${FILE:-shared.txt}"
git add -A >/dev/null && git commit -qm "$HARN_WORK_ID" ${TRAILERS:+-m "$TRAILERS"} || exit 3
echo '{"op":"result","ok":true,"summary":"edited"}'
"#;

#[test]
fn trailers_another_run_wrote_never_make_an_item_count_as_landed() {
    let repo = Repo::new();
    let root = repo.root();
    with_workflow(&repo, "tr.sh", TRAILER_WORKFLOW);
    for id in ["a", "b"] {
        create(&repo, id, "tr.sh");
    }
    let args = [&RUN[..2], &["b"][..], &RUN[2..]].concat();
    assert!(repo.harn(&args, "").status.success());
    assert!(repo.harn(&["work", "accept", "b"], "").status.success());
    // b's accepted proof, as a run can read it in `.harnery/`.
    let events = std::fs::read_to_string(root.join(".harnery/work/b/events.jsonl")).unwrap();
    let proof = events
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|e| e["body"]["proof_sha256"].as_str().map(str::to_owned))
        .expect("an acceptance names its proof");
    // a's run commits with trailers that name b and b's proof.
    let args = [&RUN[..2], &["a"][..], &RUN[2..]].concat();
    let forged = format!("Harn-Work-Item: b\nHarn-Proof: {proof}");
    let out = repo.command(&args, "").env("TRAILERS", forged).env("FILE", "a.txt").output();
    assert!(out.unwrap().status.success());
    assert!(repo.harn(&["work", "accept", "a"], "").status.success());
    let out = repo.harn(&["work", "land", "a"], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let b_branch = git(&root, &["rev-parse", "harn/b"]);
    // b lands for real (a merge: main moved), never "found already there".
    let out = repo.harn(&["work", "land", "b", "--delete-branch", "--json"], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let doc = json(&out);
    assert_ne!(doc["method"], "found", "{doc}");
    assert_eq!(doc["landed_now"], true, "{doc}");
    let merged = git(&root, &["merge-base", "--is-ancestor", &b_branch, "main"]);
    assert_eq!(merged, "", "b's reviewed commit is on main");
    assert_eq!(std::fs::read_to_string(root.join("shared.txt")).unwrap(), "base\nb\n");
    assert!(Path::new(&root.join("a.txt")).exists());
}
