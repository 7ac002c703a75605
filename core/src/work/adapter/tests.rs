//! Tests of `adapter`.

//! Against fixtures recorded from the real programs (`tests/fixtures/agents/`, see the
//! README beside the stand-in that recorded them).
use super::*;
use crate::work::agent::{classify, presets, AdapterSpec, CallEnd};
use crate::work::projection::FailureClass;

macro_rules! fixture {
    ($program:literal, $name:literal) => {
        (
            include_str!(concat!(
                "../../../../tests/fixtures/agents/",
                $program,
                "/",
                $name,
                ".stdout"
            )),
            include_str!(concat!(
                "../../../../tests/fixtures/agents/",
                $program,
                "/",
                $name,
                ".stderr"
            )),
            include_str!(concat!(
                "../../../../tests/fixtures/agents/",
                $program,
                "/",
                $name,
                ".code"
            )),
        )
    };
}

fn preset(name: &str) -> AdapterSpec {
    presets().remove(name).unwrap()
}

/// The outcome the core gives a recorded run of `adapter`.
fn outcome(
    harness: &str,
    (stdout, stderr, code): (&str, &str, &str),
) -> crate::work::agent::CallOutcome {
    let code: i32 = code.trim().parse().unwrap();
    let end = CallEnd {
        code: Some(code),
        stdout: stdout.into(),
        stderr: stderr.into(),
        ..CallEnd::default()
    };
    classify(harness, &preset(harness), 1_000, &end)
}

#[test]
fn claude_replies_with_its_session_usage_and_cost() {
    let o = outcome("claude-code", fixture!("claude-2.1.197", "stream-text"));
    assert_eq!((o.ok, o.text.as_deref()), (true, Some("stand-in reply")), "{o:?}");
    assert_eq!(o.session_id.as_deref(), Some("a8fb9f0b-1946-4016-865b-e4e9712068bb"));
    let u = o.usage.unwrap();
    assert_eq!((u.input_tokens, u.cached_tokens, u.output_tokens, u.turns), (19, 5, 7, Some(1)));
    assert_eq!(u.cost_micro_usd, Some(251));
    let json = outcome("claude-code", fixture!("claude-2.1.197", "json-text"));
    assert_eq!(json.text, o.text, "one result object read the same alone or streamed");
}

#[test]
fn claude_lists_the_writes_its_permissions_refused() {
    let o = outcome("claude-code", fixture!("claude-2.1.197", "stream-write-denied"));
    assert!(o.ok, "it still replies: {o:?}");
    assert_eq!(o.denials, [Denial { tool: "Write".into(), summary: "<CWD>/hello.txt".into() }]);
    let allowed = outcome("claude-code", fixture!("claude-2.1.197", "stream-write-file"));
    assert!(allowed.ok && allowed.denials.is_empty(), "{allowed:?}");
}

#[test]
fn claude_failures_get_their_class_from_the_table() {
    use FailureClass::{Environment as Env, Upstream as Up};
    let cases = [
        ("stream-not-logged-in", fixture!("claude-2.1.197", "stream-not-logged-in"), Some(Env)),
        ("stream-unauthorized", fixture!("claude-2.1.197", "stream-unauthorized"), Some(Env)),
        ("stream-forbidden", fixture!("claude-2.1.197", "stream-forbidden"), Some(Env)),
        ("stream-rate-limited", fixture!("claude-2.1.197", "stream-rate-limited"), Some(Up)),
        ("stream-overloaded", fixture!("claude-2.1.197", "stream-overloaded"), Some(Up)),
        ("stream-server-error", fixture!("claude-2.1.197", "stream-server-error"), Some(Up)),
        ("stream-usage-limit", fixture!("claude-2.1.197", "stream-usage-limit"), Some(Up)),
        (
            "json-no-network-retries-2",
            fixture!("claude-2.1.197", "json-no-network-retries-2"),
            Some(Env),
        ),
        ("stream-max-turns", fixture!("claude-2.1.197", "stream-max-turns"), None),
    ];
    for (name, recorded, class) in cases {
        let o = outcome("claude-code", recorded);
        assert!(!o.ok, "{name}: {o:?}");
        assert_eq!(o.class, class, "{name}: {o:?}");
    }
    let turns = outcome("claude-code", fixture!("claude-2.1.197", "stream-max-turns"));
    assert!(turns.error.unwrap().contains("Reached maximum number of turns (2)"));
    let login = outcome("claude-code", fixture!("claude-2.1.197", "stream-not-logged-in"));
    assert!(login.error.unwrap().contains("claude auth login"));
}

