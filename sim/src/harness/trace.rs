//! Simulation traces: JSON Lines with a header (seed, options, format version) and one record
//! per step (virtual time, what woke the daemon, what it did, the state hash).

use crate::harness::checker::Violation;
use crate::harness::options::SimOptions;
use harn_core::harness::driver::Executed;
use serde::{Deserialize, Serialize};

/// Version of the trace format written today.
pub const TRACE_VERSION: u32 = 1;

/// The first line of a trace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceHeader {
    /// Always `"harn-sim-trace"`.
    pub format: String,
    /// [`TRACE_VERSION`].
    pub version: u32,
    /// The seed of the entropy stream.
    pub seed: u64,
    /// The run's shape.
    pub options: SimOptions,
    /// The harn version that wrote it.
    pub harn_version: String,
}

/// What happened in one step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum StepEvent {
    /// The daemon (re)started: it stopped the processes an earlier daemon left (if it died
    /// alone), read its durable files and booted.
    Boot {
        /// Processes of an earlier daemon stopped before the boot.
        #[serde(default)]
        reclaimed: u32,
    },
    /// A child exited.
    Exit {
        /// Its pid.
        pid: u32,
        /// Its harness.
        name: String,
        /// Its run.
        run: u64,
        /// How it ended.
        status: harn_core::env::ExitStatus,
    },
    /// An operator command arrived.
    Command {
        /// Its id.
        id: u64,
        /// The command, kept only when a trace is written (a reload carries a whole
        /// configuration, too much to copy at every step for nothing).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        command: Option<Box<harn_core::harness::daemon::Command>>,
    },
    /// A timer wake, possibly a spurious early one.
    Timeout {
        /// True when nothing was due (a spurious wake).
        spurious: bool,
    },
    /// Readiness evidence arrived for a run: its file was found, or its probe exited 0.
    Ready {
        /// The harness.
        name: String,
        /// The run it vouches for.
        run: u64,
        /// `file` or `probe`.
        evidence: String,
    },
    /// A notify child sent `WATCHDOG=1`.
    Ping {
        /// The harness.
        name: String,
        /// The run that pinged.
        run: u64,
    },
    /// A recheck of a ready run failed: its file was gone, or its probe failed or ran too
    /// long.
    Unready {
        /// The harness.
        name: String,
        /// The run that lost its readiness.
        run: u64,
        /// `file` or `probe`.
        evidence: String,
    },
    /// A person attached to a terminal harness.
    Attach {
        /// The connection's id.
        client: u64,
        /// The harness.
        name: String,
        /// Watching only.
        read_only: bool,
    },
    /// An attached client detached, or its connection dropped.
    Detach {
        /// The connection's id.
        client: u64,
    },
    /// The fault phase ended; faults are off from here on.
    Calm,
}

/// How a step ended when it did not simply complete.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum StepEnd {
    /// The host crashed: every process died, unsynced writes were lost or torn.
    Crash {
        /// True when the crash interrupted a filesystem call; false when it came after the
        /// step's effects.
        during_op: bool,
    },
    /// The daemon alone died (SIGKILL): its children live on as orphans, nothing written is
    /// lost.
    DaemonCrash {
        /// True when it died inside a filesystem call; false when after the step's effects.
        during_op: bool,
    },
    /// The daemon stopped itself on an IO error (fail-stop); modelled as a host crash.
    FailStop {
        /// The error.
        error: String,
    },
    /// The daemon drained after a shutdown and exited cleanly.
    DaemonExited,
}

/// One step's record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceStep {
    /// Step number, from 1.
    pub step: u64,
    /// Virtual monotonic time in nanoseconds.
    pub t: u64,
    /// What happened.
    pub event: StepEvent,
    /// What the driver carried out (before a crash, what it finished).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub executed: Vec<serde_json::Value>,
    /// How the step ended, when it did not simply complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<StepEnd>,
    /// The daemon's state hash after the step (0 while the host is down).
    pub hash: u64,
}

/// The last line of a trace whose run broke an invariant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceEnd {
    /// The violation, if any.
    pub violation: Option<Violation>,
    /// Steps run.
    pub steps: u64,
}

/// A whole trace in memory.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// The header.
    pub header: TraceHeader,
    /// Every step.
    pub steps: Vec<TraceStep>,
    /// The outcome.
    pub end: TraceEnd,
}

impl Trace {
    /// Encodes `executed` for a step record.
    pub fn executed_values(executed: &[Executed]) -> Vec<serde_json::Value> {
        executed.iter().map(|e| serde_json::to_value(e).expect("serializes")).collect()
    }

    /// The JSON Lines text of the trace.
    pub fn to_jsonl(&self) -> String {
        let mut out = serde_json::to_string(&self.header).expect("serializes");
        out.push('\n');
        for s in &self.steps {
            out.push_str(&serde_json::to_string(s).expect("serializes"));
            out.push('\n');
        }
        out.push_str(&serde_json::to_string(&self.end).expect("serializes"));
        out.push('\n');
        out
    }

    /// Parses a trace; the error names the line.
    pub fn parse(text: &str) -> Result<Trace, String> {
        let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
        let (_, first) = lines.next().ok_or("line 1: the trace is empty")?;
        let header: TraceHeader =
            serde_json::from_str(first).map_err(|e| format!("line 1: header: {e}"))?;
        if header.format != "harn-sim-trace" || header.version > TRACE_VERSION {
            return Err(format!("line 1: not a harn-sim-trace of version <= {TRACE_VERSION}"));
        }
        let rest: Vec<(usize, &str)> = lines.collect();
        let Some(((last_no, last), body)) = rest.split_last() else {
            return Err("line 2: the trace has no end record".into());
        };
        let end: TraceEnd = serde_json::from_str(last)
            .map_err(|e| format!("line {}: end record: {e}", last_no + 1))?;
        let steps = body
            .iter()
            .map(|(no, l)| {
                serde_json::from_str(l).map_err(|e| format!("line {}: step: {e}", no + 1))
            })
            .collect::<Result<Vec<TraceStep>, String>>()?;
        Ok(Trace { header, steps, end })
    }
}
