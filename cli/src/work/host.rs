//! The host of one run segment for `harn work run`: spawns the workflow in its confinement
//! and cgroup, relays its lines, exit and agent calls to the core's segment driver
//! (`harn_core::work::segment::driver`), and carries out what the driver decides (records,
//! replies, calls, signals, a park). The order and the rules are the driver's.

use super::agent_call::CallGroups;
use super::calls::Calls;
use super::confine::{Confine, Temp};
use super::hold::RunHold;
pub use super::inbox::HostEvent;
use super::process::{
    kill_group, kill_groups, program, read_lines, send, signal_groups, spawn, writer, Groups,
};
use crate::os::guarded::Before;
use crate::os::store::{run_dir, Store, StoreError};
use harn_core::env::Clock;
use harn_core::error::RecordError;
use harn_core::ids::Id;
use harn_core::journal::JournalWriter;
use harn_core::limits::LimitReached;
use harn_core::work::approval::ApprovalRequest;
use harn_core::work::containment::guard::Guard;
use harn_core::work::containment::{self, Containment, Need};
use harn_core::work::live::LiveRun;
use harn_core::work::policy::Verdict;
use harn_core::work::run::{Parked, RunFold, RunManifest};
use harn_core::work::segment::driver::{self, Call, SegmentEvent, SegmentSignal, SpawnFailed};
use harn_core::work::segment::Reach;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::sync::{mpsc, Arc, Mutex};
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
    let hold = RunHold::create(store.root(), &m.run_id, m.resource_limits.as_ref());
    // What the run must not change, looked at before it starts and again once everything it
    // started is gone: a change a machine could not prevent is recorded, never missed.
    let workspace = m.cwd.as_deref().map_or_else(|| store.root().to_owned(), Into::into);
    let guarded = crate::os::guarded::find(store.root(), &workspace, Some(&m.script.path));
    let cancel = CancelWatch::new(store, m);
    let mut host = CliSegment {
        store,
        m,
        hold,
        workspace,
        guarded,
        before: None,
        transcript: None,
        cancel,
        clock: crate::os::clock::RealClock::new(),
        live: None,
        answers: BTreeMap::new(),
        interrupted: None,
    };
    driver::run_segment(&mut host, m, start, fold)
}

/// Longest wait, once a run parks on an agent's tool call, for the agent to end its
/// cancelled turn before the segment's processes are killed.
const PARK_GRACE: Duration = Duration::from_secs(5);

/// What a spawned workflow keeps alive until the segment ends. Fields drop in this order:
/// the groups are killed before the children's tracking forgets them.
struct Spawned {
    groups: Groups,
    _registered: crate::os::children::Registered,
    _tracked: crate::os::children::Tracked,
    _temp: Temp,
    stdin: mpsc::Sender<Vec<u8>>,
    tx: mpsc::SyncSender<HostEvent>,
    events: mpsc::Receiver<HostEvent>,
    calls: Calls,
}

/// The segment's host: the store, the run's hold of its processes, and what it spawned.
struct CliSegment<'a> {
    store: &'a mut Store,
    m: &'a RunManifest,
    hold: RunHold,
    workspace: std::path::PathBuf,
    guarded: Guard,
    before: Option<Before>,
    transcript: Option<Transcript>,
    cancel: CancelWatch,
    clock: crate::os::clock::RealClock,
    live: Option<Spawned>,
    /// The answer each agent's pending tool request waits for.
    answers: BTreeMap<String, mpsc::Sender<(Verdict, Vec<String>)>>,
    /// The stop hook waiting for its record.
    interrupted: Option<mpsc::Sender<()>>,
}

