//! Per-harness log files with size-based rotation and a cap on retained bytes, written by one
//! pump thread that drains the children's pipes and frames their bytes into timestamped
//! lines, so a fast writer never blocks the daemon loop.

use crate::os::clock::RealClock;
use harn_core::env::Clock;
use harn_core::harness::logline::{Framer, Stream};
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Rotation limits: a file rotates at `max_file_bytes`; `keep` older files are retained, so
/// at most `max_file_bytes × (keep + 1)` bytes are kept per harness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rotation {
    /// Size at which the current file rotates.
    pub max_file_bytes: u64,
    /// Rotated files kept (`NAME.log.1` newest … `NAME.log.K` oldest).
    pub keep: u32,
}

impl From<harn_core::journal::Retention> for Rotation {
    fn from(r: harn_core::journal::Retention) -> Rotation {
        Rotation { max_file_bytes: r.max_file_bytes, keep: r.kept }
    }
}

impl Default for Rotation {
    fn default() -> Rotation {
        Rotation { max_file_bytes: 8 << 20, keep: 5 }
    }
}

/// One harness's log, shared by the threads reading its stdout and stderr.
pub struct LogSink {
    /// The coordination root: every open and rotation walks from it without following a
    /// symlink (a log planted as a link to a file elsewhere is refused, not written).
    root: PathBuf,
    path: PathBuf,
    file: Option<File>,
    size: u64,
    rotation: Rotation,
    /// Lines a full disk kept out since the last write that fit: `(lines, bytes, since)`.
    dropped: Option<(u64, u64, harn_core::time::WallTime)>,
}

impl LogSink {
    /// A sink appending to `path` below `root`, created 0600 when missing.
    pub fn open(
        root: &Path,
        path: PathBuf,
        rotation: Rotation,
    ) -> std::io::Result<Arc<Mutex<LogSink>>> {
        let file = crate::os::private::append_below(root, &path)?;
        let size = file.metadata()?.len();
        let root = root.to_path_buf();
        let dropped = None;
        Ok(Arc::new(Mutex::new(LogSink { root, path, file: Some(file), size, rotation, dropped })))
    }

    /// Rotates at these limits from the next write on.
    pub fn set_rotation(&mut self, rotation: Rotation) {
        self.rotation = rotation;
    }

    /// Appends `bytes` (whole framed lines), rotating first when the file would grow past
    /// its limit. Lines that do not fit (a full disk) are dropped and counted, and the first
    /// write that fits again begins with a line of harn's saying how many and since when.
    pub fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let mut note = Vec::new();
        if let Some((lines, size, since)) = self.dropped {
            let text = format!(
                "{lines} lines ({size} bytes) of output were dropped since {}: the disk was full",
                since.utc()
            );
            let now = RealClock::new().wall();
            note = harn_core::harness::logline::format(now, Stream::Harn, text.as_bytes());
        }
        let before = self.size;
        let written = match note.is_empty() {
            true => self.write_lines(bytes),
            false => self.write_lines(&[note.as_slice(), bytes].concat()),
        };
        match written {
            Ok(()) => {
                self.dropped = None;
                Ok(())
            }
            Err(e) => {
                // What part reached the file is cut, so the log stays whole lines.
                if let Some(file) = &self.file {
                    if file.set_len(before).is_ok() {
                        self.size = before;
                    }
                }
                let lines = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
                let since = self.dropped.map_or_else(|| RealClock::new().wall(), |d| d.2);
                let (l, b) = self.dropped.map_or((0, 0), |d| (d.0, d.1));
                self.dropped = Some((l + lines, b + bytes.len() as u64, since));
                Err(e)
            }
        }
    }

    fn write_lines(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.size > 0 && self.size + bytes.len() as u64 > self.rotation.max_file_bytes {
            self.rotate()?;
        }
        let file = match self.file.as_mut() {
            Some(f) => f,
            None => self.file.insert(crate::os::private::append_below(&self.root, &self.path)?),
        };
        file.write_all(bytes)?;
        self.size += bytes.len() as u64;
        Ok(())
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        self.file = None;
        rotate_files(&self.root, &self.path, self.rotation.keep)?;
        self.size = 0;
        Ok(())
    }
}

