//! The ledger's reads of a run's records: its manifest and proof, its transcript, where
//! it parked, and each attempt's status as a read of the item inspects it.

use super::*;

impl<F: Fs> Ledger<F> {
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
            && end["engine_fault"].is_null()
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

    /// Refuses to read a run without a proof as lost, parked or never started when other
    /// records say what its own lost: a `run.end` that names the proof it was written after
    /// (the proof was deleted), or an approval the run asked for while its transcript records
    /// no start (the transcript was emptied or deleted). Reads then say the record is damaged,
    /// never a plausible state.
    fn check_unproven(&mut self, run_id: &Id, records: &[Value]) -> Result<(), RecordError> {
        let dir = run_dir(run_id);
        let ended = records.iter().rev().find(|r| r["event"] == "run.end");
        if let Some(digest) = ended.and_then(|r| r["proof_sha256"].as_str()) {
            return Err(RecordError::invalid(
                self.shown(&format!("{dir}/proof.json")),
                format!(
                    "missing, though run {run_id}'s run.end names it (sha256 {}): restore it \
                     from a backup, or move {dir} out of .harnery/workflows to give the \
                     attempt up",
                    digest.get(..12).unwrap_or(digest)
                ),
            ));
        }
        if transcript::started(records) != transcript::Started::Never {
            return Ok(());
        }
        let prefix = format!("{run_id}-p");
        let asked = self.fs.list(crate::layout::APPROVALS).unwrap_or_default();
        if let Some(approval) = asked.iter().find(|a| a.starts_with(&prefix)) {
            return Err(RecordError::invalid(
                self.shown(&format!("{dir}/transcript.jsonl")),
                format!(
                    "records no start, though approval {approval} was asked by run {run_id} \
                     while it ran: the transcript was emptied or deleted; restore it from a \
                     backup"
                ),
            ));
        }
        Ok(())
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
    pub(crate) fn resume_state(&mut self, run_id: &Id) -> Result<ResumeState, RecordError> {
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

    /// Refuses a proof whose transcript is not what it was when the proof was sealed: the
    /// digest of the transcript's sealed prefix must match (what follows it is `run.end`).
    /// Read whole once, at the decision; reads check only the length.
    pub(super) fn check_transcript_sealed(&mut self, run_id: &Id) -> Result<(), RecordError> {
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
    pub(super) fn inspect_attempts(
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
                        self.check_unproven(run_id, &records)?;
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
}
