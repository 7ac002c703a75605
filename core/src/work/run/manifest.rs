//! The run's manifest (`run.json`), frozen before the spawn: what runs, how it is
//! isolated and billed, the adapters and the attempt's context.

use super::*;

/// `run.json`: what a run was started with, written before its workflow is spawned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunManifest {
    /// [`RUN_VERSION`].
    pub schema_version: u32,
    /// The run.
    pub run_id: Id,
    /// The work item it is an attempt of; for a planning run, the goal it plans for.
    pub work_id: Id,
    /// The attempt number.
    pub attempt: u32,
    /// Why it started.
    pub trigger: Trigger,
    /// When.
    pub started_at: WallTime,
    /// The workflow program, as frozen in the work item.
    pub script: WorkflowRef,
    /// Wall-clock budget of the whole run; the workflow's process group is killed after it.
    pub timeout_ms: u64,
    /// The adapter that answers agent calls, frozen by value; none declines them. Its key in
    /// `run.json` is `harness`, the word manifests have always been written with.
    #[serde(default, rename = "harness", skip_serializing_if = "Option::is_none")]
    pub adapter: Option<FrozenAdapter>,
    /// The specialist team, frozen by value.
    #[serde(default, skip_serializing_if = "Team::is_empty")]
    pub team: Team,
    /// Every other adapter the team names, frozen by value (`harnesses` in `run.json`).
    #[serde(default, rename = "harnesses", skip_serializing_if = "BTreeMap::is_empty")]
    pub adapters: BTreeMap<String, AdapterSpec>,
    /// Most agent calls the run may make; a request past it is declined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_agents: Option<u32>,
    /// Whether agent calls may bill an API account; `subscription` strips API keys.
    #[serde(default)]
    pub billing: Billing,
    /// The host policy, frozen by value with its digest; none means no policy checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<FrozenPolicy>,
    /// Who is asked when policy says `ask`; none means an `ask` is a denial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_to: Option<String>,
    /// Agent calls in flight at once.
    #[serde(default = "default_concurrency")]
    pub concurrency: u32,
    /// The boundary the operator declared the run works inside; recorded, not enforced.
    #[serde(default)]
    pub isolation: Isolation,
    /// The working directory of the workflow and its agent calls (absolute); none means the
    /// coordination root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The work and attempt context the workflow is started with (`work`, `attempt`),
    /// frozen here so a resumed run is told exactly what its first segment was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
    /// What the dispatching goal's earlier runs had spent on agent calls when this run was
    /// dispatched, in millionths of a dollar: what a `scope: goal` cost rule adds to the
    /// run's own spending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal_spent_micro_usd: Option<u64>,
    /// What contains its processes, as reached when it started (absent before runs
    /// recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containment: Option<crate::work::containment::Containment>,
    /// The item's own worktree, under `--isolation worktree`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<crate::work::workspace::Workspace>,
    /// For a planning run (a planner's or a reviewer's call), which step of which plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planning: Option<PlanningStep>,
    /// The resource limits of each of its segments' cgroups and tmpfs, frozen by value
    /// (absent before runs were bounded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_limits: Option<crate::limits::ResourceLimits>,
    /// The cluster whose nodes run its segments (`--cluster`), frozen by value; absent
    /// for a run on this machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<crate::work::cluster::FrozenCluster>,
    /// What it may reach over the network (`network` of the configuration, `--network`),
    /// frozen by value; absent for a run started before network policies (open).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<crate::work::network::NetworkPolicy>,
}

/// Where a run's changes land. `worktree` is made by harn (an item's own git worktree and
/// branch); `sandbox` and `remote` are the operator's declaration, recorded, not enforced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// The repository's own working tree.
    #[default]
    Shared,
    /// A separate git worktree.
    Worktree,
    /// A sandbox (container, VM) around the agents.
    Sandbox,
    /// Another machine.
    Remote,
}

/// Agent calls in flight at once when nobody says otherwise.
pub(crate) const DEFAULT_CONCURRENCY: u32 = 4;

fn default_concurrency() -> u32 {
    DEFAULT_CONCURRENCY
}

/// Which account an agent call may bill.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Billing {
    /// Only the adapter's logged-in subscription: API-key variables are removed from every
    /// call's environment, so nothing is billed per token unless someone chose to.
    #[default]
    Subscription,
    /// API keys in the environment are passed on.
    Api,
}

impl RunManifest {
    /// The frozen spec of adapter `name`.
    pub fn harness_spec(&self, name: &str) -> Option<&AdapterSpec> {
        match &self.adapter {
            Some(h) if h.name == name => Some(&h.spec),
            _ => self.adapters.get(name),
        }
    }

    /// The approval request a run parks on, asked at `at`.
    pub(crate) fn approval_request(&self, parked: &Parked, at: WallTime) -> ApprovalRequest {
        let policy_sha256 = self.policy.as_ref().map(|p| p.sha256.clone()).unwrap_or_default();
        ApprovalRequest {
            schema_version: APPROVAL_VERSION,
            approval_id: crate::work::approval::approval_id(self.run_id.as_str(), parked.slot),
            run_id: self.run_id.clone(),
            work_id: self.work_id.clone(),
            slot: parked.slot,
            addressee: self.approval_to.clone().unwrap_or_default(),
            policy_sha256,
            request: parked.request.clone(),
            evaluation: parked.evaluation.clone(),
            request_sha256: parked.request_sha256.clone(),
            requested_at: at,
        }
    }
}

/// A adapter as frozen into a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrozenAdapter {
    /// Its name.
    pub name: String,
    /// How to run it.
    pub spec: AdapterSpec,
}

impl RunManifest {
    /// The first line the host writes to the workflow's stdin: the work, the attempt (with
    /// the prior attempt's synopsis on a retry and the open findings) and, for a resumed
    /// run, the approval it resumes on.
    pub(crate) fn start_line(
        &self,
        intent: &WorkIntent,
        attempt: AttemptContext,
        resume: Option<&str>,
    ) -> Value {
        let context = self.context.clone().unwrap_or_else(|| self.context_for(intent, attempt));
        json!({
            "op": "start",
            "run_id": self.run_id,
            "work": context["work"],
            "attempt": context["attempt"],
            "resume": resume.map(|approval| json!({ "approval_id": approval })),
        })
    }

    /// The work and attempt context of this run, as [`RunManifest::context`] freezes it.
    pub(crate) fn context_for(&self, intent: &WorkIntent, attempt: AttemptContext) -> Value {
        json!({
            "work": {
                "id": intent.id, "title": intent.title, "objective": intent.objective,
                "acceptance": intent.acceptance,
            },
            "attempt": {
                "number": self.attempt, "trigger": self.trigger, "prior": attempt.prior,
                "findings": attempt.findings, "feedback": attempt.feedback,
            },
        })
    }
}

/// What an attempt is told besides its number and trigger.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct AttemptContext {
    /// The prior attempt's [`synopsis`], on a retry.
    pub prior: Option<Value>,
    /// The open findings ([`findings_context`]).
    pub findings: Value,
    /// What reviewers said sending the item back since its last attempt
    /// ([`feedback_context`]).
    pub feedback: Value,
}
