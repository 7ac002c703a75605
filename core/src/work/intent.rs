//! The work intent: what a work item is for, frozen at creation and never edited.

use super::FieldError;
use crate::ids::Id;
use crate::time::WallTime;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Schema version of `intent.json` written today: 3 carries its own digest. Version 2,
/// without one, is still read.
pub const INTENT_VERSION: u32 = 3;
/// Longest title, in characters.
pub(crate) const TITLE_MAX: usize = 200;
/// Longest objective, in characters.
pub(crate) const OBJECTIVE_MAX: usize = 4000;
/// Most acceptance statements.
pub(crate) const ACCEPTANCE_MAX: usize = 50;
/// Longest acceptance statement, in characters.
pub(crate) const STATEMENT_MAX: usize = 500;
/// Most prerequisites.
pub(crate) const DEPENDENCIES_MAX: usize = 50;
/// Largest attempt budget.
pub(crate) const ATTEMPTS_MAX: u32 = 100;

/// The workflow a work item runs, frozen by path and content digest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkflowRef {
    /// Absolute path of the workflow program.
    pub path: String,
    /// SHA-256 of its bytes, lowercase hex; a changed file is refused before any attempt.
    pub sha256: String,
}

/// Where a planned work item came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// The goal whose plan made it.
    pub goal: Id,
    /// The plan.
    pub plan: String,
}

/// A work item's intent (`intent.json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkIntent {
    /// [`INTENT_VERSION`].
    pub schema_version: u32,
    /// The work id.
    pub id: Id,
    /// A short title.
    pub title: String,
    /// What must be achieved.
    pub objective: String,
    /// Human statements of acceptance, handed to the workflow, never evaluated by harn.
    #[serde(default)]
    pub acceptance: Vec<String>,
    /// Work items that must be accepted before this one runs.
    #[serde(default)]
    pub dependencies: Vec<Id>,
    /// The workflow program.
    pub workflow: WorkflowRef,
    /// Budget of charged attempts (1..=100).
    pub max_attempts: u32,
    /// Consecutive uncharged (upstream) attempts tolerated (1..=100).
    pub max_uncharged_attempts: u32,
    /// When it was created.
    pub created_at: WallTime,
    /// SHA-256 of everything above (version 3), so an edit is noticed; `work.created`
    /// records it too, so an edit that recomputes it is noticed as well.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Strict acceptance: an acceptance statement no evidence cites counts as unknown, so the
    /// proof does not pass. Off by default: the statements are context shown to the workflow
    /// and in the proof, and only criteria the workflow declares (or evidence cites) decide.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub strict_acceptance: bool,
    /// Where the item came from when not from a person's `work create`: the plan and goal
    /// that made it. Frozen with the intent, so a planned item's provenance is as checkable
    /// as its workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
}

impl WorkIntent {
    /// The digest of the intent's content: its compact JSON without the digest itself.
    pub fn digest(&self) -> String {
        let body = WorkIntent { sha256: None, ..self.clone() };
        crate::hash::sha256_hex(&serde_json::to_vec(&body).expect("intents serialize"))
    }

    /// The same intent with its digest filled in, as it is written.
    pub fn sealed(mut self) -> WorkIntent {
        self.sha256 = Some(self.digest());
        self
    }

    /// Checks every bound of the intent on its own, and its digest; the error names the field.
    pub fn validate(&self) -> Result<(), FieldError> {
        if ![2, INTENT_VERSION].contains(&self.schema_version) {
            return Err(FieldError::new(
                "schema_version",
                format!("must be 2 or {INTENT_VERSION}"),
            ));
        }
        text("title", &self.title, TITLE_MAX)?;
        text("objective", &self.objective, OBJECTIVE_MAX)?;
        if self.acceptance.len() > ACCEPTANCE_MAX {
            return Err(FieldError::new(
                "acceptance",
                format!("at most {ACCEPTANCE_MAX} statements"),
            ));
        }
        for (i, s) in self.acceptance.iter().enumerate() {
            text(&format!("acceptance[{i}]"), s, STATEMENT_MAX)?;
        }
        self.validate_dependencies()?;
        if !self.workflow.path.starts_with('/') {
            return Err(FieldError::new("workflow.path", "must be an absolute path"));
        }
        let digest_ok = self.workflow.sha256.len() == 64
            && self.workflow.sha256.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
        if !digest_ok {
            return Err(FieldError::new("workflow.sha256", "must be 64 lowercase hex digits"));
        }
        budget("max_attempts", self.max_attempts)?;
        budget("max_uncharged_attempts", self.max_uncharged_attempts)?;
        match (self.schema_version, &self.sha256) {
            (INTENT_VERSION, Some(d)) if *d == self.digest() => Ok(()),
            (INTENT_VERSION, Some(_)) => Err(FieldError::new(
                "sha256",
                "does not match the intent: it was edited after creation",
            )),
            (INTENT_VERSION, None) => {
                Err(FieldError::new("sha256", "is missing from a version 3 intent"))
            }
            (_, None) => Ok(()),
            (_, Some(_)) => Err(FieldError::new("sha256", "a version 2 intent carries no digest")),
        }
    }

    fn validate_dependencies(&self) -> Result<(), FieldError> {
        if self.dependencies.len() > DEPENDENCIES_MAX {
            return Err(FieldError::new("dependencies", format!("at most {DEPENDENCIES_MAX}")));
        }
        let mut seen = BTreeSet::new();
        for d in &self.dependencies {
            if *d == self.id {
                return Err(FieldError::new("dependencies", "a work item cannot depend on itself"));
            }
            if !seen.insert(d) {
                return Err(FieldError::new("dependencies", format!("{d} is listed twice")));
            }
        }
        Ok(())
    }
}

fn text(field: &str, value: &str, max: usize) -> Result<(), FieldError> {
    if value.trim().is_empty() || value.trim() != value {
        return Err(FieldError::new(field, "must be non-empty and trimmed"));
    }
    if value.chars().count() > max {
        return Err(FieldError::new(field, format!("at most {max} characters")));
    }
    Ok(())
}

fn budget(field: &str, n: u32) -> Result<(), FieldError> {
    if !(1..=ATTEMPTS_MAX).contains(&n) {
        return Err(FieldError::new(field, format!("must be 1 to {ATTEMPTS_MAX}")));
    }
    Ok(())
}

/// Refuses `dependencies` of a new work item `id` that do not exist or would close a cycle.
/// `prerequisites_of` returns the dependencies of an existing item, `None` when it does not
/// exist. Walks at most `limit` items, so a huge graph cannot hang the check.
pub fn check_dependency_graph(
    id: &Id,
    dependencies: &[Id],
    prerequisites_of: &dyn Fn(&Id) -> Option<Vec<Id>>,
    limit: usize,
) -> Result<(), FieldError> {
    let mut stack: Vec<Id> = Vec::new();
    for d in dependencies {
        if prerequisites_of(d).is_none() {
            return Err(FieldError::new("dependencies", format!("no work item {d}")));
        }
        stack.push(d.clone());
    }
    let mut seen = BTreeSet::new();
    while let Some(next) = stack.pop() {
        if next == *id {
            return Err(FieldError::new(
                "dependencies",
                format!("{id} would depend on itself through {next}"),
            ));
        }
        if !seen.insert(next.clone()) {
            continue;
        }
        if seen.len() > limit {
            return Err(FieldError::new(
                "dependencies",
                format!("the graph is larger than {limit} items"),
            ));
        }
        stack.extend(prerequisites_of(&next).unwrap_or_default());
    }
    Ok(())
}
