//! `harn init`: makes a root's `.harnery/` (0700, with a `.gitignore` so its records stay out
//! of the repository), looks for the built-in agent programs, writes commented starters of
//! `.harnery/config.json` and `harness.toml` where there are none (never over a file that is
//! there), and says what to type next.

use crate::exit::{fail, Exit, EXIT_FAILED, EXIT_USAGE};
use crate::os::private::Dir;
use harn_core::work::agent::presets;
use harn_core::work::run::Billing;
use std::path::PathBuf;

/// `harn init`
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  harn init                      # in the repository, or any directory of it\n  harn init --root ~/src/app     # somewhere else\n  harn init --json               # what was made and found, as JSON"
)]
pub struct InitArgs {
    /// The coordination root; default: found from the current directory as git finds its
    /// repository (the nearest `.harnery/` above, else the git top level).
    #[arg(long)]
    root: Option<PathBuf>,
    /// Print one JSON document: the root, each file made or kept, each agent program found.
    #[arg(long)]
    json: bool,
}

use crate::os::root::GITIGNORE;

const CONFIG: &str = r#"// Agent programs this root may use (JSON with comments). The built-in claude-code and
// codex presets need no entry: name them with --harness, or in a team file. Declare any
// other program here, then name it the same way.
{
  "schema_version": 1,
  "harnesses": {
    // "local": { "command": ["my-agent", "--print"], "kind": "text", "timeout_ms": 600000 }
  },
  // Paths every confined run may write besides its workspace and temporary directory
  // ("~/" is the home directory; a relative path is taken from the root).
  "containment": { "writable": [] }
}
"#;

const HARNESS_TOML: &str = r#"# Long-lived processes the harness daemon keeps running for this root.
# `harn harness up` starts the daemon, `harn harness list` shows what runs,
# `harn harness logs` prints every log. Every key: `harn harness --help`, docs/CLI.md.
#
# An interactive agent session in a terminal of its own; `harn harness screen agent`
# prints what it shows, `harn harness send agent 'TEXT' --enter` types into it.
#
# [harness.agent]
# command = ["claude", "--continue"]     # argv
# tty = true                             # a terminal (120x40; tty_size = [cols, rows])
# restart = "always"                     # always | unless-stopped | on-failure | no
# readiness = "none"                     # none | notify | { file = "PATH" } | { probe = [...] }
# enabled = true
"#;

/// What happened to one starter file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Made {
    Made,
    Kept,
}

impl Made {
    fn as_str(self) -> &'static str {
        match self {
            Made::Made => "made",
            Made::Kept => "kept (already there)",
        }
    }
}

/// Runs `harn init`.
pub fn run(args: InitArgs) -> Exit {
    let root = match crate::os::root::discover(args.root.as_deref()) {
        Ok(r) => r,
        Err(e) => {
            let shown = args.root.unwrap_or_else(|| PathBuf::from("."));
            return fail(EXIT_USAGE, format!("{}: {e}", shown.display()));
        }
    };
    let existed = root.join(".harnery").is_dir();
    let made = (|| -> std::io::Result<[(&'static str, Made); 3]> {
        let dir = Dir::open(&root, ".harnery", true)?;
        let top = Dir::root(&root)?;
        Ok([
            (".harnery/.gitignore", write_new(&dir, ".gitignore", GITIGNORE)?),
            (".harnery/config.json", write_new(&dir, "config.json", CONFIG)?),
            ("harness.toml", write_new(&top, "harness.toml", HARNESS_TOML)?),
        ])
    })();
    let made = match made {
        Ok(m) => m,
        Err(e) => return fail(EXIT_FAILED, format!("{}: {e}", root.display())),
    };
    let agents = agent_programs();
    if args.json {
        let files: serde_json::Map<String, serde_json::Value> =
            made.iter().map(|(f, m)| ((*f).to_owned(), (*m == Made::Made).into())).collect();
        let found: Vec<serde_json::Value> = agents
            .iter()
            .map(|(name, path, ready)| {
                serde_json::json!({ "harness": name, "program": path.as_ref().map(|p| p.display().to_string()),
                                    "ready": ready.is_ok(), "why_not": ready.as_ref().err() })
            })
            .collect();
        let doc = serde_json::json!({ "root": root.display().to_string(), "existed": existed,
                                      "made": files, "agents": found });
        println!("{doc:#}");
        return Ok(0);
    }
    let verb = if existed { "already had" } else { "made" };
    println!("{verb} {}/.harnery/ (0700)", root.display());
    for (file, m) in &made {
        println!("  {file}: {}", m.as_str());
    }
    println!("agent programs:");
    for (name, path, ready) in &agents {
        match (path, ready) {
            (None, _) => println!("  {name}: not installed"),
            (Some(p), Ok(())) => println!("  {name}: {} (logged in)", p.display()),
            (Some(p), Err(why)) => println!("  {name}: {} ({why})", p.display()),
        }
    }
    let ready: Vec<&str> =
        agents.iter().filter(|(_, _, r)| r.is_ok()).map(|(n, _, _)| n.as_str()).collect();
    println!("next:");
    match ready.first() {
        Some(agent) => {
            println!("  harn work create \"Fix the parser\" WORKFLOW --objective \"…\" --accept \"tests pass\"");
            println!("  harn work run ID --harness {agent}");
        }
        None => {
            println!("  harn example               # a work item run by the scripted agent, no agent program needed");
        }
    }
    println!("  harn harness up            # once harness.toml names a process to keep running");
    Ok(0)
}

/// Creates `name` in `dir` with `text` unless something is there already.
fn write_new(dir: &Dir, name: &str, text: &str) -> std::io::Result<Made> {
    match dir.create_new(name, text.as_bytes()) {
        Ok(()) => {
            dir.sync()?;
            Ok(Made::Made)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(Made::Kept),
        Err(e) => Err(e),
    }
}

/// Each built-in agent preset: the program it runs if installed, and whether its pre-flight
/// under subscription billing passes (installed and logged in), or why not.
fn agent_programs() -> Vec<(String, Option<PathBuf>, Result<(), String>)> {
    presets()
        .into_iter()
        .map(|(name, spec)| {
            let program = crate::work::calls::find_program(&spec.command[0]);
            let ready = match &program {
                None => Err("not installed".to_owned()),
                Some(_) => crate::work::calls::preflight_once(&name, &spec, Billing::Subscription),
            };
            (name, program, ready)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_starter_config_is_a_valid_config_with_nothing_declared() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".harnery")).unwrap();
        std::fs::write(dir.path().join(".harnery/config.json"), super::CONFIG).unwrap();
        assert_eq!(crate::work::config::writable(dir.path()), Ok(Vec::new()));
        let toml: toml::Table = toml::from_str(super::HARNESS_TOML).unwrap();
        assert!(toml.is_empty(), "every example in the starter is a comment");
    }
}
