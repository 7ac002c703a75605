//! The coordinator's side of a remote segment: publishes the item's work, starts the segment
//! as a Slurm job step (`srun … harn cluster segment`), and turns what the node says into
//! the segment driver's events; what the driver decides goes back to the node. When the step
//! ends without the node having said how, the engine is asked what became of the job, and the
//! core judges it (`work::cluster::judge_job`): the engine's fault, or the run's own end.
//! After the segment, the node's work is brought back into the item's worktree.

use super::engine;
use crate::os::store::{run_dir, Store, StoreError};
use harn_core::limits::LimitReached;
use harn_core::work::cluster::{
    ended_unannounced, judge_job, EngineJob, FrozenCluster, JobVerdict, Unannounced,
};
use harn_core::work::policy::Verdict;
use harn_core::work::protocol::LineReader;
use harn_core::work::remote::{self, FromNode, NodeSignal, ToNode};
use harn_core::work::run::RunManifest;
use harn_core::work::segment::driver::{Call, SegmentEvent, SegmentSignal, SpawnFailed};
use harn_core::work::segment::Reach;
use serde_json::{json, Map, Value};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// What comes from the step.
enum Heard {
    /// A line of the node's.
    Said(FromNode),
    /// A line that is not one.
    Garbled(String),
    /// The step's output ended: the step is over or lost.
    Closed,
}

/// Longest wait for the node's push once the segment is over, and for its step to end.
const PUSH_WAIT: Duration = Duration::from_secs(120);
/// Longest wait, once a step ended unannounced, for the engine to settle its job's state.
const SETTLE_WAIT: Duration = Duration::from_secs(30);

/// A segment running on a cluster node.
pub struct Remote {
    cluster: FrozenCluster,
    child: Option<Child>,
    to_node: Option<mpsc::Sender<Vec<u8>>>,
    heard: Option<mpsc::Receiver<Heard>>,
    stderr: Arc<Mutex<String>>,
    /// The workflow's output as lines, read here as a local segment reads them.
    reader: LineReader,
    pending: VecDeque<SegmentEvent>,
    /// The job, once the node said which.
    pub job: Option<EngineJob>,
    exited: bool,
    /// True once the node itself said the workflow exited: its work is then owed.
    said_exit: bool,
    closed: bool,
    cancelled: bool,
    limits: Option<Vec<LimitReached>>,
    pushed: Option<Result<(String, Option<String>), String>>,
    /// The bundle the node sends its work back in, as its parts arrive.
    bundle: Vec<u8>,
    /// True once the node said its work came as that bundle (not pushed).
    bundled: bool,
    /// The workflow's stderr as the node sent it, for the run's log.
    pub stderr_tail: Vec<u8>,
}

impl Remote {
    /// Nothing started yet, on `cluster`.
    pub fn new(cluster: FrozenCluster) -> Remote {
        Remote {
            cluster,
            child: None,
            to_node: None,
            heard: None,
            stderr: Arc::default(),
            reader: LineReader::default(),
            pending: VecDeque::new(),
            job: None,
            exited: false,
            said_exit: false,
            closed: false,
            cancelled: false,
            limits: None,
            pushed: None,
            bundle: Vec::new(),
            bundled: false,
            stderr_tail: Vec::new(),
        }
    }

    fn tell(&self, message: &ToNode) {
        if let Some(tx) = &self.to_node {
            let _ = tx.send(remote::line(message));
        }
    }

