//! Opt-in conformance of the presets with the real programs (ignored unless asked for, as
//! `.ci/run` does: `cargo test --test integration -- --include-ignored real_agents`): Claude
//! Code, Codex, Gemini CLI and Claude Code's ACP adapter are installed with npm (once, under cargo's test scratch directory) and
//! pointed at the local stand-in of their vendors' APIs (`tests/agents/standin.py`) on
//! 127.0.0.1. A file-writing call writes the file, Codex works outside a git repository, the
//! effort word reaches the request, tokens and the session are recorded, a program that is
//! not logged in costs nothing, a vendor that never answers costs nothing and says so, a
//! contained call on a fresh home sends what an open one sends, and the interactive Claude
//! Code lives as a terminal harness. The runner lists each as ignored, with why, when it is
//! not asked for.

use crate::cli::{harn_bin, text};
use serde_json::Value;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;

const CLAUDE: &str = "@anthropic-ai/claude-code@2.1.197";
const CODEX: &str = "@openai/codex@0.171.0";
const CLAUDE_ACP: &str = "@agentclientprotocol/claude-agent-acp@0.101.0";
const GEMINI: &str = "@google/gemini-cli@0.61.0";

/// The stand-in, stopped when dropped.
struct StandIn {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl StandIn {
    fn start(dir: &Path) -> StandIn {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/standin.py");
        let log = dir.join("standin.jsonl");
        let mut child = Command::new("python3")
            .arg(script)
            .args(["--port", "0", "--log"])
            .arg(&log)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs the stand-in");
        let mut first = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
        let port =
            first.trim().strip_prefix("listening ").and_then(|p| p.parse().ok()).expect("a port");
        StandIn { child, port, log }
    }

