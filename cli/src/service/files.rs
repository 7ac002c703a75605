//! The service's own files under `.harnery/supervisor-service/`: hint records written whole,
//! the audit ledger `events.jsonl` and the daemon's log `service.log`, both rotated at a size
//! cap. None of them is ever read to decide a goal's state.

use crate::os::clock::RealClock;
use crate::os::logs::LogSink;
pub use crate::os::logs::Rotation;
use harn_core::env::Clock;
use harn_core::service::SERVICE_VERSION;
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use harn_core::layout::SERVICE as DIR;

/// The audit ledger and the log each rotate at 8 MiB and keep three older files.
pub const ROTATION: Rotation = Rotation { max_file_bytes: 8 << 20, keep: 3 };

/// `name` under the service's directory, relative to the root.
pub fn path(name: &str) -> String {
    format!("{DIR}/{name}")
}

/// Writes a hint file `name` of the service's directory whole: temporary name, fsync, rename
/// (a lost hint costs nothing), privately and without following a symlink.
pub fn write_whole(root: &Path, name: &str, value: &impl serde::Serialize) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(value).expect("records serialize");
    crate::os::private::replace_below(root, &root.join(path(name)), &bytes)
}

/// The audit ledger: one JSON line per start, stop, tick and error, each echoed as a line
/// of the log. Shared by the loop and the heartbeat thread.
#[derive(Clone)]
pub struct Audit {
    sink: Option<Arc<Mutex<LogSink>>>,
    log: Option<Arc<Mutex<StdioLog>>>,
}

impl Audit {
    /// The ledger under `root`; `log` rotates the daemon's own output file when it has one.
    /// A ledger that cannot be opened (a planted symlink, a full disk) is an error: a service
    /// that could not say what it decided does not start.
    pub fn open(root: &Path, log: Option<PathBuf>, rotation: Rotation) -> std::io::Result<Audit> {
        let sink = Some(LogSink::open(root, root.join(path("events.jsonl")), rotation)?);
        let root = root.to_path_buf();
        let log = log.map(|path| Arc::new(Mutex::new(StdioLog { root, path, rotation })));
        Ok(Audit { sink, log })
    }

    /// Appends one event, stamped, and logs it.
    pub fn record(&self, mut event: serde_json::Value) {
        event["schema_version"] = json!(SERVICE_VERSION);
        event["ts"] = json!(RealClock::new().wall());
        // One write of the whole line: an append a kill interrupts is never half a line
        // followed by the next one.
        let mut bytes = event.to_string().into_bytes();
        bytes.push(b'\n');
        if let Some(sink) = &self.sink {
            let _ = sink.lock().unwrap_or_else(|e| e.into_inner()).write(&bytes);
        }
        self.say(&describe(&event));
    }

    /// One line of the log, after rotating it if it grew past the cap.
    pub fn say(&self, line: &str) {
        if let Some(log) = &self.log {
            log.lock().unwrap_or_else(|e| e.into_inner()).rotate_if_full();
        }
        let mut out = std::io::stdout().lock();
        // Lines carry titles and reasons from agents and workflows: no control character of
        // theirs reaches a terminal reading the log.
        let line = harn_core::text::neutralize(line);
        let _ = writeln!(out, "{} {line}", crate::os::clock::utc(RealClock::new().wall().0));
        let _ = out.flush();
    }
}

/// Records, from the process that was refused, that a second service for this root (this
/// process, asked by `command`) did not start because `running` holds the lease: one event in
/// the audit ledger and its line in `service.log`, each appended whole beside the running
/// daemon's own, as the harness daemon records a refused second daemon.
pub fn refused_start(root: &Path, running: Option<u32>, command: &str) -> std::io::Result<()> {
    let event = json!({
        "event": "service.start_refused",
        "pid": std::process::id(),
        "running_pid": running,
        "command": command,
        "why": "another service holds the lease of this root",
        "schema_version": SERVICE_VERSION,
        "ts": RealClock::new().wall(),
    });
    let mut line = event.to_string().into_bytes();
    line.push(b'\n');
    crate::os::private::append_below(root, &root.join(path("events.jsonl")))?.write_all(&line)?;
    let said = format!(
        "{} {}\n",
        crate::os::clock::utc(RealClock::new().wall().0),
        harn_core::text::neutralize(&describe(&event))
    );
    crate::os::private::append_below(root, &root.join(path("service.log")))?
        .write_all(said.as_bytes())
}

/// A human line for an audit event: a goal's in words, any other as its name and fields.
fn describe(event: &serde_json::Value) -> String {
    let name = event["event"].as_str().unwrap_or("event");
    let field = |k: &str| event[k].as_str().unwrap_or("").to_owned();
    let goal = field("goal_id");
    match name {
        "goal.tick" => {
            let (d, a) = (&event["dispatches"], &event["acceptances"]);
            let cycles =
                harn_core::text::count(event["cycles"].as_u64().unwrap_or(0), "cycle", "cycles");
            return format!(
                "goal {goal}: tick stopped at {} — {} ({cycles}, {d} dispatched, {a} accepted)",
                field("stop_reason"),
                field("reason")
            );
        }
        "goal.changed" => {
            return format!("goal {goal}: now {} (changed outside the service)", field("standing"))
        }
        "goal.found" => return format!("goal {goal}: {}", field("standing")),
        "service.start_refused" => {
            let by =
                event["running_pid"].as_u64().map(|p| format!(" (pid {p})")).unwrap_or_default();
            return format!(
                "a second service (pid {}, `{}`) was refused: this one{by} holds the root",
                event["pid"],
                field("command")
            );
        }
        "goal.error" => {
            let n = &event["consecutive_errors"];
            return format!("goal {goal}: error ({n} in a row, backing off): {}", field("error"));
        }
        _ => {}
    }
    let mut parts = vec![name.to_owned()];
    if let Some(map) = event.as_object() {
        for (k, v) in map {
            if !matches!(k.as_str(), "event" | "ts" | "schema_version") {
                parts.push(format!("{k}={v}"));
            }
        }
    }
    parts.join(" ")
}

/// The daemon's output file when `start` made one: standard output and error point at it,
/// and rotating it points them at a fresh file.
struct StdioLog {
    root: PathBuf,
    path: PathBuf,
    rotation: Rotation,
}

impl StdioLog {
    fn rotate_if_full(&mut self) {
        let full = std::fs::symlink_metadata(&self.path)
            .map(|m| m.len() >= self.rotation.max_file_bytes)
            .unwrap_or(false);
        if full {
            let _ = self.rotate();
        }
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        crate::os::logs::rotate_files(&self.root, &self.path, self.rotation.keep.max(1))?;
        let fresh = crate::os::private::append_below(&self.root, &self.path)?;
        let _ = std::io::stdout().lock().flush();
        rustix::stdio::dup2_stdout(&fresh)?;
        rustix::stdio::dup2_stderr(&fresh)?;
        Ok(())
    }
}
