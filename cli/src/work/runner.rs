//! The workflow host: runs one attempt of a work item under its run lease. The attempt is
//! recorded and the manifest frozen before the workflow is spawned in its own process group;
//! its stdout is read as the JSON Lines protocol into a transcript, the core's fold decides
//! every reply and the proof, and the proof is written for success and failure alike.

use super::agent_call::{call, CallContext, CallGroups};
use super::store::{run_dir, Store, StoreError};
use harn_core::ids::Id;
use harn_core::journal::JournalWriter;
use harn_core::work::events::EventKind;
use harn_core::work::projection::FailureClass;
use harn_core::workflow::agent::{CallOutcome, HarnessSpec};
use harn_core::workflow::protocol::{FromWorkflow, LineReader};
use harn_core::workflow::run::{
    may_start, Billing, FrozenHarness, HostAction, ProcessEnd, Proof, RunFold, RunManifest,
    RUN_VERSION,
};
use harn_core::workflow::team::Dispatch;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Why an attempt did not end in a proof.
#[derive(Debug)]
pub enum Refusal {
    /// Nothing was recorded: the item may not start an attempt now.
    NotNow(String),
    /// A record could not be read or written.
    Store(StoreError),
}

impl From<StoreError> for Refusal {
    fn from(e: StoreError) -> Refusal {
        Refusal::Store(e)
    }
}

/// What a run is started with, besides the work item.
#[derive(Clone, Debug)]
pub struct RunLimits {
    /// The whole run's wall-clock budget.
    pub timeout: Duration,
    /// Agent calls in flight at once.
    pub concurrency: usize,
    /// The harness that answers agent calls, if any.
    pub harness: Option<FrozenHarness>,
    /// The specialist team.
    pub team: harn_core::workflow::team::Team,
    /// Every other harness the team names.
    pub harnesses: BTreeMap<String, HarnessSpec>,
    /// Most agent calls.
    pub max_agents: u32,
    /// Which account calls may bill.
    pub billing: Billing,
}

/// Runs one attempt of `id` (a retry when `retry`); returns its run id and proof.
pub fn run_attempt(
    store: &mut Store,
    id: &Id,
    retry: bool,
    limits: &RunLimits,
    actor: &str,
) -> Result<(Id, Proof), Refusal> {
    store.lock_run(id)?;
    // The history lock is held from this read to `attempt.started`, so a cancel or a reopen
    // cannot land between the decision to start and its record.
    let (lock, item) = store.lock_and_read(id)?;
    check_digest(&item.intent.workflow.path, &item.intent.workflow.sha256)
        .map_err(Refusal::NotNow)?;
    let trigger = may_start(&item.projection, retry)
        .map_err(|why| Refusal::NotNow(format!("cannot start an attempt of {id}: {why}")))?;
    let mut known = BTreeMap::new();
    let prerequisites = item
        .intent
        .dependencies
        .iter()
        .filter_map(|d| {
            let seq = store.read(d, &mut known).ok()?.projection.accepted_seq?;
            Some((d.clone(), seq))
        })
        .collect();
    let prior = match (&item.projection.latest_run_id, retry) {
        (Some(run), true) => store.run_records(run)?.1,
        _ => None,
    };
    let run_id = store.new_run_id();
    let attempt = item.projection.attempts_used + 1;
    let started =
        EventKind::AttemptStarted { run_id: run_id.clone(), attempt, trigger, prerequisites };
    store.append(&lock, started, actor, None)?;
    drop(lock);
    let manifest = RunManifest {
        schema_version: RUN_VERSION,
        run_id: run_id.clone(),
        work_id: id.clone(),
        attempt,
        trigger,
        started_at: store.now(),
        script: item.intent.workflow.clone(),
        timeout_ms: limits.timeout.as_millis() as u64,
        harness: limits.harness.clone(),
        team: limits.team.clone(),
        harnesses: limits.harnesses.clone(),
        max_agents: Some(limits.max_agents),
        billing: limits.billing,
    };
    store.write_run_record(&run_id, "run.json", &manifest)?;
    let start = manifest.start_line(&item.intent, prior.as_ref());
    let (fold, end) = host(store, &manifest, &start, limits)?;
    let proof = fold.finish(&manifest, &item.intent, &end, store.now());
    store.write_run_record(&run_id, "proof.json", &proof)?;
    store.reconcile(id, actor)?;
    Ok((run_id, proof))
}

