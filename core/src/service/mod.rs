//! The supervisor service: its records (`records`), one sweep over the enrolled goals
//! (`sweep`), the loop both hosts drive (`driver`), who resumes an approved run (`outlook`), the scheduler that says when to sweep (`wake`), and the watcher that beats the
//! heartbeat and drains on a stop (`watch`). All sans-IO: the CLI's daemon and the simulator
//! drive the same machines with `now`.

pub mod cache;
pub mod driver;
pub mod outlook;
pub mod records;
pub mod sweep;
pub mod wake;
pub mod watch;

pub use records::*;
pub use sweep::{sweep, SweepHost, Ticked};
