//! Agent adapters, decided purely: the built-in presets and declared adapters (an argv with
//! the prompt on stdin, read by its [`adapter`](super::adapter)), the pre-flight a run makes
//! before its first call to an adapter, and the one table that classifies how a call ended: a
//! reply, or a failure that is charged, environmental or upstream.

use super::adapter::{self, Denial, Kind, Usage};
use super::usage_limit;
use crate::error::RecordError;
use crate::text::{duration_words, measured_words};
use crate::time::WallTime;
use crate::work::projection::FailureClass;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Default time an agent call may take before its process group is killed.
pub(crate) const AGENT_TIMEOUT_MS: u64 = 30 * 60 * 1000;
/// Default time a call that streams its progress may go without a word before it is killed
/// as stuck (a dead network, a vendor that stopped answering).
pub(crate) const IDLE_TIMEOUT_MS: u64 = 5 * 60 * 1000;
/// Environment variables that let an agent program bill an account per token, or send its
/// calls elsewhere (another vendor, a cloud provider's endpoint); a run in `subscription`
/// billing removes them from every call and every workflow.
pub const API_KEY_VARS: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_BEDROCK_BASE_URL",
    "ANTHROPIC_VERTEX_BASE_URL",
    "ANTHROPIC_VERTEX_PROJECT_ID",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_USE_FOUNDRY",
    "AWS_BEARER_TOKEN_BEDROCK",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "CODEX_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_ENDPOINT",
    "AZURE_API_KEY",
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_GEMINI_BASE_URL",
    "GOOGLE_VERTEX_BASE_URL",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "VERTEXAI_API_KEY",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
    "OPENROUTER_API_KEY",
    "TOGETHER_API_KEY",
    "FIREWORKS_API_KEY",
];
/// Longest failure text kept: the tail of stderr, then stdout.
pub(crate) const FAILURE_TEXT_MAX: usize = 500;

/// An adapter, which users name with the word harness (`--harness`, a team's `harness` key,
/// `.harnery/config.json`): how to run one agent call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdapterSpec {
    /// The program and its arguments; the prompt arrives on stdin.
    pub command: Vec<String>,
    /// The command-line dialect it speaks: how options reach it and how its output is read.
    #[serde(default, skip_serializing_if = "is_text")]
    pub kind: Kind,
    /// Kill the call's process group after this long.
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
    /// Kill it after this long without a line of output (streaming dialects only).
    #[serde(default = "default_idle")]
    pub idle_timeout_ms: u64,
    /// Paths outside the workspace the program must write (its own state: sessions, logs,
    /// credentials being refreshed); `~/` is the home directory. A confined run may write
    /// these and nothing else outside its workspace and temporary directory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable: Vec<String>,
    /// The session mode an `acp` adapter starts each call's session in, when the agent
    /// offers it: one in which it asks before its tool calls, so the run's policy decides
    /// them (Claude Code's adapter starts in `auto`, which asks nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The `_meta` an `acp` adapter's sessions are asked for with: what an adapter reads
    /// there (Claude Code's adapter: whether its session may ever bypass permissions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_meta: Option<serde_json::Value>,
}

fn is_text(k: &Kind) -> bool {
    *k == Kind::Text
}

fn default_timeout() -> u64 {
    AGENT_TIMEOUT_MS
}

fn default_idle() -> u64 {
    IDLE_TIMEOUT_MS
}

impl AdapterSpec {
    /// A text adapter running `command`.
    pub fn text(command: Vec<String>, timeout_ms: u64) -> AdapterSpec {
        AdapterSpec {
            command,
            kind: Kind::Text,
            timeout_ms,
            idle_timeout_ms: IDLE_TIMEOUT_MS,
            writable: Vec::new(),
            mode: None,
            session_meta: None,
        }
    }
}

