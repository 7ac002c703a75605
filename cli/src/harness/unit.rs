//! `harn harness unit`: a systemd unit that runs the daemon as a supervised service.

use super::config;
use super::paths::Paths;
use crate::exit::Exit;
use std::path::Path;

/// Prints the unit for the daemon of `paths.root` with `config_file`.
pub fn print(paths: &Paths, config_file: &Path) -> Exit {
    let exe = std::env::current_exe().map_or_else(|_| "harn".into(), |p| p.display().to_string());
    // Stopping drains every harness; systemd must wait longer than the longest grace.
    let grace_ms = config::load(config_file)
        .map(|c| {
            let per_harness = c.harnesses.values().filter_map(|h| h.stop_grace).max();
            per_harness.unwrap_or(c.limits.stop_grace).max(c.limits.stop_grace).as_millis()
        })
        .unwrap_or(10_000);
    let stop_timeout_s = grace_ms.div_ceil(1000) + 30;
    print!(
        "\
# harn harness daemon for {root}
# Install: save as ~/.config/systemd/user/harn-harness.service, then
#   systemctl --user daemon-reload && systemctl --user enable --now harn-harness
#   loginctl enable-linger \"$USER\"   # to keep it running while logged out
[Unit]
Description=harn harness daemon for {root}
StartLimitIntervalSec=300
StartLimitBurst=5

[Service]
Type=notify
NotifyAccess=main
ExecStart={exe} harness daemon --root {root} --config {config}
ExecReload=/bin/kill -HUP $MAINPID
WorkingDirectory={root}
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
TimeoutStopSec={stop_timeout_s}

[Install]
WantedBy=default.target
",
        root = paths.root.display(),
        config = config_file.display(),
    );
    Ok(0)
}
