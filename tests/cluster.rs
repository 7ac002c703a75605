//! `harn cluster` against a real Slurm cluster of three nodes on this machine, started by
//! `.ci/slurm/cluster.sh start` (which `.ci/run` runs) and found through `SLURM_CONF`.

use crate::cli::{harn_bin, text};
use crate::skip::skip;
use std::path::Path;
use std::process::{Command, Output};

/// The test cluster's configuration, when one is up.
pub(crate) fn slurm_conf() -> Option<String> {
    let conf = std::env::var("SLURM_CONF").ok().filter(|c| Path::new(c).is_file());
    let Some(conf) = conf else {
        skip("no Slurm cluster: run .ci/slurm/cluster.sh start and export SLURM_CONF");
        return None;
    };
    // A configuration whose controller is not up is no cluster (its clients would retry it
    // for a minute in every test).
    let ping =
        Command::new("timeout").args(["5", "scontrol", "ping"]).env("SLURM_CONF", &conf).output();
    if !ping.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("is UP")) {
        skip(format!("the Slurm cluster of {conf} is not up: run .ci/slurm/cluster.sh start"));
        return None;
    }
    Some(conf)
}

/// A root whose repository is a clone of a bare repository the nodes clone and push to, with
/// `clusters.lab` written as `cluster` (its `repository` and `harn` filled in when absent).
pub(crate) struct Root {
    pub(crate) dir: tempfile::TempDir,
}

impl Root {
    pub(crate) fn new(cluster: serde_json::Value) -> Root {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let git = |cwd: &Path, args: &[&str]| {
            let out = Command::new("git").args(args).current_dir(cwd).output().unwrap();
            assert!(out.status.success(), "git {args:?}: {}", text(&out));
        };
        git(d, &["init", "-q", "--bare", "remote.git"]);
        git(d, &["clone", "-q", "remote.git", "repo"]);
        let repo = d.join("repo");
        let id = ["-c", "user.name=t", "-c", "user.email=t@t"];
        git(&repo, &[&id[..], &["commit", "-q", "--allow-empty", "-m", "base"]].concat());
        git(&repo, &["push", "-q", "origin", "HEAD"]);
        std::fs::create_dir_all(repo.join(".harnery")).unwrap();
        let mut cluster = cluster;
        let c = cluster.as_object_mut().unwrap();
        c.entry("repository").or_insert(d.join("remote.git").display().to_string().into());
        c.entry("harn").or_insert(harn_bin().display().to_string().into());
        c.entry("scratch").or_insert(d.join("scratch").display().to_string().into());
        let config = serde_json::json!({ "clusters": { "lab": cluster } });
        std::fs::write(repo.join(".harnery/config.json"), config.to_string()).unwrap();
        Root { dir }
    }

    pub(crate) fn repo(&self) -> std::path::PathBuf {
        self.dir.path().join("repo")
    }

    pub(crate) fn harn(&self, args: &[&str]) -> Output {
        Command::new(harn_bin()).args(args).current_dir(self.repo()).output().unwrap()
    }
}

pub(crate) fn slurm() -> serde_json::Value {
    serde_json::json!({ "engine": "slurm" })
}

