//! The work ledger's durable records through the [`Fs`] seam: reading an item with its
//! attempts inspected and its prerequisites projected once per read, appending to its
//! history, and the durable steps of an attempt (start, resume, park, finish). The binary
//! runs this over the real filesystem and the simulator over its faulty one, so a crash
//! between any two calls is explored against the code that ships.
//!
//! Callers hold the locks: the history lock from a read to the append it decides, and the
//! run lease for the whole of an attempt (the lease makes its holder the only writer of the
//! run's records).

use super::events::{validate_history, EventKind, WorkEvent, EVENT_VERSION};
use super::index::Row;
use super::projection::{project, AttemptStatus, Inputs, Prerequisite};
use super::{Projection, WorkIntent};
use crate::env::Fs;
use crate::error::RecordError;
use crate::hash::sha256_hex;
use crate::ids::Id;
use crate::journal::{self, JournalWriter};
use crate::time::WallTime;
use crate::work::approval::ApprovalRequest;
use crate::work::run::{
    findings_context, may_start, synopsis, AttemptContext, Proof, ProofSeal, ResumeState,
    RunManifest, SEAL, SEAL_VERSION,
};
use crate::work::transcript;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

pub use crate::layout::{approval_dir, run_dir, work_dir};

/// A work item as read: its intent, history and projection.
#[derive(Clone, Debug)]
pub struct Item {
    /// The intent.
    pub intent: WorkIntent,
    /// The history, with the receipts older than its last [`RECENT_EVENTS`] events left out
    /// but the last one ([`Ledger::events`]).
    pub events: Vec<WorkEvent>,
    /// How many events the history holds, receipts left out included.
    pub history_len: u64,
    /// The projection.
    pub projection: Projection,
    /// The tokens, turns and cost of its attempts' agent calls, from their proofs, when any
    /// reported them.
    pub usage: Option<crate::work::adapter::Usage>,
}

/// What the inspection of an item's attempts found: each attempt's status, the usage its
/// proofs report, and each run's proof digest (`None` without a proof).
type Inspected =
    (Vec<AttemptStatus>, Option<crate::work::adapter::Usage>, BTreeMap<Id, Option<String>>);

/// A proof and the SHA-256 of its bytes.
pub type SealedProof = (Proof, String);

/// Items already read in one command, so each is read and projected once: whole items, and
/// the rows of those read only for their projection (listings, graphs, prerequisites).
#[derive(Debug, Default)]
pub struct Known {
    pub(super) items: BTreeMap<Id, Result<Item, RecordError>>,
    pub(super) rows: BTreeMap<Id, Result<Arc<Row>, RecordError>>,
    /// What dependents were told of each prerequisite.
    pub(super) views: BTreeMap<Id, Option<Prerequisite>>,
}

/// One item read in full by [`Ledger::read_live`].
pub(super) struct LiveRead {
    pub(super) item: Item,
    /// Whether another process held its run lease.
    pub(super) live: bool,
    /// Each prerequisite's view it was projected with.
    pub(super) prerequisites: BTreeMap<Id, Option<Prerequisite>>,
}

impl Known {
    /// Nothing read yet.
    pub fn new() -> Known {
        Known::default()
    }
}

/// The ledger of one coordination root over a filesystem.
pub struct Ledger<F: Fs> {
    /// The filesystem, rooted at the coordination root.
    pub fs: F,
    /// How errors show the root (`/repo`), so they name files a user can open.
    shown_root: String,
    /// What this ledger has made durable, for a checker to hold it to; whoever reads it
    /// drains it.
    pub acknowledged: Acknowledged,
    /// The index of projections, while this ledger serves reads that only show
    /// ([`super::indexed`] serves them).
    pub(super) index: Option<super::index::Indexed>,
}

/// Appends and records that returned successfully, so were synced: after any later crash
/// each must still be there, unchanged.
#[derive(Clone, Debug, Default)]
pub struct Acknowledged {
    /// Events appended, in order.
    pub events: Vec<WorkEvent>,
    /// Records written once: path and bytes.
    pub records: Vec<(String, Vec<u8>)>,
}

impl<F: Fs> Ledger<F> {
    /// A ledger over `fs`, whose errors show paths under `shown_root`.
    pub fn new(fs: F, shown_root: &str) -> Ledger<F> {
        let shown_root = shown_root.trim_end_matches('/').to_owned();
        Ledger { fs, shown_root, acknowledged: Acknowledged::default(), index: None }
    }

    /// `path` as errors show it.
    pub fn shown(&self, path: &str) -> String {
        format!("{}/{path}", self.shown_root)
    }

    fn read_bytes(&mut self, path: &str) -> Result<Option<Vec<u8>>, RecordError> {
        self.fs.read(path).map_err(RecordError::Fs)
    }

    /// A JSON record, when present; a malformed one names its file and line.
    pub fn read_json<T: serde::de::DeserializeOwned>(
        &mut self,
        path: &str,
    ) -> Result<Option<T>, RecordError> {
        let Some(bytes) = self.read_bytes(path)? else { return Ok(None) };
        serde_json::from_slice(&bytes).map(Some).map_err(|e| self.parse_error(path, &e))
    }

    /// A JSON record of `path` that does not parse, with its file and line.
    fn parse_error(&self, path: &str, e: &serde_json::Error) -> RecordError {
        RecordError::Parse { file: self.shown(path), line: Some(e.line()), detail: e.to_string() }
    }

    /// The intent of `id`, checked; `None` when there is no such item.
    pub fn intent(&mut self, id: &Id) -> Result<Option<WorkIntent>, RecordError> {
        let path = format!("{}/intent.json", work_dir(id));
        let Some(intent) = self.read_json::<WorkIntent>(&path)? else { return Ok(None) };
        intent.validate().map_err(|e| RecordError::invalid(self.shown(&path), e))?;
        if intent.id != *id {
            let detail = format!("id is {}, not {id}", intent.id);
            return Err(RecordError::invalid(self.shown(&path), detail));
        }
        Ok(Some(intent))
    }

    /// The verified history of `id`. A torn final line is an append a crash interrupted: it
    /// never happened; readers ignore it and the next append cuts it off.
    ///
    /// It is read in chunks, every line verified, and kept without the `work.reconciled`
    /// receipts older than the last [`RECENT_EVENTS`] events except the last receipt: receipts
    /// are never read back to compute state, so a history of millions of them costs a chunk
    /// of memory, not the file. Every other event is kept.
    pub fn events(&mut self, id: &Id) -> Result<Vec<WorkEvent>, RecordError> {
        Ok(self.history(id)?.0)
    }

