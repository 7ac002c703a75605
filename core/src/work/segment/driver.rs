//! The feed loop of one run segment, over a host: the segment's live record, the spawn, its
//! `run.start` or `run.resume`, then every line, exit, stop, agent call and tool request fed to
//! the segment machine and the run fold, and what they decide carried out in order (records,
//! replies, calls started up to the run's concurrency, a park, signals), until the workflow is
//! gone or parked. `harn work run` and the simulator's work world are its hosts: they carry
//! out effects and report what happened; the order and every rule are here, once.

use super::{Reach, Segment, SegmentEffect, SegmentInput};
use crate::error::RecordError;
use crate::limits::LimitReached;
#[cfg(feature = "planted-bugs")]
use crate::planted::PlantedBug;
use crate::time::{Duration, Instant};
use crate::work::agent::CallOutcome;
use crate::work::approval::ApprovalRequest;
use crate::work::attempt::SegmentEnd;
use crate::work::policy::{Request, Verdict};
use crate::work::protocol::{FromWorkflow, ProtocolError};
use crate::work::run::{HostAction, Parked, ProcessEnd, RunFold, RunManifest, ToolJudged};
use crate::work::team::Dispatch;
use crate::work::transcript;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, VecDeque};

/// What happened to the segment, as its host saw it.
#[derive(Debug)]
pub enum SegmentEvent {
    /// A line of the workflow's standard output.
    Line(Result<FromWorkflow, ProtocolError>),
    /// The workflow's standard output reached its end.
    OutputEnded,
    /// The workflow's process exited (code) or was killed (signal).
    Exited {
        /// Its exit code.
        code: Option<i32>,
        /// The signal that ended it.
        signal: Option<i32>,
    },
    /// An operator's stop (whose, in words) is reaching the workflow; the host waits for
    /// [`SegmentHost::interrupt_recorded`] before it sends any signal.
    Interrupting(String),
    /// The engine that runs the segment on a cluster ended it, in words (a node that died, a
    /// job the cluster cancelled or preempted, a step lost); the exit follows.
    EngineFault(String),
    /// An agent call ended.
    AgentDone(String, CallOutcome),
    /// A streaming agent call showed something (a tool used, a turn ended).
    AgentProgress(String, Value),
    /// An agent asks before a tool call; answered by [`SegmentHost::answer_tool`].
    ToolAsk(String, Request),
    /// The host measured a limit it holds itself reached (the disk): the run ends.
    LimitReached(crate::limits::LimitReached),
}

/// Which processes a signal of the segment reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentSignal {
    /// TERM to these.
    Term(Reach),
    /// KILL to these.
    Kill(Reach),
    /// KILL to what the workflow left in its own process group once it exited.
    Leftovers,
}

/// An agent call to start: its request id, what it runs, and the vendor session it continues.
#[derive(Clone, Debug)]
pub struct Call {
    /// The workflow's request id.
    pub id: String,
    /// Which adapter, prompt and limits.
    pub dispatch: Dispatch,
    /// The vendor session this call continues, if any.
    pub resume: Option<String>,
}

/// Why the workflow could not be spawned.
#[derive(Clone, Debug)]
pub struct SpawnFailed {
    /// The OS error, as recorded.
    pub error: String,
    /// The program, for the proof's error.
    pub program: String,
    /// True when the program does not exist.
    pub missing: bool,
}

