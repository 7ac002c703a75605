//! A cluster named in `.harnery/config.json`, on whose nodes an engine (Slurm) runs attempts'
//! segments: its configuration and the checks it must pass, what the engine says of its nodes
//! (`sinfo`'s lines), what a node says of itself (`harn cluster probe`), and the pre-flight's
//! verdict on all of it. The shell asks the engine and the nodes; everything decided is here.

use crate::error::FieldError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The distributed engines harn hands segments to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// Slurm: a segment is a job step (`srun`), relayed to the coordinator.
    Slurm,
}

/// One cluster as `.harnery/config.json` names it under `clusters`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSpec {
    /// The engine that runs its jobs.
    pub engine: Engine,
    /// The URL the nodes clone the repository from and push their branches to.
    pub repository: String,
    /// harn on the nodes: a path, or a name found on their `PATH`.
    #[serde(default = "default_harn")]
    pub harn: String,
    /// The engine's partition (queue) to submit to; the engine's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// A directory on each node under which runs make their clones.
    #[serde(default = "default_scratch")]
    pub scratch: String,
    /// Further arguments given to the engine with every submission (`--account`, `--qos`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
}

fn default_harn() -> String {
    "harn".into()
}

fn default_scratch() -> String {
    "/tmp/harn-scratch".into()
}

/// A cluster as a run's manifest freezes it: its name and its configuration then.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrozenCluster {
    /// The name under `clusters` in the configuration.
    pub name: String,
    /// What the configuration said when the run started.
    pub spec: ClusterSpec,
}

/// The job a remote segment runs as, once the node has said so: recorded in the segment's
/// live record before anything else, so a coordinator that dies leaves the next one the job
/// to cancel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineJob {
    /// The engine (`slurm`).
    pub engine: Engine,
    /// The cluster's name in the configuration.
    pub cluster: String,
    /// The engine's job id.
    pub id: String,
    /// The node it runs on.
    pub node: String,
}

/// Engine options harn sets itself, long and short: a site's `args` may not change how a
/// segment runs, where it runs or where its output goes. A long option is matched by any
/// prefix the engine's option parser would take for it (`--nodel=n2`).
const RESERVED_LONG: [&str; 13] = [
    "requeue",
    "no-requeue",
    "nodes",
    "ntasks",
    "nodelist",
    "job-name",
    "input",
    "output",
    "partition",
    "time",
    "immediate",
    "jobid",
    "overlap",
];
const RESERVED_SHORT: [char; 8] = ['N', 'n', 'w', 'J', 'i', 'o', 'p', 't'];

/// True when `arg` sets one of the options harn reserves.
fn reserved(arg: &str) -> bool {
    if let Some(long) = arg.strip_prefix("--") {
        let name = long.split('=').next().unwrap_or(long);
        return !name.is_empty() && RESERVED_LONG.iter().any(|r| r.starts_with(name));
    }
    let mut chars = arg.chars();
    chars.next() == Some('-') && chars.next().is_some_and(|c| RESERVED_SHORT.contains(&c))
}

impl ClusterSpec {
    /// Checks what serde cannot: non-empty words, an absolute scratch directory, no argument
    /// that would let the engine requeue a segment or change its shape.
    pub fn check(&self) -> Result<(), FieldError> {
        if self.repository.trim().is_empty() {
            return Err(FieldError::new("repository", "may not be empty"));
        }
        if self.repository.starts_with('-') {
            return Err(FieldError::new("repository", "may not begin with '-'"));
        }
        if self.harn.trim().is_empty() {
            return Err(FieldError::new("harn", "may not be empty"));
        }
        if self.partition.as_deref().is_some_and(|p| p.trim().is_empty()) {
            return Err(FieldError::new("partition", "may not be empty (leave it out instead)"));
        }
        if !self.scratch.starts_with('/') {
            return Err(FieldError::new("scratch", "must be an absolute path on the nodes"));
        }
        for (i, arg) in self.args.iter().enumerate() {
            if reserved(arg) {
                return Err(FieldError::new(
                    format!("args[{i}]"),
                    format!("{arg:?} is set by harn for every segment"),
                ));
            }
        }
        Ok(())
    }
}

/// A node as the engine reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Node {
    /// Its name (`n1`).
    pub name: String,
    /// Its state in the engine's words (`idle`, `mixed`, `down*`, `drained`).
    pub state: String,
}