/// Shifts `PATH.1` … `PATH.keep-1` up by one (dropping `PATH.keep`) and moves `PATH` to
/// `PATH.1`; with `keep` 0, removes `PATH`. Missing files are skipped. Every name is taken
/// relative to the log's directory, reached from `root` without following a symlink.
pub fn rotate_files(root: &Path, path: &Path, keep: u32) -> std::io::Result<()> {
    let (parent, name) = crate::os::private::split(path)?;
    let dir = crate::os::private::Dir::open_below(root, parent, true)?;
    let numbered = |n: u32| numbered(name, n);
    if keep == 0 {
        return dir.remove(name);
    }
    dir.remove(numbered(keep))?;
    for n in (1..keep).rev() {
        dir.rename(numbered(n), &dir, numbered(n + 1)).or_else(ignore_missing)?;
    }
    dir.rename(name, &dir, numbered(1)).or_else(ignore_missing)
}

/// The name of a log's `n`-th rotated file: `NAME.n`.
pub fn numbered(name: &std::ffi::OsStr, n: u32) -> std::ffi::OsString {
    let mut numbered = name.to_owned();
    numbered.push(format!(".{n}"));
    numbered
}

/// A rotated log's files as they stand, oldest first: `PATH.K` … `PATH.1`, then `PATH`.
pub fn oldest_first(path: &Path) -> Vec<std::path::PathBuf> {
    let at = |n: u32| std::path::PathBuf::from(numbered(path.as_os_str(), n));
    let rotated = (1..).take_while(|n| at(*n).exists()).count() as u32;
    let mut paths: Vec<_> = (1..=rotated).rev().map(at).collect();
    paths.push(path.to_owned());
    paths
}

fn ignore_missing(e: std::io::Error) -> std::io::Result<()> {
    if e.kind() == std::io::ErrorKind::NotFound {
        Ok(())
    } else {
        Err(e)
    }
}

/// One thread that copies every child's stdout and stderr into its log, framed as lines
/// with their time and stream ([`harn_core::harness::logline`]): it polls all the pipes at
/// once, so a child costs two descriptors, not two threads. When the disk is slow the pump
/// waits, the pipes fill and the children block on their writes; the daemon loop never does.
pub struct LogPump {
    new: std::sync::mpsc::Sender<Pipe>,
    wake: OwnedFd,
}

/// One pipe the pump drains.
struct Pipe {
    fd: OwnedFd,
    sink: Arc<Mutex<LogSink>>,
    framer: Framer,
}

impl LogPump {
    /// Starts the pump thread.
    pub fn start() -> std::io::Result<LogPump> {
        let (wake_read, wake) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        let (new, added) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("log-pump".into())
            .spawn(move || pump(wake_read, added))?;
        Ok(LogPump { new, wake })
    }

    /// Copies `pipe`, the child's `stream`, into `sink` until it closes.
    pub fn add(&self, pipe: impl Into<OwnedFd>, stream: Stream, sink: Arc<Mutex<LogSink>>) {
        let pipe = Pipe { fd: pipe.into(), sink, framer: Framer::new(stream) };
        if self.new.send(pipe).is_ok() {
            let _ = rustix::io::write(&self.wake, &[1]);
        }
    }
}

