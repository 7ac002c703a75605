//! Approvals on disk (`.harnery/approvals/<id>/request.json` and `decision.json`, each written
//! once) and the transcript reads that tie a parked run to them: where a run is parked, and
//! what its resumption takes over.

use super::store::{run_dir, Store, StoreError};
use harn_core::ids::Id;
use harn_core::journal;
use harn_core::workflow::approval::{
    may_rule, ApprovalDecision, ApprovalRequest, Ruling, APPROVAL_VERSION,
};
use harn_core::workflow::run::ResumeState;
use harn_core::workflow::transcript;
use serde_json::Value;

/// Where approval `id`'s records live.
pub fn approval_dir(id: &str) -> String {
    format!(".harnery/approvals/{id}")
}

/// An approval as read: its request and, once ruled on, its decision.
pub type Approval = (ApprovalRequest, Option<ApprovalDecision>);

impl Store {
    /// Records a parked run's request, or finds the identical one an earlier segment
    /// recorded: `Ok(true)` when written now, `Ok(false)` when already there, and the inner
    /// error when the slot holds a different request.
    pub fn record_approval(
        &mut self,
        request: &ApprovalRequest,
    ) -> Result<Result<bool, String>, StoreError> {
        let dir = approval_dir(&request.approval_id);
        let same = |existing: &ApprovalRequest| {
            if existing.request_sha256 == request.request_sha256 {
                Ok(false)
            } else {
                Err(format!(
                    "approval {} was asked for a different request; a changed request cannot \
                     take over its ruling",
                    request.approval_id
                ))
            }
        };
        if let Some(existing) = self.read_record(&format!("{dir}/request.json"))? {
            return Ok(same(&existing));
        }
        match self.write_once(&dir, "request.json", request) {
            Ok(_) => Ok(Ok(true)),
            Err(e) => match self.read_record(&format!("{dir}/request.json"))? {
                Some(existing) => Ok(same(&existing)),
                None => Err(e),
            },
        }
    }

    /// Approval `id`, when it exists.
    pub fn approval(&mut self, id: &Id) -> Result<Option<Approval>, StoreError> {
        let dir = approval_dir(id.as_str());
        let Some(request) = self.read_record::<ApprovalRequest>(&format!("{dir}/request.json"))?
        else {
            return Ok(None);
        };
        let decision = self.read_record(&format!("{dir}/decision.json"))?;
        Ok(Some((request, decision)))
    }

    /// Every approval's id, sorted.
    pub fn approval_ids(&mut self) -> Result<Vec<Id>, StoreError> {
        self.list_ids(".harnery/approvals")
    }

    /// Records a ruling once; the same ruling again is accepted without a write (`false`),
    /// the opposite one refused.
    pub fn rule(
        &mut self,
        id: &Id,
        verdict: Ruling,
        actor: &str,
        reason: Option<String>,
    ) -> Result<(Approval, bool), String> {
        let (request, existing) =
            self.approval(id).map_err(|e| e.0)?.ok_or_else(|| format!("no approval {id}"))?;
        if !may_rule(existing.as_ref(), verdict)? {
            return Ok(((request, existing), false));
        }
        let decision = ApprovalDecision {
            schema_version: APPROVAL_VERSION,
            approval_id: request.approval_id.clone(),
            run_id: request.run_id.clone(),
            verdict,
            actor: actor.to_owned(),
            reason,
            decided_at: self.now(),
        };
        let dir = approval_dir(id.as_str());
        if let Err(e) = self.write_once(&dir, "decision.json", &decision) {
            // Someone ruled at the same moment: their ruling stands; ours is judged against it.
            let (request, raced) = self.approval(id).map_err(|e| e.0)?.ok_or(e.0)?;
            may_rule(raced.as_ref(), verdict)?;
            return Ok(((request, raced), false));
        }
        Ok(((request, Some(decision)), true))
    }

    /// A run's transcript records.
    pub fn transcript(&mut self, run_id: &Id) -> Result<Vec<Value>, StoreError> {
        let path = format!("{}/transcript.jsonl", run_dir(run_id));
        let bytes = self.read_bytes(&path)?.unwrap_or_default();
        let shown = self.root().join(&path).display().to_string();
        let read = journal::parse(&shown, &bytes).map_err(|e| StoreError(e.to_string()))?;
        Ok(read.records.into_iter().map(|r| r.body).collect())
    }

    /// The approval a run is parked on and whether it has been ruled on.
    pub fn parked_on(&mut self, run_id: &Id) -> Result<Option<(String, bool)>, StoreError> {
        let Some(approval) = transcript::parked_on(&self.transcript(run_id)?) else {
            return Ok(None);
        };
        let id = Id::new(&approval).map_err(|e| StoreError(format!("run {run_id}: {e}")))?;
        let decided = self.approval(&id)?.is_some_and(|(_, d)| d.is_some());
        Ok(Some((approval, decided)))
    }

    /// What a resumed run takes over: started calls, completed replies, and the rulings of
    /// the approvals it asked for.
    pub fn resume_state(&mut self, run_id: &Id) -> Result<ResumeState, StoreError> {
        let records = self.transcript(run_id)?;
        let mut state = transcript::resume_state(&records);
        for approval in transcript::approvals_asked(&records) {
            let id = Id::new(&approval).map_err(|e| StoreError(format!("run {run_id}: {e}")))?;
            if let Some((request, Some(decision))) = self.approval(&id)? {
                state.rulings.insert(request.slot, (request.request_sha256, decision.verdict));
            }
        }
        Ok(state)
    }
}
