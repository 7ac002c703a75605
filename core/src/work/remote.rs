//! What the coordinator and a node say to each other while a segment runs on a cluster: one
//! JSON object a line each way over the job step's relayed standard input and output. The
//! node runs the workflow and its agent calls and says what happened; the coordinator's
//! segment driver decides and writes every record. Nothing here lets a node write a record:
//! a node's line is an event the driver judges, as a local process's would be.

use crate::limits::LimitReached;
use crate::work::agent::CallOutcome;
use crate::work::policy::{Request, Verdict};
use crate::work::run::RunManifest;
use crate::work::team::Dispatch;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Where a node finds the work it continues: the item's branch as the coordinator pushed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkout {
    /// The repository the node clones from and pushes to.
    pub repository: String,
    /// The item's branch (`harn/ID`).
    pub branch: String,
    /// The commit the branch is at.
    pub head: String,
    /// A commit of the files as the last segment left them (uncommitted and untracked
    /// changes included), on `refs/harn-wip/ID`, when they differ from `head`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wip: Option<String>,
}

/// The ref a segment's uncommitted work travels on: never a branch, so no one lands it.
pub fn wip_ref(work_id: &str) -> String {
    format!("refs/harn-wip/{work_id}")
}

/// What the coordinator says to the node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "to", rename_all = "snake_case")]
pub enum ToNode {
    /// The first line: the run, the workflow's frozen bytes and where the work is.
    Setup {
        /// The run's manifest as the coordinator froze it.
        manifest: Box<RunManifest>,
        /// The workflow's frozen bytes, in hexadecimal.
        workflow_hex: String,
        /// Where the node clones from.
        checkout: Checkout,
        /// The directory on the node for clones.
        scratch: String,
    },
    /// A line for the workflow's standard input.
    Send {
        /// The line.
        line: Value,
    },
    /// An agent call to start.
    Call {
        /// The workflow's request id.
        id: String,
        /// Which adapter, prompt and limits.
        dispatch: Dispatch,
        /// The vendor session it continues.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resume: Option<String>,
    },
    /// A signal for the segment's processes.
    Signal {
        /// TERM or KILL, to the workflow and its calls, or to everything the segment holds.
        signal: NodeSignal,
    },
    /// The answer to an agent's tool request.
    Answer {
        /// The call that asked.
        call: String,
        /// Whether the tool may run.
        verdict: Verdict,
        /// The rules that decided.
        rules: Vec<String>,
    },
    /// The segment is over: push the work and end.
    Finish,
}

/// A signal the driver sends, as the node carries it out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeSignal {
    /// TERM to the workflow's and the calls' groups.
    Term,
    /// TERM to everything the segment holds.
    TermAll,
    /// KILL to the workflow's and the calls' groups.
    Kill,
    /// KILL to everything the segment holds.
    KillAll,
    /// KILL to what the exited workflow left in its group.
    Leftovers,
}

/// What the node says to the coordinator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "snake_case")]
pub enum FromNode {
    /// The first line: which job, on which node, with which harn.
    Started {
        /// The engine's job id.
        job: String,
        /// The node.
        node: String,
        /// harn's version on the node.
        harn: String,
    },
    /// The clone is ready and the workflow was spawned, with what the node recorded of it
    /// (its pid, how it is held, its containment).
    Spawned {
        /// The spawn's fields.
        fields: Map<String, Value>,
    },
    /// The workflow could not be spawned.
    SpawnFailed {
        /// The OS error.
        error: String,
        /// The program.
        program: String,
        /// True when the program does not exist.
        missing: bool,
    },
    /// The node could not make the clone or its scratch directory: nothing was spawned.
    Unready {
        /// What failed.
        error: String,
    },
    /// Bytes of the workflow's standard output, in hexadecimal, as they came.
    Out {
        /// The bytes.
        hex: String,
    },
    /// The workflow's standard output ended.
    OutEnded,
    /// The workflow exited.
    Exited {
        /// Its exit code.
        code: Option<i32>,
        /// The signal that ended it.
        signal: Option<i32>,
    },
    /// An agent call ended.
    AgentDone {
        /// The call.
        call: String,
        /// How it ended.
        outcome: Box<CallOutcome>,
    },
    /// A streaming agent call showed something.
    AgentProgress {
        /// The call.
        call: String,
        /// What it showed.
        shown: Value,
    },
    /// An agent asks before a tool call.
    ToolAsk {
        /// The call.
        call: String,
        /// What it asks.
        request: Request,
    },
    /// The end of the workflow's standard error (at most [`STDERR_TAIL`] bytes), said
    /// before the push, for the run's log on the coordinator.
    Stderr {
        /// The bytes.
        hex: String,
    },
    /// The limits the segment's processes reached, said before the push.
    Limits {
        /// Each limit reached.
        reached: Vec<LimitReached>,
    },
    /// The work was pushed: the branch's commit, and the commit of the files as they are
    /// when they differ from it.
    Pushed {
        /// The branch's commit.
        head: String,
        /// The files as they are.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wip: Option<String>,
    },
    /// A part of the work's bundle, in order: at most [`BUNDLE_PART`] bytes, in hexadecimal.
    BundlePart {
        /// The bytes.
        hex: String,
    },
    /// The work came back as a git bundle (the parts said before this, none when nothing
    /// changed): the branch's commit, and the commit of the files as they are when they
    /// differ from it (the bundle's one ref). A node that bundles needs no push credential.
    Bundled {
        /// The branch's commit.
        head: String,
        /// The files as they are.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wip: Option<String>,
    },
    /// The work could not be pushed.
    PushFailed {
        /// What failed.
        error: String,
    },
}

