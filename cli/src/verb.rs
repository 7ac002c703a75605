//! Arguments many verbs share, declared once: an id shown (`Shown`), who acts and why when a
//! reason is optional (`Signed`) and when it is required (`Ruled`), and who acts when the
//! person did not say (`actor`).

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

/// Who acts: the name given, else `$USER`, else `operator`.
pub fn actor(given: Option<String>) -> String {
    given
        .or_else(|| std::env::var("USER").ok())
        .filter(|a| !a.trim().is_empty())
        .unwrap_or_else(|| "operator".into())
}
