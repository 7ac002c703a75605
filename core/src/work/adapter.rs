//! The agent programs harn drives, as adapters. Each speaks one command-line dialect
//! ([`Kind`]): how a call's argv is made from its options (model, effort, turns, what it may
//! change, a reply schema, a vendor session to continue), how the program's output is read,
//! line by line as it arrives and whole at the end, into a reply with the vendor's session,
//! turns, tokens, cost and permission denials, and which effort words it takes.

pub(crate) use super::reading::micro_usd;
pub use super::reading::Denial;
pub use super::reading::Reading;
pub use super::reading::{dollars, Usage};
use crate::error::RecordError;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The command-line dialect an adapter speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Prompt on stdin, the reply as plain text on stdout; options reach it as `HARN_MODEL`,
    /// `HARN_EFFORT` and `HARN_MAX_TURNS`.
    #[default]
    Text,
    /// Claude Code's `claude -p --output-format stream-json --verbose`.
    ClaudeCode,
    /// Codex's `codex exec --json`.
    Codex,
    /// Any program speaking the Agent Client Protocol on its stdin and stdout (Gemini CLI,
    /// Claude Code's ACP adapter …): the prompt goes in a session, and the agent asks before
    /// each tool call, which the run's policy decides ([`super::acp`]).
    Acp,
}

/// What a call may change.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// Edit files in the workspace the run may change (the default).
    #[default]
    Write,
    /// Read only: a reviewer, a planner.
    ReadOnly,
}

/// One call's options, as the argv carries them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallOptions<'a> {
    /// The model to ask for.
    pub model: Option<&'a str>,
    /// The effort word (checked against [`efforts`] when the team was frozen).
    pub effort: Option<&'a str>,
    /// Turns the agent may take (Claude Code).
    pub max_turns: Option<u32>,
    /// What the call may change.
    pub access: Access,
    /// The JSON schema the reply must match, inline (Claude Code's `--json-schema`).
    pub schema: Option<&'a Value>,
    /// The same schema in a file (Codex's `--output-schema`).
    pub schema_file: Option<&'a str>,
    /// The vendor session to continue.
    pub resume: Option<&'a str>,
    /// Beyond its working directory, where the run may write (its containment's writable
    /// paths): a program whose own sandbox confines writes is told them, so the two walls
    /// agree (Codex's `sandbox_workspace_write.writable_roots`; in a worktree, the object
    /// store and the branch it commits to).
    pub writable: &'a [String],
}

/// The turn limit a Claude Code call gets when its profile names none: enough for real work,
/// bounded so a loop of tool calls ends.
pub(crate) const DEFAULT_MAX_TURNS: u32 = 60;

/// The effort words an adapter takes; `None` when it takes none (a text adapter gets the
/// word in `HARN_EFFORT` and judges it itself).
pub fn efforts(kind: Kind) -> Option<&'static [&'static str]> {
    match kind {
        Kind::Text => None,
        Kind::ClaudeCode => Some(&["low", "medium", "high", "xhigh", "max"]),
        Kind::Codex => Some(&["minimal", "low", "medium", "high", "xhigh"]),
        Kind::Acp => Some(&[]),
    }
}

/// Refuses an effort word the adapter does not take, naming the ones it does.
pub(crate) fn check_effort(kind: Kind, word: &str) -> Result<(), RecordError> {
    match efforts(kind) {
        Some([]) => Err(RecordError::refused(format!(
            "effort {word:?}: this harness takes no effort word (set it in the agent's own \
             settings)"
        ))),
        Some(words) if !words.contains(&word) => Err(RecordError::refused(format!(
            "effort {word:?} is not one this harness takes ({})",
            words.join(", ")
        ))),
        _ => Ok(()),
    }
}

