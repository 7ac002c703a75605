//! The harness daemon where it meets the kernel and other processes: runs after a cgroup was
//! killed, the descriptor limit, planted hints and symlinks. Real children, real cgroups where
//! the machine has them (a machine without prints that it skipped the cgroup part).

use crate::cli::text;
use crate::harness_daemon::{state, Root};
use serde_json::Value;
use std::process::Command;
use std::time::{Duration, Instant};

/// True when the daemon contains its children in cgroups here; says so when it does not.
fn has_cgroups(root: &Root) -> bool {
    let kind = root.status()["daemon"]["containment"].as_str().unwrap_or("").to_owned();
    if kind != "cgroup" {
        crate::skip::skip(format!("no writable cgroup v2 hierarchy on this machine ({kind})"));
    }
    kind == "cgroup"
}

/// Waits until `name` runs, then checks that the same run keeps running for a while: a run
/// killed at birth would show a new pid, more runs, or a last exit by signal 9.
fn runs_steadily(root: &Root, name: &str) -> Value {
    let first = root.wait_for(name, "running", |h| state(h) == "running" && h["pid"].is_u64());
    std::thread::sleep(Duration::from_millis(1500));
    let later = root.harness(name);
    assert_eq!(state(&later), "running", "{name} did not stay up: {later}");
    assert_eq!(later["pid"], first["pid"], "{name} was started again: {first} then {later}");
    assert_eq!(later["runs"], first["runs"], "{name} was started again: {later}");
    later
}

#[test]
fn a_harness_runs_again_after_a_forced_stop_killed_its_cgroup() {
    let root = Root::new(
        "[harness.stubborn]\ncommand = [\"{child}\", \"ignore-term\", \"{marker}\"]\nstop_grace_ms = 200\nrestart_delay_ms = 100\n",
    );
    root.up();
    if !has_cgroups(&root) {
        return;
    }
    runs_steadily(&root, "stubborn");
    for _ in 0..2 {
        let before = root.harness("stubborn")["runs"].as_u64().unwrap();
        let out = root.harn(&["restart", "stubborn"]);
        assert!(out.status.success(), "{}", text(&out));
        root.wait_for("stubborn", "restarted", |h| {
            h["runs"].as_u64() > Some(before) && state(h) == "running"
        });
        let h = runs_steadily(&root, "stubborn");
        assert_eq!(h["runs"].as_u64(), Some(before + 1), "one new run, not a crash loop: {h}");
    }
    // The shell and its sleep: one instance, the new one.
    assert_eq!(root.settle_count(&root.marker, 2), 2);
}

#[test]
fn a_harness_whose_run_left_a_setsid_helper_behind_runs_again() {
    let root = Root::new(
        "[harness.leaver]\ncommand = [\"{child}\", \"leave-once\", \"{flag}\", \"{marker}\"]\nrestart_delay_ms = 100\n",
    );
    let flag = root.dir.path().join("left-once");
    let toml = std::fs::read_to_string(root.dir.path().join("harness.toml")).unwrap();
    std::fs::write(
        root.dir.path().join("harness.toml"),
        toml.replace("{flag}", flag.to_str().unwrap()),
    )
    .unwrap();
    root.up();
    if !has_cgroups(&root) {
        return;
    }
    let h = runs_steadily(&root, "leaver");
    assert!(flag.exists(), "the first run ran");
    assert_eq!(h["runs"], 2, "the first run exited, the second runs: {h}");
    let helper = format!("2000{}", root.marker);
    assert_eq!(root.settle_count(&helper, 0), 0, "the helper the first run left was killed");
}

#[test]
fn a_harness_reclaimed_after_a_daemon_crash_runs_again() {
    // It keeps starting helpers, so the reclaim's SIGKILLs never catch every process and the
    // cgroup itself must be killed.
    let root = Root::new(
        "[harness.a]\ncommand = [\"{child}\", \"breed\", \"{marker}\"]\nstop_grace_ms = 300\n",
    );
    root.up();
    if !has_cgroups(&root) {
        return;
    }
    runs_steadily(&root, "a");
    let daemon = root.daemon_pid();
    Command::new("kill").arg("-9").arg(daemon.to_string()).status().unwrap();
    let started = Instant::now();
    while !root.harn(&["up"]).status.success() {
        assert!(started.elapsed() < Duration::from_secs(15), "up never succeeded");
        std::thread::sleep(Duration::from_millis(50));
    }
    let h = runs_steadily(&root, "a");
    assert_ne!(h["last_exit"]["signal"], 9, "no run of the new daemon was killed: {h}");
    let shells = format!("breed\0{}", root.marker);
    assert_eq!(root.settle_count(&shells, 1), 1, "one instance, the new one");
}