/// What a segment's host does for the driver. Errors end the segment at once with the host's
/// error; a host that must say its process is gone (only a simulated one) says so with an
/// error of its own and maps it to [`SegmentEnd::Abandoned`].
pub trait SegmentHost {
    /// The host's error.
    type Error;
    /// The segment's clock now.
    fn now(&mut self) -> Instant;
    /// Records the segment in progress (`.harnery/running/`), before anything is spawned.
    fn begin(&mut self) -> Result<(), Self::Error>;
    /// Ends everything the segment started and removes its record; `ended` is how the
    /// segment ended.
    fn end(&mut self, ended: &Result<SegmentEnd, Self::Error>) -> Result<(), Self::Error>;
    /// The run's transcript so far (earlier segments' records), for the sessions calls
    /// continue.
    fn earlier(&mut self) -> Vec<Value>;
    /// Spawns the workflow; on success, the fields its start record carries (pid,
    /// containment…).
    fn spawn(&mut self) -> Result<Result<Map<String, Value>, SpawnFailed>, Self::Error>;
    /// Appends one record to the run's transcript.
    fn record(&mut self, body: Value) -> Result<(), Self::Error>;
    /// Writes one line to the workflow's standard input.
    fn send(&mut self, line: &Value);
    /// The next event, or `None` once `wake` (when given) came first.
    fn next(&mut self, wake: Option<Instant>) -> Result<Option<SegmentEvent>, Self::Error>;
    /// Sends a signal.
    fn signal(&mut self, signal: SegmentSignal);
    /// Who cancelled the item, when its history now holds a cancel of this run.
    fn look_for_cancel(&mut self) -> Result<Option<String>, Self::Error>;
    /// Starts an agent call; its end comes as [`SegmentEvent::AgentDone`].
    fn start_call(&mut self, call: Call) -> Result<(), Self::Error>;
    /// Parks the run on an approval; a request that differs from the one recorded for its
    /// slot is refused, with why.
    fn park(
        &mut self,
        parked: &Parked,
    ) -> Result<Result<ApprovalRequest, RecordError>, Self::Error>;
    /// Answers an agent's tool request.
    fn answer_tool(&mut self, call: &str, verdict: Verdict, rules: Vec<String>);
    /// Gives the call whose turn a park cancelled a moment to end it (and keep its session).
    fn settle(&mut self, call: &str);
    /// The operator's stop is recorded: the host may signal now.
    fn interrupt_recorded(&mut self);
    /// The limits of its own the run reached, read once the workflow is gone.
    fn limits_reached(&mut self) -> Vec<LimitReached>;
    /// The bug this host plants in the driver, if any.
    #[cfg(feature = "planted-bugs")]
    fn planted(&self) -> Option<PlantedBug> {
        None
    }
}

/// Non-protocol lines recorded one by one; a workflow that prints a flood of them costs
/// one summary record, not an fsync per line.
pub(crate) const MALFORMED_RECORDED: u64 = 20;

/// Runs one segment of `m`'s run from its `start` line and `fold` (what earlier segments of a
/// parked run left): its live record first, then the workflow, then the end of everything it
/// started, however it ended.
pub fn run_segment<H: SegmentHost>(
    host: &mut H,
    m: &RunManifest,
    start: &Value,
    fold: RunFold,
) -> Result<SegmentEnd, H::Error> {
    host.begin()?;
    let ended = drive(host, m, start, fold);
    host.end(&ended)?;
    ended
}

/// The segment's feed loop: the state of its conversation.
struct Driver<'h, H: SegmentHost> {
    host: &'h mut H,
    fold: RunFold,
    segment: Segment,
    /// Calls waiting for a slot, in the order asked for, and how many run.
    queued: VecDeque<Call>,
    in_flight: usize,
    concurrency: usize,
    /// The cache key and adapter of each call in flight.
    keys: BTreeMap<String, (String, String)>,
    /// The vendor session of the last call to each adapter, and of calls earlier segments
    /// cut short (by request id).
    sessions: BTreeMap<String, String>,
    open_sessions: BTreeMap<String, String>,
    /// Policy checks already in the transcript.
    logged: usize,
    /// True once policy stopped the run, or it halted: no call starts any more.
    stopped: bool,
    /// Non-protocol lines and their bytes; messages and bytes the transcript's bound left out.
    malformed: u64,
    malformed_bytes: u64,
    recorded_bytes: u64,
    cut: (u64, u64),
}

