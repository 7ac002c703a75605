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
    if out.status.success() {
        Ok(first_lines(&text(&out.stdout), &text(&out.stderr)))
    } else {
        Err(first_lines(&text(&out.stderr), &text(&out.stdout)))
    }
}

/// Starts `harn <words>` (an attempt), and leaves what it came to for `session`'s next page.
pub fn start(web: &std::sync::Arc<Web>, session: usize, words: &[String]) -> Said {
    let child = command(web, words)?
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("harn: {e}"))?;
    let (web, what) = (web.clone(), words.join(" "));
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
    Ok(format!("started `harn {}`", words.join(" ")))
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
