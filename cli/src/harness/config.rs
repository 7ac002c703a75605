//! `harness.toml`: parsing and validation into the core's `DaemonConfig`. Every error names
//! the file, the line and the key; nothing is applied from a file that fails.

use harn_core::env::{SpawnSpec, TtySize};
use harn_core::harness::daemon::{DaemonConfig, Profile};
use harn_core::harness::lifecycle::{HarnessSpec, LifecycleLimits, Readiness, RestartPolicy};
use harn_core::ids::Id;
use harn_core::journal::Retention;
use harn_core::time::Duration;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// A configuration that was refused, with where and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file.
    pub file: PathBuf,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The dotted key the problem is about, when known.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ": {key}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    limits: RawLimits,
    #[serde(default)]
    retention: RawRetention,
    #[serde(default)]
    harness: BTreeMap<String, toml::Spanned<RawHarness>>,
    #[serde(default)]
    profile: BTreeMap<String, toml::Spanned<RawProfile>>,
}

/// `[retention]`: when the daemon's files (events, ledger, daemon.log, harness logs) rotate.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawRetention {
    max_file_bytes: Option<u64>,
    rotated_kept: Option<u32>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    flap_threshold: Option<u32>,
    flap_window_ms: Option<u64>,
    restart_delay_ms: Option<u64>,
    restart_delay_max_ms: Option<u64>,
    give_up_after: Option<u32>,
    healthy_run_ms: Option<u64>,
    stop_grace_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHarness {
    command: Vec<String>,
    cwd: Option<String>,
    user: Option<String>,
    group: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    restart: RestartPolicy,
    restart_delay_ms: Option<u64>,
    stop_grace_ms: Option<u64>,
    #[serde(default)]
    readiness: RawReadiness,
    ready_timeout_ms: Option<u64>,
    readiness_recheck_ms: Option<u64>,
    watchdog_ms: Option<u64>,
    #[serde(default)]
    requires: Vec<String>,
    #[serde(default)]
    after: Vec<String>,
    flap_threshold: Option<u32>,
    flap_window_ms: Option<u64>,
    give_up_after: Option<u32>,
    healthy_run_ms: Option<u64>,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    tty: bool,
    tty_size: Option<[u16; 2]>,
    /// `MemoryMax=`: `"512M"`, `"8G"`, or a number of bytes.
    memory_max: Option<toml::Value>,
    /// `TasksMax=`.
    tasks_max: Option<u64>,
    /// `CPUWeight=`, 1 to 10000.
    cpu_weight: Option<u32>,
}

fn yes() -> bool {
    true
}

