//! Shell completion that knows the root's records: verbs and options from the command tree,
//! and the ids of work items, goals, plans, approvals, runs and harnesses read from the root
//! found from the shell's current directory. The shell asks `harn` itself at each Tab
//! (`COMPLETE=bash harn -- words…`, clap_complete's dynamic engine), so the ids are today's.

use clap::Command;
use clap_complete::engine::{ArgValueCandidates, CompletionCandidate};
use clap_complete::env::EnvCompleter;
use std::path::{Path, PathBuf};

/// What an argument names.
#[derive(Clone, Copy)]
enum Kind {
    Work,
    Goal,
    Plan,
    Approval,
    Run,
    Harness,
}

/// Which argument of which verbs (paths after `harn`) names what.
const NAMED: &[(&str, &str, Kind)] = &[
    ("work show", "id", Kind::Work),
    ("work cancel", "id", Kind::Work),
    ("work reopen", "id", Kind::Work),
    ("work run", "id", Kind::Work),
    ("work retry", "id", Kind::Work),
    ("work accept", "id", Kind::Work),
    ("work reconcile", "id", Kind::Work),
    ("supervisor create", "root_work_id", Kind::Work),
    ("supervisor show", "id", Kind::Goal),
    ("supervisor tick", "id", Kind::Goal),
    ("supervisor run", "id", Kind::Goal),
    ("supervisor plan list", "goal", Kind::Goal),
    ("supervisor plan show", "goal", Kind::Goal),
    ("supervisor plan show", "plan", Kind::Plan),
    ("supervisor plan approve", "goal", Kind::Goal),
    ("supervisor plan approve", "plan", Kind::Plan),
    ("supervisor plan reject", "goal", Kind::Goal),
    ("supervisor plan reject", "plan", Kind::Plan),
    ("supervisor plan reopen", "goal", Kind::Goal),
    ("supervisor plan retry", "goal", Kind::Goal),
    ("supervisor plan retry", "plan", Kind::Plan),
    ("supervisor service start", "goals", Kind::Goal),
    ("supervisor service run", "goals", Kind::Goal),
    ("approval show", "id", Kind::Approval),
    ("approval approve", "id", Kind::Approval),
    ("approval deny", "id", Kind::Approval),
    ("run show", "run_id", Kind::Run),
    ("run follow", "run_id", Kind::Run),
    ("harness status", "name", Kind::Harness),
    ("harness start", "names", Kind::Harness),
    ("harness stop", "names", Kind::Harness),
    ("harness restart", "names", Kind::Harness),
    ("harness logs", "name", Kind::Harness),
    ("harness ledger", "name", Kind::Harness),
];

/// `cmd` with every id argument completing from the root's records.
pub fn add(cmd: Command) -> Command {
    crate::examples::map_commands(cmd, "", &with_candidates)
}

fn with_candidates(mut cmd: Command, path: &str) -> Command {
    for (_, arg, kind) in NAMED.iter().filter(|(p, _, _)| *p == path) {
        let kind = *kind;
        cmd = cmd.mut_arg(*arg, |a| a.add(ArgValueCandidates::new(move || candidates(kind))));
    }
    cmd
}

/// Handles a completion request when the shell made one (`COMPLETE` is set): prints the
/// candidates and exits. Otherwise returns at once.
pub fn answer_if_asked(factory: fn() -> Command) {
    clap_complete::CompleteEnv::with_factory(factory).complete();
}

/// The registration script of `shell`, as `COMPLETE=SHELL harn` prints it, on `out`.
pub fn registration(
    shell: clap_complete::Shell,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    use clap_complete::env::{Bash, Elvish, Fish, Powershell, Zsh};
    let completer: &dyn EnvCompleter = match shell {
        clap_complete::Shell::Bash => &Bash,
        clap_complete::Shell::Zsh => &Zsh,
        clap_complete::Shell::Fish => &Fish,
        clap_complete::Shell::Elvish => &Elvish,
        clap_complete::Shell::PowerShell => &Powershell,
        _ => return Err(std::io::Error::other("no completion for this shell")),
    };
    completer.write_registration("COMPLETE", "harn", "harn", "harn", out)
}

/// The ids of `kind` in the root found from the current directory; none when there is none.
fn candidates(kind: Kind) -> Vec<CompletionCandidate> {
    let Ok(root) = crate::os::root::discover(None) else { return Vec::new() };
    let names = match kind {
        Kind::Work => entries(&root.join(harn_core::layout::WORK)),
        Kind::Goal => entries(&root.join(harn_core::layout::GOALS)),
        Kind::Approval => entries(&root.join(harn_core::layout::APPROVALS)),
        Kind::Run => {
            let mut runs = entries(&root.join(harn_core::layout::WORKFLOWS));
            runs.reverse(); // Newest first: run ids start with their time.
            runs
        }
        Kind::Plan => {
            let goals = root.join(harn_core::layout::GOALS);
            let mut plans: Vec<String> = entries(&goals)
                .iter()
                .flat_map(|g| entries(&goals.join(g).join("plans")))
                .collect();
            plans.sort();
            plans.dedup();
            plans
        }
        Kind::Harness => harnesses(&root.join("harness.toml")),
    };
    names.into_iter().map(CompletionCandidate::new).collect()
}

/// The names of the directories in `dir` that are ids, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let Ok(read) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut names: Vec<String> = read
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| harn_core::ids::Id::new(n).is_ok())
        .collect();
    names.sort();
    names
}

/// The harnesses `harness.toml` names (its `[harness.NAME]` tables).
fn harnesses(config: &PathBuf) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(config) else { return Vec::new() };
    let Ok(doc) = text.parse::<toml::Table>() else { return Vec::new() };
    doc.get("harness")
        .and_then(|h| h.as_table())
        .map_or(Vec::new(), |t| t.keys().cloned().collect())
}
