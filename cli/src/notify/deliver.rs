//! One delivery of one notice to one channel: a webhook's JSON POST (its `Idempotency-Key`
//! the notice's key, any 2xx an answer), or a command run with the message as its last
//! argument and the notice as JSON on its standard input (exit 0 an answer). Both bounded.

use harn_core::notify::{Channel, ChannelSpec, Notice};
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Longest a webhook may take to answer.
const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a command may run.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// Delivers `notice` to `channel`: `Ok` once the receiver took it, else why not.
pub fn deliver(notice: &Notice, channel: &ChannelSpec) -> Result<(), String> {
    match &channel.channel {
        Channel::Webhook(url) => webhook(url, notice),
        Channel::Command(argv) => command(argv, notice),
    }
}

fn webhook(url: &str, notice: &Notice) -> Result<(), String> {
    let agent = ureq::AgentBuilder::new()
        .timeout(WEBHOOK_TIMEOUT)
        // A redirect is the receiver's to follow, not a place to resend a notice to.
        .redirects(0)
        .build();
    let body = serde_json::to_vec(&notice.body()).expect("a notice serializes");
    let sent = agent
        .post(url)
        .set("Content-Type", "application/json")
        .set("Idempotency-Key", &notice.key)
        .set("User-Agent", concat!("harn/", env!("CARGO_PKG_VERSION")))
        .send_bytes(&body);
    match sent {
        Ok(response) if (200..300).contains(&response.status()) => Ok(()),
        Ok(response) => Err(format!("answered {}", response.status())),
        Err(ureq::Error::Status(code, _)) => Err(format!("answered {code}")),
        Err(e) => Err(e.to_string()),
    }
}

fn command(argv: &[String], notice: &Notice) -> Result<(), String> {
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .arg(notice.full_text())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("{}: {e}", argv[0]))?;
    let body = serde_json::to_vec(&notice.body()).expect("a notice serializes");
    if let Some(mut stdin) = child.stdin.take() {
        crate::os::children::block_sigpipe();
        let _ = stdin.write_all(&body).and_then(|()| stdin.write_all(b"\n"));
    }
    let mut stderr = child.stderr.take().expect("piped");
    let said = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.by_ref().take(4096).read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(status) => break status,
            None if started.elapsed() > COMMAND_TIMEOUT => {
                if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
                    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
                }
                let _ = child.wait();
                return Err(format!(
                    "{} ran past {} s and was killed",
                    argv[0],
                    COMMAND_TIMEOUT.as_secs()
                ));
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    if status.success() {
        return Ok(());
    }
    let said = said.join().unwrap_or_default();
    let last = said.trim().lines().last().unwrap_or("").to_owned();
    Err(format!(
        "{} failed ({status}){}",
        argv[0],
        if last.is_empty() { String::new() } else { format!(": {last}") }
    ))
}

use std::os::unix::process::CommandExt;
