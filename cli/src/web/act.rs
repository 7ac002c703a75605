//! A person's actions from the web: each is the CLI's own verb, run as a child of this server
//! with the web actor (`web:<user>`), so a decision taken in a browser is the very decision
//! `harn work accept` or `harn approval approve` takes, recorded the same way. An attempt
//! runs as long as it runs: it is started, and what it came to is said on the next page.

use super::Web;
use harn_core::ids::Id;
use std::process::{Command, Stdio};

/// What an action came to, in the words of the verb.
pub type Said = Result<String, String>;

/// Runs `harn <words>` against the web's root and waits for it (the words name the actor
/// where the verb records one).
pub fn verb(web: &Web, words: &[String]) -> Said {
    let out = command(web, words)?.output().map_err(|e| format!("harn: {e}"))?;
    let text = |b: &[u8]| String::from_utf8_lossy(b).trim().to_owned();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    if out.status.success() {
        // A short answer (`landed on main as …`) is worth saying; a whole item shown is on
        // the page the person is sent back to.
        let mut said = format!("`harn {}` done", named(words));
        if !stdout.is_empty() && stdout.lines().count() <= 2 {
            said.push_str(&format!(": {stdout}"));
        }
        if !stderr.is_empty() {
            said.push_str(&format!("\n{}", first_lines(&stderr, "")));
        }
        Ok(said)
    } else {
        Err(first_lines(&stderr, &stdout))
    }
}

/// The words of a command without its options (`work reject it`).
fn named(words: &[String]) -> String {
    let plain: Vec<&str> =
        words.iter().map(String::as_str).take_while(|w| !w.starts_with("--")).collect();
    plain.join(" ")
}

/// Starts `harn <words>` (an attempt) for item `id`, and leaves what it came to for
/// `session`'s next page. The attempt is a process group of its own with no pipe to this
/// server: a Ctrl-C that stops the server does not stop it, and it never writes into a pipe
/// nobody reads once the server is gone. What it came to is read from the item's records.
pub fn start(web: &std::sync::Arc<Web>, session: usize, id: &Id, words: &[String]) -> Said {
    use std::os::unix::process::CommandExt;
    let mut child = command(web, words)?
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("harn: {e}"))?;
    let (web, what, id) = (web.clone(), named(words), id.clone());
    std::thread::spawn(move || {
        let line = match child.wait() {
            Ok(status) => {
                let mut store = crate::os::store::Store::new(&web.root);
                let now = store.read(&id, &mut Default::default()).map_or_else(
                    |e| format!("its records could not be read: {e}"),
                    |item| {
                        let p = &item.projection;
                        format!("{id} is {}: {}", crate::dash::readers::name_of(&p.state), p.reason)
                    },
                );
                format!("`harn {what}` ended ({status}); {now}")
            }
            Err(e) => format!("`harn {what}`: {e}"),
        };
        web.say(session, line);
    });
    Ok(format!("started `harn {}`", named(words)))
}

fn command(web: &Web, words: &[String]) -> Result<Command, String> {
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.args(words).arg("--root").arg(&web.root);
    cmd.stdin(Stdio::null()).env("NO_COLOR", "1");
    Ok(cmd)
}

/// The first lines of what a verb printed (the rest is on the item's page).
fn first_lines(main: &str, other: &str) -> String {
    let text = if main.is_empty() { other } else { main };
    let lines: Vec<&str> = text.lines().take(12).collect();
    lines.join("\n")
}

/// The options a new attempt from the web runs with: those of the latest attempt (its
/// manifest `m`) that a command line can give again, or why the web cannot (the options were
/// frozen from files or choices it cannot name: a person types that command). Never more
/// than the latest attempt had: nothing here widens what a run may do.
pub fn again(
    m: &harn_core::work::run::RunManifest,
    root: &std::path::Path,
) -> Result<Vec<String>, String> {
    use crate::dash::readers::name_of;
    let mut cannot = Vec::new();
    if m.policy.is_some() {
        cannot.push("a policy file");
    }
    if !m.team.is_empty() {
        cannot.push("a team file");
    }
    // The limits a run takes from the configuration are taken again; others were given.
    if m.resource_limits.is_some() && m.resource_limits != crate::work::config::limits(root).ok() {
        cannot.push("resource limits of its own");
    }
    if m.billing == harn_core::work::run::Billing::Api {
        cannot.push("API billing");
    }
    let why = m.containment.as_ref().and_then(|c| c.why.as_deref()).unwrap_or("");
    if why.contains("--no-containment") {
        cannot.push("no containment");
    }
    if !cannot.is_empty() {
        return Err(format!("its latest attempt ran with {}", cannot.join(", ")));
    }
    let mut out = vec![
        format!("--timeout-secs={}", (m.timeout_ms / 1000).max(1)),
        format!("--concurrency={}", m.concurrency),
    ];
    // A cluster chooses its isolation itself.
    if m.cluster.is_none() {
        out.push(format!("--isolation={}", name_of(&m.isolation)));
    }
    if let Some(a) = &m.adapter {
        out.push(format!("--harness={}", a.name));
    }
    if let Some(n) = m.max_agents {
        out.push(format!("--max-agents={n}"));
    }
    if let Some(to) = &m.approval_to {
        out.push(format!("--approval-to={to}"));
    }
    if let Some(c) = &m.cluster {
        out.push(format!("--cluster={}", c.name));
    }
    // In a worktree the worktree is the working directory, which `--cwd` may not name.
    if let (Some(cwd), None) = (&m.cwd, &m.workspace) {
        out.push(format!("--cwd={cwd}"));
    }
    // The item's worktree is where its branch was made; the next attempt takes it up again.
    if let Some(parent) =
        m.workspace.as_ref().and_then(|ws| std::path::Path::new(&ws.path).parent())
    {
        out.push(format!("--workspace-root={}", parent.display()));
    }
    Ok(out)
}
