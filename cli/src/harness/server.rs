//! The control socket: a Unix stream socket, mode 0600, that only talks to its own user
//! (checked with SO_PEERCRED). Each connection has a thread that forwards requests to the
//! daemon loop and writes back its answers, or streams events after `subscribe`.

use super::daemon::Msg;
use super::paths::Paths;
use super::protocol::{err, ok, Request};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::mpsc::{self, Sender};

/// Queue length of one event subscriber; a slower reader is told it missed events.
const SUBSCRIBER_QUEUE: usize = 128;

/// Binds the control socket (replacing a stale one: the caller holds the daemon lock) and
/// starts accepting. Returns the socket's path.
pub fn listen(paths: &Paths, tx: Sender<Msg>) -> std::io::Result<PathBuf> {
    let path = paths.socket();
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    }
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let listener = UnixListener::bind(&path)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let tx = tx.clone();
            std::thread::spawn(move || serve(stream, tx));
        }
    });
    Ok(path)
}

fn serve(stream: UnixStream, tx: Sender<Msg>) {
    let Ok(mut out) = stream.try_clone() else { return };
    if !same_user(&stream) {
        let _ = writeln!(out, "{}", err("refused: the daemon talks only to its own user"));
        return;
    }
    for line in BufReader::new(stream).lines() {
        let Ok(line) = line else { return };
        let request: Request = match serde_json::from_str(&line) {
            Ok(r) => r,
            Err(e) => {
                let _ = writeln!(out, "{}", err(format!("bad request: {e}")));
                continue;
            }
        };
        if request == Request::Subscribe {
            stream_events(out, &tx);
            return;
        }
        let (reply_tx, reply_rx) = mpsc::channel();
        if tx.send(Msg::Request(request, reply_tx)).is_err() {
            return;
        }
        let answer = reply_rx.recv().unwrap_or_else(|_| err("the daemon is stopping"));
        if writeln!(out, "{answer}").is_err() {
            return;
        }
    }
}

fn stream_events(mut out: UnixStream, tx: &Sender<Msg>) {
    let (events_tx, events_rx) = mpsc::sync_channel(SUBSCRIBER_QUEUE);
    if tx.send(Msg::Subscribe(events_tx)).is_err() {
        return;
    }
    if writeln!(out, "{}", ok(serde_json::json!({ "subscribed": true }))).is_err() {
        return;
    }
    for line in events_rx {
        if writeln!(out, "{line}").is_err() {
            return;
        }
    }
}

fn same_user(stream: &UnixStream) -> bool {
    rustix::net::sockopt::socket_peercred(stream)
        .is_ok_and(|cred| cred.uid == rustix::process::geteuid())
}
