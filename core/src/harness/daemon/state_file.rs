//! `state.json`: the daemon's durable intent and counters, written atomically, versioned.

use crate::harness::lifecycle::harness::Durable;
use crate::ids::Id;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The schema version written today. Readers accept it and every older one.
pub const STATE_VERSION: u32 = 1;

/// One harness's durable record.
pub type PersistedHarness = Durable;

/// The whole file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PersistedState {
    /// Schema version.
    pub v: u32,
    /// Increases with every write.
    pub generation: u64,
    /// The profile last made active by an operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_profile: Option<Id>,
    /// Intent and counters per harness.
    pub harnesses: BTreeMap<Id, PersistedHarness>,
    /// The last run number of harnesses removed from the configuration, so a harness added
    /// back under the same name continues its numbering instead of reusing run numbers.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub retired: BTreeMap<Id, u64>,
}

/// Why `state.json` was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateFileError {
    /// What is wrong, with line and column when the JSON itself is bad.
    pub reason: String,
}

impl std::fmt::Display for StateFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "state.json: {}", self.reason)
    }
}

impl PersistedState {
    /// Parses the file's bytes.
    pub fn decode(bytes: &[u8]) -> Result<PersistedState, StateFileError> {
        let state: PersistedState = serde_json::from_slice(bytes).map_err(|e| StateFileError {
            reason: format!("line {} column {}: {e}", e.line(), e.column()),
        })?;
        if state.v == 0 || state.v > STATE_VERSION {
            return Err(StateFileError {
                reason: format!("field v: version {} is not one this harn reads", state.v),
            });
        }
        Ok(state)
    }

    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec(self).expect("state serializes");
        bytes.push(b'\n');
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_newer_versions() {
        let mut s = PersistedState { v: STATE_VERSION, generation: 3, ..Default::default() };
        s.harnesses.insert(Id::new("a").unwrap(), Durable { enabled: true, ..Default::default() });
        assert_eq!(PersistedState::decode(&s.encode()).unwrap(), s);
        let newer = String::from_utf8(s.encode()).unwrap().replace("\"v\":1", "\"v\":9");
        assert!(PersistedState::decode(newer.as_bytes()).unwrap_err().reason.contains("field v"));
        assert!(PersistedState::decode(b"{\n  \"v\": 1,").unwrap_err().reason.contains("line 2"));
    }
}
