//! The ledger's writes of an item's own records: its creation, its history's appends,
//! acceptance and the reconcile receipt, each durable before it returns.

use super::*;

impl<F: Fs> Ledger<F> {
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

    /// Accepts the latest proof of `item` (read under the history lock, which the caller
    /// holds): refused unless it is in review with every open finding disposed of; records
    /// the proof's SHA-256.
    pub fn accept(
        &mut self,
        item: &Item,
        dispositions: Vec<crate::work::events::Disposition>,
        actor: &str,
        reason: Option<String>,
        now: WallTime,
    ) -> Result<(), Refusal> {
        let id = &item.intent.id;
        crate::work::run::may_accept(&item.projection, &dispositions).map_err(|why| {
            let why = format!("cannot accept {id}: {why}");
            Refusal::NotNow(crate::work::next::with_next(id, &item.projection, why))
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
        // A history cut at a line boundary reads as whole: its witness says how far it reached,
        // and nothing is appended to bury the cut.
        // Under the history lock nobody else appends, so the order of the reads is free.
        let reached = self.reach(id)?;
        self.check_reach(id, reached, writer.next_seq() - 1)?;
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
        self.write_reach(id, event.seq);
        Ok(event)
    }

    /// Records that `id`'s history reached `seq` ([`REACH`]): written after the event is
    /// synced, and not synced itself, so it may lag the history after a crash but never leads
    /// it; a write that fails leaves it lagging, which is harmless.
    fn write_reach(&mut self, id: &Id, seq: u64) {
        let (path, temp) = (reach_path(id), format!("{}/.{REACH}.tmp", work_dir(id)));
        let written = self.fs.write_temp(&temp, format!("{seq}\n").as_bytes());
        if written.is_ok() && self.fs.rename(&temp, &path).is_err() {
            let _ = self.fs.remove(&temp);
        }
    }

    /// How far `id`'s history reached, as its witness ([`REACH`]) says; `None` when there is
    /// none or it does not read whole (a crash tore it), which says nothing. A reader that
    /// others may be appending under takes it *before* the history: the witness is written
    /// only after its event is, so the history read after it holds at least as many events
    /// unless it was cut, however the two reads interleave with an append.
    pub(crate) fn reach(&mut self, id: &Id) -> Result<Option<u64>, RecordError> {
        let Some(bytes) = self.read_bytes(&reach_path(id))? else { return Ok(None) };
        Ok(std::str::from_utf8(&bytes)
            .ok()
            .and_then(|t| t.strip_suffix('\n'))
            .and_then(|t| t.parse::<u64>().ok()))
    }

    /// Refuses `id`'s history when it holds `len` events but its witness said (`reached`, from
    /// [`Ledger::reach`]) that it reached further: the file was cut, at a line boundary (a cut
    /// within a line is a torn tail, or damage its checksum shows).
    pub(crate) fn check_reach(
        &mut self,
        id: &Id,
        reached: Option<u64>,
        len: u64,
    ) -> Result<(), RecordError> {
        match reached {
            Some(reached) if reached > len => Err(RecordError::invalid(
                self.shown(&format!("{}/events.jsonl", work_dir(id))),
                format!(
                    "the history was cut: it holds {len} events, but it reached event {reached} \
                     ({}); nothing is read from or appended to a history that lost events: \
                     restore the file from a backup",
                    self.shown(&reach_path(id))
                ),
            )),
            _ => Ok(()),
        }
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
    pub(crate) fn write_record_bytes(
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

/// The file beside an item's history that witnesses how far it reached: the sequence number
/// of its last event, and a newline. A cut at a line boundary leaves a history that verifies
/// line by line; only a record kept elsewhere can tell it lost its end.
pub const REACH: &str = "events.reach";

fn reach_path(id: &Id) -> String {
    format!("{}/{REACH}", work_dir(id))
}