/// The built-in adapters, as the real programs are: `claude-code` (`claude -p` with its
/// stream of JSON events) and `codex` (`codex exec --json`, allowed outside a git repository;
/// `codex exec` refuses otherwise).
pub fn presets() -> BTreeMap<String, AdapterSpec> {
    let spec = |kind, argv: &[&str], writable: &[&str]| AdapterSpec {
        command: argv.iter().map(|s| s.to_string()).collect(),
        kind,
        timeout_ms: AGENT_TIMEOUT_MS,
        idle_timeout_ms: IDLE_TIMEOUT_MS,
        writable: writable.iter().map(|s| s.to_string()).collect(),
        mode: None,
        session_meta: None,
    };
    // Where each program keeps its state: Claude Code its sessions, settings and credentials
    // in ~/.claude and its account and project state in ~/.claude.json; Codex everything in
    // ~/.codex.
    BTreeMap::from([
        (
            "claude-code".to_owned(),
            spec(
                Kind::ClaudeCode,
                &["claude", "-p", "--output-format", "stream-json", "--verbose"],
                &["~/.claude", "~/.claude.json"],
            ),
        ),
        (
            "codex".to_owned(),
            spec(Kind::Codex, &["codex", "exec", "--json", "--skip-git-repo-check"], &["~/.codex"]),
        ),
        // Claude Code through its ACP adapter (`@agentclientprotocol/claude-agent-acp`),
        // whose `default` mode asks before every change, in a session that may never bypass
        // its permissions (a mode that asks nothing would take the policy out of the loop).
        (
            "claude-code-acp".to_owned(),
            AdapterSpec {
                mode: Some("default".to_owned()),
                session_meta: Some(serde_json::json!({
                    "claudeCode": {"options": {"allowDangerouslySkipPermissions": false}}
                })),
                ..spec(Kind::Acp, &["claude-agent-acp"], &["~/.claude", "~/.claude.json"])
            },
        ),
        // Gemini CLI speaks ACP itself (`gemini --acp`); its `default` mode asks before every
        // change. It keeps its login, settings and sessions in ~/.gemini.
        (
            "gemini".to_owned(),
            AdapterSpec {
                mode: Some("default".to_owned()),
                ..spec(Kind::Acp, &["gemini", "--acp"], &["~/.gemini"])
            },
        ),
    ])
}

/// Finds `name` among declared adapters, then the presets; declared ones shadow presets.
pub fn resolve(
    name: &str,
    declared: &BTreeMap<String, AdapterSpec>,
) -> Result<AdapterSpec, RecordError> {
    let spec = declared.get(name).cloned().or_else(|| presets().remove(name)).ok_or_else(|| {
        let mut known: Vec<String> = presets().into_keys().collect();
        known.extend(declared.keys().cloned());
        known.sort();
        known.dedup();
        RecordError::refused(format!("no harness {name:?} (known: {})", known.join(", ")))
    })?;
    let refuse = |what: &str| Err(RecordError::refused(format!("harness {name:?}: {what}")));
    if spec.command.first().is_none_or(|p| p.trim().is_empty()) {
        return refuse("command is empty");
    }
    if spec.timeout_ms == 0 || spec.idle_timeout_ms == 0 {
        return refuse("timeout_ms and idle_timeout_ms must be at least 1");
    }
    Ok(spec)
}

/// How an agent process ended, as the host saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallEnd {
    /// The program could not be found (ENOENT at spawn).
    pub missing: bool,
    /// Another spawn error.
    pub spawn_error: Option<String>,
    /// True when the host killed it for its timeout.
    pub timed_out: bool,
    /// True when the host killed it for saying nothing for its idle timeout.
    pub idle: bool,
    /// True when the host killed it because its run ended (the run's timeout, a cancel, a
    /// stop) while it was still running.
    pub stopped: bool,
    /// Why the host ended it for a reason of its own, and that failure's class: an ACP
    /// agent's tool call the policy asks a person about, an API key the run may not bill.
    pub refused: Option<(Option<FailureClass>, String)>,
    /// True when it had made progress before that (see [`adapter::Activity`]).
    pub progressed: bool,
    /// How long it ran, in ms.
    pub elapsed_ms: u64,
    /// Its exit code, when it exited.
    pub code: Option<i32>,
    /// Its stdout.
    pub stdout: String,
    /// Its stderr.
    pub stderr: String,
    /// The wall clock when it ended (0 when the host does not say): what a clock time in
    /// its words, such as when a usage limit resets, is read against.
    pub ended_at: WallTime,
}

/// The outcome of an agent call.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallOutcome {
    /// True when the reply is usable.
    pub ok: bool,
    /// The reply, on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A failure that does not charge the attempt budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<FailureClass>,
    /// The vendor's session, to continue it or to find it in the vendor's records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Tokens, turns and cost, when the program reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Tool uses the program's permissions refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denials: Vec<Denial>,
    /// How long the call took, in ms (the host's measure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_ms: Option<u64>,
    /// True when the call was still running when its run ended, and was killed with it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stopped: bool,
    /// When the usage limit that refused it resets, when its words say (see
    /// [`usage_limit::resets_at`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resets_at: Option<WallTime>,
}

impl CallOutcome {
    /// A usable reply.
    pub fn replied(text: impl Into<String>) -> CallOutcome {
        CallOutcome { ok: true, text: Some(text.into()), ..CallOutcome::default() }
    }

    /// A failure, uncharged when it has a class.
    pub fn failed(error: impl Into<String>, class: Option<FailureClass>) -> CallOutcome {
        CallOutcome { ok: false, error: Some(error.into()), class, ..CallOutcome::default() }
    }
}

