//! `harn work …`: the durable work ledger on disk, and its verbs.

pub mod agent_call;
pub mod cmd;
pub mod config;
pub mod run_cmd;
pub mod run_show;
pub mod runner;
pub mod store;
