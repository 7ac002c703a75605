//! What the host loop of a run segment waits for: the workflow's lines and exit, the agent
//! calls' progress and ends, and an operator's stop, each sent by a thread of its own.

use harn_core::work::agent::CallOutcome;
use harn_core::work::policy::{Request, Verdict};
use harn_core::work::protocol::{FromWorkflow, ProtocolError};
use serde_json::Value;
use std::sync::mpsc;

/// What the host loop waits for.
pub enum HostEvent {
    /// A line of the workflow's stdout.
    Line(Result<FromWorkflow, ProtocolError>),
    /// Bytes of the workflow's stdout as they came, for a host that relays them unread.
    Raw(Vec<u8>),
    /// The end of the workflow's stdout.
    Eof,
    /// An agent call ended.
    AgentDone(String, CallOutcome),
    /// A line of a streaming agent call showed something (a tool used, a turn ended).
    AgentProgress(String, Value),
    /// The workflow process ended.
    Exited(std::io::Result<std::process::ExitStatus>),
    /// An operator's stop (whose, in words) reached the run: record it, then answer.
    Interrupting(String, mpsc::Sender<()>),
    /// An `acp` call's agent asks before a tool call: judge it in the run's policy and
    /// answer whether it may run, with the rules that decided (no answer: the run parked or
    /// ended).
    ToolAsk(String, Request, mpsc::Sender<(Verdict, Vec<String>)>),
    /// On a cluster node, a message of the coordinator's; `None` once it is gone.
    Told(Option<Box<harn_core::work::remote::ToNode>>),
}
