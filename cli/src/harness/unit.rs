//! `harn harness unit`: a systemd unit that runs the daemon as a supervised service, printed
//! or installed (`--install`, `--user`), named after the root so two repositories' daemons
//! never share one.

use super::config;
use super::paths::Paths;
use crate::exit::{fail, Exit, EXIT_FAILED};
use harn_core::harness::unit::{exec_word, path_value, unit_name};
use std::path::{Path, PathBuf};

/// The unit's text for the daemon of `paths.root` with `config_file`.
pub fn render(paths: &Paths, config_file: &Path) -> String {
    let exe = std::env::current_exe().map_or_else(|_| "harn".into(), |p| p.display().to_string());
    // Stopping drains every harness, and a boot after a crash stops what the last daemon
    // left, each within its grace: systemd must wait longer than the longest.
    let grace_ms = config::load(config_file)
        .map(|c| {
            let per_harness = c.harnesses.values().filter_map(|h| h.stop_grace).max();
            per_harness.unwrap_or(c.limits.stop_grace).max(c.limits.stop_grace).as_millis()
        })
        .unwrap_or(10_000);
    let timeout_s = grace_ms.div_ceil(1000) + 30;
    let root = paths.root.display().to_string();
    let config = config_file.display().to_string();
    let exec: Vec<String> =
        [exe.as_str(), "harness", "daemon", "--root", &root, "--config", &config]
            .iter()
            .map(|w| exec_word(w))
            .collect();
    format!(
        "\
# harn harness daemon for {root}
[Unit]
Description=harn harness daemon for {described}
StartLimitIntervalSec=300
StartLimitBurst=5

[Service]
Type=notify
NotifyAccess=main
ExecStart={exec}
ExecReload=/bin/kill -HUP $MAINPID
WorkingDirectory={workdir}
Restart=on-failure
RestartSec=2
WatchdogSec=30
# Three descriptors a harness: the usual 1,024 would run out at a few hundred (the daemon
# also raises its soft limit to the hard one at start).
LimitNOFILE=524288
# SIGTERM goes to the daemon alone: it drains its harnesses itself (TERM, grace, KILL).
# Whatever is left when the stop times out is killed with the whole cgroup.
KillMode=mixed
# The daemon gives each harness a cgroup of its own below the service's.
Delegate=yes
# A boot after a crash first stops what the last daemon left (each harness's grace); the
# daemon also extends the start timeout while it does.
TimeoutStartSec={timeout_s}
TimeoutStopSec={timeout_s}

[Install]
WantedBy=default.target
",
        described = path_value(&root),
        exec = exec.join(" "),
        workdir = path_value(&root),
    )
}

/// Prints the unit, or with `install` writes it where systemd looks (the user's units with
/// `user`, the system's otherwise) and prints the commands that enable it.
pub fn run(paths: &Paths, config_file: &Path, install: bool, user: bool) -> Exit {
    // A unit is lines: a path with a line break in it cannot be written into one.
    let shown = format!("{}{}", paths.root.display(), config_file.display());
    if shown.contains(['\n', '\r']) {
        return fail(
            crate::exit::EXIT_USAGE,
            "a root or config path with a line break cannot go in a unit",
        );
    }
    let text = render(paths, config_file);
    let name = unit_name(&paths.root.display().to_string());
    if !install {
        print!("# Save as {name}, or run `harn harness unit --install --user`.\n{text}");
        return Ok(0);
    }
    write_unit(&name, &text, user, "`harn harness list` its harnesses")
}

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
