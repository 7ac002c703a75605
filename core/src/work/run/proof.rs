//! The proof a run ends in (`proof.json`) and the seal that marks it whole.

use super::*;

/// The file a run's seal lives in, beside its proof.
pub(crate) const SEAL: &str = "seal.json";
/// Schema version of `seal.json`.
pub(crate) const SEAL_VERSION: u32 = 1;

/// `seal.json`: what harn writes just before a run's proof, naming the proof's digest, so a
/// proof put in the run directory by anyone else is told apart and never counted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProofSeal {
    /// [`SEAL_VERSION`].
    pub schema_version: u32,
    /// The run.
    pub run_id: Id,
    /// SHA-256 of the bytes of its `proof.json`.
    pub proof_sha256: String,
    /// The length of its `transcript.jsonl` when the proof was made (before `run.end`):
    /// a transcript shorter than this was cut, and the proof it closes does not count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript_bytes: Option<u64>,
    /// SHA-256 of those bytes, which `work accept` checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript_sha256: Option<String>,
}

/// How a proof's error begins when the run's policy stopped it.
pub(crate) const POLICY_STOPPED: &str = "denied by policy";

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The workflow reported success and exited 0 in time.
    Succeeded,
    /// Anything else.
    Failed,
}

/// The run part of a proof.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProofRun {
    /// The run.
    pub id: Id,
    /// Its work item.
    pub work_id: Id,
    /// Its attempt.
    pub attempt: u32,
    /// How it ended.
    pub status: RunStatus,
    /// When it started.
    pub started_at: WallTime,
    /// When it ended.
    pub ended_at: WallTime,
    /// Its exit code, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// True when the host killed it for its timeout.
    pub timed_out: bool,
    /// The workflow's summary, on a `result`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Why it failed (the tail, at most [`ERROR_MAX`] bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A failure that does not charge the budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<FailureClass>,
    /// For a `decision` failure, the decision the workflow named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision_id: Option<String>,
}

/// `proof.json`: how a run ended and what it proved, written once for success and failure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proof {
    /// [`RUN_VERSION`].
    pub schema_version: u32,
    /// The run.
    pub run: ProofRun,
    /// The acceptance roll-up.
    pub acceptance: Acceptance,
    /// The evidence, in order: the first 500 records (each text field at most 2 KiB).
    pub evidence: Vec<Evidence>,
    /// How many records past those were cut, and their bytes (they still count toward the
    /// acceptance roll-up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence_cut: Option<crate::work::acceptance::Cut>,
    /// Stages entered, in order.
    pub stages: Vec<String>,
    /// Requests the host declined (agent calls without an adapter, unauthorized actions).
    pub declined: Vec<String>,
    /// Every agent call, in the order they ended (never the prompt or the reply).
    #[serde(default)]
    pub agents: Vec<AgentRecord>,
    /// The calls' tokens, turns and cost added up (calls answered from the transcript aside).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<crate::work::adapter::Usage>,
    /// The frozen policy's digest and every decision it made, when the run had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<ProofPolicy>,
    /// What contained the run's processes (from its manifest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containment: Option<crate::work::containment::Containment>,
    /// The item's worktree as the run left it, under `--isolation worktree`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<crate::work::workspace::Attestation>,
    /// For a planning run, its step and the digest of the reply it got.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planning: Option<PlanningProof>,
}

/// The policy part of a proof.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProofPolicy {
    /// The frozen policy's digest.
    pub sha256: String,
    /// Every check, in order.
    pub decisions: Vec<PolicyRecord>,
}

/// One policy check of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyRecord {
    /// Its position in the run (1, 2, …), which names its approval.
    pub slot: u32,
    /// What was asked.
    pub request: Request,
    /// What the rules said.
    pub evaluation: Evaluation,
    /// What happened: allow or deny (an `ask` becomes one of them through an approval).
    pub outcome: Verdict,
    /// The approval that ruled, for an `ask`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
}

/// A run parked on an approval: the host records the request and stops the workflow; no
/// proof is written until the run is resumed and ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parked {
    /// The policy slot.
    pub slot: u32,
    /// What is asked.
    pub request: Request,
    /// Why.
    pub evaluation: Evaluation,
    /// The digest the ruling will be bound to.
    pub request_sha256: String,
}

/// One agent call as a proof records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRecord {
    /// The workflow's request id.
    pub id: String,
    /// The adapter that ran it (`harness` in `proof.json`).
    #[serde(rename = "harness")]
    pub adapter: String,
    /// True when its reply was usable.
    pub ok: bool,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A failure that does not charge the budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<FailureClass>,
    /// True when a resumed run answered it from the transcript instead of calling again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// The vendor's session of the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Its tokens, turns and cost, when the program reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<crate::work::adapter::Usage>,
    /// Tool uses the program's permissions refused: work the agent meant to do and did not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denials: Vec<crate::work::adapter::Denial>,
    /// How long it took, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_ms: Option<u64>,
    /// When the usage limit that refused it resets, when the program's words said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resets_at: Option<crate::time::WallTime>,
}

impl Proof {
    /// True when the run succeeded and every criterion is satisfied.
    pub fn passes(&self) -> bool {
        self.acceptance.passes(self.run.status == RunStatus::Succeeded)
    }
}
