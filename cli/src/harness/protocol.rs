//! The control protocol on the daemon's Unix socket: one JSON request per line, one JSON
//! response per line; `subscribe` turns the connection into a stream of event lines.

use harn_core::ids::Id;
use serde::{Deserialize, Serialize};
use std::sync::mpsc::Sender;

/// A request from a client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// Is the daemon up? Answers with its pid.
    Ping,
    /// Every harness's state, or one's.
    Status {
        /// Only this harness.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// Start these harnesses.
    Start {
        /// Harness names.
        names: Vec<String>,
    },
    /// Stop these harnesses.
    Stop {
        /// Harness names.
        names: Vec<String>,
    },
    /// Restart these harnesses (clears a failure latch).
    Restart {
        /// Harness names.
        names: Vec<String>,
    },
    /// Make a profile active.
    UseProfile {
        /// The profile.
        name: String,
    },
    /// Re-read the configuration (or read `config`, which then becomes the daemon's
    /// configuration file); keep the last good one on error.
    Reload {
        /// Another configuration file, absolute.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        config: Option<String>,
        /// Apply it even though it removes every harness.
        #[serde(default)]
        force: bool,
    },
    /// Close intake, stop everything gracefully, then exit.
    Shutdown {
        /// After this long, SIGKILL whatever is still stopping.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u64>,
    },
    /// Stream lifecycle events on this connection.
    Subscribe,
    /// The current screen of a terminal harness, as text.
    Screen {
        /// The harness.
        name: String,
    },
    /// Connects this connection to a terminal harness (frames follow the answer; see
    /// `terminal::frame`).
    Attach {
        /// The harness.
        name: String,
        /// Watch only: what is typed is not sent.
        #[serde(default)]
        read_only: bool,
        /// The attaching terminal's size, which the harness's terminal takes (a writer's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        size: Option<[u16; 2]>,
    },
    /// Types into a terminal harness.
    Send {
        /// The harness.
        name: String,
        /// What to type.
        text: String,
        /// Who sends it (recorded in the ledger).
        by: String,
    },
    /// A second daemon for this root was refused (it says so itself, as it exits): the
    /// ledger records it.
    RefusedStart {
        /// The refused process.
        pid: u32,
        /// Its command line.
        command: String,
    },
}

/// A response: `{"ok":true, …}` or `{"ok":false,"error":"…"}`.
pub fn ok(mut body: serde_json::Value) -> serde_json::Value {
    if let Some(map) = body.as_object_mut() {
        map.insert("ok".into(), true.into());
        body
    } else {
        serde_json::json!({ "ok": true, "result": body })
    }
}

/// An error response about bad input (a malformed file, a bad name): the client exits 2.
pub fn bad_input(message: impl Into<String>) -> serde_json::Value {
    serde_json::json!({ "ok": false, "error": message.into(), "bad_input": true })
}

/// An error response.
pub fn err(message: impl Into<String>) -> serde_json::Value {
    serde_json::json!({ "ok": false, "error": message.into() })
}

/// What the daemon's loop reacts to: signals, control requests, subscriptions and notify
/// datagrams, each sent by a thread of its own.
pub enum Msg {
    /// A signal arrived (SIGCHLD, SIGTERM, SIGINT, SIGHUP).
    Signal(i32),
    /// A control request and where to send its answer.
    Request(Request, Sender<serde_json::Value>),
    /// A client wants the event stream.
    Subscribe(super::subscribers::Subscriber),
    /// Someone wrote `READY=1` on a harness's notify socket: the harness and the sender's pid.
    Notified(Id, u32),
    /// Someone wrote `WATCHDOG=1` on a harness's notify socket.
    Pinged(Id, u32),
    /// A client attaches to a harness's terminal (watching only when `read_only`).
    Attach { name: String, read_only: bool, answer: Sender<Result<Attached, String>> },
    /// An attached client detached or its connection dropped.
    Detach(u64),
}

/// What an attaching client is given.
pub struct Attached {
    /// Its id, to detach with.
    pub client: u64,
    /// The run's terminal.
    pub terminal: super::terminal::Terminal,
    /// True when its keys and window size reach the terminal.
    pub writes: bool,
}