/// The argv of one call: the adapter's command, then the options in the adapter's flags.
/// A Codex call reads its prompt from stdin (`-`, always last).
pub fn argv(kind: Kind, command: &[String], o: &CallOptions<'_>) -> Vec<String> {
    let mut argv: Vec<String> = command.to_vec();
    let mut push = |args: &[&str]| argv.extend(args.iter().map(|s| s.to_string()));
    match kind {
        // The prompt and everything else go through the session.
        Kind::Text | Kind::Acp => {}
        Kind::ClaudeCode => {
            if let Some(m) = o.model {
                push(&["--model", m]);
            }
            if let Some(e) = o.effort {
                push(&["--effort", e]);
            }
            let turns = o.max_turns.unwrap_or(DEFAULT_MAX_TURNS).to_string();
            push(&["--max-turns", &turns]);
            // Headless, a tool the mode does not allow is denied (and listed), never asked.
            let mode = match o.access {
                Access::Write => "acceptEdits",
                Access::ReadOnly => "plan",
            };
            push(&["--permission-mode", mode]);
            if let Some(schema) = o.schema {
                push(&["--json-schema", &schema.to_string()]);
            }
            if let Some(session) = o.resume {
                push(&["--resume", session]);
            }
        }
        Kind::Codex => {
            let sandbox = match o.access {
                Access::Write => "workspace-write",
                Access::ReadOnly => "read-only",
            };
            push(&["--sandbox", sandbox]);
            if o.access == Access::Write && !o.writable.is_empty() {
                // A TOML array of strings, which JSON's quoting writes too.
                let roots = serde_json::to_string(o.writable).expect("strings serialize");
                push(&["-c", &format!("sandbox_workspace_write.writable_roots={roots}")]);
            }
            if let Some(m) = o.model {
                push(&["-m", m]);
            }
            if let Some(e) = o.effort {
                push(&["-c", &format!("model_reasoning_effort={e}")]);
            }
            if let Some(file) = o.schema_file {
                push(&["--output-schema", file]);
            }
            if let Some(session) = o.resume {
                push(&["resume", session]);
            }
            push(&["-"]);
        }
    }
    argv
}

/// The environment one call's options add (and, for the presets, `TZ=UTC`): a text adapter
/// gets them as `HARN_MODEL`, `HARN_EFFORT` and `HARN_MAX_TURNS`; Claude Code gets its
/// effort as `CLAUDE_CODE_EFFORT_LEVEL` as well as `--effort`, because the flag holds only
/// while Claude can save its state, and the variable wins however that goes.
pub fn env(kind: Kind, o: &CallOptions<'_>) -> Vec<(&'static str, String)> {
    let mut env = Vec::new();
    match kind {
        Kind::Text => {
            if let Some(m) = o.model {
                env.push(("HARN_MODEL", m.to_owned()));
            }
            if let Some(e) = o.effort {
                env.push(("HARN_EFFORT", e.to_owned()));
            }
            if let Some(t) = o.max_turns {
                env.push(("HARN_MAX_TURNS", t.to_string()));
            }
        }
        Kind::ClaudeCode => {
            if let Some(e) = o.effort {
                env.push(("CLAUDE_CODE_EFFORT_LEVEL", e.to_owned()));
            }
        }
        Kind::Codex | Kind::Acp => {}
    }
    // Both name when a usage limit resets as a clock time in their zone: in UTC, the time
    // is one harn can read (`usage_limit::resets_at`) without the machine's zone database.
    if matches!(kind, Kind::ClaudeCode | Kind::Codex) {
        env.push(("TZ", "UTC".to_owned()));
    }
    env
}

/// Reads a program's whole output. A text adapter's reply is its stdout.
pub fn read(kind: Kind, stdout: &str) -> Reading {
    match kind {
        Kind::Text => Reading { reply: Some(stdout.to_owned()), ..Reading::default() },
        Kind::ClaudeCode => read_claude(stdout),
        Kind::Codex => read_codex(stdout),
        Kind::Acp => super::acp::read(stdout),
    }
}

fn lines(stdout: &str) -> impl Iterator<Item = Value> + '_ {
    stdout.lines().filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
}

fn str_of(v: &Value) -> Option<String> {
    v.as_str().filter(|s| !s.is_empty()).map(str::to_owned)
}