    /// Every request the stand-in received.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A HOME where Claude Code talks to the stand-in through an apiKeyHelper and Codex through
/// its config, logged in with a key.
fn home(dir: &Path, port: u16, bin: &Path) -> PathBuf {
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    let settings = serde_json::json!({
        "env": { "ANTHROPIC_BASE_URL": format!("http://127.0.0.1:{port}") },
        "apiKeyHelper": "echo sk-test",
        // What a person who lets Claude commit puts in its settings.
        "permissions": {"allow": ["Bash(git add:*)", "Bash(git commit:*)"]},
    });
    std::fs::write(home.join(".claude/settings.json"), settings.to_string()).unwrap();
    let config = format!(
        "openai_base_url = \"http://127.0.0.1:{port}/v1\"\ncheck_for_update_on_startup = false\n\n\
         [analytics]\nenabled = false\n\n[features]\nplugins = false\napps = false\nremote_plugin = false\n"
    );
    std::fs::write(home.join(".codex/config.toml"), config).unwrap();
    let mut login = Command::new(bin.join("codex"))
        .args(["login", "--with-api-key"])
        .env("HOME", &home)
        .env("CODEX_HOME", home.join(".codex"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    login.stdin.take().unwrap().write_all(b"sk-test\n").unwrap();
    assert!(login.wait().unwrap().success(), "codex login --with-api-key");
    home
}

/// The programs' `bin` directory, installed once for every test of this run (and kept in
/// cargo's scratch directory for the next).
fn installed() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join("real-agents");
        let version = |package: &str| -> Option<String> {
            let manifest = prefix.join("node_modules").join(package).join("package.json");
            let v: Value = serde_json::from_slice(&std::fs::read(manifest).ok()?).ok()?;
            v["version"].as_str().map(str::to_owned)
        };
        let wanted = |spec: &str| {
            let (package, v) = spec.rsplit_once('@').unwrap();
            version(package).as_deref() == Some(v)
        };
        if !(wanted(CLAUDE) && wanted(CODEX)) {
            let install = Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--prefix"])
                .arg(&prefix)
                .args([CLAUDE, CODEX])
                .output()
                .expect("npm runs");
            assert!(install.status.success(), "npm install: {}", text(&install));
        }
        prefix.join("node_modules/.bin")
    })
}

fn harn(root: &Path, home: &Path, bin: &Path, args: &[&str]) -> Output {
    harn_with(root, home, bin, args, &[])
}

fn harn_with(root: &Path, home: &Path, bin: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    Command::new(harn_bin())
        .envs(env.iter().copied())
        .args(args)
        .arg("--root")
        .arg(root)
        .env("PATH", path)
        .env("HOME", home)
        .env("CODEX_HOME", home.join(".codex"))
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("GIT_AUTHOR_NAME", "agent")
        .env("GIT_AUTHOR_EMAIL", "agent@example.invalid")
        .env("GIT_COMMITTER_NAME", "agent")
        .env("GIT_COMMITTER_EMAIL", "agent@example.invalid")
        .output()
        .unwrap()
}

/// A git repository with one commit, whose item `ID` asks the implementer to write a file
/// and commit it, run in its own worktree.
fn worktree_item(root: &Path, home: &Path, bin: &Path, id: &str) {
    worktree_item_in(root, home, bin, id, true)
}

/// [`worktree_item`] in `root`, made a repository first when `init`.
fn worktree_item_in(root: &Path, home: &Path, bin: &Path, id: &str, init: bool) {
    std::fs::create_dir_all(root.join(".harnery")).unwrap();
    std::fs::write(root.join(".gitignore"), ".harnery/\n").unwrap();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .arg("-C")
            .arg(root)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", text(&out));
    };
    if init {
        git(&["init", "-q", "-b", "main"]);
    }
    git(&["add", ".gitignore"]);
    git(&["commit", "-qm", "base"]);
    let wf = root.join("wf.sh");
    std::fs::write(
        &wf,
        "#!/bin/sh\nread -r start\n\
         echo '{\"op\":\"agent\",\"id\":\"a1\",\"specialist\":\"implementer\",\"prompt\":\"Commit agent.txt. HARN-SCENARIO=commit\"}'\n\
         read -r reply\n\
         case \"$reply\" in *'\"ok\":true'*) echo '{\"op\":\"result\",\"ok\":true}' ;; *) echo '{\"op\":\"result\",\"ok\":false,\"error\":\"the call failed\"}' ;; esac\n",
    )
    .unwrap();
    std::fs::set_permissions(&wf, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let team = r#"{"implementer": {"instructions": "You commit files."}}"#;
    std::fs::write(root.join("team.json"), team).unwrap();
    let out = harn(
        root,
        home,
        bin,
        &["work", "create", "W", "wf.sh", "--id", id, "--objective", "commit"],
    );
    assert!(out.status.success(), "{}", text(&out));
}

/// A root (not a git repository) whose item `ID` asks the implementer to write a file.
fn item(root: &Path, home: &Path, bin: &Path, id: &str) {
    item_of(
        root,
        home,
        bin,
        id,
        "write-file",
        r#"{"implementer": {"instructions": "You write files.", "effort": "high"}}"#,
    );
}

/// A root whose item `ID` asks the implementer once, under `scenario`, with `team`.
fn item_of(root: &Path, home: &Path, bin: &Path, id: &str, scenario: &str, team: &str) {
    let wf = root.join("wf.sh");
    std::fs::write(
        &wf,
        "#!/bin/sh\nread -r start\n\
         echo '{\"op\":\"agent\",\"id\":\"a1\",\"specialist\":\"implementer\",\"prompt\":\"Write hello.txt. HARN-SCENARIO=@SCENARIO@\"}'\n\
         read -r reply\n\
         case \"$reply\" in *'\"ok\":true'*) echo '{\"op\":\"result\",\"ok\":true}' ;; *) echo '{\"op\":\"result\",\"ok\":false,\"error\":\"the call failed\"}' ;; esac\n"
            .replace("@SCENARIO@", scenario),
    )
    .unwrap();
    std::fs::set_permissions(&wf, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(root.join("team.json"), team).unwrap();
    let out = harn(
        root,
        home,
        bin,
        &["work", "create", "W", "wf.sh", "--id", id, "--objective", "write"],
    );
    assert!(out.status.success(), "{}", text(&out));
}

/// What every test here starts from: the programs, a stand-in, and a home logged in to it;
/// Always there: the tests are ignored, not skipped, unless asked for.
struct World {
    tmp: tempfile::TempDir,
    bin: PathBuf,
    standin: StandIn,
    home: PathBuf,
}

fn world() -> Option<World> {
    let tmp = tempfile::tempdir().unwrap();
    let bin = installed().to_owned();
    let standin = StandIn::start(tmp.path());
    let home = home(tmp.path(), standin.port, &bin);
    Some(World { tmp, bin, standin, home })
}

/// Claude Code's ACP adapter's `bin` directory, installed once per run without the Claude
/// Code it bundles (its calls run the one [`installed`] holds, through
/// `CLAUDE_CODE_EXECUTABLE`).
fn installed_acp() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join("real-agents-acp");
        let bin = prefix.join("node_modules/.bin");
        if !bin.join("claude-agent-acp").exists() {
            let install = Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--omit=optional", "--prefix"])
                .arg(&prefix)
                .arg(CLAUDE_ACP)
                .output()
                .expect("npm runs");
            assert!(install.status.success(), "npm install: {}", text(&install));
        }
        bin
    })
}

