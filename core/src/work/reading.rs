//! What a call's output says, whatever dialect its program speaks: the reply or the
//! program's own failure, the vendor's session, tokens, turns and cost, and the tool uses
//! its permissions refused; and dollar amounts as whole millionths.

use serde::{Deserialize, Serialize};

/// Tokens and cost of a call, as the program reported them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens (cache reads and writes included).
    pub input_tokens: u64,
    /// Of the input, tokens read from the vendor's cache.
    pub cached_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Turns the agent took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<u32>,
    /// Cost in millionths of a US dollar, when the program reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_micro_usd: Option<u64>,
}

impl Usage {
    /// Adds another call's usage (an unknown cost stays unknown only if both are).
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.cached_tokens += other.cached_tokens;
        self.output_tokens += other.output_tokens;
        self.turns = match (self.turns, other.turns) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        self.cost_micro_usd = match (self.cost_micro_usd, other.cost_micro_usd) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
    }
}

/// A dollar amount as whole millionths (no floats past the parser).
pub(crate) fn micro_usd(dollars: f64) -> u64 {
    if dollars.is_finite() && dollars > 0.0 {
        (dollars * 1_000_000.0).round() as u64
    } else {
        0
    }
}

/// `$0.0123` for millionths of a dollar.
pub fn dollars(micro: u64) -> String {
    format!("${}.{:04}", micro / 1_000_000, (micro % 1_000_000) / 100)
}

/// A tool use the program's own permissions refused.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Denial {
    /// The tool (`Write`, `Bash` …).
    pub tool: String,
    /// What it was asked to do, in a line.
    pub summary: String,
}

/// What a call's output says, read whole.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    /// The reply: the result text or the final agent message.
    pub reply: Option<String>,
    /// The program's own failure, when it reported one (an error result, a failed turn).
    pub error: Option<String>,
    /// The vendor's session (Claude's `session_id`, Codex's thread).
    pub session_id: Option<String>,
    /// Tokens, turns and cost.
    pub usage: Option<Usage>,
    /// Tool uses the program's permissions refused.
    pub denials: Vec<Denial>,
    /// True when the program said its turn ended (an ACP prompt's answer): the call is over
    /// whatever its exit, since the host ends the program then.
    pub complete: bool,
}
