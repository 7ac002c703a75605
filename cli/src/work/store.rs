//! The work ledger on disk: `.harnery/work/<id>/intent.json` (written once) and `events.jsonl`
//! (a journal of work events), read into projections with every prerequisite projected once
//! per read, however many dependents it has.

use crate::real_clock::RealClock;
use crate::real_fs::RealFs;
use harn_core::env::{Clock, Fs};
use harn_core::ids::Id;
use harn_core::journal::{self, JournalWriter};
use harn_core::time::WallTime;
use harn_core::work::events::{validate_history, EventKind, WorkEvent, EVENT_VERSION};
use harn_core::work::projection::{project, AttemptStatus, Inputs, Prerequisite};
use harn_core::work::{Projection, WorkIntent};
use harn_core::workflow::run::{inspect, Proof, RunManifest};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The work ledger of one coordination root.
pub struct Store {
    root: PathBuf,
    fs: RealFs,
    clock: RealClock,
    /// History locks this process holds (a lock lasts as long as `fs`).
    held: std::collections::BTreeSet<String>,
}

/// A work item as read: its intent, history and projection.
#[derive(Clone, Debug)]
pub struct Item {
    /// The intent.
    pub intent: WorkIntent,
    /// The history.
    pub events: Vec<WorkEvent>,
    /// The projection.
    pub projection: Projection,
}

/// Why a read or a write failed, naming the file.
#[derive(Debug)]
pub struct StoreError(pub String);

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// How long a writer waits for another writer of the same item's history.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

fn dir_of(id: &Id) -> String {
    format!(".harnery/work/{id}")
}

/// Where a workflow run's records live.
pub fn run_dir(run_id: &Id) -> String {
    format!(".harnery/workflows/{run_id}")
}

/// The run lease: held (flock) by the process running one of the item's attempts.
fn run_lock(id: &Id) -> String {
    format!("{}/run.lock", dir_of(id))
}

impl Store {
    /// The ledger under `root`.
    pub fn new(root: &Path) -> Store {
        let (fs, clock, held) =
            (RealFs::new(root.to_owned()), RealClock::new(), Default::default());
        Store { root: root.to_owned(), fs, clock, held }
    }

    /// The coordination root this ledger lives under.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Wall time now.
    pub fn now(&self) -> WallTime {
        self.clock.wall()
    }

    /// Every work id, sorted.
    pub fn ids(&mut self) -> Result<Vec<Id>, StoreError> {
        self.list_ids(".harnery/work")
    }

    /// The valid ids among the names in directory `dir`, sorted.
    pub fn list_ids(&mut self, dir: &str) -> Result<Vec<Id>, StoreError> {
        let names = self.fs.list(dir).map_err(|e| StoreError(e.to_string()))?;
        Ok(names.iter().filter_map(|n| Id::new(n).ok()).collect())
    }

    /// True when a work item with this id exists.
    pub fn exists(&mut self, id: &Id) -> bool {
        matches!(self.fs.read(&format!("{}/intent.json", dir_of(id))), Ok(Some(_)))
    }

    /// The intent of `id`; `None` when there is no such item.
    pub fn intent(&mut self, id: &Id) -> Result<Option<WorkIntent>, StoreError> {
        let path = format!("{}/intent.json", dir_of(id));
        let Some(bytes) = self.fs.read(&path).map_err(|e| StoreError(e.to_string()))? else {
            return Ok(None);
        };
        let intent: WorkIntent = serde_json::from_slice(&bytes).map_err(|e| {
            StoreError(format!("{}:{}: {e}", self.root.join(&path).display(), e.line()))
        })?;
        intent
            .validate()
            .map_err(|e| StoreError(format!("{}: {e}", self.root.join(&path).display())))?;
        if intent.id != *id {
            return Err(StoreError(format!(
                "{}: id is {}, not {id}",
                self.root.join(&path).display(),
                intent.id
            )));
        }
        Ok(Some(intent))
    }

