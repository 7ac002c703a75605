//! One planning call as a run, in the one order every host follows, the order of a work
//! attempt: reap what dead hosts left, find an earlier run of this very call (its outcome
//! stands when it has a proof; it is resumed when a crash cut it short), else take the new
//! run's lease and only then record its manifest; run its segment; seal its proof. A reply
//! already paid for is never asked for again, and no manifest exists that its writer did not
//! hold. `harn supervisor tick|run` (planner and reviewer calls) is its host.

use super::planning::{self, PlanningStep};
use super::{ProcessEnd, Proof, RunManifest};
use crate::env::Fs;
use crate::error::RecordError;
use crate::ids::Id;
use crate::time::WallTime;
use crate::work::agent::CallOutcome;
use crate::work::attempt::SegmentEnd;
use crate::work::ledger::Ledger;
use crate::work::FailureClass;
use serde_json::{json, Value};

/// What a planning run's host does for the attempt.
pub trait PlanningHost {
    /// The filesystem the ledger is kept on.
    type Fs: Fs;
    /// The host's error; a record failure converts into it.
    type Error: From<RecordError>;
    /// The ledger.
    fn ledger(&mut self) -> &mut Ledger<Self::Fs>;
    /// The wall clock now.
    fn now(&mut self) -> WallTime;
    /// Reaps every run whose host is gone, so a step it cut short can be resumed.
    fn recover(&mut self) -> Result<(), Self::Error>;
    /// A fresh run id.
    fn new_run_id(&mut self) -> Id;
    /// Takes the lease of run `run` of `goal` for the rest of the attempt; false when another
    /// process holds it.
    fn lease(&mut self, goal: &Id, run: &Id) -> Result<bool, Self::Error>;
    /// The manifest of a new planning run `run_id` (its one-call workflow written beside it,
    /// its containment planned), not yet recorded.
    fn prepare(&mut self, run_id: &Id, step: &PlanningStep) -> Result<RunManifest, Self::Error>;
    /// Runs one segment of the run.
    fn segment(
        &mut self,
        m: &RunManifest,
        start: &Value,
        fold: super::RunFold,
    ) -> Result<SegmentEnd, Self::Error>;
    /// The bug this host plants, if any.
    #[cfg(feature = "planted-bugs")]
    fn planted(&self) -> Option<crate::planted::PlantedBug> {
        None
    }
}

/// Makes the call `step` names as a planning run (or finishes the one a crash cut short);
/// the run and the call's outcome.
pub fn run_planning<H: PlanningHost>(
    host: &mut H,
    step: &PlanningStep,
) -> Result<(Id, CallOutcome), H::Error> {
    host.recover()?;
    let (m, resumed) = match earlier(host.ledger(), step)? {
        Some((m, Some(proof))) => {
            // Ended before its plan recorded it: its outcome stands, nothing is asked again.
            let records = host.ledger().transcript(&m.run_id)?;
            return Ok((m.run_id.clone(), planning::outcome(&records, &proof)));
        }
        Some((m, None)) => {
            lease(host, &m.work_id, &m.run_id)?;
            (m, true)
        }
        None => (begin(host, step)?, false),
    };
    let mut fold = m.fold();
    if resumed {
        fold.resume(host.ledger().resume_state(&m.run_id)?);
        let now = host.now();
        let body = json!({ "event": "run.resuming", "reason": "interrupted" });
        host.ledger().append_transcript(&m.run_id, body, now)?;
    }
    let start = planning::start_line(&m, step, resumed);
    let proof = match host.segment(&m, &start, fold)? {
        SegmentEnd::Finished(fold, end) => finish(host, &m, step, *fold, &end)?,
        // A planning run names no approver, so the policy's `ask` stops it rather than
        // parking it; the host giving the run up leaves it to be resumed.
        SegmentEnd::Parked(request) => {
            let why = format!("the planning run parked on {}", request.approval_id);
            return Ok((m.run_id, CallOutcome::failed(why, Some(FailureClass::Decision))));
        }
        SegmentEnd::Abandoned => {
            let why = "the planning run's host gave it up before its proof";
            return Ok((m.run_id, CallOutcome::failed(why, Some(FailureClass::Interrupted))));
        }
    };
    let records = host.ledger().transcript(&m.run_id)?;
    Ok((m.run_id, planning::outcome(&records, &proof)))
}

fn finish<H: PlanningHost>(
    host: &mut H,
    m: &RunManifest,
    step: &PlanningStep,
    fold: super::RunFold,
    end: &ProcessEnd,
) -> Result<Proof, H::Error> {
    let now = host.now();
    Ok(host.ledger().finish_planning(m, step, fold, end, now)?)
}

/// A new planning run: its lease first, then its manifest, as a work attempt's.
fn begin<H: PlanningHost>(host: &mut H, step: &PlanningStep) -> Result<RunManifest, H::Error> {
    let run_id = host.new_run_id();
    let m = host.prepare(&run_id, step)?;
    #[cfg(feature = "planted-bugs")]
    if host.planted() == Some(crate::planted::PlantedBug::ManifestBeforeLease) {
        host.ledger().write_record(&crate::layout::run_dir(&run_id), "run.json", &m)?;
        lease(host, &step.goal, &run_id)?;
        return Ok(m);
    }
    lease(host, &step.goal, &run_id)?;
    host.ledger().write_record(&crate::layout::run_dir(&run_id), "run.json", &m)?;
    Ok(m)
}

fn lease<H: PlanningHost>(host: &mut H, goal: &Id, run: &Id) -> Result<(), H::Error> {
    match host.lease(goal, run)? {
        true => Ok(()),
        false => {
            Err(RecordError::refused(format!("planning run {run} is run by another process"))
                .into())
        }
    }
}

/// The newest run of this very call (see [`PlanningStep::same_call`]), with its proof when
/// it has one.
pub fn earlier<F: Fs>(
    ledger: &mut Ledger<F>,
    step: &PlanningStep,
) -> Result<Option<(RunManifest, Option<Proof>)>, RecordError> {
    let mut runs: Vec<Id> = ledger
        .fs
        .list(crate::layout::WORKFLOWS)
        .map_err(RecordError::from)?
        .into_iter()
        .filter_map(|n| Id::new(&n).ok())
        .collect();
    runs.sort();
    for id in runs.iter().rev() {
        let Ok((Some(m), proof)) = ledger.run_records(id) else { continue };
        if m.planning.as_ref().is_some_and(|s| s.same_call(step)) {
            return Ok(Some((m, proof)));
        }
    }
    Ok(None)
}
