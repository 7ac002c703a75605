//! Approvals on disk (`.harnery/approvals/<id>/request.json` and `decision.json`, each written
//! once, and the rulings journal): the store's side of the `harn approval` verbs.

use crate::os::store::{Store, StoreError};
use harn_core::ids::Id;
use harn_core::work::approval::{ApprovalRequest, Ruling};
pub use harn_core::work::rulings::Approval;
use harn_core::work::rulings::RULINGS_LOCK;
use serde_json::Value;

/// What the service says of an item a ruling may resume: whether it is live, the goals it
/// enrolled, and those of them that govern the item (each with whether it is idle).
pub struct ServiceFacts {
    /// Running, stopping, stopped, stale or never enrolled.
    pub liveness: harn_core::service::Liveness,
    /// The goals the service enrolled.
    pub enrolled: Vec<Id>,
    /// The enrolled goals that govern the item, each with whether it is idle.
    pub governing: Vec<(Id, bool)>,
}

/// How the approval verbs learn [`ServiceFacts`]: the service's room answers, so work never
/// reaches into the rooms above it.
pub type FindService = fn(&mut Store, &Id) -> ServiceFacts;

impl Store {
    /// Records a parked run's request; see [`harn_core::work::ledger::Ledger::record_approval`].
    pub fn record_approval(
        &mut self,
        request: &ApprovalRequest,
    ) -> Result<Result<bool, harn_core::error::RecordError>, StoreError> {
        Ok(self.ledger().record_approval(request)?)
    }

    /// Approval `id`, when it exists.
    pub fn approval(&mut self, id: &Id) -> Result<Option<Approval>, StoreError> {
        Ok(self.ledger().approval(id.as_str())?)
    }

    /// Every approval's id, sorted. The rulings journal and its lock live in the same
    /// directory and are no approval.
    pub fn approval_ids(&mut self) -> Result<crate::os::store::Listing, StoreError> {
        let own = |path: &str| path.rsplit('/').next().map(str::to_owned);
        let files = [own(harn_core::layout::RULINGS), own(harn_core::layout::RULINGS_LOCK)];
        let mut listing = self.list_ids(harn_core::layout::APPROVALS)?;
        listing.ids.retain(|id| !files.iter().flatten().any(|f| f == id.as_str()));
        Ok(listing)
    }

    /// Records a ruling once (see [`harn_core::work::ledger::Ledger::rule`]), under the
    /// approvals lock, so two rulers are judged one after the other.
    pub fn rule(
        &mut self,
        id: &Id,
        verdict: Ruling,
        actor: &str,
        reason: Option<String>,
    ) -> Result<(Approval, bool), StoreError> {
        let _lock = self.lock_file(RULINGS_LOCK)?;
        let now = self.now();
        Ok(self.ledger().rule(id.as_str(), verdict, actor, reason, now)?)
    }

    /// A run's transcript records.
    pub fn transcript(&mut self, run_id: &Id) -> Result<Vec<serde_json::Value>, StoreError> {
        Ok(self.ledger().transcript(run_id)?)
    }
}

/// A request in a few words: `authorize push main`, `agent codex (opus, 1200 bytes)`,
/// `tool Write (edit): Write hello.txt`.
pub fn summary(req: &Value) -> String {
    let s = |k: &str| req[k].as_str().unwrap_or("").to_owned();
    match req["kind"].as_str() {
        Some("authorize") => format!("authorize {} {}", s("action"), s("target")).trim().into(),
        Some("tool") => format!("tool {} ({}): {}", s("tool"), s("tool_kind"), s("title")),
        _ => format!(
            "agent call to {} ({}{} bytes)",
            s("harness"),
            req["model"].as_str().map(|m| format!("{m}, ")).unwrap_or_default(),
            req["prompt_bytes"]
        ),
    }
}
