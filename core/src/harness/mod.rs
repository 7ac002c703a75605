//! The harness daemon's core: the lifecycle machine of one supervised process, the daemon
//! machine over all of them, and the one driver loop that executes their effects for the CLI
//! and the simulator alike.

pub mod daemon;
pub mod driver;
pub mod lifecycle;
pub mod logline;
pub mod readiness;
pub mod unit;
