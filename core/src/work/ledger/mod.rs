//! The work ledger's durable records through the [`Fs`] seam: reading an item with its
//! attempts inspected and its prerequisites projected once per read, here; its own records'
//! writes in `writes`, a run's records in `runs`, and the durable steps of an attempt
//! (start, resume, park, finish) in `attempts`. The binary runs this over the real
//! filesystem and the simulator over its faulty one, so a crash between any two calls is
//! explored against the code that ships.
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
    feedback_context, findings_context, may_start, synopsis, AttemptContext, Proof, ProofSeal,
    ResumeState, RunManifest, SEAL, SEAL_VERSION,
};
use crate::work::transcript;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

mod attempts;
mod runs;
mod writes;

pub(crate) use crate::layout::approval_dir;
pub use crate::layout::{run_dir, work_dir};
pub use attempts::Refusal;

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
pub(crate) type SealedProof = (Proof, String);

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
        // The witness first: an append between the two reads then never reads as a cut.
        let reached = self.reach(id)?;
        let (events, history_len) = self.history(id)?;
        if events.is_empty() {
            // Creation writes both or neither, so this was made by hand; appending to it
            // would only bury the missing creation under more events.
            let path = format!("{}/events.jsonl", work_dir(id));
            return Err(RecordError::invalid(self.shown(&path), "no work.created event"));
        }
        self.check_reach(id, reached, history_len)?;
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
pub(crate) const RECENT_EVENTS: usize = 64;

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
pub(crate) fn record_bytes(record: &impl serde::Serialize) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(record).expect("records serialize");
    bytes.push(b'\n');
    bytes
}

/// A retry started without a team keeps the team of the attempt before it, with every
/// harness that team names, frozen by value as they were.
fn inherit_team(manifest: &mut RunManifest, before: RunManifest) {
    manifest.team = before.team;
    let default = manifest.adapter.as_ref().map(|h| h.name.clone());
    for (name, spec) in before.adapters {
        if Some(&name) != default.as_ref() {
            manifest.adapters.entry(name).or_insert(spec);
        }
    }
    if let Some(h) = before.adapter {
        let named = manifest.team.values().any(|p| p.adapter.as_deref() == Some(&h.name));
        if named && Some(&h.name) != default.as_ref() {
            manifest.adapters.entry(h.name).or_insert(h.spec);
        }
    }
}