/// `readiness = "none" | "notify"`, or `{ file = "path" }`, or `{ probe = ["cmd", …] }`.
#[derive(Deserialize, Default)]
#[serde(untagged)]
enum RawReadiness {
    #[default]
    #[serde(skip)]
    Absent,
    Word(ReadinessWord),
    File {
        file: String,
    },
    Probe {
        probe: Vec<String>,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum ReadinessWord {
    None,
    Notify,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    harnesses: Vec<String>,
    #[serde(default)]
    autostart: bool,
}

/// Reads and validates `file`, refusing one another user owns (its commands would run as
/// this user) unless git's `safe.directory` names its directory.
pub fn load(file: &Path) -> Result<DaemonConfig, ConfigError> {
    let dir = file.parent().unwrap_or(Path::new("/"));
    crate::os::root::check_file_owner(dir, file, "the harness configuration")
        .map_err(|e| ConfigError { file: file.to_owned(), line: None, key: None, message: e })?;
    let text =
        crate::input::read_text(file, crate::input::CONFIG_MAX).map_err(|e| ConfigError {
            file: file.to_owned(),
            line: None,
            key: None,
            message: e.strip_prefix(&format!("{}: ", file.display())).unwrap_or(&e).to_owned(),
        })?;
    parse(file, &text)
}

/// Parses and validates the text of `file`.
pub fn parse(file: &Path, text: &str) -> Result<DaemonConfig, ConfigError> {
    let at =
        |span: Option<std::ops::Range<usize>>, key: Option<String>, message: String| ConfigError {
            file: file.to_owned(),
            line: span.map(|s| line_of(text, s.start)),
            key,
            message,
        };
    let raw: RawConfig =
        toml::from_str(text).map_err(|e| at(e.span(), None, e.message().to_owned()))?;
    let limits = limits(&raw.limits).map_err(|(key, message)| at(None, Some(key), message))?;
    let retention = retention(&raw.retention).map_err(|(key, m)| at(None, Some(key), m))?;
    let mut config = DaemonConfig { limits, retention, ..DaemonConfig::default() };
    for (name, spanned) in &raw.harness {
        let span = Some(spanned.span());
        let id = Id::new(name)
            .map_err(|e| at(span.clone(), Some(format!("harness.{name}")), e.to_string()))?;
        let spec = harness(name, spanned.get_ref(), &config.limits)
            .map_err(|(key, message)| at(span.clone(), Some(key), message))?;
        config.harnesses.insert(id, spec);
    }
    // `requires` waits for readiness, which a harness with none never proves.
    for (name, spanned) in &raw.harness {
        let Some(spec) = Id::new(name).ok().and_then(|id| config.harnesses.get(&id)) else {
            continue;
        };
        let unproven = spec
            .requires
            .iter()
            .find(|dep| config.harnesses.get(*dep).is_some_and(|d| d.readiness == Readiness::None));
        if let Some(dep) = unproven {
            let why = format!(
                "\"{dep}\" has readiness = \"none\", so nothing proves it ready (a live pid is \
                 not readiness): give {dep} a readiness (notify, a file or a probe), or order \
                 this harness after it with after = [\"{dep}\"]"
            );
            return Err(at(Some(spanned.span()), Some(format!("harness.{name}.requires")), why));
        }
    }
    for (name, spanned) in &raw.profile {
        let span = Some(spanned.span());
        let key = format!("profile.{name}");
        let id = Id::new(name).map_err(|e| at(span.clone(), Some(key.clone()), e.to_string()))?;
        let mut members = Vec::new();
        for member in &spanned.get_ref().harnesses {
            let key = format!("{key}.harnesses");
            let m =
                Id::new(member).map_err(|e| at(span.clone(), Some(key.clone()), e.to_string()))?;
            if !config.harnesses.contains_key(&m) {
                return Err(at(span.clone(), Some(key), format!("no harness named {member:?}")));
            }
            members.push(m);
        }
        config
            .profiles
            .insert(id, Profile { harnesses: members, autostart: spanned.get_ref().autostart });
    }
    config.validate().map_err(|refused| at(None, None, refused.to_string()))?;
    Ok(config)
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())].iter().filter(|&&b| b == b'\n').count() + 1
}

type FieldRefusal = (String, String);

fn retention(raw: &RawRetention) -> Result<Retention, FieldRefusal> {
    let d = Retention::default();
    let retention = Retention {
        max_file_bytes: raw.max_file_bytes.unwrap_or(d.max_file_bytes),
        kept: raw.rotated_kept.unwrap_or(d.kept),
    };
    retention.check().map_err(|(key, why)| (format!("retention.{key}"), why))?;
    Ok(retention)
}

fn limits(raw: &RawLimits) -> Result<LifecycleLimits, FieldRefusal> {
    let d = LifecycleLimits::default();
    let ms = |v: Option<u64>, default: Duration| v.map_or(default, Duration::from_millis);
    let limits = LifecycleLimits {
        flap_threshold: raw.flap_threshold.unwrap_or(d.flap_threshold),
        flap_window: ms(raw.flap_window_ms, d.flap_window),
        restart_delay: ms(raw.restart_delay_ms, d.restart_delay),
        restart_delay_max: ms(raw.restart_delay_max_ms, d.restart_delay_max),
        give_up_after: raw.give_up_after.unwrap_or(d.give_up_after),
        healthy_run: ms(raw.healthy_run_ms, d.healthy_run),
        stop_grace: ms(raw.stop_grace_ms, d.stop_grace),
    };
    limits.validate().map_err(|refused| {
        let message = refused.to_string();
        let field = message.split(' ').next().unwrap_or("").to_owned();
        (format!("limits.{field}"), message)
    })?;
    Ok(limits)
}

