//! The host of one run segment for `harn work run`: spawns the workflow in its confinement
//! and cgroup, relays its lines, exit and agent calls to the core's segment driver
//! (`harn_core::work::segment::driver`), and carries out what the driver decides (records,
//! replies, calls, signals, a park). The order and the rules are the driver's.

use super::disk::DiskWatch;
use super::hold::RunHold;
pub use super::inbox::HostEvent;
use super::local::{Local, Output};
use super::remote::host::Remote;
use crate::os::guarded::Before;
use crate::os::store::{run_dir, Store, StoreError};
use harn_core::env::Clock;
use harn_core::error::RecordError;
use harn_core::ids::Id;
use harn_core::journal::JournalWriter;
use harn_core::limits::LimitReached;
use harn_core::work::approval::ApprovalRequest;
use harn_core::work::containment::guard::Guard;
use harn_core::work::live::LiveRun;
use harn_core::work::policy::Verdict;
use harn_core::work::run::{Parked, RunFold, RunManifest};
use harn_core::work::segment::driver::{self, Call, SegmentEvent, SegmentSignal, SpawnFailed};
use serde_json::{json, Map, Value};
use std::os::unix::process::ExitStatusExt;
use std::sync::mpsc;
use std::time::Duration;

pub use harn_core::work::attempt::SegmentEnd;

/// Spawns the workflow with `start` as its first line and carries the conversation to the
/// end of this segment. `fold` carries whatever an earlier segment of a parked run left.
/// The segment runs in a cgroup of its own where the machine gives one, and leaves a record
/// of itself under `.harnery/running/` until everything it started is gone, so a host that
/// dies leaves the next runner what to reap.
pub fn run_segment(
    store: &mut Store,
    m: &RunManifest,
    start: &Value,
    fold: RunFold,
) -> Result<SegmentEnd, StoreError> {
    let procs = match &m.cluster {
        Some(cluster) => Procs::There(Box::new(Remote::new(cluster.clone()))),
        None => Procs::Here(Box::new(Local::new(RunHold::create(
            store.root(),
            &m.run_id,
            m.resource_limits.as_ref(),
        )))),
    };
    // What the run must not change, looked at before it starts and again once everything it
    // started is gone: a change a machine could not prevent is recorded, never missed.
    let workspace = m.cwd.as_deref().map_or_else(|| store.root().to_owned(), Into::into);
    let own = m.workspace.as_ref().is_some_and(|w| w.own);
    let guarded = crate::os::guarded::find(store.root(), &workspace, Some(&m.script.path), own);
    let cancel = CancelWatch::new(store, m);
    let mut host = CliSegment {
        store,
        m,
        procs,
        workspace,
        guarded,
        before: None,
        transcript: None,
        cancel,
        clock: crate::os::clock::RealClock::new(),
        interrupted: None,
        live: None,
        disk: disk_watch(m),
    };
    driver::run_segment(&mut host, m, start, fold)
}

/// Where the segment's processes run: on this machine, or as a job step on a cluster's node
/// (which runs a [`Local`] of its own there).
enum Procs {
    Here(Box<Local>),
    There(Box<Remote>),
}

/// The segment's host: the store, the run's hold of its processes, and what it spawned.
struct CliSegment<'a> {
    store: &'a mut Store,
    m: &'a RunManifest,
    procs: Procs,
    workspace: std::path::PathBuf,
    guarded: Guard,
    before: Option<Before>,
    transcript: Option<Transcript>,
    cancel: CancelWatch,
    clock: crate::os::clock::RealClock,
    /// The segment's live record, as begun.
    live: Option<LiveRun>,
    /// The stop hook waiting for its record.
    interrupted: Option<mpsc::Sender<()>>,
    /// The run's disk limit, measured here (a local segment's only).
    disk: Option<DiskWatch>,
}

/// The disk limit of a local segment of `m`, when it has one: its repository of its own is
/// measured (a shared workspace is the person's, not the run's), and its temporary directory
/// once it is made.
fn disk_watch(m: &RunManifest) -> Option<DiskWatch> {
    let max = m.resource_limits.as_ref()?.disk?;
    if m.cluster.is_some() {
        return None;
    }
    let own = m.workspace.as_ref().filter(|w| w.own);
    let paths = own.map(|w| vec![w.path.clone().into(), w.git_dir.clone().into()]);
    Some(DiskWatch::new(max, paths.unwrap_or_default()))
}