    /// [`Ledger::events`] and how many events the history holds.
    fn history(&mut self, id: &Id) -> Result<(Vec<WorkEvent>, u64), RecordError> {
        let path = format!("{}/events.jsonl", work_dir(id));
        let shown = self.shown(&path);
        let mut check = validate_history_stepwise(id);
        let mut kept: Vec<WorkEvent> = Vec::new();
        let mut total = 0u64;
        let mut receipts = 0usize;
        let read = journal::read_each::<WorkEvent, crate::work::FieldError>(
            &mut self.fs,
            &path,
            &shown,
            |record| {
                let event = record.body;
                check.step(&event)?;
                total += 1;
                if matches!(event.kind, EventKind::Reconciled { .. }) {
                    receipts += 1;
                }
                kept.push(event);
                if receipts > 2 * RECENT_EVENTS && receipts * 2 > kept.len() {
                    receipts = compact(&mut kept, total);
                }
                Ok(())
            },
        );
        match read {
            Ok(_) => {
                // Whenever the reader left off, the same history is kept the same way.
                if receipts > 1 {
                    compact(&mut kept, total);
                }
                Ok((kept, total))
            }
            Err(journal::EachError::Fs(e)) => Err(RecordError::Fs(e)),
            Err(journal::EachError::Corrupt(e)) => Err(e.into()),
            Err(journal::EachError::Refused(e)) => Err(RecordError::invalid(shown, e)),
        }
    }

    /// The whole verified history of `id`, receipts included: for a checker that compares
    /// every acknowledged event.
    pub fn events_all(&mut self, id: &Id) -> Result<Vec<WorkEvent>, RecordError> {
        let path = format!("{}/events.jsonl", work_dir(id));
        let shown = self.shown(&path);
        let bytes = self.read_bytes(&path)?.unwrap_or_default();
        let read = journal::parse_as::<WorkEvent>(&shown, &bytes)?;
        let events: Vec<WorkEvent> = read.records.into_iter().map(|r| r.body).collect();
        validate_history(id, &events).map_err(|e| RecordError::invalid(shown, e))?;
        Ok(events)
    }

    /// Creates work item `intent` so that a crash or a kill at any point leaves it absent or
    /// whole, in the one protocol every creator follows (`harn work create` and a plan's
    /// application): its `work.created` event first, at the intent's `created_at`, then its
    /// intent, written whole. An item a crash left with that event and no intent is no item
    /// yet ([`Ledger::creation_pending`]); creating it again with the same intent completes it,
    /// sealed at the first event's time, never with a second creation event. Refused: an item
    /// that exists, and a different intent over an event another creation left. Returns the
    /// intent as written.
    pub fn create_item(
        &mut self,
        intent: &WorkIntent,
        actor: &str,
        reason: Option<String>,
    ) -> Result<WorkIntent, RecordError> {
        let dir = work_dir(&intent.id);
        if self.intent(&intent.id)?.is_some() {
            return Err(RecordError::refused(format!("work item {} already exists", intent.id)));
        }
        self.fs.create_dir_all(&dir)?;
        self.fs.sync_dir(crate::layout::WORK)?;
        let events = self.events(&intent.id)?;
        let intent = match events.as_slice() {
            [] => {
                let kind = EventKind::created(intent);
                self.append(&intent.id, kind, actor, reason, intent.created_at)?;
                intent.clone()
            }
            // The event seals the intent made before the crash, whose `created_at` was that
            // event's time: the same intent made again seals to the same digest at that time.
            [only] => {
                let mut again = WorkIntent { created_at: only.ts, sha256: None, ..intent.clone() };
                again = again.sealed();
                if only.kind != EventKind::created(&again) {
                    return Err(RecordError::refused(format!(
                        "work {}: a creation of other content was cut short here, leaving a \
                         history without its intent ({}); give the item another id",
                        intent.id,
                        self.shown(&dir)
                    )));
                }
                again
            }
            _ => {
                let detail = format!("work {}: a history exists without its intent", intent.id);
                return Err(RecordError::invalid(self.shown(&dir), detail));
            }
        };
        self.write_record(&dir, "intent.json", &intent)?;
        Ok(intent)
    }

    /// True when `id` holds a creation a crash or a kill cut short: no intent, and at most its
    /// `work.created` event. Such a directory is not a work item yet, and listings skip it.
    pub fn creation_pending(&mut self, id: &Id) -> Result<bool, RecordError> {
        if self.read_bytes(&format!("{}/intent.json", work_dir(id)))?.is_some() {
            return Ok(false);
        }
        let events = self.events(id)?;
        Ok(events.iter().all(|e| matches!(e.kind, EventKind::Created { .. })) && events.len() <= 1)
    }

    /// A run's manifest and proof, each when present; a proof harn did not seal is refused.
    pub fn run_records(
        &mut self,
        run_id: &Id,
    ) -> Result<(Option<RunManifest>, Option<Proof>), RecordError> {
        let (manifest, proof) = self.sealed_run_records(run_id)?;
        Ok((manifest, proof.map(|(p, _)| p)))
    }

    /// [`Ledger::run_records`] with the SHA-256 of the proof's bytes. A run's proof counts
    /// only if harn wrote it at the end of that run: from [`crate::work::run::RUN_VERSION`] 2, the seal it
    /// writes just before the proof (`seal.json`) must name the proof's digest.
    pub fn sealed_run_records(
        &mut self,
        run_id: &Id,
    ) -> Result<(Option<RunManifest>, Option<SealedProof>), RecordError> {
        let dir = run_dir(run_id);
        let manifest: Option<RunManifest> = self.read_json(&format!("{dir}/run.json"))?;
        let path = format!("{dir}/proof.json");
        let Some(bytes) = self.read_bytes(&path)? else { return Ok((manifest, None)) };
        let proof: Proof =
            serde_json::from_slice(&bytes).map_err(|e| self.parse_error(&path, &e))?;
        let digest = sha256_hex(&bytes);
        if manifest.as_ref().is_some_and(|m| m.schema_version >= 2) {
            let seal: Option<ProofSeal> = self.read_json(&format!("{dir}/{SEAL}"))?;
            let refuse = |why: String| {
                let detail = format!(
                    "harn did not write this proof at the end of run {run_id} ({why}); it does \
                     not count"
                );
                RecordError::invalid(self.shown(&path), detail)
            };
            let sealed_len = seal.as_ref().and_then(|s| s.transcript_bytes);
            match seal {
                None => return Err(refuse(format!("{SEAL} is missing"))),
                Some(s) if s.run_id != *run_id => {
                    return Err(refuse(format!("{SEAL} seals run {}", s.run_id)))
                }
                Some(s) if s.proof_sha256 != digest => {
                    return Err(refuse(format!(
                        "{SEAL} names sha256 {}, the proof has {}",
                        &s.proof_sha256.get(..12).unwrap_or(&s.proof_sha256),
                        &digest[..12]
                    )))
                }
                Some(_) => {}
            }
            if proof.run.status == crate::work::run::RunStatus::Succeeded {
                if let Some(why) = self.check_closing(run_id, &proof, &digest, sealed_len)? {
                    let detail = format!(
                        "harn did not write this proof at the end of run {run_id} ({why}); it \
                         does not count: restore the run's files, or move {} out of \
                         .harnery/workflows to give the attempt up",
                        self.shown(&dir)
                    );
                    return Err(RecordError::invalid(self.shown(&path), detail));
                }
            }
        }
        Ok((manifest, Some((proof, digest))))
    }