/// What a turn of the loop comes to.
enum Turn {
    Go,
    Parked(Box<ApprovalRequest>),
}

/// The record a segment's spawn begins with: a resumed run's start line names what it
/// resumes, and so is `run.resume`; any other is `run.start`.
pub(crate) fn start_event(start: &Value) -> &'static str {
    if start["resume"].is_null() {
        "run.start"
    } else {
        "run.resume"
    }
}

fn drive<H: SegmentHost>(
    host: &mut H,
    m: &RunManifest,
    start: &Value,
    fold: RunFold,
) -> Result<SegmentEnd, H::Error> {
    let fields = match host.spawn()? {
        Ok(fields) => fields,
        Err(failed) => {
            host.record(json!({ "event": "run.spawn_failed", "error": failed.error }))?;
            let error = format!("{}: {}", failed.program, failed.error);
            let end = ProcessEnd::SpawnFailed { error, missing: failed.missing };
            return Ok(SegmentEnd::Finished(Box::new(fold), end));
        }
    };
    #[allow(unused_mut)]
    let mut event = start_event(start);
    #[cfg(feature = "planted-bugs")]
    if host.planted() == Some(PlantedBug::ResumeAsStart) {
        event = "run.start";
    }
    let mut body = Map::new();
    body.insert("event".into(), json!(event));
    body.extend(fields);
    body.insert("start".into(), start.clone());
    host.record(Value::Object(body))?;
    host.send(start);
    let earlier = host.earlier();
    let now = host.now();
    let mut d = Driver {
        sessions: transcript::sessions(&earlier),
        open_sessions: transcript::open_sessions(&earlier),
        host,
        fold,
        segment: Segment::new(now, Duration::from_millis(m.timeout_ms)),
        queued: VecDeque::new(),
        in_flight: 0,
        concurrency: m.concurrency.max(1) as usize,
        keys: BTreeMap::new(),
        logged: 0,
        stopped: false,
        malformed: 0,
        malformed_bytes: 0,
        recorded_bytes: 0,
        cut: (0, 0),
    };
    loop {
        let now = d.host.now();
        d.segment.handle_timeout(now);
        d.effects()?;
        if d.segment.over(d.host.now(), d.in_flight) {
            break;
        }
        let Some(event) = d.host.next(d.segment.poll_timeout())? else { continue };
        if let Turn::Parked(request) = d.on_event(event)? {
            d.summarize_left_out()?;
            return Ok(SegmentEnd::Parked(request));
        }
        if !d.segment.halted() && !d.stopped {
            d.dispatch()?;
        }
    }
    d.summarize_left_out()?;
    // What the run consumed: the kernel's counters of its limits, read once the workflow is
    // gone; reaching one is the run's own failure.
    let reached = d.host.limits_reached();
    if !reached.is_empty() {
        let now = d.host.now();
        d.segment.handle(now, SegmentInput::LimitsReached(reached));
        while let Some(effect) = d.segment.poll_effect() {
            if let SegmentEffect::Record(body) = effect {
                d.host.record(body)?;
            }
        }
    }
    let end = d.segment.end().expect("a segment is over only after its workflow exited");
    #[cfg(feature = "planted-bugs")]
    let end = match end {
        ProcessEnd::EngineFault { code, signal, .. }
            if d.host.planted() == Some(PlantedBug::FaultAsExit) =>
        {
            ProcessEnd::Exited { code, signal, timed_out: false }
        }
        end => end,
    };
    Ok(SegmentEnd::Finished(Box::new(d.fold), end))
}

