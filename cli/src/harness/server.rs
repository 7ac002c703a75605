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
        let _ = send(&mut out, &err("refused: the daemon talks only to its own user"));
        return;
    }
    let contained = contained_peer(&stream);
    let Ok(raw) = stream.try_clone() else { return };
    for line in BufReader::new(stream).lines() {
        let Ok(line) = line else { return };
        let request: Request = match serde_json::from_str(&line) {
            Ok(r) => r,
            Err(e) => {
                let _ = send(&mut out, &err(format!("bad request: {e}")));
                continue;
            }
        };
        if request == Request::Subscribe {
            stream_events(out, &tx);
            return;
        }
        let looks = matches!(request, Request::Ping | Request::Status { .. });
        if contained && !looks {
            let refusal = err("refused: a process a run contains may not steer the daemon");
            if send(&mut out, &refusal).is_err() {
                return;
            }
            continue;
        }
        if let Request::Attach { name, read_only, size } = request {
            // The client sends frames only once it has the answer: nothing is buffered.
            return attach(out, raw, &tx, &name, read_only, size);
        }
        let (reply_tx, reply_rx) = mpsc::channel();
        if tx.send(Msg::Request(request, reply_tx)).is_err() {
            return;
        }
        let answer = reply_rx.recv().unwrap_or_else(|_| err("the daemon is stopping"));
        if send(&mut out, &answer).is_err() {
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
    if send(&mut out, &ok(serde_json::json!({ "subscribed": true }))).is_err() {
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
        if send(&mut out, &line).is_err() {
            return;
        }
    }
}

/// Writes `line` and its newline in one call: a status document of a thousand harnesses
/// formatted straight into the socket would be thousands of small writes.
fn send(out: &mut UnixStream, line: &impl std::fmt::Display) -> std::io::Result<()> {
    let mut text = line.to_string();
    text.push('\n');
    out.write_all(text.as_bytes())
}

/// How long a quiet stream waits before it looks again (for a loss to report, or a hang-up).
const STREAM_TICK: std::time::Duration = std::time::Duration::from_millis(200);

/// True when the other end of `stream` is a process a run of harn contains: one in a user
/// namespace other than ours, or in a run's cgroup (`harn-work-…`). Such a process may look
/// (ping, status, events) but not steer: a run that could start, stop or reload harnesses
/// would act as the person, outside its containment.
pub fn contained_peer(stream: &UnixStream) -> bool {
    let Some(cred) = peer(stream) else { return true };
    let pid = cred.pid;
    if pid <= 0 {
        return true; // Not visible from here: in a PID namespace of its own.
    }
    use crate::os::procfs::{cgroup_of, user_namespace};
    let other_ns = match (user_namespace(Some(pid as u32)), user_namespace(None)) {
        (Some(peer), Some(own)) => peer != own,
        _ => false,
    };
    let in_a_run = cgroup_of(pid as u32).is_some_and(|c| c.contains("/harn-work-"));
    other_ns || in_a_run
}

/// True when the other end of `stream` runs as our own user.
pub fn same_user(stream: &UnixStream) -> bool {
    peer(stream).is_some_and(|cred| cred.uid == rustix::process::geteuid().as_raw())
}

/// The credentials of the other end of `stream`, as this process's namespaces see them: a
/// pid of 0 for a process outside its PID namespace (which `rustix`'s `UCred` cannot hold).
fn peer(stream: &UnixStream) -> Option<libc::ucred> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred { pid: 0, uid: u32::MAX, gid: u32::MAX };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: SO_PEERCRED writes a `ucred` of at most `len` bytes.
    let r = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(cred)
}

/// Carries one attached client: the current screen first, then every output chunk to it and,
/// for the writer, what it types and its size to the terminal, until it detaches, goes
/// away, or the session ends. Detaching never stops the harness.
fn attach(
    mut out: UnixStream,
    mut input: UnixStream,
    tx: &Sender<Msg>,
    name: &str,
    read_only: bool,
    size: Option<[u16; 2]>,
) {
    use super::terminal::frame;
    let (answer, answered) = mpsc::channel();
    let asked = Msg::Attach { name: name.to_owned(), read_only, answer };
    if tx.send(asked).is_err() {
        return;
    }
    let attached = match answered.recv() {
        Ok(Ok(a)) => a,
        Ok(Err(why)) => return drop(send(&mut out, &err(why))),
        Err(_) => return drop(send(&mut out, &err("the daemon is stopping"))),
    };
    let (terminal, writes) = (attached.terminal, attached.writes);
    // Whatever ends this connection, the daemon hears the client is gone.
    let detach = Detach { tx: tx.clone(), client: attached.client };
    if let (true, Some([cols, rows])) = (writes, size) {
        let _ = terminal.resize(harn_core::env::TtySize { cols, rows });
    }
    let watching = terminal.watch();
    let (_, shown) = terminal.contents();
    let hello = ok(serde_json::json!({ "attached": name, "read_only": read_only,
                                       "cols": shown.cols, "rows": shown.rows }));
    if send(&mut out, &hello).is_err()
        || frame::write(&mut out, frame::OUTPUT, &terminal.formatted()).is_err()
    {
        return;
    }
    // What the client sends, on a thread of its own; its end ends the output loop too.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reading = done.clone();
    let typing = terminal.clone();
    let closer = out.try_clone();
    std::thread::spawn(move || {
        let _detach = detach;
        while let Ok(Some((kind, payload))) = frame::read(&mut input) {
            match kind {
                frame::INPUT if writes => drop(typing.send(&payload)),
                frame::RESIZE if writes && payload.len() == 4 => {
                    let cols = u16::from_be_bytes([payload[0], payload[1]]);
                    let rows = u16::from_be_bytes([payload[2], payload[3]]);
                    if cols > 0 && rows > 0 {
                        drop(typing.resize(harn_core::env::TtySize { cols, rows }));
                    }
                }
                frame::DETACH => break,
                _ => {}
            }
        }
        reading.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Ok(c) = closer {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    });
    loop {
        match watching.recv_timeout(STREAM_TICK) {
            Ok(chunk) => {
                if frame::write(&mut out, frame::OUTPUT, &chunk).is_err() {
                    return;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if done.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let _ = frame::write(&mut out, frame::ENDED, b"");
                let _ = out.shutdown(std::net::Shutdown::Both);
                return;
            }
        }
    }
}

/// Tells the daemon's loop an attached client is gone, when dropped.
struct Detach {
    tx: Sender<Msg>,
    client: u64,
}

impl Drop for Detach {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Detach(self.client));
    }
}
