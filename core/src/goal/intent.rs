//! A goal's intent (`.harnery/supervisors/<id>/intent.json`): the root work item, the team by
//! value, the limits and the automation flags, checked and frozen once. Changing any of them
//! means a new goal; a read re-checks the digest, so an edited file is refused loudly.

use crate::error::RecordError;
use crate::hash::sha256_hex;
use crate::ids::Id;
use crate::time::WallTime;
use crate::work::team::Team;
use crate::work::FieldError;
use serde::{Deserialize, Serialize};

/// The first line of a goal's `events.jsonl`, written before its intent: the intent's
/// digest, so an intent edited with its digest recomputed is still told apart.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoalCreated {
    /// Always `goal.created`.
    pub event: String,
    /// The goal.
    pub goal_id: Id,
    /// The digest of the intent created.
    pub intent_sha256: String,
}

impl GoalCreated {
    /// The record of `intent`'s creation.
    pub fn of(intent: &GoalIntent) -> GoalCreated {
        GoalCreated {
            event: "goal.created".into(),
            goal_id: intent.id.clone(),
            intent_sha256: intent.sha256.clone(),
        }
    }
}

/// Checks that `intent` (its file `shown`) is the one its goal's journal says was created:
/// its one `goal.created` record names its id and digest. A second creation record is damage
/// (a goal is created once, under its lease, and a creation a kill cut short is cleared before
/// the next), never a newer truth. `None` is a goal created before goals had a journal, which
/// is read as it was.
pub fn check_created(
    intent: &GoalIntent,
    shown: &str,
    created: Option<&[GoalCreated]>,
) -> Result<(), RecordError> {
    let Some(created) = created else { return Ok(()) };
    if created.len() > 1 {
        return Err(RecordError::invalid(
            shown,
            format!(
                "events.jsonl holds {} goal.created records; a goal is created once, so its \
                 creation record was written over",
                created.len()
            ),
        ));
    }
    if created.iter().any(|c| c.goal_id == intent.id && c.intent_sha256 == intent.sha256) {
        return Ok(());
    }
    Err(RecordError::invalid(
        shown,
        format!(
            "is not the intent this goal was created with: events.jsonl records no \
             goal.created with sha256 {}; it was changed after creation",
            intent.sha256.get(..12).unwrap_or(&intent.sha256)
        ),
    ))
}

/// Schema version of a goal intent written today.
pub(crate) const GOAL_VERSION: u32 = 1;
/// Most specialists a goal's team may have.
pub(crate) const TEAM_MAX: usize = 32;

/// Longest instructions of one of a new goal's specialists, in bytes.
pub(crate) const INSTRUCTIONS_MAX: usize = 4_000;

/// Checks the team of a goal being created: at least one specialist, each with instructions
/// of 1 to [`INSTRUCTIONS_MAX`] bytes (the prompt every call of that specialist starts with).
/// Only creation checks this; intents already written are read as they were frozen.
pub fn check_new_team(team: &Team) -> Result<(), FieldError> {
    if team.is_empty() {
        return Err(FieldError::new("team", "needs at least one specialist"));
    }
    for (role, profile) in team {
        let instructions = profile.instructions.as_deref().map_or("", str::trim);
        if instructions.is_empty() {
            return Err(FieldError::new(format!("{role}.instructions"), "is required"));
        }
        if instructions.len() > INSTRUCTIONS_MAX {
            let detail = format!("may be at most {INSTRUCTIONS_MAX} bytes");
            return Err(FieldError::new(format!("{role}.instructions"), detail));
        }
    }
    Ok(())
}

/// Refuses a team whose specialists would all run on one adapter while another one is live
/// on this machine (installed and logged in to its subscription): one subscription would then
/// carry every call of the goal, and its usage limit would stop the whole team, while another
/// sat idle. `live` names the live adapters, sorted. Specialists who pin no adapter share the
/// run's `--harness`, so an unpinned team runs on one adapter whatever the host passes.
/// A team of one specialist, or one that pins two adapters (or pins some and leaves others to
/// the host), spreads or cannot.
pub fn check_adapter_spread(team: &Team, live: &[String]) -> Result<(), FieldError> {
    if team.len() < 2 {
        return Ok(());
    }
    let pins: std::collections::BTreeSet<Option<&str>> =
        team.values().map(|p| p.adapter.as_deref()).collect();
    let one = match pins.iter().collect::<Vec<_>>().as_slice() {
        [one] => **one,
        _ => return Ok(()),
    };
    let idle: Vec<&str> =
        live.iter().map(String::as_str).filter(|name| Some(*name) != one).collect();
    let how = match one {
        // Unpinned, the team runs on whichever adapter a run names: spreading needs two live.
        None if idle.len() >= 2 => "no specialist pins a harness, so all share the run's --harness",
        Some(_) if !idle.is_empty() => "every specialist pins the same harness",
        _ => return Ok(()),
    };
    let one = one.map_or(String::new(), |h| format!(" ({h})"));
    Err(FieldError::new(
        "team",
        format!(
            "{how}{one} while {} {} live on this machine; pin a role to another with \
             \"harness\", or pass --allow-single-adapter",
            idle.join(", "),
            if idle.len() == 1 { "is" } else { "are" }
        ),
    ))
}

