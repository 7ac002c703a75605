//! Agent harnesses, decided purely: the built-in presets and declared harnesses (an argv with
//! the prompt on stdin and the reply on stdout), and the classification of how a call ended
//! into a reply or a failure that is charged, environmental or upstream.

use crate::work::projection::FailureClass;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Default time an agent call may take before its process group is killed.
pub const AGENT_TIMEOUT_MS: u64 = 30 * 60 * 1000;
/// Environment variables that let a harness bill an API account per token; a run in
/// `subscription` billing removes them from every call.
pub const API_KEY_VARS: &[&str] =
    &["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "CODEX_API_KEY"];
/// Longest failure text kept: the tail of stderr, then stdout.
pub const FAILURE_TEXT_MAX: usize = 500;

/// A harness: how to run one agent call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HarnessSpec {
    /// The program and its arguments; the prompt arrives on stdin.
    pub command: Vec<String>,
    /// Kill the call's process group after this long.
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
}

fn default_timeout() -> u64 {
    AGENT_TIMEOUT_MS
}

/// The built-in harnesses: `claude-code` (`claude -p`) and `codex` (`codex exec -`), both
/// reading the prompt on stdin and printing the reply.
pub fn presets() -> BTreeMap<String, HarnessSpec> {
    let spec = |argv: &[&str]| HarnessSpec {
        command: argv.iter().map(|s| s.to_string()).collect(),
        timeout_ms: AGENT_TIMEOUT_MS,
    };
    BTreeMap::from([
        ("claude-code".to_owned(), spec(&["claude", "-p", "--output-format", "text"])),
        ("codex".to_owned(), spec(&["codex", "exec", "-"])),
    ])
}

/// Finds `name` among declared harnesses, then the presets; declared ones shadow presets.
pub fn resolve(
    name: &str,
    declared: &BTreeMap<String, HarnessSpec>,
) -> Result<HarnessSpec, String> {
    let spec = declared.get(name).cloned().or_else(|| presets().remove(name)).ok_or_else(|| {
        let mut known: Vec<String> = presets().into_keys().collect();
        known.extend(declared.keys().cloned());
        known.sort();
        known.dedup();
        format!("no harness {name:?} (known: {})", known.join(", "))
    })?;
    if spec.command.first().is_none_or(|p| p.trim().is_empty()) {
        return Err(format!("harness {name:?}: command is empty"));
    }
    if spec.timeout_ms == 0 {
        return Err(format!("harness {name:?}: timeout_ms must be at least 1"));
    }
    Ok(spec)
}

/// How an agent process ended, as the host saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallEnd {
    /// The program could not be found (ENOENT at spawn).
    pub missing: bool,
    /// Another spawn error.
    pub spawn_error: Option<String>,
    /// True when the host killed it for its timeout.
    pub timed_out: bool,
    /// Its exit code, when it exited.
    pub code: Option<i32>,
    /// Its stdout.
    pub stdout: String,
    /// Its stderr.
    pub stderr: String,
}

/// The outcome of an agent call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallOutcome {
    /// True when the reply is usable.
    pub ok: bool,
    /// The reply (stdout), on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A failure that does not charge the attempt budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<FailureClass>,
}

/// Phrases that mean an outside service refused, not that the work failed.
const UPSTREAM: &[&str] = &[
    "rate limit",
    "rate-limit",
    "too many requests",
    "overloaded",
    "service unavailable",
    "bad gateway",
    "gateway timeout",
    "internal server error",
    "circuit open",
];

/// Classifies a call: a kill for the timeout fails whatever the exit code (and is charged); a
/// missing program is the environment; a non-zero exit whose output reads like a refusal by
/// an outside service is upstream; any other non-zero exit is charged.
pub fn classify(harness: &str, timeout_ms: u64, end: &CallEnd) -> CallOutcome {
    let fail =
        |error: String, class| CallOutcome { ok: false, text: None, error: Some(error), class };
    if end.missing {
        return fail(
            format!("{harness}: the program is not installed"),
            Some(FailureClass::Environment),
        );
    }
    if let Some(e) = &end.spawn_error {
        return fail(format!("{harness}: could not start: {e}"), None);
    }
    if end.timed_out {
        return fail(format!("{harness} timed out after {timeout_ms} ms and was killed"), None);
    }
    if end.code == Some(0) {
        return CallOutcome { ok: true, text: Some(end.stdout.clone()), error: None, class: None };
    }
    let text = failure_text(&end.stderr, &end.stdout);
    let lower = text.to_lowercase();
    let upstream = UPSTREAM.iter().any(|p| lower.contains(p)) || http_status(&lower);
    let code = end.code.map_or("a signal".to_owned(), |c| format!("code {c}"));
    fail(
        format!("{harness} exited with {code}: {text}"),
        upstream.then_some(FailureClass::Upstream),
    )
}

