//! The host loop of one run segment: spawns the workflow, records every message, reply,
//! policy check and agent call in the transcript, carries out what the core's fold decides,
//! and ends when the workflow has exited (with a fold for the proof) or when policy parks
//! the run on an approval (with no proof).

use super::agent_call::CallGroups;
use super::calls::Calls;
use super::confine::{Confine, Temp};
use super::hold::RunHold;
pub use super::inbox::HostEvent;
use super::process::{
    kill_group, kill_groups, program, read_lines, send, signal_groups, spawn, writer, Groups,
};
use crate::os::store::{run_dir, Store, StoreError};
use harn_core::env::Clock;
use harn_core::ids::Id;
use harn_core::journal::JournalWriter;
use harn_core::time::Duration as CoreDuration;
use harn_core::work::agent::CallOutcome;
use harn_core::work::approval::ApprovalRequest;
use harn_core::work::containment::guard::Guard;
use harn_core::work::containment::{self, Containment, Need};
use harn_core::work::live::LiveRun;
use harn_core::work::policy::Verdict;
use harn_core::work::protocol::{FromWorkflow, ProtocolError};
use harn_core::work::run::{HostAction, Parked, ProcessEnd, RunFold, RunManifest, ToolJudged};
use harn_core::work::segment::{Reach, Segment, SegmentEffect, SegmentInput};
use harn_core::work::transcript;
use serde_json::{json, Value};
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
    let live = LiveRun {
        schema_version: harn_core::work::live::LIVE_VERSION,
        run_id: m.run_id.clone(),
        work_id: m.work_id.clone(),
        host_pid: std::process::id(),
        cgroup: hold.leaf.as_ref().map(|l| l.display().to_string()),
        started_at: store.now(),
        planning: m.planning.is_some(),
    };
    let began = store.ledger().begin_live(&live);
    // What the run must not change, looked at before it starts and again once everything it
    // started is gone: a change a machine could not prevent is recorded, never missed.
    let workspace = m.cwd.as_deref().map_or_else(|| store.root().to_owned(), Into::into);
    let guarded = super::confine::guard::find(store.root(), &workspace, Some(&m.script.path));
    let before = super::confine::guard::before(&guarded, &workspace);
    let ended = match &began {
        Ok(()) => drive(store, m, start, fold, &hold, &guarded),
        Err(e) => Err(StoreError::Unstarted(e.clone())),
    };
    // Whatever the segment started goes, however it ended, before its record does.
    hold.end();
    if began.is_ok() {
        let changed = super::confine::guard::record_changes(
            store,
            m.run_id.as_str(),
            m.work_id.as_str(),
            &before,
        );
        if let Err(e) = changed {
            errln!("harn: warning: what run {} changed was not recorded: {e}", m.run_id);
        }
        store.ledger().end_live(&m.run_id)?;
    }
    ended
}

/// Longest wait, once a run parks on an agent's tool call, for the agent to end its
/// cancelled turn before the segment's processes are killed.
const PARK_GRACE: Duration = Duration::from_secs(5);

/// Waits (at most [`PARK_GRACE`]) for `call` to end after its turn was cancelled for a park.
/// Its end is not recorded: the call is asked again, and continues its session, when the
/// ruling resumes the run.
fn settle(events: &mpsc::Receiver<HostEvent>, call: &str) {
    let until = std::time::Instant::now() + PARK_GRACE;
    while let Some(left) = until.checked_duration_since(std::time::Instant::now()) {
        match events.recv_timeout(left) {
            Ok(HostEvent::AgentDone(id, _)) if id == call => return,
            // Another ask of the cancelled turn is refused; anything else waits for the resume.
            Ok(HostEvent::ToolAsk(_, _, answer)) => drop(answer.send((Verdict::Deny, Vec::new()))),
            Ok(_) => {}
            Err(_) => return,
        }
    }
}

