//! Work items: the durable objective (`intent`), its append-only history (`events`), and the
//! pure projection that derives its state and next action from both (`projection`).
//!
//! Nothing here reads a file: callers hand in the parsed intent, the history, one inspection
//! per attempt and the projections of the prerequisites, and get back a projection.

pub mod attempt;
pub mod events;
pub mod intent;
pub mod ledger;
pub mod live;
pub mod projection;
pub mod rulings;

pub use events::{EventKind, Finding, Trigger, WorkEvent};
pub use intent::{WorkIntent, WorkflowRef};
pub use projection::{project, AttemptStatus, FailureClass, NextAction, Projection, WorkState};

/// A validation failure naming the field it is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The field, dotted for nested ones (`acceptance[2]`).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl FieldError {
    /// An error about `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> FieldError {
        FieldError { field: field.into(), message: message.into() }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for FieldError {}

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod tests;
