//! What a confined run may and may not write, with the real binary on the real kernel: as
//! root (a mount namespace) and as an unprivileged user (a user and mount namespace), its
//! workflow and its agent can write the workspace, their `TMPDIR` and the configured
//! writable paths, and cannot touch `.harnery/` or the rest of `$HOME`; the containment
//! reached is in the proof and in `run show`; `--no-containment` runs open and says so; a
//! policy that requires containment refuses an open run before it starts, uncharged.

use crate::cli::{harn_bin, json, text};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

/// Tries each write and appends `<who> <what> ok|denied` to `$REPORT` (in the workspace).
const PROBE: &str = r#"#!/bin/sh
who=$1
try() {
  if sh -c "$2" 2>/dev/null; then echo "$who $1 ok"; else echo "$who $1 denied"; fi >> "$REPORT"
}
try harnery-create 'echo x > .harnery/planted'
try harnery-append 'echo x >> .harnery/appendable'
try harnery-rename 'mv .harnery/config.json .harnery/moved && mv .harnery/moved .harnery/config.json'
try harnery-remove 'rm .harnery/removable'
try workspace 'mkdir -p "made-by-$0" && echo x > "made-by-$0/f"'
try tmpdir 'echo x > "$TMPDIR/f"'
try home 'echo x > "$HOME/planted"'
try extra 'echo x > "$EXTRA/f"'
"#;

const WORKFLOW: &str = r#"#!/bin/sh
read -r start
echo '{"op":"agent","id":"a1","prompt":"probe"}'
read -r reply
"$PROBE" workflow
echo '{"op":"result","ok":false,"error":"probed"}'
exit 1
"#;

struct Root {
    dir: tempfile::TempDir,
    home: tempfile::TempDir,
    extra: tempfile::TempDir,
    user: Option<u32>,
}

impl Root {
    fn new(user: Option<u32>, policy: Option<&str>) -> Root {
        let (dir, home, extra) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        let r = dir.path();
        let exec = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        for (name, body) in [("probe.sh", PROBE), ("wf.sh", WORKFLOW)] {
            std::fs::write(r.join(name), body).unwrap();
            std::fs::set_permissions(r.join(name), std::fs::Permissions::clone(&exec)).unwrap();
        }
        std::fs::create_dir_all(r.join(".harnery")).unwrap();
        let config = serde_json::json!({
            "harnesses": {"prober": {"command":
                ["sh", "-c", "cat >/dev/null; \"$PROBE\" agent; echo probed"]}},
            "containment": {"writable": [extra.path()]},
        });
        std::fs::write(r.join(".harnery/config.json"), config.to_string()).unwrap();
        for name in ["removable", "appendable"] {
            std::fs::write(r.join(".harnery").join(name), "").unwrap();
        }
        if let Some(p) = policy {
            std::fs::write(r.join("policy.json"), p).unwrap();
        }
        if let Some(uid) = user {
            for d in [r, home.path(), extra.path()] {
                chown_tree(d, uid);
            }
        }
        let root = Root { dir, home, extra, user };
        let out = root.harn(&["work", "create", "w", "wf.sh", "--id", "w", "--objective", "o"]);
        assert!(out.status.success(), "{}", text(&out));
        root
    }

    fn harn(&self, args: &[&str]) -> Output {
        let r = self.dir.path();
        let mut cmd = Command::new(harn_bin());
        cmd.args(args)
            .arg("--root")
            .arg(r)
            .env("PROBE", r.join("probe.sh"))
            .env("REPORT", r.join("report.txt"))
            .env("HOME", self.home.path())
            .env("EXTRA", self.extra.path());
        if let Some(uid) = self.user {
            use std::os::unix::process::CommandExt;
            cmd.uid(uid).gid(uid);
        }
        cmd.output().unwrap()
    }

    fn run(&self, extra: &[&str]) -> Output {
        self.harn(&[&["work", "run", "w", "--harness", "prober", "--json"][..], extra].concat())
    }

