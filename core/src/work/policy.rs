//! Host policy: the rules an operator freezes into a run that decide, before each agent call
//! and each `authorize` request, whether the host allows it, asks a person, or denies it.
//! Rules are evaluated independently and the strictest verdict wins (deny, then ask, then
//! allow); a request no rule matches gets its kind's default (agent calls allow, external
//! mutations deny), so authority over the outside world is only ever granted explicitly.

use crate::error::RecordError;
use crate::hash::sha256_hex;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Most rules a policy may hold.
pub(crate) const RULES_MAX: usize = 100;
/// Most policy decisions one run may make; a run past it is denied.
pub(crate) const DECISIONS_MAX: u32 = 50;

/// What the host does with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Go ahead.
    Allow,
    /// A person must rule first: the run parks on an approval.
    Ask,
    /// Refused: the run fails at this point.
    Deny,
}

/// Which requests a rule is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum On {
    /// Agent calls the workflow asks for.
    Agent,
    /// External mutations the workflow asks to be authorized (`push`, `deploy`, …).
    Authorize,
    /// Tool calls an agent asks its client for before making them (an `acp` harness).
    Tool,
}

/// One rule: every condition it names must hold for it to match.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Its name, quoted in decisions and approvals.
    pub name: String,
    /// Which requests it judges.
    pub on: On,
    /// Its verdict when it matches.
    pub verdict: Verdict,
    /// Agent calls answered by this harness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness: Option<String>,
    /// Agent calls asking for this model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Agent calls for this specialist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub specialist: Option<String>,
    /// Agent calls whose dispatched prompt is longer than this many bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_bytes_over: Option<u64>,
    /// `authorize` requests for this action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// `authorize` requests for this target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Tool calls of this tool (`Write`, `Bash` …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Tool calls of this kind (`edit`, `execute`, `read`, `fetch`, `delete` …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_kind: Option<String>,
    /// Agent calls once this much has been spent (in US dollars) in the rule's `scope`:
    /// `ask` parks the run on an approval before the next call, `deny` fails it there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_usd: Option<Usd>,
    /// What `max_cost_usd` counts: the run's calls (`run`, the default) or every call of the
    /// goal that dispatched the run, earlier runs included (`goal`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Scope>,
    /// What a call whose cost its program did not report counts as (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown_cost_usd: Option<Usd>,
}

/// A dollar amount, kept as whole millionths so budgets are integer arithmetic; written as a
/// plain number of dollars (`5`, `0.25`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Usd(pub u64);

impl Serialize for Usd {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0 as f64 / 1_000_000.0)
    }
}

impl<'de> Deserialize<'de> for Usd {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Usd, D::Error> {
        let dollars = f64::deserialize(d)?;
        if !dollars.is_finite() || !(0.0..=1e9).contains(&dollars) {
            return Err(serde::de::Error::custom("a dollar amount from 0 to 1e9"));
        }
        Ok(Usd(super::reading::micro_usd(dollars)))
    }
}

/// What a cost rule counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The run's own calls.
    Run,
    /// Every call of the dispatching goal.
    Goal,
}

/// What has been spent when a call is asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spent {
    /// By the run's calls so far, in millionths of a dollar (reported costs only).
    pub run_micro_usd: u64,
    /// Calls of the run whose cost was not reported.
    pub unknown_calls: u32,
    /// By the dispatching goal's earlier runs, when a goal dispatched the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal_before_micro_usd: Option<u64>,
}

/// A policy file (`--policy`): its rules, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// The rules.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// Whether a run must be confined (`required`) or is confined where the machine allows
    /// (`preferred`, the default, left out of the digest so older policies keep theirs).
    #[serde(default, skip_serializing_if = "is_preferred")]
    pub containment: super::containment::Requirement,
}

fn is_preferred(r: &super::containment::Requirement) -> bool {
    *r == super::containment::Requirement::Preferred
}

/// A policy as frozen into a run: its normalized content and the digest of that content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrozenPolicy {
    /// SHA-256 of the normalized content.
    pub sha256: String,
    /// The rules.
    pub policy: Policy,
}