/// Refuses a workflow that is gone or differs from the bytes the item was frozen with.
fn check_digest(path: &str, frozen: &str) -> Result<(), String> {
    let bytes = std::fs::read(path)
        .map_err(|e| format!("workflow {path}: {e}; no attempt was recorded"))?;
    let now: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    if now != frozen {
        return Err(format!(
            "workflow {path} changed since the work item was frozen (sha256 {} now, {} then); \
             create a new work item; no attempt was recorded",
            &now[..12],
            &frozen[..12.min(frozen.len())]
        ));
    }
    Ok(())
}

/// What the host loop waits for.
enum HostEvent {
    /// A line of the workflow's stdout.
    Line(Result<FromWorkflow, String>),
    /// The end of the workflow's stdout.
    Eof,
    /// An agent call ended.
    AgentDone(String, CallOutcome),
    /// The workflow process ended.
    Exited(std::io::Result<std::process::ExitStatus>),
}

/// How long output may still arrive after the workflow exits.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// Spawns the workflow and carries its conversation to the end.
fn host(
    store: &mut Store,
    m: &RunManifest,
    start: &Value,
    limits: &RunLimits,
) -> Result<(RunFold, ProcessEnd), StoreError> {
    let mut fold = m.fold();
    let mut transcript = Transcript::open(store, &m.run_id)?;
    let mut child = match spawn(store, m) {
        Ok(child) => child,
        Err(e) => {
            let missing = e.kind() == std::io::ErrorKind::NotFound;
            let error = format!("{}: {e}", program(m));
            let end = ProcessEnd::SpawnFailed { error, missing };
            transcript
                .record(store, json!({ "event": "run.spawn_failed", "error": e.to_string() }))?;
            return Ok((fold, end));
        }
    };
    let pgid = child.id() as i32;
    let agents = Arc::new(Mutex::new(CallGroups::default()));
    // However the host leaves this function, the workflow's group and its calls' groups go.
    let _groups = Groups { workflow: pgid, agents: agents.clone() };
    let stdin = writer(child.stdin.take().expect("stdin is piped"));
    // Bounded, so a workflow that floods its stdout is slowed down rather than buffered.
    let (tx, events) = mpsc::sync_channel(256);
    read_lines(child.stdout.take().expect("stdout is piped"), tx.clone());
    transcript.record(store, json!({ "event": "run.start", "pid": pgid, "start": start }))?;
    send(&stdin, start);
    let waiter = tx.clone();
    std::thread::spawn(move || {
        let status = child.wait();
        let _ = waiter.send(HostEvent::Exited(status));
    });
    let deadline = Instant::now() + limits.timeout;
    let (mut timed_out, mut eof) = (false, false);
    let mut exited: Option<(std::io::Result<std::process::ExitStatus>, Instant)> = None;
    let mut calls =
        Calls { queued: Vec::new(), in_flight: 0, concurrency: limits.concurrency, agents };
    loop {
        if !timed_out && Instant::now() >= deadline {
            // Checked before every receive, so a flood of output cannot postpone it.
            timed_out = true;
            calls.queued.clear();
            kill_groups(pgid, &calls.agents);
            transcript.record(store, json!({ "event": "run.timed_out" }))?;
        }
        // Output still buffered when the workflow exits gets a moment; a descendant that
        // escaped the group and holds stdout open does not keep the run alive.
        let output_done = eof || exited.as_ref().is_some_and(|(_, at)| at.elapsed() >= EXIT_GRACE);
        if exited.is_some() && output_done && calls.in_flight == 0 {
            break;
        }
        let mut wake = if timed_out { None } else { Some(deadline) };
        if let Some((_, at)) = &exited {
            wake = Some(wake.map_or(*at + EXIT_GRACE, |w| w.min(*at + EXIT_GRACE)));
        }
        let event = match wake {
            None => events.recv().expect("the host holds a sender"),
            Some(w) => match events.recv_timeout(w.saturating_duration_since(Instant::now())) {
                Ok(event) => event,
                Err(_) => continue,
            },
        };
        match event {
            HostEvent::Line(msg) => {
                let body = match &msg {
                    Ok(m) => json!({ "event": "workflow.message", "message": m }),
                    Err(e) => json!({ "event": "workflow.malformed", "error": e }),
                };
                transcript.record(store, body)?;
                match fold.observe(msg) {
                    Some(HostAction::Reply(reply)) => {
                        transcript
                            .record(store, json!({ "event": "host.reply", "reply": reply }))?;
                        send(&stdin, &reply);
                    }
                    Some(HostAction::CallAgent { id, dispatch }) => {
                        let body = json!({
                            "event": "agent.start", "id": id, "harness": dispatch.harness,
                        });
                        transcript.record(store, body)?;
                        calls.queued.push((id, dispatch));
                    }
                    None => {}
                }
            }
            HostEvent::Eof => {
                eof = true;
                calls.queued.clear(); // Nobody is left to read their replies.
            }
            HostEvent::Exited(status) => {
                exited = Some((status, Instant::now()));
                // Whatever the workflow left behind in its group goes with it.
                kill_group(pgid);
            }
            HostEvent::AgentDone(id, outcome) => {
                calls.in_flight -= 1;
                let body = json!({
                    "event": "agent.end", "id": id, "ok": outcome.ok, "error": outcome.error,
                    "class": outcome.class,
                });
                transcript.record(store, body)?;
                let reply = fold.agent_done(&id, outcome);
                send(&stdin, &reply);
            }
        }
        if !timed_out {
            calls.dispatch(store, m, &tx);
        }
    }
    drop(stdin);
    let (status, _) = exited.expect("the loop ends after the exit");
    let status = status.map_err(|e| StoreError(format!("waiting for the workflow: {e}")))?;
    let end = ProcessEnd::Exited { code: status.code(), signal: status.signal(), timed_out };
    let body = json!({ "event": "run.end", "exit_code": status.code(), "signal": status.signal() });
    transcript.record(store, body)?;
    Ok((fold, end))
}