    /// Checks a passing proof against its transcript, which its host closed with `run.end`
    /// right after writing it: that record names the proof's digest and how the workflow
    /// ended, and a run that did not exit 0 in time and on its own did not pass. A proof and
    /// seal rewritten after the run disagree with it. Only the transcript's last 64 KiB are
    /// read. A transcript without `run.end` is a host that died between the proof and it.
    /// `Some` says why the proof does not count; the error is a transcript the filesystem
    /// would not read.
    fn check_closing(
        &mut self,
        run_id: &Id,
        proof: &Proof,
        digest: &str,
        sealed_len: Option<u64>,
    ) -> Result<Option<String>, RecordError> {
        const TAIL: u64 = 64 << 10;
        let path = format!("{}/transcript.jsonl", run_dir(run_id));
        let Some((_, len)) = self.fs.read_at(&path, 0, 0)? else {
            return Ok(Some("its transcript is missing".into()));
        };
        // A transcript shorter than when the proof was sealed lost what the proof rests on.
        if let Some(sealed) = sealed_len.filter(|&sealed| len < sealed) {
            return Ok(Some(format!(
                "its transcript holds {len} bytes, and held {sealed} when the proof was sealed: \
                 it was cut"
            )));
        }
        let from = len.saturating_sub(TAIL);
        let (tail, _) = self.fs.read_at(&path, from, TAIL as usize)?.unwrap_or_default();
        let closing = match transcript::closing(&self.shown(&path), &tail, from == 0) {
            Ok(closing) => closing,
            // A damaged transcript vouches for nothing: the proof does not count.
            Err(damaged) => return Ok(Some(damaged.to_string())),
        };
        let transcript::Closing::Ended(end) = closing else { return Ok(None) };
        if let Some(named) = end["proof_sha256"].as_str() {
            if named != digest {
                return Ok(Some(format!(
                    "its transcript's run.end names sha256 {}, the proof has {}",
                    named.get(..12).unwrap_or(named),
                    &digest[..12]
                )));
            }
        }
        let clean = end["exit_code"] == 0
            && end["signal"].is_null()
            && end["timed_out"] != true
            && end["interrupted_by"].is_null()
            && end["spawn_error"].is_null();
        if !clean || proof.run.exit_code != Some(0) {
            return Ok(Some(format!(
                "the proof says the run succeeded, and its transcript says the workflow ended \
                 with exit code {}, signal {}{}",
                end["exit_code"],
                end["signal"],
                if end["timed_out"] == true { ", timed out" } else { "" }
            )));
        }
        Ok(None)
    }

    /// A run's transcript records.
    pub fn transcript(&mut self, run_id: &Id) -> Result<Vec<Value>, RecordError> {
        let path = format!("{}/transcript.jsonl", run_dir(run_id));
        let bytes = self.read_bytes(&path)?.unwrap_or_default();
        let read = journal::parse(&self.shown(&path), &bytes)?;
        Ok(read.records.into_iter().map(|r| r.body).collect())
    }

    /// The approval a run is parked on and whether it has been ruled on.
    pub fn parked_on(&mut self, run_id: &Id) -> Result<Option<(String, bool)>, RecordError> {
        let records = self.transcript(run_id)?;
        self.parked_with(run_id, &records)
    }

    /// [`Ledger::parked_on`] from transcript records already read; the approval must exist.
    fn parked_with(
        &mut self,
        run_id: &Id,
        records: &[Value],
    ) -> Result<Option<(String, bool)>, RecordError> {
        let Some(approval) = transcript::parked_on(records) else { return Ok(None) };
        Id::new(&approval).map_err(|e| RecordError::refused(format!("run {run_id}: {e}")))?;
        match self.approval(&approval)? {
            Some((_, decision)) => Ok(Some((approval, decision.is_some()))),
            None => Err(RecordError::invalid(
                self.shown(&format!("{}/request.json", approval_dir(&approval))),
                format!("run {run_id} is parked on approval {approval}, whose request is missing"),
            )),
        }
    }

    /// What a resumed run takes over: started calls, completed replies, and the rulings of
    /// the approvals it asked for.
    pub fn resume_state(&mut self, run_id: &Id) -> Result<ResumeState, RecordError> {
        let records = self.transcript(run_id)?;
        let mut state = transcript::resume_state(&records);
        for approval in transcript::approvals_asked(&records) {
            Id::new(&approval).map_err(|e| RecordError::refused(format!("run {run_id}: {e}")))?;
            if let Some((request, Some(decision))) = self.approval(&approval)? {
                state.rulings.insert(request.slot, (request.request_sha256, decision.verdict));
            }
        }
        Ok(state)
    }

    /// Reads `id` and projects it, projecting its prerequisites through `known` (filled as
    /// it goes, so each item is read and projected once per command). `runner_live` tells
    /// whether another process holds an item's run lease.
    pub fn read(
        &mut self,
        id: &Id,
        known: &mut Known,
        runner_live: &mut dyn FnMut(&Id) -> bool,
    ) -> Result<Item, RecordError> {
        if let Some(done) = known.items.get(id) {
            return done.clone();
        }
        let result = self.read_uncached(id, known, runner_live);
        known.items.insert(id.clone(), result.clone());
        result
    }

    /// Reads `id` afresh (its prerequisites through `known`).
    pub fn read_uncached(
        &mut self,
        id: &Id,
        known: &mut Known,
        runner_live: &mut dyn FnMut(&Id) -> bool,
    ) -> Result<Item, RecordError> {
        self.read_live(id, known, runner_live).map(|read| read.item)
    }

