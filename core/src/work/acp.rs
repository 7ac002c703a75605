//! One agent call over the Agent Client Protocol (JSON-RPC 2.0, a message a line, over the
//! program's stdin and stdout), decided purely: the client's side of the session (initialize,
//! a new session or the one a call continues, the mode the adapter starts it in, the prompt),
//! each permission the agent asks before a tool call turned into a [`ToolAsk`] for the run's
//! policy and answered with the option of the verdict's kind, and the reply, usage, cost and
//! refused tools read back from what the agent sent ([`read`]). Messages are parsed and built
//! with the protocol's own types (`agent-client-protocol-schema`).

use super::policy::{Policy, Request, Verdict};
use super::reading::{micro_usd, Denial, Reading, Usage};
use agent_client_protocol_schema::v1::{
    AgentNotification, AgentRequest, ContentBlock, InitializeRequest, LoadSessionRequest,
    NewSessionRequest, PermissionOption, PermissionOptionKind, PromptRequest,
    RequestPermissionOutcome, RequestPermissionResponse, SelectedPermissionOutcome, SessionUpdate,
    SetSessionModeRequest, TextContent, ToolCallStatus, AGENT_METHOD_NAMES,
};
use agent_client_protocol_schema::ProtocolVersion;
use serde_json::{json, Value};
use std::collections::VecDeque;

/// The id of each request the client sends: one of each, in this order, so what the agent
/// sent can be read back without the client's state. A session is loaded (`LOAD`) before a
/// new one is asked for (`SESSION`) only when the load failed.
const INITIALIZE: u64 = 0;
pub(super) const SESSION: u64 = 1;
const MODE: u64 = 2;
pub(super) const PROMPT: u64 = 3;
pub(super) const LOAD: u64 = 4;

/// A tool call the agent asks permission for, as the run's policy judges it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolAsk {
    /// The JSON-RPC id to answer.
    id: Value,
    /// The tool (`Write`, `Bash` …), or its title when the agent names none.
    pub tool: String,
    /// Its kind in the protocol's words (`edit`, `execute`, `read`, `fetch` …).
    pub kind: String,
    /// What it would do, in a line (`Write hello.txt`).
    pub title: String,
    options: Vec<PermissionOption>,
}

/// What the host does for one line the agent sent.
#[derive(Clone, Debug, PartialEq)]
pub enum AcpStep {
    /// Judge this tool call and answer with [`Client::permit`].
    Permission(ToolAsk),
    /// Nothing but the lines [`Client::poll_line`] hands out.
    Continue,
}

/// The client's side of one call's session.
#[derive(Clone, Debug)]
pub struct Client {
    prompt: String,
    cwd: String,
    resume: Option<String>,
    mode: Option<String>,
    meta: Option<Value>,
    session: Option<String>,
    out: VecDeque<String>,
    done: bool,
}

impl Client {
    /// A session in `cwd` that asks `prompt`: a new one, or `resume` when the agent can load
    /// sessions; asked for with the adapter's `meta`, and started in its `mode` when it
    /// offers it.
    pub fn start(
        prompt: &str,
        cwd: &str,
        resume: Option<&str>,
        mode: Option<&str>,
        meta: Option<&Value>,
    ) -> Client {
        let mut client = Client {
            prompt: prompt.to_owned(),
            cwd: cwd.to_owned(),
            resume: resume.map(str::to_owned),
            mode: mode.map(str::to_owned),
            meta: meta.cloned(),
            session: None,
            out: VecDeque::new(),
            done: false,
        };
        // No file system or terminal of the client's: the agent works in its own sandbox.
        let init = InitializeRequest::new(ProtocolVersion::V1);
        client.send(INITIALIZE, AGENT_METHOD_NAMES.initialize, json!(init));
        client
    }

    /// The next line to write to the agent.
    pub fn poll_line(&mut self) -> Option<String> {
        self.out.pop_front()
    }

    /// True once the prompt's turn ended, or the session could not be had.
    pub fn done(&self) -> bool {
        self.done
    }

    /// Takes one line from the agent.
    pub fn handle(&mut self, line: &str) -> AcpStep {
        let Ok(msg) = serde_json::from_str::<Value>(line.trim()) else { return AcpStep::Continue };
        let method = msg["method"].as_str();
        match (method, msg.get("id")) {
            (Some(method), Some(id)) => return self.request(method, id.clone(), &msg["params"]),
            (Some(_), None) => {}
            (None, Some(id)) => self.response(id.as_u64(), &msg),
            (None, None) => {}
        }
        AcpStep::Continue
    }

