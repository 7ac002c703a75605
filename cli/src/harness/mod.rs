//! `harn harness …`: the harness daemon over real processes, signals, files and a socket.

pub mod config;
pub mod logs;
pub mod paths;
pub mod spawner;
