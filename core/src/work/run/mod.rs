//! One workflow run, decided purely: which attempt a `run` or `retry` may start, the run's
//! manifest (`run.json`, frozen before the spawn), the fold of the workflow's messages into
//! the replies the host owes and the proof (`proof.json`) the run ends in, and how a work
//! read inspects an attempt from those records.

use super::acceptance::{roll_up, Acceptance};
use super::agent::{run_class, AdapterSpec, CallOutcome};
use super::approval::{ApprovalRequest, Ruling, APPROVAL_VERSION};
use super::policy::{Evaluation, FrozenPolicy, Request, Verdict};
use super::protocol::{Criterion, Evidence, FromWorkflow};
use super::team::{Dispatch, Team};
use crate::ids::Id;
use crate::time::WallTime;
use crate::work::events::{Disposition, Trigger};
use crate::work::projection::{AttemptStatus, FailureClass, Projection, WorkState};
use crate::work::{WorkIntent, WorkflowRef};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Schema version of `run.json` and `proof.json` written today. From version 2 a run's proof
/// counts only with the seal (`seal.json`) harn writes just before it; version 1 runs had none.
pub const RUN_VERSION: u32 = 2;
/// Longest error text a proof keeps (its tail).
pub(crate) const ERROR_MAX: usize = 2_000;

mod admission;
mod fold;
mod inspection;
mod manifest;
pub mod planning;
pub mod planning_attempt;
mod proof;

pub(crate) use admission::*;
pub use fold::*;
pub use inspection::*;
pub use manifest::*;
pub use planning::PlanningProof;
pub use planning::PlanningStep;
pub use planning::StepKind;
pub use proof::*;

#[cfg(test)]
mod tests;
