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

/// Output chunks an attached client has not taken yet; one that falls this far behind is
/// cut off rather than slowing the session.
const WATCHER_BACKLOG: usize = 1_024;

/// The master side of a run's terminal and the screen it shows.
#[derive(Clone)]
pub struct Terminal {
    master: Arc<OwnedFd>,
    screen: Arc<Mutex<vt100::Parser>>,
    /// Attached clients, each fed every output chunk.
    watchers: Arc<Mutex<Vec<std::sync::mpsc::SyncSender<Vec<u8>>>>>,
}

impl Terminal {
    /// Starts reading `master` into `sink` (framed as the harness's `out` lines) and into a
    /// screen of `size`, on a thread of its own that ends when the session does.
    pub fn start(master: OwnedFd, size: TtySize, sink: Arc<Mutex<LogSink>>) -> Terminal {
        let screen = Arc::new(Mutex::new(vt100::Parser::new(size.rows, size.cols, SCROLLBACK)));
        let terminal = Terminal { master: Arc::new(master), screen, watchers: Arc::default() };
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

    /// The screen as a terminal would draw it (contents, attributes and cursor).
    pub fn formatted(&self) -> Vec<u8> {
        self.screen.lock().unwrap_or_else(|e| e.into_inner()).screen().state_formatted()
    }

    /// Every output chunk from now on, until the session ends (the channel closes).
    pub fn watch(&self) -> std::sync::mpsc::Receiver<Vec<u8>> {
        let (tx, rx) = std::sync::mpsc::sync_channel(WATCHER_BACKLOG);
        self.watchers.lock().unwrap_or_else(|e| e.into_inner()).push(tx);
        rx
    }

    /// Gives the terminal a new size (the kernel tells its foreground group with SIGWINCH).
    pub fn resize(&self, size: TtySize) -> io::Result<()> {
        let winsize = rustix::termios::Winsize {
            ws_row: size.rows,
            ws_col: size.cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        rustix::termios::tcsetwinsize(&*self.master, winsize)?;
        self.screen.lock().unwrap_or_else(|e| e.into_inner()).set_size(size.rows, size.cols);
        Ok(())
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
                        let mut watchers = self.watchers.lock().unwrap_or_else(|e| e.into_inner());
                        watchers.retain(|w| w.try_send(bytes.to_vec()).is_ok());
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
        // The session is over: every attached client hears so.
        self.watchers.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// What one frame of an attached connection carries, after its JSON handshake: a byte for
/// the kind, four for the length (big-endian), then the payload.
pub mod frame {
    use std::io::{self, Read, Write};

    /// Output of the terminal (daemon to client).
    pub const OUTPUT: u8 = b'o';
    /// What the person typed (client to daemon).
    pub const INPUT: u8 = b'i';
    /// A new size: columns then rows, two bytes each (client to daemon).
    pub const RESIZE: u8 = b'r';
    /// The client detaches (client to daemon).
    pub const DETACH: u8 = b'd';
    /// The session ended (daemon to client).
    pub const ENDED: u8 = b'e';
    /// The longest payload read.
    const MAX: usize = 1 << 20;

    /// Writes one frame.
    pub fn write(out: &mut impl Write, kind: u8, payload: &[u8]) -> io::Result<()> {
        let mut head = [kind, 0, 0, 0, 0];
        head[1..].copy_from_slice(&(payload.len() as u32).to_be_bytes());
        out.write_all(&head)?;
        out.write_all(payload)?;
        out.flush()
    }

    /// Reads one frame; `None` at the end of the stream.
    pub fn read(input: &mut impl Read) -> io::Result<Option<(u8, Vec<u8>)>> {
        let mut head = [0u8; 5];
        match input.read_exact(&mut head) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        if len > MAX {
            return Err(io::Error::other(format!("a frame of {len} bytes")));
        }
        let mut payload = vec![0u8; len];
        input.read_exact(&mut payload)?;
        Ok(Some((head[0], payload)))
    }
}