    /// Answers a permission with the first option of the verdict's kind (once before always);
    /// an agent that offers none of that kind is told the turn is cancelled.
    pub fn permit(&mut self, ask: &ToolAsk, allow: bool) {
        let kinds = match allow {
            true => [PermissionOptionKind::AllowOnce, PermissionOptionKind::AllowAlways],
            false => [PermissionOptionKind::RejectOnce, PermissionOptionKind::RejectAlways],
        };
        let chosen = kinds.iter().find_map(|k| ask.options.iter().find(|o| o.kind == *k));
        let outcome = match chosen {
            Some(o) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(
                o.option_id.clone(),
            )),
            None => RequestPermissionOutcome::Cancelled,
        };
        let result = json!(RequestPermissionResponse::new(outcome));
        self.out.push_back(json!({"jsonrpc": "2.0", "id": ask.id, "result": result}).to_string());
    }

    /// Cancels the turn while `ask` waits (the run parks on it): the permission is answered
    /// `cancelled` and the agent told to stop its turn, which it ends with `cancelled`.
    pub fn cancel(&mut self, ask: &ToolAsk) {
        let result = json!(RequestPermissionResponse::new(RequestPermissionOutcome::Cancelled));
        self.out.push_back(json!({"jsonrpc": "2.0", "id": ask.id, "result": result}).to_string());
        let session = self.session.clone().unwrap_or_default();
        let cancel = json!({"sessionId": session});
        let note = json!({"jsonrpc": "2.0", "method": AGENT_METHOD_NAMES.session_cancel, "params": cancel});
        self.out.push_back(note.to_string());
    }

    fn send(&mut self, id: u64, method: &str, params: Value) {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.out.push_back(line.to_string());
    }

    fn request(&mut self, method: &str, id: Value, params: &Value) -> AcpStep {
        if let Ok(AgentRequest::RequestPermissionRequest(r)) =
            AgentRequest::from_method_and_params(method, params)
        {
            let f = &r.tool_call.fields;
            let title = f.title.clone().unwrap_or_default();
            let tool = f.name.clone().unwrap_or_else(|| title.clone());
            let kind = f.kind.map(|k| json!(k).as_str().unwrap_or("other").to_owned());
            let kind = kind.unwrap_or_else(|| "other".to_owned());
            return AcpStep::Permission(ToolAsk { id, tool, kind, title, options: r.options });
        }
        // The client offers no file system and no terminal: anything else is not ours.
        let error = json!({"code": -32601, "message": format!("{method} is not offered")});
        self.out.push_back(json!({"jsonrpc": "2.0", "id": id, "error": error}).to_string());
        AcpStep::Continue
    }

    fn response(&mut self, id: Option<u64>, msg: &Value) {
        let failed = msg.get("error").is_some();
        match id {
            Some(INITIALIZE) if failed => self.done = true,
            Some(INITIALIZE) => {
                let loads = msg["result"]["agentCapabilities"]["loadSession"] == true;
                match self.resume.clone().filter(|_| loads) {
                    Some(session) => {
                        let load = LoadSessionRequest::new(session, self.cwd.clone());
                        self.open(LOAD, AGENT_METHOD_NAMES.session_load, json!(load));
                    }
                    None => self.open_new(),
                }
            }
            // An agent that cannot load the session it gave (lost, expired, or a bug of its
            // own) is asked the same prompt in a new session: the workspace holds what the
            // first one did.
            Some(LOAD) if failed => {
                self.resume = None;
                self.open_new();
            }
            Some(SESSION) if failed => self.done = true,
            Some(SESSION | LOAD) => {
                let result = &msg["result"];
                let session = result["sessionId"].as_str().map(str::to_owned);
                self.session = session.or_else(|| self.resume.clone());
                let modes = &result["modes"];
                let offered = |m: &str| {
                    let ids = modes["availableModes"].as_array().into_iter().flatten();
                    ids.filter_map(|a| a["id"].as_str()).any(|id| id == m)
                };
                match self.mode.clone() {
                    Some(m) if offered(&m) && modes["currentModeId"] != m.as_str() => {
                        let session = self.session.clone().unwrap_or_default();
                        let set = SetSessionModeRequest::new(session, m);
                        self.send(MODE, AGENT_METHOD_NAMES.session_set_mode, json!(set));
                    }
                    _ => self.ask(),
                }
            }
            Some(MODE) => self.ask(),
            Some(PROMPT) => self.done = true,
            _ => {}
        }
    }

    fn open_new(&mut self) {
        let new = NewSessionRequest::new(self.cwd.clone());
        self.open(SESSION, AGENT_METHOD_NAMES.session_new, json!(new));
    }

    /// Asks for a session, with the adapter's `meta`.
    fn open(&mut self, id: u64, method: &str, mut params: Value) {
        if let (Some(meta), Some(params)) = (&self.meta, params.as_object_mut()) {
            params.insert("_meta".to_owned(), meta.clone());
        }
        self.send(id, method, params);
    }

    fn ask(&mut self) {
        let session = self.session.clone().unwrap_or_default();
        let text = ContentBlock::Text(TextContent::new(self.prompt.clone()));
        let prompt = PromptRequest::new(session, vec![text]);
        self.send(PROMPT, AGENT_METHOD_NAMES.session_prompt, json!(prompt));
    }
}

