//! `harn supervisor …`: goals on disk and their verbs, and the loop that ticks them.

pub mod cmd;
pub mod engine;
pub mod missions;
pub mod plan_cmd;
mod planning_run;
pub mod plans;
pub mod store;
