//! Work items and the runs that advance them: the durable objective (`intent`), its
//! append-only history (`events`), the pure projection that derives its state and next action
//! (`projection`), and everything one workflow run decides: the JSON Lines protocol with the
//! workflow program (`protocol`), one run segment's lifecycle (`segment`), which attempt may
//! start and its manifest, proof and inspection (`run`), agent adapters and how a call's
//! ending is classified (`adapter`, `agent`, `call`), teams (`team`), policy verdicts
//! (`policy`), reply schemas (`schema`), containment plans (`containment`) and a work item's
//! own git worktree (`workspace`).
//!
//! Nothing here reads a file: callers hand in the parsed intent, the history, one inspection
//! per attempt and the projections of the prerequisites, and get back a projection.

pub mod acceptance;
pub mod acp;
pub mod adapter;
pub mod agent;
pub mod approval;
pub mod attempt;
pub mod call;
pub mod candidate;
pub mod cluster;
pub mod containment;
pub mod events;
pub mod history;
pub mod index;
pub(crate) mod indexed;
pub mod intent;
pub mod landing;
pub mod ledger;
pub mod live;
pub mod network;
pub mod next;
pub mod policy;
pub mod projection;
pub mod protocol;
pub mod reading;
pub mod remote;
pub mod rulings;
pub mod run;
pub mod schema;
pub mod segment;
pub mod team;
pub mod transcript;
pub mod usage_limit;
pub mod workspace;

pub use events::{EventKind, Finding, Trigger, WorkEvent};
pub use intent::{WorkIntent, WorkflowRef};
pub use projection::{project, AttemptStatus, FailureClass, NextAction, Projection, WorkState};

pub use crate::error::FieldError;

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod tests;
