//! The claude-code and codex presets over the real binary, with `tests/fixtures/agents/`'s
//! fake programs replaying output recorded from the real CLIs: not logged in is uncharged
//! with the command to run, an API key is refused under subscription billing, a denied edit
//! is visible, session, tokens and cost reach the proof, a silent call is ended by the
//! watchdog, and the run's progress is printed as it goes.

use crate::cli::{harn_bin, json, text};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agents")
}

/// A root with a one-call workflow `wf.sh`, item `w`, and a `bin/` holding `claude` and
/// `codex`: the fake programs.
fn root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    std::fs::copy(examples.join("workflows/agent-review.sh"), r.join("wf.sh")).unwrap();
    std::fs::create_dir(r.join("bin")).unwrap();
    for (name, fake) in [("claude", "fake-claude"), ("codex", "fake-codex")] {
        let wrapper = r.join("bin").join(name);
        std::fs::write(
            &wrapper,
            format!("#!/bin/sh\nexec '{}' \"$@\"\n", fixtures().join(fake).display()),
        )
        .unwrap();
        std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    let create = ["work", "create", "W", "wf.sh", "--id", "w", "--objective", "write hello.txt"];
    assert!(harn(r, &create, &[]).status.success());
    dir
}

/// `harn args… --root r` with the fakes first on `PATH` and `vars` set.
fn harn(r: &Path, args: &[&str], vars: &[(&str, &str)]) -> Output {
    let path = format!("{}:{}", r.join("bin").display(), std::env::var("PATH").unwrap_or_default());
    let mut cmd = Command::new(harn_bin());
    cmd.args(args).arg("--root").arg(r).env("PATH", path).current_dir(r);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn projection(r: &Path) -> Value {
    json(&harn(r, &["work", "show", "w", "--json"], &[]))["projection"].clone()
}

fn proof(r: &Path) -> Value {
    let run = projection(r)["latest_run_id"].as_str().unwrap().to_owned();
    serde_json::from_slice(
        &std::fs::read(r.join(format!(".harnery/workflows/{run}/proof.json"))).unwrap(),
    )
    .unwrap()
}

#[test]
fn not_logged_in_costs_nothing_and_says_what_to_run() {
    for (harness, auth, hint) in
        [("claude-code", "logged-out", "claude auth login"), ("codex", "logged-out", "codex login")]
    {
        let dir = root();
        let r = dir.path();
        let vars = [("HARN_FAKE_AUTH", auth), ("HARN_FAKE_FIXTURE", "stream-text")];
        let out = harn(r, &["work", "run", "w", "--harness", harness], &vars);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(text(&out).contains(hint), "{harness}: {}", text(&out));
        let p = projection(r);
        assert_eq!(
            (p["attempts_used"].as_u64(), p["charged_attempts"].as_u64()),
            (Some(1), Some(0)),
            "{p}"
        );
        assert_eq!(proof(r)["run"]["class"], "environment");
    }
}

#[test]
fn an_api_key_is_refused_under_subscription_billing_unless_allowed() {
    let dir = root();
    let r = dir.path();
    // The recorded login is an apiKeyHelper: it bills per token.
    let vars = [("HARN_FAKE_FIXTURE", "stream-text")];
    let out = harn(r, &["work", "run", "w", "--harness", "claude-code"], &vars);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("apiKeyHelper") && text(&out).contains("--allow-api-billing"),
        "{}",
        text(&out)
    );
    assert_eq!(projection(r)["charged_attempts"], 0);
    let retry = ["work", "retry", "w", "--harness", "claude-code", "--allow-api-billing"];
    let out = harn(r, &retry, &vars);
    assert!(out.status.success(), "{}", text(&out));
    let manifest: Value = serde_json::from_slice(
        &std::fs::read(r.join(format!(
            ".harnery/workflows/{}/run.json",
            projection(r)["latest_run_id"].as_str().unwrap()
        )))
        .unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["billing"], "api", "frozen like every host option");
}