impl FrozenPolicy {
    /// Freezes a checked policy.
    pub fn new(policy: Policy) -> FrozenPolicy {
        FrozenPolicy { sha256: sha256_hex(&canonical(&policy)), policy }
    }

    /// Checks that the recorded digest is the digest of the rules: a frozen policy whose
    /// rules were edited in place (a broader rule, a digest left as it was) is refused.
    pub fn verify(&self) -> Result<(), RecordError> {
        let actual = sha256_hex(&canonical(&self.policy));
        if actual != self.sha256 {
            return Err(RecordError::refused(format!(
                "the policy's digest {} does not match its rules ({actual}): it was edited after \
                 it was frozen",
                self.sha256
            )));
        }
        Ok(())
    }
}

/// JSON with comments (`//`, `/* */`, `#`) and trailing commas, as plain JSON: comments are
/// blanked in place, so a line a later error names is the file's own line. A block comment
/// or a string still open at the end of the file `shown` does not parse: an unclosed `/*`
/// must not silently swallow what follows it.
pub fn jsonc_to_json(shown: &str, bytes: &[u8]) -> Result<Vec<u8>, RecordError> {
    let mut text = Vec::with_capacity(bytes.len());
    std::io::Read::read_to_end(&mut json_strip_comments::StripComments::new(bytes), &mut text)
        .map_err(|_| {
            let detail = "a comment or a string is not closed at the end of the file";
            RecordError::parse(shown, None, detail)
        })?;
    Ok(text)
}

/// Parses and checks the policy file `shown` (as the operator names it); errors name the
/// file, then the line (for JSON errors) or the rule and field. Policy files are JSONC, as
/// the reference's `policy.jsonc` is: `//`, `/* */` and `#` comments and trailing commas are
/// accepted. They are blanked in place before the JSON parser sees the text, so a line an
/// error names is the file's line.
pub fn parse_policy(shown: &str, bytes: &[u8]) -> Result<Policy, RecordError> {
    let text = jsonc_to_json(shown, bytes)?;
    // The line stays in the words, after the file, as operators have always read it.
    let policy: Policy = serde_json::from_slice(&text)
        .map_err(|e| RecordError::parse(shown, None, format!("line {}: {e}", e.line())))?;
    let invalid = |detail: String| RecordError::invalid(shown, detail);
    if policy.rules.len() > RULES_MAX {
        return Err(invalid(format!("rules: at most {RULES_MAX} rules")));
    }
    for (i, r) in policy.rules.iter().enumerate() {
        let at = |field: &str| format!("rules[{i}] ({}).{field}", r.name);
        if r.name.trim().is_empty() {
            return Err(invalid(format!("rules[{i}].name: may not be empty")));
        }
        if policy.rules[..i].iter().any(|e| e.name == r.name) {
            return Err(invalid(format!("{}: the name is used by an earlier rule", at("name"))));
        }
        let agent_keys = [
            ("harness", r.harness.is_some()),
            ("model", r.model.is_some()),
            ("specialist", r.specialist.is_some()),
            ("prompt_bytes_over", r.prompt_bytes_over.is_some()),
            ("max_cost_usd", r.max_cost_usd.is_some()),
            ("scope", r.scope.is_some()),
            ("unknown_cost_usd", r.unknown_cost_usd.is_some()),
        ];
        if r.max_cost_usd.is_none() && (r.scope.is_some() || r.unknown_cost_usd.is_some()) {
            return Err(invalid(format!("{}: only with max_cost_usd", at("scope"))));
        }
        let authorize_keys = [("action", r.action.is_some()), ("target", r.target.is_some())];
        let tool_keys = [("tool", r.tool.is_some()), ("tool_kind", r.tool_kind.is_some())];
        let foreign = match r.on {
            On::Agent => authorize_keys.iter().chain(&tool_keys).find(|k| k.1),
            On::Authorize => agent_keys.iter().chain(&tool_keys).find(|k| k.1),
            On::Tool => agent_keys.iter().chain(&authorize_keys).find(|k| k.1),
        };
        if let Some((key, _)) = foreign {
            let on = json!(r.on);
            return Err(invalid(format!("{}: does not apply to rules on {on}", at(key))));
        }
    }
    Ok(policy)
}