    /// `who what` → `ok` or `denied`, from the report.
    fn report(&self) -> std::collections::BTreeMap<String, String> {
        let text = std::fs::read_to_string(self.dir.path().join("report.txt")).unwrap_or_default();
        text.lines()
            .filter_map(|l| l.rsplit_once(' '))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    fn proof(&self, run: &str) -> Value {
        let path = self.dir.path().join(format!(".harnery/workflows/{run}/proof.json"));
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }
}

/// Gives `dir` and everything in it to `uid` (and the group of the same number).
pub(crate) fn chown_tree(dir: &Path, uid: u32) {
    let id = Some(rustix::process::Uid::from_raw(uid));
    let gid = Some(rustix::process::Gid::from_raw(uid));
    rustix::fs::chown(dir, id, gid).unwrap();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            chown_tree(&entry.path(), uid);
        } else {
            rustix::fs::chown(entry.path(), id, gid).unwrap();
        }
    }
}

/// True when the machine offers what confinement needs; says so when it does not.
fn offered() -> bool {
    let offer = harn::work::confine::offer();
    if offer.landlock.is_err() || offer.namespace.is_err() {
        crate::skip::skip(format!("this machine does not confine runs: {offer:?}"));
        return false;
    }
    true
}

/// Runs `check` as `user` (this user when `None`) where `offered` says the machine can; a
/// run as another user needs root, and is skipped, said so, without it.
pub(crate) fn as_user(user: Option<u32>, offered: fn() -> bool, check: fn(Option<u32>)) {
    if user.is_some() && !rustix::process::geteuid().is_root() {
        crate::skip::skip("making a run as another user needs root");
        return;
    }
    if offered() {
        check(user);
    }
}