impl Node {
    /// True when the engine would start a step on it now or soon: responding, powered,
    /// not reserved for maintenance nor waiting for a reboot (no `*`, `~`, `#`, `!`, `%`,
    /// `$`, `@` suffix), and neither down, drained, draining nor failing. `+` (in more than
    /// one state, as `allocated+`), `-` (planned) and `^` are only notes.
    pub fn up(&self) -> bool {
        let state = self.state.to_ascii_lowercase();
        let base = state.trim_end_matches(['+', '-', '^']);
        matches!(base, "idle" | "mixed" | "mix" | "allocated" | "alloc" | "completing" | "comp")
    }
}

/// A line of the engine's output that is not what was asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadLine {
    /// Its number, from 1.
    pub line: usize,
    /// The line.
    pub text: String,
    /// What it should have been.
    pub want: String,
}

impl std::fmt::Display for BadLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {:?} is not {}", self.line, self.text, self.want)
    }
}

impl std::error::Error for BadLine {}

/// Why a question to the engine or a node has no answer, in the words of the engine or of
/// the command that asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unanswered(pub String);

impl std::fmt::Display for Unanswered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parses `sinfo -h -N -o '%N|%T|%P'`: one `name|state|partition` line per node and
/// partition. Keeps the nodes of `partition`, or of the engine's default partition (marked
/// `*`) when none is named, since that is where a step without `--partition` runs; a node is
/// listed once.
pub fn parse_nodes(text: &str, partition: Option<&str>) -> Result<Vec<Node>, BadLine> {
    let mut nodes: Vec<Node> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split('|').map(str::trim).collect();
        let bad =
            || BadLine { line: i + 1, text: line.into(), want: "NAME|STATE|PARTITION".into() };
        let [name, state, part] = fields[..] else { return Err(bad()) };
        if name.is_empty() || state.is_empty() || part.is_empty() {
            return Err(bad());
        }
        let ours = match partition {
            Some(p) => part.trim_end_matches('*') == p,
            None => part.ends_with('*'),
        };
        if ours && !nodes.iter().any(|n| n.name == name) {
            nodes.push(Node { name: name.into(), state: state.into() });
        }
    }
    Ok(nodes)
}

/// What `harn cluster probe` on a node reports of it, as JSON on its standard output.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeReport {
    /// The node's name as the engine gave it to the step.
    pub node: String,
    /// `harn --version` there.
    pub version: String,
    /// Why the repository could not be cloned there; `None` when it was.
    #[serde(default)]
    pub clone_error: Option<String>,
    /// Why a branch could not be pushed back from there; `None` when it was.
    #[serde(default)]
    pub push_error: Option<String>,
    /// Each adapter asked about: `None` when installed and ready, else what is wrong and
    /// what to do, as the local pre-flight says it.
    #[serde(default)]
    pub adapters: BTreeMap<String, Option<String>>,
}

/// One line of a pre-flight.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Check {
    /// What was checked (`engine`, `node n1`, `n1: harn`, `n1: repository`, `n1: claude-code`).
    pub what: String,
    /// Passed.
    pub ok: bool,
    /// What was found, and on a failure what to do.
    pub detail: String,
}

impl Check {
    fn pass(what: impl Into<String>, detail: impl Into<String>) -> Check {
        Check { what: what.into(), ok: true, detail: detail.into() }
    }

    fn fail(what: impl Into<String>, detail: impl Into<String>) -> Check {
        Check { what: what.into(), ok: false, detail: detail.into() }
    }
}

/// What the shell learned of a cluster for its pre-flight.
#[derive(Clone, Debug, Default)]
pub struct Survey {
    /// The engine's node list, or why the engine did not answer.
    pub nodes: Option<Result<Vec<Node>, Unanswered>>,
    /// Each node probed (those up): its report, or why its step failed.
    pub reports: BTreeMap<String, Result<NodeReport, Unanswered>>,
}

