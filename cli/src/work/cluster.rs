//! `harn cluster`: the pre-flight of a cluster named in `.harnery/config.json` (`check`), and
//! what a node says of itself when the pre-flight asks it through the engine (`probe`). What
//! passes and what to do about a failure is the core's `work::cluster::preflight`; this asks
//! Slurm (`sinfo`, `srun`) and git.

use crate::exit::{Exit, Failure, EXIT_FAILED, EXIT_USAGE};
use harn_core::work::cluster::{
    parse_nodes, preflight, ClusterSpec, NodeReport, Survey, Unanswered,
};
use harn_core::work::run::FrozenAdapter;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// `harn cluster …`.
#[derive(Debug, clap::Args)]
pub struct ClusterArgs {
    #[command(subcommand)]
    verb: ClusterVerb,
}

#[derive(Debug, clap::Subcommand)]
enum ClusterVerb {
    /// Check that a cluster can run attempts: Slurm answers, nodes are up, and on each node
    /// harn is this version, the repository clones and takes a push, and each adapter is
    /// installed and logged in.
    #[command(
        after_help = "Examples:\n  harn cluster check lab\n  harn cluster check lab --harness claude-code --json"
    )]
    Check(CheckArgs),
    /// What this node can do for a cluster's runs, as one JSON line: run on a node by
    /// `harn cluster check` through the engine, not by hand.
    #[command(
        after_help = "Examples:\n  harn cluster probe --repository /srv/repo.git --scratch /tmp/harn-scratch"
    )]
    Probe(ProbeArgs),
    /// One segment of a remote run, on the node the engine chose: started by the
    /// coordinator as a job step, spoken to over its standard input and output.
    #[command(
        hide = true,
        after_help = "Examples:\n  srun --nodes=1 --ntasks=1 --unbuffered -- harn cluster segment"
    )]
    Segment,
}

#[derive(Debug, clap::Args)]
struct CheckArgs {
    /// The cluster, as `.harnery/config.json` names it under `clusters`.
    name: String,
    /// The coordination root (default: found from the current directory).
    #[arg(long)]
    root: Option<PathBuf>,
    /// An adapter each node must have installed and logged in (repeatable; default: those
    /// `.harnery/config.json` declares).
    #[arg(long = "harness", value_name = "ADAPTER")]
    adapters: Vec<String>,
    /// How long each question to the engine may take, in seconds.
    #[arg(long, default_value_t = 60)]
    timeout_secs: u64,
    /// One JSON document.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct ProbeArgs {
    /// The repository URL to clone and push a probe ref to.
    #[arg(long)]
    repository: String,
    /// The directory the clone is made in (removed after).
    #[arg(long)]
    scratch: PathBuf,
    /// An adapter to check, as JSON (`{"name": …, "spec": …}`, repeatable).
    #[arg(long = "adapter-json", value_name = "JSON")]
    adapters: Vec<String>,
}

/// Runs `harn cluster …`.
pub fn run(args: ClusterArgs) -> Exit {
    match args.verb {
        ClusterVerb::Check(a) => check(a),
        ClusterVerb::Probe(a) => probe(a),
        ClusterVerb::Segment => super::remote::node::run(),
    }
}

fn usage(message: impl std::fmt::Display) -> Failure {
    Failure::new(EXIT_USAGE, message)
}

fn check(a: CheckArgs) -> Exit {
    let root = crate::os::root::discover(a.root.as_deref()).map_err(usage)?;
    let spec = super::config::cluster(&root, &a.name).map_err(usage)?;
    let names = if a.adapters.is_empty() {
        super::config::declared_adapters(&root).map_err(usage)?
    } else {
        a.adapters
    };
    let mut adapters = Vec::new();
    for name in &names {
        adapters.push(super::config::frozen_harness(&root, name).map_err(usage)?);
    }
    let deadline = Duration::from_secs(a.timeout_secs.max(1));
    let mut survey = Survey::default();
    let listed = sinfo(&spec, deadline);
    if let Ok(nodes) = &listed {
        for node in nodes.iter().filter(|n| n.up()) {
            let report = probe_node(&spec, &node.name, &adapters, deadline).map_err(Unanswered);
            survey.reports.insert(node.name.clone(), report);
        }
    }
    survey.nodes = Some(listed.map_err(Unanswered));
    let checks = preflight(&a.name, &super::remote::version(), &survey);
    let ok = checks.iter().all(|c| c.ok);
    if a.json {
        outln!("{}", serde_json::json!({ "cluster": a.name, "ok": ok, "checks": checks }));
    } else {
        for c in &checks {
            let mark = if c.ok { "ok  " } else { "FAIL" };
            outln!("{mark}  {:<22} {}", c.what, c.detail);
        }
        if ok {
            outln!("cluster {} is ready: harn work run ID --cluster {}", a.name, a.name);
        }
    }
    if ok {
        Ok(0)
    } else {
        Err(Failure::new(EXIT_FAILED, format!("cluster {} failed its pre-flight", a.name)))
    }
}

