//! `harn harness unit`: a systemd unit that runs the daemon as a supervised service, printed
//! or installed (`--install`, `--user`), named after the root so two repositories' daemons
//! never share one.

use super::config;
use super::paths::Paths;
use crate::exit::{fail, Exit};
use harn_core::harness::unit::{exec_word, path_value, unit_name};
use std::path::Path;

/// The unit's text for the daemon of `paths.root` with `config_file`, run as the user the
/// `run_as` lines name (see [`crate::os::identity::unit_lines`]).
pub fn render(paths: &Paths, config_file: &Path, run_as: &str) -> String {
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
{run_as}ExecStart={exec}
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
pub fn run(
    paths: &Paths,
    config_file: &Path,
    install: bool,
    user: bool,
    as_user: Option<&str>,
) -> Exit {
    // A unit is lines: a path with a line break in it cannot be written into one.
    let shown = format!("{}{}", paths.root.display(), config_file.display());
    if shown.contains(['\n', '\r']) {
        return fail(
            crate::exit::EXIT_USAGE,
            "a root or config path with a line break cannot go in a unit",
        );
    }
    let run_as = match crate::os::identity::unit_lines(as_user, user) {
        Ok(lines) => lines,
        Err(why) => return fail(crate::exit::EXIT_USAGE, why),
    };
    let text = render(paths, config_file, &run_as);
    let name = unit_name(&paths.root.display().to_string());
    if !install {
        print!("# Save as {name}, or run `harn harness unit --install --user`.\n{text}");
        return Ok(0);
    }
    crate::os::unit::write_unit(&name, &text, user, "`harn harness list` its harnesses")
}
