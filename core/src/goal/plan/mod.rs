//! Bounded replanning, decided purely: the replanning policy a goal freezes (`policy`), the
//! planner's proposal and its host-side validation (`proposal`), and a plan's records and
//! status from its event history (`records`).

pub mod policy;
pub mod proposal;
pub mod records;

pub use policy::*;
pub use proposal::*;
pub use records::*;

#[cfg(test)]
mod tests;
