//! A run's agent calls: queued in request order, started on threads up to the concurrency
//! bound, each after its harness's pre-flight (once per run: installed, logged in, billing
//! as the run allows), each retried up to its attempts, and a reply that must match a JSON
//! schema checked and repaired a bounded number of times.

use super::agent_call::{call, CallContext, CallGroups, CallSpec};
use super::inbox::HostEvent;
use crate::os::store::{run_dir, Store};
use harn_core::work::adapter::Kind;
use harn_core::work::agent::{self, AdapterSpec, CallOutcome, Login};
use harn_core::work::call::{CallLoop, CallStep};
use harn_core::work::policy::{Request, Verdict};
use harn_core::work::run::{Billing, RunManifest};
use harn_core::work::team::Dispatch;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};

/// The pre-flight of each harness this run called, by name: passed, or the failure every
/// call to it gets without running.
type Preflights = Arc<Mutex<BTreeMap<String, Result<(), String>>>>;

/// The segment's agent calls: each started on a thread of its own when the core's driver
/// says (in request order, up to the run's concurrency).
pub struct Calls {
    /// Process groups of the calls running now.
    pub agents: Arc<Mutex<CallGroups>>,
    /// Pre-flights done in this segment.
    pub preflights: Preflights,
    /// The segment's confinement, which every call starts inside.
    pub confine: super::confine::Confine,
}

impl Calls {
    /// No call yet.
    pub fn new(agents: Arc<Mutex<CallGroups>>, confine: super::confine::Confine) -> Calls {
        Calls { agents, preflights: Preflights::default(), confine }
    }

    /// Starts `call`; its end comes to `tx` as [`HostEvent::AgentDone`].
    pub fn start(
        &self,
        store: &Store,
        m: &RunManifest,
        tx: &mpsc::SyncSender<HostEvent>,
        call: harn_core::work::segment::driver::Call,
    ) {
        let harn_core::work::segment::driver::Call { id, dispatch, resume } = call;
        {
            let spec = m.harness_spec(&dispatch.adapter).cloned();
            let cwd = m.cwd.as_deref().map_or_else(|| store.root().to_owned(), Into::into);
            let tx = tx.clone();
            let (run_id, agents, preflights) =
                (m.run_id.to_string(), self.agents.clone(), self.preflights.clone());
            let billing = m.billing;
            let schema_file =
                store.root().join(run_dir(&m.run_id)).join(format!("schema-{id}.json"));
            let root = store.root().to_owned();
            let confine = self.confine.clone();
            let policy = m.policy.clone();
            std::thread::spawn(move || {
                let progress = |shown: serde_json::Value| {
                    let _ = tx.send(HostEvent::AgentProgress(id.clone(), shown));
                };
                // A tool call an ACP agent asks about waits for the host's judgement.
                let tool_host = |request: Request| {
                    let (answer, answered) = mpsc::channel();
                    let _ = tx.send(HostEvent::ToolAsk(id.clone(), request, answer));
                    answered.recv().unwrap_or((Verdict::Deny, Vec::new()))
                };
                let outcome = match spec {
                    Some(spec) => {
                        let ctx = CallContext {
                            root: &cwd,
                            run_id: &run_id,
                            billing,
                            running: &agents,
                            progress: &progress,
                            confine: &confine,
                            policy: policy.as_ref(),
                            tool_host: Some(&tool_host),
                        };
                        match preflight(&preflights, &dispatch.adapter, &spec, billing) {
                            Err(why) => agent::preflight_failure(&why),
                            Ok(()) => {
                                let file = schema_for(&root, &schema_file, &dispatch, spec.kind);
                                call_checked(
                                    &ctx,
                                    &dispatch,
                                    &spec,
                                    file.as_deref(),
                                    resume.as_deref(),
                                )
                            }
                        }
                    }
                    // Every harness the team names is frozen at the start; this is a bug.
                    None => failed(format!("harness {} was not frozen", dispatch.adapter)),
                };
                let _ = tx.send(HostEvent::AgentDone(id, outcome));
            });
        }
    }
}

/// The schema of a Codex call, written to a file beside the run's records (Codex takes a
/// file); `None` without a schema, for other adapters, or when it cannot be written (harn's
/// own check of the reply still holds).
fn schema_for(root: &Path, file: &Path, d: &Dispatch, kind: Kind) -> Option<String> {
    let schema = d.schema.as_ref().filter(|_| kind == Kind::Codex)?;
    crate::os::private::replace_below(root, file, schema.to_string().as_bytes()).ok()?;
    Some(file.display().to_string())
}

/// The harness's pre-flight, once per run: the program is there, logged in, and billing as
/// the run allows. A text harness is only looked for.
fn preflight(
    done: &Preflights,
    name: &str,
    spec: &AdapterSpec,
    billing: Billing,
) -> Result<(), String> {
    let mut done = done.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(result) = done.get(name) {
        return result.clone();
    }
    let program = find_program(&spec.command[0]);
    // The login is asked of the program itself, when the harness runs it directly (a
    // wrapper that speaks its dialect, `ssh box claude` say, cannot be asked).
    let direct = |name: &str| Path::new(&spec.command[0]).file_name().is_some_and(|f| f == name);
    let login = match (&program, spec.kind) {
        (Some(p), Kind::ClaudeCode) if direct("claude") => Some(login_of(p, spec.kind, billing)),
        (Some(p), Kind::Codex) if direct("codex") => Some(login_of(p, spec.kind, billing)),
        (Some(_), Kind::Acp) if direct("gemini") => Some(gemini_login()),
        // Claude Code's ACP adapter runs Claude Code, which is asked.
        (Some(_), Kind::Acp) if direct("claude-agent-acp") => {
            let claude = std::env::var("CLAUDE_CODE_EXECUTABLE")
                .ok()
                .or_else(|| find_program("claude").map(|p| p.display().to_string()));
            claude.map(|c| login_of(Path::new(&c), Kind::ClaudeCode, billing))
        }
        _ => None,
    };
    let result =
        agent::preflight(name, spec, program.is_some(), login.as_ref(), billing == Billing::Api)
            .map_err(|refused| refused.to_string());
    done.insert(name.to_owned(), result.clone());
    result
}