#[test]
fn running_out_of_descriptors_fails_a_start_not_the_daemon() {
    let mut toml = String::from("[limits]\nrestart_delay_ms = 200\n");
    for n in 0..60 {
        toml.push_str(&format!(
            "[harness.h{n}]\ncommand = [\"{{child}}\", \"run\", \"{{marker}}\"]\n"
        ));
    }
    let root = Root::new(&toml);
    // A hard limit of 256 cannot be raised: three descriptors a harness and the daemon's own
    // reserve leave room for a few dozen, not sixty.
    let mut up = Command::new(crate::cli::harn_bin());
    up.args(["harness", "up", "--root"]).arg(root.dir.path());
    // SAFETY: setrlimit is async-signal-safe and touches no memory of the parent.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut up, || {
            let limit = rustix::process::Rlimit { current: Some(256), maximum: Some(256) };
            rustix::process::setrlimit(rustix::process::Resource::Nofile, limit)?;
            Ok(())
        });
    }
    let out = up.output().unwrap();
    assert!(out.status.success(), "up: {}", text(&out));
    std::thread::sleep(Duration::from_secs(2));
    let doc = root.status();
    let harnesses = doc["harnesses"].as_array().unwrap();
    let running = harnesses.iter().filter(|h| state(h) == "running").count();
    assert!(running > 10 && running < 60, "{running} of 60 run under a limit of 256");
    let log = std::fs::read_to_string(root.dir.path().join(".harnery/harness/daemon.log")).unwrap();
    assert!(log.contains("too many open files"), "the failed starts say why: {log}");
    let daemon = doc["daemon"]["pid"].as_u64().unwrap();
    assert!(std::path::Path::new(&format!("/proc/{daemon}")).exists(), "the daemon lives");
    let out = root.harn(&["down"]);
    assert!(out.status.success(), "down: {}", text(&out));
    assert_eq!(root.settle_count(&root.marker, 0), 0, "every child stopped");
}

#[test]
fn the_generated_units_raise_the_descriptor_limit() {
    let root = Root::new("[harness.a]\ncommand = [\"{child}\", \"run\", \"{marker}\"]\n");
    let harness = root.harn(&["unit"]);
    assert!(harness.status.success(), "{}", text(&harness));
    let service = Command::new(crate::cli::harn_bin())
        .args(["supervisor", "service", "unit", "--root"])
        .arg(root.dir.path())
        .output()
        .unwrap();
    assert!(service.status.success(), "{}", text(&service));
    for unit in [text(&harness), text(&service)] {
        assert!(unit.lines().any(|l| l == "LimitNOFILE=524288"), "{unit}");
    }
}

/// Both generated units can name the user their daemon runs as (`--as`): `User=` and
/// `Group=` of a system unit; an unknown user, or a `--user` unit, is refused with exit 2.
#[test]
fn the_generated_units_name_the_user_they_run_as() {
    let root = Root::new("[harness.a]\ncommand = [\"{child}\", \"run\", \"{marker}\"]\n");
    let service = |extra: &[&str]| {
        Command::new(crate::cli::harn_bin())
            .args(["supervisor", "service", "unit"])
            .args(extra)
            .arg("--root")
            .arg(root.dir.path())
            .output()
            .unwrap()
    };
    let harness = root.harn(&["unit", "--as", "nobody"]);
    let service_as = service(&["--as", "nobody"]);
    for unit in [&harness, &service_as] {
        assert!(unit.status.success(), "{}", text(unit));
        let body = text(unit);
        assert!(body.lines().any(|l| l == "User=nobody"), "{body}");
        assert!(body.lines().any(|l| l.starts_with("Group=")), "{body}");
    }
    assert!(!text(&root.harn(&["unit"])).contains("User="), "none unless asked");
    for out in [
        root.harn(&["unit", "--as", "no-such-user-here"]),
        service(&["--as", "no-such-user-here"]),
        root.harn(&["unit", "--install", "--user", "--as", "nobody"]),
    ] {
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("--as"), "{}", text(&out));
    }
}

