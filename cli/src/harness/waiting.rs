//! What `start`, `stop` and `restart` wait for, and how they say what happened: each harness
//! is watched through `status` until it reaches the state asked for, ends somewhere else
//! (failed, stopped), or the time runs out.

use super::client::{self, is_ok};
use super::paths::Paths;
use super::protocol::Request;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The state a control verb waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Goal {
    /// Running, and ready when the harness has readiness.
    Running,
    /// Stopped.
    Stopped,
    /// A run newer than the one before the request, running (and ready).
    NewRun,
}

/// Where one harness came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// It reached the state asked for.
    pub reached: bool,
    /// What to print.
    pub line: String,
}

/// Each harness's run count before the request (absent: unknown to the daemon).
pub fn snapshot(paths: &Paths, names: &[String]) -> BTreeMap<String, u64> {
    let all = statuses(paths).unwrap_or_default();
    names
        .iter()
        .filter_map(|n| Some((n.clone(), all.get(n)?["runs"].as_u64().unwrap_or(0))))
        .collect()
}

/// Every harness's status, by name, in one request.
fn statuses(paths: &Paths) -> Option<BTreeMap<String, Value>> {
    let request = Request::Status { name: None };
    let answer = client::request(paths, &request, Duration::from_secs(5)).ok()?;
    let rows = is_ok(&answer).then(|| answer["harnesses"].as_array().cloned())??;
    Some(rows.into_iter().filter_map(|h| Some((h["name"].as_str()?.to_owned(), h))).collect())
}

/// Waits until every harness settles or the one deadline passes; one status request a look,
/// however many harnesses are waited for. Outcomes come in the order of `names`.
pub fn wait(
    paths: &Paths,
    names: &[String],
    goal: Goal,
    before: &BTreeMap<String, u64>,
    limit: Duration,
) -> Vec<Outcome> {
    let started = Instant::now();
    let mut settled: BTreeMap<&str, Outcome> = BTreeMap::new();
    let mut last = BTreeMap::new();
    while settled.len() < names.len() {
        last = statuses(paths).unwrap_or_default();
        for name in names {
            if settled.contains_key(name.as_str()) {
                continue;
            }
            let h = last.get(name).cloned().unwrap_or(Value::Null);
            let runs_before = before.get(name).copied().unwrap_or(0);
            if let Some(outcome) = judge(name, &h, goal, runs_before) {
                settled.insert(name, outcome);
            }
        }
        if settled.len() == names.len() || started.elapsed() >= limit {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    names
        .iter()
        .map(|name| {
            settled.remove(name.as_str()).unwrap_or_else(|| {
                let state = last.get(name).and_then(|h| h["state"].as_str()).unwrap_or("unknown");
                let line = format!(
                    "{name}: still {state} after {} s (it goes on; see `harn harness logs {name}`)",
                    limit.as_secs()
                );
                Outcome { reached: false, line }
            })
        })
        .collect()
}

/// How long a harness without readiness evidence must have run before `start` calls it
/// running: a program that exits at once is reported as such, not as started (supervisord's
/// `startsecs` does the same, with a second).
pub const SETTLE_MS: u64 = 250;

/// Whether `h` (a harness's status) settles the wait, and how it reads.
pub fn judge(name: &str, h: &Value, goal: Goal, runs_before: u64) -> Option<Outcome> {
    let state = h["state"].as_str()?;
    let lived = h["uptime_ms"].as_u64().unwrap_or(0) >= SETTLE_MS;
    let ready = (h["readiness"] == "none" && lived) || h["ready"] == true;
    let new_run = h["runs"].as_u64().unwrap_or(0) > runs_before;
    let reached = |line: String| Some(Outcome { reached: true, line });
    let missed = |line: String| Some(Outcome { reached: false, line });
    match (goal, state) {
        (Goal::Stopped, "stopped") => reached(format!("{name}: stopped{}", exit_words(h))),
        (Goal::Stopped, "failed") => reached(format!("{name}: failed{}", exit_words(h))),
        (Goal::Running | Goal::NewRun, "running") if ready && (goal != Goal::NewRun || new_run) => {
            let pid = h["pid"].as_u64().map_or(String::new(), |p| format!("pid {p}"));
            let readiness = if h["readiness"] == "none" { "" } else { ", ready" };
            reached(format!("{name}: running ({pid}{readiness})"))
        }
        (Goal::Running | Goal::NewRun, "failed") => missed(format!(
            "{name}: failed{}; `harn harness logs {name}` says why, `harn harness restart {name}` tries again",
            exit_words(h)
        )),
        // Stopped by its policy after a start (an `on-failure` harness that exited 0, say).
        (Goal::Running | Goal::NewRun, "stopped") if new_run => {
            missed(format!("{name}: started, then stopped{}", exit_words(h)))
        }
        _ => None,
    }
}

/// ` (exit code 0)`, ` (killed by signal 9 after its grace)`, or nothing.
fn exit_words(h: &Value) -> String {
    let e = &h["last_exit"];
    let forced = if e["forced"] == true { " after its grace" } else { "" };
    match (e["code"].as_i64(), e["signal"].as_i64()) {
        (Some(c), _) => format!(" (exit code {c}{forced})"),
        (_, Some(s)) => format!(" (killed by signal {s}{forced})"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_goal_is_judged_from_the_status() {
        let young = json!({"state": "running", "pid": 7, "readiness": "none", "runs": 1,
                           "uptime_ms": 20});
        assert_eq!(judge("a", &young, Goal::Running, 0), None, "it may yet exit at once");
        let running = json!({"state": "running", "pid": 7, "readiness": "none", "runs": 1,
                             "uptime_ms": 300});
        assert!(judge("a", &running, Goal::Running, 0).unwrap().reached);
        assert_eq!(judge("a", &running, Goal::NewRun, 1), None, "the same run: keep waiting");
        assert!(judge("a", &running, Goal::NewRun, 0).unwrap().reached);
        let unready = json!({"state": "running", "readiness": "file", "ready": false, "runs": 1});
        assert_eq!(judge("a", &unready, Goal::Running, 0), None, "a live pid is not ready");
        let stopping = json!({"state": "stopping", "runs": 1});
        assert_eq!(judge("a", &stopping, Goal::Stopped, 1), None);
        let killed = json!({"state": "stopped", "last_exit": {"signal": 9, "forced": true}});
        let o = judge("a", &killed, Goal::Stopped, 1).unwrap();
        assert!(o.reached && o.line.contains("signal 9 after its grace"), "{}", o.line);
        let failed = json!({"state": "failed", "last_exit": {"code": 3}, "runs": 5});
        let o = judge("a", &failed, Goal::Running, 0).unwrap();
        assert!(!o.reached && o.line.contains("harn harness logs a"), "{}", o.line);
    }
}