/// Gemini CLI's `bin` directory, installed once per run.
fn installed_gemini() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join("real-agents-gemini");
        let bin = prefix.join("node_modules/.bin");
        if !bin.join("gemini").exists() {
            let install = Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--omit=optional", "--prefix"])
                .arg(&prefix)
                .arg(GEMINI)
                .output()
                .expect("npm runs");
            assert!(install.status.success(), "npm install: {}", text(&install));
        }
        bin
    })
}

/// `work show ID --json`'s projection.
fn projection_of(root: &Path, id: &str) -> Value {
    let out = Command::new(harn_bin())
        .args(["work", "show", id, "--json", "--root"])
        .arg(root)
        .output()
        .unwrap();
    serde_json::from_slice::<Value>(&out.stdout).unwrap()["projection"].clone()
}

fn proof_of(root: &Path, id: &str) -> Value {
    let run = projection_of(root, id)["latest_run_id"].as_str().unwrap().to_owned();
    serde_json::from_slice(
        &std::fs::read(root.join(format!(".harnery/workflows/{run}/proof.json"))).unwrap(),
    )
    .unwrap()
}

#[test]
#[ignore = "installs the real agent programs with npm; .ci/run asks for them"]
fn the_real_claude_code_and_codex_do_real_work_through_the_presets() {
    let Some(World { tmp, bin, standin, home }) = world() else { return };

    for (harness, id) in [("claude-code", "c"), ("codex", "x")] {
        let root = tmp.path().join(format!("root-{id}"));
        std::fs::create_dir(&root).unwrap();
        item(&root, &home, &bin, id);
        let run =
            ["work", "run", id, "--harness", harness, "--team", "team.json", "--allow-api-billing"];
        let out = harn(&root, &home, &bin, &[&run[..], &["--timeout-secs", "300"]].concat());
        assert!(out.status.success(), "{harness}: {}", text(&out));
        assert_eq!(
            std::fs::read_to_string(root.join("hello.txt")).unwrap_or_default(),
            "hello from the stand-in\n",
            "{harness} wrote the file (outside a git repository): {}",
            proof_of(&root, id)["agents"][0]
        );
        let contained = proof_of(&root, id)["containment"].clone();
        if harn::work::confine::offer().landlock.is_ok() {
            // Codex's own sandbox (bubblewrap) runs inside harn's namespace, Claude Code
            // inside Landlock as well.
            assert_eq!(contained["confined"], true, "{harness}: {contained}");
        }
        let call = proof_of(&root, id)["agents"][0].clone();
        assert!(call["session_id"].as_str().is_some_and(|s| !s.is_empty()), "{harness}: {call}");
        assert!(call["usage"]["input_tokens"].as_u64() > Some(0), "{harness}: {call}");
    }
    // The effort word reached both vendors, each in its own field.
    let requests = standin.requests();
    let claude_effort = requests.iter().any(|r| r["body"]["output_config"]["effort"] == "high");
    let codex_effort = requests.iter().any(|r| r["body"]["reasoning"]["effort"] == "high");
    assert!(claude_effort, "Claude's request carries output_config.effort");
    assert!(codex_effort, "Codex's request carries reasoning.effort");

    // In a worktree, each commits on the item's branch, contained.
    for (harness, id) in [("claude-code", "cw"), ("codex", "xw")] {
        let root = tmp.path().join(format!("repo-{id}"));
        std::fs::create_dir(&root).unwrap();
        worktree_item(&root, &home, &bin, id);
        let run = [
            "work",
            "run",
            id,
            "--harness",
            harness,
            "--team",
            "team.json",
            "--allow-api-billing",
            "--isolation",
            "worktree",
            "--timeout-secs",
            "300",
        ];
        let out = harn(&root, &home, &bin, &run);
        let proof = proof_of(&root, id);
        assert!(out.status.success(), "{harness}: {}\n{}", text(&out), proof["agents"][0]);
        let ws = proof["workspace"].clone();
        assert_ne!(ws["final_commit"], ws["base_commit"], "{harness} committed: {ws}");
        let shown = Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(["show", &format!("harn/{id}:agent.txt")])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&shown.stdout), "committed by the agent\n", "{harness}");
        if harn::work::confine::offer().landlock.is_ok() {
            assert_eq!(
                proof["containment"]["confined"], true,
                "{harness}: {}",
                proof["containment"]
            );
        }
    }

    // Nobody logged in: nothing charged, and the message says what to run.
    let empty = tmp.path().join("empty-home");
    std::fs::create_dir(&empty).unwrap();
    let root = tmp.path().join("root-out");
    std::fs::create_dir(&root).unwrap();
    item(&root, &empty, &bin, "o");
    let out = harn(
        &root,
        &empty,
        &bin,
        &["work", "run", "o", "--harness", "claude-code", "--team", "team.json"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("claude auth login"), "{}", text(&out));
    assert_eq!(proof_of(&root, "o")["run"]["class"], "environment");
}