/// The pre-flight's verdict on `cluster` (named `name`) from what was observed, given this
/// harn's version: every line, failures saying what to do. It passes when every line does and
/// at least one node is up.
pub fn preflight(name: &str, ours: &str, observed: &Survey) -> Vec<Check> {
    let mut checks = Vec::new();
    let nodes = match &observed.nodes {
        None => return vec![Check::fail("engine", "not asked")],
        Some(Err(why)) => {
            let fix =
                "is slurmctld running, and does SLURM_CONF (or /etc/slurm/slurm.conf) name it?";
            return vec![Check::fail("engine", format!("Slurm did not answer: {why}; {fix}"))];
        }
        Some(Ok(nodes)) => nodes,
    };
    let up = nodes.iter().filter(|n| n.up()).count();
    if up == 0 {
        let detail = if nodes.is_empty() {
            format!("cluster {name}: its partition has no nodes; check `partition` in .harnery/config.json")
        } else {
            format!("cluster {name}: no node is up; `sinfo -N` shows why, `scontrol update nodename=NODE state=resume` returns one")
        };
        checks.push(Check::fail("engine", detail));
        return checks;
    }
    checks.push(Check::pass("engine", format!("Slurm answers: {up} of {} nodes up", nodes.len())));
    for node in nodes {
        if !node.up() {
            // A node down is the engine's business: segments go to the others.
            checks.push(Check::pass(
                format!("node {}", node.name),
                format!("{} (not used)", node.state),
            ));
            continue;
        }
        let n = &node.name;
        match observed.reports.get(n) {
            None => checks.push(Check::fail(format!("node {n}"), "not probed")),
            Some(Err(why)) => checks.push(Check::fail(
                format!("node {n}"),
                format!("a step could not run harn there: {why}; check `harn` in the cluster's configuration (a path on the nodes, or on their PATH)"),
            )),
            Some(Ok(report)) => node_checks(n, ours, report, &mut checks),
        }
    }
    checks
}

fn node_checks(n: &str, ours: &str, report: &NodeReport, checks: &mut Vec<Check>) {
    if report.version == ours {
        checks.push(Check::pass(format!("{n}: harn"), report.version.clone()));
    } else {
        checks.push(Check::fail(
            format!("{n}: harn"),
            format!("{} there, {ours} here: install this version on the nodes", report.version),
        ));
    }
    match (&report.clone_error, &report.push_error) {
        (Some(e), _) => checks.push(Check::fail(
            format!("{n}: repository"),
            format!("cannot clone: {e}; the nodes need read access to `repository`"),
        )),
        (None, Some(e)) => checks.push(Check::fail(
            format!("{n}: repository"),
            format!("cloned, but cannot push: {e}; the nodes need write access to `repository`"),
        )),
        (None, None) => checks.push(Check::pass(format!("{n}: repository"), "cloned and pushed")),
    }
    for (adapter, problem) in &report.adapters {
        match problem {
            None => checks.push(Check::pass(format!("{n}: {adapter}"), "installed and ready")),
            Some(why) => checks.push(Check::fail(format!("{n}: {adapter}"), why.clone())),
        }
    }
}

/// A job as the engine reports it (`scontrol show job -o ID`: one line of `Key=Value`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Job {
    /// Its id.
    pub id: String,
    /// Its state (`RUNNING`, `COMPLETED`, `NODE_FAIL`, `CANCELLED`, `PREEMPTED`, `REQUEUED`).
    pub state: String,
    /// Why it is in that state, in the engine's word (`None`, `NodeDown`).
    pub reason: String,
    /// The nodes it ran on (`n2`), empty before it started.
    pub nodes: String,
    /// How often the engine restarted it: above 0, it ran again behind harn's back.
    pub restarts: u32,
}

/// Parses one line of `scontrol show job -o`; the keys harn reads must be there.
pub fn parse_job(line: &str) -> Result<Job, BadLine> {
    let mut fields: BTreeMap<&str, &str> = BTreeMap::new();
    for word in line.split_whitespace() {
        if let Some((key, value)) = word.split_once('=') {
            fields.entry(key).or_insert(value);
        }
    }
    let get = |key: &str| {
        fields.get(key).map(|v| (*v).to_owned()).ok_or_else(|| BadLine {
            line: 1,
            text: line.into(),
            want: format!("a job line with {key}"),
        })
    };
    let restarts = get("Restarts")?;
    Ok(Job {
        id: get("JobId")?,
        state: get("JobState")?,
        reason: fields.get("Reason").map(|v| (*v).to_owned()).unwrap_or_default(),
        nodes: fields
            .get("NodeList")
            .filter(|v| **v != "(null)")
            .map(|v| (*v).to_owned())
            .unwrap_or_default(),
        restarts: restarts.parse().map_err(|_| BadLine {
            line: 1,
            text: line.into(),
            want: format!("a job line whose Restarts ({restarts}) is a count"),
        })?,
    })
}

