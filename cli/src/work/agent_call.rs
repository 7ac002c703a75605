//! One agent call over real processes: the harness's argv (its adapter's flags for the call's
//! options) in its own process group, the prompt on stdin, its output read line by line as it
//! arrives (each line's progress handed to the host, a silence past the idle timeout ending
//! the call), killed with its group at the timeout or when the host dies. How the call ended
//! is classified by the core.

use super::acp_session::{Judge, Session};
use harn_core::work::adapter::{self, CallOptions, Kind};
use harn_core::work::agent::{classify, AdapterSpec, CallEnd, CallOutcome, API_KEY_VARS};
use harn_core::work::policy::{Request, Verdict};
use harn_core::work::run::Billing;
use harn_core::work::team::Specialist;
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{BufRead, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

/// Longest failure text kept from an agent's stderr.
const OUTPUT_MAX: u64 = 4 << 20;

/// The process groups of a run's calls in flight, and whether the run has ended, so a call
/// starting after the run's timeout is killed at once and not retried.
#[derive(Debug, Default)]
pub struct CallGroups {
    /// Process groups of calls running now.
    pub groups: BTreeSet<i32>,
    /// True once the run is over.
    pub cancelled: bool,
}

/// What every call of one run shares.
pub struct CallContext<'a> {
    /// The calls' working directory (the run's `cwd`, else the coordination root).
    pub root: &'a Path,
    /// The run, passed on as `HARN_RUN_ID`.
    pub run_id: &'a str,
    /// Which account the calls may bill.
    pub billing: Billing,
    /// The run's calls in flight.
    pub running: &'a Mutex<CallGroups>,
    /// Gets what each line of a streaming call shows (a tool used, a turn ended).
    pub progress: &'a (dyn Fn(Value) + Sync),
    /// The run segment's confinement, which every call starts inside.
    pub confine: &'a super::confine::Confine,
    /// The run's frozen policy, which judges each tool call an `acp` agent asks about.
    pub policy: Option<&'a harn_core::work::policy::FrozenPolicy>,
    /// The run segment's host, which judges those tool calls in the run's policy slots
    /// (and may park the run on one); none outside a run (a planner, a reviewer).
    pub tool_host: Option<&'a (dyn Fn(Request) -> (Verdict, Vec<String>) + Sync)>,
}

/// One call: which harness, with which profile and options.
pub struct CallSpec<'a> {
    /// The harness's name, for messages.
    pub name: &'a str,
    /// How to run it.
    pub spec: &'a AdapterSpec,
    /// The specialist's profile (model, effort, turns, timeouts, access).
    pub profile: &'a Specialist,
    /// The reply's JSON schema, when the request has one.
    pub schema: Option<&'a Value>,
    /// The same schema in a file, for an adapter that reads it from one.
    pub schema_file: Option<&'a str>,
    /// The vendor session to continue.
    pub resume: Option<&'a str>,
    /// The longest this try may take: what is left of the call's time after its earlier
    /// tries (at most the profile's timeout).
    pub limit_ms: u64,
}

/// Runs one call and classifies it. Its process group is in the context's `running` while
/// it runs, so the host can kill it when the whole run times out.
pub fn call(ctx: &CallContext<'_>, c: &CallSpec<'_>, prompt: &str) -> CallOutcome {
    let started = Instant::now();
    let mut outcome = run_once(ctx, c, prompt);
    outcome.elapsed_ms = Some(started.elapsed().as_millis() as u64);
    outcome
}

