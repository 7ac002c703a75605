//! Specialist teams: the team file (a JSON object keyed by role id, each a profile of
//! instructions and adapter defaults), and how an agent request naming a specialist becomes
//! a dispatch: which adapter, which prompt, which limits.

use crate::error::{FieldError, RecordError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Most attempts one agent call may make.
pub(crate) const MAX_ATTEMPTS_CAP: u32 = 10;
/// Attempts of an agent call when its profile does not say.
pub(crate) const DEFAULT_MAX_ATTEMPTS: u32 = 2;

/// One specialist's profile. Keys are those of the team files written for the JavaScript
/// tool; `adapter` is accepted for `harness`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Specialist {
    /// Put before every prompt this specialist gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// The adapter that answers for it (default: the run's); `harness` in `team.json`, where
    /// `adapter` is accepted too.
    #[serde(
        default,
        rename = "harness",
        alias = "adapter",
        skip_serializing_if = "Option::is_none"
    )]
    pub adapter: Option<String>,
    /// The model to ask for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The reasoning effort to ask for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    /// Turns the agent may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Time one attempt may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Attempts per call (a missing program is never retried).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Time a call may go without a line of output before it is killed as stuck.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_ms: Option<u64>,
    /// What its calls may change: `write` (the workspace; the default) or `read-only` (a
    /// reviewer, a planner).
    #[serde(default, skip_serializing_if = "is_write")]
    pub access: super::adapter::Access,
}

fn is_write(a: &super::adapter::Access) -> bool {
    *a == super::adapter::Access::Write
}

/// Refuses effort words the adapter each profile would run on does not take: the profile's
/// own adapter, else the run's default. `kind_of` resolves an adapter name to its dialect
/// (`None` for a name not known yet: checked when the run freezes it).
pub fn check_efforts(
    team: &Team,
    default_harness: Option<&str>,
    kind_of: &dyn Fn(&str) -> Option<super::adapter::Kind>,
) -> Result<(), FieldError> {
    for (role, p) in team {
        let (Some(effort), Some(harness)) = (&p.effort, p.adapter.as_deref().or(default_harness))
        else {
            continue;
        };
        if let Some(kind) = kind_of(harness) {
            super::adapter::check_effort(kind, effort).map_err(|e| {
                FieldError::new(format!("role {role}"), format!("effort: {e} (harness {harness})"))
            })?;
        }
    }
    Ok(())
}

/// A team: profiles by role id.
pub type Team = BTreeMap<String, Specialist>;

/// Parses and checks the team file `shown` (as the operator names it); errors name the file,
/// then the line (for JSON errors) or the role and key.
pub fn parse_team(shown: &str, bytes: &[u8]) -> Result<Team, RecordError> {
    // The line stays in the words, after the file, as operators have always read it.
    let team: Team = serde_json::from_slice(bytes).map_err(|e| {
        // serde ends its words with the place; the place is said once, first.
        let words = e.to_string();
        let words = words.rsplit_once(" at line ").map_or(words.as_str(), |(w, _)| w);
        RecordError::parse(shown, None, format!("line {} column {}: {words}", e.line(), e.column()))
    })?;
    let invalid =
        |role: &str, what: &str| RecordError::invalid(shown, format!("role {role}: {what}"));
    for (role, p) in &team {
        let valid_role = !role.is_empty()
            && role.len() <= 64
            && role.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if !valid_role {
            let what = "ids are 1 to 64 letters, digits, '.', '_', '-'";
            return Err(invalid(&format!("{role:?}"), what));
        }
        if p.timeout_ms == Some(0) || p.idle_timeout_ms == Some(0) {
            return Err(invalid(role, "timeoutMs and idleTimeoutMs must be at least 1"));
        }
        if p.max_turns == Some(0) {
            return Err(invalid(role, "maxTurns must be at least 1"));
        }
        if p.max_attempts.is_some_and(|n| n == 0 || n > MAX_ATTEMPTS_CAP) {
            return Err(invalid(role, &format!("maxAttempts must be 1 to {MAX_ATTEMPTS_CAP}")));
        }
        if p.adapter.as_deref().is_some_and(|h| h.trim().is_empty()) {
            return Err(invalid(role, "harness may not be empty"));
        }
    }
    Ok(team)
}

/// How one agent request is to be run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dispatch {
    /// The adapter's name.
    pub adapter: String,
    /// The prompt the adapter gets: the profile's instructions, then the assignment.
    pub prompt: String,
    /// The profile, for the adapter's model, effort, turns and timeout.
    pub profile: Specialist,
    /// Attempts this call may make.
    pub max_attempts: u32,
    /// The JSON schema the reply must match, when the request carries one.
    pub schema: Option<serde_json::Value>,
    /// Continue the vendor session of the run's last call to this adapter.
    pub continue_session: bool,
}

