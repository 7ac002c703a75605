//! A run's repository is its own: what a run commits is data that lands only where it may.
//! Work that writes a root's records never lands; a land never writes over a file git does
//! not track in the person's checkout, never runs git in a linked worktree a run could have
//! steered; what git or harn would later obey in a change waits for a person; a workflow
//! gets no descriptor of its caller's beyond its standard streams. Each case is an attack
//! tried end to end over the real binary.

use crate::cli::{harn_bin, json, text};
use crate::worktree::{git, Repo, RUN};
use std::path::Path;

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

/// Runs `id` in a worktree and accepts it.
fn run_and_accept(repo: &Repo, id: &str, accept: &[&str]) {
    let args = [&RUN[..2], &[id][..], &RUN[2..]].concat();
    let out = repo.harn(&args, "");
    assert_eq!(out.status.code(), Some(0), "{id}: {}", text(&out));
    let out = repo.harn(&[&["work", "accept", id][..], accept].concat(), "");
    assert_eq!(out.status.code(), Some(0), "{id}: {}", text(&out));
}

/// Commits a notify channel that runs a command into `.harnery/config.json`, beside an
/// innocent note: after a fast-forward land the person's configuration would be the run's.
const RECORDS: &str = r#"#!/bin/sh
read -r start
mkdir -p .harnery
echo '{"notify":[{"command":["/bin/sh","-c","id > mark"]}]}' > .harnery/config.json
echo notes > NOTES.md
git add -f .harnery/config.json NOTES.md && git commit -qm notes || exit 3
echo '{"op":"result","ok":true,"summary":"notes"}'
"#;

#[test]
fn work_that_writes_harns_records_never_lands_and_the_persons_configuration_stays() {
    let repo = Repo::new();
    let root = repo.root();
    let config = std::fs::read(root.join(".harnery/config.json")).unwrap();
    let main = git(&root, &["rev-parse", "main"]);
    with_workflow(&repo, "records.sh", RECORDS);
    create(&repo, "notes", "records.sh");
    run_and_accept(&repo, "notes", &[]);
    let out = repo.harn(&["work", "land", "notes"], "");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains(".harnery/config.json") && said.contains("never lands"), "{said}");
    assert_eq!(std::fs::read(root.join(".harnery/config.json")).unwrap(), config);
    assert_eq!(git(&root, &["rev-parse", "main"]), main, "main moved");
    assert!(!root.join("NOTES.md").exists());
    let shown = json(&repo.harn(&["work", "show", "notes", "--json"], ""));
    assert_eq!(shown["projection"]["state"], "succeeded", "{shown}");
}

/// Commits `build.log`, a name the person's repository ignores.
const IGNORED: &str = r#"#!/bin/sh
read -r start
echo "the run's" > build.log
git add -f build.log && git commit -qm log || exit 3
echo '{"op":"result","ok":true,"summary":"log"}'
"#;

#[test]
fn a_land_never_writes_over_a_file_the_persons_checkout_ignores() {
    let repo = Repo::new();
    let root = repo.root();
    std::fs::write(root.join(".gitignore"), ".harnery/\n*.log\n").unwrap();
    git(&root, &["commit", "-qam", "ignore logs"]);
    with_workflow(&repo, "log.sh", IGNORED);
    create(&repo, "log", "log.sh");
    run_and_accept(&repo, "log", &[]);
    std::fs::write(root.join("build.log"), "mine\n").unwrap();
    let main = git(&root, &["rev-parse", "main"]);
    let out = repo.harn(&["work", "land", "log"], "");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("would write over") && said.contains("build.log"), "{said}");
    assert_eq!(std::fs::read_to_string(root.join("build.log")).unwrap(), "mine\n");
    assert_eq!(git(&root, &["rev-parse", "main"]), main, "main moved");
    // Moved aside, the land goes through.
    std::fs::remove_file(root.join("build.log")).unwrap();
    let out = repo.harn(&["work", "land", "log"], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(root.join("build.log")).unwrap(), "the run's\n");
}

