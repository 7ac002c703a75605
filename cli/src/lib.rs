//! harn (library half of the binary): binds harn-core to real files, processes and the
//! terminal, and carries the clap front end.

/// `println!` for text that may carry what agents, workflows and titles wrote: control
/// characters are shown, never sent to the terminal (see `harn_core::text`).
macro_rules! outln {
    () => { println!() };
    ($($arg:tt)*) => { println!("{}", harn_core::text::neutralize(&format!($($arg)*))) };
}

/// `eprintln!` with control characters shown, as [`outln`]. A failed write (a full disk under
/// a daemon's log, a closed terminal) loses the line, never the process: `eprintln!` would
/// panic, and a panic says nothing of the cause it was about to print.
macro_rules! errln {
    () => { errln!("") };
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let line = harn_core::text::neutralize(&format!($($arg)*)).into_owned();
        let _ = writeln!(std::io::stderr(), "{line}");
    }};
}

pub mod cli;
pub mod complete;
pub mod dash;
pub mod example;
pub mod examples;
pub mod exit;
pub mod fsck;
pub mod goal;
pub mod harness;
pub mod init;
pub mod input;
pub mod notify;
pub mod os;
pub mod paint;
pub mod service;
pub mod sim_cmd;
pub mod verb;
pub mod web;
pub mod work;
