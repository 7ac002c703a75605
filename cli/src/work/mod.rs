//! `harn work …`: the durable work ledger on disk, and its verbs.

pub mod acp_session;
pub mod agent_call;
pub mod approval_cmd;
pub mod approvals;
pub mod attempt;
pub mod calls;
pub mod cluster;
pub mod cmd;
pub mod config;
pub mod confine;
pub mod frozen;
pub mod hold;
pub mod host;
pub mod host_args;
pub mod inbox;
pub mod land;
pub mod local;
pub mod process;
pub mod progress;
pub mod prune;
pub mod remote;
pub mod repository;
pub mod run_cmd;
pub mod run_show;
pub mod show;
pub mod worktree;