/// The limits a goal runs inside.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoalLimits {
    /// Cycles one `run` may take (a `tick` takes one).
    pub max_cycles: u32,
    /// Wall time one `run` may take, checked between cycles.
    pub max_runtime_ms: u64,
    /// Work items dispatched at once.
    pub max_parallel_work: u32,
    /// Charged attempts over every governed item, all generations.
    pub max_total_attempts: u32,
    /// Agent calls one attempt may make.
    pub max_agents_per_work: u32,
    /// Agent calls of one attempt in flight at once.
    pub agent_concurrency: u32,
}

impl Default for GoalLimits {
    fn default() -> GoalLimits {
        GoalLimits {
            max_cycles: 50,
            max_runtime_ms: 14_400_000,
            max_parallel_work: 1,
            max_total_attempts: 100,
            max_agents_per_work: 20,
            agent_concurrency: 4,
        }
    }
}

impl GoalLimits {
    /// Checks each limit against its allowed range.
    pub fn validate(&self) -> Result<(), FieldError> {
        let check = |field: &str, value: u64, lo: u64, hi: u64| {
            if (lo..=hi).contains(&value) {
                Ok(())
            } else {
                Err(FieldError::new(
                    format!("limits.{field}"),
                    format!("must be {lo} to {hi}, not {value}"),
                ))
            }
        };
        check("max_cycles", self.max_cycles.into(), 1, 1_000)?;
        check("max_runtime_ms", self.max_runtime_ms, 1, 604_800_000)?;
        check("max_parallel_work", self.max_parallel_work.into(), 1, 20)?;
        check("max_total_attempts", self.max_total_attempts.into(), 1, 10_000)?;
        check("max_agents_per_work", self.max_agents_per_work.into(), 1, 1_000)?;
        check("agent_concurrency", self.agent_concurrency.into(), 1, 100)
    }
}

/// What the supervisor may do without a person. Every flag fails closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Automation {
    /// Accept an item whose proof passes (otherwise it waits in review).
    pub accept_passing_proof: bool,
    /// Resume an attempt whose approval was ruled on.
    pub resume_approved: bool,
    /// Retry a blocked item that may be retried, inside every ceiling.
    pub retry_blocked: bool,
    /// Land accepted work made in a worktree (`work land`), as it is accepted: prerequisites
    /// are accepted, and so landed, before what depends on them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub land_accepted: bool,
}

impl Default for Automation {
    fn default() -> Automation {
        Automation {
            accept_passing_proof: false,
            resume_approved: true,
            retry_blocked: false,
            land_accepted: false,
        }
    }
}

/// The frozen intent of a goal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoalIntent {
    /// [`GOAL_VERSION`].
    pub schema_version: u32,
    /// The goal.
    pub id: Id,
    /// What it is for.
    pub title: String,
    /// The work item whose acceptance is the goal's success; none for a mission that starts
    /// from its objective (its first plan makes the first root).
    pub root_work_id: Option<Id>,
    /// The specialists every governed attempt gets, by value.
    pub team: Team,
    /// Its limits.
    pub limits: GoalLimits,
    /// Its automation.
    pub automation: Automation,
    /// When it was created.
    pub created_at: WallTime,
    /// Bounded replanning, when the goal allows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replanning: Option<super::plan::ReplanningPolicy>,
    /// A mission: an objective reached through milestones the planner proposes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mission: Option<super::plan::Mission>,
    /// The resource limits of every run the goal dispatches, over the root's configured
    /// ones, frozen with the goal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_limits: Option<crate::limits::ResourceLimits>,
    /// What every run the goal dispatches may reach over the network, frozen with the goal
    /// over the root's configuration and any command's `--network`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<crate::work::network::NetworkPolicy>,
    /// SHA-256 of everything above, so an edit is noticed.
    pub sha256: String,
}