/// [`run_segment`] once the segment's hold and record are in place.
fn drive(
    store: &mut Store,
    m: &RunManifest,
    start: &Value,
    fold: RunFold,
    hold: &RunHold,
    guarded: &Guard,
) -> Result<SegmentEnd, StoreError> {
    let mut transcript = Transcript::open(store, &m.run_id)?;
    let confined = confinement(store, m, hold, guarded);
    let spawned = match &confined {
        Ok((confine, _, _)) => spawn(store, m, confine),
        Err(e) => Err(std::io::Error::other(e.to_string())),
    };
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            let missing = e.kind() == std::io::ErrorKind::NotFound;
            let error = format!("{}: {e}", program(m));
            transcript
                .record(store, json!({ "event": "run.spawn_failed", "error": e.to_string() }))?;
            let end = ProcessEnd::SpawnFailed { error, missing };
            return Ok(SegmentEnd::Finished(Box::new(fold), end));
        }
    };
    let (confine, _temp, contained) = confined.expect("spawned, so confined as planned");
    let pgid = child.id() as i32;
    // Declared before the groups' guard, so the group is killed before it is forgotten.
    let _tracked = crate::os::children::track(pgid);
    let agents = Arc::new(Mutex::new(CallGroups::default()));
    // However the host leaves this function, the workflow's group and its calls' groups go.
    let _groups = Groups { workflow: pgid, agents: agents.clone() };
    let stdin = writer(child.stdin.take().expect("stdin is piped"));
    // Bounded, so a workflow that floods its stdout is slowed down rather than buffered.
    let (tx, events) = mpsc::sync_channel(256);
    let hook_tx = tx.clone();
    let _registered = crate::os::children::register_run(
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
    let event = if start["resume"].is_null() { "run.start" } else { "run.resume" };
    let held = json!({ "holding": hold.holding(), "cgroup": hold.leaf, "why": hold.why_not });
    let body = json!({
        "event": event, "pid": pgid, "start": start, "held": held, "containment": contained,
    });
    transcript.record(store, body)?;
    send(&stdin, start);
    let waiter = tx.clone();
    std::thread::spawn(move || {
        let status = child.wait();
        let _ = waiter.send(HostEvent::Exited(status));
    });
    let concurrency = m.concurrency.max(1) as usize;
    // Sessions earlier segments of this run left, for calls that continue one.
    let records = store.ledger().transcript(&m.run_id).unwrap_or_default();
    let (sessions, open_sessions) =
        (transcript::sessions(&records), transcript::open_sessions(&records));
    let mut host = SegmentHost {
        m,
        fold,
        transcript,
        stdin,
        pgid,
        calls: Calls::new(concurrency, agents, confine.clone()),
        sessions,
        open_sessions,
        harness_of: BTreeMap::new(),
        keys: BTreeMap::new(),
        logged: 0,
        stopped: false,
        malformed: 0,
        malformed_bytes: 0,
        recorded_bytes: 0,
        cut: (0, 0),
    };
    // The segment's lifecycle (timeout, cancel, interruption, its end) is the core's
    // machine; this loop feeds it what happens and carries out what it says.
    let clock = crate::os::clock::RealClock::new();
    let mut segment = Segment::new(clock.now(), CoreDuration::from_millis(m.timeout_ms));
    let mut cancel = CancelWatch::new(store, m);
    loop {
        segment.handle_timeout(clock.now());
        while let Some(effect) = segment.poll_effect() {
            if let Some(by) = host.carry_out(store, effect, &mut cancel, hold)? {
                segment.handle(clock.now(), SegmentInput::Cancelled { by });
            }
        }
        if segment.over(clock.now(), host.calls.in_flight) {
            break;
        }
        let event = match segment.poll_timeout() {
            None => events.recv().expect("the host holds a sender"),
            Some(wake) => {
                let wait = Duration::from_nanos(wake.0.saturating_sub(clock.now().0));
                match events.recv_timeout(wait) {
                    Ok(event) => event,
                    Err(_) => continue,
                }
            }
        };
        let now = clock.now();
        match event {
            HostEvent::Line(msg) => match host.on_line(store, msg)? {
                Turn::Park(parked) => match host.park(store, &parked)? {
                    Some(request) => {
                        host.summarize_left_out(store)?;
                        return Ok(SegmentEnd::Parked(Box::new(request)));
                    }
                    None => segment.handle(now, SegmentInput::PolicyStopped),
                },
                Turn::Stop => segment.handle(now, SegmentInput::PolicyStopped),
                Turn::Go => {}
            },
            HostEvent::Eof => segment.handle(now, SegmentInput::OutputEnded),
            HostEvent::Exited(status) => {
                let status =
                    status.map_err(|e| StoreError::Os(format!("waiting for the workflow: {e}")))?;
                let (code, signal) = (status.code(), status.signal());
                segment.handle(now, SegmentInput::Exited { code, signal });
            }
            HostEvent::Interrupting(by, ack) => {
                let has_result = host.fold.has_result();
                segment.handle(now, SegmentInput::Interrupting { by, has_result });
                // The record is written before the stop's signals: carry it out now.
                while let Some(effect) = segment.poll_effect() {
                    host.carry_out(store, effect, &mut cancel, hold)?;
                }
                let _ = ack.send(());
            }
            HostEvent::AgentDone(id, outcome) => host.on_agent_done(store, &id, outcome)?,
            HostEvent::ToolAsk(call, request, answer) => {
                let logged = host.fold.policy_log().len();
                let judged = host.fold.tool(request);
                let rules = match host.fold.policy_log().get(logged) {
                    Some(check) => check.evaluation.matched.clone(),
                    None => Vec::new(),
                };
                host.record_checks(store)?;
                let verdict = match judged {
                    ToolJudged::Allow => Verdict::Allow,
                    ToolJudged::Refuse => Verdict::Deny,
                    ToolJudged::Stop => {
                        segment.handle(now, SegmentInput::PolicyStopped);
                        Verdict::Deny
                    }
                    // Parked: the call is cut short with the segment, and its session is
                    // continued when the ruling resumes the run.
                    ToolJudged::Park(parked) => match host.park(store, &parked)? {
                        Some(request) => {
                            host.summarize_left_out(store)?;
                            // The agent is told its turn is cancelled, and given a moment to
                            // end it and keep its session, which the ruling's resume loads.
                            let _ = answer.send((Verdict::Ask, rules));
                            settle(&events, &call);
                            return Ok(SegmentEnd::Parked(Box::new(request)));
                        }
                        None => {
                            segment.handle(now, SegmentInput::PolicyStopped);
                            Verdict::Deny
                        }
                    },
                };
                let _ = answer.send((verdict, rules));
            }
            HostEvent::AgentProgress(id, shown) => {
                let mut body = json!({ "event": "agent.progress", "id": id });
                if let (Some(body), Some(shown)) = (body.as_object_mut(), shown.as_object()) {
                    body.extend(shown.clone());
                }
                host.transcript.record(store, body)?;
            }
        }
        if !segment.halted() && !host.stopped {
            host.calls.dispatch(store, m, &tx);
        }
    }
    host.summarize_left_out(store)?;
    // What the run consumed: the kernel's counters of its cgroup's limits, read once the
    // workflow is gone; reaching one is the run's own failure (the core decides).
    let reached = hold.bounded.reached();
    if !reached.is_empty() {
        segment.handle(clock.now(), SegmentInput::LimitsReached(reached));
        while let Some(effect) = segment.poll_effect() {
            if let SegmentEffect::Record(body) = effect {
                host.transcript.record(store, body)?;
            }
        }
    }
    let SegmentHost { fold, stdin, .. } = host;
    drop(stdin);
    let end = segment.end().expect("a segment is over only after its workflow exited");
    Ok(SegmentEnd::Finished(Box::new(fold), end))
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
        protected: super::confine::guard::existing(&guarded.readonly),
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

/// What a workflow's line leads to.
enum Turn {
    /// The run parks on an approval.
    Park(Parked),
    /// Policy stopped the run.
    Stop,
    /// The conversation goes on.
    Go,
}

/// The state of one segment's conversation.
struct SegmentHost<'a> {
    m: &'a RunManifest,
    fold: RunFold,
    transcript: Transcript,
    stdin: mpsc::Sender<Vec<u8>>,
    pgid: i32,
    calls: Calls,
    /// The cache key of each call in flight.
    keys: BTreeMap<String, String>,
    /// Policy checks already in the transcript.
    logged: usize,
    /// True once policy stopped the run: nothing more is dispatched.
    stopped: bool,
    /// The vendor session of the last call to each harness, for a call that continues it.
    sessions: BTreeMap<String, String>,
    /// Sessions of calls earlier segments cut short, by request id (see
    /// `transcript::open_sessions`).
    open_sessions: BTreeMap<String, String>,
    /// The harness of each call in flight.
    harness_of: BTreeMap<String, String>,
    /// Lines that were not protocol messages: the first [`MALFORMED_RECORDED`] are
    /// recorded one by one, the rest counted (bytes too) and recorded once at the end.
    malformed: u64,
    malformed_bytes: u64,
    /// Bytes of workflow messages recorded in the transcript so far.
    recorded_bytes: u64,
    /// Messages (and their bytes) the transcript's bound left out.
    cut: (u64, u64),
}

