//! The sd_notify protocol, both ways: the daemon tells systemd `READY=1` and `WATCHDOG=1`
//! when `NOTIFY_SOCKET` is set, and harnesses may tell the daemon `READY=1` on theirs.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::Path;
use std::time::Duration;

/// Sends `message` to the socket named by `NOTIFY_SOCKET`, if any. Returns whether it was sent.
pub fn notify(message: &str) -> bool {
    let Some(target) = std::env::var_os("NOTIFY_SOCKET") else { return false };
    let target = target.to_string_lossy().into_owned();
    let Ok(sock) = UnixDatagram::unbound() else { return false };
    let sent = match target.strip_prefix('@') {
        Some(name) => SocketAddr::from_abstract_name(name.as_bytes())
            .and_then(|addr| sock.send_to_addr(message.as_bytes(), &addr)),
        None => sock.send_to(message.as_bytes(), Path::new(&target)),
    };
    sent.is_ok()
}

/// The watchdog interval systemd asked for (`WATCHDOG_USEC`, for this pid), halved as
/// sd_watchdog_enabled(3) recommends.
pub fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID") {
        if pid.parse::<u32>().ok() != Some(std::process::id()) {
            return None;
        }
    }
    (usec > 0).then(|| Duration::from_micros(usec / 2))
}

/// True when a notify datagram says the sender is ready.
pub fn says_ready(datagram: &[u8]) -> bool {
    says(datagram, b"READY=1")
}

/// True when a notify datagram is a watchdog ping.
pub fn says_alive(datagram: &[u8]) -> bool {
    says(datagram, b"WATCHDOG=1")
}

fn says(datagram: &[u8], line: &[u8]) -> bool {
    datagram.split(|&b| b == b'\n').any(|l| l == line)
}

#[cfg(test)]
mod tests {
    #[test]
    fn ready_is_one_line_among_others() {
        assert!(super::says_ready(b"STATUS=warming up\nREADY=1\n"));
        assert!(!super::says_ready(b"READY=0"));
        assert!(!super::says_ready(b"NOTREADY=1"));
        assert!(super::says_alive(b"WATCHDOG=1\nSTATUS=busy"));
        assert!(!super::says_alive(b"READY=1"));
    }
}
