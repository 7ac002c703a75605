//! One attempt of a work item under its run lease: the attempt is recorded and the manifest
//! frozen before the workflow is spawned, or a parked attempt is resumed as the same run;
//! the proof is written for success and failure alike, never for a run that parked.

use super::host::{run_segment, SegmentEnd, Transcript};
use super::store::{Item, Store, StoreError};
use harn_core::ids::Id;
use harn_core::work::events::EventKind;
use harn_core::work::projection::{NextAction, WorkState};
use harn_core::workflow::agent::HarnessSpec;
use harn_core::workflow::approval::ApprovalRequest;
use harn_core::workflow::policy::FrozenPolicy;
use harn_core::workflow::run::{
    may_start, Billing, FrozenHarness, Proof, RunManifest, RUN_VERSION,
};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::time::Duration;

/// Why an attempt did not end in a proof.
#[derive(Debug)]
pub enum Refusal {
    /// Nothing was recorded: the item may not start an attempt now.
    NotNow(String),
    /// A record could not be read or written.
    Store(StoreError),
}

impl From<StoreError> for Refusal {
    fn from(e: StoreError) -> Refusal {
        Refusal::Store(e)
    }
}

/// What a run is started with, besides the work item.
#[derive(Clone, Debug)]
pub struct RunLimits {
    /// The whole run's wall-clock budget.
    pub timeout: Duration,
    /// Agent calls in flight at once.
    pub concurrency: usize,
    /// The harness that answers agent calls, if any.
    pub harness: Option<FrozenHarness>,
    /// The specialist team.
    pub team: harn_core::workflow::team::Team,
    /// Every other harness the team names.
    pub harnesses: BTreeMap<String, HarnessSpec>,
    /// Most agent calls.
    pub max_agents: u32,
    /// Which account calls may bill.
    pub billing: Billing,
    /// The host policy, frozen by value.
    pub policy: Option<FrozenPolicy>,
    /// Who is asked when policy says `ask`.
    pub approval_to: Option<String>,
}

/// How an attempt's run ended for now.
pub enum Ended {
    /// With a proof.
    Proof(Id, Box<Proof>),
    /// Parked on an approval; no proof yet.
    Parked(Box<ApprovalRequest>),
}

/// Runs one attempt of `id` (a retry when `retry`), or resumes its parked attempt once the
/// approval it waits on has been ruled on. A resumed run takes every option from its
/// manifest, none from the caller.
pub fn run_attempt(
    store: &mut Store,
    id: &Id,
    retry: bool,
    limits: &RunLimits,
    actor: &str,
) -> Result<Ended, Refusal> {
    store.lock_run(id)?;
    // The history lock is held from this read to the attempt's event, so a cancel or a
    // reopen cannot land between the decision to start and its record.
    let (lock, item) = store.lock_and_read(id)?;
    check_digest(&item.intent.workflow.path, &item.intent.workflow.sha256)
        .map_err(Refusal::NotNow)?;
    if item.projection.state == WorkState::AwaitingApproval {
        return resume(store, lock, &item, actor);
    }
    let trigger = may_start(&item.projection, retry)
        .map_err(|why| Refusal::NotNow(format!("cannot start an attempt of {id}: {why}")))?;
    let mut known = BTreeMap::new();
    let prerequisites = item
        .intent
        .dependencies
        .iter()
        .filter_map(|d| {
            let seq = store.read(d, &mut known).ok()?.projection.accepted_seq?;
            Some((d.clone(), seq))
        })
        .collect();
    let prior = match (&item.projection.latest_run_id, retry) {
        (Some(run), true) => store.run_records(run)?.1,
        _ => None,
    };
    let run_id = store.new_run_id();
    let attempt = item.projection.attempts_used + 1;
    let started =
        EventKind::AttemptStarted { run_id: run_id.clone(), attempt, trigger, prerequisites };
    store.append(&lock, started, actor, None)?;
    drop(lock);
    let manifest = RunManifest {
        schema_version: RUN_VERSION,
        run_id: run_id.clone(),
        work_id: id.clone(),
        attempt,
        trigger,
        started_at: store.now(),
        script: item.intent.workflow.clone(),
        timeout_ms: limits.timeout.as_millis() as u64,
        harness: limits.harness.clone(),
        team: limits.team.clone(),
        harnesses: limits.harnesses.clone(),
        max_agents: Some(limits.max_agents),
        billing: limits.billing,
        policy: limits.policy.clone(),
        approval_to: limits.approval_to.clone(),
        concurrency: limits.concurrency as u32,
    };
    store.write_run_record(&run_id, "run.json", &manifest)?;
    let start = manifest.start_line(&item.intent, prior.as_ref(), None);
    let end = run_segment(store, &manifest, &start, manifest.fold())?;
    finish(store, &item, &manifest, end, actor)
}