/// How to install each preset's program, for the message of a call that found it missing.
fn install_hint(kind: Kind) -> &'static str {
    match kind {
        Kind::ClaudeCode => "; install it with `npm install -g @anthropic-ai/claude-code`",
        Kind::Codex => "; install it with `npm install -g @openai/codex`",
        Kind::Acp => "; install the agent's ACP program (Gemini CLI: `npm install -g @google/gemini-cli`; Claude Code's adapter: `npm install -g @agentclientprotocol/claude-agent-acp`)",
        Kind::Text => "",
    }
}

/// What to run to log in, for each preset.
pub(crate) fn login_hint(kind: Kind) -> &'static str {
    match kind {
        Kind::ClaudeCode => "run `claude auth login` (or `claude` and /login)",
        Kind::Codex => "run `codex login`",
        Kind::Acp => "log the program in (Gemini CLI: run `gemini` and choose Log in with Google; Claude Code's adapter: `claude auth login`)",
        Kind::Text => "log the program in",
    }
}

/// One row of the classification table: phrases (lowercase) any of which, found in a failed
/// call's own words, decide its class.
struct Row {
    /// Which failure this is, in words.
    what: &'static str,
    /// `None`: charged, the agent's own outcome.
    class: Option<FailureClass>,
    phrases: &'static [&'static str],
}

/// The classification of a failed call, first match wins. Each row is checked against the
/// real programs' texts in the tests below.
/// The row of a usage or spend limit: its words may say when it resets.
const USAGE_LIMIT: &str = "a usage or spend limit is reached";

const TABLE: &[Row] = &[
    Row {
        what: "the agent reached its turn limit",
        class: None,
        phrases: &[
            "reached max turns",
            "error_max_turns",
            "max turns reached",
            "maximum number of turns",
        ],
    },
    Row {
        what: "not logged in",
        class: Some(FailureClass::Environment),
        phrases: &[
            "not logged in",
            "please run /login",
            "please log in",
            "no credentials",
            "login required",
            "didn't provide an api key",
            "api key is missing",
            "authentication required",
        ],
    },
    Row {
        what: "the credentials were refused",
        class: Some(FailureClass::Environment),
        phrases: &[
            "invalid api key",
            "api key not valid",
            "invalid x-api-key",
            "incorrect api key",
            "invalid_api_key",
            "authentication_error",
            "authentication failed",
            "unauthorized",
            "401",
            "permission_error",
            "forbidden",
            "403",
            "oauth token has expired",
            "token expired",
        ],
    },
    Row {
        what: "the vendor did not answer in time",
        class: Some(FailureClass::Upstream),
        phrases: &[
            "request timed out",
            "idle timeout",
            "timed out waiting",
            "timeout waiting",
            "deadline exceeded",
        ],
    },
    Row {
        what: "there is no network",
        class: Some(FailureClass::Environment),
        phrases: &[
            "waiting for network",
            "network error",
            "network is unreachable",
            "connection refused",
            "econnrefused",
            "enotfound",
            "getaddrinfo",
            "could not resolve",
            "failed to connect",
            "error sending request",
            "fetch failed",
            "unable to connect",
            "connection failed",
            "stream disconnected",
            "connection error",
        ],
    },
    Row {
        what: USAGE_LIMIT,
        class: Some(FailureClass::Upstream),
        phrases: &[
            "usage limit",
            "spend limit",
            "spending limit",
            "credit balance is too low",
            "insufficient_quota",
            "exceeded your current quota",
            "quota exceeded",
            "resource_exhausted",
            "out of credits",
        ],
    },
    Row {
        what: "the vendor is rate limiting or overloaded",
        class: Some(FailureClass::Upstream),
        phrases: &[
            "rate limit",
            "rate-limit",
            "rate_limit",
            "too many requests",
            "429",
            "overloaded",
            "529",
            "high demand",
            "at capacity",
            "exceeded retry limit",
            "retry limit",
            "service unavailable",
            "bad gateway",
            "gateway timeout",
            "internal server error",
            "server_error",
            "api_error",
            "500",
            "502",
            "503",
            "504",
            "circuit open",
        ],
    },
];

/// The row a failure's words match, if any. Numbers match only as whole numbers.
fn table_row(text: &str) -> Option<&'static Row> {
    let lower = text.to_lowercase();
    let numbers: Vec<&str> =
        lower.split(|c: char| !c.is_ascii_digit()).filter(|n| !n.is_empty()).collect();
    TABLE.iter().find(|row| {
        row.phrases.iter().any(|p| {
            if p.bytes().all(|b| b.is_ascii_digit()) {
                numbers.contains(p)
            } else {
                lower.contains(p)
            }
        })
    })
}