/// The stand-in's `POST /v1/messages` requests logged since `from` (an index into its log).
fn messages_since(standin: &StandIn, from: usize) -> Vec<Value> {
    standin.requests()[from..]
        .iter()
        .filter(|r| {
            r["method"] == "POST"
                && r["path"]
                    .as_str()
                    .is_some_and(|p| p.starts_with("/v1/messages?") || p == "/v1/messages")
        })
        .map(|r| r["body"].clone())
        .collect()
}

#[test]
#[ignore = "installs the real agent programs with npm; .ci/run asks for them"]
fn a_vendor_that_never_answers_costs_nothing_and_says_so() {
    let Some(World { tmp, bin, standin: _running, home }) = world() else { return };
    let idle = r#"{"implementer": {"instructions": "You write files.", "idleTimeoutMs": 5000}}"#;
    // Claude Code's own request timeout first (its `Request timed out` result), then both
    // programs under harn's watchdog.
    let own = r#"{"implementer": {"instructions": "You write files.", "idleTimeoutMs": 60000}}"#;
    let claude_own = [("API_TIMEOUT_MS", "3000"), ("CLAUDE_CODE_MAX_RETRIES", "0")];
    type Env<'a> = &'a [(&'a str, &'a str)];
    let cases: [(&str, &str, &str, Env, &str); 3] = [
        ("claude-code", "co", own, &claude_own, "the vendor did not answer"),
        ("claude-code", "ch", idle, &[], "no progress for 5 s: the vendor did not answer"),
        ("codex", "xh", idle, &[], "no progress for 5 s: the vendor did not answer"),
    ];
    for (harness, id, team, env, said) in cases {
        let root = tmp.path().join(format!("root-{id}"));
        std::fs::create_dir(&root).unwrap();
        item_of(&root, &home, &bin, id, "hang", team);
        let run = ["work", "run", id, "--harness", harness, "--team", "team.json"];
        let run = [&run[..], &["--allow-api-billing", "--timeout-secs", "240"]].concat();
        let began = std::time::Instant::now();
        let out = harn_with(&root, &home, &bin, &run, env);
        let took = began.elapsed();
        assert_eq!(out.status.code(), Some(1), "{harness}: {}", text(&out));
        let proof = proof_of(&root, id);
        assert_eq!(proof["run"]["class"], "upstream", "{harness} {id}: {}", proof["run"]);
        let call = &proof["agents"][0];
        assert!(call["error"].as_str().is_some_and(|e| e.contains(said)), "{harness} {id}: {call}");
        // Two tries (the default attempts) of at most the idle limit each, and start-up.
        assert!(took < std::time::Duration::from_secs(100), "{harness} {id}: {took:?}");
        let projection = projection_of(&root, id);
        assert_eq!(projection["charged_attempts"], 0, "{harness} {id}: {projection}");
    }
}