fn harness(
    name: &str,
    raw: &RawHarness,
    limits: &LifecycleLimits,
) -> Result<HarnessSpec, FieldRefusal> {
    let key = |field: &str| format!("harness.{name}.{field}");
    if raw.command.first().is_none_or(|p| p.is_empty()) {
        return Err((
            key("command"),
            "must name a program: command = [\"program\", \"arg\", …]".into(),
        ));
    }
    if let Some(bad) = raw.env.keys().find(|k| k.is_empty() || k.contains('=') || k.contains('\0'))
    {
        return Err((key("env"), format!("{bad:?} is not a variable name")));
    }
    if let Some(cwd) = &raw.cwd {
        if escapes(cwd) {
            return Err((
                key("cwd"),
                format!(
                    "{cwd:?} leads outside the coordination root; name an absolute path to run \
                     a harness outside it"
                ),
            ));
        }
    }
    let readiness = match &raw.readiness {
        RawReadiness::Absent | RawReadiness::Word(ReadinessWord::None) => Readiness::None,
        RawReadiness::Word(ReadinessWord::Notify) => Readiness::Notify,
        RawReadiness::File { file } if !file.is_empty() => Readiness::File { path: file.clone() },
        RawReadiness::Probe { probe } if probe.first().is_some_and(|p| !p.is_empty()) => {
            Readiness::Probe { command: probe.clone() }
        }
        _ => {
            return Err((
                key("readiness"),
                "a file path or a probe command may not be empty".into(),
            ))
        }
    };
    let positive = |field: &str, v: Option<u64>| match v {
        Some(0) => Err((key(field), "must be at least 1 (omit it for none)".to_owned())),
        v => Ok(v.map(Duration::from_millis)),
    };
    let ready_timeout = positive("ready_timeout_ms", raw.ready_timeout_ms)?;
    let watchdog = positive("watchdog_ms", raw.watchdog_ms)?;
    let recheck = positive("readiness_recheck_ms", raw.readiness_recheck_ms)?;
    if recheck.is_some() && !matches!(readiness, Readiness::File { .. } | Readiness::Probe { .. }) {
        return Err((
            key("readiness_recheck_ms"),
            "needs readiness by a file or a probe: only those can be looked at again".into(),
        ));
    }
    if watchdog.is_some() && readiness != Readiness::Notify {
        return Err((
            key("watchdog_ms"),
            "needs readiness = \"notify\": the harness sends WATCHDOG=1 on its notify socket"
                .into(),
        ));
    }
    if ready_timeout.is_some() && readiness == Readiness::None {
        return Err((
            key("ready_timeout_ms"),
            "needs a readiness (notify, a file or a probe): without one a run is ready at once"
                .into(),
        ));
    }
    let crash_loop = harn_core::harness::lifecycle::CrashLoop {
        flap_threshold: raw.flap_threshold,
        flap_window: raw.flap_window_ms.map(Duration::from_millis),
        give_up_after: raw.give_up_after,
        healthy_run: raw.healthy_run_ms.map(Duration::from_millis),
    };
    // Checked together with the shared limits they override.
    crash_loop.apply(limits).validate().map_err(|refused| {
        let message = refused.to_string();
        let field = message.split(' ').next().unwrap_or("").to_owned();
        (key(&field), format!("{message} (with [limits] for what this harness does not set)"))
    })?;
    let names = |field: &str, list: &[String]| {
        list.iter()
            .map(|n| Id::new(n).map_err(|e| (key(field), format!("{n:?}: {e}"))))
            .collect::<Result<Vec<Id>, FieldRefusal>>()
    };
    if let Some(user) = &raw.user {
        crate::os::identity::resolve(user, raw.group.as_deref()).map_err(|e| {
            let field = if e.starts_with("group") { "group" } else { "user" };
            (key(field), e)
        })?;
    } else if raw.group.is_some() {
        return Err((key("group"), "needs user: the group of which user?".into()));
    }
    let requires = names("requires", &raw.requires)?;
    let after = names("after", &raw.after)?;
    let tty = match (raw.tty, raw.tty_size) {
        (false, Some(_)) => {
            return Err((key("tty_size"), "needs tty = true: the size of which terminal?".into()))
        }
        (false, None) => None,
        (true, None) => Some(TtySize::default()),
        (true, Some([cols, rows])) if (1..=1000).contains(&cols) && (1..=1000).contains(&rows) => {
            Some(TtySize { cols, rows })
        }
        (true, Some(_)) => {
            return Err((key("tty_size"), "is [columns, rows], each from 1 to 1000".into()))
        }
    };
    let memory = match &raw.memory_max {
        None => None,
        Some(toml::Value::Integer(n)) if *n > 0 => Some(*n as u64),
        Some(toml::Value::String(s)) => {
            Some(harn_core::limits::parse_bytes(s).map_err(|e| (key("memory_max"), e.message))?)
        }
        Some(_) => return Err((key("memory_max"), "is a size: \"512M\", \"8G\" or bytes".into())),
    };
    let limits = harn_core::limits::ResourceLimits {
        tasks: raw.tasks_max,
        memory,
        cpu_weight: raw.cpu_weight,
        tmpfs: None,
        disk: None,
    };
    if let Err(e) = limits.check() {
        let field = match e.field.as_str() {
            "tasks" => "tasks_max",
            "memory" => "memory_max",
            other => other,
        };
        return Err((key(field), e.message));
    }
    let limits = (limits != Default::default()).then_some(limits);
    Ok(HarnessSpec {
        ready_timeout,
        recheck,
        watchdog,
        crash_loop,
        requires,
        after,
        spawn: SpawnSpec {
            argv: raw.command.clone(),
            cwd: raw.cwd.clone(),
            env: raw.env.clone(),
            stdin: Vec::new(),
            user: raw.user.clone(),
            group: raw.group.clone(),
            tty,
            limits,
        },
        restart: raw.restart,
        restart_delay: raw.restart_delay_ms.map(Duration::from_millis),
        stop_grace: raw.stop_grace_ms.map(Duration::from_millis),
        readiness,
        enabled: raw.enabled,
    })
}