/// Classifies a call: a missing program is the environment; a streaming call that made no
/// progress (no model output, no tool activity) before a watchdog, its timeout, its run's end
/// or its own timeout ended it is the vendor's outage (uncharged), unless its words say the
/// network is down; a call that had made progress and was killed for its timeout is charged;
/// otherwise the program's output is read by its adapter, and a failure's words go through
/// [`TABLE`].
pub fn classify(adapter: &str, spec: &AdapterSpec, timeout_ms: u64, end: &CallEnd) -> CallOutcome {
    let kind = spec.kind;
    if end.missing {
        let error = format!(
            "{adapter}: the program {} is not installed{}",
            spec.command[0],
            install_hint(kind)
        );
        return CallOutcome::failed(error, Some(FailureClass::Environment));
    }
    if let Some(e) = &end.spawn_error {
        let error = format!("{adapter}: could not start: {e}");
        return CallOutcome::failed(error, Some(FailureClass::Environment));
    }
    let reading = adapter::read(kind, &end.stdout);
    if let Some((class, why)) = &end.refused {
        let mut o = CallOutcome::failed(format!("{adapter}: {why}"), *class);
        o.session_id = reading.session_id;
        o.usage = reading.usage;
        return o;
    }
    let with_reading = |mut o: CallOutcome| {
        o.session_id = reading.session_id.clone();
        o.usage = reading.usage.clone();
        o.denials = reading.denials.clone();
        o.stopped = end.stopped;
        o
    };
    let said = failure_text(&end.stderr, reading.error.as_deref().unwrap_or(""));
    let network = table_row(&said).filter(|row| row.class == Some(FailureClass::Environment));
    // Only a program that streams its progress can be judged by it.
    let streaming = kind != Kind::Text;
    let silent = streaming && !end.progressed;
    let killed_for = if end.timed_out {
        Some(duration_words(timeout_ms))
    } else if end.idle {
        Some(duration_words(spec.idle_timeout_ms))
    } else if end.stopped {
        Some(measured_words(end.elapsed_ms))
    } else {
        None
    };
    if let Some(limit) = killed_for {
        let how = if end.stopped { " before its run ended" } else { "" };
        let (class, error) = match network {
            Some(row) => (row.class, format!("{adapter}: {}: {said}", row.what)),
            None if silent => (
                Some(FailureClass::Upstream),
                format!("no progress for {limit}{how}: the vendor did not answer"),
            ),
            // It had been working: retrying it at once would spend the same tokens again.
            None if end.timed_out => {
                (None, format!("{adapter} timed out after {timeout_ms} ms and was killed"))
            }
            None if end.stopped => {
                (None, format!("{adapter} was still working when its run ended"))
            }
            None => {
                (None, format!("{adapter} fell silent after it had begun ({limit} without a word)"))
            }
        };
        let error = if said.is_empty() || error.ends_with(&said) {
            error
        } else {
            format!("{error} ({said})")
        };
        return with_reading(CallOutcome::failed(error, class));
    }
    if (end.code == Some(0) || reading.complete) && reading.error.is_none() {
        if let Some(reply) = &reading.reply {
            return with_reading(CallOutcome::replied(reply.clone()));
        }
    }
    // An ending without a word of the model's (Claude Code's own request timeout ends in a
    // `success` result with no text and no cost) is the vendor's silence, not a reply.
    let wordless = end.code == Some(0) || end.stderr.trim().is_empty();
    if silent && wordless && reading.reply.is_none() && table_row(&said).is_none() {
        let error = format!(
            "no progress in {}: the vendor did not answer ({adapter} ended without a reply)",
            measured_words(end.elapsed_ms)
        );
        return with_reading(CallOutcome::failed(error, Some(FailureClass::Upstream)));
    }
    let own = reading.error.clone().unwrap_or_default();
    let stdout = if kind == Kind::Text { end.stdout.as_str() } else { "" };
    let (text, row) = match own.is_empty() {
        true => {
            let text = failure_text(&end.stderr, stdout);
            let row = table_row(&text);
            (text, row)
        }
        // The program's own last word decides first: its stderr holds retries and
        // reconnects that say little about why it finally gave up.
        false => (failure_text("", &own), table_row(&own).or_else(|| table_row(&end.stderr))),
    };
    let code = match end.code {
        _ if reading.complete => "ended its turn".to_owned(),
        Some(0) if kind != Kind::Text => "no reply".to_owned(),
        Some(c) => format!("exited with code {c}"),
        None => "was killed by a signal".to_owned(),
    };
    let (class, hint) = match row {
        Some(row)
            if row.what.starts_with("not logged in") || row.what.starts_with("the credentials") =>
        {
            (row.class, format!(" ({}: {})", row.what, login_hint(kind)))
        }
        Some(row) if row.what == USAGE_LIMIT => {
            // The presets run their programs with `TZ=UTC` (see `adapter::env`), so a clock
            // time they name without a zone is UTC.
            let utc = matches!(kind, Kind::ClaudeCode | Kind::Codex);
            let words =
                if own.is_empty() { text.clone() } else { format!("{own}\n{}", end.stderr) };
            let reset = (end.ended_at.0 > 0)
                .then(|| usage_limit::resets_at(&words, end.ended_at, utc))
                .flatten();
            let mut o = CallOutcome::failed(
                match reset {
                    Some(at) => format!(
                        "{adapter} {code}: {text} ({}; it resets at {} UTC)",
                        row.what,
                        minute(at)
                    ),
                    None => format!("{adapter} {code}: {text} ({})", row.what),
                },
                row.class,
            );
            o.resets_at = reset;
            return with_reading(o);
        }
        Some(row) => (row.class, format!(" ({})", row.what)),
        None => (None, String::new()),
    };
    with_reading(CallOutcome::failed(format!("{adapter} {code}: {text}{hint}"), class))
}

