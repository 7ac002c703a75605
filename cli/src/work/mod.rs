//! `harn work …`: the durable work ledger on disk, and its verbs.

pub mod cmd;
pub mod store;
