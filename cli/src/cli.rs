//! The command line: clap definitions and dispatch. Exit codes: 0 done, 1 the operation
//! failed, 2 bad input or usage.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::io::Write;

pub use crate::exit::{fail, EXIT_FAILED, EXIT_USAGE};

/// harn keeps a team of coding agents working on one repository for hours, safely.
#[derive(Debug, Parser)]
#[command(name = "harn", version, about, propagate_version = true)]
pub struct Cli {
    /// Colour states: in a terminal unless NO_COLOR is set (auto), always, or never.
    #[arg(long, global = true, value_enum, default_value_t)]
    color: crate::paint::ColorChoice,
    #[command(subcommand)]
    command: Top,
}

/// `harn supervisor …`: the goal verbs and, beside them, the service's.
#[derive(Debug, clap::Args)]
struct SupervisorArgs {
    /// The coordination root (the repository); default: found from the current directory as
    /// git finds its repository (the nearest `.harnery/` above, else the git top level).
    #[arg(long, global = true)]
    root: Option<std::path::PathBuf>,
    #[command(subcommand)]
    verb: SupervisorVerb,
}

#[derive(Debug, Subcommand)]
enum SupervisorVerb {
    #[command(flatten)]
    Goal(crate::goal::cmd::GoalVerb),
    /// The optional daemon that ticks enrolled goals: start, run, status, stop, logs, unit.
    #[command(subcommand)]
    Service(crate::service::ServiceVerb),
}

#[derive(Debug, Subcommand)]
enum Top {
    /// Start a repository: make .harnery/, find the agent programs, write starter configs.
    Init(crate::init::InitArgs),
    /// Run an example work item to review in a fresh root and show its proof.
    Example(crate::example::ExampleArgs),
    /// Deterministic simulation of the harness daemon, work, goals and the service: run,
    /// seeds, replay, minimize, work, goals, service, day.
    #[command(subcommand)]
    Sim(crate::sim_cmd::SimCommand),
    /// The harness daemon: keep long-lived processes running under an explicit lifecycle.
    Harness(crate::harness::cmd::HarnessArgs),
    /// Durable work items: create, list, show, run, retry, accept, cancel, reopen, reconcile.
    Work(crate::work::cmd::WorkArgs),
    /// Clusters whose nodes run attempts' segments: check one before it is used.
    Cluster(crate::work::cluster::ClusterArgs),
    /// Notices of what waits for a person, delivered to webhooks and commands.
    Notify(crate::notify::NotifyArgs),
    /// Workflow runs: a run's manifest, transcript summary and proof.
    Run(crate::work::run_show::RunCmd),
    /// Goals: a supervisor drives a work graph to accepted completion inside frozen limits.
    Supervisor(SupervisorArgs),
    /// Approvals parked runs wait on: list, show, approve, deny.
    Approval(crate::work::approval_cmd::ApprovalCmd),
    /// A read-only terminal dashboard of the service, goals, work and harnesses.
    Dash(crate::dash::DashArgs),
    /// A local web application over the root's records: review, feedback, approvals,
    /// landing, harnesses; loopback only, with a one-time login.
    Web(crate::web::WebArgs),
    /// Check every record of a root and report each damage with its file and what to do.
    Fsck(crate::fsck::FsckArgs),
    /// Print the shell code that completes harn's verbs, options and ids (source it).
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Print harn's man page (roff), or write one page for every verb into a directory.
    Man {
        /// Write `harn.1`, `harn-work.1`, `harn-work-create.1` … here instead.
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
    },
}

/// The command tree: the derive's, with every verb's examples after its help.
pub fn command() -> clap::Command {
    crate::complete::add(crate::examples::add(Cli::command()))
}

/// Parses the process's arguments and runs the command; returns the exit code.
pub fn main() -> i32 {
    crate::os::children::close_inherited();
    // A shell asking for completions (`COMPLETE=bash harn -- …`) is answered, and that is all.
    crate::complete::answer_if_asked(command);
    run_args(std::env::args_os())
}

