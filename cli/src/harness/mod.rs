//! `harn harness …`: the harness daemon over real processes, signals, files and a socket.

pub mod attach;
pub mod client;
pub mod cmd;
pub mod config;
pub mod contain;
pub mod daemon;
pub mod detach;
pub mod fds;
pub mod fork;
pub mod ledger;
pub mod logs_cmd;
pub mod logview;
pub mod paths;
pub mod protocol;
pub mod readiness;
pub mod server;
pub mod signals;
pub mod spawner;
pub mod status;
pub mod subscribers;
pub mod terminal;
pub mod unit;
pub mod waiting;