impl CliSegment<'_> {
    fn live(&self) -> &Spawned {
        self.live.as_ref().expect("the driver asks this only of a spawned workflow")
    }
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
            cgroup: self.hold.leaf.as_ref().map(|l| l.display().to_string()),
            started_at: self.store.now(),
            planning: self.m.planning.is_some(),
        };
        if let Err(e) = self.store.ledger().begin_live(&live) {
            self.hold.end();
            return Err(StoreError::Unstarted(e));
        }
        self.before = Some(crate::os::guarded::before(&self.guarded, &self.workspace));
        Ok(())
    }

    fn end(&mut self, _: &Result<SegmentEnd, StoreError>) -> Result<(), StoreError> {
        // Whatever the segment started goes, however it ended, before its record does.
        self.live = None;
        self.hold.end();
        if let Some(before) = &self.before {
            let (run, work) = (self.m.run_id.as_str(), self.m.work_id.as_str());
            if let Err(e) = crate::os::guarded::record_changes(self.store, run, work, before) {
                errln!("harn: warning: what run {run} changed was not recorded: {e}");
            }
        }
        self.store.ledger().end_live(&self.m.run_id)?;
        Ok(())
    }

    fn earlier(&mut self) -> Vec<Value> {
        self.store.ledger().transcript(&self.m.run_id).unwrap_or_default()
    }

    fn spawn(&mut self) -> Result<Result<Map<String, Value>, SpawnFailed>, StoreError> {
        let (store, m) = (&mut *self.store, self.m);
        self.transcript = Some(Transcript::open(store, &m.run_id)?);
        let confined = confinement(store, m, &self.hold, &self.guarded);
        let spawned = match &confined {
            Ok((confine, _, _)) => spawn(store, m, confine),
            Err(e) => Err(std::io::Error::other(e.to_string())),
        };
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                let missing = e.kind() == std::io::ErrorKind::NotFound;
                let (error, program) = (e.to_string(), program(m).to_owned());
                return Ok(Err(SpawnFailed { error, program, missing }));
            }
        };
        let (confine, temp, contained) = confined.expect("spawned, so confined as planned");
        let pgid = child.id() as i32;
        let tracked = crate::os::children::track(pgid);
        let agents = Arc::new(Mutex::new(CallGroups::default()));
        // However the segment ends, the workflow's group and its calls' groups go.
        let groups = Groups { workflow: pgid, agents: agents.clone() };
        let stdin = writer(child.stdin.take().expect("stdin is piped"));
        // Bounded, so a workflow that floods its stdout is slowed down rather than buffered.
        let (tx, events) = mpsc::sync_channel(256);
        let hook_tx = tx.clone();
        let registered = crate::os::children::register_run(
            pgid,
            m.run_id.as_str(),
            Box::new(move |by: &str| {
                // Waits a little for the record, never long: the stop has a grace to keep.
                let (ack, acked) = mpsc::channel();
                if hook_tx.try_send(HostEvent::Interrupting(by.to_owned(), ack)).is_ok() {
                    let _ = acked.recv_timeout(Duration::from_secs(1));
                }
            }),
        );
        read_lines(child.stdout.take().expect("stdout is piped"), tx.clone());
        let waiter = tx.clone();
        std::thread::spawn(move || {
            let status = child.wait();
            let _ = waiter.send(HostEvent::Exited(status));
        });
        let hold = &self.hold;
        let held = json!({ "holding": hold.holding(), "cgroup": hold.leaf, "why": hold.why_not });
        let mut fields = Map::new();
        fields.insert("pid".into(), json!(pgid));
        fields.insert("held".into(), held);
        fields.insert("containment".into(), json!(contained));
        self.live = Some(Spawned {
            groups,
            _registered: registered,
            _tracked: tracked,
            _temp: temp,
            stdin,
            tx,
            events,
            calls: Calls::new(agents, confine),
        });
        Ok(Ok(fields))
    }

    fn record(&mut self, body: Value) -> Result<(), StoreError> {
        let transcript = match &mut self.transcript {
            Some(t) => t,
            None => self.transcript.insert(Transcript::open(self.store, &self.m.run_id)?),
        };
        transcript.record(self.store, body)
    }

    fn send(&mut self, line: &Value) {
        send(&self.live().stdin, line);
    }

    fn next(
        &mut self,
        wake: Option<harn_core::time::Instant>,
    ) -> Result<Option<SegmentEvent>, StoreError> {
        let events = &self.live().events;
        let event = match wake {
            None => events.recv().expect("the host holds a sender"),
            Some(wake) => {
                let wait = Duration::from_nanos(wake.0.saturating_sub(self.clock.now().0));
                match events.recv_timeout(wait) {
                    Ok(event) => event,
                    Err(_) => return Ok(None),
                }
            }
        };
        Ok(Some(match event {
            HostEvent::Line(msg) => SegmentEvent::Line(msg),
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
                self.answers.insert(call.clone(), answer);
                SegmentEvent::ToolAsk(call, request)
            }
        }))
    }

    fn signal(&mut self, signal: SegmentSignal) {
        use rustix::process::Signal as Sig;
        let live = self.live();
        let (pgid, agents) = (live.groups.workflow, &live.calls.agents);
        match signal {
            SegmentSignal::Term(reach) => {
                signal_groups(pgid, agents, Sig::TERM);
                if reach == Reach::Everything {
                    self.hold.term();
                }
            }
            SegmentSignal::Kill(reach) => {
                kill_groups(pgid, agents);
                if reach == Reach::Everything {
                    self.hold.end();
                }
            }
            SegmentSignal::Leftovers => kill_group(pgid),
        }
    }

    fn look_for_cancel(&mut self) -> Result<Option<String>, StoreError> {
        Ok(self.cancel.look(self.store))
    }

    fn start_call(&mut self, call: Call) -> Result<(), StoreError> {
        let live = self.live();
        live.calls.start(self.store, self.m, &live.tx, call);
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
        if let Some(answer) = self.answers.remove(call) {
            let _ = answer.send((verdict, rules));
        }
    }

    /// Waits (at most [`PARK_GRACE`]) for `call` to end after its turn was cancelled for a
    /// park. Its end is not recorded: the call is asked again, and continues its session,
    /// when the ruling resumes the run.
    fn settle(&mut self, call: &str) {
        let events = &self.live().events;
        let until = std::time::Instant::now() + PARK_GRACE;
        while let Some(left) = until.checked_duration_since(std::time::Instant::now()) {
            match events.recv_timeout(left) {
                Ok(HostEvent::AgentDone(id, _)) if id == call => return,
                // Another ask of the cancelled turn is refused; anything else waits.
                Ok(HostEvent::ToolAsk(_, _, answer)) => {
                    drop(answer.send((Verdict::Deny, Vec::new())))
                }
                Ok(_) => {}
                Err(_) => return,
            }
        }
    }

    fn interrupt_recorded(&mut self) {
        if let Some(ack) = self.interrupted.take() {
            let _ = ack.send(());
        }
    }

    fn limits_reached(&mut self) -> Vec<LimitReached> {
        self.hold.bounded.reached()
    }
}

