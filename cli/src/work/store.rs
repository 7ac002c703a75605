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
        let names = self.fs.list(".harnery/work").map_err(|e| StoreError(e.to_string()))?;
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
        if read.torn_tail_bytes > 0 {
            return Err(StoreError(format!("{shown}: the last line is torn (a crash during a write); the next write repairs it")));
        }
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
        // Workflow runs are not implemented yet: an attempt without run records is lost.
        let starts =
            events.iter().filter(|e| matches!(e.kind, EventKind::AttemptStarted { .. })).count();
        let attempts = vec![AttemptStatus::Lost; starts];
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

    /// Appends one event to `id`'s history under its lock, with the next sequence number.
    pub fn append(
        &mut self,
        id: &Id,
        kind: EventKind,
        actor: &str,
        reason: Option<String>,
    ) -> Result<(), StoreError> {
        let dir = dir_of(id);
        let lock = format!("{dir}/events.lock");
        let started = std::time::Instant::now();
        while !self.held.contains(&lock)
            && !self.fs.try_lock(&lock).map_err(|e| StoreError(e.to_string()))?
        {
            if started.elapsed() > LOCK_WAIT {
                return Err(StoreError(format!(
                    "work item {id} is being written by another process"
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        self.held.insert(lock);
        let path = format!("{dir}/events.jsonl");
        let (mut writer, _) =
            JournalWriter::open_tail(&mut self.fs, &path).map_err(|e| StoreError(e.to_string()))?;
        let event = self.event(id, writer.next_seq(), kind, actor, reason);
        writer
            .append(&mut self.fs, event.ts, &[event])
            .map(drop)
            .map_err(|e| StoreError(e.to_string()))
    }
}

fn prerequisite(item: &Item) -> Prerequisite {
    Prerequisite { state: item.projection.state, accepted_seq: item.projection.accepted_seq }
}