/// What a policy is asked about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Request {
    /// An agent call about to be dispatched.
    Agent {
        /// The harness that would answer.
        harness: String,
        /// The model asked for.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// The specialist.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        specialist: Option<String>,
        /// Bytes of the dispatched prompt.
        prompt_bytes: u64,
        /// What has been spent before this call.
        #[serde(default, skip_serializing_if = "is_nothing")]
        spent: Spent,
    },
    /// An external mutation the workflow wants to make.
    Authorize {
        /// What (`push`, `deploy`, …).
        action: String,
        /// To what.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target: Option<String>,
    },
    /// A tool call an agent asks permission for.
    Tool {
        /// The tool.
        tool: String,
        /// Its kind in the protocol's words.
        tool_kind: String,
        /// What it would do, in a line.
        title: String,
    },
}

/// A policy's answer: the verdict and the rules that produced it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evaluation {
    /// The strictest verdict of the matching rules, or the default.
    pub verdict: Verdict,
    /// The names of the matching rules; empty when the default decided.
    pub matched: Vec<String>,
}

impl Policy {
    /// Judges a request: every matching rule votes, deny beats ask beats allow; with no match
    /// an agent call and a tool call (inside the run's containment) are allowed and an
    /// external mutation denied.
    pub(crate) fn evaluate(&self, req: &Request) -> Evaluation {
        let matching: Vec<&Rule> = self.rules.iter().filter(|r| matches(r, req)).collect();
        let default = match req {
            Request::Agent { .. } | Request::Tool { .. } => Verdict::Allow,
            Request::Authorize { .. } => Verdict::Deny,
        };
        let verdict = matching.iter().map(|r| r.verdict).max().unwrap_or(default);
        Evaluation { verdict, matched: matching.iter().map(|r| r.name.clone()).collect() }
    }
}

fn is_nothing(s: &Spent) -> bool {
    *s == Spent::default()
}

/// What a cost rule sees spent: the run's reported costs, each unreported call at the rule's
/// price, and for `goal` the goal's earlier runs.
fn spent_for(r: &Rule, spent: &Spent) -> u64 {
    let unknown =
        r.unknown_cost_usd.map_or(0, |u| u.0).saturating_mul(u64::from(spent.unknown_calls));
    let run = spent.run_micro_usd.saturating_add(unknown);
    match r.scope.unwrap_or(Scope::Run) {
        Scope::Run => run,
        Scope::Goal => run.saturating_add(spent.goal_before_micro_usd.unwrap_or(0)),
    }
}

fn matches(r: &Rule, req: &Request) -> bool {
    let same = |want: &Option<String>, have: Option<&str>| {
        want.as_deref().is_none_or(|w| have.is_some_and(|h| h == w))
    };
    match req {
        Request::Agent { harness, model, specialist, prompt_bytes, spent } => {
            r.on == On::Agent
                && same(&r.harness, Some(harness))
                && same(&r.model, model.as_deref())
                && same(&r.specialist, specialist.as_deref())
                && r.prompt_bytes_over.is_none_or(|max| *prompt_bytes > max)
                && r.max_cost_usd.is_none_or(|max| spent_for(r, spent) >= max.0)
        }
        Request::Authorize { action, target } => {
            r.on == On::Authorize
                && same(&r.action, Some(action))
                && same(&r.target, target.as_deref())
        }
        Request::Tool { tool, tool_kind, .. } => {
            r.on == On::Tool && same(&r.tool, Some(tool)) && same(&r.tool_kind, Some(tool_kind))
        }
    }
}

/// The digest an approval is bound to: the policy, the request and its evaluation. A request
/// that differs on resume cannot consume an approval given for another.
pub(crate) fn request_digest(policy_sha256: &str, req: &Request, eval: &Evaluation) -> String {
    sha256_hex(&canonical(&json!([policy_sha256, req, eval])))
}

