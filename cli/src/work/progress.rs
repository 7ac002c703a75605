//! What a run is doing, in lines a person reads: the run starting and ending, each stage,
//! each agent call's start and end (harness, time, tokens, cost), one line per tool use, the
//! workflow's result. `harn work run` prints them as the run goes when its output is a
//! terminal; `harn run follow` prints the same lines from the transcript.

use harn_core::work::adapter::{dollars, Usage};
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};

static LIVE: AtomicBool = AtomicBool::new(false);

/// Whether this process prints a run's progress as its transcript grows.
pub fn live(on: bool) {
    LIVE.store(on, Ordering::SeqCst);
}

/// Prints the line of a transcript record, when progress is live.
pub fn show(body: &Value) {
    if LIVE.load(Ordering::SeqCst) {
        if let Some(line) = line(body) {
            outln!("  {line}");
        }
    }
}

/// A transcript record as a line, or `None` for records a person need not see go by.
pub fn line(body: &Value) -> Option<String> {
    let s = |v: &Value| v.as_str().unwrap_or("").to_owned();
    let id = s(&body["id"]);
    // A remote segment's start names its job and node; the pid is the node's.
    let on = match (body["job"].as_str(), body["node"].as_str()) {
        (Some(job), Some(node)) => format!(" on {node} as job {job}"),
        _ => String::new(),
    };
    Some(match body["event"].as_str()? {
        "run.start" => {
            format!("run {} started{on} (workflow pid {})", s(&body["run_id"]), body["pid"])
        }
        "run.resume" => format!("run {} resumed{on}", s(&body["run_id"])),
        "run.engine_cancel" => {
            format!("its job {} on {} was cancelled", s(&body["job"]), s(&body["node"]))
        }
        "run.spawn_failed" => format!("the workflow could not start: {}", s(&body["error"])),
        "run.timed_out" => "the run timed out: stopping the workflow and its calls".into(),
        "run.parked" => format!("parked on approval {}", s(&body["approval_id"])),
        "policy.stopped" => "stopped by policy".into(),
        "run.engine_fault" => format!("its cluster ended it: {}", s(&body["fault"])),
        "run.end" => match (&body["exit_code"], &body["signal"], &body["interrupted_by"]) {
            (_, _, Value::String(by)) => format!("interrupted by {by}"),
            _ if body["engine_fault"].is_string() => {
                format!("ended by its cluster: {}", s(&body["engine_fault"]))
            }
            (Value::Number(code), _, _) => format!("the workflow exited with code {code}"),
            (_, Value::Number(sig), _) => format!("the workflow was killed by signal {sig}"),
            _ => format!("the workflow did not start: {}", s(&body["spawn_error"])),
        },
        "workflow.message" => {
            let m = &body["message"];
            match m["op"].as_str()? {
                "stage" => format!("stage {}", s(&m["name"])),
                "log" => format!("log: {}", s(&m["message"])),
                "blocked" => format!("blocked: {}", s(&m["reason"])),
                "result" if m["ok"] == true => format!("result: ok {}", s(&m["summary"])),
                "result" => format!("result: failed {}", s(&m["error"])),
                _ => return None,
            }
        }
        "workflow.malformed" if body["suppressed"].is_u64() => {
            format!("{} more lines that were not protocol messages", body["suppressed"])
        }
        "agent.start" => format!("agent {id} started on {}", s(&body["harness"])),
        "agent.progress" => match body["what"].as_str()? {
            "tool" => format!("  {id} {} {}", s(&body["tool"]), s(&body["summary"])),
            "session" => format!("  {id} session {}", s(&body["session_id"])),
            "error" => format!("  {id} error: {}", s(&body["message"])),
            "permission" => {
                let rules = body["rules"].as_array().map_or(String::new(), |r| {
                    let names: Vec<&str> = r.iter().filter_map(Value::as_str).collect();
                    if names.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", names.join(", "))
                    }
                });
                format!(
                    "  {id} {} {}: {}{rules}",
                    s(&body["tool"]),
                    s(&body["summary"]),
                    s(&body["verdict"])
                )
            }
            "plan" => {
                let steps = body["entries"].as_array().map_or(0, Vec::len);
                format!("  {id} plan of {steps} steps")
            }
            "retry" => {
                let class = body["class"]
                    .as_str()
                    .map_or("charged".to_owned(), |c| format!("{c}, uncharged"));
                format!(
                    "  {id} try {}/{} failed ({class}): {}; trying again, {} left",
                    body["try"],
                    body["of"],
                    s(&body["error"]),
                    s(&body["left"])
                )
            }
            _ => return None,
        },
        "agent.end" => {
            let how = match body["ok"] == true {
                true => "replied".to_owned(),
                false => format!("failed: {}", s(&body["error"])),
            };
            let mut line = format!("agent {id} {how}");
            if let Some(ms) = body["elapsed_ms"].as_u64() {
                line.push_str(&format!(" · {}", elapsed(ms)));
            }
            if let Ok(u) = serde_json::from_value::<Usage>(body["usage"].clone()) {
                line.push_str(&format!(" · {}", usage(&u)));
            }
            if let Some(denials) = body["denials"].as_array().filter(|d| !d.is_empty()) {
                line.push_str(&format!(" · {} tool uses denied", denials.len()));
            }
            line
        }
        _ => return None,
    })
}

/// `12.3 s`, `4 min 05 s`.
pub fn elapsed(ms: u64) -> String {
    if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{} min {:02} s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

/// `1,234 tokens in (1,000 cached), 56 out, 3 turns, $0.0123`.
pub fn usage(u: &Usage) -> String {
    let mut parts = vec![format!("{} tokens in", thousands(u.input_tokens))];
    if u.cached_tokens > 0 {
        parts[0].push_str(&format!(" ({} cached)", thousands(u.cached_tokens)));
    }
    parts.push(format!("{} out", thousands(u.output_tokens)));
    if let Some(t) = u.turns {
        parts.push(format!("{t} turn{}", if t == 1 { "" } else { "s" }));
    }
    parts.push(u.cost_micro_usd.map_or_else(|| "cost unknown".to_owned(), dollars));
    parts.join(", ")
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn records_read_as_lines() {
        let end = json!({"event": "agent.end", "id": "a1", "ok": true, "elapsed_ms": 12_340,
            "usage": {"input_tokens": 1234, "cached_tokens": 1000, "output_tokens": 56, "turns": 3, "cost_micro_usd": 12_300}});
        assert_eq!(
            line(&end).unwrap(),
            "agent a1 replied · 12.3 s · 1,234 tokens in (1,000 cached), 56 out, 3 turns, $0.0123"
        );
        let tool = json!({"event": "agent.progress", "id": "a1", "what": "tool", "tool": "Write", "summary": "hello.txt"});
        assert_eq!(line(&tool).unwrap(), "  a1 Write hello.txt");
        let stage =
            json!({"event": "workflow.message", "message": {"op": "stage", "name": "review"}});
        assert_eq!(line(&stage).unwrap(), "stage review");
        assert!(line(&json!({"event": "host.reply"})).is_none());
        assert_eq!(elapsed(245_000), "4 min 05 s");
    }
}
