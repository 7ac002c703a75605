//! `harn harness logs` (read straight from the files, so it works with the daemon down) and
//! `harn harness events` (a live stream pushed by the daemon).

use super::client;
use super::logs::tail;
use super::paths::Paths;
use super::protocol::Request;
use crate::exit::{fail, Exit, EXIT_FAILED, EXIT_USAGE};
use harn_core::ids::Id;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::time::Duration;

/// How often `--follow` looks for new bytes.
const FOLLOW_EVERY: Duration = Duration::from_millis(200);

/// Writes log bytes to `out`: as they are with `raw`, else with every control sequence a
/// child wrote shown instead of sent to the terminal.
fn emit(out: &mut impl Write, bytes: &[u8], raw: bool) -> std::io::Result<()> {
    if raw {
        out.write_all(bytes)
    } else {
        out.write_all(&harn_core::text::neutralize_bytes(bytes))
    }
}

/// Prints the last `lines` of a harness's log, then follows it if asked.
pub fn logs(paths: &Paths, name: &str, lines: usize, follow: bool, raw: bool) -> Exit {
    let id = match Id::new(name) {
        Ok(id) => id,
        Err(e) => return fail(EXIT_USAGE, format!("{name:?}: {e}")),
    };
    let path = paths.log(&id);
    match tail(&path, lines) {
        Ok(bytes) => {
            let mut out = std::io::stdout().lock();
            let _ = emit(&mut out, &bytes, raw);
            let _ = out.flush();
        }
        Err(e) => return fail(EXIT_FAILED, format!("{}: {e}", path.display())),
    }
    if !follow {
        return Ok(0);
    }
    let mut offset = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    loop {
        std::thread::sleep(FOLLOW_EVERY);
        let Ok(mut file) = std::fs::File::open(&path) else { continue };
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        if len < offset {
            offset = 0; // Rotated: the new file starts from the beginning.
        }
        if len == offset || file.seek(SeekFrom::Start(offset)).is_err() {
            continue;
        }
        let mut buf = Vec::new();
        if file.read_to_end(&mut buf).is_ok() {
            offset += buf.len() as u64;
            let mut out = std::io::stdout().lock();
            if emit(&mut out, &buf, raw).and_then(|()| out.flush()).is_err() {
                return Ok(0); // The reader went away (a closed pipe).
            }
        }
    }
}

/// Streams lifecycle events until the daemon stops or the reader goes away.
pub fn events(paths: &Paths, json: bool) -> Exit {
    let stream = match client::connect(paths) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_FAILED, e),
    };
    let mut writer = match stream.try_clone() {
        Ok(w) => w,
        Err(e) => return fail(EXIT_FAILED, e),
    };
    let subscribe = serde_json::to_string(&Request::Subscribe).expect("serializes");
    if writeln!(writer, "{subscribe}").is_err() {
        return fail(EXIT_FAILED, "the daemon closed the connection");
    }
    let mut lines = BufReader::new(stream).lines();
    match lines.next() {
        Some(Ok(first)) if first.contains("\"subscribed\":true") => {}
        other => return fail(EXIT_FAILED, format!("subscription refused: {other:?}")),
    }
    for line in lines {
        let Ok(line) = line else { break };
        let shown = if json { line } else { describe(&line) };
        let mut out = std::io::stdout().lock();
        if writeln!(out, "{shown}").and_then(|()| out.flush()).is_err() {
            return Ok(0);
        }
    }
    Ok(0)
}

/// One event as a sentence.
fn describe(line: &str) -> String {
    let Ok(e) = serde_json::from_str::<serde_json::Value>(line) else { return line.to_owned() };
    let name = e["name"].as_str().unwrap_or("?");
    match e["event"].as_str() {
        Some("harness_state_changed") => {
            format!(
                "{name}: {} -> {}",
                e["from"].as_str().unwrap_or("?"),
                e["to"].as_str().unwrap_or("?")
            )
        }
        Some("harness_exited") => match (e["code"].as_i64(), e["signal"].as_i64()) {
            (Some(c), _) => format!("{name}: exited with code {c}"),
            (_, Some(s)) => format!("{name}: killed by signal {s}"),
            _ => format!("{name}: could not be started"),
        },
        Some("harness_flapping") => format!(
            "{name}: flapping after {} restarts; next try in {} ms",
            e["restarts"], e["next_retry_in"]
        ),
        Some("gap") => {
            "(events were missed: the stream fell behind; run `harn harness list`)".into()
        }
        _ => line.to_owned(),
    }
}