#[test]
fn a_harness_starts_with_the_descriptor_limit_the_daemon_started_with() {
    let root = Root::new(
        "[harness.limits]\ncommand = [\"sh\", \"-c\", \"ulimit -n > {marker}.nofile; exec sleep 60\"]\n",
    );
    let mut up = Command::new(crate::cli::harn_bin());
    up.args(["harness", "up", "--root"]).arg(root.dir.path());
    // SAFETY: setrlimit is async-signal-safe and touches no memory of the parent.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut up, || {
            let limit = rustix::process::Rlimit { current: Some(1024), maximum: Some(20000) };
            rustix::process::setrlimit(rustix::process::Resource::Nofile, limit)?;
            Ok(())
        });
    }
    let out = up.output().unwrap();
    assert!(out.status.success(), "up: {}", text(&out));
    let file = root.dir.path().join(format!("{}.nofile", root.marker));
    let started = Instant::now();
    while !file.exists() && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let seen = std::fs::read_to_string(&file).unwrap_or_default();
    assert!(root.harn(&["down"]).status.success());
    assert_eq!(seen.trim(), "1024", "the child got the daemon's raised limit");
}

#[test]
fn a_child_that_moves_into_a_cgroup_of_its_own_is_still_stopped() {
    // The child nests a cgroup inside its run's, moves itself there and leaves a setsid
    // helper, which no process-group signal reaches.
    let nest = r#"mnt=$(awk '$9 == \"cgroup2\" {print $5; exit}' /proc/self/mountinfo); cg=$(sed -n 's/^0:://p' /proc/self/cgroup); mkdir \"$mnt$cg/nest\" && echo $$ > \"$mnt$cg/nest/cgroup.procs\"; setsid sh -c 'sleep 300' {marker} & exec sleep 300"#;
    let root = Root::new(&format!(
        "[harness.nester]\ncommand = [\"sh\", \"-c\", \"{nest}\"]\nstop_grace_ms = 200\n"
    ));
    root.up();
    if !has_cgroups(&root) {
        return;
    }
    root.wait_for("nester", "running", |h| state(h) == "running");
    assert_eq!(root.settle_count(&root.marker, 1), 1, "it runs, nested");
    let out = root.harn(&["down"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(root.settle_count(&root.marker, 0), 0, "the nested child was stopped too");
}

/// The unit is named after its root (two roots, two units), every path in it is escaped for
/// systemd, `systemd-analyze verify` finds nothing to say where it is installed, and
/// `--install --user` writes it and prints the commands that enable it.
#[test]
fn the_harness_unit_is_named_after_its_root_escaped_and_installable() {
    let dir = tempfile::tempdir().unwrap();
    let odd = dir.path().join("a b%c$d");
    std::fs::create_dir(&odd).unwrap();
    std::fs::write(odd.join("harness.toml"), "").unwrap();
    let unit = |root: &std::path::Path, extra: &[&str]| {
        let mut cmd = Command::new(crate::cli::harn_bin());
        cmd.args(["harness", "unit"]).args(extra).arg("--root").arg(root);
        cmd.env("XDG_CONFIG_HOME", dir.path().join("config"));
        cmd.output().unwrap()
    };
    let out = unit(&odd, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let body = String::from_utf8_lossy(&out.stdout).into_owned();
    let escaped = String::from_utf8(
        Command::new("systemd-escape").arg("--path").arg(&odd).output().map_or_else(
            |_| harn_core::harness::unit::escape_path(&odd.display().to_string()).into_bytes(),
            |o| o.stdout,
        ),
    )
    .unwrap();
    let name = format!("harn-harness-{}.service", escaped.trim());
    assert!(body.starts_with(&format!("# Save as {name}")), "{body}");
    assert!(
        body.contains("%%c") && body.contains("$$d"),
        "specifiers and variables escaped: {body}"
    );
    let other = unit(dir.path(), &[]);
    assert!(!String::from_utf8_lossy(&other.stdout).contains(&name), "two roots, one unit name");
    // Installed for the user, then checked by systemd itself where it is available.
    let out = unit(&odd, &["--install", "--user"]);
    assert!(out.status.success(), "{}", text(&out));
    let installed = dir.path().join("config/systemd/user").join(&name);
    assert!(installed.exists(), "{}", text(&out));
    assert!(text(&out).contains("systemctl --user daemon-reload"), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("systemctl --user enable --now '{name}'")),
        "{}",
        text(&out)
    );
    // The supervisor service's unit is named after its root and escapes the same way.
    let service_unit = |extra: &[&str]| {
        Command::new(crate::cli::harn_bin())
            .args(["supervisor", "service", "unit"])
            .args(extra)
            .arg("--root")
            .arg(&odd)
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .output()
            .unwrap()
    };
    let service = service_unit(&[]);
    let service_text = String::from_utf8_lossy(&service.stdout).into_owned();
    assert!(service_text.contains("\"") && service_text.contains("%%c$$d"), "{service_text}");
    let service_name = format!("harn-service-{}.service", escaped.trim());
    assert!(service_text.starts_with(&format!("# Save as {service_name}")), "{service_text}");
    let out = service_unit(&["--install", "--user"]);
    assert!(out.status.success(), "{}", text(&out));
    let service_file = dir.path().join("config/systemd/user").join(&service_name);
    assert!(service_file.exists(), "{}", text(&out));
    assert!(text(&out).contains(&format!("enable --now '{service_name}'")), "{}", text(&out));
    if let Ok(verify) = Command::new("systemd-analyze").arg("verify").arg(&service_file).output() {
        let said = String::from_utf8_lossy(&verify.stderr).into_owned();
        assert!(verify.status.success() && !said.contains("Specifier"), "{said}");
    }
    if let Ok(verify) = Command::new("systemd-analyze").arg("verify").arg(&installed).output() {
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&verify.stdout),
            String::from_utf8_lossy(&verify.stderr)
        );
        let complaints: Vec<&str> =
            said.lines().filter(|l| l.contains(name.as_str()) || l.contains("harn")).collect();
        assert!(verify.status.success() && complaints.is_empty(), "systemd-analyze verify: {said}");
    }
}