fn confined_as(user: Option<u32>) {
    let root = Root::new(user, None);
    let out = root.run(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let run = json(&out)["run_id"].as_str().unwrap().to_owned();
    let report = root.report();
    for who in ["workflow", "agent"] {
        for what in ["harnery-create", "harnery-append", "harnery-rename", "harnery-remove", "home"]
        {
            assert_eq!(
                report.get(&format!("{who} {what}")).map(String::as_str),
                Some("denied"),
                "{who} {what}: {report:?}"
            );
        }
        for what in ["workspace", "tmpdir", "extra"] {
            assert_eq!(
                report.get(&format!("{who} {what}")).map(String::as_str),
                Some("ok"),
                "{who} {what}: {report:?}"
            );
        }
    }
    assert!(!root.dir.path().join(".harnery/planted").exists());
    assert!(!root.home.path().join("planted").exists());
    let contained = root.proof(&run)["containment"].clone();
    assert_eq!(contained["confined"], true, "{contained}");
    assert!(contained["landlock"].as_u64() >= Some(1), "{contained}");
    assert_eq!(contained["namespace"], true, "the workspace holds .harnery: {contained}");
    let shown = text(&root.harn(&["run", "show", &run]));
    assert!(shown.contains("contained  landlock v"), "{shown}");
    assert!(shown.contains("+ namespace"), "{shown}");
}

#[test]
fn a_confined_run_writes_its_workspace_and_temp_but_nothing_of_harnery_or_home() {
    as_user(None, offered, confined_as);
}

#[test]
fn a_confined_run_as_an_unprivileged_user_gets_a_user_namespace() {
    as_user(Some(65534), offered, confined_as);
}

#[test]
fn no_containment_runs_open_and_says_so() {
    let root = Root::new(None, None);
    let out = root.run(&["--no-containment"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let run = json(&out)["run_id"].as_str().unwrap().to_owned();
    assert_eq!(root.report().get("workflow harnery-create").map(String::as_str), Some("ok"));
    let contained = root.proof(&run)["containment"].clone();
    assert_eq!(contained["confined"], false, "{contained}");
    assert_eq!(contained["turned_off"], true, "{contained}");
    let shown = text(&root.harn(&["run", "show", &run]));
    assert!(shown.contains("none (turned off by --no-containment)"), "{shown}");
}

#[test]
fn a_policy_that_requires_containment_refuses_an_open_run_before_it_starts() {
    let policy = r#"{"rules": [], "containment": "required"}"#;
    let root = Root::new(None, Some(policy));
    let out = root.run(&["--no-containment", "--policy", "policy.json"]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("containment"), "names the reason: {}", text(&out));
    assert!(root.report().is_empty(), "nothing ran: {:?}", root.report());
    let p = json(&root.harn(&["work", "show", "w", "--json"]))["projection"].clone();
    assert_eq!((p["attempts_used"].as_u64(), p["charged_attempts"].as_u64()), (Some(0), Some(0)));
    if offered() {
        let out = root.run(&["--policy", "policy.json"]);
        assert_eq!(out.status.code(), Some(1), "contained, it runs: {}", text(&out));
        assert_eq!(
            root.report().get("workflow harnery-create").map(String::as_str),
            Some("denied")
        );
    }
}

/// The workflow and its agent get no credential from the environment unless the root's
/// configuration names it, contained or not; run.json names what they got, never its value.
#[test]
fn children_get_no_credential_unless_it_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let wf = "#!/bin/sh\nread -r start\nenv > workflow.env\n\
              echo '{\"op\":\"agent\",\"id\":\"a1\",\"prompt\":\"p\"}'\nread -r reply\n\
              echo '{\"op\":\"result\",\"ok\":true}'\n";
    std::fs::write(r.join("wf.sh"), wf).unwrap();
    std::fs::set_permissions(r.join("wf.sh"), std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .unwrap();
    std::fs::create_dir_all(r.join(".harnery")).unwrap();
    let config = serde_json::json!({
        "harnesses": {"dump": {"command": ["sh", "-c", "cat >/dev/null; env > agent.env; echo ok"]}},
        "containment": {"env": ["NPM_TOKEN"]},
    });
    std::fs::write(r.join(".harnery/config.json"), config.to_string()).unwrap();
    let secrets = [
        ("GITHUB_TOKEN", "ghp-secret-1"),
        ("GH_TOKEN", "ghp-secret-2"),
        ("AWS_SECRET_ACCESS_KEY", "aws-secret-3"),
        ("AWS_ACCESS_KEY_ID", "aws-secret-4"),
        ("NPM_TOKEN", "npm-secret-5"),
        ("HF_TOKEN", "hf-secret-6"),
        ("SSH_AUTH_SOCK", "/tmp/agent.sock"),
    ];
    let harn = |args: &[&str]| {
        Command::new(harn_bin()).args(args).arg("--root").arg(r).envs(secrets).output().unwrap()
    };
    for (id, extra) in [("c", &[][..]), ("o", &["--no-containment"][..])] {
        let out = harn(&["work", "create", id, "wf.sh", "--id", id, "--objective", "o"]);
        assert!(out.status.success(), "{}", text(&out));
        let run = [&["work", "run", id, "--harness", "dump", "--json"][..], extra].concat();
        let out = harn(&run);
        assert!(out.status.success(), "{id}: {}", text(&out));
        for who in ["workflow", "agent"] {
            let env = std::fs::read_to_string(r.join(format!("{who}.env"))).unwrap();
            for (name, value) in secrets {
                let given = env.contains(value);
                assert_eq!(given, name == "NPM_TOKEN", "{id} {who} {name}: {env}");
            }
        }
        let run_id = json(&out)["run_id"].as_str().unwrap().to_owned();
        let manifest =
            std::fs::read_to_string(r.join(format!(".harnery/workflows/{run_id}/run.json")))
                .unwrap();
        let m: Value = serde_json::from_str(&manifest).unwrap();
        assert_eq!(m["containment"]["env"], serde_json::json!(["NPM_TOKEN"]), "{manifest}");
        assert!(!manifest.contains("npm-secret-5"), "names only: {manifest}");
    }
}