    /// [`Ledger::read_uncached`], whether another process held the item's run lease, and
    /// the prerequisite views it was projected with.
    pub(super) fn read_live(
        &mut self,
        id: &Id,
        known: &mut Known,
        runner_live: &mut dyn FnMut(&Id) -> bool,
    ) -> Result<LiveRead, RecordError> {
        let intent =
            self.intent(id)?.ok_or_else(|| RecordError::refused(format!("no work item {id}")))?;
        let (events, history_len) = self.history(id)?;
        if events.is_empty() {
            // Creation writes both or neither, so this was made by hand; appending to it
            // would only bury the missing creation under more events.
            let path = format!("{}/events.jsonl", work_dir(id));
            return Err(RecordError::invalid(self.shown(&path), "no work.created event"));
        }
        let mut prerequisites = BTreeMap::new();
        for dep in &intent.dependencies {
            let view = self.prerequisite(dep, known);
            prerequisites.insert(dep.clone(), view);
        }
        let shown_events = self.shown(&format!("{}/events.jsonl", work_dir(id)));
        let shown_intent = self.shown(&format!("{}/intent.json", work_dir(id)));
        super::events::check_created(&intent, &shown_intent, &events)?;
        let live = runner_live(id);
        let (attempts, usage, proofs) = self.inspect_attempts(id, &events, live)?;
        super::projection::check_acceptances(&events, &proofs, &attempts)
            .map_err(|e| RecordError::invalid(shown_events, e))?;
        let inputs = Inputs {
            intent: &intent,
            events: &events,
            attempts: &attempts,
            prerequisites: &prerequisites,
            lease_held_elsewhere: live,
        };
        let projection = project(&inputs);
        let item = Item { intent, events, history_len, projection, usage };
        Ok(LiveRead { item, live, prerequisites })
    }

    /// What a dependent needs of `dep` ([`Prerequisite`]): from what this command already
    /// read or the index vouches for, else from `dep`'s own files (its intent, history and
    /// the runs its acceptances name), never from the items below it. `None` when those
    /// files cannot be read or do not hold together.
    pub(super) fn prerequisite(&mut self, dep: &Id, known: &mut Known) -> Option<Prerequisite> {
        if let Some(seen) = known.views.get(dep) {
            return *seen;
        }
        let view = match (known.items.get(dep), known.rows.get(dep)) {
            (Some(item), _) => item.as_ref().ok().map(|i| Prerequisite::of(&i.projection)),
            (None, Some(row)) => row.as_ref().ok().map(|r| r.view()),
            (None, None) => match self.stored_view(dep) {
                Some(view) => Some(view),
                None => self.governance_view(dep).ok(),
            },
        };
        known.views.insert(dep.clone(), view);
        view
    }

    /// `id`'s view from its own files, checked as a full read checks them.
    fn governance_view(&mut self, id: &Id) -> Result<Prerequisite, RecordError> {
        self.spend_patience();
        let intent =
            self.intent(id)?.ok_or_else(|| RecordError::refused(format!("no work item {id}")))?;
        let (events, _) = self.history(id)?;
        let shown_events = self.shown(&format!("{}/events.jsonl", work_dir(id)));
        if events.is_empty() {
            return Err(RecordError::invalid(shown_events, "no work.created event"));
        }
        let shown_intent = self.shown(&format!("{}/intent.json", work_dir(id)));
        super::events::check_created(&intent, &shown_intent, &events)?;
        let (attempts, _, proofs) = self.inspect_attempts(id, &events, false)?;
        super::projection::check_acceptances(&events, &proofs, &attempts)
            .map_err(|e| RecordError::invalid(shown_events, e))?;
        Ok(Prerequisite::of_history(&events))
    }

    /// The dependency closure of `root` in post-order (prerequisites first, in their
    /// declared order; the root last), each item read and projected once.
    pub fn graph(
        &mut self,
        root: &Id,
        runner_live: &mut dyn FnMut(&Id) -> bool,
    ) -> Result<Vec<super::projection::GraphItem>, RecordError> {
        self.examine_closure(root);
        self.look_below(root);
        let mut known = Known::new();
        let (mut order, mut seen) = (Vec::new(), std::collections::BTreeSet::new());
        // An explicit stack, so a chain of a thousand items needs no deep recursion: each
        // entry is an item and whether its prerequisites have been pushed.
        let mut stack = vec![(root.clone(), false)];
        while let Some((id, expanded)) = stack.pop() {
            let row = self.summary(&id, &mut known, runner_live)?;
            if expanded {
                order.push(super::projection::GraphItem { id, projection: row.projection.clone() });
                continue;
            }
            if !seen.insert(id.clone()) {
                continue;
            }
            stack.push((id, true));
            for dep in row.dependencies.iter().rev() {
                if !seen.contains(dep) {
                    stack.push((dep.clone(), false));
                }
            }
        }
        Ok(order)
    }

    /// Accepts the latest proof of `item` (read under the history lock, which the caller
    /// holds): refused unless it is in review with every open finding disposed of; records
    /// the proof's SHA-256.
    pub fn accept(
        &mut self,
        item: &Item,
        dispositions: Vec<super::events::Disposition>,
        actor: &str,
        reason: Option<String>,
        now: WallTime,
    ) -> Result<(), Refusal> {
        let id = &item.intent.id;
        crate::work::run::may_accept(&item.projection, &dispositions).map_err(|why| {
            let why = format!("cannot accept {id}: {why}");
            Refusal::NotNow(super::next::with_next(id, &item.projection, why))
        })?;
        let run_id = item.projection.latest_run_id.clone().expect("an item in review has a run");
        let path = format!("{}/proof.json", run_dir(&run_id));
        let bytes = self
            .read_bytes(&path)?
            .ok_or_else(|| RecordError::refused(format!("run {run_id} has no proof")))?;
        let proof_sha256 = crate::hash::sha256_hex(&bytes);
        // A worktree run that left its change uncommitted made nothing a landing can take:
        // accepting it would leave an item that can never land and a worktree kept for it.
        let proof: Option<Proof> = serde_json::from_slice(&bytes).ok();
        if let Some(a) = proof.as_ref().and_then(|p| p.workspace.as_ref()).filter(|a| a.uncommitted)
        {
            return Err(Refusal::NotNow(format!(
                "cannot accept {id}: run {run_id} left its change uncommitted in {} (what was \
                 reviewed is in no commit, so it could never land); have the workflow commit \
                 its work, then `harn work reopen {id} --reason WHY` and run it again",
                a.workspace.path
            )));
        }
        self.check_transcript_sealed(&run_id)?;
        let attempt = item.projection.attempts_used;
        let kind = EventKind::Accepted { run_id, attempt, proof_sha256, dispositions };
        self.append(id, kind, actor, reason, now)?;
        Ok(())
    }