#[test]
#[ignore = "installs the real agent programs with npm; .ci/run asks for them"]
fn a_contained_call_on_a_fresh_home_sends_what_an_open_one_sends() {
    let Some(World { tmp, bin, standin, .. }) = world() else { return };
    let team = r#"{"implementer": {"instructions": "You write files.", "effort": "low"}}"#;
    // What a call's request says of how the agent is set up.
    let shape = |body: &Value| {
        let tools: Vec<String> = body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect();
        serde_json::json!({
            "model": body["model"], "effort": body["output_config"]["effort"],
            "thinking": body["thinking"], "tools": tools,
        })
    };
    let mut seen = Vec::new();
    for (how, extra) in [("contained", &[][..]), ("open", &["--no-containment"][..])] {
        let dir = tmp.path().join(how);
        std::fs::create_dir(&dir).unwrap();
        let home = home(&dir, standin.port, &bin);
        assert!(!home.join(".claude.json").exists(), "a fresh home");
        let mut shapes = Vec::new();
        for (n, id) in ["fresh", "used"].iter().enumerate() {
            let root = dir.join(format!("root-{n}"));
            std::fs::create_dir(&root).unwrap();
            item_of(&root, &home, &bin, id, "text", team);
            // Claude Code behind a wrapper: harn cannot ask it for its login, so no pre-flight
            // makes its state file before the call, as on a CI runner's first call.
            let wrapped = serde_json::json!({"schema_version": 1, "harnesses": {"wrapped": {
                "command": ["env", "claude", "-p", "--output-format", "stream-json", "--verbose"],
                "kind": "claude-code", "writable": ["~/.claude", "~/.claude.json"],
            }}});
            std::fs::write(root.join(".harnery/config.json"), wrapped.to_string()).unwrap();
            let from = standin.requests().len();
            let run = ["work", "run", id, "--harness", "wrapped", "--team", "team.json"];
            let run = [&run[..], &["--allow-api-billing", "--timeout-secs", "240"], extra].concat();
            let out = harn(&root, &home, &bin, &run);
            assert!(out.status.success(), "{how} {id}: {}", text(&out));
            let requests = messages_since(&standin, from);
            assert!(!requests.is_empty(), "{how} {id}: the call reached the stand-in");
            shapes.push(shape(requests.last().unwrap()));
        }
        let state = std::fs::read_to_string(home.join(".claude.json")).unwrap();
        let state: Value = serde_json::from_str(&state).expect("Claude's state is JSON");
        seen.push((how, shapes, state));
    }
    let (contained, open) = (&seen[0], &seen[1]);
    assert_eq!(contained.1, open.1, "the vendor sees the same call, fresh and used");
    assert_eq!(contained.1[0]["effort"], "low", "{:?}", contained.1);
    // Claude saved its state as an open call does.
    let keys = |v: &Value| v.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>());
    assert_eq!(keys(&contained.2), keys(&open.2), "{} vs {}", contained.2, open.2);
}