/// How this segment's children are confined: the core's plan over what the machine offers,
/// for the run's workspace, a fresh private `TMPDIR` and the writable paths its manifest
/// froze. A run whose policy requires containment is not spawned where it cannot be had; a
/// run started before harn confined runs resumes as it started, unconfined.
fn confinement(
    store: &Store,
    m: &RunManifest,
    hold: &RunHold,
    guarded: &Guard,
) -> Result<(Confine, Temp, Containment), String> {
    let temp = Temp::create(m.run_id.as_str())?;
    let root = store.root().display().to_string();
    let planned = m.containment.clone();
    let off = match &planned {
        None => Some("a run started before harn confined runs".to_owned()),
        Some(c) if c.turned_off => Some("--no-containment".to_owned()),
        Some(_) => None,
    };
    let planned = planned.unwrap_or_default();
    let need = Need {
        workspace: m.cwd.clone().unwrap_or_else(|| root.clone()),
        root,
        temp: temp.0.display().to_string(),
        writable: planned.writable.clone(),
        protected: crate::os::guarded::existing(&guarded.readonly),
        off,
        read_only: m.planning.is_some(),
    };
    let plan = containment::plan(&need, &super::confine::offer());
    super::confine::make_missing(&plan, &need.writable);
    if let Some(policy) = &m.policy {
        containment::check(policy.policy.containment, &plan.record)?;
    }
    let tmpfs = m.resource_limits.and_then(|l| l.tmpfs);
    // Without a cgroup to hold the task limit, the rlimit that exists bounds a fork bomb.
    let nproc = m.resource_limits.and_then(|l| l.tasks).filter(|_| !hold.bounded.holds_tasks());
    let mut unenforced = hold.bounded.unenforced.clone();
    if let Some(n) = nproc {
        unenforced.push(format!(
            "tasks limit: RLIMIT_NPROC {n} instead (every process of the user counts)"
        ));
    }
    let confine = Confine::prepare(&plan, hold.leaf.clone(), Some(temp.0.clone()), tmpfs)?
        .keeping(planned.env.clone())
        .joining(hold.bounded.joins().to_vec())
        .limiting_processes(nproc);
    let record = Containment {
        holding: hold.holding(),
        holding_why: hold.why_not.clone(),
        limits: hold.bounded.summary(),
        unenforced,
        writable: planned.writable,
        env: planned.env,
        turned_off: planned.turned_off,
        ..plan.record
    };
    Ok((confine, temp, record))
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
