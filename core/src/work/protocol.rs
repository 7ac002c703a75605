//! The workflow protocol: the host writes `start` and replies on the workflow's stdin; the
//! workflow writes requests and reports on its stdout, one JSON object per line. [`LineReader`]
//! turns a byte stream into messages with errors that name the line and the field, and bounds
//! every line so a runaway workflow cannot exhaust memory.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Longest line accepted from a workflow, in bytes.
pub(crate) const LINE_MAX: usize = 1 << 20;
/// Longest identifier (request, criterion, decision) accepted.
pub(crate) const ID_MAX: usize = 64;

/// How evidence bears on the criteria it cites.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceStatus {
    /// The check passed.
    Passed,
    /// The check failed.
    Failed,
    /// Something was seen, without a verdict.
    Observed,
    /// No verdict could be reached.
    Unknown,
}

/// An acceptance criterion a workflow declares.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Criterion {
    /// Its id, cited by evidence.
    pub id: String,
    /// What must hold.
    pub statement: String,
}

/// A piece of evidence a workflow records.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    /// What kind of check (`test`, `lint`, `review`, …).
    pub kind: String,
    /// Its verdict.
    pub status: EvidenceStatus,
    /// A short label.
    pub label: String,
    /// A longer summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Where to look (a path, a URL, a commit).
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// The criteria it bears on.
    #[serde(
        default,
        rename = "acceptanceIds",
        alias = "acceptance_ids",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub acceptance_ids: Vec<String>,
}