    /// Refuses a proof whose transcript is not what it was when the proof was sealed: the
    /// digest of the transcript's sealed prefix must match (what follows it is `run.end`).
    /// Read whole once, at the decision; reads check only the length.
    fn check_transcript_sealed(&mut self, run_id: &Id) -> Result<(), RecordError> {
        let dir = run_dir(run_id);
        let Some(seal) = self.read_json::<ProofSeal>(&format!("{dir}/{SEAL}"))? else {
            return Ok(());
        };
        let (Some(len), Some(want)) = (seal.transcript_bytes, seal.transcript_sha256) else {
            return Ok(());
        };
        let path = format!("{dir}/transcript.jsonl");
        let bytes = self.read_bytes(&path)?.unwrap_or_default();
        let prefix = bytes.get(..len as usize);
        if prefix.is_some_and(|p| sha256_hex(p) == want) {
            return Ok(());
        }
        Err(RecordError::invalid(
            self.shown(&path),
            format!(
                "is not what run {run_id}'s proof was sealed over ({len} bytes, sha256 {}): \
                 the run's record was changed or cut, and its proof cannot be accepted; run \
                 the item again (`harn work retry`) or restore the file",
                want.get(..12).unwrap_or(&want)
            ),
        ))
    }

    /// One inspection per `attempt.started`, from the run's records.
    fn inspect_attempts(
        &mut self,
        id: &Id,
        events: &[WorkEvent],
        runner_live: bool,
    ) -> Result<Inspected, RecordError> {
        let mut attempts = Vec::new();
        let mut usage: Option<crate::work::adapter::Usage> = None;
        let mut proofs = BTreeMap::new();
        for e in events {
            let EventKind::AttemptStarted { run_id, attempt, .. } = &e.kind else { continue };
            let (manifest, sealed) = self.sealed_run_records(run_id)?;
            proofs.insert(run_id.clone(), sealed.as_ref().map(|(_, d)| d.clone()));
            let proof = sealed.map(|(p, _)| p);
            if let Some(u) = proof.as_ref().and_then(|p| p.usage.as_ref()) {
                usage.get_or_insert_with(Default::default).add(u);
            }
            // Only a run that ended without proof and has no runner may be parked. An
            // unreadable transcript blocks the attempt; an unreadable approval fails the read.
            // It also tells whether the workflow ever started: a run without a manifest
            // never got that far.
            let (parked, started) = match (&manifest, &proof, runner_live) {
                (Some(_), None, false) => match self.transcript(run_id) {
                    Ok(records) => {
                        (self.parked_with(run_id, &records)?, transcript::started(&records))
                    }
                    Err(_) => {
                        attempts.push(AttemptStatus::TranscriptUnreadable);
                        continue;
                    }
                },
                _ => (None, transcript::Started::Never),
            };
            let parked = parked.as_ref().map(|(a, decided)| (a.as_str(), *decided));
            let records = (manifest.as_ref(), proof.as_ref());
            let status = crate::work::run::inspect(
                id,
                run_id,
                *attempt,
                records,
                parked,
                started,
                runner_live,
            )
            .map_err(|e| RecordError::refused(format!("work item {id}: {e}")))?;
            attempts.push(status);
        }
        Ok((attempts, usage, proofs))
    }

    /// Appends one event to `id`'s history with the next sequence number; the caller holds
    /// the history lock. Synced before it returns.
    pub fn append(
        &mut self,
        id: &Id,
        kind: EventKind,
        actor: &str,
        reason: Option<String>,
        now: WallTime,
    ) -> Result<WorkEvent, RecordError> {
        let path = format!("{}/events.jsonl", work_dir(id));
        self.note(&path)?;
        let (mut writer, _) = JournalWriter::open_tail(&mut self.fs, &path)?;
        let event = WorkEvent {
            schema_version: EVENT_VERSION,
            work_id: id.clone(),
            seq: writer.next_seq(),
            ts: now,
            actor: actor.to_owned(),
            reason,
            kind,
        };
        writer.append(&mut self.fs, now, std::slice::from_ref(&event))?;
        self.acknowledged.events.push(event.clone());
        Ok(event)
    }

    /// Writes `dir/name` once, whole: under a temporary name, synced, renamed into place and
    /// the directory synced, so a crash leaves the record whole or absent, never partial.
    /// Refused if it exists; the caller's lease makes it the only writer. Returns its bytes.
    pub fn write_record(
        &mut self,
        dir: &str,
        name: &str,
        record: &impl serde::Serialize,
    ) -> Result<Vec<u8>, RecordError> {
        self.write_record_bytes(dir, name, record_bytes(record))
    }

    /// [`Ledger::write_record`] of bytes already made by [`record_bytes`].
    pub fn write_record_bytes(
        &mut self,
        dir: &str,
        name: &str,
        bytes: Vec<u8>,
    ) -> Result<Vec<u8>, RecordError> {
        let path = format!("{dir}/{name}");
        self.note(&path)?;
        self.fs.create_dir_all(dir)?;
        if self.read_bytes(&path)?.is_some() {
            return Err(RecordError::invalid(self.shown(&path), "already written"));
        }
        let temp = format!("{dir}/.{name}.tmp");
        let written = (|| {
            self.fs.write_temp(&temp, &bytes)?;
            self.fs.sync_file(&temp)?;
            self.fs.rename(&temp, &path)
        })();
        if let Err(e) = written {
            // A full disk leaves no temporary file behind for each refused attempt.
            let _ = self.fs.remove(&temp);
            return Err(RecordError::Fs(e));
        }
        self.fs.sync_dir(dir)?;
        self.acknowledged.records.push((path, bytes.clone()));
        Ok(bytes)
    }

    /// Appends a `work.reconciled` receipt when the projected state, reason or next action
    /// differs from the last receipt; the caller holds the history lock and no runner is
    /// live. Returns whether a receipt was written.
    pub fn reconcile(
        &mut self,
        item: &Item,
        actor: &str,
        now: WallTime,
    ) -> Result<bool, RecordError> {
        let p = &item.projection;
        if receipt_current(item) {
            return Ok(false);
        }
        let (state, next_action) = receipt_words(p);
        let receipt = EventKind::Reconciled { state, next_action };
        self.append(&item.intent.id, receipt, actor, Some(p.reason.clone()), now)?;
        Ok(true)
    }
}

/// The state and next action a receipt records, as words.
fn receipt_words(p: &Projection) -> (String, String) {
    let state = serde_json::json!(p.state).as_str().unwrap_or("").to_owned();
    let next_action = serde_json::json!(p.next_action).as_str().unwrap_or("").to_owned();
    (state, next_action)
}

