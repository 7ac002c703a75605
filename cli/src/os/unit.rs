//! Installing a systemd unit where systemd looks for it (the user's units or the system's),
//! written whole with mode 0644 and renamed into place, for the harness daemon and the service.

use crate::exit::{fail, Exit, EXIT_FAILED};
use std::path::PathBuf;

/// Writes unit `name` where systemd looks for it (the user's units with `user`, the
/// system's otherwise) and prints the commands that enable it; `shows` says what harn verb
/// then shows the service at work.
pub fn write_unit(name: &str, text: &str, user: bool, shows: &str) -> Exit {
    let dir = match unit_dir(user) {
        Some(dir) => dir,
        None => return fail(EXIT_FAILED, "no home directory to install a user unit into ($HOME)"),
    };
    let path = dir.join(name);
    // Outside `.harnery/`, where systemd reads it: mode 0644 whatever the umask, and the
    // temporary name made fresh (never a file or symlink already there), then renamed over.
    let written = std::fs::create_dir_all(&dir).and_then(|()| {
        use std::io::Write;
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let mut file =
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o644).open(&temp)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temp, &path)
    });
    if let Err(e) = written {
        return fail(EXIT_FAILED, format!("{}: {e}", path.display()));
    }
    let ctl = if user { "systemctl --user" } else { "systemctl" };
    outln!("wrote {}", path.display());
    outln!("now run:");
    outln!("  {ctl} daemon-reload");
    outln!("  {ctl} enable --now '{name}'");
    if user {
        outln!("  loginctl enable-linger \"$USER\"   # to keep it running while logged out");
    }
    outln!("then `{ctl} status '{name}'` shows it, and {shows}");
    Ok(0)
}

/// Where units are installed: `$XDG_CONFIG_HOME/systemd/user` (or `~/.config/…`) for the
/// user's, `/etc/systemd/system` for the system's.
fn unit_dir(user: bool) -> Option<PathBuf> {
    if !user {
        return Some(PathBuf::from("/etc/systemd/system"));
    }
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(config.join("systemd/user"))
}