fn u64_of(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// Claude Code: `stream-json` lines ending in a `result` (the same object `--output-format
/// json` prints alone).
fn read_claude(stdout: &str) -> Reading {
    let mut r = Reading::default();
    for v in lines(stdout) {
        if let Some(id) = str_of(&v["session_id"]) {
            r.session_id = Some(id);
        }
        if v["type"] != "result" {
            continue;
        }
        let u = &v["usage"];
        let cache_read = u64_of(&u["cache_read_input_tokens"]);
        let input =
            u64_of(&u["input_tokens"]) + cache_read + u64_of(&u["cache_creation_input_tokens"]);
        r.usage = Some(Usage {
            input_tokens: input,
            cached_tokens: cache_read,
            output_tokens: u64_of(&u["output_tokens"]),
            turns: v["num_turns"].as_u64().map(|n| n as u32),
            cost_micro_usd: v["total_cost_usd"].as_f64().map(micro_usd),
        });
        r.denials = v["permission_denials"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| Denial {
                tool: str_of(&d["tool_name"]).unwrap_or_else(|| "tool".into()),
                summary: summarize_input(&d["tool_input"]),
            })
            .collect();
        let structured = v.get("structured_output").filter(|s| !s.is_null());
        let text = structured.map(|s| s.to_string()).or_else(|| str_of(&v["result"]));
        // An API error is `subtype: success` with `is_error: true` and the words in
        // `result`; a turn limit is `error_max_turns` with its words in `errors`.
        let failed = v["is_error"] == true || v["subtype"].as_str().is_some_and(|s| s != "success");
        if failed {
            let errors: Vec<&str> =
                v["errors"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
            let subtype = v["subtype"].as_str().unwrap_or("error");
            r.error = Some(match (text, errors.is_empty()) {
                (Some(t), _) => t,
                (None, false) => format!("{} ({subtype})", errors.join("; ")),
                (None, true) => subtype.replace('_', " "),
            });
        } else {
            r.reply = text;
        }
    }
    r
}

/// Codex: `--json` events; the reply is the last agent message, usage is summed over turns.
fn read_codex(stdout: &str) -> Reading {
    let mut r = Reading::default();
    let mut usage: Option<Usage> = None;
    let mut errors = Vec::new();
    for v in lines(stdout) {
        match v["type"].as_str().unwrap_or("") {
            "thread.started" => r.session_id = str_of(&v["thread_id"]),
            "item.completed" if v["item"]["type"] == "agent_message" => {
                r.reply = str_of(&v["item"]["text"]).or(r.reply.take());
            }
            "turn.completed" => {
                let u = &v["usage"];
                let turn = Usage {
                    input_tokens: u64_of(&u["input_tokens"]),
                    cached_tokens: u64_of(&u["cached_input_tokens"]),
                    output_tokens: u64_of(&u["output_tokens"]),
                    turns: Some(1),
                    cost_micro_usd: None,
                };
                usage.get_or_insert_with(Usage::default).add(&turn);
            }
            "turn.failed" => errors
                .push(str_of(&v["error"]["message"]).unwrap_or_else(|| "the turn failed".into())),
            "error" => errors.push(str_of(&v["message"]).unwrap_or_else(|| "error".into())),
            _ => {}
        }
    }
    r.usage = usage;
    if let Some(last) = errors.pop() {
        r.error = Some(last);
    }
    r
}

/// A tool's input in a line: its path, command or pattern when it has one.
fn summarize_input(input: &Value) -> String {
    for key in ["file_path", "path", "command", "pattern", "url", "description"] {
        if let Some(s) = input[key].as_str() {
            return one_line(s);
        }
    }
    one_line(&input.to_string())
}

fn one_line(s: &str) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut cut: String = flat.chars().take(120).collect();
    if cut.len() < flat.len() {
        cut.push('…');
    }
    cut
}

/// Whether a line of a streaming program's output is progress: anything but a notice that
/// the program is retrying or reconnecting (Claude Code's `api_retry`, Codex's
/// `Reconnecting…` errors and its transport fallback). A call whose only output is such
/// notices is stuck, and the watchdog ends it.
pub(crate) fn is_progress(kind: Kind, line: &str) -> bool {
    let Ok(v) = serde_json::from_str::<Value>(line.trim()) else { return kind == Kind::Text };
    match kind {
        Kind::Text => true,
        Kind::ClaudeCode => !(v["type"] == "system" && v["subtype"] == "api_retry"),
        Kind::Codex => {
            let retrying = v["type"] == "error"
                && v["message"].as_str().is_some_and(|m| m.starts_with("Reconnecting"));
            let fallback = v["type"] == "item.completed" && v["item"]["type"] == "error";
            !(retrying || fallback)
        }
        // Every message is the agent's: the watchdog's silence is a silence of messages.
        Kind::Acp => true,
    }
}

/// What a streaming call has shown so far, for its no-progress watchdog: whether it has
/// made real progress, and which tools it started that have not finished. A tool running
/// (a test suite, a build) prints nothing until it ends, so the call is not idle then; only
/// the call's own timeout bounds it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Activity {
    /// Tool uses (Claude Code) or items (Codex) started and not yet finished.
    open: std::collections::BTreeSet<String>,
    /// True once any line was progress.
    progressed: bool,
}

