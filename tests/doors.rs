//! No door in the wall, on the real kernel, as root and as an unprivileged user: a contained
//! workflow, an agent call under Landlock, and a sealed call (a Codex-speaking harness) each
//! try every way out a run was once found to have (`tests/fixtures/door.py`): the person's
//! terminal (`/dev/tty`, every `/dev/pts/*`, `TIOCSTI`, escape sequences), files git or harn
//! run later (`.git/hooks`, `.git/config`, `.git/info`, renaming `.git`, `harness.toml`),
//! shared places (`/dev/shm`, `/tmp`, `/etc`, `$HOME`), the read-only bind (`umount`), the
//! cgroup (`cgroup.procs` of the root) and the host (`kill`). Then a `git checkout` finds no
//! hook and `harness.toml` is as it was. And `harn work run` inside a pseudo-terminal, as a
//! person runs it, with a workflow that types into it: nothing arrives.

use crate::cli::{harn_bin, json, text};
use crate::containment::{as_user, chown_tree};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const WORKFLOW: &str = r#"import json, os, subprocess, sys
start = sys.stdin.readline()
open("host.pid", "w").write(str(os.getppid()))
subprocess.run([sys.executable, os.environ["DOOR"], "workflow"])
print(json.dumps({"op": "agent", "id": "a1", "prompt": "try the doors"}), flush=True)
reply = sys.stdin.readline()
print(json.dumps({"op": "result", "ok": True}), flush=True)
"#;

const HARNESS_TOML: &str = "[harness.watch]\ncommand = [\"sleep\", \"1000\"]\n";

/// The interpreter the probes run with: the system's, which every user may execute.
fn python() -> String {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3".into()
    } else {
        "python3".into()
    }
}

struct Doors {
    dir: tempfile::TempDir,
    home: tempfile::TempDir,
    user: Option<u32>,
}

impl Doors {
    fn new(user: Option<u32>) -> Doors {
        // What an earlier build's runs left where they should never have reached.
        let uid = user.unwrap_or(0);
        for who in ["workflow", "agent", "codex"] {
            let _ = std::fs::remove_file(format!("/dev/shm/harn-door-{who}-{uid}"));
            let _ = std::fs::remove_file(format!("/tmp/harn-door-{who}-{uid}"));
        }
        // Outside /tmp, so the sealed call's own /tmp (an overlay) is not its workspace's too.
        let base = env!("CARGO_TARGET_TMPDIR");
        let (dir, home) =
            (tempfile::tempdir_in(base).unwrap(), tempfile::tempdir_in(base).unwrap());
        let r = dir.path();
        let door = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/door.py");
        std::fs::copy(&door, r.join("door.py")).unwrap();
        let wf = format!("#!{}\n{WORKFLOW}", python());
        std::fs::write(r.join("wf.py"), wf).unwrap();
        let exec = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(r.join("wf.py"), exec).unwrap();
        std::fs::write(r.join("harness.toml"), HARNESS_TOML).unwrap();
        let git = Command::new("git").arg("init").arg("-q").arg(r).output().unwrap();
        assert!(git.status.success(), "{}", text(&git));
        std::fs::create_dir_all(r.join(".harnery")).unwrap();
        let py = python();
        let codex_lines = r#"echo '{"type":"thread.started","thread_id":"t1"}'; echo '{"type":"item.completed","item":{"type":"agent_message","text":"done"}}'; echo '{"type":"turn.completed","usage":{"input_tokens":1,"output_tokens":1}}'"#;
        let config = serde_json::json!({
            "harnesses": {
                "prober": {"command": ["sh", "-c", format!("cat >/dev/null; {py} door.py agent; echo done")]},
                "sealed": {"kind": "codex", "command":
                    ["sh", "-c", format!("cat >/dev/null; {py} door.py codex; {codex_lines}")]},
            },
        });
        std::fs::write(r.join(".harnery/config.json"), config.to_string()).unwrap();
        if let Some(uid) = user {
            for d in [r, home.path()] {
                chown_tree(d, uid);
            }
        }
        let doors = Doors { dir, home, user };
        for id in ["w", "x"] {
            let out = doors.harn(&["work", "create", id, "wf.py", "--id", id, "--objective", "o"]);
            assert!(out.status.success(), "{}", text(&out));
        }
        doors
    }

