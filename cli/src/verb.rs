//! Arguments many verbs share, declared once: an id shown (`Shown`), who acts and why when a
//! reason is optional (`Signed`) and when it is required (`Ruled`), a systemd unit's options
//! (`UnitArgs`), and who acts when the person did not say (`actor`).

use clap::Args;

/// An entity to show: its id (or a unique prefix of it), and the output's form.
#[derive(Debug, Args)]
pub struct Shown {
    /// The id (or a unique prefix of it).
    pub id: String,
    /// Print one JSON document.
    #[arg(long)]
    pub json: bool,
}

/// Who acts and, optionally, why.
#[derive(Debug, Args)]
pub struct Signed {
    /// Who (default: $USER).
    #[arg(long)]
    pub actor: Option<String>,
    /// Why (recorded with the event).
    #[arg(long)]
    pub reason: Option<String>,
    /// Print one JSON document.
    #[arg(long)]
    pub json: bool,
}

/// Who acts, and why, which the act needs.
#[derive(Debug, Args)]
pub struct Ruled {
    /// Why (required; recorded, and shown to the next planner).
    #[arg(long)]
    pub reason: String,
    /// Who (default: $USER).
    #[arg(long)]
    pub actor: Option<String>,
    /// Print one JSON document.
    #[arg(long)]
    pub json: bool,
}

/// The options of a verb that prints or installs a systemd unit (`harness unit`, `supervisor
/// service unit`).
#[derive(Debug, Args)]
pub struct UnitArgs {
    /// Write the unit where systemd reads it (`/etc/systemd/system`, or the user's
    /// `~/.config/systemd/user` with `--user`) and print the commands that enable it.
    #[arg(long)]
    pub install: bool,
    /// With `--install`: a unit of the user's own systemd instance.
    #[arg(long, requires = "install")]
    pub user: bool,
    /// Run it as USER (`User=` and `Group=` of a system unit); the root's `.harnery/` must be
    /// USER's.
    #[arg(long = "as", value_name = "USER")]
    pub as_user: Option<String>,
}

/// Who acts: the name given, else `$USER`, else `operator`.
pub fn actor(given: Option<String>) -> String {
    given
        .or_else(|| std::env::var("USER").ok())
        .filter(|a| !a.trim().is_empty())
        .unwrap_or_else(|| "operator".into())
}
