//! Approvals through the ledger: a parked run's request, and the rulings journal
//! (`.harnery/approvals/rulings.jsonl`) that makes a `decision.json` count. `harn approval`
//! appends the ruling's digest to the journal, under the approvals lock, before it writes the
//! decision; a decision whose digest no ruling names was written by someone else and is
//! refused by every read.

use super::ledger::{approval_dir, record_bytes, Ledger};
use crate::env::Fs;
use crate::hash::sha256_hex;
use crate::ids::Id;
use crate::journal::{self, JournalWriter};
use crate::time::WallTime;
use crate::workflow::approval::{
    may_rule, ApprovalDecision, ApprovalRequest, Ruling, APPROVAL_VERSION,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The journal of every ruling `harn approval` recorded.
pub const RULINGS: &str = ".harnery/approvals/rulings.jsonl";

/// The lock a ruler holds from its read of an approval to the decision it writes.
pub const RULINGS_LOCK: &str = ".harnery/approvals/rulings.lock";

/// One line of [`RULINGS`]: a ruling and the digest of the `decision.json` bytes it wrote.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RulingRecord {
    /// Always `approval.ruled`.
    pub event: String,
    /// The approval ruled on.
    pub approval_id: String,
    /// Its run.
    pub run_id: Id,
    /// The ruling.
    pub verdict: Ruling,
    /// Who ruled.
    pub actor: String,
    /// SHA-256 of the decision's bytes.
    pub decision_sha256: String,
}

/// An approval as read: its request and, once ruled on, its decision.
pub type Approval = (ApprovalRequest, Option<ApprovalDecision>);

impl<F: Fs> Ledger<F> {
    /// The digests of every decision `harn approval` recorded.
    pub fn rulings(&mut self) -> Result<BTreeSet<String>, String> {
        let bytes = self.fs.read(RULINGS).map_err(|e| e.to_string())?.unwrap_or_default();
        let read = journal::parse_as::<RulingRecord>(&self.shown(RULINGS), &bytes)
            .map_err(|e| e.to_string())?;
        Ok(read.records.into_iter().map(|r| r.body.decision_sha256).collect())
    }

    /// Approval `id`: its request and, once ruled on, its decision. A decision no recorded
    /// ruling names is refused with the command that rules on it properly.
    pub fn approval(&mut self, id: &str) -> Result<Option<Approval>, String> {
        let dir = approval_dir(id);
        let Some(request) = self.read_json(&format!("{dir}/request.json"))? else {
            return Ok(None);
        };
        let path = format!("{dir}/decision.json");
        let Some(bytes) = self.fs.read(&path).map_err(|e| e.to_string())? else {
            return Ok(Some((request, None)));
        };
        let decision: ApprovalDecision = serde_json::from_slice(&bytes)
            .map_err(|e| format!("{}:{}: {e}", self.shown(&path), e.line()))?;
        if !self.rulings()?.contains(&sha256_hex(&bytes)) {
            return Err(unrecorded(&self.shown(&path), id));
        }
        Ok(Some((request, Some(decision))))
    }

    /// Records a ruling on approval `id`; the caller holds [`RULINGS_LOCK`]. The same ruling
    /// again is accepted without a write (`false`), the opposite one refused. A decision that
    /// was not recorded (written by another process) is moved aside and the ruling recorded.
    /// The ruling's digest is journalled before the decision is written, so a crash between
    /// the two leaves an approval still pending.
    pub fn rule(
        &mut self,
        id: &str,
        verdict: Ruling,
        actor: &str,
        reason: Option<String>,
        now: WallTime,
    ) -> Result<(Approval, bool), String> {
        let dir = approval_dir(id);
        let existing = match self.approval(id) {
            Ok(found) => found.ok_or_else(|| format!("no approval {id}"))?,
            Err(_) if self.set_aside_unrecorded(id, now)? => {
                self.approval(id)?.ok_or_else(|| format!("no approval {id}"))?
            }
            Err(e) => return Err(e),
        };
        let (request, decision) = existing;
        if !may_rule(decision.as_ref(), verdict)? {
            return Ok(((request, decision), false));
        }
        let decision = ApprovalDecision {
            schema_version: APPROVAL_VERSION,
            approval_id: request.approval_id.clone(),
            run_id: request.run_id.clone(),
            verdict,
            actor: actor.to_owned(),
            reason,
            decided_at: now,
        };
        let bytes = record_bytes(&decision);
        let record = RulingRecord {
            event: "approval.ruled".into(),
            approval_id: request.approval_id.clone(),
            run_id: request.run_id.clone(),
            verdict,
            actor: actor.to_owned(),
            decision_sha256: sha256_hex(&bytes),
        };
        let (mut writer, _) =
            JournalWriter::open_tail(&mut self.fs, RULINGS).map_err(|e| e.to_string())?;
        writer
            .append(&mut self.fs, now, std::slice::from_ref(&record))
            .map_err(|e| e.to_string())?;
        self.write_record_bytes(&dir, "decision.json", bytes)?;
        Ok(((request, Some(decision)), true))
    }

    /// Moves a `decision.json` that no recorded ruling names to `decision.unrecorded-<ms>.json`,
    /// kept as evidence; false when the decision is recorded or absent (the read failed for
    /// another reason).
    fn set_aside_unrecorded(&mut self, id: &str, now: WallTime) -> Result<bool, String> {
        let dir = approval_dir(id);
        let path = format!("{dir}/decision.json");
        let Some(bytes) = self.fs.read(&path).map_err(|e| e.to_string())? else {
            return Ok(false);
        };
        if self.rulings()?.contains(&sha256_hex(&bytes)) {
            return Ok(false);
        }
        let aside = format!("{dir}/decision.unrecorded-{}.json", now.0);
        self.fs.rename(&path, &aside).map_err(|e| e.to_string())?;
        self.fs.sync_dir(&dir).map_err(|e| e.to_string())?;
        Ok(true)
    }
}

/// The refusal of a decision no recorded ruling names.
fn unrecorded(shown: &str, id: &str) -> String {
    format!(
        "{shown}: this ruling was not recorded by `harn approval` (no ruling in rulings.jsonl \
         names its digest), so it does not count; rule on it with `harn approval approve {id}` \
         or `harn approval deny {id}`"
    )
}