/// The pre-flight of one call made outside a run (a planner, a reviewer).
pub fn preflight_once(name: &str, spec: &AdapterSpec, billing: Billing) -> Result<(), String> {
    preflight(&Preflights::default(), name, spec, billing)
}

/// The built-in harnesses that are live on this machine: installed and logged in to their
/// subscription (what their pre-flight under subscription billing accepts), sorted.
pub fn live_presets() -> Vec<String> {
    let live = |(name, spec): &(String, AdapterSpec)| {
        preflight_once(name, spec, Billing::Subscription).is_ok()
    };
    agent::presets().into_iter().filter(live).map(|(name, _)| name).collect()
}

/// The program a command names: a path, or the first match on `PATH`.
pub fn find_program(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable =
        |p: &Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if program.contains('/') {
        let p = PathBuf::from(program);
        return runnable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|p| runnable(p))
}

/// Asks the program itself whether it is logged in, with the environment its calls get.
fn login_of(program: &Path, kind: Kind, billing: Billing) -> Login {
    let args: &[&str] = match kind {
        Kind::ClaudeCode => &["auth", "status", "--json"],
        _ => &["login", "status"],
    };
    // Codex bills a key in its environment without counting itself logged in.
    if kind == Kind::Codex && billing == Billing::Api && std::env::var_os("CODEX_API_KEY").is_some()
    {
        let method = "CODEX_API_KEY".to_owned();
        return Login { logged_in: true, api_key: Some(method.clone()), method };
    }
    let mut cmd = std::process::Command::new(program);
    cmd.args(args).stdin(std::process::Stdio::null());
    if billing == Billing::Subscription {
        for var in agent::API_KEY_VARS {
            cmd.env_remove(var);
        }
    }
    let out = match run_bounded(cmd, std::time::Duration::from_secs(30)) {
        Some(out) => out,
        None => {
            return Login { method: "no answer to its status command".into(), ..Login::default() }
        }
    };
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    match kind {
        Kind::ClaudeCode => agent::claude_login(&String::from_utf8_lossy(&out.stdout)),
        _ => agent::codex_login(&text, out.status.code()),
    }
}

/// Gemini CLI's login as its calls would find it: its Google login in its home
/// (`$GEMINI_CLI_HOME/.gemini` or `~/.gemini`), else a key or a gateway in the environment,
/// which the pre-flight refuses under subscription billing.
fn gemini_login() -> Login {
    let home = std::env::var_os("GEMINI_CLI_HOME").or_else(|| std::env::var_os("HOME"));
    let oauth = home.is_some_and(|h| Path::new(&h).join(".gemini/oauth_creds.json").is_file());
    let vars = ["GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"];
    let key = vars.into_iter().find(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()));
    agent::gemini_login(oauth, key)
}

/// Runs a short command with a deadline, killing it past the deadline.
fn run_bounded(
    mut cmd: std::process::Command,
    limit: std::time::Duration,
) -> Option<std::process::Output> {
    use std::os::unix::process::CommandExt;
    cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).process_group(0);
    let child = cmd.spawn().ok()?;
    let pgid = child.id() as i32;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.ok(),
        Err(_) => {
            if let Some(pid) = rustix::process::Pid::from_raw(pgid) {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
            None
        }
    }
}

fn failed(error: String) -> CallOutcome {
    CallOutcome::failed(error, None)
}

/// Runs a call to a usable reply, as the core's `work::call::CallLoop` steps it: up to
/// its attempts, then, with a schema, up to `REPAIRS_MAX` repair calls that quote the
/// rejected reply and its problems. A reply that still does not match is a charged failure.
pub fn call_checked(
    ctx: &CallContext<'_>,
    d: &Dispatch,
    spec: &AdapterSpec,
    schema_file: Option<&str>,
    resume: Option<&str>,
) -> CallOutcome {
    let schema = d.schema.as_ref();
    let budget = d.profile.timeout_ms.unwrap_or(spec.timeout_ms);
    let (mut calls, mut step) =
        CallLoop::start(&d.prompt, d.max_attempts, d.schema.clone(), budget);
    loop {
        match step {
            CallStep::Call(prompt) => {
                let limit_ms = calls.remaining_ms();
                let c = CallSpec {
                    name: &d.adapter,
                    spec,
                    profile: &d.profile,
                    schema,
                    schema_file,
                    resume,
                    limit_ms,
                };
                let outcome = call(ctx, &c, &prompt);
                let failed = (!outcome.ok).then(|| outcome.clone());
                step = calls.next(outcome, cancelled(ctx));
                // Every try that failed and is tried again is in the transcript, with its
                // class.
                if let (Some(failed), CallStep::Call(_)) = (failed, &step) {
                    (ctx.progress)(calls.retry_note(&failed));
                }
            }
            CallStep::Done(outcome) => return outcome,
        }
    }
}

fn cancelled(ctx: &CallContext<'_>) -> bool {
    ctx.running.lock().unwrap_or_else(|e| e.into_inner()).cancelled
}
