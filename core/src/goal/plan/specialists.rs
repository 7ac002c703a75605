//! The agent calls planning makes (the planner, the reviewers) as its host answers them, and
//! their record: every call a planning step made, with its prompt's digest, its outcome
//! (reply or failure, class, session, tokens, cost, time) and the harness that answered,
//! journaled in the plan's `calls.jsonl` so a plan's provenance reads like work's.

use crate::env::Fs;
use crate::hash::sha256_hex;
use crate::work::agent::CallOutcome;
use crate::work::ledger::Ledger;
use crate::work::FailureClass;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The agent calls and file digests planning needs from its host.
pub trait Specialists<F: Fs> {
    /// One schema-checked call to a role of the goal's team, made as a planning run of the
    /// goal's records in `ledger`. A failure's class says whether it is the specialist's
    /// doing (a missing program or a vendor refusal is not).
    fn call(&mut self, ledger: &mut Ledger<F>, ask: &Ask<'_>) -> Called;
    /// Independent calls answered in the order asked: the reviewers of one round. A host may
    /// run them at once (within the goal's `agent_concurrency`); by default, one by one.
    fn call_all(&mut self, ledger: &mut Ledger<F>, calls: &[Ask<'_>]) -> Vec<Called> {
        calls.iter().map(|c| self.call(ledger, c)).collect()
    }
    /// SHA-256 of a workflow file now, to refuse a template that changed since it was frozen.
    fn workflow_digest(&mut self, path: &str) -> Result<String, crate::error::RecordError>;
}

/// One call to make.
#[derive(Clone, Copy, Debug)]
pub struct Ask<'a> {
    /// The team role.
    pub role: &'a str,
    /// The prompt.
    pub prompt: &'a str,
    /// The reply's schema.
    pub schema: &'a Value,
    /// A label unique among calls in flight together (it names their scratch space).
    pub label: &'a str,
    /// The plan the call is for.
    pub plan: &'a str,
    /// Whether it proposes the plan or reviews it.
    pub step: crate::work::run::StepKind,
}

/// A call as its host made it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Called {
    /// The harness that answered, when one was found.
    pub harness: Option<String>,
    /// What came of it.
    pub outcome: CallOutcome,
    /// The planning run that made it, when one did.
    pub run_id: Option<String>,
}

/// A specialist's reply, or why there is none (with the failure's class).
pub(crate) type Answer = Result<String, (Option<FailureClass>, String)>;

impl Called {
    /// A failure before any harness was asked (no such role, no harness for it).
    pub fn refused(class: Option<FailureClass>, why: impl Into<String>) -> Called {
        let outcome =
            CallOutcome { ok: false, error: Some(why.into()), class, ..Default::default() };
        Called { harness: None, outcome, run_id: None }
    }

    /// The reply, or the failure with its class.
    pub fn answer(&self, role: &str) -> Answer {
        let o = &self.outcome;
        if o.ok {
            return Ok(o.text.clone().unwrap_or_default());
        }
        Err((o.class, o.error.clone().unwrap_or_else(|| format!("{role} failed"))))
    }
}

/// The host policy's word on a planning call, judged as a work run's agent call is (the
/// same rules, the same defaults): `None` lets it go; otherwise it is not made, and the
/// refusal is a planning outcome that waits for a person (class `decision`): a policy that
/// denies, or asks before, an agent call stops the planner and the reviewers as it stops
/// any run's calls.
pub fn policy_gate(
    policy: Option<&crate::work::policy::FrozenPolicy>,
    ask: &Ask<'_>,
    harness: &str,
    model: Option<&str>,
    spent: crate::work::policy::Spent,
) -> Option<Called> {
    use crate::work::policy::{Request, Verdict};
    let policy = policy?;
    let request = Request::Agent {
        harness: harness.to_owned(),
        model: model.map(str::to_owned),
        specialist: Some(ask.role.to_owned()),
        prompt_bytes: ask.prompt.len() as u64,
        spent,
    };
    let eval = policy.policy.evaluate(&request);
    let rules = match eval.matched.is_empty() {
        true => "its default".to_owned(),
        false => format!("rule {}", eval.matched.join(", ")),
    };
    let why = match eval.verdict {
        Verdict::Allow => return None,
        Verdict::Deny => format!("the host policy denies the {} call ({rules}); no agent was started", ask.role),
        Verdict::Ask => format!(
            "the host policy asks a person before the {} call ({rules}), and planning cannot park; no agent was started",
            ask.role
        ),
    };
    let mut refused = Called::refused(Some(FailureClass::Decision), why);
    refused.harness = Some(harness.to_owned());
    Some(refused)
}