    fn command(&self, args: &[&str]) -> Command {
        let r = self.dir.path();
        let mut cmd = Command::new(harn_bin());
        cmd.args(args)
            .arg("--root")
            .arg(r)
            .current_dir(r)
            .env("DOOR", r.join("door.py"))
            .env("REPORT", r.join("report.txt"))
            .env("HARN", harn_bin())
            .env("DOOR_SOCKET", self.socket_path())
            .env("DOOR_SECRET_TOKEN", "door-secret")
            .env("HOME", self.home.path());
        if let Some(uid) = self.user {
            use std::os::unix::process::CommandExt;
            cmd.uid(uid).gid(uid);
        }
        cmd
    }

    fn harn(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// A Unix socket of the person's outside the run (a session bus, an agent's socket), in
    /// the test's home, which is not the run's to write.
    fn socket_path(&self) -> PathBuf {
        self.home.path().join("door.sock")
    }

    /// `who what` → `ok` or `denied`.
    fn report(&self) -> BTreeMap<String, String> {
        let text = std::fs::read_to_string(self.dir.path().join("report.txt")).unwrap_or_default();
        text.lines()
            .filter_map(|l| l.rsplit_once(' '))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    /// Everything a person's next `git checkout` and `harn harness up` would run is as it was.
    fn nothing_planted(&self) {
        let r = self.dir.path();
        assert_eq!(std::fs::read_to_string(r.join("harness.toml")).unwrap(), HARNESS_TOML);
        assert!(!r.join(".git/hooks/post-checkout").exists(), "a hook was planted");
        assert!(r.join(".git").is_dir() && !r.join(".git-moved").exists());
        let config = std::fs::read_to_string(r.join(".git/config")).unwrap();
        assert!(!config.contains("hooksPath"), "{config}");
        let git = Command::new("git")
            .arg("-C")
            .arg(r)
            .args([
                "-c",
                "safe.directory=*",
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-q",
            ])
            .args(["--allow-empty", "-m", "x"])
            .output()
            .unwrap();
        assert!(git.status.success(), "{}", text(&git));
        let checkout = Command::new("git")
            .arg("-C")
            .arg(r)
            .args(["-c", "safe.directory=*", "checkout", "-q", "-b", "after-the-run"])
            .output()
            .unwrap();
        assert!(checkout.status.success(), "{}", text(&checkout));
        assert!(!r.join("HOOK-RAN").exists(), "git ran a planted hook");
        assert!(!r.join(".harnery/planted").exists());
        let uid = self.user.unwrap_or(0);
        for who in ["workflow", "agent", "codex"] {
            for shared in
                [format!("/dev/shm/harn-door-{who}-{uid}"), format!("/tmp/harn-door-{who}-{uid}")]
            {
                assert!(!Path::new(&shared).exists(), "{shared} reached the machine");
            }
            assert!(!Path::new(&format!("/etc/harn-door-{who}")).exists());
            assert!(!self.home.path().join(format!("harn-door-{who}")).exists());
        }
    }
}

/// Stops the root's harness daemon when dropped.
struct Down<'a>(&'a Doors);

impl Drop for Down<'_> {
    fn drop(&mut self) {
        let _ = self.0.harn(&["harness", "down"]);
    }
}

/// True when the machine offers what closing every door needs; says so when it does not.
fn offered() -> bool {
    let offer = harn::work::confine::offer();
    if offer.landlock.is_err() || offer.namespace.is_err() || offer.sealed.is_err() {
        crate::skip::skip(format!("this machine does not confine runs fully: {offer:?}"));
        return false;
    }
    true
}