#[test]
fn session_tokens_and_cost_reach_the_proof_and_the_views() {
    let dir = root();
    let r = dir.path();
    let vars = [("HARN_FAKE_FIXTURE", "stream-text")];
    let run = ["work", "run", "w", "--harness", "claude-code", "--allow-api-billing", "--progress"];
    let out = harn(r, &run, &vars);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("agent implement replied"), "progress as it goes: {}", text(&out));
    let p = proof(r);
    let call = &p["agents"][0];
    assert_eq!(call["session_id"], "a8fb9f0b-1946-4016-865b-e4e9712068bb", "{p}");
    assert_eq!(call["usage"]["cost_micro_usd"], 251);
    assert_eq!(call["usage"]["input_tokens"], 19);
    assert_eq!(p["usage"]["output_tokens"], 7);
    let shown = harn(r, &["work", "show", "w"], &[]);
    assert!(
        text(&shown).contains("19 tokens in (5 cached), 7 out, 1 turn, $0.0002"),
        "{}",
        text(&shown)
    );
    let list = json(&harn(r, &["run", "list", "--json"], &[]));
    assert_eq!(list["runs"][0]["usage"]["cost_micro_usd"], 251, "{list}");
    let follow = harn(r, &["run", "follow", p["run"]["id"].as_str().unwrap()], &[]);
    assert!(follow.status.success(), "{}", text(&follow));
    assert!(text(&follow).contains("agent implement replied"), "{}", text(&follow));
}

#[test]
fn a_write_the_agent_was_refused_is_visible_in_the_proof() {
    let dir = root();
    let r = dir.path();
    let vars = [("HARN_FAKE_FIXTURE", "stream-write-denied")];
    let out =
        harn(r, &["work", "run", "w", "--harness", "claude-code", "--allow-api-billing"], &vars);
    assert!(text(&out).contains("denied     Write"), "{}", text(&out));
    let denials = &proof(r)["agents"][0]["denials"];
    assert_eq!(denials[0]["tool"], "Write", "{denials}");
}

#[test]
fn codex_writes_its_file_and_reports_its_thread() {
    let dir = root();
    let r = dir.path();
    let vars = [
        ("HARN_FAKE_FIXTURE", "json-write-file"),
        ("HARN_FAKE_WRITE", "hello.txt:hello from the stand-in\\n"),
    ];
    let out = harn(
        r,
        &["work", "run", "w", "--harness", "codex", "--allow-api-billing", "--progress"],
        &vars,
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("implement edit"), "the tool use is shown: {}", text(&out));
    assert!(r.join("hello.txt").exists());
    assert!(proof(r)["agents"][0]["session_id"].as_str().is_some());
}

#[test]
fn the_watchdog_ends_a_call_that_goes_silent_without_charging_it() {
    let dir = root();
    let r = dir.path();
    // A codex-speaking harness that starts its thread and then says nothing.
    codex_like(r, "stuck", "exec sleep 30", 700);
    let began = std::time::Instant::now();
    let out = harn(r, &["work", "run", "w", "--harness", "stuck"], &[]);
    assert!(began.elapsed() < std::time::Duration::from_secs(20), "{:?}", began.elapsed());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("no progress for 700 ms: the vendor did not answer"),
        "{}",
        text(&out)
    );
    assert_eq!(projection(r)["charged_attempts"], 0);
    assert_eq!(proof(r)["run"]["class"], "upstream");
    // The call was tried twice (the default attempts), the first try in the transcript.
    let run = projection(r)["latest_run_id"].as_str().unwrap().to_owned();
    let transcript =
        std::fs::read_to_string(r.join(format!(".harnery/workflows/{run}/transcript.jsonl")))
            .unwrap();
    let retries: Vec<Value> = transcript
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["body"].clone())
        .filter(|r| r["event"] == "agent.progress" && r["what"] == "retry")
        .collect();
    assert_eq!(retries.len(), 1, "{transcript}");
    assert_eq!(
        (retries[0]["try"].as_u64(), retries[0]["class"].as_str()),
        (Some(1), Some("upstream"))
    );
}