/// Whether a tool kind changes anything: what a read-only call (a planner, a reviewer) is
/// never allowed, whatever the policy says.
pub fn changes(kind: &str) -> bool {
    matches!(kind, "edit" | "delete" | "move" | "execute")
}

/// The rule that refuses a tool call whatever the policy says: a read-only call (a planner,
/// a reviewer) may change nothing, and no session may switch its mode (one that asks
/// nothing would take the policy out of the loop).
pub fn refused(read_only: bool, ask: &ToolAsk) -> Option<&'static str> {
    if read_only && changes(&ask.kind) {
        Some("read-only")
    } else if ask.kind == "switch_mode" {
        Some("mode")
    } else {
        None
    }
}

/// The policy's request for a tool call.
pub fn request(ask: &ToolAsk) -> Request {
    Request::Tool { tool: ask.tool.clone(), tool_kind: ask.kind.clone(), title: ask.title.clone() }
}

/// The transcript's note of a judged tool call: the tool, the verdict and the rules behind it.
pub fn note(ask: &ToolAsk, verdict: Verdict, rules: &[String]) -> Value {
    json!({
        "what": "permission", "tool": ask.tool, "kind": ask.kind,
        "summary": ask.title, "verdict": verdict, "rules": rules,
    })
}

/// The run's word on a tool call where no host judges it in the run's slots: [`refused`],
/// then the frozen policy (`on: "tool"` rules; with none matching, a tool inside the run's
/// containment is allowed). Returns the verdict and the transcript's note of it.
pub fn judge(policy: Option<&Policy>, read_only: bool, ask: &ToolAsk) -> (Verdict, Value) {
    let (verdict, by) = match (refused(read_only, ask), policy) {
        (Some(rule), _) => (Verdict::Deny, vec![rule.to_owned()]),
        (None, Some(policy)) => {
            let eval = policy.evaluate(&request(ask));
            (eval.verdict, eval.matched)
        }
        (None, None) => (Verdict::Allow, Vec::new()),
    };
    (verdict, note(ask, verdict, &by))
}

/// What ends a call whose agent says it would bill an API key per token
/// (`_auth/status_update` with `kind: api_key`, as Claude Code's adapter says at the start)
/// when the run bills the subscription only: the same refusal as a preset's pre-flight.
pub fn billing_refusal(line: &str, api_billing: bool) -> Option<String> {
    if api_billing || !line.contains("_auth/status_update") {
        return None;
    }
    let msg: Value = serde_json::from_str(line.trim()).ok()?;
    let status = &msg["params"]["authStatus"];
    (msg["method"] == "_auth/status_update" && status["kind"] == "api_key").then(|| {
        let source = status["detail"].as_str().or(status["label"].as_str()).unwrap_or("a key");
        format!(
            "the agent would bill an API key ({source}) per token, and this run bills the \
             subscription only: log in with the subscription, or pass --allow-api-billing"
        )
    })
}

/// Why a call outside a run (a planner's, a reviewer's) ends when the policy asks a person
/// before one of its tool calls: planning cannot park, so the call fails for a person's
/// ruling. (Inside a run, the host parks the run on the tool call instead.)
pub fn asked(ask: &ToolAsk) -> String {
    format!(
        "the host policy asks a person before {} ({}), and planning cannot park: allow the \
         tool in the policy, or deny it",
        ask.tool, ask.title
    )
}

