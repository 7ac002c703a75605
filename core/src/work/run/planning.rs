//! Planning runs: each call a goal's planning makes (the planner's, a revision's, a
//! reviewer's) is a run of its own, with a manifest, a transcript and a proof, made by a
//! one-call workflow harn writes for it; this module owns that workflow, the run's step
//! record, and how the call's outcome is read back from the run's records.

use super::*;

/// Which planning call a run makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// The planner proposing a plan (or revising one).
    Plan,
    /// A reviewer of a proposed plan.
    Review,
}

/// What a planning run is for: the goal, the plan, the call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanningStep {
    /// The goal whose plan it is.
    pub goal: Id,
    /// The plan.
    pub plan: String,
    /// Planner or reviewer.
    pub step: StepKind,
    /// The team role asked.
    pub role: String,
    /// The call's label in the plan's records (`<plan>`, `<plan>-revision`,
    /// `<plan>-review-<round>-<n>`).
    pub label: String,
    /// SHA-256 of the prompt as first asked.
    pub prompt_sha256: String,
}

impl PlanningStep {
    /// Whether `other` is this very call: the same goal, plan, role and label (a label names
    /// one call of one plan). The prompt may differ when a step is asked for again after a
    /// crash (the replans it says remain count the plan itself), so it does not take part.
    pub(crate) fn same_call(&self, other: &PlanningStep) -> bool {
        (&self.goal, &self.plan, self.step, &self.role, &self.label)
            == (&other.goal, &other.plan, other.step, &other.role, &other.label)
    }
}

/// The planning part of a planning run's proof: the step, and the digest of the reply it
/// got (the proposal or the review, as the specialist wrote it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanningProof {
    /// The step.
    #[serde(flatten)]
    pub step: PlanningStep,
    /// SHA-256 of the usable reply, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_sha256: Option<String>,
}

/// The request id of a planning run's one call.
pub(crate) const CALL_ID: &str = "call";

/// The `agent` request a planning run's workflow makes: the role, the prompt, the schema.
pub fn request(role: &str, prompt: &str, schema: &Value) -> Value {
    json!({ "op": "agent", "id": CALL_ID, "prompt": prompt, "specialist": role, "schema": schema })
}

/// The workflow of a planning run, as a POSIX shell script: it reads the start line, asks
/// for the one call, and ends with a result that says whether the reply was usable. The
/// request is one line of JSON (newlines inside strings are escaped), so the quoted
/// here-document holds it byte for byte.
pub fn workflow(request: &Value) -> String {
    format!(
        "#!/bin/sh\n\
         # A planning step of harn: one schema-checked call, its reply the run's result.\n\
         IFS= read -r start || exit 1\n\
         cat <<'HARN_REQUEST'\n{request}\nHARN_REQUEST\n\
         while IFS= read -r reply; do\n\
         \x20 case $reply in\n\
         \x20   *'\"ok\":true'*) echo '{{\"op\":\"result\",\"ok\":true,\"summary\":\"the specialist replied\"}}'; exit 0 ;;\n\
         \x20   *'\"op\":\"reply\"'*) echo '{{\"op\":\"result\",\"ok\":false,\"error\":\"the specialist gave no usable reply\"}}'; exit 0 ;;\n\
         \x20 esac\n\
         done\n\
         exit 1\n"
    )
}

/// The work a planning run's fold rolls its proof up against: the step, with no criteria
/// of its own (the run passes when the reply was usable).
pub fn intent(m: &RunManifest, step: &PlanningStep) -> WorkIntent {
    let what = match step.step {
        StepKind::Plan => "propose",
        StepKind::Review => "review",
    };
    WorkIntent {
        schema_version: crate::work::intent::INTENT_VERSION,
        id: m.work_id.clone(),
        title: format!("{} of plan {} ({})", step.label, step.plan, step.role),
        objective: format!("{what} plan {} of goal {}", step.plan, step.goal),
        acceptance: Vec::new(),
        dependencies: Vec::new(),
        workflow: m.script.clone(),
        max_attempts: 1,
        max_uncharged_attempts: 1,
        created_at: m.started_at,
        sha256: None,
        strict_acceptance: false,
        source: None,
    }
}

/// The start line of a planning run's workflow (`resume` on a segment after the first).
pub(crate) fn start_line(m: &RunManifest, step: &PlanningStep, resume: bool) -> Value {
    json!({
        "op": "start",
        "run_id": m.run_id,
        "work": { "id": m.work_id, "title": intent(m, step).title },
        "attempt": { "number": m.attempt, "trigger": m.trigger },
        "resume": resume.then(|| json!({ "reason": "a planning step interrupted" })),
    })
}

/// The planning call as its run made it: the last end of the call in the transcript (its
/// reply, session, usage, once however many segments answered it), unless the run cut the
/// call short; then the run's failure as its proof says it. A run the policy stopped is a
/// planning outcome that waits for a person (class `decision`), as a planning call the
/// policy refuses before any run is.
pub fn outcome(records: &[Value], proof: &Proof) -> CallOutcome {
    let ended = records.iter().rev().find(|r| r["event"] == "agent.end" && r["id"] == CALL_ID);
    let call = ended.and_then(|r| serde_json::from_value::<CallOutcome>(r.clone()).ok());
    let stopped = proof.run.error.as_deref().filter(|e| e.starts_with(super::POLICY_STOPPED));
    // What a cut-short call spent is still the goal's.
    let usage = call.as_ref().and_then(|c| c.usage.clone());
    match (call, stopped) {
        (Some(call), _) if call.ok => call,
        (_, Some(why)) => {
            CallOutcome { usage, ..CallOutcome::failed(why, Some(FailureClass::Decision)) }
        }
        (Some(call), None) if !call.stopped => call,
        (_, None) => {
            let why = proof
                .declined
                .first()
                .cloned()
                .or_else(|| proof.run.error.clone())
                .unwrap_or_else(|| "the planning run ended without a reply".to_owned());
            CallOutcome { usage, ..CallOutcome::failed(why, proof.run.class) }
        }
    }
}

/// The digest a planning proof names: of the last usable reply among `calls`.
pub(super) fn reply_sha256(outcomes: &[&CallOutcome]) -> Option<String> {
    let text = outcomes.iter().rev().find(|o| o.ok).and_then(|o| o.text.as_deref())?;
    Some(crate::hash::sha256_hex(text.as_bytes()))
}
