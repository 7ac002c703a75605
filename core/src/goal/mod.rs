//! Goals: a supervisor drives a work graph to accepted completion inside frozen limits. The
//! frozen intent (`intent`), the projection of the goal from its graph's work projections and
//! what a tick may dispatch or accept (`projection`), the graph's progress fingerprint
//! (`fingerprint`), what a person types next (`next`), and the loop's stop rules and the goal fingerprint (`cycle`). Nothing
//! here reads a file.

pub mod cycle;
pub mod engine;
pub mod fingerprint;
pub mod index;
pub mod intent;
pub mod next;
pub mod plan;
pub mod projection;
pub mod spend;

pub use cycle::{goal_fingerprint, Mode, Stop, StopReason};
pub(crate) use fingerprint::progress_fingerprint;
pub use intent::{Automation, GoalIntent, GoalLimits};
pub use projection::{
    acceptances, candidates, project_goal, DispatchAction, GoalNext, GoalProjection, GoalState,
    GraphItem,
};

#[cfg(test)]
mod tests;