/// Reads what the agent sent (its stdout, a message a line) whole: the session, the reply
/// (the agent's message chunks after the session was had, so a loaded session's history is
/// left out), the turn's usage and the last reported cost, the tools refused, and a failure:
/// an error answering the client's own requests or a turn that did not end normally.
pub fn read(stdout: &str) -> Reading {
    let mut r = Reading::default();
    let mut text = String::new();
    let mut open = false;
    let mut cost = None;
    // Each tool call's name and title as its updates left them, by id.
    let mut tools: std::collections::BTreeMap<String, (String, String)> = Default::default();
    for msg in stdout.lines().filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok()) {
        if let (Some(method), None) = (msg["method"].as_str(), msg.get("id")) {
            let Ok(AgentNotification::SessionNotification(n)) =
                AgentNotification::from_method_and_params(method, &msg["params"])
            else {
                continue;
            };
            r.session_id.get_or_insert_with(|| n.session_id.0.to_string());
            match n.update {
                SessionUpdate::AgentMessageChunk(c) if open => {
                    if let ContentBlock::Text(t) = c.content {
                        text.push_str(&t.text);
                    }
                }
                SessionUpdate::UsageUpdate(u) if open => {
                    cost = u.cost.filter(|c| c.currency == "USD").map(|c| c.amount).or(cost);
                }
                SessionUpdate::ToolCall(t) => {
                    let name = t.name.clone().unwrap_or_else(|| t.title.clone());
                    tools.insert(t.tool_call_id.0.to_string(), (name, t.title));
                }
                SessionUpdate::ToolCallUpdate(u) => {
                    let known = tools.entry(u.tool_call_id.0.to_string()).or_default();
                    if let Some(name) = &u.fields.name {
                        known.0 = name.clone();
                    }
                    if let Some(title) = &u.fields.title {
                        known.1 = title.clone();
                    }
                    let said = u.fields.raw_output.as_ref().and_then(Value::as_str).unwrap_or("");
                    let refused = u.fields.status == Some(ToolCallStatus::Failed)
                        && said.to_lowercase().contains("permission");
                    if open && refused {
                        let (tool, summary) = known.clone();
                        r.denials.push(Denial { tool, summary });
                    }
                }
                _ => {}
            }
            continue;
        }
        let (Some(id), None) = (msg["id"].as_u64(), msg.get("method")) else { continue };
        if let Some(e) = msg.get("error") {
            // A failed load is followed by a new session, whose outcome is the call's.
            if id != MODE && id != LOAD {
                let details = e["data"]["details"].as_str().map(|d| format!(" ({d})"));
                let message = e["message"].as_str().unwrap_or("an error");
                r.error = Some(format!("{message}{}", details.unwrap_or_default()));
            }
            continue;
        }
        let result = &msg["result"];
        match id {
            SESSION | LOAD => {
                open = true;
                if let Some(s) = result["sessionId"].as_str() {
                    r.session_id = Some(s.to_owned());
                }
            }
            PROMPT => {
                let u = &result["usage"];
                let number = |k: &str| u[k].as_u64().unwrap_or(0);
                // Gemini CLI counts the turn's tokens in `_meta.quota.token_count` instead.
                let quota = &result["_meta"]["quota"]["token_count"];
                if !u.is_object() && quota.is_object() {
                    let count = |k: &str| quota[k].as_u64().unwrap_or(0);
                    r.usage = Some(Usage {
                        input_tokens: count("input_tokens"),
                        output_tokens: count("output_tokens"),
                        ..Usage::default()
                    });
                }
                if u.is_object() {
                    r.usage = Some(Usage {
                        input_tokens: number("inputTokens")
                            + number("cachedReadTokens")
                            + number("cachedWriteTokens"),
                        cached_tokens: number("cachedReadTokens"),
                        output_tokens: number("outputTokens"),
                        turns: None,
                        cost_micro_usd: None,
                    });
                }
                r.complete = true;
                match result["stopReason"].as_str().unwrap_or("") {
                    "end_turn" => r.reply = Some(text.clone()).filter(|t| !t.trim().is_empty()),
                    "max_turn_requests" => r.error = Some("reached max turns".into()),
                    "max_tokens" => r.error = Some("the reply reached its token limit".into()),
                    "refusal" => r.error = Some("the agent refused".into()),
                    other => r.error = Some(format!("the turn ended: {other}")),
                }
            }
            _ => {}
        }
    }
    if let Some(dollars) = cost {
        let usage = r.usage.get_or_insert_with(Usage::default);
        usage.cost_micro_usd = Some(micro_usd(dollars));
    }
    r
}

#[cfg(test)]
mod tests;