#[test]
fn a_cluster_whose_nodes_can_run_attempts_passes_its_preflight_on_every_node() {
    if slurm_conf().is_none() {
        return;
    }
    let root = Root::new(slurm());
    let out = root.harn(&["cluster", "check", "lab", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let checks = doc["checks"].as_array().unwrap();
    for node in ["n1", "n2", "n3"] {
        for what in ["harn", "repository"] {
            let name = format!("{node}: {what}");
            assert!(checks.iter().any(|c| c["what"] == name && c["ok"] == true), "{name}: {doc}");
        }
    }
    // The probe ref each node pushed is deleted again: the repository is as it was.
    let refs = Command::new("git")
        .args(["for-each-ref", "refs/harn-probe"])
        .current_dir(root.dir.path().join("remote.git"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&refs.stdout), "", "no probe ref is left");
}

#[test]
fn a_node_without_harn_or_the_repository_fails_saying_what_to_do() {
    if slurm_conf().is_none() {
        return;
    }
    let root = Root::new(serde_json::json!({
        "engine": "slurm", "harn": "/nonexistent/harn",
    }));
    let out = root.harn(&["cluster", "check", "lab"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("FAIL  node n1"), "{}", text(&out));
    assert!(text(&out).contains("check `harn` in the cluster's configuration"), "{}", text(&out));

    let root = Root::new(serde_json::json!({
        "engine": "slurm", "repository": "/nonexistent/remote.git",
    }));
    let out = root.harn(&["cluster", "check", "lab", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let failed: Vec<&serde_json::Value> =
        doc["checks"].as_array().unwrap().iter().filter(|c| c["ok"] == false).collect();
    assert_eq!(failed.len(), 3, "one per node: {doc}");
    assert!(failed.iter().all(|c| c["detail"].as_str().unwrap().contains("cannot clone")));
}

#[test]
fn an_adapter_missing_on_the_nodes_fails_the_preflight_on_each() {
    if slurm_conf().is_none() {
        return;
    }
    let root = Root::new(slurm());
    let config = root.repo().join(".harnery/config.json");
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    doc["harnesses"] = serde_json::json!({
        "reviewer": { "kind": "text", "command": ["/nonexistent/agent"] }
    });
    std::fs::write(&config, doc.to_string()).unwrap();
    let out = root.harn(&["cluster", "check", "lab"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    for node in ["n1", "n2", "n3"] {
        let line = format!("FAIL  {node}: reviewer");
        assert!(text(&out).contains(&line), "{line}: {}", text(&out));
    }
    assert!(text(&out).contains("not installed"), "{}", text(&out));
}

#[test]
fn an_engine_that_does_not_answer_fails_within_the_timeout() {
    let Some(conf) = slurm_conf() else { return };
    // The same cluster, its controller at a port nobody listens on.
    let dir = tempfile::tempdir().unwrap();
    let text_conf = std::fs::read_to_string(&conf).unwrap();
    let moved: String =
        text_conf
            .lines()
            .map(|l| {
                if l.starts_with("SlurmctldPort=") {
                    "SlurmctldPort=1".into()
                } else {
                    l.to_owned()
                }
            })
            .collect::<Vec<String>>()
            .join("\n");
    let elsewhere = dir.path().join("slurm.conf");
    std::fs::write(&elsewhere, moved).unwrap();
    let root = Root::new(slurm());
    let started = std::time::Instant::now();
    let out = Command::new(harn_bin())
        .args(["cluster", "check", "lab", "--timeout-secs", "2"])
        .current_dir(root.repo())
        .env("SLURM_CONF", &elsewhere)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("did not answer within 2 s"), "{}", text(&out));
    assert!(text(&out).contains("slurmctld"), "{}", text(&out));
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "bounded");
}

#[test]
fn an_unknown_or_invalid_cluster_is_bad_input_naming_the_field() {
    let root = Root::new(serde_json::json!({ "engine": "slurm", "scratch": "relative" }));
    let out = root.harn(&["cluster", "check", "lab"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("clusters.lab.scratch: must be an absolute path"),
        "{}",
        text(&out)
    );
    let out = root.harn(&["cluster", "check", "nosuch"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("no cluster \"nosuch\"") && text(&out).contains("lab"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_probe_clones_only_into_a_directory_no_other_user_can_change() {
    use std::os::unix::fs::PermissionsExt;
    let root = Root::new(slurm());
    let remote = root.dir.path().join("remote.git").display().to_string();
    let probe = |scratch: &Path| {
        let out = Command::new(harn_bin())
            .args(["cluster", "probe", "--repository", &remote, "--scratch"])
            .arg(scratch)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    // Made by the probe: shared as /tmp is, with this user's own directory below it.
    let fresh = root.dir.path().join("fresh");
    let report = probe(&fresh);
    assert!(report["clone_error"].is_null() && report["push_error"].is_null(), "{report}");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&fresh), 0o1777);
    let uid = rustix::process::getuid().as_raw();
    assert_eq!(mode(&fresh.join(format!("u{uid}"))), 0o700);
    // Writable by every user without the sticky bit: another user could swap a clone's config.
    let open = root.dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let report = probe(&open);
    let error = report["clone_error"].as_str().unwrap_or_default();
    assert!(error.contains("may be changed by other users"), "{report}");
    assert_eq!(std::fs::read_dir(&open).unwrap().count(), 0, "nothing was cloned there");
}
