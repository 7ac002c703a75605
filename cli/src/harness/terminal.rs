//! Terminal harnesses (`tty = true`): a pseudo-terminal per run whose slave side is the
//! child's controlling terminal and its 0, 1 and 2; the daemon keeps the master side, reads
//! it into the harness's log and into a screen kept by a terminal emulator (`vt100`), types
//! what a person sends into it, and hangs the session up when the run is stopped.

use crate::os::clock::RealClock;
use crate::os::logs::LogSink;
use harn_core::env::{Clock, TtySize};
use harn_core::harness::logline::{Framer, Stream};
use std::io;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

/// Scrollback the screen keeps, in lines.
const SCROLLBACK: usize = 1_000;

/// A new pseudo-terminal of `size`: its master side (close-on-exec, the daemon's) and its
/// slave side (what the child gets).
pub fn open(size: TtySize) -> io::Result<(OwnedFd, OwnedFd)> {
    use rustix::fs::{Mode, OFlags};
    use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    grantpt(&master)?;
    unlockpt(&master)?;
    let name = ptsname(&master, Vec::new())?;
    let flags = OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC;
    let slave = rustix::fs::open(name.as_c_str(), flags, Mode::empty())?;
    let winsize = rustix::termios::Winsize {
        ws_row: size.rows,
        ws_col: size.cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    rustix::termios::tcsetwinsize(&master, winsize)?;
    Ok((master, slave))
}

/// The master side of a run's terminal and the screen it shows.
#[derive(Clone)]
pub struct Terminal {
    master: Arc<OwnedFd>,
    screen: Arc<Mutex<vt100::Parser>>,
}

impl Terminal {
    /// Starts reading `master` into `sink` (framed as the harness's `out` lines) and into a
    /// screen of `size`, on a thread of its own that ends when the session does.
    pub fn start(master: OwnedFd, size: TtySize, sink: Arc<Mutex<LogSink>>) -> Terminal {
        let screen = Arc::new(Mutex::new(vt100::Parser::new(size.rows, size.cols, SCROLLBACK)));
        let terminal = Terminal { master: Arc::new(master), screen };
        let reader = terminal.clone();
        std::thread::spawn(move || reader.pump(&sink));
        terminal
    }

    /// The screen as text, a line per row, trailing blanks trimmed.
    pub fn contents(&self) -> (String, TtySize) {
        let parser = self.screen.lock().unwrap_or_else(|e| e.into_inner());
        let (rows, cols) = parser.screen().size();
        (parser.screen().contents(), TtySize { cols, rows })
    }

    /// Types `bytes` into the terminal, as a keyboard would.
    pub fn send(&self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            match rustix::io::write(&*self.master, bytes) {
                Ok(n) => bytes = &bytes[n..],
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Hangs the session up: SIGHUP to the terminal's foreground process group, as a closed
    /// terminal does. False when no process group holds the terminal any more.
    pub fn hangup(&self) -> bool {
        let Ok(group) = rustix::termios::tcgetpgrp(&*self.master) else { return false };
        rustix::process::kill_process_group(group, rustix::process::Signal::HUP).is_ok()
    }

    /// Reads the master until the session ends (every slave descriptor closed), feeding the
    /// screen and the log; a partial line (a prompt) is logged after the framer's hold.
    fn pump(&self, sink: &Arc<Mutex<LogSink>>) {
        use rustix::event::{poll, PollFd, PollFlags};
        let clock = RealClock::new();
        let mut framer = Framer::new(Stream::Out);
        let mut buf = vec![0u8; 64 * 1024];
        let mut lines = Vec::new();
        let write = |lines: &mut Vec<u8>| {
            if !lines.is_empty() {
                // A full disk loses log bytes, never the session.
                drop(sink.lock().map(|mut s| s.write(lines)));
                lines.clear();
            }
        };
        loop {
            let timeout = framer.due().map(|at| {
                let wait = at.saturating_since(clock.now());
                rustix::fs::Timespec {
                    tv_sec: (wait.0 / 1_000_000_000) as i64,
                    tv_nsec: (wait.0 % 1_000_000_000) as i64,
                }
            });
            let mut fds = [PollFd::new(&*self.master, PollFlags::IN)];
            match poll(&mut fds, timeout.as_ref()) {
                Ok(0) => {}
                Ok(_) => match rustix::io::read(&*self.master, &mut buf) {
                    Ok(n) if n > 0 => {
                        let bytes = &buf[..n];
                        self.screen.lock().unwrap_or_else(|e| e.into_inner()).process(bytes);
                        framer.push(clock.now(), clock.wall(), bytes, &mut lines);
                    }
                    Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => {}
                    // EIO once every slave descriptor is closed: the session is over.
                    _ => break,
                },
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => break,
            }
            framer.flush(clock.now(), false, &mut lines);
            write(&mut lines);
        }
        framer.flush(clock.now(), true, &mut lines);
        write(&mut lines);
    }
}
