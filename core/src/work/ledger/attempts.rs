//! The durable steps of an attempt: start (and its claim), resume, park, the proof at its
//! finish, a planning run's finish, and a ruling on an approval it waits on.

use super::*;

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
            Refusal::NotNow(crate::work::next::with_next(id, &item.projection, why))
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
        let feedback = feedback_context(&item.events);
        let context =
            manifest.context_for(&item.intent, AttemptContext { prior, findings, feedback });
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

    /// What is wrong with `item`'s attempt claims (`attempts/N`, each naming the run that
    /// started as attempt N, written before `attempt.started`): for each attempt its history
    /// holds, the claim must be there and name that run. The file and why, for each one that
    /// is not.
    pub fn claims_disagree(&mut self, item: &Item) -> Result<Vec<(String, String)>, RecordError> {
        let id = &item.intent.id;
        let mut found = Vec::new();
        for e in &item.events {
            let EventKind::AttemptStarted { run_id, attempt, .. } = &e.kind else { continue };
            let claim = attempt_claim(id, *attempt);
            let shown = self.shown(&claim);
            let named = self.read_bytes(&claim)?;
            let named = named.as_deref().map(|b| String::from_utf8_lossy(b).trim().to_owned());
            match named {
                None => found.push((
                    shown,
                    format!(
                        "missing: the claim of attempt {attempt} (run {run_id}) was deleted; \
                         write `{run_id}` into it to restore it"
                    ),
                )),
                Some(n) if n == run_id.as_str() => {}
                Some(n) if Id::new(&n).is_err() => found.push((
                    shown,
                    format!(
                        "does not name a run (attempt {attempt} is run {run_id}): write \
                         `{run_id}` into it to restore it"
                    ),
                )),
                Some(n) => found.push((
                    shown,
                    format!(
                        "names run {n}, but attempt {attempt} is run {run_id}: write `{run_id}` \
                         into it to restore it"
                    ),
                )),
            }
        }
        Ok(found)
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
    pub(crate) fn resume_attempt(
        &mut self,
        item: &Item,
        actor: &str,
        now: WallTime,
    ) -> Result<(RunManifest, ResumeState, Value), Refusal> {
        let p = &item.projection;
        let id = &item.intent.id;
        let approval = p.approval_id.clone().unwrap_or_default();
        if p.next_action != crate::work::NextAction::Resume {
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
            crate::work::Trigger::Retry => self.prior_synopsis(item, &run_id)?,
            crate::work::Trigger::Initial => None,
        };
        let findings = findings_context(&item.events, &item.projection.open_findings);
        let feedback = feedback_context(&item.events);
        let context = AttemptContext { prior, findings, feedback };
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
    pub(crate) fn finish_planning(
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
        crate::work::run::ProcessEnd::EngineFault { fault, code, signal } => {
            serde_json::json!({
                "event": "run.end", "exit_code": code, "signal": signal, "engine_fault": fault,
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
pub(crate) fn attempt_claim(id: &Id, attempt: u32) -> String {
    format!("{}/attempts/{attempt}", work_dir(id))
}
