//! Files a person names on the command line (a workflow, a team, a policy, `harness.toml`):
//! read only when they are regular files, and only up to a bound, so `/dev/zero` cannot fill
//! memory and a FIFO cannot hang a command.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The largest workflow program harn freezes.
pub const WORKFLOW_MAX: u64 = 16 << 20;
/// The largest configuration file (team, policy, `harness.toml`, mission, plan templates).
pub const CONFIG_MAX: u64 = 4 << 20;

/// Reads `path` whole if it is a regular file of at most `limit` bytes; the error names the
/// file and says what is wrong with it.
pub fn read(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    let shown = path.display();
    // Non-blocking, so opening a FIFO with no writer returns at once instead of waiting.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| format!("{shown}: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("{shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("{shown}: not a regular file"));
    }
    if meta.len() > limit {
        return Err(format!("{shown}: {} bytes, more than the {limit} harn reads", meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes).map_err(|e| format!("{shown}: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(format!("{shown}: grew past the {limit} bytes harn reads while it was read"));
    }
    Ok(bytes)
}

/// [`read`] as UTF-8 text.
pub fn read_text(path: &Path, limit: u64) -> Result<String, String> {
    String::from_utf8(read(path, limit)?).map_err(|e| format!("{}: not UTF-8: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_fifos_and_oversized_files_are_refused_at_once() {
        let e = read(Path::new("/dev/zero"), CONFIG_MAX).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from_raw_mode(0o600))
            .unwrap();
        let e = read(&fifo, CONFIG_MAX).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        let big = tmp.path().join("big");
        std::fs::write(&big, vec![b'x'; 11]).unwrap();
        assert!(read(&big, 10).unwrap_err().contains("11 bytes"));
        assert_eq!(read(&big, 11).unwrap().len(), 11);
    }
}