    /// The verified history of `id`.
    pub fn events(&mut self, id: &Id) -> Result<Vec<WorkEvent>, StoreError> {
        let path = format!("{}/events.jsonl", dir_of(id));
        let shown = self.root.join(&path).display().to_string();
        let bytes = self.fs.read(&path).map_err(|e| StoreError(e.to_string()))?.unwrap_or_default();
        let read = journal::parse_as::<WorkEvent>(&shown, &bytes)
            .map_err(|e| StoreError(e.to_string()))?;
        // A torn final line is an append a crash interrupted: it never happened. Readers
        // ignore it and the next append cuts it off (DESIGN.md §5).
        let events: Vec<WorkEvent> = read.records.into_iter().map(|r| r.body).collect();
        validate_history(id, &events).map_err(|e| StoreError(format!("{shown}: {e}")))?;
        Ok(events)
    }

    /// Reads `id` and projects it, projecting its prerequisites through `known` (filled as it
    /// goes, so each item is read and projected once per command).
    pub fn read(
        &mut self,
        id: &Id,
        known: &mut BTreeMap<Id, Result<Item, String>>,
    ) -> Result<Item, StoreError> {
        if let Some(done) = known.get(id) {
            return done.clone().map_err(StoreError);
        }
        let result = self.read_uncached(id, known, 0);
        known.insert(id.clone(), result.as_ref().map(Clone::clone).map_err(|e| e.0.clone()));
        result
    }

    fn read_uncached(
        &mut self,
        id: &Id,
        known: &mut BTreeMap<Id, Result<Item, String>>,
        depth: usize,
    ) -> Result<Item, StoreError> {
        let intent = self.intent(id)?.ok_or_else(|| StoreError(format!("no work item {id}")))?;
        let events = self.events(id)?;
        if events.is_empty() {
            // Creation writes both or neither, so this was made by hand; appending to it would
            // only bury the missing creation under more events.
            let path = self.root.join(format!("{}/events.jsonl", dir_of(id)));
            return Err(StoreError(format!("{}: no work.created event", path.display())));
        }
        let mut prerequisites = BTreeMap::new();
        for dep in &intent.dependencies {
            if depth > 1000 {
                return Err(StoreError(format!("{id}: the dependency chain is deeper than 1000")));
            }
            let view = match known.get(dep) {
                Some(done) => done.as_ref().ok().map(prerequisite),
                None => {
                    let result = self.read_uncached(dep, known, depth + 1);
                    let view = result.as_ref().ok().map(prerequisite);
                    known.insert(dep.clone(), result.map_err(|e| e.0));
                    view
                }
            };
            prerequisites.insert(dep.clone(), view);
        }
        let runner_live = self.runner_live(id);
        let mut attempts = Vec::new();
        for e in &events {
            if let EventKind::AttemptStarted { run_id, attempt, .. } = &e.kind {
                let (manifest, proof) = self.run_records(run_id)?;
                // Only a run that ended without proof and has no runner may be parked.
                let parked = match (&manifest, &proof, runner_live) {
                    (Some(_), None, false) => match self.parked_on(run_id) {
                        Ok(parked) => parked,
                        Err(_) => {
                            attempts.push(AttemptStatus::TranscriptUnreadable);
                            continue;
                        }
                    },
                    _ => None,
                };
                let parked = parked.as_ref().map(|(a, decided)| (a.as_str(), *decided));
                let records = (manifest.as_ref(), proof.as_ref());
                let status = inspect(id, run_id, *attempt, records, parked, runner_live)
                    .map_err(|e| StoreError(format!("work item {id}: {e}")))?;
                attempts.push(status);
            }
        }
        let inputs = Inputs {
            intent: &intent,
            events: &events,
            attempts: &attempts,
            prerequisites: &prerequisites,
            lease_held_elsewhere: false,
        };
        let projection = project(&inputs);
        Ok(Item { intent, events, projection })
    }

