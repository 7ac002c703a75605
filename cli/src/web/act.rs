//! A person's actions from the web: each is the CLI's own verb, run as a child of this server
//! with the web actor (`web:<user>`), so a decision taken in a browser is the very decision
//! `harn work accept` or `harn approval approve` takes, recorded the same way. An attempt
//! runs as long as it runs: it is started, and what it came to is said on the next page.

use super::Web;
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

/// Starts `harn <words>` (an attempt), and leaves what it came to for `session`'s next page.
pub fn start(web: &std::sync::Arc<Web>, session: usize, words: &[String]) -> Said {
    let child = command(web, words)?
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("harn: {e}"))?;
    let (web, what) = (web.clone(), named(words));
    std::thread::spawn(move || {
        let line = match child.wait_with_output() {
            Ok(out) => {
                let text = |b: &[u8]| String::from_utf8_lossy(b).trim().to_owned();
                let said = first_lines(&text(&out.stdout), &text(&out.stderr));
                format!("`harn {what}` ended ({}): {said}", out.status)
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