    /// Publishes the item's work, starts the step and waits for the node to spawn the
    /// workflow (at most the run's timeout: a step may wait in the queue for a node).
    pub fn spawn(
        &mut self,
        store: &mut Store,
        m: &RunManifest,
    ) -> Result<Result<Map<String, Value>, SpawnFailed>, StoreError> {
        let spec = self.cluster.spec.clone();
        let failed = |program: &str, error: String| {
            Ok(Err(SpawnFailed { error, program: program.to_owned(), missing: false }))
        };
        let Some(ws) = &m.workspace else {
            return failed("harn", "a remote run needs the item's worktree".into());
        };
        let open = m.containment.as_ref().is_some_and(|c| c.turned_off);
        let work_id = m.work_id.as_str();
        let checkout = match super::sync::publish(store.root(), ws, &spec.repository, work_id, open)
        {
            Ok(c) => c,
            Err(e) => return failed("git", e),
        };
        let workflow = match crate::work::frozen::install(store, m)
            .and_then(|copy| std::fs::read(&copy).map_err(|e| format!("{}: {e}", copy.display())))
        {
            Ok(bytes) => bytes,
            Err(e) => return failed("harn", e),
        };
        let mut cmd = engine::step(&self.cluster, m.run_id.as_str());
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        // Its own process group: a person's ^C reaches harn, which cancels the step as the
        // rules say, not srun behind its back.
        cmd.process_group(0);
        let mut child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) => {
                let missing = e.kind() == std::io::ErrorKind::NotFound;
                let error = e.to_string();
                return Ok(Err(SpawnFailed { error, program: "srun".into(), missing }));
            }
        };
        self.to_node = Some(crate::work::process::writer(child.stdin.take().expect("piped")));
        let (tx, heard) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let message = match remote::parse_from_node(&line) {
                    Ok(said) => Heard::Said(said),
                    Err(e) => Heard::Garbled(e.to_string()),
                };
                if tx.send(message).is_err() {
                    return;
                }
            }
            let _ = tx.send(Heard::Closed);
        });
        let tail = self.stderr.clone();
        let mut stderr = child.stderr.take().expect("piped");
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = stderr.read(&mut buf) {
                let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                t.push_str(&String::from_utf8_lossy(&buf[..n]));
                if t.len() > 8192 {
                    let cut = t.len() - 4096;
                    let cut = (cut..t.len()).find(|&i| t.is_char_boundary(i)).unwrap_or(cut);
                    t.drain(..cut);
                }
            }
        });
        self.child = Some(child);
        self.heard = Some(heard);
        self.tell(&ToNode::Setup {
            manifest: Box::new(m.clone()),
            workflow_hex: remote::to_hex(&workflow),
            checkout,
            scratch: spec.scratch.clone(),
        });
        let until = Instant::now() + Duration::from_millis(m.timeout_ms.max(1));
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let heard = self.heard.as_ref().expect("set above").recv_timeout(left);
            match heard {
                Ok(Heard::Said(FromNode::Started { job, node, harn })) => {
                    let ours = super::version();
                    self.job = Some(EngineJob {
                        engine: spec.engine,
                        cluster: self.cluster.name.clone(),
                        id: job,
                        node,
                    });
                    if harn != ours {
                        self.abandon();
                        let node = self.job.as_ref().map_or("", |j| j.node.as_str());
                        let error = format!(
                            "{harn} on {node}, {ours} here: install this version on the nodes \
                             (harn cluster check {})",
                            self.cluster.name
                        );
                        return failed(&spec.harn, error);
                    }
                }
                Ok(Heard::Said(FromNode::Spawned { mut fields })) => {
                    if let Some(job) = &self.job {
                        fields.insert("engine".into(), json!(job.engine));
                        fields.insert("cluster".into(), json!(job.cluster));
                        fields.insert("job".into(), json!(job.id));
                        fields.insert("node".into(), json!(job.node));
                    }
                    return Ok(Ok(fields));
                }
                Ok(Heard::Said(FromNode::SpawnFailed { error, program, missing })) => {
                    self.finish_quietly();
                    return Ok(Err(SpawnFailed { error, program, missing }));
                }
                Ok(Heard::Said(FromNode::Unready { error })) => {
                    self.abandon();
                    let node = self.job.as_ref().map_or("the node", |j| j.node.as_str());
                    return failed(&spec.harn, format!("on {node}: {error}"));
                }
                Ok(Heard::Said(other)) => {
                    self.abandon();
                    return failed(&spec.harn, format!("the node said {other:?} before spawning"));
                }
                Ok(Heard::Garbled(e)) => {
                    self.abandon();
                    return failed(&spec.harn, e);
                }
                Ok(Heard::Closed) | Err(_) => {
                    let timed_out = Instant::now() >= until;
                    self.abandon();
                    let said = self.said();
                    let error = match (&self.job, timed_out) {
                        (None, true) => format!(
                            "the cluster did not start the step within the run's timeout{said}"
                        ),
                        (None, false) => format!("the step did not start{said}"),
                        (Some(job), _) => {
                            let now = engine::settled(&job.id, SETTLE_WAIT);
                            match now.map(|j| judge_job(&j, self.cancelled)) {
                                Some(JobVerdict::Fault(fault)) => fault,
                                _ => format!(
                                    "job {} on {} ended before spawning{said}",
                                    job.id, job.node
                                ),
                            }
                        }
                    };
                    return failed("srun", error);
                }
            }
        }
    }

    /// What srun said on its standard error, as a clause.
    fn said(&self) -> String {
        let tail = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        match tail.trim().lines().last() {
            Some(line) => format!(": {line}"),
            None => String::new(),
        }
    }

    /// Ends the step at once, cancelling its job: nothing of it is wanted.
    fn abandon(&mut self) {
        self.to_node = None;
        if let Some(job) = &self.job {
            engine::cancel(&job.id);
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Ends a step whose workflow never ran: the node pushes nothing new, and nothing is
    /// brought back.
    fn finish_quietly(&mut self) {
        self.tell(&ToNode::Finish);
        self.to_node = None;
        self.wait_step(Instant::now() + PUSH_WAIT);
    }

    /// The next event for the driver, waiting at most `wait`.
    pub fn next(&mut self, wait: Option<Duration>) -> Option<SegmentEvent> {
        if let Some(event) = self.pending.pop_front() {
            return Some(event);
        }
        let until = wait.map(|w| Instant::now() + w);
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            if self.closed {
                // Nothing more will come; the driver decides when it is over.
                std::thread::sleep(until.map_or(Duration::from_secs(1), |u| {
                    u.saturating_duration_since(Instant::now())
                }));
                return None;
            }
            let heard = self.heard.as_ref().expect("spawned");
            let heard = match until {
                None => heard.recv().unwrap_or(Heard::Closed),
                Some(u) => match heard.recv_timeout(u.saturating_duration_since(Instant::now())) {
                    Ok(h) => h,
                    Err(mpsc::RecvTimeoutError::Timeout) => return None,
                    Err(mpsc::RecvTimeoutError::Disconnected) => Heard::Closed,
                },
            };
            self.hear(heard);
        }
    }

    fn hear(&mut self, heard: Heard) {
        match heard {
            Heard::Said(FromNode::Out { hex }) => match remote::from_hex(&hex) {
                Some(bytes) => {
                    let lines = self.reader.feed(&bytes);
                    self.pending.extend(lines.into_iter().map(SegmentEvent::Line));
                }
                None => self.lost("the node sent output that is not hexadecimal".into()),
            },
            Heard::Said(FromNode::OutEnded) => {
                if let Some(msg) = self.reader.finish() {
                    self.pending.push_back(SegmentEvent::Line(msg));
                }
                self.pending.push_back(SegmentEvent::OutputEnded);
            }
            Heard::Said(FromNode::Exited { code, signal }) => {
                self.exited = true;
                self.said_exit = true;
                // A workflow killed by a signal harn did not send may have been killed by
                // the engine (a cancel, a node drained): its word on the job comes first.
                if signal.is_some() && !self.cancelled {
                    if let Some(job) = &self.job {
                        let wait = Duration::from_secs(1);
                        let verdict = engine::settled(&job.id, wait).map(|j| judge_job(&j, false));
                        if let Some(JobVerdict::Fault(f)) = verdict {
                            self.pending.push_back(SegmentEvent::EngineFault(f));
                        }
                    }
                }
                self.pending.push_back(SegmentEvent::Exited { code, signal });
            }
            Heard::Said(FromNode::AgentDone { call, outcome }) => {
                self.pending.push_back(SegmentEvent::AgentDone(call, *outcome));
            }
            Heard::Said(FromNode::AgentProgress { call, shown }) => {
                self.pending.push_back(SegmentEvent::AgentProgress(call, shown));
            }
            Heard::Said(FromNode::ToolAsk { call, request }) => {
                self.pending.push_back(SegmentEvent::ToolAsk(call, request));
            }
            Heard::Said(FromNode::Limits { reached }) => self.limits = Some(reached),
            Heard::Said(FromNode::Stderr { hex }) => {
                self.stderr_tail.extend(remote::from_hex(&hex).unwrap_or_default());
            }
            Heard::Said(FromNode::Pushed { head, wip }) => self.pushed = Some(Ok((head, wip))),
            Heard::Said(FromNode::BundlePart { hex }) => match remote::from_hex(&hex) {
                Some(part) if self.bundle.len() + part.len() <= remote::BUNDLE_MAX => {
                    self.bundle.extend_from_slice(&part)
                }
                Some(_) => self.pushed = Some(Err("its bundle is larger than 1 GiB".into())),
                None => self.pushed = Some(Err("a part of its bundle is not hexadecimal".into())),
            },
            Heard::Said(FromNode::Bundled { head, wip }) => {
                self.bundled = true;
                self.pushed = Some(Ok((head, wip)));
            }
            Heard::Said(FromNode::PushFailed { error }) => self.pushed = Some(Err(error)),
            Heard::Said(other) => self.lost(format!("the node said {other:?} while running")),
            Heard::Garbled(e) => self.lost(e),
            Heard::Closed => {
                self.closed = true;
                if !self.exited {
                    self.step_ended();
                }
            }
        }
    }

    /// The node broke the conversation: the step cannot be trusted further and is ended.
    fn lost(&mut self, why: String) {
        errln!("harn: {why}; the step is cancelled");
        self.abandon();
        self.closed = true;
        if !self.exited {
            self.exited = true;
            let fault = format!("the connection to the step was lost: {why}");
            self.pending.push_back(SegmentEvent::EngineFault(fault));
            self.pending.push_back(SegmentEvent::Exited { code: None, signal: Some(9) });
        }
    }

    /// The step's output ended before the node said the workflow exited: the engine says
    /// what became of the job, and the core judges it.
    fn step_ended(&mut self) {
        let status = self.wait_step(Instant::now() + Duration::from_secs(10));
        let Some(job) = self.job.clone() else { return };
        let said = engine::settled(&job.id, SETTLE_WAIT);
        self.exited = true;
        let (code, signal) = status.unwrap_or((None, Some(9)));
        // Cancelled by harn itself (a timeout, `work cancel`): the driver knows why.
        match ended_unannounced(said.as_ref(), self.cancelled, &job.id, &job.node) {
            Unannounced::Own => {}
            Unannounced::Fault(fault) => self.pending.push_back(SegmentEvent::EngineFault(fault)),
            Unannounced::Lost(fault) => {
                engine::cancel(&job.id);
                self.pending.push_back(SegmentEvent::EngineFault(fault));
            }
        }
        self.pending.push_back(SegmentEvent::Exited { code, signal });
    }

    /// Waits for srun to end (at most until `until`, then kills it): its code and signal.
    fn wait_step(&mut self, until: Instant) -> Option<(Option<i32>, Option<i32>)> {
        use std::os::unix::process::ExitStatusExt;
        let mut child = self.child.take()?;
        loop {
            match child.try_wait() {
                Ok(Some(s)) => return Some((s.code(), s.signal())),
                Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    let _ = child.kill();
                    return child.wait().ok().map(|s| (s.code(), s.signal()));
                }
            }
        }
    }

    /// Queues a line for the workflow.
    pub fn send(&mut self, line: &Value) {
        self.tell(&ToNode::Send { line: line.clone() });
    }

    /// Carries a signal to the node; a KILL of everything also cancels the job, so nothing
    /// of the segment outlives it even where the node no longer answers, and returns the
    /// record of that cancel.
    pub fn signal(&mut self, signal: SegmentSignal) -> Option<Value> {
        let signal = match signal {
            SegmentSignal::Term(Reach::Groups) => NodeSignal::Term,
            SegmentSignal::Term(Reach::Everything) => NodeSignal::TermAll,
            SegmentSignal::Kill(Reach::Groups) => NodeSignal::Kill,
            SegmentSignal::Kill(Reach::Everything) => NodeSignal::KillAll,
            SegmentSignal::Leftovers => NodeSignal::Leftovers,
        };
        self.tell(&ToNode::Signal { signal });
        let job = self.job.as_ref().filter(|_| signal == NodeSignal::KillAll && !self.exited)?;
        self.cancelled = true;
        engine::cancel(&job.id);
        Some(json!({
            "event": "run.engine_cancel", "engine": job.engine, "cluster": job.cluster,
            "job": job.id, "node": job.node,
        }))
    }

    /// Starts an agent call on the node.
    pub fn start_call(&mut self, call: Call) {
        let Call { id, dispatch, resume } = call;
        self.tell(&ToNode::Call { id, dispatch, resume });
    }

    /// Answers an agent's tool request on the node.
    pub fn answer_tool(&mut self, call: &str, verdict: Verdict, rules: Vec<String>) {
        self.tell(&ToNode::Answer { call: call.to_owned(), verdict, rules });
    }

    /// Waits (at most five seconds) for `call`'s end after a park cancelled its turn; what
    /// else comes meanwhile is kept for the driver.
    pub fn settle(&mut self, call: &str) {
        let until = Instant::now() + Duration::from_secs(5);
        let mut kept = VecDeque::new();
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            match self.next(Some(left)) {
                Some(SegmentEvent::AgentDone(id, _)) if id == call => break,
                Some(SegmentEvent::ToolAsk(id, _)) => {
                    self.answer_tool(&id, Verdict::Deny, Vec::new());
                }
                Some(event) => kept.push_back(event),
                None if self.closed => break,
                None => {}
            }
        }
        kept.extend(self.pending.drain(..));
        self.pending = kept;
    }

    /// Asks the node to end the segment and push; the limits its processes reached.
    pub fn limits_reached(&mut self) -> Vec<LimitReached> {
        self.finish();
        self.limits.clone().unwrap_or_default()
    }

    /// Tells the node the segment is over and waits for its push (or the step's end).
    fn finish(&mut self) {
        if self.to_node.is_none() {
            return;
        }
        self.tell(&ToNode::Finish);
        let until = Instant::now() + PUSH_WAIT;
        while self.pushed.is_none() && !self.closed {
            let left = until.saturating_duration_since(Instant::now());
            let Some(heard) = self.heard.as_ref() else { break };
            match heard.recv_timeout(left) {
                Ok(h) => self.hear(h),
                Err(_) => break,
            }
        }
        self.to_node = None;
    }

    /// Ends the segment: the node pushed (or could not), the step is waited for, and the
    /// node's work is brought into the item's worktree. Whatever could not be brought back
    /// is said, never attested as if it had been.
    pub fn end(&mut self, store: &Store, m: &RunManifest) -> Result<(), String> {
        self.finish();
        let ended = self.wait_step(Instant::now() + PUSH_WAIT);
        // An srun that had to be killed may leave its job behind: the cluster's to end, not
        // to keep. One that exited took its step with it.
        let killed = matches!(ended, Some((None, Some(_))));
        if let Some(job) = self.job.as_ref().filter(|_| killed) {
            if engine::live(&job.id) {
                engine::cancel(&job.id);
            }
        }
        if !self.stderr_tail.is_empty() {
            use std::io::Write;
            let dir = crate::os::private::Dir::open(store.root(), run_dir(&m.run_id), true);
            let appended = dir
                .and_then(|d| d.append("stderr.log"))
                .and_then(|mut f| f.write_all(&self.stderr_tail));
            if let Err(e) = appended {
                errln!("harn: warning: the workflow's stderr from its node was not kept: {e}");
            }
        }
        let Some(ws) = &m.workspace else { return Ok(()) };
        let open = m.containment.as_ref().is_some_and(|c| c.turned_off);
        match self.pushed.take() {
            // The engine ended the step (its fault is recorded): nothing came back, and the
            // worktree stays as the last segment left it.
            None if !self.said_exit => Ok(()),
            None => Err("the node did not push its work before its step ended".into()),
            Some(Err(e)) => Err(format!("the node could not push its work: {e}")),
            Some(Ok((head, wip))) if self.bundled => super::sync::bring_back_bundle(
                store.root(),
                ws,
                m.work_id.as_str(),
                &std::mem::take(&mut self.bundle),
                &head,
                wip.as_deref(),
                open,
            ),
            Some(Ok((head, wip))) => super::sync::bring_back(
                store.root(),
                ws,
                &self.cluster.spec.repository,
                m.work_id.as_str(),
                &head,
                wip.as_deref(),
                open,
            ),
        }
    }
}