/// Whether a request could find an adapter to answer it: its specialist's adapter, else the
/// run's. (An unknown specialist has an adapter problem of another kind.)
pub(crate) fn has_adapter(
    team: &Team,
    default_harness: Option<&str>,
    specialist: Option<&str>,
) -> bool {
    let named = specialist.and_then(|role| team.get(role));
    if specialist.is_some() && named.is_none() {
        return true;
    }
    default_harness.is_some() || named.is_some_and(|p| p.adapter.is_some())
}

/// Resolves a request: a named specialist must be in the team; its adapter, else the run's
/// default, answers; its instructions come first in the prompt.
pub fn dispatch(
    team: &Team,
    default_harness: Option<&str>,
    specialist: Option<&str>,
    prompt: &str,
) -> Result<Dispatch, RecordError> {
    let profile = match specialist {
        Some(role) => team.get(role).cloned().ok_or_else(|| {
            let known: Vec<&str> = team.keys().map(String::as_str).collect();
            RecordError::refused(format!(
                "no specialist {role:?} in the run's team (known: {})",
                known.join(", ")
            ))
        })?,
        None => Specialist::default(),
    };
    let harness =
        profile.adapter.clone().or_else(|| default_harness.map(str::to_owned)).ok_or_else(
            || RecordError::refused("no harness: the specialist names none and the run has none"),
        )?;
    let prompt = match profile.instructions.as_deref().map(str::trim) {
        Some(instructions) if !instructions.is_empty() => {
            format!("{instructions}\n\n## Assignment\n\n{prompt}")
        }
        _ => prompt.to_owned(),
    };
    let max_attempts = profile.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS);
    Ok(Dispatch {
        adapter: harness,
        prompt,
        profile,
        max_attempts,
        schema: None,
        continue_session: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEED_TEAM: &str = r#"{
      "architect": {"instructions": "Own system boundaries.", "harness": "codex",
                    "effort": "high", "maxTurns": 20, "timeoutMs": 900000},
      "implementer": {"instructions": "Implement the slice.", "harness": "claude-code",
                      "maxTurns": 30},
      "reviewer": {"instructions": "Review independently.", "adapter": "codex", "effort": "high",
                   "model": "m1", "maxAttempts": 3}
    }"#;

    #[test]
    fn the_documented_team_parses_as_written() {
        let team = parse_team("team.json", SEED_TEAM.as_bytes()).unwrap();
        assert_eq!(team["architect"].timeout_ms, Some(900_000));
        assert_eq!(team["reviewer"].adapter.as_deref(), Some("codex"), "adapter is an alias");
        assert_eq!(team["implementer"].max_turns, Some(30));
    }

    #[test]
    fn bad_teams_are_refused_naming_the_role_key_or_line() {
        let parse = |text: &[u8]| parse_team("team.json", text).unwrap_err().to_string();
        let typo = "{\n  \"a\": {\"instruction\": \"x\"}\n}";
        let said = parse(typo.as_bytes());
        assert!(said.starts_with("team.json: line 2 column "), "{said}");
        assert_eq!(said.matches("line 2").count(), 1, "the place is said once: {said}");
        let zero = r#"{"a": {"timeoutMs": 0}}"#;
        assert!(parse(zero.as_bytes()).contains("role a: timeoutMs"));
        let many = r#"{"a": {"maxAttempts": 11}}"#;
        assert!(parse(many.as_bytes()).contains("maxAttempts"));
        assert!(parse(br#"{"a b": {}}"#).contains("role \"a b\""));
    }

    #[test]
    fn dispatch_prepends_instructions_and_picks_the_harness() {
        let team = parse_team("team.json", SEED_TEAM.as_bytes()).unwrap();
        let d = dispatch(&team, Some("scripted"), Some("implementer"), "Do X").unwrap();
        assert_eq!(d.adapter, "claude-code");
        assert_eq!(d.prompt, "Implement the slice.\n\n## Assignment\n\nDo X");
        assert_eq!(d.max_attempts, DEFAULT_MAX_ATTEMPTS);
        assert_eq!(
            dispatch(&team, Some("scripted"), Some("reviewer"), "p").unwrap().max_attempts,
            3
        );
        let plain = dispatch(&team, Some("scripted"), None, "Do X").unwrap();
        assert_eq!((plain.adapter.as_str(), plain.prompt.as_str()), ("scripted", "Do X"));
        let refused = |e: RecordError| e.to_string();
        assert!(refused(dispatch(&team, None, None, "p").unwrap_err()).contains("no harness"));
        let ghost = dispatch(&team, None, Some("ghost"), "p").unwrap_err();
        assert!(refused(ghost).contains("architect"));
    }
}