impl Activity {
    /// Takes in one line; true when it is progress (see [`is_progress`]), which restarts the
    /// idle clock.
    pub fn observe(&mut self, kind: Kind, line: &str) -> bool {
        let progress = is_progress(kind, line);
        let Ok(v) = serde_json::from_str::<Value>(line.trim()) else { return progress };
        let content = || v["message"]["content"].as_array().into_iter().flatten();
        let what = v["type"].as_str().unwrap_or("");
        // Work, not setup: a session or turn starting says the program is alive, not that it
        // has begun on the task.
        self.progressed |= progress
            && match kind {
                Kind::Text => true,
                Kind::ClaudeCode => match what {
                    // Claude Code writes its own failures (a request that timed out) as an
                    // assistant message from the model `<synthetic>`: not the model's word.
                    "assistant" => v["message"]["model"] != "<synthetic>",
                    "user" => true,
                    // An error result is the program's word, and Claude Code's own request
                    // timeout can end in a `success` result with no text and no cost: the
                    // vendor never answered.
                    "result" => {
                        let replied = str_of(&v["result"]).is_some()
                            || v.get("structured_output").is_some_and(|s| !s.is_null());
                        (replied && v["is_error"] != true)
                            || v["total_cost_usd"].as_f64().is_some_and(|c| c > 0.0)
                    }
                    _ => false,
                },
                Kind::Codex => what.starts_with("item.") || what == "turn.completed",
                Kind::Acp => matches!(
                    acp_update(&v),
                    "agent_message_chunk"
                        | "agent_thought_chunk"
                        | "tool_call"
                        | "tool_call_update"
                        | "plan"
                ),
            };
        match (kind, what) {
            (Kind::ClaudeCode, "assistant") => {
                for c in content().filter(|c| c["type"] == "tool_use") {
                    self.open.insert(c["id"].as_str().unwrap_or("").to_owned());
                }
            }
            (Kind::ClaudeCode, "user") => {
                for c in content().filter(|c| c["type"] == "tool_result") {
                    self.open.remove(c["tool_use_id"].as_str().unwrap_or(""));
                }
            }
            // Codex announces commands, file changes and tool calls with item.started; a
            // message or reasoning item arrives completed.
            (Kind::Codex, "item.started") => {
                self.open.insert(v["item"]["id"].as_str().unwrap_or("").to_owned());
            }
            (Kind::Codex, "item.completed") => {
                self.open.remove(v["item"]["id"].as_str().unwrap_or(""));
            }
            (Kind::Codex, "turn.completed" | "turn.failed") => self.open.clear(),
            (Kind::Acp, _) => {
                let update = &v["params"]["update"];
                let id = update["toolCallId"].as_str().unwrap_or("").to_owned();
                match (acp_update(&v), update["status"].as_str()) {
                    ("tool_call", Some("pending" | "in_progress") | None) => {
                        self.open.insert(id);
                    }
                    ("tool_call" | "tool_call_update", Some("completed" | "failed")) => {
                        self.open.remove(&id);
                    }
                    _ => {}
                }
            }
            _ => {}
        }
        progress
    }

