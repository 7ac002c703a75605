//! Talking to a running daemon over its control socket.

use super::paths::Paths;
use super::protocol::Request;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// Why a request got no answer.
#[derive(Debug)]
pub enum ClientError {
    /// Nothing listens on the socket.
    NotRunning(String),
    /// The connection broke or the answer was not JSON.
    Broken(String),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::NotRunning(s) | ClientError::Broken(s) => f.write_str(s),
        }
    }
}

/// Connects to the daemon of `paths.root`.
pub fn connect(paths: &Paths) -> Result<UnixStream, ClientError> {
    let stream = UnixStream::connect(paths.socket()).map_err(|_| {
        ClientError::NotRunning(format!(
            "no harness daemon is running in {} (start one with `harn harness up`)",
            paths.root.display()
        ))
    })?;
    // Whoever listens there must be our own user, not someone who planted a socket.
    if !super::server::same_user(&stream) {
        let msg = format!(
            "{} is served by another user; refusing to talk to it",
            paths.socket().display()
        );
        return Err(ClientError::Broken(msg));
    }
    Ok(stream)
}

/// Sends one request and reads its answer.
pub fn request(paths: &Paths, request: &Request, timeout: Duration) -> Result<Value, ClientError> {
    let stream = connect(paths)?;
    let broken = |e: &dyn std::fmt::Display| ClientError::Broken(format!("control socket: {e}"));
    stream.set_read_timeout(Some(timeout)).map_err(|e| broken(&e))?;
    let mut writer = stream.try_clone().map_err(|e| broken(&e))?;
    let line = serde_json::to_string(request).expect("requests serialize");
    writeln!(writer, "{line}").map_err(|e| broken(&e))?;
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer).map_err(|e| broken(&e))?;
    serde_json::from_str(&answer).map_err(|e| broken(&e))
}

/// True when the answer says `ok`.
pub fn is_ok(answer: &Value) -> bool {
    answer["ok"] == true
}
