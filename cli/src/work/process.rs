//! The workflow's process: spawned in its own process group with a parent-death signal, its
//! stdout read as protocol lines on a thread, its stdin written on another, and its group
//! (and its agent calls' groups) killed however the host leaves.

use super::agent_call::CallGroups;
use crate::os::store::{run_dir, Store};
use harn_core::work::protocol::LineReader;
use harn_core::work::run::RunManifest;
use serde_json::Value;
use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};

use super::inbox::HostEvent;

/// The Node runner that hands a `.mjs`/`.js` workflow module its context object.
const NODE_RUNNER: &str = include_str!("node/runner.mjs");
/// Its module hooks, which run the module from the run's frozen copy.
const NODE_HOOKS: &str = include_str!("node/hooks.mjs");

/// True when the workflow is a JavaScript module, run through `node` and [`NODE_RUNNER`].
pub fn is_module(path: &str) -> bool {
    path.ends_with(".mjs") || path.ends_with(".js")
}

/// The program a run starts: the workflow itself, or `node` for a module.
pub fn program(m: &RunManifest) -> &str {
    if is_module(&m.script.path) {
        "node"
    } else {
        &m.script.path
    }
}

pub fn spawn(
    store: &mut Store,
    m: &RunManifest,
    confine: &super::confine::Confine,
) -> std::io::Result<Child> {
    if crate::os::children::forced() {
        return Err(std::io::Error::other(crate::os::children::stopping()));
    }
    // Opened before the spawn, so a run that cannot keep its log never starts.
    let log = store.root().join(format!("{}/stderr.log", run_dir(&m.run_id)));
    let stderr = crate::os::logs::LogSink::open(store.root(), log, STDERR_ROTATION)?;
    // What runs is the run's copy of the frozen bytes, never the file at the frozen path.
    let copy = super::frozen::install(store, m).map_err(std::io::Error::other)?;
    let mut command = if is_module(&m.script.path) {
        let dir = run_dir(&m.run_id);
        let (runner, hooks) = (format!("{dir}/node-runner.mjs"), format!("{dir}/hooks.mjs"));
        for (path, text) in [(&runner, NODE_RUNNER), (&hooks, NODE_HOOKS)] {
            store
                .write_file(path, text.as_bytes())
                .map_err(|e| std::io::Error::other(e.to_string()))?;
        }
        let mut node = Command::new("node");
        node.arg(store.root().join(&runner)).arg(&m.script.path).arg(&copy);
        node
    } else {
        Command::new(&copy)
    };
    command
        .current_dir(m.cwd.as_deref().map_or_else(|| store.root().to_owned(), Into::into))
        .env("HARN_RUN_ID", m.run_id.as_str())
        .env("HARN_WORK_ID", m.work_id.as_str())
        // The copy runs from the run directory; this is where the frozen file lives, for a
        // script that finds its siblings from its own path.
        .env("HARN_WORKFLOW", &m.script.path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Subscription billing holds for the workflow too: a workflow that calls an agent
    // program itself must not find an API key to bill.
    if m.billing == harn_core::work::run::Billing::Subscription {
        for var in harn_core::work::agent::API_KEY_VARS {
            command.env_remove(var);
        }
    }
    // Into the segment's cgroup, with the parent-death signal: a host that dies takes its
    // workflow with it, and what the workflow left is reaped by the next runner.
    confine.apply(&mut command)?;
    let mut child = command.spawn()?;
    copy_stderr(child.stderr.take().expect("stderr is piped"), stderr);
    Ok(child)
}

/// A run's stderr log rotates at 8 MiB and keeps one older file: at most 16 MiB a run, the
/// newest output kept.
const STDERR_ROTATION: crate::os::logs::Rotation =
    crate::os::logs::Rotation { max_file_bytes: 8 << 20, keep: 1 };

/// Copies the workflow's stderr into its rotating log on a thread, until every writer of the
/// pipe is gone.
fn copy_stderr(
    mut from: std::process::ChildStderr,
    sink: std::sync::Arc<std::sync::Mutex<crate::os::logs::LogSink>>,
) {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = from.read(&mut buf) {
            let _ = sink.lock().unwrap_or_else(|e| e.into_inner()).write(&buf[..n]);
        }
    });
}

/// Reads the workflow's messages on a thread, so the host can wait with a deadline; ends
/// with [`HostEvent::Eof`].
pub fn read_lines(mut out: std::process::ChildStdout, tx: mpsc::SyncSender<HostEvent>) {
    std::thread::spawn(move || {
        let mut reader = LineReader::default();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match out.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            for msg in reader.feed(&buf[..n]) {
                if tx.send(HostEvent::Line(msg)).is_err() {
                    return;
                }
            }
        }
        if let Some(msg) = reader.finish() {
            let _ = tx.send(HostEvent::Line(msg));
        }
        let _ = tx.send(HostEvent::Eof);
    });
}

/// Reads the workflow's stdout as bytes on a thread, for a host that relays them to a
/// coordinator which reads the lines; ends with [`HostEvent::Eof`].
pub fn read_raw(mut out: std::process::ChildStdout, tx: mpsc::SyncSender<HostEvent>) {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match out.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if tx.send(HostEvent::Raw(buf[..n].to_vec())).is_err() {
                return;
            }
        }
        let _ = tx.send(HostEvent::Eof);
    });
}

/// Writes lines to the workflow's stdin on a thread, so a workflow that does not read cannot
/// block the host (and its timeout) on a full pipe. Dropping the sender closes stdin.
pub fn writer(mut pipe: std::process::ChildStdin) -> mpsc::Sender<Vec<u8>> {
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        crate::os::children::block_sigpipe();
        for bytes in rx {
            if pipe.write_all(&bytes).and_then(|()| pipe.flush()).is_err() {
                return; // It closed its stdin or is gone: later replies have no reader.
            }
        }
    });
    tx
}

/// Queues one line for the workflow.
pub fn send(stdin: &mpsc::Sender<Vec<u8>>, line: &Value) {
    let mut bytes = serde_json::to_vec(line).expect("replies serialize");
    bytes.push(b'\n');
    let _ = stdin.send(bytes);
}

/// Kills the workflow's group and every running call's group when dropped.
pub struct Groups {
    pub workflow: i32,
    pub agents: Arc<Mutex<CallGroups>>,
}

impl Drop for Groups {
    fn drop(&mut self) {
        kill_groups(self.workflow, &self.agents);
    }
}

pub fn kill_groups(workflow: i32, agents: &Mutex<CallGroups>) {
    signal_groups(workflow, agents, rustix::process::Signal::KILL);
}

/// Sends `sig` to the workflow's group and every running call's group; no new call starts.
pub fn signal_groups(workflow: i32, agents: &Mutex<CallGroups>, sig: rustix::process::Signal) {
    signal_group(workflow, sig);
    let mut calls = agents.lock().unwrap_or_else(|e| e.into_inner());
    calls.cancelled = true;
    for &pgid in &calls.groups {
        signal_group(pgid, sig);
    }
}

fn signal_group(pgid: i32, sig: rustix::process::Signal) {
    if let Some(pid) = rustix::process::Pid::from_raw(pgid) {
        let _ = rustix::process::kill_process_group(pid, sig);
    }
}

pub fn kill_group(pgid: i32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pgid) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}
