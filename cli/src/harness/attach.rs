//! `harn harness attach NAME`: the person's terminal connected to a terminal harness through
//! the daemon's socket, in raw mode, the current screen drawn first, its size forwarded, until
//! the detach keys (Ctrl-] by default) or the end of the session; the terminal is restored on
//! every way out, and the harness keeps running.

use super::paths::Paths;
use super::protocol::Request;
use super::terminal::frame;
use crate::exit::{fail, Exit, EXIT_FAILED, EXIT_USAGE};
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How often the input loop looks at the signals it watches (a resize, a stop).
const TICK: Duration = Duration::from_millis(100);

/// The bytes of a detach sequence as docker writes it: `ctrl-]` (the default), `ctrl-p,ctrl-q`,
/// or single characters, comma-separated.
pub fn detach_keys(spec: &str) -> Result<Vec<u8>, String> {
    let mut keys = Vec::new();
    for key in spec.split(',') {
        let key = key.trim();
        match key.strip_prefix("ctrl-") {
            Some(c) if c.len() == 1 => {
                let b = c.as_bytes()[0].to_ascii_uppercase();
                if !(b'@'..=b'_').contains(&b) {
                    return Err(format!("{key:?}: ctrl- takes a letter or one of @[\\]^_"));
                }
                keys.push(b - b'@');
            }
            None if key.len() == 1 && key.is_ascii() => keys.push(key.as_bytes()[0]),
            _ => return Err(format!("{key:?}: a key is ctrl-X or one character")),
        }
    }
    if keys.is_empty() {
        return Err("no keys".into());
    }
    Ok(keys)
}

/// The person's terminal in raw mode, restored when dropped.
struct Raw {
    saved: rustix::termios::Termios,
}

impl Raw {
    fn enter() -> std::io::Result<Raw> {
        let stdin = std::io::stdin();
        let saved = rustix::termios::tcgetattr(stdin.as_fd())?;
        let mut raw = saved.clone();
        raw.make_raw();
        rustix::termios::tcsetattr(stdin.as_fd(), rustix::termios::OptionalActions::Now, &raw)?;
        Ok(Raw { saved })
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let stdin = std::io::stdin();
        let now = rustix::termios::OptionalActions::Now;
        let _ = rustix::termios::tcsetattr(stdin.as_fd(), now, &self.saved);
    }
}

/// The size of the person's terminal.
fn size() -> Option<[u16; 2]> {
    let w = rustix::termios::tcgetwinsize(std::io::stdin().as_fd()).ok()?;
    (w.ws_col > 0 && w.ws_row > 0).then_some([w.ws_col, w.ws_row])
}

/// Runs `attach`.
pub fn run(paths: &Paths, name: &str, read_only: bool, keys: &str) -> Exit {
    if let Err(e) = harn_core::ids::Id::new(name) {
        return fail(EXIT_USAGE, format!("{name:?}: {e}"));
    }
    let keys = match detach_keys(keys) {
        Ok(k) => k,
        Err(e) => return fail(EXIT_USAGE, format!("--detach-keys {e}")),
    };
    if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        let why = "attach needs a terminal on its standard input; `harn harness screen` prints the screen and `harn harness send` types";
        return fail(EXIT_USAGE, why);
    }
    let stream = super::client::connect(paths).map_err(crate::exit::Failure::failed)?;
    let request = Request::Attach { name: name.to_owned(), read_only, size: size() };
    let mut writer = stream.try_clone().map_err(crate::exit::Failure::failed)?;
    let mut reader = stream;
    let line = serde_json::to_string(&request).expect("requests serialize");
    if writeln!(writer, "{line}").is_err() {
        return fail(EXIT_FAILED, "the control socket closed");
    }
    // The answer, a byte at a time: frames follow it on the same stream.
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while reader.read(&mut byte).map_err(crate::exit::Failure::failed)? == 1 && byte[0] != b'\n' {
        answer.push(byte[0]);
    }
    let answer: serde_json::Value = serde_json::from_slice(&answer).unwrap_or_default();
    if answer["ok"] != true {
        return fail(EXIT_FAILED, answer["error"].as_str().unwrap_or("the daemon refused"));
    }
    let ended = session(&mut reader, &mut writer, read_only, &keys)?;
    let how = if read_only { "watched" } else { "attached to" };
    match ended {
        Ended::Detached => {
            errln!("detached from {name}; it keeps running (`harn harness attach {name}` to come back)")
        }
        Ended::SessionOver => errln!("{name}'s terminal session ended"),
        Ended::Lost => {
            errln!("the connection to the daemon was lost; {name} was {how}, not stopped")
        }
    }
    Ok(0)
}