/// True when a relative path climbs above where it starts (`..` past its own depth); an
/// absolute path is an explicit choice and never "escapes".
/// Where a harness runs: the root, a path relative to it, or an absolute path. A relative
/// one is resolved (links followed) and must lie inside the root, since a link inside it may
/// lead anywhere; the absolute path that results is what the child enters. `Err` carries
/// whether the directory is missing, and what is wrong.
pub fn resolve_cwd(
    root: &std::path::Path,
    cwd: Option<&str>,
) -> Result<std::path::PathBuf, (bool, String)> {
    let named = cwd.map_or_else(|| root.to_owned(), |c| root.join(c));
    let resolved = match std::fs::canonicalize(&named) {
        Ok(p) => p,
        Err(e) => {
            let missing = e.kind() == std::io::ErrorKind::NotFound;
            return Err((missing, format!("cwd {}: {e}", named.display())));
        }
    };
    if !resolved.is_dir() {
        return Err((true, format!("cwd {}: not a directory", named.display())));
    }
    let relative = cwd.is_some_and(|c| !std::path::Path::new(c).is_absolute());
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_owned());
    if relative && !resolved.starts_with(&root) {
        return Err((
            false,
            format!(
                "cwd {} resolves to {}, outside the coordination root {}; name an absolute \
                 path to run a harness outside it",
                named.display(),
                resolved.display(),
                root.display()
            ),
        ));
    }
    Ok(resolved)
}

/// Refuses, naming the key, a relative `cwd` of `config` that resolves outside `root`.
pub fn check_cwds(
    file: &std::path::Path,
    config: &DaemonConfig,
    root: &std::path::Path,
) -> Result<(), ConfigError> {
    for (name, spec) in &config.harnesses {
        if let Err((false, message)) = resolve_cwd(root, spec.spawn.cwd.as_deref()) {
            return Err(ConfigError {
                file: file.to_owned(),
                line: None,
                key: Some(format!("harness.{name}.cwd")),
                message,
            });
        }
    }
    Ok(())
}

