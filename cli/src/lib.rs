//! harn (library half of the binary): binds harn-core to real files, processes and the
//! terminal, and carries the clap front end.

pub mod children;
pub mod cli;
pub mod dash;
pub mod example;
pub mod goal;
pub mod harness;
pub mod private;
pub mod readers;
pub mod real_clock;
pub mod real_fs;
pub mod sim_cmd;
pub mod work;