/// Whether the history's last `work.reconciled` receipt records the item's projection.
pub(super) fn receipt_current(item: &Item) -> bool {
    let (state, next_action) = receipt_words(&item.projection);
    let last = item.events.iter().rev().find_map(|e| match &e.kind {
        EventKind::Reconciled { state, next_action } => Some((state, next_action, &e.reason)),
        _ => None,
    });
    last == Some((&state, &next_action, &Some(item.projection.reason.clone())))
}

/// How many of a history's last events are kept whole when it is read, receipts included.
pub const RECENT_EVENTS: usize = 64;

/// The incremental form of [`validate_history`].
fn validate_history_stepwise(id: &Id) -> super::events::HistoryCheck {
    super::events::HistoryCheck::new(id)
}

/// Leaves out of `kept` the receipts older than the last [`RECENT_EVENTS`] of `total` events,
/// except the last receipt; returns how many receipts are left.
fn compact(kept: &mut Vec<WorkEvent>, total: u64) -> usize {
    let recent = total.saturating_sub(RECENT_EVENTS as u64);
    let last_receipt =
        kept.iter().rev().find(|e| matches!(e.kind, EventKind::Reconciled { .. })).map(|e| e.seq);
    kept.retain(|e| {
        !matches!(e.kind, EventKind::Reconciled { .. })
            || e.seq > recent
            || Some(e.seq) == last_receipt
    });
    kept.iter().filter(|e| matches!(e.kind, EventKind::Reconciled { .. })).count()
}

/// A record's bytes as written: pretty JSON and a final newline.
pub fn record_bytes(record: &impl serde::Serialize) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(record).expect("records serialize");
    bytes.push(b'\n');
    bytes
}

/// A retry started without a team keeps the team of the attempt before it, with every
/// harness that team names, frozen by value as they were.
fn inherit_team(manifest: &mut RunManifest, before: RunManifest) {
    manifest.team = before.team;
    let default = manifest.harness.as_ref().map(|h| h.name.clone());
    for (name, spec) in before.harnesses {
        if Some(&name) != default.as_ref() {
            manifest.harnesses.entry(name).or_insert(spec);
        }
    }
    if let Some(h) = before.harness {
        let named = manifest.team.values().any(|p| p.harness.as_deref() == Some(&h.name));
        if named && Some(&h.name) != default.as_ref() {
            manifest.harnesses.entry(h.name).or_insert(h.spec);
        }
    }
}

/// Why an attempt could not start, or an acceptance was not recorded. `E` is what a record
/// failure is: the ledger's [`RecordError`], or the error of an attempt's host
/// ([`crate::work::attempt::AttemptHost::Error`]), which holds one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal<E = RecordError> {
    /// Nothing was recorded: the item may not start an attempt (or be accepted) now.
    NotNow(String),
    /// A record a new attempt starts with (its manifest, `attempt.started`, the prerequisites
    /// read for it) could not be read or written before anything was spawned: nothing ran
    /// and no attempt was charged.
    Unstarted(RecordError),
    /// A record could not be read or written.
    Store(E),
}

impl<E> Refusal<E> {
    /// The same refusal with its record failure turned into `F`.
    pub fn map<F>(self, f: impl FnOnce(E) -> F) -> Refusal<F> {
        match self {
            Refusal::NotNow(why) => Refusal::NotNow(why),
            Refusal::Unstarted(e) => Refusal::Unstarted(e),
            Refusal::Store(e) => Refusal::Store(f(e)),
        }
    }
}

impl<E: From<RecordError>> From<RecordError> for Refusal<E> {
    fn from(e: RecordError) -> Refusal<E> {
        Refusal::Store(e.into())
    }
}

impl<E: std::fmt::Display> std::fmt::Display for Refusal<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NotNow(why) => f.write_str(why),
            Refusal::Unstarted(e) => write!(f, "{e}; nothing ran and no attempt was charged"),
            Refusal::Store(e) => write!(f, "{e}"),
        }
    }
}

impl<F: Fs> Ledger<F> {
    /// Records a new attempt of `item` and freezes its manifest: `attempt.started` is
    /// appended (synced) and `run.json` written before anything is spawned. `options` is a
    /// manifest template whose run, work, attempt, trigger, start time and script are filled
    /// here. Returns the manifest and the workflow's start line.
    pub fn start_attempt(
        &mut self,
        item: &Item,
        retry: bool,
        options: &RunManifest,
        actor: &str,
        now: WallTime,
    ) -> Result<(RunManifest, Value), Refusal> {
        let id = &item.intent.id;
        let trigger = may_start(&item.projection, retry).map_err(|why| {
            let why = format!("cannot start an attempt of {id}: {why}");
            Refusal::NotNow(super::next::with_next(id, &item.projection, why))
        })?;
        let mut known = Known::new();
        let mut no_runner = |_: &Id| false;
        let mut prerequisites = BTreeMap::new();
        for d in &item.intent.dependencies {
            // A prerequisite that cannot be read now (an IO error) refuses the start: an
            // attempt recorded without the acceptance it builds on would later read as
            // stale and be dispatched again.
            let read = self.read(d, &mut known, &mut no_runner)?;
            if let Some(seq) = read.projection.accepted_seq {
                prerequisites.insert(d.clone(), seq);
            }
        }
        let (prior, prior_manifest) = match (&item.projection.latest_run_id, retry) {
            (Some(run), true) => {
                let (manifest, proof) = self.run_records(run)?;
                (Some(synopsis(run, proof.as_ref())), manifest)
            }
            _ => (None, None),
        };
        let attempt = item.projection.attempts_used + 1;
        let run_id = options.run_id.clone();
        self.check_attempt_unclaimed(id, attempt)?;
        let mut manifest = RunManifest {
            work_id: id.clone(),
            attempt,
            trigger,
            started_at: now,
            script: item.intent.workflow.clone(),
            ..options.clone()
        };
        if let Some(before) = prior_manifest.filter(|_| options.team.is_empty()) {
            inherit_team(&mut manifest, before);
        }
        let findings = findings_context(&item.events, &item.projection.open_findings);
        let context = manifest.context_for(&item.intent, AttemptContext { prior, findings });
        manifest.context = Some(context);
        // The manifest first: a run that cannot even record what it would run (a full disk,
        // a refused path) is no attempt, and its history says nothing of it.
        self.write_record(&run_dir(&run_id), "run.json", &manifest)?;
        self.claim_attempt(id, attempt, &run_id)?;
        let started =
            EventKind::AttemptStarted { run_id: run_id.clone(), attempt, trigger, prerequisites };
        self.append(id, started, actor, None, now)?;
        let start = manifest.start_line(&item.intent, AttemptContext::default(), None);
        Ok((manifest, start))
    }

