//! The ACP client against sessions recorded from the real Claude Code ACP adapter
//! (`tests/fixtures/agents/claude-agent-acp-0.101.0/`): it says what the recorded client
//! said, in the same order, answers permissions by the verdict's kind, and reads the reply,
//! usage, cost and refused tools back from what the agent sent.

use super::*;
use crate::work::policy::parse_policy;

const ALLOW: &str =
    include_str!("../../../../tests/fixtures/agents/claude-agent-acp-0.101.0/write-allow.jsonl");
const DENY: &str =
    include_str!("../../../../tests/fixtures/agents/claude-agent-acp-0.101.0/write-deny.jsonl");

fn entries(recording: &str) -> Vec<Value> {
    recording.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// What the agent sent, as its stdout.
fn stdout(recording: &str) -> String {
    let recv = entries(recording).into_iter().filter(|e| e["dir"] == "recv");
    recv.map(|e| format!("{}\n", e["msg"])).collect()
}

/// Drives a client through a recording: every line the client writes must be the one the
/// recorded client wrote next (its method and id, or its chosen option), and gets the
/// agent's recorded answer. Returns the permissions asked.
fn replay(recording: &str, allow: bool) -> (Client, Vec<ToolAsk>) {
    let mut client = Client::start("Write hello.txt.", "<CWD>", None, Some("default"), None);
    let mut asked = Vec::new();
    let mut pending: VecDeque<Value> = entries(recording).into();
    while let Some(line) = client.poll_line() {
        let sent: Value = serde_json::from_str(&line).unwrap();
        let recorded = loop {
            let e = pending.pop_front().expect("the recording goes on");
            if e["dir"] == "send" {
                break e["msg"].clone();
            }
        };
        assert_eq!(
            (&sent["method"], &sent["id"]),
            (&recorded["method"], &recorded["id"]),
            "{line}"
        );
        assert_eq!(
            sent["result"]["outcome"]["optionId"], recorded["result"]["outcome"]["optionId"],
            "{line}"
        );
        while pending.front().is_some_and(|e| e["dir"] != "send") {
            let e = pending.pop_front().unwrap();
            if e["dir"] != "recv" {
                continue;
            }
            if let AcpStep::Permission(ask) = client.handle(&e["msg"].to_string()) {
                client.permit(&ask, allow);
                asked.push(ask);
            }
        }
    }
    (client, asked)
}

#[test]
fn the_client_says_what_the_recorded_client_said_and_the_turn_ends() {
    for (recording, allow) in [(ALLOW, true), (DENY, false)] {
        let (client, asked) = replay(recording, allow);
        assert!(client.done(), "the prompt was answered");
        assert_eq!(asked.len(), 1);
        assert_eq!((asked[0].tool.as_str(), asked[0].kind.as_str()), ("Write", "edit"));
        assert_eq!(asked[0].title, "Write hello.txt");
    }
}

#[test]
fn the_reply_usage_cost_and_refused_tools_are_read_from_what_the_agent_sent() {
    let allowed = read(&stdout(ALLOW));
    assert!(allowed.complete && allowed.error.is_none(), "{allowed:?}");
    assert!(allowed.reply.as_deref().unwrap().ends_with("done writing"), "{allowed:?}");
    assert_eq!(allowed.session_id.as_deref(), Some("3ad889f5-eae2-4c66-b6b2-4775c9616371"));
    let usage = allowed.usage.unwrap();
    assert_eq!((usage.input_tokens, usage.cached_tokens, usage.output_tokens), (38, 10, 14));
    assert!(usage.cost_micro_usd.is_some_and(|c| c > 0), "the turn's reported cost");
    assert!(allowed.denials.is_empty());
    let denied = read(&stdout(DENY));
    assert!(denied.reply.as_deref().unwrap().contains("refused"), "{denied:?}");
    assert_eq!(denied.denials.len(), 1, "{denied:?}");
    assert_eq!(denied.denials[0].tool, "Write");
}

#[test]
fn an_error_answering_the_session_or_the_prompt_is_the_calls_failure() {
    let lines = [
        r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{}}}"#,
        r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"no such mode"}}"#,
        r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"Internal error: Request timed out","data":{"errorKind":"server_error"}}}"#,
    ];
    let r = read(&lines.join("\n"));
    assert_eq!(
        r.error.as_deref(),
        Some("Internal error: Request timed out"),
        "a mode error is not"
    );
    let mut client = Client::start("p", "/w", Some("s1"), None, None);
    client.poll_line();
    // An agent that cannot load sessions gets a new one; a failed session ends the call.
    client.handle(lines[0]);
    assert!(client.poll_line().unwrap().contains("session/new"));
    client.handle(
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"Resource not found"}}"#,
    );
    assert!(client.done());
}

#[test]
fn a_session_the_call_continues_is_loaded_and_its_history_is_not_the_reply() {
    let mut client = Client::start("again", "/w", Some("s1"), None, None);
    client.poll_line();
    client.handle(r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}"#);
    let load: Value = serde_json::from_str(&client.poll_line().unwrap()).unwrap();
    assert_eq!(
        (load["method"].as_str(), load["params"]["sessionId"].as_str()),
        (Some("session/load"), Some("s1"))
    );
    let chunk = |text: &str| {
        json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":text}}}}).to_string()
    };
    let lines = [
        chunk("the old reply"),
        r#"{"jsonrpc":"2.0","id":4,"result":{}}"#.to_owned(),
        chunk("the new reply"),
        r#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}"#.to_owned(),
    ];
    assert_eq!(read(&lines.join("\n")).reply.as_deref(), Some("the new reply"));
}

