//! The examples that end every verb's `--help`, kept in one table so each verb has one and a
//! test can say which does not. A verb whose definition already ends in examples keeps its own.

use clap::Command;

/// Each verb's path (its words after `harn`) and the lines of its examples.
pub const EXAMPLES: &[(&str, &[&str])] = &[
    ("init", &["harn init", "harn init --root ~/src/app --json"]),
    ("example", &["harn example", "harn example --root /tmp/harn-example"]),
    ("sim run", &["harn sim run --seed 42", "harn sim run --seed 42 --trace seed42.jsonl"]),
    ("sim seeds", &["harn sim seeds --seeds 0..1000", "harn sim seeds --seeds 0..100000 --budget-secs 60"]),
    ("sim replay", &["harn sim replay sim-failures/seed-17.trace.jsonl"]),
    ("sim minimize", &["harn sim minimize sim-failures/seed-17.trace.jsonl"]),
    ("sim work", &["harn sim work --seeds 0..500"]),
    ("sim goals", &["harn sim goals --seeds 0..300"]),
    ("sim service", &["harn sim service --seeds 0..300"]),
    ("sim day", &["harn sim day", "harn sim day --seed 7 --json"]),
    ("harness daemon", &["harn harness daemon            # in the foreground, as a systemd unit runs it"]),
    ("harness up", &["harn harness up", "harn harness up --config ops/harness.toml"]),
    ("harness down", &["harn harness down"]),
    ("harness list", &["harn harness list", "harn harness list --json | jq '.harnesses[].state'"]),
    ("harness status", &["harn harness status web", "harn harness status web --json"]),
    ("harness profile use", &["harn harness profile use night"]),
    ("harness reload", &["harn harness reload", "harn harness reload --force    # even if it stops every harness"]),
    ("harness events", &["harn harness events", "harn harness events --json"]),
    ("harness ledger", &["harn harness ledger web --last 20", "harn harness ledger --since 1h --json"]),
    (
        "work create",
        &[
            "harn work create 'Fix the parser' wf.sh --objective 'parse tabs' --accept 'tests pass'",
            "harn work create Wire wf.sh --objective 'wire it in' --depends-on fix-the-parser",
        ],
    ),
    ("work list", &["harn work list", "harn work list --state in_review --json"]),
    ("work show", &["harn work show fix-the-parser", "harn work show fix    # a unique prefix"]),
    ("work cancel", &["harn work cancel fix-the-parser --reason 'not needed'"]),
    ("work reopen", &["harn work reopen fix-the-parser --reason 'tabs still break' --finding 'a tab in a string'"]),
    (
        "work accept",
        &["harn work accept fix-the-parser", "harn work accept fix-the-parser --dispose f1=fixed --dispose 'f2=deferred:next release'"],
    ),
    ("work reconcile", &["harn work reconcile", "harn work reconcile fix-the-parser --json"]),
    ("run show", &["harn run show wf-2026-12-01-07-18-13-841-191b04", "harn run show wf-2026-12-01-07-18-13-841-191b04 --json"]),
    ("run list", &["harn run list", "harn run list --limit 5 --json"]),
    ("run follow", &["harn run follow wf-2026-12-01-10-00-00-000-abc123"]),
    (
        "supervisor create",
        &[
            "harn supervisor create fix-the-parser --team team.json",
            "harn supervisor create fix-the-parser --team team.json --accept-passing-proof --replanning replan.json",
        ],
    ),
    ("supervisor list", &["harn supervisor list", "harn supervisor list --json"]),
    ("supervisor show", &["harn supervisor show fix-the-parser", "harn supervisor show fix --json"]),
    ("supervisor tick", &["harn supervisor tick fix-the-parser --harness claude-code"]),
    (
        "supervisor run",
        &["harn supervisor run fix-the-parser --harness claude-code", "harn supervisor run fix-the-parser --harness codex --json"],
    ),
    ("supervisor plan list", &["harn supervisor plan list fix-the-parser"]),
    ("supervisor plan show", &["harn supervisor plan show fix-the-parser plan-0001"]),
    (
        "supervisor plan approve",
        &["harn supervisor plan approve fix-the-parser plan-0001", "harn supervisor plan approve fix-the-parser plan-0002 --reason 'milestone checked'"],
    ),
    ("supervisor plan reject", &["harn supervisor plan reject fix-the-parser plan-0001 --reason 'split the lexer first'"]),
    ("supervisor plan reopen", &["harn supervisor plan reopen fix-the-parser --reason 'the release found a bug'"]),
    ("supervisor plan retry", &["harn supervisor plan retry fix-the-parser plan-0001 --reason 'keep the old API'"]),
    (
        "supervisor service start",
        &["harn supervisor service start fix-the-parser --harness claude-code", "harn supervisor service start    # again, with the frozen enrollment"],
    ),
    ("supervisor service run", &["harn supervisor service run fix-the-parser --harness codex    # in the foreground"]),
    ("supervisor service status", &["harn supervisor service status", "harn supervisor service status --json"]),
    ("supervisor service stop", &["harn supervisor service stop", "harn supervisor service stop --timeout 30"]),
    ("supervisor service logs", &["harn supervisor service logs", "harn supervisor service logs --follow"]),
    ("approval list", &["harn approval list --status pending"]),
    ("approval show", &["harn approval show wf-2026-12-01-10-00-00-000-abc123-p1", "harn approval show wf-2026-12-01-10    # a unique prefix"]),
    ("approval approve", &["harn approval approve wf-2026-12-01-10-00-00-000-abc123-p1 --reason 'push to main is fine today'"]),
    ("approval deny", &["harn approval deny wf-2026-12-01-10-00-00-000-abc123-p1 --reason 'not on a Friday'"]),
    ("dash", &["harn dash", "harn dash --once --page work --width 120"]),
    ("completions", &["source <(harn completions bash)    # in ~/.bashrc", "source <(harn completions zsh)     # in ~/.zshrc"]),
    ("man", &["harn man > harn.1 && man ./harn.1"]),
];

/// `cmd` with examples after every verb's help that has none of its own.
pub fn add(cmd: Command) -> Command {
    map_commands(cmd, "", &with_examples)
}

fn with_examples(cmd: Command, path: &str) -> Command {
    let own = cmd.get_after_help().is_some_and(|h| h.to_string().contains("Example"));
    match EXAMPLES.iter().find(|(p, _)| *p == path) {
        Some((_, lines)) if !own => {
            let mut text = String::from(if lines.len() == 1 { "Example:" } else { "Examples:" });
            for line in *lines {
                text.push_str("\n  ");
                text.push_str(line);
            }
            cmd.after_help(text)
        }
        _ => cmd,
    }
}

/// `cmd` with `f` applied to it and to every command below it, each with its path (its words
/// after `harn`, `""` for `harn` itself), deepest first.
pub fn map_commands(
    mut cmd: clap::Command,
    path: &str,
    f: &dyn Fn(clap::Command, &str) -> clap::Command,
) -> clap::Command {
    let names: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_owned()).collect();
    for name in names {
        let sub = if path.is_empty() { name.clone() } else { format!("{path} {name}") };
        cmd = cmd.mut_subcommand(&name, |c| map_commands(c, &sub, f));
    }
    f(cmd, path)
}
