//! Colour for states in text output: on in a terminal, off in a pipe, off under `NO_COLOR`
//! (no-color.org), and as `--color auto|always|never` says. The text around a coloured word
//! still goes through `neutralize`, so a colour code is the only escape harn itself prints.

use std::sync::atomic::{AtomicBool, Ordering};

/// `--color`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// In a terminal, unless `NO_COLOR` is set or `TERM` is `dumb`.
    #[default]
    Auto,
    /// Always, even into a pipe.
    Always,
    /// Never.
    Never,
}

static ON: AtomicBool = AtomicBool::new(false);

/// Decides, once per process, whether states are coloured.
pub fn init(choice: ColorChoice) {
    let nonempty = |var: &str| std::env::var_os(var).is_some_and(|v| !v.is_empty());
    let on = match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            std::io::IsTerminal::is_terminal(&std::io::stdout())
                && !nonempty("NO_COLOR")
                && std::env::var("TERM").map_or(true, |t| t != "dumb")
        }
    };
    ON.store(on, Ordering::Relaxed);
}

/// Whether colour is on, as [`init`] decided.
pub fn is_on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The SGR colour of a state word: green where it is done or healthy, yellow where it waits
/// for a person or is not yet healthy, red where it failed, dim where it is over or off.
fn tone(word: &str) -> Option<&'static str> {
    Some(match word {
        "succeeded" | "running" | "ready" | "approved" => "32",
        "in_review" | "awaiting_approval" | "awaiting_attention" | "degraded" | "restarting"
        | "starting" | "stopping" | "pending" | "waiting" => "33",
        "blocked" | "failed" | "unreadable" | "budget_exhausted" | "denied" | "orphaned" => "31",
        "cancelled" | "stopped" => "2",
        _ => return None,
    })
}

/// `word`, padded to `width` columns, in its state's colour when colour is on. The padding
/// stays outside the colour so columns line up either way.
pub fn state(word: &str, width: usize) -> String {
    let word = harn_core::text::neutralize(word).into_owned();
    let pad = " ".repeat(width.saturating_sub(word.chars().count()));
    match tone(&word).filter(|_| ON.load(Ordering::Relaxed)) {
        Some(code) => format!("{COLOR_START}{code}m{word}{COLOR_END}{pad}"),
        None => format!("{word}{pad}"),
    }
}

// The escape is assembled here, not in the text: `outln!` neutralizes what it prints, so a
// painted line is printed with `println!` around already neutralized parts.
const COLOR_START: &str = "\x1b[";
const COLOR_END: &str = "\x1b[0m";

/// Prints a line made of `parts`, each already neutralized or painted by [`state`].
pub fn line(parts: &[String]) {
    println!("{}", parts.concat());
}

/// `text` with control characters shown, for a part of [`line`].
pub fn plain(text: &str) -> String {
    harn_core::text::neutralize(text).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_is_padded_outside_its_colour_and_plain_when_off() {
        ON.store(false, Ordering::Relaxed);
        assert_eq!(state("blocked", 10), "blocked   ");
        ON.store(true, Ordering::Relaxed);
        assert_eq!(state("blocked", 10), "\x1b[31mblocked\x1b[0m   ");
        assert_eq!(state("whatever", 10), "whatever  ", "an unknown word is not coloured");
        assert!(!state("\x1b[2Jx", 3).contains("\x1b[2J"), "neutralized first");
        ON.store(false, Ordering::Relaxed);
    }
}