/// Parses `args` (the program name first) and runs the command; returns the exit code.
pub fn run_args<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let parsed = command()
        .try_get_matches_from(args)
        .and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, m)));
    let (mut cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_USAGE } else { 0 };
        }
    };
    if let Top::Supervisor(args) = &mut cli.command {
        // Which options were typed, not defaulted: a service start that reuses the frozen
        // enrollment refuses any option it would otherwise silently ignore.
        let service = matches
            .subcommand_matches("supervisor")
            .and_then(|m| m.subcommand_matches("service"))
            .and_then(|m| m.subcommand().map(|(_, m)| m));
        if let Some(m) = service {
            let typed = m
                .ids()
                .filter(|id| {
                    m.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine)
                })
                .map(|id| id.to_string())
                .collect();
            if let SupervisorVerb::Service(verb) = &mut args.verb {
                crate::service::note_typed(verb, typed);
            }
        }
    }
    if !cli.command.is_daemon() {
        restore_default_sigpipe();
    }
    crate::paint::init(cli.color);
    // After a verb that runs attempts, what now waits for a person is recorded and told.
    let notifies = match &cli.command {
        Top::Work(args) => args.notifies(),
        Top::Supervisor(SupervisorArgs { root, verb: SupervisorVerb::Goal(v) }) if v.drives() => {
            Some(root.clone())
        }
        _ => None,
    };
    let outcome = match cli.command {
        Top::Init(args) => crate::init::run(args),
        Top::Example(args) => crate::example::run(args),
        Top::Sim(cmd) => crate::sim_cmd::run(cmd),
        Top::Harness(args) => crate::harness::cmd::run(args),
        Top::Work(args) => crate::work::cmd::run(args, crate::goal::missions::holding),
        Top::Run(args) => crate::work::run_show::run(args),
        Top::Cluster(args) => crate::work::cluster::run(args),
        Top::Notify(args) => crate::notify::run(args, crate::service::view::waiting),
        Top::Approval(args) => crate::work::approval_cmd::run(args, crate::service::view::facts),
        Top::Dash(mut args) => {
            // Decided as for every other verb: the dashboard draws on a terminal.
            args.plain = !crate::paint::is_on();
            crate::dash::run(args)
        }
        Top::Web(args) => crate::web::run(args),
        Top::Fsck(args) => crate::fsck::run(args),
        Top::Supervisor(args) => match args.verb {
            SupervisorVerb::Goal(verb) => crate::goal::cmd::run(args.root, verb),
            SupervisorVerb::Service(verb) => crate::service::run_at(args.root, verb),
        },
        Top::Completions { shell } => {
            let mut out = std::io::stdout().lock();
            // The shell asks harn at each Tab, so ids complete from the root's records.
            let written = crate::complete::registration(shell, &mut out).and_then(|()| out.flush());
            written
                .map(|()| 0)
                .map_err(|e| crate::exit::Failure::new(EXIT_FAILED, format!("completions: {e}")))
        }
        Top::Man { dir } => man(dir.as_deref()),
    };
    if let Some(Ok(mut store)) = notifies.map(crate::os::store::open_root) {
        crate::notify::after(&mut store, crate::notify::VERB_BUDGET, crate::service::view::waiting);
    }
    crate::exit::report(outcome)
}

/// `harn man`: the page on stdout, or every verb's page written into `dir`.
fn man(dir: Option<&std::path::Path>) -> crate::exit::Exit {
    let failed = |e: std::io::Error| crate::exit::Failure::new(EXIT_FAILED, format!("man: {e}"));
    match dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(failed)?;
            clap_mangen::generate_to(command(), dir).map_err(failed)?;
            outln!("wrote the man pages into {}", dir.display());
        }
        None => {
            let mut out = std::io::stdout().lock();
            clap_mangen::Man::new(command()).render(&mut out).map_err(failed)?;
            let _ = out.flush();
        }
    }
    Ok(0)
}

impl Top {
    fn is_daemon(&self) -> bool {
        matches!(self, Top::Harness(args) if args.is_daemon())
    }
}

/// Lets a client verb die quietly when its reader goes away (`harn harness ledger | head`),
/// as Unix tools do, instead of panicking on EPIPE. Not for the daemon: a client that hangs
/// up on the control socket must never kill it.
fn restore_default_sigpipe() {
    // SAFETY: called once on the main thread before any other thread exists; it only
    // changes the disposition of SIGPIPE, which Rust's runtime set to ignore at startup.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(test)]
mod tests {
    /// Every verb (a command without subcommands) ends its help with an example.
    #[test]
    fn every_verb_has_an_example() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            let subs: Vec<&clap::Command> =
                cmd.get_subcommands().filter(|s| s.get_name() != "help").collect();
            if subs.is_empty() {
                let has = cmd.get_after_help().is_some_and(|h| h.to_string().contains("Example"));
                if !has {
                    missing.push(path.to_owned());
                }
            }
            for sub in subs {
                let p = if path.is_empty() {
                    sub.get_name().to_owned()
                } else {
                    format!("{path} {}", sub.get_name())
                };
                walk(sub, &p, missing);
            }
        }
        let mut missing = Vec::new();
        walk(&super::command(), "", &mut missing);
        assert!(missing.is_empty(), "verbs without an example: {missing:?}");
    }

    /// No example names a verb that does not exist.
    #[test]
    fn every_example_is_of_a_verb() {
        let cmd = super::command();
        for (path, _) in crate::examples::EXAMPLES {
            let mut at = &cmd;
            for word in path.split(' ') {
                at = at.find_subcommand(word).unwrap_or_else(|| panic!("no verb {path:?}"));
            }
        }
    }

    #[test]
    fn the_command_line_definition_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
