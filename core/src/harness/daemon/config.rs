//! The daemon's configuration as the core sees it: harness specs, profiles and limits,
//! already parsed and validated by the shell (`harness.toml`).

use crate::harness::lifecycle::{HarnessSpec, LifecycleLimits};
use crate::ids::Id;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A named set of harnesses; `autostart` ones are enabled on a first boot.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    /// Members.
    pub harnesses: Vec<Id>,
    /// Enable the members when they have no persisted intent yet.
    pub autostart: bool,
}

/// Everything the daemon core needs from configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonConfig {
    /// Crash-loop and stop limits shared by every harness.
    pub limits: LifecycleLimits,
    /// The harnesses, by name.
    pub harnesses: BTreeMap<Id, HarnessSpec>,
    /// The profiles, by name.
    pub profiles: BTreeMap<Id, Profile>,
}

impl DaemonConfig {
    /// Checks cross-references and limits; the error names the offending entry.
    pub fn validate(&self) -> Result<(), String> {
        self.limits.validate()?;
        for (name, spec) in &self.harnesses {
            if spec.spawn.argv.is_empty() || spec.spawn.argv[0].is_empty() {
                return Err(format!("harness.{name}.command: must name a program"));
            }
        }
        for (name, profile) in &self.profiles {
            if let Some(missing) =
                profile.harnesses.iter().find(|h| !self.harnesses.contains_key(*h))
            {
                return Err(format!("profile.{name}.harnesses: no harness named \"{missing}\""));
            }
        }
        Ok(())
    }

    /// The intent of a harness that has none persisted: its own `enabled`, or membership of an
    /// autostart profile.
    pub fn default_intent(&self, name: &Id) -> bool {
        self.harnesses.get(name).is_some_and(|s| s.enabled)
            || self.profiles.values().any(|p| p.autostart && p.harnesses.contains(name))
    }
}