    /// True while a tool it started is still running: silence is expected then.
    pub fn busy(&self) -> bool {
        !self.open.is_empty()
    }

    /// True once the call has made any progress at all.
    pub fn progressed(&self) -> bool {
        self.progressed
    }
}

/// What one line of a program's output shows while the call runs, for the transcript and a
/// terminal: the session starting, a tool used, a turn ended, a failure. Text streaming and
/// anything else is left out (the reply is recorded once, at the end).
pub fn progress(kind: Kind, line: &str) -> Vec<Value> {
    let Ok(v) = serde_json::from_str::<Value>(line.trim()) else { return Vec::new() };
    match kind {
        Kind::Text => Vec::new(),
        Kind::Acp => acp_progress(&v),
        Kind::ClaudeCode => match v["type"].as_str().unwrap_or("") {
            "system" if v["subtype"] == "init" => {
                vec![json!({ "what": "session", "session_id": v["session_id"], "model": v["model"] })]
            }
            "assistant" => v["message"]["content"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|c| c["type"] == "tool_use")
                .map(|c| json!({ "what": "tool", "tool": c["name"], "summary": summarize_input(&c["input"]) }))
                .collect(),
            "system" if v["subtype"] == "api_retry" => vec![json!({
                "what": "error",
                "message": format!(
                    "retry {}/{} ({} {})",
                    v["attempt"],
                    v["max_retries"],
                    v["error_status"],
                    v["error"].as_str().unwrap_or("")
                ),
            })],
            "result" => vec![json!({
                "what": "result", "subtype": v["subtype"], "turns": v["num_turns"],
                "cost_usd": v["total_cost_usd"],
            })],
            _ => Vec::new(),
        },
        Kind::Codex => match v["type"].as_str().unwrap_or("") {
            "thread.started" => vec![json!({ "what": "session", "session_id": v["thread_id"] })],
            "item.started" | "item.completed" => {
                let item = &v["item"];
                let tool = match item["type"].as_str().unwrap_or("") {
                    "command_execution" => Some(("shell", summarize_input(item))),
                    "file_change" => Some(("edit", file_changes(item))),
                    "mcp_tool_call" => Some(("mcp", one_line(item["tool"].as_str().unwrap_or("")))),
                    "web_search" => Some(("web_search", one_line(item["query"].as_str().unwrap_or("")))),
                    _ => None,
                };
                match tool {
                    Some((tool, summary)) if v["type"] == "item.started" || item["type"] == "file_change" => {
                        vec![json!({ "what": "tool", "tool": tool, "summary": summary })]
                    }
                    _ => Vec::new(),
                }
            }
            "turn.completed" => vec![json!({ "what": "turn", "usage": v["usage"] })],
            "turn.failed" | "error" => {
                let message = v["error"]["message"].as_str().or(v["message"].as_str()).unwrap_or("");
                vec![json!({ "what": "error", "message": one_line(message) })]
            }
            _ => Vec::new(),
        },
    }
}

/// The kind of an ACP `session/update` notification (`tool_call`, `plan` …), or "".
fn acp_update(v: &Value) -> &str {
    match v["method"].as_str() {
        Some("session/update") => v["params"]["update"]["sessionUpdate"].as_str().unwrap_or(""),
        _ => "",
    }
}