    /// A fresh id: `PREFIX-<UTC time>-<6 hex>`.
    pub fn new_id(&self, prefix: &str) -> Id {
        let now = self.now().0;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let salt =
            harn_core::hash::fnv64(format!("{now}-{nanos}-{}", std::process::id()).as_bytes());
        let stamp = crate::harness::ledger::utc(now).replace([' ', ':', '.'], "-");
        Id::new(&format!("{prefix}-{stamp}-{:06x}", salt & 0xff_ffff))
            .expect("a valid generated id")
    }

    /// A fresh workflow run id.
    pub fn new_run_id(&self) -> Id {
        self.new_id("wf")
    }

    /// Opens a journal for appending, cutting a torn tail.
    pub fn open_journal(&mut self, path: &str) -> Result<JournalWriter, StoreError> {
        JournalWriter::open_tail(&mut self.fs, path)
            .map(|(w, _)| w)
            .map_err(|e| StoreError(e.to_string()))
    }

    /// Appends one synced line to a journal opened with [`Store::open_journal`].
    pub fn append_journal(
        &mut self,
        path: &str,
        writer: &mut JournalWriter,
        body: &impl serde::Serialize,
    ) -> Result<(), StoreError> {
        let now = self.clock.wall();
        writer
            .append(&mut self.fs, now, std::slice::from_ref(body))
            .map(drop)
            .map_err(|e| StoreError(format!("{path}: {e}")))
    }

    /// Appends a `work.reconciled` receipt when the projected state, reason or next action
    /// differs from the last receipt, unless another process is running an attempt (its
    /// runner appends one when it ends); returns the item and whether a receipt was written.
    pub fn reconcile(&mut self, id: &Id, actor: &str) -> Result<(Item, bool), StoreError> {
        let lock = self.lock_events(id)?;
        let item = self.read_uncached(id, &mut BTreeMap::new(), 0)?;
        if self.runner_live(id) {
            return Ok((item, false));
        }
        let p = &item.projection;
        let state = serde_json::json!(p.state).as_str().unwrap_or("").to_owned();
        let next_action = serde_json::json!(p.next_action).as_str().unwrap_or("").to_owned();
        let last = item.events.iter().rev().find_map(|e| match &e.kind {
            EventKind::Reconciled { state, next_action } => {
                Some((state.clone(), next_action.clone(), e.reason.clone()))
            }
            _ => None,
        });
        if last == Some((state.clone(), next_action.clone(), Some(p.reason.clone()))) {
            return Ok((item, false));
        }
        let receipt = EventKind::Reconciled { state, next_action };
        self.append(&lock, receipt, actor, Some(item.projection.reason.clone()))?;
        drop(lock);
        Ok((self.read_uncached(id, &mut BTreeMap::new(), 0)?, true))
    }

    /// Takes `id`'s run lease for the life of this store, or says who holds it.
    pub fn lock_run(&mut self, id: &Id) -> Result<(), StoreError> {
        let lock = run_lock(id);
        if self.held.contains(&lock) {
            return Ok(());
        }
        if !self.fs.try_lock(&lock).map_err(|e| StoreError(e.to_string()))? {
            return Err(StoreError(format!("work item {id} is being run by another process")));
        }
        self.held.insert(lock);
        Ok(())
    }