/// `YYYY-MM-DD HH:MM`, the minute a person reads a reset at.
fn minute(at: WallTime) -> String {
    at.utc()[..16].to_owned()
}

/// What an adapter's own status command says of its login (`claude auth status --json`,
/// `codex login status`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Login {
    /// True when the program has credentials at all.
    pub logged_in: bool,
    /// When it would bill an API key per token, where that key comes from (`apiKeyHelper`,
    /// `ANTHROPIC_API_KEY`, `auth.json`).
    pub api_key: Option<String>,
    /// The method in the program's words, for messages.
    pub method: String,
}

/// Reads `claude auth status --json`: `loggedIn`, `authMethod` and, for a key, `apiKeySource`.
pub fn claude_login(stdout: &str) -> Login {
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap_or_default();
    let method = v["authMethod"].as_str().unwrap_or("none").to_owned();
    let key_source = v["apiKeySource"].as_str().map(str::to_owned);
    let api_key = match method.as_str() {
        "api_key" | "apiKey" | "api-key" => Some(key_source.unwrap_or_else(|| method.clone())),
        _ => key_source.filter(|s| !s.is_empty() && s != "none"),
    };
    Login { logged_in: v["loggedIn"] == true, api_key, method }
}

/// Gemini CLI's login, from what it reads itself: its Google login
/// (`~/.gemini/oauth_creds.json`, a subscription), else an API key or a gateway in the
/// environment its calls get (`key`: the variable's name), billed per token.
pub fn gemini_login(oauth: bool, key: Option<&str>) -> Login {
    match (oauth, key) {
        (true, _) => Login { logged_in: true, api_key: None, method: "oauth-personal".into() },
        (false, Some(var)) => {
            Login { logged_in: true, api_key: Some(var.to_owned()), method: var.to_owned() }
        }
        (false, None) => Login { logged_in: false, api_key: None, method: "none".into() },
    }
}

/// Reads `codex login status` (0.171 prints it on stderr): `Not logged in` (exit 1), `Logged in
/// using ChatGPT`, or `API key configured - ***` for a key in `auth.json`.
pub fn codex_login(output: &str, code: Option<i32>) -> Login {
    let lower = output.to_lowercase();
    // `Logged in using ChatGPT`, or `API key configured - ***` for a key in `auth.json`.
    let logged_in = code == Some(0) && !lower.contains("not logged in");
    let api_key = (logged_in && lower.contains("api key")).then(|| "auth.json".to_owned());
    let method = output
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.starts_with("WARNING"))
        .unwrap_or("")
        .to_owned();
    Login { logged_in, api_key, method }
}

/// The pre-flight of a run's first call to an adapter: the program must be there, logged in,
/// and billing as the run allows. `login` is `None` for a text adapter (nothing to ask).
/// The failure, saying what to do, is an environment failure of every call to the adapter:
/// [`preflight_failure`].
pub fn preflight(
    adapter: &str,
    spec: &AdapterSpec,
    found: bool,
    login: Option<&Login>,
    allow_api_billing: bool,
) -> Result<(), RecordError> {
    let env = |why: String| Err(RecordError::refused(why));
    if !found {
        return env(format!(
            "{adapter}: the program {} is not installed{}",
            spec.command[0],
            install_hint(spec.kind)
        ));
    }
    let Some(login) = login else { return Ok(()) };
    if !login.logged_in {
        return env(format!("{adapter} is not logged in: {}", login_hint(spec.kind)));
    }
    if let (Some(source), false) = (&login.api_key, allow_api_billing) {
        return env(format!(
            "{adapter} would bill an API key ({source}) per token, and this run bills the \
             subscription only: log in with the subscription, or pass --allow-api-billing"
        ));
    }
    Ok(())
}

/// The outcome of a call whose adapter failed its pre-flight: never charged.
pub fn preflight_failure(error: &str) -> CallOutcome {
    CallOutcome::failed(error, Some(FailureClass::Environment))
}