fn pump(wake: OwnedFd, added: std::sync::mpsc::Receiver<Pipe>) {
    use rustix::event::{poll, PollFd, PollFlags};
    let clock = RealClock::new();
    let mut pipes: Vec<Pipe> = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut lines = Vec::new();
    // A full disk loses log bytes, never supervision.
    let write = |sink: &Arc<Mutex<LogSink>>, lines: &mut Vec<u8>| {
        if !lines.is_empty() {
            drop(sink.lock().map(|mut s| s.write(lines)));
            lines.clear();
        }
    };
    loop {
        // Sleep until a pipe has bytes, or the first partial line held is due.
        let due = pipes.iter().filter_map(|p| p.framer.due()).min();
        let timeout = due.map(|at| {
            let wait = at.saturating_since(clock.now());
            rustix::fs::Timespec {
                tv_sec: (wait.0 / 1_000_000_000) as i64,
                tv_nsec: (wait.0 % 1_000_000_000) as i64,
            }
        });
        let ready: Vec<PollFlags> = {
            let mut fds = vec![PollFd::new(&wake, PollFlags::IN)];
            fds.extend(pipes.iter().map(|p| PollFd::new(&p.fd, PollFlags::IN)));
            match poll(&mut fds, timeout.as_ref()) {
                Ok(_) => fds.iter().map(PollFd::revents).collect(),
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => return flush_all(&mut pipes, clock.now(), &mut lines),
            }
        };
        if !ready[0].is_empty() {
            if rustix::io::read(&wake, &mut buf[..64]).map_or(true, |n| n == 0) {
                // The daemon is gone: what the framers hold is written, not dropped.
                return flush_all(&mut pipes, clock.now(), &mut lines);
            }
            pipes.extend(added.try_iter());
        }
        let mut closed = Vec::new();
        for (i, _) in ready[1..].iter().enumerate().filter(|(_, f)| !f.is_empty()) {
            let pipe = &mut pipes[i];
            match rustix::io::read(&pipe.fd, &mut buf) {
                Ok(n) if n > 0 => {
                    pipe.framer.push(clock.now(), clock.wall(), &buf[..n], &mut lines)
                }
                Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => {}
                // End of file, an error, or a descriptor the kernel calls invalid: done with it.
                _ => {
                    pipe.framer.flush(clock.now(), true, &mut lines);
                    closed.push(i);
                }
            }
            write(&pipe.sink, &mut lines);
        }
        let now = clock.now();
        for pipe in &mut pipes {
            pipe.framer.flush(now, false, &mut lines);
            write(&pipe.sink, &mut lines);
        }
        for i in closed.into_iter().rev() {
            pipes.swap_remove(i);
        }
    }
}

/// Writes every partial line the framers hold, at once.
fn flush_all(pipes: &mut [Pipe], now: harn_core::time::Instant, lines: &mut Vec<u8>) {
    for pipe in pipes {
        pipe.framer.flush(now, true, lines);
        if !lines.is_empty() {
            drop(pipe.sink.lock().map(|mut s| s.write(lines)));
            lines.clear();
        }
    }
}

/// The last `lines` lines of a harness's log, reaching into rotated files when needed.
pub fn tail(path: &Path, lines: usize) -> std::io::Result<Vec<u8>> {
    let mut chunks = Vec::new();
    let mut have = 0;
    for n in 0.. {
        let file =
            if n == 0 { path.to_owned() } else { PathBuf::from(format!("{}.{n}", path.display())) };
        let bytes = match std::fs::read(&file) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && n > 0 => break,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        have += bytes.iter().filter(|&&b| b == b'\n').count();
        chunks.push(bytes);
        if have > lines || n > 64 {
            break;
        }
    }
    let all: Vec<u8> = chunks.into_iter().rev().flatten().collect();
    Ok(last_lines(&all, lines).to_vec())
}

fn last_lines(bytes: &[u8], lines: usize) -> &[u8] {
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let mut seen = 0;
    for (i, &b) in body.iter().enumerate().rev() {
        if b == b'\n' {
            seen += 1;
            if seen == lines {
                return &bytes[i + 1..];
            }
        }
    }
    if lines == 0 {
        &bytes[bytes.len()..]
    } else {
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_keeps_at_most_the_configured_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.log");
        let rotation = Rotation { max_file_bytes: 100, keep: 2 };
        let sink = LogSink::open(dir.path(), path.clone(), rotation).unwrap();
        for i in 0..100 {
            sink.lock().unwrap().write(format!("line {i:03} ......\n").as_bytes()).unwrap();
        }
        let total: u64 = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        assert!(total <= 300, "{total} bytes kept");
        assert!(!dir.path().join("a.log.3").exists());
        let last = tail(&path, 3).unwrap();
        assert_eq!(
            String::from_utf8(last).unwrap(),
            "line 097 ......\nline 098 ......\nline 099 ......\n"
        );
        let across = tail(&path, 8).unwrap();
        assert_eq!(String::from_utf8(across).unwrap().lines().count(), 8, "reaches into a.log.1");
    }

    #[test]
    fn tail_of_a_missing_log_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        assert!(tail(&dir.path().join("none.log"), 10).unwrap().is_empty());
    }

    #[test]
    fn last_lines_counts_from_the_end() {
        assert_eq!(last_lines(b"a\nb\nc\n", 2), b"b\nc\n");
        assert_eq!(last_lines(b"a\nb\nc", 2), b"b\nc");
        assert_eq!(last_lines(b"a\n", 5), b"a\n");
        assert_eq!(last_lines(b"a\nb\n", 0), b"");
    }
}