/// The engine's nodes of the cluster's partition.
fn sinfo(
    spec: &ClusterSpec,
    deadline: Duration,
) -> Result<Vec<harn_core::work::cluster::Node>, String> {
    let mut cmd = Command::new("sinfo");
    cmd.args(["-h", "-N", "-o", "%N|%T|%P"]);
    let out = super::remote::engine::run_bounded(cmd, deadline)?;
    parse_nodes(&out, spec.partition.as_deref()).map_err(|e| format!("sinfo: {e}"))
}

/// Runs `harn cluster probe` on `node` as a job step and reads its report.
fn probe_node(
    spec: &ClusterSpec,
    node: &str,
    adapters: &[FrozenAdapter],
    deadline: Duration,
) -> Result<NodeReport, String> {
    let mut cmd = Command::new("srun");
    // A name of its own, so a step that outlives its deadline can be cancelled by it; no
    // wait for resources past the deadline, and a time limit of the engine's too.
    let name = format!("harn-check-{}", nonce());
    cmd.args(["--nodes=1", "--ntasks=1", "--quiet", "--time=5"]);
    cmd.arg(format!("--job-name={name}"));
    cmd.arg(format!("--immediate={}", deadline.as_secs().max(1)));
    cmd.arg(format!("--nodelist={node}"));
    if let Some(p) = &spec.partition {
        cmd.arg(format!("--partition={p}"));
    }
    cmd.args(&spec.args);
    cmd.args(["--", &spec.harn, "cluster", "probe", "--repository", &spec.repository]);
    cmd.arg("--scratch").arg(&spec.scratch);
    for a in adapters {
        let json = serde_json::to_string(a).map_err(|e| e.to_string())?;
        cmd.args(["--adapter-json", &json]);
    }
    let out = super::remote::engine::run_bounded(cmd, deadline).inspect_err(|_| {
        // A killed srun cannot release its job: cancel it by its name.
        let _ = Command::new("scancel").arg(format!("--name={name}")).output();
    })?;
    let last = out.lines().rev().find(|l| l.trim_start().starts_with('{')).unwrap_or("");
    serde_json::from_str(last).map_err(|_| format!("no report from {}: {}", spec.harn, out.trim()))
}

/// `harn cluster probe`: clone, push and delete a probe ref, ask each adapter; print the
/// report. Exits 0 whatever it finds: the coordinator judges.
fn probe(a: ProbeArgs) -> Exit {
    let node = std::env::var("SLURMD_NODENAME")
        .ok()
        .or_else(crate::os::procfs::hostname)
        .unwrap_or_default();
    let mut report =
        NodeReport { node, version: super::remote::version(), ..NodeReport::default() };
    let nonce = nonce();
    match super::remote::scratch::own_dir(&a.scratch) {
        Err(e) => report.clone_error = Some(e),
        Ok(mine) => {
            let clone = mine.join(format!("probe-{nonce}"));
            match repository(&a.repository, &clone, &nonce) {
                Ok(()) => {}
                Err((true, e)) => report.clone_error = Some(e),
                Err((false, e)) => report.push_error = Some(e),
            }
            let _ = std::fs::remove_dir_all(&clone);
        }
    }
    for json in &a.adapters {
        let adapter: FrozenAdapter =
            serde_json::from_str(json).map_err(|e| usage(format!("--adapter-json: {e}")))?;
        let billing = harn_core::work::run::Billing::default();
        let ready = super::calls::preflight_once(&adapter.name, &adapter.spec, billing);
        report.adapters.insert(adapter.name, ready.err());
    }
    outln!("{}", serde_json::to_string(&report).map_err(Failure::failed)?);
    Ok(0)
}

/// A word no other probe or check uses: this process and the time.
fn nonce() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    format!("{}-{}", std::process::id(), now.map(|d| d.as_nanos()).unwrap_or(0))
}

/// Clones `url` into `clone` and pushes its head to a probe ref, then deletes the ref. The
/// error says whether the clone (true) or the push (false) failed.
fn repository(url: &str, clone: &Path, nonce: &str) -> Result<(), (bool, String)> {
    let target = clone.display().to_string();
    let parent = clone.parent().unwrap_or(Path::new("/"));
    let args = ["clone", "--quiet", "--depth=1", "--", url, &target];
    let cloned = super::worktree::git(parent, None, &args).map_err(|e| (true, e))?;
    if !cloned.status.success() {
        return Err((true, String::from_utf8_lossy(&cloned.stderr).trim().to_owned()));
    }
    let probe = format!("refs/harn-probe/{nonce}");
    for refspec in [format!("HEAD:{probe}"), format!(":{probe}")] {
        let pushed = super::worktree::git(clone, None, &["push", "--quiet", url, &refspec])
            .map_err(|e| (false, e))?;
        if !pushed.status.success() {
            return Err((false, String::from_utf8_lossy(&pushed.stderr).trim().to_owned()));
        }
    }
    Ok(())
}
