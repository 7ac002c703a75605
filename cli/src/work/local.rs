//! A segment's processes on the machine it runs on: the workflow spawned in its confinement
//! and cgroup, its lines and exit and its agent calls' ends gathered on one channel, and the
//! signals, replies and answers the driver decides carried out. The coordinator's host of a
//! local run (`host`) and a cluster node's runner (`remote::node`) both hold one; neither
//! decides anything here.

use super::agent_call::CallGroups;
use super::calls::Calls;
use super::confine::{Confine, Temp};
use super::hold::RunHold;
use super::inbox::HostEvent;
use super::process::{
    kill_group, kill_groups, program, read_lines, read_raw, send, signal_groups, spawn, writer,
    Groups,
};
use crate::os::store::Store;
use harn_core::limits::LimitReached;
use harn_core::work::containment::guard::Guard;
use harn_core::work::containment::{self, Containment, Need};
use harn_core::work::policy::Verdict;
use harn_core::work::run::RunManifest;
use harn_core::work::segment::driver::{Call, SegmentSignal, SpawnFailed};
use harn_core::work::segment::Reach;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// Longest wait, once a run parks on an agent's tool call, for the agent to end its
/// cancelled turn before the segment's processes are killed.
const PARK_GRACE: Duration = Duration::from_secs(5);

/// How the workflow's standard output reaches the channel.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// As protocol lines, read here.
    Lines,
    /// As the bytes came, for a coordinator to read.
    Raw,
}

/// What a spawned workflow keeps alive until the segment ends. Fields drop in this order:
/// the groups are killed before the children's tracking forgets them.
struct Spawned {
    groups: Groups,
    /// The run's way out, while it runs.
    proxy: Option<super::proxy::Proxy>,
    _registered: crate::os::children::Registered,
    _tracked: crate::os::children::Tracked,
    _temp: Temp,
    stdin: mpsc::Sender<Vec<u8>>,
    tx: mpsc::SyncSender<HostEvent>,
    events: mpsc::Receiver<HostEvent>,
    calls: Calls,
}

/// The segment's processes: the run's hold of them, and what was spawned.
pub struct Local {
    /// The segment's cgroup (or its process groups alone) and its limits.
    pub hold: RunHold,
    live: Option<Spawned>,
    /// The answer each agent's pending tool request waits for.
    answers: BTreeMap<String, mpsc::Sender<(Verdict, Vec<String>)>>,
}

impl Local {
    /// Nothing spawned yet, held by `hold`.
    pub fn new(hold: RunHold) -> Local {
        Local { hold, live: None, answers: BTreeMap::new() }
    }

    fn live(&self) -> &Spawned {
        self.live.as_ref().expect("the driver asks this only of a spawned workflow")
    }