/// Serialized with object keys sorted ([`crate::hash::canonical_json`]), so equal content
/// has equal bytes.
fn canonical(value: &impl Serialize) -> Vec<u8> {
    crate::hash::canonical_json(value).into_bytes()
}

/// Fuzz body: arbitrary bytes as a policy file; never panics, and a policy it accepts keeps
/// its rules within the cap, with unique, non-empty names, and survives a round trip
/// through its frozen digest.
pub fn fuzz_policy(data: &[u8]) {
    let Ok(policy) = parse_policy("policy.jsonc", data) else { return };
    assert!(policy.rules.len() <= RULES_MAX);
    let mut names = std::collections::BTreeSet::new();
    for r in &policy.rules {
        assert!(!r.name.trim().is_empty() && names.insert(r.name.clone()), "{}", r.name);
    }
    let frozen = FrozenPolicy::new(policy);
    assert_eq!(frozen.verify(), Ok(()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(text: &str) -> Policy {
        parse(text.as_bytes()).expect("a valid policy")
    }

    /// A policy file's bytes parsed, its error in the words an operator reads.
    fn parse(bytes: &[u8]) -> Result<Policy, RecordError> {
        parse_policy("p.jsonc", bytes)
    }

    fn agent(harness: &str, model: Option<&str>, bytes: u64) -> Request {
        Request::Agent {
            harness: harness.into(),
            model: model.map(str::to_owned),
            specialist: None,
            prompt_bytes: bytes,
            spent: Spent::default(),
        }
    }

    #[test]
    fn a_cost_ceiling_matches_once_reached_in_its_scope() {
        let p = policy(
            r#"{"rules": [
                {"name": "run-budget", "on": "agent", "max_cost_usd": 0.5, "verdict": "ask",
                 "unknown_cost_usd": 0.1},
                {"name": "goal-budget", "on": "agent", "max_cost_usd": 2, "scope": "goal", "verdict": "deny"}
            ]}"#,
        );
        let call = |run: u64, unknown: u32, goal: Option<u64>| {
            let spent =
                Spent { run_micro_usd: run, unknown_calls: unknown, goal_before_micro_usd: goal };
            match agent("codex", None, 10) {
                Request::Agent { harness, model, specialist, prompt_bytes, .. } => {
                    p.evaluate(&Request::Agent { harness, model, specialist, prompt_bytes, spent })
                        .verdict
                }
                other => unreachable!("{other:?}"),
            }
        };
        assert_eq!(call(0, 0, None), Verdict::Allow);
        assert_eq!(call(499_999, 0, None), Verdict::Allow);
        assert_eq!(call(500_000, 0, None), Verdict::Ask, "reached is enough");
        assert_eq!(call(300_000, 2, None), Verdict::Ask, "two unknown calls count 0.1 each");
        assert_eq!(
            call(100_000, 0, Some(1_900_000)),
            Verdict::Deny,
            "the goal's earlier runs count"
        );
        let e = parse(
            br#"{"rules": [{"name": "x", "on": "agent", "scope": "goal", "verdict": "deny"}]}"#,
        );
        assert!(e.unwrap_err().to_string().contains("only with max_cost_usd"));
        let e = parse(
            br#"{"rules": [{"name": "x", "on": "agent", "max_cost_usd": -1, "verdict": "deny"}]}"#,
        );
        assert!(e.is_err());
    }

    fn push(target: Option<&str>) -> Request {
        Request::Authorize { action: "push".into(), target: target.map(str::to_owned) }
    }

    #[test]
    fn a_policy_file_is_jsonc_and_its_errors_keep_the_files_lines() {
        let jsonc = br#"// who may push
{
  /* one rule */
  "rules": [
    {"name": "no-push", "on": "authorize", "action": "push", "verdict": "deny",},
  ],
}
"#;
        let p = parse(jsonc).expect("comments and trailing commas are JSONC");
        assert_eq!(p.rules.len(), 1);
        let bad = b"// line 1\n{\n  \"rules\": [\n    {\"name\": 3}\n  ]\n}\n";
        let e = parse(bad).unwrap_err().to_string();
        assert!(e.starts_with("p.jsonc: line 4:"), "{e}");
        let open = parse(b"{\"rules\": []} /* never closed");
        assert!(open.unwrap_err().to_string().contains("not closed"));
        let text = br#"{"rules": [{"name": "a // not a comment", "on": "authorize", "action": "push", "verdict": "deny"}]}"#;
        assert_eq!(parse(text).unwrap().rules[0].name, "a // not a comment");
    }

    #[test]
    fn without_a_matching_rule_agents_are_allowed_and_mutations_denied() {
        let p = Policy::default();
        assert_eq!(p.evaluate(&agent("codex", None, 10)).verdict, Verdict::Allow);
        assert_eq!(p.evaluate(&push(None)).verdict, Verdict::Deny);
    }

    #[test]
    fn deny_beats_ask_beats_allow() {
        let p = policy(
            r#"{"rules":[
              {"name":"a","on":"authorize","verdict":"allow"},
              {"name":"b","on":"authorize","action":"push","verdict":"ask"},
              {"name":"c","on":"authorize","action":"push","target":"main","verdict":"deny"}]}"#,
        );
        assert_eq!(
            p.evaluate(&Request::Authorize { action: "tag".into(), target: None }).verdict,
            Verdict::Allow
        );
        let e = p.evaluate(&push(Some("feature")));
        assert_eq!((e.verdict, e.matched), (Verdict::Ask, vec!["a".into(), "b".into()]));
        assert_eq!(p.evaluate(&push(Some("main"))).verdict, Verdict::Deny);
    }

    #[test]
    fn agent_rules_match_on_every_condition_they_name() {
        let p = policy(
            r#"{"rules":[
              {"name":"big","on":"agent","prompt_bytes_over":100,"verdict":"deny"},
              {"name":"opus","on":"agent","harness":"claude-code","model":"opus","verdict":"ask"}]}"#,
        );
        assert_eq!(p.evaluate(&agent("claude-code", Some("opus"), 10)).verdict, Verdict::Ask);
        assert_eq!(p.evaluate(&agent("codex", Some("opus"), 10)).verdict, Verdict::Allow);
        assert_eq!(p.evaluate(&agent("claude-code", None, 10)).verdict, Verdict::Allow);
        assert_eq!(p.evaluate(&agent("codex", None, 101)).verdict, Verdict::Deny);
        assert_eq!(p.evaluate(&agent("codex", None, 100)).verdict, Verdict::Allow);
    }

    #[test]
    fn bad_policies_are_refused_with_the_place() {
        let e = parse(b"{\"rules\":[\n{\"name\":\"x\",\"on\":\"agent\",\"verdict\":\"maybe\"}]}")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("p.jsonc: line 2:"), "{e}");
        let e = parse(br#"{"rules":[{"name":"x","on":"agent","verdict":"ask","action":"push"}]}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("rules[0] (x).action"), "{e}");
        let e = parse(br#"{"rules":[{"name":"x","on":"agent","verdict":"ask"},{"name":"x","on":"agent","verdict":"deny"}]}"#)
            .unwrap_err().to_string();
        assert!(e.contains("rules[1] (x).name"), "{e}");
        assert!(parse(br#"{"rules":[],"extra":1}"#).is_err());
    }

    #[test]
    fn equal_policies_have_equal_digests_and_requests_bind_them() {
        let a = FrozenPolicy::new(policy(
            r#"{"rules":[{"verdict":"ask","on":"authorize","name":"x"}]}"#,
        ));
        let b = FrozenPolicy::new(policy(
            r#"{ "rules": [ {"name":"x","on":"authorize","verdict":"ask"} ] }"#,
        ));
        assert_eq!(a.sha256, b.sha256);
        let eval = a.policy.evaluate(&push(None));
        let d1 = request_digest(&a.sha256, &push(None), &eval);
        assert_ne!(d1, request_digest(&a.sha256, &push(Some("main")), &eval));
        assert_ne!(d1, request_digest(&"0".repeat(64), &push(None), &eval));
    }
}
