//! Bounded replanning: the replanning policy a goal freezes (`policy`), the planner's
//! proposal and its host-side validation (`proposal`), a plan's records and status from its
//! event history (`records`), where those records live and how a goal is read with its plans
//! (`store`), one planning step (`step`) with its review panel (`review`) and agent calls
//! (`specialists`), and what a person's ruling does (`decide`).

pub mod decide;
pub mod policy;
pub mod proposal;
pub mod records;
pub mod review;
pub mod specialists;
pub mod step;
pub mod store;

pub use decide::*;
pub use policy::*;
pub use proposal::*;
pub use records::*;
pub use specialists::PlanCall;
pub use specialists::{policy_gate, Ask, Called, Specialists};
pub use step::*;
pub use store::*;

#[cfg(test)]
mod tests;