#[test]
#[ignore = "installs the real agent programs with npm; .ci/run asks for them"]
fn claude_code_through_its_acp_adapter_works_under_the_runs_policy() {
    let Some(World { tmp, bin, standin: _running, home }) = world() else { return };
    let acp = installed_acp();
    let path = format!("{}:{}", acp.display(), bin.display());
    let claude = bin.join("claude").display().to_string();
    let env = [("CLAUDE_CODE_EXECUTABLE", claude.as_str())];
    let team = r#"{"implementer": {"instructions": "You write files."}}"#;
    let edits = r#"{"rules": [{"name": "no-edits", "on": "tool", "tool_kind": "edit", "verdict": "deny"}]}"#;
    let ask = r#"{"rules": [{"name": "person", "on": "tool", "tool": "Write", "verdict": "ask"}]}"#;
    for (id, policy) in [("allowed", None), ("denied", Some(edits)), ("asked", Some(ask))] {
        let root = tmp.path().join(id);
        std::fs::create_dir(&root).unwrap();
        item_of(&root, &home, &bin, id, "write-file", team);
        let mut run =
            vec!["work", "run", id, "--harness", "claude-code-acp", "--team", "team.json"];
        run.extend(["--allow-api-billing", "--timeout-secs", "240", "--approval-to", "ana"]);
        if let Some(rules) = policy {
            std::fs::write(root.join("policy.json"), rules).unwrap();
            run.extend(["--policy", "policy.json"]);
        }
        let mut out = harn_with(&root, &home, Path::new(&path), &run, &env);
        let (mut first_session, mut resumed) = (None, String::new());
        if id == "asked" {
            // Parked on the write, nothing written; the ruling resumes the same session.
            assert_eq!(out.status.code(), Some(1), "{}", text(&out));
            assert!(!root.join("hello.txt").exists());
            let projection = projection_of(&root, id);
            let approval = projection["approval_id"].as_str().expect("parked").to_owned();
            let transcript = std::fs::read_to_string(root.join(format!(
                ".harnery/workflows/{}/transcript.jsonl",
                projection["latest_run_id"].as_str().unwrap()
            )))
            .unwrap();
            first_session = transcript
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap()["body"].clone())
                .find(|b| b["what"] == "session")
                .map(|b| b["session_id"].clone());
            let approve = ["approval", "approve", &approval, "--actor", "ana"];
            assert!(harn(&root, &home, &bin, &approve).status.success());
            out = harn_with(&root, &home, Path::new(&path), &["work", "run", id], &env);
            let run = projection_of(&root, id)["latest_run_id"].as_str().unwrap().to_owned();
            resumed = std::fs::read_to_string(
                root.join(format!(".harnery/workflows/{run}/transcript.jsonl")),
            )
            .unwrap();
        }
        let proof = proof_of(&root, id);
        let call = &proof["agents"][0];
        assert!(out.status.success(), "{id}: {}\n{call}", text(&out));
        assert!(call["session_id"].as_str().is_some_and(|s| !s.is_empty()), "{id}: {call}");
        // The resumed call continues the session it had opened. The adapter (0.101.0) now and
        // then cannot find a session its Claude Code was stopped in ("Resource not found");
        // then the same prompt is asked in a new session, and the transcript says so.
        if let Some(session) = first_session.filter(|s| call["session_id"] != *s) {
            let said = resumed.contains("could not load its session");
            assert!(said, "neither {session} continued nor a new session said why: {resumed}");
        }
        let written = std::fs::read_to_string(root.join("hello.txt")).ok();
        match id {
            "denied" => {
                assert_eq!(written, None, "{id}: the policy refused the write");
                assert_eq!(call["denials"][0]["tool"], "Write", "{call}");
            }
            _ => assert_eq!(written.as_deref(), Some("hello from the stand-in\n"), "{id}: {call}"),
        }
    }
}

