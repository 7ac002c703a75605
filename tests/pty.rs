//! Pseudo-terminals for tests that run harn as a person would, at a terminal: a terminal of a
//! given size, a command started with it as its controlling terminal, and the screen read back
//! through a terminal emulator.

use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A window size of `rows` by `cols`.
pub(crate) fn winsize(rows: u16, cols: u16) -> rustix::termios::Winsize {
    rustix::termios::Winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 }
}

/// A pseudo-terminal of `rows` by `cols`: the master side and the path of the other side.
pub(crate) fn pty(rows: u16, cols: u16) -> (OwnedFd, PathBuf) {
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    rustix::termios::tcsetwinsize(&master, winsize(rows, cols)).unwrap();
    let name = ptsname(&master, Vec::new()).unwrap();
    (master, PathBuf::from(name.to_str().unwrap()))
}

/// Gives `cmd` the terminal at `tty` on 0, 1 and 2, as its controlling terminal in a session
/// of its own.
pub(crate) fn on_terminal(cmd: &mut Command, tty: &Path) {
    let open = || std::fs::OpenOptions::new().read(true).write(true).open(tty).unwrap();
    cmd.stdin(Stdio::from(open())).stdout(Stdio::from(open())).stderr(Stdio::from(open()));
    // SAFETY: runs in the forked child before exec; setsid(2) and the TIOCSCTTY ioctl are
    // async-signal-safe. The terminal becomes the child's controlling terminal.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            rustix::process::setsid()?;
            rustix::process::ioctl_tiocsctty(std::os::fd::BorrowedFd::borrow_raw(0))?;
            Ok(())
        });
    }
}

/// The emulated screen, fed by a thread reading the master side.
pub(crate) struct Screen(Arc<Mutex<vt100::Parser>>);

impl Screen {
    /// Follows what is written to the terminal whose master side is `master`.
    pub(crate) fn follow(master: std::fs::File, rows: u16, cols: u16) -> Screen {
        let parser = Arc::new(Mutex::new(vt100::Parser::new(rows, cols, 0)));
        let feed = parser.clone();
        std::thread::spawn(move || {
            let mut master = master;
            let mut buf = [0u8; 4096];
            while let Ok(n) = master.read(&mut buf) {
                if n == 0 {
                    break;
                }
                feed.lock().unwrap().process(&buf[..n]);
            }
        });
        Screen(parser)
    }

    /// What `read` makes of the screen as it is now (its cells, colours, cursor).
    pub(crate) fn with<T>(&self, read: impl FnOnce(&vt100::Screen) -> T) -> T {
        read(self.0.lock().unwrap().screen())
    }

    /// The screen as text.
    pub(crate) fn contents(&self) -> String {
        self.with(vt100::Screen::contents)
    }

    /// Waits up to 20 s until the screen shows every one of `words`.
    pub(crate) fn wait_for(&self, words: &[&str]) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let screen = self.contents();
            if words.iter().all(|w| screen.contains(w)) {
                return;
            }
            assert!(Instant::now() < deadline, "never saw {words:?}; the screen:\n{screen}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
