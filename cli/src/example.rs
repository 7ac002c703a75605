//! `harn example`: harn end to end in a fresh root with the example workflow, team and
//! scripted harness compiled into harn, showing each command as a user would type it: a
//! work item run to `in_review` with its proof, then a goal over a two-item graph driven by
//! the supervisor to success, one line per decision.

use crate::exit::{fail, Exit, Failure, EXIT_FAILED, EXIT_USAGE};
use clap::Args;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The example workflow: one agent call, its evidence, a result.
const WORKFLOW: &str = include_str!("../../examples/workflows/agent-review.sh");
/// The scripted harness that stands in for an agent.
const HARNESS: &str = include_str!("../../examples/harnesses/scripted.sh");
/// The example team: an implementer and a reviewer, both answered by the scripted harness.
const TEAM: &str = include_str!("../../examples/team.json");

/// `harn example`
#[derive(Debug, Args)]
pub struct ExampleArgs {
    /// A new directory to run the example in (default: a fresh one under the temporary
    /// directory). It is kept afterwards, so the records can be explored.
    #[arg(long)]
    root: Option<PathBuf>,
}

/// Sets up the root and runs the example's commands; returns the exit code.
pub fn run(a: ExampleArgs) -> Exit {
    let root = match a.root {
        Some(root) => root,
        None => std::env::temp_dir().join(format!("harn-example-{}", std::process::id())),
    };
    if let Err(e) = prepare(&root) {
        return fail(EXIT_USAGE, format!("{}: {e}", root.display()));
    }
    let root = std::fs::canonicalize(&root).unwrap_or(root);
    outln!("example root: {}\n", root.display());
    let create = [
        "work",
        "create",
        "Write the parser",
        "wf.sh",
        "--id",
        "parser",
        "--objective",
        "write the config parser",
        "--accept",
        "the agent answered",
    ];
    let steps: [&[&str]; 2] = [&create, &["work", "run", "parser", "--harness", "scripted"]];
    for args in steps {
        step(&root, args)?
    }
    let run_id = match latest_run(&root) {
        Ok(run) => run,
        Err(e) => return fail(EXIT_FAILED, e),
    };
    for args in [&["run", "show", run_id.as_str()][..], &["work", "show", "parser"]] {
        step(&root, args)?
    }
    outln!("The parser is in review. Now a goal: the CLI item depends on the parser, and the");
    outln!("supervisor accepts passing proofs, dispatches in dependency order, and stops on success.\n");
    let depends = [
        "work",
        "create",
        "Wire the CLI",
        "wf.sh",
        "--id",
        "cli",
        "--objective",
        "wire the parser into the CLI",
        "--accept",
        "the agent answered",
        "--depends-on",
        "parser",
    ];
    let goal = [
        "supervisor",
        "create",
        "cli",
        "--team",
        "team.json",
        "--id",
        "ship",
        "--title",
        "Ship the config parser",
        "--accept-passing-proof",
    ];
    let steps: [&[&str]; 4] = [
        &depends,
        &goal,
        &["supervisor", "run", "ship", "--harness", "scripted"],
        &["supervisor", "show", "ship"],
    ];
    for args in steps {
        step(&root, args)?
    }
    let r = root.display();
    outln!("Explore the records with `harn work list --root {r}` or `harn dash --root {r}`.");
    outln!("To leave a goal to the supervisor service and watch it, see the README.");
    Ok(0)
}

/// Creates the root with the workflow, the harness and a config declaring the harness.
fn prepare(root: &Path) -> std::io::Result<()> {
    std::fs::create_dir(root)?;
    let harnery = crate::os::private::Dir::open(root, harn_core::layout::HARNERY, true)?;
    std::fs::write(root.join("team.json"), TEAM)?;
    for (name, body) in [("wf.sh", WORKFLOW), ("harness.sh", HARNESS)] {
        let path = root.join(name);
        std::fs::write(&path, body)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    }
    let config =
        r#"{"schema_version": 1, "harnesses": {"scripted": {"command": ["./harness.sh"]}}}"#;
    harnery.create_new("config.json", format!("{config}\n").as_bytes())
}

/// Prints a command as typed and runs it; a failure stops the example with its code.
fn step(root: &Path, args: &[&str]) -> Result<(), Failure> {
    let quoted: Vec<String> = args
        .iter()
        .map(|a| if a.contains(' ') { format!("{a:?}") } else { (*a).to_owned() })
        .collect();
    outln!("$ harn {} --root {}", quoted.join(" "), root.display());
    let me =
        std::env::current_exe().map_err(|e| Failure::new(EXIT_FAILED, format!("harn: {e}")))?;
    let status = Command::new(me)
        .args(args)
        .arg("--root")
        .arg(root)
        .status()
        .map_err(|e| Failure::new(EXIT_FAILED, format!("harn: {e}")))?;
    outln!();
    match status.code() {
        Some(0) => Ok(()),
        code => fail(EXIT_FAILED, format!("the example stopped: exit {code:?}")),
    }
}

/// The latest run of the example item, from its projection.
fn latest_run(root: &Path) -> Result<String, String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new(me)
        .args(["work", "show", "parser", "--json", "--root"])
        .arg(root)
        .output()
        .map_err(|e| e.to_string())?;
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    doc["projection"]["latest_run_id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| "the example item has no run".to_owned())
}
