//! Workflow runs: the JSON Lines protocol between the host and a workflow program
//! (`protocol`), the acceptance roll-up every proof carries (`acceptance`), and the run's
//! decisions: which attempt may start, its manifest, its proof and its inspection (`run`);
//! agent harnesses and how a call's ending is classified (`agent`); specialist teams and
//! how a request becomes a dispatch (`team`); host policy verdicts (`policy`) and the JSON
//! schema check of agent replies (`schema`); a work item's own git worktree (`workspace`).

pub mod acceptance;
pub mod adapter;
pub mod agent;
pub mod approval;
pub mod call;
pub mod containment;
pub mod policy;
pub mod protocol;
pub mod run;
pub mod schema;
pub mod team;
pub mod transcript;
pub mod workspace;