/// Resumes the parked attempt of `item` as the same run and attempt: `attempt.resumed` is
/// recorded, then the workflow runs again from the top with completed calls answered from
/// its transcript and the ruling consumed at the slot that parked it.
fn resume(
    store: &mut Store,
    lock: super::store::EventsLock,
    item: &Item,
    actor: &str,
) -> Result<Ended, Refusal> {
    let p = &item.projection;
    let id = &item.intent.id;
    let approval = p.approval_id.clone().unwrap_or_default();
    if p.next_action != NextAction::Resume {
        return Err(Refusal::NotNow(format!(
            "{id} waits on approval {approval}: rule on it with `harn approval approve \
             {approval}` or `harn approval deny {approval}`, then run it again"
        )));
    }
    let run_id = p.latest_run_id.clone().expect("a parked item has a run");
    let manifest = store
        .run_records(&run_id)?
        .0
        .ok_or_else(|| StoreError(format!("run {run_id} has no manifest")))?;
    let resumed = EventKind::AttemptResumed { run_id: run_id.clone(), attempt: manifest.attempt };
    store.append(&lock, resumed, actor, None)?;
    drop(lock);
    let mut fold = manifest.fold();
    fold.resume(store.resume_state(&run_id)?);
    let prior = match manifest.trigger {
        harn_core::work::Trigger::Retry => prior_proof(store, item, &run_id)?,
        harn_core::work::Trigger::Initial => None,
    };
    let start = manifest.start_line(&item.intent, prior.as_ref(), Some(&approval));
    let mut transcript = Transcript::open(store, &run_id)?;
    transcript.record(store, json!({ "event": "approval.consumed", "approval_id": approval }))?;
    drop(transcript);
    let end = run_segment(store, &manifest, &start, fold)?;
    finish(store, item, &manifest, end, actor)
}

/// The proof of the attempt before `run_id`, which a retry's start line summarizes.
fn prior_proof(store: &mut Store, item: &Item, run_id: &Id) -> Result<Option<Proof>, StoreError> {
    let runs: Vec<&Id> = item
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::AttemptStarted { run_id, .. } => Some(run_id),
            _ => None,
        })
        .collect();
    let before = runs.iter().position(|r| *r == run_id).and_then(|i| i.checked_sub(1));
    match before {
        Some(i) => Ok(store.run_records(runs[i])?.1),
        None => Ok(None),
    }
}

/// Writes the proof of a finished segment and reconciles; a parked one leaves no proof.
fn finish(
    store: &mut Store,
    item: &Item,
    manifest: &RunManifest,
    end: SegmentEnd,
    actor: &str,
) -> Result<Ended, Refusal> {
    let ended = match end {
        SegmentEnd::Finished(fold, end) => {
            let proof = fold.finish(manifest, &item.intent, &end, store.now());
            store.write_run_record(&manifest.run_id, "proof.json", &proof)?;
            Ended::Proof(manifest.run_id.clone(), Box::new(proof))
        }
        SegmentEnd::Parked(request) => Ended::Parked(request),
    };
    store.reconcile(&item.intent.id, actor)?;
    Ok(ended)
}

/// Refuses a workflow that is gone or differs from the bytes the item was frozen with.
fn check_digest(path: &str, frozen: &str) -> Result<(), String> {
    let bytes = std::fs::read(path)
        .map_err(|e| format!("workflow {path}: {e}; no attempt was recorded"))?;
    let now: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    if now != frozen {
        return Err(format!(
            "workflow {path} changed since the work item was frozen (sha256 {} now, {} then); \
             create a new work item; no attempt was recorded",
            &now[..12],
            &frozen[..12.min(frozen.len())]
        ));
    }
    Ok(())
}