/// What a job's state means for the segment it carried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobVerdict {
    /// Still pending or running: the segment goes on (or, for a coordinator that lost it,
    /// must be cancelled before anything is recorded).
    Live,
    /// It ended for the segment's own reasons (the step's exit is the workflow's).
    Ended,
    /// The engine ended it, in words: not the work's doing ([`FailureClass::Infrastructure`]).
    ///
    /// [`FailureClass::Infrastructure`]: crate::work::FailureClass::Infrastructure
    Fault(String),
}

/// Judges `job` for the segment it carried: the segment's own end, or the engine's fault.
/// `ours` is true when harn itself cancelled the job (the run's timeout, a person's `work
/// cancel`): that cancel is the run's end, as the driver already knows. A job the engine
/// restarted is a fault whatever its state: it ran again where harn could not see it. A job
/// cancelled by anyone else (an administrator's `scancel`, the cluster draining a node) is
/// the cluster's doing and uncharged; a run that cancels its own job to go uncharged is
/// bounded by its item's uncharged attempts, as any infrastructure failure is.
pub fn judge_job(job: &Job, ours: bool) -> JobVerdict {
    let on = if job.nodes.is_empty() { String::new() } else { format!(" on {}", job.nodes) };
    let id = &job.id;
    if job.restarts > 0 || job.state.starts_with("REQUEUE") {
        return JobVerdict::Fault(format!(
            "job {id} was requeued by the cluster ({} restarts); harn never lets it run twice",
            job.restarts
        ));
    }
    match job.state.as_str() {
        "PENDING" | "CONFIGURING" | "RUNNING" | "COMPLETING" | "SUSPENDED" | "RESIZING"
        | "STAGE_OUT" | "SIGNALING" | "STOPPED" | "RESV_DEL_HOLD" => JobVerdict::Live,
        // Out of memory is the work's own doing, as a cgroup's limit is on one machine.
        "COMPLETED" | "FAILED" | "OUT_OF_MEMORY" => JobVerdict::Ended,
        "CANCELLED" if ours => JobVerdict::Ended,
        "CANCELLED" => JobVerdict::Fault(format!("job {id} was cancelled outside harn{on}")),
        "NODE_FAIL" => {
            let node = if job.nodes.is_empty() { "its node" } else { job.nodes.as_str() };
            JobVerdict::Fault(format!("node {node} failed under job {id}"))
        }
        "PREEMPTED" => JobVerdict::Fault(format!("job {id} was preempted{on}")),
        "BOOT_FAIL" => JobVerdict::Fault(format!("job {id}'s node failed to boot{on}")),
        "DEADLINE" => JobVerdict::Fault(format!("job {id} passed its cluster deadline{on}")),
        // harn sets no time limit of the engine's: the site's limit ended it.
        "TIMEOUT" => JobVerdict::Fault(format!("job {id} passed its cluster's time limit{on}")),
        other => JobVerdict::Fault(format!("job {id} ended {other}{on} ({})", job.reason)),
    }
}

/// What a step comes to that ended without its node saying how the workflow ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unannounced {
    /// harn ended it itself (the run's timeout, `work cancel`), or the work's own doing (out
    /// of memory): the step's end is the workflow's.
    Own,
    /// The engine's fault, in words.
    Fault(String),
    /// The step is lost (the engine still runs the job, has forgotten it, or ended it
    /// without the node saying why): the job must be cancelled, and it is a fault.
    Lost(String),
}

