//! `harn work …`: the durable work ledger on disk, and its verbs.

pub mod cmd;
pub mod run_cmd;
pub mod run_show;
pub mod runner;
pub mod store;
