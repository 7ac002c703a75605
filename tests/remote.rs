//! Remote attempts on the real test cluster (`.ci/slurm/cluster.sh`): items of a goal run as
//! job steps on its nodes and land as worktree items, the coordinator the only writer of
//! `.harnery/`; the engine's faults (a node's slurmd killed, a cancel from outside harn) end
//! an attempt uncharged; a coordinator killed mid-run leaves its job for the next run to find
//! and cancel.

use crate::cli::{harn_bin, json, text};
use crate::cluster::{slurm_conf, Root};
use crate::skip::skip;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// The workflow every item here runs: notes its node in a file named for its item, commits
/// it, sleeps `sleep` seconds first (so a test can act while it runs), and passes.
fn workflow(sleep: u32) -> String {
    format!(
        "#!/bin/sh\nread start\ntouch started\nsleep {sleep}\nrm -f started\n\
         echo \"$HARN_WORK_ID on $SLURMD_NODENAME\" > \"out-$HARN_WORK_ID.txt\"\n\
         git add \"out-$HARN_WORK_ID.txt\" && git -c user.name=w -c user.email=w@w commit -qm \"$HARN_WORK_ID\" \
         || {{ echo '{{\"op\":\"result\",\"ok\":false,\"error\":\"no commit\"}}'; exit 0; }}\n\
         echo '{{\"op\":\"result\",\"ok\":true,\"summary\":\"noted its node\"}}'\n"
    )
}

/// A root on cluster `lab` (the partition `partition`, if any) with `wf.sh` sleeping `sleep`.
fn root(partition: Option<&str>, sleep: u32) -> Root {
    let mut cluster = serde_json::json!({ "engine": "slurm" });
    if let Some(p) = partition {
        cluster["partition"] = p.into();
    }
    let root = Root::new(cluster);
    let wf = root.repo().join("wf.sh");
    std::fs::write(&wf, workflow(sleep)).unwrap();
    let mut perms = std::fs::metadata(&wf).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&wf, perms).unwrap();
    root
}

fn create(root: &Root, id: &str, deps: &[&str]) {
    let mut args = vec!["work", "create", id, "wf.sh", "--id", id, "--objective", "note the node"];
    for d in deps {
        args.extend(["--depends-on", d]);
    }
    let out = root.harn(&args);
    assert!(out.status.success(), "{}", text(&out));
}

/// The cluster's `harn` on the nodes becomes a wrapper that runs it in a mount namespace
/// where the coordinator's repository and worktrees are empty: whatever a node might read of
/// `.harnery/` is not there, and whatever it might write goes nowhere the coordinator sees.
/// `None` (skipped) where this process may not make mount namespaces.
fn hide_the_coordinator(root: &Root) -> Option<()> {
    let probe = Command::new("unshare").args(["-m", "true"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        skip("no mount namespaces (unshare -m) to hide the coordinator's files from the nodes");
        return None;
    }
    let repo = root.repo();
    let worktrees = PathBuf::from(format!("{}.worktrees", repo.display()));
    std::fs::create_dir_all(&worktrees).unwrap();
    let wrapper = root.dir.path().join("node-harn");
    let script = format!(
        "#!/bin/sh\nexec unshare -m sh -c 'mount -t tmpfs -o size=1m none \"$1\" && \
         mount -t tmpfs -o size=1m none \"$2\" && shift 2 && exec \"$@\"' sh {} {} {} \"$@\"\n",
        repo.display(),
        worktrees.display(),
        harn_bin().display()
    );
    std::fs::write(&wrapper, script).unwrap();
    let mut perms = std::fs::metadata(&wrapper).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&wrapper, perms).unwrap();
    let config = repo.join(".harnery/config.json");
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    doc["clusters"]["lab"]["harn"] = wrapper.display().to_string().into();
    std::fs::write(&config, doc.to_string()).unwrap();
    Some(())
}

fn show(root: &Root, id: &str) -> serde_json::Value {
    json(&root.harn(&["work", "show", id, "--json"]))
}

fn latest_run(root: &Root, id: &str) -> String {
    show(root, id)["projection"]["latest_run_id"].as_str().unwrap_or_default().to_owned()
}

fn run_show(root: &Root, run: &str) -> serde_json::Value {
    json(&root.harn(&["run", "show", run, "--json"]))
}