#[test]
fn codex_replies_with_its_thread_and_usage() {
    let o = outcome("codex", fixture!("codex-0.171.0", "json-text"));
    assert_eq!((o.ok, o.text.as_deref()), (true, Some("stand-in reply")), "{o:?}");
    assert_eq!(o.session_id.as_deref(), Some("01a23149-4b12-7950-bb38-d38c36b7e972"));
    let u = o.usage.unwrap();
    assert_eq!(
        (u.input_tokens, u.cached_tokens, u.output_tokens, u.cost_micro_usd),
        (13, 5, 7, None)
    );
    let wrote = outcome("codex", fixture!("codex-0.171.0", "json-write-file"));
    assert_eq!(wrote.text.as_deref(), Some("done writing"));
}

#[test]
fn codex_failures_get_their_class_from_the_table() {
    use FailureClass::{Environment as Env, Upstream as Up};
    let cases = [
        ("json-not-logged-in", fixture!("codex-0.171.0", "json-not-logged-in"), Some(Env)),
        ("json-unauthorized", fixture!("codex-0.171.0", "json-unauthorized"), Some(Env)),
        ("json-forbidden", fixture!("codex-0.171.0", "json-forbidden"), Some(Env)),
        ("json-rate-limited", fixture!("codex-0.171.0", "json-rate-limited"), Some(Up)),
        ("json-overloaded", fixture!("codex-0.171.0", "json-overloaded"), Some(Up)),
        ("json-server-error", fixture!("codex-0.171.0", "json-server-error"), Some(Up)),
        ("json-usage-limit", fixture!("codex-0.171.0", "json-usage-limit"), Some(Up)),
        (
            "json-no-network-bounded",
            fixture!("codex-0.171.0", "json-no-network-bounded"),
            Some(Env),
        ),
    ];
    for (name, recorded, class) in cases {
        let o = outcome("codex", recorded);
        assert!(!o.ok, "{name}: {o:?}");
        assert_eq!(o.class, class, "{name}: {o:?}");
    }
}

#[test]
fn a_stuck_program_shows_no_progress_and_the_watchdog_classes_it() {
    // Codex without a network prints reconnect notices forever: none of them is progress.
    let (stdout, stderr, _) = fixture!("codex-0.171.0", "json-no-network");
    let progress: Vec<&str> = stdout.lines().filter(|l| is_progress(Kind::Codex, l)).collect();
    assert_eq!(progress.len(), 2, "only the thread and the turn starting: {progress:?}");
    let spec = preset("codex");
    let end =
        CallEnd { idle: true, stdout: stdout.into(), stderr: stderr.into(), ..CallEnd::default() };
    let o = classify("codex", &spec, 1_000, &end);
    assert_eq!(o.class, Some(FailureClass::Environment), "{o:?}");
    let (claude, _, _) = fixture!("claude-2.1.197", "stream-rate-limited");
    assert!(claude.lines().any(|l| !is_progress(Kind::ClaudeCode, l)), "api_retry is not progress");
    assert!(claude.lines().take(1).all(|l| is_progress(Kind::ClaudeCode, l)), "init is");
}

#[test]
fn a_running_tool_keeps_a_call_from_being_idle_and_work_done_makes_silence_charged() {
    for (program, name, kind) in [
        ("claude-2.1.197", "stream-write-file", Kind::ClaudeCode),
        ("codex-0.171.0", "json-write-file", Kind::Codex),
    ] {
        let stdout = match program {
            "codex-0.171.0" => fixture!("codex-0.171.0", "json-write-file").0,
            _ => fixture!("claude-2.1.197", "stream-write-file").0,
        };
        let mut a = Activity::default();
        let mut busy_at = Vec::new();
        for line in stdout.lines() {
            a.observe(kind, line);
            busy_at.push(a.busy());
        }
        assert!(busy_at.contains(&true), "{name}: the write is a tool running");
        assert!(!a.busy(), "{name}: and it finished");
        assert!(a.progressed(), "{name}");
    }
    // A session starting is not work begun.
    let (stdout, _, _) = fixture!("codex-0.171.0", "json-no-network");
    let mut a = Activity::default();
    stdout.lines().for_each(|l| {
        a.observe(Kind::Codex, l);
    });
    assert!(!a.progressed() && !a.busy());
    let spec = preset("claude-code");
    let silent = |progressed| CallEnd { idle: true, progressed, ..CallEnd::default() };
    assert_eq!(classify("c", &spec, 1, &silent(false)).class, Some(FailureClass::Upstream));
    let charged = classify("c", &spec, 1, &silent(true));
    assert!(!charged.ok && charged.class.is_none(), "{charged:?}");
}

