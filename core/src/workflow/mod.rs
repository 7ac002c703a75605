//! Workflow runs: the JSON Lines protocol between the host and a workflow program
//! (`protocol`), and the acceptance roll-up every proof carries (`acceptance`).

pub mod acceptance;
pub mod protocol;