/// A run that starts a child of its own at once is one instance: the duplicate-start check
/// counts only processes outside the new run's session.
#[test]
fn a_run_with_children_of_its_own_passes_the_duplicate_start_check() {
    let root = Root::new(
        "[harness.pair]\ncommand = [\"sh\", \"-c\", \"sleep 100 & exec sleep 200\"]\nstop_grace_ms = 200\n",
    );
    root.up();
    if !has_cgroups(&root) {
        return;
    }
    runs_steadily(&root, "pair");
    for _ in 0..3 {
        let before = root.harness("pair")["runs"].as_u64().unwrap();
        let out = root.harn(&["restart", "pair"]);
        assert!(out.status.success(), "{}", text(&out));
        root.wait_for("pair", "restarted", |h| {
            h["runs"].as_u64() > Some(before) && state(h) == "running"
        });
    }
    let ledger = root.harn(&["ledger", "pair", "--json"]);
    let doc: Value = serde_json::from_slice(&ledger.stdout).unwrap();
    let checks: Vec<&Value> = doc["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r.get("duplicate_start_check").filter(|c| !c.is_null()))
        .collect();
    assert!(checks.len() >= 4, "{doc}");
    for c in checks {
        assert!(c["result"].as_str().unwrap().starts_with("passed"), "{c}");
    }
}

#[test]
fn a_lost_state_file_is_said_at_boot_in_the_ledger_and_in_every_list() {
    let root = Root::new("[harness.pinned]\ncommand = [\"{child}\", \"run\", \"{marker}\"]\n");
    root.up();
    root.wait_for("pinned", "running", |h| state(h) == "running");
    // An operator pins it stopped; the daemon goes down; its state file is lost.
    let out = root.harn(&["stop", "pinned"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = root.harn(&["down"]);
    assert!(out.status.success(), "{}", text(&out));
    std::fs::remove_file(root.dir.path().join(".harnery/harness/state.json")).unwrap();
    root.up();
    let doc = root.status();
    let why = doc["daemon"]["state_lost"].as_str().unwrap_or_default();
    assert!(why.contains("state.json was missing"), "{doc}");
    let list = root.harn(&["list"]);
    assert!(text(&list).contains("warning: state.json was missing at boot"), "{}", text(&list));
    let log = std::fs::read_to_string(root.dir.path().join(".harnery/harness/daemon.log"))
        .unwrap_or_default();
    assert!(log.contains("state.json was missing at boot"), "{log}");
    let ledger =
        std::fs::read_to_string(root.dir.path().join(".harnery/harness/ledger.jsonl")).unwrap();
    assert!(ledger.contains("\"state_lost\""), "{ledger}");
    let out = root.harn(&["down"]);
    assert!(out.status.success(), "{}", text(&out));
}
