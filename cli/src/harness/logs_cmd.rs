//! `harn harness logs` (read straight from the files, so it works with the daemon down) and
//! `harn harness events` (a live stream pushed by the daemon).

use super::client;
use super::logs::tail;
use super::paths::Paths;
use super::protocol::Request;
use crate::exit::{fail, Exit, EXIT_FAILED, EXIT_USAGE};
use harn_core::ids::Id;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
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

/// Prints the last `lines` of a harness's log, then follows it if asked. A name that is
/// neither in the configuration nor has a log is bad input.
pub fn logs(
    paths: &Paths,
    config: &Path,
    name: &str,
    lines: usize,
    follow: bool,
    raw: bool,
) -> Exit {
    let id = match Id::new(name) {
        Ok(id) => id,
        Err(e) => return fail(EXIT_USAGE, format!("{name:?}: {e}")),
    };
    let path = paths.log(&id);
    if !path.exists() {
        // A harness that never wrote has no log yet; one the configuration does not name is
        // a mistake, said as `stop` says it.
        if let Ok(cfg) = super::config::load(config) {
            if !cfg.harnesses.contains_key(&id) {
                let known: Vec<&str> = cfg.harnesses.keys().map(Id::as_str).collect();
                return fail(
                    EXIT_USAGE,
                    format!(
                        "no harness {name} in {} (it has: {})",
                        config.display(),
                        known.join(", ")
                    ),
                );
            }
        }
    }
    // Opened before the tail is read, so nothing written meanwhile is missed (a line may be
    // printed twice, never lost).
    let mut current = std::fs::File::open(&path).ok();
    if let Some(f) = current.as_mut() {
        let _ = f.seek(SeekFrom::End(0));
    }
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
    let out = std::io::stdout();
    let _ = follow_from(&path, current, &mut |bytes| {
        let mut out = out.lock();
        emit(&mut out, bytes, raw).and_then(|()| out.flush())
    });
    Ok(0) // The reader went away (a closed pipe).
}

/// Follows a log across rotations until `emit` fails: what the file it holds still gets is
/// read to its end before the newer files, oldest first, so a rotation loses nothing unless
/// the file it held was dropped past the retention before it could be read.
pub fn follow_from(
    path: &Path,
    mut current: Option<std::fs::File>,
    emit: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let drain = |file: &mut std::fs::File, emit: &mut dyn FnMut(&[u8]) -> std::io::Result<()>| {
        let mut buf = Vec::new();
        file.read_to_end(&mut buf)?;
        if buf.is_empty() {
            Ok(())
        } else {
            emit(&buf)
        }
    };
    let identity = |m: &std::fs::Metadata| (m.dev(), m.ino());
    loop {
        let Some(file) = current.as_mut() else {
            std::thread::sleep(FOLLOW_EVERY);
            current = std::fs::File::open(path).ok();
            continue;
        };
        drain(file, emit)?;
        let held = identity(&file.metadata()?);
        let named = std::fs::metadata(path).ok().map(|m| identity(&m));
        if named == Some(held) {
            std::thread::sleep(FOLLOW_EVERY);
            continue;
        }
        // Rotated: finish the file held, then every file made since (the numbered ones newer
        // than it), oldest first, then the current one from its start.
        drain(file, emit)?;
        let mut newer = Vec::new();
        for n in 1..=ROTATED_MAX {
            let numbered = PathBuf::from(format!("{}.{n}", path.display()));
            match std::fs::metadata(&numbered) {
                Ok(m) if identity(&m) == held => break,
                Ok(_) => newer.push(numbered),
                Err(_) => break,
            }
        }
        for older in newer.iter().rev() {
            if let Ok(mut f) = std::fs::File::open(older) {
                drain(&mut f, emit)?;
            }
        }
        current = std::fs::File::open(path).ok();
    }
}

/// The most rotated files a follower looks through after a rotation.
const ROTATED_MAX: u32 = 64;

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

/// One journal line as a sentence, after its time and sequence number when it has them.
fn describe(line: &str) -> String {
    let Ok(e) = serde_json::from_str::<serde_json::Value>(line) else { return line.to_owned() };
    let when = match (e["ts"].as_i64(), e["seq"].as_u64()) {
        (Some(ts), Some(seq)) => format!("{} #{seq} ", super::ledger::utc(ts)),
        _ => String::new(),
    };
    format!("{when}{}", sentence(&e).unwrap_or_else(|| line.to_owned()))
}

/// An event as the daemon's log says it.
pub fn describe_event(event: &harn_core::harness::lifecycle::Event) -> String {
    let e = serde_json::json!(event);
    sentence(&e).unwrap_or_else(|| e.to_string())
}

fn sentence(e: &serde_json::Value) -> Option<String> {
    let name = e["name"].as_str().unwrap_or("?");
    Some(match e["event"].as_str()? {
        "harness_state_changed" => {
            let cause = e["cause"].as_str().map_or(String::new(), |c| format!(" ({c})"));
            format!(
                "{name}: {} -> {}{cause}",
                e["from"].as_str().unwrap_or("?"),
                e["to"].as_str().unwrap_or("?")
            )
        }
        "harness_exited" => match (e["code"].as_i64(), e["signal"].as_i64()) {
            (Some(c), _) => format!("{name}: exited with code {c}"),
            (_, Some(s)) => format!("{name}: killed by signal {s}"),
            _ => format!("{name}: could not be started"),
        },
        "harness_ready" => format!("{name}: run {} is ready", e["run"]),
        "harness_hung" => format!(
            "{name}: hung ({} after {} ms); stopping it",
            e["reason"].as_str().unwrap_or("?"),
            e["after_ms"]
        ),
        "harness_flapping" => format!(
            "{name}: flapping after {} restarts; next try in {} ms",
            e["restarts"], e["next_retry_in"]
        ),
        "gap" => format!(
            "(missed {} events, #{}..#{}: this reader fell behind; `harn harness ledger` and \
             .harnery/harness/events.jsonl have them all)",
            e["missed"], e["first_seq"], e["last_seq"]
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::logs::{LogSink, Rotation};

    /// A writer that rotates its log many times between two looks of the follower (2 KB
    /// files, written in bursts): every line arrives, once, in order.
    #[test]
    fn following_loses_nothing_across_rotations() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.log");
        let rotation = Rotation { max_file_bytes: 2_000, keep: 60 };
        let sink = LogSink::open(dir.path(), path.clone(), rotation).unwrap();
        let current = std::fs::File::open(&path).ok();
        const LINES: usize = 4_000;
        let writer = std::thread::spawn(move || {
            for i in 0..LINES {
                sink.lock().unwrap().write(format!("line {i:05}\n").as_bytes()).unwrap();
                if i % 500 == 499 {
                    std::thread::sleep(Duration::from_millis(150));
                }
            }
        });
        let mut seen = Vec::new();
        let last = format!("line {:05}\n", LINES - 1);
        let _ = follow_from(&path, current, &mut |bytes| {
            seen.extend_from_slice(bytes);
            if seen.ends_with(last.as_bytes()) {
                return Err(std::io::Error::other("done"));
            }
            Ok(())
        });
        writer.join().unwrap();
        let text = String::from_utf8(seen).unwrap();
        let expected: String = (0..LINES).map(|i| format!("line {i:05}\n")).collect();
        assert!(text == expected, "{} of {LINES} lines, in order", text.lines().count());
    }
}