#[test]
#[ignore = "installs the real agent programs with npm; .ci/run asks for them"]
fn gemini_cli_works_under_the_runs_policy_and_a_parked_call_resumes() {
    let Some(World { tmp, bin, standin, home }) = world() else { return };
    let gemini = installed_gemini();
    let path = format!("{}:{}", gemini.display(), bin.display());
    // A model named in its settings (its `auto` router would ask a classifier first), and no
    // usage statistics sent anywhere.
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    let settings =
        r#"{"model": {"name": "gemini-2.5-flash"}, "privacy": {"usageStatisticsEnabled": false}}"#;
    std::fs::write(home.join(".gemini/settings.json"), settings).unwrap();
    let base = format!("http://127.0.0.1:{}", standin.port);
    let env = [("GEMINI_API_KEY", "sk-test"), ("GOOGLE_GEMINI_BASE_URL", base.as_str())];
    let team = r#"{"implementer": {"instructions": "You write files."}}"#;
    let ask =
        r#"{"rules": [{"name": "person", "on": "tool", "tool_kind": "edit", "verdict": "ask"}]}"#;
    for (id, policy) in [("allowed", None), ("asked", Some(ask))] {
        let root = tmp.path().join(format!("gemini-{id}"));
        std::fs::create_dir(&root).unwrap();
        item_of(&root, &home, &bin, id, "write-file", team);
        let mut run = vec!["work", "run", id, "--harness", "gemini", "--team", "team.json"];
        run.extend(["--allow-api-billing", "--timeout-secs", "240", "--approval-to", "ana"]);
        if let Some(rules) = policy {
            std::fs::write(root.join("policy.json"), rules).unwrap();
            run.extend(["--policy", "policy.json"]);
        }
        let mut out = harn_with(&root, &home, Path::new(&path), &run, &env);
        if id == "asked" {
            // Parked on the write, nothing written; the ruling resumes the call.
            assert_eq!(out.status.code(), Some(1), "{}", text(&out));
            assert!(!root.join("hello.txt").exists());
            let approval =
                projection_of(&root, id)["approval_id"].as_str().expect("parked").to_owned();
            let approve = ["approval", "approve", &approval, "--actor", "ana"];
            assert!(harn(&root, &home, &bin, &approve).status.success());
            out = harn_with(&root, &home, Path::new(&path), &["work", "run", id], &env);
            let run = projection_of(&root, id)["latest_run_id"].as_str().unwrap().to_owned();
            let transcript = std::fs::read_to_string(
                root.join(format!(".harnery/workflows/{run}/transcript.jsonl")),
            )
            .unwrap();
            // The call continues its session where the agent can load it; Gemini CLI 0.61
            // cannot (google-gemini/gemini-cli#28775), so the same prompt is asked in a new
            // session over the workspace the first one left, and the transcript says so.
            let loaded = transcript.contains("\"loaded\":true");
            let again = transcript.contains("could not load its session");
            assert!(loaded || again, "{transcript}");
            assert!(transcript.contains("\"approval_id\""), "the ruling answered the ask");
        }
        let proof = proof_of(&root, id);
        let call = &proof["agents"][0];
        assert!(out.status.success(), "{id}: {}\n{call}", text(&out));
        assert!(call["session_id"].as_str().is_some_and(|s| !s.is_empty()), "{id}: {call}");
        assert!(call["usage"]["input_tokens"].as_u64().unwrap_or(0) > 0, "{id}: {call}");
        let written = std::fs::read_to_string(root.join("hello.txt")).ok();
        assert_eq!(written.as_deref(), Some("hello from the stand-in\n"), "{id}: {call}");
    }
    let asked = standin.requests().into_iter().filter(|r| {
        r["path"].as_str().is_some_and(|p| p.contains("gemini-2.5-flash:streamGenerateContent"))
    });
    assert!(asked.count() >= 4, "every turn reached the stand-in");
}

