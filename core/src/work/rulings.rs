//! Approvals through the ledger: a parked run's request, and the rulings journal
//! (`.harnery/approvals/rulings.jsonl`) that makes a `decision.json` count. `harn approval`
//! appends the ruling's digest to the journal, under the approvals lock, before it writes the
//! decision; a decision whose digest no ruling names was written by someone else and is
//! refused by every read.

use super::ledger::{approval_dir, record_bytes, Ledger};
use crate::env::Fs;
use crate::error::RecordError;
use crate::hash::sha256_hex;
use crate::ids::Id;
use crate::journal::{self, JournalWriter};
pub use crate::layout::{RULINGS, RULINGS_LOCK};
use crate::time::WallTime;
use crate::work::approval::{
    may_rule, ApprovalDecision, ApprovalRequest, Ruling, APPROVAL_VERSION,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// One line of [`RULINGS`]: a ruling and the digest of the `decision.json` bytes it wrote.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RulingRecord {
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
    /// The decision's reason, so that a decision a crash kept from being written can be
    /// written from its ruling (absent in rulings of earlier versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The decision's time, likewise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<WallTime>,
}

impl RulingRecord {
    /// The decision this ruling recorded, when it carries all of it.
    fn decision(&self) -> Option<ApprovalDecision> {
        Some(ApprovalDecision {
            schema_version: APPROVAL_VERSION,
            approval_id: self.approval_id.clone(),
            run_id: self.run_id.clone(),
            verdict: self.verdict,
            actor: self.actor.clone(),
            reason: self.reason.clone(),
            decided_at: self.decided_at?,
        })
    }
}

/// An approval as read: its request and, once ruled on, its decision.
pub type Approval = (ApprovalRequest, Option<ApprovalDecision>);

impl<F: Fs> Ledger<F> {
    /// The digests of every decision `harn approval` recorded.
    pub fn rulings(&mut self) -> Result<BTreeSet<String>, RecordError> {
        Ok(self.ruling_records()?.into_iter().map(|(r, _)| r.decision_sha256).collect())
    }

    /// Every ruling recorded, with when it was recorded.
    fn ruling_records(&mut self) -> Result<Vec<(RulingRecord, WallTime)>, RecordError> {
        let bytes = self.fs.read(RULINGS)?.unwrap_or_default();
        let read = journal::parse_as::<RulingRecord>(&self.shown(RULINGS), &bytes)?;
        Ok(read.records.into_iter().map(|r| (r.body, r.ts)).collect())
    }

    /// Checks a decision by what its ruling means: approval `request` was ruled on once,
    /// after it was requested, for its own run, with this decision's verdict and bytes. A
    /// second ruling of one approval is damage: `harn approval` records one and refuses the
    /// opposite.
    fn check_ruling(
        &mut self,
        request: &ApprovalRequest,
        decision: &ApprovalDecision,
        bytes: &[u8],
        shown: &str,
    ) -> Result<(), RecordError> {
        let id = &request.approval_id;
        let rulings: Vec<(RulingRecord, WallTime)> =
            self.ruling_records()?.into_iter().filter(|(r, _)| &r.approval_id == id).collect();
        let digest = sha256_hex(bytes);
        let at = |why: String| {
            RecordError::invalid(self.shown(RULINGS), format!("{why}; it does not count"))
        };
        match rulings.as_slice() {
            [] => Err(unrecorded(shown, id)),
            [_, _, ..] => Err(at(format!(
                "approval {id} is ruled on {} times; a ruling is recorded once",
                rulings.len()
            ))),
            [(r, _)] if r.decision_sha256 != digest => Err(unrecorded(shown, id)),
            [(r, _)] if r.run_id != request.run_id || r.run_id != decision.run_id => {
                Err(at(format!("the ruling of approval {id} names run {}", r.run_id)))
            }
            [(r, _)] if r.verdict != decision.verdict => Err(at(format!(
                "the ruling of approval {id} and its decision disagree on the verdict"
            ))),
            [(_, ts)] if *ts < request.requested_at => {
                Err(at(format!("approval {id} was ruled on before it was requested")))
            }
            [_] => Ok(()),
        }
    }