#[test]
fn a_vendor_that_never_answers_is_no_progress_however_the_program_ends_the_call() {
    // Claude Code's own request timeout: a retry notice, a synthetic assistant message and an
    // error result, none of them the model's word.
    let (stdout, stderr, code) = fixture!("claude-2.1.197", "stream-hang-own-timeout");
    let mut a = Activity::default();
    stdout.lines().for_each(|l| {
        a.observe(Kind::ClaudeCode, l);
    });
    assert!(!a.progressed(), "nothing the vendor said");
    let end = CallEnd {
        code: code.trim().parse().ok(),
        stdout: stdout.into(),
        stderr: stderr.into(),
        progressed: a.progressed(),
        ..CallEnd::default()
    };
    let o = classify("claude-code", &preset("claude-code"), 1_000, &end);
    assert_eq!(o.class, Some(FailureClass::Upstream), "{o:?}");
    assert!(o.error.as_deref().unwrap().contains("did not answer"), "{o:?}");
    // Codex killed by the watchdog while its vendor hangs: only the thread and turn started.
    let (stdout, _, _) = fixture!("codex-0.171.0", "json-hang");
    let mut a = Activity::default();
    stdout.lines().for_each(|l| {
        a.observe(Kind::Codex, l);
    });
    assert!(!a.progressed());
    let end = CallEnd { idle: true, stdout: stdout.into(), ..CallEnd::default() };
    let o = classify("codex", &preset("codex"), 1_000, &end);
    assert_eq!(o.class, Some(FailureClass::Upstream), "{o:?}");
    assert_eq!(o.error.as_deref(), Some("no progress for 5 min: the vendor did not answer"));
}

#[test]
fn progress_shows_sessions_tools_and_retries() {
    let (stdout, _, _) = fixture!("claude-2.1.197", "stream-write-file");
    let shown: Vec<Value> = stdout.lines().flat_map(|l| progress(Kind::ClaudeCode, l)).collect();
    assert_eq!(shown[0]["what"], "session");
    assert!(shown
        .iter()
        .any(|s| s["what"] == "tool" && s["tool"] == "Write" && s["summary"] == "<CWD>/hello.txt"));
    let (stdout, _, _) = fixture!("codex-0.171.0", "json-write-file");
    let shown: Vec<Value> = stdout.lines().flat_map(|l| progress(Kind::Codex, l)).collect();
    assert!(
        shown.iter().any(|s| s["tool"] == "edit" && s["summary"] == "<CWD>/hello.txt"),
        "{shown:?}"
    );
}

#[test]
fn logins_read_as_the_programs_print_them() {
    use crate::work::agent::{claude_login, codex_login};
    let (out, _, _) = fixture!("claude-2.1.197", "auth-status-logged-out");
    assert!(!claude_login(out).logged_in);
    let (helper, _, _) = fixture!("claude-2.1.197", "auth-status-logged-in");
    assert_eq!(claude_login(helper).api_key.as_deref(), Some("apiKeyHelper"));
    let (env, _, _) = fixture!("claude-2.1.197", "auth-status-api-key");
    assert_eq!(claude_login(env).api_key.as_deref(), Some("ANTHROPIC_API_KEY"));
    let (_, out, code) = fixture!("codex-0.171.0", "login-status-logged-out");
    assert!(!codex_login(out, code.trim().parse().ok()).logged_in);
    let (_, key, code) = fixture!("codex-0.171.0", "login-status-logged-in");
    let key = codex_login(key, code.trim().parse().ok());
    assert!(key.logged_in && key.api_key.is_some(), "{key:?}");
}