impl driver::SegmentHost for CliSegment<'_> {
    type Error = StoreError;

    fn now(&mut self) -> harn_core::time::Instant {
        self.clock.now()
    }

    fn begin(&mut self) -> Result<(), StoreError> {
        let live = LiveRun {
            schema_version: harn_core::work::live::LIVE_VERSION,
            run_id: self.m.run_id.clone(),
            work_id: self.m.work_id.clone(),
            host_pid: std::process::id(),
            cgroup: match &self.procs {
                Procs::Here(local) => local.hold.leaf.as_ref().map(|l| l.display().to_string()),
                Procs::There(_) => None,
            },
            started_at: self.store.now(),
            planning: self.m.planning.is_some(),
            job: None,
        };
        if let Err(e) = self.store.ledger().begin_live(&live) {
            if let Procs::Here(local) = &mut self.procs {
                local.end();
            }
            return Err(StoreError::Unstarted(e));
        }
        // A remote run's files are on its node; the worktree here changes only by the
        // work harn brings back.
        if let Procs::Here(_) = self.procs {
            self.before = Some(crate::os::guarded::before(&self.guarded, &self.workspace));
        }
        self.live = Some(live);
        Ok(())
    }

    fn end(&mut self, _: &Result<SegmentEnd, StoreError>) -> Result<(), StoreError> {
        // Whatever the segment started goes, however it ended, before its record does.
        let brought = match &mut self.procs {
            Procs::Here(local) => {
                let refused = local.network_refused();
                local.end();
                // What the run's proxy refused is the run's record: `run show` lists it.
                for r in refused {
                    let body = serde_json::json!({
                        "event": "network.refused", "host": r.host, "port": r.port,
                        "times": r.times,
                    });
                    if let Err(e) = self.record(body) {
                        errln!("harn: warning: a refused connection was not recorded: {e}");
                    }
                }
                Ok(())
            }
            Procs::There(remote) => remote.end(self.store, self.m),
        };
        if let Some(before) = &self.before {
            let (run, work) = (self.m.run_id.as_str(), self.m.work_id.as_str());
            if let Err(e) = crate::os::guarded::record_changes(self.store, run, work, before) {
                errln!("harn: warning: what run {run} changed was not recorded: {e}");
            }
        }
        self.store.ledger().end_live(&self.m.run_id)?;
        // Work that did not come back is never attested as if it had.
        brought.map_err(|e| StoreError::Os(format!("run {}: {e}", self.m.run_id)))
    }

    fn earlier(&mut self) -> Vec<Value> {
        self.store.ledger().transcript(&self.m.run_id).unwrap_or_default()
    }

    fn spawn(&mut self) -> Result<Result<Map<String, Value>, SpawnFailed>, StoreError> {
        let (store, m) = (&mut *self.store, self.m);
        self.transcript = Some(Transcript::open(store, &m.run_id)?);
        match &mut self.procs {
            Procs::Here(local) => {
                let spawned = local.spawn(store, m, &self.guarded, Output::Lines);
                if let (Some(watch), Some(temp)) = (&mut self.disk, local.temp_dir()) {
                    watch.watch(temp);
                }
                Ok(spawned)
            }
            Procs::There(remote) => {
                let spawned = remote.spawn(store, m)?;
                // The job goes into the live record before anything else happens: a
                // coordinator that dies from here on leaves the next one the job to cancel.
                if let (Some(job), Some(live)) = (&remote.job, &mut self.live) {
                    live.job = Some(job.clone());
                    if let Err(e) = store.ledger().begin_live(live) {
                        errln!(
                            "harn: warning: job {} is not in the run's live record: {e}",
                            job.id
                        );
                    }
                }
                Ok(spawned)
            }
        }
    }

    fn record(&mut self, body: Value) -> Result<(), StoreError> {
        let transcript = match &mut self.transcript {
            Some(t) => t,
            None => self.transcript.insert(Transcript::open(self.store, &self.m.run_id)?),
        };
        transcript.record(self.store, body)
    }

    fn send(&mut self, line: &Value) {
        match &mut self.procs {
            Procs::Here(local) => local.send(line),
            Procs::There(remote) => remote.send(line),
        }
    }

    fn next(
        &mut self,
        wake: Option<harn_core::time::Instant>,
    ) -> Result<Option<SegmentEvent>, StoreError> {
        let wait = wake.map(|w| Duration::from_nanos(w.0.saturating_sub(self.clock.now().0)));
        let local = match &mut self.procs {
            Procs::Here(local) => local,
            Procs::There(remote) => return Ok(remote.next(wait)),
        };
        if let Some(reached) = self.disk.as_mut().and_then(DiskWatch::check) {
            return Ok(Some(SegmentEvent::LimitReached(reached)));
        }
        let wait = match &self.disk {
            Some(watch) => watch.bound(wait),
            None => wait,
        };
        let Some(event) = local.next(wait) else { return Ok(None) };
        Ok(Some(match event {
            HostEvent::Line(msg) => SegmentEvent::Line(msg),
            HostEvent::Raw(_) | HostEvent::Told(_) => {
                unreachable!("a local segment reads lines and has no coordinator")
            }
            HostEvent::Eof => SegmentEvent::OutputEnded,
            HostEvent::Exited(status) => {
                let status =
                    status.map_err(|e| StoreError::Os(format!("waiting for the workflow: {e}")))?;
                SegmentEvent::Exited { code: status.code(), signal: status.signal() }
            }
            HostEvent::Interrupting(by, ack) => {
                self.interrupted = Some(ack);
                SegmentEvent::Interrupting(by)
            }
            HostEvent::AgentDone(id, outcome) => SegmentEvent::AgentDone(id, outcome),
            HostEvent::AgentProgress(id, shown) => SegmentEvent::AgentProgress(id, shown),
            HostEvent::ToolAsk(call, request, answer) => {
                local.awaiting(call.clone(), answer);
                SegmentEvent::ToolAsk(call, request)
            }
        }))
    }

    fn signal(&mut self, signal: SegmentSignal) {
        match &mut self.procs {
            Procs::Here(local) => local.signal(signal),
            Procs::There(remote) => {
                if let Some(record) = remote.signal(signal) {
                    if let Err(e) = self.record(record) {
                        errln!(
                            "harn: warning: the cancel of run {}'s job was not recorded: {e}",
                            self.m.run_id
                        );
                    }
                }
            }
        }
    }

    fn look_for_cancel(&mut self) -> Result<Option<String>, StoreError> {
        Ok(self.cancel.look(self.store))
    }

    fn start_call(&mut self, call: Call) -> Result<(), StoreError> {
        match &mut self.procs {
            Procs::Here(local) => local.start_call(self.store, self.m, call),
            Procs::There(remote) => remote.start_call(call),
        }
        Ok(())
    }

    fn park(
        &mut self,
        parked: &Parked,
    ) -> Result<Result<ApprovalRequest, RecordError>, StoreError> {
        let now = self.store.now();
        Ok(self.store.ledger().park(self.m, parked, now)?)
    }

    fn answer_tool(&mut self, call: &str, verdict: Verdict, rules: Vec<String>) {
        match &mut self.procs {
            Procs::Here(local) => local.answer_tool(call, verdict, rules),
            Procs::There(remote) => remote.answer_tool(call, verdict, rules),
        }
    }

    fn settle(&mut self, call: &str) {
        match &mut self.procs {
            Procs::Here(local) => local.settle(call),
            Procs::There(remote) => remote.settle(call),
        }
    }

    fn interrupt_recorded(&mut self) {
        if let Some(ack) = self.interrupted.take() {
            let _ = ack.send(());
        }
    }

    fn limits_reached(&mut self) -> Vec<LimitReached> {
        match &mut self.procs {
            Procs::Here(local) => local.limits_reached(),
            Procs::There(remote) => remote.limits_reached(),
        }
    }
}