/// What an ACP message shows while the call runs: the session, each tool call as it starts,
/// the plan, the turn's end.
fn acp_progress(v: &Value) -> Vec<Value> {
    let update = &v["params"]["update"];
    match acp_update(v) {
        "tool_call" => {
            let tool = update["name"].as_str().or(update["kind"].as_str()).unwrap_or("tool");
            vec![
                json!({ "what": "tool", "tool": tool, "summary": one_line(update["title"].as_str().unwrap_or("")) }),
            ]
        }
        "plan" => {
            let entries: Vec<Value> = update["entries"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| json!({ "step": one_line(e["content"].as_str().unwrap_or("")), "status": e["status"] }))
                .collect();
            vec![json!({ "what": "plan", "entries": entries })]
        }
        _ if v["id"] == super::acp::SESSION && v["result"].is_object() => {
            vec![json!({ "what": "session", "session_id": v["result"]["sessionId"] })]
        }
        _ if v["id"] == super::acp::LOAD && v["result"].is_object() => {
            vec![
                json!({ "what": "session", "session_id": v["result"]["sessionId"], "loaded": true }),
            ]
        }
        _ if v["id"] == super::acp::LOAD && v["error"].is_object() => {
            let said = one_line(v["error"]["message"].as_str().unwrap_or("an error"));
            let why =
                format!("the agent could not load its session ({said}); a new one asks again");
            vec![json!({ "what": "error", "message": why })]
        }
        _ if v["id"] == super::acp::PROMPT && v["result"].is_object() => {
            vec![json!({ "what": "result", "stop_reason": v["result"]["stopReason"] })]
        }
        _ => Vec::new(),
    }
}

fn file_changes(item: &Value) -> String {
    let paths: Vec<&str> = item["changes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["path"].as_str())
        .collect();
    one_line(&paths.join(", "))
}

/// True when `kind`'s program confines what its model runs in a sandbox of its own that
/// has to mount: Codex's is bubblewrap (a user namespace and bind mounts), which cannot start
/// under Landlock, since a Landlock domain may not change mounts. Such a call runs in the
/// run's mount namespace, with `.harnery/` read-only, and without Landlock, so the program's
/// own sandbox is the inner wall and harn's namespace the outer one.
pub fn sandbox_mounts(kind: Kind) -> bool {
    kind == Kind::Codex
}

/// The hosts an adapter of `kind` whose program is `program` needs, as its vendor documents
/// them: its API, its login, and what the program reports to.
pub fn preset_hosts(kind: Kind, program: &str) -> &'static [&'static str] {
    let name = program.rsplit('/').next().unwrap_or(program);
    match kind {
        Kind::ClaudeCode => ANTHROPIC,
        Kind::Codex => OPENAI,
        Kind::Acp if name.contains("gemini") => GOOGLE,
        Kind::Acp if name.contains("claude") => ANTHROPIC,
        Kind::Acp if name.contains("codex") => OPENAI,
        _ => &[],
    }
}

const ANTHROPIC: &[&str] = &[
    "api.anthropic.com:443",
    "console.anthropic.com:443",
    "claude.ai:443",
    "statsig.anthropic.com:443",
];
const OPENAI: &[&str] = &["api.openai.com:443", "chatgpt.com:443", "auth.openai.com:443"];
const GOOGLE: &[&str] = &[
    "generativelanguage.googleapis.com:443",
    "cloudcode-pa.googleapis.com:443",
    "oauth2.googleapis.com:443",
    "accounts.google.com:443",
    "play.googleapis.com:443",
];

#[cfg(test)]
mod tests;

#[cfg(test)]
mod hosts_tests {
    use super::*;

    #[test]
    fn each_preset_names_its_vendors_hosts_and_a_text_adapter_none() {
        assert!(preset_hosts(Kind::Codex, "codex").contains(&"api.openai.com:443"));
        let gemini = preset_hosts(Kind::Acp, "/usr/bin/gemini");
        assert!(gemini.iter().any(|h| h.starts_with("generativelanguage")));
        assert!(preset_hosts(Kind::ClaudeCode, "claude").contains(&"api.anthropic.com:443"));
        assert!(preset_hosts(Kind::Text, "x").is_empty());
    }
}