/// Agent calls waiting for a slot, and how many are running.
struct Calls {
    queued: Vec<(String, Dispatch)>,
    in_flight: usize,
    concurrency: usize,
    /// Process groups of the calls running now.
    agents: Arc<Mutex<CallGroups>>,
}

impl Calls {
    /// Starts queued calls, in the order they were asked for, up to the concurrency bound.
    fn dispatch(&mut self, store: &Store, m: &RunManifest, tx: &mpsc::SyncSender<HostEvent>) {
        while self.in_flight < self.concurrency && !self.queued.is_empty() {
            let (id, dispatch) = self.queued.remove(0);
            let spec = m.harness_spec(&dispatch.harness).cloned();
            let (tx, root) = (tx.clone(), store.root().to_owned());
            let (run_id, agents) = (m.run_id.to_string(), self.agents.clone());
            let billing = m.billing;
            self.in_flight += 1;
            std::thread::spawn(move || {
                let outcome = match spec {
                    Some(spec) => {
                        call_with_retries(&root, &dispatch, &spec, &run_id, billing, &agents)
                    }
                    // Every harness the team names is frozen at the start; this is a bug.
                    None => CallOutcome {
                        ok: false,
                        text: None,
                        error: Some(format!("harness {} was not frozen", dispatch.harness)),
                        class: None,
                    },
                };
                let _ = tx.send(HostEvent::AgentDone(id, outcome));
            });
        }
    }
}

/// Runs a call up to its attempts: a usable reply or a missing program ends it at once.
fn call_with_retries(
    root: &std::path::Path,
    d: &Dispatch,
    spec: &HarnessSpec,
    run_id: &str,
    billing: Billing,
    agents: &Mutex<CallGroups>,
) -> CallOutcome {
    let ctx = CallContext { root, run_id, billing, running: agents };
    let once = || call(&ctx, &d.harness, spec, &d.profile, &d.prompt);
    let mut outcome = once();
    for _ in 1..d.max_attempts {
        let over = agents.lock().unwrap_or_else(|e| e.into_inner()).cancelled;
        if outcome.ok || outcome.class == Some(FailureClass::Environment) || over {
            break;
        }
        outcome = once();
    }
    outcome
}

/// The Node runner that hands a `.mjs`/`.js` workflow module its context object.
const NODE_RUNNER: &str = include_str!("node/runner.mjs");

/// True when the workflow is a JavaScript module, run through `node` and [`NODE_RUNNER`].
fn is_module(path: &str) -> bool {
    path.ends_with(".mjs") || path.ends_with(".js")
}

