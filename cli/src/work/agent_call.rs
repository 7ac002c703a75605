//! One agent call over real processes: the harness's argv in its own process group, the
//! prompt on stdin, the reply from stdout, killed with its group at the timeout or when the
//! host dies. How the call ended is classified by the core.

use harn_core::workflow::agent::{classify, CallEnd, CallOutcome, HarnessSpec, API_KEY_VARS};
use harn_core::workflow::run::Billing;
use harn_core::workflow::team::Profile;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{mpsc, Mutex};
use std::time::Duration;

/// Longest reply kept from an agent's stdout (and failure text from its stderr).
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
}

/// Runs one call of harness `name` and classifies it. Its process group is in the context's
/// `running` while it runs, so the host can kill it when the whole run times out.
pub fn call(
    ctx: &CallContext<'_>,
    name: &str,
    spec: &HarnessSpec,
    profile: &Profile,
    prompt: &str,
) -> CallOutcome {
    let CallContext { root, run_id, billing, running } = *ctx;
    let timeout_ms = profile.timeout_ms.unwrap_or(spec.timeout_ms);
    let mut command = Command::new(&spec.command[0]);
    command
        .args(&spec.command[1..])
        .args(preset_args(name, profile))
        .current_dir(root)
        .env("HARN_RUN_ID", run_id)
        .envs(profile_env(profile))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if billing == Billing::Subscription {
        for var in API_KEY_VARS {
            command.env_remove(var);
        }
    }
    // SAFETY: one async-signal-safe system call between fork and exec.
    unsafe {
        command.pre_exec(|| {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
                .map_err(std::io::Error::from)
        });
    }
    let blank = CallEnd {
        missing: false,
        spawn_error: None,
        timed_out: false,
        code: None,
        stdout: String::new(),
        stderr: String::new(),
    };
    let spawned = if crate::children::forced() {
        Err(std::io::Error::other(crate::children::stopping()))
    } else {
        command.spawn()
    };
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return classify(name, timeout_ms, &CallEnd { missing: true, ..blank });
        }
        Err(e) => {
            let end = CallEnd { spawn_error: Some(e.to_string()), ..blank };
            return classify(name, timeout_ms, &end);
        }
    };
    let pgid = child.id() as i32;
    let _tracked = crate::children::track(pgid);
    {
        let mut calls = running.lock().unwrap_or_else(|e| e.into_inner());
        calls.groups.insert(pgid);
        if calls.cancelled {
            kill_group(pgid); // The run ended while this call was starting.
        }
    }
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let prompt = prompt.to_owned();
    // A harness that never reads its stdin must not block the host: write on a thread.
    std::thread::spawn(move || {
        block_sigpipe();
        let _ = stdin.write_all(prompt.as_bytes());
    });
    let stdout = drain(child.stdout.take().expect("stdout is piped"));
    let stderr = drain(child.stderr.take().expect("stderr is piped"));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let mut timed_out = false;
    let status = match rx.recv_timeout(Duration::from_millis(timeout_ms)) {
        Ok(status) => status,
        Err(_) => {
            timed_out = true;
            kill_group(pgid);
            rx.recv().unwrap_or_else(|_| Err(std::io::Error::other("the waiter is gone")))
        }
    };
    // Whatever the call left in its group goes with it, and its pipes close.
    kill_group(pgid);
    running.lock().unwrap_or_else(|e| e.into_inner()).groups.remove(&pgid);
    let end = CallEnd {
        timed_out,
        code: status.ok().and_then(|s| s.code()),
        // A descendant that escaped the group may hold the pipes open: do not wait for it.
        stdout: stdout.recv_timeout(Duration::from_secs(2)).unwrap_or_default(),
        stderr: stderr.recv_timeout(Duration::from_secs(2)).unwrap_or_default(),
        ..blank
    };
    classify(name, timeout_ms, &end)
}

/// Flags the built-in presets take for a profile's model, effort and turns (a declared
/// harness reads them from `HARN_MODEL`, `HARN_EFFORT` and `HARN_MAX_TURNS` instead).
fn preset_args(name: &str, p: &Profile) -> Vec<String> {
    let mut args = Vec::new();
    match name {
        "claude-code" => {
            if let Some(m) = &p.model {
                args.extend(["--model".to_owned(), m.clone()]);
            }
            if let Some(t) = p.max_turns {
                args.extend(["--max-turns".to_owned(), t.to_string()]);
            }
        }
        "codex" => {
            if let Some(m) = &p.model {
                args.extend(["--model".to_owned(), m.clone()]);
            }
            if let Some(e) = &p.effort {
                args.extend(["-c".to_owned(), format!("model_reasoning_effort={e}")]);
            }
        }
        _ => {}
    }
    args
}

/// A profile's model, effort and turns as environment variables for any harness.
fn profile_env(p: &Profile) -> Vec<(&'static str, String)> {
    let mut env = Vec::new();
    if let Some(m) = &p.model {
        env.push(("HARN_MODEL", m.clone()));
    }
    if let Some(e) = &p.effort {
        env.push(("HARN_EFFORT", e.clone()));
    }
    if let Some(t) = p.max_turns {
        env.push(("HARN_MAX_TURNS", t.to_string()));
    }
    env
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

/// Blocks SIGPIPE on the calling thread, so writing to a pipe whose reader is gone fails with
/// EPIPE there instead of killing the process (harn restores SIGPIPE's default at startup so
/// that `harn … | head` ends quietly). A signal a write raises goes to the writing thread and
/// is discarded with it.
pub(super) fn block_sigpipe() {
    // SAFETY: plain libc calls on a local signal set; they only change this thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

fn kill_group(pgid: i32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pgid) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}
