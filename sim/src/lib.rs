//! harn-sim: drives harn-core through crashes, restarts, missed wakes and torn writes.
//!
//! The simulator runs the same daemon core and the same driver as the real binary, over a
//! virtual clock ([`clock`]), a filesystem that loses unsynced data ([`fs`]) and a process
//! table whose children crash, hang and ignore signals ([`process`]). Every choice comes from
//! one seeded stream ([`entropy`]); invariants are checked after every step ([`checker`]).
#![forbid(unsafe_code)]

pub mod checker;
pub mod clock;
pub mod entropy;
pub mod fs;
pub mod goal;
mod liveness;
#[cfg(feature = "planted-bugs")]
pub mod lying;
mod notify;
pub mod options;
pub mod process;
pub mod runner;
mod schedule;
pub mod seams;
pub mod service;
pub mod trace;
pub mod work;
pub mod world;