/// The tail of stderr then stdout, at most [`FAILURE_TEXT_MAX`] bytes.
fn failure_text(stderr: &str, stdout: &str) -> String {
    let joined = format!("{} {}", stderr.trim(), stdout.trim());
    let joined = joined.trim();
    let mut start = joined.len().saturating_sub(FAILURE_TEXT_MAX);
    while !joined.is_char_boundary(start) {
        start += 1;
    }
    joined[start..].to_owned()
}

/// The class of a failed run (the run's own class aside): a run in which any agent call
/// succeeded did real work and is charged; otherwise an environment failure among the calls
/// wins over an upstream one.
pub(crate) fn run_class(calls: &[CallOutcome]) -> Option<FailureClass> {
    if calls.is_empty() || calls.iter().any(|c| c.ok) {
        return None;
    }
    let has = |class| calls.iter().any(|c| c.class == Some(class));
    if has(FailureClass::Environment) {
        Some(FailureClass::Environment)
    } else if has(FailureClass::Upstream) {
        Some(FailureClass::Upstream)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(code: Option<i32>, stderr: &str) -> CallEnd {
        CallEnd { code, stdout: "out".into(), stderr: stderr.into(), ..CallEnd::default() }
    }

    fn text_spec() -> AdapterSpec {
        AdapterSpec::text(vec!["h".into()], 9)
    }

    fn class_of(kind: Kind, stdout: &str, stderr: &str, code: i32) -> Option<FailureClass> {
        let spec = AdapterSpec { kind, ..text_spec() };
        let end = CallEnd {
            code: Some(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
            ..CallEnd::default()
        };
        let o = classify("h", &spec, 9, &end);
        assert!(!o.ok, "{stdout} {stderr}: {o:?}");
        o.class
    }

    #[test]
    fn presets_resolve_and_declared_harnesses_shadow_them() {
        let mut declared = BTreeMap::new();
        let codex = resolve("codex", &declared).unwrap();
        assert_eq!((codex.command[0].as_str(), codex.kind), ("codex", Kind::Codex));
        assert!(codex.command.contains(&"--skip-git-repo-check".to_owned()));
        assert_eq!(resolve("claude-code", &declared).unwrap().kind, Kind::ClaudeCode);
        declared.insert("codex".into(), AdapterSpec::text(vec!["./fake".into()], 5));
        assert_eq!(resolve("codex", &declared).unwrap().command[0], "./fake");
        assert!(resolve("nope", &declared).unwrap_err().to_string().contains("claude-code"));
        declared.insert("empty".into(), AdapterSpec::text(vec![], 5));
        assert!(resolve("empty", &declared).unwrap_err().to_string().contains("command is empty"));
    }

    #[test]
    fn gemini_speaks_acp_and_its_login_says_how_it_would_bill() {
        let gemini = resolve("gemini", &BTreeMap::new()).unwrap();
        assert_eq!((gemini.kind, gemini.command.join(" ")), (Kind::Acp, "gemini --acp".into()));
        assert_eq!(
            (gemini.mode.as_deref(), &gemini.writable[..]),
            (Some("default"), &["~/.gemini".to_owned()][..])
        );
        let google = gemini_login(true, Some("GEMINI_API_KEY"));
        assert!(google.logged_in && google.api_key.is_none(), "its Google login wins");
        let key = gemini_login(false, Some("GEMINI_API_KEY"));
        assert_eq!((key.logged_in, key.api_key.as_deref()), (true, Some("GEMINI_API_KEY")));
        let spec = &gemini;
        let refused = preflight("gemini", spec, true, Some(&key), false).unwrap_err().to_string();
        assert!(refused.contains("would bill an API key (GEMINI_API_KEY)"), "{refused}");
        assert!(preflight("gemini", spec, true, Some(&key), true).is_ok());
        let none = preflight("gemini", spec, true, Some(&gemini_login(false, None)), true);
        assert!(none.unwrap_err().to_string().contains("Log in with Google"));
        assert!(API_KEY_VARS.contains(&"GOOGLE_GEMINI_BASE_URL"), "a gateway is another account");
    }

    #[test]
    fn each_ending_gets_its_class() {
        let spec = text_spec();
        let ok = classify("h", &spec, 9, &end(Some(0), ""));
        assert_eq!((ok.ok, ok.text.as_deref()), (true, Some("out")));
        let missing = CallEnd { missing: true, ..end(None, "") };
        assert_eq!(classify("h", &spec, 9, &missing).class, Some(FailureClass::Environment));
        let timed_out = CallEnd { timed_out: true, ..end(Some(0), "") };
        let t = classify("h", &spec, 9, &timed_out);
        // A text adapter is judged by its timeout alone: charged.
        assert!(!t.ok && t.class.is_none() && t.error.unwrap().contains("timed out after 9 ms"));
        let plain = classify("h", &spec, 9, &end(Some(1), "compile error in main.rs"));
        assert_eq!(plain.class, None);
        assert!(plain.error.unwrap().contains("compile error in main.rs out"));
    }

    #[test]
    fn the_table_with_the_real_programs_words() {
        use FailureClass::{Environment as Env, Upstream as Up};
        let rows: &[(&str, Option<FailureClass>)] = &[
            ("Not logged in · Please run /login", Some(Env)),
            // Gemini CLI 0.61: `session/new` without a key, and the API's refusals.
            ("Gemini API key is missing or not configured.", Some(Env)),
            ("Authentication required", Some(Env)),
            ("API key not valid. Please pass a valid API key.", Some(Env)),
            ("RESOURCE_EXHAUSTED: Quota exceeded for metric", Some(Up)),
            ("Invalid API key · Fix external API key", Some(Env)),
            (
                r#"API Error: 401 {"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
                Some(Env),
            ),
            ("unexpected status 401 Unauthorized: Incorrect API key provided", Some(Env)),
            (
                r#"API Error: 403 {"type":"error","error":{"type":"permission_error","message":"forbidden"}}"#,
                Some(Env),
            ),
            ("stream disconnected before completion: error sending request for url", Some(Env)),
            ("Reconnecting... 1/5 (stream disconnected before completion)", Some(Env)),
            ("API Error: Connection error.", Some(Env)),
            (
                r#"API Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"rate limited"}}"#,
                Some(Up),
            ),
            (
                r#"API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                Some(Up),
            ),
            (
                "We're currently experiencing high demand, which may cause temporary errors.",
                Some(Up),
            ),
            ("exceeded retry limit, last status: 500 Internal Server Error", Some(Up)),
            ("API Error: 500 Internal server error", Some(Up)),
            ("Your credit balance is too low to access the Anthropic API.", Some(Up)),
            (
                "You exceeded your current quota, please check your plan and billing details.",
                Some(Up),
            ),
            ("You've hit your usage limit.", Some(Up)),
            ("Error: Reached max turns (2)", None),
            ("the tests failed: 3 of 40", None),
        ];
        for (words, class) in rows {
            assert_eq!(class_of(Kind::Text, "", words, 1), *class, "{words}");
        }
    }

    #[test]
    fn a_login_failure_says_what_to_run() {
        let spec = AdapterSpec { kind: Kind::ClaudeCode, ..text_spec() };
        let stdout = r#"{"type":"result","subtype":"success","is_error":true,"result":"Not logged in · Please run /login","session_id":"s1","num_turns":1,"total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0},"permission_denials":[]}"#;
        let o = classify(
            "claude-code",
            &spec,
            9,
            &CallEnd { code: Some(1), stdout: stdout.into(), ..CallEnd::default() },
        );
        assert_eq!(o.class, Some(FailureClass::Environment));
        assert!(o.error.as_deref().unwrap().contains("claude auth login"), "{o:?}");
        assert_eq!(o.session_id.as_deref(), Some("s1"));
    }

    #[test]
    fn a_silent_call_killed_by_the_watchdog_is_never_charged() {
        let spec = AdapterSpec { kind: Kind::Codex, idle_timeout_ms: 7, ..text_spec() };
        let idle = |stderr: &str| {
            classify(
                "codex",
                &spec,
                9,
                &CallEnd { idle: true, stderr: stderr.into(), ..CallEnd::default() },
            )
        };
        let net = idle(
            "Reconnecting... 2/5 (stream disconnected before completion: error sending request)",
        );
        assert_eq!(net.class, Some(FailureClass::Environment), "{net:?}");
        assert!(net.error.unwrap().contains("there is no network"));
        let hung = idle("");
        assert_eq!(hung.class, Some(FailureClass::Upstream));
        assert_eq!(hung.error.as_deref(), Some("no progress for 7 ms: the vendor did not answer"));
        let five = AdapterSpec { idle_timeout_ms: 300_000, ..spec.clone() };
        let end = CallEnd { idle: true, ..CallEnd::default() };
        let o = classify("codex", &five, 9, &end);
        assert_eq!(o.error.as_deref(), Some("no progress for 5 min: the vendor did not answer"));
        let worked = CallEnd { idle: true, progressed: true, ..CallEnd::default() };
        assert_eq!(classify("codex", &spec, 9, &worked).class, None, "it had begun: charged");
    }

    #[test]
    fn a_call_that_never_got_going_is_the_vendors_however_it_ended() {
        let claude = AdapterSpec { kind: Kind::ClaudeCode, ..text_spec() };
        // Claude Code's own request timeout: a `success` result, no text, no cost.
        let empty = r#"{"type":"result","subtype":"success","is_error":false,"result":"","session_id":"s","num_turns":0,"total_cost_usd":0,"usage":{}}"#;
        let end = CallEnd {
            code: Some(0),
            stdout: empty.into(),
            elapsed_ms: 300_000,
            ..CallEnd::default()
        };
        let o = classify("claude-code", &claude, 9, &end);
        assert!(!o.ok, "an empty result is not a success: {o:?}");
        assert_eq!(o.class, Some(FailureClass::Upstream));
        assert!(o.error.unwrap().starts_with("no progress in 5 min: the vendor did not answer"));
        // Its own timeout, or its run's end, before a word: uncharged and marked stopped.
        let timed = CallEnd { timed_out: true, ..CallEnd::default() };
        assert_eq!(classify("c", &claude, 60_000, &timed).class, Some(FailureClass::Upstream));
        let stopped = CallEnd { stopped: true, elapsed_ms: 90_000, ..CallEnd::default() };
        let o = classify("c", &claude, 9, &stopped);
        assert_eq!(o.class, Some(FailureClass::Upstream));
        assert!(o.stopped);
        assert_eq!(
            o.error.as_deref(),
            Some("no progress for 90 s before its run ended: the vendor did not answer")
        );
        // Once it had begun, the same endings are charged.
        let busy = CallEnd { stopped: true, progressed: true, ..CallEnd::default() };
        assert_eq!(classify("c", &claude, 9, &busy).class, None);
        let busy = CallEnd { timed_out: true, progressed: true, ..CallEnd::default() };
        assert_eq!(classify("c", &claude, 9, &busy).class, None);
        // A text adapter is never judged by its silence.
        let text = CallEnd { code: Some(0), ..CallEnd::default() };
        assert!(classify("t", &text_spec(), 9, &text).ok);
    }

    #[test]
    fn preflight_wants_the_program_a_login_and_the_billing_the_run_allows() {
        let spec = AdapterSpec { kind: Kind::ClaudeCode, ..text_spec() };
        let missing = preflight("c", &spec, false, None, false).unwrap_err().to_string();
        assert!(missing.contains("npm install -g @anthropic-ai/claude-code"), "{missing}");
        assert_eq!(preflight_failure(&missing).class, Some(FailureClass::Environment));
        let out = Login { logged_in: false, ..Login::default() };
        let e = preflight("c", &spec, true, Some(&out), false).unwrap_err().to_string();
        assert!(e.contains("claude auth login"));
        let key = Login {
            logged_in: true,
            api_key: Some("apiKeyHelper".into()),
            method: "api_key".into(),
        };
        let e = preflight("c", &spec, true, Some(&key), false).unwrap_err().to_string();
        assert!(e.contains("--allow-api-billing"), "{e:?}");
        assert_eq!(preflight("c", &spec, true, Some(&key), true), Ok(()));
        let sub = Login { logged_in: true, api_key: None, method: "claude.ai".into() };
        assert_eq!(preflight("c", &spec, true, Some(&sub), false), Ok(()));
        assert_eq!(preflight("t", &text_spec(), true, None, false), Ok(()));
    }

    #[test]
    fn login_status_is_read_as_each_program_prints_it() {
        let out = claude_login(
            r#"{"loggedIn": false, "authMethod": "none", "apiProvider": "firstParty"}"#,
        );
        assert!(!out.logged_in && out.api_key.is_none());
        let codex = codex_login("Not logged in\n", Some(1));
        assert!(!codex.logged_in);
        let key = codex_login("Logged in using an API key - sk-proj-***ABCD\n", Some(0));
        assert!(key.logged_in && key.api_key.is_some());
        let chatgpt = codex_login("Logged in using ChatGPT\n", Some(0));
        assert!(chatgpt.logged_in && chatgpt.api_key.is_none());
    }

    #[test]
    fn a_run_is_uncharged_only_when_no_call_did_real_work() {
        let outcome = |ok, class| CallOutcome { ok, class, ..CallOutcome::default() };
        assert_eq!(run_class(&[]), None);
        let env = outcome(false, Some(FailureClass::Environment));
        let up = outcome(false, Some(FailureClass::Upstream));
        assert_eq!(run_class(&[up.clone(), env.clone()]), Some(FailureClass::Environment));
        assert_eq!(run_class(std::slice::from_ref(&up)), Some(FailureClass::Upstream));
        assert_eq!(run_class(&[outcome(true, None), env]), None);
        assert_eq!(run_class(&[outcome(false, None), up]), Some(FailureClass::Upstream));
    }

    #[test]
    fn failure_text_keeps_the_tail() {
        let long = "e".repeat(2 * FAILURE_TEXT_MAX);
        assert_eq!(failure_text(&long, "last").len(), FAILURE_TEXT_MAX);
        assert!(failure_text(&long, "last").ends_with("last"));
    }
}