impl<H: SegmentHost> Driver<'_, H> {
    /// Carries out the segment machine's effects in order; a look that finds a cancel feeds
    /// it back.
    fn effects(&mut self) -> Result<(), H::Error> {
        while let Some(effect) = self.segment.poll_effect() {
            match effect {
                SegmentEffect::Record(body) => self.host.record(body)?,
                SegmentEffect::Halt => {
                    self.stopped = true;
                    self.queued.clear();
                }
                SegmentEffect::Term(reach) => self.host.signal(SegmentSignal::Term(reach)),
                SegmentEffect::Kill(reach) => self.host.signal(SegmentSignal::Kill(reach)),
                SegmentEffect::KillLeftovers => self.host.signal(SegmentSignal::Leftovers),
                SegmentEffect::LookForCancel => {
                    if let Some(by) = self.host.look_for_cancel()? {
                        let now = self.host.now();
                        self.segment.handle(now, SegmentInput::Cancelled { by });
                    }
                }
            }
        }
        Ok(())
    }

    fn on_event(&mut self, event: SegmentEvent) -> Result<Turn, H::Error> {
        let now = self.host.now();
        match event {
            SegmentEvent::Line(msg) => self.on_line(msg),
            SegmentEvent::OutputEnded => {
                self.segment.handle(now, SegmentInput::OutputEnded);
                Ok(Turn::Go)
            }
            SegmentEvent::Exited { code, signal } => {
                self.segment.handle(now, SegmentInput::Exited { code, signal });
                Ok(Turn::Go)
            }
            SegmentEvent::Interrupting(by) => {
                let has_result = self.fold.has_result();
                self.segment.handle(now, SegmentInput::Interrupting { by, has_result });
                // The record is written before the stop's signals: carry it out now.
                let done = self.effects();
                self.host.interrupt_recorded();
                done.map(|()| Turn::Go)
            }
            SegmentEvent::LimitReached(reached) => {
                self.segment.handle(now, SegmentInput::LimitsReached(vec![reached]));
                Ok(Turn::Go)
            }
            SegmentEvent::EngineFault(fault) => {
                let has_result = self.fold.has_result();
                self.segment.handle(now, SegmentInput::EngineFault { fault, has_result });
                Ok(Turn::Go)
            }
            SegmentEvent::AgentDone(id, outcome) => {
                self.on_agent_done(&id, outcome).map(|()| Turn::Go)
            }
            SegmentEvent::ToolAsk(call, request) => self.on_tool(&call, request),
            SegmentEvent::AgentProgress(id, shown) => {
                let mut body = json!({ "event": "agent.progress", "id": id });
                if let (Some(body), Some(shown)) = (body.as_object_mut(), shown.as_object()) {
                    body.extend(shown.clone());
                }
                self.host.record(body).map(|()| Turn::Go)
            }
        }
    }

    /// Records a message and carries out the fold's answer.
    fn on_line(&mut self, msg: Result<FromWorkflow, ProtocolError>) -> Result<Turn, H::Error> {
        let body = match &msg {
            Ok(m) => {
                let body = json!({ "event": "workflow.message", "message": m });
                let bytes = body.to_string().len() as u64;
                if transcript::records_message(m, self.recorded_bytes, bytes) {
                    self.recorded_bytes = self.recorded_bytes.saturating_add(bytes);
                    Some(body)
                } else {
                    self.cut = (self.cut.0 + 1, self.cut.1.saturating_add(bytes));
                    None
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
            self.host.record(body)?;
        }
        if self.stopped {
            return Ok(Turn::Go);
        }
        let action = self.fold.observe(msg);
        self.record_checks()?;
        match action {
            Some(HostAction::Reply(reply)) => {
                self.host.record(json!({ "event": "host.reply", "reply": reply }))?;
                self.host.send(&reply);
            }
            Some(HostAction::CallAgent { id, dispatch, key }) => {
                self.host.record(transcript::agent_start(&id, &dispatch.adapter, &key))?;
                // A call an earlier segment cut short continues the session it had opened.
                let resume = match self.open_sessions.remove(&id) {
                    Some(session) => Some(session),
                    None => dispatch
                        .continue_session
                        .then(|| self.sessions.get(&dispatch.adapter).cloned())
                        .flatten(),
                };
                self.keys.insert(id.clone(), (key, dispatch.adapter.clone()));
                self.queued.push_back(Call { id, dispatch, resume });
            }
            Some(HostAction::Park(parked)) => return self.park(&parked),
            Some(HostAction::Stop) => self.policy_stopped(),
            None => {}
        }
        Ok(Turn::Go)
    }

    /// Judges an agent's tool request in the run's policy and answers it.
    fn on_tool(&mut self, call: &str, request: Request) -> Result<Turn, H::Error> {
        let logged = self.fold.policy_log().len();
        let judged = self.fold.tool(request);
        let rules = match self.fold.policy_log().get(logged) {
            Some(check) => check.evaluation.matched.clone(),
            None => Vec::new(),
        };
        self.record_checks()?;
        let verdict = match judged {
            ToolJudged::Allow => Verdict::Allow,
            ToolJudged::Refuse => Verdict::Deny,
            ToolJudged::Stop => {
                self.policy_stopped();
                Verdict::Deny
            }
            // Parked: the agent is told its turn is cancelled and given a moment to end it
            // and keep its session, which the ruling's resume continues.
            ToolJudged::Park(parked) => match self.park(&parked)? {
                Turn::Parked(request) => {
                    self.host.answer_tool(call, Verdict::Ask, rules);
                    self.host.settle(call);
                    return Ok(Turn::Parked(request));
                }
                _ => Verdict::Deny,
            },
        };
        self.host.answer_tool(call, verdict, rules);
        Ok(Turn::Go)
    }

    /// Parks the run; a request that differs from the one recorded for its slot stops it.
    fn park(&mut self, parked: &Parked) -> Result<Turn, H::Error> {
        match self.host.park(parked)? {
            Ok(request) => Ok(Turn::Parked(Box::new(request))),
            Err(why) => {
                self.fold.stop(why.to_string());
                self.policy_stopped();
                Ok(Turn::Go)
            }
        }
    }

    fn policy_stopped(&mut self) {
        let now = self.host.now();
        self.segment.handle(now, SegmentInput::PolicyStopped);
    }

    /// Records the policy checks the fold made since the last record.
    fn record_checks(&mut self) -> Result<(), H::Error> {
        let checks: Vec<Value> = self.fold.policy_log()[self.logged..]
            .iter()
            .map(|check| json!({ "event": "policy.check", "check": check }))
            .collect();
        self.logged = self.fold.policy_log().len();
        checks.into_iter().try_for_each(|body| self.host.record(body))
    }

    /// Records a call's end (with its reply, the resume cache) and answers the workflow.
    fn on_agent_done(&mut self, id: &str, outcome: CallOutcome) -> Result<(), H::Error> {
        self.in_flight = self.in_flight.saturating_sub(1);
        let (key, adapter) = self.keys.remove(id).unzip();
        if let (Some(adapter), Some(session)) = (adapter, &outcome.session_id) {
            self.sessions.insert(adapter, session.clone());
        }
        self.host.record(transcript::agent_end(id, key.as_deref(), &outcome))?;
        let reply = self.fold.agent_done(id, outcome);
        self.host.send(&reply);
        Ok(())
    }

    /// Starts queued calls, in the order they were asked for, up to the run's concurrency.
    fn dispatch(&mut self) -> Result<(), H::Error> {
        while self.in_flight < self.concurrency {
            let Some(call) = self.queued.pop_front() else { break };
            self.in_flight += 1;
            self.host.start_call(call)?;
        }
        Ok(())
    }

    /// Records how many non-protocol lines were counted but not recorded one by one, and how
    /// many messages the transcript's bound left out.
    fn summarize_left_out(&mut self) -> Result<(), H::Error> {
        if self.cut.0 > 0 {
            let (records, bytes) = std::mem::take(&mut self.cut);
            let body = json!({ "event": "workflow.cut", "records": records, "bytes": bytes,
                               "recorded_bytes": transcript::MESSAGES_RECORDED });
            self.host.record(body)?;
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
        self.host.record(body)
    }
}