    /// Spawns the workflow confined as `m` says, in the workspace `m.cwd` names (else the
    /// store's root): the fields its spawn record carries, or why it could not start.
    pub fn spawn(
        &mut self,
        store: &mut Store,
        m: &RunManifest,
        guarded: &Guard,
        output: Output,
    ) -> Result<Map<String, Value>, SpawnFailed> {
        let confined = confinement(store, m, &self.hold, guarded);
        let spawned = match &confined {
            Ok((confine, _, _, _)) => spawn(store, m, confine),
            Err(e) => Err(std::io::Error::other(e.to_string())),
        };
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                let missing = e.kind() == std::io::ErrorKind::NotFound;
                let (error, program) = (e.to_string(), program(m).to_owned());
                return Err(SpawnFailed { error, program, missing });
            }
        };
        let (confine, temp, contained, proxy) = confined.expect("spawned, so confined as planned");
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
        let stdout = child.stdout.take().expect("stdout is piped");
        match output {
            Output::Lines => read_lines(stdout, tx.clone()),
            Output::Raw => read_raw(stdout, tx.clone()),
        }
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
            proxy,
            _registered: registered,
            _tracked: tracked,
            _temp: temp,
            stdin,
            tx,
            events,
            calls: Calls::new(agents, confine),
        });
        Ok(fields)
    }

    /// The segment's temporary directory, once its workflow started.
    pub fn temp_dir(&self) -> Option<std::path::PathBuf> {
        self.live.as_ref().map(|l| l._temp.0.clone())
    }

    /// The next event, waiting at most `wait` (forever when `None`); `None` when the wait
    /// ran out.
    pub fn next(&mut self, wait: Option<Duration>) -> Option<HostEvent> {
        let events = &self.live().events;
        match wait {
            None => Some(events.recv().expect("the host holds a sender")),
            Some(wait) => events.recv_timeout(wait).ok(),
        }
    }

    /// Carries every event of `from` onto the segment's own channel, so one wait serves
    /// both (a node's runner hears its coordinator there).
    pub fn forward(&self, from: mpsc::Receiver<HostEvent>) {
        let tx = self.live().tx.clone();
        std::thread::spawn(move || {
            for event in from {
                if tx.send(event).is_err() {
                    return;
                }
            }
        });
    }

    /// Holds `answer` for the tool request of `call` until the driver rules on it.
    pub fn awaiting(&mut self, call: String, answer: mpsc::Sender<(Verdict, Vec<String>)>) {
        self.answers.insert(call, answer);
    }

    /// Queues a line for the workflow.
    pub fn send(&self, line: &Value) {
        send(&self.live().stdin, line);
    }

    /// Carries out a signal the driver decided.
    pub fn signal(&mut self, signal: SegmentSignal) {
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

    /// Starts an agent call; its end comes as an event.
    pub fn start_call(&self, store: &Store, m: &RunManifest, call: Call) {
        let live = self.live();
        live.calls.start(store, m, &live.tx, call);
    }

    /// Answers an agent's pending tool request.
    pub fn answer_tool(&mut self, call: &str, verdict: Verdict, rules: Vec<String>) {
        if let Some(answer) = self.answers.remove(call) {
            let _ = answer.send((verdict, rules));
        }
    }

    /// Waits (at most [`PARK_GRACE`]) for `call` to end after its turn was cancelled for a
    /// park. Its end is not recorded: the call is asked again, and continues its session,
    /// when the ruling resumes the run.
    pub fn settle(&mut self, call: &str) {
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

    /// The limits the segment's processes reached, as the kernel counted them.
    pub fn limits_reached(&mut self) -> Vec<LimitReached> {
        self.hold.bounded.reached()
    }

    /// The connections the run's proxy refused so far.
    pub fn network_refused(&self) -> Vec<super::proxy::Refused> {
        self.live.as_ref().and_then(|l| l.proxy.as_ref()).map(|p| p.refused()).unwrap_or_default()
    }

    /// Ends everything the segment started, however it ended.
    pub fn end(&mut self) {
        self.live = None;
        self.hold.end();
    }
}

/// The limits the kernel holds, with the disk limit and how it is held (measured by harn, on a
/// local segment: `work::disk`).
fn with_disk(kernel: Option<String>, m: &RunManifest) -> Option<String> {
    let Some(disk) = m.resource_limits.and_then(|l| l.disk) else { return kernel };
    let every = harn_core::limits::DISK_WATCH_INTERVAL.as_millis() / 1000;
    let what = match m.workspace.as_ref().is_some_and(|w| w.own) {
        true => "its repository and temporary directory",
        false => "its temporary directory",
    };
    let disk =
        format!("disk {} ({what}, measured every {every} s)", harn_core::limits::show_bytes(disk));
    Some(match kernel {
        Some(k) => format!("{k}; {disk}"),
        None => disk,
    })
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
) -> Result<(Confine, Temp, Containment, Option<super::proxy::Proxy>), String> {
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
    let (network, net, proxy) = super::network::hold(m, &plan, &temp.0)?;
    let confine = Confine::prepare(&plan, hold.leaf.clone(), Some(temp.0.clone()), tmpfs)?
        .keeping(planned.env.clone())
        .joining(hold.bounded.joins().to_vec())
        .limiting_processes(nproc)
        .networked(net);
    let record = Containment {
        holding: hold.holding(),
        holding_why: hold.why_not.clone(),
        limits: with_disk(hold.bounded.summary(), m),
        unenforced,
        writable: planned.writable,
        env: planned.env,
        turned_off: planned.turned_off,
        network,
        ..plan.record
    };
    Ok((confine, temp, record, proxy))
}