/// Everything a workflow may write on its stdout.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum FromWorkflow {
    /// Declares acceptance criteria.
    Meta {
        /// The criteria.
        #[serde(default)]
        acceptance: Vec<Criterion>,
    },
    /// Asks for an agent call; answered by a reply with the same id.
    Agent {
        /// The request id.
        id: String,
        /// The prompt.
        prompt: String,
        /// The team specialist to answer it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        specialist: Option<String>,
        /// A JSON schema the reply must match.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        schema: Option<Value>,
        /// Continue the vendor session of this run's last call to the same harness
        /// (`"continue": true`), instead of starting a fresh one.
        #[serde(default, rename = "continue", skip_serializing_if = "std::ops::Not::not")]
        continue_session: bool,
    },
    /// Records evidence.
    Evidence(Evidence),
    /// Enters a named stage.
    Stage {
        /// The stage.
        name: String,
    },
    /// A line for the run's log.
    Log {
        /// The message.
        message: String,
    },
    /// Asks whether an external mutation is allowed; answered by a reply with the same id.
    Authorize {
        /// The request id.
        id: String,
        /// What it wants to do (`push`, `deploy`, …).
        action: String,
        /// What it wants to do it to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target: Option<String>,
    },
    /// A person must rule before the work can go on.
    Blocked {
        /// What must be decided.
        reason: String,
        /// The decision's id, when the workflow names one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        decision_id: Option<String>,
    },
    /// The run's end, as the workflow sees it.
    Result {
        /// True when the workflow achieved its objective.
        ok: bool,
        /// A summary for the proof.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
        /// Why it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}

/// A line that is not a valid message: which line, which field, what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolError {
    /// 1-based line of the workflow's output.
    pub line: u64,
    /// The field the problem is about, when known.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "workflow output line {}", self.line)?;
        if let Some(field) = &self.field {
            write!(f, ", field {field}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// How much of a line that is no message its error quotes.
const EXCERPT: usize = 120;

/// Parses one line (without its newline).
pub(crate) fn parse_line(line: &[u8], line_no: u64) -> Result<FromWorkflow, ProtocolError> {
    let err = |field: Option<&str>, message: String| ProtocolError {
        line: line_no,
        field: field.map(Into::into),
        message,
    };
    if line.len() > LINE_MAX {
        return Err(err(None, format!("longer than {LINE_MAX} bytes")));
    }
    let msg: FromWorkflow = serde_json::from_slice(line).map_err(|e| {
        let field = field_of(&e.to_string());
        // What the line said, so a workflow that printed something else is found at once.
        let text = String::from_utf8_lossy(&line[..line.len().min(EXCERPT)]);
        let more = if line.len() > EXCERPT { "…" } else { "" };
        err(field.as_deref(), format!("{e}; the line reads {text:?}{more}"))
    })?;
    check_bounds(&msg).map_err(|(field, m)| err(Some(field), m))?;
    Ok(msg)
}

/// The field a serde error is about, when its message names one.
fn field_of(message: &str) -> Option<String> {
    let start = message.find('`')? + 1;
    let end = start + message[start..].find('`')?;
    Some(message[start..end].to_owned())
}

fn check_bounds(msg: &FromWorkflow) -> Result<(), (&'static str, String)> {
    let id = |field: &'static str, v: &str| {
        let ok = !v.is_empty()
            && v.len() <= ID_MAX
            && v.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if ok {
            Ok(())
        } else {
            Err((
                field,
                format!("{v:?} is not an id of 1 to {ID_MAX} letters, digits, '.', '_' or '-'"),
            ))
        }
    };
    match msg {
        FromWorkflow::Meta { acceptance } => {
            acceptance.iter().try_for_each(|c| id("acceptance.id", &c.id))
        }
        FromWorkflow::Agent { id: rid, prompt, .. } => {
            id("id", rid)?;
            if prompt.trim().is_empty() {
                return Err(("prompt", "may not be empty".into()));
            }
            Ok(())
        }
        FromWorkflow::Evidence(e) => {
            e.acceptance_ids.iter().try_for_each(|a| id("acceptanceIds", a))
        }
        FromWorkflow::Authorize { id: rid, .. } => id("id", rid),
        FromWorkflow::Blocked { decision_id: Some(d), .. } => id("decision_id", d),
        _ => Ok(()),
    }
}

/// Splits a workflow's stdout into messages as bytes arrive, bounding each line.
#[derive(Debug, Default)]
pub struct LineReader {
    buf: Vec<u8>,
    line_no: u64,
    /// Discarding the rest of an over-long line.
    skipping: bool,
}

impl LineReader {
    /// Feeds bytes; returns one result per line completed by them.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Result<FromWorkflow, ProtocolError>> {
        let mut out = Vec::new();
        for chunk in bytes.split_inclusive(|&b| b == b'\n') {
            let complete = chunk.ends_with(b"\n");
            let body = chunk.strip_suffix(b"\n").unwrap_or(chunk);
            if !self.skipping {
                self.buf.extend_from_slice(body);
            }
            if self.buf.len() > LINE_MAX && !self.skipping {
                self.skipping = true;
                self.buf.clear();
            }
            if complete {
                self.line_no += 1;
                out.push(self.finish_line());
            }
        }
        out
    }

    /// The end of the stream: a final line without its newline is still a line.
    pub fn finish(&mut self) -> Option<Result<FromWorkflow, ProtocolError>> {
        if self.buf.is_empty() && !self.skipping {
            return None;
        }
        self.line_no += 1;
        Some(self.finish_line())
    }

    fn finish_line(&mut self) -> Result<FromWorkflow, ProtocolError> {
        if std::mem::take(&mut self.skipping) {
            let message = format!("longer than {LINE_MAX} bytes");
            return Err(ProtocolError { line: self.line_no, field: None, message });
        }
        let line = std::mem::take(&mut self.buf);
        parse_line(&line, self.line_no)
    }
}

/// Fuzz body: arbitrary output split at arbitrary points never panics, reports every line
/// exactly once, and splitting does not change the result.
pub fn fuzz_reader(data: &[u8]) {
    let split = data.first().map_or(0, |b| usize::from(*b)).min(data.len());
    let mut whole = LineReader::default();
    let mut all = whole.feed(data);
    all.extend(whole.finish());
    let mut parts = LineReader::default();
    let mut pieces = parts.feed(&data[..split]);
    pieces.extend(parts.feed(&data[split..]));
    pieces.extend(parts.finish());
    assert_eq!(all, pieces, "splitting the stream changed what was read");
    let lines =
        data.split(|&b| b == b'\n').count() - usize::from(data.ends_with(b"\n") || data.is_empty());
    assert_eq!(all.len(), lines, "every line is reported exactly once");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_parses() {
        let lines: [&[u8]; 8] = [
            br#"{"op":"meta","acceptance":[{"id":"tests","statement":"the tests pass"}]}"#,
            br#"{"op":"agent","id":"a1","prompt":"write it","specialist":"coder"}"#,
            br#"{"op":"evidence","kind":"test","status":"passed","label":"cargo test","acceptanceIds":["tests"]}"#,
            br#"{"op":"stage","name":"review"}"#,
            br#"{"op":"log","message":"hello"}"#,
            br#"{"op":"authorize","id":"push-1","action":"push","target":"origin/main"}"#,
            br#"{"op":"blocked","reason":"pick a license","decision_id":"license"}"#,
            br#"{"op":"result","ok":true,"summary":"done"}"#,
        ];
        for (i, line) in lines.iter().enumerate() {
            parse_line(line, i as u64 + 1).unwrap_or_else(|e| panic!("{e}"));
        }
    }

    #[test]
    fn errors_name_the_line_and_the_field() {
        let e = parse_line(br#"{"op":"evidence","kind":"test","status":"great","label":"x"}"#, 7)
            .unwrap_err();
        assert_eq!(e.line, 7);
        assert!(e.message.contains("great"), "{e}");
        let e = parse_line(br#"{"op":"agent","id":"a b","prompt":"p"}"#, 2).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("id"));
        let e = parse_line(br#"{"op":"launch"}"#, 3).unwrap_err();
        assert!(e.message.contains("launch"), "{e}");
        let e = parse_line(br#"{"op":"result","ok":true,"extra":1}"#, 4).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("extra"), "{e}");
        assert!(parse_line(b"not json", 1).is_err());
    }

    #[test]
    fn the_reader_splits_lines_across_chunks_and_bounds_them() {
        let mut r = LineReader::default();
        assert!(r.feed(br#"{"op":"stage","na"#).is_empty());
        let done = r.feed(b"me\":\"a\"}\n{\"op\":\"log\",\"message\":\"m\"}\n");
        assert_eq!(done.len(), 2);
        assert!(done.iter().all(Result::is_ok));
        let mut r = LineReader::default();
        let huge = vec![b'x'; LINE_MAX + 10];
        assert!(r.feed(&huge).is_empty());
        let out = r.feed(b"\n{\"op\":\"stage\",\"name\":\"b\"}\n");
        assert_eq!(out.len(), 2);
        assert!(out[0].as_ref().unwrap_err().message.contains("longer"));
        assert_eq!(out[1].as_ref().unwrap(), &FromWorkflow::Stage { name: "b".into() });
        assert!(r.finish().is_none());
    }
}
