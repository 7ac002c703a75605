//! Work items: the durable objective (`intent`), its append-only history (`events`), and the
//! pure projection that derives its state and next action from both (`projection`).
//!
//! Nothing here reads a file: callers hand in the parsed intent, the history, one inspection
//! per attempt and the projections of the prerequisites, and get back a projection.

pub mod attempt;
pub mod events;
pub mod history;
pub mod intent;
pub mod ledger;
pub mod live;
pub mod next;
pub mod projection;
pub mod rulings;
pub mod segment;

pub use events::{EventKind, Finding, Trigger, WorkEvent};
pub use intent::{WorkIntent, WorkflowRef};
pub use projection::{project, AttemptStatus, FailureClass, NextAction, Projection, WorkState};

pub use crate::error::FieldError;

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod tests;