    /// What is wrong when `item`'s history lost an attempt that ran (see
    /// [`Ledger::start_attempt`], which refuses to start on it): the file and why.
    pub fn lost_attempt(&mut self, item: &Item) -> Result<Option<(String, String)>, RecordError> {
        match self.check_attempt_unclaimed(&item.intent.id, item.projection.attempts_used + 1) {
            Ok(()) => Ok(None),
            Err(RecordError::Invalid { file, detail }) => Ok(Some((file, detail))),
            Err(e) => Err(e),
        }
    }

    /// Refuses attempt `attempt` of `id` when a run that ran already holds its number: the
    /// item's history lost that attempt (a cut `events.jsonl`), and starting it again would
    /// run and charge an attempt twice under one number. A claim whose run never started
    /// (its start was cut short before `attempt.started`) is no attempt, and is taken over.
    fn check_attempt_unclaimed(&mut self, id: &Id, attempt: u32) -> Result<(), RecordError> {
        let claim = attempt_claim(id, attempt);
        let Some(bytes) = self.read_bytes(&claim)? else { return Ok(()) };
        let Ok(earlier) = Id::new(String::from_utf8_lossy(&bytes).trim()) else {
            return Err(RecordError::invalid(self.shown(&claim), "does not name a run"));
        };
        // Whether it ran is what its transcript says (a start that failed has a proof but
        // never ran); a transcript that does not read is taken to have run.
        let ran = match self.transcript(&earlier) {
            Ok(records) => transcript::started(&records) != transcript::Started::Never,
            Err(e @ RecordError::Fs(_)) => return Err(e),
            Err(_) => true,
        };
        if !ran {
            return Ok(());
        }
        Err(RecordError::invalid(
            self.shown(&format!("{}/events.jsonl", work_dir(id))),
            format!(
                "the history was cut: it has {} attempts, but run {earlier} ran as attempt \
                 {attempt} ({}); nothing new starts on a history that lost a run. Restore \
                 the file from a backup, or cancel the item and create it anew",
                attempt - 1,
                self.shown(&claim)
            ),
        ))
    }

    /// Records that attempt `attempt` of `id` is run `run_id`, durably, before the history
    /// says the attempt started (see [`Ledger::check_attempt_unclaimed`]).
    fn claim_attempt(&mut self, id: &Id, attempt: u32, run_id: &Id) -> Result<(), RecordError> {
        let claim = attempt_claim(id, attempt);
        let dir = crate::env::parent_dir(&claim).to_owned();
        self.fs.create_dir_all(&dir)?;
        self.fs.remove(&claim)?;
        self.fs.create_new(&claim, format!("{run_id}\n").as_bytes())?;
        self.fs.sync_file(&claim)?;
        self.fs.sync_dir(&dir)?;
        Ok(())
    }

    /// Resumes the parked attempt of `item` once its approval is ruled on: `attempt.resumed`
    /// is appended and the same run's manifest, resume state and start line are returned.
    pub fn resume_attempt(
        &mut self,
        item: &Item,
        actor: &str,
        now: WallTime,
    ) -> Result<(RunManifest, ResumeState, Value), Refusal> {
        let p = &item.projection;
        let id = &item.intent.id;
        let approval = p.approval_id.clone().unwrap_or_default();
        if p.next_action != super::NextAction::Resume {
            return Err(Refusal::NotNow(format!(
                "{id} waits on approval {approval}: rule on it with `harn approval approve \
                 {approval}` or `harn approval deny {approval}`, then run it again"
            )));
        }
        let run_id = p.latest_run_id.clone().expect("a parked item has a run");
        let manifest = self
            .run_records(&run_id)?
            .0
            .ok_or_else(|| RecordError::refused(format!("run {run_id} has no manifest")))?;
        let resumed =
            EventKind::AttemptResumed { run_id: run_id.clone(), attempt: manifest.attempt };
        self.append(id, resumed, actor, None, now)?;
        let state = self.resume_state(&run_id)?;
        let resuming = serde_json::json!({ "event": "run.resuming", "approval_id": approval });
        self.append_transcript(&run_id, resuming, now)?;
        let prior = match manifest.trigger {
            super::Trigger::Retry => self.prior_synopsis(item, &run_id)?,
            super::Trigger::Initial => None,
        };
        let findings = findings_context(&item.events, &item.projection.open_findings);
        let context = AttemptContext { prior, findings };
        let start = manifest.start_line(&item.intent, context, Some(&approval));
        Ok((manifest, state, start))
    }

