//! `harn harness logs` (read straight from the files, so it works with the daemon down) and
//! `harn harness events` (a live stream pushed by the daemon).

use super::client;
use super::logview::{self, Format, View};
use super::paths::Paths;
use super::protocol::Request;
use crate::exit::{fail, Exit, EXIT_FAILED, EXIT_USAGE};
use crate::os::clock::RealClock;
use harn_core::env::Clock;
use harn_core::ids::Id;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How often `--follow` looks for new bytes.
const FOLLOW_EVERY: Duration = Duration::from_millis(200);

/// What `harn harness logs` was asked.
pub struct LogsArgs {
    /// One harness, or every harness when `None`.
    pub name: Option<String>,
    /// Lines from the end; `None`: 50, or every line when `since` is given.
    pub lines: Option<usize>,
    /// Keep printing what is appended.
    pub follow: bool,
    /// Only lines from this time on (as [`logview::parse_since`] reads it).
    pub since: Option<String>,
    /// How lines are printed.
    pub format: Format,
    /// Control sequences sent as they are.
    pub raw: bool,
}

/// Prints the last lines of one harness's log, or of every harness's interleaved by time,
/// then follows them if asked. A name that is neither in the configuration nor has a log is
/// bad input.
pub fn logs(paths: &Paths, config: &Path, args: LogsArgs) -> Exit {
    let loaded = super::config::load(config);
    let logs: Vec<(Id, PathBuf)> = match &args.name {
        Some(name) => {
            let id = match Id::new(name) {
                Ok(id) => id,
                Err(e) => return fail(EXIT_USAGE, format!("{name:?}: {e}")),
            };
            let path = paths.log(&id);
            // A configuration that does not load cannot say the name is wrong: without a log
            // of that name, its error is the answer; with one, the log is shown and the error
            // said.
            if let Err(e) = &loaded {
                if !path.exists() && config.exists() {
                    return fail(EXIT_USAGE, format!("{e} (and {name} has no log)"));
                }
                errln!("harn: warning: {e}");
            }
            // A harness that never wrote has no log yet; one the configuration does not name
            // is a mistake, said as `stop` says it.
            if let (false, Ok(cfg)) = (path.exists(), &loaded) {
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
            vec![(id, path)]
        }
        None => {
            if let (Err(e), true) = (&loaded, config.exists()) {
                errln!("harn: warning: {e}");
            }
            // Every configured harness, and every log on disk (a harness removed from the
            // configuration keeps its log).
            let mut names: std::collections::BTreeSet<Id> =
                loaded.iter().flat_map(|cfg| cfg.harnesses.keys().cloned()).collect();
            if let Ok(dir) = std::fs::read_dir(paths.logs_dir()) {
                for entry in dir.flatten() {
                    let file = entry.file_name();
                    let stem = file.to_str().and_then(|f| f.strip_suffix(".log"));
                    names.extend(stem.and_then(|s| Id::new(s).ok()));
                }
            }
            names.into_iter().map(|n| (n.clone(), paths.log(&n))).collect()
        }
    };
    let now = RealClock::new().wall();
    let since = match args.since.as_deref().map(|s| logview::parse_since(s, now)).transpose() {
        Ok(s) => s,
        Err(e) => return fail(EXIT_USAGE, e),
    };
    let show_name = args.name.is_none();
    let view = View { logs, show_name, format: args.format, raw: args.raw, since };
    let lines = args.lines.or(if since.is_some() { None } else { Some(50) });
    // Opened before the tails are read, so nothing written meanwhile is missed (a line may be
    // printed twice, never lost).
    let held: Vec<Option<std::fs::File>> = view
        .logs
        .iter()
        .map(|(_, path)| {
            let mut f = std::fs::File::open(path).ok();
            if let Some(f) = f.as_mut() {
                let _ = f.seek(SeekFrom::End(0));
            }
            f
        })
        .collect();
    match view.last(lines) {
        Ok(entries) => {
            let mut out = std::io::stdout().lock();
            for e in &entries {
                if out.write_all(&view.render(e)).is_err() {
                    return Ok(0);
                }
            }
            let _ = out.flush();
        }
        Err(e) => return fail(EXIT_FAILED, format!("{}: {e}", paths.logs_dir().display())),
    }
    if args.follow {
        follow_all(&view, held);
    }
    Ok(0)
}

/// Follows every log of `view` at once, one reader thread per log, printing whole lines as
/// they arrive, until the reader of the output goes away.
fn follow_all(view: &View, held: Vec<Option<std::fs::File>>) {
    let (send, lines) = std::sync::mpsc::channel::<Vec<u8>>();
    for (i, file) in held.into_iter().enumerate() {
        let (send, view, path) = (send.clone(), view.clone(), view.logs[i].1.clone());
        std::thread::spawn(move || {
            let mut partial = Vec::new();
            let mut carry = None;
            let _ = follow_from(&path, file, &mut |bytes| {
                partial.extend_from_slice(bytes);
                let Some(end) = partial.iter().rposition(|&b| b == b'\n') else {
                    return Ok(());
                };
                let whole: Vec<u8> = partial.drain(..=end).collect();
                let printed: Vec<u8> = view
                    .entries(i, &whole, &mut carry)
                    .iter()
                    .flat_map(|e| view.render(e))
                    .collect();
                send.send(printed).map_err(|_| std::io::ErrorKind::BrokenPipe.into())
            });
        });
    }
    drop(send);
    let mut out = std::io::stdout();
    for printed in lines {
        let mut out = out.lock();
        if out.write_all(&printed).and_then(|()| out.flush()).is_err() {
            return; // The reader went away (a closed pipe).
        }
    }
    let _ = out.flush();
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
            let numbered = PathBuf::from(crate::os::logs::numbered(path.as_os_str(), n));
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
        (Some(ts), Some(seq)) => format!("{} #{seq} ", crate::os::clock::utc(ts)),
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
        "harness_unready" => {
            format!("{name}: run {} lost its readiness (a recheck failed)", e["run"])
        }
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
    use crate::os::logs::{LogSink, Rotation};

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
