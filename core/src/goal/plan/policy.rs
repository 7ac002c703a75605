//! The replanning policy a goal freezes: the planner, its limits, the template catalog, the
//! review panel, and a mission's milestones.

use crate::work::FieldError;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Most templates a policy may hold.
pub(crate) const TEMPLATES_MAX: usize = 20;
/// Longest proposal key.
pub(crate) const KEY_MAX: usize = 32;
/// Most dependencies one proposed item may name.
pub(crate) const DEPENDENCIES_MAX: usize = 50;

/// A workflow a planner may use, frozen by absolute path and SHA-256.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Template {
    /// The workflow program's absolute path.
    pub path: String,
    /// SHA-256 of its bytes when frozen.
    pub sha256: String,
    /// The charged-attempt ceiling of work made from it.
    pub max_attempts: u32,
    /// Whether work made from it may be a plan's final outcome.
    pub root: bool,
}

/// The independent review panel of a policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewPanel {
    /// Reviewers, in order, distinct from the planner.
    pub reviewer_specialists: Vec<String>,
    /// Revision rounds after a blocking review.
    pub max_revision_rounds: u32,
}

/// A goal's frozen replanning policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplanningPolicy {
    /// The specialist who plans (in the goal's team).
    pub planner_specialist: String,
    /// Apply valid proposals without a person.
    pub auto_apply: bool,
    /// Plans a goal may make (charged ones count).
    pub max_replans: u32,
    /// Work items one plan may add.
    pub max_work_items_per_plan: u32,
    /// Work items every plan together may add.
    pub max_total_work_items: u32,
    /// The catalog, by template id.
    pub templates: BTreeMap<String, Template>,
    /// An optional review panel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<ReviewPanel>,
}

impl ReplanningPolicy {
    /// Checks the policy against its bounds and the goal's team and agent cap.
    pub fn validate(&self, team: &[&str], max_agents_per_work: u32) -> Result<(), FieldError> {
        let range = |field: &str, v: u32, lo: u32, hi: u32| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(FieldError::new(
                    format!("replanning.{field}"),
                    format!("must be {lo} to {hi}, not {v}"),
                ))
            }
        };
        if !team.contains(&self.planner_specialist.as_str()) {
            return Err(FieldError::new(
                "replanning.planner_specialist",
                format!("{:?} is not in the team", self.planner_specialist),
            ));
        }
        range("max_replans", self.max_replans, 1, 100)?;
        range("max_total_work_items", self.max_total_work_items, 1, 100)?;
        range(
            "max_work_items_per_plan",
            self.max_work_items_per_plan,
            1,
            25.min(self.max_total_work_items),
        )?;
        if self.templates.is_empty() || self.templates.len() > TEMPLATES_MAX {
            return Err(FieldError::new(
                "replanning.templates",
                format!("must hold 1 to {TEMPLATES_MAX} templates"),
            ));
        }
        for (id, t) in &self.templates {
            let at = |f: &str| format!("replanning.templates.{id}.{f}");
            if !valid_key(id) {
                return Err(FieldError::new(
                    format!("replanning.templates.{id}"),
                    "ids are 1 to 32 lowercase letters, digits and '-'",
                ));
            }
            if !t.path.starts_with('/') {
                return Err(FieldError::new(at("workflow"), "must resolve to an absolute path"));
            }
            range(&format!("templates.{id}.max_attempts"), t.max_attempts, 1, 100)?;
        }
        if !self.templates.values().any(|t| t.root) {
            return Err(FieldError::new(
                "replanning.templates",
                "at least one template must be root: true",
            ));
        }
        if let Some(r) = &self.review {
            let n = r.reviewer_specialists.len();
            if n == 0 || n > 5 {
                return Err(FieldError::new(
                    "replanning.review.reviewer_specialists",
                    "must name 1 to 5 reviewers",
                ));
            }
            let unique: BTreeSet<&String> = r.reviewer_specialists.iter().collect();
            if unique.len() != n {
                return Err(FieldError::new(
                    "replanning.review.reviewer_specialists",
                    "reviewers must be distinct",
                ));
            }
            for s in &r.reviewer_specialists {
                if s == &self.planner_specialist || !team.contains(&s.as_str()) {
                    return Err(FieldError::new(
                        "replanning.review.reviewer_specialists",
                        format!("{s:?} must be in the team and not the planner"),
                    ));
                }
            }
            range("review.max_revision_rounds", r.max_revision_rounds, 0, 3)?;
            let worst = 1 + n as u32 * (r.max_revision_rounds + 1) + r.max_revision_rounds;
            if worst > max_agents_per_work {
                return Err(FieldError::new("replanning.review", format!("its worst case of {worst} agent calls exceeds max_agents_per_work ({max_agents_per_work})")));
            }
        }
        Ok(())
    }
}

/// A proposal key: 1 to [`KEY_MAX`] lowercase letters, digits and `-`, not starting with `-`.
pub(crate) fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= KEY_MAX
        && !key.starts_with('-')
        && key.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// A mission: an objective with acceptance statements, reached through at most
/// `max_milestones` milestones the planner proposes one at a time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mission {
    /// What the mission achieves.
    pub objective: String,
    /// How to tell it is achieved.
    pub acceptance: Vec<String>,
    /// Most milestones.
    #[serde(default = "default_milestones")]
    pub max_milestones: u32,
}

fn default_milestones() -> u32 {
    4
}

impl Mission {
    /// Checks the mission's fields.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.objective.trim().is_empty() || self.objective.len() > 4_000 {
            return Err(FieldError::new("mission.objective", "must be 1 to 4000 bytes"));
        }
        let unique: BTreeSet<&String> = self.acceptance.iter().collect();
        if self.acceptance.is_empty()
            || self.acceptance.len() > 50
            || unique.len() != self.acceptance.len()
        {
            return Err(FieldError::new(
                "mission.acceptance",
                "must hold 1 to 50 distinct statements",
            ));
        }
        if !(1..=20).contains(&self.max_milestones) {
            return Err(FieldError::new("mission.max_milestones", "must be 1 to 20"));
        }
        Ok(())
    }
}

/// A milestone a mission's plan proposes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Milestone {
    /// 1, 2, …: the next after those completed.
    pub sequence: u32,
    /// Its title.
    pub title: String,
    /// What it achieves.
    pub objective: String,
    /// How to tell.
    pub acceptance: Vec<String>,
}