    /// The synopsis of the attempt before `run_id`, which a retry's start line carries.
    fn prior_synopsis(&mut self, item: &Item, run_id: &Id) -> Result<Option<Value>, RecordError> {
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
            Some(i) => Ok(Some(synopsis(runs[i], self.run_records(runs[i])?.1.as_ref()))),
            None => Ok(None),
        }
    }

    /// Appends one synced record to a run's transcript (cutting a torn tail first).
    pub fn append_transcript(
        &mut self,
        run_id: &Id,
        mut body: Value,
        now: WallTime,
    ) -> Result<(), RecordError> {
        let path = format!("{}/transcript.jsonl", run_dir(run_id));
        let (mut writer, _) = JournalWriter::open_tail(&mut self.fs, &path)?;
        body["run_id"] = serde_json::json!(run_id);
        writer.append(&mut self.fs, now, std::slice::from_ref(&body))?;
        Ok(())
    }

    /// Parks a run on the approval policy asked for: the request is recorded (or found, from
    /// an earlier segment), then `run.parked` is appended as the transcript's last record,
    /// which is what makes the attempt read as parked. The inner error: the slot already holds
    /// a different request, and the run must stop instead (a refusal).
    pub fn park(
        &mut self,
        manifest: &RunManifest,
        parked: &crate::work::run::Parked,
        now: WallTime,
    ) -> Result<Result<ApprovalRequest, RecordError>, RecordError> {
        let request = manifest.approval_request(parked, now);
        let created = match self.record_approval(&request)? {
            Ok(created) => created,
            Err(why) => return Ok(Err(why)),
        };
        if created {
            let body = serde_json::json!({ "event": "approval.requested", "request": request });
            self.append_transcript(&manifest.run_id, body, now)?;
        }
        let body = serde_json::json!({ "event": "run.parked", "approval_id": request.approval_id });
        self.append_transcript(&manifest.run_id, body, now)?;
        Ok(Ok(request))
    }

    /// Ends a run segment that finished: its proof is built from the fold and written once,
    /// then `run.end` closes the transcript. In that order, a crash cannot turn a resumed run
    /// into a lost attempt: until the proof exists, the run is still parked and resumes again.
    pub fn finish_attempt(
        &mut self,
        item: &Item,
        manifest: &RunManifest,
        fold: crate::work::run::RunFold,
        end: &crate::work::run::ProcessEnd,
        now: WallTime,
    ) -> Result<Proof, RecordError> {
        self.finish_run(manifest, &item.intent, fold, end, now)
    }

    /// Writes a planning run's proof (see [`crate::work::run::planning`]), as
    /// [`Ledger::finish_attempt`] writes an attempt's: sealed, and named by `run.end`.
    pub fn finish_planning(
        &mut self,
        manifest: &RunManifest,
        step: &crate::work::run::PlanningStep,
        fold: crate::work::run::RunFold,
        end: &crate::work::run::ProcessEnd,
        now: WallTime,
    ) -> Result<Proof, RecordError> {
        let intent = crate::work::run::planning::intent(manifest, step);
        self.finish_run(manifest, &intent, fold, end, now)
    }

    fn finish_run(
        &mut self,
        manifest: &RunManifest,
        intent: &WorkIntent,
        fold: crate::work::run::RunFold,
        end: &crate::work::run::ProcessEnd,
        now: WallTime,
    ) -> Result<Proof, RecordError> {
        let mut proof = fold.finish(manifest, intent, end, now);
        let run_id = &manifest.run_id;
        // The containment the last segment reached, as its host recorded it at the spawn;
        // the manifest holds only what was planned.
        if let Some(reached) = self.transcript(run_id).ok().and_then(|r| transcript::reached(&r)) {
            proof.containment = Some(reached);
        }
        let dir = run_dir(run_id);
        // Only this run's host writes its proof, and only here; a proof already in place was
        // put there by someone else. It is kept aside as evidence and never counted.
        let path = format!("{dir}/proof.json");
        if let Some(foreign) = self.read_bytes(&path)? {
            let aside = format!("proof.foreign-{}.json", now.0);
            self.fs.rename(&path, &format!("{dir}/{aside}"))?;
            self.fs.sync_dir(&dir)?;
            let body = serde_json::json!({
                "event": "run.tampered", "file": "proof.json", "moved_to": aside,
                "sha256": sha256_hex(&foreign),
            });
            self.append_transcript(run_id, body, now)?;
        }
        let bytes = record_bytes(&proof);
        match self.seal_proof(&dir, run_id, bytes, end, now) {
            // The workflow ended for its own reasons and the disk was too full for its proof:
            // harn's failure, not the work's. A small `run.unsealed` says so (where even that
            // does not fit, the run reads as lost), and the attempt reads as the
            // environment's failure, uncharged; the transcript keeps what the run said.
            Err(RecordError::Fs(e)) if e.kind == crate::env::FsErrorKind::NoSpace => {
                let mut body = end_body(end);
                body["event"] = serde_json::json!("run.unsealed");
                body["cause"] = serde_json::json!(e.to_string());
                let _ = self.append_transcript(run_id, body, now);
                Err(RecordError::Fs(e))
            }
            other => other.map(|()| proof),
        }
    }

    /// Writes the seal, then the proof, then `run.end` naming it.
    fn seal_proof(
        &mut self,
        dir: &str,
        run_id: &Id,
        bytes: Vec<u8>,
        end: &crate::work::run::ProcessEnd,
        now: WallTime,
    ) -> Result<(), RecordError> {
        // The seal first: a crash between the two leaves a seal without a proof, which
        // counts for nothing, and the next segment's seal replaces it.
        let transcript = self.read_bytes(&format!("{dir}/transcript.jsonl"))?.unwrap_or_default();
        let seal = ProofSeal {
            schema_version: SEAL_VERSION,
            run_id: run_id.clone(),
            proof_sha256: sha256_hex(&bytes),
            transcript_bytes: Some(transcript.len() as u64),
            transcript_sha256: Some(sha256_hex(&transcript)),
        };
        drop(transcript);
        crate::atomic::atomic_replace(
            &mut self.fs,
            &format!("{dir}/{SEAL}"),
            &record_bytes(&seal),
        )?;
        let proof_sha256 = seal.proof_sha256.clone();
        self.write_record_bytes(dir, "proof.json", bytes)?;
        // `run.end` names the proof it closes: a proof written over later disagrees with it.
        let mut body = end_body(end);
        body["proof_sha256"] = serde_json::json!(proof_sha256);
        self.append_transcript(run_id, body, now)
    }

    /// Records a parked run's approval request, or finds the identical one an earlier
    /// segment recorded: `Ok(true)` when written now, `Ok(false)` when already there, and
    /// the inner error (a refusal) when the slot holds a different request.
    pub fn record_approval(
        &mut self,
        request: &ApprovalRequest,
    ) -> Result<Result<bool, RecordError>, RecordError> {
        let dir = approval_dir(&request.approval_id);
        match self.read_json::<ApprovalRequest>(&format!("{dir}/request.json"))? {
            Some(existing) if existing.request_sha256 == request.request_sha256 => Ok(Ok(false)),
            Some(_) => Ok(Err(RecordError::refused(format!(
                "approval {} was asked for a different request; a changed request cannot \
                 take over its ruling",
                request.approval_id
            )))),
            None => self.write_record(&dir, "request.json", request).map(|_| Ok(true)),
        }
    }
}

/// The transcript record of how a run's workflow ended (`run.end`, before the proof it names).
fn end_body(end: &crate::work::run::ProcessEnd) -> Value {
    match end {
        crate::work::run::ProcessEnd::Exited { code, signal, timed_out } => {
            serde_json::json!({
                "event": "run.end", "exit_code": code, "signal": signal, "timed_out": timed_out,
            })
        }
        crate::work::run::ProcessEnd::Interrupted { by, code, signal } => {
            serde_json::json!({
                "event": "run.end", "exit_code": code, "signal": signal, "interrupted_by": by,
            })
        }
        crate::work::run::ProcessEnd::LimitReached { code, signal, reached } => {
            serde_json::json!({
                "event": "run.end", "exit_code": code, "signal": signal, "limits_reached": reached,
            })
        }
        crate::work::run::ProcessEnd::SpawnFailed { error, .. } => {
            serde_json::json!({ "event": "run.end", "spawn_error": error })
        }
    }
}

/// Where attempt `attempt` of `id` names its run: `.harnery/work/ID/attempts/N`, written
/// before `attempt.started`, so a history that lost the attempt is found out by it.
pub fn attempt_claim(id: &Id, attempt: u32) -> String {
    format!("{}/attempts/{attempt}", work_dir(id))
}
