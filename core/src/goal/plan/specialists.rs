//! The agent calls planning makes (the planner, the reviewers) as its host answers them, and
//! their record: every call a planning step made, with its prompt's digest, its outcome
//! (reply or failure, class, session, tokens, cost, time) and the harness that answered,
//! journaled in the plan's `calls.jsonl` so a plan's provenance reads like work's.

use crate::hash::sha256_hex;
use crate::work::agent::CallOutcome;
use crate::work::FailureClass;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The agent calls and file digests planning needs from its host.
pub trait Specialists {
    /// One schema-checked call to a role of the goal's team. A failure's class says whether
    /// it is the specialist's doing (a missing program or a vendor refusal is not).
    fn call(&mut self, ask: &Ask<'_>) -> Called;
    /// Independent calls answered in the order asked: the reviewers of one round. A host may
    /// run them at once (within the goal's `agent_concurrency`); by default, one by one.
    fn call_all(&mut self, calls: &[Ask<'_>]) -> Vec<Called> {
        calls.iter().map(|c| self.call(c)).collect()
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
}

/// A call as its host made it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Called {
    /// The harness that answered, when one was found.
    pub harness: Option<String>,
    /// What came of it.
    pub outcome: CallOutcome,
}

/// A specialist's reply, or why there is none (with the failure's class).
pub type Answer = Result<String, (Option<FailureClass>, String)>;

impl Called {
    /// A failure before any harness was asked (no such role, no harness for it).
    pub fn refused(class: Option<FailureClass>, why: impl Into<String>) -> Called {
        let outcome =
            CallOutcome { ok: false, error: Some(why.into()), class, ..Default::default() };
        Called { harness: None, outcome }
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
}

/// Specialists whose every call is kept, in the order made, for the plan's record.
pub struct Recorder<'a> {
    inner: &'a mut dyn Specialists,
    /// The calls made so far.
    pub calls: Vec<PlanCall>,
}

impl<'a> Recorder<'a> {
    /// Records the calls made through `inner`.
    pub fn new(inner: &'a mut dyn Specialists) -> Recorder<'a> {
        Recorder { inner, calls: Vec::new() }
    }

    fn keep(&mut self, ask: &Ask<'_>, called: &Called) {
        self.calls.push(PlanCall {
            role: ask.role.to_owned(),
            label: ask.label.to_owned(),
            harness: called.harness.clone(),
            prompt_sha256: sha256_hex(ask.prompt.as_bytes()),
            outcome: called.outcome.clone(),
        });
    }
}

impl Specialists for Recorder<'_> {
    fn call(&mut self, ask: &Ask<'_>) -> Called {
        let called = self.inner.call(ask);
        self.keep(ask, &called);
        called
    }

    fn call_all(&mut self, calls: &[Ask<'_>]) -> Vec<Called> {
        let all = self.inner.call_all(calls);
        for (ask, called) in calls.iter().zip(&all) {
            self.keep(ask, called);
        }
        all
    }

    fn workflow_digest(&mut self, path: &str) -> Result<String, crate::error::RecordError> {
        self.inner.workflow_digest(path)
    }
}
