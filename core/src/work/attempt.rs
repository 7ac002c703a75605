//! One attempt of a work item, in the one order every host follows: take the item's run
//! lease, reap what hosts that died left running, read the item under its history lock,
//! refuse a workflow that changed, then resume the parked run or start a new one, run its
//! segment, write the proof and reconcile. `harn work run` and `harn sim work` both run
//! [`run_attempt`]; what only a real process has (flock leases, spawning, cgroups, git) is
//! behind [`AttemptHost`].

use super::ledger::{Item, Ledger, Refusal};
use super::projection::WorkState;
use crate::env::Fs;
use crate::error::RecordError;
use crate::ids::Id;
use crate::time::WallTime;
use crate::work::approval::ApprovalRequest;
use crate::work::run::{ProcessEnd, Proof, RunFold, RunManifest};
use serde_json::Value;

/// How a run segment ended.
pub enum SegmentEnd {
    /// The workflow is gone: the fold and how it ended make the proof.
    Finished(Box<RunFold>, ProcessEnd),
    /// Policy asked a person: the run waits on this approval, with no proof.
    Parked(Box<ApprovalRequest>),
    /// The host is gone before the proof (killed, or cut short before the spawn was
    /// recorded): nothing more is written. Only a simulated host can say so and go on.
    Abandoned,
}

/// How a run whose proof the disk had no room for is said to have ended, wherever it is said.
pub const UNSEALED: &str =
    "ran; its proof could not be written (not charged; it runs again once there is room)";

/// How an attempt's run ended for now.
pub enum AttemptEnded {
    /// With a proof.
    Proof(Id, Box<Proof>),
    /// Parked on an approval; no proof yet.
    Parked(Box<ApprovalRequest>),
    /// Its host is gone before the proof (see [`SegmentEnd::Abandoned`]).
    Abandoned,
    /// Its workflow ran and ended, and the disk was too full for its proof (`run.unsealed`
    /// says so in its transcript): uncharged, and retried like a run that never started.
    Unsealed(Id, String),
}

/// What an attempt needs from the process that hosts it.
pub trait AttemptHost {
    /// The filesystem the ledger is kept on.
    type Fs: Fs;
    /// What a record failure is to the host: the ledger's [`RecordError`], or the host's own
    /// error, which holds one.
    type Error: From<RecordError>;
    /// The ledger.
    fn ledger(&mut self) -> &mut Ledger<Self::Fs>;
    /// The wall clock now.
    fn now(&mut self) -> WallTime;
    /// Whose stop is ending this host's runs, once an operator's forced stop began: from
    /// then on no new attempt starts.
    fn stopping(&mut self) -> Option<String>;
    /// Takes `id`'s run lease for the rest of the attempt, or refuses.
    fn lease(&mut self, id: &Id) -> Result<(), Refusal<Self::Error>>;
    /// Reaps every run whose host is gone, before anything new starts.
    fn recover(&mut self) -> Result<(), Refusal<Self::Error>>;
    /// Reads `id` and holds its history lock until [`AttemptHost::unlock`], so a cancel or
    /// a reopen cannot land between the decision to start and its record.
    fn read_locked(&mut self, id: &Id) -> Result<Item, Refusal<Self::Error>>;
    /// Releases the history lock.
    fn unlock(&mut self);
    /// Refuses a workflow that is gone or differs from its frozen digest.
    fn check_workflow(&mut self, item: &Item) -> Result<(), RecordError>;
    /// The options a new attempt of `item` starts with (its worktree made, its containment
    /// planned); a refusal records nothing.
    fn options(&mut self, item: &Item) -> Result<RunManifest, Refusal<Self::Error>>;
    /// Runs one segment of `m`'s run, from its start line and fold.
    fn segment(
        &mut self,
        item: &Item,
        m: &RunManifest,
        start: &Value,
        fold: RunFold,
    ) -> Result<SegmentEnd, Refusal<Self::Error>>;
    /// What the host adds to a finished segment's fold before its proof (the worktree's
    /// attestation).
    fn attest(&mut self, m: &RunManifest, fold: &mut RunFold);
    /// Reconciles the item after its attempt.
    fn reconcile(&mut self, id: &Id, actor: &str) -> Result<(), Refusal<Self::Error>>;
}

/// Runs one attempt of `id` (a retry when `retry`), or resumes its parked attempt once the
/// approval it waits on has been ruled on. A resumed run takes every option from its
/// manifest, none from the host.
pub fn run_attempt<H: AttemptHost>(
    host: &mut H,
    id: &Id,
    retry: bool,
    actor: &str,
) -> Result<AttemptEnded, Refusal<H::Error>> {
    // An operator's stop refuses new attempts before anything is recorded, so none is
    // charged for a workflow that was never going to be let run.
    if let Some(by) = host.stopping() {
        return Err(Refusal::NotNow(format!("{by} is stopping this process's runs")));
    }
    host.lease(id)?;
    host.recover()?;
    let item = host.read_locked(id)?;
    let started = begin(host, &item, retry, actor);
    host.unlock();
    let (manifest, start, fold) = started?;
    let end = host.segment(&item, &manifest, &start, fold)?;
    let ended = match end {
        SegmentEnd::Finished(mut fold, end) => {
            host.attest(&manifest, &mut fold);
            let now = host.now();
            match host.ledger().finish_attempt(&item, &manifest, *fold, &end, now) {
                Ok(proof) => AttemptEnded::Proof(manifest.run_id.clone(), Box::new(proof)),
                // Nothing more fits on the disk: the item's reconcile can wait for room.
                Err(RecordError::Fs(e)) if e.kind == crate::env::FsErrorKind::NoSpace => {
                    return Ok(AttemptEnded::Unsealed(manifest.run_id.clone(), e.to_string()));
                }
                Err(e) => return Err(e.into()),
            }
        }
        SegmentEnd::Parked(request) => AttemptEnded::Parked(request),
        SegmentEnd::Abandoned => return Ok(AttemptEnded::Abandoned),
    };
    host.reconcile(id, actor)?;
    Ok(ended)
}

/// Under the history lock: the resumed or the new attempt's manifest, start line and fold.
fn begin<H: AttemptHost>(
    host: &mut H,
    item: &Item,
    retry: bool,
    actor: &str,
) -> Result<(RunManifest, Value, RunFold), Refusal<H::Error>> {
    host.check_workflow(item).map_err(|why| Refusal::NotNow(why.to_string()))?;
    let now = host.now();
    if item.projection.state == WorkState::AwaitingApproval {
        let (manifest, state, start) =
            host.ledger().resume_attempt(item, actor, now).map_err(|r| r.map(H::Error::from))?;
        let mut fold = manifest.fold();
        fold.resume(state);
        return Ok((manifest, start, fold));
    }
    let options = host.options(item)?;
    // The manifest goes before `attempt.started`: a write that fails records no attempt.
    let (manifest, start) =
        host.ledger().start_attempt(item, retry, &options, actor, now).map_err(|r| match r {
            Refusal::Store(e) | Refusal::Unstarted(e) => Refusal::Unstarted(e),
            Refusal::NotNow(why) => Refusal::NotNow(why),
        })?;
    let fold = manifest.fold();
    Ok((manifest, start, fold))
}