/// The starter's agent, the real Claude Code with `--continue`, as a terminal harness: it
/// stays up for a minute without a restart, its screen shows its interface, a key sent
/// reaches it, and a stop ends it.
#[test]
#[ignore = "installs the real agent programs with npm; .ci/run asks for them"]
fn the_real_claude_code_lives_as_a_terminal_harness() {
    let Some(World { tmp, bin, standin: _running, home }) = world() else { return };
    let root = tmp.path().join("terminal");
    std::fs::create_dir(&root).unwrap();
    let toml = "[harness.agent]\ncommand = [\"claude\", \"--continue\"]\ntty = true\n";
    std::fs::write(root.join("harness.toml"), toml).unwrap();
    /// Brings the daemon down however the test ends.
    struct Down<'a>(&'a Path, &'a Path, &'a Path);
    impl Drop for Down<'_> {
        fn drop(&mut self) {
            let _ = harn(self.0, self.1, self.2, &["harness", "down"]);
        }
    }
    let up = harn(&root, &home, &bin, &["harness", "up"]);
    assert!(up.status.success(), "{}", text(&up));
    let _down = Down(&root, &home, &bin);
    let agent = || {
        let out = harn(&root, &home, &bin, &["harness", "list", "--json"]);
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let found =
            doc["harnesses"].as_array().into_iter().flatten().find(|h| h["name"] == "agent");
        found.cloned().unwrap_or_default()
    };
    let screen = || text(&harn(&root, &home, &bin, &["harness", "screen", "agent"]));
    let started = std::time::Instant::now();
    while !screen().contains("Claude Code") {
        assert!(started.elapsed().as_secs() < 60, "its interface never showed: {}", screen());
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    // Enter picks the first screen's choice: what is sent reaches it, and it moves on.
    let first = screen();
    let sent = harn(&root, &home, &bin, &["harness", "send", "agent", "", "--enter"]);
    assert!(sent.status.success(), "{}", text(&sent));
    let moved = std::time::Instant::now();
    while screen() == first {
        assert!(moved.elapsed().as_secs() < 30, "the key never reached it:\n{first}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    // A minute up, on its first run.
    while started.elapsed().as_secs() < 60 {
        let h = agent();
        assert_eq!((h["state"].as_str(), h["runs"].as_u64()), (Some("running"), Some(1)), "{h}");
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
    let stop = harn(&root, &home, &bin, &["harness", "stop", "agent"]);
    assert!(stop.status.success(), "{}", text(&stop));
    assert_eq!(agent()["state"], "stopped");
}

#[test]
#[ignore = "installs the real agent programs with npm; .ci/run asks for them"]
fn the_real_claude_code_commits_on_a_cluster_node() {
    let Some(World { tmp, bin, standin: _standin, home }) = world() else { return };
    if crate::cluster::slurm_conf().is_none() {
        return;
    }
    // The coordinator's root is a clone of a bare repository the nodes clone and push to.
    let remote = tmp.path().join("remote.git");
    let root = tmp.path().join("repo-cluster");
    let git = |dir: &Path, args: &[&str]| {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", text(&out));
    };
    git(tmp.path(), &["init", "-q", "--bare", "remote.git"]);
    git(tmp.path(), &["clone", "-q", "remote.git", "repo-cluster"]);
    worktree_item_in(&root, &home, &bin, "cn", false);
    git(&root, &["push", "-q", "origin", "HEAD"]);
    let config = serde_json::json!({ "clusters": { "lab": {
        "engine": "slurm",
        "repository": remote.display().to_string(),
        "harn": harn_bin().display().to_string(),
        "scratch": tmp.path().join("scratch").display().to_string(),
    }}});
    std::fs::write(root.join(".harnery/config.json"), config.to_string()).unwrap();
    let run = [
        "work",
        "run",
        "cn",
        "--cluster",
        "lab",
        "--harness",
        "claude-code",
        "--team",
        "team.json",
        "--allow-api-billing",
        "--timeout-secs",
        "300",
    ];
    let out = harn(&root, &home, &bin, &run);
    let proof = proof_of(&root, "cn");
    assert!(out.status.success(), "{}\n{}", text(&out), proof["agents"][0]);
    // Claude Code ran on a node, committed there, and the commit came back to be attested.
    let ws = proof["workspace"].clone();
    assert_ne!(ws["final_commit"], ws["workspace"]["base_commit"], "committed: {ws}");
    let shown = Command::new("git")
        .arg("-C")
        .arg(&root)
        .args(["show", "harn/cn:agent.txt"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&shown.stdout), "committed by the agent\n");
    let call = &proof["agents"][0];
    assert!(call["usage"]["input_tokens"].as_u64() > Some(0), "{call}");
    let run_id = projection_of(&root, "cn")["latest_run_id"].as_str().unwrap().to_owned();
    let shown = harn(&root, &home, &bin, &["run", "show", &run_id, "--json"]);
    let doc: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(doc["cluster_jobs"].as_array().map(Vec::len), Some(1), "{doc}");
    if harn::work::confine::offer().landlock.is_ok() {
        assert_eq!(proof["containment"]["confined"], true, "{}", proof["containment"]);
    }
}