/// Why an attached session ended.
enum Ended {
    Detached,
    SessionOver,
    Lost,
}

/// The attached session in raw mode: output drawn as it comes, keys sent (unless
/// `read_only`), the size sent on SIGWINCH, until the detach keys or the end.
fn session(
    reader: &mut std::os::unix::net::UnixStream,
    writer: &mut std::os::unix::net::UnixStream,
    read_only: bool,
    keys: &[u8],
) -> Result<Ended, crate::exit::Failure> {
    let resized = Arc::new(AtomicBool::new(false));
    let stopped = Arc::new(AtomicBool::new(false));
    let _winch = signal_hook::flag::register(signal_hook::consts::SIGWINCH, resized.clone());
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
        let _ = signal_hook::flag::register(sig, stopped.clone());
    }
    let raw = Raw::enter().map_err(crate::exit::Failure::failed)?;
    // Output on a thread of its own: the terminal's bytes drawn as they are.
    let over = Arc::new(AtomicBool::new(false));
    let (over_out, mut from) =
        (over.clone(), reader.try_clone().map_err(crate::exit::Failure::failed)?);
    let drawing = std::thread::spawn(move || {
        let mut stdout = std::io::stdout();
        let mut clean_end = false;
        while let Ok(Some((kind, payload))) = frame::read(&mut from) {
            match kind {
                frame::OUTPUT => {
                    let _ = stdout.write_all(&payload);
                    let _ = stdout.flush();
                }
                frame::ENDED => {
                    clean_end = true;
                    break;
                }
                _ => {}
            }
        }
        over_out.store(true, Ordering::SeqCst);
        clean_end
    });
    let stdin = std::io::stdin();
    let mut buf = [0u8; 4096];
    let mut matched = 0;
    let ended = loop {
        if over.load(Ordering::SeqCst) {
            break None;
        }
        if stopped.load(Ordering::SeqCst) {
            break Some(Ended::Detached);
        }
        if resized.swap(false, Ordering::SeqCst) && !read_only {
            if let Some([cols, rows]) = size() {
                let mut payload = cols.to_be_bytes().to_vec();
                payload.extend(rows.to_be_bytes());
                if frame::write(writer, frame::RESIZE, &payload).is_err() {
                    break None;
                }
            }
        }
        let mut fds = [rustix::event::PollFd::new(&stdin, rustix::event::PollFlags::IN)];
        let timeout = rustix::fs::Timespec { tv_sec: 0, tv_nsec: TICK.as_nanos() as i64 };
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(0) | Err(rustix::io::Errno::INTR) => continue,
            Ok(_) => {}
            Err(_) => break None,
        }
        let n = match rustix::io::read(&stdin, &mut buf) {
            Ok(0) | Err(_) => break Some(Ended::Detached),
            Ok(n) => n,
        };
        // The detach keys, in order, end the session; the part of them typed so far is held
        // back, and sent if the sequence breaks off.
        let mut typed = Vec::with_capacity(n);
        let mut detach = false;
        for &b in &buf[..n] {
            if b == keys[matched] {
                matched += 1;
                if matched == keys.len() {
                    detach = true;
                    break;
                }
            } else {
                typed.extend_from_slice(&keys[..matched]);
                matched = usize::from(b == keys[0]);
                if matched == 0 {
                    typed.push(b);
                }
            }
        }
        if !read_only && !typed.is_empty() && frame::write(writer, frame::INPUT, &typed).is_err() {
            break None;
        }
        if detach {
            let _ = frame::write(writer, frame::DETACH, b"");
            break Some(Ended::Detached);
        }
    };
    let _ = writer.shutdown(std::net::Shutdown::Both);
    let clean_end = drawing.join().unwrap_or(false);
    drop(raw);
    // A fresh line after whatever the session drew.
    let _ = std::io::stdout().write_all(b"\r\n");
    Ok(ended.unwrap_or(if clean_end { Ended::SessionOver } else { Ended::Lost }))
}

#[cfg(test)]
mod tests {
    use super::detach_keys;

    #[test]
    fn detach_keys_read_as_docker_writes_them() {
        assert_eq!(detach_keys("ctrl-]").unwrap(), [0x1d]);
        assert_eq!(detach_keys("ctrl-p,ctrl-q").unwrap(), [0x10, 0x11]);
        assert_eq!(detach_keys("ctrl-a,x").unwrap(), [0x01, b'x']);
        assert!(detach_keys("ctrl-").is_err() && detach_keys("alt-x").is_err());
        assert!(detach_keys("ctrl-1").is_err());
    }
}
