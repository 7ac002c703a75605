//! harn-sim: drives harn-core through crashes, restarts, missed wakes and torn writes.
//!
//! One room per subsystem, as in `harn-core` and `harn`: [`harness`], [`service`], [`goal`] and
//! [`work`], each driving the core's own machines and drivers, the code the binary runs. Below
//! them, shared by all: a virtual clock ([`clock`]), a filesystem that loses unsynced data
//! ([`fs`]) and one seeded stream every choice comes from ([`entropy`]). Invariants are
//! checked after every step. [`worlds`] gives the work, goal and service worlds the traces,
//! replay and minimizing the harness world has.
#![forbid(unsafe_code)]

pub mod actions;
pub mod clock;
pub mod entropy;
pub mod fs;
pub mod goal;
pub mod harness;
#[cfg(feature = "planted-bugs")]
pub mod lying;
pub mod service;
pub mod work;
pub mod worlds;