/// Points its own worktree's `HEAD` at `main`, with a smudge and clean filter in its
/// worktree configuration and attributes that apply it everywhere: git asked to move `main`
/// "where it is checked out" would run the filter as the person.
const STEER: &str = r#"#!/bin/sh
read -r start
gd=$(git rev-parse --absolute-git-dir)
cat > "$gd/evil.sh" <<EOF
#!/bin/sh
touch "$PWNED" 2>/dev/null
cat
EOF
chmod +x "$gd/evil.sh"
git config --worktree filter.x.smudge "$gd/evil.sh" || exit 4
git config --worktree filter.x.clean "$gd/evil.sh" || exit 4
echo '* filter=x' > .gitattributes
git add -A >/dev/null && git commit -qm steer || exit 3
echo 'ref: refs/heads/main' > "$gd/HEAD"
echo '{"op":"result","ok":true,"summary":"steered"}'
"#;

/// Commits one note.
const NOTE: &str = r#"#!/bin/sh
read -r start
echo "$HARN_WORK_ID" > "$HARN_WORK_ID.md"
git add -A >/dev/null && git commit -qm "$HARN_WORK_ID" || exit 3
echo '{"op":"result","ok":true,"summary":"noted"}'
"#;

#[test]
fn a_land_never_runs_git_in_a_worktree_that_claims_the_target_and_waits_for_its_attributes() {
    let repo = Repo::new();
    let root = repo.root();
    git(&root, &["config", "extensions.worktreeConfig", "true"]);
    with_workflow(&repo, "steer.sh", STEER);
    with_workflow(&repo, "note.sh", NOTE);
    let pwned = repo.dir.path().join("PWNED");
    create(&repo, "hj", "steer.sh");
    create(&repo, "notes", "note.sh");
    for id in ["hj", "notes"] {
        let args = [&RUN[..2], &[id][..], &RUN[2..]].concat();
        let out = repo.command(&args, "").env("PWNED", &pwned).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{id}: {}", text(&out));
    }
    // The attributes naming a filter hold the hostile item's acceptance for a person.
    let refused = repo.harn(&["work", "accept", "hj"], "");
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    let said = text(&refused);
    assert!(said.contains(".gitattributes") && said.contains("* filter=x"), "{said}");
    // The person works on another branch; the hostile worktree says it has `main` out.
    git(&root, &["checkout", "-q", "-b", "elsewhere"]);
    let out = repo.harn(&["work", "accept", "notes"], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let main = git(&root, &["rev-parse", "main"]);
    let out = repo.command(&["work", "land", "notes"], "").env("PWNED", &pwned).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("linked worktree"), "{}", text(&out));
    assert!(!pwned.exists(), "work land ran a run's filter as the person");
    assert_eq!(git(&root, &["rev-parse", "main"]), main, "main moved");
}

/// Says whether descriptor 8 reached it, by writing through it.
const DESCRIPTORS: &str = r#"#!/bin/sh
read -r start
if { echo leaked >&8; } 2>/dev/null; then s=open; else s=closed; fi
if [ -e /proc/self/fd/7 ]; then t=open; else t=closed; fi
echo "{\"op\":\"result\",\"ok\":true,\"summary\":\"8 $s 7 $t\"}"
"#;

#[test]
fn a_workflow_gets_no_descriptor_of_its_callers_beyond_its_standard_streams() {
    let repo = Repo::new();
    let root = repo.root();
    with_workflow(&repo, "fds.sh", DESCRIPTORS);
    let leak = repo.dir.path().join("leak");
    std::fs::write(&leak, "").unwrap();
    for (id, extra) in [("contained", ""), ("open", " --no-containment")] {
        create(&repo, id, "fds.sh");
        // A terminal on 7 (`script` gives the caller one) and a file on 8, made read-only
        // after it was opened for appending.
        let inner = format!(
            "exec 7<>/dev/tty 8>>'{}'; chmod 0444 '{}'; exec '{}' work run {id} --root '{}'{extra} --json",
            leak.display(),
            leak.display(),
            harn_bin().display(),
            root.display()
        );
        let out = std::process::Command::new("script")
            .args(["-qec", &inner, "/dev/null"])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{id}: {}", text(&out));
        let shown = json(&repo.harn(&["work", "show", id, "--json"], ""));
        let proof = proof_of(&root, shown["projection"]["latest_run_id"].as_str().unwrap());
        assert_eq!(proof["run"]["summary"], "8 closed 7 closed", "{id}: {proof}");
        std::fs::set_permissions(&leak, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .unwrap();
    }
    assert_eq!(std::fs::read_to_string(&leak).unwrap(), "", "a workflow wrote through fd 8");
}

fn proof_of(root: &Path, run: &str) -> serde_json::Value {
    let path = root.join(format!(".harnery/workflows/{run}/proof.json"));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}