    /// True while another process holds `id`'s run lease (this one's own hold does not count,
    /// so a runner re-reads its item as others would see it without it).
    fn runner_live(&mut self, id: &Id) -> bool {
        let lock = run_lock(id);
        if self.held.contains(&lock) {
            return false;
        }
        // Probing takes the lock for an instant, so a runner starting at that very instant
        // may be told the item is busy; it never makes a dead runner look alive.
        match std::fs::File::open(self.root.join(&lock)) {
            Ok(file) => matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock)),
            Err(_) => false,
        }
    }

    /// The bytes of one of a run's records, when present.
    pub fn run_record_bytes(
        &mut self,
        run_id: &Id,
        name: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        self.fs.read(&format!("{}/{name}", run_dir(run_id))).map_err(|e| StoreError(e.to_string()))
    }

    /// A run's manifest and proof, each when present.
    pub fn run_records(
        &mut self,
        run_id: &Id,
    ) -> Result<(Option<RunManifest>, Option<Proof>), StoreError> {
        let dir = run_dir(run_id);
        let manifest = self.read_record(&format!("{dir}/run.json"))?;
        Ok((manifest, self.read_record(&format!("{dir}/proof.json"))?))
    }

    /// The bytes of a file under the root, when present.
    pub fn read_bytes(&mut self, path: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.fs.read(path).map_err(|e| StoreError(e.to_string()))
    }

    /// A JSON record under the root, when present; a malformed one names file and line.
    pub fn read_record<T: serde::de::DeserializeOwned>(
        &mut self,
        path: &str,
    ) -> Result<Option<T>, StoreError> {
        let Some(bytes) = self.fs.read(path).map_err(|e| StoreError(e.to_string()))? else {
            return Ok(None);
        };
        let shown = self.root.join(path);
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| StoreError(format!("{}:{}: {e}", shown.display(), e.line())))
    }

    /// Writes a file under the root whole (temporary name, fsync, rename).
    pub fn write_file(&mut self, path: &str, bytes: &[u8]) -> Result<(), StoreError> {
        harn_core::atomic::atomic_replace(&mut self.fs, path, bytes)
            .map_err(|e| StoreError(e.to_string()))
    }

    /// Writes a run record once: create-new, fsync, directory fsync. Returns its bytes.
    pub fn write_run_record(
        &mut self,
        run_id: &Id,
        name: &str,
        record: &impl serde::Serialize,
    ) -> Result<Vec<u8>, StoreError> {
        self.write_once(&run_dir(run_id), name, record)
    }

    /// Writes `dir/name` once: temporary name, fsync, hard link into place (refused if it
    /// exists), directory fsync. Returns its bytes.
    pub fn write_once(
        &mut self,
        dir: &str,
        name: &str,
        record: &impl serde::Serialize,
    ) -> Result<Vec<u8>, StoreError> {
        let err = |e: harn_core::env::FsError| StoreError(e.to_string());
        self.fs.create_dir_all(dir).map_err(err)?;
        let mut bytes = serde_json::to_vec_pretty(record).expect("run records serialize");
        bytes.push(b'\n');
        // Written whole under a temporary name, then linked into place: a crash never leaves
        // a partial record that would make every later read of the item fail.
        let temp = format!("{dir}/.{name}.{}.tmp", std::process::id());
        let path = format!("{dir}/{name}");
        self.fs.write_temp(&temp, &bytes).map_err(err)?;
        self.fs.sync_file(&temp).map_err(err)?;
        let (full_temp, full) = (self.root.join(&temp), self.root.join(&path));
        let linked = std::fs::hard_link(&full_temp, &full);
        let _ = std::fs::remove_file(&full_temp);
        linked.map_err(|e| StoreError(format!("{}: {e}", full.display())))?;
        self.fs.sync_dir(dir).map_err(err)?;
        Ok(bytes)
    }

    /// Creates a work item whole or not at all: the intent and its `work.created` event are
    /// written and synced in a staging directory that is then renamed into place, so a crash
    /// never leaves an intent without its first event. Refused if the item exists.
    pub fn create(&mut self, intent: &WorkIntent, actor: &str) -> Result<(), StoreError> {
        let err = |e: harn_core::env::FsError| StoreError(e.to_string());
        let (parent, dir) = (".harnery/work", dir_of(&intent.id));
        let exists = || StoreError(format!("work item {} already exists", intent.id));
        if self.root.join(&dir).symlink_metadata().is_ok() {
            return Err(exists());
        }
        self.fs.create_dir_all(parent).map_err(err)?;
        // Names starting with '.' are never ids, so a staging directory is never listed.
        let staging = format!("{parent}/.new-{}-{}", intent.id, std::process::id());
        let _ = std::fs::remove_dir_all(self.root.join(&staging)); // a crashed namesake's
        let written = self.write_staged(&staging, intent, actor);
        let renamed = written.and_then(|()| self.fs.rename(&staging, &dir).map_err(err));
        if let Err(e) = renamed {
            let _ = std::fs::remove_dir_all(self.root.join(&staging));
            let taken = self.root.join(&dir).symlink_metadata().is_ok();
            return Err(if taken { exists() } else { e });
        }
        self.fs.sync_dir(parent).map_err(err)
    }

    fn write_staged(
        &mut self,
        staging: &str,
        intent: &WorkIntent,
        actor: &str,
    ) -> Result<(), StoreError> {
        let err = |e: harn_core::env::FsError| StoreError(e.to_string());
        self.fs.create_dir_all(staging).map_err(err)?;
        let mut bytes = serde_json::to_vec_pretty(intent).expect("intents serialize");
        bytes.push(b'\n');
        let path = format!("{staging}/intent.json");
        self.fs.create_new(&path, &bytes).map_err(err)?;
        self.fs.sync_file(&path).map_err(err)?;
        let events = format!("{staging}/events.jsonl");
        let (mut writer, _) = JournalWriter::open_tail(&mut self.fs, &events)
            .map_err(|e| StoreError(e.to_string()))?;
        let event = self.event(&intent.id, writer.next_seq(), EventKind::Created, actor, None);
        writer.append(&mut self.fs, event.ts, &[event]).map_err(|e| StoreError(e.to_string()))?;
        self.fs.sync_dir(staging).map_err(err)
    }

    fn event(
        &self,
        id: &Id,
        seq: u64,
        kind: EventKind,
        actor: &str,
        reason: Option<String>,
    ) -> WorkEvent {
        WorkEvent {
            schema_version: EVENT_VERSION,
            work_id: id.clone(),
            seq,
            ts: self.clock.wall(),
            actor: actor.to_owned(),
            reason,
            kind,
        }
    }

    /// Takes `id`'s history lock (flock on `events.lock`), waiting a little for another
    /// writer. Hold it across a read, a decision and the append it leads to, so no other
    /// writer changes the history in between; dropping it releases it.
    pub fn lock_events(&self, id: &Id) -> Result<EventsLock, StoreError> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = self.root.join(format!("{}/events.lock", dir_of(id)));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| StoreError(format!("{}: {e}", path.display())))?;
        let started = std::time::Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(EventsLock { _file: file, id: id.clone() }),
                Err(std::fs::TryLockError::WouldBlock) if started.elapsed() < LOCK_WAIT => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(StoreError(format!(
                        "work item {id} is being written by another process"
                    )));
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(StoreError(format!("{}: {e}", path.display())));
                }
            }
        }
    }

    /// Takes `id`'s history lock, then reads it: for a decision that ends in an append.
    pub fn lock_and_read(&mut self, id: &Id) -> Result<(EventsLock, Item), StoreError> {
        if !self.exists(id) {
            return Err(StoreError(format!("no work item {id}")));
        }
        let lock = self.lock_events(id)?;
        let item = self.read(id, &mut BTreeMap::new())?;
        Ok((lock, item))
    }

    /// Appends one event to `id`'s history with the next sequence number, under its lock.
    pub fn append(
        &mut self,
        lock: &EventsLock,
        kind: EventKind,
        actor: &str,
        reason: Option<String>,
    ) -> Result<(), StoreError> {
        let id = lock.id.clone();
        let path = format!("{}/events.jsonl", dir_of(&id));
        let (mut writer, _) =
            JournalWriter::open_tail(&mut self.fs, &path).map_err(|e| StoreError(e.to_string()))?;
        let event = self.event(&id, writer.next_seq(), kind, actor, reason);
        writer
            .append(&mut self.fs, event.ts, &[event])
            .map(drop)
            .map_err(|e| StoreError(e.to_string()))
    }
}

/// A held history lock; see [`Store::lock_events`].
pub struct EventsLock {
    _file: std::fs::File,
    id: Id,
}

fn prerequisite(item: &Item) -> Prerequisite {
    Prerequisite { state: item.projection.state, accepted_seq: item.projection.accepted_seq }
}
