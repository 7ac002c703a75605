//! The control socket: a Unix stream socket, mode 0600, that only talks to its own user
//! (checked with SO_PEERCRED). Each connection has a thread that forwards requests to the
//! daemon loop and writes back its answers, or streams events after `subscribe`.

use super::paths::Paths;
use super::protocol::Msg;
use super::protocol::{err, ok, Request};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::mpsc::{self, Sender};

/// How often a quiet event stream checks that its subscriber is still there.
const HANGUP_CHECK: std::time::Duration = std::time::Duration::from_secs(30);

/// True when the client closed its end (a peek reads end of file).
fn hung_up(stream: &UnixStream) -> bool {
    use rustix::net::{recv, RecvFlags};
    let mut byte = [0u8; 1];
    matches!(recv(stream, &mut byte, RecvFlags::PEEK | RecvFlags::DONTWAIT), Ok((0, _)))
}

/// Binds the control socket (replacing a stale one: the caller holds the daemon lock) and
/// starts accepting. Returns the socket's path.
pub fn listen(paths: &Paths, tx: Sender<Msg>) -> std::io::Result<PathBuf> {
    let path = paths.prepare_socket_dir("")?.join("control.sock");
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let listener = UnixListener::bind(&path)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    std::thread::spawn(move || accept(&listener, &tx));
    Ok(path)
}

/// Clients served at once; a connection beyond is told the daemon is busy and closed, so a
/// flood of clients cannot take the descriptors the daemon keeps for its own files.
const MAX_CONNECTIONS: usize = 32;

fn accept(listener: &UnixListener, tx: &Sender<Msg>) {
    let open = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    loop {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors (or another transient failure): wait, do not spin.
                let pause = if super::fds::is_exhaustion(&e) { 100 } else { 10 };
                std::thread::sleep(std::time::Duration::from_millis(pause));
                continue;
            }
        };
        use std::sync::atomic::Ordering;
        if open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            open.fetch_sub(1, Ordering::SeqCst);
            let mut stream = stream;
            let _ = writeln!(stream, "{}", err("busy: too many clients at once, try again"));
            continue;
        }
        let (tx, served) = (tx.clone(), open.clone());
        let spawned = std::thread::Builder::new().spawn(move || {
            serve(stream, tx);
            served.fetch_sub(1, Ordering::SeqCst);
        });
        if spawned.is_err() {
            open.fetch_sub(1, Ordering::SeqCst);
        }
    }
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
    use super::subscribers::Next;
    let (daemon_end, mut subscription) = super::subscribers::pair();
    if tx.send(Msg::Subscribe(daemon_end)).is_err() {
        return;
    }
    if writeln!(out, "{}", ok(serde_json::json!({ "subscribed": true }))).is_err() {
        return;
    }
    let mut quiet = std::time::Duration::ZERO;
    loop {
        let line = match subscription.next(STREAM_TICK) {
            Next::Line(line) => line,
            Next::Gap(m) => serde_json::json!({
                "event": "gap", "missed": m.count, "first_seq": m.first, "last_seq": m.last,
            })
            .to_string(),
            // Nothing to say: now and then make sure someone is still listening.
            Next::Quiet => {
                quiet += STREAM_TICK;
                if quiet >= HANGUP_CHECK {
                    quiet = std::time::Duration::ZERO;
                    if hung_up(&out) {
                        return;
                    }
                }
                continue;
            }
            Next::Closed => return,
        };
        if writeln!(out, "{line}").is_err() {
            return;
        }
    }
}

/// How long a quiet stream waits before it looks again (for a loss to report, or a hang-up).
const STREAM_TICK: std::time::Duration = std::time::Duration::from_millis(200);

/// True when the other end of `stream` runs as our own user.
pub fn same_user(stream: &UnixStream) -> bool {
    rustix::net::sockopt::socket_peercred(stream)
        .is_ok_and(|cred| cred.uid == rustix::process::geteuid())
}