    /// Approval `id`: its request and, once ruled on, its decision. A decision no recorded
    /// ruling names is refused with the command that rules on it properly. The rulings
    /// journal is the record: a ruling a crash kept from its `decision.json` is the decision.
    pub fn approval(&mut self, id: &str) -> Result<Option<Approval>, RecordError> {
        let dir = approval_dir(id);
        let Some(request) = self.read_json::<ApprovalRequest>(&format!("{dir}/request.json"))?
        else {
            return Ok(None);
        };
        let path = format!("{dir}/decision.json");
        let Some(bytes) = self.fs.read(&path)? else {
            let recorded = self.ruling_records()?.into_iter().find(|(r, _)| r.approval_id == id);
            let Some(decision) = recorded.and_then(|(r, _)| r.decision()) else {
                return Ok(Some((request, None)));
            };
            let bytes = record_bytes(&decision);
            let shown = self.shown(&path);
            self.check_ruling(&request, &decision, &bytes, &shown)?;
            return Ok(Some((request, Some(decision))));
        };
        let decision: ApprovalDecision = serde_json::from_slice(&bytes)
            .map_err(|e| RecordError::parse(self.shown(&path), Some(e.line()), &e))?;
        let shown = self.shown(&path);
        self.check_ruling(&request, &decision, &bytes, &shown)?;
        Ok(Some((request, Some(decision))))
    }

    /// Records a ruling on approval `id`; the caller holds [`RULINGS_LOCK`]. The same ruling
    /// again is accepted without a write (`false`), the opposite one refused. A decision that
    /// was not recorded (written by another process) is moved aside and the ruling recorded.
    /// The ruling (with the whole decision) is journalled before the decision is written, so
    /// after a crash between the two the ruling stands, and ruling the same again writes its
    /// decision file.
    pub fn rule(
        &mut self,
        id: &str,
        verdict: Ruling,
        actor: &str,
        reason: Option<String>,
        now: WallTime,
    ) -> Result<(Approval, bool), RecordError> {
        let dir = approval_dir(id);
        let missing = || RecordError::refused(format!("no approval {id}"));
        let existing = match self.approval(id) {
            Ok(found) => found.ok_or_else(missing)?,
            Err(_) if self.set_aside_unrecorded(id, now)? => {
                self.approval(id)?.ok_or_else(missing)?
            }
            Err(e) => return Err(e),
        };
        let (request, decision) = existing;
        if !may_rule(decision.as_ref(), verdict)? {
            // A ruling a crash kept from its decision file gets it now, never a second ruling.
            if let Some(d) = &decision {
                let path = format!("{dir}/decision.json");
                if self.fs.read(&path)?.is_none() {
                    self.write_record_bytes(&dir, "decision.json", record_bytes(d))?;
                }
            }
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
            reason: decision.reason.clone(),
            decided_at: Some(decision.decided_at),
        };
        let (mut writer, _) = JournalWriter::open_tail(&mut self.fs, RULINGS)?;
        writer.append(&mut self.fs, now, std::slice::from_ref(&record))?;
        self.write_record_bytes(&dir, "decision.json", bytes)?;
        Ok(((request, Some(decision)), true))
    }

    /// Moves a `decision.json` that no recorded ruling names to `decision.unrecorded-<ms>.json`,
    /// kept as evidence; false when the decision is recorded or absent (the read failed for
    /// another reason).
    fn set_aside_unrecorded(&mut self, id: &str, now: WallTime) -> Result<bool, RecordError> {
        let dir = approval_dir(id);
        let path = format!("{dir}/decision.json");
        let Some(bytes) = self.fs.read(&path)? else {
            return Ok(false);
        };
        if self.rulings()?.contains(&sha256_hex(&bytes)) {
            return Ok(false);
        }
        let aside = format!("{dir}/decision.unrecorded-{}.json", now.0);
        self.fs.rename(&path, &aside)?;
        self.fs.sync_dir(&dir)?;
        Ok(true)
    }
}

/// The refusal of a decision no recorded ruling names.
fn unrecorded(shown: &str, id: &str) -> RecordError {
    RecordError::invalid(
        shown,
        format!(
            "this ruling was not recorded by `harn approval` (no ruling in rulings.jsonl names \
             its digest), so it does not count; rule on it with `harn approval approve {id}` or \
             `harn approval deny {id}`"
        ),
    )
}