/// Non-protocol lines recorded one by one; a workflow that prints a flood of them costs
/// one summary record, not an fsync per line.
const MALFORMED_RECORDED: u64 = 20;

impl SegmentHost<'_> {
    /// Records how many non-protocol lines were counted but not recorded one by one, and how
    /// many messages the transcript's bound left out.
    fn summarize_left_out(&mut self, store: &mut Store) -> Result<(), StoreError> {
        if self.cut.0 > 0 {
            let (records, bytes) = std::mem::take(&mut self.cut);
            let body = json!({ "event": "workflow.cut", "records": records, "bytes": bytes,
                               "recorded_bytes": transcript::MESSAGES_RECORDED });
            self.transcript.record(store, body)?;
        }
        let left_out = self.malformed.saturating_sub(MALFORMED_RECORDED);
        if left_out == 0 {
            return Ok(());
        }
        let body = json!({
            "event": "workflow.malformed", "suppressed": left_out, "total": self.malformed,
            "error_bytes": self.malformed_bytes,
        });
        self.malformed = MALFORMED_RECORDED;
        self.transcript.record(store, body)
    }

    /// Records a message and carries out the fold's answer; returns what it leads to.
    fn on_line(
        &mut self,
        store: &mut Store,
        msg: Result<FromWorkflow, ProtocolError>,
    ) -> Result<Turn, StoreError> {
        let body = match &msg {
            Ok(m) => {
                let body = json!({ "event": "workflow.message", "message": m });
                let bytes = body.to_string().len() as u64;
                if !transcript::records_message(m, self.recorded_bytes, bytes) {
                    self.cut = (self.cut.0 + 1, self.cut.1.saturating_add(bytes));
                    None
                } else {
                    self.recorded_bytes = self.recorded_bytes.saturating_add(bytes);
                    Some(body)
                }
            }
            Err(e) => {
                let error = e.to_string();
                self.malformed += 1;
                self.malformed_bytes += error.len() as u64;
                (self.malformed <= MALFORMED_RECORDED)
                    .then(|| json!({ "event": "workflow.malformed", "error": error }))
            }
        };
        if let Some(body) = body {
            self.transcript.record(store, body)?;
        }
        if self.stopped {
            return Ok(Turn::Go);
        }
        let action = self.fold.observe(msg);
        self.record_checks(store)?;
        match action {
            Some(HostAction::Reply(reply)) => {
                self.transcript.record(store, json!({ "event": "host.reply", "reply": reply }))?;
                send(&self.stdin, &reply);
            }
            Some(HostAction::CallAgent { id, dispatch, key }) => {
                let body = transcript::agent_start(&id, &dispatch.harness, &key);
                self.transcript.record(store, body)?;
                self.keys.insert(id.clone(), key);
                // A call an earlier segment cut short continues the session it had opened.
                let resume = match self.open_sessions.remove(&id) {
                    Some(session) => Some(session),
                    None => dispatch
                        .continue_session
                        .then(|| self.sessions.get(&dispatch.harness).cloned())
                        .flatten(),
                };
                self.harness_of.insert(id.clone(), dispatch.harness.clone());
                self.calls.queued.push((id, dispatch, resume));
            }
            Some(HostAction::Park(parked)) => return Ok(Turn::Park(parked)),
            Some(HostAction::Stop) => return Ok(Turn::Stop),
            None => {}
        }
        Ok(Turn::Go)
    }

    /// Records the policy checks the fold made since the last record.
    fn record_checks(&mut self, store: &mut Store) -> Result<(), StoreError> {
        for check in &self.fold.policy_log()[self.logged..] {
            self.transcript.record(store, json!({ "event": "policy.check", "check": check }))?;
        }
        self.logged = self.fold.policy_log().len();
        Ok(())
    }

    /// Records a call's end (with its reply, the resume cache) and answers the workflow.
    fn on_agent_done(
        &mut self,
        store: &mut Store,
        id: &str,
        outcome: CallOutcome,
    ) -> Result<(), StoreError> {
        self.calls.in_flight -= 1;
        let key = self.keys.remove(id);
        if let (Some(harness), Some(session)) = (self.harness_of.remove(id), &outcome.session_id) {
            self.sessions.insert(harness, session.clone());
        }
        let body = transcript::agent_end(id, key.as_deref(), &outcome);
        self.transcript.record(store, body)?;
        let reply = self.fold.agent_done(id, outcome);
        send(&self.stdin, &reply);
        Ok(())
    }

    /// Carries out one of the segment's effects; returns who cancelled the run when a look
    /// for a cancel found one.
    fn carry_out(
        &mut self,
        store: &mut Store,
        effect: SegmentEffect,
        cancel: &mut CancelWatch,
        hold: &RunHold,
    ) -> Result<Option<String>, StoreError> {
        use rustix::process::Signal;
        match effect {
            SegmentEffect::Record(body) => self.transcript.record(store, body)?,
            SegmentEffect::Halt => {
                self.stopped = true;
                self.calls.queued.clear();
            }
            SegmentEffect::Term(reach) => {
                signal_groups(self.pgid, &self.calls.agents, Signal::TERM);
                if reach == Reach::Everything {
                    hold.term();
                }
            }
            SegmentEffect::Kill(reach) => {
                kill_groups(self.pgid, &self.calls.agents);
                if reach == Reach::Everything {
                    hold.end();
                }
            }
            SegmentEffect::KillLeftovers => kill_group(self.pgid),
            SegmentEffect::LookForCancel => return Ok(cancel.look(store)),
        }
        Ok(None)
    }

    /// Parks the run (see [`harn_core::work::ledger::Ledger::park`]); the workflow and its
    /// calls are killed when the segment's process guard drops. A request that differs from
    /// the one recorded for its slot stops the run instead (`None`).
    fn park(
        &mut self,
        store: &mut Store,
        parked: &Parked,
    ) -> Result<Option<ApprovalRequest>, StoreError> {
        let now = store.now();
        match store.ledger().park(self.m, parked, now)? {
            Ok(request) => Ok(Some(request)),
            Err(why) => {
                self.fold.stop(why.to_string());
                Ok(None)
            }
        }
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