pub fn escapes(path: &str) -> bool {
    let path = std::path::Path::new(path);
    if path.is_absolute() {
        return false;
    }
    let mut depth: i64 = 0;
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => depth -= 1,
            std::path::Component::Normal(_) => depth += 1,
            _ => {}
        }
        if depth < 0 {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(text: &str) -> Result<DaemonConfig, ConfigError> {
        parse(Path::new("harness.toml"), text)
    }

    #[test]
    fn a_three_line_config_is_enough() {
        let c = parse_str("[harness.agent]\ncommand = [\"sleep\", \"1000\"]\n").unwrap();
        let spec = &c.harnesses[&Id::new("agent").unwrap()];
        assert_eq!(spec.spawn.argv, ["sleep", "1000"]);
        assert_eq!(spec.restart, RestartPolicy::Always);
        assert!(spec.enabled);
        assert_eq!(c.limits, LifecycleLimits::default());
    }

    #[test]
    fn every_key_is_read() {
        let text = r#"
[limits]
flap_threshold = 4
flap_window_ms = 5000
restart_delay_ms = 200
restart_delay_max_ms = 8000
give_up_after = 0
healthy_run_ms = 60000
stop_grace_ms = 3000

[harness.web]
command = ["python3", "-m", "http.server"]
cwd = "site"
env = { PORT = "8000" }
restart = "on-failure"
restart_delay_ms = 500
stop_grace_ms = 2000
readiness = { probe = ["curl", "-f", "localhost:8000"] }
enabled = false

[harness.watch]
command = ["watcher"]
readiness = "notify"

[profile.dev]
harnesses = ["web", "watch"]
autostart = true
"#;
        let c = parse_str(text).unwrap();
        assert_eq!(c.limits.flap_threshold, 4);
        assert_eq!(c.limits.give_up_after, 0);
        let web = &c.harnesses[&Id::new("web").unwrap()];
        assert_eq!(web.restart, RestartPolicy::OnFailure);
        assert_eq!(web.spawn.env["PORT"], "8000");
        assert_eq!(web.stop_grace, Some(Duration::from_millis(2000)));
        assert!(matches!(web.readiness, Readiness::Probe { .. }));
        assert!(!web.enabled);
        assert_eq!(c.harnesses[&Id::new("watch").unwrap()].readiness, Readiness::Notify);
        assert!(c.profiles[&Id::new("dev").unwrap()].autostart);
    }

    #[test]
    fn a_relative_cwd_stays_inside_the_root_and_an_absolute_one_is_explicit() {
        for (cwd, escapes_root) in
            [("site", false), ("a/../b", false), ("..", true), ("a/../../b", true), ("/srv", false)]
        {
            assert_eq!(escapes(cwd), escapes_root, "{cwd}");
        }
        let e = parse_str("[harness.a]\ncommand = [\"x\"]\ncwd = \"../../..\"\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("harness.a.cwd"), "{e}");
        assert!(e.message.contains("outside the coordination root"), "{e}");
        assert!(parse_str("[harness.a]\ncommand = [\"x\"]\ncwd = \"/tmp\"\n").is_ok());
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let e = parse_str("[harness.a]\ncommand = [\"x\"]\nrestart = \"sometimes\"\n").unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert!(e.to_string().starts_with("harness.toml:3"), "{e}");
        assert!(e.message.contains("sometimes"), "{e}");

        let e = parse_str("[harness.a]\ncommand = [\"x\"]\ncomand = 1\n").unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert!(e.message.contains("comand"), "{e}");

        let e = parse_str("[harness.a]\ncommand = []\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("harness.a.command"), "{e}");
        assert_eq!(e.line, Some(1), "{e}");

        let e = parse_str("[harness.\"a b\"]\ncommand = [\"x\"]\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("harness.a b"), "{e}");

        let e = parse_str("[harness.a]\ncommand = [\"x\"]\n[profile.p]\nharnesses = [\"b\"]\n")
            .unwrap_err();
        assert_eq!(e.key.as_deref(), Some("profile.p.harnesses"), "{e}");
        assert_eq!(e.line, Some(3), "{e}");

        let e = parse_str("[limits]\nrestart_delay_ms = 9000\nrestart_delay_max_ms = 10\n")
            .unwrap_err();
        assert_eq!(e.key.as_deref(), Some("limits.restart_delay_max_ms"), "{e}");

        let e = parse_str("[harness.a\ncommand = [\"x\"]\n").unwrap_err();
        assert_eq!(e.line, Some(1), "{e}");
    }
}