/// The program a run starts: the workflow itself, or `node` for a module.
fn program(m: &RunManifest) -> &str {
    if is_module(&m.script.path) {
        "node"
    } else {
        &m.script.path
    }
}

fn spawn(store: &mut Store, m: &RunManifest) -> std::io::Result<Child> {
    use std::os::unix::fs::OpenOptionsExt;
    let stderr = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(store.root().join(format!("{}/stderr.log", run_dir(&m.run_id))))?;
    let mut command = if is_module(&m.script.path) {
        let runner = format!("{}/node-runner.mjs", run_dir(&m.run_id));
        store
            .write_file(&runner, NODE_RUNNER.as_bytes())
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let mut node = Command::new("node");
        node.arg(store.root().join(&runner)).arg(&m.script.path);
        node
    } else {
        Command::new(&m.script.path)
    };
    command
        .current_dir(store.root())
        .env("HARN_RUN_ID", m.run_id.as_str())
        .env("HARN_WORK_ID", m.work_id.as_str())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .process_group(0);
    // SAFETY: the closure runs between fork and exec and only makes one async-signal-safe
    // system call. A host that dies takes its workflow with it: the attempt is then lost
    // (its lease is gone, it has no proof) and must not be left running unseen.
    unsafe {
        command.pre_exec(|| {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
                .map_err(std::io::Error::from)
        });
    }
    command.spawn()
}

/// Reads the workflow's messages on a thread, so the host can wait with a deadline; ends
/// with [`HostEvent::Eof`].
fn read_lines(mut out: std::process::ChildStdout, tx: mpsc::SyncSender<HostEvent>) {
    std::thread::spawn(move || {
        let mut reader = LineReader::default();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match out.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            for msg in reader.feed(&buf[..n]) {
                if tx.send(HostEvent::Line(msg.map_err(|e| e.to_string()))).is_err() {
                    return;
                }
            }
        }
        if let Some(msg) = reader.finish() {
            let _ = tx.send(HostEvent::Line(msg.map_err(|e| e.to_string())));
        }
        let _ = tx.send(HostEvent::Eof);
    });
}

/// Writes lines to the workflow's stdin on a thread, so a workflow that does not read cannot
/// block the host (and its timeout) on a full pipe. Dropping the sender closes stdin.
fn writer(mut pipe: std::process::ChildStdin) -> mpsc::Sender<Vec<u8>> {
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        super::agent_call::block_sigpipe();
        for bytes in rx {
            if pipe.write_all(&bytes).and_then(|()| pipe.flush()).is_err() {
                return; // It closed its stdin or is gone: later replies have no reader.
            }
        }
    });
    tx
}

/// Queues one line for the workflow.
fn send(stdin: &mpsc::Sender<Vec<u8>>, line: &Value) {
    let mut bytes = serde_json::to_vec(line).expect("replies serialize");
    bytes.push(b'\n');
    let _ = stdin.send(bytes);
}

/// Kills the workflow's group and every running call's group when dropped.
struct Groups {
    workflow: i32,
    agents: Arc<Mutex<CallGroups>>,
}

impl Drop for Groups {
    fn drop(&mut self) {
        kill_groups(self.workflow, &self.agents);
    }
}

fn kill_groups(workflow: i32, agents: &Mutex<CallGroups>) {
    kill_group(workflow);
    let mut calls = agents.lock().unwrap_or_else(|e| e.into_inner());
    calls.cancelled = true;
    for &pgid in &calls.groups {
        kill_group(pgid);
    }
}

fn kill_group(pgid: i32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pgid) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// The run's transcript journal (`transcript.jsonl`), one synced line per record.
struct Transcript {
    path: String,
    writer: JournalWriter,
    run_id: Id,
}

impl Transcript {
    fn open(store: &mut Store, run_id: &Id) -> Result<Transcript, StoreError> {
        let path = format!("{}/transcript.jsonl", run_dir(run_id));
        let writer = store.open_journal(&path)?;
        Ok(Transcript { path, writer, run_id: run_id.clone() })
    }

    fn record(&mut self, store: &mut Store, mut body: Value) -> Result<(), StoreError> {
        body["run_id"] = json!(self.run_id);
        store.append_journal(&self.path, &mut self.writer, &body)
    }
}