#[test]
fn each_adapter_puts_the_options_in_its_own_flags() {
    let schema = serde_json::json!({"type": "object"});
    let o = CallOptions {
        model: Some("sonnet"),
        effort: Some("high"),
        max_turns: None,
        access: Access::ReadOnly,
        schema: Some(&schema),
        schema_file: Some("/run/schema-a1.json"),
        resume: Some("s1"),
        writable: &[],
    };
    let claude = argv(Kind::ClaudeCode, &preset("claude-code").command, &o).join(" ");
    assert_eq!(
        claude,
        "claude -p --output-format stream-json --verbose --model sonnet --effort high \
         --max-turns 60 --permission-mode plan --json-schema {\"type\":\"object\"} --resume s1"
    );
    let codex = argv(Kind::Codex, &preset("codex").command, &o).join(" ");
    assert_eq!(
        codex,
        "codex exec --json --skip-git-repo-check --sandbox read-only -m sonnet \
         -c model_reasoning_effort=high --output-schema /run/schema-a1.json resume s1 -"
    );
    let roots = ["/r/.git/objects".to_owned(), "/r/.git/refs/heads/harn".to_owned()];
    let write = CallOptions { access: Access::Write, schema: None, writable: &roots, ..o };
    let codex = argv(Kind::Codex, &preset("codex").command, &write).join(" ");
    assert!(
        codex.contains(
            "--sandbox workspace-write -c sandbox_workspace_write.writable_roots=\
             [\"/r/.git/objects\",\"/r/.git/refs/heads/harn\"]"
        ),
        "{codex}"
    );
    let text = argv(Kind::Text, &["scripted".into()], &o);
    assert_eq!(text, ["scripted"], "a text harness gets its options from the environment");
    assert!(check_effort(Kind::ClaudeCode, "max").is_ok());
    assert!(check_effort(Kind::Codex, "max").unwrap_err().to_string().contains("minimal"));
    assert!(check_effort(Kind::Text, "anything").is_ok());
}

#[test]
fn a_usage_limit_that_names_its_reset_is_recorded_with_the_time() {
    // Codex run with `TZ=UTC`, as the preset runs it, against a ChatGPT plan's spent limit:
    // "… or try again at 2:00 AM." read at 01:00 is today's 02:00, read at 03:00 tomorrow's.
    let (stdout, stderr, code) = fixture!("codex-0.171.0", "json-usage-limit-reset");
    let at = |text: &str| crate::time::WallTime::parse_rfc3339(text).unwrap();
    let read_at = |now| {
        let end = CallEnd {
            code: Some(code.trim().parse().unwrap()),
            stdout: stdout.into(),
            stderr: stderr.into(),
            ended_at: at(now),
            ..CallEnd::default()
        };
        classify("codex", &preset("codex"), 1_000, &end)
    };
    let o = read_at("2026-12-08T01:00:00Z");
    assert_eq!(o.class, Some(FailureClass::Upstream), "{o:?}");
    assert_eq!(o.resets_at, Some(at("2026-12-08T02:00:00Z")), "{o:?}");
    assert!(o.error.unwrap().ends_with("it resets at 2026-12-08 02:00 UTC)"));
    assert_eq!(read_at("2026-12-08T03:00:00Z").resets_at, Some(at("2026-12-09T02:00:00Z")));
    // Without the moment the call ended, a clock time is not guessed at.
    assert_eq!(outcome("codex", (stdout, stderr, code)).resets_at, None);
    // Claude Code names a reset only for a claude.ai plan; with an API key the same refusal
    // (the unified rate-limit headers, status rejected) reads as plain rate limiting.
    let (stdout, stderr, code) = fixture!("claude-2.1.197", "stream-usage-limit-reset");
    let end = CallEnd {
        code: Some(code.trim().parse().unwrap()),
        stdout: stdout.into(),
        stderr: stderr.into(),
        ended_at: at("2026-12-08T01:00:00Z"),
        ..CallEnd::default()
    };
    let o = classify("claude-code", &preset("claude-code"), 1_000, &end);
    assert_eq!((o.class, o.resets_at), (Some(FailureClass::Upstream), None), "{o:?}");
}

#[test]
fn the_presets_run_in_utc_so_their_reset_times_read() {
    let o = CallOptions::default();
    for kind in [Kind::ClaudeCode, Kind::Codex] {
        assert!(env(kind, &o).contains(&("TZ", "UTC".to_owned())), "{kind:?}");
    }
    assert!(!env(Kind::Text, &o).iter().any(|(k, _)| *k == "TZ"));
}