/// How long a cancelled run has after TERM before everything it started is killed.
pub const CANCEL_GRACE: Duration = Duration::from_nanos(harn_core::work::segment::CANCEL_GRACE.0);

/// Finds a `work.cancelled` recorded in the item's history during this run: a cheap look at
/// the file's length whenever the segment asks, a read only when it changed.
struct CancelWatch {
    path: std::path::PathBuf,
    len: u64,
    work_id: harn_core::ids::Id,
    run_id: harn_core::ids::Id,
}

impl CancelWatch {
    fn new(store: &Store, m: &RunManifest) -> CancelWatch {
        let path =
            store.root().join(format!("{}/events.jsonl", harn_core::layout::work_dir(&m.work_id)));
        let len = std::fs::metadata(&path).map_or(0, |md| md.len());
        CancelWatch { path, len, work_id: m.work_id.clone(), run_id: m.run_id.clone() }
    }

    /// Who cancelled the item, when its history now holds a cancel of this run.
    fn look(&mut self, store: &mut Store) -> Option<String> {
        let len = std::fs::metadata(&self.path).map_or(0, |md| md.len());
        if len == self.len {
            return None;
        }
        self.len = len;
        let events = store.events(&self.work_id).ok()?;
        let cancel = harn_core::work::events::cancelled_during(&events, &self.run_id)?;
        Some(cancel.actor.clone())
    }
}

/// The run's transcript journal (`transcript.jsonl`), one synced line per record.
pub struct Transcript {
    writer: JournalWriter,
    run_id: Id,
}

impl Transcript {
    /// Opens the run's transcript for appending (cutting a torn tail).
    pub fn open(store: &mut Store, run_id: &Id) -> Result<Transcript, StoreError> {
        let path = format!("{}/transcript.jsonl", run_dir(run_id));
        let writer = store.open_journal(&path)?;
        Ok(Transcript { writer, run_id: run_id.clone() })
    }

    /// Appends one synced record (and shows it, when progress is live).
    pub fn record(&mut self, store: &mut Store, mut body: Value) -> Result<(), StoreError> {
        body["run_id"] = json!(self.run_id);
        store.append_journal(&mut self.writer, &body)?;
        super::progress::show(&body);
        Ok(())
    }
}
