//! A planning call made as a run of its own, in the order of the core's planning attempt
//! (`work::run::planning_attempt`): this is its host, writing the one-call workflow and the
//! manifest it records once it holds the run's lease, carrying the segment (policy,
//! containment, billing, transcript) through the run host.

use crate::os::store::{lease_of, run_dir, Store, StoreError};
use crate::work::attempt::RunLimits;
use crate::work::host::{run_segment, SegmentEnd};
use harn_core::goal::plan::{Ask, Called};
use harn_core::hash::sha256_hex;
use harn_core::ids::Id;
use harn_core::work::adapter::Access;
use harn_core::work::agent::CallOutcome;
use harn_core::work::run::planning::{self, PlanningStep};
use harn_core::work::run::planning_attempt::{run_planning, PlanningHost};
use harn_core::work::run::{Isolation, RunManifest, RUN_VERSION};
use harn_core::work::{Trigger, WorkflowRef};
use std::path::Path;

/// Makes `ask` for goal `goal` as a planning run (or finishes the one a crash cut short),
/// answered by `harness`; the call's outcome and the run that made it.
pub fn call(root: &Path, goal: &Id, ask: &Ask<'_>, harness: &str, limits: &RunLimits) -> Called {
    let mut store = Store::new(root);
    let answered = match run(&mut store, goal, ask, limits) {
        Ok((run_id, outcome)) => (Some(run_id.to_string()), outcome),
        Err(e) => (None, CallOutcome::failed(e.to_string(), None)),
    };
    let (run_id, outcome) = answered;
    Called { harness: Some(harness.to_owned()), outcome, run_id }
}

fn run(
    store: &mut Store,
    goal: &Id,
    ask: &Ask<'_>,
    limits: &RunLimits,
) -> Result<(Id, CallOutcome), StoreError> {
    let step = PlanningStep {
        goal: goal.clone(),
        plan: ask.plan.to_owned(),
        step: ask.step,
        role: ask.role.to_owned(),
        label: ask.label.to_owned(),
        prompt_sha256: sha256_hex(ask.prompt.as_bytes()),
    };
    run_planning(&mut CliPlanning { store, ask, limits }, &step)
}

/// This process as a planning attempt's host.
struct CliPlanning<'a> {
    store: &'a mut Store,
    ask: &'a Ask<'a>,
    limits: &'a RunLimits,
}

impl PlanningHost for CliPlanning<'_> {
    type Fs = crate::os::fs::RealFs;
    type Error = StoreError;

    fn ledger(&mut self) -> &mut harn_core::work::ledger::Ledger<crate::os::fs::RealFs> {
        self.store.ledger()
    }

    fn now(&mut self) -> harn_core::time::WallTime {
        self.store.now()
    }

    fn recover(&mut self) -> Result<(), StoreError> {
        let recovered = self.store.recover(crate::work::hold::reap)?;
        for (run, killed) in &recovered.reaped {
            errln!("harn: run {run} had lost its host; {killed} of its processes were stopped");
        }
        Ok(())
    }

    fn new_run_id(&mut self) -> Id {
        self.store.new_run_id()
    }

    fn lease(&mut self, goal: &Id, run: &Id) -> Result<bool, StoreError> {
        self.store.hold(&lease_of(goal, run, true))
    }

    fn prepare(&mut self, run_id: &Id, step: &PlanningStep) -> Result<RunManifest, StoreError> {
        manifest(self.store, run_id, step, self.ask, self.limits)
    }

    fn segment(
        &mut self,
        m: &RunManifest,
        start: &serde_json::Value,
        fold: harn_core::work::run::RunFold,
    ) -> Result<SegmentEnd, StoreError> {
        run_segment(self.store, m, start, fold)
    }
}

/// A new planning run's workflow, written beside where its manifest goes, and the manifest
/// (the core records it once the run's lease is held).
fn manifest(
    store: &mut Store,
    run_id: &Id,
    step: &PlanningStep,
    ask: &Ask<'_>,
    limits: &RunLimits,
) -> Result<RunManifest, StoreError> {
    // Planning reads the repository; it runs at the root whatever the work's isolation.
    let limits = RunLimits { cwd: None, isolation: Isolation::Shared, ..limits.clone() };
    // A planner or a reviewer reads the repository and writes nothing of it: its workspace
    // is read-only to it, whatever its agent's own flags say.
    let containment = crate::work::attempt::planned_containment(store.root(), &limits, true);
    if let Some(policy) = &limits.policy {
        harn_core::work::containment::check(policy.policy.containment, &containment)
            .map_err(|refused| StoreError::refused(refused.to_string()))?;
    }
    let dir = run_dir(run_id);
    let request = planning::request(ask.role, ask.prompt, ask.schema);
    let workflow = planning::workflow(&request);
    crate::os::private::Dir::open(store.root(), &dir, true)
        .and_then(|d| d.replace_with_mode("workflow", workflow.as_bytes(), 0o700))
        .map_err(|e| StoreError::refused(format!("{dir}/workflow: {e}")))?;
    // A planner or a reviewer reads; it does not change the workspace.
    let mut team = limits.team.clone();
    for profile in team.values_mut() {
        profile.access = Access::ReadOnly;
    }
    let manifest = RunManifest {
        schema_version: RUN_VERSION,
        run_id: run_id.clone(),
        work_id: step.goal.clone(),
        attempt: 1,
        trigger: Trigger::Initial,
        started_at: store.now(),
        script: WorkflowRef {
            path: store.root().join(&dir).join("workflow").display().to_string(),
            sha256: sha256_hex(workflow.as_bytes()),
        },
        timeout_ms: limits.timeout.as_millis() as u64,
        adapter: limits.adapter.clone(),
        team,
        adapters: limits.adapters.clone(),
        max_agents: Some(1),
        billing: limits.billing,
        policy: limits.policy.clone(),
        // Planning does not park: a rule that asks a person stops the run instead.
        approval_to: None,
        concurrency: 1,
        isolation: Isolation::Shared,
        cwd: None,
        context: None,
        goal_spent_micro_usd: limits.goal_spent_micro_usd,
        containment: Some(containment),
        workspace: None,
        planning: Some(step.clone()),
        resource_limits: Some(limits.resources),
        cluster: None,
        network: None,
    };
    Ok(manifest)
}