fn run_once(ctx: &CallContext<'_>, c: &CallSpec<'_>, prompt: &str) -> CallOutcome {
    let CallContext { root, run_id, billing, running, progress, confine, .. } = *ctx;
    let (spec, profile) = (c.spec, c.profile);
    let timeout_ms = profile.timeout_ms.unwrap_or(spec.timeout_ms).min(c.limit_ms);
    let idle_ms = profile.idle_timeout_ms.unwrap_or(spec.idle_timeout_ms);
    let started = Instant::now();
    let options = CallOptions {
        model: profile.model.as_deref(),
        effort: profile.effort.as_deref(),
        max_turns: profile.max_turns,
        access: profile.access,
        schema: c.schema,
        schema_file: c.schema_file,
        resume: c.resume,
        writable: &confine.writable,
    };
    let argv = adapter::argv(spec.kind, &spec.command, &options);
    let mut command = Command::new(&argv[0]);
    command
        .args(&argv[1..])
        .current_dir(root)
        .env("HARN_RUN_ID", run_id)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command.envs(adapter::env(spec.kind, &options));
    if billing == Billing::Subscription {
        for var in API_KEY_VARS {
            command.env_remove(var);
        }
    }
    let spawned = if crate::os::children::forced() {
        Err(std::io::Error::other(crate::os::children::stopping()))
    } else {
        let own = adapter::sandbox_mounts(spec.kind).then(|| confine.for_own_sandbox());
        own.as_ref().unwrap_or(confine).apply(&mut command).and_then(|()| command.spawn())
    };
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return classify(
                c.name,
                spec,
                timeout_ms,
                &CallEnd { missing: true, ..CallEnd::default() },
            );
        }
        Err(e) => {
            let end = CallEnd { spawn_error: Some(e.to_string()), ..CallEnd::default() };
            return classify(c.name, spec, timeout_ms, &end);
        }
    };
    let pgid = child.id() as i32;
    let _tracked = crate::os::children::track(pgid);
    {
        let mut calls = running.lock().unwrap_or_else(|e| e.into_inner());
        calls.groups.insert(pgid);
        if calls.cancelled {
            kill_group(pgid); // The run ended while this call was starting.
        }
    }
    let stdin = child.stdin.take().expect("stdin is piped");
    // An ACP agent gets its prompt in a session; any other, on stdin.
    let mut session = None;
    if spec.kind == Kind::Acp {
        let cwd = root.display().to_string();
        session = Some(Session::start(stdin, prompt, &cwd, c.resume, spec));
    } else {
        let (mut stdin, prompt) = (stdin, prompt.to_owned());
        // A harness that never reads its stdin must not block the host: write on a thread.
        std::thread::spawn(move || {
            crate::os::children::block_sigpipe();
            let _ = stdin.write_all(prompt.as_bytes());
        });
    }
    let judge = Judge {
        policy: ctx.policy.map(|p| &p.policy),
        host: ctx.tool_host,
        read_only: profile.access == harn_core::work::adapter::Access::ReadOnly,
        api_billing: billing == Billing::Api,
        note: progress,
    };
    // Bounded: a program that floods its stdout waits for the host rather than filling memory.
    let (lines_tx, lines) = mpsc::sync_channel::<Line>(256);
    read_stdout(child.stdout.take().expect("stdout is piped"), lines_tx.clone());
    let stderr = drain(child.stderr.take().expect("stderr is piped"));
    std::thread::spawn(move || {
        let _ = lines_tx.send(Line::Exited(child.wait()));
    });
    let deadline = Instant::now() + Duration::from_millis(timeout_ms);
    // Only a program that streams its progress can be judged by its silence.
    let idle = (spec.kind != Kind::Text).then(|| Duration::from_millis(idle_ms));
    let mut stdout = Kept::default();
    let mut activity = adapter::Activity::default();
    let (mut timed_out, mut silent) = (false, false);
    let mut last_word = Instant::now();
    let status = loop {
        // Checked before every receive, so steady output cannot postpone either limit.
        let now = Instant::now();
        let quiet_for = last_word.elapsed();
        if now >= deadline {
            timed_out = true;
        } else if idle.is_some_and(|i| quiet_for >= i && !activity.busy()) {
            silent = true;
        }
        if timed_out || silent {
            kill_group(pgid);
            break wait_exit(&lines, &mut stdout);
        }
        let mut wait = deadline.saturating_duration_since(now);
        if let Some(idle) = idle.filter(|_| !activity.busy()) {
            wait = wait.min(idle.saturating_sub(quiet_for));
        }
        match lines.recv_timeout(wait) {
            Ok(Line::Out(line)) => {
                // Retries and reconnects are not progress: a call doing only that is stuck.
                if activity.observe(spec.kind, &line) {
                    last_word = Instant::now();
                }
                for shown in adapter::progress(spec.kind, &line) {
                    progress(shown);
                }
                let over = session.as_mut().is_some_and(|s| s.on_line(&line, &judge));
                stdout.push(line);
                if over {
                    // The turn ended (or the host ended it): the agent goes with its group.
                    kill_group(pgid);
                    break wait_exit(&lines, &mut stdout);
                }
            }
            Ok(Line::Exited(status)) => break status,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                break Err(std::io::Error::other("the waiter is gone"))
            }
        }
    };
    // Whatever the call left in its group goes with it, and its pipes close.
    kill_group(pgid);
    running.lock().unwrap_or_else(|e| e.into_inner()).groups.remove(&pgid);
    // Lines still buffered when it exited, briefly: a descendant that escaped the group may
    // hold stdout open.
    let until = Instant::now() + Duration::from_millis(200);
    while let Ok(Line::Out(line)) =
        lines.recv_timeout(until.saturating_duration_since(Instant::now()))
    {
        // The exit can overtake the last lines (two threads send them): what they show is
        // shown all the same.
        for shown in adapter::progress(spec.kind, &line) {
            progress(shown);
        }
        stdout.push(line);
    }
    // Killed from outside (the run's timeout, a cancel, a stop) rather than by its own limits.
    let stopped =
        !timed_out && !silent && running.lock().unwrap_or_else(|e| e.into_inner()).cancelled;
    let end = CallEnd {
        refused: session.and_then(|s| s.refused),
        timed_out,
        idle: silent && !timed_out,
        stopped,
        progressed: activity.progressed(),
        elapsed_ms: started.elapsed().as_millis() as u64,
        code: status.ok().and_then(|s| s.code()),
        stdout: stdout.into_text(spec.kind),
        // A descendant that escaped the group may hold the pipe open: do not wait for it.
        stderr: stderr.recv_timeout(Duration::from_secs(2)).unwrap_or_default(),
        ended_at: harn_core::env::Clock::wall(&crate::os::clock::RealClock::new()),
        ..CallEnd::default()
    };
    // The messages name the limits this call had (a profile may set its own idle limit).
    let limits = AdapterSpec { idle_timeout_ms: idle_ms, ..spec.clone() };
    classify(c.name, &limits, timeout_ms, &end)
}