/// Every door each of them tried, and what each must find.
fn check(report: &BTreeMap<String, String>, who: &str) {
    let closed = [
        "tty-open",
        "pts-open",
        "pts-tiocsti",
        "pts-write",
        "git-hook",
        "git-config",
        "git-info",
        "git-rename",
        "harness-toml",
        "etc",
        "home",
        "umount",
        "harnery",
        "cgroup-leave",
        "kill-host",
        "daemon-steer",
        "remount",
        "cgroup-clone",
        "socket",
        "environ",
    ];
    for what in closed {
        let got = report.get(&format!("{who} {what}")).map(String::as_str);
        // A sealed call writes under /tmp into an overlay of its own: a home there takes
        // the write, which never reaches the machine (`nothing_planted` looks).
        if who == "codex" && what == "home" && got == Some("ok") {
            assert!(env!("CARGO_TARGET_TMPDIR").starts_with("/tmp/"), "{report:?}");
            continue;
        }
        assert_eq!(got, Some("denied"), "{who} {what}: {report:?}");
    }
    // Its own pseudo-terminal, its workspace and a /dev/shm of its own work; /tmp is the
    // machine's, read-only, under Landlock, and a private one when sealed.
    let tmp = if who == "codex" { "ok" } else { "denied" };
    let wanted = [("pty-own", "ok"), ("workspace", "ok"), ("shm", "ok"), ("tmp", tmp)];
    for (what, want) in wanted {
        let got = report.get(&format!("{who} {what}")).map(String::as_str);
        assert_eq!(got, Some(want), "{who} {what}: {report:?}");
    }
}

fn no_door_as(user: Option<u32>) {
    let doors = Doors::new(user);
    let _listening = std::os::unix::net::UnixListener::bind(doors.socket_path()).unwrap();
    if let Some(uid) = user {
        let owner = Some(rustix::process::Uid::from_raw(uid));
        rustix::fs::chown(doors.socket_path(), owner, None).unwrap();
    }
    let up = doors.harn(&["harness", "up"]);
    assert!(up.status.success(), "{}", text(&up));
    // However the test ends, the daemon it started stops.
    let _down = Down(&doors);
    for (id, harness, who) in [("w", "prober", "agent"), ("x", "sealed", "codex")] {
        let out = doors.harn(&["work", "run", id, "--harness", harness, "--json"]);
        assert!(out.status.success(), "{harness}: {}", text(&out));
        let report = doors.report();
        check(&report, "workflow");
        check(&report, who);
        let run = json(&out)["run_id"].as_str().unwrap().to_owned();
        let shown = text(&doors.harn(&["run", "show", &run]));
        assert!(shown.contains("+ namespace"), "{shown}");
        assert!(!shown.contains("changed"), "nothing guarded changed: {shown}");
        std::fs::remove_file(doors.dir.path().join("report.txt")).unwrap();
    }
    let listed = text(&doors.harn(&["harness", "list"]));
    assert!(listed.contains("running"), "no run stopped the harness: {listed}");
    doors.nothing_planted();
}

#[test]
fn no_contained_process_finds_a_door() {
    as_user(None, offered, no_door_as);
}

#[test]
fn no_contained_process_of_an_unprivileged_user_finds_a_door() {
    as_user(Some(65534), offered, no_door_as);
}

/// Runs `harn work run` with a pseudo-terminal as its controlling terminal and standard
/// streams, as a person's shell would; returns everything the terminal showed and how many
/// bytes wait in its input queue.
fn run_in_a_terminal(doors: &Doors, args: &[&str]) -> (String, i32) {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let master =
        rustix::pty::openpt(rustix::pty::OpenptFlags::RDWR | rustix::pty::OpenptFlags::NOCTTY)
            .unwrap();
    rustix::pty::grantpt(&master).unwrap();
    rustix::pty::unlockpt(&master).unwrap();
    let name = rustix::pty::ptsname(&master, Vec::new()).unwrap();
    let name = PathBuf::from(name.to_str().unwrap());
    let slave = std::fs::OpenOptions::new().read(true).write(true).open(&name).unwrap();
    if let Some(uid) = doors.user {
        rustix::fs::chown(&name, Some(rustix::process::Uid::from_raw(uid)), None).unwrap();
    }
    let mut cmd = doors.command(args);
    cmd.stdin(slave.try_clone().unwrap())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave.try_clone().unwrap());
    // SAFETY: setsid and an ioctl on fd 0, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    // The command holds copies of the terminal's slave side; the master reads to its end
    // only once every copy is closed.
    drop(cmd);
    let reader = master.try_clone().unwrap();
    let shown = std::thread::spawn(move || {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = rustix::io::read(&reader, &mut buf) {
            out.extend_from_slice(&buf[..n]);
        }
        out
    });
    let status = child.wait().unwrap();
    assert!(status.success(), "harn work run in a terminal: {status}");
    let mut pending: libc::c_int = 0;
    // SAFETY: FIONREAD writes an int.
    unsafe { libc::ioctl(slave.as_raw_fd(), libc::FIONREAD, &mut pending) };
    drop(slave);
    let shown = shown.join().unwrap();
    (String::from_utf8_lossy(&shown).into_owned(), pending)
}