#[test]
fn a_run_that_times_out_while_its_vendor_is_silent_is_not_charged() {
    let dir = root();
    let r = dir.path();
    codex_like(r, "hung", "exec sleep 60", 600_000);
    let out = harn(r, &["work", "run", "w", "--harness", "hung", "--timeout-secs", "2"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let p = proof(r);
    assert_eq!(p["run"]["class"], "upstream", "{p}");
    let error = p["run"]["error"].as_str().unwrap();
    assert!(error.contains("before its run ended: the vendor did not answer"), "{error}");
    assert_eq!(projection(r)["charged_attempts"], 0);
}

#[test]
fn an_effort_a_harness_does_not_take_is_refused_naming_the_file_and_role() {
    let dir = root();
    let r = dir.path();
    std::fs::write(
        r.join("team.json"),
        r#"{"implementer": {"instructions": "x", "effort": "ultra"}}"#,
    )
    .unwrap();
    let out = harn(r, &["work", "run", "w", "--harness", "codex", "--team", "team.json"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("team.json") && text(&out).contains("role implementer"),
        "{}",
        text(&out)
    );
    assert!(text(&out).contains("minimal, low, medium, high, xhigh"), "{}", text(&out));
    assert_eq!(projection(r)["attempts_used"], 0);
}

#[test]
fn a_call_that_continues_resumes_the_vendor_session_of_the_last_call() {
    let dir = root();
    let r = dir.path();
    // Two calls; the second asks to continue the session of the first.
    let wf = r.join("two.sh");
    std::fs::write(
        &wf,
        "#!/bin/sh\nread -r start\n\
         echo '{\"op\":\"agent\",\"id\":\"a1\",\"prompt\":\"first\"}'\nread -r one\n\
         echo '{\"op\":\"agent\",\"id\":\"a2\",\"prompt\":\"again\",\"continue\":true}'\nread -r two\n\
         echo '{\"op\":\"result\",\"ok\":true}'\n",
    )
    .unwrap();
    std::fs::set_permissions(&wf, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let create = ["work", "create", "T", "two.sh", "--id", "t", "--objective", "o"];
    assert!(harn(r, &create, &[]).status.success());
    // A harness speaking Claude Code's dialect that notes its argv, then replays a reply.
    let argv_log = r.join("argv.log");
    let claude = fixtures().join("fake-claude");
    let wrapper = r.join("bin/noting-claude");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
            argv_log.display(),
            claude.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .unwrap();
    let config = format!(
        r#"{{"schema_version": 1, "harnesses": {{"noted": {{"command": ["{}", "-p", "--output-format", "stream-json", "--verbose"], "kind": "claude-code"}}}}}}"#,
        wrapper.display()
    );
    std::fs::write(r.join(".harnery/config.json"), config).unwrap();
    let out = harn(
        r,
        &["work", "run", "t", "--harness", "noted"],
        &[("HARN_FAKE_FIXTURE", "stream-text")],
    );
    assert!(out.status.success(), "{}", text(&out));
    let calls: Vec<String> =
        std::fs::read_to_string(&argv_log).unwrap().lines().map(str::to_owned).collect();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(!calls[0].contains("--resume"), "{}", calls[0]);
    assert!(
        calls[1].ends_with("--resume a8fb9f0b-1946-4016-865b-e4e9712068bb"),
        "the second call continues the first's session: {}",
        calls[1]
    );
}

/// A codex-speaking harness: its thread starts, then `script` (shell) runs, its prompt read;
/// silent for `idle_ms`, the watchdog ends it.
fn codex_like(r: &Path, name: &str, script: &str, idle_ms: u64) {
    let config = serde_json::json!({
        "schema_version": 1,
        "harnesses": { name: {
            "command": ["sh", "-c", format!("cat >/dev/null; echo '{{\"type\":\"thread.started\",\"thread_id\":\"t1\"}}'; {script}")],
            "kind": "codex", "idle_timeout_ms": idle_ms,
        }},
    });
    std::fs::write(r.join(".harnery/config.json"), config.to_string()).unwrap();
}

#[test]
fn a_tool_that_runs_longer_than_the_idle_timeout_does_not_end_the_call() {
    let dir = root();
    let r = dir.path();
    let item = |id: &str, kind: &str, state: &str, status: &str| {
        format!(
            r#"echo '{{"type":"item.{state}","item":{{"id":"{id}","type":"{kind}","command":"cargo test","status":"{status}"}}}}'"#
        )
    };
    let script = [
        item("i0", "command_execution", "started", "in_progress"),
        "sleep 2".into(),
        item("i0", "command_execution", "completed", "completed"),
        r#"echo '{"type":"item.completed","item":{"id":"i1","type":"agent_message","text":"tests pass"}}'"#.into(),
        r#"echo '{"type":"turn.completed","usage":{"input_tokens":5,"output_tokens":2}}'"#.into(),
    ]
    .join("; ");
    codex_like(r, "busy", &script, 700);
    let out = harn(r, &["work", "run", "w", "--harness", "busy"], &[]);
    assert!(out.status.success(), "a 2 s tool under a 700 ms idle timeout: {}", text(&out));
}

#[test]
fn a_call_that_falls_silent_after_working_is_charged() {
    let dir = root();
    let r = dir.path();
    let script = r#"echo '{"type":"item.completed","item":{"id":"i1","type":"reasoning","text":"thinking"}}'; exec sleep 30"#;
    codex_like(r, "fell-silent", script, 700);
    let out = harn(r, &["work", "run", "w", "--harness", "fell-silent"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("fell silent after it had begun"), "{}", text(&out));
    assert_eq!(projection(r)["charged_attempts"], 1);
}

#[test]
fn a_call_whose_tool_output_runs_past_4_mib_keeps_its_reply() {
    let dir = root();
    let r = dir.path();
    let script = r#"python3 -c 'import json
line = json.dumps({"type": "item.completed", "item": {"id": "x", "type": "command_execution", "aggregated_output": "a" * 4000}})
for _ in range(1600): print(line)
print(json.dumps({"type": "item.completed", "item": {"id": "m", "type": "agent_message", "text": "read them all"}}))
print(json.dumps({"type": "turn.completed", "usage": {"input_tokens": 9, "output_tokens": 3}}))'"#;
    codex_like(r, "chatty", script, 700);
    let out = harn(r, &["work", "run", "w", "--harness", "chatty"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let agent = &proof(r)["agents"][0];
    assert_eq!(agent["session_id"], "t1", "the session line at the start is kept: {agent}");
    assert_eq!(agent["usage"]["output_tokens"], 3, "and the usage at the end: {agent}");
}

/// A team whose specialists would all run on one harness is refused while another built-in
/// one is installed and logged in, with the way out named; the refusal writes nothing.
#[test]
fn a_team_on_one_harness_is_refused_while_another_is_live() {
    let dir = root();
    let r = dir.path();
    // Logged in to a subscription (the recorded fixtures log in with keys, which do not count):
    // hand-written stand-ins printing the status shapes Claude Code and Codex print for it.
    let standin = |name: &str, body: &str| {
        std::fs::write(r.join("bin").join(name), format!("#!/bin/sh\n{body}\n")).unwrap();
    };
    standin(
        "claude",
        r#"echo '{"loggedIn":true,"authMethod":"claude.ai","apiProvider":"firstParty","subscriptionType":"max"}'"#,
    );
    standin("codex", "echo 'Logged in using ChatGPT' >&2");
    let write_team = |pins: [Option<&str>; 2]| {
        let role = |h: Option<&str>| match h {
            Some(h) => serde_json::json!({ "instructions": "Do the work.", "harness": h }),
            None => serde_json::json!({ "instructions": "Do the work." }),
        };
        let team = serde_json::json!({ "builder": role(pins[0]), "reviewer": role(pins[1]) });
        std::fs::write(r.join("team.json"), team.to_string()).unwrap();
    };
    // Only the fakes and the shell's tools: a real program elsewhere on PATH cannot count.
    let create = |id: &str, extra: &[&str]| {
        let mut args = vec!["supervisor", "create", "w", "--team", "team.json", "--id", id];
        args.extend_from_slice(extra);
        let path = format!("{}:/usr/bin:/bin", r.join("bin").display());
        let mut cmd = Command::new(harn_bin());
        cmd.args(&args).arg("--root").arg(r).env("PATH", path).current_dir(r);
        cmd.output().unwrap()
    };

    write_team([None, None]);
    let out = create("g1", &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("no specialist pins") && e.contains("claude-code, codex are live"), "{e}");
    assert!(e.contains("--allow-single-adapter"), "{e}");
    assert!(!r.join(".harnery/supervisors/g1").exists(), "a refusal writes nothing");
    assert!(create("g1", &["--allow-single-adapter"]).status.success());

    write_team([Some("codex"), Some("codex")]);
    let e = text(&create("g2", &[]));
    assert!(
        e.contains("pins the same harness (codex)") && e.contains("claude-code is live"),
        "{e}"
    );
    write_team([Some("claude-code"), Some("codex")]);
    assert!(create("g3", &[]).status.success());

    // With claude logged out, a team pinned to codex spreads as far as it can.
    standin("claude", r#"echo '{"loggedIn":false,"authMethod":"none"}'; exit 1"#);
    write_team([Some("codex"), Some("codex")]);
    let out = create("g4", &[]);
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn a_sealed_call_starts_while_another_program_has_a_mount_below_tmp() {
    // A sealed call (Codex) lays a `/tmp` of its own over a clone of the machine's. A mount
    // below the machine's `/tmp` (another program's tmpfs, a full-disk test's) is locked in the
    // call's user namespace, and a clone of `/tmp` without it was refused with EINVAL: a call
    // started while such a mount stood, a retry say, failed as "could not start: Invalid
    // argument", and the attempt ended blocked as the environment's failure.
    let tmp = tempfile::Builder::new().tempdir_in("/tmp").unwrap();
    let Some(_mounted) = crate::charging::Tmpfs::mount(&tmp.path().join("m"), "1m") else {
        assert!(!rustix::process::geteuid().is_root(), "root could not mount a tmpfs");
        crate::skip::skip("this process may not mount a tmpfs");
        return;
    };
    let dir = root();
    let r = dir.path();
    let script = [
        r#"echo '{"type":"item.completed","item":{"id":"i1","type":"agent_message","text":"done"}}'"#,
        r#"echo '{"type":"turn.completed","usage":{"input_tokens":5,"output_tokens":2}}'"#,
    ]
    .join("; ");
    codex_like(r, "sealed", &script, 5_000);
    let out = harn(r, &["work", "run", "w", "--harness", "sealed"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let p = proof(r);
    if p["containment"]["sealed"] != true {
        crate::skip::skip("this machine cannot seal a call");
    }
}

/// Codex refused by a plan's spent usage limit names when it resets, in the zone harn runs it
/// in (UTC): the call is uncharged, and the proof and `run show` carry the moment.
#[test]
fn a_usage_limit_that_names_its_reset_is_recorded_uncharged_with_the_time() {
    let dir = root();
    let r = dir.path();
    // The program sees the zone harn gives it.
    let wrapper = r.join("bin/codex");
    let fake = fixtures().join("fake-codex");
    let script = format!("#!/bin/sh\necho \"$TZ\" > tz.seen\nexec '{}' \"$@\"\n", fake.display());
    std::fs::write(&wrapper, script).unwrap();
    let vars = [("HARN_FAKE_FIXTURE", "json-usage-limit-reset"), ("TZ", "Asia/Tokyo")];
    let out = harn(r, &["work", "run", "w", "--harness", "codex", "--allow-api-billing"], &vars);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let p = projection(r);
    assert_eq!((p["attempts_used"].as_u64(), p["charged_attempts"].as_u64()), (Some(1), Some(0)));
    let proof = proof(r);
    let call = &proof["agents"][0];
    assert_eq!(call["class"], "upstream", "{call}");
    // "… try again at 2:00 AM." is the next 02:00 UTC after the call ended.
    let resets = call["resets_at"].as_i64().expect("the reset is recorded");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let now = now.as_millis() as i64;
    assert!(resets > now - 120_000 && resets <= now + 86_400_000, "{resets} vs {now}");
    assert_eq!(resets % 86_400_000, 2 * 3_600_000, "02:00 UTC: {resets}");
    let run = p["latest_run_id"].as_str().unwrap();
    let shown = text(&harn(r, &["run", "show", run], &[]));
    assert!(shown.contains("UTC)"), "{shown}");
    let seen = std::fs::read_to_string(r.join("tz.seen")).unwrap();
    assert_eq!(seen.trim(), "UTC", "the program ran in UTC, whatever the caller's zone");
}