/// What a call keeps of its stdout: the first [`HEAD_MAX`] bytes and the last [`TAIL_MAX`]
/// bytes of whole lines. A long streaming call (tool results are printed inline) keeps both
/// its session line, near the start, and its result, at the end.
#[derive(Default)]
struct Kept {
    head: String,
    tail: std::collections::VecDeque<String>,
    tail_bytes: usize,
    dropped: u64,
}

/// The start of a call's stdout that is kept.
const HEAD_MAX: usize = 1 << 20;
/// The end of a call's stdout that is kept.
const TAIL_MAX: usize = 3 << 20;

impl Kept {
    fn push(&mut self, line: String) {
        if self.tail.is_empty() && self.head.len() + line.len() <= HEAD_MAX {
            self.head.push_str(&line);
            return;
        }
        self.tail_bytes += line.len();
        self.tail.push_back(line);
        while self.tail_bytes > TAIL_MAX {
            let Some(old) = self.tail.pop_front() else { break };
            self.tail_bytes -= old.len();
            self.dropped += old.len() as u64;
        }
    }

    /// The kept text; a text reply says where its middle was left out.
    fn into_text(self, kind: Kind) -> String {
        let mut text = self.head;
        if self.dropped > 0 && kind == Kind::Text {
            text.push_str(&format!("\n[harn: {} bytes of output left out here]\n", self.dropped));
        }
        text.extend(self.tail);
        text
    }
}

/// What the call's reader threads send: a line of stdout (with its newline), or the exit.
enum Line {
    Out(String),
    Exited(std::io::Result<std::process::ExitStatus>),
}

/// Reads stdout line by line on a thread and hands each line on (what is kept of them is
/// [`Kept`]'s decision).
fn read_stdout(pipe: std::process::ChildStdout, tx: mpsc::SyncSender<Line>) {
    std::thread::spawn(move || {
        let mut reader = std::io::BufReader::new(pipe);
        let mut line = Vec::new();
        loop {
            line.clear();
            // A line longer than a MiB is handed on in pieces, never held whole.
            match (&mut reader).take(1 << 20).read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    let text = String::from_utf8_lossy(&line).into_owned();
                    if tx.send(Line::Out(text)).is_err() {
                        return;
                    }
                }
            }
        }
    });
}

/// After a kill: waits for the exit, keeping the lines that still arrive.
fn wait_exit(
    lines: &mpsc::Receiver<Line>,
    stdout: &mut Kept,
) -> std::io::Result<std::process::ExitStatus> {
    loop {
        match lines.recv() {
            Ok(Line::Out(line)) => stdout.push(line),
            Ok(Line::Exited(status)) => return status,
            Err(_) => return Err(std::io::Error::other("the waiter is gone")),
        }
    }
}

/// Reads a pipe to its end on a thread, keeping at most [`OUTPUT_MAX`] bytes.
fn drain(pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let mut limited = pipe.take(OUTPUT_MAX);
        let _ = limited.read_to_end(&mut bytes);
        // Keep reading past the limit so the harness never blocks on a full pipe.
        let _ = std::io::copy(&mut limited.into_inner(), &mut std::io::sink());
        let _ = tx.send(String::from_utf8_lossy(&bytes).into_owned());
    });
    rx
}

fn kill_group(pgid: i32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pgid) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}