/// `harn work run ID --cluster lab`, started and left running.
fn start(root: &Root, id: &str) -> Child {
    Command::new(harn_bin())
        .args(["work", "run", id, "--cluster", "lab"])
        .current_dir(root.repo())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// The job a run's live record names, once its node said which (at most 60 s).
fn job_of(root: &Root, id: &str) -> (String, String) {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let run = latest_run(root, id);
        let live = root.repo().join(format!(".harnery/running/{run}.json"));
        if let Ok(bytes) = std::fs::read(&live) {
            let doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
            if let Some(job) = doc["job"]["id"].as_str() {
                return (run, job.to_owned());
            }
        }
        assert!(Instant::now() < until, "no job recorded for {id}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until the workflow of a run began on its node (its `started` file in the clone).
fn wait_started(root: &Root) {
    let until = Instant::now() + Duration::from_secs(60);
    let uid = rustix::process::getuid().as_raw();
    let mine = root.dir.path().join(format!("scratch/u{uid}"));
    loop {
        let started = std::fs::read_dir(&mine)
            .map(|d| d.flatten().any(|e| e.path().join("work/started").exists()))
            .unwrap_or(false);
        if started {
            return;
        }
        assert!(Instant::now() < until, "the workflow never started");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What the engine says of a job, as `Key=Value` pairs.
fn job_state(job: &str) -> std::collections::BTreeMap<String, String> {
    let out = Command::new("scontrol").args(["show", "job", "-o", job]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|w| w.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect()
}

/// Waits for `child` (at most `limit`), killing it past that.
fn finish(mut child: Child, limit: Duration) -> std::process::Output {
    let until = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > until {
            let _ = child.kill();
            panic!("harn did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.wait_with_output().unwrap()
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/slurm/cluster.sh")
}

#[test]
fn six_items_of_a_goal_run_on_the_cluster_over_several_nodes_and_land() {
    if slurm_conf().is_none() {
        return;
    }
    let root = root(None, 2);
    if hide_the_coordinator(&root).is_none() {
        return;
    }
    let items = ["i1", "i2", "i3", "i4", "i5", "i6"];
    for id in items {
        create(&root, id, &[]);
    }
    create(&root, "all", &items);
    std::fs::write(root.repo().join("team.json"), r#"{"implementer": {"instructions": "Do it."}}"#)
        .unwrap();
    let out = root.harn(&[
        "supervisor",
        "create",
        "all",
        "--team",
        "team.json",
        "--id",
        "ship",
        "--accept-passing-proof",
        "--max-parallel-work",
        "6",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let started = Instant::now();
    let out = root.harn(&["supervisor", "run", "ship", "--cluster", "lab"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("stop: succeeded"), "{}", text(&out));
    // Six at once, each sleeping two seconds: far less than six times two.
    assert!(started.elapsed() < Duration::from_secs(60), "{:?}", started.elapsed());
    let mut nodes = std::collections::BTreeSet::new();
    for id in items.iter().chain(&["all"]) {
        let run = latest_run(&root, id);
        let doc = run_show(&root, &run);
        let jobs = doc["cluster_jobs"].as_array().unwrap();
        assert_eq!(jobs.len(), 1, "{id}: one segment, one job: {doc}");
        assert_eq!(jobs[0]["engine"], "slurm");
        let node = jobs[0]["node"].as_str().unwrap().to_owned();
        // Its proof attests the commit the node made, brought back into its worktree.
        let ws = &doc["proof"]["workspace"];
        assert_ne!(ws["final_commit"], ws["workspace"]["base_commit"], "{id}: {doc}");
        assert_eq!(ws["uncommitted"], false, "{id}");
        // The node pushed nothing: its work came back as a bundle over its step's output, so
        // the cluster's repository still holds only what the coordinator published.
        let published = Command::new("git")
            .args(["rev-parse", "--verify", "-q", &format!("refs/heads/harn/{id}")])
            .current_dir(root.dir.path().join("remote.git"))
            .output()
            .unwrap();
        let published = String::from_utf8_lossy(&published.stdout).trim().to_owned();
        assert_ne!(published, ws["final_commit"].as_str().unwrap(), "{id}: the node pushed");
        let noted = std::fs::read_to_string(
            root.dir.path().join(format!("repo.worktrees/{id}/out-{id}.txt")),
        )
        .unwrap();
        assert_eq!(noted.trim(), format!("{id} on {node}"));
        nodes.insert(node);
    }
    assert!(nodes.len() >= 2, "spread over several nodes: {nodes:?}");
    for id in items.iter().chain(&["all"]) {
        let out = root.harn(&["work", "land", id]);
        assert!(out.status.success(), "{id}: {}", text(&out));
    }
    for id in items.iter().chain(&["all"]) {
        let out = Command::new("git")
            .args(["show", &format!("HEAD:out-{id}.txt")])
            .current_dir(root.repo())
            .output()
            .unwrap();
        assert!(out.status.success(), "{id} landed: {}", text(&out));
    }
    // Every node removed its clone.
    let uid = rustix::process::getuid().as_raw();
    let left = std::fs::read_dir(root.dir.path().join(format!("scratch/u{uid}"))).unwrap().count();
    assert_eq!(left, 0, "no clone is left on the nodes");
}

/// Brings the spare node back however its test ends.
struct Revive;

impl Drop for Revive {
    fn drop(&mut self) {
        let _ = Command::new(script()).args(["revive-node", "n4"]).output();
    }
}

#[test]
fn a_node_whose_slurmd_dies_ends_its_attempt_uncharged_naming_the_node_and_the_job_never_runs_again(
) {
    if slurm_conf().is_none() {
        return;
    }
    let root = root(Some("spare"), 120);
    create(&root, "doomed", &[]);
    let child = start(&root, "doomed");
    let (run, job) = job_of(&root, "doomed");
    wait_started(&root);
    let _revive = Revive;
    let killed = Command::new(script()).args(["kill-node", "n4"]).output().unwrap();
    assert!(killed.status.success(), "{}", text(&killed));
    let out = finish(child, Duration::from_secs(100));
    assert!(text(&out).contains(&format!("node n4 failed under job {job}")), "{}", text(&out));
    let item = show(&root, "doomed");
    assert_eq!(item["projection"]["charged_attempts"], 0, "{item}");
    let doc = run_show(&root, &run);
    assert_eq!(doc["proof"]["run"]["class"], "infrastructure", "{doc}");
    let state = job_state(&job);
    assert_eq!(state.get("JobState").map(String::as_str), Some("NODE_FAIL"), "{state:?}");
    drop(_revive);
    // Back up, the node is not given the job again.
    std::thread::sleep(Duration::from_secs(2));
    let state = job_state(&job);
    assert_eq!(state.get("Restarts").map(String::as_str), Some("0"), "{state:?}");
    assert_eq!(state.get("JobState").map(String::as_str), Some("NODE_FAIL"), "{state:?}");
}

#[test]
fn a_job_cancelled_outside_harn_ends_its_attempt_uncharged() {
    if slurm_conf().is_none() {
        return;
    }
    let root = root(None, 120);
    create(&root, "cancelled", &[]);
    let child = start(&root, "cancelled");
    let (run, job) = job_of(&root, "cancelled");
    wait_started(&root);
    let out = Command::new("scancel").arg(&job).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let out = finish(child, Duration::from_secs(60));
    assert!(
        text(&out).contains(&format!("job {job} was cancelled outside harn")),
        "{}",
        text(&out)
    );
    assert_eq!(show(&root, "cancelled")["projection"]["charged_attempts"], 0);
    let doc = run_show(&root, &run);
    assert_eq!(doc["proof"]["run"]["class"], "infrastructure", "{doc}");
}

#[test]
fn a_coordinator_killed_mid_run_leaves_its_job_for_the_next_run_to_find_and_cancel() {
    if slurm_conf().is_none() {
        return;
    }
    let root = root(None, 120);
    create(&root, "orphan", &[]);
    create(&root, "next", &[]);
    let mut child = start(&root, "orphan");
    let (run, job) = job_of(&root, "orphan");
    wait_started(&root);
    // srun finishes its side of the launch after the task starts; stopped before that, the
    // engine fails the launch instead.
    std::thread::sleep(Duration::from_secs(2));
    // The coordinator's machine is gone: its srun neither relays nor ends (frozen in a
    // cgroup: stopped by a signal, its orphaned process group would be sent SIGHUP and cancel
    // the job itself), and harn itself is killed, so the job runs on with nobody to see it.
    let srun =
        Command::new("pgrep").args(["-P", &child.id().to_string(), "srun"]).output().unwrap();
    let srun = String::from_utf8_lossy(&srun.stdout).trim().to_owned();
    assert!(!srun.is_empty(), "harn's srun");
    let group = Command::new("pgrep").args(["-g", &srun]).output().unwrap();
    let pids: Vec<String> =
        String::from_utf8_lossy(&group.stdout).split_whitespace().map(str::to_owned).collect();
    let Some(frozen) = Frozen::new(&pids) else {
        let _ = child.kill();
        let _ = child.wait();
        return;
    };
    child.kill().unwrap();
    child.wait().unwrap();
    let state = job_state(&job);
    assert_eq!(state.get("JobState").map(String::as_str), Some("RUNNING"), "{state:?}");
    // The next run on this root finds the job by the run's record and cancels it.
    let out = root.harn(&["work", "run", "next", "--cluster", "lab", "--timeout-secs", "1"]);
    drop(frozen);
    let said = text(&out);
    assert!(
        said.contains(&format!("run {run}'s job {job} on")) && said.contains("it was cancelled"),
        "{said}"
    );
    // Ended: cancelled, or failed as its step was torn down under the cancel.
    let state = job_state(&job);
    let ended = state.get("JobState").map(String::as_str);
    assert!(!matches!(ended, Some("RUNNING" | "PENDING") | None), "{state:?}");
    assert!(!root.repo().join(format!(".harnery/running/{run}.json")).exists(), "reaped");
}

/// Processes frozen in a cgroup of their own; killed and the cgroup removed when dropped.
struct Frozen {
    cgroup: PathBuf,
    pids: Vec<String>,
}

impl Frozen {
    /// `None` (skipped) where this process may not make a cgroup and freeze it.
    fn new(pids: &[String]) -> Option<Frozen> {
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let v2 = mounts.lines().find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(f[1]))
        });
        let Some(v2) = v2 else {
            skip("no cgroup v2 hierarchy to freeze processes in");
            return None;
        };
        let cgroup = v2.join(format!("harn-test-frozen-{}", std::process::id()));
        let made = std::fs::create_dir(&cgroup).and_then(|()| {
            for pid in pids {
                std::fs::write(cgroup.join("cgroup.procs"), pid)?;
            }
            std::fs::write(cgroup.join("cgroup.freeze"), "1")
        });
        let frozen = Frozen { cgroup, pids: pids.to_vec() };
        if let Err(e) = made {
            skip(format!("cannot freeze processes in a cgroup of this test's: {e}"));
            return None;
        }
        // Frozen once the kernel says so, not when asked.
        let until = Instant::now() + Duration::from_secs(5);
        let events = frozen.cgroup.join("cgroup.events");
        while !std::fs::read_to_string(&events).unwrap_or_default().contains("frozen 1") {
            assert!(Instant::now() < until, "srun was never frozen");
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(frozen)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        for pid in &self.pids {
            let _ = Command::new("kill").args(["-KILL", pid]).output();
        }
        let _ = std::fs::write(self.cgroup.join("cgroup.freeze"), "0");
        let until = Instant::now() + Duration::from_secs(10);
        while std::fs::remove_dir(&self.cgroup).is_err() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn an_unknown_cluster_or_a_remote_isolation_without_one_is_refused_and_nothing_is_written() {
    let root = Root::new(serde_json::json!({ "engine": "slurm" }));
    std::fs::write(root.repo().join("wf.sh"), workflow(0)).unwrap();
    create(&root, "item", &[]);
    let before = show(&root, "item")["history_len"].clone();
    let out = root.harn(&["work", "run", "item", "--cluster", "nosuch"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("no cluster \"nosuch\""), "{}", text(&out));
    let out = root.harn(&["work", "run", "item", "--isolation", "remote"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--isolation remote takes --cluster NAME"), "{}", text(&out));
    let out = root.harn(&["work", "run", "item", "--cluster", "lab", "--isolation", "sandbox"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(show(&root, "item")["history_len"], before, "no attempt was recorded");
}

#[test]
fn an_approval_parks_a_remote_run_and_its_ruling_resumes_it_as_a_new_job() {
    if slurm_conf().is_none() {
        return;
    }
    let root = Root::new(serde_json::json!({ "engine": "slurm" }));
    let repo = root.repo();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    std::fs::copy(examples.join("workflows/ship.sh"), repo.join("wf.sh")).unwrap();
    std::fs::copy(examples.join("harnesses/scripted.sh"), repo.join("harness.sh")).unwrap();
    std::fs::copy(examples.join("policy.json"), repo.join("policy.json")).unwrap();
    let config = repo.join(".harnery/config.json");
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    doc["harnesses"] = serde_json::json!({ "scripted": { "command": ["./harness.sh"] } });
    std::fs::write(&config, doc.to_string()).unwrap();
    // The harness is the repository's: the node finds it in its clone.
    let git = |args: &[&str]| {
        let out = Command::new("git").args(args).current_dir(&repo).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", text(&out));
    };
    git(&["add", "harness.sh"]);
    git(&["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "harness"]);
    let out =
        root.harn(&["work", "create", "Ship", "wf.sh", "--objective", "add the flag", "--id", "s"]);
    assert!(out.status.success(), "{}", text(&out));
    let run = [
        "work",
        "run",
        "s",
        "--cluster",
        "lab",
        "--harness",
        "scripted",
        "--policy",
        "policy.json",
        "--approval-to",
        "ana",
        "--json",
    ];
    let out = root.harn(&run);
    assert_eq!(out.status.code(), Some(1), "parked is not done: {}", text(&out));
    let parked = json(&out);
    assert_eq!(parked["parked"], true, "{parked}");
    let approval = parked["approval"]["approval_id"].as_str().unwrap().to_owned();
    let run_id = latest_run(&root, "s");
    assert_eq!(run_show(&root, &run_id)["cluster_jobs"].as_array().unwrap().len(), 1);
    let out = root.harn(&["approval", "approve", &approval, "--actor", "ana"]);
    assert!(out.status.success(), "{}", text(&out));
    // The resumed run takes its cluster from its manifest, and runs as a job of its own.
    let out = root.harn(&["work", "run", "s"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(latest_run(&root, "s"), run_id, "the same run, resumed");
    let doc = run_show(&root, &run_id);
    let jobs = doc["cluster_jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2, "{doc}");
    assert_ne!(jobs[0]["job"], jobs[1]["job"]);
    assert_eq!(doc["proof"]["run"]["status"], "succeeded", "{doc}");
    // `run follow` shows a remote run as a local one, each segment with its job and node.
    let out = root.harn(&["run", "follow", &run_id]);
    assert!(out.status.success(), "{}", text(&out));
    for j in jobs {
        let (job, node) = (j["job"].as_str().unwrap(), j["node"].as_str().unwrap());
        assert!(text(&out).contains(&format!(" on {node} as job {job}")), "{}", text(&out));
    }
    assert!(text(&out).contains(&format!("run {run_id} succeeded")), "{}", text(&out));
}

#[test]
fn the_service_ticks_a_goal_on_the_cluster_it_froze_at_enrollment() {
    if slurm_conf().is_none() {
        return;
    }
    let root = root(None, 0);
    create(&root, "a", &[]);
    create(&root, "b", &["a"]);
    std::fs::write(root.repo().join("team.json"), r#"{"implementer": {"instructions": "Do it."}}"#)
        .unwrap();
    let out = root.harn(&[
        "supervisor",
        "create",
        "b",
        "--team",
        "team.json",
        "--id",
        "g",
        "--accept-passing-proof",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let start =
        ["supervisor", "service", "start", "g", "--cluster", "lab", "--wake-interval-ms", "200"];
    let out = root.harn(&start);
    assert!(out.status.success(), "{}", text(&out));
    let until = Instant::now() + Duration::from_secs(90);
    let state = loop {
        let g = json(&root.harn(&["supervisor", "show", "g", "--json"]));
        let state = g["projection"]["state"].as_str().unwrap_or_default().to_owned();
        if state == "succeeded" || Instant::now() > until {
            break state;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let stopped = root.harn(&["supervisor", "service", "stop", "--timeout", "10"]);
    assert_eq!(state, "succeeded", "{}", text(&stopped));
    // The enrollment froze the cluster by value; every attempt ran as a job on it, and the
    // dependent started from its prerequisite's commit.
    let config: serde_json::Value = serde_json::from_slice(
        &std::fs::read(root.repo().join(harn_core::layout::SERVICE).join("config.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(config["engine"]["cluster"]["name"], "lab", "{config}");
    for id in ["a", "b"] {
        let doc = run_show(&root, &latest_run(&root, id));
        assert_eq!(doc["cluster_jobs"].as_array().map(Vec::len), Some(1), "{id}: {doc}");
    }
    let b = root.dir.path().join("repo.worktrees/b");
    assert!(b.join("out-a.txt").is_file(), "b's branch holds a's accepted work");
}

#[test]
fn work_cancel_ends_a_remote_run_and_its_job() {
    if slurm_conf().is_none() {
        return;
    }
    let root = root(None, 120);
    create(&root, "long", &[]);
    let child = start(&root, "long");
    let (run, job) = job_of(&root, "long");
    wait_started(&root);
    let out = root.harn(&["work", "cancel", "long", "--reason", "not needed"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = finish(child, Duration::from_secs(60));
    assert!(text(&out).contains("interrupted by work cancel"), "{}", text(&out));
    let doc = run_show(&root, &run);
    assert_eq!(show(&root, "long")["projection"]["state"], "cancelled");
    assert!(doc["transcript"].to_string().contains("run.cancelled"), "{doc}");
    let state = job_state(&job);
    let ended = state.get("JobState").map(String::as_str);
    assert!(!matches!(ended, Some("RUNNING" | "PENDING") | None), "{state:?}");
}