fn nothing_typed_as(user: Option<u32>) {
    let doors = Doors::new(user);
    let (shown, pending) = run_in_a_terminal(&doors, &["work", "run", "w", "--harness", "prober"]);
    let report = doors.report();
    assert_eq!(report.get("workflow tty-open").map(String::as_str), Some("denied"), "{report:?}");
    assert_eq!(report.get("agent tty-open").map(String::as_str), Some("denied"), "{report:?}");
    assert!(!shown.contains("DOOR-"), "the run reached the person's terminal: {shown}");
    assert_eq!(pending, 0, "input waits in the person's terminal");
}

#[test]
fn a_run_in_a_persons_terminal_cannot_type_into_it() {
    as_user(None, offered, nothing_typed_as);
}

#[test]
fn a_run_in_an_unprivileged_persons_terminal_cannot_type_into_it() {
    as_user(Some(65534), offered, nothing_typed_as);
}

/// A run that could change what it must not (here: turned open on purpose) is reported by
/// `run show`, and the daemon refuses the changed `harness.toml` until a person accepts it.
#[test]
fn a_change_an_open_run_made_is_reported_and_refused_until_accepted() {
    let doors = Doors::new(None);
    let r = doors.dir.path();
    let planter = "#!/bin/sh\nread -r start\nprintf '[harness.helper]\\ncommand = [\"sleep\", \"1000\"]\\n' >> harness.toml\n\
                   printf '#!/bin/sh\\ntouch HOOK-RAN\\n' > .git/hooks/post-checkout\n\
                   echo '{\"op\":\"result\",\"ok\":true}'\n";
    std::fs::write(r.join("plant.sh"), planter).unwrap();
    let exec = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(r.join("plant.sh"), exec).unwrap();
    let out = doors.harn(&["work", "create", "p", "plant.sh", "--id", "p", "--objective", "o"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = doors.harn(&["work", "run", "p", "--no-containment", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let run = json(&out)["run_id"].as_str().unwrap().to_owned();

    let shown = text(&doors.harn(&["run", "show", &run]));
    let toml = r.join("harness.toml").display().to_string();
    assert!(shown.contains(&format!("changed    {toml}: changed by this run")), "{shown}");
    assert!(shown.contains(".git/hooks: changed by this run"), "{shown}");
    let doc = json(&doors.harn(&["run", "show", &run, "--json"]));
    assert_eq!(doc["guarded_changes"].as_array().map(Vec::len), Some(2), "{doc}");

    let up = doors.harn(&["harness", "up"]);
    assert_eq!(up.status.code(), Some(1), "{}", text(&up));
    let said = text(&up);
    assert!(said.contains(&format!("{toml} was changed by run {run}")), "{said}");
    assert!(said.contains("--accept-config-change"), "{said}");
    let listed = doors.harn(&["harness", "list", "--json"]);
    assert!(!text(&listed).contains("\"alive\":true"), "nothing started: {}", text(&listed));

    let up = doors.harn(&["harness", "up", "--accept-config-change"]);
    assert!(up.status.success(), "{}", text(&up));
    assert!(text(&up).contains(&format!("accepted {toml}")), "{}", text(&up));
    let down = doors.harn(&["harness", "down"]);
    assert!(down.status.success(), "{}", text(&down));
}
