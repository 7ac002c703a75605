//! Forwards SIGCHLD, SIGTERM, SIGINT and SIGHUP to the daemon loop as messages, so child
//! exits are observed by event, never by polling.

use super::protocol::Msg;
use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::sync::mpsc::Sender;

/// Starts the forwarding thread.
pub fn forward(tx: Sender<Msg>) -> std::io::Result<()> {
    let mut signals = Signals::new([SIGCHLD, SIGTERM, SIGINT, SIGHUP])?;
    std::thread::spawn(move || {
        for sig in signals.forever() {
            if tx.send(Msg::Signal(sig)).is_err() {
                return;
            }
        }
    });
    Ok(())
}