#[test]
fn a_session_the_agent_cannot_load_is_asked_again_in_a_new_one() {
    let mut client = Client::start("again", "/w", Some("s1"), None, None);
    client.poll_line();
    client.handle(r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}"#);
    assert!(client.poll_line().unwrap().contains("session/load"));
    // Gemini CLI 0.61's answer when it lost the session it gave.
    let lost = r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32603,"message":"No previous sessions found for this project."}}"#;
    client.handle(lost);
    assert!(!client.done(), "the call goes on");
    let new: Value = serde_json::from_str(&client.poll_line().unwrap()).unwrap();
    assert_eq!(new["method"], "session/new");
    client.handle(r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s2"}}"#);
    let prompt: Value = serde_json::from_str(&client.poll_line().unwrap()).unwrap();
    assert_eq!(
        (prompt["method"].as_str(), prompt["params"]["sessionId"].as_str()),
        (Some("session/prompt"), Some("s2"))
    );
    let lines = [
        lost.to_owned(),
        r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s2"}}"#.to_owned(),
        json!({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s2","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"done"}}}}).to_string(),
        r#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}"#.to_owned(),
    ];
    let r = read(&lines.join("\n"));
    assert_eq!(
        (r.reply.as_deref(), r.error, r.session_id.as_deref()),
        (Some("done"), None, Some("s2"))
    );
    let shown = crate::work::adapter::progress(crate::work::adapter::Kind::Acp, lost);
    assert!(
        shown[0]["message"].as_str().unwrap().contains("could not load its session"),
        "{shown:?}"
    );
}

#[test]
fn gemini_cli_counts_the_turns_tokens_in_its_quota_meta() {
    // As Gemini CLI 0.61 ends a turn.
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"g1"}}"#,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"g1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"done"}}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn","_meta":{"quota":{"token_count":{"input_tokens":22,"output_tokens":6},"model_usage":[{"model":"gemini-2.5-flash","token_count":{"input_tokens":22,"output_tokens":6}}]}}}}"#,
    ];
    let usage = read(&lines.join("\n")).usage.expect("tokens counted");
    assert_eq!((usage.input_tokens, usage.output_tokens, usage.cost_micro_usd), (22, 6, None));
}

#[test]
fn each_tool_call_is_judged_by_the_policy_and_a_read_only_call_changes_nothing() {
    let (_, asked) = replay(ALLOW, true);
    let write = &asked[0];
    let policy = |rules: &str| {
        parse_policy("p.json", format!(r#"{{"rules": {rules}}}"#).as_bytes()).unwrap()
    };
    assert_eq!(judge(None, false, write).0, Verdict::Allow);
    let (verdict, note) = judge(None, true, write);
    assert_eq!((verdict, note["rules"][0].as_str()), (Verdict::Deny, Some("read-only")));
    let ask = policy(r#"[{"name": "edits", "on": "tool", "tool_kind": "edit", "verdict": "ask"}]"#);
    let (verdict, note) = judge(Some(&ask), false, write);
    assert_eq!((verdict, note["rules"][0].as_str()), (Verdict::Ask, Some("edits")));
    let bash = policy(r#"[{"name": "no-shell", "on": "tool", "tool": "Bash", "verdict": "deny"}]"#);
    assert_eq!(judge(Some(&bash), false, write).0, Verdict::Allow, "another tool");
    assert!(parse_policy(
        "p.json",
        br#"{"rules": [{"name": "x", "on": "tool", "action": "push", "verdict": "deny"}]}"#
    )
    .is_err());
}

#[test]
fn an_api_key_the_run_may_not_bill_ends_the_call_before_its_prompt() {
    let said = entries(ALLOW).into_iter().find(|e| e["msg"]["method"] == "_auth/status_update");
    let line = said.unwrap()["msg"].to_string();
    let why = billing_refusal(&line, false).expect("refused");
    assert!(why.contains("API key helper") && why.contains("--allow-api-billing"), "{why}");
    assert_eq!(billing_refusal(&line, true), None);
}

#[test]
fn a_session_is_asked_for_with_the_harness_meta_and_never_switches_its_mode() {
    let meta = json!({"claudeCode": {"options": {"allowDangerouslySkipPermissions": false}}});
    let mut client = Client::start("p", "/w", None, Some("default"), Some(&meta));
    client.poll_line();
    client.handle(
        r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{}}}"#,
    );
    let new: Value = serde_json::from_str(&client.poll_line().unwrap()).unwrap();
    assert_eq!(new["params"]["_meta"], meta);
    let (_, asked) = replay(ALLOW, true);
    let switch = ToolAsk { kind: "switch_mode".into(), ..asked[0].clone() };
    let (verdict, note) = judge(None, false, &switch);
    assert_eq!((verdict, note["rules"][0].as_str()), (Verdict::Deny, Some("mode")));
}