/// One line of a plan's `calls.jsonl`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanCall {
    /// The team role asked.
    pub role: String,
    /// The call's label (`<plan>` for the planner, `<plan>-review-<round>-<n>` for a
    /// reviewer).
    pub label: String,
    /// The harness that answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness: Option<String>,
    /// SHA-256 of the prompt as sent.
    pub prompt_sha256: String,
    /// What came of it, the reply included.
    pub outcome: CallOutcome,
    /// The planning run that made it (absent for a call refused before any run, and for
    /// plans made before planning calls were runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

/// Specialists whose every call is kept, in the order made, for the plan's record.
pub(crate) struct Recorder<'a, F: Fs> {
    inner: &'a mut dyn Specialists<F>,
    /// The calls made so far.
    pub calls: Vec<PlanCall>,
    /// The plan they were made for.
    pub plan: Option<String>,
}

impl<'a, F: Fs> Recorder<'a, F> {
    /// Records the calls made through `inner`.
    pub fn new(inner: &'a mut dyn Specialists<F>) -> Recorder<'a, F> {
        Recorder { inner, calls: Vec::new(), plan: None }
    }

    fn keep(&mut self, ask: &Ask<'_>, called: &Called) {
        self.plan = Some(ask.plan.to_owned());
        self.calls.push(PlanCall {
            role: ask.role.to_owned(),
            label: ask.label.to_owned(),
            harness: called.harness.clone(),
            prompt_sha256: sha256_hex(ask.prompt.as_bytes()),
            outcome: called.outcome.clone(),
            run_id: called.run_id.clone(),
        });
    }
}

impl<F: Fs> Specialists<F> for Recorder<'_, F> {
    fn call(&mut self, ledger: &mut Ledger<F>, ask: &Ask<'_>) -> Called {
        let called = self.inner.call(ledger, ask);
        self.keep(ask, &called);
        called
    }

    fn call_all(&mut self, ledger: &mut Ledger<F>, calls: &[Ask<'_>]) -> Vec<Called> {
        let all = self.inner.call_all(ledger, calls);
        for (ask, called) in calls.iter().zip(&all) {
            self.keep(ask, called);
        }
        all
    }

    fn workflow_digest(&mut self, path: &str) -> Result<String, crate::error::RecordError> {
        self.inner.workflow_digest(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::work::policy::{parse_policy, FrozenPolicy, Spent};

    fn frozen(rules: &str) -> FrozenPolicy {
        FrozenPolicy::new(
            parse_policy("p.json", format!(r#"{{"rules": {rules}}}"#).as_bytes()).unwrap(),
        )
    }

    #[test]
    fn the_host_policy_judges_a_planning_call_as_it_judges_a_runs() {
        let schema = serde_json::json!({});
        let step = crate::work::run::StepKind::Plan;
        let ask =
            Ask { role: "planner", prompt: "plan", schema: &schema, label: "p", plan: "p", step };
        let gate =
            |p: Option<&FrozenPolicy>| policy_gate(p, &ask, "claude-code", None, Spent::default());
        assert!(gate(None).is_none(), "no policy, no check");
        assert!(gate(Some(&frozen("[]"))).is_none(), "an agent call's default is allow");
        let deny = gate(Some(&frozen(r#"[{"name": "none", "on": "agent", "verdict": "deny"}]"#)));
        let deny = deny.expect("stopped");
        assert_eq!(deny.outcome.class, Some(FailureClass::Decision));
        assert!(deny.outcome.error.unwrap().contains("denies the planner call (rule none)"));
        let ask_rule =
            r#"[{"name": "person", "on": "agent", "verdict": "ask", "specialist": "planner"}]"#;
        let asked = gate(Some(&frozen(ask_rule))).expect("stopped");
        assert!(asked.outcome.error.unwrap().contains("asks a person"));
        let other =
            r#"[{"name": "r", "on": "agent", "verdict": "deny", "specialist": "reviewer"}]"#;
        assert!(gate(Some(&frozen(other))).is_none(), "a rule for another role");
    }
}
