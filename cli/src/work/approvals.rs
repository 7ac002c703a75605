//! Approvals on disk (`.harnery/approvals/<id>/request.json` and `decision.json`, each written
//! once): the store's side of the `harn approval` verbs.

use super::store::{Store, StoreError};
use harn_core::ids::Id;
use harn_core::work::ledger::approval_dir;
use harn_core::workflow::approval::{
    may_rule, ApprovalDecision, ApprovalRequest, Ruling, APPROVAL_VERSION,
};

/// An approval as read: its request and, once ruled on, its decision.
pub type Approval = (ApprovalRequest, Option<ApprovalDecision>);

impl Store {
    /// Records a parked run's request; see [`harn_core::work::ledger::Ledger::record_approval`].
    pub fn record_approval(
        &mut self,
        request: &ApprovalRequest,
    ) -> Result<Result<bool, String>, StoreError> {
        Ok(self.ledger().record_approval(request)?)
    }

    /// Approval `id`, when it exists.
    pub fn approval(&mut self, id: &Id) -> Result<Option<Approval>, StoreError> {
        Ok(self.ledger().approval(id.as_str())?)
    }

    /// Every approval's id, sorted.
    pub fn approval_ids(&mut self) -> Result<super::store::Listing, StoreError> {
        self.list_ids(".harnery/approvals")
    }

    /// Records a ruling once; the same ruling again is accepted without a write (`false`),
    /// the opposite one refused. Rulers may race, so the decision is linked into place and
    /// the loser's ruling is judged against the winner's.
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
            // Lost a race: the winner's ruling stands and ours is judged against it. Any other
            // failure (no space, an IO error) recorded nothing and says so.
            let (request, raced) = self.approval(id).map_err(|e| e.0)?.ok_or(e.0.clone())?;
            if raced.is_none() {
                return Err(e.0);
            }
            may_rule(raced.as_ref(), verdict)?;
            return Ok(((request, raced), false));
        }
        Ok(((request, Some(decision)), true))
    }

    /// A run's transcript records.
    pub fn transcript(&mut self, run_id: &Id) -> Result<Vec<serde_json::Value>, StoreError> {
        Ok(self.ledger().transcript(run_id)?)
    }
}