/// True when the text names a 429 or 5xx status in an HTTP context.
fn http_status(lower: &str) -> bool {
    let contexts = ["http", "status", "error"];
    lower
        .split(|c: char| !c.is_ascii_digit())
        .any(|n| n == "429" || (n.len() == 3 && n.starts_with('5')))
        && contexts.iter().any(|c| lower.contains(c))
}

/// The tail of stderr then stdout, at most [`FAILURE_TEXT_MAX`] bytes.
fn failure_text(stderr: &str, stdout: &str) -> String {
    let joined = format!("{} {}", stderr.trim(), stdout.trim());
    let joined = joined.trim();
    let mut start = joined.len().saturating_sub(FAILURE_TEXT_MAX);
    while !joined.is_char_boundary(start) {
        start += 1;
    }
    joined[start..].to_owned()
}

/// The class of a failed run (the run's own class aside): a run in which any agent call
/// succeeded did real work and is charged; otherwise an environment failure among the calls
/// wins over an upstream one.
pub fn run_class(calls: &[CallOutcome]) -> Option<FailureClass> {
    if calls.is_empty() || calls.iter().any(|c| c.ok) {
        return None;
    }
    let has = |class| calls.iter().any(|c| c.class == Some(class));
    if has(FailureClass::Environment) {
        Some(FailureClass::Environment)
    } else if has(FailureClass::Upstream) {
        Some(FailureClass::Upstream)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(code: Option<i32>, stderr: &str) -> CallEnd {
        CallEnd {
            missing: false,
            spawn_error: None,
            timed_out: false,
            code,
            stdout: "out".into(),
            stderr: stderr.into(),
        }
    }

    #[test]
    fn presets_resolve_and_declared_harnesses_shadow_them() {
        let mut declared = BTreeMap::new();
        assert_eq!(resolve("codex", &declared).unwrap().command[0], "codex");
        declared
            .insert("codex".into(), HarnessSpec { command: vec!["./fake".into()], timeout_ms: 5 });
        assert_eq!(resolve("codex", &declared).unwrap().command[0], "./fake");
        assert!(resolve("nope", &declared).unwrap_err().contains("claude-code"));
        declared.insert("empty".into(), HarnessSpec { command: vec![], timeout_ms: 5 });
        assert!(resolve("empty", &declared).unwrap_err().contains("command is empty"));
    }

    #[test]
    fn each_ending_gets_its_class() {
        let ok = classify("h", 9, &end(Some(0), ""));
        assert_eq!((ok.ok, ok.text.as_deref()), (true, Some("out")));
        let missing = CallEnd { missing: true, ..end(None, "") };
        assert_eq!(classify("h", 9, &missing).class, Some(FailureClass::Environment));
        let timed_out = CallEnd { timed_out: true, ..end(Some(0), "") };
        let t = classify("h", 9, &timed_out);
        assert!(!t.ok && t.class.is_none() && t.error.unwrap().contains("timed out after 9 ms"));
        assert_eq!(
            classify("h", 9, &end(Some(1), "Rate limit reached")).class,
            Some(FailureClass::Upstream)
        );
        assert_eq!(
            classify("h", 9, &end(Some(1), "HTTP 503 from api")).class,
            Some(FailureClass::Upstream)
        );
        assert_eq!(
            classify("h", 9, &end(Some(1), "status 429")).class,
            Some(FailureClass::Upstream)
        );
        let plain = classify("h", 9, &end(Some(1), "compile error in main.rs"));
        assert_eq!(plain.class, None);
        assert!(plain.error.unwrap().contains("compile error in main.rs out"));
    }

    #[test]
    fn a_run_is_uncharged_only_when_no_call_did_real_work() {
        let outcome = |ok, class| CallOutcome { ok, text: None, error: None, class };
        assert_eq!(run_class(&[]), None);
        let env = outcome(false, Some(FailureClass::Environment));
        let up = outcome(false, Some(FailureClass::Upstream));
        assert_eq!(run_class(&[up.clone(), env.clone()]), Some(FailureClass::Environment));
        assert_eq!(run_class(std::slice::from_ref(&up)), Some(FailureClass::Upstream));
        assert_eq!(run_class(&[outcome(true, None), env]), None);
        assert_eq!(run_class(&[outcome(false, None), up]), Some(FailureClass::Upstream));
    }

    #[test]
    fn failure_text_keeps_the_tail() {
        let long = "e".repeat(2 * FAILURE_TEXT_MAX);
        assert_eq!(failure_text(&long, "last").len(), FAILURE_TEXT_MAX);
        assert!(failure_text(&long, "last").ends_with("last"));
    }
}
