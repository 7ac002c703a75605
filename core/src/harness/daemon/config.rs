//! The daemon's configuration as the core sees it: harness specs, profiles and limits,
//! already parsed and validated by the shell (`harness.toml`).

use crate::error::RecordError;
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
    /// How big each file the daemon appends to (events, ledger, logs) grows before it is
    /// rotated, and how many rotated files are kept.
    #[serde(default)]
    pub retention: crate::journal::Retention,
}

impl DaemonConfig {
    /// Checks cross-references and limits; the error names the offending entry.
    pub fn validate(&self) -> Result<(), RecordError> {
        self.limits.validate()?;
        self.retention
            .check()
            .map_err(|(key, why)| RecordError::refused(format!("retention.{key}: {why}")))?;
        for (name, spec) in &self.harnesses {
            if spec.spawn.argv.is_empty() || spec.spawn.argv[0].is_empty() {
                return Err(RecordError::refused(format!(
                    "harness.{name}.command: must name a program"
                )));
            }
        }
        for (name, spec) in &self.harnesses {
            for (key, deps) in [("requires", &spec.requires), ("after", &spec.after)] {
                if let Some(missing) = deps.iter().find(|d| !self.harnesses.contains_key(*d)) {
                    return Err(RecordError::refused(format!(
                        "harness.{name}.{key}: no harness named \"{missing}\""
                    )));
                }
                if deps.contains(name) {
                    return Err(RecordError::refused(format!(
                        "harness.{name}.{key}: a harness cannot wait for itself"
                    )));
                }
            }
        }
        if let Some(cycle) = self.dependency_cycle() {
            return Err(RecordError::refused(format!(
                "dependencies form a cycle: {}",
                cycle.join(" -> ")
            )));
        }
        for (name, profile) in &self.profiles {
            if let Some(missing) =
                profile.harnesses.iter().find(|h| !self.harnesses.contains_key(*h))
            {
                return Err(RecordError::refused(format!(
                    "profile.{name}.harnesses: no harness named \"{missing}\""
                )));
            }
        }
        Ok(())
    }

    /// What `name` waits for before its runs spawn: `requires` and `after` together.
    pub fn dependencies(&self, name: &Id) -> Vec<&Id> {
        let Some(spec) = self.harnesses.get(name) else { return Vec::new() };
        let mut all: Vec<&Id> = spec.requires.iter().chain(&spec.after).collect();
        all.sort();
        all.dedup();
        all
    }

    /// A cycle among the dependencies, spelled from one harness back to it, if there is one.
    fn dependency_cycle(&self) -> Option<Vec<String>> {
        // Depth-first, in name order: deterministic, and small (harnesses are few).
        fn visit<'a>(
            c: &'a DaemonConfig,
            at: &'a Id,
            path: &mut Vec<&'a Id>,
            done: &mut std::collections::BTreeSet<&'a Id>,
        ) -> Option<Vec<String>> {
            if let Some(i) = path.iter().position(|p| *p == at) {
                let mut cycle: Vec<String> = path[i..].iter().map(|p| p.to_string()).collect();
                cycle.push(at.to_string());
                return Some(cycle);
            }
            if !done.insert(at) {
                return None;
            }
            path.push(at);
            for dep in c.dependencies(at) {
                if let Some(cycle) = visit(c, dep, path, done) {
                    return Some(cycle);
                }
            }
            path.pop();
            None
        }
        let mut done = std::collections::BTreeSet::new();
        self.harnesses.keys().find_map(|name| visit(self, name, &mut Vec::new(), &mut done))
    }

    /// True when replacing this configuration by `next` would remove every harness it has
    /// (an empty or unrelated file): a reload that stops everything is asked for explicitly.
    pub(crate) fn removes_every_harness(&self, next: &DaemonConfig) -> bool {
        !self.harnesses.is_empty() && self.harnesses.keys().all(|n| !next.harnesses.contains_key(n))
    }

    /// The intent of a harness that has none persisted: its own `enabled`, or membership of an
    /// autostart profile.
    pub(crate) fn default_intent(&self, name: &Id) -> bool {
        self.harnesses.get(name).is_some_and(|s| s.enabled)
            || self.profiles.values().any(|p| p.autostart && p.harnesses.contains(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reload_removing_every_harness_is_told_apart() {
        let with = |names: &[&str]| DaemonConfig {
            harnesses: names
                .iter()
                .map(|n| (Id::new(n).unwrap(), HarnessSpec::default()))
                .collect(),
            ..DaemonConfig::default()
        };
        assert!(with(&["a", "b"]).removes_every_harness(&with(&[])));
        assert!(with(&["a"]).removes_every_harness(&with(&["c"])));
        assert!(!with(&["a", "b"]).removes_every_harness(&with(&["b"])));
        assert!(!with(&[]).removes_every_harness(&with(&[])), "nothing to stop");
    }
}
