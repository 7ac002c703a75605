//! What contains a run's processes, as reached when it started (recorded in `run.json` and
//! the proof): how they are held and killed (a cgroup of the run's own, or its process groups)
//! and what keeps them from writing harn's records (Landlock, a mount namespace binding
//! `.harnery/` read-only, or nothing, and why). A policy may require confinement; the check is
//! here, so a run that cannot be confined is refused before anything is recorded.

use serde::{Deserialize, Serialize};

/// How a run's processes are held together and killed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Holding {
    /// A cgroup of the run's own: everything it starts, however it detaches, is killed with it.
    Cgroup,
    /// Its process groups, and the processes that still carry its `HARN_RUN_ID`.
    #[default]
    ProcessGroup,
}

/// What a run's processes could and could not do to harn's records, and how they were held.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Containment {
    /// How its processes are held and killed.
    pub holding: Holding,
    /// Why not a cgroup, when not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holding_why: Option<String>,
    /// The Landlock ABI version in force, when Landlock confines the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landlock: Option<u32>,
    /// True when a mount namespace binds the root's `.harnery/` read-only for the run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub namespace: bool,
    /// True when nothing the run starts can create, write, rename or remove anything under
    /// `.harnery/`.
    pub confined: bool,
    /// Why it is not confined, or what confinement lacks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl Containment {
    /// In a few words: `landlock v7 + namespace`, `landlock v7`, or `none (why)`.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if let Some(abi) = self.landlock {
            parts.push(format!("landlock v{abi}"));
        }
        if self.namespace {
            parts.push("namespace".to_owned());
        }
        match (self.confined, &self.why) {
            (true, _) => parts.join(" + "),
            (false, Some(why)) => format!("none ({why})"),
            (false, None) => "none".to_owned(),
        }
    }
}

/// Whether a run must be confined.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Requirement {
    /// Confined where the machine allows; recorded either way.
    #[default]
    Preferred,
    /// Refused, before anything is recorded, where it cannot be confined.
    Required,
}

/// Refuses a run the policy requires to be confined when it cannot be; the error says why
/// and that nothing ran.
pub fn check(required: Requirement, reached: &Containment) -> Result<(), String> {
    if required == Requirement::Required && !reached.confined {
        return Err(format!(
            "the policy requires containment, and this run cannot be contained here: {}; \
             nothing ran and no attempt was charged",
            reached.why.as_deref().unwrap_or("no confinement is available")
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_required_containment_refuses_an_unconfined_run_and_says_why() {
        let none = Containment {
            why: Some("no Landlock in this kernel".into()),
            ..Containment::default()
        };
        assert_eq!(none.summary(), "none (no Landlock in this kernel)");
        assert!(check(Requirement::Preferred, &none).is_ok());
        let err = check(Requirement::Required, &none).unwrap_err();
        assert!(err.contains("no Landlock in this kernel") && err.contains("nothing ran"), "{err}");
        let full = Containment {
            holding: Holding::Cgroup,
            landlock: Some(7),
            namespace: true,
            confined: true,
            ..Containment::default()
        };
        assert_eq!(full.summary(), "landlock v7 + namespace");
        assert!(check(Requirement::Required, &full).is_ok());
    }
}