/// The most bytes of a bundle one [`FromNode::BundlePart`] carries.
pub const BUNDLE_PART: usize = 48 << 10;

/// The most bytes of a bundle a coordinator takes back; a larger one fails its segment's
/// bring-back (the work stays on the node's scratch no longer than the segment).
pub const BUNDLE_MAX: usize = 1 << 30;

/// The most of a workflow's standard error a node sends back.
pub const STDERR_TAIL: usize = 64 << 10;

/// A line that is not what the other side says: its text (cut) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Garbled {
    /// The line, at most 200 characters of it.
    pub text: String,
    /// Why it is not a message.
    pub why: String,
}

impl std::fmt::Display for Garbled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} is not a message of the node's: {}", self.text, self.why)
    }
}

fn garbled(line: &str, why: String) -> Garbled {
    Garbled { text: line.chars().take(200).collect(), why }
}

/// Reads one line of the node's.
pub fn parse_from_node(line: &str) -> Result<FromNode, Garbled> {
    serde_json::from_str(line).map_err(|e| garbled(line, e.to_string()))
}

/// Reads one line of the coordinator's.
pub fn parse_to_node(line: &str) -> Result<ToNode, Garbled> {
    serde_json::from_str(line).map_err(|e| garbled(line, e.to_string()))
}

/// One message as its line, newline included.
pub fn line<T: Serialize>(message: &T) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(message).expect("messages serialize");
    bytes.push(b'\n');
    bytes
}

/// Bytes as lowercase hexadecimal.
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

/// Hexadecimal back to bytes; `None` for anything else.
pub fn from_hex(text: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    bytes.chunks(2).map(|p| Some(digit(p[0])? << 4 | digit(p[1])?)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_every_byte() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(from_hex(&to_hex(&all)).unwrap(), all);
        assert_eq!(from_hex("abc"), None);
        assert_eq!(from_hex("zz"), None);
    }

    #[test]
    fn messages_read_back_as_written() {
        let said = FromNode::Started { job: "7".into(), node: "n2".into(), harn: "0.1.0".into() };
        let text = String::from_utf8(line(&said)).unwrap();
        assert_eq!(
            text,
            "{\"from\":\"started\",\"job\":\"7\",\"node\":\"n2\",\"harn\":\"0.1.0\"}\n"
        );
        assert_eq!(parse_from_node(text.trim_end()).unwrap(), said);
        let signal = ToNode::Signal { signal: NodeSignal::KillAll };
        let text = String::from_utf8(line(&signal)).unwrap();
        assert_eq!(parse_to_node(text.trim_end()).unwrap(), signal);
    }

    #[test]
    fn a_garbled_line_says_what_it_was() {
        let e = parse_from_node("{\"from\":\"exploded\"}").unwrap_err();
        assert!(e.why.contains("unknown variant"), "{e}");
        let long = "x".repeat(500);
        assert_eq!(parse_from_node(&long).unwrap_err().text.chars().count(), 200);
    }
}