impl GoalIntent {
    /// A checked, digested intent.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: Id,
        title: String,
        root_work_id: Option<Id>,
        team: Team,
        limits: GoalLimits,
        automation: Automation,
        created_at: WallTime,
    ) -> Result<GoalIntent, FieldError> {
        let mut intent = GoalIntent {
            schema_version: GOAL_VERSION,
            id,
            title,
            root_work_id,
            team,
            limits,
            automation,
            created_at,
            replanning: None,
            mission: None,
            resource_limits: None,
            network: None,
            sha256: String::new(),
        };
        intent.sha256 = intent.digest();
        intent.validate_fields()?;
        Ok(intent)
    }

    /// The digest of the intent's content (everything but the digest itself).
    pub fn digest(&self) -> String {
        let mut body = serde_json::json!([
            self.schema_version,
            self.id,
            self.title,
            self.root_work_id,
            self.team,
            self.limits,
            self.automation,
            self.created_at,
        ]);
        // Appended only when present, so intents without it keep their digest.
        if let (Some(policy), Some(parts)) = (&self.replanning, body.as_array_mut()) {
            parts.push(serde_json::json!(policy));
        }
        if let (Some(mission), Some(parts)) = (&self.mission, body.as_array_mut()) {
            parts.push(serde_json::json!(["mission", mission]));
        }
        if let (Some(limits), Some(parts)) = (&self.resource_limits, body.as_array_mut()) {
            parts.push(serde_json::json!(["resource_limits", limits]));
        }
        if let (Some(network), Some(parts)) = (&self.network, body.as_array_mut()) {
            parts.push(serde_json::json!(["network", network]));
        }
        sha256_hex(crate::hash::canonical_json(&body).as_bytes())
    }

    /// The same intent with a replanning policy, checked against the team and agent cap.
    pub fn with_replanning(
        mut self,
        policy: super::plan::ReplanningPolicy,
    ) -> Result<GoalIntent, FieldError> {
        let team: Vec<&str> = self.team.keys().map(String::as_str).collect();
        policy.validate(&team, self.limits.max_agents_per_work)?;
        self.replanning = Some(policy);
        self.sha256 = self.digest();
        self.validate_fields()?;
        Ok(self)
    }

    /// The same intent with resource limits for its runs, frozen with it.
    pub fn with_resource_limits(
        mut self,
        limits: crate::limits::ResourceLimits,
    ) -> Result<GoalIntent, FieldError> {
        limits
            .check()
            .map_err(|e| FieldError::new(format!("resource_limits.{}", e.field), e.message))?;
        self.resource_limits = Some(limits);
        self.sha256 = self.digest();
        Ok(self)
    }

    /// The same intent with a network policy for its runs, frozen with it.
    pub fn with_network(mut self, network: crate::work::network::NetworkPolicy) -> GoalIntent {
        self.network = Some(network);
        self.sha256 = self.digest();
        self
    }

    /// The same intent with a mission (which needs a replanning policy already).
    pub fn with_mission(mut self, mission: super::plan::Mission) -> Result<GoalIntent, FieldError> {
        mission.validate()?;
        self.mission = Some(mission);
        self.sha256 = self.digest();
        self.validate_fields()?;
        Ok(self)
    }

    /// Checks every field, the rules between root, mission and replanning, and the digest.
    pub fn validate(&self) -> Result<(), FieldError> {
        self.validate_fields()?;
        match (&self.mission, &self.replanning, &self.root_work_id) {
            (Some(_), None, _) => {
                Err(FieldError::new("mission", "a mission needs a replanning policy"))
            }
            (None, _, None) => {
                Err(FieldError::new("root_work_id", "only a mission may start without a root"))
            }
            (Some(m), Some(r), _) if r.max_replans <= m.max_milestones => Err(FieldError::new(
                "replanning.max_replans",
                format!(
                    "must exceed the mission's max_milestones ({}), leaving a plan to complete it",
                    m.max_milestones
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Checks each field on its own and the digest; an intent being built checks these, and
    /// the rules between fields once it is complete.
    fn validate_fields(&self) -> Result<(), FieldError> {
        if self.schema_version != GOAL_VERSION {
            return Err(FieldError::new(
                "schema_version",
                format!("{} is not supported", self.schema_version),
            ));
        }
        let title = self.title.trim();
        if title.is_empty() || title.len() > 200 {
            return Err(FieldError::new("title", "must be 1 to 200 bytes"));
        }
        if self.team.len() > TEAM_MAX {
            return Err(FieldError::new("team", format!("at most {TEAM_MAX} specialists")));
        }
        self.limits.validate()?;
        if self.sha256 != self.digest() {
            return Err(FieldError::new(
                "sha256",
                "does not match the intent: it was edited after creation",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn goal() -> GoalIntent {
        let id = |s: &str| Id::new(s).expect("valid");
        let limits = GoalLimits::default();
        GoalIntent::new(
            id("g1"),
            "Ship it".into(),
            Some(id("w1")),
            Team::new(),
            limits,
            Automation::default(),
            WallTime(5),
        )
        .expect("a valid goal")
    }

    #[test]
    fn a_team_on_one_adapter_is_refused_only_while_another_is_live() {
        use crate::work::team::Specialist;
        let team = |pins: &[Option<&str>]| -> Team {
            let profile = |h: &Option<&str>| Specialist {
                adapter: h.map(str::to_owned),
                ..Specialist::default()
            };
            pins.iter().enumerate().map(|(i, h)| (format!("r{i}"), profile(h))).collect()
        };
        let live = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let both = live(&["claude-code", "codex"]);
        // All pinned to one, another live: refused, naming the idle one.
        let e = check_adapter_spread(&team(&[Some("codex"), Some("codex")]), &both)
            .unwrap_err()
            .to_string();
        assert!(e.contains("pins the same harness (codex)") && e.contains("claude-code is live"));
        assert!(e.contains("--allow-single-adapter"), "{e}");
        // Nobody pinned: one adapter whatever the host passes; refused when two are live.
        let e = check_adapter_spread(&team(&[None, None]), &both).unwrap_err().to_string();
        assert!(e.contains("no specialist pins") && e.contains("claude-code, codex are live"));
        assert!(check_adapter_spread(&team(&[None, None]), &live(&["codex"])).is_ok());
        // Nothing else live, one specialist, two adapters pinned, or pins mixed with the host's.
        assert!(
            check_adapter_spread(&team(&[Some("codex"), Some("codex")]), &live(&["codex"])).is_ok()
        );
        assert!(check_adapter_spread(&team(&[Some("codex")]), &both).is_ok());
        assert!(check_adapter_spread(&team(&[Some("codex"), Some("claude-code")]), &both).is_ok());
        assert!(check_adapter_spread(&team(&[Some("codex"), None]), &both).is_ok());
    }

    #[test]
    fn resource_limits_are_digested_only_when_frozen() {
        let plain = goal();
        let limits = crate::limits::ResourceLimits { tasks: Some(64), ..Default::default() };
        let bounded = goal().with_resource_limits(limits).unwrap();
        assert_eq!(plain.sha256, plain.digest(), "a goal without limits keeps its digest");
        assert_ne!(bounded.sha256, plain.sha256);
        assert!(bounded.validate().is_ok());
        let mut edited = bounded.clone();
        edited.resource_limits = Some(crate::limits::ResourceLimits::default());
        assert_ne!(edited.digest(), bounded.sha256, "an edit of the limits is caught");
        let zero = crate::limits::ResourceLimits { tasks: Some(0), ..Default::default() };
        assert_eq!(goal().with_resource_limits(zero).unwrap_err().field, "resource_limits.tasks");
    }

    #[test]
    fn defaults_match_the_documented_table_and_fail_closed() {
        let l = GoalLimits::default();
        assert_eq!((l.max_cycles, l.max_runtime_ms, l.max_parallel_work), (50, 14_400_000, 1));
        assert_eq!(
            (l.max_total_attempts, l.max_agents_per_work, l.agent_concurrency),
            (100, 20, 4)
        );
        let a = Automation::default();
        assert!(!a.accept_passing_proof && a.resume_approved && !a.retry_blocked);
    }

    #[test]
    fn limits_out_of_range_name_their_field() {
        let bad = GoalLimits { max_parallel_work: 21, ..GoalLimits::default() };
        assert_eq!(bad.validate().unwrap_err().field, "limits.max_parallel_work");
        let bad = GoalLimits { max_total_attempts: 0, ..GoalLimits::default() };
        assert_eq!(bad.validate().unwrap_err().field, "limits.max_total_attempts");
    }

    #[test]
    fn an_edited_intent_is_refused() {
        let mut g = goal();
        assert!(g.validate().is_ok());
        g.limits.max_total_attempts = 10_000;
        assert_eq!(g.validate().unwrap_err().field, "sha256");
        let back: GoalIntent =
            serde_json::from_str(&serde_json::to_string(&goal()).unwrap()).unwrap();
        assert!(back.validate().is_ok(), "a written intent reads back valid");
    }

    #[test]
    fn an_intent_edited_with_its_digest_recomputed_is_refused_by_its_journal() {
        let g = goal();
        let created = [GoalCreated::of(&g)];
        assert_eq!(check_created(&g, "intent.json", Some(&created)), Ok(()));
        let mut forged = g.clone();
        forged.automation.accept_passing_proof = true;
        forged.sha256 = forged.digest();
        assert!(forged.validate().is_ok(), "its own digest holds");
        let err = check_created(&forged, "intent.json", Some(&created)).unwrap_err().to_string();
        assert!(err.contains("changed after creation"), "{err}");
        assert_eq!(
            check_created(&forged, "intent.json", None),
            Ok(()),
            "a goal from before journals"
        );
        let second = [GoalCreated::of(&g), GoalCreated::of(&forged)];
        let err = check_created(&forged, "intent.json", Some(&second)).unwrap_err().to_string();
        assert!(err.contains("2 goal.created"), "a second creation is damage: {err}");
    }
}
