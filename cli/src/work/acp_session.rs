//! The host's side of an `acp` harness's call: the core's ACP client
//! (`harn_core::work::acp`) fed every line the agent writes, its lines written to the agent's
//! stdin on a thread of their own, each permission the agent asks judged by the run's frozen
//! policy (and recorded in the transcript as it is judged), and the end of the session: the
//! turn ended, or the host ended it (a policy that asks a person, an API key the run may not
//! bill).

use harn_core::work::acp::{self, AcpStep, Client};
use harn_core::work::policy::{Policy, Request, Verdict};
use harn_core::work::FailureClass;
use serde_json::Value;
use std::io::Write;
use std::sync::mpsc;

/// One call's session.
pub struct Session {
    client: Client,
    to_agent: Option<mpsc::Sender<String>>,
    /// Why the host ended the call, and the failure's class.
    pub refused: Option<(Option<FailureClass>, String)>,
}

/// What a session's permissions are judged by.
pub struct Judge<'a> {
    /// The run's frozen policy, when no host judges (a planner's, a reviewer's call).
    pub policy: Option<&'a Policy>,
    /// The run segment's host, which judges each tool call in the run's policy slots (and
    /// may park the run on it); its answer is the verdict and the rules behind it, `Deny`
    /// when it gave none.
    pub host: Option<&'a (dyn Fn(Request) -> (Verdict, Vec<String>) + Sync)>,
    /// True for a call that may change nothing (a planner, a reviewer).
    pub read_only: bool,
    /// Whether the run may bill an API account.
    pub api_billing: bool,
    /// Gets each judgement, for the transcript.
    pub note: &'a (dyn Fn(Value) + Sync),
}

impl Session {
    /// Starts the session on the agent's stdin: `prompt` in `cwd`, continuing `resume`, as
    /// `spec` (the harness) asks sessions for.
    pub fn start(
        stdin: std::process::ChildStdin,
        prompt: &str,
        cwd: &str,
        resume: Option<&str>,
        spec: &harn_core::work::agent::AdapterSpec,
    ) -> Session {
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            crate::os::children::block_sigpipe();
            let mut stdin = stdin;
            for line in rx {
                if stdin.write_all(line.as_bytes()).and_then(|()| stdin.write_all(b"\n")).is_err() {
                    return;
                }
                let _ = stdin.flush();
            }
        });
        let mut session = Session {
            client: Client::start(
                prompt,
                cwd,
                resume,
                spec.mode.as_deref(),
                spec.session_meta.as_ref(),
            ),
            to_agent: Some(tx),
            refused: None,
        };
        session.flush();
        session
    }

    /// Takes one line the agent wrote; true once the session is over (then the agent's stdin
    /// is closed).
    pub fn on_line(&mut self, line: &str, judge: &Judge<'_>) -> bool {
        if let Some(why) = acp::billing_refusal(line, judge.api_billing) {
            self.refused = Some((Some(FailureClass::Environment), why));
        }
        if let AcpStep::Permission(ask) = self.client.handle(line) {
            let (verdict, note) = match (judge.host, acp::refused(judge.read_only, &ask)) {
                (Some(host), None) => {
                    let (verdict, rules) = host(acp::request(&ask));
                    (verdict, acp::note(&ask, verdict, &rules))
                }
                _ => acp::judge(judge.policy, judge.read_only, &ask),
            };
            (judge.note)(note);
            match verdict {
                // The run parked on it: the turn is cancelled, so the agent ends it and keeps
                // its session for the resume.
                Verdict::Ask if judge.host.is_some() => self.client.cancel(&ask),
                Verdict::Ask => {
                    self.client.permit(&ask, false);
                    self.refused = Some((Some(FailureClass::Decision), acp::asked(&ask)));
                }
                _ => self.client.permit(&ask, verdict == Verdict::Allow),
            }
        }
        self.flush();
        let over = self.client.done() || self.refused.is_some();
        if over {
            self.to_agent = None;
        }
        over
    }

    fn flush(&mut self) {
        while let Some(line) = self.client.poll_line() {
            if let Some(tx) = &self.to_agent {
                let _ = tx.send(line);
            }
        }
    }
}
