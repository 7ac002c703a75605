//! The harness daemon under faults: the real daemon core through the real driver
//! (`harn_core::harness::driver`) in a world of virtual processes (`world`, `process`,
//! `notify`, `seams`), what happens next (`schedule`), the invariant checker (`checker`), the
//! liveness phase (`liveness`), each seed's drawn options (`options`), traces (`trace`) and
//! running, replaying and minimizing seeds (`runner`).

pub mod checker;
mod liveness;
mod notify;
pub mod options;
pub mod process;
mod schedule;
pub mod seams;
pub mod seeds;
mod terminal;
pub mod trace;
pub mod world;