/// Judges a step that ended unannounced: `job` as the engine says it then (`None` when it
/// does not answer), `ours` when harn cancelled it, `id` and `node` the job's.
pub fn ended_unannounced(job: Option<&Job>, ours: bool, id: &str, node: &str) -> Unannounced {
    if ours {
        return Unannounced::Own;
    }
    let lost = || {
        Unannounced::Lost(format!(
            "the connection to job {id} on {node} was lost; the job was cancelled"
        ))
    };
    match job {
        None => lost(),
        Some(job) => match judge_job(job, false) {
            JobVerdict::Fault(fault) => Unannounced::Fault(fault),
            JobVerdict::Ended if job.state == "OUT_OF_MEMORY" => Unannounced::Own,
            // Ended or still running, without the node's word on the workflow: nothing says
            // the work ended it.
            JobVerdict::Ended | JobVerdict::Live => lost(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cluster read and checked; a shape serde refuses is an error of the whole (`""`).
    fn spec(json: &str) -> Result<ClusterSpec, FieldError> {
        let spec: ClusterSpec =
            serde_json::from_str(json).map_err(|e| FieldError::new("", e.to_string()))?;
        spec.check()?;
        Ok(spec)
    }

    #[test]
    fn a_step_that_ended_unannounced_is_the_engines_unless_harn_or_the_work_ended_it() {
        let job = |state: &str| Job {
            id: "7".into(),
            state: state.into(),
            reason: String::new(),
            nodes: "n2".into(),
            restarts: 0,
        };
        let judge = |j: Option<&Job>, ours| ended_unannounced(j, ours, "7", "n2");
        assert_eq!(judge(Some(&job("CANCELLED")), true), Unannounced::Own, "harn's own cancel");
        assert_eq!(judge(Some(&job("OUT_OF_MEMORY")), false), Unannounced::Own);
        assert_eq!(
            judge(Some(&job("NODE_FAIL")), false),
            Unannounced::Fault("node n2 failed under job 7".into())
        );
        for lost in [Some(&job("RUNNING")), Some(&job("COMPLETED")), Some(&job("FAILED")), None] {
            assert!(matches!(judge(lost, false), Unannounced::Lost(f) if f.contains("lost")));
        }
    }

    #[test]
    fn a_job_line_parses_and_its_state_says_whose_end_it_was() {
        let line = "JobId=53 JobName=harn-r1 UserId=root(0) JobState=NODE_FAIL Reason=NodeDown \
                    Requeue=0 Restarts=0 BatchFlag=0 ExitCode=0:15 NodeList=n2 BatchHost=n2";
        let job = parse_job(line).unwrap();
        assert_eq!(
            (job.id.as_str(), job.state.as_str(), job.nodes.as_str()),
            ("53", "NODE_FAIL", "n2")
        );
        assert_eq!(judge_job(&job, false), JobVerdict::Fault("node n2 failed under job 53".into()));
        assert_eq!(judge_job(&job, true), JobVerdict::Fault("node n2 failed under job 53".into()));
        let state = |s: &str, restarts: u32| Job { state: s.into(), restarts, ..job.clone() };
        assert_eq!(judge_job(&state("RUNNING", 0), false), JobVerdict::Live);
        assert_eq!(judge_job(&state("COMPLETED", 0), false), JobVerdict::Ended);
        assert_eq!(judge_job(&state("CANCELLED", 0), true), JobVerdict::Ended, "harn's own cancel");
        let outside = judge_job(&state("CANCELLED", 0), false);
        assert_eq!(outside, JobVerdict::Fault("job 53 was cancelled outside harn on n2".into()));
        let limit = judge_job(&state("TIMEOUT", 0), false);
        assert!(matches!(limit, JobVerdict::Fault(f) if f.contains("time limit")));
        assert_eq!(judge_job(&state("STOPPED", 0), false), JobVerdict::Live);
        assert!(matches!(judge_job(&state("PREEMPTED", 0), false), JobVerdict::Fault(_)));
        assert!(
            matches!(judge_job(&state("COMPLETED", 1), false), JobVerdict::Fault(f) if f.contains("requeued"))
        );
        assert!(
            matches!(judge_job(&state("RUNNING", 1), false), JobVerdict::Fault(_)),
            "ran twice"
        );
        assert!(parse_job("JobId=1 JobState=RUNNING")
            .unwrap_err()
            .to_string()
            .contains("Restarts"));
        assert!(parse_job("JobId=1 JobState=RUNNING Restarts=x").is_err());
        let pending = parse_job("JobId=9 JobState=PENDING Restarts=0 NodeList=(null)").unwrap();
        assert_eq!(pending.nodes, "");
    }

    #[test]
    fn a_cluster_takes_its_documented_keys_with_defaults() {
        let s = spec(r#"{"engine": "slurm", "repository": "git@host:r.git"}"#).unwrap();
        assert_eq!((s.harn.as_str(), s.scratch.as_str()), ("harn", "/tmp/harn-scratch"));
        assert_eq!(s.partition, None);
        let full = r#"{"engine": "slurm", "repository": "/srv/r.git", "harn": "/opt/harn",
            "partition": "gpu", "scratch": "/scratch", "args": ["--account=lab"]}"#;
        assert_eq!(spec(full).unwrap().args, ["--account=lab"]);
        assert!(spec(r#"{"engine": "k8s", "repository": "r"}"#).is_err(), "unknown engine");
        assert!(spec(r#"{"engine": "slurm", "repository": "r", "nodes": 3}"#).is_err());
    }

    #[test]
    fn a_bad_cluster_names_its_field() {
        let bad = [
            (r#"{"engine": "slurm", "repository": " "}"#, "repository"),
            (r#"{"engine": "slurm", "repository": "r", "scratch": "tmp"}"#, "scratch"),
            (r#"{"engine": "slurm", "repository": "r", "partition": ""}"#, "partition"),
            (
                r#"{"engine": "slurm", "repository": "r", "args": ["--qos=x", "--requeue"]}"#,
                "args[1]",
            ),
            (r#"{"engine": "slurm", "repository": "r", "args": ["--nodelist=n1"]}"#, "args[0]"),
            (r#"{"engine": "slurm", "repository": "r", "args": ["-N2"]}"#, "args[0]"),
            (
                r#"{"engine": "slurm", "repository": "r", "args": ["--qos=x", "--nodel=n2"]}"#,
                "args[1]",
            ),
            (r#"{"engine": "slurm", "repository": "r", "args": ["-pgpu"]}"#, "args[0]"),
            (r#"{"engine": "slurm", "repository": "--upload-pack=x"}"#, "repository"),
        ];
        for (json, field) in bad {
            let e = spec(json).unwrap_err();
            assert_eq!(e.field, field, "{json}: {}", e.message);
        }
    }

    #[test]
    fn sinfo_lines_parse_once_per_node_and_states_say_whether_it_is_up() {
        let text = "n1|idle|harn*\nn2|down*|harn*\nn3|mixed|harn*\nn1|idle|gpu\n\n\
                    n4|drained|harn*\nn5|idle*|harn*\nn6|idle~|harn*\nn7|allocated+|harn*\n\
                    n8|idle|gpu\n";
        let nodes = parse_nodes(text, None).unwrap();
        let up: Vec<(&str, bool)> = nodes.iter().map(|n| (n.name.as_str(), n.up())).collect();
        let want = [("n1", true), ("n2", false), ("n3", true), ("n4", false), ("n5", false)];
        assert_eq!(up[..5], want);
        assert_eq!(up[5..], [("n6", false), ("n7", true)], "powered off; allocated in two states");
        let gpu = parse_nodes(text, Some("gpu")).unwrap();
        assert_eq!(gpu.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), ["n1", "n8"]);
        assert!(parse_nodes("n1 idle", None).unwrap_err().to_string().starts_with("line 1:"));
        assert!(parse_nodes("|idle|p", None).is_err());
        assert!(parse_nodes("n1|idle", None).is_err());
        assert!(parse_nodes("n1|idle|p|x", None).is_err());
    }

    fn report(node: &str, version: &str) -> NodeReport {
        NodeReport { node: node.into(), version: version.into(), ..NodeReport::default() }
    }

    #[test]
    fn a_preflight_passes_only_when_every_node_in_use_is_ready() {
        let nodes = vec![
            Node { name: "n1".into(), state: "idle".into() },
            Node { name: "n2".into(), state: "down*".into() },
        ];
        let mut observed = Survey { nodes: Some(Ok(nodes)), ..Survey::default() };
        observed.reports.insert("n1".into(), Ok(report("n1", "harn 1.0")));
        let checks = preflight("lab", "harn 1.0", &observed);
        assert!(checks.iter().all(|c| c.ok), "{checks:?}");
        assert!(checks.iter().any(|c| c.detail.contains("not used")), "a down node is named");

        let mut stale = report("n1", "harn 0.9");
        stale.push_error = Some("permission denied".into());
        stale.adapters.insert("codex".into(), Some("codex is not logged in".into()));
        observed.reports.insert("n1".into(), Ok(stale));
        let failed: Vec<String> = preflight("lab", "harn 1.0", &observed)
            .into_iter()
            .filter(|c| !c.ok)
            .map(|c| c.what)
            .collect();
        assert_eq!(failed, ["n1: harn", "n1: repository", "n1: codex"]);
    }

    #[test]
    fn an_engine_that_does_not_answer_or_has_no_node_up_fails_first() {
        let silent =
            Survey { nodes: Some(Err(Unanswered("timed out".into()))), ..Survey::default() };
        let checks = preflight("lab", "v", &silent);
        assert!(!checks[0].ok && checks[0].detail.contains("slurmctld"), "{checks:?}");
        let down = vec![Node { name: "n1".into(), state: "down".into() }];
        let none = Survey { nodes: Some(Ok(down)), ..Survey::default() };
        assert!(preflight("lab", "v", &none)
            .iter()
            .any(|c| !c.ok && c.detail.contains("no node is up")));
    }
}
