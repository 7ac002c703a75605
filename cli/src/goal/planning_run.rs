//! A planning call made as a run of its own: its manifest and one-call workflow written
//! before the spawn, the run's host carrying the call (policy, containment, billing,
//! transcript), a sealed proof naming the reply's digest, and a step a crash cut short
//! resumed from its transcript, so a reply already paid for is never asked for again.

use crate::os::store::{lease_of, run_dir, Store, StoreError};
use crate::work::attempt::RunLimits;
use crate::work::host::{run_segment, SegmentEnd};
use harn_core::goal::plan::{Ask, Called};
use harn_core::hash::sha256_hex;
use harn_core::ids::Id;
use harn_core::work::adapter::Access;
use harn_core::work::agent::CallOutcome;
use harn_core::work::run::planning::{self, PlanningStep};
use harn_core::work::run::{Isolation, Proof, RunManifest, RUN_VERSION};
use harn_core::work::{FailureClass, Trigger, WorkflowRef};
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
    // What a host that died left running goes first, so a step it cut short can be resumed.
    let recovered = store.recover(crate::work::hold::reap)?;
    for (run, killed) in &recovered.reaped {
        errln!("harn: run {run} had lost its host; {killed} of its processes were stopped");
    }
    let step = PlanningStep {
        goal: goal.clone(),
        plan: ask.plan.to_owned(),
        step: ask.step,
        role: ask.role.to_owned(),
        label: ask.label.to_owned(),
        prompt_sha256: sha256_hex(ask.prompt.as_bytes()),
    };
    let (m, resumed) = match earlier(store, &step)? {
        Some((m, Some(proof))) => {
            // Ended before its plan recorded it: its outcome stands, nothing is asked again.
            let records = store.ledger().transcript(&m.run_id)?;
            return Ok((m.run_id.clone(), planning::outcome(&records, &proof)));
        }
        Some((m, None)) => (m, true),
        None => (begin(store, &step, ask, limits)?, false),
    };
    if !store.hold(&lease_of(&m.work_id, &m.run_id, true))? {
        return Err(StoreError::refused(format!(
            "planning run {} is run by another process",
            m.run_id
        )));
    }
    let mut fold = m.fold();
    if resumed {
        fold.resume(store.ledger().resume_state(&m.run_id)?);
        let now = store.now();
        let body = serde_json::json!({ "event": "run.resuming", "reason": "interrupted" });
        store.ledger().append_transcript(&m.run_id, body, now)?;
    }
    let start = planning::start_line(&m, &step, resumed);
    let proof = match run_segment(store, &m, &start, fold)? {
        SegmentEnd::Finished(fold, end) => {
            let now = store.now();
            store.ledger().finish_planning(&m, &step, *fold, &end, now)?
        }
        // A planning run names no approver, so the policy's `ask` stops it rather than
        // parking it; the host giving the run up leaves it to be resumed.
        SegmentEnd::Parked(request) => {
            let why = format!("the planning run parked on {}", request.approval_id);
            return Ok((m.run_id.clone(), CallOutcome::failed(why, Some(FailureClass::Decision))));
        }
        SegmentEnd::Abandoned => {
            let why = "the planning run's host gave it up before its proof";
            return Ok((
                m.run_id.clone(),
                CallOutcome::failed(why, Some(FailureClass::Interrupted)),
            ));
        }
    };
    let records = store.ledger().transcript(&m.run_id)?;
    Ok((m.run_id.clone(), planning::outcome(&records, &proof)))
}

/// The newest run of this very call (see [`PlanningStep::same_call`]), with its proof when
/// it has one.
fn earlier(
    store: &mut Store,
    step: &PlanningStep,
) -> Result<Option<(RunManifest, Option<Proof>)>, StoreError> {
    let listing = store.list_ids(harn_core::layout::WORKFLOWS)?;
    for id in listing.ids.iter().rev() {
        let Ok((Some(m), proof)) = store.run_records(id) else { continue };
        if m.planning.as_ref().is_some_and(|s| s.same_call(step)) {
            return Ok(Some((m, proof)));
        }
    }
    Ok(None)
}

/// A new planning run's workflow and manifest, written before anything is spawned.
fn begin(
    store: &mut Store,
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
    let run_id = store.new_run_id();
    let dir = run_dir(&run_id);
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
        harness: limits.harness.clone(),
        team,
        harnesses: limits.harnesses.clone(),
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
    };
    store.ledger().write_record(&dir, "run.json", &manifest)?;
    Ok(manifest)
}
